//! Models where a shared, partitioned dynahash table (dynahash.c) keeps its buckets and
//! entries, and what a lookup, an insertion and a removal read and write of them: the memory
//! traffic of the lock table's `LOCK` and `PROCLOCK` hash tables, whose contents the model
//! keeps in Rust maps (`crate::table`).
//!
//! A shared table has a power-of-two number of buckets, the next one at or above its initial
//! size (`init_htab`, with the fill factor 1), each an 8-byte pointer to the first element of
//! its chain, in segments of 256 (`DEF_SEGSIZE`) allocated one after the other. An entry's
//! bucket is its hash code's low bits (`calc_bucket`, for a table that never splits buckets),
//! and since the partition count divides the bucket count, every entry of a bucket belongs to
//! the same partition, whose lock orders the chain. An element is a `HASHELEMENT` header (the
//! next element's pointer, `link`, and the entry's 32-bit hash code, 16 bytes with alignment)
//! followed by the entry, key first.
//!
//! `hash_search_with_hash_value` reads the bucket and walks its chain, comparing each
//! element's hash code and, when it matches, its key. An insertion takes an element from the
//! free lists ([`FreeLists`]) and links it at the chain's end (a write of the bucket, or of the
//! last element's `link`), then fills in its header and key; a removal walks to the element,
//! unlinks it (a write of the bucket or of the previous element's `link`) and gives it back.
//! Chains are kept in insertion order, as the table keeps them.
//!
//! Shortcut: the directory and the header (`HASHHDR`, whose bucket masks every lookup reads)
//! are not charged; nor is the shorter chain walk of a lookup that PostgreSQL's `hashvalue`
//! test would cut short on a key it does not compare.

use crate::freelist::FreeLists;
use crate::LmgrError;
use pglocks_sync::shmem::Region;
use std::collections::BTreeMap;
use std::ops::Range;

/// `MAXALIGN(sizeof(HASHELEMENT))`: the header before each entry.
pub(crate) const ELEMENT_HEADER: usize = 16;
/// The bytes of the header's `hashvalue`.
const HASHVALUE: Range<usize> = 8..12;
/// The bytes of the header (`link` and `hashvalue`).
const HEADER: Range<usize> = 0..12;
/// A bucket: a pointer.
const BUCKET: usize = 8;

/// Where one shared hash table lies: its buckets, its elements, its free lists.
pub(crate) struct SharedHash {
    buckets: Region,
    elements: Region,
    /// `nbuckets - 1`.
    mask: u32,
    /// Bytes of an entry's key (the start of the entry).
    key: usize,
    freelists: FreeLists,
}

/// One partition's share of a table's chains: each non-empty bucket's elements, in chain
/// order. Ordered by the partition's lock.
#[derive(Debug, Default)]
pub(crate) struct Chains(BTreeMap<u32, Vec<u32>>);

/// Where an entry lies: its table's elements and its element's number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    elements: Region,
    elem: u32,
}

impl Entry {
    /// The entry reads `bytes` of itself (offsets in the entry, after the header).
    #[inline]
    pub fn read(&self, bytes: Range<usize>) {
        self.elements.read(
            self.elem as usize,
            ELEMENT_HEADER + bytes.start..ELEMENT_HEADER + bytes.end,
        );
    }

    /// The entry writes `bytes` of itself.
    #[inline]
    pub fn write(&self, bytes: Range<usize>) {
        self.elements.write(
            self.elem as usize,
            ELEMENT_HEADER + bytes.start..ELEMENT_HEADER + bytes.end,
        );
    }
}

