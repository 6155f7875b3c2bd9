//! The report directory: every file `save_report` writes, for a report that holds two workloads.
//! The charts are well-formed XML naming every series they plot (and none of another workload),
//! `rerender` rewrites every file byte for byte from `report.json`, and `index.html` names every
//! series and links every chart.

use pglocks_harness::plot::ChartKind;
use pglocks_harness::query::workloads;
use pglocks_harness::report::{Latency, Machine, Metric, Point, RunConfig, Series, Wait};
use pglocks_harness::{files, rerender, save_report, Report};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn point(threads: usize, ops: f64, waits: Vec<Wait>) -> Point {
    Point {
        threads,
        ops_per_sec: ops,
        runs_ops_per_sec: vec![ops * 0.99, ops, ops * 1.01],
        latency_ns: Latency {
            p50: 300 * threads as u64,
            p90: 900 * threads as u64,
            p99: 4000 * threads as u64,
            p999: 20_000,
            max: 90_000,
        },
        efficiency: None,
        waits,
        per_thread_ops: vec![ops as u64 / threads as u64; threads],
        ideal_ops_per_sec: None,
        metrics: vec![],
        // 1/3 makes floats whose shortest decimal form is long: they must survive the JSON.
        timeline_ops_per_sec: (1..=5)
            .map(|k| ops * (1.0 + k as f64 / 3.0) / 2.0)
            .collect(),
        timeline_interval_ms: None,
    }
}

fn wait(lock: &str, mode: &str, count: u64, wait_ns: u64) -> Wait {
    Wait {
        lock: lock.into(),
        mode: mode.into(),
        count,
        wait_ns,
    }
}

fn series(workload: &str, preset: &str, impl_name: &str, base: f64) -> Series {
    let mut s = Series {
        workload: workload.into(),
        preset: preset.into(),
        impl_name: impl_name.into(),
        points: [1, 2, 4]
            .into_iter()
            .map(|t| {
                let waits = vec![
                    wait("LockManager", "exclusive", 10 * t as u64, 2_000_000),
                    wait("WALWrite", "exclusive", 3, 9_000_000 * t as u64),
                    wait("ProcArray", "shared", 50, 500_000),
                ];
                point(t, base * (t as f64).sqrt() / 3.0, waits)
            })
            .collect(),
    };
    s.points[2].metrics = vec![Metric {
        name: "wal.flushes".into(),
        value: 42.0,
    }];
    s.fill_efficiency();
    s
}

/// Two workloads; `tpcb-like` alone has a `floor` series, so its label must stay out of the
/// `select-only` charts.
fn two_workload_report() -> Report {
    Report {
        pglocks_version: "0.1.0".into(),
        machine: Machine {
            cpus: 2,
            nodes: 1,
            model: "test <cpu> & co".into(),
            simulated: None,
        },
        config: RunConfig {
            workload: "select-only,tpcb-like".into(),
            duration_ms: 500,
            until: None,
            repeat: 3,
            pin: "compact".into(),
        },
        series: vec![
            series("select-only", "pg91", "pg", 1e6),
            series("select-only", "pg18", "pg", 3e6),
            series("tpcb-like", "pg91", "pg", 1e4),
            series("tpcb-like", "pg18", "floor", 2e4),
        ],
        interrupted: false,
    }
}

/// The two-workload report saved in a fresh directory `name`: the report, the directory, and the
/// names of the files `save_report` says it wrote.
fn saved(name: &str) -> (Report, PathBuf, Vec<String>) {
    let report = two_workload_report();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let written = save_report(&report, &dir).unwrap();
    (report, dir, written)
}

