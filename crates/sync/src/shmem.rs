//! The data behind the locks, as a simulated machine sees it: regions of a shared-memory map
//! laid out as PostgreSQL lays out its segment, and the touches a model makes of them.
//!
//! A model keeps its values in Rust's forms (a map behind the lock that guards it, a vector),
//! which neither lie where PostgreSQL's structures lie nor pass through the shim. So a model
//! that keeps shared data also gives it a [`Region`]: `count` elements of PostgreSQL's size for
//! the structure (`sizeof(LOCK)` plus dynahash's element header, `sizeof(PGPROC)`, a page),
//! placed in the simulator's map after the regions made before it, as `ShmemAlloc` places them
//! (`pglocks_sim::shmem`). Where the model reads or writes the structure, it says which bytes of
//! which element ([`Region::read`], [`Region::write`]); the offsets are PostgreSQL's, from the
//! structure's declaration. On a simulated CPU each line those bytes lie on is charged as an
//! access, at the thread's own clock and with no ordering point (the lock the thread holds
//! orders it), and moves between the CPUs' caches as the lines of lock words do; anywhere else a
//! touch is nothing at all (in a build without the simulator, and under loom, it compiles to
//! nothing).
//!
//! A structure whose Rust form already has PostgreSQL's layout (an array of `PGPROC`s or of
//! LWLocks, with the shim's atomics as its lock words and data words as its fields) is instead
//! *placed* in the map ([`Placed`]): every access to its host memory is then charged at its
//! place in the map, so which of its fields share a line, and which structures share none, is
//! decided as PostgreSQL's segment decides it and not by where the host's allocator put it.
//!
//! Loads that do not depend on each other (a walk of an array whose every element is read
//! whatever the others hold) may be declared so with [`independent`]: on a simulated CPU their
//! misses then overlap, as a core's fill buffers let them.
//!
//! ```
//! use pglocks_sync::shmem::{independent, Region};
//!
//! // Ten 64-byte elements, the first on a 128-byte boundary of the map.
//! let slots = Region::new("example slots", 64, 10);
//! // Under the lock that guards them: read the first 16 bytes of slot 3, write its word at 8.
//! slots.read(3, 0..16);
//! slots.write(3, 8..16);
//! // A walk of all ten, their misses overlapping.
//! independent(|| (0..10).for_each(|i| slots.read(i, 0..8)));
//! ```

use std::ops::Range;

/// A structure's place in the simulated shared-memory map: `count` elements of `stride` bytes.
/// The default is [`Region::detached`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// The first element's address in the map (0 in a build without the simulator).
    base: usize,
    /// Bytes per element.
    stride: usize,
}

impl Default for Region {
    fn default() -> Self {
        Region::detached()
    }
}

impl Region {
    /// `count` elements of `stride` bytes named `name` (what the simulator's reports call
    /// them), placed after the regions made before, on a 128-byte boundary.
    pub fn new(name: &'static str, stride: usize, count: usize) -> Region {
        #[cfg(not(loom))]
        let base = pglocks_sim::shmem::alloc(name, stride, count);
        #[cfg(loom)]
        let base = {
            let _ = (name, count);
            0
        };
        Region {
            base,
            stride: stride.max(1),
        }
    }

    /// A region in no map, whose touches charge nothing: a placeholder for a value made
    /// before its place is known (a default).
    pub const fn detached() -> Region {
        Region { base: 0, stride: 1 }
    }

    /// Bytes per element.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The model reads `bytes` of element `elem`.
    #[inline(always)]
    pub fn read(&self, elem: usize, bytes: Range<usize>) {
        self.touch(elem, bytes, false);
    }

    /// The model writes `bytes` of element `elem`.
    #[inline(always)]
    pub fn write(&self, elem: usize, bytes: Range<usize>) {
        self.touch(elem, bytes, true);
    }

