//! The 9.6+ LWLock (and the hand-off lock, which shares its state word) under real threads, its
//! errors, and a proptest state machine of several backends (conditional acquire / release /
//! release-all over several locks) against a sequential reference model, for each PostgreSQL
//! implementation, the fetch-and-add prototype, the hand-off lock, the parking_lot adapter and
//! the NUMA-aware reader-writer locks.
#![cfg(not(loom))]

use pglocks_lwlock::{
    AtomicLwLock, CohortRwLock, FetchAddLwLock, HandoffLwLock, LwLockError, LwLockMode,
    MutexWaitListLwLock, NoPadding, ParkingLotLwLock, PartitionedTranche, Pg18Layout, Pg96Layout,
    RawLwLock, ShflRwLock, SpinlockProtectedLwLock, StateLayout, MAX_SIMUL_LWLOCKS,
};
use pglocks_proc::ProcTable;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

#[test]
fn releasing_a_lock_not_held_names_it() {
    let procs = ProcTable::new(2);
    let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
    let lock: AtomicLwLock = AtomicLwLock::new("ProcArray");
    let e = lock.release(&mut a).unwrap_err();
    assert_eq!(e, LwLockError::NotHeld { lock: "ProcArray" });
    assert_eq!(e.to_string(), "lock ProcArray is not held");
    lock.acquire(&mut a, LwLockMode::Exclusive).unwrap();
    // Held by a, not by b.
    assert!(lock.release(&mut b).is_err());
    lock.release(&mut a).unwrap();
}

#[test]
fn too_many_lwlocks_taken() {
    let procs = ProcTable::new(1);
    let mut a = procs.attach().unwrap();
    let locks: Vec<AtomicLwLock> = (0..=MAX_SIMUL_LWLOCKS)
        .map(|_| AtomicLwLock::new("t"))
        .collect();
    for l in &locks[..MAX_SIMUL_LWLOCKS] {
        assert!(l.acquire(&mut a, LwLockMode::Shared).unwrap());
    }
    let e = locks[MAX_SIMUL_LWLOCKS]
        .acquire(&mut a, LwLockMode::Shared)
        .unwrap_err();
    assert!(e.to_string().contains("too many LWLocks taken"), "{e}");
    let e = locks[MAX_SIMUL_LWLOCKS]
        .conditional_acquire(&mut a, LwLockMode::Shared)
        .unwrap_err();
    assert_eq!(
        e,
        LwLockError::TooManyLwLocks {
            max: MAX_SIMUL_LWLOCKS
        }
    );
    for l in locks[..MAX_SIMUL_LWLOCKS].iter().rev() {
        l.release(&mut a).unwrap();
    }
    assert!(a.held_lwlocks.is_empty());
}

/// The LWLocks whose state word is in 9.6's layout, so that tests can check the word itself.
trait Pg96StateWord: RawLwLock {
    fn state_word(&self) -> u32;
}

impl Pg96StateWord for AtomicLwLock<Pg96Layout> {
    fn state_word(&self) -> u32 {
        self.state()
    }
}

impl Pg96StateWord for HandoffLwLock {
    fn state_word(&self) -> u32 {
        self.state()
    }
}

/// Four backends, mixed modes: writers keep two counters equal under the exclusive lock,
/// readers check them under the shared lock; more threads than cores, so many sleep.
#[test]
fn readers_and_writers_under_threads() {
    free_and_unqueued(&*readers_and_writers::<AtomicLwLock<Pg96Layout>>());
}

/// The same with the hand-off lock, whose sleepers wake up holding the lock.
#[test]
fn handoff_readers_and_writers_under_threads() {
    free_and_unqueued(&*readers_and_writers::<HandoffLwLock>());
}

/// The same with the fetch-and-add shared acquisition (a prototype): readers' refused counts,
/// taken back, leave nothing behind, and nobody sleeps on a free lock.
#[test]
fn fetch_add_readers_and_writers_under_threads() {
    let lock = readers_and_writers::<FetchAddLwLock>();
    let held_or_queued = Pg18Layout::LOCK_MASK | Pg18Layout::HAS_WAITERS;
    assert_eq!(
        lock.state() & held_or_queued,
        0,
        "free at the end, nobody queued"
    );
}

