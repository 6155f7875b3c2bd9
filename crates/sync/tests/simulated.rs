//! The shim's scoped threads and channel on a simulated machine: a thread started mid-run is a
//! virtual thread of its own, and a join, a receive from an empty channel and a send to a full
//! one block in virtual time until the other side has done its part.
#![cfg(not(loom))]

use pglocks_sim::{Placement, Profile, SimThread};
use pglocks_sync::channel;
use pglocks_sync::hint::busy_work;
use pglocks_sync::time::{Duration, Instant};
use std::cell::Cell;

/// Steps of work the consumer does per message.
const WORK: u32 = 200_000;
/// Messages sent.
const MESSAGES: u64 = 20;
/// The channel's bound.
const CAP: usize = 4;

/// The virtual time `steps` of `busy_work` take on one thread of `profile`: measured alone, on
/// a machine of its own.
fn work_time(profile: &Profile, steps: u32) -> Duration {
    let took = Cell::new(Duration::ZERO);
    let body = || {
        let start = Instant::now();
        std::hint::black_box(busy_work(steps, 1));
        took.set(start.elapsed());
    };
    let one = SimThread {
        placement: Placement::Cpu(0),
        body: Box::new(body),
    };
    pglocks_sim::run(profile, vec![one], Duration::from_secs(1)).unwrap();
    took.get()
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "needs the simulator's build (--cfg pglocks_sim)"
)]
fn a_scoped_consumer_runs_beside_its_producer_and_the_waits_are_virtual_time() {
    let profile = Profile::find("westmere-80").unwrap();
    let per_message = work_time(&profile, WORK);
    assert!(per_message > Duration::ZERO);
    // (the producer's clock after its last send, after the join, the sum received)
    let seen = Cell::new((Duration::ZERO, Duration::ZERO, 0u64));
    let producer = || {
        let start = Instant::now();
        let (tx, rx) = channel::bounded::<u64>(CAP);
        let (sent, sum) = pglocks_sync::thread::scope(|s| {
            let consumer = s.spawn(move || {
                let mut sum = 0;
                for m in rx.iter() {
                    std::hint::black_box(busy_work(WORK, m));
                    sum += m;
                }
                sum
            });
            for m in 1..=MESSAGES {
                tx.send(m).unwrap();
            }
            let sent = start.elapsed();
            drop(tx);
            (sent, consumer.join().unwrap())
        });
        seen.set((sent, start.elapsed(), sum));
    };
    let team = vec![SimThread {
        placement: Placement::Cpu(0),
        body: Box::new(producer),
    }];
    let out = pglocks_sim::run(&profile, team, Duration::from_secs(10)).unwrap();
    let (sent, joined, sum) = seen.get();
    assert_eq!(sum, MESSAGES * (MESSAGES + 1) / 2, "every message arrived");
    // The producer could send the last message only once the consumer had taken all but the
    // channel's worth before it: it waited for room in virtual time.
    let room = per_message * (MESSAGES as u32 - CAP as u32 - 1);
    assert!(
        sent >= room,
        "sent all after {sent:?}, before room was made ({room:?})"
    );
    // The join returned only after the consumer's work on every message.
    let all = per_message * MESSAGES as u32;
    assert!(
        joined >= all,
        "joined after {joined:?}, the work takes {all:?}"
    );
    assert!(out.virtual_time >= all);
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "needs the simulator's build (--cfg pglocks_sim)"
)]
fn threads_started_in_a_scope_run_at_once_on_cpus_of_their_own() {
    let profile = Profile::find("westmere-80").unwrap();
    let per = work_time(&profile, WORK);
    let took = Cell::new(Duration::ZERO);
    let body = || {
        let start = Instant::now();
        pglocks_sync::thread::scope(|s| {
            for i in 0..8 {
                s.spawn(move || std::hint::black_box(busy_work(WORK, i)));
            }
        });
        took.set(start.elapsed());
    };
    let team = vec![SimThread {
        placement: Placement::Cpu(0),
        body: Box::new(body),
    }];
    pglocks_sim::run(&profile, team, Duration::from_secs(1)).unwrap();
    // Eight threads' work in parallel: about one thread's, not eight.
    assert!(took.get() >= per, "{:?} < {per:?}", took.get());
    assert!(took.get() < per * 2, "{:?} >= 2 × {per:?}", took.get());
}
