//! The commit-log workloads, on the preset's CLOG ([`pglocks_slru::clog::Clog`]) over an
//! in-memory page store whose reads and writes take `slru_latency` (a miss costs an I/O).
//!
//! - `clog-get`: `TransactionIdGetStatus` of a random xid among the newest `xid_window` ones
//!   (`TransactionLogFetch` for a visibility check that missed the hint bits). A window wider
//!   than the buffers (8 pages of 32768 xids up to 9.1, 32 in 9.2, 128 from 9.6, banks in 17)
//!   forces misses and evictions.
//! - `clog-set`: a commit: the next xid from `XidGenLock` (which extends the commit log at each
//!   new page, as `GetNewTransactionId` does), then `TransactionIdCommitTree` of it — with 11's
//!   group update when the bank lock is busy.

use crate::preset::Settings;
use crate::RunResult;
use crate::{proc_table, workload_error};
use pglocks_harness::{run_team, HarnessError, TeamRun, TeamSpec};
use pglocks_lwlock::{LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_slru::clog::{Clog, XidStatus, CLOG_XACTS_PER_PAGE};
use pglocks_slru::{Faults, FaultyStore, MemoryStore, PageStore};
use pglocks_sync::atomic::{AtomicU32, Ordering::Relaxed};
use pglocks_sync::CachePadded;
use rand::RngExt;
use std::sync::Arc;

/// Implementations of the commit-log workloads.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
    "PostgreSQL's clog.c/slru.c of the preset (buffers, banks, victim rule, group update, LWLocks)",
)];

/// Which commit-log workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Get,
    Set,
}

/// The newest xid when a run starts: far enough in that every window fits below it.
const START_XID: u32 = 64 * CLOG_XACTS_PER_PAGE;

/// `XidGenLock` and `nextXid`, each on a line of its own, as in PostgreSQL (the lock in the
/// padded `MainLWLockArray`, the counter in `ShmemVariableCache`): unpadded, whatever the
/// allocator put beside them shared their lines, and a simulated run's result depended on it.
struct XidGen<K> {
    lock: CachePadded<K>,
    next: CachePadded<AtomicU32>,
}

/// The SLRU page store of `settings`, fresh for one run: memory with `slru_latency` per page,
/// behind a [`FaultyStore`] when the `slru_fault` knob plans faults.
pub(crate) fn store(settings: &Settings) -> Box<dyn PageStore> {
    let store = MemoryStore::new(settings.slru_latency);
    if settings.slru_fault.is_empty() {
        return Box::new(store);
    }
    let faults = Faults::new(settings.slru_fault.clone());
    Box::new(FaultyStore::new(store, "pg_xact", faults))
}

fn run<K: RawLwLock>(
    settings: &Settings,
    kind: Kind,
    spec: &TeamSpec,
) -> Result<TeamRun, HarnessError> {
    let procs = proc_table(settings, spec.threads);
    let cfg = settings.clog_config(spec.threads);
    let clog: Arc<Clog<K>> = Arc::new(Clog::new(&cfg, store(settings)).map_err(workload_error)?);
    let xids = Arc::new(XidGen {
        lock: CachePadded::new(K::new("XidGen")),
        next: CachePadded::new(AtomicU32::new(START_XID)),
    });
    let _placed = pglocks_sync::shmem::Placed::one("XidGen", &*xids);
    {
        let mut b = procs.attach().map_err(workload_error)?;
        clog.extend(&mut b, START_XID).map_err(workload_error)?;
    }
    let window = settings.xid_window;
    let think = settings.think;
    run_team(spec, &procs, |_| {
        let (clog, xids) = (Arc::clone(&clog), Arc::clone(&xids));
        move |b: &mut Backend| -> Result<(), pglocks_slru::SlruError> {
            match kind {
                Kind::Get => {
                    let back = b.rng.random_range(1..=window);
                    clog.get_status(b, START_XID.saturating_sub(back)).map(drop)
                }
                Kind::Set => {
                    xids.lock.acquire(b, LwLockMode::Exclusive)?;
                    let xid = xids.next.fetch_add(1, Relaxed);
                    let extended = if xid >= 1 << 31 {
                        // xidStopLimit: the run has used up the xid space.
                        Err(pglocks_slru::SlruError::XidWraparound)
                    } else if xid % CLOG_XACTS_PER_PAGE == 0 {
                        clog.extend(b, xid)
                    } else {
                        Ok(())
                    };
                    xids.lock.release(b)?;
                    extended?;
                    // The transaction's own work between its xid and its commit: `think`.
                    std::hint::black_box(crate::work(think, u64::from(xid)));
                    clog.set_tree_status(b, xid, &[], XidStatus::Committed, 0)
                }
            }
        }
    })
}

impl crate::PgWorkload for Kind {
    fn run<K: RawLwLock, R: pglocks_spin::RawSpinLock>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        run::<K>(settings, self, spec)
    }
}
