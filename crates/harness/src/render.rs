//! Rendering a [`Report`]: a terminal table, Markdown, CSV and JSON. Every format is computed
//! from the report alone, so `pglocks report DIR` renders a saved run exactly as it was printed.
//!
//! The table and Markdown forms show the main table (one row per point) and, as [`Show`] asks,
//! the wait events and the metrics, which run to hundreds of rows for a sweep of the macro
//! workloads; [`brief`] is the narrow first look the default run prints.

use crate::format::{machine, metric_value, point_cells, si3, wait_ms, wrap};
use crate::query::{any_ideal, named_workloads, thread_counts, workload_list};
use crate::report::{Report, Series};
use crate::HarnessError;
use comfy_table::{presets, CellAlignment, Table};
use std::fmt::Write as _;

/// Output formats of `pglocks run --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A table for a terminal.
    Table,
    /// The JSON document (the contract of [`crate::report`]).
    Json,
    /// One row per point (`ideal_ops_per_sec` and `ideal_fraction`, the last two columns, are
    /// empty for points without an ideal).
    Csv,
    /// Markdown tables, for issues and notes.
    Markdown,
}

impl std::str::FromStr for Format {
    type Err = HarnessError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            "markdown" | "md" => Ok(Format::Markdown),
            _ => Err(HarnessError::BadFormat(s.to_string())),
        }
    }
}

/// Which tables a table or Markdown rendering shows after the main one (JSON and CSV always
/// hold everything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Show {
    /// Wait events and `LWLOCK_STATS` counters per point.
    pub waits: bool,
    /// The workloads' metrics per point.
    pub metrics: bool,
}

impl Show {
    /// Every table.
    pub const ALL: Show = Show {
        waits: true,
        metrics: true,
    };
    /// The main table alone.
    pub const MAIN: Show = Show {
        waits: false,
        metrics: false,
    };
}

impl Show {
    /// The tables a table or Markdown rendering of `report` leaves out with `self`: `"waits"`
    /// and `"metrics"`, each only when some point has a row for it (for a hint that names the
    /// flag showing them).
    pub fn hidden(self, report: &Report) -> Vec<&'static str> {
        let points = || report.series.iter().flat_map(|s| &s.points);
        let mut out = Vec::new();
        if !self.waits && points().any(|p| !p.waits.is_empty()) {
            out.push("waits");
        }
        if !self.metrics && points().any(|p| !p.metrics.is_empty()) {
            out.push("metrics");
        }
        out
    }
}

/// Renders `report` in `format`, every table.
pub fn render(report: &Report, format: Format) -> Result<String, HarnessError> {
    render_with(report, format, Show::ALL)
}

/// Renders `report` in `format`, with the tables `show` asks for.
pub fn render_with(report: &Report, format: Format, show: Show) -> Result<String, HarnessError> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(report)? + "\n",
        Format::Csv => csv(report)?,
        Format::Table => tables(report, presets::UTF8_FULL_CONDENSED, show),
        Format::Markdown => tables(report, presets::ASCII_MARKDOWN, show),
    })
}

