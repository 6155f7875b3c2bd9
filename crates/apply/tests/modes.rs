//! The subscriber in every `streaming` mode against the serial reference: for random publisher
//! streams (several transactions at a time, some streamed, some aborted) the leader, with or
//! without parallel workers, small queues that make sends time out and spill to files, ends
//! with the same rows, the same commits in the same order, and the same conflicts as
//! [`apply_serially`] of the same stream.
#![cfg(not(loom))]

use pglocks_apply::{
    apply, apply_serially, publish, ApplyConfig, ApplyError, Message, Published, PublisherConfig,
    Streaming,
};
use pglocks_lmgr::LockTimeouts;
use pglocks_lwlock::AtomicLwLock;
use proptest::prelude::*;
use std::time::Duration;

fn encoded(p: &Published) -> Vec<Vec<u8>> {
    p.messages.iter().map(Message::to_bytes).collect()
}

fn quick(streaming: Streaming) -> ApplyConfig {
    ApplyConfig {
        streaming,
        send_retry_interval: Duration::from_millis(2),
        send_timeout: Duration::from_millis(20),
        timeouts: LockTimeouts {
            deadlock_timeout: Duration::from_millis(50),
            lock_timeout: None,
        },
        ..ApplyConfig::default()
    }
}

fn check(cfg: &ApplyConfig, published: &Published) -> Result<(), TestCaseError> {
    let serial = apply_serially(&published.messages).expect("the publisher's stream is valid");
    let got = apply::<AtomicLwLock>(cfg, encoded(published))
        .map_err(|e| TestCaseError::fail(format!("{} apply failed: {e}", cfg.streaming.name())))?;
    prop_assert_eq!(&got.applied.rows, &serial.rows);
    prop_assert_eq!(&got.applied.rows, &published.rows);
    prop_assert_eq!(&got.applied.commit_order, &serial.commit_order);
    prop_assert_eq!(&got.applied.commit_order, &published.commit_order);
    let (mut a, mut b) = (got.applied.conflicts.clone(), serial.conflicts.clone());
    a.sort_by_key(|c| format!("{c:?}"));
    b.sort_by_key(|c| format!("{c:?}"));
    prop_assert_eq!(a, b);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_mode_matches_the_serial_apply(
        seed in any::<u64>(),
        concurrent in 1usize..5,
        large_changes in 1usize..120,
        work_mem in 1usize..40,
        abort_ratio in 0.0f64..0.3,
        workers in 0usize..4,
        tiny_queue in any::<bool>(),
        existing_ratio in 0.0f64..0.8,
    ) {
        let mut pcfg = PublisherConfig {
            tables: 2,
            small_changes: 4,
            large_changes,
            large_every: 3,
            work_mem_changes: work_mem,
            streaming: false,
            concurrent,
            abort_ratio,
            existing_ratio,
            seed,
        };
        let whole = publish(&pcfg, 30);
        check(&quick(Streaming::Off), &whole)?;
        pcfg.streaming = true;
        let streamed = publish(&pcfg, 30);
        check(&quick(Streaming::On), &streamed)?;
        let mut parallel = quick(Streaming::Parallel);
        parallel.max_parallel_apply_workers = workers;
        if tiny_queue {
            parallel.queue_size = pglocks_shmmq::SHM_MQ_MINIMUM_SIZE + 64;
            parallel.send_timeout = Duration::from_millis(1);
        }
        check(&parallel, &streamed)?;
    }
}

#[test]
fn streamed_transactions_go_to_workers_and_come_back_in_order() {
    let pcfg = PublisherConfig {
        large_changes: 2_000,
        large_every: 2,
        work_mem_changes: 300,
        concurrent: 3,
        abort_ratio: 0.1,
        seed: 7,
        ..PublisherConfig::default()
    };
    let published = publish(&pcfg, 40);
    assert!(published.streamed >= 10, "{}", published.streamed);
    let cfg = quick(Streaming::Parallel);
    let got = apply::<AtomicLwLock>(&cfg, encoded(&published)).unwrap();
    assert_eq!(got.applied.rows, published.rows);
    assert_eq!(got.applied.commit_order, published.commit_order);
    assert!(got.stats.streamed_in_parallel > 0, "{:?}", got.stats);
    assert!(got.stats.workers_launched <= 2 + got.stats.workers_stopped);
    assert_eq!(got.backends.len() as u64, 1 + got.stats.workers_launched);
}

