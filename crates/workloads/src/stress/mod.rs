//! `pglocks stress`: every primitive and macro workload at once, with invariant checks on, for
//! a soak of minutes on many threads — the way PostgreSQL's own regression and isolation runs
//! earn trust, aimed at the models.
//!
//! # The algorithm
//!
//! A *part* stresses one mechanism and checks one invariant of it; each lives in a file of
//! this folder whose doc names the PostgreSQL code it exercises and what it checks, and is
//! registered by name in [`PARTS`]. A run:
//! 1. takes the parts asked for (every registered one by default), in the registry's order;
//! 2. deals the threads out to them (thread `i` to part `i % parts`) and builds each part on
//!    the preset's LWLock and `s_lock` spinlock, with shared state and a `ProcTable` of its own;
//! 3. attaches one backend per thread, in order (thread `i` of a part is its backend `i`),
//!    and starts the threads, which all run together until the deadline. Each step of a
//!    thread is one operation and its checks; a failed check, or a primitive's error where
//!    none may happen, is a [`Violation`], and the first one stops every thread;
//! 4. once every thread has stopped, each part checks its end state: lock tables and
//!    fast-path slots empty, every WAL and commit-log LWLock free, no pins left, counters
//!    exact, every row's last updater committed.
//!
//! The watchdog is the driving thread. Ten times a second it collects the threads that have
//! finished, hands a [`Progress`] to the caller, and looks at each thread's count of steps: a
//! thread without a new step for `hang_after` is a [`Hang`] (a lost wake-up shows as one),
//! reported with what its backend waits for (its LWLock wait state, or its place in the lock
//! manager's queue), and it stops the run. A hung thread cannot be joined: the driver waits
//! for the others until `duration + hang_after`, then reports and leaves it.
//!
//! The seed fixes every thread's random choices (which lock, which mode, commit or abort); the
//! interleaving is the machine's, so a seed makes a failure likely to recur rather than
//! certain.
//!
//! # Outcomes
//!
//! [`stress`] returns a [`StressReport`] once the parts have run: it passed, or it holds the
//! first violation and the hangs. It fails before running with a [`StressError`]:
//! [`StressError::Usage`] when the request is wrong (an unknown or repeated part name, fewer
//! threads than parts, a zero duration; [`StressConfig::validate`] finds these without
//! running), [`StressError::Setup`] when a model refused to build a part from the settings or
//! a thread could not be started. `pglocks stress` exits 1 on a violation, a hang or a setup
//! failure (the request was valid; the run failed) and 2 on a usage error.
//!
//! # Adding a part
//!
//! A file here with a type that implements `Part` (its step, its end check, what its backends
//! wait for) and one that implements `NewPart` (how it is built for a number of threads), and
//! one line in [`PARTS`].

mod apply;
mod bufmgr;
mod deadlock;
mod lmgr;
mod lwlock;
mod pgbench;
mod simulated;
mod sinval;
mod spin;
mod wal;
mod xact;

use crate::lwlock::{with_lwlock_type, MakeWithLwLock};
use crate::preset::Settings;
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::{PgSpinLock, RawSpinLock};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use simulated::{episode_seed, run_episodes, stress_episode, Simulated, SimulatedReport};

// ----- the registry -------------------------------------------------------------------------

/// A registered part: its name and its constructor.
#[derive(Clone, Copy)]
pub struct PartEntry {
    /// The part's name: what `pglocks stress --parts` takes and the report's rows show.
    pub name: &'static str,
    /// Builds the part on the preset's LWLock and spinlock.
    new: fn(&Setup<'_>) -> Result<Arc<dyn Part>, Refused>,
}

impl std::fmt::Debug for PartEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartEntry")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The entry of part `name`, built by `P`.
const fn part<P: NewPart>(name: &'static str) -> PartEntry {
    PartEntry {
        name,
        new: on_preset_locks::<P>,
    }
}

/// Every part, in the order threads are dealt out to them.
pub const PARTS: &[PartEntry] = &[
    part::<spin::New>("spin"),
    part::<lwlock::New>("lwlock"),
    part::<lmgr::New>("lmgr"),
    part::<deadlock::New>("deadlock"),
    part::<wal::New>("wal"),
    part::<xact::New>("xact"),
    part::<sinval::New>("sinval"),
    part::<bufmgr::New>("bufmgr"),
    part::<pgbench::SelectOnly>("select-only"),
    part::<pgbench::TpcbLike>("tpcb-like"),
    part::<apply::New>("apply"),
];

/// The registered parts `names` asks for (every one when it is empty), in the registry's order.
fn select(names: &[String]) -> Result<Vec<&'static PartEntry>, UsageError> {
    for (k, name) in names.iter().enumerate() {
        if !PARTS.iter().any(|p| p.name == name) {
            return Err(UsageError::UnknownPart {
                name: name.clone(),
                valid: part_names(),
            });
        }
        if names[..k].contains(name) {
            return Err(UsageError::RepeatedPart(name.clone()));
        }
    }
    Ok(PARTS
        .iter()
        .filter(|p| names.is_empty() || names.iter().any(|n| n == p.name))
        .collect())
}

