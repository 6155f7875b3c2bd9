//! `pglocks stress --machine sim:PROFILE`: the same parts and checks on a simulated machine,
//! where every backend runs at the same virtual instant as the others and a seed repeats the
//! exact interleaving.
//!
//! # The algorithm
//!
//! On a real machine of two cores at most two backends run at once and the kernel's time slices
//! decide the rest; the races of a many-core machine (a wake-up overtaken by a third backend, a
//! group-commit leader handing over while dozens queue) need many running together. Here each
//! thread is a virtual thread on its own CPU of the profile (thread `k` in the order threads are
//! dealt out to the parts goes on CPU `k`, so each part's threads spread over the sockets; more
//! threads than CPUs share them, in time slices), and every access the parts and the models make
//! through the sync shim takes effect in virtual-time order. The parts' own checks use the
//! shim's atomics too, so a check can be interleaved with the lock it checks.
//!
//! A run is a series of *episodes*, each a simulation of `episode` of virtual time from a fresh
//! start: the parts are built again, the shared-memory map laid out again from its start
//! (`pglocks_sim::shmem::restart`), and the episode's seed chooses everything that varies:
//! - the parts' random choices (which lock, which mode, commit or abort);
//! - the transfer jitter (`model.seed`) and the map's layout (`model.layout`);
//! - the schedule's perturbation (`model.preempt_every_us`, the engine's perturb module):
//!   threads preempted at random shim operations, after PCT's idea (Burckhardt et al.,
//!   ASPLOS 2010), ties between simultaneous events, run-queue picks and slice ends.
//!
//! Episode 0's seed is the run's; episode `k`'s is drawn from the run's seed and `k`. Episodes
//! follow one another until the host time of `duration` has passed, so a run of a minute makes
//! as many as the host can simulate. A failure names its episode's seed and the virtual time at
//! which it was seen: a run with that seed starts with the same episode, and repeats it exactly.
//!
//! The watchdog is a housekeeping virtual thread. Every 100 µs of virtual time it looks at
//! each thread's count of steps; at the episode's end (or at the first violation) it stops the
//! threads, and a thread that has not come back `hang_after` of virtual time after its last
//! step is a [`Hang`], reported with what its backend waits for. The episode then ends: the
//! simulator finds every other thread finished and the hung ones blocked or spinning.
//!
//! Shortcut: a thread can only be interleaved at a shim operation. The parts' bookkeeping
//! outside the shim (their tallies) and the models' backend-local state are not shared, so
//! nothing is lost; a model that kept shared state outside the shim would escape it, as it would
//! escape loom.

use super::{
    build_parts, end_checks, lock, prepare_threads, run_thread, Hang, PartEntry, PartReport,
    Progress, StressConfig, StressError, StressReport, Tally, Violation,
};
use pglocks_sim::{Placement, Profile, SimError, SimThread};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A stress run's simulated machine.
#[derive(Debug, Clone)]
pub struct Simulated {
    /// The machine (a profile and any changes to it, as `--machine sim:…` names it).
    pub profile: Arc<Profile>,
    /// Virtual time of each episode.
    pub episode: Duration,
    /// The mean virtual time between two preemptions of a thread (zero: none).
    pub preempt_every: Duration,
}

/// What a simulated stress run did beyond the parts' counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimulatedReport {
    /// Episodes run.
    pub episodes: u64,
    /// Virtual time, all episodes together.
    pub virtual_time: Duration,
    /// Shim operations simulated.
    pub shim_ops: u64,
    /// Threads preempted by the schedule's perturbation.
    pub preemptions: u64,
    /// The seed of the episode that failed, if one did: `--seed` with it repeats that episode.
    pub failed_seed: Option<u64>,
    /// The virtual time, in that episode, of its first violation or hang.
    pub failed_at: Option<Duration>,
}

/// How often the watchdog looks, in virtual time.
const WATCH_EVERY: Duration = Duration::from_micros(100);

