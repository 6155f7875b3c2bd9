//! What pglocks measures: workloads, each one operation that the harness runs on N threads, and
//! the PostgreSQL release presets that configure the models.
//!
//! A workload is an entry of [`WORKLOADS`]: its name, what one operation is, its
//! implementations (PostgreSQL's model first, then peers such as parking_lot, each an [`Impl`]:
//! a name and the function that runs it), the knobs it reads beyond the models' own, and its
//! model — the PostgreSQL code it runs, generic over the LWLock and spinlock types, so that
//! [`series_on_lwlock`] and [`series_on_spinlock`] can put a lock of the caller's wherever the
//! release's model takes one. For each (workload, preset, impl) [`series`] gives the harness a
//! run function, which builds fresh shared state and hands the harness one operation per
//! thread. Workloads never print; what they time is the harness's sampling of an operation,
//! and the simulated latencies (a flush, a page read) of the models they run.

mod apply;
mod bufmgr;
mod clog;
mod knob;
mod lmgr;
mod lwlock;
mod pgbench;
pub mod plan;
pub mod preset;
mod procarray;
mod settings;
mod shmmq;
mod sinval;
mod spin;
pub mod stress;
mod wal;

pub use knob::Knob;
pub use preset::{knob, FlushDeviceKind, Preset, Settings, DEFAULT_PRESET, KNOBS, PRESETS};

use pglocks_harness::{SeriesSpec, TeamSpec};
use pglocks_lwlock::RawLwLock;
use pglocks_spin::{PgSpinLock, RawSpinLock};
use preset::LwLockVariant;

/// How an implementation runs: `model`'s run under `settings` on one team.
type ImplRun = fn(Model, &Settings, &TeamSpec) -> RunResult;

/// One implementation of a workload, as `--impl` names it.
#[derive(Clone, Copy)]
pub struct Impl {
    /// Name on the command line.
    pub name: &'static str,
    /// One line on what it is, for `pglocks list`.
    pub summary: &'static str,
    /// Built on the sync shim, so it runs on a simulated machine (`--machine sim:…`); the
    /// peers taken from other crates (parking_lot, std, crossbeam) are not.
    pub on_shim: bool,
    run: ImplRun,
}

impl std::fmt::Debug for Impl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Impl").field("name", &self.name).finish()
    }
}

impl Impl {
    /// An implementation that runs `run`.
    pub(crate) const fn new(name: &'static str, summary: &'static str, run: ImplRun) -> Impl {
        Impl {
            name,
            summary,
            on_shim: true,
            run,
        }
    }

    /// A peer from another crate, whose atomics and waits do not go through the sync shim: it
    /// cannot run on a simulated machine.
    pub(crate) const fn external(name: &'static str, summary: &'static str, run: ImplRun) -> Impl {
        Impl {
            name,
            summary,
            on_shim: false,
            run,
        }
    }

    /// PostgreSQL's model of the preset (`pg`): the workload's model on the release's LWLock
    /// and spinlock.
    pub(crate) const fn pg(summary: &'static str) -> Impl {
        Impl::new("pg", summary, run_on_release_locks)
    }
}

/// Which lock types a workload's model takes, so that a caller's lock can replace them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locks {
    /// LWLocks (`LWLockAcquire` and friends).
    pub lwlock: bool,
    /// s_lock spinlocks (`SpinLockAcquire`).
    pub spinlock: bool,
}

/// A workload: one entry says everything about it.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Name on the command line.
    pub name: &'static str,
    /// One line on what one operation is.
    pub summary: &'static str,
    /// Implementations; the first is PostgreSQL's (`pg`).
    pub impls: &'static [Impl],
    /// The knobs it reads beyond the models' release settings (its own parameters).
    pub knobs: &'static [&'static str],
    /// The lock types its model takes.
    pub locks: Locks,
    model: Model,
}

