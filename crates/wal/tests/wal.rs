//! The WAL model against its invariants: concurrent inserts lay records out contiguously, in
//! reservation order, with correct prev-links and CRCs; every flush returns only once the device
//! has flushed past its target; the releases' variants (one insertion lock, plain acquire of
//! WALWriteLock, commit_delay) keep those properties.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, AtomicVar, LockedVar, Pg96Layout, SpinlockProtectedLwLock};
use pglocks_proc::ProcTable;
use pglocks_spin::PgSpinLock;
use pglocks_sync::atomic::Ordering::SeqCst;
use pglocks_wal::{
    FlushDevice, FlushWait, Insertion, NullDevice, Record, RecordingDevice, Wal, WalConfig,
    WalError, WalWriter,
};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

type Lw = AtomicLwLock<Pg96Layout>;

fn config(threads: usize, insertion: Insertion, wal_buffers: usize) -> WalConfig {
    WalConfig {
        insertion,
        wal_buffers,
        segment_size: 64 * 1024,
        ..WalConfig::new(threads)
    }
}

/// A payload that says who wrote it: backend, sequence number, then filler of `len` bytes.
fn payload(backend: usize, seq: u32, len: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(len.max(8));
    p.extend_from_slice(&(backend as u32).to_le_bytes());
    p.extend_from_slice(&seq.to_le_bytes());
    p.resize(len.max(8), (seq as u8).wrapping_mul(31) ^ backend as u8);
    p
}

