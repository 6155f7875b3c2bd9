//! Models the buffer descriptor (`BufferDesc`, `BufferDescPadded` in buf_internals.h), its
//! header lock (`LockBufHdr`, `UnlockBufHdr`, `WaitBufHdrUnlocked`) and pins (`PinBuffer`,
//! `PinBuffer_Locked`, `UnpinBuffer` in bufmgr.c), with the backend-private pin counts
//! (`PrivateRefCount`).
//!
//! # The state word
//! Since 9.6 a descriptor's reference count, usage count and flags share one 32-bit atomic
//! word: the reference count in bits 0–17, the usage count in bits 18–21, the flags above. The
//! header lock is a flag of that word, `BM_LOCKED`, taken by an atomic fetch-or and spun on
//! with `perform_spin_delay`. A pin (`PinBuffer`) does not take the header lock: it reads the
//! word, waits while `BM_LOCKED` is set, and compare-exchanges in one more reference and one
//! more use (capped at [`BM_MAX_USAGE_COUNT`]); it retries when the word changed under it. Anyone
//! who holds the header lock — the clock sweep examining a candidate, `BufferAlloc` retagging a
//! victim — therefore sees a refcount nobody can raise until it unlocks: a buffer pinned
//! concurrently is never taken as a victim.
//!
//! Up to 9.5 the descriptor had separate `refcount`, `usage_count` and `flags` fields guarded by
//! a header spinlock (`buf_hdr_lock`), and a pin took that spinlock ([`PinMethod::HeaderLock`]).
//!
//! A backend pins a buffer in shared memory only once: further pins of the same buffer by the
//! same backend only count up its private entry (and do not raise the usage count); the shared
//! pin is dropped when the private count falls back to zero.
//!
//! # Differences from PostgreSQL
//! - One state word for every release: up to 9.5 the header lock was a separate `slock_t` and
//!   the counts separate fields; here 9.6's word serves all, and [`PinMethod::HeaderLock`] pins
//!   under its `BM_LOCKED` bit. The word is 32 bits, as from 9.6 to 18 (19 widens it to 64).
//! - [`PrivateRefCount`] is one hash map per backend, not the 8-entry array with a hash table
//!   for overflow (9.4+), and has no resource owner.
//! - No `BM_PIN_COUNT_WAITER` wake-up in `UnpinBuffer` (no cleanup locks are modelled).
//! - The content lock sits beside the header in the descriptor's 64 bytes for every release;
//!   up to 9.5 it was an LWLock of the main array (9.5: of a tranche array of its own), on a
//!   line of its own.
//! - Under loom the header lock is taken with a compare-exchange instead of a fetch-or, which
//!   loom would count as a store on every failed try (as `TestAndSet` explains).

use crate::tag::{BufferTag, PassThrough, BUFFER_TAG_SIZE};
use crate::BufMgrError;
use pglocks_proc::Backend;
use pglocks_spin::SpinDelayStatus;
use pglocks_sync::atomic::{AtomicU32, Ordering::*};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::cpu::{self, Kernel};
use pglocks_sync::data;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// `BUF_REFCOUNT_ONE`.
pub const BUF_REFCOUNT_ONE: u32 = 1;
/// `BUF_REFCOUNT_MASK`: bits 0–17.
pub const BUF_REFCOUNT_MASK: u32 = (1 << 18) - 1;
/// `BUF_USAGECOUNT_MASK`: bits 18–21.
pub const BUF_USAGECOUNT_MASK: u32 = 0x003C_0000;
/// `BUF_USAGECOUNT_ONE`.
pub const BUF_USAGECOUNT_ONE: u32 = 1 << 18;
/// `BUF_USAGECOUNT_SHIFT`.
pub const BUF_USAGECOUNT_SHIFT: u32 = 18;
/// `BUF_FLAG_MASK`: bits 22–31.
pub const BUF_FLAG_MASK: u32 = 0xFFC0_0000;
/// `BM_LOCKED`: the buffer header is locked.
pub const BM_LOCKED: u32 = 1 << 22;
/// `BM_DIRTY`: the page needs writing (never set here: no writes are modelled).
pub const BM_DIRTY: u32 = 1 << 23;
/// `BM_VALID`: the page is in the buffer.
pub const BM_VALID: u32 = 1 << 24;
/// `BM_TAG_VALID`: the tag is assigned (the table maps it to this buffer).
pub const BM_TAG_VALID: u32 = 1 << 25;
/// `BM_IO_IN_PROGRESS`: a read (or write) is under way.
pub const BM_IO_IN_PROGRESS: u32 = 1 << 26;
/// `BM_IO_ERROR`: the last I/O failed.
pub const BM_IO_ERROR: u32 = 1 << 27;
/// `BM_JUST_DIRTIED`: dirtied since the write began.
pub const BM_JUST_DIRTIED: u32 = 1 << 28;
/// `BM_PIN_COUNT_WAITER`: someone waits to be the sole pinner.
pub const BM_PIN_COUNT_WAITER: u32 = 1 << 29;
/// `BM_CHECKPOINT_NEEDED`: must be written by the running checkpoint.
pub const BM_CHECKPOINT_NEEDED: u32 = 1 << 30;
/// `BM_PERMANENT`: the page belongs to a permanent (logged) relation.
pub const BM_PERMANENT: u32 = 1 << 31;
/// `BM_MAX_USAGE_COUNT`: the usage count a pin raises no further.
pub const BM_MAX_USAGE_COUNT: u32 = 5;

