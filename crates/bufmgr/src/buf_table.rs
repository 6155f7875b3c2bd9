//! Models buf_table.c — `InitBufTable`, `BufTableLookup`, `BufTableInsert`, `BufTableDelete` —
//! with the part of dynahash.c the shared buffer table goes through (`hash_search_with_hash_value`,
//! `get_hash_entry`, `element_alloc`), and the `BufferMapping` partition locks
//! (`BufMappingPartitionLock`) that guard it.
//!
//! # The table
//! The shared buffer table maps a [`BufferTag`] to the id of the buffer holding that page. It is
//! one dynahash table, "Shared Buffer Lookup Table", made by `InitBufTable(NBuffers +
//! NUM_BUFFER_PARTITIONS)` (freelist.c's `StrategyInitialize`: `BufferAlloc` inserts a new tag
//! before it deletes the old one, so each partition may hold one entry more for a moment), and
//! split by hash code into `NUM_BUFFER_PARTITIONS` partitions: partition `hash_code % N` is
//! guarded by the `N`-th `BufferMapping` LWLock. A lookup holds its partition's lock in shared
//! mode, an insert or delete holds it exclusively. Nothing here takes a partition lock: every
//! function expects the caller to hold the right one, as buf_table.c does.
//!
//! A dynahash table is chained. A hash code picks a bucket, `hash & (nbuckets - 1)`
//! (`calc_bucket`; `init_htab` makes `nbuckets` the power of two at or above the number of
//! entries, fill factor 1, and at least the number of partitions, so that a bucket belongs to one
//! partition). A bucket is a pointer to the first element of its chain, and an element is a
//! `HASHELEMENT` header (the next element and the hash code) followed by the entry. A search
//! (`hash_search_with_hash_value`) walks the bucket's chain comparing hash codes, and keys where
//! the hash codes agree; an insert links a new element at the chain's end; a delete unlinks one.
//!
//! Elements come from free lists and go back to them, last in first out. A shared table makes
//! all of them at its creation, and `element_alloc` links each batch so that its last element
//! is the first taken. A partitioned table's free lists are shared by its partitions, so they
//! have locks of their own. Up to 9.5 there was one list, with one spinlock (`hctl->mutex`) and
//! the table's entry count beside it: every insert and delete, from every partition, took that
//! spinlock, and its line also holds the masks every search reads. 9.6 split it into
//! `NUM_FREELISTS` (32) `FreeListData`, each a spinlock, an entry count and a list head: an
//! entry's hash code picks its list (`FREELIST_IDX`, `hash % 32`), each list starts with an equal
//! share of the elements, an insert whose list is empty borrows from the next list that has one
//! (`get_hash_entry`), and a delete gives the element to the list of the entry's hash code. With
//! 128 partitions each list serves four partitions, whose inserts hold different LWLocks: the
//! list's spinlock is what orders them. An unpartitioned table (8.1's one `BufMappingLock`)
//! takes no spinlock: its one exclusive lock orders every change.
//!
//! # Where it lies, and what a search touches
//! On a 64-bit build (`MAXALIGN` 8), with PostgreSQL's sizes from dynahash.c, hsearch.h and
//! buf_table.c:
//!
//! - `HASHHDR`, the table's header: the free lists first (9.6+: 32 `FreeListData` of 24 bytes,
//!   `slock_t` padded to 8, `long nentries`, `HASHELEMENT *freeList`; up to 9.5 one
//!   `mutex`, `nentries`, `freeList` triple, the same 24 bytes), then `long dsize`, `long nsegs`
//!   and the three `uint32` masks `max_bucket`, `high_mask`, `low_mask` that `calc_bucket` reads
//!   (16 bytes after the lists: at 40 up to 9.5, at 784 from 9.6). Its free lists hold real
//!   spinlocks, so it is a host structure with that layout (`HashHdr`), charged at its host
//!   address.
//! - the directory (`ShmemInitHash` puts it right after `HASHHDR`): `hash_select_dirsize`
//!   entries, 256 (`DEF_DIRSIZE`) doubled until they cover the segments, 8 bytes each. A region
//!   of the map of its own here; read-only after start-up, so only its first touch costs.
//! - the segments (`seg_alloc`, one `ShmemAlloc` each, one after the other): 256 (`DEF_SEGSIZE`)
//!   8-byte buckets each, so bucket `b` is element `b` of one region.
//! - the elements (`element_alloc`, one `ShmemAlloc` per free list): 40 bytes each — `HASHELEMENT`
//!   (`link` 0..8, `hashvalue` 8..12, padded to 16) and `BufferLookupEnt` (the 20-byte
//!   `BufferTag` key 16..36 and the `int id` 36..40; 8.1–8.3's tag had no fork number and was 16
//!   bytes, leaving the entry 24 bytes after `MAXALIGN` all the same). One region per batch: 9.6+
//!   gives each of its 32 lists `nelem / 32` elements (the first also the remainder).
//!
//! A lookup reads the masks, the directory entry, the bucket, and for each element of the chain
//! up to the match its `link` and `hashvalue`, and its key where the hash code agrees; the
//! match's `id` (`BufTableLookup` returns it). An insert walks the chain the same way to its end,
//! takes an element from the free list (under the list's spinlock: the head, the element's
//! `link`, the count), writes the bucket or the last element's `link`, and the whole new element.
//! A delete walks to the element, and under the list's spinlock lowers the count, writes the
//! bucket or the previous element's `link`, the element's `link` and the list head.
//!
//! # Differences from PostgreSQL
//! - Each partition keeps its chains as Rust vectors of the entries (with their element
//!   numbers), and each free list its element numbers in a vector; the addresses charged are
//!   those of PostgreSQL's elements, buckets and lists. A chain is kept per partition and bucket
//!   slot (`bucket / partitions`), which is PostgreSQL's chain whenever the partition count is a
//!   power of two, as PostgreSQL requires (the `partitions` knob allows others; their chains then
//!   differ only in order).
//! - `get_hash_entry`, finding its list empty, first tries `element_alloc` for more elements
//!   from the segment's spare memory; the table here has only the elements `hash_create` made,
//!   and borrows at once.
//! - From 14, a search that inserts first reads `freeList[0].nentries` (the bucket-split test,
//!   which then finds the table partitioned); that read is not charged.
//! - The directory is a region of its own rather than the bytes after `HASHHDR` (a few
//!   read-only lines), and `HASHHDR` starts on a 128-byte boundary of the host's memory.
//! - The partition locks are one array padded as `P` says, as `MainLWLockArray` pads them.

