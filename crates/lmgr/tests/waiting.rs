//! Waiting in the lock manager: wake-ups in queue order, the queue rule, early, hard and soft
//! deadlocks, and lock timeouts, with real threads. Each test drives backends step by step and
//! waits for a backend to be *blocked in the lock manager* (not for some time to pass).
#![cfg(not(loom))]

use pglocks_lmgr::{
    FastPathLayout, LmgrError, LocalLocks, LockAcquireResult, LockManager, LockManagerConfig,
    LockMode, LockMode::*, LockOwner, LockTag, LockTimeouts,
};
use pglocks_proc::{Backend, ProcTable};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const TX: LockOwner = LockOwner::Transaction;

fn rel(n: u32) -> LockTag {
    LockTag::relation(5, 16384 + n)
}

type Reply = Result<LockAcquireResult, LmgrError>;

enum Cmd {
    Lock(u32, LockMode, LockTimeouts),
    Nowait(u32, LockMode),
    Commit,
}

/// A backend on its own thread, taking commands (a session of the isolation tester).
struct Session {
    procno: usize,
    cmds: mpsc::Sender<Cmd>,
    replies: mpsc::Receiver<Reply>,
}

fn long() -> LockTimeouts {
    LockTimeouts {
        deadlock_timeout: Duration::from_secs(100),
        lock_timeout: None,
    }
}

fn short() -> LockTimeouts {
    LockTimeouts {
        deadlock_timeout: Duration::from_millis(10),
        lock_timeout: None,
    }
}

struct World {
    lm: Arc<LockManager>,
    procs: ProcTable,
}

impl World {
    fn new(fast_path: FastPathLayout) -> Self {
        Self::with(fast_path, false)
    }

    fn with(fast_path: FastPathLayout, nowait_checks_queue: bool) -> Self {
        let mut cfg = LockManagerConfig::new(5);
        cfg.fast_path = fast_path;
        cfg.nowait_checks_queue = nowait_checks_queue;
        Self {
            lm: Arc::new(LockManager::new(cfg)),
            procs: ProcTable::new(5),
        }
    }

    fn session(&self) -> Session {
        let mut b: Backend = self.procs.attach().unwrap();
        let procno = b.procno();
        let lm = Arc::clone(&self.lm);
        let (cmds, rx) = mpsc::channel();
        let (tx, replies) = mpsc::channel();
        thread::spawn(move || {
            let mut local: LocalLocks = lm.connect(&mut b, 5).unwrap();
            for cmd in rx {
                let r = match cmd {
                    Cmd::Lock(r, m, t) => lm.acquire(&mut b, &mut local, rel(r), m, TX, &t),
                    Cmd::Nowait(r, m) => lm.conditional_acquire(&mut b, &mut local, rel(r), m, TX),
                    Cmd::Commit => lm
                        .release_all(&mut b, &mut local, false)
                        .map(|_| LockAcquireResult::Ok),
                };
                // An error aborts the transaction, which releases its locks.
                if r.is_err() {
                    lm.release_all(&mut b, &mut local, false).unwrap();
                }
                tx.send(r).unwrap();
            }
        });
        Session {
            procno,
            cmds,
            replies,
        }
    }
}

impl Session {
    fn send(&self, c: Cmd) {
        self.cmds.send(c).unwrap();
    }

    /// Sends `c` and expects it to finish without blocking.
    fn run(&self, c: Cmd) -> Reply {
        self.send(c);
        self.replies
            .recv_timeout(Duration::from_secs(20))
            .expect("step did not finish")
    }

    fn reply(&self) -> Reply {
        self.replies
            .recv_timeout(Duration::from_secs(20))
            .expect("waiting step never finished")
    }

    /// Sends `c` and waits until this backend sleeps in the lock manager.
    fn run_blocked(&self, w: &World, c: Cmd) {
        self.send(c);
        for _ in 0..20_000 {
            if w.lm.is_waiting(self.procno) {
                return;
            }
            assert!(
                self.replies.try_recv().is_err(),
                "finished instead of waiting"
            );
            thread::sleep(Duration::from_micros(200));
        }
        panic!("backend {} never waited", self.procno);
    }

