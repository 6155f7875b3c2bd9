//! loom models of the SLRU and the commit log:
//! - the read-only hit path (`SimpleLruReadPage_ReadOnly` under the shared bank lock) against a
//!   concurrent eviction of the same page: the reader always sees the page it asked for;
//! - two read-only readers of a page not in the buffers: the one that does not read it in
//!   waits for the read instead of taking the slot while it is in progress;
//! - 11's group update: with the bank lock busy, two committers go through the group list;
//!   each one's status is applied and each one wakes.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-slru --test loom_slru --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_lwlock::{AtomicLwLock, LwLockMode, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_slru::clog::{Clog, ClogConfig, XidStatus};
use pglocks_slru::{MemoryStore, PageStore, Slru, SlruConfig, Victim, BLCKSZ};
use std::time::Duration;

type Lw = AtomicLwLock<Pg96Layout>;

/// An SLRU of two slots under one control lock.
fn two_slots() -> SlruConfig {
    SlruConfig {
        slots: 2,
        banks: false,
        victim: Victim::AvoidIoBusy,
        lock_name: "XactSLRU",
        buffer_lock_name: "XactBuffer",
        lsn_groups_per_page: 0,
    }
}

#[test]
fn a_read_only_hit_never_sees_an_evicted_page() {
    pglocks_sync::loom_builder(2).check(|| {
        // Pages 1 to 4 on "disk", each starting with its own number.
        let store = MemoryStore::new(Duration::ZERO);
        for p in 1..=4u8 {
            let mut page = [0u8; BLCKSZ];
            page[0] = p;
            store.write_page(u64::from(p), &page).unwrap();
        }
        let slru: Arc<Slru<Lw>> = Arc::new(Slru::new(&two_slots(), Box::new(store)).unwrap());
        let procs = ProcTable::new(2);
        let mut b = procs.attach().unwrap();
        slru.lock_bank(&mut b, 1, LwLockMode::Exclusive).unwrap();
        slru.read_page(&mut b, 1, false).unwrap();
        slru.read_page(&mut b, 2, false).unwrap();
        slru.unlock_bank(&mut b, 1).unwrap();

        let (s2, p2) = (Arc::clone(&slru), procs.clone());
        let reader = loom::thread::spawn(move || {
            let mut b = p2.attach().unwrap();
            let slot = s2.read_page_read_only(&mut b, 1).unwrap();
            assert_eq!(s2.byte(slot, 0), 1, "the reader saw another page's bytes");
            s2.unlock_bank(&mut b, 1).unwrap();
        });
        // Pages 3 and 4 evict both 1 and 2, whatever the reader touched.
        for p in [3, 4] {
            slru.lock_bank(&mut b, p, LwLockMode::Exclusive).unwrap();
            let slot = slru.read_page(&mut b, p, false).unwrap();
            assert_eq!(u64::from(slru.byte(slot, 0)), p);
            slru.unlock_bank(&mut b, p).unwrap();
        }
        reader.join().unwrap();
    });
}

#[test]
fn a_read_only_reader_waits_for_a_page_being_read_in() {
    pglocks_sync::loom_builder(2).check(|| {
        let store = MemoryStore::new(Duration::ZERO);
        let mut page = [0u8; BLCKSZ];
        page[0] = 1;
        store.write_page(1, &page).unwrap();
        let slru: Arc<Slru<Lw>> = Arc::new(Slru::new(&two_slots(), Box::new(store)).unwrap());
        let procs = ProcTable::new(2);
        // Two readers miss together: one reads the page in, the other must not take the slot
        // while the read is in progress (its bytes are not there yet).
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (s, p) = (Arc::clone(&slru), procs.clone());
                loom::thread::spawn(move || {
                    let mut b = p.attach().unwrap();
                    let slot = s.read_page_read_only(&mut b, 1).unwrap();
                    assert_eq!(s.byte(slot, 0), 1, "read a page still being read in");
                    s.unlock_bank(&mut b, 1).unwrap();
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
    });
}

#[test]
fn group_update_applies_every_members_status_and_wakes_it() {
    pglocks_sync::loom_builder(1).check(|| {
        let cfg = ClogConfig::new(2, false, Victim::AvoidIoBusy, true, 3);
        let clog: Arc<Clog<Lw>> =
            Arc::new(Clog::new(&cfg, Box::new(MemoryStore::new(Duration::ZERO))).unwrap());
        let procs = ProcTable::new(3);
        let mut b = procs.attach().unwrap();
        clog.extend(&mut b, 3).unwrap();
        // Hold the page's lock so that both committers fail their conditional acquire.
        clog.slru()
            .lock_bank(&mut b, 0, LwLockMode::Exclusive)
            .unwrap();
        let committers: Vec<_> = [10u32, 11]
            .into_iter()
            .map(|xid| {
                let (c, p) = (Arc::clone(&clog), procs.clone());
                loom::thread::spawn(move || {
                    let mut b = p.attach().unwrap();
                    c.set_tree_status(&mut b, xid, &[], XidStatus::Committed, 0)
                        .unwrap();
                    // Applied by the time the call returns, leader or follower.
                    assert_eq!(c.get_status(&mut b, xid).unwrap().0, XidStatus::Committed);
                })
            })
            .collect();
        clog.slru().unlock_bank(&mut b, 0).unwrap();
        for t in committers {
            t.join().unwrap();
        }
        for xid in [10, 11] {
            assert_eq!(
                clog.get_status(&mut b, xid).unwrap().0,
                XidStatus::Committed
            );
        }
    });
}
