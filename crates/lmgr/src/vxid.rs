//! Virtual-transaction locks (lock.c's `VirtualXactLockTableInsert`,
//! `VirtualXactLockTableCleanup` and `VirtualXactLock`; lmgr.c's `VirtualXactLockTableWait`
//! before 9.2).
//!
//! Every transaction holds an `ExclusiveLock` on its own virtual transaction id
//! (backend, local transaction number) so that others can wait for it to end — `CREATE INDEX
//! CONCURRENTLY`, say — by asking for a `ShareLock` on the same tag, which the lock manager
//! grants when the owner's lock goes, and which the deadlock checker can see.
//!
//! Up to 9.1 the lock is taken like any other at transaction start: a trip through a lock-table
//! partition and its `LockManager` LWLock for every transaction. From 9.2 it is *lazy*: the owner
//! only notes the id in its fast-path area under its own `fpInfoLock`, since almost nobody ever
//! waits for it. A backend that does want to wait puts the owner's lock into the main table on
//! the owner's behalf (under the owner's `fpInfoLock`) and then waits in the queue as usual; at
//! transaction end the owner finds its note gone and releases the table entry itself.
//!
//! Differences from PostgreSQL: the model ties the lazy form to having a fast path (both came
//! in 9.2; `LockManagerConfig::lazy_vxid` turns it off on a release that has one, a prototype
//! knob that gives 9.2 9.1's eager lock for comparison), and 8.1–8.2, which had no virtual ids and locked the transaction id at start
//! instead, use the eager form (the same cost: one table entry per transaction). Prepared
//! transactions are not modelled.

use crate::{
    LmgrError, LocalLocks, LockAcquireResult, LockManager, LockMode, LockOwner, LockTag,
    LockTimeouts,
};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;

/// lock.h's `VirtualTransactionId`: a backend and its local transaction number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VirtualXid {
    /// The backend (`procNumber`; `backendId` before 17).
    pub procno: u32,
    /// Its local transaction id (`localTransactionId`).
    pub lxid: u32,
}

impl VirtualXid {
    /// The lock tag of this id.
    pub fn tag(self) -> LockTag {
        LockTag::virtual_transaction(self.procno, self.lxid)
    }
}

impl<K: RawLwLock> LockManager<K> {
    /// Whether virtual-transaction locks are lazy (9.2+, unless configured eager): the note
    /// needs a fast-path area.
    fn lazy_vxid(&self) -> bool {
        self.lazy_vxid && self.fast_path.layout() != crate::FastPathLayout::None
    }

    /// Starts a transaction on backend `b`: a new local id and its lock
    /// (`VirtualXactLockTableInsert`, from `StartTransaction`).
    pub fn start_transaction(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
    ) -> Result<VirtualXid, LmgrError> {
        local.last_lxid = local.last_lxid.wrapping_add(1).max(1);
        local.lxid = local.last_lxid;
        let vxid = VirtualXid {
            procno: b.procno() as u32,
            lxid: local.lxid,
        };
        if self.lazy_vxid() {
            self.fast_path.with_slots(b, b.procno(), |s, _| {
                debug_assert!(!s.vxid_lock);
                s.vxid_lock = true;
                s.lxid = vxid.lxid;
            })?;
        } else {
            self.acquire(
                b,
                local,
                vxid.tag(),
                LockMode::Exclusive,
                LockOwner::Transaction,
                &LockTimeouts::default(),
            )?;
        }
        Ok(vxid)
    }

    /// `VirtualXactLockTableCleanup`, the start of `LockReleaseAll` (9.2+): clears the
    /// fast-path note, and releases the table entry a waiter made of it, if any.
    pub(crate) fn vxid_cleanup(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
    ) -> Result<(), LmgrError> {
        if local.lxid == 0 {
            return Ok(());
        }
        let lxid = std::mem::take(&mut local.lxid);
        if !self.lazy_vxid() {
            // The eager lock is an ordinary transaction lock: the caller releases it.
            return Ok(());
        }
        let me = b.procno();
        let (in_fast_path, noted) = self.fast_path.with_slots(b, me, |s, _| {
            let r = (s.vxid_lock, s.lxid);
            s.vxid_lock = false;
            s.lxid = 0;
            r
        })?;
        if !in_fast_path && noted == lxid {
            // A waiter moved it into the table.
            let tag = VirtualXid {
                procno: me as u32,
                lxid,
            }
            .tag();
            self.release_in_table(b, tag, me as u32, LockMode::Exclusive)?;
        }
        Ok(())
    }

