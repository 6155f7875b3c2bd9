//! Models the free lists of a shared, partitioned dynahash table (dynahash.c's `FreeListData`,
//! `get_hash_entry` and the `HASH_REMOVE` path of `hash_search_with_hash_value`), which is what
//! the lock table's `LOCK` and `PROCLOCK` hash tables take an element from and give it back to.
//!
//! A shared hash table's elements are made when it is created (`hash_create` and
//! `element_alloc`), in one block per free list, and linked into the list through their own
//! `link` fields; an element taken is the list's head, and an element given back becomes the
//! head again, so a list is a stack, and the element most recently freed is the next one used,
//! by whichever backend asks next. From 8.2 (when the lock table was partitioned) to 9.5 a
//! table kept all its elements on one list guarded by one spinlock, `hctl->mutex`: every
//! insertion and every removal, from every lock-manager partition, went through that one line.
//! 9.6 split it into `NUM_FREELISTS` (32) lists, each a `FreeListData` of its own spinlock,
//! count of entries and head (24 bytes, packed one after the other); an entry's hash code picks
//! its list (`FREELIST_IDX`), an insertion whose list is empty borrows an element from the next
//! non-empty one (and counts it in its own list), and a removal puts the element on the list of
//! the entry's hash code.
//!
//! `element_alloc` links a block's elements so that the list's head is the block's last
//! element: the first element taken from a list is the highest-addressed of its block.
//!
//! Shortcuts: a list's spinlock is a test-and-set loop without `s_lock`'s spin delay (it is held
//! for a handful of instructions); the chain of free elements is kept as a stack of element
//! numbers beside the list rather than in the elements, though taking one still reads the
//! element's `link` and giving one back writes it (the caller's [`Region`] of elements, touched
//! as PostgreSQL's table would be). PostgreSQL creates its lock tables with half their maximum
//! size and adds elements on demand later; here every element exists from the start, each
//! list's block of them contiguous.

use crate::LmgrError;
use pglocks_sync::atomic::{AtomicBool, Ordering::*};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::data::DataUsize;
use pglocks_sync::shmem::{Placed, Region};

/// dynahash.c's `NUM_FREELISTS` (9.6 and later).
pub const NUM_FREELISTS: usize = 32;

/// The bytes of `link` at the start of an element (`HASHELEMENT.link`, a pointer).
const LINK: std::ops::Range<usize> = 0..8;

/// No element: an empty list's head.
const NONE: usize = usize::MAX;

/// dynahash.c's `FreeListData`: 24 bytes, as PostgreSQL's (`slock_t`, `long`, a pointer).
#[repr(C)]
struct FreeListData {
    /// `mutex`.
    mutex: AtomicBool,
    _pad: [u8; 7],
    /// `nentries`: entries in use counted in this list (a `long`; wrapping here).
    nentries: DataUsize,
    /// `freeList`: the head element's number, or [`NONE`].
    head: DataUsize,
}

/// The free elements of one shared hash table, on one or more free lists.
pub(crate) struct FreeLists {
    lists: Box<[FreeListData]>,
    /// The lists' place in a simulated machine's shared-memory map (the table's header).
    _placed: Placed,
    /// Each list's free elements below its head, head last (the model's record of the chain
    /// through the elements' `link` fields). Only touched with the list's mutex held.
    below: Box<[UnsafeCell<Vec<u32>>]>,
    /// The table's elements, for the touches of their `link`.
    elements: Region,
    capacity: usize,
}

// SAFETY: a list's `below` is only reached with that list's mutex held (`with_list`), whose
// acquiring swap and releasing store order the accesses.
unsafe impl Sync for FreeLists {}

impl FreeLists {
    /// `capacity` elements spread over `lists` lists, each list's a contiguous block of
    /// `elements` (the first list takes the remainder), its head the block's last.
    pub fn new(name: &'static str, lists: usize, capacity: usize, elements: Region) -> Self {
        let lists = lists.max(1);
        let share = capacity / lists;
        let mut start = 0;
        let mut heads = Vec::with_capacity(lists);
        let mut below = Vec::with_capacity(lists);
        for i in 0..lists {
            let n = share + if i == 0 { capacity % lists } else { 0 };
            let block: Vec<u32> = (start..start + n).map(|e| e as u32).collect();
            start += n;
            let mut stack = block;
            let head = stack.pop().map_or(NONE, |e| e as usize);
            heads.push(FreeListData {
                mutex: AtomicBool::new(false),
                _pad: [0; 7],
                nentries: DataUsize::new(0),
                head: DataUsize::new(head),
            });
            below.push(UnsafeCell::new(stack));
        }
        let lists: Box<[FreeListData]> = heads.into_boxed_slice();
        Self {
            _placed: Placed::slice(name, &lists),
            lists,
            below: below.into_iter().collect(),
            elements,
            capacity,
        }
    }

