//! What pglocks measures: workloads, each one operation that the harness runs on N threads, and
//! the PostgreSQL release presets that configure the models.
//!
//! A workload is a name, a list of implementations (PostgreSQL's model per preset, and peers such
//! as parking_lot), and for each (preset, impl) pair a runner that builds fresh shared state and
//! hands the harness one operation per thread. Workloads never print and never time anything.

mod apply;
mod bufmgr;
mod clog;
mod knob;
mod lmgr;
mod lwlock;
mod pgbench;
pub mod preset;
mod procarray;
mod settings;
mod shmmq;
mod sinval;
mod spin;
pub mod stress;
mod wal;

pub use knob::Knob;
pub use preset::{knob, FlushDeviceKind, Preset, Settings, DEFAULT_PRESET, KNOBS, PRESETS};

use pglocks_harness::SeriesSpec;

/// A workload, as `pglocks list` shows it.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadInfo {
    /// Name on the command line.
    pub name: &'static str,
    /// One line on what one operation is.
    pub summary: &'static str,
    /// Implementations with one line each; the first is PostgreSQL's.
    pub impls: &'static [(&'static str, &'static str)],
}

/// Every workload.
pub const WORKLOADS: &[WorkloadInfo] = &[
    WorkloadInfo {
        name: "spin",
        summary: "acquire a spinlock, bump a counter under it, release",
        impls: spin::IMPLS,
    },
    WorkloadInfo {
        name: "lwlock-exclusive",
        summary: "acquire one LWLock exclusive, release",
        impls: lwlock::IMPLS,
    },
    WorkloadInfo {
        name: "lwlock-shared",
        summary: "acquire one LWLock shared, release",
        impls: lwlock::IMPLS,
    },
    WorkloadInfo {
        name: "lwlock-mixed",
        summary: "acquire one LWLock shared (read_ratio of the time) or exclusive, release",
        impls: lwlock::IMPLS,
    },
    WorkloadInfo {
        name: "buffer-lookup",
        summary: "read a page (ReadBuffer: partition lock shared, lookup, pin) and release it; `hit_ratio` of them hit, misses run the clock sweep",
        impls: lwlock::BUFFER_IMPLS,
    },
    WorkloadInfo {
        name: "lmgr-relation",
        summary:
            "a SELECT's relation locks: AccessShareLock on `relations` relations, then release all",
        impls: lmgr::IMPLS,
    },
    WorkloadInfo {
        name: "lmgr-vxid",
        summary: "a transaction's start and end: the lock on its virtual transaction id",
        impls: lmgr::IMPLS,
    },
    WorkloadInfo {
        name: "lmgr-strong-mix",
        summary: "lmgr-relation, with AccessExclusiveLock on one relation every `strong_every` transactions",
        impls: lmgr::IMPLS,
    },
    WorkloadInfo {
        name: "clog-get",
        summary: "look up a transaction's status among the newest `xid_window` xids (TransactionIdGetStatus)",
        impls: clog::IMPLS,
    },
    WorkloadInfo {
        name: "clog-set",
        summary: "commit the next xid in the commit log (TransactionIdCommitTree; group update from 11)",
        impls: clog::IMPLS,
    },
    WorkloadInfo {
        name: "sinval-check",
        summary: "check for shared invalidation messages and read them (AcceptInvalidationMessages); send some at `inval_rate`",
        impls: sinval::IMPLS,
    },
    WorkloadInfo {
        name: "snapshot",
        summary: "a read-only transaction: GetSnapshotData over `backends` registered backends, one visibility test, end (a `commit_ratio` share write instead)",
        impls: procarray::IMPLS,
    },
    WorkloadInfo {
        name: "end-xact",
        summary: "a write transaction's xid and end: GetNewTransactionId, ProcArrayEndTransaction (group XID clear from 9.6)",
        impls: procarray::IMPLS,
    },
    WorkloadInfo {
        name: "wal-insert",
        summary: "insert one WAL record of `record_size` bytes (XLogInsertRecord)",
        impls: wal::IMPLS,
    },
    WorkloadInfo {
        name: "wal-commit",
        summary: "a commit: insert a commit record and XLogFlush it, or with synchronous_commit = off leave it to the WAL writer (group commit; ideal = threads / flush_latency)",
        impls: wal::IMPLS,
    },
    WorkloadInfo {
        name: "shm-mq",
        summary: "receive one message of `msg_size` bytes streamed by a partner thread through a `queue_size` shm_mq (threads pair up sender -> receiver; an odd one out uses its own queue with nowait)",
        impls: shmmq::IMPLS,
    },
    WorkloadInfo {
        name: "apply",
        summary: "logical replication of threads x `txns` transactions of `txn_size` inserts: the publisher executes and streams them, the subscriber applies them as `mode` (off|on|parallel) says; ops are changes applied, elapsed is first insert to last commit on the subscriber (one run; duration unused)",
        impls: apply::IMPLS,
    },
    WorkloadInfo {
        name: "select-only",
        summary: "pgbench -S's transaction: vxid lock, AccessShareLock on the table and its index, sinval checks, a snapshot, the index descent and heap page, commit",
        impls: pgbench::IMPLS,
    },
    WorkloadInfo {
        name: "tpcb-like",
        summary: "pgbench's default transaction: three UPDATEs (waiting for a row's updater: tuple lock, XactLockTableWait), a SELECT and an INSERT, a snapshot each, xid, WAL records, commit flush, CLOG, ProcArray end",
        impls: pgbench::IMPLS,
    },
    WorkloadInfo {
        name: "insert-commit",
        summary: "one INSERT per transaction: xid and its lock, heap and index pages, WAL records, commit flush (group commit), CLOG, ProcArray end",
        impls: pgbench::IMPLS,
    },
];

