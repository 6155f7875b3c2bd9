//! Data words: shared data that a lock orders, kept in atomics only so that Rust lets several
//! threads reach it, and charged to a simulated CPU as the data behind the locks.
//!
//! A field that PostgreSQL reads and writes only under a lock (`nextXid` under XidGenLock, a
//! CLOG page's bytes under its buffer lock, a WAL page's bytes under a WAL insertion lock) needs
//! no atomic of its own: the lock's acquisition and release order it. These are std's atomics,
//! used with relaxed orderings, even under loom (whose model checker then sees only the lock's
//! atomics, as it should). On a simulated CPU each load or store is charged as a touch of the
//! line the word lies on (see [`crate::shmem`]): at the thread's own clock, with no ordering point,
//! so the line moves between the simulated CPUs as PostgreSQL's would. Anywhere else they are
//! std's atomics and nothing more (in a build without the simulator, with no check at all).
//!
//! A field read *without* the lock that orders its writes (a racy read PostgreSQL makes on
//! purpose) must stay one of the shim's [`atomic`](crate::atomic)s, which take effect in
//! virtual-time order.

use std::sync::atomic::Ordering;

/// Charges a touch of the `size` bytes at `addr` on a simulated CPU.
#[inline(always)]
fn touch(addr: *const u8, size: usize, write: bool) {
    #[cfg(not(loom))]
    if pglocks_sim::hook::active() {
        charge(addr, size, write);
    }
    #[cfg(loom)]
    let _ = (addr, size, write);
}

#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn charge(addr: *const u8, size: usize, write: bool) {
    let kind = if write {
        pglocks_sim::Access::Store
    } else {
        pglocks_sim::Access::Load
    };
    pglocks_sim::hook::touch(addr as usize, size, kind);
}

/// Charges a touch of `len` bytes from `start` on a simulated CPU: a range of plain data (a
/// record copied into a page) read or written under the lock that orders it.
#[inline(always)]
pub fn touch_range<T>(start: *const T, len: usize, write: bool) {
    touch(start.cast(), len, write);
}

macro_rules! data {
    ($(#[$doc:meta])* $name:ident, $atomic:ident, $t:ty) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Debug, Default)]
        pub struct $name(std::sync::atomic::$atomic);

        impl $name {
            /// A word holding `v`.
            #[inline(always)]
            pub const fn new(v: $t) -> Self {
                Self(std::sync::atomic::$atomic::new(v))
            }

            #[inline(always)]
            fn at(&self) -> *const u8 {
                self.0.as_ptr().cast_const().cast()
            }

            /// Reads the word.
            #[inline(always)]
            pub fn load(&self, order: Ordering) -> $t {
                touch(self.at(), std::mem::size_of::<$t>(), false);
                self.0.load(order)
            }

            /// Writes the word.
            #[inline(always)]
            pub fn store(&self, v: $t, order: Ordering) {
                touch(self.at(), std::mem::size_of::<$t>(), true);
                self.0.store(v, order)
            }

            /// Adds `v` (wrapping) under the lock that orders the word, returning the previous
            /// value: a read and a write of it.
            #[inline(always)]
            pub fn fetch_add(&self, v: $t, order: Ordering) -> $t {
                touch(self.at(), std::mem::size_of::<$t>(), true);
                self.0.fetch_add(v, order)
            }

            /// Subtracts `v` (wrapping), returning the previous value.
            #[inline(always)]
            pub fn fetch_sub(&self, v: $t, order: Ordering) -> $t {
                touch(self.at(), std::mem::size_of::<$t>(), true);
                self.0.fetch_sub(v, order)
            }

            /// Bitwise "or", returning the previous value.
            #[inline(always)]
            pub fn fetch_or(&self, v: $t, order: Ordering) -> $t {
                touch(self.at(), std::mem::size_of::<$t>(), true);
                self.0.fetch_or(v, order)
            }

            /// Bitwise "and", returning the previous value.
            #[inline(always)]
            pub fn fetch_and(&self, v: $t, order: Ordering) -> $t {
                touch(self.at(), std::mem::size_of::<$t>(), true);
                self.0.fetch_and(v, order)
            }

            /// The value, through an exclusive reference (no other CPU can see it).
            #[inline(always)]
            pub fn get_mut(&mut self) -> &mut $t {
                self.0.get_mut()
            }

            /// The value, consuming the word.
            #[inline(always)]
            pub fn into_inner(self) -> $t {
                self.0.into_inner()
            }
        }
    };
}

data!(
    /// A byte of data a lock orders.
    DataU8, AtomicU8, u8
);
data!(
    /// A 32-bit word of data a lock orders.
    DataU32, AtomicU32, u32
);
data!(
    /// A 64-bit word of data a lock orders.
    DataU64, AtomicU64, u64
);
data!(
    /// A machine word of data a lock orders.
    DataUsize, AtomicUsize, usize
);
