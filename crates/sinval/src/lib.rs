//! PostgreSQL's shared cache invalidation queue (sinvaladt.c), and the receiving side of
//! sinval.c that drives it (in [`receive`]).
//!
//! # The algorithm
//! When a backend changes a catalog row it must tell every other backend to drop what its
//! catalog and relation caches hold about that row. It does so by appending small fixed-size
//! messages to one shared queue; every backend reads the queue from its own position before it
//! trusts its caches (at every transaction start and every lock acquisition, through
//! `AcceptInvalidationMessages`).
//!
//! Conceptually the queue is an endless array indexed by *message numbers*: `maxMsgNum` is the
//! number the next message gets, `minMsgNum` a lower bound of the numbers some backend has yet
//! to read, and each backend's `nextMsgNum` lies between the two. Really it is a ring of
//! [`MAXNUMMESSAGES`] (4096) slots, message `n` living in slot `n % MAXNUMMESSAGES`, so a
//! message may only be written while `maxMsgNum - minMsgNum` leaves room for it. So that the
//! numbers never overflow, whenever `minMsgNum` passes [`MSGNUMWRAPAROUND`] every number is
//! lowered by it (a multiple of the ring size, so no slot moves).
//!
//! Two LWLocks guard the queue. Writers take `SInvalWriteLock` exclusively, a chunk of at most
//! `WRITE_QUANTUM` (64) messages at a time: they copy the messages in, publish the new
//! `maxMsgNum`, and (9.2+) set every backend's `hasMessages` flag. Readers take
//! `SInvalReadLock` *shared* — although each changes its own `ProcState`: shared here means
//! "touches only its own entry" — and may run alongside a writer, since a writer only fills
//! slots no reader can be reading. The one value both sides touch, `maxMsgNum`, is read and
//! written under a spinlock of its own, `msgnumLock`, which is what orders the messages' bytes
//! before the number that publishes them. (`msgnumLock` came with the 8.4 rewrite of the queue,
//! after buildfarm failures on weakly ordered machines, and every release since keeps it —
//! master included; 9.2 only spared readers whose flag is clear from taking it.) Whoever needs the whole array
//! (`SICleanupQueue`) takes both locks exclusively.
//!
//! ## The check: locked (≤ 9.1) and wait-free (9.2+)
//! Every backend checks the queue very often and almost always finds nothing. Up to 9.1 each
//! check took `SInvalReadLock` shared and `msgnumLock`, so on many cores the check alone
//! bounced two cache lines between all backends. 9.2 added the per-backend `hasMessages` flag:
//! a writer sets every backend's flag after publishing `maxMsgNum`, and a reader first looks at
//! its own flag **without any lock**, returning at once when it is clear. Only when it is set
//! does the reader take the locks, and it clears the flag *before* reading `maxMsgNum`: a
//! writer that publishes more messages after that read sets the flag again, so they are seen at
//! the next check. (Had the reader cleared the flag after reading `maxMsgNum`, it could erase a
//! writer's flag for messages it never read.) A reader that stops before the end sets its flag
//! again itself. [`SinvalCheck`] selects the variant.
//!
//! ## Cleanup, resets and catch-up signals
//! `SICleanupQueue` recomputes `minMsgNum` as the smallest `nextMsgNum` of the active backends.
//! A writer calls it when its chunk would not fit, and also whenever the queue holds more than
//! `nextThreshold` messages (half the ring at first, then every sixteenth of it). A backend
//! that blocks the room the writer needs — it has not read a message that would be overwritten
//! — is put in *reset* state and skipped from then on: its next read returns "reset" instead of
//! messages (PostgreSQL's `-1`), and it must throw away all its caches
//! (`InvalidateSystemCaches`), since it cannot know what it missed. To make resets rare, the
//! cleanup also picks the furthest-behind backend more than half a ring behind that has not
//! been signalled yet, marks it `signaled` and sends it a catch-up interrupt
//! (`PROCSIG_CATCHUP_INTERRUPT`); that backend reads everything and then runs a cleanup itself,
//! which passes the signal on to the next laggard — a daisy chain, so that idle backends do not
//! all wake at once.
//!
//! # Differences from PostgreSQL
//! - Backends are explicit: [`SinvalQueue::backend_init`] returns a [`SinvalBackend`] handle
//!   (PostgreSQL's `MyBackendId` plus sinval.c's static message buffer) that the backend passes
//!   back with its [`Backend`] to every call.
//! - `ProcState` fields are relaxed atomics ordered by the locks as PostgreSQL's plain fields
//!   are, the messages plain data in [`UnsafeCell`]s (which loom checks for races).
//! - On a simulated CPU, the data behind the locks is charged as touches of its lines: the ring
//!   slots a writer fills and a reader copies out (one touch per contiguous run of slots; a
//!   reader's loads do not wait for each other), and the `ProcState` fields the locks order
//!   (data words, laid out as 9.2–16's `ProcState`); `hasMessages` and the catch-up flag, read
//!   without the lock their writer holds, are the shim's atomics. The counters and
//!   `msgnumLock` share a line, as at the head of PostgreSQL's `SISeg`. The locks, the head, the
//!   ring and the entries are placed in the simulated shared-memory map under PostgreSQL's
//!   names (see [`SinvalQueue`]). The ring is a region of its own of 16-byte slots, not part of
//!   `SISeg` as in PostgreSQL, where it starts 24 bytes in (after the counters and
//!   `msgnumLock`), so that there one slot in four straddles two 64-byte lines and the first
//!   three share the counters' line; here none does.
//! - The catch-up signal is a flag in the target's `ProcState` (standing for procsignal's slot,
//!   `SIGUSR1` and the latch), honoured at the end of the target's next
//!   [`receive`](SinvalQueue::receive_shared_invalid_messages) or by
//!   [`process_catchup_interrupt`](SinvalQueue::process_catchup_interrupt), not asynchronously.
//! - The ring size is a parameter ([`SinvalConfig::max_messages`], PostgreSQL's 4096 by
//!   default) so that tests can overflow a small ring; the thresholds are PostgreSQL's
//!   fractions of it (see [`SinvalConfig`]).
//! - Backend entries are found as 9.1–16 found them (first free entry, `lastBackend`), not
//!   through 17's dense `pgprocnos` array; `nextLXID` (local transaction ids) is left out.
//! - An error (a stuck `msgnumLock`, too many LWLocks held) is fatal to the backend, as
//!   PostgreSQL's `ERROR` inside these functions would end in `LWLockReleaseAll`: it may leave
//!   `SInvalReadLock` or `SInvalWriteLock` held.
//! - pg81/pg82 use this 8.4 queue: 8.3 and before had one `SInvalLock` and one message per
//!   read call.

