#!/usr/bin/env bash
# pg15-executor-cpu.sh — measures how much CPU time a real PostgreSQL 15 backend spends per
# transaction, user and system separately, for the three pgbench-shaped workloads that
# crates/workloads/src/pgbench/ models, and writes tests/pg15-executor-cpu/cpu.tsv (see its
# README.md for the columns). CPU time, not wall time: the figure is the serving backend's own,
# whatever else the machine runs at the same time (pgbench, other jobs).
#
# What it needs:
#   - root (it creates the cluster's owner and runs the server and pgbench as that user with
#     runuser, and reads the backend's /proc files);
#   - PostgreSQL 15's server and pgbench (Debian: apt-get install postgresql-15; PGBIN overrides
#     /usr/lib/postgresql/15/bin);
#   - Linux with /proc/<pid>/schedstat (CONFIG_SCHED_INFO) and /proc/<pid>/task/<pid>/children
#     (CONFIG_PROC_CHILDREN); bash 5 (EPOCHREALTIME); awk, sort, runuser (util-linux); about
#     500 MB free under TMPDIR (the cluster).
#
# How to run it (from anywhere; it writes into the repository it lives in):
#   sudo scripts/pg15-executor-cpu.sh                  # all three workloads, 3 runs each
#   sudo scripts/pg15-executor-cpu.sh tpcb-like        # some of them
#   sudo REPS=5 N_TPCB=5000 OUT=/elsewhere scripts/pg15-executor-cpu.sh
# Environment: N_SELECT, N_TPCB, N_INSERT (transactions per measured run, defaults 20000, 3000,
# 5000), REPS (measured runs per workload, default 3; the table holds their medians), SEED
# (pgbench's --random-seed: measured run r of a workload uses SEED+r-1, its warm-up SEED+REPS;
# default 1), SKIP (transactions at the start of a measured run left out, default 100),
# WARMUP_TPCB (default 200000, see scripts/pg15-cluster.sh), POLL_MS (the sampling period,
# default 10), PGBIN, PGPORT (default 5499), PGOSUSER (the non-root user that owns the cluster,
# created if missing, default pgtest), OUT (default tests/pg15-executor-cpu of this repository).
# Only the workloads named are measured, and only their rows are written (a partial cpu.tsv).
#
# What it does:
#   1. a throwaway cluster owned by PGOSUSER, as scripts/pg15-lock-traffic.sh has it (both source
#      scripts/pg15-cluster.sh, which builds it, and defines the workloads' commands and
#      warm-ups): initdb, port PGPORT, socket in /tmp, no TCP, shared_buffers=128MB and every
#      other setting at its default (synchronous_commit = on, fsync = on: each writing
#      transaction flushes WAL at commit; autovacuum on, also during the measured runs);
#      `pgbench -i -s 10` in a database named pgbench, and a table
#      `insert_commit (id serial primary key, v int)`;
#   2. per workload, a warm-up run, unmeasured: the same command as long as a measured run, but
#      WARMUP_TPCB transactions with synchronous_commit = off for tpcb-like (its steady state:
#      nearly every page of pgbench_accounts updated, as in the lock-traffic script); then REPS
#      measured runs, each one pgbench invocation:
#        select-only    pgbench -S -M prepared -c 1 -t N_SELECT
#        tpcb-like      pgbench -M prepared -c 1 -t N_TPCB                 (builtin TPC-B-like)
#        insert-commit  pgbench -M prepared -c 1 -f insert_commit.sql -t N_INSERT
#                       with insert_commit.sql = `INSERT INTO insert_commit (v) VALUES (1);`
#      each with --random-seed and -l (pgbench's per-transaction log: when each one completed);
#      pgbench's own set-up connection (VACUUM of branches and tellers, TRUNCATE of
#      pgbench_history) is a backend of its own and is not counted;
#   3. during a measured run, every POLL_MS a sampler (bash builtins only: no process started per
#      sample) lists the postmaster's children and, for each client backend of database pgbench
#      (process title `postgres: PGOSUSER pgbench ...`), reads /proc/<pid>/schedstat (its run
#      time in ns, sum_exec_runtime) and /proc/<pid>/stat (utime and stime, in clock ticks),
#      stamped with the wall clock before and after the reads;
#   4. the serving backend is the client backend sampled most often (the set-up connection lives
#      for a few samples at most); its window runs from its first sample after pgbench's log shows
#      SKIP transactions completed (the connection's start, its first plans and the prepared
#      statements are before it) to its last sample before the last transaction completed (its
#      exit is after it); the transactions in the window are those pgbench's log shows completed
#      between the two samples' mid-times;
#   5. per run: total µs per transaction = the run time's increase over the window / its
#      transactions; user and system = the total split as utime : stime increased over the window
#      (the kernel's own split: /proc/<pid>/stat's utime + stime is that same run time, split
#      in proportion to the ticks that found the process in user or kernel mode, but printed in
#      10 ms ticks, too coarse for a window of a second); and pgbench's tps (wall clock, so it
#      depends on the machine's load, the CPU figures less), the share of the machine's CPU
#      time busy during the run (/proc/stat; all processes, the run's own included), and per
#      transaction the backend's wall time in the window, its time runnable but waiting for a
#      CPU and the number of times it was given one (schedstat), to tell a run whose backend
#      ran back to back from one whose backend slept (a slow WAL flush) while others ran;
#   6. writes OUT/cpu.tsv: `#` lines (the command, versions, settings, the sha256 of this script
#      and scripts/pg15-cluster.sh, every run's figures), the column names, then one row per
#      workload `workload<TAB>user_us_per_tx<TAB>system_us_per_tx<TAB>total_us_per_tx`, each
#      the median of the REPS runs' values of that column (so user + system may differ from total
#      by a little);
#   7. on exit (also on error or ^C): stops the cluster (pg_ctl stop -m immediate) and removes its
#      directory. The user PGOSUSER is left in place.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=pg15-cluster.sh
. "$here/pg15-cluster.sh"
N_SELECT=${N_SELECT:-20000}
N_TPCB=${N_TPCB:-3000}
N_INSERT=${N_INSERT:-5000}
REPS=${REPS:-3}
SEED=${SEED:-1}
SKIP=${SKIP:-100}
POLL_MS=${POLL_MS:-10}
OUT=${OUT:-$repo/tests/pg15-executor-cpu}

