//! Per-backend statistics, merged after a run.
//!
//! Nothing here is shared: each backend counts into its own [`BackendStats`] (a plain increment on
//! the hot path, no atomics, no false sharing) and the harness merges them when the threads are done,
//! as PostgreSQL's `LWLOCK_STATS` build dumps per-process counters at exit.
//!
//! Besides lock counters, a subsystem can count its own events in [`EventStats`] (named counters
//! and distributions, such as a WAL's flushes and commits per flush), reported per run as metrics.

use crate::tranche::{tranche_name, TrancheId};
use std::collections::BTreeMap;

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

/// Models lwlock.c's `lwlock_stats` entry (built with `LWLOCK_STATS`), kept per tranche rather
/// than per lock, plus the time spent asleep (which PostgreSQL's counters do not have).
///
/// Aligned to [`CACHE_LINE_SIZE`](pglocks_sync::CACHE_LINE_SIZE): the counters of two backends are
/// written on every acquisition by two threads, and must never share a cache line (unaligned,
/// two small heap buffers side by side did, and counting cost 20 % at two threads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(align(128))]
pub struct LwLockCounters {
    /// `sh_acquire_count`: `LWLockAcquire` calls in shared mode.
    pub sh_acquire: u64,
    /// `ex_acquire_count`: `LWLockAcquire` calls in exclusive mode.
    pub ex_acquire: u64,
    /// `block_count`: sleeps on the semaphore.
    pub block: u64,
    /// `dequeue_self_count`: second attempts that succeeded after queueing.
    pub dequeue_self: u64,
    /// `spin_delay_count`: spin-delay sleeps while taking the wait-list lock.
    pub spin_delay: u64,
    /// Times the wait-list lock was taken (9.5+: to queue, dequeue, wake or read a variable);
    /// PostgreSQL's `LWLOCK_STATS` has no such counter.
    pub wait_list_lock: u64,
    /// Nanoseconds asleep on the semaphore.
    pub wait_ns: u64,
}

impl LwLockCounters {
    fn merge(&mut self, o: &Self) {
        self.sh_acquire += o.sh_acquire;
        self.ex_acquire += o.ex_acquire;
        self.block += o.block;
        self.dequeue_self += o.dequeue_self;
        self.spin_delay += o.spin_delay;
        self.wait_list_lock += o.wait_list_lock;
        self.wait_ns += o.wait_ns;
    }
}

/// Tranche numbers below this are counted in one array made when counting is switched on (a
/// process registers far fewer tranches); higher ones in a vector grown on the cold path.
const DIRECT_TRANCHES: usize = 128;

/// Models the `LWLOCK_STATS` build of lwlock.c: a backend's LWLock counters by tranche, indexed
/// by [`TrancheId`] (an array, so counting costs a test, an index and an increment, not
/// PostgreSQL's per-lock hash lookup).
///
/// Nothing is counted unless switched on ([`Self::set_enabled`]), as PostgreSQL counts only in
/// an `LWLOCK_STATS` build: switched off, an acquisition pays one test of a backend-local
/// pointer. (Wait events are recorded either way, by the backend's [`WaitTable`].)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LwLockStats {
    /// `Some` exactly when counting is on.
    direct: Option<Box<[LwLockCounters; DIRECT_TRANCHES]>>,
    overflow: Vec<LwLockCounters>,
}

impl LwLockStats {
    /// Switches counting on or off (off drops what was counted).
    pub fn set_enabled(&mut self, on: bool) {
        match (on, self.direct.is_some()) {
            (true, false) => {
                self.direct = Some(Box::new([LwLockCounters::default(); DIRECT_TRANCHES]))
            }
            (false, true) => *self = Self::default(),
            _ => {}
        }
    }

    /// Whether anything is counted.
    #[inline(always)]
    pub fn enabled(&self) -> bool {
        self.direct.is_some()
    }

    /// The counters of `tranche`, if counting is on.
    #[inline(always)]
    pub fn tranche(&mut self, tranche: TrancheId) -> Option<&mut LwLockCounters> {
        let direct = self.direct.as_mut()?;
        match direct.get_mut(tranche as usize) {
            Some(c) => Some(c),
            None => Some(Self::overflow(&mut self.overflow, tranche)),
        }
    }