/// `BUF_STATE_GET_REFCOUNT`.
#[inline(always)]
pub const fn refcount(state: u32) -> u32 {
    state & BUF_REFCOUNT_MASK
}

/// `BUF_STATE_GET_USAGECOUNT`.
#[inline(always)]
pub const fn usage_count(state: u32) -> u32 {
    (state & BUF_USAGECOUNT_MASK) >> BUF_USAGECOUNT_SHIFT
}

/// `freeNext` of a buffer at the end of the freelist (`FREENEXT_END_OF_LIST`, -1).
pub(crate) const FREENEXT_END_OF_LIST: u32 = u32::MAX;
/// `freeNext` of a buffer not on the freelist (`FREENEXT_NOT_IN_LIST`, -2).
pub(crate) const FREENEXT_NOT_IN_LIST: u32 = u32::MAX - 1;

/// How a pin changes the shared state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinMethod {
    /// ≤ 9.5: take the buffer header lock, raise the counts, release it.
    HeaderLock,
    /// 9.6+: compare-exchange the state word, waiting while `BM_LOCKED` is set.
    Cas,
}

/// How a buffer header lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderLock {
    /// 9.6–18 `LockBufHdr`: a `fetch_or` of `BM_LOCKED` on every try (a locked read-modify-write
    /// even while the bit is seen set), `perform_spin_delay` between tries, and
    /// `finish_spin_delay` at the end even when the first try succeeded.
    FetchOr,
    /// ≤ 9.5: `LockBufHdr` was `SpinLockAcquire(&buf->buf_hdr_lock)`, s_lock.h's `S_LOCK`: one
    /// `TAS`; only if that fails, s_lock's loop of `TAS_SPIN` and spin delays, ended by
    /// `finish_spin_delay`. `TAS_SPIN` reads the lock first when `tas_spin` (x86_64 from 9.4).
    SLock {
        /// s_lock.h's `TAS_SPIN` reads before the exchange.
        tas_spin: bool,
    },
}

impl HeaderLock {
    /// The header lock of a release whose pins are `pin` and whose `TAS_SPIN` reads first
    /// when `tas_spin`: the pin by compare-exchange and 9.6's `LockBufHdr` came together.
    pub fn of_release(pin: PinMethod, tas_spin: bool) -> Self {
        match pin {
            PinMethod::Cas => HeaderLock::FetchOr,
            PinMethod::HeaderLock => HeaderLock::SLock { tas_spin },
        }
    }
}

/// Models `BufferDescPadded` (`BUFFERDESC_PAD_TO_SIZE`, 64 bytes) of 9.6+: the descriptor and
/// its buffer's content lock (`content_lock`, tranche `BufferContent`) in one cache line, so a
/// pin and a `LockBuffer` of the same buffer touch the same line, as in PostgreSQL.
#[repr(C, align(64))]
pub(crate) struct PaddedDesc<K> {
    pub desc: BufferDesc,
    /// `content_lock`: what `LockBuffer` takes, shared to read the page, exclusive to change it.
    pub content_lock: K,
}

