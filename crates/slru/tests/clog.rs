//! The commit log: statuses of transaction trees within and across pages, forbidden changes,
//! and many backends committing and aborting concurrently through a few buffers (with and
//! without 11's group update), every status read back right from the buffers and, after a
//! checkpoint, from the segment files.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, Pg96Layout, SpinlockProtectedLwLock};
use pglocks_proc::ProcTable;
use pglocks_slru::clog::{Clog, ClogConfig, XidStatus, CLOG_XACTS_PER_PAGE};
use pglocks_slru::{FileStore, MemoryStore, SlruError, Victim};
use pglocks_spin::PgSpinLock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

type Lw = AtomicLwLock<Pg96Layout>;

fn clog(buffers: usize, group: bool, backends: usize) -> Clog<Lw> {
    let cfg = ClogConfig::new(buffers, false, Victim::AvoidIoBusy, group, backends);
    Clog::new(&cfg, Box::new(MemoryStore::new(Duration::ZERO))).unwrap()
}

#[test]
fn a_tree_across_pages_commits_and_reads_back() {
    let c = clog(8, false, 1);
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let parent = CLOG_XACTS_PER_PAGE - 2;
    for x in [3, CLOG_XACTS_PER_PAGE] {
        c.extend(&mut b, x).unwrap();
    }
    let subs = [parent + 1, CLOG_XACTS_PER_PAGE, CLOG_XACTS_PER_PAGE + 1];
    c.set_tree_status(&mut b, parent, &subs, XidStatus::Committed, 0x1234)
        .unwrap();
    for x in std::iter::once(parent).chain(subs) {
        let (s, lsn) = c.get_status(&mut b, x).unwrap();
        assert_eq!(s, XidStatus::Committed, "{x}");
        assert_eq!(lsn, 0x1234, "{x}: its group LSN");
    }
    assert_eq!(
        c.get_status(&mut b, parent - 1).unwrap().0,
        XidStatus::InProgress
    );
    // An aborted tree.
    c.set_tree_status(&mut b, 100, &[101, 102], XidStatus::Aborted, 0)
        .unwrap();
    assert_eq!(c.get_status(&mut b, 102).unwrap().0, XidStatus::Aborted);
}

#[test]
fn changes_postgresql_forbids_are_errors() {
    let c = clog(8, false, 1);
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    c.extend(&mut b, 3).unwrap();
    c.set_tree_status(&mut b, 10, &[], XidStatus::Committed, 0)
        .unwrap();
    let e = c
        .set_tree_status(&mut b, 10, &[], XidStatus::Aborted, 0)
        .unwrap_err();
    assert!(matches!(e, SlruError::BadTransition { xid: 10, .. }), "{e}");
    assert!(e.to_string().contains("from committed to aborted"), "{e}");
    // Setting the same status again is allowed (recovery replays do it).
    c.set_tree_status(&mut b, 10, &[], XidStatus::Committed, 0)
        .unwrap();
    // A tree with one bad member changes nothing on that page.
    c.set_tree_status(&mut b, 20, &[], XidStatus::Aborted, 0)
        .unwrap();
    let e = c
        .set_tree_status(&mut b, 21, &[20], XidStatus::Committed, 0)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("transaction 20 from aborted to committed"),
        "{e}"
    );
    assert_eq!(c.get_status(&mut b, 21).unwrap().0, XidStatus::InProgress);
}

