//! Models the fast path for relation locks of lock.c (9.2+): `FastPathGrantRelationLock`,
//! `FastPathUnGrantRelationLock`, `FastPathTransferRelationLocks` and the strong-lock counters
//! (`FastPathStrongRelationLocks`).
//!
//! Nearly every lock a query takes is a weak relation lock (`AccessShareLock` for a read,
//! `RowExclusiveLock` for a write), and weak locks never conflict with one another. So a backend
//! records such a lock in a few slots of its own `PGPROC` — a relation oid and three mode bits per
//! slot — under its own `fpInfoLock`, touching no shared partition lock at all, provided no
//! backend holds or is taking a *strong* lock (above `ShareUpdateExclusiveLock`) on any relation
//! whose hash falls in the same one of 1024 counters.
//!
//! A backend taking a strong lock first increments that counter (so no new weak lock on the
//! relation goes to the fast path), then visits every backend, takes its `fpInfoLock` and moves
//! its fast-path entries for the relation into the main lock table, where the ordinary conflict
//! check sees them. Why this is safe: the weak locker reads the counter while holding its own
//! `fpInfoLock`, and the strong locker takes that same LWLock after incrementing; whichever gets
//! the LWLock first, the other sees its effect (the weak lock in the slot, or the counter).
//!
//! Layouts: 9.2–17 have 16 slots per backend (`FP_LOCK_SLOTS_PER_BACKEND`); 18 has groups of 16,
//! as many as `max_locks_per_transaction` asks for (up to 1024), a relation's group chosen by
//! `relid × 49157 mod groups`. With one group the two are the same algorithm.
//!
//! Differences from PostgreSQL: the counters are atomics rather than integers under one
//! spinlock (each change is one read-modify-write either way).

use crate::mode::LockMode;
use pglocks_lwlock::{AtomicLwLock, LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{
    AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::shmem::Placed;
use pglocks_sync::CachePadded;

/// lock.c's slots per group (`FP_LOCK_SLOTS_PER_GROUP`; `FP_LOCK_SLOTS_PER_BACKEND` before 18).
pub const FP_LOCK_SLOTS_PER_GROUP: usize = 16;
/// lock.c's `FP_LOCK_GROUPS_PER_BACKEND_MAX` (18).
pub const FP_LOCK_GROUPS_PER_BACKEND_MAX: usize = 1024;
/// lock.c's `FAST_PATH_STRONG_LOCK_HASH_PARTITIONS` (1 << 10).
pub const FAST_PATH_STRONG_LOCK_HASH_PARTITIONS: usize = 1 << 10;
/// lock.c's `FAST_PATH_BITS_PER_SLOT`: one bit for each of the three weak modes.
const FAST_PATH_BITS_PER_SLOT: u32 = 3;

/// The hook for prototyping a fast-path variant: how many groups of 16 slots each backend has,
/// and which group a relation's locks go to (a relation is only ever looked for in its group).
/// Everything else — the `fpInfoLock`, the strong-lock counters, transfers — stays PostgreSQL's.
/// `examples/custom_fast_path.rs` measures one beside PostgreSQL's.
///
/// # Examples
/// 16 groups, a relation in the group of its oid's low bits: the 40 relations of a partitioned
/// table's query (consecutive oids) all stay in the fast path, where 9.2–17's 16 slots send 24
/// of them to the shared table.
/// ```
/// use pglocks_lmgr::{FastPathGrouping, FastPathLayout, LockManager, LockManagerConfig};
/// use pglocks_lmgr::{LockMode, LockOwner, LockTag};
/// use pglocks_proc::ProcTable;
///
/// #[derive(Debug)]
/// struct LowBits;
///
/// impl FastPathGrouping for LowBits {
///     fn groups(&self) -> usize {
///         16
///     }
///     fn group_of(&self, rel: u32, groups: usize) -> usize {
///         rel as usize % groups
///     }
/// }
///
/// static LOW_BITS: LowBits = LowBits;
/// let in_fast_path = |layout| -> Result<usize, Box<dyn std::error::Error>> {
///     let mut cfg = LockManagerConfig::new(1);
///     cfg.fast_path = layout;
///     let lm: LockManager = LockManager::new(cfg);
///     let procs = ProcTable::new(1);
///     let mut b = procs.attach()?;
///     let mut local = lm.connect(&mut b, 5)?;
///     for rel in 16_384..16_424 {
///         let tag = LockTag::relation(5, rel);
///         lm.conditional_acquire(&mut b, &mut local, tag, LockMode::AccessShare, LockOwner::Transaction)?;
///     }
///     Ok(lm.fast_path_in_use(&mut b)?.0)
/// };
/// assert_eq!(in_fast_path(FastPathLayout::Slots16)?, 16);
/// assert_eq!(in_fast_path(FastPathLayout::Custom(&LOW_BITS))?, 40);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait FastPathGrouping: std::fmt::Debug + Send + Sync {
    /// Groups per backend (clamped to 1..=1024).
    fn groups(&self) -> usize;
    /// The group of relation `rel`, below `groups`.
    fn group_of(&self, rel: u32, groups: usize) -> usize;
}

/// How a release keeps fast-path locks.
#[derive(Debug, Clone, Copy)]
pub enum FastPathLayout {
    /// ≤ 9.1: no fast path; every lock goes through the main table.
    None,
    /// 9.2–17: 16 slots per backend.
    Slots16,
    /// 18: this many groups of 16 slots per backend.
    Groups(usize),
    /// A variant being prototyped.
    Custom(&'static dyn FastPathGrouping),
}

impl PartialEq for FastPathLayout {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (FastPathLayout::None, FastPathLayout::None)
            | (FastPathLayout::Slots16, FastPathLayout::Slots16) => true,
            (FastPathLayout::Groups(a), FastPathLayout::Groups(b)) => a == b,
            (FastPathLayout::Custom(a), FastPathLayout::Custom(b)) => std::ptr::addr_eq(*a, *b),
            _ => false,
        }
    }
}

