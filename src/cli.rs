//! The `pglocks` command line: `run`, `compare`, `list`, `topology`, `isolation`, `report`,
//! `stress`, and with no command the default run, a sweep that fits its result on one screen and
//! writes a report.
//!
//! Every user error (an unknown name, a malformed list or duration, zero threads) becomes a
//! [`CliError`] whose message lists the valid choices; `main` prints it and exits with status 2.
//! Results go to stdout; what a command is doing (its progress bar, drawn only on a terminal
//! and turned off by `--no-progress` wherever a command runs for long) goes to stderr.

mod calibrate;
mod compare;
mod reproduce;
mod show;
pub mod simbuild;

use clap::{Args, Parser, Subcommand};
use pglocks_harness::{
    self as harness, Format, HarnessError, PinPolicy, Report, SweepConfig, Topology,
};
use pglocks_sim::{Profile, ProfileError};
use pglocks_workloads::{self as workloads, Preset, WorkloadError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "pglocks",
    version,
    about = "PostgreSQL's lock primitives, modelled faithfully, measured on this machine",
    long_about = "PostgreSQL's lock primitives, modelled faithfully, measured on this machine.\n\
                  With no command, runs the default sweep: PostgreSQL 9.1, 9.2 and 18 on \
                  pgbench's select-only and tpcb-like transactions (under a minute), and writes \
                  a report under target/pglocks/."
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    default_run: DefaultRunArgs,
}

