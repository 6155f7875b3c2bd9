//! The transactions: what a backend does, call by call, for one of pgbench's transactions
//! (the parent module's doc lists each workload's sequence), and the run that repeats them.
//!
//! Every transaction is the same frame around its statements:
//!
//! 1. xact.c's `StartTransaction` (`start`): the lock on the transaction's virtual xid
//!    (lock.c's `VirtualXactLockTableInsert`) and `AtStart_Cache`'s `AcceptInvalidationMessages`;
//! 2. each statement under the extended protocol (`statement`): the snapshot postgres.c's
//!    `exec_bind_message` takes, the relation locks of the plan (plancache.c's
//!    `AcquireExecutorLocks`, then the executor's opens; lmgr.c's `LockRelationOid`, which
//!    accepts invalidation messages after a lock newly granted), and the portal's snapshot
//!    (pquery.c's `PortalStart` or `PortalRunMulti`); then the statement's heap and index
//!    access (`super::heap`); the first write takes the transaction's xid (xact.c's
//!    `AssignTransactionId`: varsup.c's `GetNewTransactionId`, clog.c's `ExtendCLOG`, lmgr.c's
//!    `XactLockTableInsert`);
//! 3. the end: for a transaction with an xid, xact.c's `RecordTransactionCommit` (`commit`:
//!    the commit record flushed, or handed to the WAL writer, and the commit log set); then
//!    procarray.c's `ProcArrayEndTransaction` and lock.c's `LockReleaseAll` (`end`).
//!
//! `insert-commit`'s `nextval` (sequence.c's `nextval_internal`) is here too.
//!
//! A run (`run`, from [`crate::PgWorkload`]) builds the cluster (`super::init`) and runs the
//! team, each thread with its own session; an operation is [`Cluster::transaction`].
//!
//! # Differences from PostgreSQL
//!
//! - The executor's own work is not modelled (see the parent module); `--set executor_work`
//!   puts busy steps in its place at each statement's start and at a writing transaction's
//!   commit.
//! - The client is not modelled: a backend's next message is there at once, unless `--set
//!   client_round_trip` makes it wait that long at each message (BEGIN, each statement and END
//!   for `tpcb-like`; the one statement of the others), idle, as it waits in `ReadCommand`;
//!   the client's own CPU is not charged.
//! - The ProcArray's stand-in commit bits
//!   ([`ProcArray::commit_tree`](pglocks_procarray::ProcArray::commit_tree)) are kept in step
//!   with the commit log.
//! - The writing workloads use 128-byte LWLock spacing (`lwlock_padding` is read by
//!   `select-only` only).

use super::init::build;
use super::page::{item_id, PD_LSN, SEQUENCE_DATA, SEQUENCE_TUPLE};
use super::schema::{Table, DATABASE, HISTORY, INSERTS, INSERTS_PKEY, INSERTS_SEQ};
use super::{Cluster, Kind, Session, Txn, TxnError, Writer};
use crate::preset::Settings;
use crate::RunResult;
use pglocks_harness::{run_team_with, Companion, TeamSpec};
use pglocks_lmgr::{LocalLocks, LockAcquireResult, LockMode, LockOwner, LockTag, LockTimeouts};
use pglocks_lwlock::{
    AtomicVar, LockedVar, LwLockMode, NoPadding, Pad128, Pad32, Pad64, Padding, RawLwLock,
    VarProtocol,
};
use pglocks_proc::Backend;
use pglocks_procarray::INVALID_TRANSACTION_ID;
use pglocks_slru::clog::XidStatus;
use pglocks_spin::RawSpinLock;
use rand::RngExt;
use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// sequence.c's `SEQ_LOG_VALS`: `nextval` writes a WAL record once per this many values.
const SEQ_LOG_VALS: u32 = 32;
/// `RM_SEQ_ID`, the sequence resource manager, and its `XLOG_SEQ_LOG`.
const RM_SEQ_ID: u8 = 15;
const XLOG_SEQ_LOG: u8 = 0x00;
/// WAL payload of a sequence record: `xl_seq_rec` and the sequence tuple.
const SEQ_LOG_PAYLOAD: [u8; 56] = [0x53; 56];

