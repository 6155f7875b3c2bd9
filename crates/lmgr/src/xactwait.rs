//! Waiting for another transaction and for a row (lmgr.c's `XactLockTableInsert`,
//! `XactLockTableWait`, `LockTuple` and `UnlockTuple`), and the session locks logical
//! replication's parallel apply takes on a remote transaction (`LockApplyTransactionForSession`).
//!
//! A transaction that gets an xid takes an `ExclusiveLock` on it in the main lock table (never in
//! the fast path), held until it ends. Whoever must wait for that transaction — an `UPDATE` that
//! found the row it wants already updated by a transaction still running — asks for a
//! `ShareLock` on the same tag: it sleeps in the lock's queue, visible to the deadlock checker,
//! until the owner's release at commit or abort wakes it. It gives the lock back at once and asks
//! whether the xid is still running: the lock is only the way to sleep, the ProcArray is the
//! answer (a subtransaction's lock goes when the subtransaction ends, the top-level transaction
//! may still run; then the wait goes on with the parent).
//!
//! Several backends waiting for the same row first queue on a *tuple lock* (`LockTuple`, the
//! `heap_update` caller's `ExclusiveLock` on the row's tag): only its holder sleeps on the
//! updater's xid, the others wait their turn behind it in order, so the row goes to the waiters
//! first come, first served, rather than to whichever wakes first.

use crate::{LmgrError, LocalLocks, LockManager, LockMode, LockOwner, LockTag, LockTimeouts};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;
use std::time::Duration;

/// The pause before asking again when the xid lock was free but the xid still runs
/// (`XactLockTableWait`'s `pg_usleep(1000L)`, 10+).
const RECHECK_PAUSE: Duration = Duration::from_millis(1);

impl<K: RawLwLock> LockManager<K> {
    /// Models `XactLockTableInsert` (lmgr.c): the transaction's `ExclusiveLock` on its own
    /// `xid`, taken in the main table when the xid is assigned.
    pub fn xact_lock_table_insert(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        xid: u32,
    ) -> Result<(), LmgrError> {
        let tag = LockTag::transaction(xid);
        let none = LockTimeouts::default();
        self.acquire(
            b,
            local,
            tag,
            LockMode::Exclusive,
            LockOwner::Transaction,
            &none,
        )?;
        Ok(())
    }

    /// Models `XactLockTableWait` (lmgr.c): sleeps until transaction `xid` has ended. Each round
    /// takes and releases a `ShareLock` on the xid (sleeping in its queue while the owner holds
    /// it; the deadlock checker sees the wait), then asks `in_progress` (the caller's
    /// `TransactionIdIsInProgress`) whether the xid still runs; if it does, it pauses 1 ms and
    /// waits on `parent` of the xid (`SubTransGetTopmostTransaction`; the xid itself for a
    /// top-level one).
    ///
    /// Counts `lmgr.xact_waits` and `lmgr.xact_wait_rounds`.
    pub fn xact_lock_table_wait<E: From<LmgrError>>(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        xid: u32,
        timeouts: &LockTimeouts,
        mut in_progress: impl FnMut(&mut Backend, u32) -> Result<bool, E>,
        mut parent: impl FnMut(u32) -> Result<u32, E>,
    ) -> Result<(), E> {
        b.stats.events.count("lmgr.xact_waits", 1);
        let mut xid = xid;
        let mut first = true;
        loop {
            b.stats.events.count("lmgr.xact_wait_rounds", 1);
            let tag = LockTag::transaction(xid);
            let owner = LockOwner::Transaction;
            self.acquire(b, local, tag, LockMode::Share, owner, timeouts)?;
            self.release(b, local, tag, LockMode::Share, owner)?;
            if !in_progress(b, xid)? {
                return Ok(());
            }
            if !first {
                pglocks_sync::time::sleep(RECHECK_PAUSE);
            }
            first = false;
            xid = parent(xid)?;
        }
    }

    /// Models `LockTuple` (lmgr.c): `mode` on the row at `tid` (block, line pointer) of `rel`
    /// (database, relation), waiting as `timeouts` allow.
    pub fn lock_tuple(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        rel: (u32, u32),
        tid: (u32, u16),
        mode: LockMode,
        timeouts: &LockTimeouts,
    ) -> Result<(), LmgrError> {
        let tag = LockTag::tuple(rel.0, rel.1, tid.0, tid.1);
        self.acquire(b, local, tag, mode, LockOwner::Transaction, timeouts)?;
        Ok(())
    }

    /// Models `UnlockTuple` (lmgr.c).
    pub fn unlock_tuple(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        rel: (u32, u32),
        tid: (u32, u16),
        mode: LockMode,
    ) -> Result<(), LmgrError> {
        let tag = LockTag::tuple(rel.0, rel.1, tid.0, tid.1);
        self.release(b, local, tag, mode, LockOwner::Transaction)
    }

    /// Models `LockApplyTransactionForSession` (lmgr.c, 16+): a session lock in `mode` on
    /// object `objid` of remote transaction `xid` of subscription `suboid` — the stream lock
    /// and the transaction lock by which the leader and a parallel apply worker wait for each
    /// other where the deadlock detector can see it.
    #[allow(clippy::too_many_arguments)]
    pub fn lock_apply_transaction_for_session(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        suboid: u32,
        xid: u32,
        objid: u16,
        mode: LockMode,
        timeouts: &LockTimeouts,
    ) -> Result<(), LmgrError> {
        let tag = LockTag::apply_transaction(local.database(), suboid, xid, objid);
        self.acquire(b, local, tag, mode, LockOwner::Session, timeouts)?;
        Ok(())
    }

    /// Models `UnlockApplyTransactionForSession` (lmgr.c, 16+).
    pub fn unlock_apply_transaction_for_session(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        suboid: u32,
        xid: u32,
        objid: u16,
        mode: LockMode,
    ) -> Result<(), LmgrError> {
        let tag = LockTag::apply_transaction(local.database(), suboid, xid, objid);
        self.release(b, local, tag, mode, LockOwner::Session)
    }
}
