//! What the CLI tests share: running the `pglocks` binary, and the check of a usage error.

use std::process::{Command, Output};

/// Runs the binary with `args` and returns what it printed and its status.
pub fn pglocks(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pglocks"))
        .args(args)
        .output()
        .expect("the pglocks binary runs")
}

/// `args` is a usage error: exit status 2, `needle` in the message, no panic.
pub fn fails_with(args: &[&str], needle: &str) {
    let out = pglocks(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: stderr lacks '{needle}':\n{err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
}
