//! PostgreSQL's lightweight locks (lwlock.c, lwlock.h): shared/exclusive locks for data structures
//! in shared memory, held for short stretches, with sleeping rather than spinning waiters.
//!
//! # The algorithm (9.6 and later, [`AtomicLwLock`])
//! The whole lock is one 32-bit state word: an exclusive bit and a count of shared holders, plus
//! three flags — `HAS_WAITERS` (somebody may be queued: set by every queueing backend, cleared by
//! a wake-up that found nobody to wake or by a backend that dequeues itself from a queue it
//! leaves empty, so it can outlive the last waiter by one release), `RELEASE_OK` (a releaser may wake
//! waiters; cleared while woken waiters have not yet run, so that a stream of releases does not
//! wake the whole queue one by one) and `LOCKED` (the wait queue itself is being changed: a tiny
//! spinlock inside the word, taken with `fetch_or` and waited for with s_lock's spin-delay loop).
//!
//! Acquiring is a compare-and-swap, made whether or not the lock looks free (on a taken lock it
//! swaps the unchanged word in, a write that doubles as a memory barrier). When the lock was taken, the backend queues itself
//! (at the tail; wait-until-free waiters at the head) and **tries once more**: between its first
//! look and its queueing, the holder may have released without seeing anyone to wake, and the
//! second attempt closes that window. If the second attempt succeeds, the backend takes itself off
//! the queue again (or, if a releaser already took it off, absorbs the wake-up that is on its way).
//! Otherwise it sleeps on its semaphore until a releaser marks it not-waiting, then competes again
//! from the start: a release never hands the lock over, so a backend that releases can re-take the
//! lock many times within its time slice, and a woken waiter may find it taken again.
//!
//! A release subtracts its share from the word; if that leaves the lock free and `HAS_WAITERS` and
//! `RELEASE_OK` are both set, it wakes, in queue order: wait-until-free waiters, and either the
//! first exclusive waiter alone (when it comes before any shared one) or every shared waiter in
//! the queue (exclusive ones after the first wake are skipped).
//!
//! # 9.5 and 9.4
//! 9.5 ([`MutexWaitListLwLock`]) had the same state word without `LOCKED`: its wait queue was
//! guarded by a separate spinlock, and `LWLockWakeup` changed the flags with separate atomic
//! operations before releasing it. Up to 9.4 ([`SpinlockProtectedLwLock`]) the whole lock was a
//! struct under a spinlock, and a release woke only the leading run of shared waiters.
//!
//! # Around the lock
//! - [`var`]: `LWLockWaitForVar` / `LWLockUpdateVar` / `LWLockReleaseClearVar`, the protocol WAL
//!   insertion locks are built on (9.4; lock-free variable reads from 17).
//! - [`tranche`]: `MainLWLockArray` with the named individual locks, the partitioned tranches
//!   (`BufferMapping`, `LockManager`, `PredicateLockManager`), padding per release and
//!   `LWLockReleaseAll`.
//! - `LWLOCK_STATS`: with [`ProcTable::set_lwlock_stats`](pglocks_proc::ProcTable::set_lwlock_stats)
//!   on, every acquisition, block, dequeue-self and spin delay is counted per tranche in the
//!   backend's [`LwLockStats`](pglocks_proc::stats::LwLockStats); a lock carries a 16-bit tranche
//!   number (as PostgreSQL's does), so counting is an array index.
//! - [`ParkingLotLwLock`]: parking_lot's reader-writer lock behind the same trait, for
//!   comparison; `examples/custom_lwlock.rs` shows how to plug in a lock of one's own.
//! # NUMA-aware reader-writer locks
//! [`numa`]: C-RW-WP ([`CohortRwLock`]) and ShflLock's blocking reader-writer lock
//! ([`ShflRwLock`]), for a measure of what the published NUMA-aware designs would do in place
//! of the LWLocks.
//!
//! # A new idea: hand-off
//! [`HandoffLwLock`] is what lwlock.c deliberately does not do: a release hands the lock to the
//! waiters at the head of the queue (in FIFO order) instead of letting them re-compete, and
//! nobody takes the lock past a queued waiter. Fair, and, under contention, a convoy: the
//! [`handoff`] module describes it and what to measure it for.
//!
//! # Differences from PostgreSQL
//! - Backends are explicit [`Backend`] handles; `lwWaiting`, `lwWaitMode` and `lwWaitLink` are in
//!   the backend's shared [`ProcSlot`](pglocks_proc::ProcSlot), `held_lwlocks[]` in the handle.
//! - Misuse that PostgreSQL reports with `elog(ERROR)` returns [`LwLockError`]; the PANICs for
//!   impossible states are debug assertions.
//! - Interrupt holdoff (`HOLD_INTERRUPTS`) has nothing to model and is left out.
//! - 9.5 and 9.6 found a dequeuing backend by scanning the queue; the model uses the wait states
//!   of 16 for every release (the same outcome, without the quadratic scan).
//! - `held_lwlocks[]` entries are one word (address and mode packed), so recording a lock is
//!   one store.

