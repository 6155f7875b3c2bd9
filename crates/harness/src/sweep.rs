//! A sweep: every series at every thread count, each point `repeat` times, with a progress bar.
//! The runs go round-robin: each of the `repeat` rounds visits every thread count, and at each
//! one every series in turn.
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
}

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
    let mut interrupted = false;
    'rounds: for _ in 0..repeat {
        for (t, &threads) in cfg.threads.iter().enumerate() {
            for (i, s) in series.iter().enumerate() {
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
                    interrupted = true;
                    break 'rounds;
                }
                match (s.run)(&spec) {
                    // A run cut short by the stop keeps what it measured; the sweep ends.
                    Ok(run) if crate::interrupt::stop_requested() => {
                        runs[i][t].push(run);
                        interrupted = true;
                        break 'rounds;
                    }
                    Ok(run) => runs[i][t].push(run),
                    Err(HarnessError::Interrupted) => {
                        interrupted = true;
                        break 'rounds;
                    }
                    Err(e) => return Err(e),
                }
                bar.inc(1);
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
                        Ok(TeamRun {
                            threads: spec.threads,
                            elapsed: Duration::from_millis(1),
                            per_thread_ops: vec![1; spec.threads],
                            latency: hdrhistogram::Histogram::new(3).unwrap(),
                            stats: Default::default(),
                            ideal_ops_per_sec: None,
                            timeline_ops_per_sec: vec![],
                            timeline_interval: crate::team::TIMELINE_INTERVAL,
                            sim: None,
                        })
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
        // Every point still gets its own runs.
        for s in &report.series {
            let threads: Vec<_> = s.points.iter().map(|p| p.threads).collect();
            assert_eq!(threads, [1, 2]);
            assert!(s.points.iter().all(|p| p.runs_ops_per_sec.len() == 2));
        }
    }
}
