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
//! - [`atomic`], [`sync`], [`thread`], [`hint`], [`cell`] and [`time`]: std's or loom's
//!   (scoped threads, [`thread::scope`], started mid-run on a simulated machine);
//! - [`channel`], a queue between threads whose waits are the shim's semaphores;
//! - [`os`], a system call that does not wait, charged on a simulated CPU (file I/O);
//! - [`entropy`]: fresh random seeds (the clock's, or a constant under loom);
//! - [`Semaphore`], the model of PostgreSQL's `PGSemaphore` (one per backend, counting; a futex
//!   wait and wake on Linux);
//! - [`CachePadded`] (crossbeam-utils') and [`CACHE_LINE_SIZE`], for padding hot atomics;
//! - [`fault`], deterministic I/O fault plans for the fault-injecting device and store wrappers:
//!   like the clock, the outcome of an I/O call is something the machine decides, not a
//!   backend, so a simulator replaces both at this seam;
//! - [`time`], besides the clock and sleep of the shim, the one duration syntax of every setting
//!   ([`time::parse_duration`], [`time::format_duration`]);
//! - [`data`], words of plain data a lock orders (std's atomics, charged to a simulated CPU as
//!   touches);
//! - [`shmem`], the data behind the locks as a simulated machine sees it: regions laid out as
//!   PostgreSQL's shared memory, and the touches a model makes of them.

pub mod cell;
pub mod channel;
pub mod cpulist;
pub mod data;
pub mod fault;
pub mod mutant;
mod scope;
mod semaphore;
pub mod shmem;
pub mod time;

pub use crossbeam_utils::CachePadded;
pub use semaphore::Semaphore;

/// The cache-line size assumed for padding decisions and reports, in bytes.
///
/// x86_64 lines are 64 bytes but its adjacent-line prefetcher pulls pairs, which is why
/// [`CachePadded`] aligns to 128 there; PostgreSQL's `PG_CACHE_LINE_SIZE` is 128 for the same reason.
pub const CACHE_LINE_SIZE: usize = 128;

pub mod atomic;

/// Shared ownership and locks: std's (the mutex made safe to contend on a simulated CPU), or
/// loom's under `--cfg loom`.
pub mod sync {
    #[cfg(loom)]
    pub use loom::sync::{Arc, Condvar, Mutex};
    #[cfg(not(loom))]
    pub use std::sync::{Arc, Condvar};

    #[cfg(not(loom))]
    pub use mutex::Mutex;

    #[cfg(not(loom))]
    mod mutex {
        use std::sync::{LockResult, MutexGuard, TryLockError, TryLockResult};

        /// std's `Mutex`, for state that models keep outside shared memory (a device's, a
        /// store's). On a simulated CPU a contended lock cannot block the host thread (every
        /// simulated CPU runs on it), so it polls instead: it sleeps one futex wake-up of
        /// virtual time between tries. Guards and `Condvar` are std's.
        #[derive(Debug, Default)]
        pub struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

        impl<T> Mutex<T> {
            /// A new mutex holding `v`.
            pub const fn new(v: T) -> Self {
                Mutex(std::sync::Mutex::new(v))
            }

            /// The value, consuming the mutex.
            pub fn into_inner(self) -> LockResult<T> {
                self.0.into_inner()
            }
        }

        impl<T: ?Sized> Mutex<T> {
            /// Locks, waiting as long as it takes.
            pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
                if !pglocks_sim::hook::active() {
                    return self.0.lock();
                }
                loop {
                    match self.0.try_lock() {
                        Ok(g) => return Ok(g),
                        Err(TryLockError::Poisoned(p)) => return Err(p),
                        Err(TryLockError::WouldBlock) => {
                            pglocks_sim::hook::sleep(std::time::Duration::from_micros(5))
                        }
                    }
                }
            }

            /// Locks if that needs no waiting.
            pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
                self.0.try_lock()
            }

