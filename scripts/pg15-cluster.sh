# shellcheck shell=bash
# pg15-cluster.sh — the throwaway PostgreSQL 15 cluster that scripts/pg15-lock-traffic.sh and
# scripts/pg15-executor-cpu.sh measure, and the three pgbench-shaped workloads they run on it
# (the ones crates/workloads/src/pgbench/ models). Both scripts source this file, so that they
# measure the same server under the same commands; it is not run on its own.
#
# The cluster: owned by PGOSUSER (a non-root user, created if missing and left in place), in a
# fresh directory under TMPDIR; initdb, port PGPORT, socket in /tmp, no TCP, shared_buffers=128MB
# and every other setting at its default (so synchronous_commit = on and fsync = on: each writing
# transaction flushes WAL at commit; autovacuum on); `pgbench -i -s 10` in a database named
# pgbench, and a table `insert_commit (id serial primary key, v int)`.
#
# The workloads, each CLIENTS clients (default 1) on a connection each, with prepared statements
# (-c below is -c CLIENTS; -t counts each client's transactions):
#   select-only    pgbench -S -M prepared -c 1 -t N_SELECT
#   tpcb-like      pgbench -M prepared -c 1 -t N_TPCB                  (builtin TPC-B-like)
#   tpcb-like-async  the same with synchronous_commit = off (PGOPTIONS) in the measured run
#   insert-commit  pgbench -M prepared -c 1 -f insert_commit.sql -t N_INSERT
#                  with insert_commit.sql = `INSERT INTO insert_commit (v) VALUES (1);`
# and each one's warm-up, run before it is measured: the same command as long as the measured
# run, except tpcb-like's (see WARMUP_TPCB below: its transactions in all, shared among the
# clients).
#
# What the sourcing script gets (it has `set -euo pipefail` on, and sets N_SELECT, N_TPCB and
# N_INSERT):
#   PGBIN, PGPORT, PGOSUSER, WARMUP_TPCB, CLIENTS   the settings below, with their defaults;
#   die MESSAGE               "<script>: MESSAGE" on stderr, exit 1;
#   pg15_check_server         runuser and PGBIN's postgres of release 15 are there; sets
#                             $postgres (the binary) and $pgversion (its --version line);
#   pg15_workloads ARGS...    sets the array workloads to the workloads named (select-only,
#                             tpcb-like and insert-commit if none), dies on an unknown name;
#   pg15_sha                  the first 12 hex digits of the sha256 of the script and this file,
#                             which the tables record as the code that made them;
#   pg15_cluster_start        makes and starts the cluster, setting $work (its directory, where
#                             the script keeps its files too) and $data (the data directory);
#   pg15_cluster_stop         stops the server (pg_ctl stop -m immediate) and removes $work; for
#                             the script's EXIT trap, which it sets before pg15_cluster_start;
#   as_pg, psql, pgbench      a command as PGOSUSER; psql and pgbench on the cluster;
#   pg15_workload W           sets n (transactions measured), args (pgbench's options),
#                             run_env (the measured run's environment), warm (the warm-up's
#                             transactions) and warm_env (its environment) of workload W, in
#                             variables the caller declares local;
#   pg15_warm_up W SEED       runs W's warm-up, unmeasured, with pgbench's --random-seed=SEED,
#                             from the variables pg15_workload set.

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGPORT=${PGPORT:-5499}
PGOSUSER=${PGOSUSER:-pgtest}
# tpcb-like is measured in its steady state: after enough updates that nearly every page of
# pgbench_accounts has been updated once (a page full since `pgbench -i` takes its first update
# elsewhere, non-HOT; later ones are HOT after pruning). 200 000 warm-up transactions update
# each of the 16 394 pages about 12 times; they run with synchronous_commit = off, to be quick.
WARMUP_TPCB=${WARMUP_TPCB:-200000}
CLIENTS=${CLIENTS:-1}

