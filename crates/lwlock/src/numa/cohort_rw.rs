//! C-RW-WP: the NUMA-aware reader-writer lock of Calciu, Dice, Lev, Luchangco, Marathe and
//! Shavit ("NUMA-aware reader-writer locks", PPoPP 2013), writer-preferring, with readers'
//! patience.
//!
//! # The algorithm
//! Writers exclude one another with a cohort lock ([`CohortLock`], C-BO-MCS), so that the write
//! lock, and the data writers touch, stay on one NUMA node for a batch of writers. Readers take
//! nothing shared with other nodes: each counts itself in and out on its own node's *reader
//! indicator*, a counter on lines of its own, and is in when, after counting itself in, it sees
//! the cohort lock free. A writer takes the cohort lock and then waits for every node's
//! indicator to drop to zero. The two sides meet as in Dekker's algorithm: a reader writes its
//! indicator and then reads the lock, a writer writes the lock and then reads the indicators, a
//! full fence between on each side, so that at least one of them sees the other.
//!
//! *Writer preference*: a reader that finds the lock held counts itself out again and waits
//! until it is free, so a stream of writers is not held up by readers arriving meanwhile, and a
//! batch of writers passes the cohort lock among itself without readers getting in. *Patience*:
//! a reader that has waited [`READER_PATIENCE`] rounds raises the writer barrier, a count that
//! new writers wait on before they take the cohort lock, and lowers it once it is in; so a
//! writer stream cannot starve readers for ever.
//!
//! | constant | value | source |
//! |---|---|---|
//! | rounds a reader waits before it raises the writer barrier ([`READER_PATIENCE`]) | 1000 | `PATIENCE` of the C-RW-WP implementations after the paper (eelejalde/rw-numa-locks) and Concurrency Kit's `CK_RWCOHORT_WP_DEFAULT_WAIT_LIMIT` |
//! | the cohort lock's local passes, back-off | 100; 512 … 2^20 − 1 `pause`s | [`CohortLock`] (litl's C-BO-MCS) |
//!
//! # As an LWLock, and what it leaves out
//! - Nobody sleeps: readers and writers spin, as in the paper. An LWLock's waiter sleeps on its
//!   semaphore; this lock is a measure of what NUMA-aware spinning would do in its place.
//! - `LWLockAcquire`'s answer (had without waiting) is whether the writer barrier was down, the
//!   cohort lock looked free and no reader had to be waited for; the cohort lock itself does not
//!   say whether its local queue was empty.
//! - `LWLockAcquireOrWait` takes the lock and drops it when it had to wait (no wait-until-free
//!   mode), and the variable protocol is the trait's default, which polls.
//! - A reader counts itself out on the node it counted itself in on, the backend's
//!   [`Backend::numa_node`], which a backend must not change while it holds the lock.

use crate::LwLockMode;
use pglocks_proc::tranche::{tranche_id, TrancheId};
use pglocks_proc::Backend;
use pglocks_spin::numa::{CohortLock, PerNode};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use pglocks_sync::{hint, CachePadded};

/// Rounds a reader waits for a writer before it raises the writer barrier.
pub const READER_PATIENCE: u32 = 1000;

/// C-RW-WP with readers' patience `PATIENCE`; [`CohortRwLock`] has the published 1000.
#[derive(Debug)]
pub struct CohortRw<const PATIENCE: u32> {
    writers: CohortLock,
    /// Each node's reader indicator: the readers of the node that are in or on their way in.
    readers: PerNode<AtomicU64>,
    /// Readers out of patience; a writer waits for none before it takes `writers`.
    barrier: CachePadded<AtomicU32>,
    tranche: TrancheId,
}

/// C-RW-WP with the published patience.
pub type CohortRwLock = CohortRw<READER_PATIENCE>;

impl<const PATIENCE: u32> CohortRw<PATIENCE> {
    fn new(name: &'static str) -> Self {
        Self {
            writers: CohortLock::new(),
            readers: PerNode::default(),
            barrier: CachePadded::new(AtomicU32::new(0)),
            tranche: tranche_id(name),
        }
    }

