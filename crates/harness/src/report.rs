//! The JSON document of a run (a contract: tests, scripts and users rely on it), and
//! how runs become points: the median of `--repeat` runs, all runs kept, efficiency against the
//! 1-thread point.
//!
//! Three keys of a point are optional: `ideal_ops_per_sec`, `metrics` and
//! `timeline_ops_per_sec` (see [`Point`]). They are present only for workloads that have an ideal
//! throughput or count their own events, and for runs of at least one timeline interval
//! (100 ms), and absent otherwise, so a document without them is the contract's core (and
//! documents written before they existed still parse).

use crate::team::TeamRun;
use pglocks_proc::stats::EventStats;
use serde::{Deserialize, Serialize};

/// The whole document `pglocks run --format json` prints and `report.json` holds.
///
/// # Examples
///
/// A [`sweep`](crate::sweep()) returns one; it is read series by series and point by point, and
/// every output is rendered from it alone, the JSON document included, which reads back as the
/// same report.
///
/// ```
/// use pglocks_harness::{render, render_with, run_team, sweep, Format, PinPolicy, Report};
/// use pglocks_harness::{SeriesSpec, Show, SweepConfig, TeamSpec, Topology};
/// use pglocks_proc::{Backend, ProcTable};
/// use std::convert::Infallible;
/// use std::time::Duration;
///
/// // One series, one point: an empty operation on one thread.
/// let series = SeriesSpec {
///     workload: "noop".into(),
///     preset: "mine".into(),
///     impl_name: "empty".into(),
///     run: Box::new(|spec: &TeamSpec| {
///         let procs = ProcTable::new(spec.threads);
///         run_team(spec, &procs, |_thread| |_: &mut Backend| Ok::<(), Infallible>(()))
///     }),
/// };
/// let cfg = SweepConfig {
///     threads: vec![1],
///     duration: Duration::from_millis(5),
///     warmup: Duration::from_millis(1),
///     pin: PinPolicy::None,
///     ..SweepConfig::quick("noop")
/// };
/// let report: Report = sweep(&cfg, &Topology::detect()?, vec![series])?;
///
/// assert_eq!(report.config.workload, "noop");
/// for s in &report.series {
///     assert_eq!(s.label(), "mine/empty");
///     for p in &s.points {
///         assert_eq!(p.per_thread_ops.len(), p.threads);
///         println!(
///             "{} at {} threads: {:.0} ops/s, {:.1} ns/op per thread, p99 {} ns",
///             s.label(),
///             p.threads,
///             p.ops_per_sec,
///             p.ns_per_op(),
///             p.latency_ns.p99
///         );
///     }
/// }
/// let table = render_with(&report, Format::Table, Show::MAIN)?;
/// assert!(table.contains("mine/empty"));
/// let json = render(&report, Format::Json)?;
/// assert_eq!(serde_json::from_str::<Report>(&json)?, report);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// The pglocks version that produced it.
    pub pglocks_version: String,
    /// Where it ran.
    pub machine: Machine,
    /// What was run.
    pub config: RunConfig,
    /// One series per (preset, impl) pair.
    pub series: Vec<Series>,
    /// Optional: the sweep was stopped (Ctrl-C) before its end; the series hold the points
    /// that have at least one run (the last run may have measured less than `duration_ms`).
    /// Absent, and false, for a whole sweep.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// The machine a report was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Logical CPUs usable by the run.
    pub cpus: usize,
    /// NUMA nodes.
    pub nodes: usize,
    /// CPU model name.
    pub model: String,
    /// Present when the machine was simulated: which profile, and what it cost the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Simulated>,
}

/// A simulated machine: the profile, and the host time the simulation took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Simulated {
    /// The profile's name (`--machine sim:NAME`).
    pub profile: String,
    /// Host time all the runs took, in milliseconds.
    pub host_time_ms: u64,
    /// Shim operations simulated, all runs.
    pub operations: u64,
    /// Simulated operations per host second.
    pub operations_per_host_sec: f64,
}

/// The run's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Workload name.
    pub workload: String,
    /// Measured time per run (the least, when `until` lengthens it).
    pub duration_ms: u64,
    /// Optional: each run went on past `duration_ms` until it had counted `ops` operations, or
    /// for at most `cap_ms` (the simulated machine's default). Absent: every run lasted
    /// `duration_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<RunUntil>,
    /// Runs per point.
    pub repeat: u32,
    /// Pinning policy.
    pub pin: String,
}

/// How a run's measured phase was lengthened: until the team had counted `ops` operations, or
/// for at most `cap_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunUntil {
    /// Operations each run counts.
    pub ops: u64,
    /// The longest a run lasts, in milliseconds.
    pub cap_ms: u64,
}

