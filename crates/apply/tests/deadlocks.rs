//! The two deadlocks of parallel apply that applyparallelworker.c's header comment describes
//! ("Locking Considerations"), run through the whole subscriber: leader, parallel workers,
//! queues, spool files and the lock manager.
//!
//! Both need a conflict the publisher did not have — a unique index, or a row, that only the
//! subscriber has — so the streams are written by hand: on the publisher the two transactions
//! did not touch the same row.
#![cfg(not(loom))]

use pglocks_apply::publisher::FIRST_REL;
use pglocks_apply::{apply, apply_serially, ApplyConfig, Change, Message, Row, Streaming};
use pglocks_lmgr::LockTimeouts;
use pglocks_lwlock::AtomicLwLock;
use std::time::Duration;

const REL: u32 = FIRST_REL;

fn begin(xid: u32) -> Message {
    Message::Begin {
        final_lsn: 0x100,
        commit_time: 1,
        xid,
    }
}

fn commit() -> Message {
    Message::Commit {
        commit_lsn: 0x100,
        end_lsn: 0x140,
        commit_time: 1,
    }
}

fn start(xid: u32, first_segment: bool) -> Message {
    Message::StreamStart { xid, first_segment }
}

fn stream_commit(xid: u32) -> Message {
    Message::StreamCommit {
        xid,
        commit_lsn: 0x200,
        end_lsn: 0x240,
        commit_time: 2,
    }
}

fn change(xid: Option<u32>, change: Change) -> Message {
    Message::Change {
        xid,
        rel: REL,
        change,
    }
}

fn insert(key: i64, value: i64) -> Change {
    Change::Insert(Row { key, value })
}

fn config() -> ApplyConfig {
    ApplyConfig {
        streaming: Streaming::Parallel,
        timeouts: LockTimeouts {
            deadlock_timeout: Duration::from_millis(20),
            lock_timeout: None,
        },
        ..ApplyConfig::default()
    }
}

/// Deadlock 1: a worker (PA) has applied the first chunk of streamed transaction 201 — an
/// insert of key 7 — and waits on the stream lock for the next; the leader (LA), which holds
/// the stream lock between chunks, applies transaction 202 itself, whose insert of key 7 must
/// wait for the PA's transaction in the unique index. Neither can go on. The deadlock
/// detector finds the cycle, one of them gets "deadlock detected", and the apply stops with
/// that error, its detail naming the stream lock and the transaction the leader waits for.
#[test]
fn unique_key_conflict_between_leader_and_worker_is_a_detected_deadlock() {
    for round in 0..3 {
        let messages = [
            start(201, true),
            change(Some(201), insert(7, 1)),
            Message::StreamStop,
            begin(202),
            change(None, insert(7, 2)),
            commit(),
            start(201, false),
            change(Some(201), insert(8, 1)),
            Message::StreamStop,
            stream_commit(201),
        ];
        // The walreceiver hands the leader the first chunk, then the rest once the worker
        // has had time to apply it (as the network would space them).
        let source = messages.iter().enumerate().map(|(i, m)| {
            if i == 3 {
                std::thread::sleep(Duration::from_millis(100));
            }
            m.to_bytes()
        });
        let e = apply::<AtomicLwLock>(&config(), source).unwrap_err();
        assert!(e.is_deadlock(), "round {round}: {e}");
        assert!(e.to_string().contains("deadlock detected"), "{e}");
        let detail = e.detail().unwrap_or_default();
        assert!(
            detail.contains("remote transaction 201 of subscription 16600")
                && detail.contains("ShareLock on transaction"),
            "round {round}: the report names both locks: {detail}"
        );
    }
}

/// Deadlock 2, the one the deadlock detector cannot see: worker PA-1 has applied the first
/// chunk of transaction 301 (an update of key 1) and waits for its next chunk; worker PA-2,
/// applying transaction 302, must update key 1 too and waits for PA-1's transaction; the
/// leader goes on sending 302's changes to PA-2 until the queue is full. The leader's send
/// times out, it writes the rest of 302 to a file and reads on; 301's next chunk and commit
/// reach PA-1, PA-2 gets its row, drains its queue and replays the file. Nothing deadlocks,
/// and the result is the serial apply's.
#[test]
fn full_queue_to_a_waiting_worker_spills_to_a_file_instead_of_deadlocking() {
    let mut messages = vec![
        begin(300),
        change(None, insert(1, 0)),
        commit(),
        start(301, true),
        change(Some(301), Change::Update(Row { key: 1, value: 1 })),
        Message::StreamStop,
        start(302, true),
        change(Some(302), Change::Update(Row { key: 1, value: 2 })),
    ];
    // Far more than the queue holds.
    messages.extend((1_000..1_400).map(|k| change(Some(302), insert(k, k))));
    messages.extend([
        Message::StreamStop,
        start(301, false),
        change(Some(301), insert(2, 1)),
        Message::StreamStop,
        stream_commit(301),
        stream_commit(302),
    ]);
    let serial = apply_serially(&messages).unwrap();
    let cfg = ApplyConfig {
        queue_size: 4_096,
        send_retry_interval: Duration::from_millis(10),
        send_timeout: Duration::from_millis(100),
        ..config()
    };
    for round in 0..3 {
        // The walreceiver hands over 302 once PA-1 has had time to apply 301's first chunk:
        // had PA-2 updated key 1 first, PA-1 would wait for PA-2 instead — a cycle through the
        // leader's commit wait that the deadlock detector reports, as PostgreSQL's would.
        let source = messages.iter().enumerate().map(|(i, m)| {
            if i == 6 {
                std::thread::sleep(Duration::from_millis(100));
            }
            m.to_bytes()
        });
        let got = apply::<AtomicLwLock>(&cfg, source)
            .unwrap_or_else(|e| panic!("round {round}: {e} / {:?}", e.detail()));
        assert_eq!(got.applied.rows, serial.rows, "round {round}");
        assert_eq!(got.applied.rows.get(&(REL, 1)), Some(&2));
        assert_eq!(got.applied.commit_order, vec![300, 301, 302]);
        assert_eq!(got.stats.streamed_in_parallel, 2, "{:?}", got.stats);
        assert_eq!(got.stats.partial_serializations, 1, "{:?}", got.stats);
        assert!(got.stats.spooled_messages > 0, "{:?}", got.stats);
    }
}
