//! Where things lie on a page, so that a statement can charge the bytes it reads and writes of
//! a buffer (`super::heap`): the offsets of bufpage.h's page header and line pointers, nbtree.h's
//! special space, itup.h's index tuples and htup_details.h's heap tuple header, and the places
//! `PageAddItem` gives the tuples of pgbench's pages. Nothing here keeps a page's contents: the
//! positions follow from the number of items a page holds, which the schema knows.
//!
//! # A page
//! Every page starts with `PageHeaderData` (bufpage.h, 8.3 and later), 24 bytes:
//! `pd_lsn` 0..8, `pd_checksum` 8..10 (`pd_tli` before 9.3), `pd_flags` 10..12, `pd_lower`
//! 12..14, `pd_upper` 14..16, `pd_special` 16..18, `pd_pagesize_version` 18..20, `pd_prune_xid`
//! 20..24. The line pointers (`ItemIdData`, 4 bytes: `lp_off`, `lp_flags`, `lp_len`) follow
//! from byte 24, line pointer `n` (from 1) at `24 + 4 (n - 1)`, up to `pd_lower`. The tuples are
//! laid out from the end of the page backwards (`PageAddItem` puts each at `pd_upper` less its
//! `MAXALIGN`ed length, and lowers `pd_upper`), up to the special space at `pd_special`: none on
//! a heap page, `BTPageOpaqueData` (nbtree.h: `btpo_prev`, `btpo_next`, `btpo_level`,
//! `btpo_flags`, `btpo_cycleid`: 16 bytes) at 8176 on a B-tree page.
//!
//! # B-tree pages
//! A B-tree page built by `CREATE INDEX` (nbtsort.c's `_bt_buildadd`) gets its items in key
//! order, so data item `k` (from 0) is the `k + 1`-th tuple from the special space. A page that
//! is not the rightmost of its level has a high key as item 1 (`P_HIKEY`), its data from item 2
//! (`P_FIRSTDATAKEY`); the high key's tuple is the last one written (the page's last data item,
//! whose line pointer the build moves to item 1), nearest `pd_upper`. An index tuple of
//! pgbench's `int4` keys is `IndexTupleData` (itup.h: `t_tid` 6 bytes and `t_info` 2) and the
//! key, `MAXALIGN`ed: 16 bytes; the first data item of an internal page is its "minus infinity"
//! downlink, truncated to the 8-byte header.
//!
//! `_bt_binsrch` (nbtsearch.c) looks for the first item not less than the key between
//! `P_FIRSTDATAKEY` and `PageGetMaxOffsetNumber`, halving the range at `mid = low + (high -
//! low) / 2` and going right of `mid` while the key is greater; on a leaf that item is the
//! key's, on an internal page the downlink to follow is the one before it. Each comparison (`_bt_compare`) reads the item's
//! line pointer and its tuple (`t_tid`, `t_info`, the key), but for an internal page's first data
//! item, which compares as minus infinity unread. [`BtPage::probes`] replays the search for a
//! given result.
//!
//! # Heap pages
//! A heap tuple starts with `HeapTupleHeaderData` (htup_details.h, 23 bytes): `t_xmin` 0..4,
//! `t_xmax` 4..8, `t_cid` 8..12, `t_ctid` 12..18, `t_infomask2` 18..20, `t_infomask` 20..22,
//! `t_hoff` 22; its data from `t_hoff` (24 without nulls). A page loaded by `COPY` (`heap_insert`
//! in row order, fillfactor 100) holds row `n` (line pointer `n`, from 1) at `8192 - n ·
//! MAXALIGN(len)` ([`HeapPage`]).
//!
//! # Differences from PostgreSQL
//! - The header is 8.3's for every release (8.1 and 8.2 had 20 bytes, without `pd_flags` and
//!   `pd_prune_xid`): the same first line.
//! - A B-tree page's items are where `CREATE INDEX` put them; page splits (which move half the
//!   tuples to a new page in offset order) are not modelled.
//! - On an internal page a key equal to a separator descends to the separator's own child, where
//!   `_bt_binsrch` goes one to the left (and the scan then steps right): the probes are those of
//!   the child the model reads.
//! - A heap page's new versions and inserted rows go below the tuples it has, at
//!   [`HeapPage::free_tuple`]; pruning's compaction (`PageRepairFragmentation`) is not replayed.

use std::ops::Range;

