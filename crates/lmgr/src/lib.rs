//! PostgreSQL's heavyweight lock manager (lock.c, lock.h, lockdefs.h; lmgr/README): the locks
//! on tables, transactions and other database objects that transactions hold until they end.
//!
//! # The algorithm
//! A lock is requested on a [`LockTag`] in one of eight [`LockMode`]s. The backend first looks in
//! its own `LOCALLOCK` table ([`LocalLocks`]): if it already holds the lock in that mode it only
//! counts the new reference. Otherwise:
//! 1. a weak relation lock (`AccessShareLock`, `RowShareLock`, `RowExclusiveLock` on a relation
//!    of the backend's database) goes to the backend's **fast-path** slots when no strong lock on
//!    that relation's hash counter is held or being taken (9.2+; see [`fastpath`]);
//! 2. a strong relation lock first bumps that counter and moves every backend's fast-path
//!    entries for the relation into the main table;
//! 3. everything else is looked up in the shared table ([`table`]) under the `LockManager`
//!    partition lock of its hash code: the `LOCK` object and this backend's `PROCLOCK` are made
//!    if missing, and the request is granted unless it conflicts with a mode granted to another
//!    backend or with a mode somebody already waits for (no queue jumping).
//!
//! A release undoes the same path: the fast-path slot if the lock is still there, else the main
//! table (the entry may have been transferred meanwhile). At transaction end every
//! transaction-owned lock is released ([`LockManager::release_all`]).
//!
//! # Differences from PostgreSQL
//! - Backends are explicit [`Backend`] handles, and a backend's `LOCALLOCK` table is a
//!   [`LocalLocks`] value it owns; resource owners are reduced to session and transaction.
//! - A `LOCALLOCK` entry is made when its lock is granted, not before the attempt (PostgreSQL
//!   makes it first and removes it again if the lock is not granted).
//! - Waiting, the deadlock check and timeouts: see [`proc`] and [`deadlock`].

pub mod deadlock;
pub mod fastpath;
pub mod locktag;
pub mod mode;
pub mod proc;
pub mod table;
pub mod vxid;
pub mod xactwait;

pub use deadlock::DeadlockInfo;
pub use fastpath::{FastPathGrouping, FastPathLayout};
pub use locktag::{LockMethodId, LockTag, LockTagType};
pub use mode::{LockMask, LockMode};
pub use proc::{LockTimeouts, WaitTimeout};
pub use vxid::VirtualXid;

use fastpath::{strong, weak, FastPath};
use locktag::{TagHasher, TagMap};
use pglocks_lwlock::{AtomicLwLock, LwLockError, RawLwLock};
use pglocks_proc::{Backend, MAX_BACKENDS};
use pglocks_sync::cpu::{self, Kernel};
use proc::{Joined, WaitSlots};
use std::hash::{BuildHasher, BuildHasherDefault};
use table::LockTable;

/// lock.h's `NUM_LOCK_PARTITIONS`.
pub const NUM_LOCK_PARTITIONS: usize = 16;
/// The default of `max_locks_per_transaction`.
pub const DEFAULT_MAX_LOCKS_PER_TRANSACTION: usize = 64;

/// Errors of the lock manager, in PostgreSQL's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LmgrError {
    /// The shared lock or proclock table is full (`ereport(ERROR, …)` in `LockAcquireExtended`).
    #[error("out of shared memory (HINT: You might need to increase max_locks_per_transaction.)")]
    OutOfSharedMemory,
    /// Releasing a lock the backend (or owner) does not hold (PostgreSQL warns and returns
    /// false).
    #[error("you don't own a lock of type {mode}")]
    NotHeld {
        /// The mode asked for.
        mode: LockMode,
    },
    /// The deadlock checker found a cycle of waits that no queue reordering breaks
    /// (`DeadLockReport`); [`LmgrError::detail`] names the cycle.
    #[error("deadlock detected")]
    Deadlock {
        /// The cycle, starting with the backend that detected it.
        cycle: Vec<DeadlockInfo>,
    },
    /// `lock_timeout` expired while waiting (postgres.c's `ProcessInterrupts`).
    #[error("canceling statement due to lock timeout")]
    LockTimeout,
    /// An LWLock underneath failed.
    #[error(transparent)]
    LwLock(#[from] LwLockError),
    /// A spinlock (a shared hash table's free list) was never released (s_lock.c's
    /// `s_lock_stuck`).
    #[error("stuck spinlock detected at {lock} (gave up after {delays} sleeps)")]
    StuckSpinlock {
        /// Which spinlock.
        lock: &'static str,
        /// Sleeps taken before giving up.
        delays: u32,
    },
    /// A configuration PostgreSQL would refuse at start-up: more than `MAX_BACKENDS` backends
    /// (`InitializeMaxBackends`), or tables whose size overflows (`mul_size`'s "requested
    /// shared memory size overflows size_t").
    #[error("invalid lock manager setting: {0}")]
    Config(String),
}

