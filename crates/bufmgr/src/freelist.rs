//! Models freelist.c: `StrategyGetBuffer` (the victim search), `ClockSweepTick`,
//! `StrategyFreeBuffer` and the shared `BufferStrategyControl`.
//!
//! # The algorithm
//! A buffer for a new page comes from the freelist if it has any (at start-up every buffer is
//! on it; `InvalidateBuffer` puts buffers back), else from the *clock sweep*: a hand moves
//! round the buffers; a candidate that is pinned is skipped, one with a non-zero usage count has
//! it decremented and is skipped, and the first one unpinned with usage count zero is the
//! victim. Every pin raises the usage count (up to 5), so a buffer survives as many passes of
//! the hand as it was recently used. Each candidate is examined under its header lock, and the
//! victim is returned with that lock still held, so nobody can pin it before the caller does.
//! If the hand has gone `NBuffers` steps without finding a victim or decrementing anything —
//! every buffer pinned — the search fails with "no unpinned buffers available".
//!
//! Up to 9.4 the freelist, the hand and its pass count are all under `BufFreelistLock`, an
//! LWLock taken exclusively for the whole search ([`VictimSearch::FreelistLock`]): every
//! backend that misses queues on it. `StrategyGetBuffer` even returns with it held, and
//! `BufferAlloc` releases it only once the victim is pinned.
//!
//! 9.5 made the hand an atomic counter, `nextVictimBuffer`, that each step advances with one
//! fetch-add (`ClockSweepTick`, [`VictimSearch::AtomicClockHand`]); the counter runs past
//! `NBuffers` and is read modulo it, and whoever takes it to a multiple of `NBuffers` wraps it
//! back with a compare-exchange under the `buffer_strategy_lock` spinlock, counting the pass in
//! `completePasses`. The freelist moved under that spinlock too, held only to unlink one
//! buffer. The search itself takes no lock at all.
//!
//! # Differences from PostgreSQL
//! - No buffer access strategies (rings), no bgwriter latch, no `StrategySyncStart`; the
//!   `numBufferAllocs` count is kept.
//! - 19 dropped the freelist and examines candidates with a compare-exchange instead of the
//!   header lock; that is not modelled (the presets end at 18).

use crate::desc::{refcount, usage_count, BUF_USAGECOUNT_ONE, FREENEXT_END_OF_LIST};
use crate::desc::{BufferDesc, FREENEXT_NOT_IN_LIST};
use crate::{BufMgr, BufMgrError};
use pglocks_lwlock::{LwLockMode, Padding, RawLwLock};
use pglocks_proc::Backend;
use pglocks_spin::{PgSpinLock, RawSpinLock};
use pglocks_sync::atomic::{AtomicU32, Ordering::*};

/// Who guards the hand and the freelist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimSearch {
    /// ≤ 9.4: `BufFreelistLock`, held exclusively for the whole search.
    FreelistLock,
    /// 9.5+: an atomic hand (`ClockSweepTick`); the freelist under `buffer_strategy_lock`.
    AtomicClockHand,
}

/// Models `BufferStrategyControl` (9.5+'s fields, in its order: the spinlock, the hand, the
/// freelist's ends and the two counts, all on one line, as `StrategyInitialize` allocates it,
/// "Buffer Strategy Status"). Up to 9.4 the struct had no spinlock and the hand was a plain
/// `int` under `BufFreelistLock`; the model keeps 9.5's layout for every release (the fields
/// shift by four bytes on the same line), and `BufFreelistLock` is the pool's own.
#[repr(C)]
pub(crate) struct StrategyControl {
    /// `buffer_strategy_lock` (9.5+): the freelist and the wraparound of the hand.
    pub strategy_lock: PgSpinLock<true>,
    /// `nextVictimBuffer`: the hand (9.5+ atomic and running past `NBuffers`; ≤ 9.4 a plain
    /// index under `BufFreelistLock`).
    pub next_victim_buffer: AtomicU32,
    /// `firstFreeBuffer` (`FREENEXT_END_OF_LIST` when empty); read without the lock by 9.5+.
    pub first_free_buffer: AtomicU32,
    /// `lastFreeBuffer`.
    pub last_free_buffer: AtomicU32,
    /// `completePasses`: full turns of the hand.
    pub complete_passes: AtomicU32,
    /// `numBufferAllocs`.
    pub num_buffer_allocs: AtomicU32,
}

