//! The OS model: the kernel's part of a virtual thread's life, the CPU it runs on, the run
//! queue it waits in, and what a futex wait, a sleep or a yield does to it.
//!
//! **CPUs and run queues.** Each thread is placed on one CPU of the profile, and stays there (no
//! migration, no load balancing: a thread is pinned, as the harness pins its teams). A CPU runs
//! one thread at a time; more threads than CPUs wait in the CPU's FIFO run queue, and the
//! running one is preempted when its time slice (`os.quantum_us`) is over and another waits,
//! which is how a lock holder gets preempted and its waiters spin on. The slice is checked at
//! the thread's next sync point, so a thread is preempted between two shim operations, never
//! inside one. Handing a CPU to the next thread costs `os.context_switch_ns`. Housekeeping
//! threads (the harness's own, not a backend) each get a CPU of their own, placed on CPU 0's
//! die for the cost model.
//!
//! **Blocking.** A futex wait or a sleep gives the CPU up, and so does a yield when another
//! thread waits for the CPU; every such call costs `os.syscall_ns`. A futex wake makes each
//! woken thread runnable `os.wake_ns` after the waker's clock, in the order the waiters queued
//! on the address, and the waker pays for each thread it wakes (the lines of the waiter's
//! queue entry, its task and its CPU's run queue, [`Engine::futex_wake`]); a timed wait or a
//! sleep is a timer event in virtual time, and a sleep of `d` ends `d` plus the timer slack
//! (`os.timer_slack_ns`) plus a second system call's cost after the call. A woken thread runs
//! at once if its CPU is free, else it joins the CPU's run queue.
//! Each thread carries a *token*, bumped whenever it blocks, parks or becomes runnable again, so
//! a wake-up or a timer meant for an earlier wait is recognised as stale and ignored. Not
//! modelled: signals, priorities, and the scheduler's own cost beyond the context switch.
//!
//! **Spin elision.** A thread that re-reads a line nobody has written since its last read, with
//! only a [`spin_wait`](crate::hook::spin_wait) pause between, cannot see anything new until
//! another thread writes the line. At the pause after its second unchanged re-read the engine
//! parks it on the line, and resumes it at the time of that write (or at its time slice's end,
//! if others wait for its CPU). The rounds it skipped are not executed, and it keeps its CPU
//! meanwhile, as a spinning thread does. Loops that count their rounds (PostgreSQL's
//! `perform_spin_delay`) use the plain pause, which is never elided; a load of another line, a
//! write, a plain pause, a fence, a futex wait or a sleep between the re-reads starts the count
//! again.

use super::order::Kind;
use super::Engine;
use crate::cache::Access;
use crate::picos::Picos;
use crate::profile::Os;
use corosensei::Yielder;
use std::collections::VecDeque;
use std::time::Instant;

/// Where a thread is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
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
pub(super) enum Wake {
    Woken,
    TimedOut,
}

/// Spin elision's view of a thread's loads: the line and version of its last load, whether a
/// spin-wait pause followed it, and how many unchanged re-reads in a row.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SpinWatch {
    /// The line of the last load, or none since something other than a spin-wait pause came
    /// after it.
    line: Option<u64>,
    /// The line's write count when it was loaded.
    version: u64,
    /// Whether a spin-wait pause followed the load.
    paused: bool,
    /// Re-reads of the same version in a row, each after a spin-wait pause.
    rounds: u32,
}

impl SpinWatch {
    /// Forgets the last load: whatever the thread did since may change what it reads next.
    pub(super) fn forget(&mut self) {
        self.line = None;
    }
}

/// The kernel's costs, in virtual time (the profile's `os` section).
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelCosts {
    /// Entering and leaving the kernel.
    pub(super) syscall: Picos,
    /// From a futex wake to the woken thread's running.
    pub(super) wake: Picos,
    /// Handing a CPU from one thread to the next.
    context_switch: Picos,
    /// A thread's time slice (never 0).
    pub(super) quantum: Picos,
    /// What a sleep oversleeps by.
    timer_slack: Picos,
}

