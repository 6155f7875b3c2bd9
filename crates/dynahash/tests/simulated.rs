//! A shared table on a simulated many-core machine: its header, buckets and elements are
//! charged where PostgreSQL's lie, so the free lists' lines move between the CPUs that insert
//! and remove, and up to 9.5 the one list's line is also the line of the masks every search
//! reads.

use pglocks_dynahash::{HashSpec, RegionNames, SharedHash, NUM_FREELISTS};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, SimThread};
use pglocks_sync::atomic::{AtomicUsize, Ordering};

const NAMES: RegionNames = RegionNames {
    header: "simulated hash header",
    directory: "simulated hash directory",
    buckets: "simulated hash buckets",
    elements: "simulated hash elements",
};

#[test]
#[cfg_attr(not(pglocks_sim), ignore = "the simulator's build runs it")]
fn the_one_free_list_of_9_5_shares_its_line_with_the_masks_every_search_reads() {
    let searches = 40;
    let of = |out: &Outcome, name: &str| {
        let s = out.by_structure.iter().find(|s| s.name == name);
        s.map_or(0, |s| s.transfers)
    };
    let (one, split) = (in_turn(1, searches), in_turn(NUM_FREELISTS, searches));
    // Up to 9.5 each of the reader's lookups fetches the line the inserter's spinlock, count
    // and head were just written on (and the inserter then fetches it back).
    let one_hdr = of(&one, NAMES.header);
    assert!(
        one_hdr >= searches as u64,
        "{one_hdr} header transfers for {searches} lookups: {:?}",
        one.by_structure
    );
    // From 9.6 the masks lie on a line no list shares: the reader keeps its copy (the few
    // transfers are the first touches of the header's lines, however many the lookups).
    let split_hdr = of(&split, NAMES.header);
    assert!(
        split_hdr <= 10,
        "{split_hdr} header transfers with 32 lists: {:?}",
        split.by_structure
    );
    // Either way the element the inserter takes is the one it gave back (last in, first
    // out), which nobody else touches, and the reader's bucket and entry are only read.
    for out in [&one, &split] {
        assert!(of(out, NAMES.elements) <= 4, "{:?}", out.by_structure);
        assert!(of(out, NAMES.buckets) <= 4, "{:?}", out.by_structure);
    }
}

/// A run on two packages of the simulated Westmere, on a table of 16 partitions and
/// `freelists` free lists: an inserter enters and removes a key of partition 1 (its hash code
/// picks free list 1 when there are 32), and a reader looks a key of partition 2 up, in turn,
/// `searches` times each. Each alone uses its partition, so no partition lock is needed.
fn in_turn(freelists: usize, searches: usize) -> Outcome {
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
    let mut reader_chains = table.chains();
    {
        let mut b = procs.attach().unwrap();
        // SAFETY: nothing else runs yet.
        unsafe { table.enter(&mut b, &mut reader_chains, looked_up, 7, |_| 7) }.unwrap();
    }
    // Whose turn it is: the inserter's even ones, the reader's odd ones.
    let turn = AtomicUsize::new(0);
    let (table, procs, turn) = (&table, &procs, &turn);
    let my_turn = move |t: usize| {
        while turn.load(Ordering::Acquire) != t {
            pglocks_sync::hint::spin_wait();
        }
    };
    let inserter = move || {
        let mut b = procs.attach().unwrap();
        let mut chains = table.chains();
        for i in 0..searches {
            my_turn(2 * i);
            // SAFETY: this thread alone uses partition 1.
            unsafe {
                table
                    .enter(&mut b, &mut chains, inserted, 5, |_| 5)
                    .unwrap();
                table.remove(&mut b, &mut chains, inserted, &5).unwrap();
            }
            turn.fetch_add(1, Ordering::Release);
        }
    };
    let reader = move || {
        for i in 0..searches {
            my_turn(2 * i + 1);
            assert!(table.lookup(&reader_chains, looked_up, &7).is_some());
            turn.fetch_add(1, Ordering::Release);
        }
    };
    let team = vec![SimThread::on(0, inserter), SimThread::on(10, reader)];
    pglocks_sim::run_tallied("westmere-80", team)
}