fn tables(report: &Report, preset: &str, show: Show) -> String {
    let name = series_namer(report);
    // The ideal columns appear only when some point has an ideal.
    let with_ideal = any_ideal(&report.series);
    let mut header = vec!["series", "threads", "ops/s", "ns/op/thread", "efficiency"];
    if with_ideal {
        header.extend(["ideal ops/s", "of ideal"]);
    }
    header.extend(["p50 ns", "p99 ns", "p99.9 ns", "95% CI", "runs ops/s"]);
    let numeric_columns = header.len() - 2;
    let mut t = Table::new();
    t.load_preset(preset).set_header(header);
    let mut waits = Table::new();
    waits.load_preset(preset).set_header(vec![
        "series",
        "threads",
        "wait event / tranche",
        "mode / LWLOCK_STATS",
        "count",
        "wait ms",
    ]);
    let mut metrics = Table::new();
    metrics
        .load_preset(preset)
        .set_header(vec!["series", "threads", "metric", "value"]);
    let mut any_waits = false;
    let mut any_metrics = false;
    for s in &report.series {
        for p in &s.points {
            let l = &p.latency_ns;
            t.add_row(point_cells(name(s), p, with_ideal, &[l.p50, l.p99, l.p999]));
            for w in &p.waits {
                any_waits = true;
                waits.add_row(vec![
                    name(s),
                    p.threads.to_string(),
                    w.lock.clone(),
                    w.mode.clone(),
                    w.count.to_string(),
                    wait_ms(w.wait_ns),
                ]);
            }
            for m in &p.metrics {
                any_metrics = true;
                metrics.add_row(vec![
                    name(s),
                    p.threads.to_string(),
                    m.name.clone(),
                    metric_value(m.value),
                ]);
            }
        }
    }
    // Every column from threads to p99.9 ns is a number.
    for i in 1..=numeric_columns {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    for i in [1, 3] {
        if let Some(c) = metrics.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = format!("{}\n\n{t}\n", title(report));
    if any_waits && show.waits {
        out += &format!(
            "\nwait events and LWLOCK_STATS counters (median run of each point)\n\n{waits}\n"
        );
    }
    if any_metrics && show.metrics {
        out += &format!("\nmetrics (median run of each point)\n\n{metrics}\n");
    }
    out
}

/// How a report's tables name a series: `preset/impl`, after its workload in a report of several
/// workloads.
fn series_namer(report: &Report) -> impl Fn(&Series) -> String {
    let several = named_workloads(report).len() > 1;
    move |s: &Series| {
        if several {
            format!("{} {}", s.workload, s.label())
        } else {
            s.label()
        }
    }
}

/// The line above a report's tables: its workloads, runs, pinning and machine.
/// What a rendering's title starts with when Ctrl-C cut the run short.
fn interrupted_mark(report: &Report) -> &'static str {
    if report.interrupted {
        "INTERRUPTED (the points measured before Ctrl-C) | "
    } else {
        ""
    }
}

fn title(report: &Report) -> String {
    let c = &report.config;
    let m = &report.machine;
    format!(
        "{}{} {} | {} ms x {} runs (median) | pin {} | {}",
        interrupted_mark(report),
        if named_workloads(report).len() > 1 {
            "workloads"
        } else {
            "workload"
        },
        workload_list(report),
        c.duration_ms,
        c.repeat,
        c.pin,
        machine(m)
    )
}

/// The width [`brief`] keeps to: a terminal's narrowest common width.
pub const BRIEF_WIDTH: usize = 80;

/// The thread counts [`brief`] shows: the smallest (1 in a sweep that starts there), the
/// largest with a CPU per thread and the largest measured.
fn brief_thread_counts(report: &Report) -> Vec<usize> {
    let all = thread_counts(&report.series);
    let cpus = report.machine.cpus.max(1);
    let mut keep: Vec<usize> = [
        all.first().copied(),
        all.iter().copied().filter(|&t| t <= cpus).max(),
        all.last().copied(),
    ]
    .into_iter()
    .flatten()
    .collect();
    keep.dedup();
    keep
}

/// One point of a curve table: ops/s, and the 95 % confidence interval of its runs.
type Cell = Option<(f64, Option<f64>)>;

/// Each series' throughput by thread count: the thread counts any series measured, in order,
/// and a row per series (its label, then its point at each count, if it measured it). A series
/// is named by its preset, or `preset/impl` when the report has several implementations, after
/// its workload when it has several.
fn curve_rows(report: &Report) -> (Vec<usize>, Vec<(String, Vec<Cell>)>) {
    let mut counts: Vec<usize> = report
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.threads))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    let several_impls = report
        .series
        .iter()
        .any(|s| s.impl_name != report.series[0].impl_name);
    let several_workloads = named_workloads(report).len() > 1;
    let rows = report
        .series
        .iter()
        .map(|s| {
            let mut label = if several_impls {
                format!("{}/{}", s.preset, s.impl_name)
            } else {
                s.preset.clone()
            };
            if several_workloads {
                label = format!("{} {label}", s.workload);
            }
            let cells = counts
                .iter()
                .map(|c| {
                    let p = s.points.iter().find(|p| p.threads == *c)?;
                    Some((p.ops_per_sec, crate::report::ci95(&p.runs_ops_per_sec)))
                })
                .collect();
            (label, cells)
        })
        .collect();
    (counts, rows)
}

