//! PostgreSQL's write-ahead log, the part that is about locks (xlog.c): inserting records into
//! the shared WAL buffers, and group commit in `XLogFlush`.
//!
//! # Insertion (9.4 and later)
//! A record's place in WAL is decided by a tiny critical section: under the `insertpos_lck`
//! spinlock, `CurrBytePos += MAXALIGN(size)` (in usable byte positions, which skip page headers,
//! so no arithmetic is done under the spinlock; see [`pos`]). The previous record's position is
//! remembered there too, for the record's prev-link. The copy into the WAL buffers then happens
//! in parallel with other backends' copies, each under one of `NUM_XLOGINSERT_LOCKS` = 8
//! *insertion locks*, LWLocks held exclusively for the whole reservation-and-copy. A backend
//! starts with lock `procno % 8` and moves to the next one whenever it had to wait for its lock,
//! so that busy backends spread over the locks and idle ones stay on theirs (no cache-line
//! bouncing).
//!
//! The insertion locks are also how a flusher learns how far WAL is complete.
//! `WaitXLogInsertionsToFinish(upto)` reads how far space has been reserved, then visits every
//! insertion lock with `LWLockWaitForVar`: a free lock has no insertion in progress; a held one
//! has a variable, `insertingAt`, which its holder sets to where it has copied to before it does
//! anything that may block (moving to a new buffer page). The flusher waits until the lock is
//! free or `insertingAt` has passed `upto`, and the minimum over the locks of the positions
//! still in progress is the point up to which everything is copied and may be written.
//!
//! Some operations need WAL to stand still (a segment switch, here [`Wal::switch_segment`]):
//! they take all 8 locks (`WALInsertLockAcquireExclusive`), setting the variables of the first 7
//! to "infinity" so that flushers never wait on those; the last one's variable is the switcher's
//! real position.
//!
//! # Buffers
//! WAL buffers are a ring of `wal_buffers` 8 KB pages; page `p` of the WAL lives in buffer
//! `p % wal_buffers`, and `xlblocks[i]` says which page buffer `i` holds (by its end LSN). An
//! inserter that reaches a page that is not there calls `AdvanceXLInsertBuffer`, which, under
//! `WALBufMappingLock`, initialises the next pages in turn; a buffer whose old page has not been
//! written out yet must first be written, so the inserter advertises its position (see above),
//! waits for older insertions, takes `WALWriteLock` and writes.
//!
//! # Flush and group commit
//! `XLogFlush(lsn)` makes WAL durable up to `lsn`. Since `fsync` is slow, it flushes as much as
//! it can in one go: it takes the largest write request anyone has posted, waits for insertions
//! up to there to be copied, and then tries for `WALWriteLock` with `LWLockAcquireOrWait`
//! (9.2): if the lock is busy it waits for the holder to release it *without taking it*, and
//! then checks whether the holder's flush already covered `lsn` (it usually has: that is group
//! commit). Only if not does it try again. The backend that gets the lock is the leader: it
//! checks once more, optionally sleeps `commit_delay` (9.3: only the leader, and only when at
//! least `commit_siblings` other backends are in a transaction) so that more commits join, then
//! writes and flushes everything that is inserted, not just its own record. With `fsync = off`
//! (a device whose [`FlushDevice::fsync_enabled`] is false, such as [`NullDevice`]) nobody
//! sleeps `commit_delay`: there is no fsync to share.
//!
//! # Asynchronous commit and the WAL writer (8.3+)
//! With `synchronous_commit = off` ([`WalConfig::synchronous_commit`]) a commit inserts its
//! record and does not flush it: `XLogSetAsyncXactLSN` raises `asyncXactLSN` under `info_lck`
//! and, when there is enough for it to do, sets the WAL writer's latch. Neither `XLogFlush` nor
//! `WALWriteLock` is on the commit's path any more; the locks left are the insertion's and
//! `info_lck`. The WAL writer, a background process ([`Wal::wal_writer_main`]), runs
//! `XLogBackgroundFlush` every `wal_writer_delay` (200 ms) or when woken: it writes up to the
//! last completed page of the posted write request, or, when that is already flushed, up to
//! `asyncXactLSN`, taking `WALWriteLock` with a plain acquire as any writer does. An
//! asynchronous commit is durable after at most a few of its rounds.
//!
//! The WAL writer changed with the releases ([`WalWriter`]): 8.3–9.1 slept `wal_writer_delay`
//! unconditionally and no commit could wake it; 9.2 gave it a latch, which an asynchronous
//! commit sets when a whole page is waiting to be flushed, and a hibernation (after 50 idle
//! rounds it sleeps 25 times longer, and any asynchronous commit wakes it); 9.6 added
//! `wal_writer_flush_after` (1 MB): the WAL writer still writes every round, but fsyncs only
//! when `wal_writer_delay` has passed since its last fsync or that much WAL is unflushed; 17
//! wakes it only for a commit that raises `asyncXactLSN` with `wal_writer_flush_after` of WAL
//! unflushed.
//!
//! # Earlier releases
//! - ≤ 9.3 ([`Insertion::OneLock`]): one `WALInsertLock` was held while reserving *and* copying,
//!   so insertions were serial; a flusher took the write position by conditionally acquiring
//!   that lock (or settled for its own record).
//! - ≤ 9.1 ([`FlushWait::Acquire`]): `XLogFlush` queued for `WALWriteLock` with a plain acquire,
//!   so the backends that a flush had already covered still took the lock one after another.
//! - ≤ 9.2: `commit_delay` was slept by every committing backend, before `XLogFlush`
//!   ([`WalConfig::commit_delay_in_flush`] off), and only by a synchronous commit.
//! - ≤ 8.2 ([`WalWriter::Absent`]): no WAL writer and no asynchronous commit; a configuration
//!   with `synchronous_commit` off is refused.
//!
//! # Differences from PostgreSQL
//! - Backends are explicit [`Backend`] handles, and a backend's static variables in xlog.c
//!   (`lockToTry`, `MyLockNo`, `holdingAllLocks`, the local `LogwrtResult`, `GetXLogBuffer`'s
//!   cached page) are a [`WalBackend`].
//! - One timeline, no recovery, no full-page images, no record assembly from buffers
//!   (`XLogRecordAssemble`): a record is a header and a payload ([`Record`]).
//! - `LogwrtResult` and `LogwrtRqst` are under `info_lck` in every release (17 made the results
//!   atomics). 17's `logInsertResult` shortcut in `WaitXLogInsertionsToFinish` is a setting
//!   ([`WalConfig::insert_result_cache`]). Every release initialises buffers under
//!   `WALBufMappingLock`, as 9.4–18 do (a lock-free `AdvanceXLInsertBuffer` was committed to 18's
//!   development branch and reverted before release).
//! - ≤ 9.3 reserved the position under `WALInsertLock` itself; the model takes the (then
//!   uncontended) `insertpos_lck` inside it. An inserter that must write out an old buffer
//!   goes through 9.4's steps (advertise its position on the one lock's variable, wait for
//!   insertions: only itself, which has advertised, so it never waits). 9.3 posted as write
//!   request the end of the last full page an insert filled; the model posts the record's end,
//!   so a 9.3 flush leader that cannot get `WALInsertLock` may write a little further.
//! - The device state (the open segment, the bytes being written) is behind a mutex that only
//!   the `WALWriteLock` holder takes, so it is never contended; PostgreSQL relies on the LWLock.
//! - I/O errors are returned ([`WalError::Device`]) where PostgreSQL PANICs; the WAL locks
//!   are released on the way out, and the WAL is marked failed: every later insert, flush or
//!   segment switch, by any backend, returns [`WalError::Unusable`] (a PANIC would have
//!   stopped them all), while every lock stays free. A short write is not an error: as
//!   `XLogWrite`'s loop does, the rest is written ([`FlushDevice::write_some`]). Faults can
//!   be injected with [`FaultyDevice`]. Errors of the locks themselves
//!   (a stuck spinlock, too many LWLocks) are fatal too: they may leave a lock held, as
//!   PostgreSQL's `elog(ERROR)` would until the abort's `LWLockReleaseAll`.
//! - Commits per flush are counted by walking the records each write covers (only when
//!   [`WalConfig::count_commits`] is on); PostgreSQL does not count them.
//! - The WAL writer is a thread that runs [`Wal::wal_writer_main`] with a [`Backend`] of its
//!   own (an auxiliary process in PostgreSQL); it stops when [`Wal::shutdown_wal_writer`] is
//!   called (the postmaster's SIGTERM). Its other shortcuts are listed in that function's
//!   documentation and in [`Wal::background_flush`]'s.