impl Workload {
    /// The implementation `--impl name` names: one of the workload's own, or, where its model
    /// takes s_lock spinlocks, one of [`SPINLOCK_IMPLS`].
    pub fn implementation(&self, name: &str) -> Result<&'static Impl, WorkloadError> {
        self.all_impls()
            .find(|i| i.name == name)
            .ok_or_else(|| WorkloadError::UnknownImpl {
                workload: self.name.to_string(),
                name: name.to_string(),
                valid: names(self.all_impls().map(|i| i.name)),
            })
    }

    /// Every implementation `--impl` takes: the workload's own, then [`SPINLOCK_IMPLS`] if its
    /// model takes s_lock spinlocks, then [`LWLOCK_RW_IMPLS`] if an LWLock is its hot lock.
    pub fn all_impls(&self) -> impl Iterator<Item = &'static Impl> + '_ {
        let spin: &'static [Impl] = if self.locks.spinlock {
            SPINLOCK_IMPLS
        } else {
            &[]
        };
        let rw: &'static [Impl] = if self.rw_lwlock_stands_in() {
            LWLOCK_RW_IMPLS
        } else {
            &[]
        };
        self.impls.iter().chain(spin).chain(rw)
    }
}

impl Workload {
    /// The reader-writer locks of [`LWLOCK_RW_IMPLS`] can stand in for its LWLocks (an LWLock
    /// is its hot lock).
    pub fn rw_lwlock_stands_in(&self) -> bool {
        self.model.rw_lwlock_stands_in()
    }

    /// It writes WAL and flushes it (so `--flush-latency` and the flush device matter): the WAL
    /// models, and pgbench's transactions that write.
    pub fn flushes_wal(&self) -> bool {
        match self.model {
            Model::Wal(_) => true,
            Model::Pgbench(kind) => kind != pgbench::Kind::SelectOnly,
            _ => false,
        }
    }

    /// It runs a backend's executor work between its locks: it reads the `executor_work` knob.
    pub fn executor_work(&self) -> bool {
        self.knobs.contains(&"executor_work")
    }
}

/// The PostgreSQL code a workload runs, generic over the lock types (see [`Model::run`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Model {
    Spin,
    Lwlock(lwlock::Mix),
    BufferLookup,
    Lmgr(lmgr::Kind),
    Clog(clog::Kind),
    Sinval,
    ProcArray(procarray::Kind),
    Wal(wal::Kind),
    ShmMq,
    Apply,
    Pgbench(pgbench::Kind),
}

impl Model {
    /// One run of the model with LWLock type `K` and spinlock type `R` wherever it takes them.
    fn run<K: RawLwLock, R: RawSpinLock + 'static>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        match self {
            Model::Lwlock(_)
            | Model::BufferLookup
            | Model::Lmgr(_)
            | Model::Clog(_)
            | Model::ProcArray(_) => self.run_with_rw_lwlock::<K, R>(settings, spec),
            Model::ShmMq => shmmq::run(self, settings, spec),
            Model::Apply => apply::Apply.run::<K, R>(settings, spec),
            // Every LWLock spacing of the releases (run_with_spinlock builds 9.6's on).
            Model::Pgbench(kind) => kind.run::<K, R>(settings, spec),
            Model::Spin | Model::Sinval | Model::Wal(_) => {
                self.run_with_spinlock::<K, R>(settings, spec)
            }
        }
    }

    /// One timed run with `R` in place of every s_lock, beside the release's LWLock `K`: only
    /// the models that take s_lock are built for it (the others would be built once more for
    /// every spinlock of [`SPINLOCK_IMPLS`] to run exactly as they do on the release's).
    fn run_with_spinlock<K: RawLwLock, R: RawSpinLock + 'static>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        match self {
            Model::Spin => spin::run::<pglocks_spin::SpinLock<u64, R>>(self, settings, spec),
            Model::Sinval => sinval::Check.run::<K, R>(settings, spec),
            Model::Wal(kind) => kind.run::<K, R>(settings, spec),
            Model::Pgbench(kind) => kind.run_with_spinlock::<K, R>(settings, spec),
            _ => Err(workload_error(NotBeside::NoSpinlock)),
        }
    }

    /// One timed run with the reader-writer lock `K` in place of every LWLock, beside the
    /// release's s_lock `R`: only the models whose hot lock is an LWLock taken shared and
    /// exclusive ([`Model::rw_lwlock_stands_in`]) are built for it.
    fn run_with_rw_lwlock<K: RawLwLock, R: RawSpinLock + 'static>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        match self {
            Model::Lwlock(mix) => lwlock::run_on::<K>(mix, settings, spec),
            Model::BufferLookup => bufmgr::BufferLookup.run::<K, R>(settings, spec),
            Model::Lmgr(kind) => kind.run::<K, R>(settings, spec),
            Model::Clog(kind) => kind.run::<K, R>(settings, spec),
            Model::ProcArray(kind) => kind.run::<K, R>(settings, spec),
            Model::Pgbench(kind) => kind.run_with_spinlock::<K, R>(settings, spec),
            _ => Err(workload_error(NotBeside::NoRwLwLock)),
        }
    }

    /// Whether [`LWLOCK_RW_IMPLS`] stand in for this model's LWLocks: the LWLock micro
    /// workloads, the buffer mapping, lock manager, CLOG and ProcArray models and pgbench's
    /// transactions (the WAL insertion locks of tpcb-like included). Not the WAL models, which
    /// measure the insertion locks' variable protocol that these locks only poll, nor sinval's,
    /// shm_mq's or apply's, whose hot lock is a spinlock or a queue.
    fn rw_lwlock_stands_in(self) -> bool {
        matches!(
            self,
            Model::Lwlock(_)
                | Model::BufferLookup
                | Model::Lmgr(_)
                | Model::Clog(_)
                | Model::ProcArray(_)
                | Model::Pgbench(_)
        )
    }

    /// The mode mix of an LWLock micro workload (exclusive for any other).
    pub(crate) fn mix(self) -> lwlock::Mix {
        match self {
            Model::Lwlock(mix) => mix,
            _ => lwlock::Mix::Exclusive,
        }
    }
}

