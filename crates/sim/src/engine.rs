//! The engine: virtual threads as coroutines on one host thread, each with its own clock, run in
//! virtual-time order.
//!
//! **Conservative order.** The engine keeps an event queue ordered by (virtual time, sequence
//! number). Each virtual thread runs until, at the start of a shim operation, its clock has
//! passed the earliest event of any other thread (the *horizon*); it then queues itself at its
//! clock and the engine resumes whichever thread is earliest. So every shared-memory operation
//! takes effect in virtual-time order, and two runs with the
//! same machine and the same inputs interleave identically: the simulator is deterministic. A hit
//! takes effect when it is issued; a miss is booked then but takes effect when the line's
//! holder answers, and the thread waits for that moment in virtual time before the host does
//! the access (see the cost model's "Timing").
//!
//! **CPUs and the OS.** Each thread is placed on one CPU of the profile. A CPU runs one thread at
//! a time; more threads than CPUs wait in the CPU's run queue, and the running one is preempted
//! when its time slice (`os.quantum_us`) is over and another waits, which is how a lock holder
//! gets preempted and its waiters spin on. A futex wait, a sleep or a yield gives the CPU up.
//! A futex wake makes each woken thread runnable `os.wake_ns` after the waker's clock; a timed
//! wait or a sleep is a timer event in virtual time; every such call costs `os.syscall_ns`.
//! Housekeeping threads (the harness's own, not a backend) each get a CPU of their own, placed
//! on CPU 0's die for the cost model.
//!
//! **Spin elision.** A thread that re-reads a line nobody has written since its last read, with
//! only a [`spin_wait`](crate::hook::spin_wait) pause between, cannot see anything new until
//! another thread writes the line; the engine parks it on the line and resumes it at the time of
//! that write (or at its time slice's end, if others wait for its CPU). The rounds it skipped
//! are not executed; loops that count their rounds (PostgreSQL's `perform_spin_delay`) use the
//! plain pause, which is never elided.

use crate::cache::{Access, Caches, Costs, PS_PER_NS};
use crate::hot::{HotLine, HotLines};
use crate::profile::Profile;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
#[cfg(pglocks_sim)]
use crossbeam_utils::CachePadded;
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
#[cfg(pglocks_sim)]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// `d` in picoseconds, the engine's clock unit (saturating far beyond any simulated run).
fn ps(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX) / 2000) as u64 * PS_PER_NS
}

/// Stack size of each virtual thread (only the touched pages are backed by memory).
const STACK_BYTES: usize = 1 << 20;

/// Where a virtual thread runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On this CPU of the profile (thread `i` of a team goes on `order[i % len]`).
    Cpu(usize),
    /// On a CPU of its own, outside the profile's (the harness's controlling thread).
    Housekeeping,
}

/// One virtual thread to run.
pub struct SimThread<'a> {
    /// Where it runs.
    pub placement: Placement,
    /// What it does.
    pub body: Box<dyn FnOnce() + 'a>,
}

impl std::fmt::Debug for SimThread<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimThread")
            .field("placement", &self.placement)
            .finish_non_exhaustive()
    }
}

/// Why a simulation did not finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// This build has no simulator ([`BUILT_IN`] is false).
    #[error(
        "this build of pglocks cannot simulate (the real build does not pay for the simulator's hooks): build it with RUSTFLAGS=\"--cfg pglocks_sim\", as the pglocks CLI does by itself for --machine sim:PROFILE"
    )]
    NotThisBuild,
    /// Every unfinished thread waits for something no running thread will do.
    #[error(
        "simulated deadlock at {at_us:.1} µs of virtual time: {blocked} thread(s) wait on a futex or a sleep, {spinning} spin on memory nobody writes, and none can run"
    )]
    Deadlock {
        /// Virtual time, µs.
        at_us: f64,
        /// Threads in a futex wait.
        blocked: usize,
        /// Threads parked spinning on a line.
        spinning: usize,
    },
    /// Virtual time passed the limit.
    #[error("the simulation passed its limit of {limit_ms} ms of virtual time without finishing")]
    TimeLimit {
        /// The limit.
        limit_ms: u64,
    },
    /// A virtual thread panicked.
    #[error("a simulated thread panicked: {0}")]
    Panicked(String),
    /// A thread placed on a CPU the profile does not have.
    #[error("CPU {cpu} is not in the profile (it has {cpus})")]
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// CPUs in the profile.
        cpus: usize,
    },
    /// The host could not give a virtual thread a stack.
    #[error("cannot allocate a simulated thread's stack: {0}")]
    Stack(String),
}

