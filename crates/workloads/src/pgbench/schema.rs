//! pgbench's tables as `pgbench -i` leaves them: `pgbench_accounts`, `pgbench_tellers` and
//! `pgbench_branches` (pgbench.c's `initCreateTables`, filled by `initGenerateDataClientSide`
//! with `naccounts`, `ntellers` and `nbranches` rows per scale unit, fillfactor 100) with their
//! primary keys (`initCreatePKeys`), and `pgbench_history`; and `insert-commit`'s table, which is
//! not pgbench's, with its serial key and the key's sequence.
//!
//! A keyed table ([`Table`]) is its row count and its rows per heap page: row `r` is at block
//! `r / rows_per_page`, line pointer `r % rows_per_page + 1` ([`Table::tid`]). Its primary key
//! is a B-tree built bottom-up, as `CREATE INDEX` builds one (nbtsort.c): the leaves first from
//! block 1 (block 0 is the metapage), 367 keys to a leaf, then each level of parents, 285
//! children to a page, up to a single root ([`btree_levels`]); the page holding a key at each
//! level follows from the key's position. For the workloads that update, each heap page keeps
//! its tuples' headers ([`TupleHeader`]: `t_xmin` and `t_xmax` with their hint bits, the HOT
//! chain's next line pointer), line pointer by line pointer, and what its header says of them
//! ([`HeapPageState`]: line pointers and tuples, `pd_prune_xid`, `pd_lsn`); each row, its newest
//! version's line pointer. The heap access (`super::heap`) reads and changes them. A table that only grows
//! ([`AppendTable`]) is its size in pages, extended one page at a time.
//!
//! The tables have pgbench's shape for `--set scale=S` (100 000 × S accounts, 61 rows per heap
//! page, 367 keys per B-tree page: about 1 640 heap and 273 index pages per scale unit); the
//! default 128 MB of buffers holds a scale up to about 8, and past that reads go through the
//! buffer manager's victim search and `read_latency`, as a pgbench run larger than
//! shared_buffers does.
//!
//! # Differences from PostgreSQL
//!
//! - Whether a lookup by key scans the table whole is a stand-in for the planner's choice
//!   (costsize.c's `cost_seqscan` against `cost_index` at the default costs; see
//!   [`Table::new`]).
//! - A tuple is its header's xids, hint bits and chain link; the row's own bytes, page splits
//!   and the free-space map are not modelled.

use super::page::{maxalign, BtPage, HeapPage, BLCKSZ, ITEM_ID_SIZE, SIZE_OF_PAGE_HEADER_DATA};
use pglocks_procarray::INVALID_TRANSACTION_ID;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64};

/// The database pgbench runs in.
pub(super) const DATABASE: u32 = 16_384;
/// `pgbench_accounts`' relation oid.
pub(super) const ACCOUNTS: u32 = 16_397;
/// `pgbench_accounts_pkey`'s relation oid.
pub(super) const ACCOUNTS_PKEY: u32 = 16_403;
/// `pgbench_accounts` rows per scale unit.
pub(super) const ACCOUNTS_PER_SCALE: u64 = 100_000;
/// Rows of `pgbench_accounts` per 8 KB heap page (a 121-byte tuple and its line pointer).
pub(super) const ROWS_PER_HEAP_PAGE: u64 = 61;
/// A `pgbench_accounts` tuple: the 24-byte header (`t_hoff`) and its data, `aid`, `bid`,
/// `abalance` (`int4` each) and `filler` (`char(84)`, a short varlena of 85 bytes).
pub(super) const ACCOUNTS_TUPLE_LEN: usize = 121;
/// Rows of `pgbench_tellers` and `pgbench_branches` per heap page: pgbench leaves their
/// `filler` NULL, so a row is a 40-byte tuple and its line pointer.
pub(super) const SMALL_ROWS_PER_HEAP_PAGE: u64 = 185;
/// A `pgbench_tellers` tuple: the header with its null bitmap (24 bytes) and `tid`, `bid`,
/// `tbalance`. `pgbench_branches`' (`bid`, `bbalance`: 32 bytes) is taken to be the same, as
/// its rows per page are.
pub(super) const SMALL_TUPLE_LEN: usize = 36;
/// A `pgbench_history` tuple: the header, `tid`, `bid`, `aid`, `delta` (`int4` each), `mtime`
/// (`timestamp`) and `filler` (`char(22)`, 23 bytes).
pub(super) const HISTORY_TUPLE_LEN: usize = 71;
/// An `insert-commit` tuple: the size its 61 rows per page imply, taken as `pgbench_accounts`'.
pub(super) const INSERTS_TUPLE_LEN: usize = 121;
/// Keys per B-tree leaf page of `pgbench_accounts_pkey` (an int4 key and its index tuple
/// header, 16 bytes, and a line pointer: nbtsort.c's `_bt_buildadd` fills a leaf until less
/// than the 10 % of `BTREE_DEFAULT_FILLFACTOR` is free).
pub(super) const KEYS_PER_INDEX_PAGE: u64 = 367;
/// Children per internal B-tree page: the same 20 bytes a downlink, but `_bt_buildadd` stops an
/// internal page once less than 30 % is free (`BTREE_NONLEAF_FILLFACTOR`, 70, in nbtree.h).
pub(super) const CHILDREN_PER_INTERNAL_PAGE: u64 = 285;

