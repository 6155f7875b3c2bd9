//! Which tables a command prints, the same for `run`, `report` and the default run: the main
//! table, then with `--show waits,metrics` (or `--verbose`) the wait events and the metrics,
//! which for a sweep of the macro workloads run to hundreds of rows. The report directory's
//! `index.html` always has them, and `--format json` and `csv` always hold everything; a table
//! or Markdown rendering that leaves a table out says so on stderr, with the flag that shows it.

use super::CliError;
use clap::{Args, ValueEnum};
use pglocks_harness::{self as harness, Format, Report, Show};

/// A table after the main one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Extra {
    /// Wait events and `LWLOCK_STATS` counters per point.
    Waits,
    /// The workloads' own counters and distributions per point.
    Metrics,
    /// Both.
    All,
}

/// `--show` and `--verbose`.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ShowArgs {
    /// Also print these tables after the main one, comma-separated: waits (wait events and
    /// LWLOCK_STATS counters), metrics (the workload's own counters), all.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "TABLES")]
    show: Vec<Extra>,
    /// Print every table (the same as --show all).
    #[arg(long, short = 'v')]
    verbose: bool,
}

impl ShowArgs {
    /// The tables asked for.
    pub(crate) fn show(&self) -> Show {
        let all = self.verbose || self.show.contains(&Extra::All);
        Show {
            waits: all || self.show.contains(&Extra::Waits),
            metrics: all || self.show.contains(&Extra::Metrics),
        }
    }

    /// Whether more than the main table was asked for.
    pub(crate) fn any(&self) -> bool {
        self.show() != Show::MAIN
    }
}

/// Prints `report` in `format` on stdout with the tables `args` asks for, and on stderr which
/// tables a table or Markdown rendering left out.
pub(crate) fn print(report: &Report, format: Format, args: &ShowArgs) -> Result<(), CliError> {
    let show = args.show();
    print!("{}", harness::render_with(report, format, show)?);
    if matches!(format, Format::Table | Format::Markdown) {
        if let Some(hint) = hint(report, show) {
            eprintln!("{hint}");
        }
    }
    Ok(())
}

/// The line that names the tables left out and the flag that prints them.
pub(crate) fn hint(report: &Report, show: Show) -> Option<String> {
    let hidden = show.hidden(report);
    (!hidden.is_empty()).then(|| {
        format!(
            "not shown: the {} table{}; --show {} (or --verbose) prints {}",
            hidden.join(" and "),
            if hidden.len() > 1 { "s" } else { "" },
            hidden.join(","),
            if hidden.len() > 1 { "them" } else { "it" },
        )
    })
}
