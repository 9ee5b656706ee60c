#!/bin/sh
# Ingest speed against plain decompression (issue #32): for each trace,
# the median wall time of `reverie simulate T --compact` and of
# `gzip -dc T >/dev/null`, run interleaved (one of each per round, so that
# load on a shared machine falls on both alike), and their ratio.
# Usage: bench/ingest_ratio.sh BUILD_DIR [TRACE...]
# Without traces: the three largest Kineto traces under the shared traces/
# folder (RV_SHARED_TRACES) and the generator's 80 MiB trace, gzipped
# (made once under RV_BENCH_TMP, default /tmp/rv-ingest-bench).
# RUNS (default 7) sets the rounds per trace.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [TRACE...]" >&2; exit 2; }
BIN=$1/bin/reverie
shift
[ -x "$BIN" ] || { echo "no $BIN (build first)" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
SHARED=${RV_SHARED_TRACES:-$SRC/../shared/traces}
RUNS=${RUNS:-7}
TMPD=${RV_BENCH_TMP:-/tmp/rv-ingest-bench}

if [ $# -eq 0 ]; then
    mkdir -p "$TMPD"
    if [ ! -f "$TMPD/gen80.json.gz" ]; then
        python3 "$HERE/gen_kineto.py" "$TMPD/gen80.json" 80 >/dev/null
        gzip -f "$TMPD/gen80.json"
    fi
    # Execution traces (*.et.json*) are companions, not Kineto traces.
    set -- $(find "$SHARED" -type f \( -name '*.json' -o -name '*.json.gz' \) ! -name '*.et.json*' \
        -exec ls -s1 {} + | sort -n | tail -3 | awk '{print $2}') "$TMPD/gen80.json.gz"
fi

now() { date +%s.%N; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-48s %10s %10s %7s\n' trace reverie_s gzip_s ratio
for t in "$@"; do
    : > /tmp/rv-ingest.$$.r
    : > /tmp/rv-ingest.$$.g
    i=0
    while [ $i -lt "$RUNS" ]; do
        a=$(now); "$BIN" simulate "$t" --compact >/dev/null; b=$(now)
        echo "$b - $a" | bc -l >> /tmp/rv-ingest.$$.r
        a=$(now); gzip -dc "$t" >/dev/null; b=$(now)
        echo "$b - $a" | bc -l >> /tmp/rv-ingest.$$.g
        i=$((i + 1))
    done
    r=$(median < /tmp/rv-ingest.$$.r)
    g=$(median < /tmp/rv-ingest.$$.g)
    printf '%-48s %10.3f %10.3f %6.2fx\n' "$(basename "$t")" "$r" "$g" "$(echo "$r / $g" | bc -l)"
done
rm -f /tmp/rv-ingest.$$.r /tmp/rv-ingest.$$.g