impl SharedHash {
    /// A table whose free lists, buckets and elements are named `names` (`"LOCK hash free
    /// lists"`, …), placed in that order as `hash_create` allocates them, of `capacity` entries of `entry_bytes` (a key of
    /// `key_bytes` first), created with `capacity / 2` (as `InitLocks` creates the lock
    /// tables), its elements on `freelists` free lists.
    pub fn new(
        names: [&'static str; 3],
        capacity: usize,
        entry_bytes: usize,
        key_bytes: usize,
        freelists: usize,
    ) -> Self {
        let nbuckets = (capacity / 2)
            .max(crate::NUM_LOCK_PARTITIONS)
            .next_power_of_two();
        let freelists = FreeLists::new(names[0], freelists, capacity, Region::detached());
        let buckets = Region::new(names[1], BUCKET, nbuckets);
        let elements = Region::new(
            names[2],
            ELEMENT_HEADER + entry_bytes.next_multiple_of(8),
            capacity,
        );
        Self {
            buckets,
            elements,
            mask: (nbuckets - 1) as u32,
            key: key_bytes,
            freelists: freelists.with_elements(elements),
        }
    }

    fn bucket(&self, hash: u32) -> u32 {
        hash & self.mask
    }

    /// Walks `hash`'s chain in `chains` up to `elem` (or to its end when `None`): reads the
    /// bucket, each element's hash code, and the key of `elem`.
    pub fn find(&self, chains: &Chains, hash: u32, entry: Option<Entry>) {
        let elem = entry.map(|e| e.elem);
        let b = self.bucket(hash);
        self.buckets.read(b as usize, 0..BUCKET);
        for &e in chains.0.get(&b).into_iter().flatten() {
            self.elements.read(e as usize, HASHVALUE);
            if Some(e) == elem {
                self.elements
                    .read(e as usize, ELEMENT_HEADER..ELEMENT_HEADER + self.key);
                return;
            }
        }
    }

    /// `HASH_ENTER` of a key not in the table: the walk that finds nothing, an element from
    /// the free lists, linked at the chain's end, its header and key written. Returns where the
    /// new entry lies; "out of shared memory" when the table is full.
    pub fn enter(&self, chains: &mut Chains, hash: u32) -> Result<Entry, LmgrError> {
        self.find(chains, hash, None);
        let elem = self.freelists.take(hash)?;
        let chain = chains.0.entry(self.bucket(hash)).or_default();
        match chain.last() {
            Some(&last) => self.elements.write(last as usize, 0..8),
            None => self.buckets.write(self.bucket(hash) as usize, 0..BUCKET),
        }
        chain.push(elem);
        self.elements.write(elem as usize, HEADER);
        self.elements
            .write(elem as usize, ELEMENT_HEADER..ELEMENT_HEADER + self.key);
        Ok(Entry {
            elements: self.elements,
            elem,
        })
    }

    /// `HASH_REMOVE` of `entry`: the walk to it, its unlinking, and its element given back.
    pub fn remove(&self, chains: &mut Chains, hash: u32, entry: Entry) {
        self.find(chains, hash, Some(entry));
        let b = self.bucket(hash);
        let Some(chain) = chains.0.get_mut(&b) else {
            debug_assert!(false, "removing an entry its chain does not hold");
            return;
        };
        let Some(i) = chain.iter().position(|&e| e == entry.elem) else {
            debug_assert!(false, "removing an entry its chain does not hold");
            return;
        };
        match i.checked_sub(1).map(|p| chain[p]) {
            Some(prev) => self.elements.write(prev as usize, 0..8),
            None => self.buckets.write(b as usize, 0..BUCKET),
        }
        chain.remove(i);
        if chain.is_empty() {
            chains.0.remove(&b);
        }
        self.freelists.give(hash, entry.elem);
    }

    /// Entries in use.
    pub fn in_use(&self) -> usize {
        self.freelists.in_use()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn entries_chain_in_insertion_order_and_elements_are_reused_last_freed_first() {
        let t = SharedHash::new(
            ["test free lists", "test buckets", "test elements"],
            64,
            152,
            16,
            1,
        );
        assert_eq!(
            t.mask, 31,
            "32 buckets: the next power of two of half the capacity"
        );
        let mut chains = Chains::default();
        // Two keys in bucket 3, one in bucket 4.
        let a = t.enter(&mut chains, 3).unwrap();
        let b = t.enter(&mut chains, 3 + 32).unwrap();
        let c = t.enter(&mut chains, 4).unwrap();
        assert_eq!(chains.0[&3], [a.elem, b.elem]);
        assert_eq!(chains.0[&4], [c.elem]);
        assert_eq!(t.in_use(), 3);
        t.remove(&mut chains, 3, a);
        assert_eq!(chains.0[&3], [b.elem]);
        // The element freed last is the next one taken, whatever its bucket.
        let d = t.enter(&mut chains, 9).unwrap();
        assert_eq!(d.elem, a.elem);
        t.remove(&mut chains, 4, c);
        assert!(!chains.0.contains_key(&4));
        assert_eq!(t.in_use(), 2);
    }
}
