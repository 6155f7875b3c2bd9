//! `parking_lot::RwLock` behind [`RawLwLock`]: the reader-writer lock a Rust programmer would
//! reach for, measured through the same workloads as PostgreSQL's LWLocks.
//!
//! parking_lot's lock is one word too (reader count, writer bit, parked bits), with waiters parked
//! in a global hash table rather than on a per-lock queue, adaptive spinning before parking, and
//! eventual fairness (a lock held long enough is handed to the next waiter). The adapter adds
//! what every LWLock pays for: the entry in the backend's held-locks array, which is how a
//! release knows its mode and how misuse is reported.
//!
//! Differences from an LWLock: there is no wait-until-free mode, so `acquire_or_wait` takes the
//! lock and drops it at once when it had to wait (the caller still returns without the lock after
//! a release, as `LWLockAcquireOrWait` does); the variable functions are the trait's defaults.
//! Not model-checked with loom: parking_lot is not built on the `pglocks-sync` shim, and its
//! algorithm is not ours to check.

use crate::{LwLockError, LwLockMode, RawLwLock, MAX_SIMUL_LWLOCKS};
use parking_lot::lock_api::RawRwLock as _;
use pglocks_proc::tranche::{tranche_id, tranche_name, TrancheId};
use pglocks_proc::Backend;

/// A `parking_lot::RawRwLock` as an LWLock.
pub struct ParkingLotLwLock {
    raw: parking_lot::RawRwLock,
    tranche: TrancheId,
}

impl std::fmt::Debug for ParkingLotLwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkingLotLwLock")
            .field("tranche", &tranche_name(self.tranche))
            .field("locked", &self.raw.is_locked())
            .finish()
    }
}

impl ParkingLotLwLock {
    fn id(&self) -> usize {
        self as *const Self as usize
    }

    #[inline(always)]
    fn try_lock(&self, mode: LwLockMode) -> bool {
        match mode {
            LwLockMode::Exclusive => self.raw.try_lock_exclusive(),
            _ => self.raw.try_lock_shared(),
        }
    }

    fn lock(&self, mode: LwLockMode) {
        match mode {
            LwLockMode::Exclusive => self.raw.lock_exclusive(),
            _ => self.raw.lock_shared(),
        }
    }

    /// Drops a hold in `mode`.
    ///
    /// # Safety
    /// The calling backend holds the lock in `mode`.
    unsafe fn unlock(&self, mode: LwLockMode) {
        // SAFETY: the caller holds the lock in `mode` (the contract above).
        unsafe {
            match mode {
                LwLockMode::Exclusive => self.raw.unlock_exclusive(),
                _ => self.raw.unlock_shared(),
            }
        }
    }
}

// SAFETY: every acquisition and release is parking_lot's `RawRwLock`'s (a reader-writer lock
// with acquire/release ordering); the held-lock bookkeeping only adds the backend's record.
unsafe impl RawLwLock for ParkingLotLwLock {
    fn new(name: &'static str) -> Self {
        Self {
            raw: parking_lot::RawRwLock::INIT,
            tranche: tranche_id(name),
        }
    }

    #[inline]
    fn acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        let at_once = self.try_lock(mode);
        if !at_once {
            self.lock(mode);
        }
        b.held_lwlocks.push(self.id(), mode);
        Ok(at_once)
    }

    #[inline]
    fn conditional_acquire(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        let got = self.try_lock(mode);
        if got {
            b.held_lwlocks.push(self.id(), mode);
        }
        Ok(got)
    }

    fn acquire_or_wait(&self, b: &mut Backend, mode: LwLockMode) -> Result<bool, LwLockError> {
        crate::check_room(b, MAX_SIMUL_LWLOCKS)?;
        if self.try_lock(mode) {
            b.held_lwlocks.push(self.id(), mode);
            return Ok(true);
        }
        self.lock(mode);
        // SAFETY: taken just above, in `mode`.
        unsafe { self.unlock(mode) };
        Ok(false)
    }

    #[inline]
    fn release(&self, b: &mut Backend) -> Result<(), LwLockError> {
        let mode = crate::forget_held(b, self.id(), self.tranche)?;
        // SAFETY: the backend's held-locks entry records that it took this lock in `mode`.
        unsafe { self.unlock(mode) };
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_proc::ProcTable;

    #[test]
    fn behaves_as_an_lwlock() {
        let procs = ProcTable::new(2);
        let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
        let lock = ParkingLotLwLock::new("PlTest");
        assert_eq!(
            lock.release(&mut a).unwrap_err().to_string(),
            "lock PlTest is not held"
        );
        assert!(lock.acquire(&mut a, LwLockMode::Shared).unwrap());
        assert!(lock
            .conditional_acquire(&mut b, LwLockMode::Shared)
            .unwrap());
        assert!(!lock
            .conditional_acquire(&mut b, LwLockMode::Exclusive)
            .unwrap());
        lock.release(&mut a).unwrap();
        lock.release(&mut b).unwrap();
        assert!(lock.acquire_or_wait(&mut a, LwLockMode::Exclusive).unwrap());
        lock.release(&mut a).unwrap();
        assert!(a.held_lwlocks.is_empty() && b.held_lwlocks.is_empty());
    }
}
