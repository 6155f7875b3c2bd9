//! The receiving end: `shm_mq_receive` and `shm_mq_receive_bytes` (shm_mq.c).
//!
//! A receive first gives back, through `mq_bytes_read`, what it consumed earlier once that is more
//! than a quarter of the ring; then it reads the length word and, if the whole message lies in
//! the ring without wrapping, takes it in one step. Otherwise it copies the message piece by piece
//! into the handle's buffer, giving the consumed bytes back whenever it must wait for more
//! (which is what lets a message larger than the ring through).

use crate::{
    maxalign, wait_latch, End, ShmMqError, ShmMqHandle, ShmMqResult, LENGTH_WORD, MAX_ALLOC_SIZE,
    MQH_INITIAL_BUFSIZE,
};
use pglocks_proc::Backend;
use pglocks_sync::atomic::{fence, Ordering};

/// What `shm_mq_receive_bytes` found: how it ended, and on success how many bytes can be read
/// contiguously at which ring offset (`*nbytesp`, `*datap`).
struct Readable {
    result: ShmMqResult,
    len: usize,
    offset: usize,
}

impl ShmMqHandle {
    /// Models `shm_mq_receive`: the next message, in the handle's buffer until the next receive.
    ///
    /// With `nowait`, returns [`ShmMqResult::WouldBlock`] instead of sleeping on an empty ring;
    /// the call picks up where it stopped when retried. [`ShmMqResult::Detached`] comes only once
    /// every message written before the sender detached has been received.
    pub fn receive(
        &mut self,
        b: &mut Backend,
        nowait: bool,
    ) -> Result<ShmMqResult<&[u8]>, ShmMqError> {
        self.check_end(b, End::Receiver)?;
        if !self.counterparty_attached {
            // No data before the sender is there. Look at "gone" before "ever attached": a
            // sender that attached and detached in between must not look like one never seen.
            if nowait {
                let gone = self.counterparty_gone();
                if self.mq.sender(b)?.is_none() {
                    return Ok(if gone {
                        ShmMqResult::Detached
                    } else {
                        ShmMqResult::WouldBlock
                    });
                }
            } else if !self.wait_internal(b, End::Sender)? && self.mq.sender(b)?.is_none() {
                self.mq.header.detached.store(true, Ordering::Release);
                return Ok(ShmMqResult::Detached);
            }
            self.counterparty_attached = true;
        }

        // Give back what was consumed, once it is worth a latch-set.
        if self.consume_pending > self.mq.ring_size / 4 {
            self.mq.inc_bytes_read(&self.procs, self.consume_pending);
            self.consume_pending = 0;
        }

        if !self.length_word_complete {
            let r = self.receive_bytes(b, LENGTH_WORD, nowait);
            if r.result != ShmMqResult::Success(()) {
                return Ok(cast(r.result));
            }
            // The ring holds whole words, so the length word is never split.
            debug_assert!(self.partial_bytes == 0 && r.len >= LENGTH_WORD);
            let mut word = [0u8; LENGTH_WORD];
            self.mq.ring_read(r.offset, &mut word);
            let nbytes = u64::from_ne_bytes(word) as usize;
            if nbytes > MAX_ALLOC_SIZE {
                return Err(ShmMqError::InvalidMessageSize { size: nbytes });
            }
            let needed = maxalign(LENGTH_WORD) + maxalign(nbytes);
            if r.len >= needed {
                // The whole message is here: take it at once.
                self.consume_pending += needed;
                self.grow_buffer(nbytes);
                self.mq
                    .ring_read(r.offset + maxalign(LENGTH_WORD), &mut self.buffer[..nbytes]);
                return Ok(ShmMqResult::Success(&self.buffer[..nbytes]));
            }
            self.expected_bytes = nbytes;
            self.length_word_complete = true;
            self.consume_pending += maxalign(LENGTH_WORD);
        }
        let nbytes = self.expected_bytes;

        let (mut len, mut offset) = (0, 0);
        if self.partial_bytes == 0 {
            let r = self.receive_bytes(b, nbytes, nowait);
            if r.result != ShmMqResult::Success(()) {
                return Ok(cast(r.result));
            }
            self.grow_buffer(nbytes);
            if r.len >= nbytes {
                // Contiguous in the ring.
                self.length_word_complete = false;
                self.consume_pending += maxalign(nbytes);
                self.mq.ring_read(r.offset, &mut self.buffer[..nbytes]);
                return Ok(ShmMqResult::Success(&self.buffer[..nbytes]));
            }
            (len, offset) = (r.len, r.offset);
        }

        // The message wraps or is larger than what is here: reassemble it in the buffer.
        loop {
            if len > 0 {
                let at = self.partial_bytes;
                self.mq.ring_read(offset, &mut self.buffer[at..at + len]);
                self.partial_bytes += len;
            }
            // Padding only ever follows a message's last piece.
            debug_assert!(self.partial_bytes == nbytes || len == maxalign(len));
            self.consume_pending += maxalign(len);
            if self.partial_bytes >= nbytes {
                break;
            }
            let still_needed = nbytes - self.partial_bytes;
            let r = self.receive_bytes(b, still_needed, nowait);
            if r.result != ShmMqResult::Success(()) {
                return Ok(cast(r.result));
            }
            (len, offset) = (r.len.min(still_needed), r.offset);
        }
        self.length_word_complete = false;
        self.partial_bytes = 0;
        Ok(ShmMqResult::Success(&self.buffer[..nbytes]))
    }

