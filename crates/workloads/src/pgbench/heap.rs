//! The heap and index access of pgbench's statements: what heapam.c, pruneheap.c,
//! heapam_visibility.c and the B-tree code (nbtsearch.c, nbtinsert.c) do for them on the
//! tables of `super::schema`, each page under its content lock (`LockBuffer`: shared to read,
//! exclusive to change).
//!
//! - A row read by key (`fetch_row`): the index scan's descent from the root to the leaf
//!   holding the key, then the row's heap page; a table the plan scans whole has each of its
//!   pages read instead.
//! - A heap page visited (`heap_page`): pruneheap.c's `heap_page_prune_opt` first (`prune_opt`:
//!   once a page has less free space than a tenth of it, or a version did not fit, and its
//!   oldest dead version was left by a transaction every snapshot sees as ended, its chains are
//!   pruned if its cleanup lock can be had at once: its content lock, and no pin but the
//!   scan's), then the page read under its content lock
//!   shared: by an index scan, the row's HOT chain from its root to the first version visible
//!   (`hot_search`: heapam.c's `heap_hot_search_buffer`), by a sequential scan every tuple on
//!   the page (heapam.c's `heapgetpage`). Each version met has its visibility checked
//!   (`satisfies_mvcc`: heapam_visibility.c's `HeapTupleSatisfiesMVCC`): its inserter, then its
//!   updater, each, if it has ended and carries no hint bit, looked up in the commit log
//!   (`did_commit_and_may_hint`: transam.c's `TransactionIdDidCommit` with its one-entry
//!   `cachedFetchXid`) and hinted (`SetHintBits`) — but not while its asynchronous commit is
//!   unflushed (`XLogNeedsFlush`) and no later record has changed the page (its `pd_lsn` is
//!   below the commit's LSN, which clog.c keeps per group of 32 xids): until then every
//!   backend that meets the version asks the commit log again. In PostgreSQL 15's steady
//!   state of `tpcb-like` at scale 10 with `synchronous_commit = off`, the teller and branch
//!   pages each hold the versions of the current group's transactions, the new one's inserter
//!   and the old one's updater, in different places on the page: about 61 commit-log reads a
//!   transaction, which the model reproduces.
//! - A row updated (`update_row`: heapam.c's `heap_update`, and the executor's `EvalPlanQual`):
//!   the scan's pin of the row's page kept through it (the executor's tuple slot), the row's
//!   newest version, whose inserter, if it carries no hint bit, is asked about
//!   (`HeapTupleSatisfiesUpdate`): if `TransactionIdIsInProgress` (the ProcArray under
//!   ProcArrayLock shared) finds it running, it is the row's updater still at work and is
//!   waited for — the tuple lock (`LockTuple`, `ExclusiveLock`), then `XactLockTableWait` on
//!   its xid, the page's pin held; ended, it is looked up and hinted as above. Then the
//!   version gets this transaction's xid as its updater and the new version a line pointer on
//!   the same page (a HOT update, `Table::put_hot`: the first unused line pointer, else a new
//!   one), if the page has room for it; and the HOT update's WAL record is written with the
//!   page locked exclusively. Without room (a page whose prune was skipped because another
//!   backend had it pinned), a non-HOT update (`non_hot_update`): the old version locked
//!   (`XLOG_HEAP_LOCK`), the page let go, the backend's target page or the table's last one
//!   if it has room, else a page added under the relation extension lock
//!   (`RelationGetBufferForTuple`), the version put there as the root of a new chain, one
//!   `XLOG_HEAP_UPDATE` record, and a new entry in the primary key (`_bt_doinsert` with its
//!   unique check). The table has grown by then, and every sequential scan reads its new page.
//! - A row inserted (`heap_insert`: heapam.c's `heap_insert` on hio.c's
//!   `RelationGetBufferForTuple`): on the backend's target page (`rd_targblock`), or on a new
//!   page added under the relation extension lock; and a serial key inserted into its B-tree
//!   (`serial_index_insert`: nbtinsert.c's `_bt_doinsert`) at the rightmost leaf. Each with
//!   its WAL record, written with the page locked exclusively.
//!
//! # Differences from PostgreSQL
//!
//! - Heap tuples are taken to have their hint bits set when loaded (no commit-log lookup for a
//!   row nothing has updated), as they do in a warmed pgbench -S run.
//! - A version with no room on its row's page goes to another page, a non-HOT update, in the
//!   tables whose pages had room for versions at load (`pgbench_tellers`, `pgbench_branches`).
//!   In `pgbench_accounts`, whose pages are full from `pgbench -i`, the model instead puts the
//!   new version in the old one's place (its inserter the updater's xid) and marks the page for
//!   pruning (`tpcb.non_hot`); the other page, the index entries and the visibility map are not
//!   modelled there. PostgreSQL moves each page's first updated row out that way and makes
//!   HOT updates in the room it leaves; its steady state calls `heap_page_prune` about once
//!   a transaction, as the model prunes at nearly every visit to an accounts page after an
//!   update. Full-page images and page splits are not modelled.
//! - No VACUUM runs (autovacuum's first visit comes a minute into a run): a table that has
//!   grown stays grown, its dead line pointers and index entries stay, and the free-space map
//!   stays empty (`page_for_version`). The plan stays the one the table's size at load gives:
//!   PostgreSQL's next connection plans an index scan of a small table that has grown to tens
//!   of pages. An index scan of a row that has moved reads its newest entry's heap page only;
//!   PostgreSQL's also visits the older entries' pages until `_bt_killitems` has marked them
//!   dead.
//! - A prune's horizon is the pruning backend's snapshot's xmin, not the `GlobalVisState` of
//!   every backend.
//! - A waiter keeps the tuple lock until the row is its own (PostgreSQL gives it back when
//!   `heap_update` reports the row updated and takes it again in `heap_lock_tuple` if
//!   `EvalPlanQual` must wait on the newer version).
//! - When the B-tree's rightmost-leaf fast path cannot lock the cached leaf at once, the model
//!   waits for its lock instead of descending from the root.
//! - The bytes of a page that each step reads and writes are charged to the buffer's page in
//!   the simulated map (positions from `super::page`), all while the content lock is held: the
//!   executor's reads of a row it keeps pinned after unlocking, and `heap_page_prune_opt`'s
//!   unlocked look at `pd_prune_xid`, are charged with the lock (the latter by the read under
//!   it). A page read into a buffer, and the zeroing of a new one, are not charged.

use super::page::{
    item_id, item_ids, BtPage, HeapPage, INDEX_TUPLE_KEY, INDEX_TUPLE_TID, PAGE_HEADER,
    PD_LOWER_TO_VERSION, PD_LOWER_UPPER, PD_LSN, SIZEOF_HEAP_TUPLE_HEADER, T_HOFF, T_INFOMASK,
    T_XMAX_TO_INFOMASK,
};
use super::schema::{
    btree_levels, btree_page, HeapPageState, Table, TupleHeader, COMMITTED, DATABASE, INSERTS_PKEY,
    KEYS_PER_INDEX_PAGE, LOADED, NO_TUPLE, PRUNE_MIN_FREE,
};
use super::{Cluster, Txn, TxnError};
use pglocks_bufmgr::{Buffer, BufferTag};
use pglocks_lmgr::{LockMode, LockOwner, LockTag, LockTimeouts};
use pglocks_lwlock::{LwLockMode, Padding, RawLwLock, VarProtocol};
use pglocks_procarray::INVALID_TRANSACTION_ID;
use pglocks_spin::RawSpinLock;
use pglocks_sync::shmem::independent;
use pglocks_wal::record::{RM_BTREE_ID, RM_HEAP_ID};
use std::ops::Range;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

