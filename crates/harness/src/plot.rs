//! The report's SVG charts, four kinds, one file of each kind per workload: a report may hold the
//! series of several workloads (the default run measures `select-only` and `tpcb-like` side by
//! side), and two workloads never share an axis. Files are named `<kind>-<workload>.svg`
//! ([`ChartKind::file_name`]).
//!
//! - **throughput**: ops/s against threads, one line per series, each with its linear ideal (the
//!   1-thread throughput times the thread count) dashed in the same colour;
//! - **efficiency**: ops/s over the linear ideal against threads (1 = linear), with the seed
//!   talks' "preferable" scalability range 0.5–0.9 shaded;
//! - **latency**: the median run's sampled p50 (solid) and p99 (dashed) operation latency against
//!   threads, on a logarithmic axis;
//! - **timeline**: throughput against time in 100 ms intervals (like pgbench `-P`), one panel per
//!   series, one line per thread count in the panel, all panels on one throughput scale.
//!
//! A thread axis has a tick only at whole thread counts: a doubling sweep (1, 2, 4, 8 …) gets a
//! log2 axis with a tick at every doubling, any other sweep a linear axis with a tick at every
//! count or at a round step (`Axis::threads`). Series take their colours in order from a fixed
//! palette of dark, distinct colours (`PALETTE`: Tableau 10 without its light colours), cycled.
//!
//! Every chart is drawn from the [`Report`] alone, so re-rendering a saved `report.json` gives the
//! same bytes.

use crate::format::{duration_ns, si_short};
use crate::query::{series_of, thread_counts, workloads};
use crate::report::{Point, Report, Series};
use crate::HarnessError;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;
use std::path::Path;

/// A kind of chart; each workload of a report gets one file of every kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    /// Ops/s against threads with the linear ideal.
    Throughput,
    /// Efficiency against threads with the preferable band.
    Efficiency,
    /// p50 and p99 latency against threads.
    Latency,
    /// Ops/s against time, per series and thread count.
    Timeline,
}

impl ChartKind {
    /// Every kind, in the order the report shows them.
    pub const ALL: [ChartKind; 4] = [
        ChartKind::Throughput,
        ChartKind::Efficiency,
        ChartKind::Latency,
        ChartKind::Timeline,
    ];

    /// The kind's name, the first part of its file names.
    pub fn name(self) -> &'static str {
        match self {
            ChartKind::Throughput => "throughput",
            ChartKind::Efficiency => "efficiency",
            ChartKind::Latency => "latency",
            ChartKind::Timeline => "timeline",
        }
    }

    /// The file of this kind for `workload`: `<kind>-<workload>.svg`, with any character of the
    /// workload name other than a letter, digit, `-` or `_` replaced by `_`.
    pub fn file_name(self, workload: &str) -> String {
        let safe: String = workload
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{}-{safe}.svg", self.name())
    }
}

/// Writes every chart of `report` into `dir` and returns the file names, workload by workload,
/// each in [`ChartKind::ALL`]'s order.
pub fn write_charts(report: &Report, dir: &Path) -> Result<Vec<String>, HarnessError> {
    let mut names = Vec::new();
    for workload in workloads(report) {
        let series = series_of(report, workload);
        for kind in ChartKind::ALL {
            let name = kind.file_name(workload);
            let panels = match kind {
                ChartKind::Throughput => vec![throughput(report, workload, &series)],
                ChartKind::Efficiency => vec![efficiency(workload, &series)],
                ChartKind::Latency => vec![latency(workload, &series)],
                ChartKind::Timeline => timeline(workload, &series),
            };
            write_panels(&dir.join(&name), &panels)?;
            names.push(name);
        }
    }
    Ok(names)
}

/// One line of a chart.
struct Line {
    /// Legend entry; `None` keeps it out of the legend (an ideal drawn beside its series).
    label: Option<String>,
    /// The points in data units (threads, ops/s, ns …): the axes place them.
    points: Vec<(f64, f64)>,
    color: RGBAColor,
    dashed: bool,
    /// Mark every point with a dot.
    marks: bool,
}

