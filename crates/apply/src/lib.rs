//! PostgreSQL's logical replication apply, built on the lock manager (worker.c,
//! applyparallelworker.c, proto.c, reorderbuffer.c's streaming).
//!
//! # The design being modelled
//! A publisher decodes its WAL into per-transaction changes; a transaction that outgrows
//! `logical_decoding_work_mem` is *streamed* to the subscriber in chunks before it ends
//! ([`publisher`]). On the subscriber a leader apply worker receives the stream. Before 16
//! (`streaming = on`) it spools each streamed transaction to a file and applies it at
//! `STREAM COMMIT` ([`serial`], the reference every mode must match). From 16
//! (`streaming = parallel`, the default from 18) it hands each streamed transaction to a
//! parallel apply worker through a shared memory queue, which applies the changes as they come;
//! heavyweight locks (the stream lock, the transaction lock) make the leader wait for the worker
//! at commit, keeping commit order, and let the deadlock detector see waits between them.
//!
//! The pieces: the protocol ([`proto`]: pgoutput's messages as bytes), the publisher
//! ([`publisher`]), the serial reference apply ([`serial`]), the subscriber's tables with row
//! waits through the lock manager ([`subscriber`]), spool files ([`spool`]), the leader apply
//! worker ([`leader`], with [`apply`] running a whole subscription) and the parallel apply
//! workers ([`parallel`]). What the leader and the workers share is in modules of its own, so
//! that the workers never import the leader: the settings ([`config`]), the error
//! ([`error`]) and the two session locks they order each other with ([`locks`]).

pub mod config;
pub mod error;
pub mod leader;
pub mod locks;
pub mod parallel;
pub mod proto;
pub mod publisher;
pub mod serial;
pub mod spool;
pub mod subscriber;

pub use config::{ApplyConfig, Streaming};
pub use error::ApplyError;
pub use leader::{apply, ApplyOutcome, ApplyStats};

pub use proto::{Change, Message, ProtoError, Row};
pub use publisher::{publish, Published, PublisherConfig};
pub use serial::{apply_serially, Applied, Conflict, StreamError};
