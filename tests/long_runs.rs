//! Long runs as a user meets them: every duration and count has a bound that exits 2 with a
//! message (never an abort or a panic), and Ctrl-C keeps what a run measured.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::fails_with;

#[test]
fn extreme_durations_and_counts_exit_2_with_a_message() {
    for (args, needle) in [
        (
            &["run", "spin", "--duration", "99999h", "--threads", "1"][..],
            "at most 30 days",
        ),
        (
            &["run", "spin", "--duration", "99999h", "--threads", "64"],
            "at most 30 days",
        ),
        (&["run", "spin", "--warmup", "31d"], "bad --warmup"),
        (&["run", "spin", "--warmup", "745h"], "at most 30 days"),
        (
            &["run", "spin", "--duration", "18446744073709551616ns"],
            "bad --duration",
        ),
        (&["run", "spin", "--duration", "1e9s"], "bad --duration"),
        (&["run", "spin", "--repeat", "1001"], "from 1 to 1000"),
        (&["run", "spin", "--repeat", "0"], "from 1 to 1000"),
        (
            &["run", "spin", "--repeat", "99999999999999999999"],
            "invalid value",
        ),
        (&["run", "spin", "--threads", "100000"], "65536"),
        (
            &["run", "wal-commit", "--flush-latency", "99999h"],
            "at most 10s",
        ),
        (
            &["run", "wal-commit", "--flush-latency", "1ms..11s"],
            "at most 10s",
        ),
        (
            &["run", "spin", "--set", "commit_delay=99999h"],
            "commit_delay",
        ),
        (
            &["run", "spin", "--set", "wal_writer_delay=1h"],
            "1ms to 10s",
        ),
        (
            &["run", "spin", "--set", "executor_work=1h"],
            "at most 100ms",
        ),
        (
            &["run", "spin", "--set", "read_latency=99999h"],
            "read_latency",
        ),
        (&["stress", "--duration", "99999h"], "at most 30 days"),
        (&["stress", "--hang-after", "99999h"], "at most 30 days"),
        (&["stress", "--duration", "0s"], "duration"),
    ] {
        fails_with(args, needle);
    }
}

/// Starts `args`, sends SIGINT after `after`, and returns its output.
fn interrupted(args: &[&str], after: Duration) -> (Output, Duration) {
    let child = Command::new(env!("CARGO_BIN_EXE_pglocks"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the pglocks binary runs");
    let started = Instant::now();
    std::thread::sleep(after);
    // SAFETY: sends a signal to our own child, whose pid is live until it is waited for.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0);
    let out = child.wait_with_output().expect("the child ends");
    (out, started.elapsed())
}

#[test]
fn ctrl_c_prints_and_saves_the_points_finished_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("report");
    let args = [
        "run",
        "spin",
        "--impl",
        "pg,tas",
        "--threads",
        "1,2",
        "--duration",
        "400ms",
        "--warmup",
        "10ms",
        "--repeat",
        "50",
        "--no-progress",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    // 2 series x 2 counts x 50 rounds of 410 ms: over a minute unless stopped.
    let (out, took) = interrupted(&args, Duration::from_millis(3000));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        stdout.contains("pg94/pg") || stdout.contains("/pg"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(json["interrupted"], true);
    let points = json["series"][0]["points"].as_array().unwrap();
    assert!(!points.is_empty() && points[0]["threads"] == 1, "{json}");
    assert!(out_dir.join("index.html").exists());
}

#[test]
fn ctrl_c_stops_stress_with_its_counts_and_exits_130() {
    let (out, took) = interrupted(
        &[
            "stress",
            "--duration",
            "10m",
            "--threads",
            "12",
            "--no-progress",
        ],
        Duration::from_millis(3000),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert!(stdout.contains("violations 0, hangs 0"), "{stdout}");
    assert!(stderr.contains("interrupted after"), "{stderr}");
}
