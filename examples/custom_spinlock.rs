//! Plugging your own spinlock idea into pglocks and measuring it beside PostgreSQL's.
//!
//! A new lock algorithm is one struct and one `unsafe impl RawSpinLock`. Written against
//! `pglocks_sync::atomic` and `pglocks_sync::hint` (never `std::sync::atomic` directly), the same
//! code can also be model-checked with loom (`RUSTFLAGS="--cfg loom"`). Wrapped in a
//! `pglocks::spin::SpinLock`, it guards data exactly as PostgreSQL's `slock_t` does, and the harness can sweep
//! it over thread counts next to `pg` (PostgreSQL's `s_lock`) and `tas` (a naive test-and-set).
//! `series_on_spinlock` runs it wherever a workload's model takes an s_lock spinlock: the `spin`
//! workload's counter, WAL's `insertpos_lck` and `info_lck` in `wal-insert`, and 9.1's
//! `msgnumLock` in every sinval check of `select-only`.
//!
//! The idea tried here is a test-and-test-and-set lock with bounded exponential backoff: waiters
//! read the lock word (a shared cache line) until it looks free, try one exchange, and after each
//! failure wait twice as long (in `pause`s) before looking again, which spreads the stampede that
//! follows every release. Unlike PostgreSQL's it never sleeps, so it has no defence when the
//! holder is descheduled: compare the oversubscribed row (4 threads on a 2-cpu machine).
//!
//! Run with `cargo run --release --example custom_spinlock` (a few seconds).

use pglocks::harness::sweep::quick_table;
use pglocks::proc::Backend;
use pglocks::spin::{NaiveTasLock, RawSpinLock, StuckSpinlock};
use pglocks::sync::atomic::{AtomicBool, Ordering, TestAndSet};
use pglocks::sync::hint;
use pglocks::workloads::{series_on_spinlock, series_with, Preset};

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 9.1: its sinval check takes msgnumLock on every call, so select-only takes s_locks too.
    let pg91 = Preset::by_name("pg91")?;
    let mut settings = pg91.settings();
    settings.apply("flush_latency=0")?;
    let mut series = Vec::new();
    for w in ["spin", "wal-insert", "select-only"] {
        series.push(series_with(w, pg91, "pg", settings.clone())?);
        series.push(series_on_spinlock::<NaiveTasLock>(
            w,
            pg91,
            "tas",
            settings.clone(),
        )?);
        series.push(series_on_spinlock::<BackoffTtasLock>(
            w,
            pg91,
            BackoffTtasLock::NAME,
            settings.clone(),
        )?);
    }
    print!("{}", quick_table("spin, wal-insert, select-only", series)?);
    Ok(())
}
