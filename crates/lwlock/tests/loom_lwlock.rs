//! loom models of the LWLocks (9.6+ atomic, 9.5 atomic with a wait-list spinlock, the
//! spinlock-protected one of 9.4 and before, and the hand-off lock):
//! mutual exclusion of exclusive holders, shared holders never
//! overlapping an exclusive one, and no lost wake-up (every thread finishes: loom reports a
//! deadlock if a sleeper is never woken); for the hand-off lock also that a release hands the
//! lock to the queued waiter; for the NUMA-aware reader-writer locks the same on backends of two
//! NUMA nodes.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-lwlock --test loom_lwlock --release`
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use pglocks_lwlock::numa::{CohortRw, ShflRw};
use pglocks_lwlock::{
    AtomicLwLock, AtomicVar, FetchAddLwLock, HandoffLwLock, LockedVar, LwLockMode, LwLockVar,
    MutexWaitListLwLock, Pg96Layout, RawLwLock, SpinlockProtectedLwLock, StateLayout, VarProtocol,
    VarWait,
};
use pglocks_proc::spin_delay::SpinDelayConfig;
use pglocks_proc::{Backend, ProcTable};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::time::Duration;

struct Shared<K> {
    lock: K,
    data: UnsafeCell<u32>,
}

// SAFETY: `data` is only touched while `lock` is held in a mode that permits it.
unsafe impl<K: Sync> Sync for Shared<K> {}

impl<K: RawLwLock> Shared<K> {
    fn new() -> Arc<Self> {
        Arc::new(Shared {
            lock: K::new("test"),
            data: UnsafeCell::new(0),
        })
    }
}

type Atomic = AtomicLwLock;
type Spin94 = SpinlockProtectedLwLock;
type Mutex95 = MutexWaitListLwLock;
type Handoff = HandoffLwLock;
type FetchAdd = FetchAddLwLock;

fn procs(n: usize) -> ProcTable {
    ProcTable::with_spin_config(
        n,
        SpinDelayConfig {
            default_spins_per_delay: 1,
            min_spins_per_delay: 1,
            num_delays: u32::MAX,
            min_delay: Duration::from_micros(1),
            ..SpinDelayConfig::default()
        },
    )
}

fn model(threads: usize, f: impl Fn() + Sync + Send + 'static) {
    model_bounded(if threads > 2 { 1 } else { 2 }, f);
}

/// A model at preemption bound `bound` unless `LOOM_MAX_PREEMPTIONS` says otherwise.
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    pglocks_sync::loom_builder(bound).check(f);
}

fn increment<K: RawLwLock>(s: &Shared<K>, me: &mut Backend) {
    s.lock.acquire(me, LwLockMode::Exclusive).unwrap();
    // SAFETY: held exclusively.
    let seen = s.data.with(|p| unsafe { *p });
    s.data.with_mut(|p| unsafe { *p = seen + 1 });
    s.lock.release(me).unwrap();
}

/// Joins `handles`; then the lock is free to a writer and `data` is `want`.
fn joined_and_counted<K: RawLwLock>(
    handles: Vec<loom::thread::JoinHandle<()>>,
    s: &Shared<K>,
    procs: &ProcTable,
    want: u32,
) {
    for h in handles {
        h.join().unwrap();
    }
    let mut me = procs.attach().unwrap();
    assert!(s
        .lock
        .conditional_acquire(&mut me, LwLockMode::Exclusive)
        .unwrap());
    // SAFETY: held exclusively.
    assert_eq!(s.data.with(|p| unsafe { *p }), want);
    s.lock.release(&mut me).unwrap();
}

fn exclusive_holders<K: RawLwLock>(threads: usize) {
    model(threads, move || {
        let procs = procs(threads + 1);
        let s = Shared::<K>::new();
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (s, mut me) = (Arc::clone(&s), procs.attach().unwrap());
                loom::thread::spawn(move || increment(&s, &mut me))
            })
            .collect();
        joined_and_counted(handles, &s, &procs, threads as u32);
    });
}

#[test]
fn exclusive_two_threads() {
    exclusive_holders::<Atomic>(2);
    exclusive_holders::<Spin94>(2);
    exclusive_holders::<Mutex95>(2);
}

