//! [`ApplyError`]: what stops an apply, in the words PostgreSQL's apply workers use (worker.c,
//! applyparallelworker.c). Shared by the leader, the parallel apply workers and the apply locks.

use crate::proto::ProtoError;
use crate::serial::StreamError;
use pglocks_lmgr::LmgrError;
use pglocks_proc::ProcError;
use pglocks_shmmq::ShmMqError;

/// What stopped an apply, in the words PostgreSQL's apply workers use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// A message out of place or undecodable.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// A lock wait failed: deadlock detected, lock timeout, lock table full.
    #[error(transparent)]
    Lock(#[from] LmgrError),
    /// A parallel apply worker failed; the leader reports its error
    /// (`ProcessParallelApplyMessage`'s context line).
    #[error("logical replication parallel apply worker for remote transaction {xid}: {error}")]
    Worker {
        /// The remote transaction it was applying.
        xid: u32,
        /// Its error.
        error: Box<ApplyError>,
    },
    /// A parallel apply worker went away without an error.
    #[error("lost connection to the logical replication parallel apply worker")]
    LostWorker,
    /// The leader went away while a worker waited for it.
    #[error("lost connection to the logical replication apply worker")]
    LostLeader,
    /// The queue refused a message.
    #[error("could not send data to shared-memory queue: {0}")]
    Queue(#[from] ShmMqError),
    /// A spool file could not be written or read.
    #[error("could not access a streaming transaction's changes file: {0}")]
    Io(#[from] std::io::Error),
    /// No backend slot for a worker.
    #[error(transparent)]
    Proc(#[from] ProcError),
    /// A setting out of range.
    #[error("invalid value for {name}: {value} ({why})")]
    Config {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
}

impl From<ProtoError> for ApplyError {
    fn from(e: ProtoError) -> Self {
        ApplyError::Stream(e.into())
    }
}

impl ApplyError {
    /// The deadlock report's detail lines, if this is (or relays) a deadlock.
    pub fn detail(&self) -> Option<String> {
        match self {
            ApplyError::Lock(e) => e.detail(),
            ApplyError::Worker { error, .. } => error.detail(),
            _ => None,
        }
    }

    /// Whether this is (or relays) "deadlock detected".
    pub fn is_deadlock(&self) -> bool {
        match self {
            ApplyError::Lock(e) => matches!(e, LmgrError::Deadlock { .. }),
            ApplyError::Worker { error, .. } => error.is_deadlock(),
            _ => false,
        }
    }
}
