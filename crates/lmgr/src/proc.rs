//! Models the lock waits of proc.c: `JoinWaitQueue` (the first half of `ProcSleep` before 18),
//! `ProcSleep`, `ProcLockWakeup`/`ProcWakeup`, `RemoveFromWaitQueue` and `CheckDeadLock`.
//!
//! # The algorithm
//! A request that cannot be granted joins the lock's wait queue, normally at the back. The
//! exception is a backend that already holds some mode of the lock: if a waiter in the queue
//! wants a mode that conflicts with what we hold, it waits for us anyway, so we go in front of
//! the first such waiter (waiting behind it would be a certain deadlock); if in addition we
//! conflict with what *that* waiter holds, the deadlock is certain now and is reported at once
//! (the "early" or simple deadlock), and if nothing granted or queued ahead of that point
//! conflicts with us we are granted on the spot.
//!
//! The waiter then sleeps on its semaphore until its status changes. Whoever releases a mode
//! that a waiter wanted walks the queue front to back and grants each waiter that conflicts
//! neither with the granted modes nor with a request still waiting ahead of it, setting its
//! status before posting its semaphore. A waiter still asleep when its own `deadlock_timeout`
//! expires takes every partition lock, and runs the deadlock checker ([`crate::deadlock`]): a
//! soft deadlock is resolved by rewriting queues, a hard one takes the checker out of its queue
//! with an error. `lock_timeout`, when set, cancels the wait the same way.
//!
//! Both timers can also be fired from outside ([`LockManager::fire_timeout`], what their signal
//! handlers do in PostgreSQL): a caller that keeps its own clock, such as the virtual time of
//! the isolation tester (pglocks-isolation), gives the waiter [`LockTimeouts::EXTERNAL`] and fires
//! each timer when its clock says so; the waiter handles it exactly as it handles its own timer.
//!
//! Differences from PostgreSQL: the timers are the timeout of the semaphore sleep rather than
//! signals or latches; a backend whose lock was granted in the instant its `lock_timeout` expired
//! gives the lock straight back (PostgreSQL records it and releases it when the error aborts the
//! transaction; the outcome is the same). `log_lock_waits` messages are not produced; the time
//! waited is recorded as the `Lock` wait event of the tag's type.

use crate::deadlock::{dead_lock_check, DeadlockInfo, DeadlockState, WaitGraph};
use crate::table::{AllPartitions, Lock, PartitionLocks, Waiter};
use crate::{LmgrError, LockManager, LockMode, LockTag};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_sync::atomic::{
    AtomicU8,
    Ordering::{Acquire, Release},
};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::shmem::Placed;
use pglocks_sync::time::{Duration, Instant};
use pglocks_sync::CachePadded;

/// proc.h's `PROC_WAIT_STATUS_OK`: not waiting, or granted.
const STATUS_OK: u8 = 0;
/// `PROC_WAIT_STATUS_WAITING`.
const STATUS_WAITING: u8 = 1;
/// `PROC_WAIT_STATUS_ERROR`: taken out of the queue (deadlock or timeout).
const STATUS_ERROR: u8 = 2;

/// Bits of [`WaitSlot::fired`]: timers fired from outside and not handled yet.
const FIRED_DEADLOCK: u8 = 1;
const FIRED_LOCK: u8 = 2;

/// The lock-wait fields of one backend's `PGPROC`.
struct WaitSlot {
    /// `waitStatus`: written under the partition lock of the awaited lock; read by the owner
    /// without it.
    status: AtomicU8,
    /// `waitLock`: written under the partition lock of the awaited lock; read by the deadlock
    /// checker with every partition held.
    wait_lock: UnsafeCell<Option<LockTag>>,
    /// Timers fired by [`LockManager::fire_timeout`] (`got_deadlock_timeout` and the lock
    /// timeout's pending cancel), cleared by the waiter once it has handled them.
    fired: AtomicU8,
}

/// Every backend's lock-wait fields.
/// Placed in a simulated machine's shared-memory map as the `PGPROC`s' lock-wait fields.
pub(crate) struct WaitSlots {
    /// (First: fields drop in declaration order, and the map must forget this memory before it
    /// is freed.)
    _placed: Placed,
    slots: Box<[CachePadded<WaitSlot>]>,
}

