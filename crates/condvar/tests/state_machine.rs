//! The condition variable against a sequential reference: a queue of waiting backends and a
//! latch per backend. Every operation but a sleep that would block is run in any order by
//! backends of one proc table; after each, the variable's wait list and every latch must be
//! the reference's.
#![cfg(not(loom))]

use pglocks_condvar::{ConditionVariable, Prepared};
use pglocks_proc::{Backend, ProcTable};
use pglocks_sync::time::Instant;
use proptest::prelude::*;
use std::collections::VecDeque;

const BACKENDS: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    Prepare(usize),
    Cancel(usize),
    Signal(usize),
    Broadcast(usize),
    /// A prepared backend whose latch is set and which is off the list: its sleep returns.
    Sleep(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let b = 0..BACKENDS;
    prop_oneof![
        3 => b.clone().prop_map(Op::Prepare),
        2 => b.clone().prop_map(Op::Cancel),
        2 => b.clone().prop_map(Op::Signal),
        1 => b.clone().prop_map(Op::Broadcast),
        2 => b.prop_map(Op::Sleep),
    ]
}

/// Whether backend `b`'s latch is set, without clearing it: a wait whose deadline has passed.
fn latch_set(b: &Backend) -> bool {
    b.wait_latch(Some(Instant::now()))
}

fn check(ops: &[Op]) -> Result<(), TestCaseError> {
    let procs = ProcTable::new(BACKENDS);
    let mut backends: Vec<Backend> = (0..BACKENDS).map(|_| procs.attach().unwrap()).collect();
    let cv: ConditionVariable = ConditionVariable::new();
    let mut prepared: Vec<Option<Prepared>> = (0..BACKENDS).map(|_| None).collect();
    let mut list: VecDeque<usize> = VecDeque::new();
    let mut latch = [false; BACKENDS];
    for op in ops {
        match *op {
            Op::Prepare(i) if prepared[i].is_none() => {
                prepared[i] = Some(cv.prepare_to_sleep(&mut backends[i]).unwrap());
                list.push_back(i);
            }
            Op::Cancel(i) => {
                let Some(p) = prepared[i].take() else {
                    continue;
                };
                let signalled = cv.cancel_sleep(&mut backends[i], p).unwrap();
                let on = list.iter().position(|&x| x == i);
                prop_assert_eq!(signalled, on.is_none(), "backend {}'s cancel", i);
                if let Some(at) = on {
                    list.remove(at);
                }
            }
            Op::Signal(i) => {
                cv.signal(&mut backends[i]).unwrap();
                if let Some(first) = list.pop_front() {
                    latch[first] = true;
                }
            }
            // A broadcaster is on no list (it cancelled any sleep first).
            Op::Broadcast(i) if prepared[i].is_none() => {
                cv.broadcast(&mut backends[i]).unwrap();
                for w in list.drain(..) {
                    latch[w] = true;
                }
            }
            Op::Sleep(i) if prepared[i].is_some() && latch[i] && !list.contains(&i) => {
                let p = prepared[i].take().unwrap();
                cv.sleep(&mut backends[i], &p, "test").unwrap();
                prepared[i] = Some(p);
                latch[i] = false;
                list.push_back(i);
            }
            _ => continue,
        }
        let got: Vec<usize> = cv
            .waiters(&mut backends[0])
            .unwrap()
            .into_iter()
            .map(|p| p as usize)
            .collect();
        prop_assert_eq!(
            &got,
            &list.iter().copied().collect::<Vec<_>>(),
            "after {:?}",
            op
        );
        for (i, b) in backends.iter().enumerate() {
            prop_assert_eq!(
                latch_set(b),
                latch[i],
                "backend {}'s latch after {:?}",
                i,
                op
            );
        }
    }
    for (i, p) in prepared.into_iter().enumerate() {
        if let Some(p) = p {
            cv.cancel_sleep(&mut backends[i], p).unwrap();
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_variable_behaves_as_the_reference(ops in prop::collection::vec(op(), 1..60)) {
        check(&ops)?;
    }
}

#[test]
fn a_broadcast_wakes_those_that_were_waiting_and_no_one_twice() {
    let procs = ProcTable::new(3);
    let mut b: Vec<Backend> = (0..3).map(|_| procs.attach().unwrap()).collect();
    let cv: ConditionVariable = ConditionVariable::new();
    let p0 = cv.prepare_to_sleep(&mut b[0]).unwrap();
    let p1 = cv.prepare_to_sleep(&mut b[1]).unwrap();
    cv.broadcast(&mut b[2]).unwrap();
    assert!(latch_set(&b[0]) && latch_set(&b[1]));
    assert!(
        !latch_set(&b[2]),
        "the broadcaster's own sentinel is not woken"
    );
    assert_eq!(cv.waiters(&mut b[2]).unwrap(), Vec::<u32>::new());
    assert!(
        cv.cancel_sleep(&mut b[0], p0).unwrap(),
        "woken by the broadcast"
    );
    assert!(
        cv.cancel_sleep(&mut b[1], p1).unwrap(),
        "woken by the broadcast"
    );
}
