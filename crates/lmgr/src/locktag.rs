//! Models lock.h's `LOCKTAG`: what a heavyweight lock is a lock *on*. Four integer fields whose
//! meaning depends on the tag type (a relation is database + relation oid; a transaction is its
//! xid; a virtual transaction is the backend's proc number + local transaction id; an advisory
//! lock is database + two keys + a kind), the type, and the lock method (default or user).
//!
//! The tag's hash code picks the lock-manager partition (`LockTagHashCode`, then
//! `LockHashPartition` = hash % `NUM_LOCK_PARTITIONS`); the fast path uses the relation oid
//! directly.
//!
//! Differences from PostgreSQL: the hash is a 64-bit multiplicative mix of the fields rather
//! than `hash_bytes` over the struct (only its spread matters here).

use pglocks_sync::cpu::{self, Kernel};

/// lock.h's `LockTagType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockTagType {
    /// `LOCKTAG_RELATION`: a whole relation (field1 = database oid, field2 = relation oid).
    Relation,
    /// `LOCKTAG_RELATION_EXTEND`: the right to extend a relation.
    RelationExtend,
    /// `LOCKTAG_DATABASE_FROZEN_IDS` (13+): updating a database's `datfrozenxid`.
    DatabaseFrozenIds,
    /// `LOCKTAG_PAGE`: one page of a relation (field3 = block number).
    Page,
    /// `LOCKTAG_TUPLE`: one tuple (field3 = block, field4 = offset).
    Tuple,
    /// `LOCKTAG_TRANSACTION`: a transaction id (field1 = xid).
    Transaction,
    /// `LOCKTAG_VIRTUALTRANSACTION`: a virtual transaction id (field1 = proc number, field2 =
    /// local transaction id).
    VirtualTransaction,
    /// `LOCKTAG_SPECULATIVE_TOKEN` (9.5+): a speculative insertion.
    SpeculativeToken,
    /// `LOCKTAG_OBJECT`: a non-relation database object (class, object id, sub-id).
    Object,
    /// `LOCKTAG_USERLOCK`: reserved for old contrib/userlock.
    UserLock,
    /// `LOCKTAG_ADVISORY`: `pg_advisory_lock` (field1 = database, field2/3 = keys, field4 = kind).
    Advisory,
    /// `LOCKTAG_APPLY_TRANSACTION` (16+): a transaction being applied by logical replication.
    ApplyTransaction,
}

impl LockTagType {
    /// The wait event a backend waiting on a lock of this type reports (`LockTagTypeNames`
    /// in lockfuncs.c: `pg_stat_activity.wait_event` under `wait_event_type` `Lock`).
    pub fn wait_event(self) -> &'static str {
        match self {
            LockTagType::Relation => "relation",
            LockTagType::RelationExtend => "extend",
            LockTagType::DatabaseFrozenIds => "frozenid",
            LockTagType::Page => "page",
            LockTagType::Tuple => "tuple",
            LockTagType::Transaction => "transactionid",
            LockTagType::VirtualTransaction => "virtualxid",
            LockTagType::SpeculativeToken => "spectoken",
            LockTagType::Object => "object",
            LockTagType::UserLock => "userlock",
            LockTagType::Advisory => "advisory",
            LockTagType::ApplyTransaction => "applytransaction",
        }
    }
}

/// lock.h's lock method ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockMethodId {
    /// `DEFAULT_LOCKMETHOD`: table and transaction locks, released at transaction end.
    Default = 1,
    /// `USER_LOCKMETHOD`: advisory locks, which may be held across transactions.
    User = 2,
}

/// lock.h's `LOCKTAG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockTag {
    /// `locktag_field1`.
    pub field1: u32,
    /// `locktag_field2`.
    pub field2: u32,
    /// `locktag_field3`.
    pub field3: u32,
    /// `locktag_field4`.
    pub field4: u16,
    /// `locktag_type`.
    pub kind: LockTagType,
    /// `locktag_lockmethodid`.
    pub method: LockMethodId,
}

