//! Models deadlock.c: `DeadLockCheck` and the search under it, run by a backend that has
//! waited `deadlock_timeout` for a lock, with every lock-table partition held.
//!
//! # The algorithm
//! The *waits-for graph* has a node per backend and two kinds of edge out of a waiting backend
//! W:
//! - a **hard edge** W → H for every backend H that holds a mode of W's lock conflicting with
//!   W's request: W cannot go on until H lets go;
//! - a **soft edge** W → A for every backend A waiting *ahead of* W in the same queue with a
//!   conflicting request: W waits for A only because of the queue order, which could be changed.
//!
//! A cycle through the checking backend made of hard edges only is a real deadlock. A cycle that
//! uses soft edges may be broken by reordering wait queues: each soft edge W → A of the cycle is
//! tried in turn as a *constraint* "W must come before A" (depth-first, constraints piling up);
//! the constraints on each lock are turned into a new queue order by a topological sort that
//! keeps the current order as far as it can; and the graph is searched again under the
//! hypothetical orders. The first set of constraints under which no cycle remains wins: the
//! caller rewrites those queues and wakes whoever the new order lets in (a *soft* deadlock).
//! If every choice fails, it is a *hard* deadlock and the cycle found in the real graph is
//! reported.
//!
//! The workspace is bounded as PostgreSQL bounds it (`InitDeadLockChecking`): at most
//! `MaxBackends` constraints at once and `4 × MaxBackends` saved edges; running out counts as
//! a hard deadlock.
//!
//! Differences from PostgreSQL: there are no lock groups (parallel query) and no autovacuum
//! workers, so `DS_BLOCKED_BY_AUTOVACUUM` never arises; an edge list that does not fit the
//! saved-edge space is not regenerated but kept (the result is the same).

use crate::mode::LockMode;
use crate::table::{Lock, Waiter};
use crate::{LockTag, LockTagType};

/// What the checker reads: the lock each backend waits for, and the lock objects.
pub(crate) trait WaitGraph {
    /// The lock `procno` waits for (`PGPROC.waitLock`), if it waits.
    fn waiting_on(&self, procno: u32) -> Option<LockTag>;
    /// The lock object of `tag`.
    fn lock(&self, tag: &LockTag) -> Option<&Lock>;
}

/// deadlock.c's `EDGE`: `waiter` waits for `blocker` on `lock` (as a constraint: `waiter`
/// must come before `blocker` in `lock`'s queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edge {
    pub waiter: u32,
    pub blocker: u32,
    pub lock: LockTag,
}

/// deadlock.c's `WAIT_ORDER`: a proposed queue for one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WaitOrder {
    pub lock: LockTag,
    pub procs: Vec<Waiter>,
}

/// deadlock.c's `DEADLOCK_INFO`: one member of a deadlock cycle, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlockInfo {
    /// The lock it waits for.
    pub tag: LockTag,
    /// The mode it waits for.
    pub mode: LockMode,
    /// The waiting backend (its process number stands in for the pid).
    pub procno: u32,
}

/// lock.h's `DeadLockState`, with what each outcome needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeadlockState {
    /// `DS_NO_DEADLOCK`.
    NoDeadlock,
    /// `DS_SOFT_DEADLOCK`: rewrite these queues (then wake their waiters).
    Soft(Vec<WaitOrder>),
    /// `DS_HARD_DEADLOCK`: the cycle, starting at the checking backend.
    Hard(Vec<DeadlockInfo>),
}

/// `TestConfiguration`'s answer.
enum Test {
    /// No cycle through anyone involved.
    Clear,
    /// A cycle that soft edges alone cannot break (or the workspace ran out).
    Hard,
    /// The soft edges of the last cycle found.
    Soft(Vec<Edge>),
}

/// The checker's workspace (deadlock.c's static arrays).
struct Checker<'g, G> {
    graph: &'g G,
    max_backends: usize,
    visited: Vec<u32>,
    details: Vec<DeadlockInfo>,
    constraints: Vec<Edge>,
    saved_edges: usize,
    wait_orders: Vec<WaitOrder>,
}