use pglocks_proc::tranche::{tranche_name, TrancheId};
use pglocks_proc::Backend;
use pglocks_spin::RawSpinLock;

mod atomic;
pub mod handoff;
pub mod numa;
mod parking_lot_adapter;
mod spinlock_protected;
pub mod tranche;
pub mod var;

pub use atomic::{
    AtomicLwLock, AttemptRule, FetchAddShared, LockedBit, Pg18Layout, Pg95Layout, Pg96Layout,
    ReadFirst, SeparateMutex, StateLayout, SwapAlways, WaitListLock,
};

/// PostgreSQL 18's LWLock with the 2025 proposal's shared acquisition by fetch-and-add (a
/// prototype; see [`FetchAddShared`]).
pub type FetchAddLwLock = AtomicLwLock<Pg18Layout, LockedBit, FetchAddShared>;

/// The LWLock of 9.5: the atomic state word, the wait list under a spinlock of its own.
pub type MutexWaitListLwLock = AtomicLwLock<Pg95Layout, SeparateMutex>;
pub use handoff::HandoffLwLock;
pub use numa::{CohortRwLock, ShflRwLock};
pub use parking_lot_adapter::ParkingLotLwLock;
/// lwlock.h's `LWLockMode`, kept with the backend's held locks in `pglocks-proc`.
pub use pglocks_proc::LwLockMode;
pub use spinlock_protected::{SpinlockProtectedLwLock, MAX_SIMUL_LWLOCKS_94};
pub use tranche::{MainLwLockArray, NoPadding, Pad128, Pad32, Pad64, Padding, PartitionedTranche};
pub use var::{AtomicVar, LockedVar, LwLockVar, VarProtocol, VarWait};

/// What one attempt to take an LWLock found: the result of `LWLockAttemptLock` in lwlock.c,
/// which PostgreSQL returns as a `bool` meaning "must wait".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum LockAttempt {
    /// The lock is now held in the mode asked for.
    Acquired,
    /// The lock is taken in a conflicting mode (or, for a fair lock, someone is queued): the
    /// caller must queue and wait, or give up.
    MustWait,
}

/// lwlock.h's `MAX_SIMUL_LWLOCKS` from 9.5 (100 before).
pub const MAX_SIMUL_LWLOCKS: usize = pglocks_proc::HELD_LWLOCKS_CAPACITY;

