//! The engine's tables keyed by host address (a line, a futex word), in an order that does not
//! depend on the addresses' values.
//!
//! The cost model and the OS model look things up by real host addresses, whose values change
//! from one process to the next with the kernel's address-space randomisation. A hash map keyed
//! by them is fine for the lookups, but not for anything the map does in its hash order: a
//! `HashMap<u64, Line>` dropped at the end of a simulation frees each line's buffers in the
//! order of the keys' hashes, so the allocator's free lists, and with them where the next
//! simulation's objects land and which of them share a cache line, differed from one process to
//! the next (a sweep of several points did not repeat, though each point alone did). And a map
//! whose entries are removed leaves tombstones where the hashes put them, so when it grows (and
//! allocates) depended on the addresses too.
//!
//! [`Keyed`] keeps the values in a `Vec`, in the order their keys were first seen, and hashes
//! the key only to find its index, in a map that never removes an entry: every allocation it
//! makes and every value it drops comes in an order fixed by the sequence of keys asked for,
//! which the simulation's virtual-time order fixes.
//!
//! How many pages of the index a run adds depends on the addresses too (on how the keys fall
//! across page boundaries), so the index reserves room for far more pages than a run uses when
//! it is made, and never grows: had it grown, its reallocations would have come at
//! address-dependent moments on the host's heap, which the models allocate from too, and moved
//! their later objects against the lines (a part of `pglocks stress` that allocates while it
//! runs, parallel apply's, repeated only with address-space randomisation off).
//!
//! **The index.** A key's index is found in two steps, as a page table finds a frame: the key's
//! high bits (`key >> PAGE_BITS`) name a *page* of the index, looked up in a small hash map,
//! and its low bits the slot in that page, which holds the index (or `EMPTY`). The keys come in
//! clusters (a structure's lines lie side by side, in the map or in the host's heap), so a few
//! thousand pages hold every key of a run: their hash map stays in the host's cache where a map
//! of every key did not, and consecutive lines share a page. The page last used is remembered,
//! as a run of accesses to one structure asks for it again and again. Pages are only ever added,
//! in the order their first key is seen, like the values.

use rustc_hash::FxHashMap;

/// log2 of the slots in one page of the index.
const PAGE_BITS: u32 = 9;

/// Slots in one page of the index.
const PAGE: usize = 1 << PAGE_BITS;

/// A slot of the index whose key has not been seen.
const EMPTY: u32 = u32::MAX;

/// Values by a key that is (or is derived from) a host address, kept in first-seen order.
#[derive(Debug)]
pub(crate) struct Keyed<T> {
    /// Each page's first slot in `slots`, by page number (`key >> PAGE_BITS`); never removed.
    pages: FxHashMap<u64, u32>,
    /// The pages of the index, one after the other: each key's index in `values`, or `EMPTY`.
    slots: Vec<u32>,
    /// The page last looked up, and its first slot (`EMPTY` before the first lookup).
    last: (u64, u32),
    /// The values, in the order their keys were first seen.
    values: Vec<T>,
}

/// Pages of the index reserved when a table is made: 2 GiB of addresses, more than a
/// simulation touches. Reserved, not touched (the allocator maps the memory and the kernel backs
/// only the pages used), so that adding a page never reallocates (see the module doc).
const RESERVED_PAGES: usize = 1 << 16;

impl<T> Default for Keyed<T> {
    fn default() -> Self {
        Keyed {
            pages: FxHashMap::with_capacity_and_hasher(RESERVED_PAGES, Default::default()),
            slots: Vec::with_capacity(RESERVED_PAGES * PAGE),
            last: (0, EMPTY),
            values: Vec::new(),
        }
    }
}

impl<T> Keyed<T> {
    /// The first slot of `key`'s page, if the page exists.
    #[inline]
    fn page(&mut self, key: u64) -> Option<usize> {
        let page = key >> PAGE_BITS;
        if self.last.0 == page && self.last.1 != EMPTY {
            return Some(self.last.1 as usize);
        }
        let first = *self.pages.get(&page)?;
        self.last = (page, first);
        Some(first as usize)
    }

    /// The slot of `key` in the index, its page added if new.
    #[inline]
    fn slot(&mut self, key: u64) -> usize {
        let first = match self.page(key) {
            Some(first) => first,
            None => self.add_page(key >> PAGE_BITS),
        };
        first + (key as usize & (PAGE - 1))
    }

