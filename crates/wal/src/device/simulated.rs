//! [`SimulatedDevice`]: a disk of known, adjustable speed. Writes cost nothing; a flush sleeps
//! for one draw of a [`FlushLatency`], standing for the wait in `issue_xlog_fsync` (xlog.c).

use pglocks_sync::time::Instant;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::fmt;

use super::{DeviceError, FlushDevice, FlushLatency};

/// A disk of known speed: [`write`](FlushDevice::write) ignores the bytes and
/// costs nothing, [`flush`](FlushDevice::flush) sleeps for one draw of a
/// [`FlushLatency`] (models the wait in `issue_xlog_fsync`).
///
/// A flush computes its deadline as its start plus the draw and sleeps with
/// `pglocks_sync::time::sleep` until then (again if woken early). A zero draw
/// returns at once without any system call.
///
/// # Timer slack
///
/// Linux lets a sleeping thread's wakeup slip by its timer slack, 50 µs by
/// default. On the 2-core VM this was written on, a 2 ms `thread::sleep`
/// overslept by 62-72 µs on average (p50 57-75 µs, p99 92-107 µs; four runs
/// of 200 sleeps), which would add about 3.5% to every simulated 2 ms flush.
/// So on Linux the first flush that sleeps on a thread sets that thread's
/// timer slack to 1 ns (`prctl(PR_SET_TIMERSLACK, 1)`), once per thread
/// (remembered in a thread-local flag); there the oversleep fell to 18-27 µs
/// mean (p50 20-27 µs, p99 39-63 µs), the rest being wakeup latency. The
/// setting stays with the thread and also tightens its other timed waits, at
/// the cost of a few more wakeups; it is never reverted. Other systems sleep
/// with their default precision. Either way a flush never returns before its
/// drawn latency has passed.
pub struct SimulatedDevice {
    latency: FlushLatency,
    rng: SmallRng,
    flushes: u64,
}

impl SimulatedDevice {
    /// A simulated device whose flushes take `latency`, with its random draws
    /// seeded afresh ([`pglocks_sync::entropy::fresh_seed`]: the clock's).
    pub fn new(latency: FlushLatency) -> Self {
        Self::with_seed(latency, pglocks_sync::entropy::fresh_seed())
    }

    /// A simulated device with a fixed seed for its draws (repeatable runs).
    pub fn with_seed(latency: FlushLatency, seed: u64) -> Self {
        SimulatedDevice {
            latency,
            rng: SmallRng::seed_from_u64(seed),
            flushes: 0,
        }
    }

    /// The latency of a flush.
    pub fn latency(&self) -> FlushLatency {
        self.latency
    }

    /// How many times [`flush`](FlushDevice::flush) has been called.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }
}

impl fmt::Debug for SimulatedDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatedDevice")
            .field("latency", &self.latency.to_string())
            .field("flushes", &self.flushes)
            .finish()
    }
}

impl FlushDevice for SimulatedDevice {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn flush(&mut self, _upto: u64) -> Result<(), DeviceError> {
        self.flushes += 1;
        if self.latency.is_zero() {
            return Ok(());
        }
        let start = Instant::now();
        let draw = self.latency.draw(&mut self.rng);
        sleep_until(start + draw);
        Ok(())
    }
}

/// Sleeps until `deadline`; returns at once, without any system call, if it
/// has passed.
fn sleep_until(deadline: Instant) {
    let mut now = Instant::now();
    if now >= deadline {
        return;
    }
    reduce_timer_slack_once();
    while now < deadline {
        pglocks_sync::time::sleep(deadline - now);
        now = Instant::now();
    }
}

#[cfg(target_os = "linux")]
thread_local! {
    /// Whether this thread's timer slack has been set to 1 ns.
    static TIMER_SLACK_REDUCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets the calling thread's timer slack to 1 ns, once per thread (see
/// [`SimulatedDevice`]). Best effort: a failure leaves the default slack.
fn reduce_timer_slack_once() {
    #[cfg(target_os = "linux")]
    TIMER_SLACK_REDUCED.with(|done| {
        if !done.get() {
            done.set(true);
            // SAFETY: PR_SET_TIMERSLACK reads only its integer argument
            // (passed as the unsigned long the kernel expects; the unused
            // arguments are zero) and changes nothing but the calling thread's
            // timer slack; no memory is passed to the kernel.
            unsafe {
                libc::prctl(
                    libc::PR_SET_TIMERSLACK,
                    1 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use pglocks_sync::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn parse(s: &str) -> FlushLatency {
        s.parse()
            .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    #[test]
    fn simulated_flush_sleeps_at_least_the_latency() {
        let mut dev = SimulatedDevice::new(parse("2ms"));
        assert_eq!(dev.name(), "simulated");
        assert!(!dev.wants_bytes());
        dev.write(0, &[0u8; 8192]).unwrap();
        for i in 1..=5u64 {
            let start = Instant::now();
            dev.flush(i * 8192).unwrap();
            assert!(start.elapsed() >= ms(2));
        }
        let mut dev = SimulatedDevice::with_seed(parse("1ms..3ms"), 42);
        for _ in 0..5 {
            let start = Instant::now();
            dev.flush(0).unwrap();
            assert!(start.elapsed() >= ms(1));
        }
        assert_eq!(dev.flushes(), 5);
    }

    #[test]
    fn zero_latency_returns_without_sleeping() {
        std::thread::spawn(|| {
            let mut dev = SimulatedDevice::new(parse("0"));
            for _ in 0..1000 {
                dev.flush(0).unwrap();
            }
            assert_eq!(dev.flushes(), 1000);
            // It never went to sleep, so it never touched the timer slack.
            #[cfg(target_os = "linux")]
            assert!(!TIMER_SLACK_REDUCED.with(|d| d.get()));
        })
        .join()
        .unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sleeping_sets_this_threads_timer_slack_once() {
        std::thread::spawn(|| {
            let mut dev = SimulatedDevice::new(parse("10us"));
            dev.flush(0).unwrap();
            assert!(TIMER_SLACK_REDUCED.with(|d| d.get()));
            // SAFETY: PR_GET_TIMERSLACK takes no pointer and only returns the
            // calling thread's timer slack.
            let slack = unsafe {
                libc::prctl(
                    libc::PR_GET_TIMERSLACK,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                )
            };
            assert_eq!(slack, 1);
        })
        .join()
        .unwrap();
    }
}
