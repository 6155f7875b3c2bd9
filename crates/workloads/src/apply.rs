//! The `apply` workload: logical replication of large transactions, the publisher executing
//! them while the subscriber applies them in the subscription's `streaming` mode
//! ([`pglocks_apply`]).
//!
//! Each thread of the sweep is a publisher backend: `threads × txns` transactions of `txn_size`
//! inserts each, run `threads` at a time. A publisher thread executes them change by change
//! (its own insert into an in-memory table, and the change's encoding, as the walsender sends
//! it) and hands each chunk and each whole transaction, as the reorder buffer releases it
//! (past `work_mem_changes` the largest transaction is streamed), to the subscriber's leader
//! apply worker through a channel standing in for the replication connection. The subscriber
//! applies as `mode` says: `off` — whole transactions at commit; `on` — streamed chunks
//! spooled to a file, replayed at commit; `parallel` — chunks applied by up to `workers`
//! parallel apply workers as they arrive.
//!
//! One run is one replication of all of them; the sweep's duration and warm-up are not used.
//! The operations are the changes applied, shared evenly among the publisher threads; the run's
//! elapsed time is from the first insert on the publisher to the last commit on the
//! subscriber, and the latency histogram holds each transaction's time from its first insert
//! to its commit on the subscriber. The metrics: `apply.lag_us_max` and `apply.lag_us_mean`
//! (each commit on the subscriber after the same commit on the publisher),
//! `apply.first_insert_to_commit_ms` (the longest), `apply.spills` (transactions switched to
//! partial serialization), `apply.streamed_parallel`, `apply.streamed_serialized`,
//! `apply.spooled_messages`, `apply.workers_launched`.
//!
//! On a simulated machine the same code runs on virtual threads: the leader apply worker on
//! the first CPU of the pin order (CPU 0 unpinned), and the publisher and the parallel apply
//! workers, which the leader starts as scoped threads (`pglocks_sync::thread::scope`), each on
//! the lowest-numbered free CPU when it starts. The elapsed time and latencies are then virtual
//! time, and the report carries the simulation's host time.
//!
//! Shortcuts: neither side runs an executor. What PostgreSQL spends on a row on either side
//! (the executor, the heap and index insert, the WAL record; on the publisher also the
//! walsender's decoding) is `row_work` steps of CPU work, the same on both sides, on top of
//! the model's own (the publisher's insert into an in-memory table and encoding; the
//! subscriber's decoding, row wait checks and apply). The publisher is a thread of this
//! machine, sharing its CPUs with the subscriber; its connection to the leader is the shim's
//! channel, so a simulated run charges it its semaphores' atomics and wake-ups, not a socket's
//! system calls. On a real machine threads are not pinned.

use crate::preset::Settings;
use crate::{workload_error, PgWorkload, RunResult};
use pglocks_apply::leader::DSM_QUEUE_SIZE;
use pglocks_apply::publisher::FIRST_REL;
use pglocks_apply::{
    apply, publish, ApplyConfig, ApplyError, ApplyOutcome, Message, PublisherConfig, Streaming,
};
use pglocks_harness::team::SimCost;
use pglocks_harness::{TeamRun, TeamSpec};
use pglocks_shmmq::ShmMqConfig;
use pglocks_sim::{Placement, SimThread};
use pglocks_sync::channel;
use pglocks_sync::time::{Duration, Instant};
use std::collections::{BTreeMap, HashMap};

/// The most virtual time a simulated replication may take before it counts as stuck (a lock
/// never released, a worker that never attaches); unsourced, far above any run's length.
const SIM_LIMIT: Duration = Duration::from_secs(600);

/// Implementations of `apply`.
pub const IMPLS: &[crate::Impl] = &[crate::Impl::pg(
    "PostgreSQL's apply: a leader apply worker, spool files, parallel apply workers on shm_mq and the lock manager",
)];

/// The `apply` workload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Apply;

/// What the publisher thread saw: when each transaction made its first change and when its
/// commit was sent, and when the first change of all was made.
struct PublisherTimes {
    start: Instant,
    first_change: HashMap<u32, Instant>,
    committed: HashMap<u32, Instant>,
}

/// The publisher: executes each change, sending each chunk or whole transaction when it ends.
fn run_publisher(
    messages: &[Message],
    row_work: u32,
    link: channel::Sender<Vec<Vec<u8>>>,
) -> PublisherTimes {
    let start = Instant::now();
    let mut times = PublisherTimes {
        start,
        first_change: HashMap::new(),
        committed: HashMap::new(),
    };
    let mut table: BTreeMap<(u32, i64), i64> = BTreeMap::new();
    let mut batch: Vec<Vec<u8>> = Vec::new();
    // The transaction a whole-transaction message belongs to.
    let mut whole = None;
    for m in messages {
        match *m {
            Message::Begin { xid, .. } => whole = Some(xid),
            Message::StreamStart { xid, .. } => {
                times.first_change.entry(xid).or_insert_with(Instant::now);
            }
            Message::Change { xid, rel, change } => {
                if let Some(x) = xid.or(whole) {
                    times.first_change.entry(x).or_insert_with(Instant::now);
                }
                std::hint::black_box(crate::work(row_work, change.key() as u64));
                let _ = pglocks_apply::serial::apply_change(&mut table, rel, change);
            }
            _ => {}
        }
        batch.push(m.to_bytes());
        let sent_xid = match *m {
            Message::Commit { .. } => whole.take(),
            Message::StreamCommit { xid, .. } => Some(xid),
            Message::StreamStop | Message::StreamAbort { .. } => None,
            _ => continue,
        };
        if link.send(std::mem::take(&mut batch)).is_err() {
            break;
        }
        if let Some(x) = sent_xid {
            times.committed.insert(x, Instant::now());
        }
    }
    times
}

