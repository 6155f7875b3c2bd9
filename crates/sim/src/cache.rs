//! The cache-coherence cost model: what one load, store or read-modify-write costs a CPU,
//! given where the line is.
//!
//! Each line (64 B, or a 128-B pair where the profile says so) is in one of three states, as
//! MESI sees it from outside: held *exclusively* by one CPU (M or E: a `owner`), *shared* by a
//! set of CPUs (S), or in no cache. An access that hits a line the CPU holds costs `hit` (an
//! atomic on a line it owns, `atomic`). A load miss fetches the line from the nearest holder
//! (the owner, which keeps a shared copy, as MOESI's O state does, or the closest sharer),
//! or from memory. A store or read-modify-write miss takes the line exclusive: it costs the
//! round trip to the farthest holder, whose invalidation it must wait for, and leaves the
//! requester the only holder. A compare-and-swap that fails still takes the line exclusive,
//! as it does on x86.
//!
//! The distance between two CPUs is one of: same CPU, SMT sibling, same die (shared last-level
//! cache), same package, one, two, or three interconnect hops; the profile gives the latency of
//! each, measured as a line's transfer (the SOSP'13 study's load-from-modified figures).
//!
//! **Timing.** A miss takes effect when it is issued: the line changes hands at once (the
//! holders' copies are invalidated), its transfer is queued on the line, and the requester goes
//! on when the transfer ends. Handing the line over later (when the request reaches the
//! holders, half-way through the transfer, or at its end) lets the holder of a contended line
//! run on while requests are in flight, and makes TAS on the SOSP'13 study's 80-core Westmere
//! 13× faster than published at 80 threads, where handing it over at issue is within 2× from 2
//! to 80 threads (docs/simulator.md). The *value* a load that misses returns is another matter:
//! it is what the line holds half-way through the transfer, when the holder answers (the engine
//! runs the other CPUs up to that moment before the load reads). So a waiter that sees a
//! spinlock free saw it free half a transfer ago, as on hardware, and not at the moment it
//! asked, which would let the holder's next exchange always come first.
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
//! locks appear.
//!
//! Shortcuts the model takes: no capacity or conflict misses (every line stays cached until
//! another CPU takes it); no prefetching or false-sharing beyond the line size; loads are not
//! reordered past stores (the host executes every operation in one sequentially consistent
//! order); a transfer's latency does not depend on the load of the interconnect, only on the
//! line's own queue.

use crate::profile::Profile;
use rustc_hash::FxHashMap;

/// How far a transfer's latency strays either side of the profile's figure, as a fraction.
pub const JITTER: f64 = 0.5;

/// `JITTER` in 1/1024ths, for integer arithmetic on picoseconds.
const JITTER_1024: u64 = (JITTER * 1024.0) as u64;

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

/// Picoseconds per unit of virtual time: the simulator's clock counts picoseconds.
pub const PS_PER_NS: u64 = 1000;

/// A profile's costs, as picoseconds, and the distance between every pair of CPUs.
#[derive(Debug, Clone)]
pub struct Costs {
    /// CPUs, plus one place for housekeeping threads (last).
    places: usize,
    /// `distance[a * places + b]`.
    distance: Vec<Distance>,
    /// Transfer latency by distance.
    transfer: [u64; 8],
    /// A hit.
    pub hit: u64,
    /// An atomic on an owned line.
    pub atomic: u64,
    /// A pause.
    pub pause: u64,
    /// A fence.
    pub fence: u64,
    /// Per `busy_work` step, in femtoseconds (steps are a fraction of a nanosecond).
    pub busy_step_fs: u64,
    /// Charged per shim operation.
    pub local: u64,
    /// Fraction of a transfer's latency that it keeps the line busy, in 1/1024ths.
    occupancy: u64,
    /// log2 of the line size.
    pub line_shift: u32,
    /// `smt_speed` in 1/1024ths.
    smt_speed: u64,
    /// Each CPU's SMT siblings.
    siblings: Vec<Vec<usize>>,
}

