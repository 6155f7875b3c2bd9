//! `pglocks stress`: every primitive and macro workload at once, with invariant checks on, for
//! a soak of minutes on many threads — the way PostgreSQL's own regression and isolation runs
//! earn trust, aimed at the models.
//!
//! The threads are dealt out to *parts*, one per primitive (thread `i` to part `i % parts`),
//! all running together until the deadline. Each part owns its shared state and its backends
//! (a `ProcTable` of its own), and its threads check an invariant at every step:
//! - `spin`: mutual exclusion of `s_lock` (a holder flag that a second holder would find set,
//!   and a counter bumped without atomics under the lock that must equal the increments);
//! - `lwlock`: the preset's LWLock in shared and exclusive mode — no exclusive holder beside
//!   any other holder, the guarded counter exact, and two-lock acquisitions in a fixed order;
//! - `lmgr`: heavyweight relation locks in random modes (fast-path weak ones and strong ones
//!   that transfer them), checked against the conflict table through per-mode holder counts;
//! - `deadlock`: pairs of backends that lock two relations in opposite orders in lockstep, so
//!   every round is a deadlock: exactly one of the two must get "deadlock detected";
//! - `wal`: commits through group commit on a device that records what it made durable: each
//!   commit's LSN is covered by a device flush, and the published flush pointer only moves
//!   forward and is never ahead of the device;
//! - `xact`: transactions through the ProcArray and the commit log, committed or aborted at
//!   random (some with subtransactions): every status read back equals what its transaction
//!   decided, and a snapshot never lists a transaction that had ended before it was taken;
//! - `sinval`: senders number their messages; each receiver sees every sender's messages in
//!   order without a gap, or was reset, and at the end has everything or a reset;
//! - `bufmgr`: reads of more pages than buffers (evictions): a pinned buffer holds the page
//!   asked for;
//! - `select-only` and `tpcb-like`: the macro transactions, which must not fail;
//! - `apply`: small random publications through parallel apply with tiny queues (spills): the
//!   subscriber ends with the publisher's rows and commit order.
//!
//! When every thread has stopped, each part checks its end state: lock tables and fast-path
//! slots empty, every WAL and commit-log LWLock free, no pins left, counters exact, every row's
//! last updater committed. A watchdog
//! on the main thread reports any thread that makes no progress for `hang_after` (a lost
//! wake-up shows as a hang), with what its backend waits for.
//!
//! The first violation stops the run. The seed fixes every thread's random choices (which
//! lock, which mode, commit or abort); the interleaving is the machine's, so a seed makes a
//! failure likely to recur rather than certain.