/// WAL payload of a HOT update: `xl_heap_update`, `xl_heap_header` and the new row's changed
/// bytes.
const HEAP_UPDATE_PAYLOAD: [u8; 64] = [0x55; 64];
/// heapam_xlog.h's `XLOG_HEAP_HOT_UPDATE`, `XLOG_HEAP_UPDATE` and `XLOG_HEAP_LOCK`.
const XLOG_HEAP_HOT_UPDATE: u8 = 0x40;
const XLOG_HEAP_UPDATE: u8 = 0x20;
const XLOG_HEAP_LOCK: u8 = 0x60;
/// WAL payload of a tuple lock: `xl_heap_lock` (the locker's xid, the offset, the infomask
/// bits, the flags).
const HEAP_LOCK_PAYLOAD: [u8; 8] = [0x4c; 8];
/// `RM_HEAP2_ID` and its `XLOG_HEAP2_PRUNE`.
const RM_HEAP2_ID: u8 = 9;
const XLOG_HEAP2_PRUNE: u8 = 0x10;
/// WAL payload of a prune record: `xl_heap_prune` and one redirect.
const HEAP_PRUNE_PAYLOAD: [u8; 16] = [0x50; 16];
/// nbtree.h's `BTREE_FASTPATH_MIN_LEVEL`: the rightmost-leaf fast path only for a root at
/// this level or higher (three levels or more).
const BTREE_FASTPATH_MIN_LEVEL: usize = 2;
/// WAL payload of a heap insert: `xl_heap_insert`, `xl_heap_header` and a small row.
const HEAP_INSERT_PAYLOAD: [u8; 48] = [0x48; 48];
/// WAL payload of a B-tree leaf insert: `xl_btree_insert` and an int4 index tuple.
const BTREE_INSERT_PAYLOAD: [u8; 20] = [0x42; 20];

/// Where a statement's scan is once it has found its row (`ExecScan` returning it): the
/// row's heap page, pinned, and the pages a sequential scan reads after it.
struct Found {
    buffer: Buffer,
    rest: Range<u32>,
}

impl<K: RawLwLock, R: RawSpinLock, P: Padding, V: VarProtocol> Cluster<K, R, P, V> {
    /// `ReadBuffer` of block `block` of relation `relid` and `LockBuffer` in `mode`.
    pub(super) fn read_locked(
        &self,
        t: &mut Txn<'_, K, V, R>,
        relid: u32,
        block: u32,
        mode: LwLockMode,
    ) -> Result<Buffer, TxnError> {
        let tag = BufferTag::main(DATABASE, relid, block);
        let buffer = self.buffers.read_buffer(t.b, &mut t.s.pins, tag)?;
        self.buffers.lock_buffer(t.b, buffer, mode)?;
        Ok(buffer)
    }

    /// `LockBuffer(BUFFER_LOCK_UNLOCK)` and `ReleaseBuffer` (`UnlockReleaseBuffer`).
    pub(super) fn unlock_release(
        &self,
        t: &mut Txn<'_, K, V, R>,
        buffer: Buffer,
    ) -> Result<(), TxnError> {
        self.buffers.unlock_buffer(t.b, buffer)?;
        self.buffers.release_buffer(t.b, &mut t.s.pins, buffer)?;
        Ok(())
    }

    /// Charges a read of `bytes` of the page in `buffer` (`BufferGetPage`), which the caller
    /// has pinned and locked.
    #[inline]
    pub(super) fn page_read(&self, buffer: Buffer, bytes: Range<usize>) {
        self.buffers.blocks().read(buffer.id() as usize, bytes);
    }

    /// Charges a write of `bytes` of the page in `buffer`, which the caller has pinned and
    /// locked exclusively (or, for a hint bit, shared).
    #[inline]
    pub(super) fn page_write(&self, buffer: Buffer, bytes: Range<usize>) {
        self.buffers.blocks().write(buffer.id() as usize, bytes);
    }

    /// Charges a read of item `off` of B-tree page `page`: its line pointer, and `bytes` of its
    /// tuple.
    fn btree_item_read(&self, buffer: Buffer, page: &BtPage, off: u16, bytes: Range<usize>) {
        self.page_read(buffer, item_id(off));
        let t = page.tuple(off);
        self.page_read(buffer, t.start + bytes.start..t.start + bytes.end);
    }

    /// What `_bt_search` reads of one page on its way down, the page locked (`_bt_getbuf` /
    /// `_bt_relandgetbuf`, `_bt_checkpage`, `_bt_moveright`, `_bt_binsrch`), `item` being the
    /// item it takes there: the header's `pd_lower` to `pd_pagesize_version`, the special
    /// space, the high key if the page has one (the key is not beyond it: no move right), each
    /// item the binary search compares with; then, on an internal page, the downlink it follows
    /// (`BTreeTupleGetDownLink`).
    fn btree_search_page(&self, buffer: Buffer, page: &BtPage, item: u16) {
        self.page_read(buffer, PD_LOWER_TO_VERSION);
        self.page_read(buffer, BtPage::OPAQUE);
        if !page.rightmost {
            self.btree_item_read(buffer, page, 1, INDEX_TUPLE_KEY);
        }
        for off in page.probes(item) {
            if let Some(t) = page.compared(off) {
                self.page_read(buffer, item_id(off));
                self.page_read(buffer, t);
            }
        }
        if !page.leaf {
            self.btree_item_read(buffer, page, item, INDEX_TUPLE_TID);
        }
    }

    /// What an index scan reads of the leaf holding its key after `_bt_binsrch` found it
    /// (`_bt_readpage`: the key's item, whose `t_tid` is the row's, then the next item, or the
    /// high key at the page's end, to see the scan is done).
    fn btree_read_leaf(&self, buffer: Buffer, page: &BtPage, item: u16) {
        self.btree_item_read(buffer, page, item, INDEX_TUPLE_KEY);
        if item < page.max_offset() {
            self.btree_item_read(buffer, page, item + 1, INDEX_TUPLE_KEY);
        } else if !page.rightmost {
            self.btree_item_read(buffer, page, 1, INDEX_TUPLE_KEY);
        }
    }

    /// What `heap_hot_search_buffer` reads of the page holding a row (its content lock held):
    /// `pd_lower` (the offset's bound), the row's line pointer, and its tuple — the header
    /// (visibility, the HOT chain) and the data the executor takes from it.
    fn heap_fetch_read(&self, buffer: Buffer, page: &HeapPage, lp: u16) {
        self.page_read(buffer, PD_LOWER_UPPER);
        self.page_read(buffer, item_id(lp));
        self.page_read(buffer, page.at(lp));
    }

