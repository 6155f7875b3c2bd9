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
use crate::{proc_table, work, Impl, Model, RunResult};
use pglocks_harness::{run_team, TeamSpec};
use pglocks_lwlock::{
    AtomicLwLock, HandoffLwLock, LockedBit, LwLockError, LwLockMode, MutexWaitListLwLock,
    NoPadding, Pad128, Pad32, Pad64, Padding, ParkingLotLwLock, Pg18Layout, Pg96Layout, RawLwLock,
    ReadFirst, SpinlockProtectedLwLock,
};
use pglocks_proc::Backend;
use pglocks_spin::PgSpinLock;
use pglocks_sync::atomic::{AtomicU32, Ordering};
use pglocks_sync::CachePadded;
use rand::RngExt;
use std::hint::black_box;
use std::sync::Arc;

/// Implementations of the LWLock workloads: PostgreSQL's LWLock of the preset, then the peers,
/// each run by [`run`] on its lock type.
pub const IMPLS: &[Impl] = &[
    Impl::pg("PostgreSQL's LWLock of the preset"),
    Impl::external("parking_lot", "parking_lot::RwLock", run::<parking_lot::RwLock<()>>),
    Impl::external(
        "parking_lot-lwlock",
        "parking_lot's RawRwLock behind the LWLock trait (with the held-locks array)",
        run::<Lw<ParkingLotLwLock>>,
    ),
    Impl::new(
        "read-first",
        "a prototype: 9.6's LWLock whose attempt only reads a taken lock, without PostgreSQL's compare-and-swap of the unchanged word",
        run::<Lw<AtomicLwLock<Pg96Layout, LockedBit, ReadFirst>>>,
    ),
    Impl::new(
        "handoff",
        "HandoffLwLock: a release hands the lock to the queue head in FIFO order (the design lwlock.c rejects)",
        run::<Lw<HandoffLwLock>>,
    ),
    Impl::external("std", "std::sync::RwLock", run::<std::sync::RwLock<()>>),
    Impl::new(
        "floor",
        "two bare read-modify-writes (fetch_add, fetch_sub): the physical floor",
        run::<Floor>,
    ),
];

/// Implementations of `buffer-lookup`.
pub const BUFFER_IMPLS: &[Impl] = &[
    Impl::pg(
        "PostgreSQL's buffer manager of the preset: lookup under the BufferMapping partition lock, pin, unpin; misses run the victim search and BufferAlloc",
    ),
    Impl::new(
        "pg-lwlock",
        "lock only: the shared BufferMapping partition lock of the page's tag (LWLocks of the preset), no table, no pin",
        |_, settings, spec| with_lwlock_type(settings, BufferOnLwLock(settings, spec)),
    ),
    Impl::external(
        "parking_lot",
        "lock only: an array of parking_lot::RwLock, same pages, partitioning and padding",
        buffer_run::<parking_lot::RwLock<()>>,
    ),
    Impl::external(
        "std",
        "lock only: an array of std::sync::RwLock, same pages, partitioning and padding",
        buffer_run::<std::sync::RwLock<()>>,
    ),
];

/// Which modes a workload asks for.
#[derive(Debug, Clone, Copy)]
pub enum Mix {
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

/// One run of an LWLock micro workload on lock model `M`: one lock, the model's mode mix.
fn run<M: RwModel>(model: Model, settings: &Settings, spec: &TeamSpec) -> RunResult {
    run_mix::<M>(model.mix(), settings, spec)
}

/// One run of an LWLock micro workload with mix `mix` on LWLock `K`.
pub(crate) fn run_on<K: RawLwLock>(mix: Mix, settings: &Settings, spec: &TeamSpec) -> RunResult {
    run_mix::<Lw<K>>(mix, settings, spec)
}

fn run_mix<M: RwModel>(mix: Mix, settings: &Settings, spec: &TeamSpec) -> RunResult {
    let procs = proc_table(settings, spec.threads);
    let lock = Arc::new(CachePadded::new(M::new("BenchLock")));
    let _placed = pglocks_sync::shmem::Placed::one("BenchLock", &**lock);
    run_team(spec, &procs, |_| {
        let (lock, settings) = (Arc::clone(&lock), settings.clone());
        #[inline(always)]
        move |b: &mut Backend| {
            let shared = match mix {
                Mix::Exclusive => false,
                Mix::Shared => true,
                Mix::Mixed => b.rng.random::<f64>() < settings.read_ratio,
            };
            operation(&**lock, b, shared, &settings)
        }
    })
}

/// `buffer-lookup`, lock only, on lock model `M`, with the partitions spaced as
/// `lwlock_padding` says.
fn buffer_run<M: RwModel>(_: Model, settings: &Settings, spec: &TeamSpec) -> RunResult {
    match settings.lwlock_padding {
        0 => buffer_run_padded::<M, NoPadding>(settings, spec),
        32 => buffer_run_padded::<M, Pad32>(settings, spec),
        64 => buffer_run_padded::<M, Pad64>(settings, spec),
        _ => buffer_run_padded::<M, Pad128>(settings, spec),
    }
}

/// `buffer-lookup`, lock only: what `BufTableLookup` costs in locking — the shared partition
/// lock of the page's tag hash (the same pages as the full model's), taken and released; no
/// table probe, no pin, no miss. The partitions are an array padded as `P` says, as
/// `MainLWLockArray` is.
fn buffer_run_padded<M: RwModel, P: Padding>(settings: &Settings, spec: &TeamSpec) -> RunResult {
    let procs = proc_table(settings, spec.threads);
    let locks: Arc<[P::Cell<M>]> = (0..settings.buffer_partitions)
        .map(|_| P::pad(M::new("BufferMapping")))
        .collect();
    run_team(spec, &procs, |_| {
        let (locks, settings) = (Arc::clone(&locks), settings.clone());
        #[inline(always)]
        move |b: &mut Backend| {
            let hashcode = crate::bufmgr::page(b, &settings).hash_code();
            let lock = &locks[hashcode as usize % locks.len()];
            operation(&**lock, b, true, &settings)
        }
    })
}

/// `buffer-lookup`, lock only, on the release's LWLock.
struct BufferOnLwLock<'a>(&'a Settings, &'a TeamSpec);

impl MakeWithLwLock for BufferOnLwLock<'_> {
    type Output = RunResult;
    fn make<K: RawLwLock>(self) -> RunResult {
        buffer_run::<Lw<K>>(Model::BufferLookup, self.0, self.1)
    }
}

/// Builds a runner on PostgreSQL's LWLock of some release, `K`: what a workload built on
/// LWLocks (the LWLock ones, the lock manager, …) implements so that one `match` on the preset
/// picks the type for all of them.
pub(crate) trait MakeWithLwLock {
    /// What `make` builds (a run, or a stress part).
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
