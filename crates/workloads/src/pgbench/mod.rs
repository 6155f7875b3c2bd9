//! The pgbench-shaped macro workloads: each operation is one whole transaction made of the
//! primitive models' real calls, on one shared "cluster" (lock manager, shared invalidation
//! queue, ProcArray and buffer pool of the preset) with `backends` registered connections.
//!
//! The workloads run as `pgbench -M prepared` does (the extended protocol; `statement` below):
//! a statement takes a snapshot in `exec_bind_message`, its relations' locks, and another
//! snapshot for its portal. Every page is read under its content lock.
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
//!      transaction's first update), the row update (below, its page locked exclusively) and its
//!      WAL record;
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
//!   A row update models `heap_update` and `EvalPlanQual` for a row whose newest version has
//!   `xmax`: if that xmax carries no hint bit, `HeapTupleSatisfiesUpdate` asks
//!   `TransactionIdIsInProgress` (the ProcArray under ProcArrayLock shared); a running updater
//!   is waited for — the tuple lock (`LockTuple`, `ExclusiveLock`), then `XactLockTableWait` on
//!   its xid — and an ended one's status is read from the commit log (`TransactionIdDidCommit`)
//!   and the hint bit set, so the next backend does not ask again; but not while the updater's
//!   asynchronous commit is unflushed (`SetHintBits` asks `XLogNeedsFlush`), so until the WAL
//!   writer has flushed it every backend that meets the row asks the commit log again. Then
//!   the newest version is updated: its xmax becomes this transaction's xid.
//!
//! The tables have pgbench's shape for `--set scale=S` (100 000 × S accounts, 61 rows per heap
//! page, 367 keys per B-tree page: about 1 640 heap and 273 index pages per scale unit); the
//! default 128 MB of buffers holds a scale up to about 8, and past that reads go through the
//! buffer manager's victim search and `read_latency`, as a pgbench run larger than
//! shared_buffers does.
//!
//! Shortcuts: the executor's own work (tuple deforming, expression evaluation, the protocol) is
//! not modelled — only the shared-memory calls are, so the figure is the locking ceiling of the
//! transaction, not PostgreSQL's throughput; heap tuples are taken to have their hint bits set
//! (no commit-log lookup), as they do in a warmed pgbench -S run. Every page is looked at under
//! its content lock (`LockBuffer`: shared to read, exclusive to change). Page splits, the
//! free-space map and the row's own bytes are not modelled; the ProcArray's
//! stand-in commit bits ([`ProcArray::commit_tree`]) are kept in step with the commit log.
//! A row's versions are one word (the newest version's xmax and its hint bit) under one tuple
//! tag: every update is taken to be HOT, so the non-HOT update of a page full since `pgbench -i`
//! (the visibility map, a new heap page, the key's new entry) and full-page images are not
//! modelled. A page is pruned (`heap_page_prune_opt`) at a visit once it holds more dead versions
//! than its room; `pgbench_accounts`' pages, filled at load, have none, so the model prunes at
//! nearly every visit after an update, where PostgreSQL 15 in its steady state prunes about one
//! in four (its pages gained room from the rows that moved out). Against PostgreSQL 15's steady
//! state (`tests/pg15-lock-traffic/tpcb-like.tsv`, held by `cargo test --test
//! pg15_lock_traffic`), per transaction (PostgreSQL / model): LockFastPath exclusive 14.05 / 14,
//! ProcArray shared 10.07 / 10, BufferMapping shared 18.33 / 17, BufferContent shared 13.68 / 13
//! and exclusive 4.69 / 4, WALInsert 5.29 / 6.0 (the prunes), XactSLRU shared 1.20 / 1.4,
//! LockManager exclusive 2.01 / 2.02, XidGen and MultiXactGen 1 / 1. A waiter keeps
//! the tuple lock until the row is its own (PostgreSQL gives it back when `heap_update` reports
//! the row updated and takes it again in `heap_lock_tuple` if `EvalPlanQual` must wait on the
//! newer version). The writing workloads use 128-byte LWLock spacing (`lwlock_padding` is read
//! by `select-only` only).

use crate::preset::Settings;
use crate::{proc_table, workload_error, RunResult};
use pglocks_bufmgr::{BufMgr, BufMgrError, Buffer, BufferTag, PrivateRefCount};
use pglocks_harness::{run_team_with, Companion, HarnessError, TeamSpec};
use pglocks_lmgr::{
    LmgrError, LocalLocks, LockAcquireResult, LockManager, LockMode, LockOwner, LockTag,
    LockTimeouts,
};
use pglocks_lwlock::{
    AtomicVar, LockedVar, LwLockMode, NoPadding, Pad128, Pad32, Pad64, Padding, RawLwLock,
    VarProtocol,
};
use pglocks_proc::{Backend, ProcTable};
use pglocks_procarray::{ProcArray, ProcArrayError, Snapshot, INVALID_TRANSACTION_ID};
use pglocks_sinval::{SinvalBackend, SinvalConfig, SinvalError, SinvalQueue};
use pglocks_slru::clog::{Clog, XidStatus};
use pglocks_slru::SlruError;
use pglocks_spin::RawSpinLock;
use pglocks_wal::record::{RM_BTREE_ID, RM_HEAP_ID};
use pglocks_wal::{Record, Wal, WalBackend, WalError};
use rand::RngExt;
use std::cell::RefCell;
use std::sync::atomic::{
    AtomicU32,
    Ordering::{AcqRel, Acquire, Relaxed},
};
use std::sync::Arc;

/// Implementations of the macro workloads.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
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
/// Rows of `pgbench_tellers` and `pgbench_branches` per heap page: pgbench leaves their
/// `filler` NULL, so a row is a 40-byte tuple and its line pointer.
const SMALL_ROWS_PER_HEAP_PAGE: u64 = 185;
/// Keys per B-tree page of `pgbench_accounts_pkey` (an int4 key and its index tuple header,
/// leaf pages filled to 90 %).
const KEYS_PER_INDEX_PAGE: u64 = 367;