pub mod receive;

pub use receive::{Received, MAXINVALMSGS};

use pglocks_lwlock::{LwLockError, LwLockMode, RawLwLock};
use pglocks_proc::{Backend, MAX_BACKENDS};
use pglocks_spin::{PgSpinLock, RawSpinLock, SpinError};
use pglocks_sync::atomic::{AtomicBool, AtomicU32, Ordering, Ordering::Relaxed};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::data::{touch_range, DataU32, DataU8};
use pglocks_sync::shmem::{independent, Placed};
use pglocks_sync::CachePadded;

/// `MAXNUMMESSAGES`: slots in the ring (a power of two).
pub const MAXNUMMESSAGES: usize = 4096;
/// `MSGNUMWRAPAROUND` for the default ring: message numbers are lowered by this much once
/// `minMsgNum` reaches it (`MAXNUMMESSAGES * 262144`).
pub const MSGNUMWRAPAROUND: u32 = (MAXNUMMESSAGES * 262_144) as u32;
/// `WRITE_QUANTUM`: most messages a writer adds per hold of `SInvalWriteLock`.
pub const WRITE_QUANTUM: usize = 64;

/// Ids of the kinds of message (sinval.h's `SHAREDINVAL*_ID`; a catalog cache message carries
/// the cache's number, which is ≥ 0).
pub mod message_id {
    /// `SHAREDINVALCATALOG_ID`: a whole catalog.
    pub const CATALOG: i8 = -1;
    /// `SHAREDINVALRELCACHE_ID`: one relation's relcache entry.
    pub const RELCACHE: i8 = -2;
    /// `SHAREDINVALSMGR_ID`: one relation's smgr entry.
    pub const SMGR: i8 = -3;
    /// `SHAREDINVALRELMAP_ID`: a relation map file.
    pub const RELMAP: i8 = -4;
    /// `SHAREDINVALSNAPSHOT_ID`: a catalog snapshot.
    pub const SNAPSHOT: i8 = -5;
}

/// One invalidation message: 16 bytes, as `SharedInvalidationMessage` (sinval.h), a union whose
/// first byte says which kind it is.
///
/// The fields stand for the union's members: for a catalog cache message `db_id` and `hash`
/// (the tuple's hash value); for a relcache message `db_id` and `rel_id`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct SharedInvalidationMessage {
    /// The kind ([`message_id`]), or the catalog cache's number when ≥ 0.
    pub id: i8,
    /// `dbId`: the database (0 for shared catalogs).
    pub db_id: u32,
    /// `hashValue` of a catalog cache message, `relId` of a relcache one.
    pub object: u32,
    /// A further word of the union (a snapshot message's relation, an smgr message's backend).
    pub extra: u32,
}

impl SharedInvalidationMessage {
    /// A catalog cache message: cache `cache_id`, the tuple with hash `hash`
    /// (`SharedInvalCatcacheMsg`).
    pub fn catcache(cache_id: u8, db_id: u32, hash: u32) -> Self {
        Self {
            id: (cache_id & 0x7f) as i8,
            db_id,
            object: hash,
            extra: 0,
        }
    }

    /// A relcache message for relation `rel_id` (`SharedInvalRelcacheMsg`).
    pub fn relcache(db_id: u32, rel_id: u32) -> Self {
        Self {
            id: message_id::RELCACHE,
            db_id,
            object: rel_id,
            extra: 0,
        }
    }
}

/// How a backend looks for new messages (the `sinval_check` knob of the presets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinvalCheck {
    /// ≤ 9.1: every check takes `SInvalReadLock` shared and `msgnumLock`; writers keep no flags.
    Locked,
    /// 9.2+: the own `hasMessages` flag is read without a lock first; writers set everyone's.
    WaitFree,
}

/// The shape of one queue.
///
/// The thresholds are PostgreSQL's fractions of the ring: `CLEANUP_MIN` and `SIG_THRESHOLD`
/// half of it, `CLEANUP_QUANTUM` a sixteenth (at least 1), `WRITE_QUANTUM` 64 but never more
/// than `CLEANUP_QUANTUM` (sinvaladt.c asks for it to be less, so that one cleanup per chunk is
/// enough); at 4096 slots they are PostgreSQL's constants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinvalConfig {
    /// `MaxBackends`: `ProcState` entries.
    pub max_backends: usize,
    /// `MAXNUMMESSAGES`: ring slots, a power of two from 2 (default 4096).
    pub max_messages: usize,
    /// `MSGNUMWRAPAROUND`: a multiple of the ring size (default `max_messages * 262144`).
    pub msgnum_wraparound: u32,
    /// The check of the release.
    pub check: SinvalCheck,
}

impl SinvalConfig {
    /// PostgreSQL's queue for `max_backends` backends with `check`.
    pub fn new(max_backends: usize, check: SinvalCheck) -> Self {
        Self {
            max_backends,
            max_messages: MAXNUMMESSAGES,
            msgnum_wraparound: MSGNUMWRAPAROUND,
            check,
        }
    }

    /// A queue of `max_messages` slots (for tests), numbers wrapping at `max_messages * 262144`.
    pub fn with_ring(mut self, max_messages: usize) -> Self {
        self.max_messages = max_messages;
        self.msgnum_wraparound = (max_messages as u64 * 262_144).min(1 << 30) as u32;
        self
    }

