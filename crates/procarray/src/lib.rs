//! PostgreSQL's ProcArray: which transactions are running, as snapshots see them (procarray.c,
//! varsup.c's `GetNewTransactionId`, proc.h, snapmgr.c's `XidInMVCCSnapshot`).
//!
//! # The algorithm
//! Every backend has a `PGPROC`; the ones connected are listed in the ProcArray (`numProcs`
//! entries of `pgprocnos`). A backend that writes gets a transaction id from `nextXid` under
//! `XidGenLock` held exclusively, and publishes it in its entry *before* releasing that lock
//! ([`ProcArray::assign_xid`]); a subtransaction's xid goes to the backend's cache of
//! [`PGPROC_MAX_CACHED_SUBXIDS`] subxids, and past that only an *overflowed* flag is set.
//!
//! A snapshot ([`ProcArray::get_snapshot_data`]) is taken under `ProcArrayLock` in *shared*
//! mode: `xmax` is `latestCompletedXid + 1`, and every other backend's xid below `xmax` is
//! collected as running (with its cached subxids, or the snapshot is marked *suboverflowed*);
//! `xmin` is the oldest of them. The backend also advertises that `xmin` as its own
//! (`MyProc->xmin`) if it has none yet, so that VACUUM keeps what the snapshot may still see.
//! Ending a transaction that has an xid ([`ProcArray::end_transaction`]) clears the xid and
//! advances `latestCompletedXid` under `ProcArrayLock` *exclusive*: so a snapshot sees a
//! transaction either running or finished — never committed but still in a later snapshot, and
//! every xid below `xmax` that is not listed has ended (its commit was recorded before its xid
//! was cleared). Ending a transaction without an xid takes no lock; it only resets `xmin`.
//!
//! The lock is the whole story of the releases modelled here ([`SnapshotLayout`]):
//! - **≤ 9.1 ([`SnapshotLayout::ProcScan`])**: the snapshot reads each registered backend's
//!   large `PGPROC` (several cache lines apart: xid and xmin, the vacuum flags, the subxid cache
//!   header), idle backends included, while holding the shared lock; and every read-only
//!   transaction's end writes its `PGPROC`'s xmin and flags lines, which all scanners read.
//! - **9.2 ([`SnapshotLayout::Pgxact`])**: the hot fields (xid, xmin, vacuum flags, subxid count
//!   and overflow) move to a dense `PGXACT` array of 12-byte entries, so a scan of 100 backends
//!   reads about 20 cache lines instead of 300; subxids stay in `PGPROC`.
//! - **14 ([`SnapshotLayout::Dense`])**: xids, subxid states and status flags are separate dense
//!   arrays indexed by `pgxactoff`; the scan reads only the xids (4 bytes per backend) and looks at
//!   the rest only for backends that have one; xmin is no longer scanned (vacuum horizons are
//!   computed elsewhere). Every end of an xid-bearing transaction bumps `xactCompletionCount`, and
//!   a backend whose previous snapshot was taken at the current count reuses it without scanning
//!   (`GetSnapshotDataReuse`, still under the shared lock).
//!
//! From 9.6 ([`ProcArrayConfig::group_clear`]) a committer first tries `ProcArrayLock` with a
//! conditional acquire; if that fails it pushes itself on `procArrayGroupFirst`, a lock-free
//! list of proc numbers threaded through `procArrayGroupNext`. The backend that found the list
//! empty is the leader: it takes the lock, detaches the whole list, clears every member's xid,
//! releases the lock and wakes each member through its semaphore. A member sleeps until its
//! `procArrayGroupMember` flag is cleared, re-posting any wakeups it absorbed meanwhile.
//!
//! # Differences from PostgreSQL
//! - Backends are explicit [`Backend`] handles; a backend's ProcArray entry is its
//!   [`Backend::procno`]. Entries are registered with [`ProcArray::add`] (`ProcArrayAdd`) —
//!   workloads register idle connections that never run — and removed with
//!   [`ProcArray::remove`].
//! - The commit log and `pg_subtrans` are not SLRUs here (the slru crate models the commit log):
//!   commit bits and subtransaction parents live in pages created under XidGenLock as
//!   `ExtendCLOG` / `ExtendSUBTRANS` would, never evicted nor truncated
//!   ([`ProcArray::transaction_id_did_commit`], [`ProcArray::sub_trans_get_topmost`]). xids do
//!   not wrap around: assignment stops at 2^31 with PostgreSQL's wraparound error, and
//!   comparisons are plain.
//! - No lazy VACUUM, logical decoding, prepared transactions, hot standby
//!   (`KnownAssignedXids`), replication-slot xmins, `lxid`, `delayChkpt` semantics or old-snapshot
//!   threshold. Status flags are read where PostgreSQL reads them, but nothing sets them.
//! - 14's `GetSnapshotData` also raises the `GlobalVis*` horizons and `RecentXmin` after the
//!   lock; ≤ 13 computes `RecentGlobalXmin` from every backend's xmin during the scan. The scan of
//!   xmins is modelled (it is the memory traffic), the result is returned as
//!   [`Snapshot::global_xmin`]; the `GlobalVis*` bookkeeping is not.
//! - Fields that are only read and written under a lock are data words
//!   ([`pglocks_sync::data`]: relaxed std atomics, ordered by the LWLock and charged to a
//!   simulated CPU at their address), or, where the Rust form does not have PostgreSQL's layout
//!   (`ProcArrayStruct`), std atomics charged on a region of the simulated shared-memory map
//!   (see `shmem`); those PostgreSQL reads under a lock other than the writer's (an xid is
//!   published under XidGenLock and read under ProcArrayLock; a backend writes its own xmin
//!   under the shared lock) are the loom shim's atomics.
//! - The walks of every backend (`GetSnapshotData`'s, `TransactionIdIsInProgress`') are
//!   declared independent loads ([`pglocks_sync::shmem::independent`]): no iteration's loads
//!   wait for the previous one's, so a simulated core overlaps their misses as an out-of-order
//!   one does. Within an iteration the load of a `PGPROC` or `PGXACT` does depend on the proc
//!   number read from the array just before; the simulator overlaps that pair too (the array
//!   is read-mostly, so its lines are hits).
//!
//! # Memory layout
//! Every shared structure here is placed in the simulated shared-memory map
//! ([`pglocks_sync::shmem::Placed`]) as a region named after PostgreSQL's, in the order
//! PostgreSQL allocates them: `ShmemVariableCache`, `XidGenLock` and `ProcArrayLock`,
//! `ProcGlobal->procArrayGroupFirst`, `ProcGlobal->allProcs`, then `ProcGlobal->allPgXact`
//! (9.2–13) or `ProcGlobal->xids`, `->subxidStates` and `->statusFlags` (14), and
//! `ProcArrayStruct`. Each starts on a 128-byte boundary with its elements back to back, as
//! `ShmemAlloc` places PostgreSQL's, whatever the host's allocator did; so the lines a
//! simulated CPU is charged for are PostgreSQL's. `VariableCacheData` is a `repr(C)` struct
//! with 14's offsets, the `PGPROC` and `PGXACT` models `repr(C)` structs of PostgreSQL's
//! sizes. `ProcArrayStruct`, whose Rust form is not PostgreSQL's, is charged by explicit
//! touches of its region instead. Two shortcuts: the proc crate's `PGPROC` slots (semaphore,
//! lock waits) and this crate's `PGPROC` model are two regions for what is one array in
//! PostgreSQL, and `procArrayGroupFirst` does not share `PROC_HDR`'s line (see
//! [`ProcArray`]'s fields). The stand-in commit bits and subtransaction parents
//! ([`ProcArray::transaction_id_did_commit`]) are not charged at all: where a model has
//! PostgreSQL's commit log (the slru crate's), they only shadow it.