impl KernelCosts {
    pub(super) fn new(os: &Os) -> KernelCosts {
        let ns = Picos::from_ns_f64;
        KernelCosts {
            syscall: ns(os.syscall_ns),
            wake: ns(os.wake_ns),
            context_switch: ns(os.context_switch_ns),
            quantum: ns(os.quantum_us * 1000.0).max(Picos(1)),
            timer_slack: ns(os.timer_slack_ns),
        }
    }
}

/// One CPU: the thread on it, the threads waiting for it, and when the running one's time slice
/// ends.
#[derive(Debug, Default)]
pub(super) struct Cpu {
    /// The profile's NUMA node of this CPU (0 for a housekeeping one).
    pub(super) node: usize,
    pub(super) running: Option<usize>,
    pub(super) queue: VecDeque<usize>,
    pub(super) slice_end: Picos,
}

impl Engine {
    /// Preemption: if `tid`'s time slice is over and another thread waits for its CPU, moves
    /// `tid` to the back of the run queue and hands the CPU on. Returns whether it did.
    pub(super) fn preempt_at_slice_end(&mut self, tid: usize) -> bool {
        let (clock, cpu) = (self.threads[tid].clock, self.threads[tid].cpu);
        let c = &self.cpus[cpu];
        if clock >= c.slice_end && !c.queue.is_empty() {
            self.cpus[cpu].queue.push_back(tid);
            self.threads[tid].state = State::Queued;
            self.leave_cpu(tid, clock);
            return true;
        }
        false
    }

    /// Takes `tid` off its CPU at `now` and starts the next queued thread there, if any.
    pub(super) fn leave_cpu(&mut self, tid: usize, now: Picos) {
        let cpu = self.threads[tid].cpu;
        self.cpus[cpu].running = None;
        let next = match self.perturb.as_mut() {
            Some(p) if !self.cpus[cpu].queue.is_empty() => {
                let k = p.below(self.cpus[cpu].queue.len());
                self.cpus[cpu].queue.remove(k)
            }
            _ => self.cpus[cpu].queue.pop_front(),
        };
        if let Some(next) = next {
            self.start_on_cpu(next, now + self.os.context_switch);
        }
    }

    fn start_on_cpu(&mut self, tid: usize, at: Picos) {
        let t = &mut self.threads[tid];
        t.clock = t.clock.max(at);
        t.state = State::OnCpu;
        let (cpu, clock) = (t.cpu, t.clock);
        self.cpus[cpu].running = Some(tid);
        let slice = match self.perturb.as_mut() {
            Some(p) => p.slice(self.os.quantum),
            None => self.os.quantum,
        };
        self.cpus[cpu].slice_end = clock + slice;
        self.push(clock, tid, Kind::Run);
    }

