//! Models the I/O of `XLogWrite` and `issue_xlog_fsync` in xlog.c, and
//! `XLogFileInit` / `InstallXLogFileSegment` for segment files.
//!
//! `XLogWrite` copies WAL pages from the shared buffers into the segment file
//! that holds them (`pg_pwrite`), and when asked to flush calls
//! `issue_xlog_fsync` on the open segment. This module puts that I/O behind the
//! [`FlushDevice`] trait so that the lock-level model of the WAL writer can be
//! run against a real disk, a simulated disk, or no disk at all:
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

use std::collections::VecDeque;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pglocks_sync::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// `XLOG_BLCKSZ` as a length.
const XLOG_BLCKSZ: usize = crate::pos::XLOG_BLCKSZ as usize;

/// The largest segment size accepted (PostgreSQL's `WalSegMaxSize`, 1 GB).
pub const MAX_WAL_SEGMENT_SIZE: u64 = 1024 * 1024 * 1024;

/// The number of old segment files a [`FileDevice`] keeps before it recycles
/// the oldest one.
pub const DEFAULT_KEEP_SEGMENTS: usize = 4;

/// The timeline written into segment file names; fixed, as there are no
/// timeline switches here.
pub const TIMELINE_ID: u32 = 1;

/// Zeros are written in chunks of this many `XLOG_BLCKSZ` pages when a
/// segment is created (as `pg_pwrite_zeros` writes a vector of zeroed blocks).
const ZERO_FILL_PAGES: usize = 16;

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
    /// A flush latency that [`FlushLatency::from_str`] cannot parse.
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

// ---------------------------------------------------------------------------
// NullDevice
// ---------------------------------------------------------------------------

/// A device that does nothing: models `fsync = off`, where `issue_xlog_fsync`
/// returns at once and `commit_delay` is never slept (and here the write costs
/// nothing either). `flush_device=null` (or `fsync=off`) in the workloads.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullDevice;

impl NullDevice {
    /// A new null device.
    pub fn new() -> Self {
        NullDevice
    }
}

impl FlushDevice for NullDevice {
    fn name(&self) -> &'static str {
        "null"
    }

    fn flush(&mut self, _upto: u64) -> Result<(), DeviceError> {
        Ok(())
    }

    fn fsync_enabled(&self) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------
// FlushLatency
// ---------------------------------------------------------------------------

/// How long one flush of a [`SimulatedDevice`] takes.
///
/// Written and parsed as `2ms`, `500us` (or `500µs`), `1.5ms`, `250ns`, `1s`,
/// `0` (no wait), or `lo..hi` such as `1ms..3ms` for a uniform draw between
/// the two bounds (inclusive, at nanosecond resolution).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushLatency {
    /// Every flush takes this long.
    Fixed(Duration),
    /// Each flush takes a duration drawn uniformly from `lo..=hi`.
    Uniform {
        /// The shortest flush.
        lo: Duration,
        /// The longest flush.
        hi: Duration,
    },
}

impl FlushLatency {
    /// The mean flush time.
    pub fn mean(&self) -> Duration {
        match *self {
            FlushLatency::Fixed(d) => d,
            FlushLatency::Uniform { lo, hi } => lo + hi.saturating_sub(lo) / 2,
        }
    }

    /// True when every flush takes no time (then no flush sleeps).
    pub fn is_zero(&self) -> bool {
        match *self {
            FlushLatency::Fixed(d) => d.is_zero(),
            FlushLatency::Uniform { lo, hi } => lo.is_zero() && hi.is_zero(),
        }
    }

    /// One flush time drawn from this distribution.
    fn draw(&self, rng: &mut SmallRng) -> Duration {
        match *self {
            FlushLatency::Fixed(d) => d,
            FlushLatency::Uniform { lo, hi } => {
                let span = u64::try_from(hi.saturating_sub(lo).as_nanos()).unwrap_or(u64::MAX);
                if span == 0 {
                    lo
                } else {
                    lo + Duration::from_nanos(rng.random_range(0..=span))
                }
            }
        }
    }
}

impl FromStr for FlushLatency {
    type Err = DeviceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DeviceError::InvalidLatency(s.to_string());
        match s.split_once("..") {
            Some((lo, hi)) => {
                let lo = parse_duration(lo).ok_or_else(bad)?;
                let hi = parse_duration(hi).ok_or_else(bad)?;
                if lo > hi {
                    return Err(bad());
                }
                Ok(FlushLatency::Uniform { lo, hi })
            }
            None => parse_duration(s).map(FlushLatency::Fixed).ok_or_else(bad),
        }
    }
}

impl fmt::Display for FlushLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FlushLatency::Fixed(d) => write_duration(f, d),
            FlushLatency::Uniform { lo, hi } => {
                write_duration(f, lo)?;
                f.write_str("..")?;
                write_duration(f, hi)
            }
        }
    }
}

/// Parses one duration: a decimal number with a unit (ns, us, µs, ms, s), or
/// a bare zero. Exact to the nanosecond; a finer fraction is rejected.
fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let (int, frac) = match number.split_once('.') {
        Some((int, frac)) => {
            if frac.is_empty() {
                return None;
            }
            (int, frac)
        }
        None => (number, ""),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let unit_ns: u64 = match unit.trim_start() {
        "" => {
            // Only zero may go without a unit.
            return if number.bytes().all(|b| b == b'0' || b == b'.') {
                Some(Duration::ZERO)
            } else {
                None
            };
        }
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return None,
    };
    let whole: u64 = int.parse().ok()?;
    let mut nanos = whole.checked_mul(unit_ns)?;
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        if frac.len() > 9 {
            return None;
        }
        let digits: u64 = frac.parse().ok()?;
        let scale = 10u64.pow(frac.len() as u32);
        let scaled = digits.checked_mul(unit_ns)?;
        if scaled % scale != 0 {
            return None; // finer than a nanosecond
        }
        nanos = nanos.checked_add(scaled / scale)?;
    }
    Some(Duration::from_nanos(nanos))
}

