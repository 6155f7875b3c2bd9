//! The report's `index.html`: one page that ties a report directory together. It shows the machine
//! and the run's settings, links the data files, and for each workload (a report may hold several)
//! the sentences that read it ([`crate::summary`]), the main table (throughput, efficiency,
//! latency percentiles per point), the four charts ([`ChartKind`]), the lock-wait table of each
//! series at its largest thread count (lock, mode, wait time, count, sorted by wait time, like
//! the `pglockwait` tables of the seed talks) and the workload's own metrics, if it counts any.
//!
//! Plain HTML with a little CSS, no script; the charts are `<img>` links to the SVG files beside
//! it. Like every file of the report it is a function of the [`Report`] alone (no clock, no
//! path), so `pglocks report DIR` re-renders it byte for byte.

use crate::format::{machine, metric_value, percent, point_cells, wait_ms};
use crate::plot::ChartKind;
use crate::query::{
    any_ideal, largest_point, metric_names, named_workloads, series_of, sorted_waits,
    workload_list, workloads,
};
use crate::report::{Report, Series};
use crate::summary::workload_summary;
use std::fmt::Write;

/// `s` with HTML's special characters escaped, for text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An HTML table: a header row (none if `header` is empty) and body rows, every cell escaped; the cells of columns from
/// `numeric_from` on are right-aligned.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>], numeric_from: usize) {
    let cell = |tag: &str, i: usize, text: &str| {
        let class = if i >= numeric_from {
            " class=\"n\""
        } else {
            ""
        };
        format!("<{tag}{class}>{}</{tag}>", esc(text))
    };
    out.push_str("<table>\n");
    if !header.is_empty() {
        out.push_str("<tr>");
        for (i, h) in header.iter().enumerate() {
            out.push_str(&cell("th", i, h));
        }
        out.push_str("</tr>\n");
    }
    for row in rows {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            out.push_str(&cell("td", i, c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}\
th,td{border:1px solid #ccc;padding:0.2em 0.6em}th{background:#f0f0f0}td.n,th.n{text-align:right}\
img{max-width:100%;border:1px solid #ddd}figure{margin:1em 0}";

/// The whole page for `report`.
pub fn index_html(report: &Report) -> String {
    let c = &report.config;
    let m = &report.machine;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>pglocks report: {w}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>pglocks report: {w}</h1>\n",
        w = esc(&workload_list(report))
    );
    if report.interrupted {
        out.push_str(
            "<p><strong>Interrupted:</strong> the run was stopped with Ctrl-C; the figures are \
             the points measured before it (the last may have run shorter).</p>\n",
        );
    }
    table(
        &mut out,
        &[],
        &[
            vec!["pglocks".into(), report.pglocks_version.clone()],
            vec!["machine".into(), machine(m)],
            vec![
                match named_workloads(report).len() {
                    1 => "workload".into(),
                    _ => "workloads".into(),
                },
                workload_list(report),
            ],
            vec![
                "runs".into(),
                format!(
                    "{} ms measured, {} runs per point (the median is shown), pinning {}",
                    c.duration_ms, c.repeat, c.pin
                ),
            ],
        ],
        usize::MAX,
    );
    out.push_str("<p>Data: ");
    let data = [
        crate::files::JSON,
        crate::files::CSV,
        crate::files::MARKDOWN,
    ];
    for (i, f) in data.iter().enumerate() {
        let sep = if i + 1 < data.len() { ", " } else { ".</p>\n" };
        let _ = write!(out, "<a href=\"{f}\">{f}</a>{sep}");
    }
    for workload in workloads(report) {
        workload_section(&mut out, report, workload);
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn workload_section(out: &mut String, report: &Report, workload: &str) {
    let series = &series_of(report, workload);
    let _ = writeln!(out, "<h2>{}</h2>", esc(workload));
    if let Some(text) = workload_summary(report, workload) {
        let _ = writeln!(out, "<p>{}</p>", esc(&text));
    }
    main_table(out, series);
    for kind in ChartKind::ALL {
        let file = kind.file_name(workload);
        let _ = writeln!(
            out,
            "<figure><img src=\"{f}\" alt=\"{k} chart of {w}\"><figcaption><a href=\"{f}\">{f}</a>\
             </figcaption></figure>",
            f = esc(&file),
            k = kind.name(),
            w = esc(workload),
        );
    }
    for s in series {
        wait_table(out, s);
    }
    for s in series {
        metrics_table(out, s);
    }
}

fn main_table(out: &mut String, series: &[&Series]) {
    let with_ideal = any_ideal(series.iter().copied());
    let mut header = vec!["series", "threads", "ops/s", "ns/op/thread", "efficiency"];
    if with_ideal {
        header.extend(["ideal ops/s", "of ideal"]);
    }
    header.extend([
        "p50 ns",
        "p90 ns",
        "p99 ns",
        "p99.9 ns",
        "max ns",
        "95% CI",
        "runs ops/s",
    ]);
    let mut rows = Vec::new();
    for s in series {
        for p in &s.points {
            let l = &p.latency_ns;
            let latencies = [l.p50, l.p90, l.p99, l.p999, l.max];
            rows.push(point_cells(s.label(), p, with_ideal, &latencies));
        }
    }
    table(out, &header, &rows, 1);
}

fn wait_table(out: &mut String, s: &Series) {
    let Some(p) = largest_point(s) else {
        return;
    };
    let _ = writeln!(
        out,
        "<h3>{}: lock waits at {} threads</h3>",
        esc(&s.label()),
        p.threads
    );
    if p.waits.is_empty() {
        out.push_str("<p>No waits were recorded.</p>\n");
        return;
    }
    let total: u64 = p.waits.iter().map(|w| w.wait_ns).sum();
    let rows: Vec<Vec<String>> = sorted_waits(p)
        .into_iter()
        .map(|w| {
            vec![
                w.lock.clone(),
                w.mode.clone(),
                wait_ms(w.wait_ns),
                w.count.to_string(),
                if w.count > 0 {
                    format!("{:.2}", w.wait_ns as f64 / w.count as f64 / 1e3)
                } else {
                    "-".into()
                },
                if total > 0 {
                    percent(w.wait_ns as f64 / total as f64)
                } else {
                    "-".into()
                },
            ]
        })
        .collect();
    table(
        out,
        &[
            "wait event / tranche",
            "mode / LWLOCK_STATS",
            "wait ms",
            "count",
            "us per wait",
            "of wait time",
        ],
        &rows,
        2,
    );
}

/// A series' metrics, one row per metric, one column per thread count.
fn metrics_table(out: &mut String, s: &Series) {
    let names = metric_names(s);
    if names.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>{}: metrics (median run of each point)</h3>",
        esc(&s.label())
    );
    let threads: Vec<String> = s
        .points
        .iter()
        .map(|p| format!("{} threads", p.threads))
        .collect();
    let mut header = vec!["metric"];
    header.extend(threads.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = names
        .iter()
        .map(|&name| {
            let mut row = vec![name.to_string()];
            row.extend(s.points.iter().map(|p| {
                p.metrics
                    .iter()
                    .find(|m| m.name == name)
                    .map_or_else(|| "-".into(), |m| metric_value(m.value))
            }));
            row
        })
        .collect();
    table(out, &header, &rows, 1);
}
