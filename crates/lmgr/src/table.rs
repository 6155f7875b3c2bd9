//! Models the shared lock table of lock.c: `LOCK` objects (one per locked object: which modes
//! are granted and requested, by how many) and `PROCLOCK` objects (one per backend and object:
//! which modes that backend holds), hashed by lock tag into `NUM_LOCK_PARTITIONS` partitions,
//! each guarded by one `LockManager` LWLock; and `LockCheckConflicts`, `GrantLock`,
//! `UnGrantLock` and `CleanUpLock`.
//!
//! The tables have a fixed size, `max_locks_per_transaction × MaxBackends` lock objects and
//! twice that many proclocks (`NLOCKENTS`): a backend that needs one more gets "out of shared
//! memory". A lock object lives while anyone holds or awaits it; a proclock while its backend
//! holds or awaits the object.
//!
//! The two tables are shared dynahash tables ([`pglocks_dynahash`]), "LOCK hash" and "PROCLOCK
//! hash", made as `InitLocks` makes them (`ShmemInitHash` with half of their largest size
//! initially, `NUM_LOCK_PARTITIONS` partitions, the release's free lists: one behind one
//! spinlock up to 9.5, 32 from 9.6), so a simulated machine moves their header, bucket and
//! element lines between CPUs as it would move PostgreSQL's; each partition keeps its share of
//! both. `LOCK` and `PROCLOCK` fields are charged at their offsets (lock.h, 64-bit) where lock.c
//! reads or writes them.
//!
//! Differences from PostgreSQL: a lock's proclocks are a small vector inside its `LOCK` (beside
//! their `PROCLOCK` entries, which hold no data here) rather than a list threaded through the
//! `PROCLOCK` table's entries. The limits are exact, as the dynahash model's are: the
//! `NLOCKENTS`-th lock object is the last (PostgreSQL's tables, through 18, take their second
//! half from the shared segment as they grow, and may find some spare memory before "out of
//! shared memory"). Not charged: the `PGPROC`'s own list of its proclocks (`myProcLocks`, its
//! own backend's line), and the deadlock checker's reads.

use crate::mode::{LockMask, LockMode, MAX_LOCK_MODES};
use crate::{LmgrError, LockTag};
use pglocks_dynahash::{Chains, Entry, HashSpec, RegionNames, SharedHash};
use pglocks_lwlock::{AtomicLwLock, LwLockMode, RawLwLock};
use pglocks_proc::{Backend, ProcTable};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::shmem::Placed;
use pglocks_sync::CachePadded;

/// Byte offsets of `LOCK`'s fields (lock.h, on a 64-bit build; the same from 9.0 to 18: a
/// 16-byte `LOCKTAG`, two masks, the `procLocks` list head, the `waitProcs` queue, and
/// `MAX_LOCKMODES` (10) request and grant counts).
mod lock_at {
    use std::ops::Range;
    /// `tag`'s size: the key.
    pub const KEY: usize = 16;
    /// `grantMask` and `waitMask`.
    pub const MASKS: Range<usize> = 16..24;
    /// `procLocks`.
    pub const PROC_LOCKS: Range<usize> = 24..40;
    /// `waitProcs`.
    pub const WAIT_PROCS: Range<usize> = 40..64;
    /// `requested[m]`.
    pub fn requested(m: usize) -> Range<usize> {
        64 + 4 * m..68 + 4 * m
    }
    /// `nRequested`, after the ten.
    pub const N_REQUESTED: Range<usize> = 104..108;
    /// `granted[m]`.
    pub fn granted(m: usize) -> Range<usize> {
        108 + 4 * m..112 + 4 * m
    }
    /// `nGranted`, after the ten.
    pub const N_GRANTED: Range<usize> = 148..152;
    /// `sizeof(LOCK)`.
    pub const SIZE: usize = 152;
}

/// `PROCLOCK`'s layout (lock.h, 64-bit): its 16-byte tag (the `LOCK` and `PGPROC` pointers),
/// from 9.6 a `groupLeader` pointer, the hold and release masks, and its links into the lock's
/// list and the backend's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcLockLayout {
    /// 8 with 9.6's `groupLeader`, else 0: how far the fields after the tag move.
    lead: usize,
}

