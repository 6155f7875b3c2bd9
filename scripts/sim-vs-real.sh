#!/usr/bin/env bash
# sim-vs-real.sh — re-makes the table "Against this machine" of docs/simulator.md: how far the
# simulated machine `sim:this` is from this machine, workload by workload.
#
# It runs `pglocks calibrate` (unless --no-calibrate), then, for each workload, the real run
# (three repeats) and right after it the simulated one on `sim:this` with three seeds of the
# cost model's jitter, at 1, 2 and 8 threads, so that each pair is measured minutes apart at
# most (this kind of machine drifts over minutes). It prints a markdown table: the real
# median with the least and most of its repeats, the simulated figure of the first seed with
# the least and most over the seeds, their ratio, and whether `calibrate` fitted its `local`
# charge on the workload (`pglocks calibrate`'s FIT list) or the figure is a prediction.
#
# What it needs: cargo and jq. It takes about fifteen minutes, its builds included.
#
#   scripts/sim-vs-real.sh [--no-calibrate]
set -euo pipefail
cd "$(dirname "$0")/.."
calibrate=1
if [ "${1:-}" = "--no-calibrate" ]; then calibrate=0; fi
cargo build --release --locked -q
pglocks=target/release/pglocks
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ "$calibrate" = 1 ]; then "$pglocks" calibrate >&2; fi
# workload, and whether calibrate fits `local` on it.
workloads=(
  "spin fitted"
  "lwlock-exclusive fitted"
  "lwlock-shared predicted"
  "buffer-lookup predicted"
  "lmgr-relation predicted"
  "lmgr-vxid predicted"
  "wal-insert predicted"
  "wal-commit predicted"
  "select-only predicted"
)
threads=1,2,8
echo "| workload | threads | real ops/s (least–most of 3) | sim:this ops/s (least–most of 3 seeds) | sim/real | local |"
echo "|---|---|---|---|---|---|"
for entry in "${workloads[@]}"; do
  set -- $entry
  w=$1 fit=$2
  "$pglocks" run "$w" --threads "$threads" --duration 1s --warmup 200ms --repeat 3 \
    --format json >"$out/real.json" 2>/dev/null
  for seed in 1 2 3; do
    "$pglocks" run "$w" --threads "$threads" --duration 200ms --warmup 50ms \
      --machine "sim:this+model.seed=$seed" --format json >"$out/sim$seed.json" 2>/dev/null
  done
  jq -r --arg w "$w" --arg fit "$fit" -s '
    def si: if . >= 1e9 then "\(. / 1e9 * 100 | round / 100)G"
      elif . >= 1e6 then "\(. / 1e6 * 100 | round / 100)M"
      elif . >= 1e3 then "\(. / 1e3 * 10 | round / 10)k"
      else "\(. | round)" end;
    .[0].series[0].points as $real
    | [.[1:][] | .series[0].points] as $sims
    | range(0; $real | length) as $i
    | $real[$i] as $r
    | [$sims[] | .[$i].ops_per_sec] as $s
    | "| \($w) | \($r.threads) | \($r.ops_per_sec | si) (\($r.runs_ops_per_sec | min | si)–\($r.runs_ops_per_sec | max | si)) | \($s[0] | si) (\($s | min | si)–\($s | max | si)) | \($s[0] / $r.ops_per_sec * 100 | round / 100) | \($fit) |"
  ' "$out/real.json" "$out/sim1.json" "$out/sim2.json" "$out/sim3.json"
done