impl StrategyControl {
    /// `StrategyInitialize`: every buffer on the freelist in order, the hand at 0.
    pub fn new(nbuffers: usize) -> Self {
        Self {
            strategy_lock: PgSpinLock::new(),
            next_victim_buffer: AtomicU32::new(0),
            first_free_buffer: AtomicU32::new(0),
            last_free_buffer: AtomicU32::new(nbuffers as u32 - 1),
            complete_passes: AtomicU32::new(0),
            num_buffer_allocs: AtomicU32::new(0),
        }
    }
}

/// A victim buffer: header locked (`state` is its locked word), not yet pinned.
pub(crate) struct Victim {
    pub buf_id: u32,
    pub state: u32,
    /// ≤ 9.4: `BufFreelistLock` is still held; the caller releases it after pinning.
    pub freelist_lock_held: bool,
}

impl<K: RawLwLock, P: Padding> BufMgr<K, P> {
    /// Takes `buffer_strategy_lock` (9.5+).
    #[inline]
    fn strategy_lock(&self, b: &mut Backend) -> Result<(), BufMgrError> {
        self.strategy
            .strategy_lock
            .lock(b)
            .map_err(|e| BufMgrError::stuck("buffer_strategy_lock", e))
    }

    /// Releases `buffer_strategy_lock`.
    #[inline]
    fn strategy_unlock(&self) {
        // SAFETY: only called after `strategy_lock` succeeded, by the same caller.
        unsafe { self.strategy.strategy_lock.unlock() };
    }

    /// Unlinks the head of the freelist; the caller holds the freelist's lock.
    fn pop_free(&self) -> Option<u32> {
        let first = self.strategy.first_free_buffer.load(Relaxed);
        if first == FREENEXT_END_OF_LIST {
            return None;
        }
        let buf = &self.descs[first as usize];
        self.strategy
            .first_free_buffer
            .store(buf.free_next.load(Relaxed), Relaxed);
        buf.free_next.store(FREENEXT_NOT_IN_LIST, Relaxed);
        Some(first)
    }

    /// Models `ClockSweepTick` (9.5+): the next candidate, from one fetch-add on the hand; the
    /// backend whose tick lands on a multiple of `NBuffers` wraps the counter back under
    /// `buffer_strategy_lock` and counts the pass.
    #[inline]
    pub(crate) fn clock_sweep_tick(&self, b: &mut Backend) -> Result<u32, BufMgrError> {
        let n = self.descs.len() as u32;
        let victim = self.strategy.next_victim_buffer.fetch_add(1, Relaxed);
        if victim < n {
            return Ok(victim);
        }
        let wrapped_victim = victim % n;
        if wrapped_victim == 0 {
            self.wrap_hand(b, victim)?;
        }
        Ok(wrapped_victim)
    }

    /// The wraparound of `ClockSweepTick`: brings the counter back below `NBuffers` unless
    /// another backend's tick already did.
    #[cold]
    fn wrap_hand(&self, b: &mut Backend, victim: u32) -> Result<(), BufMgrError> {
        let n = self.descs.len() as u32;
        let mut expected = victim.wrapping_add(1);
        loop {
            self.strategy_lock(b)?;
            let done = self.strategy.next_victim_buffer.compare_exchange(
                expected,
                expected % n,
                Relaxed,
                Relaxed,
            );
            if done.is_ok() {
                self.strategy.complete_passes.fetch_add(1, Relaxed);
            }
            self.strategy_unlock();
            match done {
                Ok(_) => return Ok(()),
                Err(now) => {
                    expected = now;
                    pglocks_sync::hint::spin_loop();
                }
            }
        }
    }

    /// ≤ 9.4's tick: the plain hand under `BufFreelistLock`.
    #[inline]
    fn locked_tick(&self) -> u32 {
        let hand = &self.strategy.next_victim_buffer;
        let victim = hand.load(Relaxed);
        if victim + 1 >= self.descs.len() as u32 {
            hand.store(0, Relaxed);
            self.strategy.complete_passes.fetch_add(1, Relaxed);
        } else {
            hand.store(victim + 1, Relaxed);
        }
        victim
    }