impl ProcLockLayout {
    /// The layout with or without `groupLeader`.
    pub fn new(group_leader: bool) -> Self {
        Self {
            lead: if group_leader { 8 } else { 0 },
        }
    }

    /// `tag`'s size: the key.
    const KEY: usize = 16;

    /// `sizeof(PROCLOCK)`.
    fn size(self) -> usize {
        56 + self.lead
    }

    /// `holdMask` and `releaseMask`.
    fn masks(self) -> std::ops::Range<usize> {
        16 + self.lead..24 + self.lead
    }

    /// `lockLink`.
    fn lock_link(self) -> std::ops::Range<usize> {
        24 + self.lead..40 + self.lead
    }
}

/// lock.h's `PROCLOCK`, kept inside its lock: what one backend holds of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcLock {
    /// The backend (`PROCLOCKTAG.myProc`).
    pub procno: u32,
    /// `holdMask`: the modes it holds.
    pub hold_mask: LockMask,
    /// Where its `PROCLOCK` lies.
    pub(crate) at: Entry,
    /// And its layout.
    pub(crate) layout: ProcLockLayout,
}

impl ProcLock {
    /// A proclock of `procno` holding `hold_mask`, in no table (for the deadlock checker's
    /// tests, which build lock objects by hand).
    #[cfg(test)]
    pub fn detached(procno: u32, hold_mask: LockMask) -> Self {
        Self {
            procno,
            hold_mask,
            at: Entry::default(),
            layout: ProcLockLayout::new(true),
        }
    }

    /// Its `holdMask` changes.
    fn hold_changed(&self) {
        self.at.write(self.layout.masks());
    }
}

/// A backend in a lock's wait queue: a `PGPROC` linked into `LOCK.waitProcs`, with the
/// `waitLockMode` it asks for and the `heldLocks` it already held of this lock when it joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waiter {
    /// The waiting backend.
    pub procno: u32,
    /// `waitLockMode`.
    pub mode: LockMode,
    /// `heldLocks`: its own hold mask on this lock when it joined the queue.
    pub held: LockMask,
}

/// lock.h's `LOCK`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lock {
    /// `grantMask`: modes granted to anyone.
    pub grant_mask: LockMask,
    /// `waitMask`: modes somebody waits for.
    pub wait_mask: LockMask,
    /// `requested[]`: granted plus awaited, per mode.
    pub requested: [u32; MAX_LOCK_MODES + 1],
    /// `nRequested`.
    pub n_requested: u32,
    /// `granted[]`, per mode.
    pub granted: [u32; MAX_LOCK_MODES + 1],
    /// `nGranted`.
    pub n_granted: u32,
    /// `procLocks`: the backends holding or awaiting it, in the order they came.
    pub proc_locks: Vec<ProcLock>,
    /// `waitProcs`: the wait queue, front first.
    pub wait_queue: Vec<Waiter>,
    /// Where its `LOCK` lies.
    pub(crate) at: Entry,
}

impl Lock {
    /// Its wait queue changes (`waitProcs`, `waitMask`).
    pub(crate) fn queue_changed(&self) {
        self.at.write(lock_at::WAIT_PROCS);
        self.at.write(lock_at::MASKS);
    }

    fn proc_lock(&mut self, procno: u32) -> Option<&mut ProcLock> {
        self.proc_locks.iter_mut().find(|p| p.procno == procno)
    }

    /// What `procno` holds of this lock.
    pub fn held_by(&self, procno: u32) -> LockMask {
        self.proc_locks
            .iter()
            .find(|p| p.procno == procno)
            .map_or(0, |p| p.hold_mask)
    }

    /// Models `LockCheckConflicts`: whether a request for `mode` by `procno` conflicts with
    /// locks granted to *other* backends (a backend never conflicts with itself).
    pub fn check_conflicts(&self, mode: LockMode, procno: u32) -> bool {
        self.at.read(lock_at::MASKS);
        let conflicts = mode.conflicts();
        if self.grant_mask & conflicts == 0 {
            return false;
        }
        // Subtract this backend's own grants and look again.
        let mine = self.held_by(procno);
        LockMode::in_mask(conflicts).any(|m| {
            let own = u32::from(mine & m.bit() != 0);
            self.granted[m as usize] > own
        })
    }

