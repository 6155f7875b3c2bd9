//! The CLOG page reader on arbitrary bytes, written as `pg_xact/0000` and read through the
//! commit log's buffers and segment file store (`checks::ClogReader`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

use std::sync::OnceLock;

/// One directory for the whole run; each input overwrites its segment.
static READER: OnceLock<checks::ClogReader> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    READER.get_or_init(checks::ClogReader::new).check(data);
});
