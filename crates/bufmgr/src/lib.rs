//! PostgreSQL's shared buffer mapping: the partitioned tag → buffer table (buf_table.c), pins
//! and usage counts, the clock-sweep victim search (freelist.c) and `BufferAlloc` (bufmgr.c).
//!
//! # The algorithm
//! Shared buffers are `NBuffers` 8 KB slots, each described by a descriptor: the [`BufferTag`]
//! of the page it holds and a state word with a reference (pin) count, a usage count and flags
//! ([`desc`]). A shared table maps tags to buffer ids; it is split into `NUM_BUFFER_PARTITIONS`
//! partitions by the tag's hash code, each guarded by a `BufferMapping` LWLock ([`buf_table`]).
//!
//! To read a page (`ReadBuffer` → `BufferAlloc`), a backend hashes its tag, takes the
//! partition's lock in *shared* mode and looks the tag up. On a hit it pins the buffer — which
//! raises the usage count, up to 5 — and releases the lock; the pin alone keeps the page there.
//!
//! On a miss it releases the lock and asks the replacement strategy for a victim
//! ([`freelist`]): a buffer from the freelist, or the first one the clock hand finds unpinned
//! with usage count zero. It pins the victim, then takes *exclusively* the partition locks of
//! the victim's old tag and of the new tag — both, in ascending order, when they differ — and
//! inserts the new tag. If that finds the tag already there, another backend read the page in
//! meanwhile: the victim is unpinned and the other buffer pinned instead. Otherwise, under the
//! victim's header lock, it checks that nobody else pinned the victim meanwhile (a backend that
//! found the old tag in the table may have); if someone did, it backs out — deletes the new
//! entry, unlocks, unpins — and starts over with another victim. If not, it retags the buffer
//! (usage count 1, not yet valid), deletes the old tag's entry and releases the partition locks.
//!
//! A pin keeps a page in its buffer; reading the page's contents takes the buffer's content
//! lock shared, changing them exclusive (`LockBuffer`, an LWLock of tranche `BufferContent`
//! beside the descriptor's header), released as soon as the page has been looked at. The
//! B-tree root's content lock is the one line every backend of a read-only workload shares.
//!
//! The read itself happens outside every partition lock: the buffer is marked
//! `BM_IO_IN_PROGRESS` (`StartBufferIO`), and a backend that finds it in the table meanwhile
//! pins it and waits for the read to end (`WaitIO`) before using it.
//!
//! Releases differ in how the victim is found: up to 9.4 the whole search runs under one
//! exclusive LWLock, `BufFreelistLock`; from 9.5 the clock hand is an atomic counter and the
//! search takes no lock ([`VictimSearch`]). They also differ in how a pin is taken: up to 9.5
//! under the buffer header spinlock, from 9.6 by a compare-exchange on the state word
//! ([`PinMethod`]). 9.5 also raised the partitions from 16 to 128.
//!
//! # Differences from PostgreSQL
//! - Backends are explicit [`Backend`] handles, and each carries its own
//!   [`PrivateRefCount`] alongside (PostgreSQL's is backend-global).
//! - No page contents and no writes: buffers never become dirty, so the victim's write-out
//!   (`FlushBuffer`) and buffer access strategies (rings) are out of scope. A read is a sleep of
//!   [`BufMgrConfig::read_latency`] (0 by default) with `BM_IO_IN_PROGRESS` set. The pages have
//!   their place in the simulated shared-memory map ([`BufMgr::blocks`]), where a model charges
//!   the bytes it reads and writes under a content lock; the read that fills a buffer (a copy
//!   of all its lines) is not charged.
//! - The I/O wait, on a per-buffer I/O LWLock up to 13 ([`IoWait::Lwlock`]) or condition
//!   variable from 14 ([`IoWait::ConditionVariable`]), is modelled for reads only: no buffer is
//!   ever written. Up to 9.5 the I/O lock was an LWLock of the descriptor's own
//!   (`io_in_progress_lock`), from 9.6 one of an array beside the descriptors; the model places
//!   the array for every release up to 13.
//! - `BufferAlloc` has the 9.5–15 shape (both partition locks held while remapping) for every
//!   release; 16 split it so that the old entry is removed under the old partition lock before
//!   the new one is taken (`InvalidateVictimBuffer`). 8.x–9.4 differences in the remap
//!   (flags handling) are not modelled beyond the lock around the victim search.
//! - An LWLock error in the middle of `BufferAlloc` (only "too many LWLocks taken") returns
//!   at once; PostgreSQL's `ERROR` would also release every LWLock and pin.
//! - The usage count rises at pin time, as from 8.3; 8.1 and 8.2 raised it when the last pin
//!   was dropped (`UnpinBuffer`), which the pg81/pg82 presets do not model.
//! - Local (temporary-table) buffers are not modelled.

