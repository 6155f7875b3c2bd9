//! The one door through which every pglocks primitive reaches atomics, `UnsafeCell`, threads, spin
//! hints, time and semaphores.
//!
//! Built normally, everything here is `std` (plus a futex-backed [`Semaphore`] on Linux). Built with
//! `RUSTFLAGS="--cfg loom"`, the same names are loom's, so the lock algorithms above this crate can
//! be model-checked without a line of change. Keep it the only door: a crate that imports
//! `std::sync::atomic` directly escapes the model checker, and the planned many-core simulator,
//! which will stand behind these same names.
//!
//! The shim is the whole crate: it models nothing of PostgreSQL but the machine a backend runs
//! on. PostgreSQL's per-backend structures (`PGPROC`, `ProcGlobal`, proclists, latches, wait
//! events, the tranche registry) are built on it in `pglocks-proc`. What it holds:
//! - [`atomic`], [`sync`], [`thread`], [`hint`], [`cell`] and [`time`]: std's or loom's;
//! - [`entropy`]: fresh random seeds (the clock's, or a constant under loom);
//! - [`Semaphore`], the model of PostgreSQL's `PGSemaphore` (one per backend, counting; a futex
//!   wait and wake on Linux);
//! - [`CachePadded`] (crossbeam-utils') and [`CACHE_LINE_SIZE`], for padding hot atomics;
//! - [`fault`], deterministic I/O fault plans for the fault-injecting device and store wrappers:
//!   like the clock, the outcome of an I/O call is something the machine decides, not a
//!   backend, so a simulator replaces both at this seam;
//! - [`time`], besides the clock and sleep of the shim, the one duration syntax of every setting
//!   ([`time::parse_duration`], [`time::format_duration`]).

pub mod cell;
pub mod fault;
mod semaphore;
pub mod time;

pub use crossbeam_utils::CachePadded;
pub use semaphore::Semaphore;

/// The cache-line size assumed for padding decisions and reports, in bytes.
///
/// x86_64 lines are 64 bytes but its adjacent-line prefetcher pulls pairs, which is why
/// [`CachePadded`] aligns to 128 there; PostgreSQL's `PG_CACHE_LINE_SIZE` is 128 for the same reason.
pub const CACHE_LINE_SIZE: usize = 128;

/// Atomics: `std::sync::atomic`, or loom's under `--cfg loom`.
pub mod atomic {
    #[cfg(loom)]
    pub use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    #[cfg(not(loom))]
    pub use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };

    /// Test-and-set of a lock word: an atomic exchange of "set" (x86 `xchg`), reporting whether
    /// the word was set already.
    ///
    /// Under loom it is a compare-exchange from "clear" instead. The two are equal in effect on a
    /// word that only holds clear/set, but loom counts a failed exchange (set written over set) as
    /// a new store, so a spinning exchange never lets its model finish; a failed compare-exchange
    /// is only a load.
    pub trait TestAndSet {
        /// Sets the word; `true` if it was set before (the lock was taken).
        fn test_and_set(&self, order: Ordering) -> bool;
    }

    impl TestAndSet for AtomicU8 {
        #[inline(always)]
        fn test_and_set(&self, order: Ordering) -> bool {
            #[cfg(not(loom))]
            return self.swap(1, order) != 0;
            #[cfg(loom)]
            return self
                .compare_exchange(0, 1, order, Ordering::Relaxed)
                .is_err();
        }
    }

    impl TestAndSet for AtomicBool {
        #[inline(always)]
        fn test_and_set(&self, order: Ordering) -> bool {
            #[cfg(not(loom))]
            return self.swap(true, order);
            #[cfg(loom)]
            return self
                .compare_exchange(false, true, order, Ordering::Relaxed)
                .is_err();
        }
    }
}

/// Shared ownership: `std::sync::Arc`, or loom's under `--cfg loom`.
pub mod sync {
    #[cfg(loom)]
    pub use loom::sync::{Arc, Condvar, Mutex};
    #[cfg(not(loom))]
    pub use std::sync::{Arc, Condvar, Mutex};
}

/// Threads: `std::thread`, or loom's under `--cfg loom`.
pub mod thread {
    #[cfg(loom)]
    pub use loom::thread::{spawn, yield_now, JoinHandle};
    #[cfg(not(loom))]
    pub use std::thread::{spawn, yield_now, JoinHandle};
}

/// CPU hints for retry loops. Under loom, `spin_loop` yields to the scheduler, which is what makes
/// a spin-wait loop finite for the model checker: every retry loop must call it.
pub mod hint {
    #[cfg(loom)]
    pub use loom::hint::spin_loop;
    #[cfg(not(loom))]
    pub use std::hint::spin_loop;

    /// Nothing at all in a normal build; a yield under loom. For the retry loops that deliberately
    /// do nothing between tries (the cost floor), which loom still needs to see as a yield point.
    #[inline(always)]
    pub fn model_yield() {
        #[cfg(loom)]
        loom::thread::yield_now();
    }

    /// `n` dependent multiply-adds from `seed`: CPU time that touches no shared memory, standing
    /// for work a model does not do (a critical section's body, think time, a row's executor
    /// work). Pass the result to `std::hint::black_box` so it is not optimized away.
    #[inline(always)]
    pub fn busy_work(n: u32, seed: u64) -> u64 {
        let mut x = seed;
        for _ in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
        x
    }
}

/// Where randomness comes from when a model wants it fresh rather than reproducible.
pub mod entropy {
    /// A seed for a random-number generator that differs between calls, even two at the same
    /// instant: the wall clock's nanoseconds mixed with a process-wide call count. Under loom,
    /// a constant instead, so that every execution of a model draws the same numbers (a
    /// simulator behind the shim decides it likewise).
    pub fn fresh_seed() -> u64 {
        #[cfg(loom)]
        return 0x5eed_1007;
        #[cfg(not(loom))]
        {
            use std::sync::atomic::{AtomicU64, Ordering};
            use std::time::{SystemTime, UNIX_EPOCH};
            // The count is the machine's, not a model's: std's atomic, never loom's.
            static CALLS: AtomicU64 = AtomicU64::new(0);
            let clock = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            clock
                ^ CALLS
                    .fetch_add(1, Ordering::Relaxed)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        }
    }
}

/// The loom model builder the crates' loom tests share: `bound` preemptions unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise, and room for 100 000 branches (paths that initialise
/// WAL pages, remap a buffer or run a group update are longer than loom's default allows).
#[cfg(loom)]
pub fn loom_builder(bound: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = b.preemption_bound.or(Some(bound));
    b.max_branches = 100_000;
    b
}
