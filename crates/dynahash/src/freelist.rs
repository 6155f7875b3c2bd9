//! Models `HASHHDR`'s free lists (dynahash.c's `FreeListData`, `get_hash_entry`,
//! `element_alloc`, and the `HASH_REMOVE` end of `hash_search_with_hash_value`).
//!
//! A list is a stack threaded through its free elements' `link` fields: taking an element pops
//! the head (reading the element's `link` for the next head), giving one back pushes it (writing
//! its `link`). `element_alloc` links a batch so that its last element is the head, so the
//! first element a list hands out is its batch's highest-addressed one, and from then on the
//! element most recently given back is the next one taken, by whichever backend asks next.
//!
//! In a partitioned table every list operation holds the list's `slock_t` (`SpinLockAcquire`,
//! here [`PgSpinLock`] with the `&mut Backend` its spin delay needs): the list is shared by
//! several partitions whose locks do not order each other. `nentries` counts the entries whose
//! hash code picks the list (`FREELIST_IDX`), wherever their elements came from: an insertion
//! that borrowed from another list takes its own list's spinlock once more to count it.
//!
//! # Layout
//! `HashHdr` is `HASHHDR`'s head as PostgreSQL lays it out (64-bit): the lists at byte 0, 24
//! bytes each (`slock_t`, padded to 8; `long nentries`; `HASHELEMENT *freeList`), then `dsize`,
//! `nsegs` and the masks. 9.6+ has [`NUM_FREELISTS`] lists, so the masks lie at byte 784; up to
//! 9.5 one `mutex`, `nentries`, `freeList` triple in the same place, so the masks lie at 40, on
//! the spinlock's line. The model keeps room for 36 lists (the masks' bytes among them) and
//! places the whole in the simulated map.
//!
//! Differences from PostgreSQL: a list's chain of free elements is a vector of element numbers
//! beside the list (the head mirrored in `freeList` as a number); the touches of the elements'
//! `link` fields are charged where PostgreSQL reads and writes them.

use crate::shape::TableShape;
use crate::table::Elements;
use crate::HashError;
use pglocks_proc::Backend;
use pglocks_spin::{PgSpinLock, RawSpinLock, StuckSpinlock};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::data::{self, DataU64};
use pglocks_sync::shmem::Placed;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;

/// dynahash.c's `NUM_FREELISTS`: the free lists of a partitioned table from 9.6 (one before).
pub const NUM_FREELISTS: usize = 32;
/// `sizeof(FreeListData)` (9.6+), also the `mutex`, `nentries`, `freeList` start of ≤ 9.5's
/// `HASHHDR`.
pub const FREELIST_DATA_SIZE: usize = 24;
/// `max_bucket`, `high_mask`, `low_mask`: three `uint32`.
const MASKS_LEN: usize = 12;
/// `HASHELEMENT.link` within an element.
pub(crate) const LINK: Range<usize> = 0..8;

/// A free list's `slock_t`: s_lock.h's `TAS_SPIN` reads first (x86_64 from 9.4) or not.
enum FreeListMutex {
    ReadFirst(PgSpinLock<true>),
    Plain(PgSpinLock<false>),
}

impl FreeListMutex {
    fn lock(&self, b: &mut Backend) -> Result<(), StuckSpinlock> {
        match self {
            FreeListMutex::ReadFirst(l) => l.lock(b),
            FreeListMutex::Plain(l) => l.lock(b),
        }
    }

    /// # Safety
    /// The caller took the lock.
    unsafe fn unlock(&self) {
        // SAFETY: the caller took the lock.
        unsafe {
            match self {
                FreeListMutex::ReadFirst(l) => l.unlock(),
                FreeListMutex::Plain(l) => l.unlock(),
            }
        }
    }
}

/// Models dynahash.c's `FreeListData` (9.6+; up to 9.5 the first 24 bytes of `HASHHDR`): a
/// spinlock, the count of entries whose hash code picks this list, and the list's head.
#[repr(C)]
struct FreeListData {
    /// `mutex`.
    mutex: FreeListMutex,
    /// `nentries`.
    nentries: DataU64,
    /// `freeList`: here the head's element number plus one (0 for none).
    free_list: DataU64,
}

/// The lists of `HASHHDR`, at its start, and room for the fields after the last of them.
const HDR_SLOTS: usize = NUM_FREELISTS + 4;

/// Models `HASHHDR`'s layout: its free lists, then the bytes of `dsize`, `nsegs` and the masks
/// (whose values are the shape's; only their address is used).
#[repr(C, align(128))]
struct HashHdr {
    lists: [FreeListData; HDR_SLOTS],
}

