//! Models asynchronous commit and the WAL writer: `WalWriterMain` (walwriter.c), and
//! `XLogSetAsyncXactLSN`, `XLogBackgroundFlush` and `SetWalWriterSleeping` (xlog.c).
//!
//! # The algorithm
//! A commit with `synchronous_commit = off` inserts its commit record and does not flush it.
//! Instead it raises `asyncXactLSN`, the end of the newest asynchronous commit, under `info_lck`
//! ([`Wal::set_async_xact_lsn`]); the commit is then over: its locks were the insertion's and
//! that spinlock, never `WALWriteLock`. Making the record durable is the WAL writer's job.
//!
//! The WAL writer is a background process that loops ([`Wal::wal_writer_main`]): one call of
//! `XLogBackgroundFlush` ([`Wal::background_flush`]), then a sleep of `wal_writer_delay`.
//! `XLogBackgroundFlush` prefers whole pages: it takes the largest posted write request
//! (`LogwrtRqst.Write`, raised by every insert that fills a page) backed off to its last
//! completed page; only if that is already flushed does it go for `asyncXactLSN`, part page
//! and all. It waits for insertions up to there to be copied (9.4+), takes `WALWriteLock` with a
//! plain `LWLockAcquire` and calls `XLogWrite` like any other writer. So a commit becomes
//! durable within a few rounds: a round or two for the pages before it, one for its own
//! part page.
//!
//! How the commit and the writer meet changed with the releases ([`WalWriter`]):
//! - 8.3–9.1 ([`WalWriter::Timed`]): the writer sleeps with `pg_usleep`; `XLogSetAsyncXactLSN`
//!   only raises the LSN. An idle server's writer wakes 5 times a second for nothing.
//! - 9.2–16 ([`WalWriter::Latch`]): the writer sleeps on its process latch. After
//!   [`LOOPS_UNTIL_HIBERNATE`] rounds without work it hibernates: it says so in
//!   `WalWriterSleeping` (under `info_lck`) and sleeps [`HIBERNATE_FACTOR`] times longer. An
//!   asynchronous commit, having raised the LSN, sets the writer's latch if the writer
//!   hibernates, or if a whole page past what is flushed is waiting (else the next timed round
//!   will do). Setting a latch that is already set costs one read.
//! - 9.6–16 (`wal_writer_flush_after` > 0): `XLogBackgroundFlush` still writes every round,
//!   but asks `XLogWrite` to fsync only if `wal_writer_delay` has passed since its last fsync or
//!   at least `wal_writer_flush_after` pages (1 MB) are unflushed.
//! - 17+ ([`WalWriter::LatchFlushAfter`]): a commit sets the latch only if it raised
//!   `asyncXactLSN` (a later commit's call did the rest) and, unless the writer hibernates,
//!   only once `wal_writer_flush_after` pages are unflushed: fewer wake-ups under load.
//!
//! # Differences from PostgreSQL
//! - The WAL writer is a thread with a [`Backend`] of the same [`pglocks_proc::ProcTable`] as
//!   the committers (PostgreSQL's auxiliary process has a `PGPROC` after the regular
//!   backends'). It is stopped by [`Wal::shutdown_wal_writer`], which sets its latch, in every
//!   release (before 9.2 PostgreSQL's SIGTERM ended a `pg_usleep` by its signal).
//! - An error ends the WAL writer's loop and is returned; PostgreSQL's writer logs it, sleeps a
//!   second and goes on (an I/O error is a PANIC there anyway, and the model's WAL is unusable
//!   after it).
//! - `XLogWrite`'s `flexible` mode (stop at the end of the buffer ring) and the writer's
//!   opportunistic `AdvanceXLInsertBuffer` after a round are not modelled, nor the closing of an
//!   unused segment file, walsender wake-ups or `pgstat_report_wal`.
//! - `LogwrtResult` is read under `info_lck` in every release; 17 reads atomics
//!   (`RefreshXLogWriteResult`), so 17's `XLogSetAsyncXactLSN` reads it in the same spinlock
//!   acquisition as `asyncXactLSN`, a moment earlier than PostgreSQL does.
//! - The idle sleep is not counted as a wait event (PostgreSQL reports `WalWriterMain`): the
//!   waits table is about what stands in the way of work.

use crate::pos::XLOG_BLCKSZ;
use crate::{Insertion, Wal, WalBackend, WalError, WalWriter, NO_WAL_WRITER};
use pglocks_lwlock::{LwLockMode, RawLwLock, VarProtocol};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::Ordering::SeqCst;
use pglocks_sync::time::{Duration, Instant};

