//! The leader apply worker (worker.c's `apply_dispatch` and `apply_handle_*`, with
//! applyparallelworker.c's leader side): receives the publisher's messages and applies them —
//! itself, spooled to a file, or through a parallel apply worker, as the subscription's
//! `streaming` option says.
//!
//! # What happens to a transaction
//! A transaction sent whole (`BEGIN` … `COMMIT`) is applied by the leader as it arrives, in a
//! local transaction of its own. A streamed one (`STREAM START` … `STREAM COMMIT`) takes one of
//! three paths, chosen at its first segment:
//!
//! * **Serialize** (`streaming = on`, or `parallel` with no free worker; PostgreSQL's
//!   `TRANS_LEADER_SERIALIZE`): every change goes to a spool file; at `STREAM COMMIT` the leader
//!   replays the file in one local transaction and commits ([`spool`]).
//! * **Send to a parallel worker** (`parallel`; `TRANS_LEADER_SEND_TO_PARALLEL`): every message
//!   goes to the worker's shm_mq, and the worker applies the changes as they come
//!   ([`parallel`]). Two session locks on the remote transaction order them.
//!   The *stream lock*: the leader takes it `AccessExclusive` before it sends `STREAM STOP` and
//!   releases it after it has sent the next `STREAM START`; a worker that has applied every chunk
//!   sent so far waits on it (`AccessShare`) for the next. The *transaction lock*: the worker
//!   holds it `AccessExclusive` from its first segment to its commit; at `STREAM COMMIT` the
//!   leader sends the commit, releases the stream lock and waits for the worker on it
//!   (`AccessShare`) before it reads another message, so the subscriber commits in the
//!   publisher's order. Both waits are in the lock manager, so a cycle through them and a row
//!   wait (the leader applying a transaction of its own, the worker waiting for the next chunk)
//!   is a deadlock the deadlock detector finds.
//! * **Partial serialize** (`TRANS_LEADER_PARTIAL_SERIALIZE`): sends to a worker are
//!   non-blocking with a timeout (`pa_send_data`). A worker that does not drain its queue — it
//!   may wait for a row another worker changed, while that one waits for its next chunk, which
//!   the leader cannot send because it is stuck on the full queue: a cycle the deadlock detector
//!   cannot see — makes the send time out. The leader then takes the stream lock (held to the
//!   end of the transaction), writes the rest of the transaction, commit included, to a file,
//!   and goes on; the worker applies what is in its queue, waits on the stream lock, and
//!   replays the file once the leader has finished it. A worker that was sent to that way is
//!   stopped after its transaction: a message may be left half-written in its queue.
//!
//! Workers come from a pool of at most `max_parallel_apply_workers_per_subscription`; one that
//! finishes its transaction goes back to the pool unless the pool holds more than half that
//! many, in which case it is stopped (`pa_free_worker`).
//!
//! Differences from PostgreSQL: no table sync, `skip_lsn`, two-phase or subtransactions (a
//! `STREAM ABORT` of a subtransaction is refused); feedback to the publisher is the list of
//! commit times; an error ends the apply (PostgreSQL's worker exits and is restarted); a
//! worker's error reaches the leader when it next looks (at each message) rather than by signal.

use crate::locks::apply_lock;
use crate::parallel::{self, FilesetState, PaShared, WorkerExit, XactState};
use crate::proto::Message;
use crate::serial::{Applied, StreamError};
use crate::spool::{self, SpoolWriter};
use crate::subscriber::{LocalTxn, Subscriber};
use pglocks_lmgr::{LocalLocks, LockManager, LockManagerConfig, LockMode};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::stats::BackendStats;
use pglocks_proc::{Backend, ProcTable};
use pglocks_shmmq::{ShmMq, ShmMqHandle, ShmMqResult};
use pglocks_sync::channel;
use pglocks_sync::thread::{Scope, ScopedJoinHandle};
use pglocks_sync::time::{Duration, Instant};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

// The vocabulary the leader shares with the workers, under the paths it has always had here.
pub use crate::config::{
    ApplyConfig, Streaming, DEFAULT_MAX_PARALLEL_APPLY_WORKERS, DSM_QUEUE_SIZE,
    MAX_PARALLEL_WORKER_LIMIT,
};
pub use crate::error::ApplyError;
pub use crate::locks::{PARALLEL_APPLY_LOCK_STREAM, PARALLEL_APPLY_LOCK_XACT};