    /// Grows the reassembly buffer to hold `nbytes`: at first [`MQH_INITIAL_BUFSIZE`], then the
    /// next power of two, at most `MaxAllocSize`.
    #[inline]
    fn grow_buffer(&mut self, nbytes: usize) {
        if self.buffer.len() < nbytes {
            let len = nbytes
                .next_power_of_two()
                .clamp(MQH_INITIAL_BUFSIZE, MAX_ALLOC_SIZE);
            self.buffer = vec![0; len];
        }
    }

    /// Models `shm_mq_receive_bytes`: waits until `bytes_needed` bytes can be read, or the data
    /// reaches the end of the ring, or the queue is detached. Before sleeping, gives back what
    /// was consumed so far, so that the sender has room to write more.
    fn receive_bytes(&mut self, b: &mut Backend, bytes_needed: usize, nowait: bool) -> Readable {
        let mq = &*self.mq;
        let ring_size = mq.ring_size as u64;
        loop {
            let written = mq.header.bytes_written.load(Ordering::Relaxed);
            // Only this backend moves mq_bytes_read; count what it consumed but has not given back.
            let read = mq.header.bytes_read.load(Ordering::Relaxed) + self.consume_pending as u64;
            let used = written - read;
            debug_assert!(used <= ring_size);
            let offset = read % ring_size;
            if used >= bytes_needed as u64 || offset + used >= ring_size {
                // pg_read_barrier: the read of mq_bytes_written before the reads of the ring.
                fence(Ordering::Acquire);
                return Readable {
                    result: ShmMqResult::Success(()),
                    len: used.min(ring_size - offset) as usize,
                    offset: offset as usize,
                };
            }
            // Detached only matters once what is here is not enough: a message the sender wrote
            // before detaching can still be received.
            if mq.header.detached.load(Ordering::Relaxed) {
                // The sender may have moved mq_bytes_written just before it detached.
                fence(Ordering::Acquire);
                if written != mq.header.bytes_written.load(Ordering::Relaxed) {
                    pglocks_sync::hint::spin_loop();
                    continue;
                }
                return Readable {
                    result: ShmMqResult::Detached,
                    len: 0,
                    offset: 0,
                };
            }
            // Not enough: make room for the sender before waiting for it.
            if self.consume_pending > 0 {
                mq.inc_bytes_read(&self.procs, self.consume_pending);
                self.consume_pending = 0;
            }
            if nowait {
                return Readable {
                    result: ShmMqResult::WouldBlock,
                    len: 0,
                    offset: 0,
                };
            }
            wait_latch(b, "MessageQueueReceive");
        }
    }
}

/// A data-less result as the result of a receive.
#[inline]
fn cast<'a>(r: ShmMqResult) -> ShmMqResult<&'a [u8]> {
    match r {
        ShmMqResult::Success(()) => ShmMqResult::Success(&[]),
        ShmMqResult::WouldBlock => ShmMqResult::WouldBlock,
        ShmMqResult::Detached => ShmMqResult::Detached,
    }
}