// SAFETY: `wait_lock` is written only under the partition lock of the tag it names (or of the
// tag it replaces), and read only with that partition lock (or all of them) held; `status` is
// atomic.
unsafe impl Sync for WaitSlots {}

impl WaitSlots {
    pub fn new(backends: usize) -> Self {
        let slots: Box<[CachePadded<WaitSlot>]> = (0..backends)
            .map(|_| {
                CachePadded::new(WaitSlot {
                    status: AtomicU8::new(STATUS_OK),
                    wait_lock: UnsafeCell::new(None),
                    fired: AtomicU8::new(0),
                })
            })
            .collect();
        Self {
            _placed: Placed::slice("PGPROC lock-wait fields", &slots),
            slots,
        }
    }

    /// Marks `procno` as waiting for `tag` (under `tag`'s partition lock).
    fn start_waiting(&self, procno: u32, tag: LockTag) {
        let slot = &self.slots[procno as usize];
        // SAFETY: the caller holds `tag`'s partition lock (see `WaitSlots`).
        slot.wait_lock.with_mut(|p| unsafe { *p = Some(tag) });
        // Release: whoever sees the waiting status (`is_waiting`) also sees what the backend
        // did before it asked for the lock.
        slot.status.store(STATUS_WAITING, Release);
    }

    /// `ProcWakeup`'s state change for `procno` (under its lock's partition lock); the caller
    /// posts the semaphore once the partition lock is released.
    fn finish_waiting(&self, procno: u32, status: u8) {
        let slot = &self.slots[procno as usize];
        // SAFETY: the caller holds the partition lock of the lock `procno` waited for.
        slot.wait_lock.with_mut(|p| unsafe { *p = None });
        slot.status.store(status, Release);
    }

    fn status(&self, procno: u32) -> u8 {
        self.slots[procno as usize].status.load(Acquire)
    }

    fn fired(&self, procno: u32) -> u8 {
        self.slots[procno as usize].fired.load(Acquire)
    }

    /// Clears `bits` of `procno`'s fired timers once they are handled.
    fn clear_fired(&self, procno: u32, bits: u8) {
        self.slots[procno as usize].fired.fetch_and(!bits, Release);
    }

    /// `waitLock` of `procno`; the caller holds every partition lock.
    fn wait_lock(&self, procno: u32) -> Option<LockTag> {
        // SAFETY: the caller holds every partition lock (see `WaitSlots`).
        self.slots[procno as usize]
            .wait_lock
            .with(|p| unsafe { *p })
    }
}

/// The session settings a waiting acquire obeys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockTimeouts {
    /// `deadlock_timeout`: how long to wait before running the deadlock check (default 1 s).
    pub deadlock_timeout: Duration,
    /// `lock_timeout` (9.3+): give up the wait after this long (`None` = 0 = never).
    pub lock_timeout: Option<Duration>,
}

impl LockTimeouts {
    /// Timers that never expire by themselves within a run (`deadlock_timeout` of `INT_MAX`
    /// ms, the largest PostgreSQL accepts, about 24.8 days; no `lock_timeout`), for a waiter
    /// whose timers are fired from outside with [`LockManager::fire_timeout`].
    pub const EXTERNAL: LockTimeouts = LockTimeouts {
        deadlock_timeout: Duration::from_millis(i32::MAX as u64),
        lock_timeout: None,
    };
}

/// One of the two timers of a lock wait (timeout.c's `TimeoutId`s that `ProcSleep` enables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitTimeout {
    /// `DEADLOCK_TIMEOUT`: run the deadlock check.
    Deadlock,
    /// `LOCK_TIMEOUT`: give up the wait with "canceling statement due to lock timeout".
    Lock,
}

impl Default for LockTimeouts {
    fn default() -> Self {
        Self {
            deadlock_timeout: Duration::from_secs(1),
            lock_timeout: None,
        }
    }
}