const LWLOCK_ONLY: Locks = Locks {
    lwlock: true,
    spinlock: false,
};
const BOTH_LOCKS: Locks = Locks {
    lwlock: true,
    spinlock: true,
};

/// A workload entry with no knobs of its own.
const fn entry(
    name: &'static str,
    summary: &'static str,
    impls: &'static [Impl],
    locks: Locks,
    model: Model,
) -> Workload {
    Workload {
        name,
        summary,
        impls,
        knobs: &[],
        locks,
        model,
    }
}

/// Every workload.
pub const WORKLOADS: &[Workload] = &[
    Workload {
        knobs: &["cs_lines", "cs_work", "think"],
        ..entry(
            "spin",
            "acquire a spinlock, bump a counter under it, release",
            spin::IMPLS,
            Locks {
                lwlock: false,
                spinlock: true,
            },
            Model::Spin,
        )
    },
    Workload {
        knobs: &["cs_work", "think"],
        ..entry(
            "lwlock-exclusive",
            "acquire one LWLock exclusive, release",
            lwlock::IMPLS,
            LWLOCK_ONLY,
            Model::Lwlock(lwlock::Mix::Exclusive),
        )
    },
    Workload {
        knobs: &["cs_work", "think"],
        ..entry(
            "lwlock-shared",
            "acquire one LWLock shared, release",
            lwlock::IMPLS,
            LWLOCK_ONLY,
            Model::Lwlock(lwlock::Mix::Shared),
        )
    },
    Workload {
        knobs: &["read_ratio", "cs_work", "think"],
        ..entry(
            "lwlock-mixed",
            "acquire one LWLock shared (read_ratio of the time) or exclusive, release",
            lwlock::IMPLS,
            LWLOCK_ONLY,
            Model::Lwlock(lwlock::Mix::Mixed),
        )
    },
    Workload {
        knobs: &["nbuffers", "hit_ratio", "read_latency", "cs_work", "think"],
        ..entry(
            "buffer-lookup",
            "read a page (ReadBuffer: partition lock shared, lookup, pin) and release it; `hit_ratio` of them hit, misses run the clock sweep",
            lwlock::BUFFER_IMPLS,
            LWLOCK_ONLY,
            Model::BufferLookup,
        )
    },
    Workload {
        knobs: &["relations"],
        ..entry(
            "lmgr-relation",
            "a SELECT's relation locks: AccessShareLock on `relations` relations, then release all",
            lmgr::IMPLS,
            LWLOCK_ONLY,
            Model::Lmgr(lmgr::Kind::Relation),
        )
    },
    entry(
        "lmgr-vxid",
        "a transaction's start and end: the lock on its virtual transaction id",
        lmgr::IMPLS,
        LWLOCK_ONLY,
        Model::Lmgr(lmgr::Kind::Vxid),
    ),
    Workload {
        knobs: &["relations", "strong_every"],
        ..entry(
            "lmgr-strong-mix",
            "lmgr-relation, with AccessExclusiveLock on one relation every `strong_every` transactions",
            lmgr::IMPLS,
            LWLOCK_ONLY,
            Model::Lmgr(lmgr::Kind::StrongMix),
        )
    },
    Workload {
        knobs: &["xid_window", "slru_latency", "slru_fault"],
        ..entry(
            "clog-get",
            "look up a transaction's status among the newest `xid_window` xids (TransactionIdGetStatus)",
            clog::IMPLS,
            LWLOCK_ONLY,
            Model::Clog(clog::Kind::Get),
        )
    },
    Workload {
        knobs: &["slru_latency", "think", "slru_fault"],
        ..entry(
            "clog-set",
            "commit the next xid in the commit log (TransactionIdCommitTree; group update from 11)",
            clog::IMPLS,
            LWLOCK_ONLY,
            Model::Clog(clog::Kind::Set),
        )
    },
    Workload {
        knobs: &["inval_rate", "inval_batch", "idle_backends"],
        ..entry(
            "sinval-check",
            "check for shared invalidation messages and read them (AcceptInvalidationMessages); send some at `inval_rate`",
            sinval::IMPLS,
            BOTH_LOCKS,
            Model::Sinval,
        )
    },
    Workload {
        knobs: &["backends", "commit_ratio", "subxacts"],
        ..entry(
            "snapshot",
            "a read-only transaction: GetSnapshotData over `backends` registered backends, one visibility test, end (a `commit_ratio` share write instead)",
            procarray::IMPLS,
            LWLOCK_ONLY,
            Model::ProcArray(procarray::Kind::Snapshot),
        )
    },
    Workload {
        knobs: &["backends", "subxacts"],
        ..entry(
            "end-xact",
            "a write transaction's xid and end: GetNewTransactionId, ProcArrayEndTransaction (group XID clear from 9.6)",
            procarray::IMPLS,
            LWLOCK_ONLY,
            Model::ProcArray(procarray::Kind::EndXact),
        )
    },
    Workload {
        knobs: &["record_size", "think", "wal_fault"],
        ..entry(
            "wal-insert",
            "insert one WAL record of `record_size` bytes (XLogInsertRecord)",
            wal::IMPLS,
            BOTH_LOCKS,
            Model::Wal(wal::Kind::Insert),
        )
    },
    Workload {
        knobs: &["wal_fault"],
        ..entry(
            "wal-commit",
            "a commit: insert a commit record and XLogFlush it, or with synchronous_commit = off leave it to the WAL writer (group commit; ideal = threads / flush_latency)",
            wal::IMPLS,
            BOTH_LOCKS,
            Model::Wal(wal::Kind::Commit),
        )
    },
    Workload {
        knobs: &["msg_size", "queue_size"],
        ..entry(
            "shm-mq",
            "receive one message of `msg_size` bytes streamed by a partner thread through a `queue_size` shm_mq (threads pair up sender -> receiver; an odd one out uses its own queue with nowait)",
            shmmq::IMPLS,
            Locks {
                lwlock: false,
                spinlock: false,
            },
            Model::ShmMq,
        )
    },
    Workload {
        knobs: &[
            "mode",
            "txn_size",
            "txns",
            "workers",
            "work_mem_changes",
            "row_work",
            "queue_size",
        ],
        ..entry(
            "apply",
            "logical replication of threads x `txns` transactions of `txn_size` inserts: the publisher executes and streams them, the subscriber applies them as `mode` (off|on|parallel) says; ops are changes applied, elapsed is first insert to last commit on the subscriber (one run; duration unused)",
            apply::IMPLS,
            LWLOCK_ONLY,
            Model::Apply,
        )
    },
    Workload {
        knobs: &["scale", "backends", "executor_work"],
        ..entry(
            "select-only",
            "pgbench -S's transaction: vxid lock, AccessShareLock on the table and its index, sinval checks, a snapshot, the index descent and heap page, commit",
            pgbench::IMPLS,
            BOTH_LOCKS,
            Model::Pgbench(pgbench::Kind::SelectOnly),
        )
    },
    Workload {
        knobs: &["scale", "backends", "executor_work", "wal_fault"],
        ..entry(
            "tpcb-like",
            "pgbench's default transaction: three UPDATEs (waiting for a row's updater: tuple lock, XactLockTableWait), a SELECT and an INSERT, a snapshot each, xid, WAL records, commit flush, CLOG, ProcArray end",
            pgbench::IMPLS,
            BOTH_LOCKS,
            Model::Pgbench(pgbench::Kind::TpcbLike),
        )
    },
    Workload {
        knobs: &["scale", "backends", "executor_work", "wal_fault"],
        ..entry(
            "insert-commit",
            "one INSERT per transaction: xid and its lock, heap and index pages, WAL records, commit flush (group commit), CLOG, ProcArray end",
            pgbench::IMPLS,
            BOTH_LOCKS,
            Model::Pgbench(pgbench::Kind::InsertCommit),
        )
    },
];