    /// Checks the shape.
    pub fn validate(&self) -> Result<(), SinvalError> {
        let bad = |m: String| Err(SinvalError::Config(m));
        if self.max_backends == 0 || self.max_backends > MAX_BACKENDS {
            return bad(format!(
                "max_backends must be 1 to {MAX_BACKENDS}, not {}",
                self.max_backends
            ));
        }
        if !self.max_messages.is_power_of_two() || !(2..=1 << 20).contains(&self.max_messages) {
            return bad(format!(
                "the ring size must be a power of two from 2 to 1048576, not {}",
                self.max_messages
            ));
        }
        let n = self.max_messages as u32;
        if self.msgnum_wraparound == 0
            || self.msgnum_wraparound % n != 0
            || self.msgnum_wraparound > 1 << 30
        {
            return bad(format!(
                "MSGNUMWRAPAROUND must be a multiple of the ring size {n} up to 2^30, not {}",
                self.msgnum_wraparound
            ));
        }
        Ok(())
    }
}

/// Errors of the queue, in PostgreSQL's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SinvalError {
    /// Every `ProcState` entry is taken (`SharedInvalBackendInit`).
    #[error("sorry, too many clients already (all {max} sinval entries are in use)")]
    TooManyClients {
        /// `MaxBackends`.
        max: usize,
    },
    /// A [`SinvalBackend`] handle used with a queue it was not registered in.
    #[error("backend is not registered in this shared invalidation queue")]
    NotRegistered,
    /// A shape out of range.
    #[error("invalid shared invalidation setting: {0}")]
    Config(String),
    /// An LWLock refused.
    #[error(transparent)]
    LwLock(#[from] LwLockError),
    /// `msgnumLock` never came free.
    #[error(transparent)]
    Spin(#[from] SpinError),
}

/// What one [`SinvalQueue::get_data_entries`] call found (`SIGetDataEntries`' result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Got {
    /// This many messages, copied to the front of the buffer (0: none); fewer than the buffer
    /// holds means the backend has caught up.
    Messages(usize),
    /// The backend had been reset (PostgreSQL's `-1`): it missed messages and must discard
    /// all its caches. It now stands at the end of the queue.
    Reset,
}

/// A `bool` of `ProcState` that the locks order: a data byte (charged to a simulated CPU).
#[derive(Debug, Default)]
#[repr(transparent)]
struct Flag(DataU8);

impl Flag {
    #[inline]
    fn load(&self, order: Ordering) -> bool {
        self.0.load(order) != 0
    }

    #[inline]
    fn store(&self, v: bool, order: Ordering) {
        self.0.store(u8::from(v), order)
    }
}

/// Models `ProcState` (sinvaladt.c): one backend's entry, laid out as 9.2–16's, 32 bytes:
/// `procPid` (0), the `PGPROC *proc` pointer after 4 bytes of padding (8), `nextMsgNum` (16),
/// `resetState`, `signaled`, `hasMessages`, `sendOnly` (20–23), `nextLXID` (24), 4 bytes of
/// tail padding. 17 dropped the pointer (16 bytes, four entries to a 64-byte line rather than
/// two); the model keeps 9.2–16's entry for every release.
///
/// As in PostgreSQL the entries are packed in one array, not padded: two backends' entries share
/// a 64-byte line, so a writer setting every `hasMessages` dirties one line per two backends.
/// The fields the locks order are data words; `hasMessages` (read without a lock) and the
/// catch-up flag are the shim's atomics.
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct ProcState {
    /// `procPid != 0`: the entry is in use (1 here).
    active: DataU32,
    _proc: [u32; 3],
    /// `nextMsgNum`: the next message to read (meaningless when reset or inactive).
    next_msg_num: DataU32,
    /// `resetState`: the backend fell too far behind and must reset its caches.
    reset_state: Flag,
    /// `signaled`: a catch-up interrupt was sent and not yet answered by catching up.
    signaled: Flag,
    /// `hasMessages` (9.2+): there may be messages to read.
    has_messages: AtomicBool,
    /// `sendOnly`: never reads (the startup process in recovery); ignored by cleanup.
    send_only: Flag,
    _next_lxid: u32,
    /// `PROCSIG_CATCHUP_INTERRUPT` delivered and not yet handled (procsignal's flag and
    /// sinval.c's `catchupInterruptPending` in one; PostgreSQL's is in the target's procsignal
    /// slot, here in the entry's tail padding, on the line of the target's own fields).
    catchup_interrupt: AtomicBool,
}

impl ProcState {
    /// Whether the entry is in use.
    #[inline]
    fn active(&self) -> bool {
        self.active.load(Relaxed) != 0
    }

    fn set_active(&self, v: bool) {
        self.active.store(u32::from(v), Relaxed);
    }
}

/// `procState[MaxBackends]`: the entries back to back, placed in the simulated map as a region
/// of their own on a 128-byte boundary (PostgreSQL's array follows the ring inside `SISeg`, so it
/// starts 24 bytes into a line: the model's entries pair up on lines differently, two to a line
/// all the same).
#[derive(Debug)]
struct ProcStates {
    entries: Box<[ProcState]>,
}

impl ProcStates {
    fn new(len: usize) -> Self {
        Self {
            entries: (0..len).map(|_| ProcState::default()).collect(),
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn get(&self, i: usize) -> Option<&ProcState> {
        self.entries.get(i)
    }

    /// The first `n` entries.
    fn iter_to(&self, n: usize) -> impl Iterator<Item = &ProcState> + '_ {
        self.entries[..n].iter()
    }
}

impl std::ops::Index<usize> for ProcStates {
    type Output = ProcState;