/// Three backends, so at least one sleeps on its semaphore and must be woken by a release.
#[test]
fn exclusive_three_threads_all_finish() {
    exclusive_holders::<Atomic>(3);
    exclusive_holders::<Spin94>(3);
    exclusive_holders::<Mutex95>(3);
}

#[test]
fn shared_never_overlaps_exclusive() {
    shared_vs_exclusive::<Atomic>();
    shared_vs_exclusive::<Spin94>();
    shared_vs_exclusive::<Mutex95>();
    shared_vs_exclusive::<FetchAdd>();
}

fn shared_vs_exclusive<K: RawLwLock>() {
    model(2, || {
        let procs = procs(2);
        let s = Shared::<K>::new();
        let (s2, mut writer) = (Arc::clone(&s), procs.attach().unwrap());
        let w = loom::thread::spawn(move || increment(&s2, &mut writer));
        let mut reader = procs.attach().unwrap();
        s.lock.acquire(&mut reader, LwLockMode::Shared).unwrap();
        // SAFETY: held shared; writers are excluded, so the two reads agree.
        let a = s.data.with(|p| unsafe { *p });
        let b = s.data.with(|p| unsafe { *p });
        assert_eq!(a, b);
        s.lock.release(&mut reader).unwrap();
        w.join().unwrap();
    });
}

/// Two shared holders may overlap; an exclusive waiter behind them is woken once both leave.
#[test]
fn two_readers_and_a_writer_all_finish() {
    readers_and_writer::<Atomic>();
    readers_and_writer::<Spin94>();
    readers_and_writer::<Mutex95>();
    readers_and_writer::<FetchAdd>();
}

fn readers_and_writer<K: RawLwLock>() {
    model(3, || {
        let procs = procs(3);
        let s = Shared::<K>::new();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (s, mut me) = (Arc::clone(&s), procs.attach().unwrap());
                loom::thread::spawn(move || {
                    s.lock.acquire(&mut me, LwLockMode::Shared).unwrap();
                    let _ = s.data.with(|p| unsafe { *p });
                    s.lock.release(&mut me).unwrap();
                })
            })
            .collect();
        let mut me = procs.attach().unwrap();
        increment(&s, &mut me);
        for r in readers {
            r.join().unwrap();
        }
    });
}

/// The fetch-and-add shared acquisition (`FetchAddShared`): a reader that queued behind the
/// writer adds its count, sees the writer, and backs out only after the writer's release, which
/// saw that count and woke nobody. The back-out left the lock free, so it must wake the queue
/// (here the reader itself); if it did not, the reader would sleep on a free lock and loom would
/// report the deadlock.
#[test]
fn fetch_add_back_out_wakes_what_a_release_missed() {
    model(2, || {
        let procs = procs(2);
        let s = Shared::<FetchAdd>::new();
        let mut writer = procs.attach().unwrap();
        s.lock.acquire(&mut writer, LwLockMode::Exclusive).unwrap();
        let (s2, mut reader) = (Arc::clone(&s), procs.attach().unwrap());
        let r = loom::thread::spawn(move || {
            s2.lock.acquire(&mut reader, LwLockMode::Shared).unwrap();
            // SAFETY: held shared, after the writer's release.
            let seen = s2.data.with(|p| unsafe { *p });
            s2.lock.release(&mut reader).unwrap();
            seen
        });
        // SAFETY: held exclusively.
        s.data.with_mut(|p| unsafe { *p = 1 });
        s.lock.release(&mut writer).unwrap();
        assert_eq!(r.join().unwrap(), 1);
    });
}

/// `acquire_or_wait` either gets the lock, or returns without it only once the holder has
/// released (the holder's write is then visible), and never leaves the lock held.
#[test]
fn acquire_or_wait_returns_without_the_lock_only_after_a_release() {
    or_wait::<Atomic>();
    or_wait::<Spin94>();
    or_wait::<Mutex95>();
}

