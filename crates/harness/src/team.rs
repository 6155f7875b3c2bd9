//! A thread team: one timed run of one operation on N threads.
//!
//! Every thread plays one backend: it attaches to the workload's [`ProcTable`], pins itself (if
//! asked), and waits on a barrier so that all start together. The main thread then walks the team
//! through three phases by one shared word: *warm-up* (operations run, counted only for the
//! main thread's rule), *measure* (operations are counted and every `sample_every`-th is timed
//! into the thread's own histogram), *stop*. Elapsed time is taken by the main thread between the
//! two phase changes, so a thread that is descheduled at the boundary shifts at most one
//! operation across it.
//!
//! A phase lasts its time ([`TeamSpec::warmup`], [`TeamSpec::duration`]), or, when the spec
//! gives a [`RunLength`] (the simulated machine's default), at least its time and then until the
//! team has completed the phase's number of operations or the phase has lasted its cap: the main
//! thread reads the counters every [`RunLength::POLL`] once the time is up.
//!
//! Nothing is shared on the hot path but the read-mostly phase word and one counter per thread:
//! each thread counts into its own variables and its backend's statistics, and the main thread
//! merges them after `join`. On a host thread both words are used as std's atomics, without the
//! sync shim's check of whether a simulation runs, and the operation is called from one place
//! in the measured loop (so a lock's fast path can be inlined into it): what a run measures is
//! the operation, and `benches/instructions.rs` counts what the loop adds around it.
//!
//! Throughput against time (like pgbench's `-P` progress lines): each thread also publishes its
//! running count of operations, the warm-up's and then the measured ones after them, in a
//! cache-padded counter of its own (one relaxed store per operation, on a line no other thread
//! writes), and the main thread, which sleeps through the measure phase anyway, reads all the
//! counters at the start of the measured phase and every [`TIMELINE_INTERVAL`] after it. The differences of
//! consecutive readings over their actual spacing are the run's per-interval throughput. Only full
//! intervals are kept: a run shorter than one interval has an empty timeline, and the tail after
//! the last full interval is left out, as pgbench's last progress line only covers a full period.
//! The timeline's memory does not grow with the run: past [`MAX_TIMELINE_POINTS`] intervals,
//! neighbouring points are merged in pairs, each then covering twice the time (as a round-robin
//! database keeps a long series), so a day's soak keeps as many points as a two-minute run.
//!
//! A stop asked for with [`interrupt::request_stop`](crate::interrupt::request_stop) (Ctrl-C)
//! ends the warm-up or the measured phase within one 20 ms sleep and the threads stop. A run
//! that had measured at least one timeline interval is returned as it is, its `elapsed` the
//! time it measured (its rates are as good as a shorter run's); one stopped before that is
//! discarded with [`HarnessError::Interrupted`].

use crate::HarnessError;
use hdrhistogram::Histogram;
use pglocks_proc::stats::BackendStats;
use pglocks_proc::{Backend, ProcTable};
use pglocks_sim::{Placement, Profile, SimThread};
use pglocks_sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use pglocks_sync::time::{sleep, Duration, Instant};
use pglocks_sync::CachePadded;
use std::sync::Arc;

const STARTING: u8 = 0;
const WARMUP: u8 = 1;
const MEASURE: u8 = 2;
const STOP: u8 = 3;

/// How often the main thread samples the team's running operation count for the timeline.
pub const TIMELINE_INTERVAL: Duration = Duration::from_millis(100);

/// The most points one run's timeline keeps (two minutes of [`TIMELINE_INTERVAL`]s); a longer
/// run's points are merged in pairs whenever it is reached.
pub const MAX_TIMELINE_POINTS: usize = 1200;

/// Longest latency the histograms track (longer samples are clamped to it).
const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// What one timed run needs to know.
#[derive(Debug, Clone)]
pub struct TeamSpec {
    /// Threads (backends) in the team.
    pub threads: usize,
    /// Measured time.
    pub duration: Duration,
    /// Unmeasured time before it.
    pub warmup: Duration,
    /// CPU for each thread (`order[i % len]`); empty: do not pin.
    pub pin_order: Vec<usize>,
    /// Time one operation in this many (1 = every one; 0 = only each thread's first).
    pub sample_every: u32,
    /// Run on this simulated machine instead of the host (durations are then virtual time).
    pub sim: Option<Arc<Profile>>,
    /// Run each phase past its time until it has counted this many operations (or reached the
    /// cap); `None`: the phases last exactly `warmup` and `duration`.
    pub until: Option<RunLength>,
}

