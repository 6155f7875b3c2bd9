//! The sending end: `shm_mq_send`, `shm_mq_sendv` and `shm_mq_send_bytes` (shm_mq.c), and the
//! send with a timeout that parallel apply builds from a non-blocking send (`pa_send_data` in
//! replication/logical/applyparallelworker.c).
//!
//! A send writes the length word, then the payload, each through `send_bytes`, which copies as
//! much as fits (up to the ring's end) and, on a full ring, publishes what is pending, sets the
//! receiver's latch and sleeps on its own latch (or returns `WouldBlock`). The bytes written so far
//! are kept in the handle, so a non-blocking send resumes where it stopped.

use crate::{
    maxalign, maxalign_down, set_latch, wait_latch, End, ShmMqError, ShmMqHandle, ShmMqResult,
    LENGTH_WORD, MAXIMUM_ALIGNOF, MAX_ALLOC_SIZE, NO_PROC,
};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{fence, Ordering};
use pglocks_sync::time::{Duration, Instant};

/// `SHM_SEND_RETRY_INTERVAL_MS` (applyparallelworker.c): how long `pa_send_data` sleeps on its
/// latch between two non-blocking sends.
pub const SHM_SEND_RETRY_INTERVAL_MS: u64 = 1000;

/// `SHM_SEND_TIMEOUT_MS` (applyparallelworker.c): how long `pa_send_data` retries before the
/// leader gives up on the queue and serializes the transaction's changes to a file.
pub const SHM_SEND_TIMEOUT_MS: u64 = 10_000 - SHM_SEND_RETRY_INTERVAL_MS;

impl ShmMqHandle {
    /// Models `shm_mq_send`: sends `data` as one message.
    ///
    /// With `nowait`, returns [`ShmMqResult::WouldBlock`] instead of sleeping on a full ring; the
    /// caller must then retry with the same `data`. With `force_flush` (or when batching is off,
    /// before 15) the message is published to the receiver at once; otherwise only once more than
    /// a quarter of the ring is pending.
    #[inline]
    pub fn send(
        &mut self,
        b: &mut Backend,
        data: &[u8],
        nowait: bool,
        force_flush: bool,
    ) -> Result<ShmMqResult, ShmMqError> {
        self.sendv(b, &[data], nowait, force_flush)
    }

    /// Models `shm_mq_sendv`: sends the concatenation of `iov` as one message, combining the tail
    /// of a chunk that ends off an 8-byte boundary with the next chunks' bytes (every chunk in the
    /// ring but a message's last must be `MAXALIGN`ed).
    pub fn sendv(
        &mut self,
        b: &mut Backend,
        iov: &[&[u8]],
        nowait: bool,
        force_flush: bool,
    ) -> Result<ShmMqResult, ShmMqError> {
        self.check_end(b, End::Sender)?;
        let nbytes = iov
            .iter()
            .try_fold(0usize, |n, c| n.checked_add(c.len()))
            .unwrap_or(usize::MAX);
        if nbytes > MAX_ALLOC_SIZE {
            return Err(ShmMqError::MessageTooLarge { size: nbytes });
        }
        if let Some(started) = self.send_in_progress {
            if started != nbytes {
                return Err(ShmMqError::SendInProgress {
                    started,
                    now: nbytes,
                });
            }
        }
        match self.sendv_parts(b, iov, nbytes, nowait)? {
            ShmMqResult::Success(()) => {}
            ShmMqResult::WouldBlock => {
                self.send_in_progress = Some(nbytes);
                return Ok(ShmMqResult::WouldBlock);
            }
            ShmMqResult::Detached => {
                // Reset, in case the caller sends another message.
                self.reset_send();
                return Ok(ShmMqResult::Detached);
            }
        }
        self.reset_send();
        if self.mq.header.detached.load(Ordering::Acquire) {
            return Ok(ShmMqResult::Detached);
        }
        let receiver = if self.counterparty_attached {
            self.counterparty(End::Sender)
        } else {
            let r = {
                let _mutex = self.mq.header.mutex.lock(b)?;
                self.mq.header.receiver.load(Ordering::Relaxed)
            };
            self.counterparty_attached = r != NO_PROC;
            r
        };
        if !self.mq.config.batch_send_pending {
            // 9.4–14: every chunk was published as written; only the latch is left to set.
            if receiver != NO_PROC {
                set_latch(&self.procs, receiver);
            }
        } else if force_flush || self.send_pending > self.mq.ring_size >> 2 {
            self.mq.inc_bytes_written(self.send_pending);
            if receiver != NO_PROC {
                set_latch(&self.procs, receiver);
            }
            self.send_pending = 0;
        }
        Ok(ShmMqResult::Success(()))
    }