/// The flags of the default run (no command).
#[derive(Debug, Args)]
struct DefaultRunArgs {
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    #[command(flatten)]
    show: show::ShowArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a workload over thread counts and print throughput, latency and waits.
    Run(Box<RunArgs>),
    /// Compare two saved reports point by point (exit 1 with --fail-if-slower when B lost).
    Compare(compare::CompareArgs),
    /// List workloads, their implementations, presets, machines and knobs.
    List,
    /// Measure this machine's cache-line transfers, atomics, futex wake-ups and sleeps, and write
    /// its profile for the simulator (`run --machine sim:this`).
    Calibrate(calibrate::CalibrateArgs),
    /// Run every published claim the models cover, on this machine or a simulated one, and say
    /// claim by claim whether the effect came out (a report directory with the summary first).
    Reproduce(reproduce::ReproduceArgs),
    /// Show the detected NUMA nodes, cores, SMT siblings and the pinning order.
    Topology {
        /// Pinning policy whose order to show: compact, scatter, node:N or none.
        #[arg(long, default_value = "compact")]
        pin: String,
        /// Read the topology from this sysfs tree instead of /sys (for fixtures of big machines).
        #[arg(long)]
        sysfs_root: Option<PathBuf>,
    },
    /// Run lock-only isolation specs and print what PostgreSQL's isolationtester prints.
    Isolation {
        /// Spec files (PostgreSQL isolation-spec syntax, lock-only SQL).
        #[arg(required = true)]
        specs: Vec<PathBuf>,
        /// The release whose lock manager runs the specs.
        #[arg(long, default_value = "pg14")]
        preset: String,
    },
    /// Run every primitive and macro workload at once with invariant checks; exit 1 on the first
    /// violation, a hang or a failed setup, with the seed that repeats the run.
    Stress(StressArgs),
    /// Re-render a saved run directory (CSV, Markdown, SVG charts, index.html) from its report.json.
    Report {
        /// The run directory.
        dir: PathBuf,
        /// Also print the report in this format.
        #[arg(long, default_value = "table")]
        format: String,
        #[command(flatten)]
        show: show::ShowArgs,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Workload (see `pglocks list`).
    workload: String,
    /// PostgreSQL release presets, comma-separated; `P+knob=value` gives one preset a knob of its
    /// own, so that a change runs beside its release (`pg92,pg92+fast_path=off`).
    #[arg(long, default_value = workloads::DEFAULT_PRESET)]
    preset: String,
    /// Implementations, comma-separated (default: PostgreSQL's, `pg`).
    #[arg(long = "impl", default_value = "pg")]
    impls: String,
    /// Thread counts: a list `1,2,4`, a range `1..64`, a doubling range `1..64:x2`, or a mix.
    #[arg(long, default_value = "1,2,4")]
    threads: String,
    /// Measured time per run (`2s`, `500ms`) [default: 2s; 20ms of virtual time under `sim`].
    #[arg(long)]
    duration: Option<String>,
    /// Unmeasured time before each run [default: 500ms; 5ms of virtual time under `sim`].
    #[arg(long)]
    warmup: Option<String>,
    /// The machine: `real` (this one), or `sim:PROFILE`, a simulated many-core machine (see
    /// `pglocks list` for the profiles), on which durations are virtual time.
    #[arg(long, default_value = "real")]
    machine: String,
    /// Runs per point; the median is reported and all are kept [default: 3; 1 under `sim`,
    /// whose runs repeat exactly].
    #[arg(long)]
    repeat: Option<u32>,
    /// Thread placement: compact, scatter, node:N or none.
    #[arg(long, default_value = "compact")]
    pin: String,
    /// Output format: table, json, csv or markdown.
    #[arg(long, default_value = "table")]
    format: String,
    /// Also save the report (JSON, CSV, Markdown, SVG charts, index.html) in this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Override one knob of the preset, `knob=value` (repeatable; see `pglocks list`).
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    sets: Vec<String>,
    /// The simulated WAL device's flush time (`2ms`, `500us`, `1ms..3ms`); the same as
    /// `--set flush_latency=…`.
    #[arg(long)]
    flush_latency: Option<String>,
    /// Read the topology from this sysfs tree instead of /sys.
    #[arg(long)]
    sysfs_root: Option<PathBuf>,
    /// Time one operation in this many (latency sampling; 1 = every operation, 0 = only the first).
    #[arg(long, default_value_t = 1024)]
    sample_every: u32,
    #[command(flatten)]
    show: show::ShowArgs,
}

/// Errors the command line reports: exit status 2, except a `pglocks stress` run or setup that
/// failed ([`CliError::StressFailed`], [`CliError::StressSetup`]) and a comparison that found B
/// slower ([`CliError::Slower`]): exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// An unknown workload, impl, preset or knob.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The harness failed (topology, files, a workload's own error).
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// A machine profile that cannot be had.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A file that could not be written.
    #[error("cannot write {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// `pglocks stress` found a violation or a hang (exit status 1).
    #[error("{0}")]
    StressFailed(String),
    /// `pglocks compare --fail-if-slower` found B slower (exit status 1).
    #[error("{0}")]
    Slower(String),
    /// A model refused to set up a `pglocks stress` part (exit status 1: the request was valid).
    #[error(transparent)]
    StressSetup(workloads::stress::SetupError),
    /// Ctrl-C stopped a `run` or `stress`: what was measured has been printed (and saved);
    /// exit status 130, as a shell reports a command ended by SIGINT.
    #[error("{0}")]
    Interrupted(String),
    /// A command that needs the simulator, in a build without it: the `pglocks` binary hands
    /// the command line to the simulator's build ([`simbuild::exec`]).
    #[error("this build of pglocks has no simulator (build it with RUSTFLAGS=\"--cfg pglocks_sim\"; the pglocks command does so by itself)")]
    NoSimulator,
    /// An isolation spec could not be read, parsed or run.
    #[error("{file}: {error}")]
    Isolation {
        /// The spec file.
        file: String,
        /// What went wrong.
        error: String,
    },
}

/// Parses a thread-count list: comma-separated items, each `N`, `A..B` (every count from A to
/// B), `A..B:xF` (A, A·F, A·F², … up to B) or `A..B:+S` (steps of S).
pub fn parse_threads(s: &str) -> Result<Vec<usize>, CliError> {
    let bad = |why: &str| {
        CliError::Usage(format!(
            "bad --threads '{s}': {why} (examples: 1,2,4 or 1..64 or 1..64:x2 or 2..16:+2)"
        ))
    };
    let num = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| bad(&format!("'{t}' is not a number")))
    };
    let mut out = Vec::new();
    for item in s.split(',') {
        if out.len() > MAX_POINTS {
            return Err(bad(TOO_MANY));
        }
        let item = item.trim();
        let Some((a, rest)) = item.split_once("..") else {
            out.push(num(item)?);
            continue;
        };
        let (b, step) = rest.split_once(':').unwrap_or((rest, "+1"));
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(bad(&format!("range {a}..{b} runs backwards")));
        }
        // Checked before expanding, so that no range can make a huge list (or overflow).
        if b > MAX_THREADS {
            return Err(bad(TOO_MANY));
        }
        let mut t = a;
        if let Some(f) = step.strip_prefix('x') {
            let f = num(f)?;
            if f < 2 || a == 0 {
                return Err(bad(
                    "a doubling range needs a factor of at least 2 and a start of at least 1",
                ));
            }
            while t <= b {
                out.push(t);
                t = t.saturating_mul(f);
            }
        } else if let Some(d) = step.strip_prefix('+') {
            let d = num(d)?;
            if d == 0 {
                return Err(bad("a step of 0"));
            }
            while t <= b && out.len() <= MAX_POINTS {
                out.push(t);
                t = t.saturating_add(d);
            }
        } else {
            return Err(bad(&format!("step '{step}' must be xF or +S")));
        }
    }
    if out.contains(&0) {
        return Err(bad("zero threads"));
    }
    if out.len() > MAX_POINTS || out.iter().any(|&t| t > MAX_THREADS) {
        return Err(bad(TOO_MANY));
    }
    Ok(out)
}

