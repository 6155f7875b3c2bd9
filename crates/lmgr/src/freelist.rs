//! Models the free lists of a shared, partitioned dynahash table (dynahash.c's `FreeListData`,
//! `get_hash_entry` and the `HASH_REMOVE` path of `hash_search_with_hash_value`), which is what
//! the lock table's `LOCK` and `PROCLOCK` hash tables take an entry from and give it back to.
//!
//! A shared hash table has a fixed number of elements. From 8.2 (when the lock table was
//! partitioned) to 9.5 a partitioned table kept them on one free list guarded by one spinlock,
//! `hctl->mutex`: every insertion and every removal, from every lock-manager partition, went
//! through that one line. 9.6 split it into `NUM_FREELISTS` (32) lists, each with its own
//! spinlock and count; an entry's hash code picks its list (`FREELIST_IDX`), an insertion whose
//! list is empty borrows an element from the next non-empty one, and a removal puts the element
//! on the list of the entry's hash code. The elements start spread evenly over the lists.
//!
//! Shortcut: each list is one atomic count of free elements, taken and given back by
//! read-modify-write, where PostgreSQL takes the list's spinlock, pops or pushes an element and
//! releases it. The line traffic is the same one line per list; the spinlock's own waiting is
//! not modelled.

use crate::LmgrError;
use pglocks_sync::atomic::{AtomicUsize, Ordering::Relaxed};
use pglocks_sync::CachePadded;

/// dynahash.c's `NUM_FREELISTS` (9.6 and later).
pub const NUM_FREELISTS: usize = 32;

/// The free elements of one shared hash table, on `lists` free lists.
pub(crate) struct FreeLists {
    free: Box<[CachePadded<AtomicUsize>]>,
    capacity: usize,
}

impl FreeLists {
    /// `capacity` elements spread over `lists` lists (the first takes the remainder).
    pub fn new(lists: usize, capacity: usize) -> Self {
        let lists = lists.max(1);
        let share = capacity / lists;
        Self {
            free: (0..lists)
                .map(|i| {
                    let extra = if i == 0 { capacity % lists } else { 0 };
                    CachePadded::new(AtomicUsize::new(share + extra))
                })
                .collect(),
            capacity,
        }
    }

    /// `FREELIST_IDX`: the list of an entry with hash code `hash`.
    fn list_of(&self, hash: u32) -> usize {
        hash as usize % self.free.len()
    }

    /// Takes one element for an entry of hash code `hash` (`get_hash_entry`): from its own list,
    /// or borrowed from the next list that has one; "out of shared memory" when none has.
    pub fn take(&self, hash: u32) -> Result<(), LmgrError> {
        let own = self.list_of(hash);
        let n = self.free.len();
        for k in 0..n {
            let list = &self.free[(own + k) % n];
            if list
                .fetch_update(Relaxed, Relaxed, |f| f.checked_sub(1))
                .is_ok()
            {
                return Ok(());
            }
        }
        Err(LmgrError::OutOfSharedMemory)
    }

    /// Gives back the element of an entry of hash code `hash`, onto its own list.
    pub fn give(&self, hash: u32) {
        self.free[self.list_of(hash)].fetch_add(1, Relaxed);
    }

    /// Elements in use.
    pub fn in_use(&self) -> usize {
        self.capacity - self.free.iter().map(|f| f.load(Relaxed)).sum::<usize>()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_full_list_borrows_and_the_table_holds_exactly_its_capacity() {
        let f = FreeLists::new(4, 10);
        // Every entry hashes to list 1, which starts with 2 elements: the rest are borrowed.
        for _ in 0..10 {
            f.take(1).unwrap();
        }
        assert_eq!(f.in_use(), 10);
        assert_eq!(f.take(1), Err(LmgrError::OutOfSharedMemory));
        assert_eq!(f.take(2), Err(LmgrError::OutOfSharedMemory));
        // Given back to list 1, each serves any hash code again.
        f.give(1);
        f.take(3).unwrap();
        for _ in 0..10 {
            f.give(1);
        }
        assert_eq!(f.in_use(), 0);
    }

    #[test]
    fn one_list_is_one_count() {
        let f = FreeLists::new(1, 3);
        for h in [0, 7, 99] {
            f.take(h).unwrap();
        }
        assert_eq!(f.take(5), Err(LmgrError::OutOfSharedMemory));
        f.give(42);
        assert_eq!(f.in_use(), 2);
    }
}
