//! Models the flush half of xlog.c and xact.c: `XLogFlush` (group commit), `XLogWrite`,
//! `XLogNeedsFlush`, `MinimumActiveBackends` (procarray.c) and the WAL part of
//! `RecordTransactionCommit` (its asynchronous branch is in the `walwriter` module).
//!
//! `XLogWrite` runs only under `WALWriteLock`. It hands the device the buffer pages from how far
//! WAL is written up to the request, in runs that stop at the end of the ring and of a segment
//! (a partial last page is written whole, and written again next time), flushes when the request
//! asks for it, and publishes the new `LogwrtResult` under `info_lck`.

use crate::device::{wal_segment_path, DeviceError, FlushDevice};
use crate::pos::XLOG_BLCKSZ;
use crate::record::Record;
use crate::{FlushWait, Insertion, Wal, WalBackend, WalError};
use pglocks_lwlock::{LwLockMode, RawLwLock, VarProtocol};
use pglocks_proc::Backend;
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::Ordering::*;
use pglocks_sync::time::Instant;

/// How far WAL is written and flushed (`XLogwrtResult`), or asked to be (`XLogwrtRqst`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteResult {
    /// Written to the device up to here.
    pub write: u64,
    /// Durable up to here.
    pub flush: u64,
}

/// What only the `WALWriteLock` holder touches: the device, a byte buffer for it, and the
/// walk that counts commits per flush.
pub(crate) struct Writer {
    device: Box<dyn FlushDevice>,
    bytes: Vec<u8>,
    /// Zeros standing in for the pages, for a device that does not look at them.
    zeros: Vec<u8>,
    /// Authoritative `LogwrtResult` (XLogCtl->Write.LogwrtResult before 9.5).
    result: WriteResult,
    /// Start of the first record not yet counted; `None` once counting gave up.
    next_record: Option<u64>,
    /// Commits written since the last flush.
    pending_commits: u64,
}

impl Writer {
    pub(crate) fn new(device: Box<dyn FlushDevice>, result: WriteResult, first: u64) -> Self {
        Self {
            device,
            bytes: Vec::new(),
            zeros: Vec::new(),
            result,
            next_record: Some(first),
            pending_commits: 0,
        }
    }
}

impl<K: RawLwLock, P: VarProtocol, R: RawSpinLock> Wal<K, P, R> {
    /// How far WAL is written and flushed: `LogwrtResult` as published under `info_lck`
    /// (`RefreshXLogWriteResult`).
    pub fn write_result(&self, b: &mut Backend) -> Result<WriteResult, WalError> {
        Ok(self.ctl.info.lock(b)?.with(|info| info.result))
    }

    /// Marks backend `b` as in a transaction with an xid (or not): what
    /// `MinimumActiveBackends` counts.
    pub fn set_active(&self, b: &Backend, active: bool) {
        if let Some(a) = self.active.get(b.procno()) {
            a.store(active, Relaxed);
        }
    }

    /// Models `MinimumActiveBackends` (procarray.c): are at least `min` *other* backends in a
    /// transaction with an xid? Reads every slot without a lock, as PostgreSQL does; the answer
    /// is a heuristic.
    pub fn minimum_active_backends(&self, b: &Backend, min: u32) -> bool {
        if min == 0 {
            return true;
        }
        let mut count = 0;
        for (i, a) in self.active.iter().enumerate() {
            if i != b.procno() && a.load(Relaxed) {
                count += 1;
                if count >= min {
                    return true;
                }
            }
        }
        false
    }

    /// The `pg_usleep(CommitDelay)` of `XLogFlush` (9.3+) or `RecordTransactionCommit` (≤ 9.2),
    /// counted as the wait event `CommitDelay`.
    fn commit_delay(&self, b: &mut Backend) {
        b.sleep_as_wait(self.cfg.commit_delay, "CommitDelay", "Timeout");
    }

