//! CPU / NUMA topology discovery and the order in which benchmark threads are
//! pinned to CPUs.
//!
//! The topology is read from a sysfs tree ([`Topology::from_sysfs`], used by
//! the tests with committed fixtures) or from the running machine
//! ([`Topology::detect`]). Every logical CPU is described by its NUMA node,
//! package (socket), core id and *SMT rank*: its position among the usable
//! hardware threads of its physical core (0 = the lowest cpu id among the
//! core's `thread_siblings_list`, 1 = the next one, ...).
//!
//! # Pinning policies
//!
//! [`Topology::pin_order`] turns a [`PinPolicy`] into a list of cpu ids;
//! thread `i` of a benchmark runs on `order[i % order.len()]`
//! ([`cpu_for_thread`]), so threads beyond the number of cpus wrap around.
//!
//! * `compact` fills one NUMA node at a time, in ascending node id. Inside a
//!   node it first takes one hardware thread of every physical core (SMT rank
//!   0, ascending cpu id), then the rank-1 siblings, and so on. A two-socket
//!   SMT machine therefore gets all physical cores of socket 0, then their SMT
//!   siblings, then socket 1. This keeps lock traffic inside one node for as
//!   long as possible and avoids sharing a core before every core is busy.
//! * `scatter` deals cpus out round-robin over the nodes: the first cpu of
//!   each node's compact order, then the second of each, ... Nodes with fewer
//!   cpus drop out of the rotation once exhausted. This crosses the
//!   interconnect as early as possible.
//! * `node:N` uses only node `N`'s cpus, in that node's compact order.
//! * `none` yields an empty order: threads are not pinned at all.
//!
//! # Why the topology is read once, before pinning
//!
//! [`Topology::detect`] restricts the topology to the process's allowed cpu
//! set (e.g. from `taskset` or a cgroup cpuset). That set is obtained with
//! `sched_getaffinity` on the *calling thread*, so it changes as soon as the
//! thread is pinned: detecting after pinning would see a single cpu. Call
//! `detect()` once, on a thread that has not been pinned yet, and hand the
//! resulting [`Topology`] (or its pin order) to the worker threads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use pglocks_sync::cpulist::{format_cpulist, parse_cpulist, CpulistError};

/// Model name used when none can be found.
const UNKNOWN_MODEL: &str = "unknown";

/// One logical CPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cpu {
    /// Logical cpu id, as used by the kernel and `sched_setaffinity`.
    pub id: usize,
    /// NUMA node the cpu belongs to (0 on non-NUMA kernels).
    pub node: usize,
    /// Physical package (socket), from `physical_package_id`.
    pub package: usize,
    /// `core_id` from sysfs (the core's index within its package).
    pub core: usize,
    /// Position among the usable hardware threads of the physical core:
    /// 0 = lowest cpu id in `thread_siblings_list`, 1 = second, ...
    pub smt_rank: usize,
}

/// One NUMA node that has at least one usable cpu.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Node {
    /// NUMA node id.
    pub id: usize,
    /// Usable cpus of this node, ascending.
    pub cpus: Vec<usize>,
}

/// The usable cpus of a machine, grouped into NUMA nodes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Topology {
    /// Usable cpus, sorted by id.
    pub cpus: Vec<Cpu>,
    /// Nodes with at least one usable cpu, sorted by id.
    pub nodes: Vec<Node>,
    /// CPU model name, or `"unknown"`.
    pub model: String,
}

/// How benchmark threads are placed on cpus; see the [module docs](self).
///
/// Parses from and displays as `compact`, `scatter`, `node:N` or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinPolicy {
    /// Fill node by node; physical cores before their SMT siblings.
    Compact,
    /// Round-robin over the nodes, each in its compact order.
    Scatter,
    /// Only the given node's cpus, in compact order.
    Node(usize),
    /// Do not pin threads.
    None,
}

