//! The commit log on a simulated machine: the status bytes a commit writes and the pages a
//! checkpoint writes out are charged as touches of their lines.

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, SimThread};
use pglocks_slru::clog::{Clog, ClogConfig, XidStatus};
use pglocks_slru::{MemoryStore, Victim};
use std::time::Duration;

/// The commit log of 9.6–16 (one control lock) or 17 (`banks`), with `buffers` pages, for
/// `backends` backends, kept in memory.
fn clog(buffers: usize, banks: bool, backends: usize) -> Clog<AtomicLwLock<Pg96Layout>> {
    Clog::new(
        &ClogConfig::new(buffers, banks, Victim::AvoidIoBusy, false, backends),
        Box::new(MemoryStore::new(Duration::ZERO)),
    )
    .unwrap()
}

/// Touches of a simulated run that extends the log to `pages` pages (each zeroed in a slot of
/// its own) and then, with `commit`, commits xid 3 with `subxids` subtransactions (all on page
/// 0) and writes out every dirty page.
fn touches(pages: u32, commit: Option<u32>) -> u64 {
    let clog = clog(8, false, 1);
    let procs = ProcTable::new(1);
    let team = vec![SimThread::on(0, || {
        let mut b = procs.attach().unwrap();
        clog.extend(&mut b, 3).unwrap();
        for p in 1..pages {
            clog.extend(&mut b, p * 32768).unwrap();
        }
        if let Some(subxids) = commit {
            let subs: Vec<u32> = (4..4 + subxids).collect();
            clog.set_tree_status(&mut b, 3, &subs, XidStatus::Committed, 0)
                .unwrap();
            clog.slru().write_all(&mut b).unwrap();
        }
    })];
    pglocks_sim::run_tallied("westmere-80", team).touches
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_status_update_reads_and_writes_its_byte() {
    // One call either way; 100 more statuses set: 100 more bytes read and written.
    let alone = touches(1, Some(0));
    let tree = touches(1, Some(100));
    assert!(tree >= alone + 200, "{alone} -> {tree}");
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_page_written_out_is_read_whole() {
    // Two more dirty pages: 256 more lines read by the writes.
    let one = touches(1, Some(0));
    let three = touches(3, Some(0));
    assert!(three >= one + 256, "{one} -> {three}");
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "the simulator's build only (RUSTFLAGS=\"--cfg pglocks_sim\")"
)]
fn a_page_zeroed_is_written_whole() {
    // Two more pages zeroed: each page's 128 lines stored, and its 1024 group LSNs' 128 lines.
    let one = touches(1, None);
    let three = touches(3, None);
    assert!(three >= one + 2 * (128 + 128), "{one} -> {three}");
}

/// Transfers by structure of a simulated run in which one backend (CPU 0) commits `rounds`
/// xids while another (CPU 10, the other package) looks their statuses up, on `banks` (17) or
/// one control lock (9.6–16).
fn by_structure(banks: bool, rounds: u32) -> Outcome {
    let clog = clog(32, banks, 2);
    let procs = ProcTable::new(2);
    {
        let mut b = procs.attach().unwrap();
        clog.extend(&mut b, 3).unwrap();
    }
    let (clog, procs) = (&clog, &procs);
    let team = SimThread::team(&[0, 10], |me| {
        move || {
            let mut b = procs.attach().unwrap();
            for xid in 3..3 + rounds {
                if me == 0 {
                    clog.set_tree_status(&mut b, xid, &[], XidStatus::Committed, 0)
                        .unwrap();
                } else {
                    clog.get_status(&mut b, xid).unwrap();
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
fn the_slrus_shared_structures_are_placed_in_the_map_under_postgresqls_names() {
    for (banks, lock, counter) in [
        (false, "XactSLRULock", "Xact SlruSharedData"),
        (true, "Xact bank_locks", "Xact bank_cur_lru_count"),
    ] {
        let found = by_structure(banks, 200);
        // The lock, the LRU counter both bump and the status bytes move between the two.
        for name in [lock, counter, "Xact page buffers"] {
            assert!(
                found.transfers_of(name) > 0,
                "banks {banks}: no transfers of {name}: {found:?}"
            );
        }
        // Nothing of the SLRU is charged outside the map (where a line outside it is named
        // after the source line that first missed on it).
        assert!(
            !found
                .outside_the_map()
                .iter()
                .any(|s| ["crates/slru/", "crates/lwlock/"]
                    .iter()
                    .any(|c| s.name.contains(c))),
            "banks {banks}: {found:?}"
        );
    }
}