/// Runs `threads` backends that each insert `sizes` records (and, with `flush`, flush each),
/// then reads the whole WAL back and checks it.
fn insert_and_check<K: pglocks_lwlock::RawLwLock, P: pglocks_lwlock::VarProtocol>(
    cfg: WalConfig,
    threads: usize,
    sizes: &[usize],
    flush: bool,
) -> Result<(), TestCaseError> {
    let recording = RecordingDevice::new();
    let flushed = recording.flushed_upto();
    let wal: Arc<Wal<K, P, PgSpinLock>> = Arc::new(Wal::new(cfg, Box::new(recording)).unwrap());
    let procs = Arc::new(ProcTable::new(threads + 1));
    let ends: Vec<Vec<(u64, Vec<u8>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (wal, procs, flushed) = (&wal, &procs, &flushed);
                s.spawn(move || {
                    let mut b = procs.attach().unwrap();
                    let mut w = wal.backend();
                    let mut mine = Vec::new();
                    for (i, &len) in sizes.iter().enumerate() {
                        let p = payload(t, i as u32, len);
                        let rec = Record {
                            xid: t as u32 + 1,
                            rmid: pglocks_wal::record::RM_HEAP_ID,
                            info: 0,
                            payload: &p,
                        };
                        let end = wal.insert(&mut b, &mut w, &rec).unwrap();
                        if flush {
                            wal.flush(&mut b, &mut w, end).unwrap();
                            // Group-commit safety: the device has flushed past our record.
                            assert!(flushed.load(SeqCst) >= end, "flush returned early");
                        }
                        mine.push((end, p));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut b = procs.attach().unwrap();
    let mut w = wal.backend();
    let tip = {
        // Flush everything so the final state is quiescent, then read it all back.
        let tip = wal.wait_insertions_to_finish(&mut b, u64::MAX).unwrap();
        wal.flush(&mut b, &mut w, tip).unwrap();
        tip
    };
    let records = wal
        .read_records(wal.start(), tip)
        .map_err(TestCaseError::fail)?;
    let total: usize = ends.iter().map(Vec::len).sum();
    prop_assert_eq!(records.len(), total);
    let mut prev = 0;
    let mut expect_start = wal.start();
    for r in &records {
        prop_assert_eq!(r.lsn, expect_start, "records are contiguous");
        prop_assert_eq!(r.prev, prev, "prev-link of the record at {:X}", r.lsn);
        prev = r.lsn;
        expect_start = wal
            .layout()
            .bytepos_to_recptr(wal.layout().recptr_to_bytepos(r.end));
        let backend = u32::from_le_bytes(r.payload[..4].try_into().unwrap()) as usize;
        let seq = u32::from_le_bytes(r.payload[4..8].try_into().unwrap()) as usize;
        let (end, p) = &ends[backend][seq];
        prop_assert_eq!(*end, r.end, "insert returned the record's end");
        prop_assert_eq!(&r.payload, p);
    }
    // Each backend's records are in its own order.
    for t in 0..threads {
        let seqs: Vec<u32> = records
            .iter()
            .filter(|r| r.xid == t as u32 + 1)
            .map(|r| u32::from_le_bytes(r.payload[4..8].try_into().unwrap()))
            .collect();
        prop_assert!(seqs.windows(2).all(|x| x[0] < x[1]));
    }
    prop_assert!(flushed.load(SeqCst) >= tip);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Concurrent inserts of mixed sizes (some larger than a page, crossing pages and small
    /// segments, wrapping a small buffer ring) read back contiguous and in order.
    #[test]
    fn concurrent_inserts_lay_out_contiguously(
        threads in 1usize..4,
        sizes in prop::collection::vec(prop_oneof![8usize..200, 200usize..20_000], 1..40),
        one_lock in any::<bool>(),
        flush in any::<bool>(),
    ) {
        let insertion = if one_lock { Insertion::OneLock } else { Insertion::Locks(8) };
        // The ring must hold every page a flush-less run leaves unread.
        let cfg = config(threads + 1, insertion, 4096);
        insert_and_check::<Lw, AtomicVar>(cfg, threads, &sizes, flush)?;
    }
}

/// `threads` backends insert through a ring of 4 buffers with `locks` insertion locks, so
/// inserters must write old pages out (advertising their position, waiting for older insertions,
/// taking WALWriteLock) to proceed, and share insertion locks when there are more of them than
/// locks. Afterwards the records still in the ring read back through their prev-links, each
/// backend's in its own order.
fn wrap_the_ring<K: pglocks_lwlock::RawLwLock>(threads: usize, locks: usize) {
    let cfg = config(threads + 1, Insertion::Locks(locks), 4);
    let wal: Arc<Wal<K>> = Arc::new(Wal::new(cfg, Box::new(NullDevice)).unwrap());
    let procs = ProcTable::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (wal, procs) = (&wal, &procs);
            s.spawn(move || {
                let mut b = procs.attach().unwrap();
                let mut w = wal.backend();
                for i in 0..300 {
                    let p = payload(t, i, 100 + (i as usize * 37) % 3000);
                    let rec = Record {
                        xid: t as u32,
                        rmid: 10,
                        info: 0,
                        payload: &p,
                    };
                    let end = wal.insert(&mut b, &mut w, &rec).unwrap();
                    if i % 50 == 0 {
                        wal.flush(&mut b, &mut w, end).unwrap();
                    }
                }
            });
        }
    });
    let mut b = procs.attach().unwrap();
    let tip = wal.wait_insertions_to_finish(&mut b, u64::MAX).unwrap();
    assert!(
        tip > wal.start() + 4 * 8192 * 10,
        "wrapped the ring many times"
    );
    // Walk back from the last record while its pages are still in the ring.
    let mut at = wal.last_record(&mut b).unwrap().unwrap();
    let mut last_seq = vec![u32::MAX; threads];
    let mut walked = 0;
    while let Ok(r) = wal.read_record(at) {
        let seq = u32::from_le_bytes(r.payload[4..8].try_into().unwrap());
        let t = r.xid as usize;
        assert_eq!(
            r.payload,
            payload(t, seq, r.payload.len()),
            "record at {at:X}"
        );
        assert!(seq < last_seq[t], "backend {t}'s records out of order");
        last_seq[t] = seq;
        walked += 1;
        at = r.prev;
    }
    assert!(walked >= 3, "walked back {walked} records");
}

#[test]
fn a_small_ring_is_written_out_as_it_wraps() {
    wrap_the_ring::<Lw>(3, 8);
    wrap_the_ring::<SpinlockProtectedLwLock<PgSpinLock>>(3, 8);
    // Peers without LWLockWaitForVar of their own (the trait's polling default).
    wrap_the_ring::<pglocks_lwlock::ParkingLotLwLock>(3, 8);
    wrap_the_ring::<pglocks_lwlock::HandoffLwLock>(3, 8);
}

#[test]
fn more_backends_than_insertion_locks() {
    // Backends queue on each other's insertion locks, and an evicting inserter waits for
    // insertingAt on a lock with exclusive waiters queued: 9.4's variable waiters must be at
    // the front of the queue for LWLockUpdateVar to wake them (they were not: this hung).
    wrap_the_ring::<SpinlockProtectedLwLock<PgSpinLock>>(6, 2);
    wrap_the_ring::<Lw>(6, 2);
    wrap_the_ring::<pglocks_lwlock::MutexWaitListLwLock>(6, 1);
}

#[test]
fn single_lock_and_plain_acquire_still_group_commit_safely() {
    for (insertion, flush_wait) in [
        (Insertion::OneLock, FlushWait::Acquire),
        (Insertion::OneLock, FlushWait::AcquireOrWait),
        (Insertion::Locks(8), FlushWait::AcquireOrWait),
    ] {
        let cfg = WalConfig {
            flush_wait,
            commit_delay: Duration::from_micros(50),
            commit_siblings: 1,
            commit_delay_in_flush: insertion == Insertion::Locks(8),
            ..config(4, insertion, 64)
        };
        insert_and_check::<SpinlockProtectedLwLock<PgSpinLock>, LockedVar>(cfg, 3, &[40; 30], true)
            .unwrap();
    }
}

/// Three backends each commit `commits` times on a WAL of `cfg` (a device of no cost, with
/// `fsync` on, or the null device, `fsync = off`); returns their statistics, merged.
fn three_committers(
    cfg: WalConfig,
    commits: u32,
    fsync: bool,
) -> pglocks_proc::stats::BackendStats {
    let device: Box<dyn FlushDevice> = if fsync {
        Box::new(RecordingDevice::new())
    } else {
        Box::new(NullDevice)
    };
    let wal: Arc<Wal<Lw>> = Arc::new(Wal::new(cfg, device).unwrap());
    assert_eq!(wal.enable_fsync(), fsync);
    let procs = ProcTable::new(4);
    let mut all = pglocks_proc::stats::BackendStats::default();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let (wal, procs) = (&wal, &procs);
                s.spawn(move || {
                    let mut b = procs.attach().unwrap();
                    let mut w = wal.backend();
                    for x in 0..commits {
                        wal.commit(&mut b, &mut w, x).unwrap();
                    }
                    b.take_stats()
                })
            })
            .collect();
        for h in hs {
            all.merge(&h.join().unwrap());
        }
    });
    all
}

