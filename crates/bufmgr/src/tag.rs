//! Models `BufferTag` (buf_internals.h) and `BufTableHashCode` (buf_table.c): the identity of
//! a disk page, and the hash code that both places it in the shared table and picks its
//! `BufferMapping` partition.
//!
//! Differences from PostgreSQL: the hash is a 64-bit multiply-xorshift mix of the five fields
//! rather than `hash_bytes` over the struct's bytes; only its spread over partitions, buckets
//! and free lists matters here. The table uses the hash code it is handed for all three, as
//! dynahash does (`hash_search_with_hash_value`).

use pglocks_sync::cpu::{self, Kernel};
use std::hash::{Hash, Hasher};

/// `ForkNumber` (relpath.h): which file of a relation a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ForkNumber {
    /// `MAIN_FORKNUM`: the relation's data.
    Main = 0,
    /// `FSM_FORKNUM`: the free space map.
    FreeSpaceMap = 1,
    /// `VISIBILITYMAP_FORKNUM`: the visibility map.
    VisibilityMap = 2,
    /// `INIT_FORKNUM`: an unlogged relation's initial contents.
    Init = 3,
}

/// `sizeof(BufferTag)` from 8.4 (buf_internals.h): `RelFileNode` (three `Oid`s), `ForkNumber`
/// and `BlockNumber` up to 15, 16's `spcOid`, `dbOid`, `relNumber`, `forkNum`, `blockNum`: 20
/// bytes either way (8.1–8.3 had no fork number: 16). The key of the mapping table's entries,
/// and the first field of a buffer descriptor.
pub const BUFFER_TAG_SIZE: usize = 20;

/// Models `BufferTag`: which page of which relation fork a buffer holds.
///
/// Up to 15 the relation was a `RelFileNode` (`spcNode`, `dbNode`, `relNode`); 16 flattened it
/// into `spcOid`, `dbOid` and `relNumber`. The fields are the same either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BufferTag {
    /// Tablespace (`spcOid`).
    pub spc_oid: u32,
    /// Database (`dbOid`).
    pub db_oid: u32,
    /// Relation file number (`relNumber`).
    pub rel_number: u32,
    /// Fork (`forkNum`).
    pub fork: ForkNumber,
    /// Block number within the fork (`blockNum`).
    pub block: u32,
}

impl BufferTag {
    /// The main-fork page `block` of relation `rel_number` in the default tablespace (1663,
    /// `DEFAULTTABLESPACE_OID`) of database `db_oid`.
    pub const fn main(db_oid: u32, rel_number: u32, block: u32) -> Self {
        Self {
            spc_oid: 1663,
            db_oid,
            rel_number,
            fork: ForkNumber::Main,
            block,
        }
    }

    /// The 64-bit mix behind [`Self::hash_code`]: three words of the hash kernel
    /// ([`Kernel::Hash`]), as PostgreSQL's `hash_bytes` over the 20-byte tag is about three.
    #[inline]
    fn mix(&self) -> u64 {
        const K: u64 = 0xff51_afd7_ed55_8ccd;
        cpu::ran(Kernel::Hash, 3);
        let mut h = u64::from(self.spc_oid) << 32 | u64::from(self.db_oid);
        h = (h ^ (h >> 29)).wrapping_mul(K) ^ (u64::from(self.rel_number) << 8 | self.fork as u64);
        h = (h ^ (h >> 31)).wrapping_mul(K) ^ u64::from(self.block);
        h = (h ^ (h >> 33)).wrapping_mul(K);
        h ^ (h >> 29)
    }

    /// Models `BufTableHashCode`: the tag's 32-bit hash code. The partition is `hash_code %
    /// NUM_BUFFER_PARTITIONS` (`BufTableHashPartition`).
    #[inline]
    pub fn hash_code(&self) -> u32 {
        (self.mix() >> 32) as u32
    }
}

impl Hash for BufferTag {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.mix());
    }
}

/// A fixed hasher (the private pin counts' maps use it): takes a tag's mix as it is, and mixes
/// anything else byte by byte.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_blocks_spread_over_partitions() {
        for n in [16usize, 128] {
            let mut hits = vec![0u32; n];
            for block in 0..(n as u32 * 64) {
                hits[BufferTag::main(5, 16384, block).hash_code() as usize % n] += 1;
            }
            let (lo, hi) = (hits.iter().min().unwrap(), hits.iter().max().unwrap());
            assert!(*lo >= 32 && *hi <= 110, "{n} partitions: {lo}..{hi}");
        }
        let a = BufferTag::main(5, 16384, 7);
        let b = BufferTag {
            fork: ForkNumber::FreeSpaceMap,
            ..a
        };
        assert_ne!(a.hash_code(), b.hash_code());
    }

    #[test]
    fn a_tag_has_postgresql_size() {
        assert_eq!(std::mem::size_of::<BufferTag>(), BUFFER_TAG_SIZE);
    }
}
