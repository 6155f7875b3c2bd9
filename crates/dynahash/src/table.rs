//! Models `ShmemInitHash` / `hash_create` for a shared table and `hash_search_with_hash_value`'s
//! `HASH_FIND`, `HASH_ENTER` and `HASH_REMOVE` on it: [`SharedHash`] places the table in the
//! simulated shared-memory map and charges what a search reads and writes; each partition's
//! entries are [`Chains`] its user keeps under the partition's lock; an entry's element is an
//! [`Entry`], through which the user charges the fields it reads and writes itself.

use crate::freelist::{FreeLists, LINK};
use crate::shape::{TableShape, BUCKET_SIZE, DEF_SEGSIZE, HASHELEMENT_SIZE};
use crate::HashError;
use pglocks_proc::Backend;
use pglocks_sync::shmem::Region;
use std::marker::PhantomData;
use std::ops::Range;

/// `HASHELEMENT.hashvalue` within an element.
const HASHVALUE: Range<usize> = 8..12;

/// What `ShmemInitHash` is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashSpec {
    /// What the simulator's reports call the table's parts.
    pub names: RegionNames,
    /// `init_size`: the buckets are sized for it (`init_htab`).
    pub init_size: usize,
    /// `max_size`: the directory is sized for it, and it is the number of elements made.
    pub max_size: usize,
    /// `HASHCTL.entrysize`: `sizeof` the entry, key included.
    pub entry_size: usize,
    /// `HASHCTL.keysize`: the key's bytes at the entry's start.
    pub key_size: usize,
    /// `HASHCTL.num_partitions` (1: not partitioned).
    pub partitions: usize,
    /// The release's free lists when partitioned: [`crate::NUM_FREELISTS`] from 9.6, 1 before.
    pub freelists: usize,
    /// s_lock.h's `TAS_SPIN` reads the free lists' spinlocks before the exchange (x86_64
    /// from 9.4).
    pub tas_spin: bool,
}

impl HashSpec {
    /// The shape of the table `ShmemInitHash` makes for this.
    pub fn shape(&self) -> TableShape {
        TableShape::new(
            self.init_size,
            self.max_size,
            self.partitions,
            self.freelists,
        )
    }
}

/// The names of a table's regions in the simulated map (`"LOCK hash entries"`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionNames {
    /// `HASHHDR`.
    pub header: &'static str,
    /// The directory.
    pub directory: &'static str,
    /// The segments' buckets.
    pub buckets: &'static str,
    /// The elements (one region per free list's batch, all of this name).
    pub elements: &'static str,
}

/// The elements' regions: one per free list's batch. (Where an element lies is looked up
/// without a bounds check that could panic, so that a build without the simulator, whose
/// touches are nothing, drops the lookup with them.)
pub(crate) struct Elements {
    shape: TableShape,
    batches: Box<[Region]>,
}

impl Elements {
    /// Where element `elem` lies.
    #[inline]
    fn entry(&self, elem: u32) -> Entry {
        let (list, index) = self.shape.batch_of(elem as usize);
        Entry {
            region: self.batches.get(list).copied().unwrap_or_default(),
            index: index as u32,
        }
    }

    /// Charges `bytes` of element `elem` (offsets in the element, header included).
    #[inline]
    pub(crate) fn touch(&self, elem: u32, bytes: Range<usize>, write: bool) {
        let (list, index) = self.shape.batch_of(elem as usize);
        let Some(region) = self.batches.get(list) else {
            return;
        };
        if write {
            region.write(index, bytes);
        } else {
            region.read(index, bytes);
        }
    }
}

/// Where an entry lies: its element in the table's map. Its user charges the fields it reads
/// and writes with [`Entry::read`] and [`Entry::write`], at the entry's offsets (PostgreSQL's,
/// from the entry's struct; the element's header is added here). The default lies nowhere and
/// charges nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry {
    region: Region,
    index: u32,
}

impl Entry {
    /// The entry's `bytes` are read (offsets in the entry).
    #[inline]
    pub fn read(&self, bytes: Range<usize>) {
        self.region.read(self.index as usize, shift(bytes));
    }

    /// The entry's `bytes` are written (offsets in the entry).
    #[inline]
    pub fn write(&self, bytes: Range<usize>) {
        self.region.write(self.index as usize, shift(bytes));
    }
}

/// Entry offsets as element offsets: past the `HASHELEMENT` header.
#[inline]
fn shift(bytes: Range<usize>) -> Range<usize> {
    HASHELEMENT_SIZE + bytes.start..HASHELEMENT_SIZE + bytes.end
}

