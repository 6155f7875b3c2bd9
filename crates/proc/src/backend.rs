//! The explicit stand-ins for PostgreSQL's `ProcGlobal` (the shared array of `PGPROC`s) and
//! `MyProc` (the calling backend's entry).
//!
//! PostgreSQL finds the current backend through the global `MyProc`; pglocks passes a [`Backend`]
//! handle to every call that PostgreSQL makes on behalf of `MyProc`, so that one OS thread can play
//! one backend and a test can play several. The handle owns what is private to the backend (its
//! spin estimate, its statistics, its random-number state) and points at its shared [`ProcSlot`],
//! which holds what other backends touch: the semaphore they unlock to wake it, its latch, and its
//! LWLock wait state — `lwWaiting`, `lwWaitMode` and the `lwWaitLink` node by which
//! pglocks-lwlock's LWLocks (PostgreSQL's of every release, and the hand-off lock) queue the
//! backend on a lock's wait list (a [`ProcList`](crate::proclist_types::ProcList), also of this
//! crate).
//!
//! Subsystems above this crate keep their other `PGPROC` fields (the lock manager's fast-path
//! slots and lock-wait state, for example) in arrays of their own indexed by
//! [`Backend::procno`], rather than growing one struct here: that keeps the dependency direction
//! of the workspace one way.
//!
//! Differences from PostgreSQL: `InitProcess` pops a free `PGPROC` from a free list under a
//! spinlock; [`ProcTable::attach`] claims the first free slot with one compare-exchange per slot,
//! since attaching is never on a measured path.

use crate::latch::Latch;
use crate::proclist_types::ProcListNode;
use crate::qnode::{QueueNodes, DEFAULT_QUEUE_SLOTS};
use crate::spin_delay::{SpinDelayConfig, SpinTuning};
use crate::stats::BackendStats;
use pglocks_sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use pglocks_sync::sync::Arc;
use pglocks_sync::{CachePadded, Semaphore};
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// The shared part of one backend's `PGPROC` (proc.h).
#[derive(Debug)]
pub struct ProcSlot {
    /// The backend's `sem`: it sleeps here whenever a lock makes it wait.
    pub sem: Semaphore,
    /// `procLatch`: set to wake the backend from a latch wait (shm_mq, parallel apply).
    pub latch: Latch,
    /// `lwWaiting`: whether the backend waits on an LWLock (`LW_WS_NOT_WAITING`,
    /// `LW_WS_WAITING`, `LW_WS_PENDING_WAKEUP`; written by pglocks-lwlock).
    pub lw_waiting: AtomicU8,
    /// `lwWaitMode`: the mode it waits for.
    pub lw_wait_mode: AtomicLwLockMode,
    /// `lwWaitLink`: the backend's links on an LWLock's wait queue (a
    /// [`ProcList`](crate::proclist_types::ProcList)).
    pub lw_wait_link: ProcListNode,
    /// `cvWaitLink`: the backend's links on a condition variable's wait list (written by
    /// pglocks-condvar).
    pub cv_wait_link: ProcListNode,
    in_use: AtomicBool,
}

/// Models `ProcGlobal` (proc.h): the fixed array of backend slots, sized at start-up as
/// PostgreSQL sizes it from `max_connections`, plus the shared `spins_per_delay` estimate.
///
/// A cheap handle: clones share one table, as every backend shares `ProcGlobal`.
#[derive(Debug, Clone)]
pub struct ProcTable {
    inner: Arc<ProcGlobal>,
}

