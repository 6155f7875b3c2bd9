//! Scoped threads that a model starts and joins itself, as a PostgreSQL backend has the
//! postmaster start background workers and waits for them (a leader apply worker's parallel
//! apply workers): std's `thread::scope`, loom's threads under `--cfg loom`, and on a simulated
//! CPU virtual threads started mid-run ([`pglocks_sim::hook::spawn`]).
//!
//! # How a scope works
//! [`scope`] runs its closure with a [`Scope`]; every thread started with [`Scope::spawn`]
//! may borrow what lives outside the scope, and `scope` returns only once every one of them
//! has finished, whether the closure returned or panicked. Each thread runs its closure under
//! `catch_unwind`, leaves the result (or the panic) in a packet its [`ScopedJoinHandle`]
//! shares, and then posts two counting semaphores ([`Semaphore`], the shim's `PGSemaphore`):
//! the packet's, which [`ScopedJoinHandle::join`] waits on, and the scope's, on which the
//! scope's end waits once per thread started. Every wait is therefore a semaphore wait: a futex
//! wait on a real machine, loom's condition variable under loom, and on a simulated CPU a
//! futex wait of the engine, which blocks the joining thread in virtual time until the
//! finishing thread's post, charged as the atomics and system calls they are.
//!
//! As in std, a thread that panicked and was never joined makes the scope panic once all
//! threads are done; a panic joined is the joiner's to handle.
//!
//! Where a thread runs: on a real machine and under loom, where the OS (or loom) puts it; on a
//! simulated one, on the lowest-numbered free CPU of the profile (the engine's choice, see
//! `pglocks_sim::engine`), a wake-up's latency after the starter's `clone`.
//!
//! A simulation that fails (a deadlock, its time limit) unwinds its virtual threads youngest
//! first with the simulator's hooks off: the threads a scope started are gone before the scope
//! unwinds, and the scope does not wait for them (it could not: nothing would run them).

use crate::Semaphore;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What a scope's threads share with it: the semaphore each posts at its end, how many were
/// started, and whether one panicked unjoined. The counts are the host's bookkeeping (std's
/// atomics): what orders a thread's end before the scope's is the semaphore.
struct ScopeData {
    exits: Semaphore,
    started: AtomicUsize,
    unjoined_panic: AtomicBool,
    /// The scope began on a simulated CPU: its threads are virtual threads.
    simulated: bool,
    /// The host (or loom) threads, reaped at the scope's end.
    #[cfg(not(loom))]
    native: Mutex<Vec<std::thread::JoinHandle<()>>>,
    #[cfg(loom)]
    native: Mutex<Vec<loom::thread::JoinHandle<()>>>,
}

/// Where one thread leaves its result for [`ScopedJoinHandle::join`].
struct Packet<T> {
    done: Semaphore,
    result: Mutex<Option<std::thread::Result<T>>>,
    scope: Arc<ScopeData>,
}

impl<T> Drop for Packet<T> {
    fn drop(&mut self) {
        let result = self
            .result
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if matches!(result, Some(Err(_))) {
            self.scope.unjoined_panic.store(true, Ordering::Relaxed);
        }
    }
}

/// A scope to start threads in; see [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    data: Arc<ScopeData>,
    /// Invariant in both lifetimes, as std's `Scope`.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// A thread started in a [`Scope`], to wait for.
pub struct ScopedJoinHandle<'scope, T> {
    packet: Arc<Packet<T>>,
    scope: PhantomData<&'scope ()>,
}

/// Runs `f` with a [`Scope`] whose threads may borrow from outside it, and returns once every
/// thread started in it has finished (std's `thread::scope`; see the [module docs](self)).
///
/// # Panics
/// If `f` panics (after every thread has finished), or if a thread panicked and was not
/// joined.
///
/// # Examples
/// Two threads summing the halves of a slice they borrow; on a simulated CPU the same code
/// starts two virtual threads and the join blocks in virtual time.
/// ```
/// let data = [1u64, 2, 3, 4, 5, 6];
/// let (left, right) = data.split_at(3);
/// let total = pglocks_sync::thread::scope(|s| {
///     let a = s.spawn(|| left.iter().sum::<u64>());
///     let b = s.spawn(|| right.iter().sum::<u64>());
///     a.join().unwrap() + b.join().unwrap()
/// });
/// assert_eq!(total, 21);
/// ```
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let s = Scope {
        data: Arc::new(ScopeData {
            exits: Semaphore::new(0),
            started: AtomicUsize::new(0),
            unjoined_panic: AtomicBool::new(false),
            simulated: simulating(),
            native: Mutex::new(Vec::new()),
        }),
        scope: PhantomData,
        env: PhantomData,
    };
    let result = catch_unwind(AssertUnwindSafe(|| f(&s)));
    s.wait_for_all();
    match result {
        Err(e) => resume_unwind(e),
        Ok(_) if s.data.unjoined_panic.load(Ordering::Relaxed) => {
            panic!("a scoped thread panicked")
        }
        Ok(r) => r,
    }
}

