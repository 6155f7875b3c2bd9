//! The ordering core: which virtual thread runs next, and when each of its shared-memory
//! operations takes effect.
//!
//! **Conservative order.** The engine keeps an event queue ordered by (virtual time, sequence
//! number). Each virtual thread runs until, at the start of a shim operation
//! ([`sync_point`]), its clock has passed the earliest event of any other thread (the
//! *horizon*); it then queues itself at its clock and the scheduler ([`schedule`]) resumes
//! whichever thread is earliest. So every shared-memory operation takes effect in virtual-time
//! order, and two runs with the same machine and the same inputs interleave identically: the
//! simulator is deterministic. Nothing runs in parallel on the host: one virtual thread at a
//! time, on the host thread that called [`run`](fn@super::run).
//!
//! **Accesses.** Before an access, the code the thread ran since its last shim operation is
//! charged the profile's `local`; the access is then ordered, and charged what the cost model
//! ([`crate::cache`]) says it costs from where the line is. A hit takes effect when it is issued;
//! a miss is booked then but takes effect when the line's holder answers, and the thread waits
//! for that moment in virtual time (a second sync point) before the host does the access (see
//! the cost model's "Timing"). Private work (a hit, a pause, a fence, `busy_work`) is slower
//! while the CPU's SMT sibling runs a thread.
//!
//! **Limits.** A thread that reaches a sync point with its clock past the run's limit of virtual
//! time, or an event later than the limit, ends the run with [`SimError::TimeLimit`]; an event
//! queue that runs dry while threads are unfinished is a deadlock ([`SimError::Deadlock`]); a
//! panic in a virtual thread ends the run with [`SimError::Panicked`].
//!
//! Not modelled: out-of-order execution beyond the loads a model declares independent
//! (`super::touch`) and the store buffer (`super::store_buffer`), and the host's own time, which
//! never shows in a clock.

use super::os::State;
use super::{with, Engine, SimError, ENGINE};
use crate::cache::{Access, Charged, Served};
use crate::picos::Picos;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cmp::Reverse;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What an event in the queue is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    /// The thread runs (it is on its CPU, and its clock is the event's time).
    Run,
    /// A timer of the thread's, valid while the thread's token is this one: a timed wait's or a
    /// sleep's end, or the end of a parked spinner's time slice.
    Timer(u64),
    /// The oldest store in the thread's store buffer becomes visible.
    Drain,
}

/// An entry of the event queue. Events are ordered by time, then by sequence number (the order
/// they were queued in, unique in a run), so two at the same time come out in a fixed order.
/// The queue holds an event per store in every store buffer, so one is kept to 32 bytes: the
/// kind and a timer's token apart ([`Event::kind`] puts them together).
#[derive(Debug, Clone, Copy)]
pub(super) struct Event {
    /// When.
    at: Picos,
    /// Queued as the `seq`-th event of the run.
    seq: u64,
    /// A timer's token (0 for the other kinds).
    token: u64,
    /// The thread.
    tid: u32,
    /// What for.
    what: What,
}

/// [`Kind`] without a timer's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Run,
    Timer,
    Drain,
}

impl Event {
    fn new(at: Picos, seq: u64, tid: usize, kind: Kind) -> Event {
        let (what, token) = match kind {
            Kind::Run => (What::Run, 0),
            Kind::Timer(token) => (What::Timer, token),
            Kind::Drain => (What::Drain, 0),
        };
        Event {
            at,
            seq,
            token,
            tid: u32::try_from(tid).expect("fewer than 2^32 virtual threads"),
            what,
        }
    }

    /// The thread.
    fn tid(&self) -> usize {
        self.tid as usize
    }

