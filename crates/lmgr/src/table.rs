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
//! Differences from PostgreSQL: each partition is a `HashMap` of lock objects, and a lock's
//! proclocks are a small vector inside it rather than a second shared hash table (the same
//! counting limits apply, kept by `FreeLists` (freelist.rs) standing in for the two shared
//! hash tables' free lists: one list behind one spinlock up to 9.5, 32 from 9.6). The limits are exact: PostgreSQL's tables (through 18) start at half of
//! `NLOCKENTS` and take further entries from the shared segment as they grow, so a full table
//! there may borrow some spare memory before "out of shared memory"; here the `NLOCKENTS`-th
//! entry is the last.

use crate::freelist::FreeLists;
use crate::locktag::TagMap;
use crate::mode::{LockMask, LockMode, MAX_LOCK_MODES};
use crate::{LmgrError, LockTag};
use pglocks_lwlock::{AtomicLwLock, LwLockMode, RawLwLock};
use pglocks_proc::{Backend, ProcTable};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::CachePadded;

/// lock.h's `PROCLOCK`, kept inside its lock: what one backend holds of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcLock {
    /// The backend (`PROCLOCKTAG.myProc`).
    pub procno: u32,
    /// `holdMask`: the modes it holds.
    pub hold_mask: LockMask,
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
}

impl Lock {
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
        self.granted[mode as usize] += 1;
        self.n_granted += 1;
        self.grant_mask |= mode.bit();
        if self.granted[mode as usize] == self.requested[mode as usize] {
            self.wait_mask &= !mode.bit();
        }
        if let Some(p) = self.proc_lock(procno) {
            p.hold_mask |= mode.bit();
        }
        debug_assert!(self.n_granted <= self.n_requested);
    }

    /// Models `UnGrantLock`: drops `procno`'s grant of `mode`; returns whether waiters may now
    /// be wakeable (something they conflict with was released).
    pub fn ungrant(&mut self, procno: u32, mode: LockMode) -> bool {
        self.requested[mode as usize] -= 1;
        self.n_requested -= 1;
        self.granted[mode as usize] -= 1;
        self.n_granted -= 1;
        if self.granted[mode as usize] == 0 {
            self.grant_mask &= !mode.bit();
        }
        if let Some(p) = self.proc_lock(procno) {
            p.hold_mask &= !mode.bit();
        }
        mode.conflicts() & self.wait_mask != 0
    }

    /// The lock part of `RemoveFromWaitQueue`: takes `procno` out of the queue and uncounts
    /// its request. Returns the request, if it was waiting here.
    pub fn remove_waiter(&mut self, procno: u32) -> Option<Waiter> {
        let i = self.wait_queue.iter().position(|w| w.procno == procno)?;
        let w = self.wait_queue.remove(i);
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
                self.grant(w.procno, w.mode);
                wake(w.procno);
            } else {
                ahead |= w.mode.bit();
                i += 1;
            }
        }
    }
}

/// One partition: its `LockManager` LWLock and the lock objects it guards.
struct Partition<K> {
    lwlock: K,
    locks: UnsafeCell<TagMap<LockTag, Lock>>,
}

/// The shared lock table: partitions plus the `NLOCKENTS` limits.
pub(crate) struct LockTable<K: RawLwLock = AtomicLwLock> {
    partitions: Box<[CachePadded<Partition<K>>]>,
    /// The `LOCK` hash table's free elements.
    lock_entries: FreeLists,
    /// The `PROCLOCK` hash table's free elements.
    proclock_entries: FreeLists,
}

// SAFETY: a partition's `locks` are only touched inside `with_partition`, which holds the
// partition's LWLock exclusively (its acquire and release order the accesses).
unsafe impl<K: RawLwLock> Sync for LockTable<K> {}

