//! The WAL on a simulated machine: a record's copy into the WAL buffers is charged for the
//! lines it covers (`CopyXLogRecordToWAL`), and a write for the lines of the pages it writes.

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, SimThread};
use pglocks_wal::{NullDevice, Record, Wal, WalConfig};

type TestWal = Wal<AtomicLwLock<Pg96Layout>>;

/// A backend's run: `records` records of `payload`'s bytes inserted, each flushed with
/// `flush`.
fn backend_inserts(wal: &TestWal, procs: &ProcTable, payload: &[u8], records: usize, flush: bool) {
    let mut b = procs.attach().unwrap();
    let mut w = wal.backend();
    let rec = Record {
        xid: 1,
        rmid: 10,
        info: 0,
        payload,
    };
    for _ in 0..records {
        let end = wal.insert(&mut b, &mut w, &rec).unwrap();
        if flush {
            wal.flush(&mut b, &mut w, end).unwrap();
        }
    }
}

/// Touches of a simulated run that inserts `records` records of `payload` bytes, without
/// flushing, or flushing each when `flush`.
fn touches(payload: usize, records: usize, flush: bool) -> u64 {
    let wal: TestWal = Wal::new(WalConfig::new(1), Box::new(NullDevice)).unwrap();
    let procs = ProcTable::new(1);
    let data = vec![7u8; payload];
    let team = vec![SimThread::on(0, || {
        backend_inserts(&wal, &procs, &data, records, flush)
    })];
    pglocks_sim::run_tallied("westmere-80", team).touches
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_records_copy_touches_the_lines_it_covers() {
    // A 4 KB record covers 64 more lines than a 40-byte one.
    let small = touches(40, 20, false);
    let large = touches(4096, 20, false);
    assert!(large >= small + 20 * 63, "{small} -> {large}");
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_write_reads_every_line_of_its_pages() {
    // Each flush writes the record's page: 128 lines read.
    let unflushed = touches(40, 20, false);
    let flushed = touches(40, 20, true);
    assert!(flushed >= unflushed + 20 * 128, "{unflushed} -> {flushed}");
}

/// Transfers by structure of a simulated run in which two backends (CPUs 0 and 10, on the two
/// packages) each insert and flush `records` records, on `wal_buffers` pages.
fn by_structure(records: usize, wal_buffers: usize) -> Outcome {
    let wal: TestWal = Wal::new(
        WalConfig {
            wal_buffers,
            ..WalConfig::new(2)
        },
        Box::new(NullDevice),
    )
    .unwrap();
    let procs = ProcTable::new(2);
    let data = vec![7u8; 200];
    let (wal, procs, data) = (&wal, &procs, &data);
    let team = SimThread::team(&[0, 10], |_| {
        move || backend_inserts(wal, procs, data, records, true)
    });
    pglocks_sim::run_tallied("westmere-80", team)
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn xlogctl_its_locks_and_its_pages_are_placed_in_the_map_under_postgresqls_names() {
    // 100 records of about 230 bytes on each side fill 6 pages: the 4 buffers are reused.
    let found = by_structure(100, 4);
    for name in [
        "XLogCtl",
        "XLogCtl->xlblocks",
        "XLogCtl->pages",
        "WALInsertLocks",
        "WALWriteLock",
        "WALBufMappingLock",
    ] {
        assert!(
            found.transfers_of(name) > 0,
            "no transfers of {name}: {found:?}"
        );
    }
    // Nothing is charged outside the map (where a line outside it is named after the source
    // line that first missed on it).
    assert!(
        !found
            .outside_the_map()
            .iter()
            .any(|s| ["crates/wal/", "crates/lwlock/", "crates/spin/"]
                .iter()
                .any(|c| s.name.contains(c))),
        "{found:?}"
    );
}
