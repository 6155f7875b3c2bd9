//! Threads: two writers append numbered messages to a small ring while three readers receive
//! them (one slowly, so that it is reset now and then) and one registered backend never reads
//! until the end. Every reader gets each writer's messages in order and exactly once between
//! resets, after a reset only later messages, and at the end everything after its last reset;
//! the idle backend is told it was reset.
#![cfg(not(loom))]

use pglocks_lwlock::RawLwLock;
use pglocks_lwlock::{AtomicLwLock, Pg96Layout, SpinlockProtectedLwLock};
use pglocks_proc::ProcTable;
use pglocks_sinval::{SharedInvalidationMessage as Msg, SinvalCheck, SinvalConfig, SinvalQueue};
use pglocks_spin::PgSpinLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const WRITERS: u32 = 2;
const PER_WRITER: u32 = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Msg(u32, u32),
    Reset,
}

/// Checks one reader's events: consecutive per writer between resets, increasing across a
/// reset, and complete after the last reset.
fn verify(events: &[Event]) -> Result<(), String> {
    // The next sequence number expected from each writer (None: any, right after a reset).
    let mut expect: Vec<Option<u32>> = vec![Some(0); WRITERS as usize];
    let mut last_seen: Vec<Option<u32>> = vec![None; WRITERS as usize];
    for e in events {
        match *e {
            Event::Reset => expect.iter_mut().for_each(|x| *x = None),
            Event::Msg(w, seq) => {
                let w = w as usize;
                match expect[w] {
                    Some(x) if x != seq => {
                        return Err(format!(
                            "writer {w}: expected {x}, got {seq} without a reset"
                        ))
                    }
                    None if last_seen[w].is_some_and(|l| seq <= l) => {
                        return Err(format!("writer {w}: {seq} again after a reset"))
                    }
                    _ => {}
                }
                expect[w] = Some(seq + 1);
                last_seen[w] = Some(seq);
            }
        }
    }
    for (w, x) in expect.iter().enumerate() {
        // After the last reset, either the writer's tail was read to its end, or nothing of it
        // came after the reset (the reset covered it).
        if let Some(x) = x {
            if *x != PER_WRITER {
                return Err(format!("writer {w}: messages from {x} on were lost"));
            }
        }
    }
    Ok(())
}

fn run<K: RawLwLock>(check: SinvalCheck) {
    let q: Arc<SinvalQueue<K, PgSpinLock>> =
        Arc::new(SinvalQueue::new(&SinvalConfig::new(8, check).with_ring(64)).unwrap());
    let procs = ProcTable::new(8);
    let done = Arc::new(AtomicBool::new(false));
    // Everyone starts at once, so the writers overlap each other and the readers.
    let start = Arc::new(Barrier::new(3 + WRITERS as usize));
    let mut main = procs.attach().unwrap();
    let mut idle = q.backend_init(&mut main, false).unwrap();
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (q, procs, done) = (Arc::clone(&q), procs.clone(), Arc::clone(&done));
            let start = Arc::clone(&start);
            // Registered before any writer starts, so each must see every message from 0.
            let mut me = q.backend_init(&mut main, false).unwrap();
            std::thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                let mut events = vec![];
                start.wait();
                loop {
                    // Read after seeing `done`, so the last receive comes after every insert.
                    let last = done.load(Ordering::Acquire);
                    let got = q
                        .receive_shared_invalid_messages(
                            &mut b,
                            &mut me,
                            |m| events.push(Event::Msg(m.db_id, m.object)),
                            || {},
                        )
                        .unwrap();
                    if got.reset {
                        events.push(Event::Reset);
                    }
                    if last {
                        break;
                    }
                    if r == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
                events
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (q, procs, start) = (Arc::clone(&q), procs.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut b = procs.attach().unwrap();
                let _me = q.backend_init(&mut b, true).unwrap();
                start.wait();
                let mut seq = 0;
                while seq < PER_WRITER {
                    let n = (1 + seq % 5).min(PER_WRITER - seq);
                    let batch: Vec<Msg> = (seq..seq + n).map(|s| Msg::catcache(0, w, s)).collect();
                    q.insert_data_entries(&mut b, &batch).unwrap();
                    seq += n;
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for (i, r) in readers.into_iter().enumerate() {
        let events = r.join().unwrap();
        if let Err(e) = verify(&events) {
            panic!("{check:?} reader {i}: {e}");
        }
    }
    let got = q
        .accept_invalidation_messages(&mut main, &mut idle)
        .unwrap();
    assert!(got.reset && got.messages == 0, "{got:?}");
}

#[test]
fn readers_get_every_message_once_in_order_or_a_reset_wait_free() {
    run::<AtomicLwLock<Pg96Layout>>(SinvalCheck::WaitFree);
}

#[test]
fn readers_get_every_message_once_in_order_or_a_reset_locked() {
    run::<SpinlockProtectedLwLock<PgSpinLock<false>>>(SinvalCheck::Locked);
}

#[test]
fn the_checker_catches_a_lost_message() {
    let mut events: Vec<Event> = (0..WRITERS)
        .flat_map(|w| (0..PER_WRITER).map(move |s| Event::Msg(w, s)))
        .collect();
    assert_eq!(verify(&events), Ok(()));
    events.remove(10);
    assert!(verify(&events).is_err());
    events.insert(10, Event::Reset);
    assert_eq!(verify(&events), Ok(()));
    events.push(Event::Msg(0, 5));
    assert!(verify(&events).is_err());
}
