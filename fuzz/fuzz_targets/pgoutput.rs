//! pgoutput's messages (the logical replication protocol as proto.c writes it) decoded from
//! arbitrary bytes, as the apply worker reads what the walsender sends.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::pgoutput(data);
});
