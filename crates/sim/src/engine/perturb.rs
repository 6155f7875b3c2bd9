//! Schedule perturbation: preemptions at random moments, and the engine's other free choices
//! drawn from the seed, so that a stress run sees schedules the cost model alone never makes.
//!
//! A simulation is deterministic: with the same machine and inputs its threads interleave the
//! same way every time, and the interleaving is the one the latencies make. Races that need a
//! thread to stop at an unlucky point (a lock holder preempted between two stores, a woken
//! waiter delayed while a third backend overtakes it) then show only if the latencies happen to
//! make them. Burckhardt et al.'s PCT (ASPLOS 2010) finds such bugs of small *depth* (the number
//! of ordering constraints the bug needs) with a known probability by lowering the priority of
//! the running thread at a few random points of a run. This module takes that idea, not its
//! algorithm, to a machine with time: with `model.preempt_every_us` above 0,
//!
//! 1. **Preemptions.** Each thread is preempted once every `preempt_every_us` of virtual time
//!    on average: change points come as a Poisson process over virtual time, with *n* of them
//!    every `preempt_every_us` for *n* unfinished threads on the profile's CPUs, and at each one
//!    of those threads is drawn uniformly. It is at its next sync point (where a time
//!    slice's end would preempt it: the start of a shim operation, or a miss's answer) it is
//!    taken off its CPU for a stall
//!    drawn log-uniformly from the profile's `os.wake_ns` (the shortest time a descheduled
//!    thread is away) to its `os.quantum_us` (another task's whole time slice). Another thread
//!    queued on that CPU runs meanwhile; without one, the CPU idles, as if an interrupt, a
//!    kernel thread or the hypervisor had taken it. A thread drawn while blocked is stalled at
//!    its first operation after it wakes: a woken waiter that is slow to act. A bug that needs
//!    thread *t* stopped inside a window of *w* of virtual time is hit with probability about
//!    *w* / `preempt_every_us` each time the window comes round; one of depth *d* needs *d* − 1
//!    such coincidences, PCT's bound in this model's terms. A thread is away for about a tenth
//!    of a stall's mean over `preempt_every_us` of its time (the mean of the log-uniform stall
//!    on westmere-80's 5 µs to 3 ms is 0.47 ms), so a rate near that mean leaves few running.
//! 2. **Ties.** Events at the same virtual time come out in an order drawn from the seed rather
//!    than the order they were queued in.
//! 3. **Run queues and slices.** A CPU that hands itself on takes a queued thread drawn from
//!    its run queue (Linux's CFS picks by virtual runtime, not by arrival), and each time slice
//!    lasts a draw from ½ to 1½ `os.quantum_us`, so slice ends fall at drawn moments.
//!
//! Every draw comes from one generator seeded by `model.seed`, so a perturbed run repeats
//! exactly with the same machine text. With `preempt_every_us` 0 (every profile's default)
//! nothing here runs and every simulated figure is what it was.

use super::os::State;
use super::Engine;
use crate::picos::Picos;
use corosensei::Yielder;

/// The perturbation's state in a run.
#[derive(Debug)]
pub(super) struct Perturb {
    /// splitmix64's state.
    rng: u64,
    /// The mean time between two preemptions of one thread, picoseconds.
    every: f64,
    /// The next change point (`None` until the first sync point draws it).
    next_at: Option<Picos>,
    /// The shortest and longest stall (`os.wake_ns`, `os.quantum_us`), as natural logarithms
    /// of picoseconds.
    stall_ln: (f64, f64),
    /// CPUs of the profile: threads placed beyond them are housekeeping, never preempted.
    cpus: usize,
    /// Preemptions made.
    pub(super) preemptions: u64,
}

impl Perturb {
    /// The perturbation `every_us` asks for (none for 0), seeded by `seed`, stalling from
    /// `wake` to `quantum`.
    pub(super) fn new(
        every_us: f64,
        seed: u64,
        wake: Picos,
        quantum: Picos,
        cpus: usize,
    ) -> Option<Perturb> {
        if every_us <= 0.0 {
            return None;
        }
        let p = Perturb {
            rng: seed ^ 0x6A09_E667_F3BC_C908,
            every: every_us * 1e6,
            next_at: None,
            stall_ln: (
                (wake.0.max(1) as f64).ln(),
                (quantum.0.max(wake.0).max(1) as f64).ln(),
            ),
            cpus,
            preemptions: 0,
        };
        Some(p)
    }

    /// The next draw of the generator (splitmix64).
    pub(super) fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw from [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A draw from [0, n).
    pub(super) fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }

    /// The gap to the next change point among `n` threads: exponential, with a mean of
    /// `every` over `n`.
    fn gap(&mut self, n: usize) -> Picos {
        let u = 1.0 - self.unit();
        Picos((-u.ln() * self.every / n.max(1) as f64).round().max(1.0) as u64)
    }

    /// A stall's length: log-uniform between the shortest and the longest.
    fn stall(&mut self) -> Picos {
        let (lo, hi) = self.stall_ln;
        Picos((lo + self.unit() * (hi - lo)).exp().round() as u64)
    }

    /// A time slice: ½ to 1½ of `quantum`.
    pub(super) fn slice(&mut self, quantum: Picos) -> Picos {
        Picos(((0.5 + self.unit()) * quantum.0 as f64).round().max(1.0) as u64)
    }

    /// A sequence number for an event queued `seq`-th: its low 48 bits keep the numbers unique,
    /// the high 16 are drawn, so that events at one time come out in a drawn order.
    pub(super) fn tie(&mut self, seq: u64) -> u64 {
        (self.next() & 0xFFFF_0000_0000_0000) | (seq & 0x0000_FFFF_FFFF_FFFF)
    }
}

