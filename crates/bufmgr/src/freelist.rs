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
//! # A prototype: the search split per NUMA node
//! [`SweepPartitions::PerNode`] (`--set clock_sweep=node`, off in every release's preset) models
//! the freelist and clock-sweep partitioning of the 2025 "Adding basic NUMA awareness" patch
//! series on pgsql-hackers (its "partition buffer freelist" patch with the `node` strategy, and
//! the clock-sweep partitioning that followed it). The buffers are split into contiguous ranges,
//! the same number for each node and [`MIN_SWEEP_PARTITIONS`] in all at least (the series
//! interleaves shared buffers so that each range's memory is on its node); each range has a
//! `StrategyControl` of its own — spinlock, hand, freelist, counts, and the range's first
//! buffer and size — 32 bytes, the array of them unpadded as the series lays it out, so two
//! ranges share a line. `clock_sweep=node-padded` gives each 128 bytes of its own
//! (`PG_CACHE_LINE_SIZE`), a layout the series does not use. A backend searches the range of its
//! node (one of them by its proc number, when a node has several): its freelist, then its hand,
//! which runs over that range only. Where the series is silent the model chooses:
//! - a range whose every buffer is pinned sends the search on to the next range (freelist, then
//!   hand) and so on round; only when every range has failed is there "no unpinned buffers
//!   available";
//! - a backend's node is the one it attached on ([`Backend::numa_node`]), taken modulo the
//!   nodes the pool was split for;
//! - a buffer given back (`StrategyFreeBuffer`) goes on the freelist of the range that holds it.
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
use pglocks_sync::shmem::ShmemArray;

/// Who guards the hand and the freelist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimSearch {
    /// ≤ 9.4: `BufFreelistLock`, held exclusively for the whole search.
    FreelistLock,
    /// 9.5+: an atomic hand (`ClockSweepTick`); the freelist under `buffer_strategy_lock`.
    AtomicClockHand,
}

/// How the victim search is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepPartitions {
    /// PostgreSQL's, in every release: one hand and one freelist for the whole pool.
    One,
    /// A prototype (see the module doc): a hand and a freelist for each range of buffers, the
    /// same number of ranges for each of `nodes` NUMA nodes and [`MIN_SWEEP_PARTITIONS`] in all
    /// at least.
    PerNode {
        /// The machine's NUMA nodes.
        nodes: usize,
        /// Each range's `StrategyControl` on 128 bytes of its own, instead of back to back.
        padded: bool,
    },
}

/// The fewest ranges [`SweepPartitions::PerNode`] splits the buffers into, as the NUMA patch
/// series does on a machine of fewer nodes (several ranges to a node), to spread the hands'
/// traffic even there.
pub const MIN_SWEEP_PARTITIONS: usize = 4;

/// Bytes each range's `StrategyControl` takes when padded: `PG_CACHE_LINE_SIZE`.
const PADDED_CONTROL: usize = 128;

impl SweepPartitions {
    /// The most nodes [`SweepPartitions::PerNode`] takes.
    pub const MAX_NODES: usize = 1024;

    /// Ranges for each node.
    pub fn per_node(self) -> usize {
        match self {
            SweepPartitions::One => 1,
            SweepPartitions::PerNode { nodes, .. } => MIN_SWEEP_PARTITIONS.div_ceil(nodes.max(1)),
        }
    }

    /// Ranges in all.
    pub fn count(self) -> usize {
        match self {
            SweepPartitions::One => 1,
            SweepPartitions::PerNode { nodes, .. } => nodes * self.per_node(),
        }
    }
}

/// Models `BufferStrategyControl` (9.5+'s fields, in its order: the spinlock, the hand, the
/// freelist's ends and the two counts, all on one line, as `StrategyInitialize` allocates it,
/// "Buffer Strategy Status"). Up to 9.4 the struct had no spinlock and the hand was a plain
/// `int` under `BufFreelistLock`; the model keeps 9.5's layout for every release (the fields
/// shift by four bytes on the same line), and `BufFreelistLock` is the pool's own. The last
/// two fields are the NUMA series' per-range ones, which give its array of them 32-byte
/// elements; PostgreSQL's single struct never touches them (nor has them: its own last field,
/// `bgwprocno`, is not modelled).
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
    /// The range's first buffer (the NUMA series'; written at start-up only, and read from
    /// the backend's own copy, [`Sweeps`]' bounds, which costs the same: the hand's
    /// fetch-add has just brought the line).
    first_buffer: u32,
    /// The range's buffers (the NUMA series').
    num_buffers: u32,
}

