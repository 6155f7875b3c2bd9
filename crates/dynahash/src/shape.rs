//! The shape `ShmemInitHash` and `hash_create` give a shared table (dynahash.c's `init_htab`,
//! `hash_select_dirsize` and the preallocation in `hash_create`): its buckets, segments,
//! directory, free lists and the elements of each list's batch.

use crate::freelist::{FREELIST_DATA_SIZE, NUM_FREELISTS};

/// dynahash.c's `DEF_SEGSIZE`: buckets per segment.
pub const DEF_SEGSIZE: usize = 256;
/// dynahash.c's `DEF_DIRSIZE`: the directory's least size, in segments.
pub const DEF_DIRSIZE: usize = 256;
/// `sizeof(HASHBUCKET)`: a bucket is a pointer to its first element.
pub const BUCKET_SIZE: usize = 8;
/// `MAXALIGN(sizeof(HASHELEMENT))`: `link` (8 bytes) and `hashvalue` (4), padded to 16.
pub const HASHELEMENT_SIZE: usize = 16;
/// Where `max_bucket` lies after the free lists in `HASHHDR`: past `long dsize` and `long nsegs`.
const MASKS_AFTER_FREELISTS: usize = 16;

/// The shape of a shared table: `init_htab`'s buckets for its initial size, the directory
/// `ShmemInitHash` sizes for its largest, and how its elements are split over its free lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableShape {
    /// Buckets in use: the power of two at or above the initial size, at least the partitions.
    pub nbuckets: usize,
    /// Segments of [`DEF_SEGSIZE`] buckets (a power of two).
    pub nsegs: usize,
    /// Directory entries (`hash_select_dirsize` of the largest size).
    pub dsize: usize,
    /// Partitions (`num_partitions`; 1 for an unpartitioned table).
    pub partitions: usize,
    /// Free lists: [`NUM_FREELISTS`] (9.6+) or one; one for an unpartitioned table.
    pub freelists: usize,
    /// Elements of every list but the first.
    share: usize,
    /// Elements of the first list: the share and the remainder.
    first: usize,
}

