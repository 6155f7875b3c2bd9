//! Models the insertion half of xlog.c: `WALInsertLockAcquire` (with its lock-choice
//! migration), `WALInsertLockAcquireExclusive`, `WALInsertLockRelease`,
//! `WALInsertLockUpdateInsertingAt`, `ReserveXLogInsertLocation`, `ReserveXLogSwitch`,
//! `WaitXLogInsertionsToFinish`, `XLogInsertRecord` and `CopyXLogRecordToWAL`. The algorithm is
//! described in the crate documentation.

use crate::pos::{maxalign, SIZE_OF_XLOG_RECORD, XLOG_BLCKSZ};
use crate::record::{self, Record};
use crate::{InsertPos, Wal, WalBackend, WalError, XLOG_RECORD_MAX_SIZE};
use pglocks_lwlock::{LwLockMode, RawLwLock, VarProtocol, VarWait};
use pglocks_proc::Backend;
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::Ordering::*;

/// Where a reservation put a record (`StartPos`, `EndPos`, `PrevPtr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reserved {
    start: u64,
    end: u64,
    prev: u64,
}

impl<K: RawLwLock, P: VarProtocol, R: RawSpinLock> Wal<K, P, R> {
    /// Models `WALInsertLockAcquire`: takes the lock this backend used last (at first
    /// `procno % locks`), and moves on to the next one for next time if it had to wait.
    /// ≤ 9.3 has one lock, `WALInsertLock`, so this is a plain `LWLockAcquire` of it.
    #[inline]
    fn insert_lock_acquire(&self, b: &mut Backend, w: &mut WalBackend) -> Result<(), WalError> {
        let n = self.insert_locks.len();
        let lock_no = *w.lock_to_try.get_or_insert(b.procno() % n);
        w.my_lock_no = lock_no;
        let immediate = self.insert_locks[lock_no]
            .lock
            .acquire(b, LwLockMode::Exclusive)?;
        if !immediate {
            w.lock_to_try = Some((lock_no + 1) % n);
        }
        Ok(())
    }

    /// Models `WALInsertLockAcquireExclusive`: takes every insertion lock in order; all but
    /// the last get `insertingAt` = infinity, so that flushers never wait on them. With ≤ 9.3's
    /// single `WALInsertLock` that is just taking it.
    fn insert_lock_acquire_exclusive(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
    ) -> Result<(), WalError> {
        let last = self.insert_locks.len() - 1;
        for (i, l) in self.insert_locks.iter().enumerate() {
            let taken = l.lock.acquire(b, LwLockMode::Exclusive).and_then(|_| {
                if i < last {
                    l.lock.update_var(b, &l.inserting_at, u64::MAX)
                } else {
                    Ok(())
                }
            });
            if let Err(e) = taken {
                // Give back the ones already taken, so the error leaves nothing held.
                for held in self.insert_locks[..i].iter().rev() {
                    held.lock.release_clear_var(b, &held.inserting_at, 0)?;
                }
                return Err(e.into());
            }
        }
        w.holding_all_locks = true;
        Ok(())
    }

    /// Models `WALInsertLockRelease`: releases our lock (or all of them), clearing
    /// `insertingAt` to 0 so the next holder starts as "position unknown".
    #[inline]
    fn insert_lock_release(&self, b: &mut Backend, w: &mut WalBackend) -> Result<(), WalError> {
        if w.holding_all_locks {
            for l in self.insert_locks.iter() {
                l.lock.release_clear_var(b, &l.inserting_at, 0)?;
            }
            w.holding_all_locks = false;
        } else {
            let l = &self.insert_locks[w.my_lock_no];
            l.lock.release_clear_var(b, &l.inserting_at, 0)?;
        }
        Ok(())
    }

    /// Models `WALInsertLockUpdateInsertingAt`: advertises that our insertion has copied
    /// everything before `inserting_at` (on the last lock when holding them all).
    pub(crate) fn update_inserting_at(
        &self,
        b: &mut Backend,
        w: &WalBackend,
        inserting_at: u64,
    ) -> Result<(), WalError> {
        let l = if w.holding_all_locks {
            self.insert_locks.last().expect("at least one lock")
        } else {
            &self.insert_locks[w.my_lock_no]
        };
        l.lock.update_var(b, &l.inserting_at, inserting_at)?;
        Ok(())
    }

