//! A few sentences that read a report, for the person who ran it to ask "did 9.2 scale better
//! than 9.1 here?": computed from the report alone, so they say what this machine measured.
//!
//! For each workload, at two thread counts that all its series measured:
//! - the largest that is at most the machine's CPU count, where every thread can have a CPU of
//!   its own, and
//! - the largest measured, when it is larger: more threads than CPUs is oversubscription, where
//!   a lock holder can be preempted and its waiters spin or sleep behind it, which the sentence
//!   names.
//!
//! At each, the series are compared in pairs: each with the one before it when they differ only
//! by preset (releases are listed oldest first, so this reads "what did each release change"),
//! and each with the first otherwise (implementations beside PostgreSQL's, `pg`). A ratio within
//! the comparison's noise band ([`DEFAULT_NOISE`], ±3 %) reads as "the same". The first count
//! is said in full, the second as its ratios alone, in the same order, so that a paragraph stays
//! a few lines of a terminal. Then each series' efficiency at the first count (its throughput
//! over threads × its 1-thread throughput). A workload with one series says how far it scaled
//! from one thread.
//!
//! The same sentences head each workload of the report's `index.html` and follow the table of
//! the default run.

use crate::compare::DEFAULT_NOISE;
use crate::format::times;
use crate::query::{series_of, workloads};
use crate::report::{Report, Series};

/// One paragraph per workload of `report` that has something to say (in the report's order).
pub fn summary(report: &Report) -> Vec<String> {
    workloads(report)
        .into_iter()
        .filter_map(|w| workload_summary(report, w))
        .collect()
}

/// The paragraph on `workload`, `None` when its series share no thread count (or it has none).
pub fn workload_summary(report: &Report, workload: &str) -> Option<String> {
    let (series, counts) = reported(report, workload)?;
    let cpus = report.machine.cpus.max(1);
    // The first count, when every thread has a CPU of its own there.
    let fit = counts.first().copied().filter(|&t| t <= cpus);
    let at = |t: usize| -> String {
        let threads = if t == 1 { "thread" } else { "threads" };
        let cpu_word = if cpus == 1 { "CPU" } else { "CPUs" };
        if t > cpus {
            format!("at {t} {threads} (oversubscribed: {cpus} {cpu_word})")
        } else if t == cpus && t > 1 {
            format!("at {t} {threads} (one per CPU)")
        } else {
            format!("at {t} {threads}")
        }
    };
    // The first count in full, the second (the oversubscribed one) as its figures alone, in the
    // same order: "…; at 4 threads (oversubscribed: 2 CPUs) 1.44× and 1.65×".
    let mut clauses = Vec::new();
    let mut efficiencies = None;
    if let [only] = series[..] {
        for &t in &counts {
            let Some(e) = efficiency(only, t) else {
                continue;
            };
            let gain = times(e * t as f64);
            clauses.push(if clauses.is_empty() {
                format!(
                    "{workload} {} {}: {gain} its 1-thread ops/s (efficiency {e:.2})",
                    only.label(),
                    at(t)
                )
            } else {
                format!("{} {gain} (efficiency {e:.2})", at(t))
            });
        }
    } else {
        let names = names(&series);
        let pairs = pairs(&series);
        for (i, &t) in counts.iter().enumerate() {
            let ratios: Vec<Option<f64>> = pairs
                .iter()
                .map(|&(a, b)| {
                    let a_ops = ops(series[a], t);
                    (a_ops > 0.0).then(|| ops(series[b], t) / a_ops)
                })
                .collect();
            if i == 0 {
                // The first "the same" says what it means.
                let mut explained = false;
                let relations: Vec<String> = pairs
                    .iter()
                    .zip(&ratios)
                    .enumerate()
                    .map(|(k, (&(a, b), &r))| {
                        let text = relation(&names[b], &names[a], r, k == 0, !explained);
                        explained |= r.is_some_and(same);
                        text
                    })
                    .collect();
                clauses.push(format!("{workload} {}: {}", at(t), relations.join(", ")));
            } else {
                let figures: Vec<String> = ratios.iter().map(|&r| figure(r)).collect();
                clauses.push(format!("{} {}", at(t), and_list(&figures)));
            }
        }
        if let Some(t) = fit.filter(|&t| t > 1) {
            efficiencies = series
                .iter()
                .zip(&names)
                .map(|(s, n)| efficiency(s, t).map(|e| format!("{n} {e:.2}")))
                .collect::<Option<Vec<String>>>()
                .map(|e| format!("Efficiency at {t} threads: {}.", e.join(", ")));
        }
    }
    if clauses.is_empty() {
        return None;
    }
    let mut text = clauses.join("; ") + ".";
    if let Some(e) = efficiencies {
        text = text + " " + &e;
    }
    Some(text)
}

