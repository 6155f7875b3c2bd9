//! Machine profiles: the shape of a machine (sockets, dies, cores, SMT threads) and what its
//! caches and its kernel charge, read from a small TOML file.
//!
//! A profile is data, with its sources cited in the file. The built-in ones live in this crate's
//! `profiles/` directory and are compiled in; the profile of the machine at hand (`this`) is a
//! file of the same form in the profile directory ([`this_path`]), which [`Profile::find`]
//! reads.
//!
//! The shape is regular (every socket has the same dies, every die the same cores), which is
//! what the simulated machines are, so a profile states it in five numbers rather than as a
//! sysfs tree of hundreds of files; [`Profile::cpus`] expands it into the same per-CPU facts a
//! sysfs tree gives (package, core, SMT rank, NUMA node), in Linux's numbering.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The built-in profiles: (name, TOML text).
pub const BUILT_IN: &[(&str, &str)] = &[
    ("opteron-48", include_str!("../profiles/opteron-48.toml")),
    ("westmere-80", include_str!("../profiles/westmere-80.toml")),
    ("epyc-2s", include_str!("../profiles/epyc-2s.toml")),
    ("xeon-2s", include_str!("../profiles/xeon-2s.toml")),
    (
        "haswell-ep-2s",
        include_str!("../profiles/haswell-ep-2s.toml"),
    ),
    (
        "haswell-ex-4s",
        include_str!("../profiles/haswell-ex-4s.toml"),
    ),
];

/// The name of the profile of the machine at hand.
pub const THIS: &str = "this";

/// The environment variable that names the directory `this.toml` is read from.
pub const PROFILE_DIR_VAR: &str = "PGLOCKS_PROFILE_DIR";

/// A simulated machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The name `--machine sim:NAME` uses.
    pub name: String,
    /// One line: the machine it stands for.
    pub summary: String,
    /// Where the figures come from.
    #[serde(default)]
    pub sources: Vec<String>,
    /// The values nothing sources (no table of the machine gives them), as [`Profile::set`]
    /// names them (`cycles.fence`, `os.wake_ns`, `latencies` for the whole latency table):
    /// what `pglocks reproduce --sensitivity` varies, beside the cost model's own `[model]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsourced: Vec<String>,
    /// The core clock, for converting the cycle counts below to time.
    pub ghz: f64,
    /// The coherence unit in bytes: 64, or 128 where the adjacent-line prefetcher pairs lines.
    #[serde(default = "default_line_bytes")]
    pub line_bytes: u32,
    /// One core's speed on one stream of integer work against the reference machine's
    /// ([`REFERENCE_BUSY_STEPS_PER_US`]), from a published benchmark of the two parts: what
    /// turns the CPU work measured on the reference machine (PostgreSQL's executor per
    /// transaction, a workload's `cs_work` and `think`, all counted in `busy_work` steps)
    /// into this core's time. A profile gives it or `cycles.busy_step`, not both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_speed: Option<f64>,
    /// The machine's shape.
    pub topology: Shape,
    /// What the memory system charges, in core cycles.
    pub cycles: Cycles,
    /// What the kernel charges.
    pub os: Os,
    /// The cost model's own rules and constants, the same on every built-in profile; a
    /// profile names them only to change them (a sensitivity run, a seed of its own).
    #[serde(default, skip_serializing_if = "Model::is_default")]
    pub model: Model,
}

fn default_line_bytes() -> u32 {
    64
}

/// The cost model's constants that are not the machine's: how much transfers stray, from
/// which seed, when a holder answers and whether a place keeps a line until then. Each is
/// unsourced (docs/simulator.md, "Every constant and its source"); they are settable so that
/// a run can show how much a figure depends on them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Model {
    /// Each transfer's latency is drawn uniformly from [1 − `jitter`, 1 + `jitter`) times the
    /// profile's figure (0: every transfer exactly the figure).
    pub jitter: f64,
    /// The jitter generator's seed (xorshift64; 0 is taken as 1): another seed gives another
    /// interleaving of the same machine.
    pub seed: u64,
    /// The shared-memory map's layout draw (`crate::shmem`): 0 lays the regions out one after
    /// the other as shmem.c does; another value puts a drawn gap before each, so that which
    /// structures share a set of a core's caches is another draw of the same machine.
    pub layout: u64,
    /// How far through a transfer the line's holder answers, taking the access's effect
    /// (0.5: the request's half of a round trip; 0 at issue, 1 at completion).
    pub answer_at: f64,
    /// Whether the place a transfer brought a line to keeps using it at a hit's cost until the
    /// next queued request's holder answers (the hold window; off: a queued request takes the
    /// line in the books at once).
    pub hold_window: bool,
    /// The schedule's perturbation (`crate::engine` perturb module): each thread preempted at a
    /// random shim operation once every this many µs of virtual time on average, with
    /// ties, run queues and slices drawn from `seed`; 0 (the default) perturbs nothing. A
    /// stress run's setting, not the machine's.
    pub preempt_every_us: f64,
}

impl Model {
    /// The seed every profile runs with unless it names another.
    pub const SEED: u64 = 0x2545_F491_4F6C_DD1D;

    fn is_default(&self) -> bool {
        *self == Model::default()
    }
}

impl Default for Model {
    fn default() -> Self {
        Model {
            jitter: crate::cache::JITTER,
            seed: Model::SEED,
            layout: 0,
            answer_at: 0.5,
            hold_window: true,
            preempt_every_us: 0.0,
        }
    }
}