/// An LWLock implementation: PostgreSQL's of each release, or a new idea, measured through the
/// same workloads. Every method takes the calling backend, as PostgreSQL's take `MyProc`.
///
/// The structures built on LWLocks (the lock manager's partitions, the fast-path areas, the
/// sinval ring, the SLRU buffers, …) keep their data in `UnsafeCell`s and are `Sync` only because
/// the lock excludes: a lock that lets two exclusive holders in would let safe code race.
/// Implementing the trait is therefore `unsafe`, as lock_api's `RawRwLock` is.
///
/// # Safety
/// An implementation must be a reader-writer lock:
/// - while one backend holds it [`Exclusive`](LwLockMode::Exclusive) (from an `acquire` that
///   returned `Ok`, a `conditional_acquire` or `acquire_or_wait` that returned `Ok(true)`, until
///   its `release`), no other backend holds it in any mode; backends that hold it
///   [`Shared`](LwLockMode::Shared) hold it only with other shared holders;
/// - a release happens-before the next acquisition that takes the lock (the releaser's writes
///   are visible to the next holder: `Release` / `Acquire` ordering or stronger);
/// - `acquire_or_wait` returning `Ok(false)` does not hold the lock, and `Err` never does;
/// - `update_var` and `release_clear_var` are called only by the exclusive holder, and a
///   `wait_for_var` that returns [`VarWait::Free`] does not hold the lock.
///
/// # Examples
/// A lock of one's own: a word with a writer bit and a count of readers, whose waiters yield
/// and retry. [`held`] keeps lwlock.c's bookkeeping (too many LWLocks held, lock not held).
/// ```
/// use pglocks_lwlock::{held, LwLockError, LwLockMode, RawLwLock};
/// use pglocks_proc::{Backend, ProcTable};
/// use std::sync::atomic::{AtomicU32, Ordering::*};
///
/// /// Bit 31: a writer holds it; below, the number of readers.
/// struct YieldLock(AtomicU32, &'static str);
///
/// // SAFETY: a writer takes the word only from 0 (no reader, no writer), a reader only while bit
/// // 31 is clear, each by a compare-and-swap with Acquire; release stores or subtracts with
/// // Release. `acquire_or_wait` returns true only after taking it.
/// unsafe impl RawLwLock for YieldLock {
///     fn new(name: &'static str) -> Self {
///         YieldLock(AtomicU32::new(0), name)
///     }
///     fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
///         let first_try = self.conditional_acquire(b, mode)?;
///         while !first_try && !self.conditional_acquire(b, mode)? {
///             std::thread::yield_now();
///         }
///         Ok(first_try)
///     }
///     fn conditional_acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
///         held::check_room(b)?;
///         let w = self.0.load(Relaxed);
///         let (free, new) = match mode {
///             LwLockMode::Exclusive => (w == 0, 1 << 31),
///             _ => (w >> 31 == 0, w + 1),
///         };
///         let taken = free && self.0.compare_exchange(w, new, Acquire, Relaxed).is_ok();
///         if taken {
///             held::record(b, self, mode);
///         }
///         Ok(taken)
///     }
///     fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
///         self.conditional_acquire(b, mode) // never waits: allowed, a caller must retry
///     }
///     fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
///         match held::forget(b, self, self.1)? {
///             LwLockMode::Exclusive => self.0.store(0, Release),
///             _ => drop(self.0.fetch_sub(1, Release)),
///         }
///         Ok(())
///     }
/// }
///
/// let procs = ProcTable::new(1);
/// let mut b = procs.attach()?;
/// let lock = YieldLock::new("mine");
/// assert!(lock.acquire(&mut b, LwLockMode::Shared)?);
/// assert!(!lock.conditional_acquire(&mut b, LwLockMode::Exclusive)?, "a reader is in");
/// lock.release(&mut b)?;
/// assert!(matches!(lock.release(&mut b), Err(LwLockError::NotHeld { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub unsafe trait RawLwLock: Send + Sync + 'static {
    /// A free lock of tranche `name` (`LWLockInitialize`).
    fn new(name: &'static str) -> Self;
    /// `LWLockAcquire` (exclusive or shared): `true` if had without sleeping.
    fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError>;
    /// `LWLockConditionalAcquire`: `true` if taken, never waits.
    fn conditional_acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError>;
    /// `LWLockAcquireOrWait`: `true` if taken; `false` after waiting for a release, not holding it.
    fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError>;
    /// `LWLockRelease`.
    fn release(&self, b: &mut Backend) -> Result<(), LwLockError>;

    /// `LWLockWaitForVar` (9.4): waits until the lock is free or its holder has moved `var` away
    /// from `oldval` (see [`var`]).
    ///
    /// The default, for locks without a variable protocol (the peers), polls: the lock is free
    /// if it can be taken in shared mode, else the variable is read, else the thread yields and
    /// looks again. It sees every update, so WAL's protocol keeps working (a flusher that
    /// waits for an inserter which has advertised its position and is itself waiting returns),
    /// at the cost of a busy wait where PostgreSQL sleeps.
    fn wait_for_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        oldval: u64,
    ) -> Result<VarWait, LwLockError> {
        loop {
            if self.conditional_acquire(b, LwLockMode::Shared)? {
                self.release(b)?;
                return Ok(VarWait::Free);
            }
            let value = var.get();
            if value != oldval {
                return Ok(VarWait::Changed(value));
            }
            pglocks_sync::thread::yield_now();
        }
    }

    /// `LWLockUpdateVar`: the exclusive holder publishes `value` and wakes `wait_for_var`
    /// waiters. The default only stores the value (its waiters poll).
    fn update_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        value: u64,
    ) -> Result<(), LwLockError> {
        let _ = b;
        var.exchange(value);
        Ok(())
    }

    /// `LWLockReleaseClearVar`: sets `var` to `value` and releases the lock.
    fn release_clear_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        value: u64,
    ) -> Result<(), LwLockError> {
        var.exchange(value);
        self.release(b)
    }
}