impl From<pglocks_dynahash::HashError> for LmgrError {
    fn from(e: pglocks_dynahash::HashError) -> Self {
        match e {
            pglocks_dynahash::HashError::StuckSpinlock(e) => LmgrError::StuckSpinlock {
                lock: "dynahash free list",
                delays: e.delays,
            },
            pglocks_dynahash::HashError::OutOfSharedMemory | _ => LmgrError::OutOfSharedMemory,
        }
    }
}

impl LmgrError {
    /// PostgreSQL's `DETAIL` line(s), if the error has one: for a deadlock, one line per member
    /// of the cycle, "Process P waits for MODE on OBJECT; blocked by process Q." (process
    /// numbers stand in for pids).
    pub fn detail(&self) -> Option<String> {
        let LmgrError::Deadlock { cycle } = self else {
            return None;
        };
        let lines: Vec<String> = cycle
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let next = cycle[(i + 1) % cycle.len()].procno;
                format!(
                    "Process {} waits for {} on {}; blocked by process {}.",
                    d.procno,
                    d.mode,
                    d.tag.describe(),
                    next
                )
            })
            .collect();
        Some(lines.join("\n"))
    }

    /// PostgreSQL's `HINT`, if any (8.4+'s deadlock hint).
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            LmgrError::Deadlock { .. } => Some("See server log for query details."),
            _ => None,
        }
    }
}

/// lock.h's `LockAcquireResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockAcquireResult {
    /// `LOCKACQUIRE_NOT_AVAIL`: not granted (and not waited for).
    NotAvailable,
    /// `LOCKACQUIRE_OK`: newly granted.
    Ok,
    /// `LOCKACQUIRE_ALREADY_HELD`: this backend held it already; another reference counted.
    AlreadyHeld,
}

/// Who a lock reference belongs to (resource owners, reduced to the two that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockOwner {
    /// The transaction: released at its end.
    Transaction,
    /// The session (`sessionLock`): kept across transactions, released explicitly.
    Session,
}

/// The lock manager's configuration, what a release and `postgresql.conf` decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockManagerConfig {
    /// `MaxBackends`.
    pub max_backends: usize,
    /// `max_locks_per_transaction`: sizes the shared tables (and 18's fast-path groups).
    pub max_locks_per_transaction: usize,
    /// `NUM_LOCK_PARTITIONS` (16 from 8.2; 8.1 had one `LockMgrLock`).
    pub partitions: usize,
    /// The fast path of the release.
    pub fast_path: FastPathLayout,
    /// 17+: a `NOWAIT` request that conflicts goes through the wait-queue rule, so it is
    /// granted when that rule would let it in ahead of the waiters (before 17 it fails at once).
    pub nowait_checks_queue: bool,
    /// Up to 17: `ProcSleep` re-takes the partition lock exclusively once its wait has ended
    /// (granted, or failed by its own deadlock check), for the caller to release; 18 split
    /// `ProcSleep` and returns without it.
    pub relock_after_sleep: bool,
    /// 9.2+: a transaction's virtual-xid lock is *lazy*, a note in its fast-path area until
    /// someone waits for it (`VirtualXactLockTableInsert`); off, it is taken in the shared table
    /// at every transaction start, as up to 9.1. The note lives in the fast-path area, so
    /// without a fast path the lock is always eager.
    pub lazy_vxid: bool,
    /// The free lists of the shared `LOCK` and `PROCLOCK` hash tables: one (behind one
    /// spinlock) up to 9.5, `NUM_FREELISTS` (32) from 9.6.
    pub hash_freelists: usize,
    /// s_lock.h's `TAS_SPIN` reads the free lists' spinlocks before the exchange (x86_64 from
    /// 9.4).
    pub tas_spin: bool,
}

impl LockManagerConfig {
    /// Checks the shape: 1 to `MAX_BACKENDS` backends, and a lock table of
    /// `max_locks_per_transaction × max_backends` entries (`NLOCKENTS`, twice that many
    /// proclocks) whose size can be computed.
    pub fn validate(&self) -> Result<(), LmgrError> {
        if self.max_backends == 0 || self.max_backends > MAX_BACKENDS {
            return Err(LmgrError::Config(format!(
                "max_backends must be 1 to {MAX_BACKENDS}, not {}",
                self.max_backends
            )));
        }
        let proclocks = self
            .max_locks_per_transaction
            .checked_mul(self.max_backends)
            .and_then(|locks| locks.checked_mul(2));
        if proclocks.is_none() {
            return Err(LmgrError::Config(format!(
                "requested shared memory size overflows size_t \
                 (max_locks_per_transaction {} × max_backends {})",
                self.max_locks_per_transaction, self.max_backends
            )));
        }
        Ok(())
    }

    /// 9.2–17's defaults for `max_backends` backends.
    pub fn new(max_backends: usize) -> Self {
        Self {
            max_backends,
            max_locks_per_transaction: DEFAULT_MAX_LOCKS_PER_TRANSACTION,
            partitions: NUM_LOCK_PARTITIONS,
            fast_path: FastPathLayout::Slots16,
            nowait_checks_queue: false,
            relock_after_sleep: true,
            hash_freelists: pglocks_dynahash::NUM_FREELISTS,
            tas_spin: true,
            lazy_vxid: true,
        }
    }
}