#[derive(Debug)]
struct ProcGlobal {
    /// The slots' place in a simulated machine's shared-memory map (`ProcGlobal->allProcs`),
    /// and `spins_per_delay`'s (on a line of its own: the rest of `PROC_HDR` is the other
    /// crates' to place, and is placed beside its users). (First: fields drop in declaration
    /// order, and the map must forget this memory before it is freed.)
    _placed: [pglocks_sync::shmem::Placed; 2],
    slots: Box<[CachePadded<ProcSlot>]>,
    /// `ProcGlobal->spins_per_delay`: where new backends start their spin estimate.
    shared_spins_per_delay: Box<AtomicU32>,
    spin_config: SpinDelayConfig,
    /// Whether backends count `LWLOCK_STATS` acquisitions (PostgreSQL's is a build option).
    lwlock_stats: AtomicBool,
    /// The queue locks' nodes, made when first asked for.
    queue_nodes: std::sync::OnceLock<QueueNodes>,
}

/// `MAX_BACKENDS` (postmaster.h from 9.5, procnumber.h's `(1 << MAX_BACKENDS_BITS) - 1` in 18):
/// the most backends PostgreSQL can be configured for, 2^18 − 1 (guc.c's 2^23 − 1 before 9.5).
/// The 9.5+ LWLock state word keeps its shared-holder count in the bits below
/// `LW_VAL_EXCLUSIVE` and relies on this bound, so a [`ProcTable`] is never larger.
pub const MAX_BACKENDS: usize = (1 << 18) - 1;

/// Errors of sizing or attaching to the [`ProcTable`], in PostgreSQL's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    /// Every slot is attached (`InitProcess` when the free list is empty).
    #[error("sorry, too many clients already (all {max} backend slots are in use)")]
    TooManyClients {
        /// The table's size.
        max: usize,
    },
    /// A table of more than [`MAX_BACKENDS`] slots: `InitializeMaxBackends` in postinit.c, in
    /// 18's words (commit 0b1fe1413e; 9.3–17 said "too many backends configured").
    #[error("too many server processes configured ({requested} backends, at most {max})")]
    TooManyBackends {
        /// The size asked for.
        requested: usize,
        /// [`MAX_BACKENDS`].
        max: usize,
    },
}

impl ProcTable {
    /// A table of `max_backends` slots with PostgreSQL's spin-delay constants.
    ///
    /// # Panics
    /// If `max_backends` exceeds [`MAX_BACKENDS`]; [`ProcTable::try_new`] returns the error.
    pub fn new(max_backends: usize) -> Self {
        Self::with_spin_config(max_backends, SpinDelayConfig::default())
    }

    /// A table whose backends use `config` for s_lock's delay loop (tests shorten it).
    ///
    /// # Panics
    /// If `max_backends` exceeds [`MAX_BACKENDS`]; [`ProcTable::try_with_spin_config`] returns
    /// the error.
    pub fn with_spin_config(max_backends: usize, config: SpinDelayConfig) -> Self {
        match Self::try_with_spin_config(max_backends, config) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`ProcTable::new`], refusing more than [`MAX_BACKENDS`] slots with
    /// [`ProcError::TooManyBackends`] (models the check of `InitializeMaxBackends`).
    pub fn try_new(max_backends: usize) -> Result<Self, ProcError> {
        Self::try_with_spin_config(max_backends, SpinDelayConfig::default())
    }

    /// [`ProcTable::with_spin_config`], refusing more than [`MAX_BACKENDS`] slots.
    pub fn try_with_spin_config(
        max_backends: usize,
        config: SpinDelayConfig,
    ) -> Result<Self, ProcError> {
        if max_backends > MAX_BACKENDS {
            return Err(ProcError::TooManyBackends {
                requested: max_backends,
                max: MAX_BACKENDS,
            });
        }
        let slots: Box<[CachePadded<ProcSlot>]> = (0..max_backends)
            .map(|_| {
                CachePadded::new(ProcSlot {
                    sem: Semaphore::new(0),
                    latch: Latch::default(),
                    lw_waiting: AtomicU8::new(0),
                    lw_wait_mode: AtomicLwLockMode::default(),
                    lw_wait_link: ProcListNode::default(),
                    cv_wait_link: ProcListNode::default(),
                    in_use: AtomicBool::new(false),
                })
            })
            .collect();
        let placed = pglocks_sync::shmem::Placed::slice("PGPROC", &slots);
        let spins = Box::new(AtomicU32::new(config.default_spins_per_delay));
        let placed_spins = pglocks_sync::shmem::Placed::one("ProcGlobal->spins_per_delay", &*spins);
        Ok(Self {
            inner: Arc::new(ProcGlobal {
                slots,
                _placed: [placed, placed_spins],
                shared_spins_per_delay: spins,
                spin_config: config,
                lwlock_stats: AtomicBool::new(false),
                queue_nodes: std::sync::OnceLock::new(),
            }),
        })
    }

