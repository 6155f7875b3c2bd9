//! Models the LWLock of 9.6 and later: `LWLockAttemptLock`, `LWLockWaitListLock` /
//! `LWLockWaitListUnlock`, `LWLockQueueSelf`, `LWLockDequeueSelf`, `LWLockAcquire`,
//! `LWLockConditionalAcquire`, `LWLockAcquireOrWait`, `LWLockRelease` and `LWLockWakeup` in
//! lwlock.c, with the wait states of 16+ (`LW_WS_*`), and the variable functions of 9.5+
//! (`LWLockWaitForVar`, `LWLockUpdateVar`, `LWLockReleaseClearVar`; see [`crate::var`]). The
//! crate documentation describes the algorithm.

use crate::var::{LwLockVar, VarProtocol, VarWait};
use crate::wait_state::{NOT_WAITING, PENDING_WAKEUP, WAITING};
use crate::{
    sleep_until_woken, wait_for_wakeup, LockAttempt, LwLockError, LwLockMode, MAX_SIMUL_LWLOCKS,
};
use pglocks_proc::proclist::{ProcList, ProcListNode};
use pglocks_proc::tranche::{tranche_id, tranche_name, TrancheId};
use pglocks_proc::{Backend, ProcSlot, ProcTable};
use pglocks_spin::{PgSpinLock, RawSpinLock, SpinDelayStatus};
use pglocks_sync::atomic::{AtomicU32, Ordering::*};
use pglocks_sync::cell::UnsafeCell;
use std::marker::PhantomData;

/// Where the state word keeps what; the values differ by release (lwlock.c's `LW_FLAG_*` and
/// `LW_VAL_*`).
pub trait StateLayout: Send + Sync + 'static {
    /// `LW_FLAG_HAS_WAITERS`.
    const HAS_WAITERS: u32;
    /// `LW_FLAG_RELEASE_OK`.
    const RELEASE_OK: u32;
    /// `LW_FLAG_LOCKED`: the wait-list lock.
    const LOCKED: u32;
    /// `LW_VAL_EXCLUSIVE`.
    const VAL_EXCLUSIVE: u32;
    /// `LW_VAL_SHARED`.
    const VAL_SHARED: u32 = 1;
    /// `LW_LOCK_MASK`: the exclusive bit and the shared count.
    const LOCK_MASK: u32;
    /// `LW_SHARED_MASK`.
    const SHARED_MASK: u32;
}

/// The layout of 9.6–17 (commit 008608b9d5 added `LOCKED`; 9.5 had the other values).
#[derive(Debug)]
pub struct Pg96Layout;

impl StateLayout for Pg96Layout {
    const HAS_WAITERS: u32 = 1 << 30;
    const RELEASE_OK: u32 = 1 << 29;
    const LOCKED: u32 = 1 << 28;
    const VAL_EXCLUSIVE: u32 = 1 << 24;
    const LOCK_MASK: u32 = (1 << 25) - 1;
    const SHARED_MASK: u32 = (1 << 24) - 1;
}

/// The layout of 18 (commit cd3ccf88aa): flags in the top three bits, the exclusive value right
/// above `MAX_BACKENDS` (2^18 − 1).
#[derive(Debug)]
pub struct Pg18Layout;

impl StateLayout for Pg18Layout {
    const HAS_WAITERS: u32 = 1 << 31;
    const RELEASE_OK: u32 = 1 << 30;
    const LOCKED: u32 = 1 << 29;
    const VAL_EXCLUSIVE: u32 = 1 << 18;
    const LOCK_MASK: u32 = (1 << 19) - 1;
    const SHARED_MASK: u32 = (1 << 18) - 1;
}

/// The layout of 9.5 (commit ab5194e6f6; `LW_SHARED_MASK` as corrected by 98d5b084d2): no
/// `LOCKED` bit, the wait list has a spinlock of its own ([`SeparateMutex`]).
#[derive(Debug)]
pub struct Pg95Layout;

impl StateLayout for Pg95Layout {
    const HAS_WAITERS: u32 = 1 << 30;
    const RELEASE_OK: u32 = 1 << 29;
    /// Unused: 9.5 has no wait-list bit.
    const LOCKED: u32 = 0;
    const VAL_EXCLUSIVE: u32 = 1 << 24;
    const LOCK_MASK: u32 = (1 << 25) - 1;
    const SHARED_MASK: u32 = (1 << 24) - 1;
}

/// How an atomic LWLock's wait queue is locked: the `LOCKED` bit of the state word (9.6+) or
/// a separate s_lock spinlock (9.5).
pub trait WaitListLock: Send + Sync + Default + std::fmt::Debug + 'static {
    /// Models `LWLockWaitListLock` (9.6+) / `SpinLockAcquire(&lock->mutex)` (9.5).
    fn lock<L: StateLayout>(
        &self,
        state: &AtomicU32,
        b: &mut Backend,
        tranche: TrancheId,
    ) -> Result<(), LwLockError>;
    /// Models `LWLockWaitListUnlock` / `SpinLockRelease(&lock->mutex)`.
    fn unlock<L: StateLayout>(&self, state: &AtomicU32);
    /// The end of `LWLockWakeup`: sets `set` and clears `clear` in the state word and unlocks
    /// the wait list.
    fn unlock_with_flags<L: StateLayout>(&self, state: &AtomicU32, set: u32, clear: u32);
}

