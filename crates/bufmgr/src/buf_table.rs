//! Models buf_table.c — `InitBufTable`, `BufTableLookup`, `BufTableInsert`, `BufTableDelete` —
//! and the `BufferMapping` partition locks (`BufMappingPartitionLock`) that guard it.
//!
//! # The table
//! The shared buffer table maps a [`BufferTag`] to the id of the buffer holding that page. It is
//! one shared dynahash table, "Shared Buffer Lookup Table" ([`pglocks_dynahash`], which models
//! its layout, free lists and searches), made by `InitBufTable(NBuffers +
//! NUM_BUFFER_PARTITIONS)` (freelist.c's `StrategyInitialize`: `BufferAlloc` inserts a new tag
//! before it deletes the old one, so each partition may hold one entry more for a moment) with
//! that size both initial and largest, and split by hash code into `NUM_BUFFER_PARTITIONS`
//! partitions: partition `hash_code % N` is guarded by the `N`-th `BufferMapping` LWLock. A
//! lookup holds its partition's lock in shared mode, an insert or delete holds it exclusively.
//! Nothing here takes a partition lock: every function expects the caller to hold the right
//! one, as buf_table.c does.
//!
//! An entry is a `BufferLookupEnt`: the 20-byte `BufferTag` key (8.1–8.3's tag had no fork
//! number and was 16 bytes; the entry is 24 bytes after `MAXALIGN` all the same) and the `int
//! id` at byte 20. `BufTableLookup` reads the match's `id`; `BufTableInsert` writes it into a
//! new entry (dynahash has written the header and key).
//!
//! Up to 9.5 the table has one free list whose spinlock every insert and delete of every
//! partition takes, on the line of the masks every lookup reads; 9.6 split it into
//! `NUM_FREELISTS` (32). An unpartitioned table (8.1's one `BufMappingLock`) takes no spinlock.
//!
//! # Differences from PostgreSQL
//! - The partition locks are one array padded as `P` says, as `MainLWLockArray` pads them.
//! - The table's own differences are [`pglocks_dynahash`]'s.

