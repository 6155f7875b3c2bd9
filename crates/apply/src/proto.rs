//! The logical replication protocol's messages as pgoutput writes them (proto.c,
//! logicalproto.h), for the subset a publisher of inserts, updates and deletes on tables with a
//! unique key sends: `BEGIN`/`COMMIT` around a transaction sent whole, and for a transaction
//! streamed in chunks before it ends (protocol version 2+), `STREAM START`/`STREAM STOP` around
//! each chunk and `STREAM COMMIT` or `STREAM ABORT` at its end. Inside a stream every change
//! carries its transaction's xid.
//!
//! Each message is the byte layout proto.c writes: a type byte, then big-endian fields
//! (`pq_sendint32`/`pq_sendint64`), tuples as a column count and, per column, `t` and a counted
//! text value (the text output of the column, as without the `binary` option).
//!
//! The tables here have two `int8` columns, the unique key and a value. Not modelled:
//! `RELATION`/`TYPE` messages (the relation is known by oid), origins, prepared transactions,
//! `TRUNCATE`, logical messages, old-tuple images other than the key, the v4 abort LSN and time.

/// One row: the unique key and the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Row {
    /// The unique key (replica identity).
    pub key: i64,
    /// The other column.
    pub value: i64,
}

/// A change to a row, as applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// `INSERT`: a new row.
    Insert(Row),
    /// `UPDATE` of the row with this key (the key does not change).
    Update(Row),
    /// `DELETE` of the row with this key.
    Delete(i64),
}

impl Change {
    /// The key the change touches.
    pub fn key(&self) -> i64 {
        match *self {
            Change::Insert(r) | Change::Update(r) => r.key,
            Change::Delete(k) => k,
        }
    }
}

/// A protocol message (`LogicalRepMsgType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// `B` (`logicalrep_write_begin`): a transaction sent whole follows.
    Begin {
        /// The commit record's LSN.
        final_lsn: u64,
        /// Commit time (microseconds since 2000-01-01).
        commit_time: i64,
        /// The publisher's xid.
        xid: u32,
    },
    /// `C` (`logicalrep_write_commit`).
    Commit {
        /// The commit record's LSN.
        commit_lsn: u64,
        /// The end of the commit record.
        end_lsn: u64,
        /// Commit time.
        commit_time: i64,
    },
    /// `I`, `U` or `D` on relation `rel`; `xid` inside a stream only.
    Change {
        /// The transaction, inside a stream.
        xid: Option<u32>,
        /// The relation's oid.
        rel: u32,
        /// What changes.
        change: Change,
    },
    /// `S` (`logicalrep_write_stream_start`): a chunk of transaction `xid` follows.
    StreamStart {
        /// The streamed transaction.
        xid: u32,
        /// Whether this is its first chunk.
        first_segment: bool,
    },
    /// `E` (`logicalrep_write_stream_stop`).
    StreamStop,
    /// `c` (`logicalrep_write_stream_commit`): streamed transaction `xid` committed.
    StreamCommit {
        /// The transaction.
        xid: u32,
        /// The commit record's LSN.
        commit_lsn: u64,
        /// The end of the commit record.
        end_lsn: u64,
        /// Commit time.
        commit_time: i64,
    },
    /// `A` (`logicalrep_write_stream_abort`): streamed transaction `xid` (or its subtransaction
    /// `subxid`, equal to `xid` for the whole) aborted.
    StreamAbort {
        /// The top-level transaction.
        xid: u32,
        /// The aborted (sub)transaction.
        subxid: u32,
    },
}

/// A message that cannot be decoded (`logicalrep_read_*` and `apply_dispatch` errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The message ends before its fields do.
    #[error("invalid logical replication message: {0} bytes, truncated")]
    Truncated(usize),
    /// An unknown message type (`apply_dispatch`'s "invalid logical replication message type").
    #[error("invalid logical replication message type \"??? ({0})\"")]
    UnknownType(u8),
    /// A tuple marker other than the one expected (`logicalrep_read_insert`'s "expected new
    /// tuple but got %d").
    #[error("expected {expected} tuple but got {got}")]
    BadTupleMarker {
        /// `N` or `K`.
        expected: char,
        /// What came.
        got: u8,
    },
    /// A tuple that is not this model's two text columns.
    #[error("unsupported tuple: {0}")]
    BadTuple(String),
    /// Bytes after the message.
    #[error("invalid logical replication message: {0} trailing bytes")]
    Trailing(usize),
}

