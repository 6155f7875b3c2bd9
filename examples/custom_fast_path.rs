//! Prototyping a fast-path variant and measuring it beside PostgreSQL's.
//!
//! A backend's fast path holds its weak relation locks (`AccessShareLock` and the like) in slots
//! of its own, so that a query touching a few relations never takes a shared `LockManager`
//! partition lock. 9.2–17 have 16 slots; a query over a partitioned table with many partitions
//! overflows them, and every further lock goes to the main table. PostgreSQL 18 answers with
//! groups of 16 slots (as many as `max_locks_per_transaction` asks for, 4 by default), a
//! relation's group chosen by `relid × 49157`.
//!
//! A variant is an implementation of [`FastPathGrouping`]: the number of groups and the group of a
//! relation. Everything else — `fpInfoLock`, strong-lock counters, transfers — stays
//! PostgreSQL's. The toy below gives every backend 16 groups and picks a relation's group by its
//! oid's low bits, so that consecutive oids (a partitioned table's partitions) spread perfectly.
//!
//! The workload is `lmgr-relation` with 40 relations per transaction: 9.2–17's 16 slots
//! overflow and 24 locks per transaction go through the LockManager partitions (the waits
//! table shows them), while 18's 64 slots and the toy's 256 hold them all. On a 2-core VM the
//! toy came out about 8% *slower* than 18 (2.7 µs vs 2.5 µs per transaction; 0.25 M, 0.40 M and
//! 0.37 M transactions/s for 17, 18 and the toy on one thread): once everything fits, more
//! groups only add memory per backend. That is the kind of answer a prototype is for.
//!
//! Run with `cargo run --release --example custom_fast_path` (a few seconds).

use pglocks_harness::sweep::quick_table;
use pglocks_lmgr::{FastPathGrouping, FastPathLayout};
use pglocks_workloads::{series_with, Preset};

/// **A toy**: 16 groups, relation `rel` in group `rel mod 16`.
#[derive(Debug)]
struct LowBitsGrouping;

impl FastPathGrouping for LowBitsGrouping {
    fn groups(&self) -> usize {
        16
    }

    fn group_of(&self, rel: u32, groups: usize) -> usize {
        rel as usize % groups
    }
}

static LOW_BITS: LowBitsGrouping = LowBitsGrouping;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut series = Vec::new();
    for (label, preset, layout) in [
        ("pg17", "pg17", None),
        ("pg18", "pg18", None),
        (
            "pg18+low-bits",
            "pg18",
            Some(FastPathLayout::Custom(&LOW_BITS)),
        ),
    ] {
        let preset = Preset::by_name(preset)?;
        let mut settings = preset.settings();
        settings.relations = 40;
        if let Some(layout) = layout {
            settings.fast_path = layout;
        }
        let mut s = series_with("lmgr-relation", preset, "pg", settings)?;
        s.preset = label.to_string();
        series.push(s);
    }
    print!("{}", quick_table("lmgr-relation", series)?);
    Ok(())
}
