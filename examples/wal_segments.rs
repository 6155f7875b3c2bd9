//! Writes WAL of the model into real segment files that PostgreSQL's own tools can read:
//! `COMMITS` commit records from `BACKENDS` concurrent backends (group commit), flushed through
//! the file device into `DIR` (16 MB segments named as in pg_wal).
//!
//! ```sh
//! cargo run --release --example wal_segments -- /tmp/walout 5000 4
//! /usr/lib/postgresql/15/bin/pg_waldump -p /tmp/walout 000000010000000000000001
//! ```

use pglocks::lwlock::{AtomicLwLock, Pg96Layout};
use pglocks::proc::ProcTable;
use pglocks::wal::{FileDevice, Wal, WalConfig, DEFAULT_WAL_SEGMENT_SIZE};
use std::path::PathBuf;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: wal_segments DIR [COMMITS] [BACKENDS]")?,
    );
    let commits: u32 = args.next().map_or(Ok(1000), |s| s.parse())?;
    let backends: usize = args.next().map_or(Ok(1), |s| s.parse())?;
    std::fs::create_dir_all(&dir)?;
    let device = FileDevice::create(&dir, DEFAULT_WAL_SEGMENT_SIZE)?;
    let wal: Arc<Wal<AtomicLwLock<Pg96Layout>>> =
        Arc::new(Wal::new(WalConfig::new(backends), Box::new(device))?);
    let procs = ProcTable::new(backends);
    std::thread::scope(|s| -> Result<(), pglocks::wal::WalError> {
        let handles: Vec<_> = (0..backends)
            .map(|t| {
                let (wal, procs) = (&wal, &procs);
                s.spawn(move || -> Result<(), pglocks::wal::WalError> {
                    let mut b = procs.attach().expect("a backend slot per thread");
                    let mut w = wal.backend();
                    for i in 0..commits / backends as u32 {
                        wal.commit(&mut b, &mut w, 1000 + i * backends as u32 + t as u32)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a backend thread panicked")?;
        }
        Ok(())
    })?;
    println!(
        "WAL from {} in {}",
        pglocks::wal::lsn(wal.start()),
        dir.display()
    );
    Ok(())
}