    /// `mqh_partial_bytes = 0; mqh_length_word_complete = false`.
    #[inline]
    fn reset_send(&mut self) {
        self.partial_bytes = 0;
        self.length_word_complete = false;
        self.send_in_progress = None;
    }

    /// The length word and the payload of `shm_mq_sendv`, resuming from the handle's progress.
    #[inline]
    fn sendv_parts(
        &mut self,
        b: &mut Backend,
        iov: &[&[u8]],
        nbytes: usize,
        nowait: bool,
    ) -> Result<ShmMqResult, ShmMqError> {
        if !self.length_word_complete {
            let word = (nbytes as u64).to_ne_bytes();
            let (res, written) = self.send_bytes(b, &word[self.partial_bytes..], nowait)?;
            self.partial_bytes += written;
            if self.partial_bytes >= LENGTH_WORD {
                self.partial_bytes = 0;
                self.length_word_complete = true;
            }
            if res != ShmMqResult::Success(()) {
                return Ok(res);
            }
            // A length word of MAXIMUM_ALIGNOF bytes is never split: rings hold whole words.
            debug_assert!(self.length_word_complete);
        }
        let mut offset = self.partial_bytes;
        let mut which = 0;
        while self.partial_bytes < nbytes {
            // Find the chunk that holds the next byte to send.
            if offset >= iov[which].len() {
                offset -= iov[which].len();
                which += 1;
                if which >= iov.len() {
                    break;
                }
                continue;
            }
            let last = which + 1 == iov.len();
            let (res, written) = if !last && offset + MAXIMUM_ALIGNOF > iov[which].len() {
                // Fewer than 8 bytes left in a chunk that is not the last: gather up to 8 bytes
                // across the following chunks, so the ring stays aligned.
                let mut tmp = [0u8; MAXIMUM_ALIGNOF];
                let mut j = 0;
                while j < MAXIMUM_ALIGNOF {
                    if offset < iov[which].len() {
                        tmp[j] = iov[which][offset];
                        j += 1;
                        offset += 1;
                    } else {
                        offset -= iov[which].len();
                        which += 1;
                        if which >= iov.len() {
                            break;
                        }
                    }
                }
                self.send_bytes(b, &tmp[..j], nowait)?
            } else {
                let mut chunk = iov[which].len() - offset;
                if !last {
                    chunk = maxalign_down(chunk);
                }
                let r = self.send_bytes(b, &iov[which][offset..offset + chunk], nowait)?;
                offset += r.1;
                r
            };
            self.partial_bytes += written;
            if res != ShmMqResult::Success(()) {
                return Ok(res);
            }
        }
        Ok(ShmMqResult::Success(()))
    }

