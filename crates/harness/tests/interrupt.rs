//! A stop asked for during a sweep (what Ctrl-C does) ends it at once with the points finished
//! so far, marked interrupted. Its own test binary: the stop flag is process-wide.

use pglocks_harness::sweep::RunFn;
use pglocks_harness::{interrupt, run_team, sweep, PinPolicy, SeriesSpec, SweepConfig, Topology};
use pglocks_proc::{Backend, ProcTable};
use std::time::{Duration, Instant};

fn spinning_series(name: &str) -> SeriesSpec<'static> {
    let run: RunFn<'static> = Box::new(|spec| {
        let procs = ProcTable::new(spec.threads);
        run_team(spec, &procs, |_| {
            |_: &mut Backend| -> Result<(), std::io::Error> {
                std::hint::black_box(0u64);
                Ok(())
            }
        })
    });
    SeriesSpec {
        workload: "w".into(),
        preset: name.into(),
        impl_name: "pg".into(),
        run,
    }
}

#[test]
fn a_stop_ends_the_sweep_with_the_points_finished() {
    let cfg = SweepConfig {
        threads: vec![1, 2],
        duration: Duration::from_millis(300),
        warmup: Duration::from_millis(10),
        repeat: 100,
        pin: PinPolicy::None,
        ..SweepConfig::quick("w")
    };
    let topology = Topology::detect().unwrap();
    // 2 series x 2 thread counts x 100 rounds of 310 ms: two minutes if nothing stops it.
    let stopper = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(1500));
        interrupt::request_stop();
    });
    let started = Instant::now();
    let report = sweep(
        &cfg,
        &topology,
        vec![spinning_series("a"), spinning_series("b")],
    )
    .unwrap();
    stopper.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(report.interrupted);
    // At least the first round's first points ran (4 runs of 310 ms before 1.5 s), each kept.
    let a = &report.series[0];
    assert_eq!(a.points[0].threads, 1);
    assert!(a.points.iter().all(|p| !p.runs_ops_per_sec.is_empty()));
    assert!(report.series.iter().all(|s| s.points.len() <= 2));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["interrupted"], true);
    interrupt::clear();
    assert!(!interrupt::stop_requested());
}
