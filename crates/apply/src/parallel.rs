//! A parallel apply worker (applyparallelworker.c's `ParallelApplyWorkerMain` and
//! `LogicalParallelApplyLoop`, with worker.c's `apply_handle_stream_*` on the worker's side).
//!
//! The worker reads its queue without blocking. A message is applied at once: at the first
//! segment's `STREAM START` it takes the remote transaction's *transaction lock*
//! (`AccessExclusive`, held to its commit) and tells the leader it has started; changes go into
//! one local transaction; at `STREAM STOP` it counts the chunk done and, when no other chunk is
//! waiting in the queue, waits on the *stream lock* (`AccessShare`), which the leader holds
//! until it sends the next chunk; at `STREAM COMMIT` or `STREAM ABORT` it ends the local
//! transaction, marks the shared state finished and releases the transaction lock, which is
//! what the leader waits on.
//!
//! An empty queue sends it to the spool file, if the leader has switched the transaction to
//! partial serialization (`pa_process_spooled_messages_if_required`): while the leader is still
//! writing the file the worker waits on the stream lock, which the leader holds to the end of
//! the transaction; once the file is done it drains the queue once more, then replays the file.
//! With nothing to do it sleeps on its latch for at most a second.
//!
//! Shortcut: the shared state (`ParallelApplyWorkerShared`) is behind a mutex standing in for
//! its spinlock (host memory, charged nothing on a simulated machine), and the pending-chunk
//! count is an atomic as in PostgreSQL (the shim's, charged), as are the failure and stop
//! flags, which stand for the worker's error queue and the leader's signal.

use crate::config::ApplyConfig;
use crate::error::ApplyError;
use crate::locks::{apply_lock, PARALLEL_APPLY_LOCK_STREAM, PARALLEL_APPLY_LOCK_XACT};
use crate::proto::Message;
use crate::serial::StreamError;
use crate::spool;
use crate::subscriber::{lock, LocalTxn, Subscriber};
use pglocks_lmgr::{LocalLocks, LockMode};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::stats::BackendStats;
use pglocks_proc::{Backend, ProcTable};
use pglocks_shmmq::{ShmMq, ShmMqHandle, ShmMqResult};
use pglocks_sync::atomic::{AtomicBool, AtomicU32, Ordering};
use pglocks_sync::channel;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `LogicalParallelApplyLoop`'s latch wait when there is nothing to do.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// Models `ParallelTransState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum XactState {
    /// `PARALLEL_TRANS_UNKNOWN`: assigned, not yet begun.
    Unknown,
    /// `PARALLEL_TRANS_STARTED`: holds the transaction lock.
    Started,
    /// `PARALLEL_TRANS_FINISHED`: committed or aborted.
    Finished,
}

/// Models `PartialFileSetState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilesetState {
    /// `FS_EMPTY`: no spool file.
    Empty,
    /// `FS_SERIALIZE_IN_PROGRESS`: the leader is writing it.
    SerializeInProgress,
    /// `FS_SERIALIZE_DONE`: written; the queue may still hold messages before it.
    SerializeDone,
    /// `FS_READY`: the queue is drained; replay the file.
    Ready,
}

#[derive(Debug)]
struct SharedState {
    xid: u32,
    xact_state: XactState,
    fileset_state: FilesetState,
    spool: Option<PathBuf>,
    error: Option<ApplyError>,
}

/// Models `ParallelApplyWorkerShared`: what the leader and one worker share.
#[derive(Debug)]
pub(crate) struct PaShared {
    state: Mutex<SharedState>,
    /// `pending_stream_count`: chunks sent whose `STREAM STOP` the worker has not reached.
    pending_stream_count: AtomicU32,
    failed: AtomicBool,
    stop: AtomicBool,
    leader_procno: usize,
}

impl PaShared {
    pub(crate) fn new(leader_procno: usize) -> Self {
        Self {
            state: Mutex::new(SharedState {
                xid: 0,
                xact_state: XactState::Unknown,
                fileset_state: FilesetState::Empty,
                spool: None,
                error: None,
            }),
            pending_stream_count: AtomicU32::new(0),
            failed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            leader_procno,
        }
    }

    /// `pa_allocate_worker`'s update: a new remote transaction.
    pub(crate) fn assign(&self, xid: u32) {
        let mut s = lock(&self.state);
        s.xid = xid;
        s.xact_state = XactState::Unknown;
        s.fileset_state = FilesetState::Empty;
        s.spool = None;
    }

    pub(crate) fn xid(&self) -> u32 {
        lock(&self.state).xid
    }

    pub(crate) fn xact_state(&self) -> XactState {
        lock(&self.state).xact_state
    }

    fn set_xact_state(&self, st: XactState) {
        lock(&self.state).xact_state = st;
    }

    fn fileset_state(&self) -> FilesetState {
        lock(&self.state).fileset_state
    }

    pub(crate) fn set_fileset_state(&self, st: FilesetState) {
        lock(&self.state).fileset_state = st;
    }

