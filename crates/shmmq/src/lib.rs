//! Models PostgreSQL's shared memory message queue, `shm_mq` (storage/ipc/shm_mq.c and
//! storage/shm_mq.h): one sender and one receiver exchange length-prefixed messages through a
//! ring of bytes, and each sleeps on its latch while the ring is full (sender) or empty (receiver).
//!
//! # The algorithm
//!
//! The queue is a ring of `ring_size` bytes and two 64-bit counters that only grow:
//! `mq_bytes_written`, moved by the sender alone, and `mq_bytes_read`, moved by the receiver alone.
//! Their difference is the number of unread bytes, and `mq_bytes_read % ring_size` is where they
//! start. Because each counter has one writer, neither needs a lock or a read-modify-write: a
//! plain atomic load and store suffice. The ring itself is never locked either: the bytes between
//! the two counters belong to the receiver, which may read them, and the rest to the sender, which
//! may fill them. Only the receiver gives bytes back (by moving `mq_bytes_read`), and only the
//! sender hands bytes over (by moving `mq_bytes_written`). Memory barriers pair the two: the
//! sender's ring writes are published before its counter store (`pg_write_barrier`, here a
//! release fence) and read after the receiver's load of it (`pg_read_barrier`, an acquire fence);
//! the receiver's ring reads are finished before it moves `mq_bytes_read`, and the sender does not
//! overwrite them before it has read that move (`pg_memory_barrier`).
//!
//! A message is a length word (`Size`, 8 bytes) followed by the payload, each padded to
//! `MAXIMUM_ALIGNOF` (8) in the ring. Every chunk written or read starts on an 8-byte boundary,
//! and the ring size is a multiple of 8, so a length word never wraps; a payload may wrap around
//! the end of the ring, and one larger than the whole ring goes through in pieces while the
//! receiver drains it. The receiver reassembles such a message in its handle's private buffer
//! (`mqh_buffer`, grown to the next power of two).
//!
//! Neither end announces every byte. Since PostgreSQL 15 (commit 46846433a0, "shm_mq: Update
//! mq_bytes_written less often") the sender keeps the bytes it has written in `mqh_send_pending`
//! and moves `mq_bytes_written` (and sets the receiver's latch) only when more than a quarter of the
//! ring is pending, when the ring is full, or when the caller asks for `force_flush`; before 15
//! each chunk moved the counter and every message set the latch ([`ShmMqConfig::batch_send_pending`]).
//! The receiver has always kept the bytes it consumed in `mqh_consume_pending` and moves
//! `mq_bytes_read` (setting the sender's latch) only past a quarter of the ring or when it must
//! wait for more data.
//!
//! `mq_sender` and `mq_receiver` are set once each, under the queue's spinlock `mq_mutex`; once a
//! handle has seen its counterparty attached it reads the field without the lock.
//! `mq_detached` goes from false to true once, set by either end ([`ShmMqHandle::detach`]); the
//! other end then gets [`ShmMqResult::Detached`] instead of sleeping forever — the receiver only
//! after it has drained what was written before the detach.
//!
//! Operations come in two flavours. A blocking one (`nowait = false`) sleeps on the backend's latch
//! until it completes or the queue is detached. A non-blocking one returns
//! [`ShmMqResult::WouldBlock`] where it would sleep, keeping its progress in the handle
//! (`mqh_partial_bytes`, `mqh_length_word_complete`, `mqh_expected_bytes`): the caller must retry
//! the same send (same bytes) later, typically after its latch was set. Parallel apply
//! ([`ShmMqHandle::send_with_timeout`]) builds a send with a timeout from that.
//!
//! # Example
//!
//! A worker sends one message to its leader, then detaches; the leader gets the message, then
//! `Detached`:
//!
//! ```
//! use pglocks_shmmq::{ShmMq, ShmMqConfig, ShmMqHandle, ShmMqResult};
//! use std::sync::Arc;
//! let procs = pglocks_proc::ProcTable::new(2);
//! let (mut leader, mut worker) = (procs.attach().unwrap(), procs.attach().unwrap());
//! let mq = Arc::new(ShmMq::new(65_536, ShmMqConfig::default()).unwrap());
//! mq.set_sender(&mut worker).unwrap();
//! mq.set_receiver(&mut leader).unwrap();
//! let mut tx = ShmMqHandle::attach(Arc::clone(&mq), &mut worker).unwrap();
//! let mut rx = ShmMqHandle::attach(mq, &mut leader).unwrap();
//! let sent = tx.send(&mut worker, b"tuple", false, true).unwrap();
//! assert_eq!(sent, ShmMqResult::Success(()));
//! let got = rx.receive(&mut leader, false).unwrap();
//! assert_eq!(got, ShmMqResult::Success(&b"tuple"[..]));
//! tx.detach(&mut worker).unwrap();
//! assert_eq!(rx.receive(&mut leader, false).unwrap(), ShmMqResult::Detached);
//! ```
//!
//! # Differences from PostgreSQL
//! - Backends are explicit: a [`Backend`] takes the place of `MyProc`, and the queue records the
//!   sender and receiver as proc numbers.
//! - The latch ([`pglocks_proc::latch`]) sleeps on the backend's semaphore, which lock waits
//!   share; a wake-up taken by the wrong wait costs a trip around a wait loop, which every loop
//!   here (like PostgreSQL's, which always re-checks) tolerates.
//! - Each queue has its own `Arc` rather than living in a DSM segment; dropping a handle without
//!   [`ShmMqHandle::detach`] detaches the queue as the `on_dsm_detach` callback does
//!   (`shm_mq_detach_callback`), taking `mq_mutex` with plain TAS retries since no backend is at
//!   hand to count spin delays.
//! - No `BackgroundWorkerHandle`: a counterparty is "gone" only once `mq_detached` is set, as in
//!   PostgreSQL when no worker handle was given to `shm_mq_attach`.
//! - A received message is always copied into the handle's buffer and returned from there;
//!   PostgreSQL returns a pointer into the ring when the message lies there contiguously.
//! - The queue's header is a `repr(C)` struct with PostgreSQL's fields in PostgreSQL's order
//!   (the counters side by side, every field on one line), placed in a simulated machine's
//!   shared-memory map; the ring is its own allocation, not the header's tail, and its bytes
//!   are not charged to a simulated CPU.
//! - The length word is always whole (`sizeof(Size) == MAXIMUM_ALIGNOF` on 64-bit), so the path
//!   that reassembles a length word split over two reads (`sizeof(Size) > MAXIMUM_ALIGNOF`) is
//!   not modelled.
//! - Retrying an unfinished non-blocking send with a message of another length is refused with
//!   [`ShmMqError::SendInProgress`]; PostgreSQL documents the rule and corrupts the queue if it
//!   is broken.

