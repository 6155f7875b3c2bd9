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