    #[cold]
    fn overflow(overflow: &mut Vec<LwLockCounters>, tranche: TrancheId) -> &mut LwLockCounters {
        let i = tranche as usize - DIRECT_TRANCHES;
        if i >= overflow.len() {
            overflow.resize(i + 1, LwLockCounters::default());
        }
        &mut overflow[i]
    }

    /// Counts one `LWLockAcquire` of `tranche` if counting is on.
    #[inline(always)]
    pub fn count_acquire(&mut self, tranche: TrancheId, exclusive: bool) {
        if let Some(c) = self.tranche(tranche) {
            if exclusive {
                c.ex_acquire += 1;
            } else {
                c.sh_acquire += 1;
            }
        }
    }

    /// Every tranche's counters, by tranche number (empty when counting is off).
    fn all(&self) -> impl Iterator<Item = (TrancheId, &LwLockCounters)> {
        self.direct
            .iter()
            .flat_map(|d| d.iter())
            .chain(&self.overflow)
            .enumerate()
            .map(|(i, c)| (i as TrancheId, c))
    }

    /// Adds `other`'s counters into these (tranche numbers are process-wide); counting is on
    /// afterwards if it was on in either.
    pub fn merge(&mut self, other: &LwLockStats) {
        if other.enabled() {
            self.set_enabled(true);
        }
        for (t, c) in other.all() {
            if *c != LwLockCounters::default() {
                if let Some(mine) = self.tranche(t) {
                    mine.merge(c);
                }
            }
        }
    }

    /// The tranches with any count, with their names, by tranche number.
    pub fn tranches(&self) -> Vec<(&'static str, LwLockCounters)> {
        self.all()
            .filter(|(_, c)| **c != LwLockCounters::default())
            .map(|(t, c)| (tranche_name(t), *c))
            .collect()
    }

    /// The counters as wait-table rows, the shape of the report's `waits` array: per tranche,
    /// `shacq` and `exacq` (acquisitions), `blk` (sleeps, with the time asleep), `dequeue self`
    /// and `spindelay` — the fields of PostgreSQL's `LWLOCK_STATS` output line — and the model's
    /// own `waitlist lock` (wait-list lock acquisitions).
    pub fn rows(&self) -> Vec<WaitEntry> {
        let mut rows = Vec::new();
        for (lock, c) in self.tranches() {
            for (mode, count, wait_ns) in [
                ("shacq", c.sh_acquire, 0),
                ("exacq", c.ex_acquire, 0),
                ("blk", c.block, c.wait_ns),
                ("dequeue self", c.dequeue_self, 0),
                ("spindelay", c.spin_delay, 0),
                ("waitlist lock", c.wait_list_lock, 0),
            ] {
                if count > 0 {
                    rows.push(WaitEntry {
                        lock,
                        mode,
                        count,
                        wait_ns,
                    });
                }
            }
        }
        rows
    }
}

/// A distribution of small non-negative integers (such as the commits one WAL flush covered),
/// kept exactly: how many samples had each value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Distribution {
    /// Samples by value.
    counts: BTreeMap<u64, u64>,
}

impl Distribution {
    fn record(&mut self, value: u64, n: u64) {
        *self.counts.entry(value).or_insert(0) += n;
    }

    fn merge(&mut self, other: &Distribution) {
        for (&v, &n) in &other.counts {
            self.record(v, n);
        }
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Sum of the samples (saturating).
    pub fn sum(&self) -> u64 {
        self.counts.iter().fold(0u64, |acc, (&v, &n)| {
            acc.saturating_add(v.saturating_mul(n))
        })
    }

    /// Mean of the samples; 0 without any.
    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            return 0.0;
        }
        let sum: f64 = self.counts.iter().map(|(&v, &c)| v as f64 * c as f64).sum();
        sum / n as f64
    }

    /// Largest sample; 0 without any.
    pub fn max(&self) -> u64 {
        self.counts.keys().next_back().copied().unwrap_or(0)
    }

    /// The `q`-quantile (`q` in 0..=1, clamped), exactly: the smallest sample such that at
    /// least `ceil(q × count)` samples (and at least one) are at or below it. `quantile(0.0)` is
    /// the smallest sample, `quantile(1.0)` the largest; 0 without any.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (&v, &c) in &self.counts {
            seen += c;
            if seen >= rank {
                return v;
            }
        }
        self.max()
    }
}

