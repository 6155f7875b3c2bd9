//! What the criterion benches share.

use criterion::Criterion;
use std::time::Duration;

/// Short runs (10 samples, 200 ms warm-up, 1 s measurement) unless `PGLOCKS_BENCH_LONG=1`, which
/// restores criterion's defaults.
pub fn config() -> Criterion {
    if std::env::var("PGLOCKS_BENCH_LONG").is_ok_and(|v| v == "1") {
        Criterion::default()
    } else {
        Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1))
    }
}
