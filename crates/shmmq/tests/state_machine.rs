//! A proptest state machine: one thread drives both ends of a queue with non-blocking calls in a
//! random order (messages of random sizes, some larger than the ring, sent whole or gathered,
//! flushed or not; receives in between), against a `VecDeque` of the messages sent. Every message
//! received must be the oldest one sent and not yet received; after the sender detaches, the
//! receiver gets every remaining message, then `Detached`.
#![cfg(not(loom))]

use pglocks_proc::ProcTable;
use pglocks_shmmq::{ShmMq, ShmMqConfig, ShmMqHandle, ShmMqResult, SHM_MQ_HEADER_SIZE};
use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    /// Send a message of `len` bytes, cut into `pieces` chunks (1 = `shm_mq_send`).
    Send {
        len: usize,
        pieces: usize,
        force_flush: bool,
    },
    /// Receive one message.
    Receive,
}

fn op(max_len: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..=max_len, 1..4usize, any::<bool>()).prop_map(|(len, pieces, force_flush)| Op::Send {
            len,
            pieces,
            force_flush
        }),
        Just(Op::Receive),
    ]
}

/// The sequential reference: the messages whose send succeeded, oldest first.
#[derive(Default)]
struct Model {
    sent: VecDeque<Vec<u8>>,
}

/// Message `i` of `len` bytes.
fn message(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (i.wrapping_mul(131).wrapping_add(k as u64) % 253) as u8)
        .collect()
}

/// `msg` cut into `pieces` chunks of uneven lengths (most off the 8-byte grid).
fn cut(msg: &[u8], pieces: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = msg;
    for _ in 1..pieces {
        let (a, b) = rest.split_at((rest.len() / 3 + 3).min(rest.len()));
        out.push(a);
        rest = b;
    }
    out.push(rest);
    out
}

fn run(ring: usize, batch: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let procs = ProcTable::new(2);
    let config = ShmMqConfig {
        batch_send_pending: batch,
    };
    let mq = Arc::new(ShmMq::new(SHM_MQ_HEADER_SIZE + ring, config).unwrap());
    let (mut s, mut r) = (procs.attach().unwrap(), procs.attach().unwrap());
    mq.set_sender(&mut s).unwrap();
    mq.set_receiver(&mut r).unwrap();
    let mut hs = ShmMqHandle::attach(Arc::clone(&mq), &mut s).unwrap();
    let mut hr = ShmMqHandle::attach(Arc::clone(&mq), &mut r).unwrap();
    let mut model = Model::default();
    // A send that returned WouldBlock: it must be retried, unchanged, before any other.
    let mut pending: Option<(Vec<u8>, usize, bool)> = None;
    let mut next = 0u64;

    let receive = |hr: &mut ShmMqHandle,
                   r: &mut pglocks_proc::Backend,
                   model: &mut Model|
     -> Result<bool, TestCaseError> {
        match hr.receive(r, true).unwrap() {
            ShmMqResult::Success(got) => {
                let want = model.sent.pop_front();
                prop_assert_eq!(Some(got.to_vec()), want, "received out of order");
                Ok(true)
            }
            ShmMqResult::WouldBlock => Ok(false),
            ShmMqResult::Detached => Err(TestCaseError::fail("detached while attached")),
        }
    };

    for op in ops {
        match op {
            Op::Send {
                len,
                pieces,
                force_flush,
            } => {
                let (msg, pieces, force) = pending.take().unwrap_or_else(|| {
                    next += 1;
                    (message(next, len), pieces, force_flush)
                });
                let res = hs.sendv(&mut s, &cut(&msg, pieces), true, force).unwrap();
                match res {
                    ShmMqResult::Success(()) => model.sent.push_back(msg),
                    ShmMqResult::WouldBlock => pending = Some((msg, pieces, force)),
                    ShmMqResult::Detached => return Err(TestCaseError::fail("detached")),
                }
            }
            Op::Receive => {
                receive(&mut hr, &mut r, &mut model)?;
            }
        }
        let (read, written) = mq.counters();
        prop_assert!(read <= written && written - read <= mq.ring_size() as u64);
    }
    // Finish a send under way, receiving to make room.
    while let Some((msg, pieces, force)) = pending.take() {
        match hs.sendv(&mut s, &cut(&msg, pieces), true, force).unwrap() {
            ShmMqResult::Success(()) => model.sent.push_back(msg),
            ShmMqResult::WouldBlock => {
                pending = Some((msg, pieces, force));
                receive(&mut hr, &mut r, &mut model)?;
            }
            ShmMqResult::Detached => return Err(TestCaseError::fail("detached")),
        }
    }
    // Detach publishes what is pending; the receiver drains it all, then sees the detach.
    hs.detach(&mut s).unwrap();
    loop {
        match hr.receive(&mut r, true).unwrap() {
            ShmMqResult::Success(got) => {
                let want = model.sent.pop_front();
                prop_assert_eq!(Some(got.to_vec()), want);
            }
            ShmMqResult::Detached => break,
            ShmMqResult::WouldBlock => return Err(TestCaseError::fail("WouldBlock after detach")),
        }
    }
    prop_assert!(model.sent.is_empty(), "{} messages lost", model.sent.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_message_arrives_once_in_order(
        ring in (1..=40usize).prop_map(|w| w * 8),
        batch in any::<bool>(),
        ops in prop::collection::vec(op(400), 1..60),
    ) {
        run(ring, batch, ops)?;
    }
}