/// 9.6+: the `LOCKED` bit, taken with `fetch_or` and waited for with s_lock's spin-delay loop.
#[derive(Debug, Default)]
pub struct LockedBit;

impl WaitListLock for LockedBit {
    fn lock<L: StateLayout>(
        &self,
        state: &AtomicU32,
        b: &mut Backend,
        tranche: TrancheId,
    ) -> Result<(), LwLockError> {
        loop {
            if state.fetch_or(L::LOCKED, Acquire) & L::LOCKED == 0 {
                return Ok(());
            }
            let mut delay = SpinDelayStatus::new();
            while state.load(Relaxed) & L::LOCKED != 0 {
                delay
                    .perform_spin_delay(b)
                    .map_err(|stuck| stuck_wait_list(tranche, stuck.delays))?;
            }
            if let Some(c) = b.stats.lwlock.tranche(tranche) {
                c.spin_delay += u64::from(delay.delays);
            }
            delay.finish_spin_delay(b);
        }
    }

    fn unlock<L: StateLayout>(&self, state: &AtomicU32) {
        state.fetch_and(!L::LOCKED, Release);
    }

    /// One compare-and-swap changes the flags and releases the wait list together (9.6).
    fn unlock_with_flags<L: StateLayout>(&self, state: &AtomicU32, set: u32, clear: u32) {
        let mut old = state.load(Relaxed);
        loop {
            let new = (old | set) & !(clear | L::LOCKED);
            match state.compare_exchange_weak(old, new, Release, Relaxed) {
                Ok(_) => return,
                Err(now) => old = now,
            }
        }
    }
}

/// 9.5: the `mutex` spinlock beside the state word.
#[derive(Debug, Default)]
pub struct SeparateMutex(PgSpinLock<true>);

impl WaitListLock for SeparateMutex {
    fn lock<L: StateLayout>(
        &self,
        _state: &AtomicU32,
        b: &mut Backend,
        tranche: TrancheId,
    ) -> Result<(), LwLockError> {
        crate::lock_counting_delays(&self.0, b, tranche)
    }

    fn unlock<L: StateLayout>(&self, _state: &AtomicU32) {
        // SAFETY: only called after `lock` succeeded.
        unsafe { self.0.unlock() }
    }

    /// 9.5's one atomic operation while the spinlock is held, then its release: a `fetch_and`
    /// of whatever is to be cleared, or else a `fetch_or` of what is to be set (9.5 skips
    /// setting `RELEASE_OK` when it clears `HAS_WAITERS`: the flag is already set whenever a
    /// release runs `LWLockWakeup`).
    fn unlock_with_flags<L: StateLayout>(&self, state: &AtomicU32, set: u32, clear: u32) {
        if clear != 0 {
            state.fetch_and(!clear, Relaxed);
        } else if set != 0 {
            state.fetch_or(set, Relaxed);
        }
        self.unlock::<L>(state);
    }
}

/// What `LWLockAttemptLock` does when it finds the lock taken.
pub trait AttemptRule: Send + Sync + 'static {
    /// Compare-and-swap the unchanged word in anyway (PostgreSQL: the swap "doubles as a memory
    /// barrier"), so that a failed attempt takes the line exclusive as the successful one would.
    const SWAP_WHEN_TAKEN: bool;
    /// Take a shared hold that will wait if refused (`LWLockAcquire`, `LWLockAcquireOrWait`)
    /// with one fetch-and-add of `LW_VAL_SHARED`, backed out when the word it added to shows an
    /// exclusive holder ([`FetchAddShared`]). `false`: the compare-and-swap loop.
    const SHARED_FETCH_ADD: bool = false;
}

/// PostgreSQL's rule (9.5–18): always compare-and-swap, even when the lock is seen taken.
#[derive(Debug)]
pub struct SwapAlways;

impl AttemptRule for SwapAlways {
    const SWAP_WHEN_TAKEN: bool = true;
}

/// A prototype, not PostgreSQL: return "must wait" on a visibly taken lock without writing to
/// the word, so that waiters only read the line (test-and-test-and-set). Offered as the impl
/// `read-first` of the LWLock workloads; no preset uses it.
#[derive(Debug)]
pub struct ReadFirst;

impl AttemptRule for ReadFirst {
    const SWAP_WHEN_TAKEN: bool = false;
}

/// A prototype, not PostgreSQL: the shared acquisition of the 2025 proposal to pgsql-hackers
/// "Optimize shared LWLock acquisition for high-core-count systems" (Zhou, Intel; measured on a
/// 384-vCPU machine where `LWLockAttemptLock` took 7 % of cycles). A shared acquisition that
/// will wait if refused adds `LW_VAL_SHARED` to the word with one fetch-and-add instead of the
/// read and compare-and-swap loop, which goes round once more each time another backend changed
/// the word in between. `LWLockConditionalAcquire` and every exclusive attempt keep PostgreSQL's
/// loop ([`SwapAlways`]). Offered as the impl `fetch-add` wherever an LWLock is the hot lock; no
/// preset uses it.
///
/// When the word it added to shows an exclusive holder, the attempt takes its increment back
/// with a fetch-and-subtract and returns "must wait". Meanwhile the count it added is in the
/// word, so two things see a lock that is not free: an exclusive attempt (which queues, as for
/// any holder) and the exclusive holder's release (which then wakes nobody). The back-out is
/// therefore a release too: when it leaves the word free with `HAS_WAITERS` and `RELEASE_OK`
/// set, it runs `LWLockWakeup` as `LWLockRelease` would. Without that, a reader that queued,
/// added, saw the writer, and backed out after the writer's release would sleep on a free lock
/// (the loom model `fetch_add_back_out_wakes_what_a_release_missed`). A backend has at most one
/// count in a word at a time, held or transient, so `MAX_BACKENDS` still bounds the shared count
/// and 18's layout holds it (the proposal widens `LW_SHARED_MASK` by a bit and bounds the count
/// at twice `MAX_BACKENDS`).
#[derive(Debug)]
pub struct FetchAddShared;

