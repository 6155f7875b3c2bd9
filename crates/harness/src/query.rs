//! Questions asked of a [`Report`]: which workloads it holds, which series ran each, which thread
//! counts they cover, which waits and metrics a point or series has, in the order every output
//! shows them. The charts ([`crate::plot`]), the text formats ([`crate::render`](mod@crate::render)) and the page
//! ([`crate::html`]) all pick their data out of a report through these, so they agree on it.

use crate::report::{Point, Report, Series, Wait};

/// The workloads of `report`'s series, each once, in the order they first appear.
pub fn workloads(report: &Report) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for s in &report.series {
        if !out.contains(&s.workload.as_str()) {
            out.push(&s.workload);
        }
    }
    out
}

/// The workloads `report` names, for its title: those of its series ([`workloads`]), or, for a
/// report without series, those its settings name (`select-only,tpcb-like`), each trimmed.
pub fn named_workloads(report: &Report) -> Vec<&str> {
    let from_series = workloads(report);
    if !from_series.is_empty() {
        return from_series;
    }
    report
        .config
        .workload
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect()
}

/// The workloads `report` names ([`named_workloads`]) as its title and headers write them:
/// separated by a comma and a space (`select-only, tpcb-like`).
pub fn workload_list(report: &Report) -> String {
    named_workloads(report).join(", ")
}

/// The series of `report` that ran `workload`.
pub fn series_of<'r>(report: &'r Report, workload: &str) -> Vec<&'r Series> {
    report
        .series
        .iter()
        .filter(|s| s.workload == workload)
        .collect()
}

/// The thread counts of `series`' points, each once, in increasing order.
pub fn thread_counts<'r>(series: impl IntoIterator<Item = &'r Series>) -> Vec<usize> {
    let mut counts: Vec<usize> = series
        .into_iter()
        .flat_map(|s| s.points.iter().map(|p| p.threads))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// Whether some point of `series` has an ideal throughput (tables show the ideal columns only
/// then).
pub fn any_ideal<'r>(series: impl IntoIterator<Item = &'r Series>) -> bool {
    series
        .into_iter()
        .flat_map(|s| &s.points)
        .any(|p| p.ideal_ops_per_sec.is_some())
}

/// The point of `s` at its largest thread count (`None` for a series without points).
pub fn largest_point(s: &Series) -> Option<&Point> {
    s.points.iter().max_by_key(|p| p.threads)
}

/// The waits of a point, longest total wait first (then most waits, then by name).
pub fn sorted_waits(p: &Point) -> Vec<&Wait> {
    let mut waits: Vec<&Wait> = p.waits.iter().collect();
    waits.sort_by(|a, b| {
        (b.wait_ns, b.count)
            .cmp(&(a.wait_ns, a.count))
            .then_with(|| (&a.lock, &a.mode).cmp(&(&b.lock, &b.mode)))
    });
    waits
}

/// The names of the metrics of `s`' points, each once, in the order they first appear.
pub fn metric_names(s: &Series) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for m in s.points.iter().flat_map(|p| &p.metrics) {
        if !names.contains(&m.name.as_str()) {
            names.push(&m.name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::point;
    use crate::report::{Machine, RunConfig, Wait};

    fn series(workload: &str, impl_name: &str, threads: &[usize]) -> Series {
        Series {
            workload: workload.into(),
            preset: "pg17".into(),
            impl_name: impl_name.into(),
            points: threads
                .iter()
                .map(|&t| point(t, 100.0 * t as f64))
                .collect(),
        }
    }

    fn report(config_workload: &str, series: Vec<Series>) -> Report {
        Report {
            pglocks_version: "0.1.0".into(),
            machine: Machine {
                cpus: 2,
                nodes: 1,
                model: "test cpu".into(),
                simulated: None,
            },
            config: RunConfig {
                workload: config_workload.into(),
                duration_ms: 100,
                until: None,
                repeat: 1,
                pin: "none".into(),
            },
            series,
            interrupted: false,
        }
    }

    #[test]
    fn workloads_in_first_appearance_order() {
        let r = report(
            "select-only,tpcb-like",
            vec![
                series("tpcb-like", "pg", &[1, 2]),
                series("select-only", "pg", &[1]),
                series("tpcb-like", "tas", &[4, 2]),
            ],
        );
        assert_eq!(workloads(&r), ["tpcb-like", "select-only"]);
        assert_eq!(named_workloads(&r), ["tpcb-like", "select-only"]);
        assert_eq!(workload_list(&r), "tpcb-like, select-only");
        let tpcb = series_of(&r, "tpcb-like");
        assert_eq!(tpcb.len(), 2);
        assert_eq!(thread_counts(tpcb.iter().copied()), [1, 2, 4]);
        assert_eq!(largest_point(tpcb[1]).map(|p| p.threads), Some(4));
        assert!(!any_ideal(&r.series));
        // Without series, the settings name the workloads.
        let empty = report("select-only, tpcb-like", vec![]);
        assert_eq!(named_workloads(&empty), ["select-only", "tpcb-like"]);
        assert_eq!(workload_list(&report("spin", vec![])), "spin");
    }

    #[test]
    fn waits_longest_first_and_metric_names_once() {
        let wait = |lock: &str, count, wait_ns| Wait {
            lock: lock.into(),
            mode: "exclusive".into(),
            count,
            wait_ns,
        };
        let mut p = point(2, 1.0);
        p.waits = vec![wait("a", 1, 5), wait("b", 9, 50), wait("c", 2, 5)];
        let order: Vec<&str> = sorted_waits(&p).iter().map(|w| &*w.lock).collect();
        assert_eq!(order, ["b", "c", "a"]);

        let metric = |name: &str| crate::report::Metric {
            name: name.into(),
            value: 1.0,
        };
        let mut s = series("wal-commit", "pg", &[1, 2]);
        s.points[0].metrics = vec![metric("x"), metric("y")];
        s.points[1].metrics = vec![metric("z"), metric("x")];
        assert_eq!(metric_names(&s), ["x", "y", "z"]);
    }
}
