//! The JSON document is a contract (`pglocks_harness::report`): the documented example parses
//! into the report types (which reject unknown fields), serialises back to the same value, and
//! a real run has exactly the documented keys at every level (a run shorter than one 100 ms timeline interval
//! has no `timeline_ops_per_sec`; the optional keys are tested on their own).

use pglocks::harness::Report;
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn documented_example() -> Value {
    json!({ "pglocks_version": "0.1.0", "machine": {"cpus": 2, "nodes": 1, "model": "x"},
      "config": {"workload": "lmgr-relation", "duration_ms": 2000, "repeat": 3, "pin": "compact"},
      "series": [ { "workload": "lmgr-relation", "preset": "pg92", "impl": "pg",
          "points": [ { "threads": 2, "ops_per_sec": 1.0e7, "runs_ops_per_sec": [1.0e7, 0.9e7, 1.1e7],
                        "latency_ns": {"p50": 0, "p90": 0, "p99": 0, "p999": 0, "max": 0},
                        "efficiency": 0.93,
                        "waits": [ {"lock": "LockManager", "mode": "exclusive", "count": 0, "wait_ns": 0} ],
                        "per_thread_ops": [1, 2] } ] } ] })
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn documented_example_round_trips() {
    let v = documented_example();
    let r: Report = serde_json::from_value(v.clone()).expect("the documented example parses");
    assert_eq!(serde_json::to_value(&r).unwrap(), v);
}

#[test]
fn optional_ideal_metrics_and_timeline_extend_a_point() {
    let mut v = documented_example();
    let p = &mut v["series"][0]["points"][0];
    p["ideal_ops_per_sec"] = json!(1.25e7);
    p["metrics"] = json!([{"name": "wal.flushes", "value": 42.0}]);
    p["timeline_ops_per_sec"] = json!([0.98e7, 1.02e7]);
    let r: Report = serde_json::from_value(v.clone()).expect("the extension keys parse");
    assert_eq!(r.series[0].points[0].ideal_fraction(), Some(0.8));
    assert_eq!(r.series[0].points[0].timeline_ops_per_sec, [0.98e7, 1.02e7]);
    assert_eq!(serde_json::to_value(&r).unwrap(), v);
    v["series"][0]["points"][0]["metrics"][0]["unit"] = json!("flushes");
    assert!(serde_json::from_value::<Report>(v).is_err());
}

#[test]
fn unknown_or_missing_fields_are_rejected() {
    let mut v = documented_example();
    v["machine"]["sockets"] = json!(2);
    assert!(serde_json::from_value::<Report>(v).is_err());
    let mut v = documented_example();
    v["series"][0]["points"][0]
        .as_object_mut()
        .unwrap()
        .remove("efficiency");
    assert!(serde_json::from_value::<Report>(v).is_err());
}

#[test]
fn a_real_run_has_exactly_the_documented_keys() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pglocks"))
        .args([
            "run",
            "spin",
            "--impl",
            "pg",
            "--threads",
            "1,2",
            "--duration",
            "30ms",
        ])
        .args([
            "--warmup",
            "5ms",
            "--repeat",
            "2",
            "--format",
            "json",
            "--no-progress",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let real: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc = documented_example();
    assert_eq!(keys(&real), keys(&doc));
    for k in ["machine", "config"] {
        assert_eq!(keys(&real[k]), keys(&doc[k]), "{k}");
    }
    assert_eq!(keys(&real["series"][0]), keys(&doc["series"][0]));
    let p = &real["series"][0]["points"][1];
    assert_eq!(keys(p), keys(&doc["series"][0]["points"][0]));
    assert_eq!(
        keys(&p["latency_ns"]),
        set(&["p50", "p90", "p99", "p999", "max"])
    );
    assert_eq!(p["runs_ops_per_sec"].as_array().unwrap().len(), 2);
    let r: Report = serde_json::from_value(real).unwrap();
    assert_eq!(r.series[0].points[1].threads, 2);
}