/// What joining the wait queue came to.
pub(crate) enum Joined {
    /// Granted at once (the queue rule put us in front with nothing conflicting).
    Granted,
    /// In the queue: sleep.
    Waiting,
    /// Would have to wait, and the request said not to.
    WouldWait,
    /// A certain deadlock with a waiter already in the queue.
    EarlyDeadlock(Vec<DeadlockInfo>),
}

/// The waits-for graph as the deadlock checker reads it, with every partition held.
struct TableGraph<'a, 'b> {
    all: &'a AllPartitions<'b>,
    waits: &'a WaitSlots,
}

impl WaitGraph for TableGraph<'_, '_> {
    fn waiting_on(&self, procno: u32) -> Option<LockTag> {
        self.waits.wait_lock(procno)
    }

    fn lock(&self, tag: &LockTag) -> Option<&Lock> {
        self.all.get(tag)
    }
}

impl<K: RawLwLock> LockManager<K> {
    /// Models `JoinWaitQueue` (18; the first half of `ProcSleep` before): queues `me`'s request
    /// for `mode` on `lock` by PostgreSQL's rule, or grants it at once, or finds the early
    /// deadlock. With `dont_wait` (17+) it never queues. The caller holds the partition lock.
    pub(crate) fn join_wait_queue(
        &self,
        lock: &mut Lock,
        tag: LockTag,
        me: u32,
        mode: LockMode,
        dont_wait: bool,
    ) -> Joined {
        let held = lock.held_by(me);
        let mut insert_at = lock.wait_queue.len();
        if held != 0 {
            let mut ahead = 0;
            for (i, w) in lock.wait_queue.iter().enumerate() {
                if w.mode.conflicts() & held != 0 {
                    // It must wait for us.
                    if mode.conflicts() & w.held != 0 {
                        // And we for it.
                        return Joined::EarlyDeadlock(vec![
                            DeadlockInfo {
                                tag,
                                mode,
                                procno: me,
                            },
                            DeadlockInfo {
                                tag,
                                mode: w.mode,
                                procno: w.procno,
                            },
                        ]);
                    }
                    if mode.conflicts() & ahead == 0 && !lock.check_conflicts(mode, me) {
                        lock.grant(me, mode);
                        return Joined::Granted;
                    }
                    insert_at = i;
                    break;
                }
                ahead |= w.mode.bit();
            }
        }
        if dont_wait {
            return Joined::WouldWait;
        }
        lock.wait_queue.insert(
            insert_at,
            Waiter {
                procno: me,
                mode,
                held,
            },
        );
        lock.wait_mask |= mode.bit();
        lock.queue_changed();
        self.waits.start_waiting(me, tag);
        Joined::Waiting
    }

    /// Models `ProcSleep`'s wait: sleeps until granted, running the deadlock check once
    /// `deadlock_timeout` has passed and giving up at `lock_timeout`. The caller has joined the
    /// queue and released the partition lock.
    pub(crate) fn proc_sleep(
        &self,
        b: &mut Backend,
        tag: LockTag,
        mode: LockMode,
        timeouts: &LockTimeouts,
    ) -> Result<(), LmgrError> {
        let me = b.procno() as u32;
        let start = Instant::now();
        let deadlock_at = start + timeouts.deadlock_timeout;
        let give_up_at = timeouts.lock_timeout.map(|t| start + t);
        let mut checked = false;
        let result = loop {
            match self.waits.status(me) {
                STATUS_WAITING => {}
                STATUS_OK => break Ok(()),
                _ => unreachable!("only the waiter itself sets the error status"),
            }
            // Timers fired from outside, handled in `ProcSleep`'s order: the deadlock check
            // first, then the interrupt of the lock timeout.
            let fired = self.waits.fired(me);
            if fired != 0 {
                if fired & FIRED_DEADLOCK != 0 && !checked {
                    checked = true;
                    if let Err(e) = self.check_deadlock(b) {
                        break Err(e);
                    }
                }
                if fired & FIRED_LOCK != 0 {
                    break self.cancel_wait(b, tag, mode);
                }
                self.waits.clear_fired(me, fired);
                continue;
            }
            let next = match (checked, give_up_at) {
                (false, Some(g)) => Some(deadlock_at.min(g)),
                (false, None) => Some(deadlock_at),
                (true, g) => g,
            };
            let Some(next) = next else {
                b.semaphore().lock();
                continue;
            };
            if b.semaphore().lock_until(next) {
                continue;
            }
            let now = Instant::now();
            if give_up_at.is_some_and(|g| now >= g) {
                break self.cancel_wait(b, tag, mode);
            }
            if !checked && now >= deadlock_at {
                checked = true;
                if let Err(e) = self.check_deadlock(b) {
                    break Err(e);
                }
            }
        };
        // `disable_timeouts`: whatever fired and was not handled no longer applies.
        self.waits.clear_fired(me, FIRED_DEADLOCK | FIRED_LOCK);
        // Up to 17, a wait that ended in a grant or in its own deadlock error re-takes the
        // partition lock (released by `WaitOnLock`'s caller); a lock timeout's error left
        // through `LockErrorCleanup` instead, which `cancel_wait` models.
        if self.relock_after_sleep && !matches!(result, Err(LmgrError::LockTimeout)) {
            let p = self.table.partition_of(tag.known_hash_code());
            self.table.with_partition(b, p, |_| ())?;
        }
        let waited = start.elapsed().as_nanos() as u64;
        b.stats
            .waits
            .record(tag.kind.wait_event(), mode.name(), waited);
        result
    }

