//! Touches of the data behind the locks, and loads that overlap.
//!
//! **Touches.** A model says which bytes of the simulated shared-memory map
//! ([`crate::shmem`]) it reads or writes: a lock-table entry, a hash bucket, a PGPROC's fields, a
//! page's line pointers. Each line the bytes lie on is charged by the cost model like an access
//! (a hit, or a transfer from where the line is, queued behind the line's earlier transfers),
//! and the line moves in the model's books: the next CPU to touch it pays for the transfer. A
//! touch has no ordering point of its own. The data it stands for is guarded by a lock the
//! thread holds (or is only read, as a page nobody writes), and that lock's acquisition already
//! ordered the thread against the others; so a touch is charged at the thread's own clock, takes
//! effect at once, and costs no trip through the scheduler. A touch is not a shim operation:
//! it is counted apart ([`Outcome::touches`](super::Outcome::touches)) and charged no `local`,
//! so a model that describes its data more finely does not seem to do more work.
//!
//! **Overlapping misses.** A core does not wait for one miss before issuing the next load, as
//! long as the next load does not need the first one's value: up to its fill buffers
//! (`cycles.outstanding_misses`) can be in flight. Whether two loads are independent is the
//! program's secret, and a rule for every load would also overlap the dependent ones (a hash
//! chain, each entry's address read from the one before), so only the loads a model declares
//! independent overlap ([`crate::hook::independent`]: `GetSnapshotData`'s walk of the
//! ProcArray, a scan of buffer headers). Inside such a scope the thread has two clocks: the
//! *front*, where its next load issues, which moves on by a hit's cost per load and by the
//! private work between, and its clock, which is the latest moment any of its loads has taken
//! effect. A load that misses while every fill buffer is busy waits for the earliest to
//! complete. Anything else (a store, a read-modify-write, a fence, a pause, a system call) and
//! the end of the scope first wait for every miss in flight. An atomic load in the scope still
//! takes effect in virtual-time order at its answer, as outside one.
//! (A store inside a scope waits for the loads in flight, then goes into the store buffer,
//! `super::store_buffer`: a shortcut, as a core's stores do not wait for its loads.)
//!
//! A touch's store goes into the store buffer like any other (it takes its turn in the drain,
//! and the core goes on); a touch's load does not look in the buffer (the data it stands for
//! was written by the host at once).

use super::Engine;
use crate::cache::{Access, Served};
use crate::picos::Picos;

/// A thread's loads in flight inside an independent scope.
#[derive(Debug, Clone, Default)]
pub(super) struct Overlap {
    /// Open scopes (they nest; the outermost one's end drains).
    depth: u32,
    /// Where the next load issues.
    front: Picos,
    /// When each miss in flight completes.
    inflight: Vec<Picos>,
}

impl Overlap {
    /// Whether a scope is open.
    pub(super) fn open(&self) -> bool {
        self.depth > 0
    }

    /// The thread was off its CPU until `at`: nothing issues before.
    pub(super) fn resumed(&mut self, at: Picos) {
        self.front = self.front.max(at);
    }
}

impl Engine {
    /// Moves the current thread on by `took` of private work (already slowed for a busy SMT
    /// sibling): its front end inside an independent scope, its clock outside one.
    pub(super) fn advance(&mut self, took: Picos) {
        let t = self.me();
        if t.overlap.open() {
            t.overlap.front += took;
            t.clock = t.clock.max(t.overlap.front);
        } else {
            t.clock += took;
        }
    }

    /// Waits for every miss in flight (before anything but a load or private work).
    pub(super) fn drain(&mut self) {
        let t = self.me();
        if !t.overlap.open() {
            return;
        }
        let last = t.overlap.inflight.drain(..).max().unwrap_or(Picos::ZERO);
        t.clock = t.clock.max(t.overlap.front).max(last);
        t.overlap.front = t.clock;
    }

    /// Opens (`begin`) or closes an independent scope; the outermost close drains.
    pub(super) fn independent(&mut self, begin: bool) {
        if begin {
            let t = self.me();
            if !t.overlap.open() {
                t.overlap.front = t.clock;
                t.overlap.inflight.clear();
            }
            t.overlap.depth += 1;
        } else if self.me().overlap.depth > 0 {
            self.drain();
            self.me().overlap.depth -= 1;
        }
    }