/// Errors of workload selection and configuration, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// No such workload.
    #[error("unknown workload '{name}' (valid: {valid})")]
    UnknownWorkload {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// No such implementation for the workload.
    #[error("unknown impl '{name}' for workload {workload} (valid: {valid})")]
    UnknownImpl {
        /// The workload.
        workload: String,
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// No such preset.
    #[error("unknown preset '{name}' (valid: {valid})")]
    UnknownPreset {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// No such knob.
    #[error("unknown knob '{name}' for --set (valid: {valid})")]
    UnknownKnob {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// A knob value of the wrong kind.
    #[error("bad value '{value}' for knob {knob}: expected {expected}")]
    BadKnobValue {
        /// The knob.
        knob: String,
        /// The value given.
        value: String,
        /// What it takes.
        expected: String,
    },
    /// `--set` without `=`.
    #[error("--set takes knob=value, got '{0}'")]
    BadSet(String),
}

/// `n` dependent multiply-adds: CPU time that touches no shared memory (`cs_work`, `think`).
#[inline(always)]
pub(crate) fn work(n: u32, seed: u64) -> u64 {
    pglocks_sync::hint::busy_work(n, seed)
}

/// The backend table of one run: `threads` slots with the settings' s_lock constants and
/// `LWLOCK_STATS` switch.
pub(crate) fn proc_table(settings: &Settings, threads: usize) -> pglocks_sync::ProcTable {
    let procs = pglocks_sync::ProcTable::with_spin_config(
        threads,
        pglocks_sync::spin_delay::SpinDelayConfig {
            num_delays: settings.num_delays,
            default_spins_per_delay: settings.spins_per_delay,
            delay_unit: settings.spin_delay_unit,
            ..Default::default()
        },
    );
    procs.set_lwlock_stats(settings.lwlock_stats);
    procs
}

fn names(list: &[(&str, &str)]) -> String {
    list.iter().map(|x| x.0).collect::<Vec<_>>().join(", ")
}

pub(crate) fn unknown_impl(workload: &str, name: &str, impls: &[(&str, &str)]) -> WorkloadError {
    WorkloadError::UnknownImpl {
        workload: workload.to_string(),
        name: name.to_string(),
        valid: names(impls),
    }
}

/// A model's error while a run is set up, as the harness reports a workload's errors.
pub(crate) fn workload_error(
    e: impl std::error::Error + Send + Sync + 'static,
) -> pglocks_harness::HarnessError {
    pglocks_harness::HarnessError::Workload(Box::new(e))
}

/// A workload run on PostgreSQL's model alone: one timed run on the preset's LWLock type `K`.
/// Each such module's `Kind` implements it, and [`pg_only`] picks `K`.
pub(crate) trait PgWorkload: Copy + Send + Sync + 'static {
    fn run<K: pglocks_lwlock::RawLwLock>(
        self,
        settings: &Settings,
        spec: &pglocks_harness::TeamSpec,
    ) -> RunResult;
}

/// What one timed run of a workload gives.
pub(crate) type RunResult = Result<pglocks_harness::TeamRun, pglocks_harness::HarnessError>;

/// A [`PgWorkload`] with its settings, waiting for the LWLock type.
struct PgRun<W>(Settings, W);

impl<W: PgWorkload> lwlock::MakeWithLwLock for PgRun<W> {
    type Output = pglocks_harness::sweep::RunFn<'static>;
    fn make<K: pglocks_lwlock::RawLwLock>(self) -> pglocks_harness::sweep::RunFn<'static> {
        let PgRun(settings, workload) = self;
        Box::new(move |spec| workload.run::<K>(&settings, spec))
    }
}

/// The runner of `workload` on the preset's LWLock type.
pub(crate) fn on_pg_lwlock(
    settings: &Settings,
    workload: impl PgWorkload,
) -> pglocks_harness::sweep::RunFn<'static> {
    lwlock::with_lwlock_type(settings, PgRun(settings.clone(), workload))
}

