//! The LWLock micro workloads: `lwlock-exclusive`, `lwlock-shared` and `lwlock-mixed` (shared
//! with probability `read_ratio`, else exclusive) — one acquire and one release of a single lock
//! per operation, the pattern of a hot individual LWLock such as ProcArrayLock.

use crate::preset::{LwLockVariant, Settings};
use crate::WorkloadError;
use pglocks_harness::sweep::RunFn;
use pglocks_harness::{run_team, TeamSpec};
use pglocks_lwlock::{
    AtomicLwLock, LwLockError, LwLockMode, MutexWaitListLwLock, Pg18Layout, Pg96Layout, RawLwLock,
    SpinlockProtectedLwLock,
};
use pglocks_spin::PgSpinLock;
use pglocks_sync::atomic::{AtomicU32, Ordering};
use pglocks_sync::{Backend, CachePadded, ProcTable};
use rand::RngExt;
use std::sync::Arc;

/// Implementations of the LWLock workloads.
pub const IMPLS: &[(&str, &str)] = &[
    (
        "pg",
        "PostgreSQL's LWLock of the preset (9.6+ atomic state word so far)",
    ),
    ("parking_lot", "parking_lot::RwLock"),
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
        "PostgreSQL's BufferMapping tranche: LWLocks of the preset, hashcode % partitions",
    ),
    (
        "parking_lot",
        "an array of parking_lot::RwLock, same partitioning",
    ),
    ("std", "an array of std::sync::RwLock, same partitioning"),
];

/// Which modes a workload asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mix {
    Exclusive,
    Shared,
    Mixed,
}

/// A reader-writer lock, as the workload needs it.
trait RwModel: Send + Sync + 'static {
    fn new() -> Self;
    fn lock_unlock(&self, b: &mut Backend, shared: bool) -> Result<(), LwLockError>;
}

/// PostgreSQL's LWLock of some release.
struct Pg<K>(K);

impl<K: RawLwLock> RwModel for Pg<K> {
    fn new() -> Self {
        Pg(K::new("lwlock"))
    }
    #[inline(always)]
    fn lock_unlock(&self, b: &mut Backend, shared: bool) -> Result<(), LwLockError> {
        let mode = if shared {
            LwLockMode::Shared
        } else {
            LwLockMode::Exclusive
        };
        self.0.acquire(b, mode)?;
        self.0.release(b)
    }
}

impl RwModel for parking_lot::RwLock<()> {
    fn new() -> Self {
        parking_lot::RwLock::new(())
    }
    #[inline(always)]
    fn lock_unlock(&self, _b: &mut Backend, shared: bool) -> Result<(), LwLockError> {
        if shared {
            drop(self.read());
        } else {
            drop(self.write());
        }
        Ok(())
    }
}

impl RwModel for std::sync::RwLock<()> {
    fn new() -> Self {
        std::sync::RwLock::new(())
    }
    #[inline(always)]
    fn lock_unlock(&self, _b: &mut Backend, shared: bool) -> Result<(), LwLockError> {
        if shared {
            drop(self.read().unwrap_or_else(|e| e.into_inner()));
        } else {
            drop(self.write().unwrap_or_else(|e| e.into_inner()));
        }
        Ok(())
    }
}

/// The floor: what any lock must at least do, one atomic read-modify-write to enter and one to
/// leave. Not a lock.
struct Floor(AtomicU32);

impl RwModel for Floor {
    fn new() -> Self {
        Floor(AtomicU32::new(0))
    }
    #[inline(always)]
    fn lock_unlock(&self, _b: &mut Backend, _shared: bool) -> Result<(), LwLockError> {
        self.0.fetch_add(1, Ordering::Acquire);
        self.0.fetch_sub(1, Ordering::Release);
        Ok(())
    }
}

fn runner<M: RwModel>(mix: Mix, read_ratio: f64) -> RunFn<'static> {
    Box::new(move |spec: &TeamSpec| {
        let procs = ProcTable::new(spec.threads);
        let lock = Arc::new(CachePadded::new(M::new()));
        run_team(spec, &procs, |_| {
            let lock = Arc::clone(&lock);
            move |b: &mut Backend| {
                let shared = match mix {
                    Mix::Exclusive => false,
                    Mix::Shared => true,
                    Mix::Mixed => b.rng.random::<f64>() < read_ratio,
                };
                lock.lock_unlock(b, shared)
            }
        })
    })
}

/// `buffer-lookup`: what `BufTableLookup` costs in locking — the shared partition lock of a
/// random buffer tag's hash, taken and released (the hash-table probe itself is not modelled).
fn buffer_runner<M: RwModel>(partitions: usize) -> RunFn<'static> {
    Box::new(move |spec: &TeamSpec| {
        let procs = ProcTable::new(spec.threads);
        let locks: Arc<[CachePadded<M>]> = (0..partitions)
            .map(|_| CachePadded::new(M::new()))
            .collect();
        run_team(spec, &procs, |_| {
            let locks = Arc::clone(&locks);
            move |b: &mut Backend| {
                let hashcode: u32 = b.rng.random();
                locks[hashcode as usize % locks.len()].lock_unlock(b, true)
            }
        })
    })
}

/// Builds a runner for some lock model `M`: lets one `match` on the preset pick PostgreSQL's
/// LWLock type for every LWLock workload.
trait MakeRunner {
    fn make<M: RwModel>(self) -> RunFn<'static>;
}

/// The runner of `make` for the preset's LWLock implementation.
fn with_pg_lwlock(settings: &Settings, make: impl MakeRunner) -> RunFn<'static> {
    match (settings.lwlock, settings.tas_spin) {
        (LwLockVariant::Atomic, _) => make.make::<Pg<AtomicLwLock<Pg96Layout>>>(),
        (LwLockVariant::Atomic18, _) => make.make::<Pg<AtomicLwLock<Pg18Layout>>>(),
        (LwLockVariant::AtomicWithMutex, _) => make.make::<Pg<MutexWaitListLwLock>>(),
        (LwLockVariant::SpinlockProtected, true) => {
            make.make::<Pg<SpinlockProtectedLwLock<PgSpinLock<true>>>>()
        }
        (LwLockVariant::SpinlockProtected, false) => {
            make.make::<Pg<SpinlockProtectedLwLock<PgSpinLock<false>>>>()
        }
    }
}

struct Buffer(usize);

impl MakeRunner for Buffer {
    fn make<M: RwModel>(self) -> RunFn<'static> {
        buffer_runner::<M>(self.0)
    }
}

struct Single(Mix, f64);

impl MakeRunner for Single {
    fn make<M: RwModel>(self) -> RunFn<'static> {
        runner::<M>(self.0, self.1)
    }
}

/// The `buffer-lookup` runner for `impl_name` under `settings`.
pub(crate) fn buffer_series(
    impl_name: &str,
    settings: &Settings,
) -> Result<RunFn<'static>, WorkloadError> {
    let n = settings.buffer_partitions;
    Ok(match impl_name {
        "pg" => with_pg_lwlock(settings, Buffer(n)),
        "parking_lot" => buffer_runner::<parking_lot::RwLock<()>>(n),
        "std" => buffer_runner::<std::sync::RwLock<()>>(n),
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
    let r = settings.read_ratio;
    Ok(match impl_name {
        "pg" => with_pg_lwlock(settings, Single(mix, r)),
        "parking_lot" => runner::<parking_lot::RwLock<()>>(mix, r),
        "std" => runner::<std::sync::RwLock<()>>(mix, r),
        "floor" => runner::<Floor>(mix, r),
        _ => return Err(crate::unknown_impl(workload, impl_name, IMPLS)),
    })
}