pub mod device;
pub mod faulty;
mod flush;
mod insert;
pub mod pos;
pub mod record;
mod walwriter;

mod buffers;

pub use device::{
    DeviceError, FileDevice, FlushDevice, FlushLatency, NullDevice, RecordingDevice,
    SimulatedDevice,
};
pub use faulty::FaultyDevice;
pub use flush::WriteResult;
pub use pglocks_sync::fault::{Fault, FaultPlan, Faults, IoOp};
pub use pos::{lsn, Layout, DEFAULT_WAL_SEGMENT_SIZE, XLOG_BLCKSZ};
pub use record::{ReadRecord, Record};
pub use walwriter::{WalWriterState, HIBERNATE_FACTOR, LOOPS_UNTIL_HIBERNATE};

use buffers::Buffers;
use pglocks_lwlock::{AtomicVar, LwLockError, LwLockMode, LwLockVar, RawLwLock, VarProtocol};
use pglocks_proc::Backend;
use pglocks_spin::{PgSpinLock, RawSpinLock, SpinError, SpinLock};
use pglocks_sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Release,
};
use pglocks_sync::shmem::Placed;
use pglocks_sync::sync::Mutex;
use pglocks_sync::time::Duration;
use pglocks_sync::CachePadded;

/// xlog.h: `NUM_XLOGINSERT_LOCKS` (9.4+).
pub const NUM_XLOGINSERT_LOCKS: usize = 8;
/// The most insertion locks a [`WalConfig`] may ask for: all of them are held at once by a
/// segment switch, well under the 100 LWLocks a backend may hold up to 9.4.
pub const MAX_XLOGINSERT_LOCKS: usize = 64;
/// The default `wal_buffers` in pages: 4 MB, what `-1` gives with the default 128 MB
/// `shared_buffers`.
pub const DEFAULT_WAL_BUFFERS: usize = 512;
/// `commit_siblings`' default.
pub const DEFAULT_COMMIT_SIBLINGS: u32 = 5;
/// `XLogRecordMaxSize` (xlogrecord.h): the largest record.
pub const XLOG_RECORD_MAX_SIZE: u64 = 1020 * 1024 * 1024;
/// `wal_writer_delay`'s default (walwriter.c's `WalWriterDelay`, 200 ms).
pub const DEFAULT_WAL_WRITER_DELAY: Duration = Duration::from_millis(200);
/// `wal_writer_delay`'s range in PostgreSQL: 1 ms to 10 s.
pub const WAL_WRITER_DELAY_RANGE: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_secs(10));
/// `DEFAULT_WAL_WRITER_FLUSH_AFTER` (9.6+): 1 MB, in `XLOG_BLCKSZ` pages.
pub const DEFAULT_WAL_WRITER_FLUSH_AFTER: u64 = 128;

