//! The `pglocks` binary as a user meets it: bad input exits 2 with a message that lists the valid
//! choices; good input prints the documented report.

mod common;
use common::{fails_with, pglocks};

const QUICK: &[&str] = &[
    "--duration",
    "30ms",
    "--warmup",
    "5ms",
    "--repeat",
    "1",
    "--no-progress",
];

fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["run", "spin"];
    v.extend_from_slice(QUICK);
    v.extend_from_slice(extra);
    v
}

#[test]
fn unknown_names_exit_2_and_list_choices() {
    fails_with(&["run", "nosuch"], "valid: spin");
    fails_with(
        &run_args(&["--impl", "futex"]),
        "valid: pg, tas, ticket, mcs, floor, parking_lot, std",
    );
    fails_with(&run_args(&["--preset", "pg99"]), "valid: pg81");
    fails_with(
        &run_args(&["--set", "group_commit=off"]),
        "unknown knob 'group_commit'",
    );
    fails_with(
        &run_args(&["--set", "tas_spin=maybe"]),
        "expected on or off",
    );
    fails_with(
        &run_args(&["--preset", "pg92+nosuch=1"]),
        "unknown knob 'nosuch'",
    );
    fails_with(&run_args(&["--preset", "pg99+tas_spin=on"]), "valid: pg81");
    fails_with(&run_args(&["--pin", "diagonal"]), "compact");
    fails_with(
        &run_args(&["--format", "yaml"]),
        "table, json, csv, markdown",
    );
}

#[test]
fn malformed_numbers_exit_2() {
    fails_with(&run_args(&["--threads", "0"]), "zero threads");
    fails_with(&run_args(&["--threads", "1,x"]), "bad --threads");
    fails_with(&run_args(&["--threads", "8..1"]), "backwards");
    fails_with(&["run", "spin", "--duration", "soon"], "bad --duration");
    fails_with(&["run", "spin", "--duration", "0s"], "longer than 0");
    fails_with(&["run", "spin", "--repeat", "0"], "from 1 to 1000");
    fails_with(&["run", "spin", "--no-such-flag"], "--no-such-flag");
    fails_with(&["report", "/nonexistent/dir"], "report.json");
    fails_with(
        &["run", "wal-commit", "--flush-latency", "soon"],
        "bad value 'soon' for knob flush_latency",
    );
    fails_with(
        &["run", "spin", "--flush-latency", "2ms"],
        "applies to the workloads that flush WAL",
    );
}