/// How long the leader sleeps between looks at a worker's transaction state
/// (`pa_wait_for_xact_state`'s 10 ms).
const STATE_POLL: Duration = Duration::from_millis(10);

fn order(what: &str) -> ApplyError {
    ApplyError::Stream(StreamError::Order(what.to_string()))
}

/// Counters of one apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyStats {
    /// Streamed transactions handed to a parallel worker.
    pub streamed_in_parallel: u64,
    /// Streamed transactions the leader spooled and applied at commit.
    pub streamed_serialized: u64,
    /// Transactions switched to partial serialization after a send timed out (spills).
    pub partial_serializations: u64,
    /// Messages written to spool files.
    pub spooled_messages: u64,
    /// Parallel workers started.
    pub workers_launched: u64,
    /// Parallel workers stopped.
    pub workers_stopped: u64,
}

/// What an apply ended with.
#[derive(Debug, Clone, Default)]
pub struct ApplyOutcome {
    /// Tables, commit order (remote xids), conflicts.
    pub applied: Applied,
    /// Each commit's remote xid and the time its local commit finished.
    pub commits: Vec<(u32, Instant)>,
    /// Counters.
    pub stats: ApplyStats,
    /// Per-backend statistics: the leader's, then each worker's.
    pub backends: Vec<BackendStats>,
}

/// Applies the messages of `source` (each one message's bytes, as the walreceiver hands them
/// over) on a fresh subscriber as `cfg` says, until `source` ends.
pub fn apply<K: RawLwLock>(
    cfg: &ApplyConfig,
    source: impl IntoIterator<Item = Vec<u8>>,
) -> Result<ApplyOutcome, ApplyError> {
    if cfg.max_parallel_apply_workers > MAX_PARALLEL_WORKER_LIMIT {
        return Err(ApplyError::Config {
            name: "max_parallel_apply_workers_per_subscription",
            value: cfg.max_parallel_apply_workers.to_string(),
            why: "at most 1024",
        });
    }
    ShmMq::new(cfg.queue_size, cfg.shm_mq)?;
    // The leader, the workers, and as many again for workers stopping while others start.
    let procs = ProcTable::try_new(2 + 2 * cfg.max_parallel_apply_workers)?;
    let lm = LockManager::<K>::try_new(LockManagerConfig::new(procs.len()))?;
    let sub = Subscriber::new(lm, cfg.timeouts, cfg.row_work);
    let dir = match &cfg.spool_dir {
        Some(d) => tempfile::Builder::new()
            .prefix("pglocks-apply-")
            .tempdir_in(d)?,
        None => tempfile::Builder::new()
            .prefix("pglocks-apply-")
            .tempdir()?,
    };
    let (stats, backends) = pglocks_sync::thread::scope(|scope| -> Result<_, ApplyError> {
        let mut b = procs.attach()?;
        let local = sub.lock_manager().connect(&mut b, cfg.database)?;
        let mut la = Leader {
            scope,
            sub: &sub,
            procs: &procs,
            cfg,
            dir: dir.path(),
            b,
            local,
            whole: None,
            stream: None,
            dests: BTreeMap::new(),
            pool: Vec::new(),
            next_worker: 0,
            stats: ApplyStats::default(),
            backends: Vec::new(),
        };
        let result = source.into_iter().try_for_each(|m| la.dispatch(&m));
        let result = result.and_then(|()| la.check_end());
        let shut = la.shutdown(result.is_ok());
        result?;
        shut?;
        Ok((la.stats, la.backends))
    })?;
    let commits = sub.commits();
    Ok(ApplyOutcome {
        applied: Applied {
            rows: sub.rows(),
            commit_order: commits.iter().map(|&(x, _)| x).collect(),
            conflicts: sub.conflicts(),
        },
        commits,
        stats,
        backends,
    })
}

/// Where a streamed transaction's messages go.
#[derive(Debug)]
enum Dest {
    /// `TRANS_LEADER_SERIALIZE`: the leader's spool file.
    Spool(SpoolWriter),
    /// `TRANS_LEADER_SEND_TO_PARALLEL` / `_PARTIAL_SERIALIZE`: worker `id`.
    Worker(u32),
}