/// One (preset, impl) pair's curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    /// Workload name.
    pub workload: String,
    /// PostgreSQL release preset.
    pub preset: String,
    /// Implementation.
    #[serde(rename = "impl")]
    pub impl_name: String,
    /// One point per thread count.
    pub points: Vec<Point>,
}

/// One thread count's result.
///
/// The last three fields, `ideal_ops_per_sec`, `metrics` and `timeline_ops_per_sec`, are optional
/// keys: omitted from the JSON when absent (no ideal, no metrics, a
/// run shorter than one timeline interval), and absent keys parse as such. Every other key is
/// required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// Threads (backends).
    pub threads: usize,
    /// Median throughput over the runs.
    pub ops_per_sec: f64,
    /// Every run's throughput, in run order.
    pub runs_ops_per_sec: Vec<f64>,
    /// Sampled operation latency of the median run.
    pub latency_ns: Latency,
    /// `ops_per_sec / (threads × 1-thread ops_per_sec)`; null when the series has no 1-thread point.
    /// Required in the document (null, not absent).
    #[serde(deserialize_with = "Option::deserialize")]
    pub efficiency: Option<f64>,
    /// Wait events of the median run.
    pub waits: Vec<Wait>,
    /// Operations per thread in the median run.
    pub per_thread_ops: Vec<u64>,
    /// Optional extension: the median run's ideal throughput (such as N committers over one
    /// flush's latency), for workloads that have one; the key is absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_ops_per_sec: Option<f64>,
    /// Optional extension: the median run's own event metrics (counters, and a distribution's
    /// `.count`, `.mean`, `.p50`, `.p90`, `.max`), for workloads that count any; the key is absent
    /// when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<Metric>,
    /// Optional extension: the median run's throughput in each full 100 ms interval of its
    /// measured time, in order (like pgbench's `-P 0.1` progress lines); the key is absent when
    /// the run was shorter than one interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline_ops_per_sec: Vec<f64>,
    /// Optional: the time each timeline point covers, in ms, when it is not 100 — a run longer
    /// than `MAX_TIMELINE_POINTS` intervals (two minutes) keeps its timeline in points of 200,
    /// 400, … ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline_interval_ms: Option<u64>,
}

/// One named metric of a point (an optional key of the document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    /// Metric name, such as `wal.flushes` or `wal.commits_per_flush.p90`.
    pub name: String,
    /// Its value.
    pub value: f64,
}

/// Latency percentiles, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
}

/// One wait-event row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    /// Wait event (lock or tranche) name.
    pub lock: String,
    /// What was waited for.
    pub mode: String,
    /// Number of waits.
    pub count: u64,
    /// Total wait time in nanoseconds.
    pub wait_ns: u64,
}

impl Point {
    /// The point for `runs` (all at one thread count, at least one): the median run by
    /// throughput supplies latency, waits, per-thread counts, the ideal throughput and the
    /// metrics. Efficiency is filled in by [`Series::fill_efficiency`].
    pub fn from_runs(runs: &[TeamRun]) -> Point {
        let rates: Vec<f64> = runs.iter().map(TeamRun::ops_per_sec).collect();
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by(|&a, &b| rates[a].total_cmp(&rates[b]));
        let median = &runs[order[order.len() / 2]];
        let h = &median.latency;
        let q = |q: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            }
        };
        Point {
            threads: median.threads,
            ops_per_sec: median_of(&rates),
            runs_ops_per_sec: rates,
            latency_ns: Latency {
                p50: q(0.5),
                p90: q(0.9),
                p99: q(0.99),
                p999: q(0.999),
                max: if h.is_empty() { 0 } else { h.max() },
            },
            efficiency: None,
            // Wait events, then the LWLOCK_STATS counters (rows only when they were counted).
            waits: median
                .stats
                .waits
                .entries()
                .iter()
                .chain(&median.stats.lwlock.rows())
                .map(|w| Wait {
                    lock: w.lock.to_string(),
                    mode: w.mode.to_string(),
                    count: w.count,
                    wait_ns: w.wait_ns,
                })
                .collect(),
            per_thread_ops: median.per_thread_ops.clone(),
            ideal_ops_per_sec: median.ideal_ops_per_sec,
            metrics: metrics(&median.stats.events),
            timeline_ops_per_sec: median.timeline_ops_per_sec.clone(),
            timeline_interval_ms: Some(median.timeline_interval.as_millis() as u64)
                .filter(|&ms| ms != crate::team::TIMELINE_INTERVAL.as_millis() as u64),
        }
    }

    /// Throughput as a fraction of the ideal (`ops_per_sec / ideal_ops_per_sec`); `None` without
    /// a positive ideal.
    pub fn ideal_fraction(&self) -> Option<f64> {
        self.ideal_ops_per_sec
            .filter(|&ideal| ideal > 0.0)
            .map(|ideal| self.ops_per_sec / ideal)
    }

    /// Nanoseconds per operation per thread: what one backend pays for one operation.
    pub fn ns_per_op(&self) -> f64 {
        if self.ops_per_sec > 0.0 {
            self.threads as f64 * 1e9 / self.ops_per_sec
        } else {
            f64::INFINITY
        }
    }
}

