//! `pglocks stress`: every primitive and macro workload at once, with their invariant checks,
//! from one seed, on this machine or a simulated one; the summary table on stdout, and on a
//! violation or a hang the command line that repeats the run.

use super::parse::{list, parse_duration};
use super::CliError;
use clap::Args;
use pglocks_workloads::plan::Machine;
use pglocks_workloads::{self as workloads, Preset};
use std::time::Duration;

/// `pglocks stress`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct StressArgs {
    /// How long to run (host time, on a simulated machine too).
    #[arg(long, default_value = "60s")]
    duration: String,
    /// Threads in all, dealt out to the parts (at least one per part) [default: 64, or the
    /// simulated machine's CPUs].
    #[arg(long)]
    threads: Option<usize>,
    /// The machine: `real` (this one), or `sim:PROFILE`, a simulated many-core machine, in
    /// episodes of virtual time from the seed (see `pglocks list`).
    #[arg(long, default_value = "real")]
    machine: String,
    /// On a simulated machine, the virtual time of each episode.
    #[arg(long, default_value = "2ms")]
    episode: String,
    /// On a simulated machine, the mean virtual time between two preemptions of a thread, each
    /// at a random operation (0: none).
    #[arg(long, default_value = "5ms")]
    preempt_every: String,
    /// The parts to run, comma-separated (default: every one; an unknown name lists them).
    #[arg(long)]
    parts: Option<String>,
    /// The release whose models run.
    #[arg(long, default_value = workloads::DEFAULT_PRESET)]
    preset: String,
    /// The spinlock in place of every s_lock of the parts: `pg` (the release's), or a queued
    /// or NUMA-aware one (`qspinlock`, `cna`, `cohort`, `hmcs`, `shfl`).
    #[arg(long, default_value = "pg")]
    spinlock: String,
    /// The reader-writer lock in place of every LWLock of the parts: `pg` (the release's), 18's
    /// with shared holds by fetch-and-add (`fetch-add`, a prototype), or a NUMA-aware one
    /// (`cohort-rw`, `shfl-rw`).
    #[arg(long, default_value = "pg")]
    lwlock: String,
    /// Seed of every thread's random choices (default: from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Override one knob of the preset, `knob=value` (repeatable).
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    sets: Vec<String>,
    /// Report a thread that makes no progress for this long as hung (virtual time on a
    /// simulated machine).
    #[arg(long, default_value = "30s")]
    hang_after: String,
    /// No progress line on stderr (drawn only when stderr is a terminal; results go to stdout).
    #[arg(long)]
    no_progress: bool,
    /// Run one episode of a simulated run from `--seed` and print what it did as JSON: what a
    /// simulated run starts for each of its episodes.
    #[arg(long, hide = true)]
    one_episode: bool,
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
    let machine = Machine::parse(&a.machine)?;
    let simulated = match machine.profile() {
        Some(profile) => Some(st::Simulated {
            profile: std::sync::Arc::clone(profile),
            episode: nonzero("--episode", &a.episode)?,
            preempt_every: parse_duration("--preempt-every", &a.preempt_every)?,
        }),
        None => None,
    };
    let threads = a
        .threads
        .unwrap_or_else(|| machine.profile().map_or(DEFAULT_THREADS, |p| p.cpu_count()));
    let cfg = st::StressConfig {
        duration: parse_duration("--duration", &a.duration)?,
        threads,
        settings,
        seed,
        hang_after: parse_duration("--hang-after", &a.hang_after)?,
        parts: a.parts.as_deref().map(list).unwrap_or_default(),
        simulated,
        spinlock: a.spinlock.clone(),
        lwlock: a.lwlock.clone(),
    };
    let usage = |e: st::UsageError| CliError::Usage(e.to_string());
    let parts = cfg.validate().map_err(usage)?;
    let failed = |e| match e {
        StressError::Usage(e) => usage(e),
        StressError::Setup(e) => CliError::StressSetup(e),
    };
    if a.one_episode {
        let report = st::stress_episode(&cfg, cfg.seed).map_err(failed)?;
        println!("{}", episode_json(&report));
        return Ok(());
    }
    let names: Vec<_> = parts.iter().map(|p| p.name).collect();
    let on = match &cfg.simulated {
        Some(sim) => format!(
            " on {} ({} episodes, each thread preempted every {} on average)",
            a.machine,
            pglocks_sync::time::format_duration(sim.episode),
            pglocks_sync::time::format_duration(sim.preempt_every)
        ),
        None => String::new(),
    };
    let spinlock = match (cfg.spinlock.as_str(), cfg.lwlock.as_str()) {
        ("pg", "pg") => String::new(),
        ("pg", l) => format!(" with {l} for the LWLocks"),
        (s, _) => format!(" with {s} for s_lock"),
    };
    eprintln!(
        "pglocks stress: {} threads over {}, {} on {}{spinlock}{on}, seed {}",
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
    let mut progress = |p: &st::Progress| {
        if draw {
            eprint!(
                "\r{} s of {}, {} steps\x1b[K",
                p.elapsed.as_secs(),
                pglocks_sync::time::format_duration(p.duration),
                p.steps
            );
        }
    };
    let report = match &cfg.simulated {
        Some(_) => episodes(a, &cfg, &mut progress),
        None => st::stress_with_progress(&cfg, &mut progress).map_err(failed),
    };
    if draw {
        eprint!("\r\x1b[K");
    }
    let report = report?;
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
    if let Some(s) = &report.simulated {
        println!(
            "simulated: {} episodes, {:.3} ms of virtual time, {} shim operations, {} preemptions, in {:.1} s of host time",
            s.episodes,
            s.virtual_time.as_secs_f64() * 1e3,
            s.shim_ops,
            s.preemptions,
            report.elapsed.as_secs_f64()
        );
    }
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
    let mut sets: String = a.sets.iter().map(|s| format!(" --set {s}")).collect();
    if cfg.spinlock != "pg" {
        sets.push_str(&format!(" --spinlock {}", cfg.spinlock));
    }
    if cfg.lwlock != "pg" {
        sets.push_str(&format!(" --lwlock {}", cfg.lwlock));
    }
    let parts = match &a.parts {
        Some(_) => format!(" --parts {}", cfg.parts.join(",")),
        None => String::new(),
    };
    let (machine, seed) = match (&cfg.simulated, &report.simulated) {
        (Some(sim), Some(s)) => {
            let seed = s.failed_seed.unwrap_or(report.seed);
            why.push(format!(
                "in the episode of seed {seed}, at {:.1} µs of virtual time",
                s.failed_at.unwrap_or_default().as_secs_f64() * 1e6
            ));
            let machine = format!(
                " --machine {} --episode {} --preempt-every {} --hang-after {}",
                a.machine,
                pglocks_sync::time::format_duration(sim.episode),
                pglocks_sync::time::format_duration(sim.preempt_every),
                pglocks_sync::time::format_duration(cfg.hang_after)
            );
            (machine, seed)
        }
        _ => (String::new(), report.seed),
    };
    Err(CliError::StressFailed(format!(
        "{}\nrepeat with: pglocks stress{machine} --duration {} --threads {}{parts} --preset {}{sets} --seed {seed}",
        why.join("\n"),
        pglocks_sync::time::format_duration(cfg.duration),
        cfg.threads,
        a.preset,
    )))
}

