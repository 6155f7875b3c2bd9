//! The `sinval` part: the shared invalidation queue, `SIInsertDataEntries` and
//! `SIGetDataEntries` (sinvaladt.c) with `SICleanupQueue`'s reset of a backend that fell too
//! far behind, read as `ReceiveSharedInvalidMessages` (sinval.c) reads it.
//!
//! Every thread is a receiver and, one step in three, a sender of one to forty messages
//! numbered in sequence (the sender in the message's `extra` field). Checked at every receive:
//! from each sender, the numbers come in order without a gap unless a reset came in between;
//! at the end, once the senders have stopped and each receiver has read the rest: every
//! receiver has each sender's last message or was reset since it last heard from that sender.
//! Resets are counted as its events.

use super::{check, lock, Failure, NewPart, Part, Refused, Setup, Step, Tally, DATABASE};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::{Backend, ProcTable};
use pglocks_sinval::{SharedInvalidationMessage, SinvalBackend, SinvalConfig, SinvalQueue};
use pglocks_spin::RawSpinLock;
use pglocks_sync::atomic::{AtomicU32, Ordering::SeqCst};
use rand::rngs::SmallRng;
use rand::RngExt;
use std::sync::{Arc, Mutex};

/// Builds the part.
pub(super) enum New {}

impl NewPart for New {
    fn new_part<K: RawLwLock, R: RawSpinLock + 'static>(
        setup: &Setup<'_>,
    ) -> Result<Arc<dyn Part>, Refused> {
        let n = setup.threads;
        let cfg = SinvalConfig::new(n + 1, setup.settings.sinval_check);
        Ok(Arc::new(Sinval::<K, R> {
            procs: setup.procs(),
            queue: SinvalQueue::new(&cfg)?,
            sent: (0..n).map(|_| AtomicU32::new(0)).collect(),
            receivers: (0..n).map(|_| Mutex::new(None)).collect(),
        }))
    }
}

/// The queue, what each sender sent, and what each receiver saw.
struct Sinval<K: RawLwLock, R: RawSpinLock> {
    procs: ProcTable,
    queue: SinvalQueue<K, R>,
    /// The last message number each sender sent.
    sent: Vec<AtomicU32>,
    /// Each thread's queue entry and what it has seen, kept here for the end-of-run check.
    receivers: Vec<Mutex<Option<Receiver>>>,
}

/// What a receiver knows of one sender: the last number seen, and whether a reset came since.
#[derive(Clone, Copy, Default)]
struct Seen {
    last: u32,
    reset_since: bool,
}

/// One thread's queue entry, and what it has seen of each sender.
struct Receiver {
    me: SinvalBackend,
    seen: Vec<Seen>,
}

impl<K: RawLwLock, R: RawSpinLock> Sinval<K, R> {
    /// Receives everything pending for receiver `i`; per sender, the numbers must come in order
    /// without a gap unless a reset came in between (a reset ends a receive, after any
    /// messages it delivered). Returns whether it was reset.
    fn receive(
        &self,
        b: &mut Backend,
        r: &mut Receiver,
        i: usize,
        t: &mut Tally,
    ) -> Result<bool, Failure> {
        let mut broken = None;
        let seen = &mut r.seen;
        let got = self.queue.receive_shared_invalid_messages(
            b,
            &mut r.me,
            |m| {
                let s = &mut seen[m.extra as usize];
                if m.object != s.last + 1 && !s.reset_since && broken.is_none() {
                    broken = Some((m.extra, s.last, m.object));
                }
                *s = Seen {
                    last: m.object,
                    reset_since: false,
                };
            },
            || {},
        )?;
        if got.reset {
            seen.iter_mut().for_each(|s| s.reset_since = true);
        }
        check(t, broken.is_none(), || {
            let (from, last, got) = broken.unwrap_or_default();
            format!("backend {i} got message {got} from sender {from} after {last}: a gap without a reset")
        })?;
        Ok(got.reset)
    }
}

impl<K: RawLwLock, R: RawSpinLock + 'static> Part for Sinval<K, R> {
    fn events_name(&self) -> &'static str {
        "resets"
    }
    fn procs(&self) -> &ProcTable {
        &self.procs
    }
    fn step(self: Arc<Self>, i: usize, _: usize, mut rng: SmallRng) -> Step {
        let mut seq = 0u32;
        Box::new(move |b, t| {
            let mut slot = lock(&self.receivers[i]);
            let r = match &mut *slot {
                Some(r) => r,
                None => slot.insert(Receiver {
                    me: self.queue.backend_init(b, false)?,
                    // A backend joins at the end of the queue: a sender's first message it
                    // sees may be any.
                    seen: vec![
                        Seen {
                            last: 0,
                            reset_since: true,
                        };
                        self.sent.len()
                    ],
                }),
            };
            if rng.random_ratio(1, 3) {
                let n = rng.random_range(1..=40u32);
                let msgs: Vec<SharedInvalidationMessage> = (1..=n)
                    .map(|k| {
                        let mut m = SharedInvalidationMessage::relcache(DATABASE, seq + k);
                        m.extra = i as u32;
                        m
                    })
                    .collect();
                self.queue.insert_data_entries(b, &msgs)?;
                seq += n;
                self.sent[i].store(seq, SeqCst);
            }
            t.events += u64::from(self.receive(b, r, i, t)?);
            t.ops += 1;
            Ok(())
        })
    }
    /// Once the senders have stopped, every receiver gets the rest: then it has each sender's
    /// last message, or was reset since it last heard from that sender.
    fn finish(&self, b: &mut Backend, _: &Tally, t: &mut Tally) -> Result<(), Failure> {
        for (i, slot) in self.receivers.iter().enumerate() {
            let mut slot = lock(slot);
            let Some(r) = slot.as_mut() else { continue };
            self.receive(b, r, i, t)?;
            for (from, seen) in r.seen.iter().enumerate() {
                let sent = self.sent[from].load(SeqCst);
                check(
                    t,
                    sent == 0 || seen.last == sent || seen.reset_since,
                    || {
                        format!("backend {i} ended with message {} of sender {from}, which sent {sent}, and no reset", seen.last)
                    },
                )?;
            }
        }
        Ok(())
    }
}