/// How records get into the WAL buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insertion {
    /// ≤ 9.3: one `WALInsertLock`, held while reserving and copying.
    OneLock,
    /// 9.4+: this many insertion locks (`NUM_XLOGINSERT_LOCKS`, 8), reservation under a spinlock.
    Locks(usize),
}

/// How `XLogFlush` waits for `WALWriteLock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushWait {
    /// ≤ 9.1: `LWLockAcquire`.
    Acquire,
    /// 9.2+: `LWLockAcquireOrWait`, re-checking after the holder's flush.
    AcquireOrWait,
}

/// The release's WAL writer (walwriter.c) and how an asynchronous commit wakes it
/// (`XLogSetAsyncXactLSN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalWriter {
    /// ≤ 8.2: no WAL writer, and no asynchronous commit.
    Absent,
    /// 8.3–9.1: sleeps `wal_writer_delay` between rounds (`pg_usleep`); an asynchronous commit
    /// only records its LSN and never wakes it.
    Timed,
    /// 9.2–16: sleeps on its latch and hibernates when idle; an asynchronous commit sets the
    /// latch when a whole page past the flushed point is waiting, or when the writer
    /// hibernates.
    Latch,
    /// 17+: as [`WalWriter::Latch`], but a commit sets the latch only if it raised
    /// `asyncXactLSN` and `wal_writer_flush_after` of WAL is unflushed (or the writer
    /// hibernates).
    LatchFlushAfter,
}

