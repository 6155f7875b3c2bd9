//! Every workload runs: each implementation, preset and knob the workloads read gives a run
//! that does work, and misuse gives a typed error.

use pglocks_harness::{SeriesSpec, TeamSpec};
use pglocks_workloads::*;
use std::time::Duration;

/// A 20 ms run of `threads` backends, unpinned.
fn quick_spec(threads: usize) -> TeamSpec {
    TeamSpec {
        threads,
        duration: Duration::from_millis(20),
        warmup: Duration::from_millis(5),
        pin_order: vec![],
        sample_every: 8,
        sim: None,
        until: None,
    }
}

/// A short run of `s` on `threads` backends that did some work: 20 ms, and if a loaded
/// machine (tests run side by side on 2 cores) gave the threads no time in it, 200 ms, then
/// 2 s. Errors are returned at once.
fn quick_run(
    s: &SeriesSpec<'_>,
    threads: usize,
) -> Result<pglocks_harness::TeamRun, pglocks_harness::HarnessError> {
    run_until_work(s, quick_spec(threads))
}

/// `spec`'s run of `s`, repeated 10 and 100 times longer while it did no work.
fn run_until_work(
    s: &SeriesSpec<'_>,
    mut spec: TeamSpec,
) -> Result<pglocks_harness::TeamRun, pglocks_harness::HarnessError> {
    loop {
        let run = (s.run)(&spec)?;
        if run.total_ops() > 0 || spec.duration >= Duration::from_secs(2) {
            return Ok(run);
        }
        spec.duration *= 10;
    }
}

#[test]
fn every_spin_impl_runs_and_counts() {
    let preset = Preset::by_name("pg94").unwrap();
    for name in workload("spin").unwrap().impls.iter().map(|i| i.name) {
        let s = series("spin", preset, name, &[]).unwrap();
        let run = quick_run(&s, 2).unwrap();
        assert!(run.total_ops() > 0, "{name}");
    }
}

#[test]
fn every_numa_spinlock_runs_wherever_the_model_takes_a_spinlock() {
    let preset = Preset::by_name(DEFAULT_PRESET).unwrap();
    for w in WORKLOADS.iter().filter(|w| w.locks.spinlock) {
        for imp in pglocks_workloads::SPINLOCK_IMPLS {
            let s = series(w.name, preset, imp.name, &[]).unwrap();
            let run = quick_run(&s, 2).unwrap();
            assert!(run.total_ops() > 0, "{} {}", w.name, imp.name);
        }
    }
    // A workload whose model takes none does not offer them.
    assert!(workload("lwlock-shared")
        .unwrap()
        .implementation("cna")
        .is_err());
    // They are built beside 9.6's LWLock and later, padded as 9.6 on pads it: a run elsewhere
    // says so.
    let refused = |preset: &str, sets: &[String]| {
        let preset = Preset::by_name(preset).unwrap();
        let s = series("select-only", preset, "cna", sets).unwrap();
        quick_run(&s, 1).unwrap_err().to_string()
    };
    assert!(refused("pg94", &[]).contains("9.6 and later"));
    let padded = refused("pg18", &["lwlock_padding=64".into()]);
    assert!(padded.contains("lwlock_padding=64"), "{padded}");
}

#[test]
fn every_rw_lock_runs_wherever_an_lwlock_is_the_hot_lock() {
    let preset = Preset::by_name(DEFAULT_PRESET).unwrap();
    let offered: Vec<&str> = WORKLOADS
        .iter()
        .filter(|w| w.rw_lwlock_stands_in())
        .map(|w| w.name)
        .collect();
    for name in [
        "lwlock-mixed",
        "buffer-lookup",
        "lmgr-relation",
        "snapshot",
        "select-only",
        "tpcb-like",
    ] {
        assert!(offered.contains(&name), "{name} not in {offered:?}");
    }
    for name in &offered {
        for imp in pglocks_workloads::LWLOCK_RW_IMPLS {
            let s = series(name, preset, imp.name, &[]).unwrap();
            let run = quick_run(&s, 2).unwrap();
            assert!(run.total_ops() > 0, "{name} {}", imp.name);
        }
    }
    // WAL insertion's locks are not offered; an s_lock that does not read first is refused.
    assert!(workload("wal-insert")
        .unwrap()
        .implementation("shfl-rw")
        .is_err());
    let s = series(
        "select-only",
        Preset::by_name("pg92").unwrap(),
        "cohort-rw",
        &[],
    )
    .unwrap();
    let e = quick_run(&s, 1).unwrap_err().to_string();
    assert!(e.contains("tas_spin=off"), "{e}");
}