    #[inline(always)]
    fn touch(&self, elem: usize, bytes: Range<usize>, write: bool) {
        #[cfg(not(loom))]
        if pglocks_sim::hook::active() && self.base != 0 {
            self.charge(elem, bytes, write);
        }
        #[cfg(loom)]
        let _ = (elem, bytes, write);
    }

    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn charge(&self, elem: usize, bytes: Range<usize>, write: bool) {
        let kind = if write {
            pglocks_sim::Access::Store
        } else {
            pglocks_sim::Access::Load
        };
        let addr = self.base + elem * self.stride + bytes.start;
        pglocks_sim::hook::touch(addr, bytes.len(), kind);
    }
}

/// A structure's host memory placed in the simulated shared-memory map for as long as this
/// value lives: keep it beside the `Box` or `Vec` whose contents it places (memory that does not
/// move), and drop it with them.
#[derive(Debug)]
pub struct Placed {
    /// The host address placed (0: none).
    #[cfg_attr(loom, allow(dead_code))]
    host: usize,
    region: Region,
}

impl Placed {
    /// Places the elements of `items` (a boxed slice's or a vector's contents) as a region
    /// named `name` of `items.len()` elements of `size_of::<T>()` bytes.
    pub fn slice<T>(name: &'static str, items: &[T]) -> Placed {
        Self::raw(
            name,
            items.as_ptr().cast(),
            std::mem::size_of::<T>(),
            items.len(),
        )
    }

    /// Places one value (a `Box`'s contents) as a region named `name`.
    pub fn one<T>(name: &'static str, value: &T) -> Placed {
        Self::raw(
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>(),
            1,
        )
    }

    fn raw(name: &'static str, host: *const u8, stride: usize, count: usize) -> Placed {
        #[cfg(not(loom))]
        {
            let host = host as usize;
            let base = pglocks_sim::shmem::place(name, host, stride, count);
            Placed {
                host: if base == 0 { 0 } else { host },
                region: Region {
                    base,
                    stride: stride.max(1),
                },
            }
        }
        #[cfg(loom)]
        {
            let _ = (name, host, count);
            Placed {
                host: 0,
                region: Region {
                    base: 0,
                    stride: stride.max(1),
                },
            }
        }
    }

    /// The region it occupies, for touches of bytes the shim does not see (data kept in a form
    /// other than PostgreSQL's beside it).
    pub fn region(&self) -> Region {
        self.region
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        if self.host != 0 {
            pglocks_sim::shmem::unplace(self.host);
        }
    }
}

/// One value in an allocation of its own, placed in the simulated shared-memory map as `name`
/// for as long as it lives: a struct `ShmemInitStruct` gives a place of its own, or one of
/// `MainLWLockArray`'s padded LWLocks. Boxed, so that it does not move.
pub struct PlacedBox<T> {
    /// Declared first: fields drop in declaration order, and the map must forget the memory
    /// before it is freed.
    _placed: Placed,
    value: Box<T>,
}

impl<T> PlacedBox<T> {
    /// `value`, boxed and placed as `name`.
    pub fn new(name: &'static str, value: T) -> Self {
        let value = Box::new(value);
        Self {
            _placed: Placed::one(name, &*value),
            value,
        }
    }
}

impl<T> std::ops::Deref for PlacedBox<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for PlacedBox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

/// `len` elements of `T` in one boxed slice, placed in the simulated map as one region named
/// `name`, as `ShmemAlloc` lays out an array: the first element on a 128-byte boundary, each
/// next one `size_of::<T>()` bytes further. So its elements share lines as PostgreSQL's do,
/// whatever the host's allocator did. An empty array takes no region.
///
/// A prototype's layout may space the elements ([`ShmemArray::spaced`]); PostgreSQL's never does.
pub struct ShmemArray<T> {
    /// Declared first, so the placement ends before the memory is freed.
    _placed: Placed,
    items: Box<[T]>,
    /// Slots from one element to the next (1: back to back).
    stride: usize,
}

