//! The two session locks parallel apply takes on a remote transaction (applyparallelworker.c):
//! the *stream lock* and the *transaction lock*, their object ids, and `apply_lock`, which
//! takes or releases either. The leader (the `leader` module) and the parallel apply
//! workers (the `parallel` module) both wait on them.

use crate::config::ApplyConfig;
use crate::error::ApplyError;
use crate::subscriber::Subscriber;
use pglocks_lmgr::{LocalLocks, LockMode};
use pglocks_lwlock::RawLwLock;
use pglocks_proc::Backend;

/// applyparallelworker.c's `PARALLEL_APPLY_LOCK_STREAM`: the stream lock's object id.
pub const PARALLEL_APPLY_LOCK_STREAM: u16 = 0;
/// applyparallelworker.c's `PARALLEL_APPLY_LOCK_XACT`: the transaction lock's object id.
pub const PARALLEL_APPLY_LOCK_XACT: u16 = 1;

/// Models `pa_lock_stream`/`pa_unlock_stream` and `pa_lock_transaction`/`pa_unlock_transaction`
/// (applyparallelworker.c): takes (`lock`) or releases a session lock in `mode` on object
/// `objid` of remote transaction `xid`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply_lock<K: RawLwLock>(
    sub: &Subscriber<K>,
    b: &mut Backend,
    local: &mut LocalLocks,
    cfg: &ApplyConfig,
    xid: u32,
    objid: u16,
    mode: LockMode,
    lock: bool,
) -> Result<(), ApplyError> {
    let (lm, suboid) = (sub.lock_manager(), cfg.subscription);
    if lock {
        lm.lock_apply_transaction_for_session(b, local, suboid, xid, objid, mode, &cfg.timeouts)?;
    } else {
        lm.unlock_apply_transaction_for_session(b, local, suboid, xid, objid, mode)?;
    }
    Ok(())
}