#[test]
fn every_lwlock_workload_and_impl_runs() {
    for preset in ["pg92", "pg94", "pg95", "pg96", "pg18"] {
        let preset = Preset::by_name(preset).unwrap();
        for w in [
            "lwlock-exclusive",
            "lwlock-shared",
            "lwlock-mixed",
            "buffer-lookup",
        ] {
            for name in workload(w).unwrap().impls.iter().map(|i| i.name) {
                let s = series(w, preset, name, &["read_ratio=0.5".into()]).unwrap();
                let run = quick_run(&s, 3).unwrap();
                assert!(run.total_ops() > 0, "{w} {name}");
            }
        }
    }
}

#[test]
fn buffer_lookup_misses_run_the_clock_sweep_with_either_hand() {
    for preset in ["pg94", "pg95", "pg96"] {
        let p = Preset::by_name(preset).unwrap();
        let sets = ["hit_ratio=0.5".into(), "nbuffers=256".into()];
        let run = quick_run(&series("buffer-lookup", p, "pg", &sets).unwrap(), 3).unwrap();
        let counters = run.stats.events.counters();
        let count = |name: &str| counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
        assert!(
            count("bufmgr.hits") > 0 && count("bufmgr.reads") > 0 && count("bufmgr.evictions") > 0,
            "{preset}: {counters:?}"
        );
        let sweeps = run.stats.events.distributions();
        assert!(sweeps
            .iter()
            .any(|d| d.0 == "bufmgr.sweep_ticks" && d.1.count() > 0));
    }
    // 16 buffers (PostgreSQL's least), 24 backends each holding a pin across a 1 ms read:
    // PostgreSQL's error.
    let p = Preset::by_name("pg18").unwrap();
    let sets = [
        "hit_ratio=0".into(),
        "nbuffers=16".into(),
        "read_latency=1ms".into(),
    ];
    let e = (series("buffer-lookup", p, "pg", &sets).unwrap().run)(&quick_spec(24))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no unpinned buffers available"), "{e}");
}

#[test]
fn lmgr_workloads_run_with_and_without_the_fast_path() {
    for w in ["lmgr-relation", "lmgr-vxid", "lmgr-strong-mix"] {
        for preset in ["pg81", "pg91", "pg92", "pg18"] {
            let preset = Preset::by_name(preset).unwrap();
            let sets = ["relations=3".into(), "strong_every=5".into()];
            let s = series(w, preset, "pg", &sets).unwrap();
            assert!(
                quick_run(&s, 3).unwrap().total_ops() > 0,
                "{w} {}",
                preset.name
            );
        }
    }
}

#[test]
fn wal_workloads_run_on_every_variant_and_report_the_ideal() {
    for w in ["wal-insert", "wal-commit"] {
        for preset in ["pg91", "pg92", "pg93", "pg94", "pg18"] {
            let preset = Preset::by_name(preset).unwrap();
            let sets = [
                "flush_latency=200us".into(),
                "commit_delay=10".into(),
                "commit_siblings=1".into(),
                "wal_buffers=8".into(),
                "record_size=3000".into(),
            ];
            let s = series(w, preset, "pg", &sets).unwrap();
            let run = quick_run(&s, 3).unwrap();
            assert!(run.total_ops() > 0, "{w} {}", preset.name);
            let ideal = run.ideal_ops_per_sec;
            if w == "wal-commit" {
                // 3 backends, 200 µs per flush.
                assert_eq!(ideal, Some(15_000.0), "{}", preset.name);
                let commits = run.stats.events.counters();
                assert!(commits.iter().any(|c| c.0 == "wal.commits" && c.1 > 0));
            } else {
                assert_eq!(ideal, None);
            }
        }
    }
    // The other devices: no known latency, no ideal.
    let p = Preset::by_name("pg18").unwrap();
    for dev in ["null", "file"] {
        let s = series("wal-commit", p, "pg", &[format!("flush_device={dev}")]).unwrap();
        let run = quick_run(&s, 2).unwrap();
        assert!(
            run.total_ops() > 0 && run.ideal_ops_per_sec.is_none(),
            "{dev}"
        );
    }
}