/// `pgbench_branches`, one row per scale unit, and its primary key.
pub(super) const BRANCHES: u32 = 16_394;
pub(super) const BRANCHES_PKEY: u32 = 16_399;
/// `pgbench_tellers`, ten rows per scale unit, and its primary key.
pub(super) const TELLERS: u32 = 16_391;
pub(super) const TELLERS_PKEY: u32 = 16_401;
pub(super) const TELLERS_PER_SCALE: u64 = 10;
/// `pgbench_history`, appended to by `tpcb-like`.
pub(super) const HISTORY: u32 = 16_388;
/// Rows of `pgbench_history` per heap page (a 71-byte tuple, MAXALIGNed, and its line pointer).
pub(super) const ROWS_PER_HISTORY_PAGE: u32 = 107;
/// htup_details.h's `HEAP_XMIN_COMMITTED` and `HEAP_XMAX_COMMITTED`, each kept in the bit above
/// the xid of the word it hints (xids stay below 2^31).
pub(super) const COMMITTED: u32 = 1 << 31;
/// The `t_xmin` of a row as `pgbench -i` left it: taken as hinted committed, and seen by every
/// snapshot (as after the load's `VACUUM`; the model has no xid for the load).
pub(super) const LOADED: u32 = 0;
/// The `t_xmin` word of a line pointer with no tuple: unused, or a redirect (`LP_REDIRECT`, its
/// target in [`TupleHeader::next`]), which is what a pruned chain's root becomes.
pub(super) const NO_TUPLE: u32 = u32::MAX;
/// htup_details.h's `MaxHeapTuplesPerPage` for 8 KB pages: as many line pointers as there is
/// room for each with the smallest tuple header, `MAXALIGN(SizeofHeapTupleHeader)`.
pub(super) const MAX_HEAP_TUPLES_PER_PAGE: u64 = 291;
/// `heap_page_prune_opt`'s least free space: a page with less is worth pruning. The larger of
/// the fillfactor's reserve (none at pgbench's 100) and a tenth of the page.
pub(super) const PRUNE_MIN_FREE: usize = BLCKSZ / 10;

/// `insert-commit`'s table.
pub(super) const INSERTS: u32 = 16_420;
/// `insert-commit`'s table's serial primary key.
pub(super) const INSERTS_PKEY: u32 = 16_426;
/// Rows of `insert-commit`'s table per heap page.
pub(super) const ROWS_PER_INSERT_PAGE: u32 = 61;
/// `insert-commit`'s key's sequence (`insert_commit_id_seq`).
pub(super) const INSERTS_SEQ: u32 = 16_418;