impl<K: RawLwLock> LockTable<K> {
    /// A table of `partitions` partitions holding at most `max_locks` lock objects and twice as
    /// many proclocks, each hash table's elements on `freelists` free lists.
    pub fn new(partitions: usize, max_locks: usize, freelists: usize) -> Self {
        Self {
            partitions: (0..partitions.max(1))
                .map(|_| {
                    CachePadded::new(Partition {
                        lwlock: K::new("LockManager"),
                        locks: UnsafeCell::new(TagMap::default()),
                    })
                })
                .collect(),
            lock_entries: FreeLists::new(freelists, max_locks),
            proclock_entries: FreeLists::new(freelists, 2 * max_locks),
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

    /// Runs `f` on partition `p`'s lock objects with its LWLock held exclusively.
    pub fn with_partition<R>(
        &self,
        b: &mut Backend,
        p: usize,
        f: impl FnOnce(&mut PartitionLocks<'_>) -> R,
    ) -> Result<R, LmgrError> {
        let part = &self.partitions[p];
        part.lwlock.acquire(b, LwLockMode::Exclusive)?;
        let procs = b.procs();
        // SAFETY: the partition's LWLock is held exclusively until the release below.
        let r = part.locks.with_mut(|m| {
            f(&mut PartitionLocks {
                procs,
                locks: unsafe { &mut *m },
                lock_entries: &self.lock_entries,
                proclock_entries: &self.proclock_entries,
            })
        });
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
        let procs = b.procs();
        let mut all = AllPartitions {
            procs,
            parts: self
                .partitions
                .iter()
                .map(|part| PartitionLocks {
                    procs,
                    // SAFETY: every partition's LWLock is held exclusively until the releases
                    // below, and each pointer is to a different partition's map.
                    locks: part.locks.with_mut(|m| unsafe { &mut *m }),
                    lock_entries: &self.lock_entries,
                    proclock_entries: &self.proclock_entries,
                })
                .collect(),
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
        (self.lock_entries.in_use(), self.proclock_entries.in_use())
    }
}

/// One partition's lock objects, while its LWLock is held.
pub(crate) struct PartitionLocks<'a> {
    /// Every backend's `PGPROC`, for `ProcWakeup`'s semaphore post under the partition lock.
    pub procs: &'a ProcTable,
    locks: &'a mut TagMap<LockTag, Lock>,
    lock_entries: &'a FreeLists,
    proclock_entries: &'a FreeLists,
}

/// Every partition's lock objects, while all their LWLocks are held.
pub(crate) struct AllPartitions<'a> {
    /// Every backend's `PGPROC`.
    pub procs: &'a ProcTable,
    parts: Vec<PartitionLocks<'a>>,
}

impl<'a> AllPartitions<'a> {
    /// The partition `tag` hashes to.
    pub fn partition(&mut self, tag: &LockTag) -> &mut PartitionLocks<'a> {
        let n = self.parts.len();
        &mut self.parts[tag.hash_code() as usize % n]
    }

    /// The lock object of `tag`, if anyone holds or awaits it.
    pub fn get(&self, tag: &LockTag) -> Option<&Lock> {
        self.parts[tag.hash_code() as usize % self.parts.len()]
            .locks
            .get(tag)
    }
}

/// lock.c's `ProcLockHashCode`: a proclock's hash code, from its lock's and its backend (the
/// backend's number standing in for the `PGPROC` pointer PostgreSQL mixes in).
fn proclock_hash(tag: &LockTag, procno: u32) -> u32 {
    tag.hash_code() ^ (procno << 4)
}

impl PartitionLocks<'_> {
    /// The lock object of `tag`, if anyone holds or awaits it.
    pub fn get(&mut self, tag: &LockTag) -> Option<&mut Lock> {
        self.locks.get_mut(tag)
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
        if !self.locks.contains_key(&tag) {
            self.lock_entries.take(tag.hash_code())?;
            self.locks.insert(tag, Lock::default());
        }
        let lock = self.locks.get_mut(&tag).expect("inserted above");
        if lock.proc_lock(procno).is_none() {
            if let Err(e) = self.proclock_entries.take(proclock_hash(&tag, procno)) {
                if lock.n_requested == 0 {
                    self.locks.remove(&tag);
                    self.lock_entries.give(tag.hash_code());
                }
                return Err(e);
            }
            lock.proc_locks.push(ProcLock {
                procno,
                hold_mask: 0,
            });
        }
        lock.requested[mode as usize] += 1;
        lock.n_requested += 1;
        Ok(self.locks.get_mut(&tag).expect("present"))
    }

    /// Models `CleanUpLock`: drops `procno`'s proclock if it holds nothing, and the lock object
    /// if nobody requests it any more; otherwise, when `wakeup_needed`, wakes the waiters that
    /// can now be granted (`wake` is told each one).
    pub fn clean_up_and_wake(
        &mut self,
        tag: &LockTag,
        procno: u32,
        wakeup_needed: bool,
        wake: &mut impl FnMut(u32),
    ) {
        self.clean_up(tag, procno);
        if wakeup_needed {
            if let Some(lock) = self.locks.get_mut(tag) {
                lock.wake_waiters(wake);
            }
        }
    }

    /// `CleanUpLock` without the wake-up.
    pub fn clean_up(&mut self, tag: &LockTag, procno: u32) {
        let Some(lock) = self.locks.get_mut(tag) else {
            return;
        };
        if let Some(i) = lock
            .proc_locks
            .iter()
            .position(|p| p.procno == procno && p.hold_mask == 0)
        {
            // In order: the deadlock checker follows holders in the order they came.
            lock.proc_locks.remove(i);
            self.proclock_entries.give(proclock_hash(tag, procno));
        }
        if lock.n_requested == 0 {
            debug_assert!(lock.proc_locks.is_empty());
            self.locks.remove(tag);
            self.lock_entries.give(tag.hash_code());
        }
    }

    /// Takes back a request that will not be granted (the `dontWait` exit of
    /// `LockAcquireExtended`): uncounts it and cleans up.
    pub fn abandon_request(&mut self, tag: &LockTag, procno: u32, mode: LockMode) {
        if let Some(lock) = self.locks.get_mut(tag) {
            lock.requested[mode as usize] -= 1;
            lock.n_requested -= 1;
        }
        self.clean_up(tag, procno);
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
        l.proc_locks.push(ProcLock {
            procno: 1,
            hold_mask: 0,
        });
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
    fn full_tables_report_out_of_shared_memory_and_take_nothing() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let t: LockTable = LockTable::new(1, 1, 1);
        t.with_partition(&mut b, 0, |p| {
            p.setup(LockTag::relation(1, 1), 0, AccessShare).unwrap();
            let e = p
                .setup(LockTag::relation(1, 2), 0, AccessShare)
                .unwrap_err();
            assert_eq!(e, LmgrError::OutOfSharedMemory);
            p.abandon_request(&LockTag::relation(1, 1), 0, AccessShare);
        })
        .unwrap();
        assert_eq!(t.entries_in_use(), (0, 0));
    }
}