    /// The backends' queue nodes, `DEFAULT_QUEUE_SLOTS` per backend unless
    /// [`ProcTable::with_queue_slots`] chose first; made (and placed in a simulated machine's
    /// map) on the first call.
    #[inline]
    pub fn queue_nodes(&self) -> &QueueNodes {
        self.inner
            .queue_nodes
            .get_or_init(|| QueueNodes::new(self.len(), DEFAULT_QUEUE_SLOTS))
    }

    /// Makes the queue nodes now, `slots` per backend (a loom model's two), if no backend has
    /// asked for them yet.
    pub fn with_queue_slots(self, slots: usize) -> Self {
        let _ = self
            .inner
            .queue_nodes
            .set(QueueNodes::new(self.len(), slots));
        self
    }

    /// `SetLatch(&proc->procLatch)` of backend `procno`.
    #[inline]
    pub fn set_latch(&self, procno: usize) {
        let slot = self.slot(procno);
        slot.latch.set(&slot.sem);
    }

    /// Number of slots (`MaxBackends`).
    pub fn len(&self) -> usize {
        self.inner.slots.len()
    }

    /// Whether the table has no slots at all.
    pub fn is_empty(&self) -> bool {
        self.inner.slots.is_empty()
    }

    /// The slot of backend `procno` (what `GetPGProcByNumber` returns).
    ///
    /// # Panics
    /// If `procno` is out of range: a proc number only comes from [`Backend::procno`] (or a
    /// [`ProcList`](crate::proclist_types::ProcList) built from them).
    pub fn slot(&self, procno: usize) -> &ProcSlot {
        &self.inner.slots[procno]
    }

    /// The current shared spin estimate (`ProcGlobal->spins_per_delay`).
    pub fn shared_spins_per_delay(&self) -> u32 {
        self.inner.shared_spins_per_delay.load(Ordering::Relaxed)
    }

    /// Switches `LWLOCK_STATS` counting on or off for backends attached from now on (as
    /// building PostgreSQL with or without it).
    pub fn set_lwlock_stats(&self, on: bool) {
        self.inner.lwlock_stats.store(on, Ordering::Relaxed);
    }