/// `pgbench_branches`, one row per scale unit, and its primary key.
const BRANCHES: u32 = 16_394;
const BRANCHES_PKEY: u32 = 16_399;
/// `pgbench_tellers`, ten rows per scale unit, and its primary key.
const TELLERS: u32 = 16_391;
const TELLERS_PKEY: u32 = 16_401;
const TELLERS_PER_SCALE: u64 = 10;
/// `pgbench_history`, appended to by `tpcb-like`.
const HISTORY: u32 = 16_388;
/// Rows of `pgbench_history` per heap page (a 71-byte tuple, MAXALIGNed, and its line pointer).
const ROWS_PER_HISTORY_PAGE: u32 = 107;
/// WAL payload of a HOT update: `xl_heap_update`, `xl_heap_header` and the new row's changed
/// bytes.
const HEAP_UPDATE_PAYLOAD: [u8; 64] = [0x55; 64];
/// heapam_xlog.h's `XLOG_HEAP_HOT_UPDATE`.
const XLOG_HEAP_HOT_UPDATE: u8 = 0x40;
/// `RM_HEAP2_ID` and its `XLOG_HEAP2_PRUNE`.
const RM_HEAP2_ID: u8 = 9;
const XLOG_HEAP2_PRUNE: u8 = 0x10;
/// WAL payload of a prune record: `xl_heap_prune` and one redirect.
const HEAP_PRUNE_PAYLOAD: [u8; 16] = [0x50; 16];
/// htup_details.h's `HEAP_XMAX_COMMITTED`, kept here in the bit above the xid (xids stay below
/// 2^31).
const XMAX_COMMITTED: u32 = 1 << 31;

/// `insert-commit`'s table.
const INSERTS: u32 = 16_420;
/// `insert-commit`'s table's serial primary key.
const INSERTS_PKEY: u32 = 16_426;
/// Rows of `insert-commit`'s table per heap page.
const ROWS_PER_INSERT_PAGE: u32 = 61;
/// `insert-commit`'s key's sequence (`insert_commit_id_seq`).
const INSERTS_SEQ: u32 = 16_418;
/// sequence.c's `SEQ_LOG_VALS`: `nextval` writes a WAL record once per this many values.
const SEQ_LOG_VALS: u32 = 32;
/// `RM_SEQ_ID`, the sequence resource manager, and its `XLOG_SEQ_LOG`.
const RM_SEQ_ID: u8 = 15;
const XLOG_SEQ_LOG: u8 = 0x00;
/// WAL payload of a sequence record: `xl_seq_rec` and the sequence tuple.
const SEQ_LOG_PAYLOAD: [u8; 56] = [0x53; 56];
/// nbtree.h's `BTREE_FASTPATH_MIN_LEVEL`: the rightmost-leaf fast path only for a root at
/// this level or higher (three levels or more).
const BTREE_FASTPATH_MIN_LEVEL: usize = 2;
/// WAL payload of a heap insert: `xl_heap_insert`, `xl_heap_header` and a small row.
const HEAP_INSERT_PAYLOAD: [u8; 48] = [0x48; 48];
/// WAL payload of a B-tree leaf insert: `xl_btree_insert` and an int4 index tuple.
const BTREE_INSERT_PAYLOAD: [u8; 20] = [0x42; 20];

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
    /// (`MultiXactIdSetOldestMember`).
    multixact_gen: K,
    /// 14+: `ExecUpdate` reads the old row again (`table_tuple_fetch_row_version`) to build
    /// the new one.
    refetch_updated_row: bool,
    /// 11+: the rightmost-leaf fast path of B-tree insertion.
    btree_rightmost_fastpath: bool,
    /// `executor_work`: `busy_work` steps at the start of each statement, and at a writing
    /// transaction's commit.
    executor_steps: u32,
    executor_commit_steps: u32,
}

/// One of pgbench's keyed tables: its rows, its primary key's levels and, for the workloads
/// that update them, each row's newest version's `xmax`.
struct Table {
    relid: u32,
    pkey: u32,
    rows: u64,
    rows_per_page: u64,
    /// The plan reads the table whole (a sequential scan) rather than through its key: the
    /// planner's choice for a table of a few pages (see [`Table::new`]).
    seq_scan: bool,
    /// The primary key's levels, leaves first, up to the root.
    index: Vec<IndexLevel>,
    /// Each row's newest version's `t_xmax`, with [`XMAX_COMMITTED`] as its hint bit; empty when
    /// nothing updates the table.
    xmax: Box<[AtomicU32]>,
    /// Each heap page's dead versions not yet pruned, and its `pd_prune_xid` (the oldest xid
    /// that left one, 0 for none); empty when nothing updates the table. Changed with the
    /// page's content lock held exclusively.
    dead: Box<[(AtomicU32, AtomicU32)]>,
    /// Dead versions a page holds before its free space falls below `heap_page_prune_opt`'s
    /// threshold (10 % of the page; pgbench loads with fillfactor 100, so 0 for a page filled
    /// at load time).
    room: u32,
}

impl Table {
    /// A table of `rows` rows, `rows_per_page` to a heap page (pgbench fills them with
    /// fillfactor 100); `updated` gives each row its `xmax` word.
    ///
    /// Whether a lookup by key scans the table: a stand-in for the planner's costs at their
    /// defaults, a sequential scan (a page each, `seq_page_cost` 1, plus 0.0125 of CPU per
    /// row) against the key's descent and the heap page (`random_page_cost` 4 each). For
    /// pgbench that scans `pgbench_branches` below scale 280 or so and `pgbench_tellers` below
    /// scale 28, as PostgreSQL 15 was seen to at scale 10.
    fn new(relid: u32, pkey: u32, rows: u64, rows_per_page: u64, updated: bool) -> Self {
        let index = btree_levels(rows);
        let pages = rows.div_ceil(rows_per_page);
        // A version takes as much room as a row; the first page holds the most rows.
        let on_page = rows.min(rows_per_page);
        let room = (rows_per_page * 9 / 10).saturating_sub(on_page) as u32;
        let seq_cost = pages as f64 + 0.0125 * rows as f64;
        let index_cost = 4.0 * (index.len() + 1) as f64;
        Self {
            relid,
            pkey,
            rows,
            rows_per_page,
            seq_scan: seq_cost < index_cost,
            index,
            xmax: (0..if updated { rows } else { 0 })
                .map(|_| AtomicU32::new(INVALID_TRANSACTION_ID))
                .collect(),
            dead: (0..if updated { pages } else { 0 })
                .map(|_| (AtomicU32::new(0), AtomicU32::new(INVALID_TRANSACTION_ID)))
                .collect(),
            room,
        }
    }

