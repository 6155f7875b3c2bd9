//! Parallel apply on a simulated many-core machine: the leader apply worker is a virtual
//! thread, the parallel apply workers it launches are virtual threads started mid-run on CPUs
//! of their own, and every wait between them (the worker's attach, the queue, the stream and
//! transaction locks, the join at the end) is in virtual time; and the spool files' I/O is
//! charged as the system calls `BufFile` makes.
#![cfg(not(loom))]

use pglocks_apply::spool::{self, SpoolWriter, BLCKSZ};
use pglocks_apply::{apply, publish, ApplyConfig, Message, PublisherConfig, Streaming};
use pglocks_lwlock::AtomicLwLock;
use pglocks_sim::{Placement, Profile, SimThread};
use pglocks_sync::time::{Duration, Instant};
use std::cell::Cell;

/// The simulated Westmere.
fn westmere() -> Profile {
    Profile::find("westmere-80").unwrap()
}

/// Runs `body` as one virtual thread on CPU 0 of `profile`; returns the virtual time it took.
fn simulate(profile: &Profile, body: impl FnOnce()) -> Duration {
    let took = Cell::new(Duration::ZERO);
    let thread = SimThread {
        placement: Placement::Cpu(0),
        body: Box::new(|| {
            let start = Instant::now();
            body();
            took.set(start.elapsed());
        }),
    };
    pglocks_sim::run(profile, vec![thread], Duration::from_secs(60)).unwrap();
    took.get()
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "needs the simulator's build (--cfg pglocks_sim)"
)]
fn two_streamed_transactions_are_applied_by_two_workers_at_once_in_virtual_time() {
    let profile = westmere();
    // Each applied change costs this much CPU work, which dwarfs the model's own.
    let row_work = 20_000;
    let per_change = simulate(&profile, || {
        std::hint::black_box(pglocks_sync::hint::busy_work(row_work, 1));
    });
    // Two transactions of `n` inserts running at once on the publisher, streamed in chunks.
    let n = 400;
    let pcfg = PublisherConfig {
        tables: 1,
        small_changes: 1,
        large_changes: n,
        large_every: 1,
        work_mem_changes: 50,
        streaming: true,
        concurrent: 2,
        abort_ratio: 0.0,
        existing_ratio: 0.0,
        seed: 7,
    };
    let published = publish(&pcfg, 2);
    let cfg = ApplyConfig {
        streaming: Streaming::Parallel,
        max_parallel_apply_workers: 2,
        row_work,
        ..ApplyConfig::default()
    };
    let outcome = Cell::new(None);
    let elapsed = simulate(&profile, || {
        let bytes = published.messages.iter().map(Message::to_bytes);
        outcome.set(Some(apply::<AtomicLwLock>(&cfg, bytes)));
    });
    let got = outcome.take().unwrap().unwrap();
    assert_eq!(got.applied.rows, published.rows, "every change applied");
    assert_eq!(got.applied.rows.len(), 2 * n);
    assert_eq!(got.applied.commit_order, published.commit_order);
    assert_eq!(got.stats.streamed_in_parallel, 2, "{:?}", got.stats);
    assert_eq!(got.stats.workers_launched, 2, "{:?}", got.stats);
    assert_eq!(got.stats.streamed_serialized, 0, "{:?}", got.stats);
    // The leader, then the two workers it joined.
    assert_eq!(got.backends.len(), 3);
    // The leader waited, in virtual time, for each worker's `n` changes...
    let one_worker = per_change * n as u32;
    assert!(
        elapsed >= one_worker,
        "{elapsed:?} elapsed; one worker's changes take {one_worker:?}"
    );
    // ...which the two workers applied at the same time, on CPUs of their own.
    assert!(
        elapsed < one_worker * 2,
        "{elapsed:?} elapsed; both workers' changes one after the other take {:?}",
        one_worker * 2
    );
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "needs the simulator's build (--cfg pglocks_sim)"
)]
fn a_spool_file_costs_the_system_calls_buffile_makes() {
    let profile = westmere();
    let one_call = simulate(&profile, pglocks_sync::os::system_call);
    assert!(one_call > Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    // Three and a half blocks of records of 100 bytes (a 4-byte length and 96 bytes).
    let records = (BLCKSZ * 7 / 2) / 100;
    let bytes = records * 100;
    assert!(bytes > 3 * BLCKSZ && bytes < 4 * BLCKSZ);
    let (mut wrote, mut read) = (Duration::ZERO, Duration::ZERO);
    let replayed = Cell::new(0);
    simulate(&profile, || {
        let start = Instant::now();
        let mut w = SpoolWriter::create(dir.path(), 16_600, 731).unwrap();
        for _ in 0..records {
            w.write(&[7u8; 96]).unwrap();
        }
        let path = w.finish().unwrap();
        wrote = start.elapsed();
        let start = Instant::now();
        let n = spool::replay(&path, |m| {
            assert_eq!(m, [7u8; 96]);
            Ok::<_, std::io::Error>(())
        })
        .unwrap();
        read = start.elapsed();
        replayed.set(n);
    });
    assert_eq!(replayed.get(), records);
    // open, three full blocks written, the last part flushed.
    assert_eq!(wrote, one_call * 5);
    // open, four blocks read, the read that finds the end, unlink.
    assert_eq!(read, one_call * 7);
}