pub mod buf_table;
mod bufmgr;
pub mod desc;
pub mod freelist;
pub mod tag;

pub use desc::{HeaderLock, PinMethod, PrivateRefCount, BM_MAX_USAGE_COUNT};
pub use freelist::{SweepPartitions, VictimSearch, MIN_SWEEP_PARTITIONS};
pub use tag::{BufferTag, ForkNumber};

use buf_table::BufTable;
use desc::{BufferDesc, PaddedDesc};
use freelist::Sweeps;
use pglocks_condvar::ConditionVariable;
use pglocks_lwlock::{LwLockError, Pad128, Padding, RawLwLock};
use pglocks_proc::Backend;
use pglocks_sync::shmem::{Placed, PlacedBox, Region};
use pglocks_sync::time::Duration;
use pglocks_sync::CachePadded;

/// lwlock.h's `NUM_BUFFER_PARTITIONS` from 9.5 (16 in 8.2–9.4).
pub use pglocks_lwlock::tranche::NUM_BUFFER_PARTITIONS;

/// pg_config.h's `BLCKSZ`: the bytes of a page, and of a buffer.
pub const BLCKSZ: usize = 8192;

/// The shape of the buffer pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufMgrConfig {
    /// `NBuffers` (`shared_buffers` in 8 KB pages; 16384 is the default 128 MB).
    pub nbuffers: usize,
    /// `NUM_BUFFER_PARTITIONS`.
    pub partitions: usize,
    /// How the victim search is guarded.
    pub victim_search: VictimSearch,
    /// Whether the victim search is split per NUMA node (a prototype; PostgreSQL's is one).
    pub sweep: SweepPartitions,
    /// How a pin changes the state word.
    pub pin: PinMethod,
    /// The simulated time of reading one page in.
    pub read_latency: Duration,
    /// s_lock.h's `TAS_SPIN` reads the lock before the exchange (x86_64 from 9.4): how ≤ 9.5's
    /// header spinlock retries ([`HeaderLock`]).
    pub tas_spin: bool,
    /// 17+ (`StartReadBuffers`): a repeat pin reads `BM_VALID`, since the backend may have
    /// started a read it has not waited for; before, an earlier pin meant a valid page.
    pub repeat_pin_reads_valid: bool,
    /// What a backend waits on while another reads the page in.
    pub io_wait: IoWait,
}

/// How `WaitIO` waits for another backend's I/O on a buffer, and `TerminateBufferIO` wakes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoWait {
    /// ≤ 13: the reader holds the buffer's I/O LWLock exclusively from `StartBufferIO` to
    /// `TerminateBufferIO`; a waiter takes it shared and lets go at once, then looks again.
    Lwlock,
    /// 14+: the reader holds nothing; a waiter sleeps on the buffer's condition variable
    /// (`BufferDescriptorGetIOCV`) until `BM_IO_IN_PROGRESS` is clear, and the reader
    /// broadcasts on it when it clears the flag.
    ConditionVariable,
}

impl BufMgrConfig {
    /// 9.6+'s buffer manager with `nbuffers` buffers.
    pub fn new(nbuffers: usize) -> Self {
        Self {
            nbuffers,
            partitions: NUM_BUFFER_PARTITIONS,
            victim_search: VictimSearch::AtomicClockHand,
            sweep: SweepPartitions::One,
            pin: PinMethod::Cas,
            read_latency: Duration::ZERO,
            tas_spin: true,
            repeat_pin_reads_valid: false,
            io_wait: IoWait::Lwlock,
        }
    }