impl AttemptRule for FetchAddShared {
    const SWAP_WHEN_TAKEN: bool = true;
    const SHARED_FETCH_ADD: bool = true;
}

fn wait_link(slot: &ProcSlot) -> &ProcListNode {
    &slot.lw_wait_link
}

/// Models `LWLock` (lwlock.h) of 9.5+: one atomic state word and a wait queue of backends,
/// guarded by the word's `LOCKED` bit (9.6+, `W` = [`LockedBit`]) or by a spinlock of its own
/// (9.5, `W` = [`SeparateMutex`]).
#[derive(Debug)]
pub struct AtomicLwLock<
    L: StateLayout = Pg96Layout,
    W: WaitListLock = LockedBit,
    A: AttemptRule = SwapAlways,
> {
    tranche: TrancheId,
    state: AtomicU32,
    wait_list: W,
    waiters: UnsafeCell<ProcList>,
    _layout: PhantomData<(L, A)>,
}

// SAFETY: `waiters` is only touched between wait_list_lock and wait_list_unlock, which exclude
// each other through the LOCKED bit (acquire on set, release on clear); the rest is atomics.
unsafe impl<L: StateLayout, W: WaitListLock, A: AttemptRule> Sync for AtomicLwLock<L, W, A> {}

impl<L: StateLayout, W: WaitListLock, A: AttemptRule> AtomicLwLock<L, W, A> {
    /// Models `LWLockInitialize`: a free lock of tranche `name`, `RELEASE_OK` set.
    pub fn new(name: &'static str) -> Self {
        Self {
            tranche: tranche_id(name),
            state: AtomicU32::new(L::RELEASE_OK),
            wait_list: W::default(),
            waiters: UnsafeCell::new(ProcList::new()),
            _layout: PhantomData,
        }
    }

