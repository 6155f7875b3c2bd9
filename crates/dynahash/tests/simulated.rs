//! A shared table on a simulated many-core machine: its header, buckets and elements are
//! charged where PostgreSQL's lie, so the free lists' lines move between the CPUs that insert
//! and remove, and up to 9.5 the one list's line is also the line of the masks every search
//! reads.

use pglocks_dynahash::{HashSpec, RegionNames, SharedHash, NUM_FREELISTS};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, Placement, Profile, SimThread};
use pglocks_sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const NAMES: RegionNames = RegionNames {
    header: "simulated hash header",
    directory: "simulated hash directory",
    buckets: "simulated hash buckets",
    elements: "simulated hash elements",
};

/// Two CPUs on two packages of the simulated Westmere take turns (`rounds` each) on a table of
/// 16 partitions and `freelists` free lists: the inserter enters and removes a key of
/// partition 1 (its hash code picks free list 1 when there are 32), the reader looks up a key
/// of partition 2. Each alone uses its partition, so no partition lock is needed.
fn taking_turns(freelists: usize, rounds: usize) -> Outcome {
    let profile = Profile::find("westmere-80").unwrap();
    let procs = ProcTable::new(2);
    let table: SharedHash<u32, u32> = SharedHash::new(&HashSpec {
        names: NAMES,
        init_size: 1_024,
        max_size: 1_024,
        // 64-byte elements: each on a line of its own.
        entry_size: 48,
        key_size: 8,
        partitions: 16,
        freelists,
        tas_spin: true,
    });
    let (inserted, looked_up) = (1 + 2 * NUM_FREELISTS as u32, 2 + 3 * NUM_FREELISTS as u32);
    let turn = AtomicUsize::new(0);
    let team = (0..2)
        .map(|me| SimThread {
            placement: Placement::Cpu(me * 10),
            body: Box::new({
                let (table, procs, turn) = (&table, &procs, &turn);
                move || {
                    let mut b = procs.attach().unwrap();
                    let mut mine = table.chains();
                    if me == 1 {
                        // SAFETY: this thread alone uses partition 2.
                        unsafe { table.enter(&mut b, &mut mine, looked_up, 7, |_| 7) }.unwrap();
                    }
                    for round in 0..rounds {
                        while turn.load(Ordering::Acquire) != 2 * round + me {
                            pglocks_sync::hint::spin_wait();
                        }
                        if me == 0 {
                            // SAFETY: this thread alone uses partition 1.
                            unsafe {
                                table.enter(&mut b, &mut mine, inserted, 5, |_| 5).unwrap();
                                assert_eq!(
                                    table.remove(&mut b, &mut mine, inserted, &5).unwrap(),
                                    Some(5)
                                );
                            }
                        } else {
                            assert!(table.lookup(&mine, looked_up, &7).is_some());
                        }
                        turn.fetch_add(1, Ordering::Release);
                    }
                }
            }) as Box<dyn FnOnce() + '_>,
        })
        .collect();
    pglocks_sim::run(&profile, team, Duration::from_secs(10)).unwrap()
}

#[test]
#[cfg_attr(
    not(pglocks_sim),
    ignore = "needs the simulator's build (--cfg pglocks_sim)"
)]
fn the_one_free_list_of_9_5_shares_its_line_with_the_masks_every_search_reads() {
    // The hot-lines tally adds transfers up by structure (the variable is read when a
    // simulation starts; this file's only test sets it).
    std::env::set_var(pglocks_sim::hot::VARIABLE, "1");
    let rounds = 40;
    let of = |out: &Outcome, name: &str| {
        out.by_structure
            .iter()
            .find(|s| s.name == name)
            .map_or(0, |s| s.transfers)
    };
    let one = taking_turns(1, rounds);
    let split = taking_turns(NUM_FREELISTS, rounds);
    // Up to 9.5 the reader's every lookup fetches the line the inserter's spinlock, count and
    // head were just written on: about two transfers a round.
    let (one_hdr, split_hdr) = (of(&one, NAMES.header), of(&split, NAMES.header));
    assert!(
        one_hdr >= 2 * rounds as u64,
        "{one_hdr} header transfers in {rounds} rounds: {:?}",
        one.by_structure
    );
    // From 9.6 the masks lie on a line no list shares: the reader keeps its copy (the few
    // transfers are the first touches of the header's lines, whatever the rounds).
    assert!(
        split_hdr <= 10,
        "{split_hdr} header transfers with 32 lists: {:?}",
        split.by_structure
    );
    // Either way the element the inserter takes is the one it gave back (last in, first
    // out), and nobody else touches it: its line stays; the reader's bucket and entry are
    // only read.
    for out in [&one, &split] {
        assert!(of(out, NAMES.elements) <= 4, "{:?}", out.by_structure);
        assert!(of(out, NAMES.buckets) <= 4, "{:?}", out.by_structure);
    }
}