    /// Models `shm_mq_send_bytes`: writes all of `data` into the ring, or as much as fits before a
    /// non-blocking send would sleep; returns how it ended and the bytes written.
    fn send_bytes(
        &mut self,
        b: &mut Backend,
        data: &[u8],
        nowait: bool,
    ) -> Result<(ShmMqResult, usize), ShmMqError> {
        let mq = &*self.mq;
        let ring_size = mq.ring_size;
        let mut sent = 0;
        while sent < data.len() {
            let rb = mq.header.bytes_read.load(Ordering::Relaxed);
            // Only this backend moves mq_bytes_written.
            let wb = mq.header.bytes_written.load(Ordering::Relaxed) + self.send_pending as u64;
            let used = (wb - rb) as usize;
            debug_assert!(used <= ring_size);
            let available = (ring_size - used).min(data.len() - sent);
            if mq.header.detached.load(Ordering::Relaxed) {
                return Ok((ShmMqResult::Detached, sent));
            }
            if available == 0 && !self.counterparty_attached {
                // Full before the receiver was ever seen: wait for it to attach.
                if nowait {
                    if self.counterparty_gone() {
                        return Ok((ShmMqResult::Detached, sent));
                    }
                    if mq.receiver(b)?.is_none() {
                        return Ok((ShmMqResult::WouldBlock, sent));
                    }
                } else if !self.wait_internal(b, End::Receiver)? {
                    mq.header.detached.store(true, Ordering::Release);
                    return Ok((ShmMqResult::Detached, sent));
                }
                self.counterparty_attached = true;
                // It may have read already: look at the ring again before sleeping.
                pglocks_sync::hint::spin_loop();
            } else if available == 0 {
                // Full: publish what is pending, wake the receiver, sleep until it reads.
                mq.inc_bytes_written(self.send_pending);
                self.send_pending = 0;
                set_latch(&self.procs, self.counterparty(End::Sender));
                if nowait {
                    return Ok((ShmMqResult::WouldBlock, sent));
                }
                wait_latch(b, "MessageQueueSend");
            } else {
                let offset = (wb % ring_size as u64) as usize;
                let now = available.min(ring_size - offset);
                // pg_memory_barrier: the read of mq_bytes_read above before the writes into the
                // bytes it gave back.
                fence(Ordering::SeqCst);
                mq.ring_write(offset, &data[sent..sent + now]);
                sent += now;
                debug_assert!(sent == data.len() || now == maxalign(now));
                if mq.config.batch_send_pending {
                    self.send_pending += maxalign(now);
                } else {
                    mq.inc_bytes_written(maxalign(now));
                }
            }
        }
        Ok((ShmMqResult::Success(()), sent))
    }

    /// A send with a timeout, as parallel apply's leader sends to a parallel apply worker
    /// (`pa_send_data` in applyparallelworker.c; `shm_mq_send` itself has none): non-blocking
    /// sends with `force_flush`, and between them a sleep on the latch of at most
    /// `retry_interval`, until the message is sent ([`ShmMqResult::Success`]), the queue is
    /// detached (PostgreSQL raises "could not send data to shared-memory queue"), or `timeout`
    /// has passed since the first retry ([`ShmMqResult::WouldBlock`]: `pa_send_data` returns
    /// false and the leader serializes the transaction's remaining changes to a file).
    ///
    /// PostgreSQL waits [`SHM_SEND_RETRY_INTERVAL_MS`] and gives up after
    /// [`SHM_SEND_TIMEOUT_MS`]. After a timeout the message may be partly in the ring: the
    /// handle keeps its progress, and only the same message may be sent on it next.
    pub fn send_with_timeout(
        &mut self,
        b: &mut Backend,
        data: &[u8],
        retry_interval: Duration,
        timeout: Duration,
    ) -> Result<ShmMqResult, ShmMqError> {
        let mut start = None;
        loop {
            match self.send(b, data, true, true)? {
                ShmMqResult::WouldBlock => {}
                done => return Ok(done),
            }
            // WaitLatch with WL_TIMEOUT: woken by a latch-set or not, try again.
            b.wait_latch_event(Some(retry_interval), "LogicalApplySendData");
            match start {
                None => start = Some(Instant::now()),
                Some(s) if s.elapsed() >= timeout => return Ok(ShmMqResult::WouldBlock),
                Some(_) => {}
            }
        }
    }
}