    /// Models `ReserveXLogInsertLocation`: `size` (MAXALIGNed) bytes at the tip of WAL, decided
    /// under `insertpos_lck` with nothing but two loads and two stores inside.
    #[inline]
    fn reserve(&self, b: &mut Backend, size: u64) -> Result<Reserved, WalError> {
        let (start, end, prev) = self.ctl.insert_pos.lock(b)?.with_mut(|p| {
            let start = p.curr;
            let prev = p.prev;
            p.curr = start + size;
            p.prev = Some(start);
            (start, start + size, prev)
        });
        Ok(Reserved {
            start: self.layout.bytepos_to_recptr(start),
            end: self.layout.bytepos_to_end_recptr(end),
            prev: prev.map_or(0, |p| self.layout.bytepos_to_recptr(p)),
        })
    }

    /// Models `ReserveXLogSwitch`: a switch record plus the rest of its segment, or
    /// `Err(position)` if WAL is exactly at a segment start (nothing to switch). Called holding
    /// all insertion locks, so the arithmetic under the spinlock competes with nobody.
    fn reserve_switch(&self, b: &mut Backend) -> Result<Result<Reserved, u64>, WalError> {
        let layout = self.layout;
        self.ctl.insert_pos.lock(b)?.with_mut(|p: &mut InsertPos| {
            let start_bytepos = p.curr;
            let at = layout.bytepos_to_end_recptr(start_bytepos);
            if layout.segment_offset(at) == 0 {
                return Ok(Err(at));
            }
            let start = layout.bytepos_to_recptr(start_bytepos);
            let mut end = layout.bytepos_to_end_recptr(start_bytepos + SIZE_OF_XLOG_RECORD);
            let left = layout.segment_size() - layout.segment_offset(end);
            if left != layout.segment_size() {
                end += left;
            }
            let prev = p.prev.map_or(0, |p| layout.bytepos_to_recptr(p));
            p.curr = layout.recptr_to_bytepos(end);
            p.prev = Some(start_bytepos);
            Ok(Ok(Reserved { start, end, prev }))
        })
    }

    /// Where the last reserved record starts (`PrevBytePos` as an LSN), if any.
    pub fn last_record(&self, b: &mut Backend) -> Result<Option<u64>, WalError> {
        let prev = self.ctl.insert_pos.lock(b)?.with(|p| p.prev);
        Ok(prev.map(|p| self.layout.bytepos_to_recptr(p)))
    }

    /// How far WAL space has been reserved, as an end LSN (the read of `CurrBytePos` that
    /// `WaitXLogInsertionsToFinish` and `GetXLogInsertRecPtr` make).
    pub(crate) fn reserved_upto(&self, b: &mut Backend) -> Result<u64, WalError> {
        let curr = self.ctl.insert_pos.lock(b)?.with(|p| p.curr);
        Ok(self.layout.bytepos_to_end_recptr(curr))
    }

    /// Models `WaitXLogInsertionsToFinish`: waits until every insertion into WAL before `upto`
    /// has been copied, and returns how far WAL is completely copied (at least `upto`, unless
    /// `upto` is past what has been reserved).
    pub fn wait_insertions_to_finish(&self, b: &mut Backend, upto: u64) -> Result<u64, WalError> {
        if self.cfg.insert_result_cache {
            let inserted = self.ctl.log_insert_result.load(SeqCst);
            if upto <= inserted {
                return Ok(inserted);
            }
        }
        let reserved_upto = self.reserved_upto(b)?;
        // A request past the reserved tip waits for everything reserved (PostgreSQL logs it).
        let upto = upto.min(reserved_upto);
        let mut finished_upto = reserved_upto;
        for l in self.insert_locks.iter() {
            let mut inserting_at = 0;
            loop {
                match l.lock.wait_for_var(b, &l.inserting_at, inserting_at)? {
                    VarWait::Free => {
                        inserting_at = 0;
                        break;
                    }
                    VarWait::Changed(v) => {
                        inserting_at = v;
                        if v >= upto {
                            break;
                        }
                    }
                }
            }
            if inserting_at != 0 && inserting_at < finished_upto {
                finished_upto = inserting_at;
            }
        }
        if self.cfg.insert_result_cache {
            let before = self.ctl.log_insert_result.fetch_max(finished_upto, SeqCst);
            return Ok(before.max(finished_upto));
        }
        Ok(finished_upto)
    }