#[test]
fn shm_mq_streams_pairs_and_a_solo_thread_with_either_impl() {
    let count = |run: &pglocks_harness::TeamRun, name: &str| {
        let counters = run.stats.events.counters();
        counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1)
    };
    for preset in ["pg14", "pg18"] {
        let preset = Preset::by_name(preset).unwrap();
        for name in workload("shm-mq").unwrap().impls.iter().map(|i| i.name) {
            // Small messages; then messages larger than the ring.
            for sets in [
                vec!["msg_size=64".to_string()],
                vec!["msg_size=3000".into(), "queue_size=1024".into()],
            ] {
                for threads in [1, 2, 3] {
                    let s = series("shm-mq", preset, name, &sets).unwrap();
                    let run = (s.run)(&quick_spec(threads)).unwrap();
                    // Operations are messages received: the senders' calls are not counted.
                    assert!(run.total_ops() > 0, "{name} {sets:?} {threads}");
                    assert_eq!(run.per_thread_ops[0] == 0, threads > 1, "{name} {threads}");
                    let size: u64 = sets[0][9..].parse().unwrap();
                    assert_eq!(
                        count(&run, "shm_mq.bytes"),
                        count(&run, "shm_mq.messages") * size,
                        "{name} {sets:?}"
                    );
                    assert!(run
                        .stats
                        .events
                        .counters()
                        .iter()
                        .any(|c| c.0 == "shm_mq.mb_per_sec"));
                }
            }
        }
    }
    let e = series("shm-mq", Preset::by_name("pg18").unwrap(), "std", &[])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("pg, crossbeam"), "{e}");
}

#[test]
fn clog_workloads_run_on_every_variant() {
    for w in ["clog-get", "clog-set"] {
        for preset in ["pg91", "pg92", "pg96", "pg11", "pg17"] {
            let preset = Preset::by_name(preset).unwrap();
            let sets = ["xid_window=400000".into(), "slru_latency=10us".into()];
            let s = series(w, preset, "pg", &sets).unwrap();
            let run = quick_run(&s, 3).unwrap();
            assert!(run.total_ops() > 0, "{w} {}", preset.name);
        }
    }
    // CLOGShmemBuffers of each release, at the default 8 GB and at 128 MB of shared_buffers.
    for (preset, big, small) in [
        ("pg91", 8, 8),
        ("pg92", 32, 32),
        ("pg96", 128, 32),
        ("pg17", 1024, 32),
    ] {
        let mut s = Preset::by_name(preset).unwrap().settings();
        assert_eq!(s.clog_buffers(), big, "{preset}");
        s.apply("shared_buffers=128").unwrap();
        assert_eq!(s.clog_buffers(), small, "{preset} at 128 MB");
    }
    let mut s = Preset::by_name("pg17").unwrap().settings();
    s.apply("shared_buffers=16").unwrap();
    assert_eq!(s.clog_buffers(), 16, "the minimum, one bank");
    // An explicit clog_buffers wins, in either order.
    s.apply("clog_buffers=48").unwrap();
    s.apply("shared_buffers=8192").unwrap();
    assert_eq!(s.clog_buffers(), 48);
    assert_eq!(
        Preset::by_name("pg91").unwrap().settings().slru_victim,
        pglocks_slru::Victim::PlainLru
    );
    assert!(s.apply("slru_victim=random").is_err());
}

