//! pgbench's transactions on a simulated machine: the bytes of the pages they read and write,
//! and of the buffer mapping table they look pages up in, are charged to the simulated CPUs.

use super::{build, Kind};
use crate::preset::Preset;
use pglocks_lwlock::{AtomicLwLock, LockedVar, Pad128, Pg18Layout};
use pglocks_sim::{Outcome, SimThread};
use pglocks_spin::PgSpinLock;

/// `txns` transactions of `kind` on each of `threads` backends of pg18 at scale 1, on the
/// simulated Westmere, with the hot-lines tally on (its transfers by structure).
fn simulate(kind: Kind, threads: usize, txns: usize) -> Outcome {
    let settings = Preset::by_name("pg18").unwrap().settings();
    let (cluster, sessions, procs) =
        build::<AtomicLwLock<Pg18Layout>, PgSpinLock, Pad128, LockedVar>(
            &settings, kind, threads, 1,
        )
        .unwrap();
    let team = sessions
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let (cluster, procs) = (&cluster, &procs);
            SimThread::on(i * 10, move || {
                let mut b = procs.attach().unwrap();
                for _ in 0..txns {
                    cluster.transaction(&mut b, &mut s, kind).unwrap();
                }
            })
        })
        .collect();
    pglocks_sim::run_tallied("westmere-80", team)
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn transactions_charge_the_pages_and_the_mapping_table_they_touch() {
    for kind in [Kind::SelectOnly, Kind::TpcbLike] {
        let out = simulate(kind, 4, 20);
        let name = kind.name();
        assert!(out.touches > 0, "{name}: {out:?}");
        // Pages: the B-tree descents and heap rows (first touches are misses too).
        assert!(
            out.transfers_of("Buffer Blocks") > 0,
            "{name}: {:?}",
            out.by_structure
        );
        // The mapping table: every ReadBuffer's lookup, and the inserts of the pages read in.
        for region in [
            "Shared Buffer Lookup Table buckets",
            "Shared Buffer Lookup Table elements",
            "Shared Buffer Lookup Table directory",
        ] {
            assert!(
                out.transfers_of(region) > 0,
                "{name}: {region}: {:?}",
                out.by_structure
            );
        }
    }
}
