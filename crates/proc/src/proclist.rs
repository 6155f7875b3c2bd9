//! Models the operations on `proclist_head` and `proclist_node` (storage/proclist.h): a
//! doubly-linked list of backends, threaded through link fields that live in each backend's
//! `PGPROC` rather than in the list, and naming backends by proc number rather than by pointer (so
//! the same list works in every process's address space). The two types themselves are defined in
//! [`proclist_types`](crate::proclist_types), as PostgreSQL defines them in proclist_types.h, and
//! re-exported here.
//!
//! PostgreSQL queues LWLock waiters on such a list (`lwWaitLink`), and condition variables theirs.
//! A list head is two proc numbers, `head` and `tail`; a node is `next` and `prev`, holding
//! [`INVALID_PROCNO`] at the ends. A node that is on no list is all zeroes — it cannot be confused
//! with a real one, because a list member whose `next` and `prev` were both proc 0 would be a cycle,
//! which lists never are. That is how [`ProcList::contains`] answers without walking the list.
//!
//! Neither heads nor nodes synchronise anything: the caller holds the lock that protects the list
//! (for an LWLock, its wait-list lock). The node fields are relaxed atomics only so that a node can
//! sit in the shared [`ProcSlot`]; every access is made under that lock.
//!
//! Differences from PostgreSQL: a node is chosen by a function from the slot to the node
//! ([`Link`]) instead of a byte offset into `PGPROC`, and iteration is a method that tolerates the
//! body removing the current element (what `proclist_foreach_modify` allows).

use crate::backend::{ProcSlot, ProcTable};
pub use crate::proclist_types::{ProcList, ProcListNode, INVALID_PROCNO};
use pglocks_sync::atomic::Ordering::Relaxed;

impl ProcListNode {
    fn get(&self) -> (u32, u32) {
        (self.next.load(Relaxed), self.prev.load(Relaxed))
    }

    fn set(&self, next: u32, prev: u32) {
        self.next.store(next, Relaxed);
        self.prev.store(prev, Relaxed);
    }
}

/// Which node of a [`ProcSlot`] a list is threaded through (`lwWaitLink`, …).
pub type Link = fn(&ProcSlot) -> &ProcListNode;

impl Default for ProcList {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcList {
    /// An empty list (`proclist_init`).
    pub const fn new() -> Self {
        Self {
            head: INVALID_PROCNO,
            tail: INVALID_PROCNO,
        }
    }

    /// `proclist_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.head == INVALID_PROCNO
    }

    /// The first backend, if any.
    pub fn head(&self) -> Option<u32> {
        (self.head != INVALID_PROCNO).then_some(self.head)
    }

    fn node(procs: &ProcTable, link: Link, procno: u32) -> &ProcListNode {
        link(procs.slot(procno as usize))
    }

    /// `proclist_push_head`: `procno`, on no list of this kind, becomes the first element.
    pub fn push_head(&mut self, procs: &ProcTable, link: Link, procno: u32) {
        debug_assert!(!Self::contains(procs, link, procno));
        if self.head == INVALID_PROCNO {
            Self::node(procs, link, procno).set(INVALID_PROCNO, INVALID_PROCNO);
            self.tail = procno;
        } else {
            Self::node(procs, link, procno).set(self.head, INVALID_PROCNO);
            Self::node(procs, link, self.head)
                .prev
                .store(procno, Relaxed);
        }
        self.head = procno;
    }

    /// `proclist_push_tail`: `procno`, on no list of this kind, becomes the last element.
    pub fn push_tail(&mut self, procs: &ProcTable, link: Link, procno: u32) {
        debug_assert!(!Self::contains(procs, link, procno));
        if self.tail == INVALID_PROCNO {
            Self::node(procs, link, procno).set(INVALID_PROCNO, INVALID_PROCNO);
            self.head = procno;
        } else {
            Self::node(procs, link, procno).set(INVALID_PROCNO, self.tail);
            Self::node(procs, link, self.tail)
                .next
                .store(procno, Relaxed);
        }
        self.tail = procno;
    }

    /// `proclist_delete`: unlinks `procno`, which must be on this list, and zeroes its node.
    pub fn delete(&mut self, procs: &ProcTable, link: Link, procno: u32) {
        let (next, prev) = Self::node(procs, link, procno).get();
        debug_assert!(Self::contains(procs, link, procno));
        if prev == INVALID_PROCNO {
            self.head = next;
        } else {
            Self::node(procs, link, prev).next.store(next, Relaxed);
        }
        if next == INVALID_PROCNO {
            self.tail = prev;
        } else {
            Self::node(procs, link, next).prev.store(prev, Relaxed);
        }
        Self::node(procs, link, procno).set(0, 0);
    }