    /// `CommitDelay > 0 && enableFsync && MinimumActiveBackends(CommitSiblings)`: should a
    /// committer sleep `commit_delay` now? Never with `fsync = off`: there is no fsync for
    /// more commits to share.
    fn wants_commit_delay(&self, b: &Backend) -> bool {
        !self.cfg.commit_delay.is_zero()
            && self.enable_fsync
            && self.minimum_active_backends(b, self.cfg.commit_siblings)
    }

    /// The WAL part of `RecordTransactionCommit` (xact.c): inserts a commit record for `xid`,
    /// then, with `synchronous_commit` on, (≤ 9.2: sleeps `commit_delay`) and flushes it
    /// (`XLogFlush`); with it off, hands its end to the WAL writer (`XLogSetAsyncXactLSN`,
    /// [`Wal::set_async_xact_lsn`]) and returns without waiting for any flush or taking
    /// `WALWriteLock`. Returns the record's end. Clears the backend's active mark.
    ///
    /// Shortcut: PostgreSQL also commits synchronously when the transaction drops relations
    /// (`nrels > 0`) or forces it (`forceSyncCommit`); the model's transactions do neither.
    pub fn commit(&self, b: &mut Backend, w: &mut WalBackend, xid: u32) -> Result<u64, WalError> {
        self.set_active(b, true);
        let synchronous = self.cfg.synchronous_commit;
        let committed = self.insert(b, w, &Record::commit(xid)).and_then(|end| {
            if !synchronous {
                return self.set_async_xact_lsn(b, w, end).map(|()| end);
            }
            if !self.cfg.commit_delay_in_flush && self.wants_commit_delay(b) {
                self.commit_delay(b);
            }
            self.flush(b, w, end).map(|()| end)
        });
        self.set_active(b, false);
        if committed.is_ok() {
            b.stats.events.count("wal.commits", 1);
            if !synchronous {
                b.stats.events.count("wal.async_commits", 1);
            }
        }
        committed
    }

    /// Models `XLogNeedsFlush`: is WAL not yet known durable up to `record`? Looks at the
    /// backend's own `LogwrtResult` first, then refreshes it under `info_lck`. (`SetHintBits`
    /// asks it before hinting a tuple whose transaction committed asynchronously.)
    pub fn needs_flush(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        record: u64,
    ) -> Result<bool, WalError> {
        if record <= w.logwrt.flush {
            return Ok(false);
        }
        w.logwrt = self.write_result(b)?;
        Ok(record > w.logwrt.flush)
    }

    /// Models `XLogFlush`: returns once WAL is durable up to `record`, having flushed it itself
    /// (with everything inserted before it) or found that another backend's flush covered it.
    pub fn flush(&self, b: &mut Backend, w: &mut WalBackend, record: u64) -> Result<(), WalError> {
        self.check_usable()?;
        if record <= w.logwrt.flush {
            return Ok(());
        }
        self.flush_loop(b, w, record)?;
        if w.logwrt.flush < record {
            return Err(WalError::FlushNotSatisfied {
                request: crate::lsn(record),
                flushed: crate::lsn(w.logwrt.flush),
            });
        }
        Ok(())
    }

    /// `XLogFlush`'s loop: piggyback on the largest write request, (9.4+) wait for insertions
    /// up to it, then get `WALWriteLock` or the news that its holder flushed our record; the
    /// leader re-checks, sleeps `commit_delay` (9.3+), and writes and flushes everything
    /// inserted. Up to 9.3 there are no insertion locks to wait for: the leader learns how far
    /// WAL is inserted by taking `WALInsertLock` if it is free, else writes just its request.
    fn flush_loop(&self, b: &mut Backend, w: &mut WalBackend, record: u64) -> Result<(), WalError> {
        let insertion_locks = matches!(self.cfg.insertion, Insertion::Locks(_));
        let mut request = record;
        loop {
            let (result, posted) = self
                .ctl
                .info
                .lock(b)?
                .with(|info| (info.result, info.request.write));
            w.logwrt = result;
            if record <= w.logwrt.flush {
                return Ok(());
            }
            request = request.max(posted);
            let mut insert_pos = if insertion_locks {
                Some(self.wait_insertions_to_finish(b, request)?)
            } else {
                None
            };
            if !self.acquire_write_lock(b)? {
                // The holder is gone; it may have flushed our record.
                continue;
            }
            let written = self.lead_flush(b, w, record, request, &mut insert_pos);
            self.write_lock.release(b)?;
            return written;
        }
    }

