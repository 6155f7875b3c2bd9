//! pglocks: PostgreSQL's lock primitives, modelled faithfully, and a harness that measures how
//! they scale on the machine at hand.
//!
//! The workspace has one crate per PostgreSQL subsystem; this facade re-exports them and holds the
//! `pglocks` command line ([`cli`]). See the README for the two commands that matter and for
//! the layout of the workspace.

pub mod cli;

pub use pglocks_apply as apply;
pub use pglocks_bufmgr as bufmgr;
pub use pglocks_dynahash as dynahash;
pub use pglocks_harness as harness;
pub use pglocks_isolation as isolation;
pub use pglocks_lmgr as lmgr;
pub use pglocks_lwlock as lwlock;
pub use pglocks_proc as proc;
pub use pglocks_procarray as procarray;
pub use pglocks_shmmq as shmmq;
pub use pglocks_sinval as sinval;
pub use pglocks_slru as slru;
pub use pglocks_spin as spin;
pub use pglocks_sync as sync;
pub use pglocks_wal as wal;
pub use pglocks_workloads as workloads;
