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
mod isolation;
mod list;
mod parse;
mod reproduce;
mod run;
mod show;
pub mod simbuild;
mod stress;

use clap::{Parser, Subcommand};
use pglocks_harness::{self as harness, Format, HarnessError, Report};
use pglocks_workloads::plan::PlanError;
use pglocks_workloads::{self as workloads, WorkloadError};
use std::path::{Path, PathBuf};

pub use parse::{parse_duration, parse_threads, MAX_FLAG_DURATION};

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
    default_run: run::DefaultRunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a workload over thread counts and print throughput, latency and waits.
    Run(Box<run::RunArgs>),
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
    Stress(stress::StressArgs),
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
    /// A run that cannot be planned (see [`PlanError`]).
    #[error(transparent)]
    Plan(PlanError),
    /// The harness failed (topology, files, a workload's own error).
    #[error(transparent)]
    Harness(#[from] HarnessError),
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

impl From<PlanError> for CliError {
    /// A plan's errors, except that a simulated machine in a build without the simulator is
    /// [`CliError::NoSimulator`], which the `pglocks` binary answers by handing over.
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::NoSimulator => CliError::NoSimulator,
            e => CliError::Plan(e),
        }
    }
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

fn report(dir: &Path, format: &str, show: &show::ShowArgs) -> Result<(), CliError> {
    let format: Format = format.parse()?;
    let (r, files): (Report, _) = harness::rerender(dir)?;
    show::print(&r, format, show)?;
    eprintln!("re-rendered {}: {}", dir.display(), files.join(", "));
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
        None => run::demo(&cli.default_run),
        Some(Command::Run(a)) => run::run(&a),
        Some(Command::Compare(a)) => compare::compare(&a),
        Some(Command::List) => {
            list::print_list();
            Ok(())
        }
        Some(Command::Topology { pin, sysfs_root }) => {
            let pin = parse::pin_policy(&pin)?;
            let t = parse::detect(sysfs_root.as_deref())?;
            print!("{}", t.describe(pin));
            Ok(())
        }
        Some(Command::Reproduce(a)) => reproduce::reproduce(&a),
        Some(Command::Isolation { specs, preset }) => isolation::isolation(&specs, &preset),
        Some(Command::Report { dir, format, show }) => report(&dir, &format, &show),
        Some(Command::Stress(a)) => stress::stress(&a),
        Some(Command::Calibrate(a)) => calibrate::calibrate(&a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