    /// The row's heap block and line pointer (`ctid`).
    fn tid(&self, row: u64) -> (u32, u16) {
        (
            (row / self.rows_per_page) as u32,
            (row % self.rows_per_page) as u16 + 1,
        )
    }

    /// Heap pages.
    fn pages(&self) -> u32 {
        self.rows.div_ceil(self.rows_per_page) as u32
    }
}

/// One level of a primary key.
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

/// What writing transactions add to the cluster.
struct Writes<K: RawLwLock, V: VarProtocol, R: RawSpinLock> {
    wal: Wal<K, V, R>,
    clog: Clog<K>,
    /// The table the workload appends to (`insert-commit`'s, or `pgbench_history`).
    append: AppendTable,
}

/// A table that only grows: each backend fills its target page, then extends the relation.
struct AppendTable {
    relid: u32,
    rows_per_page: u32,
    /// Its size in pages, changed under its relation extension lock.
    pages: AtomicU32,
    /// Its key sequence's `log_cnt` countdown, as `nextval` keeps it in the sequence page:
    /// values handed out since the last WAL record (`insert-commit`).
    seq_values: AtomicU32,
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
    /// transam.c's `cachedFetchXid`: the xid whose status this backend last read from the
    /// commit log, and that commit's LSN (0 for a synchronous one).
    known_completed: u32,
    known_completed_lsn: u64,
    /// multixact.c's `OldestMemberMXactId[MyBackendId]` is set for this transaction.
    oldest_member_set: bool,
}

impl<K: RawLwLock, V: VarProtocol, R: RawSpinLock> Writer<'_, K, V, R> {
    /// `XLogInsert` of a record of resource manager `rmid` for transaction `xid`.
    fn log(
        &mut self,
        b: &mut Backend,
        xid: u32,
        rmid: u8,
        info: u8,
        payload: &[u8],
    ) -> Result<(), TxnError> {
        let record = Record {
            xid,
            rmid,
            info,
            payload,
        };
        self.w.wal.insert(b, self.wal, &record)?;
        Ok(())
    }
}

/// A writing transaction's WAL state and the cluster's writes, for one transaction.
struct Writer<'a, K: RawLwLock, V: VarProtocol, R: RawSpinLock> {
    w: &'a Writes<K, V, R>,
    wal: &'a mut WalBackend,
}

impl<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol> Cluster<K, R, P, V> {
    /// `LockRelationOid` in `mode`: the lock, then `AcceptInvalidationMessages` if it is
    /// newly granted.
    fn lock_relation(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        relid: u32,
        mode: LockMode,
    ) -> Result<(), TxnError> {
        let got = self.lock(b, local, LockTag::relation(DATABASE, relid), mode)?;
        if got != LockAcquireResult::AlreadyHeld {
            self.sinval.accept_invalidation_messages(b, &mut s.sinval)?;
        }
        Ok(())
    }

    /// The start of a statement under the extended protocol (`pgbench -M prepared`): the
    /// snapshot `exec_bind_message` takes for a statement with parameters, the locks the
    /// cached plan's relations take (`AcquireExecutorLocks`, then the executor's own opens),
    /// and the snapshot the portal runs with (`PortalStart` for a `SELECT`, `PortalRunMulti`
    /// for the rest) — each `GetTransactionSnapshot` a new `GetSnapshotData` in READ
    /// COMMITTED, so two per statement (the simple protocol's parse-analysis snapshot and
    /// portal snapshot are two as well).
    fn statement(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        relations: &[u32],
        mode: LockMode,
    ) -> Result<(), TxnError> {
        if self.executor_steps > 0 {
            std::hint::black_box(crate::work(self.executor_steps, b.procno() as u64));
        }
        self.procs.get_snapshot_data(b, &mut s.snapshot)?;
        for &relid in relations {
            self.lock_relation(b, s, local, relid, mode)?;
        }
        self.procs.get_snapshot_data(b, &mut s.snapshot)?;
        Ok(())
    }

    /// A transaction-owned lock on `tag` in `mode`, waiting as long as it takes.
    fn lock(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        tag: LockTag,
        mode: LockMode,
    ) -> Result<LockAcquireResult, TxnError> {
        let owner = LockOwner::Transaction;
        Ok(self
            .locks
            .acquire(b, local, tag, mode, owner, &LockTimeouts::default())?)
    }

    /// `ReadBuffer` of block `block` of relation `relid` and `LockBuffer` in `mode`.
    fn read_locked(
        &self,
        b: &mut Backend,
        s: &mut Session,
        relid: u32,
        block: u32,
        mode: LwLockMode,
    ) -> Result<Buffer, TxnError> {
        let tag = BufferTag::main(DATABASE, relid, block);
        let buffer = self.buffers.read_buffer(b, &mut s.pins, tag)?;
        self.buffers.lock_buffer(b, buffer, mode)?;
        Ok(buffer)
    }

    /// `LockBuffer(BUFFER_LOCK_UNLOCK)` and `ReleaseBuffer` (`UnlockReleaseBuffer`).
    fn unlock_release(
        &self,
        b: &mut Backend,
        s: &mut Session,
        buffer: Buffer,
    ) -> Result<(), TxnError> {
        self.buffers.unlock_buffer(b, buffer)?;
        self.buffers.release_buffer(b, &mut s.pins, buffer)?;
        Ok(())
    }