    /// Checks the shape.
    pub fn validate(&self) -> Result<(), BufMgrError> {
        if self.nbuffers == 0 || self.nbuffers > 1 << 30 {
            return Err(BufMgrError::Config(format!(
                "shared buffers must be 1 to {}, not {}",
                1 << 30,
                self.nbuffers
            )));
        }
        if self.partitions == 0 || self.partitions > 65_536 {
            return Err(BufMgrError::Config(format!(
                "buffer mapping partitions must be 1 to 65536, not {}",
                self.partitions
            )));
        }
        if let SweepPartitions::PerNode { nodes, .. } = self.sweep {
            if nodes == 0 || nodes > SweepPartitions::MAX_NODES {
                return Err(BufMgrError::Config(format!(
                    "a clock sweep per node needs 1 to {} nodes, not {nodes}",
                    SweepPartitions::MAX_NODES
                )));
            }
            if self.victim_search == VictimSearch::FreelistLock {
                return Err(BufMgrError::Config(
                    "a clock sweep per node needs the atomic clock hand (9.5+), not \
                     BufFreelistLock"
                        .into(),
                ));
            }
            if self.nbuffers < self.sweep.count() {
                return Err(BufMgrError::Config(format!(
                    "a clock sweep per node splits the buffers into {} ranges: shared buffers \
                     must be at least that many, not {}",
                    self.sweep.count(),
                    self.nbuffers
                )));
            }
        }
        Ok(())
    }
}

/// Errors of the buffer manager, in PostgreSQL's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BufMgrError {
    /// The clock hand went round without finding an unpinned buffer (`StrategyGetBuffer`).
    #[error("no unpinned buffers available")]
    NoUnpinnedBuffers,
    /// A buffer to drop is pinned (`InvalidateBuffer`).
    #[error("buffer is pinned in InvalidateBuffer")]
    BufferPinned,
    /// Not a buffer of this pool (`ReleaseBuffer`).
    #[error("bad buffer ID: {0}")]
    BadBuffer(u32),
    /// Released more often than pinned by this backend (an `Assert` in PostgreSQL).
    #[error("buffer {0} is not pinned by this backend")]
    NotPinned(u32),
    /// A tag to delete was not in the table (`BufTableDelete`).
    #[error("shared buffer hash table corrupted")]
    TableCorrupted,
    /// The mapping table has no free element left (`hash_search_with_hash_value`'s
    /// `HASH_ENTER`; not expected, the table having an element per buffer and partition).
    #[error("out of shared memory")]
    OutOfSharedMemory,
    /// A spinlock (a buffer header, `buffer_strategy_lock`) was never released.
    #[error("stuck spinlock detected at {lock} (gave up after {delays} sleeps)")]
    StuckSpinlock {
        /// Which spinlock.
        lock: &'static str,
        /// Sleeps taken before giving up.
        delays: u32,
    },
    /// An LWLock refused.
    #[error(transparent)]
    LwLock(#[from] LwLockError),
    /// A shape out of range.
    #[error("invalid buffer manager setting: {0}")]
    Config(String),
}

impl BufMgrError {
    fn stuck(lock: &'static str, e: pglocks_spin::StuckSpinlock) -> Self {
        BufMgrError::StuckSpinlock {
            lock,
            delays: e.delays,
        }
    }
}

/// A pinned buffer, as `ReadBuffer` returns it (PostgreSQL's `Buffer` is the id plus one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Buffer(u32);

impl Buffer {
    /// The descriptor index (`buf_id`).
    pub fn id(self) -> u32 {
        self.0
    }

    /// The buffer with descriptor index `buf_id` (checked when used).
    pub fn from_id(buf_id: u32) -> Self {
        Buffer(buf_id)
    }
}

/// What a buffer holds right now, for tests and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferInfo {
    /// The tag, if `BM_TAG_VALID`.
    pub tag: Option<BufferTag>,
    /// Shared pins.
    pub refcount: u32,
    /// Usage count.
    pub usage_count: u32,
    /// `BM_VALID`.
    pub valid: bool,
}