/// The seed of episode `k` of a run seeded `seed`: the run's own for the first, then
/// splitmix64's finaliser over the two.
pub fn episode_seed(seed: u64, k: u64) -> u64 {
    if k == 0 {
        return seed;
    }
    let mut z = seed.wrapping_add(k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs episodes until `cfg.duration` of host time has passed, the first failure, or an
/// interrupt.
pub(super) fn run(
    cfg: &StressConfig,
    sim: &Simulated,
    entries: &[&'static PartEntry],
    progress: &mut dyn FnMut(&Progress),
) -> Result<StressReport, StressError> {
    run_episodes(cfg, progress, |seed| {
        let ep = episode(cfg, sim, entries, seed)?;
        Ok(report_of(ep, seed, Duration::ZERO))
    })
}

/// The episodes of the simulated run `cfg`, one after the other, each run by `one` from its
/// seed ([`episode_seed`]) and reporting as [`stress_episode`] does, until `cfg.duration` of
/// host time has passed, one fails or the run is interrupted; `progress` is told after each.
/// How an episode is run is the caller's: [`stress`](super::stress) runs it in this process,
/// `pglocks stress` in a process of its own.
pub fn run_episodes<E>(
    cfg: &StressConfig,
    progress: &mut dyn FnMut(&Progress),
    mut one: impl FnMut(u64) -> Result<StressReport, E>,
) -> Result<StressReport, E> {
    let started = Instant::now();
    let mut report = StressReport {
        seed: cfg.seed,
        simulated: Some(SimulatedReport::default()),
        ..StressReport::default()
    };
    for k in 0.. {
        let seed = episode_seed(cfg.seed, k);
        let mut ep = one(seed)?;
        ep.seed = seed;
        let more = report.add_episode(ep);
        progress(&Progress {
            elapsed: started.elapsed(),
            duration: cfg.duration,
            steps: report.parts.iter().map(|p| p.ops).sum(),
        });
        if !more
            || started.elapsed() >= cfg.duration
            || pglocks_harness::interrupt::stop_requested()
        {
            break;
        }
    }
    report.elapsed = started.elapsed();
    report.interrupted |= pglocks_harness::interrupt::stop_requested();
    Ok(report)
}

impl StressReport {
    /// Adds `episode`, the report of one episode of this simulated run ([`stress_episode`]),
    /// to the run's: its counts, its virtual time, and, if it failed, its failure, its seed
    /// and when. Returns whether the run goes on (the episode passed and was not interrupted).
    pub fn add_episode(&mut self, episode: StressReport) -> bool {
        if self.parts.is_empty() {
            self.parts = episode.parts.clone();
        } else {
            for (sum, row) in self.parts.iter_mut().zip(&episode.parts) {
                sum.ops += row.ops;
                sum.checks += row.checks;
                sum.events += row.events;
            }
        }
        let ep = episode.simulated.clone().unwrap_or_default();
        let sim = self.simulated.get_or_insert_with(SimulatedReport::default);
        sim.episodes += 1;
        sim.virtual_time += ep.virtual_time;
        sim.shim_ops += ep.shim_ops;
        sim.preemptions += ep.preemptions;
        self.interrupted |= episode.interrupted;
        if episode.passed() {
            return !episode.interrupted;
        }
        sim.failed_seed = Some(episode.seed);
        sim.failed_at = ep.failed_at;
        self.violation = episode.violation;
        self.hangs = episode.hangs;
        false
    }
}

/// One episode of the simulated run `cfg` asks for, from `seed`: a report of its own, with
/// `simulated.episodes` 1 and, if it failed, `failed_seed` `seed`.
///
/// An episode's figures depend, beyond its seed, on where the host's allocator puts what the
/// models allocate (two values on one host line share a simulated one, and what is not placed in
/// the shared-memory map is charged at its host address), so an episode repeats exactly in a
/// process whose allocations before it were the same. `pglocks stress` therefore runs each
/// episode in a process of its own, started with the same arguments but the seed, and a seed
/// it prints repeats its episode; [`stress`](super::stress) runs them one after the other in
/// the calling process.
pub fn stress_episode(cfg: &StressConfig, seed: u64) -> Result<StressReport, StressError> {
    let entries = cfg.validate()?;
    let sim = cfg
        .simulated
        .as_ref()
        .ok_or(super::UsageError::NotSimulated)?;
    let started = Instant::now();
    let ep = episode(cfg, sim, &entries, seed)?;
    Ok(report_of(ep, seed, started.elapsed()))
}

/// The report of episode `ep`, run from `seed` in `elapsed` of host time.
fn report_of(ep: Episode, seed: u64, elapsed: Duration) -> StressReport {
    let failed = ep.violation.is_some() || !ep.hangs.is_empty();
    let failed_at = ep
        .violation
        .as_ref()
        .and_then(|v| v.at)
        .or(ep.hung_at)
        .unwrap_or(ep.virtual_time);
    StressReport {
        parts: ep.parts,
        violation: ep.violation,
        hangs: ep.hangs,
        seed,
        elapsed,
        interrupted: pglocks_harness::interrupt::stop_requested(),
        simulated: Some(SimulatedReport {
            episodes: 1,
            virtual_time: ep.virtual_time,
            shim_ops: ep.shim_ops,
            preemptions: ep.preemptions,
            failed_seed: failed.then_some(seed),
            failed_at: failed.then_some(failed_at),
        }),
    }
}

/// What one episode did.
#[derive(Debug, PartialEq)]
pub(super) struct Episode {
    pub(super) parts: Vec<PartReport>,
    pub(super) violation: Option<Violation>,
    pub(super) hangs: Vec<Hang>,
    /// The virtual time at which the watchdog found the first hang.
    hung_at: Option<Duration>,
    pub(super) virtual_time: Duration,
    shim_ops: u64,
    pub(super) preemptions: u64,
}

/// A thread as the watchdog sees it: its step count, when that last changed, and whether it
/// is back.
struct Watched {
    steps: AtomicU64,
    back: AtomicBool,
}

/// One episode of `sim.episode` of virtual time from `seed` (see the module doc).
pub(super) fn episode(
    cfg: &StressConfig,
    sim: &Simulated,
    entries: &[&'static PartEntry],
    seed: u64,
) -> Result<Episode, StressError> {
    let mut profile = (*sim.profile).clone();
    profile.model.seed = seed;
    profile.model.layout = seed;
    profile.model.preempt_every_us = sim.preempt_every.as_secs_f64() * 1e6;
    // The parts of the episode before have been dropped: this one's map starts as a fresh
    // process's would, so that its seed alone repeats it.
    pglocks_sim::shmem::restart();
    pglocks_sim::shmem::set_layout(profile.model.layout);
    let stop = Arc::new(AtomicBool::new(false));
    let built = build_parts(cfg, entries, &stop).and_then(|parts| {
        let threads = prepare_threads(&parts, seed)?;
        Ok((parts, threads))
    });
    pglocks_sim::shmem::set_layout(0);
    let (parts, prepared) = built?;
    let first: Mutex<Option<Violation>> = Mutex::new(None);
    let watched: Vec<Watched> = prepared
        .iter()
        .map(|_| Watched {
            steps: AtomicU64::new(0),
            back: AtomicBool::new(false),
        })
        .collect();
    let who: Vec<(usize, usize, usize)> = prepared
        .iter()
        .map(|t| (t.part, t.i, t.backend.procno()))
        .collect();
    let mut tallies: Vec<Option<Tally>> = prepared.iter().map(|_| None).collect();
    let mut hangs: Vec<Hang> = Vec::new();
    let mut hung_at = None;
    let cpus = profile.cpu_count();
    let mut threads = Vec::with_capacity(prepared.len() + 1);
    for ((t, slot), w) in prepared.into_iter().zip(tallies.iter_mut()).zip(&watched) {
        let (name, stop, first) = (parts[t.part].name, &*stop, &first);
        threads.push(SimThread {
            placement: Placement::Cpu(t.dealt % cpus),
            body: Box::new(move || {
                *slot = Some(run_thread(name, t.backend, t.step, &w.steps, stop, first));
                w.back.store(true, SeqCst);
            }),
        });
    }
    let (parts_ref, who_ref, watched_ref, stop_ref, first_ref) =
        (&parts, &who, &watched, &*stop, &first);
    let (hangs_out, hung_out) = (&mut hangs, &mut hung_at);
    let (episode_len, hang_after) = (sim.episode, cfg.hang_after);
    threads.push(SimThread {
        placement: Placement::Housekeeping,
        body: Box::new(move || {
            let mut last: Vec<(u64, Duration)> =
                watched_ref.iter().map(|_| (0, Duration::ZERO)).collect();
            let mut stopped = false;
            loop {
                pglocks_sync::time::sleep(WATCH_EVERY);
                let now = pglocks_sim::hook::clock();
                if !stopped && (now >= episode_len || lock(first_ref).is_some()) {
                    stop_ref.store(true, SeqCst);
                    stopped = true;
                }
                let mut all_back = true;
                for (k, w) in watched_ref.iter().enumerate() {
                    if w.back.load(SeqCst) {
                        continue;
                    }
                    all_back = false;
                    let s = w.steps.load(Relaxed);
                    if s != last[k].0 {
                        last[k] = (s, now);
                    }
                }
                if all_back {
                    return;
                }
                let stuck: Vec<usize> = (0..watched_ref.len())
                    .filter(|&k| !watched_ref[k].back.load(SeqCst) && now - last[k].1 >= hang_after)
                    .collect();
                if !stuck.is_empty() {
                    stop_ref.store(true, SeqCst);
                    for k in stuck {
                        let (p, i, procno) = who_ref[k];
                        let run = &parts_ref[p];
                        hangs_out.push(Hang {
                            part: run.name,
                            thread: i,
                            procno,
                            idle: now - last[k].1,
                            waiting_for: run.part.waiting_for(procno),
                        });
                    }
                    *hung_out = Some(now);
                    return;
                }
            }
        }),
    });
    // Past the episode and a hang's wait, every thread has come back or been reported.
    let limit = sim.episode + cfg.hang_after + WATCH_EVERY * 4;
    let outcome = pglocks_sim::run(&profile, threads, limit);
    if std::env::var_os("DBG").is_some() {
        eprintln!("{outcome:?}");
    }
    let (virtual_time, shim_ops, preemptions) = match &outcome {
        Ok(o) => (o.virtual_time, o.ops, o.preemptions),
        Err(_) => (limit, 0, 0),
    };
    match outcome {
        Ok(_) => {}
        // The hung threads never finish: the run ends blocked, or spinning into its limit.
        Err(SimError::Deadlock { .. } | SimError::TimeLimit { .. }) if !hangs.is_empty() => {}
        Err(e) => {
            lock(&first).get_or_insert(Violation {
                part: "simulation",
                message: e.to_string(),
                at: None,
            });
        }
    }
    let tallies: Vec<(usize, Option<Tally>)> = who.iter().map(|w| w.0).zip(tallies).collect();
    let rows = end_checks(&parts, &tallies, hangs.is_empty(), &first);
    let violation = first.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Episode {
        parts: rows,
        violation,
        hangs,
        hung_at,
        virtual_time,
        shim_ops,
        preemptions,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::stress::tests::config;

    /// A run of `threads` threads on the simulated Westmere in episodes of `episode_us` µs,
    /// each thread preempted every 200 µs on average.
    pub(crate) fn sim_config(threads: usize, episode_us: u64) -> StressConfig {
        let mut cfg = config("pg18", threads, 1);
        cfg.simulated = Some(Simulated {
            profile: Arc::new(Profile::find("westmere-80").unwrap()),
            episode: Duration::from_micros(episode_us),
            preempt_every: Duration::from_micros(200),
        });
        cfg
    }

    #[test]
    fn episode_seeds_start_from_the_runs_and_differ() {
        assert_eq!(episode_seed(42, 0), 42);
        let seeds: Vec<u64> = (0..100).map(|k| episode_seed(42, k)).collect();
        for (k, s) in seeds.iter().enumerate() {
            assert!(!seeds[..k].contains(s), "episode {k}");
        }
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn an_episode_passes_on_the_models_and_another_seed_is_another_schedule() {
        let cfg = sim_config(2 * crate::stress::PARTS.len(), 200);
        let first = stress_episode(&cfg, 11).unwrap();
        assert!(first.passed(), "{first:?}");
        let sim = first.simulated.clone().unwrap();
        assert!(sim.preemptions > 0 && sim.shim_ops > 0, "{sim:?}");
        assert_eq!((sim.episodes, sim.failed_seed), (1, None));
        assert!(first.parts.iter().all(|p| p.checks > 0), "{first:?}");
        let other = stress_episode(&cfg, 12).unwrap();
        assert_ne!(other.simulated.unwrap().shim_ops, sim.shim_ops);
        let mut real = cfg.clone();
        real.simulated = None;
        assert!(matches!(
            stress_episode(&real, 1),
            Err(StressError::Usage(super::super::UsageError::NotSimulated))
        ));
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_simulated_run_reports_its_episodes_and_passes_on_the_models() {
        let mut cfg = sim_config(16, 200);
        cfg.duration = Duration::from_millis(300);
        cfg.parts = vec!["spin".into(), "lwlock".into(), "xact".into()];
        let report = crate::stress::stress(&cfg).unwrap();
        assert!(report.passed(), "{report:?}");
        let sim = report.simulated.unwrap();
        assert!(sim.episodes >= 1 && sim.virtual_time >= Duration::from_micros(200));
        assert_eq!(sim.failed_seed, None);
        assert!(report.parts.iter().all(|p| p.ops > 0), "{:?}", report.parts);
    }
}