/// `threads` backends each run `per_thread` transactions: xids from a shared counter under a
/// mutex (XidGenLock, which also extends the commit log), some with subtransactions, one in
/// four aborted. Returns the statuses they set.
fn run_transactions<K: pglocks_lwlock::RawLwLock>(
    c: &Clog<K>,
    procs: &ProcTable,
    threads: usize,
    per_thread: u32,
) -> HashMap<u32, XidStatus> {
    let next_xid = Mutex::new(CLOG_XACTS_PER_PAGE - 500);
    let expected = Mutex::new(HashMap::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (c, next_xid, expected) = (c, &next_xid, &expected);
            s.spawn(move || {
                let mut b = procs.attach().unwrap();
                for i in 0..per_thread {
                    let nsubs = i % 3;
                    // Assigned under XidGenLock, which also extends the commit log at each
                    // new page before anyone can use an xid on it (GetNewTransactionId).
                    let xids: Vec<u32> = {
                        let mut n = next_xid.lock().unwrap();
                        let first = *n;
                        *n += 1 + nsubs;
                        for x in first..first + 1 + nsubs {
                            if x % CLOG_XACTS_PER_PAGE == 0 {
                                c.extend(&mut b, x).unwrap();
                            }
                        }
                        (first..first + 1 + nsubs).collect()
                    };
                    let status = if (i + t as u32) % 4 == 0 {
                        XidStatus::Aborted
                    } else {
                        XidStatus::Committed
                    };
                    c.set_tree_status(&mut b, xids[0], &xids[1..], status, 0)
                        .unwrap();
                    {
                        let mut e = expected.lock().unwrap();
                        for &x in &xids {
                            e.insert(x, status);
                        }
                    }
                    if i % 16 == 0 {
                        // A look at an old page (a long-running snapshot's check): with few
                        // buffers it evicts a page that is probably dirty.
                        let far = (3 + (i / 16 + t as u32) % 6) * CLOG_XACTS_PER_PAGE + i;
                        assert_eq!(c.get_status(&mut b, far).unwrap().0, XidStatus::InProgress);
                    }
                }
            });
        }
    });
    expected.into_inner().unwrap()
}

#[test]
fn concurrent_commits_through_few_buffers_are_all_recorded() {
    for group in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ClogConfig::new(4, false, Victim::AvoidIoBusy, group, 5);
        let c: Clog<Lw> = Clog::new(&cfg, Box::new(FileStore::new(dir.path()))).unwrap();
        let procs = ProcTable::new(5);
        {
            let mut b = procs.attach().unwrap();
            // The first page of the run and the old pages looked at: zero them (as StartupCLOG
            // and ExtendCLOG would) and write them out, so that they exist in the segment file.
            c.extend(&mut b, 3).unwrap();
            for page in 3..9 {
                c.extend(&mut b, page * CLOG_XACTS_PER_PAGE).unwrap();
                c.slru().write_all(&mut b).unwrap();
            }
        }
        // 4 backends × 3000 transactions of 1–3 xids: about 24,000 xids over 2 pages, with
        // lookups of 6 old pages in between that evict the dirty ones from the 4 buffers.
        let expected = run_transactions(&c, &procs, 4, 3000);
        let mut b = procs.attach().unwrap();
        for (&x, &s) in &expected {
            assert_eq!(
                c.get_status(&mut b, x).unwrap().0,
                s,
                "xid {x} (group {group})"
            );
        }
        // After a checkpoint, a fresh commit log over the same files agrees.
        c.slru().write_all(&mut b).unwrap();
        let fresh: Clog<Lw> = Clog::new(&cfg, Box::new(FileStore::new(dir.path()))).unwrap();
        for (&x, &s) in &expected {
            assert_eq!(
                fresh.get_status(&mut b, x).unwrap().0,
                s,
                "xid {x} from the files"
            );
        }
    }
}

#[test]
fn the_94_lwlock_and_plain_lru_also_keep_every_status() {
    let cfg = ClogConfig::new(8, false, Victim::PlainLru, false, 4);
    let c: Clog<SpinlockProtectedLwLock<PgSpinLock>> =
        Clog::new(&cfg, Box::new(MemoryStore::new(Duration::from_micros(20)))).unwrap();
    let procs = ProcTable::new(4);
    {
        let mut b = procs.attach().unwrap();
        c.extend(&mut b, 3).unwrap();
    }
    let expected = run_transactions(&c, &procs, 3, 1000);
    let mut b = procs.attach().unwrap();
    for (&x, &s) in &expected {
        assert_eq!(c.get_status(&mut b, x).unwrap().0, s, "xid {x}");
    }
}

/// Three committers start while the page's lock is held, so none gets it conditionally: they
/// form a group whose leader applies every update. Returns each committer's result and the
/// merged stats.
fn group_of_three(
    c: &Clog<Lw>,
    procs: &ProcTable,
    updates: [(u32, XidStatus); 3],
) -> (
    Vec<Result<(), SlruError>>,
    pglocks_proc::stats::BackendStats,
) {
    let mut holder = procs.attach().unwrap();
    c.slru()
        .lock_bank(&mut holder, 0, pglocks_lwlock::LwLockMode::Exclusive)
        .unwrap();
    let (results, stats) = std::thread::scope(|s| {
        let hs: Vec<_> = updates
            .into_iter()
            .map(|(xid, status)| {
                s.spawn(move || {
                    let mut b = procs.attach().unwrap();
                    let r = c.set_tree_status(&mut b, xid, &[], status, 0);
                    (r, b.take_stats())
                })
            })
            .collect();
        // Give them time to queue (if one is late it takes the lock itself: still correct).
        std::thread::sleep(Duration::from_millis(100));
        c.slru().unlock_bank(&mut holder, 0).unwrap();
        let mut all = pglocks_proc::stats::BackendStats::default();
        let mut results = Vec::new();
        for h in hs {
            let (r, st) = h.join().unwrap();
            results.push(r);
            all.merge(&st);
        }
        (results, all)
    });
    (results, stats)
}

