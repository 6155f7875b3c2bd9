//! loom model of the fast-path race (lmgr/README, "Fast Path Locking"): a weak relation lock
//! granted through a backend's fast-path slots and a strong lock taken concurrently by another
//! backend are never both held. Each holder writes a cell while it holds its lock; loom reports
//! a data race if the two holds ever overlap.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-lmgr --test loom_lmgr --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_lmgr::{
    FastPathLayout, LockAcquireResult, LockManager, LockManagerConfig, LockMode, LockOwner,
    LockTag, LockTimeouts,
};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::ProcTable;

struct Shared {
    lm: LockManager,
    cell: UnsafeCell<u32>,
}

// SAFETY: `cell` is only written by a backend holding a lock on the relation that conflicts
// with the other's (the property under test; loom checks it).
unsafe impl Sync for Shared {}

fn take_and_touch(s: &Shared, procs: &ProcTable, mode: LockMode) {
    let mut b = procs.attach().unwrap();
    let mut local = s.lm.connect(&mut b, 5).unwrap();
    let tag = LockTag::relation(5, 16384);
    let got =
        s.lm.conditional_acquire(&mut b, &mut local, tag, mode, LockOwner::Transaction)
            .unwrap();
    if got == LockAcquireResult::Ok {
        // SAFETY: see `Shared`.
        s.cell.with_mut(|p| unsafe { *p += 1 });
        s.lm.release(&mut b, &mut local, tag, mode, LockOwner::Transaction)
            .unwrap();
    }
}

#[test]
fn fast_path_weak_lock_and_strong_lock_never_overlap() {
    let mut builder = loom::model::Builder::new();
    // Bound 3: a transfer that let go of the owner's fpInfoLock before its entries were in the
    // table needed three preemptions to show (the owner releasing in between).
    builder.preemption_bound = builder.preemption_bound.or(Some(3));
    builder.check(|| {
        let procs = ProcTable::new(2);
        let mut cfg = LockManagerConfig::new(2);
        cfg.fast_path = FastPathLayout::Slots16;
        let s = Arc::new(Shared {
            lm: LockManager::new(cfg),
            cell: UnsafeCell::new(0),
        });
        let (s2, p2) = (Arc::clone(&s), procs.clone());
        let t = loom::thread::spawn(move || take_and_touch(&s2, &p2, LockMode::AccessShare));
        take_and_touch(&s, &procs, LockMode::AccessExclusive);
        t.join().unwrap();
        assert_eq!(s.lm.entries_in_use(), (0, 0));
    });
}

/// Two backends taking the same AccessExclusiveLock with waiting: the second sleeps in the
/// queue and the first one's release must wake it (no lost wake-up: a lost one deadlocks the
/// model, which loom reports), and the two holds never overlap.
#[test]
fn a_waiter_is_always_woken_and_holds_never_overlap() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(2));
    builder.check(|| {
        let procs = ProcTable::new(2);
        let mut cfg = LockManagerConfig::new(2);
        cfg.fast_path = FastPathLayout::None;
        cfg.partitions = 1;
        let s = Arc::new(Shared {
            lm: LockManager::new(cfg),
            cell: UnsafeCell::new(0),
        });
        let lock_and_touch = |s: &Shared, procs: &ProcTable| {
            let mut b = procs.attach().unwrap();
            let mut local = s.lm.connect(&mut b, 5).unwrap();
            let tag = LockTag::relation(5, 16384);
            let got =
                s.lm.acquire(
                    &mut b,
                    &mut local,
                    tag,
                    LockMode::AccessExclusive,
                    LockOwner::Transaction,
                    &LockTimeouts::default(),
                )
                .unwrap();
            assert_eq!(got, LockAcquireResult::Ok);
            // SAFETY: see `Shared`.
            s.cell.with_mut(|p| unsafe { *p += 1 });
            assert_eq!(s.lm.release_all(&mut b, &mut local, false).unwrap(), 1);
        };
        let (s2, p2) = (Arc::clone(&s), procs.clone());
        let t = loom::thread::spawn(move || lock_and_touch(&s2, &p2));
        lock_and_touch(&s, &procs);
        t.join().unwrap();
        assert_eq!(s.lm.entries_in_use(), (0, 0));
        assert_eq!(s.cell.with(|p| unsafe { *p }), 2);
    });
}

/// The lazy virtual-transaction lock (9.2+): one backend ends its transaction while another
/// waits for it, moving the lock into the table on the owner's behalf. Whatever the
/// interleaving, the waiter returns (no lost wake-up), and nothing is left in the table.
#[test]
fn waiting_for_a_lazy_vxid_lock_never_hangs_or_leaks() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(2));
    builder.check(|| {
        let procs = ProcTable::new(2);
        let mut cfg = LockManagerConfig::new(2);
        cfg.fast_path = FastPathLayout::Slots16;
        cfg.partitions = 1;
        let lm = Arc::new(LockManager::<pglocks_lwlock::AtomicLwLock>::new(cfg));
        let mut owner = procs.attach().unwrap();
        let mut owner_local = lm.connect(&mut owner, 5).unwrap();
        let vxid = lm.start_transaction(&mut owner, &mut owner_local).unwrap();
        let (lm2, p2) = (Arc::clone(&lm), procs.clone());
        let t = loom::thread::spawn(move || {
            let mut b = p2.attach().unwrap();
            let mut local = lm2.connect(&mut b, 5).unwrap();
            let ended = lm2
                .virtual_xact_lock(&mut b, &mut local, vxid, Some(&LockTimeouts::default()))
                .unwrap();
            assert!(ended);
        });
        lm.release_all(&mut owner, &mut owner_local, false).unwrap();
        t.join().unwrap();
        assert_eq!(lm.entries_in_use(), (0, 0));
    });
}

/// `XactLockTableWait`: a backend waits for a transaction that holds its xid lock and ends
/// (clears its ProcArray entry, then releases its locks, as `CommitTransaction` orders them).
/// Whatever the interleaving, the waiter returns (no lost wake-up) and only once the transaction
/// no longer runs, and nothing is left in the table.
#[test]
fn xact_lock_table_wait_returns_only_after_the_transaction_ended() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(2));
    builder.check(|| {
        use pglocks_sync::atomic::{AtomicBool, Ordering::*};
        let procs = ProcTable::new(2);
        let mut cfg = LockManagerConfig::new(2);
        cfg.partitions = 1;
        let lm = Arc::new(LockManager::<pglocks_lwlock::AtomicLwLock>::new(cfg));
        let running = Arc::new(AtomicBool::new(true));
        let mut owner = procs.attach().unwrap();
        let mut owner_local = lm.connect(&mut owner, 5).unwrap();
        lm.xact_lock_table_insert(&mut owner, &mut owner_local, 700)
            .unwrap();
        let (lm2, p2, r2) = (Arc::clone(&lm), procs.clone(), Arc::clone(&running));
        let t = loom::thread::spawn(move || {
            let mut b = p2.attach().unwrap();
            let mut local = lm2.connect(&mut b, 5).unwrap();
            let timeouts = LockTimeouts::default();
            let still = |_: &mut _, _| Ok::<_, pglocks_lmgr::LmgrError>(r2.load(Acquire));
            lm2.xact_lock_table_wait(&mut b, &mut local, 700, &timeouts, still, Ok)
                .unwrap();
            assert!(
                !r2.load(Acquire),
                "returned while the transaction still ran"
            );
        });
        running.store(false, Release);
        lm.release_all(&mut owner, &mut owner_local, false).unwrap();
        t.join().unwrap();
        assert_eq!(lm.entries_in_use(), (0, 0));
    });
}
