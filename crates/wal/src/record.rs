//! Models the bytes of WAL: `XLogRecord` (xlogrecord.h) and `XLogPageHeaderData`
//! (xlog_internal.h), and a reader that walks records back out of the WAL buffers (a small
//! `XLogReadRecord`, for tests and for counting commits per flush).
//!
//! Everything is kept in 8-byte little-endian words: records and page headers are MAXALIGNed, so
//! a word never holds bytes of two different writers, and the buffers can be plain relaxed
//! atomics with no `unsafe`.
//!
//! Record header (24 bytes): word 0 = `xl_tot_len` (u32) | `xl_xid` (u32); word 1 = `xl_prev`;
//! word 2 = `xl_info` (u8) | `xl_rmid` (u8) | padding | `xl_crc` (u32). The CRC-32C covers the
//! payload, then the first 20 header bytes, as `XLogInsertRecord` computes it.
//!
//! Page header (24 bytes, 40 on a segment's first page): word 0 = `xlp_magic` (u16) |
//! `xlp_info` (u16) | `xlp_tli` (u32); word 1 = `xlp_pageaddr`; word 2 = `xlp_rem_len` (u32);
//! long header: word 3 = `xlp_sysid`; word 4 = `xlp_seg_size` (u32) | `xlp_xlog_blcksz` (u32).

use crate::pos::{maxalign, SIZE_OF_XLOG_RECORD};
use pglocks_sync::cpu::{self, Kernel};

/// `XLOG_PAGE_MAGIC` of PostgreSQL 15.
pub const XLOG_PAGE_MAGIC: u16 = 0xD110;
/// `XLP_FIRST_IS_CONTRECORD`: the page starts with the rest of a record begun on an earlier page.
pub const XLP_FIRST_IS_CONTRECORD: u16 = 0x0001;
/// `XLP_LONG_HEADER`: the page has a long header.
pub const XLP_LONG_HEADER: u16 = 0x0002;
/// `XLP_BKP_REMOVABLE`: full-page images on this page may be removed (no backup running).
pub const XLP_BKP_REMOVABLE: u16 = 0x0004;
/// The timeline every model WAL is on.
pub const TIMELINE: u32 = 1;
/// The system identifier written into long page headers.
pub const SYSTEM_IDENTIFIER: u64 = 0x7067_6C6F_636B_7321;
/// `RM_XACT_ID`, the transaction resource manager.
pub const RM_XACT_ID: u8 = 1;
/// `XLOG_XACT_COMMIT`.
pub const XLOG_XACT_COMMIT: u8 = 0x00;
/// `XLR_BLOCK_ID_DATA_SHORT`: main data of at most 255 bytes follows, after a one-byte length.
pub const XLR_BLOCK_ID_DATA_SHORT: u8 = 255;
/// The main data of a commit record: `XLR_BLOCK_ID_DATA_SHORT`, 8, and `xact_time` = 0.
const COMMIT_MAIN_DATA: [u8; 10] = [XLR_BLOCK_ID_DATA_SHORT, 8, 0, 0, 0, 0, 0, 0, 0, 0];
/// A resource manager id for records that stand for data changes (`RM_HEAP_ID`).
pub const RM_HEAP_ID: u8 = 10;
/// `RM_BTREE_ID`, the B-tree resource manager (index insertions).
pub const RM_BTREE_ID: u8 = 11;
/// `RM_XLOG_ID`, whose `XLOG_SWITCH` record ends a segment.
pub const RM_XLOG_ID: u8 = 0;
/// `XLOG_SWITCH`.
pub const XLOG_SWITCH: u8 = 0x40;

/// A record to insert: the fixed header fields a caller chooses, and the payload.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// `xl_xid`.
    pub xid: u32,
    /// `xl_rmid`.
    pub rmid: u8,
    /// `xl_info`.
    pub info: u8,
    /// The data after the header.
    pub payload: &'a [u8],
}

impl Record<'_> {
    /// A commit record of `xid`, as PostgreSQL writes the simplest one: after the header, the
    /// main data as `XLogRecordAssemble` encodes it (`XLR_BLOCK_ID_DATA_SHORT`, its length,
    /// then `xl_xact_commit`, whose only field is `xact_time`, here 0 = 2000-01-01): 34 bytes,
    /// which pg_waldump decodes as `COMMIT`.
    pub const fn commit(xid: u32) -> Record<'static> {
        Record {
            xid,
            rmid: RM_XACT_ID,
            info: XLOG_XACT_COMMIT,
            payload: &COMMIT_MAIN_DATA,
        }
    }

    /// `xl_tot_len`.
    pub fn total_len(&self) -> u64 {
        SIZE_OF_XLOG_RECORD + self.payload.len() as u64
    }

    /// Is this a commit record?
    pub fn is_commit(rmid: u8, info: u8) -> bool {
        rmid == RM_XACT_ID && info & 0x70 == XLOG_XACT_COMMIT
    }
}

