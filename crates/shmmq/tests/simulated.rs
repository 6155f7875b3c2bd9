//! The queue on a simulated machine: its header (`struct shm_mq`) is placed in the
//! shared-memory map, so the counters a sender and a receiver on two packages bump move
//! between their CPUs under the header's name, and nothing of the queue is charged by the
//! host address it happens to have.
#![cfg(not(loom))]

use pglocks_proc::ProcTable;
use pglocks_shmmq::{ShmMq, ShmMqConfig, ShmMqHandle, ShmMqResult, SHM_MQ_HEADER_SIZE};
use pglocks_sim::SimThread;
use std::sync::Arc;

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn the_header_is_placed_in_the_map_as_shm_mq() {
    let procs = ProcTable::new(2);
    let mq = Arc::new(ShmMq::new(SHM_MQ_HEADER_SIZE + 1024, ShmMqConfig::default()).unwrap());
    let (mut s, mut r) = (procs.attach().unwrap(), procs.attach().unwrap());
    mq.set_sender(&mut s).unwrap();
    mq.set_receiver(&mut r).unwrap();
    let count: u64 = 200;
    let sender = {
        let mq = Arc::clone(&mq);
        move || {
            let mut h = ShmMqHandle::attach(mq, &mut s).unwrap();
            for i in 0..count {
                let msg = [i as u8; 100];
                assert_eq!(
                    h.send(&mut s, &msg, false, true).unwrap(),
                    ShmMqResult::Success(())
                );
            }
            h.detach(&mut s).unwrap();
        }
    };
    let receiver = {
        let mq = Arc::clone(&mq);
        move || {
            let mut h = ShmMqHandle::attach(mq, &mut r).unwrap();
            for i in 0..count {
                match h.receive(&mut r, false).unwrap() {
                    ShmMqResult::Success(got) => assert_eq!(got, &[i as u8; 100][..]),
                    other => panic!("message {i}: {other:?}"),
                }
            }
        }
    };
    let out = pglocks_sim::run_tallied(
        "westmere-80",
        vec![SimThread::on(0, sender), SimThread::on(10, receiver)],
    );
    // The ring holds about nine of the 108-byte messages (length word and data): the sender
    // fills it and waits at least count * 108 / 1024 times, and each time mq_bytes_written
    // moves to the receiver and mq_bytes_read back.
    assert!(
        out.transfers_of("shm_mq") >= 2 * count * 108 / 1024,
        "{:?}",
        out.by_structure
    );
    assert!(
        !out.outside_the_map()
            .iter()
            .any(|s| ["crates/shmmq/"].iter().any(|c| s.name.contains(c))),
        "{:?}",
        out.by_structure
    );
}
