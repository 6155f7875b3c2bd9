//! Models the buffer-mapping paths of bufmgr.c: `ReadBuffer` (`ReadBuffer_common`),
//! `BufferAlloc`, `PinBuffer` / `PinBuffer_Locked` / `UnpinBuffer`, `ReleaseBuffer`,
//! `StartBufferIO` / `TerminateBufferIO` / `WaitIO` and `InvalidateBuffer`. The crate
//! documentation walks through the algorithm.

use crate::desc::*;
use crate::freelist::VictimSearch;
use crate::{BufMgr, BufMgrError, Buffer, BufferTag, IoWaiters, PrivateRefCount};
use pglocks_lwlock::{LwLockMode, Padding, RawLwLock};
use pglocks_proc::Backend;

/// The spinlock named in a stuck-spinlock error of a buffer's I/O condition variable.
const IO_CV: &str = "a buffer's I/O condition variable";

/// What `BufferAlloc` found.
enum Alloc {
    /// The page is in the buffer and valid (or was read in by the backend we waited for).
    Found(u32),
    /// This backend must read the page in: `BM_IO_IN_PROGRESS` is set (and, up to 13, its I/O
    /// lock held).
    MustRead(u32),
}

impl<K: RawLwLock, P: Padding> BufMgr<K, P> {
    /// Models `PinBuffer`: pins `buf_id` for this backend — a shared pin (refcount + 1, usage
    /// count + 1 up to [`BM_MAX_USAGE_COUNT`]) unless it holds one already, in which case only
    /// its private count rises. Returns whether the page is valid (`BM_VALID`).
    #[inline]
    pub fn pin_buffer(
        &self,
        b: &mut Backend,
        refs: &mut PrivateRefCount,
        buf_id: u32,
    ) -> Result<bool, BufMgrError> {
        let desc = self.desc(buf_id)?;
        if refs.get(buf_id) > 0 {
            refs.add(buf_id);
            // Up to 16 an earlier pin means a valid page; 17 reads BM_VALID, unlocked.
            return Ok(!self.repeat_pin_reads_valid
                || desc.state.load(pglocks_sync::atomic::Ordering::Relaxed) & BM_VALID != 0);
        }
        let state = desc.update_unlocked(b, self.pin, self.hdr, |s| {
            let mut s = s + BUF_REFCOUNT_ONE;
            if usage_count(s) < BM_MAX_USAGE_COUNT {
                s += BUF_USAGECOUNT_ONE;
            }
            s
        })?;
        refs.add(buf_id);
        Ok(state & BM_VALID != 0)
    }

    /// Models `PinBuffer_Locked`: pins a buffer whose header lock the caller holds (with
    /// `state` its locked word), without touching the usage count, and unlocks the header.
    #[inline]
    fn pin_buffer_locked(&self, refs: &mut PrivateRefCount, buf_id: u32, state: u32) {
        self.descs[buf_id as usize].unlock(state + BUF_REFCOUNT_ONE);
        refs.add(buf_id);
    }

    /// Models `UnpinBuffer`: drops one of this backend's pins of `buf_id`, and the shared pin
    /// with the last one.
    #[inline]
    pub fn unpin_buffer(
        &self,
        b: &mut Backend,
        refs: &mut PrivateRefCount,
        buf_id: u32,
    ) -> Result<(), BufMgrError> {
        let desc = self.desc(buf_id)?;
        match refs.remove(buf_id) {
            None => Err(BufMgrError::NotPinned(buf_id)),
            Some(0) => desc
                .update_unlocked(b, self.pin, self.hdr, |s| s - BUF_REFCOUNT_ONE)
                .map(drop),
            Some(_) => Ok(()),
        }
    }