/// A run whose length is decided by what it counts: each phase lasts at least its time
/// ([`TeamSpec::warmup`], [`TeamSpec::duration`]) and then goes on until the team has completed
/// its number of operations, or until the phase has lasted its cap, whichever comes first.
///
/// A point's figure is a count over a time; how far it can be trusted depends on how many
/// events the count holds, not on how long it ran. A fixed length gives a fast point
/// (80 threads taking a lock) millions of hand-overs and a slow one (a transaction that waits
/// for its commit record's flush) a handful. The count is checked every [`RunLength::POLL`],
/// so a phase overshoots its count by at most what the team completes in one poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLength {
    /// Operations the warm-up completes before the measured phase starts.
    pub warmup_ops: u64,
    /// The longest the warm-up lasts, whatever it has counted.
    pub warmup_cap: Duration,
    /// Operations the measured phase counts.
    pub ops: u64,
    /// The longest the measured phase lasts, whatever it has counted.
    pub cap: Duration,
}

impl RunLength {
    /// How often the controlling thread reads the team's counts once a phase's time is up.
    pub const POLL: Duration = Duration::from_millis(1);
}

/// The result of one timed run.
#[derive(Debug, Clone)]
pub struct TeamRun {
    /// Threads in the team.
    pub threads: usize,
    /// Measured wall-clock time.
    pub elapsed: Duration,
    /// Operations each thread completed while measured.
    pub per_thread_ops: Vec<u64>,
    /// Sampled operation latencies, all threads merged, in nanoseconds.
    pub latency: Histogram<u64>,
    /// All backends' statistics, merged.
    pub stats: BackendStats,
    /// The throughput this run could reach at best, if the workload knows one (such as N
    /// committers over one flush's latency); [`run_team`] leaves it `None` and a workload sets it
    /// on the run it returns.
    pub ideal_ops_per_sec: Option<f64>,
    /// Throughput of all threads in each full [`TIMELINE_INTERVAL`] of the measured time, in
    /// order (empty for a run shorter than one interval).
    pub timeline_ops_per_sec: Vec<f64>,
    /// The time each point of the timeline covers: [`TIMELINE_INTERVAL`], or a power-of-two
    /// multiple of it for a run longer than [`MAX_TIMELINE_POINTS`] intervals.
    pub timeline_interval: Duration,
    /// For a simulated run, what the simulation cost the host.
    pub sim: Option<SimCost>,
}

/// What a simulated run cost the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimCost {
    /// Host time the simulation took.
    pub host_time: Duration,
    /// Shim operations simulated.
    pub ops: u64,
}

impl TeamRun {
    /// Operations completed by all threads.
    pub fn total_ops(&self) -> u64 {
        self.per_thread_ops.iter().sum()
    }

    /// Throughput of the whole team.
    pub fn ops_per_sec(&self) -> f64 {
        self.total_ops() as f64 / self.elapsed.as_secs_f64()
    }
}

struct ThreadResult {
    ops: u64,
    latency: Histogram<u64>,
    stats: BackendStats,
}

type OpError = Box<dyn std::error::Error + Send + Sync>;

/// A thread a model runs beside the team, as PostgreSQL runs an auxiliary process beside the
/// backends (the WAL writer): started before the team, told to stop once the team has stopped,
/// and waited for. On a simulated machine it is a virtual thread on the CPU after the team's
/// (thread `threads + k` of the pin order).
pub struct Companion<'a> {
    /// Its thread's name.
    pub name: &'static str,
    /// What it runs, until `stop` has been called; it keeps its own results.
    pub body: Box<dyn FnOnce() + Send + 'a>,
    /// Asks it to finish.
    pub stop: Box<dyn FnOnce() + Send + 'a>,
}

impl std::fmt::Debug for Companion<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Companion")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Runs `make_op(thread)`'s operation on `spec.threads` threads for `spec.duration` after
/// `spec.warmup`, each thread as one backend attached to `procs`.
///
/// The operation gets the thread's [`Backend`]; an error from it stops the whole team and is
/// returned (a workload's typed error, such as a stuck spinlock).
///
/// # Examples
///
/// Measuring an operation of your own, here two backends taking a `std::sync::Mutex` in turn to
/// bump one counter. `make_op` is called once per thread and returns that thread's operation;
/// the run says how many operations each thread completed while measured, and holds the
/// latencies of the ones it timed.
///
/// ```
/// use pglocks_harness::{run_team, TeamSpec};
/// use pglocks_proc::{Backend, ProcTable};
/// use std::convert::Infallible;
/// use std::sync::Mutex;
/// use std::time::Duration;
///
/// let spec = TeamSpec {
///     threads: 2,
///     duration: Duration::from_millis(10),
///     warmup: Duration::from_millis(2),
///     pin_order: vec![], // no pinning
///     sample_every: 1,   // time every operation
///     sim: None,         // this machine, not a simulated one
///     until: None,       // the phases last exactly their times
/// };
/// let procs = ProcTable::new(spec.threads); // one slot per backend
/// let counter = &Mutex::new(0u64);
/// let run = run_team(&spec, &procs, |_thread| {
///     move |_backend: &mut Backend| {
///         *counter.lock().unwrap() += 1;
///         Ok::<(), Infallible>(())
///     }
/// })?;
///
/// assert_eq!(run.per_thread_ops.len(), 2);
/// assert!(run.total_ops() > 0);
/// // The warm-up's operations bumped the counter too, but only the measured ones count.
/// assert!(*counter.lock().unwrap() >= run.total_ops());
/// // With `sample_every: 1`, every measured operation was timed.
/// assert_eq!(run.latency.len(), run.total_ops());
/// println!(
///     "{:.0} ops/s, p99 {} ns",
///     run.ops_per_sec(),
///     run.latency.value_at_quantile(0.99)
/// );
/// # Ok::<(), pglocks_harness::HarnessError>(())
/// ```
pub fn run_team<F, E, M>(
    spec: &TeamSpec,
    procs: &ProcTable,
    make_op: M,
) -> Result<TeamRun, HarnessError>
where
    M: Fn(usize) -> F,
    F: FnMut(&mut Backend) -> Result<(), E> + Send,
    E: Into<OpError>,
{
    run_team_with(spec, procs, Vec::new(), make_op)
}

