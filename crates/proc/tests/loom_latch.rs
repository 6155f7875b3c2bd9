//! loom model of the latch (latch.c): a set is never lost, whether it comes before the owner's
//! announcement, between it and the sleep, or during the sleep; a set of a latch already set
//! posts nothing; and the wait/reset/look-again loop sees every set that follows a change.
#![cfg(loom)]

use pglocks_proc::latch::Latch;
use pglocks_sync::atomic::{AtomicBool, Ordering::*};
use pglocks_sync::sync::Arc;
use pglocks_sync::Semaphore;

fn model(f: impl Fn() + Sync + Send + 'static) {
    pglocks_sync::loom_builder(2).check(f);
}

#[test]
fn a_set_wakes_the_owner_whenever_it_comes() {
    model(|| {
        let shared = Arc::new((Latch::default(), Semaphore::new(0)));
        let setter = {
            let shared = Arc::clone(&shared);
            loom::thread::spawn(move || shared.0.set(&shared.1))
        };
        assert!(shared.0.wait(&shared.1, None));
        setter.join().unwrap();
    });
}

#[test]
fn the_owner_sees_every_change_made_before_a_set() {
    // The shm_mq pattern: the other side changes state, then sets the latch; the owner looks,
    // waits, resets, and looks again until it sees the change.
    model(|| {
        let shared = Arc::new((Latch::default(), Semaphore::new(0), AtomicBool::new(false)));
        let other = {
            let shared = Arc::clone(&shared);
            loom::thread::spawn(move || {
                shared.2.store(true, Release);
                shared.0.set(&shared.1);
            })
        };
        while !shared.2.load(Acquire) {
            shared.0.wait(&shared.1, None);
            shared.0.reset();
        }
        other.join().unwrap();
    });
}

#[test]
fn setting_a_set_latch_posts_nothing() {
    model(|| {
        let (latch, sem) = (Latch::default(), Semaphore::new(0));
        latch.set(&sem);
        latch.set(&sem);
        assert!(latch.wait(&sem, None));
        // Nobody announced a sleep: no permit was posted.
        assert!(!sem.try_lock());
        latch.reset();
    });
}