/// Commits from three backends with a 50 µs `commit_delay` and `commit_siblings` = 0 (so
/// the delay is always due, given `fsync`): returns (commits, flushes, `CommitDelay` sleeps).
fn commit_delays(in_flush: bool, insertion: Insertion, fsync: bool) -> (u64, u64, u64) {
    let cfg = WalConfig {
        commit_delay: Duration::from_micros(50),
        commit_siblings: 0,
        commit_delay_in_flush: in_flush,
        ..config(4, insertion, 64)
    };
    let all = three_committers(cfg, 40, fsync);
    let counters = all.events.counters();
    let get = |n: &str| counters.iter().find(|c| c.0 == n).map_or(0, |c| c.1);
    let sleeps = all
        .waits
        .entries()
        .iter()
        .find(|e| e.lock == "CommitDelay")
        .map_or(0, |e| e.count);
    (get("wal.commits"), get("wal.flushes"), sleeps)
}

#[test]
fn commit_delay_is_slept_by_the_leader_from_93_and_by_every_committer_before() {
    for insertion in [Insertion::Locks(8), Insertion::OneLock] {
        // 9.3+: one sleep per flush, by the backend about to flush.
        let (commits, flushes, sleeps) = commit_delays(true, insertion, true);
        assert_eq!(commits, 120);
        assert_eq!(sleeps, flushes, "{insertion:?}");
        // <= 9.2: every committer sleeps before XLogFlush.
        let (commits, _, sleeps) = commit_delays(false, insertion, true);
        assert_eq!(sleeps, commits, "{insertion:?}");
    }
}

#[test]
fn commit_delay_is_not_slept_with_fsync_off() {
    // `enableFsync` is checked in XLogFlush (9.3+) and in RecordTransactionCommit (<= 9.2).
    for in_flush in [true, false] {
        for insertion in [Insertion::Locks(8), Insertion::OneLock] {
            let (commits, flushes, sleeps) = commit_delays(in_flush, insertion, false);
            assert_eq!(commits, 120);
            assert!(flushes > 0);
            assert_eq!(sleeps, 0, "{insertion:?}, in flush: {in_flush}");
        }
    }
}

