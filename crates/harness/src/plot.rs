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
//! Series take their colours in order from a fixed palette of dark, distinct colours
//! (`PALETTE`: Tableau 10 without its light colours), cycled.
//!
//! Every chart is drawn from the [`Report`] alone, so re-rendering a saved `report.json` gives the
//! same bytes.

use crate::format::{duration_ns, si};
use crate::query::{series_of, workloads};
use crate::report::{Report, Series};
use crate::HarnessError;
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
    points: Vec<(f64, f64)>,
    color: RGBAColor,
    dashed: bool,
    /// Mark every point with a dot.
    marks: bool,
}

/// One chart area: a frame, its lines, and optionally a shaded horizontal band.
struct Panel {
    caption: String,
    x_desc: String,
    y_desc: &'static str,
    x: Range<f64>,
    y: Range<f64>,
    y_label: fn(f64) -> String,
    /// A shaded band of y values with its legend entry.
    band: Option<(Range<f64>, &'static str)>,
    lines: Vec<Line>,
    legend: SeriesLabelPosition,
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

/// The x range of a thread axis: 1 to the largest thread count (at least 2, so it has a width).
fn thread_axis(series: &[&Series]) -> Range<f64> {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.threads))
        .max()
        .unwrap_or(1)
        .max(2);
    1.0..max as f64
}

fn throughput(report: &Report, workload: &str, series: &[&Series]) -> Panel {
    let x = thread_axis(series);
    let max_ops = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.ops_per_sec))
        .fold(1.0, f64::max);
    let y_top = max_ops * 1.15;
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
            let edge = (y_top / one.ops_per_sec).clamp(1.0, x.end);
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
            "{workload}: throughput vs threads ({} cpus, {} nodes)",
            report.machine.cpus, report.machine.nodes
        ),
        x_desc: "threads (backends); dashed: linear ideal from 1 thread".into(),
        y_desc: "operations per second",
        x,
        y: 0.0..y_top,
        y_label: si,
        band: None,
        lines,
        legend: SeriesLabelPosition::UpperLeft,
    }
}

fn efficiency(workload: &str, series: &[&Series]) -> Panel {
    let x = thread_axis(series);
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.efficiency))
        .fold(1.0, f64::max);
    let mut lines = vec![Line {
        label: Some("linear (1.0)".into()),
        points: vec![(x.start, 1.0), (x.end, 1.0)],
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
        x_desc: "threads (backends)".into(),
        y_desc: "ops/s / (threads x 1-thread ops/s)",
        x,
        y: 0.0..max * 1.2,
        y_label: |v| format!("{v:.1}"),
        band: Some((0.5..0.9, "preferable range 0.5-0.9")),
        lines,
        legend: SeriesLabelPosition::UpperRight,
    }
}

fn latency(workload: &str, series: &[&Series]) -> Panel {
    // The axis is log10 of nanoseconds; points with no samples (0 ns) are left out.
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
                    .map(|p| (p.threads as f64, (pick(&p.latency_ns) as f64).log10()))
                    .collect(),
                color: series_color(i),
                dashed,
                marks: true,
            });
        }
    }
    let ys = || lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let lo = ys().fold(f64::INFINITY, f64::min);
    let hi = ys().fold(f64::NEG_INFINITY, f64::max);
    let y = if lo.is_finite() {
        lo.floor()..(hi.ceil() + 0.5).max(lo.floor() + 1.0)
    } else {
        0.0..1.0
    };
    Panel {
        caption: format!("{workload}: operation latency vs threads (median run, sampled)"),
        x_desc: "threads (backends); solid: p50, dashed: p99".into(),
        y_desc: "latency (log scale)",
        x: thread_axis(series),
        y,
        y_label: |v| duration_ns(10f64.powf(v)),
        band: None,
        lines,
        legend: SeriesLabelPosition::UpperLeft,
    }
}

fn timeline(workload: &str, series: &[&Series]) -> Vec<Panel> {
    let interval = crate::team::TIMELINE_INTERVAL.as_secs_f64();
    let points = || series.iter().flat_map(|s| &s.points);
    let y_top = points()
        .flat_map(|p| p.timeline_ops_per_sec.iter().copied())
        .fold(1.0, f64::max)
        * 1.15;
    let longest = points()
        .map(|p| p.timeline_ops_per_sec.len())
        .max()
        .unwrap_or(0)
        .max(1);
    // One colour per thread count, the same in every panel.
    let mut thread_counts: Vec<usize> = points().map(|p| p.threads).collect();
    thread_counts.sort_unstable();
    thread_counts.dedup();
    series
        .iter()
        .map(|s| Panel {
            caption: format!("{workload} {}: throughput vs time", s.label()),
            x_desc: format!(
                "seconds into the measured phase (median run; each point one {} ms interval)",
                crate::team::TIMELINE_INTERVAL.as_millis()
            ),
            y_desc: "operations per second",
            x: 0.0..longest as f64 * interval,
            y: 0.0..y_top,
            y_label: si,
            band: None,
            lines: s
                .points
                .iter()
                .filter(|p| !p.timeline_ops_per_sec.is_empty())
                .map(|p| Line {
                    label: Some(match p.threads {
                        1 => "1 thread".to_string(),
                        n => format!("{n} threads"),
                    }),
                    points: p
                        .timeline_ops_per_sec
                        .iter()
                        .enumerate()
                        .map(|(k, &r)| ((k + 1) as f64 * interval, r))
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
        .build_cartesian_2d(p.x.clone(), p.y.clone())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(&p.x_desc)
        .x_label_formatter(&|v| {
            // Up to two decimals, without trailing zeros: 1, 1.5, 0.25.
            let text = format!("{v:.2}");
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        })
        .y_desc(p.y_desc)
        .y_label_formatter(&|v| (p.y_label)(*v))
        .draw()
        .map_err(plot_err)?;
    if let Some((band, label)) = &p.band {
        let fill = GREEN.mix(0.15).filled();
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(p.x.start, band.start), (p.x.end, band.end)],
                fill,
            )))
            .map_err(plot_err)?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], fill));
    }
    let mut any_label = p.band.is_some();
    for line in &p.lines {
        let style = line.color.stroke_width(if line.dashed { 1 } else { 2 });
        let drawn = if line.dashed {
            chart.draw_series(DashedLineSeries::new(line.points.clone(), 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(line.points.clone(), style))
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
                .draw_series(line.points.iter().map(|&xy| Circle::new(xy, 3, dot)))
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
