//! Unit tests of s_lock's delay arithmetic, adaptation, the stuck-lock error, and every spinlock's
//! behaviour under real threads; plus a proptest state machine of try_lock / unlock against a
//! one-bit reference model.
#![cfg(not(loom))]

use pglocks_proc::spin_delay::{SpinDelayConfig, MAX_SPINS_PER_DELAY, MIN_SPINS_PER_DELAY};
use pglocks_proc::ProcTable;
use pglocks_spin::{
    adapt_spins_per_delay, next_delay, FloorLock, McsLock, NaiveTasLock, PgSpinLock, RawSpinLock,
    SpinDelayStatus, SpinError, SpinLock, TicketLock,
};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn delay_grows_between_one_and_two_times_rounded() {
    assert_eq!(next_delay(1000, 0.0, 1000, 1_000_000), 1000);
    assert_eq!(next_delay(1000, 0.5, 1000, 1_000_000), 1500);
    assert_eq!(next_delay(1000, 0.9999, 1000, 1_000_000), 2000);
    // 3 * 0.5 = 1.5, + 0.5 rounds to 2.
    assert_eq!(next_delay(3, 0.5, 1, 1000), 5);
}

#[test]
fn delay_wraps_to_minimum_past_maximum() {
    assert_eq!(next_delay(600_000, 0.9, 1000, 1_000_000), 1000);
    assert_eq!(next_delay(1_000_000, 0.000_001, 1000, 1_000_000), 1000);
    // Exactly the maximum is kept (the rule is "greater than").
    assert_eq!(next_delay(500_000, 0.999_999, 1000, 1_000_000), 1_000_000);
}

#[test]
fn millisecond_units_round_growth_from_one_to_one_or_two() {
    // 8.1-9.3 kept cur_delay in ms: from 1 ms the next is 1 ms (factor < 0.5) or 2 ms.
    assert_eq!(next_delay(1, 0.49, 1, 1000), 1);
    assert_eq!(next_delay(1, 0.5, 1, 1000), 2);
}

#[test]
fn adaptation_bounds() {
    let cfg = SpinDelayConfig::default();
    assert_eq!(adapt_spins_per_delay(100, false, &cfg), 200);
    assert_eq!(adapt_spins_per_delay(950, false, &cfg), MAX_SPINS_PER_DELAY);
    assert_eq!(adapt_spins_per_delay(1000, false, &cfg), 1000);
    assert_eq!(adapt_spins_per_delay(100, true, &cfg), 99);
    assert_eq!(
        adapt_spins_per_delay(MIN_SPINS_PER_DELAY, true, &cfg),
        MIN_SPINS_PER_DELAY
    );
    assert_eq!(adapt_spins_per_delay(11, true, &cfg), MIN_SPINS_PER_DELAY);
}

#[test]
fn finish_without_sleep_raises_estimate_and_with_sleep_lowers_it() {
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    assert_eq!(SpinDelayStatus::new().finish_spin_delay(&mut b), 0);
    assert_eq!(b.spin.spins_per_delay, 200);
    let slept = SpinDelayStatus {
        spins: 0,
        delays: 3,
        cur_delay: 1500,
    };
    assert_eq!(slept.finish_spin_delay(&mut b), 3);
    assert_eq!(b.spin.spins_per_delay, 199);
}

#[test]
fn perform_spin_delay_sleeps_every_spins_per_delay_tries() {
    let cfg = SpinDelayConfig {
        min_delay: Duration::from_micros(1),
        max_delay: Duration::from_micros(100),
        ..SpinDelayConfig::default()
    };
    let procs = ProcTable::with_spin_config(1, cfg);
    let mut b = procs.attach().unwrap();
    b.spin.spins_per_delay = 10;
    let mut st = SpinDelayStatus::new();
    for _ in 0..9 {
        st.perform_spin_delay(&mut b).unwrap();
    }
    assert_eq!((st.delays, st.cur_delay), (0, 0));
    st.perform_spin_delay(&mut b).unwrap();
    assert_eq!(st.delays, 1);
    assert_eq!(st.spins, 0);
    assert!(
        (1..=2).contains(&st.cur_delay),
        "grew from 1 us: {}",
        st.cur_delay
    );
    assert_eq!(b.stats.spin.delays, 1);
    assert_eq!(b.stats.spin.spins, 10);
    assert_eq!(b.stats.waits.entries()[0].lock, "SpinDelay");
}

fn fast_stuck_config() -> SpinDelayConfig {
    SpinDelayConfig {
        num_delays: 5,
        min_delay: Duration::from_micros(10),
        max_delay: Duration::from_micros(100),
        default_spins_per_delay: 10,
        ..SpinDelayConfig::default()
    }
}