#[test]
fn an_async_commit_is_not_flushed_and_never_sleeps_commit_delay() {
    let cfg = WalConfig {
        commit_delay: Duration::from_micros(50),
        commit_siblings: 0,
        commit_delay_in_flush: false,
        synchronous_commit: false,
        ..config(4, Insertion::OneLock, 64)
    };
    let all = three_committers(cfg, 40, true);
    let counters = all.events.counters();
    let get = |n: &str| counters.iter().find(|c| c.0 == n).map_or(0, |c| c.1);
    assert_eq!((get("wal.commits"), get("wal.async_commits")), (120, 120));
    assert_eq!(get("wal.flushes"), 0);
    assert!(all.waits.entries().iter().all(|e| e.lock != "CommitDelay"));
}

#[test]
fn asynchronous_commit_is_refused_before_83() {
    let cfg = WalConfig {
        synchronous_commit: false,
        wal_writer: WalWriter::Absent,
        ..config(2, Insertion::OneLock, 64)
    };
    let e = Wal::<Lw>::new(cfg, Box::new(NullDevice)).err().unwrap();
    assert!(e.to_string().contains("8.3"), "{e}");
    let cfg = WalConfig {
        wal_writer_delay: Duration::ZERO,
        ..config(2, Insertion::OneLock, 64)
    };
    let e = Wal::<Lw>::new(cfg, Box::new(NullDevice)).err().unwrap();
    assert!(e.to_string().contains("wal_writer_delay"), "{e}");
}

#[test]
fn minimum_active_backends_counts_the_others() {
    let wal: Wal<Lw> = Wal::new(config(4, Insertion::Locks(8), 64), Box::new(NullDevice)).unwrap();
    let procs = ProcTable::new(4);
    let bs: Vec<_> = (0..4).map(|_| procs.attach().unwrap()).collect();
    assert!(wal.minimum_active_backends(&bs[0], 0));
    assert!(!wal.minimum_active_backends(&bs[0], 1));
    wal.set_active(&bs[0], true);
    // Itself does not count.
    assert!(!wal.minimum_active_backends(&bs[0], 1));
    wal.set_active(&bs[1], true);
    wal.set_active(&bs[2], true);
    assert!(wal.minimum_active_backends(&bs[0], 2));
    assert!(!wal.minimum_active_backends(&bs[0], 3));
    assert!(wal.minimum_active_backends(&bs[3], 3));
}

#[test]
fn commits_are_counted_per_flush() {
    let cfg = WalConfig {
        count_commits: true,
        ..config(4, Insertion::Locks(8), 64)
    };
    let all = three_committers(cfg, 200, false);
    let counters = all.events.counters();
    let get = |n: &str| counters.iter().find(|c| c.0 == n).map_or(0, |c| c.1);
    assert_eq!(get("wal.commits"), 600);
    let flushes = get("wal.flushes");
    assert!((1..=600).contains(&flushes), "{flushes}");
    let per_flush = all
        .events
        .distributions()
        .into_iter()
        .find(|d| d.0 == "wal.commits_per_flush")
        .unwrap()
        .1;
    // Every commit is counted in exactly one flush.
    assert_eq!(per_flush.sum(), 600);
    assert_eq!(per_flush.count(), flushes);
}

#[test]
fn a_segment_switch_ends_the_segment_and_reads_back() {
    const SEG: u64 = 64 * 1024;
    // Once with the switch record inside its segment, once starting 8 bytes before the end,
    // so that the record itself crosses into the next segment, whose rest it then consumes.
    for switch_at in [None, Some(2 * SEG - 8)] {
        let cfg = config(2, Insertion::Locks(8), 64);
        let wal: Wal<Lw> = Wal::new(cfg, Box::new(NullDevice)).unwrap();
        let procs = ProcTable::new(2);
        let mut b = procs.attach().unwrap();
        let mut w = wal.backend();
        let l = *wal.layout();
        let fill = switch_at.map_or(100, |at| {
            (l.recptr_to_bytepos(at) - l.recptr_to_bytepos(wal.start()) - 24) as usize
        });
        let p = payload(0, 0, fill);
        let rec = Record {
            xid: 1,
            rmid: 10,
            info: 0,
            payload: &p,
        };
        let first_end = wal.insert(&mut b, &mut w, &rec).unwrap();
        let switch_end = wal.switch_segment(&mut b, &mut w).unwrap();
        // The switch returns the end of its own record, and has flushed the whole segment.
        let switch_start = l.bytepos_to_recptr(l.recptr_to_bytepos(first_end));
        assert_eq!(
            l.recptr_to_bytepos(switch_end),
            l.recptr_to_bytepos(switch_start) + 24
        );
        let next_segment = switch_end.div_ceil(SEG) * SEG;
        assert!(wal.write_result(&mut b).unwrap().flush >= next_segment);
        // At a segment start there is nothing to switch.
        assert_eq!(wal.switch_segment(&mut b, &mut w).unwrap(), next_segment);
        let after = wal.insert(&mut b, &mut w, &rec).unwrap();
        wal.flush(&mut b, &mut w, after).unwrap();
        let records = wal.read_records(wal.start(), after).unwrap();
        assert_eq!(records.len(), 3, "{switch_at:?}");
        assert_eq!(records[1].rmid, pglocks_wal::record::RM_XLOG_ID);
        assert_eq!(records[1].lsn, switch_start);
        assert_eq!(
            records[2].lsn,
            next_segment + 40,
            "the next record follows the long header"
        );
        assert_eq!(records[2].prev, records[1].lsn);
    }
}

