//! Throughput of one contended lock as the number of threads grows: every thread takes the same
//! lock, increments the counter under it and releases it, `iters` times per criterion iteration.
//!
//! Thread counts double from 1 up to twice the cpus of the placement (the last point is always
//! exactly twice), so the oversubscribed end shows what happens when a lock holder is preempted.
//! The FIFO locks (`ticket`, `mcs`) are capped at the cpu count: oversubscribed, each handover
//! waits for the next waiter in line to be scheduled, and a single point can take minutes.
//!
//! Placements, one criterion group each:
//! - `scaling/compact`: threads pinned in the harness's compact order (a node at a time,
//!   physical cores before SMT siblings);
//! - `scaling/node:N`: only node N's cpus, for each node, when the machine has more than one.
//!
//! The topology is read once, before any thread is pinned; if it cannot be read, threads are not
//! pinned and only `scaling/compact` runs. Workers live in a pool built outside the timed closure:
//! they sleep on a condition variable between iterations, and the timed part is only "start a
//! generation, wait until every worker has done its `iters` operations".
//!
//! Runs short by default (10 samples, 200 ms warm-up, 1 s measurement per point); set
//! `PGLOCKS_BENCH_LONG=1` for criterion's defaults.

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use pglocks_harness::topology::{cpu_for_thread, pin_current_thread};
use pglocks_harness::{PinPolicy, Topology};
use pglocks_spin::{
    FloorLock, McsLock, NaiveTasLock, PgSpinLock, RawSpinLock, SpinLock, TicketLock,
};
use pglocks_sync::{Backend, CachePadded, ProcTable};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod common;
use common::config;

/// A lock around a counter, as the benchmark needs it.
trait Contended: Send + Sync + 'static {
    fn new() -> Self;
    /// Lock, increment, unlock.
    fn increment(&self, backend: &mut Backend);
    /// The counter (taken under the lock).
    fn value(&self, backend: &mut Backend) -> u64;
}

impl<R: RawSpinLock + 'static> Contended for SpinLock<u64, R> {
    fn new() -> Self {
        SpinLock::new("scaling", 0)
    }
    #[inline(always)]
    fn increment(&self, backend: &mut Backend) {
        self.lock(backend)
            .expect("stuck spinlock in the scaling bench")
            .with_mut(|n| *n += 1);
    }
    fn value(&self, backend: &mut Backend) -> u64 {
        self.lock(backend).expect("stuck spinlock").with(|n| *n)
    }
}

impl Contended for parking_lot::Mutex<u64> {
    fn new() -> Self {
        parking_lot::Mutex::new(0)
    }
    #[inline(always)]
    fn increment(&self, _backend: &mut Backend) {
        *self.lock() += 1;
    }
    fn value(&self, _backend: &mut Backend) -> u64 {
        *self.lock()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the main thread tells the workers.
struct Control {
    /// Bumped once per timed run; a worker runs when it sees a generation it has not run.
    generation: u64,
    /// Operations per worker in the current generation.
    iters: u64,
    /// The pool is being dropped: exit.
    shutdown: bool,
}

/// What the workers tell the main thread.
struct Done {
    /// Workers finished with the current generation.
    count: usize,
    /// A worker panicked (the run can never complete).
    failed: bool,
}

struct Shared {
    control: Mutex<Control>,
    go: Condvar,
    done: Mutex<Done>,
    all_done: Condvar,
}

/// Reports a worker's end of a generation, or its panic, to the main thread.
struct DoneGuard<'a> {
    shared: &'a Shared,
    threads: usize,
}

impl DoneGuard<'_> {
    fn finished(&self) {
        let mut done = lock(&self.shared.done);
        done.count += 1;
        if done.count == self.threads {
            self.shared.all_done.notify_one();
        }
    }
}

impl Drop for DoneGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(&self.shared.done).failed = true;
            self.shared.all_done.notify_one();
        }
    }
}

/// Pinned worker threads that run `iters` operations each whenever [`Pool::run`] asks, and sleep
/// otherwise. Dropping the pool stops and joins them.
struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Operations each worker has performed, over all runs.
    per_thread_ops: u64,
}

impl Pool {
    /// Starts `threads` workers, worker `i` pinned to `cpu_for_thread(pin_order, i)` (none if the
    /// order is empty). Each builds its operation with `make(i)` after pinning.
    fn new<M, W>(threads: usize, pin_order: &[usize], make: M) -> Self
    where
        M: Fn(usize) -> W + Send + Sync + 'static,
        W: FnMut(u64),
    {
        let shared = Arc::new(Shared {
            control: Mutex::new(Control {
                generation: 0,
                iters: 0,
                shutdown: false,
            }),
            go: Condvar::new(),
            done: Mutex::new(Done {
                count: 0,
                failed: false,
            }),
            all_done: Condvar::new(),
        });
        let make = Arc::new(make);
        let workers = (0..threads)
            .map(|i| {
                let shared = Arc::clone(&shared);
                let make = Arc::clone(&make);
                let cpu = cpu_for_thread(pin_order, i);
                std::thread::Builder::new()
                    .name(format!("scaling-{i}"))
                    .spawn(move || {
                        if let Some(cpu) = cpu {
                            pin_current_thread(cpu);
                        }
                        let mut op = make(i);
                        let guard = DoneGuard {
                            shared: &shared,
                            threads,
                        };
                        let mut seen = 0;
                        loop {
                            let iters = {
                                let mut c = lock(&shared.control);
                                while c.generation == seen && !c.shutdown {
                                    c = shared.go.wait(c).unwrap_or_else(PoisonError::into_inner);
                                }
                                if c.shutdown {
                                    return;
                                }
                                seen = c.generation;
                                c.iters
                            };
                            op(iters);
                            guard.finished();
                        }
                    })
                    .expect("could not start a benchmark thread")
            })
            .collect();
        Self {
            shared,
            workers,
            per_thread_ops: 0,
        }
    }