use crate::tag::BufferTag;
use crate::BufMgrError;
use pglocks_lwlock::{Padding, RawLwLock};
use pglocks_proc::Backend;
use pglocks_spin::{PgSpinLock, RawSpinLock, StuckSpinlock};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::data::{self, DataU64};
use pglocks_sync::shmem::Region;
use pglocks_sync::CachePadded;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;

/// dynahash.c's `NUM_FREELISTS`: the free lists of a partitioned table from 9.6 (one before).
pub const NUM_FREELISTS: usize = 32;
/// dynahash.c's `DEF_SEGSIZE`: buckets per segment.
pub const DEF_SEGSIZE: usize = 256;
/// dynahash.c's `DEF_DIRSIZE`: the directory's least size, in segments.
pub const DEF_DIRSIZE: usize = 256;
/// `sizeof(HASHBUCKET)`: a bucket is a pointer to its first element.
pub const BUCKET_SIZE: usize = 8;
/// `MAXALIGN(sizeof(HASHELEMENT))`: `link` (8) and `hashvalue` (4), padded.
pub const HASHELEMENT_SIZE: usize = 16;
/// `MAXALIGN(sizeof(BufferLookupEnt))`: a 20-byte `BufferTag` and an `int`.
pub const BUFFER_LOOKUP_ENT_SIZE: usize = 24;
/// `elementSize` in `element_alloc`: the header and the entry.
pub const ELEMENT_SIZE: usize = HASHELEMENT_SIZE + BUFFER_LOOKUP_ENT_SIZE;
/// `HASHELEMENT.link` within an element.
const LINK: Range<usize> = 0..8;
/// `HASHELEMENT.hashvalue` within an element.
const HASHVALUE: Range<usize> = 8..12;
/// `BufferLookupEnt.key` (the tag) within an element.
const KEY: Range<usize> = 16..36;
/// `BufferLookupEnt.id` within an element.
const ID: Range<usize> = 36..40;
/// `sizeof(FreeListData)` (9.6+), also the `mutex`, `nentries`, `freeList` start of ≤ 9.5's
/// `HASHHDR`.
pub const FREELIST_DATA_SIZE: usize = 24;
/// Where `max_bucket` lies after the free lists: past `long dsize` and `long nsegs`.
const MASKS_AFTER_FREELISTS: usize = 16;
/// `max_bucket`, `high_mask`, `low_mask`: three `uint32`.
const MASKS_LEN: usize = 12;