#[test]
fn no_workers_means_the_leader_spools() {
    let pcfg = PublisherConfig {
        large_changes: 500,
        large_every: 2,
        work_mem_changes: 100,
        seed: 3,
        ..PublisherConfig::default()
    };
    let published = publish(&pcfg, 10);
    let mut cfg = quick(Streaming::Parallel);
    cfg.max_parallel_apply_workers = 0;
    let got = apply::<AtomicLwLock>(&cfg, encoded(&published)).unwrap();
    assert_eq!(got.applied.rows, published.rows);
    assert_eq!(got.stats.streamed_in_parallel, 0);
    assert_eq!(got.stats.streamed_serialized, published.streamed as u64);
    assert!(got.stats.spooled_messages > 0);
}

#[test]
fn a_stream_on_a_subscription_with_streaming_off_is_refused() {
    let pcfg = PublisherConfig {
        large_changes: 50,
        large_every: 1,
        work_mem_changes: 10,
        seed: 1,
        ..PublisherConfig::default()
    };
    let published = publish(&pcfg, 2);
    let e = apply::<AtomicLwLock>(&quick(Streaming::Off), encoded(&published)).unwrap_err();
    assert!(matches!(e, ApplyError::Stream(_)), "{e}");
    assert!(e.to_string().contains("streaming = off"), "{e}");
}

#[test]
fn garbage_and_truncated_streams_are_errors_not_panics() {
    for mode in [Streaming::Off, Streaming::On, Streaming::Parallel] {
        let e = apply::<AtomicLwLock>(&quick(mode), vec![vec![b'Z', 1, 2]]).unwrap_err();
        assert!(
            e.to_string()
                .contains("invalid logical replication message type"),
            "{e}"
        );
        let begin = Message::Begin {
            final_lsn: 1,
            commit_time: 1,
            xid: 5,
        };
        let e = apply::<AtomicLwLock>(&quick(mode), vec![begin.to_bytes()]).unwrap_err();
        assert!(e.to_string().contains("ends inside a transaction"), "{e}");
    }
    let mut cfg = quick(Streaming::Parallel);
    cfg.max_parallel_apply_workers = 5_000;
    let e = apply::<AtomicLwLock>(&cfg, Vec::new()).unwrap_err();
    assert!(
        e.to_string()
            .contains("max_parallel_apply_workers_per_subscription"),
        "{e}"
    );
}

#[test]
fn tiny_queues_spill_to_files_and_still_match() {
    let pcfg = PublisherConfig {
        large_changes: 3_000,
        large_every: 2,
        work_mem_changes: 400,
        concurrent: 3,
        seed: 11,
        ..PublisherConfig::default()
    };
    let published = publish(&pcfg, 20);
    let mut cfg = quick(Streaming::Parallel);
    cfg.send_timeout = Duration::from_micros(1);
    // A ring of 72 bytes, then one of 8, too small for a STREAM START in one piece: sends
    // give up at the first message of a transaction too, which the worker then replays from
    // the file, taking its transaction lock there.
    for extra in [64, 0] {
        cfg.queue_size = pglocks_shmmq::SHM_MQ_MINIMUM_SIZE + extra;
        if extra == 0 {
            // No time for the worker to wake between retries.
            cfg.send_retry_interval = Duration::ZERO;
            cfg.send_timeout = Duration::ZERO;
        }
        let got = apply::<AtomicLwLock>(&cfg, encoded(&published)).unwrap();
        assert_eq!(got.applied.rows, published.rows);
        assert_eq!(got.applied.commit_order, published.commit_order);
        assert!(got.stats.partial_serializations > 0, "{:?}", got.stats);
        assert!(got.stats.workers_stopped >= got.stats.partial_serializations);
        let replayed: u64 = got
            .backends
            .iter()
            .flat_map(|b| b.events.counters())
            .filter(|c| c.0 == "apply.first_segments_replayed")
            .map(|c| c.1)
            .sum();
        if extra == 0 {
            assert!(replayed > 0, "{:?}", got.stats);
        }
    }
}