/// [`run_team`], with `companions` running beside the team from before its start until after
/// its stop.
pub fn run_team_with<F, E, M>(
    spec: &TeamSpec,
    procs: &ProcTable,
    companions: Vec<Companion<'_>>,
    make_op: M,
) -> Result<TeamRun, HarnessError>
where
    M: Fn(usize) -> F,
    F: FnMut(&mut Backend) -> Result<(), E> + Send,
    E: Into<OpError>,
{
    if spec.threads == 0 {
        return Err(HarnessError::ZeroThreads);
    }
    if let Some(profile) = &spec.sim {
        return run_team_simulated(spec, profile, procs, companions, make_op);
    }
    with_companions(companions, || {
        let phase = CachePadded::new(AtomicU8::new(STARTING));
        let ready = AtomicUsize::new(0);
        let published: Vec<CachePadded<AtomicU64>> = (0..spec.threads)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect();
        let mut timeline = Timeline::default();
        let mut interrupted = false;
        let mut results = Vec::with_capacity(spec.threads);
        let mut elapsed = Duration::ZERO;
        std::thread::scope(|scope| {
            let spawned: Vec<_> = (0..spec.threads)
                .map(|i| {
                    let op = make_op(i);
                    let cpu = crate::topology::cpu_for_thread(&spec.pin_order, i);
                    let (phase, ready, count) = (&phase, &ready, &*published[i]);
                    let sample_every = spec.sample_every;
                    std::thread::Builder::new()
                        .name(format!("backend-{i}"))
                        .spawn_scoped(scope, move || {
                            if let Some(cpu) = cpu {
                                crate::topology::pin_current_thread(cpu);
                            }
                            let backend = procs.attach();
                            // The start gate: all threads attach and pin before any starts.
                            ready.fetch_add(1, Ordering::Release);
                            while phase.load(Ordering::Acquire) == STARTING {
                                std::thread::park();
                            }
                            let mut backend = backend.map_err(|e| -> OpError { Box::new(e) })?;
                            let words = LoopWords::<false> {
                                phase,
                                published: count,
                            };
                            run_thread(op, &mut backend, words, sample_every).inspect_err(|_| {
                                phase.store(STOP, Ordering::Relaxed);
                            })
                        })
                })
                .collect();
            let mut handles = Vec::with_capacity(spec.threads);
            for h in spawned {
                match h {
                    Ok(h) => handles.push(h),
                    Err(e) => results.push(Err(HarnessError::Spawn(e))),
                }
            }
            if !results.is_empty() {
                // Threads already started leave the gate when they see STOP.
                phase.store(STOP, Ordering::Release);
                for h in &handles {
                    h.thread().unpark();
                }
                return;
            }
            while ready.load(Ordering::Acquire) < spec.threads {
                std::thread::sleep(Duration::from_micros(200));
            }
            let _ = phase.compare_exchange(STARTING, WARMUP, Ordering::Release, Ordering::Relaxed);
            for h in &handles {
                h.thread().unpark();
            }
            (elapsed, timeline) = control(&phase, &published, spec);
            interrupted = crate::interrupt::stop_requested();
            for h in handles {
                results.push(match h.join() {
                    Ok(r) => r.map_err(HarnessError::Workload),
                    Err(_) => Err(HarnessError::ThreadPanicked),
                });
            }
        });
        if interrupted && elapsed < TIMELINE_INTERVAL {
            // Stopped in the warm-up or at once: nothing worth a figure was measured.
            return Err(HarnessError::Interrupted);
        }
        assemble(spec.threads, results, elapsed, &timeline, None)
    })
}

