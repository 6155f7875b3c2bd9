//! `pglocks run` and the default run of a bare `pglocks`: each turns its flags into
//! [`RunRequest`]s, which the library plans and the harness sweeps.

use super::parse::detect;
use super::parse::{list, parse_optional_duration, parse_threads, pin_policy};
use super::{invocation, show, stamped_dir, CliError};
use clap::Args;
use pglocks_harness::{self as harness, Format};
use pglocks_workloads as workloads;
use pglocks_workloads::plan::{Machine, Plan, RunRequest};
use std::path::PathBuf;
use std::time::Duration;

/// The flags of the default run (no command).
#[derive(Debug, Args)]
pub(crate) struct DefaultRunArgs {
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    #[command(flatten)]
    show: show::ShowArgs,
}

/// `pglocks run`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
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
    /// Measured time per run (`2s`, `500ms`) [default: 2s; under `sim`, 20ms of virtual time
    /// or longer: see --until-ops].
    #[arg(long)]
    duration: Option<String>,
    /// Unmeasured time before each run [default: 500ms; under `sim`, 5ms of virtual time or
    /// longer: see --until-ops].
    #[arg(long)]
    warmup: Option<String>,
    /// The machine: `real` (this one), or `sim:PROFILE`, a simulated many-core machine (see
    /// `pglocks list` for the profiles), on which durations are virtual time; values of the
    /// profile may follow its name, `sim:westmere-80+cycles.fence*2+model.seed=7`.
    #[arg(long, default_value = "real")]
    machine: String,
    /// Runs per point; the median is reported and all are kept [default: 3; 1 under `sim`,
    /// whose runs repeat exactly].
    #[arg(long)]
    repeat: Option<u32>,
    /// Under `sim`: each run's measured phase goes on past --duration until the team has
    /// completed this many operations (its warm-up a quarter as many), up to 1 s of virtual
    /// time; 0 runs exactly --duration [default: 4000].
    #[arg(long)]
    until_ops: Option<u64>,
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

/// The request `pglocks run`'s flags make.
fn request(a: &RunArgs) -> Result<RunRequest, CliError> {
    let mut r = RunRequest::new(&a.workload);
    r.presets = list(&a.preset);
    r.impls = list(&a.impls);
    r.sets = a.sets.clone();
    r.flush_latency = a.flush_latency.clone();
    r.threads = parse_threads(&a.threads)?;
    r.duration = parse_optional_duration("--duration", a.duration.as_deref())?;
    r.warmup = parse_optional_duration("--warmup", a.warmup.as_deref())?;
    r.repeat = a.repeat;
    r.until_ops = a.until_ops;
    r.machine = Machine::parse(&a.machine)?;
    r.pin = pin_policy(&a.pin)?;
    r.sysfs_root = a.sysfs_root.clone();
    r.sample_every = a.sample_every;
    r.progress = !a.no_progress;
    Ok(r)
}

/// `pglocks run`: plans, sweeps, prints and (with `--out`) saves the report.
pub(crate) fn run(a: &RunArgs) -> Result<(), CliError> {
    let format: Format = a.format.parse()?;
    let report = request(a)?.plan()?.run()?;
    show::print(&report, format, &a.show)?;
    if let Some(dir) = &a.out {
        let files = harness::save_report(&report, dir)?;
        eprintln!("report saved in {}: {}", dir.display(), files.join(", "));
    }
    interrupted(&report)
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

/// The presets the default run compares: before and after the 9.2 scalability work, and today.
const DEFAULT_RUN_PRESETS: [&str; 3] = ["pg91", "pg92", "pg18"];
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
pub(crate) fn demo(args: &DefaultRunArgs) -> Result<(), CliError> {
    use harness::format::wrap;
    use harness::render::BRIEF_WIDTH;
    let topology = detect(None)?;
    let max_threads = 2 * topology.logical_cpus().max(1);
    let scale = max_threads.clamp(1, 8);
    let mut plans = Vec::new();
    for workload in DEFAULT_RUN_WORKLOADS {
        let mut r = RunRequest::new(workload);
        r.presets = DEFAULT_RUN_PRESETS.map(String::from).to_vec();
        r.threads = std::iter::successors(Some(1), |t| Some(t * 2))
            .take_while(|&t| t <= max_threads)
            .collect();
        r.duration = Some(Duration::from_millis(700));
        r.warmup = Some(Duration::from_millis(200));
        r.repeat = Some(3);
        r.progress = !args.no_progress;
        r.sets = vec![format!("scale={scale}")];
        if workload == "tpcb-like" {
            r.sets.push("synchronous_commit=off".into());
        }
        plans.push(r.plan()?);
    }
    let plan = Plan::join(plans).expect("the default run has workloads");
    let threads: Vec<String> = plan.sweep.threads.iter().map(usize::to_string).collect();
    eprintln!(
        "{}",
        wrap(
            &format!(
                "pglocks: {} on {} (scale {scale}; tpcb-like with synchronous_commit=off) at \
                 {} threads, about {} s",
                DEFAULT_RUN_PRESETS.join(", "),
                DEFAULT_RUN_WORKLOADS.join(" and "),
                threads.join(", "),
                plan.duration().as_secs(),
            ),
            BRIEF_WIDTH,
            "  "
        )
    );
    let started = std::time::Instant::now();
    let report = plan.run()?;
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