// The entry follows the header, the id the key, and the id ends the element.
const _: () = assert!(
    HASHVALUE.end <= HASHELEMENT_SIZE
        && KEY.start == HASHELEMENT_SIZE
        && KEY.end - KEY.start == crate::tag::BUFFER_TAG_SIZE
        && KEY.end == ID.start
        && ID.end == ELEMENT_SIZE
);

/// The shape `hash_create` gives a shared, partitioned table asked for `nelem` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableShape {
    /// Buckets in use: `init_htab`'s `next_pow2_int(nelem)`, at least the partitions.
    pub nbuckets: usize,
    /// Segments of [`DEF_SEGSIZE`] buckets (a power of two).
    pub nsegs: usize,
    /// Directory entries (`hash_select_dirsize`).
    pub dsize: usize,
    /// Free lists: [`NUM_FREELISTS`] (9.6+) or one, and one for an unpartitioned table.
    pub freelists: usize,
    /// Elements of every list but the first: `nelem / freelists`, at least one.
    share: usize,
    /// Elements of the first list: the share, or whatever the others leave of `nelem`.
    first: usize,
}

impl TableShape {
    /// The table `hash_create` makes for `nelem` entries in `partitions` partitions, its free
    /// lists `freelists` (the release's: 32 from 9.6, else 1; an unpartitioned table has one).
    pub fn new(nelem: usize, partitions: usize, freelists: usize) -> Self {
        let nelem = nelem.max(1);
        let mut nbuckets = nelem.next_power_of_two();
        while nbuckets < partitions {
            nbuckets <<= 1;
        }
        let nsegs = ((nbuckets - 1) / DEF_SEGSIZE + 1).next_power_of_two();
        let mut dsize = DEF_DIRSIZE;
        while dsize < nsegs {
            dsize <<= 1;
        }
        let freelists = if partitions > 1 {
            freelists.clamp(1, NUM_FREELISTS)
        } else {
            1
        };
        // hash_create: an equal share each, at least one; the first list takes what the
        // others leave (so a table of fewer elements than lists gets one per list).
        let share = (nelem / freelists).max(1);
        let first = if share * freelists < nelem {
            nelem - share * (freelists - 1)
        } else {
            share
        };
        Self {
            nbuckets,
            nsegs,
            dsize,
            freelists,
            share,
            first,
        }
    }

    /// Elements made: every list's batch.
    pub fn elements(&self) -> usize {
        self.first + self.share * (self.freelists - 1)
    }

    /// The elements `hash_create` gives free list `list` (`element_alloc(hashp, n, list)`).
    pub fn batch_len(&self, list: usize) -> usize {
        if list == 0 {
            self.first
        } else {
            self.share
        }
    }

    /// The free list whose batch element `elem` belongs to, and its index in the batch.
    #[inline]
    pub fn batch_of(&self, elem: usize) -> (usize, usize) {
        if elem < self.first {
            return (0, elem);
        }
        let rest = elem - self.first;
        (1 + rest / self.share, rest % self.share)
    }

    /// Where `max_bucket` lies in `HASHHDR`.
    pub fn masks_offset(&self) -> usize {
        self.freelists * FREELIST_DATA_SIZE + MASKS_AFTER_FREELISTS
    }