    /// Gives up a wait at `lock_timeout`: out of the queue if still in it; a lock granted in
    /// the meantime is given back (see the module's differences).
    fn cancel_wait(&self, b: &mut Backend, tag: LockTag, mode: LockMode) -> Result<(), LmgrError> {
        let me = b.procno() as u32;
        let p = self.table.partition_of(tag.known_hash_code());
        let still_waiting = self.table.with_partition(b, p, |part| {
            let waiting = self.waits.status(me) == STATUS_WAITING;
            if waiting {
                self.remove_from_wait_queue(part, tag, me, &mut self.wake_into())?;
            }
            Ok::<_, LmgrError>(waiting)
        })??;
        if !still_waiting {
            // Granted meanwhile (a grant is never taken back by others): give it back.
            self.release_in_table(b, tag, me, mode)?;
        }
        Err(LmgrError::LockTimeout)
    }

    /// Models `RemoveFromWaitQueue`: takes `procno` out of `tag`'s queue with the error status
    /// and wakes whoever was queued behind it and can now go. Under the partition lock.
    fn remove_from_wait_queue(
        &self,
        part: &mut PartitionLocks<'_>,
        tag: LockTag,
        procno: u32,
        wake: &mut impl FnMut(&ProcTable, u32),
    ) -> Result<(), LmgrError> {
        if let Some(lock) = part.get(&tag) {
            lock.remove_waiter(procno);
        }
        self.waits.finish_waiting(procno, STATUS_ERROR);
        part.clean_up_and_wake(&tag, procno, true, wake)
    }

    /// Models `CheckDeadLock`: with every partition lock held, runs the deadlock check for this
    /// backend if it still waits; rewrites queues for a soft deadlock, leaves the queue with
    /// the "deadlock detected" error for a hard one.
    fn check_deadlock(&self, b: &mut Backend) -> Result<(), LmgrError> {
        let me = b.procno() as u32;
        let max_backends = self.fast_path.backends();
        let outcome = self.table.with_all_partitions(b, |all| {
            if self.waits.status(me) != STATUS_WAITING {
                return Ok(());
            }
            let state = dead_lock_check(
                &TableGraph {
                    all,
                    waits: &self.waits,
                },
                max_backends,
                me,
            );
            let mut wake = self.wake_into();
            match state {
                DeadlockState::NoDeadlock => Ok(()),
                DeadlockState::Soft(orders) => {
                    for order in orders {
                        all.partition(&order.lock).rewrite_queue(
                            &order.lock,
                            order.procs,
                            &mut wake,
                        );
                    }
                    Ok(())
                }
                DeadlockState::Hard(cycle) => {
                    let tag = self.waits.wait_lock(me).expect("a waiter has a wait lock");
                    self.remove_from_wait_queue(&mut all.partition(&tag), tag, me, &mut wake)?;
                    Err(LmgrError::Deadlock { cycle })
                }
            }
        })?;
        outcome
    }