/// The most threads one point of `--threads` may have.
const MAX_THREADS: usize = 65_536;
/// The most points `--threads` may list.
const MAX_POINTS: usize = 4096;
const TOO_MANY: &str = "more than 65536 threads or 4096 points";

/// The longest `--duration`, `--warmup` or `--hang-after`: 30 days. A run keeps its memory
/// bounded however long it is (the timeline is downsampled), so this only keeps the arithmetic
/// of times far from its limits.
pub const MAX_FLAG_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The most `--repeat` rounds.
pub const MAX_REPEAT: u32 = 1000;

/// Parses a duration such as `2s`, `500ms` or `1m`, in the syntax of the knobs
/// (`pglocks_sync::time::parse_duration`), at most [`MAX_FLAG_DURATION`].
pub fn parse_duration(flag: &str, s: &str) -> Result<Duration, CliError> {
    let d = pglocks_sync::time::parse_duration(s)
        .map_err(|e| CliError::Usage(format!("bad {flag} '{s}': {e} (examples: 2s, 500ms, 1m)")))?;
    if d > MAX_FLAG_DURATION {
        return Err(CliError::Usage(format!(
            "bad {flag} '{s}': at most 30 days (720h)"
        )));
    }
    Ok(d)
}

/// Ctrl-C during `run`, `stress` or the default run: the first asks the harness to stop (the
/// run in progress is dropped, the points finished are printed and saved, exit status 130); a
/// second ends the process at once.
fn stop_on_ctrl_c() {
    extern "C" fn on_sigint(_: libc::c_int) {
        if harness::interrupt::stop_requested() {
            // SAFETY: `_exit` is async-signal-safe and ends the process without unwinding.
            unsafe { libc::_exit(130) };
        }
        harness::interrupt::request_stop();
    }
    // SAFETY: the handler only reads and stores an atomic and calls `_exit`, all
    // async-signal-safe; `signal` replaces the default disposition of SIGINT.
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    unsafe { libc::signal(libc::SIGINT, handler as libc::sighandler_t) };
}

