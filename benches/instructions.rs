//! The guard on the harness's own cost: instructions per operation, counted by callgrind
//! (iai-callgrind), checked against the committed baseline `benches/instructions.toml`.
//!
//! Wall-clock figures on a shared VM drift by 3× over minutes; an instruction count does not.
//! Each benchmark runs [`run_loop_for`], the measured loop of a team thread, for a fixed number
//! of operations on one thread — the loop every `pglocks run` figure goes through — around:
//!
//! - `empty`: an operation that does nothing (the team loop alone);
//! - `floor`: `SpinLock<u64, FloorLock>`, the bare exchange and store, and the increment;
//! - `s_lock`: PostgreSQL's `s_lock` spinlock (`PgSpinLock`, TAS_SPIN on) and the increment;
//! - `lwlock_shared`, `lwlock_exclusive`: 18's LWLock (`AtomicLwLock<Pg18Layout>`) taken and
//!   released, with the `held_lwlocks[]` bookkeeping;
//!
//! and, outside the loop, a million `fetch_add`s on the sync shim's `AtomicU64` (`shim_fetch_add`)
//! and on std's (`std_fetch_add`): what the shim's check of whether a simulation runs costs.
//!
//! A benchmark more than 5 % above its baseline fails (iai-callgrind's hard limit, exit 3), so
//! the per-operation cost cannot creep up unnoticed. The counts depend on the compiler, so a
//! toolchain update may move them: re-make the baseline with `scripts/instructions-baseline.sh`
//! (which runs this bench and rewrites the file) and say why in the commit.
//!
//! Needs valgrind and `iai-callgrind-runner` of the same version as the library
//! (`cargo install iai-callgrind-runner --version 0.16.1 --locked`); `.ci/run` installs both.

use iai_callgrind::{
    library_benchmark, library_benchmark_group, main, Callgrind, EventKind, LibraryBenchmarkConfig,
};
use pglocks_harness::team::run_loop_for;
use pglocks_lwlock::{AtomicLwLock, LwLockMode, Pg18Layout};
use pglocks_proc::{Backend, ProcTable};
use pglocks_spin::{FloorLock, PgSpinLock, RawSpinLock, SpinError, SpinLock};
use std::hint::black_box;

/// Operations per benchmark: enough that the loop's set-up (a latency histogram) is well under
/// 1 % of the count.
const OPS: u64 = 1_000_000;

/// The harness's default sampling: one operation in this many timed.
const SAMPLE_EVERY: u32 = 1024;

/// How far above its baseline a benchmark may go, in percent.
const TOLERANCE: f64 = 5.0;

/// The committed baseline: benchmark id = instructions.
const BASELINE: &str = include_str!("instructions.toml");

/// The configuration of benchmark `id`: callgrind with a hard limit of the baseline plus
/// [`TOLERANCE`] on its instructions. An id missing from the baseline is a mistake in this file.
fn limit(id: &str) -> LibraryBenchmarkConfig {
    let table: toml::Table = toml::from_str(BASELINE).expect("benches/instructions.toml parses");
    let base = table
        .get(id)
        .and_then(toml::Value::as_integer)
        .unwrap_or_else(|| panic!("benches/instructions.toml has no count for {id}"));
    let most = (base as f64 * (1.0 + TOLERANCE / 100.0)).floor() as u64;
    let mut config = LibraryBenchmarkConfig::default();
    config.tool(Callgrind::default().hard_limits([(EventKind::Ir, most)]));
    config
}

/// A backend of a one-slot table, as a team thread has.
fn backend() -> Backend {
    ProcTable::new(1)
        .attach()
        .expect("a one-slot table has a free slot")
}

/// What a spinlock benchmark gets: the backend and an unlocked counter.
fn spin_setup<R: RawSpinLock>() -> (Backend, SpinLock<u64, R>) {
    (backend(), SpinLock::new("spin", 0))
}

