//! Snapshots: `GetSnapshotData` in each release's layout, 14's `GetSnapshotDataReuse`, and the
//! MVCC test that uses a snapshot (`XidInMVCCSnapshot`, snapmgr.c).
//!
//! A snapshot says which transactions count as running for its holder: every xid `>= xmax`,
//! every xid listed in `xip` (top-level) or `subxip` (cached subtransactions), and — when some
//! backend's subxid cache had overflowed (`suboverflowed`) — every xid whose topmost parent is
//! listed. Everything else below `xmax` has finished, and is visible if it committed.

use crate::{
    transaction_id_is_normal, ProcArray, ProcArrayError, SnapshotLayout, INVALID_TRANSACTION_ID,
    PGPROC_MAX_CACHED_SUBXIDS, PROC_IN_VACUUM,
};
use pglocks_lwlock::{LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::Ordering::*;
use pglocks_sync::cpu::{self, Kernel};
use pglocks_sync::shmem::independent;

/// Models `SnapshotData` (snapshot.h), the MVCC fields. A backend keeps one and passes it to
/// every [`ProcArray::get_snapshot_data`], as PostgreSQL passes its static `CurrentSnapshotData`:
/// the arrays are allocated once, and 14 reuses the contents when nothing has completed since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Every xid below it has finished.
    pub xmin: u32,
    /// Every xid from it on is running (`latestCompletedXid + 1`).
    pub xmax: u32,
    /// `xip`: running top-level xids in `[xmin, xmax)`, the taker's own excepted.
    pub xip: Vec<u32>,
    /// `subxip`: running subtransaction xids from the backends' caches.
    pub subxip: Vec<u32>,
    /// Some backend's subxid cache had overflowed: `subxip` is incomplete.
    pub suboverflowed: bool,
    /// ≤ 13's `RecentGlobalXmin`: the oldest xmin advertised by any backend (and this
    /// snapshot's `xmin`), computed during the scan. `None` from 14, which maintains the
    /// `GlobalVis*` horizons instead (not modelled).
    pub global_xmin: Option<u32>,
    /// `snapXactCompletionCount` (14): `xactCompletionCount` when the contents were built; 0 =
    /// never built.
    pub snap_xact_completion_count: u64,
}

impl Snapshot {
    /// An empty snapshot, never taken.
    pub fn new() -> Self {
        Self::default()
    }
}

/// ≤ 13: a backend's advertised xmin, if valid, lowers the global xmin (`RecentGlobalXmin`).
#[inline(always)]
fn lower_global_xmin(global_xmin: &mut u32, their_xmin: u32) {
    if transaction_id_is_normal(their_xmin) && their_xmin < *global_xmin {
        *global_xmin = their_xmin;
    }
}

impl<K: RawLwLock> ProcArray<K> {
    /// Models `GetSnapshotData` (procarray.c) of the layout: fills `snap` under ProcArrayLock
    /// shared and sets the backend's xmin if it has none. With [`SnapshotLayout::Dense`], a
    /// snapshot whose contents were built at the current `xactCompletionCount` is reused without
    /// a scan (`GetSnapshotDataReuse`). Counts `procarray.snapshot_reused` or
    /// `procarray.snapshot_scans`.
    pub fn get_snapshot_data(
        &self,
        b: &mut Backend,
        snap: &mut Snapshot,
    ) -> Result<(), ProcArrayError> {
        let me = b.procno();
        self.pgxactoff(me)?;
        // Room for every backend's xid and cached subxids, allocated outside the lock (PostgreSQL
        // mallocs GetMaxSnapshotXidCount / GetMaxSnapshotSubxidCount once per static snapshot).
        let max = self.max_backends();
        if snap.xip.capacity() < max {
            snap.xip.reserve(max.saturating_sub(snap.xip.len()));
            let subs = max * PGPROC_MAX_CACHED_SUBXIDS;
            snap.subxip.reserve(subs.saturating_sub(snap.subxip.len()));
        }
        self.proc_array_lock.acquire(b, LwLockMode::Shared)?;
        if self.layout == SnapshotLayout::Dense && self.get_snapshot_data_reuse(me, snap) {
            self.proc_array_lock.release(b)?;
            b.stats.events.count("procarray.snapshot_reused", 1);
            return Ok(());
        }
        let xmax = self.cache.latest_completed_xid.load(Relaxed) + 1;
        snap.xip.clear();
        snap.subxip.clear();
        // No backend's loads wait for the previous one's: an out-of-order core overlaps them.
        let (xmin, global_xmin, suboverflowed) = independent(|| match self.layout {
            SnapshotLayout::ProcScan => self.scan_procs(me, xmax, snap),
            SnapshotLayout::Pgxact => self.scan_pgxact(me, xmax, snap),
            SnapshotLayout::Dense => self.scan_dense(me, xmax, snap),
        });
        let my_xmin = self.xmin_field(me);
        if my_xmin.load(Relaxed) == INVALID_TRANSACTION_ID {
            my_xmin.store(xmin, Relaxed);
        }
        if self.layout == SnapshotLayout::Dense {
            snap.snap_xact_completion_count = self.cache.xact_completion_count.load(Relaxed);
        }
        self.proc_array_lock.release(b)?;
        snap.xmin = xmin;
        snap.xmax = xmax;
        snap.suboverflowed = suboverflowed;
        snap.global_xmin = global_xmin.map(|g| g.min(xmin));
        b.stats.events.count("procarray.snapshot_scans", 1);
        Ok(())
    }

