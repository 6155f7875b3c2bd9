//! Models lockdefs.h's lock modes and lock.c's `LockConflicts` table: the eight table-level
//! modes of the default lock method, from `AccessShareLock` (every `SELECT`) to
//! `AccessExclusiveLock` (`DROP TABLE`, `LOCK TABLE` without a mode), and which pairs conflict.
//!
//! The table is symmetric, and a mode conflicts with itself from `ShareUpdateExclusiveLock` up
//! except for `ShareLock` (two `CREATE INDEX`es may run side by side). Modes below
//! `ShareUpdateExclusiveLock` conflict only with modes above it, which is what makes the fast
//! path possible: weak locks never conflict with each other.

/// A lock mode (lockdefs.h's `LOCKMODE`, 1..=8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum LockMode {
    /// `AccessShareLock` (1): `SELECT`.
    AccessShare = 1,
    /// `RowShareLock` (2): `SELECT FOR UPDATE/SHARE`.
    RowShare = 2,
    /// `RowExclusiveLock` (3): `INSERT`, `UPDATE`, `DELETE`.
    RowExclusive = 3,
    /// `ShareUpdateExclusiveLock` (4): `VACUUM`, `ANALYZE`, `CREATE INDEX CONCURRENTLY`.
    ShareUpdateExclusive = 4,
    /// `ShareLock` (5): `CREATE INDEX`.
    Share = 5,
    /// `ShareRowExclusiveLock` (6): `CREATE TRIGGER`, some `ALTER TABLE`.
    ShareRowExclusive = 6,
    /// `ExclusiveLock` (7): `REFRESH MATERIALIZED VIEW CONCURRENTLY`; transaction-id locks.
    Exclusive = 7,
    /// `AccessExclusiveLock` (8): `DROP TABLE`, `TRUNCATE`, `LOCK TABLE`.
    AccessExclusive = 8,
}

/// lockdefs.h's `MaxLockMode`.
pub const MAX_LOCK_MODES: usize = 8;

/// A set of modes as a bit mask, bit `1 << mode` per mode (lock.h's `LOCKMASK` and
/// `LOCKBIT_ON`).
pub type LockMask = u16;

use LockMode::*;

impl LockMode {
    /// Every mode, weakest first.
    pub const ALL: [LockMode; MAX_LOCK_MODES] = [
        AccessShare,
        RowShare,
        RowExclusive,
        ShareUpdateExclusive,
        Share,
        ShareRowExclusive,
        Exclusive,
        AccessExclusive,
    ];

