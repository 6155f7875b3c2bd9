//! PostgreSQL's simple LRU buffers (slru.c) and the commit log on top of them (clog.c, in
//! [`clog`]).
//!
//! # The algorithm
//! An SLRU keeps a few 8 KB pages of a large, mostly append-only array (transaction statuses,
//! subtransaction parents, multixact members…) in a fixed set of buffer *slots*. A slot holds a
//! page number, a status — empty, read in progress, valid, write in progress — a dirty flag and
//! an LRU count. Lookups are a linear scan: there are few slots, so no hash table is needed.
//!
//! Up to 16 one *control lock* guards every slot's state; from 17 the slots are split into
//! *banks* of 16, page `p` can only live in bank `p % nbanks`, and each bank has its own lock
//! and LRU counter, so lookups of pages in different banks no longer contend. Holding the bank
//! lock exclusively is needed to change anything; `ReadPage_ReadOnly` looks a page up under the
//! lock in *shared* mode, and only on a miss retakes it exclusively and reads the page in.
//!
//! I/O never happens under the bank lock. To read a page in, a backend picks a slot, marks it
//! read-in-progress, takes the slot's own I/O lock exclusively, releases the bank lock, reads,
//! then retakes the bank lock, marks the slot valid and releases the I/O lock. Whoever finds a
//! slot busy waits for its I/O by releasing the bank lock, taking the I/O lock in shared mode
//! (which waits for the I/O's holder), releasing it and retaking the bank lock, then starts
//! over: anything may have changed meanwhile.
//!
//! The victim for a new page is an empty slot if there is one, else the least recently used
//! valid slot — never the slot of the latest page (it is the one being appended to). Up to 9.1
//! the plain LRU slot was chosen even if it was busy with I/O (and then waited for); from 9.2 a
//! busy slot is chosen only when every other slot is busy too ([`Victim`]). A dirty victim is
//! written out first, and the search starts over.
//!
//! # Differences from PostgreSQL
//! - Backends are explicit [`Backend`] handles; the bank lock a function needs is taken and
//!   released by the caller around it through [`Slru::lock_bank`] / [`Slru::unlock_bank`], as
//!   PostgreSQL's callers do.
//! - Page bytes are relaxed atomics (ordered by the bank and I/O locks), so the buffers need no
//!   `unsafe`; the bytes a backend reads or writes are charged to a simulated CPU as touches of
//!   their lines. The control arrays, the locks and the pages are placed in the simulated
//!   shared-memory map as `SimpleLruInit` lays them out, each array a region of its own (see
//!   [`Slru`]'s layout and the private `Page` type).
//! - An I/O error leaves the slot in a clean state at once (empty after a failed read, valid
//!   and dirty after a failed write), releases the slot's I/O lock, and is then raised, as
//!   `SimpleLruReadPage` and `SlruInternalWritePage` do before `SlruReportIOError`; so
//!   `SimpleLruWaitIO`'s repair of a slot abandoned mid-I/O is not needed. A function that
//!   returns an error holds no bank lock (PostgreSQL's `ERROR` releases every LWLock). Page
//!   I/O faults can be injected with [`FaultyStore`]. The commit log's updates at commit run
//!   in PostgreSQL inside `RecordTransactionCommit`'s critical section, where this `ERROR`
//!   would become a `PANIC`; the model returns the error to the caller.
//! - Writing a page does not first flush WAL up to the page's group LSNs
//!   (`SlruPhysicalWritePage`'s `XLogFlush`): the commit log here has no WAL.
//! - No truncation, no `SimpleLruDoesPhysicalPageExist`, no sync requests.
//! - 8.1–8.4 details are not modelled (an exclusive lock for every lookup, CLEAN/DIRTY page
//!   states): the pg81/pg82 presets use 9.1's SLRU.

pub mod clog;
pub mod faulty;
pub mod store;

pub use faulty::FaultyStore;
pub use pglocks_sync::fault::{Fault, FaultPlan, Faults, IoOp};
pub use store::{FileStore, MemoryStore, PageStore, BLCKSZ, SLRU_PAGES_PER_SEGMENT};

use pglocks_lwlock::{LwLockError, LwLockMode, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, Ordering::*};
use pglocks_sync::data::touch_range;
use pglocks_sync::shmem::{independent, Placed};
use pglocks_sync::time::Instant;
use pglocks_sync::CachePadded;
use std::path::PathBuf;
// Page bytes are data ordered by the locks, so std's atomics even under loom; their touches
// are charged explicitly (see `Page`).
use std::sync::atomic::AtomicU8 as PageByte;
// So are the group LSNs, which only the bank lock's holders read and write.
use std::sync::atomic::AtomicU64 as LsnWord;

/// `SLRU_BANK_SIZE` (17+): slots per bank.
pub const SLRU_BANK_SIZE: usize = 16;

/// Slot states (`SlruPageStatus`).
pub mod page_status {
    /// `SLRU_PAGE_EMPTY`: the slot holds no page.
    pub const EMPTY: u8 = 0;
    /// `SLRU_PAGE_READ_IN_PROGRESS`: being read in.
    pub const READ_IN_PROGRESS: u8 = 1;
    /// `SLRU_PAGE_VALID`: holds a page.
    pub const VALID: u8 = 2;
    /// `SLRU_PAGE_WRITE_IN_PROGRESS`: holds a page that is being written out.
    pub const WRITE_IN_PROGRESS: u8 = 3;
}
use page_status::*;