    /// The freelist part of `StrategyGetBuffer`: a buffer from the freelist that is unpinned
    /// with usage count zero, header locked. The caller holds `BufFreelistLock` (≤ 9.4); 9.5+
    /// takes `buffer_strategy_lock` per buffer unlinked.
    fn get_from_freelist(&self, b: &mut Backend) -> Result<Option<(u32, u32)>, BufMgrError> {
        let locked = self.victim_search == VictimSearch::FreelistLock;
        // 9.5+ looks without the lock first: an empty list costs nothing.
        if !locked && self.strategy.first_free_buffer.load(Relaxed) == FREENEXT_END_OF_LIST {
            return Ok(None);
        }
        loop {
            if !locked {
                self.strategy_lock(b)?;
            }
            let popped = self.pop_free();
            if !locked {
                self.strategy_unlock();
            }
            let Some(buf_id) = popped else {
                return Ok(None);
            };
            // A buffer on the freelist may have been pinned by a lookup since it went there.
            let desc = &self.descs[buf_id as usize];
            let state = desc.lock(b, self.hdr)?;
            if refcount(state) == 0 && usage_count(state) == 0 {
                return Ok(Some((buf_id, state)));
            }
            desc.unlock(state);
        }
    }

    /// Models `StrategyGetBuffer`: a victim for a new page, header locked and unpinned, from
    /// the freelist or the clock sweep. Samples `bufmgr.sweep_ticks`, the hand's steps.
    pub(crate) fn strategy_get_buffer(&self, b: &mut Backend) -> Result<Victim, BufMgrError> {
        let locked = self.victim_search == VictimSearch::FreelistLock;
        if locked {
            self.freelist_lock.acquire(b, LwLockMode::Exclusive)?;
        }
        self.strategy.num_buffer_allocs.fetch_add(1, Relaxed);
        let found = match self.get_from_freelist(b) {
            Ok(Some(free)) => {
                b.stats.events.sample("bufmgr.sweep_ticks", 0);
                Ok(free)
            }
            Ok(None) => self.clock_sweep(b, locked),
            Err(e) => Err(e),
        };
        match found {
            Ok((buf_id, state)) => Ok(Victim {
                buf_id,
                state,
                freelist_lock_held: locked,
            }),
            Err(e) => {
                if locked {
                    self.freelist_lock.release(b)?;
                }
                Err(e)
            }
        }
    }

    /// The clock-sweep part of `StrategyGetBuffer`.
    fn clock_sweep(&self, b: &mut Backend, locked: bool) -> Result<(u32, u32), BufMgrError> {
        let n = self.descs.len() as u32;
        let mut trycounter = n;
        let mut ticks = 0u64;
        loop {
            let buf_id = if locked {
                self.locked_tick()
            } else {
                self.clock_sweep_tick(b)?
            };
            ticks += 1;
            let desc: &BufferDesc = &self.descs[buf_id as usize];
            let mut state = desc.lock(b, self.hdr)?;
            if refcount(state) == 0 {
                if usage_count(state) == 0 {
                    b.stats.events.sample("bufmgr.sweep_ticks", ticks);
                    return Ok((buf_id, state));
                }
                state -= BUF_USAGECOUNT_ONE;
                trycounter = n;
            } else {
                trycounter -= 1;
                if trycounter == 0 {
                    desc.unlock(state);
                    return Err(BufMgrError::NoUnpinnedBuffers);
                }
            }
            desc.unlock(state);
            // No pause between candidates, as in PostgreSQL (a yield point for loom only).
            pglocks_sync::hint::model_yield();
        }
    }

    /// Models `StrategyFreeBuffer`: puts `buf_id` at the head of the freelist unless it is on
    /// it already.
    pub(crate) fn strategy_free_buffer(
        &self,
        b: &mut Backend,
        buf_id: u32,
    ) -> Result<(), BufMgrError> {
        let locked = self.victim_search == VictimSearch::FreelistLock;
        if locked {
            self.freelist_lock.acquire(b, LwLockMode::Exclusive)?;
        } else {
            self.strategy_lock(b)?;
        }
        let desc = &self.descs[buf_id as usize];
        if desc.free_next.load(Relaxed) == FREENEXT_NOT_IN_LIST {
            let first = self.strategy.first_free_buffer.load(Relaxed);
            desc.free_next.store(first, Relaxed);
            if first == FREENEXT_END_OF_LIST {
                self.strategy.last_free_buffer.store(buf_id, Relaxed);
            }
            self.strategy.first_free_buffer.store(buf_id, Relaxed);
        }
        if locked {
            self.freelist_lock.release(b)?;
        } else {
            self.strategy_unlock();
        }
        Ok(())
    }
}