/// The curves as one Markdown table, ops/s by series (rows) and threads (columns), three
/// significant digits: the figures a document quotes (`pglocks reproduce`'s `curves.md`).
pub fn curves_markdown(report: &Report) -> String {
    let (counts, rows) = curve_rows(report);
    let mut t = String::from("| ops/s | ");
    for c in &counts {
        let _ = write!(t, "{c} | ");
    }
    t.truncate(t.trim_end().len());
    t.push_str("\n|---|");
    t.push_str(&"---:|".repeat(counts.len()));
    t.push('\n');
    for (label, cells) in rows {
        let _ = write!(t, "| {label} |");
        for cell in cells {
            match cell {
                Some((x, _)) => {
                    let _ = write!(t, " {} |", si3(x));
                }
                None => t.push_str(" |"),
            }
        }
        t.push('\n');
    }
    t
}

/// The curves as a terminal table, a row per series and a column per thread count (of
/// [`BRIEF_WIDTH`] columns or less for a handful of counts): ops/s to three digits, and with
/// `ci` the 95 % confidence interval of each point's runs beside it.
pub fn curves(report: &Report, ci: bool) -> String {
    curves_table(report, ci, None)
}

/// [`curves`] at the thread counts `only` names (all, if `None`).
fn curves_table(report: &Report, ci: bool, only: Option<&[usize]>) -> String {
    let (all, rows) = curve_rows(report);
    let shown: Vec<bool> = all
        .iter()
        .map(|c| only.map_or(true, |o| o.contains(c)))
        .collect();
    let counts: Vec<usize> = all
        .iter()
        .zip(&shown)
        .filter(|p| *p.1)
        .map(|p| *p.0)
        .collect();
    let mut t = Table::new();
    let mut header = vec![if ci { "ops/s, 95% CI" } else { "ops/s" }.to_string()];
    header.extend(counts.iter().map(|c| format!("{c} thr")));
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_header(header);
    for (label, cells) in rows {
        let mut row = vec![label];
        let cells = cells.into_iter().zip(&shown).filter(|p| *p.1).map(|p| p.0);
        row.extend(cells.map(|c| match c {
            None => "-".into(),
            Some((x, Some(w))) if ci => format!("{} \u{b1}{:.0}%", si3(x), w * 100.0),
            Some((x, _)) => si3(x),
        }));
        t.add_row(row);
    }
    for i in 1..=counts.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string() + "\n"
}

/// The line above the default run's table: the workloads, the runs a point had (more where
/// a budget bought them), and the machine.
pub fn brief_title(report: &Report) -> String {
    let c = &report.config;
    let most = report
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.runs_ops_per_sec.len()))
        .max()
        .unwrap_or(0);
    let more = if most > c.repeat as usize {
        format!(", up to {most} where they disagreed")
    } else {
        String::new()
    };
    format!(
        "{}{}: {} runs of {} ms a point{more} (median); {}",
        interrupted_mark(report),
        workload_list(report),
        c.repeat,
        c.duration_ms,
        machine(&report.machine)
    )
}

