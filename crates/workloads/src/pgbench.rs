//! The pgbench-shaped macro workloads: each operation is one whole transaction made of the
//! primitive models' real calls, on one shared "cluster" (lock manager, shared invalidation
//! queue, ProcArray and buffer pool of the preset) with `backends` registered connections.
//!
//! - `select-only` is pgbench -S's transaction, `SELECT abalance FROM pgbench_accounts WHERE
//!   aid = :aid` in autocommit, as the backend's lock-relevant calls make it:
//!   1. `StartTransaction`: the lock on the transaction's virtual xid (an eager lock-table entry
//!      up to 9.1, lazy in the fast-path area from 9.2) and `AtStart_Cache`'s
//!      `AcceptInvalidationMessages`;
//!   2. parse and plan: `LockRelationOid(pgbench_accounts, AccessShareLock)` and the same for
//!      `pgbench_accounts_pkey`, each followed by `AcceptInvalidationMessages` when newly
//!      granted (fast-path locks from 9.2);
//!   3. `GetTransactionSnapshot` → `GetSnapshotData`;
//!   4. the index scan: `ReadBuffer` + `ReleaseBuffer` of each B-tree level from the root down
//!      to the leaf holding `aid`, then of the heap page (the metapage comes from the relcache,
//!      as `_bt_getroot` does with `rd_amcache`);
//!   5. commit: `ProcArrayEndTransaction` (no xid: no lock) and `LockReleaseAll`.
//!
//! The tables have pgbench's shape for `--set scale=S` (100 000 × S accounts, 61 rows per heap
//! page, 367 keys per B-tree page); with the default 128 MB of buffers a scale up to about 100
//! fits, as pgbench -S runs are usually sized.
//!
//! Shortcuts: the executor's own work (tuple deforming, expression evaluation, the protocol) is
//! not modelled — only the shared-memory calls are, so the figure is the locking ceiling of the
//! transaction, not PostgreSQL's throughput; heap tuples are taken to have their hint bits set
//! (no commit-log lookup), as they do in a warmed pgbench -S run.

use crate::preset::Settings;
use crate::{proc_table, workload_error, RunResult};
use pglocks_bufmgr::{BufMgr, BufMgrError, BufferTag, PrivateRefCount};
use pglocks_harness::{run_team, TeamSpec};
use pglocks_lmgr::{
    LmgrError, LocalLocks, LockAcquireResult, LockManager, LockMode, LockOwner, LockTag,
    LockTimeouts,
};
use pglocks_lwlock::{NoPadding, Pad128, Pad32, Pad64, Padding, RawLwLock};
use pglocks_procarray::{ProcArray, ProcArrayError, Snapshot, INVALID_TRANSACTION_ID};
use pglocks_sinval::{SinvalBackend, SinvalConfig, SinvalError, SinvalQueue};
use pglocks_spin::{PgSpinLock, RawSpinLock};
use pglocks_sync::Backend;
use rand::RngExt;
use std::cell::RefCell;
use std::sync::Arc;

/// Implementations of the macro workloads.
pub const IMPLS: &[(&str, &str)] = &[(
    "pg",
    "PostgreSQL's models of the preset: lock manager, sinval queue, ProcArray, buffer manager",
)];

/// The database pgbench runs in.
const DATABASE: u32 = 16_384;
/// `pgbench_accounts`' relation oid.
const ACCOUNTS: u32 = 16_397;
/// `pgbench_accounts_pkey`'s relation oid.
const ACCOUNTS_PKEY: u32 = 16_403;
/// `pgbench_accounts` rows per scale unit.
const ACCOUNTS_PER_SCALE: u64 = 100_000;
/// Rows of `pgbench_accounts` per 8 KB heap page (a 121-byte tuple and its line pointer).
const ROWS_PER_HEAP_PAGE: u64 = 61;
/// Keys per B-tree page of `pgbench_accounts_pkey` (an int4 key and its index tuple header,
/// leaf pages filled to 90 %).
const KEYS_PER_INDEX_PAGE: u64 = 367;

/// Which macro workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    SelectOnly,
}

