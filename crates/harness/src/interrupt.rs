//! Stopping a run early, keeping what it measured.
//!
//! One process-wide flag: a front end (the CLI's SIGINT handler) raises it with
//! [`request_stop`], which is a single atomic store and so safe inside a signal handler. A team
//! in its warm-up or measured phase sees it within one of its 20 ms sleeps and stops its threads;
//! a run that had measured at least 100 ms keeps what it measured (a shorter `elapsed`), one
//! that had not is discarded ([`HarnessError::Interrupted`](crate::HarnessError::Interrupted)),
//! and a sweep returns the points it has, its report marked `interrupted`.

use std::sync::atomic::{AtomicBool, Ordering};

/// Raised when the run should stop.
static STOP: AtomicBool = AtomicBool::new(false);

/// Asks every team and sweep to stop as soon as it can.
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a stop has been asked for.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Lowers the flag (for a front end that runs again after an interrupted run, and for tests).
pub fn clear() {
    STOP.store(false, Ordering::SeqCst);
}