    /// The leader has written the whole transaction to `path`.
    pub(crate) fn serialize_done(&self, path: PathBuf) {
        let mut s = lock(&self.state);
        s.spool = Some(path);
        s.fileset_state = FilesetState::SerializeDone;
    }

    pub(crate) fn add_pending_stream(&self) {
        self.pending_stream_count.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    pub(crate) fn take_error(&self) -> Option<ApplyError> {
        lock(&self.state).error.take()
    }

    pub(crate) fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// The result of a worker thread ([`worker_main`]): its statistics and how its apply ended.
pub(crate) struct WorkerExit {
    pub(crate) stats: BackendStats,
    pub(crate) result: Result<(), ApplyError>,
}

/// The worker's thread: attaches, tells the leader through `ready`, runs the apply loop, and on
/// exit aborts what it has open and releases every lock (`ProcKill`'s `LockReleaseAll`).
pub(crate) fn worker_main<K: RawLwLock>(
    sub: &Subscriber<K>,
    procs: &ProcTable,
    cfg: &ApplyConfig,
    shared: Arc<PaShared>,
    mq: Arc<ShmMq>,
    ready: channel::Sender<Result<(), ApplyError>>,
) -> WorkerExit {
    let start = || -> Result<(Backend, LocalLocks, ShmMqHandle), ApplyError> {
        let mut b = procs.attach()?;
        let local = sub.lock_manager().connect(&mut b, cfg.database)?;
        mq.set_receiver(&mut b)?;
        let handle = ShmMqHandle::attach(Arc::clone(&mq), &mut b)?;
        Ok((b, local, handle))
    };
    let (b, local, mq) = match start() {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return WorkerExit {
                stats: Default::default(),
                result: Ok(()),
            };
        }
    };
    let _ = ready.send(Ok(()));
    let mut pa = Worker {
        sub,
        cfg,
        shared,
        b,
        local,
        mq: Some(mq),
        txn: None,
        buf: Vec::new(),
        replaying: false,
    };
    let result = pa.run();
    let cleanup = pa.exit();
    let result = result.and(cleanup);
    if let Err(e) = &result {
        // Reported to the leader, which fails with it.
        let mut s = lock(&pa.shared.state);
        s.error = Some(clone_for_leader(e));
        drop(s);
        pa.shared.failed.store(true, Ordering::Release);
        procs.set_latch(pa.shared.leader_procno);
    }
    WorkerExit {
        stats: pa.b.take_stats(),
        result,
    }
}

/// The copy of a worker's error sent to the leader (PostgreSQL sends the error message through
/// the worker's error queue): the lock errors keep their kind and deadlock detail.
fn clone_for_leader(e: &ApplyError) -> ApplyError {
    match e {
        ApplyError::Lock(l) => ApplyError::Lock(l.clone()),
        ApplyError::Stream(s) => ApplyError::Stream(s.clone()),
        ApplyError::LostLeader => ApplyError::LostLeader,
        other => ApplyError::Stream(StreamError::Order(other.to_string())),
    }
}

/// One parallel apply worker.
struct Worker<'a, K: RawLwLock> {
    sub: &'a Subscriber<K>,
    cfg: &'a ApplyConfig,
    shared: Arc<PaShared>,
    b: Backend,
    local: LocalLocks,
    mq: Option<ShmMqHandle>,
    /// The local transaction applying the remote one.
    txn: Option<LocalTxn>,
    buf: Vec<u8>,
    /// Whether the messages come from a spool file.
    replaying: bool,
}

