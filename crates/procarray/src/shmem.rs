//! Where the ProcArray's shared structures lie, as PostgreSQL's shared memory lays them out, so
//! that a simulated CPU is charged for the lines PostgreSQL's code would touch.
//!
//! Three shapes:
//! - [`ShmemArray`] (`pglocks_sync`'s): an array whose Rust form has PostgreSQL's element size
//!   (`PGPROC`'s model, the 12-byte `PGXACT`, 14's `xids`, `subxidStates` and `statusFlags`),
//!   its elements back to back in one boxed slice. `InitProcGlobal` gets each from `ShmemAlloc`, which starts it on a
//!   128-byte boundary (`CACHELINEALIGN`, `PG_CACHE_LINE_SIZE`) and puts the elements one after
//!   the other without padding; the array is *placed* in the simulated shared-memory map
//!   ([`Placed`](pglocks_sync::shmem::Placed)) as such a region, so every access to its host memory (the shim's atomics,
//!   `pglocks_sync::data` words) is charged at its place there, and its elements share lines
//!   as PostgreSQL's do whatever the host's allocator did. (On the host the array is aligned
//!   as its elements are: the 128-byte start only matters to the simulator's charges, which
//!   the placement decides.)
//! - [`ShmemBox`]: one structure of its own allocation (`ShmemInitStruct`, or one of
//!   `MainLWLockArray`'s padded LWLocks), boxed so that it does not move, placed the same way.
//! - [`ProcArrayStruct`]: `numProcs` and the array of backends in it, whose Rust form (a word
//!   and a boxed slice) does not have PostgreSQL's layout, where `numProcs` heads the struct and
//!   the array follows it on the same line. Its values are std's atomics, ordered by
//!   ProcArrayLock and never charged themselves; each access is charged instead on a region of
//!   the simulated shared-memory map at PostgreSQL's offsets (so nothing is counted twice).

use crate::SnapshotLayout;
pub(crate) use pglocks_sync::shmem::ShmemArray;
use pglocks_sync::shmem::{PlacedBox, Region};
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// One value in an allocation of its own, placed in the simulated map ([`PlacedBox`]).
pub(crate) type ShmemBox<T> = PlacedBox<T>;

/// Models `ProcArrayStruct` (procarray.c): `numProcs` and the backends in the array, in order.
///
/// PostgreSQL's struct opens with `numProcs`, `maxProcs` and the hot-standby bookkeeping
/// (`KnownAssignedXids`' counters and spinlock, `lastOverflowedXid`, from 9.4 the replication
/// slots' xmins), and the array follows in the same allocation:
/// - ≤ 9.1, `PGPROC *procs[]`: 8-byte pointers from byte 32 (six `int`s, the `slock_t`, then
///   `lastOverflowedXid` at 28);
/// - 9.2 on, `int pgprocnos[]`: 4-byte proc numbers, from byte 40 in 9.4–15 (the two slot
///   xmins after `lastOverflowedXid`; 9.2–9.3 start it at 32, and 16 on, which drop the
///   spinlock and later the other standby fields, earlier than 40: the model takes 40 for all).
///
/// So in every release `numProcs` shares its cache line with the first entries of the array.
/// The values are std's atomics (ProcArrayLock orders them); each read and write is charged on
/// a region of the simulated shared-memory map holding the struct at those offsets
/// (`ShmemInitStruct` starts it on a 128-byte boundary).
pub(crate) struct ProcArrayStruct {
    /// `numProcs`.
    num_procs: AtomicU32,
    /// `pgprocnos` (≤ 9.1: `procs`, pointers to the same `PGPROC`s).
    pgprocnos: Box<[AtomicU32]>,
    region: Region,
    /// Where the array starts in the struct, and bytes per entry.
    first_entry: usize,
    entry_bytes: usize,
}

/// `numProcs`' bytes.
const NUM_PROCS: Range<usize> = 0..4;

impl ProcArrayStruct {
    /// An empty array of room for `max_backends` in `layout`'s struct (`CreateSharedProcArray`).
    pub(crate) fn new(layout: SnapshotLayout, max_backends: usize, invalid: u32) -> Self {
        let (first_entry, entry_bytes) = Self::entry_layout(layout);
        Self {
            num_procs: AtomicU32::new(0),
            pgprocnos: (0..max_backends).map(|_| AtomicU32::new(invalid)).collect(),
            region: Region::new(
                "ProcArrayStruct",
                first_entry + entry_bytes * max_backends,
                1,
            ),
            first_entry,
            entry_bytes,
        }
    }

    /// The first entry's offset and the bytes per entry in `layout`'s struct.
    pub(crate) fn entry_layout(layout: SnapshotLayout) -> (usize, usize) {
        match layout {
            SnapshotLayout::ProcScan => (32, 8),
            SnapshotLayout::Pgxact | SnapshotLayout::Dense => (40, 4),
        }
    }

    /// The bytes of entry `index` in the struct.
    #[inline]
    fn entry(&self, index: usize) -> Range<usize> {
        let at = self.first_entry + index * self.entry_bytes;
        at..at + self.entry_bytes
    }

    /// Entries there is room for (`maxProcs`).
    pub(crate) fn max_procs(&self) -> usize {
        self.pgprocnos.len()
    }

    /// Reads `numProcs`.
    #[inline]
    pub(crate) fn num_procs(&self) -> usize {
        self.region.read(0, NUM_PROCS);
        self.num_procs.load(Relaxed) as usize
    }

    /// Writes `numProcs`.
    pub(crate) fn set_num_procs(&self, n: usize) {
        self.region.write(0, NUM_PROCS);
        self.num_procs.store(n as u32, Relaxed);
    }

    /// Reads entry `index`: a proc number.
    #[inline]
    pub(crate) fn pgprocno(&self, index: usize) -> u32 {
        self.region.read(0, self.entry(index));
        self.pgprocnos[index].load(Relaxed)
    }

    /// Writes entry `index`.
    pub(crate) fn set_pgprocno(&self, index: usize, procno: u32) {
        self.region.write(0, self.entry(index));
        self.pgprocnos[index].store(procno, Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn num_procs_shares_its_line_with_the_first_entries_in_every_layout() {
        // On the 64-byte line numProcs opens: four pointers, or six proc numbers.
        for (layout, first, size, on_first_line) in [
            (SnapshotLayout::ProcScan, 32, 8, 4),
            (SnapshotLayout::Pgxact, 40, 4, 6),
            (SnapshotLayout::Dense, 40, 4, 6),
        ] {
            assert_eq!(ProcArrayStruct::entry_layout(layout), (first, size));
            let s = ProcArrayStruct::new(layout, 8, u32::MAX);
            assert_eq!(s.entry(2), first + 2 * size..first + 3 * size);
            assert!(s.entry(on_first_line - 1).end <= 64, "{layout:?}");
            assert!(s.entry(on_first_line).end > 64, "{layout:?}");
        }
    }
}