/// What a finished simulation measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The virtual time at which the last thread finished.
    pub virtual_time: Duration,
    /// Shim operations simulated (loads, stores, RMWs, pauses, waits, wakes, sleeps).
    pub ops: u64,
    /// Cache-line transfers, by distance name.
    pub transfers: Vec<(String, u64)>,
    /// Spin-waits elided (a thread parked on a line until it changed).
    pub elided_spins: u64,
    /// Host time the simulation took.
    pub host_time: Duration,
    /// The lines waited on most, when `PGLOCKS_SIM_HOT_LINES` asks for them ([`crate::hot`]).
    pub hot_lines: Vec<HotLine>,
}

impl Outcome {
    /// Simulated shim operations per host second.
    pub fn ops_per_host_sec(&self) -> f64 {
        self.ops as f64 / self.host_time.as_secs_f64().max(1e-9)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// On its CPU: running, or queued in the event heap to run.
    OnCpu,
    /// Waiting in its CPU's run queue.
    Queued,
    /// In a futex wait or a sleep (off its CPU).
    Blocked,
    /// Parked on a line by spin elision (still on its CPU).
    Spinning,
    /// Finished.
    Done,
}

/// Why a blocked thread last woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    Woken,
    TimedOut,
}

#[derive(Debug)]
struct Thread {
    clock: u64,
    cpu: usize,
    place: usize,
    state: State,
    token: u64,
    wake: Wake,
    yielder: *const Yielder<(), ()>,
    /// Spin elision: the line and version of the last load, whether a spin-wait pause followed
    /// it, and how many unchanged re-reads in a row.
    spin_line: u64,
    spin_version: u64,
    spin_paused: bool,
    spin_rounds: u32,
}

const NO_LINE: u64 = u64::MAX;

#[derive(Debug, Default)]
struct Cpu {
    running: Option<usize>,
    queue: VecDeque<usize>,
    slice_end: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Run,
    Timer(u64),
}

type Event = Reverse<(u64, u64, usize, Kind)>;

/// The simulated machine's state while it runs.
pub(crate) struct Engine {
    costs: Costs,
    caches: Caches,
    threads: Vec<Thread>,
    cpus: Vec<Cpu>,
    events: BinaryHeap<Event>,
    seq: u64,
    current: usize,
    horizon: u64,
    limit: u64,
    futexes: FxHashMap<usize, VecDeque<(usize, u64)>>,
    watchers: FxHashMap<u64, Vec<(usize, u64)>>,
    failed: Option<SimError>,
    ops: u64,
    elided: u64,
    seeds: u64,
    epoch: Instant,
    syscall: u64,
    wake: u64,
    switch: u64,
    quantum: u64,
    slack: u64,
    hot: Option<HotLines>,
}

thread_local! {
    static ENGINE: Cell<*mut Engine> = const { Cell::new(std::ptr::null_mut()) };
}

/// Whether this build can simulate: it was compiled with `--cfg pglocks_sim`.
///
/// The real build must not pay for the simulator, and a check per shim operation is not free (on
/// the uncontended floor spinlock it was 13 instructions an operation: the load and branch, and
/// the registers the never-taken call holds, as `benches/instructions.rs` counts). So the hooks
/// exist only in a second build of the same sources: in any other, [`active`] is the constant
/// `false`, every shim operation is std's alone, and [`run`] refuses with
/// [`SimError::NotThisBuild`]. The `pglocks` CLI builds and runs that second build itself when a
/// command asks for a simulated machine, as loom's models are a build of their own.
pub const BUILT_IN: bool = cfg!(pglocks_sim);

