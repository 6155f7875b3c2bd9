//! A stand-in for `pg_xact` and `pg_subtrans`: the commit status and subtransaction parent of
//! the newest xids, in a ring indexed by `xid % window`.
//!
//! PostgreSQL keeps both in SLRUs (clog.c, subtrans.c; the slru crate models the commit log).
//! Here a slot is claimed for an xid when it is assigned (as `ExtendCLOG` zeroes a page under
//! XidGenLock), its parent set then (`SubTransSetParent`), and its status set to committed by
//! the owner before the xid leaves the ProcArray (`TransactionIdCommitTree` precedes
//! `ProcArrayEndTransaction`). A slot names the xid it holds, so a lookup of an xid that has
//! fallen out of the window is an error rather than another xid's status.

use crate::{ProcArrayError, FIRST_NORMAL_TRANSACTION_ID, INVALID_TRANSACTION_ID};
use pglocks_sync::atomic::{AtomicBool, AtomicU32, Ordering::*};

struct Slot {
    /// The xid this slot holds (the ring's tag).
    xid: AtomicU32,
    /// `SubTransGetParent`: the parent of a subtransaction, else invalid.
    parent: AtomicU32,
    /// Committed (`TRANSACTION_STATUS_COMMITTED`); in progress or aborted otherwise.
    committed: AtomicBool,
}

pub(crate) struct StatusRing {
    slots: Box<[Slot]>,
}

impl StatusRing {
    pub(crate) fn new(window: u32) -> Self {
        Self {
            slots: (0..window)
                .map(|_| Slot {
                    xid: AtomicU32::new(INVALID_TRANSACTION_ID),
                    parent: AtomicU32::new(INVALID_TRANSACTION_ID),
                    committed: AtomicBool::new(false),
                })
                .collect(),
        }
    }

    #[inline]
    fn slot(&self, xid: u32) -> &Slot {
        &self.slots[xid as usize % self.slots.len()]
    }

    /// Claims `xid`'s slot, in progress, with its `parent` (XidGenLock held).
    pub(crate) fn extend(&self, xid: u32, parent: u32) {
        let s = self.slot(xid);
        s.committed.store(false, Relaxed);
        s.parent.store(parent, Relaxed);
        // Release: whoever reads the tag sees the reset status and parent.
        s.xid.store(xid, Release);
    }

    /// The slot of `xid` if it still holds it.
    fn holding(&self, xid: u32) -> Result<&Slot, ProcArrayError> {
        let s = self.slot(xid);
        if s.xid.load(Acquire) == xid {
            Ok(s)
        } else {
            Err(ProcArrayError::StatusUnavailable { xid })
        }
    }

    /// `TransactionIdCommitTree` for one xid of the tree.
    pub(crate) fn set_committed(&self, xid: u32) -> Result<(), ProcArrayError> {
        // Release: a reader that sees the commit sees everything the transaction did.
        self.holding(xid)?.committed.store(true, Release);
        Ok(())
    }

    /// `TransactionIdDidCommit`; the special xids below the normal ones (bootstrap, frozen)
    /// count as committed, invalid does not.
    pub(crate) fn did_commit(&self, xid: u32) -> Result<bool, ProcArrayError> {
        if xid < FIRST_NORMAL_TRANSACTION_ID {
            return Ok(xid != INVALID_TRANSACTION_ID);
        }
        let s = self.holding(xid)?;
        let committed = s.committed.load(Acquire);
        // The slot may have been claimed by a newer xid meanwhile.
        if s.xid.load(Acquire) != xid {
            return Err(ProcArrayError::StatusUnavailable { xid });
        }
        Ok(committed)
    }

    /// `SubTransGetParent`.
    pub(crate) fn parent(&self, xid: u32) -> Result<u32, ProcArrayError> {
        let s = self.holding(xid)?;
        let parent = s.parent.load(Relaxed);
        if s.xid.load(Acquire) != xid {
            return Err(ProcArrayError::StatusUnavailable { xid });
        }
        Ok(parent)
    }
}