[ "$(id -u)" = 0 ] || die "must run as root (runuser, useradd)"
[ -n "${EPOCHREALTIME:-}" ] || die "needs bash 5 (EPOCHREALTIME)"
[ -r /proc/self/schedstat ] || die "no /proc/<pid>/schedstat (CONFIG_SCHED_INFO)"
[ -r "/proc/$$/task/$$/children" ] || die "no /proc/<pid>/task/<pid>/children (CONFIG_PROC_CHILDREN)"
pg15_check_server
pg15_workloads "$@"
[[ $REPS =~ ^[1-9][0-9]*$ && $POLL_MS =~ ^[1-9][0-9]*$ && $SKIP =~ ^[0-9]+$ ]] || die "REPS, POLL_MS, SKIP: numbers"
mkdir -p "$OUT"
script_sha=$(pg15_sha)
hz=$(getconf CLK_TCK)
poll_s=$(printf '%d.%03d' $((POLL_MS / 1000)) $((POLL_MS % 1000)))

# --- the cluster -------------------------------------------------------------------------------
cleanup() {
  set +e
  if [ -n "${sampler:-}" ]; then kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; fi
  pg15_cluster_stop
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pg15_cluster_start
pm=$(head -1 "$data/postmaster.pid")
[ -r "/proc/$pm/task/$pm/children" ] || die "postmaster $pm not found"

# --- the sampler -------------------------------------------------------------------------------
# Until process $1 (the runuser that runs pgbench) ends: every POLL_MS, one line per client
# backend of database pgbench, `t0 t1 pid sum_exec_ns wait_ns slices <the /proc/pid/stat line>`
# (t0, t1: the wall clock in µs before and after the reads). Builtins only; the pause is a read
# with a timeout on a FIFO nobody writes to.
mkfifo "$work/pause.fifo"
sample() { # runner pid, output file
  local runner=$1 out=$2 kids k title t0 t1 ss st pause
  local -A kind=()
  exec {pause}<>"$work/pause.fifo"
  exec >"$out"
  while kill -0 "$runner" 2>/dev/null; do
    kids=
    read -r kids <"/proc/$pm/task/$pm/children" || :
    for k in $kids; do
      if [ -z "${kind[$k]:-}" ]; then
        title=
        IFS= read -r -d '' title 2>/dev/null <"/proc/$k/cmdline" || :
        case $title in
          "postgres: $PGOSUSER pgbench "*) kind[$k]=client ;;
          "postgres: "*) kind[$k]=other ;;
          *) continue ;; # just forked: no title yet
        esac
      fi
      [ "${kind[$k]}" = client ] || continue
      t0=$EPOCHREALTIME
      { read -r ss <"/proc/$k/schedstat" && read -r st <"/proc/$k/stat"; } 2>/dev/null || continue
      t1=$EPOCHREALTIME
      echo "${t0/./} ${t1/./} $k $ss $st"
    done
    read -r -t "$poll_s" -u "$pause" _ || :
  done
}

