//! proptest state machine: the buffer manager, driven by two backends in turn on a few buffers,
//! against a sequential reference of the clock sweep (a freelist, a hand, tags, pin and usage
//! counts). After every step the buffers, the mapping table and the result agree with the
//! reference, so: no two buffers hold the same tag, the table maps exactly the valid buffers, a
//! pinned buffer is never evicted, usage counts stop at 5, and with every buffer pinned a miss
//! fails with "no unpinned buffers available". Both victim searches and both pin methods, and
//! the search split per NUMA node (a prototype): each range of buffers its own freelist and
//! hand, a backend's own range searched first and the others in turn when it has every buffer
//! pinned.
#![cfg(not(loom))]

use pglocks_bufmgr::{
    BufMgr, BufMgrConfig, BufMgrError, Buffer, BufferInfo, BufferTag, PinMethod, PrivateRefCount,
    SweepPartitions, VictimSearch, BM_MAX_USAGE_COUNT,
};
use pglocks_lwlock::{AtomicLwLock, NoPadding, Pg96Layout};
use pglocks_proc::ProcTable;
use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};

const BACKENDS: usize = 2;
const PAGES: u32 = 6;

#[derive(Debug, Clone)]
enum Op {
    /// `ReadBuffer` of page `.1` by backend `.0`.
    Read(usize, u32),
    /// `ReleaseBuffer` by backend `.0` of the `.1`-th buffer it has pinned.
    Release(usize, usize),
    /// `ReleaseBuffer` by backend `.0` of buffer `.1`, pinned by it or not.
    ReleaseAny(usize, u32),
    /// Drop page `.0` from the buffers.
    Drop(u32),
}

fn op(nbuffers: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..BACKENDS, 0..PAGES).prop_map(|(b, p)| Op::Read(b, p)),
        4 => (0..BACKENDS, 0..4usize).prop_map(|(b, k)| Op::Release(b, k)),
        1 => (0..BACKENDS, 0..nbuffers).prop_map(|(b, k)| Op::ReleaseAny(b, k)),
        1 => (0..PAGES).prop_map(Op::Drop),
    ]
}

fn tag(page: u32) -> BufferTag {
    BufferTag::main(5, 16384 + page % 2, page)
}

/// The reference: one buffer pool, run one step at a time. Its buffers are split into ranges
/// of equal size (one range: PostgreSQL's), each with a freelist and a hand; a backend on node
/// `k` of a pool split for `nodes` nodes, `per_node` ranges to a node, searches range
/// `k * per_node + procno % per_node` first, then the next ranges round.
struct Model {
    tags: Vec<Option<BufferTag>>,
    refcount: Vec<u32>,
    usage: Vec<u32>,
    /// Range `r` is buffers `bounds[r]..bounds[r + 1]`.
    bounds: Vec<usize>,
    free: Vec<VecDeque<u32>>,
    /// Each range's hand, an index into the range.
    hand: Vec<usize>,
    /// Each backend's first range.
    home: Vec<usize>,
    private: Vec<HashMap<u32, u32>>,
}

impl Model {
    fn new(n: usize, ranges: usize, home: Vec<usize>) -> Self {
        let bounds: Vec<usize> = (0..=ranges).map(|r| r * n / ranges).collect();
        Self {
            tags: vec![None; n],
            refcount: vec![0; n],
            usage: vec![0; n],
            free: bounds
                .windows(2)
                .map(|w| (w[0] as u32..w[1] as u32).collect())
                .collect(),
            hand: vec![0; ranges],
            bounds,
            home,
            private: vec![HashMap::new(); BACKENDS],
        }
    }

    fn pin(&mut self, bk: usize, i: u32) {
        let mine = self.private[bk].entry(i).or_insert(0);
        if *mine == 0 {
            self.refcount[i as usize] += 1;
            let u = &mut self.usage[i as usize];
            *u = (*u + 1).min(BM_MAX_USAGE_COUNT);
        }
        *mine += 1;
    }