    /// The tranche name, as errors and statistics show it (`GetLWTrancheName`).
    pub fn name(&self) -> &'static str {
        tranche_name(self.tranche)
    }

    /// The raw state word (for tests and `LOCK_DEBUG`-style inspection).
    pub fn state(&self) -> u32 {
        self.state.load(Relaxed)
    }

    fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// Models `LWLockAttemptLock`: takes the lock in `mode` (exclusive or shared) if it is free
    /// ([`LockAttempt::Acquired`]), else leaves it to the caller to wait
    /// ([`LockAttempt::MustWait`]).
    ///
    /// As in PostgreSQL the word is compare-and-swapped in either case — with one more holder
    /// when the lock is free, unchanged when it is taken — and the attempt is repeated until a
    /// swap succeeds, so even a failed attempt is a write to the line (with [`ReadFirst`], a
    /// prototype, a taken lock is only read). The shared count is not checked for overflow: it
    /// fits below `LW_VAL_EXCLUSIVE` because there are at most `MAX_BACKENDS` backends (a
    /// [`ProcTable`] refuses more), each holding a lock shared once.
    #[inline(always)]
    pub fn attempt_lock(&self, mode: LwLockMode) -> LockAttempt {
        let exclusive = mode == LwLockMode::Exclusive;
        let mut old = self.state.load(Relaxed);
        loop {
            let free = if exclusive {
                old & L::LOCK_MASK == 0
            } else {
                old & L::VAL_EXCLUSIVE == 0
            };
            let desired = if free {
                old + if exclusive {
                    L::VAL_EXCLUSIVE
                } else {
                    L::VAL_SHARED
                }
            } else if A::SWAP_WHEN_TAKEN {
                old
            } else {
                return LockAttempt::MustWait;
            };
            match self.state.compare_exchange(old, desired, Acquire, Relaxed) {
                Ok(_) if free => return LockAttempt::Acquired,
                Ok(_) => return LockAttempt::MustWait,
                Err(now) => {
                    old = now;
                    pglocks_sync::hint::model_yield();
                }
            }
        }
    }

    /// The attempt of an acquisition that will wait if refused:
    /// [`attempt_lock`](Self::attempt_lock), or with [`FetchAddShared`] a shared hold by
    /// fetch-and-add, backed out if refused.
    #[inline(always)]
    fn attempt_to_wait(
        &self,
        b: &mut Backend,
        mode: LwLockMode,
    ) -> Result<LockAttempt, LwLockError> {
        if A::SHARED_FETCH_ADD && mode == LwLockMode::Shared {
            if self.state.fetch_add(L::VAL_SHARED, Acquire) & L::VAL_EXCLUSIVE == 0 {
                return Ok(LockAttempt::Acquired);
            }
            self.back_out(b)?;
            return Ok(LockAttempt::MustWait);
        }
        Ok(self.attempt_lock(mode))
    }

    /// Takes back a refused fetch-and-add, and wakes waiters as a release would if that left the
    /// lock free (see [`FetchAddShared`]).
    #[cold]
    fn back_out(&self, b: &mut Backend) -> Result<(), LwLockError> {
        let new = self.state.fetch_sub(L::VAL_SHARED, Release) - L::VAL_SHARED;
        self.wake_if_freed(b, new)
    }

    /// The end of `LWLockRelease`: wakes waiters if the word `new` left behind is free and has
    /// waiters that waking is allowed for.
    #[inline(always)]
    fn wake_if_freed(&self, b: &mut Backend, new: u32) -> Result<(), LwLockError> {
        let wake = L::HAS_WAITERS | L::RELEASE_OK;
        if new & wake == wake && new & L::LOCK_MASK == 0 {
            self.wakeup(b)?;
        }
        Ok(())
    }

    /// Locks the wait queue (see [`WaitListLock`]), counted with `LWLOCK_STATS` on.
    fn wait_list_lock(&self, b: &mut Backend) -> Result<(), LwLockError> {
        if let Some(c) = b.stats.lwlock.tranche(self.tranche) {
            c.wait_list_lock += 1;
        }
        self.wait_list.lock::<L>(&self.state, b, self.tranche)
    }

    /// Unlocks the wait queue.
    fn wait_list_unlock(&self) {
        self.wait_list.unlock::<L>(&self.state);
    }

    /// Runs `f` on the wait queue. Only between `wait_list_lock` and its unlock.
    fn with_waiters<R>(&self, f: impl FnOnce(&mut ProcList) -> R) -> R {
        // SAFETY: the caller holds the wait-list lock (see the Sync impl).
        self.waiters.with_mut(|w| f(unsafe { &mut *w }))
    }

    /// Models `LWLockQueueSelf`: puts the backend on the wait queue (wait-until-free waiters
    /// first, the rest last) and sets `HAS_WAITERS`.
    fn queue_self(&self, b: &mut Backend, mode: LwLockMode) -> Result<(), LwLockError> {
        self.wait_list_lock(b)?;
        let (procs, me) = (b.procs(), b.procno() as u32);
        let slot = procs.slot(me as usize);
        debug_assert_eq!(
            slot.lw_waiting.load(Relaxed),
            NOT_WAITING,
            "queueing for lock while waiting on another one"
        );
        self.state.fetch_or(L::HAS_WAITERS, Relaxed);
        slot.lw_waiting.store(WAITING, Relaxed);
        slot.lw_wait_mode.store(mode, Relaxed);
        self.with_waiters(|w| {
            if mode == LwLockMode::WaitUntilFree {
                w.push_head(procs, wait_link, me);
            } else {
                w.push_tail(procs, wait_link, me);
            }
        });
        self.wait_list_unlock();
        Ok(())
    }

    /// Models `LWLockDequeueSelf`: takes the backend off the queue after its second attempt
    /// succeeded. If a releaser took it off first, a wake-up is on its way: wait for it, so it
    /// cannot arrive later and be mistaken for another lock's, and re-post any strays.
    fn dequeue_self(&self, b: &mut Backend) -> Result<(), LwLockError> {
        if let Some(c) = b.stats.lwlock.tranche(self.tranche) {
            c.dequeue_self += 1;
        }
        self.wait_list_lock(b)?;
        let (procs, me) = (b.procs(), b.procno() as u32);
        let slot = procs.slot(me as usize);
        let on_list = slot.lw_waiting.load(Relaxed) == WAITING;
        self.with_waiters(|w| {
            if on_list {
                w.delete(procs, wait_link, me);
            }
            if w.is_empty() && self.state.load(Relaxed) & L::HAS_WAITERS != 0 {
                self.state.fetch_and(!L::HAS_WAITERS, Relaxed);
            }
        });
        self.wait_list_unlock();
        if on_list {
            slot.lw_waiting.store(NOT_WAITING, Relaxed);
            return Ok(());
        }
        // The waker cleared RELEASE_OK expecting us to run; we are running.
        self.state.fetch_or(L::RELEASE_OK, Relaxed);
        for _ in 0..wait_for_wakeup(slot) {
            slot.sem.unlock();
        }
        Ok(())
    }

    /// Models `LWLockAcquire`: takes the lock in `mode` (exclusive or shared), sleeping while it
    /// is taken. Returns `true` if it was had without sleeping.
    #[inline(always)]
    pub fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        debug_assert_ne!(mode, LwLockMode::WaitUntilFree);
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        b.stats
            .lwlock
            .count_acquire(self.tranche, mode == LwLockMode::Exclusive);
        if self.attempt_to_wait(b, mode)? == LockAttempt::MustWait {
            return self.acquire_slow(b, mode);
        }
        b.held_lwlocks.push(self.id(), mode);
        Ok(true)
    }

    #[cold]
    fn acquire_slow(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        let mut result = true;
        let mut extra_waits = 0;
        // `attempt_to_wait` failed once already.
        loop {
            self.queue_self(b, mode)?;
            if self.attempt_to_wait(b, mode)? == LockAttempt::Acquired {
                self.dequeue_self(b)?;
                break;
            }
            extra_waits += sleep_until_woken(b, self.tranche, mode);
            // Woken: releases may wake waiters again.
            self.state.fetch_or(L::RELEASE_OK, Relaxed);
            result = false;
            if self.attempt_to_wait(b, mode)? == LockAttempt::Acquired {
                break;
            }
        }
        b.held_lwlocks.push(self.id(), mode);
        crate::repost_absorbed_wakeups(b, extra_waits);
        Ok(result)
    }

    /// Models `LWLockAcquireOrWait` (9.2; this is its 9.5+ form): takes the lock if it is free;
    /// otherwise waits, as a wait-until-free waiter at the head of the queue, until it is
    /// released, and returns `false` **without** taking it. The group-commit primitive: a backend
    /// that wanted to flush WAL and waited for the flusher finds, on waking, that its record has
    /// usually been flushed for it.
    pub fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        debug_assert_ne!(mode, LwLockMode::WaitUntilFree);
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        let mut must_wait = self.attempt_to_wait(b, mode)? == LockAttempt::MustWait;
        if must_wait {
            self.queue_self(b, LwLockMode::WaitUntilFree)?;
            must_wait = self.attempt_to_wait(b, mode)? == LockAttempt::MustWait;
            if must_wait {
                let extra = sleep_until_woken(b, self.tranche, LwLockMode::WaitUntilFree);
                crate::repost_absorbed_wakeups(b, extra);
            } else {
                self.dequeue_self(b)?;
            }
        }
        if must_wait {
            return Ok(false);
        }
        b.held_lwlocks.push(self.id(), mode);
        Ok(true)
    }

    /// Models `LWLockConditionalAcquire`: takes the lock if it is free right now, never waits.
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

    /// Models `LWLockRelease`: drops the backend's hold and wakes waiters if that left the lock
    /// free and waking is allowed.
    #[inline(always)]
    pub fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
        let mode = crate::forget_held(b, self.id(), self.tranche)?;
        let sub = if mode == LwLockMode::Exclusive {
            L::VAL_EXCLUSIVE
        } else {
            L::VAL_SHARED
        };
        let new = self.state.fetch_sub(sub, Release) - sub;
        self.wake_if_freed(b, new)
    }

    /// Models `LWLockWakeup`: under the wait-list lock, takes off the queue every wait-until-free
    /// waiter and either the first exclusive waiter (if it comes before any shared one) or every
    /// shared waiter; then, in one compare-and-swap, sets `RELEASE_OK` only if nobody but
    /// wait-until-free waiters was woken, clears `HAS_WAITERS` if nobody was woken at all, and
    /// releases the wait-list lock; then tells each woken backend and posts its semaphore.
    #[cold]
    fn wakeup(&self, b: &mut Backend) -> Result<(), LwLockError> {
        self.wait_list_lock(b)?;
        let procs: &ProcTable = b.procs();
        let mut wake = ProcList::new();
        let mut new_release_ok = true;
        let mut woke_somebody = false;
        self.with_waiters(|w| {
            w.for_each_modify(procs, wait_link, |w, p| {
                let slot = procs.slot(p as usize);
                let mode = slot.lw_wait_mode.load(Relaxed);
                if woke_somebody && mode == LwLockMode::Exclusive {
                    return true;
                }
                w.delete(procs, wait_link, p);
                wake.push_tail(procs, wait_link, p);
                if mode != LwLockMode::WaitUntilFree {
                    new_release_ok = false;
                    woke_somebody = true;
                }
                slot.lw_waiting.store(PENDING_WAKEUP, Relaxed);
                mode != LwLockMode::Exclusive
            });
        });
        let (mut set, mut clear) = (0, 0);
        if new_release_ok {
            set |= L::RELEASE_OK;
        } else {
            clear |= L::RELEASE_OK;
        }
        // Only when nobody was woken, not when the queue is now empty: after a wake-up that
        // emptied it, the flag stays, and the next release that finds RELEASE_OK runs this
        // again and clears it then.
        if wake.is_empty()
            || pglocks_sync::mutant::active(pglocks_sync::mutant::Mutant::LwLockWakeupEarly)
        {
            clear |= L::HAS_WAITERS;
        }
        self.wait_list
            .unlock_with_flags::<L>(&self.state, set, clear);
        wake_all(procs, wake);
        Ok(())
    }
}

