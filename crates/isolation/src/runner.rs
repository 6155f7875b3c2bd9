//! The tester: a model of PostgreSQL's isolationtester.c (14+, as shipped with PostgreSQL 15)
//! running a parsed spec's permutations on session backends of the lock manager.
//!
//! # How a spec runs
//! Each session is a backend on its own thread; a control backend runs the global setup and
//! teardown. For each permutation (the listed ones, or every interleaving of the sessions'
//! steps), the runner prints its header, runs the setups, then launches the steps in order as
//! `run_permutation` does: a step whose session is still busy with an earlier step first waits
//! for it (`try_complete_step` with `STEP_RETRY`, then `try_complete_steps` over the waiting
//! steps); each step launched gets one look (`STEP_NONBLOCK`), then every earlier waiting step
//! is looked at again in the order they started waiting (`STEP_NONBLOCK | STEP_RETRY`);
//! at the end every waiting step is waited for (`STEP_RETRY`). Markers (`(*)`, `(other)`,
//! `(other notices N)`) hold back completion reports as `step_has_blocker` does. The output is
//! the tester's, byte for byte: `step NAME: SQL`, `… <waiting ...>`,
//! `step NAME: <... completed>`, `ERROR:  message` after the step that failed, and
//! `SESSION: WARNING:  …` for notices.
//!
//! # Time
//! The tester does not learn at once that a step is blocked or done, and which completions it
//! reports together depends on when the sessions' timers fire. The runner keeps the tester's
//! clock as virtual time, so that a run is the same every time:
//! - `try_complete_step` waits on the session's socket with `select()` for at most 10 ms
//!   ([`SELECT_TIMEOUT`]); a result (or notice) that arrives ends the wait at once. With
//!   `STEP_NONBLOCK`, each time the 10 ms pass without one, it asks whether the session is
//!   blocked on a lock (`pg_isolation_test_session_is_blocked`: here, whether its backend waits
//!   in the lock manager) and returns if it is. So a step still blocked costs 10 ms per look,
//!   and `try_complete_steps` looks at the waiting steps one after the other.
//! - Without `STEP_NONBLOCK` it waits until the result arrives (up to `PGISOLATIONTIMEOUT`).
//! - A backend's `deadlock_timeout` and `lock_timeout` start when it begins to wait
//!   (`ProcSleep`), at the virtual time the runner has reached; when virtual time reaches one,
//!   the runner fires that timer in the backend ([`LockManager::fire_timeout`]) and waits until
//!   every session has reacted (the deadlock check, an error, the waiters it freed finishing
//!   their steps) before time moves on.
//!
//! Everything else takes no time: sending a step, running it, the blocked-check query. When a
//! timer falls due at the very instant a 10 ms `select()` ends, the timer fires first (in
//! PostgreSQL the two race: a spec should not depend on it); timers of different sessions due
//! at the same instant fire in session order, both timers of one backend together (the
//! deadlock check first, as `ProcSleep` handles them). Between these points nothing moves: each
//! session is idle with its result sent, or asleep in the lock manager with no timer of its
//! own due, so the lock manager's state, and with it the output, does not depend on how the
//! threads are scheduled.
//!
//! # Differences from PostgreSQL
//! - A step still running after `PGISOLATIONTIMEOUT` (default 300 s, of virtual time) fails the
//!   run; the tester would cancel it first and carry on.
//! - A step's notices reach the tester with its result, not as they are raised.
//!
//! What a session's backend does with a step's statements is the `executor` module's.

use crate::executor::{Catalog, Executor, StepResult, WaitInfo};
use crate::spec::{all_permutations, Blocker, PermutationStep, SqlBlock};
use crate::sql::Statement;
use crate::{IsolationError, TestSpec};
use pglocks_lmgr::{LockManager, LockManagerConfig, WaitTimeout};
use pglocks_proc::ProcTable;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long `try_complete_step` waits on a session's socket before it looks again (its
/// `select()` timeout).
pub const SELECT_TIMEOUT: Duration = Duration::from_millis(10);

/// How long, in real time, the sessions may take to come to rest after the runner moved
/// (sent a step or fired a timer) before the run is declared stuck: only a bug gets there.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// The timers of a session's lock wait, in the tester's virtual time.
#[derive(Debug, Clone, Copy)]
struct WaitTimers {
    /// [`WaitInfo::requests`] when the wait was seen: a new count is a new wait.
    request: u64,
    /// When `deadlock_timeout` falls due, until it has fired.
    deadlock_at: Option<Duration>,
    /// When `lock_timeout` falls due (if set), until it has fired.
    lock_at: Option<Duration>,
}

