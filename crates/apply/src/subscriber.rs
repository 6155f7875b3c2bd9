//! The subscriber's tables as apply workers see them: committed rows plus at most one
//! uncommitted change per row, owned by the local transaction that made it, with waits for
//! other transactions through the lock manager — what heapam.c and nbtinsert.c do for the
//! apply worker's `INSERT`/`UPDATE`/`DELETE`.
//!
//! A change to a row that another running local transaction has changed (an uncommitted insert
//! in the unique index, `_bt_check_unique`; an uncommitted update or delete, `heap_update`'s
//! `xmax`) waits for that transaction with `XactLockTableWait`, then looks again: committed,
//! the row is as it left it; aborted, as before it. Only then does the change apply, or meet a
//! conflict (18's `insert_exists`, `update_missing`, `delete_missing`). An update or delete
//! first queues on the row's tuple lock (`heap_acquire_tuplock`: `ExclusiveLock` for an update
//! that keeps the key, `AccessExclusiveLock` for a delete), held until the change is made, so
//! that several waiters for one row get it in turn; an insert waits in the unique index without
//! one. Every local transaction
//! holds the lock on its own xid (`XactLockTableInsert`) until it ends, so the deadlock detector
//! sees these waits — the waits that parallel apply's leader and workers can close into a cycle.
//!
//! Shortcuts: one mutex over the rows stands in for buffer content locks; a row's TID is made
//! from its key (block `key / 200`, line pointer `key % 200 + 1`); the local xids are a
//! counter, not the ProcArray's (a transaction counts as running from `begin` to the end of
//! `commit`/`abort`, and leaves the running set before it releases its locks, as
//! `ProcArrayEndTransaction` comes before `LockReleaseAll`). On a simulated machine the mutexes
//! are host memory, charged nothing (no shim operation runs while one is held, so no other
//! virtual thread can find one taken), and the xid counter is a shim atomic, charged as the
//! `nextXid` increment it stands for.

use crate::proto::Change;
use crate::serial::{changed_row, Conflict, Tables};
use pglocks_lmgr::{LmgrError, LocalLocks, LockManager, LockMode, LockTimeouts};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicU32, Ordering::Relaxed};
use pglocks_sync::time::Instant;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// One row: its committed value, and the change a running transaction made to it.
#[derive(Debug, Clone, Copy, Default)]
struct RowState {
    committed: Option<i64>,
    /// (local xid, the row as that transaction left it).
    pending: Option<(u32, Option<i64>)>,
}

/// A running local transaction of an apply worker.
#[derive(Debug)]
pub struct LocalTxn {
    xid: u32,
    touched: Vec<(u32, i64)>,
}

impl LocalTxn {
    /// Its local xid.
    pub fn xid(&self) -> u32 {
        self.xid
    }
}

