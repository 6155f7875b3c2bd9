//! Fault injection into the WAL's flush device ([`FaultyDevice`]): a failed write or fsync is
//! PostgreSQL's PANIC — a typed error with PostgreSQL's message, every WAL lock free afterwards
//! (proved by taking each from another backend), and every later insert or flush refused with
//! [`WalError::Unusable`]; a short write is finished by `XLogWrite`'s loop; latency spikes only
//! slow things down.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::PgSpinLock;
use pglocks_sync::atomic::Ordering::SeqCst;
use pglocks_wal::{
    FaultPlan, Faults, FaultyDevice, FileDevice, FlushDevice, FlushWait, Insertion, IoOp, Record,
    RecordingDevice, Wal, WalBackend, WalConfig, WalError,
};
use proptest::prelude::*;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{mpsc, Arc};
use std::time::Duration;

type Lw = AtomicLwLock<Pg96Layout>;
type TestWal = Wal<Lw, pglocks_lwlock::AtomicVar, PgSpinLock>;

const SEGMENT: u64 = 64 * 1024;

fn config(threads: usize) -> WalConfig {
    WalConfig {
        segment_size: SEGMENT,
        wal_buffers: 8,
        ..WalConfig::new(threads)
    }
}

/// A WAL over a faulty recording device; returns the WAL, the live plan, and the device's
/// durable and written positions.
fn faulty_wal(cfg: WalConfig, plan: &str) -> (Arc<TestWal>, Faults, Arc<AtomicU64>) {
    let rec = RecordingDevice::new();
    let flushed = rec.flushed_upto();
    let faults = Faults::new(plan.parse::<FaultPlan>().unwrap());
    let dev = FaultyDevice::new(rec, faults.clone(), SEGMENT).unwrap();
    (
        Arc::new(Wal::new(cfg, Box::new(dev)).unwrap()),
        faults,
        flushed,
    )
}

fn heap(xid: u32, payload: &[u8]) -> Record<'_> {
    Record {
        xid,
        rmid: pglocks_wal::record::RM_HEAP_ID,
        info: 0,
        payload,
    }
}

/// Runs `f` on another thread and fails the test if it does not finish within `secs` (a lock
/// left held makes the next acquirer sleep forever: that must fail, not hang).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the WAL hung (a lock left held?)")
}

/// Asserts that a backend that has not touched the WAL can take every one of its locks.
fn assert_locks_free(wal: &TestWal, b: &mut Backend) {
    assert!(
        wal.locks_free(b).unwrap(),
        "a WAL lock is still held after the failure"
    );
}

/// Asserts that `r` is the refusal after a PANIC-class failure.
fn assert_unusable<T: std::fmt::Debug>(r: Result<T, WalError>, cause: &str) {
    match r {
        Err(e @ WalError::Unusable { .. }) => {
            let m = e.to_string();
            assert!(
                m.starts_with("WAL is unusable after a failed write or fsync (PostgreSQL would have PANICked): ")
                    && m.contains(cause),
                "{m}"
            );
        }
        other => panic!("expected WalError::Unusable, got {other:?}"),
    }
}

/// Runs `op(xid)` for xids 1, 2, … in a new backend (within a time limit) until it fails, and
/// returns the error.
fn first_error(
    wal: &Arc<TestWal>,
    procs: &Arc<ProcTable>,
    op: impl Fn(&TestWal, &mut Backend, &mut WalBackend, u32) -> Result<(), WalError> + Send + 'static,
) -> WalError {
    let (wal, procs) = (Arc::clone(wal), Arc::clone(procs));
    within(20, move || {
        let mut b = procs.attach().unwrap();
        let mut w = wal.backend();
        for xid in 1..1000 {
            if let Err(e) = op(&wal, &mut b, &mut w, xid) {
                return e;
            }
        }
        panic!("the planned fault never fired");
    })
}

