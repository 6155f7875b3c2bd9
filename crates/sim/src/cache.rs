//! The cache-coherence cost model: what one load, store or read-modify-write costs a CPU,
//! given where the line is.
//!
//! Each line (64 B, or a 128-B pair where the profile says so) is in one of three states, as
//! MESI sees it from outside: held *exclusively* by one CPU (M or E: a `owner`), *shared* by a
//! set of CPUs (S), or in no cache. An access that hits a line the CPU holds costs `hit` (an
//! atomic on a line it owns, `atomic`). A load miss fetches the line from the nearest holder
//! (the owner, which keeps a shared copy, as MOESI's O state does, or the closest sharer, at
//! the profile's load-from-Shared row where it has one: the Xeon's inclusive last-level cache
//! serves a line its cores share at 44 cycles, not the 109 of a core's Modified copy), or
//! from memory. A store or read-modify-write miss takes the line exclusive, leaving the
//! requester the only holder. From an owner it costs the owner's transfer. From sharers it
//! waits for the farthest one's invalidation, and the profile's store-on-Shared and
//! atomic-on-Shared rows give what that costs at each distance where the source measured it
//! (on the SOSP'13 Opteron three times a transfer from the same die: its probe filter does not
//! track sharers, so every such store broadcasts; the Xeon's inclusive last-level cache knows
//! when the sharers are all on its socket). Without the rows it costs a transfer from the
//! farthest sharer. A compare-and-swap that fails still takes the line exclusive, as it does
//! on x86.
//!
//! The distance between two CPUs is one of: same CPU, SMT sibling, same die (shared last-level
//! cache), same package, one, two, or three interconnect hops; the profile gives the latency of
//! each, measured as a line's transfer (the SOSP'13 study's load-from-modified figures).
//!
//! **Timing.** A miss is booked when it is issued: the line changes hands in the model's books
//! at once (the holders' copies are invalidated), and its transfer is queued on the line behind
//! the transfers already asked for. Its *effect* (the value a load returns, the moment a store
//! or read-modify-write changes the line) comes later, when the holder answers: half-way
//! through the transfer, once the transfers queued before it are over. The engine runs the
//! other CPUs up to that moment before the host executes the access, so the accesses to a line
//! take effect in the order the line moves, and each sees the line as its transfer found it.
//! Until the next queued request's holder answers, the place a transfer brought the line to
//! still has it, and uses it at a hit's cost (`Line::held_until_answer`): on hardware a core
//! keeps a line until a request for it arrives, and a line moving among N CPUs is used by each
//! for the half-transfer before the next request reaches it. This is what lets a
//! compare-and-swap that failed retry at once, on the value it just read, and succeed: without
//! it every retry queued behind every other CPU's attempt and failed again, and a shared
//! LWLock on the simulated 80-core Westmere took 10 µs per acquisition at 64 threads, 50
//! transfers each. The other choices tried (the effect at issue; ownership handed over in the
//! books only at the answer or the end of the transfer, which lets a holder run on past the
//! requests for its line) are in docs/simulator.md.
//!
//! **Jitter.** A transfer's latency is the profile's figure times a factor drawn uniformly from
//! [1 − `JITTER`, 1 + `JITTER`) by a generator with a fixed seed, so runs still repeat exactly.
//! Real transfers vary (the interconnect's other traffic, the holder's own pipeline, clock
//! changes); with every latency fixed, two CPUs handing a line back and forth fall into one
//! phase and stay there, so a single lock-step interleaving (a waiter whose re-reads always
//! land while the lock is held, and which starves) stands for the whole distribution a real
//! machine averages over.
//!
//! **Contention queues.** Every line has a *busy-until* time: a transfer starts no earlier than
//! the end of the previous one (times the profile's `occupancy`), so N CPUs that miss on one
//! line at once are served one after another. This is what makes a released ticket lock cost
//! the next holder, on average, half the spinners' reloads, and the collapse of TAS and ticket
//! locks appear: a holder whose critical section outlasts its half-transfer of grace must queue
//! its release behind every waiter's attempt.
//!
//! **The books.** A line's state is one small record, kept in the order lines are first touched
//! (the engine's `keyed` tables): its owner, its sharers (a bitset inside the record for the first
//! 128 places, the rest on the heap), its busy-until time, its write count, and its transfers
//! (*hops*, 16 bytes each) from the oldest whose place may still hold it. Only a transfer after a
//! place's own can take the line from it, and an exclusive transfer answered by the time of an
//! access drops every hop before it; so once those are dropped, every exclusive hop after the first
//! is answered, and arrives, after the access. Two counts in the record let an access use that
//! without reading every hop: the exclusive hops after the first, and the loads at the end of the
//! queue. With no exclusive hop after the first, no load can be served by a copy a queued request
//! has not reached yet, and the hops are not read at all: the common case of a line many CPUs read
//! and few write, whose hops pile up one per reader. A store or read-modify-write can only be
//! served by the first hop's copy. The search for the answered exclusive transfer starts at the
//! last exclusive hop, past the trailing loads.
//!
//! **A core's own caches.** Where the profile sizes them (`cycles.caches`), an access that the
//! books serve from the core's own copy asks [`crate::own`] whether the copy is still in the
//! core's L1, or has aged out to its L2 or its die's last-level cache since the core last used
//! it (set-associative arrays in least-recently-used order): the L1 costs `hit`, the others
//! the profile's L2 or last-level latency in its place. Such a refill takes effect at once (no
//! other core is asked) and is counted as no transfer.
//!
//! Shortcuts the model takes: the last-level cache never runs out of room (a line stays in the
//! books until another CPU takes it, and a line the core's L2 lost comes back from it, not from
//! memory); no prefetching or false-sharing beyond the line size; a transfer's
//! latency does not depend on the load of the interconnect, only on the line's own queue. (The
//! reordering of a load past an earlier store is the engine's store buffer's, not this
//! model's.)

use crate::keyed::Keyed;
use crate::own::{self, Level};
use crate::picos::Picos;
use crate::profile::{ByDistance, Kernel, Model, OwnCaches, Profile};
use std::collections::VecDeque;

/// How far a transfer's latency strays either side of the profile's figure, as a fraction,
/// unless the profile's `model.jitter` says otherwise.
///
/// Unsourced: ±50 % was chosen against this project's two-thread runs of `sim:this` (with every
/// latency fixed, `lwlock-exclusive` at 2 threads ran at 0.32× the real figure and
/// `lwlock-shared` at 0.47×), not taken from a measurement of how transfers vary.
pub const JITTER: f64 = 0.5;

