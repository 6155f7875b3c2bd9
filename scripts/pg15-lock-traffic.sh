#!/usr/bin/env bash
# pg15-lock-traffic.sh — measures real PostgreSQL 15's lock traffic per transaction for the three
# pgbench-shaped workloads that crates/workloads/src/pgbench/ models (tpcb-like both with
# synchronous commit and without), and writes one table per workload under
# tests/pg15-lock-traffic/ (see its README.md for the columns).
#
# What it needs:
#   - root (it mounts tracefs, adds uprobes with `perf probe`, records with `perf record -a`);
#   - PostgreSQL 15's server and pgbench (Debian: apt-get install postgresql-15; PGBIN overrides
#     /usr/lib/postgresql/15/bin);
#   - perf (Debian: linux-perf) on a kernel with uprobes; the postgres binary need not have debug
#     symbols: the probes name exported functions and read their arguments from registers
#     (x86-64 only: %di and %si are the first two integer arguments);
#   - awk, runuser (util-linux), and about 1 GB free under TMPDIR (the cluster and perf's data).
#
# How to run it (from anywhere; it writes into the repository it lives in):
#   sudo scripts/pg15-lock-traffic.sh                  # all four tables
#   sudo scripts/pg15-lock-traffic.sh select-only      # some of them
#   sudo N_SELECT=20000 N_TPCB=5000 N_INSERT=5000 SEED=1 OUT=/elsewhere scripts/pg15-lock-traffic.sh
#   sudo CLIENTS=4 scripts/pg15-lock-traffic.sh tpcb-like-async   # 4 clients: <workload>-c4.tsv
# Environment: N_SELECT, N_TPCB, N_INSERT (transactions measured, defaults 20000, 5000, 5000),
# SEED (pgbench's --random-seed for the measured runs, default 1, so that a re-run draws the same
# rows; each warm-up uses SEED+1, so the measured run does not replay its rows), CLIENTS (pgbench's
# -c, default 1; N_* are then each client's transactions, and a table of more than one client is
# named <workload>-c<CLIENTS>.tsv), SKIP (transactions at the
# start of the measured run left out of the counts, default 100), PGBIN, PGPORT (default 5499),
# PGOSUSER (the non-root user that owns the cluster, created if missing, default pgtest),
# OUT (default tests/pg15-lock-traffic of this repository), KEEP_TRACES (a directory: keep each
# run's `perf script` text there as <table>.txt, with the serving backends' pids in
# <table>.pid, to look at the calls in order).
#
# What it does:
#   1. a throwaway cluster owned by PGOSUSER: initdb, port PGPORT, socket in /tmp, no TCP,
#      shared_buffers=128MB and every other setting at its default (so synchronous_commit = on
#      and fsync = on: each writing transaction flushes WAL at commit; autovacuum on);
#      `pgbench -i -s 10` in a database named pgbench, and a table
#      `insert_commit (id serial primary key, v int)` (scripts/pg15-cluster.sh, which this script
#      sources, builds it, and defines the workloads' commands and warm-ups);
#   2. uprobes on the postgres binary (event group probe_postgres):
#        LWLockAcquire, LWLockConditionalAcquire, LWLockAcquireOrWait with
#          tranche=+0(%di):u16 (the first field of PG 15's struct LWLock is `uint16 tranche`)
#          mode=%si:u32        (the second argument, LWLockMode)
#        — entry probes: a conditional or or-wait hit is an attempt, whether it won or not;
#        LockBuffer with mode=%si:u32 (BUFFER_LOCK_UNLOCK 0, _SHARE 1, _EXCLUSIVE 2);
#        plain entry probes on LockAcquireExtended, LockRelease, LockReleaseAll,
#          GetSnapshotData, ReadBufferExtended, SIGetDataEntries, XLogInsert, XLogFlush,
#          GetNewTransactionId (AssignTransactionId is static, so not probeable in a stripped
#          binary; it calls GetNewTransactionId once per new xid), ProcArrayEndTransaction;
#   3. per workload: a warm-up run of it, unrecorded (caches, hint bits, the tables' state): as
#      long as the measured one, but WARMUP_TPCB transactions with synchronous_commit = off for
#      tpcb-like (its steady state, see WARMUP_TPCB in scripts/pg15-cluster.sh), then
#      `perf record -a -e 'probe_postgres:*'` around exactly one pgbench run:
#        select-only    pgbench -S -M prepared -c 1 -t N_SELECT --random-seed=SEED
#        tpcb-like      pgbench -M prepared -c 1 -t N_TPCB --random-seed=SEED   (builtin TPC-B-like)
#        tpcb-like-async  the same with PGOPTIONS="-c synchronous_commit=off"
#        insert-commit  pgbench -M prepared -c 1 -f insert_commit.sql -t N_INSERT --random-seed=SEED
#                       with insert_commit.sql = `INSERT INTO insert_commit (v) VALUES (1);`
#      (pgbench's own set-up — its first connection's VACUUM of branches and tellers and TRUNCATE
#      of pgbench_history — runs inside the recording but is filtered out below);
#   4. `perf script`, then the counts of the backends serving the benchmark only:
#      - which processes: every backend's process name (comm) is "postgres", so the filter is by
#        pid: the serving backends are the CLIENTS processes that ended at least N transactions
#        each (ProcArrayEndTransaction hits, one per commit or abort); the checkpointer, WAL
#        writer, background writer, autovacuum workers and pgbench's set-up connection end a
#        handful at most, and are left out;
#      - which events: those after each serving backend's SKIP-th ProcArrayEndTransaction up
#        to and including its last one — whole transactions in their steady state, without the
#        connection's start (authentication, catalog caches, the prepared statements' first
#        custom plans) and exit — summed over the backends and divided by the number of
#        ProcArrayEndTransaction hits in those windows (one per transaction: the workloads have
#        one transaction per pgbench transaction); the header line says how many;
#   5. writes OUT/<workload>.tsv (or <workload>-c<CLIENTS>.tsv): `#` lines (the command, versions, settings, the window, the
#      sha256 of this script and scripts/pg15-cluster.sh; for insert-commit the pgbench script;
#      the column names), then
#      `kind<TAB>name<TAB>mode<TAB>per_tx` rows sorted by kind, name, mode, per_tx with 2 decimals
#      (a row of 0.00 was seen, less than once in 200 transactions);
#   6. on exit (also on error or ^C): deletes the probes it added, stops the cluster
#      (pg_ctl stop -m immediate) and removes its directory. The user PGOSUSER is left in place.
#
# Tranche ids are PostgreSQL 15's: 1..47 the individual LWLocks of lwlocknames.txt (named as
# wait events name them, without "Lock": ProcArray, XidGen, WALWrite, XactSLRU ...), 48..74 the
# builtin tranches of lwlock.h's BuiltinTrancheIds (48 XactBuffer ... 55 WALInsert,
# 56 BufferContent, 59 LockFastPath, 60 BufferMapping, 61 LockManager ... 74 PgStatsData); the
# lists below are, in order, the entries of the binary's IndividualLWLockNames[] and
# BuiltinTrancheNames[] (as read from Debian's 15.18 build); an id past them prints as tranche-<id>.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=pg15-cluster.sh
. "$here/pg15-cluster.sh"
N_SELECT=${N_SELECT:-20000}
N_TPCB=${N_TPCB:-5000}
N_INSERT=${N_INSERT:-5000}
SEED=${SEED:-1}
SKIP=${SKIP:-100}
KEEP_TRACES=${KEEP_TRACES:-}
OUT=${OUT:-$repo/tests/pg15-lock-traffic}

