//! The isolation-spec parser (`parse_spec`: specscanner.l, specparse.y, `check_testspec`, and
//! the lock-only SQL of every block) on arbitrary text (`checks::isolation_spec`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        checks::isolation_spec(text);
    }
});