/// One backend commits until the planned failure, then another backend checks the locks and
/// that everything is refused.
fn panic_then_refuse(cfg: WalConfig, plan: &str, expected: &str) {
    let (wal, faults, flushed) = faulty_wal(cfg, plan);
    let procs = Arc::new(ProcTable::new(2));
    let failure = first_error(&wal, &procs, move |wal, b, w, xid| {
        let end = wal.commit(b, w, xid)?;
        assert!(flushed.load(SeqCst) >= end, "commit before durable");
        Ok(())
    });
    let m = failure.to_string();
    assert!(
        matches!(failure, WalError::Device(_)) && m.starts_with("PANIC: ") && m.contains(expected),
        "{m}"
    );
    assert!(wal.is_failed());
    assert_eq!(faults.injected_total(), 1);
    // Another backend finds every lock free, and every operation refused.
    let mut b = procs.attach().unwrap();
    let mut w = wal.backend();
    assert_locks_free(&wal, &mut b);
    let before = wal.write_result(&mut b).unwrap();
    assert_unusable(wal.insert(&mut b, &mut w, &heap(7, b"after")), expected);
    assert_unusable(wal.flush(&mut b, &mut w, before.write + 1), expected);
    assert_unusable(wal.commit(&mut b, &mut w, 8), expected);
    assert_unusable(wal.switch_segment(&mut b, &mut w), expected);
    // Clearing the fault does not revive it: PostgreSQL restarts after a PANIC.
    faults.clear();
    assert_unusable(wal.commit(&mut b, &mut w, 9), expected);
    assert_eq!(wal.write_result(&mut b).unwrap(), before, "nothing moved");
    assert_locks_free(&wal, &mut b);
}

#[test]
fn a_failed_fsync_is_a_panic_that_frees_every_lock_and_refuses_everything_after() {
    panic_then_refuse(
        config(2),
        "fsync:3",
        "could not fdatasync file \"pg_wal/000000010000000000000001\": Input/output error",
    );
}

#[test]
fn a_failed_write_is_a_panic_too() {
    panic_then_refuse(
        config(2),
        "write:4:enospc",
        "could not write to log file \"pg_wal/000000010000000000000001\" at offset",
    );
}

#[test]
fn the_releases_variants_free_their_locks_too() {
    // ≤ 9.3: one WALInsertLock; ≤ 9.1: a plain acquire of WALWriteLock.
    for (insertion, flush_wait) in [
        (Insertion::OneLock, FlushWait::AcquireOrWait),
        (Insertion::OneLock, FlushWait::Acquire),
        (Insertion::Locks(8), FlushWait::Acquire),
    ] {
        let cfg = WalConfig {
            insertion,
            flush_wait,
            ..config(2)
        };
        panic_then_refuse(cfg, "fsync:2", "could not fdatasync");
    }
}

#[test]
fn a_failed_write_of_an_old_buffer_by_an_inserter_frees_the_insertion_locks() {
    // No flushes: the buffer ring (8 pages) wraps, and an inserter writes the old pages out
    // itself under WALWriteLock while holding its insertion lock (AdvanceXLInsertBuffer).
    let (wal, faults, _) = faulty_wal(config(2), "write:2");
    let procs = Arc::new(ProcTable::new(2));
    let payload = vec![0x42u8; 3000];
    let failure = first_error(&wal, &procs, move |wal, b, w, xid| {
        wal.insert(b, w, &heap(xid, &payload)).map(drop)
    });
    assert!(
        failure.to_string().contains("could not write to log file"),
        "{failure}"
    );
    assert_eq!(faults.seen(IoOp::Fsync), 0, "no flush was asked for");
    let mut b = procs.attach().unwrap();
    assert_locks_free(&wal, &mut b);
    assert_unusable(
        wal.insert(&mut b, &mut wal.backend(), &heap(1, b"x")),
        "could not write to log file",
    );
}