[ "$(id -u)" = 0 ] || die "must run as root (perf probe, perf record -a)"
command -v perf >/dev/null || die "perf not found"
pg15_check_server
pg15_workloads "$@"
[ $# -gt 0 ] || workloads+=(tpcb-like-async)
mkdir -p "$OUT"
script_sha=$(pg15_sha)

# --- the cluster -------------------------------------------------------------------------------
probes_added=()
cleanup() {
  set +e
  for p in "${probes_added[@]}"; do perf probe -q -d "probe_postgres:$p" >/dev/null 2>&1; done
  pg15_cluster_stop
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pg15_cluster_start

# --- the probes --------------------------------------------------------------------------------
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
add_probe() { # name, perf probe spec
  perf probe -q -x "$postgres" "$2" >/dev/null || die "perf probe $2 failed"
  probes_added+=("$1")
}
for f in LWLockAcquire LWLockConditionalAcquire LWLockAcquireOrWait; do
  add_probe "$f" "$f tranche=+0(%di):u16 mode=%si:u32"
done
add_probe LockBuffer 'LockBuffer mode=%si:u32'
for f in LockAcquireExtended LockRelease LockReleaseAll GetSnapshotData ReadBufferExtended \
         SIGetDataEntries XLogInsert XLogFlush GetNewTransactionId ProcArrayEndTransaction; do
  add_probe "$f" "$f"
done

# --- aggregation -------------------------------------------------------------------------------
# Reads `perf script -F pid,event,trace` lines such as
#   4242 probe_postgres:LWLockAcquire: (55d0c0a621c0) tranche=56 mode=1
# and prints, for the pid given (awk -v), each row's count between its skip-th and its last
# ProcArrayEndTransaction, and "#tx <transactions>" (sum_awk adds them up over the backends).
aggregate_awk='
BEGIN {
  split("ShmemIndex OidGen XidGen ProcArray SInvalRead SInvalWrite WALBufMapping WALWrite " \
        "ControlFile <unassigned:10> XactSLRU SubtransSLRU MultiXactGen MultiXactOffsetSLRU " \
        "MultiXactMemberSLRU RelCacheInit CheckpointerComm TwoPhaseState TablespaceCreate " \
        "BtreeVacuum AddinShmemInit Autovacuum AutovacuumSchedule SyncScan RelationMapping " \
        "NotifySLRU NotifyQueue SerializableXactHash SerializableFinishedList " \
        "SerializablePredicateList SerialSLRU SyncRep BackgroundWorker " \
        "DynamicSharedMemoryControl AutoFile ReplicationSlotAllocation ReplicationSlotControl " \
        "CommitTsSLRU CommitTs ReplicationOrigin MultiXactTruncation OldSnapshotTimeMap " \
        "LogicalRepWorker XactTruncation <unassigned:45> WrapLimitsVacuum NotifyQueueTail", ind, " ")
  for (i = 1; i <= 47; i++) tranche[i] = ind[i]
  split("XactBuffer CommitTsBuffer SubtransBuffer MultiXactOffsetBuffer MultiXactMemberBuffer " \
        "NotifyBuffer SerialBuffer WALInsert BufferContent ReplicationOriginState " \
        "ReplicationSlotIO LockFastPath BufferMapping LockManager PredicateLockManager " \
        "ParallelHashJoin ParallelQueryDSA PerSessionDSA PerSessionRecordType " \
        "PerSessionRecordTypmod SharedTupleStore SharedTidBitmap ParallelAppend " \
        "PerXactPredicateList PgStatsDSA PgStatsHash PgStatsData", bt, " ")
  for (i = 1; i <= 27; i++) tranche[47 + i] = bt[i]
  lwmode[0] = "LW_EXCLUSIVE"; lwmode[1] = "LW_SHARED"; lwmode[2] = "LW_WAIT_UNTIL_FREE"
  bufmode[0] = "BUFFER_LOCK_UNLOCK"; bufmode[1] = "BUFFER_LOCK_SHARE"; bufmode[2] = "BUFFER_LOCK_EXCLUSIVE"
  kindof["LWLockAcquire"] = "lwlock"
  kindof["LWLockConditionalAcquire"] = "lwlock-conditional"
  kindof["LWLockAcquireOrWait"] = "lwlock-or-wait"
  seen = 0; tx = 0
}
$1 != pid { next }
{
  ev = $2; sub(/^probe_postgres:/, "", ev); sub(/:$/, "", ev)
  if (ev == "ProcArrayEndTransaction") {
    seen++
    if (seen == skip) { for (k in cur) delete cur[k]; started = 1; next }
    if (seen > skip) {
      # the window ends at this hit: fold what came since the previous hit into the totals
      cur["call\tProcArrayEndTransaction\t-"]++
      for (k in cur) { total[k] += cur[k]; delete cur[k] }
      tx++
      next
    }
  }
  if (!started) next
  t = ""; m = ""
  for (i = 3; i <= NF; i++) {
    if ($i ~ /^tranche=/) t = substr($i, 9)
    else if ($i ~ /^mode=/) m = substr($i, 6)
  }
  if (ev in kindof) {
    name = ((t + 0) in tranche) ? tranche[t + 0] : "tranche-" t
    mode = ((m + 0) in lwmode) ? lwmode[m + 0] : "mode-" m
    cur[kindof[ev] "\t" name "\t" mode]++
  } else if (ev == "LockBuffer") {
    mode = ((m + 0) in bufmode) ? bufmode[m + 0] : "mode-" m
    cur["call\tLockBuffer\t" mode]++
  } else {
    cur["call\t" ev "\t-"]++
  }
}
END {
  print "#tx\t" tx
  for (k in total) printf "%s\t%d\n", k, total[k]
}'
# Sums aggregate_awk's counts over the backends and prints the table's rows, per transaction;
# "#tx <count>" on stderr.
sum_awk='
$1 == "#tx" { tx += $2; next }
{ n = $NF; $NF = ""; sub(/\t$/, ""); total[$0] += n }
END {
  print "#tx " tx > "/dev/stderr"
  if (tx == 0) exit 1
  for (k in total) printf "%s\t%.2f\n", k, total[k] / tx
}'

measure() { # workload
  local w=$1 n warm
  local -a args warm_env run_env
  pg15_workload "$w"
  pg15_warm_up "$w" $((SEED + 1))
  args+=(-t "$n" --random-seed="$SEED")
  echo "== $w: pgbench ${args[*]} (recorded)"
  perf record -q -a -m 4096 -e 'probe_postgres:*' -o "$work/$w.data" -- \
    runuser -u "$PGOSUSER" -- env "${run_env[@]}" "$PGBIN/pgbench" -h /tmp -p "$PGPORT" "${args[@]}" pgbench \
    >"$work/$w-run.log" 2>&1 || { cat "$work/$w-run.log"; die "recorded run of $w failed"; }
  grep -E '^(number of transactions actually processed|tps)' "$work/$w-run.log" | sed 's/^/   /'
  if perf report -i "$work/$w.data" --stats 2>/dev/null | grep -Eq 'LOST_SAMPLES|LOST events|^ *LOST +[1-9]'; then
    perf report -i "$work/$w.data" --stats 2>/dev/null | grep -i lost >&2
    die "perf lost events for $w; raise -m"
  fi
  perf script -i "$work/$w.data" -F pid,event,trace 2>/dev/null >"$work/$w.txt"
  # the serving backends: the CLIENTS pids that ended at least n transactions each
  local pids pid
  pids=$(awk -v n="$n" '$2 == "probe_postgres:ProcArrayEndTransaction:" { c[$1]++ }
                        END { for (p in c) if (c[p] >= n) print p }' "$work/$w.txt")
  [ "$(echo "$pids" | grep -c .)" = "$CLIENTS" ] || die "$w: expected $CLIENTS backends with >= $n transactions, found: ${pids:-none}"
  local txs rows
  rows=$(for pid in $pids; do awk -v pid="$pid" -v skip="$SKIP" "$aggregate_awk" "$work/$w.txt"; done |
         awk -F '\t' -v OFS='\t' "$sum_awk" 2>"$work/$w.tx") || die "$w: aggregation failed"
  txs=$(sed -n 's/^#tx //p' "$work/$w.tx")
  local table=$w
  [ "$CLIENTS" = 1 ] || table=$w-c$CLIENTS
  local cmdline="${run_env[*]:+${run_env[*]} }pgbench ${args[*]} pgbench"
  cmdline=${cmdline//$work\//}
  {
    printf '# %s: %s; %s, pgbench -i -s 10, shared_buffers=128MB, other settings default (synchronous_commit=on unless the command sets it), warmed up by the same command unrecorded with -t %s --random-seed=%s%s; the counts of the %s serving backend(s) over %s transactions (each one'"'"'s all but its first %s and its connection'"'"'s start and exit); made by scripts/pg15-lock-traffic.sh, sha256 %s\n' \
      "$table" "$cmdline" "$pgversion" "$warm" "$((SEED + 1))" "${warm_env:+ and ${warm_env[*]}}" "$CLIENTS" "$txs" "$SKIP" "$script_sha"
    if [ "$w" = insert-commit ]; then printf '# insert_commit.sql: %s\n' "$(cat "$work/insert_commit.sql")"; fi
    printf '# kind\tname\tmode\tper_tx\n'
    echo "$rows" | LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2 -k3,3
  } >"$OUT/$table.tsv"
  echo "   -> $OUT/$table.tsv ($txs transactions of backends" $pids")"
  if [ -n "$KEEP_TRACES" ]; then
    mkdir -p "$KEEP_TRACES"
    mv "$work/$w.txt" "$KEEP_TRACES/$table.txt"
    echo "$pids" >"$KEEP_TRACES/$table.pid"
  fi
  rm -f "$work/$w.data" "$work/$w.txt"
}

for w in "${workloads[@]}"; do measure "$w"; done
