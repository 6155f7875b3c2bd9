//! `ConditionalLockBufferForCleanup`: the exclusive content lock only for the one backend
//! pinning a buffer, and only through a single pin of its own; a failed attempt leaves the
//! content lock free.
#![cfg(not(loom))]

use pglocks_bufmgr::{BufMgr, BufMgrConfig, BufferTag, PrivateRefCount};
use pglocks_lwlock::{AtomicLwLock, LwLockMode, NoPadding, Pg96Layout};
use pglocks_proc::ProcTable;

type Pool = BufMgr<AtomicLwLock<Pg96Layout>, NoPadding>;

#[test]
fn a_cleanup_lock_needs_the_only_pin() {
    let pool = Pool::new(&BufMgrConfig::new(4)).unwrap();
    let procs = ProcTable::new(2);
    let (mut a, mut b) = (procs.attach().unwrap(), procs.attach().unwrap());
    let (mut a_refs, mut b_refs) = (PrivateRefCount::new(), PrivateRefCount::new());
    let tag = BufferTag::main(5, 16384, 0);

    let buffer = pool.read_buffer(&mut a, &mut a_refs, tag).unwrap();
    assert!(pool
        .conditional_lock_buffer_for_cleanup(&mut a, &a_refs, buffer)
        .unwrap());
    pool.unlock_buffer(&mut a, buffer).unwrap();

    // Another backend's pin.
    let theirs = pool.read_buffer(&mut b, &mut b_refs, tag).unwrap();
    assert_eq!(theirs, buffer);
    assert!(!pool
        .conditional_lock_buffer_for_cleanup(&mut a, &a_refs, buffer)
        .unwrap());
    // The failed attempt gave the content lock back.
    pool.lock_buffer(&mut b, buffer, LwLockMode::Exclusive)
        .unwrap();
    pool.unlock_buffer(&mut b, buffer).unwrap();
    pool.release_buffer(&mut b, &mut b_refs, buffer).unwrap();
    assert!(pool
        .conditional_lock_buffer_for_cleanup(&mut a, &a_refs, buffer)
        .unwrap());
    pool.unlock_buffer(&mut a, buffer).unwrap();

    // A second pin of its own.
    let again = pool.read_buffer(&mut a, &mut a_refs, tag).unwrap();
    assert!(!pool
        .conditional_lock_buffer_for_cleanup(&mut a, &a_refs, buffer)
        .unwrap());
    pool.release_buffer(&mut a, &mut a_refs, again).unwrap();

    pool.release_buffer(&mut a, &mut a_refs, buffer).unwrap();
}