            /// The value, through an exclusive reference.
            pub fn get_mut(&mut self) -> LockResult<&mut T> {
                self.0.get_mut()
            }
        }
    }
}

/// Threads: `std::thread` (its `yield_now` a `sched_yield` of a simulated CPU when called on
/// one), or loom's under `--cfg loom`; and scoped threads ([`thread::scope`]) that on a
/// simulated CPU are virtual threads started mid-run, joined in virtual time.
pub mod thread {
    pub use crate::scope::{scope, Scope, ScopedJoinHandle};

    #[cfg(loom)]
    pub use loom::thread::{spawn, yield_now, JoinHandle};
    #[cfg(not(loom))]
    pub use std::thread::{spawn, JoinHandle};

    /// Gives the CPU to another runnable thread, if any (`sched_yield`).
    #[cfg(not(loom))]
    #[inline]
    pub fn yield_now() {
        if pglocks_sim::hook::active() {
            pglocks_sim::hook::yield_now();
        } else {
            std::thread::yield_now();
        }
    }
}

/// CPU hints for retry loops. Under loom, `spin_loop` yields to the scheduler, which is what makes
/// a spin-wait loop finite for the model checker: every retry loop must call it.
pub mod hint {
    #[cfg(loom)]
    pub use loom::hint::spin_loop;

    /// One `pause` in a retry loop (x86 `pause`, `std::hint::spin_loop`). On a simulated CPU, the
    /// profile's pause, never skipped: for loops that count their rounds, such as PostgreSQL's
    /// `perform_spin_delay`.
    #[cfg(not(loom))]
    #[inline(always)]
    pub fn spin_loop() {
        if pglocks_sim::hook::active() {
            pglocks_sim::hook::pause();
        } else {
            std::hint::spin_loop();
        }
    }

    /// A `pause` in a loop that waits for memory to change and does not count its rounds (a
    /// ticket or MCS lock's wait). The same instruction as [`spin_loop`]; the difference is a
    /// promise to the simulator, which may then skip the rounds in which the memory the loop
    /// re-reads does not change.
    #[inline(always)]
    pub fn spin_wait() {
        #[cfg(loom)]
        loom::hint::spin_loop();
        #[cfg(not(loom))]
        if pglocks_sim::hook::active() {
            pglocks_sim::hook::spin_wait();
        } else {
            std::hint::spin_loop();
        }
    }

    /// Nothing at all in a normal build; a yield under loom. For the retry loops that deliberately
    /// do nothing between tries (the cost floor), which loom still needs to see as a yield point.
    #[inline(always)]
    pub fn model_yield() {
        #[cfg(loom)]
        loom::thread::yield_now();
    }

    /// `n` dependent multiply-adds from `seed`: CPU time that touches no shared memory, standing
    /// for work a model does not do (a critical section's body, think time, a row's executor
    /// work). Pass the result to `std::hint::black_box` so it is not optimized away. On a
    /// simulated CPU the steps are charged at the profile's cost per step and not executed (the
    /// result is then a cheap mix of `seed` and `n`).
    #[inline(always)]
    pub fn busy_work(n: u32, seed: u64) -> u64 {
        #[cfg(not(loom))]
        if pglocks_sim::hook::active() {
            pglocks_sim::hook::work(u64::from(n));
            return seed ^ u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        let mut x = seed;
        for _ in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
        x
    }
}

/// The private kernels a model runs between its shared-memory operations (hashing a key,
/// checksumming a record, comparing entries): on a real machine the model runs
/// them and pays for them, and [`ran`](cpu::ran) is nothing; on a simulated CPU, where code
/// between shim operations takes no virtual time, `ran` charges what the kernel costs there
/// for the count given (the profile's cost per unit: `pglocks_sim::profile::Kernel`).
pub mod cpu {
    /// A private kernel, as a model reports it; the simulator prices each
    /// (`pglocks_sim::profile::Kernel`, which it maps to one for one).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kernel {
        /// 64-bit words mixed into a hash code.
        Hash,
        /// Bytes run through CRC-32C.
        Crc,
        /// Entries of a table or a list compared against a key.
        Scan,
        /// Probes of a backend-local hash table (a lookup, an insert or a delete), its key
        /// already hashed.
        Probe,
    }