impl<L: StateLayout, W: WaitListLock, A: AttemptRule> AtomicLwLock<L, W, A> {
    /// Models `LWLockConflictsWithVar`: `None` if the caller must wait (the lock is held
    /// exclusively and the variable still reads `oldval`), else what it found. Shared holders are
    /// ignored, as in PostgreSQL.
    fn conflicts_with_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        oldval: u64,
    ) -> Result<Option<VarWait>, LwLockError> {
        if self.state.load(Acquire) & L::VAL_EXCLUSIVE == 0 {
            return Ok(Some(VarWait::Free));
        }
        let value = if P::ATOMIC {
            var.read()
        } else {
            self.wait_list_lock(b)?;
            let v = var.read();
            self.wait_list_unlock();
            v
        };
        Ok((value != oldval).then_some(VarWait::Changed(value)))
    }

    /// Models `LWLockWaitForVar` (9.5+): waits until the lock is free or its variable no longer
    /// reads `oldval`. Queues as a wait-until-free waiter, sets `RELEASE_OK` so that the next
    /// release wakes it, checks again, and sleeps only if still needed.
    pub fn wait_for_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        oldval: u64,
    ) -> Result<VarWait, LwLockError> {
        let mut extra_waits = 0;
        let result = loop {
            if let Some(found) = self.conflicts_with_var(b, var, oldval)? {
                break found;
            }
            self.queue_self(b, LwLockMode::WaitUntilFree)?;
            self.state.fetch_or(L::RELEASE_OK, Relaxed);
            if let Some(found) = self.conflicts_with_var(b, var, oldval)? {
                self.dequeue_self(b)?;
                break found;
            }
            extra_waits += sleep_until_woken(b, self.tranche, LwLockMode::WaitUntilFree);
        };
        crate::repost_absorbed_wakeups(b, extra_waits);
        Ok(result)
    }

    /// Models `LWLockUpdateVar`: the exclusive holder sets the variable to `value` and wakes the
    /// wait-until-free waiters at the head of the queue (those of `wait_for_var`), which then
    /// see the new value. 9.5–16 write the variable under the wait-list lock; 17+ exchange it
    /// first and take the wait-list lock only to wake.
    pub fn update_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        value: u64,
    ) -> Result<(), LwLockError> {
        debug_assert_ne!(self.state.load(Relaxed) & L::VAL_EXCLUSIVE, 0);
        if P::ATOMIC {
            var.exchange(value);
        }
        self.wait_list_lock(b)?;
        if !P::ATOMIC {
            var.write_locked(value);
        }
        let procs: &ProcTable = b.procs();
        let wake = self.with_waiters(|w| detach_leading_wait_until_free(w, procs));
        self.wait_list_unlock();
        wake_all(procs, wake);
        Ok(())
    }

    /// Models `LWLockReleaseClearVar`: sets the variable to `value` (under the wait-list lock
    /// before 17, by exchange from 17) and releases the lock.
    pub fn release_clear_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        value: u64,
    ) -> Result<(), LwLockError> {
        if P::ATOMIC {
            var.exchange(value);
        } else {
            self.wait_list_lock(b)?;
            var.write_locked(value);
            self.wait_list_unlock();
        }
        self.release(b)
    }
}