/// The settings of one WAL.
#[derive(Debug, Clone, PartialEq)]
pub struct WalConfig {
    /// Insertion locking.
    pub insertion: Insertion,
    /// `XLogFlush`'s wait for `WALWriteLock`.
    pub flush_wait: FlushWait,
    /// `commit_delay` (0 = off).
    pub commit_delay: Duration,
    /// `commit_siblings`: other backends in a transaction needed before `commit_delay` is slept.
    pub commit_siblings: u32,
    /// 9.3+: the delay is slept inside `XLogFlush` by the leader; before, by every committer
    /// before `XLogFlush`.
    pub commit_delay_in_flush: bool,
    /// 17+: `logInsertResult`, the shortcut of `WaitXLogInsertionsToFinish`.
    pub insert_result_cache: bool,
    /// `wal_buffers`, in pages (at least 4).
    pub wal_buffers: usize,
    /// `wal_segment_size` (a power of two from 64 KB).
    pub segment_size: u64,
    /// Backends that may use the WAL (`MaxBackends`).
    pub max_backends: usize,
    /// Count commits per flush (a distribution in the stats; costs a walk over written records).
    pub count_commits: bool,
    /// `synchronous_commit`: on, a commit flushes its record (`XLogFlush`); off (8.3+), it
    /// leaves that to the WAL writer (`XLogSetAsyncXactLSN`).
    pub synchronous_commit: bool,
    /// The release's WAL writer.
    pub wal_writer: WalWriter,
    /// `wal_writer_delay`: the WAL writer's sleep between rounds (1 ms to 10 s).
    pub wal_writer_delay: Duration,
    /// `wal_writer_flush_after` (9.6+), in pages: the WAL writer fsyncs before
    /// `wal_writer_delay` has passed only once this much is unflushed; 0 (and every release
    /// before 9.6) fsyncs every round.
    pub wal_writer_flush_after: u64,
}

impl WalConfig {
    /// 9.4–16's WAL for `max_backends` backends: 8 insertion locks, `LWLockAcquireOrWait`,
    /// `commit_delay` off, 4 MB of buffers, 16 MB segments, synchronous commits, and 9.6–16's
    /// WAL writer (200 ms, 1 MB).
    pub fn new(max_backends: usize) -> Self {
        Self {
            insertion: Insertion::Locks(NUM_XLOGINSERT_LOCKS),
            flush_wait: FlushWait::AcquireOrWait,
            commit_delay: Duration::ZERO,
            commit_siblings: DEFAULT_COMMIT_SIBLINGS,
            commit_delay_in_flush: true,
            insert_result_cache: false,
            wal_buffers: DEFAULT_WAL_BUFFERS,
            segment_size: DEFAULT_WAL_SEGMENT_SIZE,
            max_backends,
            count_commits: false,
            synchronous_commit: true,
            wal_writer: WalWriter::Latch,
            wal_writer_delay: DEFAULT_WAL_WRITER_DELAY,
            wal_writer_flush_after: DEFAULT_WAL_WRITER_FLUSH_AFTER,
        }
    }