/// Errors from reading a topology or choosing a pin order.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// A sysfs file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A sysfs file holds a malformed cpu list.
    #[error("malformed cpu list in {}: {source}", path.display())]
    Cpulist {
        /// The file.
        path: PathBuf,
        /// What was wrong with its contents.
        source: CpulistError,
    },
    /// A sysfs file holds something other than a non-negative integer.
    #[error("malformed number in {}: {text:?}", path.display())]
    Number {
        /// The file.
        path: PathBuf,
        /// Its (trimmed) contents.
        text: String,
    },
    /// `node:N` named a node that has no usable cpus or does not exist.
    #[error("unknown NUMA node {node}; valid nodes: {}", join_ids(valid))]
    UnknownNode {
        /// The requested node.
        node: usize,
        /// The nodes that do exist.
        valid: Vec<usize>,
    },
    /// A pin policy string was not recognised.
    #[error("invalid pin policy {text:?}; valid choices: compact, scatter, node:N, none")]
    BadPolicy {
        /// The offending text.
        text: String,
    },
    /// No usable cpu was found (none online, or none in the allowed set).
    #[error("no usable cpus found")]
    NoCpus,
}

/// Joins ids with `", "` (for error messages).
fn join_ids(ids: &[usize]) -> String {
    if ids.is_empty() {
        return "(none)".to_string();
    }
    let strs: Vec<String> = ids.iter().map(usize::to_string).collect();
    strs.join(", ")
}

/// The cpu that benchmark thread `thread` runs on: `order[thread % len]`, so
/// threads beyond the number of cpus wrap around. `None` for an empty order
/// (i.e. [`PinPolicy::None`]: do not pin).
pub fn cpu_for_thread(order: &[usize], thread: usize) -> Option<usize> {
    if order.is_empty() {
        return None;
    }
    order.get(thread % order.len()).copied()
}

/// Pins the calling thread to `cpu`. Returns whether the kernel accepted it.
///
/// Once pinned, the thread's affinity mask is that single cpu, so call
/// [`Topology::detect`] before pinning (see the [module docs](self)).
pub fn pin_current_thread(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

impl FromStr for PinPolicy {
    type Err = TopologyError;

    /// Parses `compact`, `scatter`, `node:N` or `none` (case-sensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || TopologyError::BadPolicy {
            text: s.to_string(),
        };
        match s {
            "compact" => Ok(Self::Compact),
            "scatter" => Ok(Self::Scatter),
            "none" => Ok(Self::None),
            _ => {
                let n = s.strip_prefix("node:").ok_or_else(bad)?;
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                n.parse().map(Self::Node).map_err(|_| bad())
            }
        }
    }
}

impl fmt::Display for PinPolicy {
    /// Writes the same text [`FromStr`] accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Compact => f.write_str("compact"),
            Self::Scatter => f.write_str("scatter"),
            Self::Node(n) => write!(f, "node:{n}"),
            Self::None => f.write_str("none"),
        }
    }
}

