//! LWLock acquire + release, on one thread and with threads sharing one lock, for every LWLock of
//! `pglocks-lwlock` and for the reader-writer locks a Rust programmer would otherwise reach for.
//!
//! Implementations, the last part of every function id:
//! - `pg96`: `AtomicLwLock<Pg96Layout>`, the state word of 9.6–17 (wait list under its `LOCKED`
//!   bit); `pg18`: the same algorithm with 18's layout of the word (`AtomicLwLock<Pg18Layout>`);
//! - `read-first`: 9.6's lock whose attempt returns at once on a taken word instead of
//!   compare-and-swapping it unchanged (a prototype, the `--impl read-first` of the LWLock
//!   workloads); uncontended it differs from `pg96` only in computing the new word after the
//!   branch on "free" rather than without a branch before the swap;
//! - `pg95`: `MutexWaitListLwLock`, 9.5's state word with the wait list under a spinlock beside it;
//! - `pg94`: `SpinlockProtectedLwLock`, up to 9.4: the whole lock is fields under a spinlock;
//! - `handoff`: `HandoffLwLock`, the FIFO hand-off idea (same fast path, release hands over);
//! - `parking_lot` and `std`: `parking_lot::RwLock<()>` and `std::sync::RwLock<()>`;
//!   `parking_lot-lwlock`: parking_lot's lock behind `RawLwLock`, paying the same `held_lwlocks[]`
//!   bookkeeping as PostgreSQL's (the like-for-like comparison);
//! - `floor`: two bare read-modify-writes on one `AtomicU32` (`fetch_add` Acquire, then
//!   `fetch_sub` Release), the least that a lock counting its holders pays per acquire + release.
//!
//! `lwlock_uncontended` (ids `MODE/IMPL`, e.g. `exclusive/pg96`, `shared/pg94`): one thread takes
//! and releases a lock nobody else wants. For 9.5+ that is `LWLockAcquire`'s fast path (one
//! compare-and-swap on the state word, plus the `held_lwlocks[]` entry) and `LWLockRelease` (one
//! atomic subtract and a look at the flags), so the distance to `floor` is the bookkeeping and the
//! distance to `parking_lot` is what modelling PostgreSQL costs against a tuned Rust lock. `pg94`
//! pays a spinlock round trip (`TAS`, update the fields, release store) on both sides instead.
//!
//! `lwlock_scaling` (ids `MODE/IMPL/THREADS`): THREADS threads take and release one shared lock in
//! a loop, THREADS doubling from 1 up to twice the cpus (the last point oversubscribes the machine
//! on purpose: a preempted holder, or a preempted spinlock holder, stalls everyone). The shared
//! mode shows 9.5's rewrite (commit ab5194e6f6): up to 9.4 every shared acquisition and release
//! serialises on the lock's spinlock, from 9.5 each is one atomic on the state word, so readers
//! contend only for the cache line. The exclusive mode shows the handover, with sleeping waiters.
//!
//! Scaling is timed with `iter_custom` and a `common::Pool` of workers pinned in the harness's
//! compact order, built once per benchmark function with one `ProcTable` of THREADS slots (each
//! worker attaches its `Backend` on its own thread). For `iters` iterations the workers *together*
//! do `iters` acquire + release pairs (`iters / THREADS` each, the remainder spread one by one),
//! started at once and timed until the last one finishes: the reported time is wall time per
//! acquire + release of the whole team (1 thread reads as the uncontended cost, perfect scaling as
//! time falling as 1/THREADS), and the throughput is the team's operations per second.
//!
//! Runs short by default (10 samples, 200 ms warm-up, 1 s measurement per function); set
//! `PGLOCKS_BENCH_LONG=1` for criterion's defaults.

use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use pglocks_lwlock::{
    AtomicLwLock, HandoffLwLock, LockedBit, LwLockMode, MutexWaitListLwLock, ParkingLotLwLock,
    Pg18Layout, Pg96Layout, RawLwLock, ReadFirst, SpinlockProtectedLwLock,
};
use pglocks_proc::{Backend, ProcTable};
use pglocks_sync::atomic::{AtomicU32, Ordering};
use pglocks_sync::CachePadded;
use std::hint::black_box;
use std::sync::Arc;

mod common;
use common::{config, placements, thread_counts, Placement, Pool};

/// The two modes both groups measure.
const MODES: [LwLockMode; 2] = [LwLockMode::Exclusive, LwLockMode::Shared];

/// A shared/exclusive lock as the benches take it: acquire in a mode, release at once.
trait SharedExclusive: Send + Sync + 'static {
    fn new() -> Self;
    /// Acquire in `mode` (exclusive or shared), then release.
    fn acquire_release(&self, backend: &mut Backend, mode: LwLockMode);
}

/// Any of PostgreSQL's LWLocks, through the one trait they all implement.
struct Pg<R>(R);

impl<R: RawLwLock> SharedExclusive for Pg<R> {
    fn new() -> Self {
        Pg(R::new("bench"))
    }
    #[inline(always)]
    fn acquire_release(&self, backend: &mut Backend, mode: LwLockMode) {
        self.0
            .acquire(backend, mode)
            .expect("LWLockAcquire failed in the bench");
        self.0
            .release(backend)
            .expect("LWLockRelease failed in the bench");
    }
}