#[test]
fn a_group_update_applies_every_member_and_hands_each_its_own_outcome() {
    let c = clog(8, true, 5);
    let procs = ProcTable::new(5);
    let mut b = procs.attach().unwrap();
    c.extend(&mut b, 3).unwrap();
    c.set_tree_status(&mut b, 10, &[], XidStatus::Committed, 0)
        .unwrap();
    // 11 and 12 commit; 10, already committed, is asked to abort: only that member fails.
    let (results, stats) = group_of_three(
        &c,
        &procs,
        [
            (11, XidStatus::Committed),
            (10, XidStatus::Aborted),
            (12, XidStatus::Committed),
        ],
    );
    let counters = stats.events.counters();
    let get = |n: &str| counters.iter().find(|x| x.0 == n).map_or(0, |x| x.1);
    assert!(get("clog.group_followers") >= 1, "{counters:?}");
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    let e = results[1].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("transaction 10 from committed to aborted"),
        "{e}"
    );
    for (xid, s) in [
        (10, XidStatus::Committed),
        (11, XidStatus::Committed),
        (12, XidStatus::Committed),
    ] {
        assert_eq!(c.get_status(&mut b, xid).unwrap().0, s, "{xid}");
    }
    // Every lock was given back: the page can be locked again.
    c.set_tree_status(&mut b, 13, &[], XidStatus::Aborted, 0)
        .unwrap();
}

#[test]
fn errors_leave_no_bank_lock_held() {
    // A commit log over an empty directory: reading any page fails.
    let dir = tempfile::tempdir().unwrap();
    let cfg = ClogConfig::new(8, false, Victim::AvoidIoBusy, false, 2);
    let c: Clog<Lw> = Clog::new(&cfg, Box::new(FileStore::new(dir.path()))).unwrap();
    let procs = ProcTable::new(2);
    let mut b = procs.attach().unwrap();
    let e = c.get_status(&mut b, 5).unwrap_err().to_string();
    assert!(e.contains("could not open file"), "{e}");
    // Both this backend and another can take the bank lock afterwards.
    let mut other = procs.attach().unwrap();
    assert!(c.slru().try_lock_bank(&mut other, 0).unwrap());
    c.slru().unlock_bank(&mut other, 0).unwrap();
    c.extend(&mut b, 3).unwrap();
    c.set_tree_status(&mut b, 7, &[], XidStatus::Committed, 0)
        .unwrap();
    let e = c
        .set_tree_status(&mut b, 7, &[], XidStatus::Aborted, 0)
        .unwrap_err();
    assert!(matches!(e, SlruError::BadTransition { .. }));
    assert!(
        c.slru().try_lock_bank(&mut other, 0).unwrap(),
        "a forbidden change kept the lock"
    );
    c.slru().unlock_bank(&mut other, 0).unwrap();
}

#[test]
fn a_page_read_in_starts_with_zero_group_lsns() {
    // Two buffers: page 1's LSNs must not leak into page 2 read into the same slot.
    let c = clog(2, false, 1);
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    c.extend(&mut b, CLOG_XACTS_PER_PAGE).unwrap();
    c.set_tree_status(
        &mut b,
        CLOG_XACTS_PER_PAGE + 1,
        &[],
        XidStatus::Committed,
        0xABCD,
    )
    .unwrap();
    assert_eq!(
        c.get_status(&mut b, CLOG_XACTS_PER_PAGE + 1).unwrap().1,
        0xABCD
    );
    for page in [0, 2, 3] {
        let (status, lsn) = c
            .get_status(&mut b, page * CLOG_XACTS_PER_PAGE + 1)
            .unwrap();
        assert_eq!((status, lsn), (XidStatus::InProgress, 0), "page {page}");
    }
}