    /// A row fetched by its `ctid` (14+'s refetch of an updated row, `heapam_fetch_row_version`):
    /// read, content lock shared, the tuple read, unlock, release.
    pub(super) fn fetch_tid(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        (block, lp): (u32, u16),
    ) -> Result<(), TxnError> {
        let buffer = self.read_locked(t, table.relid, block, LwLockMode::Shared)?;
        self.heap_fetch_read(buffer, &table.heap_page(block), lp);
        self.unlock_release(t, buffer)
    }

    /// A row read by key and let go (a `SELECT`'s scan): [`Self::find_row`], then
    /// [`Self::done_with_row`].
    pub(super) fn fetch_row(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
    ) -> Result<(), TxnError> {
        let found = self.find_row(t, table, row)?;
        self.done_with_row(t, table, found)
    }

    /// The scan of a statement up to its row. An index scan: the descent from the root to
    /// the leaf holding `row`, each page under its content lock shared (`_bt_getroot`, then
    /// `_bt_relandgetbuf` level by level: the parent unlocked and released before the child
    /// is read and locked; the leaf given up once read, `_bt_drop_lock_and_maybe_pin` under an
    /// MVCC snapshot), then the heap page its entry points to (the root of the row's newest
    /// HOT chain), locked shared while the tuple is found (`heapam_index_fetch_tuple`). A
    /// sequential scan: the table's pages as `initscan` counted them, up to the one holding
    /// the row, each under its content lock shared while its tuples are checked
    /// (`heapgetpage`; the scan does not know the key is unique and goes on after the row:
    /// [`Self::done_with_row`]). In a transaction that writes, the heap pages read may be
    /// pruned and hinted (`heap_page`). The row's page stays pinned, as the executor's tuple
    /// slot (`ExecStoreBufferHeapTuple`) and the scan's current buffer keep it while the
    /// statement works on the row: through an `UPDATE`'s `heap_update`, and its waits.
    fn find_row(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
    ) -> Result<Found, TxnError> {
        if table.seq_scan {
            let pages = table.pages();
            let at = table.newest(row).0.min(pages - 1);
            for block in 0..at {
                self.heap_page(t, table, block, None, false)?;
            }
            let buffer = self.heap_page(t, table, at, None, true)?;
            return Ok(Found {
                buffer,
                rest: at + 1..pages,
            });
        }
        let (leaf_block, leaf, item) = self.btree_descend(t, table, row)?;
        let buffer = self.read_locked(t, table.pkey, leaf_block, LwLockMode::Shared)?;
        self.btree_search_page(buffer, &leaf, item);
        self.btree_read_leaf(buffer, &leaf, item);
        self.unlock_release(t, buffer)?;
        let (block, lp) = table.root(row);
        let buffer = self.heap_page(t, table, block, Some(lp), true)?;
        Ok(Found { buffer, rest: 0..0 })
    }

    /// The descent of `table`'s primary key towards `row`'s key from the root to the level
    /// above the leaves (`_bt_search`), each page read under its content lock shared and let
    /// go before the next is read. Returns the leaf holding the key: its block, its shape as
    /// the build made it, and the key's item there.
    fn btree_descend(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
    ) -> Result<(u32, BtPage, u16), TxnError> {
        for level in (1..table.index.len()).rev() {
            let (block, page, item) = btree_page(&table.index, table.rows, level, row);
            let buffer = self.read_locked(t, table.pkey, block, LwLockMode::Shared)?;
            self.btree_search_page(buffer, &page, item);
            self.unlock_release(t, buffer)?;
        }
        Ok(btree_page(&table.index, table.rows, 0, row))
    }

    /// The statement done with the row [`Self::find_row`] found: the row's page released, and
    /// a sequential scan's pages after it read.
    fn done_with_row(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        found: Found,
    ) -> Result<(), TxnError> {
        self.buffers
            .release_buffer(t.b, &mut t.s.pins, found.buffer)?;
        for block in found.rest {
            self.heap_page(t, table, block, None, false)?;
        }
        Ok(())
    }

    /// A heap page a scan moves to: `heap_page_prune_opt` first (below), then read under its
    /// content lock shared: by an index scan, the chain of the row at line pointer `lp`
    /// (`hot_search`); by a sequential scan (`lp` none), every tuple (`heapgetpage`). Only a
    /// transaction that writes prunes and looks xids up (the model's prune and commit-log
    /// lookups need its WAL and commit log). The page is released after, or, with `keep`,
    /// left pinned and returned.
    fn heap_page(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        block: u32,
        lp: Option<u16>,
        keep: bool,
    ) -> Result<Buffer, TxnError> {
        let buffer = self.read_buffer_of(t, table, block)?;
        let page = table.heap_page(block);
        let writes = t.writer.is_some();
        let state = table.page_state.get(block as usize).filter(|_| writes);
        if let Some(state) = state {
            self.prune_opt(t, table, block, buffer, state)?;
        }
        self.buffers.lock_buffer(t.b, buffer, LwLockMode::Shared)?;
        let lines = state.map_or(page.rows, |s| s.lines.load(Relaxed));
        let has_tuple =
            |lp: u16| state.is_none() || table.tuple(block, lp).xmin.load(Relaxed) != NO_TUPLE;
        match lp {
            Some(lp) => self.hot_search(t, table, block, buffer, state, lp)?,
            None => {
                // `heapgetpage`: every line pointer; each tuple's header, and the first column
                // of its data (the key the qual tests) — a walk whose loads do not wait on
                // each other — then each tuple's visibility.
                independent(|| {
                    self.page_read(buffer, PD_LOWER_UPPER);
                    for lp in 1..=lines {
                        self.page_read(buffer, item_id(lp));
                        if has_tuple(lp) {
                            let tuple = page.at(lp);
                            self.page_read(buffer, tuple.start..tuple.start + T_HOFF + 4);
                        }
                    }
                });
                if let Some(state) = state {
                    for lp in (1..=lines).filter(|&lp| has_tuple(lp)) {
                        let at = page.at(lp).start;
                        self.satisfies_mvcc(t, table.tuple(block, lp), buffer, state, at)?;
                    }
                }
            }
        }
        self.buffers.unlock_buffer(t.b, buffer)?;
        if !keep {
            self.buffers.release_buffer(t.b, &mut t.s.pins, buffer)?;
        }
        Ok(buffer)
    }

    /// `heap_hot_search_buffer` for the row whose chain starts at line pointer `lp` (its
    /// content lock held): `pd_lower` (the offset's bound), then each member of the chain —
    /// its line pointer, past a redirect, and its header, whose visibility is checked
    /// ([`Self::satisfies_mvcc`], for a table that is updated and a transaction that writes)
    /// — up to the first one visible, whose data the executor takes. The chain is the loaded
    /// row alone in a table nothing updates.
    fn hot_search(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        block: u32,
        buffer: Buffer,
        state: Option<&HeapPageState>,
        lp: u16,
    ) -> Result<(), TxnError> {
        let page = table.heap_page(block);
        self.page_read(buffer, PD_LOWER_UPPER);
        let Some(state) = state else {
            self.page_read(buffer, item_id(lp));
            self.page_read(buffer, page.tuple(lp));
            return Ok(());
        };
        let mut at = lp;
        // A chain is at most the page's line pointers long.
        for _ in 0..table.line_pointers {
            self.page_read(buffer, item_id(at));
            let tuple = table.tuple(block, at);
            let next = tuple.next.load(Relaxed);
            if tuple.xmin.load(Relaxed) != NO_TUPLE {
                let bytes = page.at(at);
                self.page_read(buffer, bytes.start..bytes.start + SIZEOF_HEAP_TUPLE_HEADER);
                let visible = self.satisfies_mvcc(t, tuple, buffer, state, bytes.start)?;
                if visible || next == 0 {
                    self.page_read(buffer, bytes);
                    break;
                }
            }
            if next == 0 {
                break;
            }
            at = next;
        }
        Ok(())
    }