/// The registered names, comma-separated.
fn part_names() -> String {
    PARTS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

// ----- the public API -----------------------------------------------------------------------

/// What a stress run is asked to do.
#[derive(Debug, Clone)]
pub struct StressConfig {
    /// How long the parts run (longer than 0).
    pub duration: Duration,
    /// Threads in all, dealt out to the parts (at least one per part).
    pub threads: usize,
    /// The preset's settings (and any `--set`).
    pub settings: Settings,
    /// Seeds every thread's random choices.
    pub seed: u64,
    /// A thread without progress for this long is reported as hung (longer than 0).
    pub hang_after: Duration,
    /// The parts to run, by registered name ([`PARTS`]); empty for every one.
    pub parts: Vec<String>,
    /// Run on a simulated machine instead of this one (the simulator's build only).
    pub simulated: Option<Simulated>,
    /// The spinlock in place of every s_lock of the parts: `pg` (the release's) or one of
    /// [`crate::SPINLOCK_IMPLS`].
    pub spinlock: String,
    /// The reader-writer lock in place of every LWLock of the parts: `pg` (the release's) or
    /// one of [`crate::LWLOCK_RW_IMPLS`] (then `spinlock` must be `pg`).
    pub lwlock: String,
}

/// What one part did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartReport {
    /// The part's name.
    pub name: &'static str,
    /// Threads it ran on.
    pub threads: usize,
    /// Operations done.
    pub ops: u64,
    /// Invariant checks made (each passed unless a violation is reported).
    pub checks: u64,
    /// A count the part reports of its own (deadlocks detected, resets, evictions …).
    pub events: u64,
    /// What `events` counts.
    pub events_name: &'static str,
}

/// An invariant a part found broken, or a primitive's error where none may happen: the run
/// stopped there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part}: {message}")]
pub struct Violation {
    /// The part whose check failed.
    pub part: &'static str,
    /// What was seen (starting with `at the end: ` when an end check failed).
    pub message: String,
    /// On a simulated machine, the virtual time at which it was seen.
    pub at: Option<Duration>,
}

/// A thread that made no progress for `hang_after`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{part} thread {thread} (backend {procno}) made no progress for {:.1} s: {waiting_for}",
    idle.as_secs_f64()
)]
pub struct Hang {
    /// The thread's part.
    pub part: &'static str,
    /// The thread's number within its part.
    pub thread: usize,
    /// Its backend's proc number in the part's `ProcTable`.
    pub procno: usize,
    /// How long it had gone without a step when it was reported.
    pub idle: Duration,
    /// What its backend waits for.
    pub waiting_for: String,
}

/// The outcome of a stress run that ran.
#[derive(Debug, Clone, Default)]
pub struct StressReport {
    /// One row per part, in the order they ran.
    pub parts: Vec<PartReport>,
    /// The first violation; the run stopped there.
    pub violation: Option<Violation>,
    /// Threads that stopped making progress, with what they waited for.
    pub hangs: Vec<Hang>,
    /// The seed, to repeat the run.
    pub seed: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// The run was stopped early (`pglocks_harness::interrupt`, Ctrl-C); its counts are those
    /// of the time it ran, and its end checks ran on the state it stopped in.
    pub interrupted: bool,
    /// On a simulated machine: its episodes, virtual time and preemptions.
    pub simulated: Option<SimulatedReport>,
}

impl StressReport {
    /// No violation and no hang.
    pub fn passed(&self) -> bool {
        self.violation.is_none() && self.hangs.is_empty()
    }
}

/// How far a run has got: what the progress callback of [`stress_with_progress`] is handed
/// at every watchdog tick, ten times a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Time since the threads started.
    pub elapsed: Duration,
    /// How long the run is to last.
    pub duration: Duration,
    /// Steps completed by every thread so far.
    pub steps: u64,
}