    /// The flush leader's part of `XLogFlush`, holding `WALWriteLock`.
    fn lead_flush(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        record: u64,
        request: u64,
        insert_pos: &mut Option<u64>,
    ) -> Result<(), WalError> {
        w.logwrt = self.write_result(b)?;
        if record <= w.logwrt.flush {
            return Ok(());
        }
        if self.cfg.commit_delay_in_flush && self.wants_commit_delay(b) {
            self.commit_delay(b);
            if let Some(pos) = *insert_pos {
                // Only to move forward: everything before `pos` is already copied, and waiting
                // for more while holding WALWriteLock could deadlock.
                *insert_pos = Some(self.wait_insertions_to_finish(b, pos)?);
            }
        }
        let (write, flush) = match *insert_pos {
            Some(pos) => (pos, pos),
            None => {
                let insert_lock = &self.insert_locks[0].lock;
                if insert_lock.conditional_acquire(b, LwLockMode::Exclusive)? {
                    let inserted = self.reserved_upto(b);
                    insert_lock.release(b)?;
                    let inserted = inserted?;
                    (inserted, inserted)
                } else {
                    (request, record)
                }
            }
        };
        self.xlog_write(b, w, write, flush)
    }

    /// `WALWriteLock` as the release waits for it: `true` when taken; `false` when
    /// `LWLockAcquireOrWait` waited for a release instead (9.2+).
    fn acquire_write_lock(&self, b: &mut Backend) -> Result<bool, WalError> {
        Ok(match self.cfg.flush_wait {
            FlushWait::Acquire => {
                self.write_lock.acquire(b, LwLockMode::Exclusive)?;
                true
            }
            FlushWait::AcquireOrWait => {
                self.write_lock.acquire_or_wait(b, LwLockMode::Exclusive)?
            }
        })
    }

    /// Models `XLogWrite`: writes WAL up to `write_upto` and, if `flush_upto` is past what is
    /// durable, flushes everything written. The caller holds `WALWriteLock` and has made sure
    /// every insertion before `write_upto` is copied.
    pub(crate) fn xlog_write(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        write_upto: u64,
        flush_upto: u64,
    ) -> Result<(), WalError> {
        let mut guard = self
            .writer
            .lock()
            .map_err(|_| WalError::Internal("the WAL writer state is poisoned".into()))?;
        // A leader that got WALWriteLock after another's write or fsync failed must not write
        // (in PostgreSQL the PANIC would have ended it).
        self.check_usable()?;
        let wr = &mut *guard;
        let mut result = wr.result;
        let seg = self.layout.segment_size();
        // The current run of pages to write: (first buffer, first page's LSN, pages).
        let mut run: Option<(usize, u64, usize)> = None;
        while result.write < write_upto {
            let page_start = result.write - result.write % XLOG_BLCKSZ;
            let idx = self.buffers.index(page_start);
            let end = self.buffers.end_of(idx);
            if end != page_start + XLOG_BLCKSZ {
                return Err(WalError::Internal(format!(
                    "xlog write request {} is past end of log {}",
                    crate::lsn(write_upto),
                    crate::lsn(end)
                )));
            }
            result.write = end;
            let partial = write_upto < end;
            let r = run.get_or_insert((idx, page_start, 0));
            r.2 += 1;
            let finishing_segment = end % seg == 0;
            if partial || end >= write_upto || idx == self.buffers.len() - 1 || finishing_segment {
                let (first, lsn, pages) = run.take().expect("a run was started");
                self.device_write(b, wr, first, lsn, pages)?;
            }
            if finishing_segment && !partial {
                // A finished segment is flushed before moving on (as XLogWrite does, so the
                // segment can be closed).
                if self.cfg.count_commits {
                    self.count_commits(wr, end);
                }
                self.device_flush(b, wr, end)?;
                result.flush = end;
            }
            if partial {
                result.write = write_upto;
            }
        }
        if self.cfg.count_commits {
            self.count_commits(wr, result.write);
        }
        if flush_upto > result.flush && result.flush < result.write {
            self.device_flush(b, wr, result.write)?;
            result.flush = result.write;
        }
        wr.result = result;
        drop(guard);
        // Publish, and raise the requests to what is done so nobody asks for less.
        self.ctl.info.lock(b)?.with_mut(|info| {
            info.result = result;
            info.request.write = info.request.write.max(result.write);
            info.request.flush = info.request.flush.max(result.flush);
        });
        w.logwrt = result;
        Ok(())
    }

