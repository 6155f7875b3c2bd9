//! The `lmgr` part: heavyweight relation locks in random modes through the lock manager,
//! `LockAcquireExtended` and `LockReleaseAll` (lock.c), with 9.2's fast path for the weak
//! modes (`FastPathGrantRelationLock`) and the strong modes that move them to the main table
//! (`FastPathTransferRelationLocks`), and the deadlock checks between the random lockers
//! (deadlock.c's `DeadLockCheck`, after a short `deadlock_timeout`).
//!
//! Every step is a transaction that locks one to three of four relations, mostly in the weak
//! modes a query takes and now and then in a strong one, and counts itself among the
//! relation's holders of that mode. Checked at every grant: no other backend holds a mode that
//! conflicts with it (lock.c's `LockConflicts` table); at the end: the lock table and the
//! fast-path slots and strong-lock counts are empty. Deadlocks are counted as its events.

use super::{check, lwlock_wait, Failure, NewPart, Part, Refused, Setup, Step, Tally, DATABASE};
use pglocks_lmgr::{
    LmgrError, LocalLocks, LockManager, LockMode, LockOwner, LockTag, LockTimeouts,
};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU32, Ordering::SeqCst};
use rand::rngs::SmallRng;
use rand::RngExt;
use std::sync::Arc;
use std::time::Duration;

/// Relations the part locks.
const RELATIONS: u32 = 4;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        let mut cfg = setup.settings.lock_manager_config(setup.threads + 1);
        cfg.max_locks_per_transaction = cfg.max_locks_per_transaction.max(16);
        Ok(Arc::new(Lmgr::<K> {
            procs: setup.procs(),
            lm: LockManager::new(cfg),
            held: (0..RELATIONS).map(|_| Default::default()).collect(),
            deadlock_timeouts: LockTimeouts {
                deadlock_timeout: Duration::from_millis(50),
                lock_timeout: None,
            },
        }))
    }
}

/// Lock modes by number (1..=8), for the holder counts.
fn mode_of(n: usize) -> LockMode {
    LockMode::from_number(n as u8).expect("1..=8 are lock modes")
}

/// A lock manager and who holds what in it.
struct Lmgr<K: RawLwLock> {
    procs: ProcTable,
    lm: LockManager<K>,
    /// Holders per relation and mode number.
    held: Vec<[AtomicU32; 9]>,
    /// A short deadlock_timeout, so that deadlocks between the random lockers end quickly.
    deadlock_timeouts: LockTimeouts,
}

impl<K: RawLwLock> Part for Lmgr<K> {
    fn events_name(&self) -> &'static str {
        "deadlocks"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn waiting_for(&self, procno: usize) -> String {
        lmgr_wait(&self.procs, &self.lm, procno)
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut local: Option<LocalLocks> = None;
        let mut mine: Vec<(usize, usize)> = Vec::new();
        Box::new(move |b, t| {
            let local = match &mut local {
                Some(l) => l,
                None => local.insert(self.lm.connect(b, DATABASE)?),
            };
            self.lm.start_transaction(b, local)?;
            mine.clear();
            for _ in 0..rng.random_range(1..=3) {
                let rel = rng.random_range(0..RELATIONS) as usize;
                // Mostly the weak modes a query takes (fast path from 9.2), now and then a
                // strong one that must move them to the main table.
                let mode = if rng.random_ratio(1, 10) {
                    rng.random_range(4..=8)
                } else {
                    rng.random_range(1..=3)
                };
                let tag = LockTag::relation(DATABASE, 16_384 + rel as u32);
                let owner = LockOwner::Transaction;
                match self
                    .lm
                    .acquire(b, local, tag, mode_of(mode), owner, &self.deadlock_timeouts)
                {
                    Ok(_) => {}
                    Err(LmgrError::Deadlock { .. }) => {
                        t.events += 1;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
                if mine.contains(&(rel, mode)) {
                    continue;
                }
                self.held[rel][mode].fetch_add(1, SeqCst);
                mine.push((rel, mode));
                for (other, count) in self.held[rel].iter().enumerate().skip(1) {
                    if !mode_of(mode).conflicts_with(mode_of(other)) {
                        continue;
                    }
                    let others = count.load(SeqCst)
                        - mine.iter().filter(|&&m| m == (rel, other)).count() as u32;
                    check(t, others == 0, || {
                        format!(
                            "relation {rel}: {:?} granted while {others} other backend(s) hold {:?}",
                            mode_of(mode),
                            mode_of(other)
                        )
                    })?;
                }
            }
            for &(rel, mode) in &mine {
                self.held[rel][mode].fetch_sub(1, SeqCst);
            }
            self.lm.release_all(b, local, false)?;
            t.ops += 1;
            Ok(())
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        lock_tables_empty(&self.lm, b, t)
    }
}

/// What backend `procno` waits for in a lock manager: an LWLock queue, or a lock's queue.
pub(super) fn lmgr_wait<K: RawLwLock>(
    procs: &ProcTable,
    lm: &LockManager<K>,
    procno: usize,
) -> String {
    format!(
        "{}; in the lock manager's queue: {}",
        lwlock_wait(procs, procno),
        lm.is_waiting(procno)
    )
}

/// The end state of a lock manager: no lock or proclock in the table, no fast-path slot, no
/// strong-lock count.
pub(super) fn lock_tables_empty<K: RawLwLock>(
    lm: &LockManager<K>,
    b: &mut Backend,
    t: &mut Tally,
) -> Result<(), Failure> {
    let table = lm.entries_in_use();
    check(t, table == (0, 0), || {
        format!("lock table not empty: {table:?} (locks, proclocks)")
    })?;
    let fast = lm.fast_path_in_use(b)?;
    check(t, fast == (0, 0), || {
        format!("fast-path state not empty: {fast:?} (slots, strong counts)")
    })
}