macro_rules! impl_raw_lwlock {
    ($ty:ty, $($bound:tt)*) => {
        // SAFETY: each lock's own methods, which these forward to, keep the contract (the
        // state-word protocol in the crate doc; loom checks it in tests/loom_lwlock.rs).
        unsafe impl<$($bound)*> RawLwLock for $ty {
            fn new(name: &'static str) -> Self {
                <$ty>::new(name)
            }
            #[inline(always)]
            fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
                <$ty>::acquire(self, b, mode)
            }
            #[inline(always)]
            fn conditional_acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
                <$ty>::conditional_acquire(self, b, mode)
            }
            fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
                <$ty>::acquire_or_wait(self, b, mode)
            }
            #[inline(always)]
            fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
                <$ty>::release(self, b)
            }
            fn wait_for_var<P: VarProtocol>(
                &self,
                b: &mut Backend,
                var: &LwLockVar<P>,
                oldval: u64,
            ) -> Result<VarWait, LwLockError> {
                <$ty>::wait_for_var(self, b, var, oldval)
            }
            fn update_var<P: VarProtocol>(
                &self,
                b: &mut Backend,
                var: &LwLockVar<P>,
                value: u64,
            ) -> Result<(), LwLockError> {
                <$ty>::update_var(self, b, var, value)
            }
            fn release_clear_var<P: VarProtocol>(
                &self,
                b: &mut Backend,
                var: &LwLockVar<P>,
                value: u64,
            ) -> Result<(), LwLockError> {
                <$ty>::release_clear_var(self, b, var, value)
            }
        }
    };
}

