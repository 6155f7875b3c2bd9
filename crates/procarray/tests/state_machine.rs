//! proptest state machine: the ProcArray, in each layout, against a sequential reference that is
//! just each backend's set of xids. Any sequence of registrations, xid and subxid assignments
//! (past the 64-entry cache), commits, aborts, read-only ends and snapshots gives the snapshot
//! the reference predicts (xmin, xmax, running xids and subxids, overflow, the backend's own
//! xmin, ≤ 13's global xmin), and `XidInMVCCSnapshot` / the visibility test agree with the
//! reference for every xid in the status window. Misuse returns an error and changes nothing.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::{Backend, ProcTable};
use pglocks_procarray::{
    ProcArray, ProcArrayConfig, Snapshot, SnapshotLayout, FIRST_NORMAL_TRANSACTION_ID,
    PGPROC_MAX_CACHED_SUBXIDS,
};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashSet};

/// Backends that run (attached), and the array's size: the rest are idle connections.
const RUNNING: usize = 3;
const MAX: usize = 5;
/// Snapshots check the newest `CHECKED` xids.
const CHECKED: u32 = 300;

#[derive(Debug, Clone)]
enum Op {
    Add(usize),
    Remove(usize),
    Assign(usize),
    AssignSubs(usize, usize),
    Commit(usize),
    Abort(usize),
    EndReadOnly(usize),
    Snapshot(usize),
    /// `TransactionIdIsInProgress` of every xid in the window, asked by a backend.
    InProgress(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..RUNNING;
    prop_oneof![
        1 => (0..MAX).prop_map(Op::Add),
        1 => (0..MAX).prop_map(Op::Remove),
        4 => p.clone().prop_map(Op::Assign),
        2 => (p.clone(), 1..=40usize).prop_map(|(p, n)| Op::AssignSubs(p, n)),
        2 => p.clone().prop_map(Op::Commit),
        1 => p.clone().prop_map(Op::Abort),
        2 => p.clone().prop_map(Op::EndReadOnly),
        5 => p.clone().prop_map(Op::Snapshot),
        2 => p.prop_map(Op::InProgress),
    ]
}

/// The reference: per backend, registered or not, its top xid, its subxids, its xmin.
#[derive(Default, Clone)]
struct Model {
    registered: [bool; MAX],
    xid: [u32; MAX],
    subxids: [Vec<u32>; MAX],
    xmin: [u32; MAX],
    next_xid: u32,
    latest_completed: u32,
    committed: HashSet<u32>,
}

impl Model {
    fn running_other(&self, me: usize, xmax: u32) -> impl Iterator<Item = usize> + '_ {
        (0..MAX).filter(move |&p| {
            p != me && self.registered[p] && self.xid[p] != 0 && self.xid[p] < xmax
        })
    }
}

