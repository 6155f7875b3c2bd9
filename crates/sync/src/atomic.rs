//! Atomics: std's, each operation first asking whether it runs on a simulated CPU; loom's under
//! `--cfg loom`.
//!
//! Every type is `#[repr(transparent)]` over std's, so sizes, alignment and padding are std's. In
//! a build without the simulator (any but `--cfg pglocks_sim`, [`pglocks_sim::BUILT_IN`]) each
//! operation is std's alone. In the simulator's build, on a real thread the extra cost is one
//! relaxed load of a process-wide word that only changes when a simulation starts or ends, and
//! one branch never taken; on a simulated one the access is charged by the cache model and
//! ordered in virtual time before it is done.

#[cfg(loom)]
pub use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub use real::*;

#[cfg(not(loom))]
mod real {
    use pglocks_sim::hook;
    use pglocks_sim::Access;
    use std::fmt;
    pub use std::sync::atomic::Ordering;

    /// Charges an access to `addr` when the caller is a simulated CPU.
    #[inline(always)]
    fn charge<T: ?Sized>(addr: *const T, kind: Access) {
        if hook::active() {
            hook::access(addr.cast::<u8>() as usize, kind);
        }
    }

    /// A value an atomic holds, as the bits a simulated CPU's store buffer keeps.
    trait Bits: Copy {
        fn to_bits(self) -> u64;
        fn from_bits(bits: u64) -> Self;
    }

    macro_rules! bits {
        ($($t:ty),*) => {$(
            impl Bits for $t {
                #[inline(always)]
                fn to_bits(self) -> u64 {
                    self as u64
                }
                #[inline(always)]
                fn from_bits(bits: u64) -> Self {
                    bits as $t
                }
            }
        )*};
    }
    bits!(u8, u32, u64, usize);

    impl Bits for bool {
        #[inline(always)]
        fn to_bits(self) -> u64 {
            u64::from(self)
        }
        #[inline(always)]
        fn from_bits(bits: u64) -> Self {
            bits != 0
        }
    }

    impl<T> Bits for *mut T {
        #[inline(always)]
        fn to_bits(self) -> u64 {
            self as usize as u64
        }
        #[inline(always)]
        fn from_bits(bits: u64) -> Self {
            bits as usize as *mut T
        }
    }

    /// A simulated CPU's load of `addr`: charged and ordered, and the value of its own store
    /// still in its store buffer if there is one (`None`: read memory).
    #[cold]
    #[inline(never)]
    fn simulated_load<T: Bits>(addr: *const T) -> Option<T> {
        hook::load(addr as usize, std::mem::size_of::<T>()).map(T::from_bits)
    }

    /// A simulated CPU's store of `v` to `addr`: charged and ordered; `true` if its store
    /// buffer took it (the simulator writes it when it becomes visible).
    #[cold]
    #[inline(never)]
    fn simulated_store<T: Bits>(addr: *const T, v: T) -> bool {
        hook::store(addr as usize, v.to_bits(), std::mem::size_of::<T>())
    }

    /// A full fence; a simulated CPU is charged the profile's fence.
    #[inline(always)]
    pub fn fence(order: Ordering) {
        if hook::active() {
            hook::fence();
        }
        std::sync::atomic::fence(order);
    }

