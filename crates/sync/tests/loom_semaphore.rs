//! loom model of the semaphore (PGSemaphore): an unlock is never lost, whether it comes before or
//! after the sleeper goes to sleep, and permits are counted.
#![cfg(loom)]

use pglocks_sync::sync::Arc;
use pglocks_sync::Semaphore;

/// loom with LOOM_MAX_PREEMPTIONS, or 2 when it is unset, and loom's own branch limit
/// (`LOOM_MAX_BRANCHES`, else 1000): these paths are short.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = pglocks_sync::loom_builder(2);
    b.max_branches = loom::model::Builder::new().max_branches;
    b.check(f);
}

#[test]
fn no_lost_wakeup() {
    model(|| {
        let s = Arc::new(Semaphore::new(0));
        let s2 = Arc::clone(&s);
        let t = loom::thread::spawn(move || s2.unlock());
        s.lock();
        t.join().unwrap();
        assert!(!s.try_lock());
    });
}

#[test]
fn two_sleepers_two_unlocks() {
    model(|| {
        let s = Arc::new(Semaphore::new(0));
        let sleepers: Vec<_> = (0..2)
            .map(|_| {
                let s = Arc::clone(&s);
                loom::thread::spawn(move || s.lock())
            })
            .collect();
        s.unlock();
        s.unlock();
        for t in sleepers {
            t.join().unwrap();
        }
        assert!(!s.try_lock());
    });
}