    /// Checks the settings, with a message for the first one out of range.
    pub fn validate(&self) -> Result<(), WalError> {
        let bad = |m: String| Err(WalError::Config(m));
        if let Insertion::Locks(n) = self.insertion {
            // A segment switch holds them all, and a backend may hold at most
            // MAX_SIMUL_LWLOCKS (100 up to 9.4) LWLocks at once.
            if !(1..=MAX_XLOGINSERT_LOCKS).contains(&n) {
                return bad(format!(
                    "insertion locks must be 1 to {MAX_XLOGINSERT_LOCKS}, not {n}"
                ));
            }
        }
        if self.wal_buffers < 4 {
            return bad(format!(
                "wal_buffers must be at least 4 pages, not {}",
                self.wal_buffers
            ));
        }
        if !self.segment_size.is_power_of_two() || self.segment_size < 64 * 1024 {
            return bad(format!(
                "wal_segment_size must be a power of two of at least 64 kB, not {}",
                self.segment_size
            ));
        }
        if self.max_backends == 0 {
            return bad("max_backends must be at least 1".into());
        }
        if !self.synchronous_commit && self.wal_writer == WalWriter::Absent {
            return bad(
                "synchronous_commit = off needs the WAL writer, which arrived in 8.3".into(),
            );
        }
        let (least, most) = WAL_WRITER_DELAY_RANGE;
        if !(least..=most).contains(&self.wal_writer_delay) {
            return bad(format!(
                "wal_writer_delay must be 1 ms to 10 s, not {:?}",
                self.wal_writer_delay
            ));
        }
        Ok(())
    }
}