mod inprogress;
mod shmem;
mod snapshot;
mod status;
mod xact;

pub use snapshot::Snapshot;

use pglocks_lwlock::{LwLockError, LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::*};
use pglocks_sync::data::{DataU32, DataU64, DataU8};
use pglocks_sync::CachePadded;
use shmem::{ProcArrayStruct, ShmemArray, ShmemBox};
use status::TransactionStatus;
pub use status::XACTS_PER_PAGE;

/// proc.h's `PGPROC_MAX_CACHED_SUBXIDS`: subtransaction xids a backend advertises.
pub const PGPROC_MAX_CACHED_SUBXIDS: usize = 64;
/// transam.h's `InvalidTransactionId`.
pub const INVALID_TRANSACTION_ID: u32 = 0;
/// transam.h's `FirstNormalTransactionId`.
pub const FIRST_NORMAL_TRANSACTION_ID: u32 = 3;
/// proc.h's `PROC_IN_VACUUM`: a lazy VACUUM, left out of snapshots.
pub const PROC_IN_VACUUM: u8 = 0x02;
/// proc.h's `PROC_VACUUM_STATE_MASK` (9.x spelling; 14's `PROC_VACUUM_STATE_MASK` is the same
/// idea over `statusFlags`).
pub const PROC_VACUUM_STATE_MASK: u8 = 0x0E;
/// postmaster.h's `MAX_BACKENDS` (2^18 − 1; the same as [`pglocks_proc::MAX_BACKENDS`], which
/// bounds every [`ProcTable`](pglocks_proc::ProcTable)).
pub const MAX_BACKENDS: usize = pglocks_proc::MAX_BACKENDS;
/// The first xid that is not assigned (this model's `xidStopLimit`: no wraparound).
pub const XID_STOP_LIMIT: u32 = 1 << 31;
/// `INVALID_PGPROCNO`.
pub(crate) const INVALID_PGPROCNO: u32 = u32::MAX;

/// `TransactionIdIsNormal`.
#[inline]
pub fn transaction_id_is_normal(xid: u32) -> bool {
    xid >= FIRST_NORMAL_TRANSACTION_ID
}

/// Where the fields a snapshot reads live: the release's memory layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotLayout {
    /// ≤ 9.1: every registered `PGPROC` is read, several cache lines of each.
    ProcScan,
    /// 9.2–13: the dense `PGXACT` array (xid, xmin, vacuum flags, subxid count and overflow).
    Pgxact,
    /// 14+: `ProcGlobal->xids`, `subxidStates`, `statusFlags` by `pgxactoff`, and snapshot
    /// reuse through `xactCompletionCount`.
    Dense,
}

