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

mod sensitivity;

use super::parse::{detect, parse_threads};
use super::{stamped_dir, CliError};
use pglocks_harness::html::esc;
use pglocks_harness::plot::ChartKind;
use pglocks_harness::{self as harness, Report};
use pglocks_workloads::plan::{Machine, RunRequest};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    published: String,
    source: String,
    needs_cpus: usize,
    checks: Vec<Check>,
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

/// One test of a claim's report; a claim holds when all of its checks do.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Check {
    /// Series `a` does at least `at_least` times series `b`'s throughput at the largest thread
    /// count both measured.
    Ratio { a: String, b: String, at_least: f64 },
    /// `series` peaks at `peak_at_most` threads or fewer and its last point is below `below`
    /// times that peak: its throughput falls past that count.
    Falls {
        series: String,
        peak_at_most: usize,
        below: f64,
    },
    /// No point of `series` (up to `through` threads, when given) is below `at_least` times its
    /// best at fewer threads: its throughput keeps rising, or holds, as threads are added.
    Holds {
        series: String,
        at_least: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        through: Option<usize>,
    },
}

#[cfg(test)]
impl Check {
    /// The series the check reads.
    fn series(&self) -> Vec<&str> {
        match self {
            Check::Ratio { a, b, .. } => vec![a, b],
            Check::Falls { series, .. } | Check::Holds { series, .. } => vec![series],
        }
    }
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
    // A simulated machine's runs take its defaults (virtual time, one run: they repeat).
    let ms = Duration::from_millis;
    let times = match (machine, a.quick) {
        (Machine::Simulated(_), _) => None,
        (Machine::Real, true) => Some((ms(300), ms(100), 1)),
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

/// `n` threads, in words.
fn threads(n: usize) -> String {
    format!("{n} {}", if n == 1 { "thread" } else { "threads" })
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

/// Applies `check` to the curves `of` gives: whether it holds, and the figure that decided it.
fn decide(check: &Check, of: impl Fn(&str) -> Option<Curve>) -> Result<(bool, String), String> {
    let find = |label: &str| {
        of(label)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| format!("no series {label} in the report"))
    };
    match check {
        Check::Ratio { a, b, at_least } => {
            let (ca, cb) = (find(a)?, find(b)?);
            let (t, x, y) = ca
                .iter()
                .rev()
                .find_map(|&(t, x)| cb.iter().find(|p| p.0 == t).map(|&(_, y)| (t, x, y)))
                .ok_or_else(|| format!("{a} and {b} share no thread count"))?;
            let ratio = x / y.max(f64::MIN_POSITIVE);
            Ok((
                ratio >= *at_least,
                format!(
                    "{a} / {b} = {ratio:.2}\u{d7} at {} (claimed \u{2265} {at_least}\u{d7})",
                    threads(t)
                ),
            ))
        }
        Check::Falls {
            series,
            peak_at_most,
            below,
        } => {
            let c = find(series)?;
            let peak = c
                .iter()
                .copied()
                .max_by(|x, y| x.1.total_cmp(&y.1))
                .expect("a curve with points");
            let last = *c.last().expect("a curve with points");
            let end = last.1 / peak.1.max(f64::MIN_POSITIVE);
            Ok((
                peak.0 <= *peak_at_most && end < *below,
                format!(
                    "{series} peaks at {} and ends at {end:.2}\u{d7} that peak at {} (claimed: \
                     a peak at \u{2264} {peak_at_most}, an end below {below}\u{d7})",
                    threads(peak.0),
                    threads(last.0)
                ),
            ))
        }
        Check::Holds {
            series,
            at_least,
            through,
        } => {
            let mut c = find(series)?;
            c.retain(|p| through.map_or(true, |n| p.0 <= n));
            if c.is_empty() {
                return Err(format!("{series} has no point up to {through:?} threads"));
            }
            // The lowest share of the best so far, and where it was.
            let (mut best, mut worst) = (c[0].1, (1.0_f64, c[0].0));
            for &(t, x) in &c[1..] {
                let share = x / best.max(f64::MIN_POSITIVE);
                if share < worst.0 {
                    worst = (share, t);
                }
                best = best.max(x);
            }
            let (share, at) = worst;
            let figure = if share >= 1.0 {
                format!("{series} never falls below its best at fewer threads")
            } else {
                format!(
                    "{series} at its lowest is {share:.2}\u{d7} its best at fewer threads ({})",
                    threads(at)
                )
            };
            let upto = through.map_or(String::new(), |n| format!(" up to {}", threads(n)));
            Ok((
                share >= *at_least,
                format!("{figure} (claimed \u{2265} {at_least}\u{d7}{upto})"),
            ))
        }
    }
}

/// Runs `claim` on `machine` and saves its report under `out`.
fn reproduce_one(
    claim: &Claim,
    a: &ReproduceArgs,
    machine: &Machine,
    cpus: usize,
    out: &Path,
) -> Result<Outcome, CliError> {
    let request = request(claim, a, machine, cpus)?;
    let command = command_line(&request);
    let outcome = |verdict, measured: String, reason, dir| Outcome {
        claim: claim.clone(),
        command: command.clone(),
        verdict,
        measured,
        reason,
        dir,
    };
    let report = request.plan()?.run()?;
    let dir = out.join(&claim.id);
    harness::save_report(&report, &dir)?;
    let path = dir.join("curves.md");
    std::fs::write(&path, harness::render::curves_markdown(&report)).map_err(|error| CliError::Io {
        path: path.display().to_string(),
        error,
    })?;
    let decided: Result<Vec<(bool, String)>, String> = claim
        .checks
        .iter()
        .map(|c| decide(c, |l| curve(&report, l)))
        .collect();
    let decided = decided.map(|all| {
        let holds = all.iter().all(|(h, _)| *h);
        let figures: Vec<String> = all.into_iter().map(|(_, m)| m).collect();
        (holds, figures.join("; "))
    });
    let (verdict, measured, reason) = match decided {
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
        let o = reproduce_one(claim, a, &machine, cpus, &out)?;
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
            assert!(!c.checks.is_empty(), "{}: no check", c.id);
            for s in c.checks.iter().flat_map(Check::series) {
                // The label is a preset of the run; a macro workload's run adds its executor work.
                let preset = s.split('/').next().unwrap();
                let preset = preset.split("+executor_work=").next().unwrap();
                assert!(presets.contains(&preset), "{}: {s} is not run", c.id);
            }
            parse_threads(&c.run.threads).unwrap();
            parse_threads(&c.run.quick_threads).unwrap();
            assert!(!w.impls.is_empty());
        }
    }

    /// The checks on made-up curves: 9.1-like (peaks at 16, then falls) and 9.2-like (rises).
    #[test]
    fn each_check_holds_on_the_curve_it_describes_and_not_on_the_other() {
        let falls: Curve = vec![(1, 10.0), (16, 100.0), (32, 80.0), (64, 40.0)];
        let rises: Curve = vec![(1, 10.0), (16, 120.0), (32, 200.0), (64, 190.0)];
        let of = |l: &str| match l {
            "old" => Some(falls.clone()),
            "new" => Some(rises.clone()),
            _ => None,
        };
        let ratio = |at_least| Check::Ratio {
            a: "new".into(),
            b: "old".into(),
            at_least,
        };
        let (held, figure) = decide(&ratio(4.0), of).unwrap();
        assert!(held, "{figure}");
        assert!(figure.contains("= 4.75\u{d7} at 64 threads"), "{figure}");
        assert!(!decide(&ratio(5.0), of).unwrap().0);
        let falling = |series: &str| Check::Falls {
            series: series.into(),
            peak_at_most: 32,
            below: 0.9,
        };
        assert!(decide(&falling("old"), of).unwrap().0);
        // The new curve's peak is at 32 too, but its end is 0.95 of it: not a fall.
        assert!(!decide(&falling("new"), of).unwrap().0);
        let holding = |series: &str, through| Check::Holds {
            series: series.into(),
            at_least: 0.9,
            through,
        };
        assert!(decide(&holding("new", None), of).unwrap().0);
        let (held, figure) = decide(&holding("old", None), of).unwrap();
        assert!(!held && figure.contains("0.40\u{d7}"), "{figure}");
        // Up to 16 threads the old curve still rose.
        let (held, figure) = decide(&holding("old", Some(16)), of).unwrap();
        assert!(held && figure.contains("up to 16 threads"), "{figure}");
        assert!(decide(&holding("old", Some(0)), of).is_err());
        assert!(decide(&holding("missing", None), of).is_err());
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