/// Models `ParallelApplyWorkerInfo` (applyparallelworker.c): the leader's view of one worker.
struct Pa<'scope> {
    id: u32,
    mq: Option<ShmMqHandle>,
    shared: Arc<PaShared>,
    thread: Option<ScopedJoinHandle<'scope, WorkerExit>>,
    in_use: bool,
    /// `serialize_changes`: a send timed out; the rest of the transaction goes to `spool`.
    serialize_changes: bool,
    spool: Option<SpoolWriter>,
}

/// The leader apply worker.
struct Leader<'scope, 'env, K: RawLwLock> {
    scope: &'scope Scope<'scope, 'env>,
    sub: &'env Subscriber<K>,
    procs: &'env ProcTable,
    cfg: &'env ApplyConfig,
    dir: &'env Path,
    b: Backend,
    local: LocalLocks,
    /// The transaction sent whole that is open: its remote xid and local transaction.
    whole: Option<(u32, LocalTxn)>,
    /// The remote xid of the stream that is open.
    stream: Option<u32>,
    /// Streamed transactions begun and not ended.
    dests: BTreeMap<u32, Dest>,
    /// `ParallelApplyWorkerPool`.
    pool: Vec<Pa<'scope>>,
    next_worker: u32,
    stats: ApplyStats,
    backends: Vec<BackendStats>,
}

impl<'scope, 'env, K: RawLwLock> Leader<'scope, 'env, K> {
    /// Models `apply_dispatch` and the `apply_handle_*` functions, leader side.
    fn dispatch(&mut self, bytes: &[u8]) -> Result<(), ApplyError> {
        self.check_workers()?;
        let msg = Message::decode(bytes, self.stream.is_some())?;
        match msg {
            Message::Begin { xid, .. } if self.whole.is_none() && self.stream.is_none() => {
                let txn = self.sub.begin(&mut self.b, &mut self.local)?;
                self.whole = Some((xid, txn));
            }
            Message::Change {
                xid: None,
                rel,
                change,
            } if self.whole.is_some() => {
                let (_, txn) = self.whole.as_mut().expect("checked");
                self.sub
                    .apply(&mut self.b, &mut self.local, txn, rel, change)?;
            }
            Message::Commit { .. } if self.whole.is_some() => {
                let (xid, txn) = self.whole.take().expect("checked");
                self.sub.commit(&mut self.b, &mut self.local, txn, xid)?;
            }
            Message::StreamStart { xid, first_segment }
                if self.whole.is_none() && self.stream.is_none() =>
            {
                self.stream_start(bytes, xid, first_segment)?
            }
            Message::Change { xid: Some(x), .. } if self.stream == Some(x) => {
                match self.dests.get_mut(&x) {
                    Some(Dest::Spool(w)) => {
                        w.write(bytes)?;
                        self.stats.spooled_messages += 1;
                    }
                    // Mid-chunk the leader does not hold the stream lock.
                    Some(&mut Dest::Worker(id)) => {
                        self.send_or_spool(id, bytes, false)?;
                    }
                    None => return Err(order("a change of a transaction not streamed")),
                }
            }
            Message::StreamStop if self.stream.is_some() => {
                let xid = self.stream.take().expect("checked");
                if let Some(&Dest::Worker(id)) = self.dests.get(&xid) {
                    let i = self.index(id);
                    if !self.pool[i].serialize_changes {
                        // Locked before the worker can see STREAM STOP, so it waits.
                        self.stream_lock(xid, true)?;
                    }
                    self.send_or_spool(id, bytes, true)?;
                }
            }
            Message::StreamCommit { xid, .. } | Message::StreamAbort { xid, .. }
                if self.whole.is_none() && self.stream.is_none() =>
            {
                if let Message::StreamAbort { subxid, .. } = msg {
                    if subxid != xid {
                        return Err(order("STREAM ABORT of a subtransaction (not modelled)"));
                    }
                }
                let commit = matches!(msg, Message::StreamCommit { .. });
                match self.dests.remove(&xid) {
                    None => {
                        return Err(order(
                            "STREAM COMMIT or ABORT of a transaction never streamed",
                        ))
                    }
                    Some(Dest::Spool(w)) if commit => self.apply_spooled(w, xid)?,
                    Some(Dest::Spool(w)) => spool::discard(w)?,
                    Some(Dest::Worker(id)) => {
                        // Since its last STREAM STOP the leader holds the stream lock.
                        self.send_or_spool(id, bytes, true)?;
                        let i = self.index(id);
                        if self.pool[i].serialize_changes {
                            let w = self.pool[i].spool.take().expect("serializing");
                            let path = w.finish()?;
                            self.pool[i].shared.serialize_done(path);
                        }
                        self.xact_finish(id, xid)?;
                    }
                }
            }
            other => {
                return Err(ApplyError::Stream(StreamError::Order(format!(
                    "{other:?} out of place"
                ))))
            }
        }
        Ok(())
    }