mod receive;
mod send;

use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::SpinLock;
use pglocks_sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::shmem::Placed;
use pglocks_sync::sync::Arc;

pub use send::{SHM_SEND_RETRY_INTERVAL_MS, SHM_SEND_TIMEOUT_MS};

/// `MAXIMUM_ALIGNOF` (pg_config.h on 64-bit platforms): every chunk in the ring starts on a
/// multiple of it.
pub const MAXIMUM_ALIGNOF: usize = 8;

/// `MaxAllocSize` (memutils.h): the largest message a queue carries (1 GB - 1).
pub const MAX_ALLOC_SIZE: usize = 0x3fff_ffff;

/// `MAXALIGN(offsetof(shm_mq, mq_ring))` on 64-bit: the queue header that `shm_mq_create` takes
/// from the size it is given (spinlock, two `PGPROC` pointers, two counters, the ring size, the
/// detached flag and the ring offset).
pub const SHM_MQ_HEADER_SIZE: usize = 56;

/// `shm_mq_minimum_size`: a header and room for one aligned chunk.
pub const SHM_MQ_MINIMUM_SIZE: usize = SHM_MQ_HEADER_SIZE + MAXIMUM_ALIGNOF;

/// `MQH_INITIAL_BUFSIZE`: the first size of a handle's reassembly buffer.
pub const MQH_INITIAL_BUFSIZE: usize = 8192;

/// The length word that precedes each message (`Size`).
const LENGTH_WORD: usize = std::mem::size_of::<u64>();

/// `mq_sender` / `mq_receiver` while unset (PostgreSQL's NULL).
const NO_PROC: u32 = u32::MAX;

/// `MAXALIGN`.
#[inline(always)]
const fn maxalign(n: usize) -> usize {
    (n + MAXIMUM_ALIGNOF - 1) & !(MAXIMUM_ALIGNOF - 1)
}