impl<K: RawLwLock> Worker<'_, K> {
    /// `LogicalParallelApplyLoop`.
    fn run(&mut self) -> Result<(), ApplyError> {
        loop {
            if self.shared.stopping() {
                return Ok(());
            }
            let mq = self.mq.as_mut().expect("attached");
            match mq.receive(&mut self.b, true)? {
                ShmMqResult::Success(bytes) => {
                    let mut buf = std::mem::take(&mut self.buf);
                    buf.clear();
                    buf.extend_from_slice(bytes);
                    let r = self.dispatch(&buf);
                    self.buf = buf;
                    r?;
                }
                ShmMqResult::WouldBlock => {
                    if !self.process_spooled_messages_if_required()? {
                        self.b
                            .wait_latch_event(Some(IDLE_WAIT), "LogicalParallelApplyMain");
                    }
                }
                ShmMqResult::Detached if self.shared.stopping() => return Ok(()),
                ShmMqResult::Detached => return Err(ApplyError::LostLeader),
            }
        }
    }

    /// `apply_dispatch` on the worker's side.
    fn dispatch(&mut self, bytes: &[u8]) -> Result<(), ApplyError> {
        match Message::decode(bytes, true)? {
            Message::StreamStart { first_segment, .. } => {
                if first_segment {
                    if self.replaying {
                        // The leader's very first send to this worker timed out.
                        self.b
                            .stats
                            .events
                            .count("apply.first_segments_replayed", 1);
                    }
                    let xid = self.shared.xid();
                    self.session_lock(
                        xid,
                        PARALLEL_APPLY_LOCK_XACT,
                        LockMode::AccessExclusive,
                        true,
                    )?;
                    self.shared.set_xact_state(XactState::Started);
                    // logicalrep_worker_wakeup: the leader may be waiting for this.
                    self.b.procs().set_latch(self.shared.leader_procno);
                }
            }
            Message::Change { rel, change, .. } => {
                if self.txn.is_none() {
                    self.txn = Some(self.sub.begin(&mut self.b, &mut self.local)?);
                }
                let txn = self.txn.as_mut().expect("begun");
                self.sub
                    .apply(&mut self.b, &mut self.local, txn, rel, change)?;
            }
            Message::StreamStop => self.decr_and_wait_stream_block()?,
            Message::StreamCommit { xid, .. } => {
                let txn = match self.txn.take() {
                    Some(t) => t,
                    None => self.sub.begin(&mut self.b, &mut self.local)?,
                };
                self.sub.commit(&mut self.b, &mut self.local, txn, xid)?;
                self.finish(xid)?;
            }
            Message::StreamAbort { xid, .. } => {
                if let Some(txn) = self.txn.take() {
                    self.sub.abort(&mut self.b, &mut self.local, txn)?;
                }
                self.finish(xid)?;
            }
            other => {
                return Err(ApplyError::Stream(StreamError::Order(format!(
                    "{other:?} sent to a parallel apply worker"
                ))))
            }
        }
        Ok(())
    }

    /// The end of the remote transaction: finished (before the lock goes: the leader reads
    /// the state once it has the lock), then the transaction lock released.
    fn finish(&mut self, xid: u32) -> Result<(), ApplyError> {
        self.shared.set_xact_state(XactState::Finished);
        self.session_lock(
            xid,
            PARALLEL_APPLY_LOCK_XACT,
            LockMode::AccessExclusive,
            false,
        )
    }

    /// `pa_decr_and_wait_stream_block`.
    fn decr_and_wait_stream_block(&mut self) -> Result<(), ApplyError> {
        if self.shared.pending_stream_count.load(Ordering::Acquire) == 0 {
            // Only a replayed spool file gets here with nothing pending.
            if self.shared.fileset_state() != FilesetState::Empty {
                return Ok(());
            }
            return Err(ApplyError::Stream(StreamError::Order(
                "invalid pending streaming chunk 0".into(),
            )));
        }
        if self
            .shared
            .pending_stream_count
            .fetch_sub(1, Ordering::AcqRel)
            == 1
        {
            self.wait_for_stream_lock()?;
        }
        Ok(())
    }

    /// `pa_process_spooled_messages_if_required`: `false` when there is no spool file.
    fn process_spooled_messages_if_required(&mut self) -> Result<bool, ApplyError> {
        let mut st = self.shared.fileset_state();
        if st == FilesetState::Empty {
            return Ok(false);
        }
        if st == FilesetState::SerializeInProgress {
            // Wait for the leader to finish the file: it holds the stream lock till then.
            self.wait_for_stream_lock()?;
            st = self.shared.fileset_state();
        }
        match st {
            // The queue may still hold messages sent before the switch: drain it first.
            FilesetState::SerializeDone => self.shared.set_fileset_state(FilesetState::Ready),
            FilesetState::Ready => {
                let path = lock(&self.shared.state).spool.take();
                if let Some(path) = path {
                    self.replaying = true;
                    let replayed = spool::replay(&path, |m| self.dispatch(m));
                    self.replaying = false;
                    replayed?;
                }
                self.shared.set_fileset_state(FilesetState::Empty);
            }
            _ => {}
        }
        Ok(true)
    }

    /// `pa_lock_stream` / `pa_lock_transaction` (`take`), or their unlocks.
    fn session_lock(
        &mut self,
        xid: u32,
        objid: u16,
        mode: LockMode,
        take: bool,
    ) -> Result<(), ApplyError> {
        let (sub, cfg, b, local) = (self.sub, self.cfg, &mut self.b, &mut self.local);
        apply_lock(sub, b, local, cfg, xid, objid, mode, take)
    }

    /// Waits until the leader releases the stream lock: takes it `AccessShare` and gives it back.
    fn wait_for_stream_lock(&mut self) -> Result<(), ApplyError> {
        let xid = self.shared.xid();
        for take in [true, false] {
            self.session_lock(xid, PARALLEL_APPLY_LOCK_STREAM, LockMode::AccessShare, take)?;
        }
        Ok(())
    }

    /// The worker's exit: its local transaction aborted, every lock released, its queue
    /// detached.
    fn exit(&mut self) -> Result<(), ApplyError> {
        if let Some(txn) = self.txn.take() {
            self.sub.abort(&mut self.b, &mut self.local, txn)?;
        }
        self.sub
            .lock_manager()
            .release_all(&mut self.b, &mut self.local, true)?;
        if let Some(mq) = self.mq.take() {
            mq.detach(&mut self.b)?;
        }
        Ok(())
    }
}
