//! The commit log reads a real pg_xact segment: `fixtures/pg_xact15/0000`, written by a
//! PostgreSQL 15.18 server (how: `fixtures/pg_xact15/README.md`). Every status of xids 3 to
//! 32816, across the boundary between pages 0 and 1, must be what the server recorded:
//! initdb's xids 3..723 committed, the hand-made transactions and subtransactions of
//! `scenario.tsv` as listed there, the bulk range 898..32727 aborted exactly when
//! `xid % 3 == 0`, and nothing set past 32816.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_slru::clog::{Clog, ClogConfig, XidStatus};
use pglocks_slru::{FileStore, Victim};
use std::collections::HashMap;
use std::path::Path;

const LAST_XID: u32 = 32816;

fn expected() -> HashMap<u32, XidStatus> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pg_xact15");
    let text = std::fs::read_to_string(dir.join("scenario.tsv")).unwrap();
    let mut made = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut f = line.split('\t');
        let xid: u32 = f.next().unwrap().parse().unwrap();
        let status = match f.next().unwrap() {
            "committed" => XidStatus::Committed,
            "aborted" => XidStatus::Aborted,
            other => panic!("unexpected status {other} in scenario.tsv"),
        };
        made.insert(xid, status);
    }
    (3..=LAST_XID)
        .map(|xid| {
            let status = match made.get(&xid) {
                Some(&s) => s,
                None if xid <= 723 => XidStatus::Committed,
                None if (898..=32727).contains(&xid) && xid % 3 == 0 => XidStatus::Aborted,
                None if (898..=32727).contains(&xid) => XidStatus::Committed,
                None => panic!("xid {xid} is in no range of the fixture"),
            };
            (xid, status)
        })
        .collect()
}

#[test]
fn every_status_in_a_real_pg_xact_segment_is_read_right() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pg_xact15");
    // 8 buffers and the plain LRU of 9.1: the two pages are read in through the SLRU.
    let cfg = ClogConfig::new(8, false, Victim::PlainLru, false, 1);
    let clog: Clog<AtomicLwLock<Pg96Layout>> =
        Clog::new(&cfg, Box::new(FileStore::new(&dir))).unwrap();
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let expected = expected();
    assert_eq!(expected.len(), (LAST_XID - 2) as usize);
    let mut counts: HashMap<XidStatus, usize> = HashMap::new();
    for xid in 3..=LAST_XID {
        let (status, _) = clog.get_status(&mut b, xid).unwrap();
        assert_eq!(status, expected[&xid], "xid {xid}");
        *counts.entry(status).or_default() += 1;
    }
    assert_eq!(counts[&XidStatus::Committed], 22069);
    assert_eq!(counts[&XidStatus::Aborted], 10745);
    // Past the last xid the server assigned, the page is zero: in progress.
    for xid in LAST_XID + 1..LAST_XID + 100 {
        assert_eq!(
            clog.get_status(&mut b, xid).unwrap().0,
            XidStatus::InProgress
        );
    }
}