/// `JITTER` in 1/1024ths, for integer arithmetic on [`Picos`].
#[cfg(test)]
const JITTER_1024: u64 = (JITTER * 1024.0) as u64;

/// A fraction in 1/1024ths.
fn in_1024ths(x: f64) -> u64 {
    (x * 1024.0).round().clamp(0.0, 1024.0) as u64
}

/// How far apart two CPUs are, for the line transfers between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Distance {
    /// The same CPU.
    Same = 0,
    /// The other hardware thread of the same core.
    Smt = 1,
    /// Cores sharing a last-level cache.
    Die = 2,
    /// Different dies of one package.
    Package = 3,
    /// Packages one interconnect hop apart.
    Hop1 = 4,
    /// Two hops.
    Hop2 = 5,
    /// Three or more hops.
    Hop3 = 6,
    /// No cache holds the line.
    Memory = 7,
}

const DISTANCES: [Distance; 8] = [
    Distance::Same,
    Distance::Smt,
    Distance::Die,
    Distance::Package,
    Distance::Hop1,
    Distance::Hop2,
    Distance::Hop3,
    Distance::Memory,
];

/// What a CPU does to a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Load,
    /// A plain store.
    Store,
    /// A locked read-modify-write: swap, fetch-and-op, compare-and-swap (failed or not).
    Rmw,
}

/// A profile's costs, in virtual time, and the distance between every pair of CPUs.
#[derive(Debug, Clone)]
pub struct Costs {
    /// CPUs, plus one place for housekeeping threads (last).
    places: usize,
    /// `distance[a * places + b]`.
    distance: Vec<Distance>,
    /// Transfer latency by distance.
    transfer: [Picos; 8],
    /// A load that finds the line Shared, by the nearest sharer's distance.
    load_from_shared: [Picos; 8],
    /// A store that finds the line Shared, by the farthest sharer's distance.
    store_on_shared: [Picos; 8],
    /// A read-modify-write that finds the line Shared, likewise.
    atomic_on_shared: [Picos; 8],
    /// A hit.
    pub hit: Picos,
    /// An atomic on an owned line.
    pub atomic: Picos,
    /// A pause.
    pub pause: Picos,
    /// A fence.
    pub fence: Picos,
    /// Per `busy_work` step, in femtoseconds (steps are a fraction of a nanosecond).
    pub busy_step_fs: u64,
    /// One unit of each private kernel ([`Kernel::ALL`]'s order), in femtoseconds.
    pub kernel_fs: [u64; 4],
    /// Charged per shim operation.
    pub local: Picos,
    /// Fraction of a transfer's latency that it keeps the line busy, in 1/1024ths.
    occupancy: u64,
    /// log2 of the line size.
    pub line_shift: u32,
    /// Misses one CPU may have in flight at once.
    pub outstanding: usize,
    /// Entries of a CPU's store buffer (0: none).
    pub store_buffer: usize,
    /// `smt_speed` in 1/1024ths.
    smt_speed: u64,
    /// Each CPU's SMT siblings.
    siblings: Vec<Vec<usize>>,
    /// Whether any CPU has a sibling: asked at every access, and without SMT the answer is
    /// known without reading the CPU's list.
    smt: bool,
    /// How far through a transfer its holder answers, in 1/1024ths (`model.answer_at`).
    answer_at: u64,
    /// Whether a place keeps a line until the next request's answer (`model.hold_window`).
    hold_window: bool,
    /// The cores' own caches, if the profile sizes them: their sets and ways, and what a load
    /// served by the L2 or the last-level cache costs.
    own: Option<(own::Geometry, Picos, Picos)>,
    /// Each place's core (siblings share one; the housekeeping place has its own), indexing
    /// [`own::OwnCaches`].
    core_of: Vec<usize>,
}

impl Costs {
    /// The costs of `profile`.
    pub fn new(profile: &Profile) -> Costs {
        let ps = |cycles: f64| Picos((cycles * 1000.0 / profile.ghz).round() as u64);
        let c = &profile.cycles;
        let cpus = profile.cpus();
        let n = cpus.len();
        let places = n + 1;
        let mut distance = vec![Distance::Same; places * places];
        // The housekeeping place: another core on CPU 0's die (unsourced: the harness's
        // controlling thread is not pinned on a real machine).
        let mut place = cpus.clone();
        let mut hk = cpus[0];
        hk.core = usize::MAX;
        hk.smt = 0;
        place.push(hk);
        for a in 0..places {
            for b in 0..places {
                let (pa, pb) = (place[a], place[b]);
                distance[a * places + b] = if a == b {
                    Distance::Same
                } else if pa.core == pb.core {
                    Distance::Smt
                } else if pa.die == pb.die {
                    Distance::Die
                } else if pa.socket == pb.socket {
                    Distance::Package
                } else {
                    match profile.hops(pa.socket, pb.socket) {
                        0 | 1 => Distance::Hop1,
                        2 => Distance::Hop2,
                        _ => Distance::Hop3,
                    }
                };
            }
        }
        let hop3 = if c.hop3 > 0.0 { c.hop3 } else { c.hop2 };
        let transfer = [
            ps(c.hit),
            ps(c.smt),
            ps(c.die),
            ps(c.package),
            ps(c.hop1),
            ps(c.hop2),
            ps(hop3),
            ps(c.memory),
        ];
        // A row of the profile where it has one; else a transfer, plus a locked instruction's
        // own cost for a read-modify-write. An SMT sibling's copy is in the same core's L1,
        // which the rows do not measure: a transfer from it stays the sibling's.
        let on_shared = |row: Option<ByDistance>, own: Picos| {
            let mut by = transfer.map(|t| t + own);
            if let Some(r) = row {
                let hop3 = if r.hop3 > 0.0 { r.hop3 } else { r.hop2 };
                for (d, cycles) in [
                    (Distance::Die, r.die),
                    (Distance::Package, r.package),
                    (Distance::Hop1, r.hop1),
                    (Distance::Hop2, r.hop2),
                    (Distance::Hop3, hop3),
                ] {
                    by[d as usize] = ps(cycles);
                }
            }
            by
        };
        let siblings: Vec<Vec<usize>> = (0..n)
            .map(|a| {
                (0..n)
                    .filter(|&b| b != a && cpus[b].core == cpus[a].core)
                    .collect()
            })
            .collect();
        Costs {
            places,
            distance,
            transfer,
            load_from_shared: on_shared(c.load_from_shared, Picos::ZERO),
            store_on_shared: on_shared(c.store_on_shared, Picos::ZERO),
            atomic_on_shared: on_shared(c.atomic_on_shared, ps(c.atomic).saturating_sub(ps(c.hit))),
            hit: ps(c.hit),
            atomic: ps(c.atomic),
            pause: ps(c.pause),
            fence: ps(c.fence),
            busy_step_fs: (profile.busy_step() * 1_000_000.0 / profile.ghz).round() as u64,
            kernel_fs: Kernel::ALL
                .map(|k| (profile.kernel(k) * 1_000_000.0 / profile.ghz).round() as u64),
            local: ps(profile.local()),
            occupancy: (c.occupancy * 1024.0).round().clamp(1.0, 1024.0) as u64,
            line_shift: profile.line_bytes.trailing_zeros(),
            outstanding: c.outstanding_misses.max(1) as usize,
            store_buffer: c.store_buffer as usize,
            smt_speed: (c.smt_speed * 1024.0).round().clamp(1.0, 1024.0) as u64,
            smt: siblings.iter().any(|s| !s.is_empty()),
            siblings,
            answer_at: in_1024ths(profile.model.answer_at),
            hold_window: profile.model.hold_window,
            own: c.caches.and_then(|o| {
                let lb = profile.line_bytes;
                let l1 = (
                    OwnCaches::sets(o.l1_kib, o.l1_ways, lb)?,
                    o.l1_ways as usize,
                );
                let l2 = (
                    OwnCaches::sets(o.l2_kib, o.l2_ways, lb)?,
                    o.l2_ways as usize,
                );
                Some((own::Geometry { l1, l2 }, ps(o.l2), ps(o.llc)))
            }),
            core_of: {
                let mut of: Vec<usize> = cpus.iter().map(|p| p.core).collect();
                of.push(of.iter().max().map_or(0, |&c| c + 1));
                of
            },
        }
    }

