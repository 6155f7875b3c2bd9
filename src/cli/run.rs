//! `pglocks run` and the default run of a bare `pglocks`: each turns its flags into
//! [`RunRequest`]s, which the library plans and the harness sweeps.

use super::parse::detect;
use super::parse::{list, parse_optional_duration, parse_threads, pin_policy};
use super::{invocation, show, stamped_dir, CliError};
use clap::Args;
use pglocks_harness::{self as harness, Format};
use pglocks_workloads as workloads;
use pglocks_workloads::plan::{Machine, Plan, RunRequest};
use std::fmt::Write as _;
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
    /// The wall time the sweep may take (`60s`, `2m`): after --repeat runs a point, it runs
    /// more where a point's runs disagree (a 95 % confidence interval wider than ±5 %), widest
    /// first, up to 10 a point, while they fit [default: no budget, --repeat runs].
    #[arg(long)]
    budget: Option<String>,
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
    r.budget = parse_optional_duration("--budget", a.budget.as_deref())?;
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
    if let Some(warning) = harness::summary::unsettled_warning(&report) {
        eprintln!("{warning}");
    }
    if let Some(dir) = &a.out {
        let files = harness::save_report(&report, dir)?;
        eprintln!("report saved in {}: {}", dir.display(), files.join(", "));
    }
    interrupted(&report)
}

/// The default run's releases on `select-only` on a simulated many-core machine, for a machine
/// with too few CPUs to show their curves: run by the simulator's build into `dir/simulated/`,
/// printed as one row of throughputs per release, and linked from `dir/index.html`. What cannot
/// be run (no simulator's build can be had) is said in a line, and the run goes on.
fn simulated(dir: &std::path::Path, no_progress: bool) {
    use harness::format::wrap;
    use harness::render::BRIEF_WIDTH;
    let out = dir.join("simulated");
    let ran = super::simbuild::program()
        .map_err(|e| e.to_string())
        .and_then(|program| {
            let mut args = vec![
                "run".to_string(),
                "select-only".into(),
                "--preset".into(),
                DEFAULT_RUN_PRESETS.join(","),
                "--set".into(),
                "executor_work=pg15".into(),
                "--set".into(),
                "scale=8".into(),
                "--threads".into(),
                SIMULATED_THREADS.into(),
                "--machine".into(),
                format!("sim:{SIMULATED_PROFILE}"),
                "--format".into(),
                "json".into(),
                "--out".into(),
                out.display().to_string(),
            ];
            if no_progress {
                args.push("--no-progress".into());
            }
            let child = std::process::Command::new(&program)
                .args(&args)
                .stderr(std::process::Stdio::null())
                .output()
                .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
            if !child.status.success() {
                return Err(format!(
                    "{} exited with {}",
                    program.display(),
                    child.status
                ));
            }
            serde_json::from_slice::<harness::Report>(&child.stdout).map_err(|e| e.to_string())
        });
    let mut report = match ran {
        Ok(r) => r,
        Err(why) => {
            let text = format!("(no simulated curve: {why})");
            println!("{}", wrap(&text, BRIEF_WIDTH, "  "));
            return;
        }
    };
    for s in &mut report.series {
        s.preset = s.preset.replace("+executor_work=pg15", "");
    }
    let title = format!(
        "Simulated, not measured: the same on select-only (executor_work=pg15, scale 8) on \
         sim:{SIMULATED_PROFILE}, {} CPUs (the model and its limits: docs/simulator.md)",
        report.machine.cpus
    );
    println!("{}", wrap(&title, BRIEF_WIDTH, "  "));
    print!("{}", harness::render::curves(&report, false));
    println!(
        "{}",
        wrap(&format!("- {}", shape(&report)), BRIEF_WIDTH, "  ")
    );
    link_simulated(dir, &report, &title);
}

