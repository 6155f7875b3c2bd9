//! Models `PGSemaphoreLock` / `PGSemaphoreUnlock` / `PGSemaphoreTryLock` (port/posix_sema.c and
//! port/sysv_sema.c): every backend owns one counting semaphore and sleeps on it whenever a lock
//! makes it wait; whoever releases the lock "unlocks" the sleeper's semaphore.
//!
//! A PostgreSQL semaphore counts: an unlock that arrives before the sleeper has gone to sleep is not
//! lost, and the sleeper's next lock returns at once. Callers must therefore re-check their wake-up
//! condition after every lock and re-unlock any extra wake-ups they absorbed, exactly as lwlock.c
//! does with its `extraWaits` counter.
//!
//! On Linux the count is an `AtomicU32` and a sleeper parks in `futex(FUTEX_WAIT)` on it (what glibc's
//! `sem_t` does underneath); a separate sleeper count lets `unlock` skip the wake system call when no
//! one sleeps. Under loom the same code runs with the two futex calls emulated by loom's mutex and
//! condition variable (check-then-sleep atomic with respect to wake, as the kernel makes it), so
//! the protocol itself is model-checked. On other systems it is a mutex and a condition variable.

#[cfg(not(any(target_os = "linux", loom)))]
pub use condvar::Semaphore;
#[cfg(any(target_os = "linux", loom))]
pub use futex::Semaphore;

#[cfg(any(target_os = "linux", loom))]
mod futex {
    use crate::atomic::{fence, AtomicU32, Ordering::*};
    use crate::time::{Duration, Instant};

    /// A counting semaphore (PostgreSQL's `PGSemaphore`), futex-backed.
    #[derive(Debug)]
    pub struct Semaphore {
        count: AtomicU32,
        sleepers: AtomicU32,
        #[cfg(loom)]
        kernel: loom_futex::Queue,
    }

    impl Default for Semaphore {
        fn default() -> Self {
            Self::new(0)
        }
    }

    impl Semaphore {
        /// A semaphore with `count` permits (PostgreSQL creates them at 0).
        pub fn new(count: u32) -> Self {
            Self {
                count: AtomicU32::new(count),
                sleepers: AtomicU32::new(0),
                #[cfg(loom)]
                kernel: loom_futex::Queue::default(),
            }
        }

        /// Takes a permit if one is there (`PGSemaphoreTryLock`).
        #[inline]
        pub fn try_lock(&self) -> bool {
            let mut c = self.count.load(Relaxed);
            while c > 0 {
                match self.count.compare_exchange_weak(c, c - 1, Acquire, Relaxed) {
                    Ok(_) => return true,
                    Err(now) => c = now,
                }
            }
            false
        }

        /// Takes a permit, sleeping until one is there (`PGSemaphoreLock`).
        pub fn lock(&self) {
            if self.try_lock() {
                return;
            }
            self.lock_slow(None);
        }

        /// Takes a permit, sleeping at most until `deadline`; `false` if none came by then. The
        /// wait of a backend that also has a timer running (`ProcSleep`'s `deadlock_timeout` and
        /// `lock_timeout`, which PostgreSQL delivers by setting the latch it waits on). Under
        /// loom time does not pass, and this waits as [`Self::lock`] does.
        pub fn lock_until(&self, deadline: Instant) -> bool {
            // Model checking explores orders, not durations: no timer ever fires under loom.
            let deadline = (!cfg!(loom)).then_some(deadline);
            self.try_lock() || self.lock_slow(deadline)
        }

        #[cold]
        fn lock_slow(&self, deadline: Option<Instant>) -> bool {
            loop {
                let timeout = match deadline {
                    Some(d) => match d.checked_duration_since(Instant::now()) {
                        Some(left) if !left.is_zero() => Some(left),
                        _ => return self.try_lock(),
                    },
                    None => None,
                };
                // Announce ourselves before the last look at the count, with a full fence between
                // (unlock mirrors it): of "we missed the new permit" and "unlock missed our
                // announcement", at most one can happen, so we never sleep through an unlock.
                // (Fences rather than SeqCst accesses: loom checks fences exactly, but treats
                // SeqCst loads and stores as merely acquire/release.)
                self.sleepers.fetch_add(1, Relaxed);
                fence(SeqCst);
                if self.count.load(Relaxed) == 0 {
                    self.futex_wait(0, timeout);
                }
                self.sleepers.fetch_sub(1, Relaxed);
                if self.try_lock() {
                    return true;
                }
            }
        }

        /// Adds a permit and wakes one sleeper, if any (`PGSemaphoreUnlock`).
        pub fn unlock(&self) {
            self.count.fetch_add(1, Release);
            fence(SeqCst);
            if self.sleepers.load(Relaxed) > 0 {
                self.futex_wake();
            }
        }

        #[cfg(not(loom))]
        fn futex_wait(&self, expected: u32, timeout: Option<Duration>) {
            futex_wait(&self.count, expected, timeout);
        }

        #[cfg(not(loom))]
        fn futex_wake(&self) {
            futex_wake(&self.count, 1);
        }

        #[cfg(loom)]
        fn futex_wait(&self, expected: u32, _timeout: Option<Duration>) {
            self.kernel.wait(&self.count, expected);
        }

        #[cfg(loom)]
        fn futex_wake(&self) {
            self.kernel.wake_one();
        }
    }

