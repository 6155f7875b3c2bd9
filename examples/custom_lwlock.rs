//! Plugging your own LWLock idea into pglocks and measuring it beside PostgreSQL's.
//!
//! A new LWLock is one struct and one `impl RawLwLock`: `new`, `acquire` (exclusive or shared),
//! `conditional_acquire`, `acquire_or_wait` and `release`, each given the calling [`Backend`]
//! (PostgreSQL's `MyProc`). Like PostgreSQL's, a lock records what the backend holds in
//! `b.held_lwlocks` (so that `release` knows the mode, and misuse is an error rather than a
//! corrupted lock). Written against `pglocks_sync::atomic` and `pglocks_sync::thread` (never
//! `std::sync::atomic` directly), the same code can be model-checked with loom.
//!
//! Three locks run through the same loop here — every thread takes one lock exclusively and
//! releases it, as fast as it can, the `lwlock-exclusive` workload:
//! - `pg`: PostgreSQL's LWLock of 9.6+ ([`AtomicLwLock`]): a release wakes waiters, who then
//!   compete with everyone else, so a running backend re-takes the lock many times per time slice.
//! - `handoff`: [`HandoffLwLock`], the design lwlock.c rejects: a release hands the lock to the
//!   first waiter, in FIFO order. Fair, and under contention a convoy — every hand-over waits
//!   for the scheduler to run the woken backend. Expect it to be far slower from 2 threads on.
//! - `toy-yield`: the toy below, a reader-writer word whose waiters call `yield_now` in a loop.
//!
//! Run with `cargo run --release --example custom_lwlock` (a few seconds).

use pglocks_harness::sweep::{quick_table, RunFn};
use pglocks_harness::{run_team, SeriesSpec, TeamSpec};
use pglocks_lwlock::{
    AtomicLwLock, HandoffLwLock, LwLockError, LwLockMode, RawLwLock, MAX_SIMUL_LWLOCKS,
};
use pglocks_sync::atomic::{AtomicU32, Ordering};
use pglocks_sync::{thread, Backend, CachePadded, ProcTable};

/// **A toy, not a lock to use**: one atomic word holding a writer bit and a reader count;
/// a backend that cannot take the lock calls `yield_now` and tries again. No queue and no
/// sleeping on the semaphore: a writer can starve behind a stream of readers, and when threads
/// outnumber cores the waiters take turns on the CPU the holder needs.
#[derive(Debug)]
struct YieldingRwLock {
    word: AtomicU32,
    name: &'static str,
}

impl YieldingRwLock {
    /// Set while a writer holds the lock; below it, the number of readers.
    const WRITER: u32 = 1 << 31;

    /// Takes the lock in `mode` if the word allows it right now.
    fn try_take(&self, mode: LwLockMode) -> bool {
        let word = self.word.load(Ordering::Relaxed);
        let (allowed, new) = match mode {
            LwLockMode::Exclusive => (word == 0, Self::WRITER),
            _ => (word & Self::WRITER == 0, word + 1),
        };
        allowed
            && self
                .word
                .compare_exchange(word, new, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Whether the word would let `mode` in right now (without taking the lock).
    fn is_free_for(&self, mode: LwLockMode) -> bool {
        let word = self.word.load(Ordering::Acquire);
        match mode {
            LwLockMode::Exclusive => word == 0,
            _ => word & Self::WRITER == 0,
        }
    }

    /// PostgreSQL's "too many LWLocks taken" check, before anything is taken.
    fn check_room(b: &Backend) -> Result<(), LwLockError> {
        if b.held_lwlocks.len() >= MAX_SIMUL_LWLOCKS {
            return Err(LwLockError::TooManyLwLocks {
                max: MAX_SIMUL_LWLOCKS,
            });
        }
        Ok(())
    }

    /// Records the lock as held by `b` (a lock is known by its address).
    fn record(&self, b: &mut Backend, mode: LwLockMode) {
        b.held_lwlocks
            .push(self as *const Self as usize, mode as u8);
    }
}

impl RawLwLock for YieldingRwLock {
    fn new(name: &'static str) -> Self {
        YieldingRwLock {
            word: AtomicU32::new(0),
            name,
        }
    }

    fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        Self::check_room(b)?;
        let mut first_try = true;
        while !self.try_take(mode) {
            first_try = false;
            thread::yield_now();
        }
        self.record(b, mode);
        Ok(first_try)
    }

    fn conditional_acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        Self::check_room(b)?;
        let taken = self.try_take(mode);
        if taken {
            self.record(b, mode);
        }
        Ok(taken)
    }

    fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        Self::check_room(b)?;
        if self.try_take(mode) {
            self.record(b, mode);
            return Ok(true);
        }
        // Wait until the holder lets go, and do not take the lock.
        while !self.is_free_for(mode) {
            thread::yield_now();
        }
        Ok(false)
    }

    fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
        let mode = b
            .held_lwlocks
            .remove(self as *const Self as usize)
            .ok_or(LwLockError::NotHeld { lock: self.name })?;
        if mode == LwLockMode::Exclusive as u8 {
            self.word.store(0, Ordering::Release);
        } else {
            self.word.fetch_sub(1, Ordering::Release);
        }
        Ok(())
    }
}

/// One series: every thread of the team takes lock `K` exclusively and releases it.
fn series<K: RawLwLock>(impl_name: &str) -> SeriesSpec<'static> {
    let run: RunFn<'static> = Box::new(|spec: &TeamSpec| {
        let procs = ProcTable::new(spec.threads);
        let lock: CachePadded<K> = CachePadded::new(K::new("example"));
        run_team(spec, &procs, |_thread| {
            let lock = &lock;
            move |b: &mut Backend| -> Result<(), LwLockError> {
                lock.acquire(b, LwLockMode::Exclusive)?;
                lock.release(b)
            }
        })
    });
    SeriesSpec {
        workload: "lwlock-exclusive".into(),
        preset: "example".into(),
        impl_name: impl_name.into(),
        run,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let table = quick_table(
        "lwlock-exclusive",
        vec![
            series::<AtomicLwLock>("pg"),
            series::<HandoffLwLock>("handoff"),
            series::<YieldingRwLock>("toy-yield"),
        ],
    )?;
    print!("{table}");
    Ok(())
}
