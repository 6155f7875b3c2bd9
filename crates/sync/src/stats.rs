//! Per-backend statistics, merged after a run.
//!
//! Nothing here is shared: each backend counts into its own [`BackendStats`] (a plain increment on
//! the hot path, no atomics, no false sharing) and the harness merges them when the threads are done,
//! as PostgreSQL's `LWLOCK_STATS` build dumps per-process counters at exit.

/// Counters of the s_lock.c spinlocks a backend took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinStats {
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Acquisitions whose first TAS failed (entered `s_lock`).
    pub contended: u64,
    /// Failed TAS attempts inside `s_lock` (each followed by `SPIN_DELAY`).
    pub spins: u64,
    /// Sleeps (`pg_usleep` calls in `perform_spin_delay`).
    pub delays: u64,
}

impl SpinStats {
    fn merge(&mut self, o: &Self) {
        self.acquisitions += o.acquisitions;
        self.contended += o.contended;
        self.spins += o.spins;
        self.delays += o.delays;
    }
}

/// One row of the wait-event table: how often a backend waited on `lock` in `mode`, and for how long.
///
/// Like a pg_stat_activity wait event, seen as totals: `lock` is the wait event's name (a tranche
/// such as `LockManager`, or `SpinDelay`), `mode` what was waited for (`exclusive`, `shared`, `sleep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitEntry {
    /// The wait event's name.
    pub lock: &'static str,
    /// What the backend waited for.
    pub mode: &'static str,
    /// Number of waits.
    pub count: u64,
    /// Total time waited, in nanoseconds.
    pub wait_ns: u64,
}

/// A backend's wait-event table (few rows; a linear scan on the slow path only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitTable {
    entries: Vec<WaitEntry>,
}

impl WaitTable {
    /// Counts one wait of `wait_ns` nanoseconds on `lock` in `mode`.
    #[cold]
    pub fn record(&mut self, lock: &'static str, mode: &'static str, wait_ns: u64) {
        self.add(lock, mode, 1, wait_ns);
    }

    fn add(&mut self, lock: &'static str, mode: &'static str, count: u64, wait_ns: u64) {
        match self
            .entries
            .iter_mut()
            .find(|e| e.lock == lock && e.mode == mode)
        {
            Some(e) => {
                e.count += count;
                e.wait_ns += wait_ns;
            }
            None => self.entries.push(WaitEntry {
                lock,
                mode,
                count,
                wait_ns,
            }),
        }
    }

    /// Adds `other`'s rows into this table.
    pub fn merge(&mut self, other: &WaitTable) {
        for e in &other.entries {
            self.add(e.lock, e.mode, e.count, e.wait_ns);
        }
    }

    /// The rows, in the order first seen.
    pub fn entries(&self) -> &[WaitEntry] {
        &self.entries
    }
}

/// Everything one backend counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// s_lock.c spinlock counters.
    pub spin: SpinStats,
    /// Wait events.
    pub waits: WaitTable,
}

impl BackendStats {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &BackendStats) {
        self.spin.merge(&other.spin);
        self.waits.merge(&other.waits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_rows_merge_by_lock_and_mode() {
        let mut a = WaitTable::default();
        a.record("SpinDelay", "sleep", 1000);
        a.record("SpinDelay", "sleep", 500);
        let mut b = WaitTable::default();
        b.record("SpinDelay", "sleep", 10);
        b.record("LockManager", "exclusive", 7);
        a.merge(&b);
        assert_eq!(a.entries().len(), 2);
        assert_eq!(a.entries()[0].count, 3);
        assert_eq!(a.entries()[0].wait_ns, 1510);
        assert_eq!(a.entries()[1].lock, "LockManager");
    }
}
