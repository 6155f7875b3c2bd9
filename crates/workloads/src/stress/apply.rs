//! The `apply` part: logical replication's parallel apply of streamed transactions
//! (applyparallelworker.c) with queues so small that the leader's sends time out
//! (`pa_send_data`) and it switches to partial serialization to a spool file
//! (`pa_switch_to_partial_serialize`), applied as worker.c's `apply_handle_stream_*` apply
//! them.
//!
//! Every step replicates a small random publication — transactions running several at a time,
//! some streamed, some aborted, updates and deletes among the inserts — through parallel apply
//! with a tiny queue and a send timeout of a millisecond. Checked at every step: the
//! subscriber ends with the publisher's rows and commit order. The spills (transactions
//! switched to partial serialization) are counted as its events. It has no end check: each
//! step's replication is complete in itself.

use super::{check, Failure, NewPart, Part, Refused, Setup, Step, Tally};
use pglocks_apply::{apply, publish, ApplyConfig, Message, PublisherConfig, Streaming};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use rand::rngs::SmallRng;
use rand::RngExt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        Ok(Arc::new(Apply::<K> {
            procs: setup.procs(),
            _lwlock: PhantomData,
        }))
    }
}

/// Replications on LWLock `K`, each with a subscriber of its own.
struct Apply<K> {
    procs: ProcTable,
    _lwlock: PhantomData<fn() -> K>,
}

impl<K: RawLwLock> Part for Apply<K> {
    fn events_name(&self) -> &'static str {
        "spills"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        Box::new(move |_, t| {
            let pcfg = PublisherConfig {
                tables: 2,
                small_changes: 4,
                large_changes: rng.random_range(20..300),
                large_every: 3,
                work_mem_changes: rng.random_range(5..80),
                streaming: true,
                concurrent: rng.random_range(1..5),
                abort_ratio: 0.1,
                existing_ratio: 0.3,
                seed: rng.random(),
            };
            let published = publish(&pcfg, 12);
            let cfg = ApplyConfig {
                streaming: Streaming::Parallel,
                max_parallel_apply_workers: rng.random_range(1..4),
                queue_size: pglocks_shmmq::SHM_MQ_MINIMUM_SIZE + 8 * rng.random_range(1..64),
                send_retry_interval: Duration::from_millis(1),
                send_timeout: Duration::from_millis(1),
                timeouts: pglocks_lmgr::LockTimeouts {
                    deadlock_timeout: Duration::from_millis(100),
                    lock_timeout: None,
                },
                ..ApplyConfig::default()
            };
            let bytes = published.messages.iter().map(Message::to_bytes);
            let got = apply::<K>(&cfg, bytes)
                .map_err(|e| Failure(format!("apply of seed {} failed: {e}", pcfg.seed)))?;
            t.ops += 1;
            t.events += got.stats.partial_serializations;
            check(t, got.applied.rows == published.rows, || {
                format!(
                    "publication seed {}: the subscriber's {} rows differ from the publisher's {}",
                    pcfg.seed,
                    got.applied.rows.len(),
                    published.rows.len()
                )
            })?;
            check(
                t,
                got.applied.commit_order == published.commit_order,
                || {
                    format!(
                        "publication seed {}: commit order {:?}, the publisher's {:?}",
                        pcfg.seed, got.applied.commit_order, published.commit_order
                    )
                },
            )
        })
    }
    fn finish(&self, _: &mut Backend, _: &Tally, _: &mut Tally) -> Result<(), Failure> {
        Ok(())
    }
}