/// pg_config.h's `BLCKSZ`.
pub(super) const BLCKSZ: usize = pglocks_bufmgr::BLCKSZ;
/// pg_config.h's `MAXIMUM_ALIGNOF` on 64-bit platforms.
const MAXIMUM_ALIGNOF: usize = 8;
/// bufpage.h's `SizeOfPageHeaderData`: `offsetof(PageHeaderData, pd_linp)`.
pub(super) const SIZE_OF_PAGE_HEADER_DATA: usize = 24;
/// `pd_lsn`, written by `PageSetLSN` after the change's WAL record.
pub(super) const PD_LSN: Range<usize> = 0..8;
/// `pd_lower` and `pd_upper`, the free space's bounds (`PageAddItem` moves both).
pub(super) const PD_LOWER_UPPER: Range<usize> = 12..16;
/// `pd_lower` to `pd_pagesize_version`: what `PageGetMaxOffsetNumber` and `_bt_checkpage`
/// (`PageIsNew`, `PageGetSpecialSize`) read.
pub(super) const PD_LOWER_TO_VERSION: Range<usize> = 12..20;
/// The whole header: a change that sets `pd_lsn`, `pd_flags`, the free space's bounds and
/// `pd_prune_xid` (`heap_update`, pruning, `PageInit`).
pub(super) const PAGE_HEADER: Range<usize> = 0..SIZE_OF_PAGE_HEADER_DATA;
/// `sizeof(ItemIdData)`.
pub(super) const ITEM_ID_SIZE: usize = 4;
/// `sizeof(BTPageOpaqueData)`, already `MAXALIGN`ed.
pub(super) const BT_OPAQUE_SIZE: usize = 16;
/// `MAXALIGN(sizeof(IndexTupleData) + sizeof(int4))`: a B-tree tuple of an `int4` key.
pub(super) const INT4_INDEX_TUPLE: usize = 16;
/// `sizeof(IndexTupleData)`: an internal page's minus-infinity downlink, truncated to it.
const INDEX_TUPLE_DATA: usize = 8;
/// What `_bt_compare` reads of an index tuple: `t_tid`, `t_info` and the `int4` key.
pub(super) const INDEX_TUPLE_KEY: Range<usize> = 0..12;
/// What `BTreeTupleGetDownLink` reads of an internal item: `t_tid`.
pub(super) const INDEX_TUPLE_TID: Range<usize> = 0..6;
/// htup_details.h's `SizeofHeapTupleHeader`.
pub(super) const SIZEOF_HEAP_TUPLE_HEADER: usize = 23;
/// `t_infomask`, where `SetHintBits` records a committed or aborted xmin or xmax.
pub(super) const T_INFOMASK: Range<usize> = 20..22;
/// What `heap_update` changes of the old version: `t_xmax`, `t_cid`, `t_ctid`, `t_infomask2`
/// and `t_infomask`.
pub(super) const T_XMAX_TO_INFOMASK: Range<usize> = 4..22;
/// A heap tuple's data start without nulls: `t_hoff`, `MAXALIGN(SizeofHeapTupleHeader)`.
pub(super) const T_HOFF: usize = 24;

/// sequence.c's `sequence_magic` (a `uint32`), a sequence page's special space, `MAXALIGN`ed.
const SEQUENCE_SPECIAL: usize = 8;
/// A sequence's tuple (10+): the header and `FormData_pg_sequence_data` (`last_value` and
/// `log_cnt`, `int8`; `is_called`, `bool`).
const SEQUENCE_TUPLE_LEN: usize = T_HOFF + 17;
/// The one tuple of a sequence's page, at `pd_upper` of a page `PageInit`ed with the magic
/// number's special space (`fill_seq_with_data`). Before 10 the tuple also held the sequence's
/// name and parameters (a larger tuple on the same page).
pub(super) const SEQUENCE_TUPLE: Range<usize> = {
    let start = BLCKSZ - SEQUENCE_SPECIAL - maxalign(SEQUENCE_TUPLE_LEN);
    start..start + SEQUENCE_TUPLE_LEN
};
/// What `nextval_internal` writes of the tuple: `last_value`, `log_cnt`, `is_called`.
pub(super) const SEQUENCE_DATA: Range<usize> = SEQUENCE_TUPLE.start + T_HOFF..SEQUENCE_TUPLE.end;

/// `MAXALIGN`.
pub(super) const fn maxalign(len: usize) -> usize {
    len.div_ceil(MAXIMUM_ALIGNOF) * MAXIMUM_ALIGNOF
}

