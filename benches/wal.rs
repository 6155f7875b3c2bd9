//! Uncontended cost, on one thread, of WAL insertion and of a commit with a free flush: a
//! 100-byte record inserted under one of 8 insertion locks (9.4+) and under the single
//! `WALInsertLock` (≤ 9.3), the same record's encoding and CRC alone (the floor: what any
//! design pays before it copies), and `RecordTransactionCommit`'s WAL part (insert a commit
//! record, `XLogFlush` it) on the null device, where it measures the lock and bookkeeping cost
//! of a flush.
//!
//! Runs short by default; `PGLOCKS_BENCH_LONG=1` for criterion's defaults.

use criterion::{criterion_group, BenchmarkGroup, Criterion};
use pglocks_lwlock::{AtomicLwLock, AtomicVar, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_spin::PgSpinLock;
use pglocks_wal::{Insertion, NullDevice, Record, Wal, WalConfig};
use std::hint::black_box;

mod common;
use common::config;

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;
type PgWal = Wal<AtomicLwLock<Pg96Layout>, AtomicVar, PgSpinLock>;

fn wal(insertion: Insertion) -> PgWal {
    let cfg = WalConfig {
        insertion,
        ..WalConfig::new(1)
    };
    Wal::new(cfg, Box::new(NullDevice)).expect("valid config")
}

/// A 100-byte heap record.
fn heap_record(payload: &[u8; 100]) -> Record<'_> {
    Record {
        xid: 1,
        rmid: pglocks_wal::record::RM_HEAP_ID,
        info: 0,
        payload,
    }
}

/// `XLogInsertRecord` of a 100-byte heap record.
fn insert(group: &mut Group<'_>, name: &str, insertion: Insertion) {
    let procs = ProcTable::new(1);
    let mut b = procs.attach().expect("a free slot");
    let wal = wal(insertion);
    let mut w = wal.backend();
    let payload = [0x5a; 100];
    let rec = heap_record(&payload);
    group.bench_function(name, |it| {
        it.iter(|| wal.insert(&mut b, &mut w, black_box(&rec)).expect("insert"))
    });
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("wal_uncontended");
    insert(
        &mut group,
        "insert 100 B, 8 insertion locks (9.4+)",
        Insertion::Locks(8),
    );
    insert(
        &mut group,
        "insert 100 B, WALInsertLock (<=9.3)",
        Insertion::OneLock,
    );

    let payload = [0x5a; 100];
    let rec = heap_record(&payload);
    let mut words = Vec::new();
    group.bench_function("floor: encode 100 B + CRC-32C", |it| {
        it.iter(|| {
            let crc = pglocks_wal::record::payload_crc(black_box(&payload));
            pglocks_wal::record::encode(black_box(&rec), 0, crc, &mut words);
            black_box(&words);
        })
    });

    let procs = ProcTable::new(1);
    let mut b = procs.attach().expect("a free slot");
    let wal = wal(Insertion::Locks(8));
    let mut w = wal.backend();
    group.bench_function("commit + XLogFlush, null device", |it| {
        it.iter(|| wal.commit(&mut b, &mut w, black_box(7)).expect("commit"))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = uncontended
}
common::bench_main!(benches);