    /// Models `LockBuffer` with `BUFFER_LOCK_SHARE` (`mode` shared) or `BUFFER_LOCK_EXCLUSIVE`:
    /// takes the buffer's content lock, an LWLock of tranche `BufferContent`, sleeping while a
    /// conflicting holder has it. The caller holds a pin of `buffer`.
    #[inline]
    pub fn lock_buffer(
        &self,
        b: &mut Backend,
        buffer: Buffer,
        mode: LwLockMode,
    ) -> Result<(), BufMgrError> {
        self.desc(buffer.id())?.content_lock.acquire(b, mode)?;
        Ok(())
    }

    /// Models `ConditionalLockBuffer`: the content lock exclusively if it is free right now.
    #[inline]
    pub fn conditional_lock_buffer(
        &self,
        b: &mut Backend,
        buffer: Buffer,
    ) -> Result<bool, BufMgrError> {
        Ok(self
            .desc(buffer.id())?
            .content_lock
            .conditional_acquire(b, LwLockMode::Exclusive)?)
    }

    /// Models `ConditionalLockBufferForCleanup`: the content lock exclusively, at once, and
    /// only while this backend's pin is the one pin of `buffer` — its own pins counted once
    /// (`GetPrivateRefCount`, which must be 1), then, under the header lock, every backend's
    /// (the shared refcount). The caller holds a pin. Returns whether it got the lock.
    pub fn conditional_lock_buffer_for_cleanup(
        &self,
        b: &mut Backend,
        refs: &PrivateRefCount,
        buffer: Buffer,
    ) -> Result<bool, BufMgrError> {
        let buf_id = buffer.id();
        if refs.get(buf_id) != 1 || !self.conditional_lock_buffer(b, buffer)? {
            return Ok(false);
        }
        let desc = self.desc(buf_id)?;
        let state = desc.lock(b, self.hdr)?;
        desc.unlock(state);
        if refcount(state) == 1 {
            return Ok(true);
        }
        self.unlock_buffer(b, buffer)?;
        Ok(false)
    }

    /// Models `LockBuffer` with `BUFFER_LOCK_UNLOCK`: releases the content lock.
    #[inline]
    pub fn unlock_buffer(&self, b: &mut Backend, buffer: Buffer) -> Result<(), BufMgrError> {
        self.desc(buffer.id())?.content_lock.release(b)?;
        Ok(())
    }

    /// Models `ReleaseBuffer`.
    #[inline]
    pub fn release_buffer(
        &self,
        b: &mut Backend,
        refs: &mut PrivateRefCount,
        buffer: Buffer,
    ) -> Result<(), BufMgrError> {
        self.unpin_buffer(b, refs, buffer.id())
    }

    /// Models `ReadBuffer_common` for a shared buffer: the buffer holding `tag`, pinned, read
    /// in if it was not there. Counts `bufmgr.hits` or `bufmgr.reads`.
    pub fn read_buffer(
        &self,
        b: &mut Backend,
        refs: &mut PrivateRefCount,
        tag: BufferTag,
    ) -> Result<Buffer, BufMgrError> {
        match self.buffer_alloc(b, refs, tag)? {
            Alloc::Found(buf_id) => {
                b.stats.events.count("bufmgr.hits", 1);
                Ok(Buffer(buf_id))
            }
            Alloc::MustRead(buf_id) => {
                if !self.read_latency.is_zero() {
                    b.sleep_as_wait(self.read_latency, "DataFileRead", "IO");
                }
                self.terminate_buffer_io(b, buf_id, true)?;
                b.stats.events.count("bufmgr.reads", 1);
                Ok(Buffer(buf_id))
            }
        }
    }

    /// A pinned buffer's tag (`BufferGetTag`).
    pub fn buffer_tag(&self, b: &mut Backend, buffer: Buffer) -> Result<BufferTag, BufMgrError> {
        let desc = self.desc(buffer.id())?;
        let state = desc.lock(b, self.hdr)?;
        let tag = desc.tag(state);
        desc.unlock(state);
        Ok(tag)
    }