/// `PageGetItemId(page, off)`: the bytes of line pointer `off` (from 1).
pub(super) const fn item_id(off: u16) -> Range<usize> {
    let at = SIZE_OF_PAGE_HEADER_DATA + (off as usize - 1) * ITEM_ID_SIZE;
    at..at + ITEM_ID_SIZE
}

/// The line pointer array of a page with `n` of them.
pub(super) const fn item_ids(n: u16) -> Range<usize> {
    SIZE_OF_PAGE_HEADER_DATA..SIZE_OF_PAGE_HEADER_DATA + n as usize * ITEM_ID_SIZE
}

/// A B-tree page of `CREATE INDEX`'s making: a leaf or not, the rightmost of its level or not
/// (then it has a high key), and its data items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BtPage {
    pub(super) leaf: bool,
    pub(super) rightmost: bool,
    pub(super) items: u16,
}

impl BtPage {
    /// `BTPageGetOpaque`: the special space's bytes.
    pub(super) const OPAQUE: Range<usize> = BLCKSZ - BT_OPAQUE_SIZE..BLCKSZ;

    /// `P_FIRSTDATAKEY`: 1 on a rightmost page, else 2 (item 1 is the high key).
    pub(super) fn first_data(&self) -> u16 {
        if self.rightmost {
            1
        } else {
            2
        }
    }

    /// `PageGetMaxOffsetNumber`: the last item.
    pub(super) fn max_offset(&self) -> u16 {
        self.items + self.first_data() - 1
    }

    /// The bytes written before data item `k` (from 0) and by it, from the special space.
    fn written_through(&self, k: usize) -> usize {
        if self.leaf {
            (k + 1) * INT4_INDEX_TUPLE
        } else {
            INDEX_TUPLE_DATA + k * INT4_INDEX_TUPLE
        }
    }

    /// The bytes of item `off`'s tuple (`PageGetItem`).
    pub(super) fn tuple(&self, off: u16) -> Range<usize> {
        let special = BLCKSZ - BT_OPAQUE_SIZE;
        if !self.rightmost && off == 1 {
            // The high key: the last tuple written, after every data item.
            let before = match self.items {
                0 => 0,
                n => self.written_through(n as usize - 1),
            };
            let start = special - before - INT4_INDEX_TUPLE;
            return start..start + INT4_INDEX_TUPLE;
        }
        let k = (off - self.first_data()) as usize;
        let start = special - self.written_through(k);
        let len = if !self.leaf && k == 0 {
            INDEX_TUPLE_DATA
        } else {
            INT4_INDEX_TUPLE
        };
        start..start + len
    }

    /// The tuple bytes `_bt_compare` reads of item `off`: none for an internal page's first
    /// data item (minus infinity), else `t_tid`, `t_info` and the key.
    pub(super) fn compared(&self, off: u16) -> Option<Range<usize>> {
        if !self.leaf && off == self.first_data() {
            return None;
        }
        let t = self.tuple(off);
        Some(t.start..t.start + INDEX_TUPLE_KEY.end)
    }

    /// The items `_bt_binsrch` compares the key with, in order, on its way to `result`: on a
    /// leaf the key's own item (the first not less than the key), on an internal page the
    /// downlink it follows (the last one not greater).
    pub(super) fn probes(&self, result: u16) -> Vec<u16> {
        let (mut low, mut high) = (self.first_data(), self.max_offset() + 1);
        // The key is greater than every item before the first not less than it.
        let first_not_less = if self.leaf { result } else { result + 1 };
        let mut probes = Vec::new();
        while high > low {
            let mid = low + (high - low) / 2;
            probes.push(mid);
            if mid < first_not_less {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        probes
    }
}

/// A heap page of `rows` tuples of `len` bytes loaded in row order (fillfactor 100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HeapPage {
    pub(super) rows: u16,
    pub(super) len: usize,
}

impl HeapPage {
    /// The bytes of the tuple at line pointer `lp` (from 1) as loaded: `PageAddItem` put each
    /// one `MAXALIGN(len)` below the one before.
    pub(super) fn tuple(&self, lp: u16) -> Range<usize> {
        let start = BLCKSZ - lp as usize * maxalign(self.len);
        start..start + self.len
    }

    /// The bytes of the tuple at line pointer `lp`: a loaded row's ([`Self::tuple`]), or, past
    /// them, the version added there ([`Self::free_tuple`]).
    pub(super) fn at(&self, lp: u16) -> Range<usize> {
        if lp <= self.rows {
            self.tuple(lp)
        } else {
            self.free_tuple(lp - self.rows).1
        }
    }