#[test]
fn sinval_check_runs_locked_and_wait_free_with_idle_backends() {
    for preset in ["pg81", "pg91", "pg92", "pg18"] {
        let preset = Preset::by_name(preset).unwrap();
        for sets in [
            vec![],
            vec![
                "inval_rate=0.5".into(),
                "inval_batch=100".into(),
                "idle_backends=2".into(),
            ],
        ] {
            let s = series("sinval-check", preset, "pg", &sets).unwrap();
            // No warm-up: the idle backends' first reset must fall in the measured run
            // (a backend already reset is not counted again). The team still runs until the
            // controlling thread starts the measured phase, and on a loaded machine it may
            // fill the ring before then: a run whose counts then miss the one-time signal and
            // reset is made again, up to three times.
            let spec = TeamSpec {
                warmup: Duration::ZERO,
                ..quick_spec(2)
            };
            for attempt in 1..=3 {
                let run = run_until_work(&s, spec.clone()).unwrap();
                assert!(run.total_ops() > 0, "{} {sets:?}", preset.name);
                let counters = run.stats.events.counters();
                let count = |name: &str| counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
                if sets.is_empty() {
                    assert_eq!(count("sinval.messages_read"), 0, "{}", preset.name);
                    break;
                }
                // Idle backends fall a whole ring behind: signalled, then reset.
                assert!(count("sinval.messages_read") > 0, "{counters:?}");
                let seen = count("sinval.resets") > 0 && count("sinval.catchup_signals") > 0;
                if run.total_ops() <= 400 || seen {
                    break;
                }
                assert!(attempt < 3, "{}: {counters:?}", preset.name);
            }
        }
    }
}

/// Every workload on every preset (its first implementation, PostgreSQL's model), and every
/// implementation on the default preset, for a short run: none fails and each does work.
#[test]
fn every_preset_runs_every_workload() {
    let sets = [
        "backends=10".into(),
        "flush_latency=50us".into(),
        "xid_window=5000".into(),
        "txn_size=2000".into(),
        "work_mem_changes=500".into(),
        "row_work=0".into(),
    ];
    for w in WORKLOADS {
        // Every distinct rule set: a release without a modelled change runs as its twin.
        for preset in PRESETS.iter().filter(|p| p.same_as().is_none()) {
            let s = series(w.name, preset, w.impls[0].name, &sets).unwrap();
            let run = quick_run(&s, 2).unwrap();
            assert!(run.total_ops() > 0, "{} on {}", w.name, preset.name);
        }
        let default = Preset::by_name(DEFAULT_PRESET).unwrap();
        for impl_name in w.impls.iter().map(|i| i.name) {
            let s = series(w.name, default, impl_name, &sets).unwrap();
            let run = quick_run(&s, 2).unwrap();
            assert!(run.total_ops() > 0, "{} {impl_name}", w.name);
        }
    }
}

/// `apply` in each streaming mode: the same rows reach the subscriber (the runner checks),
/// streamed transactions take the mode's path, and a mode the release lacks is refused.
#[test]
fn apply_streams_by_mode_and_refuses_modes_the_release_lacks() {
    let metric = |run: &pglocks_harness::TeamRun, name: &str| {
        run.stats
            .events
            .counters()
            .iter()
            .find(|c| c.0 == name)
            .map_or(0, |c| c.1)
    };
    let preset = Preset::by_name("pg18").unwrap();
    // Three transactions streamed at once: with parallel, two go to the two workers
    // (max_parallel_apply_workers_per_subscription) and the third is spooled.
    for (mode, serialized, parallel) in [("off", 0, 0), ("on", 3, 0), ("parallel", 1, 2)] {
        let sets = [
            format!("mode={mode}"),
            "txn_size=3000".into(),
            "work_mem_changes=1000".into(),
            "row_work=0".into(),
        ];
        let s = series("apply", preset, "pg", &sets).unwrap();
        let run = (s.run)(&quick_spec(3)).unwrap();
        assert_eq!(run.total_ops(), 9_000, "{mode}");
        assert_eq!(
            metric(&run, "apply.streamed_serialized"),
            serialized,
            "{mode}"
        );
        assert_eq!(metric(&run, "apply.streamed_parallel"), parallel, "{mode}");
        assert_eq!(run.latency.len(), 3, "{mode}: one latency per transaction");
    }
    let e = series(
        "apply",
        Preset::by_name("pg14").unwrap(),
        "pg",
        &["mode=parallel".into()],
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("streaming = parallel is 16+"), "{e}");
    let e = series(
        "apply",
        Preset::by_name("pg11").unwrap(),
        "pg",
        &["mode=on".into()],
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("14+"), "{e}");
}

