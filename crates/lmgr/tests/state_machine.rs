//! A proptest state machine of the lock manager: random conditional acquisitions, releases and
//! release-alls by several backends over a few relations, with and without the fast path (and
//! with 18's groups), strong locks forcing transfers, against a sequential reference model that
//! knows only the conflict table. They must agree on every step, and the shared table must be
//! empty once everything is released.
#![cfg(not(loom))]

use pglocks_lmgr::{
    FastPathLayout, LockAcquireResult, LockManager, LockManagerConfig, LockMode, LockOwner, LockTag,
};
use pglocks_proc::ProcTable;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::HashMap;

const BACKENDS: usize = 3;
const RELATIONS: u32 = 3;
const DB: u32 = 5;

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        backend: usize,
        rel: u32,
        mode: LockMode,
        session: bool,
    },
    Release {
        backend: usize,
        rel: u32,
        mode: LockMode,
        session: bool,
    },
    ReleaseAll {
        backend: usize,
        session: bool,
    },
}

fn mode() -> impl Strategy<Value = LockMode> {
    // Weak modes most of the time, as in real workloads; every mode sometimes.
    prop_oneof![
        6 => (0usize..3).prop_map(|i| LockMode::ALL[i]),
        4 => (0usize..8).prop_map(|i| LockMode::ALL[i]),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let b = 0..BACKENDS;
    let r = 0..RELATIONS;
    prop::collection::vec(
        prop_oneof![
            5 => (b.clone(), r.clone(), mode(), any::<bool>()).prop_map(|(backend, rel, mode, session)| {
                Op::Acquire { backend, rel, mode, session }
            }),
            4 => (b.clone(), r, mode(), any::<bool>()).prop_map(|(backend, rel, mode, session)| {
                Op::Release { backend, rel, mode, session }
            }),
            1 => (b, any::<bool>()).prop_map(|(backend, session)| Op::ReleaseAll { backend, session }),
        ],
        0..80,
    )
}

/// The reference: per backend, per (relation, mode), the transaction and session references.
type Model = Vec<HashMap<(u32, LockMode), (u32, u32)>>;

fn owner(session: bool) -> LockOwner {
    if session {
        LockOwner::Session
    } else {
        LockOwner::Transaction
    }
}

fn run(layout: FastPathLayout, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let procs = ProcTable::new(BACKENDS);
    let mut cfg = LockManagerConfig::new(BACKENDS);
    cfg.fast_path = layout;
    let lm: LockManager = LockManager::new(cfg);
    let mut backends: Vec<_> = (0..BACKENDS).map(|_| procs.attach().unwrap()).collect();
    let mut locals: Vec<_> = backends
        .iter_mut()
        .map(|b| lm.connect(b, DB).unwrap())
        .collect();
    let mut model: Model = vec![HashMap::new(); BACKENDS];
    for op in ops {
        match op {
            Op::Acquire {
                backend,
                rel,
                mode,
                session,
            } => {
                let want = if model[backend].contains_key(&(rel, mode)) {
                    LockAcquireResult::AlreadyHeld
                } else if model.iter().enumerate().any(|(other, held)| {
                    other != backend
                        && held
                            .keys()
                            .any(|&(r, m)| r == rel && m.conflicts_with(mode))
                }) {
                    LockAcquireResult::NotAvailable
                } else {
                    LockAcquireResult::Ok
                };
                let got = lm
                    .conditional_acquire(
                        &mut backends[backend],
                        &mut locals[backend],
                        LockTag::relation(DB, rel),
                        mode,
                        owner(session),
                    )
                    .unwrap();
                prop_assert_eq!(got, want, "{:?} {} {:?}", backend, rel, mode);
                if got != LockAcquireResult::NotAvailable {
                    let c = model[backend].entry((rel, mode)).or_default();
                    if session {
                        c.1 += 1;
                    } else {
                        c.0 += 1;
                    }
                }
            }
            Op::Release {
                backend,
                rel,
                mode,
                session,
            } => {
                let r = lm.release(
                    &mut backends[backend],
                    &mut locals[backend],
                    LockTag::relation(DB, rel),
                    mode,
                    owner(session),
                );
                match model[backend].get_mut(&(rel, mode)) {
                    Some(c) if (if session { c.1 } else { c.0 }) > 0 => {
                        prop_assert!(r.is_ok(), "{:?}", r);
                        if session {
                            c.1 -= 1;
                        } else {
                            c.0 -= 1;
                        }
                        if *c == (0, 0) {
                            model[backend].remove(&(rel, mode));
                        }
                    }
                    _ => prop_assert!(r.is_err()),
                }
            }
            Op::ReleaseAll { backend, session } => {
                let n = lm
                    .release_all(&mut backends[backend], &mut locals[backend], session)
                    .unwrap();
                let before = model[backend].len();
                model[backend].retain(|_, c| {
                    c.0 = 0;
                    if session {
                        c.1 = 0;
                    }
                    *c != (0, 0)
                });
                prop_assert_eq!(n, before - model[backend].len());
            }
        }
        for (b, held) in model.iter().enumerate() {
            let mut want: Vec<_> = held
                .iter()
                .map(|(&(r, m), c)| (LockTag::relation(DB, r), m, c.0 + c.1))
                .collect();
            want.sort();
            prop_assert_eq!(locals[b].held(), want);
        }
    }
    for (b, local) in backends.iter_mut().zip(locals.iter_mut()) {
        lm.release_all(b, local, true).unwrap();
    }
    prop_assert_eq!(lm.entries_in_use(), (0, 0), "the shared table is empty");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn with_the_fast_path_of_92_to_17(ops in ops()) {
        run(FastPathLayout::Slots16, ops)?;
    }

    #[test]
    fn with_18s_fast_path_groups(ops in ops()) {
        run(FastPathLayout::Groups(4), ops)?;
    }

    #[test]
    fn without_a_fast_path(ops in ops()) {
        run(FastPathLayout::None, ops)?;
    }
}