    /// Where `PageAddItem` puts the `n`-th tuple added (from 1) after the loaded ones, and its
    /// line pointer: below the loaded tuples, `MAXALIGN(len)` each, but never into the line
    /// pointer array (a page filled at load has no room for one: PostgreSQL would put it on
    /// another page, which the model does not).
    pub(super) fn free_tuple(&self, n: u16) -> (u16, Range<usize>) {
        let lp = self.rows + n;
        let lowest = maxalign(item_ids(lp).end);
        let start = BLCKSZ
            .saturating_sub(lp as usize * maxalign(self.len))
            .max(lowest)
            .min(BLCKSZ - maxalign(self.len));
        (lp, start..start + self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_pointers_follow_the_header_and_the_special_space_ends_the_page() {
        assert_eq!(item_id(1), 24..28);
        assert_eq!(item_id(61), 264..268);
        assert_eq!(item_ids(61), 24..268);
        assert_eq!(BtPage::OPAQUE, 8176..8192);
        assert_eq!(maxalign(121), 128);
        assert_eq!(maxalign(SIZEOF_HEAP_TUPLE_HEADER), T_HOFF);
        assert_eq!(SEQUENCE_TUPLE, 8136..8177);
        assert_eq!(SEQUENCE_DATA, 8160..8177);
    }

    #[test]
    fn a_built_leaf_has_its_high_key_nearest_pd_upper() {
        // A full leaf, not rightmost: 367 data items in 2..=368, the high key in 1.
        let leaf = BtPage {
            leaf: true,
            rightmost: false,
            items: 367,
        };
        assert_eq!((leaf.first_data(), leaf.max_offset()), (2, 368));
        assert_eq!(leaf.tuple(2), 8160..8176);
        assert_eq!(leaf.tuple(368), 8176 - 367 * 16..8176 - 366 * 16);
        assert_eq!(leaf.tuple(1), 8176 - 368 * 16..8176 - 367 * 16);
        // The rightmost has no high key.
        let last = BtPage {
            rightmost: true,
            items: 10,
            ..leaf
        };
        assert_eq!(last.tuple(1), 8160..8176);
        assert_eq!(last.max_offset(), 10);
    }

    #[test]
    fn an_internal_pages_first_downlink_is_minus_infinity() {
        let root = BtPage {
            leaf: false,
            rightmost: true,
            items: 75,
        };
        assert_eq!(root.tuple(1), 8168..8176);
        assert_eq!(root.tuple(2), 8152..8168);
        assert_eq!(root.compared(1), None);
        assert_eq!(root.compared(2), Some(8152..8164));
    }

    #[test]
    fn the_binary_search_replays_to_its_result() {
        let leaf = BtPage {
            leaf: true,
            rightmost: false,
            items: 367,
        };
        // About log2(367) probes, the last landing next to the result.
        for target in [2, 3, 100, 250, 368] {
            let p = leaf.probes(target);
            assert!((8..=10).contains(&p.len()), "{target}: {p:?}");
            assert!(p.contains(&target) || p.contains(&(target - 1)), "{p:?}");
        }
        assert_eq!(leaf.probes(2), [185, 93, 47, 24, 13, 7, 4, 3, 2]);
        // An internal page: the downlink found is the last not greater than the key.
        let inner = BtPage {
            leaf: false,
            rightmost: true,
            items: 4,
        };
        assert_eq!(inner.probes(1), [3, 2, 1]);
        assert_eq!(inner.probes(4), [3, 4]);
    }

    #[test]
    fn heap_rows_lie_from_the_end_and_new_tuples_below_them() {
        // pgbench_accounts: 61 rows of 121 bytes.
        let accounts = HeapPage { rows: 61, len: 121 };
        assert_eq!(accounts.tuple(1), 8064..8185);
        assert_eq!(accounts.tuple(61).start, 8192 - 61 * 128);
        // A full page: the new version goes right after the line pointers.
        let (lp, t) = accounts.free_tuple(1);
        assert_eq!(lp, 62);
        assert_eq!(t.start, maxalign(item_ids(62).end));
        // pgbench_history: a page being filled.
        let history = HeapPage { rows: 0, len: 71 };
        assert_eq!(history.free_tuple(1), (1, 8120..8191));
        assert_eq!(history.free_tuple(107).1.start, 8192 - 107 * 72);
    }
}
