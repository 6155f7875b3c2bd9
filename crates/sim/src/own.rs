//! A core's own caches: which of the lines it holds are still in its L1 or its L2.
//!
//! The coherence books ([`crate::cache`]) say which cores hold a line; they never drop one for
//! lack of room. A real core's L1 holds a few hundred lines and its L2 a few thousand, so a
//! core that walks a table larger than those (the buffer mapping table's chains and the buffer
//! descriptors of 16,384 buffers are about 2 MB) finds most of the lines it holds in the
//! last-level cache of its die, not in its L1. This module keeps, for each core, a tag array
//! of its L1 and of its L2, set-associative as the hardware's are, each set in
//! least-recently-used order; the cost model asks it, for every access the books serve from the
//! core's own copy, where the copy is.
//!
//! A line's set is its number modulo the sets. A line of the shared-memory map is numbered by
//! its place in the map, which every run lays out alike, so a structure's lines fall into
//! consecutive sets as on hardware; a line outside it (the harness's own counters) by the
//! order it was first touched, as its host address changes from one process to the next and
//! a set taken from it would make a run's figures change too.
//!
//! Every line a core uses enters both arrays (an L1 hit does not refresh the L2's order, as
//! the L2 does not see the L1's hits); the last-used line of a full set leaves it.
//!
//! Shortcuts: the last-level cache has no capacity (a line the books give the core and its
//! L2 lost comes from the die's last-level cache, never from memory); a line another core
//! takes stays in the arrays until it ages out (it only takes room: the books already charge
//! the next use a transfer); a refill is charged in full, where a core's prefetchers would
//! hide some of a sequential copy's.

/// Where a core found a line it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// In its L1.
    L1,
    /// In its L2.
    L2,
    /// Neither: in its die's last-level cache.
    Llc,
}

/// One set-associative tag array: `ways` tags a set, most recently used first, 0 for an
/// empty way (a tag is the line number plus one).
#[derive(Debug, Clone)]
struct Tags {
    sets: usize,
    ways: usize,
    tags: Vec<u64>,
}

impl Tags {
    fn new(sets: usize, ways: usize) -> Tags {
        Tags {
            sets,
            ways,
            tags: vec![0; sets * ways],
        }
    }

    /// Uses `line`: whether it was in the array; it is now the set's most recent.
    #[inline]
    fn touch(&mut self, line: u64) -> bool {
        let tag = line + 1;
        let set = (line % self.sets as u64) as usize;
        let ways = &mut self.tags[set * self.ways..(set + 1) * self.ways];
        match ways.iter().position(|&t| t == tag) {
            Some(0) => true,
            Some(i) => {
                ways[..=i].rotate_right(1);
                true
            }
            None => {
                ways.rotate_right(1);
                ways[0] = tag;
                false
            }
        }
    }
}

/// One core's L1 and L2.
#[derive(Debug, Clone)]
struct Core {
    l1: Tags,
    l2: Tags,
}

/// The sizes of every core's caches, in sets and ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// The L1's sets and ways.
    pub l1: (usize, usize),
    /// The L2's.
    pub l2: (usize, usize),
}

/// Every core's L1 and L2, made when the core first uses a line.
#[derive(Debug, Clone, Default)]
pub struct OwnCaches {
    cores: Vec<Option<Box<Core>>>,
}

impl OwnCaches {
    /// Core `core` uses `line` (a line's number, see the module doc): where it found it.
    /// It is then the most recent line of its sets in both arrays.
    pub fn touch(&mut self, g: Geometry, core: usize, line: u64) -> Level {
        if self.cores.len() <= core {
            self.cores.resize_with(core + 1, || None);
        }
        let c = self.cores[core].get_or_insert_with(|| {
            Box::new(Core {
                l1: Tags::new(g.l1.0, g.l1.1),
                l2: Tags::new(g.l2.0, g.l2.1),
            })
        });
        if c.l1.touch(line) {
            Level::L1
        } else if c.l2.touch(line) {
            Level::L2
        } else {
            Level::Llc
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Geometry = Geometry {
        l1: (4, 2),
        l2: (8, 4),
    };

    #[test]
    fn a_line_used_again_is_in_the_l1_until_its_set_has_taken_two_others() {
        let mut c = OwnCaches::default();
        assert_eq!(c.touch(G, 0, 3), Level::Llc);
        assert_eq!(c.touch(G, 0, 3), Level::L1);
        // Lines 7 and 11 share line 3's L1 set (of 4): the second pushes 3 out of the L1, not
        // out of the L2 (sets of 8: 3, 11 and 19 share one of four ways).
        c.touch(G, 0, 7);
        assert_eq!(c.touch(G, 0, 3), Level::L1);
        c.touch(G, 0, 7);
        c.touch(G, 0, 11);
        assert_eq!(c.touch(G, 0, 3), Level::L2);
        // Another core's caches are its own.
        assert_eq!(c.touch(G, 1, 3), Level::Llc);
    }

    #[test]
    fn a_walk_over_more_lines_than_the_l2_holds_finds_none_of_them_in_it() {
        let mut c = OwnCaches::default();
        // Twice the L2's lines: every set is walked over by eight lines, twice its ways.
        let lines = 2 * 8 * 4;
        for _ in 0..2 {
            for l in 0..lines {
                c.touch(G, 0, l);
            }
        }
        // In LRU order a cyclic walk longer than a set's ways misses every time.
        assert!((0..lines).all(|l| c.touch(G, 0, l) == Level::Llc));
        // One that fits stays in the L2 once its first pass is over.
        let mut c = OwnCaches::default();
        for l in 0..32 {
            c.touch(G, 0, l);
        }
        assert!((0..32).all(|l| c.touch(G, 0, l) != Level::Llc));
    }

    /// The arrays against a sequential model: per set, a list of lines in order of use.
    #[test]
    fn the_arrays_agree_with_a_list_per_set() {
        use proptest::prelude::*;
        proptest!(|(lines in proptest::collection::vec(0u64..64, 1..400))| {
            let mut c = OwnCaches::default();
            let mut l1: Vec<Vec<u64>> = vec![Vec::new(); G.l1.0];
            let mut l2: Vec<Vec<u64>> = vec![Vec::new(); G.l2.0];
            for &line in &lines {
                let use_list = |sets: &mut Vec<Vec<u64>>, ways: usize| {
                    let n = sets.len() as u64;
                    let set = &mut sets[(line % n) as usize];
                    let had = set.iter().position(|&l| l == line).map(|i| set.remove(i)).is_some();
                    set.insert(0, line);
                    set.truncate(ways);
                    had
                };
                let want = if use_list(&mut l1, G.l1.1) {
                    Level::L1
                } else if use_list(&mut l2, G.l2.1) {
                    Level::L2
                } else {
                    Level::Llc
                };
                prop_assert_eq!(c.touch(G, 0, line), want);
            }
        });
    }
}
