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

use rustc_hash::FxHashMap;

/// Values by a key that is (or is derived from) a host address, kept in first-seen order.
#[derive(Debug)]
pub(crate) struct Keyed<T> {
    /// Each key's index in `values`; entries are never removed.
    index: FxHashMap<u64, u32>,
    /// The values, in the order their keys were first seen.
    values: Vec<T>,
}

impl<T> Default for Keyed<T> {
    fn default() -> Self {
        Keyed {
            index: FxHashMap::default(),
            values: Vec::new(),
        }
    }
}

impl<T> Keyed<T> {
    /// The value of `key`, made with `make` if the key is new.
    #[inline]
    pub fn get_or_insert_with(&mut self, key: u64, make: impl FnOnce() -> T) -> &mut T {
        let next = self.values.len();
        let i =
            *self.index.entry(key).or_insert_with(|| {
                u32::try_from(next).expect("more than 2^32 keys in one simulation")
            }) as usize;
        if i == next {
            self.values.push(make());
        }
        &mut self.values[i]
    }

    /// The value of `key`, if it was ever inserted.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        let i = *self.index.get(&key)? as usize;
        Some(&mut self.values[i])
    }

    /// The values, in the order their keys were first seen.
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.values.iter_mut()
    }

    /// The keys and their values, in the order the keys were first seen.
    pub fn into_entries(self) -> impl Iterator<Item = (u64, T)> {
        let mut keys = vec![0; self.values.len()];
        for (key, i) in self.index {
            keys[i as usize] = key;
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
}