    /// Models `GrantLock`.
    pub fn grant(&mut self, procno: u32, mode: LockMode) {
        self.at.write(lock_at::granted(mode as usize));
        self.at.write(lock_at::N_GRANTED);
        self.at.write(lock_at::MASKS);
        self.granted[mode as usize] += 1;
        self.n_granted += 1;
        self.grant_mask |= mode.bit();
        if self.granted[mode as usize] == self.requested[mode as usize] {
            self.wait_mask &= !mode.bit();
        }
        if let Some(p) = self.proc_lock(procno) {
            p.hold_mask |= mode.bit();
            p.hold_changed();
        }
        debug_assert!(self.n_granted <= self.n_requested);
    }

    /// Models `UnGrantLock`: drops `procno`'s grant of `mode`; returns whether waiters may now
    /// be wakeable (something they conflict with was released).
    pub fn ungrant(&mut self, procno: u32, mode: LockMode) -> bool {
        let m = mode as usize;
        for bytes in [
            lock_at::requested(m),
            lock_at::N_REQUESTED,
            lock_at::granted(m),
            lock_at::N_GRANTED,
            lock_at::MASKS,
        ] {
            self.at.write(bytes);
        }
        self.requested[mode as usize] -= 1;
        self.n_requested -= 1;
        self.granted[mode as usize] -= 1;
        self.n_granted -= 1;
        if self.granted[mode as usize] == 0 {
            self.grant_mask &= !mode.bit();
        }
        if let Some(p) = self.proc_lock(procno) {
            p.hold_mask &= !mode.bit();
            p.hold_changed();
        }
        mode.conflicts() & self.wait_mask != 0
    }

    /// The lock part of `RemoveFromWaitQueue`: takes `procno` out of the queue and uncounts
    /// its request. Returns the request, if it was waiting here.
    pub fn remove_waiter(&mut self, procno: u32) -> Option<Waiter> {
        let i = self.wait_queue.iter().position(|w| w.procno == procno)?;
        let w = self.wait_queue.remove(i);
        self.queue_changed();
        self.at.write(lock_at::requested(w.mode as usize));
        self.at.write(lock_at::N_REQUESTED);
        self.requested[w.mode as usize] -= 1;
        self.n_requested -= 1;
        if self.granted[w.mode as usize] == self.requested[w.mode as usize] {
            self.wait_mask &= !w.mode.bit();
        }
        Some(w)
    }

    /// Models `ProcLockWakeup`: walks the queue front to back and grants every waiter whose
    /// mode conflicts neither with what is granted to others nor with a request still waiting
    /// ahead of it; `wake` is told each granted backend (already out of the queue).
    pub fn wake_waiters(&mut self, wake: &mut impl FnMut(u32)) {
        let mut ahead: LockMask = 0;
        let mut i = 0;
        while i < self.wait_queue.len() {
            let w = self.wait_queue[i];
            if w.mode.conflicts() & ahead == 0 && !self.check_conflicts(w.mode, w.procno) {
                self.wait_queue.remove(i);
                self.queue_changed();
                self.grant(w.procno, w.mode);
                wake(w.procno);
            } else {
                ahead |= w.mode.bit();
                i += 1;
            }
        }
    }
}

/// `PROCLOCKTAG`: the lock and the backend (PostgreSQL's `LOCK` and `PGPROC` pointers).
type ProcLockTag = (LockTag, u32);

/// What one partition's lock guards: its share of the two tables, its lock objects in the
/// `LOCK` table's chains.
struct PartitionData {
    locks: Chains<LockTag, Lock>,
    proclocks: Chains<ProcLockTag, ()>,
}

/// One partition: its `LockManager` LWLock and the lock objects it guards. The LWLock comes
/// first, at the start of its 128 bytes, as in an `LWLockPadded` (lwlock.h); the Rust maps
/// after it are not PostgreSQL's (and not charged: `SharedHash` charges the tables).
#[repr(C)]
struct Partition<K> {
    lwlock: K,
    data: UnsafeCell<PartitionData>,
}

/// The regions of "LOCK hash" in the simulated map.
const LOCK_HASH: RegionNames = RegionNames {
    header: "LOCK hash header",
    directory: "LOCK hash directory",
    buckets: "LOCK hash buckets",
    elements: "LOCK hash entries",
};

