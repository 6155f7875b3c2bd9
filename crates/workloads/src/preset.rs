//! PostgreSQL releases as configurations.
//!
//! A preset is one release (8.1 … 18, and 8.2 with the Unisys patches), known by its
//! [`Version`]. Its settings come from the rules declared with each setting in `settings.rs`,
//! which compare versions as PostgreSQL's comments date a change (`v >= v(9, 2)`), so a new
//! release is one line of [`PRESETS`] and a rule where it changed something; `--set knob=value`
//! then changes one setting so one difference can be isolated.

pub use crate::settings::{knob, Settings, KNOBS};
use crate::WorkloadError;
use pglocks_lmgr::FastPathLayout;
use pglocks_slru::clog::clog_autotune_buffers;
use pglocks_sync::time::Duration;

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
/// development machine, the reference machine of the simulated profiles
/// ([`pglocks_sim::profile::REFERENCE_BUSY_STEPS_PER_US`], where the measurement is told);
/// `pglocks run lwlock-exclusive --impl floor --threads 1 --set think=1000000` shows the same
/// (about 145 µs an operation). What turns a duration of executor work into steps, and what a
/// simulated machine scales by its `core_speed`; a debug build is some 50 times slower.
pub const BUSY_WORK_STEPS_PER_US: u64 = pglocks_sim::profile::REFERENCE_BUSY_STEPS_PER_US;

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
    pub(crate) unisys: bool,
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

impl Preset {
    /// The release's fast path (`on` for `--set fast_path`).
    pub(crate) fn fast_path(&self) -> FastPathLayout {
        match self.version {
            r if r >= v(18, 0) => FastPathLayout::Groups(FastPathLayout::pg18_groups(
                pglocks_lmgr::DEFAULT_MAX_LOCKS_PER_TRANSACTION,
            )),
            r if r >= v(9, 2) => FastPathLayout::Slots16,
            _ => FastPathLayout::None,
        }
    }

    /// The release's LWLock.
    pub(crate) fn lwlock(&self) -> LwLockVariant {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use pglocks_apply::Streaming;
    use pglocks_bufmgr::{PinMethod, SweepPartitions, VictimSearch};
    use pglocks_sinval::SinvalCheck;

    #[test]
    fn every_knob_of_every_preset_reads_back_as_set_takes_it() {
        for p in PRESETS {
            let settings = p.settings();
            for knob in KNOBS.iter().map(|k| k.name) {
                let value = settings
                    .knob_value(knob)
                    .unwrap_or_else(|| panic!("{} has no value for {knob}", p.name));
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
        let cfg = x.bufmgr_config(2);
        assert_eq!(
            (cfg.nbuffers, cfg.victim_search, cfg.pin, cfg.sweep),
            (
                64,
                VictimSearch::FreelistLock,
                PinMethod::HeaderLock,
                SweepPartitions::One
            )
        );
        for (value, nodes, padded) in [("node", 2, false), ("node-padded", 4, true)] {
            x.apply(&format!("clock_sweep={value}")).unwrap();
            let sweep = x.bufmgr_config(nodes).sweep;
            assert_eq!(sweep, SweepPartitions::PerNode { nodes, padded });
        }
        assert_eq!(
            (x.hit_ratio, cfg.read_latency),
            (0.25, Duration::from_micros(10))
        );
        for (set, expect) in [
            ("victim_search=spin", "lock or atomic"),
            ("buffer_pin=tas", "lock or cas"),
            ("nbuffers=8", "16 to 1048576"),
            ("clock_sweep=socket", "shared, node or node-padded"),
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
            ("dense_padding=32", "none, 64 or 128"),
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