fn read_all(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// All the text an SVG document shows (its text nodes, unescaped), after parsing it as XML.
fn svg_text(name: &str, bytes: &[u8]) -> String {
    let text = std::str::from_utf8(bytes).unwrap();
    let doc = roxmltree::Document::parse(text)
        .unwrap_or_else(|e| panic!("{name} is not well-formed XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg", "{name}");
    doc.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn save_writes_every_file_and_charts_per_workload() {
    let (report, dir, written) = saved("report-files-save");
    let mut expected = vec![files::JSON, files::CSV, files::MARKDOWN, files::HTML]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    for w in ["select-only", "tpcb-like"] {
        for kind in ["throughput", "efficiency", "latency", "timeline"] {
            expected.push(format!("{kind}-{w}.svg"));
        }
    }
    assert_eq!(written, expected);
    let on_disk: Vec<String> = read_all(&dir).into_keys().collect();
    let mut sorted = expected.clone();
    sorted.sort();
    assert_eq!(on_disk, sorted, "exactly the files it says it wrote");
    let csv = std::fs::read_to_string(dir.join(files::CSV)).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 4 * 3,
        "a header and one row per point"
    );
    assert!(csv.contains("\ntpcb-like,pg18,floor,4,"), "{csv}");
    // The tables name each series with its workload when there are several.
    let md = std::fs::read_to_string(dir.join(files::MARKDOWN)).unwrap();
    for s in &report.series {
        let name = format!("| {} {} ", s.workload, s.label());
        assert_eq!(
            md.matches(&name).count(),
            3 + 9 + 1,
            "{name}: 3 points, 3 waits at each, 1 metric\n{md}"
        );
    }
}

#[test]
fn every_chart_is_xml_naming_its_series_and_no_other_workloads() {
    let (report, dir, _) = saved("report-files-svg");
    let all = read_all(&dir);
    let mut checked = 0;
    for w in workloads(&report) {
        for kind in ChartKind::ALL {
            let name = kind.file_name(w);
            let text = svg_text(&name, &all[&name]);
            assert!(text.contains(w), "{name} names its workload: {text}");
            for s in &report.series {
                let shown = text.contains(&s.label());
                assert_eq!(
                    shown,
                    s.workload == w
                        || report
                            .series
                            .iter()
                            .any(|o| o.workload == w && o.label() == s.label()),
                    "{name}: series {} (of {})\n{text}",
                    s.label(),
                    s.workload
                );
            }
            match kind {
                ChartKind::Efficiency => assert!(text.contains("preferable"), "{text}"),
                ChartKind::Latency => assert!(text.contains(" p99"), "{text}"),
                ChartKind::Timeline => assert!(text.contains("4 threads"), "{text}"),
                ChartKind::Throughput => {}
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 8);
    // The throughput chart's title names the machine's size.
    assert!(svg_text("t", &all["throughput-tpcb-like.svg"]).contains("2 cpus"));
}

#[test]
fn rerender_rewrites_every_file_byte_for_byte() {
    let (report, dir, _) = saved("report-files-rerender");
    let before = read_all(&dir);
    for name in before.keys().filter(|n| *n != files::JSON) {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    let (again, written) = rerender(&dir).unwrap();
    assert_eq!(again, report, "the JSON holds the whole report");
    assert_eq!(written.len(), before.len() - 1, "all but report.json");
    let after = read_all(&dir);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &before {
        assert!(after[name] == *bytes, "{name} differs after rerender");
    }
}

#[test]
fn index_html_names_every_series_and_chart_and_sorts_waits() {
    let (report, dir, written) = saved("report-files-html");
    let html = std::fs::read_to_string(dir.join(files::HTML)).unwrap();
    for s in &report.series {
        assert!(html.contains(&s.label()), "{}", s.label());
        assert!(html.contains(&format!("<h2>{}</h2>", s.workload)));
    }
    for f in written.iter().filter(|f| f.ends_with(".svg")) {
        assert!(html.contains(&format!("<img src=\"{f}\"")), "{f}");
    }
    for f in [files::JSON, files::CSV, files::MARKDOWN] {
        assert!(html.contains(&format!("href=\"{f}\"")), "{f}");
    }
    assert!(html.contains("test &lt;cpu&gt; &amp; co"), "escaped model");
    // The title names both workloads, a comma and a space between them.
    assert!(
        html.contains("<title>pglocks report: select-only, tpcb-like</title>"),
        "{html}"
    );
    assert!(html.contains("<h1>pglocks report: select-only, tpcb-like</h1>"));
    let md = std::fs::read_to_string(dir.join(files::MARKDOWN)).unwrap();
    assert!(
        md.starts_with("workloads select-only, tpcb-like | "),
        "{md}"
    );
    // At 4 threads: WALWrite 36 ms, LockManager 2 ms, ProcArray 0.5 ms, longest first.
    let section = &html[html.find("pg18/floor: lock waits at 4 threads").unwrap()..];
    let at = |lock: &str| section.find(&format!("<td>{lock}</td>")).unwrap();
    assert!(at("WALWrite") < at("LockManager") && at("LockManager") < at("ProcArray"));
    assert!(section.contains("<td class=\"n\">36.000</td>"), "{section}");
    assert!(html.contains("metrics (median run of each point)"));
    assert!(html.contains("<td>wal.flushes</td><td class=\"n\">-</td>"));
}