/// Host threads inside [`run`] right now, alone on its cache line: while it is 0 the shim's check
/// is one relaxed load of a line nobody writes and a branch that is never taken.
#[cfg(pglocks_sim)]
static SIMULATING: CachePadded<AtomicUsize> = CachePadded::new(AtomicUsize::new(0));

/// Whether the calling code runs on a virtual thread: in a build without the simulator
/// ([`BUILT_IN`] false), never, and the shim's operations compile to std's.
///
/// In the simulator's build every shim operation asks this: inlined it is a compare of a
/// process-wide count with 0 and a branch, and only while some host thread simulates does a
/// caller reach the out-of-line half, which reads the thread-local engine.
#[inline(always)]
pub fn active() -> bool {
    #[cfg(pglocks_sim)]
    return SIMULATING.load(Ordering::Relaxed) != 0 && on_virtual_thread();
    #[cfg(not(pglocks_sim))]
    return false;
}

/// The second half of [`active`]: whether this host thread is running a virtual thread now.
#[cfg(pglocks_sim)]
#[cold]
#[inline(never)]
fn on_virtual_thread() -> bool {
    ENGINE.with(|e| !e.get().is_null())
}

/// Runs `f` on the engine of the virtual thread that calls it.
#[inline]
fn with<R>(f: impl FnOnce(&mut Engine) -> R) -> R {
    let p = ENGINE.with(|e| e.get());
    assert!(!p.is_null(), "pglocks-sim hook called outside a simulation");
    // SAFETY: the pointer is set only while the scheduler has resumed a virtual thread on this
    // host thread, and points to the engine `run` owns for the whole simulation. Only one virtual
    // thread runs at a time, the scheduler does not touch the engine until the thread suspends,
    // and no reference made here outlives `f` (none is held across a suspend).
    f(unsafe { &mut *p })
}

/// Suspends the calling virtual thread; the engine has already arranged when it resumes.
fn suspend(y: *const Yielder<(), ()>) {
    // SAFETY: the yielder lives on the virtual thread's own stack, for as long as its body runs,
    // and this is that thread (the engine hands out only the current thread's yielder).
    unsafe { (*y).suspend(()) }
}

/// Waits, at the start of a shim operation, until this thread's clock is the earliest.
#[inline]
pub(crate) fn sync_point() {
    while let Some(y) = with(Engine::before_op) {
        suspend(y);
    }
}