/// `MAXALIGN_DOWN`.
#[inline(always)]
const fn maxalign_down(n: usize) -> usize {
    n & !(MAXIMUM_ALIGNOF - 1)
}

/// Models `shm_mq_result` (shm_mq.h): how a send or receive ended, with the received message on
/// success of a receive.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmMqResult<T = ()> {
    /// `SHM_MQ_SUCCESS`: sent or received a whole message.
    Success(T),
    /// `SHM_MQ_WOULD_BLOCK`: not finished; retry the same call later.
    WouldBlock,
    /// `SHM_MQ_DETACHED`: the other end has detached.
    Detached,
}

impl<T> ShmMqResult<T> {
    /// Whether this is [`ShmMqResult::Success`].
    pub fn is_success(&self) -> bool {
        matches!(self, ShmMqResult::Success(_))
    }
}

/// Misuse of a queue, in PostgreSQL's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShmMqError {
    /// `shm_mq_sendv`'s check against `MaxAllocSize`.
    #[error("cannot send a message of size {size} via shared memory queue")]
    MessageTooLarge {
        /// The message's size in bytes.
        size: usize,
    },
    /// `shm_mq_receive`'s check of a length word against `MaxAllocSize`.
    #[error("invalid message size {size} in shared memory queue")]
    InvalidMessageSize {
        /// The size the length word claims.
        size: usize,
    },
    /// `shm_mq_create` on less memory than `shm_mq_minimum_size`.
    #[error(
        "shared memory queue of {size} bytes is smaller than the minimum of {SHM_MQ_MINIMUM_SIZE}"
    )]
    QueueTooSmall {
        /// The size asked for.
        size: usize,
    },
    /// `shm_mq_set_sender` on a queue that has one (PostgreSQL asserts).
    #[error("shared memory queue already has a sender (backend {procno})")]
    SenderAlreadySet {
        /// The sender's proc number.
        procno: usize,
    },
    /// `shm_mq_set_receiver` on a queue that has one (PostgreSQL asserts).
    #[error("shared memory queue already has a receiver (backend {procno})")]
    ReceiverAlreadySet {
        /// The receiver's proc number.
        procno: usize,
    },
    /// `shm_mq_attach` by a backend that is neither the queue's sender nor its receiver.
    #[error("backend {procno} is neither the sender nor the receiver of this shared memory queue")]
    NotAttached {
        /// The backend's proc number.
        procno: usize,
    },
    /// A send through the receiver's handle (PostgreSQL asserts `mq_sender == MyProc`).
    #[error("backend {procno} is not the sender of this shared memory queue")]
    NotSender {
        /// The backend's proc number.
        procno: usize,
    },
    /// A receive through the sender's handle (PostgreSQL asserts `mq_receiver == MyProc`).
    #[error("backend {procno} is not the receiver of this shared memory queue")]
    NotReceiver {
        /// The backend's proc number.
        procno: usize,
    },
    /// A handle used by another backend than the one that attached it.
    #[error("shared memory queue handle of backend {owner} used by backend {procno}")]
    WrongBackend {
        /// The backend that attached the handle.
        owner: usize,
        /// The backend that used it.
        procno: usize,
    },
    /// A retried non-blocking send with another message than the one under way.
    #[error("a send of {started} bytes is under way on this shared memory queue; retry it before sending {now} bytes")]
    SendInProgress {
        /// The length of the message whose send is unfinished.
        started: usize,
        /// The length of the message now offered.
        now: usize,
    },
    /// `mq_mutex` was never released.
    #[error(transparent)]
    Spin(#[from] pglocks_spin::SpinError),
}

/// Release differences of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShmMqConfig {
    /// Whether the sender batches its counter updates in `mqh_send_pending` and moves
    /// `mq_bytes_written` only past a quarter of the ring, on a full ring or on `force_flush`
    /// (PostgreSQL 15+, commit 46846433a0); without it each written chunk moves the counter and
    /// every message sets the receiver's latch (9.4–14).
    pub batch_send_pending: bool,
}

impl Default for ShmMqConfig {
    /// PostgreSQL 15 and later.
    fn default() -> Self {
        Self {
            batch_send_pending: true,
        }
    }
}

