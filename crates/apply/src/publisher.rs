//! A publisher: transactions of inserts, updates and deletes on tables with a unique key, run
//! several at a time, decoded and sent as the walsender sends them — models the streaming
//! decision of reorderbuffer.c (`ReorderBufferCheckMemoryLimit`) and pgoutput's messages.
//!
//! Decoded changes of the running transactions are kept in memory. A transaction that ends
//! before the memory passes `logical_decoding_work_mem` goes out whole at its commit (`BEGIN`,
//! its changes, `COMMIT`) and an aborted one not at all. Whenever the memory passes the limit,
//! the transaction holding the most is *streamed*: its changes so far go out as a chunk
//! (`STREAM START`, the changes with their xid, `STREAM STOP`) and leave memory. At its end a
//! streamed transaction sends what is left as a last chunk, then `STREAM COMMIT`, or just
//! `STREAM ABORT`.
//!
//! Running transactions touch disjoint rows (on the publisher they would have waited for each
//! other); the publisher keeps the committed table contents and the commit order, which any
//! correct apply of the stream must reproduce.
//!
//! Differences from PostgreSQL: memory is counted in changes, not bytes (`work_mem_changes`);
//! there are no subtransactions, toasted values, or catalog changes; xids and LSNs are
//! counters.

use crate::proto::{Change, Message, Row};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

/// `logical_decoding_work_mem`'s default, 64 MB, in decoded changes: an insert of two `int8`
/// columns takes about 150 bytes in the reorder buffer (`ReorderBufferChangeSize`: the change,
/// the tuple header and the tuple).
pub const DEFAULT_WORK_MEM_CHANGES: usize = 440_000;

/// The first table's oid.
pub const FIRST_REL: u32 = 16_500;

/// What the publisher runs.
#[derive(Debug, Clone)]
pub struct PublisherConfig {
    /// Tables, oids from [`FIRST_REL`].
    pub tables: u32,
    /// Changes of a small transaction: 1 to this many.
    pub small_changes: usize,
    /// Changes of a large transaction.
    pub large_changes: usize,
    /// One transaction in this many is large (0: none).
    pub large_every: usize,
    /// `logical_decoding_work_mem`, in changes: past it the largest transaction is streamed.
    pub work_mem_changes: usize,
    /// Whether the subscription streams (`streaming = on|parallel`); without, everything is
    /// sent whole at commit however large.
    pub streaming: bool,
    /// Transactions running at once on the publisher.
    pub concurrent: usize,
    /// Fraction of transactions that abort.
    pub abort_ratio: f64,
    /// Fraction of changes that try to update or delete an existing row rather than insert
    /// (0: inserts only).
    pub existing_ratio: f64,
    /// Seeds the choices.
    pub seed: u64,
}

impl Default for PublisherConfig {
    fn default() -> Self {
        Self {
            tables: 2,
            small_changes: 5,
            large_changes: 10_000,
            large_every: 10,
            work_mem_changes: DEFAULT_WORK_MEM_CHANGES,
            streaming: true,
            concurrent: 4,
            abort_ratio: 0.05,
            existing_ratio: 1.0 / 3.0,
            seed: 1,
        }
    }
}

/// What a publisher sent, and what a correct apply must end with.
#[derive(Debug, Clone, Default)]
pub struct Published {
    /// The messages, in the order sent.
    pub messages: Vec<Message>,
    /// Committed xids in commit order.
    pub commit_order: Vec<u32>,
    /// The tables' contents: (relation, key) → value.
    pub rows: BTreeMap<(u32, i64), i64>,
    /// Transactions streamed (at least one chunk before their end).
    pub streamed: usize,
}

/// One running publisher transaction.
struct Running {
    xid: u32,
    /// Changes still to make.
    left: usize,
    /// Decoded changes not yet sent.
    pending: Vec<(u32, Change)>,
    /// Rows it has touched (its row locks).
    rows: BTreeSet<(u32, i64)>,
    /// Its own view of the rows it touched: Some(value) present, None deleted.
    view: BTreeMap<(u32, i64), Option<i64>>,
    streamed: bool,
}

/// The publisher and its walsender.
struct Publisher {
    cfg: PublisherConfig,
    rng: SmallRng,
    out: Published,
    running: Vec<Running>,
    /// Rows locked by running transactions.
    locked: BTreeSet<(u32, i64)>,
    next_xid: u32,
    next_key: i64,
    lsn: u64,
    /// Decoded changes in memory, over all running transactions.
    memory: usize,
}

/// Runs `transactions` transactions on a publisher as `cfg` says, and returns what it sent.
pub fn publish(cfg: &PublisherConfig, transactions: usize) -> Published {
    let mut p = Publisher {
        rng: SmallRng::seed_from_u64(cfg.seed),
        cfg: cfg.clone(),
        out: Published::default(),
        running: Vec::new(),
        locked: BTreeSet::new(),
        next_xid: 1_000,
        next_key: 1,
        lsn: 0x0100_0000,
        memory: 0,
    };
    let mut started = 0;
    while started < transactions || !p.running.is_empty() {
        while p.running.len() < cfg.concurrent.max(1) && started < transactions {
            p.begin(started);
            started += 1;
        }
        let i = p.rng.random_range(0..p.running.len());
        if p.running[i].left == 0 {
            let t = p.running.swap_remove(i);
            p.end(t);
        } else {
            p.change(i);
            if cfg.streaming && p.memory > cfg.work_mem_changes {
                p.stream_largest();
            }
        }
    }
    p.out
}

