//! PostgreSQL releases as configurations, and single knobs (`--set knob=value`).
//!
//! A preset is the set of knob values that makes each model behave as that release did on x86_64;
//! `--set` then changes one knob so one difference can be isolated. Only knobs whose models exist
//! are listed: each later subsystem adds its row.

use crate::WorkloadError;
use pglocks_apply::publisher::DEFAULT_WORK_MEM_CHANGES;
use pglocks_apply::Streaming;
use pglocks_bufmgr::{BufMgrConfig, PinMethod, VictimSearch};
use pglocks_lmgr::FastPathLayout;
use pglocks_procarray::{ProcArrayConfig, SnapshotLayout};
use pglocks_sinval::SinvalCheck;
use pglocks_slru::clog::{clog_autotune_buffers, ClogConfig};
use pglocks_slru::Victim;
use pglocks_sync::fault::FaultPlan;
use pglocks_sync::time::Duration;
use pglocks_wal::{FlushLatency, FlushWait, Insertion, WalConfig, WalWriter};

/// The knob values in force for a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// s_lock.h: `TAS_SPIN` reads the lock byte before the exchange (x86_64 from 9.4).
    pub tas_spin: bool,
    /// s_lock.c: the unit of `cur_delay`, 1 ms before 9.4 and 1 µs from 9.4.
    pub spin_delay_unit: Duration,
    /// s_lock.c: `NUM_DELAYS`, sleeps before "stuck spinlock".
    pub num_delays: u32,
    /// The `spins_per_delay` every backend starts with (`DEFAULT_SPINS_PER_DELAY`).
    pub spins_per_delay: u32,
    /// lwlock.c: which LWLock implementation the release has.
    pub lwlock: LwLockVariant,
    /// bufmgr: `NUM_BUFFER_PARTITIONS` (16 in 8.2–9.4, 128 from 9.5; 1 in 8.1; 2048 with the
    /// Unisys patches).
    pub buffer_partitions: usize,
    /// bufmgr: `NBuffers`, shared buffers of 8 KB (buffer-lookup; 16384 = 128 MB, the default
    /// `shared_buffers`).
    pub nbuffers: usize,
    /// freelist.c: the victim search under `BufFreelistLock` (≤ 9.4) or with the atomic clock
    /// hand (9.5+).
    pub victim_search: VictimSearch,
    /// bufmgr.c: a pin under the buffer header lock (≤ 9.5) or by compare-exchange (9.6+).
    pub buffer_pin: PinMethod,
    /// bufmgr.c (17+): a backend's repeat pin of a buffer reads `BM_VALID` (a read it started
    /// may not have finished); before, an earlier pin meant a valid page.
    pub repeat_pin_reads_valid: bool,
    /// Workload `buffer-lookup`: the share of reads that go to the hot pages (which stay in
    /// the buffers); the rest miss.
    pub hit_ratio: f64,
    /// Workload `buffer-lookup`: the simulated time of one page read on a miss.
    pub read_latency: Duration,
    /// lock.c: `NUM_LOCK_PARTITIONS`, the LockManager tranche (16 from 8.2; 8.1 had one
    /// LockMgrLock).
    pub lock_partitions: usize,
    /// lock.c: the fast path for weak relation locks (none before 9.2; 16 slots in 9.2–17;
    /// groups of 16 in 18).
    pub fast_path: FastPathLayout,
    /// lock.c (17+): a `NOWAIT` request goes through the wait-queue rule and may be granted
    /// ahead of waiters; before 17 it fails on any conflict.
    pub nowait_checks_queue: bool,
    /// proc.c (≤ 17): `ProcSleep` re-takes the partition lock after its wait; 18 does not.
    pub relock_after_sleep: bool,
    /// nodeModifyTable.c (14+): an `UPDATE` reads the old row again to build the new one
    /// (`table_tuple_fetch_row_version`).
    pub refetch_updated_row: bool,
    /// nbtinsert.c (11+): an insertion at the rightmost leaf of a tree of three levels or more
    /// goes straight to it (`_bt_search_insert`'s cached target block).
    pub btree_rightmost_fastpath: bool,
    /// xlog.c: one `WALInsertLock` (≤ 9.3) or `NUM_XLOGINSERT_LOCKS` insertion locks (9.4+).
    pub wal_insertion: Insertion,
    /// xlog.c: `XLogFlush` waits for `WALWriteLock` with a plain acquire (≤ 9.1) or
    /// `LWLockAcquireOrWait` (9.2+).
    pub flush_wait: FlushWait,
    /// `commit_delay` (0, PostgreSQL's default, is off).
    pub commit_delay: Duration,
    /// `commit_siblings`.
    pub commit_siblings: u32,
    /// 9.3+: `commit_delay` is slept by the flush leader inside `XLogFlush`.
    pub commit_delay_in_flush: bool,
    /// 17+: `insertingAt` is read lock-free (`AtomicVar`), and `logInsertResult` short-cuts
    /// `WaitXLogInsertionsToFinish`.
    pub wal_var_atomic: bool,
    /// `wal_buffers` in 8 KB pages.
    pub wal_buffers: usize,
    /// Where WAL goes: a simulated device, a real segment directory with fdatasync, or nowhere.
    pub flush_device: FlushDeviceKind,
    /// The simulated device's flush latency.
    pub flush_latency: FlushLatency,
    /// xact.c: `synchronous_commit`: on, a commit flushes its record (`XLogFlush`); off
    /// (8.3+), it leaves that to the WAL writer (workloads `wal-commit`, `tpcb-like`,
    /// `insert-commit`).
    pub synchronous_commit: bool,
    /// walwriter.c: `wal_writer_delay`, the WAL writer's sleep between rounds.
    pub wal_writer_delay: Duration,
    /// walwriter.c: the release's WAL writer (none before 8.3; a timed sleep 8.3–9.1; a latch
    /// 9.2–16; from 17 woken only once `wal_writer_flush_after` of WAL is waiting).
    pub wal_writer: WalWriter,
    /// xlog.c (9.6+): `wal_writer_flush_after`, in pages (0, before 9.6: fsync every round).
    pub wal_writer_flush_after: u64,
    /// Workload `wal-insert`: payload bytes per record.
    pub record_size: u32,
    /// clog.c: `CLOGShmemBuffers` of the release, from `shared_buffers` (see [`ClogSizing`]).
    pub clog_sizing: ClogSizing,
    /// An explicit `--set clog_buffers=N`, which wins over the release's sizing.
    pub clog_buffers: Option<usize>,
    /// slru.c (17+): banks of 16 buffers with their own locks.
    pub slru_banks: bool,
    /// slru.c: plain LRU victims (≤ 9.1) or avoiding I/O-busy slots (9.2+).
    pub slru_victim: Victim,
    /// clog.c (11+): group update of transaction status.
    pub clog_group_update: bool,
    /// `shared_buffers` in MB (sizes 17's `transaction_buffers`).
    pub shared_buffers_mb: u32,
    /// The simulated time of one SLRU page read or write.
    pub slru_latency: Duration,
    /// Faults injected into the WAL flush device (write and fsync rules; none by default).
    pub wal_fault: FaultPlan,
    /// Faults injected into the SLRU page store (read and write rules; none by default).
    pub slru_fault: FaultPlan,
    /// Workload `clog-get`: lookups fall among the newest this many xids.
    pub xid_window: u32,
    /// shm_mq.c (15+): the sender publishes `mq_bytes_written` only once more than a quarter of
    /// the ring is pending (`mqh_send_pending`); before, after every chunk.
    pub mq_send_pending: bool,
    /// Workload `shm-mq`: payload bytes per message.
    pub msg_size: usize,
    /// Workloads `shm-mq`, `apply`: bytes of shared memory per queue (header and ring), as
    /// given to `shm_mq_create`; `None`: the workload's own (64 KB for `shm-mq`, parallel
    /// query's per worker; `DSM_QUEUE_SIZE`, 16 MB, for `apply`).
    pub queue_size: Option<usize>,
    /// Workload `apply`: the subscription's `streaming` option (off before 14; `on` the
    /// default 14–17; `parallel` 16+, the default from 18).
    pub streaming: Streaming,
    /// The most the release's subscriptions can stream (off, on from 14, parallel from 16).
    pub streaming_supported: Streaming,
    /// Workload `apply`: inserts per transaction.
    pub txn_size: usize,
    /// Workload `apply`: transactions per publisher backend (thread).
    pub txns: usize,
    /// Workload `apply`: `max_parallel_apply_workers_per_subscription`.
    pub apply_workers: usize,
    /// Workload `apply`: `logical_decoding_work_mem` in decoded changes.
    pub work_mem_changes: usize,
    /// Workload `apply`: CPU work per row on each side (executor, heap, index, WAL), in
    /// arithmetic steps.
    pub row_work: u32,
    /// Workloads `select-only`, `tpcb-like`, `insert-commit`: the backend's private work
    /// between its shared-memory calls (see [`ExecutorWork`]).
    pub executor_work: ExecutorWork,
    /// sinvaladt.c: the "any new messages?" check takes `SInvalReadLock` and `msgnumLock`
    /// (≤ 9.1) or first reads the backend's own `hasMessages` flag without a lock (9.2+).
    pub sinval_check: SinvalCheck,
    /// Workload `sinval-check`: the fraction of operations that first send invalidations.
    pub inval_rate: f64,
    /// Workload `sinval-check`: messages per send.
    pub inval_batch: u32,
    /// Workload `sinval-check`: registered backends that never read the queue.
    pub idle_backends: u32,
    /// procarray.c: where a snapshot's fields live (`PGPROC` scan ≤ 9.1, `PGXACT` 9.2–13,
    /// dense arrays with snapshot reuse 14+).
    pub snapshot_layout: SnapshotLayout,
    /// procarray.c (9.6+): conditional ProcArrayLock at commit, else group XID clear.
    pub group_clear: bool,
    /// A prototype for 9.2–13: bytes between backends' `PGXACT`s (0 = PostgreSQL's dense array).
    pub pgxact_padding: usize,
    /// Workloads `snapshot`, `end-xact`: registered backends (the running threads and idle
    /// connections); at least the threads.
    pub backends: usize,
    /// Workload `snapshot`: the share of operations that are a write transaction instead.
    pub commit_ratio: f64,
    /// Workloads `snapshot`, `end-xact`: subtransaction xids per write transaction.
    pub subxacts: u32,
    /// Macro workloads: pgbench's scale factor (100 000 accounts each).
    pub scale: u32,
    /// Workload `lmgr-relation`: relations locked per transaction.
    pub relations: u32,
    /// Workload `lmgr-strong-mix`: every this many transactions of a backend is a strong one.
    pub strong_every: u32,
    /// lwlock.c: `LWLOCK_PADDED_SIZE`, bytes per lock in an array (32 up to 9.5, 128 from 9.6;
    /// 0 = packed at the lock's own size).
    pub lwlock_padding: usize,
    /// lwlock.c built with `LWLOCK_STATS`: count acquisitions per tranche (off, as in a default
    /// build; blocks and waits are always reported as wait events).
    pub lwlock_stats: bool,
    /// Workload `lwlock-mixed`: the fraction of acquisitions that are shared.
    pub read_ratio: f64,
    /// Workload: dependent arithmetic steps done while holding the lock.
    pub cs_work: u32,
    /// Workload: dependent arithmetic steps done between acquisitions.
    pub think: u32,
}