/// Errors of workload selection and configuration, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// No such workload.
    #[error("unknown workload '{name}' (valid: {valid})")]
    UnknownWorkload {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// No such implementation for the workload.
    #[error("unknown impl '{name}' for workload {workload} (valid: {valid})")]
    UnknownImpl {
        /// The workload.
        workload: String,
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// No such preset.
    #[error("unknown preset '{name}' (valid: {valid})")]
    UnknownPreset {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// No such knob.
    #[error("unknown knob '{name}' for --set (valid: {valid})")]
    UnknownKnob {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// A knob value of the wrong kind.
    #[error("bad value '{value}' for knob {knob}: expected {expected}")]
    BadKnobValue {
        /// The knob.
        knob: String,
        /// The value given.
        value: String,
        /// What it takes.
        expected: String,
    },
    /// A caller's lock for a workload whose model takes none of that kind.
    #[error("workload {workload} takes no {lock} (the workloads that do: {valid})")]
    NoSuchLock {
        /// The workload.
        workload: String,
        /// `LWLock` or `spinlock`.
        lock: &'static str,
        /// The workloads whose models take one.
        valid: String,
    },
    /// `--set` without `=`.
    #[error("--set takes knob=value, got '{0}'")]
    BadSet(String),
}

/// `n` dependent multiply-adds: CPU time that touches no shared memory (`cs_work`, `think`).
#[inline(always)]
pub(crate) fn work(n: u32, seed: u64) -> u64 {
    pglocks_sync::hint::busy_work(n, seed)
}

/// The backend table of one run: `threads` slots with the settings' s_lock constants and
/// `LWLOCK_STATS` switch.
pub(crate) fn proc_table(settings: &Settings, threads: usize) -> pglocks_proc::ProcTable {
    let procs = pglocks_proc::ProcTable::with_spin_config(
        threads,
        pglocks_proc::spin_delay::SpinDelayConfig {
            num_delays: settings.num_delays,
            default_spins_per_delay: settings.spins_per_delay,
            delay_unit: settings.spin_delay_unit,
            ..Default::default()
        },
    );
    procs.set_lwlock_stats(settings.lwlock_stats);
    procs
}

/// The NUMA nodes of the machine a run goes on: the simulated one's, else this one's.
pub(crate) fn numa_nodes(sim: Option<&pglocks_sim::Profile>) -> usize {
    sim.map_or_else(pglocks_sync::cpu::numa_nodes, |p| p.numa_nodes())
}

/// "a, b, c": names for an error message.
pub(crate) fn names<'a>(list: impl Iterator<Item = &'a str>) -> String {
    list.collect::<Vec<_>>().join(", ")
}

/// A model's error while a run is set up, as the harness reports a workload's errors.
pub(crate) fn workload_error(
    e: impl std::error::Error + Send + Sync + 'static,
) -> pglocks_harness::HarnessError {
    pglocks_harness::HarnessError::Workload(Box::new(e))
}

/// The model of one workload module, run on lock types the caller picks: each module's kind
/// implements it, and [`Model::run`] dispatches to it.
pub(crate) trait PgWorkload: Copy + Send + Sync + 'static {
    /// One timed run with LWLock type `K` and spinlock type `R` where the model takes them.
    fn run<K: RawLwLock, R: RawSpinLock + 'static>(
        self,
        settings: &Settings,
        spec: &pglocks_harness::TeamSpec,
    ) -> RunResult;
}