// The list is PostgreSQL's size, and the 9.6+ masks lie inside the modelled header (loom's
// atomics are larger than a byte).
#[cfg(not(loom))]
const _: () = assert!(
    std::mem::size_of::<FreeListData>() == FREELIST_DATA_SIZE
        && NUM_FREELISTS * FREELIST_DATA_SIZE + 16 + MASKS_LEN <= std::mem::size_of::<HashHdr>()
);

/// One free list's element numbers, the head last.
struct FreeStack(UnsafeCell<Vec<u32>>);

/// `HASHHDR` with its free lists, and the model's record of each list's free elements.
pub(crate) struct FreeLists {
    /// The header's place in a simulated machine's shared-memory map.
    /// (First: fields drop in declaration order, and the map must forget this memory before it
    /// is freed.)
    _placed: Placed,
    hdr: Box<HashHdr>,
    stacks: Box<[FreeStack]>,
    /// Where the masks lie in the header.
    masks_offset: usize,
    /// Lists in use.
    lists: usize,
    /// Whether the lists take their spinlocks (`IS_PARTITIONED`).
    partitioned: bool,
}

// SAFETY: a list's stack is touched only under the list's spinlock, or, in an unpartitioned
// table, under the one lock its user holds exclusively for every insertion and removal (the
// contract of `get_hash_entry` and `give_back`); either orders the accesses.
unsafe impl Sync for FreeLists {}

impl FreeLists {
    /// The header of a table of shape `shape` named `name` in the map, its lists' spinlocks
    /// retrying as `tas_spin` says, each list holding its batch (`element_alloc`: numbered
    /// after the batches before it, its last element the head).
    pub fn new(name: &'static str, shape: &TableShape, tas_spin: bool) -> Self {
        let hdr = Box::new(HashHdr {
            lists: std::array::from_fn(|list| FreeListData {
                mutex: if tas_spin {
                    FreeListMutex::ReadFirst(PgSpinLock::new())
                } else {
                    FreeListMutex::Plain(PgSpinLock::new())
                },
                nentries: DataU64::new(0),
                free_list: DataU64::new(if list < shape.freelists {
                    let (first, n) = batch(shape, list);
                    if n == 0 {
                        0
                    } else {
                        u64::from(first + n)
                    }
                } else {
                    0
                }),
            }),
        });
        let stacks = (0..shape.freelists)
            .map(|list| {
                let (first, n) = batch(shape, list);
                FreeStack(UnsafeCell::new((first..first + n).collect()))
            })
            .collect();
        Self {
            _placed: Placed::one(name, &*hdr),
            hdr,
            stacks,
            masks_offset: shape.masks_offset(),
            lists: shape.freelists,
            partitioned: shape.partitions > 1,
        }
    }

    /// `calc_bucket`'s read of `max_bucket`, `high_mask` and `low_mask`.
    #[inline]
    pub fn read_masks(&self) {
        let hdr: *const HashHdr = &*self.hdr;
        data::touch_range(
            hdr.cast::<u8>().wrapping_add(self.masks_offset),
            MASKS_LEN,
            false,
        );
    }

    /// Takes list `list`'s spinlock, in a partitioned table.
    #[inline]
    fn lock(&self, b: &mut Backend, list: usize) -> Result<(), StuckSpinlock> {
        if self.partitioned {
            self.hdr.lists[list].mutex.lock(b)?;
        }
        Ok(())
    }

    /// Releases list `list`'s spinlock, in a partitioned table.
    #[inline]
    fn unlock(&self, list: usize) {
        if self.partitioned {
            // SAFETY: taken by `lock` of this caller.
            unsafe { self.hdr.lists[list].mutex.unlock() };
        }
    }

    /// Pops the head of list `list`: the head read, the element's `link` read, the head
    /// written. `None` if the list is empty.
    ///
    /// # Safety
    /// The caller holds the list's spinlock, or, unpartitioned, its user's one lock
    /// exclusively.
    unsafe fn pop(&self, elements: &Elements, list: usize) -> Option<u32> {
        let fl = &self.hdr.lists[list];
        fl.free_list.load(Relaxed);
        // SAFETY: as the caller promises.
        let elem = self.stacks[list].0.with_mut(|s| unsafe { (*s).pop() })?;
        elements.touch(elem, LINK, false);
        // SAFETY: as above.
        let next = self.stacks[list]
            .0
            .with(|s| unsafe { (*s).last().map_or(0, |&e| u64::from(e) + 1) });
        fl.free_list.store(next, Relaxed);
        Some(elem)
    }

