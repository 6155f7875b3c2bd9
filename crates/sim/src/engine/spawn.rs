//! Threads started in the middle of a run: a virtual thread that creates another, as a
//! PostgreSQL backend has the postmaster start a background worker (a parallel apply worker,
//! a parallel query worker) while it runs.
//!
//! **Creating.** [`spawn`] is a system call of the calling thread (`clone`): its stores become
//! visible first and it waits at a sync point, as every system call does, and it is charged
//! the profile's `os.syscall_ns`. The new
//! thread gets the next thread id and a CPU of the profile ([`Engine::free_cpu`]: the lowest
//! numbered one that no unfinished thread is placed on, else the one fewest are placed on), and
//! becomes runnable there `os.wake_ns` after the call (the kernel's wake-up of a new task is a
//! wake-up like a futex's), joining the CPU's run queue if another thread holds it. The
//! engine keeps the body until the scheduler has suspended the caller, then gives it a
//! coroutine of its own ([`adopt_born`]), before the new thread's first event can come due.
//!
//! **Waiting for it.** The engine has no join: a thread's end is something it tells others
//! through memory, and the sync shim's scoped threads (`pglocks_sync::thread::scope`) do so
//! with a semaphore the finishing thread posts, so a joining thread blocks in virtual time on a
//! futex like any other waiter.
//!
//! **A failed run.** When a run ends early (a deadlock, the time limit, a panic), the
//! unfinished threads are unwound youngest first, so a thread started mid-run is gone before
//! the thread that started it, whose frame it may borrow from, unwinds.
//!
//! Not modelled: what `fork` costs beyond one system call (copying page tables, the
//! postmaster's part in starting a background worker, the new process's first touches of its
//! memory); a thread never moves to another CPU.

use super::order::{sync_point, Co};
use super::os::{SpinWatch, State, Wake};
use super::run::coroutine;
use super::store_buffer::StoreBuffer;
use super::touch::Overlap;
use super::{with, Engine, SimError, Thread};
use crate::picos::Picos;

/// The body of a thread started mid-run, not yet given a coroutine.
pub(super) type Born = (usize, Box<dyn FnOnce() + 'static>);

/// Starts a virtual thread running `body` on a CPU of the profile, a wake-up's latency after
/// this system call; returns its thread id. Its first event comes after the caller's clock, so
/// it never runs before the call in virtual time.
///
/// # Safety
/// `body` may borrow from the caller (lifetime `'a`): the caller must make sure it does not
/// outlive what it borrows, by waiting until the thread has finished with the borrowed data
/// before that data goes (the shim's scoped threads wait for every thread they started). A run
/// that fails unwinds the threads youngest first, so a thread started here unwinds before its
/// starter's frame does.
#[cold]
#[inline(never)]
pub unsafe fn spawn<'a>(body: Box<dyn FnOnce() + 'a>) -> usize {
    // SAFETY: the caller keeps what `body` borrows alive while the thread may run (the
    // function's contract); the engine drops the body, run or not, before `run` returns.
    let body: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(body) };
    // A system call: the thread's loads in flight and its buffered stores complete first, so
    // the new thread sees everything its starter wrote before the call.
    with(Engine::drain);
    super::ops::drain_stores();
    sync_point();
    with(|e| e.spawn_thread(body))
}

impl Engine {
    /// A new thread: the caller's system call, then the new one runnable on a free CPU a
    /// wake-up later.
    fn spawn_thread(&mut self, body: Box<dyn FnOnce() + 'static>) -> usize {
        self.ops += 1;
        let sys = self.os.syscall;
        self.me().clock += sys;
        let at = self.me().clock + self.os.wake;
        let cpu = self.free_cpu();
        let tid = self.threads.len();
        self.threads.push(Thread::new(cpu, cpu));
        self.born.push((tid, body));
        self.make_runnable(tid, at);
        tid
    }

    /// The CPU a new thread goes on: the lowest-numbered CPU of the profile that no unfinished
    /// thread is placed on, or, when every one has some, the one with the fewest (the lowest
    /// numbered of those). A housekeeping thread's CPU is not the profile's and is never
    /// chosen. A thread that has returned counts as unfinished until the caller's clock has
    /// passed its end (it returns without a sync point, so it may have run ahead).
    pub(super) fn free_cpu(&self) -> usize {
        let now = self.threads[self.current].clock;
        let mut on = vec![0usize; self.costs.housekeeping()];
        let unfinished = |t: &&Thread| t.state != State::Done || t.clock > now;
        for t in self.threads.iter().filter(unfinished) {
            if let Some(n) = on.get_mut(t.cpu) {
                *n += 1;
            }
        }
        (0..on.len()).min_by_key(|&c| (on[c], c)).unwrap_or(0)
    }
}

impl Thread {
    /// A thread that has not run yet, on `cpu`, at `place` for the cost model.
    pub(super) fn new(cpu: usize, place: usize) -> Thread {
        Thread {
            clock: Picos::ZERO,
            cpu,
            place,
            state: State::Queued,
            token: 0,
            wake: Wake::Woken,
            yielder: std::ptr::null(),
            spin: SpinWatch::default(),
            overlap: Overlap::default(),
            stores: StoreBuffer::default(),
            preempt: false,
        }
    }
}