    /// Models `XLogInsertRecord`: reserves space for `rec`, copies it in under an insertion lock
    /// (≤ 9.3: under `WALInsertLock`), and returns its end LSN, the point to flush to.
    pub fn insert(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        rec: &Record<'_>,
    ) -> Result<u64, WalError> {
        self.check_usable()?;
        let tot_len = rec.total_len();
        if rec.rmid == record::RM_XLOG_ID && rec.info == record::XLOG_SWITCH {
            return Err(WalError::InvalidRecord(
                "an XLOG_SWITCH record is inserted by switch_segment",
            ));
        }
        if rec.payload.is_empty() {
            return Err(WalError::InvalidRecord("a record must carry data"));
        }
        if tot_len > XLOG_RECORD_MAX_SIZE {
            return Err(WalError::RecordTooLarge {
                len: tot_len,
                max: XLOG_RECORD_MAX_SIZE,
            });
        }
        // The payload's CRC is computed before any lock, the header's once the prev-link is known.
        let payload_crc = record::payload_crc(rec.payload);
        self.insert_lock_acquire(b, w)?;
        let copied = self.reserve(b, maxalign(tot_len)).and_then(|at| {
            let mut words = std::mem::take(&mut w.words);
            record::encode(rec, at.prev, payload_crc, &mut words);
            let copied = self.copy_to_wal(b, w, &words, tot_len, at);
            w.words = words;
            copied.map(|()| at)
        });
        self.insert_lock_release(b, w)?;
        let at = copied?;
        if at.start / XLOG_BLCKSZ != at.end / XLOG_BLCKSZ {
            // Crossed a page: post a write request for the full pages (and refresh our view).
            w.logwrt = self.ctl.info.lock(b)?.with_mut(|info| {
                info.request.write = info.request.write.max(at.end);
                info.result
            });
        }
        b.stats.events.count("wal.records", 1);
        b.stats.events.count("wal.bytes", maxalign(tot_len));
        Ok(at.end)
    }

    /// Models `CopyXLogRecordToWAL` for a record of `tot_len` bytes encoded as `words`: copies
    /// page by page, marking each page it continues onto with the bytes still to come.
    fn copy_to_wal(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        words: &[u64],
        tot_len: u64,
        at: Reserved,
    ) -> Result<(), WalError> {
        let switch = self.is_switch(words);
        let mut ptr = at.start;
        let mut copied = 0;
        let mut idx = self.get_buffer(b, w, ptr)?;
        loop {
            let room = ((XLOG_BLCKSZ - ptr % XLOG_BLCKSZ) / 8) as usize;
            let n = room.min(words.len() - copied);
            self.buffers
                .store(idx, ptr % XLOG_BLCKSZ, &words[copied..copied + n]);
            copied += n;
            ptr += n as u64 * 8;
            if copied == words.len() {
                break;
            }
            // On to the next page: it starts with the rest of this record.
            idx = self.get_buffer(b, w, ptr)?;
            self.buffers
                .mark_continuation(idx, tot_len - copied as u64 * 8);
            ptr += self.layout.page_header_size(ptr);
        }
        if ptr != at.end && !(switch && self.layout.segment_offset(at.end) == 0) {
            return Err(WalError::Internal(format!(
                "space reserved for WAL record does not match what was written ({} vs {})",
                crate::lsn(ptr),
                crate::lsn(at.end)
            )));
        }
        if switch {
            // The rest of the segment belongs to the switch record: initialise each page (one
            // at a time, so a small wal_buffers does not deadlock against ourselves) and zero
            // its header, leaving zeros that compress well.
            ptr += (XLOG_BLCKSZ - ptr % XLOG_BLCKSZ) % XLOG_BLCKSZ;
            while ptr < at.end {
                let idx = self.get_buffer(b, w, ptr)?;
                self.buffers.store(idx, 0, &[0; 3]);
                ptr += XLOG_BLCKSZ;
            }
        }
        Ok(())
    }

    /// Is this encoded record `XLOG_SWITCH` (`XLogInsertRecord`'s `isLogSwitch`)?
    fn is_switch(&self, words: &[u64]) -> bool {
        let w2 = words[2];
        words.len() == 3 && (w2 >> 8) as u8 == record::RM_XLOG_ID && w2 as u8 == record::XLOG_SWITCH
    }

