//! shm_mq's uncontended cost and parallel apply's gain, criterion's view of the `shm-mq` and
//! `apply` workloads.
//!
//! `shm_mq/solo`: one backend sends a message to itself and receives it (non-blocking, no
//! waiting), 64 bytes and 8 KB, on PostgreSQL's queue (64 KB) and on `crossbeam_channel::bounded`
//! — the floor under every send in the `shm-mq` workload. `apply`: one transaction of 100 000
//! inserts streamed in 64 kB chunks, from its first insert to its commit on the subscriber, with
//! `streaming = parallel` and `on` (each iteration one replication).
//!
//! Runs short by default (10 samples, 200 ms warm-up, 1 s measurement); `PGLOCKS_BENCH_LONG=1`
//! for criterion's defaults.

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use pglocks_harness::TeamSpec;
use pglocks_proc::ProcTable;
use pglocks_shmmq::{ShmMq, ShmMqConfig, ShmMqHandle, ShmMqResult};
use pglocks_workloads::{series, Preset};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::config;

fn shm_mq_solo(c: &mut Criterion) {
    let mut group = c.benchmark_group("shm_mq/solo");
    for size in [64usize, 8192] {
        let payload = vec![7u8; size];
        group.throughput(Throughput::Bytes(size as u64));
        let procs = ProcTable::new(1);
        let mut b = procs.attach().expect("one slot");
        let mq = Arc::new(ShmMq::new(65_536, ShmMqConfig::default()).expect("a valid size"));
        mq.set_sender(&mut b).expect("first sender");
        mq.set_receiver(&mut b).expect("first receiver");
        let mut tx = ShmMqHandle::attach(Arc::clone(&mq), &mut b).expect("attach");
        let mut rx = ShmMqHandle::attach(Arc::clone(&mq), &mut b).expect("attach");
        group.bench_with_input(BenchmarkId::new("pg", size), &size, |bench, _| {
            bench.iter(|| {
                let sent = tx.send(&mut b, &payload, true, true).expect("a send");
                assert!(sent.is_success());
                match rx.receive(&mut b, true).expect("a receive") {
                    ShmMqResult::Success(m) => black_box(m.len()),
                    other => panic!("{other:?}"),
                }
            })
        });
        let (ctx, crx) = crossbeam_channel::bounded::<Vec<u8>>(64);
        group.bench_with_input(BenchmarkId::new("crossbeam", size), &size, |bench, _| {
            bench.iter(|| {
                ctx.try_send(payload.clone()).expect("room");
                black_box(crx.try_recv().expect("a message").len())
            })
        });
    }
    group.finish();
}

fn apply(c: &mut Criterion) {
    let mut group = c.benchmark_group("apply");
    group.sample_size(10);
    let preset = Preset::by_name("pg18").expect("a listed preset");
    for mode in ["parallel", "on"] {
        let sets = [
            format!("mode={mode}"),
            "txn_size=100000".into(),
            "work_mem_changes=430".into(),
        ];
        let s = series("apply", preset, "pg", &sets).expect("valid settings");
        let spec = TeamSpec {
            threads: 1,
            duration: Duration::ZERO,
            warmup: Duration::ZERO,
            pin_order: vec![],
            sample_every: 0,
            sim: None,
            until: None,
        };
        group.throughput(Throughput::Elements(100_000));
        group.bench_function(BenchmarkId::new("100k-inserts", mode), |bench| {
            bench.iter_custom(|iters| {
                (0..iters)
                    .map(|_| (s.run)(&spec).expect("an apply run").elapsed)
                    .sum()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = shm_mq_solo, apply
}
common::bench_main!(benches);