/// The shape of a ProcArray.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcArrayConfig {
    /// `MaxBackends`: `PGPROC`s, and the most ProcArray entries.
    pub max_backends: usize,
    /// The release's layout.
    pub layout: SnapshotLayout,
    /// 9.6+: conditional acquire at commit, else group XID clear.
    pub group_clear: bool,
    /// 9.2–13: bytes from one `PGXACT` to the next, rounded up to whole entries. 0 (the
    /// default) is PostgreSQL's dense array of 12-byte entries, where neighbouring backends'
    /// entries share cache lines and every transaction end writes its own; 64 or 128 give each
    /// backend lines of its own, the cache-line-aligned `PGXACT` discussed on pgsql-hackers in
    /// 2016–17 and never committed (a prototype, not a release).
    pub pgxact_padding: usize,
    /// 14+: bytes from one backend's entry to the next in `ProcGlobal->xids`, `subxidStates`
    /// and `statusFlags`, rounded up to whole entries. 0 (the default) is PostgreSQL's dense
    /// arrays, which 14 made dense so that `GetSnapshotData` reads 16 xids a line; 64 or 128
    /// give each backend's entries lines of their own, so that an xid assigned or cleared stops
    /// taking its neighbours' entries away from other readers, at the cost of a line per
    /// backend in every scan (a prototype, not a release).
    pub dense_padding: usize,
}

impl ProcArrayConfig {
    /// A ProcArray of `max_backends` with the release's `layout` and group clear.
    pub fn new(max_backends: usize, layout: SnapshotLayout, group_clear: bool) -> Self {
        Self {
            max_backends,
            layout,
            group_clear,
            pgxact_padding: 0,
            dense_padding: 0,
        }
    }

    /// Checks the shape.
    pub fn validate(&self) -> Result<(), ProcArrayError> {
        if self.max_backends == 0 || self.max_backends > MAX_BACKENDS {
            return Err(ProcArrayError::Config(format!(
                "max_backends must be 1 to {MAX_BACKENDS}, not {}",
                self.max_backends
            )));
        }
        for (what, padding) in [
            ("PGXACT padding", self.pgxact_padding),
            ("dense array padding", self.dense_padding),
        ] {
            if padding > 4096 {
                return Err(ProcArrayError::Config(format!(
                    "{what} must be 0 to 4096 bytes, not {padding}"
                )));
            }
        }
        Ok(())
    }
}

/// Errors of the ProcArray, in PostgreSQL's words where it has them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcArrayError {
    /// An LWLock refused.
    #[error(transparent)]
    LwLock(#[from] LwLockError),
    /// A shape out of range.
    #[error("invalid ProcArray setting: {0}")]
    Config(String),
    /// The array is full (`ProcArrayAdd`).
    #[error("sorry, too many clients already")]
    TooManyClients,
    /// A proc number out of range, or not (or already) in the array.
    #[error("backend {procno} is {what}")]
    BadProc {
        /// The proc number.
        procno: usize,
        /// What is wrong with it.
        what: &'static str,
    },
    /// A transaction-state misuse PostgreSQL catches with an `Assert` (a second top-level xid,
    /// a subtransaction xid without a top-level one, ending with the wrong `latestXid`).
    #[error("transaction state of backend {procno}: {what}")]
    XactState {
        /// The backend.
        procno: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// The xid counter reached the stop limit.
    #[error("database is not accepting commands to avoid wraparound data loss")]
    XidWraparound,
    /// The caller's extension of the commit log for a new xid failed (`ExtendCLOG`).
    #[error("could not extend the commit log for transaction {xid}: {source}")]
    Extend {
        /// The xid being assigned.
        xid: u32,
        /// What the commit log said.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An xid never assigned, past the last status page (`SlruReportIOError`'s wording).
    #[error("could not access status of transaction {xid}")]
    StatusUnavailable {
        /// The transaction.
        xid: u32,
    },
}

/// `XidCacheStatus` (14) / the header of 9.1's `XidCache`: the subxid count and overflow flag.
#[derive(Default)]
#[repr(C)]
pub(crate) struct XidCacheStatus {
    pub(crate) count: AtomicU8,
    pub(crate) overflowed: AtomicBool,
}

impl XidCacheStatus {
    /// Empties the cache (under ProcArrayLock exclusive).
    fn clear(&self) {
        self.count.store(0, Relaxed);
        self.overflowed.store(false, Relaxed);
    }
}

/// Models `PGPROC` (proc.h): one per possible backend, in one contiguous array as
/// `InitProcGlobal` allocates them. The fields a snapshot reads sit about where 9.1 had them:
/// xid and xmin near the end of the first 64 bytes (9.1: 44 and 48), the vacuum flags past them
/// (9.1: 69), the subxid cache after the lock-queue heads (9.1: 400; here 448); the filler
/// stands for the fields not modelled (list links, semaphore, latch, wait state,
/// `myProcLocks`), and the later releases' group-clear fields and fast-path slots follow. 864
/// bytes (9.1's `PGPROC` is about 660): neither is a whole number of cache lines, so where the
/// fields fall on lines changes from one `PGPROC` to the next (in every other `PGPROC` here the
/// xid and the vacuum flags share a line), as it does in PostgreSQL's array.
///
/// `pgxactoff` is a data word (under ProcArrayLock); the other fields are the shim's atomics,
/// being read by other backends under a lock their writer does not hold. The model keeps
/// `pgxactoff` in every layout and reads it to check that a backend is in the array; before 14
/// PostgreSQL has no such field, so there that read of the backend's own `PGPROC` line is one
/// PostgreSQL does not make (a hit, as a rule: only its owner writes the line).
#[repr(C)]
pub(crate) struct Pgproc {
    _links_sem_latch: [u8; 48],
    /// `pgxactoff` (14): this backend's index in the dense arrays; [`INVALID_PGPROCNO`] when not
    /// in the ProcArray (here for every layout). Under ProcArrayLock.
    pub(crate) pgxactoff: DataU32,
    /// `xid` (≤ 9.1; 14's mirror of `ProcGlobal->xids`).
    pub(crate) xid: AtomicU32,
    /// `xmin` (≤ 9.1 and 14+).
    pub(crate) xmin: AtomicU32,
    _lxid: u32,
    _pid_ids: [u8; 24],
    /// `vacuumFlags` (≤ 9.1) / `statusFlags` (14).
    pub(crate) vacuum_flags: AtomicU8,
    /// `inCommit` (≤ 9.1): cleared at every transaction end.
    pub(crate) in_commit: AtomicBool,
    _wait_state_proc_locks: [u8; 358],
    /// `subxids.overflowed` / `subxids.nxids` (≤ 9.1); 14's `subxidStatus` mirror.
    pub(crate) subxid_status: XidCacheStatus,
    /// `subxids.xids` (every release).
    pub(crate) subxids: [AtomicU32; PGPROC_MAX_CACHED_SUBXIDS],
    /// `procArrayGroupMember` (9.6+).
    pub(crate) group_member: AtomicBool,
    /// `procArrayGroupNext` (9.6+).
    pub(crate) group_next: AtomicU32,
    /// `procArrayGroupMemberXid` (9.6+): the member's `latestXid`.
    pub(crate) group_member_xid: AtomicU32,
    _fast_path: [u8; 144],
}

impl Pgproc {
    fn new() -> Self {
        Self {
            _links_sem_latch: [0; 48],
            pgxactoff: DataU32::new(INVALID_PGPROCNO),
            xid: AtomicU32::new(0),
            xmin: AtomicU32::new(0),
            _lxid: 0,
            _pid_ids: [0; 24],
            vacuum_flags: AtomicU8::new(0),
            in_commit: AtomicBool::new(false),
            _wait_state_proc_locks: [0; 358],
            subxid_status: XidCacheStatus::default(),
            subxids: std::array::from_fn(|_| AtomicU32::new(0)),
            group_member: AtomicBool::new(false),
            group_next: AtomicU32::new(INVALID_PGPROCNO),
            group_member_xid: AtomicU32::new(0),
            _fast_path: [0; 144],
        }
    }
}

/// Models `PGXACT` (9.2–13, proc.h): a backend's hot fields, 12 bytes, in a dense array indexed
/// by proc number.
#[repr(C)]
pub(crate) struct Pgxact {
    pub(crate) xid: AtomicU32,
    pub(crate) xmin: AtomicU32,
    pub(crate) vacuum_flags: AtomicU8,
    pub(crate) overflowed: AtomicBool,
    pub(crate) in_commit: AtomicBool,
    pub(crate) nxids: AtomicU8,
}

/// The fields of one backend that ≤ 13's snapshots scan, wherever the release keeps them: its
/// `PGPROC` (≤ 9.1) or its `PGXACT` (9.2–13).
pub(crate) struct HotFields<'a> {
    pub(crate) xid: &'a AtomicU32,
    pub(crate) xmin: &'a AtomicU32,
    pub(crate) vacuum_flags: &'a AtomicU8,
    pub(crate) in_commit: &'a AtomicBool,
    pub(crate) subxid_count: &'a AtomicU8,
    pub(crate) subxid_overflowed: &'a AtomicBool,
}

impl HotFields<'_> {
    /// `vacuumFlags &= ~PROC_VACUUM_STATE_MASK; inCommit = false`: a store into each, as
    /// PostgreSQL's compound assignments are, whether or not anything changes.
    pub(crate) fn clear_vacuum_flags_and_in_commit(&self) {
        let flags = self.vacuum_flags.load(Relaxed);
        self.vacuum_flags
            .store(flags & !PROC_VACUUM_STATE_MASK, Relaxed);
        self.in_commit.store(false, Relaxed);
    }
}

