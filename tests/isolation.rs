//! The isolation specs under `tests/isolation/specs`, run by the lock model, must print exactly
//! what PostgreSQL 15's isolationtester printed for them against a real server (the files under
//! `tests/isolation/expected`, recorded with PostgreSQL 15's isolationtester by
//! `tests/isolation/record-expected.sh`; see `tests/isolation/FINDINGS.md`). The runner keeps the tester's clock as virtual time (its 10 ms looks at each
//! waiting step, the sessions' `deadlock_timeout` and `lock_timeout`), never the machine's, so
//! the comparison is exact however loaded the machine is.

use pglocks::isolation::{parse_spec, run_spec};
use pglocks::workloads::Preset;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the model prints for spec `name`, and what PostgreSQL printed.
fn run(name: &str) -> (String, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isolation");
    let spec_text = std::fs::read_to_string(dir.join(format!("specs/{name}.spec"))).unwrap();
    let expected = std::fs::read_to_string(dir.join(format!("expected/{name}.out"))).unwrap();
    let spec = parse_spec(&spec_text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let config = Preset::by_name("pg14")
        .unwrap()
        .settings()
        .lock_manager_config(1);
    let out = run_spec(&spec, config, Some(Duration::from_secs(300)))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (out.stdout, expected)
}

fn check(name: &str) {
    let (stdout, expected) = run(name);
    if stdout != expected {
        let diff: Vec<String> = stdout
            .lines()
            .zip(expected.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(5)
            .map(|(i, (a, b))| format!("line {}: got {a:?}, PostgreSQL printed {b:?}", i + 1))
            .collect();
        panic!(
            "{name} differs from PostgreSQL 15:\n{}\n--- got:\n{}",
            diff.join("\n"),
            stdout
        );
    }
}

macro_rules! specs {
    ($($test:ident => $name:literal,)*) => {
        $(#[test] fn $test() { check($name); })*

        #[test]
        fn every_spec_has_a_test() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isolation/specs");
            let mut on_disk: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
                .collect();
            on_disk.sort();
            let mut listed = vec![$($name.to_string()),*];
            listed.sort();
            assert_eq!(on_disk, listed);
        }
    };
}

specs! {
    mode_conflicts => "mode-conflicts",
    mode_waits => "mode-waits",
    nowait => "nowait",
    lock_timeout => "lock-timeout",
    deadlock_simple => "deadlock-simple",
    deadlock_hard => "deadlock-hard",
    deadlock_hard_first => "deadlock-hard-first",
    deadlock_soft => "deadlock-soft",
    deadlock_soft_2 => "deadlock-soft-2",
    deadlock_soft_4 => "deadlock-soft-4",
    deadlock_ring_3 => "deadlock-ring-3",
    deadlock_ring_4 => "deadlock-ring-4",
    deadlock_ring_5 => "deadlock-ring-5",
    deadlock_ring_6 => "deadlock-ring-6",
    deadlock_upgrade => "deadlock-upgrade",
    deadlock_soft_beside_hard => "deadlock-soft-beside-hard",
    lock_timeout_probe => "lock-timeout-probe",
    lock_upgrade => "lock-upgrade",
    queue_jump => "queue-jump",
    queue_jump_4 => "queue-jump-4",
    rollback_releases => "rollback-releases",
    misc => "misc",
    markers => "markers",
}

/// The position of `line` in `out`, after line `from`.
fn line_at(out: &str, line: &str, from: usize) -> usize {
    out.lines()
        .enumerate()
        .skip(from)
        .find(|(_, l)| *l == line)
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("no {line:?} after line {from} in\n{out}"))
}

/// In a ring where only the last session has a short deadlock_timeout, its timer fires while
/// the tester looks at the other waiting steps, 10 ms each: the step the victim frees is
/// reported before the victim's error (a runner that decides at once reports it after).
#[test]
fn a_ring_reports_the_freed_step_before_the_victims_error() {
    let (out, _) = run("deadlock-ring-4");
    let closed = line_at(
        &out,
        "step s4a1: LOCK TABLE a1 IN SHARE ROW EXCLUSIVE MODE; <waiting ...>",
        0,
    );
    let freed = line_at(&out, "step s3a4: <... completed>", closed);
    let victim = line_at(&out, "step s4a1: <... completed>", closed);
    assert_eq!(
        line_at(&out, "ERROR:  deadlock detected", closed),
        victim + 1
    );
    assert!(freed < victim, "{out}");
}

/// The tester's clock is virtual: the report is the same with every core busy.
#[test]
fn the_report_does_not_depend_on_the_load() {
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n = std::hint::black_box(n.wrapping_mul(31).wrapping_add(1));
                }
            })
        })
        .collect();
    for _ in 0..3 {
        for name in [
            "deadlock-ring-6",
            "deadlock-soft-beside-hard",
            "lock-timeout-probe",
        ] {
            let (stdout, expected) = run(name);
            assert_eq!(stdout, expected, "{name}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
}

#[test]
fn the_cli_runs_a_spec_and_refuses_what_it_cannot_run() {
    let spec =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isolation/specs/deadlock-simple.spec");
    let out = Command::new(env!("CARGO_BIN_EXE_pglocks"))
        .args(["isolation", spec.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("ERROR:  deadlock detected"));

    let bad = std::env::temp_dir().join(format!("pglocks-bad-{}.spec", std::process::id()));
    std::fs::write(
        &bad,
        "session s1\nstep a { BEGIN; }\nstep b { SELECT 1; }\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pglocks"))
        .args(["isolation", bad.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 3") && err.contains("SELECT 1"), "{err}");
}
