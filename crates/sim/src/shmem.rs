//! The simulated shared-memory map: where the data behind the locks lies, as PostgreSQL lays it
//! out, so the cost model can charge for it.
//!
//! A model keeps much of its shared state in forms the shim cannot see (a Rust map behind the
//! lock that guards it, a plain array), and in Rust's layout, not PostgreSQL's. So the data a
//! model reads or writes is described twice: its Rust form holds the values, and a *region* of
//! this map gives its bytes the addresses PostgreSQL's shared memory would give them. The model
//! then says which bytes of which element it touches (`pglocks_sync::shmem`), and a simulated
//! CPU is charged for the lines those bytes lie on.
//!
//! The map is laid out as `ShmemAlloc` in shmem.c lays out the segment: one region after the
//! other, in the order the models create them, each starting on a 128-byte boundary
//! (`CACHELINEALIGN`, `PG_CACHE_LINE_SIZE`). Its addresses start at [`BASE`], far above any
//! address a host allocator hands out, so a line of the map never meets a line of the host's
//! heap. The map belongs to the process: structures made for one run and then another are
//! placed one after the other, which changes no cost (the cost model keys lines in the order it
//! first sees them, and every region starts on a line of its own).
//!
//! **Placed structures.** A structure whose Rust form already has PostgreSQL's layout (an array
//! of `PGPROC`s, of LWLocks, of free-list headers), and whose shim atomics are its lock words,
//! is *placed* in the map instead ([`place`]): its host memory is given a region of the map of
//! the same size, and the engine charges every access to that host memory (an atomic's, a data
//! word's, a touch's) at the region's address instead. So which lines its fields share is the
//! map's doing, as it would be PostgreSQL's, not the host allocator's: no two structures share
//! a line by the accident of where the heap put them, and a run's costs do not depend on the
//! host's addresses at all. Memory that is not placed (the harness's own counters, a stack
//! variable) is charged at its host address, as before. A placement ends when its structure is
//! dropped ([`unplace`]).
//!
//! **Layout draws.** Which structures share a set of a core's own caches (`crate::own`) follows
//! from where the map puts them, and a release or a build of PostgreSQL with other structures,
//! or other sizes, would shift them against each other. A run may ask for another draw of the
//! layout (the profile's `model.layout`, set for the thread that builds the structures with
//! [`set_layout`]): each region then starts after a gap of 0 to 15 boundaries drawn from the
//! seed and the region's number. Layout 0, the default, leaves no gap, as `ShmemAlloc` does.
//!
//! Only the simulator's build keeps a map: in any other, [`alloc`] and [`place`] return 0 and
//! record nothing, and no touch is ever charged.

use std::cell::Cell;
use std::sync::Mutex;

/// The first address of the map: 2^56, above every user-space address of x86-64 and arm64.
pub const BASE: usize = 1 << 56;

/// Is `addr` an address of the map (rather than a host address, which is always below it)?
#[inline]
pub fn in_map(addr: usize) -> bool {
    addr >= BASE
}

/// `CACHELINEALIGN`'s boundary: every region starts on one (`PG_CACHE_LINE_SIZE`, 128, in
/// pg_config_manual.h; `ShmemAllocRaw` in shmem.c). shmem.c says it used to align only to
/// `MAXALIGN`; the map gives every release the 128-byte boundary.
pub const ALIGN: usize = 128;

/// One region of the map.
#[derive(Debug, Clone)]
struct Region {
    name: &'static str,
    base: usize,
    stride: usize,
    len: usize,
}

/// Host memory placed in the map: `len` bytes from `host`, at `base` in the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The first host address.
    pub host: usize,
    /// Bytes.
    pub len: usize,
    /// Its address in the map.
    pub base: usize,
}

/// The regions so far, in address order, the next free address, and the placements in force.
struct Map {
    regions: Vec<Region>,
    next: usize,
    placed: Vec<Placement>,
}

static MAP: Mutex<Map> = Mutex::new(Map {
    regions: Vec::new(),
    next: BASE,
    placed: Vec::new(),
});

thread_local! {
    /// The layout draw of the regions this thread places (0: none).
    static LAYOUT: Cell<u64> = const { Cell::new(0) };
}