/// After a sweep's report is printed and saved: exit 130 if Ctrl-C cut it short.
fn interrupted(report: &harness::Report) -> Result<(), CliError> {
    if !report.interrupted {
        return Ok(());
    }
    let points: usize = report.series.iter().map(|s| s.points.len()).sum();
    Err(CliError::Interrupted(format!(
        "interrupted: the report holds the {points} points measured before Ctrl-C"
    )))
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn detect(sysfs_root: Option<&Path>) -> Result<Topology, CliError> {
    Ok(match sysfs_root {
        Some(root) => Topology::from_sysfs(root).map_err(HarnessError::from)?,
        None => Topology::detect().map_err(HarnessError::from)?,
    })
}

fn pin_policy(s: &str) -> Result<PinPolicy, CliError> {
    s.parse::<PinPolicy>()
        .map_err(|e| CliError::Harness(e.into()))
}

/// A validated `run`: the sweep settings and the series to run.
struct Plan {
    sweep: SweepConfig,
    series: Vec<harness::SeriesSpec<'static>>,
    topology: Topology,
}

/// `--machine`: `None` for this machine, or the simulated machine's profile.
fn machine(s: &str) -> Result<Option<Arc<Profile>>, CliError> {
    match s.strip_prefix("sim:") {
        _ if s == "real" => Ok(None),
        Some(name) => {
            let profile = Profile::find(name)?;
            if !pglocks_sim::BUILT_IN {
                return Err(CliError::NoSimulator);
            }
            Ok(Some(Arc::new(profile)))
        }
        None => Err(CliError::Usage(format!(
            "invalid --machine '{s}': expected real or sim:PROFILE (profiles: {})",
            Profile::names().join(", ")
        ))),
    }
}

fn plan(a: &RunArgs) -> Result<Plan, CliError> {
    let workload = workloads::workload(&a.workload)?;
    let threads = parse_threads(&a.threads)?;
    let sim = machine(&a.machine)?;
    let (default_duration, default_warmup) = if sim.is_some() {
        ("20ms", "5ms")
    } else {
        ("2s", "500ms")
    };
    let duration = parse_duration(
        "--duration",
        a.duration.as_deref().unwrap_or(default_duration),
    )?;
    let warmup = parse_duration("--warmup", a.warmup.as_deref().unwrap_or(default_warmup))?;
    if duration.is_zero() {
        return Err(CliError::Usage("--duration must be longer than 0".into()));
    }
    let repeat = a.repeat.unwrap_or(if sim.is_some() { 1 } else { 3 });
    if repeat == 0 || repeat > MAX_REPEAT {
        return Err(CliError::Usage(format!(
            "--repeat must be from 1 to {MAX_REPEAT}"
        )));
    }
    let pin = pin_policy(&a.pin)?;
    let topology =
        match &sim {
            Some(_) if a.sysfs_root.is_some() => return Err(CliError::Usage(
                "--sysfs-root describes a real machine; a simulated one has its profile's topology"
                    .into(),
            )),
            Some(profile) => Topology::from_profile(profile).map_err(HarnessError::from)?,
            None => detect(a.sysfs_root.as_deref())?,
        };
    topology.pin_order(pin).map_err(HarnessError::from)?;
    let mut sets = a.sets.clone();
    if let Some(l) = &a.flush_latency {
        if !workload.flushes_wal {
            let flushing: Vec<&str> = workloads::WORKLOADS
                .iter()
                .filter(|w| w.flushes_wal)
                .map(|w| w.name)
                .collect();
            return Err(CliError::Usage(format!(
                "--flush-latency applies to the workloads that flush WAL ({}), not {}",
                flushing.join(", "),
                a.workload
            )));
        }
        sets.push(format!("flush_latency={l}"));
    }
    let mut series = Vec::new();
    for p in list(&a.preset) {
        // `pg92+fast_path=off`: a preset with knobs of its own, after the run's `--set`s, so
        // that one change runs beside its release in the same round-robin sweep.
        let mut parts = p.split('+');
        let preset = Preset::by_name(parts.next().unwrap_or_default())?;
        let mut own_sets = sets.clone();
        own_sets.extend(parts.map(str::to_string));
        // The macro workloads say in their series' name when they do the executor's work, so
        // that a report never passes a figure with it off for one with it on, or back.
        let mut label = p.clone();
        if workload.executor_work && !p.contains("executor_work") {
            let mut settings = preset.settings();
            for set in &own_sets {
                settings.apply(set)?;
            }
            if settings.executor_work != workloads::preset::ExecutorWork::Off {
                let value = settings.knob_value("executor_work").unwrap_or_default();
                label = format!("{p}+executor_work={value}");
            }
        }
        if let Some((profile, why)) = sim.as_ref().zip(workload.not_simulated()) {
            return Err(CliError::Usage(format!(
                "{} cannot run on the simulated machine {}: {why}",
                a.workload, profile.name
            )));
        }
        for i in list(&a.impls) {
            let imp = workload.implementation(&i)?;
            if sim.is_some() && !imp.on_shim {
                let on: Vec<&str> = workload
                    .impls
                    .iter()
                    .filter(|i| i.on_shim)
                    .map(|i| i.name)
                    .collect();
                return Err(CliError::Usage(format!(
                    "--impl {i} cannot run on a simulated machine: it does not go through the sync shim (the implementations of {} that do: {})",
                    a.workload,
                    on.join(", ")
                )));
            }
            let mut s = workloads::series(&a.workload, preset, &i, &own_sets)?;
            s.preset = label.clone();
            series.push(s);
        }
    }
    if series.is_empty() {
        return Err(CliError::Usage(
            "--preset and --impl must name at least one each".into(),
        ));
    }
    Ok(Plan {
        sweep: SweepConfig {
            workload: a.workload.clone(),
            threads,
            duration,
            warmup,
            repeat,
            pin,
            sample_every: a.sample_every,
            progress: !a.no_progress,
            sim,
        },
        series,
        topology,
    })
}

fn run(a: &RunArgs) -> Result<(), CliError> {
    let format: Format = a.format.parse()?;
    let plan = plan(a)?;
    let report = harness::sweep(&plan.sweep, &plan.topology, plan.series)?;
    show::print(&report, format, &a.show)?;
    if let Some(dir) = &a.out {
        let files = harness::save_report(&report, dir)?;
        eprintln!("report saved in {}: {}", dir.display(), files.join(", "));
    }
    interrupted(&report)
}

/// The presets the default run compares: before and after the 9.2 scalability work, and today.
const DEFAULT_RUN_PRESETS: &str = "pg91,pg92,pg18";
/// The macro workloads it runs.
const DEFAULT_RUN_WORKLOADS: [&str; 2] = ["select-only", "tpcb-like"];

/// The default run of a bare `pglocks` (`cargo run --release`): PostgreSQL 9.1, 9.2 and 18 on
/// `select-only` and `tpcb-like`, from 1 to 2 × the CPUs' threads (doubling), a table on stdout
/// and a report directory under `target/pglocks/`.
///
/// pgbench's rule of thumb sizes the tables: a scale at least the number of clients (capped at
/// 8, what the default shared buffers hold). `tpcb-like` commits with `synchronous_commit =
/// off`: a commit hands its record to the WAL writer, which flushes it in the background (on the
/// default simulated device), so that the curve is the locks' and not a disk's.
fn demo(args: &DefaultRunArgs) -> Result<(), CliError> {
    use harness::format::wrap;
    use harness::render::BRIEF_WIDTH;
    let topology = detect(None)?;
    let max_threads = 2 * topology.logical_cpus().max(1);
    let scale = max_threads.clamp(1, 8);
    let mut plans = Vec::new();
    for workload in DEFAULT_RUN_WORKLOADS {
        let mut sets = vec![format!("scale={scale}")];
        if workload == "tpcb-like" {
            sets.push("synchronous_commit=off".into());
        }
        plans.push(plan(&RunArgs {
            workload: workload.into(),
            preset: DEFAULT_RUN_PRESETS.into(),
            impls: "pg".into(),
            threads: format!("1..{max_threads}:x2"),
            duration: Some("700ms".into()),
            warmup: Some("200ms".into()),
            machine: "real".into(),
            repeat: Some(3),
            pin: "compact".into(),
            format: "table".into(),
            out: None,
            no_progress: args.no_progress,
            sets,
            flush_latency: None,
            sysfs_root: None,
            sample_every: 1024,
            show: show::ShowArgs::default(),
        })?);
    }
    let mut sweep = plans[0].sweep.clone();
    sweep.workload = DEFAULT_RUN_WORKLOADS.join(",");
    let series: Vec<_> = plans.into_iter().flat_map(|p| p.series).collect();
    let threads: Vec<String> = sweep.threads.iter().map(usize::to_string).collect();
    let estimate = ((series.len() * sweep.threads.len()) as u32 * sweep.repeat)
        * (sweep.duration + sweep.warmup).as_millis() as u32
        / 1_000;
    eprintln!(
        "{}",
        wrap(
            &format!(
                "pglocks: {} on {} (scale {scale}; tpcb-like with synchronous_commit=off) at \
                 {} threads, about {estimate} s",
                DEFAULT_RUN_PRESETS.replace(',', ", "),
                DEFAULT_RUN_WORKLOADS.join(" and "),
                threads.join(", "),
            ),
            BRIEF_WIDTH,
            "  "
        )
    );
    let started = std::time::Instant::now();
    let report = harness::sweep(&sweep, &topology, series)?;
    if args.show.any() {
        show::print(&report, Format::Table, &args.show)?;
    } else {
        print!("{}", harness::render::brief(&report));
    }
    println!();
    for paragraph in harness::summary::summary(&report) {
        println!("{}", wrap(&format!("- {paragraph}"), BRIEF_WIDTH, "  "));
    }
    let dir = stamped_dir("default");
    harness::save_report(&report, &dir)?;
    println!(
        "\nwall time {:.1} s. The report, with charts, wait events and metrics:\n  {}/index.html",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    if !args.show.any() {
        println!("All tables: {} report {} -v", invocation(), dir.display());
    }
    interrupted(&report)
}

/// `target/pglocks/<name>-<seconds since the epoch>`: where a command that was given no
/// directory saves its report.
fn stamped_dir(name: &str) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("target")
        .join("pglocks")
        .join(format!("{name}-{stamp}"))
}

/// How the user started this program, for a command line to copy: `cargo run --release --` when
/// cargo ran it (cargo sets `CARGO_MANIFEST_DIR` for the programs it runs), `pglocks` otherwise.
fn invocation() -> &'static str {
    match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(_) if cfg!(debug_assertions) => "cargo run --",
        Some(_) => "cargo run --release --",
        None => "pglocks",
    }
}

