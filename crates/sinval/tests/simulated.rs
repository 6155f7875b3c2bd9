//! The invalidation queue on a simulated machine: the ring slots a writer fills and a reader
//! copies out are charged as touches of their lines.

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, SimThread};
use pglocks_sinval::{SharedInvalidationMessage, SinvalCheck, SinvalConfig, SinvalQueue};

/// Touches of a simulated run in which one backend queues `n` messages and another reads them.
fn touches(n: u32) -> u64 {
    let q: SinvalQueue<AtomicLwLock<Pg96Layout>> =
        SinvalQueue::new(&SinvalConfig::new(2, SinvalCheck::WaitFree)).unwrap();
    let procs = ProcTable::new(2);
    let msgs: Vec<_> = (0..n)
        .map(|i| SharedInvalidationMessage::relcache(1, i))
        .collect();
    let team = vec![SimThread::on(0, || {
        let mut b = procs.attach().unwrap();
        let mut reader = q.backend_init(&mut b, false).unwrap();
        q.insert_data_entries(&mut b, &msgs).unwrap();
        let got = q.accept_invalidation_messages(&mut b, &mut reader).unwrap();
        assert_eq!(got.messages, u64::from(n));
    })];
    pglocks_sim::run_tallied("westmere-80", team).touches
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn the_slots_written_and_read_are_charged() {
    // 32 messages fill 8 lines of the ring (16 bytes each) where one message fills one: 7 more
    // lines written and 7 more read, with the same lock operations (one chunk, one batch).
    let one = touches(1);
    let many = touches(32);
    assert!(many >= one + 14, "{one} -> {many}");
}

/// Transfers by structure of a simulated run in which two backends (CPUs 0 and 10, on the two
/// packages) each queue a message and then read the queue, `rounds` times.
fn by_structure(check: SinvalCheck, rounds: u32) -> Outcome {
    let q: SinvalQueue<AtomicLwLock<Pg96Layout>> =
        SinvalQueue::new(&SinvalConfig::new(2, check)).unwrap();
    let procs = ProcTable::new(2);
    let (q, procs) = (&q, &procs);
    let team = SimThread::team(&[0, 10], |_| {
        move || {
            let mut b = procs.attach().unwrap();
            let mut mine = q.backend_init(&mut b, false).unwrap();
            for i in 0..rounds {
                let m = SharedInvalidationMessage::relcache(1, i);
                q.insert_data_entries(&mut b, &[m]).unwrap();
                q.accept_invalidation_messages(&mut b, &mut mine).unwrap();
            }
        }
    });
    pglocks_sim::run_tallied("westmere-80", team)
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn the_queue_is_placed_in_the_map_under_postgresqls_names() {
    for check in [SinvalCheck::Locked, SinvalCheck::WaitFree] {
        let found = by_structure(check, 50);
        let mut names = vec![
            "SInvalReadLock",
            "SInvalWriteLock",
            "SISeg",
            "SISeg->buffer",
        ];
        if check == SinvalCheck::WaitFree {
            // Each writer sets the other's hasMessages.
            names.push("SISeg->procState");
        }
        for name in names {
            assert!(
                found.transfers_of(name) > 0,
                "{check:?}: no transfers of {name}: {found:?}"
            );
        }
        // Nothing of the queue is charged outside the map (where a line outside it is named
        // after the source line that first missed on it).
        assert!(
            !found.outside_the_map().iter().any(|s| [
                "crates/sinval/",
                "crates/lwlock/",
                "crates/spin/"
            ]
            .iter()
            .any(|c| s.name.contains(c))),
            "{check:?}: {found:?}"
        );
    }
}
