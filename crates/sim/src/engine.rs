//! The engine: virtual threads as coroutines on one host thread, each with its own clock, run in
//! virtual-time order on the CPUs of a modelled machine and kernel.
//!
//! It has three parts, each a module:
//!
//! - the **ordering core** (`order`): the event queue of virtual time, which thread runs next,
//!   and the moment each cache-line access takes effect. It is what makes a simulation
//!   deterministic: every shared-memory operation takes effect in virtual-time order, whatever
//!   the host does.
//! - the **OS model** (`os`): which CPU each thread runs on, the CPUs' run queues and time
//!   slices, futex waits and wakes, sleeps and yields, and spin elision (a spinning thread parked
//!   until the line it re-reads is written).
//! - the **shim's entry points** ([`ops`]): one function per operation of the sync shim, which
//!   orders the operation against the other threads, charges it and suspends the calling
//!   virtual thread when the model says so; and [`run`](fn@run), which builds a machine from a
//!   profile, runs the threads to the end and reports what it measured ([`Outcome`]) or why it
//!   could not ([`SimError`]).
//!
//! This module holds what they share: the types a caller hands in and gets back, the engine's
//! state (one `Engine` per simulation, one `Thread` per virtual thread), and the check the shim
//! makes at every operation ([`active`]), which in a build without the simulator is the constant
//! `false` ([`BUILT_IN`]).

use crate::cache::{Caches, Costs};
use crate::hot::{HotLine, HotLines, Structure};
use crate::keyed::Keyed;
use crate::picos::Picos;
use corosensei::Yielder;
#[cfg(pglocks_sim)]
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
#[cfg(pglocks_sim)]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub mod ops;
mod order;
mod os;
mod perturb;
mod run;
pub(crate) mod spawn;
mod store_buffer;
pub(crate) mod syscall;
mod touch;

pub use run::run;

use order::Event;
use os::{Cpu, KernelCosts, SpinWatch, State, Wake};
use store_buffer::StoreBuffer;
pub use store_buffer::{Forwarded, Stored};
use touch::Overlap;

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

impl<'a> SimThread<'a> {
    /// A virtual thread on `cpu` of the profile.
    pub fn on(cpu: usize, body: impl FnOnce() + 'a) -> Self {
        SimThread {
            placement: Placement::Cpu(cpu),
            body: Box::new(body),
        }
    }

    /// One virtual thread on each of `cpus`, the `i`-th running what `body(i)` returns.
    pub fn team<F: FnOnce() + 'a>(cpus: &[usize], body: impl Fn(usize) -> F) -> Vec<Self> {
        cpus.iter()
            .enumerate()
            .map(|(i, &cpu)| SimThread::on(cpu, body(i)))
            .collect()
    }
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
    /// Lines of the data behind the locks touched ([`crate::shmem`]; not shim operations).
    pub touches: u64,
    /// Cache-line transfers, by distance name.
    pub transfers: Vec<(String, u64)>,
    /// Spin-waits elided (a thread parked on a line until it changed).
    pub elided_spins: u64,
    /// Threads preempted by the schedule's perturbation (`model.preempt_every_us`).
    pub preemptions: u64,
    /// Host time the simulation took.
    pub host_time: Duration,
    /// The lines waited on most, when `PGLOCKS_SIM_HOT_LINES` asks for them ([`crate::hot`]).
    pub hot_lines: Vec<HotLine>,
    /// With the hot lines, every line's transfers added up by structure, most first.
    pub by_structure: Vec<Structure>,
}

impl Outcome {
    /// Simulated shim operations per host second.
    pub fn ops_per_host_sec(&self) -> f64 {
        self.ops as f64 / self.host_time.as_secs_f64().max(1e-9)
    }

    /// The structures of [`Outcome::by_structure`] that are not in the shared-memory map:
    /// lines charged at their host address, named by the code that first missed on them.
    pub fn outside_the_map(&self) -> Vec<&Structure> {
        self.by_structure.iter().filter(|s| !s.placed).collect()
    }

    /// The transfers of the structure `name` in [`Outcome::by_structure`]: 0 when none of its
    /// lines moved, or when the run kept no tally.
    pub fn transfers_of(&self, name: &str) -> u64 {
        self.by_structure
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.transfers)
            .sum()
    }
}

/// One virtual thread's state.
#[derive(Debug)]
struct Thread {
    /// Its virtual clock: how far it has run.
    clock: Picos,
    /// The CPU it runs on (a profile's, or a housekeeping one after them).
    cpu: usize,
    /// Where it is for the cost model: its CPU, or the housekeeping place.
    place: usize,
    /// Running, queued, blocked, parked or done.
    state: State,
    /// Bumped whenever it blocks, parks or becomes runnable: a wake-up or a timer carrying an
    /// older token is stale.
    token: u64,
    /// How its last block ended.
    wake: Wake,
    /// Its coroutine's yielder, on its own stack (null until it first runs).
    yielder: *const Yielder<(), ()>,
    /// What spin elision knows of its last loads.
    spin: SpinWatch,
    /// Its loads in flight inside an independent scope.
    overlap: Overlap,
    /// Its stores not yet visible.
    stores: StoreBuffer,
    /// Drawn at a change point of the schedule's perturbation: preempted at its next sync point.
    preempt: bool,
}

