//! pgbench's transactions on a simulated machine: the bytes of the pages they read and write,
//! and of the buffer mapping table they look pages up in, are charged to the simulated CPUs.

use super::{build, Kind};
use crate::preset::Preset;
use pglocks_lwlock::{AtomicLwLock, LockedVar, Pad128, Pg18Layout};
use pglocks_sim::{Outcome, Placement, Profile, SimThread};
use pglocks_spin::PgSpinLock;
use std::time::Duration;

/// `txns` transactions of `kind` on each of `threads` backends of pg18 at scale 1, on the
/// simulated Westmere, with the hot-lines tally on (its transfers by structure).
fn simulate(kind: Kind, threads: usize, txns: usize) -> Outcome {
    let settings = Preset::by_name("pg18").unwrap().settings();
    let (cluster, sessions, procs) =
        build::<AtomicLwLock<Pg18Layout>, PgSpinLock, Pad128, LockedVar>(&settings, kind, threads)
            .unwrap();
    let profile = Profile::find("westmere-80").unwrap();
    let team = sessions
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let (cluster, procs) = (&cluster, &procs);
            SimThread {
                placement: Placement::Cpu(i * 10),
                body: Box::new(move || {
                    let mut b = procs.attach().unwrap();
                    for _ in 0..txns {
                        cluster.transaction(&mut b, &mut s, kind).unwrap();
                    }
                }) as Box<dyn FnOnce() + '_>,
            }
        })
        .collect();
    // The tally is asked for by the environment when the run starts; std's environment
    // functions take one lock, so this test's setting races no other test's reading.
    std::env::set_var(pglocks_sim::hot::VARIABLE, "64");
    let out = pglocks_sim::run(&profile, team, Duration::from_secs(10));
    std::env::remove_var(pglocks_sim::hot::VARIABLE);
    out.unwrap()
}

/// The transfers the run counted on the lines of region `name`.
fn transfers(out: &Outcome, name: &str) -> u64 {
    out.by_structure
        .iter()
        .find(|s| s.name == name)
        .map_or(0, |s| s.transfers)
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
            transfers(&out, "Buffer Blocks") > 0,
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
                transfers(&out, region) > 0,
                "{name}: {region}: {:?}",
                out.by_structure
            );
        }
    }
}