/// Models `DeadLockCheck(proc)`.
pub(crate) fn dead_lock_check<G: WaitGraph>(
    graph: &G,
    max_backends: usize,
    procno: u32,
) -> DeadlockState {
    let mut c = Checker {
        graph,
        max_backends: max_backends.max(1),
        visited: Vec::new(),
        details: Vec::new(),
        constraints: Vec::new(),
        saved_edges: 0,
        wait_orders: Vec::new(),
    };
    if c.check_recurse(procno) {
        // No reordering helps: find the cycle in the real queues to report it.
        c.wait_orders.clear();
        if c.find_lock_cycle(procno).is_none() {
            // PostgreSQL's "deadlock seems to have disappeared" cannot happen with every
            // partition held; answer as if no deadlock was found.
            debug_assert!(false, "deadlock seems to have disappeared");
            return DeadlockState::NoDeadlock;
        }
        return DeadlockState::Hard(c.details);
    }
    if c.wait_orders.is_empty() {
        DeadlockState::NoDeadlock
    } else {
        DeadlockState::Soft(c.wait_orders)
    }
}

impl<G: WaitGraph> Checker<'_, G> {
    /// `maxPossibleConstraints`.
    fn max_saved_edges(&self) -> usize {
        4 * self.max_backends
    }

    /// Models `DeadLockCheckRecurse`: true if no set of constraints on top of the current ones
    /// removes every cycle through `procno`.
    fn check_recurse(&mut self, procno: u32) -> bool {
        let edges = match self.test_configuration(procno) {
            Test::Hard => return true,
            Test::Clear => return false,
            Test::Soft(edges) => edges,
        };
        if self.constraints.len() >= self.max_backends {
            return true;
        }
        let saved_before = self.saved_edges;
        if self.saved_edges + edges.len() + self.max_backends <= self.max_saved_edges() {
            self.saved_edges += edges.len();
        }
        for edge in edges {
            self.constraints.push(edge);
            if !self.check_recurse(procno) {
                return false;
            }
            self.constraints.pop();
        }
        self.saved_edges = saved_before;
        true
    }

    /// Models `TestConfiguration`: applies the current constraints as hypothetical queue
    /// orders and looks for cycles through every backend they mention and through `procno`.
    fn test_configuration(&mut self, procno: u32) -> Test {
        if self.saved_edges + self.max_backends > self.max_saved_edges() {
            return Test::Hard;
        }
        if !self.expand_constraints() {
            return Test::Hard;
        }
        let mut found = Test::Clear;
        let starts: Vec<u32> = self
            .constraints
            .iter()
            .flat_map(|e| [e.waiter, e.blocker])
            .chain(std::iter::once(procno))
            .collect();
        for start in starts {
            if let Some(soft) = self.find_lock_cycle(start) {
                if soft.is_empty() {
                    return Test::Hard;
                }
                found = Test::Soft(soft);
            }
        }
        found
    }

    /// Models `FindLockCycle`: a cycle through `start`, as the soft edges on it (empty for an
    /// all-hard cycle); fills `details` with its members, `start` first.
    fn find_lock_cycle(&mut self, start: u32) -> Option<Vec<Edge>> {
        self.visited.clear();
        self.details.clear();
        let mut soft = Vec::new();
        if self.find_cycle_recurse(start, &mut soft) {
            self.details.reverse();
            Some(soft)
        } else {
            None
        }
    }

    /// Models `FindLockCycleRecurse` (and `FindLockCycleRecurseMember`): depth-first search
    /// from `procno`, hard edges before soft ones.
    fn find_cycle_recurse(&mut self, procno: u32, soft: &mut Vec<Edge>) -> bool {
        if let Some(i) = self.visited.iter().position(|&p| p == procno) {
            // Back at the start: a cycle (its members are recorded while unwinding). Elsewhere:
            // a cycle that does not involve the start, not this check's business.
            return i == 0;
        }
        self.visited.push(procno);
        let Some(tag) = self.graph.waiting_on(procno) else {
            return false;
        };
        // Relation-extension waits never take part in deadlocks (13+).
        if tag.kind == LockTagType::RelationExtend {
            return false;
        }
        let Some(lock) = self.graph.lock(&tag) else {
            return false;
        };
        let Some(mode) = lock
            .wait_queue
            .iter()
            .find(|w| w.procno == procno)
            .map(|w| w.mode)
        else {
            return false;
        };
        let conflicts = mode.conflicts();
        let info = DeadlockInfo { tag, mode, procno };

        let holders: Vec<u32> = lock
            .proc_locks
            .iter()
            .filter(|p| p.procno != procno && p.hold_mask & conflicts != 0)
            .map(|p| p.procno)
            .collect();
        for holder in holders {
            if self.find_cycle_recurse(holder, soft) {
                self.details.push(info);
                return true;
            }
        }

        let queue: Vec<Waiter> = match self.wait_orders.iter().find(|o| o.lock == tag) {
            Some(order) => order.procs.clone(),
            None => lock.wait_queue.clone(),
        };
        for ahead in queue.iter().take_while(|w| w.procno != procno) {
            if conflicts & ahead.mode.bit() != 0 && self.find_cycle_recurse(ahead.procno, soft) {
                self.details.push(info);
                soft.push(Edge {
                    waiter: procno,
                    blocker: ahead.procno,
                    lock: tag,
                });
                return true;
            }
        }
        false
    }

    /// Models `ExpandConstraints`: one proposed queue per lock named in the constraints, the
    /// newest constraint's lock first; false if some lock's constraints contradict each other.
    fn expand_constraints(&mut self) -> bool {
        self.wait_orders.clear();
        for i in (0..self.constraints.len()).rev() {
            let lock = self.constraints[i].lock;
            if self.wait_orders.iter().any(|o| o.lock == lock) {
                continue;
            }
            let Some(queue) = self.graph.lock(&lock).map(|l| &l.wait_queue[..]) else {
                return false;
            };
            match topo_sort(queue, &self.constraints[..=i], &lock) {
                Some(procs) => self.wait_orders.push(WaitOrder { lock, procs }),
                None => return false,
            }
        }
        true
    }
}