fn print_list() {
    println!("workloads (pglocks run WORKLOAD --impl ...):");
    for w in workloads::WORKLOADS {
        println!("  {:<16} {}", w.name, w.summary);
        for i in w.impls {
            let star = if i.on_shim { ' ' } else { '*' };
            println!("      --impl {:<12}{star}{}", i.name, i.summary);
        }
        if !w.knobs.is_empty() {
            println!("      knobs: {}", w.knobs.join(", "));
        }
    }
    println!(
        "\npresets (--preset, default {}):",
        workloads::DEFAULT_PRESET
    );
    let width = workloads::PRESETS
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0);
    for p in workloads::PRESETS {
        let same = p.same_as().map(|q| q.name);
        let text = match (p.summary, same) {
            ("", Some(q)) => format!("{}: no modelled change, the rules of {q}", p.version),
            ("", None) => p.version.to_string(),
            (s, Some(q)) => format!("{s} (no modelled change: the rules of {q})"),
            (s, None) => s.to_string(),
        };
        println!("  {:<width$} {text}", p.name);
    }
    println!("\nmachines (--machine real | sim:PROFILE; the impls marked * do not run simulated):");
    println!("  {:<14} this machine (the default)", "real");
    for name in Profile::names() {
        match Profile::find(&name) {
            Ok(p) => println!("  sim:{name:<10} {} ({})", p.summary, p.describe()),
            Err(e) => println!("  sim:{name:<10} (unreadable: {e})"),
        }
    }
    println!("\nknobs (--set knob=value, applied on top of the preset):");
    let width = workloads::KNOBS
        .iter()
        .map(|k| k.name.len())
        .max()
        .unwrap_or(0);
    for k in workloads::KNOBS {
        println!("  {:<width$} {}", k.name, k.help);
    }
    print_preset_table(width);
}

