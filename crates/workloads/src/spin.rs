//! The `spin` micro workload: one spinlock acquisition, a counter update under it, release.
//!
//! This is PostgreSQL's pattern for a spinlock — a few fields of a shared struct changed in a
//! handful of instructions (`insertpos_lck`, `info_lck`, the buffer header lock) — run as fast as
//! the threads can. `--set cs_work=N` lengthens the critical section and `--set think=N` adds
//! work between acquisitions, both as dependent arithmetic that touches no memory;
//! `--set cs_lines=N` has the critical section read and write N lines of shared data besides
//! the counter, each a line of its own, as the lock benchmark of David, Guerraoui and
//! Trigonakis (SOSP 2013) does with one: what the next holder then fetches from the last.

use crate::preset::Settings;
use crate::{proc_table, work, Impl, Model, RunResult};
use pglocks_harness::{run_team, TeamSpec};
use pglocks_proc::Backend;
use pglocks_spin::{
    FloorLock, McsLock, NaiveTasLock, RawSpinLock, SpinError, SpinLock, TicketLock,
};
use pglocks_sync::data::DataU64;
use pglocks_sync::CachePadded;
use std::hint::black_box;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Implementations of the `spin` workload: PostgreSQL's s_lock, then the peers, each run by
/// [`run`] on its lock type.
pub const IMPLS: &[Impl] = &[
    Impl::pg("PostgreSQL's s_lock (TAS, then TAS_SPIN + pause + adaptive sleeps), per preset"),
    Impl::new(
        "tas",
        "naive test-and-set loop with pause, no read-first, no sleeping",
        run::<SpinLock<u64, NaiveTasLock>>,
    ),
    Impl::new(
        "ticket",
        "ticket lock (FIFO, all waiters on one word)",
        run::<SpinLock<u64, TicketLock>>,
    ),
    Impl::new(
        "mcs",
        "MCS queue lock, K42 variant (FIFO, each waiter on its own flag)",
        run::<SpinLock<u64, McsLock>>,
    ),
    Impl::new(
        "floor",
        "bare exchange to lock, store to unlock: the physical floor",
        run::<SpinLock<u64, FloorLock>>,
    ),
    Impl::external(
        "parking_lot",
        "parking_lot::Mutex (spin briefly, then park)",
        run::<parking_lot::Mutex<u64>>,
    ),
    Impl::external(
        "std",
        "std::sync::Mutex (futex)",
        run::<std::sync::Mutex<u64>>,
    ),
];

/// A lock around the counter: what the workload needs of any implementation.
pub(crate) trait Guarded: Send + Sync + 'static {
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

/// One run: every backend bumps the counter under lock `L` as fast as it can.
pub(crate) fn run<L: Guarded>(_: Model, settings: &Settings, spec: &TeamSpec) -> RunResult {
    let (cs_work, think) = (settings.cs_work, settings.think);
    let procs = proc_table(settings, spec.threads);
    let lock = Arc::new(CachePadded::new(L::new()));
    // The data lines the critical section reads and writes (the lock orders them).
    let lines: Arc<Vec<CachePadded<DataU64>>> = Arc::new(
        (0..settings.cs_lines)
            .map(|_| CachePadded::new(DataU64::new(0)))
            .collect(),
    );
    // The lock and its counter, then the data, where a simulated machine's shared memory would
    // hold them.
    let _placed = pglocks_sync::shmem::Placed::one("spinlock and counter", &**lock);
    let _data = (!lines.is_empty())
        .then(|| pglocks_sync::shmem::Placed::slice("critical section's data", &lines[..]));
    run_team(spec, &procs, |_| {
        let (lock, lines) = (Arc::clone(&lock), Arc::clone(&lines));
        move |b: &mut Backend| -> Result<(), SpinError> {
            lock.critical(b, |c| {
                *c = c.wrapping_add(1);
                for line in lines.iter() {
                    line.store(line.load(Relaxed).wrapping_add(1), Relaxed);
                }
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
}
