//! Models the WAL buffers of xlog.c: the page ring (`XLogCtl->pages`, `xlblocks`),
//! `GetXLogBuffer` and `AdvanceXLInsertBuffer`, and a reader of records in the buffers.
//!
//! Page `p` of the WAL can only be in buffer `p % wal_buffers`, and `xlblocks[i]` holds the end
//! LSN of the page buffer `i` holds (0 while it is being initialised). An inserter finds its page
//! by one load of `xlblocks`; only when the page is not there does it take
//! `WALBufMappingLock` and initialise pages up to it, writing out (under `WALWriteLock`) any
//! buffer whose old page has not been written yet. Before it may block there, it advertises in
//! its insertion lock's `insertingAt` how far it has copied, so that a flusher waiting for it
//! does not wait for it to finish an I/O that may need the flusher's own lock.
//!
//! # Layout and what a simulated CPU is charged
//! `XLOGShmemInit` places the page buffers (`XLogCtl->pages`) after the insertion locks and
//! `xlblocks`, aligned to `XLOG_BLCKSZ` (`TYPEALIGN(XLOG_BLCKSZ, allocptr)`, for `O_DIRECT`),
//! the pages back to back; here they are one allocation of [`WalPage`]s, each on an 8192-byte
//! boundary of the host's memory as in PostgreSQL's. In the simulated shared-memory map
//! `xlblocks` (`XLogCtl->xlblocks`) and the pages (`XLogCtl->pages`) are each placed as a
//! region of their own (see [`Wal`]), which the map starts on a 128-byte boundary only; that
//! changes no line: a page is a whole number of lines (8192 is a multiple of the line), so a
//! record's bytes lie on the lines of its page PostgreSQL's would whichever boundary the page
//! starts on. The words are std's atomics (the
//! insertion, `WALBufMappingLock` and `WALWriteLock` order them) and their lines are charged
//! explicitly, one touch per contiguous piece:
//! - `CopyXLogRecordToWAL`: each piece of a record copied into a page is a store to the lines
//!   it covers, and a page it continues onto has the `xlp_info` and `xlp_rem_len` of its header
//!   written. The copy's time is the touches' time: a line in the copier's cache costs a hit
//!   (5 cycles on Westmere, about what copying its 8 words takes), a line elsewhere its
//!   transfer, and no separate charge for the copy's CPU time is made.
//! - `AdvanceXLInsertBuffer`: its `MemSet` of the whole page, a store to every line (a
//!   simulated core's store buffer overlaps their ownership requests, up to its fill
//!   buffers), then the header (24 bytes, 40 at a segment's start).
//! - `XLogWrite`: `write` reads every line of the pages it writes, loads that do not wait for
//!   each other ([`pglocks_sync::shmem::independent`]), whether or not the device keeps the
//!   bytes.
//!
//! Reading records back ([`Wal::read_records`], commit counting) is the model's own bookkeeping
//! and is not charged.

use crate::pos::{Layout, SIZE_OF_XLOG_LONG_PHD, SIZE_OF_XLOG_SHORT_PHD, XLOG_BLCKSZ};
use crate::record::{self, ReadRecord, XLP_FIRST_IS_CONTRECORD};
use crate::{Wal, WalBackend, WalError};
use pglocks_lwlock::{LwLockMode, RawLwLock, VarProtocol};
use pglocks_proc::Backend;
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU64 as SyncU64, Ordering::*};
use pglocks_sync::data::touch_range;
use pglocks_sync::shmem::{independent, Placed};
// The page bytes are data, not synchronisation: the locks order every access to them, so they
// are std's atomics even under loom (loom would track each word as a synchronisation point).
// Their lines are charged with explicit touches (see the module's documentation).
use std::sync::atomic::AtomicU64 as PageWord;

/// Words per page.
const PAGE_WORDS: usize = (XLOG_BLCKSZ / 8) as usize;