    /// Models `InitProcess` (proc.c): claims a free slot and returns the backend's handle, whose
    /// spin estimate starts from the shared one (`set_spins_per_delay`).
    pub fn attach(&self) -> Result<Backend, ProcError> {
        let procno = self
            .inner
            .slots
            .iter()
            .position(|s| {
                s.in_use
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(ProcError::TooManyClients {
                max: self.inner.slots.len(),
            })?;
        let mut stats = BackendStats::default();
        stats
            .lwlock
            .set_enabled(self.inner.lwlock_stats.load(Ordering::Relaxed));
        Ok(Backend {
            procno,
            procs: self.clone(),
            spin: SpinTuning::starting_from(self.shared_spins_per_delay(), self.inner.spin_config),
            stats,
            held_lwlocks: HeldLwLocks::default(),
            rng: SmallRng::seed_from_u64(0x5eed_0000 + procno as u64),
            numa_node: pglocks_sync::cpu::numa_node(),
            numa_nodes: pglocks_sync::cpu::numa_nodes(),
        })
    }
}

/// One backend: the handle PostgreSQL calls `MyProc`, passed explicitly.
///
/// Dropping it models `ProcKill` (proc.c): the backend's spin estimate is blended into the shared
/// one (`update_spins_per_delay`) and its slot becomes free.
#[derive(Debug)]
pub struct Backend {
    procno: usize,
    procs: ProcTable,
    /// s_lock.c's per-backend `spins_per_delay` and the delay constants.
    pub spin: SpinTuning,
    /// What this backend counted; merged by the harness after a run.
    pub stats: BackendStats,
    /// lwlock.c's `held_lwlocks[]` (kept by pglocks-lwlock).
    pub held_lwlocks: HeldLwLocks,
    /// The backend's random-number state (PostgreSQL's `pg_global_prng_state`), seeded from its
    /// proc number so that runs, and loom executions, are reproducible.
    pub rng: SmallRng,
    /// The NUMA node the backend runs on, as the NUMA-aware locks group their waiters by.
    numa_node: usize,
    /// The machine's NUMA nodes.
    numa_nodes: usize,
}

impl Backend {
    /// The NUMA node the backend runs on: the machine's answer when it attached (the node of
    /// the CPU the harness pinned it to; on a simulated machine the profile's node of its CPU),
    /// or what [`Backend::set_numa_node`] set. A backend that is not pinned and migrates keeps
    /// the node it attached on (Linux's CNA asks again at every slow path).
    #[inline]
    pub fn numa_node(&self) -> usize {
        self.numa_node
    }

    /// The machine's NUMA nodes, as it reported them when the backend attached (the profile's,
    /// on a simulated machine), or as [`Backend::set_numa_node`] set them; at least 1.
    #[inline]
    pub fn numa_nodes(&self) -> usize {
        self.numa_nodes
    }

    /// Places the backend on node `node` of a machine of `nodes` nodes, for what
    /// [`Backend::numa_node`] and [`Backend::numa_nodes`] report: how a test (a loom model of
    /// two nodes of two threads) places backends on nodes of its choosing.
    pub fn set_numa_node(&mut self, node: usize, nodes: usize) {
        self.numa_nodes = nodes.max(node + 1);
        self.numa_node = node;
    }

    /// The backend's proc number (`MyProcNumber`), its index in the [`ProcTable`].
    #[inline]
    pub fn procno(&self) -> usize {
        self.procno
    }

    /// The table this backend belongs to.
    #[inline]
    pub fn procs(&self) -> &ProcTable {
        &self.procs
    }

    /// The backend's own semaphore (`MyProc->sem`).
    #[inline]
    pub fn semaphore(&self) -> &Semaphore {
        &self.procs.slot(self.procno).sem
    }

    /// `WaitLatch` on the backend's own latch: `true` once it is set, `false` if `deadline`
    /// came first (`None`: no timeout). The caller resets it ([`Backend::reset_latch`]) and
    /// looks again at what it waits for.
    pub fn wait_latch(&self, deadline: Option<pglocks_sync::time::Instant>) -> bool {
        let slot = self.procs.slot(self.procno);
        slot.latch.wait(&slot.sem, deadline)
    }

    /// A sleep of `d` (`pg_usleep`, or a device's or client's time modelled as one), counted
    /// as wait event `event` of type `kind` for as long as it took.
    pub fn sleep_as_wait(
        &mut self,
        d: pglocks_sync::time::Duration,
        event: &'static str,
        kind: &'static str,
    ) {
        let start = pglocks_sync::time::Instant::now();
        pglocks_sync::time::sleep(d);
        let waited = start.elapsed().as_nanos() as u64;
        self.stats.waits.record(event, kind, waited);
    }

    /// The wait of PostgreSQL's latch loops: `WaitLatch` until the latch is set or `timeout`
    /// has passed (`None`: no timeout), `ResetLatch` if it was set, and the time counted as
    /// wait event `event`. Returns whether the latch was set.
    pub fn wait_latch_event(
        &mut self,
        timeout: Option<pglocks_sync::time::Duration>,
        event: &'static str,
    ) -> bool {
        let start = pglocks_sync::time::Instant::now();
        let set = self.wait_latch(timeout.map(|t| start + t));
        if set {
            self.reset_latch();
        }
        let waited = start.elapsed().as_nanos() as u64;
        self.stats.waits.record(event, "latch", waited);
        set
    }

    /// `ResetLatch(MyLatch)`.
    #[inline]
    pub fn reset_latch(&self) {
        self.procs.slot(self.procno).latch.reset();
    }

    /// Sleeps on the backend's semaphore until `done()` holds: the loop of a group member
    /// (`ProcArrayGroupClearXid` in procarray.c, `TransactionGroupUpdateXidStatus` in clog.c)
    /// around `PGSemaphoreLock`. A wake-up meant for something else that arrives first is
    /// absorbed and, once `done()` holds, posted again (their `extraWaits`), so none is lost.
    #[cold]
    pub fn sleep_until(&self, done: impl Fn() -> bool) {
        let sem = self.semaphore();
        let mut absorbed = 0;
        loop {
            sem.lock();
            if done() {
                break;
            }
            absorbed += 1;
        }
        for _ in 0..absorbed {
            sem.unlock();
        }
    }

    /// The end of a group leader's work (`ProcArrayGroupClearXid`, `TransactionGroupUpdateXidStatus`):
    /// walks the list it detached, from proc number `head` to `u32::MAX`, where `links(procno)`
    /// is that member's `next` link and `member` flag. Each member's link is reset, its flag
    /// cleared with release ordering (PostgreSQL's write barrier, so the member sees what the
    /// leader did for it) and its semaphore posted, except the leader's own.
    #[cold]
    pub fn wake_group<'m>(
        &self,
        head: u32,
        links: impl Fn(usize) -> (&'m AtomicU32, &'m AtomicBool),
    ) {
        let mut at = head;
        while at != u32::MAX {
            let (next_link, member) = links(at as usize);
            let next = next_link.load(Ordering::Relaxed);
            next_link.store(u32::MAX, Ordering::Relaxed);
            member.store(false, Ordering::Release);
            if at as usize != self.procno {
                self.procs.slot(at as usize).sem.unlock();
            }
            at = next;
        }
    }

    /// Takes the statistics counted so far, leaving zeroes (and counting as before).
    pub fn take_stats(&mut self) -> BackendStats {
        let mut fresh = BackendStats::default();
        fresh.lwlock.set_enabled(self.stats.lwlock.enabled());
        std::mem::replace(&mut self.stats, fresh)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let shared = &self.procs.inner.shared_spins_per_delay;
        let blended = self.spin.blend_into_shared(shared.load(Ordering::Relaxed));
        shared.store(blended, Ordering::Relaxed);
        self.procs
            .slot(self.procno)
            .in_use
            .store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn attach_claims_distinct_slots_until_full() {
        let t = ProcTable::new(2);
        let a = t.attach().unwrap();
        let b = t.attach().unwrap();
        assert_ne!(a.procno(), b.procno());
        let err = t.attach().unwrap_err();
        assert_eq!(err, ProcError::TooManyClients { max: 2 });
        assert!(err.to_string().contains("too many clients"));
        drop(a);
        assert_eq!(t.attach().unwrap().procno(), 0);
    }

    #[test]
    fn held_lwlocks_keep_order_and_capacity() {
        let mut h = HeldLwLocks::default();
        use LwLockMode::*;
        let mode = |i: usize| [Exclusive, Shared, WaitUntilFree][i % 3];
        for i in 0..HELD_LWLOCKS_CAPACITY {
            assert!(h.push(i, mode(i)));
        }
        assert!(!h.push(999, Exclusive));
        assert_eq!(h.remove(5), Some(WaitUntilFree));
        assert_eq!(h.len(), HELD_LWLOCKS_CAPACITY - 1);
        assert_eq!(h.get(5), (6, Exclusive));
        assert_eq!(h.iter().next(), Some((0, Exclusive)));
        assert_eq!(h.pop(), Some((199, Shared)));
        assert_eq!(h.last(), Some((198, Exclusive)));
        assert_eq!(h.remove(12345), None);
    }

    #[test]
    fn every_mode_comes_back_exactly() {
        use LwLockMode::*;
        let top = (1usize << 62) - 1;
        let mut h = HeldLwLocks::default();
        for (lock, mode) in [
            (0, Exclusive),
            (top, Shared),
            (7, WaitUntilFree),
            (top, Exclusive),
        ] {
            assert!(h.push(lock, mode));
            assert_eq!(h.last(), Some((lock, mode)));
        }
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            [
                (0, Exclusive),
                (top, Shared),
                (7, WaitUntilFree),
                (top, Exclusive)
            ]
        );
        let slot = AtomicLwLockMode::default();
        assert_eq!(slot.load(Ordering::Relaxed), Exclusive);
        for mode in [Shared, WaitUntilFree, Exclusive] {
            slot.store(mode, Ordering::Relaxed);
            assert_eq!(slot.load(Ordering::Relaxed), mode);
        }
    }

    #[test]
    fn exit_blends_estimate_fifteen_to_one() {
        let t = ProcTable::new(1);
        let mut b = t.attach().unwrap();
        assert_eq!(b.spin.spins_per_delay, 100);
        b.spin.spins_per_delay = 1000;
        drop(b);
        // (100 * 15 + 1000) / 16 = 156
        assert_eq!(t.shared_spins_per_delay(), 156);
        assert_eq!(t.attach().unwrap().spin.spins_per_delay, 156);
    }

    #[test]
    fn take_stats_returns_and_resets_every_counter() {
        let t = ProcTable::new(1);
        let mut b = t.attach().unwrap();
        b.stats.lwlock.set_enabled(true);
        b.stats.events.count("wal.flushes", 2);
        b.stats.events.sample("wal.commits_per_flush", 3);
        b.stats.waits.record("SpinDelay", "sleep", 10);
        let taken = b.take_stats();
        assert_eq!(taken.events.counters(), vec![("wal.flushes", 2)]);
        assert_eq!(taken.events.distributions().len(), 1);
        assert_eq!(taken.waits.entries().len(), 1);
        assert!(b.stats.events.is_empty());
        assert!(b.stats.waits.entries().is_empty());
        assert!(b.stats.lwlock.enabled(), "counting stays on");
    }
}

/// How many LWLocks one backend can hold at once: the room in [`HeldLwLocks`] (lwlock.h's
/// `MAX_SIMUL_LWLOCKS` of 9.5+; older releases' limit of 100 is checked by their models).
pub const HELD_LWLOCKS_CAPACITY: usize = 200;

/// Models lwlock.c's `held_lwlocks[]` and `num_held_lwlocks`: the LWLocks a backend holds,
/// oldest first, each as the lock's address and the mode it was taken in. A fixed array, as in
/// PostgreSQL, so that recording a lock on the uncontended path is one store and an increment:
/// an entry is one word, the address shifted left by two with the mode in the low bits
/// (addresses fit: user-space pointers use far fewer than 62 bits).
#[derive(Debug, Clone)]
pub struct HeldLwLocks {
    n: usize,
    entries: [usize; HELD_LWLOCKS_CAPACITY],
}

impl Default for HeldLwLocks {
    fn default() -> Self {
        Self {
            n: 0,
            entries: [0; HELD_LWLOCKS_CAPACITY],
        }
    }
}

#[inline(always)]
fn entry(lock: usize, mode: LwLockMode) -> usize {
    debug_assert!(lock < 1 << 62);
    (lock << 2) | mode as usize
}

#[inline(always)]
fn unpack(e: usize) -> (usize, LwLockMode) {
    (e >> 2, LwLockMode::from_bits((e & 3) as u8))
}

impl HeldLwLocks {
    /// Number of locks held.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no lock is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Held lock number `i` (0 = oldest): its address and mode.
    ///
    /// # Panics
    /// If `i` is not below [`Self::len`].
    #[inline(always)]
    pub fn get(&self, i: usize) -> (usize, LwLockMode) {
        unpack(self.entries[..self.n][i])
    }

