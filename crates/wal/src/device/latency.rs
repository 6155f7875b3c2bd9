//! [`FlushLatency`]: how long one flush of a [`SimulatedDevice`](super::SimulatedDevice) takes
//! (the wait in `issue_xlog_fsync` of xlog.c, as a distribution), and its syntax: one duration
//! such as `2ms` (the shim's duration syntax, [`pglocks_sync::time::parse_duration`]), or a
//! range `1ms..3ms`, which is this type's own.

use std::fmt;
use std::str::FromStr;

use pglocks_sync::time::{format_duration, parse_duration, Duration};
use rand::rngs::SmallRng;
use rand::RngExt;

use super::DeviceError;

/// How long one flush of a [`SimulatedDevice`](super::SimulatedDevice) takes.
///
/// Written and parsed as one duration in the duration syntax of
/// [`pglocks_sync::time::parse_duration`] (`2ms`, `500us` or `500µs`, `1.5ms`,
/// `250ns`, `1s`, `0` for no wait), or as `lo..hi` such as `1ms..3ms` for a
/// uniform draw between the two bounds (inclusive, at nanosecond resolution).
/// Shown with [`pglocks_sync::time::format_duration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushLatency {
    /// Every flush takes this long.
    Fixed(Duration),
    /// Each flush takes a duration drawn uniformly from `lo..=hi`.
    Uniform {
        /// The shortest flush.
        lo: Duration,
        /// The longest flush.
        hi: Duration,
    },
}

impl FlushLatency {
    /// The mean flush time.
    pub fn mean(&self) -> Duration {
        match *self {
            FlushLatency::Fixed(d) => d,
            FlushLatency::Uniform { lo, hi } => lo + hi.saturating_sub(lo) / 2,
        }
    }

    /// True when every flush takes no time (then no flush sleeps).
    pub fn is_zero(&self) -> bool {
        match *self {
            FlushLatency::Fixed(d) => d.is_zero(),
            FlushLatency::Uniform { lo, hi } => lo.is_zero() && hi.is_zero(),
        }
    }

    /// One flush time drawn from this distribution.
    pub(super) fn draw(&self, rng: &mut SmallRng) -> Duration {
        match *self {
            FlushLatency::Fixed(d) => d,
            FlushLatency::Uniform { lo, hi } => {
                let span = u64::try_from(hi.saturating_sub(lo).as_nanos()).unwrap_or(u64::MAX);
                if span == 0 {
                    lo
                } else {
                    lo + Duration::from_nanos(rng.random_range(0..=span))
                }
            }
        }
    }
}

impl FromStr for FlushLatency {
    type Err = DeviceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DeviceError::InvalidLatency(s.to_string());
        match s.split_once("..") {
            Some((lo, hi)) => {
                let lo = parse_duration(lo).map_err(|_| bad())?;
                let hi = parse_duration(hi).map_err(|_| bad())?;
                if lo > hi {
                    return Err(bad());
                }
                Ok(FlushLatency::Uniform { lo, hi })
            }
            None => parse_duration(s)
                .map(FlushLatency::Fixed)
                .map_err(|_| bad()),
        }
    }
}

