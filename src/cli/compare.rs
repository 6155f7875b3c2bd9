//! `pglocks compare A B`: two saved runs side by side (two machines, two commits, a patch and
//! its base), every point they share with both throughputs and the ratio B/A, largest change
//! first, a verdict per series and what only one of them has (the harness's
//! [`compare`](pglocks_harness::compare) module does the work).
//!
//! Exit status, for scripts: 0; 1 with `--fail-if-slower P%` when some shared point of B is more
//! than P % slower than A's, or when the two share no point to judge; 2 for a missing or
//! unreadable report or a bad percentage.

use super::CliError;
use clap::Args;
use pglocks_harness::compare::{self, Comparison};
use pglocks_harness::Format;
use std::path::PathBuf;

/// `pglocks compare`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// The base: a saved report directory (`--out DIR`, or the default run's under
    /// target/pglocks/) or its report.json.
    a: PathBuf,
    /// The report judged against it.
    b: PathBuf,
    /// Output format: table, json, csv or markdown.
    #[arg(long, default_value = "table")]
    format: String,
    /// Exit with status 1 when some point both reports measured is more than this much slower in
    /// B than in A (`5%` or `5`).
    #[arg(long, value_name = "PERCENT")]
    fail_if_slower: Option<String>,
    /// A series whose every point changed by at most this much either way is "the same".
    #[arg(long, value_name = "PERCENT", default_value = "3%")]
    noise: String,
}

/// Reads a percentage, `5%` or `5` (at least 0, below 100), as a fraction: 0.05.
pub(crate) fn parse_percent(flag: &str, s: &str) -> Result<f64, CliError> {
    let number = s.trim().strip_suffix('%').unwrap_or(s.trim()).trim();
    match number.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(CliError::Usage(format!(
            "bad {flag} '{s}': a percentage from 0 to below 100 (examples: 5%, 2.5)"
        ))),
    }
}

/// Runs `pglocks compare`.
pub(crate) fn compare(args: &CompareArgs) -> Result<(), CliError> {
    let format: Format = args.format.parse()?;
    let noise = parse_percent("--noise", &args.noise)?;
    let fail_if_slower = args
        .fail_if_slower
        .as_deref()
        .map(|p| parse_percent("--fail-if-slower", p))
        .transpose()?;
    let a = compare::load(&args.a)?;
    let b = compare::load(&args.b)?;
    let c = Comparison::new(
        &a,
        &args.a.display().to_string(),
        &b,
        &args.b.display().to_string(),
        noise,
    );
    print!("{}", compare::render(&c, format)?);
    let Some(fraction) = fail_if_slower else {
        return Ok(());
    };
    if c.points.is_empty() {
        return Err(CliError::Slower(
            "A and B share no point (workload, preset, impl and thread count): nothing to judge"
                .into(),
        ));
    }
    let slower = c.slower_than(fraction);
    // The points are sorted largest change first, so the first slower one is the worst.
    let Some(worst) = slower.first() else {
        return Ok(());
    };
    Err(CliError::Slower(format!(
        "B is slower: {} of the {} shared points lost more than {}% (worst: {} {}/{} at {} \
         thread{}, {:.1}%)",
        slower.len(),
        c.points.len(),
        (fraction * 1e4).round() / 1e2,
        worst.workload,
        worst.preset,
        worst.impl_name,
        worst.threads,
        if worst.threads == 1 { "" } else { "s" },
        (worst.ratio.unwrap_or(1.0) - 1.0) * 100.0
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pglocks_harness::compare::DEFAULT_NOISE;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("--x", "5%").unwrap(), 0.05);
        assert_eq!(parse_percent("--x", "5").unwrap(), 0.05);
        assert_eq!(parse_percent("--x", " 2.5 % ").unwrap(), 0.025);
        assert_eq!(parse_percent("--x", "0%").unwrap(), 0.0);
        assert_eq!(DEFAULT_NOISE, parse_percent("--x", "3%").unwrap());
        for bad in ["", "%", "-5%", "100%", "five", "NaN", "inf", "5%%"] {
            let e = parse_percent("--fail-if-slower", bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("bad --fail-if-slower"), "{bad}: {e}");
        }
    }
}