/// The header of `struct shm_mq` (shm_mq.c, 11+): `mq_mutex`, `mq_receiver`, `mq_sender`,
/// `mq_bytes_read`, `mq_bytes_written`, `mq_detached`, in PostgreSQL's order. PostgreSQL's
/// header is 56 bytes on a 64-bit build (the 1-byte `slock_t`, two `PGPROC` pointers at 8 and
/// 16, the counters at 24 and 32, `mq_ring_size` at 40, `mq_detached` at 48, then
/// `mq_ring_offset` and the ring from 56), so on a queue that starts a line every field shares
/// one line, and a sender's move of `mq_bytes_written` takes from the receiver the line it
/// reads `mq_bytes_read` on. Here the spinlock (with its name) takes 24 bytes, the proc numbers
/// 4 each and `mq_ring_size` lives outside (it never changes): the counters at 32 and 40,
/// `mq_detached` at 48, the same one line. It is placed in the simulated shared-memory map as
/// a region named `shm_mq` ([`pglocks_sync::shmem::Placed`]), on a 128-byte boundary, where
/// PostgreSQL's queue lies where `shm_toc_allocate` put it in its DSM segment (`BUFFERALIGN`ed).
#[repr(C)]
struct ShmMqHeader {
    /// `mq_mutex`: guards the setting of `mq_sender` and `mq_receiver`.
    mutex: SpinLock<()>,
    /// `mq_receiver`: the receiver's proc number, or [`NO_PROC`]; written under `mutex`, once.
    receiver: AtomicU32,
    /// `mq_sender`: the sender's proc number, or [`NO_PROC`]; written under `mutex`, once.
    sender: AtomicU32,
    /// `mq_bytes_read`: moved by the receiver only.
    bytes_read: AtomicU64,
    /// `mq_bytes_written`: moved by the sender only.
    bytes_written: AtomicU64,
    /// `mq_detached`: set once, by either end.
    detached: AtomicBool,
}

/// Models `struct shm_mq` (shm_mq.c): the queue in shared memory.
pub struct ShmMq {
    /// The header's place in the simulated shared-memory map (declared first, so it ends
    /// before the memory is freed).
    _placed: Placed,
    header: Box<ShmMqHeader>,
    /// `mq_ring_size`: a multiple of [`MAXIMUM_ALIGNOF`].
    ring_size: usize,
    /// `mq_ring`, as aligned words: each word is written by the sender and read by the receiver,
    /// never both at once (see the module docs), so each is its own cell. Its bytes are not
    /// charged to a simulated CPU (only the header's words are), so it is not placed.
    ring: Box<[UnsafeCell<[u8; MAXIMUM_ALIGNOF]>]>,
    config: ShmMqConfig,
}

// SAFETY: the ring cells are reached only through `ring_write` (by the one sender, on bytes
// between `mq_bytes_written` and `mq_bytes_read + ring_size`) and `ring_read` (by the one receiver,
// on bytes between `mq_bytes_read` and `mq_bytes_written`); the counters' fences order every
// hand-over of a byte range between them. Everything else is atomic or the spinlock.
unsafe impl Sync for ShmMq {}
// SAFETY: the queue owns its ring; moving it to another thread moves plain bytes.
unsafe impl Send for ShmMq {}