/// What the preset table shows for knob `k`: its `--set` value, except where that hides the
/// release's difference (the fast path's layout, the CLOG buffers the release sizes).
fn preset_cell(s: &workloads::Settings, k: &str) -> String {
    match k {
        "fast_path" => match s.fast_path {
            pglocks_lmgr::FastPathLayout::None => "off".into(),
            pglocks_lmgr::FastPathLayout::Slots16 => "16".into(),
            pglocks_lmgr::FastPathLayout::Groups(n) => format!("{n}x16"),
            pglocks_lmgr::FastPathLayout::Custom(_) => "custom".into(),
        },
        "clog_buffers" => s.clog_buffers().to_string(),
        _ => s.knob_value(k).unwrap_or_default(),
    }
}

/// The knobs whose values differ between releases, one row each, one column per preset that
/// has a modelled change (from the presets themselves).
fn print_preset_table(knob_width: usize) {
    let presets: Vec<&workloads::Preset> = workloads::PRESETS
        .iter()
        .filter(|p| p.same_as().is_none())
        .collect();
    let settings: Vec<_> = presets.iter().map(|p| p.settings()).collect();
    let rows: Vec<(&str, Vec<String>)> = workloads::KNOBS
        .iter()
        .map(|k| {
            let values = settings.iter().map(|s| preset_cell(s, k.name)).collect();
            (k.name, values)
        })
        .filter(|(_, v): &(&str, Vec<String>)| v.iter().any(|x| x != &v[0]))
        .collect();
    let widths: Vec<usize> = presets
        .iter()
        .enumerate()
        .map(|(i, p)| {
            rows.iter()
                .map(|r| r.1[i].len())
                .fold(p.name.len(), usize::max)
        })
        .collect();
    println!(
        "
what the releases with a modelled change set differently (every other knob is the same in all):"
    );
    let mut line = format!("  {:<knob_width$}", "knob");
    for (p, w) in presets.iter().zip(&widths) {
        line += &format!(" {:<w$}", p.name);
    }
    println!("{}", line.trim_end());
    for (k, values) in &rows {
        let mut line = format!("  {k:<knob_width$}");
        for (v, w) in values.iter().zip(&widths) {
            line += &format!(" {v:<w$}");
        }
        println!("{}", line.trim_end());
    }
}