use crate::lwlock::{with_lwlock_type, MakeWithLwLock};
use crate::preset::Settings;
use pglocks_bufmgr::{BufMgr, BufferTag, PrivateRefCount};
use pglocks_lmgr::{
    LmgrError, LocalLocks, LockManager, LockMode, LockOwner, LockTag, LockTimeouts,
};
use pglocks_lwlock::{LockedVar, LwLockMode, Pad128, RawLwLock};
use pglocks_procarray::{ProcArray, Snapshot};
use pglocks_sinval::{SharedInvalidationMessage, SinvalBackend, SinvalConfig, SinvalQueue};
use pglocks_slru::clog::{Clog, XidStatus};
use pglocks_slru::MemoryStore;
use pglocks_spin::{PgSpinLock, RawSpinLock, SpinLock};
use pglocks_sync::{Backend, CachePadded, ProcTable};
use pglocks_wal::device::{DeviceError, FlushDevice};
use pglocks_wal::{Wal, WalBackend};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a stress run is asked to do.
#[derive(Debug, Clone)]
pub struct StressConfig {
    /// How long the parts run.
    pub duration: Duration,
    /// Threads in all, dealt out to the parts.
    pub threads: usize,
    /// The preset's settings (and any `--set`).
    pub settings: Settings,
    /// Seeds every thread's random choices.
    pub seed: u64,
    /// A thread without progress for this long is reported as hung.
    pub hang_after: Duration,
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

/// The outcome of a stress run.
#[derive(Debug, Clone, Default)]
pub struct StressReport {
    /// One row per part.
    pub parts: Vec<PartReport>,
    /// The first violation (or unexpected error), with its part; the run stopped there.
    pub violation: Option<String>,
    /// Threads that stopped making progress, with what they waited for.
    pub hangs: Vec<String>,
    /// The seed, to repeat the run.
    pub seed: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl StressReport {
    /// No violation and no hang.
    pub fn passed(&self) -> bool {
        self.violation.is_none() && self.hangs.is_empty()
    }
}

/// Why a stress run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
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
    /// A model refused the preset's configuration.
    #[error("cannot set up the stress run: {0}")]
    Setup(String),
}

/// A setup error, in words.
pub(crate) fn setup(e: impl std::fmt::Display) -> StressError {
    StressError::Setup(e.to_string())
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

/// A thread's step: one operation and its checks.
pub(crate) type Step = Box<dyn FnMut(&mut Backend, &mut Tally) -> Result<(), Failure> + Send>;

/// One primitive under stress.
pub(crate) trait Part: Send + Sync {
    fn name(&self) -> &'static str;
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
    /// The end checks, once every thread has stopped.
    fn finish(&self, b: &mut Backend, total: &Tally, tally: &mut Tally) -> Result<(), Failure>;
}

/// The LWLock wait state of backend `procno` (`lwWaiting`, `lwWaitMode`).
fn lwlock_wait(procs: &ProcTable, procno: usize) -> String {
    let slot = procs.slot(procno);
    match slot.lw_waiting.load(Relaxed) {
        0 => "running (not in an LWLock queue)".into(),
        w => format!(
            "in an LWLock wait queue (lwWaiting {w}, mode {})",
            slot.lw_wait_mode.load(Relaxed)
        ),
    }
}

/// What backend `procno` waits for in a lock manager: an LWLock queue, or a lock's queue.
fn lmgr_wait<K: RawLwLock>(procs: &ProcTable, lm: &LockManager<K>, procno: usize) -> String {
    format!(
        "{}; in the lock manager's queue: {}",
        lwlock_wait(procs, procno),
        lm.is_waiting(procno)
    )
}

/// A counter bumped by a plain load and store, not an atomic add: two holders at once of the
/// lock that guards it lose increments (without undefined behaviour, so a broken lock shows as a
/// wrong count, not as a crash).
#[derive(Default)]
struct RacyCounter(AtomicU64);

impl RacyCounter {
    fn bump(&self) {
        let v = self.0.load(Relaxed);
        self.0.store(v + 1, Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(SeqCst)
    }
}

// ----- spin ---------------------------------------------------------------------------------

struct Spin<R: RawSpinLock> {
    procs: ProcTable,
    lock: SpinLock<(), R>,
    holder: AtomicBool,
    counter: RacyCounter,
}

impl<R: RawSpinLock + 'static> Part for Spin<R> {
    fn name(&self) -> &'static str {
        "spin"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, _: SmallRng) -> Step {
        Box::new(move |b, t| {
            let g = self.lock.lock(b)?;
            let alone = !self.holder.swap(true, SeqCst);
            self.counter.bump();
            self.holder.store(false, SeqCst);
            drop(g);
            t.ops += 1;
            check(t, alone, || "two backends held the spinlock at once".into())
        })
    }
    fn finish(&self, _: &mut Backend, total: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let n = self.counter.get();
        check(t, n == total.ops, || {
            format!(
                "spinlock-guarded counter {n} after {} increments",
                total.ops
            )
        })
    }
}

// ----- lwlock -------------------------------------------------------------------------------

/// LWLocks under test; the first one also guards `counter`.
const LWLOCKS: usize = 3;

struct Lw<K: RawLwLock> {
    procs: ProcTable,
    locks: Vec<CachePadded<K>>,
    shared: Vec<AtomicU32>,
    exclusive: Vec<AtomicU32>,
    counter: RacyCounter,
    exclusive_ops: AtomicU64,
}

impl<K: RawLwLock> Lw<K> {
    /// Takes lock `l` in `mode` and checks who else holds it.
    fn enter(
        &self,
        b: &mut Backend,
        t: &mut Tally,
        l: usize,
        mode: LwLockMode,
    ) -> Result<(), Failure> {
        self.locks[l].acquire(b, mode)?;
        let (sh, ex) = match mode {
            LwLockMode::Exclusive => (self.shared[l].load(SeqCst), {
                self.exclusive[l].fetch_add(1, SeqCst) + 1
            }),
            _ => {
                self.shared[l].fetch_add(1, SeqCst);
                (0, self.exclusive[l].load(SeqCst))
            }
        };
        let ok = match mode {
            LwLockMode::Exclusive => sh == 0 && ex == 1,
            _ => ex == 0,
        };
        check(t, ok, || {
            format!("LWLock {l} held in {mode:?} beside {sh} shared and {ex} exclusive holders")
        })
    }

    fn leave(&self, b: &mut Backend, l: usize, mode: LwLockMode) -> Result<(), Failure> {
        match mode {
            LwLockMode::Exclusive => self.exclusive[l].fetch_sub(1, SeqCst),
            _ => self.shared[l].fetch_sub(1, SeqCst),
        };
        self.locks[l].release(b)?;
        Ok(())
    }
}

impl<K: RawLwLock> Part for Lw<K> {
    fn name(&self) -> &'static str {
        "lwlock"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        Box::new(move |b, t| {
            let mode = |rng: &mut SmallRng| {
                if rng.random_ratio(1, 4) {
                    LwLockMode::Exclusive
                } else {
                    LwLockMode::Shared
                }
            };
            // One lock, or two in index order (PostgreSQL's rule against LWLock deadlocks).
            let first = rng.random_range(0..LWLOCKS);
            let (m1, m2) = (mode(&mut rng), mode(&mut rng));
            self.enter(b, t, first, m1)?;
            let second = (first + 1 < LWLOCKS && rng.random_bool(0.3)).then_some(first + 1);
            if let Some(s) = second {
                self.enter(b, t, s, m2)?;
            }
            if first == 0 && m1 == LwLockMode::Exclusive {
                self.counter.bump();
                self.exclusive_ops.fetch_add(1, Relaxed);
            }
            if let Some(s) = second {
                self.leave(b, s, m2)?;
            }
            self.leave(b, first, m1)?;
            t.ops += 1;
            Ok(())
        })
    }
    fn finish(&self, _: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let (n, want) = (self.counter.get(), self.exclusive_ops.load(SeqCst));
        check(t, n == want, || {
            format!("LWLock-guarded counter {n} after {want} exclusive increments")
        })
    }
}

// ----- lmgr ---------------------------------------------------------------------------------

const DATABASE: u32 = 16_384;
/// Relations the `lmgr` part locks.
const RELATIONS: u32 = 4;

/// Lock modes by number (1..=8), for the holder counts.
fn mode_of(n: usize) -> LockMode {
    LockMode::from_number(n as u8).expect("1..=8 are lock modes")
}

struct Lmgr<K: RawLwLock> {
    procs: ProcTable,
    lm: LockManager<K>,
    /// Holders per relation and mode number.
    held: Vec<[AtomicU32; 9]>,
    /// A short deadlock_timeout, so that deadlocks between the random lockers end quickly.
    deadlock_timeouts: LockTimeouts,
}