/// The runner of a workload whose only implementation is PostgreSQL's model (`pg`).
fn pg_only(
    name: &str,
    impl_name: &str,
    impls: &[(&str, &str)],
    settings: &Settings,
    workload: impl PgWorkload,
) -> Result<pglocks_harness::sweep::RunFn<'static>, WorkloadError> {
    match impl_name {
        "pg" => Ok(on_pg_lwlock(settings, workload)),
        _ => Err(unknown_impl(name, impl_name, impls)),
    }
}

/// Looks a workload up by name.
pub fn workload(name: &str) -> Result<&'static WorkloadInfo, WorkloadError> {
    WORKLOADS
        .iter()
        .find(|w| w.name == name)
        .ok_or_else(|| WorkloadError::UnknownWorkload {
            name: name.to_string(),
            valid: WORKLOADS
                .iter()
                .map(|w| w.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The series for `workload` with implementation `impl_name` under `preset` plus the `--set`
/// overrides in `sets`.
pub fn series(
    workload_name: &str,
    preset: &Preset,
    impl_name: &str,
    sets: &[String],
) -> Result<SeriesSpec<'static>, WorkloadError> {
    let mut settings = preset.settings();
    for s in sets {
        settings.apply(s)?;
    }
    series_with(workload_name, preset, impl_name, settings)
}

/// The series for `workload` with implementation `impl_name` under `settings` (a preset's,
/// changed in code: how an example plugs in a variant no knob names), labelled `preset`.
pub fn series_with(
    workload_name: &str,
    preset: &Preset,
    impl_name: &str,
    settings: Settings,
) -> Result<SeriesSpec<'static>, WorkloadError> {
    let w = workload(workload_name)?;
    let run = match w.name {
        "spin" => spin::series(impl_name, &settings)?,
        "lwlock-exclusive" => lwlock::series(w.name, lwlock::Mix::Exclusive, impl_name, &settings)?,
        "lwlock-shared" => lwlock::series(w.name, lwlock::Mix::Shared, impl_name, &settings)?,
        "lwlock-mixed" => lwlock::series(w.name, lwlock::Mix::Mixed, impl_name, &settings)?,
        "buffer-lookup" => lwlock::buffer_series(impl_name, &settings)?,
        "lmgr-relation" => pg_only(
            w.name,
            impl_name,
            lmgr::IMPLS,
            &settings,
            lmgr::Kind::Relation,
        )?,
        "lmgr-vxid" => pg_only(w.name, impl_name, lmgr::IMPLS, &settings, lmgr::Kind::Vxid)?,
        "lmgr-strong-mix" => pg_only(
            w.name,
            impl_name,
            lmgr::IMPLS,
            &settings,
            lmgr::Kind::StrongMix,
        )?,
        "clog-get" => pg_only(w.name, impl_name, clog::IMPLS, &settings, clog::Kind::Get)?,
        "clog-set" => pg_only(w.name, impl_name, clog::IMPLS, &settings, clog::Kind::Set)?,
        "sinval-check" => pg_only(w.name, impl_name, sinval::IMPLS, &settings, sinval::Check)?,
        "snapshot" => pg_only(
            w.name,
            impl_name,
            procarray::IMPLS,
            &settings,
            procarray::Kind::Snapshot,
        )?,
        "end-xact" => pg_only(
            w.name,
            impl_name,
            procarray::IMPLS,
            &settings,
            procarray::Kind::EndXact,
        )?,
        "wal-insert" => pg_only(w.name, impl_name, wal::IMPLS, &settings, wal::Kind::Insert)?,
        "wal-commit" => pg_only(w.name, impl_name, wal::IMPLS, &settings, wal::Kind::Commit)?,
        "shm-mq" => shmmq::series(impl_name, &settings)?,
        "apply" => pg_only(w.name, impl_name, apply::IMPLS, &settings, apply::Apply)?,
        "select-only" => pg_only(
            w.name,
            impl_name,
            pgbench::IMPLS,
            &settings,
            pgbench::Kind::SelectOnly,
        )?,
        "tpcb-like" => pg_only(
            w.name,
            impl_name,
            pgbench::IMPLS,
            &settings,
            pgbench::Kind::TpcbLike,
        )?,
        "insert-commit" => pg_only(
            w.name,
            impl_name,
            pgbench::IMPLS,
            &settings,
            pgbench::Kind::InsertCommit,
        )?,
        _ => return Err(unknown_impl(w.name, impl_name, w.impls)),
    };
    Ok(SeriesSpec {
        workload: w.name.to_string(),
        preset: preset.name.to_string(),
        impl_name: impl_name.to_string(),
        run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pglocks_harness::TeamSpec;
    use std::time::Duration;

    /// A 20 ms run of `threads` backends, unpinned.
    fn quick_spec(threads: usize) -> TeamSpec {
        TeamSpec {
            threads,
            duration: Duration::from_millis(20),
            warmup: Duration::from_millis(5),
            pin_order: vec![],
            sample_every: 8,
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
        for (name, _) in spin::IMPLS {
            let s = series("spin", preset, name, &[]).unwrap();
            let run = quick_run(&s, 2).unwrap();
            assert!(run.total_ops() > 0, "{name}");
        }
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
                for (name, _) in workload(w).unwrap().impls {
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
                count("bufmgr.hits") > 0
                    && count("bufmgr.reads") > 0
                    && count("bufmgr.evictions") > 0,
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
            for (name, _) in shmmq::IMPLS {
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
                // (a backend already reset is not counted again).
                let spec = TeamSpec {
                    warmup: Duration::ZERO,
                    ..quick_spec(2)
                };
                let run = run_until_work(&s, spec).unwrap();
                assert!(run.total_ops() > 0, "{} {sets:?}", preset.name);
                let counters = run.stats.events.counters();
                let count = |name: &str| counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
                if sets.is_empty() {
                    assert_eq!(count("sinval.messages_read"), 0, "{}", preset.name);
                } else {
                    // Idle backends fall a whole ring behind: signalled, then reset.
                    assert!(count("sinval.messages_read") > 0, "{counters:?}");
                    if run.total_ops() > 400 {
                        assert!(count("sinval.resets") > 0, "{counters:?}");
                        assert!(count("sinval.catchup_signals") > 0, "{counters:?}");
                    }
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
                let s = series(w.name, preset, w.impls[0].0, &sets).unwrap();
                let run = quick_run(&s, 2).unwrap();
                assert!(run.total_ops() > 0, "{} on {}", w.name, preset.name);
            }
            let default = Preset::by_name(DEFAULT_PRESET).unwrap();
            for (impl_name, _) in w.impls {
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
                    let found = count("tpcb.row_waits") + count("tpcb.xmax_lookups");
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
}
