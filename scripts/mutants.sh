#!/usr/bin/env bash
# mutants.sh — re-makes the mutants table of docs/stress.md: which check catches each
# deliberately broken variant of the models (pglocks_sync::mutant), and how soon.
#
# It builds pglocks with `--cfg pglocks_mutants`, for this machine and for the simulator, then,
# for the unbroken code and each mutant in turn, runs `pglocks stress` on this machine and on
# sim:westmere-80 for the same host time (SECONDS, 120 by default), one after the other, each
# with every part, its default threads and --hang-after 30s, and seed 1. Unless --no-loom, it
# then runs the loom models of the crate each mutant breaks with that mutant in force. It prints
# a markdown table: for each stress, whether it caught the mutant (a violation or a hang, and
# which part), the host seconds to the catch (a hang is reported once --hang-after has passed:
# on this machine that is host time, on the simulated one virtual time) and, for the simulated
# one, the seed and the virtual time of the failing episode; and whether loom caught it.
#
# What it needs: cargo. It takes about half an hour on two CPUs, its builds included.
#
#   scripts/mutants.sh [SECONDS] [--no-loom]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=120
loom=1
for arg in "$@"; do
  case $arg in
    --no-loom) loom=0 ;;
    *) secs=$arg ;;
  esac
done
RUSTFLAGS="--cfg pglocks_mutants" CARGO_TARGET_DIR=target/mutants \
  cargo build --release --locked -q --bin pglocks
RUSTFLAGS="--cfg pglocks_sim --cfg pglocks_mutants" CARGO_TARGET_DIR=target/sim-mutants \
  cargo build --release --locked -q --bin pglocks
real=target/mutants/release/pglocks
sim=target/sim-mutants/release/pglocks
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The crate whose loom models each mutant breaks.
declare -A crate=(
  [lwlock-wakeup-early]=pglocks-lwlock
  [spin-unlock-relaxed]=pglocks-spin
  [fastpath-transfer-skip]=pglocks-lmgr
  [group-clear-forget]=pglocks-procarray
  [latch-no-fence]=pglocks-proc
)
mutants=(none lwlock-wakeup-early spin-unlock-relaxed fastpath-transfer-skip group-clear-forget latch-no-fence)

# What a stress run found: "caught (part, kind) in S s" or "not in S s", from its output.
verdict() {
  local file=$1 status=$2
  local line secs_taken
  secs_taken=$(sed -n 's/^all .* in \([0-9.]*\) s;.*/\1/p' "$file" | head -1)
  if [ "$status" = 0 ]; then
    echo "not caught in ${secs_taken:-?} s"
    return
  fi
  line=$(grep -m1 -E '^(VIOLATION|HANG) ' "$file" || true)
  if [ -z "$line" ]; then
    echo "failed otherwise (status $status)"
    return
  fi
  local kind part
  kind=$(echo "$line" | awk '{print tolower($1)}')
  part=$(echo "$line" | awk '{print $2}' | tr -d ':')
  echo "caught: $kind in $part, after ${secs_taken:-?} s"
}

echo "| mutant | what it breaks | stress, this machine ($(nproc) CPUs, ${secs} s) | stress, sim:westmere-80 (${secs} s of host time) | loom |"
echo "|---|---|---|---|---|"
for m in "${mutants[@]}"; do
  what=unbroken
  env_m=()
  if [ "$m" != none ]; then
    env_m=(PGLOCKS_MUTANT="$m")
    what=$(grep -A2 "\"$m\"," crates/sync/src/mutant.rs | sed -n 's/^ *"\(.*\)",$/\1/p' | tail -1)
  fi
  status=0
  env "${env_m[@]}" "$real" stress --duration "${secs}s" --seed 1 --no-progress \
    >"$out/real" 2>&1 || status=$?
  r=$(verdict "$out/real" "$status")
  status=0
  env "${env_m[@]}" "$sim" stress --machine sim:westmere-80 --duration "${secs}s" --seed 1 \
    --no-progress >"$out/sim" 2>&1 || status=$?
  s=$(verdict "$out/sim" "$status")
  where=$(sed -n 's/^in the episode of seed \([0-9]*\), at \([0-9.]*\) µs.*/seed \1 at \2 µs/p' "$out/sim")
  if [ -n "$where" ]; then s="$s ($where)"; fi
  episodes=$(sed -n 's/^simulated: \([0-9]*\) episodes.*/\1/p' "$out/sim")
  s="$s; ${episodes:-?} episodes"
  l=—
  if [ "$loom" = 1 ] && [ "$m" != none ]; then
    if env "${env_m[@]}" RUSTFLAGS="--cfg loom --cfg pglocks_mutants" \
      CARGO_TARGET_DIR=target/loom-mutants \
      cargo test --release --locked -q -p "${crate[$m]}" --test 'loom_*' >"$out/loom" 2>&1; then
      l="not caught (${crate[$m]})"
    else
      l="caught: $(sed -n 's/^---- \(.*\) stdout ----$/\1/p' "$out/loom" | head -1)"
    fi
  fi
  echo "| $m | $what | $r | $s | $l |"
done
