//! The heap and index access of pgbench's statements: what heapam.c, pruneheap.c,
//! heapam_visibility.c and the B-tree code (nbtsearch.c, nbtinsert.c) do for them on the
//! tables of `super::schema`, each page under its content lock (`LockBuffer`: shared to read,
//! exclusive to change).
//!
//! - A row read by key (`fetch_row`): the index scan's descent from the root to the leaf
//!   holding the key, then the row's heap page; a table the plan scans whole has each of its
//!   pages read instead.
//! - A heap page visited (`heap_page`): pruneheap.c's `heap_page_prune_opt` first (`prune_opt`:
//!   once a page holds more dead versions than its room and the oldest was left by a
//!   transaction every snapshot sees as ended, its dead versions go, if its content lock can be
//!   had at once), then the page read under its content lock shared; a sequential scan checks
//!   every tuple's visibility meanwhile (`hint_page`: heapam_visibility.c's
//!   `HeapTupleSatisfiesMVCC`), so an ended updater's commit is looked up and hinted
//!   (`did_commit_and_may_hint`: transam.c's `TransactionIdDidCommit` with its
//!   `cachedFetchXid`, then `SetHintBits`).
//! - A row updated (`update_row`: heapam.c's `heap_update`, and the executor's `EvalPlanQual`),
//!   for a row whose newest version has `xmax`: if that xmax carries no hint bit,
//!   `HeapTupleSatisfiesUpdate` asks `TransactionIdIsInProgress` (the ProcArray under
//!   ProcArrayLock shared); a running updater is waited for — the tuple lock (`LockTuple`,
//!   `ExclusiveLock`), then `XactLockTableWait` on its xid — and an ended one's status is read
//!   from the commit log (`TransactionIdDidCommit`) and the hint bit set, so the next backend
//!   does not ask again; but not while the updater's asynchronous commit is unflushed
//!   (`SetHintBits` asks `XLogNeedsFlush`) and no later record has changed the page (its
//!   `pd_lsn` is below the commit's), so until one of them has, every backend that meets the
//!   row asks the commit log again. Then the newest version is updated:
//!   its xmax becomes this transaction's xid, the old version is left dead on its page, and
//!   the HOT update's WAL record is written with the page locked exclusively.
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
//! - A row's versions are one word (the newest version's xmax and its hint bit) under one tuple
//!   tag: every update is taken to be HOT, so the non-HOT update of a page full since
//!   `pgbench -i` (the visibility map, a new heap page, the key's new entry) and full-page
//!   images are not modelled. Page splits and the free-space map are not modelled either.
//! - A page is pruned (`heap_page_prune_opt`) at a visit once it holds more dead versions than
//!   its room; `pgbench_accounts`' pages, filled at load, have none, so the model prunes at
//!   nearly every visit after an update, where PostgreSQL 15 in its steady state prunes about
//!   one in four (its pages gained room from the rows that moved out). `heap_page_prune_opt`'s
//!   sole-pin test (`ConditionalLockBufferForCleanup`) is not modelled.
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
    btree_levels, btree_page, HeapPageState, Table, DATABASE, INSERTS_PKEY, KEYS_PER_INDEX_PAGE,
    XMAX_COMMITTED,
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
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

