//! Plugging your own spinlock idea into pglocks and measuring it beside PostgreSQL's.
//!
//! A new lock algorithm is one struct and one `unsafe impl RawSpinLock`. Written against
//! `pglocks_sync::atomic` and `pglocks_sync::hint` (never `std::sync::atomic` directly), the same
//! code can also be model-checked with loom (`RUSTFLAGS="--cfg loom"`). Wrapped in a
//! [`SpinLock`], it guards data exactly as PostgreSQL's `slock_t` does, and the harness can sweep
//! it over thread counts next to `pg` (PostgreSQL's `s_lock`) and `tas` (a naive test-and-set):
//! each series is a [`SeriesSpec`] whose `run` closure performs one timed [`run_team`].
//!
//! The idea tried here is a test-and-test-and-set lock with bounded exponential backoff: waiters
//! read the lock word (a shared cache line) until it looks free, try one exchange, and after each
//! failure wait twice as long (in `pause`s) before looking again, which spreads the stampede that
//! follows every release. Unlike PostgreSQL's it never sleeps, so it has no defence when the
//! holder is descheduled: compare the oversubscribed row (4 threads on a 2-cpu machine).
//!
//! Run with `cargo run --release --example custom_spinlock` (a few seconds).

use pglocks_harness::sweep::{quick_table, RunFn};
use pglocks_harness::{run_team, SeriesSpec, TeamSpec};
use pglocks_spin::{NaiveTasLock, PgSpinLock, RawSpinLock, SpinError, SpinLock, StuckSpinlock};
use pglocks_sync::atomic::{AtomicBool, Ordering, TestAndSet};
use pglocks_sync::{hint, Backend, CachePadded, ProcTable};

/// Test-and-test-and-set with exponential backoff between failed exchanges.
#[derive(Debug, Default)]
struct BackoffTtasLock {
    locked: AtomicBool,
}

impl BackoffTtasLock {
    /// `pause`s after the first failed exchange.
    const MIN_BACKOFF: u32 = 4;
    /// Upper bound of the backoff, in `pause`s (roughly a microsecond or two on x86).
    const MAX_BACKOFF: u32 = 1024;

    #[cold]
    fn lock_contended(&self) {
        let mut backoff = Self::MIN_BACKOFF;
        loop {
            // Test: wait on a shared copy of the line until the lock looks free.
            while self.locked.load(Ordering::Relaxed) {
                hint::spin_loop();
            }
            // Test-and-set: one exchange, which pulls the line exclusive.
            if !self.locked.test_and_set(Ordering::Acquire) {
                return;
            }
            // Lost the race: back off so the other waiters do not all retry at once.
            for _ in 0..backoff {
                hint::spin_loop();
            }
            backoff = (backoff * 2).min(Self::MAX_BACKOFF);
        }
    }
}

// SAFETY: the flag goes false -> true only through an atomic exchange that observed false, so at
// most one thread holds the lock at a time; `unlock`'s release store pairs with the acquire of the
// exchange that next succeeds, making the holder's writes visible to the next holder.
unsafe impl RawSpinLock for BackoffTtasLock {
    const NAME: &'static str = "ttas-backoff";

    fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn lock(&self, _backend: &mut Backend) -> Result<(), StuckSpinlock> {
        if self.locked.test_and_set(Ordering::Acquire) {
            self.lock_contended();
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

/// One series: every thread of the team increments a counter under a `SpinLock<u64, R>`.
fn series<R: RawSpinLock + 'static>(impl_name: &str) -> SeriesSpec<'static> {
    let run: RunFn<'static> = Box::new(|spec: &TeamSpec| {
        let procs = ProcTable::new(spec.threads);
        let counter: CachePadded<SpinLock<u64, R>> = CachePadded::new(SpinLock::new("counter", 0));
        run_team(spec, &procs, |_thread| {
            let counter = &counter;
            move |backend: &mut Backend| -> Result<(), SpinError> {
                counter.lock(backend)?.with_mut(|n| *n += 1);
                Ok(())
            }
        })
    });
    SeriesSpec {
        workload: "spin".into(),
        preset: "example".into(),
        impl_name: impl_name.into(),
        run,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let table = quick_table(
        "spin",
        vec![
            series::<PgSpinLock<true>>("pg"),
            series::<NaiveTasLock>("tas"),
            series::<BackoffTtasLock>(BackoffTtasLock::NAME),
        ],
    )?;
    print!("{table}");
    Ok(())
}
