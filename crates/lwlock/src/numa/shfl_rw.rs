//! ShflLock's blocking reader-writer lock (Kashyap, Calciu, Cheng, Min and Kim, "Scalable and
//! practical locking with shuffling", SOSP 2019), as the kernel patch of its repository has it
//! (sslab-gatech/shfllock, klocks/shfllocks.patch: the reader-writer semaphore of
//! kernel/locking/rwsem.c and include/linux/rwsem.h).
//!
//! # The algorithm
//! One 64-bit counter word, like an LWLock's state: a writer byte ([`W_LOCKED`]), a
//! writer-waiting bit ([`W_WAITING`]) and the readers' count above them, in units of
//! [`R_BIAS`]. A reader adds its bias and is in if no writer bit was set; a writer swaps the
//! word from zero to locked. Anyone who finds it otherwise queues on the *wait lock*, ShflLock's
//! blocking mutex ([`ShflMutex`](pglocks_spin::numa::ShflMutex)), where it spins and, after a
//! while, parks:
//! - a reader first takes its bias back, and once it holds the wait lock adds it again and waits
//!   only for the writer byte to clear, then lets the wait lock go: the readers queued behind a
//!   writer go in one after another as soon as it leaves;
//! - a writer, holding the wait lock, tries the swap once more; failing, it sets the
//!   writer-waiting bit, which turns new readers to the queue, waits for the readers in to leave
//!   (the word is then the bit alone) and swaps it for locked, then lets the wait lock go.
//!
//! A reader leaves by taking its bias off, a writer by taking the writer byte off (the waiting
//! bit of a writer behind it stays). The wait lock's shuffler moves writers of its NUMA node up
//! behind itself and leaves readers in place, so writers of one node follow one another.
//!
//! | constant | value | source |
//! |---|---|---|
//! | writer byte ([`W_LOCKED`]), waiting bit ([`W_WAITING`]), reader unit ([`R_BIAS`]) | `0x0bf`, `0x100`, `1 << 9` | the patch's include/linux/rwsem.h (`_QW_LOCKED`, `_QW_WAITING`, `_QR_BIAS`) |
//! | the wait lock's spins before parking | 2700 | [`SPINS_BEFORE_PARK`](pglocks_spin::numa::SPINS_BEFORE_PARK) |
//!
//! # Differences from the patch
//! - The patch as released has the writer's `W_WAITING` addition commented out, so that a
//!   steady stream of readers can starve a queued writer; this lock sets it, as the patch's
//!   earlier version in the repository (benchmarks/kernel-syncstress/locks/rwaqm.c) does and as
//!   an LWLock's waiting writer effectively does (it queues, and new readers queue behind it).
//! - The wait lock parks after a count of spins, not when the scheduler asks (see
//!   [`ShflMutex`](pglocks_spin::numa::ShflMutex)); a waiter parks on its backend's semaphore.
//! - Readers and writers at the head of the wait lock spin on the word without parking, as in
//!   the patch.

use crate::LwLockMode;
use pglocks_proc::tranche::{tranche_id, TrancheId};
use pglocks_proc::Backend;
use pglocks_spin::numa::{ShflMutexWith, SPINS_BEFORE_PARK};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU64, Ordering};
use pglocks_sync::{hint, CachePadded};

/// The writer byte: a writer holds the lock.
pub const W_LOCKED: u64 = 0x0bf;
/// A writer holds the wait lock and waits for the readers in to leave.
pub const W_WAITING: u64 = 0x100;
/// Any writer bit: a reader that sees one queues.
const W_MASK: u64 = W_LOCKED | W_WAITING;
/// One reader.
pub const R_BIAS: u64 = 1 << 9;

/// ShflLock's reader-writer lock, its wait lock spinning `SPINS` rounds before parking;
/// [`ShflRwLock`] has the published 2700.
#[derive(Debug)]
pub struct ShflRw<const SPINS: u32> {
    counts: CachePadded<AtomicU64>,
    wait_lock: ShflMutexWith<SPINS>,
    tranche: TrancheId,
}

/// ShflLock's reader-writer lock with the published spin before parking.
pub type ShflRwLock = ShflRw<SPINS_BEFORE_PARK>;

impl<const SPINS: u32> ShflRw<SPINS> {
    fn new(name: &'static str) -> Self {
        Self {
            counts: CachePadded::new(AtomicU64::new(0)),
            wait_lock: ShflMutexWith::new(),
            tranche: tranche_id(name),
        }
    }

    /// `true` if in at once.
    #[inline]
    fn read_lock(&self, b: &mut Backend) -> bool {
        if self.counts.fetch_add(R_BIAS, Ordering::Acquire) & W_MASK == 0 {
            return true;
        }
        self.read_lock_slow(b);
        false
    }

    #[cold]
    fn read_lock_slow(&self, b: &mut Backend) {
        self.counts.fetch_sub(R_BIAS, Ordering::Relaxed);
        self.wait_lock.lock_as(b, true);
        self.counts.fetch_add(R_BIAS, Ordering::Acquire);
        while self.counts.load(Ordering::Acquire) & W_LOCKED != 0 {
            hint::spin_wait();
        }
        // SAFETY: taken just above.
        unsafe { self.wait_lock.unlock() };
    }

    /// `true` if in at once.
    #[inline]
    fn write_lock(&self, b: &mut Backend) -> bool {
        if self.try_write() {
            return true;
        }
        self.write_lock_slow(b);
        false
    }

    #[inline]
    fn try_write(&self) -> bool {
        self.counts
            .compare_exchange(0, W_LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn write_lock_slow(&self, b: &mut Backend) {
        self.wait_lock.lock_as(b, false);
        if !(self.counts.load(Ordering::Relaxed) == 0 && self.try_write()) {
            self.counts.fetch_add(W_WAITING, Ordering::Relaxed);
            loop {
                while self.counts.load(Ordering::Relaxed) != W_WAITING {
                    hint::spin_wait();
                }
                if self
                    .counts
                    .compare_exchange(W_WAITING, W_LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
            }
        }
        // SAFETY: taken just above.
        unsafe { self.wait_lock.unlock() };
    }

    fn try_lock(&self, _: &Backend, mode: LwLockMode) -> bool {
        if mode == LwLockMode::Exclusive {
            return self.try_write();
        }
        if self.counts.load(Ordering::Relaxed) & W_MASK != 0 {
            return false;
        }
        if self.counts.fetch_add(R_BIAS, Ordering::Acquire) & W_MASK == 0 {
            return true;
        }
        self.counts.fetch_sub(R_BIAS, Ordering::Relaxed);
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
    /// The caller holds the lock in `mode` (a wrong mode would corrupt the word's count).
    unsafe fn unlock(&self, _: &Backend, mode: LwLockMode) {
        let share = match mode {
            LwLockMode::Exclusive => W_LOCKED,
            _ => R_BIAS,
        };
        self.counts.fetch_sub(share, Ordering::Release);
    }
}

rw_lwlock!(
    ShflRw<SPINS>,
    "Safe as an LWLock: a writer is in only from a compare-exchange (Acquire) that found the word free of readers \
     and writers (0, or the waiting bit of its own, which only the wait lock's holder sets); a \
     reader is in only from an addition (Acquire) that found no writer bit, or, holding the wait \
     lock (so no writer is waiting), once the writer byte is clear. Every leave is a \
     subtraction with Release, all of them read-modify-writes of one word."
);