impl<T> ShmemArray<T> {
    /// `len` elements made by `f`, back to back, placed in the map as `name`.
    pub fn new(name: &'static str, len: usize, f: impl FnMut() -> T) -> Self {
        Self::spaced(name, len, 0, f)
    }

    /// `len` elements each at least `padding` bytes after the one before (rounded up to whole
    /// elements, the slots between them unused; 0 puts them back to back), placed in the map as
    /// `name`: the layout of a prototype that gives each element lines of its own.
    pub fn spaced(
        name: &'static str,
        len: usize,
        padding: usize,
        mut f: impl FnMut() -> T,
    ) -> Self {
        Self::spaced_by_index(name, len, padding, |_| f())
    }

    /// [`ShmemArray::spaced`] with `f` told which element it makes (an unused slot between
    /// elements gets the index of the element before it).
    pub fn spaced_by_index(
        name: &'static str,
        len: usize,
        padding: usize,
        mut f: impl FnMut(usize) -> T,
    ) -> Self {
        let stride = padding.div_ceil(std::mem::size_of::<T>().max(1)).max(1);
        let items: Box<[T]> = (0..len * stride).map(|slot| f(slot / stride)).collect();
        Self {
            _placed: Placed::slice(name, &items),
            items,
            stride,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.items.len() / self.stride
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The first `n` elements.
    pub fn iter_to(&self, n: usize) -> impl Iterator<Item = &T> + '_ {
        self.items[..n * self.stride].iter().step_by(self.stride)
    }
}

impl<T> std::ops::Index<usize> for ShmemArray<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.items[i * self.stride]
    }
}

/// Runs `f`, whose loads do not depend on each other: on a simulated CPU their misses overlap,
/// up to the machine's fill buffers at once. Anything but a load or private work inside (a
/// store, a read-modify-write, a wait) first waits for the loads in flight.
#[inline(always)]
pub fn independent<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(not(loom))]
    if pglocks_sim::hook::active() {
        /// Closes the scope however `f` ends.
        struct Scope;
        impl Drop for Scope {
            fn drop(&mut self) {
                pglocks_sim::hook::independent(false);
            }
        }
        pglocks_sim::hook::independent(true);
        let _scope = Scope;
        return f();
    }
    f()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn arrays_run_on_without_gaps() {
        let a: ShmemArray<[u8; 12]> = ShmemArray::new("test array", 70, || [0; 12]);
        let base = &a[0] as *const _ as usize;
        for i in 0..70 {
            assert_eq!(&a[i] as *const _ as usize, base + 12 * i, "element {i}");
        }
        assert_eq!(a.len(), 70);
        assert_eq!(a.iter_to(70).count(), 70);
    }

    #[test]
    fn spaced_arrays_start_each_element_a_padding_further() {
        let a: ShmemArray<u32> = ShmemArray::spaced("test array", 10, 64, || 0);
        let base = &a[0] as *const _ as usize;
        for i in 0..10 {
            assert_eq!(&a[i] as *const _ as usize, base + 64 * i, "element {i}");
        }
        assert_eq!(a.len(), 10);
        let seen: Vec<usize> = a.iter_to(4).map(|e| e as *const _ as usize).collect();
        assert_eq!(seen, vec![base, base + 64, base + 128, base + 192]);
        // 12-byte elements 64 bytes apart round up to six elements, 72 bytes.
        let b: ShmemArray<[u8; 12]> = ShmemArray::spaced("test array", 3, 64, || [0; 12]);
        assert_eq!(&b[2] as *const _ as usize - &b[0] as *const _ as usize, 144);
    }

    #[test]
    fn a_spaced_element_is_made_knowing_its_index() {
        let a = ShmemArray::spaced_by_index("test array", 4, 64, |i| i as u32 * 10);
        assert_eq!(
            a.iter_to(4).copied().collect::<Vec<_>>(),
            vec![0, 10, 20, 30]
        );
        assert_eq!(a.len(), 4);
    }
}