impl Topology {
    /// Reads the topology from a sysfs tree; `root` plays the role of `/sys`.
    ///
    /// Reads `devices/system/cpu/online`, each online cpu's
    /// `devices/system/cpu/cpuN/topology/{physical_package_id,core_id,
    /// thread_siblings_list}` and each `devices/system/node/nodeN/cpulist`.
    /// Without a `devices/system/node` directory (non-NUMA kernel) every cpu
    /// is on node 0, as is any cpu no node lists. A missing topology file (or
    /// a value of `-1`) makes the cpu its own core: package 0, core = cpu id,
    /// no siblings. The model comes from `root/pglocks-model` (fixtures only),
    /// else `"unknown"`.
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        SysfsTopology::read(root)?.build(None)
    }

    /// The topology of a simulated machine: what its sysfs tree would say
    /// (package, core id within the package, thread siblings, NUMA node), built
    /// from the profile's regular shape, so that pin orders on it are computed
    /// by the same code as on a real machine. The model is the profile's
    /// summary.
    pub fn from_profile(profile: &pglocks_sim::Profile) -> Result<Topology, TopologyError> {
        let places = profile.cpus();
        let cpus = places
            .iter()
            .enumerate()
            .map(|(id, p)| SysfsCpu {
                id,
                package: p.socket,
                core: p.core_in_socket,
                siblings: places
                    .iter()
                    .enumerate()
                    .filter(|(_, q)| q.core == p.core)
                    .map(|(i, _)| i)
                    .collect(),
            })
            .collect();
        SysfsTopology {
            cpus,
            node_of: places
                .iter()
                .enumerate()
                .map(|(id, p)| (id, p.node))
                .collect(),
            model: profile.summary.clone(),
        }
        .build(None)
    }

    /// Reads the running machine's topology from `/sys`, restricted to the
    /// cpus the calling thread may currently run on.
    ///
    /// The allowed set is read once, here, with `sched_getaffinity` (via
    /// `core_affinity::get_core_ids`), which reports the *calling thread's*
    /// mask: call this before any thread is pinned, or the result shrinks to
    /// the pinned cpu. If the mask cannot be read, all online cpus are kept.
    /// The model is the first `model name` in `/proc/cpuinfo`, else
    /// `"unknown"`.
    pub fn detect() -> Result<Topology, TopologyError> {
        let allowed: Option<BTreeSet<usize>> =
            core_affinity::get_core_ids().map(|ids| ids.into_iter().map(|core| core.id).collect());
        let mut raw = SysfsTopology::read(Path::new("/sys"))?;
        if let Some(model) = cpuinfo_model() {
            raw.model = model;
        }
        raw.build(allowed.as_ref())
    }

    /// Number of logical cpus (hardware threads).
    pub fn logical_cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Number of physical cores with at least one usable hardware thread.
    pub fn physical_cores(&self) -> usize {
        self.cpus.iter().filter(|cpu| cpu.smt_rank == 0).count()
    }

    /// Number of distinct packages (sockets).
    pub fn packages(&self) -> usize {
        let packages: BTreeSet<usize> = self.cpus.iter().map(|cpu| cpu.package).collect();
        packages.len()
    }

    /// The cpu ids threads are placed on, in order; thread `i` goes to
    /// `order[i % order.len()]` (see [`cpu_for_thread`]).
    ///
    /// [`PinPolicy::None`] gives an empty order (do not pin);
    /// [`PinPolicy::Node`] with a node that has no usable cpus is an error
    /// listing the valid nodes.
    pub fn pin_order(&self, policy: PinPolicy) -> Result<Vec<usize>, TopologyError> {
        match policy {
            PinPolicy::Compact => Ok(self
                .nodes
                .iter()
                .flat_map(|node| self.node_compact_order(node.id))
                .collect()),
            PinPolicy::Scatter => Ok(round_robin(
                self.nodes
                    .iter()
                    .map(|node| self.node_compact_order(node.id))
                    .collect(),
            )),
            PinPolicy::Node(id) => {
                if !self.nodes.iter().any(|node| node.id == id) {
                    return Err(TopologyError::UnknownNode {
                        node: id,
                        valid: self.nodes.iter().map(|node| node.id).collect(),
                    });
                }
                Ok(self.node_compact_order(id))
            }
            PinPolicy::None => Ok(Vec::new()),
        }
    }

    /// Human-readable summary for `pglocks topology`: model, counts, one line
    /// per node, and the pin order for `policy`.
    pub fn describe(&self, policy: PinPolicy) -> String {
        let mut out = format!("model: {}\n", self.model);
        out.push_str(&format!(
            "nodes: {}, packages: {}, physical cores: {}, logical cpus: {}, \
             SMT threads per core: {}\n",
            self.nodes.len(),
            self.packages(),
            self.physical_cores(),
            self.logical_cpus(),
            self.smt_threads_text(),
        ));
        for node in &self.nodes {
            out.push_str(&format!(
                "  node {}: {} ({} cpus)\n",
                node.id,
                format_cpulist(&node.cpus),
                node.cpus.len()
            ));
        }
        let order = match self.pin_order(policy) {
            Ok(order) if order.is_empty() => "threads are not pinned".to_string(),
            Ok(order) => format_cpulist(&order),
            Err(err) => format!("error: {err}"),
        };
        out.push_str(&format!("pin order ({policy}): {order}\n"));
        out
    }

    /// Node `node`'s cpus: SMT rank first, then cpu id.
    fn node_compact_order(&self, node: usize) -> Vec<usize> {
        let mut cpus: Vec<&Cpu> = self.cpus.iter().filter(|cpu| cpu.node == node).collect();
        cpus.sort_by_key(|cpu| (cpu.smt_rank, cpu.id));
        cpus.into_iter().map(|cpu| cpu.id).collect()
    }

    /// Hardware threads per physical core: `"2"`, or `"1-2"` when cores
    /// differ (hybrid cpus, partially allowed cores).
    fn smt_threads_text(&self) -> String {
        // The number of cores with at least k+1 threads is the number of cpus
        // of rank k, so a core has exactly k+1 threads where that count drops.
        let max_rank = self.cpus.iter().map(|cpu| cpu.smt_rank).max().unwrap_or(0);
        let at_rank = |rank: usize| self.cpus.iter().filter(|c| c.smt_rank == rank).count();
        let min = (0..=max_rank)
            .find(|&rank| at_rank(rank) > at_rank(rank + 1))
            .map_or(0, |rank| rank + 1);
        let max = max_rank + 1;
        if min == max {
            max.to_string()
        } else {
            format!("{min}-{max}")
        }
    }
}