    /// What for.
    fn kind(&self) -> Kind {
        match self.what {
            What::Run => Kind::Run,
            What::Timer => Kind::Timer(self.token),
            What::Drain => Kind::Drain,
        }
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A miss that is booked but has not taken effect: the thread's clock is at the moment the
/// line's holder answers, and the access takes effect once every other thread has run up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(super) struct PendingMiss {
    /// The line.
    line: u64,
    /// What is left of the transfer after the answer, charged once the access has taken effect.
    rest: Picos,
}

/// A virtual thread, as the scheduler resumes it.
pub(super) type Co = Coroutine<(), (), (), DefaultStack>;

/// Waits, at the start of a shim operation, until this thread's clock is the earliest.
#[inline]
pub(crate) fn sync_point() {
    while let Some(y) = with(Engine::before_op) {
        super::suspend(y);
    }
}

impl Engine {
    pub(super) fn push(&mut self, at: Picos, tid: usize, kind: Kind) {
        self.seq += 1;
        let seq = match self.perturb.as_mut() {
            Some(p) => p.tie(self.seq),
            None => self.seq,
        };
        self.events.push(Reverse(Event::new(at, seq, tid, kind)));
        self.horizon = self.horizon.min(at);
    }

    pub(super) fn me(&mut self) -> &mut super::Thread {
        &mut self.threads[self.current]
    }

    /// Whether the current thread shares its core's pipeline right now: another hardware
    /// thread of its core runs (or spins on) a thread.
    pub(super) fn smt_busy(&self) -> bool {
        let cpu = self.threads[self.current].cpu;
        self.costs.siblings(cpu).iter().any(|&s| {
            self.cpus[s]
                .running
                .is_some_and(|r| matches!(self.threads[r].state, State::OnCpu | State::Spinning))
        })
    }

    /// Charges `work` of private work to the current thread (slower while its SMT sibling
    /// runs).
    pub(super) fn charge_private(&mut self, work: Picos) {
        let took = self.costs.private(work, self.smt_busy());
        self.advance(took);
    }

    /// Decides whether the current thread may go on; if not, arranges its resumption and
    /// returns its yielder.
    fn before_op(&mut self) -> Option<*const Yielder<(), ()>> {
        let tid = self.current;
        let (clock, y) = {
            let t = &self.threads[tid];
            (t.clock, t.yielder)
        };
        if self.failed.is_some() {
            return Some(y);
        }
        if clock > self.limit {
            self.failed = Some(SimError::TimeLimit {
                limit_ms: self.limit.whole_millis(),
            });
            return Some(y);
        }
        if self.preempt_at_slice_end(tid) {
            return Some(y);
        }
        if let Some(y) = self.perturbed(tid) {
            return Some(y);
        }
        if clock > self.horizon {
            self.push(clock, tid, Kind::Run);
            return Some(y);
        }
        None
    }

    /// Charges the code run since the thread's last operation (the profile's `local`), before
    /// the access it leads to is ordered against the other threads.
    pub(super) fn before_access(&mut self) {
        let local = self.costs.private(self.costs.local, self.smt_busy());
        self.advance(local);
    }

    /// Counts a miss `c` charged, issued at `from`, in the hot-lines tally where one is kept: a
    /// transfer's wait, not a refill from the core's own caches.
    pub(super) fn tally_miss(&mut self, c: &Charged, from: Picos) {
        if let Some(hot) = self.hot.as_mut().filter(|_| !c.refill) {
            hot.record(c.line, c.done - from);
        }
    }

    /// An access, charged by the cost model. A hit takes effect now. A miss takes the line in
    /// the model's books now, but takes effect when the holder answers (see the cost model's
    /// "Timing"): the thread's clock is moved there and the miss is returned, for
    /// [`Engine::take_effect`] once the other threads have run up to that time.
    ///
    /// A load inside an independent scope issues at the thread's front end and only takes
    /// effect at its answer; the rest of its transfer overlaps what follows (`super::touch`).
    pub(super) fn access(&mut self, addr: usize, kind: Access) -> Option<PendingMiss> {
        let addr = self.translation.of(addr);
        let overlapped = self.overlaps(kind);
        if !overlapped {
            self.drain();
        }
        let shared = self.smt_busy();
        let (place, clock) = {
            let t = &self.threads[self.current];
            (t.place, t.clock)
        };
        let now = if overlapped { self.issue() } else { clock };
        let c = self.caches.access(&self.costs, place, addr, kind, now);
        self.ops += 1;
        let Served::Hit { version } = c.served else {
            self.tally_miss(&c, now);
            if overlapped {
                self.in_flight(c.answer, c.done);
                return Some(PendingMiss {
                    line: c.line,
                    rest: Picos::ZERO,
                });
            }
            self.me().clock = c.answer;
            return Some(PendingMiss {
                line: c.line,
                rest: c.done - c.answer,
            });
        };
        let took = self.costs.private(c.done - now, shared);
        self.advance(took);
        self.applied(c.line, version, kind);
        None
    }

