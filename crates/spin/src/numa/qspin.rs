//! Linux's queued spinlock, and CNA as the policy it compiles a second time with.
//!
//! # The algorithm (kernel/locking/qspinlock.c, include/asm-generic/qspinlock_types.h)
//! One 32-bit word: the *locked* byte (bits 0–7), the *pending* bit (bit 8) and the *tail*
//! (bits 9–31), which names the last waiter's queue node. Taking a free lock is one
//! compare-exchange from 0 to locked. The first waiter does not queue: it sets pending and
//! spins on the locked byte, and when that clears it takes the lock by clearing pending and
//! setting locked in one addition. Later waiters queue MCS-style: each claims a node, swaps the
//! tail to name it, links itself behind the old tail's node and spins on its own node's word
//! until the one before hands it the head of the queue. The head spins on the lock word until
//! both locked and pending are clear, then either takes the lock and empties the tail in one
//! compare-exchange (it was the last waiter), or sets locked and hands the head on to its
//! successor. Release clears the locked byte; the queue is never touched by a release.
//!
//! # CNA (Dice and Kogan, EuroSys 2019; Linux's "Add NUMA-awareness to qspinlock", v14)
//! The same slow path with four hooks ([`QueuePolicy`]): while the head waits for the lock word,
//! it looks one waiter ahead and, if that waiter runs on another NUMA node and has a successor,
//! moves it to a *secondary queue* (`cna_order_queue`, `cna_splice_next`), so that the lock
//! goes on to a waiter of the holder's node. The secondary queue is circular; the head
//! passes it on in the word its successor spins on (1: none; more: the secondary tail's
//! encoded id). It goes back in front of the main queue when the main queue empties
//! (`cna_try_clear_tail`) or when it has waited longer than the intra-node hand-over
//! threshold (`cna_lock_handoff` after `FLUSH_SECONDARY_QUEUE`). To spare the scan when there
//! is nothing to gain, a head with no secondary queue skips it 127 times in 128
//! (`SHUFFLE_REDUCTION_PROB_ARG`).
//!
//! | constant | value | source |
//! |---|---|---|
//! | `_Q_PENDING_LOOPS` | 512 (1 under loom, the generic value) | arch/x86/include/asm/qspinlock.h |
//! | `MAX_NODES` | 4 | qspinlock.c ([`DEFAULT_QUEUE_SLOTS`](pglocks_proc::qnode::DEFAULT_QUEUE_SLOTS)) |
//! | `intra_node_handoff_threshold` | 10 ms | v14 patch 4/6 (`numa_spinlock_threshold`, 1–100 ms) |
//! | `SHUFFLE_REDUCTION_PROB_ARG` | 7 (skip with probability 127/128) | v14 patch 6/6 |
//!
//! # Differences from Linux
//! - The word uses the `NR_CPUS >= 16K` layout (one pending bit, the tail from bit 9), because
//!   a table of backends can be larger than 16K; the tail is the node's [`NodeId`] rather than
//!   CPU and index, since nodes are per backend ([`pglocks_proc::qnode`]).
//! - Rust's atomics (and loom) cannot mix a byte store with a word compare-exchange on the same
//!   memory, so where Linux stores the locked byte (`set_locked`, and the release) this is an
//!   atomic OR or AND of the word: a locked instruction where Linux has a plain store.
//! - A node is claimed from the backend's slots; past them, the lock spins on `try_lock` as
//!   qspinlock does past `MAX_NODES`.
//! - No paravirtual hooks. CNA has no priority waiters (`CNA_PRIORITY_NODE`: interrupt context,
//!   real-time tasks), which backends never are, and no `real_numa_node`, which only those
//!   need; its "probably" draws from the backend's random-number state, and the threshold's
//!   clock is the shim's ([`pglocks_sync::time::Instant`]), virtual time on a simulated CPU.

use crate::{RawSpinLock, StuckSpinlock};
use pglocks_proc::qnode::{NodeId, QueueNode, QueueNodes};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicU32, Ordering};
use pglocks_sync::hint;
use rand::RngExt;
use std::marker::PhantomData;
use std::ptr;

/// `_Q_LOCKED_VAL`: the locked byte set.
const LOCKED: u32 = 1;
/// `_Q_LOCKED_MASK`.
const LOCKED_MASK: u32 = 0xff;
/// `_Q_PENDING_VAL`.
const PENDING: u32 = 1 << 8;
/// `_Q_TAIL_OFFSET` of the `NR_CPUS >= 16K` layout.
const TAIL_SHIFT: u32 = 9;
/// `_Q_TAIL_MASK`.
const TAIL_MASK: u32 = !(LOCKED_MASK | PENDING);
/// `_Q_PENDING_LOOPS` on x86 (under loom, the generic value 1: every round of the wait is a
/// branch of the model).
#[cfg(not(loom))]
pub const PENDING_LOOPS: u32 = 1 << 9;
/// `_Q_PENDING_LOOPS` as asm-generic has it, which loom's models use.
#[cfg(loom)]
pub const PENDING_LOOPS: u32 = 1;

