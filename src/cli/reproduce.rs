//! `pglocks reproduce`: every published claim the project models, run on this machine or a
//! simulated one, each with a verdict.
//!
//! The claims are data (`claims.toml`, compiled in): the sentence, the release, the published
//! figure with its machine and source, the `pglocks run` that measures it, and the checks that
//! carry the figure. Each claim's run is an ordinary sweep, saved as an ordinary report
//! directory (`OUT/<claim>/`); the checks read that report.
//!
//! **From figure to verdict.** One rule, fixed before any run ([`rule`]), grades a curve
//! against the published figure: *reproduced* (the published size, or where nothing numeric
//! was published the direction), *direction only* (the published sign, not the size), *not
//! reproduced*. The claim is graded once per *draw*: each run of a real sweep (its point's
//! runs, in the order they interleaved), each seed of a simulated one (the profile as it is, and
//! [`SEEDS`] more draws of its jitter and of the shared-memory map's layout). The verdict is
//! then, in this order:
//! - *not run* when the claim cannot run on the machine asked for;
//! - *no profile for the published machine* when the figure was published on a kind of machine
//!   no profile models (IBM POWER): measured, never judged;
//! - *not decidable here* when the machine has fewer CPUs than the claim says the effect needs,
//!   whatever the checks say (the figure is still given);
//! - *unstable* when the draws do not all give the same grade: the effect is within the runs'
//!   or the seeds' spread;
//! - otherwise the grade every draw gave.
//!
//! `OUT/index.html` opens with the summary table; `OUT/report.json` holds the same for programs.

mod rule;
mod sensitivity;

use super::parse::{detect, parse_threads};
use super::{stamped_dir, CliError};
use pglocks_harness::html::esc;
use pglocks_harness::plot::ChartKind;
use pglocks_harness::{self as harness, Report};
use pglocks_workloads::plan::{Machine, RunRequest};
use rule::{Check, Grade, Measured};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The claims, as compiled in.
const CLAIMS: &str = include_str!("claims.toml");

/// The seeds a simulated claim runs with besides its profile's own: each a draw of the
/// transfers' jitter (`model.seed`) and of the shared-memory map's layout (`model.layout`).
const SEEDS: [u64; 2] = [1, 2];

/// `pglocks reproduce`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ReproduceArgs {
    /// Claims to run (default: all; see `pglocks reproduce --list`).
    claims: Vec<String>,
    /// The machine: `real` (this one) or `sim:PROFILE`.
    #[arg(long, default_value = "real")]
    machine: String,
    /// Fewer thread counts and shorter runs: the whole set in a few minutes.
    #[arg(long)]
    quick: bool,
    /// Where to write the reports [default: target/pglocks/reproduce-<machine>-<time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// List the claims and exit.
    #[arg(long)]
    list: bool,
    /// No progress bars.
    #[arg(long)]
    no_progress: bool,
    /// On a simulated machine: run each claim again with every unsourced value of the profile
    /// halved and doubled, the hold window off, and eight joint draws, and say which verdicts
    /// flip (under every seed): `sensitivity.md` in the output directory.
    #[arg(long)]
    sensitivity: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Claims {
    claim: Vec<Claim>,
}

/// One published claim and how it is measured.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Claim {
    id: String,
    release: String,
    title: String,
    claim: String,
    /// What was published, in its own words where it had numbers.
    published: String,
    /// The machine it was published on.
    machine: String,
    /// Whether a simulator profile models that kind of machine (false: IBM POWER, which no
    /// profile does; the claim is then measured and never judged).
    #[serde(default = "yes")]
    modelled: bool,
    /// The simulator profile that models the machine it was published on (or, when none does,
    /// the nearest), for a figure that is about the machine's shape (a NUMA lock's gain over
    /// its sockets): a simulated reproduction runs the claim there, whichever profile
    /// `--machine` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    profile: Option<String>,
    source: String,
    needs_cpus: usize,
    /// Choices of the run or the checks made after looking at a run, each with its mechanism.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fitted: Vec<String>,
    checks: Vec<Check>,
    run: RunSpec,
}

fn yes() -> bool {
    true
}