/// Models `VariableCacheData` (transam.h; 17's `TransamVariablesData`), the parts used here,
/// at 14–18's offsets: `nextOid` and `oidCount` (OidGenLock), `nextXid` at 8 (a 64-bit
/// `FullTransactionId`, its low half here), the wraparound limits, `oldestXidDB` and the
/// commit-timestamp bounds, `latestCompletedXid` at 48 (a `FullTransactionId`),
/// `xactCompletionCount` at 56, `oldestClogXid`. 72 bytes, on a line of its own (its own
/// `ShmemInitStruct`). 9.1 has `nextXid` at 8 and `latestCompletedXid` at 36 (4-byte xids, no
/// commit-timestamp bounds); in every release both lie in the struct's first 64 bytes, so an
/// xid assignment (XidGenLock) and a snapshot or commit (ProcArrayLock) touch the same line,
/// as they do in PostgreSQL. The model keeps 14's offsets for every release.
#[repr(C)]
struct VariableCache {
    _next_oid_oid_count: [u32; 2],
    /// `nextXid`, under XidGenLock.
    next_xid: DataU32,
    _next_xid_epoch_limits_commit_ts: [u32; 9],
    /// `latestCompletedXid`, under ProcArrayLock.
    latest_completed_xid: DataU32,
    _latest_completed_epoch: u32,
    /// `xactCompletionCount` (14), under ProcArrayLock.
    xact_completion_count: DataU64,
    _oldest_clog_xid: u32,
}