/// The LWLock implementations of PostgreSQL's releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LwLockVariant {
    /// ≤ 9.4: a struct guarded by an s_lock spinlock.
    SpinlockProtected,
    /// 9.5: atomic state word, wait list under a separate spinlock.
    AtomicWithMutex,
    /// 9.6–17: atomic state word with the LOCKED bit, flags in bits 28–30.
    Atomic,
    /// 18: as 9.6, flags in bits 29–31 and the exclusive value at 2^18.
    Atomic18,
}

impl LwLockVariant {
    /// The knob value naming this variant.
    pub fn name(self) -> &'static str {
        match self {
            LwLockVariant::SpinlockProtected => "spin",
            LwLockVariant::AtomicWithMutex => "atomic-mutex",
            LwLockVariant::Atomic => "atomic",
            LwLockVariant::Atomic18 => "atomic18",
        }
    }
}

/// The work a backend does between the locks — parse, bind, plan, executor start and end,
/// expression evaluation, tuple handling, the protocol — which the macro workloads otherwise
/// leave out (their figure is then the transaction's locking ceiling).
///
/// It is private CPU work (the sync shim's `busy_work`, which touches no shared line, and which
/// a simulator can charge by its step count without running it), placed as a profile of
/// PostgreSQL 15's `tpcb-like` backend split it (`perf record -g`, grouped by what
/// `PostgresMain` calls: commit 16 % of the CPU, the rest bind, execute and the client
/// protocol): a transaction that writes spends [`COMMIT_SHARE_PERCENT`] of its work at commit,
/// and the rest — all of it for `select-only`, whose commit has no xid and writes nothing — is
/// shared equally by its SQL statements (`tpcb-like`'s five, the one of the others), done at
/// each statement's start. The model has no executor, so where inside a statement the work
/// falls is not modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorWork {
    /// None: the locking ceiling (the default of `pglocks run`).
    Off,
    /// What a PostgreSQL 15 backend spends per transaction of the workload, measured
    /// (`tests/pg15-executor-cpu/`), less nothing: the model's own calls add their cost on top.
    Pg15,
    /// This much per statement.
    PerStatement(Duration),
}

/// `busy_work` steps per microsecond of a release build on the project's 2-core x86_64
/// development machine (AMD EPYC): `busy_work(n)` timed for `n` from 1 000 to 10 000 000 runs
/// 7 240–7 370 steps a microsecond (LLVM folds eight steps of its multiply-add chain into one),
/// and `pglocks run lwlock-exclusive --impl floor --threads 1 --set think=1000000` shows the
/// same (about 145 µs an operation). What turns a duration of executor work into steps, and
/// what a simulated machine scales by its clock; a debug build is some 50 times slower.
pub const BUSY_WORK_STEPS_PER_US: u64 = 7300;

/// PostgreSQL 15's backend CPU per transaction, in microseconds (`tests/pg15-executor-cpu/cpu.tsv`,
/// made by `scripts/pg15-executor-cpu.sh`: the serving backend's user + system time over a
/// `pgbench -M prepared -c 1` run, the median of three).
pub const PG15_CPU_US_PER_TX: [(&str, u64); 3] = [
    ("select-only", 16),
    ("tpcb-like", 208),
    ("insert-commit", 116),
];

/// The share of a writing transaction's executor work spent at commit, in percent.
pub const COMMIT_SHARE_PERCENT: u64 = 16;

impl ExecutorWork {
    /// PostgreSQL 15's CPU per transaction of `workload` in nanoseconds, and the part of it
    /// spent at commit (a writing workload's [`COMMIT_SHARE_PERCENT`]).
    fn pg15_ns(workload: &str, writes: bool) -> (u64, u64) {
        let total = PG15_CPU_US_PER_TX
            .iter()
            .find(|(w, _)| *w == workload)
            .map_or(0, |&(_, us)| us * 1000);
        let commit = if writes {
            total * COMMIT_SHARE_PERCENT / 100
        } else {
            0
        };
        (total, commit)
    }

    /// The work per statement of `workload`, which runs `statements` SQL statements per
    /// transaction (and `writes` or not), in `busy_work` steps.
    pub fn steps_per_statement(self, workload: &str, statements: u32, writes: bool) -> u32 {
        let ns = match self {
            ExecutorWork::Off => 0,
            ExecutorWork::Pg15 => {
                let (total, commit) = Self::pg15_ns(workload, writes);
                (total - commit) / u64::from(statements.max(1))
            }
            ExecutorWork::PerStatement(d) => d.as_nanos() as u64,
        };
        busy_steps(ns)
    }

    /// The work at a writing transaction's commit, in `busy_work` steps (none but for `pg15`).
    pub fn steps_at_commit(self, workload: &str, writes: bool) -> u32 {
        match self {
            ExecutorWork::Pg15 => busy_steps(Self::pg15_ns(workload, writes).1),
            _ => 0,
        }
    }
}

/// `busy_work` steps for `ns` nanoseconds.
fn busy_steps(ns: u64) -> u32 {
    (ns * BUSY_WORK_STEPS_PER_US / 1000).min(u64::from(u32::MAX)) as u32
}

/// How a release sizes its CLOG buffers (`CLOGShmemBuffers`), from `shared_buffers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClogSizing {
    /// ≤ 9.1: `NUM_CLOG_BUFFERS`, 8.
    Fixed8,
    /// 9.2–9.5: `Min(32, Max(4, NBuffers / 512))`.
    UpTo32,
    /// 9.6–16: `Min(128, Max(4, NBuffers / 512))`.
    UpTo128,
    /// 17+: `transaction_buffers = 0`, autotuned in multiples of the bank size.
    Autotune,
}

impl ClogSizing {
    /// The buffers for `shared_buffers_mb` of shared buffers.
    pub fn buffers(self, shared_buffers_mb: u32) -> usize {
        let nbuffers = shared_buffers_mb as usize * 128; // 8 KB pages
        match self {
            ClogSizing::Fixed8 => 8,
            ClogSizing::UpTo32 => (nbuffers / 512).clamp(4, 32),
            ClogSizing::UpTo128 => (nbuffers / 512).clamp(4, 128),
            ClogSizing::Autotune => clog_autotune_buffers(nbuffers),
        }
    }
}

/// Where the WAL workloads' WAL goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDeviceKind {
    /// A device that sleeps `flush_latency` per flush (the default: comparable anywhere).
    Simulated,
    /// Real 16 MB segment files in a temporary directory, with `fdatasync`.
    File,
    /// `fsync = off`: flushes return at once and `commit_delay` is not slept (and here writes
    /// cost nothing either).
    Null,
}

