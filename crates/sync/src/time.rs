//! Time: `Instant`, the sleeps that PostgreSQL takes (`pg_usleep` in s_lock, `deadlock_timeout`,
//! simulated flush latency), and the one duration syntax every setting is written in.
//!
//! Under loom a sleep is a yield: loom has no clock, and what a sleep means to an algorithm is
//! "let the others run".
//!
//! # Duration syntax
//!
//! [`parse_duration`] reads, and [`format_duration`] writes, the syntax of every duration a
//! user gives pglocks (the `--set` knobs such as `flush_latency=2ms` or `read_latency=10us`):
//!
//! ```text
//! duration = number [ spaces ] unit
//!          | number                      (only when its value is zero: "0", "0.0")
//! number   = digits [ "." digits ]       (decimal; no sign, no exponent, no grouping)
//! unit     = "ns" | "us" | "µs" | "ms" | "s" | "m" | "min" | "h"
//! ```
//!
//! Leading and trailing white space is ignored. `m` and `min` are minutes (as humantime,
//! systemd and the command line's `--duration 1m` read them; milliseconds are `ms`). A value
//! must be a whole number of nanoseconds (`1.5ns` is an error, `1.5us` is 1500 ns) and at most
//! `u64::MAX` nanoseconds (about 584 years); anything else is a [`DurationError`], never a
//! panic. Units are single: `1m30s` is not accepted (write `90s`).

pub use std::time::Duration;

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in time: std's `Instant`, except that on a simulated CPU [`Instant::now`] reads the
/// CPU's virtual clock (the simulation's start plus the virtual time), so that what a model
/// times there is virtual time. Everything else is std's arithmetic on the inner value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(std::time::Instant);

impl Instant {
    /// Now: the host's monotonic clock, or a simulated CPU's virtual clock.
    #[inline]
    pub fn now() -> Instant {
        #[cfg(not(loom))]
        if pglocks_sim::hook::active() {
            return Instant(pglocks_sim::hook::now());
        }
        Instant(std::time::Instant::now())
    }

    /// The time since `self`.
    #[inline]
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// The time from `earlier` to `self` (zero if `earlier` is later).
    #[inline]
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }

    /// The time from `earlier` to `self`, or `None` if `earlier` is later.
    #[inline]
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.0.checked_duration_since(earlier.0)
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    #[inline]
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }

    /// `self + d`, or `None` on overflow.
    #[inline]
    pub fn checked_add(&self, d: Duration) -> Option<Instant> {
        self.0.checked_add(d).map(Instant)
    }

    /// `self - d`, or `None` on overflow.
    #[inline]
    pub fn checked_sub(&self, d: Duration) -> Option<Instant> {
        self.0.checked_sub(d).map(Instant)
    }

    /// The std `Instant` this is.
    #[inline]
    pub fn into_std(self) -> std::time::Instant {
        self.0
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

impl AddAssign<Duration> for Instant {
    #[inline]
    fn add_assign(&mut self, d: Duration) {
        self.0 += d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0 - d)
    }
}

impl SubAssign<Duration> for Instant {
    #[inline]
    fn sub_assign(&mut self, d: Duration) {
        self.0 -= d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    #[inline]
    fn sub(self, earlier: Instant) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }
}

/// Sleeps for `d` (PostgreSQL's `pg_usleep`): the host's sleep, a timer in virtual time on a
/// simulated CPU; under loom, a yield.
#[inline]
pub fn sleep(d: Duration) {
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    if pglocks_sim::hook::active() {
        pglocks_sim::hook::sleep(d);
    } else {
        std::thread::sleep(d);
    }
}

/// The units [`parse_duration`] accepts, with their length in nanoseconds.
const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// The list of units for error messages.
const UNIT_LIST: &str = "ns, us, µs, ms, s, m, min or h";

/// Why a text is not a duration (see the [duration syntax](crate::time#duration-syntax)). Each
/// variant but [`Empty`](DurationError::Empty) holds the text as it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Nothing but white space.
    #[error("empty duration: expected a number and a unit, such as 500us or 2s, or 0")]
    Empty,
    /// The number is malformed: missing, signed, with an exponent, or a `.` without digits on
    /// both sides.
    #[error(
        "invalid duration '{0}': expected a number and a unit, such as 500us, 1.5ms or 2s, or 0"
    )]
    Number(String),
    /// A number other than zero without a unit.
    #[error("invalid duration '{0}': a unit is needed ({UNIT_LIST}); only 0 may go without one")]
    MissingUnit(String),
    /// A unit that is not one of `ns`, `us`, `µs`, `ms`, `s`, `m`, `min`, `h`.
    #[error("invalid duration '{input}': unknown unit '{unit}' (expected {UNIT_LIST})")]
    Unit {
        /// The text.
        input: String,
        /// The unit it names.
        unit: String,
    },
    /// A value that is not a whole number of nanoseconds (`0.5ns`, `1.0000000001s`).
    #[error("invalid duration '{0}': finer than a nanosecond")]
    TooFine(String),
    /// A value longer than `u64::MAX` nanoseconds (about 584 years).
    #[error("invalid duration '{0}': longer than 18446744073709551615ns (about 584 years)")]
    Overflow(String),
}

