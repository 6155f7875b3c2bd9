//! A deterministic many-core machine for pglocks: the unchanged lock code, run on N virtual CPUs
//! of a modelled machine, every shared-memory operation charged by a cache-coherence cost model.
//!
//! The sync shim (`pglocks-sync`) is the one door through which the models reach atomics,
//! time, sleeps, futexes and spin hints. On a host thread that is running a simulation, each of
//! those calls is routed here instead ([`hook`]): the calling *virtual thread* (a stackful
//! coroutine, see [`engine`]) waits until its virtual clock is the earliest of all, the
//! operation takes effect, and the thread's clock advances by what the [`cache`] model says
//! that access costs on the [`profile`]'s machine. Everything between shim operations runs as
//! ordinary code and costs the profile's `local` charge per operation, plus the private kernels
//! the code reports ([`profile::Kernel`]: words hashed, bytes checksummed) at the profile's cost per
//! unit, never the host's time, so the same machine and inputs give the same result on any
//! host.
//!
//! The hooks exist only in the simulator's build (`--cfg pglocks_sim`, [`engine::BUILT_IN`]): in
//! any other the shim's operations are std's alone, with no check, and [`run`] refuses. In the
//! simulator's build, on any host thread that is not simulating, the check is one relaxed load
//! of a process-wide count that stays zero.

pub mod cache;
pub mod engine;
pub mod hot;
mod keyed;
pub mod own;
pub mod picos;
pub mod profile;
pub mod shmem;

pub use cache::{Access, Distance};
pub use engine::{run, Outcome, Placement, SimError, SimThread, BUILT_IN};
pub use hot::{HotLine, Structure};
pub use profile::{Profile, ProfileError};

/// What the shim calls on a virtual thread; each function may only be called when [`active`](hook::active)
/// says the caller is one.
pub mod hook {
    pub use crate::engine::active;
    pub use crate::engine::ops::*;
    pub use crate::engine::spawn::spawn;
    pub use crate::engine::syscall::system_call;
}

/// Runs `team` on the built-in profile named `profile` with the hot-lines tally on, so that
/// [`Outcome::by_structure`] adds every line's transfers up: what a crate's simulated test needs
/// to see which of its structures moved. The run may take up to 10 s of virtual time. For tests
/// only: an unknown profile or a failed run panics, failing the test with the error's message.
pub fn run_tallied(profile: &str, team: Vec<SimThread<'_>>) -> Outcome {
    // The tally is asked for through the environment, as on the command line; a test that sets
    // it sets it for every run of its process, which only makes those runs keep a tally too.
    std::env::set_var(hot::VARIABLE, "1");
    let profile = Profile::find(profile).unwrap_or_else(|e| panic!("{e}"));
    run(&profile, team, std::time::Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"))
}