/// The subscriber's tables and the lock manager its workers wait in.
pub struct Subscriber<K: RawLwLock> {
    lm: LockManager<K>,
    rows: Mutex<BTreeMap<(u32, i64), RowState>>,
    running: Mutex<BTreeSet<u32>>,
    /// Remote xids in the order their local transactions committed, with when.
    commits: Mutex<Vec<(u32, Instant)>>,
    conflicts: Mutex<Vec<Conflict>>,
    next_xid: AtomicU32,
    timeouts: LockTimeouts,
    row_work: u32,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: RawLwLock> Subscriber<K> {
    /// Empty tables over lock manager `lm`; waits use `timeouts` (deadlock_timeout); each
    /// change costs `row_work` steps of CPU work besides the model's own.
    pub fn new(lm: LockManager<K>, timeouts: LockTimeouts, row_work: u32) -> Self {
        Self {
            lm,
            rows: Mutex::new(BTreeMap::new()),
            running: Mutex::new(BTreeSet::new()),
            commits: Mutex::new(Vec::new()),
            conflicts: Mutex::new(Vec::new()),
            next_xid: AtomicU32::new(10_000),
            timeouts,
            row_work,
        }
    }

    /// The lock manager.
    pub fn lock_manager(&self) -> &LockManager<K> {
        &self.lm
    }

    /// The committed rows.
    pub fn rows(&self) -> Tables {
        lock(&self.rows)
            .iter()
            .filter_map(|(&row, s)| s.committed.map(|v| (row, v)))
            .collect()
    }

    /// Remote xids in commit order, each with the time its local commit finished.
    pub fn commits(&self) -> Vec<(u32, Instant)> {
        lock(&self.commits).clone()
    }

    /// The changes that met a conflict, in the order met.
    pub fn conflicts(&self) -> Vec<Conflict> {
        lock(&self.conflicts).clone()
    }

    /// The deadlock_timeout and lock_timeout waits use.
    pub fn timeouts(&self) -> &LockTimeouts {
        &self.timeouts
    }

    /// `StartTransactionCommand` + `AssignTransactionId` for an apply worker: a local xid and
    /// its lock.
    pub fn begin(&self, b: &mut Backend, local: &mut LocalLocks) -> Result<LocalTxn, LmgrError> {
        let xid = self.next_xid.fetch_add(1, Relaxed);
        lock(&self.running).insert(xid);
        self.lm.xact_lock_table_insert(b, local, xid)?;
        Ok(LocalTxn {
            xid,
            touched: Vec::new(),
        })
    }

    /// Applies `change` to relation `rel` in `txn`, first waiting for any other running
    /// transaction that changed the row. A change that cannot apply as sent is recorded as a
    /// conflict and skipped (PostgreSQL logs `update_missing`/`delete_missing` and skips; it
    /// raises an error for `insert_exists`, which this model records instead). `Err` when the
    /// wait failed (deadlock detected, lock timeout).
    pub fn apply(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        txn: &mut LocalTxn,
        rel: u32,
        change: Change,
    ) -> Result<(), LmgrError> {
        let row = (rel, change.key());
        std::hint::black_box(pglocks_sync::hint::busy_work(self.row_work, row.1 as u64));
        // The tuple lock an update or delete queues on before it waits, once it must wait.
        let tuple_mode = match change {
            Change::Insert(_) => None,
            Change::Update(_) => Some(LockMode::Exclusive),
            Change::Delete(_) => Some(LockMode::AccessExclusive),
        };
        let tid = ((row.1 / 200) as u32, (row.1.rem_euclid(200) + 1) as u16);
        let relation = (local.database(), rel);
        let mut tuple_locked = None;
        let result = loop {
            let mut rows = lock(&self.rows);
            let state = rows.entry(row).or_default();
            if let Some((other, _)) = state.pending.filter(|&(x, _)| x != txn.xid) {
                drop(rows);
                if let (None, Some(mode)) = (tuple_locked, tuple_mode) {
                    let t = &self.timeouts;
                    if let Err(e) = self.lm.lock_tuple(b, local, relation, tid, mode, t) {
                        break Err(e);
                    }
                    tuple_locked = Some(mode);
                }
                let running =
                    |_: &mut Backend, x: u32| Ok::<_, LmgrError>(lock(&self.running).contains(&x));
                let waited =
                    self.lm
                        .xact_lock_table_wait(b, local, other, &self.timeouts, running, Ok);
                if let Err(e) = waited {
                    break Err(e);
                }
                continue;
            }
            // The row as this transaction sees it.
            let seen = match state.pending {
                Some((_, v)) => v,
                None => state.committed,
            };
            match changed_row(seen, rel, change) {
                Ok(after) => {
                    if state.pending.is_none() {
                        txn.touched.push(row);
                    }
                    state.pending = Some((txn.xid, after));
                }
                Err(c) => {
                    drop(rows);
                    lock(&self.conflicts).push(c);
                }
            }
            break Ok(());
        };
        if let Some(mode) = tuple_locked {
            self.lm.unlock_tuple(b, local, relation, tid, mode)?;
        }
        result
    }

    /// Commits `txn`, which applied remote transaction `remote_xid`: its changes become the
    /// rows and the commit is recorded, it leaves the running set, then its locks go (waking
    /// whoever waits for it).
    pub fn commit(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        txn: LocalTxn,
        remote_xid: u32,
    ) -> Result<(), LmgrError> {
        self.end(b, local, txn, Some(remote_xid))
    }

    /// Aborts `txn`: the rows are as before it.
    pub fn abort(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        txn: LocalTxn,
    ) -> Result<(), LmgrError> {
        self.end(b, local, txn, None)
    }

    fn end(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        txn: LocalTxn,
        commit: Option<u32>,
    ) -> Result<(), LmgrError> {
        {
            let mut rows = lock(&self.rows);
            if let Some(remote_xid) = commit {
                lock(&self.commits).push((remote_xid, Instant::now()));
            }
            for row in &txn.touched {
                if let Some(state) = rows.get_mut(row) {
                    if let Some((x, v)) = state.pending {
                        if x == txn.xid {
                            if commit.is_some() {
                                state.committed = v;
                            }
                            state.pending = None;
                        }
                    }
                }
            }
        }
        lock(&self.running).remove(&txn.xid);
        self.lm.release_all(b, local, false)?;
        Ok(())
    }
}