/// One element of a chain: the entry's hash code, key and value, and its element's number.
#[derive(Debug)]
struct Link<K, V> {
    hash: u32,
    elem: u32,
    key: K,
    value: V,
}

/// One partition's entries, by bucket. A bucket's chain is its slot's links whose hash codes
/// pick it, in chain order (insertion order, as dynahash links at the end). Its user keeps it
/// under the partition's lock: read in either mode, changed exclusively.
#[derive(Debug)]
pub struct Chains<K, V> {
    /// By slot (`bucket / partitions`).
    slots: Box<[Vec<Link<K, V>>]>,
    /// `nbuckets - 1`.
    mask: u32,
    /// The table's partitions.
    partitions: u32,
    len: usize,
}

impl<K: PartialEq, V> Chains<K, V> {
    /// An empty partition's chains in a table of shape `shape` (what [`SharedHash::chains`]
    /// makes; for a user that keeps them before it makes the table).
    pub fn new(shape: &TableShape) -> Self {
        Self {
            slots: (0..shape.slots()).map(|_| Vec::new()).collect(),
            mask: (shape.nbuckets - 1) as u32,
            partitions: shape.partitions as u32,
            len: 0,
        }
    }

    /// Whether these are chains of a table of shape `shape`.
    fn fit(&self, shape: &TableShape) -> bool {
        self.mask as usize == shape.nbuckets - 1 && self.partitions as usize == shape.partitions
    }

    /// The slot of hash code `hash`'s bucket.
    #[inline]
    fn slot_of(&self, hash: u32) -> usize {
        ((hash & self.mask) / self.partitions) as usize
    }

    /// The value of `key` (of hash code `hash`), if present. The model's own lookup: it charges
    /// nothing (for readers PostgreSQL does not search the table for, such as a lock's holder
    /// already at hand, or the deadlock checker's uncharged reads).
    pub fn get(&self, hash: u32, key: &K) -> Option<&V> {
        self.slots[self.slot_of(hash)]
            .iter()
            .find(|l| l.hash == hash && l.key == *key)
            .map(|l| &l.value)
    }

    /// [`Chains::get`], for changing the value.
    pub fn get_mut(&mut self, hash: u32, key: &K) -> Option<&mut V> {
        let s = self.slot_of(hash);
        self.slots[s]
            .iter_mut()
            .find(|l| l.hash == hash && l.key == *key)
            .map(|l| &mut l.value)
    }

    /// Every entry, bucket slot by slot. Charges nothing.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().flatten().map(|l| (&l.key, &l.value))
    }

    /// Entries in this partition.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the partition has no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element numbers of every entry, bucket slot by slot (for tests).
    pub fn elements(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().flatten().map(|l| l.elem)
    }
}

/// Where a search ended in a bucket's chain.
struct Walk {
    /// The matching link's index in the slot.
    found: Option<usize>,
    /// The last link of the bucket before it (before the chain's end if nothing matched).
    prev: Option<usize>,
}

/// What `HASH_ENTER` returns: the entry, found or made.
#[derive(Debug)]
pub struct Entered<'c, V> {
    /// Whether the key was there already (`*foundPtr`).
    pub found: bool,
    /// Where the entry lies.
    pub entry: Entry,
    /// Its value (for a new entry, the one made).
    pub value: &'c mut V,
}

/// A shared dynahash table: `HASHHDR` with its free lists, the directory, the buckets and the
/// elements, placed in the simulated map; entries of key `K` and value `V` kept in their
/// partitions' [`Chains`].
pub struct SharedHash<K, V> {
    shape: TableShape,
    key_size: usize,
    freelists: FreeLists,
    dir: Region,
    buckets: Region,
    elements: Elements,
    _entries: PhantomData<fn(K) -> V>,
}

impl<K: PartialEq, V> SharedHash<K, V> {
    /// Models `ShmemInitHash(name, init_size, max_size, …)`: the shape of `spec`, its header,
    /// directory, segments and elements placed in the map in that order (`ShmemInitStruct` of
    /// the header and directory, then `init_htab`'s `seg_alloc`s, then `hash_create`'s
    /// `element_alloc`s), every element on its free list.
    pub fn new(spec: &HashSpec) -> Self {
        let shape = spec.shape();
        let freelists = FreeLists::new(spec.names.header, &shape, spec.tas_spin);
        let dir = Region::new(spec.names.directory, 8, shape.dsize);
        let buckets = Region::new(spec.names.buckets, BUCKET_SIZE, shape.nsegs * DEF_SEGSIZE);
        let element_size = HASHELEMENT_SIZE + spec.entry_size.next_multiple_of(8);
        let batches = (0..shape.freelists)
            .map(|list| Region::new(spec.names.elements, element_size, shape.batch_len(list)))
            .collect();
        Self {
            shape,
            key_size: spec.key_size,
            freelists,
            dir,
            buckets,
            elements: Elements { shape, batches },
            _entries: PhantomData,
        }
    }

