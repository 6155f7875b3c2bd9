//! `pglocks stress`: every primitive and macro workload at once, with their invariant checks,
//! from one seed; the summary table on stdout, and on a violation or a hang the command line
//! that repeats the run.

use super::parse::{list, parse_duration};
use super::CliError;
use clap::Args;
use pglocks_workloads::{self as workloads, Preset};

/// `pglocks stress`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct StressArgs {
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
pub(crate) fn stress(a: &StressArgs) -> Result<(), CliError> {
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