/// The simulated curves in a sentence: each release against the one before at the largest
/// count, and where each that falls peaks.
fn shape(report: &harness::Report) -> String {
    let curves: Vec<(&str, Vec<(usize, f64)>)> = report
        .series
        .iter()
        .map(|s| {
            let c = s
                .points
                .iter()
                .map(|p| (p.threads, p.ops_per_sec))
                .collect();
            (s.preset.as_str(), c)
        })
        .collect();
    let top = |c: &[(usize, f64)]| c.last().copied().unwrap_or((0, 0.0));
    let mut said = Vec::new();
    for pair in curves.windows(2) {
        let ((a, ca), (b, cb)) = (&pair[0], &pair[1]);
        let (t, x) = top(ca);
        let ratio = top(cb).1 / x.max(f64::MIN_POSITIVE);
        said.push(if said.is_empty() {
            format!("at {t} threads {b} does {ratio:.2}\u{d7} {a}'s ops/s")
        } else {
            format!("{b} {ratio:.2}\u{d7} {a}'s")
        });
    }
    let mut text = said.join(", ");
    for (name, c) in &curves {
        let peak = c.iter().copied().max_by(|x, y| x.1.total_cmp(&y.1));
        if let Some((t, x)) = peak.filter(|p| p.0 < top(c).0) {
            let _ = write!(
                text,
                "; {name} peaks at {t} threads and ends at {:.2}\u{d7} that",
                top(c).1 / x.max(f64::MIN_POSITIVE)
            );
        }
    }
    text + "."
}

/// Adds the simulated curve's chart, and a link to its report, to the default run's page.
fn link_simulated(dir: &std::path::Path, report: &harness::Report, title: &str) {
    use harness::html::esc;
    let page = dir.join(harness::files::HTML);
    let Ok(html) = std::fs::read_to_string(&page) else {
        return;
    };
    let chart = harness::plot::ChartKind::Throughput.file_name(&report.config.workload);
    let section = format!(
        "<h2>Simulated</h2>\n<p>{}</p>\n<p><a href=\"simulated/index.html\"><img \
         src=\"simulated/{}\" alt=\"simulated throughput\"></a></p>\n",
        esc(title),
        esc(&chart)
    );
    let html = match html.rfind("</body>") {
        Some(at) => format!("{}{section}{}", &html[..at], &html[at..]),
        None => html + &section,
    };
    let _ = std::fs::write(page, html);
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

/// Below this many CPUs the default run adds its releases' curve on a simulated machine.
const MANY_CPUS: usize = 16;
/// The simulated machine of that curve: the 80-core, 8-socket Westmere-EX, whose latency table
/// is sourced (docs/simulator.md), a server of the kind the published pgbench -S curves of 9.1
/// and 9.2 were drawn on.
const SIMULATED_PROFILE: &str = "westmere-80";
/// Its thread counts.
const SIMULATED_THREADS: &str = "1,8,16,32,64";

/// The presets the default run compares: before and after the 9.2 scalability work, and today.
const DEFAULT_RUN_PRESETS: [&str; 3] = ["pg91", "pg92", "pg18"];
/// The wall time of its sweep on this machine: three 400-ms runs of each point (on 2 CPUs about
/// 40 s, set-up included), then more where they disagree.
const DEFAULT_RUN_BUDGET: Duration = Duration::from_secs(50);
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
        r.duration = Some(Duration::from_millis(400));
        r.warmup = Some(Duration::from_millis(150));
        r.repeat = Some(3);
        r.budget = Some(DEFAULT_RUN_BUDGET);
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
    if let Some(warning) = harness::summary::unsettled_warning(&report) {
        println!("{}", wrap(&warning, BRIEF_WIDTH, "  "));
    }
    println!();
    if topology.logical_cpus() < MANY_CPUS && !report.interrupted {
        simulated(&dir, args.no_progress);
    }
    println!(
        "wall time {:.1} s. The report, with charts, wait events and metrics:\n  {}/index.html",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    if !args.show.any() {
        println!("All tables: {} report {} -v", invocation(), dir.display());
    }
    interrupted(&report)
}