    /// The mode's name as PostgreSQL prints it (`lock_mode_names`).
    pub fn name(self) -> &'static str {
        match self {
            AccessShare => "AccessShareLock",
            RowShare => "RowShareLock",
            RowExclusive => "RowExclusiveLock",
            ShareUpdateExclusive => "ShareUpdateExclusiveLock",
            Share => "ShareLock",
            ShareRowExclusive => "ShareRowExclusiveLock",
            Exclusive => "ExclusiveLock",
            AccessExclusive => "AccessExclusiveLock",
        }
    }

    /// The mode named in `LOCK TABLE … IN name MODE` (`ACCESS SHARE`, `ROW EXCLUSIVE`, …; any
    /// case, any spacing between the words).
    pub fn from_sql(words: &str) -> Option<LockMode> {
        let normal: Vec<String> = words
            .split_whitespace()
            .map(|w| w.to_ascii_uppercase())
            .collect();
        Some(match normal.join(" ").as_str() {
            "ACCESS SHARE" => AccessShare,
            "ROW SHARE" => RowShare,
            "ROW EXCLUSIVE" => RowExclusive,
            "SHARE UPDATE EXCLUSIVE" => ShareUpdateExclusive,
            "SHARE" => Share,
            "SHARE ROW EXCLUSIVE" => ShareRowExclusive,
            "EXCLUSIVE" => Exclusive,
            "ACCESS EXCLUSIVE" => AccessExclusive,
            _ => return None,
        })
    }

    /// This mode's bit (`LOCKBIT_ON`).
    #[inline(always)]
    pub const fn bit(self) -> LockMask {
        1 << self as u8
    }

    /// The modes this one conflicts with (lock.c's `LockConflicts[mode]`).
    #[inline(always)]
    pub const fn conflicts(self) -> LockMask {
        const fn bits(modes: &[LockMode]) -> LockMask {
            let mut m = 0;
            let mut i = 0;
            while i < modes.len() {
                m |= modes[i].bit();
                i += 1;
            }
            m
        }
        match self {
            AccessShare => bits(&[AccessExclusive]),
            RowShare => bits(&[Exclusive, AccessExclusive]),
            RowExclusive => bits(&[Share, ShareRowExclusive, Exclusive, AccessExclusive]),
            ShareUpdateExclusive => bits(&[
                ShareUpdateExclusive,
                Share,
                ShareRowExclusive,
                Exclusive,
                AccessExclusive,
            ]),
            Share => bits(&[
                RowExclusive,
                ShareUpdateExclusive,
                ShareRowExclusive,
                Exclusive,
                AccessExclusive,
            ]),
            ShareRowExclusive => bits(&[
                RowExclusive,
                ShareUpdateExclusive,
                Share,
                ShareRowExclusive,
                Exclusive,
                AccessExclusive,
            ]),
            Exclusive => bits(&[
                RowShare,
                RowExclusive,
                ShareUpdateExclusive,
                Share,
                ShareRowExclusive,
                Exclusive,
                AccessExclusive,
            ]),
            AccessExclusive => bits(&LockMode::ALL),
        }
    }

    /// Whether a lock in this mode and one in `other` conflict.
    #[inline(always)]
    pub const fn conflicts_with(self, other: LockMode) -> bool {
        self.conflicts() & other.bit() != 0
    }

    /// The mode of bit number `n` (1..=8).
    pub fn from_number(n: u8) -> Option<LockMode> {
        LockMode::ALL.get(usize::from(n).checked_sub(1)?).copied()
    }

    /// The modes in `mask`, weakest first.
    pub fn in_mask(mask: LockMask) -> impl Iterator<Item = LockMode> {
        LockMode::ALL
            .into_iter()
            .filter(move |m| mask & m.bit() != 0)
    }
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_symmetric() {
        for a in LockMode::ALL {
            for b in LockMode::ALL {
                assert_eq!(a.conflicts_with(b), b.conflicts_with(a), "{a} {b}");
            }
        }
    }

    #[test]
    fn weak_modes_never_conflict_with_each_other() {
        let weak = [AccessShare, RowShare, RowExclusive];
        for a in weak {
            for b in weak {
                assert!(!a.conflicts_with(b));
            }
            // …and only with the modes above ShareUpdateExclusive.
            assert!(!a.conflicts_with(ShareUpdateExclusive));
        }
        assert!(RowExclusive.conflicts_with(Share));
        assert!(!Share.conflicts_with(Share));
        assert!(ShareUpdateExclusive.conflicts_with(ShareUpdateExclusive));
    }

    #[test]
    fn names_and_sql_round_trip() {
        for (n, m) in LockMode::ALL.into_iter().enumerate() {
            assert_eq!(LockMode::from_number(n as u8 + 1), Some(m));
            let sql = m.name().trim_end_matches("Lock");
            let spaced: String = sql
                .chars()
                .enumerate()
                .flat_map(|(i, c)| {
                    (i > 0 && c.is_ascii_uppercase())
                        .then_some(' ')
                        .into_iter()
                        .chain(std::iter::once(c))
                })
                .collect();
            assert_eq!(
                LockMode::from_sql(&spaced.to_lowercase()),
                Some(m),
                "{spaced}"
            );
        }
        assert_eq!(
            LockMode::from_sql("share  row\texclusive"),
            Some(ShareRowExclusive)
        );
        assert_eq!(LockMode::from_sql("exclusive share"), None);
        assert_eq!(LockMode::from_number(0), None);
        assert_eq!(
            LockMode::in_mask(AccessShare.bit() | Exclusive.bit()).collect::<Vec<_>>(),
            [AccessShare, Exclusive]
        );
    }
}
