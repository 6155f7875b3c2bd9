//! proptest state machines of the proc crate's stateful structures against sequential models:
//! the ProcTable's slot allocation (`InitProcess` / `ProcKill`) and the wait-event table.
#![cfg(not(loom))]

use pglocks_proc::backend::ProcError;
use pglocks_proc::stats::WaitTable;
use pglocks_proc::{Backend, ProcTable};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum ProcOp {
    Attach,
    /// Detach the n-th attached backend (modulo how many there are).
    Detach(usize),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn proc_table_hands_out_the_lowest_free_slot(
        size in 1usize..6,
        ops in prop::collection::vec(
            prop_oneof![Just(ProcOp::Attach), (0usize..8).prop_map(ProcOp::Detach)], 0..40),
    ) {
        let table = ProcTable::new(size);
        let mut live: Vec<Backend> = Vec::new();
        let mut model = vec![false; size]; // slot in use?
        for op in ops {
            match op {
                ProcOp::Attach => {
                    let expected = model.iter().position(|used| !used);
                    match (table.attach(), expected) {
                        (Ok(b), Some(slot)) => {
                            prop_assert_eq!(b.procno(), slot);
                            model[slot] = true;
                            live.push(b);
                        }
                        (Err(ProcError::TooManyClients { max }), None) => prop_assert_eq!(max, size),
                        (got, want) => prop_assert!(false, "got {:?}, model wanted {:?}", got.map(|b| b.procno()), want),
                    }
                }
                ProcOp::Detach(n) if !live.is_empty() => {
                    let b = live.swap_remove(n % live.len());
                    model[b.procno()] = false;
                }
                ProcOp::Detach(_) => {}
            }
        }
    }

    #[test]
    fn wait_table_sums_like_a_map(
        rows in prop::collection::vec((0usize..3, 0usize..2, 0u64..1_000_000), 0..50),
        split in 0usize..50,
    ) {
        const LOCKS: [&str; 3] = ["SpinDelay", "LockManager", "WALWrite"];
        const MODES: [&str; 2] = ["sleep", "exclusive"];
        let (mut a, mut b) = (WaitTable::default(), WaitTable::default());
        let mut model: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
        for (i, &(l, m, ns)) in rows.iter().enumerate() {
            let t = if i < split { &mut a } else { &mut b };
            t.record(LOCKS[l], MODES[m], ns);
            let e = model.entry((LOCKS[l], MODES[m])).or_default();
            e.0 += 1;
            e.1 += ns;
        }
        a.merge(&b);
        let got: BTreeMap<(&str, &str), (u64, u64)> =
            a.entries().iter().map(|e| ((e.lock, e.mode), (e.count, e.wait_ns))).collect();
        prop_assert_eq!(got.len(), a.entries().len(), "one row per (lock, mode)");
        prop_assert_eq!(got, model);
    }
}