    /// `calc_bucket`: with `max_bucket == low_mask == nbuckets - 1`, the low bits.
    #[inline]
    pub fn bucket(&self, hash: u32) -> usize {
        hash as usize & (self.nbuckets - 1)
    }

    /// `FREELIST_IDX`: the list of a hash code.
    #[inline]
    pub fn freelist_of(&self, hash: u32) -> usize {
        hash as usize % self.freelists
    }
}

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

/// One entry of a chain: what the element holds, and which element it is.
#[derive(Debug, Clone, Copy)]
struct Entry {
    hash: u32,
    tag: BufferTag,
    buf_id: u32,
    elem: u32,
}

/// One partition's chains, by bucket slot (`bucket / partitions`).
struct PartitionMap(UnsafeCell<Vec<Vec<Entry>>>);

// SAFETY: a partition's chains are read only with its partition lock held (any mode) and
// changed only with it held exclusively; the LWLock's acquire and release order those accesses.
unsafe impl Sync for PartitionMap {}

/// One free list's element numbers, the head last.
struct FreeStack(UnsafeCell<Vec<u32>>);

// SAFETY: a stack is touched only under its list's spinlock, or, in an unpartitioned table,
// under the one partition lock held exclusively; either orders the accesses.
unsafe impl Sync for FreeStack {}

/// The shared buffer table and its partition locks.
pub(crate) struct BufTable<K: RawLwLock, P: Padding> {
    locks: Box<[P::Cell<K>]>,
    maps: Box<[CachePadded<PartitionMap>]>,
    shape: TableShape,
    hdr: Box<HashHdr>,
    stacks: Box<[FreeStack]>,
    dir: Region,
    buckets: Region,
    /// One region per free list's batch of elements.
    elements: Box<[Region]>,
}

impl<K: RawLwLock, P: Padding> BufTable<K, P> {
    /// `InitBufTable(nelem)` with `partitions` `BufferMapping` locks and `freelists` free lists
    /// (see [`TableShape::new`]), whose spinlocks spin as `tas_spin` says. Places the directory,
    /// the segments and the elements in the simulated shared-memory map, in that order.
    pub fn new(partitions: usize, nelem: usize, freelists: usize, tas_spin: bool) -> Self {
        let shape = TableShape::new(nelem, partitions, freelists);
        let dir = Region::new("Shared Buffer Lookup Table directory", 8, shape.dsize);
        let buckets = Region::new(
            "Shared Buffer Lookup Table buckets",
            BUCKET_SIZE,
            shape.nsegs * DEF_SEGSIZE,
        );
        let elements = (0..shape.freelists)
            .map(|list| {
                Region::new(
                    "Shared Buffer Lookup Table elements",
                    ELEMENT_SIZE,
                    shape.batch_len(list),
                )
            })
            .collect();
        // element_alloc: each list's batch linked so that its last element is taken first.
        let mut first = 0u32;
        let stacks = (0..shape.freelists)
            .map(|list| {
                let n = shape.batch_len(list) as u32;
                let stack = (first..first + n).collect();
                first += n;
                FreeStack(UnsafeCell::new(stack))
            })
            .collect();
        let hdr = Box::new(HashHdr {
            lists: std::array::from_fn(|list| FreeListData {
                mutex: if tas_spin {
                    FreeListMutex::ReadFirst(PgSpinLock::new())
                } else {
                    FreeListMutex::Plain(PgSpinLock::new())
                },
                nentries: DataU64::new(0),
                free_list: DataU64::new(if list < shape.freelists {
                    u64::from(shape.batch_len(list) as u32)
                } else {
                    0
                }),
            }),
        });
        let slots = shape.nbuckets.div_ceil(partitions.max(1));
        Self {
            locks: (0..partitions)
                .map(|_| P::pad(K::new("BufferMapping")))
                .collect(),
            maps: (0..partitions)
                .map(|_| CachePadded::new(PartitionMap(UnsafeCell::new(vec![Vec::new(); slots]))))
                .collect(),
            shape,
            hdr,
            stacks,
            dir,
            buckets,
            elements,
        }
    }

    /// The number of partitions.
    pub fn partitions(&self) -> usize {
        self.locks.len()
    }