/// The series of `workload` that measured something, and the thread counts the sentences
/// report, of those every one of them measured: the largest with a CPU per thread (if any), and
/// the largest when it is another; `None` when they share no count.
fn reported<'r>(report: &'r Report, workload: &str) -> Option<(Vec<&'r Series>, Vec<usize>)> {
    let series: Vec<&Series> = series_of(report, workload)
        .into_iter()
        .filter(|s| !s.points.is_empty())
        .collect();
    let shared = shared_threads(&series);
    let cpus = report.machine.cpus.max(1);
    let fit = shared.iter().copied().filter(|&t| t <= cpus).max();
    let top = shared.last().copied()?;
    let counts = fit
        .into_iter()
        .chain((Some(top) != fit).then_some(top))
        .collect();
    Some((series, counts))
}

/// The differences the sentences report that the runs do not bear out: a pair's ratio outside
/// the noise band whose runs, taken round by round (the rounds ran the series side by side),
/// do not all lie on its side of 1. Each as "select-only pg18 against pg92 at 2 threads (its
/// runs: 0.92–1.31×)", in the sentences' order.
pub fn unsettled(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for workload in workloads(report) {
        let Some((series, counts)) = reported(report, workload) else {
            continue;
        };
        let names = names(&series);
        for t in counts {
            for &(a, b) in &pairs(&series) {
                let runs = |s: &Series| -> Vec<f64> {
                    s.points
                        .iter()
                        .find(|p| p.threads == t)
                        .map_or_else(Vec::new, |p| p.runs_ops_per_sec.clone())
                };
                let (ra, rb) = (runs(series[a]), runs(series[b]));
                let ratios: Vec<f64> = ra
                    .iter()
                    .zip(&rb)
                    .filter(|(x, _)| **x > 0.0)
                    .map(|(x, y)| y / x)
                    .collect();
                let median = ops(series[b], t) / ops(series[a], t).max(f64::MIN_POSITIVE);
                let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if ratios.len() > 1 && !same(median) && lo <= 1.0 && hi >= 1.0 {
                    out.push(format!(
                        "{workload} {} against {} at {t} threads (its runs: {lo:.2}\u{2013}{hi:.2}\u{d7})",
                        names[b], names[a]
                    ));
                }
            }
        }
    }
    out
}