/// walwriter.c's `LOOPS_UNTIL_HIBERNATE` (9.2+): rounds without work before the WAL writer
/// hibernates.
pub const LOOPS_UNTIL_HIBERNATE: u32 = 50;
/// walwriter.c's `HIBERNATE_FACTOR` (9.2+): a hibernating WAL writer sleeps this many times
/// `wal_writer_delay`.
pub const HIBERNATE_FACTOR: u32 = 25;

/// The WAL writer's own state: its backend-local WAL state, `WalWriterMain`'s hibernation
/// locals (`left_till_hibernate`, `hibernating`) and `XLogBackgroundFlush`'s static
/// `lastflush`. Made by [`Wal::wal_writer_start`].
#[derive(Debug)]
pub struct WalWriterState {
    w: WalBackend,
    /// When `XLogBackgroundFlush` last asked for an fsync (`None`: never).
    last_flush: Option<Instant>,
    left_till_hibernate: u32,
    hibernating: bool,
}

impl WalWriterState {
    /// Does the WAL writer hibernate (9.2+: it has advertised `WalWriterSleeping`)?
    pub fn hibernating(&self) -> bool {
        self.hibernating
    }
}

impl<K: RawLwLock, P: VarProtocol, R: RawSpinLock> Wal<K, P, R> {
    /// Models `XLogSetAsyncXactLSN` (xlog.c), called by an asynchronous commit with the end of
    /// its record: raises `asyncXactLSN` under `info_lck` and, as the release decides
    /// ([`WalWriter`]), sets the WAL writer's latch (`SetLatch(ProcGlobal->walwriterLatch)`).
    /// 9.2–16 also refresh the backend's `LogwrtResult` in the same spinlock acquisition.
    pub fn set_async_xact_lsn(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        async_xact_lsn: u64,
    ) -> Result<(), WalError> {
        let (prev, result, sleeping) = self.ctl.info.lock(b)?.with_mut(|i| {
            let prev = i.async_xact_lsn;
            i.async_xact_lsn = prev.max(async_xact_lsn);
            (prev, i.result, i.wal_writer_sleeping)
        });
        let wake = match self.cfg.wal_writer {
            // Before 9.2 the WAL writer has no latch: it comes round on its own.
            WalWriter::Absent | WalWriter::Timed => false,
            WalWriter::Latch => {
                w.logwrt = result;
                // Back off to the last completed page: is a whole page waiting for it?
                sleeping || async_xact_lsn - async_xact_lsn % XLOG_BLCKSZ > result.flush
            }
            WalWriter::LatchFlushAfter => {
                // A commit that did not raise the LSN: the one that did has decided.
                if async_xact_lsn <= prev {
                    return Ok(());
                }
                w.logwrt = result;
                let after = self.cfg.wal_writer_flush_after;
                let unflushed =
                    (async_xact_lsn / XLOG_BLCKSZ).saturating_sub(result.flush / XLOG_BLCKSZ);
                sleeping || after == 0 || unflushed >= after
            }
        };
        if wake {
            self.wake_wal_writer(b);
        }
        Ok(())
    }

    /// `SetLatch` of the WAL writer, if one runs; counted as `wal.walwriter_latch_sets`.
    fn wake_wal_writer(&self, b: &mut Backend) {
        let procno = self.wal_writer_proc.load(SeqCst);
        if procno != NO_WAL_WRITER {
            b.procs().set_latch(procno);
            b.stats.events.count("wal.walwriter_latch_sets", 1);
        }
    }

    /// `asyncXactLSN`: the end of the newest asynchronous commit (0: none yet).
    pub fn async_xact_lsn(&self, b: &mut Backend) -> Result<u64, WalError> {
        Ok(self.ctl.info.lock(b)?.with(|i| i.async_xact_lsn))
    }

    /// Models `SetWalWriterSleeping` (xlog.c): advertises, under `info_lck`, whether the WAL
    /// writer hibernates.
    fn set_wal_writer_sleeping(&self, b: &mut Backend, sleeping: bool) -> Result<(), WalError> {
        self.ctl
            .info
            .lock(b)?
            .with_mut(|i| i.wal_writer_sleeping = sleeping);
        Ok(())
    }