/// Interleaves lists: first element of each, then the second of each, ...;
/// shorter lists drop out when exhausted.
fn round_robin(lists: Vec<Vec<usize>>) -> Vec<usize> {
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| lists.iter().filter_map(move |list| list.get(i).copied()))
        .collect()
}

/// The first `model name` in `/proc/cpuinfo`, if any.
fn cpuinfo_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim().to_string())
        .filter(|model| !model.is_empty())
}

/// One online cpu as read from sysfs, before filtering and ranking.
struct SysfsCpu {
    id: usize,
    package: usize,
    core: usize,
    siblings: Vec<usize>,
}

/// Everything read from a sysfs tree, before restricting to usable cpus.
struct SysfsTopology {
    cpus: Vec<SysfsCpu>,
    /// cpu id → NUMA node, from the node cpulists.
    node_of: BTreeMap<usize, usize>,
    model: String,
}

impl SysfsTopology {
    /// Reads cpus, nodes and model below `root` (the stand-in for `/sys`).
    fn read(root: &Path) -> Result<Self, TopologyError> {
        let cpu_dir = root.join("devices/system/cpu");
        let online_path = cpu_dir.join("online");
        let online: BTreeSet<usize> = read_cpulist(&online_path)?
            .ok_or_else(|| not_found(&online_path))?
            .into_iter()
            .collect();
        let cpus = online
            .into_iter()
            .map(|id| read_cpu(&cpu_dir.join(format!("cpu{id}/topology")), id))
            .collect::<Result<_, _>>()?;
        let model = read_text(&root.join("pglocks-model"))?
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| UNKNOWN_MODEL.to_string());
        Ok(Self {
            cpus,
            node_of: read_nodes(&root.join("devices/system/node"))?,
            model,
        })
    }

    /// Keeps the cpus in `allowed` (all if `None`), ranks SMT siblings among
    /// the kept cpus and groups them into nodes.
    fn build(self, allowed: Option<&BTreeSet<usize>>) -> Result<Topology, TopologyError> {
        let usable: BTreeSet<usize> = self
            .cpus
            .iter()
            .map(|cpu| cpu.id)
            .filter(|id| allowed.map_or(true, |set| set.contains(id)))
            .collect();
        let cpus: Vec<Cpu> = self
            .cpus
            .iter()
            .filter(|cpu| usable.contains(&cpu.id))
            .map(|cpu| Cpu {
                id: cpu.id,
                node: self.node_of.get(&cpu.id).copied().unwrap_or(0),
                package: cpu.package,
                core: cpu.core,
                smt_rank: cpu
                    .siblings
                    .iter()
                    .filter(|&&s| s < cpu.id && usable.contains(&s))
                    .count(),
            })
            .collect();
        if cpus.is_empty() {
            return Err(TopologyError::NoCpus);
        }
        let mut nodes: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for cpu in &cpus {
            nodes.entry(cpu.node).or_default().push(cpu.id);
        }
        let nodes = nodes
            .into_iter()
            .map(|(id, cpus)| Node { id, cpus })
            .collect();
        Ok(Topology {
            cpus,
            nodes,
            model: self.model,
        })
    }
}