/// How a victim slot is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victim {
    /// ≤ 9.1: the least recently used slot, even if busy with I/O (then waited for).
    PlainLru,
    /// 9.2+: the least recently used *valid* slot; an I/O-busy one only if all are busy.
    AvoidIoBusy,
}

/// The shape of one SLRU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlruConfig {
    /// Buffer slots (`NUM_CLOG_BUFFERS` / `transaction_buffers`).
    pub slots: usize,
    /// 17+: banks of [`SLRU_BANK_SIZE`] slots, each with its own lock; else one control lock.
    pub banks: bool,
    /// Victim rule.
    pub victim: Victim,
    /// Tranche name of the bank (control) locks, e.g. `XactSLRU`.
    pub lock_name: &'static str,
    /// Tranche name of the per-slot I/O locks, e.g. `XactBuffer`.
    pub buffer_lock_name: &'static str,
    /// `nlsns` of `SimpleLruInit`: LSNs kept per page (the commit log's groups), zeroed
    /// whenever a page is read in or zeroed.
    pub lsn_groups_per_page: usize,
}

impl SlruConfig {
    /// Checks the shape.
    pub fn validate(&self) -> Result<(), SlruError> {
        let bad = |m: String| Err(SlruError::Config(m));
        if self.slots < 2 || self.slots > 131_072 {
            // One slot always holds the latest page, so a bank needs another to read into.
            return bad(format!(
                "buffer slots must be 2 to 131072, not {}",
                self.slots
            ));
        }
        if self.banks && self.slots % SLRU_BANK_SIZE != 0 {
            return bad(format!(
                "with banks, buffer slots must be a multiple of {SLRU_BANK_SIZE}, not {}",
                self.slots
            ));
        }
        Ok(())
    }
}

/// Errors of the SLRU and the commit log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SlruError {
    /// Page I/O failed (`SlruReportIOError`, whose `ERROR` this is): worded as PostgreSQL's,
    /// `could not read from file "pg_xact/0000" at offset 8192: ...`.
    #[error("{}", io_message(what, path, *pageno, source))]
    Io {
        /// `open`, `read from`, `write to`.
        what: &'static str,
        /// The segment file.
        path: PathBuf,
        /// The page.
        pageno: u64,
        /// The OS error.
        source: std::io::Error,
    },
    /// An LWLock refused.
    #[error(transparent)]
    LwLock(#[from] LwLockError),
    /// A shape out of range.
    #[error("invalid SLRU setting: {0}")]
    Config(String),
    /// The xid counter ran out (PostgreSQL stops assigning xids before wraparound).
    #[error("database is not accepting commands to avoid wraparound data loss")]
    XidWraparound,
    /// A commit-log status change PostgreSQL forbids (its `Assert` in `TransactionIdSetStatusBit`).
    #[error("cannot change the status of transaction {xid} from {from} to {to}")]
    BadTransition {
        /// The transaction.
        xid: u32,
        /// Its status now.
        from: &'static str,
        /// The status asked for.
        to: &'static str,
    },
}

/// The message of [`SlruError::Io`], as `SlruReportIOError` words it: the file, and for a read
/// or write the page's offset in it (an open names no offset).
fn io_message(what: &str, path: &std::path::Path, pageno: u64, source: &std::io::Error) -> String {
    let path = path.display();
    if what == "open" {
        format!("could not open file \"{path}\": {source}")
    } else {
        let offset = (pageno % SLRU_PAGES_PER_SEGMENT) * BLCKSZ as u64;
        format!("could not {what} file \"{path}\" at offset {offset}: {source}")
    }
}

/// One slot's page buffer (`page_buffer[slotno]`): `BLCKSZ` bytes.
///
/// `SimpleLruInit` (slru.c) carves PostgreSQL's buffers out of the SLRU's shared struct: after
/// `SlruSharedData` and its per-slot arrays (see [`Slru`]), the offset is `BUFFERALIGN`ed (32
/// bytes, `ALIGNOF_BUFFER`) and the pages follow back to back, `BLCKSZ` each. Here they are one
/// array of pages, back to back, placed in the simulated map as a region of their own, which
/// starts on a 128-byte boundary: a page's bytes lie on lines at the same offsets from its
/// start as PostgreSQL's would if its pages started a line; PostgreSQL's may start 32 bytes
/// into one, which moves which 256 xids' statuses share a 64-byte line but not how many lines
/// anything touches.
///
/// Touches (on a simulated CPU): the byte a status lookup reads (`TransactionIdGetStatus`) and
/// the byte a status update reads and writes (`TransactionIdSetStatusBit`), each one line; a
/// page copied out to be written (`SlruPhysicalWritePage`'s `write`), all its lines, as loads
/// that do not wait for each other; a page written whole — zeroed (`SimpleLruZeroPage`'s
/// `MemSet`) or read in (`SlruPhysicalReadPage`'s `read`, the kernel's copy into the buffer) —
/// a store to each of its lines, whose ownership requests a simulated core's store buffer
/// overlaps up to its fill buffers (as `AdvanceXLInsertBuffer`'s `MemSet` of a WAL page is
/// charged in the wal crate).
#[repr(C)]
struct Page([PageByte; BLCKSZ]);

/// `page_status[slotno]`: a `SlruPageStatus`, which is a C enum, so an `int`; the values are
/// [`page_status`]'s.
#[repr(transparent)]
struct StatusWord(AtomicU32);

impl StatusWord {
    #[inline]
    fn load(&self, order: Ordering) -> u8 {
        self.0.load(order) as u8
    }