    /// Makes a blocked (or new) thread runnable at `at`: on its CPU if that is free, else in
    /// the CPU's queue.
    pub(super) fn make_runnable(&mut self, tid: usize, at: Picos) {
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

    /// A timer of `tid`'s fires at `at`: a timed wait or a sleep ends, or a parked spinner's
    /// time slice does. A timer whose token is stale (the thread has moved on) does nothing.
    pub(super) fn timer_fires(&mut self, tid: usize, token: u64, at: Picos) {
        let t = &mut self.threads[tid];
        if t.token == token {
            match t.state {
                State::Blocked => {
                    t.wake = Wake::TimedOut;
                    self.make_runnable(tid, at);
                }
                State::Spinning => self.end_spin(tid, at),
                _ => {}
            }
        }
    }

    /// Resumes a thread parked by spin elision (it kept its CPU) at `at`.
    fn end_spin(&mut self, tid: usize, at: Picos) {
        let t = &mut self.threads[tid];
        t.clock = t.clock.max(at);
        t.token += 1;
        t.state = State::OnCpu;
        t.spin.forget();
        let clock = t.clock;
        self.push(clock, tid, Kind::Run);
    }

    /// What follows an access's taking effect: the spin-elision bookkeeping of the thread, and
    /// the wake-up of threads parked on a line it wrote.
    pub(super) fn applied(&mut self, line: u64, version: u64, kind: Access) {
        let now = self.threads[self.current].clock;
        let t = &mut self.threads[self.current];
        if kind == Access::Load {
            let s = &mut t.spin;
            if s.line == Some(line) && s.version == version && s.paused {
                s.rounds += 1;
            } else {
                (s.line, s.version, s.rounds) = (Some(line), version, 0);
            }
            s.paused = false;
            return;
        }
        t.spin.forget();
        self.wake_watchers(line, now);
    }

    /// Resumes, at `now`, the threads parked by spin elision on `line`, which was just written.
    pub(super) fn wake_watchers(&mut self, line: u64, now: Picos) {
        if self.watching == 0 {
            return;
        }
        if let Some(ws) = self.watchers.get_mut(line).filter(|ws| !ws.is_empty()) {
            let ws = std::mem::take(ws);
            self.watching -= ws.len();
            for (w, token) in ws {
                if self.threads[w].token == token && self.threads[w].state == State::Spinning {
                    self.end_spin(w, now);
                }
            }
        }
    }

    /// A pause; with `elidable`, parks the thread on the line it keeps re-reading.
    pub(super) fn pause(&mut self, elidable: bool) -> Option<*const Yielder<(), ()>> {
        self.ops += 1;
        self.charge_private(self.costs.pause);
        let tid = self.current;
        let t = &mut self.threads[tid];
        let line = match t.spin.line {
            Some(line) if elidable => line,
            _ => {
                t.spin.forget();
                return None;
            }
        };
        t.spin.paused = true;
        // Parked after the second unchanged re-read (unsourced; any count gives the same
        // loads, and only moves when elision starts).
        if t.spin.rounds < 2 {
            return None;
        }
        // Nothing this thread can read changes before someone writes the line.
        t.state = State::Spinning;
        t.token += 1;
        let (token, cpu, clock, y) = (t.token, t.cpu, t.clock, t.yielder);
        self.elided += 1;
        self.watchers.get_or_default(line).push((tid, token));
        self.watching += 1;
        if !self.cpus[cpu].queue.is_empty() {
            let at = clock.max(self.cpus[cpu].slice_end);
            self.push(at, tid, Kind::Timer(token));
        }
        Some(y)
    }

    /// Takes the current thread off its CPU until it is woken or, with `timeout`, until then.
    pub(super) fn block(&mut self, timeout: Option<Picos>) -> *const Yielder<(), ()> {
        let tid = self.current;
        let t = &mut self.threads[tid];
        t.state = State::Blocked;
        t.token += 1;
        t.spin.forget();
        let (token, clock, y) = (t.token, t.clock, t.yielder);
        if let Some(at) = timeout {
            self.push(at.max(clock), tid, Kind::Timer(token));
        }
        self.leave_cpu(tid, clock);
        y
    }

    /// `nanosleep` for `d`: the system call, then off the CPU until `d` plus the timer slack
    /// and the return's system call after it.
    pub(super) fn sleep(&mut self, d: Picos) -> *const Yielder<(), ()> {
        self.ops += 1;
        let (entry, slack_and_exit) = (self.os.syscall, self.os.timer_slack + self.os.syscall);
        self.me().clock += entry;
        let at = self.me().clock + slack_and_exit + d;
        self.block(Some(at))
    }

    /// `sched_yield`: the system call, then the CPU to the next thread waiting for it, if any.
    /// Returns the yielder if the thread gave its CPU up.
    pub(super) fn yield_cpu(&mut self) -> Option<*const Yielder<(), ()>> {
        self.ops += 1;
        let sys = self.os.syscall;
        let tid = self.current;
        self.me().clock += sys;
        let cpu = self.me().cpu;
        if self.cpus[cpu].queue.is_empty() {
            return None;
        }
        let clock = self.me().clock;
        self.cpus[cpu].queue.push_back(tid);
        self.threads[tid].state = State::Queued;
        self.leave_cpu(tid, clock);
        Some(self.threads[tid].yielder)
    }

    /// The entry of a futex system call (a wait's, before it checks the word).
    pub(super) fn futex_enter(&mut self) {
        self.ops += 1;
        let sys = self.os.syscall;
        self.me().clock += sys;
    }

    /// A futex wait that found the word unchanged: queues the current thread on `addr` and
    /// blocks it until a wake, or until `deadline` if given.
    pub(super) fn futex_block(
        &mut self,
        addr: usize,
        deadline: Option<Instant>,
    ) -> *const Yielder<(), ()> {
        let timeout =
            deadline.map(|d| Picos::from_duration(d.saturating_duration_since(self.epoch)));
        let tid = self.current;
        let token = self.threads[tid].token + 1;
        self.futexes
            .get_or_default(addr as u64)
            .push_back((tid, token));
        self.block(timeout)
    }

    /// Whether the current thread's last block ended by a wake (not a timeout).
    pub(super) fn was_woken(&mut self) -> bool {
        self.me().wake == Wake::Woken
    }

    /// `futex(FUTEX_WAKE)` of up to `n` waiters on `addr`, in the order they queued; returns
    /// how many it woke. A queued waiter that has since timed out is skipped.
    ///
    /// The waker pays for each thread it wakes, one after another, as `futex_wake` in the
    /// kernel's futex/waitwake.c does: it marks the waiter's `futex_q` (a store to a line on
    /// the waiter's stack), and `try_to_wake_up` in sched/core.c takes the task's `pi_lock`
    /// and queues it on its CPU's run queue (two locked instructions on lines that the waiter
    /// and its CPU last wrote). Each is charged as a transfer from the woken thread's CPU (the
    /// cost model's, without the lines' own state: the kernel's lines are not in the map), and
    /// each woken thread becomes runnable `os.wake_ns` after its own share is done.
    pub(super) fn futex_wake(&mut self, addr: usize, n: usize) -> usize {
        self.ops += 1;
        let sys = self.os.syscall;
        self.me().clock += sys;
        let mut woke = 0;
        while woke < n {
            let Some((w, token)) = self
                .futexes
                .get_mut(addr as u64)
                .and_then(VecDeque::pop_front)
            else {
                break;
            };
            let t = &self.threads[w];
            if t.token == token && t.state == State::Blocked {
                let share = self.waking_cost(t.place);
                let me = self.me();
                me.clock += share;
                let at = me.clock + self.os.wake;
                self.threads[w].wake = Wake::Woken;
                self.make_runnable(w, at);
                woke += 1;
            }
        }
        woke
    }

    /// What waking a thread at `place` costs the current thread (see [`Engine::futex_wake`]):
    /// a store and two locked instructions on lines that place holds. The count of lines is
    /// derived from the kernel functions named there; charging each as a transfer from the
    /// woken thread's CPU, whatever those lines' state, is unsourced.
    fn waking_cost(&self, place: usize) -> Picos {
        let c = &self.costs;
        let d = c.distance(self.threads[self.current].place, place);
        c.transfer(d) * 3 + c.atomic.saturating_sub(c.hit) * 2
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{clock, on, opteron, work_then_local};
    use super::super::{ops, run};
    use super::*;
    use crate::cache::Costs;
    use std::cell::{Cell, RefCell};
    use std::time::Duration;

    /// Addresses for the cost model alone (the tests keep their values in `Cell`s).
    const FLAG: usize = 0x1000;
    const WORD: usize = 0x2000;

    /// A thread that re-reads `FLAG` until it is set, with `pause` between its reads; counts
    /// the reads that found it unset and notes its clock after each pause.
    fn spinner<'a>(
        flag: &'a Cell<u64>,
        rounds: &'a Cell<u32>,
        after_pause: &'a Cell<Picos>,
        pause: fn(),
    ) -> impl FnOnce() + 'a {
        move || loop {
            ops::access(FLAG, Access::Load);
            if flag.get() != 0 {
                break;
            }
            rounds.set(rounds.get() + 1);
            pause();
            after_pause.set(clock());
        }
    }

