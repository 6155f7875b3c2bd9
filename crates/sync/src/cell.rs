//! `UnsafeCell` with loom's closure API (`with` / `with_mut`) in both builds, so code that touches
//! lock-protected data is written once and checked by loom for unsynchronised access.

#[cfg(loom)]
pub use loom::cell::UnsafeCell;

/// `std::cell::UnsafeCell` behind loom's access API.
///
/// ```
/// use pglocks_sync::cell::UnsafeCell;
/// let c = UnsafeCell::new(1u32);
/// // SAFETY: no other reference to the cell's contents exists.
/// c.with_mut(|p| unsafe { *p += 1 });
/// assert_eq!(c.with(|p| unsafe { *p }), 2);
/// ```
#[cfg(not(loom))]
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct UnsafeCell<T: ?Sized>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    #[inline]
    pub const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Consumes the cell and returns the value.
    #[inline]
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> UnsafeCell<T> {
    /// Runs `f` with a shared raw pointer to the contents.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a mutable raw pointer to the contents.
    #[inline(always)]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
