//! The store buffer: a store retires at once and becomes visible later, in order, as x86's TSO
//! has it.
//!
//! A core does not wait for a store: it writes it into its store buffer and goes on. Each
//! store's request for its line exclusive goes out as it enters the buffer, as long as one of
//! the core's fill buffers (`cycles.outstanding_misses`, which serve stores' ownership requests
//! as they serve loads' misses) is free, and costs what the cost model says (a hit, or a
//! transfer queued behind the line's earlier ones); the stores become visible to the other
//! cores in program order, each when its line's holder has answered and every store before it
//! is visible. Until then the core's own loads of that word read it from the buffer (store-to-load
//! forwarding), and everyone else's read the old value: the one reordering TSO allows, a load
//! passing an earlier store to another address. A locked instruction (every read-modify-write)
//! and a fence wait until the buffer is empty, and so does a system call (a futex wait or wake,
//! a sleep, a yield); a store that finds the buffer full (`cycles.store_buffer` entries) waits
//! for its oldest entry.
//!
//! So the host's write of a buffered store is deferred too: the shim hands the engine the
//! address, the value and its size ([`super::ops::store`]), and the engine writes it when the
//! store becomes visible (an event of virtual time, in order with every other). That is only
//! safe for memory that outlives the store, so only stores to memory placed in the
//! shared-memory map ([`crate::shmem`]) are buffered (a placement that ends during a run first
//! writes the stores pending to it); any other store waits until it is visible, as without a
//! buffer (after the buffer's earlier stores). A touch's store (plain data under a lock) is
//! already written; it only takes its turn in the buffer's drain, so the stores after it become
//! visible after it, and the core does not wait for it (a shortcut: it does not fill an entry).
//!
//! Shortcuts: a store's transfer is booked when the store enters the buffer, at the moment its
//! request will go out (once a fill buffer is free), which may be later than the other
//! threads' clocks; a load that overlaps a buffered store without being the same word waits for the
//! buffer to drain, as a core whose forwarding fails does.

use super::order::Kind;
use super::Engine;
use crate::cache::{Access, Served};
use crate::picos::Picos;
use std::collections::VecDeque;

/// A store in the buffer.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// The host address to write when it becomes visible.
    host: usize,
    /// The value's bytes, and how many.
    bits: u64,
    size: u8,
    /// Its line in the cost model's books.
    line: u64,
    /// Whether it missed (its effect is recorded when it becomes visible).
    miss: bool,
    /// When it becomes visible.
    visible: Picos,
}

/// One core's store buffer.
#[derive(Debug, Default)]
pub(super) struct StoreBuffer {
    /// Stores not yet visible, oldest first.
    entries: VecDeque<Pending>,
    /// When the last store booked (a buffered one or a touch's) has its line: every store is
    /// visible, and the buffer empty, then.
    tail: Picos,
    /// When the last store booked becomes visible: the next one becomes visible no earlier.
    last_visible: Picos,
    /// When the ownership requests in flight complete (at most the fill buffers').
    requests: VecDeque<Picos>,
}

impl StoreBuffer {
    /// When the next store's ownership request may go out, at `now` or later: once one of the
    /// `limit` fill buffers is free.
    fn request_at(&mut self, now: Picos, limit: usize) -> Picos {
        while self.requests.front().is_some_and(|&done| done <= now) {
            self.requests.pop_front();
        }
        if self.requests.len() < limit {
            return now;
        }
        let free = self.requests.len() + 1 - limit;
        let at = self.requests[free - 1];
        self.requests.drain(..free);
        at.max(now)
    }

    /// A store booked: its request completes at `done`, and it is visible at `visible` at
    /// the earliest; returns when it is visible (after the stores before it).
    fn booked(&mut self, answer: Picos, done: Picos) -> Picos {
        let i = self.requests.partition_point(|&d| d <= done);
        self.requests.insert(i, done);
        self.tail = self.tail.max(done);
        self.last_visible = self.last_visible.max(answer);
        self.last_visible
    }
}

/// What a store does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// It is in the buffer: the engine writes it when it becomes visible.
    Buffered,
    /// It went through the buffer and is visible now: the caller writes it.
    Visible,
    /// It is not buffered (no buffer, or memory outside the map), and the buffer is empty:
    /// the caller charges it as an access and writes it.
    Unbuffered,
    /// The buffer is full, or must drain first: wait at a sync point, then try again.
    Wait,
}

/// What a load finds in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarded {
    /// Nothing of its bytes: it reads memory.
    Nothing,
    /// A store of the same word: its value.
    Value(u64),
    /// A store overlapping its bytes: wait for the buffer to drain, then read memory.
    Drain,
}

