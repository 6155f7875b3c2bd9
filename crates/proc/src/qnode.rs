//! The backends' queue nodes: where a queue lock (MCS and the NUMA-aware locks built on it)
//! keeps a waiter's place in line.
//!
//! A queue lock links its waiters through nodes, one per waiter, each spinning on a word of its
//! own node; Linux keeps them in a per-CPU array of `MAX_NODES` (qspinlock.c's `qnodes`) and
//! encodes a node in the lock word as the CPU's number and the index in that array. PostgreSQL's
//! backends are processes, so the only place a node could live is shared memory, beside each
//! backend's `PGPROC`: that is where [`QueueNodes`] puts them, a few *slots* per backend, and a
//! lock names a node by [`NodeId`] (the backend's proc number and the slot), as qspinlock names
//! one by CPU and index.
//!
//! A lock claims a slot when it starts to wait ([`QueueNodes::claim`]) and gives it back when it
//! is done with it ([`QueueNode::give_back`]): at the acquisition for the locks whose waiters
//! leave the queue when they get the lock (qspinlock, CNA, ShflLock), at the release for those
//! whose holder's node stays in the queue (MCS, the cohort and hierarchical locks). A backend
//! holding as many such locks as it has slots, and waiting for one more, finds none free; the
//! locks then do what qspinlock does past `MAX_NODES`, spin on the lock word alone.
//!
//! The store is made, and placed in a simulated machine's map after everything made before it,
//! the first time a backend asks for it ([`crate::ProcTable::queue_nodes`]), so runs that take
//! no queue lock lay their shared memory out as before; a test that wants a particular number
//! of slots (a loom model of two backends of two slots each) makes it first with
//! [`crate::ProcTable::with_queue_slots`].

use pglocks_sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use pglocks_sync::CachePadded;
use std::num::NonZeroU32;

/// Slots per backend when nobody chose: Linux's `MAX_NODES` (qspinlock.c), there for four
/// contexts (task, soft interrupt, interrupt, NMI) and here for locks held at once.
pub const DEFAULT_QUEUE_SLOTS: usize = 4;

/// One queue node: the words a queue lock's waiter shares with its neighbours in line. What each
/// word means is the lock's (each says so in its module); all are zero when the node is claimed.
#[derive(Debug, Default)]
pub struct QueueNode {
    /// The successor in line (`mcs_spinlock.next`), null for none.
    pub next: AtomicPtr<QueueNode>,
    /// What the node's owner waits on (`mcs_spinlock.locked`; CNA keeps the secondary queue's
    /// head here when it hands the lock over, HMCS its pass count).
    pub wait: AtomicUsize,
    /// A second link (CNA's secondary queue's tail, ShflLock's last shuffled waiter).
    pub link: AtomicPtr<QueueNode>,
    /// The owner's NUMA node, written when the node is claimed, for the neighbours that sort
    /// waiters by node.
    pub numa_node: AtomicU32,
    /// A word of the lock's own (CNA's `partial_order`, ShflLock's `wcount`).
    pub count: AtomicU32,
    /// Another (ShflLock's `sleader`, the shuffler's flag).
    pub flag: AtomicU32,
    /// A time of the lock's own (CNA's `start_time`: when its secondary queue began).
    pub stamp: AtomicU64,
    /// What the owner waits to do, for a lock that queues readers and writers in one line
    /// (ShflLock's reader-writer lock: 1 for a reader, whom the shuffler leaves in place).
    pub role: AtomicU32,
    in_use: AtomicBool,
}

impl QueueNode {
    /// Gives a claimed node back to its backend's free slots (only its owner does).
    #[inline]
    pub fn give_back(&self) {
        self.in_use.store(false, Ordering::Relaxed);
    }
}

/// Names a node of a [`QueueNodes`]: `procno × slots + slot + 1`, never 0, so that 0 in a lock
/// word's tail means "no waiter".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(NonZeroU32);

impl NodeId {
    /// The id's number (at least 1), as a lock word's tail holds it.
    #[inline]
    pub fn get(self) -> u32 {
        self.0.get()
    }

