//! The simulation's public face for the shim: each function is one operation of the virtual
//! thread that calls it, and may only be called from one (check [`active`](super::active)
//! first).
//!
//! Each entry point does three things in order: it waits at a sync point until the calling
//! thread's clock is the earliest (`sync_point`, the ordering core), it lets the engine charge
//! and apply the operation (the cost model for an access, the OS model for a wait, a wake, a
//! sleep or a yield), and it suspends the thread if the engine has taken it off its CPU or parked
//! it. For an access, the host does the operation itself (the load, the store, the
//! compare-and-swap) after the entry point returns, so it happens in virtual-time order.
//! Operations that touch no shared memory (private work, a pause, a fence, the clock, a seed)
//! need no sync point, though a spin-wait pause may park the thread.
//!
//! Every entry point is `#[cold]` and out of line: the shim's inlined fast path is only the
//! [`active`](super::active) check.

use super::order::sync_point;
use super::{suspend, with, Engine, Forwarded, Stored};
use crate::cache::Access;
use crate::picos::Picos;
use crate::profile::Kernel;
use std::time::{Duration, Instant};

/// A load, store or read-modify-write of the byte at `addr`. A read-modify-write first waits
/// for the thread's store buffer to drain (a locked instruction does).
#[cold]
#[inline(never)]
pub fn access(addr: usize, kind: Access) {
    with(Engine::before_access);
    sync_point();
    if kind != Access::Load {
        drain_stores();
    }
    charge(addr, kind);
}

/// The access itself, after its sync point.
fn charge(addr: usize, kind: Access) {
    if let Some(miss) = with(|e| e.access(addr, kind)) {
        // The other threads first run up to the moment the holder answers.
        sync_point();
        with(|e| e.take_effect(miss, kind));
    }
}

/// Waits until every store in the thread's store buffer is visible.
pub(super) fn drain_stores() {
    while with(Engine::drain_stores) {
        sync_point();
    }
}

/// An atomic load of the `size` bytes at `addr`: the value of the thread's own store still in
/// its store buffer, if there is one (store-to-load forwarding), else `None`, and the caller
/// reads memory (after the access has been charged and ordered).
#[cold]
#[inline(never)]
pub fn load(addr: usize, size: usize) -> Option<u64> {
    with(Engine::before_access);
    sync_point();
    match with(|e| e.forward(addr, size as u8)) {
        Forwarded::Value(v) => {
            with(Engine::forwarded);
            return Some(v);
        }
        Forwarded::Drain => drain_stores(),
        Forwarded::Nothing => {}
    }
    charge(addr, Access::Load);
    None
}

/// An atomic store of `bits` (`size` bytes) to `addr`: `true` if it went into the thread's
/// store buffer (the engine writes it when it becomes visible, and the caller must not), else
/// `false`, and the caller writes it now (it has been charged and ordered).
#[cold]
#[inline(never)]
pub fn store(addr: usize, bits: u64, size: usize) -> bool {
    with(Engine::before_access);
    loop {
        sync_point();
        match with(|e| e.store(addr, bits, size as u8)) {
            Stored::Buffered => return true,
            Stored::Visible => return false,
            Stored::Unbuffered => {
                charge(addr, Access::Store);
                return false;
            }
            Stored::Wait => {}
        }
    }
}

/// `len` bytes at `addr` of the simulated shared-memory map ([`crate::shmem`]) read (`Load`) or
/// written (`Store`) by code that holds the lock guarding them: each line charged at the
/// thread's own clock, with no ordering point (see `super::touch`).
#[cold]
#[inline(never)]
pub fn touch(addr: usize, len: usize, kind: Access) {
    with(|e| e.touch(addr, len, kind));
}

/// Opens (`true`) or closes (`false`) a scope whose loads do not depend on each other: their
/// misses overlap, up to the profile's `outstanding_misses` at once (see `super::touch`).
#[cold]
#[inline(never)]
pub fn independent(begin: bool) {
    with(|e| e.independent(begin));
}

/// The run's measured phase starts now: the hot-lines tally, if asked for, starts again from
/// zero (each line keeps the site that first missed on it).
#[cold]
#[inline(never)]
pub fn measurement_starts() {
    with(|e| {
        if let Some(hot) = e.hot.as_mut() {
            hot.restart();
        }
    });
}