/// Runs `team` with `companions` on host threads beside it: started before it, stopped (even
/// if it panics) and waited for after it.
fn with_companions<R>(
    companions: Vec<Companion<'_>>,
    team: impl FnOnce() -> Result<R, HarnessError>,
) -> Result<R, HarnessError> {
    let (bodies, stops): (Vec<_>, Vec<_>) = companions
        .into_iter()
        .map(|c| ((c.name, c.body), c.stop))
        .unzip();
    /// Stops the companions however the team's run ends (a panic included).
    struct StopAll<'a>(Vec<Box<dyn FnOnce() + Send + 'a>>);
    impl Drop for StopAll<'_> {
        fn drop(&mut self) {
            for stop in self.0.drain(..) {
                stop();
            }
        }
    }
    std::thread::scope(|scope| {
        let mut running = Vec::with_capacity(bodies.len());
        let stop_all = StopAll(stops);
        for (name, body) in bodies {
            running.push(
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn_scoped(scope, body)
                    .map_err(HarnessError::Spawn)?,
            );
        }
        let run = team();
        drop(stop_all);
        for c in running {
            c.join().map_err(|_| HarnessError::ThreadPanicked)?;
        }
        run
    })
}

/// The team's run from its threads' results: their counts, latencies and statistics merged, or
/// the first thread's error.
fn assemble(
    threads: usize,
    results: impl IntoIterator<Item = Result<ThreadResult, HarnessError>>,
    elapsed: Duration,
    timeline: &Timeline,
    sim: Option<SimCost>,
) -> Result<TeamRun, HarnessError> {
    let mut per_thread_ops = Vec::with_capacity(threads);
    let mut latency = latency_histogram();
    let mut stats = BackendStats::default();
    for r in results {
        let r = r?;
        per_thread_ops.push(r.ops);
        latency
            .add(&r.latency)
            .map_err(|_| HarnessError::Histogram)?;
        stats.merge(&r.stats);
    }
    Ok(TeamRun {
        threads,
        elapsed,
        per_thread_ops,
        latency,
        stats,
        ideal_ops_per_sec: None,
        timeline_interval: timeline.interval(),
        timeline_ops_per_sec: timeline.rates(),
        sim,
    })
}

/// The controlling thread's part once the team is at the gate: warm-up, the measured phase with
/// its timeline, stop. Returns the measured time and the timeline. On a simulated machine it
/// runs as a housekeeping thread, its sleeps and clock virtual.
fn control(
    phase: &AtomicU8,
    published: &[CachePadded<AtomicU64>],
    spec: &TeamSpec,
) -> (Duration, Timeline) {
    let total = || -> u64 { published.iter().map(|c| c.load(Ordering::Relaxed)).sum() };
    let _ = phase.compare_exchange(STARTING, WARMUP, Ordering::Release, Ordering::Relaxed);
    let warm_start = Instant::now();
    sleep_unless_stopped(phase, spec.warmup);
    if let Some(until) = spec.until {
        poll_until(phase, warm_start, until.warmup_cap, || {
            total() >= until.warmup_ops
        });
    }
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::Relaxed, Ordering::Relaxed);
    if pglocks_sim::hook::active() {
        // The hot-lines tally covers what is measured, not the warm-up.
        pglocks_sim::hook::measurement_starts();
    }
    let start = Instant::now();
    // Each thread's count goes on from its warm-up's: what the team has completed since this
    // moment is the total less what it is now.
    let base = total();
    let mut timeline = Timeline::default();
    let mut last = (start, base);
    let mut due = TIMELINE_INTERVAL;
    let (cap, target) = match spec.until {
        Some(u) => (u.cap.max(spec.duration), Some(u.ops)),
        None => (spec.duration, None),
    };
    loop {
        let now = Instant::now();
        let elapsed = now - start;
        if phase.load(Ordering::Relaxed) == STOP || crate::interrupt::stop_requested() {
            break;
        }
        let ops = total();
        if start + due <= now {
            timeline.add(ops.saturating_sub(last.1), (now - last.0).as_secs_f64());
            last = (now, ops);
            due += TIMELINE_INTERVAL;
        }
        let counted = target.map_or(true, |t| ops.saturating_sub(base) >= t);
        if elapsed >= cap || (elapsed >= spec.duration && counted) {
            break;
        }
        // Sleep to the next timeline point, or the end of the time, or the next poll of the
        // count once the time is up.
        let next_point = start + due;
        let wake = if elapsed < spec.duration {
            next_point.min(start + spec.duration)
        } else {
            next_point.min(now + RunLength::POLL).min(start + cap)
        };
        sleep_unless_stopped(phase, wake.saturating_duration_since(now));
    }
    phase.store(STOP, Ordering::Relaxed);
    (start.elapsed(), timeline)
}

/// Sleeps in [`RunLength::POLL`] steps until `done` says so, `cap` has passed since `from`, or
/// the team is stopped.
fn poll_until(phase: &AtomicU8, from: Instant, cap: Duration, mut done: impl FnMut() -> bool) {
    loop {
        let now = Instant::now();
        if done() || now - from >= cap || phase.load(Ordering::Relaxed) == STOP {
            return;
        }
        if crate::interrupt::stop_requested() {
            return;
        }
        sleep_unless_stopped(phase, RunLength::POLL.min(cap - (now - from)));
    }
}