    /// Models `XLogBackgroundFlush` (xlog.c), one round of the WAL writer's work: writes WAL up
    /// to the last completed page of the posted write request or, if that is flushed already,
    /// up to `asyncXactLSN`; fsyncs it too, unless (9.6+, `wal_writer_flush_after` > 0) neither
    /// `wal_writer_delay` has passed since the last fsync nor that many pages are unflushed.
    /// Waits for insertions up to there (9.4+), then takes `WALWriteLock` with a plain acquire.
    /// Returns whether there was anything to do (even if another backend did it first), which
    /// 9.2+ use to decide on hibernation.
    ///
    /// Shortcuts: `XLogWrite` writes up to the target in one go (PostgreSQL's `flexible` mode
    /// may stop at the end of the buffer ring and leave the rest to the next round); the round
    /// does not close an unused segment file, nor initialise free buffers afterwards
    /// (`AdvanceXLInsertBuffer(InvalidXLogRecPtr, true)`).
    pub fn background_flush(
        &self,
        b: &mut Backend,
        st: &mut WalWriterState,
    ) -> Result<bool, WalError> {
        self.check_usable()?;
        let (request, result) = self.ctl.info.lock(b)?.with(|i| (i.request.write, i.result));
        st.w.logwrt = result;
        let mut write = request - request % XLOG_BLCKSZ;
        if write <= result.flush {
            write = self.ctl.info.lock(b)?.with(|i| i.async_xact_lsn);
        }
        if write <= result.flush {
            return Ok(false);
        }
        let flush = if self.background_fsync_due(st, write, result.flush) {
            write
        } else {
            0
        };
        if let Insertion::Locks(_) = self.cfg.insertion {
            // Everything before `write` was reserved, so this returns at least `write`.
            write = write.min(self.wait_insertions_to_finish(b, write)?);
        }
        self.write_lock.acquire(b, LwLockMode::Exclusive)?;
        let written = self.write_result(b).and_then(|now| {
            st.w.logwrt = now;
            if write > now.write || flush > now.flush {
                self.xlog_write(b, &mut st.w, write, flush)
            } else {
                Ok(())
            }
        });
        self.write_lock.release(b)?;
        written?;
        b.stats.events.count("wal.background_flushes", 1);
        Ok(true)
    }

    /// `XLogBackgroundFlush`'s choice of whether this round fsyncs: always with
    /// `wal_writer_flush_after` = 0 (every release before 9.6) and on the first round; else
    /// when `wal_writer_delay` has passed since the last fsync or at least
    /// `wal_writer_flush_after` pages between the flushed point and `write` are unflushed.
    fn background_fsync_due(&self, st: &mut WalWriterState, write: u64, flushed: u64) -> bool {
        let after = self.cfg.wal_writer_flush_after;
        let now = Instant::now();
        let due = match st.last_flush {
            _ if after == 0 => true,
            None => true,
            Some(last) => {
                now.saturating_duration_since(last) >= self.cfg.wal_writer_delay
                    || write / XLOG_BLCKSZ - flushed / XLOG_BLCKSZ >= after
            }
        };
        if due {
            st.last_flush = Some(now);
        }
        due
    }

    /// The start of `WalWriterMain` (walwriter.c): advertises backend `b` as the WAL writer
    /// whose latch asynchronous commits set (`ProcGlobal->walwriterLatch`), and (9.2+) resets
    /// the hibernation state, `SetWalWriterSleeping(false)` included. `b` must be a backend of
    /// the committers' [`ProcTable`].
    pub fn wal_writer_start(&self, b: &mut Backend) -> Result<WalWriterState, WalError> {
        self.set_wal_writer_sleeping(b, false)?;
        self.wal_writer_proc.store(b.procno(), SeqCst);
        Ok(WalWriterState {
            w: self.backend(),
            last_flush: None,
            left_till_hibernate: LOOPS_UNTIL_HIBERNATE,
            hibernating: false,
        })
    }