impl Eq for FastPathLayout {}

impl FastPathLayout {
    /// 18's group count for `max_locks_per_transaction` (`InitializeFastPathLocks`): the next
    /// power of two of it divided by 16, between 1 and 1024.
    pub fn pg18_groups(max_locks_per_transaction: usize) -> usize {
        (max_locks_per_transaction.next_power_of_two() / FP_LOCK_SLOTS_PER_GROUP)
            .clamp(1, FP_LOCK_GROUPS_PER_BACKEND_MAX)
    }

    /// Groups of 16 slots (0 without a fast path).
    pub fn groups(self) -> usize {
        match self {
            FastPathLayout::None => 0,
            FastPathLayout::Slots16 => 1,
            FastPathLayout::Groups(n) => n.clamp(1, FP_LOCK_GROUPS_PER_BACKEND_MAX),
            FastPathLayout::Custom(g) => g.groups().clamp(1, FP_LOCK_GROUPS_PER_BACKEND_MAX),
        }
    }

    /// The group relation `rel`'s locks go to.
    #[inline(always)]
    pub fn group_of(self, rel: u32) -> usize {
        match self {
            FastPathLayout::Custom(g) => {
                let groups = self.groups();
                g.group_of(rel, groups) % groups
            }
            _ => group_of(rel, self.groups()),
        }
    }
}

/// lock.c's `EligibleForRelationFastPath`'s mode test: the three weak modes.
#[inline(always)]
pub fn weak(mode: LockMode) -> bool {
    mode < LockMode::ShareUpdateExclusive
}

/// lock.c's `ConflictsWithRelationFastPath`'s mode test: the modes above
/// `ShareUpdateExclusiveLock`.
#[inline(always)]
pub fn strong(mode: LockMode) -> bool {
    mode > LockMode::ShareUpdateExclusive
}

/// The bit of `mode` within a slot (`FAST_PATH_LOCKNUMBER_OFFSET` = 1).
#[inline(always)]
fn mode_bit(slot_in_group: usize, mode: LockMode) -> u64 {
    1 << (slot_in_group as u32 * FAST_PATH_BITS_PER_SLOT + (mode as u32 - 1))
}

#[inline(always)]
fn slot_bits(bits: u64, slot_in_group: usize) -> u64 {
    (bits >> (slot_in_group as u32 * FAST_PATH_BITS_PER_SLOT)) & 0b111
}

/// A backend's fast-path slots (`PGPROC.fpLockBits`, `fpRelId`, `databaseId`).
#[derive(Debug)]
pub(crate) struct Slots {
    /// The backend's database (`PGPROC.databaseId`): transfers skip other databases.
    pub database: u32,
    /// `fpVXIDLock` (9.2+): the backend holds its own virtual-transaction lock here, not in
    /// the main table.
    pub vxid_lock: bool,
    /// `fpLocalTransactionId`: the local transaction id of that lock (0 = none).
    pub lxid: u32,
    rel_id: Box<[u32]>,
    /// One word per group: 3 bits per slot.
    lock_bits: Box<[u64]>,
}

