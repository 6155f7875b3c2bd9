//! loom models of a partitioned table's free lists (`get_hash_entry`, `HASH_REMOVE`):
//! - two backends inserting into different partitions whose hash codes pick the same free
//!   list: each partition lock orders only its own partition, and the list's spinlock orders
//!   the two insertions' use of the list, so each gets an element of its own;
//! - a backend whose list is empty borrows from another list while a backend of another
//!   partition gives an element back to that list and takes one again: the table never hands
//!   out one element twice, and both always find one.
//!
//! Each thread alone uses its partition's chains, as it would under the partition's lock.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-dynahash --test loom_dynahash --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_dynahash::{HashSpec, RegionNames, SharedHash};
use pglocks_proc::ProcTable;

const NAMES: RegionNames = RegionNames {
    header: "loom hash header",
    directory: "loom hash directory",
    buckets: "loom hash buckets",
    elements: "loom hash elements",
};

#[test]
fn two_partitions_sharing_a_free_list_take_an_element_each() {
    // 8 partitions over 4 lists, so that two partitions share a list.
    pglocks_sync::loom_builder(2).check(|| {
        let t = Arc::new(SharedHash::<u32, ()>::new(&HashSpec {
            partitions: 8,
            ..spec(8)
        }));
        let procs = ProcTable::new(2);
        let (t2, p2) = (Arc::clone(&t), procs.clone());
        // Hash codes 1 and 5: partitions 1 and 5 (of 8), both free list 1 (of 4).
        let other = loom::thread::spawn(move || {
            let mut b = p2.attach().unwrap();
            let mut chains = t2.chains();
            // SAFETY: this thread alone uses partition 5.
            unsafe { t2.enter(&mut b, &mut chains, 5, 5, |_| ()) }.unwrap();
            chains.elements().collect::<Vec<_>>()[0]
        });
        let mut b = procs.attach().unwrap();
        let mut chains = t.chains();
        // SAFETY: this thread alone uses partition 1.
        unsafe { t.enter(&mut b, &mut chains, 1, 1, |_| ()) }.unwrap();
        let mine = chains.elements().next().unwrap();
        let theirs = other.join().unwrap();
        assert_ne!(mine, theirs, "one element handed out twice");
        assert_eq!(t.in_use(), 2);
        assert_eq!(t.list_entries(1), 2);
        assert_eq!(t.free_elements(), 6);
    });
}

#[test]
fn a_borrower_and_a_giver_never_share_an_element() {
    pglocks_sync::loom_builder(2).check(|| {
        // Two elements, both on list 0 (fewer elements than lists).
        let t = Arc::new(SharedHash::<u32, ()>::new(&spec(2)));
        let procs = ProcTable::new(2);
        // Partition 0 holds one entry (hash 0: list 0).
        let mut b = procs.attach().unwrap();
        let mut zero = t.chains();
        // SAFETY: this thread alone uses partition 0.
        unsafe { t.enter(&mut b, &mut zero, 0, 0, |_| ()) }.unwrap();
        let (t2, p2) = (Arc::clone(&t), procs.clone());
        // Hash 1 (partition 1, list 1, which is empty): borrows from list 0.
        let borrower = loom::thread::spawn(move || {
            let mut b = p2.attach().unwrap();
            let mut one = t2.chains();
            // SAFETY: this thread alone uses partition 1.
            unsafe { t2.enter(&mut b, &mut one, 1, 1, |_| ()) }.unwrap();
            one.elements().collect::<Vec<_>>()[0]
        });
        // Meanwhile partition 0's entry goes and comes back.
        // SAFETY: this thread alone uses partition 0.
        unsafe {
            assert_eq!(t.remove(&mut b, &mut zero, 0, &0).unwrap(), Some(()));
            t.enter(&mut b, &mut zero, 4, 4, |_| ()).unwrap();
        }
        let mine = zero.elements().next().unwrap();
        let theirs = borrower.join().unwrap();
        assert_ne!(mine, theirs, "one element handed out twice");
        assert_eq!((t.in_use(), t.free_elements()), (2, 0));
    });
}

/// A table of `nelem` elements in 4 partitions over 4 free lists (4 keep the model small; the
/// protocol is the same for 32).
fn spec(nelem: usize) -> HashSpec {
    HashSpec {
        names: NAMES,
        init_size: nelem,
        max_size: nelem,
        entry_size: 8,
        key_size: 4,
        partitions: 4,
        freelists: 4,
        tas_spin: true,
    }
}