/// The regions of "PROCLOCK hash" in the simulated map.
const PROCLOCK_HASH: RegionNames = RegionNames {
    header: "PROCLOCK hash header",
    directory: "PROCLOCK hash directory",
    buckets: "PROCLOCK hash buckets",
    elements: "PROCLOCK hash entries",
};

/// The shared lock table: partitions plus the two shared hash tables.
pub(crate) struct LockTable<K: RawLwLock = AtomicLwLock> {
    /// The partitions' place in a simulated machine's shared-memory map: their LWLocks, as
    /// `MainLWLockArray`'s `LockManager` tranche (the chains beside them are not PostgreSQL's
    /// and are charged through the hash tables instead).
    /// (First: fields drop in declaration order, and the map must forget this memory before it
    /// is freed.)
    _placed: Placed,
    partitions: Box<[CachePadded<Partition<K>>]>,
    /// The `LOCK` hash table.
    lock_hash: SharedHash<LockTag, Lock>,
    /// The `PROCLOCK` hash table.
    proclock_hash: SharedHash<ProcLockTag, ()>,
    /// `PROCLOCK`'s layout.
    proclock_layout: ProcLockLayout,
}

// SAFETY: a partition's data is only touched inside `with_partition` (or
// `with_all_partitions`), which holds the partition's LWLock exclusively (its acquire and
// release order the accesses); the free lists have their own spinlocks.
unsafe impl<K: RawLwLock> Sync for LockTable<K> {}

impl<K: RawLwLock> LockTable<K> {
    /// A table of `partitions` partitions holding at most `max_locks` lock objects and twice as
    /// many proclocks (`InitLocks`: `ShmemInitHash` of half that size initially), each hash
    /// table's elements on `freelists` free lists whose spinlocks retry as `tas_spin` says.
    /// 9.6 split the free lists and gave `PROCLOCK` its `groupLeader` in the same release, so
    /// more than one free list also means the larger `PROCLOCK`.
    pub fn new(partitions: usize, max_locks: usize, freelists: usize, tas_spin: bool) -> Self {
        let proclock_layout = ProcLockLayout::new(freelists > 1);
        let spec = |names, max_size, entry_size, key_size| HashSpec {
            names,
            init_size: max_size / 2,
            max_size,
            entry_size,
            key_size,
            partitions: partitions.max(1),
            freelists,
            tas_spin,
        };
        let (lock_spec, proclock_spec) = (
            spec(LOCK_HASH, max_locks, lock_at::SIZE, lock_at::KEY),
            spec(
                PROCLOCK_HASH,
                2 * max_locks,
                proclock_layout.size(),
                ProcLockLayout::KEY,
            ),
        );
        let partitions: Box<[CachePadded<Partition<K>>]> = (0..partitions.max(1))
            .map(|_| {
                CachePadded::new(Partition {
                    lwlock: K::new("LockManager"),
                    data: UnsafeCell::new(PartitionData {
                        locks: Chains::new(&lock_spec.shape()),
                        proclocks: Chains::new(&proclock_spec.shape()),
                    }),
                })
            })
            .collect();
        // In the map, the partitions' LWLocks first (`MainLWLockArray` is made before
        // `InitLocks` runs), then the two tables.
        let placed = Placed::slice("LockManager partitions", &partitions);
        Self {
            _placed: placed,
            partitions,
            lock_hash: SharedHash::new(&lock_spec),
            proclock_hash: SharedHash::new(&proclock_spec),
            proclock_layout,
        }
    }

    /// `LockHashPartition`.
    pub fn partition_of(&self, hashcode: u32) -> usize {
        hashcode as usize % self.partitions.len()
    }

    /// The number of partitions.
    pub fn partitions(&self) -> usize {
        self.partitions.len()
    }

