//! proptest state machine: the SLRU against a reference that is just a map of pages. Any
//! sequence of reads (exclusive and read-only), byte writes, page zeroing and write-backs on a
//! handful of slots never returns a wrong page, and after `SimpleLruWriteAll` the store holds the
//! last bytes written to every page (no dirty page is ever lost on eviction).
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, LwLockMode, Pg96Layout};
use pglocks_proc::ProcTable;
use pglocks_slru::{MemoryStore, PageStore, Slru, SlruConfig, Victim, BLCKSZ};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
enum Op {
    Read(u64),
    ReadOnly(u64),
    Write(u64, usize, u8),
    Zero(u64),
    WriteAll,
}

fn op(pages: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..pages).prop_map(Op::Read),
        3 => (0..pages).prop_map(Op::ReadOnly),
        4 => (0..pages, 0..BLCKSZ, any::<u8>()).prop_map(|(p, i, v)| Op::Write(p, i, v)),
        1 => (0..pages).prop_map(Op::Zero),
        1 => Just(Op::WriteAll),
    ]
}

/// A store shared with the test, so it can be inspected after the SLRU is done with it.
struct Shared(Arc<MemoryStore>);

impl PageStore for Shared {
    fn read_page(&self, p: u64, buf: &mut [u8; BLCKSZ]) -> Result<(), pglocks_slru::SlruError> {
        self.0.read_page(p, buf)
    }
    fn write_page(&self, p: u64, buf: &[u8; BLCKSZ]) -> Result<(), pglocks_slru::SlruError> {
        self.0.write_page(p, buf)
    }
}

fn check(cfg: SlruConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let store = Arc::new(MemoryStore::new(Duration::ZERO));
    let slru: Slru<AtomicLwLock<Pg96Layout>> =
        Slru::new(&cfg, Box::new(Shared(Arc::clone(&store)))).unwrap();
    let procs = ProcTable::new(1);
    let mut b = procs.attach().unwrap();
    // The reference: every page's bytes (absent = zeros).
    let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
    let page_of =
        |m: &HashMap<u64, Vec<u8>>, p: u64| m.get(&p).cloned().unwrap_or_else(|| vec![0; BLCKSZ]);
    for op in ops {
        match *op {
            Op::Read(p) | Op::Write(p, _, _) => {
                slru.lock_bank(&mut b, p, LwLockMode::Exclusive).unwrap();
                let slot = slru.read_page(&mut b, p, false).unwrap();
                prop_assert_eq!(slru.page_number(slot), p);
                if let Op::Write(_, i, v) = *op {
                    slru.set_byte(slot, i, v);
                    slru.mark_dirty(slot);
                    model.entry(p).or_insert_with(|| vec![0; BLCKSZ])[i] = v;
                }
                let want = page_of(&model, p);
                for i in [0, 1, BLCKSZ / 2, BLCKSZ - 1] {
                    prop_assert_eq!(slru.byte(slot, i), want[i]);
                }
                slru.unlock_bank(&mut b, p).unwrap();
            }
            Op::ReadOnly(p) => {
                let slot = slru.read_page_read_only(&mut b, p).unwrap();
                prop_assert_eq!(slru.page_number(slot), p);
                let want = page_of(&model, p);
                let got: Vec<u8> = (0..BLCKSZ).map(|i| slru.byte(slot, i)).collect();
                prop_assert!(got == want, "page {} differs", p);
                slru.unlock_bank(&mut b, p).unwrap();
            }
            Op::Zero(p) => {
                slru.lock_bank(&mut b, p, LwLockMode::Exclusive).unwrap();
                let slot = slru.zero_page(&mut b, p).unwrap();
                prop_assert_eq!(slru.page_number(slot), p);
                slru.unlock_bank(&mut b, p).unwrap();
                model.insert(p, vec![0; BLCKSZ]);
            }
            Op::WriteAll => slru.write_all(&mut b).unwrap(),
        }
    }
    slru.write_all(&mut b).unwrap();
    for (p, bytes) in &model {
        let stored = store
            .page(*p)
            .map(|x| x.to_vec())
            .unwrap_or_else(|| vec![0; BLCKSZ]);
        prop_assert!(&stored == bytes, "page {} lost its last write", p);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn one_control_lock_matches_the_reference(ops in prop::collection::vec(op(10), 1..80), plain in any::<bool>()) {
        let cfg = SlruConfig {
            slots: 4,
            banks: false,
            victim: if plain { Victim::PlainLru } else { Victim::AvoidIoBusy },
            lock_name: "XactSLRU",
            buffer_lock_name: "XactBuffer",
            lsn_groups_per_page: 0,
        };
        check(cfg, &ops)?;
    }

    #[test]
    fn banks_match_the_reference(ops in prop::collection::vec(op(70), 1..120)) {
        // 32 slots in 2 banks of 16: pages 0, 2, 4… share one bank, so 35 pages overflow it.
        let cfg = SlruConfig {
            slots: 32,
            banks: true,
            victim: Victim::AvoidIoBusy,
            lock_name: "XactSLRU",
            buffer_lock_name: "XactBuffer",
            lsn_groups_per_page: 0,
        };
        check(cfg, &ops)?;
    }
}
