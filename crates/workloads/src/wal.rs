//! The WAL workloads, on the preset's WAL ([`pglocks_wal::Wal`]) and flush device.
//!
//! - `wal-insert`: one `XLogInsertRecord` of `record_size` payload bytes (a heap record); WAL
//!   pages are written out by the WAL writer every `wal_writer_delay` and by the backends as
//!   the buffer ring wraps, and flushed only when a segment is finished (as `XLogWrite` does),
//!   never for a commit. What it measures is insertion scaling: one `WALInsertLock` (≤ 9.3) against 8 insertion locks.
//! - `wal-commit`: one transaction's commit: a commit record, then `XLogFlush` of it. With a
//!   device of fixed latency `L` and `N` backends, the ideal is every flush covering all `N`
//!   commits, `N / L` commits per second; the report shows that ideal and the fraction reached,
//!   and the `wal.commits_per_flush` distribution. With `synchronous_commit = off` the commit
//!   hands its record to the WAL writer instead (`XLogSetAsyncXactLSN`), which flushes every
//!   `wal_writer_delay` or when woken; there is no ideal then. The WAL writer runs on a thread
//!   of its own ([`with_wal_writer`]) in every release from 8.3, with synchronous commits too.
//!
//! The writing macro workloads (`tpcb-like`, `insert-commit`, in `pgbench`) commit through the
//! same WAL and start the same WAL writer.

use crate::preset::{FlushDeviceKind, Settings};
use crate::RunResult;
use crate::{proc_table, workload_error};
use pglocks_harness::{run_team_with, Companion, HarnessError, TeamRun, TeamSpec};
use pglocks_lwlock::{AtomicVar, LockedVar, RawLwLock, VarProtocol};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use pglocks_sync::time::{Duration, Instant};
use pglocks_wal::{
    Faults, FaultyDevice, FileDevice, FlushDevice, NullDevice, Record, SimulatedDevice, Wal,
    WalConfig, WalWriter,
};
use std::sync::Arc;
use std::sync::Mutex;

/// Implementations of the WAL workloads.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
    "PostgreSQL's xlog.c of the preset (insertion locks, XLogFlush, LWLocks) on the flush device",
)];

/// Which WAL workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Insert,
    Commit,
}

/// The device of `settings`, fresh for one run, with segments of `segment_size` bytes; behind
/// a [`FaultyDevice`] when the `wal_fault` knob plans faults (counted from this run's start).
pub(crate) fn device(
    settings: &Settings,
    segment_size: u64,
) -> Result<Box<dyn FlushDevice>, HarnessError> {
    let device: Box<dyn FlushDevice> = match settings.flush_device {
        FlushDeviceKind::Simulated => Box::new(SimulatedDevice::new(settings.flush_latency)),
        FlushDeviceKind::Null => Box::new(NullDevice),
        FlushDeviceKind::File => Box::new(FileDevice::temp(segment_size).map_err(workload_error)?),
    };
    if settings.wal_fault.is_empty() {
        return Ok(device);
    }
    let faults = Faults::new(settings.wal_fault.clone());
    Ok(Box::new(
        FaultyDevice::new(device, faults, segment_size).map_err(workload_error)?,
    ))
}

/// Commits per second if every flush covered every backend's commit: `threads / latency`
/// (only for synchronous commits on the simulated device, whose latency is known).
fn ideal(settings: &Settings, kind: Kind, threads: usize) -> Option<f64> {
    let mean = settings.flush_latency.mean().as_secs_f64();
    (kind == Kind::Commit
        && settings.synchronous_commit
        && settings.flush_device == FlushDeviceKind::Simulated
        && mean > 0.0)
        .then(|| threads as f64 / mean)
}

