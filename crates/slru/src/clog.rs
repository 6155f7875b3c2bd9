//! Models the commit log (clog.c, `pg_xact`): two bits of status per transaction id in an SLRU.
//!
//! # Layout
//! Transaction `xid` has its status in page `xid / 32768`, byte `(xid % 32768) / 4`, bits
//! `2 × (xid % 4)` from the least significant: 0 in progress, 1 committed, 2 aborted,
//! 3 sub-committed. Every 32 transactions share one *group LSN*, the latest commit-record LSN of
//! an asynchronous commit among them, which a reader needs before it may trust a commit.
//!
//! # Setting a transaction tree's status
//! A transaction commits or aborts with its subtransactions in one call
//! (`TransactionIdSetTreeStatus`). On one page the change is atomic under the bank lock, but a
//! tree may span pages: for a commit, the subtransactions on the other pages are first marked
//! *sub-committed*, then the parent's page is set (parent and the subtransactions there), then
//! the other pages. A reader that finds a sub-committed xid looks at its parent, so no one sees
//! part of the tree committed before the parent is. On the parent's page, subtransactions are
//! likewise sub-committed before the parent is set.
//!
//! # Group update (11+)
//! Committing backends all want the same page's lock exclusively. From 11 a committer that
//! cannot take it at once pushes itself onto a lock-free list (`clogGroupFirst`) — if the list's
//! head wants the same page — and sleeps on its semaphore; the first one on the list is the
//! leader: it takes the lock, detaches the whole list, applies every member's update, releases
//! the lock and wakes them. One lock acquisition serves many commits. Members with more than
//! `THRESHOLD_SUBTRANS_CLOG_OPT` (5) subtransactions, or a tree spanning pages, do not take part.
//!
//! # Differences from PostgreSQL
//! - A member's request (xid, subxids, status, page, LSN) is in this module's per-backend array
//!   instead of its `PGPROC`; the caller passes its subxids and is trusted to be their owner
//!   (PostgreSQL checks them against `MyProc`).
//! - A forbidden status change (PostgreSQL's `Assert`) is [`SlruError::BadTransition`], checked
//!   for every xid on a page before any is changed.
//! - `pageno` arithmetic does not wrap around (no xid epoch wraparound, no truncation).

use crate::{PageStore, Slru, SlruConfig, SlruError, Victim};
use pglocks_lwlock::{LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use pglocks_sync::shmem::Placed;
use pglocks_sync::sync::Mutex;
use pglocks_sync::CachePadded;

/// `CLOG_XACTS_PER_PAGE`.
pub const CLOG_XACTS_PER_PAGE: u32 = (crate::BLCKSZ * 4) as u32;
/// `CLOG_XACTS_PER_LSN_GROUP`.
pub const CLOG_XACTS_PER_LSN_GROUP: u32 = 32;
/// `CLOG_LSNS_PER_PAGE`.
pub const CLOG_LSNS_PER_PAGE: usize = (CLOG_XACTS_PER_PAGE / CLOG_XACTS_PER_LSN_GROUP) as usize;
/// `THRESHOLD_SUBTRANS_CLOG_OPT`: the most subtransactions a group update member may have.
pub const THRESHOLD_SUBTRANS_CLOG_OPT: usize = 5;
/// `FirstNormalTransactionId`.
pub const FIRST_NORMAL_TRANSACTION_ID: u32 = 3;
const INVALID_PROC: u32 = u32::MAX;

/// A transaction's status (`XidStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XidStatus {
    /// `TRANSACTION_STATUS_IN_PROGRESS` (0).
    InProgress = 0,
    /// `TRANSACTION_STATUS_COMMITTED` (1).
    Committed = 1,
    /// `TRANSACTION_STATUS_ABORTED` (2).
    Aborted = 2,
    /// `TRANSACTION_STATUS_SUB_COMMITTED` (3).
    SubCommitted = 3,
}

impl XidStatus {
    /// The status of two bits.
    pub fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => XidStatus::InProgress,
            1 => XidStatus::Committed,
            2 => XidStatus::Aborted,
            _ => XidStatus::SubCommitted,
        }
    }

    /// A name for messages.
    pub fn name(self) -> &'static str {
        match self {
            XidStatus::InProgress => "in progress",
            XidStatus::Committed => "committed",
            XidStatus::Aborted => "aborted",
            XidStatus::SubCommitted => "sub-committed",
        }
    }
}

