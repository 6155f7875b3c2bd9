//! The queue's limits at PostgreSQL's own sizes, each at, just below and just above it:
//! `MAXNUMMESSAGES` (4096): a backend 4096 messages behind still reads every one, a backend
//! 4097 behind is reset (`SICleanupQueue` in sinvaladt.c) and the sender goes on, never blocked
//! by it; and `MaxBackends` entries: `MAX_BACKENDS` (2^18 − 1) configured, one entry more than
//! configured refused with "sorry, too many clients already" (`SharedInvalBackendInit`).
#![cfg(not(loom))]

use pglocks_lwlock::AtomicLwLock;
use pglocks_proc::{ProcTable, MAX_BACKENDS};
use pglocks_sinval::{
    SharedInvalidationMessage, SinvalCheck, SinvalConfig, SinvalError, SinvalQueue, MAXNUMMESSAGES,
};

type Queue = SinvalQueue<AtomicLwLock>;

fn msgs(from: u32, n: u32) -> Vec<SharedInvalidationMessage> {
    (from..from + n)
        .map(|i| SharedInvalidationMessage::catcache(1, 0, i))
        .collect()
}

/// A queue of PostgreSQL's size with a send-only sender (the cleanup ignores it) and one
/// backend that reads nothing while `behind` messages are sent, in one call or one at a time;
/// returns what that backend then receives: (messages, reset, the first message's number).
fn lag_by(behind: u32, check: SinvalCheck, one_at_a_time: bool) -> (u64, bool, Option<u32>) {
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let q = Queue::new(&SinvalConfig::new(2, check)).unwrap();
    assert_eq!(q.max_messages(), MAXNUMMESSAGES);
    let _sender = q.backend_init(&mut b, true).unwrap();
    let mut idle = q.backend_init(&mut b, false).unwrap();
    if one_at_a_time {
        for i in 0..behind {
            q.insert_data_entries(&mut b, &msgs(i, 1)).unwrap();
        }
    } else {
        // Sent in WRITE_QUANTUM chunks of 64; the sender is never held up by the laggard.
        q.insert_data_entries(&mut b, &msgs(0, behind)).unwrap();
    }
    let reset_before_reading = q.snapshot(&mut b, idle.index()).unwrap().reset_state;
    let mut seen = vec![];
    let got = q
        .receive_shared_invalid_messages(&mut b, &mut idle, |m| seen.push(m.object), || {})
        .unwrap();
    assert_eq!(got.reset, reset_before_reading);
    assert_eq!(seen.len() as u64, got.messages);
    if !got.reset {
        assert_eq!(
            seen,
            (0..behind).collect::<Vec<_>>(),
            "every message, in order"
        );
    }
    // Either way the backend is caught up: the next message is read normally.
    q.insert_data_entries(&mut b, &msgs(behind, 1)).unwrap();
    let mut next = vec![];
    let again = q
        .receive_shared_invalid_messages(&mut b, &mut idle, |m| next.push(m.object), || {})
        .unwrap();
    assert_eq!((again.reset, next), (false, vec![behind]));
    (got.messages, got.reset, seen.first().copied())
}

#[test]
fn a_backend_4096_behind_reads_everything_and_4097_behind_is_reset() {
    let n = MAXNUMMESSAGES as u32;
    assert_eq!(n, 4096);
    for check in [SinvalCheck::Locked, SinvalCheck::WaitFree] {
        for one in [false, true] {
            let case = format!("{check:?}, one at a time: {one}");
            assert_eq!(lag_by(n - 1, check, one), (4095, false, Some(0)), "{case}");
            assert_eq!(lag_by(n, check, one), (4096, false, Some(0)), "{case}");
            assert_eq!(lag_by(n + 1, check, one), (0, true, None), "{case}");
        }
    }
}

