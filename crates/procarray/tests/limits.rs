//! `MaxBackends` at, just below and just above it: a ProcArray configured for up to
//! `MAX_BACKENDS` (2^18 − 1) backends, and a full one refusing one backend more. As in
//! PostgreSQL the backend more is refused before the ProcArray sees it: there is no `PGPROC`
//! (here no [`Backend`](pglocks_proc::Backend)) for it, "sorry, too many clients already"
//! (`InitProcess`), and a proc number past the array is refused by `add`.
#![cfg(not(loom))]

use pglocks_lwlock::AtomicLwLock;
use pglocks_proc::{ProcError, ProcTable};
use pglocks_procarray::{
    ProcArray, ProcArrayConfig, ProcArrayError, Snapshot, SnapshotLayout, MAX_BACKENDS,
};

type Pa = ProcArray<AtomicLwLock>;

const LAYOUTS: [SnapshotLayout; 3] = [
    SnapshotLayout::ProcScan,
    SnapshotLayout::Pgxact,
    SnapshotLayout::Dense,
];

#[test]
fn max_backends_is_the_configurable_maximum() {
    assert_eq!(MAX_BACKENDS, pglocks_proc::MAX_BACKENDS);
    for layout in LAYOUTS {
        for ok in [1, MAX_BACKENDS - 1, MAX_BACKENDS] {
            assert!(ProcArrayConfig::new(ok, layout, true).validate().is_ok());
        }
        for bad in [0, MAX_BACKENDS + 1] {
            let e = ProcArrayConfig::new(bad, layout, true)
                .validate()
                .unwrap_err();
            assert!(matches!(e, ProcArrayError::Config(_)), "{e:?}");
            assert_eq!(
                e.to_string(),
                format!("invalid ProcArray setting: max_backends must be 1 to 262143, not {bad}")
            );
            assert!(Pa::new(&ProcArrayConfig::new(bad, layout, true)).is_err());
        }
    }
}

#[test]
fn a_full_procarray_takes_no_backend_more() {
    for layout in LAYOUTS {
        for n in [1, 3] {
            let pa = Pa::new(&ProcArrayConfig::new(
                n,
                layout,
                layout != SnapshotLayout::ProcScan,
            ))
            .unwrap();
            let procs = ProcTable::new(n);
            let mut backends: Vec<_> = (0..n).map(|_| procs.attach().unwrap()).collect();
            // Up to one below, then the last one: all in, each with an xid.
            for b in backends.iter_mut() {
                let procno = b.procno();
                pa.add(b, procno).unwrap();
            }
            assert_eq!(pa.num_procs(), n);
            let xids: Vec<u32> = backends
                .iter_mut()
                .map(|b| pa.assign_xid(b, None).unwrap())
                .collect();
            let mut snap = Snapshot::new();
            pa.get_snapshot_data(&mut backends[0], &mut snap).unwrap();
            assert!(
                xids.iter().all(|&x| x >= snap.xmin),
                "{layout:?}: all running"
            );
            // One more: no backend slot for it, and no ProcArray entry for its number.
            let e = procs.attach().unwrap_err();
            assert_eq!(e, ProcError::TooManyClients { max: n });
            assert!(e.to_string().starts_with("sorry, too many clients already"));
            let e = pa.add(&mut backends[0], n).unwrap_err();
            assert_eq!(e.to_string(), format!("backend {n} is out of range"));
            assert_eq!(pa.num_procs(), n, "nothing changed");
            // One leaves; its place is taken again.
            for (b, xid) in backends.iter_mut().zip(xids) {
                pa.end_transaction(b, xid).unwrap();
            }
            let gone = backends.pop().unwrap();
            let procno = gone.procno();
            drop(gone);
            let mut again = procs.attach().unwrap();
            assert_eq!(again.procno(), procno);
            pa.remove(&mut again, procno).unwrap();
            pa.add(&mut again, procno).unwrap();
            assert_eq!(pa.num_procs(), n);
        }
    }
}
