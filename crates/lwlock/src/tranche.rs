//! Models how lwlock.c lays LWLocks out in shared memory: `MainLWLockArray` with its named
//! individual locks (lwlocknames.txt) followed by the partitioned tranches, each lock padded
//! (`LWLockPadded`), and `LWLockReleaseAll`.
//!
//! A partitioned tranche is an array of locks of which a hash code picks one
//! (`BufTableHashPartition`, `LockHashPartition`, `PredicateLockHashPartition`: `hashcode % N`),
//! so that lookups of unrelated keys rarely meet on one lock. Code that needs several partitions
//! at once takes them in ascending order, which is what keeps two such backends from
//! deadlocking.
//!
//! Padding decides how many locks share a cache line, and so whether backends hammering one
//! partition slow down those using its neighbours (false sharing). PostgreSQL padded each lock to
//! 16 or 32 bytes up to 9.3, to 32 bytes in 9.4 and 9.5, and to a full `PG_CACHE_LINE_SIZE` (128
//! bytes) from 9.6; the 2007 Unisys patches used 64. [`Padding`] makes that a type parameter.
//!
//! Differences from PostgreSQL:
//! - each tranche is its own array rather than a stretch of one `MainLWLockArray`;
//! - `LWLockReleaseAll` can only release locks it can reach: [`MainLwLockArray::release_all`]
//!   releases the locks of that array (PostgreSQL's reaches every LWLock, all being in shared
//!   memory), and [`PartitionedTranche::release_all`] those of one tranche;
//! - individual locks have tranche names of their own (as their wait events do since 10), not
//!   one `main` tranche.

use crate::{LwLockError, LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use std::ops::Deref;

/// lwlock.h's `NUM_BUFFER_PARTITIONS` from 9.5 (16 in 8.2–9.4).
pub const NUM_BUFFER_PARTITIONS: usize = 128;
/// lwlock.h's `NUM_LOCK_PARTITIONS` (16 since 8.2).
pub const NUM_LOCK_PARTITIONS: usize = 16;
/// lwlock.h's `NUM_PREDICATELOCK_PARTITIONS`.
pub const NUM_PREDICATELOCK_PARTITIONS: usize = 16;

/// How much room each lock of an array takes (`LWLOCK_PADDED_SIZE`).
pub trait Padding: Send + Sync + 'static {
    /// A lock with its padding.
    type Cell<K: Send + Sync>: Deref<Target = K> + Send + Sync;
    /// Bytes per lock at least (0: the lock's own size), as `--set lwlock_padding` names it.
    const BYTES: usize;
    /// Wraps a lock.
    fn pad<K: Send + Sync>(lock: K) -> Self::Cell<K>;
}