/// Writes a duration in the syntax `parse_duration` reads, in the largest
/// unit not above it, with an exact decimal fraction ("1.5ms", "250us", "0").
fn write_duration(f: &mut fmt::Formatter<'_>, d: Duration) -> fmt::Result {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return f.write_str("0");
    }
    let (unit, name, digits) = if nanos >= 1_000_000_000 {
        (1_000_000_000u128, "s", 9usize)
    } else if nanos >= 1_000_000 {
        (1_000_000, "ms", 6)
    } else if nanos >= 1_000 {
        (1_000, "us", 3)
    } else {
        (1, "ns", 0)
    };
    let whole = nanos / unit;
    let frac = nanos % unit;
    if frac == 0 {
        write!(f, "{whole}{name}")
    } else {
        let frac = format!("{frac:0digits$}");
        write!(f, "{whole}.{}{name}", frac.trim_end_matches('0'))
    }
}

// ---------------------------------------------------------------------------
// SimulatedDevice
// ---------------------------------------------------------------------------

/// A disk of known speed: [`write`](FlushDevice::write) ignores the bytes and
/// costs nothing, [`flush`](FlushDevice::flush) sleeps for one draw of a
/// [`FlushLatency`] (models the wait in `issue_xlog_fsync`).
///
/// A flush computes its deadline as its start plus the draw and sleeps with
/// `pglocks_sync::time::sleep` until then (again if woken early). A zero draw
/// returns at once without any system call.
///
/// # Timer slack
///
/// Linux lets a sleeping thread's wakeup slip by its timer slack, 50 µs by
/// default. On the 2-core VM this was written on, a 2 ms `thread::sleep`
/// overslept by 62-72 µs on average (p50 57-75 µs, p99 92-107 µs; four runs
/// of 200 sleeps), which would add about 3.5% to every simulated 2 ms flush.
/// So on Linux the first flush that sleeps on a thread sets that thread's
/// timer slack to 1 ns (`prctl(PR_SET_TIMERSLACK, 1)`), once per thread
/// (remembered in a thread-local flag); there the oversleep fell to 18-27 µs
/// mean (p50 20-27 µs, p99 39-63 µs), the rest being wakeup latency. The
/// setting stays with the thread and also tightens its other timed waits, at
/// the cost of a few more wakeups; it is never reverted. Other systems sleep
/// with their default precision. Either way a flush never returns before its
/// drawn latency has passed.
pub struct SimulatedDevice {
    latency: FlushLatency,
    rng: SmallRng,
    flushes: u64,
}

impl SimulatedDevice {
    /// A simulated device whose flushes take `latency`, with its random draws
    /// seeded from the clock.
    pub fn new(latency: FlushLatency) -> Self {
        Self::with_seed(latency, fresh_seed())
    }

    /// A simulated device with a fixed seed for its draws (repeatable runs).
    pub fn with_seed(latency: FlushLatency, seed: u64) -> Self {
        SimulatedDevice {
            latency,
            rng: SmallRng::seed_from_u64(seed),
            flushes: 0,
        }
    }

    /// The latency of a flush.
    pub fn latency(&self) -> FlushLatency {
        self.latency
    }

    /// How many times [`flush`](FlushDevice::flush) has been called.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }
}

impl fmt::Debug for SimulatedDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatedDevice")
            .field("latency", &self.latency.to_string())
            .field("flushes", &self.flushes)
            .finish()
    }
}

impl FlushDevice for SimulatedDevice {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn flush(&mut self, _upto: u64) -> Result<(), DeviceError> {
        self.flushes += 1;
        if self.latency.is_zero() {
            return Ok(());
        }
        let start = Instant::now();
        let draw = self.latency.draw(&mut self.rng);
        sleep_until(start + draw);
        Ok(())
    }
}

/// A seed that differs between devices made at the same instant.
fn fresh_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    clock
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Sleeps until `deadline`; returns at once, without any system call, if it
/// has passed.
fn sleep_until(deadline: Instant) {
    let mut now = Instant::now();
    if now >= deadline {
        return;
    }
    reduce_timer_slack_once();
    while now < deadline {
        pglocks_sync::time::sleep(deadline - now);
        now = Instant::now();
    }
}