    /// Adds the page `page` to the index; returns its first slot.
    #[cold]
    fn add_page(&mut self, page: u64) -> usize {
        let first = self.slots.len();
        let at = u32::try_from(first).expect("more than 2^32 slots in one simulation's index");
        self.slots.resize(first + PAGE, EMPTY);
        self.pages.insert(page, at);
        self.last = (page, at);
        first
    }

    /// The index of `key` in the values, made with `make` if the key is new.
    #[inline]
    pub fn index_or_insert_with(&mut self, key: u64, make: impl FnOnce() -> T) -> usize {
        let slot = self.slot(key);
        match self.slots[slot] {
            EMPTY => {
                let i = self.values.len();
                self.slots[slot] = u32::try_from(i)
                    .ok()
                    .filter(|&i| i != EMPTY)
                    .expect("more than 2^32 - 1 keys in one simulation");
                self.values.push(make());
                i
            }
            i => i as usize,
        }
    }

    /// The value of `key`, made with `make` if the key is new.
    #[inline]
    pub fn get_or_insert_with(&mut self, key: u64, make: impl FnOnce() -> T) -> &mut T {
        let i = self.index_or_insert_with(key, make);
        &mut self.values[i]
    }

    /// The value of `key`, if it was ever inserted.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        let first = self.page(key)?;
        match self.slots[first + (key as usize & (PAGE - 1))] {
            EMPTY => None,
            i => Some(&mut self.values[i as usize]),
        }
    }

    /// The values, in the order their keys were first seen.
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.values.iter_mut()
    }

    /// The keys and their values, in the order the keys were first seen.
    pub fn into_entries(self) -> impl Iterator<Item = (u64, T)> {
        let mut keys = vec![0; self.values.len()];
        for (page, first) in self.pages {
            let slots = &self.slots[first as usize..first as usize + PAGE];
            for (low, &i) in slots.iter().enumerate() {
                if i != EMPTY {
                    keys[i as usize] = (page << PAGE_BITS) | low as u64;
                }
            }
        }
        keys.into_iter().zip(self.values)
    }
}

impl<T: Default> Keyed<T> {
    /// The value of `key`, a default one if the key is new.
    #[inline]
    pub fn get_or_default(&mut self, key: u64) -> &mut T {
        self.get_or_insert_with(key, T::default)
    }

    /// As [`Keyed::get_or_default`], with the value's index: the order in which the key was
    /// first seen, which does not depend on its value.
    #[inline]
    pub fn index_and_value(&mut self, key: u64) -> (u64, &mut T) {
        let i = self.index_or_insert_with(key, T::default);
        (i as u64, &mut self.values[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_in_the_order_their_keys_were_first_seen() {
        let mut k: Keyed<Vec<u64>> = Keyed::default();
        for key in [
            0x7fff_0040,
            0x5555_0000,
            0x7f00_1000,
            0x5555_0000,
            0x7fff_0040,
        ] {
            k.get_or_default(key).push(key);
        }
        assert_eq!(k.get_mut(0x5555_0000).map(|v| v.len()), Some(2));
        assert!(k.get_mut(0x1234).is_none());
        let firsts: Vec<u64> = k.into_entries().map(|(_, v)| v[0]).collect();
        assert_eq!(firsts, [0x7fff_0040, 0x5555_0000, 0x7f00_1000]);
    }

    #[test]
    fn keys_that_share_a_page_of_the_index_or_not_each_keep_their_own_value() {
        // Consecutive lines (one page, then the next), lines far apart, and the extremes.
        let mut keys: Vec<u64> = (0..1500).map(|i| (1 << 50) + i).collect();
        keys.extend((0..300).map(|i| 0x7f00_0000 + i * 4099));
        keys.extend([0, 1, u64::MAX, u64::MAX - 1, 1 << 63]);
        let mut k: Keyed<u64> = Keyed::default();
        for &key in keys.iter().rev() {
            *k.get_or_default(key) = key;
        }
        for &key in &keys {
            assert_eq!(k.get_mut(key).copied(), Some(key), "{key:#x}");
            assert_eq!(*k.get_or_default(key), key);
        }
        for absent in [2, (1 << 50) + 1500, (1 << 50) - 1, 0x7f00_0001] {
            assert!(k.get_mut(absent).is_none(), "{absent:#x}");
        }
        let entries: Vec<(u64, u64)> = k.into_entries().collect();
        let first_seen: Vec<u64> = keys.iter().rev().copied().collect();
        assert_eq!(
            entries.iter().map(|&(key, _)| key).collect::<Vec<_>>(),
            first_seen
        );
        assert!(entries.iter().all(|&(key, v)| key == v));
    }
}