/// The fault knobs: a failed fsync ends a WAL run with PostgreSQL's PANIC, a failed SLRU
/// read ends a commit-log run with its ERROR, and latency spikes only slow runs down.
#[test]
fn fault_knobs_fail_runs_loudly_and_spikes_only_slow_them() {
    let preset = Preset::by_name(DEFAULT_PRESET).unwrap();
    let run = |w: &str, fault: &str| {
        let sets = [
            "flush_latency=50us".into(),
            "xid_window=2000000".into(),
            "slru_latency=0".into(),
            fault.into(),
        ];
        (series(w, preset, "pg", &sets).unwrap().run)(&quick_spec(2))
    };
    let e = run("wal-commit", "wal_fault=fsync:3")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("PANIC") && e.contains("could not fdatasync file \"pg_wal/"),
        "{e}"
    );
    let e = run("clog-get", "slru_fault=read:2")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("could not read from file \"pg_xact/"), "{e}");
    let spikes = "wal_fault=fsync:every:3:sleep=1ms,write:every:2:sleep=100us";
    assert!(run("wal-commit", spikes).unwrap().total_ops() > 0);
    let spikes = "slru_fault=read:every:3:sleep=200us";
    assert!(run("clog-get", spikes).unwrap().total_ops() > 0);
}

#[test]
fn macro_workloads_run_on_every_preset() {
    for preset in PRESETS.iter().filter(|p| p.same_as().is_none()) {
        for w in ["select-only", "tpcb-like", "insert-commit"] {
            let sets = [
                "backends=10".into(),
                "scale=2".into(),
                "flush_latency=50us".into(),
            ];
            let s = series(w, preset, "pg", &sets).unwrap();
            let run = quick_run(&s, 3).unwrap();
            assert!(run.total_ops() > 0, "{w} {}", preset.name);
            // Each transaction reads at least three pages (select-only: the index root, a
            // leaf and a heap page; insert-commit: the target page, the leaf, and a new page
            // now and then).
            let counters = run.stats.events.counters();
            let count = |name: &str| counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
            let pages = count("bufmgr.hits") + count("bufmgr.reads");
            assert!(
                pages >= 2 * run.total_ops(),
                "{w} {} {counters:?}",
                preset.name
            );
            if w != "select-only" {
                assert!(count("wal.commits") >= run.total_ops(), "{counters:?}");
            }
            if w == "tpcb-like" {
                // Two branches: each update of one finds its last updater's xid, running
                // (a wait) or ended (a commit-log lookup, then the hint bit).
                let found = count("tpcb.row_waits") + count("tpcb.clog_lookups");
                assert!(found >= run.total_ops() / 2, "{counters:?}");
                assert!(count("procarray.in_progress_scans") > 0, "{counters:?}");
            }
        }
    }
}

