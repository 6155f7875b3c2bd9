//! Deterministic I/O fault plans, for the fault-injecting wrappers of the WAL flush device
//! (`pglocks_wal::FaultyDevice`) and the SLRU page store (`pglocks_slru::FaultyStore`).
//!
//! A [`FaultPlan`] is a list of [`FaultRule`]s, each saying which operation of one kind
//! ([`IoOp`]: read, write, fsync) goes wrong and how ([`Fault`]): fail with an errno, be short,
//! or be slow. An operation is picked by its number among the operations of its kind, counted
//! from 1 over the life of the plan: "the 5th fsync" ([`Nth::Once`]) or "every 3rd read"
//! ([`Nth::Every`]). No clock and no randomness are involved, so a plan fails the same
//! operations in every run with the same sequence of I/O calls.
//!
//! A [`Faults`] handle is the shared, live state of a plan (its counters); the wrapper consults
//! it before each operation ([`Faults::next`]), and a test keeps a clone to change the plan
//! ([`Faults::set_plan`], [`Faults::clear`]) or to see what was injected.
//!
//! Plans have a text form, also accepted by the `fault` knob: rules separated by commas, each
//! `OP:K[:FAULT]` (the K-th operation) or `OP:every:N[:FAULT]` (every N-th), where OP is `read`,
//! `write` or `fsync`, and FAULT is `eio` (the default), `enospc`, `short` (reads and writes
//! only) or `sleep=DURATION` (`sleep=2ms`, `sleep=500us`, `sleep=1s`). For example
//! `fsync:5` fails the 5th fsync with EIO, `write:3:short` makes the 3rd write short, and
//! `read:every:4:sleep=2ms` delays every 4th read by 2 ms.
//!
//! PostgreSQL has no fault injection of its own in these paths (its tests use
//! `injection_points` elsewhere); the wrappers exist to show what the modelled callers do when
//! the kernel reports an error.

use crate::time::Duration;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// `EIO` (Linux): the error an injected failure reports unless told otherwise.
pub const EIO: i32 = libc::EIO;
/// `ENOSPC` (Linux).
pub const ENOSPC: i32 = libc::ENOSPC;

/// A kind of I/O operation, counted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoOp {
    /// A read (`pg_pread`; the SLRU's `SlruPhysicalReadPage`).
    Read,
    /// A write (`pg_pwrite`; `XLogWrite`, `SlruPhysicalWritePage`).
    Write,
    /// A flush to durable storage (`issue_xlog_fsync`).
    Fsync,
}

impl IoOp {
    const ALL: [IoOp; 3] = [IoOp::Read, IoOp::Write, IoOp::Fsync];

    fn index(self) -> usize {
        self as usize
    }

    /// The word used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Fsync => "fsync",
        }
    }
}

/// What goes wrong with a chosen operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with this errno and does nothing.
    Fail(i32),
    /// The operation transfers only part of its bytes (how much is the wrapper's choice; never
    /// none). Only for reads and writes.
    Short,
    /// The operation succeeds after sleeping this long first (a latency spike).
    Delay(Duration),
}

/// Which operations of the rule's kind it picks, numbered from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nth {
    /// Only the k-th.
    Once(u64),
    /// Every n-th (the n-th, 2n-th, …).
    Every(u64),
}

impl Nth {
    fn picks(self, count: u64) -> bool {
        match self {
            Nth::Once(k) => count == k,
            Nth::Every(n) => count % n == 0,
        }
    }
}

/// One rule of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRule {
    /// The kind of operation.
    pub op: IoOp,
    /// Which of them.
    pub nth: Nth,
    /// What happens to it.
    pub fault: Fault,
}

/// A plan that cannot be built or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fault plan '{input}': {reason}; expected rules like fsync:5, write:3:short, read:every:4:sleep=2ms (OP:K[:FAULT] or OP:every:N[:FAULT], OP read|write|fsync, FAULT eio|enospc|short|sleep=DURATION)")]
pub struct FaultPlanError {
    /// The rule (or plan) refused.
    pub input: String,
    /// Why.
    pub reason: String,
}

/// Which operations fail how: an ordered list of rules; the first rule that picks an
/// operation decides its fault.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    rules: Vec<FaultRule>,
}

impl FaultPlan {
    /// A plan with no faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `rule`, refusing a short fsync and a 0th / every-0th operation.
    pub fn with(mut self, rule: FaultRule) -> Result<Self, FaultPlanError> {
        let refuse = |reason: &str| FaultPlanError {
            input: rule.to_string(),
            reason: reason.into(),
        };
        match rule.nth {
            Nth::Once(0) | Nth::Every(0) => {
                return Err(refuse("operations are counted from 1"));
            }
            _ => {}
        }
        if rule.op == IoOp::Fsync && rule.fault == Fault::Short {
            return Err(refuse("an fsync cannot be short"));
        }
        self.rules.push(rule);
        Ok(self)
    }

