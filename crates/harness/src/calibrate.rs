//! Measuring this machine for the simulator: the costs a machine profile states, timed here.
//!
//! Each figure is the median of several timed batches (or samples), reported with the least
//! and the most of them ([`Spread`]), on threads pinned to the CPUs named (so call it before
//! anything else pins this thread):
//! - `hit`, `atomic`, `pause`, `fence`, `busy_step`: a loop of relaxed loads of a line this
//!   thread owns, of `fetch_add`s on it, of `spin_loop`s, of `SeqCst` fences, and `busy_work`'s
//!   cost per step;
//! - `kernels`: the private kernels' costs per unit (`pglocks_sim::profile::Kernel`), each
//!   timed in the form the models run it: the hash kernel's mix over a lock tag's four words,
//!   CRC-32C over a 64-byte record, a search of 64 xids, an insert, a lookup and a delete in a
//!   backend-local hash table of 8 entries;
//! - `caches`: the core's L1 data cache and L2 (size and ways, from sysfs), and a load's
//!   latency from each of the L2 and the last-level cache: a chase through a random cycle of
//!   lines in a region half the L2's size, and in one four times it (at most half the
//!   last-level cache);
//! - the line transfer between two CPUs: two pinned threads pass a counter back and forth, each
//!   waiting for the other's store. Each pass is two transfers of the line, the writer's taking
//!   it back exclusive and the reader's fetch (the cost model charges both, and Table 2 of the
//!   SOSP'13 study, which the built-in profiles use, measures each alone), so one transfer is a
//!   quarter of the round trip. It stands for every distance class the machine has (a machine
//!   with more than one package measured from two CPUs of one package gets the same figure
//!   across packages: a lower bound);
//! - `syscall_ns`: a `FUTEX_WAKE` nobody waits for;
//! - `wake_ns`: from a semaphore's unlock to the sleeper (pinned to another CPU) running again;
//! - `context_switch_ns`: two threads pinned to one CPU handing a semaphore back and forth, half
//!   the round trip less one wake-up's system calls;
//! - `timer_slack_ns`: what a 100 µs sleep oversleeps by;
//! - `smt_speed`: how fast a private loop runs on one CPU while the other runs one too; on a
//!   two-CPU machine whose CPUs slow each other down (a VM's two vCPUs that the host runs on
//!   one core's two threads, which the guest's topology does not show), the profile makes them
//!   SMT siblings with that speed;
//! - `quantum_us`: the time slice, from two busy threads sharing one CPU: the median run of
//!   one between two times it was off the CPU.
//!
//! Not measured is `local`, the charge for the code between shim operations that no kernel
//! counts, which needs the models' workloads: the command line fits it (`pglocks calibrate`).

use crate::topology::{pin_current_thread, Topology};
use pglocks_sim::profile::{Cycles, Kernels, Numbering, Os, OwnCaches, Shape};
use pglocks_sim::Profile;
use pglocks_sync::atomic::{fence, AtomicU64, Ordering};
use pglocks_sync::{CachePadded, Semaphore};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Batches per figure (the median is kept). Unsourced: a choice of method, not a figure of
/// the machine.
const BATCHES: usize = 7;

/// A measured figure: the median of its samples, and their least and most.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median sample, the figure kept.
    pub median: f64,
    /// The least sample.
    pub least: f64,
    /// The most.
    pub most: f64,
}

impl Spread {
    /// The same spread in other units (ns to cycles, a round trip to one transfer).
    fn map(self, f: impl Fn(f64) -> f64) -> Spread {
        Spread {
            median: f(self.median),
            least: f(self.least),
            most: f(self.most),
        }
    }
}

/// One figure of a profile as measured: what it is, its unit, and its spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The profile's value it sets (`cycles.hit`, `os.wake_ns`).
    pub name: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// The samples' median, least and most, in that unit.
    pub spread: Spread,
    /// How many samples.
    pub samples: usize,
}

/// What [`measure`] found: the profile, and each measured figure with its spread.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The machine's profile (`local` left at 0).
    pub profile: Profile,
    /// The figures behind it, in the order measured.
    pub figures: Vec<Figure>,
}

/// Times `f(n)` for `n` iterations in [`BATCHES`] batches; returns the ns per iteration of
/// each, as a median and a range.
fn per_iteration(n: u64, mut f: impl FnMut(u64)) -> Spread {
    spread(
        (0..BATCHES)
            .map(|_| {
                let t = Instant::now();
                f(n);
                t.elapsed().as_nanos() as f64 / n as f64
            })
            .collect(),
    )
}