/// A run's event counts as metrics: each counter as itself, each distribution as `name.count`,
/// `name.mean`, `name.p50`, `name.p90` and `name.max`, in first-recorded order.
fn metrics(events: &EventStats) -> Vec<Metric> {
    let metric = |name: String, value: f64| Metric { name, value };
    // By name, so every point lists them in the same order whichever thread counted first.
    let mut counters = events.counters();
    counters.sort_by_key(|c| c.0);
    let mut distributions = events.distributions();
    distributions.sort_by_key(|d| d.0);
    let mut out: Vec<Metric> = counters
        .iter()
        .map(|&(name, n)| metric(name.to_string(), n as f64))
        .collect();
    // A cache's `P.hits` and `P.reads` (misses) also give `P.hit_ratio`.
    for &(name, hits) in &counters {
        let Some(prefix) = name.strip_suffix(".hits") else {
            continue;
        };
        let reads = counters
            .iter()
            .find(|c| c.0.strip_suffix(".reads") == Some(prefix))
            .map_or(0, |c| c.1);
        if hits + reads > 0 {
            out.push(metric(
                format!("{prefix}.hit_ratio"),
                hits as f64 / (hits + reads) as f64,
            ));
        }
    }
    for (name, d) in distributions {
        out.extend([
            metric(format!("{name}.count"), d.count() as f64),
            metric(format!("{name}.mean"), d.mean()),
            metric(format!("{name}.p50"), d.quantile(0.5) as f64),
            metric(format!("{name}.p90"), d.quantile(0.9) as f64),
            metric(format!("{name}.max"), d.max() as f64),
        ]);
    }
    out
}

/// Student's t distribution's 97.5th percentile for 1 to 30 degrees of freedom (as any table of
/// the distribution gives it); past 30 the normal's 1.96 is within 4 % of it.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The 95 % confidence interval of the mean of `runs`, as its half-width over the mean (0.04:
/// ±4 %), from Student's t with the runs taken as independent draws of one distribution.
/// `None` for fewer than two runs or a mean of zero.
pub fn ci95(runs: &[f64]) -> Option<f64> {
    let n = runs.len();
    if n < 2 {
        return None;
    }
    let mean = runs.iter().sum::<f64>() / n as f64;
    let var = runs.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T_975.get(n - 2).copied().unwrap_or(1.96);
    (mean > 0.0).then(|| t * (var / n as f64).sqrt() / mean)
}