    /// One pass of `WalWriterMain`'s loop (walwriter.c) up to its sleep: (9.2+) advertise
    /// hibernation if it is due (`SetWalWriterSleeping`), reset the latch, leave if asked to
    /// (`ProcessMainLoopInterrupts`: `None`), run [`Wal::background_flush`], and count idle
    /// rounds towards hibernation. Returns how long to sleep: `wal_writer_delay`, or
    /// [`HIBERNATE_FACTOR`] times it after [`LOOPS_UNTIL_HIBERNATE`] idle rounds (9.2+).
    pub fn wal_writer_round(
        &self,
        b: &mut Backend,
        st: &mut WalWriterState,
    ) -> Result<Option<Duration>, WalError> {
        let latch = matches!(
            self.cfg.wal_writer,
            WalWriter::Latch | WalWriter::LatchFlushAfter
        );
        if latch {
            // Advertised before the latch is reset, so a commit that finds it set either
            // sees the flag or sets the latch after the reset.
            let hibernate = st.left_till_hibernate <= 1;
            if st.hibernating != hibernate {
                st.hibernating = hibernate;
                self.set_wal_writer_sleeping(b, hibernate)?;
            }
        }
        b.reset_latch();
        if self.wal_writer_shutdown.load(SeqCst) {
            return Ok(None);
        }
        let worked = self.background_flush(b, st)?;
        let delay = self.cfg.wal_writer_delay;
        if !latch {
            return Ok(Some(delay));
        }
        if worked {
            st.left_till_hibernate = LOOPS_UNTIL_HIBERNATE;
        } else {
            st.left_till_hibernate = st.left_till_hibernate.saturating_sub(1);
        }
        Ok(Some(if st.left_till_hibernate > 0 {
            delay
        } else {
            delay * HIBERNATE_FACTOR
        }))
    }