impl FlushDeviceKind {
    /// The knob value.
    pub fn name(self) -> &'static str {
        match self {
            FlushDeviceKind::Simulated => "simulated",
            FlushDeviceKind::File => "file",
            FlushDeviceKind::Null => "null",
        }
    }
}

/// A PostgreSQL major release, as `PG_VERSION_NUM` writes its first minor release: 80100 for
/// 8.1, 90600 for 9.6, 100000 for 10, 180000 for 18. Release rules compare versions, as
/// PostgreSQL's own comments do ("from 9.2", "17+").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32);

/// The version of release `major.minor` (`minor` is 0 from 10 on).
pub const fn v(major: u32, minor: u32) -> Version {
    Version(major * 10_000 + minor * 100)
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = (self.0 / 10_000, self.0 / 100 % 100);
        if major >= 10 {
            write!(f, "{major}")
        } else {
            write!(f, "{major}.{minor}")
        }
    }
}

/// One PostgreSQL release.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// `pg96`, `pg17`, …
    pub name: &'static str,
    /// The release.
    pub version: Version,
    /// What changed in it that the models show; empty for a release without a modelled
    /// change, which has the rules of the last release before it that had one
    /// ([`Preset::same_as`]).
    pub summary: &'static str,
    /// The 2007 Unisys patches on top of 8.2 (not a release).
    unisys: bool,
}

const fn preset(name: &'static str, version: Version, summary: &'static str) -> Preset {
    Preset {
        name,
        version,
        summary,
        unisys: false,
    }
}

use LwLockVariant::{Atomic, Atomic18, AtomicWithMutex, SpinlockProtected};

/// Every preset, oldest first: every major release from 8.1 to 18, and 8.2 with the Unisys
/// patches.
pub const PRESETS: &[Preset] = &[
    preset("pg81", v(8, 1), "8.1: adaptive spins_per_delay arrives; one lock-manager lock"),
    preset("pg82", v(8, 2), "8.2: lock manager and buffer mapping split into 16 partitions"),
    Preset {
        unisys: true,
        ..preset("pg82uis", v(8, 2), "8.2 with the 2007 Unisys patches: 2048 buffer partitions, 64-byte LWLocks, read-first TAS")
    },
    preset("pg83", v(8, 3), "8.3: asynchronous commit (synchronous_commit = off) and the WAL writer"),
    preset("pg84", v(8, 4), ""),
    preset("pg90", v(9, 0), ""),
    preset("pg91", v(9, 1), "9.1: the last release before the fast-path lock work; XLogFlush queues for WALWriteLock"),
    preset("pg92", v(9, 2), "9.2: fast-path relation locks, lazy VXID locks, PGXACT, group commit (LWLockAcquireOrWait); TAS_SPIN macro (plain TAS on x86_64)"),
    preset("pg93", v(9, 3), "9.3: as 9.2, commit_delay slept by the flush leader only"),
    preset("pg94", v(9, 4), "9.4: TAS_SPIN reads first on x86_64; spin delays in microseconds; 8 WAL insertion locks"),
    preset("pg95", v(9, 5), "9.5: atomic LWLock state word; 128 buffer-mapping partitions"),
    preset("pg96", v(9, 6), "9.6: LWLock wait list under the LOCKED bit; pins by compare-exchange; group XID clear"),
    preset("pg10", v(10, 0), ""),
    preset("pg11", v(11, 0), "11: CLOG group update"),
    preset("pg12", v(12, 0), ""),
    preset("pg13", v(13, 0), ""),
    preset("pg14", v(14, 0), "14: dense ProcArray arrays and snapshot reuse; streaming of large transactions to subscribers"),
    preset("pg15", v(15, 0), "15: shm_mq senders batch their bytes_written updates"),
    preset("pg16", v(16, 0), "16: parallel apply of streamed transactions"),
    preset("pg17", v(17, 0), "17: SLRU banks; lock-free WAL insertingAt; NOWAIT follows the wait-queue rule; a repeat pin reads BM_VALID"),
    preset("pg18", v(18, 0), "18: fast-path lock groups; LWLock flags in the top bits; streaming = parallel by default"),
];

/// The preset used when none is given.
pub const DEFAULT_PRESET: &str = "pg18";

/// Every knob `--set` accepts, with what it takes.
pub const KNOBS: &[(&str, &str)] = &[
    (
        "tas_spin",
        "on|off: s_lock retries read the byte before the exchange",
    ),
    ("spin_delay_unit", "us|ms: unit of s_lock's growing sleep"),
    ("num_delays", "N >= 1: sleeps before \"stuck spinlock\""),
    ("spins_per_delay", "N in 1..=1000: starting spins_per_delay"),
    (
        "lwlock",
        "spin|atomic-mutex|atomic|atomic18: the LWLock implementation",
    ),
    (
        "partitions",
        "N in 1..=65536: BufferMapping partitions (buffer-lookup)",
    ),
    (
        "nbuffers",
        "N in 16..=1048576: shared buffers of 8 KB (buffer-lookup; default 16384 = 128 MB; 16 is PostgreSQL's minimum)",
    ),
    (
        "victim_search",
        "lock|atomic: clock sweep under BufFreelistLock (<= 9.4) or with the atomic clock hand (9.5+)",
    ),
    (
        "buffer_pin",
        "lock|cas: a buffer pin under the header lock (<= 9.5) or by compare-exchange of the state word (9.6+)",
    ),
    (
        "hit_ratio",
        "0..1: share of buffer-lookup reads that hit (default 1); the rest miss and run the clock sweep",
    ),
    (
        "read_latency",
        "a duration (0, 10us): the simulated read of a page on a buffer-lookup miss (default 0)",
    ),
    (
        "fast_path",
        "on|off: the fast path for weak relation locks (on = the release's layout; 16 slots before it had one)",
    ),
    (
        "wal_insert_locks",
        "one|N in 1..=64: one WALInsertLock (<= 9.3) or N insertion locks (8 from 9.4)",
    ),
    (
        "flush_wait",
        "acquire|acquire_or_wait: how XLogFlush waits for WALWriteLock (acquire_or_wait from 9.2)",
    ),
    (
        "commit_delay",
        "microseconds or a duration (10us, 1ms): sleep before a flush, by the leader from 9.3, by every committer before (0 = off; never with fsync = off)",
    ),
    (
        "commit_siblings",
        "N in 0..=1000: other backends in a transaction needed to sleep commit_delay (5)",
    ),
    (
        "commit_delay_in_flush",
        "on|off: commit_delay slept by the flush leader only (9.3+), or by every committer",
    ),
    (
        "wal_var",
        "locked|atomic: insertingAt under the wait-list lock (<= 16), or lock-free with the logInsertResult shortcut (17+)",
    ),
    ("wal_buffers", "N in 4..=262144: WAL buffer pages of 8 KB"),
    (
        "flush_device",
        "simulated|file|null: WAL flushes sleep flush_latency, fdatasync real segment files, or do nothing (null is fsync = off)",
    ),
    (
        "fsync",
        "on|off: off = flush_device=null (issue_xlog_fsync returns at once, commit_delay is not slept); on turns null back into the simulated device",
    ),
    (
        "flush_latency",
        "the simulated device's flush time (default 1ms): 2ms, 500us, 1ms..3ms (uniform) or 0 (also --flush-latency)",
    ),
    (
        "synchronous_commit",
        "on|off: off (8.3+) = a commit hands its record to the WAL writer (XLogSetAsyncXactLSN) instead of flushing it (wal-commit, tpcb-like, insert-commit)",
    ),
    (
        "wal_writer_delay",
        "a duration from 1ms to 10s (default 200ms): the WAL writer's sleep between rounds, with synchronous_commit = off",
    ),
    (
        "record_size",
        "N in 1..=1000000: payload bytes per record (wal-insert)",
    ),
    (
        "clog_buffers",
        "N in 2..=131072: CLOG buffer slots, overriding the release's sizing from shared_buffers (with banks a multiple of 16)",
    ),
    (
        "slru_banks",
        "on|off: SLRU banks of 16 slots with their own locks (17+)",
    ),
    (
        "slru_victim",
        "plain|avoid-busy: plain LRU victims (<= 9.1) or avoiding I/O-busy slots (9.2+)",
    ),
    ("clog_group_update", "on|off: CLOG group update (11+)"),
    (
        "shared_buffers",
        "MB in 16..=1048576: shared_buffers, which sizes the CLOG buffers as the release did (default 8192)",
    ),
    (
        "slru_latency",
        "a duration (50us, 1ms, 0): the simulated time of one SLRU page read or write",
    ),
    (
        "wal_fault",
        "none or fault rules for the WAL device: fsync:5 (fail the 5th fsync: PANIC), write:3:short, fsync:every:10:sleep=5ms (see README, Fault injection)",
    ),
    (
        "slru_fault",
        "none or fault rules for the SLRU page store: read:5 (fail the 5th read: ERROR), write:every:3:short, read:every:4:sleep=1ms",
    ),
    (
        "xid_window",
        "N in 1..=2000000: clog-get looks up among the newest N xids (default 100000)",
    ),
    (
        "mq_send_pending",
        "on|off: shm_mq senders publish bytes_written only past a quarter of the ring (15+), or after every chunk",
    ),
    (
        "msg_size",
        "bytes in 0..=67108864: payload per message (shm-mq, default 64)",
    ),
    (
        "queue_size",
        "auto or bytes in 64..=1073741824: shared memory per queue, header included (shm-mq: auto = 65536, parallel query's per worker; apply: auto = 16777216, DSM_QUEUE_SIZE)",
    ),
    (
        "mode",
        "off|on|parallel: apply's subscription option streaming (on 14+, parallel 16+; default off before 14, on 14-17, parallel 18)",
    ),
    (
        "txn_size",
        "N in 1..=100000000: inserts per transaction (apply, default 1000000)",
    ),
    (
        "txns",
        "N in 1..=1000000: transactions per publisher backend (apply, default 1)",
    ),
    (
        "workers",
        "N in 0..=1024: max_parallel_apply_workers_per_subscription (apply, default 2)",
    ),
    (
        "work_mem_changes",
        "N in 1..=100000000: logical_decoding_work_mem in decoded changes (apply, default 440000: 64 MB of ~150-byte inserts)",
    ),
    (
        "executor_work",
        "off|pg15|DURATION: the backend's private CPU work between its locks in select-only, tpcb-like and insert-commit, spread over the transaction's statements: off (the locking ceiling, default), pg15 (PostgreSQL 15's measured CPU per transaction) or a duration per statement (20us); busy_work steps, calibrated on the project's 2-core development machine",
    ),
    (
        "row_work",
        "N in 0..=10000000: arithmetic steps per row on publisher and subscriber alike, for the executor, heap, index and WAL work no model does (apply, default 13000, about 1 us on a 3 GHz x86_64)",
    ),
    (
        "sinval_check",
        "locked|free: the sinval check under SInvalReadLock and msgnumLock (<= 9.1), or wait-free on the backend's own flag (9.2+)",
    ),
    (
        "inval_rate",
        "0..1: share of sinval-check operations that first send invalidation messages (default 0, as pgbench -S)",
    ),
    (
        "inval_batch",
        "N in 1..=4096: invalidation messages per send (sinval-check, default 1)",
    ),
    (
        "idle_backends",
        "N in 0..=10000: registered backends that never read the sinval queue (signalled, then reset; default 0)",
    ),
    (
        "snapshot_layout",
        "proc|pgxact|dense: GetSnapshotData scans PGPROCs (<= 9.1), the PGXACT array (9.2-13), or dense arrays with snapshot reuse (14+)",
    ),
    (
        "group_clear",
        "on|off: ProcArrayLock conditional acquire at commit, else group XID clear (9.6+)",
    ),
    (
        "pgxact_padding",
        "none|64|128: a prototype: space the PGXACT entries of pgxact layouts by a cache line, so backends stop sharing lines (none = PostgreSQL)",
    ),
    (
        "backends",
        "N in 1..=100000: registered backends, running threads plus idle connections (snapshot, end-xact, select-only; default 100)",
    ),
    (
        "commit_ratio",
        "0..1: share of snapshot operations that are a write transaction instead (default 0)",
    ),
    (
        "subxacts",
        "N in 0..=1000: subtransaction xids per write transaction (snapshot, end-xact; 64 fit the cache)",
    ),
    (
        "scale",
        "N in 1..=100000: pgbench's scale factor: 100000 accounts, 10 tellers and 1 branch each (select-only, tpcb-like; default 1)",
    ),
    (
        "relations",
        "N in 1..=1000: relations locked per transaction (lmgr-relation)",
    ),
    (
        "strong_every",
        "N in 1..=1000000: every N-th transaction takes AccessExclusiveLock (lmgr-strong-mix)",
    ),
    (
        "lwlock_padding",
        "none|32|64|128: bytes per LWLock in a partitioned array",
    ),
    (
        "lwlock_stats",
        "on|off: count LWLOCK_STATS acquisitions per tranche (shown with the waits)",
    ),
    (
        "read_ratio",
        "0..1: share of shared acquisitions in lwlock-mixed (default 0.9)",
    ),
    ("cs_work", "N: arithmetic steps inside the critical section"),
    ("think", "N: arithmetic steps between acquisitions"),
];