use crate::tag::BufferTag;
use crate::BufMgrError;
use pglocks_dynahash::{Chains, HashError, HashSpec, RegionNames, SharedHash};
use pglocks_lwlock::{Padding, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::shmem::Placed;
use pglocks_sync::CachePadded;
use std::ops::Range;

pub use pglocks_dynahash::NUM_FREELISTS;

/// `sizeof(BufferLookupEnt)`: a 20-byte `BufferTag` and an `int`.
pub const BUFFER_LOOKUP_ENT_SIZE: usize = 24;
/// `BufferLookupEnt.id`, after the key.
const ID: Range<usize> = 20..24;

const _: () = assert!(ID.start == crate::tag::BUFFER_TAG_SIZE && ID.end == BUFFER_LOOKUP_ENT_SIZE);

/// The regions of "Shared Buffer Lookup Table" in the simulated map.
const NAMES: RegionNames = RegionNames {
    header: "Shared Buffer Lookup Table header",
    directory: "Shared Buffer Lookup Table directory",
    buckets: "Shared Buffer Lookup Table buckets",
    elements: "Shared Buffer Lookup Table elements",
};

/// One partition's entries: tag to buffer id.
struct PartitionMap(UnsafeCell<Chains<BufferTag, u32>>);

// SAFETY: a partition's chains are read only with its partition lock held (any mode) and
// changed only with it held exclusively; the LWLock's acquire and release order those accesses.
unsafe impl Sync for PartitionMap {}

/// The shared buffer table and its partition locks.
pub(crate) struct BufTable<K: RawLwLock, P: Padding> {
    /// The partition locks' place in a simulated machine's shared-memory map, as
    /// `MainLWLockArray`'s `BufferMapping` tranche (placed when the table is made, after the
    /// pool's arrays, where `CreateLWLocks` made them before: a shortcut of order only).
    /// (First: fields drop in declaration order, and the map must forget this memory before it
    /// is freed.)
    _placed: Placed,
    locks: Box<[P::Cell<K>]>,
    maps: Box<[CachePadded<PartitionMap>]>,
    hash: SharedHash<BufferTag, u32>,
}

impl From<HashError> for BufMgrError {
    fn from(e: HashError) -> Self {
        match e {
            HashError::StuckSpinlock(e) => BufMgrError::stuck("dynahash free list", e),
            HashError::OutOfSharedMemory | _ => BufMgrError::OutOfSharedMemory,
        }
    }
}

impl<K: RawLwLock, P: Padding> BufTable<K, P> {
    /// `InitBufTable(nelem)` with `partitions` `BufferMapping` locks and `freelists` free lists
    /// (the release's; see [`pglocks_dynahash::TableShape`]), whose spinlocks spin as
    /// `tas_spin` says. Places the table in the simulated shared-memory map.
    pub fn new(partitions: usize, nelem: usize, freelists: usize, tas_spin: bool) -> Self {
        let hash = SharedHash::new(&HashSpec {
            names: NAMES,
            init_size: nelem,
            max_size: nelem,
            entry_size: BUFFER_LOOKUP_ENT_SIZE,
            key_size: crate::tag::BUFFER_TAG_SIZE,
            partitions,
            freelists,
            tas_spin,
        });
        let locks: Box<[P::Cell<K>]> = (0..partitions)
            .map(|_| P::pad(K::new("BufferMapping")))
            .collect();
        Self {
            _placed: Placed::slice("BufferMapping partitions", &locks),
            locks,
            maps: (0..partitions)
                .map(|_| CachePadded::new(PartitionMap(UnsafeCell::new(hash.chains()))))
                .collect(),
            hash,
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

    /// Models `BufTableLookup`: the buffer holding `tag`, if the table has it.
    ///
    /// # Safety
    /// The caller holds partition `partition_of(hash_code)`'s lock, in either mode.
    #[inline]
    pub unsafe fn lookup(&self, tag: &BufferTag, hash_code: u32) -> Option<u32> {
        let map = &self.maps[self.partition_of(hash_code)].0;
        // SAFETY: the caller holds the partition lock, so no writer runs meanwhile.
        map.with(|m| {
            let (entry, &buf_id) = self.hash.lookup(unsafe { &*m }, hash_code, tag)?;
            entry.read(ID);
            Some(buf_id)
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
        // SAFETY: the caller holds the partition lock exclusively: no other reader or writer,
        // and (unpartitioned) every insert and delete of the table under it.
        map.with_mut(|m| {
            let e = unsafe { self.hash.enter(b, &mut *m, hash_code, tag, |_| buf_id)? };
            if e.found {
                e.entry.read(ID);
                Ok(Some(*e.value))
            } else {
                e.entry.write(ID);
                Ok(None)
            }
        })
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
        // SAFETY: as for `insert`.
        map.with_mut(|m| {
            let gone = unsafe { self.hash.remove(b, &mut *m, hash_code, tag)? };
            Ok(gone.is_some())
        })
    }

    /// Every entry of partition `partition`.
    ///
    /// # Safety
    /// The caller holds partition `partition`'s lock, in either mode.
    pub unsafe fn entries(&self, partition: usize) -> Vec<(BufferTag, u32)> {
        // SAFETY: the caller holds the partition lock, so no writer runs meanwhile.
        self.maps[partition]
            .0
            .with(|m| unsafe { (*m).iter().map(|(&t, &id)| (t, id)).collect() })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_lwlock::{AtomicLwLock, NoPadding};
    use pglocks_proc::ProcTable;

    type Table = BufTable<AtomicLwLock, NoPadding>;

    #[test]
    fn a_tag_maps_to_one_buffer_until_deleted() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let t = Table::new(4, 68, NUM_FREELISTS, true);
        let tag = |n| BufferTag::main(5, 16_384, n);
        let h = |n| tag(n).hash_code();
        // SAFETY: one backend, which takes no partition lock because nobody else runs.
        unsafe {
            assert_eq!(t.insert(&mut b, tag(0), h(0), 10).unwrap(), None);
            assert_eq!(t.insert(&mut b, tag(1), h(1), 11).unwrap(), None);
            assert_eq!(t.lookup(&tag(1), h(1)), Some(11));
            // A tag already there is returned, and nothing changes.
            assert_eq!(t.insert(&mut b, tag(1), h(1), 99).unwrap(), Some(11));
            assert!(t.delete(&mut b, &tag(0), h(0)).unwrap());
            assert!(!t.delete(&mut b, &tag(0), h(0)).unwrap());
            assert_eq!(t.lookup(&tag(0), h(0)), None);
            let all: Vec<_> = (0..4).flat_map(|p| t.entries(p)).collect();
            assert_eq!(all, [(tag(1), 11)]);
        }
    }

    #[test]
    fn a_full_table_says_out_of_shared_memory() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        // Unpartitioned: one list of exactly the elements asked for.
        let t = Table::new(1, 3, NUM_FREELISTS, true);
        let tag = |n| BufferTag::main(5, 16_384, n);
        // SAFETY: as above.
        unsafe {
            for n in 0..3u32 {
                assert_eq!(t.insert(&mut b, tag(n), n * 2, n).unwrap(), None);
            }
            let e = t.insert(&mut b, tag(9), 18, 9).unwrap_err();
            assert_eq!(e, BufMgrError::OutOfSharedMemory);
            // A delete frees one for the next insert.
            assert!(t.delete(&mut b, &tag(1), 2).unwrap());
            assert_eq!(t.insert(&mut b, tag(9), 18, 9).unwrap(), None);
        }
    }
}
