//! A new LWLock idea, measured where PostgreSQL takes its LWLocks, beside 9.6's, in one sweep.
//!
//! A lock is one struct and one `unsafe impl RawLwLock` (the trait's safety contract: it must
//! exclude as a reader-writer lock does); `pglocks::lwlock::held` keeps lwlock.c's
//! bookkeeping (too many LWLocks held, lock not held). `series_on_lwlock` runs it as
//! every LWLock of a workload's model — the BufferMapping partitions of `buffer-lookup`, and in
//! pgbench's transactions the lock manager's partitions, ProcArrayLock, the WAL insertion locks,
//! the CLOG locks — while `series_with(…, "pg", …)` runs the release's own.
//!
//! The idea here is a toy: one word with a writer bit and a reader count, whose waiters yield
//! and retry (no queue, no sleep). Run with `cargo run --release --example custom_lwlock`.

use pglocks::harness::sweep::quick_table;
use pglocks::lwlock::{held, LwLockError, LwLockMode, RawLwLock};
use pglocks::proc::Backend;
use pglocks::sync::atomic::{AtomicU32, Ordering::*};
use pglocks::sync::thread::yield_now;
use pglocks::workloads::{series_on_lwlock, series_with, Preset};

/// Bit 31: a writer holds it; below, the number of readers.
struct YieldLock(AtomicU32, &'static str);

// SAFETY: a writer takes the word only from 0 (no reader, no writer) and a reader only while
// bit 31 is clear, each with an Acquire compare-and-swap; a release stores or subtracts with
// Release; `acquire_or_wait` answers `true` only after `conditional_acquire` took the lock.
unsafe impl RawLwLock for YieldLock {
    fn new(name: &'static str) -> Self {
        YieldLock(AtomicU32::new(0), name)
    }
    fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        let first_try = self.conditional_acquire(b, mode)?;
        while !first_try && !self.conditional_acquire(b, mode)? {
            yield_now();
        }
        Ok(first_try)
    }
    fn conditional_acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        held::check_room(b)?;
        let w = self.0.load(Relaxed);
        let (free, new) = match mode {
            LwLockMode::Exclusive => (w == 0, 1 << 31),
            _ => (w >> 31 == 0, w + 1),
        };
        let taken = free && self.0.compare_exchange(w, new, Acquire, Relaxed).is_ok();
        if taken {
            held::record(b, self, mode);
        }
        Ok(taken)
    }
    fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        let taken = self.conditional_acquire(b, mode)?;
        // Wait, without taking it, until the lock would let `mode` in.
        let busy = match mode {
            LwLockMode::Exclusive => !0,
            _ => 1 << 31,
        };
        while !taken && self.0.load(Relaxed) & busy != 0 {
            yield_now();
        }
        Ok(taken)
    }
    fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
        match held::forget(b, self, self.1)? {
            LwLockMode::Exclusive => self.0.store(0, Release),
            _ => drop(self.0.fetch_sub(1, Release)),
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (pg96, yield_lock) = (Preset::by_name("pg96")?, series_on_lwlock::<YieldLock>);
    let mut s = pg96.settings();
    s.apply("synchronous_commit=off")?; // tpcb-like's curve is then the locks', not a disk's
    let mut series = Vec::new();
    for w in ["buffer-lookup", "select-only", "tpcb-like"] {
        series.push(series_with(w, pg96, "pg", s.clone())?);
        series.push(yield_lock(w, pg96, "yield", s.clone())?);
    }
    print!(
        "{}",
        quick_table("buffer-lookup, select-only, tpcb-like", series)?
    );
    Ok(())
}
