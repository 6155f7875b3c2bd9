//! Virtual time and its unit: every clock, cost and latency in the simulator is a whole number of
//! picoseconds, a [`Picos`].
//!
//! Integers, so that the order of events never depends on floating-point rounding and a run
//! repeats exactly; picoseconds, so that the profiles' costs (a hit is one to a few cycles, a
//! fraction of a nanosecond apart between machines) and the fractions the cost model scales them
//! by (an SMT sibling's slowdown, the jitter, a line's occupancy, in 1/1024ths) keep their
//! precision. A `u64` of picoseconds lasts 213 days of virtual time, far beyond any run; the
//! conversion from a [`Duration`] saturates at half that, so that a clock plus such a span stays
//! in range.
//!
//! `Picos` has the arithmetic the engine and the cost model use (sums, differences, and scaling by
//! an integer factor) and nothing else, so a clock cannot be mixed with a count by mistake.

use std::ops::{Add, AddAssign, Div, Mul, Sub};
use std::time::Duration;

/// Picoseconds per nanosecond.
pub const PS_PER_NS: u64 = 1000;

/// A span or a point of virtual time, in picoseconds (a point counts from the simulation's
/// start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Picos(pub u64);

impl Picos {
    /// No time: the start of a simulation.
    pub const ZERO: Picos = Picos(0);
    /// Never: later than any event.
    pub const MAX: Picos = Picos(u64::MAX);

    /// `d` (saturating far beyond any simulated run).
    #[inline]
    pub fn from_duration(d: Duration) -> Picos {
        Picos(d.as_nanos().min(u128::from(u64::MAX) / 2000) as u64 * PS_PER_NS)
    }

    /// `ns` nanoseconds, rounded to the nearest picosecond (a negative figure is none).
    #[inline]
    pub fn from_ns_f64(ns: f64) -> Picos {
        Picos((ns * PS_PER_NS as f64).round() as u64)
    }

    /// As a [`Duration`], truncated to whole nanoseconds.
    #[inline]
    pub fn to_duration(self) -> Duration {
        Duration::from_nanos(self.0 / PS_PER_NS)
    }

    /// Whole milliseconds.
    #[inline]
    pub fn whole_millis(self) -> u64 {
        self.0 / PS_PER_NS / 1_000_000
    }

    /// Microseconds.
    #[inline]
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// `self - other`, or none if `other` is later.
    #[inline]
    pub fn saturating_sub(self, other: Picos) -> Picos {
        Picos(self.0.saturating_sub(other.0))
    }
}

impl Add for Picos {
    type Output = Picos;
    #[inline]
    fn add(self, other: Picos) -> Picos {
        Picos(self.0 + other.0)
    }
}

impl AddAssign for Picos {
    #[inline]
    fn add_assign(&mut self, other: Picos) {
        self.0 += other.0;
    }
}

impl Sub for Picos {
    type Output = Picos;
    #[inline]
    fn sub(self, other: Picos) -> Picos {
        Picos(self.0 - other.0)
    }
}

/// Scaling up by an integer factor (a count, or a numerator of 1024ths).
impl Mul<u64> for Picos {
    type Output = Picos;
    #[inline]
    fn mul(self, k: u64) -> Picos {
        Picos(self.0 * k)
    }
}

/// Scaling down by an integer divisor, rounding down.
impl Div<u64> for Picos {
    type Output = Picos;
    #[inline]
    fn div(self, k: u64) -> Picos {
        Picos(self.0 / k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_keep_whole_nanoseconds_and_saturate() {
        let d = Duration::from_nanos(1_234_567);
        assert_eq!(Picos::from_duration(d), Picos(1_234_567_000));
        assert_eq!(Picos(1_234_567_999).to_duration(), d);
        assert_eq!(Picos(2_999_999_999_999).whole_millis(), 2_999);
        assert_eq!(Picos(1_500_000).as_micros_f64(), 1.5);
        assert_eq!(Picos::from_ns_f64(0.6), Picos(600));
        assert_eq!(Picos::from_ns_f64(2.0004), Picos(2_000));
        assert_eq!(Picos::from_ns_f64(-3.0), Picos::ZERO);
        // Far beyond any run, but no overflow: u64::MAX / 2 ps, about 106 days.
        let far = Picos::from_duration(Duration::MAX);
        assert_eq!(far, Picos(u64::MAX / 2000 * 1000));
        assert!(far < Picos::MAX);
    }

    #[test]
    fn scaling_rounds_down_as_integer_arithmetic_does() {
        let cost = Picos(1001);
        assert_eq!(cost * 3 / 1024, Picos(2));
        assert_eq!(cost / 2, Picos(500));
        assert_eq!(cost + Picos(9) - Picos(10), Picos(1000));
        assert_eq!(Picos(5).saturating_sub(Picos(7)), Picos::ZERO);
    }
}
