//! Flush devices: where the WAL model's `XLogWrite` sends its pages, and how they are made
//! durable.
//!
//! A *flush device* stands for the storage under pg_wal: it models the I/O of `XLogWrite` and
//! `issue_xlog_fsync` in xlog.c, and `XLogFileInit` / `InstallXLogFileSegment` for segment
//! files. `XLogWrite` copies WAL pages from the shared buffers into the segment file that holds
//! them (`pg_pwrite`), and when asked to flush calls `issue_xlog_fsync` on the open segment.
//! The [`FlushDevice`] trait puts that I/O behind two calls, a write of WAL bytes at a WAL
//! position and a flush that returns once everything written is durable, so that the
//! lock-level model of `XLogWrite`, `XLogFlush` and the WAL writer, which does not care what is
//! behind them, can run against a real disk, a simulated disk of known speed, or no disk at
//! all. The time a flush takes is what drives group commit.
//!
//! * [`NullDevice`]: `fsync = off`. Flushes do nothing, as `issue_xlog_fsync`
//!   does with `enableFsync` off, and so `commit_delay` is not slept
//!   ([`FlushDevice::fsync_enabled`]); writes do nothing either (PostgreSQL
//!   still writes to the kernel, without waiting for the disk).
//! * [`SimulatedDevice`]: writes cost nothing and ignore the bytes; each flush
//!   sleeps for one draw of a [`FlushLatency`] ("2ms", "1ms..3ms", ...). This
//!   gives the group-commit logic a storage of known, adjustable speed.
//! * [`FileDevice`]: a directory of real segment files named and managed as in
//!   pg_wal. Segments are created zero-filled and fsynced under a temporary
//!   name and renamed into place (`XLogFileInit`), written with `pwrite`, made
//!   durable with `fdatasync` (`wal_sync_method = fdatasync`, the Linux
//!   default), and old segments are recycled by renaming them to the new
//!   segment's name (`InstallXLogFileSegment`) rather than creating new files.
//! * [`RecordingDevice`]: wraps another device (or none) and publishes the
//!   highest position written and durably flushed through shared atomics, so
//!   tests can check that `XLogFlush(lsn)` never returns before `lsn` is
//!   flushed.
//!
//! # Differences from PostgreSQL
//!
//! * Only `wal_sync_method = fdatasync` is modelled: no `fsync`,
//!   `fsync_writethrough`, `open_sync` or `open_datasync`, and no `O_DIRECT`
//!   (`debug_io_direct`).
//! * The timeline is fixed at 1; there are no timeline switches, `.partial`
//!   files or history files.
//! * Errors are returned as [`DeviceError`] instead of raising `PANIC`. Because
//!   PostgreSQL would have stopped, a [`FileDevice`] refuses every later call
//!   once a write or flush has failed (a retried `fsync` may report success
//!   after the kernel dropped the dirty pages).
//! * A flush fdatasyncs every segment written since the last one (the WAL
//!   model's `XLogWrite` itself flushes each segment it finishes, as
//!   PostgreSQL's does).
//! * Recycling happens when a new segment is needed (keeping at most
//!   `keep_segments` old files), not at checkpoints (`RemoveOldXlogFiles`);
//!   there is no archiving, no `wal_keep_size`, no replication slots, and no
//!   `wal_init_zero = off` / `wal_recycle = off`.
//! * Recycled segments keep their old contents, as in PostgreSQL, where a
//!   reader tells old pages from new by the page address in their headers.
//!
//! # Layout
//!
//! The [`FlushDevice`] trait and [`DeviceError`] are here; each device has a file of its own
//! (`null.rs`, `simulated.rs`, `file.rs`, `recording.rs`), and the flush latency of the
//! simulated device, with its syntax, is in `latency.rs`. All are re-exported here.

mod file;
mod latency;
mod null;
mod recording;
mod simulated;

pub(crate) use file::{check_segment_size, wal_segment_path};
pub use file::{FileDevice, DEFAULT_KEEP_SEGMENTS, MAX_WAL_SEGMENT_SIZE, TIMELINE_ID};
pub use latency::FlushLatency;
pub use null::NullDevice;
pub use recording::RecordingDevice;
pub use simulated::SimulatedDevice;

use std::io;
use std::path::PathBuf;

