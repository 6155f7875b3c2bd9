//! The CLI's thread-list parser (`--threads`) on arbitrary text (`checks::threads`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        checks::threads(text);
    }
});