/// A buffer's I/O condition variable as condition_variable.h's
/// `ConditionVariableMinimallyPadded` lays it out: 16 bytes, four to a cache line.
#[derive(Debug, Default)]
#[repr(align(16))]
pub(crate) struct IoConditionVariable(pub(crate) ConditionVariable);

/// What a backend waits on for another's read of a buffer, one per buffer: the I/O LWLocks
/// (`BufferIOLWLockArray`, ≤ 13) or condition variables (`BufferIOCVArray`, 14+).
pub(crate) enum IoWaiters<K> {
    Locks(Box<[K]>),
    ConditionVariables(Box<[IoConditionVariable]>),
}

/// The buffer pool: descriptors, the pages' place in the simulated shared-memory map, the
/// mapping table with its partition locks (an array padded as `P` says), and the strategy
/// control. Models `BufferDescriptors`, `BufferBlocks`, `SharedBufHash` and `StrategyControl`,
/// each placed in a simulated machine's shared-memory map.
pub struct BufMgr<K: RawLwLock, P: Padding = Pad128> {
    /// The arrays' places in a simulated machine's shared-memory map: the descriptors and the
    /// I/O locks or condition variables. (First: fields drop in declaration order, and the map
    /// must forget this memory before it is freed.)
    _placed: [Placed; 2],
    descs: Box<[PaddedDesc<K>]>,
    /// `BufferBlocks`: `NBuffers` pages of [`BLCKSZ`] bytes, buffer `buf_id`'s page element
    /// `buf_id`.
    blocks: Region,
    /// Per-buffer I/O locks or condition variables.
    io: IoWaiters<K>,
    table: BufTable<K, P>,
    /// `BufFreelistLock` (≤ 9.4), one of `MainLWLockArray`'s individual locks.
    freelist_lock: PlacedBox<CachePadded<K>>,
    /// `StrategyControl`, or one per range of buffers when the search is split.
    sweeps: Sweeps,
    victim_search: VictimSearch,
    pin: PinMethod,
    hdr: HeaderLock,
    repeat_pin_reads_valid: bool,
    read_latency: Duration,
}

impl<K: RawLwLock, P: Padding> BufMgr<K, P> {
    /// Models `InitBufferPool`: `nbuffers` empty buffers, all on the freelist. The mapping
    /// table has the dynahash free lists of the release `cfg.pin` marks: one up to 9.5,
    /// `NUM_FREELISTS` from 9.6, which brought both (a stand-in for a setting of its own; see
    /// [`Self::with_hash_freelists`]).
    pub fn new(cfg: &BufMgrConfig) -> Result<Self, BufMgrError> {
        let freelists = match cfg.pin {
            PinMethod::HeaderLock => 1,
            PinMethod::Cas => buf_table::NUM_FREELISTS,
        };
        Self::with_hash_freelists(cfg, freelists)
    }

