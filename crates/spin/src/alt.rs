//! Spinlocks that are not PostgreSQL's, behind the same [`RawSpinLock`] trait, so that every ratio
//! in a report ("pg costs 1.05× the floor", "ticket collapses when oversubscribed") comes from one
//! run of one harness.

use crate::{RawSpinLock, StuckSpinlock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering, TestAndSet};
use pglocks_sync::hint;
use std::ptr;

/// Test-and-set in a loop with `pause` between tries: no read-before-exchange, no sleeping, no
/// adaptation. What `s_lock` would be without its refinements.
#[derive(Debug, Default)]
pub struct NaiveTasLock {
    locked: AtomicBool,
}

// SAFETY: false -> true only by an exchange that saw false; release store pairs with acquire.
unsafe impl RawSpinLock for NaiveTasLock {
    const NAME: &'static str = "tas";

    fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn lock(&self, _backend: &mut Backend) -> Result<(), StuckSpinlock> {
        while self.locked.test_and_set(Ordering::Acquire) {
            hint::spin_loop();
        }
        Ok(())
    }

    #[inline]
    fn try_lock(&self) -> bool {
        !self.locked.test_and_set(Ordering::Acquire)
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

/// The cost floor: exchange until it succeeds, store to release. No pause, no back-off, nothing a
/// lock would do beyond the two memory operations that any lock must make. Measured, not used.
#[derive(Debug, Default)]
pub struct FloorLock {
    locked: AtomicBool,
}

// SAFETY: as for NaiveTasLock.
unsafe impl RawSpinLock for FloorLock {
    const NAME: &'static str = "floor";

    fn new() -> Self {
        Self::default()
    }

    #[inline(always)]
    fn lock(&self, _backend: &mut Backend) -> Result<(), StuckSpinlock> {
        while self.locked.test_and_set(Ordering::Acquire) {
            hint::model_yield();
        }
        Ok(())
    }

    #[inline(always)]
    fn try_lock(&self) -> bool {
        !self.locked.test_and_set(Ordering::Acquire)
    }

    #[inline(always)]
    unsafe fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

/// A ticket lock: take a number (`fetch_add` on `next`), wait until `now_serving` shows it.
/// First come, first served, so a preempted waiter blocks everyone behind it: the classic
/// oversubscription collapse that PostgreSQL's unfair TAS avoids.
#[derive(Debug, Default)]
pub struct TicketLock {
    next: AtomicU32,
    now_serving: AtomicU32,
}

// SAFETY: tickets are unique (fetch_add), and only the holder of ticket `now_serving` proceeds;
// the release store of the next number pairs with the waiters' acquire loads.
unsafe impl RawSpinLock for TicketLock {
    const NAME: &'static str = "ticket";

    fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn lock(&self, _backend: &mut Backend) -> Result<(), StuckSpinlock> {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        while self.now_serving.load(Ordering::Acquire) != ticket {
            hint::spin_wait();
        }
        Ok(())
    }

    #[inline]
    fn try_lock(&self) -> bool {
        let serving = self.now_serving.load(Ordering::Relaxed);
        self.next
            .compare_exchange(
                serving,
                serving.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        // Only the holder writes now_serving, so a load and a store suffice.
        let serving = self.now_serving.load(Ordering::Relaxed);
        self.now_serving
            .store(serving.wrapping_add(1), Ordering::Release);
    }
}

/// A waiter's queue node; lives on the waiter's stack only while it waits.
#[derive(Debug)]
struct QNode {
    next: AtomicPtr<QNode>,
    waiting: AtomicBool,
}

impl QNode {
    fn new(waiting: bool) -> Self {
        Self {
            next: AtomicPtr::new(ptr::null_mut()),
            waiting: AtomicBool::new(waiting),
        }
    }
}

/// The MCS queue lock (Mellor-Crummey and Scott, 1991) in the K42 form (Auslander et al.), whose
/// `unlock` needs no node from the caller.
///
/// Waiters form a linked queue through `tail`; each spins on the `waiting` flag of its own node, so
/// a release touches one waiter's cache line rather than all of them. The K42 trick: the lock itself
/// contains a node, `head`, and `tail == &head` means "held, no one waiting". A waiter's own node is
/// needed only until it gets the lock; it then copies its successor link into `head.next` and
/// its node (on its stack) can go.
///
/// The lock must not move while held (it never does behind a shared reference).
#[derive(Debug)]
pub struct McsLock {
    tail: AtomicPtr<QNode>,
    head: QNode,
}

impl McsLock {
    fn head_ptr(&self) -> *mut QNode {
        &self.head as *const QNode as *mut QNode
    }

    #[cold]
    fn lock_contended(&self) {
        let head = self.head_ptr();
        loop {
            let prev = self.tail.load(Ordering::Acquire);
            if prev.is_null() {
                // Looks free: claim it with no waiters behind us.
                if self
                    .tail
                    .compare_exchange(prev, head, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                hint::spin_loop();
                continue;
            }
            let me = QNode::new(true);
            let me_ptr = &me as *const QNode as *mut QNode;
            if self
                .tail
                .compare_exchange(prev, me_ptr, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                hint::spin_loop();
                continue;
            }
            // SAFETY: `prev` was the tail: either the lock's own head, or a waiter's node that
            // stays alive until its owner has seen this link (it waits for it before leaving).
            unsafe { (*prev).next.store(me_ptr, Ordering::Release) };
            while me.waiting.load(Ordering::Acquire) {
                hint::spin_wait();
            }
            // We hold the lock. Move our successor link into the head, so our node can go.
            let mut succ = me.next.load(Ordering::Acquire);
            if succ.is_null() {
                self.head.next.store(ptr::null_mut(), Ordering::Relaxed);
                if self
                    .tail
                    .compare_exchange(me_ptr, head, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                // Someone queued behind us but has not linked yet: wait for the link.
                loop {
                    succ = me.next.load(Ordering::Acquire);
                    if !succ.is_null() {
                        break;
                    }
                    hint::spin_wait();
                }
            }
            self.head.next.store(succ, Ordering::Release);
            return;
        }
    }
}

// SAFETY: the holder is whoever moved `tail` from null to `head`, or the waiter whose `waiting`
// flag the previous holder cleared; exactly one of these happens per release, and the flag's
// release/acquire pair (or the tail CAS) orders the critical sections.
unsafe impl RawSpinLock for McsLock {
    const NAME: &'static str = "mcs";

    fn new() -> Self {
        Self {
            tail: AtomicPtr::new(ptr::null_mut()),
            head: QNode::new(false),
        }
    }

    #[inline]
    fn lock(&self, _backend: &mut Backend) -> Result<(), StuckSpinlock> {
        if !self.try_lock() {
            self.lock_contended();
        }
        Ok(())
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.tail
            .compare_exchange(
                ptr::null_mut(),
                self.head_ptr(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        let mut succ = self.head.next.load(Ordering::Acquire);
        if succ.is_null() {
            if self
                .tail
                .compare_exchange(
                    self.head_ptr(),
                    ptr::null_mut(),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return;
            }
            // A waiter swapped itself in as tail but has not linked to the head yet.
            loop {
                succ = self.head.next.load(Ordering::Acquire);
                if !succ.is_null() {
                    break;
                }
                hint::spin_wait();
            }
        }
        // SAFETY: `succ` is a waiter's node, alive until it sees `waiting` go false; this store is
        // our last touch of it.
        unsafe { (*succ).waiting.store(false, Ordering::Release) };
    }
}
