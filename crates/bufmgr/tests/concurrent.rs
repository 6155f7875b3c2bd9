//! Several threads missing all the time on a pool of four buffers: while a backend holds a
//! pin, its buffer keeps the page it asked for (a pinned buffer is never evicted); when they
//! are done, no two buffers hold the same tag and the table maps exactly the valid buffers.
//! Both victim searches, both pin methods, and both ways of waiting for another backend's read
//! (the I/O LWLock of ≤ 13, the condition variable of 14+, with reads that take a while so
//! that backends meet in `WaitIO`).
#![cfg(not(loom))]

use pglocks_bufmgr::{
    BufMgr, BufMgrConfig, BufMgrError, BufferTag, IoWait, PinMethod, PrivateRefCount, VictimSearch,
};
use pglocks_lwlock::{AtomicLwLock, NoPadding, Pg96Layout};
use pglocks_proc::ProcTable;
use std::sync::Arc;
use std::time::Duration;

type Pool = BufMgr<AtomicLwLock<Pg96Layout>, NoPadding>;

const THREADS: usize = 4;
const OPS: u32 = 3000;

fn hammer(victim_search: VictimSearch, pin: PinMethod, io_wait: IoWait) {
    let cfg = BufMgrConfig {
        partitions: 2,
        victim_search,
        pin,
        io_wait,
        read_latency: match io_wait {
            IoWait::Lwlock => Duration::ZERO,
            IoWait::ConditionVariable => Duration::from_micros(20),
        },
        ..BufMgrConfig::new(4)
    };
    let pool = Arc::new(Pool::new(&cfg).unwrap());
    let procs = ProcTable::new(THREADS + 1);
    let threads: Vec<_> = (0..THREADS as u32)
        .map(|t| {
            let (pool, procs) = (Arc::clone(&pool), procs.clone());
            std::thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                let mut refs = PrivateRefCount::new();
                let mut all_pinned = 0;
                for i in 0..OPS {
                    let page = (i * 7 + t * 3) % 11;
                    let tag = BufferTag::main(5, 16384, page);
                    let buffer = match pool.read_buffer(&mut b, &mut refs, tag) {
                        Ok(buf) => buf,
                        // Every buffer pinned at once by the four of us: PostgreSQL's error.
                        Err(BufMgrError::NoUnpinnedBuffers) => {
                            all_pinned += 1;
                            continue;
                        }
                        Err(e) => panic!("{e}"),
                    };
                    for _ in 0..3 {
                        assert_eq!(pool.buffer_tag(&mut b, buffer).unwrap(), tag);
                        std::thread::yield_now();
                    }
                    pool.release_buffer(&mut b, &mut refs, buffer).unwrap();
                }
                assert!(refs.pinned().is_empty());
                all_pinned
            })
        })
        .collect();
    let all_pinned: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(
        all_pinned < OPS * THREADS as u32 / 2,
        "{all_pinned} failed reads"
    );
    let mut b = procs.attach().unwrap();
    let entries = pool.table_entries(&mut b).unwrap();
    let mut tags: Vec<_> = entries.iter().map(|e| e.0).collect();
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(
        tags.len(),
        entries.len(),
        "a tag in two buffers: {entries:?}"
    );
    for i in 0..pool.nbuffers() as u32 {
        let info = pool.buffer_info(&mut b, i).unwrap();
        assert_eq!(info.refcount, 0, "buffer {i} left pinned");
        let mapped = entries.iter().find(|e| e.1 == i).map(|e| e.0);
        assert_eq!(info.tag, mapped, "buffer {i} and the table disagree");
        assert_eq!(info.valid, info.tag.is_some(), "buffer {i}");
    }
}

#[test]
fn misses_under_contention_keep_tags_unique_and_pins_honoured() {
    use IoWait::*;
    hammer(VictimSearch::AtomicClockHand, PinMethod::Cas, Lwlock);
    hammer(VictimSearch::FreelistLock, PinMethod::HeaderLock, Lwlock);
    hammer(VictimSearch::AtomicClockHand, PinMethod::HeaderLock, Lwlock);
    hammer(
        VictimSearch::AtomicClockHand,
        PinMethod::Cas,
        ConditionVariable,
    );
}

/// `InvalidateBuffer` waits out another backend's pin instead of failing, and fails on its own.
#[test]
fn dropping_a_page_waits_for_another_backends_pin() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pool = Arc::new(Pool::new(&BufMgrConfig::new(4)).unwrap());
    let procs = ProcTable::new(2);
    let tag = BufferTag::main(5, 16384, 7);
    let mut holder = procs.attach().unwrap();
    let mut holder_refs = PrivateRefCount::new();
    let buffer = pool
        .read_buffer(&mut holder, &mut holder_refs, tag)
        .unwrap();
    // The holder's own drop fails: it has the page pinned.
    assert!(matches!(
        pool.drop_buffer(&mut holder, &holder_refs, tag),
        Err(BufMgrError::BufferPinned)
    ));
    let released = Arc::new(AtomicBool::new(false));
    let dropper = {
        let (pool, procs, released) = (Arc::clone(&pool), procs.clone(), Arc::clone(&released));
        std::thread::spawn(move || {
            let mut b = procs.attach().unwrap();
            let dropped = pool
                .drop_buffer(&mut b, &PrivateRefCount::new(), tag)
                .unwrap();
            (dropped, released.load(Ordering::SeqCst))
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    released.store(true, Ordering::SeqCst);
    pool.release_buffer(&mut holder, &mut holder_refs, buffer)
        .unwrap();
    let (dropped, after_release) = dropper.join().unwrap();
    assert!(dropped, "the page was there");
    assert!(
        after_release,
        "the drop returned while the page was still pinned"
    );
}