    /// A reader counts itself in on `mine` and looks for a writer: `true` if none holds the
    /// lock (the reader is in), else it has counted itself out again.
    #[inline]
    fn reader_enters(&self, mine: &AtomicU64) -> bool {
        mine.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if !self.writers.is_locked() {
            return true;
        }
        mine.fetch_sub(1, Ordering::Relaxed);
        false
    }

    /// The reader's arrival: `true` if in at the first look.
    #[inline]
    fn read_lock(&self, b: &Backend) -> bool {
        let (_, mine) = self.readers.mine(b);
        if self.reader_enters(mine) {
            return true;
        }
        self.read_lock_slow(mine);
        false
    }

    #[cold]
    fn read_lock_slow(&self, mine: &AtomicU64) {
        let mut raised = false;
        let mut rounds = 0u32;
        loop {
            while self.writers.is_locked() {
                if !raised {
                    rounds += 1;
                    if rounds >= PATIENCE {
                        self.barrier.fetch_add(1, Ordering::Relaxed);
                        raised = true;
                    }
                }
                hint::spin_loop();
            }
            if self.reader_enters(mine) {
                break;
            }
        }
        if raised {
            self.barrier.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The writer's acquisition: the barrier, the cohort lock, then every reader indicator
    /// empty. `true` if nothing was waited for.
    fn write_lock(&self, b: &mut Backend) -> bool {
        self.readers.mine(b);
        let mut at_once = true;
        while self.barrier.load(Ordering::Relaxed) > 0 {
            at_once = false;
            hint::spin_loop();
        }
        at_once &= !self.writers.is_locked();
        // The cohort lock never reports a stuck spinlock: it spins without a limit.
        let _ = self.writers.lock(b);
        fence(Ordering::SeqCst);
        self.wait_for_readers() && at_once
    }

    /// Waits for every node's reader indicator to be empty: `true` if all were at once.
    fn wait_for_readers(&self) -> bool {
        let mut at_once = true;
        for readers in self.readers.all() {
            while readers.load(Ordering::Acquire) != 0 {
                at_once = false;
                hint::spin_wait();
            }
        }
        at_once
    }

    fn try_lock(&self, b: &Backend, mode: LwLockMode) -> bool {
        let (_, mine) = self.readers.mine(b);
        if mode != LwLockMode::Exclusive {
            return self.reader_enters(mine);
        }
        if !self.writers.try_lock() {
            return false;
        }
        fence(Ordering::SeqCst);
        if self
            .readers
            .all()
            .iter()
            .all(|r| r.load(Ordering::Acquire) == 0)
        {
            return true;
        }
        // SAFETY: taken just above.
        unsafe { self.writers.unlock() };
        false
    }

    fn lock(&self, b: &mut Backend, mode: LwLockMode) -> bool {
        match mode {
            LwLockMode::Exclusive => self.write_lock(b),
            _ => self.read_lock(b),
        }
    }

    /// Drops a hold in `mode`.
    ///
    /// # Safety
    /// `b` holds the lock in `mode`.
    unsafe fn unlock(&self, b: &Backend, mode: LwLockMode) {
        match mode {
            // SAFETY: the caller holds the write lock, so the cohort lock.
            LwLockMode::Exclusive => unsafe { self.writers.unlock() },
            _ => {
                let (_, mine) = self.readers.mine(b);
                mine.fetch_sub(1, Ordering::Release);
            }
        }
    }
}

rw_lwlock!(
    CohortRw<PATIENCE>,
    "Safe as an LWLock: a writer holds the cohort lock (a mutex) and entered only after a full fence and after \
     seeing every reader indicator at zero (Acquire, pairing with the readers' Release \
     count-out, all of them read-modify-writes of one release sequence); a reader is in only \
     after counting itself in and, after a full fence, seeing the cohort lock free (Acquire, \
     pairing with the last writer's Release unlock). The two fences make the store-then-load on \
     each side a Dekker pair: a reader and a writer cannot both miss the other."
);