impl<K> std::ops::Deref for PaddedDesc<K> {
    type Target = BufferDesc;
    fn deref(&self) -> &BufferDesc {
        &self.desc
    }
}

/// Models `BufferDesc`: the tag, the state word and the freelist link (the content lock is
/// beside it in [`PaddedDesc`]).
///
/// The tag is PostgreSQL's first field in every release, at offset 0 of the 64-byte padded
/// descriptor, as here: its reads and writes are charged at its place in the simulated
/// shared-memory map ("Buffer Descriptors"), on the line of the state word and the content
/// lock, as in PostgreSQL. The fields after it are laid out
/// differently (`buf_id` at 20 and `state` at 24 in PostgreSQL, `state` at 20 here), on the
/// same line.
#[repr(C)]
pub(crate) struct BufferDesc {
    /// `tag`: read and written only with the header lock held.
    tag: UnsafeCell<BufferTag>,
    /// `state`: refcount, usage count, flags.
    pub state: AtomicU32,
    /// `freeNext`: guarded by the freelist's lock (`BufFreelistLock` ≤ 9.4,
    /// `buffer_strategy_lock` 9.5+), so relaxed.
    pub free_next: AtomicU32,
}

// SAFETY: `tag` is only touched with the header lock (`BM_LOCKED`) held, whose acquiring
// fetch-or and releasing store order the accesses; the rest are atomics.
unsafe impl Sync for BufferDesc {}

impl BufferDesc {
    /// A free buffer, linked to `next` on the freelist (`StrategyInitialize`).
    pub fn new(next: u32) -> Self {
        Self {
            tag: UnsafeCell::new(BufferTag::main(0, 0, 0)),
            state: AtomicU32::new(0),
            free_next: AtomicU32::new(next),
        }
    }

    /// The tag. The caller holds the header lock (the `u32` it got from [`Self::lock`]).
    /// Charged as a read of the descriptor's first [`BUFFER_TAG_SIZE`] bytes.
    #[inline]
    pub fn tag(&self, _locked: u32) -> BufferTag {
        self.tag.with(|t| {
            data::touch_range(t, BUFFER_TAG_SIZE, false);
            // SAFETY: the header lock is held (the caller shows its locked state word), so no
            // writer runs meanwhile.
            unsafe { *t }
        })
    }

    /// Sets the tag. The caller holds the header lock. Charged as a write of the descriptor's
    /// first [`BUFFER_TAG_SIZE`] bytes.
    #[inline]
    pub fn set_tag(&self, _locked: u32, tag: BufferTag) {
        self.tag.with_mut(|t| {
            data::touch_range(t, BUFFER_TAG_SIZE, true);
            // SAFETY: the header lock is held, so no other reader or writer runs meanwhile.
            unsafe { *t = tag }
        });
    }

    /// `BM_LOCKED`'s test-and-set: sets the bit and returns the word as it was before.
    #[inline(always)]
    fn test_and_set(&self) -> u32 {
        #[cfg(not(loom))]
        return self.state.fetch_or(BM_LOCKED, Acquire);
        #[cfg(loom)]
        {
            let s = self.state.load(Relaxed);
            match self
                .state
                .compare_exchange(s & !BM_LOCKED, s | BM_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => s & !BM_LOCKED,
                Err(_) => s | BM_LOCKED,
            }
        }
    }

    /// Models `LockBufHdr`: sets `BM_LOCKED` as the release did (see [`HeaderLock`]).
    /// Returns the state word, locked.
    #[inline]
    pub fn lock(&self, b: &mut Backend, how: HeaderLock) -> Result<u32, BufMgrError> {
        let old = self.test_and_set();
        if old & BM_LOCKED != 0 {
            return self.lock_slow(b, how);
        }
        if how == HeaderLock::FetchOr {
            // 9.6+ end every LockBufHdr with finish_spin_delay, so an uncontended lock raises
            // the backend's spins_per_delay (by 100, up to 1000) as s_lock does after a spin.
            SpinDelayStatus::new().finish_spin_delay(b);
        }
        Ok(old | BM_LOCKED)
    }

