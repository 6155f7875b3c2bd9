//! Where SLRU pages live when they are not in a buffer: models `SlruPhysicalReadPage` and
//! `SlruPhysicalWritePage` in slru.c, behind the [`PageStore`] trait.
//!
//! - [`MemoryStore`]: pages in memory, with an optional simulated I/O latency per read and write
//!   (what the workloads use, so that a miss costs what the preset's disk would).
//! - [`FileStore`]: real segment files of [`SLRU_PAGES_PER_SEGMENT`] pages, named as
//!   PostgreSQL names them (`SlruFileName`: `%04X` of the segment number), in a directory such as
//!   a copy of `pg_xact`. A missing segment or a page past the end of its file is an error, as
//!   in `SlruPhysicalReadPage` outside recovery.
//!
//! Differences from PostgreSQL: no fsync requests (`SlruSyncFileTag`), no open-file cache for
//! `SimpleLruWriteAll`, no truncation.

use crate::SlruError;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// `BLCKSZ`: bytes per SLRU page.
pub const BLCKSZ: usize = 8192;
/// `SLRU_PAGES_PER_SEGMENT`: pages per segment file.
pub const SLRU_PAGES_PER_SEGMENT: u64 = 32;

/// Page storage below the buffers.
pub trait PageStore: Send + Sync + 'static {
    /// Reads page `pageno` into `buf` (`SlruPhysicalReadPage`).
    fn read_page(&self, pageno: u64, buf: &mut [u8; BLCKSZ]) -> Result<(), SlruError>;
    /// Writes `buf` as page `pageno` (`SlruPhysicalWritePage`).
    fn write_page(&self, pageno: u64, buf: &[u8; BLCKSZ]) -> Result<(), SlruError>;
}

/// Pages in memory; reads and writes each sleep `latency` (zero: no sleep). Pages never
/// written read as zeros.
///
/// The pages are kept in page order, so the store allocates and frees them in an order its
/// inputs fix (a hash map with std's per-process random hasher would free them in a different
/// order in every process, moving where a simulated run's later objects land in the host heap).
#[derive(Debug, Default)]
pub struct MemoryStore {
    pages: Mutex<BTreeMap<u64, Box<[u8; BLCKSZ]>>>,
    latency: Duration,
}

impl MemoryStore {
    /// A store whose every read and write takes `latency`.
    pub fn new(latency: Duration) -> Self {
        Self {
            pages: Mutex::default(),
            latency,
        }
    }

    /// The stored bytes of `pageno`, if it was ever written (for tests).
    pub fn page(&self, pageno: u64) -> Option<Box<[u8; BLCKSZ]>> {
        self.lock().get(&pageno).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Box<[u8; BLCKSZ]>>> {
        self.pages
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn pause(&self) {
        if !self.latency.is_zero() {
            pglocks_sync::time::sleep(self.latency);
        }
    }
}

impl PageStore for MemoryStore {
    fn read_page(&self, pageno: u64, buf: &mut [u8; BLCKSZ]) -> Result<(), SlruError> {
        self.pause();
        match self.lock().get(&pageno) {
            Some(p) => buf.copy_from_slice(&p[..]),
            None => buf.fill(0),
        }
        Ok(())
    }

    fn write_page(&self, pageno: u64, buf: &[u8; BLCKSZ]) -> Result<(), SlruError> {
        self.pause();
        self.lock().insert(pageno, Box::new(*buf));
        Ok(())
    }
}

/// Segment files in a directory, as `pg_xact` holds them.
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    /// The segment directory `dir` (which must exist).
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// Models `SlruFileName` (short names): the file of segment `segno`.
    pub fn segment_path(&self, segno: u64) -> PathBuf {
        slru_file_name(&self.dir, segno)
    }
}

/// Models `SlruFileName` with short names: segment `segno`'s file in `dir` (`%04X`).
pub fn slru_file_name(dir: &Path, segno: u64) -> PathBuf {
    dir.join(format!("{segno:04X}"))
}

fn io_error<'a>(
    what: &'static str,
    path: &'a Path,
    pageno: u64,
) -> impl FnOnce(std::io::Error) -> SlruError + 'a {
    move |source| SlruError::Io {
        what,
        path: path.to_path_buf(),
        pageno,
        source,
    }
}

impl PageStore for FileStore {
    fn read_page(&self, pageno: u64, buf: &mut [u8; BLCKSZ]) -> Result<(), SlruError> {
        let path = self.segment_path(pageno / SLRU_PAGES_PER_SEGMENT);
        let offset = (pageno % SLRU_PAGES_PER_SEGMENT) * BLCKSZ as u64;
        let file = OpenOptions::new()
            .read(true)
            .open(&path)
            .map_err(io_error("open", &path, pageno))?;
        buf.fill(0);
        let mut done = 0;
        while done < BLCKSZ {
            let n = file
                .read_at(&mut buf[done..], offset + done as u64)
                .map_err(io_error("read from", &path, pageno))?;
            if n == 0 {
                return Err(SlruError::Io {
                    what: "read from",
                    path: path.clone(),
                    pageno,
                    source: std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("read too few bytes ({done} of {BLCKSZ})"),
                    ),
                });
            }
            done += n;
        }
        Ok(())
    }

    fn write_page(&self, pageno: u64, buf: &[u8; BLCKSZ]) -> Result<(), SlruError> {
        let path = self.segment_path(pageno / SLRU_PAGES_PER_SEGMENT);
        let offset = (pageno % SLRU_PAGES_PER_SEGMENT) * BLCKSZ as u64;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_error("open", &path, pageno))?;
        file.write_all_at(buf, offset)
            .map_err(io_error("write to", &path, pageno))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_store_names_segments_and_round_trips_pages() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path());
        assert!(store.segment_path(0x2A).ends_with("002A"));
        let mut page = [0u8; BLCKSZ];
        page[0] = 0x55;
        page[BLCKSZ - 1] = 0xAA;
        store.write_page(33, &page).unwrap();
        assert!(dir.path().join("0001").exists(), "page 33 is in segment 1");
        let mut back = [1u8; BLCKSZ];
        store.read_page(33, &mut back).unwrap();
        assert_eq!(back, page);
        // A page past the end of an existing file and a missing segment are errors.
        let e = store.read_page(40, &mut back).unwrap_err().to_string();
        assert!(e.contains("read too few bytes"), "{e}");
        let e = store.read_page(100, &mut back).unwrap_err().to_string();
        assert!(
            e.contains("could not open file") && e.contains("0003"),
            "{e}"
        );
    }

    #[test]
    fn memory_store_reads_zeros_until_written() {
        let store = MemoryStore::new(Duration::ZERO);
        let mut buf = [9u8; BLCKSZ];
        store.read_page(5, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        buf[7] = 7;
        store.write_page(5, &buf).unwrap();
        assert_eq!(store.page(5).unwrap()[7], 7);
    }
}
