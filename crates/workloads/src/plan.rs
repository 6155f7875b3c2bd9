//! Run planning: from what a user asked for to what the harness runs.
//!
//! A [`RunRequest`] says what to measure in the terms of the command line, already parsed: a
//! workload, release presets (each optionally with knobs of its own, `pg92+fast_path=off`),
//! implementations, knob settings, thread counts, the machine. [`RunRequest::plan`] checks it
//! against the registry ([`WORKLOADS`], [`PRESETS`](crate::PRESETS), the knobs), fills in what
//! the machine implies (a simulated machine runs each point once, for at least 20 ms of
//! virtual time and until it has counted enough operations, [`SIM_LENGTH`]; this one 2 s three
//! times), and yields a [`Plan`]: the harness's sweep settings, the topology the threads are
//! placed on, and one series per preset × implementation, in the order asked. Everything a
//! request can get wrong is a [`PlanError`] that names the valid choices.
//!
//! Every entry point builds requests, so there is one place that knows what a preset item, a
//! knob or a machine means: `pglocks run` turns its strings into a request, the default run and
//! `pglocks reproduce` build theirs directly, and a program of one's own does the same.
//!
//! # Examples
//! Two releases side by side on the spinlock workload, run for a few milliseconds:
//! ```
//! use pglocks_workloads::plan::RunRequest;
//! use std::time::Duration;
//!
//! let mut request = RunRequest::new("spin");
//! request.presets = vec!["pg92".into(), "pg92+tas_spin=off".into()];
//! request.threads = vec![1];
//! request.duration = Some(Duration::from_millis(5));
//! request.warmup = Some(Duration::ZERO);
//! request.repeat = Some(1);
//! let plan = request.plan()?;
//! assert_eq!(plan.series.len(), 2);
//! let report = plan.run()?;
//! assert_eq!(report.series[1].preset, "pg92+tas_spin=off");
//! assert!(report.series.iter().all(|s| s.points[0].ops_per_sec > 0.0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::preset::ExecutorWork;
use crate::{workload, Preset, Workload, WorkloadError, DEFAULT_PRESET, WORKLOADS};
use pglocks_harness::topology::TopologyError;
use pglocks_harness::{
    HarnessError, PinPolicy, Report, RunLength, SeriesSpec, SweepConfig, Topology,
};
use pglocks_sim::{Profile, ProfileError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The most runs a point may be repeated.
pub const MAX_REPEAT: u32 = 1000;

/// How long a simulated point runs, in virtual time: at least its times, then on until its
/// counts (see [`RunLength`]).
///
/// The counts make a point's figure rest on enough events: a point's throughput is a count
/// of operations (transactions, lock hand-overs, commits) over a time, and a count of `n`
/// roughly independent events scatters by about 1/√n, so 4,000 operations put the counting
/// error near 1.6 %, under the spread between seeds. The warm-up's count is there for the
/// data: a simulated run starts with every line in memory, and until the transactions have
/// touched their working set (the index's pages, the rows' heap pages) each first touch pays
/// a memory access a machine that has been running for minutes would not. The caps bound a
/// slow point's cost (a transaction that waits for a flush): such a point says in its report
/// how many operations it counted.
pub const SIM_LENGTH: SimLength = SimLength {
    duration: Duration::from_millis(20),
    warmup: Duration::from_millis(5),
    ops: 4000,
    warmup_ops: 1000,
    cap: Duration::from_secs(1),
    warmup_cap: Duration::from_millis(250),
};

/// A simulated point's times and counts: [`SIM_LENGTH`].
#[derive(Debug, Clone, Copy)]
pub struct SimLength {
    /// The least measured time.
    pub duration: Duration,
    /// The least warm-up.
    pub warmup: Duration,
    /// Operations the measured phase counts.
    pub ops: u64,
    /// Operations the warm-up completes.
    pub warmup_ops: u64,
    /// The longest measured phase.
    pub cap: Duration,
    /// The longest warm-up.
    pub warmup_cap: Duration,
}

impl SimLength {
    /// The harness's rule for these counts, the measured count `ops` if given (the warm-up's
    /// scaled with it).
    fn until(&self, ops: Option<u64>) -> RunLength {
        let ops = ops.unwrap_or(self.ops);
        RunLength {
            warmup_ops: ops * self.warmup_ops / self.ops,
            warmup_cap: self.warmup_cap,
            ops,
            cap: self.cap,
        }
    }
}

/// The machine a run measures.
#[derive(Debug, Clone, Default)]
pub enum Machine {
    /// This machine, in real time.
    #[default]
    Real,
    /// A simulated machine, in virtual time (the simulator's build only: see
    /// [`pglocks_sim::BUILT_IN`]).
    Simulated(Arc<Profile>),
}

impl Machine {
    /// Parses `real` or `sim:PROFILE` (a profile [`Profile::find`] knows). A simulated machine
    /// in a build without the simulator is [`PlanError::NoSimulator`].
    pub fn parse(s: &str) -> Result<Machine, PlanError> {
        match s.strip_prefix("sim:") {
            _ if s == "real" => Ok(Machine::Real),
            Some(name) => {
                let profile = Profile::find(name)?;
                if !pglocks_sim::BUILT_IN {
                    return Err(PlanError::NoSimulator);
                }
                Ok(Machine::Simulated(Arc::new(profile)))
            }
            None => Err(PlanError::BadMachine {
                given: s.to_string(),
                profiles: Profile::names().join(", "),
            }),
        }
    }

    /// The simulated machine's profile, if this is one.
    pub fn profile(&self) -> Option<&Arc<Profile>> {
        match self {
            Machine::Real => None,
            Machine::Simulated(p) => Some(p),
        }
    }

    /// `real` or `sim:NAME`, as `--machine` takes it.
    pub fn name(&self) -> String {
        match self {
            Machine::Real => "real".into(),
            Machine::Simulated(p) => format!("sim:{}", p.name),
        }
    }
}

/// What to measure, parsed but not yet checked: the fields of `pglocks run`. Unset optional
/// fields take the machine's defaults (see [`RunRequest::plan`]).
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The workload (a name in [`WORKLOADS`]).
    pub workload: String,
    /// Preset items, one series each per implementation: a preset's name, optionally followed
    /// by `+knob=value` items that only this series gets (`pg92+fast_path=off`).
    pub presets: Vec<String>,
    /// Implementations (`pg` is PostgreSQL's own).
    pub impls: Vec<String>,
    /// `knob=value` settings applied to every preset, before a preset item's own.
    pub sets: Vec<String>,
    /// The simulated WAL device's flush time (`2ms`, `1ms..3ms`): the `flush_latency` knob,
    /// for the workloads that flush WAL only.
    pub flush_latency: Option<String>,
    /// Thread counts, in order.
    pub threads: Vec<usize>,
    /// Measured time per run [default: 2 s; on a simulated machine at least 20 ms of virtual
    /// time, then on until its count, [`SIM_LENGTH`]].
    pub duration: Option<Duration>,
    /// Unmeasured time before each run [default: 500 ms; at least 5 ms simulated, likewise].
    pub warmup: Option<Duration>,
    /// Runs per point [default: 3; 1 simulated, whose runs repeat exactly].
    pub repeat: Option<u32>,
    /// On a simulated machine, the operations each run counts: its warm-up and its measured
    /// phase go on past their times until the team has completed this many, up to their caps
    /// ([`SIM_LENGTH`]); 0 runs exactly the times [default: [`SIM_LENGTH`]'s]. Not for this
    /// machine, whose runs last their times.
    pub until_ops: Option<u64>,
    /// The machine.
    pub machine: Machine,
    /// Where threads are placed.
    pub pin: PinPolicy,
    /// Read this machine's topology from this sysfs tree instead of /sys.
    pub sysfs_root: Option<PathBuf>,
    /// Time one operation in this many.
    pub sample_every: u32,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// The wall time the sweep may take: after `repeat` runs a point, more where the runs
    /// disagree, while they fit ([`SweepConfig::budget`]); `None`: `repeat` runs, no more.
    pub budget: Option<Duration>,
}