/// Errors of the WAL model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// An LWLock refused (too many held, or not held).
    #[error(transparent)]
    LwLock(#[from] LwLockError),
    /// A spinlock was stuck.
    #[error(transparent)]
    Spin(#[from] SpinError),
    /// The flush device failed; PostgreSQL would PANIC.
    #[error("PANIC: {0}")]
    Device(#[from] DeviceError),
    /// A record over `XLogRecordMaxSize`.
    #[error("oversized WAL record: {len} bytes, the maximum is {max}")]
    RecordTooLarge {
        /// The record's total length.
        len: u64,
        /// `XLogRecordMaxSize`.
        max: u64,
    },
    /// `XLogFlush` could not reach its target.
    #[error("xlog flush request {request} is not satisfied --- flushed only to {flushed}")]
    FlushNotSatisfied {
        /// The requested LSN.
        request: String,
        /// How far WAL is flushed.
        flushed: String,
    },
    /// Broken invariant of the buffers (a bug in the model, reported instead of a panic).
    #[error("internal error: {0}")]
    Internal(String),
    /// A setting out of range.
    #[error("invalid WAL setting: {0}")]
    Config(String),
    /// A record `insert` does not take (one without data, or a switch record).
    #[error("invalid WAL record: {0}")]
    InvalidRecord(&'static str),
    /// A write or fsync failed earlier; PostgreSQL would have PANICked and restarted, so the
    /// model refuses every later insert and flush.
    #[error(
        "WAL is unusable after a failed write or fsync (PostgreSQL would have PANICked): {cause}"
    )]
    Unusable {
        /// The message of the failure.
        cause: String,
    },
}

/// One insertion lock and its `insertingAt` (xlog.c's `WALInsertLockPadded`).
struct InsertLock<K, P: VarProtocol> {
    lock: K,
    inserting_at: LwLockVar<P>,
}

/// The reservation state under `insertpos_lck` (`XLogCtlInsert`'s `CurrBytePos`,
/// `PrevBytePos`).
#[derive(Debug, Clone, Copy)]
struct InsertPos {
    curr: u64,
    /// `None` before the first record (its prev-link is `InvalidXLogRecPtr`).
    prev: Option<u64>,
}

/// What is under `info_lck`: write requests and results (`XLogCtl->LogwrtRqst`,
/// `LogwrtResult`), `asyncXactLSN` and `WalWriterSleeping`.
#[derive(Debug, Clone, Copy, Default)]
struct Info {
    request: WriteResult,
    result: WriteResult,
    /// The end of the latest asynchronous commit's record.
    async_xact_lsn: u64,
    /// The WAL writer hibernates (9.2+): any asynchronous commit should wake it.
    wal_writer_sleeping: bool,
}

/// The parts of xlog.c's `XLogCtlData` the model keeps, in PostgreSQL's order on a 64-bit
/// build: `XLogCtlInsert`'s head (`insertpos_lck`, `CurrBytePos`, `PrevBytePos`), which
/// PostgreSQL follows with `pad[PG_CACHE_LINE_SIZE]` so that it has its line to itself (here
/// the head padded to 128 bytes, the padding PostgreSQL has); then, after the rest of
/// `XLogCtlInsert` and the fields under `info_lck`, 17's `logInsertResult` beside
/// `InitializedUpTo` (24 bytes apart in 17, on one line; up to 16 `InitializedUpTo` follows
/// `LogwrtResult` the same way); and `info_lck`, which ends the struct after the recovery
/// fields, so that in normal running nothing else on its line is touched (here padded to a
/// line of its own). The fields `info_lck` guards (`LogwrtRqst`, `LogwrtResult`,
/// `asyncXactLSN`, `WalWriterSleeping`) lie beside the lock word here, in the spinlock's cell,
/// and are not charged to a simulated CPU: only the lock word is.
#[repr(C)]
struct XLogCtl<R: RawSpinLock> {
    /// `insertpos_lck` and what it guards (`XLogCtlInsert`'s `CurrBytePos`, `PrevBytePos`).
    insert_pos: CachePadded<SpinLock<InsertPos, R>>,
    /// 17's `logInsertResult`: insertions are known finished up to here.
    log_insert_result: AtomicU64,
    /// `InitializedUpTo`, under `WALBufMappingLock`.
    initialized_upto: AtomicU64,
    /// `info_lck` and what it guards.
    info: CachePadded<SpinLock<Info, R>>,
}

/// The shared WAL: xlog.c's `XLogCtl` and the locks around it, for backends using LWLock
/// implementation `K`, variable protocol `P` (`LockedVar` up to 16, `AtomicVar` from 17) and
/// spinlock `R`.
///
/// Its shared parts are placed in the simulated shared-memory map
/// ([`pglocks_sync::shmem::Placed`]) in PostgreSQL's order: `WALWriteLock` and
/// `WALBufMappingLock` (`MainLWLockArray`'s, made by `CreateLWLocks` first), then what
/// `XLOGShmemInit` carves out of the one "XLOG Ctl" struct — `XLogCtl`, `XLogCtl->xlblocks`,
/// the insertion locks (`WALInsertLocks`, each `WALInsertLockPadded` to 128 bytes as in
/// PostgreSQL) and the page buffers (`XLogCtl->pages`) — and last the per-backend flags
/// `MinimumActiveBackends` reads (`PGPROC`s, made after the WAL by `InitProcGlobal`).
/// Shortcuts: each part is a region of its own on a 128-byte boundary where PostgreSQL packs
/// them in one allocation (the insertion locks aligned to their padded size, the pages to
/// `XLOG_BLCKSZ`); the two individual locks are regions of their own padded to 128 bytes, as
/// `LWLockPadded` is from 9.6 (up to 9.5 their 16- or 32-byte slots of `MainLWLockArray` may
/// share a line with a neighbour); up to 9.3 the one `WALInsertLock` is one of those individual
/// locks, here the one insertion lock in the same place as 9.4's eight.
pub struct Wal<K: RawLwLock, P: VarProtocol = AtomicVar, R: RawSpinLock = PgSpinLock> {
    /// The placements of the shared parts below (declared first, so they end before the memory
    /// is freed).
    _placed: Vec<Placed>,
    cfg: WalConfig,
    layout: Layout,
    /// Where WAL starts: the first record's LSN.
    start: u64,
    /// `XLogCtl`.
    ctl: Box<XLogCtl<R>>,
    insert_locks: Box<[CachePadded<InsertLock<K, P>>]>,
    write_lock: Box<CachePadded<K>>,
    buf_mapping_lock: Box<CachePadded<K>>,
    buffers: Buffers,
    writer: Mutex<flush::Writer>,
    /// Per backend: in a transaction that has an xid (what `MinimumActiveBackends` counts,
    /// reading the `PGPROC`s); each on a line of its own, as each backend's `PGPROC` is.
    active: Box<[CachePadded<AtomicBool>]>,
    /// A device write or fsync failed (PostgreSQL's PANIC): nothing may be inserted or flushed
    /// any more. Set once, read at the start of every insert and flush.
    failed: AtomicBool,
    /// That failure's message, set before `failed`.
    failure: Mutex<Option<String>>,
    /// `enableFsync`: false when the device models `fsync = off`.
    enable_fsync: bool,
    /// The WAL writer's proc number, whose latch an asynchronous commit sets
    /// (`ProcGlobal->walwriterLatch`); [`NO_WAL_WRITER`] while none runs.
    wal_writer_proc: AtomicUsize,
    /// The WAL writer is asked to exit (its SIGTERM); never cleared.
    wal_writer_shutdown: AtomicBool,
}

/// [`Wal`]'s `wal_writer_proc` when no WAL writer runs.
const NO_WAL_WRITER: usize = usize::MAX;

/// A backend's own WAL state: the static variables of xlog.c (`lockToTry`, `MyLockNo`,
/// `holdingAllLocks`, `LogwrtResult`, `GetXLogBuffer`'s cache) and a record scratch buffer.
#[derive(Debug)]
pub struct WalBackend {
    lock_to_try: Option<usize>,
    my_lock_no: usize,
    holding_all_locks: bool,
    cached_page: u64,
    cached_idx: usize,
    logwrt: WriteResult,
    words: Vec<u64>,
}

impl<K: RawLwLock, P: VarProtocol, R: RawSpinLock> Wal<K, P, R> {
    /// Models `XLOGShmemInit` and the part of `StartupXLOG` that positions insertion: an empty
    /// WAL starting at segment 1 (`InvalidXLogRecPtr` stays invalid), writing to `device`.
    pub fn new(cfg: WalConfig, device: Box<dyn FlushDevice>) -> Result<Self, WalError> {
        cfg.validate()?;
        let layout = Layout::new(cfg.segment_size);
        let start_bytepos = layout.usable_bytes_in_segment();
        let start = layout.bytepos_to_recptr(start_bytepos);
        let segment_start = cfg.segment_size;
        let locks = match cfg.insertion {
            Insertion::OneLock => 1,
            Insertion::Locks(n) => n,
        };
        let lock_name = match cfg.insertion {
            Insertion::OneLock => "WALInsertLock",
            Insertion::Locks(_) => "WALInsert",
        };
        let written = WriteResult {
            write: segment_start,
            flush: segment_start,
        };
        // In PostgreSQL's order of allocation (see [`Wal`]).
        let mut placed = Vec::new();
        let write_lock = Box::new(CachePadded::new(K::new("WALWrite")));
        placed.push(Placed::one("WALWriteLock", &**write_lock));
        let buf_mapping_lock = Box::new(CachePadded::new(K::new("WALBufMapping")));
        placed.push(Placed::one("WALBufMappingLock", &**buf_mapping_lock));
        let ctl = Box::new(XLogCtl {
            insert_pos: CachePadded::new(SpinLock::new(
                "insertpos_lck",
                InsertPos {
                    curr: start_bytepos,
                    prev: None,
                },
            )),
            log_insert_result: AtomicU64::new(segment_start),
            initialized_upto: AtomicU64::new(segment_start),
            info: CachePadded::new(SpinLock::new(
                "info_lck",
                Info {
                    request: written,
                    result: written,
                    async_xact_lsn: 0,
                    wal_writer_sleeping: false,
                },
            )),
        });
        placed.push(Placed::one("XLogCtl", &*ctl));
        let buffers = Buffers::new(cfg.wal_buffers);
        placed.push(buffers.place_xlblocks());
        let insert_locks: Box<[CachePadded<InsertLock<K, P>>]> = (0..locks)
            .map(|_| {
                CachePadded::new(InsertLock {
                    lock: K::new(lock_name),
                    inserting_at: LwLockVar::new(0),
                })
            })
            .collect();
        placed.push(Placed::slice(
            match cfg.insertion {
                Insertion::OneLock => "WALInsertLock",
                Insertion::Locks(_) => "WALInsertLocks",
            },
            &insert_locks,
        ));
        placed.push(buffers.place_pages());
        let active: Box<[CachePadded<AtomicBool>]> = (0..cfg.max_backends)
            .map(|_| CachePadded::new(AtomicBool::new(false)))
            .collect();
        placed.push(Placed::slice(
            "PGPROC MinimumActiveBackends fields",
            &active,
        ));
        Ok(Self {
            _placed: placed,
            layout,
            start,
            ctl,
            insert_locks,
            write_lock,
            buf_mapping_lock,
            buffers,
            enable_fsync: device.fsync_enabled(),
            writer: Mutex::new(flush::Writer::new(device, written, start)),
            active,
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            wal_writer_proc: AtomicUsize::new(NO_WAL_WRITER),
            wal_writer_shutdown: AtomicBool::new(false),
            cfg,
        })
    }

    /// Refuses to go on after a failed write or fsync ([`WalError::Unusable`]).
    #[inline]
    pub(crate) fn check_usable(&self) -> Result<(), WalError> {
        if self.failed.load(Acquire) {
            return Err(self.unusable());
        }
        Ok(())
    }

    #[cold]
    fn unusable(&self) -> WalError {
        let cause = match self.failure.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        };
        WalError::Unusable {
            cause: cause.unwrap_or_default(),
        }
    }

    /// Records the device failure `err` (the model of the PANIC): from now on every insert and
    /// flush fails. The first failure's message is kept.
    #[cold]
    pub(crate) fn mark_failed(&self, err: DeviceError) -> WalError {
        let mut g = match self.failure.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.get_or_insert_with(|| err.to_string());
        drop(g);
        self.failed.store(true, Release);
        WalError::Device(err)
    }

    /// Are all of the WAL's locks free right now? Takes each with a conditional acquire and
    /// releases it at once: `WALWriteLock`, `WALBufMappingLock`, every insertion lock, and the
    /// `insertpos_lck` and `info_lck` spinlocks. For tests and end-of-run checks, when no
    /// other backend is using the WAL (a lock some backend holds legitimately reads as busy).
    pub fn locks_free(&self, b: &mut Backend) -> Result<bool, WalError> {
        let lwlocks = [&**self.write_lock, &**self.buf_mapping_lock]
            .into_iter()
            .chain(self.insert_locks.iter().map(|l| &l.lock));
        for lock in lwlocks {
            if !lock.conditional_acquire(b, LwLockMode::Exclusive)? {
                return Ok(false);
            }
            lock.release(b)?;
        }
        Ok(self.ctl.insert_pos.try_lock().is_some() && self.ctl.info.try_lock().is_some())
    }

    /// `enableFsync`: false when the device models `fsync = off`
    /// ([`FlushDevice::fsync_enabled`]); then nobody sleeps `commit_delay`.
    pub fn enable_fsync(&self) -> bool {
        self.enable_fsync
    }

    /// Has a write or fsync failed (and the WAL become unusable)?
    pub fn is_failed(&self) -> bool {
        self.failed.load(Acquire)
    }

    /// The settings.
    pub fn config(&self) -> &WalConfig {
        &self.cfg
    }

    /// The position arithmetic.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The LSN of the first record.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// A backend's WAL state, to pass with `b` to every call.
    pub fn backend(&self) -> WalBackend {
        WalBackend {
            lock_to_try: None,
            my_lock_no: 0,
            holding_all_locks: false,
            cached_page: u64::MAX,
            cached_idx: 0,
            logwrt: WriteResult {
                write: self.cfg.segment_size,
                flush: self.cfg.segment_size,
            },
            words: Vec::new(),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn xlogctl_keeps_postgresqls_lines() {
        use std::mem::offset_of;
        // The insertion position's head alone on its padded line; logInsertResult and
        // InitializedUpTo together on the next; info_lck on a line of its own.
        assert_eq!(offset_of!(XLogCtl<PgSpinLock>, insert_pos), 0);
        assert_eq!(offset_of!(XLogCtl<PgSpinLock>, log_insert_result), 128);
        assert_eq!(offset_of!(XLogCtl<PgSpinLock>, initialized_upto), 136);
        assert_eq!(offset_of!(XLogCtl<PgSpinLock>, info), 256);
    }
}
