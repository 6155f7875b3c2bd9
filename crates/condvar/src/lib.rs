//! Models PostgreSQL's condition variables (storage/lmgr/condition_variable.c, 10+): a way for
//! a backend to sleep until some condition in shared memory holds, woken by whoever changes it.
//!
//! # The algorithm
//!
//! A condition variable is a spinlock and a list of the backends waiting on it (`wakeup`,
//! threaded through each `PGPROC`'s `cvWaitLink`). It holds no state of its own: the
//! condition lives in whatever shared memory the caller looks at, and the variable only
//! carries the wake-ups. A waiter follows one protocol:
//!
//! 1. [`ConditionVariable::prepare_to_sleep`]: under the spinlock, put itself at the list's
//!    tail. From here on, no wake-up can be lost.
//! 2. Look at the condition; if it holds, go to 4.
//! 3. [`ConditionVariable::sleep`]: wait for its latch and reset it, then, under the spinlock,
//!    see whether it is still on the list. If a signal took it off, put itself back (a later
//!    wake-up must still find it) and return, so the caller looks at the condition again.
//!    If it is still on the list, the latch was set for some other reason: sleep again.
//! 4. [`ConditionVariable::cancel_sleep`]: under the spinlock, leave the list, and say whether
//!    a signal had taken it off already. A [`ConditionVariable::signal`] meant for another
//!    waiter that reaches one whose condition holds by then is spent on it: PostgreSQL does not
//!    pass it on. Up to 15 `ConditionVariableCancelSleep` says nothing; later releases (17 at
//!    the latest) return whether the backend was signalled, so that a caller relying on
//!    `signal` can signal again.
//!    Most callers broadcast, which wakes every waiter.
//!
//! The side that changes the condition changes it first, then wakes: [`ConditionVariable::signal`]
//! takes the list's first waiter off under the spinlock and sets its latch;
//! [`ConditionVariable::broadcast`] wakes every backend that was on the list when it began. A
//! woken waiter goes back on the list at once (step 3), so emptying the list could go on
//! forever. Instead, the broadcaster puts itself at the tail as a sentinel and pops one waiter
//! per spinlock acquisition, until it pops itself.
//!
//! 14 moved the wait for a shared buffer's I/O onto one of these per buffer (`WaitIO`,
//! `TerminateBufferIO` in bufmgr.c), where 9.6–13 slept on a per-buffer LWLock.
//!
//! # Differences from PostgreSQL
//!
//! - PostgreSQL keeps the variable a backend prepared to sleep on in a backend-local global
//!   (`cv_sleep_target`) and cancels it implicitly when the backend prepares for another one or
//!   broadcasts. Here [`prepare_to_sleep`](ConditionVariable::prepare_to_sleep) returns a token
//!   ([`Prepared`]) that [`sleep`](ConditionVariable::sleep) borrows and
//!   [`cancel_sleep`](ConditionVariable::cancel_sleep) consumes. So a backend waits on one
//!   variable at a time by construction, and a broadcaster is never on a list.
//! - The timed sleep (`ConditionVariableTimedSleep`) and the futex-based variant of a patched
//!   build are not modelled.

use pglocks_proc::proclist::{ProcList, ProcListNode};
use pglocks_proc::{Backend, ProcSlot};
use pglocks_spin::{PgSpinLock, RawSpinLock, StuckSpinlock};
use pglocks_sync::cell::UnsafeCell;

fn cv_wait_link(slot: &ProcSlot) -> &ProcListNode {
    &slot.cv_wait_link
}

/// Models `ConditionVariable` (condition_variable.h): the spinlock `mutex` and the list of
/// waiting backends it protects.
#[derive(Debug)]
pub struct ConditionVariable<R: RawSpinLock = PgSpinLock<true>> {
    mutex: R,
    wakeup: UnsafeCell<ProcList>,
}

// SAFETY: `wakeup` is only touched while `mutex` is held (see `locked`).
unsafe impl<R: RawSpinLock> Sync for ConditionVariable<R> {}

impl<R: RawSpinLock> Default for ConditionVariable<R> {
    fn default() -> Self {
        Self::new()
    }
}

/// Proof that a backend is prepared to sleep on a condition variable (PostgreSQL's
/// `cv_sleep_target`): returned by [`ConditionVariable::prepare_to_sleep`], to be given back
/// to [`ConditionVariable::cancel_sleep`] once the condition holds.
#[derive(Debug)]
#[must_use = "a prepared sleep must end with cancel_sleep, which takes the backend off the list"]
pub struct Prepared {
    procno: u32,
}

impl<R: RawSpinLock> ConditionVariable<R> {
    /// A variable nobody waits on (`ConditionVariableInit`).
    pub fn new() -> Self {
        Self {
            mutex: R::new(),
            wakeup: UnsafeCell::new(ProcList::new()),
        }
    }