#[test]
fn procarray_workloads_run_on_every_layout() {
    for w in ["snapshot", "end-xact"] {
        for preset in ["pg91", "pg92", "pg95", "pg96", "pg14"] {
            let preset = Preset::by_name(preset).unwrap();
            let sets = [
                "backends=10".into(),
                "commit_ratio=0.2".into(),
                "subxacts=70".into(),
            ];
            let s = series(w, preset, "pg", &sets).unwrap();
            let run = quick_run(&s, 3).unwrap();
            assert!(run.total_ops() > 0, "{w} {}", preset.name);
        }
    }
    // 14 reuses a read-only load's snapshots.
    let s = series("snapshot", Preset::by_name("pg14").unwrap(), "pg", &[]).unwrap();
    let run = quick_run(&s, 2).unwrap();
    let counters = run.stats.events.counters();
    assert!(counters
        .iter()
        .any(|c| c.0 == "procarray.snapshot_reused" && c.1 > 0));
    // Fewer registered backends than threads is refused when the run starts.
    let s = series(
        "snapshot",
        Preset::by_name("pg92").unwrap(),
        "pg",
        &["backends=2".into()],
    )
    .unwrap();
    let e = quick_run(&s, 3).err().unwrap().to_string();
    assert!(e.contains("backends (2) must be at least"), "{e}");
}

#[test]
fn wal_knobs_reject_nonsense() {
    let p = Preset::by_name("pg18").unwrap();
    for (set, expect) in [
        ("flush_latency=fast", "2ms"),
        ("flush_device=disk", "simulated, file or null"),
        ("wal_insert_locks=0", "one or a whole number"),
        ("commit_delay=1s", "microseconds"),
        ("flush_wait=spin", "acquire or acquire_or_wait"),
    ] {
        let e = series("wal-commit", p, "pg", &[set.into()])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(expect), "{set}: {e}");
    }
    let mut s = p.settings();
    s.apply("wal_insert_locks=one").unwrap();
    assert_eq!(s.wal_insertion, pglocks_wal::Insertion::OneLock);
    s.apply("commit_delay=10us").unwrap();
    assert_eq!(s.commit_delay, std::time::Duration::from_micros(10));
}

#[test]
fn unknown_names_list_the_valid_ones() {
    let p = Preset::by_name("pg18").unwrap();
    let e = series("spinn", p, "pg", &[]).err().unwrap().to_string();
    assert!(e.contains("valid: spin, lwlock-exclusive"), "{e}");
    let e = series("spin", p, "futex", &[]).err().unwrap().to_string();
    assert!(
        e.contains("pg, tas, ticket, mcs, floor, parking_lot, std"),
        "{e}"
    );
    let e = series("spin", p, "pg", &["x=1".into()])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("unknown knob 'x'"), "{e}");
}

/// The acquisitions of [`Counted`] locks, all tests together (only the plug-in test uses them).
static COUNTED_LWLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static COUNTED_SPINLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// 9.6's LWLock, counting its acquisitions: a caller's lock that shows where it was used.
struct Counted(pglocks_lwlock::AtomicLwLock);

// SAFETY: every acquisition and release is the inner 9.6 LWLock's; counting changes nothing.
unsafe impl pglocks_lwlock::RawLwLock for Counted {
    fn new(name: &'static str) -> Self {
        Counted(pglocks_lwlock::AtomicLwLock::new(name))
    }
    fn acquire(
        &self,
        b: &mut pglocks_proc::Backend,
        mode: pglocks_lwlock::LwLockMode,
    ) -> Result<bool, pglocks_lwlock::LwLockError> {
        COUNTED_LWLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.acquire(b, mode)
    }
    fn conditional_acquire(
        &self,
        b: &mut pglocks_proc::Backend,
        mode: pglocks_lwlock::LwLockMode,
    ) -> Result<bool, pglocks_lwlock::LwLockError> {
        COUNTED_LWLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.conditional_acquire(b, mode)
    }
    fn acquire_or_wait(
        &self,
        b: &mut pglocks_proc::Backend,
        mode: pglocks_lwlock::LwLockMode,
    ) -> Result<bool, pglocks_lwlock::LwLockError> {
        COUNTED_LWLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.acquire_or_wait(b, mode)
    }
    fn release(&self, b: &mut pglocks_proc::Backend) -> Result<(), pglocks_lwlock::LwLockError> {
        self.0.release(b)
    }
}

/// s_lock with TAS_SPIN, counting its acquisitions.
struct CountedSpin(pglocks_spin::PgSpinLock<true>);