fn spread(mut v: Vec<f64>) -> Spread {
    v.sort_by(f64::total_cmp);
    Spread {
        median: v.get(v.len() / 2).copied().unwrap_or(0.0),
        least: v.first().copied().unwrap_or(0.0),
        most: v.last().copied().unwrap_or(0.0),
    }
}

/// The hash kernel's cost per word: [`pglocks_sync::cpu::mix_words`] over four words (a lock
/// tag's), each hash seeded by the one before so that they do not overlap.
fn hash_kernel(scale: u64) -> Spread {
    let mut h = 1;
    per_iteration(1_000_000 / scale, |n| {
        for i in 0..n {
            h = pglocks_sync::cpu::mix_words(h, &[i, 5, 16384, 0x0100]);
        }
        black_box(h);
    })
    .map(|ns| ns / 4.0)
}

/// The CRC kernel's cost per byte: CRC-32C (the crate the WAL model uses) over a 64-byte
/// payload, a small WAL record's.
fn crc_kernel(scale: u64) -> Spread {
    let data = [0x5au8; 64];
    let mut crc = 0;
    per_iteration(1_000_000 / scale, |n| {
        for _ in 0..n {
            crc = crc32c::crc32c_append(crc, black_box(&data));
        }
        black_box(crc);
    })
    .map(|ns| ns / data.len() as f64)
}

/// The scan kernel's cost per entry: a search of 64 xids for one that is not there (a
/// snapshot's `xip`).
fn scan_kernel(scale: u64) -> Spread {
    let xids: Vec<u32> = (1000..1064).collect();
    per_iteration(1_000_000 / scale, |n| {
        for i in 0..n {
            black_box(black_box(&xids).contains(&(i as u32 | 1 << 31)));
        }
    })
    .map(|ns| ns / xids.len() as f64)
}

/// A hasher that takes a key already mixed as its hash code, so that the probe kernel times
/// the table and not the hash (which the hash kernel prices).
#[derive(Default)]
struct Premixed(u64);

impl std::hash::Hasher for Premixed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0 << 8 | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The probe kernel's cost per probe: a backend-local table of 8 entries (a transaction's
/// `LOCALLOCK`s or pinned buffers), each round inserting a key, looking it up, and deleting the
/// key inserted 8 rounds before: three probes.
fn probe_kernel(scale: u64) -> Spread {
    use std::collections::HashMap;
    use std::hash::BuildHasherDefault;
    let key = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut table: HashMap<u64, u64, BuildHasherDefault<Premixed>> = HashMap::default();
    let mut next = 0u64;
    for _ in 0..8 {
        table.insert(key(next), next);
        next += 1;
    }
    per_iteration(1_000_000 / scale, |n| {
        for _ in 0..n {
            table.insert(key(next), next);
            black_box(table.get(&key(black_box(next))));
            black_box(table.remove(&key(next - 8)));
            next += 1;
        }
    })
    .map(|ns| ns / 3.0)
}

/// A data or unified cache of a CPU, as sysfs describes it (`cache/indexN/` under the CPU's
/// directory): its level, its size in KiB and its ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DataCache {
    level: u32,
    kib: u32,
    ways: u32,
}

/// CPU `cpu`'s data and unified caches from the sysfs tree at `root` (which plays `/sys`), in
/// the order sysfs lists them; none where it says nothing.
fn data_caches(root: &std::path::Path, cpu: usize) -> Vec<DataCache> {
    let dir = root.join(format!("devices/system/cpu/cpu{cpu}/cache"));
    let read = |i: usize, f: &str| std::fs::read_to_string(dir.join(format!("index{i}/{f}")));
    (0..8)
        .map_while(|i| read(i, "level").ok().map(|l| (i, l)))
        .filter_map(|(i, level)| {
            let kind = read(i, "type").ok()?;
            if kind.trim() == "Instruction" {
                return None;
            }
            let size = read(i, "size").ok()?;
            let size = size.trim();
            let kib = match size.strip_suffix('K') {
                Some(k) => k.parse::<u32>().ok()?,
                None => size.strip_suffix('M')?.parse::<u32>().ok()? * 1024,
            };
            Some(DataCache {
                level: level.trim().parse().ok()?,
                kib,
                ways: read(i, "ways_of_associativity").ok()?.trim().parse().ok()?,
            })
        })
        .collect()
}

