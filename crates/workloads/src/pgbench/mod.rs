//! The pgbench-shaped macro workloads: each operation is one whole transaction made of the
//! primitive models' real calls, on one shared "cluster" (lock manager, shared invalidation
//! queue, ProcArray and buffer pool of the preset) with `backends` registered connections.
//!
//! The workloads run as `pgbench -M prepared` does (the extended protocol; `statement` in
//! `transactions`): a statement takes a snapshot in `exec_bind_message`, its relations' locks,
//! and another snapshot for its portal. Every page is read under its content lock.
//!
//! - `select-only` is pgbench -S's transaction, `SELECT abalance FROM pgbench_accounts WHERE
//!   aid = :aid` in autocommit, as the backend's lock-relevant calls make it:
//!   1. `StartTransaction`: the lock on the transaction's virtual xid (an eager lock-table entry
//!      up to 9.1, lazy in the fast-path area from 9.2) and `AtStart_Cache`'s
//!      `AcceptInvalidationMessages`;
//!   2. bind: a snapshot, then `LockRelationOid(pgbench_accounts, AccessShareLock)` and the same
//!      for `pgbench_accounts_pkey`, each followed by `AcceptInvalidationMessages` when newly
//!      granted (fast-path locks from 9.2), then the portal's snapshot;
//!   3. the index scan: each B-tree level from the root down to the leaf holding `aid` read,
//!      locked shared, unlocked and released, then the heap page the same way (the metapage
//!      comes from the relcache, as `_bt_getroot` does with `rd_amcache`);
//!   4. commit: `ProcArrayEndTransaction` (no xid: no lock) and `LockReleaseAll` (one
//!      `fpInfoLock` acquisition for the virtual xid, one for both relation locks).
//!
//!   Per transaction at scale 10, against PostgreSQL 15's backend as
//!   `scripts/pg15-lock-traffic.sh` counted it (`tests/pg15-lock-traffic/select-only.tsv`;
//!   `cargo test --test pg15_lock_traffic` holds the model to it, and `pglocks run select-only
//!   --preset pg15 --threads 1 --set scale=10 --set lwlock_stats=on` shows the model's):
//!
//!   | LWLock | PostgreSQL 15 | model |
//!   |---|---|---|
//!   | LockFastPath exclusive | 5 | 5 |
//!   | ProcArray shared (`GetSnapshotData`) | 2 | 2 |
//!   | BufferMapping shared (`ReadBuffer`) | 4 | 4 |
//!   | BufferContent shared (`LockBuffer`) | 4 | 4 |
//!   | BufferMapping exclusive (misses: 19 000 pages, 16 384 buffers) | 0.38 | about 0.3 |
//!
//! - `insert-commit` is the seed talks' commit-scalability test, one `INSERT` per transaction
//!   into a table with a serial primary key:
//!   1. as above, the vxid lock, `AcceptInvalidationMessages`, `RowExclusiveLock` on the table and
//!      (`ExecOpenIndices`) its index, the two snapshots, then `nextval` of the key's sequence:
//!      its `RowExclusiveLock`, its page locked exclusively, a WAL record every 32 values;
//!   2. `AssignTransactionId`: `GetNewTransactionId` under XidGenLock, which extends the commit
//!      log at each new page (`ExtendCLOG`), then `XactLockTableInsert`, an `ExclusiveLock` on
//!      the xid in the main lock table (never fast-path);
//!   3. the heap insert: the backend's target page (`rd_targblock`) locked exclusively, and every
//!      61 rows a new page under the relation extension lock (`LockRelationForExtension`); the
//!      index insert on the rightmost leaf (a serial key), reached from the root (inner pages
//!      shared, the leaf exclusive) while the key has fewer than three levels and by 11's
//!      rightmost-leaf fast path after; each change a WAL record written with its page locked
//!      (`XLogInsert`: a heap and a B-tree record); `ExecCloseIndices` gives the index lock back;
//!   4. `RecordTransactionCommit`: the commit record and `XLogFlush` (group commit, on the
//!      `flush_device`), then `TransactionIdCommitTree` in the commit log (11's group update);
//!      with `synchronous_commit = off`, `XLogSetAsyncXactLSN` instead of the flush (the WAL
//!      writer, a thread of the run, flushes in the background) and
//!      `TransactionIdAsyncCommitTree`, which records the commit's LSN in the commit log;
//!   5. `ProcArrayEndTransaction` (9.6's group XID clear) and `LockReleaseAll`.
//!
//!   Per transaction, against PostgreSQL 15 (`tests/pg15-lock-traffic/insert-commit.tsv`, held by
//!   the same test; model: `pglocks run insert-commit --preset pg15 --threads 1 --set
//!   lwlock_stats=on`): LockFastPath exclusive 7 / 7 (vxid, table, sequence, index, the index's
//!   release, vxid clean-up, the release walk), ProcArray shared 2 / 2, XidGen exclusive 1 / 1,
//!   LockManager exclusive 2.01 / 2.03 (the xid's lock and its release), WALInsert exclusive
//!   3.03 / 3.03, BufferContent exclusive 3.01 / 3.0 and shared 1.00 / 0.92, BufferMapping
//!   shared 4.02 / 3.92 (PostgreSQL / model).
//!
//! - `tpcb-like` is pgbench's default transaction, five statements between `BEGIN` and `END`,
//!   each with its own two snapshots (READ COMMITTED):
//!   1. `UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid`:
//!      `RowExclusiveLock` on the table and its index, the snapshots, `AssignTransactionId` (the
//!      first write: the xid, the commit log extended at a new page, the xid's lock), the index
//!      descent and heap page, 14+'s refetch of the row, `MultiXactGenLock` shared (the
//!      transaction's first update), the row update (`heap_update`, waiting for a running
//!      updater and hinting an ended one: `heap`'s module doc; its page locked exclusively) and
//!      its WAL record;
//!   2. `SELECT abalance FROM pgbench_accounts WHERE aid = :aid`: `AccessShareLock` on both,
//!      a snapshot, the descent and heap page again;
//!   3. and 4. the same `UPDATE` of a random teller and of a random branch — at scale 1 every
//!      transaction updates the *one* branch row, which is what serializes pgbench's default
//!      transaction at small scales. These small tables are read whole (a sequential scan of
//!      their few pages, as the planner chooses below scale 28 for tellers and about 280 for
//!      branches), their key locked only by `ExecOpenIndices` and given back at the statement's
//!      end;
//!   5. `INSERT INTO pgbench_history`: `RowExclusiveLock`, a snapshot, the heap insert at the
//!      backend's target page (a new page under the relation extension lock every 107 rows)
//!      and its WAL record;
//!   6. `END`: the commit as in `insert-commit`.
//!
//!   Against PostgreSQL 15's steady state (`tests/pg15-lock-traffic/tpcb-like.tsv` and
//!   `tpcb-like-async.tsv`, held by `cargo test --test pg15_lock_traffic`), per transaction
//!   (PostgreSQL / model, synchronous commit): LockFastPath exclusive 14.00 / 14, ProcArray
//!   shared 10.05 / 10, BufferMapping shared 17.05 / 17, BufferContent shared 13.04 / 13 and
//!   exclusive 4.01 / 4, WALInsert 6.02 / 6.02, XactSLRU shared 2.05 / 2.00, LockManager
//!   exclusive 2.01 / 2.02, XidGen and MultiXactGen 1 / 1; with `synchronous_commit = off` the
//!   same but XactSLRU shared, 61.11 / 60.46: the sequential scans of the teller and branch
//!   pages look up the versions of the commit log's current group of transactions, which
//!   cannot be hinted yet (`heap`'s module doc says why).
//!
//! The code is in five parts:
//!
//! - `schema`: the tables, as `pgbench -i` makes them (relation oids, rows per page, tuple
//!   sizes, the primary keys' levels and pages, the pages' tuple headers);
//! - `page`: where a page's header, line pointers, tuples and special space lie, and the items
//!   a B-tree binary search compares with;
//! - `init`: building a run's cluster ([`build`]): the shared memory, the tables and the
//!   registered connections;
//! - `heap`: the heap and index access of a statement: a row fetched by key, a page pruned and
//!   hinted, a row updated or inserted, a key inserted, and their WAL records, each charging
//!   the bytes of the page it reads or writes (the buffer pool's `BufferBlocks` region);
//! - `transactions`: the transactions themselves — start, statements, commit and end, the three
//!   workloads — and the run.
//!
//! The heap and transaction steps are methods of the shared [`Cluster`] that take the running
//! transaction's backend-local state as one context, [`Txn`].
//!
//! # Differences from PostgreSQL
//!
//! The executor's own work (tuple deforming, expression evaluation, the protocol) is not
//! modelled — only the shared-memory calls are, so the figure is the locking ceiling of the
//! transaction, not PostgreSQL's throughput. Every page is looked at under its content lock
//! (`LockBuffer`: shared to read, exclusive to change), and the bytes of it that PostgreSQL's
//! code reads or writes there are charged to the simulated machine. Each part's own shortcuts
//! are in its module doc: the tables' in `schema`, the pages' in `page`, the heap's (hint bits,
//! HOT updates only, pruning, the tuple lock) in `heap`, the transactions' in `transactions`.