fn or_wait<K: RawLwLock>() {
    model(2, || {
        let procs = procs(2);
        let s = Shared::<K>::new();
        let (s2, mut flusher) = (Arc::clone(&s), procs.attach().unwrap());
        let t = loom::thread::spawn(move || increment(&s2, &mut flusher));
        let mut me = procs.attach().unwrap();
        if s.lock
            .acquire_or_wait(&mut me, LwLockMode::Exclusive)
            .unwrap()
        {
            // SAFETY: held exclusively.
            s.data.with_mut(|p| unsafe { *p += 10 });
            s.lock.release(&mut me).unwrap();
        } else {
            // Not held: the other backend took and released the lock while we waited, and
            // its write happened before our wake-up.
            assert!(me.held_lwlocks.is_empty());
            // SAFETY: the flusher is done with `data` (loom reports it if that is not ordered).
            assert_eq!(s.data.with(|p| unsafe { *p }), 1);
        }
        t.join().unwrap();
        assert!(s
            .lock
            .conditional_acquire(&mut me, LwLockMode::Exclusive)
            .unwrap());
        let v = s.data.with(|p| unsafe { *p });
        assert!(v == 1 || v == 11, "{v}");
        s.lock.release(&mut me).unwrap();
    });
}

/// `wait_for_var` / `update_var` / `release_clear_var`, as WAL insertion uses them: an inserter
/// holds the lock, publishes progress 1, and keeps holding the lock until the flusher has seen
/// it — so the flusher must be woken by the update itself, not by a release (an update that
/// missed a queued waiter leaves both stuck, which loom reports). Then the inserter releases,
/// clearing the variable to 0, and the flusher waits on until the lock is free: every value it is
/// told differs from the one it waited on, and `Free` comes after the inserter's write.
#[test]
fn wait_for_var_is_woken_by_update_and_by_release() {
    var_protocol::<Atomic, LockedVar>();
    var_protocol::<Atomic, AtomicVar>();
    var_protocol::<Mutex95, LockedVar>();
    var_protocol::<Spin94, LockedVar>();
}

fn var_protocol<K: RawLwLock, P: VarProtocol>() {
    model(2, || {
        let procs = procs(2);
        let s = Shared::<K>::new();
        let var = Arc::new(LwLockVar::<P>::new(0));
        let seen = Arc::new(AtomicBool::new(false));
        let mut inserter = procs.attach().unwrap();
        let mut flusher = procs.attach().unwrap();
        // The inserter holds the lock before the flusher looks, as WAL's flusher only waits on
        // insertions it saw in progress.
        s.lock
            .acquire(&mut inserter, LwLockMode::Exclusive)
            .unwrap();
        let t = {
            let (s, var, seen) = (Arc::clone(&s), Arc::clone(&var), Arc::clone(&seen));
            loom::thread::spawn(move || {
                // SAFETY: held exclusively.
                s.data.with_mut(|p| unsafe { *p = 7 });
                s.lock.update_var(&mut inserter, &var, 1).unwrap();
                while !seen.load(Ordering::Acquire) {
                    loom::thread::yield_now();
                }
                s.lock.release_clear_var(&mut inserter, &var, 0).unwrap();
            })
        };
        // Held until we see 1: the first answer must be the update.
        assert_eq!(
            s.lock.wait_for_var(&mut flusher, &var, 0).unwrap(),
            VarWait::Changed(1)
        );
        seen.store(true, Ordering::Release);
        let mut old = 1;
        while let VarWait::Changed(v) = s.lock.wait_for_var(&mut flusher, &var, old).unwrap() {
            assert_ne!(v, old);
            old = v;
        }
        assert!(flusher.held_lwlocks.is_empty());
        t.join().unwrap();
        s.lock.acquire(&mut flusher, LwLockMode::Shared).unwrap();
        // SAFETY: held shared.
        assert_eq!(s.data.with(|p| unsafe { *p }), 7);
        s.lock.release(&mut flusher).unwrap();
    });
}

// The hand-off lock: one test per model, so that each one's run time shows.

#[test]
fn handoff_exclusive_two_threads() {
    exclusive_holders::<Handoff>(2);
}

/// At least one backend sleeps and must be handed the lock.
#[test]
fn handoff_exclusive_three_threads_all_finish() {
    exclusive_holders::<Handoff>(3);
}

#[test]
fn handoff_shared_never_overlaps_exclusive() {
    shared_vs_exclusive::<Handoff>();
}