/// Sets the layout draw of the regions this thread places from now on (a profile's
/// `model.layout`; 0: the map's own layout, no gaps).
pub fn set_layout(seed: u64) {
    LAYOUT.with(|l| l.set(seed));
}

/// The gap before region number `region` under layout `seed`: 0 to 15 boundaries, drawn by
/// splitmix64 from the two (none under layout 0).
fn gap(seed: u64, region: usize) -> usize {
    if seed == 0 {
        return 0;
    }
    let mut z = seed ^ (region as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % 16) as usize * ALIGN
}

fn map() -> std::sync::MutexGuard<'static, Map> {
    MAP.lock().unwrap_or_else(|p| p.into_inner())
}

/// Places `count` elements of `stride` bytes, named `name`, after the last region, on a
/// 128-byte boundary, and returns the first element's address (0 in a build without the
/// simulator).
pub fn alloc(name: &'static str, stride: usize, count: usize) -> usize {
    if !crate::BUILT_IN {
        return 0;
    }
    let len = stride.max(1).saturating_mul(count.max(1));
    let mut map = map();
    let base = map.next + gap(LAYOUT.with(Cell::get), map.regions.len());
    map.next = (base + len).div_ceil(ALIGN) * ALIGN;
    map.regions.push(Region {
        name,
        base,
        stride: stride.max(1),
        len,
    });
    base
}

/// Places the `count` elements of `stride` bytes at host address `host` in the map, as a new
/// region named `name`; returns the region's first address (0 in a build without the
/// simulator). The memory must stay where it is until [`unplace`] (a `Box`'s or a `Vec`'s
/// contents, not a value that moves).
pub fn place(name: &'static str, host: usize, stride: usize, count: usize) -> usize {
    if !crate::BUILT_IN || host == 0 || count == 0 || stride == 0 {
        return 0;
    }
    let base = alloc(name, stride, count);
    let p = Placement {
        host,
        len: stride.max(1).saturating_mul(count.max(1)),
        base,
    };
    {
        let mut map = map();
        // A placement of memory the host has since reused for this one is over.
        map.placed
            .retain(|q| q.host + q.len <= p.host || p.host + p.len <= q.host);
        map.placed.push(p);
    }
    crate::engine::placed(Some(p), host);
    base
}

/// Starts the map again from [`BASE`], as a fresh process's, if nothing is placed in it any
/// more (every structure of the runs before has been dropped); returns whether it did. A run
/// that starts so lays its regions out exactly as it would alone, so its lines fall into the
/// same sets of the cores' caches (`crate::own`) as in a process of its own.
pub fn restart() -> bool {
    if !crate::BUILT_IN {
        return false;
    }
    let mut map = map();
    if !map.placed.is_empty() {
        return false;
    }
    map.regions.clear();
    map.next = BASE;
    true
}

/// Ends the placement of the memory at `host` (its structure is being dropped).
pub fn unplace(host: usize) {
    if !crate::BUILT_IN || host == 0 {
        return;
    }
    map().placed.retain(|q| q.host != host);
    crate::engine::placed(None, host);
}

/// The placements in force, by host address.
pub(crate) fn placements() -> Vec<Placement> {
    let mut v = map().placed.clone();
    v.sort_by_key(|p| p.host);
    v
}

/// Host addresses to the map's, for one simulation: the placements in force when it started,
/// and those made or ended while it runs.
///
/// Every access of a simulated CPU asks this first, so the answers are remembered: each lookup
/// finds a *range* of host addresses with one answer (a placement, or the gap between two in
/// which nothing is placed), and a small direct-mapped table keyed by the address's 4-KiB page
/// keeps the range last found there. A run's accesses go to a few dozen structures at a time,
/// which the table holds, where a binary search over every placement walked a cold array at
/// each access. Any placement made or ended empties the table.
#[derive(Debug)]
pub(crate) struct Translation {
    /// By host address, not overlapping.
    placed: Vec<Placement>,
    /// The ranges last found, by `(addr >> RANGE_PAGE_BITS) % RANGES`.
    ranges: [Range; RANGES],
}

/// Entries of [`Translation::ranges`].
const RANGES: usize = 64;

/// log2 of the host page that picks a range's entry.
const RANGE_PAGE_BITS: u32 = 12;