    /// Backend `bk`'s victim: from its own range, else from the next one that has an unpinned
    /// buffer.
    fn victim(&mut self, bk: usize) -> Result<u32, String> {
        let ranges = self.hand.len();
        for k in 0..ranges {
            if let Some(i) = self.victim_in((self.home[bk] + k) % ranges) {
                return Ok(i);
            }
        }
        Err(BufMgrError::NoUnpinnedBuffers.to_string())
    }

    /// Range `r`'s freelist, then its clock sweep; `None` if every buffer of it is pinned.
    fn victim_in(&mut self, r: usize) -> Option<u32> {
        while let Some(i) = self.free[r].pop_front() {
            if self.refcount[i as usize] == 0 && self.usage[i as usize] == 0 {
                return Some(i);
            }
        }
        let (first, n) = (self.bounds[r], self.bounds[r + 1] - self.bounds[r]);
        let mut tries = n;
        loop {
            let i = first + self.hand[r];
            self.hand[r] = (self.hand[r] + 1) % n;
            if self.refcount[i] == 0 {
                if self.usage[i] == 0 {
                    return Some(i as u32);
                }
                self.usage[i] -= 1;
                tries = n;
            } else {
                tries -= 1;
                if tries == 0 {
                    return None;
                }
            }
        }
    }

    fn read(&mut self, bk: usize, t: BufferTag) -> Result<u32, String> {
        if let Some(i) = self.tags.iter().position(|x| *x == Some(t)) {
            self.pin(bk, i as u32);
            return Ok(i as u32);
        }
        let i = self.victim(bk)?;
        self.tags[i as usize] = Some(t);
        self.usage[i as usize] = 1;
        self.refcount[i as usize] += 1;
        *self.private[bk].entry(i).or_insert(0) += 1;
        Ok(i)
    }

    fn release(&mut self, bk: usize, i: u32) -> Result<(), String> {
        match self.private[bk].get_mut(&i) {
            None => Err(BufMgrError::NotPinned(i).to_string()),
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    self.private[bk].remove(&i);
                    self.refcount[i as usize] -= 1;
                }
                Ok(())
            }
        }
    }

    /// Backend `bk` drops page `t`; `None` when another backend's pin would make it wait.
    fn drop_page(&mut self, bk: usize, t: BufferTag) -> Option<Result<bool, String>> {
        let Some(i) = self.tags.iter().position(|x| *x == Some(t)) else {
            return Some(Ok(false));
        };
        if self.private[bk].contains_key(&(i as u32)) {
            return Some(Err(BufMgrError::BufferPinned.to_string()));
        }
        if self.refcount[i] > 0 {
            return None;
        }
        self.tags[i] = None;
        self.usage[i] = 0;
        let r = self.bounds.partition_point(|&first| first <= i) - 1;
        self.free[r].push_front(i as u32);
        Some(Ok(true))
    }
}