    /// The table's shape.
    pub fn shape(&self) -> &TableShape {
        &self.shape
    }

    /// The partition of hash code `hash`.
    #[inline]
    pub fn partition_of(&self, hash: u32) -> usize {
        self.shape.partition_of(hash)
    }

    /// An empty partition's chains, for its user to keep under the partition's lock.
    pub fn chains(&self) -> Chains<K, V> {
        Chains::new(&self.shape)
    }

    /// Where element `elem` lies (for tests).
    pub fn entry_of(&self, elem: u32) -> Entry {
        self.elements.entry(elem)
    }

    /// `calc_bucket` and the bucket's address (`hash_initial_lookup` from 17): the masks in
    /// `HASHHDR`, the directory entry of the bucket's segment and the bucket, read. Returns the
    /// bucket.
    #[inline]
    fn initial_lookup(&self, hash: u32) -> usize {
        self.freelists.read_masks();
        let bucket = self.shape.bucket(hash);
        self.dir.read(bucket / DEF_SEGSIZE, 0..8);
        self.buckets.read(bucket, 0..BUCKET_SIZE);
        bucket
    }

    /// The collision-chain walk of `hash_search_with_hash_value` over `bucket`'s chain in
    /// `slot`: for each element up to the match, its hash code, its key where the hash codes
    /// agree, and past one that does not match, its `link`.
    fn walk(&self, slot: &[Link<K, V>], bucket: usize, hash: u32, key: &K) -> Walk {
        let mut prev = None;
        for (i, l) in slot.iter().enumerate() {
            if self.shape.bucket(l.hash) != bucket {
                continue;
            }
            self.elements.touch(l.elem, HASHVALUE, false);
            if l.hash == hash {
                self.elements.touch(
                    l.elem,
                    HASHELEMENT_SIZE..HASHELEMENT_SIZE + self.key_size,
                    false,
                );
                if l.key == *key {
                    return Walk {
                        found: Some(i),
                        prev,
                    };
                }
            }
            self.elements.touch(l.elem, LINK, false);
            prev = Some(i);
        }
        Walk { found: None, prev }
    }

    /// `hash_search_with_hash_value` up to the end of its chain walk: the initial lookup and
    /// the walk of `hash`'s bucket in `chains` for `key`. Returns the bucket, its slot in
    /// `chains` and where the walk ended.
    #[inline]
    fn search(&self, chains: &Chains<K, V>, hash: u32, key: &K) -> (usize, usize, Walk) {
        debug_assert!(chains.fit(&self.shape), "another table's chains");
        let bucket = self.initial_lookup(hash);
        let s = bucket / self.shape.partitions;
        (bucket, s, self.walk(&chains.slots[s], bucket, hash, key))
    }

    /// Writes what points at a bucket's element after `prev`: the bucket, or `prev`'s `link`.
    fn write_prev_link(&self, slot: &[Link<K, V>], prev: Option<usize>, bucket: usize) {
        match prev {
            Some(p) => self.elements.touch(slot[p].elem, LINK, true),
            None => self.buckets.write(bucket, 0..BUCKET_SIZE),
        }
    }