    /// The held locks, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (usize, LwLockMode)> + '_ {
        self.entries[..self.n].iter().map(|&e| unpack(e))
    }

    /// Records a lock taken in `mode`; `false` (and nothing recorded) when the array is full.
    #[inline(always)]
    pub fn push(&mut self, lock: usize, mode: LwLockMode) -> bool {
        match self.entries.get_mut(self.n) {
            Some(e) => {
                *e = entry(lock, mode);
                self.n += 1;
                true
            }
            None => false,
        }
    }

    /// The newest entry.
    #[inline(always)]
    pub fn last(&self) -> Option<(usize, LwLockMode)> {
        self.n.checked_sub(1).map(|i| unpack(self.entries[i]))
    }

    /// Removes the newest entry.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(usize, LwLockMode)> {
        let e = self.last()?;
        self.n -= 1;
        Some(e)
    }

    /// Removes the newest entry for `lock`, keeping the order of the others (`LWLockRelease`'s
    /// search from the end and shift down). Returns its mode.
    pub fn remove(&mut self, lock: usize) -> Option<LwLockMode> {
        let pos = self.entries[..self.n]
            .iter()
            .rposition(|&e| unpack(e).0 == lock)?;
        let mode = unpack(self.entries[pos]).1;
        self.entries.copy_within(pos + 1..self.n, pos);
        self.n -= 1;
        Some(mode)
    }
}