/// `spin`'s operation: lock, increment, unlock, [`OPS`] times through the team loop.
fn spin_loop<R: RawSpinLock>((mut b, lock): (Backend, SpinLock<u64, R>)) -> u64 {
    let ops = run_loop_for(
        OPS,
        &mut b,
        SAMPLE_EVERY,
        #[inline(always)]
        |b: &mut Backend| -> Result<(), SpinError> {
            lock.lock(b)?.with_mut(|c| *c = c.wrapping_add(1));
            Ok(())
        },
    )
    .expect("an uncontended spinlock cannot get stuck");
    assert_eq!(lock.lock(&mut b).unwrap().with(|c| *c), OPS);
    ops
}

/// What an LWLock benchmark gets: the backend and a free lock.
fn lwlock_setup() -> (Backend, AtomicLwLock<Pg18Layout>) {
    (backend(), AtomicLwLock::new("BenchLock"))
}

/// An LWLock taken in `mode` and released, [`OPS`] times through the team loop.
fn lwlock_loop((mut b, lock): (Backend, AtomicLwLock<Pg18Layout>), mode: LwLockMode) -> u64 {
    run_loop_for(
        OPS,
        &mut b,
        SAMPLE_EVERY,
        #[inline(always)]
        |b: &mut Backend| {
            lock.acquire(b, mode)?;
            lock.release(b)
        },
    )
    .expect("an uncontended LWLock takes and releases")
}

#[library_benchmark]
#[bench::empty(args = (), config = limit("empty"))]
fn empty() -> u64 {
    let mut b = backend();
    run_loop_for(OPS, &mut b, SAMPLE_EVERY, |_b: &mut Backend| {
        Ok::<(), SpinError>(())
    })
    .expect("an empty operation cannot fail")
}

#[library_benchmark]
#[bench::floor(args = (), setup = spin_setup::<FloorLock>, config = limit("floor"))]
fn floor(input: (Backend, SpinLock<u64, FloorLock>)) -> u64 {
    spin_loop(input)
}

#[library_benchmark]
#[bench::s_lock(args = (), setup = spin_setup::<PgSpinLock<true>>, config = limit("s_lock"))]
fn s_lock(input: (Backend, SpinLock<u64, PgSpinLock<true>>)) -> u64 {
    spin_loop(input)
}

#[library_benchmark]
#[bench::lwlock_shared(args = (), setup = lwlock_setup, config = limit("lwlock_shared"))]
fn lwlock_shared(input: (Backend, AtomicLwLock<Pg18Layout>)) -> u64 {
    lwlock_loop(input, LwLockMode::Shared)
}

#[library_benchmark]
#[bench::lwlock_exclusive(args = (), setup = lwlock_setup, config = limit("lwlock_exclusive"))]
fn lwlock_exclusive(input: (Backend, AtomicLwLock<Pg18Layout>)) -> u64 {
    lwlock_loop(input, LwLockMode::Exclusive)
}

#[library_benchmark]
#[bench::shim_fetch_add(args = (), config = limit("shim_fetch_add"))]
fn shim_fetch_add() -> u64 {
    let n = pglocks_sync::atomic::AtomicU64::new(0);
    for _ in 0..OPS {
        black_box(&n).fetch_add(1, pglocks_sync::atomic::Ordering::Relaxed);
    }
    n.into_inner()
}

#[library_benchmark]
#[bench::std_fetch_add(args = (), config = limit("std_fetch_add"))]
fn std_fetch_add() -> u64 {
    let n = std::sync::atomic::AtomicU64::new(0);
    for _ in 0..OPS {
        black_box(&n).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    n.into_inner()
}

library_benchmark_group!(
    name = team_loop;
    benchmarks = empty, floor, s_lock, lwlock_shared, lwlock_exclusive
);

library_benchmark_group!(
    name = shim;
    benchmarks = shim_fetch_add, std_fetch_add
);

main!(library_benchmark_groups = team_loop, shim);