    /// `apply_handle_stream_start`, leader side.
    fn stream_start(&mut self, bytes: &[u8], xid: u32, first: bool) -> Result<(), ApplyError> {
        if self.cfg.streaming == Streaming::Off {
            return Err(order(
                "a streamed transaction on a subscription with streaming = off",
            ));
        }
        if first {
            if self.dests.contains_key(&xid) {
                return Err(order("first segment of a transaction already streaming"));
            }
            let dest = match self.allocate_worker(xid)? {
                Some(id) => {
                    self.stats.streamed_in_parallel += 1;
                    Dest::Worker(id)
                }
                None => {
                    self.stats.streamed_serialized += 1;
                    Dest::Spool(SpoolWriter::create(self.dir, self.cfg.subscription, xid)?)
                }
            };
            self.dests.insert(xid, dest);
        } else if !self.dests.contains_key(&xid) {
            return Err(order("a later segment of a transaction never streamed"));
        }
        self.stream = Some(xid);
        if let Some(&Dest::Worker(id)) = self.dests.get(&xid) {
            // Between chunks the leader holds the stream lock, except before the first.
            if self.send_or_spool(id, bytes, !first)? {
                // Let the worker past its wait for this chunk.
                if !first {
                    self.stream_lock(xid, false)?;
                }
                let i = self.index(id);
                self.pool[i].shared.add_pending_stream();
            }
        }
        Ok(())
    }

    /// A message for worker `id`: to its queue, or once serializing to the file, switching
    /// when the send times out (`handle_streamed_transaction` and the `apply_handle_stream_*`
    /// functions, which write `STREAM START`, `STREAM STOP` and the end to the file too, for the
    /// worker to replay). `stream_locked`: whether the leader holds the stream lock. Returns
    /// whether the message went to the queue.
    fn send_or_spool(
        &mut self,
        id: u32,
        bytes: &[u8],
        stream_locked: bool,
    ) -> Result<bool, ApplyError> {
        let i = self.index(id);
        if !self.pool[i].serialize_changes {
            if self.send(id, bytes)? {
                return Ok(true);
            }
            self.switch_to_partial_serialize(id, stream_locked)?;
        }
        let i = self.index(id);
        let w = self.pool[i].spool.as_mut().expect("serializing");
        w.write(bytes)?;
        self.stats.spooled_messages += 1;
        Ok(false)
    }

    /// `apply_spooled_messages` at `STREAM COMMIT` of a spooled transaction: replays the file
    /// in one local transaction and commits it.
    fn apply_spooled(&mut self, w: SpoolWriter, xid: u32) -> Result<(), ApplyError> {
        let path = w.finish()?;
        let mut txn = self.sub.begin(&mut self.b, &mut self.local)?;
        let (sub, b, local) = (self.sub, &mut self.b, &mut self.local);
        spool::replay(&path, |m| -> Result<(), ApplyError> {
            match Message::decode(m, true)? {
                Message::Change { rel, change, .. } => {
                    Ok(sub.apply(b, local, &mut txn, rel, change)?)
                }
                other => Err(ApplyError::Stream(StreamError::Order(format!(
                    "{other:?} in a spool file"
                )))),
            }
        })?;
        self.sub.commit(&mut self.b, &mut self.local, txn, xid)?;
        Ok(())
    }

    /// `pa_send_data`: a non-blocking send, retried until the timeout. `Ok(false)` when it
    /// timed out.
    fn send(&mut self, id: u32, bytes: &[u8]) -> Result<bool, ApplyError> {
        let i = self.index(id);
        let (retry, timeout) = (self.cfg.send_retry_interval, self.cfg.send_timeout);
        let mq = self.pool[i].mq.as_mut().expect("attached");
        match mq.send_with_timeout(&mut self.b, bytes, retry, timeout)? {
            ShmMqResult::Success(()) => Ok(true),
            ShmMqResult::WouldBlock => Ok(false),
            ShmMqResult::Detached => Err(self.worker_error(i)),
        }
    }