/// One of pgbench's keyed tables: its rows, its primary key's levels and, for the workloads
/// that update them, its pages' tuples.
pub(super) struct Table {
    pub(super) relid: u32,
    pub(super) pkey: u32,
    pub(super) rows: u64,
    pub(super) rows_per_page: u64,
    /// A tuple's bytes, header and data.
    pub(super) tuple_len: usize,
    /// The plan reads the table whole (a sequential scan) rather than through its key: the
    /// planner's choice for a table of a few pages (see [`Table::new`]).
    pub(super) seq_scan: bool,
    /// The primary key's levels, leaves first, up to the root.
    pub(super) index: Vec<IndexLevel>,
    /// Each heap page's tuple headers, [`Table::line_pointers`] to a page, line pointer `n` at
    /// `n - 1`; empty when nothing updates the table.
    pub(super) tuples: Box<[TupleHeader]>,
    /// Line pointers kept per page: rows as loaded and the versions updates add.
    pub(super) line_pointers: u64,
    /// Each row's newest version's line pointer on the row's page (its root's, as loaded).
    pub(super) newest: Box<[AtomicU16]>,
    /// What the model keeps of each heap page's header; empty when nothing updates the table.
    pub(super) page_state: Box<[HeapPageState]>,
}

/// The part of an updated heap page's header the model keeps (bufpage.h's
/// `PageHeaderData`): each field changed with the page's content lock held exclusively.
#[derive(Debug, Default)]
pub(super) struct HeapPageState {
    /// Line pointers in use, unused ones among them (`pd_lower`'s count).
    pub(super) lines: AtomicU16,
    /// Tuples on the page, dead versions among them (`pd_upper`'s measure).
    pub(super) tuples: AtomicU16,
    /// A version did not fit (`PD_PAGE_FULL`): the page is pruned at its next visit.
    pub(super) full: AtomicBool,
    /// Some line pointer past the loaded rows is unused (`PD_HAS_FREE_LINES`).
    pub(super) free_lines: AtomicBool,
    /// `pd_prune_xid`: the oldest xid that left a dead version, 0 for none.
    pub(super) prune_xid: AtomicU32,
    /// `pd_lsn`: the end of the last WAL record that changed the page (`PageSetLSN`), 0 for
    /// a page no record has changed since the load; `SetHintBits` compares it with an
    /// asynchronous commit's LSN.
    pub(super) lsn: AtomicU64,
}

/// What the model keeps of a heap tuple's header (htup_details.h's `HeapTupleHeaderData`):
/// `t_xmin` and `t_xmax`, each with its hint bit ([`COMMITTED`]), and the line pointer of the
/// next version in its HOT chain (`t_ctid`, 0 for none). `xmin` is [`LOADED`] for a row as
/// loaded and [`NO_TUPLE`] for a line pointer without a tuple; `xmax` is
/// `INVALID_TRANSACTION_ID` for a version nothing has updated. Changed under the page's
/// content lock held exclusively, but for the hint bits, which a reader holding it shared sets.
#[derive(Debug, Default)]
pub(super) struct TupleHeader {
    pub(super) xmin: AtomicU32,
    pub(super) xmax: AtomicU32,
    pub(super) next: AtomicU16,
}

impl Table {
    /// A table of `rows` rows, `rows_per_page` to a heap page (pgbench fills them with
    /// fillfactor 100); `updated` gives each page its tuple headers: as many as a page can have
    /// ([`MAX_HEAP_TUPLES_PER_PAGE`]) if it has room for a version beside its rows, else its
    /// rows'.
    ///
    /// Whether a lookup by key scans the table: a stand-in for the planner's costs at their
    /// defaults, a sequential scan (a page each, `seq_page_cost` 1, plus 0.0125 of CPU per
    /// row) against the key's descent and the heap page (`random_page_cost` 4 each). For
    /// pgbench that scans `pgbench_branches` below scale 280 or so and `pgbench_tellers` below
    /// scale 28, as PostgreSQL 15 was seen to at scale 10.
    pub(super) fn new(
        relid: u32,
        pkey: u32,
        rows: u64,
        (rows_per_page, tuple_len): (u64, usize),
        updated: bool,
    ) -> Self {
        let index = btree_levels(rows);
        let pages = rows.div_ceil(rows_per_page);
        // The first page holds the most rows; a page with room for a version beside them may
        // reach the most line pointers a page can have, one without keeps its rows' (its
        // updates are not HOT).
        let on_page = rows.min(rows_per_page);
        let line_pointers = if free_space(on_page, on_page, tuple_len) >= maxalign(tuple_len) {
            MAX_HEAP_TUPLES_PER_PAGE
        } else {
            on_page
        };
        let seq_cost = pages as f64 + 0.0125 * rows as f64;
        let index_cost = 4.0 * (index.len() + 1) as f64;
        Self {
            relid,
            pkey,
            rows,
            rows_per_page,
            tuple_len,
            seq_scan: seq_cost < index_cost,
            index,
            tuples: (0..if updated { pages * line_pointers } else { 0 })
                .map(|_| TupleHeader::default())
                .collect(),
            line_pointers,
            newest: (0..if updated { rows } else { 0 })
                .map(|row| AtomicU16::new((row % rows_per_page) as u16 + 1))
                .collect(),
            page_state: (0..if updated { pages } else { 0 })
                .map(|block| {
                    let loaded = (rows - block * rows_per_page).min(rows_per_page) as u16;
                    HeapPageState {
                        lines: AtomicU16::new(loaded),
                        tuples: AtomicU16::new(loaded),
                        ..HeapPageState::default()
                    }
                })
                .collect(),
        }
    }

