//! Fault injection into the SLRU's page store ([`FaultyStore`]): a failed or short page read or
//! write is `SlruReportIOError`'s `ERROR` — a typed error worded as PostgreSQL's, the slot put
//! back (empty after a read, valid and dirty after a write), every bank and slot I/O lock free
//! (proved by taking each from another backend), and the page readable or writable again once
//! the fault is gone; latency spikes only slow things down.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, LwLockMode, Pg96Layout};
use pglocks_proc::{Backend, ProcTable};
use pglocks_slru::clog::{Clog, ClogConfig, XidStatus, CLOG_XACTS_PER_PAGE};
use pglocks_slru::page_status::{EMPTY, READ_IN_PROGRESS, VALID, WRITE_IN_PROGRESS};
use pglocks_slru::{
    FaultPlan, Faults, FaultyStore, IoOp, MemoryStore, PageStore, Slru, SlruConfig, SlruError,
    Victim, BLCKSZ,
};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::{mpsc, Arc};
use std::time::Duration;

type Lw = AtomicLwLock<Pg96Layout>;

fn config(slots: usize, banks: bool) -> SlruConfig {
    SlruConfig {
        slots,
        banks,
        victim: Victim::AvoidIoBusy,
        lock_name: "XactSLRU",
        buffer_lock_name: "XactBuffer",
        lsn_groups_per_page: 0,
    }
}

/// A memory store with page `p` holding byte `p as u8 + 1` at offset 0, for pages `0..pages`.
fn seeded_store(pages: u64) -> MemoryStore {
    let store = MemoryStore::new(Duration::ZERO);
    for p in 0..pages {
        let mut page = [0u8; BLCKSZ];
        page[0] = p as u8 + 1;
        store.write_page(p, &page).unwrap();
    }
    store
}

fn faulty_slru(slots: usize, plan: &str) -> (Slru<Lw>, Faults) {
    let faults = Faults::new(plan.parse::<FaultPlan>().unwrap());
    let store = FaultyStore::new(seeded_store(64), "pg_xact", faults.clone());
    (
        Slru::new(&config(slots, false), Box::new(store)).unwrap(),
        faults,
    )
}

/// Runs `f` on another thread and fails if it does not finish within `secs` (a lock left held
/// makes the next acquirer sleep forever: that must fail, not hang).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the SLRU hung (a lock left held?)")
}

fn assert_locks_free(s: &Slru<Lw>, b: &mut Backend) {
    assert!(s.locks_free(b).unwrap(), "an SLRU lock is still held");
}

/// No slot is left mid-I/O.
fn assert_no_io_in_progress(s: &Slru<Lw>) {
    for i in 0..s.slots() {
        let st = s.status(i);
        assert!(
            st != READ_IN_PROGRESS && st != WRITE_IN_PROGRESS,
            "slot {i} left in I/O state {st}"
        );
    }
}

fn slot_of(s: &Slru<Lw>, page: u64) -> Option<usize> {
    (0..s.slots()).find(|&i| s.status(i) != EMPTY && s.page_number(i) == page)
}

/// A read that fails as `plan` says, checked from another backend; then the same page reads
/// fine once the fault is gone.
fn failed_read(plan: &str, expected: &str) {
    let (s, faults) = faulty_slru(4, plan);
    let s = Arc::new(s);
    let procs = Arc::new(ProcTable::new(2));
    let e = within(10, {
        let (s, procs) = (Arc::clone(&s), Arc::clone(&procs));
        move || {
            let mut b = procs.attach().unwrap();
            s.lock_bank(&mut b, 5, LwLockMode::Exclusive).unwrap();
            s.read_page(&mut b, 5, false).unwrap_err()
            // The error returns with no lock held: the backend's ERROR path.
        }
    });
    assert!(matches!(e, SlruError::Io { pageno: 5, .. }), "{e:?}");
    assert_eq!(e.to_string(), expected);
    let mut b = procs.attach().unwrap();
    assert_locks_free(&s, &mut b);
    assert_no_io_in_progress(&s);
    assert_eq!(slot_of(&s, 5), None, "the failed read left the slot empty");
    faults.clear();
    s.lock_bank(&mut b, 5, LwLockMode::Exclusive).unwrap();
    let slot = s.read_page(&mut b, 5, false).unwrap();
    assert_eq!((s.status(slot), s.byte(slot, 0)), (VALID, 6));
    s.unlock_bank(&mut b, 5).unwrap();
    assert_locks_free(&s, &mut b);
}

#[test]
fn a_failed_read_is_an_error_that_leaves_the_slot_empty_and_every_lock_free() {
    failed_read(
        "read:1",
        "could not read from file \"pg_xact/0000\" at offset 40960: Input/output error (os error 5)",
    );
}