/// The `pglocks run` of a claim.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RunSpec {
    workload: String,
    presets: String,
    #[serde(default = "pg")]
    impls: String,
    #[serde(default)]
    sets: Vec<String>,
    /// `--set`s for `--quick` in place of `sets`, if they differ (a smaller transaction).
    #[serde(default)]
    quick_sets: Option<Vec<String>>,
    threads: String,
    quick_threads: String,
    /// The pinning (`compact` unless given), where the published run spread its threads over
    /// the sockets otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pin: Option<String>,
}

fn pg() -> String {
    "pg".into()
}

/// What came out of one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    Reproduced,
    DirectionOnly,
    NotReproduced,
    Unstable,
    NotDecidable,
    NoProfile,
    NotRun,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::DirectionOnly => "direction only",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Unstable => "unstable",
            Verdict::NotDecidable => "not decidable here",
            Verdict::NoProfile => "no profile for the published machine",
            Verdict::NotRun => "not run",
        }
    }
}

impl From<Grade> for Verdict {
    fn from(g: Grade) -> Verdict {
        match g {
            Grade::Reproduced => Verdict::Reproduced,
            Grade::DirectionOnly => Verdict::DirectionOnly,
            Grade::NotReproduced => Verdict::NotReproduced,
        }
    }
}

/// One claim's row of the summary.
#[derive(Debug, Serialize)]
struct Outcome {
    #[serde(flatten)]
    claim: Claim,
    /// The command that re-makes the claim's figures (its first draw's).
    command: String,
    verdict: Verdict,
    /// Each check's rule, in words.
    rules: Vec<String>,
    /// Each draw's grade (a run's, or a seed's), in order.
    grades: Vec<Grade>,
    /// The checks' figures: "pg92 / pg91 = 1.09× at 32 threads (1.05–1.12 over 3 seeds)".
    measured: String,
    /// Why the verdict is not the grade, when there is more to say than the figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// The claim's report directory (its first draw's), relative to the output directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    dir: Option<String>,
    /// The simulated machine it ran on, when that is its own `profile`, not the one asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    ran_on: Option<String>,
}

/// The whole run, as `report.json` holds it.
#[derive(Debug, Serialize)]
struct Summary {
    pglocks_version: String,
    machine: String,
    cpus: usize,
    quick: bool,
    /// What a draw is here: `runs` (a real sweep's) or `seeds` (a simulated one's).
    draws: String,
    host_seconds: f64,
    claims: Vec<Outcome>,
}

fn claims() -> Result<Vec<Claim>, CliError> {
    let parsed: Claims = toml::from_str(CLAIMS)
        .map_err(|e| CliError::Usage(format!("the compiled-in claims do not parse: {e}")))?;
    for c in &parsed.claim {
        if let Some(why) = c.checks.iter().find_map(Check::invalid) {
            return Err(CliError::Usage(format!("claim {}: {why}", c.id)));
        }
        if let Some(p) = &c.profile {
            pglocks_sim::Profile::find(p)
                .map_err(|e| CliError::Usage(format!("claim {}: {e}", c.id)))?;
        }
        if let Some(pin) = &c.run.pin {
            pin.parse::<harness::PinPolicy>()
                .map_err(|e| CliError::Usage(format!("claim {}: {e}", c.id)))?;
        }
    }
    Ok(parsed.claim)
}

/// The machine `claim` runs on, and its CPUs, in a reproduction on `machine` of `cpus` CPUs:
/// that machine, unless it is simulated and the claim names its published machine's profile.
fn claim_machine(
    claim: &Claim,
    machine: &Machine,
    cpus: usize,
) -> Result<(Machine, usize), CliError> {
    match (machine, &claim.profile) {
        (Machine::Simulated(p), Some(own)) if &p.name != own => {
            let m = Machine::parse(&format!("sim:{own}"))?;
            let cpus = m.profile().map_or(cpus, |p| p.cpu_count());
            Ok((m, cpus))
        }
        _ => Ok((machine.clone(), cpus)),
    }
}