    /// Models `VirtualXactLock` (9.2+) and `VirtualXactLockTableWait` /
    /// `ConditionalVirtualXactLockTableWait` (≤ 9.1): waits for transaction `vxid` to end
    /// (`wait` = `Some`), or only asks whether it has (`None`). True once it has ended.
    pub fn virtual_xact_lock(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        vxid: VirtualXid,
        wait: Option<&LockTimeouts>,
    ) -> Result<bool, LmgrError> {
        let tag = vxid.tag();
        if self.lazy_vxid() {
            let owner = vxid.procno as usize;
            if owner >= self.fast_path.backends() {
                return Ok(true);
            }
            let running =
                self.fast_path
                    .with_slots(b, owner, |s, b| -> Result<bool, LmgrError> {
                        if s.lxid != vxid.lxid {
                            return Ok(false);
                        }
                        if wait.is_some() && s.vxid_lock {
                            // Make the owner's lock visible to the queue and the deadlock checker.
                            let p = self.table.partition_of(tag.hash_code());
                            self.table.with_partition(
                                b,
                                p,
                                |part| -> Result<(), LmgrError> {
                                    part.setup(tag, vxid.procno, LockMode::Exclusive)?
                                        .grant(vxid.procno, LockMode::Exclusive);
                                    Ok(())
                                },
                            )??;
                            s.vxid_lock = false;
                        }
                        Ok(true)
                    })??;
            if !running {
                return Ok(true);
            }
            if wait.is_none() {
                return Ok(false);
            }
        }
        let owner = LockOwner::Transaction;
        let got = match wait {
            Some(t) => self.acquire(b, local, tag, LockMode::Share, owner, t)?,
            None => self.conditional_acquire(b, local, tag, LockMode::Share, owner)?,
        };
        if got == LockAcquireResult::NotAvailable {
            return Ok(false);
        }
        self.release(b, local, tag, LockMode::Share, owner)?;
        Ok(true)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{FastPathLayout, LockManagerConfig};
    use pglocks_proc::ProcTable;
    use std::sync::Arc;
    use std::time::Duration;

    fn lm(layout: FastPathLayout, lazy: bool) -> (ProcTable, Arc<LockManager>) {
        let mut cfg = LockManagerConfig::new(2);
        cfg.fast_path = layout;
        cfg.lazy_vxid = lazy;
        (ProcTable::new(2), Arc::new(LockManager::new(cfg)))
    }

    #[test]
    fn lazy_vxid_locks_stay_out_of_the_table_until_someone_waits() {
        // Without a fast path, or configured eager, the lock is in the table from the start.
        for (layout, lazy, entries) in [
            (FastPathLayout::Slots16, true, (0, 0)),
            (FastPathLayout::None, true, (1, 1)),
            (FastPathLayout::Slots16, false, (1, 1)),
        ] {
            let eager = entries == (1, 1);
            let (procs, lm) = lm(layout, lazy);
            let mut a = procs.attach().unwrap();
            let mut la = lm.connect(&mut a, 5).unwrap();
            let vxid = lm.start_transaction(&mut a, &mut la).unwrap();
            assert_eq!(lm.entries_in_use(), entries, "{layout:?}");
            let mut b = procs.attach().unwrap();
            let mut lb = lm.connect(&mut b, 5).unwrap();
            assert!(!lm.virtual_xact_lock(&mut b, &mut lb, vxid, None).unwrap());
            // b waits for a's transaction; a ends it.
            let (lm2, procs2) = (Arc::clone(&lm), procs.clone());
            let waiter = std::thread::spawn(move || {
                let t = LockTimeouts::default();
                let r = lm2.virtual_xact_lock(&mut b, &mut lb, vxid, Some(&t));
                drop(procs2);
                r
            });
            while !lm.is_waiting(1) {
                std::thread::sleep(Duration::from_micros(200));
            }
            assert_eq!(lm.entries_in_use(), (1, 2), "a's lock and b's request");
            assert_eq!(
                lm.release_all(&mut a, &mut la, false).unwrap(),
                usize::from(eager)
            );
            assert!(waiter.join().unwrap().unwrap());
            assert_eq!(lm.entries_in_use(), (0, 0));
            // An ended transaction needs no wait.
            let mut c = procs.attach().unwrap();
            let mut lc = lm.connect(&mut c, 5).unwrap();
            assert!(lm.virtual_xact_lock(&mut c, &mut lc, vxid, None).unwrap());
        }
    }
}
