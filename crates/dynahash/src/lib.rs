//! Models the layout and memory traffic of a shared, partitioned dynahash table (dynahash.c,
//! hsearch.h, and shmem.c's `ShmemInitHash`): where its header, directory, buckets and elements
//! lie in the shared segment, what `hash_search_with_hash_value` reads and writes of them for a
//! lookup, an insertion and a removal, and its free lists with their spinlocks
//! (`get_hash_entry`, `element_alloc`). The lock manager's `LOCK` and `PROCLOCK` tables and the
//! buffer manager's "Shared Buffer Lookup Table" are such tables; each keeps its contents here
//! and charges its own fields through the element handle ([`Entry`]).
//!
//! # The algorithm
//! A dynahash table is chained. A hash code picks a bucket: `calc_bucket`, which for a shared
//! table (never split: its directory cannot grow) is the hash code's low bits, `hash &
//! (nbuckets - 1)`. `init_htab` makes `nbuckets` the power of two at or above the table's
//! initial size (fill factor 1), and never fewer than the partitions, so that a bucket's
//! entries all belong to one partition. Buckets come in segments of `DEF_SEGSIZE` (256), which
//! a directory points to. A bucket is a pointer to the first element of its chain; an element
//! is a `HASHELEMENT` header (the next element, `link`, and the entry's 32-bit hash code)
//! followed by the entry, key first.
//!
//! `hash_search_with_hash_value` reads the masks in the header, the directory entry of the
//! bucket's segment and the bucket, then walks the chain: for each element, its hash code, and
//! its key where the hash codes agree, until the key matches (and past an element that does
//! not, its `link`). A lookup stops there. An insertion of a key not found takes an element
//! from the free lists, links it at the chain's end (a write of the bucket, or of the last
//! element's `link`) and writes its header and key; the caller fills in the rest of the entry.
//! A removal walks to the element, unlinks it (reading its `link`, writing the bucket or the
//! previous element's `link`) and gives it back.
//!
//! A partitioned table is split by hash code among `num_partitions` partitions, each guarded by
//! a lock of its user's (the `LockManager` or `BufferMapping` LWLocks): a lookup holds its
//! partition's lock in either mode, an insertion or removal exclusively. Nothing here takes a
//! partition lock; every operation expects the caller to hold the right one.
//!
//! Elements come from free lists and go back to them, last in first out. A shared table makes
//! its initial elements when it is created, one `element_alloc` batch per free list, each
//! batch linked so that its last element is the first taken. The free lists are shared by the
//! partitions, so in a partitioned table they have spinlocks of their own. Up to 9.5 there is
//! one list, whose spinlock (`hctl->mutex`) and entry count open `HASHHDR`: every insertion and
//! removal of every partition takes that spinlock, on the line that also holds the masks every
//! search reads. 9.6 split it into `NUM_FREELISTS` (32) `FreeListData`: an entry's hash code
//! picks its list (`FREELIST_IDX`, `hash % 32`), each list starts with an equal share of the
//! elements, an insertion whose list is empty borrows from the next list that has one
//! (`get_hash_entry`), and a removal gives the element to the list of the entry's hash code. An
//! unpartitioned table takes no spinlock: the one lock its user holds orders every change.
//!
//! # Where it lies
//! On a 64-bit build (`MAXALIGN` 8), with dynahash.c's and hsearch.h's sizes, in the order
//! `ShmemInitHash` and `hash_create` allocate them ([`SharedHash::new`]):
//!
//! - `HASHHDR` ([`freelist`]): the free lists first (9.6+: 32 `FreeListData` of 24 bytes, an
//!   `slock_t` padded to 8, `long nentries`, `HASHELEMENT *freeList`; up to 9.5 the one
//!   `mutex`, `nentries`, `freeList` triple, the same 24 bytes), then `long dsize`, `long
//!   nsegs` and the three `uint32` masks `max_bucket`, `high_mask`, `low_mask` that
//!   `calc_bucket` reads: at byte 40 up to 9.5, at 784 from 9.6. Its free lists hold real
//!   spinlocks ([`pglocks_spin::PgSpinLock`]), so it is a host structure of that layout, placed
//!   in the simulated shared-memory map ([`pglocks_sync::shmem::Placed`]).
//! - the directory: `hash_select_dirsize(max_size)` entries, 256 (`DEF_DIRSIZE`) doubled until
//!   they cover the segments the largest size needs, 8 bytes each; read-only once made.
//! - the segments (`seg_alloc`, one after the other): 256 buckets of 8 bytes each, so bucket
//!   `b` is element `b` of one region.
//! - the elements (`element_alloc`, one allocation per free list): `MAXALIGN(sizeof(HASHELEMENT))`
//!   (16: `link` 0..8, `hashvalue` 8..12) plus `MAXALIGN(entrysize)` each, one region per batch.
//!
//! # Differences from PostgreSQL
//! - The table's contents are Rust values: each partition's chains are vectors of the entries
//!   with their keys, values and element numbers ([`Chains`]), and each free list's element
//!   numbers a vector beside it. The addresses charged are those of PostgreSQL's header,
//!   directory, buckets and elements.
//! - Every element exists from the start, `max_size` of them (PostgreSQL preallocates the
//!   initial size and takes the rest from the segment's spare memory as the table grows,
//!   `element_alloc` from `get_hash_entry`): an insertion finding its list empty borrows at
//!   once, and the `max_size`-th entry is the last ("out of shared memory" after it, where
//!   PostgreSQL may find some spare memory first). They are split over the lists as
//!   `hash_create` splits its preallocation, but a table of fewer elements than lists (a test's)
//!   leaves the later lists empty rather than giving each one element more than asked for.
//! - From 14, an insertion first reads `freeList[0].nentries` (the bucket-split test, which then
//!   finds the table partitioned); that read is not charged.
//! - The directory is a region of its own rather than the bytes right after `HASHHDR` (a few
//!   read-only lines).

pub mod freelist;
pub mod shape;
pub mod table;

pub use freelist::{FREELIST_DATA_SIZE, NUM_FREELISTS};
pub use shape::{TableShape, BUCKET_SIZE, DEF_DIRSIZE, DEF_SEGSIZE, HASHELEMENT_SIZE};
pub use table::{Chains, Entered, Entry, HashSpec, RegionNames, SharedHash};

pub use pglocks_spin::StuckSpinlock;

/// Errors of a shared hash table, in PostgreSQL's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HashError {
    /// No free element on any list (`hash_search_with_hash_value`'s `HASH_ENTER` in a shared
    /// table: "out of shared memory").
    #[error("out of shared memory")]
    OutOfSharedMemory,
    /// A free list's spinlock was never released (s_lock.c's `s_lock_stuck`).
    #[error("stuck spinlock detected at a dynahash free list (gave up after {} sleeps)", .0.delays)]
    StuckSpinlock(StuckSpinlock),
}

impl From<StuckSpinlock> for HashError {
    fn from(e: StuckSpinlock) -> Self {
        HashError::StuckSpinlock(e)
    }
}