/// Runs `ops` on a ProcArray of `layout` whose per-backend entries (`PGXACT`s, or 14's dense
/// arrays) are `padding` bytes apart.
fn check(layout: SnapshotLayout, padding: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let cfg = ProcArrayConfig {
        pgxact_padding: padding,
        dense_padding: padding,
        ..ProcArrayConfig::new(MAX, layout, true)
    };
    let pa: ProcArray<AtomicLwLock<Pg96Layout>> = ProcArray::new(&cfg).unwrap();
    let procs = ProcTable::new(RUNNING);
    let mut bs: Vec<Backend> = (0..RUNNING).map(|_| procs.attach().unwrap()).collect();
    let mut snaps: Vec<Snapshot> = vec![Snapshot::new(); RUNNING];
    let mut m = Model {
        next_xid: FIRST_NORMAL_TRANSACTION_ID,
        latest_completed: FIRST_NORMAL_TRANSACTION_ID - 1,
        ..Model::default()
    };
    for p in 0..RUNNING {
        pa.add(&mut bs[0], p).unwrap();
        m.registered[p] = true;
    }
    for op in ops {
        match *op {
            Op::Add(p) => {
                let r = pa.add(&mut bs[0], p);
                prop_assert_eq!(r.is_ok(), !m.registered[p]);
                m.registered[p] = true;
            }
            Op::Remove(p) => {
                let r = pa.remove(&mut bs[0], p);
                prop_assert_eq!(r.is_ok(), m.registered[p] && m.xid[p] == 0);
                if r.is_ok() {
                    m.registered[p] = false;
                }
            }
            Op::Assign(p) => {
                let r = pa.assign_xid(&mut bs[p], None);
                if m.registered[p] && m.xid[p] == 0 {
                    prop_assert_eq!(r.unwrap(), m.next_xid);
                    m.xid[p] = m.next_xid;
                    m.next_xid += 1;
                } else {
                    prop_assert!(r.is_err());
                }
            }
            Op::AssignSubs(p, n) => {
                for _ in 0..n {
                    let parent = m.subxids[p].last().copied().unwrap_or(m.xid[p]);
                    let r = pa.assign_xid(&mut bs[p], Some(parent));
                    if m.registered[p] && m.xid[p] != 0 {
                        prop_assert_eq!(r.unwrap(), m.next_xid);
                        m.subxids[p].push(m.next_xid);
                        m.next_xid += 1;
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
            }
            Op::Commit(p) | Op::Abort(p) => {
                // Without an xid, a latest xid is misuse.
                let latest = match m.xid[p] {
                    0 => FIRST_NORMAL_TRANSACTION_ID,
                    top => m.subxids[p].last().copied().unwrap_or(top),
                };
                if let (Op::Commit(_), true) = (op, m.xid[p] != 0) {
                    pa.commit_tree(m.xid[p], &m.subxids[p]).unwrap();
                    m.committed.insert(m.xid[p]);
                    m.committed.extend(m.subxids[p].iter().copied());
                }
                let r = pa.end_transaction(&mut bs[p], latest);
                if m.registered[p] && m.xid[p] != 0 {
                    r.unwrap();
                    m.latest_completed = m.latest_completed.max(latest);
                    m.xid[p] = 0;
                    m.subxids[p].clear();
                    m.xmin[p] = 0;
                } else {
                    prop_assert!(r.is_err());
                }
            }
            Op::EndReadOnly(p) => {
                let r = pa.end_transaction(&mut bs[p], 0);
                if m.registered[p] && m.xid[p] == 0 {
                    r.unwrap();
                    m.xmin[p] = 0;
                } else {
                    prop_assert!(r.is_err());
                }
            }
            Op::Snapshot(p) => {
                let r = pa.get_snapshot_data(&mut bs[p], &mut snaps[p]);
                if !m.registered[p] {
                    prop_assert!(r.is_err());
                    continue;
                }
                r.unwrap();
                check_snapshot(&pa, &mut m, p, &snaps[p], layout)?;
            }
            Op::InProgress(p) => check_in_progress(&pa, &m, &mut bs[p], p)?,
        }
        for p in 0..MAX {
            if m.registered[p] {
                prop_assert_eq!(pa.my_xid(p), m.xid[p], "xid of backend {}", p);
                prop_assert_eq!(pa.my_xmin(p), m.xmin[p], "xmin of backend {}", p);
            }
        }
        prop_assert_eq!(pa.num_procs(), m.registered.iter().filter(|&&r| r).count());
    }
    Ok(())
}

fn check_snapshot(
    pa: &ProcArray<AtomicLwLock<Pg96Layout>>,
    m: &mut Model,
    me: usize,
    snap: &Snapshot,
    layout: SnapshotLayout,
) -> Result<(), TestCaseError> {
    let xmax = m.latest_completed + 1;
    prop_assert_eq!(snap.xmax, xmax);
    let others: Vec<usize> = m.running_other(me, xmax).collect();
    let xip: BTreeSet<u32> = others.iter().map(|&p| m.xid[p]).collect();
    let mut xmin = xip.iter().copied().min().unwrap_or(xmax);
    if m.xid[me] != 0 && m.xid[me] < xmax {
        xmin = xmin.min(m.xid[me]);
    }
    prop_assert_eq!(snap.xmin, xmin);
    prop_assert_eq!(snap.xip.iter().copied().collect::<BTreeSet<_>>(), xip);
    // Subxids at or past xmax count as running anyway: PostgreSQL copies them without filtering,
    // and 14 may reuse contents from before they were assigned.
    let below = |p: usize| m.subxids[p].iter().filter(|&&x| x < xmax).count();
    let must_overflow = others.iter().any(|&p| below(p) > PGPROC_MAX_CACHED_SUBXIDS);
    let may_overflow = others
        .iter()
        .any(|&p| m.subxids[p].len() > PGPROC_MAX_CACHED_SUBXIDS);
    prop_assert!(must_overflow <= snap.suboverflowed && snap.suboverflowed <= may_overflow);
    if !snap.suboverflowed {
        let subs: BTreeSet<u32> = others
            .iter()
            .flat_map(|&p| m.subxids[p].iter().copied())
            .filter(|&x| x < xmax)
            .collect();
        let got: BTreeSet<u32> = snap.subxip.iter().copied().filter(|&x| x < xmax).collect();
        prop_assert_eq!(got, subs);
    }
    let global = (0..MAX)
        .filter(|&p| m.registered[p] && m.xmin[p] != 0)
        .map(|p| m.xmin[p])
        .fold(xmin, u32::min);
    if m.xmin[me] == 0 {
        m.xmin[me] = xmin;
    }
    match layout {
        SnapshotLayout::Dense => prop_assert_eq!(snap.global_xmin, None),
        _ => prop_assert_eq!(snap.global_xmin, Some(global)),
    }
    // Every xid in the window: running for the snapshot, and visible as committed, as the
    // reference says.
    let low = m
        .next_xid
        .saturating_sub(CHECKED)
        .max(FIRST_NORMAL_TRANSACTION_ID);
    for xid in low..m.next_xid + 2 {
        let running = xid >= xmax
            || others
                .iter()
                .any(|&p| m.xid[p] == xid || m.subxids[p].contains(&xid));
        prop_assert_eq!(
            pa.xid_in_mvcc_snapshot(xid, snap).unwrap(),
            running,
            "xid {}",
            xid
        );
        if xid < m.next_xid {
            let visible = !running && m.committed.contains(&xid);
            prop_assert_eq!(pa.xid_visible_as_committed(xid, snap).unwrap(), visible);
        }
    }
    Ok(())
}

/// `TransactionIdIsInProgress` for every xid of the window, by backend `me` without the cheap
/// answers (no `RecentXmin`, nothing known completed): running iff some registered backend has it
/// as its xid or a subxid, or it is past `latestCompletedXid`.
fn check_in_progress(
    pa: &ProcArray<AtomicLwLock<Pg96Layout>>,
    m: &Model,
    b: &mut Backend,
    me: usize,
) -> Result<(), TestCaseError> {
    let r = pa.transaction_id_is_in_progress(b, FIRST_NORMAL_TRANSACTION_ID, 0, 0);
    if !m.registered[me] {
        prop_assert!(r.is_err());
        return Ok(());
    }
    let low = m
        .next_xid
        .saturating_sub(CHECKED)
        .max(FIRST_NORMAL_TRANSACTION_ID);
    for xid in low..m.next_xid + 2 {
        let running = xid > m.latest_completed
            || (0..MAX).any(|p| {
                m.registered[p] && m.xid[p] != 0 && (m.xid[p] == xid || m.subxids[p].contains(&xid))
            });
        prop_assert_eq!(
            pa.transaction_id_is_in_progress(b, xid, 0, 0).unwrap(),
            running,
            "xid {}",
            xid
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn proc_scan_matches_the_reference(ops in prop::collection::vec(op(), 1..80)) {
        check(SnapshotLayout::ProcScan, 0, &ops)?;
    }

    #[test]
    fn pgxact_matches_the_reference(ops in prop::collection::vec(op(), 1..80)) {
        check(SnapshotLayout::Pgxact, 0, &ops)?;
    }

    /// The padded-PGXACT prototype: the same answers, from entries a cache line apart.
    #[test]
    fn padded_pgxact_matches_the_reference(ops in prop::collection::vec(op(), 1..80)) {
        check(SnapshotLayout::Pgxact, 64, &ops)?;
    }

    #[test]
    fn dense_with_reuse_matches_the_reference(ops in prop::collection::vec(op(), 1..80)) {
        check(SnapshotLayout::Dense, 0, &ops)?;
    }

    /// The padded dense arrays (a prototype): the same answers, a line per backend. Entries
    /// move when a backend leaves the array (`ProcArrayRemove`), so the spacing is exercised on
    /// every move as well.
    #[test]
    fn padded_dense_matches_the_reference(ops in prop::collection::vec(op(), 1..80)) {
        check(SnapshotLayout::Dense, 128, &ops)?;
    }
}

#[test]
fn the_subxid_cache_holds_64_then_overflows() {
    for layout in [
        SnapshotLayout::ProcScan,
        SnapshotLayout::Pgxact,
        SnapshotLayout::Dense,
    ] {
        let pa: ProcArray<AtomicLwLock<Pg96Layout>> =
            ProcArray::new(&ProcArrayConfig::new(2, layout, false)).unwrap();
        let procs = ProcTable::new(2);
        let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
        pa.add(&mut a, 0).unwrap();
        pa.add(&mut a, 1).unwrap();
        let top = pa.assign_xid(&mut a, None).unwrap();
        let subs: Vec<u32> = (0..PGPROC_MAX_CACHED_SUBXIDS)
            .map(|_| pa.assign_xid(&mut a, Some(top)).unwrap())
            .collect();
        // b's own transaction completes, so that a's xids are below xmax.
        let mine = pa.assign_xid(&mut b, None).unwrap();
        pa.end_transaction(&mut b, mine).unwrap();
        let mut snap = Snapshot::new();
        pa.get_snapshot_data(&mut b, &mut snap).unwrap();
        assert!(!snap.suboverflowed, "{layout:?}");
        assert_eq!(snap.subxip, subs, "{layout:?}");
        pa.end_transaction(&mut b, 0).unwrap();
        // One more: only the overflowed flag; parents answer for the rest.
        let extra = pa.assign_xid(&mut a, Some(top)).unwrap();
        let mine = pa.assign_xid(&mut b, None).unwrap();
        pa.end_transaction(&mut b, mine).unwrap();
        pa.get_snapshot_data(&mut b, &mut snap).unwrap();
        assert!(snap.suboverflowed, "{layout:?}");
        assert!(pa.xid_in_mvcc_snapshot(extra, &snap).unwrap());
        assert_eq!(pa.sub_trans_get_topmost(extra).unwrap(), top);
        // TransactionIdIsInProgress finds the uncached subxid through its parent, and its
        // cached siblings in the cache; the cheap answers need no scan.
        assert!(
            pa.transaction_id_is_in_progress(&mut b, extra, 0, 0)
                .unwrap(),
            "{layout:?}"
        );
        assert!(pa
            .transaction_id_is_in_progress(&mut b, subs[7], 0, 0)
            .unwrap());
        assert!(!pa
            .transaction_id_is_in_progress(&mut b, mine, 0, 0)
            .unwrap());
        assert!(!pa
            .transaction_id_is_in_progress(&mut b, extra, extra + 1, 0)
            .unwrap());
        assert!(!pa
            .transaction_id_is_in_progress(&mut b, extra, 0, extra)
            .unwrap());
    }
}