    /// The kernel's side of a futex, for loom: the value check and the sleep happen under the
    /// queue's lock, and a wake takes the same lock, so no wake falls between check and sleep.
    #[cfg(loom)]
    mod loom_futex {
        use crate::atomic::{AtomicU32, Ordering::SeqCst};
        use crate::sync::{Condvar, Mutex};

        #[derive(Debug, Default)]
        pub struct Queue {
            lock: Mutex<()>,
            cv: Condvar,
        }

        impl Queue {
            pub fn wait(&self, word: &AtomicU32, expected: u32) {
                let guard = self.lock.lock().unwrap();
                if word.load(SeqCst) == expected {
                    drop(self.cv.wait(guard).unwrap());
                }
            }

            pub fn wake_one(&self) {
                let _guard = self.lock.lock().unwrap();
                self.cv.notify_one();
            }
        }
    }

    #[cfg(not(loom))]
    fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        if pglocks_sim::hook::active() {
            let deadline = timeout.map(|t| (Instant::now() + t).into_std());
            pglocks_sim::hook::futex_wait(
                word.as_ptr() as usize,
                || word.peek() == expected,
                deadline,
            );
            return;
        }
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().try_into().unwrap_or(libc::time_t::MAX),
            tv_nsec: t.subsec_nanos().into(),
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: FUTEX_WAIT only reads the aligned u32 behind a live reference and the timespec
        // (relative; null means "no timeout") that outlives the call. A spurious or timed-out
        // return (EINTR, EAGAIN, ETIMEDOUT) is handled by the caller's loop.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
            );
        }
    }

    #[cfg(not(loom))]
    fn futex_wake(word: &AtomicU32, n: i32) {
        if pglocks_sim::hook::active() {
            pglocks_sim::hook::futex_wake(word.as_ptr() as usize, n.max(0) as usize);
            return;
        }
        // SAFETY: FUTEX_WAKE does not access memory; the address only names the wait queue.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                n,
            );
        }
    }
}

#[cfg(not(any(target_os = "linux", loom)))]
mod condvar {
    use crate::sync::{Condvar, Mutex};

    /// A counting semaphore (PostgreSQL's `PGSemaphore`), mutex + condition variable.
    #[derive(Debug, Default)]
    pub struct Semaphore {
        count: Mutex<u32>,
        cv: Condvar,
    }

    impl Semaphore {
        /// A semaphore with `count` permits (PostgreSQL creates them at 0).
        pub fn new(count: u32) -> Self {
            Self {
                count: Mutex::new(count),
                cv: Condvar::new(),
            }
        }

        /// Takes a permit if one is there (`PGSemaphoreTryLock`).
        pub fn try_lock(&self) -> bool {
            let mut c = self.count.lock().unwrap_or_else(|e| e.into_inner());
            if *c > 0 {
                *c -= 1;
                true
            } else {
                false
            }
        }

        /// Takes a permit, sleeping until one is there (`PGSemaphoreLock`).
        pub fn lock(&self) {
            let mut c = self.count.lock().unwrap_or_else(|e| e.into_inner());
            while *c == 0 {
                c = self.cv.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            *c -= 1;
        }

        /// Takes a permit, sleeping at most until `deadline`; `false` if none came by then.
        pub fn lock_until(&self, deadline: std::time::Instant) -> bool {
            let mut c = self.count.lock().unwrap_or_else(|e| e.into_inner());
            while *c == 0 {
                let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
                    return false;
                };
                c = self
                    .cv
                    .wait_timeout(c, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *c -= 1;
            true
        }

        /// Adds a permit and wakes one sleeper, if any (`PGSemaphoreUnlock`).
        pub fn unlock(&self) {
            let mut c = self.count.lock().unwrap_or_else(|e| e.into_inner());
            *c += 1;
            self.cv.notify_one();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Semaphore;
    use std::sync::Arc;

    #[test]
    fn counts_permits() {
        let s = Semaphore::new(2);
        assert!(s.try_lock());
        assert!(s.try_lock());
        assert!(!s.try_lock());
        s.unlock();
        assert!(s.try_lock());
    }

    #[test]
    fn an_early_unlock_is_not_lost() {
        let s = Semaphore::new(0);
        s.unlock();
        s.lock(); // returns at once
        assert!(!s.try_lock());
    }

    #[test]
    fn a_timed_wait_times_out_or_takes_a_permit() {
        use crate::time::{Duration, Instant};
        let s = Arc::new(Semaphore::new(0));
        let start = Instant::now();
        assert!(!s.lock_until(start + Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
        s.unlock();
        assert!(
            s.lock_until(Instant::now()),
            "a permit already there is taken"
        );
        let s2 = Arc::clone(&s);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            s2.unlock();
        });
        assert!(s.lock_until(Instant::now() + Duration::from_secs(10)));
        t.join().unwrap();
        assert!(!s.try_lock());
    }

    #[test]
    fn sleeper_is_woken_by_another_thread() {
        let s = Arc::new(Semaphore::new(0));
        let mut sleepers = Vec::new();
        for _ in 0..4 {
            let s = Arc::clone(&s);
            sleepers.push(std::thread::spawn(move || {
                for _ in 0..1000 {
                    s.lock();
                }
            }));
        }
        for _ in 0..4000 {
            s.unlock();
        }
        for t in sleepers {
            t.join().unwrap();
        }
        assert!(!s.try_lock());
    }
}
