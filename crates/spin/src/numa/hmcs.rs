//! The hierarchical MCS lock, HMCS (Chabbi, Fagan and Mellor-Crummey, "High performance locks
//! for multi-level NUMA systems", PPoPP 2015), with two levels: a lock per NUMA node under a
//! root.
//!
//! # The algorithm
//! Each level is an MCS lock. A backend queues on its node's lock with its own queue node and
//! waits for a status: a pass count (it got the lock from a waiter of its node, the root
//! with it), or "acquire the parent" (it heads its node's queue and must take the root). The
//! node's lock takes the root with a queue node of its own, embedded in it. On release, a
//! holder whose count is below the threshold and who has a successor of its node passes it the
//! count plus one: the root stays with the node. Otherwise it releases the root first (the
//! node's embedded queue node must leave the root's queue before anyone reuses it), then its
//! node's lock, telling a successor to acquire the parent.
//!
//! | constant | value | source |
//! |---|---|---|
//! | passes within a node ([`PASS_THRESHOLD`]) | 100 | litl's `RELEASE_THRESHOLD`, "same as cohort for comparison" (multicore-locks/litl, include/hmcs.h) |
//! | status values | waiting `u64::MAX`, acquire parent `u64::MAX − 1`, counts from 1 | litl's src/hmcs.c |
//!
//! # Differences from the paper
//! - Two levels (node and machine), as litl's HMCS; the paper's deeper hierarchies (cores
//!   sharing a cache, sockets, boards) are not built. The per-node locks are made, one per node
//!   of the machine the first locker runs on, when the lock is first taken.
//! - `try_lock` takes the root alone, with a node of the lock's own: every holder holds the
//!   root (itself or through its node's queue), so it excludes as the lock does. Only one
//!   `try_lock` uses that node at a time; another fails.

use super::{addr, claim, mcs_acquire, mcs_release, spin_on_try_lock, PerNode};
use crate::{RawSpinLock, StuckSpinlock};
use pglocks_proc::qnode::QueueNode;
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicBool, AtomicPtr, Ordering, TestAndSet};
use pglocks_sync::data::{DataU32, DataU64};
use pglocks_sync::CachePadded;
use std::ptr;

/// Passes within a node before the root goes back (litl's `RELEASE_THRESHOLD`).
pub const PASS_THRESHOLD: usize = 100;

/// A queue node's status while it waits.
const WAITING: usize = usize::MAX;
/// The status that tells a node's new head to take the root.
const ACQUIRE_PARENT: usize = usize::MAX - 1;
/// The count of the first holder of a node's batch.
const COHORT_START: usize = 1;
/// `home` of a holder that took the root alone (`try_lock`).
const HOME_NONE: u32 = u32::MAX;

/// One node's MCS lock, with its queue node at the root.
#[derive(Debug, Default)]
struct Leaf {
    tail: AtomicPtr<QueueNode>,
    /// The holder's node, for the release.
    holder: DataU64,
    at_root: CachePadded<QueueNode>,
}

/// The root MCS lock, the node holding it, and `try_lock`'s queue node.
#[derive(Debug, Default)]
struct Root {
    tail: AtomicPtr<QueueNode>,
    home: DataU32,
    trying: AtomicBool,
    try_node: CachePadded<QueueNode>,
}

/// Two-level HMCS passing within a node up to `THRESHOLD` times; [`HmcsLock`] has litl's.
#[derive(Debug)]
pub struct Hmcs<const THRESHOLD: usize> {
    root: CachePadded<Root>,
    leaves: PerNode<Leaf>,
}

/// Two-level HMCS with litl's threshold.
pub type HmcsLock = Hmcs<PASS_THRESHOLD>;

impl<const THRESHOLD: usize> Hmcs<THRESHOLD> {
    fn acquire(&self, backend: &Backend) {
        let (home, leaf) = self.leaves.mine(backend);
        let Some(me) = claim(backend) else {
            return spin_on_try_lock(self);
        };
        me.wait.store(WAITING, Ordering::Relaxed);
        match mcs_acquire(&leaf.tail, me, WAITING) {
            Some(count) if count < ACQUIRE_PARENT => {}
            _ => {
                me.wait.store(COHORT_START, Ordering::Relaxed);
                let at_root = &*leaf.at_root;
                at_root.next.store(ptr::null_mut(), Ordering::Relaxed);
                at_root.wait.store(0, Ordering::Relaxed);
                mcs_acquire(&self.root.tail, at_root, 0);
                self.root.home.store(home as u32, Ordering::Relaxed);
            }
        }
        leaf.holder.store(addr(me) as u64, Ordering::Relaxed);
    }
}

// SAFETY: every holder holds the root MCS lock, by its own node's queue node at the root or
// passed within its node with the MCS hand-over (Release/Acquire on the status); the root goes
// back only with the batch's last release.
unsafe impl<const THRESHOLD: usize> RawSpinLock for Hmcs<THRESHOLD> {
    const NAME: &'static str = "hmcs";

    fn new() -> Self {
        Self {
            root: CachePadded::new(Root::default()),
            leaves: PerNode::default(),
        }
    }

    #[inline]
    fn lock(&self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        self.acquire(backend);
        Ok(())
    }

    fn try_lock(&self) -> bool {
        let root = &*self.root;
        if !root.tail.load(Ordering::Acquire).is_null()
            || root.trying.test_and_set(Ordering::Acquire)
        {
            return false;
        }
        // The node is ours until the release hands it back; its last user is done with it.
        let node = &*root.try_node;
        node.next.store(ptr::null_mut(), Ordering::Relaxed);
        if root
            .tail
            .compare_exchange(
                ptr::null_mut(),
                addr(node),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            root.trying.store(false, Ordering::Release);
            return false;
        }
        root.home.store(HOME_NONE, Ordering::Relaxed);
        true
    }

    unsafe fn unlock(&self) {
        let root = &*self.root;
        let home = root.home.load(Ordering::Relaxed);
        if home == HOME_NONE {
            mcs_release(&root.tail, &root.try_node, 1);
            root.trying.store(false, Ordering::Release);
            return;
        }
        let leaf = self.leaves.get(home as usize);
        // SAFETY: the holder's node, recorded when it took the lock and kept until now.
        let me = unsafe { &*(leaf.holder.load(Ordering::Relaxed) as *const QueueNode) };
        let count = me.wait.load(Ordering::Relaxed);
        if count < THRESHOLD {
            let next = me.next.load(Ordering::Acquire);
            if !next.is_null() {
                // SAFETY: the successor waits on its node until this store.
                unsafe { (*next).wait.store(count + 1, Ordering::Release) };
                me.give_back();
                return;
            }
        }
        mcs_release(&root.tail, &leaf.at_root, 1);
        mcs_release(&leaf.tail, me, ACQUIRE_PARENT);
        me.give_back();
    }
}