/// WAL payload of a HOT update: `xl_heap_update`, `xl_heap_header` and the new row's changed
/// bytes.
const HEAP_UPDATE_PAYLOAD: [u8; 64] = [0x55; 64];
/// heapam_xlog.h's `XLOG_HEAP_HOT_UPDATE`.
const XLOG_HEAP_HOT_UPDATE: u8 = 0x40;
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
        self.page_read(buffer, page.tuple(lp));
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

    /// An index scan for one key: the descent from the root to the leaf holding `row`, each
    /// page under its content lock shared (`_bt_getroot`, then `_bt_relandgetbuf` level by
    /// level: the parent unlocked and released before the child is read and locked; the leaf
    /// given up once read, `_bt_drop_lock_and_maybe_pin` under an MVCC snapshot), then its
    /// heap page, locked shared while the tuple is found (`heapam_index_fetch_tuple`). In a
    /// transaction that writes, the heap pages read may be pruned and hinted (`heap_page`).
    pub(super) fn fetch_row(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
    ) -> Result<(), TxnError> {
        if table.seq_scan {
            // Every page, each under its content lock shared while its tuples are checked
            // (`heapgetpage`): the scan does not know the key is unique.
            for block in 0..table.pages() {
                self.heap_page(t, table, block, None)?;
            }
            return Ok(());
        }
        for level in (0..table.index.len()).rev() {
            let (block, page, item) = btree_page(&table.index, table.rows, level, row);
            let buffer = self.read_locked(t, table.pkey, block, LwLockMode::Shared)?;
            self.btree_search_page(buffer, &page, item);
            if page.leaf {
                self.btree_read_leaf(buffer, &page, item);
            }
            self.unlock_release(t, buffer)?;
        }
        let (block, lp) = table.tid(row);
        self.heap_page(t, table, block, Some(lp))
    }

    /// A heap page a scan moves to: `heap_page_prune_opt` first (below), then read under its
    /// content lock shared: by an index scan, the row at line pointer `lp`
    /// (`heap_hot_search_buffer`); by a sequential scan (`lp` none), every tuple's line pointer
    /// and header, whose visibility `heapgetpage` checks, and the key the qual compares — a walk
    /// whose loads do not wait on each other. Only a transaction that writes prunes and hints
    /// (the model's prune and hint need its WAL and commit log).
    fn heap_page(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        block: u32,
        lp: Option<u16>,
    ) -> Result<(), TxnError> {
        let tag = BufferTag::main(DATABASE, table.relid, block);
        let buffer = self.buffers.read_buffer(t.b, &mut t.s.pins, tag)?;
        let page = table.heap_page(block);
        let writes = t.writer.is_some();
        if let (true, Some(state)) = (writes, table.page_state.get(block as usize)) {
            self.prune_opt(t, buffer, &page, state, table.room)?;
        }
        self.buffers.lock_buffer(t.b, buffer, LwLockMode::Shared)?;
        match lp {
            Some(lp) => self.heap_fetch_read(buffer, &page, lp),
            None => independent(|| {
                self.page_read(buffer, PD_LOWER_UPPER);
                for lp in 1..=page.rows {
                    self.page_read(buffer, item_id(lp));
                    let tuple = page.tuple(lp);
                    // The header, and the first column of the data (the key the qual tests).
                    self.page_read(buffer, tuple.start..tuple.start + T_HOFF + 4);
                }
            }),
        }
        if table.seq_scan && writes {
            self.hint_page(t, table, block, buffer)?;
        }
        self.unlock_release(t, buffer)
    }

    /// Models `heap_page_prune_opt`: a page holding more dead versions than its room, the
    /// oldest left by a transaction every snapshot now sees as ended (`pd_prune_xid` below
    /// this backend's snapshot's xmin, the `GlobalVisState` test), is pruned if its content
    /// lock can be had exclusively at once (`ConditionalLockBufferForCleanup`; the sole-pin
    /// test is not modelled): its dead versions go, and a `XLOG_HEAP2_PRUNE` record says so.
    ///
    /// A prune writes the page header (`pd_prune_xid`, `pd_flags`, then `pd_lsn`) and the
    /// line pointer array (the chains' redirects and the dead items), having read them.
    fn prune_opt(
        &self,
        t: &mut Txn<'_, K, V, R>,
        buffer: Buffer,
        page: &HeapPage,
        state: &HeapPageState,
        room: u32,
    ) -> Result<(), TxnError> {
        let HeapPageState {
            dead,
            prune_xid,
            lsn,
        } = state;
        let xid = prune_xid.load(Relaxed);
        if dead.load(Relaxed) <= room || xid == INVALID_TRANSACTION_ID || xid >= t.s.snapshot.xmin {
            return Ok(());
        }
        if !self.buffers.conditional_lock_buffer(t.b, buffer)? {
            return Ok(());
        }
        let versions = dead.load(Relaxed);
        if versions > room && prune_xid.load(Relaxed) == xid {
            let lps = item_ids(page.rows.saturating_add(versions as u16));
            self.page_read(buffer, PAGE_HEADER);
            self.page_read(buffer, lps.clone());
            dead.store(0, Relaxed);
            prune_xid.store(INVALID_TRANSACTION_ID, Relaxed);
            self.page_write(buffer, lps);
            self.page_write(buffer, PAGE_HEADER);
            let end = t.log(
                INVALID_TRANSACTION_ID,
                RM_HEAP2_ID,
                XLOG_HEAP2_PRUNE,
                &HEAP_PRUNE_PAYLOAD,
            )?;
            lsn.store(end, Relaxed);
            self.page_write(buffer, PD_LSN);
            t.b.stats.events.count("tpcb.prunes", 1);
        }
        self.buffers.unlock_buffer(t.b, buffer)?;
        Ok(())
    }

    /// A sequential scan's visibility checks of one page (`heapgetpage` →
    /// `HeapTupleSatisfiesMVCC` for every tuple, under the page's content lock shared): a row
    /// whose last updater has ended but carries no hint bit is looked up
    /// ([`Self::did_commit_and_may_hint`]) and hinted, so the page's rows are hinted once by
    /// the first scan after each update; an updater the snapshot still sees running is left.
    ///
    /// A hint is a write of the tuple's `t_infomask` (under the shared content lock, as
    /// `SetHintBits` does).
    fn hint_page(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        block: u32,
        buffer: Buffer,
    ) -> Result<(), TxnError> {
        let page = table.heap_page(block);
        let Some(state) = table.page_state.get(block as usize) else {
            return Ok(());
        };
        let first = u64::from(block) * table.rows_per_page;
        let last = (first + table.rows_per_page).min(table.xmax.len() as u64);
        for row in first..last {
            let word = &table.xmax[row as usize];
            let seen = word.load(Acquire);
            let xid = seen & !XMAX_COMMITTED;
            if xid == INVALID_TRANSACTION_ID || seen & XMAX_COMMITTED != 0 {
                continue;
            }
            let snapshot = &t.s.snapshot;
            if xid >= snapshot.xmin && (xid >= snapshot.xmax || snapshot.xip.contains(&xid)) {
                continue;
            }
            if self.did_commit_and_may_hint(t, xid, buffer, state)? {
                let _ = word.compare_exchange(seen, xid | XMAX_COMMITTED, Relaxed, Relaxed);
                let tuple = page.tuple((row - first) as u16 + 1).start;
                self.page_write(buffer, tuple + T_INFOMASK.start..tuple + T_INFOMASK.end);
            }
        }
        Ok(())
    }

    /// `TransactionIdDidCommit` of an ended `xid` (the commit log, unless it is transam.c's
    /// `cachedFetchXid`), and whether `SetHintBits` (heapam_visibility.c) may then record it on
    /// the page in `buffer`, whose header is `state`: not while an asynchronous commit's record
    /// is unflushed (`XLogNeedsFlush`) and the page's `pd_lsn` is below the commit's LSN. A page
    /// a later record has changed may take the hint at once: it cannot reach disk before the
    /// WAL up to its own LSN, the commit's record included. Counts `tpcb.xmax_lookups`
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
            t.b.stats.events.count("tpcb.xmax_lookups", 1);
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

    /// An `UPDATE` of `row` by the transaction (which has its xid): the index scan, then `heap_update` on the
    /// row's newest version — waiting for a running updater (`LockTuple`, then
    /// `XactLockTableWait`), hinting an ended one — and the HOT update's WAL record. Counts
    /// `tpcb.row_waits` (waits for an updater) and `tpcb.xmax_lookups` (commit-log lookups of
    /// an unhinted xmax).
    ///
    /// Under the exclusive content lock, each look at the row reads `pd_lower`, its line
    /// pointer and its tuple header (`HeapTupleSatisfiesUpdate`), and a hint writes
    /// `t_infomask`; the update writes the old version's `t_xmax` to `t_infomask`, the new
    /// version's line pointer and tuple (`RelationPutHeapTuple`, at the page's free space: see
    /// `page`), and the header (`pd_lower`, `pd_upper`, `pd_flags`, `pd_prune_xid`), and after
    /// its WAL record `pd_lsn`.
    pub(super) fn update_row(
        &self,
        t: &mut Txn<'_, K, V, R>,
        table: &Table,
        row: u64,
    ) -> Result<(), TxnError> {
        let xid = t.xid;
        self.fetch_row(t, table, row)?;
        let rel = (DATABASE, table.relid);
        let tid = table.tid(row);
        if self.refetch_updated_row {
            self.fetch_tid(t, table, tid)?;
        }
        if !t.s.oldest_member_set {
            // heap_update's MultiXactIdSetOldestMember, once per transaction.
            self.multixact_gen.acquire(t.b, LwLockMode::Shared)?;
            self.multixact_gen.release(t.b)?;
            t.s.oldest_member_set = true;
        }
        let xmax_word = &table.xmax[row as usize];
        let mut tuple_locked = false;
        // heap_update reads the page again (a pin the backend may hold already, but a
        // mapping-table lookup all the same) and locks it exclusively; it lets the lock go
        // while it waits for another updater, and takes it again after.
        let tag = BufferTag::main(DATABASE, table.relid, tid.0);
        let buffer = self.buffers.read_buffer(t.b, &mut t.s.pins, tag)?;
        let page = table.heap_page(tid.0);
        let state = &table.page_state[tid.0 as usize];
        let old = page.tuple(tid.1);
        let mut locked = false;
        loop {
            if !locked {
                self.buffers
                    .lock_buffer(t.b, buffer, LwLockMode::Exclusive)?;
                locked = true;
            }
            self.page_read(buffer, PD_LOWER_UPPER);
            self.page_read(buffer, item_id(tid.1));
            self.page_read(buffer, old.start..old.start + SIZEOF_HEAP_TUPLE_HEADER);
            let word = xmax_word.load(Acquire);
            let xmax = word & !XMAX_COMMITTED;
            if xmax == INVALID_TRANSACTION_ID || word & XMAX_COMMITTED != 0 {
                // The newest version is free: it becomes this transaction's.
                if xmax_word
                    .compare_exchange(word, xid, AcqRel, Acquire)
                    .is_ok()
                {
                    break;
                }
                pglocks_sync::hint::spin_loop();
                continue;
            }
            let recent_xmin = t.s.snapshot.xmin;
            if self.procs.transaction_id_is_in_progress(
                t.b,
                xmax,
                recent_xmin,
                t.s.known_completed,
            )? {
                t.b.stats.events.count("tpcb.row_waits", 1);
                self.buffers.unlock_buffer(t.b, buffer)?;
                locked = false;
                if !tuple_locked {
                    let none = LockTimeouts::default();
                    let mode = LockMode::Exclusive;
                    self.locks.lock_tuple(t.b, t.local, rel, tid, mode, &none)?;
                    tuple_locked = true;
                }
                self.locks.xact_lock_table_wait(
                    t.b,
                    t.local,
                    xmax,
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
            } else {
                // TransactionIdDidCommit, then SetHintBits: the next reader need not ask.
                // An asynchronous commit is hinted only once its record is flushed or the
                // page's LSN has passed it: until then the row is taken unhinted, and the
                // next updater asks again.
                if !self.did_commit_and_may_hint(t, xmax, buffer, state)? {
                    if xmax_word
                        .compare_exchange(word, xid, AcqRel, Acquire)
                        .is_ok()
                    {
                        break;
                    }
                    continue;
                }
                let hinted = xmax | XMAX_COMMITTED;
                let _ = xmax_word.compare_exchange(word, hinted, Relaxed, Relaxed);
                self.page_write(
                    buffer,
                    old.start + T_INFOMASK.start..old.start + T_INFOMASK.end,
                );
            }
        }
        // The old version is dead once this transaction commits: the page's next visitor may
        // prune it (`PageSetPrunable`).
        let versions = state.dead.fetch_add(1, Relaxed);
        if state.prune_xid.load(Relaxed) == INVALID_TRANSACTION_ID {
            state.prune_xid.store(xid, Relaxed);
        }
        // The old version's xmax and HOT flags, the new version beside it, the header.
        self.page_write(
            buffer,
            old.start + T_XMAX_TO_INFOMASK.start..old.start + T_XMAX_TO_INFOMASK.end,
        );
        let (lp, new) = page.free_tuple(versions as u16 + 1);
        self.page_write(buffer, item_id(lp));
        self.page_write(buffer, new);
        self.page_write(buffer, PAGE_HEADER);
        // The record is written with the page still locked, and its LSN set on the page.
        let end = t.log(xid, RM_HEAP_ID, XLOG_HEAP_HOT_UPDATE, &HEAP_UPDATE_PAYLOAD)?;
        state.lsn.store(end, Relaxed);
        self.page_write(buffer, PD_LSN);
        self.unlock_release(t, buffer)?;
        if tuple_locked {
            self.locks
                .unlock_tuple(t.b, t.local, rel, tid, LockMode::Exclusive)?;
        }
        Ok(())
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