    /// A page looked at: read, content lock shared, unlock, release.
    fn touch(
        &self,
        b: &mut Backend,
        s: &mut Session,
        relid: u32,
        block: u32,
    ) -> Result<(), TxnError> {
        let buffer = self.read_locked(b, s, relid, block, LwLockMode::Shared)?;
        self.unlock_release(b, s, buffer)
    }

    /// An index scan for one key: the descent from the root to the leaf holding `row`, each
    /// page under its content lock shared (`_bt_getroot`, then `_bt_relandgetbuf` level by
    /// level: the parent unlocked and released before the child is read and locked; the leaf
    /// given up once read, `_bt_drop_lock_and_maybe_pin` under an MVCC snapshot), then its
    /// heap page, locked shared while the tuple is found (`heapam_index_fetch_tuple`).
    fn fetch_row(
        &self,
        b: &mut Backend,
        s: &mut Session,
        mut w: Option<&mut Writer<'_, K, V, R>>,
        table: &Table,
        row: u64,
    ) -> Result<(), TxnError> {
        if table.seq_scan {
            // Every page, each under its content lock shared while its tuples are checked
            // (`heapgetpage`): the scan does not know the key is unique.
            for block in 0..table.pages() {
                self.heap_page(b, s, w.as_deref_mut(), table, block)?;
            }
            return Ok(());
        }
        for level in table.index.iter().rev() {
            let block = level.first_block + row / level.keys_per_page;
            self.touch(b, s, table.pkey, block as u32)?;
        }
        self.heap_page(b, s, w, table, table.tid(row).0)
    }

    /// `TransactionIdDidCommit` of an ended `xid` (the commit log, unless it is transam.c's
    /// `cachedFetchXid`), and whether `SetHintBits` may then record it: not while an
    /// asynchronous commit's record is unflushed. Counts `tpcb.xmax_lookups` (commit-log reads)
    /// and `tpcb.hints_deferred`.
    fn did_commit_and_may_hint(
        &self,
        b: &mut Backend,
        s: &mut Session,
        w: &mut Writer<'_, K, V, R>,
        xid: u32,
    ) -> Result<bool, TxnError> {
        if s.known_completed != xid {
            b.stats.events.count("tpcb.xmax_lookups", 1);
            let (_, commit_lsn) = w.w.clog.get_status(b, xid)?;
            s.known_completed = xid;
            s.known_completed_lsn = commit_lsn;
        }
        let lsn = s.known_completed_lsn;
        if lsn != 0 && w.w.wal.needs_flush(b, w.wal, lsn)? {
            b.stats.events.count("tpcb.hints_deferred", 1);
            return Ok(false);
        }
        Ok(true)
    }

    /// A sequential scan's visibility checks of one page (`heapgetpage` →
    /// `HeapTupleSatisfiesMVCC` for every tuple, under the page's content lock shared): a row
    /// whose last updater has ended but carries no hint bit is looked up
    /// ([`Self::did_commit_and_may_hint`]) and hinted, so the page's rows are hinted once by
    /// the first scan after each update; an updater the snapshot still sees running is left.
    fn hint_page(
        &self,
        b: &mut Backend,
        s: &mut Session,
        w: &mut Writer<'_, K, V, R>,
        table: &Table,
        block: u32,
    ) -> Result<(), TxnError> {
        let first = u64::from(block) * table.rows_per_page;
        let last = (first + table.rows_per_page).min(table.xmax.len() as u64);
        for row in first..last {
            let word = &table.xmax[row as usize];
            let seen = word.load(Acquire);
            let xid = seen & !XMAX_COMMITTED;
            if xid == INVALID_TRANSACTION_ID || seen & XMAX_COMMITTED != 0 {
                continue;
            }
            if xid >= s.snapshot.xmin && (xid >= s.snapshot.xmax || s.snapshot.xip.contains(&xid)) {
                continue;
            }
            if self.did_commit_and_may_hint(b, s, w, xid)? {
                let _ = word.compare_exchange(seen, xid | XMAX_COMMITTED, Relaxed, Relaxed);
            }
        }
        Ok(())
    }

    /// A heap page a scan moves to: `heap_page_prune_opt` first (below), then read under its
    /// content lock shared (a sequential scan checks every tuple's visibility meanwhile).
    fn heap_page(
        &self,
        b: &mut Backend,
        s: &mut Session,
        mut w: Option<&mut Writer<'_, K, V, R>>,
        table: &Table,
        block: u32,
    ) -> Result<(), TxnError> {
        let tag = BufferTag::main(DATABASE, table.relid, block);
        let buffer = self.buffers.read_buffer(b, &mut s.pins, tag)?;
        if let (Some(w), Some((dead, prune_xid))) =
            (w.as_deref_mut(), table.dead.get(block as usize))
        {
            self.prune_opt(b, s, w, buffer, dead, prune_xid, table.room)?;
        }
        self.buffers.lock_buffer(b, buffer, LwLockMode::Shared)?;
        if let (true, Some(w)) = (table.seq_scan, w) {
            self.hint_page(b, s, w, table, block)?;
        }
        self.unlock_release(b, s, buffer)
    }

    /// Models `heap_page_prune_opt`: a page holding more dead versions than its room, the
    /// oldest left by a transaction every snapshot now sees as ended (`pd_prune_xid` below
    /// this backend's snapshot's xmin, the `GlobalVisState` test), is pruned if its content
    /// lock can be had exclusively at once (`ConditionalLockBufferForCleanup`; the sole-pin
    /// test is not modelled): its dead versions go, and a `XLOG_HEAP2_PRUNE` record says so.
    #[allow(clippy::too_many_arguments)]
    fn prune_opt(
        &self,
        b: &mut Backend,
        s: &mut Session,
        w: &mut Writer<'_, K, V, R>,
        buffer: Buffer,
        dead: &AtomicU32,
        prune_xid: &AtomicU32,
        room: u32,
    ) -> Result<(), TxnError> {
        let xid = prune_xid.load(Relaxed);
        if dead.load(Relaxed) <= room || xid == INVALID_TRANSACTION_ID || xid >= s.snapshot.xmin {
            return Ok(());
        }
        if !self.buffers.conditional_lock_buffer(b, buffer)? {
            return Ok(());
        }
        if dead.load(Relaxed) > room && prune_xid.load(Relaxed) == xid {
            dead.store(0, Relaxed);
            prune_xid.store(INVALID_TRANSACTION_ID, Relaxed);
            w.log(
                b,
                INVALID_TRANSACTION_ID,
                RM_HEAP2_ID,
                XLOG_HEAP2_PRUNE,
                &HEAP_PRUNE_PAYLOAD,
            )?;
            b.stats.events.count("tpcb.prunes", 1);
        }
        self.buffers.unlock_buffer(b, buffer)?;
        Ok(())
    }