/// The ProcArray and what surrounds it: `ProcArrayStruct`, `ProcGlobal`'s `PGPROC`s, `PGXACT`s
/// and dense arrays, `ShmemVariableCache`, ProcArrayLock and XidGenLock.
///
/// Every part PostgreSQL keeps in shared memory is placed in the simulated map under
/// PostgreSQL's name for it (see `shmem`), in the order [`ProcArray::new`] makes them.
pub struct ProcArray<K: RawLwLock> {
    layout: SnapshotLayout,
    group_clear: bool,
    /// ProcArrayLock: one of `MainLWLockArray`'s individual locks, padded to
    /// `PG_CACHE_LINE_SIZE` as `LWLockPadded` is from 9.6 (the padding PostgreSQL has, kept on
    /// the host too). The lock is a region of its own rather than slot 4 of the array; up to
    /// 9.5 the array's 16- or 32-byte padding may put it on a line with a neighbour (XidGenLock,
    /// SInvalReadLock), which the model does not reproduce.
    proc_array_lock: ShmemBox<CachePadded<K>>,
    /// XidGenLock: as ProcArrayLock (`MainLWLockArray`'s slot 3).
    xid_gen_lock: ShmemBox<CachePadded<K>>,
    /// `ShmemVariableCache`: its own `ShmemAlloc` (`ShmemInitStruct` from 15), so the next
    /// allocation starts on the next 128-byte boundary; the host keeps it on a line of its own
    /// as well (`CachePadded`).
    cache: ShmemBox<CachePadded<VariableCache>>,
    /// `procArray`: `numProcs` and `pgprocnos` (9.1's `procs[]` held pointers to the same
    /// `PGPROC`s).
    proc_array: ProcArrayStruct,
    /// `ProcGlobal->allProcs`.
    all_procs: ShmemArray<Pgproc>,
    /// `ProcGlobal->allPgXact` (9.2–13), by proc number (its entries spaced by
    /// [`ProcArrayConfig::pgxact_padding`]).
    all_pgxact: ShmemArray<Pgxact>,
    /// `ProcGlobal->xids` (14).
    xids: ShmemArray<AtomicU32>,
    /// `ProcGlobal->subxidStates` (14).
    subxid_states: ShmemArray<XidCacheStatus>,
    /// `ProcGlobal->statusFlags` (14).
    status_flags: ShmemArray<DataU8>,
    /// `ProcGlobal->procArrayGroupFirst` (9.6+). A field of `PROC_HDR` in PostgreSQL, on a line
    /// with the header's other fields (the free-list heads, `spins_per_delay`, and from 11
    /// `clogGroupFirst`, which the slru crate keeps on a line of its own); here a region of its
    /// own, padded on the host as it always was, so a group clear's compare-and-swap and a
    /// CLOG group update's never meet on one line as they may in 11+.
    group_first: ShmemBox<CachePadded<AtomicU32>>,
    status: TransactionStatus,
}

impl<K: RawLwLock> ProcArray<K> {
    /// Backend `procno`'s `PGXACT` (9.2–13).
    #[inline]
    fn pgxact(&self, procno: usize) -> &Pgxact {
        &self.all_pgxact[procno]
    }

    /// Models `CreateSharedProcArray` / `InitProcGlobal`: an empty array, `nextXid` at
    /// [`FIRST_NORMAL_TRANSACTION_ID`] and `latestCompletedXid` just below it.
    pub fn new(cfg: &ProcArrayConfig) -> Result<Self, ProcArrayError> {
        cfg.validate()?;
        let n = cfg.max_backends;
        let dense = cfg.layout == SnapshotLayout::Dense;
        let pgxact = cfg.layout == SnapshotLayout::Pgxact;
        // In the order PostgreSQL allocates them (`CreateSharedMemoryAndSemaphores`):
        // `ShmemVariableCache` first (`InitShmemAllocation`, up to 14), `MainLWLockArray`
        // (`CreateLWLocks`), then `InitProcGlobal`'s header and arrays, then
        // `CreateSharedProcArray`'s struct.
        let cache = ShmemBox::new(
            "ShmemVariableCache",
            CachePadded::new(VariableCache {
                _next_oid_oid_count: [0; 2],
                next_xid: DataU32::new(FIRST_NORMAL_TRANSACTION_ID),
                _next_xid_epoch_limits_commit_ts: [0; 9],
                latest_completed_xid: DataU32::new(FIRST_NORMAL_TRANSACTION_ID - 1),
                _latest_completed_epoch: 0,
                xact_completion_count: DataU64::new(1),
                _oldest_clog_xid: 0,
            }),
        );
        let xid_gen_lock = ShmemBox::new("XidGenLock", CachePadded::new(K::new("XidGen")));
        let proc_array_lock = ShmemBox::new("ProcArrayLock", CachePadded::new(K::new("ProcArray")));
        let group_first = ShmemBox::new(
            "ProcGlobal->procArrayGroupFirst",
            CachePadded::new(AtomicU32::new(INVALID_PGPROCNO)),
        );
        let all_procs = ShmemArray::new("ProcGlobal->allProcs", n, Pgproc::new);
        let all_pgxact = ShmemArray::spaced(
            "ProcGlobal->allPgXact",
            if pgxact { n } else { 0 },
            cfg.pgxact_padding,
            || Pgxact {
                xid: AtomicU32::new(0),
                xmin: AtomicU32::new(0),
                vacuum_flags: AtomicU8::new(0),
                overflowed: AtomicBool::new(false),
                in_commit: AtomicBool::new(false),
                nxids: AtomicU8::new(0),
            },
        );
        let dense_len = if dense { n } else { 0 };
        let pad = cfg.dense_padding;
        let xids = ShmemArray::spaced("ProcGlobal->xids", dense_len, pad, || AtomicU32::new(0));
        let subxid_states = ShmemArray::spaced(
            "ProcGlobal->subxidStates",
            dense_len,
            pad,
            XidCacheStatus::default,
        );
        let status_flags =
            ShmemArray::spaced("ProcGlobal->statusFlags", dense_len, pad, || DataU8::new(0));
        let proc_array = ProcArrayStruct::new(cfg.layout, n, INVALID_PGPROCNO);
        Ok(Self {
            layout: cfg.layout,
            group_clear: cfg.group_clear,
            proc_array_lock,
            xid_gen_lock,
            cache,
            proc_array,
            all_procs,
            all_pgxact,
            xids,
            subxid_states,
            status_flags,
            group_first,
            status: TransactionStatus::new(),
        })
    }