/// The WAL of `settings` for `max_backends` backends: the preset's
/// ([`Settings::wal_config`]) with its `synchronous_commit` and WAL writer, for the workloads
/// that commit (`wal-commit`, `tpcb-like`, `insert-commit`).
pub(crate) fn wal_config(settings: &Settings, max_backends: usize) -> WalConfig {
    WalConfig {
        synchronous_commit: settings.synchronous_commit,
        wal_writer: settings.wal_writer,
        wal_writer_delay: settings.wal_writer_delay,
        wal_writer_flush_after: settings.wal_writer_flush_after,
        ..settings.wal_config(max_backends)
    }
}

/// The slots a run of `settings` needs in its proc table after its backends' (PostgreSQL's
/// auxiliary processes): one for the WAL writer, which every release from 8.3 runs.
pub(crate) fn auxiliary_procs(settings: &Settings) -> usize {
    usize::from(settings.wal_writer != WalWriter::Absent)
}

/// Runs `team` (the timed run of the backends that write WAL) and, when `wal`'s release has
/// one (8.3+), its WAL writer beside it ([`Wal::wal_writer_main`]): a thread whose backend
/// takes the last slot of `procs` (an auxiliary process's `PGPROC` follows the backends'; see
/// [`auxiliary_procs`]). The writer starts before the team and is stopped once it is done;
/// its statistics (writes, fsyncs, `WALWriteLock` waits; not its idle sleep) join the run's,
/// counted from about the end of `warmup` (from the first round after it; a warm-up that goes
/// on to complete its operations, [`pglocks_harness::RunLength`], ends later, and the writer's
/// figures then include its tail).
/// It runs whatever `synchronous_commit` says: with synchronous commits, and for `wal-insert`,
/// it writes the whole pages the backends have filled, every `wal_writer_delay`.
pub(crate) fn with_wal_writer<K: RawLwLock, P: VarProtocol, R: RawSpinLock>(
    wal: &Wal<K, P, R>,
    procs: &ProcTable,
    warmup: Duration,
    team: impl FnOnce(Vec<Companion<'_>>) -> RunResult,
) -> RunResult {
    if wal.config().wal_writer == WalWriter::Absent {
        return team(Vec::new());
    }
    let mut b = attach_last(procs)?;
    // What the writer returns: its statistics once it has stopped, or its error.
    let result = Mutex::new(None);
    let run = {
        let result = &result;
        team(vec![Companion {
            name: "walwriter",
            body: Box::new(move || {
                let measure_from = Instant::now() + warmup;
                let mut warm = true;
                let done = wal.wal_writer_main(&mut b, |b| {
                    if warm && Instant::now() >= measure_from {
                        warm = false;
                        b.take_stats();
                    }
                });
                let stats = done.map(|()| b.take_stats());
                *result.lock().unwrap_or_else(|e| e.into_inner()) = Some(stats);
            }),
            stop: Box::new(move || wal.shutdown_wal_writer(procs)),
        }])
    };
    // A writer that left no result never finished: the team's own error (a simulation that
    // ran out of time ends every thread) says why, else the writer panicked.
    let Some(stats) = result.into_inner().unwrap_or_else(|e| e.into_inner()) else {
        run?;
        return Err(HarnessError::ThreadPanicked);
    };
    let stats = stats.map_err(workload_error)?;
    let mut run = run?;
    run.stats.merge(&stats);
    Ok(run)
}

/// A backend in the last slot of `procs`, the others left free: attach takes the first free
/// slot, so the ones before it are taken and given back.
fn attach_last(procs: &ProcTable) -> Result<Backend, HarnessError> {
    let mut before = Vec::new();
    loop {
        let b = procs.attach().map_err(workload_error)?;
        if b.procno() + 1 == procs.len() {
            return Ok(b);
        }
        before.push(b);
    }
}

fn run<K: RawLwLock, P: VarProtocol, R: RawSpinLock>(
    settings: &Settings,
    kind: Kind,
    spec: &TeamSpec,
) -> Result<TeamRun, HarnessError> {
    let aux = auxiliary_procs(settings);
    let procs = proc_table(settings, spec.threads + aux);
    let mut cfg = wal_config(settings, spec.threads + aux);
    cfg.count_commits = kind == Kind::Commit;
    let segment_size = cfg.segment_size;
    let wal: Arc<Wal<K, P, R>> =
        Arc::new(Wal::new(cfg, device(settings, segment_size)?).map_err(workload_error)?);
    let payload = vec![0x5a; settings.record_size as usize];
    let think = settings.think;
    let team = |companions: Vec<Companion<'_>>| {
        run_team_with(spec, &procs, companions, |_| {
            let (wal, payload) = (Arc::clone(&wal), payload.clone());
            let mut w = wal.backend();
            let mut xid = 0u32;
            move |b: &mut Backend| {
                xid = xid.wrapping_add(1);
                match kind {
                    Kind::Insert => {
                        let rec = Record {
                            xid,
                            rmid: pglocks_wal::record::RM_HEAP_ID,
                            info: 0,
                            payload: &payload,
                        };
                        let r = wal.insert(b, &mut w, &rec).map(drop);
                        // The backend's own work between records, outside `XLogInsert` (the
                        // heap change it logs, the record's data gathered): `think`. The
                        // record's CRC is `XLogInsert`'s, charged by the insert.
                        std::hint::black_box(crate::work(think, u64::from(xid)));
                        r
                    }
                    Kind::Commit => wal.commit(b, &mut w, xid).map(drop),
                }
            }
        })
    };
    let mut run = with_wal_writer(&wal, &procs, spec.warmup, team)?;
    run.ideal_ops_per_sec = ideal(settings, kind, spec.threads);
    Ok(run)
}