/// Writes `size` bytes of `bits` at `host`.
///
/// # Safety
/// `host` must be valid for an atomic write of `size` bytes, aligned.
unsafe fn write(host: usize, bits: u64, size: u8) {
    use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::SeqCst};
    // SAFETY (each arm): the caller's promise.
    match size {
        1 => unsafe { (*(host as *const AtomicU8)).store(bits as u8, SeqCst) },
        2 => unsafe { (*(host as *const AtomicU16)).store(bits as u16, SeqCst) },
        4 => unsafe { (*(host as *const AtomicU32)).store(bits as u32, SeqCst) },
        _ => unsafe { (*(host as *const AtomicU64)).store(bits, SeqCst) },
    }
}

impl Engine {
    /// Whether the current thread's buffer holds stores not yet visible (or a touch's store
    /// not yet drained): if so, its clock moves to when they all are, and the caller must wait
    /// at a sync point (the stores' events come first) before going on.
    pub(super) fn drain_stores(&mut self) -> bool {
        let t = self.me();
        let tail = t.stores.tail;
        match t.stores.entries.back() {
            Some(last) => {
                let last = last.visible;
                self.wait_past(last);
                let t = self.me();
                t.clock = t.clock.max(tail);
            }
            None if tail <= t.clock => return false,
            None => t.clock = tail,
        }
        true
    }

    /// Moves the current thread's clock past `at`, the time of one of its stores' events: a
    /// thread at a sync point gives way only to events strictly before its clock, so a clock
    /// at the event's own time would retry for ever without the event ever running.
    fn wait_past(&mut self, at: Picos) {
        let t = self.me();
        t.clock = t.clock.max(at + Picos(1));
    }

    /// A store of `size` bytes of `bits` to host address `host`, after its sync point.
    pub(super) fn store(&mut self, host: usize, bits: u64, size: u8) -> Stored {
        let depth = self.costs.store_buffer;
        let placed = self.translation.placed(host);
        let (Some(addr), true) = (placed, depth > 0) else {
            // Not buffered: it waits for the buffer's earlier stores, then for itself.
            return if self.drain_stores() {
                Stored::Wait
            } else {
                Stored::Unbuffered
            };
        };
        if self.me().stores.entries.len() >= depth {
            let oldest = self.me().stores.entries[0].visible;
            self.wait_past(oldest);
            return Stored::Wait;
        }
        let (place, clock) = {
            let t = &self.threads[self.current];
            (t.place, t.clock)
        };
        let empty = self.me().stores.entries.is_empty();
        let limit = self.costs.outstanding;
        let start = self.me().stores.request_at(clock, limit);
        let c = self
            .caches
            .access(&self.costs, place, addr, Access::Store, start);
        self.ops += 1;
        let issue = self.costs.private(self.costs.hit, self.smt_busy());
        self.advance(issue);
        self.me().spin.forget();
        match c.served {
            Served::Hit { version }
                if empty && start == clock && c.answer >= self.me().stores.last_visible =>
            {
                // Visible at once: nothing to wait for.
                self.me().stores.booked(c.answer, c.done);
                let _ = version;
                let now = self.me().clock;
                self.wake_watchers(c.line, now);
                Stored::Visible
            }
            served => {
                if served == Served::Miss {
                    self.tally_miss(&c, start);
                }
                let t = self.me();
                let visible = t.stores.booked(c.answer, c.done);
                t.stores.entries.push_back(Pending {
                    host,
                    bits,
                    size,
                    line: c.line,
                    miss: served == Served::Miss,
                    visible,
                });
                let tid = self.current;
                self.push(visible, tid, Kind::Drain);
                Stored::Buffered
            }
        }
    }

    /// A touch's store of the map line at `addr` (already written by the host): it takes its
    /// turn in the drain, and the thread goes on. Returns whether the store buffer took it.
    pub(super) fn touch_store(&mut self, addr: usize) -> bool {
        if self.costs.store_buffer == 0 {
            return false;
        }
        let (place, clock) = {
            let t = &self.threads[self.current];
            (t.place, t.clock)
        };
        let limit = self.costs.outstanding;
        let start = self.me().stores.request_at(clock, limit);
        let c = self
            .caches
            .access(&self.costs, place, addr, Access::Store, start);
        if c.served == Served::Miss {
            self.tally_miss(&c, start);
            self.caches.effect(c.line, Access::Store);
        }
        self.me().stores.booked(c.answer, c.done);
        let issue = self.costs.private(self.costs.hit, self.smt_busy());
        self.advance(issue);
        self.me().spin.forget();
        self.wake_watchers(c.line, c.answer);
        true
    }