    /// `BufTableHashPartition`: `hash_code % NUM_BUFFER_PARTITIONS`.
    #[inline]
    pub fn partition_of(&self, hash_code: u32) -> usize {
        hash_code as usize % self.locks.len()
    }

    /// `BufMappingPartitionLockByIndex`.
    #[inline]
    pub fn lock(&self, partition: usize) -> &K {
        &self.locks[partition]
    }

    /// Whether a free list takes its spinlock: only in a partitioned table (`IS_PARTITIONED`).
    #[inline]
    fn partitioned(&self) -> bool {
        self.locks.len() > 1
    }

    /// Charges `bytes` of element `elem`, read or written.
    #[inline]
    fn touch_elem(&self, elem: u32, bytes: Range<usize>, write: bool) {
        let (list, i) = self.shape.batch_of(elem as usize);
        let region = &self.elements[list];
        if write {
            region.write(i, bytes);
        } else {
            region.read(i, bytes);
        }
    }

    /// `calc_bucket` and the bucket's address (`hash_initial_lookup` from 17): the masks in
    /// `HASHHDR`, the directory entry of the bucket's segment and the bucket, read. Returns the
    /// bucket.
    #[inline]
    fn initial_lookup(&self, hash: u32) -> usize {
        let hdr: *const HashHdr = &*self.hdr;
        let masks = hdr.cast::<u8>().wrapping_add(self.shape.masks_offset());
        data::touch_range(masks, MASKS_LEN, false);
        let bucket = self.shape.bucket(hash);
        self.dir.read(bucket / DEF_SEGSIZE, 0..8);
        self.buckets.read(bucket, 0..BUCKET_SIZE);
        bucket
    }

    /// The chain of `bucket` in partition `partition`'s map.
    #[inline]
    fn slot(&self, bucket: usize) -> usize {
        bucket / self.locks.len()
    }

    /// The collision-chain walk of `hash_search_with_hash_value`: for each element up to the
    /// match, its hash code (and, past it, its `link`), and its key where the hash codes agree.
    fn walk(&self, chain: &[Entry], hash: u32, tag: &BufferTag) -> Option<usize> {
        for (i, e) in chain.iter().enumerate() {
            self.touch_elem(e.elem, HASHVALUE, false);
            if e.hash == hash {
                self.touch_elem(e.elem, KEY, false);
                if e.tag == *tag {
                    return Some(i);
                }
            }
            self.touch_elem(e.elem, LINK, false);
        }
        None
    }

    /// Writes what points at `chain[i]`: the bucket, or the previous element's `link`.
    fn write_prev_link(&self, chain: &[Entry], i: usize, bucket: usize) {
        match i.checked_sub(1) {
            Some(prev) => self.touch_elem(chain[prev].elem, LINK, true),
            None => self.buckets.write(bucket, 0..BUCKET_SIZE),
        }
    }

    /// Models `BufTableLookup`: the buffer holding `tag`, if the table has it.
    ///
    /// # Safety
    /// The caller holds partition `partition_of(hash_code)`'s lock, in either mode.
    #[inline]
    pub unsafe fn lookup(&self, tag: &BufferTag, hash_code: u32) -> Option<u32> {
        let map = &self.maps[self.partition_of(hash_code)].0;
        let bucket = self.initial_lookup(hash_code);
        // SAFETY: the caller holds the partition lock, so no writer runs meanwhile.
        map.with(|m| {
            let chain = unsafe { &(&*m)[self.slot(bucket)] };
            let i = self.walk(chain, hash_code, tag)?;
            self.touch_elem(chain[i].elem, ID, false);
            Some(chain[i].buf_id)
        })
    }