    /// Fails the `k`-th `op` with `errno`.
    pub fn fail(self, op: IoOp, k: u64, errno: i32) -> Result<Self, FaultPlanError> {
        self.with(FaultRule {
            op,
            nth: Nth::Once(k),
            fault: Fault::Fail(errno),
        })
    }

    /// Makes the `k`-th `op` (read or write) short.
    pub fn short(self, op: IoOp, k: u64) -> Result<Self, FaultPlanError> {
        self.with(FaultRule {
            op,
            nth: Nth::Once(k),
            fault: Fault::Short,
        })
    }

    /// Delays every `n`-th `op` by `d`.
    pub fn delay_every(self, op: IoOp, n: u64, d: Duration) -> Result<Self, FaultPlanError> {
        self.with(FaultRule {
            op,
            nth: Nth::Every(n),
            fault: Fault::Delay(d),
        })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[FaultRule] {
        &self.rules
    }

    /// No rules at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The fault for operation number `count` of kind `op`, if a rule picks it.
    pub fn fault_for(&self, op: IoOp, count: u64) -> Option<Fault> {
        self.rules
            .iter()
            .find(|r| r.op == op && r.nth.picks(count))
            .map(|r| r.fault)
    }
}

impl fmt::Display for FaultRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.op.name())?;
        match self.nth {
            Nth::Once(k) => write!(f, ":{k}")?,
            Nth::Every(n) => write!(f, ":every:{n}")?,
        }
        match self.fault {
            Fault::Fail(EIO) => Ok(()),
            Fault::Fail(ENOSPC) => f.write_str(":enospc"),
            Fault::Fail(errno) => write!(f, ":errno={errno}"),
            Fault::Short => f.write_str(":short"),
            Fault::Delay(d) => write!(f, ":sleep={}us", d.as_micros()),
        }
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rules.is_empty() {
            return f.write_str("none");
        }
        for (i, r) in self.rules.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// `2ms`, `500us`, `1s`, `100ns` as a duration.
fn parse_sleep(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "ns" => Duration::from_nanos(n),
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return None,
    })
}

fn parse_rule(text: &str) -> Result<FaultRule, FaultPlanError> {
    let refuse = |reason: &str| FaultPlanError {
        input: text.into(),
        reason: reason.into(),
    };
    let mut parts = text.split(':');
    let op = match parts.next() {
        Some("read") => IoOp::Read,
        Some("write") => IoOp::Write,
        Some("fsync") => IoOp::Fsync,
        _ => return Err(refuse("the operation must be read, write or fsync")),
    };
    let number = |p: Option<&str>| -> Result<u64, FaultPlanError> {
        p.and_then(|n| n.parse().ok())
            .ok_or_else(|| refuse("expected an operation number"))
    };
    let nth = match parts.next() {
        Some("every") => Nth::Every(number(parts.next())?),
        p => Nth::Once(number(p)?),
    };
    let fault = match parts.next() {
        None | Some("eio") => Fault::Fail(EIO),
        Some("enospc") => Fault::Fail(ENOSPC),
        Some("short") => Fault::Short,
        Some(s) => match s.strip_prefix("sleep=").and_then(parse_sleep) {
            Some(d) => Fault::Delay(d),
            None => {
                return Err(refuse(
                    "the fault must be eio, enospc, short or sleep=DURATION",
                ))
            }
        },
    };
    if parts.next().is_some() {
        return Err(refuse("too many fields"));
    }
    Ok(FaultRule { op, nth, fault })
}

impl FromStr for FaultPlan {
    type Err = FaultPlanError;

    /// Parses the text form (see the module docs); `none` or an empty string is no faults.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(Self::new());
        }
        s.split(',').try_fold(Self::new(), |plan, rule| {
            plan.with(parse_rule(rule.trim())?)
        })
    }
}

/// The live state of a plan: the plan and how many operations of each kind were seen and
/// faulted.
#[derive(Debug, Default)]
struct State {
    plan: FaultPlan,
    seen: [u64; 3],
    injected: [u64; 3],
}

/// A shared handle on a live [`FaultPlan`]: clones see and change the same counters. The
/// wrappers call [`next`](Self::next) once per operation; only I/O paths pay for its mutex.
///
/// The mutex is `std`'s even under loom: it is test bookkeeping, never held across a yield,
/// and not part of any modelled algorithm.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<State>>);