impl fmt::Display for FlushLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FlushLatency::Fixed(d) => write!(f, "{}", format_duration(d)),
            FlushLatency::Uniform { lo, hi } => {
                write!(f, "{}..{}", format_duration(lo), format_duration(hi))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn parse(s: &str) -> FlushLatency {
        s.parse()
            .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    #[test]
    fn latency_parses_good_inputs() {
        assert_eq!(parse("2ms"), FlushLatency::Fixed(ms(2)));
        assert_eq!(parse("500us"), FlushLatency::Fixed(us(500)));
        assert_eq!(parse("500µs"), FlushLatency::Fixed(us(500)));
        assert_eq!(parse("1.5ms"), FlushLatency::Fixed(us(1500)));
        assert_eq!(parse("0"), FlushLatency::Fixed(Duration::ZERO));
        assert_eq!(parse("0ms"), FlushLatency::Fixed(Duration::ZERO));
        assert_eq!(
            parse("250ns"),
            FlushLatency::Fixed(Duration::from_nanos(250))
        );
        assert_eq!(parse("2s"), FlushLatency::Fixed(Duration::from_secs(2)));
        assert_eq!(parse(" 2ms "), FlushLatency::Fixed(ms(2)));
        assert_eq!(
            parse("1.000001ms"),
            FlushLatency::Fixed(Duration::from_nanos(1_000_001))
        );
        // The shim's longer units too.
        assert_eq!(parse("1m"), FlushLatency::Fixed(Duration::from_secs(60)));
        assert_eq!(
            parse("1ms..0.5min"),
            FlushLatency::Uniform {
                lo: ms(1),
                hi: Duration::from_secs(30)
            }
        );
        assert_eq!(
            parse("1ms..3ms"),
            FlushLatency::Uniform {
                lo: ms(1),
                hi: ms(3)
            }
        );
        assert_eq!(
            parse("0..500us"),
            FlushLatency::Uniform {
                lo: Duration::ZERO,
                hi: us(500)
            }
        );
        assert_eq!(
            parse("2ms..2ms"),
            FlushLatency::Uniform {
                lo: ms(2),
                hi: ms(2)
            }
        );
    }

    #[test]
    fn latency_rejects_bad_inputs() {
        for bad in [
            "",
            " ",
            "2",
            "1.5",
            "ms",
            "-1ms",
            "1.ms",
            ".5ms",
            "1.5.2ms",
            "3ms..1ms",
            "1ms..",
            "..1ms",
            "1ms..2ms..3ms",
            "2 parsecs",
            "2msec",
            "0.5ns",
            "1e3ms",
            "1,5ms",
            "99999999999999999999s",
            "20000000000s",
        ] {
            match bad.parse::<FlushLatency>() {
                Err(DeviceError::InvalidLatency(s)) => assert_eq!(s, bad),
                other => panic!("{bad:?} should be rejected, got {other:?}"),
            }
        }
        let err = "fast".parse::<FlushLatency>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid flush latency 'fast': expected e.g. 2ms, 500us, 1ms..3ms or 0"
        );
    }

    #[test]
    fn latency_display_round_trips() {
        for (input, shown) in [
            ("2ms", "2ms"),
            ("500us", "500us"),
            ("500µs", "500us"),
            ("1.5ms", "1.5ms"),
            ("1500us", "1.5ms"),
            ("0", "0"),
            ("0us", "0"),
            ("250ns", "250ns"),
            ("1.234567ms", "1.234567ms"),
            ("2000ms", "2s"),
            ("1.5s", "1.5s"),
            ("1ms..3ms", "1ms..3ms"),
            ("0..2.5ms", "0..2.5ms"),
        ] {
            let latency = parse(input);
            assert_eq!(latency.to_string(), shown, "display of {input:?}");
            assert_eq!(parse(shown), latency, "re-parse of {shown:?}");
        }
        for nanos in [
            1u64,
            999,
            1_001,
            999_999,
            1_000_001,
            123_456_789,
            987_654_321_012,
        ] {
            let latency = FlushLatency::Fixed(Duration::from_nanos(nanos));
            assert_eq!(parse(&latency.to_string()), latency);
        }
    }

    #[test]
    fn latency_mean() {
        assert_eq!(parse("2ms").mean(), ms(2));
        assert_eq!(parse("1ms..3ms").mean(), ms(2));
        assert_eq!(parse("0..1ms").mean(), us(500));
        assert_eq!(parse("0").mean(), Duration::ZERO);
        assert!(parse("0").is_zero());
        assert!(!parse("0..1us").is_zero());
    }

    #[test]
    fn uniform_draws_stay_within_bounds() {
        let latency = parse("1ms..3ms");
        let mut rng = SmallRng::seed_from_u64(7);
        let draws: Vec<Duration> = (0..1000).map(|_| latency.draw(&mut rng)).collect();
        assert!(draws.iter().all(|&d| d >= ms(1) && d <= ms(3)));
        // Not all equal: the draw is random.
        assert!(draws.iter().any(|&d| d != draws[0]));
    }
}