    /// Models `HeapTupleSatisfiesMVCC` (heapam_visibility.c) for `tuple`, which starts at
    /// `at` on the page in `buffer` (its content lock held, shared or exclusive): its inserter
    /// first — this transaction's, running in the snapshot (invisible), or, without its hint
    /// bit, looked up ([`Self::did_commit_and_may_hint`]) and hinted — then its updater the
    /// same way (a running one leaves it visible, an ended one makes it invisible). A hint is
    /// a write of the tuple's `t_infomask`.
    fn satisfies_mvcc(
        &self,
        t: &mut Txn<'_, K, V, R>,
        tuple: &TupleHeader,
        buffer: Buffer,
        state: &HeapPageState,
        at: usize,
    ) -> Result<bool, TxnError> {
        let xmin = tuple.xmin.load(Acquire);
        if xmin != LOADED {
            let xid = xmin & !COMMITTED;
            if xid == t.xid {
                return Ok(tuple.xmax.load(Acquire) & !COMMITTED != xid);
            }
            if self.procs.xid_in_mvcc_snapshot(xid, &t.s.snapshot)? {
                return Ok(false);
            }
            if xmin & COMMITTED == 0 {
                self.hint(t, &tuple.xmin, xid, buffer, state, at)?;
            }
        }
        let xmax = tuple.xmax.load(Acquire);
        let xid = xmax & !COMMITTED;
        if xid == INVALID_TRANSACTION_ID {
            return Ok(true);
        }
        if xid == t.xid {
            return Ok(false);
        }
        if self.procs.xid_in_mvcc_snapshot(xid, &t.s.snapshot)? {
            return Ok(true);
        }
        if xmax & COMMITTED == 0 {
            self.hint(t, &tuple.xmax, xid, buffer, state, at)?;
        }
        Ok(false)
    }

    /// `TransactionIdIsInProgress` of `xid` in `word` (a tuple's `t_xmin` or `t_xmax`, the tuple
    /// at `at`), as `HeapTupleSatisfiesVacuum` and `HeapTupleSatisfiesUpdate` ask it of an
    /// unhinted xid; if it has ended, [`Self::hint`]. Returns whether it has ended.
    fn hint_if_ended(
        &self,
        t: &mut Txn<'_, K, V, R>,
        word: &AtomicU32,
        xid: u32,
        buffer: Buffer,
        state: &HeapPageState,
        at: usize,
    ) -> Result<bool, TxnError> {
        let (recent_xmin, known) = (t.s.snapshot.xmin, t.s.known_completed);
        let procs = &self.procs;
        if procs.transaction_id_is_in_progress(t.b, xid, recent_xmin, known)? {
            return Ok(false);
        }
        self.hint(t, word, xid, buffer, state, at)?;
        Ok(true)
    }

    /// `TransactionIdDidCommit` of the ended `xid` in `word` (a tuple's `t_xmin` or `t_xmax`,
    /// the tuple at `at`), then `SetHintBits` if it may ([`Self::did_commit_and_may_hint`]).
    fn hint(
        &self,
        t: &mut Txn<'_, K, V, R>,
        word: &AtomicU32,
        xid: u32,
        buffer: Buffer,
        state: &HeapPageState,
        at: usize,
    ) -> Result<(), TxnError> {
        if self.did_commit_and_may_hint(t, xid, buffer, state)? {
            word.fetch_or(COMMITTED, Relaxed);
            self.page_write(buffer, at + T_INFOMASK.start..at + T_INFOMASK.end);
        }
        Ok(())
    }

    /// Models `heap_page_prune_opt`: a page holding more dead versions than its room, the
    /// oldest left by a transaction every snapshot now sees as ended (`pd_prune_xid` below
    /// this backend's snapshot's xmin, the `GlobalVisState` test), is pruned if this backend
    /// can have its cleanup lock at once (`ConditionalLockBufferForCleanup`: the content lock
    /// exclusively, and no pin but this one, which the scan holds), and a `XLOG_HEAP2_PRUNE`
    /// record says so. Else it is left as it is: a page every backend's scan reads, or one
    /// whose row another backend waits on (a waiter keeps its pin), may fill up, and its next
    /// version go to another page.
    ///
    /// The prune (pruneheap.c's `heap_page_prune` and `heap_prune_chain`) walks each chain
    /// from its root ([`Table::roots`]), each member's header read and its inserter and
    /// updater looked up if not hinted (`HeapTupleSatisfiesVacuum`: `TransactionIdIsInProgress`,
    /// then `TransactionIdDidCommit` and `SetHintBits`). The members up to the last one whose
    /// updater is older than the horizon go: the root becomes a redirect to the first member
    /// left, or dead if none is (a row moved to another page), the others' line pointers
    /// become unused (`PD_HAS_FREE_LINES`). It writes the page header (`pd_prune_xid`,
    /// `pd_flags`, then `pd_lsn`) and the line pointer array, having read them.
    fn prune_opt(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        block: u32,
        buffer: Buffer,
        state: &HeapPageState,
    ) -> Result<(), TxnError> {
        let xid = state.prune_xid.load(Relaxed);
        let horizon = t.s.snapshot.xmin;
        let due = |s: &HeapPageState| s.full.load(Relaxed) || table.free_space(s) < PRUNE_MIN_FREE;
        if !due(state) || xid == INVALID_TRANSACTION_ID || xid >= horizon {
            return Ok(());
        }
        let pins = &t.s.pins;
        if !self
            .buffers
            .conditional_lock_buffer_for_cleanup(t.b, pins, buffer)?
        {
            t.b.stats.events.count("tpcb.prunes_skipped", 1);
            return Ok(());
        }
        if due(state) && state.prune_xid.load(Relaxed) == xid {
            let lps = item_ids(state.lines.load(Relaxed));
            self.page_read(buffer, PAGE_HEADER);
            self.page_read(buffer, lps.clone());
            // pd_prune_xid becomes the oldest updater of a version left.
            let mut oldest = INVALID_TRANSACTION_ID;
            let roots: Vec<u16> = table.roots(block, state).collect();
            for root in roots {
                let left = self.prune_chain(t, table, block, buffer, state, root)?;
                if left != INVALID_TRANSACTION_ID
                    && (oldest == INVALID_TRANSACTION_ID || left < oldest)
                {
                    oldest = left;
                }
            }
            state.prune_xid.store(oldest, Relaxed);
            state.full.store(false, Relaxed);
            self.page_write(buffer, lps);
            self.page_write(buffer, PAGE_HEADER);
            let end = t.log(
                INVALID_TRANSACTION_ID,
                RM_HEAP2_ID,
                XLOG_HEAP2_PRUNE,
                &HEAP_PRUNE_PAYLOAD,
            )?;
            state.lsn.store(end, Relaxed);
            self.page_write(buffer, PD_LSN);
            t.b.stats.events.count("tpcb.prunes", 1);
        }
        self.buffers.unlock_buffer(t.b, buffer)?;
        Ok(())
    }