impl Engine {
    /// At thread `tid`'s sync point: marks the threads drawn at every change point its clock
    /// has passed, and preempts `tid` if it is marked. Returns its yielder if it left its CPU.
    pub(super) fn perturbed(&mut self, tid: usize) -> Option<*const Yielder<(), ()>> {
        let clock = self.threads[tid].clock;
        let p = self.perturb.as_mut()?;
        // The unfinished threads on the profile's CPUs, counted rather than collected: the
        // engine allocates nothing here, so the models' allocations land as they would.
        let cpus = p.cpus;
        let in_team = |t: &super::Thread| t.cpu < cpus && t.state != State::Done;
        loop {
            let team = self.threads.iter().filter(|t| in_team(t)).count();
            let next = match p.next_at {
                Some(at) if clock >= at => at,
                Some(_) => break,
                None => clock,
            };
            if p.next_at.is_some() && team > 0 {
                let k = p.below(team);
                if let Some(victim) = self.threads.iter_mut().filter(|t| in_team(t)).nth(k) {
                    victim.preempt = true;
                }
            }
            p.next_at = Some(next + p.gap(team));
        }
        if !std::mem::take(&mut self.threads[tid].preempt) {
            return None;
        }
        let stall = p.stall();
        p.preemptions += 1;
        Some(self.block(Some(clock + stall)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{on, opteron};
    use super::*;
    use crate::cache::Access;
    use std::time::Duration;

    fn perturb(every_us: f64) -> Perturb {
        Perturb::new(
            every_us,
            7,
            Picos::from_ns_f64(5_000.0),
            Picos::from_ns_f64(3_000_000.0),
            80,
        )
        .unwrap()
    }

    #[test]
    fn nothing_is_perturbed_at_a_zero_rate() {
        assert!(Perturb::new(0.0, 7, Picos(1), Picos(2), 4).is_none());
    }

    #[test]
    fn each_thread_is_preempted_at_the_mean_gap_and_stalls_stay_between_wake_and_quantum() {
        let mut p = perturb(100.0);
        let n = 20_000;
        for threads in [1, 4] {
            let total: u64 = (0..n).map(|_| p.gap(threads).0).sum();
            let mean_us = total as f64 / n as f64 / 1e6 * threads as f64;
            assert!((95.0..105.0).contains(&mean_us), "{threads}: {mean_us}");
        }
        let stalls: Vec<Picos> = (0..n).map(|_| p.stall()).collect();
        let (lo, hi) = (Picos::from_ns_f64(5_000.0), Picos::from_ns_f64(3_000_000.0));
        assert!(stalls.iter().all(|&s| lo <= s && s <= hi));
        // Log-uniform: the geometric middle (about 122 µs) splits the draws in half.
        let below = stalls
            .iter()
            .filter(|s| s.0 < Picos::from_ns_f64(122_474.0).0)
            .count();
        assert!((9_500..10_500).contains(&below), "{below}");
        // Draws of a range cover it and stay inside.
        let picks: Vec<usize> = (0..1000).map(|_| p.below(3)).collect();
        assert!((0..3).all(|k| picks.contains(&k)) && picks.iter().all(|&k| k < 3));
    }

    #[test]
    fn ties_keep_the_low_bits_unique_and_the_same_seed_draws_the_same() {
        let (mut a, mut b) = (perturb(10.0), perturb(10.0));
        let (x, y) = (a.tie(5), a.tie(6));
        assert_eq!((x & 0xFFFF_FFFF_FFFF, y & 0xFFFF_FFFF_FFFF), (5, 6));
        assert_eq!((b.tie(5), b.tie(6)), (x, y));
        let slices: Vec<Picos> = (0..100).map(|_| a.slice(Picos(1000))).collect();
        assert!(slices.iter().all(|s| (500..=1500).contains(&s.0)));
    }

    /// Four threads of 2,000 read-modify-writes of one line on the Opteron, each preempted
    /// every `every_us` µs on average, from `seed`: the run's virtual time, preemptions and the order
    /// in which the threads' operations took effect.
    fn four_threads(every_us: f64, seed: u64) -> (Duration, u64, Vec<usize>) {
        let mut profile = opteron(3000.0);
        profile.model.preempt_every_us = every_us;
        profile.model.seed = seed;
        let order = std::cell::RefCell::new(Vec::new());
        let team = (0..4)
            .map(|i| {
                let order = &order;
                on(i, move || {
                    for _ in 0..2000 {
                        crate::hook::access(0x1000, Access::Rmw);
                        order.borrow_mut().push(i);
                    }
                })
            })
            .collect();
        let out = super::super::run(&profile, team, Duration::from_secs(1)).unwrap();
        (out.virtual_time, out.preemptions, order.into_inner())
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_perturbed_run_preempts_threads_and_repeats_exactly_by_seed() {
        let (calm, none, calm_order) = four_threads(0.0, 7);
        assert_eq!(none, 0);
        let (t, preempted, order) = four_threads(20.0, 7);
        assert!(preempted > 0, "no preemption in {t:?}");
        // Each stall is at least a wake-up's 5 µs, on a run that took the calm one longer.
        assert!(t > calm, "{t:?} against {calm:?}");
        assert_ne!(order, calm_order);
        assert_eq!(four_threads(20.0, 7), (t, preempted, order.clone()));
        let (_, _, other) = four_threads(20.0, 8);
        assert_ne!(other, order);
    }
}
