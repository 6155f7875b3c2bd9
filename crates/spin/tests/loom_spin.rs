//! loom models of every spinlock: mutual exclusion over an unsynchronised counter (loom's
//! `UnsafeCell` reports any two accesses not ordered by the lock), for 2 and 3 threads.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p pglocks-spin --test loom_spin --release`.
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_proc::spin_delay::SpinDelayConfig;
use pglocks_proc::ProcTable;
use pglocks_spin::numa::{Cna, Cohort, Hmcs, QueuedSpinLock, ShflMutexWith};
use pglocks_spin::{
    FloorLock, McsLock, NaiveTasLock, PgSpinLock, QSpinLock, RawSpinLock, ShflLock, SpinLock,
    TicketLock,
};
use pglocks_sync::time::Duration;

/// Tiny delay constants so that the model also explores `perform_spin_delay`'s sleep path.
fn short_spin_config() -> SpinDelayConfig {
    SpinDelayConfig {
        min_spins_per_delay: 1,
        max_spins_per_delay: 2,
        default_spins_per_delay: 1,
        num_delays: u32::MAX,
        min_delay: Duration::from_micros(1),
        max_delay: Duration::from_micros(4),
        delay_unit: Duration::from_micros(1),
    }
}

fn mutual_exclusion<R: RawSpinLock + 'static>(threads: usize) {
    // LOOM_MAX_PREEMPTIONS overrides; by default 3 for two threads, 1 for three. Spin loops
    // make long paths (every failed try is a branch point): the builder allows 100 000 branches.
    pglocks_sync::loom_builder(if threads > 2 { 1 } else { 3 }).check(move || {
        let procs = ProcTable::with_spin_config(threads, short_spin_config());
        let lock: Arc<SpinLock<u32, R>> = Arc::new(SpinLock::new("counter", 0));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let lock = Arc::clone(&lock);
                let mut me = procs.attach().unwrap();
                loom::thread::spawn(move || {
                    let mut g = lock.lock(&mut me).unwrap();
                    // A read and a separate write: a lost update if two holders overlapped.
                    let seen = g.with(|n| *n);
                    g.with_mut(|n| *n = seen + 1);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let mut me = procs.attach().unwrap();
        assert_eq!(lock.lock(&mut me).unwrap().with(|n| *n), threads as u32);
    });
}

#[test]
fn pg_tas_spin_two_threads() {
    mutual_exclusion::<PgSpinLock<true>>(2);
}

#[test]
fn pg_tas_spin_three_threads() {
    mutual_exclusion::<PgSpinLock<true>>(3);
}

#[test]
fn pg_plain_tas_two_threads() {
    mutual_exclusion::<PgSpinLock<false>>(2);
}

#[test]
fn naive_tas_two_threads() {
    mutual_exclusion::<NaiveTasLock>(2);
}

#[test]
fn floor_two_threads() {
    mutual_exclusion::<FloorLock>(2);
}

#[test]
fn ticket_two_threads() {
    mutual_exclusion::<TicketLock>(2);
}

#[test]
fn ticket_three_threads() {
    mutual_exclusion::<TicketLock>(3);
}

#[test]
fn mcs_two_threads() {
    mutual_exclusion::<McsLock>(2);
}

#[test]
fn mcs_three_threads() {
    mutual_exclusion::<McsLock>(3);
}

/// try_lock never succeeds while another thread holds the lock.
#[test]
fn pg_try_lock_respects_holder() {
    // Bound 4 explores as many interleavings of this small model as no bound at all (17), and
    // its paths stay within loom's own branch limit (`LOOM_MAX_BRANCHES`, else 1000).
    let mut b = pglocks_sync::loom_builder(4);
    b.max_branches = loom::model::Builder::new().max_branches;
    b.check(|| {
        let procs = ProcTable::with_spin_config(2, short_spin_config());
        let lock: Arc<SpinLock<u32, PgSpinLock>> = Arc::new(SpinLock::new("flag", 0));
        let l2 = Arc::clone(&lock);
        let mut me = procs.attach().unwrap();
        let t = loom::thread::spawn(move || {
            let mut g = l2.lock(&mut me).unwrap();
            g.with_mut(|n| *n += 1);
        });
        if let Some(mut g) = lock.try_lock() {
            g.with_mut(|n| *n += 10);
        }
        t.join().unwrap();
        let v = lock.try_lock().unwrap().with(|n| *n);
        assert!(v == 1 || v == 11);
    });
}

/// Mutual exclusion with backend `i` on NUMA node `nodes[i]` of a two-node machine, two queue
/// slots per backend, each backend taking the lock `rounds` times. The four-thread models (two
/// nodes of two) run at preemption bound 0: the threads switch where they wait, which is where
/// these locks hand over, and a bound of 1 takes minutes to tens of minutes per lock.
fn numa_mutual_exclusion<R: RawSpinLock + 'static>(
    nodes: &'static [usize],
    rounds: u32,
    bound: usize,
) {
    let threads = nodes.len();
    pglocks_sync::loom_builder(bound).check(move || {
        let procs = ProcTable::new(threads + 1).with_queue_slots(2);
        let lock: Arc<SpinLock<u32, R>> = Arc::new(SpinLock::new("counter", 0));
        let handles: Vec<_> = nodes
            .iter()
            .map(|&node| {
                let lock = Arc::clone(&lock);
                let mut me = procs.attach().unwrap();
                me.set_numa_node(node, 2);
                loom::thread::spawn(move || {
                    for _ in 0..rounds {
                        let mut g = lock.lock(&mut me).unwrap();
                        let seen = g.with(|n| *n);
                        g.with_mut(|n| *n = seen + 1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let mut me = procs.attach().unwrap();
        assert_eq!(
            lock.lock(&mut me).unwrap().with(|n| *n),
            threads as u32 * rounds
        );
    });
}

/// CNA with the paths its constants make rare always taken: no shuffle reduction, and the
/// secondary queue flushed at every chance (`Cna<0, 0>`) or never (`Cna<0, MAX>`).
type CnaAlwaysFlush = QueuedSpinLock<Cna<0, 0>>;
type CnaNeverFlush = QueuedSpinLock<Cna<0, { u64::MAX }>>;
/// The cohort lock passing once, the global lock's back-off one pause and no more.
type CohortOnePass = Cohort<1, 1, 1>;
/// HMCS passing within a node once.
type HmcsOnePass = Hmcs<2>;

/// Both shapes for one lock: two nodes of two threads once each, and three threads (two on one
/// node) twice each, which reuses the nodes.
fn both_shapes<R: RawSpinLock + 'static>(first_node_pair: &'static [usize]) {
    numa_mutual_exclusion::<R>(&[0, 1, 0, 1], 1, 0);
    numa_mutual_exclusion::<R>(first_node_pair, 2, 1);
}

#[test]
fn qspinlock_on_two_nodes() {
    both_shapes::<QSpinLock>(&[0, 1, 0]);
}

#[test]
fn cna_on_two_nodes_never_flushing() {
    both_shapes::<CnaNeverFlush>(&[0, 1, 0]);
}

#[test]
fn cna_on_two_nodes_always_flushing() {
    both_shapes::<CnaAlwaysFlush>(&[0, 1, 0]);
}

#[test]
fn cohort_on_two_nodes() {
    both_shapes::<CohortOnePass>(&[0, 0, 1]);
}

#[test]
fn hmcs_on_two_nodes() {
    both_shapes::<HmcsOnePass>(&[0, 0, 1]);
}

#[test]
fn shfl_on_two_nodes() {
    both_shapes::<ShflLock>(&[0, 1, 0]);
}

/// ShflLock's blocking mutex, a waiter parking after one round of spinning.
#[test]
fn shfl_mutex_on_two_nodes_parking() {
    both_shapes::<ShflMutexWith<1>>(&[0, 1, 0]);
}