    /// Whether backend `procno` is asleep in the lock manager, waiting for a lock (what the
    /// isolation tester asks `pg_isolation_test_session_is_blocked`).
    pub fn is_waiting(&self, procno: usize) -> bool {
        self.waits.status(procno as u32) == STATUS_WAITING
    }

    /// Fires timer `timeout` of backend `procno`'s lock wait, as its signal handler does in
    /// PostgreSQL (`CheckDeadLockAlert` sets `got_deadlock_timeout`, `LockTimeoutHandler` a
    /// pending cancel; both set the latch, here: post the semaphore). The waiter handles it as
    /// its own timer: the deadlock check (once per wait), or giving up the wait. `b` is the
    /// caller's backend, any one of the same [`pglocks_proc::ProcTable`]. Fire a timer only at
    /// a backend that waits ([`Self::is_waiting`]): one that does not would keep it and handle
    /// it as soon as its next wait begins; whatever is left when a wait ends is dropped.
    pub fn fire_timeout(&self, b: &Backend, procno: usize, timeout: WaitTimeout) {
        let bit = match timeout {
            WaitTimeout::Deadlock => FIRED_DEADLOCK,
            WaitTimeout::Lock => FIRED_LOCK,
        };
        self.waits.slots[procno].fired.fetch_or(bit, Release);
        b.procs().slot(procno).sem.unlock();
    }

    /// Whether backend `procno` has a timer fired by [`Self::fire_timeout`] that it has not
    /// finished handling (a deadlock check, or leaving the queue, still to come).
    pub fn timeout_pending(&self, procno: usize) -> bool {
        self.waits.fired(procno as u32) != 0
    }