/// Errors of the flush devices, worded as PostgreSQL's where it has a message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// `pg_pwrite` of WAL pages into a segment failed (`XLogWrite`).
    #[error("could not write to log file \"{}\" at offset {offset}, length {len}: {source}", .path.display())]
    Write {
        /// The segment file.
        path: PathBuf,
        /// The offset in the segment.
        offset: u64,
        /// The number of bytes that were to be written.
        len: usize,
        /// The operating system's error.
        source: io::Error,
    },
    /// `fdatasync` of a segment failed (`issue_xlog_fsync`).
    #[error("could not fdatasync file \"{}\": {source}", .path.display())]
    Fdatasync {
        /// The segment file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// `fsync` of a new segment or of the directory failed (`XLogFileInit`,
    /// `durable_rename`).
    #[error("could not fsync file \"{}\": {source}", .path.display())]
    Fsync {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Creating the temporary file of a new segment failed (`XLogFileInit`).
    #[error("could not create file \"{}\": {source}", .path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Zero-filling a new segment failed (`XLogFileInit`).
    #[error("could not write to file \"{}\": {source}", .path.display())]
    InitWrite {
        /// The temporary file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Opening an existing file or directory failed (`XLogFileOpen`).
    #[error("could not open file \"{}\": {source}", .path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Renaming a segment into place failed (`durable_rename`).
    #[error("could not rename file \"{}\" to \"{}\": {source}", .from.display(), .to.display())]
    Rename {
        /// The old name.
        from: PathBuf,
        /// The new name.
        to: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Removing a surplus old segment failed (`durable_unlink`).
    #[error("could not remove file \"{}\": {source}", .path.display())]
    Remove {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Creating the WAL directory failed.
    #[error("could not create directory \"{}\": {source}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A segment size that is not a power of two between `XLOG_BLCKSZ` and
    /// 1 GB.
    #[error("invalid WAL segment size ({0} bytes): the WAL segment size must be a power of two between 8 kB and 1 GB")]
    InvalidSegmentSize(u64),
    /// A write that would cross a segment boundary (the caller must split it).
    #[error("write of {len} bytes at {} crosses a WAL segment boundary (segment size {segment_size})", fmt_lsn(.lsn))]
    CrossesSegment {
        /// The WAL position of the write.
        lsn: u64,
        /// Its length.
        len: usize,
        /// The segment size.
        segment_size: u64,
    },
    /// A flush latency that [`FlushLatency`]'s `from_str` cannot parse.
    #[error("invalid flush latency '{0}': expected e.g. 2ms, 500us, 1ms..3ms or 0")]
    InvalidLatency(String),
    /// The device is refused after an earlier write or flush failure (where
    /// PostgreSQL would have PANICked); holds that failure's message.
    #[error(
        "WAL device is unusable after an earlier failure (PostgreSQL would have PANICked): {0}"
    )]
    Failed(String),
}

/// [`crate::lsn`] for an error message's field.
fn fmt_lsn(lsn: &u64) -> String {
    crate::pos::lsn(*lsn)
}

/// Where `XLogWrite` sends its pages: models the I/O half of `XLogWrite`,
/// `pg_pwrite` of whole or partial pages into the segment file that holds
/// them, then `issue_xlog_fsync`.
pub trait FlushDevice: Send + 'static {
    /// Short name for reports ("simulated", "file", "null").
    fn name(&self) -> &'static str;

    /// false when [`write`](FlushDevice::write) ignores the bytes (the caller
    /// can then skip assembling them). The default, for devices that only
    /// model time: false.
    fn wants_bytes(&self) -> bool {
        false
    }

    /// Writes `data` at WAL position `lsn` (byte offset in the WAL stream;
    /// segment = lsn / segment_size, offset in segment = lsn % segment_size).
    /// The caller never passes a range that crosses a segment boundary, and
    /// lsn and data.len() are multiples of 8 (may start mid-page when a partial
    /// page is rewritten). The default ignores the write (a device whose cost
    /// is all in `flush`).
    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        let _ = (lsn, data);
        Ok(())
    }

    /// One `pg_pwrite` call: writes a non-empty prefix of `data` at `lsn` and returns its
    /// length, which may be less than `data.len()` (a short write; `XLogWrite` then writes
    /// the rest). `Ok(0)` is taken as a failure, as PostgreSQL takes `written <= 0`. The
    /// default writes everything with [`write`](FlushDevice::write).
    fn write_some(&mut self, lsn: u64, data: &[u8]) -> Result<usize, DeviceError> {
        self.write(lsn, data).map(|()| data.len())
    }

    /// Makes everything written so far durable (models `issue_xlog_fsync`);
    /// `upto` is the end position of the writes (for bookkeeping/tests).
    fn flush(&mut self, upto: u64) -> Result<(), DeviceError>;

    /// `enableFsync`, the `fsync` setting: false for a device that models
    /// `fsync = off` ([`NullDevice`]), whose flush returns at once. The WAL
    /// reads it once, when it is made: with it off, `XLogFlush` (9.3+) and
    /// `RecordTransactionCommit` (≤ 9.2) never sleep `commit_delay`. The
    /// default: true.
    fn fsync_enabled(&self) -> bool {
        true
    }
}

/// A boxed device is a device, so callers can hold `Box<dyn FlushDevice>`
/// where a generic device is expected.
impl<D: FlushDevice + ?Sized> FlushDevice for Box<D> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn wants_bytes(&self) -> bool {
        (**self).wants_bytes()
    }

    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        (**self).write(lsn, data)
    }

    fn write_some(&mut self, lsn: u64, data: &[u8]) -> Result<usize, DeviceError> {
        (**self).write_some(lsn, data)
    }

    fn flush(&mut self, upto: u64) -> Result<(), DeviceError> {
        (**self).flush(upto)
    }

    fn fsync_enabled(&self) -> bool {
        (**self).fsync_enabled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment size small enough for tests.
    const SEG: u64 = 64 * 1024;

    #[test]
    fn error_messages_use_postgresql_wording() {
        let e = DeviceError::Write {
            path: PathBuf::from("pg_wal/000000010000000000000001"),
            offset: 8192,
            len: 16384,
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert!(e.to_string().starts_with(
            "could not write to log file \"pg_wal/000000010000000000000001\" at offset 8192, length 16384: "
        ));
        let e = DeviceError::Fdatasync {
            path: PathBuf::from("x"),
            source: io::Error::from_raw_os_error(libc::EIO),
        };
        assert!(e
            .to_string()
            .starts_with("could not fdatasync file \"x\": "));
        let e = DeviceError::CrossesSegment {
            lsn: 0x1_0000_FFF8,
            len: 16,
            segment_size: SEG,
        };
        assert!(e.to_string().contains("1/0000FFF8"));
    }

    #[test]
    fn devices_are_send_and_static() {
        fn check<T: FlushDevice>() {}
        check::<NullDevice>();
        check::<SimulatedDevice>();
        check::<FileDevice>();
        check::<RecordingDevice>();
        check::<Box<dyn FlushDevice>>();
    }
}
