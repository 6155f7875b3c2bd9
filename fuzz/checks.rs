//! The properties the fuzz targets check, one function per target. The same functions run in
//! the normal test run on proptest's inputs (`tests/round_trips.rs` includes this file), so a
//! property is written once. Each function panics when its property fails and only then: a
//! parser must answer every input with a value or a typed error, and a value it accepts must
//! read back the same from the way it is written.
#![allow(dead_code)] // each includer uses some of the checks

use pglocks::cli::{parse_duration, parse_threads, CliError};
use pglocks::isolation::spec::Blocker;
use pglocks::isolation::{parse_spec, IsolationError, TestSpec};
use pglocks::lwlock::{AtomicLwLock, Pg96Layout};
use pglocks::proc::ProcTable;
use pglocks::slru::clog::{Clog, ClogConfig, XidStatus};
use pglocks::slru::{FileStore, SlruError, Victim, BLCKSZ};
use pglocks::workloads::{Settings, WorkloadError, PRESETS};

/// `--threads`: a list within the documented bounds (1 to 65536 threads, at most 4096 points)
/// or a usage error, never a panic, a hang or a huge allocation; an accepted list reads back
/// the same when written as plain numbers.
pub fn threads(text: &str) -> Option<Vec<usize>> {
    match parse_threads(text) {
        Ok(list) => {
            assert!(!list.is_empty() && list.len() <= 4096, "{text:?}");
            assert!(list.iter().all(|&t| (1..=65_536).contains(&t)), "{text:?}");
            let plain: Vec<String> = list.iter().map(usize::to_string).collect();
            assert_eq!(parse_threads(&plain.join(",")).unwrap(), list, "{text:?}");
            Some(list)
        }
        Err(CliError::Usage(_)) => None,
        Err(e) => panic!("{text:?}: not a usage error: {e}"),
    }
}

/// `--duration` / `--warmup`: a duration or a usage error; an accepted duration reads back the
/// same from the way `pglocks_sync::time::format_duration` writes it.
pub fn duration(text: &str) -> Option<std::time::Duration> {
    match parse_duration("--duration", text) {
        Ok(d) => {
            let written = pglocks::sync::time::format_duration(d).to_string();
            assert_eq!(
                parse_duration("--duration", &written).unwrap(),
                d,
                "{text:?} written as {written:?}"
            );
            Some(d)
        }
        Err(CliError::Usage(_)) => None,
        Err(e) => panic!("{text:?}: not a usage error: {e}"),
    }
}

/// `--set knob=value[,knob=value…]` (`Settings::apply`) over preset `which` (modulo the number
/// of presets): a change or a typed error; after an accepted assignment, each knob it names,
/// written as `knob_value` writes it and applied in the same order to the preset's settings,
/// gives exactly the same settings.
pub fn knob(which: usize, assignment: &str) -> bool {
    let preset = &PRESETS[which % PRESETS.len()];
    let base = preset.settings();
    let mut changed = base.clone();
    match changed.apply(assignment) {
        Ok(()) => {
            let mut again = base;
            for part in Settings::split_assignments(assignment) {
                let knob = part
                    .split_once('=')
                    .expect("applied, so each part has a '='")
                    .0
                    .trim();
                let value = changed
                    .knob_value(knob)
                    .unwrap_or_else(|| panic!("{assignment:?}: applied but has no value"));
                again
                    .apply(&format!("{knob}={value}"))
                    .unwrap_or_else(|e| panic!("{assignment:?}: {knob}={value} rejected: {e}"));
            }
            assert_eq!(
                again, changed,
                "{} {assignment:?} written back",
                preset.name
            );
            true
        }
        Err(
            WorkloadError::BadSet(_)
            | WorkloadError::BadKnobValue { .. }
            | WorkloadError::UnknownKnob { .. },
        ) => false,
        Err(e) => panic!("{assignment:?}: an error apply does not give: {e}"),
    }
}