    /// Models `GetSnapshotDataReuse` (14): if no xid-bearing transaction has ended since `snap`
    /// was built, its contents stand; the backend re-advertises its xmin if it has none.
    /// ProcArrayLock held shared.
    #[inline]
    fn get_snapshot_data_reuse(&self, me: usize, snap: &Snapshot) -> bool {
        if snap.snap_xact_completion_count == 0
            || snap.snap_xact_completion_count != self.cache.xact_completion_count.load(Relaxed)
        {
            return false;
        }
        let my_xmin = &self.all_procs[me].xmin;
        if my_xmin.load(Relaxed) == INVALID_TRANSACTION_ID {
            my_xmin.store(snap.xmin, Relaxed);
        }
        true
    }

    /// ≤ 9.1's loop: every registered `PGPROC`, its xmin, xid, vacuum flags and subxid cache —
    /// the cache header read even for backends without an xid. Returns (xmin, global xmin,
    /// suboverflowed).
    fn scan_procs(&self, me: usize, xmax: u32, snap: &mut Snapshot) -> (u32, Option<u32>, bool) {
        let (mut xmin, mut global_xmin, mut suboverflowed) = (xmax, xmax, false);
        for index in 0..self.num_procs() {
            let procno = self.proc_array.pgprocno(index) as usize;
            let proc = &self.all_procs[procno];
            if proc.vacuum_flags.load(Relaxed) & PROC_IN_VACUUM != 0 {
                continue;
            }
            lower_global_xmin(&mut global_xmin, proc.xmin.load(Relaxed));
            let xid = proc.xid.load(Relaxed);
            if transaction_id_is_normal(xid) {
                if xid >= xmax {
                    continue;
                }
                if procno != me {
                    snap.xip.push(xid);
                }
                xmin = xmin.min(xid);
            }
            if !suboverflowed && procno != me {
                if proc.subxid_status.overflowed.load(Relaxed) {
                    suboverflowed = true;
                } else {
                    let n = proc.subxid_status.count.load(Acquire) as usize;
                    snap.subxip
                        .extend(proc.subxids[..n].iter().map(|x| x.load(Relaxed)));
                }
            }
        }
        (xmin, Some(global_xmin), suboverflowed)
    }

    /// 9.2–13's loop: the dense `PGXACT`s through `pgprocnos`; the `PGPROC` only for the subxids
    /// of a backend that has some.
    fn scan_pgxact(&self, me: usize, xmax: u32, snap: &mut Snapshot) -> (u32, Option<u32>, bool) {
        let (mut xmin, mut global_xmin, mut suboverflowed) = (xmax, xmax, false);
        for index in 0..self.num_procs() {
            let procno = self.proc_array.pgprocno(index) as usize;
            let pgxact = self.pgxact(procno);
            if pgxact.vacuum_flags.load(Relaxed) & PROC_IN_VACUUM != 0 {
                continue;
            }
            lower_global_xmin(&mut global_xmin, pgxact.xmin.load(Relaxed));
            let xid = pgxact.xid.load(Relaxed);
            if !transaction_id_is_normal(xid) || xid >= xmax {
                continue;
            }
            xmin = xmin.min(xid);
            if procno == me {
                continue;
            }
            snap.xip.push(xid);
            if !suboverflowed {
                if pgxact.overflowed.load(Relaxed) {
                    suboverflowed = true;
                } else {
                    let n = pgxact.nxids.load(Acquire) as usize;
                    if n > 0 {
                        let proc = &self.all_procs[procno];
                        snap.subxip
                            .extend(proc.subxids[..n].iter().map(|x| x.load(Relaxed)));
                    }
                }
            }
        }
        (xmin, Some(global_xmin), suboverflowed)
    }