/// `encode_tail`: a node's id in the word's tail bits (never 0 or 1, so CNA can tell it from
/// its "no secondary queue" value).
#[inline]
fn encode(id: NodeId) -> u32 {
    id.get() << TAIL_SHIFT
}

/// `decode_tail`.
#[inline]
fn decode(nodes: &QueueNodes, tail: u32) -> &QueueNode {
    let id = NodeId::from_raw(tail >> TAIL_SHIFT).expect("a tail names a node");
    nodes.node(id)
}

/// The hooks CNA fills in (qspinlock.c's `pv_init_node`, `pv_wait_head_or_lock`,
/// `try_clear_tail` and `mcs_lock_handoff`); [`Stock`] leaves them as qspinlock has them.
pub trait QueuePolicy: Send + Sync + 'static {
    /// The name `--impl` takes.
    const NAME: &'static str;

    /// Runs once the node is the queue's head, before it waits for the lock word; `draw` is a
    /// random number the backend drew when it queued.
    fn wait_head(node: &QueueNode, nodes: &QueueNodes, draw: u32);

    /// The head is the last in line (the tail names it) and the lock word is free of locked
    /// and pending: takes the lock and empties the queue (`val` is the word it saw); false if
    /// the word changed meanwhile.
    fn try_clear_tail(lock: &AtomicU32, val: u32, node: &QueueNode, nodes: &QueueNodes) -> bool;

    /// The head holds the lock and its successor has linked itself: hands the queue's head on.
    fn handoff(node: &QueueNode, nodes: &QueueNodes);
}

/// Linux's qspinlock as it ships: no hooks.
#[derive(Debug)]
pub struct Stock;

impl QueuePolicy for Stock {
    const NAME: &'static str = "qspinlock";

    #[inline]
    fn wait_head(_: &QueueNode, _: &QueueNodes, _: u32) {}