/// The warning that names [`unsettled`]'s differences, if there are any.
pub fn unsettled_warning(report: &Report) -> Option<String> {
    let unsettled = unsettled(report);
    (!unsettled.is_empty()).then(|| {
        format!(
            "warning: within the runs' spread, not a difference: {}",
            unsettled.join("; ")
        )
    })
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The thread counts every one of `series` measured, in increasing order.
fn shared_threads(series: &[&Series]) -> Vec<usize> {
    let Some(first) = series.first() else {
        return Vec::new();
    };
    let mut counts: Vec<usize> = first
        .points
        .iter()
        .map(|p| p.threads)
        .filter(|&t| {
            series
                .iter()
                .all(|s| s.points.iter().any(|p| p.threads == t))
        })
        .collect();
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// How the sentences name the series: by preset when they share an implementation, by
/// implementation when they share a preset, as `preset/impl` otherwise.
fn names(series: &[&Series]) -> Vec<String> {
    let same = |f: fn(&Series) -> &str| series.iter().all(|s| f(s) == f(series[0]));
    if same(|s| &s.impl_name) {
        series.iter().map(|s| s.preset.clone()).collect()
    } else if same(|s| &s.preset) {
        series.iter().map(|s| s.impl_name.clone()).collect()
    } else {
        series.iter().map(|s| s.label()).collect()
    }
}

/// Which series each is compared with: the one before it when all share an implementation (the
/// presets, oldest first, each against its predecessor), the first otherwise.
fn pairs(series: &[&Series]) -> Vec<(usize, usize)> {
    let one_impl = series.iter().all(|s| s.impl_name == series[0].impl_name);
    (1..series.len())
        .map(|b| if one_impl { (b - 1, b) } else { (0, b) })
        .collect()
}

fn ops(s: &Series, threads: usize) -> f64 {
    s.points
        .iter()
        .find(|p| p.threads == threads)
        .map_or(0.0, |p| p.ops_per_sec)
}

/// `s`' efficiency at `threads`, as the report holds it (`Series::fill_efficiency`).
fn efficiency(s: &Series, threads: usize) -> Option<f64> {
    s.points
        .iter()
        .find(|p| p.threads == threads)
        .and_then(|p| p.efficiency)
}

/// "`b` does 2.02× the ops/s of `a`" (`long`), or "`b` 2.02× `a`'s"; "the same" within the
/// noise band (which `explain` names); `ratio` is `None` when `a` measured nothing.
fn relation(b: &str, a: &str, ratio: Option<f64>, long: bool, explain: bool) -> String {
    match ratio {
        None => format!("{a} measured nothing"),
        Some(r) if same(r) && explain => {
            format!("{b} the same as {a} (within {:.0}%)", DEFAULT_NOISE * 100.0)
        }
        Some(r) if same(r) => format!("{b} the same as {a}"),
        Some(r) if long => format!("{b} does {} the ops/s of {a}", times(r)),
        Some(r) => format!("{b} {} {a}'s", times(r)),
    }
}

/// A ratio alone: `1.44×`, or "the same" within the noise band.
fn figure(ratio: Option<f64>) -> String {
    match ratio {
        None => "nothing measured".into(),
        Some(r) if same(r) => "the same".into(),
        Some(r) => times(r),
    }
}

fn same(ratio: f64) -> bool {
    (ratio - 1.0).abs() <= DEFAULT_NOISE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::report;
    use crate::report::tests::point;

    fn series(workload: &str, preset: &str, impl_name: &str, ops: &[(usize, f64)]) -> Series {
        let mut s = Series {
            workload: workload.into(),
            preset: preset.into(),
            impl_name: impl_name.into(),
            points: ops.iter().map(|&(t, o)| point(t, o)).collect(),
        };
        s.fill_efficiency();
        s
    }

    #[test]
    fn a_reported_difference_whose_runs_disagree_on_its_direction_is_unsettled() {
        let with_runs = |preset: &str, at2: &[f64]| {
            let mut s = series("select-only", preset, "pg", &[(1, 100.0), (2, 0.0)]);
            s.points[1].runs_ops_per_sec = at2.to_vec();
            s.points[1].ops_per_sec = crate::report::median_of(at2);
            s
        };
        let r = report(vec![
            with_runs("pg91", &[100.0, 100.0, 100.0]),
            // 1.30× the median, but one run of three below pg91's.
            with_runs("pg92", &[130.0, 95.0, 140.0]),
            // 1.07× to 1.15× pg92's, run by run: settled.
            with_runs("pg18", &[150.0, 105.0, 150.0]),
        ]);
        assert_eq!(
            unsettled(&r),
            ["select-only pg92 against pg91 at 2 threads (its runs: 0.95\u{2013}1.40\u{d7})"]
        );
        // One run each: nothing to compare.
        let single = report(vec![
            series("select-only", "pg91", "pg", &[(2, 100.0)]),
            series("select-only", "pg92", "pg", &[(2, 200.0)]),
        ]);
        assert!(unsettled(&single).is_empty());
    }

    #[test]
    fn releases_side_by_side_at_the_cpu_count_and_oversubscribed() {
        // A 2-cpu machine (the helper's), threads 1, 2 and 4.
        let r = report(vec![
            series(
                "select-only",
                "pg91",
                "pg",
                &[(1, 100.0), (2, 100.0), (4, 90.0)],
            ),
            series(
                "select-only",
                "pg92",
                "pg",
                &[(1, 190.0), (2, 290.0), (4, 360.0)],
            ),
            series(
                "select-only",
                "pg18",
                "pg",
                &[(1, 300.0), (2, 464.0), (4, 365.0)],
            ),
            series("tpcb-like", "pg91", "pg", &[(1, 10.0), (2, 12.0)]),
        ]);
        let text = summary(&r);
        assert_eq!(
            text,
            [
                "select-only at 2 threads (one per CPU): pg92 does 2.90\u{d7} the ops/s of \
                 pg91, pg18 1.60\u{d7} pg92's; at 4 threads (oversubscribed: 2 CPUs) \
                 4.00\u{d7} and the same. Efficiency at 2 threads: pg91 0.50, pg92 0.76, pg18 \
                 0.77.",
                "tpcb-like pg91/pg at 2 threads (one per CPU): 1.20\u{d7} its 1-thread ops/s \
                 (efficiency 0.60).",
            ]
        );
        // The page says the same under each workload's heading.
        let html = crate::html::index_html(&r);
        assert!(
            html.contains("<h2>tpcb-like</h2>\n<p>tpcb-like pg91/pg at 2 threads (one per CPU)"),
            "{html}"
        );
        assert!(html.contains("pg92&#39;s;"), "{html}");
    }

    #[test]
    fn implementations_are_compared_with_the_first() {
        let mut r = report(vec![
            series("spin", "pg18", "pg", &[(1, 100.0), (8, 160.0)]),
            series("spin", "pg18", "tas", &[(1, 100.0), (8, 80.0)]),
            series("spin", "pg18", "mcs", &[(1, 100.0), (8, 240.0)]),
        ]);
        r.machine.cpus = 8;
        assert_eq!(
            workload_summary(&r, "spin").unwrap(),
            "spin at 8 threads (one per CPU): tas does 0.50\u{d7} the ops/s of pg, mcs \
             1.50\u{d7} pg's. Efficiency at 8 threads: pg 0.20, tas 0.10, mcs 0.30."
        );
        // Past the CPUs too, the oversubscribed count's figures follow in the same order.
        r.machine.cpus = 4;
        for s in &mut r.series {
            s.points.insert(1, point(4, 100.0));
            s.fill_efficiency();
        }
        assert_eq!(
            workload_summary(&r, "spin").unwrap(),
            "spin at 4 threads (one per CPU): tas the same as pg (within 3%), mcs the same as \
             pg; at 8 threads (oversubscribed: 4 CPUs) 0.50\u{d7} and 1.50\u{d7}. \
             Efficiency at 4 threads: pg 0.25, tas 0.25, mcs 0.25."
        );
    }

    #[test]
    fn only_thread_counts_every_series_measured_are_read() {
        let r = report(vec![
            series("w", "pg91", "pg", &[(4, 100.0)]),
            series("w", "pg92", "tas", &[(4, 200.0), (8, 10.0)]),
        ]);
        // Only 4 is shared, past the 2 CPUs; different presets and impls: named preset/impl; no
        // 1-thread point, so no efficiency.
        assert_eq!(
            summary(&r),
            [
                "w at 4 threads (oversubscribed: 2 CPUs): pg92/tas does 2.00\u{d7} the ops/s of \
              pg91/pg."
            ]
        );
        let r = report(vec![
            series("w", "pg91", "pg", &[(1, 100.0)]),
            series("w", "pg92", "pg", &[(2, 100.0)]),
        ]);
        assert!(summary(&r).is_empty());
        assert!(summary(&report(vec![])).is_empty());
    }
}
