//! A session's backend: the lock-only statements of a step run as PostgreSQL's backend runs a
//! query string (postgres.c's `exec_simple_query`), taking relation locks through the lock
//! manager as `LockTableCommand` and `RemoveRelations` do, and releasing a transaction's locks
//! when it ends (lock.c's `LockReleaseAll`).
//!
//! Each backend follows PostgreSQL's transaction states (xact.c): a statement outside a
//! transaction block commits by itself; a multi-statement step runs as one implicit block; an
//! error in a block releases the locks at once and leaves the block aborted until
//! `COMMIT`/`ROLLBACK`. `SET` is transactional: a rollback restores the settings.

use crate::sql::{Setting, Statement};
use crate::IsolationError;
use pglocks_lmgr::{
    LmgrError, LocalLocks, LockAcquireResult, LockManager, LockMode, LockOwner, LockTag,
    LockTimeouts,
};
use pglocks_proc::{Backend, ProcTable};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The database the sessions are connected to.
const DATABASE: u32 = 5;
/// The oid of the first table created (`FirstNormalObjectId`).
const FIRST_OID: u32 = 16384;

/// The tables that exist (pg_class, reduced to names and oids).
#[derive(Debug, Default)]
pub(crate) struct Catalog {
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
pub(crate) struct StepResult {
    pub(crate) notices: Vec<String>,
    pub(crate) error: Option<String>,
}

/// One connection's backend and state: what postgres.c's `PostgresMain` keeps for a session
/// (its `PGPROC`, its `LOCALLOCK` table, the transaction-block state and the lock settings).
pub(crate) struct Executor {
    lm: Arc<LockManager>,
    catalog: Arc<Mutex<Catalog>>,
    pub(crate) b: Backend,
    local: LocalLocks,
    state: TxState,
    timeouts: LockTimeouts,
    /// The settings when the transaction began: a rollback restores them (guc.c's
    /// transactional `SET`).
    saved: Option<LockTimeouts>,
    /// For a session: what the tester's clock needs to know of its lock waits (the control
    /// connection has none and keeps real timers).
    pub(crate) waits: Option<Arc<WaitInfo>>,
}

/// What a session's backend tells the runner about the lock requests that may wait: their
/// timer settings, and a count that tells one wait from the next.
#[derive(Debug, Default)]
pub(crate) struct WaitInfo {
    /// Lock requests made that may wait; a backend asleep in the lock manager is in the last.
    pub(crate) requests: AtomicU64,
    /// `deadlock_timeout` and `lock_timeout` of the last request.
    pub(crate) timeouts: Mutex<LockTimeouts>,
}

type Outcome = Result<Option<String>, String>;

impl Executor {
    pub(crate) fn new(
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
    pub(crate) fn run(&mut self, statements: &[Statement]) -> StepResult {
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
    pub(crate) fn end_transaction(&mut self, commit: bool) {
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