    #[inline]
    fn store(&self, status: u8, order: Ordering) {
        self.0.store(u32::from(status), order)
    }
}

/// `page_number[]`: an `int` per slot up to 16, an `int64` from 17 (the release that brought
/// banks, so the model takes the wider one exactly when [`SlruConfig::banks`] is set).
enum PageNumbers {
    Int(Box<[AtomicU32]>),
    Int64(Box<[AtomicU64]>),
}

/// One slot's `page_number`.
#[derive(Clone, Copy)]
enum PageNumber<'a> {
    Int(&'a AtomicU32),
    Int64(&'a AtomicU64),
}

impl PageNumber<'_> {
    #[inline]
    fn load(self, order: Ordering) -> u64 {
        match self {
            PageNumber::Int(p) => u64::from(p.load(order)),
            PageNumber::Int64(p) => p.load(order),
        }
    }

    #[inline]
    fn store(self, pageno: u64, order: Ordering) {
        match self {
            // No page number of the commit log's 2^31 xids exceeds an `int`.
            PageNumber::Int(p) => p.store(pageno as u32, order),
            PageNumber::Int64(p) => p.store(pageno, order),
        }
    }
}

/// One slot's entries of the per-slot arrays.
struct Slot<'a, K> {
    page_number: PageNumber<'a>,
    status: &'a StatusWord,
    dirty: &'a AtomicBool,
    lru_count: &'a AtomicU32,
    /// `buffer_locks[slotno]`: held exclusively during the slot's I/O.
    io_lock: &'a K,
    page: &'a Page,
}

/// The scalars of `SlruSharedData` (slru.h) that the model keeps, at 9.6–16's offsets on a
/// 64-bit build: the control lock's pointer and `num_slots`, the seven array pointers
/// (`page_buffer` … `group_lsn`), `lsn_groups_per_page`, then `cur_lru_count` at 76 and
/// `latest_page_number` at 80 (an `int` there, 8 bytes here). 17 drops `cur_lru_count` (the
/// banks have `bank_cur_lru_count[]`) and puts the 8-byte `latest_page_number` at 88; either
/// way it is on the header's second 64-byte line, with the last array pointers every access
/// reads.
#[repr(C)]
struct SharedHeader {
    _pointers: [u64; 9],
    _lsn_groups_per_page: u32,
    /// `cur_lru_count` (≤ 16): bumped into a slot's `page_lru_count` by every use of it.
    cur_lru_count: AtomicU32,
    /// `latest_page_number`: never evicted.
    latest_page_number: AtomicU64,
}

/// The names of one SLRU's parts in the simulated shared-memory map.
struct RegionNames {
    control_lock: &'static str,
    shared: &'static str,
    page_status: &'static str,
    page_dirty: &'static str,
    page_number: &'static str,
    page_lru_count: &'static str,
    buffer_locks: &'static str,
    bank_locks: &'static str,
    bank_cur_lru_count: &'static str,
    group_lsn: &'static str,
    pages: &'static str,
}

/// `SimpleLruInit(XactCtl, "Xact", ...)` (13+; "CLOG Ctl" before), and `XactSLRULock` (13–16;
/// `CLogControlLock` before).
const XACT_REGIONS: RegionNames = RegionNames {
    control_lock: "XactSLRULock",
    shared: "Xact SlruSharedData",
    page_status: "Xact page_status",
    page_dirty: "Xact page_dirty",
    page_number: "Xact page_number",
    page_lru_count: "Xact page_lru_count",
    buffer_locks: "Xact buffer_locks",
    bank_locks: "Xact bank_locks",
    bank_cur_lru_count: "Xact bank_cur_lru_count",
    group_lsn: "Xact group_lsn",
    pages: "Xact page buffers",
};

/// Any other SLRU's.
const SLRU_REGIONS: RegionNames = RegionNames {
    control_lock: "SLRU control lock",
    shared: "SlruSharedData",
    page_status: "SLRU page_status",
    page_dirty: "SLRU page_dirty",
    page_number: "SLRU page_number",
    page_lru_count: "SLRU page_lru_count",
    buffer_locks: "SLRU buffer_locks",
    bank_locks: "SLRU bank_locks",
    bank_cur_lru_count: "SLRU bank_cur_lru_count",
    group_lsn: "SLRU group_lsn",
    pages: "SLRU page buffers",
};