    /// The same lists, taking and giving back elements of `elements`.
    pub fn with_elements(self, elements: Region) -> Self {
        Self { elements, ..self }
    }

    /// `FREELIST_IDX`: the list of an entry with hash code `hash`.
    fn list_of(&self, hash: u32) -> usize {
        hash as usize % self.lists.len()
    }

    /// Runs `f` on list `i` with its spinlock held (`SpinLockAcquire`, `SpinLockRelease`).
    fn with_list<R>(&self, i: usize, f: impl FnOnce(&FreeListData, &mut Vec<u32>) -> R) -> R {
        let list = &self.lists[i];
        while list.mutex.swap(true, Acquire) {
            while list.mutex.load(Relaxed) {
                pglocks_sync::hint::spin_loop();
            }
        }
        // SAFETY: the list's mutex is held until the store below.
        let r = self.below[i].with_mut(|below| f(list, unsafe { &mut *below }));
        list.mutex.store(false, Release);
        r
    }

    /// Pops list `i`'s head, if any: reads its `link` for the next head.
    fn pop(&self, list: &FreeListData, below: &mut Vec<u32>) -> Option<u32> {
        let head = list.head.load(Relaxed);
        if head == NONE {
            return None;
        }
        self.elements.read(head, LINK);
        list.head
            .store(below.pop().map_or(NONE, |e| e as usize), Relaxed);
        Some(head as u32)
    }

    /// Takes one element for an entry of hash code `hash` (`get_hash_entry`): from its own list,
    /// or borrowed from the next list that has one; "out of shared memory" when none has.
    pub fn take(&self, hash: u32) -> Result<u32, LmgrError> {
        let own = self.list_of(hash);
        let got = self.with_list(own, |list, below| {
            let e = self.pop(list, below)?;
            list.nentries.fetch_add(1, Relaxed);
            Some(e)
        });
        if let Some(e) = got {
            return Ok(e);
        }
        let n = self.lists.len();
        for k in 1..n {
            let from = (own + k) % n;
            if let Some(e) = self.with_list(from, |list, below| self.pop(list, below)) {
                // Counted in the list of its hash code.
                self.with_list(own, |list, _| list.nentries.fetch_add(1, Relaxed));
                return Ok(e);
            }
        }
        Err(LmgrError::OutOfSharedMemory)
    }

    /// Gives back element `elem` of an entry of hash code `hash`, onto its own list's head.
    pub fn give(&self, hash: u32, elem: u32) {
        self.with_list(self.list_of(hash), |list, below| {
            list.nentries.fetch_sub(1, Relaxed);
            let head = list.head.load(Relaxed);
            self.elements.write(elem as usize, LINK);
            if head != NONE {
                below.push(head as u32);
            }
            list.head.store(elem as usize, Relaxed);
        });
    }

    /// Elements in use (`hash_get_num_entries`: the lists' counts added up).
    pub fn in_use(&self) -> usize {
        // A list's count may go below zero (an entry counted in one list and given back to
        // another), as PostgreSQL's `long` may: the sum is what counts.
        let n = (0..self.lists.len())
            .map(|i| self.with_list(i, |list, _| list.nentries.load(Relaxed)))
            .fold(0usize, usize::wrapping_add);
        debug_assert!(n <= self.capacity);
        n
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_full_list_borrows_and_the_table_holds_exactly_its_capacity() {
        let f = FreeLists::new("test free lists", 4, 10, Region::detached());
        // Every entry hashes to list 1, which starts with 2 elements: the rest are borrowed.
        let taken: Vec<u32> = (0..10).map(|_| f.take(1).unwrap()).collect();
        assert_eq!(f.in_use(), 10);
        assert_eq!(f.take(1), Err(LmgrError::OutOfSharedMemory));
        assert_eq!(f.take(2), Err(LmgrError::OutOfSharedMemory));
        // List 1's block is elements 4 and 5 (list 0 took 4 with the remainder), the last
        // first; then list 2's block (6, 7), list 3's (8, 9) and list 0's (0..4), each last first.
        assert_eq!(taken, [5, 4, 7, 6, 9, 8, 3, 2, 1, 0]);
        // Given back to list 1, each serves any hash code again, the last given first.
        f.give(1, 8);
        assert_eq!(f.take(3), Ok(8));
        for e in taken {
            f.give(1, e);
        }
        assert_eq!(f.in_use(), 0);
        assert_eq!(f.take(1), Ok(0));
    }

    #[test]
    fn one_list_is_one_stack() {
        let f = FreeLists::new("test free lists", 1, 3, Region::detached());
        assert_eq!(
            [0, 7, 99].map(|h| f.take(h).unwrap()),
            [2, 1, 0],
            "the block's last element first"
        );
        assert_eq!(f.take(5), Err(LmgrError::OutOfSharedMemory));
        f.give(42, 1);
        assert_eq!(f.in_use(), 2);
        assert_eq!(f.take(0), Ok(1));
    }
}
