//! NUMA-aware reader-writer locks in place of LWLocks: the two the literature offers for a lock
//! that is taken shared as well as exclusive, each behind [`RawLwLock`](crate::RawLwLock) with
//! lwlock.c's held-locks bookkeeping, so that every workload can run on them.
//!
//! - [`CohortRwLock`]: C-RW-WP (Calciu et al., PPoPP 2013): readers count themselves on their
//!   own node's indicator, writers take a cohort lock and wait for the indicators to drain.
//!   Readers of different nodes share no line; a write moves every node's indicator line.
//! - [`ShflRwLock`]: ShflLock's blocking reader-writer lock (Kashyap et al., SOSP 2019): one
//!   counter word as an LWLock's, and a wait lock that queues readers and writers in one line,
//!   groups writers by node and parks waiters that wait long.
//!
//! Neither has a wait-until-free mode or a variable protocol: `LWLockAcquireOrWait` takes the
//! lock and drops it when it had to wait, and `LWLockWaitForVar` is the trait's polling
//! default.

/// `RawLwLock` for a reader-writer lock of this module, from its own `lock` (`true`: had at
/// once), `try_lock` and `unlock`, with lwlock.c's held-locks bookkeeping around them.
/// `LWLockAcquireOrWait` takes the lock and drops it when it had to wait.
macro_rules! rw_lwlock {
    ($ty:ident < $c:ident >, $why:literal) => {
        // SAFETY: the lock's `lock`, `try_lock` and `unlock` exclude as a reader-writer lock
        // with Acquire / Release ordering, for the reason the doc attribute gives (loom checks
        // them in tests/loom_lwlock.rs); the rest is the held-locks bookkeeping.
        #[doc = $why]
        unsafe impl<const $c: u32> $crate::RawLwLock for $ty<$c> {
            fn new(name: &'static str) -> Self {
                $ty::new(name)
            }

            #[inline]
            fn acquire(
                &self,
                b: &mut Backend,
                mode: LwLockMode,
            ) -> Result<bool, $crate::LwLockError> {
                $crate::held::check_room(b)?;
                let at_once = self.lock(b, mode);
                $crate::held::record(b, self, mode);
                Ok(at_once)
            }

            #[inline]
            fn conditional_acquire(
                &self,
                b: &mut Backend,
                mode: LwLockMode,
            ) -> Result<bool, $crate::LwLockError> {
                $crate::held::check_room(b)?;
                let got = self.try_lock(b, mode);
                if got {
                    $crate::held::record(b, self, mode);
                }
                Ok(got)
            }

            fn acquire_or_wait(
                &self,
                b: &mut Backend,
                mode: LwLockMode,
            ) -> Result<bool, $crate::LwLockError> {
                if self.conditional_acquire(b, mode)? {
                    return Ok(true);
                }
                self.lock(b, mode);
                // SAFETY: taken just above, in `mode`.
                unsafe { self.unlock(b, mode) };
                Ok(false)
            }

            #[inline]
            fn release(&self, b: &mut Backend) -> Result<(), $crate::LwLockError> {
                let name = pglocks_proc::tranche::tranche_name(self.tranche);
                let mode = $crate::held::forget(b, self, name)?;
                // SAFETY: the backend's held-locks entry records that it took this lock in
                // `mode`.
                unsafe { self.unlock(b, mode) };
                Ok(())
            }
        }
    };
}

mod cohort_rw;
mod shfl_rw;

pub use cohort_rw::{CohortRw, CohortRwLock, READER_PATIENCE};
pub use shfl_rw::{ShflRw, ShflRwLock, R_BIAS, W_LOCKED, W_WAITING};
