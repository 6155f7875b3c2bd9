//! The `spin` part: mutual exclusion of PostgreSQL's spinlock, `S_LOCK` / `S_UNLOCK`
//! (s_lock.h) with `s_lock`'s spin-and-sleep slow path (s_lock.c), on the preset's `TAS_SPIN`.
//!
//! Every step takes the lock, swaps a holder flag to set (a second holder would find it set
//! already), bumps a counter by a plain load and store, clears the flag and releases. Checked
//! at every step: the flag was clear (no other holder); at the end: the counter equals the
//! increments (a second holder loses some).

use super::{check, Failure, NewPart, Part, RacyCounter, Refused, Setup, Step, Tally};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::{RawSpinLock, SpinLock};
use pglocks_sync::atomic::{AtomicBool, Ordering::SeqCst};
use rand::rngs::SmallRng;
use std::sync::Arc;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        Ok(Arc::new(Spin::<R>::new(setup.procs())))
    }
}

/// One spinlock, its holder flag and the counter it guards.
struct Spin<R: RawSpinLock> {
    procs: ProcTable,
    lock: SpinLock<(), R>,
    holder: AtomicBool,
    counter: RacyCounter,
}

impl<R: RawSpinLock> Spin<R> {
    fn new(procs: ProcTable) -> Self {
        Self {
            procs,
            lock: SpinLock::new("stress", ()),
            holder: AtomicBool::new(false),
            counter: RacyCounter::default(),
        }
    }
}

impl<R: RawSpinLock + 'static> Part for Spin<R> {
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, _: SmallRng) -> Step {
        Box::new(move |b, t| {
            let g = self.lock.lock(b)?;
            let alone = !self.holder.swap(true, SeqCst);
            self.counter.bump();
            self.holder.store(false, SeqCst);
            drop(g);
            t.ops += 1;
            check(t, alone, || "two backends held the spinlock at once".into())
        })
    }
    fn finish(&self, _: &mut Backend, total: &Tally, t: &mut Tally) -> Result<(), Failure> {
        let n = self.counter.get();
        check(t, n == total.ops, || {
            format!(
                "spinlock-guarded counter {n} after {} increments",
                total.ops
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{config, run_alone};
    use super::*;
    use pglocks_spin::StuckSpinlock;
    use std::time::Duration;

    /// A "spinlock" that lets everyone in.
    struct NoLock;

    // SAFETY: deliberately broken, used only to see the stress checks catch it; what it
    // guards in these tests is atomics only.
    unsafe impl RawSpinLock for NoLock {
        const NAME: &'static str = "nolock";
        fn new() -> Self {
            NoLock
        }
        fn lock(&self, _: &mut Backend) -> Result<(), StuckSpinlock> {
            Ok(())
        }
        fn try_lock(&self) -> bool {
            true
        }
        unsafe fn unlock(&self) {}
    }

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_lock_without_mutual_exclusion_is_caught_on_a_simulated_machine_at_a_virtual_time() {
        use super::super::simulated::{episode, tests::sim_config};
        fn no_lock(setup: &Setup<'_>) -> Result<Arc<dyn Part>, Refused> {
            Ok(Arc::new(Spin::<NoLock>::new(setup.procs())))
        }
        let entry: &'static _ = Box::leak(Box::new(super::super::PartEntry {
            name: "spin",
            new: no_lock,
        }));
        let cfg = sim_config(8, 200);
        let ep = episode(&cfg, cfg.simulated.as_ref().unwrap(), &[entry], 3).unwrap();
        let v = ep.violation.expect("two holders at once are seen");
        assert_eq!(v.part, "spin", "{v}");
        let at = v.at.expect("a simulated violation has a virtual time");
        assert!(at > Duration::ZERO && at <= ep.virtual_time, "{at:?}");
    }

    #[test]
    fn a_lock_without_mutual_exclusion_is_caught() {
        let part = Arc::new(Spin::<NoLock>::new(ProcTable::new(5)));
        let report = run_alone(&config("pg18", 4, 2_000), "spin", part, 4);
        let v = report.violation.expect("two holders at once are seen");
        assert_eq!(v.part, "spin", "{v}");
    }
}