    /// One transaction of `kind`, with the backend's local lock table (connected on first use).
    pub(crate) fn transaction(
        &self,
        b: &mut Backend,
        s: &mut Session,
        kind: Kind,
    ) -> Result<(), TxnError> {
        let mut local = match s.local.take() {
            Some(l) => l,
            None => self.locks.connect(b, DATABASE)?,
        };
        let done = match kind {
            Kind::SelectOnly => self.select_only_in(b, s, &mut local),
            Kind::TpcbLike | Kind::InsertCommit => self.writing(b, s, &mut local, kind),
        };
        s.local = Some(local);
        done
    }

    /// The start of every transaction: the vxid lock and `AtStart_Cache`.
    fn start(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
    ) -> Result<(), TxnError> {
        self.locks.start_transaction(b, local)?;
        self.sinval.accept_invalidation_messages(b, &mut s.sinval)?;
        s.oldest_member_set = false;
        Ok(())
    }

    /// The end of a transaction: `ProcArrayEndTransaction` and `LockReleaseAll`.
    fn end(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        latest_xid: u32,
    ) -> Result<(), TxnError> {
        self.procs.end_transaction(b, latest_xid)?;
        self.locks.release_all(b, local, false)?;
        Ok(())
    }

    fn select_only_in(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
    ) -> Result<(), TxnError> {
        self.start(b, s, local)?;
        let rels = [self.accounts.relid, self.accounts.pkey];
        self.statement(b, s, local, &rels, LockMode::AccessShare)?;
        let aid = b.rng.random_range(0..self.accounts.rows);
        self.fetch_row(b, s, None, &self.accounts, aid)?;
        self.end(b, local, INVALID_TRANSACTION_ID)
    }

    /// A transaction that writes: the WAL state taken out of the session for its duration.
    fn writing(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        kind: Kind,
    ) -> Result<(), TxnError> {
        let (Some(w), Some(mut wal)) = (self.writes.as_ref(), s.wal.take()) else {
            return Err(TxnError::NotWriting);
        };
        let mut writer = Writer { w, wal: &mut wal };
        let done = match kind {
            Kind::TpcbLike => self.tpcb_like_with(b, s, local, &mut writer),
            _ => self.insert_commit_with(b, s, local, &mut writer),
        };
        s.wal = Some(wal);
        done
    }

    /// `AssignTransactionId`: the xid (extending the commit log at a new page), then its lock.
    fn assign_xid(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        w: &Writes<K, V, R>,
    ) -> Result<u32, TxnError> {
        let xid = self
            .procs
            .assign_xid_extending(b, None, |b, xid| w.clog.extend(b, xid))?;
        self.locks.xact_lock_table_insert(b, local, xid)?;
        Ok(xid)
    }

    /// One `INSERT` and its commit: the statement (its table and, by `ExecOpenIndices`, its
    /// index locked `RowExclusiveLock`), `nextval` of the key's sequence, the xid, the heap
    /// insert, the index insert, `ExecCloseIndices`' release of the index lock, the commit.
    fn insert_commit_with(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        wr: &mut Writer<'_, K, V, R>,
    ) -> Result<(), TxnError> {
        self.start(b, s, local)?;
        let rels = [INSERTS, INSERTS_PKEY];
        self.statement(b, s, local, &rels, LockMode::RowExclusive)?;
        self.nextval(b, s, local, wr)?;
        let xid = self.assign_xid(b, local, wr.w)?;
        self.heap_insert(b, s, local, wr, xid)?;
        self.serial_index_insert(b, s, wr, xid)?;
        let index = LockTag::relation(DATABASE, INSERTS_PKEY);
        self.locks.release(
            b,
            local,
            index,
            LockMode::RowExclusive,
            LockOwner::Transaction,
        )?;
        self.commit(b, local, wr, xid)
    }

    /// Models `nextval_internal`: the sequence locked `RowExclusiveLock` once per transaction
    /// (`lock_and_open_sequence`, owned by the top transaction), its one page read and locked
    /// exclusively while the value is taken, and a WAL record once per [`SEQ_LOG_VALS`]
    /// values (the sequence's `log_cnt`, shared by every backend).
    fn nextval(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        wr: &mut Writer<'_, K, V, R>,
    ) -> Result<(), TxnError> {
        self.lock_relation(b, s, local, INSERTS_SEQ, LockMode::RowExclusive)?;
        let page = self.read_locked(b, s, INSERTS_SEQ, 0, LwLockMode::Exclusive)?;
        let seq = &wr.w.append.seq_values;
        // The page's content lock orders the countdown's changes.
        let n = seq.load(Relaxed);
        seq.store((n + 1) % SEQ_LOG_VALS, Relaxed);
        if n == 0 {
            wr.log(
                b,
                INVALID_TRANSACTION_ID,
                RM_SEQ_ID,
                XLOG_SEQ_LOG,
                &SEQ_LOG_PAYLOAD,
            )?;
        }
        self.unlock_release(b, s, page)
    }

