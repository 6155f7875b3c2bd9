//! A stand-in for `pg_xact` and `pg_subtrans`: one commit bit per xid and, where
//! subtransactions were assigned, the parent of each xid, in pages of
//! [`XACTS_PER_PAGE`] xids that are created as xids reach them and never evicted.
//!
//! PostgreSQL keeps both in SLRUs (clog.c, subtrans.c; the slru crate models the commit log
//! with its buffers and I/O). Here, as there, a page is created under XidGenLock when the first
//! xid of the page is assigned (`ExtendCLOG` / `ExtendSUBTRANS`); a subtransaction's parent is
//! set when it is assigned (`SubTransSetParent`), and an xid is marked committed by its owner
//! before it leaves the ProcArray (`TransactionIdCommitTree` precedes
//! `ProcArrayEndTransaction`). Pages are never truncated, so memory grows with the xids used
//! (an eighth of a byte per xid; 4 bytes per xid of a page that holds a subtransaction).
//!
//! The bits and parents are std atomics: a commit bit is set before the owner's
//! `ProcArrayEndTransaction` and read after a snapshot taken under the same ProcArrayLock, so the
//! LWLock orders them (a bit set concurrently with a read is `fetch_or`'d and read once).
//!
//! Unlike the ProcArray's other data they are not charged to a simulated CPU (they are std's
//! atomics, not `pglocks_sync::data` words). Where a model has PostgreSQL's commit log (the
//! pgbench workloads), the slru crate's `Clog` is it and charges its pages' lines; these bits
//! are then a shadow kept in step with it, and charging them too would count every commit's
//! status write twice. A model with no other commit log (the ProcArray workload) therefore
//! reads and writes its commit statuses for free.

use crate::{ProcArrayError, FIRST_NORMAL_TRANSACTION_ID, INVALID_TRANSACTION_ID, XID_STOP_LIMIT};
// Not charged (see above): std's atomics, even under loom.
use std::sync::atomic::{AtomicU32 as StatusWord, Ordering::*};
use std::sync::OnceLock;

/// clog.c's `CLOG_XACTS_PER_PAGE`: xids per page.
pub const XACTS_PER_PAGE: u32 = 32768;

struct Page {
    /// One commit bit per xid.
    committed: Box<[StatusWord]>,
    /// `pg_subtrans`: each xid's parent, once a subtransaction lands in the page.
    parents: OnceLock<Box<[StatusWord]>>,
}

pub(crate) struct TransactionStatus {
    pages: Box<[OnceLock<Page>]>,
}

impl TransactionStatus {
    pub(crate) fn new() -> Self {
        Self {
            pages: (0..XID_STOP_LIMIT / XACTS_PER_PAGE)
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    /// The page of `xid` and the xid's index in it.
    #[inline]
    fn page(&self, xid: u32) -> Result<(&Page, usize), ProcArrayError> {
        self.pages
            .get((xid / XACTS_PER_PAGE) as usize)
            .and_then(OnceLock::get)
            .map(|p| (p, (xid % XACTS_PER_PAGE) as usize))
            .ok_or(ProcArrayError::StatusUnavailable { xid })
    }

    /// `ExtendCLOG` + `ExtendSUBTRANS` + `SubTransSetParent` for a newly assigned `xid`
    /// (XidGenLock held, so pages are created by one backend at a time).
    pub(crate) fn extend(&self, xid: u32, parent: u32) {
        let page = self.pages[(xid / XACTS_PER_PAGE) as usize].get_or_init(|| Page {
            committed: (0..XACTS_PER_PAGE / 32)
                .map(|_| StatusWord::new(0))
                .collect(),
            parents: OnceLock::new(),
        });
        if parent != INVALID_TRANSACTION_ID {
            let parents = page
                .parents
                .get_or_init(|| (0..XACTS_PER_PAGE).map(|_| StatusWord::new(0)).collect());
            parents[(xid % XACTS_PER_PAGE) as usize].store(parent, Relaxed);
        }
    }

    /// `TransactionIdCommitTree` for one xid of the tree.
    pub(crate) fn set_committed(&self, xid: u32) -> Result<(), ProcArrayError> {
        let (page, i) = self.page(xid)?;
        page.committed[i / 32].fetch_or(1 << (i % 32), Release);
        Ok(())
    }

    /// `TransactionIdDidCommit`; the special xids below the normal ones (bootstrap, frozen)
    /// count as committed, invalid does not. An xid never assigned has no page, or is in
    /// progress in its page.
    pub(crate) fn did_commit(&self, xid: u32) -> Result<bool, ProcArrayError> {
        if xid < FIRST_NORMAL_TRANSACTION_ID {
            return Ok(xid != INVALID_TRANSACTION_ID);
        }
        let (page, i) = self.page(xid)?;
        Ok(page.committed[i / 32].load(Acquire) & (1 << (i % 32)) != 0)
    }

    /// `SubTransGetParent`: invalid for a top-level xid.
    pub(crate) fn parent(&self, xid: u32) -> Result<u32, ProcArrayError> {
        let (page, i) = self.page(xid)?;
        Ok(page
            .parents
            .get()
            .map_or(INVALID_TRANSACTION_ID, |p| p[i].load(Relaxed)))
    }
}