    /// Models `BufTableInsert`: maps `tag` to `buf_id` unless it is mapped already, in which
    /// case the buffer that has it is returned and nothing changes.
    ///
    /// # Safety
    /// The caller holds partition `partition_of(hash_code)`'s lock exclusively.
    pub unsafe fn insert(
        &self,
        b: &mut Backend,
        tag: BufferTag,
        hash_code: u32,
        buf_id: u32,
    ) -> Result<Option<u32>, BufMgrError> {
        let map = &self.maps[self.partition_of(hash_code)].0;
        let bucket = self.initial_lookup(hash_code);
        let slot = self.slot(bucket);
        // SAFETY: the caller holds the partition lock exclusively: no other reader or writer.
        let found = map.with(|m| {
            let chain = unsafe { &(&*m)[slot] };
            self.walk(chain, hash_code, &tag).map(|i| {
                self.touch_elem(chain[i].elem, ID, false);
                chain[i].buf_id
            })
        });
        if found.is_some() {
            return Ok(found);
        }
        // SAFETY: the caller holds the partition lock exclusively, as get_hash_entry requires.
        let elem = unsafe { self.get_hash_entry(b, hash_code)? };
        // SAFETY: as above.
        map.with_mut(|m| {
            let chain = unsafe { &mut (&mut *m)[slot] };
            // Linked at the chain's end, then the element filled: link, hash code, key, id.
            self.write_prev_link(chain, chain.len(), bucket);
            self.touch_elem(elem, 0..ELEMENT_SIZE, true);
            chain.push(Entry {
                hash: hash_code,
                tag,
                buf_id,
                elem,
            });
        });
        Ok(None)
    }

    /// Models `BufTableDelete`: unmaps `tag`; `false` if it was not mapped (PostgreSQL's
    /// "shared buffer hash table corrupted").
    ///
    /// # Safety
    /// The caller holds partition `partition_of(hash_code)`'s lock exclusively.
    pub unsafe fn delete(
        &self,
        b: &mut Backend,
        tag: &BufferTag,
        hash_code: u32,
    ) -> Result<bool, BufMgrError> {
        let map = &self.maps[self.partition_of(hash_code)].0;
        let bucket = self.initial_lookup(hash_code);
        let slot = self.slot(bucket);
        // SAFETY: the caller holds the partition lock exclusively: no other reader or writer.
        let Some((i, elem)) = map.with(|m| {
            let chain = unsafe { &(&*m)[slot] };
            self.walk(chain, hash_code, tag).map(|i| (i, chain[i].elem))
        }) else {
            return Ok(false);
        };
        let list = self.shape.freelist_of(hash_code);
        self.lock_list(b, list)?;
        let fl = &self.hdr.lists[list];
        fl.nentries.fetch_sub(1, Relaxed);
        // The chain closes over the element, which goes on the list's head.
        // SAFETY: the caller holds the partition lock exclusively.
        map.with_mut(|m| {
            let chain = unsafe { &mut (&mut *m)[slot] };
            self.touch_elem(elem, LINK, false);
            self.write_prev_link(chain, i, bucket);
            chain.remove(i);
        });
        fl.free_list.load(Relaxed);
        self.touch_elem(elem, LINK, true);
        fl.free_list.store(u64::from(elem) + 1, Relaxed);
        // SAFETY: the list's spinlock is held (or, unpartitioned, the one partition lock
        // exclusively).
        self.stacks[list].0.with_mut(|s| unsafe { (*s).push(elem) });
        self.unlock_list(list);
        Ok(true)
    }

    /// Takes free list `list`'s spinlock, in a partitioned table.
    #[inline]
    fn lock_list(&self, b: &mut Backend, list: usize) -> Result<(), BufMgrError> {
        if self.partitioned() {
            self.hdr.lists[list]
                .mutex
                .lock(b)
                .map_err(|e| BufMgrError::stuck("dynahash free list", e))?;
        }
        Ok(())
    }

    /// Releases free list `list`'s spinlock, in a partitioned table.
    #[inline]
    fn unlock_list(&self, list: usize) {
        if self.partitioned() {
            // SAFETY: taken by `lock_list` of this caller.
            unsafe { self.hdr.lists[list].mutex.unlock() };
        }
    }

