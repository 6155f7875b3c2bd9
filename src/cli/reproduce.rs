//! `pglocks reproduce`: every published claim the project models, run on this machine or a
//! simulated one, each with a verdict.
//!
//! The claims are data (`claims.toml`, compiled in): the sentence, the release, the published
//! figure and its source, the `pglocks run` that measures it, and the check that decides it.
//! Each claim's run is an ordinary sweep, saved as an ordinary report directory
//! (`OUT/<claim>/`); the check reads that report. The verdict is *reproduced* when the check
//! holds, *not visible here* when it does not and the machine has fewer CPUs than the claim
//! says the effect needs, *not reproduced* otherwise, and *not run* when the claim cannot run on
//! the machine asked for (a model the simulator does not run yet). `OUT/index.html` opens with
//! the summary table; `OUT/report.json` holds the same for programs.

use super::{detect, machine, plan, show, CliError, RunArgs};
use pglocks_harness::html::esc;
use pglocks_harness::plot::ChartKind;
use pglocks_harness::{self as harness, Report};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The claims, as compiled in.
const CLAIMS: &str = include_str!("claims.toml");

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
    published: String,
    source: String,
    needs_cpus: usize,
    check: Check,
    run: RunSpec,
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
}

fn pg() -> String {
    "pg".into()
}

/// What decides a claim.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Check {
    /// Series `a` does at least `at_least` times series `b`'s throughput at the largest thread
    /// count both measured.
    Ratio { a: String, b: String, at_least: f64 },
}

/// What came out of one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    Reproduced,
    NotReproduced,
    NotVisible,
    NotRun,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NotVisible => "not visible here",
            Verdict::NotRun => "not run",
        }
    }
}

/// One claim's row of the summary.
#[derive(Debug, Serialize)]
struct Outcome {
    #[serde(flatten)]
    claim: Claim,
    /// The command that re-makes the claim's figures.
    command: String,
    verdict: Verdict,
    /// The check's figure: "pg92 / pg91 = 2.31× at 8 threads (claimed ≥ 1.5×)".
    measured: String,
    /// Why the verdict is not "reproduced", when there is more to say than the figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// The claim's report directory, relative to the output directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    dir: Option<String>,
}

/// The whole run, as `report.json` holds it.
#[derive(Debug, Serialize)]
struct Summary {
    pglocks_version: String,
    machine: String,
    cpus: usize,
    quick: bool,
    host_seconds: f64,
    claims: Vec<Outcome>,
}