impl Message {
    /// Appends the message's bytes (proto.c's `logicalrep_write_*`) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Message::Begin {
                final_lsn,
                commit_time,
                xid,
            } => {
                out.push(b'B');
                out.extend(final_lsn.to_be_bytes());
                out.extend(commit_time.to_be_bytes());
                out.extend(xid.to_be_bytes());
            }
            Message::Commit {
                commit_lsn,
                end_lsn,
                commit_time,
            } => {
                out.push(b'C');
                out.push(0); // flags
                out.extend(commit_lsn.to_be_bytes());
                out.extend(end_lsn.to_be_bytes());
                out.extend(commit_time.to_be_bytes());
            }
            Message::Change { xid, rel, change } => {
                out.push(match change {
                    Change::Insert(_) => b'I',
                    Change::Update(_) => b'U',
                    Change::Delete(_) => b'D',
                });
                if let Some(x) = xid {
                    out.extend(x.to_be_bytes());
                }
                out.extend(rel.to_be_bytes());
                match change {
                    Change::Insert(r) | Change::Update(r) => {
                        out.push(b'N');
                        write_tuple(out, &[Some(r.key), Some(r.value)]);
                    }
                    Change::Delete(k) => {
                        // Replica identity: the key, the value column sent as null.
                        out.push(b'K');
                        write_tuple(out, &[Some(k), None]);
                    }
                }
            }
            Message::StreamStart { xid, first_segment } => {
                out.push(b'S');
                out.extend(xid.to_be_bytes());
                out.push(u8::from(first_segment));
            }
            Message::StreamStop => out.push(b'E'),
            Message::StreamCommit {
                xid,
                commit_lsn,
                end_lsn,
                commit_time,
            } => {
                out.push(b'c');
                out.extend(xid.to_be_bytes());
                out.push(0); // flags
                out.extend(commit_lsn.to_be_bytes());
                out.extend(end_lsn.to_be_bytes());
                out.extend(commit_time.to_be_bytes());
            }
            Message::StreamAbort { xid, subxid } => {
                out.push(b'A');
                out.extend(xid.to_be_bytes());
                out.extend(subxid.to_be_bytes());
            }
        }
    }

    /// The message's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes one whole message (`logicalrep_read_*`); `in_stream` says whether changes carry
    /// an xid (the apply worker knows whether it is inside a stream).
    pub fn decode(bytes: &[u8], in_stream: bool) -> Result<Message, ProtoError> {
        let mut r = Reader { bytes, at: 0 };
        let kind = r.u8()?;
        let msg = match kind {
            b'B' => Message::Begin {
                final_lsn: r.u64()?,
                commit_time: r.u64()? as i64,
                xid: r.u32()?,
            },
            b'C' => {
                let _flags = r.u8()?;
                Message::Commit {
                    commit_lsn: r.u64()?,
                    end_lsn: r.u64()?,
                    commit_time: r.u64()? as i64,
                }
            }
            b'I' | b'U' | b'D' => {
                let xid = if in_stream { Some(r.u32()?) } else { None };
                let rel = r.u32()?;
                let marker = r.u8()?;
                let expected = if kind == b'D' { b'K' } else { b'N' };
                if marker != expected {
                    return Err(ProtoError::BadTupleMarker {
                        expected: expected as char,
                        got: marker,
                    });
                }
                let cols = r.tuple()?;
                let change = match (kind, cols) {
                    (b'I', [Some(key), Some(value)]) => Change::Insert(Row { key, value }),
                    (b'U', [Some(key), Some(value)]) => Change::Update(Row { key, value }),
                    (b'D', [Some(key), None]) => Change::Delete(key),
                    _ => return Err(ProtoError::BadTuple(format!("{cols:?}"))),
                };
                Message::Change { xid, rel, change }
            }
            b'S' => Message::StreamStart {
                xid: r.u32()?,
                first_segment: r.u8()? != 0,
            },
            b'E' => Message::StreamStop,
            b'c' => {
                let xid = r.u32()?;
                let _flags = r.u8()?;
                Message::StreamCommit {
                    xid,
                    commit_lsn: r.u64()?,
                    end_lsn: r.u64()?,
                    commit_time: r.u64()? as i64,
                }
            }
            b'A' => Message::StreamAbort {
                xid: r.u32()?,
                subxid: r.u32()?,
            },
            other => return Err(ProtoError::UnknownType(other)),
        };
        match bytes.len() - r.at {
            0 => Ok(msg),
            n => Err(ProtoError::Trailing(n)),
        }
    }
}

/// `logicalrep_write_tuple` for this model's columns: text values, `n` for null.
fn write_tuple(out: &mut Vec<u8>, cols: &[Option<i64>]) {
    out.extend((cols.len() as u16).to_be_bytes());
    for c in cols {
        match c {
            None => out.push(b'n'),
            Some(v) => {
                let text = v.to_string();
                out.push(b't');
                out.extend((text.len() as u32).to_be_bytes());
                out.extend(text.as_bytes());
            }
        }
    }
}

/// A cursor over one message's bytes (`StringInfo` with `pq_getmsg*`).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let end = self.at + N;
        let got = self
            .bytes
            .get(self.at..end)
            .ok_or(ProtoError::Truncated(self.bytes.len()))?;
        self.at = end;
        Ok(got.try_into().expect("a slice of N bytes"))
    }
    fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, ProtoError> {
        Ok(u32::from_be_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, ProtoError> {
        Ok(u64::from_be_bytes(self.take()?))
    }

    /// `logicalrep_read_tuple` of two columns.
    fn tuple(&mut self) -> Result<[Option<i64>; 2], ProtoError> {
        let n = u16::from_be_bytes(self.take()?);
        if n != 2 {
            return Err(ProtoError::BadTuple(format!("{n} columns, expected 2")));
        }
        let mut cols = [None, None];
        for col in &mut cols {
            match self.u8()? {
                b'n' => *col = None,
                b't' => {
                    let len = self.u32()? as usize;
                    let end = self.at.checked_add(len).filter(|&e| e <= self.bytes.len());
                    let end = end.ok_or(ProtoError::Truncated(self.bytes.len()))?;
                    let text = std::str::from_utf8(&self.bytes[self.at..end])
                        .map_err(|e| ProtoError::BadTuple(e.to_string()))?;
                    *col = Some(
                        text.parse()
                            .map_err(|_| ProtoError::BadTuple(format!("not an int8: {text:?}")))?,
                    );
                    self.at = end;
                }
                kind => return Err(ProtoError::BadTuple(format!("column kind {kind}"))),
            }
        }
        Ok(cols)
    }
}
