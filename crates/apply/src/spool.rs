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
//! Shortcut: the file stays open for writing from the first chunk to the end of the
//! transaction (worker.c closes it at each `STREAM STOP` and reopens it at the next
//! `STREAM START`).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// A spool file being written.
#[derive(Debug)]
pub struct SpoolWriter {
    path: PathBuf,
    out: BufWriter<File>,
    records: u64,
}

/// `changes_filename` (worker.c): `<subscription>-<xid>.changes` in `dir`.
pub fn spool_path(dir: &Path, subscription: u32, xid: u32) -> PathBuf {
    dir.join(format!("{subscription}-{xid}.changes"))
}

impl SpoolWriter {
    /// Creates (truncating) the spool file of remote transaction `xid`.
    pub fn create(dir: &Path, subscription: u32, xid: u32) -> io::Result<Self> {
        let path = spool_path(dir, subscription, xid);
        Ok(Self {
            out: BufWriter::with_capacity(1 << 16, File::create(&path)?),
            path,
            records: 0,
        })
    }

    /// `stream_write_change`: appends one message.
    pub fn write(&mut self, message: &[u8]) -> io::Result<()> {
        let len = u32::try_from(message.len())
            .map_err(|_| io::Error::other("message too large for a spool file"))?;
        self.out.write_all(&len.to_be_bytes())?;
        self.out.write_all(message)?;
        self.records += 1;
        Ok(())
    }

    /// Messages written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and closes the file, returning its path for [`replay`].
    pub fn finish(mut self) -> io::Result<PathBuf> {
        self.out.flush()?;
        Ok(self.path)
    }
}

/// `apply_spooled_messages`'s read loop: hands each message of the file at `path` to `apply`,
/// in order, then removes the file. Stops at the first error `apply` returns.
pub fn replay<E: From<io::Error>>(
    path: &Path,
    mut apply: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<u64, E> {
    let mut input = BufReader::with_capacity(1 << 16, File::open(path)?);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        let mut len = [0u8; 4];
        match input.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        buf.resize(u32::from_be_bytes(len) as usize, 0);
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
    std::fs::remove_file(path)?;
    Ok(n)
}

/// Removes a spool file that will not be replayed (the transaction aborted).
pub fn discard(w: SpoolWriter) -> io::Result<()> {
    let path = w.path.clone();
    drop(w);
    std::fs::remove_file(path)
}
