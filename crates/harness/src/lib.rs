//! The measuring half of pglocks: machine topology and thread pinning, thread teams that run one
//! operation for a fixed time, per-thread counts and sampled latencies merged after the run,
//! sweeps over thread counts with repeats and medians, and the outputs (table, JSON, CSV,
//! Markdown, an SVG chart, a report directory).
//!
//! It depends on nothing of pglocks but `pglocks-sync` (for [`Backend`](pglocks_sync::Backend)
//! and its statistics): what is measured is the workloads' business.

pub mod plot;
pub mod render;
pub mod report;
pub mod sweep;
pub mod team;
pub mod topology;

pub use render::{render, Format};
pub use report::Report;
pub use sweep::{sweep, SeriesSpec, SweepConfig};
pub use team::{run_team, TeamRun, TeamSpec};
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
    /// CSV encoding.
    #[error("CSV: {0}")]
    Csv(#[from] csv::Error),
    /// Drawing the chart.
    #[error("drawing the chart: {0}")]
    Plot(String),
    /// Reading or writing report files.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// Names of the files a report directory holds.
pub mod files {
    /// The JSON document.
    pub const JSON: &str = "report.json";
    /// The chart.
    pub const SVG: &str = "throughput.svg";
    /// The Markdown tables.
    pub const MARKDOWN: &str = "report.md";
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> HarnessError + '_ {
    move |source| HarnessError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `report` into `dir` (created if needed): the JSON, the SVG chart and the Markdown.
pub fn save_report(report: &Report, dir: &Path) -> Result<(), HarnessError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let json = dir.join(files::JSON);
    std::fs::write(&json, render(report, Format::Json)?).map_err(io_err(&json))?;
    render_saved(report, dir)
}

/// Re-renders the chart and Markdown of a report directory from its JSON (`pglocks report DIR`).
pub fn rerender(dir: &Path) -> Result<Report, HarnessError> {
    let json = dir.join(files::JSON);
    let text = std::fs::read_to_string(&json).map_err(io_err(&json))?;
    let report: Report = serde_json::from_str(&text)?;
    render_saved(&report, dir)?;
    Ok(report)
}

fn render_saved(report: &Report, dir: &Path) -> Result<(), HarnessError> {
    plot::write_svg(report, &dir.join(files::SVG))?;
    let md = dir.join(files::MARKDOWN);
    std::fs::write(&md, render(report, Format::Markdown)?).map_err(io_err(&md))?;
    Ok(())
}