#[test]
fn a_short_read_is_an_error_too() {
    failed_read(
        "read:1:short",
        "could not read from file \"pg_xact/0000\" at offset 40960: read too few bytes",
    );
}

/// A write that fails as `plan` says: the page stays valid and dirty, the locks are free, and
/// the next write (fault gone) stores it.
fn failed_write(plan: &str, expected: &str) {
    let (s, faults) = faulty_slru(4, plan);
    let procs = ProcTable::new(2);
    let mut a = procs.attach().unwrap();
    s.lock_bank(&mut a, 40, LwLockMode::Exclusive).unwrap();
    let slot = s.zero_page(&mut a, 40).unwrap();
    s.set_byte(slot, 0, 0xAB);
    let e = s.write_page(&mut a, slot).unwrap_err();
    assert_eq!(e.to_string(), expected);
    let mut b = procs.attach().unwrap();
    assert_locks_free(&s, &mut b);
    assert_no_io_in_progress(&s);
    assert_eq!(
        (s.status(slot), s.page_number(slot), s.is_dirty(slot)),
        (VALID, 40, true),
        "a failed write leaves the page valid and dirty"
    );
    faults.clear();
    s.lock_bank(&mut b, 40, LwLockMode::Exclusive).unwrap();
    s.write_page(&mut b, slot).unwrap();
    assert!(!s.is_dirty(slot));
    s.unlock_bank(&mut b, 40).unwrap();
    assert_locks_free(&s, &mut b);
}

#[test]
fn a_failed_write_is_an_error_that_keeps_the_page_dirty_and_every_lock_free() {
    failed_write(
        "write:1",
        "could not write to file \"pg_xact/0001\" at offset 65536: Input/output error (os error 5)",
    );
}

#[test]
fn a_short_write_is_an_error_reported_as_enospc() {
    failed_write(
        "write:1:short",
        "could not write to file \"pg_xact/0001\" at offset 65536: No space left on device (os error 28)",
    );
}

#[test]
fn a_failed_write_of_a_dirty_victim_fails_the_read_that_needed_the_slot() {
    // Two slots: page 9 is the latest (never a victim), page 3 is dirty; reading page 4 must
    // write page 3 out first, and that write fails.
    let (s, faults) = faulty_slru(2, "write:1");
    let procs = ProcTable::new(2);
    let mut a = procs.attach().unwrap();
    s.lock_bank(&mut a, 0, LwLockMode::Exclusive).unwrap();
    let three = s.read_page(&mut a, 3, false).unwrap();
    s.set_byte(three, 1, 0x33);
    s.mark_dirty(three);
    s.zero_page(&mut a, 9).unwrap();
    let e = s.read_page(&mut a, 4, false).unwrap_err();
    assert!(e.to_string().starts_with("could not write to file"), "{e}");
    let mut b = procs.attach().unwrap();
    assert_locks_free(&s, &mut b);
    assert_no_io_in_progress(&s);
    assert_eq!(slot_of(&s, 3), Some(three));
    assert!(s.is_dirty(three), "the victim is still dirty");
    faults.clear();
    s.lock_bank(&mut b, 4, LwLockMode::Exclusive).unwrap();
    let four = s.read_page(&mut b, 4, false).unwrap();
    assert_eq!(s.byte(four, 0), 5);
    s.unlock_bank(&mut b, 4).unwrap();
    assert_locks_free(&s, &mut b);
}

fn clog_over(store: FaultyStore<MemoryStore>, backends: usize, group: bool) -> Clog<Lw> {
    let cfg = ClogConfig::new(4, false, Victim::AvoidIoBusy, group, backends);
    Clog::new(&cfg, Box::new(store)).unwrap()
}

