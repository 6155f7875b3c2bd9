//! Snapshots taken concurrently with commits are consistent, in each layout (with and without
//! the group clear, beside idle registered backends). Writers stamp, from one global clock, when
//! each xid was assigned, when its commit started and when its end returned; readers stamp each
//! snapshot before and after `GetSnapshotData`, then test the xids near its `xmax`. Afterwards:
//! - an xid a snapshot sees as committed started committing before the snapshot was taken;
//! - an xid whose end returned before the snapshot started is not running for it;
//! - an xid assigned before the snapshot started whose commit had not started when it was
//!   taken is running for it;
//! - an xid a snapshot does not see running has committed (no xid is seen finished but not
//!   committed: the writers never abort).
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_procarray::{ProcArray, ProcArrayConfig, Snapshot, SnapshotLayout};
use rand::{Rng, RngExt};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Barrier;

const WRITERS: usize = 3;
const READERS: usize = 2;
const IDLE: usize = 10;
const TXNS: usize = 5000;
const SNAPSHOTS: usize = 5000;

/// One tested xid of one snapshot.
struct Seen {
    xid: u32,
    running: bool,
    visible: bool,
}

/// One snapshot: clock before and after `GetSnapshotData`, and what it said.
struct Taken {
    before: u64,
    after: u64,
    seen: Vec<Seen>,
}

fn run(layout: SnapshotLayout, group_clear: bool) {
    let n = WRITERS + READERS + IDLE;
    let pa: ProcArray<AtomicLwLock<Pg96Layout>> =
        ProcArray::new(&ProcArrayConfig::new(n, layout, group_clear)).unwrap();
    let procs = ProcTable::new(n);
    {
        let mut b = procs.attach().unwrap();
        for p in 0..n {
            pa.add(&mut b, p).unwrap();
        }
    }
    let max_xids = WRITERS * TXNS * 3 + 16;
    let stamp = || (0..max_xids).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
    let (assigned, commit_started, ended) = (stamp(), stamp(), stamp());
    let clock = AtomicU64::new(1);
    let start = Barrier::new(WRITERS + READERS);
    let taken: Vec<Vec<Taken>> = std::thread::scope(|s| {
        for _ in 0..WRITERS {
            let mut b = procs.attach().unwrap();
            let (pa, clock, start) = (&pa, &clock, &start);
            let (assigned, commit_started, ended) = (&assigned, &commit_started, &ended);
            s.spawn(move || {
                start.wait();
                for _ in 0..TXNS {
                    let xid = pa.assign_xid(&mut b, None).unwrap();
                    assigned[xid as usize].store(clock.fetch_add(1, SeqCst), SeqCst);
                    let mut tree = vec![xid];
                    for _ in 0..b.rng.random_range(0..=2) {
                        let sub = pa.assign_xid(&mut b, Some(xid)).unwrap();
                        assigned[sub as usize].store(clock.fetch_add(1, SeqCst), SeqCst);
                        tree.push(sub);
                    }
                    let at = clock.fetch_add(1, SeqCst);
                    for &x in &tree {
                        commit_started[x as usize].store(at, SeqCst);
                    }
                    pa.commit_tree(xid, &tree[1..]).unwrap();
                    pa.end_transaction(&mut b, *tree.last().unwrap()).unwrap();
                    let at = clock.fetch_add(1, SeqCst);
                    for &x in &tree {
                        ended[x as usize].store(at, SeqCst);
                    }
                    if b.rng.random_bool(0.1) {
                        std::thread::yield_now();
                    }
                }
            });
        }
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let mut b = procs.attach().unwrap();
                let (pa, clock, start) = (&pa, &clock, &start);
                s.spawn(move || {
                    start.wait();
                    let mut snap = Snapshot::new();
                    let mut out = Vec::with_capacity(SNAPSHOTS);
                    for _ in 0..SNAPSHOTS {
                        let before = clock.fetch_add(1, SeqCst);
                        pa.get_snapshot_data(&mut b, &mut snap).unwrap();
                        let after = clock.fetch_add(1, SeqCst);
                        let lo = snap.xmax.saturating_sub(24).max(3);
                        let seen = (lo..snap.xmax + 4)
                            .filter(|&x| (x as usize) < max_xids)
                            .map(|xid| Seen {
                                xid,
                                running: pa.xid_in_mvcc_snapshot(xid, &snap).unwrap(),
                                visible: pa.xid_visible_as_committed(xid, &snap).unwrap(),
                            })
                            .collect();
                        pa.end_transaction(&mut b, 0).unwrap();
                        out.push(Taken {
                            before,
                            after,
                            seen,
                        });
                        if b.rng.next_u32() % 8 == 0 {
                            std::thread::yield_now();
                        }
                    }
                    out
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let get = |v: &[AtomicU64], x: u32| v[x as usize].load(SeqCst);
    let (mut checked, mut running_below_xmax) = (0, 0);
    for t in taken.iter().flatten() {
        for s in &t.seen {
            let (a, c, e) = (
                get(&assigned, s.xid),
                get(&commit_started, s.xid),
                get(&ended, s.xid),
            );
            if a == 0 {
                // Never assigned (past the last xid): running for every snapshot.
                assert!(
                    s.running && !s.visible,
                    "unassigned xid {} not running",
                    s.xid
                );
                continue;
            }
            checked += 1;
            if s.running && e != 0 && c > t.after {
                running_below_xmax += 1;
            }
            if s.visible {
                assert!(
                    c != 0 && c < t.after,
                    "xid {} seen committed by a snapshot taken before its commit ({c} vs {})",
                    s.xid,
                    t.after
                );
            }
            if e != 0 && e < t.before {
                assert!(
                    !s.running,
                    "xid {} ended before the snapshot but runs",
                    s.xid
                );
            }
            if a < t.before && (c == 0 || c > t.after) {
                assert!(s.running, "xid {} running throughout but not seen", s.xid);
            }
            assert_eq!(
                s.visible, !s.running,
                "xid {} finished for the snapshot but not committed",
                s.xid
            );
        }
    }
    assert!(checked > 1000, "too few xids checked: {checked}");
    // The readers ran while the writers did: some snapshots saw xids that were still running.
    assert!(
        running_below_xmax > 0,
        "no snapshot overlapped a transaction"
    );
}

#[test]
fn snapshots_are_consistent_with_commits_proc_scan() {
    run(SnapshotLayout::ProcScan, false);
}

#[test]
fn snapshots_are_consistent_with_commits_pgxact_group_clear() {
    run(SnapshotLayout::Pgxact, true);
}

#[test]
fn snapshots_are_consistent_with_commits_dense_group_clear() {
    run(SnapshotLayout::Dense, true);
}