#[cfg(target_os = "linux")]
thread_local! {
    /// Whether this thread's timer slack has been set to 1 ns.
    static TIMER_SLACK_REDUCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets the calling thread's timer slack to 1 ns, once per thread (see
/// [`SimulatedDevice`]). Best effort: a failure leaves the default slack.
fn reduce_timer_slack_once() {
    #[cfg(target_os = "linux")]
    TIMER_SLACK_REDUCED.with(|done| {
        if !done.get() {
            done.set(true);
            // SAFETY: PR_SET_TIMERSLACK reads only its integer argument
            // (passed as the unsigned long the kernel expects; the unused
            // arguments are zero) and changes nothing but the calling thread's
            // timer slack; no memory is passed to the kernel.
            unsafe {
                libc::prctl(
                    libc::PR_SET_TIMERSLACK,
                    1 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                );
            }
        }
    });
}

// ---------------------------------------------------------------------------
// FileDevice
// ---------------------------------------------------------------------------

/// An open segment file.
#[derive(Debug)]
struct Segment {
    segno: u64,
    path: PathBuf,
    file: File,
    /// Written since its last fdatasync.
    dirty: bool,
}

/// A real directory of WAL segment files, managed as pg_wal is.
///
/// Segment `n` holds WAL positions `n * segment_size .. (n + 1) *
/// segment_size` and is named by [`segment_file_name`](Self::segment_file_name)
/// (`XLogFileName`). A write to a new segment opens it (`XLogFileInit`): an
/// existing file of that name is used as it is; otherwise, if more than
/// `keep_segments` old segment files are left behind the current one, the
/// oldest is renamed to the new name (recycled, `InstallXLogFileSegment`);
/// otherwise a new file is created under the name `xlogtemp.PID`, zero-filled
/// to the full segment size, fsynced and renamed into place. Each rename is
/// followed by an fsync of the directory (`durable_rename`). An old segment
/// with writes not yet flushed is never recycled; surplus clean old files are
/// removed (`RemoveXlogFile`).
///
/// Writes use `pwrite` at the offset in the segment; [`flush`](FlushDevice::flush)
/// fdatasyncs every earlier segment written since the last flush, then the
/// current one (`issue_xlog_fsync` with `wal_sync_method = fdatasync`), and
/// does nothing when nothing was written since.
///
/// Segments are created or opened when the first write reaches them. After a
/// failed write or flush every call returns
/// [`DeviceError::Failed`]. A directory must be used by one device at a time
/// (the temporary name is per process, as in PostgreSQL).
#[derive(Debug)]
pub struct FileDevice {
    dir: PathBuf,
    segment_size: u64,
    keep_segments: usize,
    current: Option<Segment>,
    /// Earlier segments written since the last flush, kept open to be synced.
    unsynced: Vec<Segment>,
    /// Closed old segment files in the directory, oldest first.
    old: VecDeque<u64>,
    created: u64,
    recycled: u64,
    removed: u64,
    failed: Option<String>,
    /// Declared last so the files above are closed before it is removed.
    _temp: Option<tempfile::TempDir>,
}

impl FileDevice {
    /// Opens `dir` (created if missing) as a WAL directory of segments of
    /// `segment_size` bytes. Segments are created (or opened) as writes reach them, so the
    /// directory holds only segments with WAL in them (pg_waldump reads the segment size from
    /// the first file it finds).
    ///
    /// `segment_size` must be a power of two between `XLOG_BLCKSZ` and
    /// [`MAX_WAL_SEGMENT_SIZE`]; small sizes such as 64 kB keep tests quick.
    pub fn create(dir: &Path, segment_size: u64) -> Result<Self, DeviceError> {
        check_segment_size(segment_size)?;
        fs::create_dir_all(dir).map_err(|source| DeviceError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        Self::create_in(dir.to_path_buf(), segment_size, None)
    }

    /// Like [`create`](Self::create) in a new temporary directory that the
    /// device owns and removes when it is dropped.
    pub fn temp(segment_size: u64) -> Result<Self, DeviceError> {
        check_segment_size(segment_size)?;
        let temp = tempfile::Builder::new()
            .prefix("pg_wal.")
            .tempdir()
            .map_err(|source| DeviceError::CreateDir {
                path: std::env::temp_dir(),
                source,
            })?;
        Self::create_in(temp.path().to_path_buf(), segment_size, Some(temp))
    }

    fn create_in(
        dir: PathBuf,
        segment_size: u64,
        temp: Option<tempfile::TempDir>,
    ) -> Result<Self, DeviceError> {
        let device = FileDevice {
            dir,
            segment_size,
            keep_segments: DEFAULT_KEEP_SEGMENTS,
            current: None,
            unsynced: Vec::new(),
            old: VecDeque::new(),
            created: 0,
            recycled: 0,
            removed: 0,
            failed: None,
            _temp: temp,
        };
        Ok(device)
    }

    /// Sets how many old segment files are kept before the oldest is recycled
    /// (default [`DEFAULT_KEEP_SEGMENTS`]).
    pub fn with_keep_segments(mut self, keep_segments: usize) -> Self {
        self.keep_segments = keep_segments;
        self
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segment size in bytes.
    pub fn segment_size(&self) -> u64 {
        self.segment_size
    }

    /// How many old segment files are kept before recycling.
    pub fn keep_segments(&self) -> usize {
        self.keep_segments
    }

    /// How many segment files were created and zero-filled.
    pub fn segments_created(&self) -> u64 {
        self.created
    }

    /// How many segment files were recycled (an old one renamed to a new
    /// segment's name).
    pub fn segments_recycled(&self) -> u64 {
        self.recycled
    }

    /// How many surplus old segment files were removed.
    pub fn segments_removed(&self) -> u64 {
        self.removed
    }

    /// The file name of segment `segno` on timeline 1 (models `XLogFileName`
    /// in xlog_internal.h): timeline, then `segno / segs_per_xlogid` and
    /// `segno % segs_per_xlogid`, each as 8 hex digits, where
    /// `segs_per_xlogid = 0x1_0000_0000 / segment_size`.
    ///
    /// # Panics
    ///
    /// If `segment_size` is 0 or larger than 4 GB.
    pub fn segment_file_name(segno: u64, segment_size: u64) -> String {
        assert!(
            segment_size > 0 && segment_size <= 0x1_0000_0000,
            "invalid WAL segment size {segment_size}"
        );
        let segs_per_xlogid = 0x1_0000_0000 / segment_size;
        format!(
            "{:08X}{:08X}{:08X}",
            TIMELINE_ID,
            (segno / segs_per_xlogid) as u32,
            (segno % segs_per_xlogid) as u32
        )
    }

    fn segment_path(&self, segno: u64) -> PathBuf {
        self.dir
            .join(Self::segment_file_name(segno, self.segment_size))
    }

    fn check_usable(&self) -> Result<(), DeviceError> {
        match &self.failed {
            Some(msg) => Err(DeviceError::Failed(msg.clone())),
            None => Ok(()),
        }
    }

    /// Records a write or flush failure: the device is unusable from now on.
    fn fail(&mut self, err: DeviceError) -> DeviceError {
        self.failed = Some(err.to_string());
        err
    }

    /// Makes `segno` the current segment (the segment switch in `XLogWrite`:
    /// `XLogFileClose`, then `XLogFileInit`).
    fn open_segment(&mut self, segno: u64) -> Result<(), DeviceError> {
        if let Some(cur) = self.current.take() {
            let at = self.old.partition_point(|&s| s < cur.segno);
            if self.old.get(at) != Some(&cur.segno) {
                self.old.insert(at, cur.segno);
            }
            if cur.dirty {
                self.unsynced.push(cur); // stays open until the next flush
            }
        }
        if let Some(at) = self.old.iter().position(|&s| s == segno) {
            self.old.remove(at);
        }
        let path = self.segment_path(segno);

        // XLogFileInit: use an existing file if there is one.
        let file = match open_rw(&path) {
            Ok(file) => file,
            Err(source) if source.kind() == io::ErrorKind::NotFound => {
                let oldest_clean = self
                    .old
                    .front()
                    .copied()
                    .filter(|&s| !self.unsynced.iter().any(|u| u.segno == s));
                match oldest_clean {
                    Some(oldest) if self.old.len() > self.keep_segments => {
                        self.recycle(oldest, &path)?;
                    }
                    _ => self.init_segment(&path)?,
                }
                self.remove_surplus()?;
                open_rw(&path).map_err(|source| DeviceError::Open {
                    path: path.clone(),
                    source,
                })?
            }
            Err(source) => return Err(DeviceError::Open { path, source }),
        };
        self.current = Some(Segment {
            segno,
            path,
            file,
            dirty: false,
        });
        Ok(())
    }

    /// Renames old segment `oldest` to `path` (models the recycling branch of
    /// `RemoveXlogFile` through `InstallXLogFileSegment` / `durable_rename`).
    fn recycle(&mut self, oldest: u64, path: &Path) -> Result<(), DeviceError> {
        let from = self.segment_path(oldest);
        fs::rename(&from, path).map_err(|source| DeviceError::Rename {
            from,
            to: path.to_path_buf(),
            source,
        })?;
        self.old.pop_front();
        fsync_dir(&self.dir)?;
        self.recycled += 1;
        Ok(())
    }

    /// Creates a zero-filled segment at `path` (models `XLogFileInitInternal`
    /// with `wal_init_zero = on`: fill `xlogtemp.PID`, fsync, rename into
    /// place, fsync the directory).
    fn init_segment(&mut self, path: &Path) -> Result<(), DeviceError> {
        let tmp = self.dir.join(format!("xlogtemp.{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|source| DeviceError::Create {
                path: tmp.clone(),
                source,
            })?;
        let chunk = (XLOG_BLCKSZ * ZERO_FILL_PAGES).min(self.segment_size as usize);
        let zeros = vec![0u8; chunk];
        let mut offset = 0u64;
        while offset < self.segment_size {
            let len = chunk.min((self.segment_size - offset) as usize);
            if let Err(source) = file.write_all_at(&zeros[..len], offset) {
                drop(file);
                let _ = fs::remove_file(&tmp);
                return Err(DeviceError::InitWrite { path: tmp, source });
            }
            offset += len as u64;
        }
        if let Err(source) = file.sync_all() {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Err(DeviceError::Fsync { path: tmp, source });
        }
        drop(file);
        if let Err(source) = fs::rename(&tmp, path) {
            let _ = fs::remove_file(&tmp);
            return Err(DeviceError::Rename {
                from: tmp,
                to: path.to_path_buf(),
                source,
            });
        }
        fsync_dir(&self.dir)?;
        self.created += 1;
        Ok(())
    }

    /// Removes the oldest clean old segments beyond `keep_segments` (models
    /// the removal branch of `RemoveXlogFile`, `durable_unlink`).
    fn remove_surplus(&mut self) -> Result<(), DeviceError> {
        let mut removed_any = false;
        while self.old.len() > self.keep_segments {
            let Some(at) = self
                .old
                .iter()
                .position(|&s| !self.unsynced.iter().any(|u| u.segno == s))
            else {
                break;
            };
            let path = self.segment_path(self.old[at]);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(source) if source.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(DeviceError::Remove { path, source }),
            }
            self.old.remove(at);
            self.removed += 1;
            removed_any = true;
        }
        if removed_any {
            fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    fn write_inner(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        let segno = lsn / self.segment_size;
        let offset = lsn % self.segment_size;
        if offset + data.len() as u64 > self.segment_size {
            return Err(DeviceError::CrossesSegment {
                lsn,
                len: data.len(),
                segment_size: self.segment_size,
            });
        }
        if self.current.as_ref().map(|s| s.segno) != Some(segno) {
            self.open_segment(segno)?;
        }
        let Some(seg) = self.current.as_mut() else {
            unreachable!("open_segment leaves a current segment");
        };
        seg.file
            .write_all_at(data, offset)
            .map_err(|source| DeviceError::Write {
                path: seg.path.clone(),
                offset,
                len: data.len(),
                source,
            })?;
        seg.dirty = true;
        Ok(())
    }

    fn flush_inner(&mut self) -> Result<(), DeviceError> {
        while let Some(seg) = self.unsynced.last() {
            seg.file
                .sync_data()
                .map_err(|source| DeviceError::Fdatasync {
                    path: seg.path.clone(),
                    source,
                })?;
            self.unsynced.pop();
        }
        if let Some(seg) = self.current.as_mut() {
            if seg.dirty {
                seg.file
                    .sync_data()
                    .map_err(|source| DeviceError::Fdatasync {
                        path: seg.path.clone(),
                        source,
                    })?;
                seg.dirty = false;
            }
        }
        Ok(())
    }
}

impl FlushDevice for FileDevice {
    fn name(&self) -> &'static str {
        "file"
    }

    fn wants_bytes(&self) -> bool {
        true
    }

    /// `pg_pwrite` of `data` into its segment, switching segments first when
    /// `lsn` is in another one.
    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.check_usable()?;
        if data.is_empty() {
            return Ok(());
        }
        match self.write_inner(lsn, data) {
            Ok(()) => Ok(()),
            Err(err @ DeviceError::CrossesSegment { .. }) => Err(err),
            Err(err) => Err(self.fail(err)),
        }
    }

    /// fdatasync of every segment written since the last flush (models
    /// `issue_xlog_fsync`); `upto` is not used.
    fn flush(&mut self, _upto: u64) -> Result<(), DeviceError> {
        self.check_usable()?;
        self.flush_inner().map_err(|err| self.fail(err))
    }
}

/// `pg_wal/` and the name of the segment holding WAL position `lsn`, as
/// PostgreSQL's error messages show it (for devices without a directory of
/// their own). `segment_size` must have passed [`check_segment_size`].
pub(crate) fn wal_segment_path(lsn: u64, segment_size: u64) -> PathBuf {
    Path::new("pg_wal").join(FileDevice::segment_file_name(
        lsn / segment_size,
        segment_size,
    ))
}

/// Checks a segment size as `IsValidWalSegSize` does, but allowing sizes down
/// to one page.
pub(crate) fn check_segment_size(segment_size: u64) -> Result<(), DeviceError> {
    if segment_size.is_power_of_two()
        && segment_size >= XLOG_BLCKSZ as u64
        && segment_size <= MAX_WAL_SEGMENT_SIZE
    {
        Ok(())
    } else {
        Err(DeviceError::InvalidSegmentSize(segment_size))
    }
}

/// Opens an existing segment for writing (models `XLogFileOpen`).
fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// fsyncs a directory so a rename or removal in it is durable.
fn fsync_dir(dir: &Path) -> Result<(), DeviceError> {
    let handle = File::open(dir).map_err(|source| DeviceError::Open {
        path: dir.to_path_buf(),
        source,
    })?;
    handle.sync_all().map_err(|source| DeviceError::Fsync {
        path: dir.to_path_buf(),
        source,
    })
}

// ---------------------------------------------------------------------------
// RecordingDevice
// ---------------------------------------------------------------------------

/// A device for tests of group-commit safety: passes writes and flushes to an
/// inner device (or to none) and publishes how far the WAL has been written
/// and durably flushed.
///
/// The flushed position is raised (never lowered) to `upto` only after the
/// inner flush has returned `Ok`, so a test can assert "`XLogFlush(lsn)`
/// returned ⇒ [`flushed_upto`](Self::flushed_upto) ≥ lsn". Take the handles
/// before the device is moved into the WAL writer. The atomics are updated
/// with `SeqCst` read-modify-writes; a reader that loads with `Acquire` (or
/// `SeqCst`) sees them in order with the rest of the flush.
pub struct RecordingDevice {
    inner: Option<Box<dyn FlushDevice>>,
    written: Arc<AtomicU64>,
    flushed: Arc<AtomicU64>,
    flush_calls: Arc<AtomicU64>,
}

impl RecordingDevice {
    /// A recording device with nothing behind it (writes and flushes succeed
    /// at once).
    pub fn new() -> Self {
        RecordingDevice {
            inner: None,
            written: Arc::new(AtomicU64::new(0)),
            flushed: Arc::new(AtomicU64::new(0)),
            flush_calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A recording device in front of `inner`.
    pub fn wrap(inner: Box<dyn FlushDevice>) -> Self {
        RecordingDevice {
            inner: Some(inner),
            ..Self::new()
        }
    }

    /// The highest position flushed so far: the largest `upto` of a flush
    /// whose inner flush returned `Ok`.
    pub fn flushed_upto(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.flushed)
    }

    /// The highest end (`lsn + data.len()`) of a successful write so far.
    pub fn written_upto(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.written)
    }

    /// The number of successful flushes.
    pub fn flush_calls(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.flush_calls)
    }
}

impl Default for RecordingDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RecordingDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingDevice")
            .field("inner", &self.inner.as_ref().map(|d| d.name()))
            .field("written", &self.written.load(Ordering::SeqCst))
            .field("flushed", &self.flushed.load(Ordering::SeqCst))
            .field("flush_calls", &self.flush_calls.load(Ordering::SeqCst))
            .finish()
    }
}