/// lock.h's `LOCALLOCK`: one backend's references to one (tag, mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct LocalLock {
    /// References held by the transaction.
    transaction: u32,
    /// References held by the session.
    session: u32,
    /// Granted through the fast path (it may since have been moved into the main table).
    via_fast_path: bool,
    /// `holdsStrongLockCount`: this lock counts in a fast-path strong-lock counter.
    holds_strong_count: bool,
}

impl LocalLock {
    fn n_locks(&self) -> u32 {
        self.transaction + self.session
    }

    fn count(&mut self, owner: LockOwner) -> &mut u32 {
        match owner {
            LockOwner::Transaction => &mut self.transaction,
            LockOwner::Session => &mut self.session,
        }
    }
}

/// A backend's private lock state: its `LOCALLOCK` hash table, its database
/// (`MyDatabaseId`) and its fast-path use counts (`FastPathLocalUseCounts`).
#[derive(Debug, Clone)]
pub struct LocalLocks {
    database: u32,
    locks: TagMap<(LockTag, LockMode), LocalLock>,
    fast_path_used: Vec<u32>,
    /// `MyProc->lxid`: the running transaction's local id (0 between transactions).
    lxid: u32,
    /// The last local id handed out (`nextLocalTransactionId`).
    last_lxid: u32,
}

impl LocalLocks {
    /// Locks this backend holds, with their total reference counts.
    pub fn held(&self) -> Vec<(LockTag, LockMode, u32)> {
        let mut v: Vec<_> = self
            .locks
            .iter()
            .filter(|(_, l)| l.n_locks() > 0)
            .map(|(&(t, m), l)| (t, m, l.n_locks()))
            .collect();
        v.sort();
        v
    }

    /// The backend's database (`MyDatabaseId`).
    pub fn database(&self) -> u32 {
        self.database
    }

    /// Records a newly granted lock with one reference of `owner` (`GrantLockLocal`).
    fn grant(
        &mut self,
        tag: LockTag,
        mode: LockMode,
        owner: LockOwner,
        via_fast_path: bool,
        holds_strong_count: bool,
    ) {
        let mut l = LocalLock {
            via_fast_path,
            holds_strong_count,
            ..LocalLock::default()
        };
        *l.count(owner) += 1;
        self.locks.insert((tag, mode), l);
    }
}

/// The shared lock manager: the lock table and every backend's fast-path area.
pub struct LockManager<K: RawLwLock = AtomicLwLock> {
    table: LockTable<K>,
    fast_path: FastPath<K>,
    waits: WaitSlots,
    nowait_checks_queue: bool,
    relock_after_sleep: bool,
    lazy_vxid: bool,
}

impl<K: RawLwLock> std::fmt::Debug for LockManager<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockManager")
            .field("partitions", &self.table.partitions())
            .field("entries_in_use", &self.table.entries_in_use())
            .field("fast_path", &self.fast_path.layout())
            .finish()
    }
}

