#!/bin/sh
# Job benchmark: bench_job at 32, 64 and 128 ranks of ~50k tasks each, built
# from the real DLRM rank traces, pinned to one core (docs/internals/job.md).
# Usage: bench/run_job.sh BUILD_DIR [TASKS_PER_RANK]
set -eu
BUILD=${1:-build}
TASKS=${2:-50000}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BIN="$BUILD/bin/bench_job"
SHARED=${RV_SHARED_TRACES:-$SRC/../shared/traces}
DIR="$SHARED/param/dlrm-8rank"
[ -x "$BIN" ] || { echo "no $BIN: build first (cmake --build $BUILD --target bench_job)" >&2; exit 1; }
[ -f "$DIR/worker0.kineto.json.gz" ] || { echo "no $DIR (RV_SHARED_TRACES)" >&2; exit 1; }
PIN=""
command -v taskset >/dev/null 2>&1 && PIN="taskset -c 0"
for n in 32 64 128; do
    $PIN "$BIN" "$DIR" "$n" "$TASKS"
done | python3 -c '
import json, sys
print("%6s %10s %12s %10s %10s %12s %12s %10s %10s" % ("ranks", "tasks", "rank graphs",
      "job build", "job run", "build+sim s", "(cpu s)", "RSS MiB", "straggler"))
for l in sys.stdin:
    r = json.loads(l)
    print("%6d %10d %12.2f %10.2f %10.2f %12.2f %12.2f %10.0f %10s" % (r["ranks"], r["tasks"],
          r["rank_graphs_s"], r["job_build_s"], r["job_run_s"],
          r["rank_graphs_s"] + r["job_total_s"], r["rank_graphs_cpu_s"] + r["job_total_cpu_s"],
          r["peak_rss_mib"],
          "ok" if r["first_straggler"] == r["injected_straggler"] else "MISSED"))
'