    /// The end of `BufferAlloc` for a buffer found in the table and pinned: valid, or being
    /// read by someone else (wait for it), or left invalid by a failed read (read it).
    fn found(&self, b: &mut Backend, buf_id: u32, valid: bool) -> Result<Alloc, BufMgrError> {
        if !valid && self.start_buffer_io(b, buf_id, true)? {
            return Ok(Alloc::MustRead(buf_id));
        }
        Ok(Alloc::Found(buf_id))
    }

    /// Models `BufferAlloc` (9.5–15 shape; see the crate documentation): the buffer for
    /// `tag`, pinned — found in the table, or a victim remapped to it.
    fn buffer_alloc(
        &self,
        b: &mut Backend,
        refs: &mut PrivateRefCount,
        tag: BufferTag,
    ) -> Result<Alloc, BufMgrError> {
        let new_hash = tag.hash_code();
        let new_part = self.table.partition_of(new_hash);
        let new_lock = self.table.lock(new_part);
        new_lock.acquire(b, LwLockMode::Shared)?;
        // SAFETY: the new tag's partition lock is held (shared).
        if let Some(buf_id) = unsafe { self.table.lookup(&tag, new_hash) } {
            let valid = self.pin_buffer(b, refs, buf_id);
            new_lock.release(b)?;
            return self.found(b, buf_id, valid?);
        }
        new_lock.release(b)?;

        let (buf_id, old) = loop {
            let victim = self.strategy_get_buffer(b)?;
            let (buf_id, state) = (victim.buf_id, victim.state);
            let desc = &self.descs[buf_id as usize];
            let old_flags = state & BUF_FLAG_MASK;
            let old_tag = desc.tag(state);
            self.pin_buffer_locked(refs, buf_id, state);
            if victim.freelist_lock_held {
                self.freelist_lock.release(b)?;
            }
            // No dirty buffers here, so no FlushBuffer.

            // The partition locks of the old tag (if any) and the new one, in ascending order.
            let old = (old_flags & BM_TAG_VALID != 0).then(|| {
                let h = old_tag.hash_code();
                (old_tag, h, self.table.partition_of(h))
            });
            let old_part = old.map(|o| o.2).filter(|&p| p != new_part);
            match old_part {
                Some(p) if p < new_part => {
                    self.table.lock(p).acquire(b, LwLockMode::Exclusive)?;
                    new_lock.acquire(b, LwLockMode::Exclusive)?;
                }
                Some(p) => {
                    new_lock.acquire(b, LwLockMode::Exclusive)?;
                    self.table.lock(p).acquire(b, LwLockMode::Exclusive)?;
                }
                None => {
                    new_lock.acquire(b, LwLockMode::Exclusive)?;
                }
            }
            let release_old = |b: &mut Backend| match old_part {
                Some(p) => self.table.lock(p).release(b),
                None => Ok(()),
            };

            // SAFETY: the new tag's partition lock is held exclusively.
            if let Some(existing) = unsafe { self.table.insert(b, tag, new_hash, buf_id)? } {
                // Someone else read the page in meanwhile: use theirs.
                self.unpin_buffer(b, refs, buf_id)?;
                release_old(b)?;
                let valid = self.pin_buffer(b, refs, existing);
                new_lock.release(b)?;
                return self.found(b, existing, valid?);
            }

            // Is the victim still ours alone? A lookup of its old tag may have pinned it.
            let state = desc.lock(b, self.hdr)?;
            if refcount(state) == 1 && state & BM_DIRTY == 0 {
                break (buf_id, (state, old));
            }
            desc.unlock(state);
            // SAFETY: the new tag's partition lock is held exclusively.
            unsafe { self.table.delete(b, &tag, new_hash)? };
            release_old(b)?;
            new_lock.release(b)?;
            self.unpin_buffer(b, refs, buf_id)?;
            b.stats.events.count("bufmgr.victim_retries", 1);
        };

        // Retag the victim: valid tag, usage count 1, page not yet valid.
        let (mut state, old) = old;
        let desc = &self.descs[buf_id as usize];
        desc.set_tag(state, tag);
        state &= !(BM_VALID
            | BM_DIRTY
            | BM_JUST_DIRTIED
            | BM_CHECKPOINT_NEEDED
            | BM_IO_ERROR
            | BM_PERMANENT
            | BUF_USAGECOUNT_MASK);
        state |= BM_TAG_VALID | BM_PERMANENT | BUF_USAGECOUNT_ONE;
        desc.unlock(state);
        let mut deleted = true;
        if let Some((old_tag, old_hash, old_part)) = old {
            // SAFETY: the old tag's partition lock is held exclusively (it is the new tag's
            // partition, or was taken beside it).
            deleted = unsafe { self.table.delete(b, &old_tag, old_hash)? };
            b.stats.events.count("bufmgr.evictions", 1);
            if old_part != new_part {
                self.table.lock(old_part).release(b)?;
            }
        }
        new_lock.release(b)?;
        if !deleted {
            return Err(BufMgrError::TableCorrupted);
        }
        if self.start_buffer_io(b, buf_id, true)? {
            Ok(Alloc::MustRead(buf_id))
        } else {
            Ok(Alloc::Found(buf_id))
        }
    }