/// What one timed run of a workload gives.
pub(crate) type RunResult = Result<pglocks_harness::TeamRun, pglocks_harness::HarnessError>;

/// The release's s_lock: `TAS_SPIN` reads first (x86_64 from 9.4) or not.
fn run_on_release_spinlock<K: RawLwLock>(
    model: Model,
    settings: &Settings,
    spec: &TeamSpec,
) -> RunResult {
    if settings.tas_spin {
        model.run::<K, PgSpinLock<true>>(settings, spec)
    } else {
        model.run::<K, PgSpinLock<false>>(settings, spec)
    }
}

/// One run of a model on the LWLock picked by [`lwlock::with_lwlock_type`] and the spinlock `R`.
struct OnLwLock<'a, R> {
    model: Model,
    settings: &'a Settings,
    spec: &'a TeamSpec,
    spinlock: std::marker::PhantomData<R>,
}

impl<R: RawSpinLock + 'static> lwlock::MakeWithLwLock for OnLwLock<'_, R> {
    type Output = RunResult;
    fn make<K: RawLwLock>(self) -> RunResult {
        self.model.run::<K, R>(self.settings, self.spec)
    }
}

/// Linux's queued spinlock and the NUMA-aware mutexes (`pglocks_spin::numa`), offered on every
/// workload whose model takes s_lock spinlocks: each stands in for every one of them, the
/// release's LWLock elsewhere.
pub const SPINLOCK_IMPLS: &[Impl] = &[
    Impl::new(
        "qspinlock",
        "Linux's queued spinlock (pending bit, MCS queue) in place of every s_lock",
        run_on_spinlock::<pglocks_spin::QSpinLock>,
    ),
    Impl::new(
        "cna",
        "CNA (Dice & Kogan 2019, Linux v14): qspinlock keeping the lock on the holder's NUMA node",
        run_on_spinlock::<pglocks_spin::CnaLock>,
    ),
    Impl::new(
        "cohort",
        "cohort lock C-BO-MCS (Dice, Marathe & Shavit 2012): per-node MCS, global back-off lock",
        run_on_spinlock::<pglocks_spin::CohortLock>,
    ),
    Impl::new(
        "hmcs",
        "hierarchical MCS (Chabbi et al. 2015): an MCS lock per node under a root MCS lock",
        run_on_spinlock::<pglocks_spin::HmcsLock>,
    ),
    Impl::new(
        "shfl",
        "ShflLock (Kashyap et al. 2019): TAS word, MCS queue regrouped by node by a shuffler",
        run_on_spinlock::<pglocks_spin::ShflLock>,
    ),
];