/// The claims `names` pick (all if none), in the file's order.
fn pick(all: Vec<Claim>, names: &[String]) -> Result<Vec<Claim>, CliError> {
    if let Some(bad) = names.iter().find(|n| !all.iter().any(|c| &c.id == *n)) {
        let ids: Vec<&str> = all.iter().map(|c| c.id.as_str()).collect();
        return Err(CliError::Usage(format!(
            "no claim '{bad}' (claims: {})",
            ids.join(", ")
        )));
    }
    Ok(all
        .into_iter()
        .filter(|c| names.is_empty() || names.contains(&c.id))
        .collect())
}

/// The run of `claim` for this reproduction, on `machine` (of `cpus` CPUs).
fn request(
    claim: &Claim,
    a: &ReproduceArgs,
    machine: &Machine,
    cpus: usize,
) -> Result<RunRequest, CliError> {
    let r = &claim.run;
    let mut threads = parse_threads(if a.quick {
        &r.quick_threads
    } else {
        &r.threads
    })?;
    if !a.quick {
        let most = (4 * cpus).max(8);
        threads.retain(|&t| t <= most);
    }
    let mut req = RunRequest::new(&r.workload);
    req.presets = super::parse::list(&r.presets);
    req.impls = super::parse::list(&r.impls);
    req.sets = match (&r.quick_sets, a.quick) {
        (Some(q), true) => q.clone(),
        _ => r.sets.clone(),
    };
    req.threads = threads;
    req.machine = machine.clone();
    if let Some(pin) = &r.pin {
        req.pin = pin
            .parse()
            .map_err(|e: harness::topology::TopologyError| CliError::Usage(e.to_string()))?;
    }
    // A simulated machine's runs take its defaults (virtual time, one run: they repeat).
    let ms = Duration::from_millis;
    let times = match (machine, a.quick) {
        (Machine::Simulated(_), _) => None,
        (Machine::Real, true) => Some((ms(150), ms(50), 3)),
        (Machine::Real, false) => Some((ms(1000), ms(200), 3)),
    };
    if let Some((duration, warmup, repeat)) = times {
        req.duration = Some(duration);
        req.warmup = Some(warmup);
        req.repeat = Some(repeat);
    }
    req.progress = !a.no_progress;
    Ok(req)
}

/// The `pglocks run` command line that `r` stands for.
fn command_line(r: &RunRequest) -> String {
    let threads: Vec<String> = r.threads.iter().map(usize::to_string).collect();
    let mut c = format!(
        "pglocks run {} --preset {} --threads {}",
        r.workload,
        r.presets.join(","),
        threads.join(",")
    );
    if r.impls != ["pg"] {
        let _ = write!(c, " --impl {}", r.impls.join(","));
    }
    for s in &r.sets {
        let _ = write!(c, " --set {s}");
    }
    if let Machine::Simulated(_) = r.machine {
        let _ = write!(c, " --machine {}", r.machine.name());
    }
    if r.pin != harness::PinPolicy::Compact {
        let _ = write!(c, " --pin {}", r.pin);
    }
    for (flag, v) in [("duration", r.duration), ("warmup", r.warmup)] {
        if let Some(v) = v {
            let _ = write!(c, " --{flag} {}", pglocks_sync::time::format_duration(v));
        }
    }
    if let Some(n) = r.repeat {
        let _ = write!(c, " --repeat {n}");
    }
    if let Some(n) = r.until_ops {
        let _ = write!(c, " --until-ops {n}");
    }
    c
}

/// A series of `report` by its label: the preset label, and `/impl` if given.
fn series<'r>(report: &'r Report, label: &str) -> Option<&'r harness::report::Series> {
    let (preset, imp) = match label.split_once('/') {
        Some((p, i)) => (p, Some(i)),
        None => (label, None),
    };
    report
        .series
        .iter()
        .find(|s| s.preset == preset && imp.map_or(true, |i| s.impl_name == i))
}

/// A series' curve: (threads, ops/s) in thread order.
type Curve = Vec<(usize, f64)>;

/// The curve of `label` in `report`.
fn curve(report: &Report, label: &str) -> Option<Curve> {
    series(report, label).map(|s| {
        s.points
            .iter()
            .map(|p| (p.threads, p.ops_per_sec))
            .collect()
    })
}

/// One draw of a claim's curves: a report's medians (a simulated seed's), or one run of a
/// real sweep's points.
#[derive(Clone, Copy)]
struct Draw<'r> {
    report: &'r Report,
    run: Option<usize>,
}