/// One page buffer, on an `XLOG_BLCKSZ` boundary as `XLOGShmemInit` aligns them.
#[repr(C, align(8192))]
pub(crate) struct WalPage([PageWord; PAGE_WORDS]);

const _: () = assert!(std::mem::align_of::<WalPage>() as u64 == XLOG_BLCKSZ);
const _: () = assert!(std::mem::size_of::<WalPage>() as u64 == XLOG_BLCKSZ);

/// The ring of WAL pages.
pub(crate) struct Buffers {
    pages: Box<[WalPage]>,
    xlblocks: Box<[SyncU64]>,
}

/// Bytes of a page header a new page gets (`SizeOfXLogShortPHD`, `SizeOfXLogLongPHD`).
fn header_bytes(long: bool) -> usize {
    if long {
        SIZE_OF_XLOG_LONG_PHD as usize
    } else {
        SIZE_OF_XLOG_SHORT_PHD as usize
    }
}

impl Buffers {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            pages: (0..n)
                .map(|_| WalPage(std::array::from_fn(|_| PageWord::new(0))))
                .collect(),
            xlblocks: (0..n).map(|_| SyncU64::new(0)).collect(),
        }
    }

    /// Places `xlblocks` in the simulated shared-memory map, as `XLogCtl->xlblocks`.
    pub(crate) fn place_xlblocks(&self) -> Placed {
        Placed::slice("XLogCtl->xlblocks", &self.xlblocks)
    }

    /// Places the page buffers in the simulated shared-memory map, as `XLogCtl->pages`.
    pub(crate) fn place_pages(&self) -> Placed {
        Placed::slice("XLogCtl->pages", &self.pages)
    }

    /// `XLogRecPtrToBufIdx`.
    #[inline]
    pub(crate) fn index(&self, ptr: u64) -> usize {
        ((ptr / XLOG_BLCKSZ) % self.xlblocks.len() as u64) as usize
    }

    pub(crate) fn len(&self) -> usize {
        self.xlblocks.len()
    }

    /// `xlblocks[idx]`: the end LSN of the page buffer `idx` holds.
    #[inline]
    pub(crate) fn end_of(&self, idx: usize) -> u64 {
        self.xlblocks[idx].load(Acquire)
    }

    #[inline]
    fn word(&self, idx: usize, byte_offset: u64) -> &PageWord {
        &self.pages[idx].0[(byte_offset / 8) as usize]
    }

    /// Stores `words` into buffer `idx` from `byte_offset`, charged as one store touch of the
    /// lines they cover (which is also the copy's time: see the module's documentation).
    #[inline]
    pub(crate) fn store(&self, idx: usize, byte_offset: u64, words: &[u64]) {
        let first = (byte_offset / 8) as usize;
        let piece = &self.pages[idx].0[first..first + words.len()];
        touch_range(piece.as_ptr(), std::mem::size_of_val(piece), true);
        for (slot, &w) in piece.iter().zip(words) {
            slot.store(w, Relaxed);
        }
    }

    /// Charges the reads `XLogWrite`'s `write` makes of pages `idx..idx + n`: every line, as
    /// loads that do not wait for each other.
    pub(crate) fn charge_write_out(&self, idx: usize, n: usize) {
        let run = &self.pages[idx..idx + n];
        independent(|| touch_range(run.as_ptr(), std::mem::size_of_val(run), false));
    }

    /// Reads one word.
    #[inline]
    pub(crate) fn load(&self, idx: usize, byte_offset: u64) -> u64 {
        self.word(idx, byte_offset).load(Relaxed)
    }

    /// Appends pages `idx..idx + n` to `out` as bytes (for a device that wants them).
    /// (Not charged: [`Self::charge_write_out`] charges the write that wants them.)
    pub(crate) fn copy_out(&self, idx: usize, n: usize, out: &mut Vec<u8>) {
        for w in self.pages[idx..idx + n].iter().flat_map(|p| p.0.iter()) {
            out.extend_from_slice(&w.load(Relaxed).to_le_bytes());
        }
    }

    /// Marks the page in buffer `idx` as starting with `rem_len` more bytes of a record
    /// (`CopyXLogRecordToWAL` setting `xlp_rem_len` and `XLP_FIRST_IS_CONTRECORD`): a store to
    /// the header's first line.
    pub(crate) fn mark_continuation(&self, idx: usize, rem_len: u64) {
        touch_range(self.pages[idx].0.as_ptr(), 24, true);
        let w0 = self.word(idx, 0);
        w0.store(
            w0.load(Relaxed) | (u64::from(XLP_FIRST_IS_CONTRECORD) << 16),
            Relaxed,
        );
        self.word(idx, 16).store(rem_len, Relaxed);
    }

    /// Zeroes buffer `idx` and writes the header of the page starting at `page_start`, as
    /// `AdvanceXLInsertBuffer` does (`XLP_BKP_REMOVABLE`: no backup is forcing full-page writes).
    fn init_page(&self, idx: usize, page_start: u64, layout: &Layout) {
        let page = &self.pages[idx].0;
        touch_range(page.as_ptr(), std::mem::size_of_val(page), true);
        for w in page.iter() {
            w.store(0, Relaxed);
        }
        let long = layout.page_header_size(page_start) == SIZE_OF_XLOG_LONG_PHD;
        touch_range(self.pages[idx].0.as_ptr(), header_bytes(long), true);
        self.word(idx, 0)
            .store(record::page_header_word0(long), Relaxed);
        self.word(idx, 8).store(page_start, Relaxed);
        if long {
            self.word(idx, 24).store(record::SYSTEM_IDENTIFIER, Relaxed);
            self.word(idx, 32)
                .store(layout.segment_size() | (XLOG_BLCKSZ << 32), Relaxed);
        }
    }
}

