//! loom models of the buffer manager:
//! - the clock sweep (atomic hand, header lock) against a concurrent `PinBuffer` of the only
//!   buffer: a buffer pinned concurrently is never taken as a victim, so the pinning backend
//!   always finds its page there while it holds the pin (the compare-exchange on the state word
//!   waits out `BM_LOCKED`, and `BufferAlloc` re-checks the refcount before retagging);
//! - two backends missing on the same page: `BufTableInsert` under the exclusive partition
//!   lock lets only one buffer take the tag, and both backends end up with that buffer (with
//!   either victim search), the one that did not read it having waited for the read on the
//!   buffer's I/O LWLock (≤ 13) or condition variable (14+): loom reports a deadlock if the
//!   reader's wake-up can be missed;
//! - the search split per NUMA node (a prototype), a range of one buffer per node: a backend
//!   whose range has its only buffer pinned goes on to the next range, where a backend of that
//!   node is taking a victim at the same time; neither takes a buffer the other has pinned,
//!   and the table maps each page left to the one buffer holding it.
//!
//! The mapping table's free lists, shared by partitions, have their loom models in the dynahash
//! crate (`loom_dynahash`).
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p pglocks-bufmgr --test loom_bufmgr --release`
#![cfg(loom)]

use loom::sync::Arc;
use pglocks_bufmgr::{
    BufMgr, BufMgrConfig, BufMgrError, BufferTag, IoWait, PinMethod, PrivateRefCount,
    SweepPartitions, VictimSearch,
};
use pglocks_lwlock::{AtomicLwLock, NoPadding, Pg96Layout};
use pglocks_proc::ProcTable;

type Pool = BufMgr<AtomicLwLock<Pg96Layout>, NoPadding>;

/// A pool of 9.6+ (atomic hand, pins by compare-exchange) or, with `locked`, of 9.4
/// (`BufFreelistLock`, pins under the header lock).
fn pool(nbuffers: usize, partitions: usize, locked: bool) -> Arc<Pool> {
    Arc::new(Pool::new(&config(nbuffers, partitions, locked)).unwrap())
}

/// A pool of 14+: [`pool`]'s 9.6+ shape, waiting for I/O on condition variables.
fn pool14(nbuffers: usize, partitions: usize) -> Arc<Pool> {
    let cfg = BufMgrConfig {
        io_wait: IoWait::ConditionVariable,
        ..config(nbuffers, partitions, false)
    };
    Arc::new(Pool::new(&cfg).unwrap())
}

/// The configuration of [`pool`].
fn config(nbuffers: usize, partitions: usize, locked: bool) -> BufMgrConfig {
    BufMgrConfig {
        partitions,
        victim_search: if locked {
            VictimSearch::FreelistLock
        } else {
            VictimSearch::AtomicClockHand
        },
        pin: if locked {
            PinMethod::HeaderLock
        } else {
            PinMethod::Cas
        },
        ..BufMgrConfig::new(nbuffers)
    }
}

#[test]
fn a_buffer_pinned_during_the_sweep_is_never_the_victim() {
    let a = BufferTag::main(5, 16384, 1);
    let c = BufferTag::main(5, 16384, 2);
    pglocks_sync::loom_builder(2).check(move || {
        // One buffer, holding page A, unpinned.
        let pool = pool(1, 1, false);
        let procs = ProcTable::new(3);
        {
            let mut b = procs.attach().unwrap();
            let mut refs = PrivateRefCount::new();
            let buf = pool.read_buffer(&mut b, &mut refs, a).unwrap();
            pool.release_buffer(&mut b, &mut refs, buf).unwrap();
        }
        // A backend missing on page C sweeps for a victim.
        let (p1, procs1) = (Arc::clone(&pool), procs.clone());
        let sweeper = loom::thread::spawn(move || {
            let mut b = procs1.attach().unwrap();
            let mut refs = PrivateRefCount::new();
            match p1.read_buffer(&mut b, &mut refs, c) {
                Ok(buf) => p1.release_buffer(&mut b, &mut refs, buf).unwrap(),
                Err(BufMgrError::NoUnpinnedBuffers) => {}
                Err(e) => panic!("{e}"),
            }
        });
        // Meanwhile another pins page A, if it is still there, and checks it stays.
        let mut b = procs.attach().unwrap();
        let mut refs = PrivateRefCount::new();
        match pool.read_buffer(&mut b, &mut refs, a) {
            Ok(buf) => {
                assert_eq!(
                    pool.buffer_tag(&mut b, buf).unwrap(),
                    a,
                    "evicted while pinned"
                );
                pool.release_buffer(&mut b, &mut refs, buf).unwrap();
            }
            Err(BufMgrError::NoUnpinnedBuffers) => {}
            Err(e) => panic!("{e}"),
        }
        sweeper.join().unwrap();
        let info = pool.buffer_info(&mut b, 0).unwrap();
        assert_eq!(info.refcount, 0);
        assert!(info.tag == Some(a) || info.tag == Some(c));
    });
}

#[test]
fn two_misses_on_one_page_share_one_buffer() {
    two_misses(|| pool(2, 1, false));
}

#[test]
fn two_misses_on_one_page_share_one_buffer_under_buf_freelist_lock() {
    two_misses(|| pool(2, 1, true));
}

#[test]
fn two_misses_on_one_page_share_one_buffer_waiting_on_its_condition_variable() {
    two_misses(|| pool14(2, 1));
}

fn two_misses(pool: fn() -> Arc<Pool>) {
    let x = BufferTag::main(5, 16384, 9);
    pglocks_sync::loom_builder(2).check(move || {
        let pool = pool();
        let procs = ProcTable::new(3);
        let (p1, procs1) = (Arc::clone(&pool), procs.clone());
        let other = loom::thread::spawn(move || {
            let mut b = procs1.attach().unwrap();
            let mut refs = PrivateRefCount::new();
            let buf = p1.read_buffer(&mut b, &mut refs, x).unwrap();
            assert_eq!(p1.buffer_tag(&mut b, buf).unwrap(), x);
            p1.release_buffer(&mut b, &mut refs, buf).unwrap();
            buf
        });
        let mut b = procs.attach().unwrap();
        let mut refs = PrivateRefCount::new();
        let mine = pool.read_buffer(&mut b, &mut refs, x).unwrap();
        let info = pool.buffer_info(&mut b, mine.id()).unwrap();
        assert!(info.valid && info.tag == Some(x), "{info:?}");
        pool.release_buffer(&mut b, &mut refs, mine).unwrap();
        let theirs = other.join().unwrap();
        assert_eq!(
            mine, theirs,
            "both backends use the one buffer with the page"
        );
        let holders = (0..2)
            .filter(|&i| pool.buffer_info(&mut b, i).unwrap().tag == Some(x))
            .count();
        assert_eq!(holders, 1, "the page in two buffers");
        assert_eq!(pool.table_entries(&mut b).unwrap(), vec![(x, mine.id())]);
    });
}

#[test]
fn a_full_range_sends_the_search_to_the_next_one_safely() {
    let (a, c, d) = (
        BufferTag::main(5, 16384, 1),
        BufferTag::main(5, 16384, 2),
        BufferTag::main(5, 16384, 3),
    );
    pglocks_sync::loom_builder(2).check(move || {
        // Four nodes, a range of one buffer each.
        let cfg = BufMgrConfig {
            sweep: SweepPartitions::PerNode {
                nodes: 4,
                padded: false,
            },
            ..config(4, 1, false)
        };
        let pool = Arc::new(Pool::new(&cfg).unwrap());
        let procs = ProcTable::new(3);
        // Node 0's backend holds page A pinned in its range's only buffer.
        let mut b = procs.attach().unwrap();
        b.set_numa_node(0, 4);
        let mut refs = PrivateRefCount::new();
        let held = pool.read_buffer(&mut b, &mut refs, a).unwrap();
        assert_eq!(held.id(), 0);
        // Node 1's backend reads page C into its range.
        let (p1, procs1) = (Arc::clone(&pool), procs.clone());
        let other = loom::thread::spawn(move || {
            let mut b = procs1.attach().unwrap();
            b.set_numa_node(1, 4);
            let mut refs = PrivateRefCount::new();
            let buf = p1.read_buffer(&mut b, &mut refs, c).unwrap();
            assert_eq!(p1.buffer_tag(&mut b, buf).unwrap(), c);
            p1.release_buffer(&mut b, &mut refs, buf).unwrap();
            buf
        });
        // Meanwhile node 0's backend misses on page D: its range is full, so the next.
        let mine = pool.read_buffer(&mut b, &mut refs, d).unwrap();
        assert_ne!(mine, held, "a pinned buffer taken");
        assert_eq!(pool.buffer_tag(&mut b, mine).unwrap(), d);
        assert_eq!(
            pool.buffer_tag(&mut b, held).unwrap(),
            a,
            "evicted while pinned"
        );
        pool.release_buffer(&mut b, &mut refs, mine).unwrap();
        pool.release_buffer(&mut b, &mut refs, held).unwrap();
        // Pages C and D each stay in the buffer read into, unless one backend's search came by
        // the other's buffer after it was unpinned and evicted the page.
        let theirs = other.join().unwrap();
        let entries = pool.table_entries(&mut b).unwrap();
        let (with_c, with_d) = ((c, theirs.id()), (d, mine.id()));
        if mine == theirs {
            assert!(
                entries == vec![(a, held.id()), with_c] || entries == vec![(a, held.id()), with_d],
                "{entries:?}"
            );
        } else {
            let mut want = vec![(a, held.id()), with_c, with_d];
            want.sort_unstable_by_key(|e| e.1);
            assert_eq!(entries, want);
        }
    });
}