    /// A miss of kind `kind` taking effect at the thread's clock; the clock then moves on to
    /// the transfer's end.
    pub(super) fn take_effect(&mut self, miss: PendingMiss, kind: Access) {
        let version = self.caches.effect(miss.line, kind);
        self.applied(miss.line, version, kind);
        self.me().clock += miss.rest;
    }
}

/// Runs the virtual threads in virtual-time order until none is left to run: pops the earliest
/// event and resumes its thread, which runs until it suspends at its next sync point. A thread
/// started by the one resumed gets its coroutine once that one has suspended
/// ([`adopt_born`](super::spawn::adopt_born)), before any event of the new thread comes due.
pub(super) fn schedule(
    engine: *mut Engine,
    coroutines: &mut Vec<Option<Co>>,
) -> Result<(), SimError> {
    // SAFETY (every dereference below): no virtual thread runs while the scheduler holds these
    // short-lived references; each ends before the next resume.
    let e = || unsafe { &mut *engine };
    while let Some(Reverse(event)) = e().events.pop() {
        let (at, tid, kind) = (event.at, event.tid(), event.kind());
        if let Kind::Timer(token) = kind {
            e().timer_fires(tid, token, at);
            continue;
        }
        if kind == Kind::Drain {
            e().store_visible(tid, at);
            continue;
        }
        if at > e().limit {
            return Err(SimError::TimeLimit {
                limit_ms: e().limit.whole_millis(),
            });
        }
        {
            let en = e();
            en.current = tid;
            en.horizon = en.events.peek().map_or(Picos::MAX, |Reverse(ev)| ev.at);
            let t = &mut en.threads[tid];
            t.clock = t.clock.max(at);
            t.overlap.resumed(t.clock);
        }
        let Some(co) = coroutines[tid].as_mut() else {
            continue;
        };
        ENGINE.with(|c| c.set(engine));
        let r = catch_unwind(AssertUnwindSafe(|| co.resume(())));
        ENGINE.with(|c| c.set(std::ptr::null_mut()));
        if !e().born.is_empty() {
            super::spawn::adopt_born(e(), coroutines)?;
        }
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
        let at = en
            .threads
            .iter()
            .map(|t| t.clock)
            .max()
            .unwrap_or(Picos::ZERO);
        return Err(SimError::Deadlock {
            at_us: at.as_micros_f64(),
            blocked,
            spinning,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{clock, on, opteron, work_then_local};
    use super::super::{ops, run};
    use super::*;
    use crate::cache::Costs;
    use std::cell::Cell;
    use std::time::Duration;

    #[test]
    fn events_come_out_by_time_then_queue_order_and_keep_their_kind() {
        assert_eq!(std::mem::size_of::<Event>(), 32);
        let mut q = std::collections::BinaryHeap::new();
        let queued = [
            (Picos(7), 1, Kind::Timer(u64::MAX)),
            (Picos(5), 2, Kind::Drain),
            (Picos(7), 3, Kind::Run),
            (Picos(5), 4, Kind::Timer(3)),
        ];
        for (seq, &(at, tid, kind)) in queued.iter().enumerate() {
            q.push(Reverse(Event::new(at, seq as u64, tid, kind)));
        }
        let out: Vec<_> = std::iter::from_fn(|| q.pop())
            .map(|Reverse(e)| (e.at, e.tid(), e.kind()))
            .collect();
        assert_eq!(out, [queued[1], queued[3], queued[0], queued[2]]);
    }

    /// An address for the cost model alone (the tests keep their values in `Cell`s).
    const FLAG: usize = 0x1000;
    const WORD: usize = 0x2000;

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn threads_all_blocked_with_none_left_to_wake_them_are_a_deadlock() {
        let profile = opteron(3000.0);
        let woke = Cell::new(false);
        let waiter = |addr| {
            let woke = &woke;
            move || {
                ops::futex_wait(addr, || true, None);
                woke.set(true);
            }
        };
        let err = run(
            &profile,
            vec![on(0, waiter(FLAG)), on(1, waiter(WORD))],
            Duration::from_millis(1),
        )
        .unwrap_err();
        // Both went to sleep once their system call was over, and that is the last virtual
        // time anything happened.
        let syscall = Picos::from_ns_f64(profile.os.syscall_ns);
        assert_eq!(
            err,
            SimError::Deadlock {
                at_us: syscall.as_micros_f64(),
                blocked: 2,
                spinning: 0,
            }
        );
        assert!(!woke.get(), "a waiter returned from a wait nobody woke");
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_spinner_on_a_line_nobody_writes_beside_a_blocked_thread_is_a_deadlock() {
        let profile = opteron(3000.0);
        let pause = Costs::new(&profile).pause;
        let last_pause = Cell::new(Picos::ZERO);
        let spinner = on(0, || loop {
            ops::access(FLAG, Access::Load);
            last_pause.set(clock());
            ops::spin_wait();
        });
        let waiter = on(1, || {
            ops::futex_wait(WORD, || true, None);
        });
        let err = run(&profile, vec![spinner, waiter], Duration::from_millis(1)).unwrap_err();
        // The spinner was parked at its last pause's end; the waiter slept after its system
        // call. The deadlock is at the later of the two.
        let parked = last_pause.get() + pause;
        let slept = Picos::from_ns_f64(profile.os.syscall_ns);
        assert_eq!(
            err,
            SimError::Deadlock {
                at_us: parked.max(slept).as_micros_f64(),
                blocked: 1,
                spinning: 1,
            }
        );
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_thread_whose_clock_passes_the_limit_ends_the_run_at_its_next_sync_point() {
        let profile = opteron(3000.0);
        let limit = Duration::from_millis(1);
        let hit = Costs::new(&profile).hit;
        let round = work_then_local(&profile, 1000);
        let (rounds, last) = (Cell::new(0u64), Cell::new(Picos::ZERO));
        let busy = on(0, || loop {
            ops::work(1000);
            ops::access(WORD, Access::Load);
            rounds.set(rounds.get() + 1);
            last.set(clock());
        });
        let err = run(&profile, vec![busy], limit).unwrap_err();
        assert_eq!(err, SimError::TimeLimit { limit_ms: 1 });
        // It ran until the access whose sync point found its clock past the limit, and not
        // one access further.
        let limit = Picos::from_duration(limit);
        assert!(last.get() + round > limit, "{:?}", last.get());
        assert!(last.get() <= limit + hit, "{:?}", last.get());
        // And it ran every round that fits before the limit (each a round of work and a load).
        assert!(
            rounds.get() >= limit.0 / (round + hit).0,
            "{}",
            rounds.get()
        );
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_wake_up_later_than_the_limit_ends_the_run_when_it_comes_due() {
        let profile = opteron(3000.0);
        let woke = Cell::new(false);
        let sleeper = on(0, || {
            ops::sleep(Duration::from_millis(5));
            woke.set(true);
        });
        let err = run(&profile, vec![sleeper], Duration::from_millis(1)).unwrap_err();
        assert_eq!(err, SimError::TimeLimit { limit_ms: 1 });
        assert!(!woke.get(), "the sleeper ran past the limit");
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_panic_in_a_virtual_thread_ends_the_run_with_its_message() {
        let profile = opteron(3000.0);
        // A formatted message (a String), a literal one (a &str), and a payload of neither.
        let panics: [(fn(), &str); 3] = [
            (
                || panic!("lock word {:#x} corrupted", 7),
                "lock word 0x7 corrupted",
            ),
            (|| panic!("boom"), "boom"),
            (|| std::panic::panic_any(42u32), "(no message)"),
        ];
        for (panic, message) in panics {
            let later_ran = Cell::new(false);
            let team = vec![
                on(0, panic),
                on(1, || {
                    ops::work(10);
                    later_ran.set(true);
                }),
            ];
            let err = run(&profile, team, Duration::from_millis(1)).unwrap_err();
            assert_eq!(err, SimError::Panicked(message.into()));
            // The first thread panicked at virtual time 0, before the second's turn came.
            assert!(!later_ran.get(), "{message}");
        }
    }
}