    /// The retries of [`Self::lock`]: a spin delay, then (9.6+) another fetch-or or (≤ 9.5,
    /// s_lock) `TAS_SPIN`, which reads the bit first when the release's `tas_spin` says so.
    #[cold]
    fn lock_slow(&self, b: &mut Backend, how: HeaderLock) -> Result<u32, BufMgrError> {
        let mut delay = SpinDelayStatus::new();
        // s_lock tries TAS_SPIN once before its first delay; LockBufHdr delays first.
        let mut spin_first = how != HeaderLock::FetchOr;
        loop {
            if !spin_first {
                delay
                    .perform_spin_delay(b)
                    .map_err(|e| BufMgrError::stuck("buffer header", e))?;
            }
            spin_first = false;
            let seen_busy = matches!(how, HeaderLock::SLock { tas_spin: true })
                && self.state.load(Relaxed) & BM_LOCKED != 0;
            if !seen_busy {
                let old = self.test_and_set();
                if old & BM_LOCKED == 0 {
                    delay.finish_spin_delay(b);
                    return Ok(old | BM_LOCKED);
                }
            }
        }
    }

    /// Models `UnlockBufHdr`: stores `state` (which must have been derived from the locked
    /// word) without `BM_LOCKED`.
    #[inline]
    pub fn unlock(&self, state: u32) {
        self.state.store(state & !BM_LOCKED, Release);
    }

    /// Models `WaitBufHdrUnlocked`: the state word once `BM_LOCKED` is clear.
    #[cold]
    pub fn wait_unlocked(&self, b: &mut Backend) -> Result<u32, BufMgrError> {
        let mut delay = SpinDelayStatus::new();
        let mut s = self.state.load(Acquire);
        while s & BM_LOCKED != 0 {
            delay
                .perform_spin_delay(b)
                .map_err(|e| BufMgrError::stuck("buffer header", e))?;
            s = self.state.load(Acquire);
        }
        delay.finish_spin_delay(b);
        Ok(s)
    }

    /// Applies `f` to the state word as a pin or unpin does: with [`PinMethod::Cas`] a
    /// compare-exchange loop that waits out `BM_LOCKED`, with [`PinMethod::HeaderLock`] under
    /// the header lock. Returns the new word.
    #[inline]
    pub fn update_unlocked(
        &self,
        b: &mut Backend,
        method: PinMethod,
        how: HeaderLock,
        f: impl Fn(u32) -> u32,
    ) -> Result<u32, BufMgrError> {
        if method == PinMethod::HeaderLock {
            let new = f(self.lock(b, how)?);
            self.unlock(new);
            return Ok(new & !BM_LOCKED);
        }
        let mut old = self.state.load(Relaxed);
        loop {
            if old & BM_LOCKED != 0 {
                old = self.wait_unlocked(b)?;
            }
            let new = f(old);
            match self.state.compare_exchange_weak(old, new, AcqRel, Relaxed) {
                Ok(_) => return Ok(new),
                Err(now) => {
                    // PostgreSQL retries at once (a yield point for loom only).
                    old = now;
                    pglocks_sync::hint::model_yield();
                }
            }
        }
    }
}

/// Models a backend's `PrivateRefCount` entries: how many times it has pinned each buffer.
/// The shared refcount counts each backend once.
///
/// The map's hasher is a fixed function, not std's per-process random one: when and how the map
/// allocates (its growth, where removals leave their marks) is then the same in every process,
/// and so is where a simulated run's later objects land in the host heap, which decides which
/// of them share a cache line.
///
/// Each probe of the map is charged as the probe kernel ([`Kernel::Probe`]): a lookup, an insert
/// and a delete one each. PostgreSQL's array of 8 entries searched first
/// (`GetPrivateRefCountEntry`, `REFCOUNT_ARRAY_ENTRIES`) compares up to 8 buffer numbers
/// instead, of the same order of time; its overflow table is probed as this map is.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PrivateRefCount {
    pins: HashMap<u32, u32, BuildHasherDefault<PassThrough>>,
}

impl PrivateRefCount {
    /// A backend with no pins.
    pub fn new() -> Self {
        Self::default()
    }

