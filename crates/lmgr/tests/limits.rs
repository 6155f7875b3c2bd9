//! The lock manager's limits, each at, just below and just above it:
//! - the shared lock table: `max_locks_per_transaction × MaxBackends` lock objects and twice
//!   that many proclocks (lock.c's `NLOCKENTS`); one more is "out of shared memory" with the
//!   hint "You might need to increase max_locks_per_transaction." (`LockAcquireExtended`), and
//!   the refused request leaves nothing behind;
//! - the fast path: 16 slots per backend in 9.2–17 (`FP_LOCK_SLOTS_PER_BACKEND`), the 17th weak
//!   relation lock going to the main table, not failing; 18's groups of 16, a full group sending
//!   its relations to the main table while other groups keep their room, and at most 1024 groups
//!   (`FP_LOCK_GROUPS_PER_BACKEND_MAX`);
//! - the configuration: 1 to `MAX_BACKENDS` backends.
#![cfg(not(loom))]

use pglocks_lmgr::fastpath::{FP_LOCK_GROUPS_PER_BACKEND_MAX, FP_LOCK_SLOTS_PER_GROUP};
use pglocks_lmgr::{
    FastPathLayout, LmgrError, LocalLocks, LockAcquireResult, LockManager, LockManagerConfig,
    LockMode, LockOwner, LockTag,
};
use pglocks_proc::{Backend, ProcTable, MAX_BACKENDS};

const DB: u32 = 5;
const TX: LockOwner = LockOwner::Transaction;

fn manager(backends: usize, max_locks: usize, fast_path: FastPathLayout) -> LockManager {
    let mut cfg = LockManagerConfig::new(backends);
    cfg.max_locks_per_transaction = max_locks;
    cfg.fast_path = fast_path;
    LockManager::new(cfg)
}

fn lock(lm: &LockManager, b: &mut Backend, l: &mut LocalLocks, rel: u32, mode: LockMode) {
    let got = lm
        .conditional_acquire(b, l, LockTag::relation(DB, rel), mode, TX)
        .unwrap();
    assert_eq!(got, LockAcquireResult::Ok, "relation {rel}");
}

fn refused(lm: &LockManager, b: &mut Backend, l: &mut LocalLocks, rel: u32, mode: LockMode) {
    let e = lm
        .conditional_acquire(b, l, LockTag::relation(DB, rel), mode, TX)
        .unwrap_err();
    assert_eq!(e, LmgrError::OutOfSharedMemory);
    assert_eq!(
        e.to_string(),
        "out of shared memory (HINT: You might need to increase max_locks_per_transaction.)"
    );
}

#[test]
fn the_lock_table_holds_max_locks_per_transaction_times_max_backends_objects() {
    for (backends, max_locks) in [(1, 10), (2, 3), (4, 64)] {
        let capacity = backends * max_locks;
        let lm = manager(backends, max_locks, FastPathLayout::None);
        let procs = ProcTable::new(backends);
        let mut b = procs.attach().unwrap();
        let mut l = lm.connect(&mut b, DB).unwrap();
        // One backend may use the whole table, as in PostgreSQL (the limit is shared).
        for rel in 0..capacity as u32 - 1 {
            lock(&lm, &mut b, &mut l, rel, LockMode::Share);
        }
        assert_eq!(
            lm.entries_in_use(),
            (capacity - 1, capacity - 1),
            "just below"
        );
        lock(&lm, &mut b, &mut l, capacity as u32, LockMode::Share);
        assert_eq!(lm.entries_in_use(), (capacity, capacity), "at");
        // Just above: refused, nothing taken, the backend's locks intact.
        refused(&lm, &mut b, &mut l, 999_999, LockMode::Share);
        assert_eq!(lm.entries_in_use(), (capacity, capacity));
        assert_eq!(l.held().len(), capacity);
        // A lock already in the table needs no new object: another mode on it still fits.
        let got = lm
            .conditional_acquire(
                &mut b,
                &mut l,
                LockTag::relation(DB, 0),
                LockMode::RowShare,
                TX,
            )
            .unwrap();
        assert_eq!(got, LockAcquireResult::Ok);
        assert_eq!(lm.entries_in_use(), (capacity, capacity));
        // One released: one more fits again.
        lm.release(
            &mut b,
            &mut l,
            LockTag::relation(DB, 1),
            LockMode::Share,
            TX,
        )
        .unwrap();
        lock(&lm, &mut b, &mut l, 999_999, LockMode::Share);
        assert_eq!(lm.release_all(&mut b, &mut l, false).unwrap(), capacity + 1);
        assert_eq!(lm.entries_in_use(), (0, 0));
    }
}

#[test]
fn the_proclock_table_holds_twice_as_many() {
    // 4 backends × 1 lock each: 4 lock objects, 8 proclocks. Every backend locks the same two
    // relations, filling the proclocks while lock objects are left.
    let lm = manager(4, 1, FastPathLayout::None);
    let procs = ProcTable::new(4);
    let mut bs: Vec<Backend> = (0..4).map(|_| procs.attach().unwrap()).collect();
    let mut ls: Vec<LocalLocks> = bs.iter_mut().map(|b| lm.connect(b, DB).unwrap()).collect();
    for (i, (b, l)) in bs.iter_mut().zip(ls.iter_mut()).enumerate() {
        lock(&lm, b, l, 1, LockMode::Share);
        if i < 3 {
            lock(&lm, b, l, 2, LockMode::Share);
        }
    }
    assert_eq!(lm.entries_in_use(), (2, 7), "just below");
    lock(&lm, &mut bs[3], &mut ls[3], 2, LockMode::Share);
    assert_eq!(lm.entries_in_use(), (2, 8), "at");
    // A third relation: a lock object is free but its proclock is not; the object is taken back.
    refused(&lm, &mut bs[0], &mut ls[0], 3, LockMode::Share);
    assert_eq!(lm.entries_in_use(), (2, 8));
    // A backend's new mode on a lock it holds reuses its proclock.
    lock(&lm, &mut bs[0], &mut ls[0], 1, LockMode::AccessShare);
    for (b, l) in bs.iter_mut().zip(ls.iter_mut()) {
        lm.release_all(b, l, false).unwrap();
    }
    assert_eq!(lm.entries_in_use(), (0, 0));
}