    fn done(&self) -> bool {
        match self.replies.try_recv() {
            Ok(r) => {
                r.unwrap();
                true
            }
            Err(_) => false,
        }
    }
}

fn ok() -> Reply {
    Ok(LockAcquireResult::Ok)
}

#[test]
fn waiters_are_granted_in_queue_order_and_nobody_jumps_the_queue() {
    for fp in [FastPathLayout::None, FastPathLayout::Slots16] {
        let w = World::new(fp);
        let (a, b, c) = (w.session(), w.session(), w.session());
        assert_eq!(a.run(Cmd::Lock(1, AccessShare, long())), ok());
        b.run_blocked(&w, Cmd::Lock(1, AccessExclusive, long()));
        // AccessShare is compatible with what is granted, but not with b's request ahead.
        c.run_blocked(&w, Cmd::Lock(1, AccessShare, long()));
        assert_eq!(a.run(Cmd::Commit), ok());
        assert_eq!(b.reply(), ok(), "b first");
        thread::sleep(Duration::from_millis(20));
        assert!(!c.done(), "c still waits behind b's grant");
        assert_eq!(b.run(Cmd::Commit), ok());
        assert_eq!(c.reply(), ok());
        assert_eq!(c.run(Cmd::Commit), ok());
        assert_eq!(w.lm.entries_in_use(), (0, 0));
    }
}

#[test]
fn a_wake_up_grants_nobody_past_a_conflicting_earlier_waiter() {
    let w = World::new(FastPathLayout::None);
    let (a, b, c, d) = (w.session(), w.session(), w.session(), w.session());
    assert_eq!(a.run(Cmd::Lock(1, RowExclusive, long())), ok());
    assert_eq!(d.run(Cmd::Lock(1, RowExclusive, long())), ok());
    b.run_blocked(&w, Cmd::Lock(1, Share, long()));
    // Compatible with both grants, but not with b's Share ahead of it.
    c.run_blocked(&w, Cmd::Lock(1, RowExclusive, long()));
    // a's release wakes the queue; b is still blocked by d, and c must stay behind b.
    assert_eq!(a.run(Cmd::Commit), ok());
    thread::sleep(Duration::from_millis(20));
    assert!(!b.done() && !c.done());
    assert_eq!(d.run(Cmd::Commit), ok());
    assert_eq!(b.reply(), ok());
    assert_eq!(b.run(Cmd::Commit), ok());
    assert_eq!(c.reply(), ok());
    assert_eq!(c.run(Cmd::Commit), ok());
    assert_eq!(w.lm.entries_in_use(), (0, 0));
}

#[test]
fn a_holder_joins_the_queue_ahead_of_a_waiter_that_waits_for_it() {
    let w = World::new(FastPathLayout::None);
    let (a, b, c) = (w.session(), w.session(), w.session());
    assert_eq!(a.run(Cmd::Lock(1, Share, long())), ok());
    assert_eq!(c.run(Cmd::Lock(1, Share, long())), ok());
    // b waits for Exclusive behind both holders.
    b.run_blocked(&w, Cmd::Lock(1, Exclusive, long()));
    // c (holding Share, which b waits for) asks for ShareRowExclusive: it conflicts with a's
    // Share, so it waits — but ahead of b.
    c.run_blocked(&w, Cmd::Lock(1, ShareRowExclusive, long()));
    assert_eq!(a.run(Cmd::Commit), ok());
    assert_eq!(c.reply(), ok(), "c, queued ahead of b, goes first");
    assert!(!b.done());
    assert_eq!(c.run(Cmd::Commit), ok());
    assert_eq!(b.reply(), ok());
    assert_eq!(b.run(Cmd::Commit), ok());
    assert_eq!(w.lm.entries_in_use(), (0, 0));
}