impl_raw_lwlock!(AtomicLwLock<L, W, A>, L: StateLayout, W: WaitListLock, A: AttemptRule);
impl_raw_lwlock!(SpinlockProtectedLwLock<R>, R: pglocks_spin::RawSpinLock + 'static);

/// The sleep of `LWLockAcquire` and friends: waits on the backend's semaphore until a releaser
/// has marked it not waiting. Wake-ups meant for something else may be absorbed on the way; their
/// number is returned, and the caller re-posts them once it is done (lwlock.c's `extraWaits`).
fn wait_for_wakeup(slot: &pglocks_proc::ProcSlot) -> u32 {
    let mut extra_waits = 0;
    loop {
        slot.sem.lock();
        if slot
            .lw_waiting
            .load(pglocks_sync::atomic::Ordering::Acquire)
            == wait_state::NOT_WAITING
        {
            return extra_waits;
        }
        extra_waits += 1;
    }
}

/// [`wait_for_wakeup`] for backend `b`, counted as the wait event tranche / `mode` (what
/// pg_stat_activity shows as `LWLock` / tranche) and, with `LWLOCK_STATS` on, as a block.
#[cold]
fn sleep_until_woken(b: &mut Backend, tranche: TrancheId, mode: LwLockMode) -> u32 {
    let slept_at = pglocks_sync::time::Instant::now();
    let extra_waits = wait_for_wakeup(b.procs().slot(b.procno()));
    let waited = slept_at.elapsed().as_nanos() as u64;
    b.stats
        .waits
        .record(tranche_name(tranche), mode.name(), waited);
    if let Some(c) = b.stats.lwlock.tranche(tranche) {
        c.block += 1;
        c.wait_ns += waited;
    }
    extra_waits
}

/// The start of `LWLockRelease`: takes lock `id` (of `tranche`) out of the backend's held locks
/// and returns the mode it was held in, or reports it not held. Locks are mostly released in the
/// reverse order of taking them, so the search (from the end, as lwlock.c's) usually stops at
/// the last entry, inline; anything else is the cold path.
#[inline(always)]
fn forget_held(b: &mut Backend, id: usize, tranche: TrancheId) -> Result<LwLockMode, LwLockError> {
    match b.held_lwlocks.last() {
        Some((l, mode)) if l == id => {
            b.held_lwlocks.pop();
            Ok(mode)
        }
        _ => forget_held_anywhere(b, id, tranche),
    }
}

#[cold]
fn forget_held_anywhere(
    b: &mut Backend,
    id: usize,
    tranche: TrancheId,
) -> Result<LwLockMode, LwLockError> {
    b.held_lwlocks
        .remove(id)
        .ok_or_else(|| LwLockError::NotHeld {
            lock: tranche_name(tranche),
        })
}

/// The test at the top of `LWLockAcquire` and friends: the backend's `held_lwlocks[]` has room
/// for one more lock under the release's limit `max` (`MAX_SIMUL_LWLOCKS`), else "too many
/// LWLocks taken".
#[inline(always)]
fn check_room(b: &Backend, max: usize) -> Result<(), LwLockError> {
    if b.held_lwlocks.len() >= max {
        return Err(too_many(max));
    }
    Ok(())
}

#[cold]
fn too_many(max: usize) -> LwLockError {
    LwLockError::TooManyLwLocks { max }
}

/// The held-locks bookkeeping every LWLock shares, public for a lock of one's own.
///
/// lwlock.c keeps, per backend, the array `held_lwlocks[]` of the locks it holds and their
/// modes: `LWLockAcquire` and friends refuse a lock past `MAX_SIMUL_LWLOCKS` ("too many LWLocks
/// taken") before touching it, record it once taken, and `LWLockRelease` finds it there to learn
/// the mode it releases ("lock is not held" if it is not). An implementation of [`RawLwLock`]
/// calls these three in the same places, so that it keeps PostgreSQL's error behaviour and works
/// with everything that reads the array (`LWLockReleaseAll`, `LWLockHeldByMe`, the workloads'
/// checks). A lock is known by its address.
pub mod held {
    use super::{LwLockError, LwLockMode, MAX_SIMUL_LWLOCKS};
    use pglocks_proc::Backend;

    /// `LWLockAcquire`'s first test: room for one more held lock, else "too many LWLocks taken".
    #[inline(always)]
    pub fn check_room(b: &Backend) -> Result<(), LwLockError> {
        super::check_room(b, MAX_SIMUL_LWLOCKS)
    }

    /// Records `lock`, just taken in `mode`, as held by `b`.
    #[inline(always)]
    pub fn record<L: ?Sized>(b: &mut Backend, lock: &L, mode: LwLockMode) {
        b.held_lwlocks
            .push(lock as *const L as *const () as usize, mode);
    }

    /// `LWLockRelease`'s start: takes `lock` out of `b`'s held locks and returns the mode it was
    /// held in, or "lock `name` is not held".
    #[inline(always)]
    pub fn forget<L: ?Sized>(
        b: &mut Backend,
        lock: &L,
        name: &'static str,
    ) -> Result<LwLockMode, LwLockError> {
        b.held_lwlocks
            .remove(lock as *const L as *const () as usize)
            .ok_or(LwLockError::NotHeld { lock: name })
    }
}

/// Re-posts the `extra` wake-ups a backend absorbed while waiting for its own (lwlock.c's
/// `extraWaits` loop), so that whatever they were meant for still sees them.
fn repost_absorbed_wakeups(b: &Backend, extra: u32) {
    for _ in 0..extra {
        b.semaphore().unlock();
    }
}

/// `SpinLockAcquire` of an LWLock's spinlock (9.5's wait-list `mutex`, ≤ 9.4's whole-lock
/// `mutex`), adding its spin-delay sleeps to the tranche's `LWLOCK_STATS` count as those
/// releases did with `s_lock`'s return value.
#[inline(always)]
fn lock_counting_delays<R: RawSpinLock>(
    mutex: &R,
    b: &mut Backend,
    tranche: TrancheId,
) -> Result<(), LwLockError> {
    let delays_before = b.stats.spin.delays;
    mutex.lock(b).map_err(|stuck| LwLockError::StuckWaitList {
        lock: tranche_name(tranche),
        delays: stuck.delays,
    })?;
    let delays = b.stats.spin.delays - delays_before;
    if let Some(c) = b.stats.lwlock.tranche(tranche) {
        c.spin_delay += delays;
    }
    Ok(())
}

/// `LWLockWaitState` (16+): a backend's `lwWaiting`.
pub mod wait_state {
    /// `LW_WS_NOT_WAITING`.
    pub const NOT_WAITING: u8 = 0;
    /// `LW_WS_WAITING`: on a wait queue.
    pub const WAITING: u8 = 1;
    /// `LW_WS_PENDING_WAKEUP`: taken off the queue by a waker, not yet told.
    pub const PENDING_WAKEUP: u8 = 2;
}

/// Errors of this crate, in PostgreSQL's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LwLockError {
    /// The backend already holds `MAX_SIMUL_LWLOCKS` locks.
    #[error("too many LWLocks taken (a backend may hold at most {max} at once)")]
    TooManyLwLocks {
        /// The limit.
        max: usize,
    },
    /// Releasing a lock the backend does not hold.
    #[error("lock {lock} is not held")]
    NotHeld {
        /// The lock's tranche name.
        lock: &'static str,
    },
    /// The wait-list spinlock of the lock never came free.
    #[error(
        "stuck spinlock detected at the wait list of LWLock {lock} (gave up after {delays} sleeps)"
    )]
    StuckWaitList {
        /// The lock's tranche name.
        lock: &'static str,
        /// Sleeps before giving up.
        delays: u32,
    },
}
