//! A sweep: every series at every thread count, each point `repeat` times, with a progress bar.
//! The runs go round-robin: each of the `repeat` rounds visits every thread count, and at each
//! one every series in turn.
//!
//! With a time budget ([`SweepConfig::budget`]) the sweep then spends what is left of it where
//! the runs disagree most, as criterion and hyperfine do for their users: while some thread
//! count has a point whose 95 % confidence interval ([`crate::report::ci95`]) is wider than
//! ±[`TARGET_CI`], it runs one more round at that count (every series, side by side), the widest
//! first, up to [`MAX_RUNS`] runs a point, as long as the round fits in the budget.
//!
//! A sweep may mix workloads: each series names its own, and [`SweepConfig::workload`] names
//! the report's (such as `select-only,tpcb-like`); every series runs at the same thread counts.
//!
//! The harness does not know what a series runs: a workload hands it one closure per series
//! that performs one timed run for a [`TeamSpec`]. That keeps the thing measured and the measuring
//! apart: workloads never print, and the harness never knows what a lock is.

use crate::report::{Machine, Point, Report, RunConfig, RunUntil, Series, Simulated};
use crate::team::{RunLength, TeamRun, TeamSpec};
use crate::topology::{PinPolicy, Topology};
use crate::HarnessError;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pglocks_sim::Profile;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// One timed run of one series for a team spec.
pub type RunFn<'a> = Box<dyn Fn(&TeamSpec) -> Result<TeamRun, HarnessError> + 'a>;

/// One (preset, impl) pair to sweep.
pub struct SeriesSpec<'a> {
    /// Workload name.
    pub workload: String,
    /// Preset name.
    pub preset: String,
    /// Implementation name.
    pub impl_name: String,
    /// Performs one run.
    pub run: RunFn<'a>,
}

/// Settings of a sweep.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Workload name for the report's config; for series of several workloads, all their names
    /// (`select-only,tpcb-like`).
    pub workload: String,
    /// Thread counts, in order.
    pub threads: Vec<usize>,
    /// Measured time per run.
    pub duration: Duration,
    /// Warm-up per run.
    pub warmup: Duration,
    /// Runs per point.
    pub repeat: u32,
    /// Pinning policy.
    pub pin: PinPolicy,
    /// Time one operation in this many.
    pub sample_every: u32,
    /// Show a progress bar on stderr (only drawn when stderr is a terminal).
    pub progress: bool,
    /// Run on this simulated machine (then `topology` must be its topology, and the durations
    /// are virtual time).
    pub sim: Option<Arc<Profile>>,
    /// Lengthen each run until it has counted this many operations (see [`RunLength`]);
    /// `None`: every run lasts `warmup` and `duration`.
    pub until: Option<RunLength>,
    /// The wall time the whole sweep may take: after its `repeat` rounds, more runs where the
    /// spread is wide, while they fit (`None`: `repeat` runs a point, no more; ignored on a
    /// simulated machine, whose runs repeat exactly).
    pub budget: Option<Duration>,
}

/// The confidence interval a point's runs are narrowed to when a budget allows: ±5 %, the
/// smallest difference between releases the default run's sentences call one (three times
/// their noise band).
pub const TARGET_CI: f64 = 0.05;

/// The most runs the budget gives one point.
pub const MAX_RUNS: usize = 10;