/// lock.c's `FAST_PATH_REL_GROUP` (18): the group of relation `rel` among `groups`.
#[inline(always)]
pub fn group_of(rel: u32, groups: usize) -> usize {
    (u64::from(rel) * 49157 % groups.max(1) as u64) as usize
}

/// The slot methods take the relation's group `g` (`FastPathLayout::group_of`), which the
/// caller has computed once for the whole operation.
impl Slots {
    /// Relation slots holding any mode, plus the VXID lock if held here.
    pub fn in_use(&self) -> usize {
        let slots: usize = self
            .lock_bits
            .iter()
            .map(|&bits| {
                (0..FP_LOCK_SLOTS_PER_GROUP)
                    .filter(|&s| slot_bits(bits, s) != 0)
                    .count()
            })
            .sum();
        slots + usize::from(self.vxid_lock)
    }

    /// Models `FastPathGrantRelationLock`: records `mode` on `rel` in an existing slot for it
    /// or a free one of its group `g` — the last free one the scan passed, as PostgreSQL's
    /// scan keeps overwriting its candidate; `false` if the group is full. The second value
    /// says whether a new slot was taken.
    pub fn grant(&mut self, g: usize, rel: u32, mode: LockMode) -> (bool, bool) {
        let mut unused = None;
        for s in 0..FP_LOCK_SLOTS_PER_GROUP {
            let slot = g * FP_LOCK_SLOTS_PER_GROUP + s;
            if slot_bits(self.lock_bits[g], s) == 0 {
                unused = Some(s);
            } else if self.rel_id[slot] == rel {
                debug_assert_eq!(self.lock_bits[g] & mode_bit(s, mode), 0);
                self.lock_bits[g] |= mode_bit(s, mode);
                return (true, false);
            }
        }
        match unused {
            Some(s) => {
                self.rel_id[g * FP_LOCK_SLOTS_PER_GROUP + s] = rel;
                self.lock_bits[g] |= mode_bit(s, mode);
                (true, true)
            }
            None => (false, false),
        }
    }

    /// Models `FastPathUnGrantRelationLock`: clears `mode` on `rel` if recorded here; returns
    /// whether it was, and the group's slots still in use.
    pub fn ungrant(&mut self, g: usize, rel: u32, mode: LockMode) -> (bool, u32) {
        let (mut found, mut used) = (false, 0);
        for s in 0..FP_LOCK_SLOTS_PER_GROUP {
            let slot = g * FP_LOCK_SLOTS_PER_GROUP + s;
            if self.rel_id[slot] == rel && self.lock_bits[g] & mode_bit(s, mode) != 0 {
                found = true;
                self.lock_bits[g] &= !mode_bit(s, mode);
            }
            used += u32::from(slot_bits(self.lock_bits[g], s) != 0);
        }
        (found, used)
    }

    /// The modes recorded for `rel` (what `FastPathTransferRelationLocks` moves; it clears
    /// each with [`Self::ungrant`] once the main table has it).
    pub fn relation_modes(&self, g: usize, rel: u32) -> Vec<LockMode> {
        for s in 0..FP_LOCK_SLOTS_PER_GROUP {
            let bits = slot_bits(self.lock_bits[g], s);
            if bits != 0 && self.rel_id[g * FP_LOCK_SLOTS_PER_GROUP + s] == rel {
                return LockMode::ALL[..3]
                    .iter()
                    .copied()
                    .filter(|&m| bits & (1 << (m as u32 - 1)) != 0)
                    .collect();
            }
        }
        Vec::new()
    }

    /// Whether `mode` on `rel` is recorded here.
    #[cfg(all(test, not(loom)))]
    pub fn holds(&self, g: usize, rel: u32, mode: LockMode) -> bool {
        (0..FP_LOCK_SLOTS_PER_GROUP).any(|s| {
            self.rel_id[g * FP_LOCK_SLOTS_PER_GROUP + s] == rel
                && self.lock_bits[g] & mode_bit(s, mode) != 0
        })
    }
}

