//! PostgreSQL's isolation tester (src/test/isolation) running lock-only specs on the pglocks
//! lock manager ([`pglocks_lmgr`]), printing what PostgreSQL 15's `isolationtester` prints for
//! the same spec against a real server, byte for byte.
//!
//! An isolation spec names sessions, the steps each session can run (blocks of SQL), and the
//! permutations, orders in which to launch the steps across sessions; the tester runs every
//! permutation on one connection per session and prints each step as it is launched, which
//! steps are left waiting for a lock, and the order in which they complete. This crate models
//! each part of that, for specs whose SQL only takes and releases locks:
//! - the spec language ([`spec`]): specscanner.l, specparse.y, and `check_testspec` and the
//!   permutation enumeration of isolationtester.c;
//! - the SQL subset ([`sql`]): transaction blocks, `LOCK TABLE … IN … MODE [NOWAIT]`,
//!   `SET deadlock_timeout | lock_timeout`, `CREATE TABLE` and `DROP TABLE`, as gram.y reads
//!   them;
//! - each session's backend (the `executor` module): postgres.c's `exec_simple_query` with its
//!   implicit transaction block, xact.c's transaction-block states, `LockTableCommand`, and the
//!   release of a transaction's locks when it ends or fails;
//! - the tester itself ([`runner`]): isolationtester.c's `run_permutation`,
//!   `try_complete_step`, `try_complete_steps` and the step markers, with the tester's clock
//!   kept as virtual time so that every run prints the same thing.
//!
//! What the specs exercise is the lock manager's behaviour as a session sees it: lock.c's
//! conflict table and wait queue (a request that conflicts with one already waiting waits too),
//! `NOWAIT`, proc.c's `ProcSleep` with its `deadlock_timeout` and `lock_timeout`, deadlock.c's
//! check (hard deadlocks fail the request, soft ones rearrange the wait queue), and the locks a
//! transaction holds until it ends. The tester reaches the lock manager only through its
//! public API: it takes and releases locks as a backend does, asks whether a session's backend
//! waits for a lock ([`LockManager::is_waiting`](pglocks_lmgr::LockManager::is_waiting), what
//! `pg_isolation_test_session_is_blocked` asks), and, because its sessions wait with
//! [`LockTimeouts::EXTERNAL`](pglocks_lmgr::LockTimeouts::EXTERNAL), fires their timers itself
//! when its clock reaches them
//! ([`LockManager::fire_timeout`](pglocks_lmgr::LockManager::fire_timeout)).
//!
//! [`parse_spec`] reads a spec; [`run_spec`] runs it on a lock manager configured as a release
//! is (pglocks-workloads' presets give each release's configuration) and returns its [`Output`].
//! `pglocks isolation FILE.spec…` does both from the command line.

mod executor;
pub mod runner;
pub mod spec;
pub mod sql;

pub use runner::{run_spec, Output, SELECT_TIMEOUT};
pub use spec::{parse_spec, TestSpec};

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