/// A transaction's failure, from whichever model failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TxnError {
    #[error(transparent)]
    Lock(#[from] LmgrError),
    #[error(transparent)]
    Sinval(#[from] SinvalError),
    #[error(transparent)]
    ProcArray(#[from] ProcArrayError),
    #[error(transparent)]
    Buffer(#[from] BufMgrError),
}

/// The shared memory of one run: what every backend's transactions go through.
struct Cluster<K: RawLwLock, R: RawSpinLock, P: Padding> {
    locks: LockManager<K>,
    sinval: SinvalQueue<K, R>,
    procs: ProcArray<K>,
    buffers: BufMgr<K, P>,
    /// Accounts in the table (`100000 * scale`).
    accounts: u64,
    /// The primary key's levels, leaves first, up to the root.
    index: Vec<IndexLevel>,
}

/// One level of `pgbench_accounts_pkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IndexLevel {
    /// Its first block (block 0 is the metapage; a bottom-up build writes the leaves first).
    first_block: u64,
    /// Keys under each of its pages.
    keys_per_page: u64,
}

/// The levels of a B-tree over `keys` keys: the leaves, then parents of 367 children each, up
/// to a single root.
fn btree_levels(keys: u64) -> Vec<IndexLevel> {
    let mut levels = Vec::new();
    let (mut first_block, mut keys_per_page) = (1, KEYS_PER_INDEX_PAGE);
    loop {
        let pages = keys.div_ceil(keys_per_page).max(1);
        levels.push(IndexLevel {
            first_block,
            keys_per_page,
        });
        if pages == 1 {
            return levels;
        }
        first_block += pages;
        keys_per_page = keys_per_page.saturating_mul(KEYS_PER_INDEX_PAGE);
    }
}

/// One connection's private state.
struct Session {
    local: Option<LocalLocks>,
    sinval: SinvalBackend,
    snapshot: Snapshot,
    pins: PrivateRefCount,
}

impl<K: RawLwLock, R: RawSpinLock, P: Padding> Cluster<K, R, P> {
    /// `LockRelationOid`: the lock, then `AcceptInvalidationMessages` if it is newly granted.
    fn lock_relation(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        relid: u32,
    ) -> Result<(), TxnError> {
        let tag = LockTag::relation(DATABASE, relid);
        let got = self.locks.acquire(
            b,
            local,
            tag,
            LockMode::AccessShare,
            LockOwner::Transaction,
            &LockTimeouts::default(),
        )?;
        if got != LockAcquireResult::AlreadyHeld {
            self.sinval.accept_invalidation_messages(b, &mut s.sinval)?;
        }
        Ok(())
    }

    /// `ReadBuffer` + `ReleaseBuffer` of block `block` of relation `relid`.
    fn touch(
        &self,
        b: &mut Backend,
        s: &mut Session,
        relid: u32,
        block: u32,
    ) -> Result<(), TxnError> {
        let buffer =
            self.buffers
                .read_buffer(b, &mut s.pins, BufferTag::main(DATABASE, relid, block))?;
        self.buffers.release_buffer(b, &mut s.pins, buffer)?;
        Ok(())
    }

    /// pgbench -S's transaction for a random account.
    fn select_only(&self, b: &mut Backend, s: &mut Session) -> Result<(), TxnError> {
        let mut local = match s.local.take() {
            Some(l) => l,
            None => self.locks.connect(b, DATABASE)?,
        };
        let done = self.select_only_in(b, s, &mut local);
        s.local = Some(local);
        done
    }

    fn select_only_in(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
    ) -> Result<(), TxnError> {
        self.locks.start_transaction(b, local)?;
        self.sinval.accept_invalidation_messages(b, &mut s.sinval)?;
        self.lock_relation(b, s, local, ACCOUNTS)?;
        self.lock_relation(b, s, local, ACCOUNTS_PKEY)?;
        self.procs.get_snapshot_data(b, &mut s.snapshot)?;
        // The descent from the root to the leaf holding `aid`, then its heap page.
        let aid = b.rng.random_range(0..self.accounts);
        for level in self.index.iter().rev() {
            let block = level.first_block + aid / level.keys_per_page;
            self.touch(b, s, ACCOUNTS_PKEY, block as u32)?;
        }
        self.touch(b, s, ACCOUNTS, (aid / ROWS_PER_HEAP_PAGE) as u32)?;
        self.procs.end_transaction(b, INVALID_TRANSACTION_ID)?;
        self.locks.release_all(b, local, false)?;
        Ok(())
    }
}

fn run<K: RawLwLock, R: RawSpinLock, P: Padding>(
    settings: &Settings,
    kind: Kind,
    spec: &TeamSpec,
) -> RunResult {
    let backends = settings.backends;
    if backends < spec.threads {
        return Err(workload_error(ProcArrayError::Config(format!(
            "backends ({backends}) must be at least the number of threads ({}): every running thread is a registered backend",
            spec.threads
        ))));
    }
    let procs = proc_table(settings, backends);
    let accounts = ACCOUNTS_PER_SCALE * u64::from(settings.scale);
    let cluster: Arc<Cluster<K, R, P>> = Arc::new(Cluster {
        locks: LockManager::new(settings.lock_manager_config(backends)),
        sinval: SinvalQueue::new(&SinvalConfig::new(backends, settings.sinval_check))
            .map_err(workload_error)?,
        procs: ProcArray::new(&settings.procarray_config(backends)).map_err(workload_error)?,
        buffers: BufMgr::new(&settings.bufmgr_config()).map_err(workload_error)?,
        accounts,
        index: btree_levels(accounts),
    });
    // Every connection registers in the ProcArray and the sinval queue; the running threads
    // attach to the first slots and take the first sinval entries.
    let sessions = {
        let mut b = procs.attach().map_err(workload_error)?;
        let mut sessions = Vec::with_capacity(spec.threads);
        for procno in 0..backends {
            cluster.procs.add(&mut b, procno).map_err(workload_error)?;
            let entry = cluster
                .sinval
                .backend_init(&mut b, false)
                .map_err(workload_error)?;
            if procno < spec.threads {
                sessions.push(Some(Session {
                    local: None,
                    sinval: entry,
                    snapshot: Snapshot::new(),
                    pins: PrivateRefCount::new(),
                }));
            }
        }
        RefCell::new(sessions)
    };
    run_team(spec, &procs, |i| {
        let cluster = Arc::clone(&cluster);
        let mut s = sessions.borrow_mut()[i]
            .take()
            .expect("one session per thread");
        move |b: &mut Backend| match kind {
            Kind::SelectOnly => cluster.select_only(b, &mut s),
        }
    })
}

impl crate::PgWorkload for Kind {
    fn run<K: RawLwLock>(self, settings: &Settings, spec: &TeamSpec) -> RunResult {
        // msgnumLock's TAS_SPIN, and the buffer partitions spaced as MainLWLockArray's.
        match (settings.tas_spin, settings.lwlock_padding) {
            (true, 0) => run::<K, PgSpinLock<true>, NoPadding>(settings, self, spec),
            (true, 32) => run::<K, PgSpinLock<true>, Pad32>(settings, self, spec),
            (true, 64) => run::<K, PgSpinLock<true>, Pad64>(settings, self, spec),
            (true, _) => run::<K, PgSpinLock<true>, Pad128>(settings, self, spec),
            (false, 0) => run::<K, PgSpinLock<false>, NoPadding>(settings, self, spec),
            (false, 32) => run::<K, PgSpinLock<false>, Pad32>(settings, self, spec),
            (false, 64) => run::<K, PgSpinLock<false>, Pad64>(settings, self, spec),
            (false, _) => run::<K, PgSpinLock<false>, Pad128>(settings, self, spec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_accounts_pkey_has_pgbench_depths() {
        // Scale 1: 273 leaves (blocks 1-273) under a root (block 274).
        let one = btree_levels(100_000);
        assert_eq!(one.len(), 2);
        assert_eq!(one[1].first_block, 274);
        // Scale 100: 27 248 leaves, 75 inner pages, a root.
        let hundred = btree_levels(10_000_000);
        assert_eq!(hundred.len(), 3);
        assert_eq!(hundred[2].first_block, 1 + 27_248 + 75);
        assert_eq!(btree_levels(1).len(), 1);
    }
}