impl SharedExclusive for parking_lot::RwLock<()> {
    fn new() -> Self {
        parking_lot::RwLock::new(())
    }
    #[inline(always)]
    fn acquire_release(&self, _backend: &mut Backend, mode: LwLockMode) {
        match mode {
            LwLockMode::Exclusive => drop(self.write()),
            _ => drop(self.read()),
        }
    }
}

impl SharedExclusive for std::sync::RwLock<()> {
    fn new() -> Self {
        std::sync::RwLock::new(())
    }
    #[inline(always)]
    fn acquire_release(&self, _backend: &mut Backend, mode: LwLockMode) {
        match mode {
            LwLockMode::Exclusive => drop(self.write().expect("poisoned RwLock")),
            _ => drop(self.read().expect("poisoned RwLock")),
        }
    }
}

/// Two bare read-modify-writes, the same in both modes (not a lock: nothing is excluded).
struct Floor(AtomicU32);

impl SharedExclusive for Floor {
    fn new() -> Self {
        Floor(AtomicU32::new(0))
    }
    #[inline(always)]
    fn acquire_release(&self, _backend: &mut Backend, _mode: LwLockMode) {
        self.0.fetch_add(1, Ordering::Acquire);
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// A benchmark run once per implementation.
trait PerImpl {
    fn bench<L: SharedExclusive>(&mut self, name: &str);
}

/// Runs `f` for every implementation, under the name that ends its function ids.
fn for_each_impl(f: &mut impl PerImpl) {
    f.bench::<Pg<AtomicLwLock<Pg96Layout>>>("pg96");
    f.bench::<Pg<AtomicLwLock<Pg18Layout>>>("pg18");
    f.bench::<Pg<AtomicLwLock<Pg96Layout, LockedBit, ReadFirst>>>("read-first");
    f.bench::<Pg<MutexWaitListLwLock>>("pg95");
    f.bench::<Pg<SpinlockProtectedLwLock>>("pg94");
    f.bench::<Pg<HandoffLwLock>>("handoff");
    f.bench::<parking_lot::RwLock<()>>("parking_lot");
    f.bench::<Pg<ParkingLotLwLock>>("parking_lot-lwlock");
    f.bench::<std::sync::RwLock<()>>("std");
    f.bench::<Floor>("floor");
}

/// `lwlock_uncontended`: acquire + release in `mode` on this thread, one lock per function.
struct Uncontended<'g, 'c> {
    group: &'g mut BenchmarkGroup<'c, WallTime>,
    mode: LwLockMode,
}

impl PerImpl for Uncontended<'_, '_> {
    fn bench<L: SharedExclusive>(&mut self, name: &str) {
        let procs = ProcTable::new(1);
        let mut me = procs.attach().expect("a one-slot table has a free slot");
        let lock = CachePadded::new(L::new());
        let mode = self.mode;
        self.group
            .bench_function(format!("{}/{name}", mode.name()), |b| {
                b.iter(|| black_box(&*lock).acquire_release(&mut me, mode))
            });
    }
}

/// `lwlock_scaling`: every thread count of `counts`, the threads sharing one lock per function.
struct Scaling<'g, 'c> {
    group: &'g mut BenchmarkGroup<'c, WallTime>,
    mode: LwLockMode,
    counts: &'g [usize],
    pin_order: &'g [usize],
}

/// Worker `worker`'s part of `iters` operations split over `threads` workers.
fn share(iters: u64, threads: usize, worker: usize) -> u64 {
    let threads = threads as u64;
    iters / threads + u64::from((worker as u64) < iters % threads)
}

impl PerImpl for Scaling<'_, '_> {
    fn bench<L: SharedExclusive>(&mut self, name: &str) {
        let mode = self.mode;
        for &threads in self.counts {
            let procs = ProcTable::new(threads);
            let shared_lock = Arc::new(CachePadded::new(L::new()));
            let mut pool = Pool::new(threads, self.pin_order, move |worker| {
                let mut me = procs.attach().expect("one backend slot per worker");
                let lock = Arc::clone(&shared_lock);
                move |iters: u64| {
                    for _ in 0..share(iters, threads, worker) {
                        lock.acquire_release(&mut me, mode);
                    }
                }
            });
            // One criterion iteration is one operation of the team, whatever the thread count.
            self.group.throughput(Throughput::Elements(1));
            let id = BenchmarkId::new(format!("{}/{name}", mode.name()), threads);
            self.group
                .bench_with_input(id, &threads, |b, _| b.iter_custom(|iters| pool.run(iters)));
        }
    }
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("lwlock_uncontended");
    for mode in MODES {
        for_each_impl(&mut Uncontended {
            group: &mut group,
            mode,
        });
    }
    group.finish();
}

fn scaling(c: &mut Criterion) {
    // The compact placement: every cpu, read before any worker pins itself.
    let Placement {
        pin_order, cpus, ..
    } = placements("lwlock").swap_remove(0);
    let counts = thread_counts(cpus);
    let mut group = c.benchmark_group("lwlock_scaling");
    for mode in MODES {
        for_each_impl(&mut Scaling {
            group: &mut group,
            mode,
            counts: &counts,
            pin_order: &pin_order,
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = uncontended, scaling
}
common::bench_main!(benches);