/// Models `TopoSort`: orders `queue` so that every constraint's waiter comes before its blocker,
/// changing as little as it can: the output is filled from the back, each time with the last
/// remaining backend that need not precede anyone still unplaced. `None` if the constraints
/// form a cycle.
fn topo_sort(queue: &[Waiter], constraints: &[Edge], lock: &LockTag) -> Option<Vec<Waiter>> {
    let n = queue.len();
    let mut remaining: Vec<Option<Waiter>> = queue.iter().copied().map(Some).collect();
    // before[j]: constraints saying queue[j] must precede someone; after[k]: the positions
    // that must precede queue[k].
    let mut before = vec![0usize; n];
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    let position = |procno: u32| queue.iter().rposition(|w| w.procno == procno);
    for c in constraints.iter().filter(|c| c.lock == *lock) {
        let (j, k) = (position(c.waiter)?, position(c.blocker)?);
        before[j] += 1;
        after[k].push(j);
    }
    let mut ordering = vec![None; n];
    let mut last = n;
    for slot in ordering.iter_mut().rev() {
        while remaining[last - 1].is_none() {
            last -= 1;
        }
        let j = (0..last)
            .rev()
            .find(|&j| remaining[j].is_some() && before[j] == 0)?;
        *slot = remaining[j].take();
        for &pred in &after[j] {
            before[pred] -= 1;
        }
    }
    ordering.into_iter().collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::table::ProcLock;
    use std::collections::HashMap;
    use LockMode::*;

    /// A hand-built waits-for situation.
    #[derive(Default)]
    struct Graph {
        locks: HashMap<LockTag, Lock>,
        waits: HashMap<u32, LockTag>,
    }

    impl WaitGraph for Graph {
        fn waiting_on(&self, procno: u32) -> Option<LockTag> {
            self.waits.get(&procno).copied()
        }
        fn lock(&self, tag: &LockTag) -> Option<&Lock> {
            self.locks.get(tag)
        }
    }

    fn rel(n: u32) -> LockTag {
        LockTag::relation(5, n)
    }

    impl Graph {
        fn hold(&mut self, procno: u32, rel_: u32, mode: LockMode) -> &mut Self {
            let lock = self.locks.entry(rel(rel_)).or_default();
            match lock.proc_locks.iter_mut().find(|p| p.procno == procno) {
                Some(p) => p.hold_mask |= mode.bit(),
                None => lock.proc_locks.push(ProcLock::detached(procno, mode.bit())),
            }
            self
        }
        fn wait(&mut self, procno: u32, rel_: u32, mode: LockMode) -> &mut Self {
            let lock = self.locks.entry(rel(rel_)).or_default();
            let held = lock.held_by(procno);
            lock.wait_queue.push(Waiter { procno, mode, held });
            self.waits.insert(procno, rel(rel_));
            self
        }
    }

    #[test]
    fn a_wait_for_a_holder_that_waits_for_nobody_is_no_deadlock() {
        let mut g = Graph::default();
        g.hold(1, 1, AccessExclusive).wait(2, 1, AccessShare);
        assert_eq!(dead_lock_check(&g, 4, 2), DeadlockState::NoDeadlock);
    }

    #[test]
    fn a_cycle_of_hard_edges_is_reported_from_the_checker() {
        let mut g = Graph::default();
        g.hold(1, 1, AccessExclusive)
            .hold(2, 2, AccessExclusive)
            .hold(3, 3, AccessExclusive);
        g.wait(1, 2, AccessExclusive)
            .wait(2, 3, AccessExclusive)
            .wait(3, 1, AccessExclusive);
        let DeadlockState::Hard(cycle) = dead_lock_check(&g, 4, 2) else {
            panic!("not hard");
        };
        let who: Vec<(u32, LockTag)> = cycle.iter().map(|d| (d.procno, d.tag)).collect();
        assert_eq!(who, vec![(2, rel(3)), (3, rel(1)), (1, rel(2))]);
    }

    #[test]
    fn a_soft_cycle_is_broken_by_reordering_the_queue() {
        // 1 holds R1 Share; 2 waits for R1 AccessExclusive (hard edge 2 → 1); 3 waits for R1
        // Share behind 2 (soft edge 3 → 2) and holds R2, which 1 waits for (hard edge 1 → 3).
        let mut g = Graph::default();
        g.hold(1, 1, Share).hold(3, 2, AccessExclusive);
        g.wait(2, 1, AccessExclusive)
            .wait(3, 1, Share)
            .wait(1, 2, AccessShare);
        let DeadlockState::Soft(orders) = dead_lock_check(&g, 4, 1) else {
            panic!("expected a reordering");
        };
        assert_eq!(orders.len(), 1);
        assert_eq!(orders[0].lock, rel(1));
        let order: Vec<u32> = orders[0].procs.iter().map(|w| w.procno).collect();
        assert_eq!(order, vec![3, 2], "3 moves ahead of 2");
    }

    #[test]
    fn the_sort_keeps_the_queue_where_no_constraint_says_otherwise() {
        let w = |procno| Waiter {
            procno,
            mode: Share,
            held: 0,
        };
        let queue = [w(1), w(2), w(3), w(4)];
        let c = |waiter, blocker| Edge {
            waiter,
            blocker,
            lock: rel(1),
        };
        let got = topo_sort(&queue, &[c(4, 2)], &rel(1)).unwrap();
        let got: Vec<u32> = got.iter().map(|w| w.procno).collect();
        assert_eq!(got, vec![1, 4, 2, 3]);
        assert!(topo_sort(&queue, &[c(4, 2), c(2, 4)], &rel(1)).is_none());
        let other_lock = Edge {
            lock: rel(2),
            ..c(4, 1)
        };
        let same: Vec<u32> = topo_sort(&queue, &[other_lock], &rel(1))
            .unwrap()
            .iter()
            .map(|w| w.procno)
            .collect();
        assert_eq!(same, vec![1, 2, 3, 4]);
    }
}
