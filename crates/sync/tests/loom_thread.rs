//! loom models of the shim's scoped threads and channel: a join sees everything its thread
//! did, a scope waits for the threads it did not join, and a channel's messages arrive in
//! order, once each, with its end seen after the last, whether the receiver sleeps or not.
#![cfg(loom)]

use pglocks_sync::atomic::{AtomicUsize, Ordering};
use pglocks_sync::channel;

/// loom with LOOM_MAX_PREEMPTIONS, or 2 when it is unset.
fn model(f: impl Fn() + Sync + Send + 'static) {
    pglocks_sync::loom_builder(2).check(f);
}

#[test]
fn a_join_and_the_scopes_end_see_what_their_threads_did() {
    model(|| {
        let (joined, unjoined) = (AtomicUsize::new(0), AtomicUsize::new(0));
        pglocks_sync::thread::scope(|s| {
            s.spawn(|| unjoined.store(1, Ordering::Relaxed));
            let h = s.spawn(|| {
                joined.store(1, Ordering::Relaxed);
                2
            });
            assert_eq!(h.join().unwrap(), 2);
            assert_eq!(joined.load(Ordering::Relaxed), 1);
        });
        assert_eq!(unjoined.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn a_bounded_channels_messages_arrive_in_order_then_its_end() {
    model(|| {
        let (tx, rx) = channel::bounded(1);
        pglocks_sync::thread::scope(|s| {
            s.spawn(move || {
                tx.send(1).unwrap();
                tx.send(2).unwrap();
            });
            assert_eq!(rx.recv(), Ok(1));
            assert_eq!(rx.recv(), Ok(2));
            assert_eq!(rx.recv(), Err(channel::RecvError));
        });
    });
}

#[test]
fn a_sender_waiting_for_room_is_released_when_the_receiver_goes() {
    model(|| {
        let (tx, rx) = channel::bounded(1);
        tx.send(1).unwrap();
        pglocks_sync::thread::scope(|s| {
            let h = s.spawn(move || tx.send(2));
            drop(rx);
            assert_eq!(h.join().unwrap(), Err(channel::SendError(2)));
        });
    });
}