/// Shared holders granted together or by the fast path; the writer handed the lock by the last.
#[test]
fn handoff_two_readers_and_a_writer_all_finish() {
    readers_and_writer::<Handoff>();
}

#[test]
fn handoff_acquire_or_wait_returns_without_the_lock_only_after_a_release() {
    or_wait::<Handoff>();
}

/// What makes it a hand-off: a backend that releases while another is queued, then asks again
/// at once, gets the lock only after the waiter has had it (PostgreSQL's lets it re-take it).
#[test]
fn handoff_release_hands_the_lock_to_the_queued_waiter() {
    model(2, || {
        let procs = procs(2);
        let s = Shared::<Handoff>::new();
        let mut me = procs.attach().unwrap();
        s.lock.acquire(&mut me, LwLockMode::Exclusive).unwrap();
        let (s2, mut waiter) = (Arc::clone(&s), procs.attach().unwrap());
        let t = loom::thread::spawn(move || increment(&s2, &mut waiter));
        while s.lock.state() & Pg96Layout::HAS_WAITERS == 0 {
            loom::thread::yield_now();
        }
        s.lock.release(&mut me).unwrap();
        s.lock.acquire(&mut me, LwLockMode::Exclusive).unwrap();
        // SAFETY: held exclusively.
        assert_eq!(s.data.with(|p| unsafe { *p }), 1, "the waiter went first");
        s.lock.release(&mut me).unwrap();
        t.join().unwrap();
    });
}

/// Nobody takes the lock past the queue, not even in the moment between a release making it
/// free and the hand-over granting it: a conditional acquire that lands there must fail, or it
/// and the waiter granted the lock would both hold it. (It may succeed only once the waiter is
/// done.) Two preemptions reach that moment.
#[test]
fn handoff_no_barging_between_release_and_hand_over() {
    model_bounded(2, || {
        let procs = procs(3);
        let s = Shared::<Handoff>::new();
        let mut me = procs.attach().unwrap();
        s.lock.acquire(&mut me, LwLockMode::Exclusive).unwrap();
        let (s2, mut waiter) = (Arc::clone(&s), procs.attach().unwrap());
        let w = loom::thread::spawn(move || increment(&s2, &mut waiter));
        let (s3, mut newcomer) = (Arc::clone(&s), procs.attach().unwrap());
        let n = loom::thread::spawn(move || {
            if s3
                .lock
                .conditional_acquire(&mut newcomer, LwLockMode::Exclusive)
                .unwrap()
            {
                // SAFETY: held exclusively (loom reports an overlap with the waiter's turn).
                let seen = s3.data.with(|p| unsafe { *p });
                s3.data.with_mut(|p| unsafe { *p = seen + 1 });
                s3.lock.release(&mut newcomer).unwrap();
            }
        });
        while s.lock.state() & Pg96Layout::HAS_WAITERS == 0 {
            loom::thread::yield_now();
        }
        s.lock.release(&mut me).unwrap();
        w.join().unwrap();
        n.join().unwrap();
    });
}

/// One thread takes the lock, releases it and then raises a flag (all relaxed: no
/// synchronisation); the other reads the flag and, seeing it raised, makes one
/// `LWLockAttemptLock`. Returns whether that attempt said "must wait".
fn attempt_after_a_seen_release<K: RawLwLock + AttemptProbe>() -> impl Fn() -> bool {
    || {
        let procs = procs(2);
        let lock = Arc::new(K::new("test"));
        let raised = Arc::new(AtomicBool::new(false));
        let (l2, r2) = (Arc::clone(&lock), Arc::clone(&raised));
        let mut holder = procs.attach().unwrap();
        let t = loom::thread::spawn(move || {
            l2.acquire(&mut holder, LwLockMode::Exclusive).unwrap();
            l2.release(&mut holder).unwrap();
            r2.store(true, Ordering::Relaxed);
        });
        let must_wait = raised.load(Ordering::Relaxed)
            && lock.attempt(LwLockMode::Exclusive) == LockAttempt::MustWait;
        t.join().unwrap();
        must_wait
    }
}

/// `LWLockAttemptLock` without locking: the bare attempt.
use pglocks_lwlock::LockAttempt;