pg15_script=${0##*/}

die() { echo "${pg15_script%.sh}: $*" >&2; exit 1; }

pg15_check_server() {
  command -v runuser >/dev/null || die "runuser not found"
  postgres=$PGBIN/postgres
  [ -x "$postgres" ] || die "no $postgres (set PGBIN)"
  pgversion=$("$postgres" --version)
  case $pgversion in *" 15."*) ;; *) die "wants PostgreSQL 15, found: $pgversion" ;; esac
}

pg15_workloads() {
  workloads=("$@")
  [ ${#workloads[@]} -gt 0 ] || workloads=(select-only tpcb-like insert-commit)
  local w
  for w in "${workloads[@]}"; do
    case $w in select-only|tpcb-like|tpcb-like-async|insert-commit) ;; *) die "unknown workload $w" ;; esac
  done
}

pg15_sha() { cat "$0" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12; }

as_pg() { runuser -u "$PGOSUSER" -- "$@"; }
psql() { as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h /tmp -p "$PGPORT" "$@"; }
pgbench() { as_pg "$PGBIN/pgbench" -h /tmp -p "$PGPORT" "$@"; }

pg15_cluster_start() {
  if ! id -u "$PGOSUSER" >/dev/null 2>&1; then
    useradd --system --create-home --shell /bin/sh "$PGOSUSER"
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/${pg15_script%.sh}.XXXXXX")
  data=$work/data
  chown "$PGOSUSER": "$work"
  chmod 755 "$work"

  echo "== cluster in $work (port $PGPORT, socket /tmp)"
  as_pg "$PGBIN/initdb" -D "$data" -A trust -U "$PGOSUSER" >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; die "initdb failed"; }
  cat >>"$data/postgresql.conf" <<EOF
# $pg15_script: everything else at its default (synchronous_commit = on, fsync = on)
port = $PGPORT
listen_addresses = ''
unix_socket_directories = '/tmp'
shared_buffers = 128MB
EOF
  as_pg "$PGBIN/pg_ctl" -D "$data" -l "$work/server.log" -w start >/dev/null
  psql -d postgres -c 'CREATE DATABASE pgbench'
  pgbench -i -s 10 -q pgbench >"$work/pgbench-init.log" 2>&1 || { cat "$work/pgbench-init.log"; die "pgbench -i failed"; }
  psql -d pgbench -c 'CREATE TABLE insert_commit (id serial primary key, v int)'
  echo 'INSERT INTO insert_commit (v) VALUES (1);' >"$work/insert_commit.sql"
  chmod 644 "$work/insert_commit.sql"
}

pg15_cluster_stop() {
  [ -n "${work:-}" ] || return 0
  if [ -f "$data/postmaster.pid" ]; then as_pg "$PGBIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1; fi
  rm -rf "$work"
}

pg15_workload() { # workload
  case $1 in
    select-only)   n=$N_SELECT; args=(-S -M prepared -c "$CLIENTS") ;;
    tpcb-like|tpcb-like-async) n=$N_TPCB; args=(-M prepared -c "$CLIENTS") ;;
    insert-commit) n=$N_INSERT; args=(-M prepared -c "$CLIENTS" -f "$work/insert_commit.sql") ;;
  esac
  warm=$n warm_env=() run_env=()
  case $1 in tpcb-like*) warm=$((WARMUP_TPCB / CLIENTS)); warm_env=(PGOPTIONS="-c synchronous_commit=off") ;; esac
  if [ "$1" = tpcb-like-async ]; then run_env=(PGOPTIONS="-c synchronous_commit=off"); fi
}

pg15_warm_up() { # workload, seed
  local w=$1 seed=$2
  echo "== $w: warm-up, ${warm_env[*]} pgbench ${args[*]} -t $warm --random-seed=$seed"
  as_pg env "${warm_env[@]}" "$PGBIN/pgbench" -h /tmp -p "$PGPORT" "${args[@]}" -t "$warm" --random-seed="$seed" pgbench \
    >"$work/$w-warmup.log" 2>&1 || { cat "$work/$w-warmup.log"; die "warm-up of $w failed"; }
}
