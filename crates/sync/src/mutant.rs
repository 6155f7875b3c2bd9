//! Deliberately broken variants of the models (*mutants*), behind a switch that exists only in
//! a build of its own, to show which checks catch which bug.
//!
//! A check that has never caught anything has not shown that it can. Each mutant here breaks
//! one model in one place, the way a plausible patch to PostgreSQL could (a flag cleared too
//! early, a barrier left out, a loop that skips an element), and the stress runs on this
//! machine and on a simulated one, and the loom models, are run against each to see which
//! catches it and how soon (`scripts/mutants.sh`, docs/stress.md).
//!
//! The switch is two-fold. Only a build with `RUSTFLAGS="--cfg pglocks_mutants"` has it: in
//! any other, [`active`] is the constant `false` and every mutant's code is dead, so no real or
//! simulated measurement pays for it. In that build, the environment variable
//! `PGLOCKS_MUTANT` names the one mutant in force for the process (read once); a name that is
//! not in [`MUTANTS`] stops the process at the first check, with the list.

/// One deliberately broken variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// `LWLockWakeup` clears `LW_FLAG_HAS_WAITERS` whenever it woke somebody, though waiters
    /// it did not wake are still queued: the next release finds no waiters to wake.
    LwLockWakeupEarly,
    /// `S_UNLOCK` releases the spinlock with a relaxed store instead of a release store: the
    /// critical section's writes may become visible after the lock is seen free.
    SpinUnlockRelaxed,
    /// `FastPathTransferRelationLocks` skips the first backend: a strong locker misses that
    /// backend's fast-path lock on the relation and is granted beside it.
    FastPathTransferSkip,
    /// `ProcArrayGroupClearXid`'s leader ends every member's transaction but the second's,
    /// and still wakes it: that transaction stays in the ProcArray after its commit.
    GroupClearForget,
    /// `SetLatch` and `WaitLatch` without their full barriers: the setter may miss a sleeper
    /// that has not yet seen the latch set (a store buffered past a load).
    LatchNoFence,
}

/// Every mutant: its name in `PGLOCKS_MUTANT`, itself, and what it breaks.
pub const MUTANTS: &[(&str, Mutant, &str)] = &[
    (
        "lwlock-wakeup-early",
        Mutant::LwLockWakeupEarly,
        "LWLockWakeup clears HAS_WAITERS though waiters are still queued",
    ),
    (
        "spin-unlock-relaxed",
        Mutant::SpinUnlockRelaxed,
        "S_UNLOCK's release store made relaxed",
    ),
    (
        "fastpath-transfer-skip",
        Mutant::FastPathTransferSkip,
        "FastPathTransferRelationLocks skips the first backend",
    ),
    (
        "group-clear-forget",
        Mutant::GroupClearForget,
        "ProcArrayGroupClearXid's leader forgets the second member's xid",
    ),
    (
        "latch-no-fence",
        Mutant::LatchNoFence,
        "SetLatch and WaitLatch without their full barriers",
    ),
];

/// Whether `m` is the mutant in force: always `false` outside a `--cfg pglocks_mutants` build.
#[cfg(not(pglocks_mutants))]
#[inline(always)]
pub const fn active(m: Mutant) -> bool {
    let _ = m;
    false
}

/// Whether `m` is the mutant `PGLOCKS_MUTANT` names.
#[cfg(pglocks_mutants)]
pub fn active(m: Mutant) -> bool {
    in_force() == Some(m)
}

/// The mutant `PGLOCKS_MUTANT` names, read once; an unknown name ends the process with the
/// list of names (a mutants build is a test tool: its user gets the list, not a guess).
#[cfg(pglocks_mutants)]
pub fn in_force() -> Option<Mutant> {
    static IN_FORCE: std::sync::OnceLock<Option<Mutant>> = std::sync::OnceLock::new();
    *IN_FORCE.get_or_init(|| {
        let name = std::env::var("PGLOCKS_MUTANT").ok()?;
        match MUTANTS.iter().find(|(n, ..)| *n == name) {
            Some(&(_, m, _)) => Some(m),
            None => {
                let names: Vec<_> = MUTANTS.iter().map(|(n, ..)| *n).collect();
                eprintln!(
                    "PGLOCKS_MUTANT={name}: no such mutant (valid: {})",
                    names.join(", ")
                );
                std::process::exit(2);
            }
        }
    })
}

/// The mutant in force: none outside a `--cfg pglocks_mutants` build.
#[cfg(not(pglocks_mutants))]
pub fn in_force() -> Option<Mutant> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutant_is_listed_once_by_a_name_of_its_own() {
        for (k, (name, m, what)) in MUTANTS.iter().enumerate() {
            assert!(!what.is_empty());
            assert!(
                !MUTANTS[..k].iter().any(|(n, x, _)| n == name || x == m),
                "{name}"
            );
        }
        if !cfg!(pglocks_mutants) {
            assert!(MUTANTS.iter().all(|&(_, m, _)| !active(m)));
            assert_eq!(in_force(), None);
        }
    }
}