impl RunRequest {
    /// A request for `workload` with the defaults of `pglocks run`: the default preset,
    /// PostgreSQL's implementation, 1, 2 and 4 threads on this machine, compact placement.
    pub fn new(workload: &str) -> RunRequest {
        RunRequest {
            workload: workload.to_string(),
            presets: vec![DEFAULT_PRESET.to_string()],
            impls: vec!["pg".to_string()],
            sets: Vec::new(),
            flush_latency: None,
            threads: vec![1, 2, 4],
            duration: None,
            warmup: None,
            repeat: None,
            until_ops: None,
            machine: Machine::Real,
            pin: PinPolicy::Compact,
            sysfs_root: None,
            sample_every: 1024,
            progress: false,
            budget: None,
        }
    }

    /// Checks the request and builds its plan: one series per preset item × implementation.
    pub fn plan(&self) -> Result<Plan, PlanError> {
        let w = workload(&self.workload)?;
        let sim = self.machine.profile();
        let (duration, warmup, repeat) = match sim {
            Some(_) => (SIM_LENGTH.duration, SIM_LENGTH.warmup, 1),
            None => (Duration::from_secs(2), Duration::from_millis(500), 3),
        };
        let until = match (sim, self.until_ops) {
            (None, None) => None,
            (None, Some(_)) => return Err(PlanError::UntilOpsOnReal),
            (Some(_), Some(0)) => None,
            (Some(_), ops) => Some(SIM_LENGTH.until(ops)),
        };
        let duration = self.duration.unwrap_or(duration);
        let warmup = self.warmup.unwrap_or(warmup);
        let repeat = self.repeat.unwrap_or(repeat);
        if duration.is_zero() {
            return Err(PlanError::ZeroDuration);
        }
        if repeat == 0 || repeat > MAX_REPEAT {
            return Err(PlanError::BadRepeat);
        }
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err(PlanError::NoThreads);
        }
        let topology = match (sim, &self.sysfs_root) {
            (Some(_), Some(_)) => return Err(PlanError::SysfsOnSimulated),
            (Some(profile), None) => Topology::from_profile(profile)?,
            (None, Some(root)) => Topology::from_sysfs(root)?,
            (None, None) => Topology::detect()?,
        };
        topology.pin_order(self.pin)?;
        let mut sets = self.sets.clone();
        if let Some(latency) = &self.flush_latency {
            if !w.flushes_wal() {
                return Err(PlanError::NoWalFlush {
                    workload: w.name,
                    flushing: crate::names(
                        WORKLOADS.iter().filter(|w| w.flushes_wal()).map(|w| w.name),
                    ),
                });
            }
            sets.push(format!("flush_latency={latency}"));
        }
        let mut series = Vec::new();
        for item in &self.presets {
            series.extend(self.series_of(w, item, &sets)?);
        }
        if series.is_empty() {
            return Err(PlanError::NoSeries);
        }
        Ok(Plan {
            sweep: SweepConfig {
                workload: w.name.to_string(),
                threads: self.threads.clone(),
                duration,
                warmup,
                repeat,
                pin: self.pin,
                sample_every: self.sample_every,
                progress: self.progress,
                sim: sim.cloned(),
                until,
                budget: self.budget,
            },
            series,
            topology,
        })
    }

    /// The series of one preset item (`pg92` or `pg92+knob=v+…`), one per implementation.
    fn series_of(
        &self,
        w: &Workload,
        item: &str,
        sets: &[String],
    ) -> Result<Vec<SeriesSpec<'static>>, PlanError> {
        let mut parts = item.split('+');
        let preset = Preset::by_name(parts.next().unwrap_or_default())?;
        // The item's own knobs come after the run's, so one change runs beside its release.
        let mut own_sets = sets.to_vec();
        own_sets.extend(parts.map(str::to_string));
        let mut settings = preset.settings();
        for set in &own_sets {
            settings.apply(set)?;
        }
        // A macro workload says in its label when it does the executor's work, so that a
        // report never passes a figure with it off for one with it on, or back.
        let label = if w.executor_work()
            && !item.contains("executor_work")
            && settings.executor_work != ExecutorWork::Off
        {
            let value = settings.knob_value("executor_work").unwrap_or_default();
            format!("{item}+executor_work={value}")
        } else {
            item.to_string()
        };
        let mut series = Vec::with_capacity(self.impls.len());
        for name in &self.impls {
            let imp = w.implementation(name)?;
            if self.machine.profile().is_some() && !imp.on_shim {
                return Err(PlanError::NotOnShim {
                    workload: w.name,
                    impl_name: name.clone(),
                    on_shim: crate::names(w.all_impls().filter(|i| i.on_shim).map(|i| i.name)),
                });
            }
            let mut s = crate::series_with(w.name, preset, name, settings.clone())?;
            s.preset = label.clone();
            series.push(s);
        }
        Ok(series)
    }
}