impl PgWorkload for Apply {
    fn run<K: pglocks_lwlock::RawLwLock, R: pglocks_spin::RawSpinLock>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        let publishers = spec.threads.max(1);
        let pcfg = PublisherConfig {
            tables: 1,
            small_changes: 1,
            large_changes: settings.txn_size,
            large_every: 1,
            work_mem_changes: settings.work_mem_changes,
            streaming: settings.streaming != Streaming::Off,
            concurrent: publishers,
            abort_ratio: 0.0,
            existing_ratio: 0.0,
            seed: 1,
        };
        let published = publish(&pcfg, publishers * settings.txns);
        let cfg = ApplyConfig {
            streaming: settings.streaming,
            max_parallel_apply_workers: settings.apply_workers,
            queue_size: settings.queue_size.unwrap_or(DSM_QUEUE_SIZE),
            shm_mq: ShmMqConfig {
                batch_send_pending: settings.mq_send_pending,
            },
            row_work: settings.row_work,
            ..ApplyConfig::default()
        };
        // The publisher beside the leader apply worker, which is the calling thread.
        let replicate = || -> (std::thread::Result<PublisherTimes>, Result<ApplyOutcome, ApplyError>) {
            let (link, wire) = channel::bounded::<Vec<Vec<u8>>>(1024);
            pglocks_sync::thread::scope(|s| {
                let publisher =
                    s.spawn(|| run_publisher(&published.messages, settings.row_work, link));
                let outcome = apply::<K>(&cfg, wire.iter().flatten());
                // A failed apply drops the channel's receiving end, which stops the publisher.
                drop(wire);
                (publisher.join(), outcome)
            })
        };
        let ((times, outcome), sim) = match &spec.sim {
            None => (replicate(), None),
            Some(profile) => {
                let mut done = None;
                let cpu = pglocks_harness::topology::cpu_for_thread(&spec.pin_order, 0);
                let leader = SimThread {
                    placement: Placement::Cpu(cpu.unwrap_or(0)),
                    body: Box::new(|| done = Some(replicate())),
                };
                let out = pglocks_sim::run(profile, vec![leader], SIM_LIMIT)?;
                let cost = SimCost {
                    host_time: out.host_time,
                    ops: out.ops,
                };
                let done = done.ok_or(pglocks_harness::HarnessError::ThreadPanicked)?;
                (done, Some(cost))
            }
        };
        let times = times
            .map_err(|_| workload_error(std::io::Error::other("the publisher thread panicked")))?;
        let outcome = outcome.map_err(workload_error)?;
        if outcome.applied.rows.len() != published.rows.len() {
            return Err(workload_error(std::io::Error::other(format!(
                "the subscriber has {} rows, the publisher {}",
                outcome.applied.rows.len(),
                published.rows.len()
            ))));
        }
        debug_assert!(outcome
            .applied
            .rows
            .keys()
            .all(|&(rel, _)| rel == FIRST_REL));

        let end = outcome.commits.last().map_or(times.start, |&(_, t)| t);
        let elapsed = end.duration_since(times.start).max(Duration::from_nanos(1));
        let mut latency = pglocks_harness::latency_histogram();
        let mut stats = pglocks_proc::stats::BackendStats::default();
        for b in &outcome.backends {
            stats.merge(b);
        }
        let (mut lag_max, mut lag_sum, mut longest) = (0u64, 0u64, 0u64);
        for &(xid, at) in &outcome.commits {
            if let Some(first) = times.first_change.get(&xid) {
                let ns = at.saturating_duration_since(*first).as_nanos() as u64;
                let _ = latency.record(ns.clamp(1, latency.high()));
                longest = longest.max(ns);
            }
            if let Some(sent) = times.committed.get(&xid) {
                let lag = at.saturating_duration_since(*sent).as_micros() as u64;
                lag_max = lag_max.max(lag);
                lag_sum += lag;
            }
        }
        let n = outcome.commits.len().max(1) as u64;
        let e = &mut stats.events;
        e.count("apply.lag_us_max", lag_max);
        e.count("apply.lag_us_mean", lag_sum / n);
        e.count("apply.first_insert_to_commit_ms", longest / 1_000_000);
        e.count("apply.spills", outcome.stats.partial_serializations);
        e.count(
            "apply.streamed_parallel",
            outcome.stats.streamed_in_parallel,
        );
        e.count(
            "apply.streamed_serialized",
            outcome.stats.streamed_serialized,
        );
        e.count("apply.spooled_messages", outcome.stats.spooled_messages);
        e.count("apply.workers_launched", outcome.stats.workers_launched);

        let changes = (publishers * settings.txns * settings.txn_size) as u64;
        let per_thread_ops = (0..publishers as u64)
            .map(|i| changes / publishers as u64 + u64::from(i < changes % publishers as u64))
            .collect();
        Ok(TeamRun {
            threads: spec.threads,
            elapsed,
            per_thread_ops,
            latency,
            stats,
            ideal_ops_per_sec: None,
            timeline_ops_per_sec: Vec::new(),
            timeline_interval: pglocks_harness::team::TIMELINE_INTERVAL,
            sim,
        })
    }
}