/// Runs every series at every thread count and assembles the report.
///
/// # Examples
///
/// Two ways of counting compared at 1 and 2 threads. A series is a closure that performs one
/// timed run for the [`TeamSpec`] the sweep hands it, here [`run_team`](crate::run_team) on a
/// fresh [`ProcTable`](pglocks_proc::ProcTable) and a fresh counter each time; the report holds
/// one point per thread count of every series, with its efficiency against the series' own
/// 1-thread point.
///
/// ```
/// use pglocks_harness::{run_team, sweep, PinPolicy, SeriesSpec, SweepConfig, TeamSpec, Topology};
/// use pglocks_proc::{Backend, ProcTable};
/// use std::convert::Infallible;
/// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
/// use std::time::Duration;
///
/// // A series that runs `bump` on one shared counter.
/// fn counting(impl_name: &str, bump: fn(&AtomicU64)) -> SeriesSpec<'static> {
///     SeriesSpec {
///         workload: "counter".into(),
///         preset: "mine".into(),
///         impl_name: impl_name.into(),
///         run: Box::new(move |spec: &TeamSpec| {
///             let procs = ProcTable::new(spec.threads);
///             let counter = &AtomicU64::new(0);
///             run_team(spec, &procs, |_thread| {
///                 move |_: &mut Backend| {
///                     bump(counter);
///                     Ok::<(), Infallible>(())
///                 }
///             })
///         }),
///     }
/// }
///
/// let cfg = SweepConfig {
///     threads: vec![1, 2],
///     duration: Duration::from_millis(10),
///     warmup: Duration::from_millis(2),
///     pin: PinPolicy::None,
///     ..SweepConfig::quick("counter")
/// };
/// let series = vec![
///     counting("fetch-add", |c| {
///         c.fetch_add(1, Relaxed);
///     }),
///     counting("cas-loop", |c| {
///         let _ = c.fetch_update(Relaxed, Relaxed, |v| Some(v + 1));
///     }),
/// ];
/// let report = sweep(&cfg, &Topology::detect()?, series)?;
///
/// assert_eq!(report.series.len(), 2);
/// for s in &report.series {
///     let threads: Vec<usize> = s.points.iter().map(|p| p.threads).collect();
///     assert_eq!(threads, [1, 2]);
///     assert!(s.points.iter().all(|p| p.ops_per_sec > 0.0));
///     assert_eq!(s.points[0].efficiency, Some(1.0));
/// }
/// # Ok::<(), pglocks_harness::HarnessError>(())
/// ```
pub fn sweep(
    cfg: &SweepConfig,
    topology: &Topology,
    series: Vec<SeriesSpec<'_>>,
) -> Result<Report, HarnessError> {
    let pin_order = topology.pin_order(cfg.pin)?;
    let repeat = cfg.repeat.max(1);
    let total = series.len() as u64 * cfg.threads.len() as u64 * u64::from(repeat);
    let bar = progress_bar(cfg.progress, total);
    // Round-robin: every round runs every point once, the series side by side at each thread
    // count, so that a slow drift of the machine (frequency, a VM's vCPU placement, a noisy
    // neighbour) reaches every series alike instead of favouring the one measured first.
    let mut runs: Vec<Vec<Vec<TeamRun>>> = series
        .iter()
        .map(|_| vec![Vec::new(); cfg.threads.len()])
        .collect();
    let started = std::time::Instant::now();
    // One run of series `i` at thread count index `t`: false once the sweep must stop.
    let run_one = |i: usize, t: usize, runs: &mut Vec<Vec<Vec<TeamRun>>>| {
        let s = &series[i];
        let threads = cfg.threads[t];
        let spec = TeamSpec {
            threads,
            duration: cfg.duration,
            warmup: cfg.warmup,
            pin_order: pin_order.clone(),
            sample_every: cfg.sample_every,
            sim: cfg.sim.clone(),
            until: cfg.until,
        };
        bar.set_message(format!(
            "{} {}/{} at {threads} threads",
            s.workload, s.preset, s.impl_name
        ));
        if crate::interrupt::stop_requested() {
            return Ok(false);
        }
        // The structures the run builds (on this thread) take the profile's layout draw.
        if let Some(p) = &cfg.sim {
            pglocks_sim::shmem::set_layout(p.model.layout);
        }
        match (s.run)(&spec) {
            // A run cut short by the stop keeps what it measured; the sweep ends.
            Ok(run) if crate::interrupt::stop_requested() => {
                runs[i][t].push(run);
                Ok(false)
            }
            Ok(run) => {
                runs[i][t].push(run);
                bar.inc(1);
                Ok(true)
            }
            Err(HarnessError::Interrupted) => Ok(false),
            Err(e) => Err(e),
        }
    };
    let mut interrupted = false;
    'rounds: for _ in 0..repeat {
        for t in 0..cfg.threads.len() {
            for i in 0..series.len() {
                if !run_one(i, t, &mut runs)? {
                    interrupted = true;
                    break 'rounds;
                }
            }
        }
    }
    // The budget's extra rounds, where the runs disagree most.
    let budget = cfg.budget.filter(|_| cfg.sim.is_none() && !interrupted);
    if let Some(budget) = budget {
        let round = (cfg.warmup + cfg.duration) * series.len() as u32;
        while let Some(t) = widest(&runs, cfg.threads.len()) {
            if started.elapsed() + round.mul_f64(1.2) > budget {
                break;
            }
            bar.inc_length(series.len() as u64);
            for i in 0..series.len() {
                if !run_one(i, t, &mut runs)? {
                    interrupted = true;
                    break;
                }
            }
            if interrupted {
                break;
            }
        }
    }
    let simulated = cfg.sim.as_ref().map(|p| {
        let (mut host, mut ops) = (Duration::ZERO, 0);
        for c in runs.iter().flatten().flatten().filter_map(|r| r.sim) {
            host += c.host_time;
            ops += c.ops;
        }
        Simulated {
            profile: p.name.clone(),
            host_time_ms: host.as_millis() as u64,
            operations: ops,
            operations_per_host_sec: ops as f64 / host.as_secs_f64().max(1e-9),
        }
    });
    let mut out = Vec::with_capacity(series.len());
    for (s, runs) in series.into_iter().zip(runs) {
        let mut series = Series {
            workload: s.workload,
            preset: s.preset,
            impl_name: s.impl_name,
            // An interrupted sweep keeps the thread counts that have a run.
            points: runs
                .iter()
                .filter(|r| !r.is_empty())
                .map(|r| Point::from_runs(r))
                .collect(),
        };
        series.fill_efficiency();
        out.push(series);
    }
    bar.finish_and_clear();
    Ok(Report {
        pglocks_version: env!("CARGO_PKG_VERSION").to_string(),
        machine: Machine {
            cpus: topology.logical_cpus(),
            nodes: topology.nodes.len(),
            model: topology.model.clone(),
            simulated,
        },
        config: RunConfig {
            workload: cfg.workload.clone(),
            duration_ms: cfg.duration.as_millis() as u64,
            until: cfg.until.map(|u| RunUntil {
                ops: u.ops,
                cap_ms: u.cap.as_millis() as u64,
            }),
            repeat,
            pin: cfg.pin.to_string(),
        },
        series: out,
        interrupted,
    })
}

