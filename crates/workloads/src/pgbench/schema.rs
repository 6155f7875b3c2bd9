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
//! version's line pointer. In a table whose pages have room for versions beside their rows
//! (`pgbench_tellers`, `pgbench_branches`), a version with no room left on its row's page goes
//! to another one, a page added at the end if need be ([`Table::move_version`],
//! [`Table::add_block`]): the table keeps each row's page and the root of its newest chain there,
//! and room for [`GROWTH_PAGES`] pages beyond those loaded. The heap access (`super::heap`)
//! reads and changes them. A table that only grows
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
/// Pages a table whose rows move may add to itself in a run: the model runs no VACUUM (nor
/// autovacuum, whose first visit comes a minute, `autovacuum_naptime`, into a run), so what
/// a run adds stays. About 370 000 non-HOT updates of a small table; past that a run stops
/// with an error.
pub(super) const GROWTH_PAGES: u64 = 2_048;
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
    pub(super) name: &'static str,
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
    /// What the model keeps of each heap page's header, for the pages loaded and the room
    /// left for pages added ([`GROWTH_PAGES`]); empty when nothing updates the table.
    pub(super) page_state: Box<[HeapPageState]>,
    /// A version with no room on its row's page goes to another page, a non-HOT update (see
    /// [`Table::new`]): the tables whose pages had room for versions at load.
    pub(super) moves: bool,
    /// `RelationGetNumberOfBlocks`: the pages loaded and those added since, raised under the
    /// relation extension lock.
    pub(super) nblocks: AtomicU32,
    /// For a table whose rows move: each row's page (where its newest version and the root
    /// of that version's HOT chain are) and the root's line pointer, the tid its newest index
    /// entry holds; empty otherwise (a row's page is the one it was loaded on, its root its
    /// loaded line pointer).
    pub(super) row_block: Box<[AtomicU32]>,
    pub(super) row_root: Box<[AtomicU16]>,
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
///
/// `root` marks a line pointer that starts a HOT chain, one an index entry points to: a
/// tuple that is not heap-only (`HEAP_ONLY_TUPLE` clear: a row as loaded, or a version a
/// non-HOT update put on the page), or what pruning leaves of one (a redirect, or a dead line
/// pointer, `LP_DEAD`). Only VACUUM, which the model does not run, makes such a line pointer
/// unused again.
#[derive(Debug, Default)]
pub(super) struct TupleHeader {
    pub(super) xmin: AtomicU32,
    pub(super) xmax: AtomicU32,
    pub(super) next: AtomicU16,
    pub(super) root: AtomicBool,
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
        name: &'static str,
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
        let moves = updated && line_pointers == MAX_HEAP_TUPLES_PER_PAGE;
        let capacity = match (updated, moves) {
            (false, _) => 0,
            (true, false) => pages,
            (true, true) => pages + GROWTH_PAGES,
        };
        let loaded = |block: u64| {
            rows.saturating_sub(block * rows_per_page)
                .min(rows_per_page)
        };
        let table = Self {
            name,
            relid,
            pkey,
            rows,
            rows_per_page,
            tuple_len,
            seq_scan: seq_cost < index_cost,
            index,
            tuples: (0..capacity * line_pointers)
                .map(|_| TupleHeader::default())
                .collect(),
            line_pointers,
            newest: (0..if updated { rows } else { 0 })
                .map(|row| AtomicU16::new((row % rows_per_page) as u16 + 1))
                .collect(),
            page_state: (0..capacity)
                .map(|block| HeapPageState {
                    lines: AtomicU16::new(loaded(block) as u16),
                    tuples: AtomicU16::new(loaded(block) as u16),
                    ..HeapPageState::default()
                })
                .collect(),
            moves,
            nblocks: AtomicU32::new(pages as u32),
            row_block: (0..if moves { rows } else { 0 })
                .map(|row| AtomicU32::new((row / rows_per_page) as u32))
                .collect(),
            row_root: (0..if moves { rows } else { 0 })
                .map(|row| AtomicU16::new((row % rows_per_page) as u16 + 1))
                .collect(),
        };
        if updated {
            for block in 0..pages {
                for lp in 1..=loaded(block) as u16 {
                    table.tuple(block as u32, lp).root.store(true, Relaxed);
                }
            }
        }
        table
    }

    /// The row's newest version: its page and line pointer.
    pub(super) fn newest(&self, row: u64) -> (u32, u16) {
        (self.row_page(row), self.newest[row as usize].load(Relaxed))
    }

    /// The root of the row's newest version's HOT chain, where its newest index entry points.
    pub(super) fn root(&self, row: u64) -> (u32, u16) {
        if self.moves {
            let r = row as usize;
            (
                self.row_block[r].load(Relaxed),
                self.row_root[r].load(Relaxed),
            )
        } else {
            self.tid(row)
        }
    }

    /// The page holding the row's newest version.
    fn row_page(&self, row: u64) -> u32 {
        if self.moves {
            self.row_block[row as usize].load(Relaxed)
        } else {
            self.tid(row).0
        }
    }

    /// The line pointers of heap page `block` (header `state`) that start a HOT chain
    /// ([`TupleHeader::root`]), in order: what `heap_page_prune` walks the chains from.
    pub(super) fn roots<'a>(
        &'a self,
        block: u32,
        state: &HeapPageState,
    ) -> impl Iterator<Item = u16> + 'a {
        let lines = state.lines.load(Relaxed);
        (1..=lines).filter(move |&lp| self.tuple(block, lp).root.load(Relaxed))
    }

    /// The row's heap block and line pointer (`ctid`) as loaded.
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

    /// A line pointer for a new version on heap page `block` (header `state`, locked
    /// exclusively), if the page has room for the version (`PageGetHeapFreeSpace`) and a line
    /// pointer for it ([`Self::add_line_pointer`]); and the line pointers looked at.
    pub(super) fn take_line_pointer(
        &self,
        block: u32,
        state: &HeapPageState,
    ) -> (Option<u16>, u16) {
        if self.free_space(state) < maxalign(self.tuple_len) {
            return (None, 0);
        }
        self.add_line_pointer(block, state)
    }

    /// A HOT update's change (`heap_update` with `use_hot_update`): `old` on heap page `block`
    /// gets `xid` as its updater and the new version, heap-only, at line pointer `lp` of the
    /// same page as its next; the page becomes prunable (`PageSetPrunable`).
    pub(super) fn put_hot(
        &self,
        (block, old): (u32, u16),
        lp: u16,
        row: u64,
        state: &HeapPageState,
        xid: u32,
    ) {
        let (before, new) = (self.tuple(block, old), self.tuple(block, lp));
        before.xmax.store(xid, Relaxed);
        before.next.store(lp, Relaxed);
        new.xmin.store(xid, Relaxed);
        new.xmax.store(INVALID_TRANSACTION_ID, Relaxed);
        new.next.store(0, Relaxed);
        self.newest[row as usize].store(lp, Relaxed);
        state.tuples.fetch_add(1, Relaxed);
        Self::set_prunable(state, xid);
    }

    /// The model's stand-in for a non-HOT update in a table whose rows do not move (see the
    /// module doc): the version takes `old`'s place, with `xid` as its inserter, and the page is
    /// marked full (`PageSetFull`) and prunable.
    pub(super) fn put_in_place(&self, (block, old): (u32, u16), state: &HeapPageState, xid: u32) {
        state.full.store(true, Relaxed);
        self.tuple(block, old).xmin.store(xid, Relaxed);
        Self::set_prunable(state, xid);
    }

    /// A non-HOT update's change (`heap_update` with the new tuple on another page, both
    /// pages locked exclusively): `old` on heap page `from` (header `from_state`) keeps `xid`
    /// as its updater and ends its chain there (its `t_ctid` points off the page); the new
    /// version, not heap-only, is the root of a chain at line pointer `lp` of page `to`
    /// (header `to_state`), where the row now is and its new index entry will point. The old
    /// page is marked full (`PageSetFull`) and prunable.
    pub(super) fn move_version(
        &self,
        (from, old): (u32, u16),
        from_state: &HeapPageState,
        (to, lp): (u32, u16),
        to_state: &HeapPageState,
        row: u64,
        xid: u32,
    ) {
        let before = self.tuple(from, old);
        before.xmax.store(xid, Relaxed);
        before.next.store(0, Relaxed);
        let new = self.tuple(to, lp);
        new.xmin.store(xid, Relaxed);
        new.xmax.store(INVALID_TRANSACTION_ID, Relaxed);
        new.next.store(0, Relaxed);
        new.root.store(true, Relaxed);
        to_state.tuples.fetch_add(1, Relaxed);
        let r = row as usize;
        self.row_block[r].store(to, Relaxed);
        self.row_root[r].store(lp, Relaxed);
        self.newest[r].store(lp, Relaxed);
        from_state.full.store(true, Relaxed);
        Self::set_prunable(from_state, xid);
    }

    /// `PageSetPrunable`: `pd_prune_xid` becomes `xid` unless an older one is there.
    fn set_prunable(state: &HeapPageState, xid: u32) {
        if state.prune_xid.load(Relaxed) == INVALID_TRANSACTION_ID {
            state.prune_xid.store(xid, Relaxed);
        }
    }

    /// The block a page added at the table's end would be (`ReadBuffer(P_NEW)`, under the
    /// relation extension lock, which the caller holds), or none once the table has used up
    /// the room the model keeps for its growth ([`GROWTH_PAGES`]).
    pub(super) fn next_block(&self) -> Option<u32> {
        let block = self.nblocks.load(Relaxed);
        ((block as usize) < self.page_state.len()).then_some(block)
    }

    /// The page [`Self::next_block`] gave added to the table (`smgrextend`), the caller
    /// holding the relation extension lock and, so that no other backend uses the page before
    /// it, the page's content lock.
    pub(super) fn add_block(&self, block: u32) {
        self.nblocks.store(block + 1, Relaxed);
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
            // A root's line pointer stays in use, as a redirect or dead, once pruned.
            let unused = (1..=lines).find(|&lp| {
                let t = self.tuple(block, lp);
                t.xmin.load(Relaxed) == NO_TUPLE && !t.root.load(Relaxed)
            });
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

    /// Heap pages (`RelationGetNumberOfBlocks`).
    pub(super) fn pages(&self) -> u32 {
        self.nblocks.load(Relaxed)
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
        let accounts = Table::new(
            "t",
            1,
            2,
            1_000,
            (ROWS_PER_HEAP_PAGE, ACCOUNTS_TUPLE_LEN),
            true,
        );
        assert_eq!(accounts.line_pointers, ROWS_PER_HEAP_PAGE);
        assert!(accounts.free_space(&accounts.page_state[0]) < maxalign(ACCOUNTS_TUPLE_LEN));
        // 100 tellers on a page: 3 764 bytes of room, for 66 versions before the prune's tenth
        // of the page.
        let tellers = Table::new(
            "t",
            1,
            2,
            100,
            (SMALL_ROWS_PER_HEAP_PAGE, SMALL_TUPLE_LEN),
            true,
        );
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

    /// The line pointers and HOT chains of an updated table against a reference that keeps
    /// each row's versions as a list of chains: updates and prunes in any order, the pages'
    /// room and line pointers as `PageAddItemExtended` and `PageGetHeapFreeSpace` give them, a
    /// version with no room going to the table's last page or a new one (the rows of a table
    /// with room for versions) or in the old one's place (one without).
    mod table_versions {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeSet;

        #[derive(Debug, Clone)]
        enum Op {
            /// An update of row `.0` (modulo the rows) by the next xid.
            Update(u64),
            /// A prune of page `.1` (modulo the pages) whose horizon is `.0` xids behind the
            /// next.
            Prune(u32, u32),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                8 => (0..1000u64).prop_map(Op::Update),
                1 => (0..20u32, 0..8u32).prop_map(|(back, page)| Op::Prune(back, page)),
            ]
        }

        /// A chain in the reference: its page, its root's line pointer, and its members left
        /// (line pointer, inserter, updater), oldest first (none once all were pruned).
        #[derive(Debug)]
        struct Chain {
            block: u32,
            root: u16,
            members: Vec<(u16, u32, u32)>,
        }

        /// A page in the reference: line pointers in use, the unused ones, tuples.
        #[derive(Debug, Default)]
        struct Page {
            lines: u16,
            unused: BTreeSet<u16>,
            tuples: u64,
        }

        impl Page {
            /// The line pointer a new version of `len` bytes takes here, or none; `most` line
            /// pointers to a page.
            fn take(&mut self, len: usize, most: u64) -> Option<u16> {
                let used = SIZE_OF_PAGE_HEADER_DATA as u64
                    + (u64::from(self.lines) + 1) * ITEM_ID_SIZE as u64
                    + self.tuples * maxalign(len) as u64;
                let room = (BLCKSZ as u64).saturating_sub(used);
                let full = u64::from(self.lines) >= most;
                if room < maxalign(len) as u64 || (full && self.unused.is_empty()) {
                    return None;
                }
                self.tuples += 1;
                if let Some(lp) = self.unused.pop_first() {
                    return Some(lp);
                }
                self.lines += 1;
                Some(self.lines)
            }
        }

        /// What the caller of the table's update steps does (`super::heap`'s `update_row`):
        /// a HOT update, else a move to the last page or a new one, else the stand-in.
        fn update(table: &Table, row: u64, xid: u32) -> (u32, u16) {
            let (block, old) = table.newest(row);
            let state = &table.page_state[block as usize];
            if let (Some(lp), _) = table.take_line_pointer(block, state) {
                table.put_hot((block, old), lp, row, state, xid);
                return (block, lp);
            }
            if !table.moves {
                table.put_in_place((block, old), state, xid);
                return (block, old);
            }
            let last = table.pages() - 1;
            let found = (last != block)
                .then(|| {
                    table
                        .take_line_pointer(last, &table.page_state[last as usize])
                        .0
                })
                .flatten();
            let (to, lp) = match found {
                Some(lp) => (last, lp),
                None => {
                    let new = table.next_block().expect("room to grow");
                    table.add_block(new);
                    let lp = table
                        .take_line_pointer(new, &table.page_state[new as usize])
                        .0;
                    (new, lp.expect("a new page has room"))
                }
            };
            let to_state = &table.page_state[to as usize];
            table.move_version((block, old), state, (to, lp), to_state, row, xid);
            (to, lp)
        }

        fn check(rows: u64, per_page: u64, len: usize, ops: &[Op]) -> Result<(), TestCaseError> {
            let table = Table::new("t", 1, 2, rows, (per_page, len), true);
            let loaded = rows.div_ceil(per_page) as u32;
            let mut pages: Vec<Page> = (0..loaded)
                .map(|block| {
                    let on = (rows - u64::from(block) * per_page).min(per_page);
                    Page {
                        lines: on as u16,
                        tuples: on,
                        ..Page::default()
                    }
                })
                .collect();
            let mut chains: Vec<Vec<Chain>> = (0..rows)
                .map(|row| {
                    let (block, lp) = ((row / per_page) as u32, (row % per_page) as u16 + 1);
                    let members = vec![(lp, LOADED, 0)];
                    vec![Chain {
                        block,
                        root: lp,
                        members,
                    }]
                })
                .collect();
            let mut next_xid = 3;
            for op in ops {
                match *op {
                    Op::Update(r) => {
                        let row = r % rows;
                        let xid = next_xid;
                        next_xid += 1;
                        let got = update(&table, row, xid);
                        let row_chains = &mut chains[row as usize];
                        let last = row_chains.last_mut().unwrap();
                        let block = last.block;
                        let newest = last.members.last_mut().unwrap();
                        match pages[block as usize].take(len, table.line_pointers) {
                            Some(lp) => {
                                prop_assert_eq!(got, (block, lp), "HOT update of {}", row);
                                newest.2 = xid;
                                last.members.push((lp, xid, INVALID_TRANSACTION_ID));
                            }
                            None if !table.moves => {
                                prop_assert_eq!(got, (block, newest.0), "stand-in");
                                newest.1 = xid;
                            }
                            None => {
                                newest.2 = xid;
                                let last_page = pages.len() as u32 - 1;
                                let there = (last_page != block)
                                    .then(|| {
                                        pages[last_page as usize].take(len, table.line_pointers)
                                    })
                                    .flatten();
                                let want = match there {
                                    Some(lp) => (last_page, lp),
                                    None => {
                                        pages.push(Page::default());
                                        let lp = pages
                                            .last_mut()
                                            .unwrap()
                                            .take(len, table.line_pointers)
                                            .unwrap();
                                        (pages.len() as u32 - 1, lp)
                                    }
                                };
                                prop_assert_eq!(got, want, "non-HOT update of {}", row);
                                prop_assert!(table.page_state[block as usize].full.load(Relaxed));
                                row_chains.push(Chain {
                                    block: want.0,
                                    root: want.1,
                                    members: vec![(want.1, xid, INVALID_TRANSACTION_ID)],
                                });
                            }
                        }
                    }
                    Op::Prune(back, page) => {
                        let block = page % pages.len() as u32;
                        let horizon = next_xid.saturating_sub(back);
                        let state = &table.page_state[block as usize];
                        let roots: Vec<u16> = table.roots(block, state).collect();
                        let on_page = chains.iter_mut().flatten().filter(|c| c.block == block);
                        let mut want_roots = Vec::new();
                        for chain in on_page {
                            want_roots.push(chain.root);
                            let dead = |v: &(u16, u32, u32)| v.2 != 0 && v.2 < horizon;
                            let Some(last) = chain.members.iter().rposition(dead) else {
                                continue;
                            };
                            let members = table.chain(block, chain.root);
                            table.prune_members((block, chain.root), &members, last, state);
                            let reference = &mut pages[block as usize];
                            for (lp, ..) in chain.members.drain(..=last) {
                                reference.tuples -= 1;
                                if lp != chain.root {
                                    reference.unused.insert(lp);
                                }
                            }
                        }
                        want_roots.sort_unstable();
                        prop_assert_eq!(roots, want_roots, "roots of page {}", block);
                    }
                }
                prop_assert_eq!(table.pages() as usize, pages.len());
                let mut in_chains = BTreeSet::new();
                for (row, row_chains) in chains.iter().enumerate() {
                    for chain in row_chains {
                        let got: Vec<_> = table
                            .chain(chain.block, chain.root)
                            .iter()
                            .map(|&lp| {
                                let t = table.tuple(chain.block, lp);
                                (lp, t.xmin.load(Relaxed), t.xmax.load(Relaxed))
                            })
                            .collect();
                        prop_assert_eq!(&got, &chain.members, "row {}", row);
                        in_chains.insert((chain.block, chain.root));
                        in_chains.extend(chain.members.iter().map(|m| (chain.block, m.0)));
                    }
                    let last = row_chains.last().unwrap();
                    let newest = last.members.last().unwrap().0;
                    prop_assert_eq!(table.newest(row as u64), (last.block, newest));
                    if table.moves {
                        prop_assert_eq!(table.root(row as u64), (last.block, last.root));
                    }
                }
                for (block, page) in pages.iter().enumerate() {
                    let block = block as u32;
                    let state = &table.page_state[block as usize];
                    prop_assert_eq!(u64::from(state.tuples.load(Relaxed)), page.tuples);
                    prop_assert_eq!(state.lines.load(Relaxed), page.lines);
                    for lp in 1..=page.lines {
                        let t = table.tuple(block, lp);
                        let unused = t.xmin.load(Relaxed) == NO_TUPLE && !t.root.load(Relaxed);
                        let want = !in_chains.contains(&(block, lp));
                        prop_assert_eq!(unused, want, "line pointer {} of page {}", lp, block);
                    }
                }
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            #[test]
            fn a_tables_versions_are_the_references(
                rows in 1..300u64,
                len in prop_oneof![Just(SMALL_TUPLE_LEN), Just(ACCOUNTS_TUPLE_LEN)],
                ops in prop::collection::vec(op(), 1..600),
            ) {
                let per_page = if len == SMALL_TUPLE_LEN { 185 } else { 61 };
                check(rows, per_page, len, &ops)?;
            }
        }
    }
}