mod heap;
mod init;
mod page;
mod schema;
#[cfg(test)]
mod simulated;
mod transactions;

pub(crate) use init::build;

use pglocks_bufmgr::{BufMgr, BufMgrError, PrivateRefCount};
use pglocks_lmgr::{LmgrError, LocalLocks, LockManager};
use pglocks_lwlock::{Padding, RawLwLock, VarProtocol};
use pglocks_proc::Backend;
use pglocks_procarray::{ProcArray, ProcArrayError, Snapshot, INVALID_TRANSACTION_ID};
use pglocks_sinval::{SinvalBackend, SinvalError, SinvalQueue};
use pglocks_slru::clog::Clog;
use pglocks_slru::SlruError;
use pglocks_spin::RawSpinLock;
use pglocks_sync::shmem::PlacedBox;
use pglocks_sync::CachePadded;
use pglocks_wal::{Record, Wal, WalBackend, WalError};
use schema::{AppendTable, Table, COMMITTED, LOADED};
use std::sync::atomic::Ordering::Acquire;

/// Implementations of the macro workloads.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
    "PostgreSQL's models of the preset: lock manager, sinval queue, ProcArray, buffer manager",
)];

/// Which macro workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    SelectOnly,
    TpcbLike,
    InsertCommit,
}

impl Kind {
    /// The workload's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::SelectOnly => "select-only",
            Kind::TpcbLike => "tpcb-like",
            Kind::InsertCommit => "insert-commit",
        }
    }

    /// SQL statements per transaction (`BEGIN` and `END` left out).
    fn statements(self) -> u32 {
        match self {
            Kind::TpcbLike => 5,
            Kind::SelectOnly | Kind::InsertCommit => 1,
        }
    }
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
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error(transparent)]
    Clog(#[from] SlruError),
    #[error(transparent)]
    LwLock(#[from] pglocks_lwlock::LwLockError),
    /// A table whose rows move to other pages has used up the room the model keeps for its
    /// growth in a run.
    #[error(
        "{table} grew to {pages} pages in this run: the model runs no VACUUM and keeps room for \
         {growth} pages added to a table; run for less time or with fewer threads",
        growth = schema::GROWTH_PAGES
    )]
    TableFull { table: &'static str, pages: u32 },
    /// A writing workload run without the WAL and commit log (a setup bug, not a user error).
    #[error("this run has no WAL or commit log to write to")]
    NotWriting,
}

