//! The NUMA-aware locks (ShflLock's blocking mutex among them) and qspinlock on this machine's threads: mutual exclusion with the
//! backends spread over two NUMA nodes, `try_lock` against a one-bit model, and the fallback
//! when a backend has no queue node left.

use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::numa::{Cna, Cohort, Hmcs, ShflMutex, ShflMutexWith};
use pglocks_spin::{CnaLock, CohortLock, HmcsLock, QSpinLock, RawSpinLock, ShflLock, SpinLock};
use proptest::prelude::*;
use std::sync::Arc;

/// `threads` backends, alternately on nodes 0 and 1 of a two-node machine, each taking the lock
/// `iters` times for a read-then-write update.
fn hammer<R: RawSpinLock + 'static>(threads: usize, iters: u64) {
    let procs = ProcTable::new(threads);
    let lock: Arc<SpinLock<u64, R>> = Arc::new(SpinLock::new("counter", 0));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (lock, mut b) = (Arc::clone(&lock), procs.attach().unwrap());
            b.set_numa_node(i % 2, 2);
            std::thread::spawn(move || {
                for _ in 0..iters {
                    let mut g = lock.lock(&mut b).unwrap();
                    let v = g.with(|n| *n);
                    g.with_mut(|n| *n = v + 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        lock.try_lock().unwrap().with(|n| *n),
        threads as u64 * iters,
        "{}",
        R::NAME
    );
}

#[test]
fn every_numa_lock_excludes_across_two_nodes() {
    // Queue locks hand over to a waiter even when it is descheduled: few threads on 2 CPUs.
    hammer::<QSpinLock>(3, 3_000);
    hammer::<CnaLock>(3, 3_000);
    hammer::<CohortLock>(3, 3_000);
    hammer::<HmcsLock>(3, 3_000);
    hammer::<ShflLock>(3, 3_000);
    hammer::<ShflMutex>(3, 3_000);
    // Three backends on two cores, parking after ten rounds: some sleep and must be woken.
    hammer::<ShflMutexWith<10>>(3, 3_000);
    // The paths the published constants make rare: CNA flushing at every chance, one pass.
    hammer::<pglocks_spin::numa::QueuedSpinLock<Cna<0, 0>>>(3, 3_000);
    hammer::<Cohort<1, 1, 1>>(3, 3_000);
    hammer::<Hmcs<2>>(3, 3_000);
}

/// Takes `lock` `depth` locks deep with one backend: past its queue slots, each lock falls
/// back to spinning on `try_lock`, which finds them free.
fn nested<R: RawSpinLock>(me: &mut Backend, depth: usize) {
    let locks: Vec<R> = (0..depth).map(|_| R::new()).collect();
    for l in &locks {
        l.lock(me).unwrap();
    }
    for l in locks.iter().rev() {
        // SAFETY: taken above.
        unsafe { l.unlock() };
    }
}

#[test]
fn a_backend_holding_more_locks_than_its_slots_still_takes_them() {
    let procs = ProcTable::new(1).with_queue_slots(2);
    let mut me = procs.attach().unwrap();
    nested::<CohortLock>(&mut me, 5);
    nested::<HmcsLock>(&mut me, 5);
    nested::<QSpinLock>(&mut me, 5);
    nested::<CnaLock>(&mut me, 5);
    nested::<ShflLock>(&mut me, 5);
    nested::<ShflMutex>(&mut me, 5);
}

#[derive(Debug, Clone)]
enum Op {
    Lock,
    TryLock,
    Unlock,
}

/// One backend's operations against a one-bit model of the lock.
fn one_bit_model<R: RawSpinLock>(me: &mut Backend, ops: &[Op]) {
    let lock = R::new();
    let mut held = false;
    for op in ops {
        match op {
            Op::Lock if !held => {
                lock.lock(me).unwrap();
                held = true;
            }
            Op::Lock => {}
            Op::TryLock => {
                assert_eq!(lock.try_lock(), !held, "{} try_lock, held={held}", R::NAME);
                held = true;
            }
            Op::Unlock if held => {
                // SAFETY: the model says we hold it.
                unsafe { lock.unlock() };
                held = false;
            }
            Op::Unlock => {}
        }
    }
    if held {
        // SAFETY: as above.
        unsafe { lock.unlock() };
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn lock_try_lock_and_unlock_follow_the_one_bit_model(
        ops in prop::collection::vec(
            prop_oneof![Just(Op::Lock), Just(Op::TryLock), Just(Op::Unlock)], 0..64)
    ) {
        let procs = ProcTable::new(1);
        let mut me = procs.attach().unwrap();
        me.set_numa_node(1, 2);
        one_bit_model::<QSpinLock>(&mut me, &ops);
        one_bit_model::<CnaLock>(&mut me, &ops);
        one_bit_model::<CohortLock>(&mut me, &ops);
        one_bit_model::<HmcsLock>(&mut me, &ops);
        one_bit_model::<ShflLock>(&mut me, &ops);
        one_bit_model::<ShflMutex>(&mut me, &ops);
    }
}