impl Draw<'_> {
    /// The curve of `label` in this draw.
    fn curve(&self, label: &str) -> Option<Curve> {
        let Some(k) = self.run else {
            return curve(self.report, label);
        };
        series(self.report, label).map(|s| {
            s.points
                .iter()
                .filter_map(|p| p.runs_ops_per_sec.get(k).map(|&x| (p.threads, x)))
                .collect()
        })
    }
}

/// Grades `claim` on each of `draws`: per check, the figure of every draw.
fn grade_draws(claim: &Claim, draws: &[Draw<'_>]) -> Result<Vec<Vec<Measured>>, String> {
    claim
        .checks
        .iter()
        .map(|c| draws.iter().map(|d| c.grade(|l| d.curve(l))).collect())
        .collect()
}

/// The verdict of `claim` from its checks' figures over the draws, on a machine of `cpus` CPUs.
fn verdict(
    claim: &Claim,
    by_check: &[Vec<Measured>],
    cpus: usize,
) -> (Verdict, Vec<Grade>, Option<String>) {
    let draws = by_check.first().map_or(0, Vec::len);
    let grades: Vec<Grade> = (0..draws)
        .map(|d| {
            by_check
                .iter()
                .map(|m| m[d].grade)
                .min()
                .unwrap_or(Grade::NotReproduced)
        })
        .collect();
    let labels: Vec<&str> = grades.iter().map(|g| g.label()).collect();
    if !claim.modelled {
        let why = format!(
            "published on {}, a kind of machine no profile models: measured, never judged",
            claim.machine
        );
        return (Verdict::NoProfile, grades, Some(why));
    }
    if cpus < claim.needs_cpus {
        let why = format!(
            "the effect needs {} CPUs or more; this machine has {cpus} (its draws graded it {})",
            claim.needs_cpus,
            labels.join(", ")
        );
        return (Verdict::NotDecidable, grades, Some(why));
    }
    match grades.split_first() {
        Some((first, rest)) if rest.iter().all(|g| g == first) => ((*first).into(), grades, None),
        Some(_) => {
            let why = format!("the draws disagree: {}", labels.join(", "));
            (Verdict::Unstable, grades, Some(why))
        }
        None => (Verdict::NotRun, grades, Some("no draw ran".into())),
    }
}

/// Runs `claim` on `machine` (each seed, if it is simulated) and saves its first draw's report
/// under `out`.
fn reproduce_one(
    claim: &Claim,
    a: &ReproduceArgs,
    machine: &Machine,
    cpus: usize,
    out: &Path,
) -> Result<Outcome, CliError> {
    let first = request(claim, a, machine, cpus)?;
    let command = command_line(&first);
    let outcome = |verdict, rules, grades, measured: String, reason, dir| Outcome {
        claim: claim.clone(),
        command: command.clone(),
        verdict,
        rules,
        grades,
        measured,
        reason,
        dir,
        ran_on: None,
    };
    let rules: Vec<String> = claim.checks.iter().map(Check::rule).collect();
    let report = first.plan()?.run()?;
    let dir = out.join(&claim.id);
    harness::save_report(&report, &dir)?;
    write_in(
        &dir,
        "curves.md",
        &harness::render::curves_markdown(&report),
    )?;
    // The draws: the other seeds' reports, or this report's runs.
    let mut reports = vec![report];
    if let Machine::Simulated(profile) = machine {
        for seed in SEEDS {
            let seeded = Machine::parse(&format!(
                "sim:{}+model.seed={seed}+model.layout={seed}",
                profile.name
            ))?;
            let mut req = request(claim, a, &seeded, cpus)?;
            req.progress = false;
            reports.push(req.plan()?.run()?);
        }
    }
    let runs = reports[0]
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.runs_ops_per_sec.len()))
        .min()
        .unwrap_or(1);
    let draws: Vec<Draw<'_>> = if reports.len() > 1 {
        reports
            .iter()
            .map(|report| Draw { report, run: None })
            .collect()
    } else {
        (0..runs.max(1))
            .map(|k| Draw {
                report: &reports[0],
                run: Some(k),
            })
            .collect()
    };
    let kind = if reports.len() > 1 { "seeds" } else { "runs" };
    // The headline figure: the medians' (a real sweep), the profile's own seed's (simulated).
    let head = Draw {
        report: &reports[0],
        run: None,
    };
    let graded = grade_draws(claim, &draws).and_then(|by| Ok((grade_draws(claim, &[head])?, by)));
    let (heads, by_check) = match graded {
        Ok(g) => g,
        Err(why) => {
            let dir = Some(claim.id.clone());
            return Ok(outcome(
                Verdict::NotRun,
                rules,
                vec![],
                String::new(),
                Some(why),
                dir,
            ));
        }
    };
    let measured: Vec<String> = claim
        .checks
        .iter()
        .zip(heads.iter().zip(&by_check))
        .map(|(c, (head, all))| c.figure(&head[0], all, kind))
        .collect();
    let (verdict, grades, reason) = verdict(claim, &by_check, cpus);
    Ok(outcome(
        verdict,
        rules,
        grades,
        measured.join("; "),
        reason,
        Some(claim.id.clone()),
    ))
}