impl LockTag {
    const fn new(kind: LockTagType, method: LockMethodId, f: (u32, u32, u32, u16)) -> Self {
        Self {
            field1: f.0,
            field2: f.1,
            field3: f.2,
            field4: f.3,
            kind,
            method,
        }
    }

    /// `SET_LOCKTAG_RELATION`.
    pub const fn relation(db: u32, rel: u32) -> Self {
        Self::new(
            LockTagType::Relation,
            LockMethodId::Default,
            (db, rel, 0, 0),
        )
    }

    /// `SET_LOCKTAG_RELATION_EXTEND`.
    pub const fn relation_extend(db: u32, rel: u32) -> Self {
        Self::new(
            LockTagType::RelationExtend,
            LockMethodId::Default,
            (db, rel, 0, 0),
        )
    }

    /// `SET_LOCKTAG_PAGE`.
    pub const fn page(db: u32, rel: u32, block: u32) -> Self {
        Self::new(
            LockTagType::Page,
            LockMethodId::Default,
            (db, rel, block, 0),
        )
    }

    /// `SET_LOCKTAG_TUPLE`.
    pub const fn tuple(db: u32, rel: u32, block: u32, offset: u16) -> Self {
        Self::new(
            LockTagType::Tuple,
            LockMethodId::Default,
            (db, rel, block, offset),
        )
    }

    /// `SET_LOCKTAG_TRANSACTION`.
    pub const fn transaction(xid: u32) -> Self {
        Self::new(
            LockTagType::Transaction,
            LockMethodId::Default,
            (xid, 0, 0, 0),
        )
    }

    /// `SET_LOCKTAG_VIRTUALTRANSACTION`: backend `procno`'s local transaction `lxid`.
    pub const fn virtual_transaction(procno: u32, lxid: u32) -> Self {
        Self::new(
            LockTagType::VirtualTransaction,
            LockMethodId::Default,
            (procno, lxid, 0, 0),
        )
    }

    /// `SET_LOCKTAG_OBJECT`.
    pub const fn object(db: u32, class: u32, objid: u32, objsubid: u16) -> Self {
        Self::new(
            LockTagType::Object,
            LockMethodId::Default,
            (db, class, objid, objsubid),
        )
    }

    /// `SET_LOCKTAG_APPLY_TRANSACTION` (16+): object `objid` (applyparallelworker.c's
    /// `PARALLEL_APPLY_LOCK_STREAM` 0 or `PARALLEL_APPLY_LOCK_XACT` 1) of remote transaction
    /// `xid` being applied for subscription `suboid` in database `db`.
    pub const fn apply_transaction(db: u32, suboid: u32, xid: u32, objid: u16) -> Self {
        Self::new(
            LockTagType::ApplyTransaction,
            LockMethodId::Default,
            (db, suboid, xid, objid),
        )
    }

    /// `SET_LOCKTAG_ADVISORY`: `kind` 1 for a 64-bit key split in two, 2 for two 32-bit keys.
    pub const fn advisory(db: u32, key1: u32, key2: u32, kind: u16) -> Self {
        Self::new(
            LockTagType::Advisory,
            LockMethodId::User,
            (db, key1, key2, kind),
        )
    }

    /// `LockTagHashCode`: the tag's hash code, which picks its partition. Its four words are
    /// mixed as the hash kernel's form mixes them ([`pglocks_sync::cpu::mix_words`]) and
    /// charged as four words of it (PostgreSQL's `hash_bytes` over the 16-byte `LOCKTAG` does
    /// about as much). Called where PostgreSQL computes it: `LockAcquireExtended` and
    /// `VirtualXactLock`.
    #[inline]
    pub fn hash_code(&self) -> u32 {
        cpu::ran(Kernel::Hash, 4);
        self.known_hash_code()
    }

    /// The same hash code where PostgreSQL already has it (`locallock->hashcode`, or the
    /// `hashcode` argument passed down from `LockAcquireExtended`): the model recomputes it
    /// rather than carry it, and charges nothing for that.
    #[inline]
    pub fn known_hash_code(&self) -> u32 {
        let words = [
            u64::from(self.field1),
            u64::from(self.field2),
            u64::from(self.field3),
            u64::from(self.field4) | (self.kind as u64) << 16 | (self.method as u64) << 24,
        ];
        cpu::mix_words(0x9e37_79b9_7f4a_7c15, &words) as u32
    }