impl Costs {
    /// The costs of `profile`.
    pub fn new(profile: &Profile) -> Costs {
        let ps = |cycles: f64| (cycles * 1000.0 / profile.ghz).round() as u64;
        let c = &profile.cycles;
        let cpus = profile.cpus();
        let n = cpus.len();
        let places = n + 1;
        let mut distance = vec![Distance::Same; places * places];
        // The housekeeping place: another core on CPU 0's die.
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
        Costs {
            places,
            distance,
            transfer: [
                ps(c.hit),
                ps(c.smt),
                ps(c.die),
                ps(c.package),
                ps(c.hop1),
                ps(c.hop2),
                ps(hop3),
                ps(c.memory),
            ],
            hit: ps(c.hit),
            atomic: ps(c.atomic),
            pause: ps(c.pause),
            fence: ps(c.fence),
            busy_step_fs: (c.busy_step * 1_000_000.0 / profile.ghz).round() as u64,
            local: ps(c.local),
            occupancy: (c.occupancy * 1024.0).round().clamp(1.0, 1024.0) as u64,
            line_shift: profile.line_bytes.trailing_zeros(),
            smt_speed: (c.smt_speed * 1024.0).round().clamp(1.0, 1024.0) as u64,
            siblings: (0..n)
                .map(|a| {
                    (0..n)
                        .filter(|&b| b != a && cpus[b].core == cpus[a].core)
                        .collect()
                })
                .collect(),
        }
    }

    /// The SMT siblings of `cpu` (none for a housekeeping place).
    pub fn siblings(&self, cpu: usize) -> &[usize] {
        self.siblings.get(cpu).map_or(&[], Vec::as_slice)
    }