    /// A load served from the buffer: a hit's cost.
    pub(super) fn forwarded(&mut self) {
        self.ops += 1;
        let hit = self.costs.private(self.costs.hit, self.smt_busy());
        self.advance(hit);
    }

    /// What the current thread's buffer holds of the `size` bytes at host address `host`.
    pub(super) fn forward(&mut self, host: usize, size: u8) -> Forwarded {
        let entries = &self.threads[self.current].stores.entries;
        let overlaps =
            |p: &Pending| host < p.host + p.size as usize && p.host < host + size as usize;
        match entries.iter().rev().find(|p| overlaps(p)) {
            None => Forwarded::Nothing,
            Some(p) if p.host == host && p.size == size => Forwarded::Value(p.bits),
            Some(_) => Forwarded::Drain,
        }
    }

    /// The oldest store of thread `tid` becomes visible at `at`: the host writes it, the line's
    /// books record it, and the threads parked on the line wake.
    pub(super) fn store_visible(&mut self, tid: usize, at: Picos) {
        let Some(p) = self.threads[tid].stores.entries.pop_front() else {
            return;
        };
        debug_assert_eq!(p.visible, at);
        // SAFETY: only stores to placed memory are buffered, and a placement that ends during
        // the run writes its pending stores first (`Engine::unplaced`), so the memory is the
        // live atomic the shim stored to.
        if p.host != 0 {
            unsafe { write(p.host, p.bits, p.size) };
        }
        if p.miss {
            self.caches.effect(p.line, Access::Store);
        }
        self.wake_watchers(p.line, at);
    }

