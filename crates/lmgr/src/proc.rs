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
//! Differences from PostgreSQL: the timers are the timeout of the semaphore sleep rather than
//! signals or latches; a backend whose lock was granted in the instant its `lock_timeout` expired
//! gives the lock straight back (PostgreSQL records it and releases it when the error aborts the
//! transaction; the outcome is the same). `log_lock_waits` messages are not produced; the time
//! waited is recorded as the `Lock` wait event of the tag's type.

use crate::deadlock::{dead_lock_check, DeadlockInfo, DeadlockState, WaitGraph};
use crate::table::{AllPartitions, Lock, PartitionLocks, Waiter};
use crate::{LmgrError, LockManager, LockMode, LockTag};
use pglocks_lwlock::RawLwLock;
use pglocks_sync::atomic::{
    AtomicU8,
    Ordering::{Acquire, Relaxed, Release},
};
use pglocks_sync::cell::UnsafeCell;
use pglocks_sync::time::{Duration, Instant};
use pglocks_sync::{Backend, CachePadded};

/// proc.h's `PROC_WAIT_STATUS_OK`: not waiting, or granted.
const STATUS_OK: u8 = 0;
/// `PROC_WAIT_STATUS_WAITING`.
const STATUS_WAITING: u8 = 1;
/// `PROC_WAIT_STATUS_ERROR`: taken out of the queue (deadlock or timeout).
const STATUS_ERROR: u8 = 2;

/// The lock-wait fields of one backend's `PGPROC`.
struct WaitSlot {
    /// `waitStatus`: written under the partition lock of the awaited lock; read by the owner
    /// without it.
    status: AtomicU8,
    /// `waitLock`: written under the partition lock of the awaited lock; read by the deadlock
    /// checker with every partition held.
    wait_lock: UnsafeCell<Option<LockTag>>,
}

/// Every backend's lock-wait fields.
pub(crate) struct WaitSlots(Box<[CachePadded<WaitSlot>]>);

// SAFETY: `wait_lock` is written only under the partition lock of the tag it names (or of the
// tag it replaces), and read only with that partition lock (or all of them) held; `status` is
// atomic.
unsafe impl Sync for WaitSlots {}

impl WaitSlots {
    pub fn new(backends: usize) -> Self {
        Self(
            (0..backends)
                .map(|_| {
                    CachePadded::new(WaitSlot {
                        status: AtomicU8::new(STATUS_OK),
                        wait_lock: UnsafeCell::new(None),
                    })
                })
                .collect(),
        )
    }

    /// Marks `procno` as waiting for `tag` (under `tag`'s partition lock).
    fn start_waiting(&self, procno: u32, tag: LockTag) {
        let slot = &self.0[procno as usize];
        // SAFETY: the caller holds `tag`'s partition lock (see `WaitSlots`).
        slot.wait_lock.with_mut(|p| unsafe { *p = Some(tag) });
        slot.status.store(STATUS_WAITING, Relaxed);
    }

    /// `ProcWakeup`'s state change for `procno` (under its lock's partition lock); the caller
    /// posts the semaphore once the partition lock is released.
    fn finish_waiting(&self, procno: u32, status: u8) {
        let slot = &self.0[procno as usize];
        // SAFETY: the caller holds the partition lock of the lock `procno` waited for.
        slot.wait_lock.with_mut(|p| unsafe { *p = None });
        slot.status.store(status, Release);
    }

    fn status(&self, procno: u32) -> u8 {
        self.0[procno as usize].status.load(Acquire)
    }

    /// `waitLock` of `procno`; the caller holds every partition lock.
    fn wait_lock(&self, procno: u32) -> Option<LockTag> {
        // SAFETY: the caller holds every partition lock (see `WaitSlots`).
        self.0[procno as usize].wait_lock.with(|p| unsafe { *p })
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
        let waited = start.elapsed().as_nanos() as u64;
        b.stats
            .waits
            .record(tag.kind.wait_event(), mode.name(), waited);
        result
    }

    /// Posts the semaphores of backends granted while a partition lock was held.
    pub(crate) fn post(&self, b: &Backend, woken: &[u32]) {
        for &p in woken {
            b.procs().slot(p as usize).sem.unlock();
        }
    }

    /// Gives up a wait at `lock_timeout`: out of the queue if still in it; a lock granted in
    /// the meantime is given back (see the module's differences).
    fn cancel_wait(&self, b: &mut Backend, tag: LockTag, mode: LockMode) -> Result<(), LmgrError> {
        let me = b.procno() as u32;
        let mut woken = Vec::new();
        let p = self.table.partition_of(tag.hash_code());
        let still_waiting = self.table.with_partition(b, p, |part| {
            let waiting = self.waits.status(me) == STATUS_WAITING;
            if waiting {
                self.remove_from_wait_queue(part, tag, me, &mut self.wake_into(&mut woken));
            }
            waiting
        })?;
        self.post(b, &woken);
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
        wake: &mut impl FnMut(u32),
    ) {
        if let Some(lock) = part.get(&tag) {
            lock.remove_waiter(procno);
        }
        self.waits.finish_waiting(procno, STATUS_ERROR);
        part.clean_up_and_wake(&tag, procno, true, wake);
    }

    /// Models `CheckDeadLock`: with every partition lock held, runs the deadlock check for this
    /// backend if it still waits; rewrites queues for a soft deadlock, leaves the queue with
    /// the "deadlock detected" error for a hard one.
    fn check_deadlock(&self, b: &mut Backend) -> Result<(), LmgrError> {
        let me = b.procno() as u32;
        let mut woken = Vec::new();
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
            let mut wake = self.wake_into(&mut woken);
            match state {
                DeadlockState::NoDeadlock => Ok(()),
                DeadlockState::Soft(orders) => {
                    for order in orders {
                        if let Some(lock) = all.partition(&order.lock).get(&order.lock) {
                            lock.wait_queue = order.procs;
                            lock.wake_waiters(&mut wake);
                        }
                    }
                    Ok(())
                }
                DeadlockState::Hard(cycle) => {
                    let tag = self.waits.wait_lock(me).expect("a waiter has a wait lock");
                    self.remove_from_wait_queue(all.partition(&tag), tag, me, &mut wake);
                    Err(LmgrError::Deadlock { cycle })
                }
            }
        })?;
        self.post(b, &woken);
        outcome
    }

    /// Whether backend `procno` is asleep in the lock manager, waiting for a lock (what the
    /// isolation tester asks `pg_isolation_test_session_is_blocked`).
    pub fn is_waiting(&self, procno: usize) -> bool {
        self.waits.status(procno as u32) == STATUS_WAITING
    }

    /// Grants made while a partition lock is held: `ProcWakeup`'s status change, semaphores
    /// posted by the caller after the release.
    pub(crate) fn wake_into<'w>(&'w self, woken: &'w mut Vec<u32>) -> impl FnMut(u32) + 'w {
        move |procno| {
            self.waits.finish_waiting(procno, STATUS_OK);
            woken.push(procno);
        }
    }
}
