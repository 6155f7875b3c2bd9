//! The `spin` micro workload: one spinlock acquisition, a counter update under it, release.
//!
//! This is PostgreSQL's pattern for a spinlock — a few fields of a shared struct changed in a
//! handful of instructions (`insertpos_lck`, `info_lck`, the buffer header lock) — run as fast as
//! the threads can. `--set cs_work=N` lengthens the critical section and `--set think=N` adds
//! work between acquisitions, both as dependent arithmetic that touches no memory.

use crate::preset::Settings;
use crate::WorkloadError;
use crate::{proc_table, work};
use pglocks_harness::sweep::RunFn;
use pglocks_harness::{run_team, TeamSpec};
use pglocks_spin::{
    FloorLock, McsLock, NaiveTasLock, PgSpinLock, RawSpinLock, SpinError, SpinLock, TicketLock,
};
use pglocks_sync::{Backend, CachePadded};
use std::hint::black_box;
use std::sync::Arc;

/// Implementations of the `spin` workload, with one line each for `pglocks list`.
pub const IMPLS: &[(&str, &str)] = &[
    (
        "pg",
        "PostgreSQL's s_lock (TAS, then TAS_SPIN + pause + adaptive sleeps), per preset",
    ),
    (
        "tas",
        "naive test-and-set loop with pause, no read-first, no sleeping",
    ),
    ("ticket", "ticket lock (FIFO, all waiters on one word)"),
    (
        "mcs",
        "MCS queue lock, K42 variant (FIFO, each waiter on its own flag)",
    ),
    (
        "floor",
        "bare exchange to lock, store to unlock: the physical floor",
    ),
    (
        "parking_lot",
        "parking_lot::Mutex (spin briefly, then park)",
    ),
    ("std", "std::sync::Mutex (futex)"),
];

/// A lock around the counter: what the workload needs of any implementation.
trait Guarded: Send + Sync + 'static {
    fn new() -> Self;
    fn critical(&self, b: &mut Backend, f: impl FnOnce(&mut u64)) -> Result<(), SpinError>;
}

impl<R: RawSpinLock + 'static> Guarded for SpinLock<u64, R> {
    fn new() -> Self {
        SpinLock::new("spin", 0)
    }
    #[inline(always)]
    fn critical(&self, b: &mut Backend, f: impl FnOnce(&mut u64)) -> Result<(), SpinError> {
        self.lock(b)?.with_mut(f);
        Ok(())
    }
}

impl Guarded for parking_lot::Mutex<u64> {
    fn new() -> Self {
        parking_lot::Mutex::new(0)
    }
    #[inline(always)]
    fn critical(&self, _b: &mut Backend, f: impl FnOnce(&mut u64)) -> Result<(), SpinError> {
        f(&mut self.lock());
        Ok(())
    }
}

impl Guarded for std::sync::Mutex<u64> {
    fn new() -> Self {
        std::sync::Mutex::new(0)
    }
    #[inline(always)]
    fn critical(&self, _b: &mut Backend, f: impl FnOnce(&mut u64)) -> Result<(), SpinError> {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(())
    }
}

fn runner<L: Guarded>(settings: &Settings) -> RunFn<'static> {
    let (cs_work, think, settings) = (settings.cs_work, settings.think, settings.clone());
    Box::new(move |spec: &TeamSpec| {
        let procs = proc_table(&settings, spec.threads);
        let lock = Arc::new(CachePadded::new(L::new()));
        run_team(spec, &procs, |_| {
            let lock = Arc::clone(&lock);
            move |b: &mut Backend| -> Result<(), SpinError> {
                lock.critical(b, |c| {
                    *c = c.wrapping_add(1);
                    if cs_work > 0 {
                        black_box(work(cs_work, *c));
                    }
                })?;
                if think > 0 {
                    black_box(work(think, 1));
                }
                Ok(())
            }
        })
    })
}

/// The runner for implementation `impl_name` under `settings`.
pub(crate) fn series(
    impl_name: &str,
    settings: &Settings,
) -> Result<RunFn<'static>, WorkloadError> {
    Ok(match impl_name {
        "pg" if settings.tas_spin => runner::<SpinLock<u64, PgSpinLock<true>>>(settings),
        "pg" => runner::<SpinLock<u64, PgSpinLock<false>>>(settings),
        "tas" => runner::<SpinLock<u64, NaiveTasLock>>(settings),
        "ticket" => runner::<SpinLock<u64, TicketLock>>(settings),
        "mcs" => runner::<SpinLock<u64, McsLock>>(settings),
        "floor" => runner::<SpinLock<u64, FloorLock>>(settings),
        "parking_lot" => runner::<parking_lot::Mutex<u64>>(settings),
        "std" => runner::<std::sync::Mutex<u64>>(settings),
        _ => return Err(crate::unknown_impl("spin", impl_name, IMPLS)),
    })
}
