//! Rendering a [`Report`]: a terminal table, Markdown, CSV and JSON. Every format is computed
//! from the report alone, so `pglocks report DIR` renders a saved run exactly as it was printed.

use crate::report::{Point, Report};
use crate::HarnessError;
use comfy_table::{presets, CellAlignment, Table};

/// Output formats of `pglocks run --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A table for a terminal.
    Table,
    /// The JSON document (DESIGN §4).
    Json,
    /// One row per point.
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

/// Renders `report` in `format`.
pub fn render(report: &Report, format: Format) -> Result<String, HarnessError> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(report)? + "\n",
        Format::Csv => csv(report)?,
        Format::Table => tables(report, presets::UTF8_FULL_CONDENSED),
        Format::Markdown => tables(report, presets::ASCII_MARKDOWN),
    })
}

/// A throughput in a short human form: `12.3M`.
pub fn si(v: f64) -> String {
    let (div, suffix) = match v.abs() {
        x if x >= 1e9 => (1e9, "G"),
        x if x >= 1e6 => (1e6, "M"),
        x if x >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    format!("{:.3}{suffix}", v / div)
}

fn efficiency(p: &Point) -> String {
    p.efficiency
        .map_or_else(|| "-".into(), |e| format!("{e:.2}"))
}

fn tables(report: &Report, preset: &str) -> String {
    let mut t = Table::new();
    t.load_preset(preset).set_header(vec![
        "series",
        "threads",
        "ops/s",
        "ns/op/thread",
        "efficiency",
        "p50 ns",
        "p99 ns",
        "p99.9 ns",
        "runs ops/s",
    ]);
    let mut waits = Table::new();
    waits.load_preset(preset).set_header(vec![
        "series",
        "threads",
        "wait event / tranche",
        "mode / LWLOCK_STATS",
        "count",
        "wait ms",
    ]);
    let mut any_waits = false;
    for s in &report.series {
        for p in &s.points {
            let runs: Vec<String> = p.runs_ops_per_sec.iter().map(|&r| si(r)).collect();
            t.add_row(vec![
                s.label(),
                p.threads.to_string(),
                si(p.ops_per_sec),
                format!("{:.2}", p.ns_per_op()),
                efficiency(p),
                p.latency_ns.p50.to_string(),
                p.latency_ns.p99.to_string(),
                p.latency_ns.p999.to_string(),
                runs.join(" "),
            ]);
            for w in &p.waits {
                any_waits = true;
                waits.add_row(vec![
                    s.label(),
                    p.threads.to_string(),
                    w.lock.clone(),
                    w.mode.clone(),
                    w.count.to_string(),
                    format!("{:.3}", w.wait_ns as f64 / 1e6),
                ]);
            }
        }
    }
    for i in 1..=7 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let c = &report.config;
    let m = &report.machine;
    let mut out = format!(
        "workload {} | {} ms x {} runs (median) | pin {} | {} cpus, {} nodes, {}\n\n{t}\n",
        c.workload, c.duration_ms, c.repeat, c.pin, m.cpus, m.nodes, m.model
    );
    if any_waits {
        out += &format!(
            "\nwait events and LWLOCK_STATS counters (median run of each point)\n\n{waits}\n"
        );
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

    #[test]
    fn si_units() {
        assert_eq!(si(12_345_678.0), "12.346M");
        assert_eq!(si(999.0), "999.000");
        assert_eq!(si(1500.0), "1.500k");
    }

    #[test]
    fn format_names() {
        assert_eq!("json".parse::<Format>().unwrap(), Format::Json);
        let e = "yaml".parse::<Format>().unwrap_err().to_string();
        assert!(e.contains("table, json, csv, markdown"), "{e}");
    }
}