/// Parses a duration written in the [duration syntax](crate::time#duration-syntax): a decimal number
/// and a unit (`250ns`, `500us`, `500µs`, `1.5ms`, `2s`, `1m`, `5min`, `1h`), or a bare zero.
///
/// Exact to the nanosecond: a fraction finer than that, or a value beyond `u64::MAX`
/// nanoseconds, is an error.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(number_end);
    let unit = unit.trim_start();
    let malformed = || DurationError::Number(text.to_string());
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || (number.contains('.') && !digits(frac)) {
        return Err(malformed());
    }
    if unit.is_empty() {
        // Only zero may go without a unit.
        return if number.bytes().all(|b| b == b'0' || b == b'.') {
            Ok(Duration::ZERO)
        } else {
            Err(DurationError::MissingUnit(text.to_string()))
        };
    }
    let Some(&(_, unit_ns)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(DurationError::Unit {
            input: text.to_string(),
            unit: unit.to_string(),
        });
    };
    let overflow = || DurationError::Overflow(text.to_string());
    let too_fine = || DurationError::TooFine(text.to_string());
    // Leading zeros do not change the value, and would overflow `u64` needlessly.
    let int = int.trim_start_matches('0');
    let whole: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| overflow())?
    };
    let mut nanos = whole.checked_mul(unit_ns).ok_or_else(overflow)?;
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        // A whole number of nanoseconds has at most 13 significant decimals in any unit up to
        // an hour (1 h = 36·10¹¹ ns); more are finer than a nanosecond, and 18 fit a u64.
        if frac.len() > 18 {
            return Err(too_fine());
        }
        let digits: u128 = frac.parse().map_err(|_| malformed())?;
        let scale = 10u128.pow(frac.len() as u32);
        let scaled = digits * u128::from(unit_ns);
        if scaled % scale != 0 {
            return Err(too_fine());
        }
        let part = u64::try_from(scaled / scale).map_err(|_| overflow())?;
        nanos = nanos.checked_add(part).ok_or_else(overflow)?;
    }
    Ok(Duration::from_nanos(nanos))
}

/// Writes `d` in the [duration syntax](crate::time#duration-syntax), so that [`parse_duration`] reads
/// it back exactly: in the largest of `s`, `ms`, `us` and `ns` not above it, with an exact
/// decimal fraction when it is not whole (`2ms`, `250us`, `1.5ms`, `1.000001ms`, `90s`), and
/// zero as `0`.
///
/// A duration beyond `u64::MAX` nanoseconds is written the same way, though
/// [`parse_duration`] refuses it.
pub fn format_duration(d: Duration) -> FormattedDuration {
    FormattedDuration(d)
}

/// A [`Duration`] shown in the duration syntax: what [`format_duration`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormattedDuration(Duration);

