//! The ProcArray workloads, on the preset's ProcArray ([`pglocks_procarray::ProcArray`]) with
//! `backends` registered entries (default 100) of which only the `threads` running ones do
//! anything: the others are idle connections — registered, no xid, no xmin, as a PostgreSQL
//! backend waiting for its client's next query is — that every snapshot still walks past.
//!
//! - `snapshot`: a read-only transaction as pgbench -S runs it: `GetSnapshotData`, a visibility
//!   test (`XidInMVCCSnapshot` + `TransactionIdDidCommit`) of a random xid among the 1000 below
//!   the snapshot's `xmax`, and the end of the transaction (xmin reset, no lock). A
//!   `commit_ratio` share of operations are instead a short write transaction (snapshot, xid,
//!   `subxacts` subtransaction xids, commit, `ProcArrayEndTransaction`). At the default 0, 14
//!   reuses every snapshot after the first (`procarray.snapshot_reused`): that is what 14 does
//!   for a read-only load, and the remaining cost is ProcArrayLock itself. A few writes
//!   (`--set commit_ratio=0.05`) make snapshots change, so the layouts' scans are compared:
//!   ≤ 9.1 reads several cache lines of each of the 100 `PGPROC`s, 9.2 12 bytes of each `PGXACT`,
//!   14 4 bytes of each xid.
//! - `end-xact`: a write transaction's xid and end: `GetNewTransactionId` under XidGenLock,
//!   the commit record, `ProcArrayEndTransaction` — ProcArrayLock exclusive (≤ 9.5) or its
//!   conditional acquire with the group XID clear behind it (9.6+; `procarray.group_members`,
//!   `procarray.group_leads`).

use crate::preset::Settings;
use crate::RunResult;
use crate::{proc_table, workload_error};
use pglocks_harness::{run_team, HarnessError, TeamRun, TeamSpec};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;
use pglocks_procarray::{
    ProcArray, ProcArrayError, Snapshot, FIRST_NORMAL_TRANSACTION_ID, INVALID_TRANSACTION_ID,
};
use rand::RngExt;
use std::sync::Arc;

/// Implementations of the ProcArray workloads.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
    "PostgreSQL's procarray.c of the preset (snapshot layout, group XID clear, LWLocks)",
)];

/// How far below `xmax` the visibility test looks.
const VISIBILITY_LOOKBACK: u32 = 1000;

/// Which ProcArray workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Snapshot,
    EndXact,
}

/// One backend's transactions.
struct Session<K: RawLwLock> {
    pa: Arc<ProcArray<K>>,
    snap: Snapshot,
    subxids: Vec<u32>,
    subxacts: u32,
}

impl<K: RawLwLock> Session<K> {
    /// A read-only transaction: snapshot, one visibility test, end.
    fn read_only(&mut self, b: &mut Backend) -> Result<(), ProcArrayError> {
        self.pa.get_snapshot_data(b, &mut self.snap)?;
        let back = b.rng.random_range(1..=VISIBILITY_LOOKBACK);
        if let Some(xid) = self.snap.xmax.checked_sub(back) {
            if xid >= FIRST_NORMAL_TRANSACTION_ID {
                std::hint::black_box(self.pa.xid_visible_as_committed(xid, &self.snap)?);
            }
        }
        self.pa.end_transaction(b, INVALID_TRANSACTION_ID)
    }

    /// A write transaction's xids and end (after a snapshot when `snapshot`).
    fn write(&mut self, b: &mut Backend, snapshot: bool) -> Result<(), ProcArrayError> {
        if snapshot {
            self.pa.get_snapshot_data(b, &mut self.snap)?;
        }
        let xid = self.pa.assign_xid(b, None)?;
        self.subxids.clear();
        for _ in 0..self.subxacts {
            let parent = self.subxids.last().copied().unwrap_or(xid);
            self.subxids.push(self.pa.assign_xid(b, Some(parent))?);
        }
        self.pa.commit_tree(xid, &self.subxids)?;
        let latest = self.subxids.last().copied().unwrap_or(xid);
        self.pa.end_transaction(b, latest)
    }
}

/// The registered backends of a run on `threads` threads (`--set backends`), which must
/// include every running thread.
pub(crate) fn registered_backends(
    settings: &Settings,
    threads: usize,
) -> Result<usize, HarnessError> {
    let backends = settings.backends;
    if backends < threads {
        return Err(workload_error(ProcArrayError::Config(format!(
            "backends ({backends}) must be at least the number of threads ({threads}): every running thread is a registered backend"
        ))));
    }
    Ok(backends)
}

fn run<K: RawLwLock>(
    settings: &Settings,
    kind: Kind,
    spec: &TeamSpec,
) -> Result<TeamRun, HarnessError> {
    let backends = crate::procarray::registered_backends(settings, spec.threads)?;
    let procs = proc_table(settings, backends);
    let pa: Arc<ProcArray<K>> =
        Arc::new(ProcArray::new(&settings.procarray_config(backends)).map_err(workload_error)?);
    {
        // Register every connection; the running threads attach to the first slots.
        let mut b = procs.attach().map_err(workload_error)?;
        for procno in 0..backends {
            pa.add(&mut b, procno).map_err(workload_error)?;
        }
    }
    let (commit_ratio, subxacts) = (settings.commit_ratio, settings.subxacts);
    run_team(spec, &procs, |_| {
        let mut s = Session {
            pa: Arc::clone(&pa),
            snap: Snapshot::new(),
            subxids: Vec::with_capacity(subxacts as usize),
            subxacts,
        };
        move |b: &mut Backend| match kind {
            Kind::Snapshot if commit_ratio > 0.0 && b.rng.random_bool(commit_ratio) => {
                s.write(b, true)
            }
            Kind::Snapshot => s.read_only(b),
            Kind::EndXact => s.write(b, false),
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
