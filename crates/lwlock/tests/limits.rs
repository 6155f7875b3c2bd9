//! `MAX_SIMUL_LWLOCKS` at, just below and just above it, for every LWLock implementation:
//! lwlock.c's `held_lwlocks[]` holds 200 locks from 9.5 (100 before); the next
//! `LWLockAcquire`, `LWLockConditionalAcquire` or `LWLockAcquireOrWait` fails with
//! "too many LWLocks taken" (`elog(ERROR, …)` in each) and leaves the lock untouched.
#![cfg(not(loom))]

use pglocks_lwlock::{
    AtomicLwLock, HandoffLwLock, LwLockError, LwLockMode, MutexWaitListLwLock, ParkingLotLwLock,
    Pg18Layout, RawLwLock, SpinlockProtectedLwLock, MAX_SIMUL_LWLOCKS, MAX_SIMUL_LWLOCKS_94,
};
use pglocks_proc::ProcTable;
use LwLockMode::{Exclusive, Shared};

/// One backend fills its held-locks array up to `max` and goes one over, in every acquire
/// function; another backend checks that the refused lock was not taken.
fn at_below_and_above<K: RawLwLock>(max: usize) {
    let procs = ProcTable::new(2);
    let (mut a, mut other) = (procs.attach().unwrap(), procs.attach().unwrap());
    let locks: Vec<K> = (0..=max).map(|_| K::new("limits")).collect();
    let too_many = LwLockError::TooManyLwLocks { max };
    // Up to one below the limit, alternating modes.
    for (i, l) in locks[..max - 1].iter().enumerate() {
        let mode = if i % 2 == 0 { Shared } else { Exclusive };
        assert!(l.acquire(&mut a, mode).unwrap());
    }
    assert_eq!(a.held_lwlocks.len(), max - 1);
    // Just below: the max-th lock is granted, by each function in turn.
    let last = &locks[max - 1];
    assert!(last.conditional_acquire(&mut a, Exclusive).unwrap());
    last.release(&mut a).unwrap();
    assert!(last.acquire_or_wait(&mut a, Exclusive).unwrap());
    last.release(&mut a).unwrap();
    assert!(last.acquire(&mut a, Shared).unwrap());
    // At the limit: one more is refused by every function, in either mode.
    assert_eq!(a.held_lwlocks.len(), max);
    let over = &locks[max];
    for mode in [Shared, Exclusive] {
        assert_eq!(over.acquire(&mut a, mode).unwrap_err(), too_many);
        assert_eq!(
            over.conditional_acquire(&mut a, mode).unwrap_err(),
            too_many
        );
        assert_eq!(over.acquire_or_wait(&mut a, mode).unwrap_err(), too_many);
    }
    // Even a lock it holds shared already: the array counts holds, not locks.
    assert_eq!(last.acquire(&mut a, Shared).unwrap_err(), too_many);
    let e = over.acquire(&mut a, Shared).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("too many LWLocks taken (a backend may hold at most {max} at once)")
    );
    assert_eq!(a.held_lwlocks.len(), max, "nothing was recorded");
    // The refused lock was not taken: another backend gets it exclusively at once.
    assert!(over.conditional_acquire(&mut other, Exclusive).unwrap());
    over.release(&mut other).unwrap();
    // One released, one more fits again.
    locks[0].release(&mut a).unwrap();
    assert!(over.acquire(&mut a, Exclusive).unwrap());
    assert_eq!(over.acquire(&mut a, Exclusive).unwrap_err(), too_many);
    over.release(&mut a).unwrap();
    for l in locks[1..max].iter().rev() {
        l.release(&mut a).unwrap();
    }
    assert!(a.held_lwlocks.is_empty());
}

#[test]
fn the_limits_are_postgresqls() {
    assert_eq!(MAX_SIMUL_LWLOCKS, 200);
    assert_eq!(MAX_SIMUL_LWLOCKS_94, 100);
}

#[test]
fn atomic_96_lwlock_holds_max_simul_lwlocks() {
    at_below_and_above::<AtomicLwLock>(MAX_SIMUL_LWLOCKS);
}

#[test]
fn atomic_18_lwlock_holds_max_simul_lwlocks() {
    at_below_and_above::<AtomicLwLock<Pg18Layout>>(MAX_SIMUL_LWLOCKS);
}

#[test]
fn pg95_lwlock_holds_max_simul_lwlocks() {
    at_below_and_above::<MutexWaitListLwLock>(MAX_SIMUL_LWLOCKS);
}

#[test]
fn spinlock_protected_lwlock_holds_the_94_limit() {
    at_below_and_above::<SpinlockProtectedLwLock>(MAX_SIMUL_LWLOCKS_94);
}

#[test]
fn handoff_and_parking_lot_locks_keep_the_same_limit() {
    at_below_and_above::<HandoffLwLock>(MAX_SIMUL_LWLOCKS);
    at_below_and_above::<ParkingLotLwLock>(MAX_SIMUL_LWLOCKS);
}
