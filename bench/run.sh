#!/bin/sh
# Parse benchmark: bench_parse on the larger public traces and on a
# synthetic ~256 MiB Kineto-shaped file (generated into a temp dir, deleted
# afterwards). Usage: bench/run.sh BUILD_DIR [RUNS]
set -eu
BUILD=${1:-build}
RUNS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BIN="$BUILD/bin/bench_parse"
SHARED=${RV_SHARED_TRACES:-$SRC/../shared/traces}
[ -x "$BIN" ] || { echo "no $BIN: build first (cmake --build $BUILD --target bench_parse)" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
OUT="$TMP/results.jsonl"
: > "$OUT"

# Each file in its own process so peak RSS is per input.
for f in kineto/resnet50-v100-workers0.pt.trace.json.gz hta/a100-rank0-of-16-five-streams.json.gz \
         param/resnet-2080ti.kineto.json.gz hta/v100-1rank-ns-resolution.json.gz; do
    [ -f "$SHARED/$f" ] && "$BIN" "$SHARED/$f" "$RUNS" >> "$OUT"
done
# The same public trace decompressed: the plain-JSON rate without zlib.
if [ -f "$SHARED/hta/a100-rank0-of-16-five-streams.json.gz" ]; then
    gzip -dc "$SHARED/hta/a100-rank0-of-16-five-streams.json.gz" > "$TMP/a100-rank0-plain.json"
    "$BIN" "$TMP/a100-rank0-plain.json" "$RUNS" >> "$OUT"
fi
python3 "$HERE/gen_kineto.py" "$TMP/synthetic-256MiB.json" 256
"$BIN" "$TMP/synthetic-256MiB.json" "$RUNS" >> "$OUT"
gzip -1 -c "$TMP/synthetic-256MiB.json" > "$TMP/synthetic-256MiB.json.gz"
rm -f "$TMP/synthetic-256MiB.json"
"$BIN" "$TMP/synthetic-256MiB.json.gz" "$RUNS" >> "$OUT"

python3 - "$OUT" <<'PY'
import json, sys, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("%-40s %9s %9s %8s %7s %8s %8s %7s" % ("file", "file MB", "json MB", "events", "MB/s",
      "MB/cpu-s", "RSS MB", "RSS/in"))
for r in rows:
    print("%-40s %9.1f %9.1f %8d %7.0f %8.0f %8.1f %7.2f" % (
        os.path.basename(r["file"])[:40], r["file_bytes"] / 1e6, r["input_bytes"] / 1e6,
        r["events_kept"], r["mb_per_s"], r["mb_per_cpu_s"], r["peak_rss_mb"], r["rss_per_input"]))
PY
