//! ShflLock's NUMA-aware spinning lock (Kashyap, Calciu, Cheng, Min and Kim, "Scalable and
//! practical locking with shuffling", SOSP 2019), as its user-space code has it
//! (sslab-gatech/shfllock, ulocks/src/aqs.c).
//!
//! # The algorithm
//! A word of two bytes, *locked* and *no stealing*, and a queue of waiters' nodes behind a tail.
//! A backend first tries to take the word from 0 to locked in one compare-exchange, which
//! succeeds only while stealing is allowed: the lock is free and no one is queued, or the queue's
//! head has not yet forbidden it. Otherwise it queues MCS-style; the first in an empty queue
//! forbids stealing. The head spins on the word and takes the locked byte when it clears, then
//! hands the head on to its successor (or empties the queue, and allows stealing again). A
//! release only clears the locked byte.
//!
//! What makes it NUMA-aware is the *shuffler*: one waiter at a time (first the head, then whom it
//! names) walks the queue behind it while it waits anyway, and moves the waiters of its own node
//! up behind itself, so that they get the lock one after another; it marks those it grouped,
//! hands the shuffler's role to the last of them with the place its walk reached, and stops
//! early once it is handed the lock (or, as the head, once the lock is free). Once in 1024
//! walks it does not shuffle but hands the role to its successor: the long-run fairness
//! (`keep_lock_local`).
//!
//! | constant | value | source |
//! |---|---|---|
//! | a shuffler skips one walk in ([`SHUFFLE_SKIP_ONE_IN`]) | 1024 | ulocks/src/aqs.c: `UNLOCK_COUNT_THRESHOLD` (1024) masks the random draw |
//!
//! # Differences from aqs.c
//! - Rust's atomics (and loom) cannot mix byte and word accesses to one place, so the word's
//!   byte stores (the release, allowing stealing) are atomic ANDs and its byte and half-word
//!   compare-exchanges are compare-exchanges of the whole word: a locked instruction where
//!   aqs.c has a plain store.
//! - The random draw is a xorshift seeded from the backend's random-number state.
//! - Nodes are the backends' slots ([`pglocks_proc::qnode`]): `wait` is `lstatus`, `flag`
//!   `sleader`, `count` `wcount`, `link` `last_visited`; past the slots the lock spins on
//!   `try_lock`.

use super::{addr, claim, mcs_release, spin_on_try_lock};
use crate::{RawSpinLock, StuckSpinlock};
use pglocks_proc::qnode::QueueNode;
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use pglocks_sync::hint;
use rand::RngExt;
use std::ptr;

/// A shuffler skips one walk in this many, handing its role on instead.
pub const SHUFFLE_SKIP_ONE_IN: u32 = 1024;

const LOCKED: u32 = 1;
const LOCKED_MASK: u32 = 0xff;
const NO_STEALING: u32 = 1 << 8;

/// ShflLock's spinning lock (aqs.c's `aqs_mutex`).
#[derive(Debug, Default)]
pub struct ShflLock {
    word: AtomicU32,
    tail: AtomicPtr<QueueNode>,
}

/// A xorshift step (aqs.c's `xor_random`).
#[inline]
fn xorshift(seed: &mut u32) -> u32 {
    let mut x = *seed;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *seed = x;
    x
}

