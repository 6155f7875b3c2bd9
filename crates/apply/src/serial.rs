//! The reference apply: one worker applying the stream in order, streamed transactions spooled
//! until their commit — PostgreSQL's `streaming = on` before 16 (worker.c's
//! `apply_handle_stream_*` writing each chunk to a file and `apply_spooled_messages` replaying
//! it at `STREAM COMMIT`), with the changes applied to in-memory tables with a unique key.
//!
//! Every other apply mode must end with the same rows and commit the same transactions in the
//! same order.

use crate::proto::{Change, Message, ProtoError};
use std::collections::BTreeMap;

/// A row change the subscriber could not apply as sent (18's conflict types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// `insert_exists`: the key is already there (PostgreSQL raises a unique violation).
    InsertExists {
        /// Relation.
        rel: u32,
        /// Key.
        key: i64,
    },
    /// `update_missing` / `delete_missing`: no row with the key (PostgreSQL logs and skips).
    Missing {
        /// Relation.
        rel: u32,
        /// Key.
        key: i64,
    },
}

/// A stream that breaks the protocol's rules (the apply worker's "ERROR: invalid logical
/// replication message" family).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// A message out of place, such as a change outside a transaction or a nested stream.
    #[error("invalid logical replication message order: {0}")]
    Order(String),
    /// Undecodable bytes.
    #[error(transparent)]
    Proto(#[from] ProtoError),
}

/// Tables with a unique key: (relation, key) → value.
pub type Tables = BTreeMap<(u32, i64), i64>;

/// The row `(rel, change.key())` after `change`, given the row before it (`None`: absent), or
/// the conflict that keeps the change from applying.
pub fn changed_row(before: Option<i64>, rel: u32, change: Change) -> Result<Option<i64>, Conflict> {
    let key = change.key();
    match (change, before) {
        (Change::Insert(_), Some(_)) => Err(Conflict::InsertExists { rel, key }),
        (Change::Insert(r), None) => Ok(Some(r.value)),
        (Change::Update(r), Some(_)) => Ok(Some(r.value)),
        (Change::Delete(_), Some(_)) => Ok(None),
        (Change::Update(_) | Change::Delete(_), None) => Err(Conflict::Missing { rel, key }),
    }
}

/// Applies `change` to `rows`, reporting a conflict instead of applying when it has one.
pub fn apply_change(rows: &mut Tables, rel: u32, change: Change) -> Result<(), Conflict> {
    let row = (rel, change.key());
    match changed_row(rows.get(&row).copied(), rel, change)? {
        Some(v) => rows.insert(row, v),
        None => rows.remove(&row),
    };
    Ok(())
}

/// What an apply ended with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The tables.
    pub rows: Tables,
    /// Committed xids, in the order committed.
    pub commit_order: Vec<u32>,
    /// Changes not applied as sent.
    pub conflicts: Vec<Conflict>,
}

/// Applies `messages` serially, spooling streamed transactions until their commit.
pub fn apply_serially(messages: &[Message]) -> Result<Applied, StreamError> {
    let mut out = Applied::default();
    let mut spool: BTreeMap<u32, Vec<(u32, Change)>> = BTreeMap::new();
    // The transaction sent whole that is open, and the stream that is open.
    let (mut whole, mut stream): (Option<u32>, Option<u32>) = (None, None);
    let order = |what: &str| StreamError::Order(what.to_string());
    for m in messages {
        match *m {
            Message::Begin { xid, .. } if whole.is_none() && stream.is_none() => whole = Some(xid),
            Message::Commit { .. } => {
                let xid = whole.take().ok_or_else(|| order("COMMIT without BEGIN"))?;
                out.commit_order.push(xid);
            }
            Message::Change {
                xid: None,
                rel,
                change,
            } if whole.is_some() => {
                if let Err(c) = apply_change(&mut out.rows, rel, change) {
                    out.conflicts.push(c);
                }
            }
            Message::Change {
                xid: Some(x),
                rel,
                change,
            } if stream == Some(x) => spool.entry(x).or_default().push((rel, change)),
            Message::StreamStart { xid, first_segment } if whole.is_none() && stream.is_none() => {
                if first_segment == spool.contains_key(&xid) {
                    return Err(order(
                        "STREAM START's first-segment flag disagrees with the stream",
                    ));
                }
                spool.entry(xid).or_default();
                stream = Some(xid);
            }
            Message::StreamStop if stream.is_some() => stream = None,
            Message::StreamCommit { xid, .. } if whole.is_none() && stream.is_none() => {
                let changes = spool
                    .remove(&xid)
                    .ok_or_else(|| order("STREAM COMMIT of a transaction never streamed"))?;
                for (rel, change) in changes {
                    if let Err(c) = apply_change(&mut out.rows, rel, change) {
                        out.conflicts.push(c);
                    }
                }
                out.commit_order.push(xid);
            }
            Message::StreamAbort { xid, subxid } if whole.is_none() && stream.is_none() => {
                if xid == subxid && spool.remove(&xid).is_none() {
                    return Err(order("STREAM ABORT of a transaction never streamed"));
                }
            }
            other => return Err(StreamError::Order(format!("{other:?} out of place"))),
        }
    }
    if whole.is_some() || stream.is_some() || !spool.is_empty() {
        return Err(order("the stream ends inside a transaction"));
    }
    Ok(out)
}