fn report(dir: &Path, format: &str, show: &show::ShowArgs) -> Result<(), CliError> {
    let format: Format = format.parse()?;
    let (r, files): (Report, _) = harness::rerender(dir)?;
    show::print(&r, format, show)?;
    eprintln!("re-rendered {}: {}", dir.display(), files.join(", "));
    Ok(())
}

/// `pglocks isolation`: runs each spec and prints the tester's output (its warnings on stderr).
fn isolation(specs: &[PathBuf], preset: &str) -> Result<(), CliError> {
    use pglocks_isolation as isolation;
    let settings = Preset::by_name(preset)?.settings();
    for path in specs {
        let fail = |error: String| CliError::Isolation {
            file: path.display().to_string(),
            error,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let spec = isolation::parse_spec(&text).map_err(|e| fail(e.to_string()))?;
        let out = isolation::run_spec(&spec, settings.lock_manager_config(1), None)
            .map_err(|e| fail(e.to_string()))?;
        eprint!("{}", out.stderr);
        print!("{}", out.stdout);
    }
    Ok(())
}

/// Runs the parsed command line.
pub fn execute(cli: Cli) -> Result<(), CliError> {
    if matches!(
        cli.command,
        None | Some(Command::Run(_)) | Some(Command::Stress(_))
    ) {
        stop_on_ctrl_c();
    }
    match cli.command {
        None => demo(&cli.default_run),
        Some(Command::Run(a)) => run(&a),
        Some(Command::Compare(a)) => compare::compare(&a),
        Some(Command::List) => {
            print_list();
            Ok(())
        }
        Some(Command::Topology { pin, sysfs_root }) => {
            let pin = pin_policy(&pin)?;
            let t = detect(sysfs_root.as_deref())?;
            print!("{}", t.describe(pin));
            Ok(())
        }
        Some(Command::Reproduce(a)) => reproduce::reproduce(&a),
        Some(Command::Isolation { specs, preset }) => isolation(&specs, &preset),
        Some(Command::Report { dir, format, show }) => report(&dir, &format, &show),
        Some(Command::Stress(a)) => stress(&a),
        Some(Command::Calibrate(a)) => calibrate::calibrate(&a),
    }
}

/// `pglocks stress`'s arguments.
#[derive(Debug, Args)]
struct StressArgs {
    /// How long to run.
    #[arg(long, default_value = "60s")]
    duration: String,
    /// Threads in all, dealt out to the parts (at least one per part).
    #[arg(long, default_value_t = 64)]
    threads: usize,
    /// The parts to run, comma-separated (default: every one; an unknown name lists them).
    #[arg(long)]
    parts: Option<String>,
    /// The release whose models run.
    #[arg(long, default_value = workloads::DEFAULT_PRESET)]
    preset: String,
    /// Seed of every thread's random choices (default: from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Override one knob of the preset, `knob=value` (repeatable).
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    sets: Vec<String>,
    /// Report a thread that makes no progress for this long as hung.
    #[arg(long, default_value = "30s")]
    hang_after: String,
    /// No progress line on stderr (drawn only when stderr is a terminal; results go to stdout).
    #[arg(long)]
    no_progress: bool,
}

/// `pglocks stress`: runs, prints the summary table on stdout, and fails with the seed on a
/// violation or a hang. A wrong request (an unknown part, too few threads, a bad duration) is a
/// usage error (status 2); a model that refuses its settings is a failed setup (status 1).
fn stress(a: &StressArgs) -> Result<(), CliError> {
    use workloads::stress::{self as st, StressError};
    let mut settings = Preset::by_name(&a.preset)?.settings();
    for set in &a.sets {
        settings.apply(set)?;
    }
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let cfg = st::StressConfig {
        duration: parse_duration("--duration", &a.duration)?,
        threads: a.threads,
        settings,
        seed,
        hang_after: parse_duration("--hang-after", &a.hang_after)?,
        parts: a.parts.as_deref().map(list).unwrap_or_default(),
    };
    let usage = |e: st::UsageError| CliError::Usage(e.to_string());
    let parts = cfg.validate().map_err(usage)?;
    let names: Vec<_> = parts.iter().map(|p| p.name).collect();
    eprintln!(
        "pglocks stress: {} threads over {}, {} on {}, seed {}",
        cfg.threads,
        match a.parts {
            Some(_) => names.join(", "),
            None => format!("all {} parts", names.len()),
        },
        pglocks_sync::time::format_duration(cfg.duration),
        a.preset,
        cfg.seed
    );
    let draw = !a.no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let report = st::stress_with_progress(&cfg, &mut |p| {
        if draw {
            eprint!(
                "\r{} s of {}, {} steps\x1b[K",
                p.elapsed.as_secs(),
                pglocks_sync::time::format_duration(p.duration),
                p.steps
            );
        }
    });
    if draw {
        eprint!("\r\x1b[K");
    }
    let report = report.map_err(|e| match e {
        StressError::Usage(e) => usage(e),
        StressError::Setup(e) => CliError::StressSetup(e),
    })?;
    println!(
        "{:<12} {:>7} {:>14} {:>14} {:>10}  {:<12} {:>10}",
        "part", "threads", "operations", "checks", "events", "(what)", "violations"
    );
    let mut totals = (0, 0);
    for p in &report.parts {
        let failed = report.violation.as_ref().is_some_and(|v| v.part == p.name);
        println!(
            "{:<12} {:>7} {:>14} {:>14} {:>10}  {:<12} {:>10}",
            p.name,
            p.threads,
            p.ops,
            p.checks,
            p.events,
            p.events_name,
            u8::from(failed)
        );
        totals = (totals.0 + p.ops, totals.1 + p.checks);
    }
    println!(
        "{:<12} {:>7} {:>14} {:>14}  in {:.1} s; violations {}, hangs {}",
        "all",
        cfg.threads,
        totals.0,
        totals.1,
        report.elapsed.as_secs_f64(),
        u8::from(report.violation.is_some()),
        report.hangs.len()
    );
    if report.interrupted && report.passed() {
        return Err(CliError::Interrupted(format!(
            "interrupted after {:.1} s: no violation or hang in that time",
            report.elapsed.as_secs_f64()
        )));
    }
    if report.passed() {
        return Ok(());
    }
    let mut why = Vec::new();
    if let Some(v) = &report.violation {
        why.push(format!("VIOLATION {v}"));
    }
    why.extend(report.hangs.iter().map(|h| format!("HANG {h}")));
    let sets: String = a.sets.iter().map(|s| format!(" --set {s}")).collect();
    let parts = match &a.parts {
        Some(_) => format!(" --parts {}", cfg.parts.join(",")),
        None => String::new(),
    };
    Err(CliError::StressFailed(format!(
        "{}\nrepeat with: pglocks stress --duration {} --threads {}{parts} --preset {}{sets} --seed {}",
        why.join("\n"),
        pglocks_sync::time::format_duration(cfg.duration),
        cfg.threads,
        a.preset,
        report.seed
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lists() {
        assert_eq!(parse_threads("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_threads("1..4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(
            parse_threads("1..64:x2").unwrap(),
            vec![1, 2, 4, 8, 16, 32, 64]
        );
        assert_eq!(parse_threads("2..8:+3,16").unwrap(), vec![2, 5, 8, 16]);
        for bad in [
            "0", "1,,2", "4..1", "1..8:x1", "a", "1..8:y2", "0..4:x2", "1..3:+0",
        ] {
            let e = parse_threads(bad).unwrap_err().to_string();
            assert!(e.contains("bad --threads"), "{bad}: {e}");
        }
    }

    /// Every command that runs for long takes `--no-progress`, the default run too; the default
    /// run's flags belong to it alone.
    #[test]
    fn long_commands_take_no_progress() {
        for args in [
            &["pglocks", "--no-progress"][..],
            &["pglocks", "--no-progress", "--show", "waits"],
            &["pglocks", "run", "spin", "--no-progress"],
            &["pglocks", "stress", "--no-progress"],
        ] {
            assert!(Cli::try_parse_from(args).is_ok(), "{args:?}");
        }
        assert!(Cli::try_parse_from(["pglocks", "--no-progress", "list"]).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("--duration", "500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            parse_duration("--duration", "2s").unwrap(),
            Duration::from_secs(2)
        );
        assert!(parse_duration("--duration", "2 parsecs").is_err());
    }
}