impl<K: RawLwLock, P: VarProtocol, R: RawSpinLock> Wal<K, P, R> {
    /// Models `GetXLogBuffer`: the buffer holding the page of `ptr`, initialising pages up to it
    /// if it is not there yet. The caller holds an insertion lock whose `insertingAt` is at most
    /// `ptr`, which keeps the page from being evicted.
    #[inline]
    pub(crate) fn get_buffer(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        ptr: u64,
    ) -> Result<usize, WalError> {
        let page = ptr / XLOG_BLCKSZ;
        if page == w.cached_page {
            return Ok(w.cached_idx);
        }
        let idx = self.buffers.index(ptr);
        let expected_end = (page + 1) * XLOG_BLCKSZ;
        if self.buffers.end_of(idx) != expected_end {
            self.get_buffer_slow(b, w, ptr, idx, expected_end)?;
        }
        w.cached_page = page;
        w.cached_idx = idx;
        Ok(idx)
    }

    /// `GetXLogBuffer` when the page is not in its buffer: advertise `insertingAt`, then
    /// `AdvanceXLInsertBuffer`.
    #[cold]
    fn get_buffer_slow(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        ptr: u64,
        idx: usize,
        expected_end: u64,
    ) -> Result<(), WalError> {
        // Advertise how far we are before we may block: just before the page header when
        // we are its first inserter, so nobody flushes a header not yet written.
        let in_page = ptr % XLOG_BLCKSZ;
        let in_segment = self.layout.segment_offset(ptr);
        let initialized_upto = if in_page == SIZE_OF_XLOG_SHORT_PHD && in_segment > XLOG_BLCKSZ
            || in_page == SIZE_OF_XLOG_LONG_PHD && in_segment < XLOG_BLCKSZ
        {
            ptr - in_page
        } else {
            ptr
        };
        self.update_inserting_at(b, w, initialized_upto)?;
        self.advance_insert_buffer(b, w, ptr)?;
        if self.buffers.end_of(idx) != expected_end {
            return Err(WalError::Internal(format!(
                "could not find WAL buffer for {}",
                crate::lsn(ptr)
            )));
        }
        Ok(())
    }

