//! Models the LWLock of 8.x–9.4: a small struct — `releaseOK`, `exclusive`, `shared` and a
//! wait queue — guarded by an s_lock spinlock (`mutex`), in lwlock.c's `LWLockAcquire`,
//! `LWLockConditionalAcquire`, `LWLockAcquireOrWait`, `LWLockRelease` of those releases and
//! 9.4's `LWLockWaitForVar` / `LWLockUpdateVar`.
//!
//! Every operation, even an uncontended shared acquisition, takes and releases the spinlock:
//! two atomic operations plus the field updates, and every backend that wants the lock, in any
//! mode, serialises on that one spinlock. That is what 9.5's atomic state word removed.
//!
//! Acquire: under the spinlock, take the lock if the mode allows (exclusive: no holder; shared:
//! no exclusive holder), else append self to the queue and sleep; woken, retry from the start
//! with `releaseOK` set again. Release: under the spinlock, drop the hold; if the lock is now
//! entirely free and `releaseOK` is set, detach from the head of the queue the leading
//! wait-until-free waiters plus either the one exclusive waiter then at the front or the
//! contiguous run of non-exclusive waiters, clear `releaseOK` unless only wait-until-free
//! waiters were woken, and wake them after dropping the spinlock.
//!
//! The variable functions (9.4) work under the same spinlock: `wait_for_var` returns at once if
//! the lock is not held exclusively or the variable moved, else queues at the *front* as a
//! wait-until-free waiter and sleeps (every other 9.4 waiter queues at the tail); `update_var`
//! writes the variable and wakes the wait-until-free waiters at the head of the queue, which
//! therefore include every variable waiter.
//!
//! Differences from PostgreSQL: the spinlock is generic (presets pick `TAS` or `TAS_SPIN`); the
//! queue is a [`ProcList`] (as from 10) rather than `lwWaitLink` pointers, which does not change
//! the order or the rule.

use crate::atomic::{detach_leading_wait_until_free, wake_all};
use crate::var::{LwLockVar, VarProtocol, VarWait};
use crate::wait_state::WAITING;
use crate::{lock_counting_delays, sleep_until_woken, LwLockError, LwLockMode};
use pglocks_proc::proclist::{ProcList, ProcListNode};
use pglocks_proc::tranche::{tranche_id, tranche_name, TrancheId};
use pglocks_proc::{Backend, ProcSlot, ProcTable};
use pglocks_spin::{PgSpinLock, RawSpinLock};
use pglocks_sync::atomic::Ordering::Relaxed;
use pglocks_sync::cell::UnsafeCell;

/// lwlock.c's `MAX_SIMUL_LWLOCKS` before 9.5.
pub const MAX_SIMUL_LWLOCKS_94: usize = 100;

fn wait_link(slot: &ProcSlot) -> &ProcListNode {
    &slot.lw_wait_link
}

#[derive(Debug)]
struct Fields {
    release_ok: bool,
    exclusive: u32,
    shared: u32,
    waiters: ProcList,
}

/// Models `LWLock` of 8.x–9.4 (lwlock.c): fields guarded by the spinlock `R`.
#[derive(Debug)]
pub struct SpinlockProtectedLwLock<R: RawSpinLock = PgSpinLock<true>> {
    mutex: R,
    tranche: TrancheId,
    fields: UnsafeCell<Fields>,
}

// SAFETY: `fields` is only touched while `mutex` is held (see `locked`).
unsafe impl<R: RawSpinLock> Sync for SpinlockProtectedLwLock<R> {}

impl<R: RawSpinLock> SpinlockProtectedLwLock<R> {
    /// A free lock (`LWLockInitialize` of 9.4: `releaseOK` true).
    pub fn new(name: &'static str) -> Self {
        Self {
            mutex: R::new(),
            fields: UnsafeCell::new(Fields {
                release_ok: true,
                exclusive: 0,
                shared: 0,
                waiters: ProcList::new(),
            }),
            tranche: tranche_id(name),
        }
    }