/// `TransactionIdToPage`.
#[inline]
pub fn xid_to_page(xid: u32) -> u64 {
    u64::from(xid / CLOG_XACTS_PER_PAGE)
}

/// The settings of a commit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClogConfig {
    /// The SLRU's shape.
    pub slru: SlruConfig,
    /// 11+: group update.
    pub group_update: bool,
    /// Backends that may commit (the size of the group-member array).
    pub max_backends: usize,
}

impl ClogConfig {
    /// The commit log of a release: `buffers` slots (8 up to 9.1, 32 in 9.2–9.5, 128 in
    /// 9.6–16 with 512 MB of shared_buffers or more; banks from 17), the victim rule, group
    /// update.
    pub fn new(
        buffers: usize,
        banks: bool,
        victim: Victim,
        group_update: bool,
        max_backends: usize,
    ) -> Self {
        Self {
            slru: SlruConfig {
                slots: buffers,
                banks,
                victim,
                lock_name: "XactSLRU",
                buffer_lock_name: "XactBuffer",
                lsn_groups_per_page: CLOG_LSNS_PER_PAGE,
            },
            group_update,
            max_backends,
        }
    }
}

/// `CLOGShmemBuffers` from 17 with `transaction_buffers = 0`: 2 MB per 1 GB of
/// `shared_buffers` (`shared_buffers / 512` pages), at least 16, at most 1024, a multiple of 16.
pub fn clog_autotune_buffers(shared_buffers_pages: usize) -> usize {
    let per = shared_buffers_pages / 512;
    (per - per % crate::SLRU_BANK_SIZE).clamp(crate::SLRU_BANK_SIZE, 1024)
}

/// A backend's slot in the group-update list (`PGPROC`'s `clogGroup*` fields).
#[derive(Default)]
struct GroupMember {
    member: AtomicBool,
    next: AtomicU32,
    xid: AtomicU32,
    status: AtomicU8,
    page: AtomicU64,
    lsn: AtomicU64,
    nsubxids: AtomicU8,
    subxids: [AtomicU32; THRESHOLD_SUBTRANS_CLOG_OPT],
    /// The leader's outcome for this member's update, handed over before the wake-up.
    error: Mutex<Option<SlruError>>,
}

/// The commit log.
///
/// Besides the SLRU, two shared structures are placed in the simulated shared-memory map
/// ([`pglocks_sync::shmem::Placed`]): `ProcGlobal->clogGroupFirst`, the head of the group-update
/// list, and the members' requests, which PostgreSQL keeps in each member's `PGPROC` (the
/// `clogGroup*` fields). Shortcuts: the head is a region of its own where PostgreSQL keeps it in
/// `PROC_HDR` beside `procArrayGroupFirst` (which the procarray crate also keeps on a line of
/// its own), and the requests are an array of their own, one padded entry per backend (padded
/// on the host as they always were), not fields of the `PGPROC`s: each backend's request still
/// lies on lines no other backend's does, as in PostgreSQL.
pub struct Clog<K: RawLwLock> {
    /// The placements of `group_first` and `members` (declared first, so they end before the
    /// memory is freed).
    _placed: [Placed; 2],
    slru: Slru<K>,
    group_update: bool,
    /// `ProcGlobal->clogGroupFirst`.
    group_first: Box<CachePadded<AtomicU32>>,
    members: Box<[CachePadded<GroupMember>]>,
}

impl<K: RawLwLock> Clog<K> {
    /// Models `CLOGShmemInit`: an empty commit log over `store`. (PostgreSQL allocates
    /// `PROC_HDR` and the `PGPROC`s after the commit log's SLRU, as here.)
    pub fn new(cfg: &ClogConfig, store: Box<dyn PageStore>) -> Result<Self, SlruError> {
        let slru = Slru::new(&cfg.slru, store)?;
        let group_first = Box::new(CachePadded::new(AtomicU32::new(INVALID_PROC)));
        let members: Box<[CachePadded<GroupMember>]> = (0..cfg.max_backends)
            .map(|_| {
                let m = GroupMember::default();
                m.next.store(INVALID_PROC, Relaxed);
                CachePadded::new(m)
            })
            .collect();
        Ok(Self {
            _placed: [
                Placed::one("ProcGlobal->clogGroupFirst", &**group_first),
                Placed::slice("PGPROC clogGroup fields", &members),
            ],
            group_update: cfg.group_update,
            group_first,
            members,
            slru,
        })
    }

