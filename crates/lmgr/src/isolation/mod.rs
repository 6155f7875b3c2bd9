//! A model of PostgreSQL's isolation tester (src/test/isolation/isolationtester.c, 14+ as
//! shipped with PostgreSQL 15) running lock-only specs against this lock manager.
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
//! Each backend follows PostgreSQL's transaction states: a statement outside a transaction
//! block commits by itself; a multi-statement step runs as one implicit block; an error in a
//! block releases the locks at once and leaves the block aborted until `COMMIT`/`ROLLBACK`.
//!
//! # Differences from PostgreSQL
//! - A step still running after `PGISOLATIONTIMEOUT` (default 300 s, of virtual time) fails the
//!   run; the tester would cancel it first and carry on.
//! - A step's notices reach the tester with its result, not as they are raised.

pub mod spec;
pub mod sql;

pub use spec::{parse_spec, TestSpec};

use crate::{
    LmgrError, LocalLocks, LockAcquireResult, LockManager, LockManagerConfig, LockMode, LockOwner,
    LockTag, LockTimeouts, WaitTimeout,
};
use pglocks_sync::{Backend, ProcTable};
use spec::{all_permutations, Blocker, PermutationStep, SqlBlock};
use sql::{Setting, Statement};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Errors of the isolation runner (the tester's messages where it has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IsolationError {
    /// The spec file does not parse.
    #[error("{0}")]
    Syntax(String),
    /// A statement the model does not run.
    #[error("line {line}: {message}")]
    Sql {
        /// The line of its SQL block.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The spec is inconsistent (`check_testspec`).
    #[error("{0}")]
    Spec(String),
    /// A setup block failed, or steps never finished.
    #[error("{0}")]
    Run(String),
}

/// The database the sessions are connected to.
const DATABASE: u32 = 5;
/// The oid of the first table created (`FirstNormalObjectId`).
const FIRST_OID: u32 = 16384;

/// The tables that exist (pg_class, reduced to names and oids).
#[derive(Debug, Default)]
struct Catalog {
    tables: HashMap<String, u32>,
    next_oid: u32,
}

/// A session's transaction state (xact.c's `TBlockState`, reduced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxState {
    /// No transaction block.
    Idle,
    /// The implicit block of a multi-statement query.
    Implicit,
    /// `BEGIN` … .
    InBlock,
    /// A block after an error, until `COMMIT` or `ROLLBACK`.
    Aborted,
}

/// What a statement list produced: notices, then maybe an error (as the tester prints them,
/// severity included).
#[derive(Debug, Default, Clone)]
struct StepResult {
    notices: Vec<String>,
    error: Option<String>,
}

/// One connection's backend and state.
struct Executor {
    lm: Arc<LockManager>,
    catalog: Arc<Mutex<Catalog>>,
    b: Backend,
    local: LocalLocks,
    state: TxState,
    timeouts: LockTimeouts,
    /// The settings when the transaction began: a rollback restores them (guc.c's
    /// transactional `SET`).
    saved: Option<LockTimeouts>,
    /// For a session: what the tester's clock needs to know of its lock waits (the control
    /// connection has none and keeps real timers).
    waits: Option<Arc<WaitInfo>>,
}

/// What a session's backend tells the runner about the lock requests that may wait: their
/// timer settings, and a count that tells one wait from the next.
#[derive(Debug, Default)]
struct WaitInfo {
    /// Lock requests made that may wait; a backend asleep in the lock manager is in the last.
    requests: AtomicU64,
    /// `deadlock_timeout` and `lock_timeout` of the last request.
    timeouts: Mutex<LockTimeouts>,
}

type Outcome = Result<Option<String>, String>;

impl Executor {
    fn new(
        lm: Arc<LockManager>,
        catalog: Arc<Mutex<Catalog>>,
        procs: &ProcTable,
    ) -> Result<Self, IsolationError> {
        let mut b = procs
            .attach()
            .map_err(|e| IsolationError::Run(e.to_string()))?;
        let local = lm
            .connect(&mut b, DATABASE)
            .map_err(|e| IsolationError::Run(e.to_string()))?;
        Ok(Self {
            lm,
            catalog,
            b,
            local,
            state: TxState::Idle,
            timeouts: LockTimeouts::default(),
            saved: None,
            waits: None,
        })
    }

    /// Runs one query string (`exec_simple_query`).
    fn run(&mut self, statements: &[Statement]) -> StepResult {
        let mut result = StepResult::default();
        let multi = statements.len() > 1;
        for s in statements {
            if multi && self.state == TxState::Idle {
                self.state = TxState::Implicit;
                self.saved = Some(self.timeouts);
            }
            match self.exec(s) {
                Ok(notice) => result.notices.extend(notice),
                Err(message) => {
                    self.abort();
                    result.error = Some(format!("ERROR:  {message}"));
                    break;
                }
            }
        }
        if self.state == TxState::Implicit {
            self.end_transaction(true);
        }
        result
    }

    /// Commits (or rolls back, restoring the settings) and releases the transaction's locks.
    fn end_transaction(&mut self, commit: bool) {
        // A failure here would be a bug in the model, not in the spec.
        let released = self.lm.release_all(&mut self.b, &mut self.local, false);
        debug_assert!(released.is_ok(), "{released:?}");
        if let Some(saved) = self.saved.take() {
            if !commit {
                self.timeouts = saved;
            }
        }
        self.state = TxState::Idle;
    }