/// One chart area: a frame, its lines, and optionally a shaded horizontal band.
struct Panel {
    caption: String,
    x: Axis,
    y: Axis,
    /// A shaded band of y values with its legend entry.
    band: Option<(Range<f64>, &'static str)>,
    lines: Vec<Line>,
    legend: SeriesLabelPosition,
}

/// How an axis places a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    Linear,
    /// For thread counts that double: every doubling is the same distance.
    Log2,
    /// For latencies: every decade is the same distance.
    Log10,
}

impl Scale {
    /// A value's position on the axis.
    fn place(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log2 => v.log2(),
            Scale::Log10 => v.log10(),
        }
    }

    /// The value at a position on the axis.
    fn value(self, at: f64) -> f64 {
        match self {
            Scale::Linear => at,
            Scale::Log2 => at.exp2(),
            Scale::Log10 => 10f64.powf(at),
        }
    }
}

/// One axis of a panel: its title, scale and extent, where its labelled ticks (with bold grid
/// lines) and light grid lines go, and how a tick's value is written. Ranges, ticks and grid
/// lines are positions ([`Scale::place`] of a value), so a logarithmic axis is drawn as a linear
/// one over the logarithms.
struct Axis {
    desc: String,
    scale: Scale,
    range: Range<f64>,
    ticks: Vec<f64>,
    grid: Vec<f64>,
    label: Box<dyn Fn(f64) -> String>,
}

/// The most labelled ticks on a thread axis, and on the other axes across and up a chart.
const MAX_THREAD_TICKS: usize = 16;
const MAX_X_TICKS: usize = 12;
const MAX_Y_TICKS: usize = 8;

/// Whether `counts` (increasing, distinct) is a doubling sweep: at least three counts, each a
/// power-of-two multiple of the one before (1, 2, 4, 8; also 1, 2, 8).
fn doubling(counts: &[usize]) -> bool {
    counts.len() >= 3
        && counts
            .windows(2)
            .all(|w| w[0] > 0 && w[1] % w[0] == 0 && (w[1] / w[0]).is_power_of_two())
}

/// `range` widened by 3% of its width at each end, so the points at its ends are drawn whole.
fn padded(range: Range<f64>) -> Range<f64> {
    let pad = (range.end - range.start) * 0.03;
    range.start - pad..range.end + pad
}

/// The smallest of 1, 2, 5, 10, 20, 50 … that splits `span` into at most `max` steps.
fn nice_step(span: f64, max: usize) -> f64 {
    let raw = (span / max as f64).max(f64::MIN_POSITIVE);
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|&step| step >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
}

impl Axis {
    /// A thread-count axis over `counts` (increasing, distinct): for a doubling sweep a log2
    /// axis with a tick at every doubling from the smallest count to the largest (1, 2, 4, 8 …);
    /// otherwise a linear axis with a tick at every integer, or at every multiple of a step of
    /// 2, 5, 10 … when there are more than [`MAX_THREAD_TICKS`] integers (the smallest count
    /// always has one). Never a tick between two integers.
    fn threads(counts: &[usize], desc: impl Into<String>) -> Axis {
        let lo = counts.first().copied().unwrap_or(1).max(1);
        let hi = counts.last().copied().unwrap_or(1).max(lo);
        let label: Box<dyn Fn(f64) -> String> = Box::new(|v| format!("{:.0}", v.round()));
        if doubling(counts) {
            let ticks = std::iter::successors(Some(lo), |t| t.checked_mul(2))
                .take_while(|&t| t <= hi)
                .map(|t| (t as f64).log2())
                .collect();
            return Axis {
                desc: desc.into(),
                scale: Scale::Log2,
                range: padded((lo as f64).log2()..(hi as f64).log2()),
                ticks,
                grid: Vec::new(),
                label,
            };
        }
        // At least two integers wide, so the axis has a width.
        let hi = hi.max(lo + 1);
        let step = nice_step((hi - lo) as f64, MAX_THREAD_TICKS)
            .round()
            .max(1.0) as usize;
        let mut ticks = vec![lo];
        // The multiples of the step above the smallest count, the first only if it is at
        // least half a step away from it.
        ticks.extend(
            (lo / step + 1..=hi / step)
                .map(|k| k * step)
                .filter(|&t| 2 * (t - lo) >= step),
        );
        // Light lines at the integers between the ticks, unless they would be a blur.
        let grid = if step > 1 && hi - lo <= 4 * MAX_THREAD_TICKS {
            (lo..=hi).filter(|t| !ticks.contains(t)).collect()
        } else {
            Vec::new()
        };
        let float = |v: Vec<usize>| v.into_iter().map(|t| t as f64).collect();
        Axis {
            desc: desc.into(),
            scale: Scale::Linear,
            range: padded(lo as f64..hi as f64),
            ticks: float(ticks),
            grid: float(grid),
            label,
        }
    }

