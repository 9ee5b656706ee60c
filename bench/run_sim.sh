#!/bin/sh
# Simulator benchmark: bench_sim on the public training traces and on a
# synthetic Kineto trace of about 100k tasks (generated into a temp dir).
# Usage: bench/run_sim.sh BUILD_DIR [RUNS]
set -eu
BUILD=${1:-build}
RUNS=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BIN="$BUILD/bin/bench_sim"
SHARED=${RV_SHARED_TRACES:-$SRC/../shared/traces}
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
for f in kineto/resnet50-v100-workers0.pt.trace.json.gz hta/v100-1rank-ns-resolution.json.gz \
         hta/a100-rank0-of-16-five-streams.json.gz param/resnet-2080ti.kineto.json.gz; do
    [ -f "$SHARED/$f" ] && "$BIN" "$SHARED/$f" "$RUNS"
done
# About 80 MiB of JSON gives about 100k tasks.
python3 "$HERE/gen_kineto.py" "$TMP/synthetic.json" 80
"$BIN" "$TMP/synthetic.json" "$RUNS"