/// [`run_team_with`] on a simulated machine: every thread of the team is a virtual thread on the
/// profile's CPU its pin order names (CPU `i` when not pinned), each companion one on the next
/// CPUs, and the controlling thread a housekeeping one, which stops the companions after the
/// team; all run on the calling host thread, in virtual time.
fn run_team_simulated<F, E, M>(
    spec: &TeamSpec,
    profile: &Profile,
    procs: &ProcTable,
    companions: Vec<Companion<'_>>,
    make_op: M,
) -> Result<TeamRun, HarnessError>
where
    M: Fn(usize) -> F,
    F: FnMut(&mut Backend) -> Result<(), E> + Send,
    E: Into<OpError>,
{
    let cpus = profile.cpu_count();
    let phase = CachePadded::new(AtomicU8::new(STARTING));
    let published: Vec<CachePadded<AtomicU64>> = (0..spec.threads)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let mut results: Vec<Option<Result<ThreadResult, OpError>>> =
        (0..spec.threads).map(|_| None).collect();
    let mut measured = (Duration::ZERO, Timeline::default());
    let cpu_of = |i: usize| crate::topology::cpu_for_thread(&spec.pin_order, i).unwrap_or(i % cpus);
    let mut threads = Vec::with_capacity(spec.threads + companions.len() + 1);
    let mut stops = Vec::with_capacity(companions.len());
    for (k, c) in companions.into_iter().enumerate() {
        threads.push(SimThread {
            placement: Placement::Cpu(cpu_of(spec.threads + k)),
            body: c.body,
        });
        stops.push(c.stop);
    }
    for (i, slot) in results.iter_mut().enumerate() {
        let op = make_op(i);
        let cpu = cpu_of(i);
        let (phase, count) = (&phase, &*published[i]);
        let sample_every = spec.sample_every;
        threads.push(SimThread {
            placement: Placement::Cpu(cpu),
            body: Box::new(move || {
                while phase.load(Ordering::Acquire) == STARTING {
                    pglocks_sync::thread::yield_now();
                }
                let r = match procs.attach() {
                    Ok(mut backend) => {
                        let words = LoopWords::<true> {
                            phase,
                            published: count,
                        };
                        run_thread(op, &mut backend, words, sample_every)
                    }
                    Err(e) => Err(Box::new(e) as OpError),
                };
                if r.is_err() {
                    phase.store(STOP, Ordering::Relaxed);
                }
                *slot = Some(r);
            }),
        });
    }
    let (phase_ref, published_ref, out) = (&phase, &published[..], &mut measured);
    threads.push(SimThread {
        placement: Placement::Housekeeping,
        body: Box::new(move || {
            *out = control(phase_ref, published_ref, spec);
            for stop in stops {
                stop();
            }
        }),
    });
    // A run that has not finished after four times its longest length (and a second more) in
    // virtual time is stuck (a lock never released, a livelock).
    let longest = match spec.until {
        Some(u) => u.warmup_cap.max(spec.warmup) + u.cap.max(spec.duration),
        None => spec.warmup + spec.duration,
    };
    let limit = longest * 4 + Duration::from_secs(1);
    let outcome = pglocks_sim::run(profile, threads, limit)?;
    let (elapsed, timeline) = measured;
    let results = results.into_iter().map(|r| {
        r.ok_or(HarnessError::ThreadPanicked)?
            .map_err(HarnessError::Workload)
    });
    let cost = SimCost {
        host_time: outcome.host_time,
        ops: outcome.ops,
    };
    let run = assemble(spec.threads, results, elapsed, &timeline, Some(cost))?;
    if !outcome.hot_lines.is_empty() {
        print_hot_lines(spec, profile, &outcome, run.per_thread_ops.iter().sum());
    }
    Ok(run)
}

/// The `PGLOCKS_SIM_HOT_LINES` diagnostic of a simulated run that measured `ops` operations, on
/// stderr beside the progress: the lines waited on most, and the transfers by structure (the
/// tally covers the measured phase only).
fn print_hot_lines(spec: &TeamSpec, profile: &Profile, outcome: &pglocks_sim::Outcome, ops: u64) {
    let mut text = format!(
        "hot lines of a simulated run of {} threads on {} ({ops} operations measured):\n",
        spec.threads, profile.name
    );
    for h in &outcome.hot_lines {
        text += &format!(
            "  {:>10.1} us waited, {:>8} transfers: {}\n",
            h.waited.as_secs_f64() * 1e6,
            h.transfers,
            h.data
                .clone()
                .unwrap_or_else(|| format!("[not in the map] {}", h.site))
        );
    }
    text += "transfers by structure (a region of the shared-memory map, or where a line outside it was first missed on), per operation:\n";
    for s in outcome.by_structure.iter().take(outcome.hot_lines.len()) {
        text += &format!(
            "  {:>8} transfers, {:>7.2} per operation: {}\n",
            s.transfers,
            s.transfers as f64 / ops.max(1) as f64,
            s.name
        );
    }
    eprint!("{text}");
}

