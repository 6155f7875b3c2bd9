//! The subscription's settings for an apply: the `streaming` option (`LOGICALREP_STREAM_*`,
//! pg_subscription.h), `max_parallel_apply_workers_per_subscription`, the parallel apply
//! workers' queue size and send timeouts (applyparallelworker.c), and the lock waits'
//! timeouts. Shared by the leader (the `leader` module) and the parallel apply workers
//! (the `parallel` module).

use pglocks_lmgr::LockTimeouts;
use pglocks_shmmq::ShmMqConfig;
use std::path::PathBuf;
use std::time::Duration;

/// applyparallelworker.c's `DSM_QUEUE_SIZE`: each worker's shm_mq, 16 MB.
pub const DSM_QUEUE_SIZE: usize = 16 * 1024 * 1024;
/// The default of `max_parallel_apply_workers_per_subscription`.
pub const DEFAULT_MAX_PARALLEL_APPLY_WORKERS: usize = 2;
/// `MAX_PARALLEL_WORKER_LIMIT`, the setting's upper bound.
pub const MAX_PARALLEL_WORKER_LIMIT: usize = 1024;

/// The subscription's `streaming` option (`LOGICALREP_STREAM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Streaming {
    /// `off`: the publisher sends every transaction whole at commit; the leader applies all.
    Off,
    /// `on` (14+): streamed transactions are spooled and applied at commit (the default
    /// before 18).
    On,
    /// `parallel` (16+; the default from 18): streamed transactions go to parallel workers.
    Parallel,
}

impl Streaming {
    /// The option's name.
    pub fn name(self) -> &'static str {
        match self {
            Streaming::Off => "off",
            Streaming::On => "on",
            Streaming::Parallel => "parallel",
        }
    }
}

/// What the subscriber runs with.
#[derive(Debug, Clone)]
pub struct ApplyConfig {
    /// The `streaming` option.
    pub streaming: Streaming,
    /// `max_parallel_apply_workers_per_subscription`.
    pub max_parallel_apply_workers: usize,
    /// Each worker's queue, in bytes ([`DSM_QUEUE_SIZE`]).
    pub queue_size: usize,
    /// The queue's release behaviour.
    pub shm_mq: ShmMqConfig,
    /// `SHM_SEND_RETRY_INTERVAL_MS`.
    pub send_retry_interval: Duration,
    /// `SHM_SEND_TIMEOUT_MS`: past it the leader serializes the rest of the transaction.
    pub send_timeout: Duration,
    /// `deadlock_timeout` and `lock_timeout` of the workers' waits.
    pub timeouts: LockTimeouts,
    /// The subscription's oid (in the apply locks' tags and the spool files' names).
    pub subscription: u32,
    /// The subscriber's database.
    pub database: u32,
    /// Where spool files go (a fresh directory is made under it; the system's temporary
    /// directory when `None`).
    pub spool_dir: Option<PathBuf>,
    /// CPU work per applied change, in [`busy_work`](pglocks_sync::hint::busy_work) steps:
    /// the executor, heap, index and WAL work of applying a row, which this model does not do
    /// (0: none).
    pub row_work: u32,
}

impl Default for ApplyConfig {
    /// PostgreSQL 18's defaults.
    fn default() -> Self {
        Self {
            streaming: Streaming::Parallel,
            max_parallel_apply_workers: DEFAULT_MAX_PARALLEL_APPLY_WORKERS,
            queue_size: DSM_QUEUE_SIZE,
            shm_mq: ShmMqConfig::default(),
            send_retry_interval: Duration::from_millis(pglocks_shmmq::SHM_SEND_RETRY_INTERVAL_MS),
            send_timeout: Duration::from_millis(pglocks_shmmq::SHM_SEND_TIMEOUT_MS),
            timeouts: LockTimeouts::default(),
            subscription: 16_600,
            database: 5,
            spool_dir: None,
            row_work: 0,
        }
    }
}
