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
use pglocks_proc::ProcTable;
use pglocks_sync::cell::UnsafeCell;

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

/// The shared loom builder at preemption bound `bound` (unless `LOOM_MAX_PREEMPTIONS` says
/// otherwise), with loom's own branch limit (`LOOM_MAX_BRANCHES`, else 1000), which these
/// models' paths stay within.
fn builder(bound: usize) -> loom::model::Builder {
    let mut b = pglocks_sync::loom_builder(bound);
    b.max_branches = loom::model::Builder::new().max_branches;
    b
}

#[test]
fn fast_path_weak_lock_and_strong_lock_never_overlap() {
    // Bound 3: a transfer that let go of the owner's fpInfoLock before its entries were in the
    // table needed three preemptions to show (the owner releasing in between).
    builder(3).check(|| {
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
    builder(2).check(|| {
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
    builder(2).check(|| {
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
    builder(2).check(|| {
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

/// A session lock of parallel apply on object `objid` of remote transaction 900 of
/// subscription 16600: taken (`take`) or released.
fn apply_lock(
    lm: &LockManager<pglocks_lwlock::AtomicLwLock>,
    b: &mut pglocks_proc::Backend,
    local: &mut pglocks_lmgr::LocalLocks,
    objid: u16,
    mode: LockMode,
    take: bool,
) {
    let (sub, xid) = (16_600, 900);
    if take {
        let t = LockTimeouts::default();
        lm.lock_apply_transaction_for_session(b, local, sub, xid, objid, mode, &t)
            .unwrap();
    } else {
        lm.unlock_apply_transaction_for_session(b, local, sub, xid, objid, mode)
            .unwrap();
    }
}

/// Parallel apply's handshake (applyparallelworker.c) on the lock manager, for a transaction
/// streamed in two chunks: the leader holds the *stream lock* `AccessExclusive` from before it
/// sends a chunk's `STREAM STOP` until it has sent the next `STREAM START` (and at commit until
/// it has sent `STREAM COMMIT`); the worker, at a `STREAM STOP` with no other chunk pending,
/// waits on it `AccessShare`; the worker holds the *transaction lock* `AccessExclusive` from its
/// first chunk to its commit, and the leader waits on it `AccessShare` after sending the commit.
/// The queue is modelled by flags the worker spins on. Whatever the interleaving: nothing
/// hangs, the worker never waits past a chunk that was sent, the leader returns from its wait
/// only after the worker finished, and the tables end empty.
#[test]
fn parallel_apply_stream_and_transaction_locks_keep_commit_order() {
    use pglocks_sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
    use LockMode::{AccessExclusive, AccessShare};
    const STREAM: u16 = 0;
    const XACT: u16 = 1;
    pglocks_sync::loom_builder(2).check(|| {
        let procs = ProcTable::new(2);
        let mut cfg = LockManagerConfig::new(2);
        cfg.partitions = 1;
        let lm = Arc::new(LockManager::<pglocks_lwlock::AtomicLwLock>::new(cfg));
        // Messages in the queue, and the shared state (ParallelApplyWorkerShared).
        let flags = Arc::new([
            AtomicBool::new(false), // 0: chunk 2's STREAM START sent
            AtomicBool::new(false), // 1: chunk 2's STREAM STOP sent
            AtomicBool::new(false), // 2: STREAM COMMIT sent
            AtomicBool::new(false), // 3: PARALLEL_TRANS_STARTED
            AtomicBool::new(false), // 4: PARALLEL_TRANS_FINISHED
        ]);
        // pending_stream_count: chunk 1 is sent.
        let pending = Arc::new(AtomicU32::new(1));
        let mut la = procs.attach().unwrap();
        let mut la_local = lm.connect(&mut la, 5).unwrap();
        // Chunk 1's STREAM STOP: locked before it is sent.
        apply_lock(&lm, &mut la, &mut la_local, STREAM, AccessExclusive, true);

        let (lm2, p2, f2, pending2) = (
            Arc::clone(&lm),
            procs.clone(),
            Arc::clone(&flags),
            Arc::clone(&pending),
        );
        let worker = loom::thread::spawn(move || {
            let mut b = p2.attach().unwrap();
            let mut local = lm2.connect(&mut b, 5).unwrap();
            let wait_for = |i: usize| {
                while !f2[i].load(Acquire) {
                    loom::thread::yield_now();
                }
            };
            // First STREAM START: the transaction lock, then "started".
            apply_lock(&lm2, &mut b, &mut local, XACT, AccessExclusive, true);
            f2[3].store(true, Release);
            // pa_decr_and_wait_stream_block at each STREAM STOP.
            let stop = |b: &mut _, local: &mut _| {
                if pending2.fetch_sub(1, AcqRel) == 1 {
                    apply_lock(&lm2, b, local, STREAM, AccessShare, true);
                    apply_lock(&lm2, b, local, STREAM, AccessShare, false);
                }
            };
            stop(&mut b, &mut local);
            assert!(f2[0].load(Acquire), "waited past a chunk not yet sent");
            wait_for(1);
            stop(&mut b, &mut local);
            wait_for(2);
            // STREAM COMMIT: finished before the lock goes.
            f2[4].store(true, Release);
            apply_lock(&lm2, &mut b, &mut local, XACT, AccessExclusive, false);
            lm2.release_all(&mut b, &mut local, true).unwrap();
        });

        // Chunk 2: STREAM START sent, the stream lock released, the chunk counted.
        flags[0].store(true, Release);
        apply_lock(&lm, &mut la, &mut la_local, STREAM, AccessExclusive, false);
        pending.fetch_add(1, AcqRel);
        // Its STREAM STOP.
        apply_lock(&lm, &mut la, &mut la_local, STREAM, AccessExclusive, true);
        flags[1].store(true, Release);
        // STREAM COMMIT, then pa_xact_finish.
        flags[2].store(true, Release);
        apply_lock(&lm, &mut la, &mut la_local, STREAM, AccessExclusive, false);
        while !flags[3].load(Acquire) {
            loom::thread::yield_now();
        }
        apply_lock(&lm, &mut la, &mut la_local, XACT, AccessShare, true);
        assert!(
            flags[4].load(Acquire),
            "the leader went on before the worker finished"
        );
        apply_lock(&lm, &mut la, &mut la_local, XACT, AccessShare, false);
        worker.join().unwrap();
        lm.release_all(&mut la, &mut la_local, true).unwrap();
        assert_eq!(lm.entries_in_use(), (0, 0));
    });
}