    /// Models `StartBufferIO`: waits for any I/O on the buffer to end; then, if the buffer
    /// still needs the I/O (for a read: it is not valid), sets `BM_IO_IN_PROGRESS` and returns
    /// `true` — up to 13 holding the buffer's I/O lock, which it takes first. `false` if
    /// someone else did the I/O meanwhile.
    fn start_buffer_io(
        &self,
        b: &mut Backend,
        buf_id: u32,
        for_input: bool,
    ) -> Result<bool, BufMgrError> {
        let desc = &self.descs[buf_id as usize];
        let io_lock = match &self.io {
            IoWaiters::Locks(locks) => Some(&locks[buf_id as usize]),
            IoWaiters::ConditionVariables(_) => None,
        };
        let state = loop {
            if let Some(io_lock) = io_lock {
                io_lock.acquire(b, LwLockMode::Exclusive)?;
            }
            let state = desc.lock(b, self.hdr)?;
            if state & BM_IO_IN_PROGRESS == 0 {
                break state;
            }
            // With the I/O lock, only a backend that failed to get it can see this (an I/O
            // whose owner errored out); from 14, any backend that comes while the read runs.
            desc.unlock(state);
            if let Some(io_lock) = io_lock {
                io_lock.release(b)?;
            }
            self.wait_io(b, buf_id)?;
        };
        let done = if for_input {
            state & BM_VALID != 0
        } else {
            state & BM_DIRTY == 0
        };
        if done {
            desc.unlock(state);
            if let Some(io_lock) = io_lock {
                io_lock.release(b)?;
            }
            return Ok(false);
        }
        desc.unlock(state | BM_IO_IN_PROGRESS);
        Ok(true)
    }

    /// Models `TerminateBufferIO`: clears `BM_IO_IN_PROGRESS` (and sets `BM_VALID` after a
    /// successful read), then wakes the waiters: up to 13 by releasing the I/O lock, from 14
    /// by a broadcast on the buffer's condition variable.
    fn terminate_buffer_io(
        &self,
        b: &mut Backend,
        buf_id: u32,
        set_valid: bool,
    ) -> Result<(), BufMgrError> {
        let desc = &self.descs[buf_id as usize];
        let mut state = desc.lock(b, self.hdr)?;
        state &= !(BM_IO_IN_PROGRESS | BM_IO_ERROR);
        if set_valid {
            state |= BM_VALID;
        }
        desc.unlock(state);
        match &self.io {
            IoWaiters::Locks(locks) => locks[buf_id as usize].release(b)?,
            IoWaiters::ConditionVariables(cvs) => cvs[buf_id as usize]
                .0
                .broadcast(b)
                .map_err(|e| BufMgrError::stuck(IO_CV, e))?,
        }
        Ok(())
    }