    /// A linear axis over `range`, with ticks at the multiples of a step of 1, 2 or 5 times a
    /// power of ten (at most `max` of them) and light grid lines at fifths of a step. `label`
    /// writes a tick's value given the decimals the step needs.
    fn linear(
        range: Range<f64>,
        max: usize,
        desc: impl Into<String>,
        label: impl Fn(f64, usize) -> String + 'static,
    ) -> Axis {
        let step = nice_step(range.end - range.start, max);
        let decimals = (-step.log10().floor()).max(0.0) as usize;
        let multiples = |step: f64| -> Vec<f64> {
            let first = (range.start / step - 1e-9).ceil() as i64;
            let last = (range.end / step + 1e-9).floor() as i64;
            (first..=last).map(|k| k as f64 * step).collect()
        };
        let ticks = multiples(step);
        let grid = multiples(step / 5.0)
            .into_iter()
            .filter(|g| !ticks.iter().any(|t| (t - g).abs() < step * 1e-6))
            .collect();
        Axis {
            desc: desc.into(),
            scale: Scale::Linear,
            range,
            ticks,
            grid,
            label: Box::new(move |v| label(v, decimals)),
        }
    }

    /// A log10 axis from the decade below `lo` to half a decade above the one of `hi` (values,
    /// both positive; `None`: no data, one decade from 1), with ticks at every decade, also at
    /// its 2 and 5 multiples when it spans at most three decades, and light grid lines at the
    /// other multiples.
    fn log10(lo_hi: Option<(f64, f64)>, desc: impl Into<String>, label: fn(f64) -> String) -> Axis {
        let (lo, hi) = lo_hi.map_or((0.0, 0.5), |(lo, hi)| (lo.log10(), hi.log10()));
        let range = lo.floor()..(hi.ceil() + 0.5).max(lo.floor() + 1.0);
        Axis::log10_over(range, desc, label)
    }

    /// A log10 axis over `range` (in decades: `3.0..6.2` is 1 000 to 1.6 M), ticked as
    /// [`Axis::log10`] ticks.
    fn log10_over(range: Range<f64>, desc: impl Into<String>, label: fn(f64) -> String) -> Axis {
        let decades = range.start as i32..=range.end.floor() as i32;
        let few = range.end - range.start <= 3.5;
        let mut ticks = Vec::new();
        let mut grid = Vec::new();
        for d in decades {
            for m in 1..10 {
                let at = (f64::from(m) * 10f64.powi(d)).log10();
                if at > range.end {
                    break;
                }
                match m {
                    1 => ticks.push(at),
                    2 | 5 if few => ticks.push(at),
                    _ => grid.push(at),
                }
            }
        }
        Axis {
            desc: desc.into(),
            scale: Scale::Log10,
            range,
            ticks,
            grid,
            label: Box::new(label),
        }
    }

    /// The values at the two ends of the axis.
    fn ends(&self) -> (f64, f64) {
        (
            self.scale.value(self.range.start),
            self.scale.value(self.range.end),
        )
    }
}