impl Publisher {
    fn begin(&mut self, n: usize) {
        let large =
            self.cfg.large_every > 0 && n % self.cfg.large_every == self.cfg.large_every - 1;
        let left = if large {
            self.cfg.large_changes.max(1)
        } else {
            self.rng.random_range(1..=self.cfg.small_changes.max(1))
        };
        self.running.push(Running {
            xid: self.next_xid,
            left,
            pending: Vec::new(),
            rows: BTreeSet::new(),
            view: BTreeMap::new(),
            streamed: false,
        });
        self.next_xid += 1;
    }

    /// The row's value as transaction `t` sees it.
    fn visible(&self, t: &Running, row: (u32, i64)) -> Option<i64> {
        match t.view.get(&row) {
            Some(v) => *v,
            None => self.out.rows.get(&row).copied(),
        }
    }

    /// Transaction `i` makes one change: an insert of a new key, or an update or delete of a
    /// row that is visible to it and not locked by another running transaction.
    fn change(&mut self, i: usize) {
        let rel = FIRST_REL + self.rng.random_range(0..self.cfg.tables.max(1));
        let value = self.rng.random_range(0..1_000_000);
        // An existing row to update or delete, if one can be had.
        let existing = self.cfg.existing_ratio.clamp(0.0, 1.0);
        let target = if self.rng.random_bool(existing) && !self.out.rows.is_empty() {
            let k = self.rng.random_range(1..self.next_key);
            let row = (rel, k);
            let t = &self.running[i];
            let free = t.rows.contains(&row) || !self.locked.contains(&row);
            (free && self.visible(t, row).is_some()).then_some(row)
        } else {
            None
        };
        let change = match target {
            Some((_, key)) if self.rng.random_bool(0.7) => Change::Update(Row { key, value }),
            Some((_, key)) => Change::Delete(key),
            None => {
                let key = self.next_key;
                self.next_key += 1;
                Change::Insert(Row { key, value })
            }
        };
        let row = (rel, change.key());
        let t = &mut self.running[i];
        t.view.insert(
            row,
            match change {
                Change::Delete(_) => None,
                Change::Insert(r) | Change::Update(r) => Some(r.value),
            },
        );
        t.rows.insert(row);
        self.locked.insert(row);
        t.pending.push((rel, change));
        t.left -= 1;
        self.memory += 1;
        self.lsn += 64;
    }

    /// Sends transaction `i`'s pending changes as one chunk of its stream.
    fn send_chunk(&mut self, i: usize) {
        let t = &mut self.running[i];
        if t.pending.is_empty() {
            return;
        }
        self.out.messages.push(Message::StreamStart {
            xid: t.xid,
            first_segment: !t.streamed,
        });
        if !t.streamed {
            self.out.streamed += 1;
        }
        t.streamed = true;
        let xid = t.xid;
        self.memory -= t.pending.len();
        self.out
            .messages
            .extend(t.pending.drain(..).map(|(rel, change)| Message::Change {
                xid: Some(xid),
                rel,
                change,
            }));
        self.out.messages.push(Message::StreamStop);
    }

    /// `ReorderBufferLargestStreamableTopTXN` + `ReorderBufferStreamTXN`.
    fn stream_largest(&mut self) {
        if let Some(i) = (0..self.running.len()).max_by_key(|&i| self.running[i].pending.len()) {
            self.send_chunk(i);
        }
    }

    /// The end of `t`: commit or abort, sent as its form requires.
    fn end(&mut self, mut t: Running) {
        let abort = self.rng.random_bool(self.cfg.abort_ratio.clamp(0.0, 1.0));
        for row in &t.rows {
            self.locked.remove(row);
        }
        self.lsn += 64;
        let (commit_lsn, end_lsn, commit_time) = (self.lsn, self.lsn + 40, self.lsn as i64 / 64);
        if abort {
            self.memory -= t.pending.len();
            if t.streamed {
                self.out.messages.push(Message::StreamAbort {
                    xid: t.xid,
                    subxid: t.xid,
                });
            }
            return;
        }
        if t.streamed {
            self.running.push(t);
            let i = self.running.len() - 1;
            self.send_chunk(i);
            t = self.running.pop().expect("just pushed");
            self.out.messages.push(Message::StreamCommit {
                xid: t.xid,
                commit_lsn,
                end_lsn,
                commit_time,
            });
        } else {
            self.memory -= t.pending.len();
            self.out.messages.push(Message::Begin {
                final_lsn: commit_lsn,
                commit_time,
                xid: t.xid,
            });
            self.out
                .messages
                .extend(t.pending.iter().map(|&(rel, change)| Message::Change {
                    xid: None,
                    rel,
                    change,
                }));
            self.out.messages.push(Message::Commit {
                commit_lsn,
                end_lsn,
                commit_time,
            });
        }
        for (row, v) in t.view {
            match v {
                Some(v) => self.out.rows.insert(row, v),
                None => self.out.rows.remove(&row),
            };
        }
        self.out.commit_order.push(t.xid);
    }
}