    /// `heap_prune_chain` for the chain whose root is line pointer `root` (the page locked
    /// exclusively): see [`Self::prune_opt`]. Returns the oldest updater of a version left on
    /// the chain (invalid for none).
    fn prune_chain(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        block: u32,
        buffer: Buffer,
        state: &HeapPageState,
        root: u16,
    ) -> Result<u32, TxnError> {
        let page = table.heap_page(block);
        let horizon = t.s.snapshot.xmin;
        let chain = table.chain(block, root);
        // Each member's updater, after its header is read and its xids looked up.
        let mut updaters = Vec::with_capacity(chain.len());
        for &lp in &chain {
            let at = table.tuple(block, lp);
            let bytes = page.at(lp);
            self.page_read(buffer, bytes.start..bytes.start + SIZEOF_HEAP_TUPLE_HEADER);
            for word in [&at.xmin, &at.xmax] {
                let seen = word.load(Relaxed);
                let xid = seen & !COMMITTED;
                if seen == NO_TUPLE || xid == INVALID_TRANSACTION_ID || seen & COMMITTED != 0 {
                    continue;
                }
                self.hint_if_ended(t, word, xid, buffer, state, bytes.start)?;
            }
            updaters.push(at.xmax.load(Relaxed) & !COMMITTED);
        }
        let dead = |&x: &u32| x != INVALID_TRANSACTION_ID && x < horizon;
        let Some(last_dead) = updaters.iter().rposition(dead) else {
            return Ok(Self::oldest_updater(&updaters));
        };
        table.prune_members((block, root), &chain, last_dead, state);
        Ok(Self::oldest_updater(&updaters[last_dead + 1..]))
    }

    /// The oldest of the chain members' updaters `updaters`, invalid for none.
    fn oldest_updater(updaters: &[u32]) -> u32 {
        let updated = updaters
            .iter()
            .copied()
            .filter(|&x| x != INVALID_TRANSACTION_ID);
        updated.min().unwrap_or(INVALID_TRANSACTION_ID)
    }

    /// `TransactionIdDidCommit` of an ended `xid` (the commit log, unless it is transam.c's
    /// `cachedFetchXid`), and whether `SetHintBits` (heapam_visibility.c) may then record it on
    /// the page in `buffer`, whose header is `state`: not while an asynchronous commit's record
    /// is unflushed (`XLogNeedsFlush`) and the page's `pd_lsn` is below the commit's LSN. A page
    /// a later record has changed may take the hint at once: it cannot reach disk before the
    /// WAL up to its own LSN, the commit's record included. Counts `tpcb.clog_lookups`
    /// (commit-log reads) and `tpcb.hints_deferred`.
    fn did_commit_and_may_hint(
        &self,
        t: &mut Txn<'_, K, V, R>,
        xid: u32,
        buffer: Buffer,
        state: &HeapPageState,
    ) -> Result<bool, TxnError> {
        let Some(w) = t.writer.as_mut() else {
            return Err(TxnError::NotWriting);
        };
        if t.s.known_completed != xid {
            t.b.stats.events.count("tpcb.clog_lookups", 1);
            let (_, commit_lsn) = w.w.clog.get_status(t.b, xid)?;
            t.s.known_completed = xid;
            t.s.known_completed_lsn = commit_lsn;
        }
        let lsn = t.s.known_completed_lsn;
        if lsn == 0 || !w.w.wal.needs_flush(t.b, w.wal, lsn)? {
            return Ok(true);
        }
        // BufferGetLSNAtomic: a plain read of pd_lsn without data checksums.
        self.page_read(buffer, PD_LSN);
        if state.lsn.load(Relaxed) >= lsn {
            return Ok(true);
        }
        t.b.stats.events.count("tpcb.hints_deferred", 1);
        Ok(false)
    }