    /// This backend's pins of buffer `buf_id` (`GetPrivateRefCount`).
    pub fn get(&self, buf_id: u32) -> u32 {
        cpu::ran(Kernel::Probe, 1);
        self.pins.get(&buf_id).copied().unwrap_or(0)
    }

    /// The buffers this backend has pinned, with their counts, in buffer order.
    pub fn pinned(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<_> = self.pins.iter().map(|(&b, &n)| (b, n)).collect();
        v.sort_unstable();
        v
    }

    /// Counts one more pin of `buf_id`; returns the new count.
    #[inline]
    pub(crate) fn add(&mut self, buf_id: u32) -> u32 {
        cpu::ran(Kernel::Probe, 1);
        let n = self.pins.entry(buf_id).or_insert(0);
        *n += 1;
        *n
    }

    /// Counts one pin of `buf_id` less; returns the new count, or `None` if it had none.
    #[inline]
    pub(crate) fn remove(&mut self, buf_id: u32) -> Option<u32> {
        cpu::ran(Kernel::Probe, 1);
        let n = self.pins.get_mut(&buf_id)?;
        *n -= 1;
        let left = *n;
        if left == 0 {
            cpu::ran(Kernel::Probe, 1);
            self.pins.remove(&buf_id);
        }
        Some(left)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_proc::ProcTable;

    /// A backend's `spins_per_delay` after `n` uncontended header locks taken `how`.
    fn spins_after(how: HeaderLock, n: usize) -> (u32, u32) {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let desc = BufferDesc::new(FREENEXT_NOT_IN_LIST);
        let start = b.spin.spins_per_delay;
        for _ in 0..n {
            let s = desc.lock(&mut b, how).unwrap();
            assert_eq!(s & BM_LOCKED, BM_LOCKED);
            desc.unlock(s);
        }
        assert_eq!(desc.state.load(Relaxed), 0);
        (start, b.spin.spins_per_delay)
    }

    #[test]
    fn lock_buf_hdr_finishes_its_spin_delay_even_uncontended() {
        // 9.6+: every LockBufHdr ends with finish_spin_delay, which, having never slept, raises
        // the estimate by 100 up to MAX_SPINS_PER_DELAY.
        let (start, after_one) = spins_after(HeaderLock::FetchOr, 1);
        assert_eq!(after_one, (start + 100).min(1000));
        assert_eq!(spins_after(HeaderLock::FetchOr, 20).1, 1000);
    }

    #[test]
    fn s_lock_leaves_the_estimate_alone_when_the_first_tas_wins() {
        // <= 9.5: S_LOCK calls s_lock (and so finish_spin_delay) only after a failed TAS.
        for tas_spin in [false, true] {
            let (start, after) = spins_after(HeaderLock::SLock { tas_spin }, 5);
            assert_eq!(after, start);
        }
    }

    #[test]
    fn the_tag_is_the_padded_descriptors_first_20_bytes() {
        let d = PaddedDesc {
            desc: BufferDesc::new(FREENEXT_NOT_IN_LIST),
            content_lock: 0u64,
        };
        let base = &d as *const PaddedDesc<u64> as usize;
        assert_eq!(d.tag.with(|t| t as usize), base);
    }

    #[test]
    fn a_contended_header_lock_is_had_once_the_holder_unlocks() {
        for how in [
            HeaderLock::FetchOr,
            HeaderLock::SLock { tas_spin: false },
            HeaderLock::SLock { tas_spin: true },
        ] {
            let procs = ProcTable::new(2);
            let desc = std::sync::Arc::new(BufferDesc::new(FREENEXT_NOT_IN_LIST));
            let mut a = procs.attach().unwrap();
            let held = desc.lock(&mut a, how).unwrap();
            let d2 = std::sync::Arc::clone(&desc);
            let mut other = procs.attach().unwrap();
            let t = std::thread::spawn(move || {
                let s = d2.lock(&mut other, how).unwrap();
                d2.unlock(s + BUF_REFCOUNT_ONE);
            });
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert_eq!(
                refcount(desc.state.load(Relaxed)),
                0,
                "{how:?}: not while held"
            );
            desc.unlock(held);
            t.join().unwrap();
            assert_eq!(refcount(desc.state.load(Relaxed)), 1, "{how:?}");
        }
    }
}
