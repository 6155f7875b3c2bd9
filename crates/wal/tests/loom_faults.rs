//! loom model of a failed fsync under group commit: two backends commit at once and the first
//! fsync fails (PostgreSQL's PANIC). In every interleaving exactly one of them gets the device
//! error and the other the "WAL is unusable" refusal — whether it was queued for
//! `WALWriteLock` (`LWLockAcquireOrWait`), waiting for insertions, or not yet started — nobody
//! touches the device after the failure, and afterwards every WAL lock is free.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-wal --test loom_faults --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_wal::{
    FaultPlan, Faults, FaultyDevice, Insertion, IoOp, RecordingDevice, Wal, WalConfig, WalError,
};

type Lw = AtomicLwLock<Pg96Layout>;

#[test]
fn a_failed_fsync_stops_both_committers_and_frees_every_lock() {
    pglocks_sync::loom_builder(2).check(|| {
        let cfg = WalConfig {
            insertion: Insertion::Locks(2),
            wal_buffers: 4,
            segment_size: 64 * 1024,
            ..WalConfig::new(3)
        };
        let procs = ProcTable::new(3);
        let faults = Faults::new("fsync:1".parse::<FaultPlan>().unwrap());
        let dev = FaultyDevice::new(RecordingDevice::new(), faults.clone(), 64 * 1024).unwrap();
        let wal: Arc<Wal<Lw>> = Arc::new(Wal::new(cfg, Box::new(dev)).unwrap());
        let commit = {
            let (wal, procs) = (Arc::clone(&wal), procs.clone());
            move |xid: u32| {
                let mut b = procs.attach().unwrap();
                let mut w = wal.backend();
                wal.commit(&mut b, &mut w, xid).unwrap_err()
            }
        };
        let t = {
            let commit = commit.clone();
            loom::thread::spawn(move || commit(1))
        };
        let mine = commit(2);
        let theirs = t.join().unwrap();
        let device_errors = [&mine, &theirs]
            .iter()
            .filter(|e| matches!(e, WalError::Device(_)))
            .count();
        let refused = [&mine, &theirs]
            .iter()
            .filter(|e| matches!(e, WalError::Unusable { .. }))
            .count();
        assert_eq!((device_errors, refused), (1, 1), "{mine} / {theirs}");
        assert_eq!(faults.seen(IoOp::Fsync), 1, "an fsync after the PANIC");
        let mut b = procs.attach().unwrap();
        assert!(wal.locks_free(&mut b).unwrap(), "a WAL lock left held");
    });
}