    /// An `UPDATE` of `row` by the transaction (which has its xid): the scan to the row
    /// ([`Self::find_row`], whose pin of the row's page stays), then `heap_update` on the
    /// row's newest version — waiting if another transaction still holds it: its inserter
    /// (the updater of the version before) still running, or a locker that is moving it to
    /// another page (`LockTuple`, then `XactLockTableWait` on that transaction; and, if the row
    /// has moved meanwhile, to its new page, as `EvalPlanQual` follows it) — else looking its
    /// inserter up if it has no hint bit (`HeapTupleSatisfiesUpdate`). Then a HOT update if
    /// its page has room ([`Table::take_line_pointer`]: the new version beside the old, one WAL
    /// record, the page locked exclusively), else a non-HOT update
    /// ([`Self::non_hot_update`]; the model's stand-in in a table whose rows do not move).
    /// Counts `tpcb.row_waits` (waits for another transaction), `tpcb.non_hot` and
    /// `tpcb.pages_added` (pages a non-HOT update added to the table).
    ///
    /// Under the exclusive content lock, each look at the row reads `pd_lower`, its line
    /// pointer and its tuple header, and a hint writes `t_infomask`; the update writes the old
    /// version's `t_xmax` to `t_infomask`, the new version's line pointer and tuple
    /// (`RelationPutHeapTuple`, at the first unused line pointer or the array's end: see
    /// [`Table::add_line_pointer`]), and the header (`pd_lower`, `pd_upper`, `pd_flags`,
    /// `pd_prune_xid`), and after its WAL record `pd_lsn`.
    pub(super) fn update_row(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
    ) -> Result<(), TxnError> {
        let xid = t.xid;
        let found = self.find_row(t, table, row)?;
        let rel = (DATABASE, table.relid);
        if self.refetch_updated_row {
            self.fetch_tid(t, table, table.newest(row))?;
        }
        if !t.s.oldest_member_set {
            // heap_update's MultiXactIdSetOldestMember, once per transaction.
            self.multixact_gen.acquire(t.b, LwLockMode::Shared)?;
            self.multixact_gen.release(t.b)?;
            t.s.oldest_member_set = true;
        }
        let mut tuple_locked = None;
        // heap_update reads the page again (a pin the backend holds already, but a
        // mapping-table lookup all the same) and locks it exclusively; it lets the lock go
        // while it waits for another transaction, and takes it again after, keeping its pin.
        let mut block = table.newest(row).0;
        let mut buffer = self.read_buffer_of(t, table, block)?;
        let old_lp = loop {
            self.buffers
                .lock_buffer(t.b, buffer, LwLockMode::Exclusive)?;
            let (now, lp) = table.newest(row);
            if now != block {
                // Moved to another page by the transaction waited for.
                self.unlock_release(t, buffer)?;
                block = now;
                buffer = self.read_buffer_of(t, table, block)?;
                continue;
            }
            let page = table.heap_page(block);
            let state = &table.page_state[block as usize];
            let old = table.tuple(block, lp);
            let at = page.at(lp).start;
            self.page_read(buffer, PD_LOWER_UPPER);
            self.page_read(buffer, item_id(lp));
            self.page_read(buffer, at..at + SIZEOF_HEAP_TUPLE_HEADER);
            let xmin = old.xmin.load(Acquire);
            let inserter = xmin & !COMMITTED;
            // TransactionIdDidCommit, then SetHintBits: the next reader need not ask, unless
            // the inserter's asynchronous commit is unflushed and the page's LSN is below it.
            let inserted = xmin == LOADED
                || xmin & COMMITTED != 0
                || inserter == xid
                || self.hint_if_ended(t, &old.xmin, inserter, buffer, state, at)?;
            let holder = if inserted {
                // A newest version's updater is a locker that has let the page go to find
                // room elsewhere (a non-HOT update under way).
                match old.xmax.load(Acquire) & !COMMITTED {
                    INVALID_TRANSACTION_ID => break lp,
                    locker if locker == xid => break lp,
                    locker => locker,
                }
            } else {
                inserter
            };
            let recent_xmin = t.s.snapshot.xmin;
            t.b.stats.events.count("tpcb.row_waits", 1);
            self.buffers.unlock_buffer(t.b, buffer)?;
            if tuple_locked.is_none() {
                let none = LockTimeouts::default();
                let mode = LockMode::Exclusive;
                self.locks
                    .lock_tuple(t.b, t.local, rel, (block, lp), mode, &none)?;
                tuple_locked = Some((block, lp));
            }
            self.locks.xact_lock_table_wait(
                t.b,
                t.local,
                holder,
                &LockTimeouts::default(),
                |b, x| {
                    Ok::<_, TxnError>(self.procs.transaction_id_is_in_progress(
                        b,
                        x,
                        recent_xmin,
                        0,
                    )?)
                },
                |x| Ok(self.procs.sub_trans_get_topmost(x)?),
            )?;
        };
        let page = table.heap_page(block);
        let state = &table.page_state[block as usize];
        // The old version's xmax and HOT flags.
        let old_at = page.at(old_lp).start;
        self.page_write(
            buffer,
            old_at + T_XMAX_TO_INFOMASK.start..old_at + T_XMAX_TO_INFOMASK.end,
        );
        let (lp, looked) = table.take_line_pointer(block, state);
        self.page_read(buffer, item_ids(looked));
        // A non-HOT update's entry in the key comes after the tuple lock is given back.
        let new_entry = match lp {
            None if table.moves => {
                let old_root = table.root(row);
                self.non_hot_update(t, table, row, (buffer, block, old_lp))?;
                Some(old_root)
            }
            lp => {
                match lp {
                    Some(lp) => {
                        table.put_hot((block, old_lp), lp, row, state, xid);
                        self.page_write(buffer, item_id(lp));
                        self.page_write(buffer, page.at(lp));
                    }
                    None => {
                        // The model's stand-in in a table whose rows do not move (see the
                        // module's differences): the version in the old one's place.
                        table.put_in_place((block, old_lp), state, xid);
                        t.b.stats.events.count("tpcb.non_hot", 1);
                        self.page_write(buffer, page.at(old_lp));
                    }
                }
                self.page_write(buffer, PAGE_HEADER);
                // The record is written with the page still locked, and its LSN set on the
                // page.
                let end = t.log(xid, RM_HEAP_ID, XLOG_HEAP_HOT_UPDATE, &HEAP_UPDATE_PAYLOAD)?;
                state.lsn.store(end, Relaxed);
                self.page_write(buffer, PD_LSN);
                self.unlock_release(t, buffer)?;
                None
            }
        };
        if let Some(tid) = tuple_locked {
            self.locks
                .unlock_tuple(t.b, t.local, rel, tid, LockMode::Exclusive)?;
        }
        if let Some(old_root) = new_entry {
            // ExecInsertIndexTuples: the key's new entry.
            self.index_insert_unique(t, table, row, old_root)?;
        }
        self.done_with_row(t, table, found)
    }

    /// `ReadBuffer` of heap page `block` of `table`, pinned, not locked.
    fn read_buffer_of(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        block: u32,
    ) -> Result<Buffer, TxnError> {
        let tag = BufferTag::main(DATABASE, table.relid, block);
        Ok(self.buffers.read_buffer(t.b, &mut t.s.pins, tag)?)
    }

    /// `heap_update` when the new version does not fit on the old one's page (`buffer`,
    /// block `block`, locked exclusively and pinned; the version at line pointer `old`): the
    /// old version is first marked locked by this transaction (its `t_xmax`, lock-only, and
    /// an `XLOG_HEAP_LOCK` record), so that no other updater takes it while the page is let
    /// go; then the page unlocked, a page with room found and both locked
    /// ([`Self::page_for_version`]); the version put there as the root of a new chain and the
    /// old one's chain ended ([`Table::move_version`]), the old page marked full; one
    /// `XLOG_HEAP_UPDATE` record, both pages' `pd_lsn` set; both unlocked and released.
    fn non_hot_update(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
        (buffer, block, old): (Buffer, u32, u16),
    ) -> Result<(), TxnError> {
        let xid = t.xid;
        let state = &table.page_state[block as usize];
        let page = table.heap_page(block);
        let old_at = page.at(old).start;
        table.tuple(block, old).xmax.store(xid, Relaxed);
        let end = t.log(xid, RM_HEAP_ID, XLOG_HEAP_LOCK, &HEAP_LOCK_PAYLOAD)?;
        state.lsn.store(end, Relaxed);
        self.page_write(buffer, PD_LSN);
        self.buffers.unlock_buffer(t.b, buffer)?;
        let (to_buffer, to, lp) = self.page_for_version(t, table, (buffer, block))?;
        let to_state = &table.page_state[to as usize];
        table.move_version((block, old), state, (to, lp), to_state, row, xid);
        t.b.stats.events.count("tpcb.non_hot", 1);
        // The old version's xmax, infomask and t_ctid; the new one's line pointer and tuple;
        // both headers.
        self.page_write(buffer, old_at..old_at + SIZEOF_HEAP_TUPLE_HEADER);
        self.page_write(buffer, PAGE_HEADER);
        let to_page = table.heap_page(to);
        self.page_write(to_buffer, item_id(lp));
        self.page_write(to_buffer, to_page.at(lp));
        self.page_write(to_buffer, PAGE_HEADER);
        let end = t.log(xid, RM_HEAP_ID, XLOG_HEAP_UPDATE, &HEAP_UPDATE_PAYLOAD)?;
        state.lsn.store(end, Relaxed);
        to_state.lsn.store(end, Relaxed);
        self.page_write(buffer, PD_LSN);
        self.page_write(to_buffer, PD_LSN);
        self.unlock_release(t, to_buffer)?;
        self.unlock_release(t, buffer)
    }