/// How CPU ids are numbered over the shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Numbering {
    /// One thread of every core first (socket by socket), then every core's second thread, as
    /// Linux numbers Intel and AMD servers: cpu `c` and cpu `c + cores` are siblings.
    SiblingsLast,
    /// A core's threads next to each other: cpus `2c` and `2c + 1` are siblings.
    SiblingsAdjacent,
}

/// A machine's regular shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Packages.
    pub sockets: u32,
    /// Last-level-cache domains per package (Opteron dies, EPYC CCXs; 1 on a monolithic die).
    pub dies_per_socket: u32,
    /// Cores per die.
    pub cores_per_die: u32,
    /// Hardware threads per core (1 without SMT).
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// NUMA nodes per package (a node is a run of whole dies; Opteron's dies are one node each).
    #[serde(default = "one")]
    pub nodes_per_socket: u32,
    /// Interconnect hops between packages, `sockets × sockets`, 0 on the diagonal; omitted, every
    /// pair of packages is one hop apart.
    #[serde(default)]
    pub socket_hops: Vec<Vec<u32>>,
    /// How CPU ids are numbered.
    #[serde(default = "siblings_last")]
    pub numbering: Numbering,
}

fn one() -> u32 {
    1
}

fn siblings_last() -> Numbering {
    Numbering::SiblingsLast
}

/// The memory system's costs, in core cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cycles {
    /// A load or store that hits a line this core holds.
    pub hit: f64,
    /// An atomic read-modify-write on a line this core holds exclusively (the locked
    /// instruction's own cost).
    pub atomic: f64,
    /// Getting a line from the other hardware thread of the same core.
    pub smt: f64,
    /// From another core sharing the last-level cache (same die or CCX).
    pub die: f64,
    /// From another die of the same package.
    pub package: f64,
    /// From a package one interconnect hop away.
    pub hop1: f64,
    /// Two hops away.
    pub hop2: f64,
    /// Three or more hops away.
    #[serde(default)]
    pub hop3: f64,
    /// From memory, when no cache holds the line.
    pub memory: f64,
    /// How long a transfer keeps the line busy for the next one, as a fraction of its latency:
    /// 1 serialises every transfer of a line (the home agent handles one at a time). The default
    /// of 1, which every built-in profile keeps, is unsourced.
    #[serde(default = "full")]
    pub occupancy: f64,
    /// The fraction of its speed a hardware thread keeps while the other thread of its core runs
    /// too (the two share one pipeline): its private work (hits, atomics, pauses, fences,
    /// `busy_work`, `local`) takes 1/`smt_speed` as long. 1 without SMT. The default of 1 on a
    /// profile with SMT (siblings that do not slow each other) is unsourced.
    #[serde(default = "full")]
    pub smt_speed: f64,
    /// One `pause` instruction (`spin_loop`).
    pub pause: f64,
    /// A full fence.
    pub fence: f64,
    /// One step of the shim's `busy_work`, measured on the machine itself (`pglocks
    /// calibrate`); a profile of another machine gives its `core_speed` instead, and the step
    /// is the reference machine's over that speed ([`Profile::busy_step`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_step: Option<f64>,
    /// The private kernels' costs in cycles per unit, measured on the machine itself (`pglocks
    /// calibrate`); a profile of another machine gives its `core_speed` instead and takes the
    /// reference machine's ([`Profile::kernel`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<Kernels>,
    /// The code between two shim operations that no kernel counts (calls, branches, a model's
    /// bookkeeping, the team's loop), charged once per shim operation: fitted by `pglocks
    /// calibrate` on the machine itself; a profile of another machine leaves it out and takes
    /// the reference machine's ([`REFERENCE_LOCAL_NS`]) over its `core_speed`
    /// ([`Profile::local`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<f64>,
    /// Not a cost but a count: how many misses of one core may be outstanding at once (its line
    /// fill buffers, or miss address buffers), which is how many of the independent loads a
    /// model declares ([`crate::hook::independent`]) overlap. 1, the default, overlaps none
    /// (unsourced for any machine: it stands for a figure not known).
    #[serde(default = "one")]
    pub outstanding_misses: u32,
    /// Not a cost but a count: the entries of a core's store buffer, where a store waits,
    /// after the core has gone on, until it can be made visible (x86's TSO: in order, each
    /// after the one before; a locked instruction or a fence waits for all). 0, the default,
    /// has none: every store stalls its core until it is visible (unsourced for any x86 core,
    /// all of which have one: it stands for a size not known).
    #[serde(default)]
    pub store_buffer: u32,
    /// A load that finds the line Shared by other cores (MESI's S) and by none of this core's
    /// caches, by the distance of the nearest sharer (the SOSP'13 study's load-from-Shared
    /// rows: an inclusive last-level cache serves it without asking a core). Absent: charged
    /// as a transfer from the nearest sharer, as a load of a Modified line there.
    #[serde(default)]
    pub load_from_shared: Option<ByDistance>,
    /// A store that finds the line Shared by other cores (MESI's S), by the distance of the
    /// farthest sharer: the fetch and the invalidations it waits for, which on a machine whose
    /// directory does not track sharers is a broadcast (the SOSP'13 study's store-on-Shared
    /// rows). Absent: charged as a transfer from the farthest sharer, as a store that finds
    /// the line Modified there.
    #[serde(default)]
    pub store_on_shared: Option<ByDistance>,
    /// A read-modify-write that finds the line Shared by other cores, likewise (the study's
    /// atomic-on-Shared row).
    #[serde(default)]
    pub atomic_on_shared: Option<ByDistance>,
    /// A core's own caches, their size and what a load that misses the L1 costs: a line the
    /// core holds (no other core took it) but has not used for long may have left its L1 and
    /// L2, and comes back from the L2 or the last-level cache. Absent: every line a core holds
    /// stays in its L1, a hit (`cycles.hit`), however many it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caches: Option<OwnCaches>,
}

