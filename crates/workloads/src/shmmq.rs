//! The `shm-mq` workload: messages of `msg_size` bytes streamed through single-producer
//! single-consumer queues of `queue_size` bytes, as a parallel query's workers send tuples to the
//! leader (`tqueue.c`, 64 KB per worker) or parallel apply's leader sends changes to a worker
//! (`DSM_QUEUE_SIZE`, 16 MB).
//!
//! Threads pair up: thread 2k sends to thread 2k + 1 on their own queue, with blocking sends and
//! receives (each end sleeps on its latch when the ring is full or empty). With an odd count the
//! last thread has no partner: it sends and receives on its own queue in turns, non-blocking, so a
//! one-thread run measures the queue without any waiting. An operation is one message received:
//! the harness also counts the senders' calls, and the runner removes them after the run (the
//! latency histogram still holds both ends' calls). The metrics count `shm_mq.bytes` and
//! `shm_mq.messages` received and give `shm_mq.mb_per_sec` (10^6 bytes per second).
//!
//! Implementations: `pg`, PostgreSQL's `shm_mq` ([`pglocks_shmmq`], `mq_send_pending` from the
//! preset; sends without `force_flush`, as the tuple queue sends), and `crossbeam`, a
//! `crossbeam_channel::bounded` channel of `Vec<u8>` holding as many messages as the ring would.
//!
//! When a run stops, each thread drops its end: a `pg` handle detaches the queue (as
//! `shm_mq_detach_callback` would) and a channel end disconnects, which wakes a partner asleep on
//! the other end.

use crate::preset::Settings;
use crate::{proc_table, workload_error, Impl, Model, RunResult};
use pglocks_harness::{run_team, TeamSpec};
use pglocks_proc::{Backend, ProcTable};
use pglocks_shmmq::{
    ShmMq, ShmMqConfig, ShmMqError, ShmMqHandle, ShmMqResult, MAXIMUM_ALIGNOF, SHM_MQ_HEADER_SIZE,
};
use std::sync::{Arc, Mutex};

/// Implementations of `shm-mq`.
pub const IMPLS: &[Impl] = &[
    Impl::pg(
        "PostgreSQL's shm_mq.c: a byte ring with atomic read/written counters, ends sleeping on their latches",
    ),
    Impl::external(
        "crossbeam",
        "crossbeam_channel::bounded of Vec<u8>, as many messages as the ring holds",
        |_, settings, spec| finish(run_crossbeam(settings, spec), spec),
    ),
];

/// What thread `i` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Sends to thread `i + 1`.
    Sender,
    /// Receives from thread `i - 1`.
    Receiver,
    /// The odd one out: both ends of its own queue, in turns.
    Solo,
}

fn role(i: usize, threads: usize) -> Role {
    if i % 2 == 1 {
        Role::Receiver
    } else if i + 1 < threads {
        Role::Sender
    } else {
        Role::Solo
    }
}

/// One run of PostgreSQL's shm_mq (its spinlock-free ring takes none of the caller's locks).
pub(crate) fn run(_: Model, settings: &Settings, spec: &TeamSpec) -> RunResult {
    finish(run_pg(settings, spec), spec)
}

/// Counts only messages received as operations, and adds the throughput in bytes.
fn finish(run: RunResult, spec: &TeamSpec) -> RunResult {
    let mut run = run?;
    let before = run.total_ops();
    for (i, ops) in run.per_thread_ops.iter_mut().enumerate() {
        if role(i, spec.threads) == Role::Sender {
            *ops = 0;
        }
    }
    let share = if before == 0 {
        0.0
    } else {
        run.total_ops() as f64 / before as f64
    };
    for x in &mut run.timeline_ops_per_sec {
        *x *= share;
    }
    let bytes = run
        .stats
        .events
        .counters()
        .iter()
        .find(|c| c.0 == "shm_mq.bytes")
        .map_or(0, |c| c.1);
    let secs = run.elapsed.as_secs_f64();
    if secs > 0.0 {
        let mb = (bytes as f64 / secs / 1e6).round() as u64;
        run.stats.events.count("shm_mq.mb_per_sec", mb);
    }
    Ok(run)
}

/// Counts one received message of `len` bytes.
#[inline]
fn received(b: &mut Backend, len: usize) {
    b.stats.events.count("shm_mq.messages", 1);
    b.stats.events.count("shm_mq.bytes", len as u64);
}

/// One thread's end of a `pg` queue: the queue, and the handles made at the first operation
/// (setting the sender or receiver needs the thread's backend).
struct PgEnd {
    mq: Arc<ShmMq>,
    procs: ProcTable,
    role: Role,
    tx: Option<ShmMqHandle>,
    rx: Option<ShmMqHandle>,
}

impl PgEnd {
    /// `shm_mq_set_sender` / `shm_mq_set_receiver` and `shm_mq_attach`, once.
    #[cold]
    fn attach(&mut self, b: &mut Backend) -> Result<(), ShmMqError> {
        if matches!(self.role, Role::Sender | Role::Solo) {
            self.mq.set_sender(b)?;
            self.tx = Some(ShmMqHandle::attach(Arc::clone(&self.mq), b)?);
        }
        if matches!(self.role, Role::Receiver | Role::Solo) {
            self.mq.set_receiver(b)?;
            self.rx = Some(ShmMqHandle::attach(Arc::clone(&self.mq), b)?);
        }
        Ok(())
    }