impl FlushDevice for RecordingDevice {
    /// The inner device's name, or "recording" when there is none.
    fn name(&self) -> &'static str {
        self.inner.as_ref().map_or("recording", |d| d.name())
    }

    fn wants_bytes(&self) -> bool {
        self.inner.as_ref().is_some_and(|d| d.wants_bytes())
    }

    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        if let Some(inner) = self.inner.as_mut() {
            inner.write(lsn, data)?;
        }
        self.written
            .fetch_max(lsn + data.len() as u64, Ordering::SeqCst);
        Ok(())
    }

    fn write_some(&mut self, lsn: u64, data: &[u8]) -> Result<usize, DeviceError> {
        let n = match self.inner.as_mut() {
            Some(inner) => inner.write_some(lsn, data)?,
            None => data.len(),
        };
        self.written.fetch_max(lsn + n as u64, Ordering::SeqCst);
        Ok(n)
    }

    fn flush(&mut self, upto: u64) -> Result<(), DeviceError> {
        if let Some(inner) = self.inner.as_mut() {
            inner.flush(upto)?;
        }
        self.flushed.fetch_max(upto, Ordering::SeqCst);
        self.flush_calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// The inner device's, or true when there is none.
    fn fsync_enabled(&self) -> bool {
        self.inner.as_ref().map_or(true, |d| d.fsync_enabled())
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pos::DEFAULT_WAL_SEGMENT_SIZE;
    use std::os::unix::fs::MetadataExt;
    use std::sync::OnceLock;

    const SEG: u64 = 64 * 1024;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn parse(s: &str) -> FlushLatency {
        s.parse()
            .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn segment_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
            .collect()
    }

    #[test]
    fn latency_parses_good_inputs() {
        assert_eq!(parse("2ms"), FlushLatency::Fixed(ms(2)));
        assert_eq!(parse("500us"), FlushLatency::Fixed(us(500)));
        assert_eq!(parse("500µs"), FlushLatency::Fixed(us(500)));
        assert_eq!(parse("1.5ms"), FlushLatency::Fixed(us(1500)));
        assert_eq!(parse("0"), FlushLatency::Fixed(Duration::ZERO));
        assert_eq!(parse("0ms"), FlushLatency::Fixed(Duration::ZERO));
        assert_eq!(
            parse("250ns"),
            FlushLatency::Fixed(Duration::from_nanos(250))
        );
        assert_eq!(parse("2s"), FlushLatency::Fixed(Duration::from_secs(2)));
        assert_eq!(parse(" 2ms "), FlushLatency::Fixed(ms(2)));
        assert_eq!(
            parse("1.000001ms"),
            FlushLatency::Fixed(Duration::from_nanos(1_000_001))
        );
        assert_eq!(
            parse("1ms..3ms"),
            FlushLatency::Uniform {
                lo: ms(1),
                hi: ms(3)
            }
        );
        assert_eq!(
            parse("0..500us"),
            FlushLatency::Uniform {
                lo: Duration::ZERO,
                hi: us(500)
            }
        );
        assert_eq!(
            parse("2ms..2ms"),
            FlushLatency::Uniform {
                lo: ms(2),
                hi: ms(2)
            }
        );
    }

    #[test]
    fn latency_rejects_bad_inputs() {
        for bad in [
            "",
            " ",
            "2",
            "1.5",
            "ms",
            "-1ms",
            "1.ms",
            ".5ms",
            "1.5.2ms",
            "3ms..1ms",
            "1ms..",
            "..1ms",
            "1ms..2ms..3ms",
            "2 parsecs",
            "2msec",
            "0.5ns",
            "1e3ms",
            "1,5ms",
            "99999999999999999999s",
            "20000000000s",
        ] {
            match bad.parse::<FlushLatency>() {
                Err(DeviceError::InvalidLatency(s)) => assert_eq!(s, bad),
                other => panic!("{bad:?} should be rejected, got {other:?}"),
            }
        }
        let err = "fast".parse::<FlushLatency>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid flush latency 'fast': expected e.g. 2ms, 500us, 1ms..3ms or 0"
        );
    }

    #[test]
    fn latency_display_round_trips() {
        for (input, shown) in [
            ("2ms", "2ms"),
            ("500us", "500us"),
            ("500µs", "500us"),
            ("1.5ms", "1.5ms"),
            ("1500us", "1.5ms"),
            ("0", "0"),
            ("0us", "0"),
            ("250ns", "250ns"),
            ("1.234567ms", "1.234567ms"),
            ("2000ms", "2s"),
            ("1.5s", "1.5s"),
            ("1ms..3ms", "1ms..3ms"),
            ("0..2.5ms", "0..2.5ms"),
        ] {
            let latency = parse(input);
            assert_eq!(latency.to_string(), shown, "display of {input:?}");
            assert_eq!(parse(shown), latency, "re-parse of {shown:?}");
        }
        for nanos in [
            1u64,
            999,
            1_001,
            999_999,
            1_000_001,
            123_456_789,
            987_654_321_012,
        ] {
            let latency = FlushLatency::Fixed(Duration::from_nanos(nanos));
            assert_eq!(parse(&latency.to_string()), latency);
        }
    }

    #[test]
    fn latency_mean() {
        assert_eq!(parse("2ms").mean(), ms(2));
        assert_eq!(parse("1ms..3ms").mean(), ms(2));
        assert_eq!(parse("0..1ms").mean(), us(500));
        assert_eq!(parse("0").mean(), Duration::ZERO);
        assert!(parse("0").is_zero());
        assert!(!parse("0..1us").is_zero());
    }

    #[test]
    fn uniform_draws_stay_within_bounds() {
        let latency = parse("1ms..3ms");
        let mut rng = SmallRng::seed_from_u64(7);
        let draws: Vec<Duration> = (0..1000).map(|_| latency.draw(&mut rng)).collect();
        assert!(draws.iter().all(|&d| d >= ms(1) && d <= ms(3)));
        // Not all equal: the draw is random.
        assert!(draws.iter().any(|&d| d != draws[0]));
    }

    #[test]
    fn simulated_flush_sleeps_at_least_the_latency() {
        let mut dev = SimulatedDevice::new(parse("2ms"));
        assert_eq!(dev.name(), "simulated");
        assert!(!dev.wants_bytes());
        dev.write(0, &[0u8; 8192]).unwrap();
        for i in 1..=5u64 {
            let start = Instant::now();
            dev.flush(i * 8192).unwrap();
            assert!(start.elapsed() >= ms(2));
        }
        let mut dev = SimulatedDevice::with_seed(parse("1ms..3ms"), 42);
        for _ in 0..5 {
            let start = Instant::now();
            dev.flush(0).unwrap();
            assert!(start.elapsed() >= ms(1));
        }
        assert_eq!(dev.flushes(), 5);
    }

    #[test]
    fn zero_latency_returns_without_sleeping() {
        std::thread::spawn(|| {
            let mut dev = SimulatedDevice::new(parse("0"));
            for _ in 0..1000 {
                dev.flush(0).unwrap();
            }
            assert_eq!(dev.flushes(), 1000);
            // It never went to sleep, so it never touched the timer slack.
            #[cfg(target_os = "linux")]
            assert!(!TIMER_SLACK_REDUCED.with(|d| d.get()));
        })
        .join()
        .unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sleeping_sets_this_threads_timer_slack_once() {
        std::thread::spawn(|| {
            let mut dev = SimulatedDevice::new(parse("10us"));
            dev.flush(0).unwrap();
            assert!(TIMER_SLACK_REDUCED.with(|d| d.get()));
            // SAFETY: PR_GET_TIMERSLACK takes no pointer and only returns the
            // calling thread's timer slack.
            let slack = unsafe {
                libc::prctl(
                    libc::PR_GET_TIMERSLACK,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                )
            };
            assert_eq!(slack, 1);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn null_device_does_nothing() {
        let mut dev = NullDevice::new();
        assert_eq!(dev.name(), "null");
        assert!(!dev.wants_bytes());
        dev.write(123 * 8, &[1u8; 16]).unwrap();
        dev.flush(123 * 8 + 16).unwrap();
    }

    #[test]
    fn segment_file_names_follow_xlogfilename() {
        let n = FileDevice::segment_file_name;
        assert_eq!(n(0, DEFAULT_WAL_SEGMENT_SIZE), "000000010000000000000000");
        assert_eq!(n(1, DEFAULT_WAL_SEGMENT_SIZE), "000000010000000000000001");
        assert_eq!(n(255, DEFAULT_WAL_SEGMENT_SIZE), "0000000100000000000000FF");
        assert_eq!(n(256, DEFAULT_WAL_SEGMENT_SIZE), "000000010000000100000000");
        assert_eq!(
            n(0x1234 * 256 + 0xAB, DEFAULT_WAL_SEGMENT_SIZE),
            "0000000100001234000000AB"
        );
        // 1 GB segments: 4 per xlogid.
        assert_eq!(n(5, MAX_WAL_SEGMENT_SIZE), "000000010000000100000001");
        // 64 kB segments: 65536 per xlogid.
        assert_eq!(n(256, SEG), "000000010000000000000100");
        assert_eq!(n(65536, SEG), "000000010000000100000000");
    }

    #[test]
    fn segment_size_must_be_a_power_of_two_of_at_least_a_page() {
        for bad in [0, 1, 4096, 3 * 8192, 100_000, 2 * MAX_WAL_SEGMENT_SIZE] {
            match FileDevice::temp(bad) {
                Err(DeviceError::InvalidSegmentSize(s)) => assert_eq!(s, bad),
                other => panic!("segment size {bad} should be rejected, got {other:?}"),
            }
        }
        let dev = FileDevice::temp(XLOG_BLCKSZ as u64).unwrap();
        assert_eq!(dev.segment_size(), XLOG_BLCKSZ as u64);
    }

    #[test]
    fn file_device_writes_bytes_into_their_segments() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        assert_eq!(dev.name(), "file");
        assert!(dev.wants_bytes());
        assert_eq!(
            dev.segments_created(),
            0,
            "segments appear as WAL reaches them"
        );
        let dir = dev.dir().to_path_buf();
        let seg0 = dir.join("000000010000000000000000");
        let seg1 = dir.join("000000010000000000000001");
        assert!(!seg0.exists());

        // Segment 0: two whole pages, then a partial page, then a rewrite of
        // that partial page starting mid-page (as XLogWrite rewrites the
        // last, partially filled page).
        let pages = pattern(2 * XLOG_BLCKSZ, 1);
        dev.write(0, &pages).unwrap();
        let partial = pattern(1000, 2);
        dev.write(2 * XLOG_BLCKSZ as u64, &partial[..1000]).unwrap();
        let rest = pattern(2000, 3);
        dev.write(2 * XLOG_BLCKSZ as u64 + 1000, &rest).unwrap();
        // The last page of segment 0.
        let last = pattern(XLOG_BLCKSZ, 4);
        dev.write(SEG - XLOG_BLCKSZ as u64, &last).unwrap();
        dev.flush(SEG).unwrap();

        // Segment 1, at an offset inside it.
        let in_seg1 = pattern(XLOG_BLCKSZ + 8, 5);
        dev.write(SEG + 8192, &in_seg1).unwrap();
        assert!(
            dev.unsynced.is_empty(),
            "segment 0 was flushed before the switch"
        );
        dev.flush(SEG + 8192 + in_seg1.len() as u64).unwrap();
        assert_eq!(dev.segments_created(), 2);
        assert_eq!(dev.segments_recycled(), 0);

        let bytes0 = fs::read(&seg0).unwrap();
        assert_eq!(bytes0.len() as u64, SEG);
        let mut expect0 = vec![0u8; SEG as usize];
        expect0[..2 * XLOG_BLCKSZ].copy_from_slice(&pages);
        expect0[2 * XLOG_BLCKSZ..2 * XLOG_BLCKSZ + 1000].copy_from_slice(&partial);
        expect0[2 * XLOG_BLCKSZ + 1000..2 * XLOG_BLCKSZ + 3000].copy_from_slice(&rest);
        expect0[SEG as usize - XLOG_BLCKSZ..].copy_from_slice(&last);
        assert!(bytes0 == expect0, "segment 0 contents differ");

        let bytes1 = fs::read(&seg1).unwrap();
        let mut expect1 = vec![0u8; SEG as usize];
        expect1[8192..8192 + in_seg1.len()].copy_from_slice(&in_seg1);
        assert!(bytes1 == expect1, "segment 1 contents differ");

        assert_eq!(
            segment_files(&dir),
            ["000000010000000000000000", "000000010000000000000001"]
        );
    }

    #[test]
    fn flush_syncs_earlier_segments_written_since_the_last_flush() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        dev.write(SEG - 8, &[7u8; 8]).unwrap();
        dev.write(SEG, &[8u8; 8]).unwrap();
        dev.write(2 * SEG, &[9u8; 8]).unwrap();
        assert_eq!(
            dev.unsynced.iter().map(|s| s.segno).collect::<Vec<_>>(),
            [0, 1]
        );
        dev.flush(2 * SEG + 8).unwrap();
        assert!(dev.unsynced.is_empty());
        assert!(!dev.current.as_ref().unwrap().dirty);
        // A flush with nothing written since is a no-op, and succeeds.
        dev.flush(2 * SEG + 8).unwrap();
    }

    #[test]
    fn writes_crossing_a_segment_boundary_are_refused() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        match dev.write(SEG - 8, &[0u8; 16]) {
            Err(DeviceError::CrossesSegment {
                lsn,
                len,
                segment_size,
            }) => {
                assert_eq!((lsn, len, segment_size), (SEG - 8, 16, SEG));
            }
            other => panic!("expected CrossesSegment, got {other:?}"),
        }
        // A caller error, not an I/O failure: the device is still usable.
        dev.write(SEG - 8, &[0u8; 8]).unwrap();
        dev.flush(SEG).unwrap();
    }

    #[test]
    fn old_segments_are_recycled_by_renaming() {
        let mut dev = FileDevice::temp(SEG).unwrap().with_keep_segments(2);
        let dir = dev.dir().to_path_buf();
        let mut inodes = Vec::new();
        for segno in 0..6u64 {
            let data = pattern(XLOG_BLCKSZ, segno as u8);
            dev.write(segno * SEG, &data).unwrap();
            dev.flush((segno + 1) * SEG).unwrap();
            let path = dir.join(FileDevice::segment_file_name(segno, SEG));
            inodes.push(fs::metadata(&path).unwrap().ino());
        }
        // 0, 1, 2 created; 3, 4, 5 are 0, 1, 2 renamed.
        assert_eq!(dev.segments_created(), 3);
        assert_eq!(dev.segments_recycled(), 3);
        assert_eq!(dev.segments_removed(), 0);
        assert_eq!(
            &inodes[3..],
            &inodes[..3],
            "recycled files are the old inodes"
        );
        assert_eq!(
            segment_files(&dir),
            [
                "000000010000000000000003",
                "000000010000000000000004",
                "000000010000000000000005"
            ],
            "two old segments kept, no temporary file left"
        );
        // A recycled segment keeps its old contents where not overwritten (as
        // in PostgreSQL), and has the new bytes where written.
        let seg3 = fs::read(dir.join("000000010000000000000003")).unwrap();
        assert_eq!(seg3.len() as u64, SEG);
        assert_eq!(&seg3[..XLOG_BLCKSZ], &pattern(XLOG_BLCKSZ, 3)[..]);
    }

    #[test]
    fn unflushed_segments_are_not_recycled() {
        let mut dev = FileDevice::temp(SEG).unwrap().with_keep_segments(0);
        let dir = dev.dir().to_path_buf();
        dev.write(0, &[1u8; 8]).unwrap();
        // Switch without a flush: segment 0 must survive.
        dev.write(SEG, &[2u8; 8]).unwrap();
        assert_eq!(dev.segments_created(), 2);
        assert_eq!(dev.segments_recycled(), 0);
        dev.flush(SEG + 8).unwrap();
        // Now 0 and 1 are clean: 0 is recycled into 2, 1 is surplus.
        dev.write(2 * SEG, &[3u8; 8]).unwrap();
        dev.flush(2 * SEG + 8).unwrap();
        assert_eq!(dev.segments_created(), 2);
        assert_eq!(dev.segments_recycled(), 1);
        assert_eq!(dev.segments_removed(), 1);
        assert_eq!(segment_files(&dir), ["000000010000000000000002"]);
        let seg2 = fs::read(dir.join("000000010000000000000002")).unwrap();
        assert_eq!(&seg2[..8], &[3u8; 8]);
    }

    #[test]
    fn create_uses_an_existing_directory_and_keeps_it() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("pg_wal");
        {
            let mut dev = FileDevice::create(&dir, SEG).unwrap();
            assert_eq!(dev.dir(), dir);
            dev.write(16, &[5u8; 8]).unwrap();
            dev.flush(24).unwrap();
        }
        assert_eq!(segment_files(&dir), ["000000010000000000000000"]);
        // Reopening uses the existing first segment (XLogFileInit).
        let dev = FileDevice::create(&dir, SEG).unwrap();
        assert_eq!(dev.segments_created(), 0);
        let bytes = fs::read(dir.join("000000010000000000000000")).unwrap();
        assert_eq!(&bytes[16..24], &[5u8; 8]);
    }

    #[test]
    fn temp_directory_is_removed_on_drop() {
        let dev = FileDevice::temp(SEG).unwrap();
        let dir = dev.dir().to_path_buf();
        assert!(dir.is_dir());
        drop(dev);
        assert!(!dir.exists());
    }

    #[test]
    fn a_failed_device_refuses_further_calls() {
        let mut dev = FileDevice::temp(SEG).unwrap();
        fs::remove_dir_all(dev.dir()).unwrap();
        // The switch to segment 1 cannot create its file.
        match dev.write(SEG, &[0u8; 8]) {
            Err(DeviceError::Create { path, .. }) => {
                assert!(path.ends_with(format!("xlogtemp.{}", std::process::id())));
            }
            other => panic!("expected Create, got {other:?}"),
        }
        assert!(matches!(dev.flush(SEG), Err(DeviceError::Failed(_))));
        assert!(matches!(
            dev.write(0, &[0u8; 8]),
            Err(DeviceError::Failed(_))
        ));
    }

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

    /// A device whose flush fails, or which observes the recorded position
    /// while it flushes.
    struct Probe {
        fail: bool,
        recorded: Arc<OnceLock<Arc<AtomicU64>>>,
        seen_during_flush: Arc<AtomicU64>,
    }

    impl FlushDevice for Probe {
        fn name(&self) -> &'static str {
            "probe"
        }
        fn wants_bytes(&self) -> bool {
            true
        }
        fn flush(&mut self, _upto: u64) -> Result<(), DeviceError> {
            let seen = self.recorded.get().unwrap().load(Ordering::SeqCst);
            self.seen_during_flush.store(seen, Ordering::SeqCst);
            if self.fail {
                Err(DeviceError::Fdatasync {
                    path: PathBuf::from("probe"),
                    source: io::Error::from_raw_os_error(libc::EIO),
                })
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn recording_device_records_only_after_the_inner_flush() {
        let recorded = Arc::new(OnceLock::new());
        let seen = Arc::new(AtomicU64::new(u64::MAX));
        let dev = RecordingDevice::wrap(Box::new(Probe {
            fail: false,
            recorded: Arc::clone(&recorded),
            seen_during_flush: Arc::clone(&seen),
        }));
        let flushed = dev.flushed_upto();
        let written = dev.written_upto();
        let calls = dev.flush_calls();
        recorded.set(dev.flushed_upto()).unwrap();
        assert_eq!(dev.name(), "probe");
        assert!(dev.wants_bytes());

        // Moved away, as into a WAL writer thread.
        let mut dev: Box<dyn FlushDevice> = Box::new(dev);
        dev.write(0, &[0u8; 8192]).unwrap();
        dev.write(8192, &[0u8; 100 * 8]).unwrap();
        assert_eq!(written.load(Ordering::SeqCst), 8192 + 800);
        assert_eq!(flushed.load(Ordering::SeqCst), 0);
        dev.flush(8992).unwrap();
        assert_eq!(
            seen.load(Ordering::SeqCst),
            0,
            "not yet recorded during the flush"
        );
        assert_eq!(flushed.load(Ordering::SeqCst), 8992);
        // Never lowered.
        dev.flush(100).unwrap();
        assert_eq!(flushed.load(Ordering::SeqCst), 8992);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn recording_device_does_not_record_a_failed_flush() {
        let recorded = Arc::new(OnceLock::new());
        let mut dev = RecordingDevice::wrap(Box::new(Probe {
            fail: true,
            recorded: Arc::clone(&recorded),
            seen_during_flush: Arc::new(AtomicU64::new(0)),
        }));
        recorded.set(dev.flushed_upto()).unwrap();
        let flushed = dev.flushed_upto();
        dev.write(0, &[0u8; 8]).unwrap();
        assert!(dev.flush(8).is_err());
        assert_eq!(flushed.load(Ordering::SeqCst), 0);
        assert_eq!(dev.flush_calls().load(Ordering::SeqCst), 0);
    }

    #[test]
    fn recording_device_without_inner_and_around_real_devices() {
        let mut dev = RecordingDevice::new();
        assert_eq!(dev.name(), "recording");
        assert!(!dev.wants_bytes());
        let flushed = dev.flushed_upto();
        dev.write(0, &[]).unwrap();
        dev.flush(4096).unwrap();
        assert_eq!(flushed.load(Ordering::SeqCst), 4096);

        let mut dev = RecordingDevice::wrap(Box::new(FileDevice::temp(SEG).unwrap()));
        let flushed = dev.flushed_upto();
        let written = dev.written_upto();
        dev.write(SEG, &[1u8; 8192]).unwrap();
        assert_eq!(written.load(Ordering::SeqCst), SEG + 8192);
        dev.flush(SEG + 8192).unwrap();
        assert_eq!(flushed.load(Ordering::SeqCst), SEG + 8192);

        let mut dev = RecordingDevice::wrap(Box::new(SimulatedDevice::new(parse("100us"))));
        assert_eq!(dev.name(), "simulated");
        let flushed = dev.flushed_upto();
        let start = Instant::now();
        dev.flush(64).unwrap();
        assert!(start.elapsed() >= us(100));
        assert_eq!(flushed.load(Ordering::SeqCst), 64);
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