/// A run's throughput against time, in bounded memory: operations and seconds per point, each
/// point `width` [`TIMELINE_INTERVAL`]s long.
#[derive(Debug)]
struct Timeline {
    /// Intervals per point (a power of two).
    width: u64,
    /// Full points: (operations, seconds).
    points: Vec<(u64, f64)>,
    /// The point being filled: operations, seconds, intervals so far.
    filling: (u64, f64, u64),
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            width: 1,
            points: Vec::new(),
            filling: (0, 0.0, 0),
        }
    }
}

impl Timeline {
    /// Adds one interval's reading; merges the points in pairs when they reach the limit.
    fn add(&mut self, ops: u64, secs: f64) {
        let f = &mut self.filling;
        (f.0, f.1, f.2) = (f.0 + ops, f.1 + secs, f.2 + 1);
        if f.2 < self.width {
            return;
        }
        self.points.push((f.0, f.1));
        self.filling = (0, 0.0, 0);
        if self.points.len() >= MAX_TIMELINE_POINTS {
            self.points = self
                .points
                .chunks(2)
                .map(|pair| pair.iter().fold((0, 0.0), |(o, s), p| (o + p.0, s + p.1)))
                .collect();
            self.width *= 2;
        }
    }

    /// The throughput of each full point.
    fn rates(&self) -> Vec<f64> {
        self.points
            .iter()
            .map(|&(ops, secs)| if secs > 0.0 { ops as f64 / secs } else { 0.0 })
            .collect()
    }

    /// The time one point covers.
    fn interval(&self) -> Duration {
        TIMELINE_INTERVAL.saturating_mul(self.width.min(u64::from(u32::MAX)) as u32)
    }
}

/// An empty latency histogram as runs keep them: 1 ns to the longest latency recorded, 3
/// significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("constant histogram bounds are valid")
}

/// Sleeps `d` in short steps, returning early if a thread failed and stopped the team, or a stop
/// was asked for.
fn sleep_unless_stopped(phase: &AtomicU8, d: Duration) {
    let end = Instant::now() + d;
    loop {
        let now = Instant::now();
        if now >= end || phase.load(Ordering::Relaxed) == STOP || crate::interrupt::stop_requested()
        {
            return;
        }
        sleep((end - now).min(Duration::from_millis(20)));
    }
}

/// The two words a thread's loop shares with the controlling thread: the phase it reads before
/// each operation and its count, published after each.
///
/// On a host CPU (`SIMULATED` false) they are used as std's atomics directly, so the loop pays
/// nothing per operation for the shim's check; on a simulated one, through the shim, whose
/// accesses are where the simulation may switch threads (an operation that makes no shared
/// access of its own still lets the others run). The choice is made once per run, by
/// monomorphisation.
struct LoopWords<'a, const SIMULATED: bool> {
    phase: &'a AtomicU8,
    published: &'a AtomicU64,
}

impl<const SIMULATED: bool> LoopWords<'_, SIMULATED> {
    #[inline(always)]
    fn phase(&self) -> u8 {
        if SIMULATED {
            self.phase.load(Ordering::Relaxed)
        } else {
            self.phase.as_std().load(Ordering::Relaxed)
        }
    }

    #[inline(always)]
    fn publish(&self, ops: u64) {
        if SIMULATED {
            self.published.store(ops, Ordering::Relaxed)
        } else {
            self.published.as_std().store(ops, Ordering::Relaxed)
        }
    }
}

/// One thread's loop: warm up, then count and sample until told to stop.
///
/// The measured loop calls the operation from one place only, so that a small operation (one
/// lock and unlock) can be inlined into it as it would be into a caller's own loop; the warm-up
/// and the timed operations (one in `sample_every`) call it from functions of their own.
fn run_thread<const SIMULATED: bool, F, E>(
    mut op: F,
    backend: &mut Backend,
    words: LoopWords<'_, SIMULATED>,
    sample_every: u32,
) -> Result<ThreadResult, OpError>
where
    F: FnMut(&mut Backend) -> Result<(), E>,
    E: Into<OpError>,
{
    let warm = warm_up(&mut op, backend, &words)?;
    backend.take_stats();
    let mut latency = latency_histogram();
    // The published count goes on from the warm-up's; the thread's own is the difference.
    let mut ops = warm;
    // The first operation is always timed, so even a thread that completes only a few
    // operations (a FIFO lock oversubscribed) contributes a latency sample. The count to the
    // next sample is decremented before it is tested, so that the untimed path pays one
    // decrement and branch for it (a test for 1 and then a decrement is one instruction more).
    let mut until_sample = 1u32;
    while words.phase() == MEASURE {
        until_sample = until_sample.wrapping_sub(1);
        if until_sample == 0 {
            timed(&mut op, backend, &mut latency)?;
            until_sample = sample_every;
        } else {
            op(backend).map_err(Into::into)?;
        }
        ops += 1;
        words.publish(ops);
    }
    Ok(ThreadResult {
        ops: ops - warm,
        latency,
        stats: backend.take_stats(),
    })
}