    /// The placement of `len` bytes at `host` ends during the run: every store pending to them
    /// is written now (the memory is about to go), and never again.
    pub(super) fn unplaced(&mut self, host: usize, len: usize) {
        for t in &mut self.threads {
            for p in t.stores.entries.iter_mut() {
                if p.host >= host && p.host < host + len {
                    // SAFETY: the memory is still placed, and so alive, until this returns.
                    unsafe { write(p.host, p.bits, p.size) };
                    p.host = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{clock, on};
    use super::super::{ops, run};
    use crate::cache::Access;
    use crate::picos::Picos;
    use crate::profile::Profile;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::time::Duration;

    /// The shim's store, as `pglocks_sync::atomic` makes it.
    fn st(word: &AtomicU64, v: u64) {
        if !ops::store(word.as_ptr() as usize, v, 8) {
            word.store(v, SeqCst);
        }
    }

    /// The shim's load.
    fn ld(word: &AtomicU64) -> u64 {
        ops::load(word.as_ptr() as usize, 8).unwrap_or_else(|| word.load(SeqCst))
    }

    /// Words of their own lines, placed in the map (so stores to them are buffered).
    struct Words {
        words: Box<[[AtomicU64; 16]]>,
        host: usize,
    }

    impl Words {
        fn new(n: usize) -> Words {
            let words: Box<[[AtomicU64; 16]]> = (0..n)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect();
            let host = words.as_ptr() as usize;
            crate::shmem::place("test store-buffer words", host, 128, n);
            Words { words, host }
        }
        fn get(&self, i: usize) -> &AtomicU64 {
            &self.words[i][0]
        }
    }

    impl Drop for Words {
        fn drop(&mut self) {
            crate::shmem::unplace(self.host);
        }
    }

    fn westmere() -> Profile {
        let p = Profile::find("westmere-80").unwrap();
        assert_eq!(p.cycles.store_buffer, 32);
        p
    }

    /// Both CPUs read both words, so each holds a copy of each line, then wait well past
    /// the transfers, to the same moment.
    fn settle(w: &Words) {
        ld(w.get(0));
        ld(w.get(1));
        // Both go on at the same moment, 5 µs in.
        while clock() < Picos(5_000_000) {
            ops::work(100);
        }
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn store_buffering_shows_tso_s_one_reordering() {
        // x = 1; r0 = y  ‖  y = 1; r1 = x: with store buffers both loads may read their own
        // copy before the other CPU's store reaches it, which no interleaving of the four
        // operations allows.
        let w = Words::new(2);
        let (r0, r1) = (Cell::new(9), Cell::new(9));
        let team = vec![
            on(0, || {
                settle(&w);
                st(w.get(0), 1);
                r0.set(ld(w.get(1)));
            }),
            on(10, || {
                settle(&w);
                st(w.get(1), 1);
                r1.set(ld(w.get(0)));
            }),
        ];
        run(&westmere(), team, Duration::from_millis(1)).unwrap();
        assert_eq!((r0.get(), r1.get()), (0, 0));
        // Both stores did become visible, by the end.
        assert_eq!((w.get(0).load(SeqCst), w.get(1).load(SeqCst)), (1, 1));

        // Without a store buffer, one of the loads sees the other's store.
        let mut plain = westmere();
        plain.cycles.store_buffer = 0;
        w.get(0).store(0, SeqCst);
        w.get(1).store(0, SeqCst);
        let team = vec![
            on(0, || {
                settle(&w);
                st(w.get(0), 1);
                r0.set(ld(w.get(1)));
            }),
            on(10, || {
                settle(&w);
                st(w.get(1), 1);
                r1.set(ld(w.get(0)));
            }),
        ];
        run(&plain, team, Duration::from_millis(1)).unwrap();
        assert_ne!((r0.get(), r1.get()), (0, 0));
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn stores_become_visible_in_order_and_a_cpu_reads_its_own_at_once() {
        // Message passing: data = 42; flag = 1  ‖  wait for flag; read data. Nothing weaker
        // than TSO: the flag is never seen before the data.
        let w = Words::new(2);
        let (seen, own) = (Cell::new(0), Cell::new(0));
        let team = vec![
            on(0, || {
                st(w.get(0), 42);
                // Forwarded from the buffer, before anyone else can see it.
                own.set(ld(w.get(0)));
                st(w.get(1), 1);
            }),
            on(10, || {
                while ld(w.get(1)) == 0 {
                    ops::spin_wait();
                }
                seen.set(ld(w.get(0)));
            }),
        ];
        run(&westmere(), team, Duration::from_millis(1)).unwrap();
        assert_eq!((own.get(), seen.get()), (42, 42));
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_store_does_not_stall_its_cpu_but_a_locked_instruction_waits_for_it() {
        let w = Words::new(3);
        let (store, rmw) = (Cell::new(Picos::ZERO), Cell::new(Picos::ZERO));
        let team = vec![
            // CPU 10 owns the line first.
            on(10, || st(w.get(0), 7)),
            on(0, || {
                ops::work(1_000_000);
                let t0 = clock();
                st(w.get(0), 1);
                let t1 = clock();
                ops::access(w.get(2).as_ptr() as usize, Access::Rmw);
                store.set(t1 - t0);
                rmw.set(clock() - t1);
            }),
        ];
        let p = westmere();
        let costs = crate::cache::Costs::new(&p);
        run(&p, team, Duration::from_millis(1)).unwrap();
        // The store cost its CPU an issue slot; the read-modify-write waited for the line to
        // come from the other package first.
        assert!(store.get() <= costs.hit * 2, "{store:?}");
        assert!(
            rmw.get() >= costs.transfer(crate::cache::Distance::Hop1) / 2,
            "{rmw:?}"
        );
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn the_ownership_requests_of_buffered_stores_overlap_up_to_the_fill_buffers() {
        // CPU 10 owns 30 lines; CPU 0 stores to each, then fences: the fence waits for all
        // 30 transfers, which went out ten at a time.
        let w = Words::new(30);
        let took = Cell::new(Picos::ZERO);
        let team = vec![
            on(10, || (0..30).for_each(|i| st(w.get(i), 1))),
            on(0, || {
                ops::work(1_000_000);
                let t0 = clock();
                (0..30).for_each(|i| st(w.get(i), 2));
                ops::fence();
                took.set(clock() - t0);
            }),
        ];
        let p = westmere();
        let hop = crate::cache::Costs::new(&p).transfer(crate::cache::Distance::Hop1);
        run(&p, team, Duration::from_millis(1)).unwrap();
        assert!(
            took.get() > hop * 3 * 80 / 100 && took.get() < hop * 3 * 160 / 100,
            "{took:?} against 3 × {hop:?}"
        );
        assert!((0..30).all(|i| w.get(i).load(SeqCst) == 2));
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_full_buffer_waits_for_its_oldest_store_and_goes_on() {
        // More stores than the buffer holds, each a hit on a line the CPU owns, then a fence:
        // each store that finds the buffer full waits for the oldest to become visible.
        let w = Words::new(40);
        let team = vec![on(0, || {
            (0..40).for_each(|i| st(w.get(i), 1));
            (0..40).for_each(|i| st(w.get(i), 2));
            ops::fence();
        })];
        run(&westmere(), team, Duration::from_millis(1)).unwrap();
        assert!((0..40).all(|i| w.get(i).load(SeqCst) == 2));
    }
}
