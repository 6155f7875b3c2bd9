//! PostgreSQL's spinlock, `s_lock`, and the alternatives a lock researcher compares it with.
//!
//! # The algorithm (s_lock.h, s_lock.c)
//! A PostgreSQL spinlock is one byte (`slock_t`). `S_LOCK` makes one `TAS` — an atomic exchange of
//! 1 into the byte — and only if that finds the byte already set does it call `s_lock`, the
//! out-of-line slow path. `s_lock` retries with `TAS_SPIN`, which on x86 reads the byte first and
//! attempts the exchange only when it looks free (so waiters spin on a shared, read-only copy of
//! the cache line instead of pulling it exclusive on every try), and runs `SPIN_DELAY` — the `pause`
//! instruction — after every failed try.
//!
//! Spinning is bounded by an adaptive per-backend estimate, `spins_per_delay`. After that many
//! failed tries the backend sleeps: 1 ms the first time, then each sleep grows by a random factor
//! between 1× and 2×, wrapping back to 1 ms once it passes one second (so a convoy of sleepers does
//! not stay in lock step). After `NUM_DELAYS` (1000) sleeps the lock is declared stuck: PostgreSQL
//! PANICs, pglocks returns [`SpinError::StuckSpinlock`]. When an acquisition needed no sleep, the
//! estimate grows by 100 (up to 1000): on a multiprocessor spinning pays, because the holder is
//! running elsewhere. When it needed a sleep, the estimate shrinks by one (down to 10): on a
//! uniprocessor, or when the holder has been descheduled, spinning only burns the time slice the
//! holder needs. Backends start from, and at exit blend 1:15 into, a shared estimate.
//!
//! Release (`S_UNLOCK`) is a plain store of 0 with release ordering. There is no queue and no
//! fairness: whoever's TAS lands first wins.
//!
//! # The alternatives (for prototyping, behind the same [`RawSpinLock`] trait)
//! - [`NaiveTasLock`]: TAS and `pause` in a loop, no test-before, no sleeping.
//! - [`TicketLock`]: FIFO by two counters; every waiter spins on the same word.
//! - [`McsLock`]: FIFO queue of waiter nodes, each spinning on its own flag (the K42 variant, whose
//!   unlock needs no queue node, so it fits a lock/unlock trait).
//! - [`FloorLock`]: exchange until it succeeds, store to release, nothing else: the physical cost
//!   floor that the others are measured against. Not a lock to use.
//!
//! # Differences from PostgreSQL
//! - The spin state lives in an explicit [`Backend`] (s_lock.c keeps it in a file-level static).
//! - The delay constants are data ([`SpinDelayConfig`](pglocks_proc::spin_delay::SpinDelayConfig))
//!   so that tests can make a lock stuck in milliseconds.
//! - A stuck spinlock is an error value, not a PANIC.
//! - Whether `TAS_SPIN` reads first is a type parameter of [`PgSpinLock`], not the compile target:
//!   presets choose the release's behaviour on x86_64. The i386 `tas()` (read first on every TAS,
//!   8.0+) and other architectures are not modelled.
//! - 8.1–9.3 kept the sleep in whole milliseconds, 9.4+ in microseconds: the delay unit is a
//!   setting ([`SpinDelayConfig::delay_unit`](pglocks_proc::spin_delay::SpinDelayConfig)).
//! - Under loom only, `TAS` is a compare-exchange from 0 rather than an exchange (equal in effect;
//!   see [`TestAndSet`](pglocks_sync::atomic::TestAndSet)), because loom never finishes a model
//!   in which a failing exchange keeps writing.

mod alt;
pub mod numa;
mod s_lock;

pub use alt::{FloorLock, McsLock, NaiveTasLock, TicketLock};
pub use numa::{CnaLock, CohortLock, HmcsLock, QSpinLock, ShflLock};
pub use s_lock::{adapt_spins_per_delay, next_delay, PgSpinLock, SpinDelayStatus};

use pglocks_proc::Backend;
use pglocks_sync::cell::UnsafeCell;

/// The spinlock made no progress for `NUM_DELAYS` sleeps (s_lock.c's `s_lock_stuck`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckSpinlock {
    /// Sleeps taken before giving up.
    pub delays: u32,
}

/// Errors of this crate, in PostgreSQL's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpinError {
    /// `s_lock_stuck`: the holder never released the lock (or a backend re-took a lock it holds).
    #[error("stuck spinlock detected at {lock} (gave up after {delays} sleeps)")]
    StuckSpinlock {
        /// The spinlock's name.
        lock: &'static str,
        /// Sleeps taken before giving up.
        delays: u32,
    },
}