/// The reader-writer locks offered on every workload whose hot lock is an LWLock
/// ([`Model::rw_lwlock_stands_in`]): the NUMA-aware ones (`pglocks_lwlock::numa`) and PostgreSQL
/// 18's own with the 2025 proposal's shared fetch-and-add (a prototype). Each stands in for
/// every LWLock of the model, beside the release's s_lock.
pub const LWLOCK_RW_IMPLS: &[Impl] = &[
    Impl::new(
        "fetch-add",
        "18's LWLock taking shared holds by fetch-and-add, backed out if refused (the 2025 proposal) in place of every LWLock",
        run_on_rw_lwlock::<pglocks_lwlock::FetchAddLwLock>,
    ),
    Impl::new(
        "cohort-rw",
        "C-RW-WP (Calciu et al. 2013) in place of every LWLock: per-node reader counts, writers on a cohort lock",
        run_on_rw_lwlock::<pglocks_lwlock::CohortRwLock>,
    ),
    Impl::new(
        "shfl-rw",
        "ShflLock's blocking reader-writer lock (Kashyap et al. 2019) in place of every LWLock",
        run_on_rw_lwlock::<pglocks_lwlock::ShflRwLock>,
    ),
];

/// The model with the reader-writer lock `K` in place of every LWLock, beside the release's
/// s_lock when it reads first (`TAS_SPIN`, 9.4 on): one s_lock, so that every model is built
/// once per reader-writer lock, not twice.
fn run_on_rw_lwlock<K: RawLwLock>(model: Model, settings: &Settings, spec: &TeamSpec) -> RunResult {
    if !settings.tas_spin {
        return Err(workload_error(NotBeside::NoTasSpin));
    }
    model.run_with_rw_lwlock::<K, PgSpinLock<true>>(settings, spec)
}

/// The model on the release's LWLock with the spinlock `R` in place of every s_lock: the LWLock
/// of 9.6 to 17 or of 18 (the atomic state word; [`spinlock_impl_lwlock`] refuses the older
/// ones, whose every instantiation of every model would be built five times more).
fn run_on_spinlock<R: RawSpinLock + 'static>(
    model: Model,
    settings: &Settings,
    spec: &TeamSpec,
) -> RunResult {
    use pglocks_lwlock::{AtomicLwLock, Pg18Layout, Pg96Layout};
    match spinlock_impl_lwlock(settings).map_err(workload_error)? {
        LwLockVariant::Atomic18 => {
            model.run_with_spinlock::<AtomicLwLock<Pg18Layout>, R>(settings, spec)
        }
        _ => model.run_with_spinlock::<AtomicLwLock<Pg96Layout>, R>(settings, spec),
    }
}