/// The simulated machine's state while it runs.
pub(crate) struct Engine {
    /// The profile's cache costs and distances.
    costs: Costs,
    /// Every line's coherence state.
    caches: Caches,
    /// The virtual threads, by id.
    threads: Vec<Thread>,
    /// The profile's CPUs, then one per housekeeping thread.
    cpus: Vec<Cpu>,
    /// The event queue, earliest first.
    events: BinaryHeap<Reverse<Event>>,
    /// The last event's sequence number.
    seq: u64,
    /// The thread running now.
    current: usize,
    /// The earliest event queued when the current thread was resumed, or since: the clock up to
    /// which it may run without yielding.
    horizon: Picos,
    /// The run's limit of virtual time.
    limit: Picos,
    /// The kernel's costs.
    os: KernelCosts,
    /// Futex waiters by address, in the order they queued, with the token of their wait (keyed
    /// by host address, so in first-seen order: [`crate::keyed`]).
    futexes: Keyed<VecDeque<(usize, u64)>>,
    /// Threads parked by spin elision, by the line they wait on, with the token of their park.
    watchers: Keyed<Vec<(usize, u64)>>,
    /// How many threads `watchers` holds (parked, or since woken by a timer and not yet
    /// dropped from their line's list).
    watching: usize,
    /// Why the run must end, once the current thread has suspended.
    failed: Option<SimError>,
    /// Shim operations so far.
    ops: u64,
    /// Lines touched so far.
    touches: u64,
    /// Spin-waits elided so far.
    elided: u64,
    /// Seeds handed out so far.
    seeds: u64,
    /// The host time that stands for virtual time 0.
    epoch: Instant,
    /// The hot-lines tally, if asked for.
    hot: Option<HotLines>,
    /// The profile's NUMA nodes.
    numa_nodes: usize,
    /// Host addresses to the shared-memory map's ([`crate::shmem`]).
    translation: crate::shmem::Translation,
    /// Threads started mid-run whose bodies await a coroutine (`spawn`).
    born: Vec<spawn::Born>,
    /// The schedule's perturbation, when the profile asks for one (`model.preempt_every_us`).
    perturb: Option<perturb::Perturb>,
}

/// Whether this build can simulate: it was compiled with `--cfg pglocks_sim`.
///
/// The real build must not pay for the simulator, and a check per shim operation is not free (on
/// the uncontended floor spinlock it was 13 instructions an operation: the load and branch, and
/// the registers the never-taken call holds, as `benches/instructions.rs` counts). So the hooks
/// exist only in a second build of the same sources: in any other, [`active`] is the constant
/// `false`, every shim operation is std's alone, and [`run`](fn@run) refuses with
/// [`SimError::NotThisBuild`]. The `pglocks` CLI builds and runs that second build itself when a
/// command asks for a simulated machine, as loom's models are a build of their own.
pub const BUILT_IN: bool = cfg!(pglocks_sim);

/// Host threads inside [`run`](fn@run) right now, alone on its cache line: while it is 0 the
/// shim's check is one relaxed load of a line nobody writes and a branch that is never taken.
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

thread_local! {
    /// The engine of the virtual thread this host thread is running now, or null: set by the
    /// scheduler around each resume, and read by every shim operation.
    static ENGINE: Cell<*mut Engine> = const { Cell::new(std::ptr::null_mut()) };
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

/// A placement in the shared-memory map made (`Some`) or ended at `host`: the engine of the
/// virtual thread that made it, if any, follows it at once (one started later reads the map).
pub(crate) fn placed(p: Option<crate::shmem::Placement>, host: usize) {
    if active() {
        with(|e| {
            if p.is_none() {
                if let Some(len) = e.translation.len_of(host) {
                    e.unplaced(host, len);
                }
            }
            e.translation.update(p, host)
        });
    }
}

/// Suspends the calling virtual thread; the engine has already arranged when it resumes.
fn suspend(y: *const Yielder<(), ()>) {
    // SAFETY: the yielder lives on the virtual thread's own stack, for as long as its body runs,
    // and this is that thread (the engine hands out only the current thread's yielder).
    unsafe { (*y).suspend(()) }
}

/// What the engine's unit tests share: a machine, a thread on a CPU, and the clock of the
/// virtual thread that asks.
#[cfg(test)]
mod testing {
    use super::{with, SimThread};
    use crate::cache::Costs;
    use crate::picos::Picos;
    use crate::profile::Profile;

    /// The 48-core Opteron (no SMT, so no sibling ever slows a thread down), with time slices
    /// of `quantum_us`.
    pub(super) fn opteron(quantum_us: f64) -> Profile {
        let mut p = Profile::find("opteron-48").unwrap();
        p.os.quantum_us = quantum_us;
        p
    }

    /// What `steps` of [`super::ops::work`] and then an access cost before the access is
    /// ordered, on a CPU whose sibling is idle.
    pub(super) fn work_then_local(profile: &Profile, steps: u64) -> Picos {
        let c = Costs::new(profile);
        Picos(steps * c.busy_step_fs / 1000) + c.local
    }

    /// A virtual thread on `cpu` of the profile.
    pub(super) fn on<'a>(cpu: usize, body: impl FnOnce() + 'a) -> SimThread<'a> {
        SimThread::on(cpu, body)
    }

    /// The calling virtual thread's clock.
    pub(super) fn clock() -> Picos {
        with(|e| e.threads[e.current].clock)
    }
}
