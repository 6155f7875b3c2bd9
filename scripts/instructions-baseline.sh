#!/usr/bin/env bash
# instructions-baseline.sh — re-makes benches/instructions.toml, the committed baseline of the
# instruction-count guard (benches/instructions.rs), from a run of that bench with this build.
#
# Run it after a change that is meant to move the harness's or a lock's per-operation cost, or
# after a toolchain update moved the counts; the commit says which, and why. CI then fails a
# benchmark that goes more than 5 % above the new counts.
#
# What it needs: valgrind, and iai-callgrind-runner of the library's version
#   (cargo install iai-callgrind-runner --version 0.16.1 --locked).
#
#   scripts/instructions-baseline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# A benchmark over its old limit exits 3 (a regression); the counts are printed all the same.
status=0
cargo bench --locked --bench instructions >"$out" 2>&1 || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ] && ! grep -q "exit status: 3" "$out"; then
  cat "$out" >&2
  exit 1
fi
# iai-callgrind prints each benchmark as `instructions::GROUP::ID ...`, then `Instructions: N|...`.
counts=$(awk '
  /^instructions::/ { split($1, p, "::"); id = p[3] }
  /^  Instructions:/ && id != "" { split($2, n, "|"); print id " = " n[1]; id = "" }
' "$out")
if [ -z "$counts" ]; then
  cat "$out" >&2
  echo "instructions-baseline.sh: no counts in the bench's output" >&2
  exit 1
fi
{
  echo "# The baseline of benches/instructions.rs: callgrind's instruction count (Ir) of each benchmark,"
  echo "# 1 000 000 operations each. A benchmark more than 5 % above its count fails."
  echo "# Re-made by scripts/instructions-baseline.sh."
  echo "$counts"
} >benches/instructions.toml
cat benches/instructions.toml
