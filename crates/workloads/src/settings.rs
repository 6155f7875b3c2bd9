//! Every setting of the models, declared once: its field, the rule that gives its value in each
//! release (as PostgreSQL's own comments date a change: `v >= v(9, 2)`), and the knob that lets
//! `--set` change it, with the syntax of its values and its help line.
//!
//! A new knob is one entry here; a new release is one line of `PRESETS` (and whichever rules
//! here it changes). Each rule cites the PostgreSQL file whose behaviour it selects.

use crate::knob::{
    on_off, on_off_name, read_duration, settings, write_duration, Auto, Codec, Custom, Dur,
    Fraction, Knob, Names, OnOff, Whole,
};
use crate::preset::{v, ClogSizing, ExecutorWork, FlushDeviceKind, LwLockVariant, Preset};
use crate::WorkloadError;
use pglocks_apply::publisher::DEFAULT_WORK_MEM_CHANGES;
use pglocks_apply::Streaming;
use pglocks_bufmgr::{BufMgrConfig, IoWait, PinMethod, SweepPartitions, VictimSearch};
use pglocks_lmgr::FastPathLayout;
use pglocks_procarray::{ProcArrayConfig, SnapshotLayout};
use pglocks_sinval::SinvalCheck;
use pglocks_slru::clog::ClogConfig;
use pglocks_slru::Victim;
use pglocks_sync::fault::FaultPlan;
use pglocks_sync::time::Duration;
use pglocks_wal::{FlushLatency, FlushWait, Insertion, WalConfig, WalWriter};

use LwLockVariant::{Atomic, Atomic18, AtomicWithMutex, SpinlockProtected};

const LWLOCK: Names<LwLockVariant> = Names(&[
    ("spin", SpinlockProtected),
    ("atomic-mutex", AtomicWithMutex),
    ("atomic", Atomic),
    ("atomic18", Atomic18),
]);
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
const BUFFER_IO_WAIT: Names<IoWait> = Names(&[
    ("lwlock", IoWait::Lwlock),
    ("condvar", IoWait::ConditionVariable),
]);
const FLUSH_WAIT: Names<FlushWait> = Names(&[
    ("acquire", FlushWait::Acquire),
    ("acquire_or_wait", FlushWait::AcquireOrWait),
]);
const WAL_VAR: Names<bool> = Names(&[("locked", false), ("atomic", true)]);
const FLUSH_DEVICE: Names<FlushDeviceKind> = Names(&[
    ("simulated", FlushDeviceKind::Simulated),
    ("file", FlushDeviceKind::File),
    ("null", FlushDeviceKind::Null),
]);
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
const VXID_LOCK: Names<bool> = Names(&[("lazy", true), ("eager", false)]);
/// `--set clock_sweep=`: PostgreSQL's one victim search, or one per NUMA node's buffers (with
/// each range's control padded or not).
const CLOCK_SWEEP: Names<Option<bool>> = Names(&[
    ("shared", None),
    ("node", Some(false)),
    ("node-padded", Some(true)),
]);
/// Bytes between backends' entries of the arrays a snapshot scans (`pgxact_padding`,
/// `dense_padding`).
const ENTRY_PADDING: Names<usize> = Names(&[("none", 0), ("0", 0), ("64", 64), ("128", 128)]);
const LWLOCK_PADDING: Names<usize> =
    Names(&[("none", 0), ("0", 0), ("32", 32), ("64", 64), ("128", 128)]);

/// `--set fast_path=on|off`: off removes it; on keeps the release's layout, or gives a release
/// without one 9.2's 16 slots.
const FAST_PATH: Custom<FastPathLayout> = Custom {
    read: |text, s| {
        Ok(match (on_off(text)?, s.fast_path) {
            (false, _) => FastPathLayout::None,
            (true, FastPathLayout::None) => FastPathLayout::Slots16,
            (true, layout) => layout,
        })
    },
    write: |layout| on_off_name(*layout != FastPathLayout::None),
};

/// `--set fsync=on|off`: off is the null device; on turns the null device back into the
/// simulated one and leaves another alone.
const FSYNC: Custom<FlushDeviceKind> = Custom {
    read: |text, s| {
        Ok(match (on_off(text)?, s.flush_device) {
            (false, _) => FlushDeviceKind::Null,
            (true, FlushDeviceKind::Null) => FlushDeviceKind::Simulated,
            (true, device) => device,
        })
    },
    write: |device| on_off_name(*device != FlushDeviceKind::Null),
};

/// `--set wal_insert_locks=one|N`.
const WAL_INSERT_LOCKS: Custom<Insertion> = Custom {
    read: |text, s| {
        let most = pglocks_wal::MAX_XLOGINSERT_LOCKS as u64;
        match text {
            "one" => Ok(Insertion::OneLock),
            _ => Codec::<usize>::read(&Whole(1, most), text, s)
                .map(Insertion::Locks)
                .map_err(|_| format!("one or a whole number from 1 to {most}")),
        }
    },
    write: |insertion| match insertion {
        Insertion::OneLock => "one".to_string(),
        Insertion::Locks(n) => n.to_string(),
    },
};

