//! Models the tranche registry of lwlock.c (`LWLockRegisterTranche`, `GetLWTrancheName`): every
//! LWLock carries a small tranche number instead of its name, so that the lock stays 16 bytes
//! (as PostgreSQL's `LWLock`: a `uint16 tranche`, the state word and the wait list) and
//! per-tranche statistics are an array index rather than a hash lookup.
//!
//! Differences from PostgreSQL: PostgreSQL fixes the built-in tranche numbers at compile time
//! (`BuiltinTrancheIds`) and extensions register theirs at start-up; here a tranche is numbered
//! the first time a lock of that name is made, process-wide, in order of first use. Numbers are
//! therefore only meaningful inside one process, which is all the statistics need.

use std::sync::{Mutex, PoisonError};

/// A tranche number (`LWLock.tranche`).
pub type TrancheId = u16;

/// Tranche names by number. Not a model of anything shared between backends (PostgreSQL keeps
/// this array in each backend's local memory), so it uses std's mutex, never loom's.
static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// The number of tranche `name`, registering it on first use (`LWLockRegisterTranche`).
///
/// After `u16::MAX` distinct names (far more than PostgreSQL has) every new name shares the last
/// number, so its statistics are pooled rather than lost.
pub fn tranche_id(name: &'static str) -> TrancheId {
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(i) = names.iter().position(|&n| n == name) {
        return i as TrancheId;
    }
    if names.len() > TrancheId::MAX as usize {
        return TrancheId::MAX;
    }
    names.push(name);
    (names.len() - 1) as TrancheId
}

/// The name of tranche `id` (`GetLWTrancheName`); `"unknown"` for a number never handed out.
pub fn tranche_name(id: TrancheId) -> &'static str {
    let names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    names.get(id as usize).copied().unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_number() {
        let a = tranche_id("TestTrancheA");
        let b = tranche_id("TestTrancheB");
        assert_ne!(a, b);
        assert_eq!(tranche_id("TestTrancheA"), a);
        assert_eq!(tranche_name(a), "TestTrancheA");
        assert_eq!(tranche_name(b), "TestTrancheB");
        assert_eq!(tranche_name(TrancheId::MAX), "unknown");
    }
}
