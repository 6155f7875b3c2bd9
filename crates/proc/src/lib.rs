//! PostgreSQL's per-backend shared state: what every subsystem of pglocks finds through `MyProc`
//! and `ProcGlobal`.
//!
//! PostgreSQL gives each backend a `PGPROC` in shared memory and keeps them in one array,
//! `ProcGlobal` (storage/proc.h, proc.c); a backend finds its own through the global `MyProc`,
//! and others reach it by proc number. This crate models that state, and the few structures
//! threaded through it:
//! - [`ProcTable`], [`ProcSlot`] and [`Backend`]: `ProcGlobal`, the shared part of one `PGPROC`
//!   (its semaphore, latch and LWLock wait fields), and the explicit `MyProc` handle that owns
//!   what is private to the backend ([`backend`]; `InitProcess` and `ProcKill` of proc.c);
//! - [`HeldLwLocks`] and [`LwLockMode`]: lwlock.c's per-backend `held_lwlocks[]` and lwlock.h's
//!   `LWLockMode`, with which a backend records the LWLocks it holds and waits for;
//! - [`proclist`]: the lists of backends linked through `PGPROC` fields (storage/proclist.h),
//!   on which LWLocks queue their waiters, and [`proclist_types`], the list's node and head types
//!   (storage/proclist_types.h), which `PGPROC` embeds without depending on the list code;
//! - [`latch`]: a backend's process latch (storage/ipc/latch.c, the wait of waiteventset.c);
//! - [`stats`]: per-backend wait events (what pg_stat_activity's `wait_event` shows, as totals),
//!   lwlock.c's `LWLOCK_STATS` counters, s_lock counters and a subsystem's own events;
//! - [`tranche`]: lwlock.c's tranche registry (`LWLockRegisterTranche`, `GetLWTrancheName`);
//! - [`spin_delay`]: the per-backend half of s_lock.c's adaptive spinning (`spins_per_delay` and
//!   its hand-over to and from `ProcGlobal`).
//!
//! Everything here synchronises through the `pglocks-sync` shim only (its atomics, `Arc` and
//! `Semaphore`), so the crate runs on std normally and on loom under `RUSTFLAGS="--cfg loom"`,
//! and a simulator behind the shim runs it unchanged. The lock algorithms themselves live in the
//! crates above (`pglocks-spin`, `pglocks-lwlock`, …), which take a `&mut Backend` wherever
//! PostgreSQL acts on behalf of `MyProc`.

pub mod backend;
pub mod latch;
pub mod proclist;
pub mod proclist_types;
pub mod qnode;
pub mod spin_delay;
pub mod stats;
pub mod tranche;

pub use backend::{
    AtomicLwLockMode, Backend, HeldLwLocks, LwLockMode, ProcError, ProcSlot, ProcTable,
    HELD_LWLOCKS_CAPACITY, MAX_BACKENDS,
};