/// A session's connection: its backend thread and what the tester knows of it
/// (isolationtester.c's `IsoConnInfo`; the socket is the result channel and its inbox).
struct Conn {
    name: String,
    procno: usize,
    jobs: mpsc::Sender<Vec<Statement>>,
    results: mpsc::Receiver<StepResult>,
    waits: Arc<WaitInfo>,
    /// A query was sent and its result has not arrived.
    busy: bool,
    /// The result that arrived and the tester has not read yet (in the socket).
    inbox: Option<StepResult>,
    /// The timers of the lock wait the backend is in.
    wait: Option<WaitTimers>,
    /// The permutation step it is running (`active_step`).
    active: Option<usize>,
    /// A finished step's result read but not reported yet (left in libpq, for the tester).
    pending: Option<StepResult>,
    total_notices: usize,
}

/// isolationtester.c's `STEP_NONBLOCK` flag of `try_complete_step`: return at once when the
/// step is blocked.
const NONBLOCK: u8 = 1;
/// isolationtester.c's `STEP_RETRY` flag: the step was reported waiting before.
const RETRY: u8 = 2;

/// What a run printed: the tester's standard output and standard error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// The tester's standard output (what expected files hold).
    pub stdout: String,
    /// Warnings and teardown failures.
    pub stderr: String,
}

/// The runner for one spec: the state of isolationtester.c's `main` and `run_permutation`
/// (the connections, what was printed, the clock).
struct Tester<'a> {
    spec: &'a TestSpec,
    lm: Arc<LockManager>,
    control: Executor,
    conns: Vec<Conn>,
    out: Output,
    max_step_wait: Duration,
    /// The tester's clock (virtual time since the run began).
    now: Duration,
    any_new_notice: bool,
    /// Per permutation step: the notice count its `notices` markers wait for.
    notice_targets: Vec<Vec<usize>>,
}

