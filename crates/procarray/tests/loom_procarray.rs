//! loom models of the ProcArray:
//! - 9.6's group XID clear: with ProcArrayLock busy, two committers go through the group list;
//!   the leader clears every member's xid, no member returns before its xid is cleared, and no
//!   wakeup is lost (a lost one leaves a member asleep: loom reports the deadlock);
//! - a snapshot against concurrent xid assignment and commits: an xid below the snapshot's
//!   `xmax` that it does not see running has committed (it was published under XidGenLock
//!   before a later xid could complete, and its commit was recorded before it left the
//!   ProcArray), in each layout.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-procarray --test loom_procarray --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_lwlock::{AtomicLwLock, LwLockMode, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_procarray::{ProcArray, ProcArrayConfig, Snapshot, SnapshotLayout};

type Lw = AtomicLwLock<Pg96Layout>;

/// A ProcArray of `n` backends, all registered, with `n` attached handles.
fn array(
    n: usize,
    layout: SnapshotLayout,
    group_clear: bool,
) -> (Arc<ProcArray<Lw>>, Vec<pglocks_proc::Backend>) {
    let pa = Arc::new(ProcArray::new(&ProcArrayConfig::new(n, layout, group_clear)).unwrap());
    let procs = ProcTable::new(n);
    let mut bs: Vec<_> = (0..n).map(|_| procs.attach().unwrap()).collect();
    for p in 0..n {
        pa.add(&mut bs[0], p).unwrap();
    }
    (pa, bs)
}

/// 9.6's group clear in `layout`: with ProcArrayLock held, two committers go through the list.
fn group_clear_clears_every_member_and_wakes_it(layout: SnapshotLayout) {
    pglocks_sync::loom_builder(1).check(move || {
        let (pa, mut bs) = array(3, layout, true);
        let mut holder = bs.remove(0);
        let mut snap = Snapshot::new();
        let xids: Vec<u32> = bs
            .iter_mut()
            .map(|b| pa.assign_xid(b, None).unwrap())
            .collect();
        // Hold ProcArrayLock so that the committers may fail their conditional acquire.
        pa.proc_array_lock()
            .acquire(&mut holder, LwLockMode::Exclusive)
            .unwrap();
        let committers: Vec<_> = bs
            .into_iter()
            .zip(xids.iter().copied())
            .map(|(mut b, xid)| {
                let pa = Arc::clone(&pa);
                loom::thread::spawn(move || {
                    pa.commit_tree(xid, &[]).unwrap();
                    pa.end_transaction(&mut b, xid).unwrap();
                    // Cleared by the time the call returns, leader or member.
                    assert_eq!(pa.my_xid(b.procno()), 0, "returned with its xid still set");
                    xid
                })
            })
            .collect();
        pa.proc_array_lock().release(&mut holder).unwrap();
        for t in committers {
            t.join().unwrap();
        }
        pa.get_snapshot_data(&mut holder, &mut snap).unwrap();
        assert_eq!(snap.xmax, xids.iter().max().unwrap() + 1);
        assert!(snap.xip.is_empty());
    });
}

#[test]
fn group_clear_in_the_pgxact_array() {
    group_clear_clears_every_member_and_wakes_it(SnapshotLayout::Pgxact);
}

#[test]
fn group_clear_in_the_dense_arrays() {
    group_clear_clears_every_member_and_wakes_it(SnapshotLayout::Dense);
}

/// Backend 0 takes xid X and commits it; backend 1 meanwhile takes xid Y, commits it, then takes
/// a snapshot and checks every xid below its `xmax` against it — X included when Y > X.
fn snapshot_sees_no_finished_uncommitted_xid(layout: SnapshotLayout, bound: usize) {
    pglocks_sync::loom_builder(bound).check(move || {
        let (pa, mut bs) = array(2, layout, false);
        let mut b1 = bs.pop().unwrap();
        let mut b0 = bs.pop().unwrap();
        let p1 = Arc::clone(&pa);
        let taker = loom::thread::spawn(move || {
            let y = p1.assign_xid(&mut b1, None).unwrap();
            p1.commit_tree(y, &[]).unwrap();
            p1.end_transaction(&mut b1, y).unwrap();
            let mut snap = Snapshot::new();
            p1.get_snapshot_data(&mut b1, &mut snap).unwrap();
            for xid in 3..snap.xmax {
                let running = p1.xid_in_mvcc_snapshot(xid, &snap).unwrap();
                let committed = p1.transaction_id_did_commit(xid).unwrap();
                assert!(
                    running || committed,
                    "xid {xid} below xmax {} neither running nor committed",
                    snap.xmax
                );
            }
        });
        let x = pa.assign_xid(&mut b0, None).unwrap();
        pa.commit_tree(x, &[]).unwrap();
        pa.end_transaction(&mut b0, x).unwrap();
        taker.join().unwrap();
    });
}

#[test]
fn a_snapshot_sees_no_finished_uncommitted_xid_proc_scan() {
    snapshot_sees_no_finished_uncommitted_xid(SnapshotLayout::ProcScan, 3);
}

#[test]
fn a_snapshot_sees_no_finished_uncommitted_xid_pgxact() {
    snapshot_sees_no_finished_uncommitted_xid(SnapshotLayout::Pgxact, 3);
}

#[test]
fn a_snapshot_sees_no_finished_uncommitted_xid_dense() {
    snapshot_sees_no_finished_uncommitted_xid(SnapshotLayout::Dense, 3);
}