impl std::fmt::Debug for ShmMq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmMq")
            .field("ring_size", &self.ring_size)
            .field(
                "bytes_read",
                &self.header.bytes_read.load(Ordering::Relaxed),
            )
            .field(
                "bytes_written",
                &self.header.bytes_written.load(Ordering::Relaxed),
            )
            .field("detached", &self.header.detached.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ShmMq {
    /// Models `shm_mq_create`: a queue in `size` bytes of shared memory, of which the header takes
    /// [`SHM_MQ_HEADER_SIZE`] and odd bytes past a multiple of [`MAXIMUM_ALIGNOF`] are dropped.
    pub fn new(size: usize, config: ShmMqConfig) -> Result<Self, ShmMqError> {
        let size = maxalign_down(size);
        if size < SHM_MQ_MINIMUM_SIZE {
            return Err(ShmMqError::QueueTooSmall { size });
        }
        let ring_size = size - SHM_MQ_HEADER_SIZE;
        let header = Box::new(ShmMqHeader {
            mutex: SpinLock::new("mq_mutex", ()),
            receiver: AtomicU32::new(NO_PROC),
            sender: AtomicU32::new(NO_PROC),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            detached: AtomicBool::new(false),
        });
        Ok(Self {
            _placed: Placed::one("shm_mq", &*header),
            header,
            ring_size,
            ring: (0..ring_size / MAXIMUM_ALIGNOF)
                .map(|_| UnsafeCell::new([0; MAXIMUM_ALIGNOF]))
                .collect(),
            config,
        })
    }

    /// `mq_ring_size`: the bytes the ring holds.
    pub fn ring_size(&self) -> usize {
        self.ring_size
    }

    /// The release differences this queue was created with.
    pub fn config(&self) -> ShmMqConfig {
        self.config
    }

    /// Whether either end has detached (`mq_detached`).
    pub fn is_detached(&self) -> bool {
        self.header.detached.load(Ordering::Acquire)
    }

    /// `mq_bytes_read` and `mq_bytes_written`, as last published.
    pub fn counters(&self) -> (u64, u64) {
        (
            self.header.bytes_read.load(Ordering::Acquire),
            self.header.bytes_written.load(Ordering::Acquire),
        )
    }

    /// Models `shm_mq_set_receiver`: records `b` as the receiver and sets the sender's latch if
    /// the sender is there already.
    pub fn set_receiver(&self, b: &mut Backend) -> Result<(), ShmMqError> {
        self.set_end(b, End::Receiver)
    }

    /// Models `shm_mq_set_sender`: records `b` as the sender and sets the receiver's latch if the
    /// receiver is there already.
    pub fn set_sender(&self, b: &mut Backend) -> Result<(), ShmMqError> {
        self.set_end(b, End::Sender)
    }

    fn set_end(&self, b: &mut Backend, end: End) -> Result<(), ShmMqError> {
        let (mine, theirs) = self.ends(end);
        let other = {
            let _mutex = self.header.mutex.lock(b)?;
            let set = mine.load(Ordering::Relaxed);
            if set != NO_PROC {
                let procno = set as usize;
                return Err(match end {
                    End::Sender => ShmMqError::SenderAlreadySet { procno },
                    End::Receiver => ShmMqError::ReceiverAlreadySet { procno },
                });
            }
            mine.store(b.procno() as u32, Ordering::Release);
            theirs.load(Ordering::Relaxed)
        };
        if other != NO_PROC {
            set_latch(b.procs(), other);
        }
        Ok(())
    }

    /// Models `shm_mq_get_receiver`: the receiver's proc number, read under `mq_mutex`.
    pub fn receiver(&self, b: &mut Backend) -> Result<Option<usize>, ShmMqError> {
        self.read_end(b, End::Receiver)
    }

    /// Models `shm_mq_get_sender`: the sender's proc number, read under `mq_mutex`.
    pub fn sender(&self, b: &mut Backend) -> Result<Option<usize>, ShmMqError> {
        self.read_end(b, End::Sender)
    }

    fn read_end(&self, b: &mut Backend, end: End) -> Result<Option<usize>, ShmMqError> {
        let _mutex = self.header.mutex.lock(b)?;
        let p = self.ends(end).0.load(Ordering::Relaxed);
        Ok((p != NO_PROC).then_some(p as usize))
    }

    /// The field of `end`, then the other end's.
    fn ends(&self, end: End) -> (&AtomicU32, &AtomicU32) {
        match end {
            End::Sender => (&self.header.sender, &self.header.receiver),
            End::Receiver => (&self.header.receiver, &self.header.sender),
        }
    }

    /// Models `shm_mq_detach_internal`: marks the queue detached under `mq_mutex` and sets the
    /// counterparty's latch; `locked` is `mq_mutex`, taken by the caller (with or without a backend).
    fn detach_internal(
        &self,
        procs: &ProcTable,
        me: usize,
        locked: pglocks_spin::SpinLockGuard<'_, (), pglocks_spin::PgSpinLock>,
    ) {
        let victim = if self.header.sender.load(Ordering::Relaxed) == me as u32 {
            self.header.receiver.load(Ordering::Relaxed)
        } else {
            self.header.sender.load(Ordering::Relaxed)
        };
        // Release: a receiver that sees the flag also sees the sender's last counter move
        // (shm_mq_receive_bytes re-reads mq_bytes_written after its read barrier).
        self.header.detached.store(true, Ordering::Release);
        drop(locked);
        if victim != NO_PROC {
            set_latch(procs, victim);
        }
    }

    /// What a `BackgroundWorkerHandle` tells `shm_mq_counterparty_gone` and
    /// `shm_mq_wait_internal`: the process that was to attach to this queue has exited without
    /// doing so. Marks the queue detached and wakes whichever end is attached (the postmaster's
    /// notification sets the latch of the worker's `bgw_notify_pid`).
    pub fn mark_counterparty_gone(&self, procs: &ProcTable) {
        let locked = self.lock_without_backend();
        let ends = [
            self.header.sender.load(Ordering::Relaxed),
            self.header.receiver.load(Ordering::Relaxed),
        ];
        self.header.detached.store(true, Ordering::Release);
        drop(locked);
        for p in ends {
            if p != NO_PROC {
                set_latch(procs, p);
            }
        }
    }

    /// Takes `mq_mutex` by plain TAS retries, for the paths that have no backend at hand to
    /// count `s_lock`'s spin delays (the lock is held for a few instructions).
    fn lock_without_backend(
        &self,
    ) -> pglocks_spin::SpinLockGuard<'_, (), pglocks_spin::PgSpinLock> {
        loop {
            if let Some(g) = self.header.mutex.try_lock() {
                return g;
            }
            pglocks_sync::hint::spin_loop();
        }
    }

    /// Models `shm_mq_inc_bytes_written`: publishes `n` more bytes to the receiver.
    #[inline]
    fn inc_bytes_written(&self, n: usize) {
        // pg_write_barrier: the ring writes before the counter that hands them over.
        fence(Ordering::Release);
        let w = self.header.bytes_written.load(Ordering::Relaxed);
        self.header
            .bytes_written
            .store(w + n as u64, Ordering::Relaxed);
    }

    /// Models `shm_mq_inc_bytes_read`: gives `n` consumed bytes back to the sender and sets its
    /// latch.
    #[inline]
    fn inc_bytes_read(&self, procs: &ProcTable, n: usize) {
        // pg_read_barrier in PostgreSQL (the ring reads before the counter store, which is a read
        // then a dependent write); in the C++ model that ordering is a release fence.
        fence(Ordering::Release);
        let r = self.header.bytes_read.load(Ordering::Relaxed);
        self.header
            .bytes_read
            .store(r + n as u64, Ordering::Relaxed);
        let sender = self.header.sender.load(Ordering::Acquire);
        if sender != NO_PROC {
            set_latch(procs, sender);
        }
    }

    /// Copies `src` into the ring at byte `offset` (a multiple of [`MAXIMUM_ALIGNOF`]); `memcpy`
    /// into `mq_ring`. Only the sender calls it, on bytes the receiver has given back.
    #[inline]
    fn ring_write(&self, offset: usize, src: &[u8]) {
        debug_assert!(offset % MAXIMUM_ALIGNOF == 0 && offset + src.len() <= self.ring_size);
        #[cfg(not(loom))]
        // SAFETY: the words are contiguous bytes (`UnsafeCell<[u8; 8]>` is transparent) and the
        // range lies in the ring. No one else touches these bytes now: they are beyond
        // `mq_bytes_written` (the receiver reads none of them) and within `ring_size` of
        // `mq_bytes_read`, whose move the sender read with acquire ordering, so the receiver's
        // reads of their previous contents are finished; there is one sender.
        unsafe {
            let base = self.ring.as_ptr().cast::<u8>().cast_mut();
            std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len());
        }
        #[cfg(loom)]
        for (i, chunk) in src.chunks(MAXIMUM_ALIGNOF).enumerate() {
            // SAFETY: as above; loom checks it.
            self.ring[offset / MAXIMUM_ALIGNOF + i]
                .with_mut(|w| unsafe { (&mut *w)[..chunk.len()].copy_from_slice(chunk) });
        }
    }

    /// Copies ring bytes from `offset` (a multiple of [`MAXIMUM_ALIGNOF`]) into `dst`. Only the
    /// receiver calls it, on bytes the sender has handed over.
    #[inline]
    fn ring_read(&self, offset: usize, dst: &mut [u8]) {
        debug_assert!(offset % MAXIMUM_ALIGNOF == 0 && offset + dst.len() <= self.ring_size);
        #[cfg(not(loom))]
        // SAFETY: the words are contiguous bytes and the range lies in the ring. No one writes
        // these bytes now: they are below `mq_bytes_written`, whose move the receiver read with
        // acquire ordering (so the sender's writes are complete and visible), and the sender
        // does not write them again before the receiver moves `mq_bytes_read` past them.
        unsafe {
            let base = self.ring.as_ptr().cast::<u8>();
            std::ptr::copy_nonoverlapping(base.add(offset), dst.as_mut_ptr(), dst.len());
        }
        #[cfg(loom)]
        for (i, chunk) in dst.chunks_mut(MAXIMUM_ALIGNOF).enumerate() {
            // SAFETY: as above; loom checks it.
            self.ring[offset / MAXIMUM_ALIGNOF + i]
                .with(|w| chunk.copy_from_slice(unsafe { &(&*w)[..chunk.len()] }));
        }
    }
}