    /// The id a tail holds, or `None` for 0.
    #[inline]
    pub fn from_raw(raw: u32) -> Option<NodeId> {
        NonZeroU32::new(raw).map(NodeId)
    }
}

/// Every backend's queue nodes (the `qnodes` of qspinlock.c, per backend rather than per CPU).
#[derive(Debug)]
pub struct QueueNodes {
    /// The nodes' place in a simulated machine's map (first: dropped first).
    _placed: pglocks_sync::shmem::Placed,
    nodes: Box<[CachePadded<QueueNode>]>,
    slots: usize,
}

impl QueueNodes {
    /// `slots` nodes for each of `backends` backends (at least one each).
    pub fn new(backends: usize, slots: usize) -> QueueNodes {
        let slots = slots.max(1);
        let nodes: Box<[CachePadded<QueueNode>]> = (0..backends.max(1) * slots)
            .map(|_| CachePadded::new(QueueNode::default()))
            .collect();
        QueueNodes {
            _placed: pglocks_sync::shmem::Placed::slice("queue nodes", &nodes),
            nodes,
            slots,
        }
    }

    /// Slots per backend.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Claims a free slot of backend `procno` for its owner, with every word zero but
    /// `numa_node`; `None` if every slot is in use. Only the backend itself claims and gives
    /// back its slots, so the flags need no atomicity beyond its own order.
    #[inline]
    pub fn claim(&self, procno: usize, numa_node: usize) -> Option<(NodeId, &QueueNode)> {
        let first = procno * self.slots;
        for (i, node) in self.nodes[first..first + self.slots].iter().enumerate() {
            if !node.in_use.load(Ordering::Relaxed) {
                node.in_use.store(true, Ordering::Relaxed);
                node.next.store(std::ptr::null_mut(), Ordering::Relaxed);
                node.wait.store(0, Ordering::Relaxed);
                node.link.store(std::ptr::null_mut(), Ordering::Relaxed);
                node.count.store(0, Ordering::Relaxed);
                node.flag.store(0, Ordering::Relaxed);
                node.stamp.store(0, Ordering::Relaxed);
                node.role.store(0, Ordering::Relaxed);
                node.numa_node.store(numa_node as u32, Ordering::Relaxed);
                let id = (first + i + 1) as u32;
                return Some((NodeId(NonZeroU32::new(id).expect("ids start at 1")), node));
            }
        }
        None
    }

    /// The node `id` names.
    #[inline]
    pub fn node(&self, id: NodeId) -> &QueueNode {
        &self.nodes[id.get() as usize - 1]
    }

    /// The proc number of the backend whose slot `node` is.
    #[inline]
    pub fn owner(&self, node: &QueueNode) -> usize {
        (self.id_of(node).get() as usize - 1) / self.slots
    }

    /// The id of a node of this store (its address's index).
    #[inline]
    pub fn id_of(&self, node: &QueueNode) -> NodeId {
        let base = self.nodes.as_ptr() as usize;
        let i = (node as *const QueueNode as usize - base)
            / std::mem::size_of::<CachePadded<QueueNode>>();
        NodeId(NonZeroU32::new(i as u32 + 1).expect("ids start at 1"))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_backend_claims_its_own_slots_until_none_is_free() {
        let store = QueueNodes::new(3, 2);
        let (a, na) = store.claim(1, 5).unwrap();
        let (b, _) = store.claim(1, 5).unwrap();
        assert_eq!((a.get(), b.get()), (3, 4));
        assert!(store.claim(1, 5).is_none());
        assert_eq!(na.numa_node.load(Ordering::Relaxed), 5);
        assert_eq!(store.id_of(store.node(b)), b);
        assert_eq!((store.owner(na), store.owner(store.node(b))), (1, 1));
        na.give_back();
        assert_eq!(store.claim(1, 0).unwrap().0, a);
        let (first, n0) = store.claim(0, 0).unwrap();
        assert_eq!((first.get(), store.owner(n0)), (1, 0));
        assert_eq!(NodeId::from_raw(0), None);
    }
}
