//! [`NullDevice`]: the flush device of `fsync = off` (`issue_xlog_fsync` in xlog.c with
//! `enableFsync` off): writes and flushes cost nothing.

use super::{DeviceError, FlushDevice};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_device_does_nothing() {
        let mut dev = NullDevice::new();
        assert_eq!(dev.name(), "null");
        assert!(!dev.wants_bytes());
        dev.write(123 * 8, &[1u8; 16]).unwrap();
        dev.flush(123 * 8 + 16).unwrap();
    }
}