    /// ProcArrayLock, for callers that take it themselves as PostgreSQL code does.
    pub fn proc_array_lock(&self) -> &K {
        &self.proc_array_lock
    }

    /// The layout.
    pub fn layout(&self) -> SnapshotLayout {
        self.layout
    }

    /// `MaxBackends`.
    pub fn max_backends(&self) -> usize {
        self.all_procs.len()
    }

    /// `numProcs`: backends in the array (read as ProcArrayLock's holder reads it).
    pub fn num_procs(&self) -> usize {
        self.proc_array.num_procs()
    }

    /// `nextXid` (`ReadNextTransactionId`, under XidGenLock shared).
    pub fn read_next_xid(&self, b: &mut Backend) -> Result<u32, ProcArrayError> {
        self.xid_gen_lock.acquire(b, LwLockMode::Shared)?;
        let next = self.cache.next_xid.load(Relaxed);
        self.xid_gen_lock.release(b)?;
        Ok(next)
    }

    /// `latestCompletedXid` (under ProcArrayLock shared).
    pub fn latest_completed_xid(&self, b: &mut Backend) -> Result<u32, ProcArrayError> {
        self.proc_array_lock.acquire(b, LwLockMode::Shared)?;
        let latest = self.cache.latest_completed_xid.load(Relaxed);
        self.proc_array_lock.release(b)?;
        Ok(latest)
    }

    fn proc_of(&self, procno: usize) -> Result<&Pgproc, ProcArrayError> {
        if procno >= self.all_procs.len() {
            return Err(ProcArrayError::BadProc {
                procno,
                what: "out of range",
            });
        }
        Ok(&self.all_procs[procno])
    }

    /// Models `ProcArrayAdd`: enters backend `procno` (a [`Backend::procno`], or an idle
    /// connection's number) in the array, under ProcArrayLock exclusive taken by `b` (and 14's
    /// XidGenLock). ≤ 9.1
    /// appends; 9.2+ keeps `pgprocnos` sorted (14 moves the dense entries along and renumbers
    /// their `pgxactoff`).
    pub fn add(&self, b: &mut Backend, procno: usize) -> Result<(), ProcArrayError> {
        let proc = self.proc_of(procno)?;
        self.lock_for_membership(b)?;
        let done = self.add_locked(proc, procno);
        self.unlock_for_membership(b)?;
        done
    }