    #[inline]
    fn index(&self, i: usize) -> &ProcState {
        self.get(i)
            .unwrap_or_else(|| panic!("entry {i} of {}", self.len()))
    }
}

/// The head of `SISeg`: the counters that only lock holders touch, and `msgnumLock`, in
/// PostgreSQL's order (9.2–16: `minMsgNum`, `maxMsgNum`, `nextThreshold`, `lastBackend`,
/// `maxBackends`, then the `slock_t` at byte 20; 17 drops the two backend counts). So a reader
/// that takes `msgnumLock` and reads `maxMsgNum` touches one cache line, as in PostgreSQL.
#[repr(C)]
struct SegmentHeader<R> {
    /// `minMsgNum`: written under both locks exclusively.
    min_msg_num: AtomicU32,
    /// `maxMsgNum`: written under `SInvalWriteLock` and `msgnumLock`; read under either.
    max_msg_num: AtomicU32,
    /// `nextThreshold`: queue length at which writers clean up next (under `SInvalWriteLock`).
    next_threshold: AtomicU32,
    /// `lastBackend`: entries in use are below it (under `SInvalWriteLock`).
    last_backend: AtomicU32,
    _max_backends: u32,
    /// `msgnumLock` (8.4+): guards `maxMsgNum` between writers and readers.
    msgnum_lock: R,
}

/// A registered backend's own sinval state: which entry is its (`MyBackendId`) and sinval.c's
/// static message buffer of [`MAXINVALMSGS`].
#[derive(Debug)]
pub struct SinvalBackend {
    index: usize,
    queue: usize,
    pub(crate) buffer: [SharedInvalidationMessage; MAXINVALMSGS],
}

impl SinvalBackend {
    /// The entry's number (`MyBackendId - 1`).
    pub fn index(&self) -> usize {
        self.index
    }
}

/// Models `SISeg` (sinvaladt.c): the shared invalidation queue, on LWLock type `K` with
/// `msgnumLock` of spinlock type `R`.
///
/// Its parts are placed in the simulated shared-memory map ([`pglocks_sync::shmem::Placed`]) in
/// PostgreSQL's order: `SInvalReadLock` and `SInvalWriteLock` (`MainLWLockArray`'s, made first
/// by `CreateLWLocks`), then `SISeg`'s head, its ring (`SISeg->buffer`) and its entries
/// (`SISeg->procState`), which `CreateSharedInvalidationState` gets as one struct. Shortcuts:
/// the three parts of `SISeg` are regions of their own, each on a 128-byte boundary (see
/// [`SinvalQueue`]'s fields and the crate's documentation for what that moves), and each lock is
/// a region of its own padded to 128 bytes, as `LWLockPadded` is from 9.6 (up to 9.5 the two,
/// neighbours in `MainLWLockArray` with 16- or 32-byte padding, may share a line).
pub struct SinvalQueue<K: RawLwLock, R: RawSpinLock = PgSpinLock> {
    /// The placements of the locks, the head, the ring and the entries (declared first, so
    /// they end before the memory is freed).
    _placed: [Placed; 5],
    /// `SInvalReadLock`.
    read_lock: Box<CachePadded<K>>,
    /// `SInvalWriteLock`.
    write_lock: Box<CachePadded<K>>,
    /// The counters and `msgnumLock`; padded on the host, as they always were, where
    /// PostgreSQL's ring follows them on their line.
    header: Box<CachePadded<SegmentHeader<R>>>,
    /// `buffer[MAXNUMMESSAGES]`.
    buffer: Box<[UnsafeCell<SharedInvalidationMessage>]>,
    /// `procState[MaxBackends]`.
    proc_state: ProcStates,
    mask: u32,
    max_messages: u32,
    msgnum_wraparound: u32,
    cleanup_min: u32,
    cleanup_quantum: u32,
    sig_threshold: u32,
    write_quantum: usize,
    check: SinvalCheck,
}

// SAFETY: the message slots are the only non-Sync part. A slot is written only by a writer
// holding SInvalWriteLock exclusively, and only at numbers from maxMsgNum up to
// minMsgNum + ring size, which no backend reads: readers read numbers in [nextMsgNum, maxMsgNum)
// with nextMsgNum >= minMsgNum (minMsgNum only grows under SInvalReadLock exclusive, which no
// reader holds at the same time), and a writer publishes maxMsgNum under msgnumLock after its
// copies, which readers take before reading it. Everything else is atomics.
unsafe impl<K: RawLwLock, R: RawSpinLock> Sync for SinvalQueue<K, R> {}
// SAFETY: the queue owns its slots; moving it moves plain data.
unsafe impl<K: RawLwLock, R: RawSpinLock> Send for SinvalQueue<K, R> {}

impl<K: RawLwLock, R: RawSpinLock> SinvalQueue<K, R> {
    /// Models `CreateSharedInvalidationState`: an empty queue, every entry inactive.
    pub fn new(cfg: &SinvalConfig) -> Result<Self, SinvalError> {
        cfg.validate()?;
        let n = cfg.max_messages as u32;
        let cleanup_quantum = (n / 16).max(1);
        let read_lock = Box::new(CachePadded::new(K::new("SInvalRead")));
        let write_lock = Box::new(CachePadded::new(K::new("SInvalWrite")));
        let header = Box::new(CachePadded::new(SegmentHeader {
            min_msg_num: AtomicU32::new(0),
            max_msg_num: AtomicU32::new(0),
            next_threshold: AtomicU32::new(n / 2),
            last_backend: AtomicU32::new(0),
            _max_backends: cfg.max_backends as u32,
            msgnum_lock: R::new(),
        }));
        let buffer: Box<[UnsafeCell<SharedInvalidationMessage>]> = (0..n)
            .map(|_| UnsafeCell::new(SharedInvalidationMessage::default()))
            .collect();
        let proc_state = ProcStates::new(cfg.max_backends);
        Ok(Self {
            _placed: [
                Placed::one("SInvalReadLock", &**read_lock),
                Placed::one("SInvalWriteLock", &**write_lock),
                Placed::one("SISeg", &**header),
                Placed::slice("SISeg->buffer", &buffer),
                Placed::slice("SISeg->procState", &proc_state.entries),
            ],
            read_lock,
            write_lock,
            header,
            buffer,
            proc_state,
            mask: n - 1,
            max_messages: n,
            msgnum_wraparound: cfg.msgnum_wraparound,
            cleanup_min: n / 2,
            cleanup_quantum,
            sig_threshold: n / 2,
            write_quantum: WRITE_QUANTUM.min(cleanup_quantum as usize),
            check: cfg.check,
        })
    }

    /// The check this queue does.
    pub fn check(&self) -> SinvalCheck {
        self.check
    }

    /// `MAXNUMMESSAGES` of this queue.
    pub fn max_messages(&self) -> usize {
        self.max_messages as usize
    }

    /// The entry of a registered backend.
    #[inline]
    pub(crate) fn state(&self, me: &SinvalBackend) -> Result<&ProcState, SinvalError> {
        if me.queue != self.identity() {
            return Err(SinvalError::NotRegistered);
        }
        Ok(&self.proc_state[me.index])
    }

