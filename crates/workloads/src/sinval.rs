//! The shared-invalidation workload `sinval-check`, on the preset's queue
//! ([`pglocks_sinval::SinvalQueue`]): per operation a backend, with probability `inval_rate`,
//! first sends `inval_batch` invalidation messages (`SIInsertDataEntries`, as a committing DDL
//! does), then checks for and reads what is queued for it (`AcceptInvalidationMessages`, as
//! every transaction start and lock acquisition does).
//!
//! With the default `inval_rate=0` nothing is ever sent, as in pgbench -S: the operation is the
//! bare check, a locked one up to 9.1 (`SInvalReadLock` shared and `msgnumLock`) and one load
//! of the backend's own flag from 9.2. A small rate (`--set inval_rate=0.01`) makes every
//! backend take the locked path once per message sent. `idle_backends` registers backends that
//! never read (sessions sitting idle): writers set their flags too, and once the queue fills
//! they are signalled to catch up (they do not answer) and finally reset; the metrics show
//! `sinval.catchup_signals`, `sinval.resets` and `sinval.messages_read`.

use crate::preset::Settings;
use crate::RunResult;
use crate::{proc_table, workload_error};
use pglocks_harness::{run_team, HarnessError, TeamRun, TeamSpec};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;
use pglocks_sinval::{SharedInvalidationMessage, SinvalConfig, SinvalQueue};
use pglocks_spin::RawSpinLock;
use rand::RngExt;
use std::cell::RefCell;
use std::sync::Arc;

/// Implementations of the shared-invalidation workload.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
    "PostgreSQL's sinvaladt.c of the preset (locked or wait-free check, SInvalRead/WriteLock, msgnumLock)",
)];

fn run<K: RawLwLock, R: RawSpinLock>(
    settings: &Settings,
    spec: &TeamSpec,
) -> Result<TeamRun, HarnessError> {
    let procs = proc_table(settings, spec.threads);
    let idle = settings.idle_backends as usize;
    let cfg = SinvalConfig::new(spec.threads + idle, settings.sinval_check);
    let queue: Arc<SinvalQueue<K, R>> = Arc::new(SinvalQueue::new(&cfg).map_err(workload_error)?);
    // Every backend registers before the run: the running ones, then the idle ones, which
    // keep their entries and never read.
    let handles = {
        let mut b = procs.attach().map_err(workload_error)?;
        let running = (0..spec.threads)
            .map(|_| queue.backend_init(&mut b, false).map(Some))
            .collect::<Result<Vec<_>, _>>()
            .map_err(workload_error)?;
        for _ in 0..idle {
            queue.backend_init(&mut b, false).map_err(workload_error)?;
        }
        RefCell::new(running)
    };
    let (rate, batch) = (settings.inval_rate, settings.inval_batch);
    run_team(spec, &procs, |i| {
        let queue = Arc::clone(&queue);
        let mut me = handles.borrow_mut()[i]
            .take()
            .expect("one handle per thread");
        let messages: Vec<SharedInvalidationMessage> = (0..batch)
            .map(|k| SharedInvalidationMessage::relcache(1, 16_384 + i as u32 * batch + k))
            .collect();
        move |b: &mut Backend| -> Result<(), pglocks_sinval::SinvalError> {
            if rate > 0.0 && b.rng.random::<f64>() < rate {
                queue.insert_data_entries(b, &messages)?;
            }
            queue.accept_invalidation_messages(b, &mut me).map(drop)
        }
    })
}

/// The `sinval-check` workload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Check;

impl crate::PgWorkload for Check {
    /// `msgnumLock` is an s_lock spinlock, `R`.
    fn run<K: RawLwLock, R: RawSpinLock>(self, settings: &Settings, spec: &TeamSpec) -> RunResult {
        run::<K, R>(settings, spec)
    }
}
