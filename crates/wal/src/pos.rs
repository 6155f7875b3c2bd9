//! Models the position arithmetic of xlog.c: `XLogBytePosToRecPtr`, `XLogBytePosToEndRecPtr`
//! and `XLogRecPtrToBytePos`, and the page and segment constants of xlog_internal.h.
//!
//! WAL is a byte stream cut into 8 KB pages; every page starts with a header (a long one on the
//! first page of each segment). An `XLogRecPtr` (an LSN) is a physical offset in that stream,
//! headers included. Reserving space for a record in LSNs would mean skipping headers inside the
//! insertion spinlock, so 9.4 reserves in *usable byte positions* instead, which count only the
//! bytes that can hold record data: reserving `n` bytes is `CurrBytePos += n`, and the conversion
//! to LSNs, with its divisions, happens after the spinlock is released.

/// xlog_internal.h / pg_config.h: `XLOG_BLCKSZ`, bytes per WAL page.
pub const XLOG_BLCKSZ: u64 = 8192;
/// `MAXIMUM_ALIGNOF` on x86_64: records start and end on 8-byte boundaries.
pub const MAXIMUM_ALIGNOF: u64 = 8;
/// `SizeOfXLogShortPHD`: `MAXALIGN(sizeof(XLogPageHeaderData))` (magic, info, timeline, page
/// address, remaining length of a continued record).
pub const SIZE_OF_XLOG_SHORT_PHD: u64 = 24;
/// `SizeOfXLogLongPHD`: the first page of a segment adds the system id, segment size and block
/// size.
pub const SIZE_OF_XLOG_LONG_PHD: u64 = 40;
/// `SizeOfXLogRecord`: the fixed record header (total length, xid, prev-link, info, resource
/// manager, CRC).
pub const SIZE_OF_XLOG_RECORD: u64 = 24;
/// The default `wal_segment_size`.
pub const DEFAULT_WAL_SEGMENT_SIZE: u64 = 16 * 1024 * 1024;

/// `MAXALIGN`.
#[inline(always)]
pub const fn maxalign(n: u64) -> u64 {
    (n + MAXIMUM_ALIGNOF - 1) & !(MAXIMUM_ALIGNOF - 1)
}

/// The position arithmetic of one `wal_segment_size` (`UsableBytesInSegment` and friends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    segment_size: u64,
    usable_bytes_in_segment: u64,
}

/// `UsableBytesInPage`: what a page with a short header holds.
pub const USABLE_BYTES_IN_PAGE: u64 = XLOG_BLCKSZ - SIZE_OF_XLOG_SHORT_PHD;

impl Layout {
    /// The layout for segments of `segment_size` bytes (a power of two, at least two pages;
    /// checked by [`WalConfig::validate`](crate::WalConfig::validate); get one from
    /// [`Wal::layout`](crate::Wal::layout)).
    pub(crate) const fn new(segment_size: u64) -> Self {
        Self {
            segment_size,
            usable_bytes_in_segment: (segment_size / XLOG_BLCKSZ) * USABLE_BYTES_IN_PAGE
                - (SIZE_OF_XLOG_LONG_PHD - SIZE_OF_XLOG_SHORT_PHD),
        }
    }

    /// `wal_segment_size`.
    pub const fn segment_size(&self) -> u64 {
        self.segment_size
    }

    /// `UsableBytesInSegment`.
    pub const fn usable_bytes_in_segment(&self) -> u64 {
        self.usable_bytes_in_segment
    }

    /// `XLogSegmentOffset`.
    #[inline]
    pub const fn segment_offset(&self, ptr: u64) -> u64 {
        ptr % self.segment_size
    }

    /// Models `XLogBytePosToRecPtr`: the LSN where usable byte `bytepos` lives (a position at a
    /// page boundary maps to just after the next page's header, where a record would start).
    #[inline]
    pub fn bytepos_to_recptr(&self, bytepos: u64) -> u64 {
        self.recptr_of(bytepos, false)
    }

    /// Models `XLogBytePosToEndRecPtr`: as [`Self::bytepos_to_recptr`], except that a position
    /// at a page boundary maps to the start of the page (the end of a record that fills the
    /// page before it exactly).
    #[inline]
    pub fn bytepos_to_end_recptr(&self, bytepos: u64) -> u64 {
        self.recptr_of(bytepos, true)
    }

