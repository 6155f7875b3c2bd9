//! The `select-only` and `tpcb-like` parts: pgbench's built-in transactions (pgbench.c's
//! `select-only` and `tpcb-like` scripts) on the model of everything PostgreSQL does for them —
//! the lock manager's relation and xid locks (lock.c), snapshots (procarray.c's
//! `GetSnapshotData`), the buffer manager (bufmgr.c), sinval (sinvaladt.c) and, for
//! `tpcb-like`, `heap_update` (heapam.c) waiting for a row's updater with `XactLockTableWait`
//! (lmgr.c), WAL (xlog.c) and the commit log (clog.c). See the `pgbench` workload's module for
//! what one transaction does.
//!
//! Checked at every step: no transaction fails; at the end: the lock table and fast-path slots
//! are empty, no buffer has a pin left, and every updated row's last updater (its newest
//! version's `xmax`) committed in the commit log.

use super::bufmgr::no_pins_left;
use super::lmgr::lock_tables_empty;
use super::{check, lock, Failure, NewPart, Part, Refused, Setup, Step, Tally};
use crate::pgbench::{build, Cluster, Kind, Session};
use pglocks_lwlock::{LockedVar, Pad128, RawLwLock};
use pglocks_proc::{Backend, ProcTable};
use pglocks_slru::clog::XidStatus;
use pglocks_spin::RawSpinLock;
use rand::rngs::SmallRng;
use std::sync::{Arc, Mutex};

/// Builds the `select-only` part.
pub(super) enum SelectOnly {}

impl NewPart for SelectOnly {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        Ok(Arc::new(Macro::<K, R>::new(setup, Kind::SelectOnly)?))
    }
}

/// Builds the `tpcb-like` part.
pub(super) enum TpcbLike {}

impl NewPart for TpcbLike {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        Ok(Arc::new(Macro::<K, R>::new(setup, Kind::TpcbLike)?))
    }
}

/// A cluster as a run of the workload builds it (128-byte LWLock spacing, `insertingAt` under
/// the wait-list lock), and one session per thread.
struct Macro<K: RawLwLock, R: RawSpinLock> {
    cluster: Arc<Cluster<K, R, Pad128, LockedVar>>,
    sessions: Mutex<Vec<Option<Session>>>,
    procs: ProcTable,
    kind: Kind,
}

impl<K: RawLwLock, R: RawSpinLock + 'static> Macro<K, R> {
    fn new(setup: &Setup<'_>, kind: Kind) -> Result<Self, Refused> {
        let (cluster, sessions, procs) = build::<K, R, Pad128, LockedVar>(
            setup.settings,
            kind,
            setup.threads,
            setup.numa_nodes,
        )?;
        Ok(Self {
            cluster,
            sessions: Mutex::new(sessions.into_iter().map(Some).collect()),
            procs,
            kind,
        })
    }
}

impl<K: RawLwLock, R: RawSpinLock + 'static> Part for Macro<K, R> {
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, i: usize, _: usize, _: SmallRng) -> Step {
        let mut session = lock(&self.sessions)[i].take();
        Box::new(move |b, t| {
            let Some(s) = session.as_mut() else {
                return Err(Failure("no session for this thread".into()));
            };
            self.cluster.transaction(b, s, self.kind)?;
            t.ops += 1;
            Ok(())
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        lock_tables_empty(self.cluster.lock_manager(), b, t)?;
        no_pins_left(self.cluster.buffer_pool(), b, t)?;
        let Some(clog) = self.cluster.commit_log() else {
            return Ok(());
        };
        for (relid, row, xmax) in self.cluster.last_updaters() {
            let (status, _) = clog.get_status(b, xmax)?;
            check(t, status == XidStatus::Committed, || {
                format!(
                    "row {row} of relation {relid} last updated by xid {xmax}, which is {}",
                    status.name()
                )
            })?;
        }
        Ok(())
    }
}