/// A simulated run: its episodes one after the other, each in a process of its own (this
/// program with `--one-episode` and the episode's seed), until `--duration` of host time has
/// passed or one fails. An episode's figures depend on what the process allocated before it
/// (`workloads::stress::stress_episode`); started alike, with the same arguments but the seed,
/// each is what the same seed gives when the run is repeated with it.
fn episodes(
    a: &StressArgs,
    cfg: &workloads::stress::StressConfig,
    progress: &mut dyn FnMut(&workloads::stress::Progress),
) -> Result<workloads::stress::StressReport, CliError> {
    use workloads::stress as st;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("cannot find this executable: {e}")))?;
    st::run_episodes(cfg, progress, |seed| {
        let out = std::process::Command::new(&exe)
            .args(episode_args(a, cfg, seed))
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| CliError::Usage(format!("cannot start an episode: {e}")))?;
        match read_episode(&out.stdout) {
            Some(ep) if out.status.success() => Ok(ep),
            // A setup error or a usage error, already on stderr with its reason.
            _ if matches!(out.status.code(), Some(1 | 2)) => Err(CliError::StressFailed(format!(
                "the episode of seed {seed} could not run (above)"
            ))),
            _ => Ok(crashed(&out.status)),
        }
    })
}

/// The arguments of the process that runs one episode from `seed`: the run's settings, each
/// written as this program writes it, in a fixed order, and the seed with a fixed width, so
/// that the episode's process allocates alike whichever run starts it.
fn episode_args(a: &StressArgs, cfg: &workloads::stress::StressConfig, seed: u64) -> Vec<String> {
    let sim = cfg.simulated.as_ref().expect("a simulated run");
    let d = |d: Duration| pglocks_sync::time::format_duration(d).to_string();
    let mut args = vec![
        "stress".to_string(),
        "--one-episode".into(),
        "--no-progress".into(),
        "--machine".into(),
        a.machine.clone(),
        "--episode".into(),
        d(sim.episode),
        "--preempt-every".into(),
        d(sim.preempt_every),
        "--hang-after".into(),
        d(cfg.hang_after),
        "--threads".into(),
        format!("{:06}", cfg.threads),
        "--preset".into(),
        a.preset.clone(),
        "--spinlock".into(),
        cfg.spinlock.clone(),
        "--lwlock".into(),
        cfg.lwlock.clone(),
        "--seed".into(),
        format!("{seed:020}"),
    ];
    if !cfg.parts.is_empty() {
        args.extend(["--parts".into(), cfg.parts.join(",")]);
    }
    for set in &a.sets {
        args.extend(["--set".into(), set.clone()]);
    }
    args
}