    /// A thread that does `steps` of work, then sets `FLAG`; notes its clock before and after
    /// the store.
    fn writer<'a>(
        flag: &'a Cell<u64>,
        steps: u64,
        wrote: &'a Cell<(Picos, Picos)>,
    ) -> impl FnOnce() + 'a {
        move || {
            ops::work(steps);
            let before = clock();
            ops::access(FLAG, Access::Store);
            flag.set(1);
            wrote.set((before, clock()));
        }
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_spinner_is_parked_on_the_line_it_rereads_until_another_thread_writes_it() {
        let profile = opteron(3000.0);
        let (flag, rounds) = (Cell::new(0), Cell::new(0));
        let (resumed, wrote) = (Cell::new(Picos::ZERO), Cell::new(Default::default()));
        let team = vec![
            on(0, spinner(&flag, &rounds, &resumed, ops::spin_wait)),
            // About 10 µs of work first: some 1,600 rounds of a spinner that is not parked.
            on(1, writer(&flag, 35_000, &wrote)),
        ];
        let out = run(&profile, team, Duration::from_millis(1)).unwrap();
        // Three reads of the unset flag: the first, and two unchanged re-reads, after which the
        // spin-wait parked the thread until the write.
        assert_eq!(rounds.get(), 3);
        assert_eq!(out.elided_spins, 1);
        // Four loads and three pauses of the spinner, one store of the writer.
        assert_eq!(out.ops, 8);
        // It was resumed at the moment the store took effect: after the writer issued it, and
        // before its transfer was over.
        let (before, after) = wrote.get();
        assert!(
            before < resumed.get() && resumed.get() < after,
            "{resumed:?} {wrote:?}"
        );
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_plain_pause_is_never_elided() {
        let profile = opteron(3000.0);
        let (flag, rounds) = (Cell::new(0), Cell::new(0));
        let (resumed, wrote) = (Cell::new(Picos::ZERO), Cell::new(Default::default()));
        let team = vec![
            on(0, spinner(&flag, &rounds, &resumed, ops::pause)),
            on(1, writer(&flag, 35_000, &wrote)),
        ];
        let out = run(&profile, team, Duration::from_millis(1)).unwrap();
        assert_eq!(out.elided_spins, 0);
        // Every round ran: a load and a pause each, then the load that saw the flag, and the
        // store.
        let rounds = u64::from(rounds.get());
        assert!(rounds > 1000, "{rounds}");
        assert_eq!(out.ops, 2 * rounds + 2);
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_parked_spinner_still_gives_its_cpu_up_at_the_end_of_its_slice() {
        // The writer waits for the spinner's CPU: without the slice's end, the spinner would be
        // parked for ever and the run a deadlock.
        let profile = opteron(20.0);
        let os = KernelCosts::new(&profile.os);
        let (flag, rounds) = (Cell::new(0), Cell::new(0));
        let (resumed, wrote) = (Cell::new(Picos::ZERO), Cell::new(Default::default()));
        let team = vec![
            on(0, spinner(&flag, &rounds, &resumed, ops::spin_wait)),
            on(0, writer(&flag, 0, &wrote)),
        ];
        let out = run(&profile, team, Duration::from_millis(1)).unwrap();
        assert_eq!((rounds.get(), out.elided_spins), (3, 1));
        // Parked until its slice was over, then preempted at its next read, and the writer got
        // the CPU after a context switch.
        assert_eq!(resumed.get(), os.quantum);
        assert_eq!(wrote.get().0, os.quantum + os.context_switch);
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_thread_is_preempted_at_the_end_of_its_slice_when_another_waits_for_its_cpu() {
        let profile = opteron(20.0);
        let (os, hit) = (KernelCosts::new(&profile.os), Costs::new(&profile).hit);
        // Each round: some work, then a load of the thread's own line (a hit after the first).
        let round = work_then_local(&profile, 100);
        let rounds = 2000; // about 60 µs of virtual time per thread, three slices
        let starts = RefCell::new(Vec::new());
        let thread = |name: char, line: usize| {
            let starts = &starts;
            move || {
                for _ in 0..rounds {
                    starts.borrow_mut().push((name, clock()));
                    ops::work(100);
                    ops::access(line, Access::Load);
                }
            }
        };
        let team = vec![
            on(0, thread('a', 0x1000)),
            on(0, thread('b', 0x2000)),
            on(1, thread('c', 0x3000)),
        ];
        run(&profile, team, Duration::from_millis(1)).unwrap();
        let starts = starts.into_inner();
        let on_cpu_0: Vec<_> = starts.iter().filter(|(t, _)| *t != 'c').collect();
        // Up to the last round of the first thread to get to its last round, neither has
        // finished, so every handover is a preemption.
        let last = |name| on_cpu_0.iter().rposition(|(t, _)| *t == name).unwrap();
        let both_running = last('a').min(last('b'));
        // Thread a has CPU 0 from 0, and b waits for it. A thread is preempted at the first
        // read at or after its slice's end, and the other runs a context switch later (after it
        // finishes the read it was preempted at, if it was).
        let (mut slice_from, mut switches, mut seen_b) = (Picos::ZERO, 0, false);
        for k in 1..=both_running {
            let (&(prev, r), &(next, s)) = (on_cpu_0[k - 1], on_cpu_0[k]);
            let read_at = r + round;
            if prev == next {
                assert!(read_at < slice_from + os.quantum, "{k}: preempted too late");
                continue;
            }
            assert!(
                read_at >= slice_from + os.quantum,
                "{k}: preempted too early"
            );
            switches += 1;
            let got_cpu = read_at + os.context_switch;
            let resumed = if next == 'b' && !seen_b {
                got_cpu
            } else {
                got_cpu + hit
            };
            seen_b |= next == 'b';
            assert_eq!(s, resumed, "{k}: {prev} to {next}");
            slice_from = got_cpu;
        }
        assert!(switches >= 3, "{switches}");
        // Thread c has CPU 1 to itself: past its slice's end, it runs on, round after round.
        let on_cpu_1: Vec<Picos> = starts
            .iter()
            .filter(|(t, _)| *t == 'c')
            .map(|p| p.1)
            .collect();
        assert!(*on_cpu_1.last().unwrap() > os.quantum * 2);
        for w in on_cpu_1[1..].windows(2) {
            assert_eq!(w[1] - w[0], round + hit);
        }
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_yield_hands_the_cpu_to_a_waiting_thread_and_alone_costs_a_system_call() {
        let profile = opteron(3000.0);
        let os = KernelCosts::new(&profile.os);
        let (a_back, b_ran, c_back) = (
            Cell::new(Picos::ZERO),
            Cell::new((Picos::ZERO, Picos::ZERO)),
            Cell::new(Picos::ZERO),
        );
        let team = vec![
            on(0, || {
                ops::yield_now();
                a_back.set(clock());
            }),
            on(0, || {
                let from = clock();
                ops::work(1000);
                b_ran.set((from, clock()));
            }),
            on(1, || {
                ops::yield_now();
                c_back.set(clock());
            }),
        ];
        let out = run(&profile, team, Duration::from_millis(1)).unwrap();
        let (b_from, b_to) = b_ran.get();
        assert_eq!(b_from, os.syscall + os.context_switch);
        assert_eq!(a_back.get(), b_to + os.context_switch);
        assert_eq!(c_back.get(), os.syscall);
        assert_eq!(out.ops, 2);
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_sleep_gives_the_cpu_up_and_ends_after_its_time_the_slack_and_the_system_calls() {
        let profile = opteron(3000.0);
        let os = KernelCosts::new(&profile.os);
        let (woke, other_from) = (Cell::new(Picos::ZERO), Cell::new(Picos::ZERO));
        let team = vec![
            on(0, || {
                ops::sleep(Duration::from_micros(10));
                woke.set(clock());
            }),
            on(0, || other_from.set(clock())),
        ];
        run(&profile, team, Duration::from_millis(1)).unwrap();
        let d = Picos::from_duration(Duration::from_micros(10));
        assert_eq!(woke.get(), os.syscall + os.timer_slack + os.syscall + d);
        assert_eq!(other_from.get(), os.syscall + os.context_switch);
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_futex_wake_wakes_waiters_in_the_order_they_queued_after_the_wake_latency() {
        let profile = opteron(3000.0);
        let os = KernelCosts::new(&profile.os);
        let woken = RefCell::new(Vec::new());
        let wakes = Cell::new([(0, Picos::ZERO); 3]);
        // y goes to sleep a little after x.
        let waiter = |name: char, first: u64| {
            let woken = &woken;
            move || {
                ops::work(first);
                let by_wake = ops::futex_wait(WORD, || true, None);
                woken.borrow_mut().push((name, by_wake, clock()));
            }
        };
        let waker = || {
            let mut w = [(0, Picos::ZERO); 3];
            for (i, n) in [1, 5, 1].into_iter().enumerate() {
                ops::work(3500);
                w[i] = (ops::futex_wake(WORD, n), clock());
            }
            wakes.set(w);
        };
        let team = vec![on(0, waker), on(1, waiter('x', 0)), on(2, waiter('y', 100))];
        run(&profile, team, Duration::from_millis(1)).unwrap();
        let [(n1, t1), (n2, t2), (n3, _)] = wakes.get();
        // One woken by the first wake, the one left by the second (which asked for five), and
        // none by the third.
        assert_eq!((n1, n2, n3), (1, 1, 0));
        assert_eq!(
            woken.into_inner(),
            vec![('x', true, t1 + os.wake), ('y', true, t2 + os.wake)]
        );
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_waker_pays_for_each_thread_it_wakes_and_they_wake_one_after_another() {
        let profile = opteron(3000.0);
        let os = KernelCosts::new(&profile.os);
        let c = Costs::new(&profile);
        let woken = RefCell::new(Vec::new());
        let started = Cell::new(Picos::ZERO);
        let spent = Cell::new(Picos::ZERO);
        // Waiters on CPU 0's die, the next die, and another package, queued in that order.
        let cpus = [1, 6, 24];
        let waiter = |i: usize| {
            let woken = &woken;
            move || {
                ops::work(100 * i as u64);
                ops::futex_wait(WORD, || true, None);
                woken.borrow_mut().push((cpus[i], clock()));
            }
        };
        let waker = || {
            ops::work(3500);
            started.set(clock());
            assert_eq!(ops::futex_wake(WORD, 3), 3);
            spent.set(clock() - started.get());
        };
        let team = vec![
            on(0, waker),
            on(1, waiter(0)),
            on(6, waiter(1)),
            on(24, waiter(2)),
        ];
        run(&profile, team, Duration::from_millis(1)).unwrap();
        let share = |cpu: usize| c.transfer(c.distance(0, cpu)) * 3 + (c.atomic - c.hit) * 2;
        assert!(share(24) > share(6) && share(6) > share(1));
        let mut at = started.get() + os.syscall;
        let mut want = Vec::new();
        for cpu in cpus {
            at += share(cpu);
            want.push((cpu, at + os.wake));
        }
        assert_eq!(spent.get(), at - started.get());
        assert_eq!(woken.into_inner(), want);
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_timed_futex_wait_ends_at_its_deadline_and_a_later_wake_finds_no_one() {
        let profile = opteron(3000.0);
        let os = KernelCosts::new(&profile.os);
        let (unchanged, timed_out, woke) = (
            Cell::new((false, Picos::ZERO)),
            Cell::new((true, Picos::ZERO)),
            Cell::new(usize::MAX),
        );
        let team = vec![
            on(1, || {
                // A word that already changed: only the system call, no sleep.
                unchanged.set((ops::futex_wait(FLAG, || false, None), clock()));
                let deadline = ops::now() + Duration::from_micros(10);
                timed_out.set((ops::futex_wait(WORD, || true, Some(deadline)), clock()));
            }),
            on(0, || {
                ops::work(70_000); // about 20 µs
                woke.set(ops::futex_wake(WORD, 1));
            }),
        ];
        run(&profile, team, Duration::from_millis(1)).unwrap();
        assert_eq!(unchanged.get(), (true, os.syscall));
        let deadline = os.syscall + Picos::from_duration(Duration::from_micros(10));
        assert_eq!(timed_out.get(), (false, deadline));
        assert_eq!(woke.get(), 0);
    }
}