/// Takes the wait-until-free waiters at the head of `waiters` off it, marked pending wake-up,
/// and returns them (the queue walk of `LWLockUpdateVar`).
pub(crate) fn detach_leading_wait_until_free(
    waiters: &mut ProcList,
    procs: &ProcTable,
) -> ProcList {
    let mut wake = ProcList::new();
    waiters.for_each_modify(procs, wait_link, |w, p| {
        let slot = procs.slot(p as usize);
        if slot.lw_wait_mode.load(Relaxed) != LwLockMode::WaitUntilFree {
            return false;
        }
        w.delete(procs, wait_link, p);
        wake.push_tail(procs, wait_link, p);
        slot.lw_waiting.store(PENDING_WAKEUP, Relaxed);
        true
    });
    wake
}

/// Tells every backend on `wake` that it is no longer waiting and posts its semaphore (the end
/// of `LWLockWakeup` and `LWLockUpdateVar`).
pub(crate) fn wake_all(procs: &ProcTable, mut wake: ProcList) {
    while let Some(p) = wake.pop_head(procs, wait_link) {
        let slot = procs.slot(p as usize);
        // The link is free before the waiter can run and queue somewhere else.
        slot.lw_waiting.store(NOT_WAITING, Release);
        slot.sem.unlock();
    }
}