/// The median (mean of the middle two for an even count).
pub fn median_of(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Series {
    /// Sets every point's efficiency against the series' 1-thread point (left null without one).
    pub fn fill_efficiency(&mut self) {
        let Some(base) = self
            .points
            .iter()
            .find(|p| p.threads == 1)
            .map(|p| p.ops_per_sec)
        else {
            return;
        };
        for p in &mut self.points {
            p.efficiency = (base > 0.0).then(|| p.ops_per_sec / (p.threads as f64 * base));
        }
    }

    /// Label used in tables and charts: `preset/impl`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.preset, self.impl_name)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_confidence_interval_narrows_with_runs_and_needs_two() {
        assert_eq!(ci95(&[5.0]), None);
        assert_eq!(ci95(&[0.0, 0.0]), None);
        assert_eq!(ci95(&[5.0, 5.0, 5.0]), Some(0.0));
        // Mean 10, sample deviation 1, three runs: 4.303 × 1 / √3 = 2.48, ±24.8 %.
        let three = ci95(&[9.0, 10.0, 11.0]).unwrap();
        assert!((three - 0.2484).abs() < 1e-3, "{three}");
        // The same values over nine runs (deviation 0.87): 2.306 × 0.87 / 3 = ±6.7 %.
        let nine = ci95(&[9.0, 10.0, 11.0, 9.0, 10.0, 11.0, 9.0, 10.0, 11.0]).unwrap();
        assert!((nine - 0.0666).abs() < 1e-3, "{nine}");
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median_of(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_of(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median_of(&[]), 0.0);
    }

    /// A point with only a thread count and a throughput (for tests here and in render).
    pub(crate) fn point(threads: usize, ops: f64) -> Point {
        Point {
            threads,
            ops_per_sec: ops,
            runs_ops_per_sec: vec![ops],
            latency_ns: Latency::default(),
            efficiency: None,
            waits: vec![],
            per_thread_ops: vec![],
            ideal_ops_per_sec: None,
            metrics: vec![],
            timeline_ops_per_sec: vec![],
            timeline_interval_ms: None,
        }
    }

    #[test]
    fn efficiency_is_relative_to_one_thread() {
        let mut s = Series {
            workload: "spin".into(),
            preset: "pg17".into(),
            impl_name: "pg".into(),
            points: vec![point(1, 100.0), point(2, 150.0), point(8, 200.0)],
        };
        s.fill_efficiency();
        let e: Vec<_> = s.points.iter().map(|p| p.efficiency.unwrap()).collect();
        assert_eq!(e, vec![1.0, 0.75, 0.25]);
        assert_eq!(s.points[1].ns_per_op(), 2.0 * 1e9 / 150.0);
    }

    #[test]
    fn no_one_thread_point_leaves_efficiency_null() {
        let mut s = Series {
            workload: "spin".into(),
            preset: "pg17".into(),
            impl_name: "pg".into(),
            points: vec![point(2, 150.0)],
        };
        s.fill_efficiency();
        assert_eq!(s.points[0].efficiency, None);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["points"][0]["efficiency"].is_null());
        assert_eq!(json["impl"], "pg");
    }

    #[test]
    fn ideal_and_metrics_round_trip_and_are_absent_when_empty() {
        let plain = point(2, 150.0);
        let json = serde_json::to_value(&plain).unwrap();
        let o = json.as_object().unwrap();
        assert!(!o.contains_key("ideal_ops_per_sec"), "{json}");
        assert!(!o.contains_key("metrics"), "{json}");
        assert!(!o.contains_key("timeline_ops_per_sec"), "{json}");
        assert_eq!(plain.ideal_fraction(), None);
        assert_eq!(serde_json::from_value::<Point>(json).unwrap(), plain);

        let mut p = point(4, 1500.0);
        p.ideal_ops_per_sec = Some(2000.0);
        p.metrics = vec![
            Metric {
                name: "wal.flushes".into(),
                value: 12.0,
            },
            Metric {
                name: "wal.commits_per_flush.mean".into(),
                value: 3.25,
            },
        ];
        p.timeline_ops_per_sec = vec![1400.0, 1600.5];
        assert_eq!(p.ideal_fraction(), Some(0.75));
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["ideal_ops_per_sec"], 2000.0);
        assert_eq!(json["metrics"][1]["name"], "wal.commits_per_flush.mean");
        assert_eq!(json["timeline_ops_per_sec"][1], 1600.5);
        assert_eq!(serde_json::from_value::<Point>(json.clone()).unwrap(), p);
        // A metric is as strict as the rest of the document.
        let mut bad = json;
        bad["metrics"][0]["unit"] = serde_json::json!("flushes");
        assert!(serde_json::from_value::<Point>(bad).is_err());
    }

    #[test]
    fn from_runs_takes_ideal_and_metrics_from_the_median_run() {
        let run = |ops: u64, flushes: u64, ideal: Option<f64>| {
            let mut stats = pglocks_proc::stats::BackendStats::default();
            stats.events.count("wal.flushes", flushes);
            for v in [1, 2, 2, 3, 10] {
                stats.events.sample("wal.commits_per_flush", v * flushes);
            }
            TeamRun {
                threads: 2,
                elapsed: std::time::Duration::from_secs(1),
                per_thread_ops: vec![ops, ops],
                latency: hdrhistogram::Histogram::new(3).unwrap(),
                stats,
                ideal_ops_per_sec: ideal,
                timeline_ops_per_sec: vec![ops as f64],
                timeline_interval: crate::team::TIMELINE_INTERVAL,
                sim: None,
            }
        };
        let runs = [
            run(10, 100, Some(1.0)),
            run(20, 1, Some(50.0)),
            run(30, 300, None),
        ];
        let p = Point::from_runs(&runs);
        assert_eq!(p.ops_per_sec, 40.0);
        assert_eq!(p.ideal_ops_per_sec, Some(50.0));
        assert_eq!(p.ideal_fraction(), Some(0.8));
        assert_eq!(p.timeline_ops_per_sec, [20.0], "the median run's timeline");
        let m: Vec<(&str, f64)> = p.metrics.iter().map(|m| (&*m.name, m.value)).collect();
        assert_eq!(
            m,
            [
                ("wal.flushes", 1.0),
                ("wal.commits_per_flush.count", 5.0),
                ("wal.commits_per_flush.mean", 3.6),
                ("wal.commits_per_flush.p50", 2.0),
                ("wal.commits_per_flush.p90", 10.0),
                ("wal.commits_per_flush.max", 10.0),
            ]
        );
        // A workload without events or ideal gets neither.
        let mut plain = run(10, 0, None);
        plain.stats = Default::default();
        let p = Point::from_runs(&[plain]);
        assert_eq!((p.ideal_ops_per_sec, p.metrics.len()), (None, 0));
    }
}