/// The shared memory of one run: what every backend's transactions go through.
pub(crate) struct Cluster<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol> {
    locks: LockManager<K>,
    sinval: SinvalQueue<K, R>,
    procs: ProcArray<K>,
    buffers: BufMgr<K, P>,
    /// WAL and the commit log, for the workloads that write.
    writes: Option<Writes<K, V, R>>,
    accounts: Table,
    tellers: Table,
    branches: Table,
    /// `MultiXactGenLock`, taken shared by each writing transaction's first update
    /// (`MultiXactIdSetOldestMember`): one of `MainLWLockArray`'s padded locks, placed in the
    /// simulated shared-memory map under its name.
    multixact_gen: PlacedBox<CachePadded<K>>,
    /// 14+: `ExecUpdate` reads the old row again (`table_tuple_fetch_row_version`) to build
    /// the new one.
    refetch_updated_row: bool,
    /// 11+: the rightmost-leaf fast path of B-tree insertion.
    btree_rightmost_fastpath: bool,
    /// `executor_work`: `busy_work` steps at the start of each statement, and at a writing
    /// transaction's commit.
    executor_steps: u32,
    executor_commit_steps: u32,
    /// `client_round_trip`: the backend's wait for its client at each message.
    client_round_trip: pglocks_sync::time::Duration,
}

/// What writing transactions add to the cluster.
struct Writes<K: RawLwLock, V: VarProtocol, R: RawSpinLock> {
    wal: Wal<K, V, R>,
    clog: Clog<K>,
    /// The table the workload appends to (`insert-commit`'s, or `pgbench_history`).
    append: AppendTable,
}

/// One connection's private state.
pub(crate) struct Session {
    local: Option<LocalLocks>,
    sinval: SinvalBackend,
    snapshot: Snapshot,
    pins: PrivateRefCount,
    /// The WAL insertion state, for the workloads that write.
    wal: Option<WalBackend>,
    /// `rd_targblock` of the append table and the rows this backend has put there.
    target: Option<(u32, u32)>,
    /// `rd_targblock` of the updated tables that have had a non-HOT update here: (relation,
    /// block).
    heap_targets: Vec<(u32, u32)>,
    /// transam.c's `cachedFetchXid`: the xid whose status this backend last read from the
    /// commit log, and that commit's LSN (0 for a synchronous one).
    known_completed: u32,
    known_completed_lsn: u64,
    /// multixact.c's `OldestMemberMXactId[MyBackendId]` is set for this transaction.
    oldest_member_set: bool,
}