    /// Models `hash_search_with_hash_value(…, HASH_FIND, …)`: the entry of `key` (of hash code
    /// `hash`) in `chains`, and where it lies.
    ///
    /// `chains` are the partition of `hash`'s, read under its lock (either mode).
    pub fn lookup<'c>(
        &self,
        chains: &'c Chains<K, V>,
        hash: u32,
        key: &K,
    ) -> Option<(Entry, &'c V)> {
        let (_, s, walk) = self.search(chains, hash, key);
        let link = &chains.slots[s][walk.found?];
        Some((self.elements.entry(link.elem), &link.value))
    }

    /// [`SharedHash::lookup`], for changing the value (the partition's lock held exclusively).
    pub fn lookup_mut<'c>(
        &self,
        chains: &'c mut Chains<K, V>,
        hash: u32,
        key: &K,
    ) -> Option<(Entry, &'c mut V)> {
        let (_, s, walk) = self.search(chains, hash, key);
        let link = &mut chains.slots[s][walk.found?];
        Some((self.elements.entry(link.elem), &mut link.value))
    }

    /// Models `hash_search_with_hash_value(…, HASH_ENTER, …)`: the entry of `key`, found, or
    /// else made with an element from the free lists (`get_hash_entry`), linked at the end of
    /// its bucket's chain, its header and key written, and its value `make(entry)`. "Out of
    /// shared memory" when no list has an element.
    ///
    /// # Safety
    /// `chains` are the partition of `hash`'s, under its lock held exclusively; in an
    /// unpartitioned table (no free-list spinlocks) that one lock is held for every insertion
    /// and removal of the table.
    pub unsafe fn enter<'c>(
        &self,
        b: &mut Backend,
        chains: &'c mut Chains<K, V>,
        hash: u32,
        key: K,
        make: impl FnOnce(Entry) -> V,
    ) -> Result<Entered<'c, V>, HashError> {
        let (bucket, s, walk) = self.search(chains, hash, &key);
        if let Some(i) = walk.found {
            let link = &mut chains.slots[s][i];
            return Ok(Entered {
                found: true,
                entry: self.elements.entry(link.elem),
                value: &mut link.value,
            });
        }
        // SAFETY: as the caller promises.
        let elem = unsafe {
            self.freelists
                .get_hash_entry(b, &self.elements, self.shape.freelist_of(hash))?
        };
        // Linked at the chain's end, then its link, hash code and key written.
        self.write_prev_link(&chains.slots[s], walk.prev, bucket);
        self.elements
            .touch(elem, 0..HASHELEMENT_SIZE + self.key_size, true);
        let entry = self.elements.entry(elem);
        let slot = &mut chains.slots[s];
        slot.push(Link {
            hash,
            elem,
            key,
            value: make(entry),
        });
        chains.len += 1;
        let link = slot.last_mut().expect("pushed above");
        Ok(Entered {
            found: false,
            entry,
            value: &mut link.value,
        })
    }

    /// Models `hash_search_with_hash_value(…, HASH_REMOVE, …)`: takes `key`'s entry out of its
    /// chain and gives its element back to the list of `hash` (under the list's spinlock: the
    /// count lowered, the chain closed over the element, the element pushed). Returns its
    /// value, or `None` if the key was not there (PostgreSQL's callers' "table corrupted").
    ///
    /// # Safety
    /// As for [`SharedHash::enter`].
    pub unsafe fn remove(
        &self,
        b: &mut Backend,
        chains: &mut Chains<K, V>,
        hash: u32,
        key: &K,
    ) -> Result<Option<V>, HashError> {
        let (bucket, s, walk) = self.search(chains, hash, key);
        let Some(i) = walk.found else {
            return Ok(None);
        };
        let elem = chains.slots[s][i].elem;
        let mut value = None;
        // SAFETY: as the caller promises.
        unsafe {
            self.freelists.give_back(
                b,
                &self.elements,
                self.shape.freelist_of(hash),
                elem,
                || {
                    // `*prevBucketPtr = currBucket->link`.
                    self.elements.touch(elem, LINK, false);
                    self.write_prev_link(&chains.slots[s], walk.prev, bucket);
                    value = Some(chains.slots[s].remove(i).value);
                    chains.len -= 1;
                },
            )?;
        }
        Ok(value)
    }

    /// Entries in use (`hash_get_num_entries`). Exact when nothing changes meanwhile.
    pub fn in_use(&self) -> usize {
        self.freelists.in_use()
    }

    /// The `nentries` of free list `list`: the entries whose hash code picks it.
    pub fn list_entries(&self, list: usize) -> u64 {
        self.freelists.nentries(list)
    }

    /// Elements on the free lists. Only while no insertion or removal runs (the caller holds
    /// every partition's lock exclusively, or nobody else uses the table).
    pub fn free_elements(&self) -> usize {
        self.freelists.free_elements()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::NUM_FREELISTS;
    use pglocks_proc::ProcTable;

    const NAMES: RegionNames = RegionNames {
        header: "test hash header",
        directory: "test hash directory",
        buckets: "test hash buckets",
        elements: "test hash elements",
    };

    fn table(nelem: usize, partitions: usize) -> SharedHash<u32, u32> {
        SharedHash::new(&HashSpec {
            names: NAMES,
            init_size: nelem,
            max_size: nelem,
            entry_size: 8,
            key_size: 4,
            partitions,
            freelists: NUM_FREELISTS,
            tas_spin: true,
        })
    }

    #[test]
    fn elements_come_back_last_in_first_out_and_borrow_across_lists() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        // 4 partitions, 32 lists of 2 elements (68: the first list has 6).
        let t = table(68, 4);
        let mut part1 = t.chains();
        let enter = |b: &mut Backend, chains: &mut Chains<u32, u32>, key: u32, hash: u32| {
            // SAFETY: one thread, every partition its own.
            let e = unsafe { t.enter(b, chains, hash, key, |_| key * 10) }.unwrap();
            assert!(!e.found);
            *e.value
        };
        // Hash codes chosen directly (partition 1 of 4): list 1 (hash 1 and 33) has two
        // elements, 6 and 7; the last is taken first.
        enter(&mut b, &mut part1, 0, 1);
        enter(&mut b, &mut part1, 1, 33);
        assert_eq!(part1.elements().collect::<Vec<_>>(), [7, 6]);
        // A third entry of list 1 borrows list 2's head (element 9), counted in list 1.
        enter(&mut b, &mut part1, 2, 65);
        assert_eq!(t.lookup(&part1, 65, &2).map(|(_, v)| *v), Some(20));
        assert!(part1.elements().any(|e| e == 9));
        assert_eq!((t.list_entries(1), t.list_entries(2)), (3, 0));
        // A removal gives the element to the list of its hash code, whose next insertion takes
        // it again.
        // SAFETY: as above.
        unsafe {
            assert_eq!(t.remove(&mut b, &mut part1, 1, &0).unwrap(), Some(0));
            assert_eq!(t.remove(&mut b, &mut part1, 1, &0).unwrap(), None);
        }
        enter(&mut b, &mut part1, 3, 97);
        let again = t.entry_of(7);
        // SAFETY: as above.
        let e = unsafe { t.enter(&mut b, &mut part1, 97, 3, |_| 0) }.unwrap();
        assert!(e.found, "a key already there is returned");
        assert_eq!((e.entry, *e.value), (again, 30));
        assert_eq!(t.free_elements(), 68 - 3);
        assert_eq!(t.in_use(), 3);
    }

    #[test]
    fn a_full_table_says_out_of_shared_memory_exactly_at_its_size() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        // 10 elements over 32 lists: all on the first, and the eleventh entry is refused.
        let t = table(10, 16);
        let mut chains: Vec<_> = (0..16).map(|_| t.chains()).collect();
        // SAFETY: one thread.
        unsafe {
            for k in 0..10u32 {
                let c = &mut chains[t.partition_of(k * 7) % 16];
                t.enter(&mut b, c, k * 7, k, |_| k).unwrap();
            }
            assert_eq!(t.in_use(), 10);
            let c = &mut chains[t.partition_of(99)];
            let e = t.enter(&mut b, c, 99, 99, |_| 0).unwrap_err();
            assert_eq!(e, HashError::OutOfSharedMemory);
            // A removal frees one for the next insertion.
            let c = &mut chains[t.partition_of(14)];
            assert_eq!(t.remove(&mut b, c, 14, &2).unwrap(), Some(2));
            let c = &mut chains[t.partition_of(99)];
            assert!(!t.enter(&mut b, c, 99, 99, |_| 0).unwrap().found);
        }
    }

    #[test]
    fn a_chain_is_its_buckets_entries_in_insertion_order() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        // One partition of 8 buckets: hash codes 3, 11 and 19 share bucket 3, 4 is bucket 4.
        let t = table(8, 1);
        let mut c = t.chains();
        // SAFETY: one thread, the one partition.
        unsafe {
            for (key, hash) in [(30, 3), (110, 11), (40, 4), (190, 19)] {
                t.enter(&mut b, &mut c, hash, key, |_| key).unwrap();
            }
            assert_eq!(c.len(), 4);
            // Unpartitioned: one list, its batch's last element first.
            assert_eq!(c.elements().collect::<Vec<_>>(), [7, 6, 4, 5]);
            assert_eq!(t.remove(&mut b, &mut c, 11, &110).unwrap(), Some(110));
            assert_eq!(c.get(19, &190), Some(&190));
            assert_eq!(c.get(3, &190), None, "the hash code is part of the search");
            assert_eq!(c.iter().map(|(k, _)| *k).collect::<Vec<_>>(), [30, 190, 40]);
            // The element freed last is the next one taken, whatever its bucket.
            t.enter(&mut b, &mut c, 5, 50, |_| 50).unwrap();
            assert_eq!(t.lookup(&c, 5, &50).map(|(e, _)| e), Some(t.entry_of(6)));
        }
    }
}
