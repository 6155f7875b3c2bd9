//! Uncontended cost of one lock + increment + unlock, on one thread, for every spinlock in
//! `pglocks-spin` and for the two mutexes a Rust programmer would otherwise reach for.
//!
//! This is the price of a spinlock when nobody else wants it: PostgreSQL's `S_LOCK` fast path
//! (one `TAS`) and `S_UNLOCK` (one release store), plus `SpinLock`'s acquisition counter. The
//! `floor` entry is the bare exchange/store pair that every lock must pay.
//!
//! `shim` (ids `OP/shim`, `OP/std`): one atomic operation on the sync shim's `AtomicU64`, which
//! every lock here is built on, next to the same operation on std's. On a real thread the shim
//! adds only its check of whether a simulation runs (a load of a word nobody writes and a branch
//! never taken); the two should be within criterion's noise of each other.
//!
//! Runs short by default (10 samples, 200 ms warm-up, 1 s measurement per function); set
//! `PGLOCKS_BENCH_LONG=1` for criterion's defaults.

use criterion::{criterion_group, BenchmarkGroup, Criterion};
use pglocks_proc::ProcTable;
use pglocks_spin::{
    FloorLock, McsLock, NaiveTasLock, PgSpinLock, RawSpinLock, SpinLock, TicketLock,
};
use std::hint::black_box;

mod common;
use common::config;

/// `SpinLock<u64, R>::lock` with this thread's backend, increment under the guard, release.
fn spin<R: RawSpinLock>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
) {
    let procs = ProcTable::new(1);
    let mut me = procs.attach().expect("a one-slot table has a free slot");
    let lock: SpinLock<u64, R> = SpinLock::new("bench", 0);
    // Whether criterion ran this bench at all (a `cargo bench -- FILTER` may skip it).
    let mut measured = false;
    group.bench_function(name, |b| {
        measured = true;
        b.iter(|| {
            let lock = black_box(&lock);
            let mut guard = lock
                .lock(&mut me)
                .expect("an uncontended lock cannot get stuck");
            guard.with_mut(|n| *n += black_box(1));
        })
    });
    // A bench that ran took the lock: the closure measured the lock, not an empty loop.
    assert!(!measured || lock.lock(&mut me).unwrap().with(|n| *n) > 0);
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("uncontended");
    spin::<PgSpinLock<true>>(&mut group, "pg");
    spin::<PgSpinLock<false>>(&mut group, "pg_tas");
    spin::<NaiveTasLock>(&mut group, "tas");
    spin::<TicketLock>(&mut group, "ticket");
    spin::<McsLock>(&mut group, "mcs");
    spin::<FloorLock>(&mut group, "floor");

    let pl = parking_lot::Mutex::new(0u64);
    group.bench_function("parking_lot", |b| {
        b.iter(|| *black_box(&pl).lock() += black_box(1))
    });

    let std_mutex = std::sync::Mutex::new(0u64);
    group.bench_function("std", |b| {
        b.iter(|| *black_box(&std_mutex).lock().unwrap() += black_box(1))
    });
    group.finish();
}

/// One atomic operation on the shim's `AtomicU64` and on std's, side by side.
fn shim(c: &mut Criterion) {
    use pglocks_sync::atomic::AtomicU64 as ShimU64;
    use std::sync::atomic::{AtomicU64 as StdU64, Ordering::*};
    let mut group = c.benchmark_group("shim");
    let (shim, std) = (ShimU64::new(0), StdU64::new(0));
    group.bench_function("load/shim", |b| b.iter(|| black_box(&shim).load(Acquire)));
    group.bench_function("load/std", |b| b.iter(|| black_box(&std).load(Acquire)));
    group.bench_function("fetch_add/shim", |b| {
        b.iter(|| black_box(&shim).fetch_add(1, AcqRel))
    });
    group.bench_function("fetch_add/std", |b| {
        b.iter(|| black_box(&std).fetch_add(1, AcqRel))
    });
    group.bench_function("swap_store/shim", |b| {
        b.iter(|| {
            let s = black_box(&shim);
            s.swap(1, Acquire);
            s.store(0, Release)
        })
    });
    group.bench_function("swap_store/std", |b| {
        b.iter(|| {
            let s = black_box(&std);
            s.swap(1, Acquire);
            s.store(0, Release)
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = uncontended, shim
}
common::bench_main!(benches);
