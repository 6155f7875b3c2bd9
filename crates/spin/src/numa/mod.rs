//! NUMA-aware mutexes of the last decade, and Linux's stock queued spinlock they are measured
//! against, as [`RawSpinLock`](crate::RawSpinLock)s: each can stand in for `s_lock` wherever a
//! workload takes a spinlock.
//!
//! # The idea they share
//! On a machine of several NUMA nodes, handing a lock to a waiter on another node moves the lock
//! word, and the data the critical section touches, across the interconnect: a transfer two or
//! three times a local one. A NUMA-aware lock hands the lock to a waiter on the holder's own
//! node while there is one, for a bounded number of hand-overs or a bounded time, so that the
//! lock and its data stay in one node's caches for a batch of critical sections. They differ
//! in where they keep the order:
//! - [`CohortLock`] (Dice, Marathe and Shavit, PPoPP 2012; C-BO-MCS): an MCS lock per node and
//!   a global test-and-set lock with back-off; a holder with a successor of its node passes it
//!   the local lock *and* the global one (the cohort), up to a pass bound.
//! - [`HmcsLock`] (Chabbi, Fagan and Mellor-Crummey, PPoPP 2015): a tree of MCS locks, one per
//!   node under a root; a node's queue passes the root among its own waiters up to a threshold.
//! - [`CnaLock`] (Dice and Kogan, EuroSys 2019, as Linux's v14 series has it): one MCS queue,
//!   compact as qspinlock; the queue's head moves waiters of other nodes to a secondary queue.
//! - [`ShflLock`] (Kashyap et al., SOSP 2019): a test-and-set word with an MCS queue of
//!   waiters, one of which (the shuffler) regroups the waiters behind it by node while it waits.
//! - [`QSpinLock`]: Linux's queued spinlock as it ships, the baseline CNA and ShflLock changed.
//!
//! One lock here parks: [`ShflMutex`], ShflLock's blocking mutex, the wait lock of the
//! reader-writer lock `pglocks-lwlock` builds from it.
//!
//! The queue nodes are the backends' ([`pglocks_proc::qnode`]): a slot per lock waited for or
//! held, found through the [`Backend`] a lock call carries; a release takes no node, because the
//! locks whose holder keeps its node record it in the lock. A backend's NUMA node is its
//! [`Backend::numa_node`], from the machine's topology or the simulated profile.
//!
//! Every other lock here spins and never sleeps: a waiter that is descheduled holds up the queue
//! behind it, as it does in the papers and the kernel.

mod cohort;
mod hmcs;
mod qspin;
mod shfl;

pub use cohort::{Cohort, CohortLock, GLOBAL_BACKOFF, LOCAL_PASSES};
pub use hmcs::{Hmcs, HmcsLock, PASS_THRESHOLD};
pub use qspin::{Cna, CnaLock, QSpinLock, QueuePolicy, QueuedSpinLock, Stock, PENDING_LOOPS};
pub use shfl::{ShflLock, ShflMutex, ShflMutexWith, SHUFFLE_SKIP_ONE_IN, SPINS_BEFORE_PARK};

use pglocks_proc::qnode::QueueNode;
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicPtr, Ordering};
use pglocks_sync::{hint, CachePadded};
use std::ptr;

/// One `T` per NUMA node of the machine, each on lines of its own, made when a backend first
/// asks (a lock is made before the machine it runs on is known: a simulated one exists only
/// while it runs). The first to ask installs them with a compare-exchange of the shim's, so that
/// loom sees the installation ordered before every use; a loser of the race drops its copy.
/// The cohort lock keeps its local locks here, and the reader-writer locks of `pglocks-lwlock`
/// their per-node reader counts.
#[derive(Debug)]
pub struct PerNode<T>(AtomicPtr<Box<[CachePadded<T>]>>);

impl<T> Default for PerNode<T> {
    fn default() -> Self {
        PerNode(AtomicPtr::new(ptr::null_mut()))
    }
}

impl<T: Default> PerNode<T> {
    /// The calling backend's node's `T`, and its index.
    #[inline]
    pub fn mine(&self, backend: &Backend) -> (usize, &T) {
        let mut all = self.0.load(Ordering::Acquire);
        if all.is_null() {
            all = self.install(backend.numa_nodes());
        }
        // SAFETY: installed once and freed only when the lock is dropped.
        let all = unsafe { &*all };
        let i = backend.numa_node() % all.len();
        (i, &all[i])
    }