    #[inline]
    fn identity(&self) -> usize {
        self as *const Self as usize
    }

    /// Models `SharedInvalBackendInit`: takes the first free entry under `SInvalWriteLock`,
    /// standing at the end of the queue (every message so far counts as read).
    pub fn backend_init(
        &self,
        b: &mut Backend,
        send_only: bool,
    ) -> Result<SinvalBackend, SinvalError> {
        self.write_lock.acquire(b, LwLockMode::Exclusive)?;
        let last = self.header.last_backend.load(Relaxed) as usize;
        let free = (0..last).find(|&i| !self.proc_state[i].active());
        let index = match free {
            Some(i) => i,
            None if last < self.proc_state.len() => {
                self.header.last_backend.store(last as u32 + 1, Relaxed);
                last
            }
            None => {
                self.write_lock.release(b)?;
                return Err(SinvalError::TooManyClients {
                    max: self.proc_state.len(),
                });
            }
        };
        let s = &self.proc_state[index];
        // Holding SInvalWriteLock, maxMsgNum can be read without msgnumLock.
        s.next_msg_num
            .store(self.header.max_msg_num.load(Relaxed), Relaxed);
        s.reset_state.store(false, Relaxed);
        s.signaled.store(false, Relaxed);
        s.has_messages.store(false, Relaxed);
        s.send_only.store(send_only, Relaxed);
        s.catchup_interrupt.store(false, Relaxed);
        s.set_active(true);
        self.write_lock.release(b)?;
        Ok(SinvalBackend {
            index,
            queue: self.identity(),
            buffer: [SharedInvalidationMessage::default(); MAXINVALMSGS],
        })
    }

    /// Models `CleanupInvalidationState` (the backend's exit): frees the entry and lowers
    /// `lastBackend` past the free entries at the end.
    pub fn cleanup_invalidation_state(
        &self,
        b: &mut Backend,
        me: SinvalBackend,
    ) -> Result<(), SinvalError> {
        let s = self.state(&me)?;
        self.write_lock.acquire(b, LwLockMode::Exclusive)?;
        s.set_active(false);
        s.next_msg_num.store(0, Relaxed);
        s.reset_state.store(false, Relaxed);
        s.signaled.store(false, Relaxed);
        let mut last = self.header.last_backend.load(Relaxed) as usize;
        while last > 0 && !self.proc_state[last - 1].active() {
            last -= 1;
        }
        self.header.last_backend.store(last as u32, Relaxed);
        self.write_lock.release(b)?;
        Ok(())
    }

    /// Takes `msgnumLock`.
    #[inline]
    fn lock_msgnum(&self, b: &mut Backend) -> Result<(), SinvalError> {
        self.header
            .msgnum_lock
            .lock(b)
            .map_err(|stuck| SpinError::StuckSpinlock {
                lock: "msgnumLock",
                delays: stuck.delays,
            })?;
        b.stats.spin.acquisitions += 1;
        Ok(())
    }

    /// Releases `msgnumLock`.
    #[inline]
    fn unlock_msgnum(&self) {
        // SAFETY: every caller took it with `lock_msgnum` just before.
        unsafe { self.header.msgnum_lock.unlock() }
    }

    /// Models `SIInsertDataEntries`: appends `data` in chunks of `WRITE_QUANTUM`, each under
    /// `SInvalWriteLock`, cleaning the queue first when the chunk would not fit or the queue
    /// has reached `nextThreshold`.
    pub fn insert_data_entries(
        &self,
        b: &mut Backend,
        data: &[SharedInvalidationMessage],
    ) -> Result<(), SinvalError> {
        for chunk in data.chunks(self.write_quantum) {
            let n = chunk.len() as u32;
            self.write_lock.acquire(b, LwLockMode::Exclusive)?;
            // Room is only made by a cleanup, which may let go of the write lock to signal a
            // laggard: check again after every one.
            loop {
                let h = &self.header;
                let num_msgs = h.max_msg_num.load(Relaxed) - h.min_msg_num.load(Relaxed);
                if num_msgs + n > self.max_messages || num_msgs >= h.next_threshold.load(Relaxed) {
                    self.cleanup_queue(b, true, n)?;
                } else {
                    break;
                }
            }
            let mut max = self.header.max_msg_num.load(Relaxed);
            self.touch_slots(max, chunk.len(), true);
            for m in chunk {
                let slot = &self.buffer[(max & self.mask) as usize];
                // SAFETY: slot `max` lies in [maxMsgNum, minMsgNum + ring size), which no
                // reader reads (see the Sync impl); SInvalWriteLock excludes other writers.
                slot.with_mut(|p| unsafe { *p = *m });
                max += 1;
            }
            // Publish under msgnumLock: its release orders the copies above before the number.
            self.lock_msgnum(b)?;
            self.header.max_msg_num.store(max, Relaxed);
            self.unlock_msgnum();
            if self.check == SinvalCheck::WaitFree {
                // Now that maxMsgNum is out, tell everyone; releasing SInvalWriteLock is the
                // barrier that makes these plain stores visible.
                let last = self.header.last_backend.load(Relaxed) as usize;
                for s in self.proc_state.iter_to(last) {
                    s.has_messages.store(true, Relaxed);
                }
            }
            self.write_lock.release(b)?;
            b.stats
                .events
                .count("sinval.messages_written", u64::from(n));
        }
        Ok(())
    }

    /// Models `SIGetDataEntries`: copies the backend's next messages into `data` (at most
    /// `data.len()`), or reports that it was reset.
    ///
    /// 9.2+ ([`SinvalCheck::WaitFree`]) first reads the backend's `hasMessages` flag without a
    /// lock and returns `Messages(0)` at once when it is clear. That read is relaxed, like
    /// PostgreSQL's plain load: it is sure to see the flag of every insert whose
    /// `SInvalWriteLock` release happens before something the caller acquired (in PostgreSQL,
    /// the lock on the relation that the sender held until its invalidations were queued); an
    /// insert racing with the check may be seen only at the next one, as if it had come later.
    #[inline]
    pub fn get_data_entries(
        &self,
        b: &mut Backend,
        me: &SinvalBackend,
        data: &mut [SharedInvalidationMessage],
    ) -> Result<Got, SinvalError> {
        let s = self.state(me)?;
        self.get(b, s, data)
    }

