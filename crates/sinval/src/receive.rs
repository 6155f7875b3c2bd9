//! The receiving side in sinval.c: `ReceiveSharedInvalidMessages`, which reads everything
//! queued for the backend in batches of [`MAXINVALMSGS`], and the catch-up interrupt.
//!
//! A backend calls `AcceptInvalidationMessages` (inval.c) at every transaction start and
//! whenever it takes a heavyweight lock; that calls `ReceiveSharedInvalidMessages`, which calls
//! `SIGetDataEntries` into a static 32-message buffer until a call returns a partly filled
//! buffer (caught up) or a reset (after which the caches are rebuilt from scratch and nothing
//! else needs reading). At the end, if a catch-up interrupt arrived, it clears it and runs
//! `SICleanupQueue` itself, passing the signal on to the next backend that lags.
//!
//! Differences from PostgreSQL: the static buffer lives in the [`SinvalBackend`] handle, and
//! the recursion guard (`nextmsg` / `nummsgs` kept across a nested call made by a message's
//! handler) is left out, since the handlers here cannot call back into the queue.

use crate::{Got, SharedInvalidationMessage, SinvalBackend, SinvalError, SinvalQueue};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;
use pglocks_spin::RawSpinLock;

/// `MAXINVALMSGS`: messages taken per `SIGetDataEntries` call.
pub const MAXINVALMSGS: usize = 32;

/// What one [`SinvalQueue::receive_shared_invalid_messages`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Messages handed to the handler.
    pub messages: u64,
    /// Whether the backend had been reset and its caches were discarded (then read last).
    pub reset: bool,
}

impl<K: RawLwLock, R: RawSpinLock> SinvalQueue<K, R> {
    /// Models `ReceiveSharedInvalidMessages`: hands every message queued for the backend to
    /// `inval` in order, or calls `reset` (`InvalidateSystemCaches`) if the backend was reset,
    /// then answers a pending catch-up interrupt with a cleanup.
    ///
    /// Every message queued before the call is handled or covered by the reset.
    #[inline]
    pub fn receive_shared_invalid_messages(
        &self,
        b: &mut Backend,
        me: &mut SinvalBackend,
        mut inval: impl FnMut(&SharedInvalidationMessage),
        mut reset: impl FnMut(),
    ) -> Result<Received, SinvalError> {
        let s = self.state(me)?;
        let mut got = Received::default();
        loop {
            match self.get(b, s, &mut me.buffer)? {
                Got::Reset => {
                    got.reset = true;
                    reset();
                    break;
                }
                Got::Messages(n) => {
                    me.buffer[..n].iter().for_each(&mut inval);
                    got.messages += n as u64;
                    // A full buffer may mean more is waiting.
                    if n < MAXINVALMSGS {
                        break;
                    }
                }
            }
        }
        if got.messages > 0 || got.reset {
            self.count_received(b, got);
        }
        if self.take_catchup(s) {
            // Caught up: pass the signal on to the next laggard.
            self.cleanup_queue(b, false, 0)?;
        }
        Ok(got)
    }

    #[cold]
    fn count_received(&self, b: &mut Backend, got: Received) {
        b.stats.events.count("sinval.messages_read", got.messages);
        if got.reset {
            b.stats.events.count("sinval.cache_resets", 1);
        }
    }

    /// Models `AcceptInvalidationMessages` (inval.c) for a backend without caches: receives
    /// everything pending and reports what was read.
    #[inline]
    pub fn accept_invalidation_messages(
        &self,
        b: &mut Backend,
        me: &mut SinvalBackend,
    ) -> Result<Received, SinvalError> {
        self.receive_shared_invalid_messages(b, me, |_| {}, || {})
    }

    /// Models `ProcessCatchupInterrupt`: while a catch-up interrupt is pending, receive (which
    /// clears it and passes it on). What an idle backend does when signalled.
    pub fn process_catchup_interrupt(
        &self,
        b: &mut Backend,
        me: &mut SinvalBackend,
    ) -> Result<Received, SinvalError> {
        let mut total = Received::default();
        while self.catchup_pending(me)? {
            let got = self.accept_invalidation_messages(b, me)?;
            total.messages += got.messages;
            total.reset |= got.reset;
        }
        Ok(total)
    }
}