    /// The SMT siblings of `cpu` (none for a housekeeping place).
    #[inline]
    pub fn siblings(&self, cpu: usize) -> &[usize] {
        if !self.smt {
            return &[];
        }
        self.siblings.get(cpu).map_or(&[], Vec::as_slice)
    }

    /// What `work` of private work takes on a CPU whose sibling is busy (`shared`) or not.
    #[inline]
    pub fn private(&self, work: Picos, shared: bool) -> Picos {
        if shared {
            work * 1024 / self.smt_speed
        } else {
            work
        }
    }

    /// The housekeeping place (threads that stand for the harness, not a backend).
    pub fn housekeeping(&self) -> usize {
        self.places - 1
    }

    /// How far apart two places are.
    #[inline]
    pub fn distance(&self, a: usize, b: usize) -> Distance {
        self.distance[a * self.places + b]
    }

    /// A transfer's latency over `d`.
    #[inline]
    pub fn transfer(&self, d: Distance) -> Picos {
        self.transfer[d as usize]
    }

    /// What a load costs that finds the line Shared by other cores, the nearest `d` away.
    #[inline]
    pub fn load_shared(&self, d: Distance) -> Picos {
        self.load_from_shared[d as usize]
    }

    /// What a store (or, with `rmw`, a read-modify-write) costs that finds the line Shared by
    /// other cores, the farthest `d` away.
    #[inline]
    pub fn on_shared(&self, d: Distance, rmw: bool) -> Picos {
        if rmw {
            self.atomic_on_shared[d as usize]
        } else {
            self.store_on_shared[d as usize]
        }
    }
}

/// A set of places, as bits: the first 128 in the line's own state (every profile so far has
/// fewer places), any beyond in a block on the heap.
#[derive(Debug, Clone, Default)]
struct Places {
    /// Places 0 to 127.
    low: [u64; LOW_WORDS],
    /// Places from 128 on, 64 a word (empty until one is inserted).
    high: Box<[u64]>,
}

/// Words of [`Places::low`].
const LOW_WORDS: usize = 2;

impl Places {
    /// The word holding place `p`'s bit, if there is one yet.
    #[inline]
    fn word(&self, p: usize) -> Option<&u64> {
        match self.low.get(p / 64) {
            Some(w) => Some(w),
            None => self.high.get(p / 64 - LOW_WORDS),
        }
    }

    #[inline]
    fn contains(&self, p: usize) -> bool {
        self.word(p).is_some_and(|w| w & (1 << (p % 64)) != 0)
    }

    #[inline]
    fn insert(&mut self, p: usize) {
        let bit = 1 << (p % 64);
        if let Some(w) = self.low.get_mut(p / 64) {
            *w |= bit;
            return;
        }
        let i = p / 64 - LOW_WORDS;
        if self.high.len() <= i {
            let mut more = self.high.to_vec();
            more.resize(i + 1, 0);
            self.high = more.into_boxed_slice();
        }
        self.high[i] |= bit;
    }

    #[inline]
    fn clear(&mut self) {
        self.low = [0; LOW_WORDS];
        self.high.iter_mut().for_each(|w| *w = 0);
    }

    /// The places, in increasing order.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.low
            .iter()
            .chain(self.high.iter())
            .enumerate()
            .flat_map(|(i, &w)| {
                let mut w = w;
                std::iter::from_fn(move || {
                    (w != 0).then(|| {
                        let b = w.trailing_zeros() as usize;
                        w &= w - 1;
                        i * 64 + b
                    })
                })
            })
    }
}

const NO_OWNER: u32 = u32::MAX;

/// One transfer of a line, kept while the place it brought the line to may still use it. Hops
/// are most of the model's memory (a line that many CPUs read keeps one per reader), so one is
/// 16 bytes: the arrival is kept as the time after the answer.
#[derive(Debug, Clone, Copy)]
struct Hop {
    /// When the previous holder answered: the transfer's effect.
    answer: Picos,
    /// From the answer to the line's arrival, in picoseconds.
    rest: u32,
    /// The place the line went to, times two, plus one if it went exclusive (a store or
    /// read-modify-write) rather than as a shared copy (a load).
    place_and_kind: u32,
}

impl Hop {
    fn new(place: usize, exclusive: bool, answer: Picos, done: Picos) -> Hop {
        let place = u32::try_from(place)
            .ok()
            .filter(|&p| p < 1 << 31)
            .expect("fewer than 2^31 places");
        Hop {
            answer,
            rest: u32::try_from((done - answer).0)
                .expect("a line transfer's second half of less than 4.29 ms of virtual time"),
            place_and_kind: place << 1 | exclusive as u32,
        }
    }