    /// The row's heap block and line pointer (`ctid`).
    pub(super) fn tid(&self, row: u64) -> (u32, u16) {
        (
            (row / self.rows_per_page) as u32,
            (row % self.rows_per_page) as u16 + 1,
        )
    }

    /// The header of the tuple at line pointer `lp` of heap page `block`, of an updated table.
    pub(super) fn tuple(&self, block: u32, lp: u16) -> &TupleHeader {
        &self.tuples[(u64::from(block) * self.line_pointers) as usize + usize::from(lp) - 1]
    }

    /// The room for a tuple on an updated heap page whose header is `state` (bufpage.c's
    /// `PageGetHeapFreeSpace`): none once it has all the line pointers it may and none unused.
    pub(super) fn free_space(&self, state: &HeapPageState) -> usize {
        let lines = u64::from(state.lines.load(Relaxed));
        if lines >= MAX_HEAP_TUPLES_PER_PAGE && !state.free_lines.load(Relaxed) {
            return 0;
        }
        let tuples = u64::from(state.tuples.load(Relaxed));
        free_space(lines, tuples, self.tuple_len)
    }

    /// The line pointers of the HOT chain whose root is line pointer `root` of heap page
    /// `block`, in chain order, past a redirect at the root (empty for a redirect to nothing).
    /// The page's content lock is held.
    pub(super) fn chain(&self, block: u32, root: u16) -> Vec<u16> {
        let mut lp = root;
        if self.tuple(block, root).xmin.load(Relaxed) == NO_TUPLE {
            lp = self.tuple(block, root).next.load(Relaxed);
        }
        let mut chain = Vec::new();
        // A chain is at most the page's line pointers long.
        while lp != 0 && (chain.len() as u64) < self.line_pointers {
            chain.push(lp);
            lp = self.tuple(block, lp).next.load(Relaxed);
        }
        chain
    }

    /// The structural part of `heap_update` on `row`, whose newest version is `old` on heap
    /// page `block` (header `state`, locked exclusively), for transaction `xid`: a HOT update
    /// if the page has room for the version (`PageGetHeapFreeSpace`) and a line pointer for it
    /// ([`Self::add_line_pointer`]): `old` gets `xid` as its updater and the new version as
    /// its next; else (a non-HOT update in PostgreSQL) the version takes `old`'s place and the
    /// page is marked full (`PageSetFull`). Either way the page becomes prunable
    /// (`PageSetPrunable`). Returns the new version's line pointer (`old` for the latter) and
    /// the line pointers looked at to find it.
    pub(super) fn put_version(
        &self,
        (block, old): (u32, u16),
        row: u64,
        state: &HeapPageState,
        xid: u32,
    ) -> (u16, u16) {
        let fits = self.free_space(state) >= maxalign(self.tuple_len);
        let (lp, looked) = if fits {
            self.add_line_pointer(block, state)
        } else {
            (None, 0)
        };
        let at = match lp {
            Some(lp) => {
                let (before, new) = (self.tuple(block, old), self.tuple(block, lp));
                before.xmax.store(xid, Relaxed);
                before.next.store(lp, Relaxed);
                new.xmin.store(xid, Relaxed);
                new.xmax.store(INVALID_TRANSACTION_ID, Relaxed);
                new.next.store(0, Relaxed);
                self.newest[row as usize].store(lp, Relaxed);
                state.tuples.fetch_add(1, Relaxed);
                lp
            }
            None => {
                state.full.store(true, Relaxed);
                self.tuple(block, old).xmin.store(xid, Relaxed);
                old
            }
        };
        if state.prune_xid.load(Relaxed) == INVALID_TRANSACTION_ID {
            state.prune_xid.store(xid, Relaxed);
        }
        (at, looked)
    }

