//! Rendering a [`Report`]: a terminal table, Markdown, CSV and JSON. Every format is computed
//! from the report alone, so `pglocks report DIR` renders a saved run exactly as it was printed.

use crate::format::{metric_value, point_cells, wait_ms};
use crate::query::{any_ideal, named_workloads, workload_list};
use crate::report::{Report, Series};
use crate::HarnessError;
use comfy_table::{presets, CellAlignment, Table};

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
    // A report of several workloads names each series with its workload.
    let several = named_workloads(report).len() > 1;
    let name = |s: &Series| {
        if several {
            format!("{} {}", s.workload, s.label())
        } else {
            s.label()
        }
    };
    // The ideal columns appear only when some point has an ideal.
    let with_ideal = any_ideal(&report.series);
    let mut header = vec!["series", "threads", "ops/s", "ns/op/thread", "efficiency"];
    if with_ideal {
        header.extend(["ideal ops/s", "of ideal"]);
    }
    header.extend(["p50 ns", "p99 ns", "p99.9 ns", "runs ops/s"]);
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
    let c = &report.config;
    let m = &report.machine;
    let mut out = format!(
        "{}{} {} | {} ms x {} runs (median) | pin {} | {} cpus, {} nodes, {}\n\n{t}\n",
        if report.interrupted {
            "INTERRUPTED (the points measured before Ctrl-C) | "
        } else {
            ""
        },
        if several { "workloads" } else { "workload" },
        workload_list(report),
        c.duration_ms,
        c.repeat,
        c.pin,
        m.cpus,
        m.nodes,
        m.model
    );
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
    let bytes = w
        .into_inner()
        .map_err(|e| HarnessError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
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
            },
            config: RunConfig {
                workload: "wal-commit".into(),
                duration_ms: 100,
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
            3,
            "no efficiency, ideal or fraction: {row1}"
        );
        assert!(md.contains("metrics (median run of each point)"), "{md}");
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
