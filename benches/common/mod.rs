//! What the criterion benches share: the short configuration, the pool of pinned worker
//! threads that the multi-threaded benches time with `iter_custom`, and [`bench_main!`], the
//! `main` that ends by saying where criterion's HTML report is.
//!
//! Every bench compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use criterion::Criterion;
use pglocks_harness::topology::{cpu_for_thread, pin_current_thread};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Short runs (10 samples, 200 ms warm-up, 1 s measurement) unless `PGLOCKS_BENCH_LONG=1`, which
/// restores criterion's defaults.
pub fn config() -> Criterion {
    if std::env::var("PGLOCKS_BENCH_LONG").is_ok_and(|v| v == "1") {
        Criterion::default()
    } else {
        Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1))
    }
}

/// criterion's `criterion_main!`: a `main` that runs the groups; then [`finish`].
macro_rules! bench_main {
    ($($group:path),+ $(,)?) => {
        fn main() {
            $($group();)+
            common::finish();
        }
    };
}
pub(crate) use bench_main;

/// What `criterion_main!` does after the groups (criterion's summary), then, when the benches
/// ran (`cargo bench` passes `--bench`; `cargo test --benches` runs each once and writes no
/// report), the line that says where criterion's HTML report is.
pub fn finish() {
    Criterion::default().configure_from_args().final_summary();
    if std::env::args().any(|a| a == "--bench") {
        if let Some(index) = html_report() {
            println!(
                "criterion's HTML report, every bench measured so far: {}",
                index.display()
            );
        }
    }
}

/// criterion's `report/index.html`, where criterion puts it: under `CRITERION_HOME`, or the
/// `criterion` folder of cargo's target directory (`CARGO_TARGET_DIR`, or the folder above the
/// profile's that holds this bench's executable, `<target>/<profile>/deps/<bench>-<hash>`).
/// `None` if it was not written.
fn html_report() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok();
    let homes = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("criterion")))
        .chain(
            exe.iter()
                .flat_map(|e| e.ancestors())
                .map(|dir| dir.join("criterion")),
        );
    homes
        .map(|home| home.join("report").join("index.html"))
        .find(|index| index.is_file())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the main thread tells the workers.
struct Control {
    /// Bumped once per timed run; a worker runs when it sees a generation it has not run.
    generation: u64,
    /// What every worker's operation is called with in the current generation.
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

/// Pinned worker threads that run their operation whenever [`Pool::run`] asks, and sleep
/// otherwise: they wait on a condition variable between runs, so that the timed part is only
/// "start a generation, wait until every worker has done its part". Dropping the pool stops and
/// joins them.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// The `iters` of every run so far, summed.
    iters_run: u64,
}

impl Pool {
    /// Starts `threads` workers, worker `i` pinned to `cpu_for_thread(pin_order, i)` (none if the
    /// order is empty). Each builds its operation with `make(i)` after pinning, on its own thread
    /// (so a `Backend` attached there stays there); every run calls the operation with `iters`.
    pub fn new<M, W>(threads: usize, pin_order: &[usize], make: M) -> Self
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
                    .name(format!("bench-{i}"))
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
            iters_run: 0,
        }
    }

    /// Calls every worker's operation with `iters`; returns the wall time from the start signal
    /// to the last worker's finish.
    pub fn run(&mut self, iters: u64) -> Duration {
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
        self.iters_run += iters;
        elapsed
    }

    /// The `iters` of every run so far, summed.
    pub fn iters_run(&self) -> u64 {
        self.iters_run
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

/// 1, 2, 4, ... below `2 * cpus`, then `2 * cpus` itself (so the last point oversubscribes).
pub fn thread_counts(cpus: usize) -> Vec<usize> {
    let max = 2 * cpus.max(1);
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |t| Some(t * 2))
        .take_while(|&t| t < max)
        .collect();
    counts.push(max);
    counts
}

/// One placement of a bench's threads: a name for its criterion group (`compact`, `node:N`),
/// the cpus in pinning order (empty: unpinned) and how many there are.
pub struct Placement {
    pub name: String,
    pub pin_order: Vec<usize>,
    pub cpus: usize,
}

/// The placements a scaling bench runs: every cpu in the harness's compact order (a node at a
/// time, physical cores before SMT siblings), then each node alone on a machine with several.
/// The topology is read here, on the (never pinned) main thread; if it cannot be read, one
/// unpinned placement over the available parallelism.
pub fn placements(bench: &str) -> Vec<Placement> {
    use pglocks_harness::{PinPolicy, Topology};
    match Topology::detect() {
        Ok(topo) => {
            let mut out = vec![Placement {
                name: "compact".into(),
                pin_order: topo
                    .pin_order(PinPolicy::Compact)
                    .expect("compact order always exists"),
                cpus: topo.logical_cpus(),
            }];
            if topo.nodes.len() > 1 {
                for node in &topo.nodes {
                    let order = topo
                        .pin_order(PinPolicy::Node(node.id))
                        .expect("a detected node has cpus");
                    out.push(Placement {
                        name: format!("node:{}", node.id),
                        cpus: order.len(),
                        pin_order: order,
                    });
                }
            }
            out
        }
        Err(e) => {
            eprintln!("{bench}: cannot read the topology ({e}); threads will not be pinned");
            vec![Placement {
                name: "compact".into(),
                pin_order: vec![],
                cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            }]
        }
    }
}