/// One backend's fast-path area: its `fpInfoLock` and the slots it guards.
struct Area<K> {
    fp_info_lock: K,
    slots: UnsafeCell<Slots>,
}

/// Every backend's fast-path area, and the strong-lock counters.
///
/// Both are placed in a simulated machine's shared-memory map: the areas as one array standing
/// for the fast-path fields of the `PGPROC`s (their `fpInfoLock`s; the slots' own bytes are not
/// charged, as only their backend reads them, but for a strong lock's transfer), and the
/// counters as `FastPathStrongRelationLocks`' array of counts.
pub(crate) struct FastPath<K: RawLwLock = AtomicLwLock> {
    /// (First: fields drop in declaration order, and the map must forget this memory before it
    /// is freed.)
    _placed: [Placed; 2],
    layout: FastPathLayout,
    areas: Box<[CachePadded<Area<K>>]>,
    strong: Box<[AtomicU32]>,
}

// SAFETY: an area's `slots` are only touched inside `with_slots`, which holds that area's
// `fpInfoLock` exclusively.
unsafe impl<K: RawLwLock> Sync for FastPath<K> {}

impl<K: RawLwLock> FastPath<K> {
    pub fn new(layout: FastPathLayout, backends: usize) -> Self {
        let groups = layout.groups().max(1);
        let areas: Box<[CachePadded<Area<K>>]> = (0..backends)
            .map(|_| {
                CachePadded::new(Area {
                    fp_info_lock: K::new("LockFastPath"),
                    slots: UnsafeCell::new(Slots {
                        database: 0,
                        vxid_lock: false,
                        lxid: 0,
                        rel_id: vec![0; groups * FP_LOCK_SLOTS_PER_GROUP].into(),
                        lock_bits: vec![0; groups].into(),
                    }),
                })
            })
            .collect();
        let strong: Box<[AtomicU32]> = (0..FAST_PATH_STRONG_LOCK_HASH_PARTITIONS)
            .map(|_| AtomicU32::new(0))
            .collect();
        Self {
            layout,
            _placed: [
                Placed::slice("PGPROC fast-path areas", &areas),
                Placed::slice("FastPathStrongRelationLocks", &strong),
            ],
            areas,
            strong,
        }
    }

    pub fn layout(&self) -> FastPathLayout {
        self.layout
    }

    pub fn backends(&self) -> usize {
        self.areas.len()
    }

    /// Runs `f` on backend `procno`'s slots with its `fpInfoLock` held exclusively. `f` gets
    /// the calling backend too, to take further locks (a transfer takes partition locks inside
    /// the `fpInfoLock`, as PostgreSQL does).
    pub fn with_slots<R>(
        &self,
        b: &mut Backend,
        procno: usize,
        f: impl FnOnce(&mut Slots, &mut Backend) -> R,
    ) -> Result<R, pglocks_lwlock::LwLockError> {
        let area = &self.areas[procno];
        area.fp_info_lock.acquire(b, LwLockMode::Exclusive)?;
        // SAFETY: `fpInfoLock` is held exclusively until the release below.
        let r = area.slots.with_mut(|s| f(unsafe { &mut *s }, b));
        area.fp_info_lock.release(b)?;
        Ok(r)
    }

    /// Takes backend `procno`'s `fpInfoLock` exclusively, for a caller that changes its slots
    /// several times under one acquisition (`LockReleaseAll`); see [`Self::with_slots_held`].
    pub fn lock_area(
        &self,
        b: &mut Backend,
        procno: usize,
    ) -> Result<(), pglocks_lwlock::LwLockError> {
        self.areas[procno]
            .fp_info_lock
            .acquire(b, LwLockMode::Exclusive)?;
        Ok(())
    }

    /// Releases what [`Self::lock_area`] took.
    pub fn unlock_area(
        &self,
        b: &mut Backend,
        procno: usize,
    ) -> Result<(), pglocks_lwlock::LwLockError> {
        self.areas[procno].fp_info_lock.release(b)
    }

    /// Runs `f` on backend `procno`'s slots.
    ///
    /// # Safety
    /// The caller holds `procno`'s `fpInfoLock` ([`Self::lock_area`]) for the whole call.
    pub unsafe fn with_slots_held<R>(&self, procno: usize, f: impl FnOnce(&mut Slots) -> R) -> R {
        // SAFETY: the caller holds the area's fpInfoLock exclusively (this function's contract).
        self.areas[procno].slots.with_mut(|s| f(unsafe { &mut *s }))
    }