    /// Models `RequestXLogSwitch` / `XLogInsertRecord` for an `XLOG_SWITCH` record: with all
    /// insertion locks held, ends the current segment, then flushes the record and the padding
    /// that fills the rest of the segment. Returns the end of the switch record itself (as
    /// PostgreSQL does, not the end of the segment), or, if WAL was exactly at a segment start,
    /// that position (nothing is inserted).
    pub fn switch_segment(&self, b: &mut Backend, w: &mut WalBackend) -> Result<u64, WalError> {
        let rec = Record {
            xid: 0,
            rmid: record::RM_XLOG_ID,
            info: record::XLOG_SWITCH,
            payload: &[],
        };
        self.check_usable()?;
        self.insert_lock_acquire_exclusive(b, w)?;
        let done = self.reserve_switch(b).and_then(|at| match at {
            Err(position) => Ok(Err(position)),
            Ok(at) => {
                let mut words = std::mem::take(&mut w.words);
                record::encode(&rec, at.prev, record::payload_crc(&[]), &mut words);
                let copied = self.copy_to_wal(b, w, &words, SIZE_OF_XLOG_RECORD, at);
                w.words = words;
                copied.map(|()| Ok(at))
            }
        });
        self.insert_lock_release(b, w)?;
        let at = match done? {
            Ok(at) => at,
            Err(position) => return Ok(position),
        };
        w.logwrt = self.ctl.info.lock(b)?.with_mut(|info| {
            info.request.write = info.request.write.max(at.end);
            info.result
        });
        self.flush(b, w, at.end)?;
        b.stats.events.count("wal.switches", 1);
        let start = self.layout.recptr_to_bytepos(at.start);
        Ok(self
            .layout
            .bytepos_to_end_recptr(start + SIZE_OF_XLOG_RECORD))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{NullDevice, Record, Wal, WalConfig};
    use pglocks_lwlock::wait_state::WAITING;
    use pglocks_lwlock::{AtomicLwLock, LwLockMode, Pg96Layout};
    use pglocks_proc::ProcTable;
    use pglocks_sync::atomic::Ordering::Relaxed;

    #[test]
    fn a_backend_that_waited_for_its_insertion_lock_moves_to_the_next() {
        let wal: Wal<AtomicLwLock<Pg96Layout>> =
            Wal::new(WalConfig::new(2), Box::new(NullDevice)).unwrap();
        let procs = ProcTable::new(2);
        let mut holder = procs.attach().unwrap();
        let mut b = procs.attach().unwrap();
        let mut w = wal.backend();
        let rec = Record {
            xid: 1,
            rmid: 10,
            info: 0,
            payload: &[1; 40],
        };
        // Uncontended, a backend keeps to lock procno % 8.
        let first = b.procno() % 8;
        for _ in 0..3 {
            wal.insert(&mut b, &mut w, &rec).unwrap();
        }
        assert_eq!(w.lock_to_try, Some(first));
        // Someone holds that lock: the insert waits for it, then moves on for next time.
        let lock = &wal.insert_locks[first].lock;
        lock.acquire(&mut holder, LwLockMode::Exclusive).unwrap();
        std::thread::scope(|s| {
            let (wal, rec) = (&wal, &rec);
            let (b, w) = (&mut b, &mut w);
            let t = s.spawn(move || {
                b.take_stats();
                wal.insert(b, w, rec).unwrap();
                let slept = b
                    .take_stats()
                    .waits
                    .entries()
                    .iter()
                    .any(|e| e.lock == "WALInsert");
                (w.my_lock_no, w.lock_to_try, slept)
            });
            let slot = procs.slot(1 - holder.procno());
            while slot.lw_waiting.load(Relaxed) != WAITING {
                std::thread::yield_now();
            }
            // Queued; give it time to go to sleep (if it does not, its second attempt took the
            // lock and it did not wait: PostgreSQL's LWLockAcquire then reports no wait either).
            std::thread::sleep(std::time::Duration::from_millis(20));
            lock.release(&mut holder).unwrap();
            let (used, next, slept) = t.join().unwrap();
            assert_eq!(used, first);
            let expected = if slept { (first + 1) % 8 } else { first };
            assert_eq!(next, Some(expected), "slept: {slept}");
        });
    }
}