    /// The B-tree insertion of a serial key, always at the rightmost leaf (`_bt_doinsert`):
    /// from 11, with a tree of three levels or more, the fast path (`_bt_search_insert`: the cached
    /// rightmost leaf, `ConditionalLockBuffer`; if that fails the model locks it exclusively
    /// anyway instead of descending); below that, the descent from the root, each inner page
    /// shared, the leaf exclusive. The tree's height follows the rows inserted so far; page
    /// splits are not modelled (the leaf stays block 1, the inner pages blocks 2 and up).
    fn serial_index_insert(
        &self,
        b: &mut Backend,
        s: &mut Session,
        wr: &mut Writer<'_, K, V, R>,
        xid: u32,
    ) -> Result<(), TxnError> {
        let append = &wr.w.append;
        let rows = u64::from(append.pages.load(Relaxed)) * u64::from(append.rows_per_page);
        let levels = btree_levels(rows.max(1)).len();
        let leaf = if self.btree_rightmost_fastpath && levels > BTREE_FASTPATH_MIN_LEVEL {
            let tag = BufferTag::main(DATABASE, INSERTS_PKEY, 1);
            let leaf = self.buffers.read_buffer(b, &mut s.pins, tag)?;
            if !self.buffers.conditional_lock_buffer(b, leaf)? {
                self.buffers.lock_buffer(b, leaf, LwLockMode::Exclusive)?;
            }
            leaf
        } else {
            for level in (1..levels).rev() {
                self.touch(b, s, INSERTS_PKEY, 1 + level as u32)?;
            }
            self.read_locked(b, s, INSERTS_PKEY, 1, LwLockMode::Exclusive)?
        };
        wr.log(b, xid, RM_BTREE_ID, 0, &BTREE_INSERT_PAYLOAD)?;
        self.unlock_release(b, s, leaf)
    }

    /// pgbench's default transaction.
    fn tpcb_like_with(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        wr: &mut Writer<'_, K, V, R>,
    ) -> Result<(), TxnError> {
        let aid = b.rng.random_range(0..self.accounts.rows);
        let tid = b.rng.random_range(0..self.tellers.rows);
        let bid = b.rng.random_range(0..self.branches.rows);
        self.start(b, s, local)?;
        let accounts = [self.accounts.relid, self.accounts.pkey];
        self.statement(b, s, local, &accounts, LockMode::RowExclusive)?;
        let xid = self.assign_xid(b, local, wr.w)?;
        self.update_row(b, s, local, wr, &self.accounts, aid, xid)?;
        self.statement(b, s, local, &accounts, LockMode::AccessShare)?;
        self.fetch_row(b, s, Some(&mut *wr), &self.accounts, aid)?;
        self.update_statement(b, s, local, wr, &self.tellers, tid, xid)?;
        self.update_statement(b, s, local, wr, &self.branches, bid, xid)?;
        self.statement(b, s, local, &[HISTORY], LockMode::RowExclusive)?;
        self.heap_insert(b, s, local, wr, xid)?;
        self.commit(b, local, wr, xid)
    }

    /// An `UPDATE` statement of `row` of `table`: its table and key locked `RowExclusiveLock`
    /// (the key by the scan through it, or only by `ExecOpenIndices` when the table is scanned
    /// whole, and then given back at the statement's end by `ExecCloseIndices`; after an index
    /// scan that release only drops one of the lock's two references), then the update.
    #[allow(clippy::too_many_arguments)]
    fn update_statement(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        wr: &mut Writer<'_, K, V, R>,
        table: &Table,
        row: u64,
        xid: u32,
    ) -> Result<(), TxnError> {
        let rels = [table.relid, table.pkey];
        self.statement(b, s, local, &rels, LockMode::RowExclusive)?;
        self.update_row(b, s, local, wr, table, row, xid)?;
        if table.seq_scan {
            let key = LockTag::relation(DATABASE, table.pkey);
            let owner = LockOwner::Transaction;
            self.locks
                .release(b, local, key, LockMode::RowExclusive, owner)?;
        }
        Ok(())
    }

    /// The heap insert into the append table and its WAL record: the backend's target page,
    /// or a new one read in (`P_NEW`) under the relation extension lock and kept for the
    /// insert, as PostgreSQL keeps it pinned: one read of the page per insert either way.
    fn heap_insert(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        wr: &mut Writer<'_, K, V, R>,
        xid: u32,
    ) -> Result<(), TxnError> {
        let table = &wr.w.append;
        let buffer = match s.target {
            Some((block, rows)) if rows < table.rows_per_page => {
                s.target = Some((block, rows + 1));
                self.read_locked(b, s, table.relid, block, LwLockMode::Exclusive)?
            }
            _ => {
                let extend = LockTag::relation_extend(DATABASE, table.relid);
                self.lock(b, local, extend, LockMode::Exclusive)?;
                let block = table.pages.fetch_add(1, Relaxed);
                let buffer = self.read_locked(b, s, table.relid, block, LwLockMode::Exclusive)?;
                let owner = LockOwner::Transaction;
                self.locks
                    .release(b, local, extend, LockMode::Exclusive, owner)?;
                s.target = Some((block, 1));
                buffer
            }
        };
        // The tuple goes in and its record is written with the page locked exclusively.
        wr.log(b, xid, RM_HEAP_ID, 0, &HEAP_INSERT_PAYLOAD)?;
        self.unlock_release(b, s, buffer)
    }