    /// Strong relation locks counted over every partition of `FastPathStrongRelationLocks`
    /// (an audit: read without the mutex).
    pub fn strong_total(&self) -> u64 {
        self.strong.iter().map(|c| u64::from(c.load(Relaxed))).sum()
    }

    /// `FastPathStrongLockHashPartition`.
    pub fn strong_partition(hashcode: u32) -> usize {
        hashcode as usize % FAST_PATH_STRONG_LOCK_HASH_PARTITIONS
    }

    /// Strong locks held or being taken in counter `p` (read under the caller's `fpInfoLock`).
    ///
    /// Acquire, pairing with the release in [`Self::end_strong`]: a weak locker that sees the
    /// count back at zero must also see what the strong holder did under its lock (PostgreSQL
    /// gets this from the spinlock around the counters and the LWLock barriers; loom found the
    /// model wrong without it).
    pub fn strong_count(&self, p: usize) -> u32 {
        self.strong[p].load(Acquire)
    }

    /// `BeginStrongLockAcquire`. Relaxed: the increment reaches each weak locker through that
    /// backend's `fpInfoLock`, which the transfer takes next.
    pub fn begin_strong(&self, p: usize) {
        self.strong[p].fetch_add(1, Relaxed);
    }

    /// The release of a strong lock, or `AbortStrongLockAcquire` (release ordering: see
    /// [`Self::strong_count`]).
    pub fn end_strong(&self, p: usize) {
        let before = self.strong[p].fetch_sub(1, Release);
        debug_assert!(before > 0);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use LockMode::*;

    fn slots(groups: usize) -> Slots {
        Slots {
            database: 1,
            vxid_lock: false,
            lxid: 0,
            rel_id: vec![0; groups * FP_LOCK_SLOTS_PER_GROUP].into(),
            lock_bits: vec![0; groups].into(),
        }
    }

    #[test]
    fn sixteen_relations_fit_the_seventeenth_does_not() {
        let mut s = slots(1);
        for rel in 100..116 {
            assert_eq!(s.grant(0, rel, AccessShare), (true, true));
        }
        assert_eq!(s.grant(0, 105, RowExclusive), (true, false), "same slot");
        assert_eq!(s.grant(0, 116, AccessShare), (false, false));
        assert_eq!(s.ungrant(0, 105, AccessShare), (true, 16));
        assert_eq!(s.ungrant(0, 105, RowExclusive), (true, 15));
        assert_eq!(s.ungrant(0, 105, RowExclusive), (false, 15));
        assert!(s.grant(0, 116, AccessShare).0);
        assert_eq!(s.relation_modes(0, 116), vec![AccessShare]);
        assert!(
            s.holds(0, 116, AccessShare),
            "reading the modes clears nothing"
        );
    }

    #[test]
    fn a_new_relation_takes_the_last_free_slot_of_its_group() {
        let mut s = slots(2);
        let g = 1;
        let at = |s: &Slots, rel| {
            (0..FP_LOCK_SLOTS_PER_GROUP).find(|&i| s.rel_id[g * FP_LOCK_SLOTS_PER_GROUP + i] == rel)
        };
        s.grant(g, 7, AccessShare);
        assert_eq!(at(&s, 7), Some(15));
        s.grant(g, 8, AccessShare);
        assert_eq!(at(&s, 8), Some(14));
        s.ungrant(g, 7, AccessShare);
        s.grant(g, 9, RowShare);
        assert_eq!(at(&s, 9), Some(15), "the freed last slot again");
        assert_eq!(s.lock_bits[0], 0, "other groups untouched");
    }

    #[test]
    fn pg18_groups_follow_max_locks_per_transaction() {
        assert_eq!(FastPathLayout::pg18_groups(64), 4);
        assert_eq!(FastPathLayout::pg18_groups(10), 1);
        assert_eq!(FastPathLayout::pg18_groups(100), 8);
        assert_eq!(FastPathLayout::pg18_groups(1 << 20), 1024);
    }

    #[test]
    fn relations_spread_over_groups() {
        let layout = FastPathLayout::Groups(4);
        let mut hits = [0; 4];
        for rel in 16384..16384 + 400 {
            hits[layout.group_of(rel)] += 1;
        }
        assert!(hits.iter().all(|&h| h == 100), "{hits:?}");
    }
}