impl Engine {
    fn push(&mut self, at: u64, tid: usize, kind: Kind) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, tid, kind)));
        self.horizon = self.horizon.min(at);
    }

    fn me(&mut self) -> &mut Thread {
        &mut self.threads[self.current]
    }

    /// Whether the current thread shares its core's pipeline right now: another hardware
    /// thread of its core runs (or spins on) a thread.
    fn smt_busy(&self) -> bool {
        let cpu = self.threads[self.current].cpu;
        self.costs.siblings(cpu).iter().any(|&s| {
            self.cpus[s]
                .running
                .is_some_and(|r| matches!(self.threads[r].state, State::OnCpu | State::Spinning))
        })
    }

    /// Charges `ps` of private work to the current thread (slower while its SMT sibling runs).
    fn charge_private(&mut self, ps: u64) {
        let ps = self.costs.private(ps, self.smt_busy());
        self.me().clock += ps;
    }

    /// Decides whether the current thread may go on; if not, arranges its resumption and
    /// returns its yielder.
    fn before_op(&mut self) -> Option<*const Yielder<(), ()>> {
        let tid = self.current;
        let (clock, cpu, y) = {
            let t = &self.threads[tid];
            (t.clock, t.cpu, t.yielder)
        };
        if self.failed.is_some() {
            return Some(y);
        }
        if clock > self.limit {
            self.failed = Some(SimError::TimeLimit {
                limit_ms: self.limit / PS_PER_NS / 1_000_000,
            });
            return Some(y);
        }
        let c = &self.cpus[cpu];
        if clock >= c.slice_end && !c.queue.is_empty() {
            self.cpus[cpu].queue.push_back(tid);
            self.threads[tid].state = State::Queued;
            self.leave_cpu(tid, clock);
            return Some(y);
        }
        if clock > self.horizon {
            self.push(clock, tid, Kind::Run);
            return Some(y);
        }
        None
    }

    /// Takes `tid` off its CPU at `now` and starts the next queued thread there, if any.
    fn leave_cpu(&mut self, tid: usize, now: u64) {
        let cpu = self.threads[tid].cpu;
        self.cpus[cpu].running = None;
        if let Some(next) = self.cpus[cpu].queue.pop_front() {
            self.start_on_cpu(next, now + self.switch);
        }
    }

    fn start_on_cpu(&mut self, tid: usize, at: u64) {
        let t = &mut self.threads[tid];
        t.clock = t.clock.max(at);
        t.state = State::OnCpu;
        let (cpu, clock) = (t.cpu, t.clock);
        self.cpus[cpu].running = Some(tid);
        self.cpus[cpu].slice_end = clock + self.quantum;
        self.push(clock, tid, Kind::Run);
    }

    /// Makes a blocked (or new) thread runnable at `at`: on its CPU if that is free, else in
    /// the CPU's queue.
    fn make_runnable(&mut self, tid: usize, at: u64) {
        let t = &mut self.threads[tid];
        t.clock = t.clock.max(at);
        t.token += 1;
        if self.cpus[t.cpu].running.is_none() {
            let clock = t.clock;
            self.start_on_cpu(tid, clock);
        } else {
            t.state = State::Queued;
            let cpu = t.cpu;
            self.cpus[cpu].queue.push_back(tid);
            // A thread parked spinning on that CPU must now give it up at its slice's end.
            if let Some(r) = self.cpus[cpu].running {
                let s = &self.threads[r];
                if s.state == State::Spinning {
                    let (at, token) = (s.clock.max(self.cpus[cpu].slice_end), s.token);
                    self.push(at, r, Kind::Timer(token));
                }
            }
        }
    }

    /// Resumes a thread parked by spin elision (it kept its CPU) at `at`.
    fn end_spin(&mut self, tid: usize, at: u64) {
        let t = &mut self.threads[tid];
        t.clock = t.clock.max(at);
        t.token += 1;
        t.state = State::OnCpu;
        t.spin_line = NO_LINE;
        let clock = t.clock;
        self.push(clock, tid, Kind::Run);
    }

    /// Charges the code run since the thread's last operation (the profile's `local`), before
    /// the access it leads to is ordered against the other threads.
    fn before_access(&mut self) {
        let local = self.costs.private(self.costs.local, self.smt_busy());
        self.me().clock += local;
    }

    /// An access, charged by the cost model. A hit takes effect now. A miss takes the line in
    /// the model's books now, but takes effect when the holder answers (see the cost model's
    /// "Timing"): the thread's clock is moved there and the part of the transfer still to come
    /// is returned, for [`Engine::take_effect`] once the other threads have run up to that time.
    fn access(&mut self, addr: usize, kind: Access) -> Option<(u64, u64)> {
        let shared = self.smt_busy();
        let (place, now) = {
            let t = &self.threads[self.current];
            (t.place, t.clock)
        };
        let c = self.caches.access(&self.costs, place, addr, kind, now);
        self.ops += 1;
        let Some(version) = c.version else {
            if let Some(hot) = self.hot.as_mut() {
                hot.record(c.line, c.done - now);
            }
            self.me().clock = c.answer;
            return Some((c.line, c.done - c.answer));
        };
        self.me().clock = now + self.costs.private(c.done - now, shared);
        self.applied(c.line, version, kind);
        None
    }

    /// A miss taking effect at the thread's clock; the clock then moves on by `rest`, to the
    /// transfer's end.
    fn take_effect(&mut self, line: u64, kind: Access, rest: u64) {
        let version = self.caches.effect(line, kind);
        self.applied(line, version, kind);
        self.me().clock += rest;
    }

    /// What follows an access's taking effect: the spin-elision bookkeeping of the thread, and
    /// the wake-up of threads parked on a line it wrote.
    fn applied(&mut self, line: u64, version: u64, kind: Access) {
        let now = self.threads[self.current].clock;
        let t = &mut self.threads[self.current];
        if kind == Access::Load {
            if t.spin_line == line && t.spin_version == version && t.spin_paused {
                t.spin_rounds += 1;
            } else {
                (t.spin_line, t.spin_version, t.spin_rounds) = (line, version, 0);
            }
            t.spin_paused = false;
            return;
        }
        t.spin_line = NO_LINE;
        if self.watchers.is_empty() {
            return;
        }
        if let Some(ws) = self.watchers.remove(&line) {
            for (w, token) in ws {
                if self.threads[w].token == token && self.threads[w].state == State::Spinning {
                    self.end_spin(w, now);
                }
            }
        }
    }

    /// A pause; with `elidable`, parks the thread on the line it keeps re-reading.
    fn pause(&mut self, elidable: bool) -> Option<*const Yielder<(), ()>> {
        self.ops += 1;
        self.charge_private(self.costs.pause);
        let tid = self.current;
        let t = &mut self.threads[tid];
        if !elidable || t.spin_line == NO_LINE {
            t.spin_line = NO_LINE;
            return None;
        }
        t.spin_paused = true;
        if t.spin_rounds < 2 {
            return None;
        }
        // Nothing this thread can read changes before someone writes the line.
        t.state = State::Spinning;
        t.token += 1;
        let (line, token, cpu, clock, y) = (t.spin_line, t.token, t.cpu, t.clock, t.yielder);
        self.elided += 1;
        self.watchers.entry(line).or_default().push((tid, token));
        if !self.cpus[cpu].queue.is_empty() {
            let at = clock.max(self.cpus[cpu].slice_end);
            self.push(at, tid, Kind::Timer(token));
        }
        Some(y)
    }

    fn block(&mut self, timeout: Option<u64>) -> *const Yielder<(), ()> {
        let tid = self.current;
        let t = &mut self.threads[tid];
        t.state = State::Blocked;
        t.token += 1;
        t.spin_line = NO_LINE;
        let (token, clock, y) = (t.token, t.clock, t.yielder);
        if let Some(at) = timeout {
            self.push(at.max(clock), tid, Kind::Timer(token));
        }
        self.leave_cpu(tid, clock);
        y
    }
}

