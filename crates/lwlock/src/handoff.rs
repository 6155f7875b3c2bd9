//! A hand-off (FIFO-fair) LWLock: the design that lwlock.c's header comment weighs and rejects,
//! behind the same [`RawLwLock`] trait as PostgreSQL's, so that the two can be run through the
//! same workloads and compared.
//!
//! # The algorithm
//! The state word is 9.6's ([`Pg96Layout`]): an exclusive bit, a count of shared holders,
//! `HAS_WAITERS` and the wait-list lock bit `LOCKED` (`RELEASE_OK` is never used, because nobody
//! re-competes). One rule changes everything: **while anyone is queued, the lock is not free to
//! newcomers.** `HAS_WAITERS` is set exactly while the queue is not empty, and every way in — the
//! fast path of an acquisition, a conditional acquisition, the first try of an acquire-or-wait —
//! takes the lock only if the mode allows it *and* `HAS_WAITERS` is clear. Uncontended, that is
//! still one compare-and-swap. The rule is about safety as much as fairness: between a release
//! and its hand-over the lock is momentarily free, and a newcomer that took it then would hold
//! it together with the waiter being granted it.
//!
//! When that fails, the backend locks the wait list and lets one compare-and-swap on the state
//! word decide between the two things it may do: take the lock (it came free in the meantime and
//! nobody is queued) or set `HAS_WAITERS`. The decision and the flag are one atomic step on the
//! word that releases subtract from, so no release can fall between "looks taken" and "queued" —
//! the window that PostgreSQL closes with its second attempt. The backend then adds itself at the
//! tail of the queue, unlocks the list and sleeps on its semaphore. It wakes up **holding the
//! lock**: a waiter never tries again.
//!
//! A release subtracts its share from the word. If that leaves the lock free with `HAS_WAITERS`
//! set, nobody else can take it (every way in sees the flag), and the releaser hands it over: under
//! the wait-list lock it takes the head waiter off the queue and, if it is exclusive, grants it the
//! lock alone; if it is shared, grants it and every shared waiter behind it up to the first
//! exclusive one. One compare-and-swap adds the grant to the word on the waiters' behalf (the
//! exclusive bit, or one shared count each), clears `HAS_WAITERS` if the queue is now empty and
//! unlocks the wait list; then each granted backend is marked not waiting and its semaphore
//! posted. The woken backend records the lock in its held-lock array, as any acquirer does.
//! Grants follow arrival order exactly: nobody barges, nobody starves.
//!
//! `acquire_or_wait` (`LWLockAcquireOrWait`) queues as PostgreSQL's does, as a wait-until-free
//! waiter at the *head* of the queue. A hand-over wakes every such waiter (they are always a
//! prefix of the queue) without granting them anything, along with its grant to the lockers
//! behind them; woken, they return `false` without the lock. A hand-over that finds only
//! wait-until-free waiters wakes them all and leaves the lock free.
//!
//! # Differences from PostgreSQL
//! - **Release hands the lock over** (the idea itself). lwlock.c's release only wakes waiters,
//!   who then compete with everyone else, so a running backend can release and re-take a hot lock
//!   many times within its time slice while the woken ones are still being scheduled — fast, but
//!   unfair: a waiter can lose every race and starve. Here every contended acquisition costs a
//!   sleep and a wake-up, and the lock stays idle from the hand-over until the grantee's thread
//!   is actually running. That is a *lock convoy*: under contention throughput falls to the rate
//!   at which the scheduler can wake backends, one context switch per hand-over. What it buys is
//!   fairness: bounded, arrival-ordered waits, so latency tails (p99, max) may shrink while
//!   throughput collapses. Test it to put numbers on that trade.
//! - **Lock-holder preemption** gets worse when backends outnumber cores: the lock is granted to a
//!   backend that is asleep, and stays held while it waits for a CPU; PostgreSQL's lets whoever
//!   is running take it in the meantime. Compare runs with more threads than CPUs.
//! - The grant rule is "the head exclusive waiter alone, or the leading run of shared waiters"
//!   (9.4's wake rule, now a grant). 9.5+ wakes every shared waiter in the queue, which lets
//!   shared waiters behind an exclusive one overtake it; that would break the FIFO order.
//! - No `RELEASE_OK`: a woken waiter never competes, so there is no stampede of wake-ups to damp.
//! - A queued wait-until-free waiter, like any waiter, keeps newcomers out (they queue behind it)
//!   until the next hand-over, even though it will not take the lock.
//! - Backends are explicit [`Backend`] handles and errors are [`LwLockError`] values, as in the
//!   PostgreSQL models of this crate. A hand-over whose wait-list lock is stuck returns the error
//!   and leaves the queue asleep; PostgreSQL would PANIC.