/// Whether the caller is a virtual thread of a simulation.
#[inline]
fn simulating() -> bool {
    #[cfg(loom)]
    return false;
    #[cfg(not(loom))]
    return pglocks_sim::hook::active();
}

impl<'scope> Scope<'scope, '_> {
    /// Starts a thread running `f`, which may borrow from outside the scope (std's
    /// `Scope::spawn`).
    ///
    /// # Panics
    /// If the OS cannot start a thread (as std's `spawn`).
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let packet = Arc::new(Packet {
            done: Semaphore::new(0),
            result: Mutex::new(None),
            scope: Arc::clone(&self.data),
        });
        let (theirs, data) = (Arc::clone(&packet), Arc::clone(&self.data));
        let body = move || {
            let result = catch_unwind(AssertUnwindSafe(f));
            *theirs.result.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
            theirs.done.unlock();
            // An unjoined result (and what it borrows) goes before the scope can end.
            drop(theirs);
            data.exits.unlock();
        };
        self.data.started.fetch_add(1, Ordering::Relaxed);
        self.start(Box::new(body));
        ScopedJoinHandle {
            packet,
            scope: PhantomData,
        }
    }

    /// Starts `body` on a thread of the machine the scope runs on.
    fn start(&self, body: Box<dyn FnOnce() + Send + 'scope>) {
        #[cfg(not(loom))]
        if self.data.simulated {
            // SAFETY: the scope does not end before `exits` has been posted once per thread,
            // the last thing each body does, and a failed simulation unwinds the thread before
            // the scope (`pglocks_sim::hook::spawn`'s contract).
            unsafe { pglocks_sim::hook::spawn(body) };
            return;
        }
        // SAFETY: as above: `body` runs to its end before the scope ends, so nothing it
        // borrows goes before it is done with it (std's own scoped threads erase the lifetime
        // the same way).
        let body: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(body) };
        #[cfg(not(loom))]
        let handle = std::thread::Builder::new()
            .spawn(body)
            .expect("failed to spawn thread");
        #[cfg(loom)]
        let handle = loom::thread::spawn(body);
        self.data
            .native
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
    }

    /// The scope's end: one post of `exits` per thread started (a thread may start more
    /// while it runs, so the count is read again), then the host threads reaped.
    fn wait_for_all(&self) {
        if self.data.simulated && !simulating() {
            // A failed simulation is unwinding this virtual thread; its threads are gone.
            return;
        }
        let mut waited = 0;
        while waited < self.data.started.load(Ordering::Relaxed) {
            self.data.exits.lock();
            waited += 1;
        }
        let native = std::mem::take(
            &mut *self
                .data
                .native
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for h in native {
            // The body caught its own panic; the thread has posted and is ending.
            let _ = h.join();
        }
    }
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the thread to finish and returns what its closure returned, or its panic
    /// (std's `ScopedJoinHandle::join`). On a simulated CPU the wait is in virtual time.
    pub fn join(self) -> std::thread::Result<T> {
        self.packet.done.lock();
        self.packet
            .result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("a thread leaves its result before it posts")
    }

    /// Whether the thread has finished (std's `is_finished`).
    pub fn is_finished(&self) -> bool {
        self.packet
            .result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::scope;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn threads_borrow_from_outside_and_the_scope_waits_for_them_all() {
        let hits = AtomicUsize::new(0);
        let n = scope(|s| {
            for _ in 0..4 {
                // Not joined: the scope's end waits for them.
                s.spawn(|| {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    hits.fetch_add(1, Ordering::Relaxed);
                });
            }
            let h = s.spawn(|| {
                // A thread may start another in the same scope.
                s.spawn(|| hits.fetch_add(1, Ordering::Relaxed));
                7
            });
            h.join().unwrap()
        });
        assert_eq!(n, 7);
        assert_eq!(hits.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn a_joined_panic_is_the_joiners_and_an_unjoined_one_panics_the_scope() {
        let joined = scope(|s| s.spawn(|| panic!("joined")).join());
        assert!(joined.is_err());
        let unjoined = std::panic::catch_unwind(|| {
            scope(|s| {
                s.spawn(|| panic!("never joined"));
            })
        });
        let message = unjoined.unwrap_err();
        assert_eq!(
            message.downcast_ref::<&str>(),
            Some(&"a scoped thread panicked")
        );
    }
}