/// A core's L1 data cache and L2, shared by its hardware threads, and the costs of a load
/// served by its L2 or by the last-level cache of its die (the model's books say the core still
/// holds the line, but the line has left the smaller caches since the core last used it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnCaches {
    /// The L1 data cache's size, in KiB.
    pub l1_kib: u32,
    /// Its associativity (ways per set).
    pub l1_ways: u32,
    /// The L2's size, in KiB.
    pub l2_kib: u32,
    /// Its associativity.
    pub l2_ways: u32,
    /// A load that misses the L1 and hits the L2, in cycles from issue to use.
    pub l2: f64,
    /// A load that misses the L2 and hits the die's last-level cache, in cycles.
    pub llc: f64,
}

impl OwnCaches {
    /// Sets of `kib` KiB of `ways`-way lines of `line_bytes`, if that is a whole number of
    /// them.
    pub fn sets(kib: u32, ways: u32, line_bytes: u32) -> Option<usize> {
        let lines = kib as usize * 1024 / line_bytes as usize;
        (ways > 0 && lines > 0 && lines % ways as usize == 0).then(|| lines / ways as usize)
    }
}

/// A cost at each distance from another core (cycles), for a row of a latency table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByDistance {
    /// Another core sharing the last-level cache.
    pub die: f64,
    /// Another die of the same package.
    pub package: f64,
    /// A package one hop away.
    pub hop1: f64,
    /// Two hops away.
    pub hop2: f64,
    /// Three or more hops away (0: as two).
    #[serde(default)]
    pub hop3: f64,
}

fn full() -> f64 {
    1.0
}

/// The kernel's costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Os {
    /// Entering and leaving the kernel for a futex wait or wake, `sched_yield` or a sleep, in ns.
    pub syscall_ns: f64,
    /// From a futex wake to the woken thread running on an idle CPU, in ns.
    pub wake_ns: f64,
    /// Switching a CPU from one thread to another, in ns.
    pub context_switch_ns: f64,
    /// A thread's time slice while others wait for its CPU, in µs.
    pub quantum_us: f64,
    /// What a timed sleep oversleeps by (Linux's default timer slack is 50 µs), in ns.
    pub timer_slack_ns: f64,
}

/// Why a profile could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// No built-in profile and no file by that name.
    #[error("no machine profile '{name}' (known: {known}){hint}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// The file could not be read.
    #[error("cannot read machine profile {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a profile.
    #[error("malformed machine profile {origin}: {message}")]
    Malformed {
        /// The file, or the built-in name.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// `busy_work` steps a microsecond on the reference machine, the project's development machine
/// (a KVM guest of 2 vCPUs on an AMD EPYC of the Zen 4 generation, family 25 model 17,
/// reported at 2.6 GHz; Amazon's EPYC 9R14 is the public part of that family and clock the
/// built-in profiles' `core_speed` sources compare against): `busy_work(n)` timed for `n` from
/// 1,000 to 10,000,000 in a release build ran 7,240–7,370 steps a microsecond. Every CPU work
/// the workloads measured there (`executor_work=pg15`) is counted in these steps.
pub const REFERENCE_BUSY_STEPS_PER_US: u64 = 7300;

/// The private kernels: code a model runs between its shared-memory operations whose time
/// grows with a count the model knows from its own data (words hashed, bytes checksummed,
/// entries compared). The model charges each where it runs it
/// (`pglocks_sync::cpu::ran`); a simulated CPU charges the kernel's cost per unit, measured
/// on the machine by `pglocks calibrate` or, for a profile of another machine, the reference
/// machine's ([`REFERENCE_KERNEL_NS`]) over the profile's `core_speed`. What a model runs
/// besides its kernels (calls, branches, its own bookkeeping) is `cycles.local` per shim
/// operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kernel {
    /// 64-bit words mixed into a hash code: a `LOCKTAG`'s or a `BufferTag`'s hash code
    /// (`LockTagHashCode` in lock.c, `BufTableHashCode` in buf_table.c, both `tag_hash` /
    /// `hash_bytes` of hashfn.c over the tag), a backend-local table's key.
    Hash,
    /// Bytes run through CRC-32C (`COMP_CRC32C` of pg_crc32c.h over a WAL record, in
    /// `XLogRecordAssemble` and `XLogInsertRecord`).
    Crc,
    /// Entries of a table or a list compared against a key: the keys of a shared chain's
    /// elements, a walk over `LOCALLOCK`s (`hash_seq_search`), a snapshot's xids.
    Scan,
    /// Probes of a backend-local hash table, its key already hashed: a lookup, an insert or a
    /// delete (`hash_search` on `LockMethodLocalHash` in lock.c; the private pin counts,
    /// `GetPrivateRefCountEntry` and its neighbours in bufmgr.c).
    Probe,
}

impl Kernel {
    /// Every kernel, in the order of [`Kernels`]' fields.
    pub const ALL: [Kernel; 4] = [Kernel::Hash, Kernel::Crc, Kernel::Scan, Kernel::Probe];

    /// The kernel's name, as a profile's `cycles.kernels` table spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Hash => "hash",
            Kernel::Crc => "crc",
            Kernel::Scan => "scan",
            Kernel::Probe => "probe",
        }
    }
}