/// Which end of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Sender,
    Receiver,
}

/// `SetLatch(&proc->procLatch)` of backend `procno`.
#[inline]
fn set_latch(procs: &ProcTable, procno: u32) {
    procs.set_latch(procno as usize);
}

/// `WaitLatch(MyLatch, WL_LATCH_SET, 0, event)` then `ResetLatch`: sleeps until the backend's
/// latch is set, counted as wait event `event`.
#[cold]
fn wait_latch(b: &mut Backend, event: &'static str) {
    b.wait_latch_event(None, event);
}

/// Models `shm_mq_handle` (shm_mq.c): one backend's private state for its end of a queue.
///
/// Made by [`ShmMqHandle::attach`] (`shm_mq_attach`); [`ShmMqHandle::detach`] (`shm_mq_detach`)
/// flushes pending bytes and detaches the queue, and dropping the handle without it detaches as
/// `shm_mq_detach_callback` does.
#[derive(Debug)]
pub struct ShmMqHandle {
    /// `mqh_queue`.
    mq: Arc<ShmMq>,
    /// The table holding the backends' latches.
    procs: ProcTable,
    /// The attached backend (`MyProc` at `shm_mq_attach`).
    procno: usize,
    /// `mqh_buffer` / `mqh_buflen`: the reassembly buffer of received messages.
    buffer: Vec<u8>,
    /// `mqh_consume_pending`: bytes received but not yet given back through `mq_bytes_read`.
    consume_pending: usize,
    /// `mqh_send_pending`: bytes written but not yet published through `mq_bytes_written`.
    send_pending: usize,
    /// `mqh_partial_bytes`: bytes of the current message (or length word) sent or received.
    partial_bytes: usize,
    /// `mqh_expected_bytes`: the length of the message being received.
    expected_bytes: usize,
    /// `mqh_length_word_complete`.
    length_word_complete: bool,
    /// `mqh_counterparty_attached`.
    counterparty_attached: bool,
    /// The length of a message whose send returned `WouldBlock` (not in PostgreSQL; see
    /// [`ShmMqError::SendInProgress`]).
    send_in_progress: Option<usize>,
    /// Whether [`Self::detach`] ran (then dropping does nothing more).
    detached: bool,
}