/// Host addresses `from..to` with one answer: placed at `base + (addr - from)`, or (`base` is
/// `NOT_PLACED`) not placed. An empty range (`from == to`) matches nothing.
#[derive(Debug, Clone, Copy, Default)]
struct Range {
    from: usize,
    to: usize,
    base: usize,
}

/// [`Range::base`] of addresses that are not placed.
const NOT_PLACED: usize = usize::MAX;

impl Default for Translation {
    fn default() -> Self {
        Translation {
            placed: Vec::new(),
            ranges: [Range::default(); RANGES],
        }
    }
}

impl Translation {
    /// The placements in force now.
    pub fn current() -> Translation {
        Translation {
            placed: placements(),
            ..Translation::default()
        }
    }

    /// The address the cost model charges for host address `addr`: its place in the map if it
    /// is placed, else itself.
    #[inline]
    pub fn of(&mut self, addr: usize) -> usize {
        self.placed(addr).unwrap_or(addr)
    }

    /// The place in the map of host address `addr`, if it is placed.
    #[inline]
    pub fn placed(&mut self, addr: usize) -> Option<usize> {
        let entry = (addr >> RANGE_PAGE_BITS) % RANGES;
        let mut r = self.ranges[entry];
        if addr.wrapping_sub(r.from) >= r.to.wrapping_sub(r.from) {
            r = self.find(addr);
            self.ranges[entry] = r;
        }
        (r.base != NOT_PLACED).then(|| r.base + (addr - r.from))
    }

    /// The range `addr` lies in: its placement's, or the gap between the placements around it.
    #[cold]
    fn find(&self, addr: usize) -> Range {
        let i = self.placed.partition_point(|p| p.host <= addr);
        let before = i.checked_sub(1).map(|j| self.placed[j]);
        match before {
            Some(p) if addr - p.host < p.len => Range {
                from: p.host,
                to: p.host + p.len,
                base: p.base,
            },
            _ => Range {
                from: before.map_or(0, |p| p.host + p.len),
                to: self.placed.get(i).map_or(usize::MAX, |p| p.host),
                base: NOT_PLACED,
            },
        }
    }

    /// The length of the placement that starts at `host`, if any.
    pub fn len_of(&self, host: usize) -> Option<usize> {
        self.placed.iter().find(|p| p.host == host).map(|p| p.len)
    }

    /// A placement made (`Some`) or ended (`None`) at `host` during the run.
    pub fn update(&mut self, p: Option<Placement>, host: usize) {
        self.placed.retain(|q| q.host != host);
        if let Some(p) = p {
            self.placed
                .retain(|q| q.host + q.len <= p.host || p.host + p.len <= q.host);
            let i = self.placed.partition_point(|q| q.host < p.host);
            self.placed.insert(i, p);
        }
        self.ranges = [Range::default(); RANGES];
    }
}

/// The name of the region `addr` lies in; `None` outside the map.
pub fn region_name(addr: usize) -> Option<&'static str> {
    if addr < BASE {
        return None;
    }
    let map = map();
    let i = map
        .regions
        .partition_point(|r| r.base <= addr)
        .checked_sub(1)?;
    Some(map.regions[i].name)
}

