//! The buffer mapping table on a simulated many-core machine: its `HASHHDR` is placed in the
//! shared-memory map, so up to 9.5 the one free list's line, which every insert and delete
//! writes, is also the line of the masks every lookup reads, and moves between every pair of
//! CPUs that read pages in.

use pglocks_bufmgr::buf_table::NUM_FREELISTS;
use pglocks_bufmgr::{BufMgr, BufMgrConfig, BufferTag, PrivateRefCount};
use pglocks_lwlock::{AtomicLwLock, NoPadding, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, SimThread};

#[test]
#[cfg_attr(not(pglocks_sim), ignore = "the simulator's build runs it")]
fn up_to_9_5_every_page_read_in_fetches_the_one_free_list_line() {
    let pages = 40;
    let (one, split) = (
        header_transfers(1, pages),
        header_transfers(NUM_FREELISTS, pages),
    );
    // Each miss looks its tag up (the masks read), inserts it and deletes its victim's (the
    // list's spinlock, count and head written): with one list the line goes back and forth.
    assert!(
        one >= 2 * pages,
        "{one} header transfers for {pages} pages each"
    );
    // With 32 the masks' line stays put, and the lists the misses pick spread over 12 lines.
    assert!(split < one, "{split} with 32 lists, {one} with one");
}

/// Transfers of "Shared Buffer Lookup Table header"'s lines in [`reading`].
fn header_transfers(freelists: usize, pages: u64) -> u64 {
    reading(freelists, pages).transfers_of("Shared Buffer Lookup Table header")
}

/// Two backends on two packages of the simulated Westmere each read `pages` pages of their own
/// into a pool of 8 buffers whose mapping table has `freelists` free lists (every read a miss:
/// a lookup, then an insert of the new tag and a delete of the victim's).
fn reading(freelists: usize, pages: u64) -> Outcome {
    type Pool = BufMgr<AtomicLwLock<Pg96Layout>, NoPadding>;
    let pool = Pool::with_hash_freelists(&BufMgrConfig::new(8), freelists).unwrap();
    let procs = ProcTable::new(2);
    let reader = |relation: u32| {
        let (pool, procs) = (&pool, &procs);
        move || {
            let mut b = procs.attach().unwrap();
            let mut refs = PrivateRefCount::new();
            for n in 0..pages as u32 {
                let tag = BufferTag::main(5, relation, n);
                let buf = pool.read_buffer(&mut b, &mut refs, tag).unwrap();
                pool.release_buffer(&mut b, &mut refs, buf).unwrap();
            }
        }
    };
    let team = vec![
        SimThread::on(0, reader(16_384)),
        SimThread::on(10, reader(16_385)),
    ];
    pglocks_sim::run_tallied("westmere-80", team)
}

#[test]
#[cfg_attr(not(pglocks_sim), ignore = "the simulator's build runs it")]
fn descriptors_and_the_strategy_control_are_placed_under_postgresqls_names() {
    let out = reading(NUM_FREELISTS, 40);
    // Each miss runs the clock sweep (the hand in the strategy control) over descriptors the
    // other backend pinned and released (their state words and content locks).
    for name in ["Buffer Descriptors", "Buffer Strategy Status"] {
        assert!(out.transfers_of(name) > 0, "{name}: {:?}", out.by_structure);
    }
    // Nothing of the pool is charged by its host address (a line outside the map is named by
    // the code that first missed on it).
    assert!(
        !out.outside_the_map()
            .iter()
            .any(|s| ["crates/bufmgr/", "crates/lwlock/", "crates/spin/"]
                .iter()
                .any(|c| s.name.contains(c))),
        "{:?}",
        out.by_structure
    );
}