    /// `SIGetDataEntries` on entry `s`.
    #[inline]
    fn get(
        &self,
        b: &mut Backend,
        s: &ProcState,
        data: &mut [SharedInvalidationMessage],
    ) -> Result<Got, SinvalError> {
        if self.check == SinvalCheck::WaitFree && !s.has_messages.load(Relaxed) {
            return Ok(Got::Messages(0));
        }
        self.get_data_entries_locked(b, s, data)
    }

    /// The part of `SIGetDataEntries` under `SInvalReadLock`.
    #[inline(never)]
    fn get_data_entries_locked(
        &self,
        b: &mut Backend,
        s: &ProcState,
        data: &mut [SharedInvalidationMessage],
    ) -> Result<Got, SinvalError> {
        self.read_lock.acquire(b, LwLockMode::Shared)?;
        let wait_free = self.check == SinvalCheck::WaitFree;
        if wait_free {
            // Cleared before maxMsgNum is read: a writer publishing after that read sets it again.
            s.has_messages.store(false, Relaxed);
        }
        self.lock_msgnum(b)?;
        let max = self.header.max_msg_num.load(Relaxed);
        self.unlock_msgnum();

        if s.reset_state.load(Relaxed) {
            // Whatever came after the reset is covered by it too, so the backend is caught up.
            s.next_msg_num.store(max, Relaxed);
            s.reset_state.store(false, Relaxed);
            s.signaled.store(false, Relaxed);
            self.read_lock.release(b)?;
            return Ok(Got::Reset);
        }

        let mut next = s.next_msg_num.load(Relaxed);
        let n = (max.saturating_sub(next) as usize).min(data.len());
        // The copy's loads do not wait for each other.
        independent(|| self.touch_slots(next, n, false));
        let mut n = 0;
        while n < data.len() && next < max {
            let slot = &self.buffer[(next & self.mask) as usize];
            // SAFETY: `next` is in [nextMsgNum, maxMsgNum): published under msgnumLock, and
            // not overwritten while this backend, holding SInvalReadLock, keeps minMsgNum at
            // or below it (see the Sync impl).
            data[n] = slot.with(|p| unsafe { *p });
            next += 1;
            n += 1;
        }
        s.next_msg_num.store(next, Relaxed);
        if next >= max {
            // Caught up: a new signal may be sent when it falls behind again.
            s.signaled.store(false, Relaxed);
        } else if wait_free {
            // Messages left: look again next time.
            s.has_messages.store(true, Relaxed);
        }
        self.read_lock.release(b)?;
        Ok(Got::Messages(n))
    }

    /// Models `SICleanupQueue`: recomputes `minMsgNum`, resets the backends that keep the
    /// queue from having `min_free` free slots, lowers every number past `MSGNUMWRAPAROUND`,
    /// sets `nextThreshold`, and signals the furthest-behind unsignalled backend more than
    /// `SIG_THRESHOLD` behind.
    ///
    /// With `caller_has_write_lock` the caller holds `SInvalWriteLock`, and holds it again on
    /// return; it is let go while a signal is sent, so the caller must check the room again.
    pub fn cleanup_queue(
        &self,
        b: &mut Backend,
        caller_has_write_lock: bool,
        min_free: u32,
    ) -> Result<(), SinvalError> {
        if !caller_has_write_lock {
            self.write_lock.acquire(b, LwLockMode::Exclusive)?;
        }
        self.read_lock.acquire(b, LwLockMode::Exclusive)?;
        let h = &self.header;
        let max = h.max_msg_num.load(Relaxed);
        // Signed arithmetic, as PostgreSQL's ints: the bounds may lie below zero.
        let mut min = i64::from(max);
        let mut minsig = min - i64::from(self.sig_threshold);
        let lowbound = min - i64::from(self.max_messages) + i64::from(min_free);
        let last = h.last_backend.load(Relaxed) as usize;
        let mut need_sig = None;
        let mut resets = 0;
        // A walk of every entry: no entry's loads wait for another's (a reset's store waits
        // for those in flight).
        independent(|| {
            for (i, s) in self.proc_state.iter_to(last).enumerate() {
                if !s.active() || s.reset_state.load(Relaxed) || s.send_only.load(Relaxed) {
                    continue;
                }
                let n = i64::from(s.next_msg_num.load(Relaxed));
                if n < lowbound {
                    // It holds up the room we need: reset it and leave it out from now on.
                    s.reset_state.store(true, Relaxed);
                    resets += 1;
                    continue;
                }
                min = min.min(n);
                if n < minsig && !s.signaled.load(Relaxed) {
                    minsig = n;
                    need_sig = Some(i);
                }
            }
        });
        // min is between 0 and maxMsgNum.
        let mut min = min as u32;
        if min >= self.msgnum_wraparound {
            min -= self.msgnum_wraparound;
            h.max_msg_num.store(max - self.msgnum_wraparound, Relaxed);
            // Readers are locked out, so maxMsgNum needs no msgnumLock; inactive and reset
            // entries are lowered too (their numbers are meaningless).
            for s in self.proc_state.iter_to(last) {
                let n = s.next_msg_num.load(Relaxed);
                s.next_msg_num
                    .store(n.wrapping_sub(self.msgnum_wraparound), Relaxed);
            }
        }
        h.min_msg_num.store(min, Relaxed);
        let num_msgs = h.max_msg_num.load(Relaxed) - min;
        let threshold = if num_msgs < self.cleanup_min {
            self.cleanup_min
        } else {
            (num_msgs / self.cleanup_quantum + 1) * self.cleanup_quantum
        };
        h.next_threshold.store(threshold, Relaxed);
        b.stats.events.count("sinval.cleanups", 1);
        if resets > 0 {
            b.stats.events.count("sinval.resets", resets);
        }
        match need_sig {
            Some(i) => {
                let target = &self.proc_state[i];
                target.signaled.store(true, Relaxed);
                // SendProcSignal is slow: no locks held while sending.
                self.read_lock.release(b)?;
                self.write_lock.release(b)?;
                self.send_catchup_interrupt(b, target);
                if caller_has_write_lock {
                    self.write_lock.acquire(b, LwLockMode::Exclusive)?;
                }
            }
            None => {
                self.read_lock.release(b)?;
                if !caller_has_write_lock {
                    self.write_lock.release(b)?;
                }
            }
        }
        Ok(())
    }

