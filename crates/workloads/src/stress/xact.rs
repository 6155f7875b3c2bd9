//! The `xact` part: transactions through the ProcArray and the commit log — `GetNewTransactionId`
//! (varsup.c) with `ExtendCLOG`, `TransactionIdSetTreeStatus` and `TransactionIdGetStatus`
//! (clog.c), `ProcArrayEndTransaction` and `GetSnapshotData` (procarray.c).
//!
//! Every step is a transaction with an xid and, one time in four, one to three nested
//! subtransactions; it commits (three times in four) or aborts, sets its tree's status in the
//! commit log and ends in the ProcArray. Checked at every step: the status of a recent
//! transaction of any backend, read back from the commit log, is what that transaction
//! decided; a snapshot taken then lists none of the transactions that had ended before it, and
//! its running xids lie in `[xmin, xmax)`. At the end: no commit-log bank or slot I/O lock is
//! held, and every recorded decision reads back.

use super::{check, Failure, NewPart, Part, Refused, Setup, Step, Tally};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_procarray::{ProcArray, Snapshot};
use pglocks_slru::clog::{Clog, XidStatus};
use pglocks_slru::MemoryStore;
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use rand::rngs::SmallRng;
use rand::RngExt;
use std::sync::Arc;

/// Recent decisions kept for checking (a ring indexed by xid).
const DECISIONS: usize = 1 << 16;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        let (s, backends) = (setup.settings, setup.threads + 1);
        let store = MemoryStore::new(s.slru_latency);
        Ok(Arc::new(Xact::<K> {
            procs: setup.procs(),
            pa: ProcArray::new(&s.procarray_config(backends))?,
            clog: Clog::new(&s.clog_config(backends), Box::new(store))?,
            decided: (0..DECISIONS).map(|_| AtomicU64::new(0)).collect(),
            ended: (0..backends).map(|_| AtomicU32::new(0)).collect(),
        }))
    }
}

/// A ProcArray, a commit log, and what the transactions decided.
struct Xact<K: RawLwLock> {
    procs: ProcTable,
    pa: ProcArray<K>,
    clog: Clog<K>,
    /// `xid << 2 | status` of recent top-level xids and subxids.
    decided: Vec<AtomicU64>,
    /// Each backend's last ended xid, published after `ProcArrayEndTransaction` returned.
    ended: Vec<AtomicU32>,
}

impl<K: RawLwLock> Xact<K> {
    fn record(&self, xid: u32, status: XidStatus) {
        let word = u64::from(xid) << 2 | status as u64;
        self.decided[xid as usize % DECISIONS].store(word, Release);
    }

    /// Reads back a recorded decision (`word` non-zero), checking it against the commit log.
    fn read_back(&self, b: &mut Backend, t: &mut Tally, word: u64) -> Result<(), Failure> {
        let (xid, want) = ((word >> 2) as u32, XidStatus::from_bits((word & 3) as u8));
        let (got, _) = self.clog.get_status(b, xid)?;
        check(t, got == want, || {
            format!(
                "xid {xid} decided {} but the commit log says {}",
                want.name(),
                got.name()
            )
        })
    }
}

impl<K: RawLwLock> Part for Xact<K> {
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut snap = Snapshot::new();
        let mut added = false;
        let mut before: Vec<u32> = Vec::new();
        Box::new(move |b, t| {
            if !added {
                self.pa.add(b, b.procno())?;
                added = true;
            }
            // A transaction: an xid (and subxids), a decision, the commit log, the end.
            let top = self
                .pa
                .assign_xid_extending(b, None, |b, x| self.clog.extend(b, x))?;
            let mut subs = Vec::new();
            let nsubs = if rng.random_ratio(1, 4) {
                rng.random_range(1..=3)
            } else {
                0
            };
            for _ in 0..nsubs {
                let parent = subs.last().copied().unwrap_or(top);
                subs.push(
                    self.pa
                        .assign_xid_extending(b, Some(parent), |b, x| self.clog.extend(b, x))?,
                );
            }
            let status = if rng.random_ratio(3, 4) {
                XidStatus::Committed
            } else {
                XidStatus::Aborted
            };
            self.clog.set_tree_status(b, top, &subs, status, 0)?;
            if status == XidStatus::Committed {
                self.pa.commit_tree(top, &subs)?;
            }
            for &x in std::iter::once(&top).chain(&subs) {
                self.record(x, status);
            }
            let latest = subs.last().copied().unwrap_or(top);
            self.pa.end_transaction(b, latest)?;
            self.ended[b.procno()].store(latest, SeqCst);
            t.ops += 1;
            // A status read back: any recent decision, by any backend.
            let word = self.decided[rng.random_range(0..DECISIONS)].load(Acquire);
            if word != 0 {
                self.read_back(b, t, word)?;
            }
            // A snapshot: nothing that had ended before it may be listed as running.
            before.clear();
            before.extend(
                self.ended
                    .iter()
                    .map(|e| e.load(SeqCst))
                    .filter(|&x| x != 0),
            );
            self.pa.get_snapshot_data(b, &mut snap)?;
            let running = |x: &u32| snap.xip.contains(x) || snap.subxip.contains(x);
            let wrong = before.iter().find(|&&x| x >= snap.xmax || running(&x));
            check(t, wrong.is_none(), || {
                format!(
                    "snapshot (xmin {}, xmax {}) lists xid {:?} that had ended before it",
                    snap.xmin, snap.xmax, wrong
                )
            })?;
            check(
                t,
                snap.xip.iter().all(|&x| x >= snap.xmin && x < snap.xmax),
                || format!("snapshot xip outside [{}, {})", snap.xmin, snap.xmax),
            )?;
            self.pa.end_transaction(b, 0)?;
            Ok(())
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let free = self.clog.slru().locks_free(b)?;
        check(t, free, || {
            "a commit-log bank or slot I/O lock is still held".into()
        })?;
        for word in &self.decided {
            match word.load(Acquire) {
                0 => {}
                word => self.read_back(b, t, word)?,
            }
        }
        Ok(())
    }
}