    /// `ps` of private work on a CPU whose sibling is busy (`shared`) or not.
    #[inline]
    pub fn private(&self, ps: u64, shared: bool) -> u64 {
        if shared {
            ps * 1024 / self.smt_speed
        } else {
            ps
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

    /// A transfer's latency over `d`, in ps.
    #[inline]
    pub fn transfer(&self, d: Distance) -> u64 {
        self.transfer[d as usize]
    }
}

/// A set of places, as bits.
#[derive(Debug, Clone, Default)]
struct Places(Vec<u64>);

impl Places {
    fn contains(&self, p: usize) -> bool {
        self.0.get(p / 64).is_some_and(|w| w & (1 << (p % 64)) != 0)
    }

    fn insert(&mut self, p: usize) {
        if self.0.len() <= p / 64 {
            self.0.resize(p / 64 + 1, 0);
        }
        self.0[p / 64] |= 1 << (p % 64);
    }

    fn clear(&mut self) {
        self.0.iter_mut().for_each(|w| *w = 0);
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
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

/// One line's coherence state.
#[derive(Debug, Clone)]
struct Line {
    /// The place holding it exclusively, or `NO_OWNER`.
    owner: u32,
    /// The places holding shared copies (when there is no owner).
    sharers: Places,
    /// When the last transfer stops keeping the line busy.
    busy_until: u64,
    /// Writes so far (for spin elision: a re-read of an unchanged line changes nothing).
    version: u64,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            owner: NO_OWNER,
            sharers: Places::default(),
            busy_until: 0,
            version: 0,
        }
    }
}

/// The outcome of one access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charged {
    /// When the access completes.
    pub done: u64,
    /// The line (address >> line shift).
    pub line: u64,
    /// The line's write count after the access.
    pub version: u64,
    /// Whether the access was a miss (a transfer).
    pub miss: bool,
}

/// `cost` times a factor in [1 − `spread`, 1 + `spread`) (`spread` in 1/1024ths), from the
/// xorshift64 generator `state`.
fn jittered(state: &mut u64, spread: u64, cost: u64) -> u64 {
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
    lines: FxHashMap<u64, Line>,
    /// Transfers so far, by distance.
    pub transfers: [u64; 8],
    /// The jitter generator's state (xorshift64, never zero).
    jitter: u64,
    /// How far latencies stray, in 1/1024ths.
    spread: u64,
}

impl Default for Caches {
    fn default() -> Self {
        Self::new()
    }
}

impl Caches {
    /// No line cached anywhere, and the jitter generator at its fixed seed.
    pub fn new() -> Caches {
        Caches {
            lines: FxHashMap::default(),
            transfers: [0; 8],
            jitter: 0x2545_F491_4F6C_DD1D,
            spread: JITTER_1024,
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
        now: u64,
    ) -> Charged {
        let key = (addr as u64) >> costs.line_shift;
        let line = self.lines.entry(key).or_default();
        let mine = line.owner == place as u32;
        let (cost, miss) = match kind {
            Access::Load if mine || line.sharers.contains(place) => (costs.hit, None),
            Access::Load => {
                let from = if line.owner != NO_OWNER {
                    costs.distance(place, line.owner as usize)
                } else {
                    line.sharers
                        .iter()
                        .map(|s| costs.distance(place, s))
                        .min()
                        .unwrap_or(Distance::Memory)
                };
                if line.owner != NO_OWNER {
                    line.sharers.insert(line.owner as usize);
                    line.owner = NO_OWNER;
                }
                line.sharers.insert(place);
                (costs.transfer(from), Some(from))
            }
            Access::Store | Access::Rmw => {
                let own = if kind == Access::Rmw {
                    costs.atomic
                } else {
                    costs.hit
                };
                let farthest = if mine {
                    None
                } else if line.owner != NO_OWNER {
                    Some(costs.distance(place, line.owner as usize))
                } else {
                    let others = line.sharers.iter().filter(|&s| s != place);
                    match others.map(|s| costs.distance(place, s)).max() {
                        Some(d) => Some(d),
                        // Shared by this place alone (or by none): an upgrade, or a fetch.
                        None if line.sharers.contains(place) => None,
                        None => Some(Distance::Memory),
                    }
                };
                line.owner = place as u32;
                line.sharers.clear();
                line.version += 1;
                match farthest {
                    None => (own, None),
                    Some(d) => (costs.transfer(d) + own.saturating_sub(costs.hit), Some(d)),
                }
            }
        };
        let done = match miss {
            None => now + cost,
            Some(d) => {
                let cost = jittered(&mut self.jitter, self.spread, cost);
                self.transfers[d as usize] += 1;
                let start = now.max(line.busy_until);
                line.busy_until = start + cost * costs.occupancy / 1024;
                start + cost
            }
        };
        Charged {
            done,
            line: key,
            version: line.version,
            miss: miss.is_some(),
        }
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
        let mut now = 0;
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

    #[test]
    fn a_writer_after_n_readers_invalidates_them_all_and_the_readers_miss_again() {
        let (c, _) = two_socket();
        let mut caches = Caches::without_jitter();
        let addr = 0x2000;
        caches.access(&c, 0, addr, Access::Store, 0);
        let readers = [1, 2, 3, 10, 20];
        for &r in &readers {
            caches.access(&c, r, addr, Access::Load, 0);
        }
        // Every reader hits now.
        for &r in &readers {
            assert!(!caches.access(&c, r, addr, Access::Load, 1 << 40).miss);
        }
        // The write waits for the farthest copy (two packages away is hop1 on this profile's
        // table for socket 0 to 1 and 2).
        let now = 1 << 41;
        let w = caches.access(&c, 0, addr, Access::Store, now);
        assert!(w.miss);
        let farthest = readers.iter().map(|&r| c.distance(0, r)).max().unwrap();
        assert_eq!(w.done - now, c.transfer(farthest));
        // All N copies are gone: each reader misses again.
        for &r in &readers {
            assert!(
                caches.access(&c, r, addr, Access::Load, 1 << 42).miss,
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
        let (mut sum, n, mut least, mut most) = (0, 10_000u64, u64::MAX, 0);
        let mut now = caches.access(&c, 0, 0x4000, Access::Rmw, 0).done + 1_000_000;
        for k in 0..n {
            let who = 1 - (k % 2) as usize;
            let r = caches.access(&c, who, 0x4000, Access::Store, now);
            let cost = r.done - now;
            assert!((lo..hi).contains(&cost), "{cost} outside {lo}..{hi}");
            sum += cost;
            (least, most) = (least.min(cost), most.max(cost));
            // Well after the line's queue has drained.
            now = r.done + 1_000_000;
        }
        let mean = sum / n;
        assert!(mean.abs_diff(lat) * 50 < lat, "mean {mean} against {lat}");
        // And they do spread over most of the range.
        assert!(
            least < lat - lat / 4 && most > lat + lat / 4,
            "{least}..{most}"
        );
        // The same seed gives the same latencies.
        let mut again = Caches::new();
        again.access(&c, 0, 0x4000, Access::Rmw, 0);
        let first = again.access(&c, 1, 0x4000, Access::Store, 0).done;
        let mut third = Caches::new();
        third.access(&c, 0, 0x4000, Access::Rmw, 0);
        assert_eq!(third.access(&c, 1, 0x4000, Access::Store, 0).done, first);
    }

    #[test]
    fn contending_misses_on_one_line_queue_behind_each_other() {
        let (c, _) = two_socket();
        let mut caches = Caches::without_jitter();
        let addr = 0x3000;
        caches.access(&c, 0, addr, Access::Store, 0);
        let now = 1_000_000;
        // Ten CPUs of the same die load the line at the same instant: the k-th is served k
        // transfers after the first.
        let lat = c.transfer(Distance::Die);
        let mut done: Vec<u64> = (1..=9)
            .map(|cpu| caches.access(&c, cpu, addr, Access::Load, now).done - now)
            .collect();
        done.sort();
        for (k, d) in done.iter().enumerate() {
            assert_eq!(*d, lat * (k as u64 + 1), "{k}");
        }
    }
}