    /// Pops the head of free list `list` (its spinlock held): the head read, the element's
    /// `link` read, the head written. `None` if the list is empty.
    ///
    /// # Safety
    /// The caller holds the list's spinlock, or, unpartitioned, the one partition lock
    /// exclusively.
    unsafe fn pop(&self, list: usize) -> Option<u32> {
        let fl = &self.hdr.lists[list];
        fl.free_list.load(Relaxed);
        // SAFETY: as the caller promises.
        let elem = self.stacks[list].0.with_mut(|s| unsafe { (*s).pop() })?;
        self.touch_elem(elem, LINK, false);
        // SAFETY: as above.
        let next = self.stacks[list]
            .0
            .with(|s| unsafe { (*s).last().map_or(0, |&e| u64::from(e) + 1) });
        fl.free_list.store(next, Relaxed);
        Some(elem)
    }

    /// Models `get_hash_entry`: an element from the list of `hash`, counted in that list's
    /// `nentries`; from 9.6, if that list is empty, one borrowed from the next list that has one
    /// (each list's spinlock taken in turn, and the own list's again to count it).
    ///
    /// # Safety
    /// The caller holds the partition lock of `hash` exclusively.
    unsafe fn get_hash_entry(&self, b: &mut Backend, hash: u32) -> Result<u32, BufMgrError> {
        let own = self.shape.freelist_of(hash);
        self.lock_list(b, own)?;
        // SAFETY: the list's spinlock is held (or the one partition lock exclusively).
        if let Some(elem) = unsafe { self.pop(own) } {
            self.hdr.lists[own].nentries.fetch_add(1, Relaxed);
            self.unlock_list(own);
            return Ok(elem);
        }
        self.unlock_list(own);
        let n = self.shape.freelists;
        for k in 1..n {
            let list = (own + k) % n;
            self.lock_list(b, list)?;
            // SAFETY: that list's spinlock is held.
            let got = unsafe { self.pop(list) };
            self.unlock_list(list);
            if let Some(elem) = got {
                self.lock_list(b, own)?;
                self.hdr.lists[own].nentries.fetch_add(1, Relaxed);
                self.unlock_list(own);
                return Ok(elem);
            }
        }
        Err(BufMgrError::OutOfSharedMemory)
    }

    /// Every entry of partition `partition`.
    ///
    /// # Safety
    /// The caller holds partition `partition`'s lock, in either mode.
    pub unsafe fn entries(&self, partition: usize) -> Vec<(BufferTag, u32)> {
        // SAFETY: the caller holds the partition lock, so no writer runs meanwhile.
        self.maps[partition]
            .0
            .with(|m| unsafe { (*m).iter().flatten().map(|e| (e.tag, e.buf_id)).collect() })
    }