    #[inline]
    fn try_clear_tail(lock: &AtomicU32, val: u32, _: &QueueNode, _: &QueueNodes) -> bool {
        lock.compare_exchange(val, LOCKED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    fn handoff(node: &QueueNode, _: &QueueNodes) {
        let next = node.next.load(Ordering::Acquire);
        // SAFETY: the successor linked itself (the caller waited for it) and spins on its node
        // until this store; nodes live as long as the table of backends.
        unsafe { (*next).wait.store(1, Ordering::Release) };
    }
}

/// `partial_order` values (the node's `count` word; `LOCAL_WAITER_FOUND`, 0, is how a claimed
/// node starts).
const LOCAL_WAITER_NOT_FOUND: u32 = 1;
const FLUSH_SECONDARY_QUEUE: u32 = 2;

/// CNA, as Linux's v14 series puts it into qspinlock, with its intra-node hand-over threshold
/// (`THRESHOLD_US` microseconds; 0 flushes at every chance, `u64::MAX` never) and its shuffle reduction (a head
/// with no secondary queue skips the scan unless `REDUCTION_BITS` random bits are all zero; 0
/// never skips). [`CnaLock`] has Linux's values.
#[derive(Debug)]
pub struct Cna<const REDUCTION_BITS: u32, const THRESHOLD_US: u64>;

/// The clock CNA's threshold reads, in microseconds from the first reading, never 0.
fn now_us() -> u64 {
    static EPOCH: std::sync::OnceLock<pglocks_sync::time::Instant> = std::sync::OnceLock::new();
    let now = pglocks_sync::time::Instant::now();
    let epoch = *EPOCH.get_or_init(|| now);
    now.duration_since(epoch).as_micros() as u64 + 1
}

impl<const REDUCTION_BITS: u32, const THRESHOLD_US: u64> Cna<REDUCTION_BITS, THRESHOLD_US> {
    /// `cna_order_queue`: if the next waiter is on another node and has a successor, moves it
    /// to the secondary queue; the waiter then next in line inherits the head's node.
    fn order_queue(node: &QueueNode, nodes: &QueueNodes) {
        let next = node.next.load(Ordering::Acquire);
        if next.is_null() {
            node.count.store(LOCAL_WAITER_NOT_FOUND, Ordering::Relaxed);
            return;
        }
        let mine = node.numa_node.load(Ordering::Relaxed);
        // SAFETY: a linked successor spins on its node until the head hands over; the head is
        // the only one that moves it.
        let mut next = unsafe { &*next };
        if next.numa_node.load(Ordering::Relaxed) != mine {
            let nnext = next.next.load(Ordering::Acquire);
            if !nnext.is_null() {
                Self::splice_next(node, next, nnext, nodes);
                // SAFETY: as `next`.
                next = unsafe { &*nnext };
            }
            next.numa_node.store(mine, Ordering::Relaxed);
        }
    }

    /// `cna_splice_next`: moves `next` from behind `node` to the secondary queue's tail.
    fn splice_next(node: &QueueNode, next: &QueueNode, nnext: *mut QueueNode, nodes: &QueueNodes) {
        node.next.store(nnext, Ordering::Relaxed);
        let me = next as *const QueueNode as *mut QueueNode;
        let secondary = node.wait.load(Ordering::Relaxed);
        if secondary <= 1 {
            // A queue of one, circular; its age starts now.
            next.next.store(me, Ordering::Relaxed);
            node.stamp.store(now_us(), Ordering::Relaxed);
        } else {
            let tail = decode(nodes, secondary as u32);
            next.next
                .store(tail.next.load(Ordering::Relaxed), Ordering::Relaxed);
            tail.next.store(me, Ordering::Relaxed);
        }
        node.wait
            .store(encode(nodes.id_of(next)) as usize, Ordering::Relaxed);
    }

    /// `cna_splice_head`: puts the whole secondary queue in front of `next` (or makes it the
    /// queue, `next` null) and returns its head.
    fn splice_head(node: &QueueNode, next: *mut QueueNode, nodes: &QueueNodes) -> *mut QueueNode {
        let tail = decode(nodes, node.wait.load(Ordering::Relaxed) as u32);
        let head = tail.next.load(Ordering::Relaxed);
        tail.next.store(next, Ordering::Relaxed);
        head
    }

    fn threshold_passed(start: u64) -> bool {
        THRESHOLD_US == 0 || now_us() > start.saturating_add(THRESHOLD_US)
    }
}

impl<const REDUCTION_BITS: u32, const THRESHOLD_US: u64> QueuePolicy
    for Cna<REDUCTION_BITS, THRESHOLD_US>
{
    const NAME: &'static str = "cna";

    /// `cna_wait_head_or_lock`.
    fn wait_head(node: &QueueNode, nodes: &QueueNodes, draw: u32) {
        let reduce = REDUCTION_BITS > 0
            && node.wait.load(Ordering::Relaxed) <= 1
            && draw & ((1 << REDUCTION_BITS) - 1) != 0;
        if reduce {
            return;
        }
        let start = node.stamp.load(Ordering::Relaxed);
        if start == 0 || !Self::threshold_passed(start) {
            Self::order_queue(node, nodes);
        } else {
            node.count.store(FLUSH_SECONDARY_QUEUE, Ordering::Relaxed);
        }
    }

    /// `cna_try_clear_tail`.
    fn try_clear_tail(lock: &AtomicU32, val: u32, node: &QueueNode, nodes: &QueueNodes) -> bool {
        let secondary = node.wait.load(Ordering::Relaxed);
        if secondary <= 1 {
            return Stock::try_clear_tail(lock, val, node, nodes);
        }
        // The secondary queue becomes the queue: its tail the lock's tail, its head the head.
        let head = Self::splice_head(node, ptr::null_mut(), nodes);
        let new = secondary as u32 | LOCKED;
        if lock
            .compare_exchange(val, new, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the secondary head spins on its node until this store.
            unsafe { (*head).wait.store(1, Ordering::Release) };
            return true;
        }
        // Someone queued meanwhile: restore the circle and hand over as usual.
        decode(nodes, secondary as u32)
            .next
            .store(head, Ordering::Relaxed);
        false
    }

    /// `cna_lock_handoff`.
    fn handoff(node: &QueueNode, nodes: &QueueNodes) {
        if node.count.load(Ordering::Relaxed) == LOCAL_WAITER_NOT_FOUND {
            Self::order_queue(node, nodes);
        }
        let mut next = node.next.load(Ordering::Acquire);
        let mut val = 1;
        if node.count.load(Ordering::Relaxed) != FLUSH_SECONDARY_QUEUE {
            let secondary = node.wait.load(Ordering::Relaxed);
            if secondary > 1 {
                val = secondary;
                // SAFETY: the successor waits on its node until this hand-over.
                unsafe {
                    (*next)
                        .stamp
                        .store(node.stamp.load(Ordering::Relaxed), Ordering::Relaxed)
                };
            }
        } else {
            next = Self::splice_head(node, next, nodes);
        }
        // SAFETY: as above; this store is the head's last touch of the successor's node.
        unsafe { (*next).wait.store(val, Ordering::Release) };
    }
}

/// Linux's queued spinlock with the hand-over policy `P`: [`QSpinLock`] (stock) or [`CnaLock`].
#[derive(Debug)]
pub struct QueuedSpinLock<P: QueuePolicy> {
    word: AtomicU32,
    _policy: PhantomData<P>,
}

/// Linux's qspinlock as it ships.
pub type QSpinLock = QueuedSpinLock<Stock>;

/// CNA on qspinlock, with the v14 series' constants.
pub type CnaLock = QueuedSpinLock<Cna<7, 10_000>>;

impl<P: QueuePolicy> QueuedSpinLock<P> {
    /// Models `queued_spin_lock_slowpath` (qspinlock.c), `val` the word the fast path saw.
    #[cold]
    #[inline(never)]
    fn lock_slow(&self, mut val: u32, backend: &mut Backend) {
        // A hand-over from pending to locked is under way: wait a little for it to finish.
        if val == PENDING {
            let mut loops = PENDING_LOOPS;
            while val == PENDING && loops > 0 {
                hint::spin_loop();
                val = self.word.load(Ordering::Relaxed);
                loops -= 1;
            }
        }
        if val & !LOCKED_MASK == 0 {
            // Pending is free: claim it and wait for the holder alone, without a node.
            let old = self.word.fetch_or(PENDING, Ordering::Acquire);
            if old & !LOCKED_MASK == 0 {
                if old & LOCKED_MASK != 0 {
                    while self.word.load(Ordering::Acquire) & LOCKED_MASK != 0 {
                        hint::spin_wait();
                    }
                }
                // clear_pending_set_locked, an addition in this layout.
                self.word
                    .fetch_add(LOCKED.wrapping_sub(PENDING), Ordering::Relaxed);
                return;
            }
            // Someone else is pending or queued: undo our pending bit if it was ours.
            if old & PENDING == 0 {
                self.word.fetch_and(!PENDING, Ordering::Relaxed);
            }
        }
        self.queue(backend);
    }

    fn queue(&self, backend: &mut Backend) {
        let draw: u32 = backend.rng.random();
        let nodes = backend.procs().queue_nodes();
        let Some((id, node)) = nodes.claim(backend.procno(), backend.numa_node()) else {
            return super::spin_on_try_lock(self);
        };
        if self.try_lock() {
            node.give_back();
            return;
        }
        let tail = encode(id);
        // xchg_tail: keep locked and pending, put our node in the tail. Release publishes the
        // node's reset words (Linux's smp_wmb); Acquire orders our link into the old tail's
        // node after its owner reset it, which Linux leaves to the address dependency from the
        // tail to the node (the C++ model this code is checked under has none).
        let mut old = self.word.load(Ordering::Relaxed);
        loop {
            match self.word.compare_exchange_weak(
                old,
                (old & !TAIL_MASK) | tail,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(v) => {
                    old = v;
                    hint::spin_loop();
                }
            }
        }
        if old & TAIL_MASK != 0 {
            let prev = decode(nodes, old & TAIL_MASK);
            prev.next.store(
                node as *const QueueNode as *mut QueueNode,
                Ordering::Release,
            );
            while node.wait.load(Ordering::Acquire) == 0 {
                hint::spin_wait();
            }
        }
        // The head of the queue.
        P::wait_head(node, nodes, draw);
        let val = loop {
            let v = self.word.load(Ordering::Acquire);
            if v & (LOCKED_MASK | PENDING) == 0 {
                break v;
            }
            hint::spin_wait();
        };
        if val & TAIL_MASK == tail && P::try_clear_tail(&self.word, val, node, nodes) {
            node.give_back();
            return;
        }
        // Others are queued behind: take the lock (no one else can: pending is clear and the
        // fast path sees the tail), then hand the head on once the successor has linked.
        self.word.fetch_or(LOCKED, Ordering::Relaxed);
        while node.next.load(Ordering::Acquire).is_null() {
            hint::spin_wait();
        }
        P::handoff(node, nodes);
        node.give_back();
    }
}

// SAFETY: the lock is held from the compare-exchange or addition that sets the locked byte
// while it was clear (the fast path, the pending waiter, or the head that alone may set it once
// locked and pending are clear) to the release's clearing of it (Release), whose
// acquisition-side loads are Acquire.
unsafe impl<P: QueuePolicy> RawSpinLock for QueuedSpinLock<P> {
    const NAME: &'static str = P::NAME;

    fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
            _policy: PhantomData,
        }
    }

    /// Models `queued_spin_lock` (asm-generic/qspinlock.h).
    #[inline]
    fn lock(&self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        if let Err(val) =
            self.word
                .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
        {
            self.lock_slow(val, backend);
        }
        Ok(())
    }

    /// Models `queued_spin_trylock`.
    #[inline]
    fn try_lock(&self) -> bool {
        self.word.load(Ordering::Relaxed) == 0
            && self
                .word
                .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Models `queued_spin_unlock`.
    #[inline]
    unsafe fn unlock(&self) {
        self.word.fetch_and(!LOCKED_MASK, Ordering::Release);
    }
}