/// A team thread's measured loop, run on the calling host thread for exactly `ops` operations
/// of `op`, with the sampling of a real run (one operation in `sample_every` timed); returns the
/// operations counted.
///
/// This is the loop [`run_team`] runs, without the timed phases that decide when it stops, so
/// that what it executes does not depend on the machine's speed: the instruction-count guard
/// (`benches/instructions.rs`, under callgrind) measures the harness and the locks with it. The
/// operation count is kept by a wrapper around `op` that ends the measured phase at the last one
/// (a decrement and a compare per operation, the same in every build it compares).
pub fn run_loop_for<F, E>(
    ops: u64,
    backend: &mut Backend,
    sample_every: u32,
    mut op: F,
) -> Result<u64, HarnessError>
where
    F: FnMut(&mut Backend) -> Result<(), E>,
    E: Into<OpError>,
{
    if ops == 0 {
        return Ok(0);
    }
    let phase = AtomicU8::new(MEASURE);
    let published = AtomicU64::new(0);
    let mut left = ops;
    let counted = |b: &mut Backend| -> Result<(), OpError> {
        left -= 1;
        if left == 0 {
            phase.as_std().store(STOP, Ordering::Relaxed);
        }
        op(b).map_err(Into::into)
    };
    let words = LoopWords::<false> {
        phase: &phase,
        published: &published,
    };
    let run = run_thread(counted, backend, words, sample_every).map_err(HarnessError::Workload)?;
    Ok(run.ops)
}

/// One operation, timed into `latency` (two clock reads around it).
///
/// Cold: one operation in `sample_every` is timed, and the hint lets the measured loop be laid
/// out for the untimed one (its operation runs on into the loop's test with no jump).
#[inline(never)]
#[cold]
fn timed<F, E>(
    op: &mut F,
    backend: &mut Backend,
    latency: &mut Histogram<u64>,
) -> Result<(), OpError>
where
    F: FnMut(&mut Backend) -> Result<(), E>,
    E: Into<OpError>,
{
    let t = Instant::now();
    op(backend).map_err(Into::into)?;
    latency.saturating_record(t.elapsed().as_nanos() as u64);
    Ok(())
}

