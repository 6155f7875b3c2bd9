//! The lock-manager workloads. Every backend is connected to the same database and locks the
//! same relations, which before 9.2 all hash to the same few `LockManager` partitions: the
//! contention the fast path and lazy VXID locks removed.
//!
//! - `lmgr-relation`: one read-only transaction's relation locking, as a `SELECT` does it —
//!   `AccessShareLock` on each of `relations` relations (by default 2: a table and its index, as
//!   `pgbench -S`), then `LockReleaseAll` at commit.
//! - `lmgr-vxid`: a transaction's start and end with nothing else: the lock on its own virtual
//!   transaction id (`VirtualXactLockTableInsert`, then `LockReleaseAll`).
//! - `lmgr-strong-mix`: `lmgr-relation`, except that every `strong_every`-th transaction of each
//!   backend takes `AccessExclusiveLock` on one of the relations instead, as a DDL statement or
//!   `LOCK TABLE` would: it bumps the strong-lock counter, moves every backend's fast-path
//!   entries for it into the main table, and waits for their holders.

use crate::preset::Settings;
use crate::proc_table;
use crate::RunResult;
use pglocks_harness::{run_team, TeamSpec};
use pglocks_lmgr::{LocalLocks, LockManager, LockMode, LockOwner, LockTag, LockTimeouts};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;
use rand::RngExt;
use std::sync::Arc;

/// Implementations of the lock-manager workloads.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
    "PostgreSQL's lock manager of the preset (partitions, fast path, VXID locks, LWLocks)",
)];

/// The database every backend is connected to.
const DATABASE: u32 = 5;
/// The first relation oid (`FirstNormalObjectId` is 16384).
const FIRST_RELATION: u32 = 16384;

/// Which lock-manager workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Relation,
    Vxid,
    StrongMix,
}

/// One transaction of `kind`, the `n`-th of this backend.
fn transaction<K: RawLwLock>(
    lm: &LockManager<K>,
    b: &mut Backend,
    local: &mut LocalLocks,
    settings: &Settings,
    kind: Kind,
    n: u64,
) -> Result<(), pglocks_lmgr::LmgrError> {
    let timeouts = LockTimeouts::default();
    let tx = LockOwner::Transaction;
    let relation = |r: u32| LockTag::relation(DATABASE, FIRST_RELATION + r);
    match kind {
        Kind::Vxid => {
            lm.start_transaction(b, local)?;
        }
        Kind::StrongMix if n % u64::from(settings.strong_every) == 0 => {
            let r = b.rng.random_range(0..settings.relations);
            lm.acquire(
                b,
                local,
                relation(r),
                LockMode::AccessExclusive,
                tx,
                &timeouts,
            )?;
        }
        Kind::Relation | Kind::StrongMix => {
            for r in 0..settings.relations {
                lm.acquire(b, local, relation(r), LockMode::AccessShare, tx, &timeouts)?;
            }
        }
    }
    lm.release_all(b, local, false).map(drop)
}

impl crate::PgWorkload for Kind {
    fn run<K: RawLwLock, R: pglocks_spin::RawSpinLock>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        let procs = proc_table(settings, spec.threads);
        let lm = Arc::new(LockManager::<K>::new(
            settings.lock_manager_config(spec.threads),
        ));
        run_team(spec, &procs, |_| {
            let (lm, settings) = (Arc::clone(&lm), settings.clone());
            let mut local = None;
            let mut n = 0u64;
            move |b: &mut Backend| {
                let local = match &mut local {
                    Some(l) => l,
                    None => local.insert(lm.connect(b, DATABASE)?),
                };
                n += 1;
                transaction(&lm, b, local, &settings, self, n)
            }
        })
    }
}
