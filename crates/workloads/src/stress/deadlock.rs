//! The `deadlock` part: deadlock detection, `DeadLockCheck` (deadlock.c) run by a waiter whose
//! `deadlock_timeout` expired in `ProcSleep` (proc.c's `CheckDeadLock`).
//!
//! Its threads work in pairs. Every round, each of the two locks its own relation in
//! `AccessExclusiveLock`, waits until the other holds its own, then asks for the other's: every
//! round is a deadlock of two. Checked every round: exactly one of the two got "deadlock
//! detected" (the other was granted once the victim released); at the end: the lock table and
//! the fast-path state are empty. Deadlocks are counted as its events; an odd thread out
//! has no partner and only keeps the lock manager busy.

use super::lmgr::{lmgr_wait, lock_tables_empty};
use super::{check, Failure, NewPart, Part, Refused, Setup, Step, Tally, DATABASE};
use pglocks_lmgr::{
    LmgrError, LocalLocks, LockManager, LockMode, LockOwner, LockTag, LockTimeouts,
};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use rand::rngs::SmallRng;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        Ok(Arc::new(Deadlock::<K> {
            procs: setup.procs(),
            lm: LockManager::new(setup.settings.lock_manager_config(setup.threads + 1)),
            pairs: (0..setup.threads / 2 + 1)
                .map(|_| Pair::default())
                .collect(),
            stop: Arc::clone(setup.stop),
        }))
    }
}

/// Pairs of backends that deadlock on purpose, round after round.
struct Deadlock<K: RawLwLock> {
    procs: ProcTable,
    lm: LockManager<K>,
    /// Per pair: arrivals at the round's barriers, and the round's deadlock errors.
    pairs: Vec<Pair>,
    stop: Arc<AtomicBool>,
}

#[derive(Default)]
struct Pair {
    arrived: AtomicU64,
    errors: AtomicU32,
}

impl<K: RawLwLock> Deadlock<K> {
    /// The pair's `k`-th meeting point (counted from 1 by each of the two): waits until both
    /// have arrived (false when the run stops first).
    fn barrier(&self, pair: &Pair, k: &mut u64) -> bool {
        *k += 1;
        pair.arrived.fetch_add(1, SeqCst);
        while pair.arrived.load(SeqCst) < 2 * *k {
            if self.stop.load(Relaxed) {
                return false;
            }
            pglocks_sync::thread::yield_now();
        }
        true
    }
}

impl<K: RawLwLock> Part for Deadlock<K> {
    fn events_name(&self) -> &'static str {
        "deadlocks"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn waiting_for(&self, procno: usize) -> String {
        lmgr_wait(&self.procs, &self.lm, procno)
    }
    fn step(self: Arc<Self>, i: usize, n: usize, _: SmallRng) -> Step {
        let mut local: Option<LocalLocks> = None;
        let mut meetings = 0u64;
        // An odd thread out has no partner: it only keeps the lock manager busy.
        let pair = (i / 2 < n / 2).then_some(i / 2);
        Box::new(move |b, t| {
            let local = match &mut local {
                Some(l) => l,
                None => local.insert(self.lm.connect(b, DATABASE)?),
            };
            let Some(p) = pair else {
                pglocks_sync::time::sleep(Duration::from_millis(1));
                return Ok(());
            };
            // Each takes its own relation, then (once both hold theirs) the other's.
            let (mine, theirs) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
            let rel = |r: u32| LockTag::relation(DATABASE, 20_000 + 2 * p as u32 + r);
            let timeouts = LockTimeouts {
                deadlock_timeout: Duration::from_millis(1),
                lock_timeout: None,
            };
            let pair = &self.pairs[p];
            let x = LockMode::AccessExclusive;
            let owner = LockOwner::Transaction;
            self.lm.start_transaction(b, local)?;
            self.lm.acquire(b, local, rel(mine), x, owner, &timeouts)?;
            if !self.barrier(pair, &mut meetings) {
                self.lm.release_all(b, local, false)?;
                return Ok(());
            }
            match self.lm.acquire(b, local, rel(theirs), x, owner, &timeouts) {
                Ok(_) => {}
                Err(LmgrError::Deadlock { .. }) => {
                    pair.errors.fetch_add(1, SeqCst);
                    t.events += 1;
                }
                Err(e) => return Err(e.into()),
            }
            self.lm.release_all(b, local, false)?;
            if !self.barrier(pair, &mut meetings) {
                return Ok(());
            }
            t.ops += 1;
            // Both have finished the round: exactly one of them was the victim. The even one
            // checks and resets the count, the odd one waits for that at a third meeting.
            let result = if i % 2 == 0 {
                let errors = pair.errors.swap(0, SeqCst);
                check(t, errors == 1, || {
                    format!(
                        "pair {p}: a deadlock between two backends reported to {errors} of them"
                    )
                })
            } else {
                Ok(())
            };
            self.barrier(pair, &mut meetings);
            result
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        lock_tables_empty(&self.lm, b, t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::stress;
    use super::super::tests::config;

    #[test]
    fn every_round_has_one_victim() {
        let mut cfg = config("pg18", 2, 400);
        cfg.parts = vec!["deadlock".into()];
        let report = stress(&cfg).unwrap();
        assert!(report.passed(), "{report:?}");
        let deadlocks = &report.parts[0];
        assert!(deadlocks.ops > 0, "{deadlocks:?}");
        // One victim per round, which both threads of the pair count (the last round may be
        // cut short after its deadlock).
        let rounds = deadlocks.ops / 2;
        assert!(
            (rounds..=rounds + 1).contains(&deadlocks.events),
            "{deadlocks:?}"
        );
    }
}