    /// Records that the caller ran `units` of `kernel` (words hashed, bytes checksummed,
    /// entries compared, tables probed) since its last shim operation. Nothing on a real machine and
    /// under loom.
    #[inline(always)]
    pub fn ran(kernel: Kernel, units: usize) {
        #[cfg(not(loom))]
        if pglocks_sim::hook::active() {
            use pglocks_sim::profile::Kernel as Priced;
            let priced = match kernel {
                Kernel::Hash => Priced::Hash,
                Kernel::Crc => Priced::Crc,
                Kernel::Scan => Priced::Scan,
                Kernel::Probe => Priced::Probe,
            };
            pglocks_sim::hook::kernel(priced, units as u64);
        }
        #[cfg(loom)]
        let _ = (kernel, units);
    }

    /// The NUMA node of the CPU the caller runs on now: the kernel's answer (`getcpu`) on a
    /// real machine, 0 if it has none; the profile's node of the virtual thread's CPU on a
    /// simulated one; 0 under loom, whose models set a backend's node themselves.
    pub fn numa_node() -> usize {
        #[cfg(loom)]
        return 0;
        #[cfg(not(loom))]
        {
            if pglocks_sim::hook::active() {
                return pglocks_sim::hook::numa_node();
            }
            let (mut cpu, mut node) = (0u32, 0u32);
            // SAFETY: getcpu writes two unsigned ints through the pointers given, both valid
            // for the call; its third argument is unused since Linux 2.6.24 and may be null.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_getcpu,
                    &mut cpu as *mut u32,
                    &mut node as *mut u32,
                    std::ptr::null_mut::<libc::c_void>(),
                )
            };
            if r == 0 {
                node as usize
            } else {
                0
            }
        }
    }

    /// The machine's NUMA nodes: the kernel's (`/sys/devices/system/node/online`, read once)
    /// on a real machine, 1 if it has none; the profile's on a simulated one; 1 under loom.
    pub fn numa_nodes() -> usize {
        #[cfg(loom)]
        return 1;
        #[cfg(not(loom))]
        {
            if pglocks_sim::hook::active() {
                return pglocks_sim::hook::numa_nodes();
            }
            static NODES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            *NODES.get_or_init(|| {
                std::fs::read_to_string("/sys/devices/system/node/online")
                    .ok()
                    .and_then(|list| crate::cpulist::parse_cpulist(&list).ok())
                    .and_then(|nodes| nodes.into_iter().max())
                    .map_or(1, |n| n + 1)
            })
        }
    }

    /// The form of the [`Kernel::Hash`] kernel the models' tag hashes take: each 64-bit word
    /// xored in, multiplied by an odd constant, and its high half folded down. What `pglocks
    /// calibrate` times per word, so that the cost it measures is this code's.
    #[inline]
    pub fn mix_words(seed: u64, words: &[u64]) -> u64 {
        let mut h = seed;
        for &w in words {
            h = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 32;
        }
        h
    }
}

/// The kernel's part of what a model does that is not a wait: on a real machine the model
/// makes the call itself and pays for it, and these are nothing; on a simulated CPU they are
/// what the call costs there.
pub mod os {
    /// One system call that does not block, made (or stood for) by the caller: a `write` to
    /// or a `read` from the page cache, an `open`, an `unlink`. Nothing on a real machine and
    /// under loom; the profile's `os.syscall_ns` on a simulated CPU, which does not charge the
    /// host's own file I/O.
    #[inline]
    pub fn system_call() {
        #[cfg(not(loom))]
        if pglocks_sim::hook::active() {
            pglocks_sim::hook::system_call();
        }
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
        if pglocks_sim::hook::active() {
            return pglocks_sim::hook::fresh_seed();
        }
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