    /// Models `WaitIO`: waits until `BM_IO_IN_PROGRESS` is clear, looking at it under the
    /// header lock — up to 13 by taking the buffer's I/O lock shared and letting go between two
    /// looks, from 14 by sleeping on its condition variable (prepared before the first look,
    /// so that the broadcast that follows the flag's clearing cannot be missed).
    #[cold]
    fn wait_io(&self, b: &mut Backend, buf_id: u32) -> Result<(), BufMgrError> {
        let desc = &self.descs[buf_id as usize];
        let in_progress = |b: &mut Backend| -> Result<bool, BufMgrError> {
            let state = desc.lock(b, self.hdr)?;
            desc.unlock(state);
            Ok(state & BM_IO_IN_PROGRESS != 0)
        };
        match &self.io {
            IoWaiters::Locks(locks) => {
                let io_lock = &locks[buf_id as usize];
                while in_progress(b)? {
                    io_lock.acquire(b, LwLockMode::Shared)?;
                    io_lock.release(b)?;
                }
            }
            IoWaiters::ConditionVariables(cvs) => {
                let cv = &cvs[buf_id as usize].0;
                let stuck = |e| BufMgrError::stuck(IO_CV, e);
                let prepared = cv.prepare_to_sleep(b).map_err(stuck)?;
                while in_progress(b)? {
                    cv.sleep(b, &prepared, "BufferIO").map_err(stuck)?;
                }
                // Woken by the reader's broadcast or not, nothing to pass on.
                cv.cancel_sleep(b, prepared).map_err(stuck)?;
            }
        }
        Ok(())
    }

    /// Drops the page `tag` from the buffers if it is there, as `DropRelationBuffers` does for
    /// each of a relation's pages: `true` if it was there. Fails with "buffer is pinned in
    /// InvalidateBuffer" if this backend (`refs`) has it pinned; another backend's pin is waited
    /// out, as PostgreSQL does (a busy retry: only a short-lived pin is expected).
    pub fn drop_buffer(
        &self,
        b: &mut Backend,
        refs: &PrivateRefCount,
        tag: BufferTag,
    ) -> Result<bool, BufMgrError> {
        let hash = tag.hash_code();
        let lock = self.table.lock(self.table.partition_of(hash));
        lock.acquire(b, LwLockMode::Shared)?;
        // SAFETY: the tag's partition lock is held (shared).
        let found = unsafe { self.table.lookup(&tag, hash) };
        lock.release(b)?;
        let Some(buf_id) = found else {
            return Ok(false);
        };
        let desc = &self.descs[buf_id as usize];
        let state = desc.lock(b, self.hdr)?;
        if state & BM_TAG_VALID == 0 || desc.tag(state) != tag {
            desc.unlock(state);
            return Ok(false);
        }
        self.invalidate_buffer(b, refs, buf_id, state)
    }

    /// Models `InvalidateBuffer`, entered with the header lock held (`state`): removes the
    /// buffer's tag from the table, clears it, and puts the buffer on the freelist. A pin of
    /// this backend's is an error; anyone else's is waited for (`WaitIO`, then from the top).
    fn invalidate_buffer(
        &self,
        b: &mut Backend,
        refs: &PrivateRefCount,
        buf_id: u32,
        state: u32,
    ) -> Result<bool, BufMgrError> {
        let desc = &self.descs[buf_id as usize];
        let old_tag = desc.tag(state);
        desc.unlock(state);
        let old_hash = old_tag.hash_code();
        let lock = self.table.lock(self.table.partition_of(old_hash));
        loop {
            lock.acquire(b, LwLockMode::Exclusive)?;
            let mut state = desc.lock(b, self.hdr)?;
            if state & BM_TAG_VALID == 0 || desc.tag(state) != old_tag {
                // Someone else evicted it meanwhile.
                desc.unlock(state);
                lock.release(b)?;
                return Ok(false);
            }
            if refcount(state) != 0 {
                desc.unlock(state);
                lock.release(b)?;
                if refs.get(buf_id) > 0 {
                    return Err(BufMgrError::BufferPinned);
                }
                self.wait_io(b, buf_id)?;
                pglocks_sync::hint::spin_loop();
                continue;
            }
            state &= !(BUF_FLAG_MASK | BUF_USAGECOUNT_MASK);
            desc.unlock(state);
            // SAFETY: the old tag's partition lock is held exclusively.
            let deleted = unsafe { self.table.delete(b, &old_tag, old_hash)? };
            lock.release(b)?;
            if !deleted {
                return Err(BufMgrError::TableCorrupted);
            }
            self.strategy_free_buffer(b, buf_id)?;
            return Ok(true);
        }
    }