    /// Models `ProcWakeup` for a grant made while a partition lock is held: sets the waiter's
    /// status and posts its semaphore at once, still under the partition lock, as PostgreSQL
    /// does (a woken backend that then wants the partition lock queues for it).
    pub(crate) fn wake_into(&self) -> impl FnMut(&ProcTable, u32) + '_ {
        move |procs, procno| {
            self.waits.finish_waiting(procno, STATUS_OK);
            procs.slot(procno as usize).sem.unlock();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{
        LmgrError, LockManager, LockManagerConfig, LockMode, LockOwner, LockTag, LockTimeouts,
        WaitTimeout,
    };
    use pglocks_proc::ProcTable;
    use std::sync::{mpsc, Arc};

    /// Two backends in a deadlock with timers that never fire by themselves: nothing happens
    /// until the runner fires one; the deadlock timer finds the cycle, the lock timer of the
    /// other waiter (after the first one left) cancels its wait.
    #[test]
    fn timers_fired_from_outside() {
        let lm: Arc<LockManager> = Arc::new(LockManager::new(LockManagerConfig::new(3)));
        let procs = ProcTable::new(3);
        let me = procs.attach().unwrap();
        let (a, b) = (LockTag::relation(5, 16384), LockTag::relation(5, 16385));
        let spawn = |first: LockTag, second: LockTag| {
            let mut be = procs.attach().unwrap();
            let procno = be.procno();
            let lm = Arc::clone(&lm);
            let (tx, rx) = mpsc::channel();
            let (go, wait_for_go) = mpsc::channel::<()>();
            std::thread::spawn(move || {
                let mut local = lm.connect(&mut be, 5).unwrap();
                let (mode, owner) = (LockMode::AccessExclusive, LockOwner::Transaction);
                let t = LockTimeouts::EXTERNAL;
                lm.acquire(&mut be, &mut local, first, mode, owner, &t)
                    .unwrap();
                tx.send(None).unwrap();
                wait_for_go.recv().unwrap();
                let r = lm.acquire(&mut be, &mut local, second, mode, owner, &t);
                tx.send(Some(r.map(|_| ()))).unwrap();
                lm.release_all(&mut be, &mut local, false).unwrap();
            });
            (procno, rx, go)
        };
        let (p1, r1, go1) = spawn(a, b);
        assert_eq!(r1.recv().unwrap(), None);
        let (p2, r2, go2) = spawn(b, a);
        assert_eq!(r2.recv().unwrap(), None);
        go1.send(()).unwrap();
        go2.send(()).unwrap();
        while !(lm.is_waiting(p1) && lm.is_waiting(p2)) {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(
            lm.is_waiting(p1) && lm.is_waiting(p2),
            "no timer of its own"
        );

        lm.fire_timeout(&me, p2, WaitTimeout::Deadlock);
        let r = r2.recv().unwrap().unwrap();
        assert!(matches!(r, Err(LmgrError::Deadlock { .. })), "{r:?}");
        assert!(!lm.timeout_pending(p2));
        // p2 left the queue of `a` and its transaction ends: p1 gets `b`.
        assert_eq!(r1.recv().unwrap(), Some(Ok(())));
        assert!(!lm.timeout_pending(p1));
    }

    /// The `LockManager` partition-lock acquisitions of a backend that waited for a lock
    /// until another released it, under `cfg`.
    fn partition_locks_taken_by_a_waiter(relock_after_sleep: bool) -> u64 {
        let cfg = LockManagerConfig {
            relock_after_sleep,
            ..LockManagerConfig::new(2)
        };
        let lm: Arc<LockManager> = Arc::new(LockManager::new(cfg));
        let procs = ProcTable::new(2);
        let mut holder = procs.attach().unwrap();
        let mut hl = lm.connect(&mut holder, 5).unwrap();
        let tag = LockTag::relation(5, 16384);
        let (mode, owner) = (LockMode::AccessExclusive, LockOwner::Transaction);
        let t = LockTimeouts::EXTERNAL;
        lm.acquire(&mut holder, &mut hl, tag, mode, owner, &t)
            .unwrap();
        let mut be = procs.attach().unwrap();
        let procno = be.procno();
        let lm2 = Arc::clone(&lm);
        let waiter = std::thread::spawn(move || {
            be.stats.lwlock.set_enabled(true);
            let mut local = lm2.connect(&mut be, 5).unwrap();
            lm2.acquire(&mut be, &mut local, tag, mode, owner, &t)
                .unwrap();
            let lm_tranche = pglocks_proc::tranche::tranche_id("LockManager");
            be.stats.lwlock.tranche(lm_tranche).unwrap().ex_acquire
        });
        while !lm.is_waiting(procno) {
            std::thread::yield_now();
        }
        lm.release_all(&mut holder, &mut hl, false).unwrap();
        waiter.join().unwrap()
    }

    #[test]
    fn up_to_17_proc_sleep_retakes_the_partition_lock_after_the_wait() {
        // Joining the queue takes it once; up to 17 ProcSleep takes it again once granted.
        assert_eq!(partition_locks_taken_by_a_waiter(true), 2);
        assert_eq!(partition_locks_taken_by_a_waiter(false), 1);
    }

    #[test]
    fn a_fired_lock_timeout_cancels_the_wait() {
        let lm: Arc<LockManager> = Arc::new(LockManager::new(LockManagerConfig::new(3)));
        let procs = ProcTable::new(3);
        let mut holder = procs.attach().unwrap();
        let mut hl = lm.connect(&mut holder, 5).unwrap();
        let tag = LockTag::relation(5, 16384);
        let (mode, owner) = (LockMode::AccessExclusive, LockOwner::Transaction);
        lm.acquire(
            &mut holder,
            &mut hl,
            tag,
            mode,
            owner,
            &LockTimeouts::EXTERNAL,
        )
        .unwrap();
        let mut be = procs.attach().unwrap();
        let procno = be.procno();
        let lm2 = Arc::clone(&lm);
        let waiter = std::thread::spawn(move || {
            let mut local = lm2.connect(&mut be, 5).unwrap();
            lm2.acquire(
                &mut be,
                &mut local,
                tag,
                mode,
                owner,
                &LockTimeouts::EXTERNAL,
            )
        });
        while !lm.is_waiting(procno) {
            std::thread::yield_now();
        }
        lm.fire_timeout(&holder, procno, WaitTimeout::Lock);
        assert_eq!(waiter.join().unwrap(), Err(LmgrError::LockTimeout));
        assert!(!lm.timeout_pending(procno) && !lm.is_waiting(procno));
        lm.release_all(&mut holder, &mut hl, false).unwrap();
    }
}