use crate::wait_state::{NOT_WAITING, PENDING_WAKEUP, WAITING};
use crate::{
    sleep_until_woken, LockAttempt, LockedBit, LwLockError, LwLockMode, Pg96Layout, RawLwLock,
    StateLayout, WaitListLock, MAX_SIMUL_LWLOCKS,
};
use pglocks_proc::proclist::{ProcList, ProcListNode};
use pglocks_proc::tranche::{tranche_id, tranche_name, TrancheId};
use pglocks_proc::{Backend, ProcSlot, ProcTable};
use pglocks_sync::atomic::{AtomicU32, Ordering::*};
use pglocks_sync::cell::UnsafeCell;

/// The state word's layout: 9.6's.
type Layout = Pg96Layout;
/// `LW_FLAG_HAS_WAITERS`: the queue is not empty, so the lock is not free to newcomers; only a
/// hand-over grants it.
const HAS_WAITERS: u32 = Layout::HAS_WAITERS;
/// `LW_FLAG_LOCKED`: the wait queue is being changed.
const LOCKED: u32 = Layout::LOCKED;
/// `LW_VAL_EXCLUSIVE`: held exclusively.
const VAL_EXCLUSIVE: u32 = Layout::VAL_EXCLUSIVE;
/// `LW_VAL_SHARED`: one shared holder.
const VAL_SHARED: u32 = Layout::VAL_SHARED;
/// `LW_LOCK_MASK`: the exclusive bit and the shared count; zero when nobody holds the lock.
const LOCK_MASK: u32 = Layout::LOCK_MASK;

/// What holding the lock in `mode` adds to the state word.
fn value(mode: LwLockMode) -> u32 {
    match mode {
        LwLockMode::Exclusive => VAL_EXCLUSIVE,
        _ => VAL_SHARED,
    }
}

/// Whether the holders recorded in `state` leave room for one more in `mode`.
fn mode_allows(state: u32, mode: LwLockMode) -> bool {
    match mode {
        LwLockMode::Exclusive => state & LOCK_MASK == 0,
        _ => state & VAL_EXCLUSIVE == 0,
    }
}

fn wait_link(slot: &ProcSlot) -> &ProcListNode {
    &slot.lw_wait_link
}

/// What a backend that found the lock taken did under the wait-list lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// The lock had come free and nobody was queued: the backend holds it.
    Took,
    /// The backend is on the queue, `HAS_WAITERS` is set: it must sleep.
    Queued,
}

/// A FIFO-fair LWLock: a release hands the lock to the next waiters instead of letting them
/// compete for it (see the [module documentation](crate::handoff)).
///
/// ```
/// use pglocks_lwlock::{HandoffLwLock, LwLockMode};
/// let procs = pglocks_proc::ProcTable::new(1);
/// let mut me = procs.attach().unwrap();
/// let lock = HandoffLwLock::new("ProcArray");
/// assert!(lock.acquire(&mut me, LwLockMode::Exclusive).unwrap()); // had without sleeping
/// lock.release(&mut me).unwrap();
/// ```
#[derive(Debug)]
pub struct HandoffLwLock {
    tranche: TrancheId,
    state: AtomicU32,
    waiters: UnsafeCell<ProcList>,
}

