//! The LWLock micro workloads: `lwlock-exclusive`, `lwlock-shared` and `lwlock-mixed` (shared
//! with probability `read_ratio`, else exclusive) — one acquire and one release of a single lock
//! per operation, the pattern of a hot individual LWLock such as ProcArrayLock — and
//! the lock-only peers of `buffer-lookup` (the shared acquisition of the `BufferMapping`
//! partition of a page's tag; the full buffer-manager model is in `bufmgr.rs`).
//!
//! `--set cs_work=N` adds work inside the critical section, `--set think=N` between operations;
//! `--set lwlock_padding=` spaces the partitions of `buffer-lookup`, `--set lwlock_stats=on`
//! counts LWLOCK_STATS acquisitions (its cost is the difference in throughput).

use crate::preset::{LwLockVariant, Settings};
use crate::{proc_table, work, WorkloadError};
use pglocks_harness::sweep::RunFn;
use pglocks_harness::{run_team, TeamSpec};
use pglocks_lwlock::{
    AtomicLwLock, HandoffLwLock, LockedBit, LwLockError, LwLockMode, MutexWaitListLwLock,
    NoPadding, Pad128, Pad32, Pad64, Padding, ParkingLotLwLock, Pg18Layout, Pg96Layout, RawLwLock,
    ReadFirst, SpinlockProtectedLwLock,
};
use pglocks_spin::PgSpinLock;
use pglocks_sync::atomic::{AtomicU32, Ordering};
use pglocks_sync::{Backend, CachePadded};
use rand::RngExt;
use std::hint::black_box;
use std::sync::Arc;

/// Implementations of the LWLock workloads.
pub const IMPLS: &[(&str, &str)] = &[
    ("pg", "PostgreSQL's LWLock of the preset"),
    ("parking_lot", "parking_lot::RwLock"),
    (
        "parking_lot-lwlock",
        "parking_lot's RawRwLock behind the LWLock trait (with the held-locks array)",
    ),
    (
        "read-first",
        "a prototype: 9.6's LWLock whose attempt only reads a taken lock, without PostgreSQL's compare-and-swap of the unchanged word",
    ),
    (
        "handoff",
        "HandoffLwLock: a release hands the lock to the queue head in FIFO order (the design lwlock.c rejects)",
    ),
    ("std", "std::sync::RwLock"),
    (
        "floor",
        "two bare read-modify-writes (fetch_add, fetch_sub): the physical floor",
    ),
];

/// Implementations of `buffer-lookup`.
pub const BUFFER_IMPLS: &[(&str, &str)] = &[
    (
        "pg",
        "PostgreSQL's buffer manager of the preset: lookup under the BufferMapping partition lock, pin, unpin; misses run the victim search and BufferAlloc",
    ),
    (
        "pg-lwlock",
        "lock only: the shared BufferMapping partition lock of the page's tag (LWLocks of the preset), no table, no pin",
    ),
    (
        "parking_lot",
        "lock only: an array of parking_lot::RwLock, same pages, partitioning and padding",
    ),
    (
        "std",
        "lock only: an array of std::sync::RwLock, same pages, partitioning and padding",
    ),
];

/// Which modes a workload asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mix {
    Exclusive,
    Shared,
    Mixed,
}

/// A reader-writer lock, as the workloads need it: take it in one mode, run `f`, release.
trait RwModel: Send + Sync + 'static {
    fn new(name: &'static str) -> Self;
    fn locked(&self, b: &mut Backend, shared: bool, f: impl FnOnce()) -> Result<(), LwLockError>;
}

/// Any [`RawLwLock`]: PostgreSQL's of some release, or a prototype.
struct Lw<K>(K);

impl<K: RawLwLock> RwModel for Lw<K> {
    fn new(name: &'static str) -> Self {
        Lw(K::new(name))
    }
    #[inline(always)]
    fn locked(&self, b: &mut Backend, shared: bool, f: impl FnOnce()) -> Result<(), LwLockError> {
        let mode = if shared {
            LwLockMode::Shared
        } else {
            LwLockMode::Exclusive
        };
        self.0.acquire(b, mode)?;
        f();
        self.0.release(b)
    }
}