/// The same with the NUMA-aware reader-writer locks (on one node: the threads are not placed).
#[test]
fn numa_rw_locks_readers_and_writers_under_threads() {
    assert!(free_to_a_writer(&*readers_and_writers::<CohortRwLock>()));
    assert!(free_to_a_writer(&*readers_and_writers::<ShflRwLock>()));
}

fn free_and_unqueued<K: Pg96StateWord>(lock: &K) {
    let held_or_queued = Pg96Layout::LOCK_MASK | Pg96Layout::HAS_WAITERS;
    assert_eq!(
        lock.state_word() & held_or_queued,
        0,
        "free at the end, nobody queued"
    );
}

/// A backend can take `lock` exclusively at once (and gives it back).
fn free_to_a_writer<K: RawLwLock>(lock: &K) -> bool {
    let procs = ProcTable::new(1);
    let mut me = procs.attach().unwrap();
    let free = lock
        .conditional_acquire(&mut me, LwLockMode::Exclusive)
        .unwrap();
    if free {
        lock.release(&mut me).unwrap();
    }
    free
}

fn readers_and_writers<K: RawLwLock>() -> Arc<K> {
    const THREADS: usize = 4;
    const ITERS: u64 = 20_000;
    let procs = ProcTable::new(THREADS);
    let lock = Arc::new(K::new("BufferMapping"));
    let (x, y) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    // All start together, so that they meet on the lock rather than run one after another.
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, x, y, start, mut me) = (
                lock.clone(),
                x.clone(),
                y.clone(),
                start.clone(),
                procs.attach().unwrap(),
            );
            std::thread::spawn(move || {
                start.wait();
                let mut slept = 0u64;
                for i in 0..ITERS {
                    if (i + t as u64) % 3 == 0 {
                        slept += u64::from(!lock.acquire(&mut me, LwLockMode::Exclusive).unwrap());
                        // Relaxed on purpose: only the lock orders these.
                        x.store(x.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                        y.store(y.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    } else {
                        slept += u64::from(!lock.acquire(&mut me, LwLockMode::Shared).unwrap());
                        assert_eq!(x.load(Ordering::Relaxed), y.load(Ordering::Relaxed));
                    }
                    lock.release(&mut me).unwrap();
                }
                assert!(me.held_lwlocks.is_empty());
                slept
            })
        })
        .collect();
    let _slept: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let writes: u64 = (0..THREADS as u64)
        .map(|t| (0..ITERS).filter(|i| (i + t) % 3 == 0).count() as u64)
        .sum();
    assert_eq!(x.load(Ordering::Relaxed), writes);
    lock
}

#[derive(Debug, Clone)]
enum Op {
    Conditional {
        backend: usize,
        lock: usize,
        exclusive: bool,
    },
    Release {
        backend: usize,
        lock: usize,
    },
    ReleaseAll {
        backend: usize,
    },
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            4 => (0usize..3, 0usize..LOCKS, any::<bool>()).prop_map(|(backend, lock, exclusive)| {
                Op::Conditional { backend, lock, exclusive }
            }),
            3 => (0usize..3, 0usize..LOCKS).prop_map(|(backend, lock)| Op::Release { backend, lock }),
            1 => (0usize..3).prop_map(|backend| Op::ReleaseAll { backend }),
        ],
        0..60,
    )
}

const LOCKS: usize = 3;

