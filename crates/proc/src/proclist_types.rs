//! Models storage/proclist_types.h: the two types of a list of backends, apart from the list's
//! operations, so that `PGPROC` can hold a link without knowing the list code.
//!
//! A list is threaded through the backends it holds: each member's `PGPROC` has a node with the
//! proc numbers of its neighbours, and the list itself is only a head with the proc numbers of its
//! two ends. PostgreSQL keeps these two structs in a header of their own because proc.h needs the
//! node for `lwWaitLink` while proclist.h, which implements the operations, needs `PGPROC` to find
//! a backend's node; this module plays that header's part. [`ProcSlot`](crate::backend::ProcSlot)
//! embeds a [`ProcListNode`], and [`proclist`](crate::proclist) implements the list on top of
//! both, so the dependency runs one way: `proclist` → `backend` → `proclist_types`.
//!
//! The fields are the crate's only: nothing outside `proclist` reads or writes them.

use pglocks_sync::atomic::AtomicU32;

/// `INVALID_PROC_NUMBER` (storage/procnumber.h): no backend, what a head holds at both ends when
/// its list is empty, and a node at the end of its list.
pub const INVALID_PROCNO: u32 = u32::MAX;

/// Models `proclist_node`: one backend's links on one kind of list, the proc numbers of the
/// members after and before it. All zeroes while the backend is on no list of this kind.
///
/// The links are relaxed atomics only so that a node can sit in the shared `PGPROC`; every access
/// is made under the lock that protects the list.
#[derive(Debug, Default)]
pub struct ProcListNode {
    pub(crate) next: AtomicU32,
    pub(crate) prev: AtomicU32,
}

/// Models `proclist_head`: the proc numbers of the first and last members of a list of backends
/// ([`INVALID_PROCNO`] at both when it is empty). The operations are in
/// [`proclist`](crate::proclist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcList {
    pub(crate) head: u32,
    pub(crate) tail: u32,
}