    fn add_locked(&self, proc: &Pgproc, procno: usize) -> Result<(), ProcArrayError> {
        if proc.pgxactoff.load(Relaxed) != INVALID_PGPROCNO {
            return Err(ProcArrayError::BadProc {
                procno,
                what: "already in the ProcArray",
            });
        }
        let n = self.num_procs();
        if n == self.proc_array.max_procs() {
            return Err(ProcArrayError::TooManyClients);
        }
        // ≤ 9.1 appends; 9.2+ keeps proc-number order (PostgreSQL scans for the place; a
        // binary search finds the same one, so that registering 10^5 backends stays quick).
        let at = if self.layout == SnapshotLayout::ProcScan {
            n
        } else {
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if self.proc_array.pgprocno(mid) as usize <= procno {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        for i in (at..n).rev() {
            self.move_entry(i, i + 1);
        }
        self.proc_array.set_pgprocno(at, procno as u32);
        proc.pgxactoff.store(at as u32, Relaxed);
        if self.layout == SnapshotLayout::Dense {
            self.xids[at].store(proc.xid.load(Relaxed), Relaxed);
            self.subxid_states[at]
                .count
                .store(proc.subxid_status.count.load(Relaxed), Relaxed);
            self.subxid_states[at]
                .overflowed
                .store(proc.subxid_status.overflowed.load(Relaxed), Relaxed);
            self.status_flags[at].store(proc.vacuum_flags.load(Relaxed), Relaxed);
        }
        self.proc_array.set_num_procs(n + 1);
        Ok(())
    }

    /// Models `ProcArrayRemove` for a backend without an xid (a disconnect): ≤ 9.1 moves the
    /// last entry into the hole; 9.2+ closes it up, keeping the order.
    pub fn remove(&self, b: &mut Backend, procno: usize) -> Result<(), ProcArrayError> {
        let proc = self.proc_of(procno)?;
        self.lock_for_membership(b)?;
        let done = self.remove_locked(proc, procno);
        self.unlock_for_membership(b)?;
        done
    }

    fn remove_locked(&self, proc: &Pgproc, procno: usize) -> Result<(), ProcArrayError> {
        let at = proc.pgxactoff.load(Relaxed);
        if at == INVALID_PGPROCNO {
            return Err(ProcArrayError::BadProc {
                procno,
                what: "not in the ProcArray",
            });
        }
        if self.my_xid(procno) != INVALID_TRANSACTION_ID {
            return Err(ProcArrayError::XactState {
                procno,
                what: "cannot leave the ProcArray with an xid assigned",
            });
        }
        let (at, n) = (at as usize, self.num_procs());
        if self.layout == SnapshotLayout::ProcScan {
            if at != n - 1 {
                self.move_entry(n - 1, at);
            }
        } else {
            for i in at + 1..n {
                self.move_entry(i, i - 1);
            }
        }
        proc.pgxactoff.store(INVALID_PGPROCNO, Relaxed);
        self.proc_array.set_pgprocno(n - 1, INVALID_PGPROCNO);
        self.proc_array.set_num_procs(n - 1);
        Ok(())
    }

    /// ProcArrayLock exclusive, and from 14 XidGenLock too: `GetNewTransactionId` writes
    /// `ProcGlobal->xids[pgxactoff]` holding only XidGenLock, so `pgxactoff` may not move under it.
    fn lock_for_membership(&self, b: &mut Backend) -> Result<(), ProcArrayError> {
        self.proc_array_lock.acquire(b, LwLockMode::Exclusive)?;
        if self.layout == SnapshotLayout::Dense {
            if let Err(e) = self.xid_gen_lock.acquire(b, LwLockMode::Exclusive) {
                self.proc_array_lock.release(b)?;
                return Err(e.into());
            }
        }
        Ok(())
    }

    fn unlock_for_membership(&self, b: &mut Backend) -> Result<(), ProcArrayError> {
        if self.layout == SnapshotLayout::Dense {
            self.xid_gen_lock.release(b)?;
        }
        self.proc_array_lock.release(b)?;
        Ok(())
    }

    /// Moves array entry `from` to `to` (ProcArrayLock exclusive): the proc number, the dense
    /// entries (14), and the moved backend's `pgxactoff`.
    fn move_entry(&self, from: usize, to: usize) {
        let procno = self.proc_array.pgprocno(from);
        self.proc_array.set_pgprocno(to, procno);
        self.all_procs[procno as usize]
            .pgxactoff
            .store(to as u32, Relaxed);
        if self.layout == SnapshotLayout::Dense {
            self.xids[to].store(self.xids[from].load(Relaxed), Relaxed);
            let (f, t) = (&self.subxid_states[from], &self.subxid_states[to]);
            t.count.store(f.count.load(Relaxed), Relaxed);
            t.overflowed.store(f.overflowed.load(Relaxed), Relaxed);
            self.status_flags[to].store(self.status_flags[from].load(Relaxed), Relaxed);
        }
    }

    /// The backend's `pgxactoff`, or an error if it is not in the array.
    fn pgxactoff(&self, procno: usize) -> Result<usize, ProcArrayError> {
        match self.proc_of(procno)?.pgxactoff.load(Relaxed) {
            INVALID_PGPROCNO => Err(ProcArrayError::BadProc {
                procno,
                what: "not in the ProcArray",
            }),
            off => Ok(off as usize),
        }
    }

    /// Backend `procno`'s scanned fields in ≤ 13's layouts; `None` in 14's, where they are
    /// split between the dense arrays and the `PGPROC`.
    #[inline]
    pub(crate) fn hot_fields(&self, procno: usize) -> Option<HotFields<'_>> {
        match self.layout {
            SnapshotLayout::ProcScan => {
                let p = &self.all_procs[procno];
                Some(HotFields {
                    xid: &p.xid,
                    xmin: &p.xmin,
                    vacuum_flags: &p.vacuum_flags,
                    in_commit: &p.in_commit,
                    subxid_count: &p.subxid_status.count,
                    subxid_overflowed: &p.subxid_status.overflowed,
                })
            }
            SnapshotLayout::Pgxact => {
                let p = &self.pgxact(procno);
                Some(HotFields {
                    xid: &p.xid,
                    xmin: &p.xmin,
                    vacuum_flags: &p.vacuum_flags,
                    in_commit: &p.in_commit,
                    subxid_count: &p.nxids,
                    subxid_overflowed: &p.overflowed,
                })
            }
            SnapshotLayout::Dense => None,
        }
    }

    /// The top-level xid backend `procno` advertises (`MyProc->xid`, `MyPgXact->xid`), read by
    /// the backend itself.
    #[inline]
    pub fn my_xid(&self, procno: usize) -> u32 {
        match self.layout {
            SnapshotLayout::Pgxact => self.pgxact(procno).xid.load(Relaxed),
            _ => self.all_procs[procno].xid.load(Relaxed),
        }
    }

    /// The xmin backend `procno` advertises (`MyProc->xmin` / `MyPgXact->xmin`).
    #[inline]
    pub fn my_xmin(&self, procno: usize) -> u32 {
        self.xmin_field(procno).load(Relaxed)
    }

    #[inline]
    fn xmin_field(&self, procno: usize) -> &AtomicU32 {
        match self.layout {
            SnapshotLayout::Pgxact => &self.pgxact(procno).xmin,
            _ => &self.all_procs[procno].xmin,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
    use pglocks_proc::ProcTable;

    type Pa = ProcArray<AtomicLwLock<Pg96Layout>>;

    #[test]
    fn misuse_is_refused_in_postgresqls_words() {
        let e = Pa::new(&ProcArrayConfig::new(0, SnapshotLayout::Dense, true)).err();
        assert!(e.unwrap().to_string().contains("max_backends must be 1 to"));
        let base = ProcArrayConfig::new(4, SnapshotLayout::Dense, true);
        for (cfg, want) in [
            (
                ProcArrayConfig {
                    pgxact_padding: 4097,
                    ..base.clone()
                },
                "PGXACT padding must be 0 to 4096 bytes, not 4097",
            ),
            (
                ProcArrayConfig {
                    dense_padding: 4097,
                    ..base.clone()
                },
                "dense array padding must be 0 to 4096 bytes, not 4097",
            ),
        ] {
            let e = Pa::new(&cfg).err().unwrap().to_string();
            assert!(e.contains(want), "{e}");
        }
        let pa = Pa::new(&ProcArrayConfig::new(1, SnapshotLayout::Pgxact, false)).unwrap();
        let procs = ProcTable::new(2);
        let mut b = procs.attach().unwrap();
        pa.add(&mut b, 0).unwrap();
        let e = pa.add(&mut b, 0).unwrap_err().to_string();
        assert!(e.contains("already in the ProcArray"), "{e}");
        let e = pa.add(&mut b, 1).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
        let e = pa
            .transaction_id_did_commit(1 << 20)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "could not access status of transaction 1048576");
        let xid = pa.assign_xid(&mut b, None).unwrap();
        let e = pa.remove(&mut b, 0).unwrap_err().to_string();
        assert!(e.contains("with an xid assigned"), "{e}");
        pa.end_transaction(&mut b, xid).unwrap();
        assert!(!pa.transaction_id_did_commit(xid).unwrap(), "aborted");
        pa.remove(&mut b, 0).unwrap();
        assert_eq!(pa.num_procs(), 0);
    }

    #[test]
    fn the_commit_log_is_extended_under_xidgenlock_before_the_xid_is_handed_out() {
        let pa = Pa::new(&ProcArrayConfig::new(1, SnapshotLayout::Dense, true)).unwrap();
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        pa.add(&mut b, 0).unwrap();
        let refused = std::io::Error::other("no room for a new page");
        let e = pa
            .assign_xid_extending(&mut b, None, |_, _| Err(refused))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("could not extend the commit log for transaction 3"),
            "{e}"
        );
        assert_eq!(pa.my_xid(0), INVALID_TRANSACTION_ID, "not assigned");
        let mut seen = None;
        let xid = pa
            .assign_xid_extending(&mut b, None, |b, xid| {
                // XidGenLock is held: the conditional acquire fails.
                let free = pa
                    .xid_gen_lock
                    .conditional_acquire(b, LwLockMode::Exclusive);
                seen = Some((xid, free));
                Ok::<(), std::io::Error>(())
            })
            .unwrap();
        assert_eq!(seen, Some((3, Ok(false))), "the same xid, under the lock");
        assert_eq!(xid, 3);
    }

    #[test]
    fn the_91_pgproc_keeps_the_snapshot_fields_lines_apart() {
        // On 64-byte lines: xid and xmin in the first, the vacuum flags in the second, the
        // subxid cache header several lines further.
        let line = |off: usize| off / 64;
        let p = std::mem::offset_of!(Pgproc, xid);
        assert_eq!(line(p), line(std::mem::offset_of!(Pgproc, xmin)));
        assert_eq!(
            line(std::mem::offset_of!(Pgproc, vacuum_flags)),
            line(p) + 1
        );
        assert!(line(std::mem::offset_of!(Pgproc, subxid_status)) >= line(p) + 6);
        assert_eq!(std::mem::size_of::<Pgxact>(), 12);
        // 864 bytes, the size the documentation gives.
        assert_eq!(std::mem::size_of::<Pgproc>(), 864);
    }

    #[test]
    fn next_xid_and_latest_completed_xid_sit_at_14s_offsets_on_one_line() {
        use std::mem::{offset_of, size_of};
        assert_eq!(offset_of!(VariableCache, next_xid), 8);
        assert_eq!(offset_of!(VariableCache, latest_completed_xid), 48);
        assert_eq!(offset_of!(VariableCache, xact_completion_count), 56);
        assert_eq!(size_of::<VariableCache>(), 72);
        // Both in the first 64 bytes of a struct that starts a line.
        assert_eq!(
            offset_of!(VariableCache, next_xid) / 64,
            offset_of!(VariableCache, latest_completed_xid) / 64
        );
        let pa = Pa::new(&ProcArrayConfig::new(1, SnapshotLayout::Dense, true)).unwrap();
        assert_eq!(&**pa.cache as *const VariableCache as usize % 128, 0);
    }

    #[test]
    fn the_dense_arrays_and_pgxacts_run_on_without_gaps() {
        let pa = Pa::new(&ProcArrayConfig::new(40, SnapshotLayout::Dense, true)).unwrap();
        let at = |p: *const u8| p as usize;
        assert_eq!(
            at(&pa.xids[39] as *const _ as *const u8) - at(&pa.xids[0] as *const _ as *const u8),
            39 * 4
        );
        assert_eq!(
            at(&pa.subxid_states[39] as *const _ as *const u8)
                - at(&pa.subxid_states[0] as *const _ as *const u8),
            39 * 2
        );
        assert_eq!(
            at(&pa.all_procs[5] as *const _ as *const u8)
                - at(&pa.all_procs[0] as *const _ as *const u8),
            5 * 864
        );
        assert_eq!(pa.all_pgxact.len(), 0, "no PGXACTs in 14's layout");
        let pa = Pa::new(&ProcArrayConfig::new(40, SnapshotLayout::Pgxact, true)).unwrap();
        let first = at(pa.pgxact(0) as *const Pgxact as *const u8);
        assert_eq!(
            at(pa.pgxact(33) as *const Pgxact as *const u8) - first,
            33 * 12
        );
        assert_eq!(pa.xids.len(), 0, "no dense arrays before 14");
    }
}