/// `--set commit_delay=`: microseconds, as PostgreSQL's GUC takes it, or a duration; at most
/// 100 ms.
const COMMIT_DELAY: Custom<Duration> = Custom {
    read: |text, _| match text.parse::<u64>() {
        Ok(us) if us <= 100_000 => Ok(Duration::from_micros(us)),
        _ => read_duration(text)
            .filter(|d| *d <= Duration::from_millis(100))
            .ok_or_else(|| {
                "microseconds up to 100000, or a duration such as 10us or 1ms".to_string()
            }),
    },
    write: |d| match d.subsec_nanos() % 1000 {
        0 => d.as_micros().to_string(),
        _ => write_duration(*d),
    },
};

/// `--set flush_latency=`: a duration or a uniform range, at most 10 s (a flush slower than that
/// is a broken disk, not a latency).
const FLUSH_LATENCY: Custom<FlushLatency> = Custom {
    read: |text, _| {
        let most = Duration::from_secs(10);
        text.parse()
            .ok()
            .filter(|l| match *l {
                FlushLatency::Fixed(d) => d <= most,
                FlushLatency::Uniform { hi, .. } => hi <= most,
            })
            .ok_or_else(|| {
                "a duration such as 2ms or 500us, a range 1ms..3ms, or 0 (at most 10s)".to_string()
            })
    },
    write: |latency| latency.to_string(),
};

/// `--set synchronous_commit=`: off only where the release has a WAL writer (8.3+).
const SYNCHRONOUS_COMMIT: Custom<bool> = Custom {
    read: |text, s| match on_off(text)? {
        false if s.wal_writer == WalWriter::Absent => {
            Err("on (asynchronous commit and the WAL writer arrived in 8.3)".to_string())
        }
        on => Ok(on),
    },
    write: |on| on_off_name(*on),
};

/// `--set wal_fault=` and `slru_fault=`: fault rules.
const FAULTS: Custom<FaultPlan> = Custom {
    read: |text, _| {
        text.parse::<FaultPlan>()
            .map_err(|e| format!("fault rules ({})", e.reason))
    },
    write: |plan| plan.to_string(),
};

/// `--set mode=`: the subscription's `streaming`, up to what the release supports.
const MODE: Custom<Streaming> = Custom {
    read: |text, s| {
        let mode = STREAMING.read(text, s)?;
        if mode > s.streaming_supported {
            return Err(match s.streaming_supported {
                Streaming::Off => "off (streaming of large transactions is 14+)",
                _ => "off or on (streaming = parallel is 16+)",
            }
            .to_string());
        }
        Ok(mode)
    },
    write: |mode| STREAMING.write(mode),
};

/// `--set executor_work=off|pg15|DURATION`.
const EXECUTOR_WORK: Custom<ExecutorWork> = Custom {
    read: |text, _| match text {
        "off" => Ok(ExecutorWork::Off),
        "pg15" => Ok(ExecutorWork::Pg15),
        _ => read_duration(text)
            .filter(|d| *d <= Duration::from_millis(100))
            .map(ExecutorWork::PerStatement)
            .ok_or_else(|| {
                "off, pg15, or a duration per statement such as 20us (at most 100ms)".to_string()
            }),
    },
    write: |work| match work {
        ExecutorWork::Off => "off".to_string(),
        ExecutorWork::Pg15 => "pg15".to_string(),
        ExecutorWork::PerStatement(d) => write_duration(*d),
    },
};

/// A duration from zero to one second, as the simulated latencies take it.
const fn up_to_1s(expected: &'static str) -> Dur {
    Dur {
        least: Duration::ZERO,
        most: Duration::from_secs(1),
        expected,
    }
}