    /// Models `get_hash_entry`: an element for an entry of hash code `hash`, counted in the
    /// `nentries` of the hash code's list; if that list is empty, one borrowed from the next
    /// list that has one (each list's spinlock taken in turn, then the own list's again to
    /// count it). "Out of shared memory" when every list is empty.
    ///
    /// # Safety
    /// In an unpartitioned table, the caller holds its user's one lock exclusively.
    pub unsafe fn get_hash_entry(
        &self,
        b: &mut Backend,
        elements: &Elements,
        list_of_hash: usize,
    ) -> Result<u32, HashError> {
        let own = list_of_hash;
        self.lock(b, own)?;
        // SAFETY: the list's spinlock is held (or the one lock, as the caller promises).
        if let Some(elem) = unsafe { self.pop(elements, own) } {
            self.hdr.lists[own].nentries.fetch_add(1, Relaxed);
            self.unlock(own);
            return Ok(elem);
        }
        self.unlock(own);
        for k in 1..self.lists {
            let list = (own + k) % self.lists;
            self.lock(b, list)?;
            // SAFETY: that list's spinlock is held.
            let got = unsafe { self.pop(elements, list) };
            self.unlock(list);
            if let Some(elem) = got {
                self.lock(b, own)?;
                self.hdr.lists[own].nentries.fetch_add(1, Relaxed);
                self.unlock(own);
                return Ok(elem);
            }
        }
        Err(HashError::OutOfSharedMemory)
    }

    /// The `HASH_REMOVE` end: under list `list`'s spinlock, lowers its count, runs `unlink`
    /// (the chain closing over the element), and pushes `elem` on the list (the head read, the
    /// element's `link` written, the head written).
    ///
    /// # Safety
    /// In an unpartitioned table, the caller holds its user's one lock exclusively.
    pub unsafe fn give_back(
        &self,
        b: &mut Backend,
        elements: &Elements,
        list: usize,
        elem: u32,
        unlink: impl FnOnce(),
    ) -> Result<(), HashError> {
        self.lock(b, list)?;
        let fl = &self.hdr.lists[list];
        fl.nentries.fetch_sub(1, Relaxed);
        unlink();
        fl.free_list.load(Relaxed);
        elements.touch(elem, LINK, true);
        fl.free_list.store(u64::from(elem) + 1, Relaxed);
        // SAFETY: the list's spinlock is held (or the one lock, as the caller promises).
        self.stacks[list].0.with_mut(|s| unsafe { (*s).push(elem) });
        self.unlock(list);
        Ok(())
    }

    /// Entries in use (`hash_get_num_entries`: the lists' counts added up, without their
    /// spinlocks, as PostgreSQL reads them; exact when nothing changes meanwhile).
    pub fn in_use(&self) -> usize {
        self.hdr.lists[..self.lists]
            .iter()
            .map(|l| l.nentries.load(Relaxed))
            .fold(0u64, u64::wrapping_add) as usize
    }

    /// The entries whose hash code picks list `list` (its `nentries`).
    pub fn nentries(&self, list: usize) -> u64 {
        self.hdr.lists[list].nentries.load(Relaxed)
    }

    /// Elements on the lists. Only while no insertion or removal runs.
    pub fn free_elements(&self) -> usize {
        self.stacks
            .iter()
            // SAFETY: nothing changes the stacks meanwhile, as the caller promises.
            .map(|s| s.0.with(|v| unsafe { (*v).len() }))
            .sum()
    }
}

/// List `list`'s batch: its first element's number and its length.
fn batch(shape: &TableShape, list: usize) -> (u32, u32) {
    let first: usize = (0..list).map(|l| shape.batch_len(l)).sum();
    (first as u32, shape.batch_len(list) as u32)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn hashhdr_has_postgresql_sizes() {
        assert_eq!(std::mem::size_of::<FreeListData>(), FREELIST_DATA_SIZE);
        assert_eq!(std::mem::align_of::<HashHdr>(), 128);
        // The masks lie after 32 lists (9.6+) or one (≤ 9.5), past dsize and nsegs.
        let pg96 = TableShape::new(100, 100, 16, NUM_FREELISTS);
        let pg95 = TableShape::new(100, 100, 16, 1);
        assert_eq!((pg96.masks_offset(), pg95.masks_offset()), (784, 40));
    }
}