/// `pglocks reproduce`.
pub(crate) fn reproduce(a: &ReproduceArgs) -> Result<(), CliError> {
    let all = pick(claims()?, &a.claims)?;
    if a.list {
        for c in &all {
            println!("{:<22} {:<15} {}", c.id, c.release, c.title);
            for rule in c.checks.iter().map(Check::rule) {
                println!("{:<38} {rule}", "");
            }
        }
        return Ok(());
    }
    let machine = Machine::parse(&a.machine)?;
    let (cpus, machine_name) = match &machine {
        Machine::Simulated(p) => (p.cpu_count(), format!("simulated {}", p.name)),
        Machine::Real => (detect(None)?.logical_cpus(), "this machine".to_string()),
    };
    let out = match &a.out {
        Some(d) => d.clone(),
        None => stamped_dir(&format!("reproduce-{}", a.machine.replace(':', "-"))),
    };
    std::fs::create_dir_all(&out).map_err(|error| CliError::Io {
        path: out.display().to_string(),
        error,
    })?;
    if a.sensitivity {
        return sensitivity::run(a, &out);
    }
    let started = std::time::Instant::now();
    let mut outcomes = Vec::with_capacity(all.len());
    for (k, claim) in all.iter().enumerate() {
        eprintln!(
            "[{}/{}] {} ({}): {}",
            k + 1,
            all.len(),
            claim.id,
            claim.release,
            claim.title
        );
        let (on, cpus) = claim_machine(claim, &machine, cpus)?;
        let mut o = reproduce_one(claim, a, &on, cpus, &out)?;
        if on.name() != machine.name() {
            o.ran_on = Some(on.name());
        }
        eprintln!("        {}: {}", o.verdict.label(), o.measured);
        outcomes.push(o);
    }
    let summary = Summary {
        pglocks_version: env!("CARGO_PKG_VERSION").into(),
        machine: format!("{machine_name}, {cpus} CPUs"),
        cpus,
        quick: a.quick,
        draws: match machine {
            Machine::Simulated(_) => format!("{} seeds", SEEDS.len() + 1),
            Machine::Real => "runs".into(),
        },
        host_seconds: started.elapsed().as_secs_f64(),
        claims: outcomes,
    };
    let table = markdown(&summary);
    print!("{table}");
    let json = serde_json::to_string_pretty(&summary)
        .map_err(|e| CliError::Usage(format!("cannot write the summary: {e}")))?;
    write_in(&out, "report.json", &json)?;
    write_in(&out, "summary.md", &table)?;
    write_in(&out, "index.html", &html(&summary))?;
    println!(
        "\nhost time {:.0} s. The reports: {}/index.html",
        summary.host_seconds,
        out.display()
    );
    Ok(())
}

/// Writes `text` to the file `name` in the output directory `out`.
fn write_in(out: &Path, name: &str, text: &str) -> Result<(), CliError> {
    let path = out.join(name);
    std::fs::write(&path, text).map_err(|error| CliError::Io {
        path: path.display().to_string(),
        error,
    })
}