/// `next_pow2_int` / `my_log2`: the power of two at or above `n` (1 for 0).
fn next_pow2(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// `hash_select_dirsize`'s and `init_htab`'s segments for `nbuckets` buckets.
fn segments(nbuckets: usize) -> usize {
    next_pow2((nbuckets - 1) / DEF_SEGSIZE + 1)
}

impl TableShape {
    /// The table `ShmemInitHash(name, init_size, max_size, …)` makes with `partitions`
    /// partitions (`HASH_PARTITION`; 1 for none) and, when partitioned, `freelists` free lists
    /// (the release's: [`NUM_FREELISTS`] from 9.6, 1 before), holding `max_size` elements.
    pub fn new(init_size: usize, max_size: usize, partitions: usize, freelists: usize) -> Self {
        let partitions = partitions.max(1);
        // init_htab: fill factor 1; never fewer buckets than partitions.
        let nbuckets = next_pow2(init_size).max(next_pow2(partitions));
        let nsegs = segments(nbuckets);
        // hash_select_dirsize(max_size): the directory of a shared table cannot grow.
        let mut dsize = DEF_DIRSIZE;
        while dsize < segments(next_pow2(max_size)).max(nsegs) {
            dsize <<= 1;
        }
        let freelists = if partitions > 1 {
            freelists.clamp(1, NUM_FREELISTS)
        } else {
            1
        };
        // hash_create's split: an equal share each, the first list the remainder (see the
        // crate's differences for a table of fewer elements than lists).
        let max_size = max_size.max(1);
        let share = max_size / freelists;
        let first = max_size - share * (freelists - 1);
        Self {
            nbuckets,
            nsegs,
            dsize,
            partitions,
            freelists,
            share,
            first,
        }
    }

    /// Elements made: every list's batch.
    pub fn elements(&self) -> usize {
        self.first + self.share * (self.freelists - 1)
    }

    /// The elements of free list `list`'s batch (`element_alloc(hashp, n, list)`).
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
        // (No list past the first has elements when the share is 0; no panic to keep.)
        let (q, r) = (
            rest.checked_div(self.share).unwrap_or(0),
            rest.checked_rem(self.share).unwrap_or(0),
        );
        (1 + q, r)
    }

    /// Where `max_bucket` lies in `HASHHDR`: after the free lists, `dsize` and `nsegs`.
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

    /// The partition of a hash code (`hash % num_partitions`, as `LockHashPartition` and
    /// `BufTableHashPartition` compute it).
    #[inline]
    pub fn partition_of(&self, hash: u32) -> usize {
        hash as usize % self.partitions
    }

    /// Bucket slots of one partition's chains: a bucket's slot is `bucket / partitions`.
    pub(crate) fn slots(&self) -> usize {
        self.nbuckets.div_ceil(self.partitions)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_table_has_postgresql_shape() {
        // InitBufTable(16384 + 128) with 128 partitions (9.5+): 32768 buckets in 128 segments,
        // a 256-entry directory; 9.6+'s 32 lists of 516 elements.
        let s = TableShape::new(16_512, 16_512, 128, NUM_FREELISTS);
        assert_eq!((s.nbuckets, s.nsegs, s.dsize), (32_768, 128, 256));
        assert_eq!(
            (s.freelists, s.batch_len(0), s.batch_len(31)),
            (32, 516, 516)
        );
        assert_eq!(s.masks_offset(), 784);
        assert_eq!(s.batch_of(516 + 3), (1, 3));
        // Up to 9.5, one list: the masks share its line.
        let one = TableShape::new(16_400, 16_400, 16, 1);
        assert_eq!((one.freelists, one.batch_len(0)), (1, 16_400));
        assert_eq!(one.masks_offset(), 40);
    }

    #[test]
    fn lock_tables_take_their_buckets_from_the_initial_size_and_directory_from_the_largest() {
        // NLOCKENTS 6400: ShmemInitHash("LOCK hash", 3200, 6400, …) with 16 partitions.
        let s = TableShape::new(3_200, 6_400, 16, NUM_FREELISTS);
        assert_eq!((s.nbuckets, s.nsegs, s.dsize), (4_096, 16, 256));
        assert_eq!(s.elements(), 6_400);
        assert_eq!((s.batch_len(0), s.batch_len(1)), (200, 200));
        // A directory sized for a largest size beyond 256 segments (65536 buckets).
        let big = TableShape::new(100_000, 200_000, 16, NUM_FREELISTS);
        assert_eq!((big.nbuckets, big.nsegs, big.dsize), (131_072, 512, 1_024));
    }

    #[test]
    fn lists_split_the_elements_as_hash_create_does() {
        // An unpartitioned table has one list whatever the release.
        assert_eq!(TableShape::new(100, 100, 1, NUM_FREELISTS).freelists, 1);
        // The remainder goes to the first list.
        let odd = TableShape::new(70, 70, 4, NUM_FREELISTS);
        assert_eq!((odd.batch_len(0), odd.batch_len(1)), (8, 2));
        assert_eq!(odd.batch_of(7), (0, 7));
        assert_eq!(odd.batch_of(8), (1, 0));
        assert_eq!(odd.batch_of(69), (31, 1));
        assert_eq!(odd.elements(), 70);
        // Fewer elements than lists: all on the first, exactly as many as asked for.
        let tiny = TableShape::new(3, 3, 2, NUM_FREELISTS);
        assert_eq!(
            (tiny.batch_len(0), tiny.batch_len(1), tiny.elements()),
            (3, 0, 3)
        );
        // Never fewer buckets than partitions; a bucket's slot in its partition's chains.
        let few = TableShape::new(4, 4, 128, 32);
        assert_eq!((few.nbuckets, few.slots()), (128, 1));
        assert_eq!(TableShape::new(3_200, 6_400, 16, 32).slots(), 256);
    }
}