    /// The line pointer a new version on heap page `block` (header `state`, locked
    /// exclusively) takes, as bufpage.c's `PageAddItemExtended` picks it: with
    /// `PD_HAS_FREE_LINES`, the first unused one, each looked at on the way (the flag cleared if
    /// none is); else the next at the array's end, up to [`Self::line_pointers`]. Returns it
    /// (none when the page has none left) and how many line pointers were looked at.
    pub(super) fn add_line_pointer(&self, block: u32, state: &HeapPageState) -> (Option<u16>, u16) {
        let lines = state.lines.load(Relaxed);
        let mut looked = 0;
        if state.free_lines.load(Relaxed) {
            // A redirect (a pruned chain's root) is in use; the loaded rows' line pointers are
            // all roots.
            let roots = self.heap_page(block).rows;
            let unused = (roots + 1..=lines)
                .find(|&lp| self.tuple(block, lp).xmin.load(Relaxed) == NO_TUPLE);
            if let Some(lp) = unused {
                return (Some(lp), lp);
            }
            state.free_lines.store(false, Relaxed);
            looked = lines;
        }
        if u64::from(lines) >= self.line_pointers {
            return (None, looked);
        }
        state.lines.store(lines + 1, Relaxed);
        (Some(lines + 1), looked)
    }

    /// `heap_prune_chain`'s change to the chain `chain` of root `root` on heap page `block`
    /// (header `state`, locked exclusively), whose members up to `chain[last_dead]` are dead:
    /// they go, the root becoming a redirect to the first member left, the others' line
    /// pointers unused (`PD_HAS_FREE_LINES`).
    pub(super) fn prune_members(
        &self,
        (block, root): (u32, u16),
        chain: &[u16],
        last_dead: usize,
        state: &HeapPageState,
    ) {
        for &lp in &chain[..=last_dead] {
            let gone = self.tuple(block, lp);
            gone.xmin.store(NO_TUPLE, Relaxed);
            gone.xmax.store(INVALID_TRANSACTION_ID, Relaxed);
            state.tuples.fetch_sub(1, Relaxed);
            if lp != root {
                gone.next.store(0, Relaxed);
                state.free_lines.store(true, Relaxed);
            }
        }
        let first_left = chain.get(last_dead + 1).copied().unwrap_or(0);
        self.tuple(block, root).next.store(first_left, Relaxed);
    }

    /// Heap pages.
    pub(super) fn pages(&self) -> u32 {
        self.rows.div_ceil(self.rows_per_page) as u32
    }

    /// Heap page `block` as loaded: its rows and their length.
    pub(super) fn heap_page(&self, block: u32) -> HeapPage {
        let first = u64::from(block) * self.rows_per_page;
        HeapPage {
            rows: self.rows.saturating_sub(first).min(self.rows_per_page) as u16,
            len: self.tuple_len,
        }
    }
}

/// The room for a tuple on a heap page with `lines` line pointers and `tuples` tuples of `len`
/// bytes (bufpage.c's `PageGetFreeSpace`: between `pd_lower` and `pd_upper`, less a line
/// pointer for it).
fn free_space(lines: u64, tuples: u64, len: usize) -> usize {
    let used = SIZE_OF_PAGE_HEADER_DATA as u64
        + (lines + 1) * ITEM_ID_SIZE as u64
        + tuples * maxalign(len) as u64;
    (BLCKSZ as u64).saturating_sub(used) as usize
}

