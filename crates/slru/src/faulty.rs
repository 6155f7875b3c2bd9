//! A page store that fails on purpose: [`FaultyStore`] wraps any [`PageStore`] and, as its
//! [`Faults`] plan says, fails the k-th page read or write with an errno, makes it short, or
//! delays it (see [`pglocks_sync::fault`] for the plans and their text form).
//!
//! What the SLRU does with each fault is slru.c's: `SlruPhysicalReadPage` and
//! `SlruPhysicalWritePage` return false, having saved the cause, and the caller raises it with
//! `SlruReportIOError` (an `ERROR`) only after it has put the slot back — empty after a failed
//! read, valid and dirty again after a failed write — and released the slot's I/O lock. A
//! short read or write is a failure too (`pg_pread` / `pg_pwrite` `!= BLCKSZ`): a short read
//! says "read too few bytes", a short write reports `ENOSPC`, which is what
//! `SlruPhysicalWritePage` puts in `errno` when a short write left it zero. A delay only
//! makes the I/O slow.
//!
//! Differences: a failed or short operation does not reach the inner store at all (a real
//! short write leaves a torn page on disk; here the old page stays, and the slot, still
//! dirty, is written in full later). Fsync rules never fire: the model's SLRU does not sync.

use crate::store::{slru_file_name, PageStore, BLCKSZ, SLRU_PAGES_PER_SEGMENT};
use crate::SlruError;
use pglocks_sync::fault::{apply_delay, os_error, Fault, Faults, IoOp, ENOSPC};
use std::path::PathBuf;

/// A [`PageStore`] that injects the faults of a [`Faults`] plan into `S`'s page reads and
/// writes. Error messages name the segment file in `dir` (e.g. `pg_xact`), as
/// `SlruFileName` would.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    dir: PathBuf,
    faults: Faults,
}

impl<S: PageStore> FaultyStore<S> {
    /// `inner` with `faults` injected; `dir` names the segment directory in messages.
    pub fn new(inner: S, dir: impl Into<PathBuf>, faults: Faults) -> Self {
        Self {
            inner,
            dir: dir.into(),
            faults,
        }
    }

    /// The live plan (a clone shares it: change or clear it while the SLRU runs).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The error `SlruReportIOError` raises for page `pageno`.
    fn error(&self, what: &'static str, pageno: u64, source: std::io::Error) -> SlruError {
        SlruError::Io {
            what,
            path: slru_file_name(&self.dir, pageno / SLRU_PAGES_PER_SEGMENT),
            pageno,
            source,
        }
    }
}

impl<S: PageStore> PageStore for FaultyStore<S> {
    fn read_page(&self, pageno: u64, buf: &mut [u8; BLCKSZ]) -> Result<(), SlruError> {
        match apply_delay(self.faults.next(IoOp::Read)) {
            None | Some(Fault::Delay(_)) => self.inner.read_page(pageno, buf),
            Some(Fault::Fail(errno)) => Err(self.error("read from", pageno, os_error(errno))),
            Some(Fault::Short) => Err(self.error(
                "read from",
                pageno,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read too few bytes"),
            )),
        }
    }

    fn write_page(&self, pageno: u64, buf: &[u8; BLCKSZ]) -> Result<(), SlruError> {
        match apply_delay(self.faults.next(IoOp::Write)) {
            None | Some(Fault::Delay(_)) => self.inner.write_page(pageno, buf),
            Some(Fault::Fail(errno)) => Err(self.error("write to", pageno, os_error(errno))),
            Some(Fault::Short) => Err(self.error("write to", pageno, os_error(ENOSPC))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;
    use std::time::Duration;

    #[test]
    fn the_planned_operations_fail_with_postgresql_messages() {
        let faults = Faults::new(
            "read:1,read:2:short,write:1:short,write:2:eio"
                .parse()
                .unwrap(),
        );
        let s = FaultyStore::new(MemoryStore::new(Duration::ZERO), "pg_xact", faults);
        let mut buf = [7u8; BLCKSZ];
        let msg = |r: Result<(), SlruError>| r.unwrap_err().to_string();
        assert_eq!(
            msg(s.read_page(33, &mut buf)),
            "could not read from file \"pg_xact/0001\" at offset 8192: Input/output error (os error 5)"
        );
        assert_eq!(
            msg(s.read_page(2, &mut buf)),
            "could not read from file \"pg_xact/0000\" at offset 16384: read too few bytes"
        );
        assert!(
            msg(s.write_page(0, &buf)).ends_with("offset 0: No space left on device (os error 28)")
        );
        assert!(msg(s.write_page(0, &buf)).starts_with("could not write to file \"pg_xact/0000\""));
        assert!(s.inner().page(0).is_none(), "a failed write wrote nothing");
        s.write_page(0, &buf).unwrap();
        s.read_page(0, &mut buf).unwrap();
        assert_eq!(s.faults().injected_total(), 4);
    }
}
