#!/bin/sh
# End-to-end what-if in the CLI on a ~100k-task trace: generates the
# synthetic Kineto trace (bench/gen_kineto.py, 80 MiB of JSON), writes its
# binary snapshot, and times `reverie simulate --whatif` 11 times on each
# form. Prints the medians. Usage: bench/run_cli.sh BUILD_DIR
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN="$BUILD/bin/reverie"
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
python3 "$HERE/gen_kineto.py" "$TMP/trace.json" 80
"$BIN" snapshot "$TMP/trace.json" "$TMP/trace.rvsnap"
python3 - "$BIN" "$TMP/trace.rvsnap" "$TMP/trace.json" <<'PY'
import statistics, subprocess, sys, time
doc = '{"optimizations":[{"kind":"scale","select":{"kind":"kernel"},"factor":0.5}]}'
for path in sys.argv[2:]:
    cmd = [sys.argv[1], "simulate", path, "--compact", "--whatif", doc]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True).stdout
    ts = []
    for _ in range(11):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        ts.append((time.perf_counter() - t) * 1e3)
    tasks = __import__("json").loads(out)["tasks"]
    print("%-14s %7d tasks  median %6.1f ms  (min %.1f, max %.1f)" % (
        path.rsplit("/", 1)[-1], tasks, statistics.median(ts), min(ts), max(ts)))
PY
