//! Round trips between a sender and a receiver thread (messages of random sizes, some larger than
//! the ring, blocking and non-blocking, gathered sends), the send with a timeout, and the typed
//! errors of misuse.
#![cfg(not(loom))]

use pglocks_proc::{Backend, ProcTable};
use pglocks_shmmq::{
    ShmMq, ShmMqConfig, ShmMqError, ShmMqHandle, ShmMqResult, MAX_ALLOC_SIZE, SHM_MQ_HEADER_SIZE,
    SHM_MQ_MINIMUM_SIZE,
};
use std::sync::Arc;
use std::time::Duration;

/// A queue whose ring holds `ring` bytes, with its sender and receiver set.
fn queue(procs: &ProcTable, ring: usize, config: ShmMqConfig) -> (Arc<ShmMq>, Backend, Backend) {
    let mq = Arc::new(ShmMq::new(SHM_MQ_HEADER_SIZE + ring, config).unwrap());
    let (mut s, mut r) = (procs.attach().unwrap(), procs.attach().unwrap());
    mq.set_sender(&mut s).unwrap();
    mq.set_receiver(&mut r).unwrap();
    (mq, s, r)
}

/// Message `i` of `len` bytes: its bytes say which message and which position.
fn message(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(31).wrapping_add(k as u64 * 7) % 251) as u8)
        .collect()
}

/// A small deterministic generator (the test's own; no shared state).
fn lcg(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *x >> 33
}

fn round_trip(config: ShmMqConfig, ring: usize, count: u64) {
    let procs = ProcTable::new(2);
    let (mq, mut s, mut r) = queue(&procs, ring, config);
    let sender = {
        let mq = Arc::clone(&mq);
        std::thread::spawn(move || {
            let mut h = ShmMqHandle::attach(mq, &mut s).unwrap();
            let mut seed = 42;
            for i in 0..count {
                // Sizes up to three rings, a quarter of them larger than the ring.
                let len = (lcg(&mut seed) as usize) % (3 * ring + 1);
                let msg = message(i, len);
                let way = lcg(&mut seed) % 3;
                let force = lcg(&mut seed) % 2 == 0;
                let res = match way {
                    0 => h.send(&mut s, &msg, false, force).unwrap(),
                    1 => {
                        // Gathered from three pieces, cut off the 8-byte grid.
                        let (a, rest) = msg.split_at(len / 3);
                        let (b, c) = rest.split_at(rest.len() / 2);
                        h.sendv(&mut s, &[a, b, c], false, force).unwrap()
                    }
                    _ => loop {
                        // Non-blocking, retried each time the latch is set.
                        match h.send(&mut s, &msg, true, force).unwrap() {
                            ShmMqResult::WouldBlock => {
                                s.wait_latch(None);
                                s.reset_latch();
                            }
                            done => break done,
                        }
                    },
                };
                assert_eq!(res, ShmMqResult::Success(()), "message {i}");
            }
            h.detach(&mut s).unwrap();
        })
    };
    let mut h = ShmMqHandle::attach(Arc::clone(&mq), &mut r).unwrap();
    let mut seed = 42;
    for i in 0..count {
        let len = (lcg(&mut seed) as usize) % (3 * ring + 1);
        lcg(&mut seed);
        lcg(&mut seed);
        let want = message(i, len);
        match h.receive(&mut r, i % 2 == 0).unwrap() {
            ShmMqResult::Success(got) => assert_eq!(got, &want[..], "message {i}"),
            ShmMqResult::WouldBlock => {
                // Retry blocking: the handle resumes the message it began.
                match h.receive(&mut r, false).unwrap() {
                    ShmMqResult::Success(got) => assert_eq!(got, &want[..], "message {i}"),
                    other => panic!("message {i}: {other:?}"),
                }
            }
            ShmMqResult::Detached => panic!("message {i}: detached early"),
        }
    }
    assert_eq!(h.receive(&mut r, false).unwrap(), ShmMqResult::Detached);
    sender.join().unwrap();
    let (read, written) = mq.counters();
    assert!(read <= written);
}

#[test]
fn random_sizes_round_trip_between_threads_with_batching() {
    round_trip(ShmMqConfig::default(), 256, 2000);
}

#[test]
fn random_sizes_round_trip_between_threads_without_batching() {
    round_trip(
        ShmMqConfig {
            batch_send_pending: false,
        },
        256,
        2000,
    );
}

#[test]
fn a_receiver_attached_before_the_sender_waits_for_it() {
    let procs = ProcTable::new(2);
    let mq = Arc::new(ShmMq::new(1024, ShmMqConfig::default()).unwrap());
    let mut r = procs.attach().unwrap();
    mq.set_receiver(&mut r).unwrap();
    let mut h = ShmMqHandle::attach(Arc::clone(&mq), &mut r).unwrap();
    assert_eq!(h.receive(&mut r, true).unwrap(), ShmMqResult::WouldBlock);
    let mq2 = Arc::clone(&mq);
    let procs2 = procs.clone();
    let sender = std::thread::spawn(move || {
        let mut s = procs2.attach().unwrap();
        std::thread::sleep(Duration::from_millis(10));
        mq2.set_sender(&mut s).unwrap();
        let mut h = ShmMqHandle::attach(mq2, &mut s).unwrap();
        assert!(h.send(&mut s, b"hello", false, true).unwrap().is_success());
        h.detach(&mut s).unwrap();
    });
    assert_eq!(
        h.receive(&mut r, false).unwrap(),
        ShmMqResult::Success(&b"hello"[..])
    );
    assert_eq!(h.receive(&mut r, false).unwrap(), ShmMqResult::Detached);
    sender.join().unwrap();
}