    fn recptr_of(&self, bytepos: u64, end: bool) -> u64 {
        let full_segments = bytepos / self.usable_bytes_in_segment;
        let mut left = bytepos % self.usable_bytes_in_segment;
        let first_page = XLOG_BLCKSZ - SIZE_OF_XLOG_LONG_PHD;
        let offset = if left < first_page {
            if end && left == 0 {
                0
            } else {
                left + SIZE_OF_XLOG_LONG_PHD
            }
        } else {
            left -= first_page;
            let full_pages = left / USABLE_BYTES_IN_PAGE;
            left %= USABLE_BYTES_IN_PAGE;
            let header = if end && left == 0 {
                0
            } else {
                SIZE_OF_XLOG_SHORT_PHD
            };
            XLOG_BLCKSZ + full_pages * XLOG_BLCKSZ + left + header
        };
        full_segments * self.segment_size + offset
    }

    /// Models `XLogRecPtrToBytePos`: the usable byte position of an LSN that is not inside a
    /// page header.
    #[inline]
    pub fn recptr_to_bytepos(&self, ptr: u64) -> u64 {
        let full_segments = ptr / self.segment_size;
        let full_pages = self.segment_offset(ptr) / XLOG_BLCKSZ;
        let offset = ptr % XLOG_BLCKSZ;
        let base = full_segments * self.usable_bytes_in_segment;
        if full_pages == 0 {
            base + offset.saturating_sub(SIZE_OF_XLOG_LONG_PHD)
        } else {
            base + (XLOG_BLCKSZ - SIZE_OF_XLOG_LONG_PHD)
                + (full_pages - 1) * USABLE_BYTES_IN_PAGE
                + offset.saturating_sub(SIZE_OF_XLOG_SHORT_PHD)
        }
    }

    /// The size of the page header at page-aligned `page_start` (long on a segment's first page).
    #[inline]
    pub const fn page_header_size(&self, page_start: u64) -> u64 {
        if page_start % self.segment_size == 0 {
            SIZE_OF_XLOG_LONG_PHD
        } else {
            SIZE_OF_XLOG_SHORT_PHD
        }
    }
}

/// An LSN as PostgreSQL prints it (`LSN_FORMAT_ARGS`): `16/B374D848`.
pub fn lsn(ptr: u64) -> String {
    format!("{:X}/{:08X}", ptr >> 32, ptr as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const L: Layout = Layout::new(DEFAULT_WAL_SEGMENT_SIZE);

    #[test]
    fn headers_are_skipped() {
        // The first usable byte of segment 0 is after the long header.
        assert_eq!(L.bytepos_to_recptr(0), SIZE_OF_XLOG_LONG_PHD);
        assert_eq!(L.bytepos_to_end_recptr(0), 0);
        // The first page holds 8192 - 40 bytes; the next byte is after page 1's short header.
        let first = XLOG_BLCKSZ - SIZE_OF_XLOG_LONG_PHD;
        assert_eq!(
            L.bytepos_to_recptr(first),
            XLOG_BLCKSZ + SIZE_OF_XLOG_SHORT_PHD
        );
        assert_eq!(L.bytepos_to_end_recptr(first), XLOG_BLCKSZ);
        // A whole segment's usable bytes land at the next segment's start.
        let seg = L.usable_bytes_in_segment();
        assert_eq!(seg, 2048 * USABLE_BYTES_IN_PAGE - 16);
        assert_eq!(
            L.bytepos_to_recptr(seg),
            DEFAULT_WAL_SEGMENT_SIZE + SIZE_OF_XLOG_LONG_PHD
        );
        assert_eq!(L.bytepos_to_end_recptr(seg), DEFAULT_WAL_SEGMENT_SIZE);
        assert_eq!(lsn(0x16_B374_D848), "16/B374D848");
    }

    proptest! {
        #[test]
        fn positions_round_trip(bytepos in 0u64..(1 << 40), small in any::<bool>()) {
            let l = if small { Layout::new(64 * 1024) } else { L };
            let start = l.bytepos_to_recptr(bytepos);
            let end = l.bytepos_to_end_recptr(bytepos);
            prop_assert_eq!(l.recptr_to_bytepos(start), bytepos);
            prop_assert_eq!(l.recptr_to_bytepos(end), bytepos);
            // A start is never inside a header; an end differs from the start only at a page
            // boundary.
            let in_page = start % XLOG_BLCKSZ;
            prop_assert!(in_page >= l.page_header_size(start - in_page));
            prop_assert!(end == start || end % XLOG_BLCKSZ == 0);
            // Positions are monotonic.
            prop_assert!(l.bytepos_to_recptr(bytepos + 8) > start);
        }
    }
}