impl<K: RawLwLock> LockManager<K> {
    /// Models `InitLocks`: tables sized `max_locks_per_transaction × max_backends`.
    ///
    /// # Panics
    /// If the configuration is invalid ([`LockManagerConfig::validate`]);
    /// [`LockManager::try_new`] returns the error.
    pub fn new(config: LockManagerConfig) -> Self {
        match Self::try_new(config) {
            Ok(lm) => lm,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`LockManager::new`], refusing an invalid configuration with [`LmgrError::Config`].
    pub fn try_new(config: LockManagerConfig) -> Result<Self, LmgrError> {
        config.validate()?;
        Ok(Self {
            table: LockTable::new(
                config.partitions,
                config.max_locks_per_transaction * config.max_backends,
                config.hash_freelists,
                config.tas_spin,
            ),
            fast_path: FastPath::new(config.fast_path, config.max_backends),
            waits: WaitSlots::new(config.max_backends),
            nowait_checks_queue: config.nowait_checks_queue,
            relock_after_sleep: config.relock_after_sleep,
            lazy_vxid: config.lazy_vxid,
        })
    }

    /// A backend's start in database `database` (what `InitPostgres` sets up: `MyDatabaseId`
    /// and `MyProc->databaseId`, which transfers check).
    pub fn connect(&self, b: &mut Backend, database: u32) -> Result<LocalLocks, LmgrError> {
        self.fast_path
            .with_slots(b, b.procno(), |s, _| s.database = database)?;
        Ok(LocalLocks {
            database,
            locks: TagMap::default(),
            fast_path_used: vec![0; self.fast_path.layout().groups()],
            lxid: 0,
            last_lxid: 0,
        })
    }

    /// Lock objects and proclocks in the shared table.
    pub fn entries_in_use(&self) -> (usize, usize) {
        self.table.entries_in_use()
    }

    /// An audit of the fast-path areas (as `pg_locks` reads them, each under its
    /// `fpInfoLock`): slots in use over every backend (relation locks and lazy VXID locks) and
    /// the strong-lock counters' total. Both are 0 once every backend has released everything.
    pub fn fast_path_in_use(&self, b: &mut Backend) -> Result<(usize, u64), LmgrError> {
        let mut slots = 0;
        for procno in 0..self.fast_path.backends() {
            slots += self.fast_path.with_slots(b, procno, |s, _| s.in_use())?;
        }
        Ok((slots, self.fast_path.strong_total()))
    }

    /// `EligibleForRelationFastPath` for a backend of `database`: a weak lock on a relation of
    /// the backend's own database, and only once it is connected to one (`MyDatabaseId` is
    /// `InvalidOid`, 0, before that).
    fn eligible(&self, database: u32, tag: &LockTag, mode: LockMode) -> bool {
        self.fast_path.layout() != FastPathLayout::None
            && weak(mode)
            && tag.kind == LockTagType::Relation
            && tag.method == LockMethodId::Default
            && tag.field1 == database
            && database != 0
    }

    /// `ConflictsWithRelationFastPath`: a strong lock on a relation of a real database (a
    /// shared catalog's tag has database `InvalidOid`, and no weak lock on it is ever taken
    /// by the fast path, so nothing needs transferring).
    fn conflicts_with_fast_path(&self, tag: &LockTag, mode: LockMode) -> bool {
        self.fast_path.layout() != FastPathLayout::None
            && strong(mode)
            && tag.kind == LockTagType::Relation
            && tag.method == LockMethodId::Default
            && tag.field1 != 0
    }

    /// Models `ConditionalLockAcquire` (`LockAcquireExtended` with `dontWait`): grants `mode`
    /// on `tag` to backend `b` for `owner` if nothing conflicts, else returns `NotAvailable`.
    pub fn conditional_acquire(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        tag: LockTag,
        mode: LockMode,
        owner: LockOwner,
    ) -> Result<LockAcquireResult, LmgrError> {
        self.acquire_extended(b, local, tag, mode, owner, None)
    }

    /// Models `LockAcquire`: grants `mode` on `tag` to backend `b` for `owner`, waiting in the
    /// lock's queue as long as it must. Fails with "deadlock detected" or at `lock_timeout`.
    pub fn acquire(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        tag: LockTag,
        mode: LockMode,
        owner: LockOwner,
        timeouts: &LockTimeouts,
    ) -> Result<LockAcquireResult, LmgrError> {
        self.acquire_extended(b, local, tag, mode, owner, Some(timeouts))
    }

    /// Models `LockAcquireExtended`; `wait` is `None` for `dontWait`.
    fn acquire_extended(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        tag: LockTag,
        mode: LockMode,
        owner: LockOwner,
        wait: Option<&LockTimeouts>,
    ) -> Result<LockAcquireResult, LmgrError> {
        // An entry exists only while it holds references (releases remove it at zero).
        if let Some(l) = local.locks.get_mut(&(tag, mode)) {
            *l.count(owner) += 1;
            return Ok(LockAcquireResult::AlreadyHeld);
        }
        let hashcode = tag.hash_code();
        let me = b.procno();

        if self.eligible(local.database, &tag, mode) {
            let rel = tag.field2;
            let group = self.fast_path.layout().group_of(rel);
            if (local.fast_path_used[group] as usize) < fastpath::FP_LOCK_SLOTS_PER_GROUP {
                let counter = FastPath::<K>::strong_partition(hashcode);
                // The counter is read under our own fpInfoLock: see the fastpath module.
                let (granted, new_slot) = self.fast_path.with_slots(b, me, |s, _| {
                    if self.fast_path.strong_count(counter) != 0 {
                        (false, false)
                    } else {
                        s.grant(group, rel, mode)
                    }
                })?;
                if granted {
                    local.fast_path_used[group] += u32::from(new_slot);
                    local.grant(tag, mode, owner, true, false);
                    return Ok(LockAcquireResult::Ok);
                }
            }
        }

        let strong_counter = self
            .conflicts_with_fast_path(&tag, mode)
            .then(|| FastPath::<K>::strong_partition(hashcode));
        if let Some(counter) = strong_counter {
            self.fast_path.begin_strong(counter);
            if let Err(e) = self.transfer_relation_locks(b, &tag, hashcode) {
                self.fast_path.end_strong(counter);
                return Err(e);
            }
        }

        let result = self.acquire_in_table(b, tag, mode, wait);
        if result == Ok(true) {
            local.grant(tag, mode, owner, false, strong_counter.is_some());
        } else if let Some(counter) = strong_counter {
            // `AbortStrongLockAcquire`.
            self.fast_path.end_strong(counter);
        }
        result.map(|granted| {
            if granted {
                LockAcquireResult::Ok
            } else {
                LockAcquireResult::NotAvailable
            }
        })
    }

    /// The main-table part of `LockAcquireExtended`: set up the lock and proclock, grant,
    /// or join the queue and sleep (`wait`), or give up (`dontWait`). Whether it was granted.
    fn acquire_in_table(
        &self,
        b: &mut Backend,
        tag: LockTag,
        mode: LockMode,
        wait: Option<&LockTimeouts>,
    ) -> Result<bool, LmgrError> {
        let me = b.procno() as u32;
        let p = self.table.partition_of(tag.known_hash_code());
        let joined = self
            .table
            .with_partition(b, p, |part| -> Result<Joined, LmgrError> {
                let lock = part.setup(tag, me, mode)?;
                if mode.conflicts() & lock.wait_mask == 0 && !lock.check_conflicts(mode, me) {
                    lock.grant(me, mode);
                    return Ok(Joined::Granted);
                }
                let joined = if wait.is_none() && !self.nowait_checks_queue {
                    Joined::WouldWait
                } else {
                    self.join_wait_queue(lock, tag, me, mode, wait.is_none())
                };
                if matches!(joined, Joined::WouldWait | Joined::EarlyDeadlock(_)) {
                    part.abandon_request(&tag, me, mode)?;
                }
                Ok(joined)
            })??;
        match joined {
            Joined::Granted => Ok(true),
            Joined::WouldWait => Ok(false),
            // 17+: a NOWAIT request that would close a cycle just is not available, as
            // `LockAcquireExtended` turns `JoinWaitQueue`'s error status into for `dontWait`.
            Joined::EarlyDeadlock(_) if wait.is_none() => Ok(false),
            Joined::EarlyDeadlock(cycle) => Err(LmgrError::Deadlock { cycle }),
            Joined::Waiting => {
                let timeouts = wait.expect("only a waiting request joins the queue");
                self.proc_sleep(b, tag, mode, timeouts).map(|()| true)
            }
        }
    }

    /// Models `FastPathTransferRelationLocks`: moves every backend's fast-path locks on the
    /// relation of `tag` into the main table. Each backend's `fpInfoLock` is held until its
    /// entries are in the table: in between, the owner could otherwise find its lock in neither
    /// place, release nothing, and leave a granted lock behind in the table (a loom model at
    /// preemption bound 3 found that in the first version). Each mode leaves the slot only
    /// once the table has it, so a full table loses nothing.
    fn transfer_relation_locks(
        &self,
        b: &mut Backend,
        tag: &LockTag,
        hashcode: u32,
    ) -> Result<(), LmgrError> {
        let p = self.table.partition_of(hashcode);
        let (db, rel) = (tag.field1, tag.field2);
        let group = self.fast_path.layout().group_of(rel);
        use pglocks_sync::mutant::{active, Mutant};
        let first = usize::from(active(Mutant::FastPathTransferSkip));
        for procno in first..self.fast_path.backends() {
            self.fast_path
                .with_slots(b, procno, |s, b| -> Result<(), LmgrError> {
                    let modes = if s.database == db {
                        s.relation_modes(group, rel)
                    } else {
                        Vec::new()
                    };
                    if modes.is_empty() {
                        return Ok(());
                    }
                    self.table.with_partition(b, p, |part| {
                        for m in modes {
                            part.setup(*tag, procno as u32, m)?.grant(procno as u32, m);
                            s.ungrant(group, rel, m);
                        }
                        Ok(())
                    })?
                })??;
        }
        Ok(())
    }

    /// Models `LockRelease`: drops one reference of `owner` to `mode` on `tag`; the last one
    /// releases the lock (from the fast path if it is still there, else from the main table).
    pub fn release(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        tag: LockTag,
        mode: LockMode,
        owner: LockOwner,
    ) -> Result<(), LmgrError> {
        let Some(l) = local.locks.get_mut(&(tag, mode)) else {
            return Err(LmgrError::NotHeld { mode });
        };
        let count = l.count(owner);
        if *count == 0 {
            return Err(LmgrError::NotHeld { mode });
        }
        *count -= 1;
        if l.n_locks() > 0 {
            return Ok(());
        }
        let l = local.locks.remove(&(tag, mode)).expect("looked up above");
        // LockRelease tries the fast path whenever the relation's group has slots in use, not
        // only for locks it took there (LockReleaseAll goes by the lock, `proclock == NULL`).
        let try_fast_path = self.eligible(local.database, &tag, mode)
            && local.fast_path_used[self.fast_path.layout().group_of(tag.field2)] > 0;
        self.release_lock(b, try_fast_path, &mut local.fast_path_used, tag, mode, &l)
    }

    /// The shared part of `LockRelease` and `LockReleaseAll`, once no reference is left: the
    /// fast path first if `try_fast_path`, then the main table.
    fn release_lock(
        &self,
        b: &mut Backend,
        try_fast_path: bool,
        fast_path_used: &mut [u32],
        tag: LockTag,
        mode: LockMode,
        l: &LocalLock,
    ) -> Result<(), LmgrError> {
        let me = b.procno();
        if try_fast_path {
            let rel = tag.field2;
            let group = self.fast_path.layout().group_of(rel);
            let (released, used) = self
                .fast_path
                .with_slots(b, me, |s, _| s.ungrant(group, rel, mode))?;
            fast_path_used[group] = used;
            if released {
                return Ok(());
            }
            // Moved into the main table by a strong locker: release it there.
        }
        let hashcode = tag.known_hash_code();
        self.release_in_table(b, tag, me as u32, mode)?;
        if l.holds_strong_count {
            self.fast_path
                .end_strong(FastPath::<K>::strong_partition(hashcode));
        }
        Ok(())
    }

    /// The main-table part of a release (`LockRefindAndRelease`): ungrants `procno`'s `mode` on
    /// `tag` if the table has it, cleans up, and wakes the waiters the release lets in.
    pub(crate) fn release_in_table(
        &self,
        b: &mut Backend,
        tag: LockTag,
        procno: u32,
        mode: LockMode,
    ) -> Result<(), LmgrError> {
        let p = self.table.partition_of(tag.known_hash_code());
        self.table.with_partition(b, p, |part| {
            let mut wakeup_needed = false;
            if let Some(lock) = part.get(&tag) {
                if lock.held_by(procno) & mode.bit() != 0 {
                    wakeup_needed = lock.ungrant(procno, mode);
                }
            }
            part.clean_up_and_wake(&tag, procno, wakeup_needed, &mut self.wake_into())
        })??;
        Ok(())
    }

    /// Models `LockReleaseAll` at transaction end: releases every transaction-owned reference,
    /// and with `session` the session's too. Returns how many locks it released.
    ///
    /// As in PostgreSQL: `VirtualXactLockTableCleanup` first; then one walk of the local
    /// table that releases the fast-path locks under a single acquisition of the backend's
    /// `fpInfoLock` (let go, as PostgreSQL does, before a lock a strong locker moved into
    /// the main table is released there), and the main table's locks after it. (PostgreSQL
    /// then takes each partition lock once for all of that partition's locks; the model takes
    /// it once per lock.)
    pub fn release_all(
        &self,
        b: &mut Backend,
        local: &mut LocalLocks,
        session: bool,
    ) -> Result<usize, LmgrError> {
        self.vxid_cleanup(b, local)?;
        let me = b.procno();
        // The table is taken out while it is walked, so that releasing can update the rest of
        // the backend's state; entries still referenced go back.
        let mut locks = std::mem::take(&mut local.locks);
        // `hash_seq_search` over the LOCALLOCK table compares every entry it walks.
        cpu::ran(Kernel::Scan, locks.len());
        let mut in_table = Vec::new();
        let mut fp_held = false;
        let mut released = 0;
        let mut result = Ok(());
        locks.retain(|&(tag, mode), l| {
            let keep = 'entry: {
                l.transaction = 0;
                if session {
                    l.session = 0;
                }
                if l.n_locks() > 0 || result.is_err() {
                    break 'entry true;
                }
                if l.via_fast_path {
                    if !fp_held {
                        if let Err(e) = self.fast_path.lock_area(b, me) {
                            result = Err(e.into());
                            break 'entry true;
                        }
                        fp_held = true;
                    }
                    let (rel, group) = (tag.field2, self.fast_path.layout().group_of(tag.field2));
                    // SAFETY: `fp_held`: this backend's fpInfoLock is held.
                    let (gone, used) = unsafe {
                        self.fast_path
                            .with_slots_held(me, |s| s.ungrant(group, rel, mode))
                    };
                    local.fast_path_used[group] = used;
                    released += 1;
                    if gone {
                        break 'entry false;
                    }
                    // Moved into the main table by a strong locker.
                    if let Err(e) = self.fast_path.unlock_area(b, me) {
                        result = Err(e.into());
                        break 'entry true;
                    }
                    fp_held = false;
                    result = self.release_lock(b, false, &mut local.fast_path_used, tag, mode, l);
                    break 'entry result.is_err();
                }
                in_table.push((tag, mode, l.clone()));
                false
            };
            if !keep {
                // `RemoveLocalLock`'s `hash_search(HASH_REMOVE)`: the key hashed and the table
                // probed, which the hasher charges (`TagHasher`); retain itself needs neither.
                let _ = BuildHasherDefault::<TagHasher>::default().hash_one((tag, mode));
            }
            keep
        });
        if fp_held {
            let unlocked = self.fast_path.unlock_area(b, me).map_err(LmgrError::from);
            result = result.and(unlocked);
        }
        for (tag, mode, l) in &in_table {
            if result.is_err() {
                locks.insert((*tag, *mode), l.clone());
                continue;
            }
            result = self.release_lock(b, false, &mut local.fast_path_used, *tag, *mode, l);
            if result.is_err() {
                locks.insert((*tag, *mode), l.clone());
            }
        }
        released += in_table.len();
        local.locks = locks;
        result?;
        Ok(released)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_proc::ProcTable;
    use LockMode::*;

    fn setup(layout: FastPathLayout) -> (ProcTable, LockManager) {
        let mut cfg = LockManagerConfig::new(3);
        cfg.fast_path = layout;
        (ProcTable::new(3), LockManager::new(cfg))
    }

    #[test]
    fn weak_locks_take_the_fast_path_and_strong_ones_move_them() {
        let (procs, lm) = setup(FastPathLayout::Slots16);
        let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
        let mut la = lm.connect(&mut a, 5).unwrap();
        let mut lb = lm.connect(&mut b, 5).unwrap();
        let t = LockTag::relation(5, 16384);
        let tx = LockOwner::Transaction;
        assert_eq!(
            lm.conditional_acquire(&mut a, &mut la, t, AccessShare, tx)
                .unwrap(),
            LockAcquireResult::Ok
        );
        assert_eq!(lm.entries_in_use(), (0, 0), "nothing in the shared table");
        assert_eq!(
            lm.conditional_acquire(&mut a, &mut la, t, AccessShare, tx)
                .unwrap(),
            LockAcquireResult::AlreadyHeld
        );
        // A strong lock moves a's entry into the table, and conflicts with it.
        assert_eq!(
            lm.conditional_acquire(&mut b, &mut lb, t, AccessExclusive, tx)
                .unwrap(),
            LockAcquireResult::NotAvailable
        );
        assert_eq!(lm.entries_in_use(), (1, 1), "a's lock, transferred");
        lm.release(&mut a, &mut la, t, AccessShare, tx).unwrap();
        lm.release(&mut a, &mut la, t, AccessShare, tx).unwrap();
        assert_eq!(lm.entries_in_use(), (0, 0));
        assert_eq!(
            lm.conditional_acquire(&mut b, &mut lb, t, AccessExclusive, tx)
                .unwrap(),
            LockAcquireResult::Ok
        );
        // While the strong lock is held, weak ones go to the table and conflict.
        assert_eq!(
            lm.conditional_acquire(&mut a, &mut la, t, AccessShare, tx)
                .unwrap(),
            LockAcquireResult::NotAvailable
        );
        assert_eq!(lm.release_all(&mut b, &mut lb, false).unwrap(), 1);
        assert_eq!(
            lm.conditional_acquire(&mut a, &mut la, t, AccessShare, tx)
                .unwrap(),
            LockAcquireResult::Ok
        );
        assert_eq!(lm.entries_in_use(), (0, 0), "fast path again");
        let e = lm.release(&mut a, &mut la, t, RowShare, tx).unwrap_err();
        assert_eq!(e.to_string(), "you don't own a lock of type RowShareLock");
    }

    #[test]
    fn no_fast_path_before_a_database_and_no_transfer_for_shared_relations() {
        let (procs, lm) = setup(FastPathLayout::Slots16);
        let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
        let tx = LockOwner::Transaction;
        // MyDatabaseId is InvalidOid until the backend is connected to a database.
        let mut la = lm.connect(&mut a, 0).unwrap();
        lm.conditional_acquire(&mut a, &mut la, LockTag::relation(0, 1262), AccessShare, tx)
            .unwrap();
        assert_eq!(
            lm.entries_in_use(),
            (1, 1),
            "in the table, not the fast path"
        );
        // A strong lock on a shared catalog (database 0) counts in no strong-lock counter.
        let mut lb = lm.connect(&mut b, 5).unwrap();
        lm.conditional_acquire(
            &mut b,
            &mut lb,
            LockTag::relation(0, 1260),
            AccessExclusive,
            tx,
        )
        .unwrap();
        assert_eq!(lm.fast_path_in_use(&mut b).unwrap(), (0, 0));
        lm.conditional_acquire(
            &mut b,
            &mut lb,
            LockTag::relation(5, 1),
            AccessExclusive,
            tx,
        )
        .unwrap();
        assert_eq!(lm.fast_path_in_use(&mut b).unwrap(), (0, 1));
        lm.release_all(&mut a, &mut la, false).unwrap();
        lm.release_all(&mut b, &mut lb, false).unwrap();
        assert_eq!(lm.entries_in_use(), (0, 0));
        assert_eq!(lm.fast_path_in_use(&mut b).unwrap(), (0, 0));
    }

    #[test]
    fn lock_release_tries_the_fast_path_whenever_its_group_has_locks() {
        let (procs, lm) = setup(FastPathLayout::Slots16);
        let mut a = procs.attach().unwrap();
        let mut la = lm.connect(&mut a, 5).unwrap();
        let tx = LockOwner::Transaction;
        for rel in 0..17 {
            lm.conditional_acquire(&mut a, &mut la, LockTag::relation(5, rel), AccessShare, tx)
                .unwrap();
        }
        assert_eq!(lm.entries_in_use(), (1, 1), "the 17th did not fit");
        a.stats.lwlock.set_enabled(true);
        let fp = pglocks_proc::tranche::tranche_id("LockFastPath");
        // Relation 16 is in the table, but 16 fast-path slots are in use: LockRelease looks
        // in them first (an fpInfoLock acquisition), then releases in the table.
        lm.release(&mut a, &mut la, LockTag::relation(5, 16), AccessShare, tx)
            .unwrap();
        assert_eq!(a.stats.lwlock.tranche(fp).unwrap().ex_acquire, 1);
        assert_eq!(lm.entries_in_use(), (0, 0));
        for rel in 0..16 {
            lm.release(&mut a, &mut la, LockTag::relation(5, rel), AccessShare, tx)
                .unwrap();
        }
        assert_eq!(a.stats.lwlock.tranche(fp).unwrap().ex_acquire, 17);
        // No slot in use: a table lock is released without looking (the strong lock's
        // acquisition visited every backend's fpInfoLock; its release takes none).
        lm.conditional_acquire(&mut a, &mut la, LockTag::relation(5, 1), Share, tx)
            .unwrap();
        let taken = a.stats.lwlock.tranche(fp).unwrap().ex_acquire;
        assert_eq!(taken, 17 + 3);
        lm.release(&mut a, &mut la, LockTag::relation(5, 1), Share, tx)
            .unwrap();
        assert_eq!(a.stats.lwlock.tranche(fp).unwrap().ex_acquire, taken);
    }

    #[test]
    fn lock_release_all_takes_the_fp_info_lock_once_for_every_fast_path_lock() {
        let (procs, lm) = setup(FastPathLayout::Slots16);
        let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
        let mut la = lm.connect(&mut a, 5).unwrap();
        let mut lb = lm.connect(&mut b, 5).unwrap();
        let tx = LockOwner::Transaction;
        for rel in 1..=4 {
            lm.conditional_acquire(&mut a, &mut la, LockTag::relation(5, rel), AccessShare, tx)
                .unwrap();
        }
        // A strong locker moves relation 2's entry into the table, and lets it go again.
        lm.conditional_acquire(&mut b, &mut lb, LockTag::relation(5, 2), Exclusive, tx)
            .unwrap();
        assert_eq!(lm.entries_in_use(), (1, 2));
        lm.release_all(&mut b, &mut lb, false).unwrap();
        a.stats.lwlock.set_enabled(true);
        assert_eq!(lm.release_all(&mut a, &mut la, false).unwrap(), 4);
        let fp = pglocks_proc::tranche::tranche_id("LockFastPath");
        // Held across the walk, let go before the moved lock's release in the table, and
        // taken again for the locks after it (the walk's order is the hash table's): at most
        // two acquisitions for four locks.
        let taken = a.stats.lwlock.tranche(fp).unwrap().ex_acquire;
        assert!((1..=2).contains(&taken), "{taken}");
        assert_eq!(lm.entries_in_use(), (0, 0));
        assert_eq!(lm.fast_path_in_use(&mut b).unwrap(), (0, 0));
        // Without a moved lock: once.
        for rel in 1..=4 {
            lm.conditional_acquire(&mut a, &mut la, LockTag::relation(5, rel), AccessShare, tx)
                .unwrap();
        }
        lm.release_all(&mut a, &mut la, false).unwrap();
        let again = a.stats.lwlock.tranche(fp).unwrap().ex_acquire;
        assert_eq!(again - taken, 4 + 1, "four grants, one release walk");
    }

    #[test]
    fn without_a_fast_path_everything_is_in_the_table() {
        let (procs, lm) = setup(FastPathLayout::None);
        let mut a = procs.attach().unwrap();
        let mut la = lm.connect(&mut a, 5).unwrap();
        let t = LockTag::relation(5, 1);
        let s = LockOwner::Session;
        lm.conditional_acquire(&mut a, &mut la, t, AccessShare, s)
            .unwrap();
        assert_eq!(lm.entries_in_use(), (1, 1));
        assert_eq!(
            lm.release_all(&mut a, &mut la, false).unwrap(),
            0,
            "session lock kept"
        );
        assert_eq!(lm.release_all(&mut a, &mut la, true).unwrap(), 1);
        assert_eq!(lm.entries_in_use(), (0, 0));
    }

    #[test]
    fn a_full_table_says_out_of_shared_memory() {
        let mut cfg = LockManagerConfig::new(1);
        cfg.max_locks_per_transaction = 2;
        cfg.fast_path = FastPathLayout::None;
        let lm: LockManager = LockManager::new(cfg);
        let procs = ProcTable::new(1);
        let mut a = procs.attach().unwrap();
        let mut la = lm.connect(&mut a, 5).unwrap();
        let tx = LockOwner::Transaction;
        for rel in 0..2 {
            lm.conditional_acquire(&mut a, &mut la, LockTag::relation(5, rel), Share, tx)
                .unwrap();
        }
        let e = lm
            .conditional_acquire(&mut a, &mut la, LockTag::relation(5, 9), Share, tx)
            .unwrap_err();
        assert!(e.to_string().starts_with("out of shared memory"), "{e}");
        assert_eq!(la.held().len(), 2);
        assert_eq!(lm.release_all(&mut a, &mut la, false).unwrap(), 2);
    }
}
