//! The files a leader apply worker spools a streamed transaction's changes to — worker.c's
//! `stream_open_file`, `stream_write_change` and `apply_spooled_messages`, on a `BufFile` in
//! the worker's fileset.
//!
//! With `streaming = on` (and with `parallel` when no parallel apply worker is free) the leader
//! writes every change of a streamed transaction to a file named after the subscription and the
//! remote xid, and replays the file at `STREAM COMMIT`. With `parallel`, once a send to a worker
//! times out, the leader writes the rest of that transaction here instead (*partial
//! serialization*), ending with its `STREAM COMMIT` or `STREAM ABORT`, and the worker replays
//! the file. Each record is a 4-byte length and a message as it came over the wire.
//!
//! The files are real files, written and read through a buffer of a block ([`BLCKSZ`]), as
//! `BufFile` buffers them. On a simulated machine the host does the I/O and the virtual CPU
//! is charged what `BufFile` costs the backend in system calls: one `open` of the file, one
//! `write` (`BufFileDumpBuffer`) for each block filled and one for the last part at the end,
//! one `read` (`BufFileLoadBuffer`) for each block read back and one more that finds the end,
//! and one `unlink`. Neither the copies to and from the page cache nor a disk are charged
//! (the files are temporary and never synced).
//!
//! Shortcut: the file stays open for writing from the first chunk to the end of the
//! transaction (worker.c closes it at each `STREAM STOP` and reopens it at the next
//! `STREAM START`).

use pglocks_sync::os::system_call;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// `BLCKSZ` (pg_config.h's default, 8 kB): the buffer of a `BufFile`, which it reads and
/// writes a block at a time.
pub const BLCKSZ: u64 = 8192;

/// Charges a simulated CPU the system calls of the blocks a `BufFile` enters when its position
/// moves from `before` to `after` bytes (one per block boundary passed).
fn block_calls(before: u64, after: u64) {
    for _ in before / BLCKSZ..after / BLCKSZ {
        system_call();
    }
}

/// A spool file being written.
#[derive(Debug)]
pub struct SpoolWriter {
    path: PathBuf,
    out: BufWriter<File>,
    records: u64,
    /// Bytes written.
    bytes: u64,
}

/// `changes_filename` (worker.c): `<subscription>-<xid>.changes` in `dir`.
pub fn spool_path(dir: &Path, subscription: u32, xid: u32) -> PathBuf {
    dir.join(format!("{subscription}-{xid}.changes"))
}

impl SpoolWriter {
    /// Creates (truncating) the spool file of remote transaction `xid`.
    pub fn create(dir: &Path, subscription: u32, xid: u32) -> io::Result<Self> {
        let path = spool_path(dir, subscription, xid);
        system_call();
        Ok(Self {
            out: BufWriter::with_capacity(BLCKSZ as usize, File::create(&path)?),
            path,
            records: 0,
            bytes: 0,
        })
    }

    /// `stream_write_change`: appends one message.
    pub fn write(&mut self, message: &[u8]) -> io::Result<()> {
        let len = u32::try_from(message.len())
            .map_err(|_| io::Error::other("message too large for a spool file"))?;
        self.out.write_all(&len.to_be_bytes())?;
        self.out.write_all(message)?;
        self.records += 1;
        let before = self.bytes;
        self.bytes += 4 + u64::from(len);
        block_calls(before, self.bytes);
        Ok(())
    }

    /// Messages written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and closes the file, returning its path for [`replay`].
    pub fn finish(mut self) -> io::Result<PathBuf> {
        self.out.flush()?;
        if self.bytes % BLCKSZ != 0 {
            // BufFileFlush of the last, partly filled block.
            system_call();
        }
        Ok(self.path)
    }
}

/// `apply_spooled_messages`'s read loop: hands each message of the file at `path` to `apply`,
/// in order, then removes the file. Stops at the first error `apply` returns.
pub fn replay<E: From<io::Error>>(
    path: &Path,
    mut apply: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<u64, E> {
    system_call();
    let mut input = BufReader::with_capacity(BLCKSZ as usize, File::open(path)?);
    let mut buf = Vec::new();
    let (mut n, mut read) = (0, 0u64);
    // The first block's read, then one at each block boundary the records pass.
    system_call();
    loop {
        let mut len = [0u8; 4];
        match input.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let size = u32::from_be_bytes(len);
        block_calls(read, read + 4 + u64::from(size));
        read += 4 + u64::from(size);
        buf.resize(size as usize, 0);
        input.read_exact(&mut buf).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "could not read from streaming transaction's changes file \"{}\": {e}",
                    path.display()
                ),
            )
        })?;
        apply(&buf)?;
        n += 1;
    }
    if read % BLCKSZ != 0 {
        // The read after the last, partly filled block, which finds the end.
        system_call();
    }
    system_call();
    std::fs::remove_file(path)?;
    Ok(n)
}

/// Removes a spool file that will not be replayed (the transaction aborted).
pub fn discard(w: SpoolWriter) -> io::Result<()> {
    let path = w.path.clone();
    drop(w);
    system_call();
    std::fs::remove_file(path)
}