/// A backend's own event counts, for metrics that are not lock waits: named counters (such as
/// `wal.flushes`) and named distributions (such as `wal.commits_per_flush`, one sample per flush).
///
/// Like the rest of [`BackendStats`], it belongs to one backend and is merged after a run, never
/// shared on the hot path. Few names are expected: a lookup is a linear scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventStats {
    /// Counters, in first-recorded order.
    counters: Vec<(&'static str, u64)>,
    /// Distributions, in first-recorded order.
    distributions: Vec<(&'static str, Distribution)>,
}

impl EventStats {
    /// Adds `n` to counter `name`.
    #[inline]
    pub fn count(&mut self, name: &'static str, n: u64) {
        // The same literal is usually the same address: compare that before the bytes.
        match self
            .counters
            .iter_mut()
            .find(|(k, _)| std::ptr::eq(*k, name) || *k == name)
        {
            Some((_, total)) => *total += n,
            None => self.counters.push((name, n)),
        }
    }

    /// Records one sample of distribution `name` (e.g. commits covered by one flush).
    pub fn sample(&mut self, name: &'static str, value: u64) {
        self.distribution_mut(name).record(value, 1);
    }

    fn distribution_mut(&mut self, name: &'static str) -> &mut Distribution {
        let i = match self.distributions.iter().position(|(k, _)| *k == name) {
            Some(i) => i,
            None => {
                self.distributions.push((name, Distribution::default()));
                self.distributions.len() - 1
            }
        };
        &mut self.distributions[i].1
    }

    /// Adds `other`'s counters and samples into these (names first seen in `other` come after
    /// this one's).
    pub fn merge(&mut self, other: &EventStats) {
        for &(name, n) in &other.counters {
            self.count(name, n);
        }
        for (name, d) in &other.distributions {
            self.distribution_mut(name).merge(d);
        }
    }

    /// Counters in first-recorded order: (name, total).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.clone()
    }

    /// Distributions in first-recorded order: (name, distribution).
    pub fn distributions(&self) -> Vec<(&'static str, Distribution)> {
        self.distributions.clone()
    }

    /// Whether nothing was counted or sampled.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.distributions.is_empty()
    }
}

/// Everything one backend counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// s_lock.c spinlock counters.
    pub spin: SpinStats,
    /// Wait events.
    pub waits: WaitTable,
    /// `LWLOCK_STATS` counters.
    pub lwlock: LwLockStats,
    /// A subsystem's own counters and distributions (metrics that are not lock waits).
    pub events: EventStats,
}

