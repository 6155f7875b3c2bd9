//! The per-backend half of s_lock.c's adaptive spinning: the `spins_per_delay` estimate each
//! backend keeps, its limits, and the hand-over to and from `ProcGlobal->spins_per_delay` that
//! proc.c performs when a backend starts and exits.
//!
//! The spinning itself (`s_lock`, `perform_spin_delay`, `finish_spin_delay`) is in `pglocks-spin`;
//! this part lives here because it is per-backend state and every crate passes a
//! [`Backend`](crate::Backend) down to its spinlocks.

use std::time::Duration;

/// s_lock.c's `MIN_SPINS_PER_DELAY`.
pub const MIN_SPINS_PER_DELAY: u32 = 10;
/// s_lock.c's `MAX_SPINS_PER_DELAY`.
pub const MAX_SPINS_PER_DELAY: u32 = 1000;
/// s_lock.h's `DEFAULT_SPINS_PER_DELAY`.
pub const DEFAULT_SPINS_PER_DELAY: u32 = 100;
/// s_lock.c's `NUM_DELAYS`: sleeps before the spinlock is declared stuck.
pub const NUM_DELAYS: u32 = 1000;
/// s_lock.c's `MIN_DELAY_USEC`: the first sleep, and where the sleep wraps back to.
pub const MIN_DELAY: Duration = Duration::from_micros(1000);
/// s_lock.c's `MAX_DELAY_USEC`: a sleep that would exceed this wraps back to [`MIN_DELAY`].
pub const MAX_DELAY: Duration = Duration::from_micros(1_000_000);

/// The constants of s_lock.c's delay loop. PostgreSQL compiles them in; here they are data so that
/// a test can make a spinlock "stuck" in milliseconds rather than the ~1000 s (1000 sleeps averaging
/// about half a second) it takes PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinDelayConfig {
    /// Lower bound of the adaptive estimate (`MIN_SPINS_PER_DELAY`).
    pub min_spins_per_delay: u32,
    /// Upper bound of the adaptive estimate (`MAX_SPINS_PER_DELAY`).
    pub max_spins_per_delay: u32,
    /// Starting estimate (`DEFAULT_SPINS_PER_DELAY`).
    pub default_spins_per_delay: u32,
    /// Sleeps before giving up with "stuck spinlock" (`NUM_DELAYS`).
    pub num_delays: u32,
    /// First sleep (`MIN_DELAY_USEC`).
    pub min_delay: Duration,
    /// Ceiling past which the sleep wraps to `min_delay` (`MAX_DELAY_USEC`).
    pub max_delay: Duration,
    /// The unit `cur_delay` is kept and grown in: a microsecond since 9.4, a millisecond before
    /// (8.1–9.3 kept `cur_delay` in whole milliseconds, so growth from 1 ms by a factor in [1, 2)
    /// rounded to 1 or 2 ms, which made long runs of 1 ms sleeps).
    pub delay_unit: Duration,
}

impl Default for SpinDelayConfig {
    fn default() -> Self {
        Self {
            min_spins_per_delay: MIN_SPINS_PER_DELAY,
            max_spins_per_delay: MAX_SPINS_PER_DELAY,
            default_spins_per_delay: DEFAULT_SPINS_PER_DELAY,
            num_delays: NUM_DELAYS,
            min_delay: MIN_DELAY,
            max_delay: MAX_DELAY,
            delay_unit: Duration::from_micros(1),
        }
    }
}

/// A backend's spinning state: s_lock.c's file-level `spins_per_delay`, plus the constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinTuning {
    /// The backend's current estimate of how many failed tries to make before sleeping.
    pub spins_per_delay: u32,
    /// The delay-loop constants.
    pub config: SpinDelayConfig,
}

impl SpinTuning {
    /// Models `set_spins_per_delay` (s_lock.c), called by `InitProcess` (proc.c): a new backend
    /// starts from the shared estimate.
    pub fn starting_from(shared_spins_per_delay: u32, config: SpinDelayConfig) -> Self {
        Self {
            spins_per_delay: shared_spins_per_delay,
            config,
        }
    }

    /// Models `update_spins_per_delay` (s_lock.c), called by `ProcKill` (proc.c) at backend exit:
    /// the shared estimate moves one sixteenth of the way toward this backend's, so one backend's
    /// experience nudges, but does not overwrite, what the next backends start with.
    pub fn blend_into_shared(&self, shared_spins_per_delay: u32) -> u32 {
        (shared_spins_per_delay * 15 + self.spins_per_delay) / 16
    }
}