/// An [`Axis`] as plotters' coordinate: linear over its positions, with the axis' own ticks
/// (bold key points) and grid lines (light key points). Its labels are written by
/// [`Axis::label`], given as the mesh's formatter.
struct AxisCoord {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
    grid: Vec<f64>,
}

impl From<&Axis> for AxisCoord {
    fn from(a: &Axis) -> Self {
        AxisCoord {
            linear: a.range.clone().into(),
            ticks: a.ticks.clone(),
            grid: a.grid.clone(),
        }
    }
}

impl Ranged for AxisCoord {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.grid.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

fn plot_err(e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Plot(e.to_string())
}

/// The series colours, in order, cycled: Tableau 10 without its two light colours (olive and
/// cyan), so every line reads on the white background and no two neighbours look alike.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4), // blue
    RGBColor(0xff, 0x7f, 0x0e), // orange
    RGBColor(0x2c, 0xa0, 0x2c), // green
    RGBColor(0xd6, 0x27, 0x28), // red
    RGBColor(0x94, 0x67, 0xbd), // purple
    RGBColor(0x8c, 0x56, 0x4b), // brown
    RGBColor(0xe3, 0x77, 0xc2), // pink
    RGBColor(0x7f, 0x7f, 0x7f), // grey
];

/// The colour of the `i`th series (or thread count, in a timeline).
fn series_color(i: usize) -> RGBAColor {
    PALETTE[i % PALETTE.len()].to_rgba()
}

/// A chart's thread axis: every thread count of its series ([`Axis::threads`]).
fn thread_axis(series: &[&Series], desc: &str) -> Axis {
    Axis::threads(&thread_counts(series.iter().copied()), desc)
}

/// An axis of operations per second from 0 to `top`, labelled `1.5M`.
fn ops_axis(top: f64) -> Axis {
    Axis::linear(0.0..top, MAX_Y_TICKS, "operations per second", |v, _| {
        si_short(v)
    })
}

/// "1 thread", "4 threads"; "1 node", "2 nodes".
fn count(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// Ops/s against threads. On a doubling sweep both axes are logarithmic, so that linear scaling
/// (each series' dashed ideal from its 1-thread point) is a straight line, as it is on the
/// linear axes of any other sweep; the ideal ends where it leaves the plot.
fn throughput(report: &Report, workload: &str, series: &[&Series]) -> Panel {
    let x = thread_axis(
        series,
        "threads (backends); dashed: linear ideal from 1 thread",
    );
    let max_threads = thread_counts(series.iter().copied())
        .last()
        .map_or(1.0, |&t| t as f64);
    let ops = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.ops_per_sec))
    };
    let max_ops = ops().fold(1.0, f64::max);
    let min_ops = ops().filter(|&o| o > 0.0).fold(max_ops, f64::min);
    let y = if x.scale == Scale::Linear {
        ops_axis(max_ops * 1.15)
    } else {
        Axis::log10_over(
            min_ops.log10().floor()..(max_ops * 1.5).log10(),
            "operations per second (log scale)",
            si_short,
        )
    };
    let y_top = y.ends().1;
    let mut lines = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let color = series_color(i);
        lines.push(Line {
            label: Some(s.label()),
            points: s
                .points
                .iter()
                .map(|p| (p.threads as f64, p.ops_per_sec))
                .collect(),
            color,
            dashed: false,
            marks: true,
        });
        if let Some(one) = s.points.iter().find(|p| p.threads == 1) {
            // The ideal stops where it leaves the chart, so it is drawn inside the frame.
            let edge = (y_top / one.ops_per_sec).clamp(1.0, max_threads);
            lines.push(Line {
                label: None,
                points: vec![(1.0, one.ops_per_sec), (edge, edge * one.ops_per_sec)],
                color,
                dashed: true,
                marks: false,
            });
        }
    }
    Panel {
        caption: format!(
            "{workload}: throughput vs threads ({} cpus, {})",
            report.machine.cpus,
            count(report.machine.nodes, "node")
        ),
        x,
        y,
        band: None,
        lines,
        legend: SeriesLabelPosition::UpperLeft,
    }
}