/// What lies at `addr`: the region's name, the element and the byte range of the element
/// (`LOCK hash entries[17] bytes 64..128`), for `len` bytes from `addr`; `None` outside the map.
pub fn describe(addr: usize, len: usize) -> Option<String> {
    if addr < BASE {
        return None;
    }
    let map = map();
    let i = map
        .regions
        .partition_point(|r| r.base <= addr)
        .checked_sub(1)?;
    let r = &map.regions[i];
    let at = addr - r.base;
    if at >= r.len {
        return Some("(the padding after a region)".into());
    }
    let (elem, from) = (at / r.stride, at % r.stride);
    let to = (from + len).min(r.stride);
    let mut s = format!("{}[{elem}] bytes {from}..{to}", r.name);
    // A line that reaches into the next element, or the next region, says so.
    if from + len > r.stride && at + len <= r.len {
        s.push_str(&format!(" (and [{}])", elem + 1));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_start_on_128_byte_boundaries_one_after_the_other_and_are_named() {
        if !crate::BUILT_IN {
            assert_eq!(alloc("nothing", 64, 4), 0);
            return;
        }
        let a = alloc("test LOCK hash entries", 168, 3);
        let b = alloc("test PGPROC", 880, 2);
        assert_eq!(a % ALIGN, 0);
        assert_eq!(b % ALIGN, 0);
        // (Other tests may place regions in between.)
        assert!(b >= a + 3 * 168);
        assert_eq!(
            describe(a + 168 + 64, 64).unwrap(),
            "test LOCK hash entries[1] bytes 64..128"
        );
        assert_eq!(
            describe(a + 128, 64).unwrap(),
            "test LOCK hash entries[0] bytes 128..168 (and [1])"
        );
        assert_eq!(describe(b, 64).unwrap(), "test PGPROC[0] bytes 0..64");
        assert_eq!(describe(0x1000, 64), None);
    }

    #[test]
    fn a_layout_draw_puts_a_gap_of_whole_boundaries_before_each_region_and_none_by_default() {
        assert_eq!((0..100).map(|r| gap(0, r)).max(), Some(0));
        let gaps: Vec<usize> = (0..64).map(|r| gap(7, r)).collect();
        assert!(gaps.iter().all(|g| g % ALIGN == 0 && *g < 16 * ALIGN));
        // The draw spreads over the gaps and depends on the seed.
        assert!(gaps.iter().collect::<std::collections::BTreeSet<_>>().len() > 8);
        assert_ne!(gaps, (0..64).map(|r| gap(8, r)).collect::<Vec<_>>());
        if !crate::BUILT_IN {
            return;
        }
        // On this thread only: a region placed under a draw starts past its gap.
        set_layout(7);
        let a = alloc("test layout a", 64, 1);
        let b = alloc("test layout b", 64, 1);
        set_layout(0);
        assert_eq!(a % ALIGN, 0);
        assert!(b >= a + ALIGN);
    }

    #[test]
    fn placed_memory_is_charged_at_its_place_in_the_map_until_unplaced() {
        if !crate::BUILT_IN {
            return;
        }
        let host = vec![0u64; 40];
        let at = host.as_ptr() as usize;
        let base = place("test placed words", at, 8, 40);
        assert_eq!(base % ALIGN, 0);
        let mut t = Translation::current();
        assert_eq!(t.of(at), base);
        assert_eq!(t.of(at + 8 * 39 + 7), base + 8 * 39 + 7);
        assert_eq!(
            t.of(at + 8 * 40),
            at + 8 * 40,
            "past its end: the host's address"
        );
        assert_eq!(t.of(at - 1), at - 1);
        assert_eq!(
            describe(base + 24, 8).unwrap(),
            "test placed words[3] bytes 0..8"
        );
        unplace(at);
        assert_eq!(Translation::current().of(at), at);
    }

    #[test]
    fn remembered_ranges_translate_as_a_search_of_every_placement_does() {
        let p = |host, len, base| Placement { host, len, base };
        let mut placed = vec![
            p(0x1000, 64, BASE),
            p(0x1040, 200, BASE + 128),
            p(0x1140, 8, BASE + 384),
            p(0x9_0000, 0x3_0000, BASE + 512),
        ];
        let mut t = Translation {
            placed: placed.clone(),
            ..Translation::default()
        };
        let by_search = |placed: &[Placement], addr: usize| {
            placed
                .iter()
                .find(|q| q.host <= addr && addr < q.host + q.len)
                .map(|q| q.base + (addr - q.host))
        };
        let addrs: Vec<usize> = (0..0x1200)
            .chain(0x8_f000..0xc_1000)
            .step_by(4)
            .chain([0, usize::MAX, usize::MAX - 1])
            .collect();
        // Twice in one order and once in another, so answers come from the table as well.
        for round in 0..3 {
            for &addr in addrs.iter().rev().skip(round % 2) {
                assert_eq!(t.placed(addr), by_search(&placed, addr), "{addr:#x}");
            }
            // A placement ended, another made: the table forgets what it found.
            t.update(None, 0x1040);
            placed.remove(1);
            t.update(Some(p(0x1080, 16, BASE + 4096)), 0x1080);
            placed.insert(1, p(0x1080, 16, BASE + 4096));
        }
    }
}