    /// The `pg_pwrite` loop of a run of pages in `XLogWrite`: a short write is followed by a
    /// write of the rest; a failure (or a write of nothing) is the PANIC, which marks the WAL
    /// failed.
    fn device_write(
        &self,
        b: &mut Backend,
        wr: &mut Writer,
        first: usize,
        lsn: u64,
        pages: usize,
    ) -> Result<(), WalError> {
        let len = pages * XLOG_BLCKSZ as usize;
        // `pg_pwrite` reads the pages, whatever the device does with the bytes.
        self.buffers.charge_write_out(first, pages);
        let data = if wr.device.wants_bytes() {
            wr.bytes.clear();
            self.buffers.copy_out(first, pages, &mut wr.bytes);
            &wr.bytes[..]
        } else {
            if wr.zeros.len() < len {
                wr.zeros.resize(len, 0);
            }
            &wr.zeros[..len]
        };
        let t = Instant::now();
        let mut done = 0;
        while done < len {
            let at = lsn + done as u64;
            let written = match wr.device.write_some(at, &data[done..]) {
                Ok(0) => Err(DeviceError::Write {
                    path: wal_segment_path(at, self.layout.segment_size()),
                    offset: self.layout.segment_offset(at),
                    len: len - done,
                    source: std::io::Error::new(std::io::ErrorKind::WriteZero, "wrote no bytes"),
                }),
                other => other,
            };
            let n = written.map_err(|e| self.mark_failed(e))?;
            if done + n < len {
                b.stats.events.count("wal.short_writes", 1);
            }
            done += n.min(len - done);
        }
        b.stats
            .waits
            .record("WalWrite", "IO", t.elapsed().as_nanos() as u64);
        b.stats
            .events
            .count("wal.written_bytes", pages as u64 * XLOG_BLCKSZ);
        Ok(())
    }

    /// `issue_xlog_fsync`.
    fn device_flush(&self, b: &mut Backend, wr: &mut Writer, upto: u64) -> Result<(), WalError> {
        let t = Instant::now();
        wr.device.flush(upto).map_err(|e| self.mark_failed(e))?;
        b.stats
            .waits
            .record("WalSync", "IO", t.elapsed().as_nanos() as u64);
        b.stats.events.count("wal.flushes", 1);
        if self.cfg.count_commits {
            b.stats
                .events
                .sample("wal.commits_per_flush", wr.pending_commits);
            wr.pending_commits = 0;
        }
        Ok(())
    }

    /// Counts the commit records that end by `upto`, walking on from where the last count
    /// stopped. The pages are still in the buffers: nobody may evict them until this write is
    /// published. Gives up (for the rest of the run) if a record's start page is gone.
    fn count_commits(&self, wr: &mut Writer, upto: u64) {
        let Some(mut pos) = wr.next_record else {
            return;
        };
        while pos < upto {
            match self.read_record_at(pos, upto) {
                Ok(Some(r)) => {
                    if Record::is_commit(r.rmid, r.info) {
                        wr.pending_commits += 1;
                    }
                    pos = self.next_record_start(&r);
                }
                Ok(None) => break,
                Err(_) => {
                    wr.next_record = None;
                    return;
                }
            }
        }
        wr.next_record = Some(pos);
    }
}