impl fmt::Display for FormattedDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0");
        }
        let (unit, name, digits) = if nanos >= 1_000_000_000 {
            (1_000_000_000u128, "s", 9usize)
        } else if nanos >= 1_000_000 {
            (1_000_000, "ms", 6)
        } else if nanos >= 1_000 {
            (1_000, "us", 3)
        } else {
            (1, "ns", 0)
        };
        let whole = nanos / unit;
        let frac = nanos % unit;
        if frac == 0 {
            write!(f, "{whole}{name}")
        } else {
            let frac = format!("{frac:0digits$}");
            write!(f, "{whole}.{}{name}", frac.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(s: &str) -> Duration {
        parse_duration(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    const NS: fn(u64) -> Duration = Duration::from_nanos;

    #[test]
    fn every_unit() {
        assert_eq!(ok("250ns"), NS(250));
        assert_eq!(ok("500us"), Duration::from_micros(500));
        assert_eq!(ok("500µs"), Duration::from_micros(500));
        assert_eq!(ok("2ms"), Duration::from_millis(2));
        assert_eq!(ok("2s"), Duration::from_secs(2));
        assert_eq!(ok("1m"), Duration::from_secs(60));
        assert_eq!(ok("5min"), Duration::from_secs(300));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
    }

    #[test]
    fn decimals_spaces_and_zero() {
        assert_eq!(ok("1.5ms"), NS(1_500_000));
        assert_eq!(ok("1.000001ms"), NS(1_000_001));
        assert_eq!(ok("1.500us"), NS(1_500));
        assert_eq!(ok("0.5s"), Duration::from_millis(500));
        assert_eq!(ok("1.5m"), Duration::from_secs(90));
        assert_eq!(ok("0.25h"), Duration::from_secs(900));
        assert_eq!(ok("0.00000000001h"), NS(36));
        assert_eq!(ok("0.0000000000025h"), NS(9));
        assert_eq!(ok("1.999999999s"), NS(1_999_999_999));
        assert_eq!(ok(" 2ms "), Duration::from_millis(2));
        assert_eq!(ok("2 ms"), Duration::from_millis(2));
        assert_eq!(ok("007ms"), Duration::from_millis(7));
        for zero in ["0", "00", "0.0", "0ns", "0ms", "0.000s", " 0 ", "0h"] {
            assert_eq!(ok(zero), Duration::ZERO, "{zero:?}");
        }
    }

    #[test]
    fn the_largest_duration_and_one_past_it() {
        let max = Duration::from_nanos(u64::MAX);
        assert_eq!(ok("18446744073709551615ns"), max);
        assert_eq!(ok("18446744073.709551615s"), max);
        for over in [
            "18446744073709551616ns",
            "18446744073.709551616s",
            "18446744074s",
            "20000000000s",
            "99999999999999999999s",
            "99999999999999999999999999999999999999999ns",
            "5124096h",
            "307445735m",
        ] {
            assert_eq!(
                parse_duration(over),
                Err(DurationError::Overflow(over.to_string())),
                "{over:?}"
            );
        }
        // Leading zeros are not an overflow.
        assert_eq!(ok("000000000000000000000000001s"), Duration::from_secs(1));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        use DurationError::*;
        let err = |s: &str| parse_duration(s).unwrap_err();
        assert_eq!(err(""), Empty);
        assert_eq!(err("  "), Empty);
        for bad in [
            "ms", "-1ms", "+1ms", "1.ms", ".5ms", "1.5.2ms", "1..2ms", ".",
        ] {
            assert_eq!(err(bad), Number(bad.to_string()), "{bad:?}");
        }
        for bad in ["2", "1.5", "10", " 3 "] {
            assert_eq!(err(bad), MissingUnit(bad.to_string()), "{bad:?}");
        }
        for (bad, unit) in [
            ("2 parsecs", "parsecs"),
            ("2msec", "msec"),
            ("1e3ms", "e3ms"),
            ("1m30s", "m30s"),
            ("1 h 30 m", "h 30 m"),
            ("2MS", "MS"),
            ("1d", "d"),
            ("1ms..3ms", "ms..3ms"),
            ("1,5ms", ",5ms"),
        ] {
            assert_eq!(
                err(bad),
                Unit {
                    input: bad.to_string(),
                    unit: unit.to_string()
                },
                "{bad:?}"
            );
        }
        for bad in [
            "0.5ns",
            "1.0000000001s",
            "0.0000000000001h",
            "1.0000000000000000000000001ms",
        ] {
            assert_eq!(err(bad), TooFine(bad.to_string()), "{bad:?}");
        }
    }

    #[test]
    fn error_messages() {
        let msg = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert_eq!(
            msg("fast"),
            "invalid duration 'fast': expected a number and a unit, such as 500us, 1.5ms or 2s, or 0"
        );
        assert_eq!(
            msg("2"),
            "invalid duration '2': a unit is needed (ns, us, µs, ms, s, m, min or h); only 0 may go without one"
        );
        assert_eq!(
            msg("2 parsecs"),
            "invalid duration '2 parsecs': unknown unit 'parsecs' (expected ns, us, µs, ms, s, m, min or h)"
        );
        assert_eq!(
            msg("0.5ns"),
            "invalid duration '0.5ns': finer than a nanosecond"
        );
        assert!(msg("20000000000s").contains("about 584 years"));
    }

    #[test]
    fn format_in_whole_or_exact_units() {
        for (d, shown) in [
            (Duration::ZERO, "0"),
            (NS(1), "1ns"),
            (NS(999), "999ns"),
            (NS(1_000), "1us"),
            (NS(1_500), "1.5us"),
            (Duration::from_micros(250), "250us"),
            (Duration::from_millis(1), "1ms"),
            (NS(1_500_000), "1.5ms"),
            (NS(1_000_001), "1.000001ms"),
            (Duration::from_millis(2000), "2s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(3600), "3600s"),
            (NS(u64::MAX), "18446744073.709551615s"),
        ] {
            assert_eq!(format_duration(d).to_string(), shown, "{d:?}");
        }
    }

    proptest! {
        #[test]
        fn formatted_durations_read_back(nanos in any::<u64>()) {
            let d = Duration::from_nanos(nanos);
            prop_assert_eq!(parse_duration(&format_duration(d).to_string()), Ok(d));
        }

        #[test]
        fn whole_units_read_back(n in 0u64..1_000_000, unit in 0usize..UNITS.len()) {
            let (name, ns) = UNITS[unit];
            prop_assert_eq!(parse_duration(&format!("{n}{name}")), Ok(Duration::from_nanos(n * ns)));
        }

        #[test]
        fn any_text_is_a_duration_or_an_error(text in "[0-9.a-zµ +-]{0,24}|\\PC{0,24}") {
            let _ = parse_duration(&text);
        }
    }
}
