//! `--machine sim:PROFILE` and `pglocks calibrate` from the command line.

mod common;
use common::{fails_with, pglocks};

/// Two locks at 1 and 12 threads on the simulated Opteron, as JSON.
const OPTERON_RUN: &[&str] = &[
    "run",
    "spin",
    "--impl",
    "pg,ticket",
    "--machine",
    "sim:opteron-48",
    "--threads",
    "1,12",
    "--format",
    "json",
];

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_simulated_run_prints_the_report_of_a_real_one_and_names_its_machine() {
    let out = pglocks(OPTERON_RUN);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sim = &report["machine"]["simulated"];
    assert_eq!(sim["profile"], "opteron-48");
    assert!(sim["operations"].as_u64().unwrap() > 0);
    assert_eq!(report["machine"]["cpus"], 48);
    // The defaults under sim: at least 20 ms of virtual time and on until 4,000 operations,
    // one run (it would repeat exactly).
    assert_eq!(report["config"]["duration_ms"], 20);
    assert_eq!(report["config"]["until"]["ops"], 4000);
    assert_eq!(report["config"]["repeat"], 1);
    assert_eq!(report["series"].as_array().unwrap().len(), 2);
    // Deterministic: the same command gives the same figures.
    let again = pglocks(OPTERON_RUN);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["series"], again["series"]);
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn an_asynchronous_commit_runs_simulated_with_its_wal_writer_flushing_in_the_background() {
    let args = [
        "run",
        "wal-commit",
        "--set",
        "synchronous_commit=off",
        "--machine",
        "sim:opteron-48",
        "--threads",
        "2",
        "--format",
        "json",
    ];
    let out = pglocks(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let point = &report["series"][0]["points"][0];
    let metric = |name: &str| {
        point["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or(0.0)
    };
    // Every commit was asynchronous, and the WAL writer flushed in the background.
    assert!(metric("wal.async_commits") > 0.0);
    assert_eq!(metric("wal.async_commits"), metric("wal.commits"));
    assert!(metric("wal.background_flushes") > 0.0, "{point}");
    let again = pglocks(&args);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["series"], again["series"]);
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn what_cannot_run_simulated_is_a_usage_error_that_says_what_can() {
    let run = |extra: &[&str]| {
        let mut v = vec!["run", "--threads", "2", "--repeat", "1", "--machine"];
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let check = |args: Vec<String>, needle: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&args, needle)
    };
    check(
        run(&["sim:opteron-48", "spin", "--impl", "parking_lot"]),
        "the implementations of spin that do: pg, tas, ticket, mcs, floor",
    );
    check(
        run(&["sim:nowhere", "spin"]),
        "no machine profile 'nowhere' (known: opteron-48",
    );
    check(run(&["big", "spin"]), "expected real or sim:PROFILE");
    check(
        run(&["sim:westmere-80+cycles.fense*2", "spin"]),
        "malformed machine profile westmere-80+cycles.fense*2: 'cycles.fense': the profile has no such value to scale",
    );
    check(
        run(&["sim:westmere-80+model.jitter=2", "spin"]),
        "model.jitter must be in [0, 1)",
    );
    check(
        run(&["sim:westmere-80", "spin", "--sysfs-root", "/tmp"]),
        "a simulated one has its profile's topology",
    );
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn calibrate_writes_the_profile_that_sim_this_runs_on() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("calibrated");
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("this.toml");
    let out = pglocks(&["calibrate", "--quick", "--out", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("name = \"this\""), "{text}");
    // Each measured figure is reported with the range of its samples, on stdout and in the file.
    let stdout = String::from_utf8_lossy(&out.stdout);
    for said in [&stdout[..], &text[..]] {
        let hit = said
            .lines()
            .find(|l| l.contains("cycles.hit"))
            .unwrap_or("");
        assert!(
            hit.contains("cycles (") && hit.contains("7 samples)"),
            "{said}"
        );
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pglocks"))
        .args(["run", "spin", "--machine", "sim:this", "--threads", "1,2"])
        .args(["--repeat", "1", "--format", "json"])
        .env("PGLOCKS_PROFILE_DIR", &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["machine"]["simulated"]["profile"], "this");
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn the_hot_lines_diagnostic_names_the_lock_word_a_contended_run_waits_on() {
    // `spin` at 8 threads on the simulated Opteron, with `n` hot lines asked for: stderr.
    let hot = |n: &str, extra: &[&str]| -> String {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pglocks"))
            .args([
                "run",
                "spin",
                "--threads",
                "8",
                "--machine",
                "sim:opteron-48",
            ])
            .args(["--no-progress", "--format", "csv"])
            .args(extra)
            .env("PGLOCKS_SIM_HOT_LINES", n)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    let err = hot("1", &["--impl", "tas"]);
    assert!(
        err.contains("hot lines of a simulated run of 8 threads on opteron-48"),
        "{err}"
    );
    // One line asked for: the TAS lock's byte, named by its place in the shared-memory map.
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("us waited")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("spinlock and counter[0]"), "{err}");
    // With a line of data in the critical section, each holder fetches it from the last too.
    let err = hot("2", &["--impl", "mcs", "--set", "cs_lines=1"]);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("us waited")).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("critical section's data[0]")),
        "{err}"
    );
}

/// In a build without the simulator, a command that needs it becomes the simulator's build named
/// by `PGLOCKS_SIM_BIN`, with the same arguments; its output and exit status are the command's.
#[test]
#[cfg(not(pglocks_sim))]
fn a_build_without_the_simulator_hands_the_command_to_the_simulators_build() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sim-hand-over");
    std::fs::create_dir_all(&dir).unwrap();
    let stand_in = dir.join("pglocks-sim");
    std::fs::write(
        &stand_in,
        "#!/bin/sh\necho \"stand-in: $* handed=$PGLOCKS_SIM_HANDED_OVER\"\nexit 7\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let with_sim_bin = |sim_bin: &std::path::Path, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pglocks"))
            .args(args)
            .env("PGLOCKS_SIM_BIN", sim_bin)
            .output()
            .unwrap()
    };
    let run = |args: &[&str]| with_sim_bin(&stand_in, args);
    for args in [OPTERON_RUN, &["calibrate", "--quick"][..]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(7), "{args:?}");
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            said.trim(),
            format!("stand-in: {} handed=1", args.join(" "))
        );
    }
    // A real run stays here; a profile that does not exist is an error before any hand-over.
    let real = run(&[
        "run",
        "spin",
        "--threads",
        "1",
        "--duration",
        "20ms",
        "--warmup",
        "0",
    ]);
    assert!(
        real.status.success(),
        "{}",
        String::from_utf8_lossy(&real.stderr)
    );
    fails_with(
        &["run", "spin", "--machine", "sim:no-such-machine"],
        "no-such-machine",
    );
    // A program that cannot simulate either (this one) says so instead of handing over again.
    let out = with_sim_bin(env!("CARGO_BIN_EXE_pglocks").as_ref(), OPTERON_RUN);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a simulator's build"), "{err}");
}