#[test]
fn a_holder_with_nothing_conflicting_ahead_is_granted_at_once() {
    let w = World::new(FastPathLayout::None);
    let (a, b) = (w.session(), w.session());
    assert_eq!(a.run(Cmd::Lock(1, RowExclusive, long())), ok());
    b.run_blocked(&w, Cmd::Lock(1, Share, long()));
    // a's RowShare is compatible with its own grant and goes in ahead of b, whose Share
    // conflicts with a's RowExclusive.
    assert_eq!(a.run(Cmd::Lock(1, RowShare, long())), ok());
    assert_eq!(a.run(Cmd::Commit), ok());
    assert_eq!(b.reply(), ok());
    assert_eq!(b.run(Cmd::Commit), ok());
}

#[test]
fn from_17_a_nowait_request_may_jump_the_queue_as_a_waiting_one_would() {
    for (pg17, want) in [
        (false, LockAcquireResult::NotAvailable),
        (true, LockAcquireResult::Ok),
    ] {
        let w = World::with(FastPathLayout::None, pg17);
        let (a, b) = (w.session(), w.session());
        assert_eq!(a.run(Cmd::Lock(1, RowExclusive, long())), ok());
        b.run_blocked(&w, Cmd::Lock(1, Share, long()));
        // ShareUpdateExclusive conflicts with b's queued Share, but b waits for a, so the queue
        // rule puts a ahead of b, where nothing conflicts: a waiting request is granted at once
        // in every release, a NOWAIT one only from 17.
        assert_eq!(
            a.run(Cmd::Nowait(1, ShareUpdateExclusive)),
            Ok(want),
            "pg17 rule: {pg17}"
        );
        assert_eq!(a.run(Cmd::Commit), ok());
        assert_eq!(b.reply(), ok());
        assert_eq!(b.run(Cmd::Commit), ok());
        assert_eq!(w.lm.entries_in_use(), (0, 0));
    }
}

#[test]
fn from_17_a_nowait_request_that_would_close_a_cycle_is_not_available() {
    // b holds Share and waits for Exclusive behind a's Share; a's NOWAIT Exclusive would have
    // to go ahead of b (b waits for a) and wait for b's Share: the early deadlock of
    // JoinWaitQueue, which for a dontWait request 17+ report as "not available".
    for pg17 in [false, true] {
        let w = World::with(FastPathLayout::None, pg17);
        let (a, b) = (w.session(), w.session());
        assert_eq!(a.run(Cmd::Lock(1, Share, long())), ok());
        assert_eq!(b.run(Cmd::Lock(1, Share, long())), ok());
        b.run_blocked(&w, Cmd::Lock(1, Exclusive, long()));
        assert_eq!(
            a.run(Cmd::Nowait(1, Exclusive)),
            Ok(LockAcquireResult::NotAvailable),
            "pg17 rule: {pg17}"
        );
        assert!(!b.done(), "b still waits for a's Share");
        assert_eq!(a.run(Cmd::Commit), ok());
        assert_eq!(b.reply(), ok());
        assert_eq!(b.run(Cmd::Commit), ok());
        assert_eq!(w.lm.entries_in_use(), (0, 0));
    }
}

#[test]
fn two_upgraders_meet_in_an_early_deadlock() {
    let w = World::new(FastPathLayout::Slots16);
    let (a, b) = (w.session(), w.session());
    assert_eq!(a.run(Cmd::Lock(1, AccessShare, long())), ok());
    assert_eq!(b.run(Cmd::Lock(1, AccessShare, long())), ok());
    a.run_blocked(&w, Cmd::Lock(1, AccessExclusive, long()));
    let e = b.run(Cmd::Lock(1, AccessExclusive, long())).unwrap_err();
    assert_eq!(e.to_string(), "deadlock detected");
    let detail = e.detail().unwrap();
    let lines: Vec<&str> = detail.lines().collect();
    assert_eq!(lines.len(), 2, "{detail}");
    assert!(
        lines[0].starts_with(&format!(
            "Process {} waits for AccessExclusiveLock on relation 16385 of database 5; blocked by process {}.",
            b.procno, a.procno
        )),
        "{detail}"
    );
    // b's abort released its AccessShare: a gets the upgrade.
    assert_eq!(a.reply(), ok());
    assert_eq!(a.run(Cmd::Commit), ok());
    assert_eq!(w.lm.entries_in_use(), (0, 0));
}

