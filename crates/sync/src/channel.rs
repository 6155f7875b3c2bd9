//! A queue of messages from any number of senders to one receiver, bounded or not, whose waits
//! are the shim's semaphores: it works the same on a real machine, under loom, and on a
//! simulated CPU, where a receiver waiting for a message (or a sender for room) blocks in
//! virtual time. It stands for a connection between two processes that the models do not
//! build out of shared memory themselves (the replication connection from a walsender to a
//! walreceiver, a worker's report that it has attached).
//!
//! # The algorithm
//! The messages are a FIFO behind a mutex; two counting semaphores ([`Semaphore`]) say when to
//! look at it. `items` holds one permit per message queued: a receiver takes one before it
//! pops, so it sleeps while the queue is empty. `slots`, for a bounded channel only, holds one
//! permit per free place: a sender takes one before it pushes, so it sleeps while the queue is
//! full, and the receiver gives one back after each pop. The mutex guards only the queue's
//! push and pop and the counts of the ends, and no semaphore is waited on while it is held.
//!
//! Disconnection: the last sender to go posts `items` once more, so the receiver wakes to an
//! empty queue, which it reads as "no sender left" ([`RecvError`]) and passes the permit on for
//! its next `recv`. A receiver that goes drops what is queued and posts `slots` once: a sender
//! sleeping for room wakes, finds no receiver ([`SendError`], with its message) and passes the
//! permit on to the next.
//!
//! What a simulated CPU is charged: the semaphores' atomics and, when one sleeps, the futex
//! system calls and the wake-up; the queue's own memory is not charged (it stands for a
//! kernel's socket buffer, not for shared memory a model would lay out).

use crate::sync::Mutex;
use crate::Semaphore;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

/// The receiver has gone; the message was not sent and is handed back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receiver has gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Every sender has gone and the queue is empty.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders have all gone")
    }
}

impl std::error::Error for RecvError {}

/// The queue and the counts of its ends.
struct State<T> {
    queue: VecDeque<T>,
    senders: usize,
    receiver: bool,
}

struct Chan<T> {
    state: Mutex<State<T>>,
    /// One permit per message queued (and one more once every sender has gone).
    items: Semaphore,
    /// A bounded channel's free places, one permit each.
    slots: Option<Semaphore>,
}

impl<T> Chan<T> {
    /// `f` on the queue and the counts, under the mutex.
    fn with_state<R>(&self, f: impl FnOnce(&mut State<T>) -> R) -> R {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut s)
    }
}

/// The sending end; clone it for more senders.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving end.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

/// A channel that holds at most `cap` messages (at least 1): a sender waits for room.
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let cap = u32::try_from(cap.max(1)).unwrap_or(u32::MAX);
    make(Some(Semaphore::new(cap)))
}

/// A channel without a bound: a send never waits.
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    make(None)
}

fn make<T>(slots: Option<Semaphore>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            senders: 1,
            receiver: true,
        }),
        items: Semaphore::new(0),
        slots,
    });
    (
        Sender {
            chan: Arc::clone(&chan),
        },
        Receiver { chan },
    )
}

impl<T> Sender<T> {
    /// Queues `msg`, first waiting for room in a bounded channel. `Err` with the message if
    /// the receiver has gone.
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        let chan = &*self.chan;
        if let Some(slots) = &chan.slots {
            slots.lock();
        }
        let pushed = chan.with_state(|s| {
            if s.receiver {
                s.queue.push_back(msg);
                Ok(())
            } else {
                Err(msg)
            }
        });
        if let Err(msg) = pushed {
            // Pass the wake-up on to the next sender waiting for room.
            if let Some(slots) = &chan.slots {
                slots.unlock();
            }
            return Err(SendError(msg));
        }
        chan.items.unlock();
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.with_state(|s| s.senders += 1);
        Sender {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let last = self.chan.with_state(|s| {
            s.senders -= 1;
            s.senders == 0
        });
        if last {
            self.chan.items.unlock();
        }
    }
}

impl<T> Receiver<T> {
    /// The next message, waiting for one; `Err` once the queue is empty and every sender has
    /// gone.
    pub fn recv(&self) -> Result<T, RecvError> {
        let chan = &*self.chan;
        chan.items.lock();
        let (msg, senders) = chan.with_state(|s| (s.queue.pop_front(), s.senders));
        match msg {
            Some(msg) => {
                if let Some(slots) = &chan.slots {
                    slots.unlock();
                }
                Ok(msg)
            }
            None => {
                debug_assert_eq!(senders, 0, "an items permit without a message");
                // Keep the channel's end visible to the next call.
                chan.items.unlock();
                Err(RecvError)
            }
        }
    }

    /// The messages, waiting for each, until every sender has gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(|| self.recv().ok())
    }
}

/// The messages of a [`Receiver`] until every sender has gone (its `into_iter`).
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let queued = self.chan.with_state(|s| {
            s.receiver = false;
            std::mem::take(&mut s.queue)
        });
        drop(queued);
        if let Some(slots) = &self.chan.slots {
            slots.unlock();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn messages_arrive_in_order_and_the_end_after_the_last_sender() {
        let (tx, rx) = bounded(2);
        let got = std::thread::scope(|s| {
            let tx2 = tx.clone();
            s.spawn(move || {
                for i in 0..100 {
                    tx.send(i).unwrap();
                }
            });
            drop(tx2);
            rx.iter().collect::<Vec<_>>()
        });
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(rx.recv(), Err(RecvError), "the end is seen again");
    }

    #[test]
    fn a_sender_waiting_for_room_fails_once_the_receiver_goes() {
        let (tx, rx) = bounded(1);
        tx.send(1).unwrap();
        std::thread::scope(|s| {
            let blocked = s.spawn(|| tx.send(2));
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(rx);
            assert_eq!(blocked.join().unwrap(), Err(SendError(2)));
        });
        assert_eq!(tx.send(3), Err(SendError(3)));
    }

    #[test]
    fn an_unbounded_send_never_waits() {
        let (tx, rx) = unbounded();
        for i in 0..10_000 {
            tx.send(i).unwrap();
        }
        drop(tx);
        assert_eq!(rx.into_iter().count(), 10_000);
    }
}
