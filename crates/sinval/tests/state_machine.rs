//! proptest state machine: the queue against a reference that is an endless log of messages
//! with one read position per backend. Any sequence of inserts, batched reads, whole receives,
//! cleanups, registrations and exits on small rings (which wrap their message numbers often)
//! gives every backend the log's messages in order and exactly once, except that a backend
//! which fell so far behind that a writer needed its unread slots is reset — exactly then — and
//! is told so by its very next read, before any further message.
#![cfg(not(loom))]

use pglocks_lwlock::{AtomicLwLock, Pg96Layout};
use pglocks_proc::{Backend, ProcTable};
use pglocks_sinval::{
    Got, SharedInvalidationMessage as Msg, SinvalBackend, SinvalCheck, SinvalConfig, SinvalQueue,
};
use proptest::prelude::*;

type Queue = SinvalQueue<AtomicLwLock<Pg96Layout>>;

#[derive(Debug, Clone)]
enum Op {
    /// `SIInsertDataEntries` of this many messages.
    Insert(usize),
    /// `SIGetDataEntries` by slot `.0` into a buffer of `.1`.
    Get(usize, usize),
    /// `ReceiveSharedInvalidMessages` by slot `.0`.
    Receive(usize),
    /// `SICleanupQueue(false, 0)`.
    Cleanup,
    /// Slot `.0` registers (if free) or exits (if registered).
    Toggle(usize),
}

const SLOTS: usize = 4;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1..40usize).prop_map(Op::Insert),
        4 => (0..SLOTS, 1..12usize).prop_map(|(r, n)| Op::Get(r, n)),
        2 => (0..SLOTS).prop_map(Op::Receive),
        1 => Just(Op::Cleanup),
        1 => (0..SLOTS).prop_map(Op::Toggle),
    ]
}

/// The reference's view of one registered backend.
struct Reader {
    handle: SinvalBackend,
    /// Index in the log of the next message to read.
    pos: usize,
    reset: bool,
}

struct Harness {
    q: Queue,
    b: Backend,
    ring: usize,
    write_quantum: usize,
    log: Vec<Msg>,
    readers: Vec<Option<Reader>>,
}

impl Harness {
    fn unread(&self, r: &Reader) -> usize {
        self.log.len() - r.pos
    }

    /// The reference's `SIInsertDataEntries`: chunk by chunk, a backend whose unread messages
    /// plus the chunk exceed the ring is reset.
    fn insert(&mut self, n: usize) -> Result<(), TestCaseError> {
        let base = self.log.len() as u32;
        let new: Vec<Msg> = (base..base + n as u32)
            .map(|i| Msg::catcache(3, 1, i))
            .collect();
        let before: Vec<bool> = self.signaled();
        self.q.insert_data_entries(&mut self.b, &new).unwrap();
        for chunk in new.chunks(self.write_quantum) {
            let len = self.log.len();
            for r in self.readers.iter_mut().flatten() {
                if !r.reset && len - r.pos + chunk.len() > self.ring {
                    r.reset = true;
                }
            }
            self.log.extend_from_slice(chunk);
        }
        // A new catch-up signal only goes to a backend more than half a ring behind.
        let after = self.signaled();
        for (i, was) in before.into_iter().enumerate() {
            if let Some(r) = &self.readers[i] {
                if !was && after[i] && !r.reset {
                    prop_assert!(self.unread(r) > self.ring / 2, "signalled too early");
                }
            }
        }
        Ok(())
    }

    fn signaled(&mut self) -> Vec<bool> {
        (0..SLOTS)
            .map(|i| self.q.snapshot(&mut self.b, i).unwrap().signaled)
            .collect()
    }