#[test]
fn with_many_committers_exactly_one_sees_the_panic_and_all_stop() {
    const THREADS: usize = 8;
    // The 6th fsync fails after a slow 5 ms (every fsync is slow), so other committers are
    // queued for WALWriteLock when it fails: none of them may write or fsync after it.
    let rec = RecordingDevice::new();
    let flushed = rec.flushed_upto();
    let faults = Faults::new("fsync:6:eio".parse().unwrap());
    let failing = FaultyDevice::new(rec, faults.clone(), SEGMENT).unwrap();
    let slow = Faults::new("fsync:every:1:sleep=5ms".parse().unwrap());
    let dev = FaultyDevice::new(failing, slow, SEGMENT).unwrap();
    let wal: Arc<TestWal> = Arc::new(Wal::new(config(THREADS + 1), Box::new(dev)).unwrap());
    let procs = Arc::new(ProcTable::new(THREADS + 1));
    let outcomes = within(60, {
        let (wal, procs) = (Arc::clone(&wal), Arc::clone(&procs));
        move || {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..THREADS)
                    .map(|t| {
                        let (wal, procs, flushed) = (&wal, &procs, &flushed);
                        s.spawn(move || {
                            let mut b = procs.attach().unwrap();
                            let mut w = wal.backend();
                            let mut ok = 0u32;
                            loop {
                                let xid = (t * 100_000) as u32 + ok + 1;
                                match wal.commit(&mut b, &mut w, xid) {
                                    Ok(end) => {
                                        assert!(flushed.load(SeqCst) >= end, "commit not durable");
                                        ok += 1;
                                    }
                                    Err(e) => return (ok, e),
                                }
                            }
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>()
            })
        }
    });
    let panics = outcomes
        .iter()
        .filter(|(_, e)| matches!(e, WalError::Device(_)))
        .count();
    let refused = outcomes
        .iter()
        .filter(|(_, e)| matches!(e, WalError::Unusable { .. }))
        .count();
    assert_eq!(panics, 1, "{outcomes:?}");
    assert_eq!(refused, THREADS - 1, "{outcomes:?}");
    assert_eq!(
        faults.seen(IoOp::Fsync),
        6,
        "nobody fsynced after the failure"
    );
    let mut b = procs.attach().unwrap();
    assert_locks_free(&wal, &mut b);
}

/// The segment files in `dir`, by name.
fn segments(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().len() == 24)
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// Inserts and flushes the same records in one backend on `dev`; returns how many writes were
/// short (and finished by another write).
fn write_wal(dev: Box<dyn FlushDevice>) -> u64 {
    let wal: TestWal = Wal::new(config(1), dev).unwrap();
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let mut w: WalBackend = wal.backend();
    for xid in 1..200u32 {
        let payload = vec![xid as u8; 100 + (xid as usize * 37) % 900];
        let end = wal.insert(&mut b, &mut w, &heap(xid, &payload)).unwrap();
        if xid % 3 == 0 {
            wal.flush(&mut b, &mut w, end).unwrap();
        }
    }
    wal.switch_segment(&mut b, &mut w).unwrap();
    assert!(wal.locks_free(&mut b).unwrap());
    assert!(!wal.is_failed());
    let counters = b.stats.events.counters();
    counters
        .iter()
        .find(|(name, _)| *name == "wal.short_writes")
        .map_or(0, |&(_, n)| n)
}

#[test]
fn short_writes_are_finished_by_the_write_loop_and_the_files_are_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (clean, short) = (dir.path().join("clean"), dir.path().join("short"));
    assert_eq!(
        write_wal(Box::new(FileDevice::create(&clean, SEGMENT).unwrap())),
        0
    );
    // Every write is short: each pwrite transfers half of what is left.
    let faults = Faults::new("write:every:1:short".parse().unwrap());
    let file = FileDevice::create(&short, SEGMENT).unwrap();
    let short_writes = write_wal(Box::new(
        FaultyDevice::new(file, faults.clone(), SEGMENT).unwrap(),
    ));
    assert!(short_writes > 100, "writes were short: {short_writes}");
    let (expected, got) = (segments(&clean), segments(&short));
    assert!(!expected.is_empty());
    assert_eq!(
        got.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        expected.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    for ((name, g), (_, e)) in got.iter().zip(&expected) {
        assert!(g == e, "segment {name} differs after short writes");
    }
}

#[test]
fn latency_spikes_slow_many_committers_down_but_every_commit_is_durable() {
    const THREADS: usize = 16;
    let (wal, faults, flushed) = faulty_wal(
        config(THREADS + 1),
        "fsync:every:3:sleep=2ms,write:every:4:sleep=500us,fsync:every:7:sleep=5ms",
    );
    let procs = Arc::new(ProcTable::new(THREADS + 1));
    within(120, {
        let (wal, procs, flushed) = (Arc::clone(&wal), Arc::clone(&procs), Arc::clone(&flushed));
        move || {
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let (wal, procs, flushed) = (&wal, &procs, &flushed);
                    s.spawn(move || {
                        let mut b = procs.attach().unwrap();
                        let mut w = wal.backend();
                        for i in 0..40u32 {
                            let end = wal
                                .commit(&mut b, &mut w, (t as u32) << 16 | (i + 1))
                                .unwrap();
                            assert!(flushed.load(SeqCst) >= end, "commit not durable");
                        }
                    });
                }
            });
        }
    });
    assert!(faults.injected(IoOp::Fsync) > 0);
    let mut b = procs.attach().unwrap();
    assert!(!wal.is_failed());
    assert_locks_free(&wal, &mut b);
    let done = wal.write_result(&mut b).unwrap();
    assert!(done.flush == done.write && flushed.load(SeqCst) >= done.flush);
}

