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
//! A line of the simulated shared-memory map ([`crate::shmem`]) is named by what lies on it
//! (`LOCK hash entries[17] bytes 64..128`) instead: the data behind the locks, touched by the
//! models. The tally also adds the transfers up by structure (a region of the map, or the
//! first frame of the code that first missed on a line outside it), which is what a run's
//! transfers per transaction are made of.
//!
//! The call stack is captured once per line outside the map, the first time it is missed on,
//! so a run that misses on many such lines pays for as many captures: the diagnostic is off
//! unless asked for.

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
    /// shim, innermost first, separated by " < " (empty for a line of the map).
    pub site: String,
    /// What of the simulated shared-memory map lies on the line, if it is the map's.
    pub data: Option<String>,
}

/// The transfers of one structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structure {
    /// A region of the map, or the first frame of the code that first missed on a line
    /// outside it.
    pub name: String,
    /// Transfers of its lines.
    pub transfers: u64,
    /// Whether it is a region of the map (else a line outside it, named by its code).
    pub placed: bool,
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
    /// log2 of the line size.
    shift: u32,
    /// By line, in the order first missed on (see [`crate::keyed`]).
    lines: Keyed<Line>,
}

impl HotLines {
    /// A tally if [`VARIABLE`] asks for one (a positive number).
    pub fn from_env(shift: u32) -> Option<HotLines> {
        let wanted: usize = std::env::var(VARIABLE).ok()?.trim().parse().ok()?;
        (wanted > 0).then(|| HotLines {
            wanted,
            shift,
            lines: Keyed::default(),
        })
    }

    /// Starts the tally again from zero (the lines keep their sites).
    pub fn restart(&mut self) {
        self.lines.values_mut().for_each(|l| {
            l.transfers = 0;
            l.waited = Picos::ZERO;
        });
    }

    /// The first address of `line`.
    fn addr(&self, line: u64) -> usize {
        (line << self.shift) as usize
    }

    /// Counts a miss on `line` that kept its thread waiting `waited`.
    #[cold]
    pub fn record(&mut self, line: u64, waited: Picos) {
        let in_map = crate::shmem::in_map(self.addr(line));
        let l = self.lines.get_or_insert_with(line, || Line {
            site: if in_map { String::new() } else { site() },
            ..Line::default()
        });
        l.transfers += 1;
        l.waited += waited;
    }

    /// The most waited-on lines, most first, and the transfers by structure, most first.
    pub fn top(self) -> (Vec<HotLine>, Vec<Structure>) {
        let (shift, wanted) = (self.shift, self.wanted);
        let size = 1usize << shift;
        let mut lines: Vec<(u64, Line)> = self
            .lines
            .into_entries()
            .filter(|(_, l)| l.transfers > 0)
            .collect();
        let mut by: Vec<Structure> = Vec::new();
        for (key, l) in &lines {
            let region = crate::shmem::region_name((key << shift) as usize);
            let placed = region.is_some();
            let name = region.map_or_else(
                || l.site.split(" < ").next().unwrap_or("").to_string(),
                str::to_string,
            );
            match by.iter_mut().find(|s| s.name == name) {
                Some(s) => s.transfers += l.transfers,
                None => by.push(Structure {
                    name,
                    transfers: l.transfers,
                    placed,
                }),
            }
        }
        by.sort_by(|a, b| b.transfers.cmp(&a.transfers).then(a.name.cmp(&b.name)));
        lines.sort_by(|(_, a), (_, b)| b.waited.cmp(&a.waited).then(b.transfers.cmp(&a.transfers)));
        lines.truncate(wanted);
        let top = lines
            .into_iter()
            .map(|(key, l)| HotLine {
                transfers: l.transfers,
                waited: l.waited.to_duration(),
                site: l.site,
                data: crate::shmem::describe((key << shift) as usize, size),
            })
            .collect();
        (top, by)
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
            shift: 6,
            lines: Keyed::default(),
        };
        h.record(7, Picos(1_000_000));
        h.record(7, Picos(2_000_000));
        h.record(9, Picos(5_000_000));
        h.record(11, Picos(10));
        let (top, by) = h.top();
        assert_eq!(top.len(), 2);
        // Lines outside the map go by the first frame of their site: these four by one.
        assert_eq!(by.len(), 1);
        assert_eq!(by[0].transfers, 4);
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