/// A checked request: what [`pglocks_harness::sweep()`] takes.
pub struct Plan {
    /// The sweep's settings (thread counts, durations, placement, machine).
    pub sweep: SweepConfig,
    /// The series, in the order asked: preset items, and implementations within each.
    pub series: Vec<SeriesSpec<'static>>,
    /// The topology the threads are placed on (this machine's, or the simulated one's).
    pub topology: Topology,
}

impl Plan {
    /// Plans run as one sweep, their series interleaved round-robin as any sweep's are: the
    /// first plan's settings, every plan's series, the workloads' names joined (`select-only,
    /// tpcb-like`). `None` for no plans.
    pub fn join(plans: impl IntoIterator<Item = Plan>) -> Option<Plan> {
        let mut plans = plans.into_iter();
        let mut joined = plans.next()?;
        for p in plans {
            if !joined
                .sweep
                .workload
                .split(',')
                .any(|w| w == p.sweep.workload)
            {
                joined.sweep.workload = format!("{},{}", joined.sweep.workload, p.sweep.workload);
            }
            joined.series.extend(p.series);
        }
        Some(joined)
    }

    /// The time the sweep will take, warm-ups included (virtual time on a simulated machine);
    /// with a budget, the budget (or the first rounds, if they take longer).
    pub fn duration(&self) -> Duration {
        let runs = self.series.len() * self.sweep.threads.len() * self.sweep.repeat as usize;
        let base = (self.sweep.duration + self.sweep.warmup) * runs as u32;
        self.sweep.budget.map_or(base, |b| b.max(base))
    }