/// Reads one cpu's topology directory, falling back to "own core, package 0"
/// for missing files or `-1` values.
fn read_cpu(topology_dir: &Path, id: usize) -> Result<SysfsCpu, TopologyError> {
    let package = read_number(&topology_dir.join("physical_package_id"))?;
    let core = read_number(&topology_dir.join("core_id"))?;
    let siblings = read_cpulist(&topology_dir.join("thread_siblings_list"))?;
    Ok(SysfsCpu {
        id,
        package: package.unwrap_or(0),
        core: core.unwrap_or(id),
        siblings: siblings.unwrap_or_else(|| vec![id]),
    })
}

/// Maps each cpu listed in `node_dir/nodeN/cpulist` to `N` (lowest node wins
/// if a cpu is listed twice). A missing `node_dir` gives an empty map.
fn read_nodes(node_dir: &Path) -> Result<BTreeMap<usize, usize>, TopologyError> {
    let entries = match std::fs::read_dir(node_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => return Err(io_error(node_dir, source)),
    };
    let mut node_ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| io_error(node_dir, source))?;
        let name = entry.file_name();
        let id = name.to_str().and_then(|n| n.strip_prefix("node"));
        if let Some(Ok(id)) = id
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .map(str::parse)
        {
            node_ids.push(id);
        }
    }
    node_ids.sort_unstable();
    let mut node_of = BTreeMap::new();
    for node in node_ids {
        let path = node_dir.join(format!("node{node}/cpulist"));
        for cpu in read_cpulist(&path)?.unwrap_or_default() {
            node_of.entry(cpu).or_insert(node);
        }
    }
    Ok(node_of)
}

/// Reads a file's text; `None` if it does not exist.
fn read_text(path: &Path) -> Result<Option<String>, TopologyError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(io_error(path, source)),
    }
}

/// Reads a cpu-list file; `None` if it does not exist.
fn read_cpulist(path: &Path) -> Result<Option<Vec<usize>>, TopologyError> {
    let Some(text) = read_text(path)? else {
        return Ok(None);
    };
    parse_cpulist(&text)
        .map(Some)
        .map_err(|source| TopologyError::Cpulist {
            path: path.to_path_buf(),
            source,
        })
}

/// Reads a non-negative integer file; `None` if it is missing or `-1`
/// (the kernel's "unknown").
fn read_number(path: &Path) -> Result<Option<usize>, TopologyError> {
    let Some(text) = read_text(path)? else {
        return Ok(None);
    };
    let text = text.trim();
    if text == "-1" {
        return Ok(None);
    }
    match text.parse::<usize>() {
        Ok(n) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
        _ => Err(TopologyError::Number {
            path: path.to_path_buf(),
            text: text.to_string(),
        }),
    }
}

fn io_error(path: &Path, source: io::Error) -> TopologyError {
    TopologyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn not_found(path: &Path) -> TopologyError {
    io_error(path, io::Error::from(io::ErrorKind::NotFound))
}