#[test]
fn send_with_timeout_gives_up_on_a_full_queue_and_succeeds_once_drained() {
    let procs = ProcTable::new(2);
    let (mq, mut s, mut r) = queue(&procs, 64, ShmMqConfig::default());
    let mut hs = ShmMqHandle::attach(Arc::clone(&mq), &mut s).unwrap();
    let mut hr = ShmMqHandle::attach(mq, &mut r).unwrap();
    let msg = [7u8; 40];
    let (retry, timeout) = (Duration::from_millis(2), Duration::from_millis(20));
    let first = hs.send_with_timeout(&mut s, &msg, retry, timeout).unwrap();
    assert_eq!(first, ShmMqResult::Success(()));
    // 48 of 64 bytes used: the next message goes in part, then times out.
    let t = std::time::Instant::now();
    let second = hs.send_with_timeout(&mut s, &msg, retry, timeout).unwrap();
    assert_eq!(second, ShmMqResult::WouldBlock);
    assert!(t.elapsed() >= timeout);
    // Only the same message may follow.
    assert_eq!(
        hs.send(&mut s, &[1u8; 3], true, true),
        Err(ShmMqError::SendInProgress {
            started: 40,
            now: 3
        })
    );
    assert_eq!(
        hr.receive(&mut r, true).unwrap(),
        ShmMqResult::Success(&msg[..])
    );
    // The receiver gives its 48 bytes back lazily: at its next receive, which then finds only
    // part of the second message.
    assert_eq!(hr.receive(&mut r, true).unwrap(), ShmMqResult::WouldBlock);
    let third = hs.send_with_timeout(&mut s, &msg, retry, timeout).unwrap();
    assert_eq!(third, ShmMqResult::Success(()));
    assert_eq!(
        hr.receive(&mut r, true).unwrap(),
        ShmMqResult::Success(&msg[..])
    );
    drop(hr);
    assert_eq!(
        hs.send_with_timeout(&mut s, &msg, retry, timeout).unwrap(),
        ShmMqResult::Detached
    );
}

#[test]
fn misuse_is_a_typed_error() {
    assert_eq!(
        ShmMq::new(SHM_MQ_MINIMUM_SIZE - 1, ShmMqConfig::default()).unwrap_err(),
        ShmMqError::QueueTooSmall {
            size: SHM_MQ_MINIMUM_SIZE - 8
        }
    );
    let procs = ProcTable::new(3);
    let (mq, mut s, mut r) = queue(&procs, 64, ShmMqConfig::default());
    let mut other = procs.attach().unwrap();
    assert_eq!(
        mq.set_sender(&mut other),
        Err(ShmMqError::SenderAlreadySet { procno: s.procno() })
    );
    assert_eq!(
        mq.set_receiver(&mut other),
        Err(ShmMqError::ReceiverAlreadySet { procno: r.procno() })
    );
    assert_eq!(
        ShmMqHandle::attach(Arc::clone(&mq), &mut other).unwrap_err(),
        ShmMqError::NotAttached {
            procno: other.procno()
        }
    );
    let mut hs = ShmMqHandle::attach(Arc::clone(&mq), &mut s).unwrap();
    let mut hr = ShmMqHandle::attach(Arc::clone(&mq), &mut r).unwrap();
    assert_eq!(
        hr.send(&mut r, b"x", true, true),
        Err(ShmMqError::NotSender { procno: r.procno() })
    );
    assert_eq!(
        hs.receive(&mut s, true).map(|_| ()),
        Err(ShmMqError::NotReceiver { procno: s.procno() })
    );
    assert_eq!(
        hs.send(&mut r, b"x", true, true),
        Err(ShmMqError::WrongBackend {
            owner: s.procno(),
            procno: r.procno()
        })
    );
    // A message over MaxAllocSize, gathered from one 1 MB buffer (nothing that large is made).
    let mb = vec![0u8; 1 << 20];
    let pieces: Vec<&[u8]> = std::iter::repeat_n(&mb[..], 1024).collect();
    assert_eq!(
        hs.sendv(&mut s, &pieces, true, true),
        Err(ShmMqError::MessageTooLarge { size: 1 << 30 })
    );
    const { assert!(1 << 30 > MAX_ALLOC_SIZE) };
    // The queue is untouched by the refused sends.
    assert_eq!(mq.counters(), (0, 0));
    assert_eq!(
        hs.send(&mut s, b"ok", true, true).unwrap(),
        ShmMqResult::Success(())
    );
    assert_eq!(
        hr.receive(&mut r, true).unwrap(),
        ShmMqResult::Success(&b"ok"[..])
    );
}

#[test]
fn one_backend_can_be_both_ends_with_a_handle_each() {
    let procs = ProcTable::new(1);
    let mq = Arc::new(ShmMq::new(SHM_MQ_HEADER_SIZE + 64, ShmMqConfig::default()).unwrap());
    let mut b = procs.attach().unwrap();
    mq.set_sender(&mut b).unwrap();
    mq.set_receiver(&mut b).unwrap();
    let mut tx = ShmMqHandle::attach(Arc::clone(&mq), &mut b).unwrap();
    let mut rx = ShmMqHandle::attach(mq, &mut b).unwrap();
    // Larger than the ring: sent and received in turns, without ever blocking.
    let msg = message(3, 150);
    let (mut sent, mut got) = (false, None);
    while got.is_none() {
        if !sent {
            sent = tx.send(&mut b, &msg, true, true).unwrap().is_success();
        }
        if let ShmMqResult::Success(m) = rx.receive(&mut b, true).unwrap() {
            got = Some(m.to_vec());
        }
    }
    assert!(sent);
    assert_eq!(got.unwrap(), msg);
}