/// The simulation's public face for the shim: each function is one operation of the virtual
/// thread that calls it, and may only be called from one (check [`active`] first).
pub mod ops {
    use super::*;

    /// A load, store or read-modify-write of the byte at `addr`.
    #[cold]
    #[inline(never)]
    pub fn access(addr: usize, kind: Access) {
        with(Engine::before_access);
        sync_point();
        if let Some((line, rest)) = with(|e| e.access(addr, kind)) {
            // The other threads first run up to the moment the holder answers.
            sync_point();
            with(|e| e.take_effect(line, kind, rest));
        }
    }

    /// A full fence.
    #[cold]
    #[inline(never)]
    pub fn fence() {
        with(|e| {
            e.charge_private(e.costs.fence);
            e.me().spin_line = NO_LINE;
        });
    }

    /// A `pause` in a retry loop that counts its rounds (never elided).
    #[cold]
    #[inline(never)]
    pub fn pause() {
        with(|e| e.pause(false));
    }

    /// A `pause` in a loop whose exit depends only on the memory it re-reads: the engine may
    /// skip the rounds in which that memory does not change.
    #[cold]
    #[inline(never)]
    pub fn spin_wait() {
        if let Some(y) = with(|e| e.pause(true)) {
            suspend(y);
        }
    }