/// The thread count (its index) whose widest point's confidence interval is widest, if that is
/// wider than [`TARGET_CI`] and its points have fewer than [`MAX_RUNS`] runs.
fn widest(runs: &[Vec<Vec<TeamRun>>], counts: usize) -> Option<usize> {
    (0..counts)
        .filter_map(|t| {
            let most = runs.iter().map(|r| r[t].len()).max().unwrap_or(0);
            let ci = runs
                .iter()
                .filter_map(|r| {
                    let rates: Vec<f64> = r[t].iter().map(TeamRun::ops_per_sec).collect();
                    crate::report::ci95(&rates)
                })
                .fold(0.0_f64, f64::max);
            (most < MAX_RUNS && ci > TARGET_CI).then_some((t, ci))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(t, _)| t)
}

fn progress_bar(wanted: bool, total: u64) -> ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:30} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left  {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

impl SweepConfig {
    /// A short sweep for examples and smoke runs: 1, 2 and 4 threads, 200 ms each after 50 ms
    /// of warm-up, one run per point, compact pinning, no progress bar.
    pub fn quick(workload: &str) -> Self {
        Self {
            workload: workload.to_string(),
            threads: vec![1, 2, 4],
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(50),
            repeat: 1,
            pin: PinPolicy::Compact,
            sample_every: 64,
            progress: false,
            sim: None,
            until: None,
            budget: None,
        }
    }
}

/// Runs [`SweepConfig::quick`] over `series` on this machine and returns the report's main table
/// (throughput, efficiency and latency per point): what an example needs to compare a lock of
/// its own with PostgreSQL's.
pub fn quick_table(workload: &str, series: Vec<SeriesSpec<'_>>) -> Result<String, HarnessError> {
    // Read the topology before any thread is pinned: it is restricted to the cpus this thread
    // may use.
    let topology = Topology::detect()?;
    let report = sweep(&SweepConfig::quick(workload), &topology, series)?;
    crate::render_with(&report, crate::Format::Table, crate::Show::MAIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A run of a millisecond in which each of `threads` threads did `ops` operations.
    fn millisecond(threads: usize, ops: u64) -> TeamRun {
        TeamRun {
            threads,
            elapsed: Duration::from_millis(1),
            per_thread_ops: vec![ops; threads],
            latency: hdrhistogram::Histogram::new(3).unwrap(),
            stats: Default::default(),
            ideal_ops_per_sec: None,
            timeline_ops_per_sec: vec![],
            timeline_interval: crate::team::TIMELINE_INTERVAL,
            sim: None,
        }
    }

    /// A series whose runs count `ops(threads, run)` operations in a millisecond.
    fn counting<'a>(name: &str, ops: &'a dyn Fn(usize, usize) -> u64) -> SeriesSpec<'a> {
        let done = RefCell::new(Vec::<usize>::new());
        SeriesSpec {
            workload: "w".into(),
            preset: name.into(),
            impl_name: "pg".into(),
            run: Box::new(move |spec: &TeamSpec| {
                let k = done.borrow().iter().filter(|&&t| t == spec.threads).count();
                done.borrow_mut().push(spec.threads);
                Ok(millisecond(spec.threads, ops(spec.threads, k)))
            }),
        }
    }

    #[test]
    fn a_budget_buys_runs_where_they_disagree_and_nowhere_else() {
        // At 1 thread every run agrees; at 2 they alternate between 100 and 300.
        let ops = |threads: usize, k: usize| if threads == 1 || k % 2 == 0 { 100 } else { 300 };
        let cfg = |budget| SweepConfig {
            threads: vec![1, 2],
            repeat: 3,
            duration: Duration::from_millis(1),
            warmup: Duration::ZERO,
            budget,
            ..SweepConfig::quick("w")
        };
        let topology = Topology::detect().unwrap();
        let runs = |budget| {
            let series = vec![counting("a", &ops), counting("b", &ops)];
            let report = sweep(&cfg(budget), &topology, series).unwrap();
            report.series[0]
                .points
                .iter()
                .map(|p| p.runs_ops_per_sec.len())
                .collect::<Vec<_>>()
        };
        assert_eq!(runs(None), [3, 3]);
        assert_eq!(runs(Some(Duration::from_secs(60))), [3, MAX_RUNS]);
        // A budget the first rounds already spent buys nothing.
        assert_eq!(runs(Some(Duration::ZERO)), [3, 3]);
    }

    #[test]
    fn the_runs_go_round_robin_over_series_and_thread_counts() {
        let log = RefCell::new(Vec::new());
        let series: Vec<SeriesSpec<'_>> = ["a", "b"]
            .into_iter()
            .map(|name| SeriesSpec {
                // Two workloads in one sweep: each series keeps its own.
                workload: format!("w{name}"),
                preset: name.into(),
                impl_name: "pg".into(),
                run: Box::new({
                    let log = &log;
                    move |spec: &TeamSpec| {
                        log.borrow_mut().push(format!("{name}{}", spec.threads));
                        Ok(millisecond(spec.threads, 1))
                    }
                }),
            })
            .collect();
        let cfg = SweepConfig {
            threads: vec![1, 2],
            repeat: 2,
            progress: false,
            ..SweepConfig::quick("w")
        };
        let report = sweep(&cfg, &Topology::detect().unwrap(), series).unwrap();
        assert_eq!(
            *log.borrow(),
            ["a1", "b1", "a2", "b2", "a1", "b1", "a2", "b2"],
            "each round visits every point once, series side by side"
        );
        let workloads: Vec<&str> = report.series.iter().map(|s| &*s.workload).collect();
        assert_eq!(workloads, ["wa", "wb"]);
        assert!(widest(&[], 2).is_none());
        // Every point still gets its own runs.
        for s in &report.series {
            let threads: Vec<_> = s.points.iter().map(|p| p.threads).collect();
            assert_eq!(threads, [1, 2]);
            assert!(s.points.iter().all(|p| p.runs_ops_per_sec.len() == 2));
        }
    }
}