impl<K: RawLwLock> Lmgr<K> {
    fn new(settings: &Settings, threads: usize) -> Self {
        let mut cfg = settings.lock_manager_config(threads + 1);
        cfg.max_locks_per_transaction = cfg.max_locks_per_transaction.max(16);
        Self {
            procs: ProcTable::new(threads + 1),
            lm: LockManager::new(cfg),
            held: (0..RELATIONS).map(|_| Default::default()).collect(),
            deadlock_timeouts: LockTimeouts {
                deadlock_timeout: Duration::from_millis(50),
                lock_timeout: None,
            },
        }
    }
}

impl<K: RawLwLock> Part for Lmgr<K> {
    fn name(&self) -> &'static str {
        "lmgr"
    }
    fn events_name(&self) -> &'static str {
        "deadlocks"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn waiting_for(&self, procno: usize) -> String {
        lmgr_wait(&self.procs, &self.lm, procno)
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut local: Option<LocalLocks> = None;
        let mut mine: Vec<(usize, usize)> = Vec::new();
        Box::new(move |b, t| {
            let local = match &mut local {
                Some(l) => l,
                None => local.insert(self.lm.connect(b, DATABASE)?),
            };
            self.lm.start_transaction(b, local)?;
            mine.clear();
            for _ in 0..rng.random_range(1..=3) {
                let rel = rng.random_range(0..RELATIONS) as usize;
                // Mostly the weak modes a query takes (fast path from 9.2), now and then a
                // strong one that must move them to the main table.
                let mode = if rng.random_ratio(1, 10) {
                    rng.random_range(4..=8)
                } else {
                    rng.random_range(1..=3)
                };
                let tag = LockTag::relation(DATABASE, 16_384 + rel as u32);
                let owner = LockOwner::Transaction;
                match self
                    .lm
                    .acquire(b, local, tag, mode_of(mode), owner, &self.deadlock_timeouts)
                {
                    Ok(_) => {}
                    Err(LmgrError::Deadlock { .. }) => {
                        t.events += 1;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
                if mine.contains(&(rel, mode)) {
                    continue;
                }
                self.held[rel][mode].fetch_add(1, SeqCst);
                mine.push((rel, mode));
                for (other, count) in self.held[rel].iter().enumerate().skip(1) {
                    if !mode_of(mode).conflicts_with(mode_of(other)) {
                        continue;
                    }
                    let others = count.load(SeqCst)
                        - mine.iter().filter(|&&m| m == (rel, other)).count() as u32;
                    check(t, others == 0, || {
                        format!(
                            "relation {rel}: {:?} granted while {others} other backend(s) hold {:?}",
                            mode_of(mode),
                            mode_of(other)
                        )
                    })?;
                }
            }
            for &(rel, mode) in &mine {
                self.held[rel][mode].fetch_sub(1, SeqCst);
            }
            self.lm.release_all(b, local, false)?;
            t.ops += 1;
            Ok(())
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        lock_tables_empty(&self.lm, b, t)
    }
}

/// The end state of a lock manager: no lock or proclock in the table, no fast-path slot, no
/// strong-lock count.
pub(crate) fn lock_tables_empty<K: RawLwLock>(
    lm: &LockManager<K>,
    b: &mut Backend,
    t: &mut Tally,
) -> Result<(), Failure> {
    let table = lm.entries_in_use();
    check(t, table == (0, 0), || {
        format!("lock table not empty at the end: {table:?} (locks, proclocks)")
    })?;
    let fast = lm.fast_path_in_use(b)?;
    check(t, fast == (0, 0), || {
        format!("fast-path state not empty at the end: {fast:?} (slots, strong counts)")
    })
}

// ----- deadlock -----------------------------------------------------------------------------

/// Pairs of backends that deadlock on purpose, round after round.
struct Deadlock<K: RawLwLock> {
    procs: ProcTable,
    lm: LockManager<K>,
    /// Per pair: arrivals at the round's barriers, and the round's deadlock errors.
    pairs: Vec<Pair>,
    stop: Arc<AtomicBool>,
}

#[derive(Default)]
struct Pair {
    arrived: AtomicU64,
    errors: AtomicU32,
}

impl<K: RawLwLock> Deadlock<K> {
    /// The pair's `k`-th meeting point (counted from 1 by each of the two): waits until both
    /// have arrived (false when the run stops first).
    fn barrier(&self, pair: &Pair, k: &mut u64) -> bool {
        *k += 1;
        pair.arrived.fetch_add(1, SeqCst);
        while pair.arrived.load(SeqCst) < 2 * *k {
            if self.stop.load(Relaxed) {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }
}

impl<K: RawLwLock> Part for Deadlock<K> {
    fn name(&self) -> &'static str {
        "deadlock"
    }
    fn events_name(&self) -> &'static str {
        "deadlocks"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn waiting_for(&self, procno: usize) -> String {
        lmgr_wait(&self.procs, &self.lm, procno)
    }
    fn step(self: Arc<Self>, i: usize, n: usize, _: SmallRng) -> Step {
        let mut local: Option<LocalLocks> = None;
        let mut meetings = 0u64;
        // An odd thread out has no partner: it only keeps the lock manager busy.
        let pair = (i / 2 < n / 2).then_some(i / 2);
        Box::new(move |b, t| {
            let local = match &mut local {
                Some(l) => l,
                None => local.insert(self.lm.connect(b, DATABASE)?),
            };
            let Some(p) = pair else {
                std::thread::sleep(Duration::from_millis(1));
                return Ok(());
            };
            // Each takes its own relation, then (once both hold theirs) the other's.
            let (mine, theirs) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
            let rel = |r: u32| LockTag::relation(DATABASE, 20_000 + 2 * p as u32 + r);
            let timeouts = LockTimeouts {
                deadlock_timeout: Duration::from_millis(20),
                lock_timeout: None,
            };
            let pair = &self.pairs[p];
            let x = LockMode::AccessExclusive;
            let owner = LockOwner::Transaction;
            self.lm.start_transaction(b, local)?;
            self.lm.acquire(b, local, rel(mine), x, owner, &timeouts)?;
            if !self.barrier(pair, &mut meetings) {
                self.lm.release_all(b, local, false)?;
                return Ok(());
            }
            match self.lm.acquire(b, local, rel(theirs), x, owner, &timeouts) {
                Ok(_) => {}
                Err(LmgrError::Deadlock { .. }) => {
                    pair.errors.fetch_add(1, SeqCst);
                    t.events += 1;
                }
                Err(e) => return Err(e.into()),
            }
            self.lm.release_all(b, local, false)?;
            if !self.barrier(pair, &mut meetings) {
                return Ok(());
            }
            t.ops += 1;
            // Both have finished the round: exactly one of them was the victim. The even one
            // checks and resets the count, the odd one waits for that at a third meeting.
            let result = if i % 2 == 0 {
                let errors = pair.errors.swap(0, SeqCst);
                check(t, errors == 1, || {
                    format!(
                        "pair {p}: a deadlock between two backends reported to {errors} of them"
                    )
                })
            } else {
                Ok(())
            };
            self.barrier(pair, &mut meetings);
            result
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        lock_tables_empty(&self.lm, b, t)
    }
}

// ----- wal ----------------------------------------------------------------------------------

/// A flush device that remembers how far it has made WAL durable.
struct Watched {
    inner: Box<dyn FlushDevice>,
    durable: Arc<AtomicU64>,
}

impl FlushDevice for Watched {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn wants_bytes(&self) -> bool {
        self.inner.wants_bytes()
    }
    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write(lsn, data)
    }
    fn flush(&mut self, upto: u64) -> Result<(), DeviceError> {
        self.inner.flush(upto)?;
        self.durable.fetch_max(upto, SeqCst);
        Ok(())
    }
    fn fsync_enabled(&self) -> bool {
        self.inner.fsync_enabled()
    }
}

struct WalPart<K: RawLwLock, R: RawSpinLock> {
    procs: ProcTable,
    wal: Wal<K, LockedVar, R>,
    durable: Arc<AtomicU64>,
    next_xid: AtomicU32,
}

impl<K: RawLwLock, R: RawSpinLock + 'static> Part for WalPart<K, R> {
    fn name(&self) -> &'static str {
        "wal"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, _: SmallRng) -> Step {
        let mut w: WalBackend = self.wal.backend();
        let mut seen_flush = 0;
        let mut last_commit = 0;
        Box::new(move |b, t| {
            let xid = self.next_xid.fetch_add(1, Relaxed);
            let lsn = self.wal.commit(b, &mut w, xid)?;
            t.ops += 1;
            let durable = self.durable.load(SeqCst);
            check(t, durable >= lsn, || {
                format!(
                    "commit at {lsn:#x} returned but the device is durable only to {durable:#x}"
                )
            })?;
            check(t, lsn > last_commit, || {
                format!("a backend's commit LSN went back from {last_commit:#x} to {lsn:#x}")
            })?;
            last_commit = lsn;
            let published = self.wal.write_result(b)?.flush;
            let durable = self.durable.load(SeqCst);
            check(t, published >= seen_flush && published <= durable, || {
                format!(
                    "flush pointer {published:#x} after {seen_flush:#x}, device durable to {durable:#x}"
                )
            })?;
            seen_flush = published;
            Ok(())
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let free = self.wal.locks_free(b)?;
        check(t, free, || "a WAL lock is still held at the end".into())?;
        let r = self.wal.write_result(b)?;
        let durable = self.durable.load(SeqCst);
        check(t, r.flush <= durable && r.flush <= r.write, || {
            format!(
                "at the end: flushed {:#x}, written {:#x}, durable {durable:#x}",
                r.flush, r.write
            )
        })
    }
}

// ----- xact: ProcArray and CLOG ------------------------------------------------------------

/// Recent decisions kept for checking (a ring indexed by xid).
const DECISIONS: usize = 1 << 16;

struct Xact<K: RawLwLock> {
    procs: ProcTable,
    pa: ProcArray<K>,
    clog: Clog<K>,
    /// `xid << 2 | status` of recent top-level xids and subxids.
    decided: Vec<AtomicU64>,
    /// Each backend's last ended xid, published after `ProcArrayEndTransaction` returned.
    ended: Vec<AtomicU32>,
}

impl<K: RawLwLock> Xact<K> {
    fn record(&self, xid: u32, status: XidStatus) {
        let word = u64::from(xid) << 2 | status as u64;
        self.decided[xid as usize % DECISIONS].store(word, Release);
    }
}

impl<K: RawLwLock> Part for Xact<K> {
    fn name(&self) -> &'static str {
        "xact"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut snap = Snapshot::new();
        let mut added = false;
        let mut before: Vec<u32> = Vec::new();
        Box::new(move |b, t| {
            if !added {
                self.pa.add(b, b.procno())?;
                added = true;
            }
            // A transaction: an xid (and subxids), a decision, the commit log, the end.
            let top = self
                .pa
                .assign_xid_extending(b, None, |b, x| self.clog.extend(b, x))?;
            let mut subs = Vec::new();
            let nsubs = if rng.random_ratio(1, 4) {
                rng.random_range(1..=3)
            } else {
                0
            };
            for _ in 0..nsubs {
                let parent = subs.last().copied().unwrap_or(top);
                subs.push(
                    self.pa
                        .assign_xid_extending(b, Some(parent), |b, x| self.clog.extend(b, x))?,
                );
            }
            let status = if rng.random_ratio(3, 4) {
                XidStatus::Committed
            } else {
                XidStatus::Aborted
            };
            self.clog.set_tree_status(b, top, &subs, status, 0)?;
            if status == XidStatus::Committed {
                self.pa.commit_tree(top, &subs)?;
            }
            for &x in std::iter::once(&top).chain(&subs) {
                self.record(x, status);
            }
            let latest = subs.last().copied().unwrap_or(top);
            self.pa.end_transaction(b, latest)?;
            self.ended[b.procno()].store(latest, SeqCst);
            t.ops += 1;
            // A status read back: any recent decision, by any backend.
            let word = self.decided[rng.random_range(0..DECISIONS)].load(Acquire);
            if word != 0 {
                let (xid, want) = ((word >> 2) as u32, XidStatus::from_bits((word & 3) as u8));
                let (got, _) = self.clog.get_status(b, xid)?;
                check(t, got == want, || {
                    format!(
                        "xid {xid} decided {} but the commit log says {}",
                        want.name(),
                        got.name()
                    )
                })?;
            }
            // A snapshot: nothing that had ended before it may be listed as running.
            before.clear();
            before.extend(
                self.ended
                    .iter()
                    .map(|e| e.load(SeqCst))
                    .filter(|&x| x != 0),
            );
            self.pa.get_snapshot_data(b, &mut snap)?;
            let running = |x: &u32| snap.xip.contains(x) || snap.subxip.contains(x);
            let wrong = before.iter().find(|&&x| x >= snap.xmax || running(&x));
            check(t, wrong.is_none(), || {
                format!(
                    "snapshot (xmin {}, xmax {}) lists xid {:?} that had ended before it",
                    snap.xmin, snap.xmax, wrong
                )
            })?;
            check(
                t,
                snap.xip.iter().all(|&x| x >= snap.xmin && x < snap.xmax),
                || format!("snapshot xip outside [{}, {})", snap.xmin, snap.xmax),
            )?;
            self.pa.end_transaction(b, 0)?;
            Ok(())
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let free = self.clog.slru().locks_free(b)?;
        check(t, free, || {
            "a commit-log bank or slot I/O lock is still held at the end".into()
        })?;
        for word in &self.decided {
            let word = word.load(Acquire);
            if word == 0 {
                continue;
            }
            let (xid, want) = ((word >> 2) as u32, XidStatus::from_bits((word & 3) as u8));
            let (got, _) = self.clog.get_status(b, xid)?;
            check(t, got == want, || {
                format!(
                    "at the end: xid {xid} decided {} but the commit log says {}",
                    want.name(),
                    got.name()
                )
            })?;
        }
        Ok(())
    }
}

// ----- sinval -------------------------------------------------------------------------------

struct Sinval<K: RawLwLock, R: RawSpinLock> {
    procs: ProcTable,
    queue: SinvalQueue<K, R>,
    /// The last message number each sender sent.
    sent: Vec<AtomicU32>,
    /// Each thread's queue entry and what it has seen, kept here for the end-of-run check.
    receivers: Vec<Mutex<Option<Receiver>>>,
}

/// What a receiver knows of one sender: the last number seen, and whether a reset came since.
#[derive(Clone, Copy, Default)]
struct Seen {
    last: u32,
    reset_since: bool,
}

/// One thread's queue entry, and what it has seen of each sender.
struct Receiver {
    me: SinvalBackend,
    seen: Vec<Seen>,
}

impl<K: RawLwLock, R: RawSpinLock> Sinval<K, R> {
    /// Receives everything pending for receiver `i`; per sender, the numbers must come in order
    /// without a gap unless a reset came in between (a reset ends a receive, after any
    /// messages it delivered). Returns whether it was reset.
    fn receive(
        &self,
        b: &mut Backend,
        r: &mut Receiver,
        i: usize,
        t: &mut Tally,
    ) -> Result<bool, Failure> {
        let mut broken = None;
        let seen = &mut r.seen;
        let got = self.queue.receive_shared_invalid_messages(
            b,
            &mut r.me,
            |m| {
                let s = &mut seen[m.extra as usize];
                if m.object != s.last + 1 && !s.reset_since && broken.is_none() {
                    broken = Some((m.extra, s.last, m.object));
                }
                *s = Seen {
                    last: m.object,
                    reset_since: false,
                };
            },
            || {},
        )?;
        if got.reset {
            seen.iter_mut().for_each(|s| s.reset_since = true);
        }
        check(t, broken.is_none(), || {
            let (from, last, got) = broken.unwrap_or_default();
            format!("backend {i} got message {got} from sender {from} after {last}: a gap without a reset")
        })?;
        Ok(got.reset)
    }
}

impl<K: RawLwLock, R: RawSpinLock + 'static> Part for Sinval<K, R> {
    fn name(&self) -> &'static str {
        "sinval"
    }
    fn events_name(&self) -> &'static str {
        "resets"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, i: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut seq = 0u32;
        Box::new(move |b, t| {
            let mut slot = lock(&self.receivers[i]);
            let r = match &mut *slot {
                Some(r) => r,
                None => slot.insert(Receiver {
                    me: self.queue.backend_init(b, false)?,
                    // A backend joins at the end of the queue: a sender's first message it
                    // sees may be any.
                    seen: vec![
                        Seen {
                            last: 0,
                            reset_since: true,
                        };
                        self.sent.len()
                    ],
                }),
            };
            if rng.random_ratio(1, 3) {
                let n = rng.random_range(1..=40u32);
                let msgs: Vec<SharedInvalidationMessage> = (1..=n)
                    .map(|k| {
                        let mut m = SharedInvalidationMessage::relcache(DATABASE, seq + k);
                        m.extra = i as u32;
                        m
                    })
                    .collect();
                self.queue.insert_data_entries(b, &msgs)?;
                seq += n;
                self.sent[i].store(seq, SeqCst);
            }
            t.events += u64::from(self.receive(b, r, i, t)?);
            t.ops += 1;
            Ok(())
        })
    }
    /// Once the senders have stopped, every receiver gets the rest: then it has each sender's
    /// last message, or was reset since it last heard from that sender.
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        for (i, slot) in self.receivers.iter().enumerate() {
            let mut slot = lock(slot);
            let Some(r) = slot.as_mut() else { continue };
            self.receive(b, r, i, t)?;
            for (from, seen) in r.seen.iter().enumerate() {
                let sent = self.sent[from].load(SeqCst);
                check(
                    t,
                    sent == 0 || seen.last == sent || seen.reset_since,
                    || {
                        format!("backend {i} ended with message {} of sender {from}, which sent {sent}, and no reset", seen.last)
                    },
                )?;
            }
        }
        Ok(())
    }
}

// ----- bufmgr -------------------------------------------------------------------------------

/// Pages read, against 128 buffers: most reads evict.
const PAGES: u32 = 1024;

struct Buffers<K: RawLwLock> {
    procs: ProcTable,
    bm: BufMgr<K, Pad128>,
}

impl<K: RawLwLock> Part for Buffers<K> {
    fn name(&self) -> &'static str {
        "bufmgr"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut pins = PrivateRefCount::new();
        Box::new(move |b, t| {
            let tag = BufferTag::main(DATABASE, 30_000, rng.random_range(0..PAGES));
            let buffer = self.bm.read_buffer(b, &mut pins, tag)?;
            let info = self.bm.buffer_info(b, buffer.id())?;
            self.bm.release_buffer(b, &mut pins, buffer)?;
            t.ops += 1;
            check(
                t,
                info.tag == Some(tag) && info.valid && info.refcount > 0,
                || {
                    format!(
                        "pinned buffer {} holds {:?} (valid {}, pins {}), not {tag:?}",
                        buffer.id(),
                        info.tag,
                        info.valid,
                        info.refcount
                    )
                },
            )
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        no_pins_left(&self.bm, b, t)
    }
}

/// The end state of a buffer pool: no buffer pinned.
pub(crate) fn no_pins_left<K: RawLwLock, P: pglocks_lwlock::Padding>(
    bm: &BufMgr<K, P>,
    b: &mut Backend,
    t: &mut Tally,
) -> Result<(), Failure> {
    for id in 0..bm.nbuffers() as u32 {
        let pins = bm.buffer_info(b, id)?.refcount;
        check(t, pins == 0, || {
            format!("buffer {id} still has {pins} pins at the end")
        })?;
    }
    Ok(())
}

// ----- building the parts -------------------------------------------------------------------

/// Builds every part on the preset's LWLock type.
struct Build<'a> {
    settings: &'a Settings,
    shares: Vec<usize>,
    stop: Arc<AtomicBool>,
}

/// The parts, in the order threads are dealt out.
pub const PARTS: &[&str] = &[
    "spin",
    "lwlock",
    "lmgr",
    "deadlock",
    "wal",
    "xact",
    "sinval",
    "bufmgr",
    "select-only",
    "tpcb-like",
    "apply",
];

impl MakeWithLwLock for Build<'_> {
    type Output = Result<Vec<Arc<dyn Part>>, StressError>;

    fn make<K: RawLwLock>(self) -> Self::Output {
        if self.settings.tas_spin {
            self.make_with::<K, PgSpinLock<true>>()
        } else {
            self.make_with::<K, PgSpinLock<false>>()
        }
    }
}

impl Build<'_> {
    fn make_with<K: RawLwLock, R: RawSpinLock + 'static>(
        self,
    ) -> Result<Vec<Arc<dyn Part>>, StressError> {
        let s = self.settings;
        let n = |part: usize| self.shares[part];
        let procs = |part: usize| ProcTable::new(n(part) + 1);
        let durable = Arc::new(AtomicU64::new(0));
        let wal_device =
            crate::wal::device(s, s.wal_config(n(4) + 1).segment_size).map_err(setup)?;
        let clog_store = MemoryStore::new(s.slru_latency);
        let mut bufmgr_cfg = s.bufmgr_config();
        bufmgr_cfg.nbuffers = 128;
        let parts: Vec<Arc<dyn Part>> = vec![
            Arc::new(Spin::<R> {
                procs: procs(0),
                lock: SpinLock::new("stress", ()),
                holder: AtomicBool::new(false),
                counter: RacyCounter::default(),
            }),
            Arc::new(Lw::<K> {
                procs: procs(1),
                locks: (0..LWLOCKS)
                    .map(|_| CachePadded::new(K::new("stress")))
                    .collect(),
                shared: (0..LWLOCKS).map(|_| AtomicU32::new(0)).collect(),
                exclusive: (0..LWLOCKS).map(|_| AtomicU32::new(0)).collect(),
                counter: RacyCounter::default(),
                exclusive_ops: AtomicU64::new(0),
            }),
            Arc::new(Lmgr::<K>::new(s, n(2))),
            Arc::new(Deadlock::<K> {
                procs: procs(3),
                lm: LockManager::new(s.lock_manager_config(n(3) + 1)),
                pairs: (0..n(3) / 2 + 1).map(|_| Pair::default()).collect(),
                stop: Arc::clone(&self.stop),
            }),
            Arc::new(WalPart::<K, R> {
                procs: procs(4),
                wal: Wal::new(
                    s.wal_config(n(4) + 1),
                    Box::new(Watched {
                        inner: wal_device,
                        durable: Arc::clone(&durable),
                    }),
                )
                .map_err(setup)?,
                durable,
                next_xid: AtomicU32::new(3),
            }),
            Arc::new(Xact::<K> {
                procs: procs(5),
                pa: ProcArray::new(&s.procarray_config(n(5) + 1)).map_err(setup)?,
                clog: Clog::new(&s.clog_config(n(5) + 1), Box::new(clog_store)).map_err(setup)?,
                decided: (0..DECISIONS).map(|_| AtomicU64::new(0)).collect(),
                ended: (0..n(5) + 1).map(|_| AtomicU32::new(0)).collect(),
            }),
            Arc::new(Sinval::<K, R> {
                procs: procs(6),
                queue: SinvalQueue::new(&SinvalConfig::new(n(6) + 1, s.sinval_check))
                    .map_err(setup)?,
                sent: (0..n(6)).map(|_| AtomicU32::new(0)).collect(),
                receivers: (0..n(6)).map(|_| Mutex::new(None)).collect(),
            }),
            Arc::new(Buffers::<K> {
                procs: procs(7),
                bm: BufMgr::new(&bufmgr_cfg).map_err(setup)?,
            }),
            crate::pgbench::stress_part::<K, R>(s, crate::pgbench::Kind::SelectOnly, n(8))?,
            crate::pgbench::stress_part::<K, R>(s, crate::pgbench::Kind::TpcbLike, n(9))?,
            crate::apply::stress_part::<K>(n(10)),
        ];
        Ok(parts)
    }
}

