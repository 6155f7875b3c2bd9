//! Transaction ids in and out of the ProcArray: `GetNewTransactionId` (varsup.c),
//! `ProcArrayEndTransaction`, `ProcArrayEndTransactionInternal` and `ProcArrayGroupClearXid`
//! (procarray.c), and the commit record they presuppose.

use crate::{
    transaction_id_is_normal, Pgproc, ProcArray, ProcArrayError, SnapshotLayout, INVALID_PGPROCNO,
    INVALID_TRANSACTION_ID, PGPROC_MAX_CACHED_SUBXIDS, PROC_VACUUM_STATE_MASK, XID_STOP_LIMIT,
};
use pglocks_lwlock::{LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::Ordering::*;
use pglocks_sync::time::Instant;

impl<K: RawLwLock> ProcArray<K> {
    /// Models `GetNewTransactionId` (varsup.c) and `SubTransSetParent`: takes `nextXid` under
    /// XidGenLock exclusive, advances it, and publishes the xid in the backend's entry before
    /// releasing the lock — a top-level xid (`parent` `None`) in its xid field, a subtransaction's
    /// in its subxid cache (count raised after the slot is written), or only the overflowed flag
    /// once the cache holds [`PGPROC_MAX_CACHED_SUBXIDS`]. `parent` is trusted to be one of the
    /// backend's own xids; a subtransaction needs a top-level xid first, as `AssignTransactionId`
    /// guarantees.
    pub fn assign_xid(&self, b: &mut Backend, parent: Option<u32>) -> Result<u32, ProcArrayError> {
        self.assign_xid_extending(b, parent, |_, _| Ok::<(), std::convert::Infallible>(()))
    }

    /// [`assign_xid`](Self::assign_xid) calling `extend(b, xid)` under XidGenLock before the xid
    /// is handed out, as `GetNewTransactionId` calls `ExtendCLOG` (and `ExtendSUBTRANS`): where
    /// the commit log lives outside this crate (the slru crate's `Clog::extend`), so that its
    /// page for a new xid exists before anyone can set that xid's status. If `extend` fails,
    /// the xid is not assigned.
    pub fn assign_xid_extending<E>(
        &self,
        b: &mut Backend,
        parent: Option<u32>,
        extend: impl FnOnce(&mut Backend, u32) -> Result<(), E>,
    ) -> Result<u32, ProcArrayError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let me = b.procno();
        self.pgxactoff(me)?;
        let top = self.my_xid(me);
        match parent {
            None if top != INVALID_TRANSACTION_ID => {
                return Err(ProcArrayError::XactState {
                    procno: me,
                    what: "already has a transaction id",
                })
            }
            Some(_) if top == INVALID_TRANSACTION_ID => {
                return Err(ProcArrayError::XactState {
                    procno: me,
                    what: "a subtransaction needs a top-level transaction id",
                })
            }
            _ => {}
        }
        self.xid_gen_lock.acquire(b, LwLockMode::Exclusive)?;
        let xid = self.cache.next_xid.load(Relaxed);
        if xid >= XID_STOP_LIMIT {
            self.xid_gen_lock.release(b)?;
            return Err(ProcArrayError::XidWraparound);
        }
        if let Err(e) = extend(b, xid) {
            self.xid_gen_lock.release(b)?;
            return Err(ProcArrayError::Extend {
                xid,
                source: Box::new(e),
            });
        }
        self.status
            .extend(xid, parent.unwrap_or(INVALID_TRANSACTION_ID));
        self.cache.next_xid.store(xid + 1, Relaxed);
        match parent {
            None => self.publish_xid(me, xid),
            Some(_) => self.publish_subxid(me, xid),
        }
        self.xid_gen_lock.release(b)?;
        Ok(xid)
    }

    /// The top-level xid into the layout's field(s).
    fn publish_xid(&self, me: usize, xid: u32) {
        match self.hot_fields(me) {
            Some(hot) => hot.xid.store(xid, Relaxed),
            None => {
                let proc = &self.all_procs[me];
                proc.xid.store(xid, Relaxed);
                let off = proc.pgxactoff.load(Relaxed) as usize;
                self.xids[off].store(xid, Relaxed);
            }
        }
    }

    /// A subtransaction's xid into the cache: the slot first, then (Release: PostgreSQL's
    /// `pg_write_barrier`) the raised count, or the overflowed flag when the cache is full.
    fn publish_subxid(&self, me: usize, xid: u32) {
        let proc = &self.all_procs[me];
        let (count, overflowed) = match self.hot_fields(me) {
            Some(hot) => (hot.subxid_count, hot.subxid_overflowed),
            None => (&proc.subxid_status.count, &proc.subxid_status.overflowed),
        };
        let n = count.load(Relaxed) as usize;
        let dense = (self.layout == SnapshotLayout::Dense)
            .then(|| &self.subxid_states[proc.pgxactoff.load(Relaxed) as usize]);
        if n < PGPROC_MAX_CACHED_SUBXIDS {
            proc.subxids[n].store(xid, Relaxed);
            count.store(n as u8 + 1, Release);
            if let Some(d) = dense {
                d.count.store(n as u8 + 1, Release);
            }
        } else {
            overflowed.store(true, Relaxed);
            if let Some(d) = dense {
                d.overflowed.store(true, Relaxed);
            }
        }
    }

    /// Models `TransactionIdCommitTree`: records `xid` and its `subxids` as committed, which
    /// PostgreSQL does (in the commit log) before [`Self::end_transaction`].
    pub fn commit_tree(&self, xid: u32, subxids: &[u32]) -> Result<(), ProcArrayError> {
        for &s in subxids {
            self.status.set_committed(s)?;
        }
        self.status.set_committed(xid)
    }

    /// Models `ProcArrayEndTransaction`: the backend's transaction (committed or aborted) is no
    /// longer running. `latest_xid` is the newest xid of its tree, or
    /// [`INVALID_TRANSACTION_ID`] if it had none — then only its xmin is reset, without a lock.
    /// With an xid: ≤ 9.5 takes ProcArrayLock exclusive; 9.6+ tries it conditionally and
    /// otherwise joins the group clear (`group_clear_xid`).
    pub fn end_transaction(&self, b: &mut Backend, latest_xid: u32) -> Result<(), ProcArrayError> {
        let me = b.procno();
        self.pgxactoff(me)?;
        let has_xid = self.my_xid(me) != INVALID_TRANSACTION_ID;
        if !transaction_id_is_normal(latest_xid) {
            if has_xid || latest_xid != INVALID_TRANSACTION_ID {
                return Err(ProcArrayError::XactState {
                    procno: me,
                    what: "ending a transaction that has an xid needs its latest xid",
                });
            }
            self.end_without_xid(me);
            return Ok(());
        }
        if !has_xid {
            return Err(ProcArrayError::XactState {
                procno: me,
                what: "ending with a latest xid, but no xid is assigned",
            });
        }
        if !self.group_clear {
            self.proc_array_lock.acquire(b, LwLockMode::Exclusive)?;
        } else if !self
            .proc_array_lock
            .conditional_acquire(b, LwLockMode::Exclusive)?
        {
            return self.group_clear_xid(b, latest_xid);
        }
        self.end_transaction_internal(me, latest_xid);
        self.proc_array_lock.release(b)?;
        Ok(())
    }

    /// The no-xid branch of `ProcArrayEndTransaction`: no lock, xmin reset. ≤ 13 also clears
    /// the vacuum flags and `inCommit`/`delayChkpt` (stores into the lines every snapshot
    /// reads); 14 touches the status flags only when one is set.
    fn end_without_xid(&self, me: usize) {
        match self.hot_fields(me) {
            Some(hot) => {
                hot.xmin.store(INVALID_TRANSACTION_ID, Relaxed);
                hot.clear_vacuum_flags_and_in_commit();
            }
            None => self.all_procs[me]
                .xmin
                .store(INVALID_TRANSACTION_ID, Relaxed),
        }
    }

    /// Models `ProcArrayEndTransactionInternal` (9.6+; the locked branch of ≤ 9.5's
    /// `ProcArrayEndTransaction`): clears backend `procno`'s xid, xmin and subxid cache,
    /// advances `latestCompletedXid` (`MaintainLatestCompletedXid`) and, in 14, bumps
    /// `xactCompletionCount`. ProcArrayLock held exclusively.
    fn end_transaction_internal(&self, procno: usize, latest_xid: u32) {
        match self.hot_fields(procno) {
            Some(hot) => {
                hot.xid.store(INVALID_TRANSACTION_ID, Relaxed);
                hot.xmin.store(INVALID_TRANSACTION_ID, Relaxed);
                hot.clear_vacuum_flags_and_in_commit();
                hot.subxid_count.store(0, Relaxed);
                hot.subxid_overflowed.store(false, Relaxed);
            }
            None => self.end_transaction_internal_dense(&self.all_procs[procno]),
        }
        let latest = &self.cache.latest_completed_xid;
        if latest.load(Relaxed) < latest_xid {
            latest.store(latest_xid, Relaxed);
        }
    }

    /// 14's part of `ProcArrayEndTransactionInternal`: the dense arrays and their `PGPROC`
    /// mirrors, the flags and subxid state only when set (no needless dirtying), and the
    /// completion count.
    fn end_transaction_internal_dense(&self, proc: &Pgproc) {
        let off = proc.pgxactoff.load(Relaxed) as usize;
        self.xids[off].store(INVALID_TRANSACTION_ID, Relaxed);
        proc.xid.store(INVALID_TRANSACTION_ID, Relaxed);
        proc.xmin.store(INVALID_TRANSACTION_ID, Relaxed);
        let flags = proc.vacuum_flags.load(Relaxed);
        if flags & PROC_VACUUM_STATE_MASK != 0 {
            proc.vacuum_flags
                .store(flags & !PROC_VACUUM_STATE_MASK, Relaxed);
            self.status_flags[off].store(flags & !PROC_VACUUM_STATE_MASK, Relaxed);
        }
        if proc.subxid_status.count.load(Relaxed) > 0 || proc.subxid_status.overflowed.load(Relaxed)
        {
            self.subxid_states[off].clear();
            proc.subxid_status.clear();
        }
        let count = &self.cache.xact_completion_count;
        count.store(count.load(Relaxed) + 1, Relaxed);
    }

    /// Models `ProcArrayGroupClearXid` (9.6+): pushes the backend on `procArrayGroupFirst`. A
    /// member sleeps on its semaphore until the leader has cleared its xid; the leader — the one
    /// that found the list empty — takes ProcArrayLock, detaches the list, ends every member's
    /// transaction, releases the lock and then wakes the members. Counts
    /// `procarray.group_members` (per member that slept) and `procarray.group_leads`, and the
    /// member's wait as `ProcArrayGroupUpdate`.
    #[cold]
    fn group_clear_xid(&self, b: &mut Backend, latest_xid: u32) -> Result<(), ProcArrayError> {
        let me = b.procno() as u32;
        let proc = &self.all_procs[me as usize];
        proc.group_member.store(true, Relaxed);
        proc.group_member_xid.store(latest_xid, Relaxed);
        let mut next = self.group_first.load(Relaxed);
        loop {
            proc.group_next.store(next, Relaxed);
            // AcqRel: PostgreSQL's compare-exchange is a full barrier; the leader that swaps the
            // list out sees this member's fields.
            match self.group_first.compare_exchange(next, me, AcqRel, Relaxed) {
                Ok(_) => break,
                Err(now) => {
                    // PostgreSQL retries at once (a yield point for loom only).
                    next = now;
                    pglocks_sync::hint::model_yield();
                }
            }
        }
        if next != INVALID_PGPROCNO {
            // A member: the leader clears our xid.
            let t = Instant::now();
            b.sleep_until(|| !proc.group_member.load(Acquire));
            b.stats
                .waits
                .record("ProcArrayGroupUpdate", "IPC", t.elapsed().as_nanos() as u64);
            b.stats.events.count("procarray.group_members", 1);
            return Ok(());
        }
        // The leader. The acquire has room in the held-locks array (the conditional acquire
        // just checked); what else can fail, a stuck spinlock, is a PANIC in PostgreSQL.
        self.proc_array_lock.acquire(b, LwLockMode::Exclusive)?;
        let head = self.group_first.swap(INVALID_PGPROCNO, AcqRel);
        let mut at = head;
        let forget = pglocks_sync::mutant::active(pglocks_sync::mutant::Mutant::GroupClearForget);
        let mut nth = 0;
        while at != INVALID_PGPROCNO {
            let member = &self.all_procs[at as usize];
            nth += 1;
            if !(forget && nth == 2) {
                self.end_transaction_internal(at as usize, member.group_member_xid.load(Relaxed));
            }
            at = member.group_next.load(Relaxed);
        }
        let released = self.proc_array_lock.release(b);
        b.stats.events.count("procarray.group_leads", 1);
        // Wake the members after releasing the lock, whatever the release said.
        b.wake_group(head, |at| {
            let member = &self.all_procs[at];
            (&member.group_next, &member.group_member)
        });
        released?;
        Ok(())
    }
}