#[test]
fn wal_commit_reports_its_ideal_and_commits_per_flush() {
    let out = pglocks(&[
        "run",
        "wal-commit",
        "--threads",
        "4",
        "--duration",
        "100ms",
        "--warmup",
        "20ms",
        "--repeat",
        "1",
        "--flush-latency",
        "1ms",
        "--no-progress",
        "--show",
        "waits,metrics",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for needle in [
        "ideal ops/s",
        "4.000k",
        "of ideal",
        "wal.commits_per_flush.mean",
        "WalSync",
    ] {
        assert!(text.contains(needle), "{needle} missing in:\n{text}");
    }
}

/// `run` prints the main table; the wait and metrics tables only with `--show` or `--verbose`,
/// and a line on stderr says what was left out and how to see it.
#[test]
fn run_prints_the_main_table_and_names_what_it_leaves_out() {
    let args = [
        "run",
        "wal-commit",
        "--threads",
        "2",
        "--duration",
        "50ms",
        "--warmup",
        "10ms",
        "--repeat",
        "1",
        "--no-progress",
    ];
    let out = pglocks(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("ops/s"), "{stdout}");
    assert!(
        !stdout.contains("WalSync") && !stdout.contains("wal.flushes"),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "not shown: the waits and metrics tables; --show waits,metrics (or --verbose) \
             prints them"
        ),
        "{stderr}"
    );
    let mut verbose = args.to_vec();
    verbose.push("-v");
    let out = pglocks(&verbose);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("WalSync") && stdout.contains("wal.flushes"),
        "{stdout}"
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not shown"));
    fails_with(
        &run_args(&["--show", "latency"]),
        "possible values: waits, metrics, all",
    );
}

#[test]
fn run_prints_json_of_the_documented_shape() {
    let out = pglocks(&run_args(&[
        "--impl",
        "pg,floor",
        "--threads",
        "1,2",
        "--format",
        "json",
    ]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(v["config"]["workload"], "spin");
    assert_eq!(v["config"]["duration_ms"], 30);
    let series = v["series"].as_array().unwrap();
    assert_eq!(series.len(), 2);
    assert_eq!(series[0]["impl"], "pg");
    assert_eq!(series[0]["preset"], "pg18");
    let points = series[1]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["efficiency"], 1.0);
    assert_eq!(points[1]["per_thread_ops"].as_array().unwrap().len(), 2);
    assert!(points[1]["ops_per_sec"].as_f64().unwrap() > 0.0);
}

/// `P+knob=value` runs a preset with a knob of its own beside the others, under its own name.
#[test]
fn a_preset_can_carry_its_own_knob() {
    let out = pglocks(&run_args(&[
        "--preset",
        "pg94,pg94+tas_spin=off",
        "--format",
        "json",
        "--set",
        "lwlock_stats=on",
    ]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let presets: Vec<&str> = v["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["preset"].as_str().unwrap())
        .collect();
    assert_eq!(presets, ["pg94", "pg94+tas_spin=off"]);
}

#[test]
fn csv_and_markdown_have_one_row_per_point() {
    let out = pglocks(&run_args(&["--threads", "1,2", "--format", "csv"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.starts_with("workload,preset,impl,threads,ops_per_sec"));
    // The ideal columns come last, empty for a workload without an ideal.
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .ends_with(",runs_ops_per_sec,ideal_ops_per_sec,ideal_fraction"));
    assert!(lines.all(|l| l.ends_with(",,")), "{text}");
    let out = pglocks(&run_args(&["--threads", "1", "--format", "markdown"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| pg18/pg"), "{text}");
}

#[test]
fn saved_report_rerenders() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-report");
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let args = [
        "run",
        "spin",
        "--impl",
        "pg,floor",
        "--threads",
        "1,2",
        "--duration",
        "250ms",
        "--warmup",
        "5ms",
        "--repeat",
        "1",
        "--no-progress",
        "--out",
        d,
    ];
    let out = pglocks(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let files = [
        "report.json",
        "report.csv",
        "report.md",
        "index.html",
        "throughput-spin.svg",
        "efficiency-spin.svg",
        "latency-spin.svg",
        "timeline-spin.svg",
    ];
    assert!(
        err.contains(&files.join(", ")),
        "the saved files listed: {err}"
    );
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    let saved: Vec<Vec<u8>> = files.iter().map(|f| read(f)).collect();
    // A 250 ms run has two full 100 ms intervals in its timeline.
    let json: serde_json::Value = serde_json::from_slice(&saved[0]).unwrap();
    let timeline = json["series"][1]["points"][1]["timeline_ops_per_sec"]
        .as_array()
        .unwrap();
    assert_eq!(timeline.len(), 2, "{timeline:?}");
    for f in &files[1..] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let out = pglocks(&["report", d, "--format", "csv"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&saved[1])
    );
    for (f, bytes) in files.iter().zip(&saved) {
        assert!(read(f) == *bytes, "{f} re-rendered differently");
    }
    let html = String::from_utf8_lossy(&saved[3]);
    for needle in ["pg18/pg", "pg18/floor", "timeline-spin.svg"] {
        assert!(html.contains(needle), "{needle} missing in index.html");
    }
}

#[test]
fn list_and_topology_describe_the_choices() {
    let out = pglocks(&["list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["spin", "parking_lot", "pg94", "tas_spin"] {
        assert!(text.contains(needle), "list lacks {needle}:\n{text}");
    }
    // Each preset's knobs: the rows where releases differ, one column per preset.
    let table = text
        .split("what the releases with a modelled change set differently")
        .nth(1)
        .expect("the preset table");
    let row = |knob: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(knob))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row {knob}:\n{table}"))
    };
    let presets = row("knob");
    let column = |knob: &str, preset: &str| {
        let i = presets.iter().position(|p| *p == preset).unwrap();
        row(knob)[i].to_string()
    };
    // Releases without a modelled change say whose rules they have, and get no column.
    assert!(
        text.contains("pg13    13: no modelled change, the rules of pg11"),
        "{text}"
    );
    assert!(!presets.contains(&"pg13"), "{presets:?}");
    assert_eq!(column("sinval_check", "pg83"), "locked");
    assert_eq!(column("sinval_check", "pg92"), "free");
    assert_eq!(column("snapshot_layout", "pg14"), "dense");
    assert_eq!(column("partitions", "pg82uis"), "2048");
    assert_eq!(column("clog_buffers", "pg96"), "128");
    assert!(
        !table.contains("\n  think"),
        "a knob no preset changes is listed"
    );
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/harness/tests/fixtures/2s64c-smt"
    );
    let out = pglocks(&["topology", "--sysfs-root", fixture, "--pin", "scatter"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("0-31,64-95"), "{text}");
}

/// `pglocks stress`: a short run passes with a table of every part on stdout (on stderr only
/// the line that names the run, with `--no-progress`); a wrong request is a usage error that
/// says what is valid.
#[test]
fn stress_runs_every_part_and_checks_its_arguments() {
    let out = pglocks(&[
        "stress",
        "--duration",
        "300ms",
        "--threads",
        "11",
        "--seed",
        "3",
        "--no-progress",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for part in pglocks::workloads::stress::PARTS.iter().map(|p| p.name) {
        assert!(
            stdout.lines().any(|l| l.starts_with(part)),
            "{part} missing:\n{stdout}"
        );
    }
    assert!(stdout.contains("violations 0, hangs 0"), "{stdout}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        ["pglocks stress: 11 threads over all 11 parts, 300ms on pg18, seed 3"]
    );
    fails_with(&["stress", "--threads", "3"], "at least 11 threads");
    fails_with(&["stress", "--duration", "soon"], "bad --duration");
    fails_with(
        &["stress", "--duration", "0s"],
        "--duration must be longer than 0",
    );
    fails_with(&["stress", "--preset", "pg99"], "valid: pg81");
    fails_with(
        &["stress", "--parts", "spin,futex"],
        "unknown stress part 'futex' (valid: spin, lwlock, lmgr",
    );
    fails_with(&["stress", "--parts", "spin,spin"], "named twice");
}

/// `pglocks stress` exits 1 when the run fails: on a violation (an injected fsync failure makes
/// the `wal` part's commits fail), with the line that repeats the run, and when a model refuses
/// the settings a part is built from (a valid request, so not a usage error).
#[test]
fn stress_failures_exit_1() {
    let out = pglocks(&[
        "stress",
        "--parts",
        "wal",
        "--threads",
        "2",
        "--duration",
        "5s",
        "--set",
        "wal_fault=fsync:1",
        "--seed",
        "5",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("violations 1, hangs 0"), "{stdout}");
    assert!(
        stderr.contains("VIOLATION wal: unexpected error: PANIC"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "repeat with: pglocks stress --duration 5s --threads 2 --parts wal --preset pg18 \
             --set wal_fault=fsync:1 --seed 5"
        ),
        "{stderr}"
    );
    // 17+ divides the commit log's buffers into banks of 16.
    let out = pglocks(&[
        "stress",
        "--parts",
        "xact",
        "--set",
        "clog_buffers=20",
        "--duration",
        "1s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("pglocks: stress setup failed: xact: "),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// Saves a quick run of `select-only` on pg92 and pg18 in `dir`, with `sets` (`--set` values).
fn save_quick_run(dir: &std::path::Path, sets: &[&str]) {
    let _ = std::fs::remove_dir_all(dir);
    let mut args = vec![
        "run",
        "select-only",
        "--preset",
        "pg92,pg18",
        "--threads",
        "1,2",
        "--duration",
        "100ms",
        "--warmup",
        "20ms",
        "--repeat",
        "1",
        "--no-progress",
        "--format",
        "csv",
        "--out",
        dir.to_str().unwrap(),
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = pglocks(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pglocks compare A B`: every shared point with both figures and the ratio, a verdict per
/// series, what only one has; `--fail-if-slower` exits 1 only when B lost more than it allows;
/// a missing or malformed report or a bad percentage exits 2.
#[test]
fn compare_two_saved_runs() {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-compare");
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    save_quick_run(&a, &[]);
    save_quick_run(&b, &["lwlock_padding=none"]);
    let (a_dir, b_dir) = (a.to_str().unwrap(), b.to_str().unwrap());

    // Two real runs: whatever the figures, the table lists the four shared points and exits 0.
    let out = pglocks(&["compare", a_dir, b_dir]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("4 points in both, largest change first; 0 only in A, 0 only in B"),
        "{text}"
    );
    for series in ["pg92/pg: ", "pg18/pg: "] {
        assert!(text.contains(series), "{series} has no verdict:\n{text}");
    }

    // A run compared with itself: every ratio is 1, so no point is slower.
    let a_json = a.join("report.json");
    let out = pglocks(&[
        "compare",
        a_dir,
        a_json.to_str().unwrap(),
        "--fail-if-slower",
        "5%",
        "--format",
        "csv",
    ]);
    let csv = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{csv}");
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(
        csv.lines()
            .skip(1)
            .all(|l| l.contains(",both,") && l.ends_with(",1.0000")),
        "{csv}"
    );

    // B hand-edited: pg92 half as fast, and pg18's 2-thread point gone.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&a_json).unwrap()).unwrap();
    for p in doc["series"][0]["points"].as_array_mut().unwrap() {
        let ops = p["ops_per_sec"].as_f64().unwrap();
        p["ops_per_sec"] = serde_json::json!(ops / 2.0);
    }
    doc["series"][1]["points"].as_array_mut().unwrap().pop();
    let slow = tmp.join("slow.json");
    std::fs::write(&slow, serde_json::to_vec(&doc).unwrap()).unwrap();
    let slow = slow.to_str().unwrap();
    let out = pglocks(&["compare", a_dir, slow, "--fail-if-slower", "5"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("B is slower: 2 of the 3 shared points lost more than 5%"),
        "{stderr}"
    );
    assert!(
        stdout.contains("pg92/pg: B slower, 0.50\u{d7} A"),
        "{stdout}"
    );
    assert!(
        stdout.contains("only in A:\n  pg18/pg at 2 threads"),
        "{stdout}"
    );
    // Without the flag, or allowing more than the loss, the same comparison exits 0.
    assert_eq!(pglocks(&["compare", a_dir, slow]).status.code(), Some(0));
    let out = pglocks(&[
        "compare",
        a_dir,
        slow,
        "--fail-if-slower",
        "60%",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["points"][0]["ratio"], 0.5);
    assert_eq!(v["only_in_a"][0]["threads"], serde_json::json!([2]));

    fails_with(&["compare", a_dir, "/nonexistent/run"], "/nonexistent/run");
    let bad = tmp.join("bad.json");
    std::fs::write(&bad, "{\"series\": []}").unwrap();
    fails_with(
        &["compare", a_dir, bad.to_str().unwrap()],
        "not a pglocks report",
    );
    fails_with(
        &["compare", a_dir, a_dir, "--fail-if-slower", "five"],
        "bad --fail-if-slower 'five'",
    );
}