/// A full fence.
#[cold]
#[inline(never)]
pub fn fence() {
    drain_stores();
    with(|e| {
        e.drain();
        e.charge_private(e.costs.fence);
        e.me().spin.forget();
    });
}

/// A `pause` in a retry loop that counts its rounds (never elided).
#[cold]
#[inline(never)]
pub fn pause() {
    with(|e| {
        e.drain();
        e.pause(false)
    });
}

/// A `pause` in a loop whose exit depends only on the memory it re-reads: the engine may
/// skip the rounds in which that memory does not change.
#[cold]
#[inline(never)]
pub fn spin_wait() {
    if let Some(y) = with(|e| {
        e.drain();
        e.pause(true)
    }) {
        suspend(y);
    }
}

/// A seed for a random-number generator, different at every call and the same in every run
/// of the same simulation.
#[cold]
#[inline(never)]
pub fn fresh_seed() -> u64 {
    with(|e| {
        e.seeds += 1;
        // splitmix64's finaliser over the call count.
        let mut z = e.seeds.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// `steps` steps of private CPU work.
#[cold]
#[inline(never)]
pub fn work(steps: u64) {
    // Femtoseconds to picoseconds.
    with(|e| e.charge_private(Picos(steps.saturating_mul(e.costs.busy_step_fs) / 1000)));
}

/// `units` of private kernel `kernel` (words hashed, bytes checksummed, entries
/// compared), at the profile's cost per unit.
#[cold]
#[inline(never)]
pub fn kernel(kernel: Kernel, units: u64) {
    with(|e| {
        let fs = e.costs.kernel_fs[kernel as usize];
        e.charge_private(Picos(units.saturating_mul(fs) / 1000));
    });
}

/// The calling thread's virtual clock as a host `Instant` (the simulation's start plus the
/// virtual time).
#[cold]
#[inline(never)]
pub fn now() -> Instant {
    with(|e| e.epoch + e.threads[e.current].clock.to_duration())
}

/// The calling thread's virtual clock: the virtual time since the simulation started.
#[cold]
#[inline(never)]
pub fn clock() -> Duration {
    with(|e| e.threads[e.current].clock.to_duration())
}

/// The NUMA node of the profile's CPU the calling thread runs on (what `getcpu` reports on a
/// real machine).
#[cold]
#[inline(never)]
pub fn numa_node() -> usize {
    with(|e| e.cpus[e.threads[e.current].cpu].node)
}

/// The profile's NUMA nodes.
#[cold]
#[inline(never)]
pub fn numa_nodes() -> usize {
    with(|e| e.numa_nodes)
}

/// Sleeps for `d` of virtual time (plus the profile's timer slack), off the CPU.
#[cold]
#[inline(never)]
pub fn sleep(d: Duration) {
    with(Engine::drain);
    drain_stores();
    sync_point();
    let y = with(|e| e.sleep(Picos::from_duration(d)));
    suspend(y);
}

/// `sched_yield`: gives the CPU to the next thread waiting for it, if any.
#[cold]
#[inline(never)]
pub fn yield_now() {
    with(Engine::drain);
    drain_stores();
    sync_point();
    if let Some(y) = with(Engine::yield_cpu) {
        suspend(y);
    }
}

/// A futex wait on `addr`: if `still()` holds, sleeps until a wake on `addr` or until
/// `deadline`. Returns `false` if it timed out.
#[cold]
#[inline(never)]
pub fn futex_wait(addr: usize, still: impl FnOnce() -> bool, deadline: Option<Instant>) -> bool {
    with(Engine::drain);
    drain_stores();
    sync_point();
    with(Engine::futex_enter);
    // The check of the word is an access like any other: in virtual-time order.
    sync_point();
    if !still() {
        return true;
    }
    let y = with(|e| e.futex_block(addr, deadline));
    suspend(y);
    with(Engine::was_woken)
}

/// A futex wake of up to `n` waiters on `addr`; returns how many it woke.
#[cold]
#[inline(never)]
pub fn futex_wake(addr: usize, n: usize) -> usize {
    with(Engine::drain);
    drain_stores();
    sync_point();
    with(|e| e.futex_wake(addr, n))
}
