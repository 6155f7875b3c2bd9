//! proptest state machine: the buffer manager, driven by two backends in turn on a few buffers,
//! against a sequential reference of the clock sweep (a freelist, a hand, tags, pin and usage
//! counts). After every step the buffers, the mapping table and the result agree with the
//! reference, so: no two buffers hold the same tag, the table maps exactly the valid buffers, a
//! pinned buffer is never evicted, usage counts stop at 5, and with every buffer pinned a miss
//! fails with "no unpinned buffers available". Both victim searches and both pin methods.
#![cfg(not(loom))]

use pglocks_bufmgr::{
    BufMgr, BufMgrConfig, BufMgrError, Buffer, BufferInfo, BufferTag, PinMethod, PrivateRefCount,
    VictimSearch, BM_MAX_USAGE_COUNT,
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

/// The reference: one buffer pool, run one step at a time.
struct Model {
    tags: Vec<Option<BufferTag>>,
    refcount: Vec<u32>,
    usage: Vec<u32>,
    free: VecDeque<u32>,
    hand: usize,
    private: Vec<HashMap<u32, u32>>,
}

impl Model {
    fn new(n: usize) -> Self {
        Self {
            tags: vec![None; n],
            refcount: vec![0; n],
            usage: vec![0; n],
            free: (0..n as u32).collect(),
            hand: 0,
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

    fn victim(&mut self) -> Result<u32, String> {
        while let Some(i) = self.free.pop_front() {
            if self.refcount[i as usize] == 0 && self.usage[i as usize] == 0 {
                return Ok(i);
            }
        }
        let n = self.tags.len();
        let mut tries = n;
        loop {
            let i = self.hand;
            self.hand = (self.hand + 1) % n;
            if self.refcount[i] == 0 {
                if self.usage[i] == 0 {
                    return Ok(i as u32);
                }
                self.usage[i] -= 1;
                tries = n;
            } else {
                tries -= 1;
                if tries == 0 {
                    return Err(BufMgrError::NoUnpinnedBuffers.to_string());
                }
            }
        }
    }

    fn read(&mut self, bk: usize, t: BufferTag) -> Result<u32, String> {
        if let Some(i) = self.tags.iter().position(|x| *x == Some(t)) {
            self.pin(bk, i as u32);
            return Ok(i as u32);
        }
        let i = self.victim()?;
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
        self.free.push_front(i as u32);
        Some(Ok(true))
    }
}

fn check(cfg: BufMgrConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let pool: BufMgr<AtomicLwLock<Pg96Layout>, NoPadding> = BufMgr::new(&cfg).unwrap();
    let procs = ProcTable::new(BACKENDS);
    let mut bs: Vec<_> = (0..BACKENDS).map(|_| procs.attach().unwrap()).collect();
    let mut refs = vec![PrivateRefCount::new(); BACKENDS];
    let mut model = Model::new(cfg.nbuffers);
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

fn config() -> impl Strategy<Value = BufMgrConfig> {
    (1..=4usize, 1..=3usize, any::<bool>(), any::<bool>()).prop_map(|(n, parts, lock, cas)| {
        BufMgrConfig {
            partitions: parts,
            victim_search: if lock {
                VictimSearch::FreelistLock
            } else {
                VictimSearch::AtomicClockHand
            },
            pin: if cas {
                PinMethod::Cas
            } else {
                PinMethod::HeaderLock
            },
            ..BufMgrConfig::new(n)
        }
    })
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