    /// Models `SendProcSignal(pid, PROCSIG_CATCHUP_INTERRUPT)` and the target's
    /// `HandleCatchupInterrupt`: sets the target's pending flag.
    #[cold]
    fn send_catchup_interrupt(&self, b: &mut Backend, target: &ProcState) {
        target.catchup_interrupt.store(true, Relaxed);
        b.stats.events.count("sinval.catchup_signals", 1);
    }

    /// Whether a catch-up interrupt is waiting for this backend (`catchupInterruptPending`).
    #[inline]
    pub fn catchup_pending(&self, me: &SinvalBackend) -> Result<bool, SinvalError> {
        Ok(self.state(me)?.catchup_interrupt.load(Relaxed))
    }

    /// Charges a touch of the ring slots of messages `from..from + n`: one contiguous run, or
    /// two where the ring wraps.
    fn touch_slots(&self, from: u32, n: usize, write: bool) {
        let first = (from & self.mask) as usize;
        let to_end = n.min(self.buffer.len() - first);
        for run in [
            &self.buffer[first..first + to_end],
            &self.buffer[..n - to_end],
        ] {
            if !run.is_empty() {
                touch_range(run.as_ptr(), std::mem::size_of_val(run), write);
            }
        }
    }

    /// Clears this backend's pending catch-up interrupt; whether one was pending.
    #[inline]
    pub(crate) fn take_catchup(&self, s: &ProcState) -> bool {
        s.catchup_interrupt.load(Relaxed) && s.catchup_interrupt.swap(false, Relaxed)
    }

    /// A consistent view of the queue's counters and one backend's entry, for tests and
    /// reports (takes both locks).
    pub fn snapshot(&self, b: &mut Backend, index: usize) -> Result<QueueView, SinvalError> {
        self.write_lock.acquire(b, LwLockMode::Exclusive)?;
        self.read_lock.acquire(b, LwLockMode::Exclusive)?;
        let h = &self.header;
        let s = self.proc_state.get(index);
        let view = QueueView {
            min_msg_num: h.min_msg_num.load(Relaxed),
            max_msg_num: h.max_msg_num.load(Relaxed),
            next_threshold: h.next_threshold.load(Relaxed),
            last_backend: h.last_backend.load(Relaxed) as usize,
            next_msg_num: s.map(|s| s.next_msg_num.load(Relaxed)),
            reset_state: s.is_some_and(|s| s.reset_state.load(Relaxed)),
            signaled: s.is_some_and(|s| s.signaled.load(Relaxed)),
            has_messages: s.is_some_and(|s| s.has_messages.load(Relaxed)),
        };
        self.read_lock.release(b)?;
        self.write_lock.release(b)?;
        Ok(view)
    }
}

/// The queue's counters and one entry, as [`SinvalQueue::snapshot`] saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueView {
    /// `minMsgNum`.
    pub min_msg_num: u32,
    /// `maxMsgNum`.
    pub max_msg_num: u32,
    /// `nextThreshold`.
    pub next_threshold: u32,
    /// `lastBackend`.
    pub last_backend: usize,
    /// The entry's `nextMsgNum` (`None` past the array).
    pub next_msg_num: Option<u32>,
    /// The entry's `resetState`.
    pub reset_state: bool,
    /// The entry's `signaled`.
    pub signaled: bool,
    /// The entry's `hasMessages`.
    pub has_messages: bool,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
    use pglocks_proc::ProcTable;

    type Queue = SinvalQueue<AtomicLwLock<Pg96Layout>>;

    fn msgs(from: u32, n: u32) -> Vec<SharedInvalidationMessage> {
        (from..from + n)
            .map(|i| SharedInvalidationMessage::catcache(1, 0, i))
            .collect()
    }

    fn queue(ring: usize, backends: usize) -> Queue {
        Queue::new(&SinvalConfig::new(backends, SinvalCheck::WaitFree).with_ring(ring)).unwrap()
    }

    #[test]
    fn pg_constants_at_the_default_ring() {
        let q = Queue::new(&SinvalConfig::new(4, SinvalCheck::Locked)).unwrap();
        assert_eq!(
            (
                q.cleanup_min,
                q.cleanup_quantum,
                q.sig_threshold,
                q.write_quantum
            ),
            (2048, 256, 2048, 64)
        );
        assert_eq!(MSGNUMWRAPAROUND, 1 << 30);
        assert_eq!(std::mem::size_of::<SharedInvalidationMessage>(), 16);
    }

    #[test]
    fn ring_slots_and_proc_states_have_postgresqls_sizes() {
        use std::mem::{offset_of, size_of};
        let q = queue(16, 9);
        assert_eq!(size_of::<UnsafeCell<SharedInvalidationMessage>>(), 16);
        let slot = |i: usize| &q.buffer[i] as *const _ as usize;
        assert_eq!(slot(15) - slot(0), 15 * 16);
        // 9.2-16's ProcState: 32 bytes, nextMsgNum at 16, the flags at 20-23.
        assert_eq!(size_of::<ProcState>(), 32);
        assert_eq!(offset_of!(ProcState, next_msg_num), 16);
        assert_eq!(offset_of!(ProcState, reset_state), 20);
        assert_eq!(offset_of!(ProcState, has_messages), 22);
        assert_eq!(offset_of!(ProcState, send_only), 23);
        let entry = |i: usize| &q.proc_state[i] as *const ProcState as usize;
        assert_eq!(entry(8) - entry(0), 8 * 32);
        assert_eq!(q.proc_state.iter_to(9).count(), 9);
        assert!(q.proc_state.get(9).is_none());
        // SISeg's head: msgnumLock at byte 20, with maxMsgNum on one line.
        assert_eq!(offset_of!(SegmentHeader<PgSpinLock>, max_msg_num), 4);
        assert_eq!(offset_of!(SegmentHeader<PgSpinLock>, msgnum_lock), 20);
    }