    #[inline]
    fn op(&mut self, b: &mut Backend, payload: &[u8]) -> Result<(), ShmMqError> {
        if self.tx.is_none() && self.rx.is_none() {
            self.attach(b)?;
        }
        match (&mut self.tx, &mut self.rx) {
            // A detached queue means the partner has stopped: the run is ending.
            (Some(tx), None) => {
                let _ = tx.send(b, payload, false, false)?;
            }
            (None, Some(rx)) => {
                if let ShmMqResult::Success(m) = rx.receive(b, false)? {
                    let len = m.len();
                    received(b, len);
                }
            }
            (Some(tx), Some(rx)) => {
                // Both ends, never waiting: flush every message so the receive can see it.
                let mut sent = false;
                loop {
                    if !sent {
                        sent = tx.send(b, payload, true, true)?.is_success();
                    }
                    if let ShmMqResult::Success(m) = rx.receive(b, true)? {
                        let len = m.len();
                        received(b, len);
                        return Ok(());
                    }
                    pglocks_sync::hint::spin_loop();
                }
            }
            (None, None) => {}
        }
        Ok(())
    }
}

impl Drop for PgEnd {
    /// A thread that stopped before its first operation never attached: tell its partner, which
    /// may be waiting for it to attach, that it is gone.
    fn drop(&mut self) {
        if self.tx.is_none() && self.rx.is_none() {
            self.mq.mark_counterparty_gone(&self.procs);
        }
    }
}

fn run_pg(settings: &Settings, spec: &TeamSpec) -> RunResult {
    let procs = proc_table(settings, spec.threads);
    let config = ShmMqConfig {
        batch_send_pending: settings.mq_send_pending,
    };
    let queues = (0..spec.threads.div_ceil(2))
        .map(|_| ShmMq::new(queue_size(settings), config).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()
        .map_err(workload_error)?;
    let payload: Arc<[u8]> = message(settings.msg_size).into();
    run_team(spec, &procs, |i| {
        let mut end = PgEnd {
            mq: Arc::clone(&queues[i / 2]),
            procs: procs.clone(),
            role: role(i, spec.threads),
            tx: None,
            rx: None,
        };
        let payload = Arc::clone(&payload);
        move |b: &mut Backend| end.op(b, &payload)
    })
}

/// The queue size: the `queue_size` knob, or parallel query's 64 KB per worker.
fn queue_size(settings: &Settings) -> usize {
    settings.queue_size.unwrap_or(65_536)
}

/// A message's bytes.
fn message(len: usize) -> Vec<u8> {
    (0..len).map(|k| k as u8).collect()
}

/// One thread's end of a channel.
enum ChannelEnd {
    Sender(crossbeam_channel::Sender<Vec<u8>>),
    Receiver(crossbeam_channel::Receiver<Vec<u8>>),
    Solo(
        crossbeam_channel::Sender<Vec<u8>>,
        crossbeam_channel::Receiver<Vec<u8>>,
    ),
}

impl ChannelEnd {
    #[inline]
    fn op(&self, b: &mut Backend, payload: &[u8]) {
        // A disconnected channel means the partner has stopped: the run is ending.
        match self {
            ChannelEnd::Sender(tx) => {
                let _ = tx.send(payload.to_vec());
            }
            ChannelEnd::Receiver(rx) => {
                if let Ok(m) = rx.recv() {
                    received(b, m.len());
                }
            }
            ChannelEnd::Solo(tx, rx) => {
                if tx.try_send(payload.to_vec()).is_ok() {
                    if let Ok(m) = rx.try_recv() {
                        received(b, m.len());
                    }
                }
            }
        }
    }
}

/// Messages a ring of `queue_size` holds: each takes a length word and its padded payload.
fn channel_capacity(settings: &Settings) -> usize {
    let ring = queue_size(settings).saturating_sub(SHM_MQ_HEADER_SIZE);
    let per_message =
        MAXIMUM_ALIGNOF + settings.msg_size.div_ceil(MAXIMUM_ALIGNOF) * MAXIMUM_ALIGNOF;
    (ring / per_message).max(1)
}

fn run_crossbeam(settings: &Settings, spec: &TeamSpec) -> RunResult {
    let procs = proc_table(settings, spec.threads);
    let capacity = channel_capacity(settings);
    let mut ends: Vec<Option<ChannelEnd>> = Vec::with_capacity(spec.threads);
    for i in 0..spec.threads {
        match role(i, spec.threads) {
            Role::Sender => {
                let (tx, rx) = crossbeam_channel::bounded(capacity);
                ends.push(Some(ChannelEnd::Sender(tx)));
                ends.push(Some(ChannelEnd::Receiver(rx)));
            }
            Role::Solo => {
                let (tx, rx) = crossbeam_channel::bounded(capacity);
                ends.push(Some(ChannelEnd::Solo(tx, rx)));
            }
            Role::Receiver => {}
        }
    }
    let ends = Mutex::new(ends);
    let payload: Arc<[u8]> = message(settings.msg_size).into();
    run_team(spec, &procs, |i| {
        let end = ends.lock().unwrap_or_else(|poisoned| poisoned.into_inner())[i].take();
        let payload = Arc::clone(&payload);
        move |b: &mut Backend| -> Result<(), crate::WorkloadError> {
            if let Some(end) = &end {
                end.op(b, &payload);
            }
            Ok(())
        }
    })
}