    /// `AbortCurrentTransaction`: locks go at once; a block stays, aborted.
    fn abort(&mut self) {
        let block = matches!(self.state, TxState::InBlock | TxState::Aborted);
        self.end_transaction(false);
        if block {
            self.state = TxState::Aborted;
        }
    }

    fn table(&self, name: &str) -> Option<u32> {
        let catalog = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
        catalog.tables.get(name).copied()
    }

    fn lock(&mut self, name: &str, oid: u32, mode: LockMode, nowait: bool) -> Result<(), String> {
        let tag = LockTag::relation(DATABASE, oid);
        let owner = LockOwner::Transaction;
        let r = if nowait {
            self.lm
                .conditional_acquire(&mut self.b, &mut self.local, tag, mode, owner)
        } else if let Some(w) = &self.waits {
            // The timers are the runner's to fire, in virtual time.
            *w.timeouts.lock().unwrap_or_else(|e| e.into_inner()) = self.timeouts;
            w.requests.fetch_add(1, SeqCst);
            self.lm.acquire(
                &mut self.b,
                &mut self.local,
                tag,
                mode,
                owner,
                &LockTimeouts::EXTERNAL,
            )
        } else {
            let t = self.timeouts;
            self.lm
                .acquire(&mut self.b, &mut self.local, tag, mode, owner, &t)
        };
        match r {
            Ok(LockAcquireResult::NotAvailable) => {
                Err(format!("could not obtain lock on relation \"{name}\""))
            }
            Ok(_) => Ok(()),
            Err(e @ (LmgrError::Deadlock { .. } | LmgrError::LockTimeout)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    fn exec(&mut self, s: &Statement) -> Outcome {
        const NO_TX: &str = "WARNING:  there is no transaction in progress";
        use TxState::*;
        if self.state == Aborted && !matches!(s, Statement::Commit | Statement::Rollback) {
            return Err(
                "current transaction is aborted, commands ignored until end of transaction block"
                    .into(),
            );
        }
        match s {
            Statement::Begin => match self.state {
                InBlock => Ok(Some(
                    "WARNING:  there is already a transaction in progress".into(),
                )),
                _ => {
                    if self.state == Idle {
                        self.saved = Some(self.timeouts);
                    }
                    self.state = InBlock;
                    Ok(None)
                }
            },
            Statement::Commit | Statement::Rollback => {
                let notice = matches!(self.state, Idle | Implicit).then(|| NO_TX.to_string());
                let commit = *s == Statement::Commit && self.state != Aborted;
                self.end_transaction(commit);
                Ok(notice)
            }
            Statement::Lock {
                tables,
                mode,
                nowait,
            } => {
                if self.state == Idle {
                    return Err("LOCK TABLE can only be used in transaction blocks".into());
                }
                for name in tables {
                    let oid = self
                        .table(name)
                        .ok_or_else(|| format!("relation \"{name}\" does not exist"))?;
                    self.lock(name, oid, *mode, *nowait)?;
                }
                Ok(None)
            }
            Statement::Set(setting, value) => {
                match setting {
                    Setting::DeadlockTimeout => {
                        let v = value.unwrap_or(LockTimeouts::default().deadlock_timeout);
                        if v < Duration::from_millis(1) {
                            return Err(format!(
                                "{} ms is outside the valid range for parameter \"deadlock_timeout\" (1 .. 2147483647)",
                                v.as_millis()
                            ));
                        }
                        self.timeouts.deadlock_timeout = v;
                    }
                    Setting::LockTimeout => {
                        self.timeouts.lock_timeout = value.filter(|d| !d.is_zero());
                    }
                }
                Ok(None)
            }
            Statement::CreateTable(name) => {
                let mut catalog = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
                if catalog.tables.contains_key(name) {
                    return Err(format!("relation \"{name}\" already exists"));
                }
                let oid = FIRST_OID + catalog.next_oid;
                catalog.next_oid += 1;
                catalog.tables.insert(name.clone(), oid);
                Ok(None)
            }
            Statement::DropTable { tables, if_exists } => {
                let mut notice = None;
                for name in tables {
                    let Some(oid) = self.table(name) else {
                        if *if_exists {
                            notice = Some(format!(
                                "NOTICE:  table \"{name}\" does not exist, skipping"
                            ));
                            continue;
                        }
                        return Err(format!("table \"{name}\" does not exist"));
                    };
                    self.lock(name, oid, LockMode::AccessExclusive, false)?;
                    let mut catalog = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
                    catalog.tables.remove(name);
                }
                if self.state == Idle {
                    self.end_transaction(true);
                }
                Ok(notice)
            }
        }
    }
}

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

/// A session's connection: its backend thread and what the tester knows of it.
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

const NONBLOCK: u8 = 1;
const RETRY: u8 = 2;

/// What a run printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// The tester's standard output (what expected files hold).
    pub stdout: String,
    /// Warnings and teardown failures.
    pub stderr: String,
}

/// The runner for one spec.
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
