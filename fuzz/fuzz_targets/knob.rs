//! The knob parser (`--set knob=value`, `--preset P+knob=value`: `Settings::apply`) on
//! arbitrary text (`checks::knob`); the first byte picks the preset.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((&which, rest)) = data.split_first() {
        if let Ok(assignment) = std::str::from_utf8(rest) {
            checks::knob(usize::from(which), assignment);
        }
    }
});