    /// Whether a load by the current thread overlaps (an independent scope is open).
    pub(super) fn overlaps(&self, kind: Access) -> bool {
        kind == Access::Load && self.threads[self.current].overlap.open()
    }

    /// Where an overlapping load issues: at the front, once a fill buffer is free.
    pub(super) fn issue(&mut self) -> Picos {
        let limit = self.costs.outstanding;
        let o = &mut self.me().overlap;
        if o.inflight.len() >= limit {
            let (i, earliest) = o
                .inflight
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|&(_, done)| done)
                .expect("a full set of fill buffers is not empty");
            o.inflight.swap_remove(i);
            o.front = o.front.max(earliest);
        }
        o.front
    }

    /// An overlapping load that missed, issued at the front, completing at `done`; it took
    /// effect at `answer`.
    pub(super) fn in_flight(&mut self, answer: Picos, done: Picos) {
        let hit = self.costs.hit;
        let t = self.me();
        t.overlap.front += hit;
        t.overlap.inflight.push(done);
        t.clock = t.clock.max(answer).max(t.overlap.front);
    }

    /// A touch of `len` bytes at `addr` of the map: each line charged in turn.
    pub(super) fn touch(&mut self, addr: usize, len: usize, kind: Access) {
        if len == 0 {
            return;
        }
        let addr = self.translation.of(addr);
        let shift = self.costs.line_shift;
        let (first, last) = (addr >> shift, (addr + len - 1) >> shift);
        for line in first..=last {
            self.touch_line(line << shift, kind);
        }
    }

    fn touch_line(&mut self, addr: usize, kind: Access) {
        self.touches += 1;
        let overlapped = self.overlaps(kind);
        if !overlapped {
            self.drain();
        }
        if kind == Access::Store && self.touch_store(addr) {
            return;
        }
        let shared = self.smt_busy();
        let (place, clock) = {
            let t = &self.threads[self.current];
            (t.place, t.clock)
        };
        let now = if overlapped { self.issue() } else { clock };
        let c = self.caches.access(&self.costs, place, addr, kind, now);
        let version = match c.served {
            Served::Hit { version } => {
                let took = self.costs.private(c.done - now, shared);
                self.advance(took);
                version
            }
            Served::Miss => {
                self.tally_miss(&c, now);
                if overlapped {
                    self.in_flight(now, c.done);
                } else {
                    self.me().clock = c.done;
                }
                self.caches.effect(c.line, kind)
            }
        };
        if kind == Access::Load {
            self.me().spin.forget();
        } else {
            self.applied(c.line, version, kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{clock, on};
    use super::super::{ops, run};
    use crate::cache::{Access, Costs, Distance};
    use crate::picos::Picos;
    use crate::profile::Profile;
    use std::cell::Cell;
    use std::time::Duration;

    /// The Westmere: CPU 10 is one hop from CPU 0, and ten misses may be in flight.
    fn westmere() -> (Profile, Picos) {
        let p = Profile::find("westmere-80").unwrap();
        assert_eq!(p.cycles.outstanding_misses, 10);
        let hop = Costs::new(&p).transfer(Distance::Hop1);
        (p, hop)
    }

    const N: usize = 60;

    /// CPU 0 writes `N` lines, then CPU 10 reads them with `read` (inside or outside a scope);
    /// returns what the reads cost CPU 10, and the run's touches and shim operations.
    fn remote_reads(read: impl Fn(usize) + Copy, scoped: bool) -> (Picos, u64, u64) {
        let (profile, _) = westmere();
        let took = Cell::new(Picos::ZERO);
        let team = vec![
            on(0, move || {
                (0..N).for_each(|i| ops::touch(line(i), 8, Access::Store))
            }),
            on(10, || {
                // Well after the writer.
                ops::work(1_000_000);
                let start = clock();
                if scoped {
                    ops::independent(true);
                }
                (0..N).for_each(read);
                if scoped {
                    ops::independent(false);
                }
                took.set(clock() - start);
            }),
        ];
        let out = run(&profile, team, Duration::from_millis(10)).unwrap();
        (took.get(), out.touches, out.ops)
    }

    /// The `i`-th line of a region of the map.
    fn line(i: usize) -> usize {
        crate::shmem::BASE + (1 << 40) + i * 128
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn n_remote_lines_cost_n_transfers_outside_a_scope_and_n_over_the_fill_buffers_inside_one() {
        let (_, hop) = westmere();
        let touch = |i| ops::touch(line(i), 8, Access::Load);
        let (serial, touches, shim_ops) = remote_reads(touch, false);
        let (overlapped, ..) = remote_reads(touch, true);
        // Touches are counted apart from the shim's operations, and charge no `local`.
        assert_eq!((touches, shim_ops), (2 * N as u64, 0));
        // One transfer after the other (the latencies spread ±50 %, so the mean within 15 %).
        let n = N as u64;
        assert!(
            serial > hop * n * 85 / 100 && serial < hop * n * 115 / 100,
            "{serial:?} against {n} × {hop:?}"
        );
        // Ten at a time: about N/10 transfers (each group waits for its slowest).
        let groups = n / 10;
        assert!(
            overlapped > hop * groups * 80 / 100 && overlapped < hop * groups * 160 / 100,
            "{overlapped:?} against {groups} × {hop:?}"
        );
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn atomic_loads_in_a_scope_overlap_too_and_a_store_waits_for_them() {
        let (_, hop) = westmere();
        let n = N as u64;
        let load = |i| ops::access(line(i), Access::Load);
        let (serial, _, shim_ops) = remote_reads(load, false);
        let (overlapped, ..) = remote_reads(load, true);
        assert_eq!(shim_ops, n);
        assert!(serial > hop * n * 85 / 100, "{serial:?}");
        assert!(overlapped < hop * (n / 10) * 160 / 100, "{overlapped:?}");
        // A store after each load: nothing overlaps any more.
        let load_then_store = |i| {
            ops::access(line(i), Access::Load);
            ops::access(line(N + i), Access::Store);
        };
        let (stored, ..) = remote_reads(load_then_store, true);
        assert!(stored > hop * n * 85 / 100, "{stored:?}");
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_touched_line_moves_like_a_lock_word_and_a_hit_costs_a_hit() {
        let (mut profile, hop) = westmere();
        // Without a store buffer, whose stores would not stall the CPU.
        profile.cycles.store_buffer = 0;
        let hit = Costs::new(&profile).hit;
        let (first, again) = (Cell::new(Picos::ZERO), Cell::new(Picos::ZERO));
        let team = vec![
            on(0, || ops::touch(line(0), 64, Access::Store)),
            on(10, || {
                ops::work(1_000_000);
                let t0 = clock();
                ops::touch(line(0), 64, Access::Store);
                let t1 = clock();
                ops::touch(line(0), 64, Access::Load);
                first.set(t1 - t0);
                again.set(clock() - t1);
            }),
        ];
        run(&profile, team, Duration::from_millis(10)).unwrap();
        assert!(
            first.get() >= hop / 2 && first.get() <= hop * 3 / 2,
            "{first:?}"
        );
        assert_eq!(again.get(), hit);
    }
}

#[cfg(test)]
mod placement_tests {
    use super::super::testing::on;
    use super::super::{ops, run};
    use crate::cache::Access;
    use crate::profile::Profile;
    use std::time::Duration;

    /// CPUs 0 and 10 each write their own word of one host line `rounds` times, turn about;
    /// returns the run's transfers.
    fn neighbours(words: &[u64; 2], rounds: usize) -> u64 {
        let profile = Profile::find("westmere-80").unwrap();
        let team = (0..2)
            .map(|i| {
                let at = &words[i] as *const u64 as usize;
                on(i * 10, move || {
                    for _ in 0..rounds {
                        ops::access(at, Access::Store);
                        ops::work(10_000);
                    }
                })
            })
            .collect();
        let out = run(&profile, team, Duration::from_millis(100)).unwrap();
        out.transfers.iter().map(|(_, n)| n).sum()
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn two_placed_structures_never_share_a_line_whatever_the_host_heap_did() {
        // Two words of one host line: written from two packages, the line ping-pongs.
        let words = Box::new([0u64; 2]);
        let shared = neighbours(&words, 50);
        assert!(shared >= 90, "{shared} transfers");
        // Placed as two structures, each has a line of the map to itself.
        let (a, b) = (words.as_ptr() as usize, words.as_ptr() as usize + 8);
        crate::shmem::place("test word a", a, 8, 1);
        crate::shmem::place("test word b", b, 8, 1);
        let apart = neighbours(&words, 50);
        crate::shmem::unplace(a);
        crate::shmem::unplace(b);
        assert!(apart <= 2, "{apart} transfers");
    }
}
