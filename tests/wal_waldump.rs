//! The model's WAL is PostgreSQL's WAL: PostgreSQL 15's own `pg_waldump` decodes it.
//!
//! - Always: the model writes one backend's 1000 commit records and reads them back; printed in
//!   pg_waldump's format, they must equal `tests/wal/expected/commits-1000.waldump`, which is
//!   what the real pg_waldump printed for the same WAL in segment files
//!   (`tests/wal/record-waldump.sh`): same LSNs, prev-links, lengths, across page boundaries.
//! - When pg_waldump is installed (CI installs postgresql-15; `PG_WALDUMP` names another one):
//!   four backends commit concurrently through group commit into 1 MB segment files, across
//!   pages and segments, then one switches segments and commits on; pg_waldump must decode
//!   every record (CRCs, page headers, continuation records, the `XLOG_SWITCH` record and the
//!   jump to the next segment) and stop only at the end of WAL.

use pglocks::lwlock::{AtomicLwLock, Pg96Layout};
use pglocks::proc::ProcTable;
use pglocks::wal::{FileDevice, NullDevice, ReadRecord, Wal, WalConfig};
use std::path::PathBuf;
use std::process::Command;

type PgWal = Wal<AtomicLwLock<Pg96Layout>>;

/// One record as pg_waldump prints a simple commit (`XLogDumpDisplayRecord`, `xact_desc`).
fn waldump_line(r: &ReadRecord) -> String {
    assert_eq!((r.rmid, r.info), (1, 0), "only commit records are rendered");
    format!(
        "rmgr: Transaction len (rec/tot): {:>6}/{:>6}, tx: {:>10}, lsn: {}, prev {}, desc: COMMIT 2000-01-01 00:00:00.000000 UTC",
        r.tot_len,
        r.tot_len,
        r.xid,
        pglocks::wal::lsn(r.lsn),
        pglocks::wal::lsn(r.prev)
    )
}

#[test]
fn the_model_reads_its_wal_as_pg_waldump_did() {
    let wal = PgWal::new(WalConfig::new(1), Box::new(NullDevice)).unwrap();
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let mut w = wal.backend();
    let mut end = 0;
    for i in 0..1000 {
        end = wal.commit(&mut b, &mut w, 1000 + i).unwrap();
    }
    let ours: Vec<String> = wal
        .read_records(wal.start(), end)
        .unwrap()
        .iter()
        .map(waldump_line)
        .collect();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/wal/expected/commits-1000.waldump"
    );
    let expected = std::fs::read_to_string(path).unwrap();
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(ours.len(), expected.len());
    for (o, e) in ours.iter().zip(&expected) {
        assert_eq!(o, e);
    }
}

fn pg_waldump() -> Option<PathBuf> {
    let p = std::env::var_os("PG_WALDUMP")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/lib/postgresql/15/bin/pg_waldump".into());
    p.exists().then_some(p)
}

#[test]
fn pg_waldump_decodes_concurrent_group_commits_across_segments() {
    let Some(waldump) = pg_waldump() else {
        eprintln!("pg_waldump not installed: skipped (CI installs it)");
        return;
    };
    const SEGMENT: u64 = 1024 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let device = FileDevice::create(&dir, SEGMENT).unwrap();
    let cfg = WalConfig {
        segment_size: SEGMENT,
        wal_buffers: 16,
        ..WalConfig::new(4)
    };
    let wal = PgWal::new(cfg, Box::new(device)).unwrap();
    let procs = ProcTable::new(4);
    // 4 × 8000 commits of 40 bytes: 1.25 MB, from segment 1 into segment 2.
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let (wal, procs) = (&wal, &procs);
            s.spawn(move || {
                let mut b = procs.attach().unwrap();
                let mut w = wal.backend();
                for i in 0..8000 {
                    wal.commit(&mut b, &mut w, 1 + i * 4 + t).unwrap();
                }
            });
        }
    });
    // Then a segment switch, and a few more commits in the next segment.
    let mut b = procs.attach().unwrap();
    let mut w = wal.backend();
    wal.switch_segment(&mut b, &mut w).unwrap();
    for i in 0..10 {
        wal.commit(&mut b, &mut w, 100_000 + i).unwrap();
    }
    drop(wal);
    let out = Command::new(waldump)
        .env("TZ", "UTC")
        .arg("-p")
        .arg(&dir)
        .arg("-s")
        .arg("0/00100028")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let commits = stdout
        .lines()
        .filter(|l| l.contains("desc: COMMIT"))
        .count();
    assert_eq!(commits, 32_010, "pg_waldump decoded:\n{stderr}");
    let switch: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("desc: SWITCH"))
        .collect();
    assert_eq!(switch.len(), 1, "{stderr}");
    assert!(
        switch[0].starts_with("rmgr: XLOG        len (rec/tot):     24/    24"),
        "{}",
        switch[0]
    );
    assert_eq!(stdout.lines().count(), 32_011);
    assert!(
        stdout.contains("lsn: 0/0020"),
        "the WAL crossed into segment 2"
    );
    assert!(
        stdout.contains("lsn: 0/00300028"),
        "after the switch, WAL goes on at the start of segment 3"
    );
    // The only complaint is the end of WAL: zeros where the next record would be.
    assert!(
        stderr.contains("invalid record length") && stderr.contains("got 0"),
        "{stderr}"
    );
}