    /// A partition's view, over `data`, for backend `b`.
    fn view<'a>(&'a self, b: &'a mut Backend, data: &'a mut PartitionData) -> PartitionLocks<'a> {
        PartitionLocks {
            b,
            data,
            lock_hash: &self.lock_hash,
            proclock_hash: &self.proclock_hash,
            proclock_layout: self.proclock_layout,
        }
    }

    /// Runs `f` on partition `p`'s lock objects with its LWLock held exclusively.
    pub fn with_partition<R>(
        &self,
        b: &mut Backend,
        p: usize,
        f: impl FnOnce(&mut PartitionLocks<'_>) -> R,
    ) -> Result<R, LmgrError> {
        let part = &self.partitions[p];
        part.lwlock.acquire(b, LwLockMode::Exclusive)?;
        // SAFETY: the partition's LWLock is held exclusively until the release below.
        let r = part
            .data
            .with_mut(|d| f(&mut self.view(b, unsafe { &mut *d })));
        part.lwlock.release(b)?;
        Ok(r)
    }

    /// Runs `f` with every partition's LWLock held exclusively, taken in ascending partition
    /// order and released in descending order (`CheckDeadLock`'s global view).
    pub fn with_all_partitions<R>(
        &self,
        b: &mut Backend,
        f: impl FnOnce(&mut AllPartitions<'_>) -> R,
    ) -> Result<R, LmgrError> {
        for (i, part) in self.partitions.iter().enumerate() {
            if let Err(e) = part.lwlock.acquire(b, LwLockMode::Exclusive) {
                for held in self.partitions[..i].iter().rev() {
                    held.lwlock.release(b)?;
                }
                return Err(e.into());
            }
        }
        let mut all = AllPartitions {
            b: &mut *b,
            parts: self
                .partitions
                .iter()
                // SAFETY: every partition's LWLock is held exclusively until the releases
                // below, and each pointer is to a different partition's data.
                .map(|part| part.data.with_mut(|d| unsafe { &mut *d }))
                .collect(),
            lock_hash: &self.lock_hash,
            proclock_hash: &self.proclock_hash,
            proclock_layout: self.proclock_layout,
        };
        let r = f(&mut all);
        drop(all);
        for part in self.partitions.iter().rev() {
            part.lwlock.release(b)?;
        }
        Ok(r)
    }

    /// Lock objects and proclocks in use (for tests and reports).
    pub fn entries_in_use(&self) -> (usize, usize) {
        (self.lock_hash.in_use(), self.proclock_hash.in_use())
    }
}

/// One partition's lock objects, while its LWLock is held by backend `b`, which takes the hash
/// tables' free-list spinlocks when it adds or removes an entry.
pub(crate) struct PartitionLocks<'a> {
    b: &'a mut Backend,
    data: &'a mut PartitionData,
    lock_hash: &'a SharedHash<LockTag, Lock>,
    proclock_hash: &'a SharedHash<ProcLockTag, ()>,
    proclock_layout: ProcLockLayout,
}

/// Every partition's lock objects, while backend `b` holds all their LWLocks.
pub(crate) struct AllPartitions<'a> {
    b: &'a mut Backend,
    parts: Vec<&'a mut PartitionData>,
    lock_hash: &'a SharedHash<LockTag, Lock>,
    proclock_hash: &'a SharedHash<ProcLockTag, ()>,
    proclock_layout: ProcLockLayout,
}

impl AllPartitions<'_> {
    /// The partition `tag` hashes to.
    pub fn partition(&mut self, tag: &LockTag) -> PartitionLocks<'_> {
        let n = self.parts.len();
        PartitionLocks {
            b: &mut *self.b,
            data: &mut *self.parts[tag.known_hash_code() as usize % n],
            lock_hash: self.lock_hash,
            proclock_hash: self.proclock_hash,
            proclock_layout: self.proclock_layout,
        }
    }

    /// The lock object of `tag`, if anyone holds or awaits it (not charged: the deadlock
    /// checker's reads).
    pub fn get(&self, tag: &LockTag) -> Option<&Lock> {
        let hash = tag.known_hash_code();
        self.parts[hash as usize % self.parts.len()]
            .locks
            .get(hash, tag)
    }
}

/// lock.c's `ProcLockHashCode`: a proclock's hash code, from its lock's and its backend (the
/// backend's number standing in for the `PGPROC` pointer PostgreSQL mixes in).
fn proclock_hash(tag: &LockTag, procno: u32) -> u32 {
    tag.known_hash_code() ^ (procno << 4)
}

