//! Teams on a simulated machine: deterministic, in virtual time, with the same report as a real
//! run.

use pglocks_harness::{run_team, TeamRun, TeamSpec};
use pglocks_proc::{Backend, ProcTable};
use pglocks_sim::Profile;
use pglocks_sync::atomic::{AtomicU64, Ordering};
use pglocks_sync::CachePadded;
use std::sync::Arc;
use std::time::Duration;

fn spec(threads: usize, profile: &str) -> TeamSpec {
    TeamSpec {
        threads,
        duration: Duration::from_millis(2),
        warmup: Duration::from_micros(500),
        pin_order: vec![],
        sample_every: 8,
        sim: Some(Arc::new(Profile::find(profile).unwrap())),
        until: None,
    }
}

/// Every thread bumps one shared counter, then does `work` steps of private work.
fn contended(spec: &TeamSpec, work: u32) -> (TeamRun, u64) {
    let procs = ProcTable::new(spec.threads);
    let counter = CachePadded::new(AtomicU64::new(0));
    let run = run_team(spec, &procs, |_| {
        let counter = &counter;
        move |_b: &mut Backend| -> Result<(), std::io::Error> {
            counter.fetch_add(1, Ordering::Relaxed);
            std::hint::black_box(pglocks_sync::hint::busy_work(work, 1));
            Ok(())
        }
    })
    .unwrap();
    (run, counter.load(Ordering::Relaxed))
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn two_runs_of_the_same_simulation_are_identical() {
    let s = spec(8, "opteron-48");
    let (a, _) = contended(&s, 50);
    let (b, _) = contended(&s, 50);
    assert_eq!(a.per_thread_ops, b.per_thread_ops);
    assert_eq!(a.elapsed, b.elapsed);
    assert_eq!(a.latency, b.latency);
    assert_eq!(a.sim.unwrap().ops, b.sim.unwrap().ops);
    assert!(a.total_ops() > 0);
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_run_with_a_count_goes_on_until_it_has_counted_or_reached_its_cap() {
    use pglocks_harness::RunLength;
    // Each operation sleeps 100 µs of virtual time (and its timer slack): 2 ms holds a dozen.
    let slow = |spec: &TeamSpec| {
        let procs = ProcTable::new(spec.threads);
        let calls = AtomicU64::new(0);
        let run = run_team(spec, &procs, |_| {
            let calls = &calls;
            move |_b: &mut Backend| -> Result<(), std::io::Error> {
                calls.fetch_add(1, Ordering::Relaxed);
                pglocks_sync::time::sleep(Duration::from_micros(100));
                Ok(())
            }
        })
        .unwrap();
        (run, calls.load(Ordering::Relaxed))
    };
    let mut s = spec(2, "westmere-80");
    let (fixed, _) = slow(&s);
    assert!(fixed.total_ops() < 100, "{}", fixed.total_ops());
    s.until = Some(RunLength {
        warmup_ops: 50,
        warmup_cap: Duration::from_secs(1),
        ops: 300,
        cap: Duration::from_secs(1),
    });
    let (counted, calls) = slow(&s);
    // It counted its 300, overshooting by at most a poll's worth (two threads, 1 ms).
    assert!(
        (300..330).contains(&counted.total_ops()),
        "{}",
        counted.total_ops()
    );
    assert!(
        counted.elapsed > Duration::from_millis(10),
        "{:?}",
        counted.elapsed
    );
    // The warm-up did its 50 first, and they are not counted.
    assert!(calls >= counted.total_ops() + 50, "{calls}");
    // A count out of reach ends at the cap.
    s.until = Some(RunLength {
        ops: 1_000_000,
        cap: Duration::from_millis(8),
        ..s.until.unwrap()
    });
    let (capped, _) = slow(&s);
    assert!(
        capped.elapsed >= Duration::from_millis(8) && capped.elapsed < Duration::from_millis(9),
        "{:?}",
        capped.elapsed
    );
    assert!(capped.total_ops() < 300, "{}", capped.total_ops());
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_simulated_run_measures_virtual_time() {
    let s = spec(4, "westmere-80");
    let (run, count) = contended(&s, 50);
    // The measured phase is the virtual duration, however long the host took, plus what the
    // controller's sleeps overslept (the profile's timer slack).
    assert!(
        run.elapsed >= Duration::from_millis(2) && run.elapsed < Duration::from_micros(2200),
        "{:?}",
        run.elapsed
    );
    // Every operation counted was done (and more: the warm-up's).
    assert!(count >= run.total_ops());
    let cost = run.sim.unwrap();
    assert!(cost.ops >= run.total_ops(), "{cost:?}");
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn contention_costs_line_transfers_and_distance_costs_more() {
    // One thread: the counter stays in its cache. Two on one die, then two in different
    // packages, with more work between increments than a transfer's half (for which a CPU keeps
    // the line it got): each increment is a transfer, a longer one across packages. Per thread,
    // an increment then takes the work plus a transfer.
    let per_thread = |threads: usize, pin: &[usize]| {
        let mut s = spec(threads, "westmere-80");
        if !pin.is_empty() {
            s.pin_order = pin.to_vec();
        }
        contended(&s, 300).0.ops_per_sec() / threads as f64
    };
    let one = per_thread(1, &[]);
    let near = per_thread(2, &[0, 1]);
    let far = per_thread(2, &[0, 79]);
    assert!(one > 1.25 * near && near > 1.3 * far, "{one} {near} {far}");
}

/// A companion that counts its rounds (a 100 µs sleep each) until stopped, beside a team of
/// `spec.threads`; returns its rounds, whether it saw the stop (and so was joined only after
/// it), and the team's run.
fn with_companion(spec: &TeamSpec) -> (u64, bool, TeamRun) {
    use pglocks_harness::{run_team_with, Companion};
    use pglocks_sync::atomic::AtomicBool;
    let procs = ProcTable::new(spec.threads);
    let (rounds, stop, stopped) = (
        AtomicU64::new(0),
        AtomicBool::new(false),
        AtomicBool::new(false),
    );
    let companion = Companion {
        name: "counter",
        body: Box::new(|| {
            // At least one round however late it starts (a loaded host may run it only after
            // the stop).
            loop {
                rounds.fetch_add(1, Ordering::Relaxed);
                if stop.load(Ordering::Acquire) {
                    break;
                }
                pglocks_sync::time::sleep(Duration::from_micros(100));
            }
            stopped.store(true, Ordering::Release);
        }),
        stop: Box::new(|| stop.store(true, Ordering::Release)),
    };
    let run = run_team_with(spec, &procs, vec![companion], |_| {
        |_b: &mut Backend| -> Result<(), std::io::Error> { Ok(()) }
    })
    .unwrap();
    let rounds = rounds.load(Ordering::Relaxed);
    (rounds, stopped.load(Ordering::Acquire), run)
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_companion_runs_beside_the_team_in_virtual_time_and_stops_after_it() {
    let s = spec(4, "opteron-48");
    let (rounds, stopped, run) = with_companion(&s);
    assert!(stopped, "the companion never saw its stop");
    assert!(run.total_ops() > 0);
    // It ran through the warm-up and the measured phase, 2.5 ms of virtual time: about 25
    // rounds of 100 µs (plus the timer slack), whatever the host took.
    assert!((10..=26).contains(&rounds), "{rounds}");
    assert_eq!(with_companion(&s).0, rounds);
}

#[test]
fn a_companion_runs_beside_a_team_of_host_threads_too() {
    // Host time: long enough that a loaded machine still runs the team in it.
    let s = TeamSpec {
        sim: None,
        duration: Duration::from_millis(50),
        warmup: Duration::from_millis(10),
        ..spec(2, "opteron-48")
    };
    let (rounds, stopped, run) = with_companion(&s);
    assert!(stopped && rounds > 0 && run.total_ops() > 0);
}