impl RwModel for parking_lot::RwLock<()> {
    fn new(_: &'static str) -> Self {
        parking_lot::RwLock::new(())
    }
    #[inline(always)]
    fn locked(&self, _b: &mut Backend, shared: bool, f: impl FnOnce()) -> Result<(), LwLockError> {
        if shared {
            let _g = self.read();
            f();
        } else {
            let _g = self.write();
            f();
        }
        Ok(())
    }
}

impl RwModel for std::sync::RwLock<()> {
    fn new(_: &'static str) -> Self {
        std::sync::RwLock::new(())
    }
    #[inline(always)]
    fn locked(&self, _b: &mut Backend, shared: bool, f: impl FnOnce()) -> Result<(), LwLockError> {
        if shared {
            let _g = self.read().unwrap_or_else(|e| e.into_inner());
            f();
        } else {
            let _g = self.write().unwrap_or_else(|e| e.into_inner());
            f();
        }
        Ok(())
    }
}

/// The floor: what any lock must at least do, one atomic read-modify-write to enter and one to
/// leave. Not a lock.
struct Floor(AtomicU32);

impl RwModel for Floor {
    fn new(_: &'static str) -> Self {
        Floor(AtomicU32::new(0))
    }
    #[inline(always)]
    fn locked(&self, _b: &mut Backend, _shared: bool, f: impl FnOnce()) -> Result<(), LwLockError> {
        self.0.fetch_add(1, Ordering::Acquire);
        f();
        self.0.fetch_sub(1, Ordering::Release);
        Ok(())
    }
}

/// One operation: the lock taken in the mode `shared` says, `cs_work` inside, `think` after.
#[inline(always)]
fn operation<M: RwModel>(
    lock: &M,
    b: &mut Backend,
    shared: bool,
    settings: &Settings,
) -> Result<(), LwLockError> {
    let cs_work = settings.cs_work;
    lock.locked(b, shared, || {
        if cs_work > 0 {
            black_box(work(cs_work, 1));
        }
    })?;
    if settings.think > 0 {
        black_box(work(settings.think, 2));
    }
    Ok(())
}

fn runner<M: RwModel>(mix: Mix, settings: &Settings) -> RunFn<'static> {
    let settings = settings.clone();
    Box::new(move |spec: &TeamSpec| {
        let procs = proc_table(&settings, spec.threads);
        let lock = Arc::new(CachePadded::new(M::new("BenchLock")));
        run_team(spec, &procs, |_| {
            let (lock, settings) = (Arc::clone(&lock), settings.clone());
            move |b: &mut Backend| {
                let shared = match mix {
                    Mix::Exclusive => false,
                    Mix::Shared => true,
                    Mix::Mixed => b.rng.random::<f64>() < settings.read_ratio,
                };
                operation(&**lock, b, shared, &settings)
            }
        })
    })
}

/// `buffer-lookup`, lock only: what `BufTableLookup` costs in locking — the shared partition
/// lock of the page's tag hash (the same pages as the full model's), taken and released; no
/// table probe, no pin, no miss. The partitions are an array padded as `P` says, as
/// `MainLWLockArray` is.
fn buffer_runner<M: RwModel, P: Padding>(settings: &Settings) -> RunFn<'static> {
    let settings = settings.clone();
    Box::new(move |spec: &TeamSpec| {
        let procs = proc_table(&settings, spec.threads);
        let locks: Arc<[P::Cell<M>]> = (0..settings.buffer_partitions)
            .map(|_| P::pad(M::new("BufferMapping")))
            .collect();
        run_team(spec, &procs, |_| {
            let (locks, settings) = (Arc::clone(&locks), settings.clone());
            move |b: &mut Backend| {
                let hashcode = crate::bufmgr::page(b, &settings).hash_code();
                let lock = &locks[hashcode as usize % locks.len()];
                operation(&**lock, b, true, &settings)
            }
        })
    })
}

/// Builds a runner for some lock model `M`.
trait MakeRunner {
    fn make<M: RwModel>(self) -> RunFn<'static>;
}