/// A load's latency in a region of `bytes`: a chase through its lines in one random cycle
/// (each line holds the next one's index), in ns a load. In a region twice the size of one
/// cache level and half of the next, most loads miss the first and hit the second.
fn chase(bytes: usize, scale: u64) -> Spread {
    let lines = (bytes / 64).max(2);
    let mut next: Vec<[usize; 8]> = (0..lines).map(|i| [i, 0, 0, 0, 0, 0, 0, 0]).collect();
    // Sattolo's shuffle: one cycle through every line, in an order no prefetcher follows.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..lines).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize;
        let (a, b) = (next[i][0], next[j][0]);
        next[i][0] = b;
        next[j][0] = a;
    }
    let mut at = 0;
    for _ in 0..lines {
        at = next[at][0];
    }
    per_iteration((2_000_000 / scale).max(lines as u64), |n| {
        for _ in 0..n {
            at = next[at][0];
        }
        black_box(at);
    })
}

/// One line transfer between `a` and `b` (a quarter of a round trip of passes), in ns.
fn transfer(a: usize, b: usize, rounds: u64) -> Spread {
    let word = CachePadded::new(AtomicU64::new(0));
    let w = &word;
    let rtts: Vec<f64> = std::thread::scope(|s| {
        s.spawn(move || {
            pin_current_thread(b);
            for k in 0..rounds * BATCHES as u64 {
                while w.load(Ordering::Acquire) != 2 * k + 1 {
                    std::hint::spin_loop();
                }
                w.store(2 * k + 2, Ordering::Release);
            }
        });
        pin_current_thread(a);
        (0..BATCHES as u64)
            .map(|batch| {
                let t = Instant::now();
                for k in batch * rounds..(batch + 1) * rounds {
                    w.store(2 * k + 1, Ordering::Release);
                    while w.load(Ordering::Acquire) != 2 * k + 2 {
                        std::hint::spin_loop();
                    }
                }
                t.elapsed().as_nanos() as f64 / rounds as f64
            })
            .collect()
    });
    spread(rtts).map(|rtt| rtt / 4.0)
}

/// From a semaphore's unlock on `a` to the sleeper on `b` running, in ns; with `same_cpu`,
/// both threads on `a` (a context switch each way).
fn handover(a: usize, b: usize, rounds: usize) -> Spread {
    let (ping, pong) = (Semaphore::new(0), Semaphore::new(0));
    let stamp = AtomicU64::new(0);
    let origin = Instant::now();
    let (ping, pong, stamp) = (&ping, &pong, &stamp);
    let samples: Vec<f64> = std::thread::scope(|s| {
        let sleeper = s.spawn(move || {
            pin_current_thread(b);
            let mut v = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                ping.lock();
                let woke = origin.elapsed().as_nanos() as u64;
                v.push(woke.saturating_sub(stamp.load(Ordering::Acquire)) as f64);
                pong.unlock();
            }
            v
        });
        pin_current_thread(a);
        for _ in 0..rounds {
            // Let the sleeper reach its futex wait.
            std::thread::sleep(Duration::from_micros(300));
            stamp.store(origin.elapsed().as_nanos() as u64, Ordering::Release);
            ping.unlock();
            pong.lock();
        }
        sleeper.join().unwrap_or_default()
    });
    spread(samples)
}