impl StrategyControl {
    /// `StrategyInitialize` for buffers `first..=last`: every one on the freelist in order,
    /// the hand at the first.
    fn new(first: u32, last: u32) -> Self {
        Self {
            first_buffer: first,
            num_buffers: last + 1 - first,
            strategy_lock: PgSpinLock::new(),
            next_victim_buffer: AtomicU32::new(0),
            first_free_buffer: AtomicU32::new(first),
            last_free_buffer: AtomicU32::new(last),
            complete_passes: AtomicU32::new(0),
            num_buffer_allocs: AtomicU32::new(0),
        }
    }
}

/// The victim search's shared state: one [`StrategyControl`] ("Buffer Strategy Status"), or
/// with [`SweepPartitions::PerNode`] an array of them, one per range of buffers.
pub(crate) struct Sweeps {
    /// Range `p`'s struct is element `p`.
    parts: ShmemArray<StrategyControl>,
    /// Range `p` is buffers `bounds[p]..bounds[p + 1]`. Fixed at start-up and read by every
    /// backend, as `NBuffers` is: kept beside the shared structures, not in them.
    bounds: Box<[u32]>,
    /// Ranges for each node.
    per_node: usize,
}

impl Sweeps {
    /// The ranges `nbuffers` buffers are split into as `split` says, as [`Sweeps::new`]
    /// takes them: range `p` is buffers `bounds[p]..bounds[p + 1]`, `p * nbuffers / ranges`
    /// onwards, so that when the ranges do not divide the buffers they differ by one buffer at
    /// most, the longer ones spread among them and the last one of them. The caller has checked
    /// that every range gets a buffer.
    pub fn bounds(nbuffers: usize, split: SweepPartitions) -> Box<[u32]> {
        let count = split.count();
        (0..=count).map(|p| (p * nbuffers / count) as u32).collect()
    }

    /// The `freeNext` buffer `buf_id` starts with: the next buffer of its range, or the end
    /// of its range's list.
    pub fn initial_free_next(bounds: &[u32], buf_id: u32) -> u32 {
        let next = buf_id + 1;
        if bounds.binary_search(&next).is_ok() {
            FREENEXT_END_OF_LIST
        } else {
            next
        }
    }

    /// `StrategyInitialize` for the ranges `bounds` of [`Sweeps::bounds`]: each range's
    /// buffers on its freelist in order (as [`Sweeps::initial_free_next`] links them), its
    /// hand at its first buffer.
    pub fn new(bounds: Box<[u32]>, split: SweepPartitions) -> Self {
        let padding = match split {
            SweepPartitions::PerNode { padded: true, .. } => PADDED_CONTROL,
            _ => 0,
        };
        let parts =
            ShmemArray::spaced_by_index("Buffer Strategy Status", bounds.len() - 1, padding, |p| {
                StrategyControl::new(bounds[p], bounds[p + 1] - 1)
            });
        Self {
            parts,
            bounds,
            per_node: split.per_node(),
        }
    }

    /// Range `p`'s `StrategyControl`.
    #[inline]
    fn part(&self, p: usize) -> &StrategyControl {
        &self.parts[p]
    }

    /// The range a backend searches first: its node's (one of them by its proc number, when
    /// the node has several). The only range, unless split.
    #[inline]
    fn home(&self, b: &Backend) -> usize {
        let count = self.count();
        if count == 1 {
            return 0;
        }
        let node = b.numa_node() % (count / self.per_node);
        node * self.per_node + b.procno() % self.per_node
    }

    /// The range holding `buf_id`.
    fn of_buffer(&self, buf_id: u32) -> usize {
        self.bounds.partition_point(|&first| first <= buf_id) - 1
    }

    /// Range `p`'s first buffer and its number of buffers.
    #[inline]
    fn range(&self, p: usize) -> (u32, u32) {
        (self.bounds[p], self.bounds[p + 1] - self.bounds[p])
    }

    /// `completePasses`, summed over the ranges.
    pub fn complete_passes(&self) -> u32 {
        self.parts
            .iter_to(self.count())
            .map(|s| s.complete_passes.load(Relaxed))
            .sum()
    }