    /// Runs `f` on the wait list with the spinlock held.
    #[inline]
    fn locked<T>(
        &self,
        b: &mut Backend,
        f: impl FnOnce(&mut ProcList, &Backend) -> T,
    ) -> Result<T, StuckSpinlock> {
        self.mutex.lock(b)?;
        // SAFETY: the spinlock is held until the unlock below.
        let r = self.wakeup.with_mut(|p| f(unsafe { &mut *p }, b));
        // SAFETY: taken above.
        unsafe { self.mutex.unlock() };
        Ok(r)
    }

    /// Models `ConditionVariablePrepareToSleep`: puts backend `b` at the tail of the wait
    /// list. The caller then looks at its condition, and sleeps only if it does not hold.
    pub fn prepare_to_sleep(&self, b: &mut Backend) -> Result<Prepared, StuckSpinlock> {
        let me = b.procno() as u32;
        self.locked(b, |list, b| list.push_tail(b.procs(), cv_wait_link, me))?;
        Ok(Prepared { procno: me })
    }

    /// Models `ConditionVariableSleep` of a prepared backend: waits on its latch, counted as
    /// wait event `event`, until a signal or broadcast has taken it off the list; puts it back
    /// and returns, for the caller to look at its condition again.
    pub fn sleep(
        &self,
        b: &mut Backend,
        prepared: &Prepared,
        event: &'static str,
    ) -> Result<(), StuckSpinlock> {
        debug_assert_eq!(prepared.procno, b.procno() as u32);
        loop {
            b.wait_latch_event(None, event);
            let signalled = self.locked(b, |list, b| {
                let me = b.procno() as u32;
                let off = !ProcList::contains(b.procs(), cv_wait_link, me);
                if off {
                    list.push_tail(b.procs(), cv_wait_link, me);
                }
                off
            })?;
            if signalled {
                return Ok(());
            }
            pglocks_sync::hint::spin_loop();
        }
    }

    /// Models `ConditionVariableCancelSleep`: takes backend `b` off the list. Returns whether a
    /// signal or broadcast had taken it off already (the return value of later releases, 17's
    /// at the latest; the signal is not passed on).
    pub fn cancel_sleep(&self, b: &mut Backend, prepared: Prepared) -> Result<bool, StuckSpinlock> {
        debug_assert_eq!(prepared.procno, b.procno() as u32);
        let signalled = self.locked(b, |list, b| {
            let me = b.procno() as u32;
            let on = ProcList::contains(b.procs(), cv_wait_link, me);
            if on {
                list.delete(b.procs(), cv_wait_link, me);
            }
            !on
        })?;
        Ok(signalled)
    }

    /// Models `ConditionVariableSignal`: wakes the first waiter, if there is one.
    pub fn signal(&self, b: &mut Backend) -> Result<(), StuckSpinlock> {
        let first = self.locked(b, |list, b| list.pop_head(b.procs(), cv_wait_link))?;
        if let Some(procno) = first {
            b.procs().set_latch(procno as usize);
        }
        Ok(())
    }

    /// Models `ConditionVariableBroadcast`: wakes every backend on the list when it began. It
    /// pops the first waiter and, if others follow, puts itself at the tail as a sentinel, then
    /// pops one waiter per spinlock acquisition until its sentinel is gone; waiters woken
    /// meanwhile that put themselves back land behind the sentinel and are not woken twice.
    #[cold]
    pub fn broadcast(&self, b: &mut Backend) -> Result<(), StuckSpinlock> {
        let me = b.procno() as u32;
        let (first, mut sentinel) = self.locked(b, |list, b| {
            let first = list.pop_head(b.procs(), cv_wait_link);
            let more = first.is_some() && !list.is_empty();
            if more {
                list.push_tail(b.procs(), cv_wait_link, me);
            }
            (first, more)
        })?;
        if let Some(procno) = first {
            b.procs().set_latch(procno as usize);
        }
        while sentinel {
            let next = self.locked(b, |list, b| {
                let next = list.pop_head(b.procs(), cv_wait_link);
                (next, ProcList::contains(b.procs(), cv_wait_link, me))
            })?;
            sentinel = next.1;
            if let Some(procno) = next.0.filter(|&p| p != me) {
                b.procs().set_latch(procno as usize);
            }
        }
        Ok(())
    }

    /// Backends on the wait list, first to last (for tests and checks; takes the spinlock).
    pub fn waiters(&self, b: &mut Backend) -> Result<Vec<u32>, StuckSpinlock> {
        self.locked(b, |list, b| {
            let mut v = Vec::new();
            list.for_each_modify(b.procs(), cv_wait_link, |_, p| {
                v.push(p);
                true
            });
            v
        })
    }
}
