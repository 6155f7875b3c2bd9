//! Uncontended cost, on one thread, of the heavyweight lock manager's common operations: a weak
//! relation lock taken and released through the fast path (9.2–17's 16 slots, 18's groups) and
//! through the main table (≤ 9.1), and a transaction's virtual-xid lock, lazy (9.2+) and eager
//! (≤ 9.1). The floor is one LWLock acquire/release pair, what the fast path pays for its
//! `fpInfoLock` twice (once to grant, once to release).
//!
//! Runs short by default; `PGLOCKS_BENCH_LONG=1` for criterion's defaults.

use criterion::{criterion_group, BenchmarkGroup, Criterion};
use pglocks_lmgr::{FastPathLayout, LockManager, LockManagerConfig, LockMode, LockOwner, LockTag};
use pglocks_lwlock::{AtomicLwLock, LwLockMode};
use pglocks_proc::ProcTable;
use std::hint::black_box;

mod common;
use common::config;

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn manager(layout: FastPathLayout) -> LockManager {
    LockManager::new(LockManagerConfig {
        fast_path: layout,
        ..LockManagerConfig::new(1)
    })
}

/// `LockAcquire` + `LockRelease` of `AccessShareLock` on one relation.
fn relation(group: &mut Group<'_>, name: &str, layout: FastPathLayout) {
    let procs = ProcTable::new(1);
    let mut b = procs.attach().expect("a free slot");
    let lm = manager(layout);
    let mut local = lm.connect(&mut b, 5).expect("connect");
    let tag = LockTag::relation(5, 16384);
    let timeouts = Default::default();
    let tx = LockOwner::Transaction;
    group.bench_function(name, |it| {
        it.iter(|| {
            lm.acquire(
                &mut b,
                &mut local,
                black_box(tag),
                LockMode::AccessShare,
                tx,
                &timeouts,
            )
            .expect("uncontended");
            lm.release(
                &mut b,
                &mut local,
                black_box(tag),
                LockMode::AccessShare,
                tx,
            )
            .expect("held");
        })
    });
}

/// `VirtualXactLockTableInsert` + `LockReleaseAll`: an empty transaction's lock work.
fn vxid(group: &mut Group<'_>, name: &str, layout: FastPathLayout) {
    let procs = ProcTable::new(1);
    let mut b = procs.attach().expect("a free slot");
    let lm = manager(layout);
    let mut local = lm.connect(&mut b, 5).expect("connect");
    group.bench_function(name, |it| {
        it.iter(|| {
            lm.start_transaction(&mut b, &mut local).expect("start");
            lm.release_all(&mut b, &mut local, false).expect("end");
        })
    });
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("lmgr-uncontended");
    relation(
        &mut group,
        "relation fast path (9.2-17)",
        FastPathLayout::Slots16,
    );
    relation(
        &mut group,
        "relation fast path (18, 4 groups)",
        FastPathLayout::Groups(4),
    );
    relation(
        &mut group,
        "relation main table (<=9.1)",
        FastPathLayout::None,
    );
    vxid(&mut group, "vxid lazy (9.2+)", FastPathLayout::Slots16);
    vxid(&mut group, "vxid eager (<=9.1)", FastPathLayout::None);

    let procs = ProcTable::new(1);
    let mut b = procs.attach().expect("a free slot");
    let lw: AtomicLwLock = AtomicLwLock::new("LockFastPath");
    group.bench_function("floor: one LWLock acquire+release", |it| {
        it.iter(|| {
            black_box(&lw)
                .acquire(&mut b, LwLockMode::Exclusive)
                .expect("free");
            black_box(&lw).release(&mut b).expect("held");
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = uncontended
}
common::bench_main!(benches);
