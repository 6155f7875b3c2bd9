//! Models a backend's process latch (storage/ipc/latch.c, with the wait in waiteventset.c):
//! a flag that anyone may set, and on which its owner sleeps until it is set.
//!
//! A latch is a boolean, not a counter: setting a latch that is already set does nothing, and
//! the owner clears it (`ResetLatch`) before it looks again at whatever it waits for, so a set
//! between the look and the next sleep is not lost. `SetLatch` is cheap when the owner is busy:
//! it reads `is_set` first and only wakes the owner if the owner has announced that it may be
//! asleep (`maybe_sleeping`). The owner announces before its last look at `is_set`, with a full
//! barrier on both sides, so of "the setter missed the announcement" and "the owner missed the
//! flag" at most one happens.
//!
//! The sleep itself is on the backend's semaphore (PostgreSQL sleeps in `epoll_wait` and is
//! woken by a signal or a self-pipe). The semaphore is shared with lock waits, so either kind of
//! wait may take the other's wake-up: a latch wait re-checks the flag and sleeps again, and lock
//! waits re-check their own state, so a stray permit costs a loop, never a lost wake-up.

use pglocks_sync::atomic::{fence, AtomicBool, Ordering::*};
use pglocks_sync::mutant::{active, Mutant};
use pglocks_sync::time::Instant;
use pglocks_sync::Semaphore;

/// Models `Latch` (latch.h): `is_set` and `maybe_sleeping`; the owner is the slot's backend.
#[derive(Debug, Default)]
pub struct Latch {
    is_set: AtomicBool,
    maybe_sleeping: AtomicBool,
}

impl Latch {
    /// Models `SetLatch`: sets the flag, and posts `owner_sem` if it was clear and the owner
    /// may be asleep.
    #[inline]
    pub fn set(&self, owner_sem: &Semaphore) {
        let fenced = !active(Mutant::LatchNoFence);
        if fenced {
            fence(SeqCst);
        }
        if self.is_set.load(Relaxed) {
            return;
        }
        self.is_set.store(true, Relaxed);
        if fenced {
            fence(SeqCst);
        }
        if self.maybe_sleeping.load(Relaxed) {
            owner_sem.unlock();
        }
    }

    /// Models `WaitLatch(WL_LATCH_SET | WL_TIMEOUT)` by the owner: returns `true` once the
    /// latch is set, `false` if `deadline` came first. Does not clear it.
    pub fn wait(&self, sem: &Semaphore, deadline: Option<Instant>) -> bool {
        loop {
            self.maybe_sleeping.store(true, Relaxed);
            if !active(Mutant::LatchNoFence) {
                fence(SeqCst);
            }
            if self.is_set.load(Relaxed) {
                self.maybe_sleeping.store(false, Relaxed);
                return true;
            }
            let woken = match deadline {
                Some(d) => sem.lock_until(d),
                None => {
                    sem.lock();
                    true
                }
            };
            self.maybe_sleeping.store(false, Relaxed);
            if !woken {
                return self.is_set.load(Relaxed);
            }
        }
    }

    /// Models `ResetLatch`: clears the flag, with the barrier that orders it before the
    /// owner's next look at what it waits for.
    #[inline]
    pub fn reset(&self) {
        self.is_set.store(false, Relaxed);
        fence(SeqCst);
    }
}
