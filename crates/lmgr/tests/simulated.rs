//! The lock table on a simulated many-core machine: the `LOCK` and `PROCLOCK` entries a
//! relation lock goes through are charged as the data they are, so their lines move between
//! the CPUs that share the lock.

use pglocks_lmgr::{FastPathLayout, LockManager, LockManagerConfig, LockMode, LockOwner, LockTag};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, Placement, Profile, SimThread};
use pglocks_sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Two backends of 9.1 (no fast path: every relation lock goes through the shared table), on
/// two packages of the simulated Westmere, both holding a relation's `AccessShareLock` for the
/// session, then taking turns (`rounds` each) at taking and giving back its `RowShareLock`:
/// every turn updates the same `LOCK` entry's counts from the other CPU.
fn taking_turns(rounds: usize) -> Outcome {
    let profile = Profile::find("westmere-80").unwrap();
    let procs = ProcTable::new(2);
    let lm: LockManager = LockManager::new(LockManagerConfig {
        fast_path: FastPathLayout::None,
        ..LockManagerConfig::new(2)
    });
    let tag = LockTag::relation(5, 16384);
    let turn = AtomicUsize::new(0);
    let team = (0..2)
        .map(|me| SimThread {
            placement: Placement::Cpu(me * 10),
            body: Box::new({
                let (lm, procs, turn) = (&lm, &procs, &turn);
                move || {
                    let mut b = procs.attach().unwrap();
                    let mut local = lm.connect(&mut b, 5).unwrap();
                    let lock = |b: &mut _, local: &mut _, mode, owner| {
                        lm.acquire(b, local, tag, mode, owner, &Default::default())
                            .unwrap();
                    };
                    lock(
                        &mut b,
                        &mut local,
                        LockMode::AccessShare,
                        LockOwner::Session,
                    );
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
            }) as Box<dyn FnOnce() + '_>,
        })
        .collect();
    pglocks_sim::run(&profile, team, Duration::from_secs(10)).unwrap()
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "needs the simulator's build (--cfg pglocks_sim)"
)]
fn a_lock_entry_shared_by_two_cpus_moves_between_them_at_every_turn() {
    // The hot-lines tally adds transfers up by structure (the variable is read when a
    // simulation starts; this file's only test sets it).
    std::env::set_var(pglocks_sim::hot::VARIABLE, "1");
    let rounds = 40;
    let out = taking_turns(rounds);
    let of = |name: &str| {
        out.by_structure
            .iter()
            .find(|s| s.name == name)
            .map_or(0, |s| s.transfers)
    };
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
}
