//! A simulation from start to end: the machine built from a profile, one coroutine per virtual
//! thread, the scheduler run until every thread has returned, and what it measured.
//!
//! Each virtual thread is a stackful coroutine (`corosensei`) with a stack of its own, on the
//! host thread that called [`run`](fn@run); its body may borrow from the caller, as a scoped
//! thread's may, because every coroutine has returned or been unwound before `run` does. Every
//! thread starts runnable at virtual time 0, in the order given, so the first placed on a CPU
//! runs first and the others queue behind it; creating a thread costs nothing (not modelled:
//! `clone`, the first touch of its stack). A thread may start others while it runs (`spawn`),
//! which the scheduler gives coroutines as they come. A run that fails (a deadlock, the time
//! limit, a panic) unwinds the unfinished threads with the hooks off, youngest first: their
//! destructors run as plain code.

use super::order::{schedule, Co};
use super::os::{Cpu, KernelCosts};
#[cfg(pglocks_sim)]
use super::SIMULATING;
use super::{Engine, Outcome, Placement, SimError, SimThread, Thread, BUILT_IN, ENGINE};
use crate::cache::{Caches, Costs};
use crate::hot::HotLines;
use crate::keyed::Keyed;
use crate::picos::Picos;
use crate::profile::Profile;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, Yielder};
use std::collections::BinaryHeap;
#[cfg(pglocks_sim)]
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Stack size of each virtual thread (only the touched pages are backed by memory).
const STACK_BYTES: usize = 1 << 20;