/// Gives each thread started since the scheduler last looked a coroutine, at its thread id.
pub(super) fn adopt_born(
    engine: &mut Engine,
    coroutines: &mut Vec<Option<Co>>,
) -> Result<(), SimError> {
    for (tid, body) in std::mem::take(&mut engine.born) {
        if coroutines.len() <= tid {
            coroutines.resize_with(tid + 1, || None);
        }
        coroutines[tid] = Some(coroutine(tid, body)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{clock, on, opteron};
    use super::super::{ops, run};
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::time::Duration;

    /// A word for the cost model alone (the tests keep their values in `Cell`s).
    const DONE: usize = 0x3000;

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_thread_started_mid_run_runs_on_a_free_cpu_after_the_call_and_a_wake_up() {
        let profile = opteron(3000.0);
        let os = super::super::os::KernelCosts::new(&profile.os);
        let (spawned_at, started_at) = (Cell::new(Picos::ZERO), Cell::new(Picos::ZERO));
        let (child, child_cpu_free) = (Cell::new(usize::MAX), Cell::new(false));
        let parent = on(0, || {
            ops::work(10_000);
            spawned_at.set(clock());
            // SAFETY: the run does not return before the child has finished.
            let tid = unsafe {
                spawn(Box::new(|| {
                    started_at.set(clock());
                    // CPUs 0 and 1 are taken by the two threads given at the start.
                    child_cpu_free.set(with(|e| e.threads[e.current].cpu) == 2);
                }))
            };
            child.set(tid);
        });
        // Done in the host's order before the call, but later in virtual time.
        let other = on(1, || ops::work(1_000_000));
        run(&profile, vec![parent, other], Duration::from_millis(1)).unwrap();
        assert_eq!(child.get(), 2, "the next thread id");
        assert!(child_cpu_free.get(), "the child went on the first free CPU");
        assert_eq!(started_at.get(), spawned_at.get() + os.syscall + os.wake);
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_starter_that_waits_for_its_thread_blocks_in_virtual_time_until_the_thread_is_done() {
        let profile = opteron(3000.0);
        let done = Cell::new(false);
        let log = RefCell::new(Vec::new());
        let (joined_at, child_end) = (Cell::new(Picos::ZERO), Cell::new(Picos::ZERO));
        let parent = on(0, || {
            // SAFETY: the parent waits below until the child has finished.
            unsafe {
                spawn(Box::new(|| {
                    ops::work(1_000_000);
                    log.borrow_mut().push("child");
                    done.set(true);
                    child_end.set(clock());
                    ops::futex_wake(DONE, 1);
                }));
            }
            while !done.get() {
                ops::futex_wait(DONE, || !done.get(), None);
            }
            log.borrow_mut().push("parent");
            joined_at.set(clock());
        });
        let out = run(&profile, vec![parent], Duration::from_millis(10)).unwrap();
        assert_eq!(*log.borrow(), ["child", "parent"]);
        // The parent slept through the child's million steps of work, and the run lasted them.
        let work = Picos(1_000_000 * crate::cache::Costs::new(&profile).busy_step_fs / 1000);
        assert!(child_end.get() > work, "{:?}", child_end.get());
        assert!(joined_at.get() > child_end.get());
        assert!(out.virtual_time >= joined_at.get().to_duration());
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_thread_started_when_every_cpu_is_taken_queues_on_the_least_loaded_one() {
        let profile = opteron(3000.0);
        let cpus = profile.cpu_count();
        let cpu = Cell::new(usize::MAX);
        let first = on(0, || {
            // SAFETY: the run does not return before the child has finished.
            unsafe {
                spawn(Box::new(|| cpu.set(with(|e| e.threads[e.current].cpu))));
            }
            ops::work(1000);
        });
        // Every CPU holds one thread; CPUs 0 and 1 a second one.
        let mut team = vec![first];
        team.extend((1..cpus).chain([0, 1]).map(|c| on(c, || ops::work(1000))));
        run(&profile, team, Duration::from_millis(1)).unwrap();
        assert_eq!(
            cpu.get(),
            2,
            "the lowest-numbered CPU of those holding one thread"
        );
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_run_that_fails_unwinds_a_thread_started_mid_run_before_its_starter() {
        let profile = opteron(3000.0);
        let order = RefCell::new(Vec::new());
        /// Notes its name in `order` when dropped (by an unwind).
        struct Note<'a>(&'a RefCell<Vec<&'static str>>, &'static str);
        impl Drop for Note<'_> {
            fn drop(&mut self) {
                self.0.borrow_mut().push(self.1);
            }
        }
        let parent = on(0, || {
            let _note = Note(&order, "starter");
            // SAFETY: the run fails (a deadlock) with both blocked; the child unwinds first.
            unsafe {
                spawn(Box::new(|| {
                    let _note = Note(&order, "started");
                    ops::futex_wait(DONE, || true, None);
                }));
            }
            ops::futex_wait(DONE, || true, None);
        });
        let err = run(&profile, vec![parent], Duration::from_millis(1)).unwrap_err();
        assert!(
            matches!(err, SimError::Deadlock { blocked: 2, .. }),
            "{err:?}"
        );
        assert_eq!(*order.borrow(), ["started", "starter"]);
    }
}