/// Runs `spec` on a lock manager configured as `config` (its backend count is set to the
/// sessions plus the control connection) and returns what the isolation tester would print.
/// A step that has not finished after `max_step_wait` of the tester's virtual time fails the
/// run (`None`: the tester's `PGISOLATIONTIMEOUT` seconds, default 300).
pub fn run_spec(
    spec: &TestSpec,
    config: LockManagerConfig,
    max_step_wait: Option<Duration>,
) -> Result<Output, IsolationError> {
    let backends = spec.sessions.len() + 1;
    let lm = Arc::new(LockManager::new(LockManagerConfig {
        max_backends: backends,
        ..config
    }));
    let procs = ProcTable::new(backends);
    let catalog = Arc::new(Mutex::new(Catalog::default()));
    let control = Executor::new(Arc::clone(&lm), Arc::clone(&catalog), &procs)?;
    let mut conns = Vec::new();
    for session in &spec.sessions {
        let mut exec = Executor::new(Arc::clone(&lm), Arc::clone(&catalog), &procs)?;
        let waits = Arc::new(WaitInfo::default());
        exec.waits = Some(Arc::clone(&waits));
        let procno = exec.b.procno();
        let (jobs, job_rx) = mpsc::channel::<Vec<Statement>>();
        let (result_tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("session {}", session.name))
            .spawn(move || {
                for job in job_rx {
                    if result_tx.send(exec.run(&job)).is_err() {
                        break;
                    }
                }
                exec.end_transaction(false);
            })
            .map_err(|e| IsolationError::Run(format!("cannot start a session: {e}")))?;
        conns.push(Conn {
            name: session.name.clone(),
            procno,
            jobs,
            results,
            waits,
            busy: false,
            inbox: None,
            wait: None,
            active: None,
            pending: None,
            total_notices: 0,
        });
    }
    let max_step_wait = max_step_wait.unwrap_or_else(|| {
        std::env::var("PGISOLATIONTIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(Duration::from_secs(300), Duration::from_secs)
    });
    let mut t = Tester {
        spec,
        lm,
        control,
        conns,
        out: Output::default(),
        max_step_wait,
        now: Duration::ZERO,
        any_new_notice: false,
        notice_targets: Vec::new(),
    };
    for name in &spec.unused_steps {
        let _ = writeln!(t.out.stderr, "unused step name: {name}");
    }
    let _ = writeln!(
        t.out.stdout,
        "Parsed test spec with {} sessions",
        spec.sessions.len()
    );
    let permutations = if spec.permutations.is_empty() {
        all_permutations(spec)
    } else {
        spec.permutations.clone()
    };
    for p in &permutations {
        t.run_permutation(p)?;
    }
    Ok(t.out)
}

impl Tester<'_> {
    fn step_name(&self, perm: &[PermutationStep], i: usize) -> &str {
        &self.spec.steps[perm[i].step].name
    }

    fn session_of(&self, perm: &[PermutationStep], i: usize) -> usize {
        self.spec.steps[perm[i].step].session
    }

    /// `PQsendQuery` on session `s`'s connection.
    fn send(&mut self, s: usize, statements: &[Statement]) -> Result<(), IsolationError> {
        let conn = &mut self.conns[s];
        conn.jobs
            .send(statements.to_vec())
            .map_err(|_| IsolationError::Run(format!("session {} has gone", conn.name)))?;
        conn.busy = true;
        conn.wait = None;
        Ok(())
    }

    /// Waits, in real time, until nothing moves any more: every session that has a query
    /// running is asleep in the lock manager with no fired timer left to handle. Results that
    /// arrive go to the sessions' inboxes; a wait seen for the first time starts its timers
    /// at the current virtual time.
    fn settle(&mut self) -> Result<(), IsolationError> {
        let started = Instant::now();
        let mut spins = 0u32;
        loop {
            // The order of the looks matters: a result, then the fired timers, then the
            // waits. Whatever a backend did before it sent its result, cleared a timer or
            // went to sleep is seen by the looks that follow.
            for conn in &mut self.conns {
                match conn.results.try_recv() {
                    Ok(r) => {
                        conn.inbox = Some(r);
                        conn.busy = false;
                        conn.wait = None;
                    }
                    Err(mpsc::TryRecvError::Empty) => {}
                    Err(mpsc::TryRecvError::Disconnected) => {
                        return Err(IsolationError::Run(format!(
                            "session {} has gone",
                            conn.name
                        )))
                    }
                }
            }
            let busy = || self.conns.iter().filter(|c| c.busy);
            let at_rest = !busy().any(|c| self.lm.timeout_pending(c.procno))
                && busy().all(|c| self.lm.is_waiting(c.procno));
            if at_rest {
                let now = self.now;
                for conn in self.conns.iter_mut().filter(|c| c.busy) {
                    let request = conn.waits.requests.load(SeqCst);
                    if conn.wait.map_or(true, |w| w.request != request) {
                        let t = *conn
                            .waits
                            .timeouts
                            .lock()
                            .unwrap_or_else(|e| e.into_inner());
                        conn.wait = Some(WaitTimers {
                            request,
                            deadlock_at: Some(now + t.deadlock_timeout),
                            lock_at: t.lock_timeout.map(|l| now + l),
                        });
                    }
                }
                return Ok(());
            }
            if started.elapsed() > SETTLE_LIMIT {
                let stuck: Vec<&str> = busy().map(|c| c.name.as_str()).collect();
                return Err(IsolationError::Run(format!(
                    "sessions {} neither finished nor waited for a lock",
                    stuck.join(", ")
                )));
            }
            spins += 1;
            if spins < 50 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// The next timer to fall due: its time and session.
    fn next_timer(&self) -> Option<(Duration, usize)> {
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.busy)
            .filter_map(|(s, c)| {
                let w = c.wait?;
                let due = match (w.deadlock_at, w.lock_at) {
                    (Some(d), Some(l)) => d.min(l),
                    (d, l) => d.or(l)?,
                };
                Some((due, s))
            })
            .min()
    }

    /// Fires session `s`'s timers due at `at` (what `handle_sig_alarm` does at that instant).
    fn fire(&mut self, s: usize, at: Duration) {
        let procno = self.conns[s].procno;
        let Some(w) = self.conns[s].wait.as_mut() else {
            return;
        };
        if w.deadlock_at == Some(at) {
            w.deadlock_at = None;
            self.lm
                .fire_timeout(&self.control.b, procno, WaitTimeout::Deadlock);
        }
        if w.lock_at == Some(at) {
            w.lock_at = None;
            self.lm
                .fire_timeout(&self.control.b, procno, WaitTimeout::Lock);
        }
    }

    /// `select()` on session `s`'s socket until its result is there or virtual time reaches
    /// `deadline` (`None`: for ever), firing the timers that fall due meanwhile. Whether the
    /// result is there.
    fn wait_for_result(
        &mut self,
        s: usize,
        deadline: Option<Duration>,
    ) -> Result<bool, IsolationError> {
        loop {
            self.settle()?;
            if self.conns[s].inbox.is_some() {
                return Ok(true);
            }
            match self.next_timer() {
                Some((at, t)) if deadline.map_or(true, |d| at <= d) => {
                    self.now = self.now.max(at);
                    self.fire(t, at);
                }
                _ => {
                    if let Some(d) = deadline {
                        self.now = self.now.max(d);
                    }
                    return Ok(false);
                }
            }
        }
    }

    /// Runs a setup or teardown block on session `s`'s connection and waits for it (`PQexec`).
    fn run_on_session(&mut self, s: usize, block: &SqlBlock) -> Result<StepResult, IsolationError> {
        self.send(s, &block.statements)?;
        let deadline = self.now + self.max_step_wait;
        if !self.wait_for_result(s, Some(deadline))? {
            return Err(IsolationError::Run(format!(
                "setup or teardown of session {} never finished",
                self.conns[s].name
            )));
        }
        Ok(self.conns[s].inbox.take().unwrap_or_default())
    }

    fn run_permutation(&mut self, perm: &[PermutationStep]) -> Result<(), IsolationError> {
        let names: Vec<&str> = (0..perm.len()).map(|i| self.step_name(perm, i)).collect();
        let _ = writeln!(
            self.out.stdout,
            "\nstarting permutation: {}",
            names.join(" ")
        );
        for block in &self.spec.setup {
            if let Some(e) = self.control.run(&block.statements).error {
                return Err(IsolationError::Run(format!("setup failed: {e}")));
            }
        }
        for s in 0..self.spec.sessions.len() {
            if let Some(block) = &self.spec.sessions[s].setup {
                let r = self.run_on_session(s, block)?;
                self.print_notices(s, &r);
                if let Some(e) = r.error {
                    return Err(IsolationError::Run(format!(
                        "setup of session {} failed: {e}",
                        self.spec.sessions[s].name
                    )));
                }
            }
        }
        self.notice_targets = vec![Vec::new(); perm.len()];
        let mut waiting: Vec<usize> = Vec::new();
        for i in 0..perm.len() {
            let s = self.session_of(perm, i);
            if self.conns[s].active.is_some() {
                let start = self.now;
                while let Some(old) = self.conns[s].active {
                    let before = (self.now, waiting.len());
                    if !self.try_complete_step(perm, old, RETRY)? {
                        waiting.retain(|&w| w != old);
                    }
                    self.try_complete_steps(perm, &mut waiting, NONBLOCK | RETRY)?;
                    // A marker that never lets go: the tester spins until twice
                    // PGISOLATIONTIMEOUT has passed.
                    let stuck = (self.now, waiting.len()) == before;
                    if self.conns[s].active.is_some()
                        && (stuck || self.now - start > 2 * self.max_step_wait)
                    {
                        return Err(IsolationError::Run(format!(
                            "step {} timed out after {} seconds",
                            self.step_name(perm, old),
                            (2 * self.max_step_wait).as_secs()
                        )));
                    }
                }
            }
            let step = &self.spec.steps[perm[i].step];
            self.send(s, &step.sql.statements)?;
            self.conns[s].active = Some(i);
            self.notice_targets[i] = perm[i]
                .blockers
                .iter()
                .map(|b| match b {
                    Blocker::Notices(other, n) => {
                        n + self.conns[self.spec.steps[*other].session].total_notices
                    }
                    _ => 0,
                })
                .collect();
            let must_wait = self.try_complete_step(perm, i, NONBLOCK)?;
            self.try_complete_steps(perm, &mut waiting, NONBLOCK | RETRY)?;
            if must_wait {
                waiting.push(i);
            }
        }
        self.try_complete_steps(perm, &mut waiting, RETRY)?;
        if !waiting.is_empty() {
            return Err(IsolationError::Run(
                "failed to complete permutation due to mutually-blocking steps".into(),
            ));
        }
        for s in 0..self.spec.sessions.len() {
            if let Some(block) = &self.spec.sessions[s].teardown {
                let r = self.run_on_session(s, block)?;
                self.print_notices(s, &r);
                if let Some(e) = r.error {
                    let _ = writeln!(
                        self.out.stderr,
                        "teardown of session {} failed: {e}",
                        self.spec.sessions[s].name
                    );
                }
            }
        }
        if let Some(block) = &self.spec.teardown {
            if let Some(e) = self.control.run(&block.statements).error {
                let _ = writeln!(self.out.stderr, "teardown failed: {e}");
            }
        }
        Ok(())
    }

    /// `try_complete_steps`: looks at the waiting steps in order, dropping those that
    /// complete; again while a step with a marker is left and something changed.
    fn try_complete_steps(
        &mut self,
        perm: &[PermutationStep],
        waiting: &mut Vec<usize>,
        flags: u8,
    ) -> Result<(), IsolationError> {
        loop {
            self.any_new_notice = false;
            let before = waiting.len();
            let mut have_blocker = false;
            let mut w = 0;
            while w < waiting.len() {
                if self.try_complete_step(perm, waiting[w], flags)? {
                    have_blocker |= !perm[waiting[w]].blockers.is_empty();
                    w += 1;
                } else {
                    waiting.remove(w);
                }
            }
            if !(have_blocker && (waiting.len() < before || self.any_new_notice)) {
                return Ok(());
            }
        }
    }

    /// `isotesterNoticeProcessor`: a session's notices, prefixed with its name, counted.
    fn print_notices(&mut self, s: usize, r: &StepResult) {
        for n in &r.notices {
            let _ = writeln!(self.out.stdout, "{}: {n}", self.conns[s].name);
        }
        self.conns[s].total_notices += r.notices.len();
    }

    /// Reads a result that arrived on session `s`'s socket (`PQconsumeInput`): its notices
    /// are printed now; the result waits to be reported.
    fn consume(&mut self, s: usize) {
        if let Some(r) = self.conns[s].inbox.take() {
            self.print_notices(s, &r);
            self.any_new_notice |= !r.notices.is_empty();
            self.conns[s].pending = Some(r);
        }
    }

    /// `try_complete_step`: true if step `i` has not completed (it waits for a lock and
    /// `NONBLOCK` was given, or a marker holds its report back).
    fn try_complete_step(
        &mut self,
        perm: &[PermutationStep],
        i: usize,
        flags: u8,
    ) -> Result<bool, IsolationError> {
        let s = self.session_of(perm, i);
        let step = &self.spec.steps[perm[i].step];
        let waiting_line = format!("step {}: {} <waiting ...>", step.name, step.sql.text);
        if flags & RETRY == 0 && perm[i].blockers.contains(&Blocker::Once) {
            let _ = writeln!(self.out.stdout, "{waiting_line}");
            return Ok(true);
        }
        if self.conns[s].pending.is_none() {
            if flags & NONBLOCK != 0 {
                // select() for 10 ms at a time; after each, ask whether the session is blocked.
                // Once settled, a session whose result has not come waits for a lock.
                let deadline = self.now + SELECT_TIMEOUT;
                if !self.wait_for_result(s, Some(deadline))? {
                    if flags & RETRY == 0 {
                        let _ = writeln!(self.out.stdout, "{waiting_line}");
                    }
                    return Ok(true);
                }
            } else if !self.wait_for_result(s, Some(self.now + self.max_step_wait))? {
                return Err(IsolationError::Run(format!(
                    "step {} timed out after {} seconds",
                    step.name,
                    self.max_step_wait.as_secs()
                )));
            }
            self.consume(s);
        }
        if self.has_blocker(perm, i) {
            if flags & RETRY == 0 {
                let _ = writeln!(self.out.stdout, "{waiting_line}");
            }
            return Ok(true);
        }
        if flags & RETRY != 0 {
            let _ = writeln!(self.out.stdout, "step {}: <... completed>", step.name);
        } else {
            let _ = writeln!(self.out.stdout, "step {}: {}", step.name, step.sql.text);
        }
        let r = self.conns[s].pending.take().unwrap_or_default();
        if let Some(e) = r.error {
            let _ = writeln!(self.out.stdout, "{e}");
        }
        self.conns[s].active = None;
        Ok(false)
    }

    /// `step_has_blocker`.
    fn has_blocker(&self, perm: &[PermutationStep], i: usize) -> bool {
        perm[i].blockers.iter().enumerate().any(|(k, b)| match b {
            Blocker::Once => false,
            Blocker::Step(other) => {
                let c = &self.conns[self.spec.steps[*other].session];
                c.active.is_some_and(|a| perm[a].step == *other)
            }
            Blocker::Notices(other, _) => {
                let c = &self.conns[self.spec.steps[*other].session];
                c.total_notices < self.notice_targets[i][k]
            }
        })
    }
}