#[test]
fn a_lock_never_released_is_reported_stuck_by_name() {
    let procs = ProcTable::with_spin_config(1, fast_stuck_config());
    let mut b = procs.attach().unwrap();
    let lock: SpinLock<(), PgSpinLock> = SpinLock::new("insertpos_lck", ());
    let held = lock.try_lock().unwrap();
    let start = Instant::now();
    let err = lock.lock(&mut b).err().unwrap();
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(
        err,
        SpinError::StuckSpinlock {
            lock: "insertpos_lck",
            delays: 5
        }
    );
    assert!(
        err.to_string()
            .contains("stuck spinlock detected at insertpos_lck"),
        "{err}"
    );
    assert_eq!(b.stats.spin.delays, 5);
    drop(held);
    assert!(lock.lock(&mut b).is_ok());
}

#[test]
fn a_holder_that_sleeps_makes_waiters_sleep_and_lower_their_estimate() {
    let procs = ProcTable::with_spin_config(
        2,
        SpinDelayConfig {
            min_delay: Duration::from_micros(50),
            ..SpinDelayConfig::default()
        },
    );
    let lock: Arc<SpinLock<u32, PgSpinLock>> = Arc::new(SpinLock::new("slow", 0));
    let guard = lock.try_lock().unwrap();
    let (l2, mut b) = (Arc::clone(&lock), procs.attach().unwrap());
    let waiter = std::thread::spawn(move || {
        l2.lock(&mut b).unwrap().with_mut(|n| *n += 1);
        b
    });
    std::thread::sleep(Duration::from_millis(30));
    drop(guard);
    let b = waiter.join().unwrap();
    assert!(b.stats.spin.delays >= 1);
    assert_eq!(b.stats.spin.contended, 1);
    assert_eq!(b.spin.spins_per_delay, 99);
}

/// `threads` threads each take the lock `iters` times and make a read-then-write update.
fn hammer<R: RawSpinLock + 'static>(threads: usize, iters: u64) {
    let procs = ProcTable::new(threads);
    let lock: Arc<SpinLock<u64, R>> = Arc::new(SpinLock::new("counter", 0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (lock, mut b) = (Arc::clone(&lock), procs.attach().unwrap());
            std::thread::spawn(move || {
                for _ in 0..iters {
                    let mut g = lock.lock(&mut b).unwrap();
                    let v = g.with(|n| *n);
                    g.with_mut(|n| *n = v + 1);
                }
                b.stats.spin.acquisitions
            })
        })
        .collect();
    let acquisitions: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(acquisitions, threads as u64 * iters);
    assert_eq!(
        lock.try_lock().unwrap().with(|n| *n),
        threads as u64 * iters
    );
}

#[test]
fn pg_excludes_under_threads() {
    hammer::<PgSpinLock<true>>(4, 20_000);
    hammer::<PgSpinLock<false>>(4, 20_000);
}

#[test]
fn alternatives_exclude_under_threads() {
    hammer::<NaiveTasLock>(4, 20_000);
    hammer::<FloorLock>(4, 20_000);
    // FIFO locks hand over to the next waiter even when it is descheduled, so with more threads
    // than cores each hand-over can cost a time slice: keep them to a few.
    hammer::<TicketLock>(2, 2_000);
    hammer::<McsLock>(2, 2_000);
}

#[derive(Debug, Clone)]
enum Op {
    TryLock,
    Unlock,
}

fn try_lock_model<R: RawSpinLock>(ops: &[Op]) {
    let lock = R::new();
    let mut held = false; // the reference model: one bit
    for op in ops {
        match op {
            Op::TryLock => assert_eq!(lock.try_lock(), !held, "try_lock with held={held}"),
            Op::Unlock if held => {
                // SAFETY: the model says we hold it.
                unsafe { lock.unlock() }
            }
            Op::Unlock => {}
        }
        held = match op {
            Op::TryLock => true,
            Op::Unlock => false,
        };
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn try_lock_and_unlock_follow_the_one_bit_model(
        ops in prop::collection::vec(prop_oneof![Just(Op::TryLock), Just(Op::Unlock)], 0..64)
    ) {
        try_lock_model::<PgSpinLock>(&ops);
        try_lock_model::<NaiveTasLock>(&ops);
        try_lock_model::<TicketLock>(&ops);
        try_lock_model::<McsLock>(&ops);
        try_lock_model::<FloorLock>(&ops);
    }
}