settings! {
    /// s_lock.h: `TAS_SPIN` reads the lock byte before the exchange (x86_64 from 9.4; the
    /// Unisys patches had it on 8.2).
    tas_spin: bool = |p| p.version >= v(9, 4) || p.unisys,
        knob "tas_spin": OnOff => "on|off: s_lock retries read the byte before the exchange";
    /// s_lock.c: the unit of `cur_delay`, 1 ms before 9.4 and 1 µs from 9.4.
    spin_delay_unit: Duration = |p| if p.version >= v(9, 4) {
            Duration::from_micros(1)
        } else {
            Duration::from_millis(1)
        },
        knob "spin_delay_unit": SPIN_DELAY_UNIT => "us|ms: unit of s_lock's growing sleep";
    /// s_lock.c: `NUM_DELAYS`, sleeps before "stuck spinlock".
    num_delays: u32 = |_| pglocks_proc::spin_delay::NUM_DELAYS,
        knob "num_delays": Whole(1, u32::MAX as u64) => "N >= 1: sleeps before \"stuck spinlock\"";
    /// The `spins_per_delay` every backend starts with (`DEFAULT_SPINS_PER_DELAY`).
    spins_per_delay: u32 = |_| pglocks_proc::spin_delay::DEFAULT_SPINS_PER_DELAY,
        knob "spins_per_delay": Whole(1, 1000) => "N in 1..=1000: starting spins_per_delay";
    /// lwlock.c: which LWLock implementation the release has.
    lwlock: LwLockVariant = |p| p.lwlock(),
        knob "lwlock": LWLOCK => "spin|atomic-mutex|atomic|atomic18: the LWLock implementation";
    /// bufmgr: `NUM_BUFFER_PARTITIONS` (16 in 8.2–9.4, 128 from 9.5; 1 in 8.1; 2048 with the
    /// Unisys patches).
    buffer_partitions: usize = |p| match p.version {
            _ if p.unisys => 2048,
            r if r >= v(9, 5) => 128,
            r if r >= v(8, 2) => 16,
            _ => 1,
        },
        knob "partitions": Whole(1, 65_536) => "N in 1..=65536: BufferMapping partitions (buffer-lookup)";
    /// bufmgr: `NBuffers`, shared buffers of 8 KB (buffer-lookup; 16384 = 128 MB, the default
    /// `shared_buffers`).
    nbuffers: usize = |_| 16_384,
        knob "nbuffers": Whole(16, 1_048_576) => "N in 16..=1048576: shared buffers of 8 KB (buffer-lookup; default 16384 = 128 MB; 16 is PostgreSQL's minimum)";
    /// freelist.c: the victim search under `BufFreelistLock` (≤ 9.4) or with the atomic clock
    /// hand (9.5+).
    victim_search: VictimSearch = |p| if p.version >= v(9, 5) {
            VictimSearch::AtomicClockHand
        } else {
            VictimSearch::FreelistLock
        },
        knob "victim_search": VICTIM_SEARCH => "lock|atomic: clock sweep under BufFreelistLock (<= 9.4) or with the atomic clock hand (9.5+)";
    /// bufmgr.c: a pin under the buffer header lock (≤ 9.5) or by compare-exchange (9.6+).
    buffer_pin: PinMethod = |p| match p.lwlock() {
            SpinlockProtected | AtomicWithMutex => PinMethod::HeaderLock,
            Atomic | Atomic18 => PinMethod::Cas,
        },
        knob "buffer_pin": BUFFER_PIN => "lock|cas: a buffer pin under the header lock (<= 9.5) or by compare-exchange of the state word (9.6+)";
    /// bufmgr.c (17+): a backend's repeat pin of a buffer reads `BM_VALID` (a read it started
    /// may not have finished); before, an earlier pin meant a valid page.
    repeat_pin_reads_valid: bool = |p| p.version >= v(17, 0);
    /// bufmgr.c: `WaitIO` sleeps on the buffer's I/O LWLock (≤ 13) or on its condition
    /// variable (14+).
    buffer_io_wait: IoWait = |p| if p.version >= v(14, 0) {
            IoWait::ConditionVariable
        } else {
            IoWait::Lwlock
        },
        knob "buffer_io_wait": BUFFER_IO_WAIT => "lwlock|condvar: a wait for another backend's read of a buffer on its I/O LWLock (<= 13) or condition variable (14+)";
    /// A prototype for 9.5+ (freelist.c): the freelist and clock hand split into ranges of
    /// buffers, each NUMA node's backends sweeping their own (the 2025 NUMA patch series).
    /// `Some(padded)`: split, each range's control on a line of its own or not.
    sweep_per_node: Option<bool> = |_| None,
        knob "clock_sweep": CLOCK_SWEEP => "shared|node|node-padded: a prototype: one clock hand and freelist for the pool (shared = PostgreSQL), or one per range of buffers, the ranges split among the NUMA nodes, each node's backends sweeping their own, the ranges' controls back to back (node, as the patch series has them) or 128 bytes apart (node-padded) (9.5+)";
    /// Workload `buffer-lookup`: the share of reads that go to the hot pages (which stay in
    /// the buffers); the rest miss.
    hit_ratio: f64 = |_| 1.0,
        knob "hit_ratio": Fraction => "0..1: share of buffer-lookup reads that hit (default 1); the rest miss and run the clock sweep";
    /// Workload `buffer-lookup`: the simulated time of one page read on a miss.
    read_latency: Duration = |_| Duration::ZERO,
        knob "read_latency": up_to_1s("a duration such as 10us or 1ms, or 0") => "a duration (0, 10us): the simulated read of a page on a buffer-lookup miss (default 0)";
    /// lock.c: `NUM_LOCK_PARTITIONS`, the LockManager tranche (16 from 8.2; 8.1 had one
    /// LockMgrLock).
    lock_partitions: usize = |p| if p.version >= v(8, 2) { 16 } else { 1 };
    /// dynahash.c: the free lists of the lock table's shared hash tables (one, behind one
    /// spinlock, up to 9.5; `NUM_FREELISTS` = 32 from 9.6).
    lock_hash_freelists: usize = |p| if p.version >= v(9, 6) { 32 } else { 1 };
    /// lock.c: the fast path for weak relation locks (none before 9.2; 16 slots in 9.2–17;
    /// groups of 16 in 18).
    fast_path: FastPathLayout = |p| p.fast_path(),
        knob "fast_path": FAST_PATH => "on|off: the fast path for weak relation locks (on = the release's layout; 16 slots before it had one)";
    /// lock.c (9.2+): a transaction's virtual-xid lock is a fast-path note until someone waits
    /// for it (lazy), or taken in the shared lock table at every start (eager, up to 9.1).
    lazy_vxid: bool = |p| p.version >= v(9, 2),
        knob "vxid_lock": VXID_LOCK => "lazy|eager: a transaction's virtual-xid lock as a fast-path note until someone waits (9.2+), or in the shared lock table at every start (<= 9.1); lazy needs the fast path";
    /// lock.c (17+): a `NOWAIT` request goes through the wait-queue rule and may be granted
    /// ahead of waiters; before 17 it fails on any conflict.
    nowait_checks_queue: bool = |p| p.version >= v(17, 0);
    /// proc.c (≤ 17): `ProcSleep` re-takes the partition lock after its wait; 18 does not.
    relock_after_sleep: bool = |p| p.version < v(18, 0);
    /// nodeModifyTable.c (14+): an `UPDATE` reads the old row again to build the new one
    /// (`table_tuple_fetch_row_version`).
    refetch_updated_row: bool = |p| p.version >= v(14, 0);
    /// nbtinsert.c (11+): an insertion at the rightmost leaf of a tree of three levels or more
    /// goes straight to it (`_bt_search_insert`'s cached target block).
    btree_rightmost_fastpath: bool = |p| p.version >= v(11, 0);
    /// xlog.c: one `WALInsertLock` (≤ 9.3) or `NUM_XLOGINSERT_LOCKS` insertion locks (9.4+).
    wal_insertion: Insertion = |p| if p.version >= v(9, 4) {
            Insertion::Locks(pglocks_wal::NUM_XLOGINSERT_LOCKS)
        } else {
            Insertion::OneLock
        },
        knob "wal_insert_locks": WAL_INSERT_LOCKS => "one|N in 1..=64: one WALInsertLock (<= 9.3) or N insertion locks (8 from 9.4)";
    /// xlog.c: `XLogFlush` waits for `WALWriteLock` with a plain acquire (≤ 9.1) or
    /// `LWLockAcquireOrWait` (9.2+).
    flush_wait: FlushWait = |p| if p.version >= v(9, 2) {
            FlushWait::AcquireOrWait
        } else {
            FlushWait::Acquire
        },
        knob "flush_wait": FLUSH_WAIT => "acquire|acquire_or_wait: how XLogFlush waits for WALWriteLock (acquire_or_wait from 9.2)";
    /// `commit_delay` (0, PostgreSQL's default, is off).
    commit_delay: Duration = |_| Duration::ZERO,
        knob "commit_delay": COMMIT_DELAY => "microseconds or a duration (10us, 1ms): sleep before a flush, by the leader from 9.3, by every committer before (0 = off; never with fsync = off)";
    /// `commit_siblings`.
    commit_siblings: u32 = |_| pglocks_wal::DEFAULT_COMMIT_SIBLINGS,
        knob "commit_siblings": Whole(0, 1000) => "N in 0..=1000: other backends in a transaction needed to sleep commit_delay (5)";
    /// 9.3+: `commit_delay` is slept by the flush leader inside `XLogFlush`.
    commit_delay_in_flush: bool = |p| p.version >= v(9, 3),
        knob "commit_delay_in_flush": OnOff => "on|off: commit_delay slept by the flush leader only (9.3+), or by every committer";
    /// 17+: `insertingAt` is read lock-free (`AtomicVar`), and `logInsertResult` short-cuts
    /// `WaitXLogInsertionsToFinish`.
    wal_var_atomic: bool = |p| p.version >= v(17, 0),
        knob "wal_var": WAL_VAR => "locked|atomic: insertingAt under the wait-list lock (<= 16), or lock-free with the logInsertResult shortcut (17+)";
    /// `wal_buffers` in 8 KB pages.
    wal_buffers: usize = |_| pglocks_wal::DEFAULT_WAL_BUFFERS,
        knob "wal_buffers": Whole(4, 262_144) => "N in 4..=262144: WAL buffer pages of 8 KB";
    /// Where WAL goes: a simulated device, a real segment directory with fdatasync, or nowhere.
    flush_device: FlushDeviceKind = |_| FlushDeviceKind::Simulated,
        knob "flush_device": FLUSH_DEVICE => "simulated|file|null: WAL flushes sleep flush_latency, fdatasync real segment files, or do nothing (null is fsync = off)",
        knob "fsync": FSYNC => "on|off: off = flush_device=null (issue_xlog_fsync returns at once, commit_delay is not slept); on turns null back into the simulated device";
    /// The simulated device's flush latency.
    flush_latency: FlushLatency = |_| FlushLatency::Fixed(Duration::from_millis(1)),
        knob "flush_latency": FLUSH_LATENCY => "the simulated device's flush time (default 1ms): 2ms, 500us, 1ms..3ms (uniform) or 0 (also --flush-latency)";
    /// walwriter.c: the release's WAL writer (none before 8.3; a timed sleep 8.3–9.1; a latch
    /// 9.2–16; from 17 woken only once `wal_writer_flush_after` of WAL is waiting).
    wal_writer: WalWriter = |p| match p.version {
            r if r >= v(17, 0) => WalWriter::LatchFlushAfter,
            r if r >= v(9, 2) => WalWriter::Latch,
            r if r >= v(8, 3) => WalWriter::Timed,
            _ => WalWriter::Absent,
        };
    /// xact.c: `synchronous_commit`: on, a commit flushes its record (`XLogFlush`); off
    /// (8.3+), it leaves that to the WAL writer (workloads `wal-commit`, `tpcb-like`,
    /// `insert-commit`).
    synchronous_commit: bool = |_| true,
        knob "synchronous_commit": SYNCHRONOUS_COMMIT => "on|off: off (8.3+) = a commit hands its record to the WAL writer (XLogSetAsyncXactLSN) instead of flushing it (wal-commit, tpcb-like, insert-commit)";
    /// walwriter.c: `wal_writer_delay`, the WAL writer's sleep between rounds.
    wal_writer_delay: Duration = |_| pglocks_wal::DEFAULT_WAL_WRITER_DELAY,
        knob "wal_writer_delay": Dur {
            least: pglocks_wal::WAL_WRITER_DELAY_RANGE.0,
            most: pglocks_wal::WAL_WRITER_DELAY_RANGE.1,
            expected: "a duration from 1ms to 10s, such as 200ms",
        } => "a duration from 1ms to 10s (default 200ms): the WAL writer's sleep between rounds, with synchronous_commit = off";
    /// xlog.c (9.6+): `wal_writer_flush_after`, in pages (0, before 9.6: fsync every round).
    wal_writer_flush_after: u64 = |p| if p.version >= v(9, 6) {
            pglocks_wal::DEFAULT_WAL_WRITER_FLUSH_AFTER
        } else {
            0
        };
    /// Workload `wal-insert`: payload bytes per record.
    record_size: u32 = |_| 100,
        knob "record_size": Whole(1, 1_000_000) => "N in 1..=1000000: payload bytes per record (wal-insert)";
    /// clog.c: `CLOGShmemBuffers` of the release, from `shared_buffers` (see [`ClogSizing`]).
    clog_sizing: ClogSizing = |p| match p.version {
            r if r >= v(17, 0) => ClogSizing::Autotune,
            r if r >= v(9, 6) => ClogSizing::UpTo128,
            r if r >= v(9, 2) => ClogSizing::UpTo32,
            _ => ClogSizing::Fixed8,
        };
    /// An explicit `--set clog_buffers=N`, which wins over the release's sizing (`auto`).
    clog_buffers: Option<usize> = |_| None,
        knob "clog_buffers": Auto(Whole(2, 131_072)) => "auto or N in 2..=131072: CLOG buffer slots, overriding the release's sizing from shared_buffers (with banks a multiple of 16)";
    /// slru.c (17+): banks of 16 buffers with their own locks.
    slru_banks: bool = |p| p.version >= v(17, 0),
        knob "slru_banks": OnOff => "on|off: SLRU banks of 16 slots with their own locks (17+)";
    /// slru.c: plain LRU victims (≤ 9.1) or avoiding I/O-busy slots (9.2+).
    slru_victim: Victim = |p| if p.version >= v(9, 2) {
            Victim::AvoidIoBusy
        } else {
            Victim::PlainLru
        },
        knob "slru_victim": SLRU_VICTIM => "plain|avoid-busy: plain LRU victims (<= 9.1) or avoiding I/O-busy slots (9.2+)";
    /// clog.c (11+): group update of transaction status.
    clog_group_update: bool = |p| p.version >= v(11, 0),
        knob "clog_group_update": OnOff => "on|off: CLOG group update (11+)";
    /// `shared_buffers` in MB (sizes the CLOG buffers).
    shared_buffers_mb: u32 = |_| 8192,
        knob "shared_buffers": Whole(16, 1_048_576) => "MB in 16..=1048576: shared_buffers, which sizes the CLOG buffers as the release did (default 8192)";
    /// The simulated time of one SLRU page read or write.
    slru_latency: Duration = |_| Duration::from_micros(50),
        knob "slru_latency": up_to_1s("a duration such as 50us or 1ms, or 0") => "a duration (50us, 1ms, 0): the simulated time of one SLRU page read or write";
    /// Faults injected into the WAL flush device (write and fsync rules; none by default).
    wal_fault: FaultPlan = |_| FaultPlan::new(),
        knob "wal_fault": FAULTS => "none or fault rules for the WAL device: fsync:5 (fail the 5th fsync: PANIC), write:3:short, fsync:every:10:sleep=5ms (see README, Fault injection)";
    /// Faults injected into the SLRU page store (read and write rules; none by default).
    slru_fault: FaultPlan = |_| FaultPlan::new(),
        knob "slru_fault": FAULTS => "none or fault rules for the SLRU page store: read:5 (fail the 5th read: ERROR), write:every:3:short, read:every:4:sleep=1ms";
    /// Workload `clog-get`: lookups fall among the newest this many xids.
    xid_window: u32 = |_| 100_000,
        knob "xid_window": Whole(1, 2_000_000) => "N in 1..=2000000: clog-get looks up among the newest N xids (default 100000)";
    /// shm_mq.c (15+): the sender publishes `mq_bytes_written` only once more than a quarter of
    /// the ring is pending (`mqh_send_pending`); before, after every chunk.
    mq_send_pending: bool = |p| p.version >= v(15, 0),
        knob "mq_send_pending": OnOff => "on|off: shm_mq senders publish bytes_written only past a quarter of the ring (15+), or after every chunk";
    /// Workload `shm-mq`: payload bytes per message.
    msg_size: usize = |_| 64,
        knob "msg_size": Whole(0, 64 << 20) => "bytes in 0..=67108864: payload per message (shm-mq, default 64)";
    /// Workloads `shm-mq`, `apply`: bytes of shared memory per queue (header and ring), as
    /// given to `shm_mq_create`; `None`: the workload's own (64 KB for `shm-mq`, parallel
    /// query's per worker; `DSM_QUEUE_SIZE`, 16 MB, for `apply`).
    queue_size: Option<usize> = |_| None,
        knob "queue_size": Auto(Whole(pglocks_shmmq::SHM_MQ_MINIMUM_SIZE as u64, 1 << 30)) => "auto or bytes in 64..=1073741824: shared memory per queue, header included (shm-mq: auto = 65536, parallel query's per worker; apply: auto = 16777216, DSM_QUEUE_SIZE)";
    /// The most the release's subscriptions can stream (off, on from 14, parallel from 16).
    streaming_supported: Streaming = |p| match p.version {
            r if r >= v(16, 0) => Streaming::Parallel,
            r if r >= v(14, 0) => Streaming::On,
            _ => Streaming::Off,
        };
    /// Workload `apply`: the subscription's `streaming` option (off before 14; `on` the
    /// default 14–17; `parallel` 16+, the default from 18).
    streaming: Streaming = |p| match p.version {
            r if r >= v(18, 0) => Streaming::Parallel,
            r if r >= v(14, 0) => Streaming::On,
            _ => Streaming::Off,
        },
        knob "mode": MODE => "off|on|parallel: apply's subscription option streaming (on 14+, parallel 16+; default off before 14, on 14-17, parallel 18)";
    /// Workload `apply`: inserts per transaction.
    txn_size: usize = |_| 1_000_000,
        knob "txn_size": Whole(1, 100_000_000) => "N in 1..=100000000: inserts per transaction (apply, default 1000000)";
    /// Workload `apply`: transactions per publisher backend (thread).
    txns: usize = |_| 1,
        knob "txns": Whole(1, 1_000_000) => "N in 1..=1000000: transactions per publisher backend (apply, default 1)";
    /// Workload `apply`: `max_parallel_apply_workers_per_subscription`.
    apply_workers: usize = |_| pglocks_apply::leader::DEFAULT_MAX_PARALLEL_APPLY_WORKERS,
        knob "workers": Whole(0, pglocks_apply::leader::MAX_PARALLEL_WORKER_LIMIT as u64) => "N in 0..=1024: max_parallel_apply_workers_per_subscription (apply, default 2)";
    /// Workload `apply`: `logical_decoding_work_mem` in decoded changes.
    work_mem_changes: usize = |_| DEFAULT_WORK_MEM_CHANGES,
        knob "work_mem_changes": Whole(1, 100_000_000) => "N in 1..=100000000: logical_decoding_work_mem in decoded changes (apply, default 440000: 64 MB of ~150-byte inserts)";
    /// Workloads `select-only`, `tpcb-like`, `insert-commit`: the backend's private work
    /// between its shared-memory calls (see [`ExecutorWork`]).
    executor_work: ExecutorWork = |_| ExecutorWork::Off,
        knob "executor_work": EXECUTOR_WORK => "off|pg15|DURATION: the backend's private CPU work between its locks in select-only, tpcb-like and insert-commit, spread over the transaction's statements: off (the locking ceiling, default), pg15 (PostgreSQL 15's measured CPU per transaction) or a duration per statement (20us); busy_work steps, calibrated on the project's 2-core development machine";
    /// Workloads `select-only`, `tpcb-like`, `insert-commit`: the time a backend waits for its
    /// client at each message of the transaction (postgres.c's `ReadCommand`, wait event
    /// `ClientRead`): pgbench's turn and the two wake-ups of a round trip, during which the
    /// backend keeps whatever locks and rows its transaction has taken so far.
    client_round_trip: Duration = |_| Duration::ZERO,
        knob "client_round_trip": up_to_1s("a duration such as 30us, or 0") => "a duration (0, 30us): the backend's idle wait for its client at each message (BEGIN, each statement, END) in select-only, tpcb-like and insert-commit (default 0: a client that answers at once)";
    /// Workload `apply`: CPU work per row on each side (executor, heap, index, WAL), in
    /// arithmetic steps.
    row_work: u32 = |_| 13_000,
        knob "row_work": Whole(0, 10_000_000) => "N in 0..=10000000: arithmetic steps per row on publisher and subscriber alike, for the executor, heap, index and WAL work no model does (apply, default 13000, about 1 us on a 3 GHz x86_64)";
    /// sinvaladt.c: the "any new messages?" check takes `SInvalReadLock` and `msgnumLock`
    /// (≤ 9.1) or first reads the backend's own `hasMessages` flag without a lock (9.2+).
    sinval_check: SinvalCheck = |p| if p.version >= v(9, 2) {
            SinvalCheck::WaitFree
        } else {
            SinvalCheck::Locked
        },
        knob "sinval_check": SINVAL_CHECK => "locked|free: the sinval check under SInvalReadLock and msgnumLock (<= 9.1), or wait-free on the backend's own flag (9.2+)";
    /// Workload `sinval-check`: the fraction of operations that first send invalidations.
    inval_rate: f64 = |_| 0.0,
        knob "inval_rate": Fraction => "0..1: share of sinval-check operations that first send invalidation messages (default 0, as pgbench -S)";
    /// Workload `sinval-check`: messages per send.
    inval_batch: u32 = |_| 1,
        knob "inval_batch": Whole(1, 4096) => "N in 1..=4096: invalidation messages per send (sinval-check, default 1)";
    /// Workload `sinval-check`: registered backends that never read the queue.
    idle_backends: u32 = |_| 0,
        knob "idle_backends": Whole(0, 10_000) => "N in 0..=10000: registered backends that never read the sinval queue (signalled, then reset; default 0)";
    /// procarray.c: where a snapshot's fields live (`PGPROC` scan ≤ 9.1, `PGXACT` 9.2–13,
    /// dense arrays with snapshot reuse 14+).
    snapshot_layout: SnapshotLayout = |p| match p.version {
            r if r >= v(14, 0) => SnapshotLayout::Dense,
            r if r >= v(9, 2) => SnapshotLayout::Pgxact,
            _ => SnapshotLayout::ProcScan,
        },
        knob "snapshot_layout": SNAPSHOT_LAYOUT => "proc|pgxact|dense: GetSnapshotData scans PGPROCs (<= 9.1), the PGXACT array (9.2-13), or dense arrays with snapshot reuse (14+)";
    /// procarray.c (9.6+): conditional ProcArrayLock at commit, else group XID clear.
    group_clear: bool = |p| p.version >= v(9, 6),
        knob "group_clear": OnOff => "on|off: ProcArrayLock conditional acquire at commit, else group XID clear (9.6+)";
    /// A prototype for 9.2–13: bytes between backends' `PGXACT`s (0 = PostgreSQL's dense array).
    pgxact_padding: usize = |_| 0,
        knob "pgxact_padding": ENTRY_PADDING => "none|64|128: a prototype: space the PGXACT entries of pgxact layouts by a cache line, so backends stop sharing lines (none = PostgreSQL)";
    /// A prototype for 14+: bytes between backends' entries of the dense arrays (0 =
    /// PostgreSQL's).
    dense_padding: usize = |_| 0,
        knob "dense_padding": ENTRY_PADDING => "none|64|128: a prototype: space the entries of the dense layout's xids, subxidStates and statusFlags by a cache line, a line per backend (none = PostgreSQL)";
    /// Workloads `snapshot`, `end-xact`: registered backends (the running threads and idle
    /// connections); at least the threads.
    backends: usize = |_| 100,
        knob "backends": Whole(1, 100_000) => "N in 1..=100000: registered backends, running threads plus idle connections (snapshot, end-xact, select-only; default 100)";
    /// Workload `snapshot`: the share of operations that are a write transaction instead.
    commit_ratio: f64 = |_| 0.0,
        knob "commit_ratio": Fraction => "0..1: share of snapshot operations that are a write transaction instead (default 0)";
    /// Workloads `snapshot`, `end-xact`: subtransaction xids per write transaction.
    subxacts: u32 = |_| 0,
        knob "subxacts": Whole(0, 1000) => "N in 0..=1000: subtransaction xids per write transaction (snapshot, end-xact; 64 fit the cache)";
    /// Macro workloads: pgbench's scale factor (100 000 accounts each).
    scale: u32 = |_| 1,
        knob "scale": Whole(1, 100_000) => "N in 1..=100000: pgbench's scale factor: 100000 accounts, 10 tellers and 1 branch each (select-only, tpcb-like; default 1)";
    /// Workload `lmgr-relation`: relations locked per transaction.
    relations: u32 = |_| 2,
        knob "relations": Whole(1, 1000) => "N in 1..=1000: relations locked per transaction (lmgr-relation)";
    /// Workload `lmgr-strong-mix`: every this many transactions of a backend is a strong one.
    strong_every: u32 = |_| 1000,
        knob "strong_every": Whole(1, 1_000_000) => "N in 1..=1000000: every N-th transaction takes AccessExclusiveLock (lmgr-strong-mix)";
    /// lwlock.c: `LWLOCK_PADDED_SIZE`, bytes per lock in an array (32 up to 9.5, 128 from 9.6;
    /// 0 = packed at the lock's own size; 64 with the Unisys patches).
    lwlock_padding: usize = |p| match p.lwlock() {
            _ if p.unisys => 64,
            SpinlockProtected | AtomicWithMutex => 32,
            Atomic | Atomic18 => 128,
        },
        knob "lwlock_padding": LWLOCK_PADDING => "none|32|64|128: bytes per LWLock in a partitioned array";
    /// lwlock.c built with `LWLOCK_STATS`: count acquisitions per tranche (off, as in a default
    /// build; blocks and waits are always reported as wait events).
    lwlock_stats: bool = |_| false,
        knob "lwlock_stats": OnOff => "on|off: count LWLOCK_STATS acquisitions per tranche (shown with the waits)";
    /// Workload `lwlock-mixed`: the fraction of acquisitions that are shared.
    read_ratio: f64 = |_| 0.9,
        knob "read_ratio": Fraction => "0..1: share of shared acquisitions in lwlock-mixed (default 0.9)";
    /// Workload `spin`: lines of shared data each critical section reads and writes.
    cs_lines: u32 = |_| 0,
        knob "cs_lines": Whole(0, 64) => "N in 0..=64: lines of shared data the critical section reads and writes, each on a line of its own after the lock's (spin; the SOSP'13 study's lock benchmark: 1)";
    /// Workload: dependent arithmetic steps done while holding the lock.
    cs_work: u32 = |_| 0,
        knob "cs_work": Whole(0, 1_000_000) => "N in 0..=1000000: arithmetic steps inside the critical section";
    /// Workload: dependent arithmetic steps done between acquisitions.
    think: u32 = |_| 0,
        knob "think": Whole(0, 1_000_000) => "N in 0..=1000000: arithmetic steps between acquisitions";
}