/// Builds a runner on PostgreSQL's LWLock of some release, `K`: what a workload built on
/// LWLocks (the LWLock ones, the lock manager, …) implements so that one `match` on the preset
/// picks the type for all of them.
pub(crate) trait MakeWithLwLock {
    /// What `make` builds (a runner, or a stress part).
    type Output;
    fn make<K: RawLwLock>(self) -> Self::Output;
}

/// What `make` builds for the preset's LWLock implementation.
pub(crate) fn with_lwlock_type<M: MakeWithLwLock>(settings: &Settings, make: M) -> M::Output {
    match (settings.lwlock, settings.tas_spin) {
        (LwLockVariant::Atomic, _) => make.make::<AtomicLwLock<Pg96Layout>>(),
        (LwLockVariant::Atomic18, _) => make.make::<AtomicLwLock<Pg18Layout>>(),
        (LwLockVariant::AtomicWithMutex, _) => make.make::<MutexWaitListLwLock>(),
        (LwLockVariant::SpinlockProtected, true) => {
            make.make::<SpinlockProtectedLwLock<PgSpinLock<true>>>()
        }
        (LwLockVariant::SpinlockProtected, false) => {
            make.make::<SpinlockProtectedLwLock<PgSpinLock<false>>>()
        }
    }
}

/// A lock-model runner maker, given PostgreSQL's LWLock as the model.
struct AsLwLock<R>(R);

impl<R: MakeRunner> MakeWithLwLock for AsLwLock<R> {
    type Output = RunFn<'static>;
    fn make<K: RawLwLock>(self) -> RunFn<'static> {
        self.0.make::<Lw<K>>()
    }
}

/// The runner of `make` for the preset's LWLock implementation.
fn with_pg_lwlock(settings: &Settings, make: impl MakeRunner) -> RunFn<'static> {
    with_lwlock_type(settings, AsLwLock(make))
}

struct Buffer<'a>(&'a Settings);

impl MakeRunner for Buffer<'_> {
    fn make<M: RwModel>(self) -> RunFn<'static> {
        match self.0.lwlock_padding {
            0 => buffer_runner::<M, NoPadding>(self.0),
            32 => buffer_runner::<M, Pad32>(self.0),
            64 => buffer_runner::<M, Pad64>(self.0),
            _ => buffer_runner::<M, Pad128>(self.0),
        }
    }
}

struct Single<'a>(Mix, &'a Settings);

impl MakeRunner for Single<'_> {
    fn make<M: RwModel>(self) -> RunFn<'static> {
        runner::<M>(self.0, self.1)
    }
}

/// The `buffer-lookup` runner for `impl_name` under `settings`.
pub(crate) fn buffer_series(
    impl_name: &str,
    settings: &Settings,
) -> Result<RunFn<'static>, WorkloadError> {
    let make = Buffer(settings);
    Ok(match impl_name {
        "pg" => crate::on_pg_lwlock(settings, crate::bufmgr::BufferLookup),
        "pg-lwlock" => with_pg_lwlock(settings, make),
        "parking_lot" => make.make::<parking_lot::RwLock<()>>(),
        "std" => make.make::<std::sync::RwLock<()>>(),
        _ => {
            return Err(crate::unknown_impl(
                "buffer-lookup",
                impl_name,
                BUFFER_IMPLS,
            ))
        }
    })
}

/// The runner for `impl_name` under `settings`.
pub(crate) fn series(
    workload: &str,
    mix: Mix,
    impl_name: &str,
    settings: &Settings,
) -> Result<RunFn<'static>, WorkloadError> {
    let make = Single(mix, settings);
    Ok(match impl_name {
        "pg" => with_pg_lwlock(settings, make),
        "parking_lot" => make.make::<parking_lot::RwLock<()>>(),
        "parking_lot-lwlock" => make.make::<Lw<ParkingLotLwLock>>(),
        "read-first" => make.make::<Lw<AtomicLwLock<Pg96Layout, LockedBit, ReadFirst>>>(),
        "handoff" => make.make::<Lw<HandoffLwLock>>(),
        "std" => make.make::<std::sync::RwLock<()>>(),
        "floor" => make.make::<Floor>(),
        _ => return Err(crate::unknown_impl(workload, impl_name, IMPLS)),
    })
}