    /// Models `AdvanceXLInsertBuffer` (not opportunistic): initialises buffer pages up to the
    /// one holding `upto`, writing out old pages first where needed.
    fn advance_insert_buffer(
        &self,
        b: &mut Backend,
        w: &mut WalBackend,
        upto: u64,
    ) -> Result<(), WalError> {
        self.buf_mapping_lock.acquire(b, LwLockMode::Exclusive)?;
        loop {
            let next = self.ctl.initialized_upto.load(Relaxed);
            if upto < next {
                break;
            }
            let idx = self.buffers.index(next);
            let old_end = self.buffers.end_of(idx);
            if w.logwrt.write < old_end {
                // The buffer's old page may not be written yet: post a write request for it and
                // look again at how far WAL is written.
                w.logwrt = self.ctl.info.lock(b)?.with_mut(|info| {
                    info.request.write = info.request.write.max(old_end);
                    info.result
                });
                if w.logwrt.write < old_end {
                    // Write it ourselves, without WALBufMappingLock: waiting for insertions
                    // while holding it could deadlock with an inserter that needs it.
                    self.buf_mapping_lock.release(b)?;
                    self.wait_insertions_to_finish(b, old_end)?;
                    self.write_lock.acquire(b, LwLockMode::Exclusive)?;
                    w.logwrt = self.write_result(b)?;
                    let wrote = w.logwrt.write < old_end;
                    let written = if wrote {
                        self.xlog_write(b, w, old_end, 0)
                    } else {
                        Ok(())
                    };
                    self.write_lock.release(b)?;
                    written?;
                    if wrote {
                        // pg_stat_wal's wal_buffers_full.
                        b.stats.events.count("wal.buffers_full", 1);
                    }
                    self.buf_mapping_lock.acquire(b, LwLockMode::Exclusive)?;
                    continue;
                }
            }
            // Invalidate the buffer, initialise it, then publish the new page (release order:
            // a reader that sees the new end sees the initialised page).
            self.buffers.xlblocks[idx].store(0, Relaxed);
            pglocks_sync::atomic::fence(Release);
            self.buffers.init_page(idx, next, &self.layout);
            self.buffers.xlblocks[idx].store(next + XLOG_BLCKSZ, Release);
            self.ctl.initialized_upto.store(next + XLOG_BLCKSZ, Relaxed);
        }
        self.buf_mapping_lock.release(b)?;
        Ok(())
    }

    /// Reads back the records from `from` (a record's start) that end at or before `to`, while
    /// they are still in the buffers (a small `XLogReadRecord`): checks page headers, the
    /// continuation lengths of records that cross pages, and every CRC. For tests and reports;
    /// the caller makes sure nothing is being inserted in the range.
    pub fn read_records(&self, from: u64, to: u64) -> Result<Vec<ReadRecord>, String> {
        if from < self.start || to > u64::MAX / 2 {
            return Err(format!(
                "{} to {} is not WAL of this model",
                crate::lsn(from),
                crate::lsn(to)
            ));
        }
        let mut out = Vec::new();
        let mut pos = from;
        while pos < to {
            match self.read_record_at(pos, to)? {
                Some(r) => {
                    pos = self.next_record_start(&r);
                    out.push(r);
                }
                None => break,
            }
        }
        Ok(out)
    }

    /// The one record starting at `lsn`, read back from the buffers (as
    /// [`read_records`](Self::read_records) does); for walking prev-links backwards.
    pub fn read_record(&self, lsn: u64) -> Result<ReadRecord, String> {
        if lsn < self.start {
            return Err(format!("{} is before this WAL", crate::lsn(lsn)));
        }
        self.read_record_at(lsn, u64::MAX / 2)?
            .ok_or_else(|| format!("no whole record at {}", crate::lsn(lsn)))
    }

