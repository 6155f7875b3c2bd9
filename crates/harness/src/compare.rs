//! Comparing two saved reports, A and B (`pglocks compare A B`): two machines, two commits, a
//! patch and its base, a real run and a simulated one.
//!
//! A point of A and a point of B are the same point when they have the same workload, preset,
//! implementation and thread count; nothing else is matched, so a series renamed by a knob of its
//! own (`pg92+fast_path=off`) is a different series. For every shared point the comparison keeps
//! both throughputs and their ratio B/A, and sorts the points by the size of the change,
//! |ln(B/A)|, largest first, so that a doubling and a halving rank alike. The points of a series
//! present in both get one verdict ([`Verdict`]) against a noise band: the runs of one machine
//! differ by a few per cent from one sweep to the next (more on a shared virtual machine), so a
//! change within ±[`DEFAULT_NOISE`] (3 %) is "the same". Series and thread counts present in
//! only one report are listed ([`Unmatched`]), never dropped.
//!
//! A report does not record the knobs of a run beyond its series' names, so two runs that differ
//! only by a `--set` compare as the same series; the comparison lists what the reports do record
//! that differs (machine, duration, repeats, pinning, version: [`Comparison::differences`]).
//!
//! Rendered as a terminal table, Markdown, CSV (one row per point of either report) or JSON (the
//! [`Comparison`] itself; a document of its own, not the report contract).

use crate::format::{change, si, times, wrap};
use crate::report::{Machine, Report, RunConfig, Series};
use crate::{Format, HarnessError};
use comfy_table::{presets, CellAlignment, Table};
use serde::Serialize;
use std::cmp::Ordering;

/// The noise band by default: a change of at most 3 % either way is "the same".
pub const DEFAULT_NOISE: f64 = 0.03;

/// What one report says about itself, for the comparison's header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// Where the report was read from, as given.
    pub name: String,
    /// The pglocks version that wrote it.
    pub pglocks_version: String,
    /// The machine it ran on.
    pub machine: Machine,
    /// Its run settings.
    pub config: RunConfig,
}

/// A point both reports measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SharedPoint {
    /// Workload name.
    pub workload: String,
    /// Preset (series) name.
    pub preset: String,
    /// Implementation.
    #[serde(rename = "impl")]
    pub impl_name: String,
    /// Threads.
    pub threads: usize,
    /// A's median throughput.
    pub a_ops_per_sec: f64,
    /// B's median throughput.
    pub b_ops_per_sec: f64,
    /// `b_ops_per_sec / a_ops_per_sec`; `None` when A measured nothing and B did (an infinite
    /// gain), 1 when neither did.
    pub ratio: Option<f64>,
}

/// The verdict on one series present in both reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every shared point within the noise band.
    Same,
    /// Some point faster in B beyond the band, none slower.
    Faster,
    /// Some point slower in B beyond the band, none faster.
    Slower,
    /// Some points faster and some slower beyond the band.
    Mixed,
}

/// One series present in both reports, over its shared points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesVerdict {
    /// Workload name.
    pub workload: String,
    /// Preset (series) name.
    pub preset: String,
    /// Implementation.
    #[serde(rename = "impl")]
    pub impl_name: String,
    /// Shared points.
    pub points: usize,
    /// Geometric mean of the finite ratios (`None` if there is none).
    pub mean_ratio: Option<f64>,
    /// Smallest finite ratio.
    pub min_ratio: Option<f64>,
    /// Largest finite ratio.
    pub max_ratio: Option<f64>,
    /// Points faster in B beyond the band.
    pub faster: usize,
    /// Points slower in B beyond the band.
    pub slower: usize,
    /// The verdict.
    pub verdict: Verdict,
}

/// Points of one series that only one report has: the whole series, or some thread counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmatched {
    /// Workload name.
    pub workload: String,
    /// Preset (series) name.
    pub preset: String,
    /// Implementation.
    #[serde(rename = "impl")]
    pub impl_name: String,
    /// The thread counts only this report has.
    pub threads: Vec<usize>,
    /// Whether the other report has no point of this series at all.
    pub whole_series: bool,
}