/// A cost per unit of each [`Kernel`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kernels {
    /// Per 64-bit word mixed into a hash code.
    pub hash: f64,
    /// Per byte of CRC-32C.
    pub crc: f64,
    /// Per entry compared.
    pub scan: f64,
    /// Per probe of a backend-local hash table.
    pub probe: f64,
}

impl Kernels {
    /// The cost of one unit of `k`.
    pub fn of(&self, k: Kernel) -> f64 {
        match k {
            Kernel::Hash => self.hash,
            Kernel::Crc => self.crc,
            Kernel::Scan => self.scan,
            Kernel::Probe => self.probe,
        }
    }
}

/// The kernels' costs on the reference machine (the one of [`REFERENCE_BUSY_STEPS_PER_US`]),
/// in ns per unit, and what a profile with a `core_speed` divides by that speed: `pglocks
/// calibrate` there, twice in a row, gave `cycles.kernels` of 4.274 and 4.274 cycles a word
/// hashed, 0.327 and 0.316 a byte of CRC-32C, 0.168 and 0.168 an entry compared, at the
/// 2.6 GHz it converts with (each the median of 7 batches, which spread by under 10 % but for
/// one batch of the scan's 20 %); and, in two later rounds, 18.985 and 18.962 cycles a probe of
/// a local table (batches within 32 %), the other kernels within 2 % of the first rounds.
pub const REFERENCE_KERNEL_NS: Kernels = Kernels {
    hash: 1.64,
    crc: 0.124,
    scan: 0.065,
    probe: 7.3,
};

/// The code between two shim operations that no kernel counts, on the reference machine, in
/// ns per shim operation, and what a profile with a `core_speed` divides by that speed:
/// `pglocks calibrate` there, twice in a row, fitted −0.29 and −0.28 ns a shim operation on
/// `spin` and 0.04 and 0.05 on `lwlock-exclusive` (the two workloads it fits on, against the
/// default build): the simulated loops already cost more than the real ones (their hits and
/// atomics are charged one after the other, where the core overlaps them), so nothing is
/// left for the code between, and `local` is 0.
pub const REFERENCE_LOCAL_NS: f64 = 0.0;

/// The most CPUs a profile may have.
pub const MAX_CPUS: usize = 512;