    /// Every worker performs `iters` operations; returns the wall time from the start signal to
    /// the last worker's finish.
    fn run(&mut self, iters: u64) -> Duration {
        let threads = self.workers.len();
        // All workers finished the previous generation, so none touches the count now.
        lock(&self.shared.done).count = 0;
        let start = Instant::now();
        {
            let mut c = lock(&self.shared.control);
            c.generation += 1;
            c.iters = iters;
        }
        self.shared.go.notify_all();
        let mut done = lock(&self.shared.done);
        while done.count < threads && !done.failed {
            done = self
                .shared
                .all_done
                .wait(done)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let elapsed = start.elapsed();
        assert!(!done.failed, "a benchmark worker panicked");
        self.per_thread_ops += iters;
        elapsed
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.control).shutdown = true;
        self.shared.go.notify_all();
        for w in self.workers.drain(..) {
            // A worker's panic was already reported by `run`; do not panic again while dropping.
            let _ = w.join();
        }
    }
}

/// 1, 2, 4, ... below `2 * cpus`, then `2 * cpus` itself.
fn thread_counts(cpus: usize) -> Vec<usize> {
    let max = 2 * cpus.max(1);
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |t| Some(t * 2))
        .take_while(|&t| t < max)
        .collect();
    counts.push(max);
    counts
}

/// One implementation at every thread count of `counts` (capped at `cpus` if `fifo`).
fn sweep_impl<L: Contended>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    counts: &[usize],
    cpus: usize,
    pin_order: &[usize],
    fifo: bool,
) {
    let mut done_counts = Vec::new();
    for &requested in counts {
        let threads = if fifo { requested.min(cpus) } else { requested };
        if done_counts.contains(&threads) {
            continue;
        }
        done_counts.push(threads);

        let procs = ProcTable::new(threads);
        let shared_lock = Arc::new(CachePadded::new(L::new()));
        let mut pool = {
            let (procs, shared_lock) = (procs.clone(), Arc::clone(&shared_lock));
            Pool::new(threads, pin_order, move |_| {
                let mut me = procs.attach().expect("one backend slot per worker");
                let lock = Arc::clone(&shared_lock);
                move |iters: u64| {
                    for _ in 0..iters {
                        lock.increment(&mut me);
                    }
                }
            })
        };
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, _| {
            b.iter_custom(|iters| pool.run(iters))
        });
        let expected = pool.per_thread_ops * threads as u64;
        drop(pool);
        let mut me = procs.attach().expect("the workers have detached");
        assert_eq!(
            shared_lock.value(&mut me),
            expected,
            "{name} lost updates at {threads} threads"
        );
    }
}

/// Every implementation on one placement.
fn placement(c: &mut Criterion, group_name: &str, pin_order: &[usize], cpus: usize) {
    let counts = thread_counts(cpus);
    let mut group = c.benchmark_group(group_name);
    let g = &mut group;
    sweep_impl::<SpinLock<u64, PgSpinLock<true>>>(g, "pg", &counts, cpus, pin_order, false);
    sweep_impl::<SpinLock<u64, NaiveTasLock>>(g, "tas", &counts, cpus, pin_order, false);
    sweep_impl::<SpinLock<u64, TicketLock>>(g, "ticket", &counts, cpus, pin_order, true);
    sweep_impl::<SpinLock<u64, McsLock>>(g, "mcs", &counts, cpus, pin_order, true);
    sweep_impl::<SpinLock<u64, FloorLock>>(g, "floor", &counts, cpus, pin_order, false);
    sweep_impl::<parking_lot::Mutex<u64>>(g, "parking_lot", &counts, cpus, pin_order, false);
    group.finish();
}

fn scaling(c: &mut Criterion) {
    // Read once, on this (never pinned) thread, before any worker pins itself.
    match Topology::detect() {
        Ok(topo) => {
            let compact = topo
                .pin_order(PinPolicy::Compact)
                .expect("compact order always exists");
            placement(c, "scaling/compact", &compact, topo.logical_cpus());
            if topo.nodes.len() > 1 {
                for node in &topo.nodes {
                    let order = topo
                        .pin_order(PinPolicy::Node(node.id))
                        .expect("a detected node has cpus");
                    placement(c, &format!("scaling/node:{}", node.id), &order, order.len());
                }
            }
        }
        Err(e) => {
            eprintln!("scaling: cannot read the topology ({e}); threads will not be pinned");
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            placement(c, "scaling/compact", &[], cpus);
        }
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = scaling
}
criterion_main!(benches);
