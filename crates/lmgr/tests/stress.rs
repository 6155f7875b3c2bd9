//! Threads taking random table locks in random order, so that deadlocks happen on purpose: every
//! deadlock must be reported (a missed one would hang the test: each thread's progress is
//! watched), exclusive holds never overlap, and the tables are empty at the end.
#![cfg(not(loom))]

use pglocks_lmgr::{
    FastPathLayout, LmgrError, LockManager, LockManagerConfig, LockMode, LockOwner, LockTag,
    LockTimeouts,
};
use pglocks_proc::ProcTable;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

const THREADS: usize = 4;
const RELATIONS: u32 = 3;
const ROUNDS: usize = 300;

fn run(layout: FastPathLayout) -> usize {
    let mut cfg = LockManagerConfig::new(THREADS);
    cfg.fast_path = layout;
    let lm: Arc<LockManager> = Arc::new(LockManager::new(cfg));
    let procs = ProcTable::new(THREADS);
    // Per relation: +1000 per exclusive holder, +1 per shared one.
    let holders: Arc<Vec<AtomicI32>> =
        Arc::new((0..RELATIONS).map(|_| AtomicI32::new(0)).collect());
    let deadlocks = Arc::new(AtomicUsize::new(0));
    let (done_tx, done) = mpsc::channel();
    for t in 0..THREADS {
        let (lm, procs, holders, deadlocks, done_tx) = (
            Arc::clone(&lm),
            procs.clone(),
            Arc::clone(&holders),
            Arc::clone(&deadlocks),
            done_tx.clone(),
        );
        std::thread::spawn(move || {
            let mut b = procs.attach().unwrap();
            let mut local = lm.connect(&mut b, 5).unwrap();
            let mut rng = rand::rngs::SmallRng::seed_from_u64(t as u64);
            let timeouts = LockTimeouts {
                deadlock_timeout: Duration::from_millis(1 + t as u64),
                lock_timeout: None,
            };
            for _ in 0..ROUNDS {
                let mut held: Vec<(u32, i32)> = Vec::new();
                for _ in 0..2 {
                    let rel = rng.random_range(0..RELATIONS);
                    let (mode, weight) = if rng.random_bool(0.5) {
                        (LockMode::AccessExclusive, 1000)
                    } else {
                        (LockMode::AccessShare, 1)
                    };
                    let tag = LockTag::relation(5, 16384 + rel);
                    match lm.acquire(
                        &mut b,
                        &mut local,
                        tag,
                        mode,
                        LockOwner::Transaction,
                        &timeouts,
                    ) {
                        Ok(_) => {
                            // Hold it a moment, so that the threads' locking overlaps.
                            std::thread::sleep(Duration::from_micros(50));
                            if held.iter().all(|&(r, _)| r != rel) {
                                let now = holders[rel as usize].fetch_add(weight, SeqCst) + weight;
                                assert!(
                                    now <= 1000,
                                    "relation {rel}: an exclusive hold overlaps another ({now})"
                                );
                                held.push((rel, weight));
                            } else if weight == 1000 {
                                // An upgrade: count it as exclusive from now on.
                                let i = held.iter().position(|&(r, _)| r == rel).unwrap();
                                let old = held[i].1;
                                if old != 1000 {
                                    let now = holders[rel as usize].fetch_add(1000 - old, SeqCst)
                                        + 1000
                                        - old;
                                    assert_eq!(now, 1000, "relation {rel}: upgrade overlaps");
                                    held[i].1 = 1000;
                                }
                            }
                        }
                        Err(LmgrError::Deadlock { .. }) => {
                            deadlocks.fetch_add(1, SeqCst);
                            break;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                for (rel, w) in held {
                    holders[rel as usize].fetch_sub(w, SeqCst);
                }
                lm.release_all(&mut b, &mut local, false).unwrap();
            }
            done_tx.send(()).unwrap();
        });
    }
    for _ in 0..THREADS {
        done.recv_timeout(Duration::from_secs(120))
            .expect("a backend stopped making progress: an unreported deadlock or a lost wake-up");
    }
    assert_eq!(lm.entries_in_use(), (0, 0), "{layout:?}: tables not empty");
    deadlocks.load(SeqCst)
}

#[test]
fn random_locking_reports_every_deadlock_and_leaves_the_tables_empty() {
    for layout in [
        FastPathLayout::None,
        FastPathLayout::Slots16,
        FastPathLayout::Groups(4),
    ] {
        let deadlocks = run(layout);
        assert!(
            deadlocks > 0,
            "{layout:?}: the workload should deadlock now and then"
        );
        eprintln!("{layout:?}: {deadlocks} deadlocks reported");
    }
}