    /// Read-modify-writes of one operand: each charged as one, then std's.
    macro_rules! rmw {
        ($t:ty: $($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
            $(#[$doc])*
            #[inline(always)]
            pub fn $name(&self, v: $t, order: Ordering) -> $t {
                charge(self, Access::Rmw);
                self.0.$name(v, order)
            }
        )*};
    }

    /// Loads, stores and the two compare-exchanges, for an atomic of `$t`.
    macro_rules! common {
        ($t:ty) => {
            /// Loads the value (on a simulated CPU, its own store still in its store buffer if
            /// there is one).
            #[inline(always)]
            pub fn load(&self, order: Ordering) -> $t {
                if hook::active() {
                    if let Some(v) = simulated_load(self.0.as_ptr().cast_const()) {
                        return v;
                    }
                }
                self.0.load(order)
            }

            /// Stores `v` (on a simulated CPU, into its store buffer if the memory is placed in
            /// the shared-memory map: visible to the others when it drains).
            #[inline(always)]
            pub fn store(&self, v: $t, order: Ordering) {
                if hook::active() && simulated_store(self.0.as_ptr().cast_const(), v) {
                    return;
                }
                self.0.store(v, order)
            }

            /// Stores `new` if the value is `current` (a failed exchange still takes the line
            /// exclusive, as on x86).
            #[inline(always)]
            pub fn compare_exchange(
                &self,
                current: $t,
                new: $t,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$t, $t> {
                charge(self, Access::Rmw);
                self.0.compare_exchange(current, new, success, failure)
            }

            /// As [`Self::compare_exchange`], but may fail spuriously.
            #[inline(always)]
            pub fn compare_exchange_weak(
                &self,
                current: $t,
                new: $t,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$t, $t> {
                charge(self, Access::Rmw);
                self.0.compare_exchange_weak(current, new, success, failure)
            }

            rmw!($t:
                /// Stores `v`, returning the previous value.
                swap,
            );

            /// The value, through an exclusive reference (no other CPU can see it).
            #[inline(always)]
            pub fn get_mut(&mut self) -> &mut $t {
                self.0.get_mut()
            }

            /// The value, consuming the atomic.
            #[inline(always)]
            pub fn into_inner(self) -> $t {
                self.0.into_inner()
            }
        };
    }

    macro_rules! atomic {
        ($(#[$doc:meta])* $name:ident, $t:ty, int: $int:tt) => {
            $(#[$doc])*
            #[repr(transparent)]
            #[derive(Default)]
            pub struct $name(std::sync::atomic::$name);

            impl $name {
                /// A new atomic holding `v`.
                #[inline(always)]
                pub const fn new(v: $t) -> Self {
                    Self(std::sync::atomic::$name::new(v))
                }

                common!($t);

                /// Applies `f` until a compare-exchange succeeds or `f` returns `None`.
                #[inline]
                pub fn fetch_update<F: FnMut($t) -> Option<$t>>(
                    &self,
                    set: Ordering,
                    fetch: Ordering,
                    mut f: F,
                ) -> Result<$t, $t> {
                    let mut prev = self.load(fetch);
                    while let Some(next) = f(prev) {
                        match self.compare_exchange_weak(prev, next, set, fetch) {
                            Ok(x) => return Ok(x),
                            Err(now) => prev = now,
                        }
                    }
                    Err(prev)
                }

                rmw!($t:
                    /// Bitwise "or", returning the previous value.
                    fetch_or,
                    /// Bitwise "and", returning the previous value.
                    fetch_and,
                );

                /// A pointer to the value (for a futex call, which names the word by address).
                #[inline(always)]
                pub const fn as_ptr(&self) -> *mut $t {
                    self.0.as_ptr()
                }

                /// std's atomic underneath, whose operations are never charged: for bookkeeping
                /// that only host threads do (a harness's own counters), where even the shim's
                /// check per operation is a cost the measurement should not carry. A simulated
                /// CPU must not use it: its accesses would be invisible to the simulation.
                #[inline(always)]
                pub const fn as_std(&self) -> &std::sync::atomic::$name {
                    &self.0
                }

                /// The value, read without being charged (what a kernel's futex check reads).
                #[allow(dead_code)]
                #[inline(always)]
                pub(crate) fn peek(&self) -> $t {
                    self.0.load(Ordering::SeqCst)
                }
            }

            atomic!(@int $int $name, $t);

            impl fmt::Debug for $name {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    fmt::Debug::fmt(&self.0, f)
                }
            }

            impl From<$t> for $name {
                fn from(v: $t) -> Self {
                    Self::new(v)
                }
            }
        };
        (@int no $name:ident, $t:ty) => {};
        (@int yes $name:ident, $t:ty) => {
            impl $name {
                rmw!($t:
                    /// Adds `v` (wrapping), returning the previous value.
                    fetch_add,
                    /// Subtracts `v` (wrapping), returning the previous value.
                    fetch_sub,
                    /// Stores the larger of the value and `v`, returning the previous value.
                    fetch_max,
                    /// Stores the smaller of the value and `v`, returning the previous value.
                    fetch_min,
                );
            }
        };
    }

    atomic!(
        /// std's `AtomicBool` behind the shim.
        AtomicBool, bool, int: no
    );
    atomic!(
        /// std's `AtomicU8` behind the shim.
        AtomicU8, u8, int: yes
    );
    atomic!(
        /// std's `AtomicU32` behind the shim.
        AtomicU32, u32, int: yes
    );
    atomic!(
        /// std's `AtomicU64` behind the shim.
        AtomicU64, u64, int: yes
    );
    atomic!(
        /// std's `AtomicUsize` behind the shim.
        AtomicUsize, usize, int: yes
    );

    /// std's `AtomicPtr` behind the shim.
    #[repr(transparent)]
    pub struct AtomicPtr<T>(std::sync::atomic::AtomicPtr<T>);

    impl<T> Default for AtomicPtr<T> {
        fn default() -> Self {
            Self::new(std::ptr::null_mut())
        }
    }

    impl<T> fmt::Debug for AtomicPtr<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            fmt::Debug::fmt(&self.0, f)
        }
    }

    impl<T> AtomicPtr<T> {
        /// A new atomic holding `p`.
        #[inline(always)]
        pub const fn new(p: *mut T) -> Self {
            Self(std::sync::atomic::AtomicPtr::new(p))
        }

        common!(*mut T);
    }
}

/// Test-and-set of a lock word: an atomic exchange of "set" (x86 `xchg`), reporting whether
/// the word was set already.
///
/// Under loom it is a compare-exchange from "clear" instead. The two are equal in effect on a
/// word that only holds clear/set, but loom counts a failed exchange (set written over set) as
/// a new store, so a spinning exchange never lets its model finish; a failed compare-exchange
/// is only a load.
pub trait TestAndSet {
    /// Sets the word; `true` if it was set before (the lock was taken).
    fn test_and_set(&self, order: Ordering) -> bool;
}

impl TestAndSet for AtomicU8 {
    #[inline(always)]
    fn test_and_set(&self, order: Ordering) -> bool {
        #[cfg(not(loom))]
        return self.swap(1, order) != 0;
        #[cfg(loom)]
        return self
            .compare_exchange(0, 1, order, Ordering::Relaxed)
            .is_err();
    }
}

impl TestAndSet for AtomicBool {
    #[inline(always)]
    fn test_and_set(&self, order: Ordering) -> bool {
        #[cfg(not(loom))]
        return self.swap(true, order);
        #[cfg(loom)]
        return self
            .compare_exchange(false, true, order, Ordering::Relaxed)
            .is_err();
    }
}
