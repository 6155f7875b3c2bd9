//! Scaling of the pgbench-shaped macro workloads (`select-only`, `tpcb-like`) for PostgreSQL 9.1,
//! 9.2 and 18, per NUMA placement: criterion's view of what `cargo run --release` shows.
//!
//! Each criterion iteration is one transaction. A sample runs the workload's own thread team
//! (the harness's `run_team`: one backend per thread, a shared cluster built per run) for a
//! short timed run and reports the time `iters` transactions take at the rate it measured, so
//! criterion's throughput is transactions per second of the whole team.
//!
//! Placements, one criterion group each (as in `scaling`): `pgbench/compact`, and
//! `pgbench/node:N` for each node of a multi-node machine. Thread counts double from 1 to twice
//! the placement's cpus. Tables are sized by pgbench's rule (a scale at least the clients,
//! capped at 8); `tpcb-like` commits with `synchronous_commit = off`, as the default run does.
//!
//! Runs short by default (10 samples, 200 ms warm-up, 1 s measurement per point, 100 ms team
//! runs); `PGLOCKS_BENCH_LONG=1` for criterion's defaults and 1 s team runs.

use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use pglocks_harness::TeamSpec;
use pglocks_workloads::{series, Preset};
use std::time::Duration;

mod common;
use common::{config, placements, thread_counts};

const PRESETS: [&str; 3] = ["pg91", "pg92", "pg18"];
const WORKLOADS: [&str; 2] = ["select-only", "tpcb-like"];

/// One team run's length.
fn team_run() -> Duration {
    if std::env::var("PGLOCKS_BENCH_LONG").is_ok_and(|v| v == "1") {
        Duration::from_secs(1)
    } else {
        Duration::from_millis(100)
    }
}

/// One workload of one preset at every thread count of the placement.
fn sweep_series(
    group: &mut BenchmarkGroup<'_, WallTime>,
    workload: &str,
    preset: &str,
    pin_order: &[usize],
    cpus: usize,
) {
    let counts = thread_counts(cpus);
    let scale = counts.last().copied().unwrap_or(1).clamp(1, 8);
    let mut sets = vec![format!("scale={scale}")];
    if workload == "tpcb-like" {
        sets.push("synchronous_commit=off".into());
    }
    let preset_def = Preset::by_name(preset).expect("a listed preset");
    let s = series(workload, preset_def, "pg", &sets).expect("the bench's settings are valid");
    for &threads in &counts {
        let spec = TeamSpec {
            threads,
            duration: team_run(),
            warmup: Duration::from_millis(20),
            pin_order: pin_order.to_vec(),
            sample_every: 0,
            sim: None,
            until: None,
        };
        group.throughput(Throughput::Elements(1));
        let id = BenchmarkId::new(format!("{workload}/{preset}"), threads);
        group.bench_with_input(id, &threads, |b, _| {
            b.iter_custom(|iters| {
                let run = (s.run)(&spec).expect("a macro workload run");
                Duration::from_secs_f64(iters as f64 / run.ops_per_sec().max(1.0))
            })
        });
    }
}

fn placement(c: &mut Criterion, group_name: &str, pin_order: &[usize], cpus: usize) {
    let mut group = c.benchmark_group(group_name);
    for workload in WORKLOADS {
        for preset in PRESETS {
            sweep_series(&mut group, workload, preset, pin_order, cpus);
        }
    }
    group.finish();
}

fn pgbench(c: &mut Criterion) {
    for p in placements("pgbench") {
        placement(c, &format!("pgbench/{}", p.name), &p.pin_order, p.cpus);
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = pgbench
}
common::bench_main!(benches);
