//! Which cache lines a simulation waited on most, and the code that first touched each: the
//! diagnostic behind `PGLOCKS_SIM_HOT_LINES=N`.
//!
//! With the variable set to a positive number, the engine adds up, per line, the transfers and
//! the virtual time threads spent waiting for them (queueing behind other transfers included),
//! and records where the line was first missed on: the first frames of the call stack outside
//! the simulator and the shim (`crates/lwlock/src/atomic.rs:280 < crates/procarray/...`). The
//! [`Outcome`](crate::Outcome) then lists the N lines with the most waiting. A contended
//! simulation is usually one or two such lines; this says which lock word or counter they are.
//!
//! The call stack is captured once per line, the first time it is missed on, so a run that
//! touches many lines pays for as many captures: the diagnostic is off unless asked for.

use crate::keyed::Keyed;
use crate::picos::Picos;
use std::time::Duration;

/// The variable that turns the diagnostic on.
pub const VARIABLE: &str = "PGLOCKS_SIM_HOT_LINES";

/// One of a simulation's most waited-on lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotLine {
    /// Transfers of the line (misses on it).
    pub transfers: u64,
    /// Virtual time threads spent waiting for those transfers.
    pub waited: Duration,
    /// Where the line was first missed on: up to eight frames outside the simulator and the
    /// shim, innermost first, separated by " < ".
    pub site: String,
}

#[derive(Debug, Default)]
struct Line {
    transfers: u64,
    waited: Picos,
    site: String,
}

/// The per-line tally of one simulation.
#[derive(Debug)]
pub(crate) struct HotLines {
    wanted: usize,
    /// By line, in the order first missed on (see [`crate::keyed`]).
    lines: Keyed<Line>,
}

impl HotLines {
    /// A tally if [`VARIABLE`] asks for one (a positive number).
    pub fn from_env() -> Option<HotLines> {
        let wanted: usize = std::env::var(VARIABLE).ok()?.trim().parse().ok()?;
        (wanted > 0).then(|| HotLines {
            wanted,
            lines: Keyed::default(),
        })
    }

    /// Counts a miss on `line` that kept its thread waiting `waited`.
    #[cold]
    pub fn record(&mut self, line: u64, waited: Picos) {
        let l = self.lines.get_or_insert_with(line, || Line {
            site: site(),
            ..Line::default()
        });
        l.transfers += 1;
        l.waited += waited;
    }

    /// The most waited-on lines, most first.
    pub fn top(self) -> Vec<HotLine> {
        let mut lines: Vec<Line> = self.lines.into_values().collect();
        lines.sort_by(|a, b| b.waited.cmp(&a.waited).then(b.transfers.cmp(&a.transfers)));
        lines.truncate(self.wanted);
        lines
            .into_iter()
            .map(|l| HotLine {
                transfers: l.transfers,
                waited: l.waited.to_duration(),
                site: l.site,
            })
            .collect()
    }
}

/// The caller's first frames outside the simulator, the shim and the standard library.
fn site() -> String {
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    let frames: Vec<&str> = trace
        .lines()
        .filter_map(|l| l.trim().strip_prefix("at "))
        .filter(|path| outside(path))
        .take(8)
        .collect();
    if frames.is_empty() {
        "(no frame outside the simulator: build with debug info to see one)".into()
    } else {
        frames.join(" < ")
    }
}

/// Whether a frame's `path:line:column` is the models' code rather than the simulator's, the
/// shim's, the standard library's or a dependency's.
fn outside(path: &str) -> bool {
    const INSIDE: [&str; 6] = [
        "crates/sim/",
        "crates/sync/",
        "/rustc/",
        "/library/",
        "/.cargo/",
        "/.rustup/",
    ];
    !INSIDE.iter().any(|p| path.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_ranks_lines_by_waiting_and_keeps_the_first_site() {
        let mut h = HotLines {
            wanted: 2,
            lines: Keyed::default(),
        };
        h.record(7, Picos(1_000_000));
        h.record(7, Picos(2_000_000));
        h.record(9, Picos(5_000_000));
        h.record(11, Picos(10));
        let top = h.top();
        assert_eq!(top.len(), 2);
        assert_eq!(
            (top[0].transfers, top[0].waited),
            (1, Duration::from_micros(5))
        );
        assert_eq!(
            (top[1].transfers, top[1].waited),
            (2, Duration::from_micros(3))
        );
        // Frames of the models' crates are kept, the simulator's and std's dropped.
        assert!(outside("./crates/lwlock/src/atomic.rs:280:30"));
        assert!(!outside("./crates/sim/src/engine.rs:380:9"));
        assert!(!outside(
            "/rustc/abc/library/core/src/ops/function.rs:250:5"
        ));
    }
}