    /// Models `InitBufferPool` with a mapping table of `freelists` dynahash free lists (1 up to
    /// 9.5, `NUM_FREELISTS` from 9.6). The simulated shared-memory map gets the structures in
    /// `InitBufferPool`'s order: the descriptors ("Buffer Descriptors"), the pages ("Buffer
    /// Blocks"), the I/O locks ("Buffer IO Locks", ≤ 13) or condition variables ("Buffer IO
    /// Condition Variables", 14+), then `StrategyInitialize`'s mapping table
    /// and "Buffer Strategy Status". `BufFreelistLock`, which `CreateLWLocks` made earlier in
    /// `MainLWLockArray`, is placed after them under its own name (a shortcut of order only).
    pub fn with_hash_freelists(cfg: &BufMgrConfig, freelists: usize) -> Result<Self, BufMgrError> {
        cfg.validate()?;
        let n = cfg.nbuffers;
        // Each buffer's first freelist link is to the next one of its range of the search.
        let bounds = Sweeps::bounds(n, cfg.sweep);
        let descs: Box<[PaddedDesc<K>]> = (0..n)
            .map(|i| PaddedDesc {
                desc: BufferDesc::new(Sweeps::initial_free_next(&bounds, i as u32)),
                content_lock: K::new("BufferContent"),
            })
            .collect();
        let placed_descs = Placed::slice("Buffer Descriptors", &descs);
        let blocks = Region::new("Buffer Blocks", BLCKSZ, n);
        let (io, placed_io) = match cfg.io_wait {
            IoWait::Lwlock => {
                let locks: Box<[K]> = (0..n).map(|_| K::new("BufferIO")).collect();
                let placed = Placed::slice("Buffer IO Locks", &locks);
                (IoWaiters::Locks(locks), placed)
            }
            IoWait::ConditionVariable => {
                let cvs: Box<[IoConditionVariable]> =
                    (0..n).map(|_| IoConditionVariable::default()).collect();
                let placed = Placed::slice("Buffer IO Condition Variables", &cvs);
                (IoWaiters::ConditionVariables(cvs), placed)
            }
        };
        // StrategyInitialize: InitBufTable(NBuffers + NUM_BUFFER_PARTITIONS).
        let table = BufTable::new(cfg.partitions, n + cfg.partitions, freelists, cfg.tas_spin);
        let sweeps = Sweeps::new(bounds, cfg.sweep);
        let freelist_lock =
            PlacedBox::new("BufFreelistLock", CachePadded::new(K::new("BufFreelist")));
        Ok(Self {
            _placed: [placed_descs, placed_io],
            blocks,
            descs,
            io,
            table,
            freelist_lock,
            sweeps,
            victim_search: cfg.victim_search,
            pin: cfg.pin,
            hdr: HeaderLock::of_release(cfg.pin, cfg.tas_spin),
            repeat_pin_reads_valid: cfg.repeat_pin_reads_valid,
            read_latency: cfg.read_latency,
        })
    }

    /// `NBuffers`.
    pub fn nbuffers(&self) -> usize {
        self.descs.len()
    }

    /// `NUM_BUFFER_PARTITIONS`.
    pub fn partitions(&self) -> usize {
        self.table.partitions()
    }

    /// `BufferBlocks`' place in the simulated shared-memory map: the page of buffer `buf_id`
    /// is element `buf_id`, [`BLCKSZ`] bytes. A model that reads or writes a page's bytes
    /// under its content lock charges them here (`BufferGetPage`).
    pub fn blocks(&self) -> &Region {
        &self.blocks
    }

    /// `completePasses`: full turns of the clock hand so far (of every range's hand, summed,
    /// when the search is split).
    pub fn complete_passes(&self) -> u32 {
        self.sweeps.complete_passes()
    }

    /// The ranges the victim search is split into (1: PostgreSQL's single hand).
    pub fn sweep_partitions(&self) -> usize {
        self.sweeps.count()
    }

    /// A buffer's tag, counts and validity, read under its header lock.
    pub fn buffer_info(&self, b: &mut Backend, buf_id: u32) -> Result<BufferInfo, BufMgrError> {
        let d = self.desc(buf_id)?;
        let state = d.lock(b, self.hdr)?;
        let tag = d.tag(state);
        d.unlock(state);
        Ok(BufferInfo {
            tag: (state & desc::BM_TAG_VALID != 0).then_some(tag),
            refcount: desc::refcount(state),
            usage_count: desc::usage_count(state),
            valid: state & desc::BM_VALID != 0,
        })
    }

    /// Every entry of the mapping table, each partition read under its lock in shared mode
    /// one at a time, sorted by buffer id.
    pub fn table_entries(&self, b: &mut Backend) -> Result<Vec<(BufferTag, u32)>, BufMgrError> {
        let mut all = Vec::new();
        for p in 0..self.table.partitions() {
            let lock = self.table.lock(p);
            lock.acquire(b, pglocks_lwlock::LwLockMode::Shared)?;
            // SAFETY: partition `p`'s lock is held until the release below.
            all.extend(unsafe { self.table.entries(p) });
            lock.release(b)?;
        }
        all.sort_unstable_by_key(|e| e.1);
        Ok(all)
    }

    /// The descriptor of `buf_id`, or "bad buffer ID".
    #[inline]
    fn desc(&self, buf_id: u32) -> Result<&PaddedDesc<K>, BufMgrError> {
        self.descs
            .get(buf_id as usize)
            .ok_or(BufMgrError::BadBuffer(buf_id))
    }
}
