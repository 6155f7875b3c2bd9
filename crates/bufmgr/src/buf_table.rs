//! Models buf_table.c — `BufTableLookup`, `BufTableInsert`, `BufTableDelete` — and the
//! `BufferMapping` partition locks (`BufMappingPartitionLock`) that guard it.
//!
//! The shared buffer table maps a [`BufferTag`] to the id of the buffer holding that page. It
//! is one dynahash table split by hash code into `NUM_BUFFER_PARTITIONS` partitions; partition
//! `hash_code % N` is guarded by the `N`-th `BufferMapping` LWLock. A lookup holds its
//! partition's lock in shared mode, an insert or delete holds it exclusively. The table itself
//! takes no lock: every function here expects the caller to hold the right one, as buf_table.c
//! does.
//!
//! Differences from PostgreSQL: each partition is its own `HashMap` instead of a slice of one
//! partitioned dynahash table (with its freelists, `NUM_FREELISTS` from 9.6), and the table
//! grows as needed instead of being sized once to `NBuffers + NUM_BUFFER_PARTITIONS` entries.
//! The partition locks are one array padded as `P` says, as `MainLWLockArray` pads them.

use crate::tag::{BufferTag, TagMap};
use pglocks_lwlock::{Padding, RawLwLock};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::CachePadded;

/// One partition's share of the table.
struct PartitionMap(UnsafeCell<TagMap<u32>>);

// SAFETY: a partition's map is read only with its partition lock held (any mode) and written
// only with it held exclusively; the LWLock's acquire and release order those accesses.
unsafe impl Sync for PartitionMap {}

/// The shared buffer table and its partition locks.
pub(crate) struct BufTable<K: RawLwLock, P: Padding> {
    locks: Box<[P::Cell<K>]>,
    maps: Box<[CachePadded<PartitionMap>]>,
}

impl<K: RawLwLock, P: Padding> BufTable<K, P> {
    /// `InitBufTable` with `partitions` `BufferMapping` locks.
    pub fn new(partitions: usize) -> Self {
        Self {
            locks: (0..partitions)
                .map(|_| P::pad(K::new("BufferMapping")))
                .collect(),
            maps: (0..partitions)
                .map(|_| CachePadded::new(PartitionMap(UnsafeCell::new(TagMap::default()))))
                .collect(),
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
        map.with(|m| unsafe { (*m).get(tag).copied() })
    }

    /// Models `BufTableInsert`: maps `tag` to `buf_id` unless it is mapped already, in which
    /// case the buffer that has it is returned and nothing changes.
    ///
    /// # Safety
    /// The caller holds partition `partition_of(hash_code)`'s lock exclusively.
    pub unsafe fn insert(&self, tag: BufferTag, hash_code: u32, buf_id: u32) -> Option<u32> {
        let map = &self.maps[self.partition_of(hash_code)].0;
        // SAFETY: the caller holds the partition lock exclusively: no other reader or writer.
        map.with_mut(|m| match unsafe { (*m).entry(tag) } {
            std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(buf_id);
                None
            }
        })
    }

    /// Models `BufTableDelete`: unmaps `tag`; `false` if it was not mapped (PostgreSQL's
    /// "shared buffer hash table corrupted").
    ///
    /// # Safety
    /// The caller holds partition `partition_of(hash_code)`'s lock exclusively.
    pub unsafe fn delete(&self, tag: &BufferTag, hash_code: u32) -> bool {
        let map = &self.maps[self.partition_of(hash_code)].0;
        // SAFETY: the caller holds the partition lock exclusively: no other reader or writer.
        map.with_mut(|m| unsafe { (*m).remove(tag).is_some() })
    }

    /// Every entry of partition `partition`.
    ///
    /// # Safety
    /// The caller holds partition `partition`'s lock, in either mode.
    pub unsafe fn entries(&self, partition: usize) -> Vec<(BufferTag, u32)> {
        // SAFETY: the caller holds the partition lock, so no writer runs meanwhile.
        self.maps[partition]
            .0
            .with(|m| unsafe { (*m).iter().map(|(t, &b)| (*t, b)).collect() })
    }
}