fn claims() -> Result<Vec<Claim>, CliError> {
    let parsed: Claims = toml::from_str(CLAIMS)
        .map_err(|e| CliError::Usage(format!("the compiled-in claims do not parse: {e}")))?;
    Ok(parsed.claim)
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

/// The `run` arguments of `claim` for this reproduction.
fn run_args(claim: &Claim, a: &ReproduceArgs, cpus: usize) -> Result<RunArgs, CliError> {
    let r = &claim.run;
    let threads = if a.quick {
        r.quick_threads.clone()
    } else {
        let most = (4 * cpus).max(8);
        let kept: Vec<String> = super::parse_threads(&r.threads)?
            .into_iter()
            .filter(|&t| t <= most)
            .map(|t| t.to_string())
            .collect();
        kept.join(",")
    };
    let sim = a.machine != "real";
    let (duration, warmup, repeat) = match (sim, a.quick) {
        (true, _) => (None, None, None),
        (false, true) => (Some("300ms"), Some("100ms"), Some(1)),
        (false, false) => (Some("1s"), Some("200ms"), Some(3)),
    };
    let sets = match (&r.quick_sets, a.quick) {
        (Some(q), true) => q.clone(),
        _ => r.sets.clone(),
    };
    Ok(RunArgs {
        workload: r.workload.clone(),
        preset: r.presets.clone(),
        impls: r.impls.clone(),
        threads,
        duration: duration.map(String::from),
        warmup: warmup.map(String::from),
        machine: a.machine.clone(),
        repeat,
        pin: "compact".into(),
        format: "table".into(),
        out: None,
        no_progress: a.no_progress,
        sets,
        flush_latency: None,
        sysfs_root: None,
        sample_every: 1024,
        show: show::ShowArgs::default(),
    })
}

/// The command line that `args` stands for.
fn command_line(args: &RunArgs) -> String {
    let mut c = format!(
        "pglocks run {} --preset {} --threads {}",
        args.workload, args.preset, args.threads
    );
    if args.impls != "pg" {
        let _ = write!(c, " --impl {}", args.impls);
    }
    for s in &args.sets {
        let _ = write!(c, " --set {s}");
    }
    if args.machine != "real" {
        let _ = write!(c, " --machine {}", args.machine);
    }
    for (flag, v) in [("duration", &args.duration), ("warmup", &args.warmup)] {
        if let Some(v) = v {
            let _ = write!(c, " --{flag} {v}");
        }
    }
    if let Some(r) = args.repeat {
        let _ = write!(c, " --repeat {r}");
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

/// Applies `check` to `report`: whether it holds, and the figure that decided it.
fn decide(check: &Check, report: &Report) -> Result<(bool, String), String> {
    match check {
        Check::Ratio { a, b, at_least } => {
            let sa = series(report, a).ok_or_else(|| format!("no series {a} in the report"))?;
            let sb = series(report, b).ok_or_else(|| format!("no series {b} in the report"))?;
            let (pa, pb) = sa
                .points
                .iter()
                .rev()
                .find_map(|pa| {
                    let pb = sb.points.iter().find(|pb| pb.threads == pa.threads)?;
                    Some((pa, pb))
                })
                .ok_or_else(|| format!("{a} and {b} share no thread count"))?;
            let ratio = pa.ops_per_sec / pb.ops_per_sec.max(f64::MIN_POSITIVE);
            let threads = if pa.threads == 1 { "thread" } else { "threads" };
            Ok((
                ratio >= *at_least,
                format!(
                    "{a} / {b} = {ratio:.2}\u{d7} at {} {threads} (claimed \u{2265} {at_least}\u{d7})",
                    pa.threads
                ),
            ))
        }
    }
}

/// Runs `claim` and saves its report under `out`.
fn reproduce_one(
    claim: &Claim,
    a: &ReproduceArgs,
    cpus: usize,
    out: &Path,
) -> Result<Outcome, CliError> {
    let args = run_args(claim, a, cpus)?;
    let command = command_line(&args);
    let outcome = |verdict, measured: String, reason, dir| Outcome {
        claim: claim.clone(),
        command: command.clone(),
        verdict,
        measured,
        reason,
        dir,
    };
    let plan = match plan(&args) {
        Ok(p) => p,
        // A model the simulated machine does not run is a verdict, not a failure.
        Err(CliError::Usage(why)) if a.machine != "real" => {
            return Ok(outcome(Verdict::NotRun, String::new(), Some(why), None));
        }
        Err(e) => return Err(e),
    };
    let report = harness::sweep(&plan.sweep, &plan.topology, plan.series)?;
    let dir = out.join(&claim.id);
    harness::save_report(&report, &dir)?;
    let (verdict, measured, reason) = match decide(&claim.check, &report) {
        Err(why) => (Verdict::NotRun, String::new(), Some(why)),
        Ok((true, m)) => (Verdict::Reproduced, m, None),
        Ok((false, m)) if cpus < claim.needs_cpus => (
            Verdict::NotVisible,
            m,
            Some(format!(
                "the effect needs {} CPUs or more; this machine has {cpus}",
                claim.needs_cpus
            )),
        ),
        Ok((false, m)) => (Verdict::NotReproduced, m, None),
    };
    Ok(outcome(verdict, measured, reason, Some(claim.id.clone())))
}

/// `pglocks reproduce`.
pub(crate) fn reproduce(a: &ReproduceArgs) -> Result<(), CliError> {
    let all = pick(claims()?, &a.claims)?;
    if a.list {
        for c in &all {
            println!("{:<22} {:<15} {}", c.id, c.release, c.title);
        }
        return Ok(());
    }
    let (cpus, machine_name) = match machine(&a.machine)? {
        Some(p) => (p.cpu_count(), format!("simulated {}", p.name)),
        None => (detect(None)?.logical_cpus(), "this machine".to_string()),
    };
    let out = match &a.out {
        Some(d) => d.clone(),
        None => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let m = a.machine.replace(':', "-");
            PathBuf::from("target")
                .join("pglocks")
                .join(format!("reproduce-{m}-{stamp}"))
        }
    };
    std::fs::create_dir_all(&out).map_err(|error| CliError::Io {
        path: out.display().to_string(),
        error,
    })?;
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
        let o = reproduce_one(claim, a, cpus, &out)?;
        eprintln!("        {}: {}", o.verdict.label(), o.measured);
        outcomes.push(o);
    }
    let summary = Summary {
        pglocks_version: env!("CARGO_PKG_VERSION").into(),
        machine: format!("{machine_name}, {cpus} CPUs"),
        cpus,
        quick: a.quick,
        host_seconds: started.elapsed().as_secs_f64(),
        claims: outcomes,
    };
    let table = markdown(&summary);
    print!("{table}");
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|error| CliError::Io {
            path: path.display().to_string(),
            error,
        })
    };
    let json = serde_json::to_string_pretty(&summary)
        .map_err(|e| CliError::Usage(format!("cannot write the summary: {e}")))?;
    write("report.json", &json)?;
    write("summary.md", &table)?;
    write("index.html", &html(&summary))?;
    println!(
        "\nhost time {:.0} s. The reports: {}/index.html",
        summary.host_seconds,
        out.display()
    );
    Ok(())
}

/// The summary table, in Markdown.
fn markdown(s: &Summary) -> String {
    let mut t = format!(
        "pglocks reproduce{} on {}\n\n| claim | release | verdict | measured |\n|---|---|---|---|\n",
        if s.quick { " --quick" } else { "" },
        s.machine
    );
    for o in &s.claims {
        let mut measured = o.measured.clone();
        if let Some(r) = &o.reason {
            if !measured.is_empty() {
                measured.push_str("; ");
            }
            measured.push_str(r);
        }
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} |",
            o.claim.id,
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
            "<h2 id=\"{}\">{} ({})</h2>\n<p>{}</p>\n<table><tr><th>published</th><th>measured</th></tr>\
             <tr><td>{}<br><small>{}</small></td><td>{}: {}</td></tr></table>\n<p><code>{}</code></p>",
            esc(&c.id),
            esc(&c.title),
            esc(&c.release),
            esc(&c.claim),
            esc(&c.published),
            esc(&c.source),
            o.verdict.label(),
            esc(&o.measured),
            esc(&o.command),
        );
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
            let Check::Ratio { a, b, .. } = &c.check;
            for s in [a, b] {
                // The label is a preset of the run; a macro workload's run adds its executor work.
                let preset = s.split('/').next().unwrap();
                let preset = preset.split("+executor_work=").next().unwrap();
                assert!(presets.contains(&preset), "{}: {s} is not run", c.id);
            }
            super::super::parse_threads(&c.run.threads).unwrap();
            super::super::parse_threads(&c.run.quick_threads).unwrap();
            assert!(!w.impls.is_empty());
        }
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
