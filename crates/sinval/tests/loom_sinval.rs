//! loom models of the shared invalidation queue:
//! - the wait-free check (9.2+): a writer publishes two messages in two inserts while a reader
//!   checks; whatever the interleaving — the reader seeing the flag, seeing it clear, or
//!   clearing it just as the writer sets it for the second message — a check made after the
//!   writer is done finds every message, in order, once;
//! - the same for the locked check (≤ 9.1);
//! - two writers and one reader: each message read exactly once;
//! - a ring of two slots that a writer overflows while the reader reads: the reader gets a
//!   prefix of the messages, then (if it was overtaken) a reset, then only a contiguous tail —
//!   never a message lost without a reset, never a stale slot.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-sinval --test loom_sinval --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_sinval::{SharedInvalidationMessage as Msg, SinvalCheck, SinvalConfig, SinvalQueue};
use pglocks_spin::PgSpinLock;

type Queue = SinvalQueue<AtomicLwLock<Pg96Layout>, PgSpinLock>;

fn msg(seq: u32) -> Msg {
    Msg::catcache(0, 1, seq)
}

/// Reader and writer race; after the writer is joined, one more check must leave the reader
/// having read `0..inserts` exactly, or (only if `may_reset`) a prefix, a reset, and a tail.
fn race(check: SinvalCheck, ring: usize, inserts: u32, reads: usize, may_reset: bool) {
    let q = Arc::new(Queue::new(&SinvalConfig::new(2, check).with_ring(ring)).unwrap());
    let procs = ProcTable::new(2);
    let mut b = procs.attach().unwrap();
    let mut me = q.backend_init(&mut b, false).unwrap();
    let (q2, p2) = (Arc::clone(&q), procs.clone());
    let writer = loom::thread::spawn(move || {
        let mut b = p2.attach().unwrap();
        let _w = q2.backend_init(&mut b, true).unwrap();
        for i in 0..inserts {
            q2.insert_data_entries(&mut b, &[msg(i)]).unwrap();
        }
    });
    // None stands for a reset.
    let mut seen: Vec<Option<u32>> = vec![];
    let mut receive = |b: &mut pglocks_proc::Backend, seen: &mut Vec<Option<u32>>| {
        let got = q
            .receive_shared_invalid_messages(b, &mut me, |m| seen.push(Some(m.object)), || {})
            .unwrap();
        if got.reset {
            seen.push(None);
        }
    };
    for _ in 0..reads {
        receive(&mut b, &mut seen);
    }
    writer.join().unwrap();
    receive(&mut b, &mut seen);
    match seen.iter().rposition(Option::is_none) {
        None => assert_eq!(
            seen,
            (0..inserts).map(Some).collect::<Vec<_>>(),
            "a message was missed or repeated"
        ),
        Some(r) => {
            assert!(may_reset, "reset without overflow: {seen:?}");
            let before: Vec<u32> = seen[..r].iter().flatten().copied().collect();
            assert_eq!(
                before,
                (0..before.len() as u32).collect::<Vec<_>>(),
                "{seen:?}"
            );
            let after: Vec<u32> = seen[r + 1..].iter().flatten().copied().collect();
            let from = inserts - after.len() as u32;
            assert_eq!(after, (from..inserts).collect::<Vec<_>>(), "{seen:?}");
            assert!(from >= before.len() as u32, "{seen:?}");
        }
    }
}

#[test]
fn the_wait_free_check_never_misses_a_message() {
    pglocks_sync::loom_builder(2).check(|| race(SinvalCheck::WaitFree, 8, 2, 1, false));
}

#[test]
fn the_wait_free_check_survives_two_checks_during_the_inserts() {
    pglocks_sync::loom_builder(2).check(|| race(SinvalCheck::WaitFree, 8, 2, 2, false));
}

#[test]
fn the_locked_check_never_misses_a_message() {
    pglocks_sync::loom_builder(2).check(|| race(SinvalCheck::Locked, 8, 2, 1, false));
}

#[test]
fn an_overflowed_reader_is_told_of_its_reset() {
    pglocks_sync::loom_builder(2).check(|| race(SinvalCheck::WaitFree, 2, 3, 1, true));
}

/// Two writers and a reader: the reader, checking once while both insert and once after,
/// reads each writer's message exactly once.
#[test]
fn two_writers_and_a_wait_free_reader() {
    pglocks_sync::loom_builder(2).check(|| {
        let cfg = SinvalConfig::new(3, SinvalCheck::WaitFree).with_ring(8);
        let q = Arc::new(Queue::new(&cfg).unwrap());
        let procs = ProcTable::new(3);
        let mut b = procs.attach().unwrap();
        let mut me = q.backend_init(&mut b, false).unwrap();
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (q, procs) = (Arc::clone(&q), procs.clone());
                loom::thread::spawn(move || {
                    let mut b = procs.attach().unwrap();
                    let _w = q.backend_init(&mut b, true).unwrap();
                    q.insert_data_entries(&mut b, &[msg(w)]).unwrap();
                })
            })
            .collect();
        let mut seen = vec![];
        let mut receive = |b: &mut pglocks_proc::Backend| {
            let got = q
                .receive_shared_invalid_messages(b, &mut me, |m| seen.push(m.object), || {})
                .unwrap();
            assert!(!got.reset);
        };
        receive(&mut b);
        for w in writers {
            w.join().unwrap();
        }
        receive(&mut b);
        seen.sort_unstable();
        assert_eq!(seen, [0, 1], "a message was missed or repeated");
    });
}
