//! Models `slock_t`, `TAS`, `TAS_SPIN`, `SPIN_DELAY`, `S_LOCK` and `S_UNLOCK` (s_lock.h) and
//! `s_lock`, `perform_spin_delay` and `finish_spin_delay` (s_lock.c). The crate documentation
//! describes the algorithm.

use crate::{RawSpinLock, StuckSpinlock};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{AtomicU8, Ordering, TestAndSet};
use pglocks_sync::hint;
use pglocks_sync::time::{sleep, Duration, Instant};
use rand::RngExt;

/// Models PostgreSQL's spinlock: a one-byte `slock_t` taken with `S_LOCK` and freed with
/// `S_UNLOCK`.
///
/// `TAS_SPIN` selects the retry of `s_lock`: `true` reads the byte before each exchange (x86_64
/// from the release the preset names), `false` retries with a bare `TAS`, which is what `TAS_SPIN`
/// defaults to on platforms that do not define it.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct PgSpinLock<const TAS_SPIN: bool = true> {
    slock: AtomicU8,
}

impl<const TAS_SPIN: bool> PgSpinLock<TAS_SPIN> {
    /// Models `TAS` (s_lock.h, x86 `xchgb`): sets the byte, returns whether it was already set.
    #[inline(always)]
    fn tas(&self) -> bool {
        self.slock.test_and_set(Ordering::Acquire)
    }

    /// Models `TAS_SPIN` (s_lock.h): on x86 a plain read first, and the locked exchange only when
    /// the byte looked free; otherwise the same as [`Self::tas`].
    #[inline(always)]
    fn tas_spin(&self) -> bool {
        if TAS_SPIN && self.slock.load(Ordering::Relaxed) != 0 {
            return true;
        }
        self.tas()
    }

    /// Models `s_lock` (s_lock.c): the slow path, entered after `S_LOCK`'s first `TAS` failed.
    /// Returns the number of sleeps it took.
    #[cold]
    #[inline(never)]
    fn s_lock(&self, backend: &mut Backend) -> Result<u32, StuckSpinlock> {
        backend.stats.spin.contended += 1;
        let mut status = SpinDelayStatus::new();
        while self.tas_spin() {
            status.perform_spin_delay(backend)?;
        }
        Ok(status.finish_spin_delay(backend))
    }

    /// Whether the byte is set right now (`S_LOCK_FREE`'s negation). Racy by nature.
    pub fn is_locked(&self) -> bool {
        self.slock.load(Ordering::Relaxed) != 0
    }
}

// SAFETY: the byte goes 0 -> 1 only through an atomic exchange that observed 0, so one caller at a
// time holds it; unlock's release store pairs with the exchange's acquire.
unsafe impl<const TAS_SPIN: bool> RawSpinLock for PgSpinLock<TAS_SPIN> {
    const NAME: &'static str = "pg";

    fn new() -> Self {
        Self {
            slock: AtomicU8::new(0),
        }
    }

    /// Models `S_LOCK`: one `TAS` inline, `s_lock` only if it failed.
    #[inline(always)]
    fn lock(&self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        if self.tas() {
            self.s_lock(backend)?;
        }
        Ok(())
    }

    /// Models `TAS` used alone (`SpinLockConditionalAcquire` does not exist in PostgreSQL, but
    /// `LWLockConditionalAcquire`'s callers and tests want it).
    #[inline(always)]
    fn try_lock(&self) -> bool {
        !self.tas()
    }

    /// Models `S_UNLOCK`: a store of 0 with release ordering.
    #[inline(always)]
    unsafe fn unlock(&self) {
        use pglocks_sync::mutant::{active, Mutant};
        if active(Mutant::SpinUnlockRelaxed) {
            self.slock.store(0, Ordering::Relaxed);
            return;
        }
        self.slock.store(0, Ordering::Release);
    }
}

