//! The first deadlock of logical replication's parallel apply (applyparallelworker.c's header
//! comment, "Locking Considerations"), at the level of the lock manager: a parallel apply worker
//! (PA) has applied a chunk of a streamed transaction — holding its local transaction's lock —
//! and waits for the next chunk on the stream lock, which the leader (LA) holds
//! AccessExclusive between chunks; the leader, applying another transaction itself, meets a
//! unique-key conflict with the PA's uncommitted insert (a key only the subscriber has) and waits
//! for the PA's transaction (`XactLockTableWait`). The deadlock detector must find the cycle and
//! report it to exactly one of them, naming both locks.
#![cfg(not(loom))]

use pglocks_lmgr::{LmgrError, LockManager, LockManagerConfig, LockMode, LockTimeouts};
use pglocks_proc::ProcTable;
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

const DATABASE: u32 = 5;
const SUBSCRIPTION: u32 = 16_600;
/// The remote (publisher) xid of the streamed transaction.
const REMOTE_XID: u32 = 900;
/// The PA's local transaction applying it.
const PA_LOCAL_XID: u32 = 5_000;
/// applyparallelworker.c's `PARALLEL_APPLY_LOCK_STREAM`.
const STREAM: u16 = 0;

fn timeouts() -> LockTimeouts {
    LockTimeouts {
        deadlock_timeout: Duration::from_millis(20),
        lock_timeout: None,
    }
}

#[test]
fn leader_and_parallel_worker_deadlock_is_reported_to_one_of_them() {
    for round in 0..5 {
        let lm = Arc::new(LockManager::<pglocks_lwlock::AtomicLwLock>::new(
            LockManagerConfig::new(2),
        ));
        let procs = ProcTable::new(2);
        let both_hold = Arc::new(Barrier::new(2));
        let (tx, rx) = mpsc::channel::<Result<(), LmgrError>>();

        let pa = {
            let (lm, procs, both_hold, tx) = (
                Arc::clone(&lm),
                procs.clone(),
                Arc::clone(&both_hold),
                tx.clone(),
            );
            thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                let mut local = lm.connect(&mut b, DATABASE).unwrap();
                // Applying the chunk: the local transaction and its lock.
                lm.xact_lock_table_insert(&mut b, &mut local, PA_LOCAL_XID)
                    .unwrap();
                both_hold.wait();
                // STREAM STOP processed: wait for the next chunk.
                let got = lm.lock_apply_transaction_for_session(
                    &mut b,
                    &mut local,
                    SUBSCRIPTION,
                    REMOTE_XID,
                    STREAM,
                    LockMode::AccessShare,
                    &timeouts(),
                );
                // Whoever lost gives everything back (a worker exits on ERROR).
                if got.is_err() {
                    lm.release_all(&mut b, &mut local, true).unwrap();
                }
                tx.send(got).unwrap();
                // The winner's side: the PA that got the stream lock finishes later.
                lm.release_all(&mut b, &mut local, true).unwrap();
            })
        };

        let mut b = procs.attach().unwrap();
        let mut local = lm.connect(&mut b, DATABASE).unwrap();
        // Between chunks the leader holds the stream lock.
        lm.lock_apply_transaction_for_session(
            &mut b,
            &mut local,
            SUBSCRIPTION,
            REMOTE_XID,
            STREAM,
            LockMode::AccessExclusive,
            &LockTimeouts::default(),
        )
        .unwrap();
        both_hold.wait();
        // The leader's own insert conflicts with the PA's uncommitted one.
        let waited = lm.xact_lock_table_wait(
            &mut b,
            &mut local,
            PA_LOCAL_XID,
            &timeouts(),
            |_, _| Ok::<_, LmgrError>(false),
            Ok,
        );
        if waited.is_err() {
            lm.release_all(&mut b, &mut local, true).unwrap();
        }
        // If the leader was the victim, its release lets the PA have the stream lock; if the
        // PA was, it has reported already.
        let pa_result = rx.recv().unwrap();
        let victims: Vec<&LmgrError> = [waited.as_ref().err(), pa_result.as_ref().err()]
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(
            victims.len(),
            1,
            "round {round}: {waited:?} / {pa_result:?}"
        );
        let e = victims[0];
        assert!(matches!(e, LmgrError::Deadlock { .. }), "{e}");
        let detail = e.detail().unwrap_or_default();
        assert!(
            detail.contains("remote transaction 900 of subscription 16600")
                && detail.contains("ShareLock on transaction 5000"),
            "the report names both locks: {detail}"
        );
        lm.release_all(&mut b, &mut local, true).unwrap();
        pa.join().unwrap();
        assert_eq!(lm.entries_in_use(), (0, 0));
    }
}