impl ShmMqHandle {
    /// Models `shm_mq_attach`: `b`'s handle on `mq`, of which it must be the sender or the
    /// receiver (either may be set before the other; one backend may be both, with a handle for
    /// each direction).
    pub fn attach(mq: Arc<ShmMq>, b: &mut Backend) -> Result<Self, ShmMqError> {
        let me = b.procno();
        if mq.receiver(b)? != Some(me) && mq.sender(b)? != Some(me) {
            return Err(ShmMqError::NotAttached { procno: me });
        }
        Ok(Self {
            mq,
            procs: b.procs().clone(),
            procno: me,
            buffer: Vec::new(),
            consume_pending: 0,
            send_pending: 0,
            partial_bytes: 0,
            expected_bytes: 0,
            length_word_complete: false,
            counterparty_attached: false,
            send_in_progress: None,
            detached: false,
        })
    }

    /// Models `shm_mq_get_queue`.
    pub fn queue(&self) -> &Arc<ShmMq> {
        &self.mq
    }

    /// Whether this handle's backend is the queue's sender.
    pub fn is_sender(&self) -> bool {
        self.mq.header.sender.load(Ordering::Acquire) == self.procno as u32
    }

    /// Models `shm_mq_wait_for_attach`: waits until the counterparty has attached
    /// ([`ShmMqResult::Success`]) or the queue is detached.
    pub fn wait_for_attach(&mut self, b: &mut Backend) -> Result<ShmMqResult, ShmMqError> {
        self.check_backend(b)?;
        let other = if self.mq.receiver(b)? == Some(self.procno) {
            End::Sender
        } else {
            End::Receiver
        };
        Ok(if self.wait_internal(b, other)? {
            ShmMqResult::Success(())
        } else {
            ShmMqResult::Detached
        })
    }