    /// `proclist_pop_head_node`: removes and returns the first backend.
    pub fn pop_head(&mut self, procs: &ProcTable, link: Link) -> Option<u32> {
        let first = self.head()?;
        self.delete(procs, link, first);
        Some(first)
    }

    /// `proclist_contains`: whether `procno` is on a list of this kind (the list it is on is
    /// not checked: a backend is on at most one list per link).
    pub fn contains(procs: &ProcTable, link: Link, procno: u32) -> bool {
        Self::node(procs, link, procno).get() != (0, 0)
    }

    /// `proclist_foreach_modify`: calls `f` on every member in order; `f` may delete the member
    /// it is given (the next one is read before the call). `f` returns `false` to stop early.
    pub fn for_each_modify(
        &mut self,
        procs: &ProcTable,
        link: Link,
        mut f: impl FnMut(&mut Self, u32) -> bool,
    ) {
        let mut cur = self.head;
        while cur != INVALID_PROCNO {
            let next = Self::node(procs, link, cur).next.load(Relaxed);
            if !f(self, cur) {
                return;
            }
            cur = next;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn link(s: &ProcSlot) -> &ProcListNode {
        &s.lw_wait_link
    }

    fn members(list: &mut ProcList, procs: &ProcTable) -> Vec<u32> {
        let mut v = Vec::new();
        list.for_each_modify(procs, link, |_, p| {
            v.push(p);
            true
        });
        v
    }

    #[test]
    fn proc_zero_alone_is_still_a_member() {
        let procs = ProcTable::new(2);
        let mut l = ProcList::new();
        assert!(!ProcList::contains(&procs, link, 0));
        l.push_tail(&procs, link, 0);
        assert!(ProcList::contains(&procs, link, 0));
        l.push_tail(&procs, link, 1);
        // proc 1's prev is proc 0 and its next is the end: a member, not "zeroed".
        assert!(ProcList::contains(&procs, link, 1));
        l.delete(&procs, link, 0);
        assert!(!ProcList::contains(&procs, link, 0));
        assert_eq!(members(&mut l, &procs), vec![1]);
    }

    #[test]
    fn foreach_modify_may_delete_the_current_member() {
        let procs = ProcTable::new(4);
        let mut l = ProcList::new();
        for p in 0..4 {
            l.push_tail(&procs, link, p);
        }
        l.for_each_modify(&procs, link, |l, p| {
            if p % 2 == 0 {
                l.delete(&procs, link, p);
            }
            true
        });
        assert_eq!(members(&mut l, &procs), vec![1, 3]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushHead(u32),
        PushTail(u32),
        Delete(u32),
        PopHead,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The list against a VecDeque: same members in the same order, same membership answers.
        #[test]
        fn behaves_like_a_deque(ops in prop::collection::vec(prop_oneof![
            (0u32..6).prop_map(Op::PushHead),
            (0u32..6).prop_map(Op::PushTail),
            (0u32..6).prop_map(Op::Delete),
            Just(Op::PopHead),
        ], 0..60)) {
            let procs = ProcTable::new(6);
            let mut list = ProcList::new();
            let mut model: VecDeque<u32> = VecDeque::new();
            for op in ops {
                match op {
                    // A backend is on at most one list per link: pushes of members are skipped.
                    Op::PushHead(p) if !model.contains(&p) => {
                        list.push_head(&procs, link, p);
                        model.push_front(p);
                    }
                    Op::PushTail(p) if !model.contains(&p) => {
                        list.push_tail(&procs, link, p);
                        model.push_back(p);
                    }
                    Op::Delete(p) if model.contains(&p) => {
                        list.delete(&procs, link, p);
                        model.retain(|&q| q != p);
                    }
                    Op::PopHead => prop_assert_eq!(list.pop_head(&procs, link), model.pop_front()),
                    _ => {}
                }
                prop_assert_eq!(members(&mut list, &procs), Vec::from(model.clone()));
                prop_assert_eq!(list.is_empty(), model.is_empty());
                for p in 0..6 {
                    prop_assert_eq!(ProcList::contains(&procs, link, p), model.contains(&p));
                }
            }
        }
    }
}