fn efficiency(workload: &str, series: &[&Series]) -> Panel {
    let x = thread_axis(series, "threads (backends)");
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.efficiency))
        .fold(1.0, f64::max);
    let (left, right) = x.ends();
    let mut lines = vec![Line {
        label: Some("linear (1.0)".into()),
        points: vec![(left, 1.0), (right, 1.0)],
        color: BLACK.to_rgba(),
        dashed: true,
        marks: false,
    }];
    // A series without a 1-thread point has no efficiency and no line.
    for (i, s) in series.iter().enumerate() {
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| p.efficiency.map(|e| (p.threads as f64, e)))
            .collect();
        if !points.is_empty() {
            lines.push(Line {
                label: Some(s.label()),
                points,
                color: series_color(i),
                dashed: false,
                marks: true,
            });
        }
    }
    Panel {
        caption: format!("{workload}: scaling efficiency vs threads"),
        x,
        y: Axis::linear(
            0.0..max * 1.2,
            MAX_Y_TICKS,
            "ops/s / (threads x 1-thread ops/s)",
            |v, decimals| format!("{v:.decimals$}"),
        ),
        band: Some((0.5..0.9, "preferable range 0.5-0.9")),
        lines,
        legend: SeriesLabelPosition::UpperRight,
    }
}

fn latency(workload: &str, series: &[&Series]) -> Panel {
    // Points with no samples (0 ns) have no place on the log axis and are left out.
    let mut lines = Vec::new();
    for (i, s) in series.iter().enumerate() {
        for (name, dashed, pick) in [
            (
                "p50",
                false,
                (|l| l.p50) as fn(&crate::report::Latency) -> u64,
            ),
            ("p99", true, |l| l.p99),
        ] {
            lines.push(Line {
                label: Some(format!("{} {name}", s.label())),
                points: s
                    .points
                    .iter()
                    .filter(|p| pick(&p.latency_ns) > 0)
                    .map(|p| (p.threads as f64, pick(&p.latency_ns) as f64))
                    .collect(),
                color: series_color(i),
                dashed,
                marks: true,
            });
        }
    }
    let ys = || lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let lo_hi = ys().reduce(f64::min).zip(ys().reduce(f64::max));
    Panel {
        caption: format!("{workload}: operation latency vs threads (median run, sampled)"),
        x: thread_axis(series, "threads (backends); solid: p50, dashed: p99"),
        y: Axis::log10(lo_hi, "latency (log scale)", duration_ns),
        band: None,
        lines,
        legend: SeriesLabelPosition::UpperLeft,
    }
}

fn timeline(workload: &str, series: &[&Series]) -> Vec<Panel> {
    // Each point's own interval: 100 ms, or longer for a run past two minutes.
    let interval_of = |p: &Point| {
        p.timeline_interval_ms
            .map_or(crate::team::TIMELINE_INTERVAL.as_secs_f64(), |ms| {
                ms as f64 / 1000.0
            })
    };
    let points = || series.iter().flat_map(|s| &s.points);
    let y_top = points()
        .flat_map(|p| p.timeline_ops_per_sec.iter().copied())
        .fold(1.0, f64::max)
        * 1.15;
    let longest = points()
        .map(|p| p.timeline_ops_per_sec.len() as f64 * interval_of(p))
        .fold(0.0, f64::max)
        .max(crate::team::TIMELINE_INTERVAL.as_secs_f64());
    let widths: Vec<u64> = points()
        .filter(|p| !p.timeline_ops_per_sec.is_empty())
        .map(|p| (interval_of(p) * 1000.0).round() as u64)
        .collect();
    let width_text = match (widths.iter().min(), widths.iter().max()) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi} ms"),
        (Some(ms), _) => format!("{ms} ms"),
        _ => format!("{} ms", crate::team::TIMELINE_INTERVAL.as_millis()),
    };
    // One colour per thread count, the same in every panel.
    let thread_counts = thread_counts(series.iter().copied());
    series
        .iter()
        .map(|s| Panel {
            caption: format!("{workload} {}: throughput vs time", s.label()),
            x: Axis::linear(
                0.0..longest,
                MAX_X_TICKS,
                format!(
                    "seconds into the measured phase (median run; each point one {width_text} interval)"
                ),
                |v, decimals| format!("{v:.decimals$}"),
            ),
            y: ops_axis(y_top),
            band: None,
            lines: s
                .points
                .iter()
                .filter(|p| !p.timeline_ops_per_sec.is_empty())
                .map(|p| Line {
                    label: Some(count(p.threads, "thread")),
                    points: p
                        .timeline_ops_per_sec
                        .iter()
                        .enumerate()
                        .map(|(k, &r)| ((k + 1) as f64 * interval_of(p), r))
                        .collect(),
                    color: series_color(
                        thread_counts.binary_search(&p.threads).unwrap_or_default(),
                    ),
                    dashed: false,
                    marks: false,
                })
                .collect(),
            legend: SeriesLabelPosition::LowerRight,
        })
        .collect()
}