/// The isolation-spec parser: a spec or a syntax / spec / SQL error (never one only a run
/// gives); an accepted spec's indexes are consistent (each session's steps name it, every
/// permutation step exists, no marker names a step of its own session).
pub fn isolation_spec(text: &str) -> Option<TestSpec> {
    match parse_spec(text) {
        Ok(spec) => {
            assert!(!spec.sessions.is_empty(), "{text:?}");
            for (i, session) in spec.sessions.iter().enumerate() {
                assert!(!session.steps.is_empty(), "{text:?}");
                for &s in &session.steps {
                    assert_eq!(spec.steps[s].session, i, "{text:?}");
                }
            }
            for p in spec.permutations.iter().flatten() {
                assert!(p.step < spec.steps.len(), "{text:?}");
                for b in &p.blockers {
                    if let Blocker::Step(o) | Blocker::Notices(o, _) = *b {
                        assert_ne!(spec.steps[o].session, spec.steps[p.step].session);
                    }
                }
            }
            Some(spec)
        }
        Err(IsolationError::Syntax(_) | IsolationError::Spec(_) | IsolationError::Sql { .. }) => {
            None
        }
        Err(e) => panic!("{text:?}: parse_spec gave an error only a run gives: {e}"),
    }
}

/// The CLOG page reader over a `pg_xact` directory of its own: each input becomes segment
/// `0000`, read through a fresh commit log (17's banks of 16 buffers) and the segment file
/// store (`TransactionIdGetStatus` → `SimpleLruReadPage_ReadOnly` → `SlruPhysicalReadPage`).
pub struct ClogReader {
    dir: tempfile::TempDir,
}

impl ClogReader {
    /// A reader over a new temporary directory.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// Every sampled xid of a page the file holds in full (every 61st byte's four xids, and
    /// the last byte's) reads the two bits the bytes give; an xid of the page the file holds
    /// in part (or not at all) and of the page after it is an I/O error, again on a second
    /// try (the failed read left no lock held and no slot stuck). Never a panic.
    pub fn check(&self, data: &[u8]) {
        std::fs::write(self.dir.path().join("0000"), data).expect("write the segment");
        let cfg = ClogConfig::new(16, true, Victim::AvoidIoBusy, false, 1);
        let clog: Clog<AtomicLwLock<Pg96Layout>> =
            Clog::new(&cfg, Box::new(FileStore::new(self.dir.path()))).expect("a valid config");
        let procs = ProcTable::new(1);
        let mut b = procs.attach().expect("a backend slot");
        let xid = |page: usize, byte: usize, k: usize| (page * BLCKSZ * 4 + byte * 4 + k) as u32;
        let full_pages = data.len() / BLCKSZ;
        for page in 0..full_pages {
            for byte in (0..BLCKSZ).step_by(61).chain([BLCKSZ - 1]) {
                for k in 0..4 {
                    let xid = xid(page, byte, k);
                    match clog.get_status(&mut b, xid) {
                        Ok((status, _lsn)) => {
                            let bits = data[page * BLCKSZ + byte] >> (2 * k);
                            assert_eq!(status, XidStatus::from_bits(bits), "xid {xid}");
                        }
                        Err(e) => panic!("xid {xid} of a full page: {e}"),
                    }
                }
            }
        }
        for page in [full_pages, full_pages + 1] {
            for xid in [xid(page, 0, 0), xid(page, BLCKSZ - 1, 3), xid(page, 0, 0)] {
                match clog.get_status(&mut b, xid) {
                    Err(SlruError::Io { .. }) => {}
                    other => panic!("xid {xid} of a short page: {other:?}"),
                }
            }
        }
    }
}

impl Default for ClogReader {
    fn default() -> Self {
        Self::new()
    }
}

/// A pgoutput message (proto.c's layouts), read as outside and inside a stream: every input
/// decodes to a message or a typed error, never a panic; a message it accepts decodes again
/// to itself from the bytes it encodes to (its text values may be written differently, as
/// `007` for 7, so the bytes themselves need not match).
pub fn pgoutput(bytes: &[u8]) -> Option<pglocks::apply::Message> {
    let mut first = None;
    for in_stream in [false, true] {
        if let Ok(m) = pglocks::apply::Message::decode(bytes, in_stream) {
            let again = pglocks::apply::Message::decode(&m.to_bytes(), in_stream);
            assert_eq!(again, Ok(m), "{bytes:?} (in a stream: {in_stream})");
            first = first.or(Some(m));
        }
    }
    first
}