/// One level of a primary key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct IndexLevel {
    /// Its first block (block 0 is the metapage; a bottom-up build writes the leaves first).
    pub(super) first_block: u64,
    /// Keys under each of its pages.
    pub(super) keys_per_page: u64,
}

/// The levels of a B-tree over `keys` keys: the leaves, then parents of 285 children each, up
/// to a single root.
pub(super) fn btree_levels(keys: u64) -> Vec<IndexLevel> {
    let mut levels = Vec::new();
    let (mut first_block, mut keys_per_page) = (1, KEYS_PER_INDEX_PAGE);
    loop {
        let pages = keys.div_ceil(keys_per_page).max(1);
        levels.push(IndexLevel {
            first_block,
            keys_per_page,
        });
        if pages == 1 {
            return levels;
        }
        first_block += pages;
        keys_per_page = keys_per_page.saturating_mul(CHILDREN_PER_INTERNAL_PAGE);
    }
}

/// The page of a B-tree over `keys` keys (levels `levels`, from [`btree_levels`]) that holds
/// key `key` at `level` (0 the leaves): its block, its shape as `CREATE INDEX` built it, and
/// the item the descent to `key` takes there (the key's own on a leaf, the downlink on an
/// internal page).
pub(super) fn btree_page(
    levels: &[IndexLevel],
    keys: u64,
    level: usize,
    key: u64,
) -> (u32, BtPage, u16) {
    let here = levels[level];
    let page = key / here.keys_per_page;
    let pages = keys.div_ceil(here.keys_per_page).max(1);
    let under = keys
        .saturating_sub(page * here.keys_per_page)
        .min(here.keys_per_page);
    let below = if level == 0 {
        1
    } else {
        levels[level - 1].keys_per_page
    };
    let shape = BtPage {
        leaf: level == 0,
        rightmost: page + 1 >= pages,
        items: under.div_ceil(below).max(1) as u16,
    };
    let item = shape.first_data() + ((key % here.keys_per_page) / below) as u16;
    ((here.first_block + page) as u32, shape, item)
}

/// A table that only grows: each backend fills its target page, then extends the relation.
pub(super) struct AppendTable {
    pub(super) relid: u32,
    pub(super) rows_per_page: u32,
    /// A tuple's bytes, header and data.
    pub(super) tuple_len: usize,
    /// Its size in pages, changed under its relation extension lock.
    pub(super) pages: AtomicU32,
    /// Its key sequence's `log_cnt` countdown, as `nextval` keeps it in the sequence page:
    /// values handed out since the last WAL record (`insert-commit`).
    pub(super) seq_values: AtomicU32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_accounts_pkey_has_pgbench_depths() {
        // Scale 1: 273 leaves (blocks 1-273) under a root (block 274).
        let one = btree_levels(100_000);
        assert_eq!(one.len(), 2);
        assert_eq!(one[1].first_block, 274);
        // Scale 100: 27 248 leaves, 96 inner pages, a root.
        let hundred = btree_levels(10_000_000);
        assert_eq!(hundred.len(), 3);
        assert_eq!(hundred[2].first_block, 1 + 27_248 + 96);
        // Scale 1000: 272 480 leaves, 957 and 4 internal pages (285 children each), a root.
        let thousand = btree_levels(100_000_000);
        assert_eq!(thousand.len(), 4);
        assert_eq!(thousand[3].first_block, 1 + 272_480 + 957 + 4);
        assert_eq!(btree_levels(1).len(), 1);
    }