    /// Models hio.c's `RelationGetBufferForTuple` for a version leaving page `block`
    /// (`buffer`, pinned, unlocked), as 15 does it: the backend's target page for the table
    /// (`RelationGetTargetBlock`), or else its last page, if that is not the old page and has
    /// room, both locked exclusively, the lower block first; else a page added at the table's
    /// end under the relation extension lock (`LockRelationForExtension`), locked before any
    /// other backend can see it and initialized (`PageInit`), the extension lock given back,
    /// then the old page locked — at once if it is free (`ConditionalLockBuffer`), else, to
    /// keep the lower-block-first order, after letting the new page go and taking both again,
    /// starting over if another backend has filled the new page meanwhile. The page found
    /// becomes the backend's target. Returns the page's buffer and block and the new version's
    /// line pointer, both pages locked.
    ///
    /// The free-space map is not modelled: only VACUUM fills it, and the model runs none
    /// (a backend's first search would find the old page there, as the run's opening
    /// `VACUUM` recorded it, and move on). Nor is the extension by several pages that a
    /// backend makes after waiting for the extension lock (`RelationAddExtraBlocks`): the
    /// model adds one page at a time.
    fn page_for_version(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        (buffer, block): (Buffer, u32),
    ) -> Result<(Buffer, u32, u16), TxnError> {
        loop {
            let target = t.s.heap_target(table.relid);
            let candidate = target.unwrap_or_else(|| table.pages() - 1);
            if candidate != block {
                let other = self.read_buffer_of(t, table, candidate)?;
                let (first, second) = if candidate < block {
                    (other, buffer)
                } else {
                    (buffer, other)
                };
                self.buffers
                    .lock_buffer(t.b, first, LwLockMode::Exclusive)?;
                self.buffers
                    .lock_buffer(t.b, second, LwLockMode::Exclusive)?;
                self.page_read(other, PD_LOWER_UPPER);
                let state = &table.page_state[candidate as usize];
                if let (Some(lp), looked) = table.take_line_pointer(candidate, state) {
                    self.page_read(other, item_ids(looked));
                    t.s.set_heap_target(table.relid, candidate);
                    return Ok((other, candidate, lp));
                }
                self.buffers.unlock_buffer(t.b, second)?;
                self.buffers.unlock_buffer(t.b, first)?;
                self.buffers.release_buffer(t.b, &mut t.s.pins, other)?;
            }
            let (other, new) = self.add_page(t, table)?;
            t.s.set_heap_target(table.relid, new);
            if !self.buffers.conditional_lock_buffer(t.b, buffer)? {
                self.buffers.unlock_buffer(t.b, other)?;
                self.buffers
                    .lock_buffer(t.b, buffer, LwLockMode::Exclusive)?;
                self.buffers
                    .lock_buffer(t.b, other, LwLockMode::Exclusive)?;
            }
            self.page_read(other, PD_LOWER_UPPER);
            let state = &table.page_state[new as usize];
            if let (Some(lp), looked) = table.take_line_pointer(new, state) {
                self.page_read(other, item_ids(looked));
                return Ok((other, new, lp));
            }
            self.buffers.unlock_buffer(t.b, buffer)?;
            self.unlock_release(t, other)?;
        }
    }

    /// A page added at `table`'s end under its relation extension lock: read in (`P_NEW`)
    /// and locked exclusively before the table's size counts it, the lock given back, the
    /// page initialized (`PageInit`: its header written). Returns it, locked, and its block.
    /// Counts `tpcb.pages_added`.
    fn add_page(&self, t: &mut Txn<'_, K, V, R>, table: &Table) -> Result<(Buffer, u32), TxnError> {
        let extend = LockTag::relation_extend(DATABASE, table.relid);
        let owner = LockOwner::Transaction;
        self.lock(t, extend, LockMode::Exclusive)?;
        let Some(new) = table.next_block() else {
            self.locks
                .release(t.b, t.local, extend, LockMode::Exclusive, owner)?;
            return Err(TxnError::TableFull {
                table: table.name,
                pages: table.pages(),
            });
        };
        let buffer = self.read_locked(t, table.relid, new, LwLockMode::Exclusive)?;
        table.add_block(new);
        self.locks
            .release(t.b, t.local, extend, LockMode::Exclusive, owner)?;
        self.page_write(buffer, PAGE_HEADER);
        t.b.stats.events.count("tpcb.pages_added", 1);
        Ok((buffer, new))
    }

    /// `_bt_doinsert` of `row`'s key into `table`'s primary key after a non-HOT update, with
    /// the unique check (`UNIQUE_CHECK_YES`): the descent from the root, each inner page
    /// locked shared and the leaf exclusively (`_bt_search` with `BT_WRITE`); on the leaf,
    /// `_bt_check_unique` reads the key's entry and fetches the heap tuple it points to, the
    /// root of the row's chain before the update, `old_root` (`table_index_fetch_tuple_check`
    /// with a dirty snapshot; the model fetches that one, the entry of the row's last move,
    /// not every older entry of the key that VACUUM has not yet removed), with the leaf
    /// locked; then `_bt_insertonpg`'s `PageAddItem` after it (the line pointers after it
    /// shifted), `pd_lower` and `pd_upper`, the WAL record and `pd_lsn`. The leaf's items stay
    /// as the build made them (page splits are not modelled).
    fn index_insert_unique(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
        old_root: (u32, u16),
    ) -> Result<(), TxnError> {
        let xid = t.xid;
        let (block, page, item) = self.btree_descend(t, table, row)?;
        let leaf = self.read_locked(t, table.pkey, block, LwLockMode::Exclusive)?;
        self.btree_search_page(leaf, &page, item);
        self.btree_item_read(leaf, &page, item, INDEX_TUPLE_TID);
        self.fetch_tid(t, table, old_root)?;
        let grown = BtPage {
            items: page.items + 1,
            ..page
        };
        self.page_write(
            leaf,
            item_id(item + 1).start..item_ids(grown.max_offset()).end,
        );
        self.page_write(leaf, grown.tuple(grown.max_offset()));
        self.page_write(leaf, PD_LOWER_UPPER);
        t.log(xid, RM_BTREE_ID, 0, &BTREE_INSERT_PAYLOAD)?;
        self.page_write(leaf, PD_LSN);
        self.unlock_release(t, leaf)
    }

    /// The heap insert into the append table and its WAL record: the backend's target page,
    /// or a new one read in (`P_NEW`) under the relation extension lock and kept for the
    /// insert, as PostgreSQL keeps it pinned: one read of the page per insert either way.
    ///
    /// `RelationPutHeapTuple` writes the row's line pointer and tuple, below the page's rows so
    /// far (see `page`), and `PageAddItem` the header's `pd_lower` and `pd_upper`; a new page
    /// is first `PageInit`ed (its header written; the zeroing of the rest is not charged), and
    /// after the WAL record `pd_lsn` is set.
    pub(super) fn heap_insert(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        let xid = t.xid;
        let table = &t.writes()?.append;
        let (buffer, row) = match t.s.target {
            Some((block, rows)) if rows < table.rows_per_page => {
                t.s.target = Some((block, rows + 1));
                let buffer = self.read_locked(t, table.relid, block, LwLockMode::Exclusive)?;
                (buffer, rows + 1)
            }
            _ => {
                let extend = LockTag::relation_extend(DATABASE, table.relid);
                self.lock(t, extend, LockMode::Exclusive)?;
                let block = table.pages.fetch_add(1, Relaxed);
                let buffer = self.read_locked(t, table.relid, block, LwLockMode::Exclusive)?;
                let owner = LockOwner::Transaction;
                self.locks
                    .release(t.b, t.local, extend, LockMode::Exclusive, owner)?;
                t.s.target = Some((block, 1));
                self.page_write(buffer, PAGE_HEADER);
                (buffer, 1)
            }
        };
        // The tuple goes in and its record is written with the page locked exclusively.
        let page = HeapPage {
            rows: 0,
            len: table.tuple_len,
        };
        let (lp, tuple) = page.free_tuple(row as u16);
        self.page_read(buffer, PD_LOWER_UPPER);
        self.page_write(buffer, item_id(lp));
        self.page_write(buffer, tuple);
        self.page_write(buffer, PD_LOWER_UPPER);
        t.log(xid, RM_HEAP_ID, 0, &HEAP_INSERT_PAYLOAD)?;
        self.page_write(buffer, PD_LSN);
        self.unlock_release(t, buffer)
    }