    /// The victim search in force.
    pub fn victim_search(&self) -> VictimSearch {
        self.victim_search
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{BufMgr, BufMgrConfig, PrivateRefCount};
    use pglocks_lwlock::AtomicLwLock;
    use pglocks_proc::ProcTable;

    #[test]
    fn the_content_lock_shares_the_descriptors_64_bytes() {
        assert_eq!(
            std::mem::size_of::<crate::desc::PaddedDesc<AtomicLwLock>>(),
            64
        );
    }

    #[test]
    fn lock_buffer_takes_the_content_lock_of_tranche_buffer_content() {
        use pglocks_lwlock::LwLockMode::{Exclusive, Shared};
        let pool: BufMgr<AtomicLwLock> = BufMgr::new(&BufMgrConfig::new(4)).unwrap();
        let procs = ProcTable::new(2);
        let (mut a, mut c) = (procs.attach().unwrap(), procs.attach().unwrap());
        a.stats.lwlock.set_enabled(true);
        let (mut ra, mut rc) = (PrivateRefCount::default(), PrivateRefCount::default());
        let tag = crate::BufferTag::main(5, 16384, 0);
        let buf = pool.read_buffer(&mut a, &mut ra, tag).unwrap();
        let same = pool.read_buffer(&mut c, &mut rc, tag).unwrap();
        assert_eq!(buf, same);
        pool.lock_buffer(&mut a, buf, Shared).unwrap();
        pool.lock_buffer(&mut c, buf, Shared).unwrap();
        pool.unlock_buffer(&mut c, buf).unwrap();
        pool.unlock_buffer(&mut a, buf).unwrap();
        pool.lock_buffer(&mut a, buf, Exclusive).unwrap();
        pool.unlock_buffer(&mut a, buf).unwrap();
        let t = pglocks_proc::tranche::tranche_id("BufferContent");
        let counts = a.stats.lwlock.tranche(t).unwrap();
        assert_eq!((counts.sh_acquire, counts.ex_acquire), (1, 1));
        let e = pool.unlock_buffer(&mut a, buf).unwrap_err();
        assert!(e.to_string().contains("is not held"), "{e}");
        pool.release_buffer(&mut a, &mut ra, buf).unwrap();
        pool.release_buffer(&mut c, &mut rc, same).unwrap();
    }

    #[test]
    fn a_repeat_pin_reads_bm_valid_only_from_17() {
        for reads in [false, true] {
            let cfg = BufMgrConfig {
                repeat_pin_reads_valid: reads,
                ..BufMgrConfig::new(4)
            };
            let pool: BufMgr<AtomicLwLock> = BufMgr::new(&cfg).unwrap();
            let procs = ProcTable::new(1);
            let mut b = procs.attach().unwrap();
            let mut refs = PrivateRefCount::default();
            // A buffer with no valid page: the first pin reads the flag it sets.
            assert!(!pool.pin_buffer(&mut b, &mut refs, 0).unwrap());
            // Up to 16 a second pin takes the first to mean the page is valid.
            assert_eq!(pool.pin_buffer(&mut b, &mut refs, 0).unwrap(), !reads);
        }
    }
}
