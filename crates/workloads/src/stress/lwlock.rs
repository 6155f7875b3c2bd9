//! The `lwlock` part: the preset's LWLock in shared and exclusive mode, `LWLockAcquire` and
//! `LWLockRelease` (lwlock.c), with two-lock acquisitions in a fixed order (lwlock.c detects no
//! deadlocks: code that holds several LWLocks takes them in one order, as lock.c's
//! `GetLockStatusData` takes the partition locks).
//!
//! Every step takes one of three locks, or it and the next one, each in a random mode (a
//! quarter exclusive), and counts itself among the lock's shared or exclusive holders. Checked
//! at every acquisition: no exclusive holder beside any other holder; at the end: a counter
//! bumped by a plain load and store under the first lock held exclusively equals the
//! exclusive acquisitions of it.

use super::{check, Failure, NewPart, Part, RacyCounter, Refused, Setup, Step, Tally};
use pglocks_lwlock::{LwLockMode, RawLwLock};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use pglocks_sync::CachePadded;
use rand::rngs::SmallRng;
use rand::RngExt;
use std::sync::Arc;

/// LWLocks under test; the first one also guards `counter`.
const LWLOCKS: usize = 3;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        Ok(Arc::new(Lw::<K> {
            procs: setup.procs(),
            locks: (0..LWLOCKS)
                .map(|_| CachePadded::new(K::new("stress")))
                .collect(),
            shared: (0..LWLOCKS).map(|_| AtomicU32::new(0)).collect(),
            exclusive: (0..LWLOCKS).map(|_| AtomicU32::new(0)).collect(),
            counter: RacyCounter::default(),
            exclusive_ops: AtomicU64::new(0),
        }))
    }
}

/// The locks, their holders by mode, and the counter the first one guards.
struct Lw<K: RawLwLock> {
    procs: ProcTable,
    locks: Vec<CachePadded<K>>,
    shared: Vec<AtomicU32>,
    exclusive: Vec<AtomicU32>,
    counter: RacyCounter,
    exclusive_ops: AtomicU64,
}

impl<K: RawLwLock> Lw<K> {
    /// Takes lock `l` in `mode` and checks who else holds it.
    fn enter(
        &self,
        b: &mut Backend,
        t: &mut Tally,
        l: usize,
        mode: LwLockMode,
    ) -> Result<(), Failure> {
        self.locks[l].acquire(b, mode)?;
        let (sh, ex) = match mode {
            LwLockMode::Exclusive => (self.shared[l].load(SeqCst), {
                self.exclusive[l].fetch_add(1, SeqCst) + 1
            }),
            _ => {
                self.shared[l].fetch_add(1, SeqCst);
                (0, self.exclusive[l].load(SeqCst))
            }
        };
        let ok = match mode {
            LwLockMode::Exclusive => sh == 0 && ex == 1,
            _ => ex == 0,
        };
        check(t, ok, || {
            format!("LWLock {l} held in {mode:?} beside {sh} shared and {ex} exclusive holders")
        })
    }

    fn leave(&self, b: &mut Backend, l: usize, mode: LwLockMode) -> Result<(), Failure> {
        match mode {
            LwLockMode::Exclusive => self.exclusive[l].fetch_sub(1, SeqCst),
            _ => self.shared[l].fetch_sub(1, SeqCst),
        };
        self.locks[l].release(b)?;
        Ok(())
    }
}

impl<K: RawLwLock> Part for Lw<K> {
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        Box::new(move |b, t| {
            let mode = |rng: &mut SmallRng| {
                if rng.random_ratio(1, 4) {
                    LwLockMode::Exclusive
                } else {
                    LwLockMode::Shared
                }
            };
            // One lock, or two in index order (PostgreSQL's rule against LWLock deadlocks).
            let first = rng.random_range(0..LWLOCKS);
            let (m1, m2) = (mode(&mut rng), mode(&mut rng));
            self.enter(b, t, first, m1)?;
            let second = (first + 1 < LWLOCKS && rng.random_bool(0.3)).then_some(first + 1);
            if let Some(s) = second {
                self.enter(b, t, s, m2)?;
            }
            if first == 0 && m1 == LwLockMode::Exclusive {
                self.counter.bump();
                self.exclusive_ops.fetch_add(1, Relaxed);
            }
            if let Some(s) = second {
                self.leave(b, s, m2)?;
            }
            self.leave(b, first, m1)?;
            t.ops += 1;
            Ok(())
        })
    }
    fn finish(&self, _: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let (n, want) = (self.counter.get(), self.exclusive_ops.load(SeqCst));
        check(t, n == want, || {
            format!("LWLock-guarded counter {n} after {want} exclusive increments")
        })
    }
}
