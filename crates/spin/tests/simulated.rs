//! The spinlocks on a simulated many-core machine: the simulator runs the same lock code, and
//! never lets two CPUs into one critical section.

use pglocks_proc::ProcTable;
use pglocks_sim::{Placement, Profile, SimThread};
use pglocks_spin::{
    CnaLock, CohortLock, HmcsLock, McsLock, NaiveTasLock, PgSpinLock, QSpinLock, RawSpinLock,
    ShflLock, TicketLock,
};
use pglocks_sync::atomic::{AtomicU64, Ordering};
use std::cell::UnsafeCell;
use std::time::Duration;

struct Counted<R> {
    lock: R,
    /// Read and written only under the lock.
    count: UnsafeCell<u64>,
    /// Touched inside the critical section, so that the simulator may switch CPUs there.
    inside: AtomicU64,
    /// The NUMA node of each holder in turn.
    holders: UnsafeCell<Vec<u8>>,
}

// SAFETY: `count` is only touched under `lock` (which is what the test checks).
unsafe impl<R: Sync> Sync for Counted<R> {}

/// `threads` virtual CPUs of `profile` each take the lock `rounds` times and increment a plain
/// counter inside; returns the counter.
fn run<R: RawSpinLock>(profile: &str, threads: usize, rounds: u64) -> u64 {
    run_recording::<R>(profile, threads, rounds).0
}

/// [`run`], returning also the NUMA node of each holder in turn.
fn run_recording<R: RawSpinLock>(profile: &str, threads: usize, rounds: u64) -> (u64, Vec<u8>) {
    let profile = Profile::find(profile).unwrap();
    let procs = ProcTable::new(threads);
    let c = Counted {
        lock: R::new(),
        count: UnsafeCell::new(0),
        inside: AtomicU64::new(0),
        holders: UnsafeCell::new(Vec::new()),
    };
    let team = (0..threads)
        .map(|i| SimThread {
            // Spread over the packages, so that transfers are long and waits overlap.
            placement: Placement::Cpu(i * profile.cpu_count() / threads),
            body: Box::new({
                let (c, procs) = (&c, &procs);
                move || {
                    let mut b = procs.attach().unwrap();
                    for _ in 0..rounds {
                        c.lock.lock(&mut b).unwrap();
                        // SAFETY: under the lock.
                        let v = unsafe { *c.count.get() };
                        c.inside.fetch_add(1, Ordering::Relaxed);
                        // SAFETY: under the lock.
                        unsafe { *c.count.get() = v + 1 };
                        // SAFETY: under the lock.
                        unsafe { (*c.holders.get()).push(b.numa_node() as u8) };
                        // SAFETY: taken above by this thread.
                        unsafe { c.lock.unlock() };
                    }
                }
            }) as Box<dyn FnOnce() + '_>,
        })
        .collect();
    let out = pglocks_sim::run(&profile, team, Duration::from_secs(60)).unwrap();
    assert!(out.ops > threads as u64 * rounds, "{out:?}");
    (c.count.into_inner(), c.holders.into_inner())
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn no_two_simulated_cpus_hold_one_spinlock() {
    for (profile, threads) in [("opteron-48", 48), ("westmere-80", 16)] {
        let n = 200;
        let want = threads as u64 * n;
        assert_eq!(run::<PgSpinLock>(profile, threads, n), want, "s_lock");
        assert_eq!(run::<NaiveTasLock>(profile, threads, n), want, "tas");
        assert_eq!(run::<TicketLock>(profile, threads, n), want, "ticket");
        assert_eq!(run::<McsLock>(profile, threads, n), want, "mcs");
    }
    // The queued and NUMA-aware locks on the 48 cores of 8 NUMA nodes (their own tests of
    // crates/spin/tests and the loom models check them further).
    let (p, n, threads) = ("opteron-48", 200, 48);
    let want = threads as u64 * n;
    assert_eq!(run::<QSpinLock>(p, threads, n), want, "qspinlock");
    assert_eq!(run::<CnaLock>(p, threads, n), want, "cna");
    assert_eq!(run::<CohortLock>(p, threads, n), want, "cohort");
    assert_eq!(run::<HmcsLock>(p, threads, n), want, "hmcs");
    assert_eq!(run::<ShflLock>(p, threads, n), want, "shfl");
}

/// The share of hand-overs that moved the lock to another NUMA node, with every core of the
/// 2-socket Haswell taking the lock.
fn node_changes<R: RawSpinLock>() -> f64 {
    let (_, holders) = run_recording::<R>("haswell-ep-2s", 36, 100);
    assert!(holders.contains(&1), "the backends know their nodes");
    let changes = holders.windows(2).filter(|w| w[0] != w[1]).count();
    changes as f64 / (holders.len() - 1) as f64
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn the_numa_aware_locks_keep_the_lock_on_one_node_where_fifo_locks_alternate() {
    let fifo = [
        ("mcs", node_changes::<McsLock>()),
        ("qspinlock", node_changes::<QSpinLock>()),
    ];
    let numa = [
        ("cna", node_changes::<CnaLock>()),
        ("cohort", node_changes::<CohortLock>()),
        ("hmcs", node_changes::<HmcsLock>()),
        ("shfl", node_changes::<ShflLock>()),
    ];
    eprintln!("share of hand-overs to another node: {fifo:?} {numa:?}");
    for (name, share) in fifo {
        assert!(share > 0.1, "{name}: {share}");
    }
    for (name, share) in numa {
        assert!(share < 0.02, "{name}: {share}");
    }
}

/// A lock that is not one: the check above would see its lost updates.
struct NoLock;

// SAFETY: none; this type exists to show the test can fail.
unsafe impl RawSpinLock for NoLock {
    const NAME: &'static str = "none";
    fn new() -> Self {
        NoLock
    }
    fn lock(&self, _: &mut pglocks_proc::Backend) -> Result<(), pglocks_spin::StuckSpinlock> {
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
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn the_check_sees_a_lock_that_excludes_nothing() {
    assert!(run::<NoLock>("opteron-48", 8, 100) < 800);
}