    /// The queue's counters agree with the reference.
    fn check_counters(&mut self) -> Result<(), TestCaseError> {
        for i in 0..SLOTS {
            let v = self.q.snapshot(&mut self.b, i).unwrap();
            prop_assert!(v.max_msg_num - v.min_msg_num <= self.ring as u32, "{v:?}");
            if let Some(r) = &self.readers[i] {
                prop_assert_eq!(v.reset_state, r.reset, "reset state of {}", i);
                if !r.reset {
                    let next = v.next_msg_num.unwrap();
                    prop_assert_eq!((v.max_msg_num - next) as usize, self.unread(r));
                    prop_assert!(next >= v.min_msg_num, "{v:?}");
                }
            }
        }
        Ok(())
    }
}

fn check(
    ring: usize,
    wraparound: u32,
    check: SinvalCheck,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let cfg = SinvalConfig {
        msgnum_wraparound: wraparound,
        ..SinvalConfig::new(SLOTS, check).with_ring(ring)
    };
    let procs = ProcTable::new(1);
    let mut h = Harness {
        q: Queue::new(&cfg).unwrap(),
        b: procs.attach().unwrap(),
        ring,
        write_quantum: 64.min((ring / 16).max(1)),
        log: vec![],
        readers: (0..SLOTS).map(|_| None).collect(),
    };
    for i in 0..2 {
        let handle = h.q.backend_init(&mut h.b, false).unwrap();
        prop_assert_eq!(handle.index(), i);
        h.readers[i] = Some(Reader {
            handle,
            pos: 0,
            reset: false,
        });
    }
    for op in ops {
        match *op {
            Op::Insert(n) => h.insert(n)?,
            Op::Get(i, n) => {
                let Some(mut r) = h.readers[i].take() else {
                    continue;
                };
                let mut buf = vec![Msg::default(); n];
                let got = h.q.get_data_entries(&mut h.b, &r.handle, &mut buf).unwrap();
                if r.reset {
                    prop_assert_eq!(got, Got::Reset, "a reset went unreported");
                    r.reset = false;
                    r.pos = h.log.len();
                } else {
                    let k = n.min(h.unread(&r));
                    prop_assert_eq!(got, Got::Messages(k));
                    prop_assert_eq!(&buf[..k], &h.log[r.pos..r.pos + k]);
                    r.pos += k;
                }
                h.readers[i] = Some(r);
            }
            Op::Receive(i) => {
                let Some(mut r) = h.readers[i].take() else {
                    continue;
                };
                let mut seen = vec![];
                let mut resets = 0;
                let got =
                    h.q.receive_shared_invalid_messages(
                        &mut h.b,
                        &mut r.handle,
                        |m| seen.push(*m),
                        || resets += 1,
                    )
                    .unwrap();
                if r.reset {
                    prop_assert!(got.reset && got.messages == 0 && resets == 1);
                    r.reset = false;
                } else {
                    prop_assert!(!got.reset && resets == 0);
                    prop_assert_eq!(&seen[..], &h.log[r.pos..]);
                    prop_assert_eq!(got.messages as usize, seen.len());
                }
                r.pos = h.log.len();
                h.readers[i] = Some(r);
            }
            Op::Cleanup => h.q.cleanup_queue(&mut h.b, false, 0).unwrap(),
            Op::Toggle(i) => match h.readers[i].take() {
                Some(r) => h.q.cleanup_invalidation_state(&mut h.b, r.handle).unwrap(),
                None => {
                    let handle = h.q.backend_init(&mut h.b, false).unwrap();
                    let slot = handle.index();
                    prop_assert!(h.readers[slot].is_none(), "slot {} given twice", slot);
                    h.readers[slot] = Some(Reader {
                        handle,
                        pos: h.log.len(),
                        reset: false,
                    });
                }
            },
        }
        h.check_counters()?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_message_is_read_once_in_order_or_a_reset_is_reported(
        ring in prop_oneof![Just(4usize), Just(16), Just(64)],
        wrap_rings in 1u32..4,
        wait_free in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let check_kind = if wait_free { SinvalCheck::WaitFree } else { SinvalCheck::Locked };
        check(ring, ring as u32 * wrap_rings, check_kind, &ops)?;
    }
}