    /// 14's loop: `ProcGlobal->xids` by `pgxactoff`; status flags, subxid states and the
    /// `PGPROC`'s subxids only for backends with an xid. The taker's own xid enters `xmin`
    /// before the loop.
    fn scan_dense(&self, me: usize, xmax: u32, snap: &mut Snapshot) -> (u32, Option<u32>, bool) {
        let my_off = self.all_procs[me].pgxactoff.load(Relaxed) as usize;
        let (mut xmin, mut suboverflowed) = (xmax, false);
        let my_xid = self.xids[my_off].load(Relaxed);
        if transaction_id_is_normal(my_xid) && my_xid < xmin {
            xmin = my_xid;
        }
        for (off, x) in self.xids.iter_to(self.num_procs()).enumerate() {
            let xid = x.load(Relaxed);
            if xid == INVALID_TRANSACTION_ID || off == my_off || xid >= xmax {
                continue;
            }
            if self.status_flags[off].load(Relaxed) & PROC_IN_VACUUM != 0 {
                continue;
            }
            xmin = xmin.min(xid);
            snap.xip.push(xid);
            if !suboverflowed {
                let state = &self.subxid_states[off];
                if state.overflowed.load(Relaxed) {
                    suboverflowed = true;
                } else {
                    let n = state.count.load(Acquire) as usize;
                    if n > 0 {
                        let procno = self.proc_array.pgprocno(off) as usize;
                        snap.subxip.extend(
                            self.all_procs[procno].subxids[..n]
                                .iter()
                                .map(|x| x.load(Relaxed)),
                        );
                    }
                }
            }
        }
        (xmin, None, suboverflowed)
    }

    /// Models `XidInMVCCSnapshot` (snapmgr.c): whether `xid` counts as running for `snap`. With
    /// `suboverflowed`, the xid is first mapped to its topmost parent
    /// ([`Self::sub_trans_get_topmost`], the `pg_subtrans` stand-in), which fails only for an
    /// xid never assigned.
    pub fn xid_in_mvcc_snapshot(&self, xid: u32, snap: &Snapshot) -> Result<bool, ProcArrayError> {
        if xid < snap.xmin {
            return Ok(false);
        }
        if xid >= snap.xmax {
            return Ok(true);
        }
        // Both arrays are searched entry by entry (the scan kernel; `pg_lfind32` from 16 does
        // four at a time, which the kernel's per-entry cost does not tell apart).
        let mut xid = xid;
        if !snap.suboverflowed {
            cpu::ran(Kernel::Scan, snap.subxip.len());
            if snap.subxip.contains(&xid) {
                return Ok(true);
            }
        } else {
            xid = self.sub_trans_get_topmost(xid)?;
            if xid < snap.xmin {
                return Ok(false);
            }
        }
        cpu::ran(Kernel::Scan, snap.xip.len());
        Ok(snap.xip.contains(&xid))
    }

    /// Models `SubTransGetTopmostTransaction` (subtrans.c): follows parents up to the top-level
    /// transaction, from the parent pages instead of the `pg_subtrans` SLRU.
    pub fn sub_trans_get_topmost(&self, xid: u32) -> Result<u32, ProcArrayError> {
        let mut xid = xid;
        loop {
            let parent = self.status.parent(xid)?;
            if parent == INVALID_TRANSACTION_ID {
                return Ok(xid);
            }
            xid = parent;
        }
    }

    /// Models `TransactionIdDidCommit` (transam.c) from the commit bits instead of the commit log.
    pub fn transaction_id_did_commit(&self, xid: u32) -> Result<bool, ProcArrayError> {
        self.status.did_commit(xid)
    }

    /// The test `HeapTupleSatisfiesMVCC` makes of a tuple's `xmin` written by another
    /// transaction: visible iff not running for `snap` and committed — the status read after
    /// the snapshot test, as PostgreSQL orders them.
    pub fn xid_visible_as_committed(
        &self,
        xid: u32,
        snap: &Snapshot,
    ) -> Result<bool, ProcArrayError> {
        Ok(!self.xid_in_mvcc_snapshot(xid, snap)? && self.transaction_id_did_commit(xid)?)
    }
}
