//! A run's cluster, built as a server and `pgbench -i` leave it before the first transaction:
//! the shared memory the postmaster creates (ipci.c's `CreateSharedMemoryAndSemaphores`: the
//! lock manager, the shared invalidation queue, the ProcArray, the buffer pool and, for the
//! workloads that write, the WAL and the commit log), sized by the preset for the run's
//! connections; the tables of `super::schema` as pgbench.c's `initGenerateDataClientSide` fills
//! them; and every connection registered as a starting backend registers itself (proc.c's
//! `InitProcessPhase2`: `ProcArrayAdd`; postinit.c's `InitPostgres`: `SharedInvalBackendInit`).
//!
//! [`build`] makes a proc table of `--set backends` connections (which must include every
//! running thread) and, for a workload that writes, the auxiliary slots after them (the WAL
//! writer's, when commits are asynchronous); makes the shared structures and the three keyed
//! tables at pgbench's sizes for the scale (with an `xmax` word per row for `tpcb-like`, which
//! updates them); registers every connection in the ProcArray and the sinval queue; and gives
//! the first `threads` connections a [`Session`] each: the run's threads attach to the first
//! slots of the proc table and take the first sinval entries.
//!
//! # Differences from PostgreSQL
//!
//! - The load itself is not run: the tables start at their loaded sizes, with no row updated,
//!   and the buffer pool starts empty, so a run's first visit to a page reads it in.

use super::schema::{
    AppendTable, Table, ACCOUNTS, ACCOUNTS_PER_SCALE, ACCOUNTS_PKEY, ACCOUNTS_TUPLE_LEN, BRANCHES,
    BRANCHES_PKEY, HISTORY, HISTORY_TUPLE_LEN, INSERTS, INSERTS_TUPLE_LEN, ROWS_PER_HEAP_PAGE,
    ROWS_PER_HISTORY_PAGE, ROWS_PER_INSERT_PAGE, SMALL_ROWS_PER_HEAP_PAGE, SMALL_TUPLE_LEN,
    TELLERS, TELLERS_PER_SCALE, TELLERS_PKEY,
};
use super::{Cluster, Kind, Session, Writes};
use crate::preset::Settings;
use crate::{proc_table, workload_error};
use pglocks_bufmgr::{BufMgr, PrivateRefCount};
use pglocks_harness::HarnessError;
use pglocks_lmgr::LockManager;
use pglocks_lwlock::{Padding, RawLwLock, VarProtocol};
use pglocks_proc::ProcTable;
use pglocks_procarray::{ProcArray, Snapshot, INVALID_TRANSACTION_ID};
use pglocks_sinval::{SinvalConfig, SinvalQueue};
use pglocks_slru::clog::Clog;
use pglocks_spin::RawSpinLock;
use pglocks_sync::shmem::PlacedBox;
use pglocks_sync::CachePadded;
use pglocks_wal::Wal;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

/// The cluster of a run for `threads` running backends on a machine of `numa_nodes` NUMA
/// nodes, every connection registered in the ProcArray and the sinval queue, and one session
/// per running thread (the threads attach to the first slots of the returned table and take
/// the first sinval entries).
#[allow(clippy::type_complexity)]
pub(crate) fn build<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol>(
    settings: &Settings,
    kind: Kind,
    threads: usize,
    numa_nodes: usize,
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
            let (relid, rows_per_page, tuple_len) = match kind {
                Kind::TpcbLike => (HISTORY, ROWS_PER_HISTORY_PAGE, HISTORY_TUPLE_LEN),
                _ => (INSERTS, ROWS_PER_INSERT_PAGE, INSERTS_TUPLE_LEN),
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
                    tuple_len,
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
        // The mapping table's free lists are dynahash's, as the lock table's are.
        buffers: BufMgr::with_hash_freelists(
            &settings.bufmgr_config(numa_nodes),
            settings.lock_hash_freelists,
        )
        .map_err(workload_error)?,
        writes,
        accounts: Table::new(
            "pgbench_accounts",
            ACCOUNTS,
            ACCOUNTS_PKEY,
            ACCOUNTS_PER_SCALE * scale,
            (ROWS_PER_HEAP_PAGE, ACCOUNTS_TUPLE_LEN),
            updates,
        ),
        tellers: Table::new(
            "pgbench_tellers",
            TELLERS,
            TELLERS_PKEY,
            TELLERS_PER_SCALE * scale,
            (SMALL_ROWS_PER_HEAP_PAGE, SMALL_TUPLE_LEN),
            updates,
        ),
        branches: Table::new(
            "pgbench_branches",
            BRANCHES,
            BRANCHES_PKEY,
            scale,
            (SMALL_ROWS_PER_HEAP_PAGE, SMALL_TUPLE_LEN),
            updates,
        ),
        multixact_gen: PlacedBox::new("MultiXactGenLock", CachePadded::new(K::new("MultiXactGen"))),
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
        client_round_trip: settings.client_round_trip,
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
                    heap_targets: Vec::new(),
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