/// Two reports compared point by point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The first report (the base).
    pub a: Side,
    /// The second report (the one judged).
    pub b: Side,
    /// The noise band, as a fraction (0.03 is ±3 %).
    pub noise: f64,
    /// The shared points, largest change first.
    pub points: Vec<SharedPoint>,
    /// One verdict per series present in both, in A's order.
    pub series: Vec<SeriesVerdict>,
    /// What only A has, in A's order.
    pub only_in_a: Vec<Unmatched>,
    /// What only B has, in B's order.
    pub only_in_b: Vec<Unmatched>,
}

/// Reads a saved report: `path` is a report directory (its `report.json` is read) or a JSON file.
pub fn load(path: &std::path::Path) -> Result<Report, HarnessError> {
    if path.is_dir() {
        crate::load_report(&path.join(crate::files::JSON))
    } else {
        crate::load_report(path)
    }
}

fn side(name: &str, r: &Report) -> Side {
    Side {
        name: name.to_string(),
        pglocks_version: r.pglocks_version.clone(),
        machine: r.machine.clone(),
        config: r.config.clone(),
    }
}

fn same_series(x: &Series, y: &Series) -> bool {
    x.workload == y.workload && x.preset == y.preset && x.impl_name == y.impl_name
}

fn unmatched(s: &Series, threads: Vec<usize>, whole_series: bool) -> Unmatched {
    Unmatched {
        workload: s.workload.clone(),
        preset: s.preset.clone(),
        impl_name: s.impl_name.clone(),
        threads,
        whole_series,
    }
}

/// B/A, `None` for an infinite gain (A measured nothing, B something).
fn ratio(a: f64, b: f64) -> Option<f64> {
    if a > 0.0 {
        Some(b / a)
    } else if b > 0.0 {
        None
    } else {
        Some(1.0)
    }
}

/// The size of a change, for sorting: |ln ratio|, infinite for an infinite gain or a fall to 0.
fn size(ratio: Option<f64>) -> f64 {
    ratio.map_or(f64::INFINITY, |r| r.ln().abs())
}

impl Comparison {
    /// Compares `b` with `a` (named `a_name` and `b_name` in the output), with a noise band of
    /// `noise` (a fraction: 0.03 is ±3 %).
    pub fn new(a: &Report, a_name: &str, b: &Report, b_name: &str, noise: f64) -> Self {
        let mut points = Vec::new();
        let mut series = Vec::new();
        let mut only_in_a = Vec::new();
        let mut only_in_b = Vec::new();
        // Each series of B matches at most one of A (a report that names a series twice keeps
        // its second copy unmatched, and says so).
        let mut b_used = vec![false; b.series.len()];
        for sa in &a.series {
            let found = b
                .series
                .iter()
                .enumerate()
                .find(|(i, sb)| !b_used[*i] && same_series(sa, sb));
            let Some((i, sb)) = found else {
                only_in_a.push(unmatched(
                    sa,
                    sa.points.iter().map(|p| p.threads).collect(),
                    true,
                ));
                continue;
            };
            b_used[i] = true;
            let mut shared = Vec::new();
            for pa in &sa.points {
                if let Some(pb) = sb.points.iter().find(|pb| pb.threads == pa.threads) {
                    shared.push(SharedPoint {
                        workload: sa.workload.clone(),
                        preset: sa.preset.clone(),
                        impl_name: sa.impl_name.clone(),
                        threads: pa.threads,
                        a_ops_per_sec: pa.ops_per_sec,
                        b_ops_per_sec: pb.ops_per_sec,
                        ratio: ratio(pa.ops_per_sec, pb.ops_per_sec),
                    });
                }
            }
            let missing = |from: &Series, other: &Series| -> Vec<usize> {
                from.points
                    .iter()
                    .map(|p| p.threads)
                    .filter(|t| !other.points.iter().any(|q| q.threads == *t))
                    .collect()
            };
            let (in_a, in_b) = (missing(sa, sb), missing(sb, sa));
            if !in_a.is_empty() {
                only_in_a.push(unmatched(sa, in_a, shared.is_empty()));
            }
            if !in_b.is_empty() {
                only_in_b.push(unmatched(sb, in_b, shared.is_empty()));
            }
            if !shared.is_empty() {
                series.push(verdict(&shared, noise));
            }
            points.extend(shared);
        }
        for (sb, used) in b.series.iter().zip(b_used) {
            if !used {
                only_in_b.push(unmatched(
                    sb,
                    sb.points.iter().map(|p| p.threads).collect(),
                    true,
                ));
            }
        }
        // Largest change first; a stable sort keeps A's order among equal changes.
        points.sort_by(|x, y| {
            size(y.ratio)
                .partial_cmp(&size(x.ratio))
                .unwrap_or(Ordering::Equal)
        });
        Comparison {
            a: side(a_name, a),
            b: side(b_name, b),
            noise,
            points,
            series,
            only_in_a,
            only_in_b,
        }
    }

