//! loom models of the condition variable: a waiter that prepares, looks at its condition and
//! sleeps until it holds is always woken by a change followed by a signal or a broadcast,
//! whenever that comes (loom reports a deadlock if a sleeper is never woken); and a signal
//! taken by a waiter that no longer needs it is reported by its cancel, so that a caller that
//! signals again (as callers of 17's `ConditionVariableCancelSleep` may) loses no wake-up.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-condvar --test loom_condvar --release`
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use pglocks_condvar::ConditionVariable as Cv;
use pglocks_spin::FloorLock;

/// The spinlock is model-checked on its own (pglocks-spin's loom tests); a plain exchange lock
/// keeps the branches here to the variable's protocol.
type ConditionVariable = Cv<FloorLock>;
use pglocks_proc::{Backend, ProcTable};

struct Shared {
    cv: ConditionVariable,
    done: AtomicBool,
}

/// The waiter's loop: prepare, look, sleep until the condition holds, cancel.
fn wait_until_done(cv: &ConditionVariable, done: &AtomicBool, b: &mut Backend) {
    let prepared = cv.prepare_to_sleep(b).unwrap();
    while !done.load(Ordering::Acquire) {
        cv.sleep(b, &prepared, "test").unwrap();
    }
    // The caller's pass-on: a signal it took but no longer needed goes to the next waiter.
    if cv.cancel_sleep(b, prepared).unwrap() {
        cv.signal(b).unwrap();
    }
}

fn a_change_then(wake: fn(&ConditionVariable, &mut Backend)) {
    pglocks_sync::loom_builder(2).check(move || {
        let procs = ProcTable::new(2);
        let shared = Arc::new(Shared {
            cv: ConditionVariable::new(),
            done: AtomicBool::new(false),
        });
        let waker = {
            let (shared, procs) = (Arc::clone(&shared), procs.clone());
            loom::thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                shared.done.store(true, Ordering::Release);
                wake(&shared.cv, &mut b);
            })
        };
        let mut b = procs.attach().unwrap();
        wait_until_done(&shared.cv, &shared.done, &mut b);
        waker.join().unwrap();
    });
}

#[test]
fn a_signal_after_the_change_wakes_the_waiter_whenever_it_comes() {
    a_change_then(|cv, b| cv.signal(b).unwrap());
}

#[test]
fn a_broadcast_after_the_change_wakes_the_waiter_whenever_it_comes() {
    a_change_then(|cv, b| cv.broadcast(b).unwrap());
}

#[test]
fn a_signal_a_waiter_did_not_need_is_reported_by_its_cancel() {
    // Two waiters on two conditions, the first on the list before the second. The one signal,
    // meant for the second, reaches the first, whose condition holds by then (it looks only
    // after the signaller is done): its cancel must report it, for the first to signal again,
    // or the second, asleep, is never woken.
    pglocks_sync::loom_builder(1).check(|| {
        let procs = ProcTable::new(3);
        let cv = Arc::new(ConditionVariable::new());
        let second = Arc::new(AtomicBool::new(false));
        let mut b = procs.attach().unwrap();
        let prepared = cv.prepare_to_sleep(&mut b).unwrap();
        let waiter = {
            let (cv, second, procs) = (Arc::clone(&cv), Arc::clone(&second), procs.clone());
            loom::thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                wait_until_done(&cv, &second, &mut b);
            })
        };
        let signaller = {
            let (cv, second, procs) = (Arc::clone(&cv), Arc::clone(&second), procs.clone());
            loom::thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                second.store(true, Ordering::Release);
                cv.signal(&mut b).unwrap();
            })
        };
        signaller.join().unwrap();
        if cv.cancel_sleep(&mut b, prepared).unwrap() {
            cv.signal(&mut b).unwrap();
        }
        waiter.join().unwrap();
    });
}
