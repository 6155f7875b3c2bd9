//! proptest state machine: one backend's inserts, flushes, segment switches and (with
//! `synchronous_commit = off`) asynchronous commits, and the WAL writer's rounds
//! (`XLogBackgroundFlush`), against a sequential reference that lays WAL out byte by byte
//! (skipping a 40-byte header at every segment start and a 24-byte one at every other page
//! start) instead of through usable byte positions: every returned LSN, every record read back
//! (position, prev-link, payload) and every flush must agree with it. An asynchronous commit
//! flushes nothing; a WAL writer's round flushes whole pages first, and two rounds in a row make
//! every asynchronous commit durable.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_wal::{Insertion, NullDevice, Record, Wal, WalConfig, WalWriter};
use proptest::prelude::*;

const SEG: u64 = 64 * 1024;
const PAGE: u64 = 8192;

#[derive(Debug, Clone)]
enum Op {
    Insert(usize),
    Flush,
    Switch,
    /// A commit: synchronous or not, as the WAL is configured.
    Commit,
    /// Two rounds of the WAL writer.
    BackgroundFlush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..3000).prop_map(Op::Insert),
        2 => Just(Op::Flush),
        1 => Just(Op::Switch),
        3 => Just(Op::Commit),
        2 => Just(Op::BackgroundFlush),
    ]
}

fn wal_writer() -> impl Strategy<Value = Option<WalWriter>> {
    prop_oneof![
        Just(None),
        Just(Some(WalWriter::Timed)),
        Just(Some(WalWriter::Latch)),
        Just(Some(WalWriter::LatchFlushAfter)),
    ]
}

/// The reference: WAL as a byte stream with headers, one record after another.
struct Model {
    /// Where the next byte goes (possibly a page boundary, before its header).
    pos: u64,
    /// Start of the last record.
    prev: u64,
    /// (start, prev-link, payload) of the records, in order.
    records: Vec<(u64, u64, Vec<u8>)>,
}

impl Model {
    fn header(at: u64) -> u64 {
        if at % SEG == 0 {
            40
        } else {
            24
        }
    }

    /// Skips a page header if `pos` is at a page start.
    fn start(&self) -> u64 {
        if self.pos % PAGE == 0 {
            self.pos + Self::header(self.pos)
        } else {
            self.pos
        }
    }

    /// Lays `n` bytes from the current position; returns (start, end).
    fn lay(&mut self, n: u64) -> (u64, u64) {
        let start = self.start();
        let mut left = n.div_ceil(8) * 8;
        while left > 0 {
            if self.pos % PAGE == 0 {
                self.pos += Self::header(self.pos);
            }
            let step = left.min(PAGE - self.pos % PAGE);
            self.pos += step;
            left -= step;
        }
        (start, self.pos)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn wal_matches_a_byte_by_byte_layout(
        ops in prop::collection::vec(op(), 1..60),
        one_lock in any::<bool>(),
        asynchronous in wal_writer(),
    ) {
        let cfg = WalConfig {
            insertion: if one_lock { Insertion::OneLock } else { Insertion::Locks(8) },
            segment_size: SEG,
            wal_buffers: 1024,
            synchronous_commit: asynchronous.is_none(),
            wal_writer: asynchronous.unwrap_or(WalWriter::Latch),
            // Every round fsyncs (9.6+ would wait for wal_writer_delay or 1 MB).
            wal_writer_flush_after: 0,
            ..WalConfig::new(2)
        };
        let wal: Wal<AtomicLwLock<Pg96Layout>> = Wal::new(cfg, Box::new(NullDevice)).unwrap();
        let procs = ProcTable::new(2);
        let mut b = procs.attach().unwrap();
        let mut w = wal.backend();
        let mut writer = procs.attach().unwrap();
        let mut st = wal.wal_writer_start(&mut writer).unwrap();
        let mut last_commit = 0;
        let mut m = Model { pos: SEG, prev: 0, records: Vec::new() };
        let mut last_end = SEG; // nothing inserted: WAL ends where segment 1 begins
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Insert(len) => {
                    let payload: Vec<u8> = (0..len).map(|j| (i * 7 + j) as u8).collect();
                    let rec = Record { xid: i as u32, rmid: 10, info: 0, payload: &payload };
                    let end = wal.insert(&mut b, &mut w, &rec).unwrap();
                    let (start, model_end) = m.lay(24 + len as u64);
                    prop_assert_eq!(end, model_end);
                    m.records.push((start, m.prev, payload));
                    m.prev = start;
                    last_end = end;
                }
                Op::Flush => {
                    wal.flush(&mut b, &mut w, last_end).unwrap();
                    prop_assert!(wal.write_result(&mut b).unwrap().flush >= last_end);
                }
                Op::Commit => {
                    let before = wal.write_result(&mut b).unwrap().flush;
                    let rec = Record::commit(i as u32);
                    let end = wal.commit(&mut b, &mut w, i as u32).unwrap();
                    let (start, model_end) = m.lay(rec.total_len());
                    prop_assert_eq!(end, model_end);
                    m.records.push((start, m.prev, rec.payload.to_vec()));
                    m.prev = start;
                    last_end = end;
                    last_commit = end;
                    let after = wal.write_result(&mut b).unwrap().flush;
                    if asynchronous.is_some() {
                        prop_assert_eq!(after, before, "an asynchronous commit flushed");
                        prop_assert_eq!(wal.async_xact_lsn(&mut b).unwrap(), end);
                    } else {
                        prop_assert!(after >= end);
                    }
                }
                Op::BackgroundFlush => {
                    wal.background_flush(&mut writer, &mut st).unwrap();
                    let first = wal.write_result(&mut b).unwrap().flush;
                    prop_assert!(first % PAGE == 0 || first >= last_commit,
                        "a round flushes whole pages, or up to the newest async commit");
                    wal.background_flush(&mut writer, &mut st).unwrap();
                    let second = wal.write_result(&mut b).unwrap().flush;
                    prop_assert!(second >= first && second >= last_commit);
                    prop_assert!(second <= m.pos.max(SEG), "flushed past the end of WAL");
                }
                Op::Switch => {
                    let got = wal.switch_segment(&mut b, &mut w).unwrap();
                    if m.pos % SEG == 0 {
                        prop_assert_eq!(got, m.pos, "nothing to switch");
                    } else {
                        let (start, end) = m.lay(24);
                        prop_assert_eq!(got, end);
                        m.records.push((start, m.prev, Vec::new()));
                        m.prev = start;
                        m.pos = m.pos.div_ceil(SEG) * SEG;
                        prop_assert!(wal.write_result(&mut b).unwrap().flush >= m.pos);
                        last_end = m.pos;
                    }
                }
            }
        }
        let read = wal.read_records(wal.start(), m.pos).unwrap();
        prop_assert_eq!(read.len(), m.records.len());
        for (r, (start, prev, payload)) in read.iter().zip(&m.records) {
            prop_assert_eq!(r.lsn, *start);
            prop_assert_eq!(r.prev, *prev);
            prop_assert_eq!(&r.payload, payload);
        }
    }
}
