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
//! Only the simulator's build keeps a map: in any other, [`alloc`] returns 0 and records
//! nothing, and no touch is ever charged.

use std::sync::Mutex;

/// The first address of the map: 2^56, above every user-space address of x86-64 and arm64.
pub const BASE: usize = 1 << 56;

/// `CACHELINEALIGN`'s boundary: every region starts on one.
pub const ALIGN: usize = 128;

/// One region of the map.
#[derive(Debug, Clone)]
struct Region {
    name: &'static str,
    base: usize,
    stride: usize,
    len: usize,
}

/// The regions so far, in address order, and the next free address.
struct Map {
    regions: Vec<Region>,
    next: usize,
}

static MAP: Mutex<Map> = Mutex::new(Map {
    regions: Vec::new(),
    next: BASE,
});

/// Places `count` elements of `stride` bytes, named `name`, after the last region, on a
/// 128-byte boundary, and returns the first element's address (0 in a build without the
/// simulator).
pub fn alloc(name: &'static str, stride: usize, count: usize) -> usize {
    if !crate::BUILT_IN {
        return 0;
    }
    let len = stride.max(1).saturating_mul(count.max(1));
    let mut map = MAP.lock().unwrap_or_else(|p| p.into_inner());
    let base = map.next;
    map.next = (base + len).div_ceil(ALIGN) * ALIGN;
    map.regions.push(Region {
        name,
        base,
        stride: stride.max(1),
        len,
    });
    base
}

/// The name of the region `addr` lies in; `None` outside the map.
pub fn region_name(addr: usize) -> Option<&'static str> {
    if addr < BASE {
        return None;
    }
    let map = MAP.lock().unwrap_or_else(|p| p.into_inner());
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
    let map = MAP.lock().unwrap_or_else(|p| p.into_inner());
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
}
