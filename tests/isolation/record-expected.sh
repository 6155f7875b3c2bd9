#!/bin/sh
# Records expected outputs from the real PostgreSQL 15 isolationtester (see FINDINGS.md).
# Usage: record-expected.sh [NAME ...]   (default: all specs). Must run as a non-root user
# with a PG15 server on /tmp:5499 and database isotest.
# Writes expected/NAME.out (stdout) and expected/NAME.stderr (if non-empty);
# A fresh database isotest is created for every run.
# With RUNS=n (default 3) runs n times and reports whether outputs agree.
T=/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/isolationtester
CONN="dbname=isotest host=/tmp port=5499"
cd "$(dirname "$0")"
RUNS=${RUNS:-3}
[ $# -eq 0 ] && set -- $(ls specs | sed 's/\.spec$//')
mkdir -p expected runs  # runs/ is scratch (not committed)
for n in "$@"; do
  i=1; ok=yes
  while [ $i -le $RUNS ]; do
    /usr/lib/postgresql/15/bin/dropdb --if-exists -h /tmp -p 5499 isotest
    /usr/lib/postgresql/15/bin/createdb -h /tmp -p 5499 isotest
    timeout 120 $T "$CONN" < specs/$n.spec > runs/$n.$i.out 2> runs/$n.$i.err
    echo $? > runs/$n.$i.rc
    if [ $i -gt 1 ]; then
      cmp -s runs/$n.1.out runs/$n.$i.out && cmp -s runs/$n.1.err runs/$n.$i.err || ok=no
    fi
    i=$((i+1))
  done
  cp runs/$n.1.out expected/$n.out
  if [ -s runs/$n.1.err ]; then cp runs/$n.1.err expected/$n.stderr; else rm -f expected/$n.stderr; fi
  echo "$n: rc=$(cat runs/$n.1.rc) identical_over_${RUNS}_runs=$ok"
done