impl crate::PgWorkload for Kind {
    /// The variable protocol is the release's (17's lock-free insertingAt); `insertpos_lck`
    /// and `info_lck` are `R`.
    fn run<K: RawLwLock, R: RawSpinLock>(self, settings: &Settings, spec: &TeamSpec) -> RunResult {
        if settings.wal_var_atomic {
            run::<K, AtomicVar, R>(settings, self, spec)
        } else {
            run::<K, LockedVar, R>(settings, self, spec)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::preset::{Preset, Settings};
    use pglocks_harness::{TeamRun, TeamSpec};
    use pglocks_wal::WalWriter;
    use std::time::{Duration, Instant};

    fn settings(preset: &str) -> Settings {
        Preset::by_name(preset).unwrap().settings()
    }

    /// One run of `workload` on `preset` with `sets`: `threads` backends, 150 ms.
    fn run(workload: &str, preset: &str, sets: &[&str], threads: usize) -> TeamRun {
        let preset = Preset::by_name(preset).unwrap();
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let s = crate::series(workload, preset, "pg", &sets).unwrap();
        let spec = TeamSpec {
            threads,
            duration: Duration::from_millis(150),
            warmup: Duration::from_millis(10),
            pin_order: vec![],
            sample_every: 8,
            sim: None,
            until: None,
        };
        (s.run)(&spec).unwrap()
    }

    fn count(run: &TeamRun, name: &str) -> u64 {
        let counters = run.stats.events.counters();
        counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1)
    }

    #[test]
    fn synchronous_commit_is_on_everywhere_and_off_is_refused_before_83() {
        for preset in crate::preset::PRESETS {
            assert!(preset.settings().synchronous_commit, "{}", preset.name);
        }
        for old in ["pg81", "pg82", "pg82uis"] {
            let mut s = settings(old);
            assert_eq!(s.wal_writer, WalWriter::Absent);
            let e = s.apply("synchronous_commit=off").unwrap_err().to_string();
            assert!(e.contains("8.3"), "{old}: {e}");
            s.apply("synchronous_commit=on").unwrap();
        }
        let writer = |p: &str| (settings(p).wal_writer, settings(p).wal_writer_flush_after);
        assert_eq!(writer("pg83"), (WalWriter::Timed, 0));
        assert_eq!(writer("pg91"), (WalWriter::Timed, 0));
        assert_eq!(writer("pg92"), (WalWriter::Latch, 0));
        assert_eq!(writer("pg96"), (WalWriter::Latch, 128));
        assert_eq!(writer("pg16"), (WalWriter::Latch, 128));
        assert_eq!(writer("pg17"), (WalWriter::LatchFlushAfter, 128));
        let mut s = settings("pg83");
        s.apply("synchronous_commit=off,wal_writer_delay=10ms")
            .unwrap();
        assert!(!s.synchronous_commit);
        assert_eq!(s.wal_writer_delay, Duration::from_millis(10));
        assert_eq!(s.knob_value("wal_writer_delay").unwrap(), "10ms");
        for bad in [
            "wal_writer_delay=0",
            "wal_writer_delay=11s",
            "synchronous_commit=local",
        ] {
            assert!(s.apply(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fsync_off_is_the_null_device() {
        use crate::preset::FlushDeviceKind::{File, Null, Simulated};
        let mut s = settings("pg18");
        assert_eq!(s.knob_value("fsync").unwrap(), "on");
        s.apply("fsync=off").unwrap();
        assert_eq!(
            (s.flush_device, s.knob_value("fsync").unwrap().as_str()),
            (Null, "off")
        );
        assert_eq!(s.knob_value("flush_device").unwrap(), "null");
        s.apply("fsync=on").unwrap();
        assert_eq!(s.flush_device, Simulated);
        s.apply("flush_device=file,fsync=on").unwrap();
        assert_eq!(s.flush_device, File);
        // The null device is fsync = off for the WAL too: no commit_delay.
        assert!(super::device(&s, 1 << 24).unwrap().fsync_enabled());
        s.apply("fsync=off").unwrap();
        assert!(!super::device(&s, 1 << 24).unwrap().fsync_enabled());
    }

    #[test]
    fn wal_commit_commits_asynchronously_with_a_wal_writer_in_every_release_that_has_one() {
        for preset in ["pg91", "pg92", "pg96", "pg18"] {
            let sets = ["synchronous_commit=off", "wal_writer_delay=1ms"];
            let run = run("wal-commit", preset, &sets, 2);
            assert!(run.total_ops() > 0, "{preset}");
            assert_eq!(count(&run, "wal.async_commits"), count(&run, "wal.commits"));
            assert!(
                count(&run, "wal.background_flushes") > 0,
                "{preset}: the WAL writer's rounds"
            );
            assert_eq!(
                run.ideal_ops_per_sec, None,
                "no ideal without flushes to share"
            );
        }
        let sync = run("wal-commit", "pg18", &[], 2);
        assert_eq!(count(&sync, "wal.async_commits"), 0);
        assert_eq!(count(&sync, "wal.background_flushes"), 0);
    }

    #[test]
    fn an_async_tpcb_leaves_rows_unhinted_until_the_wal_writer_flushes() {
        // 8.3-9.1's WAL writer sleeps its 10 s through the run: no commit is flushed, so every
        // updater of a row finds its last updater committed but not hintable. The run still
        // ends at once: the shutdown wakes the writer.
        let started = Instant::now();
        let sets = ["synchronous_commit=off", "wal_writer_delay=10s"];
        let asynchronous = run("tpcb-like", "pg91", &sets, 1);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(count(&asynchronous, "tpcb.hints_deferred") > 0);
        assert_eq!(count(&asynchronous, "wal.flushes"), 0);
        let synchronous = run("tpcb-like", "pg91", &[], 1);
        assert_eq!(count(&synchronous, "tpcb.hints_deferred"), 0);
        for preset in ["pg92", "pg18"] {
            let run = run("insert-commit", preset, &["synchronous_commit=off"], 2);
            assert!(count(&run, "wal.async_commits") > 0, "{preset}");
        }
    }
}