    /// Describes the locked object as PostgreSQL's `DescribeLockTag` does in error details
    /// (`relation 16384 of database 5`, `transaction 731`, `virtual transaction 3/12`, …).
    pub fn describe(&self) -> String {
        let (f1, f2, f3, f4) = (self.field1, self.field2, self.field3, self.field4);
        match self.kind {
            LockTagType::Relation => format!("relation {f2} of database {f1}"),
            LockTagType::RelationExtend => {
                format!("extension of relation {f2} of database {f1}")
            }
            LockTagType::DatabaseFrozenIds => {
                format!("pg_database.datfrozenxid of database {f1}")
            }
            LockTagType::Page => format!("page {f3} of relation {f2} of database {f1}"),
            LockTagType::Tuple => {
                format!("tuple ({f3},{f4}) of relation {f2} of database {f1}")
            }
            LockTagType::Transaction => format!("transaction {f1}"),
            LockTagType::VirtualTransaction => format!("virtual transaction {f1}/{f2}"),
            LockTagType::SpeculativeToken => {
                format!("speculative token {f2} of transaction {f1}")
            }
            LockTagType::Object => {
                format!("object {f3} of class {f2} of database {f1}")
            }
            LockTagType::UserLock => format!("user lock [{f1},{f2},{f3}]"),
            LockTagType::Advisory => format!("advisory lock [{f1},{f2},{f3},{f4}]"),
            LockTagType::ApplyTransaction => {
                format!("remote transaction {f3} of subscription {f2} of database {f1}")
            }
        }
    }
}

/// The hasher of the lock manager's hash tables (`LOCALLOCK`, the partitions' lock objects): a
/// multiply-rotate mix of the tag's integers, far cheaper than std's SipHash for these small
/// keys, which come from the program, not from an attacker.
/// Each integer it takes is a word of the hash kernel ([`Kernel::Hash`]), charged when the
/// hash code is taken, together with the probe of the table the code is taken for
/// ([`Kernel::Probe`]: a `LOCALLOCK` lookup, insert or delete, as `hash_search` makes on
/// `LockMethodLocalHash`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TagHasher {
    h: u64,
    words: usize,
}

impl TagHasher {
    #[inline(always)]
    fn add(&mut self, v: u64) {
        self.h = (self.h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        self.words += 1;
    }
}

impl std::hash::Hasher for TagHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        cpu::ran(Kernel::Hash, self.words);
        cpu::ran(Kernel::Probe, 1);
        self.h
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    #[inline(always)]
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }
    #[inline(always)]
    fn write_u16(&mut self, v: u16) {
        self.add(u64::from(v));
    }
    #[inline(always)]
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }
    #[inline(always)]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    #[inline(always)]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
    #[inline(always)]
    fn write_isize(&mut self, v: isize) {
        self.add(v as u64);
    }
}

/// A hash map keyed by lock tags, with [`TagHasher`].
pub type TagMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<TagHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_describe_themselves_as_postgresql_does() {
        assert_eq!(
            LockTag::relation(5, 16384).describe(),
            "relation 16384 of database 5"
        );
        assert_eq!(LockTag::transaction(731).describe(), "transaction 731");
        assert_eq!(
            LockTag::virtual_transaction(3, 12).describe(),
            "virtual transaction 3/12"
        );
        assert_eq!(
            LockTag::advisory(5, 1, 2, 2).describe(),
            "advisory lock [5,1,2,2]"
        );
        assert_eq!(LockTag::advisory(5, 1, 2, 2).method, LockMethodId::User);
    }

    #[test]
    fn hash_codes_spread_over_partitions() {
        let mut hits = [0u32; 16];
        for rel in 0..1600 {
            hits[LockTag::relation(5, 16384 + rel).hash_code() as usize % 16] += 1;
        }
        assert!(hits.iter().all(|&n| (60..=140).contains(&n)), "{hits:?}");
        assert_ne!(
            LockTag::relation(5, 1).hash_code(),
            LockTag::relation_extend(5, 1).hash_code()
        );
    }
}