    /// The place the line went to.
    #[inline]
    fn place(&self) -> u32 {
        self.place_and_kind >> 1
    }

    /// Whether it went exclusive (a store or read-modify-write) or as a shared copy (a load).
    #[inline]
    fn exclusive(&self) -> bool {
        self.place_and_kind & 1 != 0
    }

    /// When the line arrived.
    #[inline]
    fn done(&self) -> Picos {
        self.answer + Picos(u64::from(self.rest))
    }
}

/// One line's coherence state.
#[derive(Debug, Clone)]
struct Line {
    /// The place holding it exclusively, or `NO_OWNER`.
    owner: u32,
    /// How many of `hops[1..]` are exclusive: with none, no copy a load could still use is
    /// left (see [`Line::held_until_answer`]), and the hops need not be read.
    later_exclusive: u32,
    /// How many hops at the end of `hops` are shared copies (the loads since the last
    /// exclusive transfer, or since the first hop if none was exclusive).
    trailing_loads: u32,
    /// The places holding shared copies (when there is no owner).
    sharers: Places,
    /// When the last transfer stops keeping the line busy.
    busy_until: Picos,
    /// Writes so far (for spin elision: a re-read of an unchanged line changes nothing).
    version: u64,
    /// The line's transfers in order, from the last one whose place may still hold it.
    hops: VecDeque<Hop>,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            owner: NO_OWNER,
            later_exclusive: 0,
            trailing_loads: 0,
            sharers: Places::default(),
            busy_until: Picos::ZERO,
            version: 0,
            hops: VecDeque::new(),
        }
    }
}

impl Line {
    /// An access of kind `kind` taking effect: a write counts; returns the write count after it.
    fn take_effect(&mut self, kind: Access) -> u64 {
        if kind != Access::Load {
            self.version += 1;
        }
        self.version
    }

    /// Whether `place`, accessing at `now`, still holds the line that a later request (queued,
    /// and so already the owner's in this model's books) has not reached yet: the place's
    /// transfer has arrived and the next one's holder has not answered. `exclusive` asks for
    /// a copy it may write.
    ///
    /// A copy lasts until the answer of the next transfer that takes it away: for a copy read
    /// from, the next exclusive transfer (another CPU's load leaves the other shared copies
    /// where they are); for a copy written to, any next transfer.
    fn held_until_answer(&mut self, place: usize, now: Picos, exclusive: bool) -> bool {
        // Every access from now on is at `now` or later: the copies that an exclusive transfer
        // answered by now took away are over, and so are their hops. (The last such transfer
        // is found from the newest exclusive hop back; once every exclusive one of `hops[1..]`
        // has been seen, there is none.)
        if self.later_exclusive > 0 {
            let (mut seen, mut answered) = (0, None);
            for k in (1..=self.last_exclusive()).rev() {
                let h = &self.hops[k];
                if h.exclusive() {
                    if h.answer <= now {
                        answered = Some(k);
                        break;
                    }
                    seen += 1;
                    if seen == self.later_exclusive {
                        break;
                    }
                }
            }
            if let Some(k) = answered {
                // The exclusive hops up to `k` leave `hops[1..]`: dropped, or (`k`) first.
                let gone = (1..=k).filter(|&i| self.hops[i].exclusive()).count();
                self.later_exclusive -= gone as u32;
                self.hops.drain(..k);
            }
        }
        // Every exclusive transfer in `hops[1..]` is now answered after `now`, and so arrives
        // after it too: none of them brought a copy this place may use now.
        let (place, Some(first)) = (place as u32, self.hops.front()) else {
            return false;
        };
        if exclusive {
            // A written copy lasts until the next transfer's answer, whatever its kind: only
            // the first hop's can have arrived and be kept.
            first.exclusive()
                && first.place() == place
                && first.done() <= now
                && self.hops.get(1).is_some_and(|next| now < next.answer)
        } else {
            // A read copy lasts until the next exclusive transfer's answer: any copy brought
            // before the last exclusive transfer is still there.
            self.later_exclusive > 0
                && self
                    .hops
                    .range(..self.last_exclusive())
                    .any(|h| h.place() == place && h.done() <= now)
        }
    }

    /// The index of the last exclusive hop (while `later_exclusive` counts one).
    #[inline]
    fn last_exclusive(&self) -> usize {
        self.hops.len() - 1 - self.trailing_loads as usize
    }

    /// Queues a transfer of the line.
    fn push(&mut self, hop: Hop) {
        if !hop.exclusive() {
            self.trailing_loads += 1;
        } else {
            self.trailing_loads = 0;
            if !self.hops.is_empty() {
                self.later_exclusive += 1;
            }
        }
        self.hops.push_back(hop);
    }
}

/// The outcome of one access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charged {
    /// When the access takes effect: at once for a hit; for a miss, when the line's holder
    /// answers, half-way through its transfer (after the transfers queued before it).
    pub answer: Picos,
    /// When the access completes.
    pub done: Picos,
    /// The line (address >> line shift).
    pub line: u64,
    /// A hit or a miss, and so whether the access has taken effect yet.
    pub served: Served,
    /// Whether the miss was the core's own: a line it holds, brought back from its L2 or its
    /// die's last-level cache (not a transfer from another core: the hot-lines tally leaves
    /// it out).
    pub refill: bool,
}

/// How an access was served, which decides when it takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// From a copy the place holds: the access took effect at once.
    Hit {
        /// The line's write count after the access (for spin elision).
        version: u64,
    },
    /// By a transfer: the access takes effect when the line's holder answers
    /// ([`Charged::answer`]), and [`Caches::effect`] records it then.
    Miss,
}

impl Charged {
    /// Whether the access was a miss (a transfer).
    pub fn miss(&self) -> bool {
        self.served == Served::Miss
    }
}

/// `cost` times a factor in [1 − `spread`, 1 + `spread`) (`spread` in 1/1024ths), from the
/// xorshift64 generator `state`.
fn jittered(state: &mut u64, spread: u64, cost: Picos) -> Picos {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    let u = x >> 54; // uniform in 0..1024
    cost * (1024 - spread + 2 * spread * u / 1024) / 1024
}

/// Every line's state.
#[derive(Debug)]
pub struct Caches {
    /// By line, in the order first touched (see [`crate::keyed`]).
    lines: Keyed<Line>,
    /// Transfers so far, by distance.
    pub transfers: [u64; 8],
    /// The jitter generator's state (xorshift64, never zero). Its seed ([`Caches::new`]) is
    /// arbitrary (unsourced): another seed gives other figures, by an amount not yet measured.
    jitter: u64,
    /// How far latencies stray, in 1/1024ths.
    spread: u64,
    /// Which lines each core still has in its L1 and L2 (where the profile sizes them).
    own: own::OwnCaches,
}

