//! loom models of WAL insertion and flush:
//! - reservation plus `WaitXLogInsertionsToFinish`: whatever a flusher is told is finished
//!   reads back as complete records with correct CRCs (a flush never covers a byte range whose
//!   copy has not finished), for a record that fits in its page and for one that crosses into a
//!   page its inserter must initialise first (the `insertingAt` advertisement);
//! - group commit: two backends commit concurrently and neither `XLogFlush` returns before the
//!   device has flushed past its record;
//! - asynchronous commit: a backend commits with `synchronous_commit = off` while the WAL
//!   writer runs a round; what the round flushed reads back whole, and two more rounds after
//!   the commit make it durable.
//!
//! The page bytes are std atomics (data ordered by the locks), so loom checks the protocol's
//! interleavings, not the memory ordering of the bytes themselves.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-wal --test loom_wal --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_lwlock::{AtomicLwLock, AtomicVar, LockedVar, Pg96Layout, VarProtocol};
use pglocks_proc::ProcTable;
use pglocks_spin::PgSpinLock;
use pglocks_wal::{Insertion, NullDevice, Record, RecordingDevice, Wal, WalConfig};

type Lw = AtomicLwLock<Pg96Layout>;

fn config() -> WalConfig {
    WalConfig {
        insertion: Insertion::Locks(2),
        wal_buffers: 4,
        segment_size: 64 * 1024,
        ..WalConfig::new(2)
    }
}

fn finished_insertions_read_back<P: VarProtocol>(payload_len: usize) {
    pglocks_sync::loom_builder(2).check(move || {
        let procs = ProcTable::new(2);
        let wal: Arc<Wal<Lw, P, PgSpinLock>> =
            Arc::new(Wal::new(config(), Box::new(NullDevice)).unwrap());
        let (w2, p2) = (Arc::clone(&wal), procs.clone());
        let t = loom::thread::spawn(move || {
            let mut b = p2.attach().unwrap();
            let mut w = w2.backend();
            let payload = vec![7u8; payload_len];
            let rec = Record {
                xid: 1,
                rmid: 10,
                info: 0,
                payload: &payload,
            };
            w2.insert(&mut b, &mut w, &rec).unwrap()
        });
        let mut b = procs.attach().unwrap();
        let done = wal.wait_insertions_to_finish(&mut b, u64::MAX).unwrap();
        // Everything before `done` is copied: every record ending there reads back whole.
        let records = wal.read_records(wal.start(), done).unwrap();
        for r in &records {
            assert_eq!(r.payload, vec![7u8; payload_len]);
        }
        let end = t.join().unwrap();
        assert!(records.len() == 1 && done >= end || records.is_empty() && done < end);
    });
}

#[test]
fn a_finished_insertion_is_complete() {
    finished_insertions_read_back::<AtomicVar>(40);
}

#[test]
fn a_record_crossing_a_page_is_complete_when_reported_finished() {
    // 9000 bytes cross from the first page into the second, which the inserter initialises
    // after advertising its position.
    finished_insertions_read_back::<LockedVar>(9000);
}

#[test]
fn group_commit_never_returns_before_the_flush() {
    pglocks_sync::loom_builder(2).check(|| {
        let procs = ProcTable::new(2);
        let dev = RecordingDevice::new();
        let flushed = dev.flushed_upto();
        let wal: Arc<Wal<Lw>> = Arc::new(Wal::new(config(), Box::new(dev)).unwrap());
        let commit = {
            let (wal, procs, flushed) = (Arc::clone(&wal), procs.clone(), flushed.clone());
            move || {
                let mut b = procs.attach().unwrap();
                let mut w = wal.backend();
                let end = wal.commit(&mut b, &mut w, 1).unwrap();
                assert!(
                    flushed.load(std::sync::atomic::Ordering::SeqCst) >= end,
                    "XLogFlush returned before the device flushed"
                );
            }
        };
        let t = loom::thread::spawn(commit.clone());
        commit();
        t.join().unwrap();
    });
}

#[test]
fn the_wal_writer_makes_an_async_commit_durable() {
    pglocks_sync::loom_builder(2).check(|| {
        let procs = ProcTable::new(2);
        let dev = RecordingDevice::new();
        let flushed = dev.flushed_upto();
        let cfg = WalConfig {
            synchronous_commit: false,
            ..config()
        };
        let wal: Arc<Wal<Lw>> = Arc::new(Wal::new(cfg, Box::new(dev)).unwrap());
        let mut writer = procs.attach().unwrap();
        let mut st = wal.wal_writer_start(&mut writer).unwrap();
        let t = {
            let (wal, procs) = (Arc::clone(&wal), procs.clone());
            loom::thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                let mut w = wal.backend();
                wal.commit(&mut b, &mut w, 1).unwrap()
            })
        };
        wal.background_flush(&mut writer, &mut st).unwrap();
        let upto = flushed.load(std::sync::atomic::Ordering::SeqCst);
        if upto > wal.start() {
            let records = wal.read_records(wal.start(), upto).unwrap();
            assert_eq!(records.len(), 1, "the commit, whole");
        }
        let end = t.join().unwrap();
        for _ in 0..2 {
            wal.background_flush(&mut writer, &mut st).unwrap();
        }
        assert!(flushed.load(std::sync::atomic::Ordering::SeqCst) >= end);
    });
}
