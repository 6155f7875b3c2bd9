//! A deterministic many-core machine for pglocks: the unchanged lock code, run on N virtual CPUs
//! of a modelled machine, every shared-memory operation charged by a cache-coherence cost model.
//!
//! The sync shim (`pglocks-sync`) is the one door through which the models reach atomics,
//! time, sleeps, futexes and spin hints. On a host thread that is running a simulation, each of
//! those calls is routed here instead ([`hook`]): the calling *virtual thread* (a stackful
//! coroutine, see [`engine`]) waits until its virtual clock is the earliest of all, the
//! operation takes effect, and the thread's clock advances by what the [`cache`] model says
//! that access costs on the [`profile`]'s machine. Everything between shim operations runs as
//! ordinary code and costs the profile's `local` charge per operation, never the host's time,
//! so the same machine and inputs give the same result on any host.
//!
//! The hooks exist only in the simulator's build (`--cfg pglocks_sim`, [`engine::BUILT_IN`]): in
//! any other the shim's operations are std's alone, with no check, and [`run`] refuses. In the
//! simulator's build, on any host thread that is not simulating, the check is one relaxed load
//! of a process-wide count that stays zero.

pub mod cache;
pub mod engine;
pub mod hot;
mod keyed;
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