/// One episode's report as its process prints it.
fn episode_json(r: &workloads::stress::StressReport) -> String {
    let sim = r.simulated.clone().unwrap_or_default();
    serde_json::json!({
        "parts": r.parts.iter().map(|p| serde_json::json!({
            "name": p.name, "threads": p.threads, "ops": p.ops, "checks": p.checks,
            "events": p.events, "events_name": p.events_name,
        })).collect::<Vec<_>>(),
        "violation": r.violation.as_ref().map(|v| serde_json::json!({
            "part": v.part, "message": v.message, "at_ns": v.at.map(|t| t.as_nanos() as u64),
        })),
        "hangs": r.hangs.iter().map(|h| serde_json::json!({
            "part": h.part, "thread": h.thread, "procno": h.procno,
            "idle_ns": h.idle.as_nanos() as u64, "waiting_for": h.waiting_for,
        })).collect::<Vec<_>>(),
        "interrupted": r.interrupted,
        "virtual_ns": sim.virtual_time.as_nanos() as u64,
        "shim_ops": sim.shim_ops,
        "preemptions": sim.preemptions,
        "failed_at_ns": sim.failed_at.map(|t| t.as_nanos() as u64),
    })
    .to_string()
}

/// The report of an episode whose process ended without one (it crashed).
fn crashed(status: &std::process::ExitStatus) -> workloads::stress::StressReport {
    use workloads::stress::{SimulatedReport, StressReport, Violation};
    StressReport {
        violation: Some(Violation {
            part: "simulation",
            message: format!("the episode's process ended without a report ({status})"),
            at: None,
        }),
        simulated: Some(SimulatedReport::default()),
        ..StressReport::default()
    }
}

/// Reads what `episode_json` wrote. Part names are the registry's; what a part's events count
/// and the violation's part are names too, kept for the rest of the run.
fn read_episode(stdout: &[u8]) -> Option<workloads::stress::StressReport> {
    use workloads::stress::{Hang, PartReport, SimulatedReport, StressReport, Violation};
    let v: serde_json::Value = serde_json::from_slice(stdout).ok()?;
    let name = |s: &str| -> &'static str {
        workloads::stress::PARTS
            .iter()
            .map(|p| p.name)
            .find(|n| *n == s)
            .unwrap_or_else(|| Box::leak(s.to_string().into_boxed_str()))
    };
    let u = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let ns = |v: &serde_json::Value| v.as_u64().map(Duration::from_nanos);
    let parts: Vec<PartReport> = v["parts"]
        .as_array()?
        .iter()
        .map(|p| PartReport {
            name: name(p["name"].as_str().unwrap_or("")),
            threads: u(&p["threads"]) as usize,
            ops: u(&p["ops"]),
            checks: u(&p["checks"]),
            events: u(&p["events"]),
            events_name: name(p["events_name"].as_str().unwrap_or("")),
        })
        .collect();
    let violation = v["violation"].as_object().map(|o| Violation {
        part: name(o["part"].as_str().unwrap_or("")),
        message: o["message"].as_str().unwrap_or("").to_string(),
        at: ns(&o["at_ns"]),
    });
    let hangs = v["hangs"]
        .as_array()?
        .iter()
        .map(|h| Hang {
            part: name(h["part"].as_str().unwrap_or("")),
            thread: u(&h["thread"]) as usize,
            procno: u(&h["procno"]) as usize,
            idle: ns(&h["idle_ns"]).unwrap_or_default(),
            waiting_for: h["waiting_for"].as_str().unwrap_or("").to_string(),
        })
        .collect();
    Some(StressReport {
        parts,
        violation,
        hangs,
        interrupted: v["interrupted"].as_bool().unwrap_or(false),
        simulated: Some(SimulatedReport {
            episodes: 1,
            virtual_time: ns(&v["virtual_ns"]).unwrap_or_default(),
            shim_ops: u(&v["shim_ops"]),
            preemptions: u(&v["preemptions"]),
            failed_seed: None,
            failed_at: ns(&v["failed_at_ns"]),
        }),
        ..StressReport::default()
    })
}

/// Threads of a run on this machine, unless `--threads` says otherwise.
const DEFAULT_THREADS: usize = 64;

/// `text` as a duration longer than 0, for flag `flag`.
fn nonzero(flag: &str, text: &str) -> Result<Duration, CliError> {
    let d = parse_duration(flag, text)?;
    if d.is_zero() {
        return Err(CliError::Usage(format!("{flag} must be longer than 0")));
    }
    Ok(d)
}