    #[test]
    fn a_keys_pages_are_the_descents_blocks_with_their_items() {
        // Scale 1: the root (block 274, rightmost, 273 downlinks) and the leaves.
        let levels = btree_levels(100_000);
        let (block, root, item) = btree_page(&levels, 100_000, 1, 0);
        assert_eq!(
            (block, root.leaf, root.rightmost, root.items),
            (274, false, true, 273)
        );
        assert_eq!(item, 1);
        let (_, _, item) = btree_page(&levels, 100_000, 1, 99_999);
        assert_eq!(item, 273);
        // Key 400 is the 33rd key of the second leaf, which has a high key.
        let (block, leaf, item) = btree_page(&levels, 100_000, 0, 400);
        assert_eq!(
            (block, leaf.leaf, leaf.rightmost, leaf.items),
            (2, true, false, 367)
        );
        assert_eq!(item, 2 + 33);
        // The last leaf holds what is left, and no high key.
        let (block, last, item) = btree_page(&levels, 100_000, 0, 99_999);
        assert_eq!((block, last.rightmost, last.items), (273, true, 176));
        assert_eq!(item, last.max_offset());
        // Every level's block is the one the descent reads (first block + key / keys per page).
        for key in [0, 366, 367, 50_000, 99_999] {
            for (level, l) in levels.iter().enumerate() {
                let (block, ..) = btree_page(&levels, 100_000, level, key);
                assert_eq!(u64::from(block), l.first_block + key / l.keys_per_page);
            }
        }
    }

    #[test]
    fn a_page_filled_at_load_has_no_room_for_a_version() {
        let accounts = Table::new(1, 2, 1_000, (ROWS_PER_HEAP_PAGE, ACCOUNTS_TUPLE_LEN), true);
        assert_eq!(accounts.line_pointers, ROWS_PER_HEAP_PAGE);
        assert!(accounts.free_space(&accounts.page_state[0]) < maxalign(ACCOUNTS_TUPLE_LEN));
        // 100 tellers on a page: 3 764 bytes of room, for 66 versions before the prune's tenth
        // of the page.
        let tellers = Table::new(1, 2, 100, (SMALL_ROWS_PER_HEAP_PAGE, SMALL_TUPLE_LEN), true);
        assert_eq!(tellers.line_pointers, MAX_HEAP_TUPLES_PER_PAGE);
        let free = tellers.free_space(&tellers.page_state[0]);
        assert_eq!(free, 8192 - 24 - 100 * 44 - 4);
        assert_eq!((free - PRUNE_MIN_FREE) / 44, 66);
    }

    #[test]
    fn tuple_lengths_fit_the_rows_per_page() {
        use super::super::page::{maxalign, ITEM_ID_SIZE, SIZE_OF_PAGE_HEADER_DATA};
        let fit = |len: usize| (8192 - SIZE_OF_PAGE_HEADER_DATA) / (maxalign(len) + ITEM_ID_SIZE);
        assert_eq!(fit(ACCOUNTS_TUPLE_LEN) as u64, ROWS_PER_HEAP_PAGE);
        assert_eq!(fit(SMALL_TUPLE_LEN) as u64, SMALL_ROWS_PER_HEAP_PAGE);
        assert_eq!(fit(HISTORY_TUPLE_LEN) as u32, ROWS_PER_HISTORY_PAGE);
        assert_eq!(fit(INSERTS_TUPLE_LEN) as u32, ROWS_PER_INSERT_PAGE);
    }

    /// The line pointers and HOT chains of an updated page against a reference that keeps
    /// each row's versions as a list: updates and prunes in any order, the page's room and
    /// its line pointers as `PageAddItemExtended` and `PageGetHeapFreeSpace` give them.
    mod page_versions {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeSet;

        #[derive(Debug, Clone)]
        enum Op {
            /// An update of row `.0` (modulo the rows) by the next xid.
            Update(u64),
            /// A prune whose horizon is `.0` xids behind the next.
            Prune(u32),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                8 => (0..1000u64).prop_map(Op::Update),
                1 => (0..20u32).prop_map(Op::Prune),
            ]
        }

        /// What the reference keeps: each row's versions (line pointer, inserter, updater),
        /// oldest first; the line pointers in use and the unused ones past the roots.
        struct Reference {
            rows: Vec<Vec<(u16, u32, u32)>>,
            lines: u16,
            unused: BTreeSet<u16>,
        }

        impl Reference {
            fn tuples(&self) -> u64 {
                self.rows.iter().map(|v| v.len() as u64).sum()
            }