#[test]
fn only_the_backend_more_than_4096_behind_is_reset() {
    let n = MAXNUMMESSAGES as u32;
    for one_at_a_time in [false, true] {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let q = Queue::new(&SinvalConfig::new(3, SinvalCheck::WaitFree)).unwrap();
        let _sender = q.backend_init(&mut b, true).unwrap();
        let mut first = q.backend_init(&mut b, false).unwrap();
        let mut second = q.backend_init(&mut b, false).unwrap();
        // `second` reads message 0, then both stop reading while 4096 more are sent: `first`
        // ends 4097 behind, `second` exactly 4096.
        q.insert_data_entries(&mut b, &msgs(0, 1)).unwrap();
        assert_eq!(
            q.accept_invalidation_messages(&mut b, &mut second)
                .unwrap()
                .messages,
            1
        );
        if one_at_a_time {
            for i in 1..=n {
                q.insert_data_entries(&mut b, &msgs(i, 1)).unwrap();
            }
        } else {
            q.insert_data_entries(&mut b, &msgs(1, n)).unwrap();
        }
        assert!(q.snapshot(&mut b, first.index()).unwrap().reset_state);
        assert!(!q.snapshot(&mut b, second.index()).unwrap().reset_state);
        let got = q.accept_invalidation_messages(&mut b, &mut first).unwrap();
        assert_eq!((got.messages, got.reset), (0, true));
        let mut seen = vec![];
        let got = q
            .receive_shared_invalid_messages(&mut b, &mut second, |m| seen.push(m.object), || {})
            .unwrap();
        assert!(!got.reset);
        assert_eq!(seen, (1..=n).collect::<Vec<_>>());
    }
}

#[test]
fn a_sender_never_waits_for_backends_that_do_not_read() {
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let q = Queue::new(&SinvalConfig::new(3, SinvalCheck::WaitFree)).unwrap();
    // The sender reads nothing either: it is reset like the others, not blocked.
    let mut sender = q.backend_init(&mut b, false).unwrap();
    let mut idle = q.backend_init(&mut b, false).unwrap();
    q.insert_data_entries(&mut b, &msgs(0, 3 * MAXNUMMESSAGES as u32 + 7))
        .unwrap();
    let v = q.snapshot(&mut b, 0).unwrap();
    assert!(
        v.max_msg_num - v.min_msg_num <= MAXNUMMESSAGES as u32,
        "{v:?}"
    );
    for me in [&mut sender, &mut idle] {
        let got = q.accept_invalidation_messages(&mut b, me).unwrap();
        assert!(got.reset);
    }
    let counters = b.take_stats().events.counters();
    assert!(counters.contains(&("sinval.resets", 2)), "{counters:?}");
}

#[test]
fn entries_up_to_max_backends_are_configured_and_one_more_is_refused() {
    for ok in [1, MAX_BACKENDS - 1, MAX_BACKENDS] {
        assert_eq!(
            SinvalConfig::new(ok, SinvalCheck::WaitFree).validate(),
            Ok(())
        );
    }
    let e = SinvalConfig::new(MAX_BACKENDS + 1, SinvalCheck::WaitFree)
        .validate()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid shared invalidation setting: max_backends must be 1 to 262143, not 262144"
    );
    // A queue of MAX_BACKENDS entries is built (3 MB of ProcState).
    let q = Queue::new(&SinvalConfig::new(MAX_BACKENDS, SinvalCheck::WaitFree)).unwrap();
    drop(q);
}

#[test]
fn registering_one_backend_more_than_the_entries_is_refused() {
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    for size in [1, 2, 8] {
        let q = Queue::new(&SinvalConfig::new(size, SinvalCheck::WaitFree)).unwrap();
        let mut in_use: Vec<_> = (0..size - 1)
            .map(|_| q.backend_init(&mut b, false).unwrap())
            .collect();
        // Just below: the last entry is free.
        in_use.push(q.backend_init(&mut b, false).unwrap());
        assert_eq!(in_use.last().unwrap().index(), size - 1);
        // At: full; one more is refused, and the write lock is not left held.
        let e = q.backend_init(&mut b, false).unwrap_err();
        assert_eq!(e, SinvalError::TooManyClients { max: size });
        assert_eq!(
            e.to_string(),
            format!("sorry, too many clients already (all {size} sinval entries are in use)")
        );
        assert!(b.held_lwlocks.is_empty());
        // One leaves: its entry is taken again.
        let gone = in_use.remove(0);
        let index = gone.index();
        q.cleanup_invalidation_state(&mut b, gone).unwrap();
        assert_eq!(q.backend_init(&mut b, false).unwrap().index(), index);
    }
}