/// Writes `panels` stacked in one SVG file.
fn write_panels(path: &Path, panels: &[Panel]) -> Result<(), HarnessError> {
    let height = if panels.len() == 1 {
        600
    } else {
        340 * panels.len() as u32
    };
    let root = SVGBackend::new(path, (960, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    for (area, panel) in root
        .split_evenly((panels.len().max(1), 1))
        .iter()
        .zip(panels)
    {
        draw_panel(area, panel)?;
    }
    root.present().map_err(plot_err)
}

fn draw_panel(area: &DrawingArea<SVGBackend<'_>, Shift>, p: &Panel) -> Result<(), HarnessError> {
    let mut chart = ChartBuilder::on(area)
        .caption(&p.caption, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(AxisCoord::from(&p.x), AxisCoord::from(&p.y))
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(&p.x.desc)
        .x_label_formatter(&|&at| (p.x.label)(p.x.scale.value(at)))
        .y_desc(&p.y.desc)
        .y_label_formatter(&|&at| (p.y.label)(p.y.scale.value(at)))
        .draw()
        .map_err(plot_err)?;
    let place = |&(x, y): &(f64, f64)| (p.x.scale.place(x), p.y.scale.place(y));
    if let Some((band, label)) = &p.band {
        let fill = GREEN.mix(0.15).filled();
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [
                    (p.x.range.start, p.y.scale.place(band.start)),
                    (p.x.range.end, p.y.scale.place(band.end)),
                ],
                fill,
            )))
            .map_err(plot_err)?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], fill));
    }
    let mut any_label = p.band.is_some();
    for line in &p.lines {
        let points: Vec<(f64, f64)> = line.points.iter().map(place).collect();
        let style = line.color.stroke_width(if line.dashed { 1 } else { 2 });
        let drawn = if line.dashed {
            chart.draw_series(DashedLineSeries::new(points.clone(), 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(points.clone(), style))
        }
        .map_err(plot_err)?;
        if let Some(label) = &line.label {
            any_label = true;
            drawn
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        }
        if line.marks {
            let dot = line.color.filled();
            chart
                .draw_series(points.iter().map(|&xy| Circle::new(xy, 3, dot)))
                .map_err(plot_err)?;
        }
    }
    if any_label {
        chart
            .configure_series_labels()
            .position(p.legend.clone())
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The labels of an axis' ticks.
    fn labels(a: &Axis) -> Vec<String> {
        a.ticks
            .iter()
            .map(|&at| (a.label)(a.scale.value(at)))
            .collect()
    }

    #[test]
    fn thread_axes_have_integer_ticks_only() {
        let cases: [(&[usize], Scale, &[&str]); 9] = [
            (&[1, 2, 3, 4], Scale::Linear, &["1", "2", "3", "4"]),
            (&[1, 2, 4, 8, 16], Scale::Log2, &["1", "2", "4", "8", "16"]),
            (&[1, 2, 8], Scale::Log2, &["1", "2", "4", "8"]),
            (&[2, 4, 8], Scale::Log2, &["2", "4", "8"]),
            (&[1, 2], Scale::Linear, &["1", "2"]),
            (&[1, 4], Scale::Linear, &["1", "2", "3", "4"]),
            (&[3], Scale::Linear, &["3", "4"]),
            (
                &[1, 3, 5, 7],
                Scale::Linear,
                &["1", "2", "3", "4", "5", "6", "7"],
            ),
            (
                &[1, 100],
                Scale::Linear,
                &[
                    "1", "10", "20", "30", "40", "50", "60", "70", "80", "90", "100",
                ],
            ),
        ];
        for (counts, scale, want) in cases {
            let a = Axis::threads(counts, "threads");
            assert_eq!(a.scale, scale, "{counts:?}");
            assert_eq!(labels(&a), want, "{counts:?}");
            // Every tick and grid line is at an integer and inside the frame.
            for &at in a.ticks.iter().chain(&a.grid) {
                let v = a.scale.value(at);
                assert!((v - v.round()).abs() < 1e-9, "{counts:?}: {v}");
                assert!(a.range.contains(&at), "{counts:?}: {at} in {:?}", a.range);
            }
        }
        // A long sweep of every count gets a step, and the 1-thread tick.
        let all: Vec<usize> = (1..=64).collect();
        let a = Axis::threads(&all, "threads");
        assert_eq!(labels(&a)[..3], ["1", "5", "10"]);
        assert!(a.ticks.len() <= MAX_THREAD_TICKS + 1);
    }

    #[test]
    fn value_axes_tick_at_round_numbers() {
        let ops = ops_axis(46.0e6);
        assert_eq!(labels(&ops), ["0", "10M", "20M", "30M", "40M"]);
        let eff = Axis::linear(0.0..1.2, MAX_Y_TICKS, "efficiency", |v, d| {
            format!("{v:.d$}")
        });
        assert_eq!(
            labels(&eff),
            ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0", "1.2"]
        );
        let lat = Axis::log10(Some((40.0, 2.0e5)), "latency", duration_ns);
        assert_eq!(
            labels(&lat),
            ["10ns", "100ns", "1us", "10us", "100us", "1ms"]
        );
        let near = Axis::log10(Some((40.0, 900.0)), "latency", duration_ns);
        assert_eq!(
            labels(&near),
            ["10ns", "20ns", "50ns", "100ns", "200ns", "500ns", "1us", "2us"]
        );
    }

    /// The contrast of a colour against white (WCAG's ratio of relative luminances).
    fn contrast_on_white(c: RGBColor) -> f64 {
        let linear = |v: u8| {
            let v = f64::from(v) / 255.0;
            if v <= 0.04045 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        let l = 0.2126 * linear(c.0) + 0.7152 * linear(c.1) + 0.0722 * linear(c.2);
        1.05 / (l + 0.05)
    }

    #[test]
    fn series_colours_read_on_white_and_differ() {
        for c in PALETTE {
            assert!(contrast_on_white(c) >= 2.5, "{c:?}");
        }
        // What the palette leaves out would not pass: yellow, olive, pale cyan, light pink.
        for c in [
            RGBColor(0xff, 0xe1, 0x19),
            RGBColor(0xbc, 0xbd, 0x22),
            RGBColor(0x17, 0xbe, 0xcf),
            RGBColor(0xff, 0x9d, 0xa7),
        ] {
            assert!(contrast_on_white(c) < 2.5, "{c:?}");
        }
        for (i, a) in PALETTE.iter().enumerate() {
            for b in &PALETTE[i + 1..] {
                let d = |x: u8, y: u8| (i32::from(x) - i32::from(y)).abs();
                assert!(
                    d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2) >= 100,
                    "{a:?} {b:?}"
                );
            }
        }
        assert_eq!(series_color(PALETTE.len()), series_color(0), "cycled");
    }
}
