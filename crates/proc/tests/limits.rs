//! The backend-count limits, each at, just below and just above it: a [`ProcTable`] of
//! `MAX_BACKENDS` slots (2^18 − 1, `InitializeMaxBackends`), and attaching to a full table
//! (`InitProcess`: "sorry, too many clients already").
#![cfg(not(loom))]

use pglocks_proc::{ProcError, ProcTable, MAX_BACKENDS};
use pglocks_sync::atomic::Ordering::Relaxed;

#[test]
fn max_backends_is_two_to_the_eighteen_minus_one() {
    assert_eq!(MAX_BACKENDS, 0x3FFFF);
    assert!((MAX_BACKENDS + 1).is_power_of_two());
}

#[test]
fn a_table_of_max_backends_slots_is_built_and_one_more_is_refused() {
    let below = ProcTable::try_new(MAX_BACKENDS - 1).unwrap();
    assert_eq!(below.len(), MAX_BACKENDS - 1);
    drop(below);
    let at = ProcTable::try_new(MAX_BACKENDS).unwrap();
    assert_eq!(at.len(), MAX_BACKENDS);
    // Its last proc number is usable.
    assert_eq!(at.slot(MAX_BACKENDS - 1).lw_waiting.load(Relaxed), 0);
    assert_eq!(at.attach().unwrap().procno(), 0);
    drop(at);
    let e = ProcTable::try_new(MAX_BACKENDS + 1).unwrap_err();
    assert_eq!(
        e,
        ProcError::TooManyBackends {
            requested: MAX_BACKENDS + 1,
            max: MAX_BACKENDS
        }
    );
    assert_eq!(
        e.to_string(),
        "too many server processes configured (262144 backends, at most 262143)"
    );
}

#[test]
#[should_panic(expected = "too many server processes configured")]
fn the_infallible_constructor_refuses_too_many_backends_loudly() {
    let _ = ProcTable::new(MAX_BACKENDS + 1);
}

#[test]
fn attaching_one_backend_more_than_the_table_holds_is_refused() {
    for size in [1, 2, 64] {
        let t = ProcTable::new(size);
        let mut held: Vec<_> = (0..size - 1).map(|_| t.attach().unwrap()).collect();
        // Just below: the last slot is free.
        held.push(t.attach().unwrap());
        assert_eq!(held.last().unwrap().procno(), size - 1);
        // At: every slot is in use; one more is refused and changes nothing.
        let e = t.attach().unwrap_err();
        assert_eq!(e, ProcError::TooManyClients { max: size });
        assert_eq!(
            e.to_string(),
            format!("sorry, too many clients already (all {size} backend slots are in use)")
        );
        assert!(t.attach().is_err(), "still full");
        // One leaves: its slot is taken again.
        let gone = held.remove(0).procno();
        assert_eq!(t.attach().unwrap().procno(), gone);
    }
}