    /// `pa_switch_to_partial_serialize`.
    fn switch_to_partial_serialize(
        &mut self,
        id: u32,
        stream_locked: bool,
    ) -> Result<(), ApplyError> {
        let i = self.index(id);
        let xid = self.pool[i].shared.xid();
        self.stats.partial_serializations += 1;
        self.b.stats.events.count("apply.partial_serializations", 1);
        self.pool[i].serialize_changes = true;
        self.pool[i].spool = Some(SpoolWriter::create(self.dir, self.cfg.subscription, xid)?);
        // Held to the end of the transaction: the worker must not wait for a STREAM STOP
        // that now goes to the file.
        if !stream_locked {
            self.stream_lock(xid, true)?;
        }
        self.pool[i]
            .shared
            .set_fileset_state(FilesetState::SerializeInProgress);
        Ok(())
    }

    /// `pa_xact_finish`: lets the worker go on, waits for its commit or abort, frees it.
    fn xact_finish(&mut self, id: u32, xid: u32) -> Result<(), ApplyError> {
        self.stream_lock(xid, false)?;
        self.wait_for_xact_state(id, XactState::Started)?;
        // pa_wait_for_xact_finish: the worker holds the lock until it has finished.
        let (sub, cfg, xact) = (self.sub, self.cfg, PARALLEL_APPLY_LOCK_XACT);
        for take in [true, false] {
            let (b, local) = (&mut self.b, &mut self.local);
            apply_lock(sub, b, local, cfg, xid, xact, LockMode::AccessShare, take)?;
        }
        let i = self.index(id);
        if self.pool[i].shared.xact_state() != XactState::Finished {
            return Err(self.worker_error(i));
        }
        self.free_worker(id)
    }

    /// `pa_wait_for_xact_state`: polls the worker's state, sleeping on the latch.
    fn wait_for_xact_state(&mut self, id: u32, want: XactState) -> Result<(), ApplyError> {
        let i = self.index(id);
        loop {
            if self.pool[i].shared.xact_state() >= want {
                return Ok(());
            }
            if self.pool[i].shared.failed() {
                return Err(self.worker_error(i));
            }
            self.b
                .wait_latch_event(Some(STATE_POLL), "LogicalParallelApplyStateChange");
        }
    }

    /// `pa_lock_stream(xid, AccessExclusiveLock)` (`take`) or `pa_unlock_stream`.
    fn stream_lock(&mut self, xid: u32, take: bool) -> Result<(), ApplyError> {
        let (sub, cfg, b, local) = (self.sub, self.cfg, &mut self.b, &mut self.local);
        let (stream, mode) = (PARALLEL_APPLY_LOCK_STREAM, LockMode::AccessExclusive);
        apply_lock(sub, b, local, cfg, xid, stream, mode, take)
    }

    /// Models `pa_allocate_worker` and `pa_launch_parallel_worker`: a free worker from the
    /// pool, a new one if the pool is not full, or none.
    fn allocate_worker(&mut self, xid: u32) -> Result<Option<u32>, ApplyError> {
        if self.cfg.streaming != Streaming::Parallel {
            return Ok(None);
        }
        let i = match self.pool.iter().position(|p| !p.in_use) {
            Some(i) => i,
            None if self.pool.len() < self.cfg.max_parallel_apply_workers => {
                self.launch()?;
                self.pool.len() - 1
            }
            None => return Ok(None),
        };
        let pa = &mut self.pool[i];
        pa.shared.assign(xid);
        pa.in_use = true;
        pa.serialize_changes = false;
        Ok(Some(pa.id))
    }

