//! Whether a transaction is still running, as a tuple's visibility test asks when it meets an
//! xid without a hint bit (procarray.c's `TransactionIdIsInProgress`).
//!
//! Cheap answers come first and take no lock: an xid older than the backend's `RecentXmin` has
//! ended; so has the xid whose status the backend last fetched from the commit log
//! (`TransactionIdIsKnownCompleted`); the backend's own xids are running. Otherwise ProcArrayLock
//! is taken *shared*: an xid past `latestCompletedXid` is running; else every other backend's xid
//! and cached subxids are compared with it. A backend whose subxid cache overflowed may be running
//! the xid as an uncached subtransaction: after the lock, the xid's topmost parent
//! (`SubTransGetTopmostTransaction`) is compared with those backends' xids.
//!
//! So a backend that waits for a row's updater, or checks a row's `xmax`, reads the same
//! ProcArray lines a snapshot does, under the same lock.

use crate::{ProcArray, ProcArrayError, SnapshotLayout, INVALID_TRANSACTION_ID};
use pglocks_lwlock::{LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::Ordering::{Acquire, Relaxed};
use pglocks_sync::shmem::independent;

/// One ProcArray entry's xid and the state of its subxid cache, wherever the layout keeps them.
struct EntryXids {
    xid: u32,
    cached_subxids: usize,
    overflowed: bool,
}

impl<K: RawLwLock> ProcArray<K> {
    /// Entry `off` of the array (backend `procno`): its xid, and its subxid count and overflow
    /// only when `with_subxids` (PostgreSQL reads them only for a backend worth looking into).
    #[inline]
    fn entry_xids(&self, off: usize, procno: usize, with_subxids: bool) -> EntryXids {
        let (xid, count, overflowed) = match self.layout {
            SnapshotLayout::ProcScan => {
                let p = &self.all_procs[procno];
                (&p.xid, &p.subxid_status.count, &p.subxid_status.overflowed)
            }
            SnapshotLayout::Pgxact => {
                let x = self.pgxact(procno);
                (&x.xid, &x.nxids, &x.overflowed)
            }
            SnapshotLayout::Dense => {
                let s = &self.subxid_states[off];
                (&self.xids[off], &s.count, &s.overflowed)
            }
        };
        EntryXids {
            xid: xid.load(Relaxed),
            cached_subxids: if with_subxids {
                count.load(Acquire) as usize
            } else {
                0
            },
            overflowed: with_subxids && overflowed.load(Relaxed),
        }
    }

    /// Whether `xid` is one of backend `procno`'s cached xids (top or subtransaction).
    fn entry_has(&self, procno: usize, entry: &EntryXids, xid: u32) -> bool {
        entry.xid == xid
            || self.all_procs[procno].subxids[..entry.cached_subxids]
                .iter()
                .any(|x| x.load(Relaxed) == xid)
    }

    /// Models `TransactionIdIsCurrentTransactionId` (xact.c) from the backend's own entry: its
    /// xid, a cached subxid, or — past the cache — an xid whose topmost parent is its xid
    /// (PostgreSQL walks its private subtransaction stack instead).
    fn is_current_transaction_id(&self, me: usize, mine: &EntryXids, xid: u32) -> bool {
        self.entry_has(me, mine, xid)
            || (mine.overflowed
                && xid > mine.xid
                && self
                    .sub_trans_get_topmost(xid)
                    .is_ok_and(|top| top == mine.xid))
    }

    /// The loop of `TransactionIdIsInProgress` (ProcArrayLock held shared): whether another
    /// backend has `xid` as its xid or a cached subxid, collecting in `overflowed` the xids of
    /// those whose caches overflowed. Its loads do not wait for each other's (the caller runs
    /// it [`independent`]ly).
    fn scan_for_xid(&self, me: usize, xid: u32, overflowed: &mut Vec<u32>) -> bool {
        for off in 0..self.num_procs() {
            let procno = self.proc_array.pgprocno(off) as usize;
            if procno == me {
                continue;
            }
            let top = self.entry_xids(off, procno, false).xid;
            if top == INVALID_TRANSACTION_ID || xid < top {
                continue;
            }
            if top == xid {
                return true;
            }
            let entry = self.entry_xids(off, procno, true);
            if self.entry_has(procno, &entry, xid) {
                return true;
            }
            if entry.overflowed {
                overflowed.push(entry.xid);
            }
        }
        false
    }

    /// Models `TransactionIdIsInProgress` (procarray.c): whether `xid` belongs to a transaction
    /// that has not ended. `recent_xmin` is the backend's `RecentXmin` (its last snapshot's
    /// xmin, or 0 before any) and `known_completed` the xid whose status it last fetched from the
    /// commit log (transam.c's `cachedFetchXid`, or 0): both answer without the lock. Counts
    /// `procarray.in_progress_scans` when it scans under ProcArrayLock.
    ///
    /// Differences: subtransactions here never abort alone, so the overflowed case does not ask
    /// the commit log whether the xid aborted (`TransactionIdDidAbort`) before following its
    /// parents; hot standby's `KnownAssignedXids` is not modelled.
    pub fn transaction_id_is_in_progress(
        &self,
        b: &mut Backend,
        xid: u32,
        recent_xmin: u32,
        known_completed: u32,
    ) -> Result<bool, ProcArrayError> {
        if xid < recent_xmin || xid == known_completed || xid == INVALID_TRANSACTION_ID {
            return Ok(false);
        }
        let me = b.procno();
        let my_off = self.pgxactoff(me)?;
        let mine = self.entry_xids(my_off, me, true);
        if mine.xid != INVALID_TRANSACTION_ID && self.is_current_transaction_id(me, &mine, xid) {
            return Ok(true);
        }
        self.proc_array_lock.acquire(b, LwLockMode::Shared)?;
        b.stats.events.count("procarray.in_progress_scans", 1);
        if self.cache.latest_completed_xid.load(Relaxed) < xid {
            self.proc_array_lock.release(b)?;
            return Ok(true);
        }
        // The running top-level xids of backends whose subxid caches overflowed.
        let mut overflowed = Vec::new();
        let found = independent(|| self.scan_for_xid(me, xid, &mut overflowed));
        self.proc_array_lock.release(b)?;
        if found || overflowed.is_empty() {
            return Ok(found);
        }
        let top = self.sub_trans_get_topmost(xid)?;
        Ok(top != xid && overflowed.contains(&top))
    }
}