impl Profile {
    /// Reads a profile from TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let bad = |message: String| ProfileError::Malformed {
            origin: origin.to_string(),
            message,
        };
        let p: Profile = toml::from_str(text).map_err(|e| bad(e.to_string().trim().to_string()))?;
        p.check().map_err(bad)?;
        Ok(p)
    }

    /// A built-in profile, or `this` from the profile directory, with the settings that follow
    /// its name applied ([`Profile::set`]): `westmere-80+cycles.fence*2+model.seed=7`. The
    /// profile's name is then the whole text, so that a report says what it ran on.
    pub fn find(spec: &str) -> Result<Profile, ProfileError> {
        let mut items = spec.split('+');
        let mut profile = Profile::find_named(items.next().unwrap_or_default())?;
        for item in items {
            profile
                .set(item)
                .map_err(|message| ProfileError::Malformed {
                    origin: spec.to_string(),
                    message,
                })?;
        }
        profile.name = spec.to_string();
        Ok(profile)
    }

    /// Changes one value: `path=value` sets it (`model.seed=7`, `os.wake_ns=25000`),
    /// `path*factor` scales a number (`cycles.busy_step*0.5`; an integer is rounded), and
    /// `latencies*factor` scales the whole latency table at once, every distance and memory
    /// and the Shared rows, so that their order holds. The profile must still pass its checks.
    pub fn set(&mut self, item: &str) -> Result<(), String> {
        let (path, op, value) = match item.find(['=', '*']) {
            Some(i) => (&item[..i], &item[i..=i], &item[i + 1..]),
            None => return Err(format!("'{item}': expected path=value or path*factor")),
        };
        let factor = || -> Result<f64, String> {
            value
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .ok_or_else(|| format!("'{item}': the factor must be a number from 0"))
        };
        if path == "latencies" {
            if op != "*" {
                return Err("'latencies' is a table: scale it (latencies*2)".into());
            }
            let f = factor()?;
            let c = &mut self.cycles;
            for x in [
                &mut c.smt,
                &mut c.die,
                &mut c.package,
                &mut c.hop1,
                &mut c.hop2,
                &mut c.hop3,
                &mut c.memory,
            ] {
                *x *= f;
            }
            for row in [
                &mut c.load_from_shared,
                &mut c.store_on_shared,
                &mut c.atomic_on_shared,
            ]
            .into_iter()
            .flatten()
            {
                for x in [
                    &mut row.die,
                    &mut row.package,
                    &mut row.hop1,
                    &mut row.hop2,
                    &mut row.hop3,
                ] {
                    *x *= f;
                }
            }
            return self.check();
        }
        let mut root = toml::Value::try_from(&*self).map_err(|e| e.to_string())?;
        let model = toml::Value::try_from(Model::default()).map_err(|e| e.to_string())?;
        let (parents, leaf) = match path.rsplit_once('.') {
            Some((parents, leaf)) => (parents.split('.').collect::<Vec<_>>(), leaf),
            None => (Vec::new(), path),
        };
        let mut table = root.as_table_mut().ok_or("a profile is a table")?;
        // The model's section is left out of a profile's text when it is the default.
        table.entry("model").or_insert(model);
        for key in parents {
            table = table
                .get_mut(key)
                .and_then(toml::Value::as_table_mut)
                .ok_or_else(|| format!("'{path}': a profile has no table '{key}'"))?;
        }
        let new = if op == "=" {
            let parsed: toml::Table = toml::from_str(&format!("x = {value}"))
                .map_err(|_| format!("'{item}': '{value}' is not a TOML value"))?;
            parsed["x"].clone()
        } else {
            let f = factor()?;
            match table.get(leaf) {
                Some(toml::Value::Float(x)) => toml::Value::Float(x * f),
                Some(toml::Value::Integer(x)) => {
                    toml::Value::Integer((*x as f64 * f).round() as i64)
                }
                Some(_) => return Err(format!("'{path}' is not a number to scale")),
                None => return Err(format!("'{path}': the profile has no such value to scale")),
            }
        };
        table.insert(leaf.to_string(), new);
        let mut changed: Profile = root
            .try_into()
            .map_err(|e: toml::de::Error| format!("'{item}': {}", e.to_string().trim()))?;
        changed.check()?;
        changed.name = std::mem::take(&mut self.name);
        *self = changed;
        Ok(())
    }

    /// A built-in profile, or `this` from the profile directory, by its name alone.
    fn find_named(name: &str) -> Result<Profile, ProfileError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name) {
            return Profile::parse(text, name);
        }
        if name == THIS {
            let path = this_path();
            if path.exists() {
                let text = std::fs::read_to_string(&path).map_err(|source| ProfileError::Read {
                    path: path.clone(),
                    source,
                })?;
                return Profile::parse(&text, &path.display().to_string());
            }
        }
        let mut known: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
        known.push(THIS);
        Err(ProfileError::Unknown {
            name: name.to_string(),
            known: known.join(", "),
            hint: if name == THIS {
                "; write this machine's profile to $PGLOCKS_PROFILE_DIR/this.toml (or ~/.config/pglocks/profiles/this.toml) first"
            } else {
                ""
            },
        })
    }

    /// The names of every profile `find` knows, with `this` last if its file exists.
    pub fn names() -> Vec<String> {
        let mut v: Vec<String> = BUILT_IN.iter().map(|(n, _)| n.to_string()).collect();
        if this_path().exists() {
            v.push(THIS.to_string());
        }
        v
    }

    /// One `busy_work` step in this machine's cycles: `cycles.busy_step` if the profile measured
    /// it, else the reference machine's step over `core_speed`.
    pub fn busy_step(&self) -> f64 {
        let reference_ns = 1000.0 / REFERENCE_BUSY_STEPS_PER_US as f64;
        self.measured_or_scaled(self.cycles.busy_step, reference_ns)
    }

    /// A private cost in this machine's cycles: `measured` if the profile measured it on the
    /// machine itself, else the reference machine's `reference_ns` over `core_speed` (0 with
    /// neither).
    fn measured_or_scaled(&self, measured: Option<f64>, reference_ns: f64) -> f64 {
        match (measured, self.core_speed) {
            (Some(cycles), _) => cycles,
            (None, Some(speed)) => reference_ns / speed * self.ghz,
            (None, None) => 0.0,
        }
    }

    /// The charge per shim operation in this machine's cycles: `cycles.local` if the profile
    /// fitted it, else the reference machine's ([`REFERENCE_LOCAL_NS`]) over `core_speed`.
    pub fn local(&self) -> f64 {
        self.measured_or_scaled(self.cycles.local, REFERENCE_LOCAL_NS)
    }

    /// One unit of kernel `k` in this machine's cycles: `cycles.kernels` if the profile
    /// measured them, else the reference machine's ([`REFERENCE_KERNEL_NS`]) over
    /// `core_speed`.
    pub fn kernel(&self, k: Kernel) -> f64 {
        let measured = self.cycles.kernels.map(|m| m.of(k));
        self.measured_or_scaled(measured, REFERENCE_KERNEL_NS.of(k))
    }

    /// The profile as TOML text (the form of a profile file).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    fn check(&self) -> Result<(), String> {
        let t = &self.topology;
        for (what, n) in [
            ("sockets", t.sockets),
            ("dies_per_socket", t.dies_per_socket),
            ("cores_per_die", t.cores_per_die),
            ("threads_per_core", t.threads_per_core),
            ("nodes_per_socket", t.nodes_per_socket),
        ] {
            if n == 0 {
                return Err(format!("topology.{what} must be at least 1"));
            }
        }
        if t.dies_per_socket % t.nodes_per_socket != 0 {
            return Err("topology.nodes_per_socket must divide dies_per_socket".into());
        }
        if self.cpu_count() > MAX_CPUS {
            return Err(format!(
                "{} CPUs; a profile may have at most {MAX_CPUS}",
                self.cpu_count()
            ));
        }
        if !t.socket_hops.is_empty() {
            let n = t.sockets as usize;
            if t.socket_hops.len() != n || t.socket_hops.iter().any(|r| r.len() != n) {
                return Err(format!("topology.socket_hops must be {n} rows of {n}"));
            }
            for (i, row) in t.socket_hops.iter().enumerate() {
                for (j, &h) in row.iter().enumerate() {
                    if (i == j) != (h == 0) || h != t.socket_hops[j][i] {
                        return Err(
                            "topology.socket_hops must be symmetric, 0 exactly on the diagonal"
                                .into(),
                        );
                    }
                }
            }
        }
        if !(self.line_bytes == 64 || self.line_bytes == 128) {
            return Err("line_bytes must be 64 or 128".into());
        }
        let c = &self.cycles;
        let all = [
            c.hit,
            c.atomic,
            c.smt,
            c.die,
            c.package,
            c.hop1,
            c.hop2,
            c.hop3,
            c.memory,
            c.pause,
            c.fence,
            c.busy_step.unwrap_or(0.0),
            c.local.unwrap_or(0.0),
        ]
        .into_iter()
        .chain(Kernel::ALL.map(|k| c.kernels.map_or(0.0, |m| m.of(k))));
        if !(self.ghz > 0.0 && self.ghz < 100.0) {
            return Err("ghz must be between 0 and 100".into());
        }
        if all
            .into_iter()
            .any(|x| !(x.is_finite() && (0.0..1e9).contains(&x)))
        {
            return Err("every cycles.* cost must be a number from 0 to 1e9".into());
        }
        if !(c.occupancy > 0.0 && c.occupancy <= 1.0) {
            return Err("cycles.occupancy must be in (0, 1]".into());
        }
        if !(1..=64).contains(&c.outstanding_misses) {
            return Err("cycles.outstanding_misses must be in 1..=64".into());
        }
        if c.store_buffer > 256 {
            return Err("cycles.store_buffer must be at most 256".into());
        }
        if !(c.smt_speed >= 0.1 && c.smt_speed <= 1.0) {
            return Err("cycles.smt_speed must be in [0.1, 1]".into());
        }
        match (c.busy_step, self.core_speed) {
            (Some(_), Some(_)) => {
                return Err("give cycles.busy_step (measured here) or core_speed, not both".into())
            }
            (None, None) => {
                return Err("give cycles.busy_step or core_speed (the core's speed against the reference machine)".into())
            }
            (None, Some(s)) if !(s > 0.0 && s <= 100.0) => {
                return Err("core_speed must be above 0 and at most 100".into())
            }
            _ => {}
        }
        if c.kernels.is_some() && self.core_speed.is_some() {
            return Err("give cycles.kernels (measured here) or core_speed, not both".into());
        }
        if let Some(own) = c.caches {
            for (what, kib, ways) in [
                ("l1", own.l1_kib, own.l1_ways),
                ("l2", own.l2_kib, own.l2_ways),
            ] {
                if OwnCaches::sets(kib, ways, self.line_bytes).is_none() {
                    return Err(format!(
                        "cycles.caches.{what}_kib must hold a whole number of {what}_ways-way sets of {}-byte lines",
                        self.line_bytes
                    ));
                }
            }
            if !(own.l1_kib <= own.l2_kib && own.l2_kib <= 1 << 20) {
                return Err(
                    "cycles.caches: the L2 must be at least the L1, and at most 1 GiB".into(),
                );
            }
            if !(own.l2.is_finite()
                && own.llc.is_finite()
                && c.hit <= own.l2
                && own.l2 <= own.llc
                && own.llc < 1e9)
            {
                return Err(
                    "cycles.caches: l2 must be at least cycles.hit, and llc at least l2".into(),
                );
            }
        }
        let m = &self.model;
        if !(0.0..1.0).contains(&m.jitter) {
            return Err("model.jitter must be in [0, 1)".into());
        }
        if !(0.0..=1.0).contains(&m.answer_at) {
            return Err("model.answer_at must be in [0, 1]".into());
        }
        if !(m.preempt_every_us.is_finite() && m.preempt_every_us >= 0.0) {
            return Err(
                "model.preempt_every_us must be a number from 0 (0: no preemptions)".into(),
            );
        }
        let o = &self.os;
        let os = [
            o.syscall_ns,
            o.wake_ns,
            o.context_switch_ns,
            o.quantum_us,
            o.timer_slack_ns,
        ];
        if os.iter().any(|x| !(x.is_finite() && *x >= 0.0 && *x < 1e9)) || o.quantum_us <= 0.0 {
            return Err("every os.* cost must be a number from 0 to 1e9 (quantum above 0)".into());
        }
        Ok(())
    }

    /// Logical CPUs.
    pub fn cpu_count(&self) -> usize {
        let t = &self.topology;
        (t.sockets * t.dies_per_socket * t.cores_per_die * t.threads_per_core) as usize
    }

    /// Physical cores.
    pub fn core_count(&self) -> usize {
        let t = &self.topology;
        (t.sockets * t.dies_per_socket * t.cores_per_die) as usize
    }

    /// NUMA nodes: `nodes_per_socket` on each socket.
    pub fn numa_nodes(&self) -> usize {
        (self.topology.sockets * self.topology.nodes_per_socket) as usize
    }

    /// Where every CPU is, indexed by CPU id.
    pub fn cpus(&self) -> Vec<CpuPlace> {
        let t = &self.topology;
        let cores = self.core_count();
        let (per_socket, dies_per_node) = (
            (t.dies_per_socket * t.cores_per_die) as usize,
            (t.dies_per_socket / t.nodes_per_socket) as usize,
        );
        (0..self.cpu_count())
            .map(|cpu| {
                let (core, smt) = match t.numbering {
                    Numbering::SiblingsLast => (cpu % cores, cpu / cores),
                    Numbering::SiblingsAdjacent => (
                        cpu / t.threads_per_core as usize,
                        cpu % t.threads_per_core as usize,
                    ),
                };
                let socket = core / per_socket;
                let die = core / t.cores_per_die as usize;
                let die_in_socket = die % t.dies_per_socket as usize;
                CpuPlace {
                    socket,
                    die,
                    core,
                    smt,
                    core_in_socket: core % per_socket,
                    node: socket * t.nodes_per_socket as usize + die_in_socket / dies_per_node,
                }
            })
            .collect()
    }

    /// Interconnect hops between two packages.
    pub fn hops(&self, a: usize, b: usize) -> u32 {
        if a == b {
            0
        } else if self.topology.socket_hops.is_empty() {
            1
        } else {
            self.topology.socket_hops[a][b]
        }
    }

    /// One description line: "4 sockets × 2 dies × 6 cores, 48 CPUs, 2.1 GHz".
    pub fn describe(&self) -> String {
        let t = &self.topology;
        let smt = if t.threads_per_core > 1 {
            format!(" × {} threads", t.threads_per_core)
        } else {
            String::new()
        };
        let dies = if t.dies_per_socket > 1 {
            format!(" × {} dies", t.dies_per_socket)
        } else {
            String::new()
        };
        format!(
            "{} sockets{dies} × {} cores{smt}, {} CPUs, {} GHz",
            t.sockets,
            t.cores_per_die,
            self.cpu_count(),
            self.ghz
        )
    }
}