impl ShflLock {
    /// `shuffle_waiters`: groups the waiters of `node`'s NUMA node behind it.
    fn shuffle(&self, node: &QueueNode, is_head: bool, seed: &mut u32) {
        let numa = node.numa_node.load(Ordering::Relaxed);
        let visited = node.link.load(Ordering::Relaxed);
        let mut prev: &QueueNode = if visited.is_null() {
            node
        } else {
            // SAFETY: the place the last shuffler's walk reached: a waiter behind `node`, which
            // no one has moved since (only the shuffler moves waiters).
            unsafe { &*visited }
        };
        let mut last: &QueueNode = node;
        if node.count.load(Ordering::Relaxed) == 0 {
            node.count.store(1, Ordering::Relaxed);
        }
        let batch = node.count.load(Ordering::Relaxed);
        node.flag.store(0, Ordering::Relaxed);
        if xorshift(seed) % SHUFFLE_SKIP_ONE_IN == 0 {
            let next = node.next.load(Ordering::Acquire);
            if !next.is_null() {
                // SAFETY: a linked successor waits on its node.
                let next = unsafe { &*next };
                next.link.store(ptr::null_mut(), Ordering::Relaxed);
                next.flag.store(1, Ordering::Release);
            }
            return;
        }
        let mut moved = false;
        loop {
            let curr = prev.next.load(Ordering::Acquire);
            if curr.is_null() || curr == self.tail.load(Ordering::Acquire) {
                break;
            }
            // SAFETY: a linked waiter behind the shuffler, which waits on its node.
            let curr_ref = unsafe { &*curr };
            if curr_ref.numa_node.load(Ordering::Relaxed) == numa {
                if prev.numa_node.load(Ordering::Relaxed) == numa {
                    // Already behind a waiter of ours.
                    curr_ref.count.store(batch, Ordering::Relaxed);
                    last = curr_ref;
                    prev = curr_ref;
                } else {
                    let next = curr_ref.next.load(Ordering::Acquire);
                    if next.is_null() {
                        break;
                    }
                    curr_ref.count.store(batch, Ordering::Relaxed);
                    // Unlink it, and put it behind the last of ours.
                    prev.next.store(next, Ordering::Relaxed);
                    curr_ref
                        .next
                        .store(last.next.load(Ordering::Relaxed), Ordering::Relaxed);
                    last.next.store(curr, Ordering::Release);
                    last = curr_ref;
                    moved = true;
                }
            } else {
                prev = curr_ref;
            }
            if moved {
                let done = if is_head {
                    self.word.load(Ordering::Relaxed) & LOCKED_MASK == 0
                } else {
                    node.wait.load(Ordering::Relaxed) != 0
                };
                if done {
                    break;
                }
            }
            hint::spin_loop();
        }
        last.link.store(addr(prev), Ordering::Relaxed);
        last.flag.store(1, Ordering::Release);
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, backend: &mut Backend) {
        let mut seed = backend.rng.random::<u32>() | 1;
        let Some(me) = claim(backend) else {
            return spin_on_try_lock(self);
        };
        let prev = self.tail.swap(addr(me), Ordering::AcqRel);
        if prev.is_null() {
            self.word.fetch_or(NO_STEALING, Ordering::Relaxed);
        } else {
            // SAFETY: the old tail waits or holds, and keeps its node until it hands over.
            unsafe { (*prev).next.store(addr(me), Ordering::Release) };
            while me.wait.load(Ordering::Acquire) == 0 {
                if me.flag.load(Ordering::Acquire) == 1 {
                    self.shuffle(me, false, &mut seed);
                }
                hint::spin_wait();
            }
        }
        // The head: wait for the locked byte to clear, shuffling meanwhile.
        loop {
            if self.word.load(Ordering::Acquire) & LOCKED_MASK == 0 {
                let w = self.word.load(Ordering::Relaxed);
                if w & LOCKED_MASK == 0
                    && self
                        .word
                        .compare_exchange(w, w | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    break;
                }
            } else if me.count.load(Ordering::Relaxed) == 0 || me.flag.load(Ordering::Acquire) == 1
            {
                self.shuffle(me, true, &mut seed);
            }
            hint::spin_wait();
        }
        // Hand the head on; an emptied queue allows stealing again.
        if mcs_release(&self.tail, me, 1) {
            self.word.fetch_and(!NO_STEALING, Ordering::Relaxed);
        }
        me.give_back();
    }
}

// SAFETY: the lock is held from a compare-exchange that set the locked byte while it was clear
// (Acquire) to the release's clearing of it (Release).
unsafe impl RawSpinLock for ShflLock {
    const NAME: &'static str = "shfl";

    fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn lock(&self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        if self
            .word
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow(backend);
        }
        Ok(())
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.word
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.word.fetch_and(!LOCKED_MASK, Ordering::Release);
    }
}
