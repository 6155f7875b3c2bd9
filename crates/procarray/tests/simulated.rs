//! The ProcArray on a simulated machine: a snapshot's walk of the array is charged for the
//! data behind ProcArrayLock (`ProcArrayStruct`'s entries, one touch each).

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_procarray::{ProcArray, ProcArrayConfig, Snapshot, SnapshotLayout};
use pglocks_sim::{Outcome, SimThread};

/// Touches of a simulated run in which one backend takes `snapshots` snapshots with `idle`
/// other backends in the array.
fn touches(layout: SnapshotLayout, idle: usize, snapshots: usize) -> u64 {
    let n = idle + 1;
    let pa: ProcArray<AtomicLwLock<Pg96Layout>> =
        ProcArray::new(&ProcArrayConfig::new(n, layout, true)).unwrap();
    let procs = ProcTable::new(n);
    let team = vec![SimThread::on(0, || {
        let mut b = procs.attach().unwrap();
        for p in 0..n {
            pa.add(&mut b, p).unwrap();
        }
        let mut snap = Snapshot::new();
        for _ in 0..snapshots {
            pa.get_snapshot_data(&mut b, &mut snap).unwrap();
        }
    })];
    pglocks_sim::run_tallied("westmere-80", team).touches
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn every_snapshot_reads_each_entry_of_the_array() {
    // (14's walks the dense xids, which are the shim's atomics, and reuses the snapshot while
    // nothing completes.)
    for layout in [SnapshotLayout::ProcScan, SnapshotLayout::Pgxact] {
        // 30 more backends: 30 more entries read per snapshot (and 30 more registered).
        let few = touches(layout, 2, 100);
        let many = touches(layout, 32, 100);
        assert!(many >= few + 100 * 30, "{layout:?}: {few} -> {many}");
    }
}

/// Transfers by structure of a simulated run in which one backend (CPU 0) runs `rounds`
/// write transactions while another (CPU 10, the other package) takes as many snapshots.
fn by_structure(layout: SnapshotLayout, rounds: usize) -> Outcome {
    let pa: ProcArray<AtomicLwLock<Pg96Layout>> =
        ProcArray::new(&ProcArrayConfig::new(2, layout, true)).unwrap();
    let procs = ProcTable::new(2);
    let (pa, procs) = (&pa, &procs);
    let team = SimThread::team(&[0, 10], |me| {
        move || {
            let mut b = procs.attach().unwrap();
            let me_proc = b.procno();
            pa.add(&mut b, me_proc).unwrap();
            let mut snap = Snapshot::new();
            for _ in 0..rounds {
                if me == 0 {
                    let xid = pa.assign_xid(&mut b, None).unwrap();
                    pa.end_transaction(&mut b, xid).unwrap();
                } else {
                    pa.get_snapshot_data(&mut b, &mut snap).unwrap();
                    pa.end_transaction(&mut b, 0).unwrap();
                }
            }
        }
    });
    pglocks_sim::run_tallied("westmere-80", team)
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn the_shared_structures_are_placed_in_the_map_under_postgresqls_names() {
    for (layout, entries) in [
        (SnapshotLayout::ProcScan, "ProcGlobal->allProcs"),
        (SnapshotLayout::Pgxact, "ProcGlobal->allPgXact"),
        (SnapshotLayout::Dense, "ProcGlobal->xids"),
    ] {
        let found = by_structure(layout, 50);
        // The writer's entry, the xid counter and the lock move to the snapshot taker and back.
        for name in [entries, "ShmemVariableCache", "ProcArrayLock"] {
            assert!(
                found.transfers_of(name) > 0,
                "{layout:?}: no transfers of {name}: {found:?}"
            );
        }
        // Nothing of the ProcArray is charged outside the map (where a line outside it is
        // named after the source line that first missed on it).
        assert!(
            !found
                .outside_the_map()
                .iter()
                .any(|s| ["crates/procarray/"].iter().any(|c| s.name.contains(c))),
            "{layout:?}: {found:?}"
        );
    }
}