// ----- the run ------------------------------------------------------------------------------

/// One thread's progress, read by the watchdog: steps completed (an idle step counts: the
/// watchdog looks for threads stuck inside a step), and its backend.
#[derive(Default)]
struct Beat {
    steps: AtomicU64,
    procno: AtomicUsize,
}

/// What a thread hands back: its counts, and its failure if it had one.
type Outcome = (Tally, Option<String>);

/// Runs every part at once for `cfg.duration` (see the module doc) and reports what each did,
/// the first violation and any hang.
pub fn stress(cfg: &StressConfig) -> Result<StressReport, StressError> {
    if cfg.threads < PARTS.len() {
        return Err(StressError::TooFewThreads {
            threads: cfg.threads,
            parts: PARTS.len(),
            names: PARTS.join(", "),
        });
    }
    let shares: Vec<usize> = (0..PARTS.len())
        .map(|p| (cfg.threads - p).div_ceil(PARTS.len()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let parts = with_lwlock_type(
        &cfg.settings,
        Build {
            settings: &cfg.settings,
            shares: shares.clone(),
            stop: Arc::clone(&stop),
        },
    )?;
    run_parts(cfg, &parts, &shares, &stop)
}

/// Runs `parts` with `shares[p]` threads each until the deadline, then their end checks.
fn run_parts(
    cfg: &StressConfig,
    parts: &[Arc<dyn Part>],
    shares: &[usize],
    stop: &Arc<AtomicBool>,
) -> Result<StressReport, StressError> {
    let started = Instant::now();
    let first_failure: Arc<Mutex<Option<String>>> = Arc::default();
    let mut threads = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        for i in 0..shares[p] {
            let global = threads.len();
            let beat = Arc::new(Beat::default());
            let (part, stop, first) = (
                Arc::clone(part),
                Arc::clone(stop),
                Arc::clone(&first_failure),
            );
            let rng = SmallRng::seed_from_u64(
                cfg.seed ^ (global as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            let step = Arc::clone(&part).step(i, shares[p], rng);
            let b2 = Arc::clone(&beat);
            let (tx, rx) = std::sync::mpsc::channel::<Outcome>();
            std::thread::Builder::new()
                .name(format!("stress-{}-{i}", part.name()))
                .spawn(move || {
                    let outcome = run_thread(&*part, step, &b2, &stop, &first);
                    let _ = tx.send(outcome);
                })
                .map_err(setup)?;
            threads.push((p, i, beat, rx));
        }
    }
    // The watchdog: until the deadline (or the first failure), then until every thread is back.
    let mut last: Vec<(u64, Instant)> = threads.iter().map(|_| (0, Instant::now())).collect();
    let mut outcomes: Vec<Option<Outcome>> = threads.iter().map(|_| None).collect();
    let mut hangs = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if started.elapsed() >= cfg.duration {
            stop.store(true, SeqCst);
        }
        for (t, (p, i, beat, rx)) in threads.iter().enumerate() {
            if outcomes[t].is_none() {
                if let Ok(o) = rx.try_recv() {
                    outcomes[t] = Some(o);
                    continue;
                }
            } else {
                continue;
            }
            let steps = beat.steps.load(Relaxed);
            if steps != last[t].0 {
                last[t] = (steps, Instant::now());
            } else if last[t].1.elapsed() >= cfg.hang_after {
                let part = &parts[*p];
                let procno = beat.procno.load(Relaxed);
                hangs.push(format!(
                    "{} thread {i} (backend {procno}) made no progress for {:.1} s: {}",
                    part.name(),
                    last[t].1.elapsed().as_secs_f64(),
                    part.waiting_for(procno)
                ));
                last[t].1 = Instant::now() + Duration::from_secs(3600);
                stop.store(true, SeqCst);
            }
        }
        let back = outcomes.iter().filter(|o| o.is_some()).count();
        if back == threads.len()
            || (!hangs.is_empty() && started.elapsed() > cfg.duration + cfg.hang_after)
        {
            break;
        }
    }
    let mut report = StressReport {
        seed: cfg.seed,
        hangs,
        ..StressReport::default()
    };
    for (p, part) in parts.iter().enumerate() {
        let mut total = Tally::default();
        for (t, _) in threads.iter().enumerate().filter(|(_, th)| th.0 == p) {
            if let Some((tally, _)) = &outcomes[t] {
                total.ops += tally.ops;
                total.checks += tally.checks;
                total.events += tally.events;
            }
        }
        // The end checks, if all of the part's threads are back and nothing failed.
        let all_back = threads
            .iter()
            .enumerate()
            .all(|(t, th)| th.0 != p || outcomes[t].is_some());
        if all_back && report.hangs.is_empty() && lock(&first_failure).is_none() {
            let mut end = Tally::default();
            let finished = part
                .procs()
                .attach()
                .map_err(|e| Failure(e.to_string()))
                .and_then(|mut b| part.finish(&mut b, &total, &mut end));
            total.checks += end.checks;
            if let Err(Failure(msg)) = finished {
                lock(&first_failure).get_or_insert(format!("{}: at the end: {msg}", part.name()));
            }
        }
        report.parts.push(PartReport {
            name: part.name(),
            threads: shares[p],
            ops: total.ops,
            checks: total.checks,
            events: total.events,
            events_name: part.events_name(),
        });
    }
    report.violation = lock(&first_failure).clone();
    report.elapsed = started.elapsed();
    Ok(report)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One thread: attach, step until told to stop or a step fails; the first failure of the whole
/// run stops every thread.
fn run_thread(
    part: &dyn Part,
    mut step: Step,
    beat: &Beat,
    stop: &AtomicBool,
    first: &Mutex<Option<String>>,
) -> Outcome {
    let mut tally = Tally::default();
    let mut b = match part.procs().attach() {
        Ok(b) => b,
        Err(e) => return (tally, Some(e.to_string())),
    };
    beat.procno.store(b.procno(), Relaxed);
    let mut steps = 0;
    while !stop.load(Relaxed) {
        if let Err(Failure(msg)) = step(&mut b, &mut tally) {
            let msg = format!("{}: {msg}", part.name());
            lock(first).get_or_insert_with(|| msg.clone());
            stop.store(true, SeqCst);
            return (tally, Some(msg));
        }
        steps += 1;
        beat.steps.store(steps, Relaxed);
    }
    (tally, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::Preset;
    use pglocks_spin::StuckSpinlock;

    fn config(preset: &str, threads: usize, ms: u64) -> StressConfig {
        StressConfig {
            duration: Duration::from_millis(ms),
            threads,
            settings: Preset::by_name(preset).unwrap().settings(),
            seed: 7,
            hang_after: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_short_stress_run_passes_on_old_and_new_releases() {
        for preset in ["pg91", "pg18"] {
            let report = stress(&config(preset, 2 * PARTS.len(), 400)).unwrap();
            assert!(report.passed(), "{preset}: {report:?}");
            for p in &report.parts {
                assert_eq!(p.threads, 2, "{p:?}");
                assert!(p.ops > 0 && p.checks > 0, "{preset}: {p:?}");
            }
            let deadlocks = report.parts.iter().find(|p| p.name == "deadlock").unwrap();
            // One victim per round (the last round may be cut short after its deadlock).
            let rounds = deadlocks.ops / 2;
            assert!(
                (rounds..=rounds + 1).contains(&deadlocks.events),
                "{deadlocks:?}"
            );
        }
    }

    #[test]
    fn too_few_threads_is_refused() {
        let e = stress(&config("pg18", 3, 10)).unwrap_err().to_string();
        assert!(e.contains("at least 11 threads"), "{e}");
    }

    /// A "spinlock" that lets everyone in.
    struct NoLock;

    // SAFETY: deliberately broken, used only to see the stress checks catch it; what it
    // guards in these tests is atomics only.
    unsafe impl RawSpinLock for NoLock {
        const NAME: &'static str = "nolock";
        fn new() -> Self {
            NoLock
        }
        fn lock(&self, _: &mut Backend) -> Result<(), StuckSpinlock> {
            Ok(())
        }
        fn try_lock(&self) -> bool {
            true
        }
        unsafe fn unlock(&self) {}
    }

    #[test]
    fn a_lock_without_mutual_exclusion_is_caught() {
        let part: Arc<dyn Part> = Arc::new(Spin::<NoLock> {
            procs: ProcTable::new(5),
            lock: SpinLock::new("broken", ()),
            holder: AtomicBool::new(false),
            counter: RacyCounter::default(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let report = run_parts(&config("pg18", 4, 2_000), &[part], &[4], &stop).unwrap();
        let v = report.violation.expect("two holders at once are seen");
        assert!(v.starts_with("spin: "), "{v}");
    }

    /// A part whose one thread gets stuck.
    struct Stuck(ProcTable);

    impl Part for Stuck {
        fn name(&self) -> &'static str {
            "stuck"
        }
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
        let part: Arc<dyn Part> = Arc::new(Stuck(ProcTable::new(2)));
        let stop = Arc::new(AtomicBool::new(false));
        let report = run_parts(&cfg, &[part], &[1], &stop).unwrap();
        assert_eq!(report.hangs.len(), 1, "{report:?}");
        assert!(
            report.hangs[0].contains("stuck thread 0"),
            "{:?}",
            report.hangs
        );
        assert!(!report.passed());
    }
}