            /// The line pointer a HOT update takes, or none (a non-HOT update).
            fn take_line_pointer(&mut self, len: usize) -> Option<u16> {
                let used = SIZE_OF_PAGE_HEADER_DATA as u64
                    + (u64::from(self.lines) + 1) * ITEM_ID_SIZE as u64
                    + self.tuples() * maxalign(len) as u64;
                let room = (BLCKSZ as u64).saturating_sub(used);
                let full = u64::from(self.lines) >= MAX_HEAP_TUPLES_PER_PAGE;
                if room < maxalign(len) as u64 || (full && self.unused.is_empty()) {
                    return None;
                }
                if let Some(lp) = self.unused.pop_first() {
                    return Some(lp);
                }
                self.lines += 1;
                Some(self.lines)
            }
        }

        fn check(rows: u64, len: usize, ops: &[Op]) -> Result<(), TestCaseError> {
            let table = Table::new(1, 2, rows, (SMALL_ROWS_PER_HEAP_PAGE, len), true);
            let state = &table.page_state[0];
            let mut reference = Reference {
                rows: (1..=rows as u16).map(|lp| vec![(lp, LOADED, 0)]).collect(),
                lines: rows as u16,
                unused: BTreeSet::new(),
            };
            let mut next_xid = 3;
            for op in ops {
                match *op {
                    Op::Update(r) => {
                        let row = (r % rows) as usize;
                        let (xid, old) = (next_xid, table.newest[row].load(Relaxed));
                        next_xid += 1;
                        let (lp, _) = table.put_version((0, old), row as u64, state, xid);
                        let want = reference.take_line_pointer(len);
                        let versions = &mut reference.rows[row];
                        let newest = versions.last_mut().unwrap();
                        match want {
                            Some(want) => {
                                prop_assert_eq!(lp, want, "update of row {} by {}", row, xid);
                                newest.2 = xid;
                                versions.push((want, xid, INVALID_TRANSACTION_ID));
                            }
                            None => {
                                prop_assert_eq!(lp, old, "a version with no room");
                                prop_assert!(state.full.load(Relaxed));
                                newest.1 = xid;
                            }
                        }
                    }
                    Op::Prune(back) => {
                        let horizon = next_xid.saturating_sub(back);
                        for (i, versions) in reference.rows.iter_mut().enumerate() {
                            let dead = |v: &(u16, u32, u32)| v.2 != 0 && v.2 < horizon;
                            let Some(last) = versions.iter().rposition(dead) else {
                                continue;
                            };
                            let root = i as u16 + 1;
                            table.prune_members((0, root), &table.chain(0, root), last, state);
                            for (lp, ..) in versions.drain(..=last) {
                                if lp != root {
                                    reference.unused.insert(lp);
                                }
                            }
                        }
                    }
                }
                let mut in_chains = BTreeSet::new();
                for (i, versions) in reference.rows.iter().enumerate() {
                    let chain = table.chain(0, i as u16 + 1);
                    let got: Vec<_> = chain
                        .iter()
                        .map(|&lp| {
                            let t = table.tuple(0, lp);
                            (lp, t.xmin.load(Relaxed), t.xmax.load(Relaxed))
                        })
                        .collect();
                    prop_assert_eq!(&got, versions, "row {}", i);
                    prop_assert_eq!(table.newest[i].load(Relaxed), *chain.last().unwrap());
                    in_chains.extend(chain);
                }
                prop_assert_eq!(u64::from(state.tuples.load(Relaxed)), reference.tuples());
                prop_assert_eq!(state.lines.load(Relaxed), reference.lines);
                for lp in rows as u16 + 1..=reference.lines {
                    let unused = table.tuple(0, lp).xmin.load(Relaxed) == NO_TUPLE;
                    prop_assert_eq!(unused, !in_chains.contains(&lp), "line pointer {}", lp);
                }
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            #[test]
            fn a_pages_versions_are_the_references(
                rows in 1..150u64,
                len in prop_oneof![Just(SMALL_TUPLE_LEN), Just(ACCOUNTS_TUPLE_LEN)],
                ops in prop::collection::vec(op(), 1..400),
            ) {
                check(rows.min(if len == SMALL_TUPLE_LEN { 185 } else { 61 }), len, &ops)?;
            }
        }
    }
}