/// Runs `threads` on a machine built from `profile` until all of them return, or for at most
/// `limit` of virtual time.
///
/// Models normally reach the simulator through the sync shim (`pglocks-sync`) and a run
/// through the harness (`pglocks run --machine sim:PROFILE`); this is the machine itself. In a
/// build without the simulator (no `--cfg pglocks_sim`) it returns [`SimError::NotThisBuild`].
///
/// # Examples
/// Two virtual threads on different sockets of a simulated Westmere, each making 100
/// read-modify-writes to one cache line: the line moves between the sockets.
/// ```
/// use pglocks_sim::{hook, run, Access, Placement, Profile, SimError, SimThread};
/// use std::time::Duration;
///
/// let profile = Profile::find("westmere-80")?;
/// let line = 0x1000;
/// let thread = |cpu| SimThread {
///     placement: Placement::Cpu(cpu),
///     body: Box::new(move || {
///         for _ in 0..100 {
///             hook::access(line, Access::Rmw);
///         }
///     }),
/// };
/// let far = profile.cpu_count() - 1;
/// match run(&profile, vec![thread(0), thread(far)], Duration::from_millis(10)) {
///     Ok(outcome) => {
///         assert_eq!(outcome.ops, 200);
///         assert!(outcome.transfers.iter().any(|(_, n)| *n > 0), "{outcome:?}");
///         assert!(outcome.virtual_time > Duration::ZERO);
///     }
///     Err(SimError::NotThisBuild) => assert!(!pglocks_sim::BUILT_IN),
///     Err(e) => return Err(e.into()),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
    let places = profile.cpus();
    let mut engine = Engine {
        caches: Caches::for_model(&profile.model),
        threads: Vec::with_capacity(threads.len()),
        cpus: places
            .iter()
            .map(|place| Cpu {
                node: place.node,
                ..Cpu::default()
            })
            .collect(),
        events: BinaryHeap::new(),
        seq: 0,
        current: 0,
        horizon: Picos::MAX,
        limit: Picos::from_duration(limit),
        os: KernelCosts::new(&profile.os),
        futexes: Keyed::default(),
        watchers: Keyed::default(),
        watching: 0,
        failed: None,
        ops: 0,
        touches: 0,
        elided: 0,
        seeds: 0,
        epoch: started,
        hot: HotLines::from_env(costs.line_shift),
        numa_nodes: profile.numa_nodes(),
        translation: crate::shmem::Translation::current(),
        born: Vec::new(),
        perturb: None,
        costs,
    };
    engine.perturb = super::perturb::Perturb::new(
        profile.model.preempt_every_us,
        profile.model.seed,
        engine.os.wake,
        engine.os.quantum,
        ncpus,
    );
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
        engine.threads.push(Thread::new(cpu, place));
        bodies.push((tid, th.body));
    }
    for tid in 0..engine.threads.len() {
        engine.make_runnable(tid, Picos::ZERO);
    }
    let engine: *mut Engine = Box::into_raw(Box::new(engine));
    let mut coroutines: Vec<Option<Co>> = Vec::with_capacity(bodies.len());
    for (tid, body) in bodies {
        // SAFETY: the body may borrow from the caller's frame (lifetime 'a); every coroutine is
        // run to completion or dropped (which unwinds it) before `run` returns, so no borrow
        // outlives what it borrows, as with scoped threads.
        let body: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(body) };
        coroutines.push(Some(coroutine(tid, body)?));
    }
    #[cfg(pglocks_sim)]
    SIMULATING.fetch_add(1, Ordering::Relaxed);
    let result = schedule(engine, &mut coroutines);
    // Unwind unfinished threads with the hooks off (their destructors run as plain code),
    // youngest first: a thread started mid-run may borrow from its starter's frame.
    ENGINE.with(|e| e.set(std::ptr::null_mut()));
    while let Some(co) = coroutines.pop() {
        drop(co);
    }
    #[cfg(pglocks_sim)]
    SIMULATING.fetch_sub(1, Ordering::Relaxed);
    // SAFETY: made by Box::into_raw above; no virtual thread is left to use it.
    let mut engine = unsafe { Box::from_raw(engine) };
    result?;
    let end = engine
        .threads
        .iter()
        .map(|t| t.clock)
        .max()
        .unwrap_or(Picos::ZERO);
    let (hot_lines, by_structure) = engine.hot.take().map(HotLines::top).unwrap_or_default();
    Ok(Outcome {
        virtual_time: end.to_duration(),
        ops: engine.ops,
        touches: engine.touches,
        transfers: engine
            .caches
            .transfer_counts()
            .map(|(d, n)| (format!("{d:?}").to_lowercase(), n))
            .collect(),
        elided_spins: engine.elided,
        preemptions: engine.perturb.as_ref().map_or(0, |p| p.preemptions),
        host_time: started.elapsed(),
        hot_lines,
        by_structure,
    })
}

/// The coroutine of thread `tid`, running `body` on a stack of its own.
pub(super) fn coroutine(tid: usize, body: Box<dyn FnOnce() + 'static>) -> Result<Co, SimError> {
    let stack = DefaultStack::new(STACK_BYTES).map_err(|e| SimError::Stack(e.to_string()))?;
    Ok(Coroutine::with_stack(
        stack,
        move |y: &Yielder<(), ()>, ()| {
            super::with(|e| e.threads[tid].yielder = y as *const _);
            body();
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testing::on;
    use super::*;
    use crate::engine::active;

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

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_thread_on_a_cpu_the_profile_lacks_is_refused_before_any_thread_runs() {
        let profile = Profile::find("opteron-48").unwrap();
        let ran = std::cell::Cell::new(false);
        let team = |cpu| {
            vec![
                on(0, || ran.set(true)),
                SimThread {
                    placement: Placement::Cpu(cpu),
                    body: Box::new(|| {}),
                },
            ]
        };
        let err = run(&profile, team(48), Duration::from_millis(1)).unwrap_err();
        assert_eq!(err, SimError::NoSuchCpu { cpu: 48, cpus: 48 });
        assert!(!ran.get());
        // The last CPU of the profile is one.
        run(&profile, team(47), Duration::from_millis(1)).unwrap();
        assert!(ran.get());
    }
}
