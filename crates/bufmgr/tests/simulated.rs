//! The buffer mapping table on a simulated many-core machine: its `HASHHDR` is placed in the
//! shared-memory map, so up to 9.5 the one free list's line, which every insert and delete
//! writes, is also the line of the masks every lookup reads, and moves between the CPUs that
//! look pages up and the CPUs that replace them.

use pglocks_bufmgr::{BufMgr, BufMgrConfig, BufferTag, PrivateRefCount};
use pglocks_lwlock::{AtomicLwLock, NoPadding, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_sim::{Outcome, Placement, Profile, SimThread};
use pglocks_sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

type Pool = BufMgr<AtomicLwLock<Pg96Layout>, NoPadding>;

/// Two backends on two packages of the simulated Westmere take turns (`rounds` each) on a pool
/// of 4 buffers whose mapping table has `freelists` free lists: one keeps page 0 pinned and
/// pins it again each turn (a lookup that finds it), the other reads a page not in the pool
/// each turn (a lookup that misses, then an insert of the new tag and a delete of its victim's).
fn taking_turns(freelists: usize, rounds: usize) -> Outcome {
    let profile = Profile::find("westmere-80").unwrap();
    let pool = Pool::with_hash_freelists(&BufMgrConfig::new(4), freelists).unwrap();
    let procs = ProcTable::new(2);
    let page = |n: u32| BufferTag::main(5, 16_384, n);
    let turn = AtomicUsize::new(0);
    let team = (0..2)
        .map(|me| SimThread {
            placement: Placement::Cpu(me * 10),
            body: Box::new({
                let (pool, procs, turn) = (&pool, &procs, &turn);
                move || {
                    let mut b = procs.attach().unwrap();
                    let mut refs = PrivateRefCount::new();
                    let kept = (me == 0).then(|| pool.read_buffer(&mut b, &mut refs, page(0)));
                    for round in 0..rounds {
                        while turn.load(Ordering::Acquire) != 2 * round + me {
                            pglocks_sync::hint::spin_wait();
                        }
                        let tag = if me == 0 {
                            page(0)
                        } else {
                            page(1 + round as u32)
                        };
                        let buf = pool.read_buffer(&mut b, &mut refs, tag).unwrap();
                        pool.release_buffer(&mut b, &mut refs, buf).unwrap();
                        turn.fetch_add(1, Ordering::Release);
                    }
                    if let Some(kept) = kept {
                        pool.release_buffer(&mut b, &mut refs, kept.unwrap())
                            .unwrap();
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
fn up_to_9_5_lookups_fetch_the_free_list_line_the_replacer_writes() {
    // The hot-lines tally adds transfers up by structure (the variable is read when a
    // simulation starts; this file's only test sets it).
    std::env::set_var(pglocks_sim::hot::VARIABLE, "1");
    let rounds = 40;
    let header = |out: &Outcome| {
        out.by_structure
            .iter()
            .find(|s| s.name == "Shared Buffer Lookup Table header")
            .map_or(0, |s| s.transfers)
    };
    let one = taking_turns(1, rounds);
    let split = taking_turns(pglocks_bufmgr::buf_table::NUM_FREELISTS, rounds);
    assert!(
        header(&one) >= rounds as u64,
        "{} header transfers in {rounds} rounds with one list: {:?}",
        header(&one),
        one.by_structure
    );
    assert!(
        header(&split) * 4 <= header(&one),
        "{} header transfers with 32 lists, {} with one: {:?}",
        header(&split),
        header(&one),
        split.by_structure
    );
}