macro_rules! padding {
    ($(#[$doc:meta])* $name:ident, $cell:ident, $bytes:literal, $($repr:tt)*) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name;

        /// A lock padded as its [`Padding`] says.
        #[derive(Debug)]
        #[repr($($repr)*)]
        pub struct $cell<K>(K);

        impl<K> Deref for $cell<K> {
            type Target = K;
            #[inline(always)]
            fn deref(&self) -> &K {
                &self.0
            }
        }

        impl Padding for $name {
            type Cell<K: Send + Sync> = $cell<K>;
            const BYTES: usize = $bytes;
            #[inline(always)]
            fn pad<K: Send + Sync>(lock: K) -> $cell<K> {
                $cell(lock)
            }
        }
    };
}

padding!(
    /// No padding: locks packed at their own size.
    NoPadding, Packed, 0, transparent
);
padding!(
    /// 32 bytes per lock, `LWLockPadded` of 9.4 and 9.5 on 64-bit platforms.
    Pad32, Padded32, 32, align(32)
);
padding!(
    /// 64 bytes per lock: one x86 cache line (the 2007 Unisys patches).
    Pad64, Padded64, 64, align(64)
);
padding!(
    /// 128 bytes per lock, `PG_CACHE_LINE_SIZE`: `LWLockPadded` from 9.6 (also covers the
    /// adjacent-line prefetcher of x86).
    Pad128, Padded128, 128, align(128)
);

/// A partitioned tranche: `BufferMapping`, `LockManager`, `PredicateLockManager`.
///
/// Its locks are placed in a simulated machine's shared-memory map as one array
/// ([`pglocks_sync::shmem::Placed`]), as `MainLWLockArray` holds them; the shortcut is that
/// each tranche starts a region of its own on a 128-byte boundary, where PostgreSQL's array runs
/// on from one tranche to the next (which only matters for the 32-byte padding of 9.4 and 9.5,
/// whose last lock of one tranche may share a line with the first of the next).
pub struct PartitionedTranche<K: RawLwLock = crate::AtomicLwLock, P: Padding = Pad128> {
    /// (First: fields drop in declaration order, and the map must forget this memory before it
    /// is freed.)
    _placed: pglocks_sync::shmem::Placed,
    locks: Box<[P::Cell<K>]>,
}

impl<K: RawLwLock, P: Padding> PartitionedTranche<K, P> {
    /// `partitions` locks of tranche `name`.
    ///
    /// # Panics
    /// If `partitions` is 0 (a configuration error of the caller, not of a user).
    pub fn new(name: &'static str, partitions: usize) -> Self {
        assert!(partitions > 0, "a tranche needs at least one partition");
        let locks: Box<[P::Cell<K>]> = (0..partitions).map(|_| P::pad(K::new(name))).collect();
        Self {
            _placed: pglocks_sync::shmem::Placed::slice(name, &locks),
            locks,
        }
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// Whether the tranche has no partitions (never: see [`Self::new`]).
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// The partition a hash code belongs to (`hashcode % N`, as `BufTableHashPartition`).
    #[inline(always)]
    pub fn partition_for(&self, hashcode: u32) -> usize {
        hashcode as usize % self.locks.len()
    }

    /// The lock of partition `i` (`BufMappingPartitionLockByIndex` and friends).
    ///
    /// # Panics
    /// If `i` is not below [`Self::len`].
    #[inline(always)]
    pub fn lock(&self, i: usize) -> &K {
        &self.locks[i]
    }

    /// The lock guarding `hashcode` (`BufMappingPartitionLock`, `LockHashPartitionLock`).
    #[inline(always)]
    pub fn lock_for(&self, hashcode: u32) -> &K {
        self.lock(self.partition_for(hashcode))
    }

    /// Takes the given partitions (duplicates allowed) in ascending order, as code that needs
    /// several must (e.g. the deadlock checker takes all of `LockManager`). On error, releases
    /// what it took.
    pub fn acquire_ascending(
        &self,
        b: &mut Backend,
        mode: LwLockMode,
        partitions: &mut Vec<usize>,
    ) -> Result<(), LwLockError> {
        partitions.sort_unstable();
        partitions.dedup();
        for (n, &p) in partitions.iter().enumerate() {
            if let Err(e) = self.lock(p).acquire(b, mode) {
                for &q in partitions[..n].iter().rev() {
                    self.lock(q).release(b)?;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Releases the given partitions, newest first.
    pub fn release_all_of(&self, b: &mut Backend, partitions: &[usize]) -> Result<(), LwLockError> {
        for &p in partitions.iter().rev() {
            self.lock(p).release(b)?;
        }
        Ok(())
    }

    /// The lock of this tranche at address `addr` (a `held_lwlocks` entry), if any.
    fn find(&self, addr: usize) -> Option<&K> {
        let base = self.locks.as_ptr() as usize;
        let stride = std::mem::size_of::<P::Cell<K>>();
        let offset = addr.checked_sub(base)?;
        let lock = self.locks.get(offset / stride)?;
        (std::ptr::from_ref::<K>(lock) as usize == addr).then_some(&**lock)
    }

    /// `LWLockReleaseAll` for the locks of this tranche: releases every one the backend holds,
    /// newest first. Returns how many it released.
    pub fn release_all(&self, b: &mut Backend) -> Result<usize, LwLockError> {
        release_all_found(b, |addr| self.find(addr))
    }
}

impl<K: RawLwLock, P: Padding> std::fmt::Debug for PartitionedTranche<K, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionedTranche")
            .field("partitions", &self.locks.len())
            .field("padding", &P::BYTES)
            .finish()
    }
}

/// Releases, newest first, every lock the backend holds that `find` resolves.
fn release_all_found<'a, K: RawLwLock>(
    b: &mut Backend,
    find: impl Fn(usize) -> Option<&'a K>,
) -> Result<usize, LwLockError> {
    let mut released = 0;
    let mut i = b.held_lwlocks.len();
    while i > 0 {
        i -= 1;
        let (addr, _) = b.held_lwlocks.get(i);
        if let Some(lock) = find(addr) {
            lock.release(b)?;
            released += 1;
        }
    }
    Ok(released)
}

/// lwlock.h's individual LWLocks as numbered from 9.6 to 16 (lwlocknames.txt), by their wait
/// event names. Gaps are numbers PostgreSQL retired: 0 was `BufFreelistLock` up to 9.4 (kept
/// here for the ≤ 9.4 clock sweep), 10 `CheckpointLock`, 45 `BackendRandomLock`.
pub const INDIVIDUAL_LWLOCK_NAMES: [&str; NUM_INDIVIDUAL_LWLOCKS] = [
    "BufFreelist",
    "ShmemIndex",
    "OidGen",
    "XidGen",
    "ProcArray",
    "SInvalRead",
    "SInvalWrite",
    "WALBufMapping",
    "WALWrite",
    "ControlFile",
    "Checkpoint",
    "XactSLRU",
    "SubtransSLRU",
    "MultiXactGen",
    "MultiXactOffsetSLRU",
    "MultiXactMemberSLRU",
    "RelCacheInit",
    "CheckpointerComm",
    "TwoPhaseState",
    "TablespaceCreate",
    "BtreeVacuum",
    "AddinShmemInit",
    "Autovacuum",
    "AutovacuumSchedule",
    "SyncScan",
    "RelationMapping",
    "NotifySLRU",
    "NotifyQueue",
    "SerializableXactHash",
    "SerializableFinishedList",
    "SerializablePredicateList",
    "SerialSLRU",
    "SyncRep",
    "BackgroundWorker",
    "DynamicSharedMemoryControl",
    "AutoFile",
    "ReplicationSlotAllocation",
    "ReplicationSlotControl",
    "CommitTsSLRU",
    "CommitTs",
    "ReplicationOrigin",
    "MultiXactTruncation",
    "OldSnapshotTimeMap",
    "LogicalRepWorker",
    "XactTruncation",
    "BackendRandom",
    "WrapLimitsVacuum",
    "NotifyQueueTail",
    "RelFileNumberGen",
];

/// `NUM_INDIVIDUAL_LWLOCKS` (16).
pub const NUM_INDIVIDUAL_LWLOCKS: usize = 49;

/// Numbers of the individual locks the models use (`ProcArrayLock` is
/// `&MainLWLockArray[4].lock`).
pub mod individual {
    /// `BufFreelistLock` (≤ 9.4): the buffer free list and clock sweep.
    pub const BUF_FREELIST_LOCK: usize = 0;
    /// `ShmemIndexLock`.
    pub const SHMEM_INDEX_LOCK: usize = 1;
    /// `OidGenLock`.
    pub const OID_GEN_LOCK: usize = 2;
    /// `XidGenLock`: assigning transaction ids.
    pub const XID_GEN_LOCK: usize = 3;
    /// `ProcArrayLock`: snapshots (shared) against commits (exclusive).
    pub const PROC_ARRAY_LOCK: usize = 4;
    /// `SInvalReadLock`.
    pub const SINVAL_READ_LOCK: usize = 5;
    /// `SInvalWriteLock`.
    pub const SINVAL_WRITE_LOCK: usize = 6;
    /// `WALBufMappingLock`.
    pub const WAL_BUF_MAPPING_LOCK: usize = 7;
    /// `WALWriteLock`: one WAL writer/flusher at a time.
    pub const WAL_WRITE_LOCK: usize = 8;
    /// `ControlFileLock`.
    pub const CONTROL_FILE_LOCK: usize = 9;
    /// `XactSLRULock` (`CLogControlLock` before 13): the CLOG buffers.
    pub const XACT_SLRU_LOCK: usize = 11;
    /// `SubtransSLRULock` (`SubtransControlLock` before 13).
    pub const SUBTRANS_SLRU_LOCK: usize = 12;
}

/// Models `MainLWLockArray`: the individual locks, then the `BufferMapping`, `LockManager` and
/// `PredicateLockManager` tranches (`BUFFER_MAPPING_LWLOCK_OFFSET` and the offsets after it).
pub struct MainLwLockArray<K: RawLwLock = crate::AtomicLwLock, P: Padding = Pad128> {
    individual: PartitionedTranche<K, P>,
    /// `BufferMapping`: `NUM_BUFFER_PARTITIONS` locks over the buffer table.
    pub buffer_mapping: PartitionedTranche<K, P>,
    /// `LockManager`: `NUM_LOCK_PARTITIONS` locks over the heavyweight lock table.
    pub lock_manager: PartitionedTranche<K, P>,
    /// `PredicateLockManager`: `NUM_PREDICATELOCK_PARTITIONS` locks.
    pub predicate_lock_manager: PartitionedTranche<K, P>,
}

impl<K: RawLwLock, P: Padding> std::fmt::Debug for MainLwLockArray<K, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MainLwLockArray")
            .field("individual", &self.individual)
            .field("buffer_mapping", &self.buffer_mapping)
            .field("lock_manager", &self.lock_manager)
            .field("predicate_lock_manager", &self.predicate_lock_manager)
            .finish()
    }
}

impl<K: RawLwLock, P: Padding> MainLwLockArray<K, P> {
    /// The array with `buffer_partitions` and `lock_partitions` partitions (release-dependent:
    /// see the presets), and 16 predicate-lock partitions.
    pub fn new(buffer_partitions: usize, lock_partitions: usize) -> Self {
        let locks: Box<[P::Cell<K>]> = INDIVIDUAL_LWLOCK_NAMES
            .iter()
            .map(|&name| P::pad(K::new(name)))
            .collect();
        let individual = PartitionedTranche {
            _placed: pglocks_sync::shmem::Placed::slice("MainLWLockArray", &locks),
            locks,
        };
        Self {
            individual,
            buffer_mapping: PartitionedTranche::new("BufferMapping", buffer_partitions),
            lock_manager: PartitionedTranche::new("LockManager", lock_partitions),
            predicate_lock_manager: PartitionedTranche::new(
                "PredicateLockManager",
                NUM_PREDICATELOCK_PARTITIONS,
            ),
        }
    }

    /// Individual lock number `n` (see [`individual`]), e.g. `ProcArrayLock`.
    ///
    /// # Panics
    /// If `n` is not below [`NUM_INDIVIDUAL_LWLOCKS`].
    #[inline(always)]
    pub fn individual(&self, n: usize) -> &K {
        self.individual.lock(n)
    }

    /// Models `LWLockReleaseAll`, as error recovery calls it: releases every lock of this array
    /// the backend holds, newest first. Returns how many it released.
    pub fn release_all(&self, b: &mut Backend) -> Result<usize, LwLockError> {
        release_all_found(b, |addr| {
            self.individual
                .find(addr)
                .or_else(|| self.buffer_mapping.find(addr))
                .or_else(|| self.lock_manager.find(addr))
                .or_else(|| self.predicate_lock_manager.find(addr))
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{AtomicLwLock, SpinlockProtectedLwLock};
    use pglocks_proc::ProcTable;

    #[test]
    fn partition_is_hash_modulo_count() {
        let t: PartitionedTranche = PartitionedTranche::new("BufferMapping", NUM_BUFFER_PARTITIONS);
        assert_eq!(t.partition_for(0), 0);
        assert_eq!(t.partition_for(129), 1);
        assert_eq!(t.partition_for(u32::MAX), u32::MAX as usize % 128);
        assert!(std::ptr::eq(t.lock_for(130), t.lock(2)));
    }

    #[test]
    fn several_partitions_are_taken_in_ascending_order_once_each() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let t: PartitionedTranche = PartitionedTranche::new("LockManager", NUM_LOCK_PARTITIONS);
        let mut parts = vec![9, 3, 9, 0];
        t.acquire_ascending(&mut b, LwLockMode::Exclusive, &mut parts)
            .unwrap();
        assert_eq!(parts, vec![0, 3, 9]);
        let held: Vec<usize> = b.held_lwlocks.iter().map(|e| e.0).collect();
        let want: Vec<usize> = parts
            .iter()
            .map(|&p| t.lock(p) as *const _ as usize)
            .collect();
        assert_eq!(held, want);
        t.release_all_of(&mut b, &parts).unwrap();
        assert!(b.held_lwlocks.is_empty());
    }

    #[test]
    fn padding_sets_the_stride() {
        fn stride<P: Padding>() -> usize {
            std::mem::size_of::<P::Cell<AtomicLwLock>>()
        }
        assert_eq!(
            std::mem::size_of::<AtomicLwLock>(),
            16,
            "as PostgreSQL's LWLock"
        );
        assert_eq!(stride::<NoPadding>(), 16);
        assert_eq!(stride::<Pad32>(), 32);
        assert_eq!(stride::<Pad64>(), 64);
        assert_eq!(stride::<Pad128>(), 128);
        assert!(std::mem::size_of::<SpinlockProtectedLwLock>() <= 32);
    }

    #[test]
    fn release_all_releases_this_arrays_locks_newest_first_and_keeps_others() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let main: MainLwLockArray<AtomicLwLock, Pad32> = MainLwLockArray::new(16, 16);
        let other: AtomicLwLock = AtomicLwLock::new("WALInsert");
        let proc_array = main.individual(individual::PROC_ARRAY_LOCK);
        assert_eq!(proc_array.name(), "ProcArray");
        assert_eq!(
            main.individual(individual::XACT_SLRU_LOCK).name(),
            "XactSLRU"
        );
        proc_array.acquire(&mut b, LwLockMode::Shared).unwrap();
        other.acquire(&mut b, LwLockMode::Exclusive).unwrap();
        main.buffer_mapping
            .lock(15)
            .acquire(&mut b, LwLockMode::Exclusive)
            .unwrap();
        main.lock_manager
            .lock(0)
            .acquire(&mut b, LwLockMode::Shared)
            .unwrap();
        assert_eq!(main.release_all(&mut b).unwrap(), 3);
        assert_eq!(
            b.held_lwlocks.len(),
            1,
            "the lock outside the array stays held"
        );
        assert!(main
            .buffer_mapping
            .lock(15)
            .conditional_acquire(&mut b, LwLockMode::Exclusive)
            .unwrap());
        other.release(&mut b).unwrap();
        assert_eq!(main.release_all(&mut b).unwrap(), 1);
        assert!(b.held_lwlocks.is_empty());
    }
}