/// Why a stress run did not run.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// The request is wrong (exit status 2 on the command line).
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// A valid request that could not be set up (exit status 1 on the command line).
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// A stress request that cannot run as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// Fewer threads than parts.
    #[error("stress needs at least {parts} threads, one per part ({names}); got {threads}")]
    TooFewThreads {
        /// Threads asked for.
        threads: usize,
        /// Parts to run.
        parts: usize,
        /// Their names.
        names: String,
    },
    /// No part of that name.
    #[error("unknown stress part '{name}' (valid: {valid})")]
    UnknownPart {
        /// What was asked for.
        name: String,
        /// The registered names.
        valid: String,
    },
    /// A part named twice.
    #[error("stress part '{0}' is named twice")]
    RepeatedPart(String),
    /// A spinlock that is neither `pg` nor one of [`crate::SPINLOCK_IMPLS`].
    #[error("unknown stress spinlock '{name}' (valid: {valid})")]
    UnknownSpinlock {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// A zero duration or `hang_after`.
    #[error("stress --{0} must be longer than 0")]
    ZeroDuration(&'static str),
    /// A reader-writer lock that is neither `pg` nor one of [`crate::LWLOCK_RW_IMPLS`].
    #[error("unknown stress LWLock '{name}' (valid: {valid})")]
    UnknownLwLock {
        /// What was asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// Both the spinlock and the LWLock replaced.
    #[error("stress replaces the s_lock spinlocks (--spinlock) or the LWLocks (--lwlock), not both at once")]
    BothReplaced,
    /// An episode asked of a run on this machine.
    #[error("a stress episode runs on a simulated machine only")]
    NotSimulated,
}

/// A model refused to build a part from the settings, or a thread could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stress setup failed: {part}: {message}")]
pub struct SetupError {
    /// The part being set up.
    pub part: &'static str,
    /// What failed.
    pub message: String,
}

impl StressConfig {
    /// Checks the request — durations longer than 0, registered part names each named once,
    /// a thread per part at least — and returns the parts it runs, in the registry's order.
    pub fn validate(&self) -> Result<Vec<&'static PartEntry>, UsageError> {
        if self.duration.is_zero() {
            return Err(UsageError::ZeroDuration("duration"));
        }
        if self.hang_after.is_zero() {
            return Err(UsageError::ZeroDuration("hang-after"));
        }
        if self.spinlock != "pg"
            && !crate::SPINLOCK_IMPLS
                .iter()
                .any(|i| i.name == self.spinlock)
        {
            return Err(UsageError::UnknownSpinlock {
                name: self.spinlock.clone(),
                valid: crate::names(
                    std::iter::once("pg").chain(crate::SPINLOCK_IMPLS.iter().map(|i| i.name)),
                ),
            });
        }
        if self.lwlock != "pg" {
            if !crate::LWLOCK_RW_IMPLS.iter().any(|i| i.name == self.lwlock) {
                return Err(UsageError::UnknownLwLock {
                    name: self.lwlock.clone(),
                    valid: crate::names(
                        std::iter::once("pg").chain(crate::LWLOCK_RW_IMPLS.iter().map(|i| i.name)),
                    ),
                });
            }
            if self.spinlock != "pg" {
                return Err(UsageError::BothReplaced);
            }
        }
        let entries = select(&self.parts)?;
        if self.threads < entries.len() {
            return Err(UsageError::TooFewThreads {
                threads: self.threads,
                parts: entries.len(),
                names: entries
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(entries)
    }
}

/// Runs the parts `cfg` asks for at once for `cfg.duration` (see the module doc) and reports
/// what each did, the first violation and any hang.
pub fn stress(cfg: &StressConfig) -> Result<StressReport, StressError> {
    stress_with_progress(cfg, &mut |_| {})
}

/// [`stress`], handing `progress` how far the run has got ten times a second.
pub fn stress_with_progress(
    cfg: &StressConfig,
    progress: &mut dyn FnMut(&Progress),
) -> Result<StressReport, StressError> {
    let entries = cfg.validate()?;
    if let Some(sim) = &cfg.simulated {
        return simulated::run(cfg, sim, &entries, progress);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let parts = build_parts(cfg, &entries, &stop)?;
    Ok(run_parts(cfg, &parts, &stop, progress)?)
}

/// Builds the parts `entries` names for `cfg.threads` threads, dealt out in turn.
fn build_parts(
    cfg: &StressConfig,
    entries: &[&'static PartEntry],
    stop: &Arc<AtomicBool>,
) -> Result<Vec<Running>, SetupError> {
    let mut parts = Vec::with_capacity(entries.len());
    let numa_nodes = crate::numa_nodes(cfg.simulated.as_ref().map(|s| &*s.profile));
    for (p, entry) in entries.iter().enumerate() {
        let threads = (cfg.threads - p).div_ceil(entries.len());
        let setup = Setup {
            settings: &cfg.settings,
            threads,
            stop,
            spinlock: &cfg.spinlock,
            lwlock: &cfg.lwlock,
            numa_nodes,
        };
        let part = (entry.new)(&setup).map_err(|Refused(message)| SetupError {
            part: entry.name,
            message,
        })?;
        parts.push(Running {
            name: entry.name,
            part,
            threads,
        });
    }
    Ok(parts)
}

// ----- what a part is -----------------------------------------------------------------------

/// One mechanism under stress: its shared state, with a `ProcTable` of its own.
pub(crate) trait Part: Send + Sync {
    /// What `Tally::events` counts.
    fn events_name(&self) -> &'static str {
        ""
    }
    /// The backends its threads attach to.
    fn procs(&self) -> &ProcTable;
    /// The step of thread `i` of `n`, with its own random numbers.
    fn step(self: Arc<Self>, i: usize, n: usize, rng: SmallRng) -> Step;
    /// What backend `procno` waits for, for the watchdog.
    fn waiting_for(&self, procno: usize) -> String {
        lwlock_wait(self.procs(), procno)
    }
    /// The end checks, once every thread has stopped; `total` is what the threads counted.
    fn finish(&self, b: &mut Backend, total: &Tally, tally: &mut Tally) -> Result<(), Failure>;
}

/// How a part is built for `setup.threads` threads, on the preset's LWLock `K` and `s_lock`
/// spinlock `R` (picked from the settings, as a run picks them).
pub(crate) trait NewPart {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused>;
}

/// What a part is built from.
pub(crate) struct Setup<'a> {
    /// The preset's settings.
    pub(crate) settings: &'a Settings,
    /// The part's threads.
    pub(crate) threads: usize,
    /// Set when the run stops (for parts whose threads wait for one another).
    pub(crate) stop: &'a Arc<AtomicBool>,
    /// The spinlock in place of every s_lock: `pg` for the release's.
    pub(crate) spinlock: &'a str,
    /// The reader-writer lock in place of every LWLock: `pg` for the release's.
    pub(crate) lwlock: &'a str,
    /// The NUMA nodes of the machine the parts run on.
    pub(crate) numa_nodes: usize,
}

impl Setup<'_> {
    /// A `ProcTable` for the part: a backend per thread and one for the end checks.
    pub(crate) fn procs(&self) -> ProcTable {
        ProcTable::new(self.threads + 1)
    }
}

/// A model's refusal to build a part, in words.
#[derive(Debug)]
pub(crate) struct Refused(pub(crate) String);

impl<E: std::fmt::Display> From<E> for Refused {
    fn from(e: E) -> Self {
        Refused(e.to_string())
    }
}

/// `P` built on the LWLock and spinlock the settings pick: the registry's constructor.
fn on_preset_locks<P: NewPart>(setup: &Setup<'_>) -> Result<Arc<dyn Part>, Refused> {
    struct OnLocks<'s, 'a, P>(&'s Setup<'a>, PhantomData<P>);

    impl<P: NewPart> MakeWithLwLock for OnLocks<'_, '_, P> {
        type Output = Result<Arc<dyn Part>, Refused>;

        fn make<K: RawLwLock>(self) -> Self::Output {
            // The s_lock spinlocks' TAS_SPIN (s_lock.h).
            if self.0.settings.tas_spin {
                P::new_part::<K, PgSpinLock<true>>(self.0)
            } else {
                P::new_part::<K, PgSpinLock<false>>(self.0)
            }
        }
    }

    if setup.spinlock != "pg" {
        return on_spinlock_impl::<P>(setup);
    }
    if setup.lwlock != "pg" {
        return on_rw_lwlock::<P>(setup);
    }
    with_lwlock_type(setup.settings, OnLocks::<P>(setup, PhantomData))
}

/// `P` built on one of [`crate::LWLOCK_RW_IMPLS`] in place of every LWLock, beside the
/// release's s_lock when it reads first (as a run builds them).
fn on_rw_lwlock<P: NewPart>(setup: &Setup<'_>) -> Result<Arc<dyn Part>, Refused> {
    use pglocks_lwlock::{CohortRwLock, FetchAddLwLock, ShflRwLock};
    if !setup.settings.tas_spin {
        return Err(Refused(crate::NotBeside::NoTasSpin.to_string()));
    }
    match setup.lwlock {
        "fetch-add" => P::new_part::<FetchAddLwLock, PgSpinLock<true>>(setup),
        "cohort-rw" => P::new_part::<CohortRwLock, PgSpinLock<true>>(setup),
        _ => P::new_part::<ShflRwLock, PgSpinLock<true>>(setup),
    }
}

/// `P` built on one of [`crate::SPINLOCK_IMPLS`] beside the release's LWLock (9.6's or 18's).
fn on_spinlock_impl<P: NewPart>(setup: &Setup<'_>) -> Result<Arc<dyn Part>, Refused> {
    use crate::preset::LwLockVariant;
    use pglocks_lwlock::{AtomicLwLock, Pg18Layout, Pg96Layout};
    use pglocks_spin::{CnaLock, CohortLock, HmcsLock, QSpinLock, ShflLock};
    fn with<P: NewPart, K: RawLwLock>(setup: &Setup<'_>) -> Result<Arc<dyn Part>, Refused> {
        match setup.spinlock {
            "qspinlock" => P::new_part::<K, QSpinLock>(setup),
            "cna" => P::new_part::<K, CnaLock>(setup),
            "cohort" => P::new_part::<K, CohortLock>(setup),
            "hmcs" => P::new_part::<K, HmcsLock>(setup),
            _ => P::new_part::<K, ShflLock>(setup),
        }
    }
    match crate::spinlock_impl_lwlock(setup.settings)? {
        LwLockVariant::Atomic18 => with::<P, AtomicLwLock<Pg18Layout>>(setup),
        _ => with::<P, AtomicLwLock<Pg96Layout>>(setup),
    }
}

/// A step's failure: an invariant broken, or a primitive's error where none may happen.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(format!("unexpected error: {e}"))
    }
}

/// Fails with `msg` unless `ok`.
pub(crate) fn check(
    tally: &mut Tally,
    ok: bool,
    msg: impl FnOnce() -> String,
) -> Result<(), Failure> {
    tally.checks += 1;
    if ok {
        Ok(())
    } else {
        Err(Failure(msg()))
    }
}

/// A thread's counts.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) ops: u64,
    pub(crate) checks: u64,
    pub(crate) events: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.checks += other.checks;
        self.events += other.events;
    }
}

