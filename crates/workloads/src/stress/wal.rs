//! The `wal` part: commits through group commit, `XLogInsert` of a commit record and
//! `XLogFlush` (xlog.c): one backend flushes for every commit behind it while the others wait
//! on `WALWriteLock` (`LWLockAcquireOrWait` from 9.2), and `XLogWrite` publishes how far WAL
//! is written and flushed (`LogwrtResult`, `XLogCtl->LogwrtResult`).
//!
//! The flush device underneath records how far it has made WAL durable. Checked at every
//! commit: its LSN is covered by a device flush once the commit returns, a backend's commit
//! LSNs only grow, and the published flush pointer only moves forward and is never ahead of
//! the device; at the end: no WAL lock is held, and the flush pointer is behind neither the
//! device nor the write pointer.

use super::{check, Failure, NewPart, Part, Refused, Setup, Step, Tally};
use pglocks_lwlock::{LockedVar, RawLwLock};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use pglocks_wal::device::{DeviceError, FlushDevice};
use pglocks_wal::{Wal, WalBackend};
use rand::rngs::SmallRng;
use std::sync::Arc;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        let s = setup.settings;
        let cfg = s.wal_config(setup.threads + 1);
        // The WAL's write and flush pointers start at the first segment, with nothing before it
        // to write: the device is durable that far before its first flush (a run stopped before
        // any commit flushed must not read as a flush pointer ahead of the device).
        let durable = Arc::new(AtomicU64::new(cfg.segment_size));
        let device = Watched {
            inner: crate::wal::device(s, cfg.segment_size)?,
            durable: Arc::clone(&durable),
        };
        Ok(Arc::new(WalPart::<K, R> {
            procs: setup.procs(),
            wal: Wal::new(cfg, Box::new(device))?,
            durable,
            next_xid: AtomicU32::new(3),
        }))
    }
}

/// A flush device that remembers how far it has made WAL durable.
struct Watched {
    inner: Box<dyn FlushDevice>,
    durable: Arc<AtomicU64>,
}

impl FlushDevice for Watched {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn wants_bytes(&self) -> bool {
        self.inner.wants_bytes()
    }
    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write(lsn, data)
    }
    fn flush(&mut self, upto: u64) -> Result<(), DeviceError> {
        self.inner.flush(upto)?;
        self.durable.fetch_max(upto, SeqCst);
        Ok(())
    }
    fn fsync_enabled(&self) -> bool {
        self.inner.fsync_enabled()
    }
}

/// The WAL, how far its device is durable, and the next xid to commit.
struct WalPart<K: RawLwLock, R: RawSpinLock> {
    procs: ProcTable,
    wal: Wal<K, LockedVar, R>,
    durable: Arc<AtomicU64>,
    next_xid: AtomicU32,
}

impl<K: RawLwLock, R: RawSpinLock + 'static> Part for WalPart<K, R> {
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, _: SmallRng) -> Step {
        let mut w: WalBackend = self.wal.backend();
        let mut seen_flush = 0;
        let mut last_commit = 0;
        Box::new(move |b, t| {
            let xid = self.next_xid.fetch_add(1, Relaxed);
            let lsn = self.wal.commit(b, &mut w, xid)?;
            t.ops += 1;
            let durable = self.durable.load(SeqCst);
            check(t, durable >= lsn, || {
                format!(
                    "commit at {lsn:#x} returned but the device is durable only to {durable:#x}"
                )
            })?;
            check(t, lsn > last_commit, || {
                format!("a backend's commit LSN went back from {last_commit:#x} to {lsn:#x}")
            })?;
            last_commit = lsn;
            let published = self.wal.write_result(b)?.flush;
            let durable = self.durable.load(SeqCst);
            check(t, published >= seen_flush && published <= durable, || {
                format!(
                    "flush pointer {published:#x} after {seen_flush:#x}, device durable to {durable:#x}"
                )
            })?;
            seen_flush = published;
            Ok(())
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let free = self.wal.locks_free(b)?;
        check(t, free, || "a WAL lock is still held at the end".into())?;
        let r = self.wal.write_result(b)?;
        let durable = self.durable.load(SeqCst);
        check(t, r.flush <= durable && r.flush <= r.write, || {
            format!(
                "flushed {:#x}, written {:#x}, durable {durable:#x}",
                r.flush, r.write
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::Preset;
    use pglocks_lwlock::{AtomicLwLock, Pg18Layout};
    use pglocks_spin::PgSpinLock;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_wal_nobody_committed_to_passes_the_end_check() {
        // A run stopped before any commit: the WAL's pointers are at the first segment's
        // start, which nothing had to flush.
        let settings = Preset::by_name("pg18").unwrap().settings();
        let stop = Arc::new(AtomicBool::new(false));
        let setup = Setup {
            settings: &settings,
            threads: 1,
            stop: &stop,
            spinlock: "pg",
            lwlock: "pg",
            numa_nodes: 1,
        };
        let Ok(part) = New::new_part::<AtomicLwLock<Pg18Layout>, PgSpinLock>(&setup) else {
            panic!("the WAL part does not build");
        };
        let mut b = part.procs().attach().unwrap();
        let mut t = Tally::default();
        assert!(
            part.finish(&mut b, &Tally::default(), &mut t).is_ok(),
            "{t:?}"
        );
    }
}