    /// An `UPDATE` of `row` by transaction `xid`: the index scan, then `heap_update` on the
    /// row's newest version — waiting for a running updater (`LockTuple`, then
    /// `XactLockTableWait`), hinting an ended one — and the HOT update's WAL record. Counts
    /// `tpcb.row_waits` (waits for an updater) and `tpcb.xmax_lookups` (commit-log lookups of
    /// an unhinted xmax).
    #[allow(clippy::too_many_arguments)]
    fn update_row(
        &self,
        b: &mut Backend,
        s: &mut Session,
        local: &mut LocalLocks,
        wr: &mut Writer<'_, K, V, R>,
        table: &Table,
        row: u64,
        xid: u32,
    ) -> Result<(), TxnError> {
        self.fetch_row(b, s, Some(&mut *wr), table, row)?;
        let rel = (DATABASE, table.relid);
        let tid = table.tid(row);
        if self.refetch_updated_row {
            self.touch(b, s, table.relid, tid.0)?;
        }
        if !s.oldest_member_set {
            // heap_update's MultiXactIdSetOldestMember, once per transaction.
            self.multixact_gen.acquire(b, LwLockMode::Shared)?;
            self.multixact_gen.release(b)?;
            s.oldest_member_set = true;
        }
        let xmax_word = &table.xmax[row as usize];
        let mut tuple_locked = false;
        // heap_update reads the page again (a pin the backend may hold already, but a
        // mapping-table lookup all the same) and locks it exclusively; it lets the lock go
        // while it waits for another updater, and takes it again after.
        let page = BufferTag::main(DATABASE, table.relid, tid.0);
        let buffer = self.buffers.read_buffer(b, &mut s.pins, page)?;
        let mut locked = false;
        loop {
            if !locked {
                self.buffers.lock_buffer(b, buffer, LwLockMode::Exclusive)?;
                locked = true;
            }
            let word = xmax_word.load(Acquire);
            let xmax = word & !XMAX_COMMITTED;
            if xmax == INVALID_TRANSACTION_ID || word & XMAX_COMMITTED != 0 {
                // The newest version is free: it becomes this transaction's.
                if xmax_word
                    .compare_exchange(word, xid, AcqRel, Acquire)
                    .is_ok()
                {
                    break;
                }
                pglocks_sync::hint::spin_loop();
                continue;
            }
            let recent_xmin = s.snapshot.xmin;
            if self
                .procs
                .transaction_id_is_in_progress(b, xmax, recent_xmin, s.known_completed)?
            {
                b.stats.events.count("tpcb.row_waits", 1);
                self.buffers.unlock_buffer(b, buffer)?;
                locked = false;
                if !tuple_locked {
                    let none = LockTimeouts::default();
                    let mode = LockMode::Exclusive;
                    self.locks.lock_tuple(b, local, rel, tid, mode, &none)?;
                    tuple_locked = true;
                }
                self.locks.xact_lock_table_wait(
                    b,
                    local,
                    xmax,
                    &LockTimeouts::default(),
                    |b, x| {
                        Ok::<_, TxnError>(self.procs.transaction_id_is_in_progress(
                            b,
                            x,
                            recent_xmin,
                            0,
                        )?)
                    },
                    |x| Ok(self.procs.sub_trans_get_topmost(x)?),
                )?;
            } else {
                // TransactionIdDidCommit, then SetHintBits: the next reader need not ask.
                // An asynchronous commit is hinted only once its record is flushed (the page's
                // own LSN, which may allow it earlier, is not modelled): until then the row
                // is taken unhinted, and the next updater asks again.
                if !self.did_commit_and_may_hint(b, s, wr, xmax)? {
                    if xmax_word
                        .compare_exchange(word, xid, AcqRel, Acquire)
                        .is_ok()
                    {
                        break;
                    }
                    continue;
                }
                let hinted = xmax | XMAX_COMMITTED;
                let _ = xmax_word.compare_exchange(word, hinted, Relaxed, Relaxed);
            }
        }
        // The old version is dead once this transaction commits: the page's next visitor may
        // prune it (`PageSetPrunable`).
        if let Some((dead, prune_xid)) = table.dead.get(tid.0 as usize) {
            dead.fetch_add(1, Relaxed);
            if prune_xid.load(Relaxed) == INVALID_TRANSACTION_ID {
                prune_xid.store(xid, Relaxed);
            }
        }
        // The new version and its record are written with the page still locked.
        wr.log(
            b,
            xid,
            RM_HEAP_ID,
            XLOG_HEAP_HOT_UPDATE,
            &HEAP_UPDATE_PAYLOAD,
        )?;
        self.unlock_release(b, s, buffer)?;
        if tuple_locked {
            self.locks
                .unlock_tuple(b, local, rel, tid, LockMode::Exclusive)?;
        }
        Ok(())
    }

    /// `RecordTransactionCommit`: the commit record flushed (group commit, on the
    /// `flush_device`), then `TransactionIdCommitTree` in the commit log (11's group update);
    /// or, with `synchronous_commit = off`, handed to the WAL writer, then
    /// `TransactionIdAsyncCommitTree` (the commit log keeps the commit's LSN); then the
    /// transaction's end.
    fn commit(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        wr: &mut Writer<'_, K, V, R>,
        xid: u32,
    ) -> Result<(), TxnError> {
        if self.executor_commit_steps > 0 {
            std::hint::black_box(crate::work(self.executor_commit_steps, u64::from(xid)));
        }
        let end = wr.w.wal.commit(b, wr.wal, xid)?;
        // TransactionIdCommitTree passes no LSN; the asynchronous one passes the record's end.
        let lsn = if wr.w.wal.config().synchronous_commit {
            0
        } else {
            end
        };
        wr.w.clog
            .set_tree_status(b, xid, &[], XidStatus::Committed, lsn)?;
        self.procs.commit_tree(xid, &[])?;
        self.end(b, local, xid)
    }
}