impl Faults {
    /// A live plan, its counters at zero.
    pub fn new(plan: FaultPlan) -> Self {
        Self(Arc::new(Mutex::new(State {
            plan,
            ..State::default()
        })))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one operation of kind `op` and returns the fault the plan has for it, if any.
    pub fn next(&self, op: IoOp) -> Option<Fault> {
        let mut s = self.state();
        s.seen[op.index()] += 1;
        let fault = s.plan.fault_for(op, s.seen[op.index()]);
        if fault.is_some() {
            s.injected[op.index()] += 1;
        }
        fault
    }

    /// Replaces the plan; the operation counters go on from where they are.
    pub fn set_plan(&self, plan: FaultPlan) {
        self.state().plan = plan;
    }

    /// Removes every rule: from now on nothing fails.
    pub fn clear(&self) {
        self.set_plan(FaultPlan::new());
    }

    /// The plan in force.
    pub fn plan(&self) -> FaultPlan {
        self.state().plan.clone()
    }

    /// Operations of kind `op` seen so far.
    pub fn seen(&self, op: IoOp) -> u64 {
        self.state().seen[op.index()]
    }

    /// Faults injected so far into operations of kind `op`.
    pub fn injected(&self, op: IoOp) -> u64 {
        self.state().injected[op.index()]
    }

    /// Faults injected so far, of every kind.
    pub fn injected_total(&self) -> u64 {
        IoOp::ALL.iter().map(|&op| self.injected(op)).sum()
    }
}

/// Sleeps `d` if the fault is a delay (the one fault every wrapper handles the same way);
/// returns the fault otherwise.
pub fn apply_delay(fault: Option<Fault>) -> Option<Fault> {
    match fault {
        Some(Fault::Delay(d)) => {
            crate::time::sleep(d);
            None
        }
        other => other,
    }
}

/// The `std::io::Error` of an injected failure with `errno`.
pub fn os_error(errno: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(errno)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_and_print() {
        let p: FaultPlan = "fsync:5, write:3:short,read:every:4:sleep=2ms,write:7:enospc"
            .parse()
            .unwrap();
        assert_eq!(
            p.rules(),
            &[
                FaultRule {
                    op: IoOp::Fsync,
                    nth: Nth::Once(5),
                    fault: Fault::Fail(EIO)
                },
                FaultRule {
                    op: IoOp::Write,
                    nth: Nth::Once(3),
                    fault: Fault::Short
                },
                FaultRule {
                    op: IoOp::Read,
                    nth: Nth::Every(4),
                    fault: Fault::Delay(Duration::from_millis(2))
                },
                FaultRule {
                    op: IoOp::Write,
                    nth: Nth::Once(7),
                    fault: Fault::Fail(ENOSPC)
                },
            ]
        );
        let again: FaultPlan = p.to_string().parse().unwrap();
        assert_eq!(again, p);
        assert!("none".parse::<FaultPlan>().unwrap().is_empty());
        assert!("".parse::<FaultPlan>().unwrap().is_empty());
    }

    #[test]
    fn bad_plans_are_refused_with_the_reason() {
        for (bad, why) in [
            ("fsync", "operation number"),
            ("fsync:0", "counted from 1"),
            ("read:every:0", "counted from 1"),
            ("fsync:2:short", "cannot be short"),
            ("seek:1", "read, write or fsync"),
            ("write:1:boom", "eio, enospc"),
            ("write:1:sleep=5h", "eio, enospc"),
            ("write:1:eio:x", "too many"),
            ("write:-1", "operation number"),
        ] {
            let e = bad.parse::<FaultPlan>().unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn operations_are_counted_per_kind_and_picked_deterministically() {
        let f = Faults::new("fsync:2,read:every:3:enospc".parse().unwrap());
        let fsyncs: Vec<_> = (0..4).map(|_| f.next(IoOp::Fsync)).collect();
        assert_eq!(fsyncs, [None, Some(Fault::Fail(EIO)), None, None]);
        let reads: Vec<_> = (0..6).map(|_| f.next(IoOp::Read).is_some()).collect();
        assert_eq!(reads, [false, false, true, false, false, true]);
        assert_eq!(f.next(IoOp::Write), None);
        assert_eq!((f.seen(IoOp::Read), f.injected(IoOp::Read)), (6, 2));
        assert_eq!(f.injected_total(), 3);
        // A clone shares the counters; clearing stops the faults.
        let g = f.clone();
        g.clear();
        assert!((0..6).all(|_| f.next(IoOp::Read).is_none()));
        assert_eq!(g.seen(IoOp::Read), 12);
    }
}