/// How fast a thread on `b` runs a private loop (atomics on a line of its own) while a thread on
/// `a` runs the same loop, against alone: 1 for two cores, about 0.5 for two hardware threads of
/// one core (or two vCPUs the host runs on one).
fn parallel_speed(a: usize, b: usize, n: u64) -> f64 {
    let private = |n: u64| {
        let own = CachePadded::new(AtomicU64::new(0));
        per_iteration(n, |n| {
            for _ in 0..n {
                own.fetch_add(1, Ordering::Relaxed);
            }
        })
        .median
    };
    pin_current_thread(b);
    let alone = private(n);
    let stop = AtomicU64::new(0);
    let together = std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || {
            pin_current_thread(a);
            let own = CachePadded::new(AtomicU64::new(0));
            while stop.load(Ordering::Relaxed) == 0 {
                for _ in 0..1000 {
                    own.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        // Let the other thread start.
        std::thread::sleep(Duration::from_millis(5));
        let t = private(n);
        stop.store(1, Ordering::Relaxed);
        t
    });
    (alone / together).clamp(0.1, 1.0)
}

/// The kernel's time slice when two busy threads share CPU `a`, in µs: each thread spins
/// reading the clock, and a gap of more than 50 µs between two readings is a time it was not
/// running; the median run between gaps is the slice. (The 50 µs is unsourced.)
fn time_slice(a: usize, total: Duration) -> Spread {
    let spin = || {
        pin_current_thread(a);
        let start = Instant::now();
        let (mut last, mut run_from) = (Duration::ZERO, Duration::ZERO);
        let mut runs = Vec::new();
        while last < total {
            let now = start.elapsed();
            if now - last > Duration::from_micros(50) {
                runs.push((last - run_from).as_secs_f64() * 1e6);
                run_from = now;
            }
            last = now;
        }
        runs
    };
    let runs: Vec<f64> = std::thread::scope(|s| {
        let other = s.spawn(spin);
        let mut mine = spin();
        mine.extend(other.join().unwrap_or_default());
        mine
    });
    // The first run of each thread starts with the scope, not with a slice.
    spread(runs.into_iter().filter(|&r| r > 0.0).collect())
}

/// A `FUTEX_WAKE` of an address nobody waits on, in ns.
fn syscall(n: u64) -> Spread {
    let word = AtomicU64::new(0);
    per_iteration(n, |n| {
        for _ in 0..n {
            // SAFETY: FUTEX_WAKE reads no memory; the address only names a (empty) wait queue.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    word.as_ptr(),
                    libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                    1,
                );
            }
        }
    })
}

/// The clock rate `/proc/cpuinfo` reports, if any (cycles are then that machine's; else 1 GHz,
/// cycles being nanoseconds).
fn ghz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map(|mhz| (mhz / 1000.0 * 100.0).round() / 100.0)
        .filter(|g| *g > 0.1 && *g < 20.0)
        .unwrap_or(1.0)
}