    /// Models `WalWriterMain` (walwriter.c): backend `b` becomes the WAL writer and runs its
    /// rounds ([`Wal::wal_writer_round`]), sleeping on its latch between them, until
    /// [`Wal::shutdown_wal_writer`]. `on_round` is called with `b` before each round (a
    /// harness uses it to drop the statistics of a warm-up). Before 9.2 nothing but the
    /// shutdown sets the latch, so the sleep is `pg_usleep`'s.
    pub fn wal_writer_main(
        &self,
        b: &mut Backend,
        mut on_round: impl FnMut(&mut Backend),
    ) -> Result<(), WalError> {
        let mut st = self.wal_writer_start(b)?;
        let done = loop {
            on_round(b);
            match self.wal_writer_round(b, &mut st) {
                Ok(Some(timeout)) => {
                    b.wait_latch(Some(Instant::now() + timeout));
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        let _ = self
            .wal_writer_proc
            .compare_exchange(b.procno(), NO_WAL_WRITER, SeqCst, SeqCst);
        done
    }

    /// Asks the WAL writer to exit (the postmaster's SIGTERM): sets the shutdown flag, then the
    /// writer's latch. `procs` is the writer's table. The flag stays set: a WAL has one WAL
    /// writer in its life, and one asked to stop before it started leaves at its first round.
    pub fn shutdown_wal_writer(&self, procs: &ProcTable) {
        self.wal_writer_shutdown.store(true, SeqCst);
        let procno = self.wal_writer_proc.load(SeqCst);
        if procno != NO_WAL_WRITER {
            procs.set_latch(procno);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{RecordingDevice, WalConfig};
    use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
    use pglocks_proc::tranche::tranche_id;
    use std::sync::atomic::Ordering::SeqCst as Sc;

    type TestWal = Wal<AtomicLwLock<Pg96Layout>>;

    fn async_wal(wal_writer: WalWriter, flush_after: u64, insertion: Insertion) -> TestWal {
        let cfg = WalConfig {
            insertion,
            synchronous_commit: false,
            wal_writer,
            wal_writer_flush_after: flush_after,
            segment_size: 1 << 20,
            ..WalConfig::new(2)
        };
        Wal::new(cfg, Box::new(RecordingDevice::new())).unwrap()
    }

    /// Whether `b`'s latch is set (looks without sleeping), then clears it.
    fn latch_was_set(b: &Backend) -> bool {
        let set = b.wait_latch(Some(Instant::now()));
        b.reset_latch();
        set
    }

    #[test]
    fn an_async_commit_takes_no_walwritelock_and_a_background_flush_makes_it_durable() {
        for insertion in [Insertion::OneLock, Insertion::Locks(8)] {
            let dev = RecordingDevice::new();
            let (flushed, calls) = (dev.flushed_upto(), dev.flush_calls());
            let cfg = WalConfig {
                insertion,
                synchronous_commit: false,
                ..WalConfig::new(2)
            };
            let wal: TestWal = Wal::new(cfg, Box::new(dev)).unwrap();
            let procs = ProcTable::new(2);
            procs.set_lwlock_stats(true);
            let (mut b, mut writer) = (procs.attach().unwrap(), procs.attach().unwrap());
            let mut w = wal.backend();
            let end = wal.commit(&mut b, &mut w, 7).unwrap();
            let walwrite = tranche_id("WALWrite");
            let taken = |b: &mut Backend| {
                let c = b
                    .stats
                    .lwlock
                    .tranche(walwrite)
                    .copied()
                    .unwrap_or_default();
                c.ex_acquire + c.sh_acquire
            };
            assert_eq!(taken(&mut b), 0, "an async commit took WALWriteLock");
            assert_eq!(calls.load(Sc), 0, "an async commit flushed");
            assert!(wal.write_result(&mut b).unwrap().flush < end);
            assert!(wal.needs_flush(&mut b, &mut w, end).unwrap());
            assert_eq!(wal.async_xact_lsn(&mut b).unwrap(), end);
            // The WAL writer's round: the part page is flushed through asyncXactLSN.
            let mut st = wal.wal_writer_start(&mut writer).unwrap();
            assert!(wal.background_flush(&mut writer, &mut st).unwrap());
            assert!(
                taken(&mut writer) >= 1,
                "the WAL writer writes under WALWriteLock"
            );
            assert!(flushed.load(Sc) >= end);
            assert!(!wal.needs_flush(&mut b, &mut w, end).unwrap());
            // Nothing left: the next round has no work.
            assert!(!wal.background_flush(&mut writer, &mut st).unwrap());
            // A synchronous commit does take it (a plain acquire, which LWLOCK_STATS counts).
            let sync = WalConfig {
                insertion,
                flush_wait: crate::FlushWait::Acquire,
                ..WalConfig::new(2)
            };
            let wal: TestWal = Wal::new(sync, Box::new(RecordingDevice::new())).unwrap();
            let mut w = wal.backend();
            wal.commit(&mut b, &mut w, 8).unwrap();
            assert!(taken(&mut b) >= 1);
        }
    }

    #[test]
    fn the_background_flush_prefers_whole_pages_then_takes_the_async_lsn() {
        let wal = async_wal(WalWriter::Latch, 0, Insertion::Locks(8));
        let procs = ProcTable::new(2);
        let (mut b, mut writer) = (procs.attach().unwrap(), procs.attach().unwrap());
        let mut w = wal.backend();
        let mut st = wal.wal_writer_start(&mut writer).unwrap();
        let mut end = 0;
        // Commits past the first page boundary: the insert that crossed it posted a request.
        while end < wal.start() + 3 * XLOG_BLCKSZ / 2 {
            end = wal.commit(&mut b, &mut w, 1).unwrap();
        }
        assert!(wal.background_flush(&mut writer, &mut st).unwrap());
        let first = wal.write_result(&mut b).unwrap().flush;
        assert_eq!(
            first % XLOG_BLCKSZ,
            0,
            "the first round stops at a page boundary"
        );
        assert!(first < end);
        assert!(wal.background_flush(&mut writer, &mut st).unwrap());
        assert_eq!(wal.write_result(&mut b).unwrap().flush, end);
    }

    #[test]
    fn with_flush_after_a_round_writes_and_defers_the_fsync() {
        let dev = RecordingDevice::new();
        let (written, flushed) = (dev.written_upto(), dev.flushed_upto());
        let cfg = WalConfig {
            synchronous_commit: false,
            wal_writer_flush_after: 1000,
            wal_writer_delay: Duration::from_secs(10),
            ..WalConfig::new(2)
        };
        let wal: TestWal = Wal::new(cfg, Box::new(dev)).unwrap();
        let procs = ProcTable::new(2);
        let (mut b, mut writer) = (procs.attach().unwrap(), procs.attach().unwrap());
        let mut w = wal.backend();
        let mut st = wal.wal_writer_start(&mut writer).unwrap();
        let first = wal.commit(&mut b, &mut w, 1).unwrap();
        // The first round fsyncs (no `lastflush` yet).
        assert!(wal.background_flush(&mut writer, &mut st).unwrap());
        assert!(flushed.load(Sc) >= first);
        let second = wal.commit(&mut b, &mut w, 2).unwrap();
        assert!(wal.background_flush(&mut writer, &mut st).unwrap());
        assert!(written.load(Sc) >= second, "written at once");
        assert!(
            flushed.load(Sc) < second,
            "not fsynced before wal_writer_delay"
        );
        // It counts as work, so the writer does not hibernate, and stays to do: the write
        // is not durable until the delay passes or 1000 pages pile up.
        assert!(wal.needs_flush(&mut b, &mut w, second).unwrap());
    }

    #[test]
    fn the_release_decides_when_an_async_commit_wakes_the_wal_writer() {
        let procs = ProcTable::new(2);
        let (mut b, mut writer) = (procs.attach().unwrap(), procs.attach().unwrap());
        // 8.3-9.1: never.
        let wal = async_wal(WalWriter::Timed, 0, Insertion::OneLock);
        wal.wal_writer_start(&mut writer).unwrap();
        let mut w = wal.backend();
        for xid in 0..400 {
            wal.commit(&mut b, &mut w, xid).unwrap();
        }
        assert!(!latch_was_set(&writer));
        // 9.2-16: not for a part page, yes once a whole page is waiting.
        let wal = async_wal(WalWriter::Latch, 0, Insertion::Locks(8));
        let mut st = wal.wal_writer_start(&mut writer).unwrap();
        let mut w = wal.backend();
        let end = wal.commit(&mut b, &mut w, 1).unwrap();
        assert!(end < wal.start() + XLOG_BLCKSZ);
        assert!(!latch_was_set(&writer), "a part page does not wake it");
        let mut end = 0;
        while end < wal.start() + XLOG_BLCKSZ {
            end = wal.commit(&mut b, &mut w, 1).unwrap();
        }
        assert!(latch_was_set(&writer), "a whole page wakes it");
        // ... and any commit wakes it once it hibernates.
        assert!(wal.background_flush(&mut writer, &mut st).unwrap());
        assert!(wal.background_flush(&mut writer, &mut st).unwrap());
        let mut rounds = 0;
        while !st.hibernating() {
            let sleep = wal.wal_writer_round(&mut writer, &mut st).unwrap().unwrap();
            rounds += 1;
            assert!(rounds <= LOOPS_UNTIL_HIBERNATE, "never hibernated");
            if st.left_till_hibernate == 0 {
                assert_eq!(sleep, wal.config().wal_writer_delay * HIBERNATE_FACTOR);
            }
        }
        wal.commit(&mut b, &mut w, 2).unwrap();
        assert!(
            latch_was_set(&writer),
            "a hibernating writer is woken by any commit"
        );
        // 17+: only with wal_writer_flush_after pages unflushed (here 2).
        let wal = async_wal(WalWriter::LatchFlushAfter, 2, Insertion::Locks(8));
        wal.wal_writer_start(&mut writer).unwrap();
        let mut w = wal.backend();
        let mut end = 0;
        while end < wal.start() + XLOG_BLCKSZ + 100 {
            end = wal.commit(&mut b, &mut w, 1).unwrap();
        }
        assert!(!latch_was_set(&writer), "one page is not enough in 17");
        while end < wal.start() + 2 * XLOG_BLCKSZ + 100 {
            end = wal.commit(&mut b, &mut w, 1).unwrap();
        }
        assert!(latch_was_set(&writer));
        // A commit that does not raise asyncXactLSN decides nothing.
        wal.set_async_xact_lsn(&mut b, &mut w, end - 8).unwrap();
        assert!(!latch_was_set(&writer));
    }

    #[test]
    fn the_wal_writer_thread_flushes_async_commits_and_stops_when_asked() {
        for wal_writer in [
            WalWriter::Timed,
            WalWriter::Latch,
            WalWriter::LatchFlushAfter,
        ] {
            let dev = RecordingDevice::new();
            let flushed = dev.flushed_upto();
            let cfg = WalConfig {
                synchronous_commit: false,
                wal_writer,
                wal_writer_delay: Duration::from_millis(5),
                ..WalConfig::new(2)
            };
            let wal: TestWal = Wal::new(cfg, Box::new(dev)).unwrap();
            let procs = ProcTable::new(2);
            std::thread::scope(|s| {
                let writer = s.spawn(|| {
                    let mut b = procs.attach().unwrap();
                    wal.wal_writer_main(&mut b, |_| {})
                });
                let mut b = procs.attach().unwrap();
                let mut w = wal.backend();
                let end = wal.commit(&mut b, &mut w, 1).unwrap();
                let start = Instant::now();
                while flushed.load(Sc) < end {
                    assert!(start.elapsed() < Duration::from_secs(20), "{wal_writer:?}");
                    std::thread::sleep(Duration::from_millis(1));
                }
                wal.shutdown_wal_writer(&procs);
                writer.join().unwrap().unwrap();
            });
        }
    }
}