trait AttemptProbe {
    fn attempt(&self, mode: LwLockMode) -> LockAttempt;
}

impl<L: StateLayout, W: pglocks_lwlock::WaitListLock, A: pglocks_lwlock::AttemptRule> AttemptProbe
    for AtomicLwLock<L, W, A>
{
    fn attempt(&self, mode: LwLockMode) -> LockAttempt {
        self.attempt_lock(mode)
    }
}

#[test]
fn attempt_lock_swaps_even_when_taken_so_it_never_acts_on_a_stale_word() {
    // PostgreSQL's attempt always compare-and-swaps (the swap "doubles as a memory barrier"):
    // a read-modify-write reads the newest value of the word, so once a release happened
    // before the attempt in any order the thread could observe, the attempt sees the lock free.
    let f = attempt_after_a_seen_release::<Atomic>();
    model_bounded(2, move || {
        assert!(!f(), "the attempt acted on a stale word")
    });
}

#[test]
fn a_read_first_attempt_can_act_on_a_stale_word() {
    // The prototype that returns on a visibly taken lock without a swap may read a value older
    // than a release the thread has already seen the effects of — the deviation the swap
    // prevents, and the reason the model had to lose it.
    static STALE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let f = attempt_after_a_seen_release::<
        AtomicLwLock<Pg96Layout, pglocks_lwlock::LockedBit, pglocks_lwlock::ReadFirst>,
    >();
    model_bounded(2, move || {
        if f() {
            STALE.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(STALE.load(std::sync::atomic::Ordering::Relaxed));
}

// The NUMA-aware reader-writer locks, with the paths their constants make rare always taken: a
// reader out of patience after one round (C-RW-WP's writer barrier), a wait-lock waiter parking
// after one round (ShflLock's).

type CohortRwImpatient = CohortRw<1>;
type ShflRwParking = ShflRw<1>;

/// Backend `i` on NUMA node `nodes[i]` of two, two queue slots each; `writers[i]` says whether
/// it writes (`data` + 1) or reads (two reads that must agree). Every thread finishes, and the
/// count is the writers'.
fn numa_readers_and_writers<K: RawLwLock>(nodes: &'static [usize], writers: &'static [bool]) {
    model_bounded(1, move || {
        let procs = procs(nodes.len() + 1).with_queue_slots(2);
        let s = Shared::<K>::new();
        let handles: Vec<_> = nodes
            .iter()
            .zip(writers)
            .map(|(&node, &writes)| {
                let (s, mut me) = (Arc::clone(&s), procs.attach().unwrap());
                me.set_numa_node(node, 2);
                loom::thread::spawn(move || {
                    if writes {
                        increment(&s, &mut me);
                    } else {
                        s.lock.acquire(&mut me, LwLockMode::Shared).unwrap();
                        // SAFETY: held shared; writers are excluded, so the two reads agree.
                        let a = s.data.with(|p| unsafe { *p });
                        let b = s.data.with(|p| unsafe { *p });
                        assert_eq!(a, b);
                        s.lock.release(&mut me).unwrap();
                    }
                })
            })
            .collect();
        let want = writers.iter().filter(|&&w| w).count() as u32;
        joined_and_counted(handles, &s, &procs, want);
    });
}

#[test]
fn cohort_rw_writers_exclude_each_other() {
    numa_readers_and_writers::<CohortRwImpatient>(&[0, 1], &[true, true]);
}

#[test]
fn cohort_rw_readers_of_two_nodes_and_a_writer() {
    numa_readers_and_writers::<CohortRwImpatient>(&[0, 1, 0], &[false, false, true]);
}

#[test]
fn cohort_rw_acquire_or_wait() {
    or_wait::<CohortRwImpatient>();
}

#[test]
fn shfl_rw_writers_exclude_each_other() {
    numa_readers_and_writers::<ShflRwParking>(&[0, 1, 0], &[true, true, true]);
}

#[test]
fn shfl_rw_readers_of_two_nodes_and_a_writer() {
    numa_readers_and_writers::<ShflRwParking>(&[0, 1, 0], &[false, false, true]);
}

#[test]
fn shfl_rw_acquire_or_wait() {
    or_wait::<ShflRwParking>();
}