impl Preset {
    /// The release's fast path (`on` for `--set fast_path`).
    fn fast_path(&self) -> FastPathLayout {
        match self.version {
            r if r >= v(18, 0) => FastPathLayout::Groups(FastPathLayout::pg18_groups(
                pglocks_lmgr::DEFAULT_MAX_LOCKS_PER_TRANSACTION,
            )),
            r if r >= v(9, 2) => FastPathLayout::Slots16,
            _ => FastPathLayout::None,
        }
    }

    /// The release's LWLock.
    fn lwlock(&self) -> LwLockVariant {
        match self.version {
            r if r >= v(18, 0) => Atomic18,
            r if r >= v(9, 6) => Atomic,
            r if r >= v(9, 5) => AtomicWithMutex,
            _ => SpinlockProtected,
        }
    }

    /// For a release without a modelled change, the release whose rules it has: the last one
    /// before it that changed something the models show.
    pub fn same_as(&self) -> Option<&'static Preset> {
        let mine = self.settings();
        PRESETS
            .iter()
            .rev()
            .filter(|p| p.version < self.version && !p.unisys)
            .take_while(|p| p.settings() == mine)
            .last()
    }

    /// Looks a preset up by name.
    pub fn by_name(name: &str) -> Result<&'static Preset, WorkloadError> {
        PRESETS
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| WorkloadError::UnknownPreset {
                name: name.to_string(),
                valid: PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The release's knob values.
    pub fn settings(&self) -> Settings {
        let r = self.version;
        let lwlock = self.lwlock();
        Settings {
            tas_spin: r >= v(9, 4) || self.unisys,
            spin_delay_unit: if r < v(9, 4) {
                Duration::from_millis(1)
            } else {
                Duration::from_micros(1)
            },
            num_delays: pglocks_sync::spin_delay::NUM_DELAYS,
            spins_per_delay: pglocks_sync::spin_delay::DEFAULT_SPINS_PER_DELAY,
            lwlock,
            buffer_partitions: match r {
                _ if self.unisys => 2048,
                r if r >= v(9, 5) => 128,
                r if r >= v(8, 2) => 16,
                _ => 1,
            },
            nbuffers: 16_384,
            victim_search: if r >= v(9, 5) {
                VictimSearch::AtomicClockHand
            } else {
                VictimSearch::FreelistLock
            },
            buffer_pin: match lwlock {
                SpinlockProtected | AtomicWithMutex => PinMethod::HeaderLock,
                Atomic | Atomic18 => PinMethod::Cas,
            },
            repeat_pin_reads_valid: r >= v(17, 0),
            hit_ratio: 1.0,
            read_latency: Duration::ZERO,
            lock_partitions: if r >= v(8, 2) { 16 } else { 1 },
            fast_path: self.fast_path(),
            nowait_checks_queue: r >= v(17, 0),
            relock_after_sleep: r < v(18, 0),
            refetch_updated_row: r >= v(14, 0),
            btree_rightmost_fastpath: r >= v(11, 0),
            wal_insertion: if r >= v(9, 4) {
                Insertion::Locks(pglocks_wal::NUM_XLOGINSERT_LOCKS)
            } else {
                Insertion::OneLock
            },
            flush_wait: if r >= v(9, 2) {
                FlushWait::AcquireOrWait
            } else {
                FlushWait::Acquire
            },
            commit_delay: Duration::ZERO,
            commit_siblings: pglocks_wal::DEFAULT_COMMIT_SIBLINGS,
            commit_delay_in_flush: r >= v(9, 3),
            wal_var_atomic: r >= v(17, 0),
            wal_buffers: pglocks_wal::DEFAULT_WAL_BUFFERS,
            flush_device: FlushDeviceKind::Simulated,
            flush_latency: FlushLatency::Fixed(Duration::from_millis(1)),
            synchronous_commit: true,
            wal_writer_delay: pglocks_wal::DEFAULT_WAL_WRITER_DELAY,
            wal_writer: match r {
                r if r >= v(17, 0) => WalWriter::LatchFlushAfter,
                r if r >= v(9, 2) => WalWriter::Latch,
                r if r >= v(8, 3) => WalWriter::Timed,
                _ => WalWriter::Absent,
            },
            wal_writer_flush_after: if r >= v(9, 6) {
                pglocks_wal::DEFAULT_WAL_WRITER_FLUSH_AFTER
            } else {
                0
            },
            record_size: 100,
            clog_sizing: match r {
                r if r >= v(17, 0) => ClogSizing::Autotune,
                r if r >= v(9, 6) => ClogSizing::UpTo128,
                r if r >= v(9, 2) => ClogSizing::UpTo32,
                _ => ClogSizing::Fixed8,
            },
            clog_buffers: None,
            slru_banks: r >= v(17, 0),
            slru_victim: if r >= v(9, 2) {
                Victim::AvoidIoBusy
            } else {
                Victim::PlainLru
            },
            clog_group_update: r >= v(11, 0),
            shared_buffers_mb: 8192,
            slru_latency: Duration::from_micros(50),
            wal_fault: FaultPlan::new(),
            slru_fault: FaultPlan::new(),
            xid_window: 100_000,
            mq_send_pending: r >= v(15, 0),
            msg_size: 64,
            queue_size: None,
            streaming: match r {
                r if r >= v(18, 0) => Streaming::Parallel,
                r if r >= v(14, 0) => Streaming::On,
                _ => Streaming::Off,
            },
            streaming_supported: match r {
                r if r >= v(16, 0) => Streaming::Parallel,
                r if r >= v(14, 0) => Streaming::On,
                _ => Streaming::Off,
            },
            txn_size: 1_000_000,
            txns: 1,
            apply_workers: pglocks_apply::leader::DEFAULT_MAX_PARALLEL_APPLY_WORKERS,
            work_mem_changes: DEFAULT_WORK_MEM_CHANGES,
            row_work: 13_000,
            executor_work: ExecutorWork::Off,
            sinval_check: if r >= v(9, 2) {
                SinvalCheck::WaitFree
            } else {
                SinvalCheck::Locked
            },
            inval_rate: 0.0,
            inval_batch: 1,
            idle_backends: 0,
            snapshot_layout: match r {
                r if r >= v(14, 0) => SnapshotLayout::Dense,
                r if r >= v(9, 2) => SnapshotLayout::Pgxact,
                _ => SnapshotLayout::ProcScan,
            },
            group_clear: r >= v(9, 6),
            pgxact_padding: 0,
            backends: 100,
            commit_ratio: 0.0,
            subxacts: 0,
            scale: 1,
            relations: 2,
            strong_every: 1000,
            lwlock_padding: match lwlock {
                _ if self.unisys => 64,
                SpinlockProtected | AtomicWithMutex => 32,
                Atomic | Atomic18 => 128,
            },
            lwlock_stats: false,
            read_ratio: 0.9,
            cs_work: 0,
            think: 0,
        }
    }
}