/// Runs `ops` on a tranche of `LOCKS` locks of type `K` and three backends, against a sequential
/// reference model: each backend's held locks, in acquisition order. Conditional acquire succeeds
/// exactly when the model allows; release fails exactly when the backend holds nothing of that
/// lock; release-all releases exactly the backend's locks. After every step a fourth backend
/// probes each lock (conditional exclusive and shared acquisition, released at once): it gets
/// what the model says is free.
fn follows_the_model<K: RawLwLock>(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let procs = ProcTable::new(4);
    let mut backends: Vec<_> = (0..3).map(|_| procs.attach().unwrap()).collect();
    let mut probe = procs.attach().unwrap();
    let tranche: PartitionedTranche<K, NoPadding> = PartitionedTranche::new("model", LOCKS);
    let mut held: Vec<Vec<(usize, bool)>> = vec![vec![]; 3];
    for op in ops {
        match op {
            Op::Conditional {
                backend,
                lock,
                exclusive,
            } => {
                let holders = held.iter().flatten().filter(|h| h.0 == lock);
                let allowed = if exclusive {
                    holders.count() == 0
                } else {
                    !holders.clone().any(|h| h.1)
                };
                let mode = if exclusive {
                    LwLockMode::Exclusive
                } else {
                    LwLockMode::Shared
                };
                let got = tranche
                    .lock(lock)
                    .conditional_acquire(&mut backends[backend], mode)
                    .unwrap();
                prop_assert_eq!(got, allowed);
                if got {
                    held[backend].push((lock, exclusive));
                }
            }
            Op::Release { backend, lock } => {
                let r = tranche.lock(lock).release(&mut backends[backend]);
                match held[backend].iter().rposition(|h| h.0 == lock) {
                    Some(i) => {
                        prop_assert!(r.is_ok());
                        held[backend].remove(i);
                    }
                    None => prop_assert_eq!(r, Err(LwLockError::NotHeld { lock: "model" })),
                }
            }
            Op::ReleaseAll { backend } => {
                let n = tranche.release_all(&mut backends[backend]).unwrap();
                prop_assert_eq!(n, held[backend].len());
                held[backend].clear();
            }
        }
        for (b, h) in held.iter().enumerate() {
            prop_assert_eq!(backends[b].held_lwlocks.len(), h.len());
        }
        for lock in 0..LOCKS {
            let holders: Vec<bool> = held
                .iter()
                .flatten()
                .filter(|h| h.0 == lock)
                .map(|h| h.1)
                .collect();
            for (mode, free) in [
                (LwLockMode::Exclusive, holders.is_empty()),
                (LwLockMode::Shared, !holders.contains(&true)),
            ] {
                let got = tranche
                    .lock(lock)
                    .conditional_acquire(&mut probe, mode)
                    .unwrap();
                prop_assert_eq!(got, free, "lock {} in {:?}", lock, mode);
                if got {
                    tranche.lock(lock).release(&mut probe).unwrap();
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn atomic_lwlock_follows_the_model(ops in ops()) {
        follows_the_model::<AtomicLwLock>(ops)?;
    }

    #[test]
    fn atomic_lwlock_of_95_follows_the_model(ops in ops()) {
        follows_the_model::<MutexWaitListLwLock>(ops)?;
    }

    #[test]
    fn spinlock_protected_lwlock_follows_the_model(ops in ops()) {
        follows_the_model::<SpinlockProtectedLwLock>(ops)?;
    }

    #[test]
    fn parking_lot_adapter_follows_the_model(ops in ops()) {
        follows_the_model::<ParkingLotLwLock>(ops)?;
    }

    /// Without waiters, the hand-off lock grants exactly what PostgreSQL's does.
    #[test]
    fn handoff_lwlock_follows_the_model(ops in ops()) {
        follows_the_model::<HandoffLwLock>(ops)?;
    }

    #[test]
    fn fetch_add_lwlock_follows_the_model(ops in ops()) {
        follows_the_model::<FetchAddLwLock>(ops)?;
    }

    #[test]
    fn cohort_rw_lock_follows_the_model(ops in ops()) {
        follows_the_model::<CohortRwLock>(ops)?;
    }

    #[test]
    fn shfl_rw_lock_follows_the_model(ops in ops()) {
        follows_the_model::<ShflRwLock>(ops)?;
    }
}