impl PartitionLocks<'_> {
    /// The lock object of `tag`, if anyone holds or awaits it: a lookup in the `LOCK` table.
    pub fn get(&mut self, tag: &LockTag) -> Option<&mut Lock> {
        self.lock_hash
            .lookup_mut(&mut self.data.locks, tag.known_hash_code(), tag)
            .map(|(_, lock)| lock)
    }

    /// Models `SetupLockInTable`: finds or makes the lock object of `tag` and `procno`'s
    /// proclock on it, and counts the request for `mode`. Fails with "out of shared memory" when
    /// either table is full (taking back whatever it made).
    pub fn setup(
        &mut self,
        tag: LockTag,
        procno: u32,
        mode: LockMode,
    ) -> Result<&mut Lock, LmgrError> {
        let hash = tag.known_hash_code();
        let d = &mut *self.data;
        // SAFETY (here and below): the partition's LWLock is held exclusively, and it is the
        // partition of both hash codes (`ProcLockHashCode` keeps the lock's partition bits);
        // an unpartitioned table's one LWLock is held for every change of it.
        let entered = unsafe {
            self.lock_hash
                .enter(self.b, &mut d.locks, hash, tag, |at| Lock {
                    at,
                    ..Lock::default()
                })?
        };
        if !entered.found {
            // A new lock object: every field after the tag set.
            entered.entry.write(lock_at::KEY..lock_at::SIZE);
        }
        let requested = entered.value.n_requested;
        let phash = proclock_hash(&tag, procno);
        // SAFETY: as above.
        let entered = unsafe {
            self.proclock_hash
                .enter(self.b, &mut d.proclocks, phash, (tag, procno), |_| ())
        };
        let new_proclock = match entered {
            Ok(p) => (!p.found).then_some(p.entry),
            Err(e) => {
                if requested == 0 {
                    // SAFETY: as above.
                    let gone = unsafe { self.lock_hash.remove(self.b, &mut d.locks, hash, &tag)? };
                    debug_assert!(gone.is_some(), "lock table corrupted");
                }
                return Err(e.into());
            }
        };
        // The entry just found or made (the model's own reach for it, uncharged).
        let lock = d.locks.get_mut(hash, &tag).expect("entered above");
        if let Some(at) = new_proclock {
            let layout = self.proclock_layout;
            at.write(ProcLockLayout::KEY..layout.size());
            // Linked at the end of the lock's list (`SHMQueueInsertBefore`): the list head's
            // back link, and the old last proclock's forward link.
            lock.at.write(lock_at::PROC_LOCKS);
            if let Some(last) = lock.proc_locks.last() {
                last.at.write(last.layout.lock_link());
            }
            lock.proc_locks.push(ProcLock {
                procno,
                hold_mask: 0,
                at,
                layout,
            });
        }
        lock.at.write(lock_at::requested(mode as usize));
        lock.at.write(lock_at::N_REQUESTED);
        lock.requested[mode as usize] += 1;
        lock.n_requested += 1;
        Ok(lock)
    }

    /// Models `CleanUpLock`: drops `procno`'s proclock if it holds nothing, and the lock object
    /// if nobody requests it any more; otherwise, when `wakeup_needed`, wakes the waiters that
    /// can now be granted (`wake` is told each one).
    pub fn clean_up_and_wake(
        &mut self,
        tag: &LockTag,
        procno: u32,
        wakeup_needed: bool,
        wake: &mut impl FnMut(&ProcTable, u32),
    ) -> Result<(), LmgrError> {
        self.clean_up(tag, procno)?;
        if wakeup_needed {
            let procs = self.b.procs();
            if let Some(lock) = self.data.locks.get_mut(tag.known_hash_code(), tag) {
                lock.wake_waiters(&mut |p| wake(procs, p));
            }
        }
        Ok(())
    }

    /// The queue rewrite of a soft deadlock (`CheckDeadLock` with `waitOrders`): `tag`'s wait
    /// queue becomes `queue`, and the waiters it lets in are woken (`wake` is told each one).
    pub fn rewrite_queue(
        &mut self,
        tag: &LockTag,
        queue: Vec<Waiter>,
        wake: &mut impl FnMut(&ProcTable, u32),
    ) {
        let procs = self.b.procs();
        if let Some((_, lock)) =
            self.lock_hash
                .lookup_mut(&mut self.data.locks, tag.known_hash_code(), tag)
        {
            lock.wait_queue = queue;
            lock.wake_waiters(&mut |p| wake(procs, p));
        }
    }

    /// `CleanUpLock` without the wake-up.
    pub fn clean_up(&mut self, tag: &LockTag, procno: u32) -> Result<(), LmgrError> {
        let d = &mut *self.data;
        let hash = tag.known_hash_code();
        let Some(lock) = d.locks.get_mut(hash, tag) else {
            return Ok(());
        };
        if let Some(i) = lock
            .proc_locks
            .iter()
            .position(|p| p.procno == procno && p.hold_mask == 0)
        {
            // In order: the deadlock checker follows holders in the order they came.
            lock.proc_locks.remove(i);
            // Unlinked from the lock's list (`SHMQueueDelete`): its neighbours' links, each
            // the lock's list head at an end.
            for side in [i.checked_sub(1), Some(i)] {
                match side.and_then(|j| lock.proc_locks.get(j)) {
                    Some(p) => p.at.write(p.layout.lock_link()),
                    None => lock.at.write(lock_at::PROC_LOCKS),
                }
            }
            // SAFETY: as in `setup`.
            let gone = unsafe {
                self.proclock_hash.remove(
                    self.b,
                    &mut d.proclocks,
                    proclock_hash(tag, procno),
                    &(*tag, procno),
                )?
            };
            debug_assert!(gone.is_some(), "proclock table corrupted");
        }
        if lock.n_requested == 0 {
            debug_assert!(lock.proc_locks.is_empty());
            // SAFETY: as in `setup`.
            let gone = unsafe { self.lock_hash.remove(self.b, &mut d.locks, hash, tag)? };
            debug_assert!(gone.is_some(), "lock table corrupted");
        }
        Ok(())
    }

    /// Takes back a request that will not be granted (the `dontWait` exit of
    /// `LockAcquireExtended`): uncounts it and cleans up.
    pub fn abandon_request(
        &mut self,
        tag: &LockTag,
        procno: u32,
        mode: LockMode,
    ) -> Result<(), LmgrError> {
        if let Some(lock) = self.data.locks.get_mut(tag.known_hash_code(), tag) {
            lock.at.write(lock_at::requested(mode as usize));
            lock.at.write(lock_at::N_REQUESTED);
            lock.requested[mode as usize] -= 1;
            lock.n_requested -= 1;
        }
        self.clean_up(tag, procno)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_proc::ProcTable;
    use LockMode::*;

    #[test]
    fn own_grants_do_not_conflict() {
        let mut l = Lock::default();
        l.proc_locks.push(ProcLock::detached(1, 0));
        l.requested[AccessShare as usize] = 1;
        l.n_requested = 1;
        l.grant(1, AccessShare);
        assert!(
            !l.check_conflicts(AccessExclusive, 1),
            "upgrading my own lock"
        );
        assert!(l.check_conflicts(AccessExclusive, 2));
        assert!(!l.check_conflicts(RowExclusive, 2));
    }

    #[test]
    fn a_partition_is_the_size_of_an_lwlock_padded() {
        // The partitions' map region holds the LockManager tranche's LWLocks 128 bytes apart,
        // as MainLWLockArray's LWLockPadded (lwlock.h, LWLOCK_PADDED_SIZE) holds them; the
        // chains beside each lock must not stretch that.
        assert_eq!(
            std::mem::size_of::<CachePadded<Partition<AtomicLwLock>>>(),
            128
        );
    }

    #[test]
    fn full_tables_report_out_of_shared_memory_and_take_nothing() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let t: LockTable = LockTable::new(1, 1, 1, true);
        t.with_partition(&mut b, 0, |p| {
            p.setup(LockTag::relation(1, 1), 0, AccessShare).unwrap();
            let e = p
                .setup(LockTag::relation(1, 2), 0, AccessShare)
                .unwrap_err();
            assert_eq!(e, LmgrError::OutOfSharedMemory);
            p.abandon_request(&LockTag::relation(1, 1), 0, AccessShare)
                .unwrap();
        })
        .unwrap();
        assert_eq!(t.entries_in_use(), (0, 0));
    }
}
