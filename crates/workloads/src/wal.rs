//! The WAL workloads, on the preset's WAL ([`pglocks_wal::Wal`]) and flush device.
//!
//! - `wal-insert`: one `XLogInsertRecord` of `record_size` payload bytes (a heap record); WAL
//!   pages are written out as the buffer ring wraps, and flushed only when a segment is
//!   finished (as `XLogWrite` does), never for a commit. What it measures is insertion scaling: one `WALInsertLock` (≤ 9.3) against 8 insertion locks.
//! - `wal-commit`: one transaction's commit: a commit record, then `XLogFlush` of it. With a
//!   device of fixed latency `L` and `N` backends, the ideal is every flush covering all `N`
//!   commits, `N / L` commits per second; the report shows that ideal and the fraction reached,
//!   and the `wal.commits_per_flush` distribution.

use crate::preset::{FlushDeviceKind, Settings};
use crate::RunResult;
use crate::{proc_table, workload_error};
use pglocks_harness::{run_team, HarnessError, TeamRun, TeamSpec};
use pglocks_lwlock::{AtomicVar, LockedVar, RawLwLock, VarProtocol};
use pglocks_spin::{PgSpinLock, RawSpinLock};
use pglocks_sync::Backend;
use pglocks_wal::{
    Faults, FaultyDevice, FileDevice, FlushDevice, NullDevice, Record, SimulatedDevice, Wal,
};
use std::sync::Arc;

/// Implementations of the WAL workloads.
pub const IMPLS: &[(&str, &str)] = &[(
    "pg",
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
/// (only for the simulated device, whose latency is known).
fn ideal(settings: &Settings, kind: Kind, threads: usize) -> Option<f64> {
    let mean = settings.flush_latency.mean().as_secs_f64();
    (kind == Kind::Commit && settings.flush_device == FlushDeviceKind::Simulated && mean > 0.0)
        .then(|| threads as f64 / mean)
}

fn run<K: RawLwLock, P: VarProtocol, R: RawSpinLock>(
    settings: &Settings,
    kind: Kind,
    spec: &TeamSpec,
) -> Result<TeamRun, HarnessError> {
    let procs = proc_table(settings, spec.threads);
    let mut cfg = settings.wal_config(spec.threads);
    cfg.count_commits = kind == Kind::Commit;
    let segment_size = cfg.segment_size;
    let wal: Arc<Wal<K, P, R>> =
        Arc::new(Wal::new(cfg, device(settings, segment_size)?).map_err(workload_error)?);
    let payload = vec![0x5a; settings.record_size as usize];
    let mut run = run_team(spec, &procs, |_| {
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
                    wal.insert(b, &mut w, &rec).map(drop)
                }
                Kind::Commit => wal.commit(b, &mut w, xid).map(drop),
            }
        }
    })?;
    run.ideal_ops_per_sec = ideal(settings, kind, spec.threads);
    Ok(run)
}

impl crate::PgWorkload for Kind {
    fn run<K: RawLwLock>(self, settings: &Settings, spec: &TeamSpec) -> RunResult {
        // The variable protocol (17's lock-free insertingAt) and the spinlock's TAS_SPIN.
        match (settings.wal_var_atomic, settings.tas_spin) {
            (true, true) => run::<K, AtomicVar, PgSpinLock<true>>(settings, self, spec),
            (true, false) => run::<K, AtomicVar, PgSpinLock<false>>(settings, self, spec),
            (false, true) => run::<K, LockedVar, PgSpinLock<true>>(settings, self, spec),
            (false, false) => run::<K, LockedVar, PgSpinLock<false>>(settings, self, spec),
        }
    }
}