/// The values of a knob that names one of several variants, as `--set` writes them: the first
/// name of a variant is how it reads back, later ones are aliases.
struct Names<T: 'static>(&'static [(&'static str, T)]);

impl<T: Copy + PartialEq> Names<T> {
    /// The variant `value` names, or the knob's error listing the names it takes.
    fn read(&self, value: &str, bad: &dyn Fn(&str) -> WorkloadError) -> Result<T, WorkloadError> {
        self.0
            .iter()
            .find(|(n, _)| *n == value)
            .map(|(_, v)| *v)
            .ok_or_else(|| bad(&self.expected()))
    }

    /// How `variant` is written (`?` for one the table lacks, which a test rules out).
    fn name(&self, variant: T) -> String {
        self.0
            .iter()
            .find(|(_, v)| *v == variant)
            .map_or("?", |(n, _)| n)
            .to_string()
    }

    /// The names a user may write, aliases left out: "a, b or c".
    fn expected(&self) -> String {
        let names: Vec<&str> = self
            .0
            .iter()
            .enumerate()
            .filter(|(i, (_, v))| !self.0[..*i].iter().any(|(_, w)| w == v))
            .map(|(_, (n, _))| *n)
            .collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        }
    }
}

const SPIN_DELAY_UNIT: Names<Duration> = Names(&[
    ("us", Duration::from_micros(1)),
    ("ms", Duration::from_millis(1)),
]);
const VICTIM_SEARCH: Names<VictimSearch> = Names(&[
    ("lock", VictimSearch::FreelistLock),
    ("atomic", VictimSearch::AtomicClockHand),
]);
const BUFFER_PIN: Names<PinMethod> =
    Names(&[("lock", PinMethod::HeaderLock), ("cas", PinMethod::Cas)]);
const FLUSH_WAIT: Names<FlushWait> = Names(&[
    ("acquire", FlushWait::Acquire),
    ("acquire_or_wait", FlushWait::AcquireOrWait),
]);
const WAL_VAR: Names<bool> = Names(&[("locked", false), ("atomic", true)]);
const SLRU_VICTIM: Names<Victim> = Names(&[
    ("plain", Victim::PlainLru),
    ("avoid-busy", Victim::AvoidIoBusy),
]);
const STREAMING: Names<Streaming> = Names(&[
    ("off", Streaming::Off),
    ("on", Streaming::On),
    ("parallel", Streaming::Parallel),
]);
const SINVAL_CHECK: Names<SinvalCheck> = Names(&[
    ("locked", SinvalCheck::Locked),
    ("free", SinvalCheck::WaitFree),
    ("wait-free", SinvalCheck::WaitFree),
]);
const SNAPSHOT_LAYOUT: Names<SnapshotLayout> = Names(&[
    ("proc", SnapshotLayout::ProcScan),
    ("pgxact", SnapshotLayout::Pgxact),
    ("dense", SnapshotLayout::Dense),
]);
const PGXACT_PADDING: Names<usize> = Names(&[("none", 0), ("0", 0), ("64", 64), ("128", 128)]);
const LWLOCK_PADDING: Names<usize> =
    Names(&[("none", 0), ("0", 0), ("32", 32), ("64", 64), ("128", 128)]);

impl Settings {
    /// The lock manager of these settings for `max_backends` backends.
    pub fn lock_manager_config(&self, max_backends: usize) -> pglocks_lmgr::LockManagerConfig {
        pglocks_lmgr::LockManagerConfig {
            partitions: self.lock_partitions,
            fast_path: self.fast_path,
            nowait_checks_queue: self.nowait_checks_queue,
            relock_after_sleep: self.relock_after_sleep,
            ..pglocks_lmgr::LockManagerConfig::new(max_backends)
        }
    }

    /// The WAL of these settings for `max_backends` backends.
    pub fn wal_config(&self, max_backends: usize) -> WalConfig {
        WalConfig {
            insertion: self.wal_insertion,
            flush_wait: self.flush_wait,
            commit_delay: self.commit_delay,
            commit_siblings: self.commit_siblings,
            commit_delay_in_flush: self.commit_delay_in_flush,
            insert_result_cache: self.wal_var_atomic,
            wal_buffers: self.wal_buffers,
            ..WalConfig::new(max_backends)
        }
    }

    /// The buffer pool of these settings.
    pub fn bufmgr_config(&self) -> BufMgrConfig {
        BufMgrConfig {
            nbuffers: self.nbuffers,
            partitions: self.buffer_partitions,
            victim_search: self.victim_search,
            pin: self.buffer_pin,
            read_latency: self.read_latency,
            tas_spin: self.tas_spin,
            repeat_pin_reads_valid: self.repeat_pin_reads_valid,
        }
    }

    /// The CLOG buffers of these settings: an explicit `clog_buffers`, else the release's
    /// sizing for `shared_buffers`.
    pub fn clog_buffers(&self) -> usize {
        self.clog_buffers
            .unwrap_or_else(|| self.clog_sizing.buffers(self.shared_buffers_mb))
    }

    /// The commit log of these settings for `max_backends` backends.
    pub fn clog_config(&self, max_backends: usize) -> ClogConfig {
        ClogConfig::new(
            self.clog_buffers(),
            self.slru_banks,
            self.slru_victim,
            self.clog_group_update,
            max_backends,
        )
    }

    /// The ProcArray of these settings for `max_backends` backends.
    pub fn procarray_config(&self, max_backends: usize) -> ProcArrayConfig {
        ProcArrayConfig {
            pgxact_padding: self.pgxact_padding,
            ..ProcArrayConfig::new(max_backends, self.snapshot_layout, self.group_clear)
        }
    }

    /// The value of `knob` in these settings, written as `--set` takes it (so that
    /// `apply("knob=<value>")` changes nothing); `None` for a knob that does not exist.
    /// `clog_buffers` reads `auto` while the release's sizing is in force.
    pub fn knob_value(&self, knob: &str) -> Option<String> {
        let on_off = |b: bool| if b { "on" } else { "off" }.to_string();
        // Whole microseconds as `Nus`; a finer duration (the parser takes nanoseconds) exactly.
        let exact = |d: Duration| FlushLatency::Fixed(d).to_string();
        let micros = |d: Duration| match d.subsec_nanos() % 1000 {
            0 => format!("{}us", d.as_micros()),
            _ => exact(d),
        };
        Some(match knob {
            "tas_spin" => on_off(self.tas_spin),
            "spin_delay_unit" => SPIN_DELAY_UNIT.name(self.spin_delay_unit),
            "num_delays" => self.num_delays.to_string(),
            "spins_per_delay" => self.spins_per_delay.to_string(),
            "lwlock" => self.lwlock.name().to_string(),
            "partitions" => self.buffer_partitions.to_string(),
            "nbuffers" => self.nbuffers.to_string(),
            "victim_search" | "clock_sweep" => VICTIM_SEARCH.name(self.victim_search),
            "buffer_pin" => BUFFER_PIN.name(self.buffer_pin),
            "hit_ratio" => self.hit_ratio.to_string(),
            "read_latency" => micros(self.read_latency),
            "fast_path" => on_off(self.fast_path != FastPathLayout::None),
            "wal_insert_locks" => match self.wal_insertion {
                Insertion::OneLock => "one".to_string(),
                Insertion::Locks(n) => n.to_string(),
            },
            "flush_wait" => FLUSH_WAIT.name(self.flush_wait),
            "commit_delay" => match self.commit_delay.subsec_nanos() % 1000 {
                0 => self.commit_delay.as_micros().to_string(),
                _ => exact(self.commit_delay),
            },
            "commit_siblings" => self.commit_siblings.to_string(),
            "commit_delay_in_flush" => on_off(self.commit_delay_in_flush),
            "wal_var" => WAL_VAR.name(self.wal_var_atomic),
            "wal_buffers" => self.wal_buffers.to_string(),
            "flush_device" => self.flush_device.name().to_string(),
            "flush_latency" => self.flush_latency.to_string(),
            "fsync" => on_off(self.flush_device != FlushDeviceKind::Null),
            "synchronous_commit" => on_off(self.synchronous_commit),
            "wal_writer_delay" => exact(self.wal_writer_delay),
            "record_size" => self.record_size.to_string(),
            "clog_buffers" => self
                .clog_buffers
                .map_or_else(|| "auto".to_string(), |n| n.to_string()),
            "slru_banks" => on_off(self.slru_banks),
            "slru_victim" => SLRU_VICTIM.name(self.slru_victim),
            "clog_group_update" => on_off(self.clog_group_update),
            "shared_buffers" => self.shared_buffers_mb.to_string(),
            "slru_latency" => micros(self.slru_latency),
            "wal_fault" => self.wal_fault.to_string(),
            "slru_fault" => self.slru_fault.to_string(),
            "xid_window" => self.xid_window.to_string(),
            "mq_send_pending" => on_off(self.mq_send_pending),
            "msg_size" => self.msg_size.to_string(),
            "queue_size" => self
                .queue_size
                .map_or_else(|| "auto".to_string(), |n| n.to_string()),
            "mode" => self.streaming.name().to_string(),
            "txn_size" => self.txn_size.to_string(),
            "txns" => self.txns.to_string(),
            "workers" => self.apply_workers.to_string(),
            "work_mem_changes" => self.work_mem_changes.to_string(),
            "row_work" => self.row_work.to_string(),
            "executor_work" => match self.executor_work {
                ExecutorWork::Off => "off".to_string(),
                ExecutorWork::Pg15 => "pg15".to_string(),
                ExecutorWork::PerStatement(d) => exact(d),
            },
            "sinval_check" => SINVAL_CHECK.name(self.sinval_check),
            "inval_rate" => self.inval_rate.to_string(),
            "inval_batch" => self.inval_batch.to_string(),
            "idle_backends" => self.idle_backends.to_string(),
            "snapshot_layout" => SNAPSHOT_LAYOUT.name(self.snapshot_layout),
            "group_clear" => on_off(self.group_clear),
            "pgxact_padding" => PGXACT_PADDING.name(self.pgxact_padding),
            "backends" => self.backends.to_string(),
            "commit_ratio" => self.commit_ratio.to_string(),
            "subxacts" => self.subxacts.to_string(),
            "scale" => self.scale.to_string(),
            "relations" => self.relations.to_string(),
            "strong_every" => self.strong_every.to_string(),
            "lwlock_padding" => LWLOCK_PADDING.name(self.lwlock_padding),
            "lwlock_stats" => on_off(self.lwlock_stats),
            "read_ratio" => self.read_ratio.to_string(),
            "cs_work" => self.cs_work.to_string(),
            "think" => self.think.to_string(),
            _ => return None,
        })
    }

    /// Applies `knob=value` overrides: one, or several joined by commas
    /// (`mode=on,txn_size=1000`). A comma starts a new override only where a knob's name and
    /// `=` follow it, so values that hold commas (fault rules) stay whole.
    pub fn apply(&mut self, assignments: &str) -> Result<(), WorkloadError> {
        let mut start = 0;
        for (i, _) in assignments.match_indices(',') {
            let next_is_knob = assignments[i + 1..]
                .split_once('=')
                .is_some_and(|(name, _)| KNOBS.iter().any(|k| k.0 == name));
            if next_is_knob {
                self.apply_one(&assignments[start..i])?;
                start = i + 1;
            }
        }
        self.apply_one(&assignments[start..])
    }

    /// Applies one `knob=value` override.
    fn apply_one(&mut self, assignment: &str) -> Result<(), WorkloadError> {
        let (knob, value) = assignment
            .split_once('=')
            .ok_or_else(|| WorkloadError::BadSet(assignment.to_string()))?;
        let (knob, value) = (knob.trim(), value.trim());
        let bad = |expected: &str| WorkloadError::BadKnobValue {
            knob: knob.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        };
        let number = |lo: u32, hi: u32| {
            value
                .parse::<u32>()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| bad(&format!("a whole number from {lo} to {hi}")))
        };
        // A single duration up to `max` (the simulated device's syntax: 10us, 1ms, 0).
        let duration = |max: Duration| match value.parse::<FlushLatency>() {
            Ok(FlushLatency::Fixed(d)) if d <= max => Some(d),
            _ => None,
        };
        let fraction = || {
            value
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| bad("a fraction from 0 to 1"))
        };
        let on_off = || match value {
            "on" | "true" | "1" => Ok(true),
            "off" | "false" | "0" => Ok(false),
            _ => Err(bad("on or off")),
        };
        match knob {
            "tas_spin" => self.tas_spin = on_off()?,
            "lwlock_stats" => self.lwlock_stats = on_off()?,
            "fast_path" => {
                self.fast_path = match (on_off()?, self.fast_path) {
                    (false, _) => FastPathLayout::None,
                    (true, FastPathLayout::None) => FastPathLayout::Slots16,
                    (true, layout) => layout,
                }
            }
            "wal_insert_locks" => {
                self.wal_insertion = if value == "one" {
                    Insertion::OneLock
                } else {
                    let most = pglocks_wal::MAX_XLOGINSERT_LOCKS as u32;
                    Insertion::Locks(
                        number(1, most)
                            .map_err(|_| bad(&format!("one or a whole number from 1 to {most}")))?
                            as usize,
                    )
                }
            }
            "flush_wait" => self.flush_wait = FLUSH_WAIT.read(value, &bad)?,
            "commit_delay" => {
                self.commit_delay = match value.parse::<u32>() {
                    Ok(us) if us <= 100_000 => Duration::from_micros(u64::from(us)),
                    _ => duration(Duration::from_millis(100)).ok_or_else(|| {
                        bad("microseconds up to 100000, or a duration such as 10us or 1ms")
                    })?,
                }
            }
            "commit_siblings" => self.commit_siblings = number(0, 1000)?,
            "commit_delay_in_flush" => self.commit_delay_in_flush = on_off()?,
            "wal_var" => self.wal_var_atomic = WAL_VAR.read(value, &bad)?,
            "wal_buffers" => self.wal_buffers = number(4, 262_144)? as usize,
            "flush_device" => {
                self.flush_device = [
                    FlushDeviceKind::Simulated,
                    FlushDeviceKind::File,
                    FlushDeviceKind::Null,
                ]
                .into_iter()
                .find(|d| d.name() == value)
                .ok_or_else(|| bad("simulated, file or null"))?
            }
            "flush_latency" => {
                self.flush_latency = value
                    .parse()
                    .map_err(|_| bad("a duration such as 2ms or 500us, a range 1ms..3ms, or 0"))?
            }
            "fsync" => {
                if !on_off()? {
                    self.flush_device = FlushDeviceKind::Null
                } else if self.flush_device == FlushDeviceKind::Null {
                    self.flush_device = FlushDeviceKind::Simulated
                }
            }
            "synchronous_commit" => {
                let on = on_off()?;
                if !on && self.wal_writer == WalWriter::Absent {
                    return Err(bad(
                        "on (asynchronous commit and the WAL writer arrived in 8.3)",
                    ));
                }
                self.synchronous_commit = on
            }
            "wal_writer_delay" => {
                let (least, most) = pglocks_wal::WAL_WRITER_DELAY_RANGE;
                self.wal_writer_delay = duration(most)
                    .filter(|d| *d >= least)
                    .ok_or_else(|| bad("a duration from 1ms to 10s, such as 200ms"))?
            }
            "record_size" => self.record_size = number(1, 1_000_000)?,
            "clog_buffers" => self.clog_buffers = Some(number(2, 131_072)? as usize),
            "slru_banks" => self.slru_banks = on_off()?,
            "slru_victim" => self.slru_victim = SLRU_VICTIM.read(value, &bad)?,
            "clog_group_update" => self.clog_group_update = on_off()?,
            "shared_buffers" => self.shared_buffers_mb = number(16, 1_048_576)?,
            "wal_fault" | "slru_fault" => {
                let plan = value
                    .parse::<FaultPlan>()
                    .map_err(|e| bad(&format!("fault rules ({})", e.reason)))?;
                if knob == "wal_fault" {
                    self.wal_fault = plan;
                } else {
                    self.slru_fault = plan;
                }
            }
            "slru_latency" => {
                self.slru_latency = duration(Duration::from_secs(1))
                    .ok_or_else(|| bad("a duration such as 50us or 1ms, or 0"))?
            }
            "xid_window" => self.xid_window = number(1, 2_000_000)?,
            "mq_send_pending" => self.mq_send_pending = on_off()?,
            "msg_size" => self.msg_size = number(0, 64 << 20)? as usize,
            "queue_size" => {
                let least = pglocks_shmmq::SHM_MQ_MINIMUM_SIZE as u32;
                self.queue_size = if value == "auto" {
                    None
                } else {
                    Some(number(least, 1 << 30)? as usize)
                }
            }
            "mode" => {
                let mode = STREAMING.read(value, &bad)?;
                if mode > self.streaming_supported {
                    return Err(bad(match self.streaming_supported {
                        Streaming::Off => "off (streaming of large transactions is 14+)",
                        _ => "off or on (streaming = parallel is 16+)",
                    }));
                }
                self.streaming = mode
            }
            "txn_size" => self.txn_size = number(1, 100_000_000)? as usize,
            "txns" => self.txns = number(1, 1_000_000)? as usize,
            "workers" => {
                let most = pglocks_apply::leader::MAX_PARALLEL_WORKER_LIMIT as u32;
                self.apply_workers = number(0, most)? as usize
            }
            "work_mem_changes" => self.work_mem_changes = number(1, 100_000_000)? as usize,
            "row_work" => self.row_work = number(0, 10_000_000)?,
            "executor_work" => self.executor_work = match value {
                "off" => ExecutorWork::Off,
                "pg15" => ExecutorWork::Pg15,
                _ => ExecutorWork::PerStatement(duration(Duration::from_millis(100)).ok_or_else(
                    || bad("off, pg15, or a duration per statement such as 20us (at most 100ms)"),
                )?),
            },
            "sinval_check" => self.sinval_check = SINVAL_CHECK.read(value, &bad)?,
            "inval_rate" => self.inval_rate = fraction()?,
            "inval_batch" => self.inval_batch = number(1, 4096)?,
            "idle_backends" => self.idle_backends = number(0, 10_000)?,
            "snapshot_layout" => self.snapshot_layout = SNAPSHOT_LAYOUT.read(value, &bad)?,
            "group_clear" => self.group_clear = on_off()?,
            "pgxact_padding" => self.pgxact_padding = PGXACT_PADDING.read(value, &bad)?,
            "backends" => self.backends = number(1, 100_000)? as usize,
            "commit_ratio" => self.commit_ratio = fraction()?,
            "subxacts" => self.subxacts = number(0, 1000)?,
            "scale" => self.scale = number(1, 100_000)?,
            "relations" => self.relations = number(1, 1000)?,
            "strong_every" => self.strong_every = number(1, 1_000_000)?,
            "lwlock_padding" => self.lwlock_padding = LWLOCK_PADDING.read(value, &bad)?,
            "spin_delay_unit" => self.spin_delay_unit = SPIN_DELAY_UNIT.read(value, &bad)?,
            "num_delays" => self.num_delays = number(1, u32::MAX)?,
            "lwlock" => {
                self.lwlock = [SpinlockProtected, AtomicWithMutex, Atomic, Atomic18]
                    .into_iter()
                    .find(|v| v.name() == value)
                    .ok_or_else(|| bad("spin, atomic-mutex, atomic or atomic18"))?
            }
            "partitions" => self.buffer_partitions = number(1, 65_536)? as usize,
            "nbuffers" => self.nbuffers = number(16, 1_048_576)? as usize,
            "victim_search" | "clock_sweep" => {
                self.victim_search = VICTIM_SEARCH.read(value, &bad)?
            }
            "buffer_pin" => self.buffer_pin = BUFFER_PIN.read(value, &bad)?,
            "hit_ratio" => self.hit_ratio = fraction()?,
            "read_latency" => {
                self.read_latency = duration(Duration::from_secs(1))
                    .ok_or_else(|| bad("a duration such as 10us or 1ms, or 0"))?
            }
            "read_ratio" => self.read_ratio = fraction()?,
            "spins_per_delay" => self.spins_per_delay = number(1, 1000)?,
            "cs_work" => self.cs_work = number(0, 1_000_000)?,
            "think" => self.think = number(0, 1_000_000)?,
            _ => {
                return Err(WorkloadError::UnknownKnob {
                    name: knob.to_string(),
                    valid: KNOBS.iter().map(|k| k.0).collect::<Vec<_>>().join(", "),
                })
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_knob_of_every_preset_reads_back_as_set_takes_it() {
        for p in PRESETS {
            let settings = p.settings();
            for (knob, _) in KNOBS {
                let value = settings
                    .knob_value(knob)
                    .unwrap_or_else(|| panic!("{} has no value for {knob}", p.name));
                if value == "auto" {
                    continue;
                }
                let mut again = settings.clone();
                again
                    .apply(&format!("{knob}={value}"))
                    .unwrap_or_else(|e| panic!("{} {knob}={value}: {e}", p.name));
                assert_eq!(again, settings, "{} {knob}={value}", p.name);
            }
        }
        assert_eq!(PRESETS[0].settings().knob_value("no_such_knob"), None);
    }

    #[test]
    fn every_major_release_from_81_to_18_is_a_preset_in_order() {
        let releases: Vec<String> = PRESETS
            .iter()
            .filter(|p| !p.unisys)
            .map(|p| p.version.to_string())
            .collect();
        let want = [
            "8.1", "8.2", "8.3", "8.4", "9.0", "9.1", "9.2", "9.3", "9.4", "9.5", "9.6", "10",
            "11", "12", "13", "14", "15", "16", "17", "18",
        ];
        assert_eq!(releases, want);
        for p in PRESETS.iter().filter(|p| !p.unisys) {
            assert_eq!(
                p.name,
                format!("pg{}", p.version.to_string().replace('.', ""))
            );
            assert!(
                p.summary.is_empty() || p.summary.starts_with(&format!("{}:", p.version)),
                "{}: {}",
                p.name,
                p.summary
            );
        }
        assert!(Preset::by_name(DEFAULT_PRESET).is_ok());
    }

    #[test]
    fn a_release_without_a_modelled_change_has_the_rules_of_the_last_one_with_one() {
        let same = |p: &str| Preset::by_name(p).unwrap().same_as().map(|q| q.name);
        for p in PRESETS.iter().filter(|p| p.summary.is_empty()) {
            assert!(
                p.same_as().is_some(),
                "{} has no summary but rules of its own",
                p.name
            );
        }
        assert_eq!(same("pg10"), Some("pg96"));
        assert_eq!(same("pg12"), Some("pg11"));
        assert_eq!(same("pg13"), Some("pg11"));
        assert_eq!(same("pg90"), Some("pg83"));
        // Each release with a change in the models differs from the one before it.
        for name in [
            "pg82", "pg92", "pg93", "pg94", "pg95", "pg96", "pg11", "pg14", "pg15", "pg16", "pg17",
            "pg18",
        ] {
            assert_eq!(same(name), None, "{name}");
        }
        // The unisys variant is never what a release is "the same as".
        assert!(PRESETS
            .iter()
            .filter_map(|p| p.same_as())
            .all(|q| !q.unisys));
    }

    #[test]
    fn executor_work_reads_back_and_turns_into_steps() {
        let mut s = Preset::by_name("pg15").unwrap().settings();
        assert_eq!(s.executor_work, ExecutorWork::Off);
        assert_eq!(
            s.executor_work.steps_per_statement("select-only", 1, false),
            0
        );
        s.apply("executor_work=pg15").unwrap();
        assert_eq!(s.knob_value("executor_work").unwrap(), "pg15");
        // 16 µs for select-only's one statement, nothing at its commit; tpcb-like's 208 µs:
        // 16 % at commit, the rest over its five statements.
        let steps = BUSY_WORK_STEPS_PER_US as u32;
        let w = s.executor_work;
        assert_eq!(w.steps_per_statement("select-only", 1, false), 16 * steps);
        assert_eq!(w.steps_at_commit("select-only", false), 0);
        let per = w.steps_per_statement("tpcb-like", 5, true) as f64 / steps as f64;
        let commit = w.steps_at_commit("tpcb-like", true) as f64 / steps as f64;
        assert!((commit - 33.28).abs() < 0.01, "{commit}");
        assert!((5.0 * per + commit - 208.0).abs() < 0.01, "{per} {commit}");
        s.apply("executor_work=20us").unwrap();
        assert_eq!(s.knob_value("executor_work").unwrap(), "20us");
        let w = s.executor_work;
        assert_eq!(w.steps_per_statement("tpcb-like", 5, true), 20 * steps);
        assert_eq!(w.steps_at_commit("tpcb-like", true), 0);
        let e = s.apply("executor_work=lots").unwrap_err().to_string();
        assert!(e.contains("off, pg15, or a duration"), "{e}");
    }

    #[test]
    fn the_rules_compare_versions() {
        let s = |p: &str| Preset::by_name(p).unwrap().settings();
        let (s14, s15, s16) = (s("pg14"), s("pg15"), s("pg16"));
        assert!(!s14.mq_send_pending && s15.mq_send_pending);
        assert_eq!(
            Settings {
                mq_send_pending: false,
                ..s15.clone()
            },
            s14
        );
        assert_eq!(s15.streaming_supported, Streaming::On);
        assert_eq!(s16.streaming_supported, Streaming::Parallel);
        assert_eq!(s16.streaming, Streaming::On);
        assert!(!s16.repeat_pin_reads_valid && s("pg17").repeat_pin_reads_valid);
        assert_eq!(s("pg82uis").buffer_partitions, 2048);
        assert!(s("pg82uis").tas_spin && !s("pg82").tas_spin);
        assert_eq!(s("pg84").buffer_partitions, 16);
        assert_eq!(s("pg81").lock_partitions, 1);
        assert_eq!(v(9, 6).to_string(), "9.6");
        assert_eq!(v(18, 0).to_string(), "18");
        assert!(v(9, 6) < v(10, 0));
        let e = Preset::by_name("pg19").unwrap_err().to_string();
        assert!(e.contains("pg15") && e.contains("pg83"), "{e}");
    }

    #[test]
    fn the_wait_free_sinval_check_arrives_in_92() {
        let s = |p: &str| Preset::by_name(p).unwrap().settings();
        assert_eq!(s("pg91").sinval_check, SinvalCheck::Locked);
        assert_eq!(s("pg82").sinval_check, SinvalCheck::Locked);
        assert_eq!(s("pg92").sinval_check, SinvalCheck::WaitFree);
        assert_eq!(s("pg18").sinval_check, SinvalCheck::WaitFree);
        let mut x = s("pg92");
        x.apply("sinval_check=locked").unwrap();
        x.apply("inval_rate=0.01").unwrap();
        assert_eq!((x.sinval_check, x.inval_rate), (SinvalCheck::Locked, 0.01));
    }

    #[test]
    fn tas_spin_arrives_in_94() {
        assert!(!Preset::by_name("pg92").unwrap().settings().tas_spin);
        assert!(Preset::by_name("pg94").unwrap().settings().tas_spin);
        assert_eq!(
            Preset::by_name("pg93").unwrap().settings().spin_delay_unit,
            Duration::from_millis(1)
        );
    }

    #[test]
    fn padding_and_partitions_follow_the_release() {
        let s = |p: &str| Preset::by_name(p).unwrap().settings();
        assert_eq!(
            (s("pg94").lwlock_padding, s("pg94").buffer_partitions),
            (32, 16)
        );
        assert_eq!(
            (s("pg95").lwlock_padding, s("pg95").buffer_partitions),
            (32, 128)
        );
        assert_eq!(
            (s("pg96").lwlock_padding, s("pg96").buffer_partitions),
            (128, 128)
        );
        assert_eq!(
            (s("pg82uis").lwlock_padding, s("pg82uis").buffer_partitions),
            (64, 2048)
        );
        assert_eq!(
            (s("pg81").lock_partitions, s("pg82").lock_partitions),
            (1, 16)
        );
        assert_eq!(s("pg91").fast_path, FastPathLayout::None);
        assert_eq!(s("pg92").fast_path, FastPathLayout::Slots16);
        assert_eq!(s("pg18").fast_path, FastPathLayout::Groups(4));
        let mut x = s("pg18");
        x.apply("lwlock_padding=none").unwrap();
        x.apply("lwlock_stats=on").unwrap();
        assert_eq!((x.lwlock_padding, x.lwlock_stats), (0, true));
        assert!(x.apply("lwlock_padding=48").is_err());
    }

    #[test]
    fn several_knobs_in_one_set_and_commas_inside_values() {
        let mut x = Preset::by_name("pg18").unwrap().settings();
        x.apply("mode=on,txn_size=1000,workers=3").unwrap();
        assert_eq!(
            (x.streaming, x.txn_size, x.apply_workers),
            (Streaming::On, 1000, 3)
        );
        x.apply("wal_fault=fsync:every:10:sleep=5ms,write:3:short,txns=4")
            .unwrap();
        assert_eq!(x.wal_fault.rules().len(), 2);
        assert_eq!(x.txns, 4);
        assert_eq!(
            Preset::by_name("pg17").unwrap().settings().streaming,
            Streaming::On
        );
        assert_eq!(
            Preset::by_name("pg96").unwrap().settings().streaming,
            Streaming::Off
        );
    }

    #[test]
    fn buffer_knobs_follow_the_release_and_reject_nonsense() {
        let s = |p: &str| Preset::by_name(p).unwrap().settings();
        assert_eq!(
            (s("pg94").victim_search, s("pg94").buffer_pin),
            (VictimSearch::FreelistLock, PinMethod::HeaderLock)
        );
        assert_eq!(
            (s("pg95").victim_search, s("pg95").buffer_pin),
            (VictimSearch::AtomicClockHand, PinMethod::HeaderLock)
        );
        assert_eq!(
            (s("pg96").victim_search, s("pg96").buffer_pin),
            (VictimSearch::AtomicClockHand, PinMethod::Cas)
        );
        let mut x = s("pg18");
        x.apply("victim_search=lock").unwrap();
        x.apply("buffer_pin=lock").unwrap();
        x.apply("nbuffers=64").unwrap();
        x.apply("hit_ratio=0.25").unwrap();
        x.apply("read_latency=10us").unwrap();
        let cfg = x.bufmgr_config();
        assert_eq!(
            (cfg.nbuffers, cfg.victim_search, cfg.pin),
            (64, VictimSearch::FreelistLock, PinMethod::HeaderLock)
        );
        assert_eq!(
            (x.hit_ratio, cfg.read_latency),
            (0.25, Duration::from_micros(10))
        );
        for (set, expect) in [
            ("victim_search=spin", "lock or atomic"),
            ("buffer_pin=tas", "lock or cas"),
            ("nbuffers=8", "16 to 1048576"),
            ("hit_ratio=1.5", "fraction"),
            ("read_latency=fast", "duration"),
        ] {
            let e = x.apply(set).unwrap_err().to_string();
            assert!(e.contains(expect), "{set}: {e}");
        }
    }

    #[test]
    fn set_overrides_one_knob_and_rejects_nonsense() {
        let mut s = Preset::by_name("pg94").unwrap().settings();
        s.apply("tas_spin=off").unwrap();
        assert!(!s.tas_spin);
        s.apply("cs_work = 40").unwrap();
        assert_eq!(s.cs_work, 40);
        let e = s.apply("group_commit=off").unwrap_err().to_string();
        assert!(
            e.contains("unknown knob 'group_commit'") && e.contains("tas_spin"),
            "{e}"
        );
        let e = s.apply("spins_per_delay=0").unwrap_err().to_string();
        assert!(e.contains("1 to 1000"), "{e}");
        let e = s.apply("tas_spin").unwrap_err().to_string();
        assert!(e.contains("knob=value"), "{e}");
        for (set, expect) in [
            ("sinval_check=lockless", "locked or free"),
            ("inval_rate=1.5", "fraction from 0 to 1"),
            ("inval_batch=0", "1 to 4096"),
            ("idle_backends=-1", "0 to 10000"),
            ("snapshot_layout=pgproc", "proc, pgxact or dense"),
            ("commit_ratio=1.5", "fraction from 0 to 1"),
            ("backends=0", "1 to 100000"),
            ("subxacts=-1", "0 to 1000"),
            ("scale=0", "1 to 100000"),
            ("group_clear=maybe", "on or off"),
            ("pgxact_padding=32", "none, 64 or 128"),
            ("wal_fault=fsync:0", "counted from 1"),
            ("slru_fault=fsync:2:short", "cannot be short"),
            ("msg_size=-1", "0 to 67108864"),
            ("queue_size=63", "64 to 1073741824"),
            ("mq_send_pending=sometimes", "on or off"),
            ("mode=sometimes", "off, on or parallel"),
            ("txn_size=0", "1 to 100000000"),
            ("workers=2000", "0 to 1024"),
            ("mode=off,txn_size=0", "1 to 100000000"),
        ] {
            let e = s.apply(set).unwrap_err().to_string();
            assert!(e.contains(expect), "{set}: {e}");
        }
        let e = Preset::by_name("pg99").unwrap_err().to_string();
        assert!(e.contains("pg94"), "{e}");
    }
}
