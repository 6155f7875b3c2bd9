//! `pglocks reproduce`: claims run, judged and written as a report directory.

mod common;
use common::{fails_with, pglocks};

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_claim_runs_on_a_simulated_machine_and_its_verdict_and_report_are_written() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reproduce-sim");
    let _ = std::fs::remove_dir_all(&dir);
    let out = pglocks(&[
        "reproduce",
        "fast-path",
        "parallel-apply",
        "--quick",
        "--machine",
        "sim:opteron-48",
        "--no-progress",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("| claim | release | verdict | measured |"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    let claims = summary["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 2);
    assert_eq!(summary["cpus"], 48);
    // The fast path's effect is a many-core one: 48 simulated cores show it.
    assert_eq!(claims[0]["id"], "fast-path");
    assert_eq!(claims[0]["verdict"], "reproduced", "{}", claims[0]);
    assert!(claims[0]["command"]
        .as_str()
        .unwrap()
        .starts_with("pglocks run lmgr-relation --preset pg91,pg92"));
    assert!(dir.join("fast-path").join("report.json").is_file());
    // Parallel apply runs simulated too: its workers are virtual threads started mid-run.
    assert_eq!(claims[1]["id"], "parallel-apply");
    assert_eq!(claims[1]["verdict"], "reproduced", "{}", claims[1]);
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(index.contains("href=\"#fast-path\"") && index.contains("fast-path/throughput-"));
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_sensitivity_run_asks_each_claim_again_under_every_variant_of_the_profile() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reproduce-sensitivity");
    let _ = std::fs::remove_dir_all(&dir);
    let out = pglocks(&[
        "reproduce",
        "group-commit",
        "--quick",
        "--sensitivity",
        "--machine",
        "sim:opteron-48",
        "--no-progress",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let table = std::fs::read_to_string(dir.join("sensitivity.md")).unwrap();
    // Group commit's gain is the flush device's, several times its threshold: no value of
    // the machine flips it.
    assert!(
        table.contains("| group-commit | reproduced | reproduced |"),
        "{table}"
    );
    // Every unsourced value of the profile, halved or doubled, and the joint draws.
    for variant in [
        "cycles.fence*0.5",
        "os.wake_ns*2",
        "joint draw 8",
        "model.hold_window=false",
    ] {
        assert!(
            table.contains(&format!("- {variant}:")),
            "{variant}: {table}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("sensitivity.json")).unwrap()).unwrap();
    assert_eq!(json["claims"][0]["id"], "group-commit");
    // On this machine there is nothing to vary.
    fails_with(
        &["reproduce", "fast-path", "--sensitivity"],
        "--sensitivity varies a simulated machine's values",
    );
}

#[test]
fn an_unknown_claim_or_machine_is_a_usage_error() {
    fails_with(
        &["reproduce", "no-such-claim", "--list"],
        "no claim 'no-such-claim' (claims: lock-partitions, fast-path",
    );
    fails_with(
        &["reproduce", "fast-path", "--machine", "big"],
        "expected real or sim:PROFILE",
    );
}

/// docs/reproducing-the-talks.md quotes the committed runs under docs/reproduce verbatim: every
/// row of each run's summary, and the curves of this machine's and the simulated Westmere's
/// claims, whose charts it shows, so the document's figures are the runs'.
#[test]
fn the_talks_document_quotes_the_committed_runs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/reproducing-the-talks.md")).unwrap();
    let runs = root.join("docs/reproduce");
    let mut quoted = 0;
    for run in [
        "this-machine",
        "sim-westmere-80",
        "sim-haswell-ex-4s",
        "sim-haswell-ep-2s",
    ] {
        let dir = runs.join(run);
        let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
        for row in summary.lines().filter(|l| l.starts_with("| ")) {
            assert!(
                doc.contains(row),
                "{run}'s summary row is not in the document: {row}"
            );
        }
        if !matches!(run, "this-machine" | "sim-westmere-80") {
            continue;
        }
        for claim in report["claims"].as_array().unwrap() {
            let id = claim["id"].as_str().unwrap();
            let Ok(curves) = std::fs::read_to_string(dir.join(id).join("curves.md")) else {
                // A claim that did not run has no curves.
                assert_eq!(claim["verdict"], "not_run", "{run}/{id} has no curves.md");
                continue;
            };
            assert!(
                doc.contains(curves.trim_end()),
                "{run}/{id}/curves.md is not in the document"
            );
            quoted += 1;
        }
    }
    assert!(quoted >= 30, "only {quoted} curves quoted");
    // Every chart the document shows is committed.
    for (at, _) in doc.match_indices("](reproduce/") {
        let path = &doc[at + 2..];
        let path = &path[..path.find(')').unwrap()];
        assert!(
            root.join("docs").join(path).is_file(),
            "{path} is not committed"
        );
    }
}