// SAFETY: `waiters` is only touched between locking and unlocking the wait list, which exclude
// each other through the LOCKED bit (acquire on set, release on clear); the rest is atomics.
unsafe impl Sync for HandoffLwLock {}

impl HandoffLwLock {
    /// A free lock of tranche `name`, nobody queued.
    pub fn new(name: &'static str) -> Self {
        Self {
            tranche: tranche_id(name),
            state: AtomicU32::new(0),
            waiters: UnsafeCell::new(ProcList::new()),
        }
    }

    /// The tranche name, as errors and statistics show it.
    pub fn name(&self) -> &'static str {
        tranche_name(self.tranche)
    }

    /// The raw state word, in [`Pg96Layout`] (for tests and inspection).
    pub fn state(&self) -> u32 {
        self.state.load(Relaxed)
    }

    fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// The fast path (`LWLockAttemptLock`, without barging): takes the lock in `mode` if the mode
    /// allows it and nobody is queued ([`LockAttempt::Acquired`]); otherwise the caller must
    /// queue ([`LockAttempt::MustWait`]).
    #[inline(always)]
    pub fn attempt_lock(&self, mode: LwLockMode) -> LockAttempt {
        let mut old = self.state.load(Relaxed);
        loop {
            if old & HAS_WAITERS != 0 || !mode_allows(old, mode) {
                return LockAttempt::MustWait;
            }
            match self
                .state
                .compare_exchange_weak(old, old + value(mode), Acquire, Relaxed)
            {
                Ok(_) => return LockAttempt::Acquired,
                Err(now) => old = now,
            }
        }
    }

    /// Runs `f` on the wait queue. Only while the wait list is locked.
    fn with_waiters<R>(&self, f: impl FnOnce(&mut ProcList) -> R) -> R {
        // SAFETY: the caller has locked the wait list (see the Sync impl).
        self.waiters.with_mut(|w| f(unsafe { &mut *w }))
    }

    /// The slow path's one decision, under the wait-list lock: take the lock in `mode` if it is
    /// free to a newcomer, or else set `HAS_WAITERS` and join the queue as a `queue_as` waiter
    /// (at the head for wait-until-free, at the tail otherwise). One compare-and-swap decides and
    /// sets the flag, so a release either comes before it (and the lock is taken here) or after
    /// it (and sees `HAS_WAITERS`, and hands the lock over to the queue).
    fn take_or_queue(
        &self,
        b: &mut Backend,
        mode: LwLockMode,
        queue_as: LwLockMode,
    ) -> Result<Attempt, LwLockError> {
        LockedBit.lock::<Layout>(&self.state, b, self.tranche)?;
        let mut old = self.state.load(Relaxed);
        let attempt = loop {
            // Only a hand-over clears the flag, and it needs the wait-list lock we hold.
            if old & HAS_WAITERS != 0 {
                break Attempt::Queued;
            }
            let (new, attempt) = if mode_allows(old, mode) {
                (old + value(mode), Attempt::Took)
            } else {
                (old | HAS_WAITERS, Attempt::Queued)
            };
            match self.state.compare_exchange_weak(old, new, Acquire, Relaxed) {
                Ok(_) => break attempt,
                Err(now) => old = now,
            }
        };
        if attempt == Attempt::Queued {
            let (procs, me) = (b.procs(), b.procno() as u32);
            let slot = procs.slot(me as usize);
            debug_assert_eq!(
                slot.lw_waiting.load(Relaxed),
                NOT_WAITING,
                "queueing for lock while waiting on another one"
            );
            slot.lw_waiting.store(WAITING, Relaxed);
            slot.lw_wait_mode.store(queue_as, Relaxed);
            self.with_waiters(|w| {
                if queue_as == LwLockMode::WaitUntilFree {
                    w.push_head(procs, wait_link, me);
                } else {
                    w.push_tail(procs, wait_link, me);
                }
            });
        }
        LockedBit.unlock::<Layout>(&self.state);
        Ok(attempt)
    }

    /// Sleeps until a hand-over has dealt with this queued backend (granted it the lock, or, for
    /// a wait-until-free waiter, seen the lock released), then re-posts stray wake-ups.
    fn wait_for_turn(&self, b: &mut Backend, queued_as: LwLockMode) {
        let extra = sleep_until_woken(b, self.tranche, queued_as);
        crate::repost_absorbed_wakeups(b, extra);
    }

    /// Takes the lock in `mode` (exclusive or shared), queueing and sleeping until it is handed
    /// over if anyone holds it in a conflicting mode or anyone is queued. Returns `true` if it
    /// was had without sleeping.
    #[inline]
    pub fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        debug_assert_ne!(mode, LwLockMode::WaitUntilFree);
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        if self.attempt_lock(mode) == LockAttempt::MustWait {
            return self.acquire_slow(b, mode);
        }
        b.held_lwlocks.push(self.id(), mode);
        Ok(true)
    }

    #[cold]
    fn acquire_slow(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        let had_without_sleeping = match self.take_or_queue(b, mode, mode)? {
            Attempt::Took => true,
            Attempt::Queued => {
                // Woken, we hold the lock: the releaser added our share to the state word.
                self.wait_for_turn(b, mode);
                false
            }
        };
        b.held_lwlocks.push(self.id(), mode);
        Ok(had_without_sleeping)
    }

    /// `LWLockConditionalAcquire`: takes the lock if it is free to a newcomer right now (the
    /// mode allows it and nobody is queued); never waits.
    #[inline]
    pub fn conditional_acquire(
        &self,
        b: &mut Backend,
        mode: LwLockMode,
    ) -> Result<bool, LwLockError> {
        debug_assert_ne!(mode, LwLockMode::WaitUntilFree);
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        if self.attempt_lock(mode) == LockAttempt::MustWait {
            return Ok(false);
        }
        b.held_lwlocks.push(self.id(), mode);
        Ok(true)
    }

    /// `LWLockAcquireOrWait`: takes the lock if it is free to a newcomer; otherwise waits, as a
    /// wait-until-free waiter at the head of the queue, for the next release, and returns
    /// `false` **without** the lock (the hand-over that wakes it grants the lock to the lockers
    /// queued behind, if any).
    pub fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        debug_assert_ne!(mode, LwLockMode::WaitUntilFree);
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        let attempt = match self.attempt_lock(mode) {
            LockAttempt::Acquired => Attempt::Took,
            LockAttempt::MustWait => self.take_or_queue(b, mode, LwLockMode::WaitUntilFree)?,
        };
        match attempt {
            Attempt::Took => {
                b.held_lwlocks.push(self.id(), mode);
                Ok(true)
            }
            Attempt::Queued => {
                self.wait_for_turn(b, LwLockMode::WaitUntilFree);
                Ok(false)
            }
        }
    }

    /// `LWLockRelease`: drops the backend's hold; if that leaves the lock free with waiters
    /// queued, hands it over to them.
    #[inline]
    pub fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
        let mode = crate::forget_held(b, self.id(), self.tranche)?;
        let share = value(mode);
        let new = self.state.fetch_sub(share, Release) - share;
        if new & LOCK_MASK == 0 && new & HAS_WAITERS != 0 {
            self.hand_over(b)?;
        }
        Ok(())
    }

    /// Hands the free lock over to the head of the queue, in arrival order: every
    /// wait-until-free waiter in front is woken without a grant; then the first locker is
    /// granted the lock, alone if it is exclusive, with every shared waiter behind it up to the
    /// first exclusive one if it is shared. One compare-and-swap adds the grant, clears
    /// `HAS_WAITERS` if the queue is now empty and unlocks the wait list; then each woken backend
    /// is marked not waiting and its semaphore posted.
    #[cold]
    fn hand_over(&self, b: &mut Backend) -> Result<(), LwLockError> {
        LockedBit.lock::<Layout>(&self.state, b, self.tranche)?;
        let procs: &ProcTable = b.procs();
        let mut wake = ProcList::new();
        let mut grant = 0;
        let queue_empty = self.with_waiters(|w| {
            debug_assert!(!w.is_empty(), "HAS_WAITERS set on an empty queue");
            w.for_each_modify(procs, wait_link, |w, p| {
                let slot = procs.slot(p as usize);
                let mode = slot.lw_wait_mode.load(Relaxed);
                if mode == LwLockMode::Exclusive && grant != 0 {
                    // Behind a shared run: it waits for the run to finish.
                    return false;
                }
                w.delete(procs, wait_link, p);
                wake.push_tail(procs, wait_link, p);
                slot.lw_waiting.store(PENDING_WAKEUP, Relaxed);
                match mode {
                    LwLockMode::Exclusive => {
                        grant = VAL_EXCLUSIVE;
                        false
                    }
                    LwLockMode::Shared => {
                        grant += VAL_SHARED;
                        true
                    }
                    LwLockMode::WaitUntilFree => true,
                }
            });
            w.is_empty()
        });
        let clear = if queue_empty {
            LOCKED | HAS_WAITERS
        } else {
            LOCKED
        };
        let mut old = self.state.load(Relaxed);
        loop {
            debug_assert_eq!(old & LOCK_MASK, 0, "handing over a lock that is held");
            match self
                .state
                .compare_exchange_weak(old, (old + grant) & !clear, Release, Relaxed)
            {
                Ok(_) => break,
                Err(now) => old = now,
            }
        }
        while let Some(p) = wake.pop_head(procs, wait_link) {
            let slot = procs.slot(p as usize);
            // The link is free before the waiter can run and queue somewhere else; this store
            // also publishes everything the lock's holders did to the woken backend.
            slot.lw_waiting.store(NOT_WAITING, Release);
            slot.sem.unlock();
        }
        Ok(())
    }
}