/// Encodes `rec` with prev-link `prev` into `out` as MAXALIGNed words (the bytes
/// `CopyXLogRecordToWAL` copies). `payload_crc` is the CRC-32C of the payload alone.
pub fn encode(rec: &Record<'_>, prev: u64, payload_crc: u32, out: &mut Vec<u64>) {
    out.clear();
    let tot_len = rec.total_len();
    let w0 = tot_len | (u64::from(rec.xid) << 32);
    let w2_low = u64::from(rec.info) | (u64::from(rec.rmid) << 8);
    let mut head = [0u8; 20];
    head[..8].copy_from_slice(&w0.to_le_bytes());
    head[8..16].copy_from_slice(&prev.to_le_bytes());
    head[16..20].copy_from_slice(&(w2_low as u32).to_le_bytes());
    cpu::ran(Kernel::Crc, head.len());
    let crc = crc32c::crc32c_append(payload_crc, &head);
    out.extend([w0, prev, w2_low | (u64::from(crc) << 32)]);
    let words = maxalign(rec.payload.len() as u64) as usize / 8;
    for i in 0..words {
        let mut w = [0u8; 8];
        let chunk = &rec.payload[i * 8..rec.payload.len().min(i * 8 + 8)];
        w[..chunk.len()].copy_from_slice(chunk);
        out.push(u64::from_le_bytes(w));
    }
}

/// The CRC-32C of a payload, computed before any lock is taken (as `XLogRecordAssemble` in
/// xloginsert.c does, inside `XLogInsert`), and charged as the CRC kernel per byte
/// ([`Kernel::Crc`]): the work is the modelled function's own, and a real run of `wal-insert`
/// pays it (on the reference machine the CRC is about a third of a 100-byte record's insert at
/// one thread).
///
/// Shortcuts: every release is charged the hardware CRC-32C, which 9.5 brought; up to 9.4
/// `COMP_CRC32` (pg_crc.h) looked a table up per byte, several times as long. And the pgbench
/// transactions' executor work, measured on PostgreSQL, already contains its records' CRCs, so
/// there they are counted twice: a few hundred bytes a transaction, under 0.1 µs against its
/// 16–210 µs.
pub fn payload_crc(payload: &[u8]) -> u32 {
    cpu::ran(Kernel::Crc, payload.len());
    crc32c::crc32c(payload)
}

/// A record read back from the WAL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// Where it starts.
    pub lsn: u64,
    /// Where it ends (MAXALIGNed, as the next record's start would be before header skipping).
    pub end: u64,
    /// `xl_tot_len`.
    pub tot_len: u32,
    /// `xl_xid`.
    pub xid: u32,
    /// `xl_prev`.
    pub prev: u64,
    /// `xl_info`.
    pub info: u8,
    /// `xl_rmid`.
    pub rmid: u8,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Decodes header words (three) and payload words into a record, checking the CRC.
pub(crate) fn decode(lsn: u64, end: u64, words: &[u64]) -> Result<ReadRecord, String> {
    let (w0, prev, w2) = (words[0], words[1], words[2]);
    let tot_len = w0 as u32;
    let payload_len = tot_len as usize - SIZE_OF_XLOG_RECORD as usize;
    let mut payload = Vec::with_capacity(payload_len);
    for w in &words[3..] {
        payload.extend_from_slice(&w.to_le_bytes());
    }
    payload.truncate(payload_len);
    let mut head = [0u8; 20];
    head[..8].copy_from_slice(&w0.to_le_bytes());
    head[8..16].copy_from_slice(&prev.to_le_bytes());
    head[16..20].copy_from_slice(&(w2 as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&payload), &head);
    if crc != (w2 >> 32) as u32 {
        return Err(format!(
            "incorrect resource manager data checksum in record at {}",
            crate::pos::lsn(lsn)
        ));
    }
    Ok(ReadRecord {
        lsn,
        end,
        tot_len,
        xid: (w0 >> 32) as u32,
        prev,
        info: w2 as u8,
        rmid: (w2 >> 8) as u8,
        payload,
    })
}

/// Page header word 0 (`xlp_magic`, `xlp_info`, `xlp_tli`) of a page with a long header or not.
pub(crate) fn page_header_word0(long: bool) -> u64 {
    let info = XLP_BKP_REMOVABLE | if long { XLP_LONG_HEADER } else { 0 };
    u64::from(XLOG_PAGE_MAGIC) | (u64::from(info) << 16) | (u64::from(TIMELINE) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_encode_and_decode_with_their_crc() {
        let payload = b"hello, wal!";
        let rec = Record {
            xid: 7,
            rmid: RM_HEAP_ID,
            info: 0x10,
            payload,
        };
        let mut words = Vec::new();
        encode(&rec, 0x1234, payload_crc(payload), &mut words);
        assert_eq!(words.len(), 3 + 2);
        let r = decode(100, 140, &words).unwrap();
        assert_eq!(
            (r.xid, r.prev, r.rmid, r.info),
            (7, 0x1234, RM_HEAP_ID, 0x10)
        );
        assert_eq!(r.payload, payload);
        assert_eq!(r.tot_len, 24 + 11);
        // A flipped payload bit fails the checksum.
        words[4] ^= 1;
        assert!(decode(100, 140, &words).unwrap_err().contains("checksum"));
        assert!(Record::is_commit(RM_XACT_ID, XLOG_XACT_COMMIT));
        assert!(!Record::is_commit(RM_HEAP_ID, 0));
    }
}
