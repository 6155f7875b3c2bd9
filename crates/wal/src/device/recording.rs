//! [`RecordingDevice`]: a wrapper for tests of group-commit safety that publishes how far the
//! WAL has been written and durably flushed, so that a test can check `XLogFlush(lsn)` (xlog.c)
//! never returns before `lsn` is flushed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{DeviceError, FlushDevice};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{FileDevice, FlushLatency, SimulatedDevice};
    use pglocks_sync::time::{Duration, Instant};
    use std::io;
    use std::path::PathBuf;
    use std::sync::OnceLock;

    /// A segment size small enough for tests.
    const SEG: u64 = 64 * 1024;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn parse(s: &str) -> FlushLatency {
        s.parse()
            .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
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
}