/// A first look at `report` that fits a terminal of [`BRIEF_WIDTH`] columns: a short title
/// (workloads, runs, machine), then a row per series with its median ops/s and the 95 %
/// confidence interval of its runs at three thread counts at most (the smallest, the largest
/// with a CPU per thread, the largest; on 2 CPUs with threads 1, 2, 4 that is every point), with
/// a line that says which were left out. What the default run prints; [`render`] has every
/// column and point.
pub fn brief(report: &Report) -> String {
    let counts = brief_thread_counts(report);
    let table = curves_table(report, true, Some(&counts));
    let mut out = wrap(&brief_title(report), BRIEF_WIDTH, "  ") + "\n\n" + &table;
    let mut left_out: Vec<usize> = thread_counts(&report.series)
        .into_iter()
        .filter(|t| !counts.contains(t))
        .collect();
    if !left_out.is_empty() {
        left_out.dedup();
        let list: Vec<String> = left_out.iter().map(usize::to_string).collect();
        out += &wrap(
            &format!("(not shown: the points at {} threads)", list.join(", ")),
            BRIEF_WIDTH,
            " ",
        );
        out.push('\n');
    }
    out
}

fn csv(report: &Report) -> Result<String, HarnessError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "workload",
        "preset",
        "impl",
        "threads",
        "ops_per_sec",
        "ns_per_op",
        "efficiency",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "p999_ns",
        "max_ns",
        "runs_ops_per_sec",
        "ideal_ops_per_sec",
        "ideal_fraction",
    ])?;
    for s in &report.series {
        for p in &s.points {
            let runs: Vec<String> = p
                .runs_ops_per_sec
                .iter()
                .map(|r| format!("{r:.1}"))
                .collect();
            let l = &p.latency_ns;
            w.write_record([
                s.workload.clone(),
                s.preset.clone(),
                s.impl_name.clone(),
                p.threads.to_string(),
                format!("{:.1}", p.ops_per_sec),
                format!("{:.3}", p.ns_per_op()),
                p.efficiency.map_or(String::new(), |e| format!("{e:.4}")),
                l.p50.to_string(),
                l.p90.to_string(),
                l.p99.to_string(),
                l.p999.to_string(),
                l.max.to_string(),
                runs.join(";"),
                p.ideal_ops_per_sec
                    .map_or(String::new(), |i| format!("{i:.1}")),
                p.ideal_fraction()
                    .map_or(String::new(), |f| format!("{f:.4}")),
            ])?;
        }
    }
    crate::format::csv_text(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::point;
    use crate::report::{Metric, Point};

    #[test]
    fn format_names() {
        assert_eq!("json".parse::<Format>().unwrap(), Format::Json);
        let e = "yaml".parse::<Format>().unwrap_err().to_string();
        assert!(e.contains("table, json, csv, markdown"), "{e}");
    }

    fn report(points: Vec<Point>) -> Report {
        use crate::report::{Machine, RunConfig, Series};
        Report {
            pglocks_version: "0.1.0".into(),
            machine: Machine {
                cpus: 4,
                nodes: 1,
                model: "test cpu".into(),
                simulated: None,
            },
            config: RunConfig {
                workload: "wal-commit".into(),
                duration_ms: 100,
                until: None,
                repeat: 1,
                pin: "none".into(),
            },
            series: vec![Series {
                workload: "wal-commit".into(),
                preset: "pg17".into(),
                impl_name: "pg".into(),
                points,
            }],
            interrupted: false,
        }
    }

    #[test]
    fn the_brief_table_fits_80_columns_and_says_what_it_leaves_out() {
        use crate::compare::tests::report;
        let series = |workload: &str, preset: &str| Series {
            workload: workload.into(),
            preset: preset.into(),
            impl_name: "pg".into(),
            points: [1, 2, 4, 8, 16]
                .iter()
                .map(|&t| {
                    let mut p = point(t, 1_234_567.0 * t as f64);
                    p.runs_ops_per_sec =
                        vec![p.ops_per_sec * 0.9, p.ops_per_sec, p.ops_per_sec * 1.2];
                    p.efficiency = Some(0.5);
                    p.latency_ns.p99 = 12_345_678;
                    p
                })
                .collect(),
        };
        let mut r = report(vec![
            series("select-only", "pg82uis"),
            series("tpcb-like", "pg82uis"),
        ]);
        r.machine.cpus = 4;
        r.machine.model = "AMD EPYC 7B13 64-Core Processor with a long model name".into();
        let text = brief(&r);
        for line in text.lines() {
            assert!(line.chars().count() <= BRIEF_WIDTH, "{line}");
        }
        // 1, 4 (one thread per CPU) and 16 threads; 2 and 8 are left out, and said to be.
        let rows: Vec<&str> = text.lines().filter(|l| l.contains("pg82uis")).collect();
        assert_eq!(rows.len(), 2, "{text}");
        let header = text.lines().find(|l| l.contains("95% CI")).unwrap();
        let columns: Vec<&str> = header.split('┆').map(str::trim).collect();
        assert_eq!(columns[1..], ["1 thr", "4 thr", "16 thr │"], "{text}");
        assert!(rows[0].contains("select-only pg82uis"), "{text}");
        // Runs of 0.9, 1 and 1.2 times the median: a mean ±36.7 % at 95 %.
        assert!(rows[0].contains(" 4.94M ±37% ┆"), "{text}");
        assert!(
            text.contains("(not shown: the points at 2, 8 threads)"),
            "{text}"
        );
        assert_eq!(Show::MAIN.hidden(&r), Vec::<&str>::new());
    }

    #[test]
    fn ideal_columns_and_metrics_appear_only_when_present() {
        let plain = report(vec![point(1, 1000.0), point(2, 1800.0)]);
        for format in [Format::Table, Format::Markdown] {
            let text = render(&plain, format).unwrap();
            assert!(!text.contains("ideal"), "{text}");
            assert!(!text.contains("metrics"), "{text}");
        }
        let csv = render(&plain, Format::Csv).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].ends_with(",runs_ops_per_sec,ideal_ops_per_sec,ideal_fraction"),
            "{csv}"
        );
        assert!(lines[1].ends_with(",,"), "{csv}");

        let mut with = point(2, 1862.0);
        with.ideal_ops_per_sec = Some(2000.0);
        with.metrics = vec![
            Metric {
                name: "wal.flushes".into(),
                value: 1234.0,
            },
            Metric {
                name: "wal.commits_per_flush.mean".into(),
                value: 1.5,
            },
        ];
        let r = report(vec![point(1, 1000.0), with]);
        let md = render(&r, Format::Markdown).unwrap();
        let header = md.lines().find(|l| l.contains("series")).unwrap();
        let cells: Vec<&str> = header.split('|').map(str::trim).collect();
        let at = |name: &str| cells.iter().position(|c| *c == name).unwrap();
        assert_eq!(at("ideal ops/s"), at("efficiency") + 1, "{header}");
        assert_eq!(at("of ideal"), at("efficiency") + 2, "{header}");
        assert!(md.contains("93.1%"), "{md}");
        assert!(md.contains("2.000k"), "{md}");
        let row1 = md.lines().find(|l| l.contains(" 1 | 1.000k")).unwrap();
        assert_eq!(
            row1.matches(" - ").count(),
            4,
            "no efficiency, ideal, fraction or CI (one run): {row1}"
        );
        assert!(md.contains("metrics (median run of each point)"), "{md}");
        assert_eq!(Show::MAIN.hidden(&r), ["metrics"]);
        assert!(!render_with(&r, Format::Markdown, Show::MAIN)
            .unwrap()
            .contains("wal.flushes"));
        let flushes = md.lines().find(|l| l.contains("wal.flushes")).unwrap();
        assert!(
            flushes.contains("1234") && !flushes.contains("1234."),
            "{flushes}"
        );
        let mean = md.lines().find(|l| l.contains(".mean")).unwrap();
        assert!(mean.contains("1.50"), "{mean}");
        let table = render(&r, Format::Table).unwrap();
        assert!(
            table.contains("of ideal") && table.contains("wal.flushes"),
            "{table}"
        );

        let csv = render(&r, Format::Csv).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines[1].ends_with(",,"), "{csv}");
        assert!(lines[2].ends_with(",2000.0,0.9310"), "{csv}");
    }
}
