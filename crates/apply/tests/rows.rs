//! The subscriber's row waits: a change to a row another running transaction changed waits for
//! that transaction in the lock manager (an update or delete first takes the row's tuple lock,
//! an insert waits in the unique index without one), then applies to the row as that
//! transaction left it — committed or rolled back.
#![cfg(not(loom))]

use pglocks_apply::subscriber::Subscriber;
use pglocks_apply::{Change, Row};
use pglocks_lmgr::{
    LockAcquireResult, LockManager, LockManagerConfig, LockMode, LockOwner, LockTag, LockTimeouts,
};
use pglocks_lwlock::AtomicLwLock;
use pglocks_proc::ProcTable;
use std::sync::Arc;
use std::time::Duration;

const DB: u32 = 5;
const REL: u32 = 16_500;

fn subscriber() -> (Arc<Subscriber<AtomicLwLock>>, ProcTable) {
    let lm = LockManager::new(LockManagerConfig::new(4));
    (
        Arc::new(Subscriber::new(lm, LockTimeouts::default(), 0)),
        ProcTable::new(4),
    )
}

fn update(key: i64, value: i64) -> Change {
    Change::Update(Row { key, value })
}

fn insert(key: i64, value: i64) -> Change {
    Change::Insert(Row { key, value })
}

/// A backend that, in a thread, applies `change` in one transaction and commits it as remote
/// transaction `xid`.
fn in_a_thread(
    sub: &Arc<Subscriber<AtomicLwLock>>,
    procs: &ProcTable,
    change: Change,
    xid: u32,
) -> std::thread::JoinHandle<()> {
    let (sub, procs) = (Arc::clone(sub), procs.clone());
    std::thread::spawn(move || {
        let mut b = procs.attach().unwrap();
        let mut local = sub.lock_manager().connect(&mut b, DB).unwrap();
        let mut t = sub.begin(&mut b, &mut local).unwrap();
        sub.apply(&mut b, &mut local, &mut t, REL, change).unwrap();
        sub.commit(&mut b, &mut local, t, xid).unwrap();
    })
}

/// Whether another backend could take tuple (0, `offset`) of the table in `mode` now.
fn tuple_free(
    sub: &Subscriber<AtomicLwLock>,
    procs: &ProcTable,
    offset: u16,
    mode: LockMode,
) -> bool {
    let mut c = procs.attach().unwrap();
    let lm = sub.lock_manager();
    let mut local = lm.connect(&mut c, DB).unwrap();
    let tag = LockTag::tuple(DB, REL, 0, offset);
    let got = lm
        .conditional_acquire(&mut c, &mut local, tag, mode, LockOwner::Transaction)
        .unwrap();
    lm.release_all(&mut c, &mut local, false).unwrap();
    got == LockAcquireResult::Ok
}

/// Waits until backend `procno` sleeps in a lock queue.
fn until_waiting(sub: &Subscriber<AtomicLwLock>, procno: usize) {
    while !sub.lock_manager().is_waiting(procno) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn an_update_waits_for_the_updater_holding_the_tuple_lock_and_applies_after_its_commit_or_abort() {
    for commit in [true, false] {
        let (sub, procs) = subscriber();
        let mut a = procs.attach().unwrap();
        let mut a_local = sub.lock_manager().connect(&mut a, DB).unwrap();
        // Key 7 committed as 1, then updated to 2 by a transaction still running.
        let mut t0 = sub.begin(&mut a, &mut a_local).unwrap();
        sub.apply(&mut a, &mut a_local, &mut t0, REL, insert(7, 1))
            .unwrap();
        sub.commit(&mut a, &mut a_local, t0, 100).unwrap();
        let mut t1 = sub.begin(&mut a, &mut a_local).unwrap();
        sub.apply(&mut a, &mut a_local, &mut t1, REL, update(7, 2))
            .unwrap();
        let waiter = in_a_thread(&sub, &procs, update(7, 3), 102);
        until_waiting(&sub, 1);
        // The waiter holds key 7's tuple lock while it sleeps on the updater's xid.
        assert!(!tuple_free(&sub, &procs, 8, LockMode::Exclusive));
        if commit {
            sub.commit(&mut a, &mut a_local, t1, 101).unwrap();
        } else {
            sub.abort(&mut a, &mut a_local, t1).unwrap();
        }
        waiter.join().unwrap();
        // Applied on top of what the first transaction left: the update finds the row either way.
        assert_eq!(sub.rows().get(&(REL, 7)), Some(&3));
        assert!(sub.conflicts().is_empty());
        let order: Vec<u32> = sub.commits().iter().map(|c| c.0).collect();
        assert_eq!(
            order,
            if commit {
                vec![100, 101, 102]
            } else {
                vec![100, 102]
            }
        );
        assert_eq!(sub.lock_manager().entries_in_use(), (0, 0));
    }
}

#[test]
fn an_insert_of_a_key_inserted_by_a_running_transaction_waits_then_conflicts_or_applies() {
    for commit in [true, false] {
        let (sub, procs) = subscriber();
        let mut a = procs.attach().unwrap();
        let mut a_local = sub.lock_manager().connect(&mut a, DB).unwrap();
        let mut t1 = sub.begin(&mut a, &mut a_local).unwrap();
        sub.apply(&mut a, &mut a_local, &mut t1, REL, insert(9, 1))
            .unwrap();
        let waiter = in_a_thread(&sub, &procs, insert(9, 2), 202);
        until_waiting(&sub, 1);
        // No tuple lock for an insert: the row's tag is free.
        assert!(tuple_free(&sub, &procs, 10, LockMode::AccessExclusive));
        if commit {
            sub.commit(&mut a, &mut a_local, t1, 201).unwrap();
        } else {
            sub.abort(&mut a, &mut a_local, t1).unwrap();
        }
        waiter.join().unwrap();
        let (value, conflicts) = if commit { (1, 1) } else { (2, 0) };
        assert_eq!(sub.rows().get(&(REL, 9)), Some(&value));
        assert_eq!(sub.conflicts().len(), conflicts);
        assert_eq!(sub.lock_manager().entries_in_use(), (0, 0));
    }
}
