//! The cohort lock C-BO-MCS (Dice, Marathe and Shavit, "Lock cohorting: a general technique for
//! designing NUMA locks", PPoPP 2012).
//!
//! # The algorithm
//! A global test-and-set lock with exponential back-off, and an MCS lock per NUMA node. A
//! backend takes its node's local lock, then the global one, unless the local lock came with the
//! global one already held: the *cohort* pass. On release, a holder that sees a waiter queued
//! behind it on the local lock (the tail is not its node: the cohort is not alone) passes the
//! local lock with a flag saying the global lock goes with it, unless its node has used up its
//! passes; then it resets the count and releases the local lock and the global one, so that the
//! other nodes get their turn. A local pass moves the lock between cores of one node; the
//! global lock crosses the interconnect once a batch.
//!
//! | constant | value | source |
//! |---|---|---|
//! | local passes before the global lock is released ([`LOCAL_PASSES`]) | 100 | litl's `BATCH_COUNT` (multicore-locks/litl, include/cbomcs.h), "the default number in the paper" |
//! | back-off of the global lock ([`GLOBAL_BACKOFF`]) | from 512 `pause`s, doubling up to 2^20 − 1 | litl's `DEFAULT_BACKOFF_DELAY` and `MAX_BACKOFF_DELAY` (after Concurrency Kit) |
//!
//! As in litl, the pass count starts at 0, so the first contended release goes global, and an
//! uncontended release does not reset it; the local lock is released before the global one.
//!
//! # Differences from litl
//! - The local locks are made, one per node of the machine the first locker runs on, when the
//!   lock is first taken ([`Backend::numa_nodes`]); litl sizes them from constants.
//! - `try_lock` takes the global lock alone: every holder holds it (itself or through its
//!   cohort), so it excludes as the lock does.

use super::{addr, claim, mcs_acquire, mcs_release, spin_on_try_lock, PerNode};
use crate::{RawSpinLock, StuckSpinlock};
use pglocks_proc::qnode::QueueNode;
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicBool, AtomicPtr, Ordering, TestAndSet};
use pglocks_sync::data::{DataU32, DataU64};
use pglocks_sync::{hint, CachePadded};

/// Local passes before the global lock goes back (litl's `BATCH_COUNT`).
pub const LOCAL_PASSES: u32 = 100;

/// The global lock's back-off in `pause`s: where it starts and the most it grows to.
pub const GLOBAL_BACKOFF: (u32, u32) = (1 << 9, (1 << 20) - 1);

/// `home` of a holder that took the global lock alone (`try_lock`).
const HOME_NONE: u32 = u32::MAX;

/// One node's MCS lock and its cohort state.
#[derive(Debug, Default)]
struct Local {
    tail: AtomicPtr<QueueNode>,
    /// `top_grant`: the local lock was passed with the global one.
    top_grant: DataU32,
    /// Passes left before the global lock goes back (signed, as litl's).
    passes_left: DataU32,
    /// The holder's node, for the release.
    holder: DataU64,
}

/// The global lock and the node that holds it.
#[derive(Debug, Default)]
struct Global {
    locked: AtomicBool,
    /// `top_home`: the node whose cohort holds the global lock.
    home: DataU32,
}

/// C-BO-MCS with `PASSES` local passes and a back-off from `BACKOFF` up to `MAX_BACKOFF`
/// `pause`s; [`CohortLock`] has litl's constants.
#[derive(Debug)]
pub struct Cohort<const PASSES: u32, const BACKOFF: u32, const MAX_BACKOFF: u32> {
    global: CachePadded<Global>,
    locals: PerNode<Local>,
}

/// C-BO-MCS with litl's constants.
pub type CohortLock = Cohort<LOCAL_PASSES, { GLOBAL_BACKOFF.0 }, { GLOBAL_BACKOFF.1 }>;

impl<const PASSES: u32, const BACKOFF: u32, const MAX_BACKOFF: u32>
    Cohort<PASSES, BACKOFF, MAX_BACKOFF>
{
    /// The global test-and-test-and-set lock with exponential back-off.
    #[cold]
    fn global_acquire(&self) {
        let mut delay = BACKOFF;
        loop {
            if !self.global.locked.load(Ordering::Relaxed)
                && !self.global.locked.test_and_set(Ordering::Acquire)
            {
                return;
            }
            for _ in 0..delay {
                hint::spin_loop();
            }
            delay = delay.saturating_mul(2).min(MAX_BACKOFF);
        }
    }

    /// Whether some backend holds the lock (the global lock, which a cohort keeps while it
    /// passes the local lock among itself): what C-RW-WP's readers look at. An `Acquire` load;
    /// a reader that has just counted itself in puts a `SeqCst` fence before it.
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.global.locked.load(Ordering::Acquire)
    }

    fn acquire(&self, backend: &Backend) {
        let (home, local) = self.locals.mine(backend);
        let Some(me) = claim(backend) else {
            return spin_on_try_lock(self);
        };
        mcs_acquire(&local.tail, me, 0);
        local.holder.store(addr(me) as u64, Ordering::Relaxed);
        if local.top_grant.load(Ordering::Relaxed) == 1 {
            local.top_grant.store(0, Ordering::Relaxed);
            return;
        }
        self.global_acquire();
        self.global.home.store(home as u32, Ordering::Relaxed);
    }
}

// SAFETY: every holder holds the global lock, taken by its own test-and-set (Acquire) or passed
// with the local lock by a holder that kept it (the MCS hand-over's Release/Acquire); it is
// released (Release) only by the last holder of a batch, after which that holder no longer
// holds the lock.
unsafe impl<const PASSES: u32, const BACKOFF: u32, const MAX_BACKOFF: u32> RawSpinLock
    for Cohort<PASSES, BACKOFF, MAX_BACKOFF>
{
    const NAME: &'static str = "cohort";

    fn new() -> Self {
        Self {
            global: CachePadded::new(Global::default()),
            locals: PerNode::default(),
        }
    }

    #[inline]
    fn lock(&self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        self.acquire(backend);
        Ok(())
    }

    #[inline]
    fn try_lock(&self) -> bool {
        if self.global.locked.load(Ordering::Relaxed)
            || self.global.locked.test_and_set(Ordering::Acquire)
        {
            return false;
        }
        self.global.home.store(HOME_NONE, Ordering::Relaxed);
        true
    }

    #[inline]
    unsafe fn unlock(&self) {
        let home = self.global.home.load(Ordering::Relaxed);
        if home == HOME_NONE {
            self.global.locked.store(false, Ordering::Release);
            return;
        }
        let local = self.locals.get(home as usize);
        // SAFETY: the holder's node, recorded when it took the lock and kept until now.
        let me = unsafe { &*(local.holder.load(Ordering::Relaxed) as *const QueueNode) };
        if local.tail.load(Ordering::Relaxed) != addr(me) {
            // A waiter of this node: pass it the cohort, unless the node's passes are spent.
            let left = local.passes_left.load(Ordering::Relaxed) as i32 - 1;
            if left >= 0 {
                local.passes_left.store(left as u32, Ordering::Relaxed);
                local.top_grant.store(1, Ordering::Relaxed);
                mcs_release(&local.tail, me, 1);
                me.give_back();
                return;
            }
            local.passes_left.store(PASSES, Ordering::Relaxed);
        }
        mcs_release(&local.tail, me, 1);
        me.give_back();
        self.global.locked.store(false, Ordering::Release);
    }
}