/// The cluster of a run for `threads` running backends, every connection registered in the
/// ProcArray and the sinval queue, and one session per running thread (the threads attach to
/// the first slots of the returned table and take the first sinval entries).
#[allow(clippy::type_complexity)]
pub(crate) fn build<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol>(
    settings: &Settings,
    kind: Kind,
    threads: usize,
) -> Result<(Arc<Cluster<K, R, P, V>>, Vec<Session>, ProcTable), HarnessError> {
    let backends = crate::procarray::registered_backends(settings, threads)?;
    // The WAL writer's slot after the backends', when the workload commits asynchronously.
    let aux = match kind {
        Kind::SelectOnly => 0,
        Kind::TpcbLike | Kind::InsertCommit => crate::wal::auxiliary_procs(settings),
    };
    let procs = proc_table(settings, backends + aux);
    let scale = u64::from(settings.scale);
    let updates = kind == Kind::TpcbLike;
    let writes = match kind {
        Kind::SelectOnly => None,
        Kind::TpcbLike | Kind::InsertCommit => {
            let cfg = crate::wal::wal_config(settings, backends + aux);
            let device = crate::wal::device(settings, cfg.segment_size)?;
            let (relid, rows_per_page) = match kind {
                Kind::TpcbLike => (HISTORY, ROWS_PER_HISTORY_PAGE),
                _ => (INSERTS, ROWS_PER_INSERT_PAGE),
            };
            Some(Writes {
                wal: Wal::new(cfg, device).map_err(workload_error)?,
                clog: Clog::new(
                    &settings.clog_config(backends),
                    crate::clog::store(settings),
                )
                .map_err(workload_error)?,
                append: AppendTable {
                    relid,
                    rows_per_page,
                    pages: AtomicU32::new(0),
                    seq_values: AtomicU32::new(0),
                },
            })
        }
    };
    let cluster: Arc<Cluster<K, R, P, V>> = Arc::new(Cluster {
        locks: LockManager::new(settings.lock_manager_config(backends)),
        sinval: SinvalQueue::new(&SinvalConfig::new(backends, settings.sinval_check))
            .map_err(workload_error)?,
        procs: ProcArray::new(&settings.procarray_config(backends)).map_err(workload_error)?,
        buffers: BufMgr::new(&settings.bufmgr_config()).map_err(workload_error)?,
        writes,
        accounts: Table::new(
            ACCOUNTS,
            ACCOUNTS_PKEY,
            ACCOUNTS_PER_SCALE * scale,
            ROWS_PER_HEAP_PAGE,
            updates,
        ),
        tellers: Table::new(
            TELLERS,
            TELLERS_PKEY,
            TELLERS_PER_SCALE * scale,
            SMALL_ROWS_PER_HEAP_PAGE,
            updates,
        ),
        branches: Table::new(
            BRANCHES,
            BRANCHES_PKEY,
            scale,
            SMALL_ROWS_PER_HEAP_PAGE,
            updates,
        ),
        multixact_gen: K::new("MultiXactGen"),
        refetch_updated_row: settings.refetch_updated_row,
        btree_rightmost_fastpath: settings.btree_rightmost_fastpath,
        executor_steps: settings.executor_work.steps_per_statement(
            kind.name(),
            kind.statements(),
            kind != Kind::SelectOnly,
        ),
        executor_commit_steps: settings
            .executor_work
            .steps_at_commit(kind.name(), kind != Kind::SelectOnly),
    });
    // Every connection registers in the ProcArray and the sinval queue; the running threads
    // attach to the first slots and take the first sinval entries.
    let sessions = {
        let mut b = procs.attach().map_err(workload_error)?;
        let mut sessions = Vec::with_capacity(threads);
        for procno in 0..backends {
            cluster.procs.add(&mut b, procno).map_err(workload_error)?;
            let entry = cluster
                .sinval
                .backend_init(&mut b, false)
                .map_err(workload_error)?;
            if procno < threads {
                sessions.push(Session {
                    local: None,
                    sinval: entry,
                    snapshot: Snapshot::new(),
                    pins: PrivateRefCount::new(),
                    wal: cluster.writes.as_ref().map(|w| w.wal.backend()),
                    target: None,
                    known_completed: INVALID_TRANSACTION_ID,
                    known_completed_lsn: 0,
                    oldest_member_set: false,
                });
            }
        }
        sessions
    };
    Ok((cluster, sessions, procs))
}

fn run<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol>(
    settings: &Settings,
    kind: Kind,
    spec: &TeamSpec,
) -> RunResult {
    let (cluster, sessions, procs) = build::<K, R, P, V>(settings, kind, spec.threads)?;
    let sessions = RefCell::new(sessions.into_iter().map(Some).collect::<Vec<_>>());
    let team = |companions: Vec<Companion<'_>>| {
        run_team_with(spec, &procs, companions, |i| {
            let cluster = Arc::clone(&cluster);
            let mut s = sessions.borrow_mut()[i]
                .take()
                .expect("one session per thread");
            move |b: &mut Backend| cluster.transaction(b, &mut s, kind)
        })
    };
    match &cluster.writes {
        Some(w) => crate::wal::with_wal_writer(&w.wal, &procs, spec.warmup, team),
        None => team(Vec::new()),
    }
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
    /// `t_xmax`, without the hint bit (none for a workload that updates nothing).
    pub(crate) fn last_updaters(&self) -> impl Iterator<Item = (u32, usize, u32)> + '_ {
        [&self.accounts, &self.tellers, &self.branches]
            .into_iter()
            .flat_map(|table| {
                table.xmax.iter().enumerate().filter_map(|(row, word)| {
                    let xmax = word.load(Acquire) & !XMAX_COMMITTED;
                    (xmax != INVALID_TRANSACTION_ID).then_some((table.relid, row, xmax))
                })
            })
    }
}

impl crate::PgWorkload for Kind {
    /// The s_lock spinlocks (`msgnumLock`, `insertpos_lck`, `info_lck`) are `R`.
    fn run<K: RawLwLock, R: RawSpinLock>(self, settings: &Settings, spec: &TeamSpec) -> RunResult {
        match self {
            // The buffer partitions spaced as MainLWLockArray's: select-only spreads its reads
            // over the partitions.
            Kind::SelectOnly => match settings.lwlock_padding {
                0 => run::<K, R, NoPadding, LockedVar>(settings, self, spec),
                32 => run::<K, R, Pad32, LockedVar>(settings, self, spec),
                64 => run::<K, R, Pad64, LockedVar>(settings, self, spec),
                _ => run::<K, R, Pad128, LockedVar>(settings, self, spec),
            },
            // The writing workloads: the WAL's insertingAt protocol (17's lock-free read).
            Kind::TpcbLike | Kind::InsertCommit if settings.wal_var_atomic => {
                run::<K, R, Pad128, AtomicVar>(settings, self, spec)
            }
            Kind::TpcbLike | Kind::InsertCommit => {
                run::<K, R, Pad128, LockedVar>(settings, self, spec)
            }
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