/// One SLRU: slots, banks and their locks, over a [`PageStore`] (models `SlruSharedData` and
/// `SlruCtlData`).
///
/// # Layout
/// `SimpleLruInit` makes one shared struct: `SlruSharedData`, then per-slot arrays, each
/// `MAXALIGN`ed after the one before — `page_buffer` (pointers), `page_status` (4-byte enum),
/// `page_dirty` (bool), `page_number` (`int`, 17: `int64`), `page_lru_count` (`int`), from 9.6
/// `buffer_locks` (`LWLockPadded`, 128 bytes each), from 17 `bank_locks` (`LWLockPadded`) and
/// `bank_cur_lru_count` (`int`), then `group_lsn` (`lsn_groups_per_page` `XLogRecPtr`s per
/// slot) — and the page buffers. Up to 16 the control lock is one of `MainLWLockArray`'s
/// individual locks, allocated long before. The model keeps the same arrays with the same
/// element sizes, each placed in the simulated shared-memory map
/// ([`pglocks_sync::shmem::Placed`]) in that order, so a scan of a bank's statuses reads the
/// lines PostgreSQL's reads and a bump of the LRU counter dirties the line PostgreSQL's does
/// (up to 16 the header's; from 17 the one all banks' counters share).
///
/// Shortcuts: each array is a region of its own, on a 128-byte boundary, where PostgreSQL
/// packs them 8-byte aligned after a header of about 100 bytes: with 128 slots (the commit log
/// of 9.6–16) only where the arrays start within a line differs, but with 8 (9.1) the four
/// small arrays share two lines in PostgreSQL and take four here. Up to 9.5 the buffer locks
/// are `MainLWLockArray` entries (16- or 32-byte padding), here always padded to 128 bytes as
/// from 9.6 (the padding PostgreSQL has from then, kept on the host). The header has only the
/// fields the model uses (see `SharedHeader`); the `page_buffer` pointers are not kept.
pub struct Slru<K: RawLwLock> {
    /// The placements of the arrays below (declared first, so they end before the memory is
    /// freed).
    /// (First: fields drop in declaration order, and the map must forget this memory before it
    /// is freed.)
    _placed: Vec<Placed>,
    bank_size: usize,
    nbanks: usize,
    victim: Victim,
    /// The SLRU's header; padded on the host as its own shared allocation starts a line.
    shared: Box<CachePadded<SharedHeader>>,
    page_status: Box<[StatusWord]>,
    page_dirty: Box<[AtomicBool]>,
    page_number: PageNumbers,
    page_lru_count: Box<[AtomicU32]>,
    buffer_locks: Box<[CachePadded<K>]>,
    /// 17's `bank_locks`, one per bank; up to 16 the one control lock.
    bank_locks: Box<[CachePadded<K>]>,
    /// 17's `bank_cur_lru_count` (empty up to 16, which has the header's `cur_lru_count`).
    bank_cur_lru_count: Box<[AtomicU32]>,
    /// `group_lsn`: `lsn_groups` per slot, data the bank lock orders (see `LsnWord`).
    group_lsn: Box<[LsnWord]>,
    lsn_groups: usize,
    pages: Box<[Page]>,
    store: Box<dyn PageStore>,
}