impl<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol> Cluster<K, R, P, V> {
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
            Kind::SelectOnly => self.select_only(&mut Txn::new(b, s, &mut local, None)),
            Kind::TpcbLike | Kind::InsertCommit => self.writing(b, s, &mut local, kind),
        };
        s.local = Some(local);
        done
    }

    /// pgbench -S's transaction.
    fn select_only(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        self.start(t)?;
        let rels = [self.accounts.relid, self.accounts.pkey];
        self.statement(t, &rels, LockMode::AccessShare)?;
        let aid = t.b.rng.random_range(0..self.accounts.rows);
        self.fetch_row(t, &self.accounts, aid)?;
        self.end(t)
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
        let writer = Writer { w, wal: &mut wal };
        let mut t = Txn::new(b, s, local, Some(writer));
        let done = match kind {
            Kind::TpcbLike => self.tpcb_like(&mut t),
            _ => self.insert_commit(&mut t),
        };
        s.wal = Some(wal);
        done
    }

    /// pgbench's default transaction.
    fn tpcb_like(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        let aid = t.b.rng.random_range(0..self.accounts.rows);
        let tid = t.b.rng.random_range(0..self.tellers.rows);
        let bid = t.b.rng.random_range(0..self.branches.rows);
        // BEGIN: a message of its own, as END is.
        self.client_read(t.b);
        self.start(t)?;
        let accounts = [self.accounts.relid, self.accounts.pkey];
        self.statement(t, &accounts, LockMode::RowExclusive)?;
        self.assign_xid(t)?;
        self.update_row(t, &self.accounts, aid)?;
        self.statement(t, &accounts, LockMode::AccessShare)?;
        self.fetch_row(t, &self.accounts, aid)?;
        self.update_statement(t, &self.tellers, tid)?;
        self.update_statement(t, &self.branches, bid)?;
        self.statement(t, &[HISTORY], LockMode::RowExclusive)?;
        self.heap_insert(t)?;
        self.client_read(t.b);
        self.commit(t)
    }

    /// One `INSERT` and its commit: the statement (its table and, by `ExecOpenIndices`, its
    /// index locked `RowExclusiveLock`), `nextval` of the key's sequence, the xid, the heap
    /// insert, the index insert, `ExecCloseIndices`' release of the index lock, the commit.
    fn insert_commit(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        self.start(t)?;
        let rels = [INSERTS, INSERTS_PKEY];
        self.statement(t, &rels, LockMode::RowExclusive)?;
        self.nextval(t)?;
        self.assign_xid(t)?;
        self.heap_insert(t)?;
        self.serial_index_insert(t)?;
        let index = LockTag::relation(DATABASE, INSERTS_PKEY);
        self.locks.release(
            t.b,
            t.local,
            index,
            LockMode::RowExclusive,
            LockOwner::Transaction,
        )?;
        self.commit(t)
    }

    /// The start of every transaction: the vxid lock and `AtStart_Cache`.
    fn start(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        self.locks.start_transaction(t.b, t.local)?;
        self.sinval
            .accept_invalidation_messages(t.b, &mut t.s.sinval)?;
        t.s.oldest_member_set = false;
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
        t: &mut Txn<'_, K, V, R>,
        relations: &[u32],
        mode: LockMode,
    ) -> Result<(), TxnError> {
        self.client_read(t.b);
        if self.executor_steps > 0 {
            std::hint::black_box(crate::work(self.executor_steps, t.b.procno() as u64));
        }
        self.procs.get_snapshot_data(t.b, &mut t.s.snapshot)?;
        for &relid in relations {
            self.lock_relation(t, relid, mode)?;
        }
        self.procs.get_snapshot_data(t.b, &mut t.s.snapshot)?;
        Ok(())
    }

    /// postgres.c's `ReadCommand` between two messages: the backend idle for
    /// `client_round_trip` (wait event `ClientRead`) while its client takes its turn.
    #[inline]
    fn client_read(&self, b: &mut Backend) {
        if !self.client_round_trip.is_zero() {
            b.sleep_as_wait(self.client_round_trip, "ClientRead", "Client");
        }
    }

    /// `LockRelationOid` in `mode`: the lock, then `AcceptInvalidationMessages` if it is
    /// newly granted.
    fn lock_relation(
        &self,
        t: &mut Txn<'_, K, V, R>,
        relid: u32,
        mode: LockMode,
    ) -> Result<(), TxnError> {
        let got = self.lock(t, LockTag::relation(DATABASE, relid), mode)?;
        if got != LockAcquireResult::AlreadyHeld {
            self.sinval
                .accept_invalidation_messages(t.b, &mut t.s.sinval)?;
        }
        Ok(())
    }

    /// A transaction-owned lock on `tag` in `mode`, waiting as long as it takes.
    pub(super) fn lock(
        &self,
        t: &mut Txn<'_, K, V, R>,
        tag: LockTag,
        mode: LockMode,
    ) -> Result<LockAcquireResult, TxnError> {
        let owner = LockOwner::Transaction;
        Ok(self
            .locks
            .acquire(t.b, t.local, tag, mode, owner, &LockTimeouts::default())?)
    }

    /// `AssignTransactionId`: the xid (extending the commit log at a new page), then its lock;
    /// the transaction has its xid from then on.
    fn assign_xid(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        let w = t.writes()?;
        let xid = self
            .procs
            .assign_xid_extending(t.b, None, |b, xid| w.clog.extend(b, xid))?;
        self.locks.xact_lock_table_insert(t.b, t.local, xid)?;
        t.xid = xid;
        Ok(())
    }

    /// An `UPDATE` statement of `row` of `table`: its table and key locked `RowExclusiveLock`
    /// (the key by the scan through it, or only by `ExecOpenIndices` when the table is scanned
    /// whole, and then given back at the statement's end by `ExecCloseIndices`; after an index
    /// scan that release only drops one of the lock's two references), then the update.
    fn update_statement(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
    ) -> Result<(), TxnError> {
        let rels = [table.relid, table.pkey];
        self.statement(t, &rels, LockMode::RowExclusive)?;
        self.update_row(t, table, row)?;
        if table.seq_scan {
            let key = LockTag::relation(DATABASE, table.pkey);
            let owner = LockOwner::Transaction;
            self.locks
                .release(t.b, t.local, key, LockMode::RowExclusive, owner)?;
        }
        Ok(())
    }

    /// Models `nextval_internal`: the sequence locked `RowExclusiveLock` once per transaction
    /// (`lock_and_open_sequence`, owned by the top transaction), its one page read and locked
    /// exclusively while the value is taken, and a WAL record once per [`SEQ_LOG_VALS`]
    /// values (the sequence's `log_cnt`, shared by every backend). On the page, `read_seq_tuple`
    /// reads the tuple's line pointer and the tuple, and the new value is written into it
    /// (`last_value`, `log_cnt`, `is_called`), and `pd_lsn` after a record.
    fn nextval(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        self.lock_relation(t, INSERTS_SEQ, LockMode::RowExclusive)?;
        let page = self.read_locked(t, INSERTS_SEQ, 0, LwLockMode::Exclusive)?;
        self.page_read(page, item_id(1));
        self.page_read(page, SEQUENCE_TUPLE);
        let seq = &t.writes()?.append.seq_values;
        // The page's content lock orders the countdown's changes.
        let n = seq.load(Relaxed);
        seq.store((n + 1) % SEQ_LOG_VALS, Relaxed);
        if n == 0 {
            t.log(
                INVALID_TRANSACTION_ID,
                RM_SEQ_ID,
                XLOG_SEQ_LOG,
                &SEQ_LOG_PAYLOAD,
            )?;
            self.page_write(page, PD_LSN);
        }
        self.page_write(page, SEQUENCE_DATA);
        self.unlock_release(t, page)
    }

    /// `RecordTransactionCommit`: the commit record flushed (group commit, on the
    /// `flush_device`), then `TransactionIdCommitTree` in the commit log (11's group update);
    /// or, with `synchronous_commit = off`, handed to the WAL writer, then
    /// `TransactionIdAsyncCommitTree` (the commit log keeps the commit's LSN); then the
    /// transaction's end.
    fn commit(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        let xid = t.xid;
        if self.executor_commit_steps > 0 {
            std::hint::black_box(crate::work(self.executor_commit_steps, u64::from(xid)));
        }
        let Some(wr) = t.writer.as_mut() else {
            return Err(TxnError::NotWriting);
        };
        let end = wr.w.wal.commit(t.b, wr.wal, xid)?;
        // TransactionIdCommitTree passes no LSN; the asynchronous one passes the record's end.
        let lsn = if wr.w.wal.config().synchronous_commit {
            0
        } else {
            end
        };
        wr.w.clog
            .set_tree_status(t.b, xid, &[], XidStatus::Committed, lsn)?;
        self.procs.commit_tree(xid, &[])?;
        self.end(t)
    }

    /// The end of a transaction: `ProcArrayEndTransaction` (with the transaction's xid, if it
    /// has one) and `LockReleaseAll`.
    fn end(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        self.procs.end_transaction(t.b, t.xid)?;
        self.locks.release_all(t.b, t.local, false)?;
        Ok(())
    }
}

/// A run of `kind` on one team: the cluster built, each thread given its session, and beside
/// the team, for a workload that writes, the WAL writer when commits are asynchronous.
fn run<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol>(
    settings: &Settings,
    kind: Kind,
    spec: &TeamSpec,
) -> RunResult {
    let nodes = crate::numa_nodes(spec.sim.as_deref());
    let (cluster, sessions, procs) = build::<K, R, P, V>(settings, kind, spec.threads, nodes)?;
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

impl Kind {
    /// A run with the spinlock `R` of [`crate::SPINLOCK_IMPLS`]: the LWLock array padded to 128
    /// bytes, as every release from 9.6 on pads it (the other spacings are built only for the
    /// release's own spinlocks; see [`crate::NotBeside`]).
    pub(crate) fn run_with_spinlock<K: RawLwLock, R: RawSpinLock>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        match settings.lwlock_padding {
            128 if settings.wal_var_atomic && self != Kind::SelectOnly => {
                run::<K, R, Pad128, AtomicVar>(settings, self, spec)
            }
            128 => run::<K, R, Pad128, LockedVar>(settings, self, spec),
            other => Err(crate::workload_error(crate::NotBeside::Padding(other))),
        }
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
