//! Where the ProcArray's shared structures lie, as PostgreSQL's shared memory lays them out, so
//! that a simulated CPU is charged for the lines PostgreSQL's code would touch.
//!
//! Two shapes:
//! - [`ShmemArray`]: an array whose Rust form has PostgreSQL's element size (`PGPROC`'s model,
//!   the 12-byte `PGXACT`, 14's `xids`, `subxidStates` and `statusFlags`). `InitProcGlobal`
//!   gets each from `ShmemAlloc`, which starts it on a 128-byte boundary (`CACHELINEALIGN`,
//!   `PG_CACHE_LINE_SIZE`) and puts the elements one after the other; the array here is laid
//!   out the same way in the host's memory, so its elements share lines as PostgreSQL's do and
//!   no other host data shares its lines. Touches of it are charged at their host addresses
//!   (the shim's atomics, `pglocks_sync::data` words).
//! - [`ProcArrayStruct`]: `numProcs` and the array of backends in it, whose Rust form (a word
//!   and a boxed slice) does not have PostgreSQL's layout, where `numProcs` heads the struct and
//!   the array follows it on the same line. Its values are std's atomics, ordered by
//!   ProcArrayLock, and each access is charged on a region of the simulated shared-memory map
//!   at PostgreSQL's offsets.

use crate::SnapshotLayout;
use pglocks_sync::shmem::Region;
use std::ops::{Index, Range};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// `PG_CACHE_LINE_SIZE`: the boundary `ShmemAlloc` starts every allocation on.
const SHMEM_ALIGN: usize = 128;

/// `N` elements filling whole 128-byte blocks.
#[repr(C, align(128))]
struct Block<T, const N: usize>([T; N]);

/// `len` elements of `T` laid out as `ShmemAlloc` lays out an array: the first on a 128-byte
/// boundary, each next one `size_of::<T>()` bytes further. `N` elements fill a whole number of
/// 128-byte blocks, so that the blocks follow each other without a gap.
pub(crate) struct ShmemArray<T, const N: usize> {
    blocks: Box<[Block<T, N>]>,
    len: usize,
}

impl<T, const N: usize> ShmemArray<T, N> {
    /// `len` elements made by `f`.
    pub(crate) fn new(len: usize, mut f: impl FnMut() -> T) -> Self {
        // Under loom the shim's atomics are loom's, of other sizes: the layout is moot there.
        #[cfg(not(loom))]
        assert_eq!(
            N * std::mem::size_of::<T>() % SHMEM_ALIGN,
            0,
            "{N} elements of {} bytes do not fill whole 128-byte blocks",
            std::mem::size_of::<T>()
        );
        let blocks = (0..len.div_ceil(N))
            .map(|_| Block(std::array::from_fn(|_| f())))
            .collect();
        Self { blocks, len }
    }

    /// Elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first `n` elements.
    pub(crate) fn iter_to(&self, n: usize) -> impl Iterator<Item = &T> + '_ {
        assert!(n <= self.len, "{n} elements of {}", self.len);
        self.blocks.iter().flat_map(|b| b.0.iter()).take(n)
    }
}

impl<T, const N: usize> Index<usize> for ShmemArray<T, N> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "index {i} of {} elements", self.len);
        &self.blocks[i / N].0[i % N]
    }
}

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
    fn arrays_start_on_a_128_byte_boundary_and_run_on_without_gaps() {
        let a: ShmemArray<[u8; 12], 32> = ShmemArray::new(70, || [0; 12]);
        let base = &a[0] as *const _ as usize;
        assert_eq!(base % 128, 0);
        for i in 0..70 {
            assert_eq!(&a[i] as *const _ as usize, base + 12 * i, "element {i}");
        }
        assert_eq!(a.iter_to(70).count(), 70);
    }

    #[test]
    #[should_panic(expected = "do not fill whole 128-byte blocks")]
    fn a_block_with_a_gap_is_refused() {
        let _: ShmemArray<[u8; 12], 8> = ShmemArray::new(1, || [0; 12]);
    }

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