    /// The SLRU underneath.
    pub fn slru(&self) -> &Slru<K> {
        &self.slru
    }

    /// Models `ZeroCLOGPage` / `ExtendCLOG`: when `newest_xid` is the first of its page (or the
    /// first normal xid), zeroes that page so statuses can be set in it.
    pub fn extend(&self, b: &mut Backend, newest_xid: u32) -> Result<(), SlruError> {
        if newest_xid % CLOG_XACTS_PER_PAGE != 0 && newest_xid != FIRST_NORMAL_TRANSACTION_ID {
            return Ok(());
        }
        let pageno = xid_to_page(newest_xid);
        self.slru.lock_bank(b, pageno, LwLockMode::Exclusive)?;
        // On an error the bank lock is already released.
        self.slru.zero_page(b, pageno)?;
        self.slru.unlock_bank(b, pageno)
    }

    /// Models `TransactionIdGetStatus`: the status of `xid` and its group's LSN, looked up with
    /// `SimpleLruReadPage_ReadOnly`.
    pub fn get_status(&self, b: &mut Backend, xid: u32) -> Result<(XidStatus, u64), SlruError> {
        let pageno = xid_to_page(xid);
        let slotno = self.slru.read_page_read_only(b, pageno)?;
        let status = self.status_in(slotno, xid);
        let lsn = self.slru.group_lsn(slotno, lsn_group(xid));
        self.slru.unlock_bank(b, pageno)?;
        Ok((status, lsn))
    }

    #[inline]
    fn status_in(&self, slotno: usize, xid: u32) -> XidStatus {
        let (byte, shift) = position(xid);
        XidStatus::from_bits(self.slru.byte(slotno, byte) >> shift)
    }

    /// Models `TransactionIdSetTreeStatus`: sets `xid` and its `subxids` (in xid order) to
    /// `status` (committed or aborted) with commit-record LSN `lsn` (0 for a synchronous
    /// commit), atomically per page, sub-committing the subtransactions on other pages first.
    pub fn set_tree_status(
        &self,
        b: &mut Backend,
        xid: u32,
        subxids: &[u32],
        status: XidStatus,
        lsn: u64,
    ) -> Result<(), SlruError> {
        debug_assert!(matches!(status, XidStatus::Committed | XidStatus::Aborted));
        let pageno = xid_to_page(xid);
        let on_first = subxids
            .iter()
            .take_while(|&&s| xid_to_page(s) == pageno)
            .count();
        if on_first == subxids.len() {
            return self.set_page_status(b, Some(xid), subxids, status, lsn, pageno, true);
        }
        let rest = &subxids[on_first..];
        if status == XidStatus::Committed {
            self.set_status_by_pages(b, rest, XidStatus::SubCommitted, lsn)?;
        }
        self.set_page_status(
            b,
            Some(xid),
            &subxids[..on_first],
            status,
            lsn,
            pageno,
            false,
        )?;
        self.set_status_by_pages(b, rest, status, lsn)
    }