    /// The tranche name.
    pub fn name(&self) -> &'static str {
        tranche_name(self.tranche)
    }

    fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// Runs `f` on the fields with the spinlock held (`SpinLockAcquire(&lock->mutex)` …
    /// `SpinLockRelease`).
    #[inline(always)]
    fn locked<T>(
        &self,
        b: &mut Backend,
        f: impl FnOnce(&mut Fields, &ProcTable, u32) -> T,
    ) -> Result<T, LwLockError> {
        lock_counting_delays(&self.mutex, b, self.tranche)?;
        // SAFETY: the spinlock is held until the unlock below.
        let r = self
            .fields
            .with_mut(|p| f(unsafe { &mut *p }, b.procs(), b.procno() as u32));
        // SAFETY: taken above.
        unsafe { self.mutex.unlock() };
        Ok(r)
    }

    /// Takes the lock in `mode` if the fields allow it.
    #[inline(always)]
    fn grab(f: &mut Fields, mode: LwLockMode) -> bool {
        match mode {
            LwLockMode::Exclusive if f.exclusive == 0 && f.shared == 0 => {
                f.exclusive += 1;
                true
            }
            LwLockMode::Shared if f.exclusive == 0 => {
                f.shared += 1;
                true
            }
            _ => false,
        }
    }

    fn enqueue(f: &mut Fields, procs: &ProcTable, me: u32, mode: LwLockMode) {
        let slot = procs.slot(me as usize);
        slot.lw_waiting.store(WAITING, Relaxed);
        slot.lw_wait_mode.store(mode, Relaxed);
        f.waiters.push_tail(procs, wait_link, me);
    }

    /// Models `LWLockAcquire` (9.4): returns `true` if the lock was had without sleeping.
    pub fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        crate::check_room(b, MAX_SIMUL_LWLOCKS_94)?;
        b.stats
            .lwlock
            .count_acquire(self.tranche, mode == LwLockMode::Exclusive);
        let (mut retry, mut slept, mut extra) = (false, false, 0);
        loop {
            let got = self.locked(b, |f, procs, me| {
                if retry {
                    f.release_ok = true;
                }
                let got = Self::grab(f, mode);
                if !got {
                    Self::enqueue(f, procs, me, mode);
                }
                got
            })?;
            if got {
                break;
            }
            extra += sleep_until_woken(b, self.tranche, mode);
            retry = true;
            slept = true;
        }
        b.held_lwlocks.push(self.id(), mode);
        crate::repost_absorbed_wakeups(b, extra);
        Ok(!slept)
    }

    /// Models `LWLockConditionalAcquire` (9.4).
    pub fn conditional_acquire(
        &self,
        b: &mut Backend,
        mode: LwLockMode,
    ) -> Result<bool, LwLockError> {
        crate::check_room(b, MAX_SIMUL_LWLOCKS_94)?;
        let got = self.locked(b, |f, _, _| Self::grab(f, mode))?;
        if got {
            b.held_lwlocks.push(self.id(), mode);
        }
        Ok(got)
    }

    /// Models `LWLockAcquireOrWait` (9.2–9.4): takes the lock if free; else waits once, at the
    /// tail of the queue, and returns `false` without the lock.
    pub fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        crate::check_room(b, MAX_SIMUL_LWLOCKS_94)?;
        let got = self.locked(b, |f, procs, me| {
            let got = Self::grab(f, mode);
            if !got {
                Self::enqueue(f, procs, me, LwLockMode::WaitUntilFree);
            }
            got
        })?;
        if !got {
            let extra = sleep_until_woken(b, self.tranche, LwLockMode::WaitUntilFree);
            crate::repost_absorbed_wakeups(b, extra);
            return Ok(false);
        }
        b.held_lwlocks.push(self.id(), mode);
        Ok(true)
    }

    /// Models `LWLockRelease` (9.4).
    pub fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
        let mode = crate::forget_held(b, self.id(), self.tranche)?;
        let mut wake = ProcList::new();
        self.locked(b, |f, procs, _| {
            if mode == LwLockMode::Exclusive {
                f.exclusive -= 1;
            } else {
                f.shared -= 1;
            }
            if f.exclusive == 0 && f.shared == 0 && f.release_ok && !f.waiters.is_empty() {
                wake = Self::detach_wakeable(f, procs);
            }
        })?;
        wake_all(b.procs(), wake);
        Ok(())
    }

    /// Models `LWLockWaitForVar` (9.4): see the module documentation.
    pub fn wait_for_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        oldval: u64,
    ) -> Result<VarWait, LwLockError> {
        let mut extra = 0;
        let result = loop {
            let found = self.locked(b, |f, procs, me| {
                if f.exclusive == 0 {
                    return Some(VarWait::Free);
                }
                let value = var.read();
                if value != oldval {
                    return Some(VarWait::Changed(value));
                }
                // 9.4 queues variable waiters at the front, so that `update_var` (which wakes
                // the leading wait-until-free waiters) reaches them past any exclusive waiter.
                let slot = procs.slot(me as usize);
                slot.lw_waiting.store(WAITING, Relaxed);
                slot.lw_wait_mode.store(LwLockMode::WaitUntilFree, Relaxed);
                f.waiters.push_head(procs, wait_link, me);
                None
            })?;
            if let Some(found) = found {
                break found;
            }
            extra += sleep_until_woken(b, self.tranche, LwLockMode::WaitUntilFree);
        };
        crate::repost_absorbed_wakeups(b, extra);
        Ok(result)
    }

    /// Models `LWLockUpdateVar` (9.4): under the spinlock, writes the variable and detaches the
    /// wait-until-free waiters at the head of the queue; wakes them after.
    pub fn update_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        value: u64,
    ) -> Result<(), LwLockError> {
        let wake = self.locked(b, |f, procs, _| {
            var.write_locked(value);
            detach_leading_wait_until_free(&mut f.waiters, procs)
        })?;
        wake_all(b.procs(), wake);
        Ok(())
    }

    /// Sets the variable under the spinlock, then releases (the `LWLockReleaseClearVar` of later
    /// releases; 9.4 itself set the variable in `LWLockAcquireWithVar` instead).
    pub fn release_clear_var<P: VarProtocol>(
        &self,
        b: &mut Backend,
        var: &LwLockVar<P>,
        value: u64,
    ) -> Result<(), LwLockError> {
        self.locked(b, |_, _, _| var.write_locked(value))?;
        self.release(b)
    }

    /// The 9.4 wake rule: from the head, the leading wait-until-free waiters (while another
    /// follows), then the exclusive waiter now at the front alone, or the run of non-exclusive
    /// waiters. Moves them to the returned list and sets `releaseOK`.
    fn detach_wakeable(f: &mut Fields, procs: &ProcTable) -> ProcList {
        // One pass, no allocation (this runs under the spinlock). Leading wait-until-free
        // waiters are taken; the first other waiter is taken too, and if it is exclusive it ends
        // the batch; after a shared one, every waiter up to the next exclusive one is taken.
        // `releaseOK` stays set only if every waiter taken waits until free.
        let mut wake = ProcList::new();
        let mut took_lockers = false;
        f.waiters.for_each_modify(procs, wait_link, |waiters, p| {
            let mode = procs.slot(p as usize).lw_wait_mode.load(Relaxed);
            if mode == LwLockMode::Exclusive && took_lockers {
                return false;
            }
            waiters.delete(procs, wait_link, p);
            wake.push_tail(procs, wait_link, p);
            took_lockers |= mode != LwLockMode::WaitUntilFree;
            mode != LwLockMode::Exclusive
        });
        f.release_ok = !took_lockers;
        wake
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use LwLockMode::{Exclusive as X, Shared as S, WaitUntilFree as W};

    /// Queues backends 1.. with `modes` behind an exclusive holder, releases, returns who woke.
    fn woken_by_release(modes: &[LwLockMode]) -> Vec<usize> {
        let procs = ProcTable::new(modes.len() + 1);
        let mut holder = procs.attach().unwrap();
        let waiters: Vec<Backend> = modes.iter().map(|_| procs.attach().unwrap()).collect();
        let lock: SpinlockProtectedLwLock = SpinlockProtectedLwLock::new("test");
        assert!(lock.conditional_acquire(&mut holder, X).unwrap());
        lock.locked(&mut holder, |f, procs, _| {
            for (b, &m) in waiters.iter().zip(modes) {
                SpinlockProtectedLwLock::<PgSpinLock<true>>::enqueue(
                    f,
                    procs,
                    b.procno() as u32,
                    m,
                );
            }
        })
        .unwrap();
        lock.release(&mut holder).unwrap();
        waiters
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                b.procs().slot(b.procno()).lw_waiting.load(Relaxed)
                    == crate::wait_state::NOT_WAITING
            })
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn front_exclusive_waiter_alone() {
        assert_eq!(woken_by_release(&[X, S, S]), vec![0]);
    }

    #[test]
    fn only_the_leading_run_of_shared_waiters() {
        // Unlike 9.5+, the shared waiter behind the exclusive one stays asleep.
        assert_eq!(woken_by_release(&[S, S, X, S]), vec![0, 1]);
    }

    #[test]
    fn leading_wait_until_free_waiters_then_the_front_exclusive() {
        assert_eq!(woken_by_release(&[W, W, X, S]), vec![0, 1, 2]);
    }

    #[test]
    fn a_shared_run_takes_wait_until_free_waiters_up_to_the_next_exclusive() {
        assert_eq!(woken_by_release(&[W, S, W, X, S]), vec![0, 1, 2]);
        assert_eq!(woken_by_release(&[W, W]), vec![0, 1]);
    }

    #[test]
    fn update_var_wakes_wait_until_free_waiters_at_the_head_only() {
        // The wait-until-free waiter at the head is woken; the exclusive one behind it stays.
        let procs = ProcTable::new(3);
        let mut holder = procs.attach().unwrap();
        let (w, x) = (procs.attach().unwrap(), procs.attach().unwrap());
        let lock: SpinlockProtectedLwLock = SpinlockProtectedLwLock::new("WALInsert");
        let var: LwLockVar<crate::LockedVar> = LwLockVar::new(0);
        lock.acquire(&mut holder, X).unwrap();
        let queue = |order: [&Backend; 2], holder: &mut Backend| {
            lock.locked(holder, |f, procs, _| {
                for (b, m) in order.iter().zip([W, X]) {
                    SpinlockProtectedLwLock::<PgSpinLock<true>>::enqueue(
                        f,
                        procs,
                        b.procno() as u32,
                        m,
                    );
                }
            })
            .unwrap()
        };
        let waiting = |b: &Backend| b.procs().slot(b.procno()).lw_waiting.load(Relaxed) == WAITING;
        queue([&w, &x], &mut holder);
        lock.update_var(&mut holder, &var, 1).unwrap();
        assert!(!waiting(&w) && waiting(&x));
        assert_eq!(var.get(), 1);
    }

    #[test]
    fn too_many_is_100_before_95() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let locks: Vec<SpinlockProtectedLwLock> = (0..=100)
            .map(|_| SpinlockProtectedLwLock::new("t"))
            .collect();
        for l in &locks[..100] {
            assert!(l.acquire(&mut b, S).unwrap());
        }
        let e = locks[100].acquire(&mut b, S).unwrap_err();
        assert_eq!(e, LwLockError::TooManyLwLocks { max: 100 });
    }
}