/// A release's LWLock that a spinlock of [`SPINLOCK_IMPLS`] runs beside: the atomic state word
/// of 9.6 to 17 or of 18, or why not.
pub(crate) fn spinlock_impl_lwlock(settings: &Settings) -> Result<LwLockVariant, NotBeside> {
    match settings.lwlock {
        v @ (LwLockVariant::Atomic | LwLockVariant::Atomic18) => Ok(v),
        v => Err(NotBeside::OlderLwLock(v.name())),
    }
}

/// Why a spinlock of [`SPINLOCK_IMPLS`] cannot run with a preset's settings: each is built
/// only beside what every release from 9.6 on has, so that the workloads crate builds every
/// model that takes s_lock once per spinlock, not once per spinlock and release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotBeside {
    /// The release's LWLock is older than 9.6's atomic state word.
    #[error("the queued and NUMA-aware spinlocks (--impl qspinlock, cna, cohort, hmcs, shfl) run beside the LWLocks of 9.6 and later; this preset's is lwlock={0} (choose a preset from pg96 on)")]
    OlderLwLock(&'static str),
    /// pgbench's select-only with the LWLock array spaced otherwise than 9.6 on space it.
    #[error("the queued and NUMA-aware locks run pgbench with the LWLocks padded to 128 bytes, as 9.6 and later pad them; this run sets lwlock_padding={0} (leave lwlock_padding at the preset's)")]
    Padding(usize),
    /// A model that takes no s_lock spinlock (the spinlocks are offered only where one is).
    #[error("this workload's model takes no s_lock spinlock, so no spinlock can stand in for one")]
    NoSpinlock,
    /// A model whose hot lock is not an LWLock (the reader-writer locks are offered only where
    /// one is).
    #[error("the reader-writer locks (--impl fetch-add, cohort-rw, shfl-rw) stand in for the LWLocks of the lwlock-*, buffer-lookup, lmgr-*, clog-*, snapshot, end-xact and pgbench workloads, not this one's")]
    NoRwLwLock,
    /// A preset whose s_lock does not read first (before 9.4, or `tas_spin=off`).
    #[error("the reader-writer locks (--impl fetch-add, cohort-rw, shfl-rw) run beside the s_lock of 9.4 and later, which reads before its test-and-set; this run has tas_spin=off (choose a preset from pg94 on)")]
    NoTasSpin,
}

/// The `pg` implementation: the model on the release's LWLock and spinlock.
fn run_on_release_locks(model: Model, settings: &Settings, spec: &TeamSpec) -> RunResult {
    struct Release<'a>(Model, &'a Settings, &'a TeamSpec);
    impl lwlock::MakeWithLwLock for Release<'_> {
        type Output = RunResult;
        fn make<K: RawLwLock>(self) -> RunResult {
            run_on_release_spinlock::<K>(self.0, self.1, self.2)
        }
    }
    lwlock::with_lwlock_type(settings, Release(model, settings, spec))
}

/// Looks a workload up by name.
pub fn workload(name: &str) -> Result<&'static Workload, WorkloadError> {
    WORKLOADS
        .iter()
        .find(|w| w.name == name)
        .ok_or_else(|| WorkloadError::UnknownWorkload {
            name: name.to_string(),
            valid: names(WORKLOADS.iter().map(|w| w.name)),
        })
}

/// The series for `workload` with implementation `impl_name` under `preset` plus the `--set`
/// overrides in `sets`.
pub fn series(
    workload_name: &str,
    preset: &Preset,
    impl_name: &str,
    sets: &[String],
) -> Result<SeriesSpec<'static>, WorkloadError> {
    let mut settings = preset.settings();
    for s in sets {
        settings.apply(s)?;
    }
    series_with(workload_name, preset, impl_name, settings)
}

/// The series for `workload` with implementation `impl_name` under `settings` (a preset's,
/// changed in code: how an example plugs in a variant no knob names), labelled `preset`.
pub fn series_with(
    workload_name: &str,
    preset: &Preset,
    impl_name: &str,
    settings: Settings,
) -> Result<SeriesSpec<'static>, WorkloadError> {
    let w = workload(workload_name)?;
    let run = w.implementation(impl_name)?.run;
    let model = w.model;
    Ok(labelled(w, preset, impl_name, move |spec| {
        run(model, &settings, spec)
    }))
}