impl BackendStats {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &BackendStats) {
        self.spin.merge(&other.spin);
        self.waits.merge(&other.waits);
        self.lwlock.merge(&other.lwlock);
        self.events.merge(&other.events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tranche::tranche_id;

    #[test]
    fn lwlock_acquisitions_count_only_when_enabled_and_merge_by_tranche() {
        let t = tranche_id("StatsTestTranche");
        let mut a = LwLockStats::default();
        a.count_acquire(t, true);
        assert!(a.tranches().is_empty(), "off by default");
        a.set_enabled(true);
        a.count_acquire(t, true);
        a.count_acquire(t, false);
        let c = a.tranche(t).unwrap();
        c.block += 1;
        c.wait_ns += 40;
        let mut b = LwLockStats::default();
        assert!(b.tranche(t).is_none(), "nothing counted while off");
        b.merge(&a);
        b.tranche(t).unwrap().dequeue_self += 2;
        // A tranche number past the direct array is counted too.
        b.tranche(200).unwrap().block += 1;
        assert_eq!(b.tranches().len(), 2);
        assert!(b.enabled());
        let (name, c) = b.tranches()[0];
        assert_eq!(b.tranches()[1].1.block, 1);
        assert_eq!(name, "StatsTestTranche");
        assert_eq!(
            (c.ex_acquire, c.sh_acquire, c.block, c.dequeue_self),
            (1, 1, 1, 2)
        );
        let rows = b.rows();
        let modes: Vec<_> = rows.iter().map(|r| r.mode).collect();
        assert_eq!(modes[..4], ["shacq", "exacq", "blk", "dequeue self"]);
        assert_eq!(rows[2].wait_ns, 40);
    }

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

    #[test]
    fn event_counters_add_up_in_first_recorded_order() {
        let mut e = EventStats::default();
        assert!(e.is_empty());
        e.count("wal.flushes", 1);
        e.count("wal.commits", 3);
        e.count("wal.flushes", 2);
        e.count("wal.bytes", 0);
        assert!(!e.is_empty());
        assert_eq!(
            e.counters(),
            vec![("wal.flushes", 3), ("wal.commits", 3), ("wal.bytes", 0)]
        );
        assert!(e.distributions().is_empty());
        // Names are compared by content, not by address.
        let name: &'static str = String::from("wal.commits").leak();
        e.count(name, 1);
        assert_eq!(e.counters()[1], ("wal.commits", 4));
    }

    #[test]
    fn event_samples_give_exact_count_sum_mean_max_and_quantiles() {
        let mut e = EventStats::default();
        for v in [1, 1, 2, 4, 4, 4, 8, 1, 1, 10] {
            e.sample("wal.commits_per_flush", v);
        }
        assert!(!e.is_empty());
        assert!(e.counters().is_empty());
        let ds = e.distributions();
        assert_eq!(ds.len(), 1);
        let (name, d) = &ds[0];
        assert_eq!(*name, "wal.commits_per_flush");
        assert_eq!(d.count(), 10);
        assert_eq!(d.sum(), 36);
        assert_eq!(d.mean(), 3.6);
        assert_eq!(d.max(), 10);
        // Sorted: 1 1 1 1 2 4 4 4 8 10.
        assert_eq!(d.quantile(0.0), 1);
        assert_eq!(d.quantile(0.4), 1);
        assert_eq!(d.quantile(0.5), 2);
        assert_eq!(d.quantile(0.6), 4);
        assert_eq!(d.quantile(0.9), 8);
        assert_eq!(d.quantile(0.91), 10);
        assert_eq!(d.quantile(1.0), 10);
        assert_eq!(d.quantile(7.0), 10, "clamped");
        let empty = Distribution::default();
        assert_eq!(
            (empty.count(), empty.sum(), empty.mean(), empty.max()),
            (0, 0, 0.0, 0)
        );
        assert_eq!(empty.quantile(0.5), 0);
    }

    #[test]
    fn events_merge_counters_and_samples_by_name() {
        let mut a = EventStats::default();
        a.count("wal.flushes", 2);
        a.sample("wal.commits_per_flush", 3);
        let mut b = EventStats::default();
        b.count("wal.commits", 5);
        b.count("wal.flushes", 1);
        b.sample("wal.commits_per_flush", 3);
        b.sample("wal.commits_per_flush", 1);
        b.sample("other", 7);
        a.merge(&b);
        assert_eq!(a.counters(), vec![("wal.flushes", 3), ("wal.commits", 5)]);
        let ds = a.distributions();
        assert_eq!(
            ds.iter().map(|d| d.0).collect::<Vec<_>>(),
            ["wal.commits_per_flush", "other"]
        );
        let d = &ds[0].1;
        assert_eq!((d.count(), d.sum(), d.max(), d.quantile(0.5)), (3, 7, 3, 3));
        // Merging into an empty table copies it.
        let mut c = EventStats::default();
        c.merge(&a);
        assert_eq!(c, a);
        // BackendStats merges its events too.
        let mut s = BackendStats::default();
        s.events.count("wal.flushes", 1);
        let mut t = BackendStats::default();
        t.events.count("wal.flushes", 4);
        s.merge(&t);
        assert_eq!(s.events.counters(), vec![("wal.flushes", 5)]);
    }
}