#[test]
fn a_hard_cycle_fails_the_backend_whose_deadlock_timeout_expires() {
    for fp in [FastPathLayout::None, FastPathLayout::Slots16] {
        let w = World::new(fp);
        let (a, b, c) = (w.session(), w.session(), w.session());
        for (s, r) in [(&a, 1), (&b, 2), (&c, 3)] {
            assert_eq!(s.run(Cmd::Lock(r, AccessExclusive, long())), ok());
        }
        a.run_blocked(&w, Cmd::Lock(2, AccessExclusive, long()));
        b.run_blocked(&w, Cmd::Lock(3, AccessExclusive, long()));
        c.send(Cmd::Lock(1, AccessExclusive, short()));
        let e = c.reply().unwrap_err();
        assert!(matches!(e, LmgrError::Deadlock { .. }), "{e}");
        let detail = e.detail().unwrap();
        assert_eq!(detail.lines().count(), 3, "{detail}");
        assert!(detail.starts_with(&format!("Process {} waits for", c.procno)));
        assert_eq!(b.reply(), ok(), "c's abort lets b in");
        assert_eq!(b.run(Cmd::Commit), ok());
        assert_eq!(a.reply(), ok());
        assert_eq!(a.run(Cmd::Commit), ok());
        assert_eq!(w.lm.entries_in_use(), (0, 0));
    }
}

#[test]
fn a_soft_deadlock_is_resolved_by_reordering_the_queue() {
    let w = World::new(FastPathLayout::None);
    let (a, b, c) = (w.session(), w.session(), w.session());
    // a holds R1 Share; b waits for R1 AccessExclusive; c holds R2 and waits for R1 Share
    // behind b; a then waits for R2. Cycle a → c → (soft) b → a: moving c ahead of b lets c
    // in (its Share is compatible with a's).
    assert_eq!(a.run(Cmd::Lock(1, Share, long())), ok());
    assert_eq!(c.run(Cmd::Lock(2, AccessExclusive, long())), ok());
    b.run_blocked(&w, Cmd::Lock(1, AccessExclusive, long()));
    c.run_blocked(&w, Cmd::Lock(1, Share, long()));
    a.send(Cmd::Lock(2, AccessShare, short()));
    assert_eq!(c.reply(), ok(), "c granted by the reordering");
    assert_eq!(c.run(Cmd::Commit), ok());
    assert_eq!(a.reply(), ok());
    assert_eq!(a.run(Cmd::Commit), ok());
    assert_eq!(b.reply(), ok());
    assert_eq!(b.run(Cmd::Commit), ok());
    assert_eq!(w.lm.entries_in_use(), (0, 0));
}

#[test]
fn lock_timeout_cancels_the_wait_and_lets_the_queue_move() {
    let w = World::new(FastPathLayout::Slots16);
    let (a, b, c) = (w.session(), w.session(), w.session());
    assert_eq!(a.run(Cmd::Lock(1, AccessShare, long())), ok());
    let t = LockTimeouts {
        lock_timeout: Some(Duration::from_millis(30)),
        ..long()
    };
    b.run_blocked(&w, Cmd::Lock(1, AccessExclusive, t));
    c.run_blocked(&w, Cmd::Lock(1, AccessShare, long()));
    let e = b.reply().unwrap_err();
    assert_eq!(e.to_string(), "canceling statement due to lock timeout");
    assert_eq!(c.reply(), ok(), "no longer behind b");
    assert_eq!(
        c.run(Cmd::Nowait(1, AccessExclusive)),
        Ok(LockAcquireResult::NotAvailable)
    );
    for s in [&a, &c] {
        assert_eq!(s.run(Cmd::Commit), ok());
    }
    assert_eq!(w.lm.entries_in_use(), (0, 0));
}
