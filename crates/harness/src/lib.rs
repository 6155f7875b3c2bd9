//! The measuring half of pglocks: machine topology and thread pinning, thread teams that run one
//! operation for a fixed time, per-thread counts and sampled latencies merged after the run,
//! sweeps over thread counts with repeats and medians, and the outputs (table, JSON, CSV,
//! Markdown, SVG charts, an HTML page, a report directory).
//!
//! It depends on nothing of pglocks but `pglocks-proc` (for [`Backend`](pglocks_proc::Backend)
//! and its statistics) and the `pglocks-sync` shim: what is measured is the workloads' business.
//!
//! # Modules
//! Measuring: [`topology`], [`team`] and [`sweep`](mod@sweep) produce a [`report::Report`], the JSON
//! document every output is rendered from. The outputs are layered so that no two modules
//! depend on each other:
//! - [`report`]: the document's data and how runs become points;
//! - [`query`] (what to pick out of a report: workloads, series, thread counts, waits, metrics)
//!   and [`format`](mod@format) (how a number is written: ops/s, latencies, fractions, a point's table row),
//!   both on top of [`report`] alone;
//! - [`compare`] (two reports point by point, with a verdict per series and the noise band) and
//!   [`summary`] (a few sentences that read a report: the releases side by side where each thread
//!   has a CPU and where they are oversubscribed), on top of those;
//! - [`render`](mod@render) (table, JSON, CSV, Markdown), [`plot`] (the SVG charts) and [`html`] (the page,
//!   which links the charts by [`plot::ChartKind`]) on top of those.

pub mod calibrate;
pub mod compare;
pub mod format;
pub mod html;
pub mod interrupt;
pub mod plot;
pub mod query;
pub mod render;
pub mod report;
pub mod summary;
pub mod sweep;
pub mod team;
pub mod topology;

pub use render::{render, render_with, Format, Show};
pub use report::Report;
pub use sweep::{sweep, SeriesSpec, SweepConfig};
pub use team::{
    latency_histogram, run_team, run_team_with, Companion, RunLength, TeamRun, TeamSpec,
};
pub use topology::{PinPolicy, Topology};

use std::path::{Path, PathBuf};

/// Errors of the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// A team of no threads.
    #[error("the number of threads must be at least 1")]
    ZeroThreads,
    /// The workload's operation failed (its own typed error, e.g. a stuck spinlock).
    #[error("{0}")]
    Workload(Box<dyn std::error::Error + Send + Sync>),
    /// A benchmark thread panicked (a bug, not a user error).
    #[error("a benchmark thread panicked")]
    ThreadPanicked,
    /// The OS refused a thread.
    #[error("could not start a benchmark thread: {0}")]
    Spawn(std::io::Error),
    /// Histograms could not be merged.
    #[error("latency histograms could not be merged")]
    Histogram,
    /// Topology or pinning.
    #[error(transparent)]
    Topology(#[from] topology::TopologyError),
    /// An unknown output format.
    #[error("unknown format '{0}' (valid: table, json, csv, markdown)")]
    BadFormat(String),
    /// JSON encoding or decoding.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A file that is not a report document.
    #[error("{path}: not a pglocks report: {source}")]
    BadReport {
        /// The file.
        path: PathBuf,
        /// What the JSON parser found.
        source: serde_json::Error,
    },
    /// CSV encoding.
    #[error("CSV: {0}")]
    Csv(#[from] csv::Error),
    /// Drawing the chart.
    #[error("drawing the chart: {0}")]
    Plot(String),
    /// The simulated machine failed the run (every thread blocked, its time limit, …).
    #[error(transparent)]
    Sim(#[from] pglocks_sim::SimError),
    /// A stop was asked for (Ctrl-C) during the run; the run is discarded.
    #[error("interrupted")]
    Interrupted,
    /// Reading or writing report files.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// Names of the files a report directory holds besides the charts (whose names
/// [`plot::ChartKind::file_name`] gives: `<kind>-<workload>.svg`).
pub mod files {
    /// The JSON document (the contract of [`crate::report`]), from which every other file is rendered.
    pub const JSON: &str = "report.json";
    /// One row per point, as `--format csv` prints.
    pub const CSV: &str = "report.csv";
    /// The tables, as `--format markdown` prints.
    pub const MARKDOWN: &str = "report.md";
    /// The page that ties the report together.
    pub const HTML: &str = "index.html";
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> HarnessError + '_ {
    move |source| HarnessError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), HarnessError> {
    std::fs::write(path, text).map_err(io_err(path))
}

/// Writes `report` into `dir` (created if needed) and returns the names of the files written:
/// `report.json`, then everything rendered from it (see [`rerender`]).
///
/// The other files are rendered from the JSON as written, not from `report` in memory, so that
/// `pglocks report DIR` reproduces them byte for byte (a float that did not survive the trip
/// through JSON exactly would otherwise be rendered from two different values).
pub fn save_report(report: &Report, dir: &Path) -> Result<Vec<String>, HarnessError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    write_file(&dir.join(files::JSON), &render(report, Format::Json)?)?;
    let (_, rendered) = rerender(dir)?;
    Ok([files::JSON.to_string()]
        .into_iter()
        .chain(rendered)
        .collect())
}

/// Reads a report document (a `report.json`), naming the file in any error.
pub fn load_report(path: &Path) -> Result<Report, HarnessError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    serde_json::from_str(&text).map_err(|source| HarnessError::BadReport {
        path: path.to_path_buf(),
        source,
    })
}

/// Re-renders a report directory from its `report.json` (`pglocks report DIR`): `report.csv`,
/// `report.md`, `index.html` and the charts, four per workload. Returns the report and the names
/// of the files written. Every file is a function of the JSON alone: the same JSON renders the
/// same bytes.
pub fn rerender(dir: &Path) -> Result<(Report, Vec<String>), HarnessError> {
    let report = load_report(&dir.join(files::JSON))?;
    let mut written = Vec::new();
    for (name, text) in [
        (files::CSV, render(&report, Format::Csv)?),
        (files::MARKDOWN, render(&report, Format::Markdown)?),
        (files::HTML, html::index_html(&report)),
    ] {
        write_file(&dir.join(name), &text)?;
        written.push(name.to_string());
    }
    written.extend(plot::write_charts(&report, dir)?);
    Ok((report, written))
}