/// The summary table, in Markdown.
fn markdown(s: &Summary) -> String {
    let mut t = format!(
        "pglocks reproduce{} on {}, each claim graded on every one of its {}\n\n\
         | claim | release | verdict | measured |\n|---|---|---|---|\n",
        if s.quick { " --quick" } else { "" },
        s.machine,
        s.draws
    );
    for o in &s.claims {
        let mut measured = o.measured.clone();
        if let Some(r) = &o.reason {
            if !measured.is_empty() {
                measured.push_str("; ");
            }
            measured.push_str(r);
        }
        let id = match &o.ran_on {
            Some(m) => format!("{} (on {m})", o.claim.id),
            None => o.claim.id.clone(),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} |",
            id,
            o.claim.release,
            o.verdict.label(),
            measured.replace('|', "\\|")
        );
    }
    t
}

/// `index.html`: the summary table, then each claim with its published figure beside the
/// measured one and its throughput chart.
fn html(s: &Summary) -> String {
    let mut h = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>pglocks reproduce</title>\
         <style>body{font-family:sans-serif;max-width:72em;margin:2em auto}\
         td,th{border:1px solid #ccc;padding:.3em .6em;vertical-align:top}\
         table{border-collapse:collapse}img{max-width:100%}</style></head><body>\n",
    );
    let _ = writeln!(
        h,
        "<h1>pglocks reproduce{}</h1>\n<p>{}; {:.0} s of host time.</p>",
        if s.quick { " --quick" } else { "" },
        esc(&s.machine),
        s.host_seconds
    );
    h.push_str("<table><tr><th>claim</th><th>release</th><th>verdict</th><th>measured</th></tr>\n");
    for o in &s.claims {
        let _ = writeln!(
            h,
            "<tr><td><a href=\"#{id}\">{id}</a></td><td>{}</td><td>{}</td><td>{}{}</td></tr>",
            esc(&o.claim.release),
            o.verdict.label(),
            esc(&o.measured),
            o.reason
                .as_deref()
                .map(|r| format!(" ({})", esc(r)))
                .unwrap_or_default(),
            id = esc(&o.claim.id),
        );
    }
    h.push_str("</table>\n");
    for o in &s.claims {
        let c = &o.claim;
        let _ = writeln!(
            h,
            "<h2 id=\"{}\">{} ({})</h2>\n<p>{}</p>\n<table><tr><th>published</th><th>rule</th><th>measured</th></tr>\
             <tr><td>{}<br><small>{}; {}</small></td><td>{}</td><td>{}: {}{}</td></tr></table>\n<p><code>{}</code></p>",
            esc(&c.id),
            esc(&c.title),
            esc(&c.release),
            esc(&c.claim),
            esc(&c.published),
            esc(&c.machine),
            esc(&c.source),
            o.rules.iter().map(|r| esc(r)).collect::<Vec<_>>().join("<br>"),
            o.verdict.label(),
            esc(&o.measured),
            o.reason
                .as_deref()
                .map(|r| format!(" ({})", esc(r)))
                .unwrap_or_default(),
            esc(&o.command),
        );
        for f in &c.fitted {
            let _ = writeln!(h, "<p><small>Chosen after a run: {}</small></p>", esc(f));
        }
        if let Some(dir) = &o.dir {
            let chart = ChartKind::Throughput.file_name(&c.run.workload);
            let _ = writeln!(
                h,
                "<p><a href=\"{d}/index.html\"><img src=\"{d}/{}\" alt=\"throughput\"></a></p>",
                esc(&chart),
                d = esc(dir)
            );
        }
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_claim_parses_names_a_workload_and_checks_series_it_runs() {
        let all = claims().unwrap();
        assert!(all.len() >= 12);
        let mut ids: Vec<&str> = all.iter().map(|c| c.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "two claims share an id");
        for c in &all {
            let w = pglocks_workloads::workload(&c.run.workload).unwrap();
            let presets: Vec<&str> = c.run.presets.split(',').collect();
            assert!(!c.checks.is_empty(), "{}: no check", c.id);
            for check in &c.checks {
                assert_eq!(check.invalid(), None, "{}", c.id);
            }
            for s in c.checks.iter().flat_map(Check::series) {
                // The label is a preset of the run; a macro workload's run adds its executor work.
                let preset = s.split('/').next().unwrap();
                let preset = preset.split("+executor_work=").next().unwrap();
                assert!(presets.contains(&preset), "{}: {s} is not run", c.id);
            }
            parse_threads(&c.run.threads).unwrap();
            parse_threads(&c.run.quick_threads).unwrap();
            for name in c.run.impls.split(',') {
                assert!(w.implementation(name).is_ok(), "{}: no impl {name}", c.id);
            }
        }
    }

    /// A claim with one ratio check of a published +50 %, graded on draws of the given ratios.
    fn graded(ratios: &[f64], needs_cpus: usize, cpus: usize) -> (Verdict, Vec<Grade>) {
        let mut claim = claims().unwrap().remove(0);
        claim.needs_cpus = needs_cpus;
        claim.checks = vec![Check::Ratio {
            a: "new".into(),
            b: "old".into(),
            published: Some(1.5),
            at: None,
        }];
        let by_check: Vec<Vec<Measured>> = vec![ratios
            .iter()
            .map(|&r| {
                let of = |l: &str| Some(vec![(8, if l == "new" { r } else { 1.0 })]);
                claim.checks[0].grade(of).unwrap()
            })
            .collect()];
        let (v, grades, _) = verdict(&claim, &by_check, cpus);
        (v, grades)
    }

    #[test]
    fn a_verdict_needs_every_draw_and_enough_cpus_whichever_way_the_checks_go() {
        use Grade::*;
        assert_eq!(graded(&[1.4, 1.6, 1.5], 8, 8).0, Verdict::Reproduced);
        assert_eq!(graded(&[1.1, 1.15], 8, 8).0, Verdict::DirectionOnly);
        assert_eq!(graded(&[0.9, 0.95], 8, 8).0, Verdict::NotReproduced);
        // One draw of three disagrees: the effect is within the spread.
        let (v, g) = graded(&[1.4, 1.6, 1.1], 8, 80);
        assert_eq!(
            (v, g),
            (
                Verdict::Unstable,
                vec![Reproduced, Reproduced, DirectionOnly]
            )
        );
        // Too few CPUs: not decidable, whether the checks held or failed.
        assert_eq!(graded(&[1.5, 1.5], 16, 2).0, Verdict::NotDecidable);
        assert_eq!(graded(&[0.5, 0.5], 16, 2).0, Verdict::NotDecidable);
    }

    #[test]
    fn a_figure_from_a_machine_no_profile_models_is_measured_and_never_judged() {
        let mut claim = claims().unwrap().remove(0);
        claim.modelled = false;
        let m = Measured {
            grade: Grade::Reproduced,
            value: 2.0,
            at: "at 64 threads".into(),
        };
        let (v, _, why) = verdict(&claim, &[vec![m]], 1024);
        assert_eq!(v, Verdict::NoProfile);
        assert!(why.unwrap().contains("never judged"));
    }

    #[test]
    fn a_claim_with_its_machine_runs_there_on_any_simulated_machine_and_here_on_this_one() {
        let claim = claims()
            .unwrap()
            .into_iter()
            .find(|c| c.profile.as_deref() == Some("haswell-ex-4s"))
            .unwrap();
        let other = Machine::Simulated(std::sync::Arc::new(
            pglocks_sim::Profile::find("haswell-ep-2s").unwrap(),
        ));
        if pglocks_sim::BUILT_IN {
            let (m, cpus) = claim_machine(&claim, &other, 72).unwrap();
            assert_eq!((m.name().as_str(), cpus), ("sim:haswell-ex-4s", 144));
        } else {
            // A build without the simulator cannot make the claim's machine: a usage error.
            assert!(claim_machine(&claim, &other, 72).is_err());
        }
        let (m, cpus) = claim_machine(&claim, &Machine::Real, 2).unwrap();
        assert_eq!((m.name().as_str(), cpus), ("real", 2));
    }

    #[test]
    fn an_unknown_claim_is_a_usage_error_listing_the_claims() {
        let err = pick(claims().unwrap(), &["nope".into()]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("no claim 'nope'") && msg.contains("fast-path"),
            "{msg}"
        );
    }
}
