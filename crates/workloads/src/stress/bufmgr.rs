//! The `bufmgr` part: the buffer manager under evictions — `ReadBuffer` and `BufferAlloc`
//! (bufmgr.c) looking pages up in the partitioned buffer table (buf_table.c) and, on a miss,
//! taking a victim from the clock sweep (freelist.c's `StrategyGetBuffer`); `ReleaseBuffer`.
//!
//! Every step reads one of 1024 pages into a pool of 128 buffers (most reads evict) and looks
//! at the pinned buffer's header. Checked at every step: the pinned buffer holds the page
//! asked for, valid and pinned; at the end: no buffer has a pin left.

use super::{check, Failure, NewPart, Part, Refused, Setup, Step, Tally, DATABASE};
use pglocks_bufmgr::{BufMgr, BufferTag, PrivateRefCount};
use pglocks_lwlock::{Pad128, Padding, RawLwLock};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::RawSpinLock;
use rand::rngs::SmallRng;
use rand::RngExt;
use std::sync::Arc;

/// Pages read, against [`NBUFFERS`] buffers: most reads evict.
const PAGES: u32 = 1024;
/// The pool's buffers.
const NBUFFERS: usize = 128;

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        let mut cfg = setup.settings.bufmgr_config(setup.numa_nodes);
        cfg.nbuffers = NBUFFERS;
        Ok(Arc::new(Buffers::<K> {
            procs: setup.procs(),
            bm: BufMgr::new(&cfg)?,
        }))
    }
}

/// A small buffer pool.
struct Buffers<K: RawLwLock> {
    procs: ProcTable,
    bm: BufMgr<K, Pad128>,
}

impl<K: RawLwLock> Part for Buffers<K> {
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, _: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut pins = PrivateRefCount::new();
        Box::new(move |b, t| {
            let tag = BufferTag::main(DATABASE, 30_000, rng.random_range(0..PAGES));
            let buffer = self.bm.read_buffer(b, &mut pins, tag)?;
            let info = self.bm.buffer_info(b, buffer.id())?;
            self.bm.release_buffer(b, &mut pins, buffer)?;
            t.ops += 1;
            check(
                t,
                info.tag == Some(tag) && info.valid && info.refcount > 0,
                || {
                    format!(
                        "pinned buffer {} holds {:?} (valid {}, pins {}), not {tag:?}",
                        buffer.id(),
                        info.tag,
                        info.valid,
                        info.refcount
                    )
                },
            )
        })
    }
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        no_pins_left(&self.bm, b, t)
    }
}

/// The end state of a buffer pool: no buffer pinned.
pub(super) fn no_pins_left<K: RawLwLock, P: Padding>(
    bm: &BufMgr<K, P>,
    b: &mut Backend,
    t: &mut Tally,
) -> Result<(), Failure> {
    for id in 0..bm.nbuffers() as u32 {
        let pins = bm.buffer_info(b, id)?.refcount;
        check(t, pins == 0, || {
            format!("buffer {id} still has {pins} pins")
        })?;
    }
    Ok(())
}