impl<K: RawLwLock> Slru<K> {
    /// Models `SimpleLruInit`: empty slots over `store`, placed in the simulated map in
    /// PostgreSQL's order (the control lock of 9.6–16 first, as `CreateLWLocks` precedes it).
    pub fn new(cfg: &SlruConfig, store: Box<dyn PageStore>) -> Result<Self, SlruError> {
        cfg.validate()?;
        let names = if cfg.lock_name == "XactSLRU" {
            &XACT_REGIONS
        } else {
            &SLRU_REGIONS
        };
        let bank_size = if cfg.banks { SLRU_BANK_SIZE } else { cfg.slots };
        let nbanks = cfg.slots / bank_size;
        let n = cfg.slots;
        let mut placed = Vec::new();
        let locks = |count: usize, name: &'static str| -> Box<[CachePadded<K>]> {
            (0..count).map(|_| CachePadded::new(K::new(name))).collect()
        };
        let mut bank_locks = None;
        if !cfg.banks {
            let lock = locks(1, cfg.lock_name);
            placed.push(Placed::slice(names.control_lock, &lock));
            bank_locks = Some(lock);
        }
        let shared = Box::new(CachePadded::new(SharedHeader {
            _pointers: [0; 9],
            _lsn_groups_per_page: cfg.lsn_groups_per_page as u32,
            cur_lru_count: AtomicU32::new(0),
            latest_page_number: AtomicU64::new(0),
        }));
        placed.push(Placed::one(names.shared, &**shared));
        let page_status: Box<[StatusWord]> = (0..n)
            .map(|_| StatusWord(AtomicU32::new(u32::from(EMPTY))))
            .collect();
        placed.push(Placed::slice(names.page_status, &page_status));
        let page_dirty: Box<[AtomicBool]> = (0..n).map(|_| AtomicBool::new(false)).collect();
        placed.push(Placed::slice(names.page_dirty, &page_dirty));
        let page_number = if cfg.banks {
            let numbers: Box<[AtomicU64]> = (0..n).map(|_| AtomicU64::new(0)).collect();
            placed.push(Placed::slice(names.page_number, &numbers));
            PageNumbers::Int64(numbers)
        } else {
            let numbers: Box<[AtomicU32]> = (0..n).map(|_| AtomicU32::new(0)).collect();
            placed.push(Placed::slice(names.page_number, &numbers));
            PageNumbers::Int(numbers)
        };
        let page_lru_count: Box<[AtomicU32]> = (0..n).map(|_| AtomicU32::new(0)).collect();
        placed.push(Placed::slice(names.page_lru_count, &page_lru_count));
        let buffer_locks = locks(n, cfg.buffer_lock_name);
        placed.push(Placed::slice(names.buffer_locks, &buffer_locks));
        let bank_locks = match bank_locks {
            Some(lock) => lock,
            None => {
                let banks = locks(nbanks, cfg.lock_name);
                placed.push(Placed::slice(names.bank_locks, &banks));
                banks
            }
        };
        let bank_cur_lru_count: Box<[AtomicU32]> = (0..if cfg.banks { nbanks } else { 0 })
            .map(|_| AtomicU32::new(0))
            .collect();
        placed.push(Placed::slice(names.bank_cur_lru_count, &bank_cur_lru_count));
        let group_lsn: Box<[LsnWord]> = (0..n * cfg.lsn_groups_per_page)
            .map(|_| LsnWord::new(0))
            .collect();
        placed.push(Placed::slice(names.group_lsn, &group_lsn));
        let pages: Box<[Page]> = (0..n)
            .map(|_| Page(std::array::from_fn(|_| PageByte::new(0))))
            .collect();
        placed.push(Placed::slice(names.pages, &pages));
        Ok(Self {
            bank_size,
            nbanks,
            victim: cfg.victim,
            _placed: placed,
            shared,
            page_status,
            page_dirty,
            page_number,
            page_lru_count,
            buffer_locks,
            bank_locks,
            bank_cur_lru_count,
            group_lsn,
            lsn_groups: cfg.lsn_groups_per_page,
            pages,
            store,
        })
    }

    /// Slot `slotno`'s entries of the per-slot arrays.
    #[inline]
    fn slot(&self, slotno: usize) -> Slot<'_, K> {
        Slot {
            page_number: match &self.page_number {
                PageNumbers::Int(p) => PageNumber::Int(&p[slotno]),
                PageNumbers::Int64(p) => PageNumber::Int64(&p[slotno]),
            },
            status: &self.page_status[slotno],
            dirty: &self.page_dirty[slotno],
            lru_count: &self.page_lru_count[slotno],
            io_lock: &self.buffer_locks[slotno],
            page: &self.pages[slotno],
        }
    }

    /// The lock of bank `bank` (up to 16 the one control lock).
    #[inline]
    fn bank_lock(&self, bank: usize) -> &K {
        &self.bank_locks[bank]
    }

    /// The LRU counter of bank `bank`: 17's `bank_cur_lru_count[bank]`, or up to 16 the
    /// header's `cur_lru_count`.
    #[inline]
    fn cur_lru_count(&self, bank: usize) -> &AtomicU32 {
        self.bank_cur_lru_count
            .get(bank)
            .unwrap_or(&self.shared.cur_lru_count)
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.page_status.len()
    }

    /// The bank page `pageno` belongs to (`pageno % nbanks`).
    #[inline]
    fn bank_of(&self, pageno: u64) -> usize {
        (pageno % self.nbanks as u64) as usize
    }

    /// The bank slot `slotno` is in (`SlotGetBankNumber`).
    #[inline]
    fn bank_of_slot(&self, slotno: usize) -> usize {
        slotno / self.bank_size
    }

    /// Takes the lock of page `pageno`'s bank (`SimpleLruGetBankLock` + `LWLockAcquire`).
    #[inline]
    pub fn lock_bank(
        &self,
        b: &mut Backend,
        pageno: u64,
        mode: LwLockMode,
    ) -> Result<(), SlruError> {
        self.bank_lock(self.bank_of(pageno)).acquire(b, mode)?;
        Ok(())
    }

    /// Takes the lock of page `pageno`'s bank if it is free right now.
    pub fn try_lock_bank(&self, b: &mut Backend, pageno: u64) -> Result<bool, SlruError> {
        Ok(self
            .bank_lock(self.bank_of(pageno))
            .conditional_acquire(b, LwLockMode::Exclusive)?)
    }

    /// Releases the lock of page `pageno`'s bank.
    #[inline]
    pub fn unlock_bank(&self, b: &mut Backend, pageno: u64) -> Result<(), SlruError> {
        self.bank_lock(self.bank_of(pageno)).release(b)?;
        Ok(())
    }

    /// The page number slot `slotno` holds (meaningful unless the slot is empty).
    pub fn page_number(&self, slotno: usize) -> u64 {
        self.slot(slotno).page_number.load(Relaxed)
    }

    /// The slot's [`page_status`].
    pub fn status(&self, slotno: usize) -> u8 {
        self.slot(slotno).status.load(Relaxed)
    }

    /// Are all of this SLRU's locks free right now? Takes every bank (control) lock and every
    /// slot's I/O lock with a conditional acquire and releases it at once. For tests and
    /// end-of-run checks, when no other backend is using the SLRU.
    pub fn locks_free(&self, b: &mut Backend) -> Result<bool, SlruError> {
        let locks = self.bank_locks.iter().chain(self.buffer_locks.iter());
        for lock in locks {
            if !lock.conditional_acquire(b, LwLockMode::Exclusive)? {
                return Ok(false);
            }
            lock.release(b)?;
        }
        Ok(true)
    }

    /// Is the page in `slotno` dirty (for tests; meaningful under the bank lock or when
    /// nobody else uses the SLRU)?
    pub fn is_dirty(&self, slotno: usize) -> bool {
        self.slot(slotno).dirty.load(Relaxed)
    }

    /// Byte `i` of the page in `slotno` (bank lock held, any mode); charged as a touch of its
    /// line.
    #[inline]
    pub fn byte(&self, slotno: usize, i: usize) -> u8 {
        let byte = &self.pages[slotno].0[i];
        touch_range(byte.as_ptr(), 1, false);
        byte.load(Relaxed)
    }

    /// Sets byte `i` of the page in `slotno` (bank lock held exclusively); the caller marks the
    /// page dirty. Charged as a store to its line.
    #[inline]
    pub fn set_byte(&self, slotno: usize, i: usize, v: u8) {
        let byte = &self.pages[slotno].0[i];
        touch_range(byte.as_ptr(), 1, true);
        byte.store(v, Relaxed);
    }

    /// Marks the page in `slotno` dirty (`page_dirty[slotno] = true`; bank lock held exclusively).
    #[inline]
    pub fn mark_dirty(&self, slotno: usize) {
        self.page_dirty[slotno].store(true, Relaxed);
    }

    /// LSN group `group` of the page in `slotno` (bank lock held); charged as a load of its
    /// line.
    #[inline]
    pub fn group_lsn(&self, slotno: usize, group: usize) -> u64 {
        let g = &self.group_lsn[slotno * self.lsn_groups + group];
        touch_range(g.as_ptr(), 8, false);
        g.load(Relaxed)
    }

    /// Raises LSN group `group` of the page in `slotno` to `lsn` (bank lock held exclusively);
    /// charged as a load of its line, and a store when it rises.
    #[inline]
    pub fn advance_group_lsn(&self, slotno: usize, group: usize, lsn: u64) {
        let g = &self.group_lsn[slotno * self.lsn_groups + group];
        touch_range(g.as_ptr(), 8, false);
        if g.load(Relaxed) < lsn {
            touch_range(g.as_ptr(), 8, true);
            g.store(lsn, Relaxed);
        }
    }

    /// Models `SimpleLruZeroLSNs`: the `MemSet` of the slot's group LSNs, charged as one store
    /// to each line they cover.
    fn zero_lsns(&self, slotno: usize) {
        let run = &self.group_lsn[slotno * self.lsn_groups..(slotno + 1) * self.lsn_groups];
        if run.is_empty() {
            return;
        }
        touch_range(run.as_ptr(), std::mem::size_of_val(run), true);
        for g in run {
            g.store(0, Relaxed);
        }
    }

    /// Models `SlruRecentlyUsed`: bumps the bank's LRU counter into the slot, unless it already
    /// has the current value. Runs under the bank lock in shared mode too, racing with others:
    /// the worst outcome is a less than optimal victim, as in PostgreSQL.
    #[inline]
    fn recently_used(&self, slotno: usize) {
        let counter = self.cur_lru_count(self.bank_of_slot(slotno));
        let count = counter.load(Relaxed);
        let lru_count = &self.page_lru_count[slotno];
        if count != lru_count.load(Relaxed) {
            counter.store(count.wrapping_add(1), Relaxed);
            lru_count.store(count.wrapping_add(1), Relaxed);
        }
    }

    /// Models `SimpleLruZeroPage`: a slot for new page `pageno`, zeroed, valid, dirty, and now
    /// the latest page. Bank lock held exclusively.
    pub fn zero_page(&self, b: &mut Backend, pageno: u64) -> Result<usize, SlruError> {
        let slotno = self.select_lru_page(b, pageno)?;
        let slot = self.slot(slotno);
        slot.page_number.store(pageno, Relaxed);
        slot.status.store(VALID, Relaxed);
        slot.dirty.store(true, Relaxed);
        self.recently_used(slotno);
        touch_range(slot.page.0.as_ptr(), BLCKSZ, true);
        for byte in slot.page.0.iter() {
            byte.store(0, Relaxed);
        }
        self.zero_lsns(slotno);
        self.shared.latest_page_number.store(pageno, Relaxed);
        Ok(slotno)
    }

    /// Models `SimpleLruReadPage`: the slot holding `pageno`, read in if needed. Bank lock held
    /// exclusively at entry and exit (released meanwhile for I/O). With `write_ok`, a page
    /// being written out is good enough.
    pub fn read_page(
        &self,
        b: &mut Backend,
        pageno: u64,
        write_ok: bool,
    ) -> Result<usize, SlruError> {
        loop {
            let slotno = self.select_lru_page(b, pageno)?;
            let slot = self.slot(slotno);
            let status = slot.status.load(Relaxed);
            if status != EMPTY && slot.page_number.load(Relaxed) == pageno {
                if status == READ_IN_PROGRESS || status == WRITE_IN_PROGRESS && !write_ok {
                    self.wait_io(b, slotno, pageno)?;
                    continue;
                }
                self.recently_used(slotno);
                b.stats.events.count("slru.hits", 1);
                return Ok(slotno);
            }
            if status == VALID {
                b.stats.events.count("slru.evictions", 1);
            }
            // A miss: read the page into the victim slot, without the bank lock.
            slot.page_number.store(pageno, Relaxed);
            slot.status.store(READ_IN_PROGRESS, Relaxed);
            slot.dirty.store(false, Relaxed);
            slot.io_lock.acquire(b, LwLockMode::Exclusive)?;
            self.unlock_bank(b, pageno)?;
            let mut buf = [0u8; BLCKSZ];
            let t = Instant::now();
            let read = self.store.read_page(pageno, &mut buf);
            b.stats
                .waits
                .record("SLRURead", "IO", t.elapsed().as_nanos() as u64);
            if read.is_ok() {
                touch_range(slot.page.0.as_ptr(), BLCKSZ, true);
                for (byte, &v) in slot.page.0.iter().zip(buf.iter()) {
                    byte.store(v, Relaxed);
                }
            }
            self.zero_lsns(slotno);
            self.lock_bank(b, pageno, LwLockMode::Exclusive)?;
            slot.status
                .store(if read.is_ok() { VALID } else { EMPTY }, Relaxed);
            slot.io_lock.release(b)?;
            if let Err(e) = read {
                self.unlock_bank(b, pageno)?;
                return Err(e);
            }
            self.recently_used(slotno);
            b.stats.events.count("slru.reads", 1);
            return Ok(slotno);
        }
    }

    /// Models `SimpleLruReadPage_ReadOnly`: looks `pageno` up under the bank lock in shared mode
    /// and returns its slot if it is there (and not still being read); otherwise retakes the
    /// lock exclusively and reads it in. The bank lock is not held at entry and is held, in
    /// one mode or the other, at exit: release it with [`Self::unlock_bank`].
    pub fn read_page_read_only(&self, b: &mut Backend, pageno: u64) -> Result<usize, SlruError> {
        self.lock_bank(b, pageno, LwLockMode::Shared)?;
        let bank = self.bank_of(pageno) * self.bank_size;
        for slotno in bank..bank + self.bank_size {
            let slot = self.slot(slotno);
            let status = slot.status.load(Relaxed);
            if status != EMPTY
                && status != READ_IN_PROGRESS
                && slot.page_number.load(Relaxed) == pageno
            {
                self.recently_used(slotno);
                b.stats.events.count("slru.hits", 1);
                return Ok(slotno);
            }
        }
        self.unlock_bank(b, pageno)?;
        self.lock_bank(b, pageno, LwLockMode::Exclusive)?;
        self.read_page(b, pageno, true)
    }

    /// Models `SimpleLruWaitIO`: waits for the I/O on `slotno` by taking its I/O lock in shared
    /// mode, with the bank lock (of `pageno`) released meanwhile.
    fn wait_io(&self, b: &mut Backend, slotno: usize, pageno: u64) -> Result<(), SlruError> {
        self.unlock_bank(b, pageno)?;
        let io = &self.buffer_locks[slotno];
        io.acquire(b, LwLockMode::Shared)?;
        io.release(b)?;
        self.lock_bank(b, pageno, LwLockMode::Exclusive)
    }

    /// Models `SlruSelectLRUPage`: a slot that holds `pageno` (in any state but empty), or a
    /// free one — empty, or valid and clean — writing out a dirty victim or waiting for I/O
    /// first when it must. Bank lock held exclusively.
    fn select_lru_page(&self, b: &mut Backend, pageno: u64) -> Result<usize, SlruError> {
        let bank_no = self.bank_of(pageno);
        let first = bank_no * self.bank_size;
        let range = first..first + self.bank_size;
        loop {
            for slotno in range.clone() {
                let slot = self.slot(slotno);
                if slot.status.load(Relaxed) != EMPTY && slot.page_number.load(Relaxed) == pageno {
                    return Ok(slotno);
                }
            }
            // `cur_count = (shared->cur_lru_count)++`: a plain increment under the exclusive
            // bank lock.
            let counter = self.cur_lru_count(bank_no);
            let cur_count = counter.load(Relaxed);
            counter.store(cur_count.wrapping_add(1), Relaxed);
            let latest = self.shared.latest_page_number.load(Relaxed);
            // (slot, delta, page) of the best valid and the best I/O-busy candidate.
            let mut best_valid: Option<(usize, u32, u64)> = None;
            let mut best_busy: Option<(usize, u32, u64)> = None;
            for slotno in range.clone() {
                let slot = self.slot(slotno);
                let status = slot.status.load(Relaxed);
                if status == EMPTY {
                    return Ok(slotno);
                }
                let lru = slot.lru_count.load(Relaxed);
                let delta = if (cur_count.wrapping_sub(lru) as i32) < 0 {
                    // Lost increments: back the slot's count off rather than chase it.
                    slot.lru_count.store(cur_count, Relaxed);
                    0
                } else {
                    cur_count.wrapping_sub(lru)
                };
                let page = slot.page_number.load(Relaxed);
                if page == latest {
                    continue;
                }
                let better = |best: Option<(usize, u32, u64)>| match best {
                    None => true,
                    Some((_, d, p)) => delta > d || delta == d && page < p,
                };
                let busy = status != VALID && self.victim == Victim::AvoidIoBusy;
                if busy {
                    if better(best_busy) {
                        best_busy = Some((slotno, delta, page));
                    }
                } else if better(best_valid) {
                    best_valid = Some((slotno, delta, page));
                }
            }
            let Some((victim, _, _)) = best_valid else {
                // Every candidate is busy with I/O: wait for the least recently used one.
                match best_busy {
                    Some((slotno, _, _)) => self.wait_io(b, slotno, pageno)?,
                    None => {
                        self.unlock_bank(b, pageno)?;
                        return Err(SlruError::Config(
                            "an SLRU needs at least two slots per bank (one holds the latest page)"
                                .into(),
                        ));
                    }
                }
                continue;
            };
            let slot = self.slot(victim);
            match slot.status.load(Relaxed) {
                VALID if !slot.dirty.load(Relaxed) => return Ok(victim),
                VALID => self.write_page(b, victim)?,
                // ≤ 9.1: the plain LRU slot was busy; wait for its I/O and look again.
                _ => self.wait_io(b, victim, pageno)?,
            }
        }
    }

    /// Models `SlruInternalWritePage` / `SimpleLruWritePage`: writes the page in `slotno` out if
    /// it is dirty, with the bank lock released during the write. Bank lock held exclusively.
    pub fn write_page(&self, b: &mut Backend, slotno: usize) -> Result<(), SlruError> {
        let slot = self.slot(slotno);
        let pageno = slot.page_number.load(Relaxed);
        while slot.status.load(Relaxed) == WRITE_IN_PROGRESS
            && slot.page_number.load(Relaxed) == pageno
        {
            self.wait_io(b, slotno, pageno)?;
        }
        if !slot.dirty.load(Relaxed)
            || slot.status.load(Relaxed) != VALID
            || slot.page_number.load(Relaxed) != pageno
        {
            return Ok(());
        }
        slot.status.store(WRITE_IN_PROGRESS, Relaxed);
        slot.dirty.store(false, Relaxed);
        slot.io_lock.acquire(b, LwLockMode::Exclusive)?;
        let mut buf = [0u8; BLCKSZ];
        for (v, byte) in buf.iter_mut().zip(slot.page.0.iter()) {
            *v = byte.load(Relaxed);
        }
        self.unlock_bank(b, pageno)?;
        // PostgreSQL's `write` reads the page here, without the bank lock: every line, no load
        // waiting for another.
        independent(|| touch_range(slot.page.0.as_ptr(), BLCKSZ, false));
        let t = Instant::now();
        let written = self.store.write_page(pageno, &buf);
        b.stats
            .waits
            .record("SLRUWrite", "IO", t.elapsed().as_nanos() as u64);
        self.lock_bank(b, pageno, LwLockMode::Exclusive)?;
        if written.is_err() {
            slot.dirty.store(true, Relaxed);
        }
        slot.status.store(VALID, Relaxed);
        slot.io_lock.release(b)?;
        if let Err(e) = written {
            self.unlock_bank(b, pageno)?;
            return Err(e);
        }
        b.stats.events.count("slru.writes", 1);
        Ok(())
    }

    /// Models `SimpleLruWriteAll` (a checkpoint): writes out every dirty page, bank by bank.
    pub fn write_all(&self, b: &mut Backend) -> Result<(), SlruError> {
        for bank_no in 0..self.nbanks {
            let first = bank_no * self.bank_size;
            let pageno = bank_no as u64; // any page of this bank
            self.lock_bank(b, pageno, LwLockMode::Exclusive)?;
            let mut done = Ok(());
            for slotno in first..first + self.bank_size {
                if self.slot(slotno).status.load(Relaxed) != EMPTY {
                    done = self.write_page(b, slotno);
                    if done.is_err() {
                        break;
                    }
                }
            }
            // On an error the bank lock is already released.
            done?;
            self.unlock_bank(b, pageno)?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
    use pglocks_proc::ProcTable;
    use std::time::Duration;

    fn slru(slots: usize, victim: Victim) -> Slru<AtomicLwLock<Pg96Layout>> {
        let cfg = SlruConfig {
            slots,
            banks: false,
            victim,
            lock_name: "XactSLRU",
            buffer_lock_name: "XactBuffer",
            lsn_groups_per_page: 0,
        };
        Slru::new(&cfg, Box::new(MemoryStore::new(Duration::ZERO))).unwrap()
    }

    fn holds(s: &Slru<AtomicLwLock<Pg96Layout>>, page: u64) -> bool {
        (0..s.slots()).any(|i| s.status(i) != EMPTY && s.page_number(i) == page)
    }

    #[test]
    fn the_per_slot_arrays_have_postgresqls_element_sizes() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<Page>(), BLCKSZ);
        // SlruPageStatus (an enum), bool, int (int64 from 17), int.
        assert_eq!(size_of::<StatusWord>(), 4);
        assert_eq!(size_of::<AtomicBool>(), 1);
        assert_eq!(size_of::<AtomicU32>(), 4);
        let s = slru(3, Victim::AvoidIoBusy);
        assert!(matches!(s.page_number, PageNumbers::Int(_)));
        let at = |p: &Page| p as *const Page as usize;
        assert_eq!(
            at(&s.pages[2]) - at(&s.pages[0]),
            2 * BLCKSZ,
            "back to back"
        );
        // SlruSharedData's cur_lru_count and latest_page_number, on its second line.
        assert_eq!(offset_of!(SharedHeader, cur_lru_count), 76);
        assert_eq!(offset_of!(SharedHeader, latest_page_number), 80);
    }

    #[test]
    fn the_latest_page_is_never_the_victim() {
        let s = slru(2, Victim::AvoidIoBusy);
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        s.lock_bank(&mut b, 0, LwLockMode::Exclusive).unwrap();
        s.zero_page(&mut b, 5).unwrap(); // the latest page, and the least recently used below
        s.read_page(&mut b, 1, false).unwrap();
        s.read_page(&mut b, 2, false).unwrap();
        assert!(holds(&s, 5) && holds(&s, 2) && !holds(&s, 1));
        s.unlock_bank(&mut b, 0).unwrap();
    }

    #[test]
    fn victims_are_least_recently_used_then_lowest_page_and_from_92_not_busy() {
        let s = slru(3, Victim::AvoidIoBusy);
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        s.lock_bank(&mut b, 0, LwLockMode::Exclusive).unwrap();
        s.zero_page(&mut b, 99).unwrap(); // latest: out of the running
        let a = s.read_page(&mut b, 7, false).unwrap();
        let c = s.read_page(&mut b, 3, false).unwrap();
        // Same LRU count: the lower page number goes first.
        s.slot(a).lru_count.store(10, Relaxed);
        s.slot(c).lru_count.store(10, Relaxed);
        s.read_page(&mut b, 8, false).unwrap();
        assert!(!holds(&s, 3) && holds(&s, 7), "tie broken by page number");
        // Page 7 is now the least recently used, but busy with I/O: 9.2+ takes page 8 instead.
        let slot7 = (0..3).find(|&i| s.page_number(i) == 7).unwrap();
        s.slot(slot7).status.store(WRITE_IN_PROGRESS, Relaxed);
        s.read_page(&mut b, 9, false).unwrap();
        assert!(holds(&s, 7) && !holds(&s, 8), "a busy slot is avoided");
        s.slot(slot7).status.store(VALID, Relaxed);
        s.unlock_bank(&mut b, 0).unwrap();
    }
}