/// A raw spinlock algorithm: one struct and one impl is a new idea ready to measure.
///
/// # Safety
/// Implementations must provide mutual exclusion: from the moment `lock` returns `Ok` (or
/// `try_lock` returns `true`) until the matching `unlock`, no other `lock` or `try_lock` may
/// succeed, and `unlock` must make the holder's writes visible to the next holder.
///
/// # Examples
/// A test-and-test-and-set lock that yields while it waits, guarding data as a [`SpinLock`]
/// (the `pglocks` facade's workloads take it the same way: `series_on_spinlock`).
/// ```
/// use pglocks_spin::{RawSpinLock, SpinLock, StuckSpinlock};
/// use pglocks_proc::{Backend, ProcTable};
/// use std::sync::atomic::{AtomicBool, Ordering::*};
///
/// struct YieldingTtas(AtomicBool);
///
/// // SAFETY: only the swap that changes the flag from false to true takes the lock (Acquire),
/// // and only the holder stores false (Release).
/// unsafe impl RawSpinLock for YieldingTtas {
///     const NAME: &'static str = "yielding-ttas";
///     fn new() -> Self {
///         YieldingTtas(AtomicBool::new(false))
///     }
///     fn lock(&self, _: &mut Backend) -> Result<(), StuckSpinlock> {
///         while !self.try_lock() {
///             while self.0.load(Relaxed) {
///                 std::thread::yield_now();
///             }
///         }
///         Ok(())
///     }
///     fn try_lock(&self) -> bool {
///         !self.0.swap(true, Acquire)
///     }
///     unsafe fn unlock(&self) {
///         self.0.store(false, Release);
///     }
/// }
///
/// let procs = ProcTable::new(1);
/// let mut me = procs.attach()?;
/// let counter: SpinLock<u64, YieldingTtas> = SpinLock::new("counter", 0);
/// counter.lock(&mut me)?.with_mut(|n| *n += 1);
/// assert_eq!(counter.lock(&mut me)?.with(|n| *n), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub unsafe trait RawSpinLock: Send + Sync {
    /// Short name used by the CLI and in reports (`pg`, `tas`, `ticket`, `mcs`, `floor`).
    const NAME: &'static str;

    /// A new, unlocked lock.
    fn new() -> Self;

    /// Acquires the lock, spinning (and, for PostgreSQL's, sleeping) until it is free.
    fn lock(&self, backend: &mut Backend) -> Result<(), StuckSpinlock>;

    /// Acquires the lock if it is free right now.
    fn try_lock(&self) -> bool;

    /// Releases the lock.
    ///
    /// # Safety
    /// The caller must hold the lock.
    unsafe fn unlock(&self);
}

/// Data protected by a named spinlock, PostgreSQL style: the lock guards a few fields of a shared
/// struct for a handful of instructions.
///
/// ```
/// use pglocks_spin::{PgSpinLock, SpinLock};
/// let procs = pglocks_proc::ProcTable::new(1);
/// let mut me = procs.attach().unwrap();
/// let counter: SpinLock<u64> = SpinLock::new("insertpos_lck", 0);
/// counter.lock(&mut me).unwrap().with_mut(|n| *n += 1);
/// assert_eq!(counter.lock(&mut me).unwrap().with(|n| *n), 1);
/// ```
pub struct SpinLock<T, R: RawSpinLock = PgSpinLock> {
    raw: R,
    name: &'static str,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through a guard, which exists only while the raw lock is held,
// so at most one thread touches it at a time; T itself must be sendable between threads.
unsafe impl<T: Send, R: RawSpinLock> Sync for SpinLock<T, R> {}
// SAFETY: moving the lock moves T; the raw lock is Send by its trait bound.
unsafe impl<T: Send, R: RawSpinLock> Send for SpinLock<T, R> {}

impl<T, R: RawSpinLock> SpinLock<T, R> {
    /// A spinlock named `name` (the name appears in errors) guarding `value`.
    pub fn new(name: &'static str, value: T) -> Self {
        Self {
            raw: R::new(),
            name,
            data: UnsafeCell::new(value),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Acquires the lock (`SpinLockAcquire`), counting the acquisition in the backend's stats.
    #[inline]
    pub fn lock(&self, backend: &mut Backend) -> Result<SpinLockGuard<'_, T, R>, SpinError> {
        match self.raw.lock(backend) {
            Ok(()) => {
                backend.stats.spin.acquisitions += 1;
                Ok(SpinLockGuard { lock: self })
            }
            Err(stuck) => Err(self.stuck(stuck)),
        }
    }

    #[cold]
    fn stuck(&self, stuck: StuckSpinlock) -> SpinError {
        SpinError::StuckSpinlock {
            lock: self.name,
            delays: stuck.delays,
        }
    }

    /// Acquires the lock if it is free right now (`TAS` without `s_lock`).
    #[inline]
    pub fn try_lock(&self) -> Option<SpinLockGuard<'_, T, R>> {
        self.raw.try_lock().then_some(SpinLockGuard { lock: self })
    }

    /// The raw lock, for code that pairs lock and unlock itself.
    pub fn raw(&self) -> &R {
        &self.raw
    }
}

/// Proof that a [`SpinLock`] is held; releases it (`SpinLockRelease`) when dropped.
///
/// Access goes through closures (`with`, `with_mut`) rather than `Deref`, so that the same code
/// compiles against loom's `UnsafeCell`, which checks every access for races.
pub struct SpinLockGuard<'a, T, R: RawSpinLock> {
    lock: &'a SpinLock<T, R>,
}

impl<T, R: RawSpinLock> SpinLockGuard<'_, T, R> {
    /// Reads the protected data.
    #[inline]
    pub fn with<U>(&self, f: impl FnOnce(&T) -> U) -> U {
        // SAFETY: the guard exists only while the raw lock is held, so no one else is writing.
        self.lock.data.with(|p| f(unsafe { &*p }))
    }

    /// Changes the protected data.
    #[inline]
    pub fn with_mut<U>(&mut self, f: impl FnOnce(&mut T) -> U) -> U {
        // SAFETY: the guard exists only while the raw lock is held, and `&mut self` makes this the
        // only access through it.
        self.lock.data.with_mut(|p| f(unsafe { &mut *p }))
    }
}

impl<T, R: RawSpinLock> Drop for SpinLockGuard<'_, T, R> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a guard is created only after a successful lock or try_lock.
        unsafe { self.lock.raw.unlock() }
    }
}