// SAFETY: the state word admits an exclusive holder only when no share is counted, and shared
// holders only while the exclusive bit is clear; a hand-over adds the woken waiters' shares to
// the word before waking them (see the module doc; loom checks it in tests/loom_lwlock.rs).
unsafe impl RawLwLock for HandoffLwLock {
    fn new(name: &'static str) -> Self {
        HandoffLwLock::new(name)
    }
    #[inline(always)]
    fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        HandoffLwLock::acquire(self, b, mode)
    }
    #[inline(always)]
    fn conditional_acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        HandoffLwLock::conditional_acquire(self, b, mode)
    }
    fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        HandoffLwLock::acquire_or_wait(self, b, mode)
    }
    #[inline(always)]
    fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
        HandoffLwLock::release(self, b)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use LwLockMode::{Exclusive as X, Shared as S, WaitUntilFree as W};

    /// A lock held exclusively by `holder`, and `waiters` queued behind it in `modes`, as
    /// blocked acquirers (or acquire-or-waiters, for `W`) would be.
    struct Queue {
        /// Boxed: a lock is known by its address, which must not move with the `Queue`.
        lock: Box<HandoffLwLock>,
        holder: Backend,
        waiters: Vec<Backend>,
        modes: Vec<LwLockMode>,
        told: Vec<bool>,
    }

    impl Queue {
        fn new(modes: &[LwLockMode]) -> Self {
            let procs = ProcTable::new(modes.len() + 1);
            let mut q = Queue {
                lock: Box::new(HandoffLwLock::new("test")),
                holder: procs.attach().unwrap(),
                waiters: modes.iter().map(|_| procs.attach().unwrap()).collect(),
                modes: modes.to_vec(),
                told: vec![false; modes.len()],
            };
            assert!(q.lock.acquire(&mut q.holder, X).unwrap());
            for (b, &m) in q.waiters.iter_mut().zip(modes) {
                let wanted = if m == W { X } else { m };
                assert_eq!(q.lock.take_or_queue(b, wanted, m).unwrap(), Attempt::Queued);
            }
            q
        }

        /// The waiters woken since the last call. Each one's semaphore must have been posted;
        /// a woken locker then records the lock as held, as `acquire_slow` does on waking.
        fn woken(&mut self) -> Vec<usize> {
            let mut woken = Vec::new();
            for (i, b) in self.waiters.iter_mut().enumerate() {
                let slot = b.procs().slot(b.procno());
                if self.told[i] || slot.lw_waiting.load(Relaxed) != NOT_WAITING {
                    assert!(!slot.sem.try_lock(), "waiter {i} posted but not woken");
                    continue;
                }
                assert!(slot.sem.try_lock(), "waiter {i} woken but not posted");
                self.told[i] = true;
                if self.modes[i] != W {
                    b.held_lwlocks.push(self.lock.id(), self.modes[i]);
                }
                woken.push(i);
            }
            woken
        }

        fn release_holder(&mut self) {
            self.lock.release(&mut self.holder).unwrap();
        }

        fn release(&mut self, waiter: usize) {
            self.lock.release(&mut self.waiters[waiter]).unwrap();
        }
    }

    #[test]
    fn grants_follow_the_queue_an_exclusive_head_alone_a_shared_run_together() {
        let mut q = Queue::new(&[X, S, S, X, S]);
        q.release_holder();
        // The exclusive head alone, granted on its behalf.
        assert_eq!(q.woken(), vec![0]);
        assert_eq!(q.lock.state(), VAL_EXCLUSIVE | HAS_WAITERS);
        q.release(0);
        // The run of shared waiters up to the next exclusive one (not the shared one after it).
        assert_eq!(q.woken(), vec![1, 2]);
        assert_eq!(q.lock.state(), (2 * VAL_SHARED) | HAS_WAITERS);
        q.release(1);
        assert!(q.woken().is_empty(), "a shared holder is left");
        q.release(2);
        assert_eq!(q.woken(), vec![3]);
        assert_eq!(q.lock.state(), VAL_EXCLUSIVE | HAS_WAITERS);
        q.release(3);
        assert_eq!(q.woken(), vec![4]);
        assert_eq!(
            q.lock.state(),
            VAL_SHARED,
            "queue empty: HAS_WAITERS cleared"
        );
        q.release(4);
        assert_eq!(q.lock.state(), 0);
    }

    #[test]
    fn the_fast_path_does_not_barge_past_a_waiter() {
        let procs = ProcTable::new(3);
        let mut reader = procs.attach().unwrap();
        let mut writer = procs.attach().unwrap();
        let mut newcomer = procs.attach().unwrap();
        let lock = HandoffLwLock::new("test");
        assert!(lock.acquire(&mut reader, S).unwrap());
        assert_eq!(
            lock.take_or_queue(&mut writer, X, X).unwrap(),
            Attempt::Queued
        );
        // Held shared, but an exclusive waiter is queued: a shared newcomer may not join in
        // (PostgreSQL's lets it, and the writer waits for the newcomer too).
        assert_eq!(
            lock.attempt_lock(S),
            LockAttempt::MustWait,
            "the fast path refuses"
        );
        assert!(!lock.conditional_acquire(&mut newcomer, S).unwrap());
        // The release hands the lock to the writer, not to whoever comes next.
        lock.release(&mut reader).unwrap();
        assert_eq!(lock.state(), VAL_EXCLUSIVE);
        assert!(!lock.conditional_acquire(&mut newcomer, S).unwrap());
        assert!(!lock.conditional_acquire(&mut reader, X).unwrap());
        lock.wait_for_turn(&mut writer, X); // posted: returns at once
        writer.held_lwlocks.push(lock.id(), X);
        lock.release(&mut writer).unwrap();
        assert!(lock.conditional_acquire(&mut newcomer, S).unwrap());
        lock.release(&mut newcomer).unwrap();
        assert_eq!(lock.state(), 0);
    }

    #[test]
    fn acquire_or_wait_is_woken_by_the_next_release_without_the_lock() {
        // W is queued at the head: the release wakes it, and grants the lock to X behind it.
        let mut q = Queue::new(&[X, W, S]);
        q.release_holder();
        assert_eq!(q.woken(), vec![0, 1]);
        assert!(q.waiters[1].held_lwlocks.is_empty());
        assert_eq!(q.lock.state(), VAL_EXCLUSIVE | HAS_WAITERS);
        q.release(0);
        assert_eq!(q.woken(), vec![2]);
        q.release(2);
        assert_eq!(q.lock.state(), 0);
    }

    #[test]
    fn a_hand_over_to_wait_until_free_waiters_only_leaves_the_lock_free() {
        let mut q = Queue::new(&[W, W]);
        q.release_holder();
        assert_eq!(q.woken(), vec![0, 1]);
        assert_eq!(q.lock.state(), 0);
    }

    #[test]
    fn taken_without_sleeping_when_free_to_newcomers() {
        let procs = ProcTable::new(2);
        let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
        let lock = HandoffLwLock::new("test");
        assert!(lock.acquire(&mut a, S).unwrap());
        assert!(lock.acquire_or_wait(&mut b, S).unwrap());
        assert_eq!(lock.state(), 2 * VAL_SHARED);
        lock.release(&mut a).unwrap();
        lock.release(&mut b).unwrap();
        assert!(lock.conditional_acquire(&mut a, X).unwrap());
        assert_eq!(lock.state(), VAL_EXCLUSIVE);
        lock.release(&mut a).unwrap();
        assert_eq!(lock.state(), 0);
    }

    #[test]
    fn releasing_a_lock_not_held_names_it() {
        let procs = ProcTable::new(2);
        let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
        let lock = HandoffLwLock::new("ProcArray");
        let not_held = LwLockError::NotHeld { lock: "ProcArray" };
        assert_eq!(lock.release(&mut a).unwrap_err(), not_held);
        lock.acquire(&mut a, X).unwrap();
        assert_eq!(
            lock.release(&mut b).unwrap_err(),
            not_held,
            "held by a, not b"
        );
        lock.release(&mut a).unwrap();
        assert_eq!(lock.state(), 0);
    }

    #[test]
    fn too_many_lwlocks_taken() {
        let procs = ProcTable::new(1);
        let mut a = procs.attach().unwrap();
        let locks: Vec<HandoffLwLock> = (0..=MAX_SIMUL_LWLOCKS)
            .map(|_| HandoffLwLock::new("t"))
            .collect();
        for l in &locks[..MAX_SIMUL_LWLOCKS] {
            assert!(l.acquire(&mut a, S).unwrap());
        }
        let last = &locks[MAX_SIMUL_LWLOCKS];
        let too_many = LwLockError::TooManyLwLocks {
            max: MAX_SIMUL_LWLOCKS,
        };
        assert_eq!(last.acquire(&mut a, S).unwrap_err(), too_many);
        assert_eq!(last.conditional_acquire(&mut a, X).unwrap_err(), too_many);
        assert_eq!(last.acquire_or_wait(&mut a, X).unwrap_err(), too_many);
        assert_eq!(last.state(), 0, "nothing taken on error");
        for l in locks[..MAX_SIMUL_LWLOCKS].iter().rev() {
            l.release(&mut a).unwrap();
        }
        assert!(a.held_lwlocks.is_empty());
    }
}
