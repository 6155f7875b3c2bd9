//! The lock table on a simulated many-core machine: the `LOCK` and `PROCLOCK` entries a
//! relation lock goes through are charged as the data they are, so their lines move between
//! the CPUs that share the lock; and the hash tables' headers are placed in the shared-memory
//! map, so up to 9.5 the one free list's line moves between CPUs that lock different objects.

use pglocks_lmgr::{FastPathLayout, LockManager, LockManagerConfig, LockMode, LockOwner, LockTag};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, SimThread};
use pglocks_sync::atomic::{AtomicUsize, Ordering};

/// Two backends without a fast path (as 9.1: every relation lock goes through the shared
/// table), on two packages of the simulated Westmere, taking turns (`rounds` each) at taking
/// and giving back a `RowShareLock`. With `shared`, both hold the same relation's
/// `AccessShareLock` for the session and lock that relation: every turn updates the same `LOCK`
/// entry's counts from the other CPU. Without, each locks a relation of its own: every turn
/// makes and removes a `LOCK` and a `PROCLOCK` entry, through the tables' free lists
/// (`freelists` of them).
fn taking_turns(rounds: usize, shared: bool, freelists: usize) -> Outcome {
    let procs = ProcTable::new(2);
    let lm: LockManager = LockManager::new(LockManagerConfig {
        fast_path: FastPathLayout::None,
        hash_freelists: freelists,
        ..LockManagerConfig::new(2)
    });
    let turn = AtomicUsize::new(0);
    let team = SimThread::team(&[0, 10], |me| {
        let (lm, procs, turn) = (&lm, &procs, &turn);
        move || {
            let mut b = procs.attach().unwrap();
            let mut local = lm.connect(&mut b, 5).unwrap();
            let tag = LockTag::relation(5, 16384 + if shared { 0 } else { me as u32 });
            let lock = |b: &mut _, local: &mut _, mode, owner| {
                lm.acquire(b, local, tag, mode, owner, &Default::default())
                    .unwrap();
            };
            if shared {
                lock(
                    &mut b,
                    &mut local,
                    LockMode::AccessShare,
                    LockOwner::Session,
                );
            }
            for round in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * round + me {
                    pglocks_sync::hint::spin_wait();
                }
                lock(
                    &mut b,
                    &mut local,
                    LockMode::RowShare,
                    LockOwner::Transaction,
                );
                lm.release(
                    &mut b,
                    &mut local,
                    tag,
                    LockMode::RowShare,
                    LockOwner::Transaction,
                )
                .unwrap();
                turn.fetch_add(1, Ordering::Release);
            }
        }
    });
    pglocks_sim::run_tallied("westmere-80", team)
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "needs the simulator's build (--cfg pglocks_sim)"
)]
fn lock_entries_and_free_lists_move_between_the_cpus_that_use_them() {
    let rounds = 40;
    let out = taking_turns(rounds, true, 32);
    let of = |name: &str| out.transfers_of(name);
    // Each turn updates the entry's request and grant counts (two lines of its element) on
    // the other CPU's copy.
    let lock_entries = of("LOCK hash entries");
    assert!(
        lock_entries >= 2 * 2 * rounds as u64,
        "{lock_entries} transfers of LOCK entries in {} turns: {:?}",
        2 * rounds,
        out.by_structure
    );
    // The bucket is only read: after the first turns both CPUs keep a copy.
    assert!(of("LOCK hash buckets") <= 4, "{:?}", out.by_structure);

    // Up to 9.5 each table has one free list, at the head of its HASHHDR: a turn on a
    // relation of one's own takes an element from it and gives it back, on the line the other
    // CPU wrote in its turn (and whose masks both read at every search).
    let own = taking_turns(rounds, false, 1);
    for header in ["LOCK hash header", "PROCLOCK hash header"] {
        let n = own.transfers_of(header);
        assert!(
            n >= 2 * rounds as u64,
            "{n} transfers of {header} in {} turns: {:?}",
            2 * rounds,
            own.by_structure
        );
    }
}
