//! A flush device that fails on purpose: [`FaultyDevice`] wraps any [`FlushDevice`] and, as
//! its [`Faults`] plan says, fails the k-th write or fsync with an errno, makes the k-th write
//! short, or delays operations (see [`pglocks_sync::fault`] for the plans and their text form).
//!
//! What the WAL does with each fault is PostgreSQL's (xlog.c):
//! - a failed `pg_pwrite` in `XLogWrite` is `ereport(PANIC, "could not write to log file
//!   ...")`, and a failed fsync in `issue_xlog_fsync` is `ereport(PANIC, "could not fdatasync
//!   file ...")` — never retried, since a retried fsync may report success after the kernel
//!   dropped the dirty pages. WAL write and fsync failures were PANICs in every modelled
//!   release (9.1 words them "could not write to log file %u, segment %u ..." / "could not
//!   fsync log file ..."; the model uses today's wording); the 2018 "fsyncgate" fix
//!   (`data_sync_retry = off`, back-patched to 9.4) made data-file fsync failures PANIC too.
//!   The model returns [`crate::WalError::Device`] with that message, releases every lock, and
//!   marks the WAL unusable: every later call returns [`crate::WalError::Unusable`];
//! - a short write is not an error: `XLogWrite`'s loop writes the rest ([`crate::Wal`] does
//!   the same through [`FlushDevice::write_some`]);
//! - a delay only makes the operation slow.
//!
//! The WAL never reads, so read rules never fire here.

use crate::device::{check_segment_size, wal_segment_path, DeviceError, FlushDevice};
use pglocks_sync::fault::{apply_delay, os_error, Fault, Faults, IoOp};

/// A [`FlushDevice`] that injects the faults of a [`Faults`] plan into `D`'s writes and
/// fsyncs. Error messages name the segment file as `pg_wal/<XLogFileName>`, computed with the
/// segment size given at creation.
#[derive(Debug)]
pub struct FaultyDevice<D> {
    inner: D,
    faults: Faults,
    segment_size: u64,
}

impl<D: FlushDevice> FaultyDevice<D> {
    /// `inner` with `faults` injected; `segment_size` is the WAL's, for file names in
    /// messages (a power of two from 8 kB to 1 GB).
    pub fn new(inner: D, faults: Faults, segment_size: u64) -> Result<Self, DeviceError> {
        check_segment_size(segment_size)?;
        Ok(Self {
            inner,
            faults,
            segment_size,
        })
    }

    /// The live plan (a clone shares it: change or clear it while the WAL runs).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

/// How much of a `len`-byte write a short write transfers: half, in whole 8-byte words, and
/// never nothing.
fn short_len(len: usize) -> usize {
    ((len / 2) & !7).max(1).min(len)
}

impl<D: FlushDevice> FlushDevice for FaultyDevice<D> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn wants_bytes(&self) -> bool {
        self.inner.wants_bytes()
    }

    /// A whole write, as a loop of [`write_some`](Self::write_some) calls (for callers that
    /// use `write`, such as a [`crate::RecordingDevice`] in front of this one).
    fn write(&mut self, lsn: u64, data: &[u8]) -> Result<(), DeviceError> {
        let mut done = 0;
        while done < data.len() {
            done += self.write_some(lsn + done as u64, &data[done..])?;
        }
        Ok(())
    }

    fn write_some(&mut self, lsn: u64, data: &[u8]) -> Result<usize, DeviceError> {
        match apply_delay(self.faults.next(IoOp::Write)) {
            None | Some(Fault::Delay(_)) => self.inner.write_some(lsn, data),
            Some(Fault::Short) => self.inner.write_some(lsn, &data[..short_len(data.len())]),
            Some(Fault::Fail(errno)) => Err(DeviceError::Write {
                path: wal_segment_path(lsn, self.segment_size),
                offset: lsn % self.segment_size,
                len: data.len(),
                source: os_error(errno),
            }),
        }
    }

    fn flush(&mut self, upto: u64) -> Result<(), DeviceError> {
        match apply_delay(self.faults.next(IoOp::Fsync)) {
            // A short fsync is refused by the plan; treat it as none.
            None | Some(Fault::Delay(_)) | Some(Fault::Short) => self.inner.flush(upto),
            Some(Fault::Fail(errno)) => Err(DeviceError::Fdatasync {
                path: wal_segment_path(upto.saturating_sub(1), self.segment_size),
                source: os_error(errno),
            }),
        }
    }

    fn fsync_enabled(&self) -> bool {
        self.inner.fsync_enabled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RecordingDevice;
    use crate::pos::DEFAULT_WAL_SEGMENT_SIZE;
    use pglocks_sync::fault::FaultPlan;

    fn faulty(plan: &str) -> FaultyDevice<RecordingDevice> {
        let faults = Faults::new(plan.parse::<FaultPlan>().unwrap());
        FaultyDevice::new(RecordingDevice::new(), faults, DEFAULT_WAL_SEGMENT_SIZE).unwrap()
    }

    #[test]
    fn short_writes_are_half_in_words_and_never_empty() {
        assert_eq!(short_len(16384), 8192);
        assert_eq!(short_len(24), 8);
        assert_eq!(short_len(8), 1);
        assert_eq!(short_len(1), 1);
    }

    #[test]
    fn the_planned_operations_fail_with_postgresql_messages() {
        let mut d = faulty("write:2,fsync:1:enospc");
        let seg = DEFAULT_WAL_SEGMENT_SIZE;
        d.write(seg + 8192, &[0; 8192]).unwrap();
        let e = d.write(seg + 16384, &[0; 8192]).unwrap_err().to_string();
        assert_eq!(
            e,
            "could not write to log file \"pg_wal/000000010000000000000001\" at offset 16384, \
             length 8192: Input/output error (os error 5)"
        );
        let e = d.flush(2 * seg).unwrap_err().to_string();
        assert!(
            e.starts_with("could not fdatasync file \"pg_wal/000000010000000000000001\": No space"),
            "{e}"
        );
        d.flush(2 * seg).unwrap();
        assert_eq!(d.faults().injected_total(), 2);
    }

    #[test]
    fn a_short_write_writes_a_prefix_and_write_finishes_it() {
        let mut d = faulty("write:1:short");
        assert_eq!(d.write_some(8192, &[1; 16384]).unwrap(), 8192);
        let mut d = faulty("write:1:short");
        d.write(8192, &[1; 16384]).unwrap();
        assert_eq!(
            d.faults().seen(IoOp::Write),
            2,
            "the rest took a second write"
        );
        assert_eq!(
            d.inner()
                .written_upto()
                .load(std::sync::atomic::Ordering::SeqCst),
            24576
        );
    }
}