impl Preset {
    /// The release's knob values.
    pub fn settings(&self) -> Settings {
        settings_of(self)
    }
}

/// Looks a knob up by name.
pub fn knob(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

impl Settings {
    /// The value of `knob` in these settings, written as `--set` takes it (so that
    /// `apply("knob=<value>")` changes nothing); `None` for a knob that does not exist.
    pub fn knob_value(&self, knob_name: &str) -> Option<String> {
        knob(knob_name).map(|k| (k.get)(self))
    }

    /// Applies `knob=value` overrides: one, or several joined by commas
    /// (`mode=on,txn_size=1000`). A comma starts a new override only where a knob's name and
    /// `=` follow it, so values that hold commas (fault rules) stay whole.
    pub fn apply(&mut self, assignments: &str) -> Result<(), WorkloadError> {
        Self::split_assignments(assignments)
            .into_iter()
            .try_for_each(|a| self.apply_one(a))
    }

    /// The `knob=value` parts of a `--set` argument, in order: it is cut at each comma that
    /// starts another `knob=` (a comma inside a value, as in fault rules, stays).
    pub fn split_assignments(assignments: &str) -> Vec<&str> {
        let mut parts = Vec::new();
        let mut start = 0;
        for (i, _) in assignments.match_indices(',') {
            let next_is_knob = assignments[i + 1..]
                .split_once('=')
                .is_some_and(|(name, _)| knob(name).is_some());
            if next_is_knob {
                parts.push(&assignments[start..i]);
                start = i + 1;
            }
        }
        parts.push(&assignments[start..]);
        parts
    }

    /// Applies one `knob=value` override.
    fn apply_one(&mut self, assignment: &str) -> Result<(), WorkloadError> {
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| WorkloadError::BadSet(assignment.to_string()))?;
        let (name, value) = (name.trim(), value.trim());
        let k = knob(name).ok_or_else(|| WorkloadError::UnknownKnob {
            name: name.to_string(),
            valid: KNOBS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
        })?;
        (k.set)(self, value).map_err(|expected| WorkloadError::BadKnobValue {
            knob: name.to_string(),
            value: value.to_string(),
            expected,
        })
    }

    /// The lock manager of these settings for `max_backends` backends.
    pub fn lock_manager_config(&self, max_backends: usize) -> pglocks_lmgr::LockManagerConfig {
        pglocks_lmgr::LockManagerConfig {
            partitions: self.lock_partitions,
            fast_path: self.fast_path,
            nowait_checks_queue: self.nowait_checks_queue,
            relock_after_sleep: self.relock_after_sleep,
            hash_freelists: self.lock_hash_freelists,
            tas_spin: self.tas_spin,
            lazy_vxid: self.lazy_vxid,
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

    /// The buffer pool of these settings on a machine of `numa_nodes` NUMA nodes (which only a
    /// victim search split per node reads).
    pub fn bufmgr_config(&self, numa_nodes: usize) -> BufMgrConfig {
        BufMgrConfig {
            nbuffers: self.nbuffers,
            partitions: self.buffer_partitions,
            victim_search: self.victim_search,
            sweep: match self.sweep_per_node {
                None => SweepPartitions::One,
                Some(padded) => SweepPartitions::PerNode {
                    nodes: numa_nodes,
                    padded,
                },
            },
            pin: self.buffer_pin,
            read_latency: self.read_latency,
            tas_spin: self.tas_spin,
            repeat_pin_reads_valid: self.repeat_pin_reads_valid,
            io_wait: self.buffer_io_wait,
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
            dense_padding: self.dense_padding,
            ..ProcArrayConfig::new(max_backends, self.snapshot_layout, self.group_clear)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PRESETS;

    #[test]
    fn every_knob_has_one_name_and_changes_its_setting() {
        let mut names: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KNOBS.len(), "a knob name is declared twice");
        // Each knob moves its settings away from the release's for some value a user can
        // write: a knob wired to no field (or to the wrong one) fails here or in the round trip.
        let base = PRESETS
            .iter()
            .find(|p| p.name == "pg18")
            .unwrap()
            .settings();
        let probes = [
            "on", "off", "0", "1", "2", "3", "17", "64", "100", "0.5", "atomic", "lock", "locked",
            "ms", "spin", "file", "proc", "acquire", "plain", "pg15", "7ms", "fsync:3", "lwlock",
            "eager", "node",
        ];
        for k in KNOBS {
            let moves = probes.iter().any(|value| {
                let mut s = base.clone();
                (k.set)(&mut s, value).is_ok() && s != base
            });
            assert!(moves, "no value of knob {} changes anything", k.name);
        }
    }

    #[test]
    fn auto_reads_back_and_a_bad_value_says_what_the_knob_takes() {
        let mut s = PRESETS[0].settings();
        s.apply("clog_buffers=64").unwrap();
        assert_eq!(s.clog_buffers(), 64);
        s.apply("clog_buffers=auto").unwrap();
        assert_eq!(s, PRESETS[0].settings());
        let e = s.apply("clog_buffers=1").unwrap_err().to_string();
        assert!(e.contains("auto or a whole number from 2 to 131072"), "{e}");
        let e = s.apply("wal_insert_locks=65").unwrap_err().to_string();
        assert!(e.contains("one or a whole number from 1 to 64"), "{e}");
        let e = s.apply("synchronous_commit=off").unwrap_err().to_string();
        assert!(e.contains("arrived in 8.3"), "{e}");
    }
}