#[test]
fn misuse_is_a_typed_error() {
    let e = Wal::<Lw>::new(config(2, Insertion::Locks(300), 64), Box::new(NullDevice))
        .err()
        .unwrap();
    assert!(e.to_string().contains("1 to 64"), "{e}");
    let wal = Wal::<Lw>::new(config(2, Insertion::Locks(8), 64), Box::new(NullDevice)).unwrap();
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let mut w = wal.backend();
    for (rec, msg) in [
        (
            Record {
                xid: 1,
                rmid: 10,
                info: 0,
                payload: &[],
            },
            "must carry data",
        ),
        (
            Record {
                xid: 1,
                rmid: 0,
                info: 0x40,
                payload: &[1],
            },
            "switch_segment",
        ),
    ] {
        let e = wal.insert(&mut b, &mut w, &rec).unwrap_err().to_string();
        assert!(e.contains(msg), "{e}");
    }
    let mut cfg = config(2, Insertion::Locks(0), 64);
    let e = Wal::<Lw>::new(cfg.clone(), Box::new(NullDevice))
        .err()
        .unwrap();
    assert!(e.to_string().contains("insertion locks"), "{e}");
    cfg.insertion = Insertion::Locks(8);
    cfg.segment_size = 1000;
    let e = Wal::<Lw>::new(cfg, Box::new(NullDevice)).err().unwrap();
    assert!(matches!(e, WalError::Config(_)), "{e}");
}

#[test]
fn the_file_device_gets_real_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let dev = pglocks_wal::FileDevice::create(&dir, 64 * 1024).unwrap();
    let cfg = config(2, Insertion::Locks(8), 16);
    let wal: Wal<Lw> = Wal::new(cfg, Box::new(dev)).unwrap();
    let procs = ProcTable::new(2);
    let mut b = procs.attach().unwrap();
    let mut w = wal.backend();
    let mut end = 0;
    for i in 0..3000 {
        end = wal.commit(&mut b, &mut w, i).unwrap();
    }
    assert!(end > 2 * 64 * 1024, "crossed into a third segment");
    // Segment 1 starts with a long page header: magic 0xD110, XLP_LONG_HEADER, timeline 1,
    // page address 64 KB, then the first record at offset 40 with an invalid prev-link.
    let seg1 = std::fs::read(dir.join("000000010000000000000001")).unwrap();
    assert_eq!(seg1.len(), 64 * 1024);
    assert_eq!(u16::from_le_bytes([seg1[0], seg1[1]]), 0xD110);
    // XLP_LONG_HEADER | XLP_BKP_REMOVABLE.
    assert_eq!(u16::from_le_bytes([seg1[2], seg1[3]]), 0x0006);
    assert_eq!(
        u64::from_le_bytes(seg1[8..16].try_into().unwrap()),
        64 * 1024
    );
    assert_eq!(
        u32::from_le_bytes(seg1[40..44].try_into().unwrap()),
        34,
        "xl_tot_len"
    );
    assert_eq!(
        u64::from_le_bytes(seg1[48..56].try_into().unwrap()),
        0,
        "xl_prev"
    );
    // The second record (at 40 + MAXALIGN(34)) has a prev-link to the first.
    assert_eq!(
        u64::from_le_bytes(seg1[88..96].try_into().unwrap()),
        64 * 1024 + 40
    );
}
