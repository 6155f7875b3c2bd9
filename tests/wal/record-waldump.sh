#!/usr/bin/env bash
# Records what PostgreSQL 15's pg_waldump prints for the WAL the model writes in
# tests/wal_waldump.rs's deterministic case (one backend, 1000 commits, 16 MB segments):
# the expected output that `cargo test` compares the model's own reading against.
# Needs pg_waldump (apt-get install postgresql-15); PG_WALDUMP overrides its path.
set -euo pipefail
cd "$(dirname "$0")/../.."
waldump=${PG_WALDUMP:-/usr/lib/postgresql/15/bin/pg_waldump}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo run --release --quiet --example wal_segments -- "$dir" 1000 1 >/dev/null
# pg_waldump stops at the zeros after the last record with an error; keep only its records.
TZ=UTC "$waldump" -p "$dir" 000000010000000000000001 > tests/wal/expected/commits-1000.waldump 2>/dev/null || true
wc -l tests/wal/expected/commits-1000.waldump