    /// Ranges.
    #[inline]
    pub fn count(&self) -> usize {
        self.parts.len()
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
    /// Takes range `p`'s `buffer_strategy_lock` (9.5+).
    #[inline]
    fn strategy_lock(&self, b: &mut Backend, p: usize) -> Result<(), BufMgrError> {
        self.sweeps
            .part(p)
            .strategy_lock
            .lock(b)
            .map_err(|e| BufMgrError::stuck("buffer_strategy_lock", e))
    }

    /// Releases range `p`'s `buffer_strategy_lock`.
    #[inline]
    fn strategy_unlock(&self, p: usize) {
        // SAFETY: only called after `strategy_lock(_, p)` succeeded, by the same caller.
        unsafe { self.sweeps.part(p).strategy_lock.unlock() };
    }

    /// Unlinks the head of range `p`'s freelist; the caller holds the freelist's lock.
    fn pop_free(&self, p: usize) -> Option<u32> {
        let strategy = &self.sweeps.part(p);
        let first = strategy.first_free_buffer.load(Relaxed);
        if first == FREENEXT_END_OF_LIST {
            return None;
        }
        let buf = &self.descs[first as usize];
        strategy
            .first_free_buffer
            .store(buf.free_next.load(Relaxed), Relaxed);
        buf.free_next.store(FREENEXT_NOT_IN_LIST, Relaxed);
        Some(first)
    }

    /// Models `ClockSweepTick` (9.5+): the next candidate of range `p` (the whole pool unless
    /// split), from one fetch-add on its hand; the backend whose tick lands on a multiple of
    /// the range's size wraps the counter back under its `buffer_strategy_lock` and counts the
    /// pass.
    #[inline]
    pub(crate) fn clock_sweep_tick(&self, b: &mut Backend, p: usize) -> Result<u32, BufMgrError> {
        let (first, n) = self.sweeps.range(p);
        let victim = self.sweeps.part(p).next_victim_buffer.fetch_add(1, Relaxed);
        if victim < n {
            return Ok(first + victim);
        }
        let wrapped_victim = victim % n;
        if wrapped_victim == 0 {
            self.wrap_hand(b, p, victim)?;
        }
        Ok(first + wrapped_victim)
    }

    /// The wraparound of `ClockSweepTick`: brings range `p`'s counter back below the range's
    /// size unless another backend's tick already did.
    #[cold]
    fn wrap_hand(&self, b: &mut Backend, p: usize, victim: u32) -> Result<(), BufMgrError> {
        let n = self.sweeps.range(p).1;
        let strategy = &self.sweeps.part(p);
        let mut expected = victim.wrapping_add(1);
        loop {
            self.strategy_lock(b, p)?;
            let done = strategy.next_victim_buffer.compare_exchange(
                expected,
                expected % n,
                Relaxed,
                Relaxed,
            );
            if done.is_ok() {
                strategy.complete_passes.fetch_add(1, Relaxed);
            }
            self.strategy_unlock(p);
            match done {
                Ok(_) => return Ok(()),
                Err(now) => {
                    expected = now;
                    pglocks_sync::hint::spin_loop();
                }
            }
        }
    }

    /// ≤ 9.4's tick: the plain hand under `BufFreelistLock` (never split).
    #[inline]
    fn locked_tick(&self) -> u32 {
        let strategy = self.sweeps.part(0);
        let hand = &strategy.next_victim_buffer;
        let victim = hand.load(Relaxed);
        if victim + 1 >= self.descs.len() as u32 {
            hand.store(0, Relaxed);
            strategy.complete_passes.fetch_add(1, Relaxed);
        } else {
            hand.store(victim + 1, Relaxed);
        }
        victim
    }

    /// The freelist part of `StrategyGetBuffer`: a buffer from range `p`'s freelist that is
    /// unpinned with usage count zero, header locked. The caller holds `BufFreelistLock`
    /// (≤ 9.4); 9.5+ takes `buffer_strategy_lock` per buffer unlinked.
    fn get_from_freelist(
        &self,
        b: &mut Backend,
        p: usize,
    ) -> Result<Option<(u32, u32)>, BufMgrError> {
        let locked = self.victim_search == VictimSearch::FreelistLock;
        // 9.5+ looks without the lock first: an empty list costs nothing.
        if !locked && self.sweeps.part(p).first_free_buffer.load(Relaxed) == FREENEXT_END_OF_LIST {
            return Ok(None);
        }
        loop {
            if !locked {
                self.strategy_lock(b, p)?;
            }
            let popped = self.pop_free(p);
            if !locked {
                self.strategy_unlock(p);
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
    /// the freelist or the clock sweep — of the backend's own range first when the search is
    /// split, then of the others in turn. Samples `bufmgr.sweep_ticks`, the steps of the hand
    /// that found the victim (a split search's steps in ranges that had every buffer pinned are
    /// not counted, as a search that fails is not).
    pub(crate) fn strategy_get_buffer(&self, b: &mut Backend) -> Result<Victim, BufMgrError> {
        let locked = self.victim_search == VictimSearch::FreelistLock;
        if locked {
            self.freelist_lock.acquire(b, LwLockMode::Exclusive)?;
        }
        let home = self.sweeps.home(b);
        self.sweeps
            .part(home)
            .num_buffer_allocs
            .fetch_add(1, Relaxed);
        let mut found = self.victim_in(b, home, locked);
        if matches!(found, Err(BufMgrError::NoUnpinnedBuffers)) && self.sweeps.count() > 1 {
            found = self.victim_elsewhere(b, home);
        }
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

    /// A victim from range `p`: its freelist, then its hand.
    #[inline]
    fn victim_in(
        &self,
        b: &mut Backend,
        p: usize,
        locked: bool,
    ) -> Result<(u32, u32), BufMgrError> {
        match self.get_from_freelist(b, p)? {
            Some(free) => {
                b.stats.events.sample("bufmgr.sweep_ticks", 0);
                Ok(free)
            }
            None => self.clock_sweep(b, p, locked),
        }
    }

    /// A split search whose own range has every buffer pinned: the other ranges in turn.
    #[cold]
    fn victim_elsewhere(&self, b: &mut Backend, home: usize) -> Result<(u32, u32), BufMgrError> {
        let count = self.sweeps.count();
        for k in 1..count {
            match self.victim_in(b, (home + k) % count, false) {
                Err(BufMgrError::NoUnpinnedBuffers) => continue,
                found => return found,
            }
        }
        Err(BufMgrError::NoUnpinnedBuffers)
    }

    /// The clock-sweep part of `StrategyGetBuffer`, over range `p`.
    fn clock_sweep(
        &self,
        b: &mut Backend,
        p: usize,
        locked: bool,
    ) -> Result<(u32, u32), BufMgrError> {
        let n = self.sweeps.range(p).1;
        let mut trycounter = n;
        let mut ticks = 0u64;
        loop {
            let buf_id = if locked {
                self.locked_tick()
            } else {
                self.clock_sweep_tick(b, p)?
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

    /// Models `StrategyFreeBuffer`: puts `buf_id` at the head of the freelist (of the range
    /// that holds it, when split) unless it is on it already.
    pub(crate) fn strategy_free_buffer(
        &self,
        b: &mut Backend,
        buf_id: u32,
    ) -> Result<(), BufMgrError> {
        let locked = self.victim_search == VictimSearch::FreelistLock;
        let p = self.sweeps.of_buffer(buf_id);
        if locked {
            self.freelist_lock.acquire(b, LwLockMode::Exclusive)?;
        } else {
            self.strategy_lock(b, p)?;
        }
        let strategy = &self.sweeps.part(p);
        let desc = &self.descs[buf_id as usize];
        if desc.free_next.load(Relaxed) == FREENEXT_NOT_IN_LIST {
            let first = strategy.first_free_buffer.load(Relaxed);
            desc.free_next.store(first, Relaxed);
            if first == FREENEXT_END_OF_LIST {
                strategy.last_free_buffer.store(buf_id, Relaxed);
            }
            strategy.first_free_buffer.store(buf_id, Relaxed);
        }
        if locked {
            self.freelist_lock.release(b)?;
        } else {
            self.strategy_unlock(p);
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn each_ranges_control_is_32_bytes_back_to_back_or_128_apart() {
        assert_eq!(std::mem::size_of::<StrategyControl>(), 32);
        let apart = |padded| {
            let split = SweepPartitions::PerNode { nodes: 2, padded };
            let sweeps = Sweeps::new(Sweeps::bounds(16, split), split);
            assert_eq!(sweeps.count(), 4);
            let at = |p| sweeps.part(p) as *const StrategyControl as usize;
            assert_eq!(
                (sweeps.part(3).first_buffer, sweeps.part(3).num_buffers),
                (12, 4)
            );
            (at(1) - at(0), at(3) - at(2))
        };
        assert_eq!(apart(false), (32, 32));
        assert_eq!(apart(true), (128, 128));
    }

    #[test]
    fn uneven_ranges_differ_by_a_buffer_at_most_and_link_their_own_freelists() {
        let split = SweepPartitions::PerNode {
            nodes: 3,
            padded: false,
        };
        let bounds = Sweeps::bounds(20, split);
        assert_eq!(&*bounds, &[0, 3, 6, 10, 13, 16, 20]);
        let ends: Vec<u32> = (0..20)
            .filter(|&b| Sweeps::initial_free_next(&bounds, b) == FREENEXT_END_OF_LIST)
            .collect();
        assert_eq!(ends, vec![2, 5, 9, 12, 15, 19]);
        let sweeps = Sweeps::new(bounds, split);
        assert_eq!(
            (0..20).map(|b| sweeps.of_buffer(b)).collect::<Vec<_>>(),
            [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 5]
        );
    }
}
