//! Turning the command line's strings into values: thread lists, durations, lists, the
//! placement policy. Each malformed string is a [`CliError::Usage`] naming the flag and giving
//! examples of what it takes.

use super::CliError;
use pglocks_harness::{HarnessError, PinPolicy, Topology};
use std::path::Path;
use std::time::Duration;

/// Parses a thread-count list: comma-separated items, each `N`, `A..B` (every count from A to
/// B), `A..B:xF` (A, A·F, A·F², … up to B) or `A..B:+S` (steps of S).
pub fn parse_threads(s: &str) -> Result<Vec<usize>, CliError> {
    let bad = |why: &str| {
        CliError::Usage(format!(
            "bad --threads '{s}': {why} (examples: 1,2,4 or 1..64 or 1..64:x2 or 2..16:+2)"
        ))
    };
    let num = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| bad(&format!("'{t}' is not a number")))
    };
    let mut out = Vec::new();
    for item in s.split(',') {
        if out.len() > MAX_POINTS {
            return Err(bad(TOO_MANY));
        }
        let item = item.trim();
        let Some((a, rest)) = item.split_once("..") else {
            out.push(num(item)?);
            continue;
        };
        let (b, step) = rest.split_once(':').unwrap_or((rest, "+1"));
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(bad(&format!("range {a}..{b} runs backwards")));
        }
        // Checked before expanding, so that no range can make a huge list (or overflow).
        if b > MAX_THREADS {
            return Err(bad(TOO_MANY));
        }
        let mut t = a;
        if let Some(f) = step.strip_prefix('x') {
            let f = num(f)?;
            if f < 2 || a == 0 {
                return Err(bad(
                    "a doubling range needs a factor of at least 2 and a start of at least 1",
                ));
            }
            while t <= b {
                out.push(t);
                t = t.saturating_mul(f);
            }
        } else if let Some(d) = step.strip_prefix('+') {
            let d = num(d)?;
            if d == 0 {
                return Err(bad("a step of 0"));
            }
            while t <= b && out.len() <= MAX_POINTS {
                out.push(t);
                t = t.saturating_add(d);
            }
        } else {
            return Err(bad(&format!("step '{step}' must be xF or +S")));
        }
    }
    if out.contains(&0) {
        return Err(bad("zero threads"));
    }
    if out.len() > MAX_POINTS || out.iter().any(|&t| t > MAX_THREADS) {
        return Err(bad(TOO_MANY));
    }
    Ok(out)
}

/// The most threads one point of `--threads` may have.
const MAX_THREADS: usize = 65_536;
/// The most points `--threads` may list.
const MAX_POINTS: usize = 4096;
const TOO_MANY: &str = "more than 65536 threads or 4096 points";

/// The longest `--duration`, `--warmup` or `--hang-after`: 30 days. A run keeps its memory
/// bounded however long it is (the timeline is downsampled), so this only keeps the arithmetic
/// of times far from its limits.
pub const MAX_FLAG_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Parses a duration such as `2s`, `500ms` or `1m`, in the syntax of the knobs
/// (`pglocks_sync::time::parse_duration`), at most [`MAX_FLAG_DURATION`].
pub fn parse_duration(flag: &str, s: &str) -> Result<Duration, CliError> {
    let d = pglocks_sync::time::parse_duration(s)
        .map_err(|e| CliError::Usage(format!("bad {flag} '{s}': {e} (examples: 2s, 500ms, 1m)")))?;
    if d > MAX_FLAG_DURATION {
        return Err(CliError::Usage(format!(
            "bad {flag} '{s}': at most 30 days (720h)"
        )));
    }
    Ok(d)
}

/// A comma-separated list, its items trimmed, empty ones dropped.
pub(crate) fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

/// `--pin`: compact, scatter, node:N or none.
pub(crate) fn pin_policy(s: &str) -> Result<PinPolicy, CliError> {
    s.parse::<PinPolicy>()
        .map_err(|e| CliError::Harness(e.into()))
}

/// This machine's topology, or the one a sysfs tree (`--sysfs-root`) describes.
pub(crate) fn detect(sysfs_root: Option<&Path>) -> Result<Topology, CliError> {
    Ok(match sysfs_root {
        Some(root) => Topology::from_sysfs(root).map_err(HarnessError::from)?,
        None => Topology::detect().map_err(HarnessError::from)?,
    })
}

/// An optional duration flag.
pub(crate) fn parse_optional_duration(
    flag: &str,
    s: Option<&str>,
) -> Result<Option<Duration>, CliError> {
    s.map(|s| parse_duration(flag, s)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lists() {
        assert_eq!(parse_threads("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_threads("1..4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(
            parse_threads("1..64:x2").unwrap(),
            vec![1, 2, 4, 8, 16, 32, 64]
        );
        assert_eq!(parse_threads("2..8:+3,16").unwrap(), vec![2, 5, 8, 16]);
        for bad in [
            "0", "1,,2", "4..1", "1..8:x1", "a", "1..8:y2", "0..4:x2", "1..3:+0",
        ] {
            let e = parse_threads(bad).unwrap_err().to_string();
            assert!(e.contains("bad --threads"), "{bad}: {e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("--duration", "500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            parse_duration("--duration", "2s").unwrap(),
            Duration::from_secs(2)
        );
        assert!(parse_duration("--duration", "2 parsecs").is_err());
    }
}