/// The warm-up: operations run until the phase moves on, counted only in the published word
/// (the controlling thread may wait for a number of them); returns how many.
#[inline(never)]
fn warm_up<const SIMULATED: bool, F, E>(
    op: &mut F,
    backend: &mut Backend,
    words: &LoopWords<'_, SIMULATED>,
) -> Result<u64, OpError>
where
    F: FnMut(&mut Backend) -> Result<(), E>,
    E: Into<OpError>,
{
    let mut ops = 0u64;
    while words.phase() == WARMUP {
        op(backend).map_err(Into::into)?;
        ops += 1;
        words.publish(ops);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(threads: usize) -> TeamSpec {
        TeamSpec {
            threads,
            duration: Duration::from_millis(50),
            warmup: Duration::from_millis(10),
            pin_order: vec![],
            sample_every: 4,
            sim: None,
            until: None,
        }
    }

    #[test]
    fn counts_every_threads_operations() {
        let procs = ProcTable::new(3);
        let run = run_team(&spec(3), &procs, |_| {
            |_b: &mut Backend| -> Result<(), std::io::Error> { Ok(()) }
        })
        .unwrap();
        assert_eq!(run.per_thread_ops.len(), 3);
        assert!(run.per_thread_ops.iter().all(|&n| n > 0));
        assert!(run.elapsed >= Duration::from_millis(50));
        // Each thread times its first operation and every fourth after it: ceil(ops / 4).
        let samples = run.latency.len();
        assert!(samples * 4 >= run.total_ops() && samples * 4 <= run.total_ops() + 9);
    }

    #[test]
    fn a_count_lengthens_each_phase_past_its_time() {
        let procs = ProcTable::new(2);
        let calls = std::sync::atomic::AtomicU64::new(0);
        // Each operation takes a millisecond: 10 ms of measured time holds about 20 of two
        // threads', far fewer than the 200 asked for.
        let op = |_| {
            let calls = &calls;
            move |_b: &mut Backend| -> Result<(), std::io::Error> {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                Ok(())
            }
        };
        let mut s = spec(2);
        s.duration = Duration::from_millis(10);
        s.warmup = Duration::ZERO;
        s.until = Some(RunLength {
            warmup_ops: 30,
            warmup_cap: Duration::from_secs(60),
            ops: 200,
            cap: Duration::from_secs(60),
        });
        let run = run_team(&s, &procs, op).unwrap();
        assert!(run.total_ops() >= 200, "{}", run.total_ops());
        // The warm-up's 30 came first and are not among them.
        let calls = calls.load(std::sync::atomic::Ordering::Relaxed);
        assert!(calls >= run.total_ops() + 30, "{calls} {}", run.total_ops());
        // A count out of reach stops at the cap.
        s.until = Some(RunLength {
            ops: u64::MAX,
            cap: Duration::from_millis(30),
            ..s.until.unwrap()
        });
        let run = run_team(&s, &procs, op).unwrap();
        assert!(
            run.elapsed >= Duration::from_millis(30),
            "{:?}",
            run.elapsed
        );
        assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
    }

    #[test]
    fn a_long_timeline_keeps_a_bounded_number_of_points() {
        let mut t = Timeline::default();
        // A day of 100 ms readings, 10 operations each.
        let day = 24 * 3600 * 10;
        for k in 0..day {
            t.add(10 + k % 2, 0.1);
            assert!(t.points.len() < MAX_TIMELINE_POINTS, "{k}");
        }
        let (rates, interval) = (t.rates(), t.interval());
        assert!(rates.len() >= MAX_TIMELINE_POINTS / 2, "{}", rates.len());
        // Every point covers the same power-of-two number of intervals, and the points cover
        // the whole day but for the one being filled.
        assert!(t.width.is_power_of_two() && t.width >= 128, "{}", t.width);
        assert_eq!(interval, TIMELINE_INTERVAL * t.width as u32);
        assert!(day - rates.len() as u64 * t.width < t.width);
        assert!(
            rates.iter().all(|r| (r - 105.0).abs() < 0.01),
            "{:?}",
            &rates[..4]
        );
        // A short run keeps its 100 ms points.
        let mut short = Timeline::default();
        for _ in 0..5 {
            short.add(3, 0.1);
        }
        assert_eq!(
            (short.rates().len(), short.interval()),
            (5, TIMELINE_INTERVAL)
        );
    }

    #[test]
    fn the_timeline_has_one_throughput_per_full_interval() {
        let procs = ProcTable::new(2);
        let op = |_| |_b: &mut Backend| -> Result<(), std::io::Error> { Ok(()) };
        // Shorter than one interval: no timeline.
        let run = run_team(&spec(2), &procs, op).unwrap();
        assert!(run.timeline_ops_per_sec.is_empty());
        let mut s = spec(2);
        s.duration = Duration::from_millis(500);
        let run = run_team(&s, &procs, op).unwrap();
        let timeline = &run.timeline_ops_per_sec;
        assert_eq!(timeline.len(), 5, "{timeline:?}");
        assert!(timeline.iter().all(|&r| r > 0.0), "{timeline:?}");
        // The intervals together account for (nearly) all the run's operations: this checks what
        // is counted, not how fast (the machine may be shared; the bounds are wide).
        let counted: f64 = timeline.iter().map(|r| r * 0.1).sum();
        let total = run.total_ops() as f64;
        assert!(
            counted > 0.5 * total && counted < 1.5 * total,
            "{counted} of {total}: {timeline:?}"
        );
        // The tail after the last full interval is left out.
        s.duration = Duration::from_millis(250);
        let run = run_team(&s, &procs, op).unwrap();
        assert_eq!(run.timeline_ops_per_sec.len(), 2);
    }

    #[test]
    fn a_failing_operation_stops_the_team_with_its_error() {
        let procs = ProcTable::new(2);
        let mut s = spec(2);
        s.duration = Duration::from_secs(60);
        let started = Instant::now();
        let err = run_team(&s, &procs, |i| {
            let mut n = 0;
            move |_b: &mut Backend| {
                n += 1;
                if i == 1 && n == 1000 {
                    Err(std::io::Error::other("boom"))
                } else {
                    Ok(())
                }
            }
        })
        .unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn too_few_backend_slots_is_an_error_not_a_hang() {
        let procs = ProcTable::new(1);
        let err = run_team(&spec(2), &procs, |_| {
            |_b: &mut Backend| -> Result<(), std::io::Error> { Ok(()) }
        })
        .unwrap_err();
        assert!(err.to_string().contains("too many clients"), "{err}");
    }

    #[test]
    fn the_loop_for_a_count_runs_that_many_operations() {
        let procs = ProcTable::new(1);
        let mut b = procs.attach().unwrap();
        let mut calls = 0u64;
        let ops = run_loop_for(1000, &mut b, 64, |_b: &mut Backend| {
            calls += 1;
            Ok::<(), std::io::Error>(())
        })
        .unwrap();
        assert_eq!((ops, calls), (1000, 1000));
        assert_eq!(
            run_loop_for(0, &mut b, 64, |_b: &mut Backend| Ok::<(), std::io::Error>(
                ()
            ))
            .unwrap(),
            0
        );
        // An operation's error ends the loop with it.
        let err = run_loop_for(10, &mut b, 1, |_b: &mut Backend| {
            Err(std::io::Error::other("boom"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
    }

    #[test]
    fn zero_threads_is_rejected() {
        let procs = ProcTable::new(1);
        let err = run_team(&spec(0), &procs, |_| {
            |_b: &mut Backend| -> Result<(), std::io::Error> { Ok(()) }
        });
        assert!(matches!(err, Err(HarnessError::ZeroThreads)));
    }
}