    /// Elements on the free lists (for tests; the caller holds every partition lock
    /// exclusively, or nobody else runs).
    #[cfg(test)]
    pub fn free_elements(&self) -> usize {
        self.stacks
            .iter()
            .map(|s| s.0.with(|v| unsafe { (*v).len() }))
            .sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_lwlock::{AtomicLwLock, NoPadding};
    use pglocks_proc::ProcTable;

    #[test]
    fn the_default_table_has_postgresql_shape() {
        // 16384 buffers and 128 partitions (9.5+): 16512 elements, 32768 buckets in 128
        // segments, a 256-entry directory; 9.6+'s 32 lists of 516 elements.
        let s = TableShape::new(16_384 + 128, 128, NUM_FREELISTS);
        assert_eq!((s.nbuckets, s.nsegs, s.dsize), (32_768, 128, 256));
        assert_eq!(
            (s.freelists, s.batch_len(0), s.batch_len(31)),
            (32, 516, 516)
        );
        assert_eq!(s.masks_offset(), 784);
        assert_eq!(s.batch_of(516 + 3), (1, 3));
        // Up to 9.5, one list: the masks share its line.
        let one = TableShape::new(16_384 + 16, 16, 1);
        assert_eq!((one.freelists, one.batch_len(0)), (1, 16_400));
        assert_eq!(one.masks_offset(), 40);
        // An unpartitioned table (8.1) has one list whatever the release.
        assert_eq!(TableShape::new(100, 1, NUM_FREELISTS).freelists, 1);
        // The remainder goes to the first list.
        let odd = TableShape::new(70, 4, NUM_FREELISTS);
        assert_eq!((odd.batch_len(0), odd.batch_len(1)), (8, 2));
        assert_eq!(odd.batch_of(7), (0, 7));
        assert_eq!(odd.batch_of(8), (1, 0));
        assert_eq!(odd.batch_of(69), (31, 1));
        assert_eq!(odd.elements(), 70);
        // Fewer elements than lists: one each, more than asked for.
        let tiny = TableShape::new(3, 2, NUM_FREELISTS);
        assert_eq!((tiny.batch_len(0), tiny.elements()), (1, 32));
        // Never fewer buckets than partitions.
        assert_eq!(TableShape::new(4, 128, 32).nbuckets, 128);
    }

    #[test]
    fn hashhdr_and_elements_have_postgresql_sizes() {
        assert_eq!(std::mem::size_of::<FreeListData>(), FREELIST_DATA_SIZE);
        assert_eq!(std::mem::align_of::<HashHdr>(), 128);
        assert_eq!(ELEMENT_SIZE, 40);
    }

    type Table = BufTable<AtomicLwLock, NoPadding>;

    #[test]
    fn elements_come_back_last_in_first_out_and_borrow_across_lists() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        // 4 partitions, 32 lists of 2 elements (64 + 4 = 68: the first list has 6).
        let t = Table::new(4, 68, NUM_FREELISTS, true);
        let tag = |n| BufferTag::main(5, 16_384, n);
        // Hash codes chosen directly: list 1 (hash 1 and 33) has two elements, 6 and 7; the
        // last is taken first.
        unsafe {
            assert_eq!(t.insert(&mut b, tag(0), 1, 10).unwrap(), None);
            assert_eq!(t.insert(&mut b, tag(1), 33, 11).unwrap(), None);
            let elems: Vec<u32> = t.maps[1]
                .0
                .with(|m| (*m).iter().flatten().map(|e| e.elem).collect());
            assert_eq!(elems, [7, 6]);
            // A third entry of list 1 borrows list 2's head (element 9).
            assert_eq!(t.insert(&mut b, tag(2), 65, 12).unwrap(), None);
            assert_eq!(t.lookup(&tag(2), 65), Some(12));
            let borrowed = t.maps[1].0.with(|m| {
                (*m).iter()
                    .flatten()
                    .find(|e| e.buf_id == 12)
                    .map(|e| e.elem)
            });
            assert_eq!(borrowed, Some(9));
            // A delete gives the element to the list of its hash code, whose next insert takes
            // it again.
            assert!(t.delete(&mut b, &tag(0), 1).unwrap());
            assert!(!t.delete(&mut b, &tag(0), 1).unwrap());
            assert_eq!(t.insert(&mut b, tag(3), 97, 13).unwrap(), None);
            let again = t.maps[1].0.with(|m| {
                (*m).iter()
                    .flatten()
                    .find(|e| e.buf_id == 13)
                    .map(|e| e.elem)
            });
            assert_eq!(again, Some(7));
            // A tag already there is returned, and takes no element.
            let free = t.free_elements();
            assert_eq!(t.insert(&mut b, tag(3), 97, 99).unwrap(), Some(13));
            assert_eq!(t.free_elements(), free);
            assert_eq!(
                t.hdr.lists[1].nentries.load(Relaxed),
                3,
                "three entries hash to list 1"
            );
        }
    }

    #[test]
    fn a_full_table_says_out_of_shared_memory() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        // Unpartitioned: one list of exactly the elements asked for.
        let t = Table::new(1, 3, NUM_FREELISTS, true);
        unsafe {
            for n in 0..3u32 {
                let tag = BufferTag::main(5, 16_384, n);
                assert_eq!(t.insert(&mut b, tag, n * 2, n).unwrap(), None);
            }
            let e = t
                .insert(&mut b, BufferTag::main(5, 16_384, 9), 18, 9)
                .unwrap_err();
            assert_eq!(e, BufMgrError::OutOfSharedMemory);
            // A delete frees one for the next insert.
            assert!(t.delete(&mut b, &BufferTag::main(5, 16_384, 1), 2).unwrap());
            assert_eq!(
                t.insert(&mut b, BufferTag::main(5, 16_384, 9), 18, 9)
                    .unwrap(),
                None
            );
        }
    }
}