    /// Models `shm_mq_detach`: publishes the bytes still pending, marks the queue detached and
    /// sets the counterparty's latch.
    pub fn detach(mut self, b: &mut Backend) -> Result<(), ShmMqError> {
        self.check_backend(b)?;
        if self.send_pending > 0 {
            self.mq.inc_bytes_written(self.send_pending);
            self.send_pending = 0;
        }
        self.detached = true;
        let locked = self.mq.header.mutex.lock(b)?;
        self.mq.detach_internal(&self.procs, self.procno, locked);
        Ok(())
    }

    /// Refuses a handle used by another backend than its own.
    #[inline]
    fn check_backend(&self, b: &Backend) -> Result<(), ShmMqError> {
        if b.procno() == self.procno {
            Ok(())
        } else {
            Err(ShmMqError::WrongBackend {
                owner: self.procno,
                procno: b.procno(),
            })
        }
    }

    /// Refuses an operation of the other end (PostgreSQL's `Assert(mq->mq_sender == MyProc)` and
    /// `Assert(mq->mq_receiver == MyProc)`).
    #[inline]
    fn check_end(&self, b: &Backend, end: End) -> Result<(), ShmMqError> {
        self.check_backend(b)?;
        if self.mq.ends(end).0.load(Ordering::Acquire) == self.procno as u32 {
            return Ok(());
        }
        let procno = self.procno;
        Err(match end {
            End::Sender => ShmMqError::NotSender { procno },
            End::Receiver => ShmMqError::NotReceiver { procno },
        })
    }

    /// Models `shm_mq_counterparty_gone` without a worker handle: gone once detached.
    #[inline]
    fn counterparty_gone(&self) -> bool {
        self.mq.header.detached.load(Ordering::Acquire)
    }

    /// Models `shm_mq_wait_internal`: sleeps on the latch until `end` is set (`true`) or the
    /// queue is detached (`false`).
    #[cold]
    fn wait_internal(&self, b: &mut Backend, end: End) -> Result<bool, ShmMqError> {
        loop {
            let set = {
                let _mutex = self.mq.header.mutex.lock(b)?;
                self.mq.ends(end).0.load(Ordering::Relaxed) != NO_PROC
            };
            if self.mq.header.detached.load(Ordering::Acquire) {
                return Ok(false);
            }
            if set {
                return Ok(true);
            }
            wait_latch(b, "MessageQueueInternal");
        }
    }

    /// The other end's proc number as seen by `end`, once known to be attached, read without
    /// the lock (it cannot change once set).
    #[inline]
    fn counterparty(&self, end: End) -> u32 {
        self.mq.ends(end).1.load(Ordering::Acquire)
    }
}

impl Drop for ShmMqHandle {
    /// `shm_mq_detach_callback`: a handle dropped without [`ShmMqHandle::detach`] still detaches
    /// the queue (pending bytes are not published, as the callback does not publish them).
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        let locked = self.mq.lock_without_backend();
        self.mq.detach_internal(&self.procs, self.procno, locked);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pglocks_sync::shmem::Region;

    #[test]
    fn the_header_keeps_its_fields_on_one_line_in_postgresqls_order() {
        use std::mem::{offset_of, size_of};
        assert!(offset_of!(ShmMqHeader, receiver) >= size_of::<SpinLock<()>>());
        assert!(offset_of!(ShmMqHeader, sender) > offset_of!(ShmMqHeader, receiver));
        assert_eq!(
            offset_of!(ShmMqHeader, bytes_written),
            offset_of!(ShmMqHeader, bytes_read) + 8,
            "the counters side by side"
        );
        assert!(size_of::<ShmMqHeader>() <= 64, "one line");
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
    )]
    fn the_header_is_placed_in_the_map() {
        let mq = ShmMq::new(1024, ShmMqConfig::default()).unwrap();
        let region = mq._placed.region();
        assert_ne!(region, Region::detached(), "not placed");
        assert_eq!(region.stride(), std::mem::size_of::<ShmMqHeader>());
    }
}
