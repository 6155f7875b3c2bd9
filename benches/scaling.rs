//! Throughput of one contended lock as the number of threads grows: every thread takes the same
//! lock, increments the counter under it and releases it, `iters` times per criterion iteration.
//!
//! Thread counts double from 1 up to twice the cpus of the placement (the last point is always
//! exactly twice), so the oversubscribed end shows what happens when a lock holder is preempted.
//! The FIFO locks (`ticket`, `mcs`) are capped at the cpu count: oversubscribed, each handover
//! waits for the next waiter in line to be scheduled, and a single point can take minutes.
//!
//! Placements, one criterion group each:
//! - `scaling/compact`: threads pinned in the harness's compact order (a node at a time,
//!   physical cores before SMT siblings);
//! - `scaling/node:N`: only node N's cpus, for each node, when the machine has more than one.
//!
//! The topology is read once, before any thread is pinned; if it cannot be read, threads are not
//! pinned and only `scaling/compact` runs. Workers live in a pool (`common::Pool`) built outside the
//! timed closure: they sleep on a condition variable between iterations, and the timed part is
//! only "start a generation, wait until every worker has done its `iters` operations".
//!
//! Runs short by default (10 samples, 200 ms warm-up, 1 s measurement per point); set
//! `PGLOCKS_BENCH_LONG=1` for criterion's defaults.

use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::{
    FloorLock, McsLock, NaiveTasLock, PgSpinLock, RawSpinLock, SpinLock, TicketLock,
};
use pglocks_sync::CachePadded;
use std::sync::Arc;

mod common;
use common::{config, placements, thread_counts, Pool};

/// A lock around a counter, as the benchmark needs it.
trait Contended: Send + Sync + 'static {
    fn new() -> Self;
    /// Lock, increment, unlock.
    fn increment(&self, backend: &mut Backend);
    /// The counter (taken under the lock).
    fn value(&self, backend: &mut Backend) -> u64;
}

impl<R: RawSpinLock + 'static> Contended for SpinLock<u64, R> {
    fn new() -> Self {
        SpinLock::new("scaling", 0)
    }
    #[inline(always)]
    fn increment(&self, backend: &mut Backend) {
        self.lock(backend)
            .expect("stuck spinlock in the scaling bench")
            .with_mut(|n| *n += 1);
    }
    fn value(&self, backend: &mut Backend) -> u64 {
        self.lock(backend).expect("stuck spinlock").with(|n| *n)
    }
}

impl Contended for parking_lot::Mutex<u64> {
    fn new() -> Self {
        parking_lot::Mutex::new(0)
    }
    #[inline(always)]
    fn increment(&self, _backend: &mut Backend) {
        *self.lock() += 1;
    }
    fn value(&self, _backend: &mut Backend) -> u64 {
        *self.lock()
    }
}

/// One implementation at every thread count of `counts` (capped at `cpus` if `fifo`).
fn sweep_impl<L: Contended>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    counts: &[usize],
    cpus: usize,
    pin_order: &[usize],
    fifo: bool,
) {
    let mut done_counts = Vec::new();
    for &requested in counts {
        let threads = if fifo { requested.min(cpus) } else { requested };
        if done_counts.contains(&threads) {
            continue;
        }
        done_counts.push(threads);

        let procs = ProcTable::new(threads);
        let shared_lock = Arc::new(CachePadded::new(L::new()));
        let mut pool = {
            let (procs, shared_lock) = (procs.clone(), Arc::clone(&shared_lock));
            Pool::new(threads, pin_order, move |_| {
                let mut me = procs.attach().expect("one backend slot per worker");
                let lock = Arc::clone(&shared_lock);
                move |iters: u64| {
                    for _ in 0..iters {
                        lock.increment(&mut me);
                    }
                }
            })
        };
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, _| {
            b.iter_custom(|iters| pool.run(iters))
        });
        let expected = pool.iters_run() * threads as u64;
        drop(pool);
        let mut me = procs.attach().expect("the workers have detached");
        assert_eq!(
            shared_lock.value(&mut me),
            expected,
            "{name} lost updates at {threads} threads"
        );
    }
}

/// Every implementation on one placement.
fn placement(c: &mut Criterion, group_name: &str, pin_order: &[usize], cpus: usize) {
    let counts = thread_counts(cpus);
    let mut group = c.benchmark_group(group_name);
    let g = &mut group;
    sweep_impl::<SpinLock<u64, PgSpinLock<true>>>(g, "pg", &counts, cpus, pin_order, false);
    sweep_impl::<SpinLock<u64, NaiveTasLock>>(g, "tas", &counts, cpus, pin_order, false);
    sweep_impl::<SpinLock<u64, TicketLock>>(g, "ticket", &counts, cpus, pin_order, true);
    sweep_impl::<SpinLock<u64, McsLock>>(g, "mcs", &counts, cpus, pin_order, true);
    sweep_impl::<SpinLock<u64, FloorLock>>(g, "floor", &counts, cpus, pin_order, false);
    sweep_impl::<parking_lot::Mutex<u64>>(g, "parking_lot", &counts, cpus, pin_order, false);
    group.finish();
}

fn scaling(c: &mut Criterion) {
    for p in placements("scaling") {
        placement(c, &format!("scaling/{}", p.name), &p.pin_order, p.cpus);
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = scaling
}
common::bench_main!(benches);
