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
use pglocks_sync::ProcTable;
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
        sub.apply(
            &mut a,
            &mut a_local,
            &mut t0,
            REL,
            Change::Insert(Row { key: 7, value: 1 }),
        )
        .unwrap();
        sub.commit(&mut a, &mut a_local, t0, 100).unwrap();
        let mut t1 = sub.begin(&mut a, &mut a_local).unwrap();
        sub.apply(&mut a, &mut a_local, &mut t1, REL, update(7, 2))
            .unwrap();

        let (sub2, procs2) = (Arc::clone(&sub), procs.clone());
        let waiter = std::thread::spawn(move || {
            let mut b = procs2.attach().unwrap();
            let mut local = sub2.lock_manager().connect(&mut b, DB).unwrap();
            let mut t2 = sub2.begin(&mut b, &mut local).unwrap();
            sub2.apply(&mut b, &mut local, &mut t2, REL, update(7, 3))
                .unwrap();
            sub2.commit(&mut b, &mut local, t2, 102).unwrap();
        });
        until_waiting(&sub, 1);
        // The waiter holds key 7's tuple lock while it sleeps on the updater's xid.
        let tuple = LockTag::tuple(DB, REL, 0, 8);
        let mut c = procs.attach().unwrap();
        let mut c_local = sub.lock_manager().connect(&mut c, DB).unwrap();
        let got = sub
            .lock_manager()
            .conditional_acquire(
                &mut c,
                &mut c_local,
                tuple,
                LockMode::Exclusive,
                LockOwner::Transaction,
            )
            .unwrap();
        assert_eq!(got, LockAcquireResult::NotAvailable);
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
        sub.apply(
            &mut a,
            &mut a_local,
            &mut t1,
            REL,
            Change::Insert(Row { key: 9, value: 1 }),
        )
        .unwrap();
        let (sub2, procs2) = (Arc::clone(&sub), procs.clone());
        let waiter = std::thread::spawn(move || {
            let mut b = procs2.attach().unwrap();
            let mut local = sub2.lock_manager().connect(&mut b, DB).unwrap();
            let mut t2 = sub2.begin(&mut b, &mut local).unwrap();
            sub2.apply(
                &mut b,
                &mut local,
                &mut t2,
                REL,
                Change::Insert(Row { key: 9, value: 2 }),
            )
            .unwrap();
            sub2.commit(&mut b, &mut local, t2, 202).unwrap();
        });
        until_waiting(&sub, 1);
        // No tuple lock for an insert: the row's tag is free.
        let mut c = procs.attach().unwrap();
        let mut c_local = sub.lock_manager().connect(&mut c, DB).unwrap();
        let tuple = LockTag::tuple(DB, REL, 0, 10);
        let got = sub
            .lock_manager()
            .conditional_acquire(
                &mut c,
                &mut c_local,
                tuple,
                LockMode::AccessExclusive,
                LockOwner::Transaction,
            )
            .unwrap();
        assert_eq!(got, LockAcquireResult::Ok);
        sub.lock_manager()
            .release_all(&mut c, &mut c_local, false)
            .unwrap();
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