    /// Models `set_status_by_pages`: `subxids` page by page.
    fn set_status_by_pages(
        &self,
        b: &mut Backend,
        subxids: &[u32],
        status: XidStatus,
        lsn: u64,
    ) -> Result<(), SlruError> {
        let mut rest = subxids;
        while let Some(&first) = rest.first() {
            let pageno = xid_to_page(first);
            let n = rest
                .iter()
                .take_while(|&&s| xid_to_page(s) == pageno)
                .count();
            self.set_page_status(b, None, &rest[..n], status, lsn, pageno, false)?;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Models `TransactionIdSetPageStatus`: one page's part of a tree, under the bank lock —
    /// from 11, taken conditionally, else through a group update when the tree is small and on
    /// one page.
    #[allow(clippy::too_many_arguments)]
    fn set_page_status(
        &self,
        b: &mut Backend,
        xid: Option<u32>,
        subxids: &[u32],
        status: XidStatus,
        lsn: u64,
        pageno: u64,
        all_on_one_page: bool,
    ) -> Result<(), SlruError> {
        if self.group_update
            && all_on_one_page
            && subxids.len() <= THRESHOLD_SUBTRANS_CLOG_OPT
            && b.procno() < self.members.len()
        {
            if let Some(xid) = xid {
                if self.slru.try_lock_bank(b, pageno)? {
                    self.set_page_status_internal(b, Some(xid), subxids, status, lsn, pageno)?;
                    return self.slru.unlock_bank(b, pageno);
                }
                if let Some(done) =
                    self.group_update_xid_status(b, xid, subxids, status, lsn, pageno)?
                {
                    return done;
                }
            }
        }
        self.slru.lock_bank(b, pageno, LwLockMode::Exclusive)?;
        // On an error the bank lock is already released.
        self.set_page_status_internal(b, xid, subxids, status, lsn, pageno)?;
        self.slru.unlock_bank(b, pageno)
    }

    /// Models `TransactionIdSetPageStatusInternal`: reads the page in and sets the bits
    /// (sub-committing the subtransactions before the parent on a commit). Bank lock held at
    /// entry; still held after `Ok`, released after an error.
    fn set_page_status_internal(
        &self,
        b: &mut Backend,
        xid: Option<u32>,
        subxids: &[u32],
        status: XidStatus,
        lsn: u64,
        pageno: u64,
    ) -> Result<(), SlruError> {
        // An asynchronous commit (a valid LSN) must not scribble on a page being written.
        let slotno = self.slru.read_page(b, pageno, lsn == 0)?;
        for &x in xid.iter().chain(subxids) {
            let from = self.status_in(slotno, x);
            // PostgreSQL's rule: from in progress, from sub-committed, or to the same status.
            if !(from == XidStatus::InProgress || from == XidStatus::SubCommitted || from == status)
            {
                self.slru.unlock_bank(b, pageno)?;
                return Err(SlruError::BadTransition {
                    xid: x,
                    from: from.name(),
                    to: status.name(),
                });
            }
        }
        if let Some(xid) = xid {
            if status == XidStatus::Committed {
                for &s in subxids {
                    self.set_status_bit(s, XidStatus::SubCommitted, lsn, slotno);
                }
            }
            self.set_status_bit(xid, status, lsn, slotno);
        }
        for &s in subxids {
            self.set_status_bit(s, status, lsn, slotno);
        }
        self.slru.mark_dirty(slotno);
        Ok(())
    }

    /// Models `TransactionIdSetStatusBit`: the two bits of `xid`, and its group LSN.
    #[inline]
    fn set_status_bit(&self, xid: u32, status: XidStatus, lsn: u64, slotno: usize) {
        let (byte, shift) = position(xid);
        let old = self.slru.byte(slotno, byte);
        self.slru.set_byte(
            slotno,
            byte,
            (old & !(3 << shift)) | ((status as u8) << shift),
        );
        if lsn != 0 {
            self.slru.advance_group_lsn(slotno, lsn_group(xid), lsn);
        }
    }

    /// Models `TransactionGroupUpdateXidStatus`: joins (or leads) the group updating `pageno`.
    /// `None` if the list's head wants another page (the caller then takes the lock itself);
    /// otherwise the outcome of the update, done by the leader.
    #[allow(clippy::too_many_arguments)]
    fn group_update_xid_status(
        &self,
        b: &mut Backend,
        xid: u32,
        subxids: &[u32],
        status: XidStatus,
        lsn: u64,
        pageno: u64,
    ) -> Result<Option<Result<(), SlruError>>, SlruError> {
        let me = b.procno() as u32;
        let m = &self.members[me as usize];
        m.member.store(true, Relaxed);
        m.xid.store(xid, Relaxed);
        m.status.store(status as u8, Relaxed);
        m.page.store(pageno, Relaxed);
        m.lsn.store(lsn, Relaxed);
        m.nsubxids.store(subxids.len() as u8, Relaxed);
        for (slot, &s) in m.subxids.iter().zip(subxids) {
            slot.store(s, Relaxed);
        }
        let mut next = self.group_first.load(Acquire);
        loop {
            if next != INVALID_PROC && self.members[next as usize].page.load(Relaxed) != pageno {
                m.member.store(false, Relaxed);
                m.next.store(INVALID_PROC, Relaxed);
                return Ok(None);
            }
            m.next.store(next, Relaxed);
            match self.group_first.compare_exchange(next, me, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => next = now,
            }
        }
        if next != INVALID_PROC {
            // A follower: sleep until the leader has applied our update.
            let t = pglocks_sync::time::Instant::now();
            b.sleep_until(|| !m.member.load(Acquire));
            b.stats
                .waits
                .record("XactGroupUpdate", "IPC", t.elapsed().as_nanos() as u64);
            b.stats.events.count("clog.group_followers", 1);
            let error = m.error.lock().map_or(None, |mut e| e.take());
            return Ok(Some(error.map_or(Ok(()), Err)));
        }
        // The leader: lock the page's bank, detach the list, apply every member's update, then
        // wake them all, whatever went wrong on the way (an error is handed to its member).
        let first_lock = self.slru.lock_bank(b, pageno, LwLockMode::Exclusive);
        let head = self.group_first.swap(INVALID_PROC, AcqRel);
        let mut held = first_lock.as_ref().ok().map(|()| pageno);
        let mut outcome = first_lock;
        let mut at = head;
        while at != INVALID_PROC {
            let f = &self.members[at as usize];
            let page = f.page.load(Relaxed);
            let done = self.leader_apply(b, f, page, &mut held);
            if at == me {
                if outcome.is_ok() {
                    outcome = done;
                }
            } else if let Err(e) = done {
                if let Ok(mut slot) = f.error.lock() {
                    *slot = Some(e);
                }
            }
            at = f.next.load(Relaxed);
        }
        if let Some(page) = held {
            if let Err(e) = self.slru.unlock_bank(b, page) {
                outcome = outcome.and(Err(e));
            }
        }
        b.stats.events.count("clog.group_leads", 1);
        // Wake the members after releasing the lock.
        b.wake_group(head, |at| {
            (&self.members[at].next, &self.members[at].member)
        });
        Ok(Some(outcome))
    }
}

impl<K: RawLwLock> Clog<K> {
    /// One member's update by the group leader, switching to the bank lock of the member's page
    /// when it differs from the one `held` (`None`: no lock held, after an error).
    fn leader_apply(
        &self,
        b: &mut Backend,
        f: &GroupMember,
        page: u64,
        held: &mut Option<u64>,
    ) -> Result<(), SlruError> {
        match *held {
            Some(h) if self.slru.bank_of(h) == self.slru.bank_of(page) => {}
            Some(h) => {
                *held = None;
                self.slru.unlock_bank(b, h)?;
                self.slru.lock_bank(b, page, LwLockMode::Exclusive)?;
            }
            None => self.slru.lock_bank(b, page, LwLockMode::Exclusive)?,
        }
        *held = Some(page);
        let n = f.nsubxids.load(Relaxed) as usize;
        let subs: Vec<u32> = f.subxids[..n].iter().map(|s| s.load(Relaxed)).collect();
        let done = self.set_page_status_internal(
            b,
            Some(f.xid.load(Relaxed)),
            &subs,
            XidStatus::from_bits(f.status.load(Relaxed)),
            f.lsn.load(Relaxed),
            page,
        );
        if done.is_err() {
            // set_page_status_internal released the lock.
            *held = None;
        }
        done
    }
}

/// Byte and bit shift of `xid`'s status in its page.
#[inline]
fn position(xid: u32) -> (usize, u32) {
    let in_page = xid % CLOG_XACTS_PER_PAGE;
    ((in_page / 4) as usize, (in_page % 4) * 2)
}

/// `GetLSNIndex` within a slot: the LSN group of `xid` in its page.
#[inline]
fn lsn_group(xid: u32) -> usize {
    ((xid % CLOG_XACTS_PER_PAGE) / CLOG_XACTS_PER_LSN_GROUP) as usize
}