    /// A seed for a random-number generator, different at every call and the same in every run
    /// of the same simulation.
    #[cold]
    #[inline(never)]
    pub fn fresh_seed() -> u64 {
        with(|e| {
            e.seeds += 1;
            // splitmix64's finaliser over the call count.
            let mut z = e.seeds.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
    }

    /// `ns` nanoseconds of private CPU work (the modelled code of an operation, as calibrated).
    #[cold]
    #[inline(never)]
    pub fn charge_ns(ns: f64) {
        let ps = (ns * PS_PER_NS as f64).round().clamp(0.0, 1e18) as u64;
        with(|e| e.charge_private(ps));
    }

    /// `steps` steps of private CPU work.
    #[cold]
    #[inline(never)]
    pub fn work(steps: u64) {
        with(|e| e.charge_private(steps.saturating_mul(e.costs.busy_step_fs) / 1000));
    }

    /// The calling thread's virtual clock as a host `Instant` (the simulation's start plus the
    /// virtual time).
    #[cold]
    #[inline(never)]
    pub fn now() -> Instant {
        with(|e| e.epoch + Duration::from_nanos(e.threads[e.current].clock / PS_PER_NS))
    }

    /// Sleeps for `d` of virtual time (plus the profile's timer slack), off the CPU.
    #[cold]
    #[inline(never)]
    pub fn sleep(d: Duration) {
        sync_point();
        let y = with(|e| {
            e.ops += 1;
            let sys = e.syscall + e.slack;
            e.me().clock += e.syscall;
            let at = e.me().clock + sys + ps(d);
            e.block(Some(at))
        });
        suspend(y);
    }

    /// `sched_yield`: gives the CPU to the next thread waiting for it, if any.
    #[cold]
    #[inline(never)]
    pub fn yield_now() {
        sync_point();
        let y = with(|e| {
            e.ops += 1;
            let sys = e.syscall;
            let tid = e.current;
            e.me().clock += sys;
            let cpu = e.me().cpu;
            if e.cpus[cpu].queue.is_empty() {
                return None;
            }
            let clock = e.me().clock;
            e.cpus[cpu].queue.push_back(tid);
            e.threads[tid].state = State::Queued;
            e.leave_cpu(tid, clock);
            Some(e.threads[tid].yielder)
        });
        if let Some(y) = y {
            suspend(y);
        }
    }

    /// A futex wait on `addr`: if `still()` holds, sleeps until a wake on `addr` or until
    /// `deadline`. Returns `false` if it timed out.
    #[cold]
    #[inline(never)]
    pub fn futex_wait(
        addr: usize,
        still: impl FnOnce() -> bool,
        deadline: Option<Instant>,
    ) -> bool {
        sync_point();
        with(|e| {
            e.ops += 1;
            let sys = e.syscall;
            e.me().clock += sys;
        });
        sync_point();
        if !still() {
            return true;
        }
        let y = with(|e| {
            let timeout = deadline.map(|d| ps(d.saturating_duration_since(e.epoch)));
            let tid = e.current;
            let token = e.threads[tid].token + 1;
            e.futexes.entry(addr).or_default().push_back((tid, token));
            e.block(timeout)
        });
        suspend(y);
        with(|e| e.me().wake == Wake::Woken)
    }

    /// A futex wake of up to `n` waiters on `addr`; returns how many it woke.
    #[cold]
    #[inline(never)]
    pub fn futex_wake(addr: usize, n: usize) -> usize {
        sync_point();
        with(|e| {
            e.ops += 1;
            let sys = e.syscall;
            e.me().clock += sys;
            let at = e.me().clock + e.wake;
            let mut woke = 0;
            while woke < n {
                let Some(q) = e.futexes.get_mut(&addr) else {
                    break;
                };
                let Some((w, token)) = q.pop_front() else {
                    e.futexes.remove(&addr);
                    break;
                };
                let t = &mut e.threads[w];
                if t.token == token && t.state == State::Blocked {
                    t.wake = Wake::Woken;
                    e.make_runnable(w, at);
                    woke += 1;
                }
            }
            woke
        })
    }
}

/// Runs `threads` on a machine built from `profile` until all of them return, or for at most
/// `limit` of virtual time.
pub fn run(
    profile: &Profile,
    threads: Vec<SimThread<'_>>,
    limit: Duration,
) -> Result<Outcome, SimError> {
    if !BUILT_IN {
        return Err(SimError::NotThisBuild);
    }
    let started = Instant::now();
    let costs = Costs::new(profile);
    let ncpus = profile.cpu_count();
    let ns = |x: f64| (x * PS_PER_NS as f64).round() as u64;
    let mut engine = Engine {
        caches: Caches::new(),
        threads: Vec::with_capacity(threads.len()),
        cpus: (0..ncpus).map(|_| Cpu::default()).collect(),
        events: BinaryHeap::new(),
        seq: 0,
        current: 0,
        horizon: u64::MAX,
        limit: ps(limit),
        futexes: FxHashMap::default(),
        watchers: FxHashMap::default(),
        failed: None,
        ops: 0,
        elided: 0,
        seeds: 0,
        epoch: started,
        syscall: ns(profile.os.syscall_ns),
        wake: ns(profile.os.wake_ns),
        switch: ns(profile.os.context_switch_ns),
        quantum: ns(profile.os.quantum_us * 1000.0).max(1),
        slack: ns(profile.os.timer_slack_ns),
        hot: HotLines::from_env(),
        costs,
    };
    let mut bodies = Vec::with_capacity(threads.len());
    for (tid, th) in threads.into_iter().enumerate() {
        let (cpu, place) = match th.placement {
            Placement::Cpu(c) if c < ncpus => (c, c),
            Placement::Cpu(c) => {
                return Err(SimError::NoSuchCpu {
                    cpu: c,
                    cpus: ncpus,
                })
            }
            Placement::Housekeeping => {
                engine.cpus.push(Cpu::default());
                (engine.cpus.len() - 1, engine.costs.housekeeping())
            }
        };
        engine.threads.push(Thread {
            clock: 0,
            cpu,
            place,
            state: State::Queued,
            token: 0,
            wake: Wake::Woken,
            yielder: std::ptr::null(),
            spin_line: NO_LINE,
            spin_version: 0,
            spin_paused: false,
            spin_rounds: 0,
        });
        bodies.push((tid, th.body));
    }
    for tid in 0..engine.threads.len() {
        engine.make_runnable(tid, 0);
    }
    let engine: *mut Engine = Box::into_raw(Box::new(engine));
    let mut coroutines = Vec::with_capacity(bodies.len());
    for (tid, body) in bodies {
        // SAFETY: the body may borrow from the caller's frame (lifetime 'a); every coroutine is
        // run to completion or dropped (which unwinds it) before `run` returns, so no borrow
        // outlives what it borrows, as with scoped threads.
        let body: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(body) };
        let stack = DefaultStack::new(STACK_BYTES).map_err(|e| SimError::Stack(e.to_string()))?;
        coroutines.push(Some(Coroutine::with_stack(
            stack,
            move |y: &Yielder<(), ()>, ()| {
                with(|e| e.threads[tid].yielder = y as *const _);
                body();
            },
        )));
    }
    #[cfg(pglocks_sim)]
    SIMULATING.fetch_add(1, Ordering::Relaxed);
    let result = schedule(engine, &mut coroutines);
    // Unwind unfinished threads with the hooks off (their destructors run as plain code).
    ENGINE.with(|e| e.set(std::ptr::null_mut()));
    drop(coroutines);
    #[cfg(pglocks_sim)]
    SIMULATING.fetch_sub(1, Ordering::Relaxed);
    // SAFETY: made by Box::into_raw above; no virtual thread is left to use it.
    let mut engine = unsafe { Box::from_raw(engine) };
    result?;
    let end = engine.threads.iter().map(|t| t.clock).max().unwrap_or(0);
    let hot_lines = engine.hot.take().map(HotLines::top).unwrap_or_default();
    Ok(Outcome {
        virtual_time: Duration::from_nanos(end / PS_PER_NS),
        ops: engine.ops,
        transfers: engine
            .caches
            .transfer_counts()
            .map(|(d, n)| (format!("{d:?}").to_lowercase(), n))
            .collect(),
        elided_spins: engine.elided,
        host_time: started.elapsed(),
        hot_lines,
    })
}

type Co = Coroutine<(), (), (), DefaultStack>;

fn schedule(engine: *mut Engine, coroutines: &mut [Option<Co>]) -> Result<(), SimError> {
    // SAFETY (every dereference below): no virtual thread runs while the scheduler holds these
    // short-lived references; each ends before the next resume.
    let e = || unsafe { &mut *engine };
    while let Some(Reverse((at, _, tid, kind))) = e().events.pop() {
        if let Kind::Timer(token) = kind {
            let t = &mut e().threads[tid];
            if t.token == token {
                match t.state {
                    State::Blocked => {
                        t.wake = Wake::TimedOut;
                        e().make_runnable(tid, at);
                    }
                    State::Spinning => e().end_spin(tid, at),
                    _ => {}
                }
            }
            continue;
        }
        if at > e().limit {
            return Err(SimError::TimeLimit {
                limit_ms: e().limit / PS_PER_NS / 1_000_000,
            });
        }
        {
            let en = e();
            en.current = tid;
            en.horizon = en.events.peek().map_or(u64::MAX, |Reverse(ev)| ev.0);
            let t = &mut en.threads[tid];
            t.clock = t.clock.max(at);
        }
        let Some(co) = coroutines[tid].as_mut() else {
            continue;
        };
        ENGINE.with(|c| c.set(engine));
        let r = catch_unwind(AssertUnwindSafe(|| co.resume(())));
        ENGINE.with(|c| c.set(std::ptr::null_mut()));
        match r {
            Ok(CoroutineResult::Yield(())) => {}
            Ok(CoroutineResult::Return(())) => {
                coroutines[tid] = None;
                let en = e();
                en.threads[tid].state = State::Done;
                let clock = en.threads[tid].clock;
                en.leave_cpu(tid, clock);
            }
            Err(p) => {
                coroutines[tid] = None;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "(no message)".into());
                return Err(SimError::Panicked(msg));
            }
        }
        if let Some(err) = e().failed.take() {
            return Err(err);
        }
    }
    let en = e();
    let unfinished = en.threads.iter().filter(|t| t.state != State::Done);
    let (mut blocked, mut spinning) = (0, 0);
    for t in unfinished {
        match t.state {
            State::Spinning => spinning += 1,
            _ => blocked += 1,
        }
    }
    if blocked + spinning > 0 {
        let at = en.threads.iter().map(|t| t.clock).max().unwrap_or(0);
        return Err(SimError::Deadlock {
            at_us: at as f64 / 1e6,
            blocked,
            spinning,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the simulator's build simulates; any other refuses with an error that says how to
    /// get one, and its shim never asks the engine.
    #[test]
    fn only_the_simulators_build_simulates() {
        let profile = Profile::find("opteron-48").unwrap();
        let one = || SimThread {
            placement: Placement::Cpu(0),
            body: Box::new(|| assert!(active() == BUILT_IN)),
        };
        let run = run(&profile, vec![one()], Duration::from_millis(1));
        if BUILT_IN {
            run.unwrap();
        } else {
            let err = run.unwrap_err();
            assert_eq!(err, SimError::NotThisBuild);
            assert!(err.to_string().contains("--cfg pglocks_sim"), "{err}");
        }
        assert!(!active(), "a host thread outside a simulation");
    }
}