impl Default for Caches {
    fn default() -> Self {
        Self::new()
    }
}

impl Caches {
    /// No line cached anywhere, and the jitter generator at its fixed seed.
    pub fn new() -> Caches {
        Caches::for_model(&Model::default())
    }

    /// No line cached anywhere, transfers jittered as `model` says, from its seed.
    pub fn for_model(model: &Model) -> Caches {
        Caches {
            lines: Keyed::default(),
            transfers: [0; 8],
            jitter: model.seed.max(1),
            spread: in_1024ths(model.jitter),
            own: own::OwnCaches::default(),
        }
    }

    /// As [`Caches::new`], every transfer costing exactly the profile's figure.
    pub fn without_jitter() -> Caches {
        Caches {
            spread: 0,
            ..Caches::new()
        }
    }

    /// Charges `place`'s access of kind `kind` to the byte at `addr`, issued at `now`, and
    /// applies it: a hit at once; a miss takes the line at once and is queued behind the line's
    /// earlier transfers, its completion time returned.
    pub fn access(
        &mut self,
        costs: &Costs,
        place: usize,
        addr: usize,
        kind: Access,
        now: Picos,
    ) -> Charged {
        let key = (addr as u64) >> costs.line_shift;
        let (first_seen, line) = self.lines.index_and_value(key);
        // The line's number in the core's caches: its place in the shared-memory map, which is
        // the same in every run; a line outside the map (the harness's own) by the order it was
        // first touched, as its host address is not (`crate::own`). The two never meet: a
        // map line's number is at least `BASE` over the line size, an order below 2^32.
        let number = if crate::shmem::in_map(addr) {
            key
        } else {
            first_seen
        };
        let mine = line.owner == place as u32;
        // A load of a copy the books still list is a hit below; anything else may still be
        // served by a copy a queued transfer has not yet taken away.
        let listed = mine || (kind == Access::Load && line.sharers.contains(place));
        if costs.hold_window && !listed && line.held_until_answer(place, now, kind != Access::Load)
        {
            // The line is still here: requests queued for it have not reached this place.
            let cost = match kind {
                Access::Rmw => costs.atomic,
                _ => costs.hit,
            };
            let version = line.take_effect(kind);
            if let Some((g, ..)) = costs.own {
                self.own.touch(g, costs.core_of[place], number);
            }
            return Charged {
                answer: now,
                done: now + cost,
                line: key,
                served: Served::Hit { version },
                refill: false,
            };
        }
        let (cost, miss) = match kind {
            Access::Load if mine || line.sharers.contains(place) => (costs.hit, None),
            Access::Load => {
                let (cost, from) = if line.owner != NO_OWNER {
                    let d = costs.distance(place, line.owner as usize);
                    (costs.transfer(d), d)
                } else {
                    let nearest = line.sharers.iter().map(|s| costs.distance(place, s)).min();
                    match nearest {
                        Some(d) => (costs.load_shared(d), d),
                        None => (costs.transfer(Distance::Memory), Distance::Memory),
                    }
                };
                if line.owner != NO_OWNER {
                    line.sharers.insert(line.owner as usize);
                    line.owner = NO_OWNER;
                }
                line.sharers.insert(place);
                (cost, Some(from))
            }
            Access::Store | Access::Rmw => {
                let own = if kind == Access::Rmw {
                    costs.atomic
                } else {
                    costs.hit
                };
                let rmw = kind == Access::Rmw;
                let (cost, farthest) = if mine {
                    (own, None)
                } else if line.owner != NO_OWNER {
                    let d = costs.distance(place, line.owner as usize);
                    (costs.transfer(d) + own.saturating_sub(costs.hit), Some(d))
                } else {
                    let others = line.sharers.iter().filter(|&s| s != place);
                    match others.map(|s| costs.distance(place, s)).max() {
                        // Invalidating every other copy: the farthest decides.
                        Some(d) => (costs.on_shared(d, rmw), Some(d)),
                        // Shared by this place alone (or by none): an upgrade, or a fetch.
                        None if line.sharers.contains(place) => (own, None),
                        None => {
                            let d = Distance::Memory;
                            (costs.transfer(d) + own.saturating_sub(costs.hit), Some(d))
                        }
                    }
                };
                line.owner = place as u32;
                line.sharers.clear();
                (cost, farthest)
            }
        };
        // Where the core has the line: a transfer brought it to the L1; a copy the books list
        // may have aged out to the L2 or the last-level cache since the core last used it.
        let level = match costs.own {
            Some((g, ..)) => self.own.touch(g, costs.core_of[place], number),
            None => Level::L1,
        };
        let (answer, done) = match miss {
            None => (now, now + cost),
            Some(d) => {
                let cost = jittered(&mut self.jitter, self.spread, cost);
                self.transfers[d as usize] += 1;
                let start = now.max(line.busy_until);
                line.busy_until = start + cost * costs.occupancy / 1024;
                // The holder answers `model.answer_at` through the transfer, by default half-way
                // (unsourced: the request's half of a round trip; see the module doc's "Timing").
                let (answer, done) = (start + cost * costs.answer_at / 1024, start + cost);
                line.push(Hop::new(place, kind != Access::Load, answer, done));
                (answer, done)
            }
        };
        if miss.is_none() && level != Level::L1 {
            // The core's own copy, refilled: the level's latency in place of the L1's, taking
            // effect at once (no other core is asked), served as a miss so that independent
            // loads overlap it.
            let (_, l2, llc) = costs
                .own
                .expect("a level below the L1 needs the profile's caches");
            let refill = if level == Level::L2 { l2 } else { llc };
            return Charged {
                answer: now,
                done: now + cost + refill.saturating_sub(costs.hit),
                line: key,
                served: Served::Miss,
                refill: true,
            };
        }
        Charged {
            answer,
            done,
            line: key,
            served: match miss {
                None => Served::Hit {
                    version: line.take_effect(kind),
                },
                Some(_) => Served::Miss,
            },
            refill: false,
        }
    }

    /// Records that an access of kind `kind` to `line` takes effect now (see [`Charged::answer`])
    /// and returns the line's write count after it.
    pub fn effect(&mut self, line: u64, kind: Access) -> u64 {
        self.lines.get_or_default(line).take_effect(kind)
    }