    /// The shared points where B is more than `fraction` (0.05 is 5 %) slower than A: B's
    /// throughput below A's × (1 − fraction).
    pub fn slower_than(&self, fraction: f64) -> Vec<&SharedPoint> {
        self.points
            .iter()
            .filter(|p| p.ratio.is_some_and(|r| r < 1.0 - fraction))
            .collect()
    }

    /// What the two reports record that differs, one `what: A's / B's` item each: machine,
    /// duration, repeats, pinning and pglocks version.
    pub fn differences(&self) -> Vec<String> {
        let (a, b) = (&self.a, &self.b);
        let mut out = Vec::new();
        let mut differ = |what: &str, x: String, y: String| {
            if x != y {
                out.push(format!("{what} {x} / {y}"));
            }
        };
        differ(
            "cpus",
            a.machine.cpus.to_string(),
            b.machine.cpus.to_string(),
        );
        differ(
            "NUMA nodes",
            a.machine.nodes.to_string(),
            b.machine.nodes.to_string(),
        );
        differ("cpu", a.machine.model.clone(), b.machine.model.clone());
        differ(
            "duration",
            format!("{} ms", a.config.duration_ms),
            format!("{} ms", b.config.duration_ms),
        );
        differ(
            "runs per point",
            a.config.repeat.to_string(),
            b.config.repeat.to_string(),
        );
        differ("pin", a.config.pin.clone(), b.config.pin.clone());
        differ(
            "pglocks",
            a.pglocks_version.clone(),
            b.pglocks_version.clone(),
        );
        out
    }
}

/// The verdict on one series from its shared points (all of one series, at least one).
fn verdict(points: &[SharedPoint], noise: f64) -> SeriesVerdict {
    let finite: Vec<f64> = points.iter().filter_map(|p| p.ratio).collect();
    // An infinite gain counts as faster.
    let faster = points
        .iter()
        .filter(|p| p.ratio.map_or(true, |r| r > 1.0 + noise))
        .count();
    let slower = finite.iter().filter(|&&r| r < 1.0 - noise).count();
    let mean_ratio = (!finite.is_empty())
        .then(|| (finite.iter().map(|r| r.ln()).sum::<f64>() / finite.len() as f64).exp());
    let p = &points[0];
    SeriesVerdict {
        workload: p.workload.clone(),
        preset: p.preset.clone(),
        impl_name: p.impl_name.clone(),
        points: points.len(),
        mean_ratio,
        min_ratio: finite.iter().copied().reduce(f64::min),
        max_ratio: finite.iter().copied().reduce(f64::max),
        faster,
        slower,
        verdict: match (faster, slower) {
            (0, 0) => Verdict::Same,
            (_, 0) => Verdict::Faster,
            (0, _) => Verdict::Slower,
            _ => Verdict::Mixed,
        },
    }
}

/// Renders `c` in `format`: the table and Markdown forms show the two reports, the shared points
/// largest change first, a verdict per series and what only one report has; CSV has one row per
/// point of either report; JSON is the [`Comparison`].
pub fn render(c: &Comparison, format: Format) -> Result<String, HarnessError> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(c)? + "\n",
        Format::Csv => csv(c)?,
        Format::Table => text(c, presets::UTF8_FULL_CONDENSED, "  "),
        Format::Markdown => text(c, presets::ASCII_MARKDOWN, "- "),
    })
}

/// How a series is named in the output: `preset/impl`, after its workload when the two reports
/// hold several workloads between them.
struct Namer {
    several: bool,
}

impl Namer {
    fn new(c: &Comparison) -> Self {
        let mut workloads: Vec<&str> = c
            .points
            .iter()
            .map(|p| &*p.workload)
            .chain(c.only_in_a.iter().chain(&c.only_in_b).map(|u| &*u.workload))
            .collect();
        workloads.sort_unstable();
        workloads.dedup();
        Namer {
            several: workloads.len() > 1,
        }
    }