/// Models lwlock.h's `LWLockMode`: how a backend holds an LWLock, or waits for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LwLockMode {
    /// `LW_EXCLUSIVE`.
    Exclusive = 0,
    /// `LW_SHARED`.
    Shared = 1,
    /// `LW_WAIT_UNTIL_FREE`: wait until the lock is free, without taking it (only as a waiter,
    /// from `LWLockAcquireOrWait` and `LWLockWaitForVar`).
    WaitUntilFree = 2,
}

impl LwLockMode {
    /// The mode as reports name it.
    pub fn name(self) -> &'static str {
        match self {
            LwLockMode::Exclusive => "exclusive",
            LwLockMode::Shared => "shared",
            LwLockMode::WaitUntilFree => "wait-until-free",
        }
    }

    /// The mode whose discriminant is `bits`. Only this module packs modes (a
    /// [`HeldLwLocks`] entry's low bits, an [`AtomicLwLockMode`]), always from an
    /// `LwLockMode`, so every value it unpacks is one of the three.
    #[inline(always)]
    fn from_bits(bits: u8) -> Self {
        match bits {
            0 => LwLockMode::Exclusive,
            1 => LwLockMode::Shared,
            2 => LwLockMode::WaitUntilFree,
            _ => unreachable!("an LWLock mode is only ever packed from an LwLockMode"),
        }
    }
}

/// A shared [`LwLockMode`] (`PGPROC.lwWaitMode`): written by the waiting backend, read by the
/// backend that wakes it, under the lock's wait-list lock; a byte of the shim's atomics.
#[derive(Debug)]
pub struct AtomicLwLockMode(AtomicU8);

impl Default for AtomicLwLockMode {
    /// [`LwLockMode::Exclusive`], as a zeroed `PGPROC`.
    fn default() -> Self {
        Self(AtomicU8::new(LwLockMode::Exclusive as u8))
    }
}

impl AtomicLwLockMode {
    /// Reads the mode.
    #[inline(always)]
    pub fn load(&self, order: Ordering) -> LwLockMode {
        LwLockMode::from_bits(self.0.load(order))
    }

    /// Writes the mode.
    #[inline(always)]
    pub fn store(&self, mode: LwLockMode, order: Ordering) {
        self.0.store(mode as u8, order);
    }
}
