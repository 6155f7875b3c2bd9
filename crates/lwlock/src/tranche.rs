//! Models the partitioned LWLock tranches of lwlock.c / lwlock.h: arrays of locks of which a
//! hash code picks one (`BufTableHashPartition`, `LockHashPartition`,
//! `PredicateLockHashPartition`: `hashcode % N`), so that lookups of unrelated keys rarely meet
//! on one lock. Code that needs several partitions at once takes them in ascending order, which
//! is what keeps two such backends from deadlocking.
//!
//! Differences from PostgreSQL: each tranche is its own array rather than a stretch of
//! `MainLWLockArray`; every lock is padded to [`CachePadded`]'s alignment (128 bytes on x86_64,
//! PostgreSQL's `PG_CACHE_LINE_SIZE`), as `LWLockPadded` is from 9.6.

use crate::{AtomicLwLock, LwLockError, LwLockMode, Pg96Layout, StateLayout};
use pglocks_sync::{Backend, CachePadded};

/// lwlock.h's `NUM_BUFFER_PARTITIONS` from 9.5 (16 in 8.2–9.4).
pub const NUM_BUFFER_PARTITIONS: usize = 128;
/// lwlock.h's `NUM_LOCK_PARTITIONS` (16 since 8.2).
pub const NUM_LOCK_PARTITIONS: usize = 16;
/// lwlock.h's `NUM_PREDICATELOCK_PARTITIONS`.
pub const NUM_PREDICATELOCK_PARTITIONS: usize = 16;

/// A partitioned tranche: `BufferMapping`, `LockManager`, `PredicateLockManager`.
#[derive(Debug)]
pub struct PartitionedTranche<L: StateLayout = Pg96Layout> {
    locks: Box<[CachePadded<AtomicLwLock<L>>]>,
}

impl<L: StateLayout> PartitionedTranche<L> {
    /// `partitions` locks named `name`.
    ///
    /// # Panics
    /// If `partitions` is 0 (a configuration error of the caller, not of a user).
    pub fn new(name: &'static str, partitions: usize) -> Self {
        assert!(partitions > 0, "a tranche needs at least one partition");
        Self {
            locks: (0..partitions)
                .map(|_| CachePadded::new(AtomicLwLock::new(name)))
                .collect(),
        }
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// Whether the tranche has no partitions (never: see [`Self::new`]).
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// The partition a hash code belongs to (`hashcode % N`, as `BufTableHashPartition`).
    #[inline(always)]
    pub fn partition_for(&self, hashcode: u32) -> usize {
        hashcode as usize % self.locks.len()
    }

    /// The lock of partition `i` (`BufMappingPartitionLockByIndex` and friends).
    #[inline(always)]
    pub fn lock(&self, i: usize) -> &AtomicLwLock<L> {
        &self.locks[i]
    }

    /// The lock guarding `hashcode` (`BufMappingPartitionLock`, `LockHashPartitionLock`).
    #[inline(always)]
    pub fn lock_for(&self, hashcode: u32) -> &AtomicLwLock<L> {
        self.lock(self.partition_for(hashcode))
    }

    /// Takes the given partitions (duplicates allowed) in ascending order, as code that needs
    /// several must (e.g. the deadlock checker takes all of `LockManager`). On error, releases
    /// what it took.
    pub fn acquire_ascending(
        &self,
        b: &mut Backend,
        mode: LwLockMode,
        partitions: &mut Vec<usize>,
    ) -> Result<(), LwLockError> {
        partitions.sort_unstable();
        partitions.dedup();
        for (n, &p) in partitions.iter().enumerate() {
            if let Err(e) = self.lock(p).acquire(b, mode) {
                for &q in partitions[..n].iter().rev() {
                    self.lock(q).release(b)?;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Releases the given partitions, newest first.
    pub fn release_all_of(&self, b: &mut Backend, partitions: &[usize]) -> Result<(), LwLockError> {
        for &p in partitions.iter().rev() {
            self.lock(p).release(b)?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_sync::ProcTable;

    #[test]
    fn partition_is_hash_modulo_count() {
        let t: PartitionedTranche = PartitionedTranche::new("BufferMapping", NUM_BUFFER_PARTITIONS);
        assert_eq!(t.partition_for(0), 0);
        assert_eq!(t.partition_for(129), 1);
        assert_eq!(t.partition_for(u32::MAX), u32::MAX as usize % 128);
        assert!(std::ptr::eq(t.lock_for(130), t.lock(2)));
    }

    #[test]
    fn several_partitions_are_taken_in_ascending_order_once_each() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let t: PartitionedTranche = PartitionedTranche::new("LockManager", NUM_LOCK_PARTITIONS);
        let mut parts = vec![9, 3, 9, 0];
        t.acquire_ascending(&mut b, LwLockMode::Exclusive, &mut parts)
            .unwrap();
        assert_eq!(parts, vec![0, 3, 9]);
        let held: Vec<usize> = b.held_lwlocks.as_slice().iter().map(|e| e.0).collect();
        let want: Vec<usize> = parts
            .iter()
            .map(|&p| t.lock(p) as *const _ as usize)
            .collect();
        assert_eq!(held, want);
        t.release_all_of(&mut b, &parts).unwrap();
        assert!(b.held_lwlocks.is_empty());
    }
}