    /// `logicalrep_worker_launch` of a parallel apply worker, and
    /// `WaitForReplicationWorkerAttach`.
    fn launch(&mut self) -> Result<(), ApplyError> {
        let mq = Arc::new(ShmMq::new(self.cfg.queue_size, self.cfg.shm_mq)?);
        mq.set_sender(&mut self.b)?;
        let handle = ShmMqHandle::attach(Arc::clone(&mq), &mut self.b)?;
        let shared = Arc::new(PaShared::new(self.b.procno()));
        let (ready_tx, ready_rx) = channel::bounded(1);
        let (sub, procs, cfg) = (self.sub, self.procs, self.cfg);
        let worker_shared = Arc::clone(&shared);
        let thread = self
            .scope
            .spawn(move || parallel::worker_main(sub, procs, cfg, worker_shared, mq, ready_tx));
        let started = ready_rx.recv().unwrap_or(Err(ApplyError::LostWorker));
        let id = self.next_worker;
        self.next_worker += 1;
        self.stats.workers_launched += 1;
        self.pool.push(Pa {
            id,
            mq: Some(handle),
            shared,
            thread: Some(thread),
            in_use: false,
            serialize_changes: false,
            spool: None,
        });
        if let Err(e) = started {
            let i = self.pool.len() - 1;
            let _ = self.stop_worker(i);
            return Err(e);
        }
        Ok(())
    }

    /// `pa_free_worker`: back to the pool, or stopped when the pool holds more than half the
    /// maximum or the worker's queue may hold half a message.
    fn free_worker(&mut self, id: u32) -> Result<(), ApplyError> {
        let i = self.index(id);
        if self.pool[i].serialize_changes
            || self.pool.len() > self.cfg.max_parallel_apply_workers / 2
        {
            let exit = self.stop_worker(i);
            return exit.map(|_| ());
        }
        self.pool[i].in_use = false;
        Ok(())
    }

    /// `logicalrep_pa_worker_stop`: tells the worker to exit, detaches its queue, and waits
    /// for it.
    fn stop_worker(&mut self, i: usize) -> Result<(), ApplyError> {
        let mut pa = self.pool.remove(i);
        pa.shared.request_stop();
        if let Some(mq) = pa.mq.take() {
            let _ = mq.detach(&mut self.b);
        }
        self.stats.workers_stopped += 1;
        let exit = pa.thread.take().map(|t| t.join());
        match exit {
            Some(Ok(exit)) => {
                self.backends.push(exit.stats);
                exit.result.map_err(|e| ApplyError::Worker {
                    xid: pa.shared.xid(),
                    error: Box::new(e),
                })
            }
            Some(Err(_)) => Err(ApplyError::LostWorker),
            None => Ok(()),
        }
    }

    /// The error of the worker at `i`: its own if it reported one.
    fn worker_error(&self, i: usize) -> ApplyError {
        let pa = &self.pool[i];
        match pa.shared.take_error() {
            Some(error) => ApplyError::Worker {
                xid: pa.shared.xid(),
                error: Box::new(error),
            },
            None => ApplyError::LostWorker,
        }
    }

    /// `ProcessParallelApplyMessages`: a worker that failed fails the leader.
    fn check_workers(&self) -> Result<(), ApplyError> {
        match self.pool.iter().position(|p| p.in_use && p.shared.failed()) {
            Some(i) => Err(self.worker_error(i)),
            None => Ok(()),
        }
    }

    fn index(&self, id: u32) -> usize {
        self.pool
            .iter()
            .position(|p| p.id == id)
            .expect("a worker in use stays in the pool")
    }

    /// The stream must not end inside a transaction.
    fn check_end(&self) -> Result<(), ApplyError> {
        if self.whole.is_some() || self.stream.is_some() || !self.dests.is_empty() {
            return Err(order("the stream ends inside a transaction"));
        }
        Ok(())
    }

    /// The leader's exit: its open transaction aborted and its locks released (so no worker
    /// waits on it), then every worker stopped.
    fn shutdown(&mut self, clean: bool) -> Result<(), ApplyError> {
        for pa in &self.pool {
            pa.shared.request_stop();
        }
        if let Some((_, txn)) = self.whole.take() {
            self.sub.abort(&mut self.b, &mut self.local, txn)?;
        }
        for (_, dest) in std::mem::take(&mut self.dests) {
            if let Dest::Spool(w) = dest {
                let _ = spool::discard(w);
            }
        }
        self.sub
            .lock_manager()
            .release_all(&mut self.b, &mut self.local, true)?;
        let mut first_error = Ok(());
        while !self.pool.is_empty() {
            let r = self.stop_worker(0);
            if clean && first_error.is_ok() {
                first_error = r;
            }
        }
        self.backends.insert(0, self.b.take_stats());
        first_error
    }
}