    /// Runs the sweep.
    pub fn run(self) -> Result<Report, HarnessError> {
        pglocks_harness::sweep(&self.sweep, &self.topology, self.series)
    }
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let series: Vec<String> = self
            .series
            .iter()
            .map(|s| format!("{}/{}", s.preset, s.impl_name))
            .collect();
        f.debug_struct("Plan")
            .field("sweep", &self.sweep)
            .field("series", &series)
            .finish_non_exhaustive()
    }
}

/// A request that cannot be planned, in the words of the command line's flags.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// An unknown workload, implementation, preset or knob, or a knob's bad value.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A machine profile that cannot be had.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The topology could not be read, or the placement does not fit it.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// Neither `real` nor `sim:PROFILE`.
    #[error("invalid --machine '{given}': expected real or sim:PROFILE (profiles: {profiles})")]
    BadMachine {
        /// What was given.
        given: String,
        /// The profiles there are.
        profiles: String,
    },
    /// A simulated machine, in a build without the simulator.
    #[error("this build of pglocks has no simulator (build it with RUSTFLAGS=\"--cfg pglocks_sim\"; the pglocks command does so by itself)")]
    NoSimulator,
    /// An operation count for the runs of this machine, which last their times.
    #[error("--until-ops is for a simulated machine (--machine sim:NAME); runs on this machine last their --duration")]
    UntilOpsOnReal,
    /// A measured time of zero.
    #[error("--duration must be longer than 0")]
    ZeroDuration,
    /// Zero runs a point, or more than [`MAX_REPEAT`].
    #[error("--repeat must be from 1 to {MAX_REPEAT}")]
    BadRepeat,
    /// No thread counts, or a count of zero.
    #[error("--threads must name at least one count, none of them 0")]
    NoThreads,
    /// A sysfs tree for a simulated machine.
    #[error("--sysfs-root describes a real machine; a simulated one has its profile's topology")]
    SysfsOnSimulated,
    /// An implementation that does not go through the sync shim, on a simulated machine.
    #[error("--impl {impl_name} cannot run on a simulated machine: it does not go through the sync shim (the implementations of {workload} that do: {on_shim})")]
    NotOnShim {
        /// The workload.
        workload: &'static str,
        /// The implementation.
        impl_name: String,
        /// The workload's implementations that do.
        on_shim: String,
    },
    /// `--flush-latency` for a workload that does not flush WAL.
    #[error(
        "--flush-latency applies to the workloads that flush WAL ({flushing}), not {workload}"
    )]
    NoWalFlush {
        /// The workload.
        workload: &'static str,
        /// The workloads that do.
        flushing: String,
    },
    /// No preset item or no implementation.
    #[error("--preset and --impl must name at least one each")]
    NoSeries,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick(workload: &str) -> RunRequest {
        let mut r = RunRequest::new(workload);
        r.threads = vec![1];
        r
    }

    #[test]
    fn one_series_per_preset_item_and_impl_in_the_order_asked() {
        let mut r = quick("spin");
        r.presets = vec!["pg92".into(), "pg81+tas_spin=off".into()];
        r.impls = vec!["pg".into(), "tas".into()];
        let plan = r.plan().unwrap();
        let labels: Vec<String> = plan
            .series
            .iter()
            .map(|s| format!("{}/{}", s.preset, s.impl_name))
            .collect();
        assert_eq!(
            labels,
            [
                "pg92/pg",
                "pg92/tas",
                "pg81+tas_spin=off/pg",
                "pg81+tas_spin=off/tas"
            ]
        );
        assert_eq!(
            (plan.sweep.repeat, plan.sweep.duration),
            (3, Duration::from_secs(2))
        );
    }

    #[test]
    fn macro_workloads_name_their_executor_work_in_the_label() {
        let mut r = quick("select-only");
        r.presets = vec!["pg18".into(), "pg18+executor_work=off".into()];
        r.sets = vec!["executor_work=pg15".into()];
        let plan = r.plan().unwrap();
        assert_eq!(plan.series[0].preset, "pg18+executor_work=pg15");
        assert_eq!(plan.series[1].preset, "pg18+executor_work=off");
        r.sets.clear();
        assert_eq!(
            r.plan().unwrap().series[0].preset,
            "pg18",
            "off: nothing to say"
        );
        // A workload without executor work keeps the item as it is.
        assert_eq!(
            quick("spin").plan().unwrap().series[0].preset,
            DEFAULT_PRESET
        );
    }

    #[test]
    fn each_mistake_has_its_error() {
        let mut r = quick("spin");
        r.flush_latency = Some("2ms".into());
        let e = r.plan().unwrap_err();
        assert!(
            matches!(
                e,
                PlanError::NoWalFlush {
                    workload: "spin",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("tpcb-like"), "{e}");
        let mut r = quick("spin");
        r.repeat = Some(0);
        assert!(matches!(r.plan(), Err(PlanError::BadRepeat)));
        let mut r = quick("spin");
        r.duration = Some(Duration::ZERO);
        assert!(matches!(r.plan(), Err(PlanError::ZeroDuration)));
        let mut r = quick("spin");
        r.threads = vec![1, 0];
        assert!(matches!(r.plan(), Err(PlanError::NoThreads)));
        let mut r = quick("spin");
        r.impls.clear();
        assert!(matches!(r.plan(), Err(PlanError::NoSeries)));
        let mut r = quick("spin");
        r.presets = vec!["pg99".into()];
        assert!(matches!(r.plan(), Err(PlanError::Workload(_))));
        assert!(matches!(
            quick("nosuch").plan(),
            Err(PlanError::Workload(WorkloadError::UnknownWorkload { .. }))
        ));
        assert!(matches!(
            Machine::parse("vm"),
            Err(PlanError::BadMachine { .. })
        ));
    }

    #[test]
    fn an_operation_count_is_for_a_simulated_machine() {
        let mut r = quick("spin");
        assert!(r.plan().unwrap().sweep.until.is_none());
        r.until_ops = Some(100);
        assert!(matches!(r.plan(), Err(PlanError::UntilOpsOnReal)));
        let length = SIM_LENGTH.until(Some(8000));
        assert_eq!((length.ops, length.warmup_ops), (8000, 2000));
        assert_eq!(SIM_LENGTH.until(None).ops, SIM_LENGTH.ops);
    }

    #[test]
    fn a_flush_latency_is_the_knob_for_the_workloads_that_flush() {
        let mut r = quick("wal-commit");
        r.flush_latency = Some("soon".into());
        let e = r.plan().unwrap_err().to_string();
        assert!(e.contains("bad value 'soon' for knob flush_latency"), "{e}");
        r.flush_latency = Some("1ms".into());
        assert_eq!(r.plan().unwrap().series.len(), 1);
    }

    #[test]
    fn joined_plans_run_as_one_sweep() {
        let a = quick("spin").plan().unwrap();
        let b = quick("select-only").plan().unwrap();
        let c = quick("spin").plan().unwrap();
        let one = Plan::join([a, b, c]).unwrap();
        assert_eq!(one.sweep.workload, "spin,select-only");
        assert_eq!(one.series.len(), 3);
        assert_eq!(one.duration(), Duration::from_millis(2500) * 9);
        assert!(Plan::join(Vec::new()).is_none());
    }

    #[test]
    fn a_simulated_machine_needs_the_simulators_build() {
        let name = Profile::names()
            .into_iter()
            .next()
            .expect("a built-in profile");
        match (
            pglocks_sim::BUILT_IN,
            Machine::parse(&format!("sim:{name}")),
        ) {
            (true, Ok(m)) => {
                assert_eq!(m.name(), format!("sim:{name}"));
                let mut r = quick("spin");
                r.machine = m;
                r.impls = vec!["std".into()];
                assert!(matches!(r.plan(), Err(PlanError::NotOnShim { .. })));
                r.impls = vec!["pg".into()];
                let plan = r.plan().unwrap();
                assert_eq!(plan.sweep.duration, Duration::from_millis(20));
                assert_eq!(plan.sweep.repeat, 1);
                assert_eq!(plan.sweep.until, Some(SIM_LENGTH.until(None)));
                r.until_ops = Some(0);
                assert_eq!(r.plan().unwrap().sweep.until, None);
            }
            (false, Err(PlanError::NoSimulator)) => {}
            (built_in, other) => panic!("simulator built in: {built_in}, parsed: {other:?}"),
        }
    }
}
