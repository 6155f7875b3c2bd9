//! PostgreSQL's logical replication apply, built on the lock manager (worker.c,
//! applyparallelworker.c, proto.c, reorderbuffer.c's streaming) — in progress (issue 10).
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
//! This crate has so far the protocol ([`proto`]: pgoutput's messages as bytes), the publisher
//! ([`publisher`]) and the serial reference apply ([`serial`]); the leader and the parallel
//! workers on the lock manager and shm_mq come next.

pub mod proto;
pub mod publisher;
pub mod serial;

pub use proto::{Change, Message, ProtoError, Row};
pub use publisher::{publish, Published, PublisherConfig};
pub use serial::{apply_serially, Applied, Conflict, StreamError};