    #[test]
    fn bad_shapes_and_misuse_are_errors() {
        let cfg = SinvalConfig::new(2, SinvalCheck::WaitFree);
        for bad in [
            cfg.clone().with_ring(100),
            SinvalConfig {
                msgnum_wraparound: 4097,
                ..cfg.clone()
            },
            SinvalConfig {
                max_backends: 0,
                ..cfg.clone()
            },
        ] {
            let e = Queue::new(&bad).err().unwrap().to_string();
            assert!(e.contains("invalid shared invalidation setting"), "{e}");
        }
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let (q1, q2) = (queue(16, 1), queue(16, 1));
        let mut me = q1.backend_init(&mut b, false).unwrap();
        let e = q1.backend_init(&mut b, false).unwrap_err();
        assert_eq!(e, SinvalError::TooManyClients { max: 1 });
        assert!(e.to_string().contains("too many clients"));
        assert_eq!(
            q2.accept_invalidation_messages(&mut b, &mut me),
            Err(SinvalError::NotRegistered)
        );
        q1.cleanup_invalidation_state(&mut b, me).unwrap();
        assert_eq!(q1.snapshot(&mut b, 0).unwrap().last_backend, 0);
        assert!(q1.backend_init(&mut b, false).is_ok());
    }

    #[test]
    fn a_backend_too_far_behind_is_reset_and_told_so_once() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        for check in [SinvalCheck::Locked, SinvalCheck::WaitFree] {
            let q = Queue::new(&SinvalConfig::new(2, check).with_ring(16)).unwrap();
            let mut writer = q.backend_init(&mut b, false).unwrap();
            let mut idle = q.backend_init(&mut b, false).unwrap();
            // 16 fit; the 17th needs the idle backend's oldest slot.
            for i in 0..16 {
                q.insert_data_entries(&mut b, &msgs(i, 1)).unwrap();
                q.accept_invalidation_messages(&mut b, &mut writer).unwrap();
            }
            assert!(!q.snapshot(&mut b, idle.index()).unwrap().reset_state);
            q.insert_data_entries(&mut b, &msgs(16, 1)).unwrap();
            assert!(q.snapshot(&mut b, idle.index()).unwrap().reset_state);
            q.insert_data_entries(&mut b, &msgs(17, 1)).unwrap();
            let got = q.accept_invalidation_messages(&mut b, &mut idle).unwrap();
            assert_eq!((got.messages, got.reset), (0, true), "{check:?}");
            // The reset covers everything before it; the next message is read normally.
            q.insert_data_entries(&mut b, &msgs(18, 1)).unwrap();
            let mut seen = vec![];
            let got = q
                .receive_shared_invalid_messages(&mut b, &mut idle, |m| seen.push(m.object), || {})
                .unwrap();
            assert_eq!((got.messages, got.reset, seen), (1, false, vec![18]));
            let counters = b.take_stats().events.counters();
            assert!(counters.contains(&("sinval.resets", 1)), "{counters:?}");
            assert!(
                counters.contains(&("sinval.cache_resets", 1)),
                "{counters:?}"
            );
        }
    }

    #[test]
    fn catch_up_signals_go_to_the_furthest_behind_and_are_passed_on() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let q = queue(64, 3);
        // A send-only writer (ignored by cleanup) and two backends that do not read.
        let _writer = q.backend_init(&mut b, true).unwrap();
        let mut a = q.backend_init(&mut b, false).unwrap();
        let mut c = q.backend_init(&mut b, false).unwrap();
        // Cleanups run at 32 messages (nobody past SIG_THRESHOLD = 32 yet) and at 36, which
        // signals the first of the two furthest behind, a, and only a.
        q.insert_data_entries(&mut b, &msgs(0, 37)).unwrap();
        assert!(q.catchup_pending(&a).unwrap());
        assert!(!q.catchup_pending(&c).unwrap());
        assert!(q.snapshot(&mut b, a.index()).unwrap().signaled);
        // a catches up; its cleanup passes the signal on to c.
        let got = q.process_catchup_interrupt(&mut b, &mut a).unwrap();
        assert_eq!((got.messages, got.reset), (37, false));
        assert!(!q.catchup_pending(&a).unwrap());
        assert!(!q.snapshot(&mut b, a.index()).unwrap().signaled);
        assert!(q.catchup_pending(&c).unwrap());
        let got = q.process_catchup_interrupt(&mut b, &mut c).unwrap();
        assert_eq!(got.messages, 37);
        assert!(!q.catchup_pending(&c).unwrap());
        let counters = b.take_stats().events.counters();
        assert!(
            counters.contains(&("sinval.catchup_signals", 2)),
            "{counters:?}"
        );
        assert_eq!(q.snapshot(&mut b, 0).unwrap().min_msg_num, 37);
    }

    #[test]
    fn message_numbers_wrap_without_losing_messages() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let cfg = SinvalConfig {
            msgnum_wraparound: 16,
            ..SinvalConfig::new(2, SinvalCheck::WaitFree).with_ring(8)
        };
        let q = Queue::new(&cfg).unwrap();
        let (mut x, mut y) = (
            q.backend_init(&mut b, false).unwrap(),
            q.backend_init(&mut b, false).unwrap(),
        );
        let mut next = 0;
        for round in 0..20u32 {
            q.insert_data_entries(&mut b, &msgs(round * 3, 3)).unwrap();
            for me in [&mut x, &mut y] {
                let mut seen = vec![];
                q.receive_shared_invalid_messages(&mut b, me, |m| seen.push(m.object), || {})
                    .unwrap();
                assert_eq!(seen, (next..next + 3).collect::<Vec<_>>());
            }
            next += 3;
            let v = q.snapshot(&mut b, 0).unwrap();
            assert!(v.max_msg_num < 16 + 8, "{v:?}");
        }
    }

    #[test]
    fn the_locked_check_keeps_no_flags_and_reads_all_the_same() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let q = Queue::new(&SinvalConfig::new(1, SinvalCheck::Locked)).unwrap();
        let mut me = q.backend_init(&mut b, false).unwrap();
        q.insert_data_entries(&mut b, &msgs(0, 100)).unwrap();
        assert!(!q.snapshot(&mut b, 0).unwrap().has_messages);
        let got = q.accept_invalidation_messages(&mut b, &mut me).unwrap();
        assert_eq!(got.messages, 100);
    }
}