# --- one run's figures -------------------------------------------------------------------------
# Reads pgbench's per-transaction log (fields: client, transaction, latency µs, script, epoch s,
# µs: one line per transaction, in order for one client), then the samples; prints
# `pid tx sum_exec_ns utime_ticks stime_ticks runqueue_wait_ns timeslices wall_us` for the serving
# backend's window (schedstat's three fields: time on a CPU, time runnable but waiting for one,
# and how many times it was given one).
window_awk='
FNR == NR { done[++n] = $5 * 1000000 + $6; next }
{ cnt[$3]++; line[$3, cnt[$3]] = $0 }
END {
  if (n == 0) { print "no transaction in the log" > "/dev/stderr"; exit 1 }
  best = ""; for (p in cnt) if (best == "" || cnt[p] > cnt[best]) best = p
  if (best == "") { print "no client backend sampled" > "/dev/stderr"; exit 1 }
  i = 0; a = 0; b = 0
  for (s = 1; s <= cnt[best]; s++) {
    split(line[best, s], f, " ")
    mid = (f[1] + f[2]) / 2
    while (i < n && done[i + 1] <= mid) i++
    if (!a && i >= skip) { a = s; ia = i; sa = f[4]; ua = f[6 + 14]; ka = f[6 + 15]; wa = f[5]; pa = f[6]; ma = mid }
    if (a && mid <= done[n]) { b = s; ib = i; sb = f[4]; ub = f[6 + 14]; kb = f[6 + 15]; wb = f[5]; pb = f[6]; mb = mid }
  }
  if (!a || !b || ib <= ia) { print "window too short: " cnt[best] " samples of " best > "/dev/stderr"; exit 1 }
  print best, ib - ia, sb - sa, ub - ua, kb - ka, wb - wa, pb - pa, mb - ma
}'

# The machine's busy time so far and its total, in ticks over all CPUs (the first line of
# /proc/stat: user, nice, system, irq, softirq and steal are busy; idle and iowait are not; guest
# time is already in user), for the share of the machine busy during a run.
cpu_ticks() {
  local cpu u n s i io irq sirq steal rest
  read -r cpu u n s i io irq sirq steal rest </proc/stat
  echo "$((u + n + s + irq + sirq + steal)) $((u + n + s + irq + sirq + steal + i + io))"
}

# tab-separated figures of every run, for the table: workload rep tx user_us sys_us total_us tps
# ticks_us busy% wall_us runqueue_us timeslices (the last three per transaction too)
runs=$work/runs.tsv
: >"$runs"

measure() { # workload
  local w=$1 n warm
  local -a args warm_env
  pg15_workload "$w"
  pg15_warm_up "$w" $((SEED + REPS))
  local r seed log runner busy0 busy1
  for ((r = 1; r <= REPS; r++)); do
    seed=$((SEED + r - 1))
    log=$work/$w-$r
    echo "== $w: run $r: pgbench ${args[*]} -t $n --random-seed=$seed -l"
    busy0=$(cpu_ticks)
    runuser -u "$PGOSUSER" -- "$PGBIN/pgbench" -h /tmp -p "$PGPORT" "${args[@]}" -t "$n" --random-seed="$seed" \
      -l --log-prefix="$log.txlog" pgbench >"$log.out" 2>&1 &
    runner=$!
    sample "$runner" "$log.samples" &
    sampler=$!
    wait "$runner" || { cat "$log.out"; die "run $r of $w failed"; }
    busy1=$(cpu_ticks)
    wait "$sampler" || :
    sampler=
    local txlog
    txlog=$(ls "$log".txlog.* 2>/dev/null | head -1)
    [ -n "$txlog" ] || die "$w run $r: no pgbench log"
    [ "$(wc -l <"$txlog")" = "$n" ] || die "$w run $r: pgbench logged $(wc -l <"$txlog") transactions, not $n"
    local fig pid tx ns ut st rq sl wall tps
    fig=$(awk -v skip="$SKIP" "$window_awk" "$txlog" "$log.samples") || die "$w run $r: no window"
    read -r pid tx ns ut st rq sl wall <<<"$fig"
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$log.out")
    [ -n "$tps" ] || { cat "$log.out"; die "$w run $r: no tps in pgbench's output"; }
    awk -v w="$w" -v r="$r" -v tx="$tx" -v ns="$ns" -v ut="$ut" -v st="$st" -v tps="$tps" -v hz="$hz" \
        -v b0="$busy0" -v b1="$busy1" -v rq="$rq" -v sl="$sl" -v wall="$wall" 'BEGIN {
      total = ns / 1000 / tx
      user = (ut + st > 0) ? total * ut / (ut + st) : 0
      split(b0, p, " "); split(b1, q, " ")
      busy = (q[2] > p[2]) ? 100 * (q[1] - p[1]) / (q[2] - p[2]) : 0
      printf "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t%.0f\t%.1f\t%.1f\t%.2f\n", w, r, tx, user, total - user, total, tps, (ut + st) * 1000000 / hz / tx, busy, wall / tx, rq / 1000 / tx, sl / tx
    }' >>"$runs"
    tail -1 "$runs" | awk -F '\t' -v pid="$pid" '{ printf "   backend %s: %s transactions in the window; µs per transaction: user %s, system %s, total %s (stat ticks: %s), wall %s, waiting for a CPU %s; %s timeslices per transaction; tps %s; machine busy %s%%\n", pid, $3, $4, $5, $6, $8, $10, $11, $12, $7, $9 }'
    rm -f "$txlog"
  done
}