/// Where one CPU sits in the shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuPlace {
    /// Package.
    pub socket: usize,
    /// Die (last-level-cache domain), numbered over the whole machine.
    pub die: usize,
    /// Physical core, numbered over the whole machine.
    pub core: usize,
    /// The core's index within its package (Linux's `core_id`).
    pub core_in_socket: usize,
    /// Rank among the core's hardware threads (0 first).
    pub smt: usize,
    /// NUMA node.
    pub node: usize,
}

/// Where `this.toml` is read from: `$PGLOCKS_PROFILE_DIR`, else
/// `$XDG_CONFIG_HOME/pglocks/profiles`, else `~/.config/pglocks/profiles`, else
/// `./.pglocks/profiles`.
pub fn this_path() -> PathBuf {
    profile_dir().join(format!("{THIS}.toml"))
}

fn profile_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(PROFILE_DIR_VAR).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Path::new(&d).join("pglocks/profiles");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return Path::new(&h).join(".config/pglocks/profiles");
    }
    PathBuf::from(".pglocks/profiles")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_parses_and_has_sources() {
        for (name, text) in BUILT_IN {
            let p = Profile::parse(text, name).unwrap();
            assert_eq!(&p.name, name);
            assert!(!p.sources.is_empty(), "{name} cites no source");
            assert_eq!(p.cpus().len(), p.cpu_count());
            let highest = p.cpus().iter().map(|c| c.node).max().unwrap();
            assert_eq!(p.numa_nodes(), highest + 1, "{name}'s nodes");
        }
    }

    #[test]
    fn siblings_last_numbering_pairs_cpu_c_with_c_plus_cores() {
        let p = Profile::find("xeon-2s").unwrap();
        let cpus = p.cpus();
        assert_eq!((p.cpu_count(), p.core_count()), (128, 64));
        assert_eq!(cpus[3].core, cpus[67].core);
        assert_eq!((cpus[3].smt, cpus[67].smt), (0, 1));
        assert_eq!(cpus[31].socket, 0);
        assert_eq!(cpus[32].socket, 1);
        let w = Profile::find("westmere-80").unwrap();
        assert_eq!((w.cpu_count(), w.cpus()[10].socket), (80, 1));
        let o = Profile::find("opteron-48").unwrap();
        let oc = o.cpus();
        assert_eq!(
            (oc[5].die, oc[6].die, oc[6].socket, oc[12].socket),
            (0, 1, 0, 1)
        );
        assert_eq!((oc[5].node, oc[6].node, oc[12].node), (0, 1, 2));
    }

    #[test]
    fn a_profile_written_out_reads_back_the_same() {
        for (name, _) in BUILT_IN {
            let p = Profile::find(name).unwrap();
            assert_eq!(Profile::parse(&p.to_toml(), "copy").unwrap(), p);
        }
    }

    #[test]
    fn a_kernel_costs_the_reference_machines_time_over_the_core_speed_unless_measured() {
        let w = Profile::find("westmere-80").unwrap();
        let speed = w.core_speed.unwrap();
        for k in Kernel::ALL {
            let want = REFERENCE_KERNEL_NS.of(k) / speed * w.ghz;
            assert!((w.kernel(k) - want).abs() < 1e-9, "{}", k.name());
        }
        let mut measured = w.clone();
        measured.core_speed = None;
        measured.cycles.busy_step = Some(0.3);
        measured.cycles.kernels = Some(Kernels {
            hash: 4.0,
            crc: 0.3,
            scan: 0.2,
            probe: 10.0,
        });
        assert_eq!(measured.kernel(Kernel::Hash), 4.0);
        assert_eq!(measured.kernel(Kernel::Scan), 0.2);
        assert_eq!(Profile::parse(&measured.to_toml(), "x").unwrap(), measured);
        // A profile that measured its kernels does not also scale the reference machine's.
        measured.core_speed = Some(1.0);
        measured.cycles.busy_step = None;
        let e = Profile::parse(&measured.to_toml(), "x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cycles.kernels (measured here) or core_speed"),
            "{e}"
        );
    }

    #[test]
    fn settings_after_a_profiles_name_change_its_values() {
        let base = Profile::find("westmere-80").unwrap();
        let p = Profile::find("westmere-80+cycles.fence*2+model.seed=7+os.wake_ns=25000").unwrap();
        assert_eq!(
            p.name,
            "westmere-80+cycles.fence*2+model.seed=7+os.wake_ns=25000"
        );
        assert_eq!(p.cycles.fence, 2.0 * base.cycles.fence);
        assert_eq!((p.model.seed, p.os.wake_ns), (7, 25000.0));
        assert_eq!(p.model.jitter, base.model.jitter);
        // An integer stays one.
        let p = Profile::find("westmere-80+cycles.outstanding_misses*0.45").unwrap();
        assert_eq!(p.cycles.outstanding_misses, 5);
        // The latency table scales whole; the core's own costs do not move.
        let p = Profile::find("westmere-80+latencies*0.5").unwrap();
        assert_eq!(p.cycles.hop2, base.cycles.hop2 / 2.0);
        assert_eq!(p.cycles.memory, base.cycles.memory / 2.0);
        let (row, was) = (p.cycles.store_on_shared, base.cycles.store_on_shared);
        assert_eq!(row.unwrap().hop1, was.unwrap().hop1 / 2.0);
        assert_eq!(
            (p.cycles.hit, p.cycles.atomic),
            (base.cycles.hit, base.cycles.atomic)
        );
        // Setting a value to what it was changes nothing but the name.
        let mut same = Profile::find(&format!("westmere-80+model.seed={}", Model::SEED)).unwrap();
        same.name = base.name.clone();
        assert_eq!(same, base);
        for (bad, says) in [
            ("westmere-80+cycles.fense=3", "fense"),
            ("westmere-80+cycles.fence", "expected path=value"),
            ("westmere-80+cycles.fence*x", "factor"),
            ("westmere-80+model.jitter=1.5", "model.jitter"),
            ("westmere-80+nosuch.thing=1", "no table 'nosuch'"),
            ("westmere-80+latencies=2", "scale it"),
            ("westmere-80+summary*2", "not a number"),
        ] {
            let e = Profile::find(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_busy_work_step_is_the_reference_machines_over_the_cores_speed() {
        let w = Profile::find("westmere-80").unwrap();
        // 1/7,300 µs on the reference machine; the Westmere core at 0.32 of its speed, 2.13 GHz.
        let step = 1000.0 / 7300.0 / 0.32 * 2.13;
        assert!((w.busy_step() - step).abs() < 1e-9, "{}", w.busy_step());
        let faster = Profile::find("westmere-80+core_speed*2").unwrap();
        assert!((faster.busy_step() - step / 2.0).abs() < 1e-9);
        // A measured step is used as it is; a profile gives one or the other.
        let measured = Profile::find("westmere-80+cycles.busy_step=0.3");
        let e = measured.unwrap_err().to_string();
        assert!(e.contains("not both"), "{e}");
        let mut p = w.clone();
        (p.core_speed, p.cycles.busy_step) = (None, Some(0.3));
        assert_eq!(p.busy_step(), 0.3);
        p.cycles.busy_step = None;
        let e = Profile::parse(&p.to_toml(), "t").unwrap_err().to_string();
        assert!(e.contains("give cycles.busy_step or core_speed"), "{e}");
    }

    #[test]
    fn every_unsourced_value_a_profile_lists_is_one_it_can_scale() {
        for name in Profile::names() {
            let p = Profile::find(&name).unwrap();
            for path in &p.unsourced {
                let mut q = p.clone();
                q.set(&format!("{path}*1"))
                    .unwrap_or_else(|e| panic!("{name}: {path}: {e}"));
            }
        }
        assert!(Profile::find("westmere-80")
            .unwrap()
            .unsourced
            .contains(&"cycles.fence".to_string()));
    }

    #[test]
    fn malformed_profiles_are_errors_that_say_what_is_wrong() {
        let text = BUILT_IN[0].1.replace("sockets = 4", "sockets = 0");
        let e = Profile::parse(&text, "x").unwrap_err().to_string();
        assert!(e.contains("topology.sockets must be at least 1"), "{e}");
        let e = Profile::parse("name = 3", "x").unwrap_err().to_string();
        assert!(e.starts_with("malformed machine profile x:"), "{e}");
        let e = Profile::find("nope").unwrap_err().to_string();
        assert!(e.contains("known: opteron-48"), "{e}");
    }

    #[test]
    fn the_haswell_machines_have_two_threads_a_core_numbered_siblings_last() {
        // 2 x 18-core E5-2699 v3: cpu c and c + 36 share a core; cpus 0-17 are package 0.
        let ep = Profile::find("haswell-ep-2s").unwrap();
        let cpus = ep.cpus();
        assert_eq!((ep.cpu_count(), ep.core_count()), (72, 36));
        assert_eq!(cpus[5].core, cpus[41].core);
        assert_eq!((cpus[5].smt, cpus[41].smt), (0, 1));
        assert_eq!(
            (cpus[17].socket, cpus[18].socket, cpus[53].socket),
            (0, 1, 0)
        );
        assert_eq!((cpus[17].node, cpus[18].node), (0, 1));
        assert_eq!(ep.hops(0, 1), 1);
        // 4 x 18-core E7-8890 v3: cpu c and c + 72 share a core; every pair of packages is one
        // hop apart.
        let ex = Profile::find("haswell-ex-4s").unwrap();
        let cpus = ex.cpus();
        assert_eq!((ex.cpu_count(), ex.core_count()), (144, 72));
        assert_eq!(cpus[60].core, cpus[132].core);
        assert_eq!((cpus[60].smt, cpus[132].smt), (0, 1));
        assert_eq!(
            (cpus[53].socket, cpus[54].socket, cpus[143].socket),
            (2, 3, 3)
        );
        for a in 0..4 {
            for b in 0..4 {
                assert_eq!(ex.hops(a, b), u32::from(a != b));
            }
        }
    }
}