    /// Where the record after `r` starts.
    pub(crate) fn next_record_start(&self, r: &ReadRecord) -> u64 {
        if r.rmid == record::RM_XLOG_ID && r.info == record::XLOG_SWITCH {
            // The rest of the segment the record ends in is consumed.
            let seg = self.layout.segment_size();
            return r.end.div_ceil(seg).saturating_mul(seg) + SIZE_OF_XLOG_LONG_PHD;
        }
        self.layout
            .bytepos_to_recptr(self.layout.recptr_to_bytepos(r.end))
    }

    /// The record starting at `lsn`, or `None` if it does not end by `to`.
    pub(crate) fn read_record_at(&self, lsn: u64, to: u64) -> Result<Option<ReadRecord>, String> {
        let mut words = [0u64; 3];
        let mut p = lsn;
        let mut read = 0u64;
        for slot in &mut words {
            if p >= to {
                return Ok(None);
            }
            *slot = self.read_word(&mut p, lsn, read, u64::MAX)?;
            read += 8;
        }
        let tot_len = u64::from(words[0] as u32);
        if !(crate::pos::SIZE_OF_XLOG_RECORD..=crate::XLOG_RECORD_MAX_SIZE).contains(&tot_len) {
            return Err(format!(
                "invalid record length at {}: {tot_len}",
                crate::lsn(lsn)
            ));
        }
        let total_words = crate::pos::maxalign(tot_len) / 8;
        let mut all = words.to_vec();
        for _ in 3..total_words {
            if p >= to {
                return Ok(None);
            }
            all.push(self.read_word(&mut p, lsn, read, tot_len)?);
            read += 8;
        }
        if p > to {
            return Ok(None);
        }
        record::decode(lsn, p, &all).map(Some)
    }

    /// One word of the record at `start` from `*p`, stepping over (and checking) a page header
    /// when `*p` is at a page boundary; `read` bytes of a record of `tot_len` are behind.
    fn read_word(&self, p: &mut u64, start: u64, read: u64, tot_len: u64) -> Result<u64, String> {
        let idx = self.buffers.index(*p);
        let page_start = *p - *p % XLOG_BLCKSZ;
        if self.buffers.end_of(idx) != page_start + XLOG_BLCKSZ {
            return Err(format!(
                "page {} of the record at {} is no longer in the WAL buffers",
                crate::lsn(page_start),
                crate::lsn(start)
            ));
        }
        if *p == page_start {
            let w0 = self.buffers.load(idx, 0);
            if w0 as u16 != record::XLOG_PAGE_MAGIC || self.buffers.load(idx, 8) != page_start {
                return Err(format!("invalid page header at {}", crate::lsn(page_start)));
            }
            let info = (w0 >> 16) as u16;
            let rem_len = self.buffers.load(idx, 16) as u32;
            let expected = tot_len.saturating_sub(read);
            if tot_len != u64::MAX
                && (info & XLP_FIRST_IS_CONTRECORD == 0 || u64::from(rem_len) != expected)
            {
                return Err(format!(
                    "invalid contrecord length {rem_len} (expected {expected}) at {}",
                    crate::lsn(page_start)
                ));
            }
            *p += self.layout.page_header_size(page_start);
        }
        let w = self.buffers.load(idx, *p % XLOG_BLCKSZ);
        *p += 8;
        Ok(w)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn page_buffers_lie_back_to_back_on_xlog_blcksz_boundaries() {
        let b = Buffers::new(4);
        let base = b.pages.as_ptr() as usize;
        assert_eq!(base as u64 % XLOG_BLCKSZ, 0);
        let at = |idx, off| b.word(idx, off) as *const PageWord as usize - base;
        assert_eq!(at(3, 16), 3 * 8192 + 16);
        assert_eq!(at(1, 8184), 2 * 8192 - 8);
    }
}