    fn name(&self, workload: &str, preset: &str, impl_name: &str) -> String {
        if self.several {
            format!("{workload} {preset}/{impl_name}")
        } else {
            format!("{preset}/{impl_name}")
        }
    }
}

fn describe(side: &Side) -> String {
    let m = &side.machine;
    let c = &side.config;
    format!(
        "{}: {}, {} ms x {} runs, pin {}, {} cpus ({}), pglocks {}",
        side.name,
        c.workload,
        c.duration_ms,
        c.repeat,
        c.pin,
        m.cpus,
        m.model,
        side.pglocks_version
    )
}

fn threads_list(threads: &[usize]) -> String {
    let list: Vec<String> = threads.iter().map(usize::to_string).collect();
    let unit = if threads == [1] { "thread" } else { "threads" };
    format!("{} {unit}", list.join(", "))
}

/// One line on one series' verdict.
fn verdict_line(namer: &Namer, v: &SeriesVerdict, noise: f64) -> String {
    let name = namer.name(&v.workload, &v.preset, &v.impl_name);
    let points = if v.points == 1 {
        "1 point".to_string()
    } else {
        format!("{} points", v.points)
    };
    let range = match (v.min_ratio, v.max_ratio) {
        (Some(lo), Some(hi)) if v.points > 1 => format!("; {} to {}", times(lo), times(hi)),
        _ => String::new(),
    };
    let mean = v.mean_ratio.map_or_else(|| "-".into(), times);
    let band = format!("{:.0}%", noise * 100.0);
    match v.verdict {
        Verdict::Same => format!("{name}: the same within \u{b1}{band} ({points}{range})"),
        Verdict::Faster => {
            format!("{name}: B faster, {mean} A (geometric mean of {points}{range})")
        }
        Verdict::Slower => {
            format!("{name}: B slower, {mean} A (geometric mean of {points}{range})")
        }
        Verdict::Mixed => format!(
            "{name}: mixed, {} faster and {} slower beyond \u{b1}{band} ({points}{range})",
            v.faster, v.slower
        ),
    }
}

fn unmatched_line(namer: &Namer, u: &Unmatched) -> String {
    let name = namer.name(&u.workload, &u.preset, &u.impl_name);
    if u.whole_series {
        format!("{name} (the whole series: {})", threads_list(&u.threads))
    } else {
        format!("{name} at {}", threads_list(&u.threads))
    }
}