/// One step of the property test.
#[derive(Debug, Clone)]
enum Step {
    Insert { backend: usize, len: usize },
    Flush { backend: usize },
    Commit { backend: usize },
    Switch { backend: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2usize, 8..3000usize).prop_map(|(backend, len)| Step::Insert { backend, len }),
        2 => (0..2usize).prop_map(|backend| Step::Flush { backend }),
        3 => (0..2usize).prop_map(|backend| Step::Commit { backend }),
        1 => (0..2usize).prop_map(|backend| Step::Switch { backend }),
    ]
}

fn rule() -> impl Strategy<Value = String> {
    let op = prop_oneof![Just("write"), Just("fsync")];
    let nth = prop_oneof![
        (1..15u64).prop_map(|k| k.to_string()),
        (1..6u64).prop_map(|n| format!("every:{n}"))
    ];
    let fault = prop_oneof![Just("eio"), Just("short"), Just("sleep=20us")];
    (op, nth, fault).prop_map(|(op, nth, fault)| {
        // A short fsync is not a plan: make it a failure.
        let fault = if op == "fsync" && fault == "short" {
            "eio"
        } else {
            fault
        };
        format!("{op}:{nth}:{fault}")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random plans against random operations of two backends: nothing panics; until the first
    /// device error every flush is durable and results only grow; the first device error is the
    /// only one, after it everything is `Unusable`; a plan without failures fails nothing; and
    /// between steps every lock is free.
    #[test]
    fn random_plans_never_break_the_wal(
        rules in prop::collection::vec(rule(), 0..4),
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let plan = rules.join(",");
        let can_fail = rules.iter().any(|r| r.ends_with(":eio"));
        let (wal, _faults, flushed) = faulty_wal(config(3), &plan);
        let procs = ProcTable::new(3);
        let mut bs: Vec<Backend> = (0..2).map(|_| procs.attach().unwrap()).collect();
        let mut ws: Vec<WalBackend> = (0..2).map(|_| wal.backend()).collect();
        let mut checker = procs.attach().unwrap();
        let mut ends = [0u64; 2];
        let mut failed = false;
        let mut last = wal.write_result(&mut checker).unwrap();
        let initial = last.flush;
        for (i, s) in steps.iter().enumerate() {
            let (backend, r) = match *s {
                Step::Insert { backend, len } => {
                    let p = vec![i as u8; len];
                    let r = wal.insert(&mut bs[backend], &mut ws[backend], &heap(i as u32 + 1, &p));
                    if let Ok(end) = r { ends[backend] = end; }
                    (backend, r.map(drop))
                }
                Step::Flush { backend } => {
                    let target = ends[backend];
                    let r = wal.flush(&mut bs[backend], &mut ws[backend], target);
                    if r.is_ok() {
                        prop_assert!(flushed.load(SeqCst) >= target, "flush not durable");
                    }
                    (backend, r)
                }
                Step::Commit { backend } => {
                    let r = wal.commit(&mut bs[backend], &mut ws[backend], i as u32 + 1);
                    if let Ok(end) = r {
                        prop_assert!(flushed.load(SeqCst) >= end, "commit not durable");
                    }
                    (backend, r.map(drop))
                }
                Step::Switch { backend } => {
                    (backend, wal.switch_segment(&mut bs[backend], &mut ws[backend]).map(drop))
                }
            };
            let _ = backend;
            match r {
                Ok(()) => prop_assert!(!failed, "an operation succeeded after the PANIC"),
                Err(WalError::Device(e)) => {
                    prop_assert!(!failed, "a second device error: {e}");
                    prop_assert!(can_fail, "failed without a failure planned: {e}");
                    failed = true;
                }
                Err(e @ WalError::Unusable { .. }) => prop_assert!(failed, "{e}"),
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
            prop_assert_eq!(wal.is_failed(), failed);
            prop_assert!(wal.locks_free(&mut checker).unwrap(), "a lock is held after step {}", i);
            let now = wal.write_result(&mut checker).unwrap();
            prop_assert!(now.write >= last.write && now.flush >= last.flush && now.flush <= now.write);
            prop_assert!(
                flushed.load(SeqCst).max(initial) >= now.flush,
                "published flush ahead of the device"
            );
            last = now;
        }
    }
}