    /// Transfers so far, with their distance names.
    pub fn transfer_counts(&self) -> impl Iterator<Item = (Distance, u64)> + '_ {
        DISTANCES.iter().map(|&d| (d, self.transfers[d as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn two_socket() -> (Costs, Profile) {
        let p = Profile::find("westmere-80").unwrap();
        (Costs::new(&p), p)
    }

    #[test]
    fn a_ping_pong_between_two_cores_costs_one_transfer_per_hand_over() {
        let (c, _) = two_socket();
        let mut caches = Caches::without_jitter();
        let addr = 0x1000;
        // CPU 0 and CPU 1 share a die; CPU 0 and CPU 10 are one hop apart.
        let mut now = Picos::ZERO;
        for (other, d) in [(1, Distance::Die), (10, Distance::Hop1)] {
            now = caches.access(&c, 0, addr, Access::Rmw, now).done;
            for round in 0..10 {
                let who = if round % 2 == 0 { other } else { 0 };
                let r = caches.access(&c, who, addr, Access::Rmw, now);
                assert_eq!(r.done - now, c.transfer(d) + c.atomic - c.hit, "{round}");
                now = r.done;
            }
            // A hit after it costs an atomic's own cost only.
            let r = caches.access(&c, 0, addr, Access::Rmw, now);
            assert_eq!(r.done - now, c.atomic);
            now = r.done;
        }
    }

    /// Westmere's core holds 512 lines in its L1 (32 KiB) and 4,096 in its L2 (256 KiB): a
    /// line it wrote comes back from the L2 after a walk over 1,024 others, from the
    /// last-level cache after 8,192, each at Table 3's latency and as no transfer; another
    /// core still pays the transfer from it.
    #[test]
    fn a_line_the_core_has_not_used_for_long_comes_back_from_its_l2_or_the_last_level_cache() {
        let (c, p) = two_socket();
        let own = p.cycles.caches.unwrap();
        let ps = |cycles: f64| Picos((cycles * 1000.0 / p.ghz).round() as u64);
        let mut caches = Caches::without_jitter();
        let line = |i: usize| 0x10_0000 + i * 64;
        let mut now = caches
            .access(&c, 0, line(0), Access::Store, Picos::ZERO)
            .done;
        let again = caches.access(&c, 0, line(0), Access::Load, now);
        assert_eq!((again.done - now, again.miss()), (c.hit, false));
        for (walk, latency) in [(1024, own.l2), (8192, own.llc)] {
            for i in 1..=walk {
                now = caches.access(&c, 0, line(i), Access::Store, now).done;
            }
            let before = caches.transfers;
            let r = caches.access(&c, 0, line(0), Access::Load, now);
            assert!(r.refill && r.miss(), "{walk}");
            assert_eq!((r.answer, r.done - now), (now, ps(latency)), "{walk}");
            assert_eq!(caches.transfers, before, "{walk}");
            caches.effect(r.line, Access::Load);
            now = r.done;
            // Used again: in the L1.
            let hit = caches.access(&c, 0, line(0), Access::Load, now);
            assert_eq!((hit.done - now, hit.refill), (c.hit, false));
            // An atomic on a refilled line costs the level's latency plus its own.
            for i in 1..=walk {
                now = caches.access(&c, 0, line(i), Access::Store, now).done;
            }
            let rmw = caches.access(&c, 0, line(0), Access::Rmw, now);
            assert_eq!(rmw.done - now, ps(latency) + c.atomic - c.hit, "{walk}");
            caches.effect(rmw.line, Access::Rmw);
            now = rmw.done;
        }
        let other = caches.access(&c, 1, line(0), Access::Load, now);
        assert!(other.miss() && !other.refill);
        assert_eq!(other.done - now, c.transfer(Distance::Die));
    }

    #[test]
    fn a_writer_after_n_readers_invalidates_them_all_and_the_readers_miss_again() {
        let (c, _) = two_socket();
        let mut caches = Caches::without_jitter();
        let addr = 0x2000;
        caches.access(&c, 0, addr, Access::Store, Picos::ZERO);
        let readers = [1, 2, 3, 10, 20];
        for &r in &readers {
            caches.access(&c, r, addr, Access::Load, Picos::ZERO);
        }
        // Every reader hits now.
        for &r in &readers {
            assert!(!caches
                .access(&c, r, addr, Access::Load, Picos(1 << 40))
                .miss());
        }
        // The write waits for the farthest copy's invalidation (two packages away is hop1 on
        // this profile's table for socket 0 to 1 and 2), at the store-on-Shared row's cost.
        let now = Picos(1 << 41);
        let w = caches.access(&c, 0, addr, Access::Store, now);
        assert!(w.miss());
        let farthest = readers.iter().map(|&r| c.distance(0, r)).max().unwrap();
        assert_eq!(w.done - now, c.on_shared(farthest, false));
        assert!(c.on_shared(farthest, false) > c.transfer(farthest));
        // All N copies are gone: each reader misses again.
        for &r in &readers {
            assert!(
                caches
                    .access(&c, r, addr, Access::Load, Picos(1 << 42))
                    .miss(),
                "{r}"
            );
        }
    }

    #[test]
    fn jittered_transfers_stay_within_the_spread_and_average_the_profiles_figure() {
        let (c, _) = two_socket();
        let mut caches = Caches::new();
        let lat = c.transfer(Distance::Die);
        let (lo, hi) = (
            lat - lat * JITTER_1024 / 1024,
            lat + lat * JITTER_1024 / 1024,
        );
        let (mut sum, n, mut least, mut most) = (Picos::ZERO, 10_000u64, Picos::MAX, Picos::ZERO);
        let mut now =
            caches.access(&c, 0, 0x4000, Access::Rmw, Picos::ZERO).done + Picos(1_000_000);
        for k in 0..n {
            let who = 1 - (k % 2) as usize;
            let r = caches.access(&c, who, 0x4000, Access::Store, now);
            let cost = r.done - now;
            assert!((lo..hi).contains(&cost), "{cost:?} outside {lo:?}..{hi:?}");
            sum += cost;
            (least, most) = (least.min(cost), most.max(cost));
            // Well after the line's queue has drained.
            now = r.done + Picos(1_000_000);
        }
        let mean = sum / n;
        assert!(
            mean.0.abs_diff(lat.0) * 50 < lat.0,
            "mean {mean:?} against {lat:?}"
        );
        // And they do spread over most of the range.
        assert!(
            least < lat - lat / 4 && most > lat + lat / 4,
            "{least:?}..{most:?}"
        );
        // The same seed gives the same latencies.
        let mut again = Caches::new();
        again.access(&c, 0, 0x4000, Access::Rmw, Picos::ZERO);
        let first = again.access(&c, 1, 0x4000, Access::Store, Picos::ZERO).done;
        let mut third = Caches::new();
        third.access(&c, 0, 0x4000, Access::Rmw, Picos::ZERO);
        assert_eq!(
            third.access(&c, 1, 0x4000, Access::Store, Picos::ZERO).done,
            first
        );
    }

    #[test]
    fn contending_misses_on_one_line_queue_behind_each_other() {
        let (c, _) = two_socket();
        let mut caches = Caches::without_jitter();
        let addr = 0x3000;
        caches.access(&c, 0, addr, Access::Store, Picos::ZERO);
        let now = Picos(1_000_000);
        // Nine CPUs of the same die load the line at the same instant: the first fetches CPU
        // 0's Modified copy, and each of the others is served, one after another, from the
        // copies shared by then.
        let (lat, shared) = (c.transfer(Distance::Die), c.load_shared(Distance::Die));
        let mut done: Vec<Picos> = (1..=9)
            .map(|cpu| caches.access(&c, cpu, addr, Access::Load, now).done - now)
            .collect();
        done.sort();
        for (k, d) in done.iter().enumerate() {
            assert_eq!(*d, lat + shared * k as u64, "{k}");
        }
    }

    #[test]
    fn a_miss_takes_effect_when_the_holder_answers_after_the_queue() {
        let (c, _) = two_socket();
        let mut caches = Caches::without_jitter();
        let addr = 0x5000;
        caches.access(&c, 0, addr, Access::Store, Picos::ZERO);
        let lat = c.transfer(Distance::Die);
        let now = Picos(1_000_000);
        let first = caches.access(&c, 1, addr, Access::Rmw, now);
        let second = caches.access(&c, 2, addr, Access::Rmw, now);
        let cost = lat + c.atomic - c.hit;
        assert_eq!(first.answer, now + cost / 2);
        // The second is served after the first, and answered half-way through its own transfer.
        assert_eq!(second.answer, first.done + cost / 2);
        assert_eq!(second.done - second.answer, cost - cost / 2);
    }

    #[test]
    fn a_place_keeps_its_line_until_the_next_request_is_answered() {
        let (c, _) = two_socket();
        let mut caches = Caches::without_jitter();
        let addr = 0x6000;
        caches.access(&c, 0, addr, Access::Store, Picos::ZERO);
        let now = Picos(1_000_000);
        // CPU 1's exchange, then CPU 2's, queued behind it.
        let mine = caches.access(&c, 1, addr, Access::Rmw, now);
        let next = caches.access(&c, 2, addr, Access::Rmw, now);
        // The books say CPU 2 owns the line, but CPU 1 has it until CPU 2's request is
        // answered: a retry in between is a hit, at an atomic's cost.
        let retry = caches.access(&c, 1, addr, Access::Rmw, mine.done + Picos(1));
        assert!(!retry.miss());
        assert_eq!(retry.done - retry.answer, c.atomic);
        // After the answer it has to ask again, behind CPU 2.
        let late = caches.access(&c, 1, addr, Access::Rmw, next.answer);
        assert!(late.miss());
        assert!(late.answer > next.done);
        // A shared copy serves loads in its window, but a store needs the line exclusive.
        let addr = 0x7000;
        caches.access(&c, 0, addr, Access::Store, Picos::ZERO);
        let read = caches.access(&c, 1, addr, Access::Load, now);
        let write = caches.access(&c, 2, addr, Access::Store, now);
        assert!(!caches.access(&c, 1, addr, Access::Load, read.done).miss());
        let upgrade = caches.access(&c, 1, addr, Access::Store, read.done);
        assert!(upgrade.miss());
        assert!(upgrade.answer > write.done);
    }

    #[test]
    fn the_profiles_model_sets_the_answer_the_hold_window_and_the_jitter() {
        let with = |item: &str| {
            let p = Profile::find(&format!("westmere-80+{item}")).unwrap();
            (Costs::new(&p), Caches::for_model(&p.model))
        };
        let addr = 0x6000;
        let now = Picos(1_000_000);
        // Answered at the start of the transfer (and the next request too, as the line
        // arrives, which ends the window at once); with no hold window a retry after the
        // exchange is a miss again, queued behind the next request.
        for (item, answered_at_start, held) in [
            ("model.jitter=0", false, true),
            ("model.answer_at=0", true, false),
            ("model.hold_window=false", false, false),
        ] {
            let (c, mut caches) = with(&format!("{item}+model.jitter=0"));
            caches.access(&c, 0, addr, Access::Store, Picos::ZERO);
            let mine = caches.access(&c, 1, addr, Access::Rmw, now);
            caches.access(&c, 2, addr, Access::Rmw, now);
            assert_eq!(mine.answer == now, answered_at_start, "{item}");
            let retry = caches.access(&c, 1, addr, Access::Rmw, mine.done + Picos(1));
            assert_eq!(!retry.miss(), held, "{item}");
        }
        // Without jitter every transfer is the figure; another seed draws other latencies.
        let draws = |item: &str| -> Vec<Picos> {
            let (c, mut caches) = with(item);
            let mut at = caches.access(&c, 0, addr, Access::Store, Picos::ZERO).done;
            (0..16)
                .map(|k| {
                    let r = caches.access(&c, 1 - k % 2, addr, Access::Store, at + Picos(1));
                    at = r.done;
                    r.done - r.answer
                })
                .collect()
        };
        let exact = draws("model.jitter=0");
        assert!(exact.windows(2).all(|w| w[0] == w[1]), "{exact:?}");
        assert_ne!(draws("model.seed=7"), draws("model.seed=8"));
        assert_eq!(draws("model.seed=7"), draws("model.seed=7"));
    }

    #[test]
    fn a_store_on_a_shared_line_costs_the_profiles_row_for_the_farthest_sharer() {
        let opteron = Profile::find("opteron-48").unwrap();
        let mut bare = opteron.clone();
        bare.cycles.store_on_shared = None;
        bare.cycles.atomic_on_shared = None;
        let cycles = |n: f64| Picos((n * 1000.0 / opteron.ghz).round() as u64);
        let far = (0..48).find(|&b| Costs::new(&opteron).distance(0, b) == Distance::Hop2);
        let far = far.expect("a CPU two hops from CPU 0");
        // CPUs 1 and 2 (CPU 0's die) read the line CPU 3 wrote; then CPU 0 writes it. With a
        // sharer two hops away as well, the farthest decides.
        for (sharers, kind, with_rows, without_rows) in [
            (&[1, 2][..], Access::Store, 246.0, Distance::Die),
            (&[1, 2], Access::Rmw, 272.0, Distance::Die),
            (&[1, far], Access::Store, 296.0, Distance::Hop2),
        ] {
            for profile in [&opteron, &bare] {
                let c = Costs::new(profile);
                let mut caches = Caches::without_jitter();
                let addr = 0x8000;
                caches.access(&c, 3, addr, Access::Store, Picos::ZERO);
                let mut now = Picos(1_000_000);
                for &s in sharers {
                    now = caches.access(&c, s, addr, Access::Load, now).done;
                }
                let w = caches.access(&c, 0, addr, kind, now);
                let want = if profile.cycles.store_on_shared.is_some() {
                    cycles(with_rows)
                } else if kind == Access::Rmw {
                    c.transfer(without_rows) + c.atomic - c.hit
                } else {
                    c.transfer(without_rows)
                };
                assert_eq!(w.done - now, want, "{sharers:?} {kind:?}");
                // And the writer is then the only holder: its next store is a hit.
                assert!(!caches.access(&c, 0, addr, Access::Store, w.done).miss());
            }
        }
    }

    #[test]
    fn a_load_of_a_shared_line_costs_the_profiles_row_for_the_nearest_sharer() {
        let westmere = Profile::find("westmere-80").unwrap();
        let cycles = |n: f64| Picos((n * 1000.0 / westmere.ghz).round() as u64);
        let c = Costs::new(&westmere);
        let mut caches = Caches::without_jitter();
        let addr = 0x9000;
        // CPU 1 writes the line; CPU 0 (same die) loads it from CPU 1's Modified copy.
        caches.access(&c, 1, addr, Access::Store, Picos::ZERO);
        let now = Picos(1_000_000);
        let from_modified = caches.access(&c, 0, addr, Access::Load, now);
        assert_eq!(from_modified.done - now, c.transfer(Distance::Die));
        // Now CPUs 0 and 1 share it: CPU 2 (same die) loads it from the die's last-level
        // cache, and CPU 10 (another package) from there too, at Table 2's Shared rows.
        let now = from_modified.done;
        let from_shared = caches.access(&c, 2, addr, Access::Load, now);
        assert_eq!(from_shared.done - now, cycles(44.0));
        assert_eq!(c.distance(10, 0), Distance::Hop1);
        let now = from_shared.done;
        let remote = caches.access(&c, 10, addr, Access::Load, now);
        assert_eq!(remote.done - now, cycles(223.0));
        assert!(cycles(44.0) < c.transfer(Distance::Die));
    }

    /// `Line::held_until_answer` as first written: every hop read from the newest back on
    /// each call. The line's counts let the model skip most of them; it must answer the same.
    fn held_by_reading_every_hop(
        hops: &mut VecDeque<Hop>,
        place: usize,
        now: Picos,
        exclusive: bool,
    ) -> bool {
        if let Some(k) = (1..hops.len())
            .rev()
            .find(|&k| hops[k].exclusive() && hops[k].answer <= now)
        {
            hops.drain(..k);
        }
        let (mut next_any, mut next_exclusive) = (None, None);
        for h in hops.iter().rev() {
            if h.place() == place as u32 && h.done() <= now && (h.exclusive() || !exclusive) {
                let until = if exclusive { next_any } else { next_exclusive };
                if until.is_some_and(|answer| now < answer) {
                    return true;
                }
            }
            next_any = Some(h.answer);
            if h.exclusive() {
                next_exclusive = Some(h.answer);
            }
        }
        false
    }

    #[test]
    fn a_copy_held_until_an_answer_is_found_as_by_reading_every_hop() {
        // Random transfers of a few places, with times that go back as well as forward (a
        // touch is charged at its thread's own clock), each followed by a question.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let (mut held, mut answers) = (0, 0);
        for _ in 0..200 {
            let mut line = Line::default();
            let mut hops = VecDeque::new();
            let mut t = 0u64;
            for _ in 0..300 {
                t = (t + next(40)).saturating_sub(next(30));
                if next(3) > 0 {
                    let answer = Picos(t + next(20));
                    let done = answer + Picos(next(20));
                    let hop = Hop::new(next(5) as usize, next(4) == 0, answer, done);
                    line.push(hop);
                    hops.push_back(hop);
                }
                let (place, now, exclusive) = (next(5) as usize, Picos(t), next(2) == 0);
                let expected = held_by_reading_every_hop(&mut hops, place, now, exclusive);
                assert_eq!(line.held_until_answer(place, now, exclusive), expected);
                let kept: Vec<_> = line.hops.iter().map(|h| (h.place(), h.answer)).collect();
                assert_eq!(
                    kept,
                    hops.iter()
                        .map(|h| (h.place(), h.answer))
                        .collect::<Vec<_>>()
                );
                (held, answers) = (held + expected as u32, answers + 1);
            }
        }
        // Both answers came up often.
        assert!(
            held * 50 > answers && held * 2 < answers,
            "{held} of {answers}"
        );
    }

    #[test]
    fn sharers_beyond_the_first_128_places_are_kept_as_well() {
        let mut p = Places::default();
        for place in [0, 63, 64, 127, 128, 200, 1000] {
            p.insert(place);
        }
        assert!(p.contains(1000) && p.contains(128) && p.contains(127) && !p.contains(129));
        assert!(!p.contains(5000));
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            [0, 63, 64, 127, 128, 200, 1000]
        );
        p.clear();
        assert_eq!(p.iter().count(), 0);
        assert!(!p.contains(1000));
    }

    #[test]
    fn siblings_are_listed_only_on_a_profile_with_smt() {
        let (plain, _) = two_socket();
        assert!(!plain.smt);
        assert!((0..plain.housekeeping() + 1).all(|c| plain.siblings(c).is_empty()));
        let mut p = Profile::find("westmere-80").unwrap();
        p.topology.threads_per_core = 2;
        let smt = Costs::new(&p);
        assert!(smt.smt);
        let cpus = p.cpus();
        for c in 0..cpus.len() {
            let s = smt.siblings(c);
            assert_eq!(s.len(), 1, "{c}");
            assert_eq!(cpus[s[0]].core, cpus[c].core);
        }
        assert!(smt.siblings(smt.housekeeping()).is_empty());
    }
}
