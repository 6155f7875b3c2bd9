//! The `buffer-lookup` workload on PostgreSQL's buffer manager ([`pglocks_bufmgr::BufMgr`]):
//! each operation reads one page (`ReadBuffer`: hash the tag, look it up under the shared
//! `BufferMapping` partition lock, pin) and releases it (`ReleaseBuffer`).
//!
//! With probability `hit_ratio` the page is one of a hot set of `nbuffers / 2` pages, which
//! fits in the buffers and, once read in, stays (its usage count stays high); otherwise it is a
//! random page of a cold relation of 2^32 pages, which is almost never there: a miss, so
//! `BufferAlloc` runs the victim search (clock sweep under `BufFreelistLock` up to 9.4, the
//! atomic hand from 9.5) and remaps the victim under two exclusive partition locks, and the
//! page is "read" for `read_latency`. The hot set is read in before the run (when `hit_ratio` is
//! above 0), so the default `hit_ratio=1` is a pure lookup and pin.
//!
//! Metrics: `bufmgr.hits` / `bufmgr.reads` (and so `bufmgr.hit_ratio`), `bufmgr.evictions`,
//! `bufmgr.victim_retries`, and `bufmgr.sweep_ticks` — the clock hand's steps per allocation.

use crate::preset::Settings;
use crate::RunResult;
use crate::{proc_table, workload_error};
use pglocks_bufmgr::{BufMgr, BufferTag, PrivateRefCount};
use pglocks_harness::{run_team, HarnessError, TeamRun, TeamSpec};
use pglocks_lwlock::{NoPadding, Pad128, Pad32, Pad64, Padding, RawLwLock};
use pglocks_proc::Backend;
use rand::RngExt;
use std::sync::Arc;

/// The database of every page read.
const DB: u32 = 5;
/// The relation of the hot pages.
const HOT_REL: u32 = 16384;
/// The relation of the cold pages.
const COLD_REL: u32 = 16385;

/// The page an operation reads: a hot one with probability `hit_ratio`, else a cold one.
#[inline]
pub(crate) fn page(b: &mut Backend, settings: &Settings) -> BufferTag {
    if settings.hit_ratio >= 1.0 || b.rng.random::<f64>() < settings.hit_ratio {
        let hot_pages = (settings.nbuffers / 2).max(1) as u32;
        BufferTag::main(DB, HOT_REL, b.rng.random_range(0..hot_pages))
    } else {
        BufferTag::main(DB, COLD_REL, b.rng.random())
    }
}

fn run<K: RawLwLock, P: Padding>(
    settings: &Settings,
    spec: &TeamSpec,
) -> Result<TeamRun, HarnessError> {
    let nodes = crate::numa_nodes(spec.sim.as_deref());
    let cfg = settings.bufmgr_config(nodes);
    // A victim search split per node has this many ranges on each (1 unless split).
    let per_node = cfg.sweep.per_node();
    let procs = proc_table(settings, spec.threads.max(per_node));
    let pool: Arc<BufMgr<K, P>> = Arc::new(BufMgr::new(&cfg).map_err(workload_error)?);
    if settings.hit_ratio > 0.0 {
        // Read the hot set in before the run, as a benchmark measures a warm pool: otherwise a
        // short run (a simulated one) at many threads spends itself on the first reads. The
        // reads go round the nodes, and round the backends of consecutive proc numbers, as
        // backends all over the machine would make them: a search split per node takes each
        // page into the next range's free buffers, so that every range holds its share.
        let mut loaders = (0..per_node)
            .map(|_| procs.attach())
            .collect::<Result<Vec<_>, _>>()
            .map_err(workload_error)?;
        let mut refs = PrivateRefCount::new();
        for p in 0..(settings.nbuffers / 2).max(1) {
            let b = &mut loaders[p / nodes % per_node];
            b.set_numa_node(p % nodes, nodes);
            let buffer = pool
                .read_buffer(b, &mut refs, BufferTag::main(DB, HOT_REL, p as u32))
                .map_err(workload_error)?;
            pool.release_buffer(b, &mut refs, buffer)
                .map_err(workload_error)?;
        }
    }
    run_team(spec, &procs, |_| {
        let (pool, settings) = (Arc::clone(&pool), settings.clone());
        let mut refs = PrivateRefCount::new();
        move |b: &mut Backend| {
            let tag = page(b, &settings);
            let buffer = pool.read_buffer(b, &mut refs, tag)?;
            pool.release_buffer(b, &mut refs, buffer)
        }
    })
}

/// The `buffer-lookup` workload on PostgreSQL's buffer manager.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BufferLookup;

impl crate::PgWorkload for BufferLookup {
    fn run<K: RawLwLock, R: pglocks_spin::RawSpinLock>(
        self,
        settings: &Settings,
        spec: &TeamSpec,
    ) -> RunResult {
        // The partition locks are spaced as MainLWLockArray's are.
        match settings.lwlock_padding {
            0 => run::<K, NoPadding>(settings, spec),
            32 => run::<K, Pad32>(settings, spec),
            64 => run::<K, Pad64>(settings, spec),
            _ => run::<K, Pad128>(settings, spec),
        }
    }
}