fn check(cfg: BufMgrConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let pool: BufMgr<AtomicLwLock<Pg96Layout>, NoPadding> = BufMgr::new(&cfg).unwrap();
    let procs = ProcTable::new(BACKENDS);
    let mut bs: Vec<_> = (0..BACKENDS).map(|_| procs.attach().unwrap()).collect();
    let mut refs = vec![PrivateRefCount::new(); BACKENDS];
    // Backend `bk` on node `bk % nodes`.
    let (nodes, per_node) = match cfg.sweep {
        SweepPartitions::One => (1, 1),
        SweepPartitions::PerNode { nodes, .. } => (nodes, cfg.sweep.per_node()),
    };
    let home = bs
        .iter_mut()
        .enumerate()
        .map(|(bk, b)| {
            b.set_numa_node(bk % nodes, nodes);
            (bk % nodes) * per_node + b.procno() % per_node
        })
        .collect();
    let mut model = Model::new(cfg.nbuffers, nodes * per_node, home);
    prop_assert_eq!(pool.sweep_partitions(), nodes * per_node);
    // The tag each backend's pinned buffers had when pinned.
    let mut pinned_as: HashMap<(usize, u32), BufferTag> = HashMap::new();
    for op in ops {
        match *op {
            Op::Read(bk, page) => {
                let got = pool
                    .read_buffer(&mut bs[bk], &mut refs[bk], tag(page))
                    .map(Buffer::id)
                    .map_err(|e| e.to_string());
                prop_assert_eq!(&got, &model.read(bk, tag(page)), "{:?}", op);
                if let Ok(i) = got {
                    pinned_as.insert((bk, i), tag(page));
                }
            }
            Op::Release(bk, k) => {
                let pinned = refs[bk].pinned();
                if pinned.is_empty() {
                    continue;
                }
                let i = pinned[k % pinned.len()].0;
                let got = pool.release_buffer(&mut bs[bk], &mut refs[bk], Buffer::from_id(i));
                prop_assert_eq!(got.map_err(|e| e.to_string()), model.release(bk, i));
            }
            Op::ReleaseAny(bk, i) => {
                let got = pool.release_buffer(&mut bs[bk], &mut refs[bk], Buffer::from_id(i));
                prop_assert_eq!(got.map_err(|e| e.to_string()), model.release(bk, i));
            }
            Op::Drop(page) => {
                // A page another backend has pinned would be waited for: not a sequential step.
                if let Some(want) = model.drop_page(0, tag(page)) {
                    let got = pool.drop_buffer(&mut bs[0], &refs[0], tag(page));
                    prop_assert_eq!(got.map_err(|e| e.to_string()), want);
                }
            }
        }
        // Buffers and table against the reference.
        let b = &mut bs[0];
        let mut mapped = Vec::new();
        for i in 0..cfg.nbuffers {
            let info = pool.buffer_info(b, i as u32).unwrap();
            let want = BufferInfo {
                tag: model.tags[i],
                refcount: model.refcount[i],
                usage_count: model.usage[i],
                valid: model.tags[i].is_some(),
            };
            prop_assert_eq!(info, want, "buffer {} after {:?}", i, op);
            prop_assert!(info.usage_count <= BM_MAX_USAGE_COUNT);
            if let Some(t) = info.tag {
                mapped.push((t, i as u32));
            }
        }
        prop_assert_eq!(pool.table_entries(b).unwrap(), mapped.clone());
        let mut tags: Vec<_> = mapped.iter().map(|m| m.0).collect();
        tags.sort_unstable();
        tags.dedup();
        prop_assert_eq!(tags.len(), mapped.len(), "a tag in two buffers");
        // A pinned buffer still holds the page it was pinned for.
        for (bk, r) in refs.iter().enumerate() {
            for (i, _) in r.pinned() {
                prop_assert_eq!(
                    pool.buffer_info(b, i).unwrap().tag,
                    Some(pinned_as[&(bk, i)])
                );
            }
        }
    }
    Ok(())
}

/// 9.6's pin by compare-exchange, or ≤ 9.5's under the header lock.
fn pin_method(cas: bool) -> PinMethod {
    if cas {
        PinMethod::Cas
    } else {
        PinMethod::HeaderLock
    }
}

fn config() -> impl Strategy<Value = BufMgrConfig> {
    let shared =
        (1..=4usize, 1..=3usize, any::<bool>(), any::<bool>()).prop_map(|(n, parts, lock, cas)| {
            BufMgrConfig {
                partitions: parts,
                victim_search: if lock {
                    VictimSearch::FreelistLock
                } else {
                    VictimSearch::AtomicClockHand
                },
                pin: pin_method(cas),
                ..BufMgrConfig::new(n)
            }
        });
    // Split per node: 1, 2 or 3 nodes (4, 4 and 6 ranges), ranges of one to three buffers,
    // their controls padded or not.
    let per_node = (
        1..=3usize,
        0..=8usize,
        1..=3usize,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(nodes, extra, parts, cas, padded)| {
            let sweep = SweepPartitions::PerNode { nodes, padded };
            BufMgrConfig {
                partitions: parts,
                sweep,
                pin: pin_method(cas),
                ..BufMgrConfig::new(sweep.count() + extra)
            }
        });
    prop_oneof![shared, per_node]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_pool_behaves_as_the_reference(
        (cfg, ops) in config().prop_flat_map(|cfg| {
            let n = cfg.nbuffers as u32;
            (Just(cfg), prop::collection::vec(op(n), 1..60))
        })
    ) {
        check(cfg, &ops)?;
    }
}

