//! The ProcArray on a simulated machine: a snapshot's walk of the array is charged for the
//! data behind ProcArrayLock (`ProcArrayStruct`'s entries, one touch each).

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_procarray::{ProcArray, ProcArrayConfig, Snapshot, SnapshotLayout};
use pglocks_sim::{Placement, Profile, SimThread};
use std::time::Duration;

/// Touches of a simulated run in which one backend takes `snapshots` snapshots with `idle`
/// other backends in the array.
fn touches(layout: SnapshotLayout, idle: usize, snapshots: usize) -> u64 {
    let profile = Profile::find("westmere-80").unwrap();
    let n = idle + 1;
    let pa: ProcArray<AtomicLwLock<Pg96Layout>> =
        ProcArray::new(&ProcArrayConfig::new(n, layout, true)).unwrap();
    let procs = ProcTable::new(n);
    let team = vec![SimThread {
        placement: Placement::Cpu(0),
        body: Box::new(|| {
            let mut b = procs.attach().unwrap();
            for p in 0..n {
                pa.add(&mut b, p).unwrap();
            }
            let mut snap = Snapshot::new();
            for _ in 0..snapshots {
                pa.get_snapshot_data(&mut b, &mut snap).unwrap();
            }
        }) as Box<dyn FnOnce() + '_>,
    }];
    pglocks_sim::run(&profile, team, Duration::from_secs(10))
        .unwrap()
        .touches
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