impl Session {
    /// `RelationGetTargetBlock` of an updated table.
    fn heap_target(&self, relid: u32) -> Option<u32> {
        let found = self.heap_targets.iter().find(|&&(r, _)| r == relid);
        found.map(|&(_, block)| block)
    }

    /// `RelationSetTargetBlock` of an updated table.
    fn set_heap_target(&mut self, relid: u32, block: u32) {
        match self.heap_targets.iter_mut().find(|(r, _)| *r == relid) {
            Some(entry) => entry.1 = block,
            None => self.heap_targets.push((relid, block)),
        }
    }
}

/// One backend's transaction in progress: the backend-local state PostgreSQL keeps in globals
/// while it runs a transaction, here passed as one context to every call of the transaction
/// (by `&mut`, so that it costs what its fields would):
///
/// - `b`, the backend: proc.c's `MyProc`, with what the backend keeps beside it (lwlock.c's
///   `held_lwlocks`, its statistics and random numbers);
/// - `s`, the connection's [`Session`]: its snapshot (snapmgr.c's `CurrentSnapshot`), buffer
///   pins (bufmgr.c's `PrivateRefCountArray`), sinval position, `rd_targblock` and transam.c's
///   `cachedFetchXid`;
/// - `local`, lock.c's local lock table (`LockMethodLocalHash`);
/// - `writer`, for a transaction of a workload that writes: the backend's WAL insertion state
///   and the cluster's WAL and commit log;
/// - `xid`, the transaction's id as xact.c's `TopTransactionStateData` holds it (what
///   `GetTopTransactionIdIfAny` returns): invalid until `AssignTransactionId`.
struct Txn<'a, K: RawLwLock, V: VarProtocol, R: RawSpinLock> {
    b: &'a mut Backend,
    s: &'a mut Session,
    local: &'a mut LocalLocks,
    writer: Option<Writer<'a, K, V, R>>,
    xid: u32,
}

impl<'a, K: RawLwLock, V: VarProtocol, R: RawSpinLock> Txn<'a, K, V, R> {
    /// A transaction starting on backend `b`, without an xid yet.
    fn new(
        b: &'a mut Backend,
        s: &'a mut Session,
        local: &'a mut LocalLocks,
        writer: Option<Writer<'a, K, V, R>>,
    ) -> Self {
        Self {
            b,
            s,
            local,
            writer,
            xid: INVALID_TRANSACTION_ID,
        }
    }

    /// The cluster's WAL, commit log and append table, for a transaction that writes.
    fn writes(&self) -> Result<&'a Writes<K, V, R>, TxnError> {
        match &self.writer {
            Some(w) => Ok(w.w),
            None => Err(TxnError::NotWriting),
        }
    }

    /// `XLogInsert` of a record of resource manager `rmid` for transaction `xid`; returns the
    /// record's end, which `PageSetLSN` puts on the pages it changed.
    fn log(&mut self, xid: u32, rmid: u8, info: u8, payload: &[u8]) -> Result<u64, TxnError> {
        let Some(w) = self.writer.as_mut() else {
            return Err(TxnError::NotWriting);
        };
        let record = Record {
            xid,
            rmid,
            info,
            payload,
        };
        Ok(w.w.wal.insert(self.b, w.wal, &record)?)
    }
}

/// A writing transaction's WAL state and the cluster's writes, for one transaction.
struct Writer<'a, K: RawLwLock, V: VarProtocol, R: RawSpinLock> {
    w: &'a Writes<K, V, R>,
    wal: &'a mut WalBackend,
}

/// What `pglocks stress` reads of a cluster once its threads have stopped (its
/// `select-only` and `tpcb-like` parts).
impl<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol> Cluster<K, R, P, V> {
    /// The heavyweight lock manager.
    pub(crate) fn lock_manager(&self) -> &LockManager<K> {
        &self.locks
    }

    /// The buffer pool.
    pub(crate) fn buffer_pool(&self) -> &BufMgr<K, P> {
        &self.buffers
    }

    /// The commit log, for a workload that writes.
    pub(crate) fn commit_log(&self) -> Option<&Clog<K>> {
        self.writes.as_ref().map(|w| &w.clog)
    }

    /// `(relation, row, xid)` of every updated row's last updater: its newest version's
    /// `t_xmin`, without the hint bit (none for a workload that updates nothing).
    pub(crate) fn last_updaters(&self) -> impl Iterator<Item = (u32, usize, u32)> + '_ {
        [&self.accounts, &self.tellers, &self.branches]
            .into_iter()
            .flat_map(|table| {
                (0..table.newest.len()).filter_map(|row| {
                    let (block, lp) = table.newest(row as u64);
                    let xmin = table.tuple(block, lp).xmin.load(Acquire);
                    (xmin != LOADED).then_some((table.relid, row, xmin & !COMMITTED))
                })
            })
    }
}