/// Models `SpinDelayStatus` (s_lock.h): the state of one contended acquisition.
///
/// Also the delay loop of every other spin-wait in PostgreSQL that uses `perform_spin_delay`, such
/// as the LWLock wait-list lock of 9.6+, so it is public.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinDelayStatus {
    /// Failed tries since the last sleep.
    pub spins: u32,
    /// Sleeps so far.
    pub delays: u32,
    /// The next sleep, in units of the config's `delay_unit` (microseconds since 9.4); 0 until
    /// the first sleep.
    pub cur_delay: u64,
}

impl SpinDelayStatus {
    /// Models `init_spin_delay`.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// Models `perform_spin_delay`: `SPIN_DELAY` once, and every `spins_per_delay` calls one
    /// randomised sleep; fails after `num_delays` sleeps.
    pub fn perform_spin_delay(&mut self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        hint::spin_loop();
        backend.stats.spin.spins += 1;
        self.spins += 1;
        if self.spins >= backend.spin.spins_per_delay {
            self.delay(backend)?;
        }
        Ok(())
    }

    #[cold]
    fn delay(&mut self, backend: &mut Backend) -> Result<(), StuckSpinlock> {
        let cfg = backend.spin.config;
        self.delays += 1;
        if self.delays > cfg.num_delays {
            return Err(StuckSpinlock {
                delays: cfg.num_delays,
            });
        }
        let unit = cfg.delay_unit.max(Duration::from_nanos(1));
        let (min, max) = (units(cfg.min_delay, unit), units(cfg.max_delay, unit));
        if self.cur_delay == 0 {
            self.cur_delay = min;
        }
        let start = Instant::now();
        sleep(unit.saturating_mul(self.cur_delay.try_into().unwrap_or(u32::MAX)));
        backend.stats.spin.delays += 1;
        backend
            .stats
            .waits
            .record("SpinDelay", "sleep", start.elapsed().as_nanos() as u64);
        let factor: f64 = backend.rng.random();
        self.cur_delay = next_delay(self.cur_delay, factor, min, max);
        self.spins = 0;
        Ok(())
    }

    /// Models `finish_spin_delay`: adapts the backend's `spins_per_delay` (+100 up to the maximum
    /// when no sleep was needed, -1 down to the minimum otherwise) and returns the sleeps taken.
    pub fn finish_spin_delay(self, backend: &mut Backend) -> u32 {
        backend.spin.spins_per_delay = adapt_spins_per_delay(
            backend.spin.spins_per_delay,
            self.cur_delay != 0,
            &backend.spin.config,
        );
        self.delays
    }
}

/// How many whole `unit`s fit in `d`.
fn units(d: Duration, unit: Duration) -> u64 {
    (d.as_nanos() / unit.as_nanos())
        .try_into()
        .unwrap_or(u64::MAX)
}

/// The growth rule of `perform_spin_delay`: add `cur * factor` rounded to the nearest unit
/// (`factor` uniform in [0, 1), so the sleep grows by 1× to 2×), and wrap to `min` past `max`.
pub fn next_delay(cur: u64, factor: f64, min: u64, max: u64) -> u64 {
    let grown = cur + (cur as f64 * factor + 0.5) as u64;
    if grown > max {
        min
    } else {
        grown
    }
}

/// The adaptation rule of `finish_spin_delay`.
pub fn adapt_spins_per_delay(
    spins_per_delay: u32,
    slept: bool,
    cfg: &pglocks_proc::spin_delay::SpinDelayConfig,
) -> u32 {
    if !slept && spins_per_delay < cfg.max_spins_per_delay {
        // Spinning sufficed: the holder was running elsewhere, so spin longer next time.
        (spins_per_delay + 100).min(cfg.max_spins_per_delay)
    } else if slept && spins_per_delay > cfg.min_spins_per_delay {
        // We had to sleep anyway: spinning wasted time the holder might have used.
        spins_per_delay - 1
    } else {
        spins_per_delay
    }
}