    /// The B-tree insertion of a serial key, always at the rightmost leaf (`_bt_doinsert`):
    /// from 11, with a tree of three levels or more, the fast path (`_bt_search_insert`: the cached
    /// rightmost leaf, `ConditionalLockBuffer`; if that fails the model locks it exclusively
    /// anyway instead of descending); below that, the descent from the root, each inner page
    /// shared, the leaf exclusive. The tree's height follows the rows inserted so far; page
    /// splits are not modelled (the leaf stays block 1, the inner pages blocks 2 and up).
    ///
    /// The pages are read as a search reads them (`_bt_search`, shaped as `CREATE INDEX` would
    /// have built the tree's rightmost path: see `page`); the fast path instead reads the
    /// leaf's header, special space and first data item (`_bt_search_insert`'s checks). The
    /// rightmost leaf is taken to hold `rows % 367` keys, as if split at every 367 (a serial
    /// key's splits leave the right page nearly empty). Then `_bt_binsrch_insert` on the leaf,
    /// and `_bt_insertonpg`'s `PageAddItem` at its end (no line pointer to shift for a key
    /// greater than all): the new line pointer and tuple, `pd_lower` and `pd_upper`, and after
    /// the WAL record `pd_lsn`.
    pub(super) fn serial_index_insert(&self, t: &mut Txn<'_, K, V, R>) -> Result<(), TxnError> {
        let xid = t.xid;
        let append = &t.writes()?.append;
        let rows = u64::from(append.pages.load(Relaxed)) * u64::from(append.rows_per_page);
        let index = btree_levels(rows.max(1));
        let levels = index.len();
        let leaf_page = BtPage {
            leaf: true,
            rightmost: true,
            items: (rows % KEYS_PER_INDEX_PAGE) as u16,
        };
        let leaf = if self.btree_rightmost_fastpath && levels > BTREE_FASTPATH_MIN_LEVEL {
            let tag = BufferTag::main(DATABASE, INSERTS_PKEY, 1);
            let leaf = self.buffers.read_buffer(t.b, &mut t.s.pins, tag)?;
            if !self.buffers.conditional_lock_buffer(t.b, leaf)? {
                self.buffers.lock_buffer(t.b, leaf, LwLockMode::Exclusive)?;
            }
            self.page_read(leaf, BtPage::OPAQUE);
            self.page_read(leaf, PD_LOWER_TO_VERSION);
            if leaf_page.items > 0 {
                self.btree_item_read(leaf, &leaf_page, 1, INDEX_TUPLE_KEY);
            }
            leaf
        } else {
            for level in (1..levels).rev() {
                let (_, page, item) = btree_page(&index, rows.max(1), level, rows.max(1) - 1);
                let buffer =
                    self.read_locked(t, INSERTS_PKEY, 1 + level as u32, LwLockMode::Shared)?;
                self.btree_search_page(buffer, &page, item);
                self.unlock_release(t, buffer)?;
            }
            let leaf = self.read_locked(t, INSERTS_PKEY, 1, LwLockMode::Exclusive)?;
            self.page_read(leaf, PD_LOWER_TO_VERSION);
            self.page_read(leaf, BtPage::OPAQUE);
            leaf
        };
        // _bt_binsrch_insert: the new key is greater than every item.
        let new_off = leaf_page.max_offset() + 1;
        for off in leaf_page.probes(new_off) {
            self.btree_item_read(leaf, &leaf_page, off, INDEX_TUPLE_KEY);
        }
        let grown = BtPage {
            items: leaf_page.items + 1,
            ..leaf_page
        };
        self.page_write(leaf, item_id(new_off));
        self.page_write(leaf, grown.tuple(new_off));
        self.page_write(leaf, PD_LOWER_UPPER);
        t.log(xid, RM_BTREE_ID, 0, &BTREE_INSERT_PAYLOAD)?;
        self.page_write(leaf, PD_LSN);
        self.unlock_release(t, leaf)
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::BRANCHES;
    use super::super::{build, Kind};
    use crate::preset::Preset;
    use pglocks_bufmgr::BufferTag;
    use pglocks_lwlock::{AtomicLwLock, LockedVar, Pad128, Pg18Layout};
    use pglocks_spin::PgSpinLock;
    use std::sync::atomic::Ordering::Relaxed;

    /// `txns` `tpcb-like` transactions at scale 1 (one branch, on page 0 of
    /// `pgbench_branches`) on one backend, while another connection holds a pin of that page
    /// for the first `pinned` of them, as a backend waiting on the branch's row does; then
    /// `pgbench_branches`' pages, the page holding the branch's newest version, whether page
    /// 0 is marked full (a version did not fit and no prune has run since), and
    /// `pgbench_tellers`' pages.
    fn branches_after(txns: usize, pinned: usize) -> (u32, u32, bool, u32) {
        let mut settings = Preset::by_name("pg15").unwrap().settings();
        settings.flush_device = crate::FlushDeviceKind::Null;
        let (cluster, mut sessions, procs) = build::<
            AtomicLwLock<Pg18Layout>,
            PgSpinLock,
            Pad128,
            LockedVar,
        >(&settings, Kind::TpcbLike, 2, 1)
        .unwrap();
        let mut other = sessions.pop().unwrap();
        let mut s = sessions.pop().unwrap();
        let (mut b, mut waiter) = (procs.attach().unwrap(), procs.attach().unwrap());
        let tag = BufferTag::main(super::DATABASE, BRANCHES, 0);
        let pin = cluster
            .buffers
            .read_buffer(&mut waiter, &mut other.pins, tag)
            .unwrap();
        for i in 0..txns {
            if i == pinned {
                let pins = &mut other.pins;
                cluster
                    .buffers
                    .release_buffer(&mut waiter, pins, pin)
                    .unwrap();
            }
            cluster.transaction(&mut b, &mut s, Kind::TpcbLike).unwrap();
        }
        let branches = &cluster.branches;
        let full = branches.page_state[0].full.load(Relaxed);
        let pages = |t: &super::Table| t.nblocks.load(Relaxed);
        (
            pages(branches),
            branches.newest(0).0,
            full,
            pages(&cluster.tellers),
        )
    }

    #[test]
    fn a_page_another_backend_keeps_pinned_is_not_pruned_and_its_rows_move() {
        // Unpinned, the branch page is pruned whenever it runs short of room: it never grows
        // (nor does the tellers' page, which nobody pins).
        assert_eq!(branches_after(400, 0), (1, 0, false, 1));
        // Pinned by another backend, it fills up (about 184 versions of its one row), and the
        // next version goes to a new page, where the later ones are HOT updates; the old page
        // stays full.
        assert_eq!(branches_after(400, 400), (2, 1, true, 1));
        // Once the pin is gone, the next scan prunes the old page; the table keeps its size.
        assert_eq!(branches_after(400, 300), (2, 1, false, 1));
    }
}