/// `pglocks stress` on the simulated Westmere for one episode of `episode` from seed 77, every
/// part on 22 threads.
fn one_episode_stress(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "stress",
        "--machine",
        "sim:westmere-80",
        "--threads",
        "22",
        "--episode",
        "300us",
        "--preempt-every",
        "200us",
        "--seed",
        "77",
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    pglocks(&args)
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_simulated_stress_episode_repeats_exactly_from_its_seed() {
    // A run of one episode (the duration is up after the first): its table, without the host
    // time, is the same in another process.
    let table = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("\nsimulated: 1 episodes, "), "{text}");
        assert!(text.contains("violations 0, hangs 0"), "{text}");
        text.lines()
            .map(|l| l.split(" in ").next().unwrap_or(l).to_string())
            .collect::<Vec<_>>()
    };
    let first = table(one_episode_stress(&["--duration", "1ms"]));
    assert_eq!(first.len(), 2 + 11 + 1, "{first:?}");
    assert_eq!(table(one_episode_stress(&["--duration", "1ms"])), first);
    // What the run starts for each episode: its report as JSON, the same again.
    let episode = || {
        let out = one_episode_stress(&["--one-episode"]);
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["violation"].is_null() && v["hangs"].as_array().unwrap().is_empty());
        assert!(v["preemptions"].as_u64().unwrap() > 0, "{v}");
        v
    };
    assert_eq!(episode(), episode());
    fails_with(
        &["stress", "--machine", "sim:westmere-80", "--episode", "0"],
        "--episode must be longer than 0",
    );
}