fn text(c: &Comparison, preset: &str, bullet: &str) -> String {
    let namer = Namer::new(c);
    let mut out = format!("A: {}\nB: {}\n", describe(&c.a), describe(&c.b));
    let differences = c.differences();
    if !differences.is_empty() {
        out += &wrap(
            &format!("A and B differ in: {}", differences.join("; ")),
            100,
            "  ",
        );
        out.push('\n');
    }
    let mut t = Table::new();
    t.load_preset(preset).set_header(vec![
        "series", "threads", "A ops/s", "B ops/s", "B/A", "change",
    ]);
    for p in &c.points {
        t.add_row(vec![
            namer.name(&p.workload, &p.preset, &p.impl_name),
            p.threads.to_string(),
            si(p.a_ops_per_sec),
            si(p.b_ops_per_sec),
            p.ratio.map_or_else(|| "inf".into(), |r| format!("{r:.3}")),
            p.ratio.map_or_else(|| "+inf".into(), change),
        ]);
    }
    for i in 1..=5 {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let unmatched_points = |u: &[Unmatched]| u.iter().map(|u| u.threads.len()).sum::<usize>();
    out += &format!(
        "\n{} points in both, largest change first; {} only in A, {} only in B\n",
        c.points.len(),
        unmatched_points(&c.only_in_a),
        unmatched_points(&c.only_in_b)
    );
    if !c.points.is_empty() {
        out += &format!("\n{t}\n");
    }
    if !c.series.is_empty() {
        out += &format!(
            "\nper series (the same: every point within \u{b1}{:.0}%):\n",
            c.noise * 100.0
        );
        for v in &c.series {
            out += &format!("{bullet}{}\n", verdict_line(&namer, v, c.noise));
        }
    }
    for (which, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        if !list.is_empty() {
            out += &format!("\nonly in {which}:\n");
            for u in list {
                out += &format!("{bullet}{}\n", unmatched_line(&namer, u));
            }
        }
    }
    out
}

fn csv(c: &Comparison) -> Result<String, HarnessError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "workload",
        "preset",
        "impl",
        "threads",
        "in",
        "a_ops_per_sec",
        "b_ops_per_sec",
        "ratio",
    ])?;
    for p in &c.points {
        w.write_record([
            p.workload.clone(),
            p.preset.clone(),
            p.impl_name.clone(),
            p.threads.to_string(),
            "both".into(),
            format!("{:.1}", p.a_ops_per_sec),
            format!("{:.1}", p.b_ops_per_sec),
            p.ratio.map_or_else(|| "inf".into(), |r| format!("{r:.4}")),
        ])?;
    }
    for (which, list) in [("a", &c.only_in_a), ("b", &c.only_in_b)] {
        for u in list {
            for t in &u.threads {
                w.write_record([
                    u.workload.as_str(),
                    &u.preset,
                    &u.impl_name,
                    &t.to_string(),
                    which,
                    "",
                    "",
                    "",
                ])?;
            }
        }
    }
    crate::format::csv_text(w)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::tests::point;

    /// A report of `series` on a 2-cpu machine, built from the document's required keys alone (so
    /// that it stays valid whatever optional keys the contract gains).
    pub(crate) fn report(series: Vec<Series>) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "pglocks_version": "0.1.0",
            "machine": {"cpus": 2, "nodes": 1, "model": "test cpu"},
            "config": {"workload": "w", "duration_ms": 100, "repeat": 1, "pin": "none"},
            "series": [],
        }))
        .expect("the core of the report contract");
        r.series = series;
        r
    }

    fn series(workload: &str, preset: &str, ops: &[(usize, f64)]) -> Series {
        Series {
            workload: workload.into(),
            preset: preset.into(),
            impl_name: "pg".into(),
            points: ops.iter().map(|&(t, o)| point(t, o)).collect(),
        }
    }

    #[test]
    fn shared_points_sorted_by_the_size_of_the_change() {
        let a = report(vec![
            series("w", "pg92", &[(1, 100.0), (2, 200.0), (4, 400.0)]),
            series("w", "pg18", &[(1, 100.0), (2, 200.0)]),
        ]);
        let b = report(vec![
            series("w", "pg18", &[(1, 101.0), (2, 202.0)]),
            series("w", "pg92", &[(1, 50.0), (2, 300.0), (4, 400.0)]),
        ]);
        let c = Comparison::new(&a, "a", &b, "b", DEFAULT_NOISE);
        let order: Vec<(&str, usize, f64)> = c
            .points
            .iter()
            .map(|p| (&*p.preset, p.threads, p.ratio.unwrap()))
            .collect();
        // A halving (ln 2) outranks a gain of 1.5 (ln 1.5); equal changes keep A's order.
        assert_eq!(
            order,
            [
                ("pg92", 1, 0.5),
                ("pg92", 2, 1.5),
                ("pg18", 1, 1.01),
                ("pg18", 2, 1.01),
                ("pg92", 4, 1.0),
            ]
        );
        assert!(c.only_in_a.is_empty() && c.only_in_b.is_empty());
        let verdicts: Vec<(&str, Verdict)> =
            c.series.iter().map(|v| (&*v.preset, v.verdict)).collect();
        assert_eq!(
            verdicts,
            [("pg92", Verdict::Mixed), ("pg18", Verdict::Same)]
        );
        let slow: Vec<usize> = c.slower_than(0.05).iter().map(|p| p.threads).collect();
        assert_eq!(slow, [1]);
        assert!(c.slower_than(0.6).is_empty());
    }

    #[test]
    fn verdicts_against_the_noise_band() {
        let a = report(vec![
            series("w", "up", &[(1, 100.0), (2, 100.0)]),
            series("w", "down", &[(1, 100.0), (2, 100.0)]),
            series("w", "flat", &[(1, 100.0), (2, 100.0)]),
        ]);
        let b = report(vec![
            series("w", "up", &[(1, 102.0), (2, 150.0)]),
            series("w", "down", &[(1, 96.0), (2, 80.0)]),
            series("w", "flat", &[(1, 97.0), (2, 103.0)]),
        ]);
        let c = Comparison::new(&a, "a", &b, "b", DEFAULT_NOISE);
        let v: Vec<Verdict> = c.series.iter().map(|v| v.verdict).collect();
        assert_eq!(v, [Verdict::Faster, Verdict::Slower, Verdict::Same]);
        let down = &c.series[1];
        assert_eq!((down.faster, down.slower), (0, 2));
        let mean = down.mean_ratio.unwrap();
        assert!((mean - (0.96f64 * 0.8).sqrt()).abs() < 1e-12, "{mean}");
        assert_eq!((down.min_ratio, down.max_ratio), (Some(0.8), Some(0.96)));
        // A wider band calls every series the same.
        let wide = Comparison::new(&a, "a", &b, "b", 0.6);
        assert!(wide.series.iter().all(|v| v.verdict == Verdict::Same));
    }

    #[test]
    fn what_only_one_report_has_is_listed() {
        let a = report(vec![
            series("w", "pg92", &[(1, 100.0), (2, 200.0), (4, 300.0)]),
            series("w", "pg91", &[(1, 100.0)]),
        ]);
        let b = report(vec![
            series("w", "pg92", &[(1, 100.0), (2, 200.0), (8, 300.0)]),
            series("v", "pg92", &[(1, 100.0)]),
        ]);
        let c = Comparison::new(&a, "a", &b, "b", DEFAULT_NOISE);
        assert_eq!(c.points.len(), 2);
        let list = |u: &[Unmatched]| -> Vec<(String, Vec<usize>, bool)> {
            u.iter()
                .map(|u| {
                    (
                        format!("{} {}", u.workload, u.preset),
                        u.threads.clone(),
                        u.whole_series,
                    )
                })
                .collect()
        };
        assert_eq!(
            list(&c.only_in_a),
            [
                ("w pg92".into(), vec![4], false),
                ("w pg91".into(), vec![1], true)
            ]
        );
        assert_eq!(
            list(&c.only_in_b),
            [
                ("w pg92".into(), vec![8], false),
                ("v pg92".into(), vec![1], true)
            ]
        );
        let text = render(&c, Format::Table).unwrap();
        for needle in [
            "2 points in both, largest change first; 2 only in A, 2 only in B",
            "only in A:\n  w pg92/pg at 4 threads\n  w pg91/pg (the whole series: 1 thread)",
            "only in B:\n  w pg92/pg at 8 threads\n  v pg92/pg (the whole series: 1 thread)",
            "w pg92/pg: the same within \u{b1}3% (2 points; 1.00\u{d7} to 1.00\u{d7})",
        ] {
            assert!(text.contains(needle), "{needle} missing in:\n{text}");
        }
        let csv = render(&c, Format::Csv).unwrap();
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows.len(), 1 + 2 + 4, "{csv}");
        assert_eq!(rows[3], "w,pg92,pg,4,a,,,");
        assert_eq!(rows[6], "v,pg92,pg,1,b,,,");
        let json: serde_json::Value =
            serde_json::from_str(&render(&c, Format::Json).unwrap()).unwrap();
        assert_eq!(json["only_in_b"][1]["whole_series"], true);
        assert_eq!(json["series"][0]["verdict"], "same");
        assert_eq!(json["points"][0]["impl"], "pg");
    }

    #[test]
    fn a_report_compared_with_itself_is_the_same_everywhere() {
        let a = report(vec![series("w", "pg18", &[(1, 123.0), (2, 0.0)])]);
        let c = Comparison::new(&a, "a", &a, "a", DEFAULT_NOISE);
        assert!(c.points.iter().all(|p| p.ratio == Some(1.0)));
        assert!(c.slower_than(0.0).is_empty());
        assert_eq!(c.series[0].verdict, Verdict::Same);
        assert!(c.differences().is_empty());
        // Nothing measured in A and something in B is an infinite gain, ranked first.
        let b = report(vec![series("w", "pg18", &[(1, 123.0), (2, 5.0)])]);
        let c = Comparison::new(&a, "a", &b, "b", DEFAULT_NOISE);
        assert_eq!(c.points[0].ratio, None);
        assert_eq!(c.series[0].verdict, Verdict::Faster);
        assert!(render(&c, Format::Table).unwrap().contains("+inf"));
    }
}