/// A series of workload `w`.
fn labelled(
    w: &Workload,
    preset: &Preset,
    impl_name: &str,
    run: impl Fn(&TeamSpec) -> RunResult + 'static,
) -> SeriesSpec<'static> {
    SeriesSpec {
        workload: w.name.to_string(),
        preset: preset.name.to_string(),
        impl_name: impl_name.to_string(),
        run: Box::new(run),
    }
}

/// The workload `name`, if its model takes the lock `lock` says (`lwlock` or `spinlock`).
fn workload_taking(
    name: &str,
    lock: &'static str,
    takes: fn(Locks) -> bool,
) -> Result<&'static Workload, WorkloadError> {
    let w = workload(name)?;
    if takes(w.locks) {
        return Ok(w);
    }
    Err(WorkloadError::NoSuchLock {
        workload: w.name.to_string(),
        lock,
        valid: names(WORKLOADS.iter().filter(|w| takes(w.locks)).map(|w| w.name)),
    })
}

/// A series of `workload` under `settings` with the caller's LWLock `K` wherever the release's
/// model takes an LWLock (every tranche: buffer mapping, lock manager, WAL insertion and write,
/// ProcArray, CLOG, sinval, …) and the release's s_lock elsewhere; labelled `preset` /
/// `impl_name`. This is how a new LWLock is measured inside PostgreSQL's own call sites, beside
/// the release's (`series(workload, preset, "pg", …)`) in one sweep.
pub fn series_on_lwlock<K: RawLwLock>(
    workload: &str,
    preset: &Preset,
    impl_name: &str,
    settings: Settings,
) -> Result<SeriesSpec<'static>, WorkloadError> {
    let w = workload_taking(workload, "LWLock", |l| l.lwlock)?;
    let model = w.model;
    Ok(labelled(w, preset, impl_name, move |spec| {
        run_on_release_spinlock::<K>(model, &settings, spec)
    }))
}

/// A series of `workload` under `settings` with the caller's spinlock `R` wherever the
/// release's model takes an s_lock spinlock (`msgnumLock`, `insertpos_lck`, `info_lck`, the
/// `spin` workload's lock), and the release's LWLock elsewhere.
pub fn series_on_spinlock<R: RawSpinLock + 'static>(
    workload: &str,
    preset: &Preset,
    impl_name: &str,
    settings: Settings,
) -> Result<SeriesSpec<'static>, WorkloadError> {
    let w = workload_taking(workload, "spinlock", |l| l.spinlock)?;
    let model = w.model;
    Ok(labelled(w, preset, impl_name, move |spec| {
        lwlock::with_lwlock_type(
            &settings,
            OnLwLock::<R> {
                model,
                settings: &settings,
                spec,
                spinlock: std::marker::PhantomData,
            },
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_consistent() {
        let mut seen = Vec::new();
        for w in WORKLOADS {
            assert!(!seen.contains(&w.name), "workload {} twice", w.name);
            seen.push(w.name);
            assert_eq!(
                w.impls[0].name, "pg",
                "{}: PostgreSQL's model first",
                w.name
            );
            for (i, imp) in w.impls.iter().enumerate() {
                assert!(
                    w.impls[..i].iter().all(|j| j.name != imp.name),
                    "{}: impl {} twice",
                    w.name,
                    imp.name
                );
                assert!(w.implementation(imp.name).is_ok());
            }
            for k in w.knobs {
                assert!(
                    knob(k).is_some(),
                    "{} reads knob {k}, which does not exist",
                    w.name
                );
            }
            // Executor work is done between the locks of pgbench's transactions only.
            assert!(
                !w.executor_work() || matches!(w.model, Model::Pgbench(_)),
                "{}",
                w.name
            );
        }
        // The WAL models and pgbench's writing transactions flush WAL; nothing else does.
        let mut flushing: Vec<&str> = WORKLOADS
            .iter()
            .filter(|w| w.flushes_wal())
            .map(|w| w.name)
            .collect();
        flushing.sort_unstable();
        assert_eq!(
            flushing,
            ["insert-commit", "tpcb-like", "wal-commit", "wal-insert"]
        );
        let e = workload("spinn").unwrap_err().to_string();
        assert!(
            e.contains("unknown workload 'spinn'") && e.contains("tpcb-like"),
            "{e}"
        );
        let e = workload("spin")
            .unwrap()
            .implementation("futex")
            .unwrap_err();
        assert!(e.to_string().contains("tas, ticket"), "{e}");
    }
}