#[test]
fn sixteen_fast_path_slots_then_the_main_table() {
    assert_eq!(FP_LOCK_SLOTS_PER_GROUP, 16);
    // A main table of two lock objects: fast-path locks take none of it.
    let lm = manager(1, 2, FastPathLayout::Slots16);
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let mut l = lm.connect(&mut b, DB).unwrap();
    for rel in 0..15 {
        lock(&lm, &mut b, &mut l, rel, LockMode::AccessShare);
    }
    assert_eq!(lm.entries_in_use(), (0, 0), "15 slots used");
    // Just below: another weak mode on a relation that has a slot shares the slot.
    lock(&lm, &mut b, &mut l, 0, LockMode::RowShare);
    assert_eq!(lm.entries_in_use(), (0, 0));
    lock(&lm, &mut b, &mut l, 15, LockMode::AccessShare);
    assert_eq!(lm.entries_in_use(), (0, 0), "all 16 slots used");
    // At: with every slot used lock.c does not look into the slots at all
    // (`FastPathLocalUseCount < FP_LOCK_SLOTS_PER_BACKEND` fails), so even a mode on a slotted
    // relation goes to the main table; so does a 17th relation. Granted, not refused.
    lock(&lm, &mut b, &mut l, 0, LockMode::RowExclusive);
    assert_eq!(lm.entries_in_use(), (1, 1));
    lock(&lm, &mut b, &mut l, 16, LockMode::AccessShare);
    assert_eq!(lm.entries_in_use(), (2, 2));
    // Above: the main table is full too.
    refused(&lm, &mut b, &mut l, 17, LockMode::AccessShare);
    // A freed slot is used again.
    lm.release(
        &mut b,
        &mut l,
        LockTag::relation(DB, 3),
        LockMode::AccessShare,
        TX,
    )
    .unwrap();
    lock(&lm, &mut b, &mut l, 17, LockMode::AccessShare);
    assert_eq!(lm.entries_in_use(), (2, 2));
    let held = l.held().len();
    assert_eq!(held, 19);
    assert_eq!(lm.release_all(&mut b, &mut l, false).unwrap(), held);
    assert_eq!(lm.entries_in_use(), (0, 0));
}

#[test]
fn pg18_a_full_group_overflows_alone() {
    let layout = FastPathLayout::Groups(4);
    let lm = manager(1, 1, layout);
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let mut l = lm.connect(&mut b, DB).unwrap();
    let in_group = |g: usize| (16384u32..).filter(move |&r| layout.group_of(r) == g);
    let group0: Vec<u32> = in_group(0).take(17).collect();
    for &rel in &group0[..16] {
        lock(&lm, &mut b, &mut l, rel, LockMode::AccessShare);
    }
    assert_eq!(lm.entries_in_use(), (0, 0), "group 0 full");
    // Group 1 still has its 16 slots.
    for rel in in_group(1).take(16) {
        lock(&lm, &mut b, &mut l, rel, LockMode::AccessShare);
    }
    assert_eq!(lm.entries_in_use(), (0, 0));
    // The 17th relation of group 0 goes to the main table.
    lock(&lm, &mut b, &mut l, group0[16], LockMode::AccessShare);
    assert_eq!(lm.entries_in_use(), (1, 1));
    assert_eq!(lm.release_all(&mut b, &mut l, false).unwrap(), 33);
}

#[test]
fn pg18_has_at_most_1024_groups() {
    let max = FP_LOCK_GROUPS_PER_BACKEND_MAX;
    assert_eq!(max, 1024);
    // max_locks_per_transaction 16384 asks for exactly 1024 groups; more is capped.
    assert_eq!(FastPathLayout::pg18_groups(16 * max / 2 + 1), max);
    assert_eq!(FastPathLayout::pg18_groups(16 * max / 2), max / 2);
    assert_eq!(FastPathLayout::pg18_groups(16 * max), max);
    assert_eq!(FastPathLayout::pg18_groups(16 * max + 1), max);
    assert_eq!(FastPathLayout::pg18_groups(usize::MAX / 4), max);
    assert_eq!(FastPathLayout::Groups(max - 1).groups(), max - 1);
    assert_eq!(FastPathLayout::Groups(max).groups(), max);
    assert_eq!(FastPathLayout::Groups(max + 1).groups(), max);
}

#[test]
fn the_configuration_takes_up_to_max_backends() {
    for ok in [1, MAX_BACKENDS - 1, MAX_BACKENDS] {
        assert_eq!(LockManagerConfig::new(ok).validate(), Ok(()));
    }
    for bad in [0, MAX_BACKENDS + 1] {
        let e = LockManagerConfig::new(bad).validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("invalid lock manager setting: max_backends must be 1 to 262143, not {bad}")
        );
        assert!(
            LockManager::<pglocks_lwlock::AtomicLwLock>::try_new(LockManagerConfig::new(bad))
                .is_err()
        );
    }
    let mut huge = LockManagerConfig::new(MAX_BACKENDS);
    huge.max_locks_per_transaction = usize::MAX / MAX_BACKENDS;
    let e = huge.validate().unwrap_err().to_string();
    assert!(
        e.contains("requested shared memory size overflows size_t"),
        "{e}"
    );
}