/// A thread's step: one operation and its checks.
pub(crate) type Step = Box<dyn FnMut(&mut Backend, &mut Tally) -> Result<(), Failure> + Send>;

/// The database of every part's objects (pgbench's, as PostgreSQL numbers a first database).
const DATABASE: u32 = 16_384;

/// The LWLock wait state of backend `procno` (proc.h's `lwWaiting`, `lwWaitMode`).
fn lwlock_wait(procs: &ProcTable, procno: usize) -> String {
    let slot = procs.slot(procno);
    match slot.lw_waiting.load(Relaxed) {
        0 => "running (not in an LWLock queue)".into(),
        w => format!(
            "in an LWLock wait queue (lwWaiting {w}, mode {})",
            slot.lw_wait_mode.load(Relaxed) as u8
        ),
    }
}

/// A counter bumped by a plain load and store, not an atomic add: two holders at once of the
/// lock that guards it lose increments (without undefined behaviour, so a broken lock shows as a
/// wrong count, not as a crash).
#[derive(Default)]
struct RacyCounter(pglocks_sync::atomic::AtomicU64);

impl RacyCounter {
    fn bump(&self) {
        let v = self.0.load(Relaxed);
        self.0.store(v + 1, Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(SeqCst)
    }
}

/// A mutex's guard, poisoned or not (a panicking thread has already failed the run).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ----- the run ------------------------------------------------------------------------------

/// A part built for a run: its registered name, its state and its number of threads.
struct Running {
    name: &'static str,
    part: Arc<dyn Part>,
    threads: usize,
}

/// A started thread, as the watchdog sees it.
struct Thread {
    /// Its part's index in the run.
    part: usize,
    /// Its number within the part.
    i: usize,
    procno: usize,
    /// Steps it has completed, for the watchdog (an idle step counts: the watchdog looks for
    /// threads stuck inside a step).
    steps: Arc<AtomicU64>,
    /// Its counts, once it is back.
    done: Receiver<Tally>,
    tally: Option<Tally>,
    /// Its step count when it last changed, and when.
    last: (u64, Instant),
}

/// Runs `parts` until the deadline (or the first violation or hang), then their end checks.
fn run_parts(
    cfg: &StressConfig,
    parts: &[Running],
    stop: &Arc<AtomicBool>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<StressReport, SetupError> {
    let first: Arc<Mutex<Option<Violation>>> = Arc::default();
    let threads =
        start_threads(cfg, parts, stop, &first).inspect_err(|_| stop.store(true, SeqCst))?;
    let started = Instant::now();
    let (threads, hangs) = watch(cfg, parts, threads, stop, started, progress);
    let tallies: Vec<_> = threads.iter().map(|t| (t.part, t.tally)).collect();
    let mut report = StressReport {
        seed: cfg.seed,
        parts: end_checks(parts, &tallies, hangs.is_empty(), &first),
        hangs,
        ..StressReport::default()
    };
    report.violation = lock(&first).clone();
    report.elapsed = started.elapsed();
    report.interrupted = pglocks_harness::interrupt::stop_requested();
    Ok(report)
}

/// Each part's counts from its threads' tallies (`(part, tally)`, `None` for a thread that did
/// not come back), after its end checks: run when all of its threads are back, nothing hung
/// and nothing has failed; a failed one becomes the run's first violation.
fn end_checks(
    parts: &[Running],
    tallies: &[(usize, Option<Tally>)],
    nothing_hung: bool,
    first: &Mutex<Option<Violation>>,
) -> Vec<PartReport> {
    let mut rows = Vec::with_capacity(parts.len());
    for (p, run) in parts.iter().enumerate() {
        let mine = || tallies.iter().filter(move |t| t.0 == p).map(|t| t.1);
        let mut total = Tally::default();
        for tally in mine().flatten() {
            total.add(&tally);
        }
        let all_back = mine().all(|t| t.is_some());
        if all_back && nothing_hung && lock(first).is_none() {
            let mut end = Tally::default();
            let finished = run
                .part
                .procs()
                .attach()
                .map_err(|e| Failure(e.to_string()))
                .and_then(|mut b| run.part.finish(&mut b, &total, &mut end));
            total.checks += end.checks;
            if let Err(Failure(msg)) = finished {
                lock(first).get_or_insert(Violation {
                    part: run.name,
                    message: format!("at the end: {msg}"),
                    at: None,
                });
            }
        }
        rows.push(PartReport {
            name: run.name,
            threads: run.threads,
            ops: total.ops,
            checks: total.checks,
            events: total.events,
            events_name: run.part.events_name(),
        });
    }
    rows
}

/// Attaches every thread's backend (in order, so that thread `i` of a part is its backend `i`)
/// and starts the threads.
fn start_threads(
    cfg: &StressConfig,
    parts: &[Running],
    stop: &Arc<AtomicBool>,
    first: &Arc<Mutex<Option<Violation>>>,
) -> Result<Vec<Thread>, SetupError> {
    let mut threads = Vec::new();
    for t in prepare_threads(parts, cfg.seed)? {
        let steps = Arc::new(AtomicU64::new(0));
        let (tx, done) = mpsc::channel();
        let procno = t.backend.procno();
        let (name, i) = (parts[t.part].name, t.i);
        let (steps2, stop, first) = (Arc::clone(&steps), Arc::clone(stop), Arc::clone(first));
        let (b, step) = (t.backend, t.step);
        std::thread::Builder::new()
            .name(format!("stress-{name}-{i}"))
            .spawn(move || {
                let _ = tx.send(run_thread(name, b, step, &steps2, &stop, &first));
            })
            .map_err(|e| SetupError {
                part: name,
                message: format!("cannot start thread {i}: {e}"),
            })?;
        threads.push(Thread {
            part: t.part,
            i,
            procno,
            steps,
            done,
            tally: None,
            last: (0, Instant::now()),
        });
    }
    Ok(threads)
}

/// A thread ready to start: its part, its number there, its backend and its step.
struct Prepared {
    part: usize,
    i: usize,
    /// Its number in the order threads are dealt out to the parts (thread `i` of part `p` of
    /// `n` parts is the `i·n + p`-th).
    dealt: usize,
    backend: Backend,
    step: Step,
}

/// Attaches every thread's backend, in order (thread `i` of a part is its backend `i`), and
/// makes its step, with random numbers drawn from `seed` and the thread's number.
fn prepare_threads(parts: &[Running], seed: u64) -> Result<Vec<Prepared>, SetupError> {
    let mut threads = Vec::new();
    for (p, run) in parts.iter().enumerate() {
        let mut backends = Vec::with_capacity(run.threads);
        for i in 0..run.threads {
            let b = run.part.procs().attach().map_err(|e| SetupError {
                part: run.name,
                message: format!("cannot attach the backend of thread {i}: {e}"),
            })?;
            backends.push(b);
        }
        for (i, backend) in backends.into_iter().enumerate() {
            let global = threads.len() as u64;
            let rng = SmallRng::seed_from_u64(seed ^ global.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            threads.push(Prepared {
                part: p,
                i,
                dealt: i * parts.len() + p,
                step: Arc::clone(&run.part).step(i, run.threads, rng),
                backend,
            });
        }
    }
    Ok(threads)
}

/// The watchdog: until the deadline (or the first failure), then until every thread is back
/// (or, after a hang, until `duration + hang_after`). Returns the threads with their counts,
/// and the hangs.
fn watch(
    cfg: &StressConfig,
    parts: &[Running],
    mut threads: Vec<Thread>,
    stop: &AtomicBool,
    started: Instant,
    progress: &mut dyn FnMut(&Progress),
) -> (Vec<Thread>, Vec<Hang>) {
    let mut hangs = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if started.elapsed() >= cfg.duration || pglocks_harness::interrupt::stop_requested() {
            stop.store(true, SeqCst);
        }
        for t in threads.iter_mut().filter(|t| t.tally.is_none()) {
            if let Ok(tally) = t.done.try_recv() {
                t.tally = Some(tally);
                continue;
            }
            let steps = t.steps.load(Relaxed);
            if steps != t.last.0 {
                t.last = (steps, Instant::now());
            } else if t.last.1.elapsed() >= cfg.hang_after {
                let run = &parts[t.part];
                hangs.push(Hang {
                    part: run.name,
                    thread: t.i,
                    procno: t.procno,
                    idle: t.last.1.elapsed(),
                    waiting_for: run.part.waiting_for(t.procno),
                });
                // Reported once.
                t.last.1 = Instant::now() + Duration::from_secs(3600);
                stop.store(true, SeqCst);
            }
        }
        progress(&Progress {
            elapsed: started.elapsed(),
            duration: cfg.duration,
            steps: threads.iter().map(|t| t.steps.load(Relaxed)).sum(),
        });
        let all_back = threads.iter().all(|t| t.tally.is_some());
        if all_back || (!hangs.is_empty() && started.elapsed() > cfg.duration + cfg.hang_after) {
            return (threads, hangs);
        }
    }
}

/// One thread: step until told to stop or a step fails; the first failure of the whole run
/// stops every thread.
fn run_thread(
    part: &'static str,
    mut b: Backend,
    mut step: Step,
    steps: &AtomicU64,
    stop: &AtomicBool,
    first: &Mutex<Option<Violation>>,
) -> Tally {
    let mut tally = Tally::default();
    let mut done = 0;
    while !stop.load(Relaxed) {
        if let Err(Failure(message)) = step(&mut b, &mut tally) {
            let at = pglocks_sim::hook::active().then(pglocks_sim::hook::clock);
            lock(first).get_or_insert(Violation { part, message, at });
            stop.store(true, SeqCst);
            break;
        }
        done += 1;
        steps.store(done, Relaxed);
    }
    tally
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::preset::Preset;

    /// A run of `threads` threads for `ms` milliseconds on `preset`, seed 7, of every part.
    pub(crate) fn config(preset: &str, threads: usize, ms: u64) -> StressConfig {
        StressConfig {
            duration: Duration::from_millis(ms),
            threads,
            settings: Preset::by_name(preset).unwrap().settings(),
            seed: 7,
            hang_after: Duration::from_secs(60),
            parts: Vec::new(),
            simulated: None,
            spinlock: "pg".into(),
            lwlock: "pg".into(),
        }
    }

    /// Runs `part` alone, as part `name`, on `threads` threads.
    pub(crate) fn run_alone(
        cfg: &StressConfig,
        name: &'static str,
        part: Arc<dyn Part>,
        threads: usize,
    ) -> StressReport {
        let run = Running {
            name,
            part,
            threads,
        };
        let stop = Arc::new(AtomicBool::new(false));
        run_parts(cfg, &[run], &stop, &mut |_| {}).unwrap()
    }

    #[test]
    fn the_registry_names_each_part_once_and_builds_each() {
        for (k, entry) in PARTS.iter().enumerate() {
            assert!(
                !PARTS[..k].iter().any(|p| p.name == entry.name),
                "{} registered twice",
                entry.name
            );
        }
        let settings = Preset::by_name("pg18").unwrap().settings();
        let stop = Arc::new(AtomicBool::new(false));
        let setup = Setup {
            settings: &settings,
            threads: 2,
            stop: &stop,
            spinlock: "pg",
            lwlock: "pg",
            numa_nodes: 1,
        };
        for entry in PARTS {
            if let Err(Refused(e)) = (entry.new)(&setup) {
                panic!("{} does not build: {e}", entry.name);
            }
        }
    }

    #[test]
    fn a_short_stress_run_passes_on_old_and_new_releases() {
        for preset in ["pg91", "pg18"] {
            let report = stress(&config(preset, 2 * PARTS.len(), 400)).unwrap();
            assert!(report.passed(), "{preset}: {report:?}");
            let names: Vec<_> = report.parts.iter().map(|p| p.name).collect();
            let registered: Vec<_> = PARTS.iter().map(|p| p.name).collect();
            assert_eq!(names, registered);
            for p in &report.parts {
                assert_eq!(p.threads, 2, "{p:?}");
                assert!(p.ops > 0 && p.checks > 0, "{preset}: {p:?}");
            }
        }
    }

    #[test]
    fn a_short_stress_run_passes_on_each_reader_writer_lock() {
        for lwlock in crate::LWLOCK_RW_IMPLS.iter().map(|i| i.name) {
            let mut cfg = config("pg18", 2 * PARTS.len(), 400);
            cfg.lwlock = lwlock.into();
            let report = stress(&cfg).unwrap();
            assert!(report.passed(), "{lwlock}: {report:?}");
            assert!(
                report.parts.iter().all(|p| p.ops > 0),
                "{lwlock}: {report:?}"
            );
        }
    }

    #[test]
    fn parts_are_picked_by_name_in_the_registry_order() {
        let mut cfg = config("pg18", 3, 200);
        cfg.parts = vec!["lwlock".into(), "spin".into()];
        let report = stress(&cfg).unwrap();
        assert!(report.passed(), "{report:?}");
        let rows: Vec<_> = report.parts.iter().map(|p| (p.name, p.threads)).collect();
        assert_eq!(rows, [("spin", 2), ("lwlock", 1)]);
    }

    #[test]
    fn a_wrong_request_is_a_usage_error() {
        let usage = |cfg: &StressConfig| match stress(cfg) {
            Err(StressError::Usage(e)) => e.to_string(),
            other => panic!("not a usage error: {other:?}"),
        };
        let e = usage(&config("pg18", 3, 10));
        assert!(e.contains("at least 11 threads"), "{e}");
        let mut cfg = config("pg18", 4, 10);
        cfg.parts = vec!["spin".into(), "futex".into()];
        let e = usage(&cfg);
        assert!(
            e.contains("unknown stress part 'futex' (valid: spin, lwlock"),
            "{e}"
        );
        cfg.parts = vec!["spin".into(), "spin".into()];
        assert!(usage(&cfg).contains("'spin' is named twice"));
        cfg.parts = vec!["spin".into()];
        cfg.lwlock = "rwsem".into();
        let e = usage(&cfg);
        assert!(
            e.contains("unknown stress LWLock 'rwsem' (valid: pg, fetch-add, cohort-rw"),
            "{e}"
        );
        cfg.lwlock = "shfl-rw".into();
        cfg.spinlock = "cna".into();
        assert!(usage(&cfg).contains("not both at once"));
        cfg.spinlock = "pg".into();
        cfg.duration = Duration::ZERO;
        assert!(usage(&cfg).contains("--duration must be longer than 0"));
    }

    #[test]
    fn a_model_that_refuses_its_settings_is_a_setup_error() {
        let mut cfg = config("pg18", 1, 10);
        cfg.parts = vec!["xact".into()];
        // 17+ divides the commit log's buffers into banks of 16.
        cfg.settings.apply("clog_buffers=20").unwrap();
        match stress(&cfg) {
            Err(StressError::Setup(e)) => {
                assert_eq!(e.part, "xact");
                assert!(
                    e.to_string().starts_with("stress setup failed: xact: "),
                    "{e}"
                );
            }
            other => panic!("not a setup error: {other:?}"),
        }
    }

    /// A part whose one thread gets stuck.
    struct Stuck(ProcTable);

    impl Part for Stuck {
        fn procs(&self) -> &ProcTable {
            &self.0
        }
        fn step(self: Arc<Self>, _: usize, _: usize, _: SmallRng) -> Step {
            Box::new(|_, t| {
                t.ops += 1;
                std::thread::sleep(Duration::from_secs(3));
                Ok(())
            })
        }
        fn finish(&self, _: &mut Backend, _: &Tally, _: &mut Tally) -> Result<(), Failure> {
            Ok(())
        }
    }

    #[test]
    fn the_watchdog_reports_a_thread_without_progress() {
        let mut cfg = config("pg18", 1, 200);
        cfg.hang_after = Duration::from_millis(300);
        let report = run_alone(&cfg, "stuck", Arc::new(Stuck(ProcTable::new(2))), 1);
        assert_eq!(report.hangs.len(), 1, "{report:?}");
        let hang = &report.hangs[0];
        assert_eq!((hang.part, hang.thread, hang.procno), ("stuck", 0, 0));
        assert!(hang
            .to_string()
            .starts_with("stuck thread 0 (backend 0) made no progress"));
        assert!(!report.passed());
    }
}