/// `threads` backends set and read statuses of xids spread over many pages through 4 buffers,
/// while `plan` injects faults. Every call returns `Ok` or an I/O error; afterwards every lock
/// is free, no slot is mid-I/O, and, with the faults cleared, every status a call reported as
/// set reads back.
fn clog_under_faults(plan: &str, group: bool, expect_errors: bool) {
    const THREADS: usize = 8;
    const PER_THREAD: u32 = 60;
    const STRIDE: u32 = 1009;
    let faults = Faults::new(plan.parse::<FaultPlan>().unwrap());
    let store = FaultyStore::new(MemoryStore::new(Duration::ZERO), "pg_xact", faults.clone());
    let clog = Arc::new(clog_over(store, THREADS + 1, group));
    let procs = Arc::new(ProcTable::new(THREADS + 1));
    {
        let mut b = procs.attach().unwrap();
        faults.set_plan(FaultPlan::new());
        for page in 0..=(THREADS as u32 * PER_THREAD * STRIDE / CLOG_XACTS_PER_PAGE + 1) {
            clog.extend(&mut b, (page * CLOG_XACTS_PER_PAGE).max(3))
                .unwrap();
        }
        faults.set_plan(plan.parse().unwrap());
    }
    let results = within(60, {
        let (clog, procs) = (Arc::clone(&clog), Arc::clone(&procs));
        move || {
            std::thread::scope(|sc| {
                let hs: Vec<_> = (0..THREADS as u32)
                    .map(|t| {
                        let (clog, procs) = (&clog, &procs);
                        sc.spawn(move || {
                            let mut b = procs.attach().unwrap();
                            let (mut set, mut errors) = (HashMap::new(), 0u32);
                            for i in 0..PER_THREAD {
                                // Spread over pages so that 4 buffers keep evicting.
                                let xid = 3 + (i * THREADS as u32 + t) * STRIDE;
                                let status = if xid % 3 == 0 {
                                    XidStatus::Aborted
                                } else {
                                    XidStatus::Committed
                                };
                                match clog.set_tree_status(&mut b, xid, &[], status, 0) {
                                    Ok(()) => {
                                        set.insert(xid, status);
                                    }
                                    Err(SlruError::Io { .. }) => errors += 1,
                                    Err(e) => panic!("unexpected error {e}"),
                                }
                                let other =
                                    3 + ((i * 7 + t) % (PER_THREAD * THREADS as u32)) * STRIDE;
                                match clog.get_status(&mut b, other) {
                                    Ok(_) => {}
                                    Err(SlruError::Io { .. }) => errors += 1,
                                    Err(e) => panic!("unexpected error {e}"),
                                }
                            }
                            (set, errors)
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>()
            })
        }
    });
    let mut b = procs.attach().unwrap();
    assert_locks_free(clog.slru(), &mut b);
    assert_no_io_in_progress(clog.slru());
    let errors: u32 = results.iter().map(|(_, e)| e).sum();
    assert_eq!(errors > 0, expect_errors, "errors: {errors}");
    faults.clear();
    for (set, _) in &results {
        for (&xid, &status) in set {
            assert_eq!(clog.get_status(&mut b, xid).unwrap().0, status, "xid {xid}");
        }
    }
    // A checkpoint writes every dirty page now that the store works.
    clog.slru().write_all(&mut b).unwrap();
    assert_locks_free(clog.slru(), &mut b);
}

#[test]
fn many_backends_through_failing_reads_and_writes_keep_every_status_and_lock() {
    clog_under_faults("read:every:5,write:every:3,read:every:7:short", false, true);
}

#[test]
fn group_update_leaders_hand_their_errors_over_and_free_every_lock() {
    clog_under_faults("read:every:4,write:every:5:short", true, true);
}

#[test]
fn latency_spikes_only_slow_the_commit_log_down() {
    clog_under_faults(
        "read:every:2:sleep=200us,write:every:3:sleep=300us,read:every:11:sleep=2ms",
        true,
        false,
    );
}

/// One step of the property test.
#[derive(Debug, Clone)]
enum Step {
    /// Read the page (exclusive lock) and check its first byte.
    Read { backend: usize, page: u64 },
    /// Look the page up with `ReadPage_ReadOnly`.
    ReadOnly { backend: usize, page: u64 },
    /// Read the page and set its first byte.
    Modify {
        backend: usize,
        page: u64,
        value: u8,
    },
    /// `SimpleLruZeroPage` of the page (it becomes the latest page).
    Zero { backend: usize, page: u64 },
    /// A checkpoint.
    WriteAll { backend: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let page = 0..12u64;
    prop_oneof![
        3 => (0..2usize, page.clone()).prop_map(|(backend, page)| Step::Read { backend, page }),
        2 => (0..2usize, page.clone()).prop_map(|(backend, page)| Step::ReadOnly { backend, page }),
        3 => (0..2usize, page.clone(), any::<u8>())
            .prop_map(|(backend, page, value)| Step::Modify { backend, page, value }),
        1 => (0..2usize, page).prop_map(|(backend, page)| Step::Zero { backend, page }),
        1 => (0..2usize).prop_map(|backend| Step::WriteAll { backend }),
    ]
}

fn rule() -> impl Strategy<Value = String> {
    let op = prop_oneof![Just("read"), Just("write")];
    let nth = prop_oneof![
        (1..20u64).prop_map(|k| k.to_string()),
        (1..6u64).prop_map(|n| format!("every:{n}"))
    ];
    let fault = prop_oneof![Just("eio"), Just("short"), Just("sleep=10us")];
    (op, nth, fault).prop_map(|(op, nth, fault)| format!("{op}:{nth}:{fault}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random plans against random page operations of two backends on 4 slots, checked
    /// against a map of what each page holds: nothing panics; a successful read sees the
    /// page's latest contents (failed reads and writes lose nothing); errors come only from
    /// planned failures; after every step every lock is free and no slot is mid-I/O; and once
    /// the faults are cleared, a checkpoint stores every page as the map says.
    #[test]
    fn random_plans_never_lose_a_page_or_a_lock(
        rules in prop::collection::vec(rule(), 0..4),
        steps in prop::collection::vec(step(), 1..50),
        banks in any::<bool>(),
    ) {
        let faults = Faults::new(rules.join(",").parse::<FaultPlan>().unwrap());
        let can_fail = rules.iter().any(|r| !r.ends_with("sleep=10us"));
        let store = Arc::new(FaultyStore::new(seeded_store(12), "pg_xact", faults.clone()));
        let slots = if banks { 32 } else { 4 };
        let s: Slru<Lw> = Slru::new(&config(slots, banks), Box::new(SharedStore(Arc::clone(&store)))).unwrap();
        let procs = ProcTable::new(3);
        let mut bs: Vec<Backend> = (0..2).map(|_| procs.attach().unwrap()).collect();
        let mut checker = procs.attach().unwrap();
        let mut model: HashMap<u64, u8> = (0..12).map(|p| (p, p as u8 + 1)).collect();
        for (i, st) in steps.iter().enumerate() {
            let outcome: Result<(), SlruError> = match *st {
                Step::Read { backend, page } => {
                    let b = &mut bs[backend];
                    s.lock_bank(b, page, LwLockMode::Exclusive).unwrap();
                    s.read_page(b, page, false).and_then(|slot| {
                        let got = s.byte(slot, 0);
                        s.unlock_bank(b, page)?;
                        assert_eq!(got, model[&page], "page {page} at step {i}");
                        Ok(())
                    })
                }
                Step::ReadOnly { backend, page } => {
                    let b = &mut bs[backend];
                    s.read_page_read_only(b, page).and_then(|slot| {
                        let got = s.byte(slot, 0);
                        s.unlock_bank(b, page)?;
                        assert_eq!(got, model[&page], "page {page} at step {i}");
                        Ok(())
                    })
                }
                Step::Modify { backend, page, value } => {
                    let b = &mut bs[backend];
                    s.lock_bank(b, page, LwLockMode::Exclusive).unwrap();
                    s.read_page(b, page, false).and_then(|slot| {
                        s.set_byte(slot, 0, value);
                        s.mark_dirty(slot);
                        model.insert(page, value);
                        s.unlock_bank(b, page)
                    })
                }
                Step::Zero { backend, page } => {
                    let b = &mut bs[backend];
                    s.lock_bank(b, page, LwLockMode::Exclusive).unwrap();
                    s.zero_page(b, page).and_then(|_| {
                        model.insert(page, 0);
                        s.unlock_bank(b, page)
                    })
                }
                Step::WriteAll { backend } => s.write_all(&mut bs[backend]),
            };
            match outcome {
                Ok(()) => {}
                Err(SlruError::Io { .. }) => prop_assert!(can_fail, "an I/O error without a planned failure"),
                Err(e) => prop_assert!(false, "unexpected error {}", e),
            }
            prop_assert!(s.locks_free(&mut checker).unwrap(), "a lock is held after step {}", i);
            for slot in 0..s.slots() {
                let stt = s.status(slot);
                prop_assert!(stt == EMPTY || stt == VALID, "slot {} in state {} after step {}", slot, stt, i);
            }
        }
        faults.clear();
        s.write_all(&mut checker).unwrap();
        for (page, value) in &model {
            let stored = store.inner().page(*page).map_or(0, |p| p[0]);
            prop_assert_eq!(stored, *value, "page {} after the checkpoint", page);
        }
    }
}

/// A store shared with the test, to look at what reached it.
struct SharedStore(Arc<FaultyStore<MemoryStore>>);

impl PageStore for SharedStore {
    fn read_page(&self, pageno: u64, buf: &mut [u8; BLCKSZ]) -> Result<(), SlruError> {
        self.0.read_page(pageno, buf)
    }

    fn write_page(&self, pageno: u64, buf: &[u8; BLCKSZ]) -> Result<(), SlruError> {
        self.0.write_page(pageno, buf)
    }
}

#[test]
fn every_fault_kind_is_counted_where_it_fired() {
    let (s, faults) = faulty_slru(4, "read:2:sleep=1ms,write:every:2:enospc");
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    for p in [1u64, 2, 3] {
        s.lock_bank(&mut b, p, LwLockMode::Exclusive).unwrap();
        s.read_page(&mut b, p, false).unwrap();
        s.unlock_bank(&mut b, p).unwrap();
    }
    assert_eq!(
        (faults.seen(IoOp::Read), faults.injected(IoOp::Read)),
        (3, 1)
    );
    assert_eq!(faults.seen(IoOp::Fsync), 0);
}