// SAFETY: every operation is the inner s_lock's, which is a spinlock; counting changes nothing.
unsafe impl pglocks_spin::RawSpinLock for CountedSpin {
    const NAME: &'static str = "counted";
    fn new() -> Self {
        CountedSpin(pglocks_spin::PgSpinLock::new())
    }
    fn lock(&self, backend: &mut pglocks_proc::Backend) -> Result<(), pglocks_spin::StuckSpinlock> {
        COUNTED_SPINLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.lock(backend)
    }
    fn try_lock(&self) -> bool {
        COUNTED_SPINLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.try_lock()
    }
    unsafe fn unlock(&self) {
        // SAFETY: the caller holds the lock, as `unlock` requires.
        unsafe { self.0.unlock() }
    }
}

#[test]
fn a_callers_lock_runs_wherever_the_workloads_model_takes_one() {
    use std::sync::atomic::Ordering::Relaxed;
    let pg18 = Preset::by_name("pg18").unwrap();
    // Invalidations sent, so that the wait-free sinval check takes msgnumLock at all.
    let sets = ["txn_size=100", "flush_latency=0", "inval_rate=0.2"];
    let settings = |p: &Preset| {
        let mut s = p.settings();
        for set in sets {
            s.apply(set).unwrap();
        }
        s
    };
    // 9.1's sinval check takes msgnumLock on every call, so select-only takes a spinlock too.
    let pg91 = Preset::by_name("pg91").unwrap();
    for w in WORKLOADS {
        if w.locks.lwlock {
            let before = COUNTED_LWLOCK.load(Relaxed);
            let s = series_on_lwlock::<Counted>(w.name, pg18, "counted", settings(pg18)).unwrap();
            assert_eq!(
                (s.workload.as_str(), s.impl_name.as_str()),
                (w.name, "counted")
            );
            let run = quick_run(&s, 2).unwrap();
            assert!(run.total_ops() > 0, "{}", w.name);
            assert!(
                COUNTED_LWLOCK.load(Relaxed) > before,
                "{}: the caller's LWLock unused",
                w.name
            );
        } else {
            let e = series_on_lwlock::<Counted>(w.name, pg18, "counted", settings(pg18));
            let e = e.err().unwrap().to_string();
            assert!(
                e.contains("takes no LWLock") && e.contains("buffer-lookup"),
                "{e}"
            );
        }
        if w.locks.spinlock {
            let before = COUNTED_SPINLOCK.load(Relaxed);
            let s =
                series_on_spinlock::<CountedSpin>(w.name, pg91, "counted", settings(pg91)).unwrap();
            let run = quick_run(&s, 2).unwrap();
            assert!(run.total_ops() > 0, "{}", w.name);
            assert!(
                COUNTED_SPINLOCK.load(Relaxed) > before,
                "{}: the caller's spinlock unused",
                w.name
            );
        }
    }
}

#[test]
fn client_round_trip_waits_at_every_message_of_the_transaction() {
    // tpcb-like's BEGIN, five statements and END; select-only's one statement.
    for (w, messages) in [("tpcb-like", 7), ("select-only", 1)] {
        let preset = Preset::by_name("pg15").unwrap();
        let sets = ["client_round_trip=2us".into(), "scale=2".into()];
        let s = series(w, preset, "pg", &sets).unwrap();
        let run = quick_run(&s, 1).unwrap();
        let ops = run.total_ops();
        assert!(ops > 0, "{w}");
        let reads = run
            .stats
            .waits
            .entries()
            .iter()
            .find(|e| e.lock == "ClientRead")
            .map_or(0, |e| e.count);
        // The window may cut a transaction at either end.
        assert!(
            reads.abs_diff(messages * ops) <= 2 * messages,
            "{w}: {reads} waits for the client in {ops} transactions"
        );
        // Without it the client answers at once.
        let run = quick_run(&series(w, preset, "pg", &["scale=2".into()]).unwrap(), 1).unwrap();
        assert!(
            !run.stats
                .waits
                .entries()
                .iter()
                .any(|e| e.lock == "ClientRead"),
            "{w}"
        );
    }
}