#[test]
fn a_bad_buffer_id_is_refused() {
    let pool: BufMgr<AtomicLwLock<Pg96Layout>> = BufMgr::new(&BufMgrConfig::new(2)).unwrap();
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let e = pool
        .release_buffer(&mut b, &mut PrivateRefCount::new(), Buffer::from_id(7))
        .unwrap_err();
    assert_eq!(e.to_string(), "bad buffer ID: 7");
    let e = BufMgr::<AtomicLwLock<Pg96Layout>>::new(&BufMgrConfig::new(0))
        .err()
        .unwrap();
    assert!(e.to_string().contains("shared buffers must be 1"), "{e}");
}

#[test]
fn a_split_search_keeps_each_range_to_its_node_and_its_freed_buffers() {
    // Two nodes, four ranges of two buffers: node 0's are buffers 0..4, node 1's 4..8.
    let cfg = BufMgrConfig {
        sweep: SweepPartitions::PerNode {
            nodes: 2,
            padded: true,
        },
        ..BufMgrConfig::new(8)
    };
    let pool: BufMgr<AtomicLwLock<Pg96Layout>> = BufMgr::new(&cfg).unwrap();
    assert_eq!(pool.sweep_partitions(), 4);
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    let mut refs = PrivateRefCount::new();
    b.set_numa_node(1, 2);
    let range = 2 + b.procno() % 2;
    let mut read = |b: &mut _, page| {
        let buf = pool.read_buffer(b, &mut refs, tag(page)).unwrap();
        pool.release_buffer(b, &mut refs, buf).unwrap();
        buf.id()
    };
    // Node 1's backend reads into its range, in the freelist's order.
    assert_eq!(read(&mut b, 1), 2 * range as u32);
    assert_eq!(read(&mut b, 2), 2 * range as u32 + 1);
    // Its range full, the backend's hand evicts there, not in a range with free buffers.
    let evicted = read(&mut b, 3);
    assert_eq!(evicted / 2, range as u32, "buffer {evicted} evicted");
    // A dropped buffer goes back to the freelist of its range: the next one that range takes,
    // and not one a backend of the other node takes.
    assert!(pool
        .drop_buffer(&mut b, &PrivateRefCount::new(), tag(2))
        .unwrap());
    b.set_numa_node(0, 2);
    let other = b.procno() % 2;
    assert_eq!(read(&mut b, 4), 2 * other as u32);
    b.set_numa_node(1, 2);
    assert_eq!(read(&mut b, 5), 2 * range as u32 + 1);
}

#[test]
fn a_split_search_refuses_what_it_cannot_split() {
    let new = |cfg: BufMgrConfig| {
        BufMgr::<AtomicLwLock<Pg96Layout>>::new(&cfg)
            .err()
            .map(|e| e.to_string())
    };
    let split = |nodes| BufMgrConfig {
        sweep: SweepPartitions::PerNode {
            nodes,
            padded: false,
        },
        ..BufMgrConfig::new(16)
    };
    assert_eq!(new(split(2)), None);
    let e = new(BufMgrConfig {
        victim_search: VictimSearch::FreelistLock,
        ..split(2)
    });
    assert!(e.unwrap().contains("needs the atomic clock hand"));
    let e = new(split(0)).unwrap();
    assert!(e.contains("1 to 1024 nodes, not 0"), "{e}");
    // Eight nodes with a range each need eight buffers at least.
    let e = new(BufMgrConfig {
        nbuffers: 7,
        ..split(8)
    });
    assert!(e.unwrap().contains("into 8 ranges"));
    assert_eq!(split(3).sweep.count(), 6);
    assert_eq!(split(8).sweep.count(), 8);
}
