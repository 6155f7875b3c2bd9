//! The CLI's duration parser (`--duration`, `--warmup`) on arbitrary text (`checks::duration`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        checks::duration(text);
    }
});