#[cold]
fn stuck_wait_list(tranche: TrancheId, delays: u32) -> LwLockError {
    LwLockError::StuckWaitList {
        lock: tranche_name(tranche),
        delays,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Queues backends 1.. with `modes` (as blocked acquirers would be), releases the lock held
    /// by backend 0, and returns which of them were woken.
    fn woken_by_release(modes: &[LwLockMode]) -> Vec<usize> {
        let woken = woken_with::<Pg96Layout, LockedBit>(modes);
        assert_eq!(
            woken_with::<Pg95Layout, SeparateMutex>(modes),
            woken,
            "9.5 wakes the same"
        );
        woken
    }

    fn woken_with<L: StateLayout, W: WaitListLock>(modes: &[LwLockMode]) -> Vec<usize> {
        let procs = ProcTable::new(modes.len() + 1);
        let mut holder = procs.attach().unwrap();
        let mut waiters: Vec<Backend> = modes.iter().map(|_| procs.attach().unwrap()).collect();
        let lock: AtomicLwLock<L, W> = AtomicLwLock::new("test");
        assert!(lock
            .conditional_acquire(&mut holder, LwLockMode::Exclusive)
            .unwrap());
        for (b, &m) in waiters.iter_mut().zip(modes) {
            lock.queue_self(b, m).unwrap();
        }
        assert_ne!(lock.state() & L::HAS_WAITERS, 0);
        lock.release(&mut holder).unwrap();
        waiters
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                let slot = b.procs().slot(b.procno());
                let woken = slot.lw_waiting.load(Relaxed) == NOT_WAITING;
                assert_eq!(
                    woken,
                    slot.sem.try_lock(),
                    "woken iff its semaphore was posted"
                );
                woken
            })
            .map(|(i, _)| i)
            .collect()
    }

    use LwLockMode::{Exclusive as X, Shared as S, WaitUntilFree as W};

    #[test]
    fn first_exclusive_waiter_is_woken_alone() {
        assert_eq!(woken_by_release(&[X, S, X, S]), vec![0]);
    }

    #[test]
    fn every_shared_waiter_is_woken_skipping_exclusive_ones() {
        // 9.5+: not only the leading run — shared waiters behind an exclusive one too.
        assert_eq!(woken_by_release(&[S, S, X, S]), vec![0, 1, 3]);
    }

    #[test]
    fn wait_until_free_waiters_are_queued_first_and_woken() {
        // W is pushed at the head, so the queue is W, X, S: W, then X alone; S stays.
        assert_eq!(woken_by_release(&[X, W, S]), vec![0, 1]);
    }

    #[test]
    fn release_ok_is_cleared_while_woken_waiters_have_not_run() {
        let procs = ProcTable::new(3);
        let mut a = procs.attach().unwrap();
        let mut w1 = procs.attach().unwrap();
        let mut w2 = procs.attach().unwrap();
        let lock: AtomicLwLock = AtomicLwLock::new("test");
        lock.acquire(&mut a, X).unwrap();
        lock.queue_self(&mut w1, X).unwrap();
        lock.queue_self(&mut w2, X).unwrap();
        lock.release(&mut a).unwrap();
        // w1 was woken; RELEASE_OK is off and HAS_WAITERS still on (w2 waits).
        let st = lock.state();
        assert_eq!(st & Pg96Layout::RELEASE_OK, 0);
        assert_ne!(st & Pg96Layout::HAS_WAITERS, 0);
        // A second release before w1 runs wakes nobody.
        lock.acquire(&mut a, X).unwrap();
        lock.release(&mut a).unwrap();
        assert!(!procs.slot(w2.procno()).sem.try_lock());
    }

    #[test]
    fn has_waiters_outlives_a_wake_up_that_empties_the_queue() {
        // LWLockWakeup clears HAS_WAITERS only when it woke nobody: after waking the only
        // (wait-until-free) waiter the flag stays, so the next release, finding RELEASE_OK
        // still set, runs the wake-up again — taking the wait-list lock — and clears it then.
        fn check<L: StateLayout, Q: WaitListLock>() {
            let procs = ProcTable::new(2);
            let mut a = procs.attach().unwrap();
            let mut w = procs.attach().unwrap();
            a.stats.lwlock.set_enabled(true);
            let lock: AtomicLwLock<L, Q> = AtomicLwLock::new("test");
            lock.acquire(&mut a, X).unwrap();
            lock.queue_self(&mut w, W).unwrap();
            lock.release(&mut a).unwrap();
            let st = lock.state();
            assert_ne!(
                st & L::RELEASE_OK,
                0,
                "only a wait-until-free waiter was woken"
            );
            assert_ne!(st & L::HAS_WAITERS, 0, "somebody was woken: the flag stays");
            let t = pglocks_proc::tranche::tranche_id("test");
            let taken = |a: &mut Backend| a.stats.lwlock.tranche(t).unwrap().wait_list_lock;
            let before = taken(&mut a);
            lock.acquire(&mut a, X).unwrap();
            lock.release(&mut a).unwrap();
            assert_eq!(taken(&mut a), before + 1, "the release ran LWLockWakeup");
            assert_eq!(lock.state() & L::HAS_WAITERS, 0, "and it woke nobody");
            lock.acquire(&mut a, X).unwrap();
            lock.release(&mut a).unwrap();
            assert_eq!(
                taken(&mut a),
                before + 1,
                "the flag is clear: no more wake-ups"
            );
        }
        check::<Pg96Layout, LockedBit>();
        check::<Pg95Layout, SeparateMutex>();
        check::<Pg18Layout, LockedBit>();
    }

    #[test]
    fn update_var_wakes_only_the_leading_wait_until_free_waiters() {
        let procs = ProcTable::new(4);
        let mut holder = procs.attach().unwrap();
        let mut others: Vec<Backend> = (0..3).map(|_| procs.attach().unwrap()).collect();
        let lock: AtomicLwLock = AtomicLwLock::new("WALInsert");
        let var: LwLockVar = LwLockVar::new(0);
        lock.acquire(&mut holder, X).unwrap();
        // Wait-until-free waiters go to the head: the queue is others[2], others[0], others[1].
        for (b, m) in others.iter_mut().zip([W, X, W]) {
            lock.queue_self(b, m).unwrap();
        }
        lock.update_var(&mut holder, &var, 42).unwrap();
        assert_eq!(var.get(), 42);
        let woken: Vec<bool> = others
            .iter()
            .map(|b| b.procs().slot(b.procno()).lw_waiting.load(Relaxed) == NOT_WAITING)
            .collect();
        assert_eq!(woken, [true, false, true]);
        assert_ne!(
            lock.state() & Pg96Layout::HAS_WAITERS,
            0,
            "the exclusive waiter stays"
        );
        // The variable moved, so a waiter from 0 returns at once; from 42 it would wait.
        let mut w = others.remove(0);
        assert_eq!(
            lock.wait_for_var(&mut w, &var, 0).unwrap(),
            VarWait::Changed(42)
        );
        lock.release_clear_var(&mut holder, &var, 0).unwrap();
        assert_eq!(var.get(), 0);
        assert_eq!(lock.wait_for_var(&mut w, &var, 42).unwrap(), VarWait::Free);
    }

    #[test]
    fn layouts_keep_flags_clear_of_the_counts() {
        fn check<L: StateLayout>() {
            let flags = L::HAS_WAITERS | L::RELEASE_OK | L::LOCKED;
            assert_eq!(flags & L::LOCK_MASK, 0);
            assert_eq!(L::LOCK_MASK, L::VAL_EXCLUSIVE | L::SHARED_MASK);
            assert!(
                L::SHARED_MASK as usize >= MAX_BACKENDS,
                "room for MAX_BACKENDS shared holders"
            );
        }
        check::<Pg95Layout>();
        check::<Pg96Layout>();
        check::<Pg18Layout>();
        assert_eq!(Pg18Layout::VAL_EXCLUSIVE, 0x40000);
        assert_eq!(Pg96Layout::VAL_EXCLUSIVE, 0x0100_0000);
    }

    use pglocks_proc::{ProcError, MAX_BACKENDS};

    /// The shared-holder count at `MAX_BACKENDS` (2^18 − 1) holders, through the state word
    /// itself rather than 262 143 backends: from one holder short of it, one more shared
    /// acquisition is granted and leaves the exclusive bit and the flags alone; an exclusive
    /// request must wait; the release counts back down without waking anyone.
    fn max_backends_shared_holders<L: StateLayout, W: WaitListLock>() {
        let procs = ProcTable::new(2);
        let (mut a, mut x) = (procs.attach().unwrap(), procs.attach().unwrap());
        let lock: AtomicLwLock<L, W> = AtomicLwLock::new("limits");
        let below = (MAX_BACKENDS as u32 - 1) * L::VAL_SHARED;
        lock.state.store(L::RELEASE_OK | below, Relaxed);
        // Just below → at: granted at once.
        assert!(lock.acquire(&mut a, LwLockMode::Shared).unwrap());
        let at = lock.state();
        assert_eq!(at & L::SHARED_MASK, MAX_BACKENDS as u32, "{at:#x}");
        assert_eq!(
            at & L::VAL_EXCLUSIVE,
            0,
            "the count stays below the exclusive value"
        );
        assert_eq!(at & !L::LOCK_MASK, L::RELEASE_OK, "flags untouched");
        // At: an exclusive request must wait, and changes nothing.
        assert_eq!(
            lock.attempt_lock(LwLockMode::Exclusive),
            LockAttempt::MustWait
        );
        assert!(!lock
            .conditional_acquire(&mut x, LwLockMode::Exclusive)
            .unwrap());
        assert_eq!(lock.state(), at);
        // Back down: the lock is still held shared, so nobody is woken.
        lock.release(&mut a).unwrap();
        assert_eq!(lock.state(), L::RELEASE_OK | below);
    }

    #[test]
    fn max_backends_shared_holders_fit_below_the_exclusive_value() {
        max_backends_shared_holders::<Pg95Layout, SeparateMutex>();
        max_backends_shared_holders::<Pg96Layout, LockedBit>();
        max_backends_shared_holders::<Pg18Layout, LockedBit>();
    }

    #[test]
    fn one_holder_more_than_max_backends_would_be_the_exclusive_value() {
        // 18 packs the count into exactly MAX_BACKENDS's bits: holder 2^18 would read as an
        // exclusive hold with no shared holders (lwlock.c's static assertions rely on
        // MAX_BACKENDS + 1 being that power of two). The model, like PostgreSQL, does not test
        // for it on the hot path; it cannot happen with one shared hold per backend, since no
        // ProcTable has more than MAX_BACKENDS backends.
        assert_eq!(
            (MAX_BACKENDS as u32 + 1) * Pg18Layout::VAL_SHARED,
            Pg18Layout::VAL_EXCLUSIVE
        );
        assert_eq!(Pg18Layout::SHARED_MASK, MAX_BACKENDS as u32);
        // 9.5–17 leave 2^24 − 1: 64 holds per backend at MAX_BACKENDS backends.
        assert!(Pg96Layout::SHARED_MASK as usize >= 64 * MAX_BACKENDS);
        assert_eq!(
            ProcTable::try_new(MAX_BACKENDS + 1).unwrap_err(),
            ProcError::TooManyBackends {
                requested: MAX_BACKENDS + 1,
                max: MAX_BACKENDS
            }
        );
    }

    /// A refused fetch-and-add is taken back: the word is as the writer left it, the attempt
    /// says wait, and a free lock is then had by one fetch-and-add.
    #[test]
    fn a_refused_fetch_add_leaves_the_word_as_it_was() {
        let procs = ProcTable::new(2);
        let (mut writer, mut reader) = (procs.attach().unwrap(), procs.attach().unwrap());
        let lock = AtomicLwLock::<Pg18Layout, LockedBit, FetchAddShared>::new("test");
        assert!(lock.acquire(&mut writer, LwLockMode::Exclusive).unwrap());
        let before = lock.state();
        assert_eq!(
            lock.attempt_to_wait(&mut reader, LwLockMode::Shared)
                .unwrap(),
            LockAttempt::MustWait
        );
        assert_eq!(lock.state(), before);
        lock.release(&mut writer).unwrap();
        assert_eq!(
            lock.attempt_to_wait(&mut reader, LwLockMode::Shared)
                .unwrap(),
            LockAttempt::Acquired
        );
        assert_eq!(lock.state() & Pg18Layout::LOCK_MASK, Pg18Layout::VAL_SHARED);
    }
}
