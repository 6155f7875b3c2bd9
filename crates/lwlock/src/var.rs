//! Models the variable protocol of lwlock.c (9.4+): `LWLockWaitForVar`, `LWLockUpdateVar`,
//! `LWLockReleaseClearVar` and `LWLockConflictsWithVar`, built for WAL insertion locks.
//!
//! A WAL insertion lock is held exclusively while a backend copies its record into the WAL
//! buffers, and its variable (`insertingAt`) says how far the copy has got. A backend that must
//! flush up to some point does not want to wait for the whole insertion: it calls
//! [`wait_for_var`](crate::RawLwLock::wait_for_var) with the value it last saw, and returns as soon
//! as the lock is free *or* the holder has published progress with
//! [`update_var`](crate::RawLwLock::update_var). Such waiters queue as wait-until-free waiters
//! (at the head of the queue from 9.5), and `update_var` wakes exactly the leading
//! wait-until-free waiters; a release wakes them as any release does.
//!
//! Why the protocol needs care: a waiter that reads an old value and then queues must not miss an
//! update made in between. So the waiter checks again after queueing (as `LWLockAcquire` does),
//! and the value is read and written in an order the queue operations fix:
//! - 9.4–16 ([`LockedVar`]): the variable is read and written only under the lock's wait-list
//!   lock (the spinlock `mutex` up to 9.5, the `LOCKED` bit from 9.6), the same lock that
//!   guards the queue;
//! - 17+ ([`AtomicVar`]): the variable is a 64-bit atomic; writers exchange it
//!   (a full barrier) before taking the wait-list lock to wake waiters, readers read it with no
//!   lock at all, which takes the wait-list lock off the path of every flush.
//!
//! Differences from PostgreSQL: the variable is a [`LwLockVar`] beside the lock rather than a
//! `uint64 *` into the caller's struct; it is an atomic in both protocols (relaxed accesses under
//! the wait-list lock for 9.4–16, which compile to the same plain loads and stores). 9.4 set the
//! variable on acquisition (`LWLockAcquireWithVar`); the model offers 9.6's
//! `LWLockReleaseClearVar` for every release.

use pglocks_sync::atomic::{AtomicU64, Ordering::*};
use std::marker::PhantomData;

/// How a release reads and writes an LWLock variable.
pub trait VarProtocol: Send + Sync + 'static {
    /// `true` for 17+'s lock-free 64-bit atomic; `false` for 9.4–16's accesses under the
    /// wait-list lock.
    const ATOMIC: bool;
}

/// 9.4–16: the variable is read and written under the lock's wait-list lock.
#[derive(Debug)]
pub struct LockedVar;

impl VarProtocol for LockedVar {
    const ATOMIC: bool = false;
}

/// 17+: the variable is a `pg_atomic_uint64`, exchanged by writers and read without a lock.
#[derive(Debug)]
pub struct AtomicVar;

impl VarProtocol for AtomicVar {
    const ATOMIC: bool = true;
}

/// The `uint64` an LWLock's variable functions work on (WAL's `insertingAt`), accessed as the
/// release `P` did.
#[derive(Debug)]
pub struct LwLockVar<P: VarProtocol = AtomicVar> {
    value: AtomicU64,
    _protocol: PhantomData<P>,
}

impl<P: VarProtocol> LwLockVar<P> {
    /// A variable holding `value`.
    pub fn new(value: u64) -> Self {
        Self {
            value: AtomicU64::new(value),
            _protocol: PhantomData,
        }
    }

    /// The current value, read without any lock (for tests and reports; the lock functions read
    /// it as their release did).
    pub fn get(&self) -> u64 {
        self.value.load(Acquire)
    }

    /// A read under the wait-list lock (9.4–16) or a lock-free atomic read (17+).
    pub(crate) fn read(&self) -> u64 {
        if P::ATOMIC {
            self.value.load(Acquire)
        } else {
            self.value.load(Relaxed)
        }
    }

    /// A write under the wait-list lock (9.4–16).
    pub(crate) fn write_locked(&self, v: u64) {
        self.value.store(v, Relaxed);
    }

    /// 17+'s `pg_atomic_exchange_u64`: a write with a full barrier, made before the wait-list lock
    /// is taken. Also what peers without a variable protocol use.
    pub fn exchange(&self, v: u64) -> u64 {
        self.value.swap(v, AcqRel)
    }
}

/// What [`wait_for_var`](crate::RawLwLock::wait_for_var) found (`LWLockWaitForVar`'s result and
/// `*newval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarWait {
    /// The lock was free, at once or after waiting: the holder is done (`true`).
    Free,
    /// The lock is still held, but its holder moved the variable to this value (`false`).
    Changed(u64),
}