    #[cold]
    fn install(&self, nodes: usize) -> *mut Box<[CachePadded<T>]> {
        let made: Box<[CachePadded<T>]> = (0..nodes.max(1))
            .map(|_| CachePadded::new(T::default()))
            .collect();
        let made = Box::into_raw(Box::new(made));
        match self
            .0
            .compare_exchange(ptr::null_mut(), made, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => made,
            Err(theirs) => {
                // SAFETY: ours, never shared.
                drop(unsafe { Box::from_raw(made) });
                theirs
            }
        }
    }

    /// Every node's `T`, once made (by [`PerNode::mine`]).
    #[inline]
    pub fn all(&self) -> &[CachePadded<T>] {
        let all = self.0.load(Ordering::Acquire);
        assert!(
            !all.is_null(),
            "the per-node state is made by the first acquisition"
        );
        // SAFETY: installed once and freed only when the lock is dropped.
        unsafe { &*all }
    }

    /// Node `i`'s `T`, once made.
    #[inline]
    pub fn get(&self, i: usize) -> &T {
        &self.all()[i]
    }
}

impl<T> Drop for PerNode<T> {
    fn drop(&mut self) {
        let all = self.0.load(Ordering::Relaxed);
        if !all.is_null() {
            // SAFETY: installed by `install` from a Box, and no one else holds the lock now.
            drop(unsafe { Box::from_raw(all) });
        }
    }
}

/// A queue node of the calling backend's slots, or `None` with every slot in use: the caller
/// then spins on its `try_lock` ([`spin_on_try_lock`]), as qspinlock does past `MAX_NODES`.
#[inline]
fn claim(backend: &Backend) -> Option<&QueueNode> {
    backend
        .procs()
        .queue_nodes()
        .claim(backend.procno(), backend.numa_node())
        .map(|(_, node)| node)
}

/// Takes `lock` by `try_lock` alone: a backend with no queue node left.
#[cold]
fn spin_on_try_lock<R: crate::RawSpinLock>(lock: &R) {
    while !lock.try_lock() {
        hint::spin_loop();
    }
}

/// A queue node's address, for the links.
#[inline]
fn addr(node: &QueueNode) -> *mut QueueNode {
    node as *const QueueNode as *mut QueueNode
}

/// The MCS acquisition on `tail`: swaps `me` in and, behind a predecessor, links to it and waits
/// until its `wait` word leaves `waiting`. Returns `None` without a predecessor, or the value
/// the predecessor handed over. `me.wait` must hold `waiting` and `me.next` be null.
#[inline]
fn mcs_acquire(tail: &AtomicPtr<QueueNode>, me: &QueueNode, waiting: usize) -> Option<usize> {
    let prev = tail.swap(addr(me), Ordering::AcqRel);
    if prev.is_null() {
        return None;
    }
    // SAFETY: `prev` was the tail: its owner holds or waits for the lock, and keeps its node
    // until it has handed over to the successor that linked here.
    unsafe { (*prev).next.store(addr(me), Ordering::Release) };
    loop {
        let v = me.wait.load(Ordering::Acquire);
        if v != waiting {
            return Some(v);
        }
        hint::spin_wait();
    }
}

/// The MCS release on `tail` by `me`: empties the queue if no one follows (and returns true),
/// or hands the successor `value` (once it has linked itself, if it has only swapped the tail
/// yet).
#[inline]
fn mcs_release(tail: &AtomicPtr<QueueNode>, me: &QueueNode, value: usize) -> bool {
    match mcs_successor(tail, me) {
        None => true,
        Some(next) => {
            // The successor waits on its node until this store, its last touch by us.
            next.wait.store(value, Ordering::Release);
            false
        }
    }
}

/// The first half of an MCS release on `tail` by `me`: `None` if it emptied the queue (no one
/// follows), else the successor, once it has linked itself (if it has only swapped the tail
/// yet). The successor waits on its node until the caller hands over.
#[inline]
fn mcs_successor<'a>(tail: &AtomicPtr<QueueNode>, me: &'a QueueNode) -> Option<&'a QueueNode> {
    let mut next = me.next.load(Ordering::Acquire);
    if next.is_null() {
        if tail
            .compare_exchange(
                addr(me),
                ptr::null_mut(),
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            return None;
        }
        loop {
            next = me.next.load(Ordering::Acquire);
            if !next.is_null() {
                break;
            }
            hint::spin_wait();
        }
    }
    // SAFETY: the successor linked itself to `me` and waits on its node, which it keeps until
    // it is handed over (after the caller's last touch).
    Some(unsafe { &*next })
}
