//! loom models of the shared memory message queue, on a 64-byte ring:
//! - two messages, the second of which wraps around the ring's end and is larger than the ring,
//!   go from a sleeping-when-full sender to a sleeping-when-empty receiver (with and without
//!   15's batching): every byte arrives once, in order, and neither end sleeps through the
//!   other's latch-set;
//! - a receiver asleep on an empty ring wakes with `Detached` when the sender detaches, and a
//!   sender asleep on a full ring wakes with `Detached` when the receiver detaches;
//! - a non-blocking send that would block returns `WouldBlock` with part of the message written,
//!   sleeps on its latch, and completes once the receiver gives bytes back.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-shmmq --test loom_shmmq --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_proc::{Backend, ProcTable};
use pglocks_shmmq::{ShmMq, ShmMqConfig, ShmMqHandle, ShmMqResult, SHM_MQ_HEADER_SIZE};

/// A queue with a 64-byte ring, its sender and receiver set.
///
/// The backends are boxed: a `Backend` is a few KB, and loom's threads have small stacks.
fn queue(batch: bool) -> (Arc<ShmMq>, Box<Backend>, Box<Backend>) {
    let config = ShmMqConfig {
        batch_send_pending: batch,
    };
    let mq = Arc::new(ShmMq::new(SHM_MQ_HEADER_SIZE + 64, config).unwrap());
    let procs = ProcTable::new(2);
    let (mut s, mut r) = (
        Box::new(procs.attach().unwrap()),
        Box::new(procs.attach().unwrap()),
    );
    mq.set_sender(&mut s).unwrap();
    mq.set_receiver(&mut r).unwrap();
    (mq, s, r)
}

/// Message `i` of `len` bytes.
fn message(i: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| i.wrapping_mul(50).wrapping_add(k as u8))
        .collect()
}

fn two_messages_wrap(batch: bool) {
    pglocks_sync::loom_builder(2).check(move || {
        let (mq, mut s, mut r) = queue(batch);
        // 8 + 24 = 32 bytes; then 8 + 72 = 80 bytes from offset 32: it wraps at 64 and is more
        // than the whole ring, so it goes through in pieces.
        let lens = [24usize, 72];
        let sender = {
            let mq = Arc::clone(&mq);
            loom::thread::spawn(move || {
                let mut h = ShmMqHandle::attach(mq, &mut s).unwrap();
                for (i, len) in lens.iter().enumerate() {
                    let res = h.send(&mut s, &message(i as u8, *len), false, false);
                    assert_eq!(res, Ok(ShmMqResult::Success(())));
                }
                h.detach(&mut s).unwrap();
            })
        };
        let mut h = ShmMqHandle::attach(mq, &mut r).unwrap();
        for (i, len) in lens.iter().enumerate() {
            let want = message(i as u8, *len);
            assert_eq!(
                h.receive(&mut r, false),
                Ok(ShmMqResult::Success(&want[..])),
                "message {i}"
            );
        }
        assert_eq!(h.receive(&mut r, false), Ok(ShmMqResult::Detached));
        sender.join().unwrap();
    });
}

#[test]
fn messages_that_wrap_arrive_whole_and_once() {
    two_messages_wrap(true);
}

#[test]
fn messages_that_wrap_arrive_whole_and_once_without_batching() {
    two_messages_wrap(false);
}

/// One end detaches on another thread while this one waits: the receiver on an empty ring, or
/// the sender on a full one (8 + 72 bytes do not fit in 64). The waiter gets `Detached`, whether
/// it saw the flag before sleeping or was woken by the detach's latch-set.
fn detach_wakes_the_waiting_end(waiter_receives: bool) {
    pglocks_sync::loom_builder(3).check(move || {
        let (mq, s, r) = queue(true);
        let (mut waiter, mut leaver) = if waiter_receives { (r, s) } else { (s, r) };
        let other = {
            let mq = Arc::clone(&mq);
            loom::thread::spawn(move || {
                let h = ShmMqHandle::attach(mq, &mut leaver).unwrap();
                h.detach(&mut leaver).unwrap();
            })
        };
        let mut h = ShmMqHandle::attach(mq, &mut waiter).unwrap();
        let res = if waiter_receives {
            h.receive(&mut waiter, false).map(|r| r.is_success())
        } else {
            h.send(&mut waiter, &message(1, 72), false, true)
                .map(|r| r.is_success())
        };
        assert_eq!(res, Ok(false));
        assert!(h.queue().is_detached());
        other.join().unwrap();
    });
}

#[test]
fn a_sender_detaching_wakes_a_sleeping_receiver() {
    detach_wakes_the_waiting_end(true);
}

#[test]
fn a_receiver_detaching_wakes_a_sleeping_sender() {
    detach_wakes_the_waiting_end(false);
}

#[test]
fn a_nowait_send_that_would_block_completes_after_the_receiver_reads() {
    pglocks_sync::loom_builder(2).check(|| {
        let (mq, mut s, mut r) = queue(true);
        let receiver = {
            let mq = Arc::clone(&mq);
            loom::thread::spawn(move || {
                let mut h = ShmMqHandle::attach(mq, &mut r).unwrap();
                for i in 0..2u8 {
                    let want = message(i, 40);
                    assert_eq!(
                        h.receive(&mut r, false),
                        Ok(ShmMqResult::Success(&want[..]))
                    );
                }
            })
        };
        let mut h = ShmMqHandle::attach(mq, &mut s).unwrap();
        let first = h.send(&mut s, &message(0, 40), true, true);
        assert_eq!(first, Ok(ShmMqResult::Success(())));
        // 48 bytes are in the ring; the second message's 48 do not fit until the receiver gives
        // the first back.
        let second = message(1, 40);
        loop {
            match h.send(&mut s, &second, true, true).unwrap() {
                ShmMqResult::Success(()) => break,
                ShmMqResult::WouldBlock => {
                    // Retry when the latch is set (a lost latch-set deadlocks the model).
                    s.wait_latch(None);
                    s.reset_latch();
                }
                ShmMqResult::Detached => panic!("detached"),
            }
        }
        receiver.join().unwrap();
    });
}