/// Measures this machine's profile (`local` left at 0), with each figure's spread over its
/// batches. `topology` is the machine's, read before any thread was pinned. `quick` takes a
/// hundredth of the samples (seconds less, figures rougher).
pub fn measure(topology: &Topology, quick: bool) -> Measured {
    let (scale, handovers) = if quick { (100, 5) } else { (1, 60) };
    let ghz = ghz();
    let cyc = |ns: f64| (ns * ghz * 100.0).round() / 100.0;
    let mut figures = Vec::new();
    let mut keep = |name: &'static str, unit: &'static str, spread: Spread, samples: usize| {
        figures.push(Figure {
            name,
            unit,
            spread,
            samples,
        });
        spread.median
    };
    let cpus: Vec<usize> = topology.cpus.iter().map(|c| c.id).collect();
    let a = cpus.first().copied().unwrap_or(0);
    let b = cpus.get(1).copied().unwrap_or(a);
    pin_current_thread(a);
    let own = CachePadded::new(AtomicU64::new(0));
    let hit = per_iteration(2_000_000 / scale, |n| {
        let mut x = 0;
        for _ in 0..n {
            x += own.load(Ordering::Relaxed);
        }
        black_box(x);
    });
    let hit = keep("cycles.hit", "cycles", hit.map(cyc), BATCHES);
    let atomic = per_iteration(2_000_000 / scale, |n| {
        for _ in 0..n {
            own.fetch_add(1, Ordering::Relaxed);
        }
    });
    let atomic = keep("cycles.atomic", "cycles", atomic.map(cyc), BATCHES);
    let pause = per_iteration(200_000 / scale, |n| {
        for _ in 0..n {
            std::hint::spin_loop();
        }
    });
    let pause = keep("cycles.pause", "cycles", pause.map(cyc), BATCHES);
    let fence_ns = per_iteration(2_000_000 / scale, |n| {
        for _ in 0..n {
            fence(Ordering::SeqCst);
        }
    });
    let fence = keep("cycles.fence", "cycles", fence_ns.map(cyc), BATCHES);
    let busy = per_iteration(1, |_| {
        black_box(pglocks_sync::hint::busy_work(2_000_000, 1));
    })
    .map(|ns| ns / 2_000_000.0);
    let busy = keep("cycles.busy_step", "cycles", busy.map(cyc), BATCHES);
    // A kernel's unit costs a fraction of a cycle: kept to a ten-thousandth.
    let fine = |ns: f64| (ns * ghz * 10_000.0).round() / 10_000.0;
    let mut kernel = |name, unit, ns: Spread| keep(name, unit, ns.map(fine), BATCHES);
    let kernels = Kernels {
        hash: kernel("cycles.kernels.hash", "cycles/word", hash_kernel(scale)),
        crc: kernel("cycles.kernels.crc", "cycles/byte", crc_kernel(scale)),
        scan: kernel("cycles.kernels.scan", "cycles/entry", scan_kernel(scale)),
        probe: kernel("cycles.kernels.probe", "cycles/probe", probe_kernel(scale)),
    };
    // The core's own caches, from sysfs, and a load's latency in a region each serves.
    let caches = data_caches(std::path::Path::new("/sys"), a);
    let level = |l: u32| caches.iter().find(|c| c.level == l).copied();
    let own = match (level(1), level(2)) {
        (Some(l1), Some(l2))
            if l2.kib > l1.kib
                && OwnCaches::sets(l1.kib, l1.ways, 64).is_some()
                && OwnCaches::sets(l2.kib, l2.ways, 64).is_some() =>
        {
            let l2_bytes = l2.kib as usize * 1024;
            let l2_ns = chase(l2_bytes / 2, scale);
            let llc_bytes = match caches.iter().filter(|c| c.level > 2).map(|c| c.kib).max() {
                Some(kib) => (4 * l2_bytes).min(kib as usize * 1024 / 2),
                None => 4 * l2_bytes,
            };
            let llc_ns = chase(llc_bytes, scale);
            let l2c = keep("cycles.caches.l2", "cycles", l2_ns.map(cyc), BATCHES).max(hit);
            let llc = keep("cycles.caches.llc", "cycles", llc_ns.map(cyc), BATCHES).max(l2c);
            Some(OwnCaches {
                l1_kib: l1.kib,
                l1_ways: l1.ways,
                l2_kib: l2.kib,
                l2_ways: l2.ways,
                l2: l2c,
                llc,
            })
        }
        _ => None,
    };
    let line = if a != b {
        let t = transfer(a, b, 20_000 / scale).map(cyc);
        keep("one line transfer", "cycles", t, BATCHES)
    } else {
        0.0
    };
    let speed = if a != b {
        parallel_speed(a, b, 2_000_000 / scale)
    } else {
        1.0
    };
    // Two CPUs that slow each other down share a core, whatever the topology says (a VM's
    // vCPUs may be two threads of one host core): the profile makes them SMT siblings. (The
    // 0.8 is unsourced.)
    let shares_core = speed < 0.8 && topology.logical_cpus() == 2;
    let syscall_ns = keep("os.syscall_ns", "ns", syscall(20_000 / scale), BATCHES);
    let wake_ns = if a != b {
        keep("os.wake_ns", "ns", handover(a, b, handovers), handovers)
    } else {
        0.0
    };
    let switch = handover(a, a, handovers).map(|ns| (ns - 2.0 * syscall_ns).max(0.0));
    let switch_ns = keep("os.context_switch_ns", "ns", switch, handovers);
    let slices = time_slice(a, Duration::from_millis(if quick { 60 } else { 400 }));
    let slice_us = keep("os.quantum_us", "µs", slices, 0);
    let slack = spread(
        (0..handovers.min(25))
            .map(|_| {
                let t = Instant::now();
                std::thread::sleep(Duration::from_micros(100));
                t.elapsed().as_nanos() as f64 - 100_000.0
            })
            .collect(),
    );
    let slack = keep("os.timer_slack_ns", "ns", slack, handovers.min(25));
    let packages = topology.packages().max(1) as u32;
    let cores = if shares_core {
        1
    } else {
        topology.physical_cores().max(1) as u32
    };
    let threads = (topology.logical_cpus() as u32 / cores).max(1);
    let transfer = line.max(hit);
    let profile = Profile {
        name: pglocks_sim::profile::THIS.to_string(),
        core_speed: None,
        // What is not measured here (below): what a sensitivity run varies.
        unsourced: [
            "line_bytes",
            "cycles.memory",
            "cycles.occupancy",
            "cycles.outstanding_misses",
        ]
        .map(String::from)
        .to_vec(),
        summary: format!(
            "this machine ({}), as `pglocks calibrate` measured it",
            topology.model
        ),
        sources: vec![format!(
            "measured on this machine by pglocks calibrate {}: transfers between CPUs {a} and {b}",
            env!("CARGO_PKG_VERSION")
        )],
        ghz,
        line_bytes: 64,
        topology: Shape {
            sockets: packages,
            dies_per_socket: 1,
            cores_per_die: (cores / packages).max(1),
            threads_per_core: threads,
            nodes_per_socket: 1,
            socket_hops: vec![],
            numbering: Numbering::SiblingsLast,
        },
        cycles: Cycles {
            hit,
            atomic,
            smt: transfer,
            die: transfer,
            package: transfer,
            hop1: transfer,
            hop2: transfer,
            hop3: transfer,
            // Not measured (unsourced): a line no cache holds costs a transfer, not memory's
            // latency, and one transfer at a time.
            memory: transfer,
            occupancy: 1.0,
            smt_speed: if shares_core {
                (speed * 100.0).round() / 100.0
            } else {
                1.0
            },
            pause,
            fence,
            busy_step: Some(busy),
            kernels: Some(kernels),
            local: Some(0.0),
            // Not measured: misses stay one at a time, and stores stall until visible.
            outstanding_misses: 1,
            store_buffer: 0,
            // Not measured: a store on a Shared line costs what a transfer does.
            load_from_shared: None,
            store_on_shared: None,
            atomic_on_shared: None,
            caches: own,
        },
        os: Os {
            syscall_ns: syscall_ns.round(),
            wake_ns: wake_ns.round(),
            context_switch_ns: switch_ns.round(),
            // Under 50 µs, no slice was seen: 3 ms instead, the built-in profiles' (unsourced).
            quantum_us: if slice_us >= 50.0 {
                slice_us.round()
            } else {
                3000.0
            },
            timer_slack_ns: slack.max(0.0).round(),
        },
        model: Default::default(),
    };
    Measured { profile, figures }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large machine's cache directory (a Sapphire Rapids core's: 48 KiB L1d, 2 MiB L2,
    /// 105 MiB L3), with an instruction cache among them and the sizes in K and M.
    #[test]
    fn the_data_caches_are_read_from_sysfs_leaving_the_instruction_cache_out() {
        let root = std::env::temp_dir().join(format!("pglocks-caches-{}", std::process::id()));
        let dir = root.join("devices/system/cpu/cpu3/cache");
        for (i, level, kind, size, ways) in [
            (0, 1, "Data", "48K", 12),
            (1, 1, "Instruction", "32K", 8),
            (2, 2, "Unified", "2048K", 16),
            (3, 3, "Unified", "105M", 15),
        ] {
            let d = dir.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            for (f, v) in [
                ("level", level.to_string()),
                ("type", kind.to_string()),
                ("size", size.to_string()),
                ("ways_of_associativity", ways.to_string()),
            ] {
                std::fs::write(d.join(f), format!("{v}\n")).unwrap();
            }
        }
        let got = data_caches(&root, 3);
        let _ = std::fs::remove_dir_all(&root);
        let c = |level, kib, ways| DataCache { level, kib, ways };
        assert_eq!(
            got,
            vec![c(1, 48, 12), c(2, 2048, 16), c(3, 105 * 1024, 15)]
        );
        // No such CPU: nothing.
        assert!(data_caches(&root, 4).is_empty());
    }

    /// What is measured makes a profile the simulator accepts (the figures themselves depend on
    /// the machine and its load, and are not checked).
    #[test]
    fn a_measured_profile_is_one_the_simulator_reads() {
        let topology = Topology::detect().unwrap();
        let m = measure(&topology, true);
        let p = m.profile;
        let back = Profile::parse(&p.to_toml(), "measured").unwrap();
        assert_eq!(back, p);
        assert_eq!(p.cpu_count(), topology.logical_cpus());
        assert!(p.cycles.hit > 0.0 && p.cycles.atomic > 0.0, "{p:?}");
        assert!(p.cycles.die >= p.cycles.hit, "{p:?}");
        // Every figure's median lies within its samples, and the profile holds the median.
        for f in &m.figures {
            let s = f.spread;
            assert!(s.least <= s.median && s.median <= s.most, "{f:?}");
        }
        let hit = m.figures.iter().find(|f| f.name == "cycles.hit").unwrap();
        assert_eq!(hit.spread.median, p.cycles.hit);
    }
}
