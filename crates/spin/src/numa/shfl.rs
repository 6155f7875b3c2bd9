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

use super::{addr, claim, mcs_release, mcs_successor, spin_on_try_lock};
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

/// Takes a lock word from free (0: unlocked, stealing allowed) to locked.
#[inline]
fn take_free(word: &AtomicU32) -> bool {
    word.compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
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

/// What a shuffler groups and how it tells a grouped waiter, for the spinning lock and the
/// reader-writer lock's blocking wait lock ([`ShflMutex`]).
trait Grouping {
    /// `curr`, a waiter of the shuffler's node, may be moved up (the wait lock leaves readers).
    fn may_group(curr: &QueueNode) -> bool;
    /// `curr` has just been grouped behind the shuffler.
    fn grouped(curr: &QueueNode, backend: &Backend);
    /// The shuffler, not the head, has been handed the head's place: its walk stops.
    fn handed(node: &QueueNode) -> bool;
}

/// `shuffle_waiters`: groups the waiters of `node`'s NUMA node behind it, in `tail`'s queue
/// whose lock word is `word`.
fn shuffle<G: Grouping>(
    word: &AtomicU32,
    tail: &AtomicPtr<QueueNode>,
    node: &QueueNode,
    is_head: bool,
    backend: &Backend,
    seed: &mut u32,
) {
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
        if curr.is_null() || curr == tail.load(Ordering::Acquire) {
            break;
        }
        // SAFETY: a linked waiter behind the shuffler, which waits on its node.
        let curr_ref = unsafe { &*curr };
        if curr_ref.numa_node.load(Ordering::Relaxed) == numa && G::may_group(curr_ref) {
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
            G::grouped(curr_ref, backend);
        } else {
            prev = curr_ref;
        }
        if moved {
            let done = if is_head {
                word.load(Ordering::Relaxed) & LOCKED_MASK == 0
            } else {
                G::handed(node)
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

/// The spinning lock's grouping: every waiter of the node, none told (all spin).
struct Spinning;

impl Grouping for Spinning {
    #[inline]
    fn may_group(_: &QueueNode) -> bool {
        true
    }
    #[inline]
    fn grouped(_: &QueueNode, _: &Backend) {}
    #[inline]
    fn handed(node: &QueueNode) -> bool {
        node.wait.load(Ordering::Relaxed) != 0
    }
}

impl ShflLock {
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
                    shuffle::<Spinning>(&self.word, &self.tail, me, false, backend, &mut seed);
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
                shuffle::<Spinning>(&self.word, &self.tail, me, true, backend, &mut seed);
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
        if !take_free(&self.word) {
            self.lock_slow(backend);
        }
        Ok(())
    }

    #[inline]
    fn try_lock(&self) -> bool {
        take_free(&self.word)
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.word.fetch_and(!LOCKED_MASK, Ordering::Release);
    }
}

/// Rounds a waiter behind the head spins before it parks, in [`ShflMutex`].
pub const SPINS_BEFORE_PARK: u32 = 2700;

/// [`ShflMutex`]'s waiter states, in its nodes' `wait` (the kernel's `lstatus`).
mod state {
    /// Spinning, and may park (`S_PWAIT`).
    pub const WAITING: usize = 0;
    /// Asleep on the backend's semaphore (`S_PARKED`).
    pub const PARKED: usize = 1;
    /// Grouped by a shuffler (woken if it slept): spins and must not park (`S_UNPWAIT`).
    pub const UNPARKED: usize = 2;
    /// The queue's head now (`S_LOCKED`).
    pub const HEAD: usize = 3;
}

/// ShflLock's *blocking* mutex: the wait lock of its reader-writer lock, as the kernel patch of
/// the ShflLock repository has it (klocks/shfllocks.patch, `rwmutex` in kernel/locking/rwsem.c),
/// with `SPINS` rounds of spinning before a waiter parks.
///
/// The same word and queue as [`ShflLock`], with these differences:
/// - a waiter behind the head spins [`SPINS_BEFORE_PARK`] rounds and then parks on its
///   backend's semaphore, unless a shuffler has grouped it (which wakes it if it sleeps, so that
///   it is awake when its turn comes: the kernel's `force_update_node`); the head hands its
///   place on by swapping the successor's state, and wakes it if it found it parked;
/// - only the head shuffles (once per wait), and it leaves readers in place
///   ([`ShflMutex::lock_as`]): only writers of its node are moved up;
/// - stealing is always allowed (the kernel patch never forbids it).
///
/// | constant | value | source |
/// |---|---|---|
/// | spins before parking ([`SPINS_BEFORE_PARK`]) | 2700 | `SPINNING_THRESHOLD` of ulocks/src/waiting_policy.h, the user-space blocking ShflLock's (about one 9 µs context switch); the kernel parks when the scheduler asks instead (`need_resched`), which a backend has no way to see |
#[derive(Debug, Default)]
pub struct ShflMutexWith<const SPINS: u32> {
    word: AtomicU32,
    tail: AtomicPtr<QueueNode>,
}

/// ShflLock's blocking mutex with the published spin before parking.
pub type ShflMutex = ShflMutexWith<SPINS_BEFORE_PARK>;

/// The wait lock's grouping: writers only, each told it must not park (woken if it sleeps).
struct Parking;

impl Grouping for Parking {
    #[inline]
    fn may_group(curr: &QueueNode) -> bool {
        curr.role.load(Ordering::Relaxed) != ROLE_READER
    }

    fn grouped(curr: &QueueNode, backend: &Backend) {
        let told = curr
            .wait
            .compare_exchange(
                state::WAITING,
                state::UNPARKED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if !told
            && curr
                .wait
                .compare_exchange(
                    state::PARKED,
                    state::UNPARKED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            wake(curr, backend);
        }
    }

    #[inline]
    fn handed(node: &QueueNode) -> bool {
        node.wait.load(Ordering::Relaxed) == state::HEAD
    }
}

/// `role` of a reader's node in [`ShflMutex`].
const ROLE_READER: u32 = 1;

/// Posts the semaphore of the backend whose node `node` is, which parked on it.
#[cold]
fn wake(node: &QueueNode, backend: &Backend) {
    let procs = backend.procs();
    procs.slot(procs.queue_nodes().owner(node)).sem.unlock();
}

/// Sleeps on the backend's semaphore until its node `me` is no longer parked; wake-ups meant for
/// something else are absorbed on the way and posted again after.
#[cold]
fn park(me: &QueueNode, backend: &Backend) {
    let sem = &backend.procs().slot(backend.procno()).sem;
    let mut absorbed = 0;
    loop {
        sem.lock();
        if me.wait.load(Ordering::Acquire) != state::PARKED {
            break;
        }
        absorbed += 1;
    }
    for _ in 0..absorbed {
        sem.unlock();
    }
}

impl<const SPINS: u32> ShflMutexWith<SPINS> {
    /// Takes the lock for a reader (`reader`: the shuffler leaves it in place) or a writer.
    #[inline]
    pub fn lock_as(&self, backend: &mut Backend, reader: bool) {
        if !self.try_lock() {
            self.lock_slow(backend, reader);
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, backend: &mut Backend, reader: bool) {
        let mut seed = backend.rng.random::<u32>() | 1;
        let Some(me) = claim(backend) else {
            return spin_on_try_lock(self);
        };
        me.role
            .store(if reader { ROLE_READER } else { 0 }, Ordering::Relaxed);
        let prev = self.tail.swap(addr(me), Ordering::AcqRel);
        if !prev.is_null() {
            // SAFETY: the old tail waits or holds, and keeps its node until it hands over.
            unsafe { (*prev).next.store(addr(me), Ordering::Release) };
            let mut rounds = 0u32;
            loop {
                let now = me.wait.load(Ordering::Acquire);
                if now == state::HEAD {
                    break;
                }
                rounds = rounds.saturating_add(1);
                if now == state::WAITING
                    && rounds >= SPINS
                    && me
                        .wait
                        .compare_exchange(
                            state::WAITING,
                            state::PARKED,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                {
                    park(me, backend);
                }
                hint::spin_loop();
            }
        }
        // The head: wait for the word to clear, shuffling once meanwhile.
        let mut shuffled = false;
        while !self.try_lock() {
            if !shuffled
                && (me.count.load(Ordering::Relaxed) == 0 || me.flag.load(Ordering::Acquire) == 1)
            {
                shuffle::<Parking>(&self.word, &self.tail, me, true, backend, &mut seed);
                shuffled = true;
            }
            hint::spin_wait();
        }
        if let Some(next) = mcs_successor(&self.tail, me) {
            if next.wait.swap(state::HEAD, Ordering::AcqRel) == state::PARKED {
                wake(next, backend);
            }
        }
        me.give_back();
    }
}

// SAFETY: as ShflLock's: held from a compare-exchange of the word from 0 to locked (Acquire) to
// the release's store of 0 (Release).
unsafe impl<const SPINS: u32> RawSpinLock for ShflMutexWith<SPINS> {
    const NAME: &'static str = "shfl-mutex";

    fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn lock(&self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        self.lock_as(backend, false);
        Ok(())
    }

    #[inline]
    fn try_lock(&self) -> bool {
        take_free(&self.word)
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.word.store(0, Ordering::Release);
    }
}