for w in "${workloads[@]}"; do measure "$w"; done

# --- the table ---------------------------------------------------------------------------------
median_awk='
{ v[$1, 4, ++c[$1]] = $4; v[$1, 5, c[$1]] = $5; v[$1, 6, c[$1]] = $6 }
function med(w, col,   k, i, j, t, a) {
  k = c[w]; for (i = 1; i <= k; i++) a[i] = v[w, col, i]
  for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END { for (i = 1; i <= nw; i++) { w = ws[i]; if (w in c) printf "%s\t%.1f\t%.1f\t%.1f\n", w, med(w, 4), med(w, 5), med(w, 6) } }'
{
  printf '# PostgreSQL 15 backend CPU per transaction; made by: sudo scripts/pg15-executor-cpu.sh%s (sha256 %s), with N_SELECT=%s N_TPCB=%s N_INSERT=%s REPS=%s SEED=%s SKIP=%s POLL_MS=%s WARMUP_TPCB=%s\n' \
    "${*:+ $*}" "$script_sha" "$N_SELECT" "$N_TPCB" "$N_INSERT" "$REPS" "$SEED" "$SKIP" "$POLL_MS" "$WARMUP_TPCB"
  printf '# %s; pgbench -i -s 10, shared_buffers=128MB, other settings default (synchronous_commit=on, fsync=on, autovacuum on); %s; Linux %s, %s CPUs\n' \
    "$pgversion" "$("$PGBIN/pgbench" --version)" "$(uname -r)" "$(nproc)"
  printf '# commands (measured runs, each after a warm-up, see the script): select-only = pgbench -S -M prepared -c 1 -t %s; tpcb-like = pgbench -M prepared -c 1 -t %s; insert-commit = pgbench -M prepared -c 1 -f insert_commit.sql -t %s, insert_commit.sql = INSERT INTO insert_commit (v) VALUES (1);\n' \
    "$N_SELECT" "$N_TPCB" "$N_INSERT"
  printf '# the serving backend only, over its transactions after the first %s; per run: workload, run, transactions in the window, µs per transaction user, system, total (run time from /proc/<pid>/schedstat, split by /proc/<pid>/stat utime:stime), the same total from stat'"'"'s 10 ms ticks, pgbench tps, the share of the machine'"'"'s CPU time busy during the run (all processes, these included), and per transaction: wall time, time runnable waiting for a CPU (schedstat), times given a CPU\n' "$SKIP"
  awk -F '\t' '{ printf "# run\t%s\t%s\t%s\tuser %s\tsystem %s\ttotal %s\tticks %s\ttps %s\tbusy %s%%\twall %s\trunqueue %s\tslices %s\n", $1, $2, $3, $4, $5, $6, $8, $7, $9, $10, $11, $12 }' "$runs"
  printf '# workload\tuser_us_per_tx\tsystem_us_per_tx\ttotal_us_per_tx\n'
  awk -F '\t' -v nw=3 'BEGIN { ws[1] = "select-only"; ws[2] = "tpcb-like"; ws[3] = "insert-commit" }'"$median_awk" "$runs"
} >"$OUT/cpu.tsv"
echo "== $OUT/cpu.tsv"
grep -v '^#' "$OUT/cpu.tsv"
