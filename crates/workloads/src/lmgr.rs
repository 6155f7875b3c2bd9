//! The lock-manager workloads.
//!
//! `lmgr-relation`: one read-only transaction's relation locking, as a `SELECT` does it —
//! `AccessShareLock` on each of `relations` relations (by default 2: a table and its index, as
//! `pgbench -S`), then `LockReleaseAll` at commit. Every backend locks the same relations, which
//! before 9.2 all hash to the same few `LockManager` partitions: the contention the fast path
//! removed.

use crate::lwlock::{with_lwlock_type, MakeWithLwLock};
use crate::preset::Settings;
use crate::{proc_table, WorkloadError};
use pglocks_harness::sweep::RunFn;
use pglocks_harness::{run_team, TeamSpec};
use pglocks_lmgr::{LockManager, LockMode, LockOwner, LockTag};
use pglocks_lwlock::RawLwLock;
use pglocks_sync::Backend;
use std::sync::Arc;

/// Implementations of the lock-manager workloads.
pub const IMPLS: &[(&str, &str)] = &[(
    "pg",
    "PostgreSQL's lock manager of the preset (partitions, fast path, LWLocks)",
)];

/// The database every backend is connected to.
const DATABASE: u32 = 5;
/// The first relation oid (`FirstNormalObjectId` is 16384).
const FIRST_RELATION: u32 = 16384;

struct Relation<'a>(&'a Settings);

impl MakeWithLwLock for Relation<'_> {
    fn make<K: RawLwLock>(self) -> RunFn<'static> {
        let settings = self.0.clone();
        Box::new(move |spec: &TeamSpec| {
            let procs = proc_table(&settings, spec.threads);
            let lm = Arc::new(LockManager::<K>::new(
                settings.lock_manager_config(spec.threads),
            ));
            let relations = settings.relations;
            run_team(spec, &procs, |_| {
                let lm = Arc::clone(&lm);
                let mut local = None;
                move |b: &mut Backend| {
                    let local = match &mut local {
                        Some(l) => l,
                        None => local.insert(lm.connect(b, DATABASE)?),
                    };
                    for r in 0..relations {
                        let tag = LockTag::relation(DATABASE, FIRST_RELATION + r);
                        lm.conditional_acquire(
                            b,
                            local,
                            tag,
                            LockMode::AccessShare,
                            LockOwner::Transaction,
                        )?;
                    }
                    lm.release_all(b, local, false).map(drop)
                }
            })
        })
    }
}

/// The runner for `impl_name` under `settings`.
pub(crate) fn relation_series(
    impl_name: &str,
    settings: &Settings,
) -> Result<RunFn<'static>, WorkloadError> {
    match impl_name {
        "pg" => Ok(with_lwlock_type(settings, Relation(settings))),
        _ => Err(crate::unknown_impl("lmgr-relation", impl_name, IMPLS)),
    }
}
