#!/bin/sh
# Fleet what-if benchmark: N distinct real traces x 3 scenarios, cold (a
# fresh reveried, nothing cached) and cached (the same request again), on
# one replica and on two replicas sharing one PostgreSQL.
#
# Builds the traces with bench/distinct_traces.py from real traces of
# several platforms (the ResNet-50 V100 sample and traces under
# RV_SHARED_TRACES, default ../shared/traces), starts a private reveried
# with its embedded PostgreSQL under a temporary REVERIE_HOME, uploads the
# traces (two curl uploads at a time; upload time is not the figure here),
# then for each N times a fleet job from POST to done and prints the time
# per trace with its breakdown from the server's fleet counters
# (/metrics, summed over the fleet threads and divided by the rows).
#
# Usage: bench/fleet.sh [BUILD_DIR] [N ...]      (default N: 100 300 1000)
#        bench/fleet.sh BUILD_DIR small          (N = 12: a quick check)
# Environment: RV_FLEET_TRACES (where the generated traces are kept between
# runs, default BUILD_DIR/fleet-traces), RV_FLEET_HOME (keep the server's
# home and its traces for the next run), RV_FLEET_REPLICAS=0 skips the
# 1-vs-2-replica comparison, RV_FLEET_WORKERS sets --fleet-workers.
# Needs: curl, python3, awk. Stops everything it started.
set -eu
BUILD=${1:-build}
[ $# -gt 0 ] && shift
NS=${*:-100 300 1000}
[ "$NS" = small ] && NS=12
TRACES=${RV_SHARED_TRACES:-../shared/traces}
GEN=${RV_FLEET_TRACES:-$BUILD/fleet-traces}
SOURCES="data/samples/resnet50-v100-workers0.pt.trace.json.gz
$TRACES/hta/a100-rank0-of-16-five-streams.json.gz
$TRACES/param/resnet-2080ti.kineto.json.gz
$TRACES/tracelens/h100-bert-small-forward.json.gz
$TRACES/hta/v100-1rank-ns-resolution.json.gz
$TRACES/hta/a100-2rank-nccl.json.gz"
for s in $SOURCES; do
    [ -r "$s" ] || { echo "fleet.sh: $s not found (set RV_SHARED_TRACES)" >&2; exit 2; }
done
MAXN=0
for n in $NS; do
    case $n in '' | *[!0-9]*) echo "fleet.sh: N must be a number, not $n" >&2; exit 2 ;; esac
    [ "$n" -le 10000 ] || { echo "fleet.sh: N at most 10000" >&2; exit 2; }
    [ "$n" -gt "$MAXN" ] && MAXN=$n
done

echo "fleet.sh: $(nproc) CPUs, $(uname -m), N = $NS; generating $MAXN traces in $GEN"
# shellcheck disable=SC2086
python3 bench/distinct_traces.py "$GEN" "$MAXN" $SOURCES

# RV_FLEET_HOME keeps the server's home (and its uploaded traces) for the
# next run, which then uploads only what is new (duplicates answer at once).
if [ -n "${RV_FLEET_HOME:-}" ]; then
    HOME_DIR=$RV_FLEET_HOME
    mkdir -p "$HOME_DIR"
else
    HOME_DIR=$(mktemp -d /tmp/rv_fleet_XXXXXX)
fi
chmod 755 "$HOME_DIR"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(port)
PORT2=$(port)
URL="http://127.0.0.1:$PORT"
URL2="http://127.0.0.1:$PORT2"
SRV=""
SRV2=""
FW=${RV_FLEET_WORKERS:+--fleet-workers $RV_FLEET_WORKERS}
stop_srv() { # pid
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() {
    stop_srv "$SRV2"
    stop_srv "$SRV"
    [ -n "${RV_FLEET_HOME:-}" ] || rm -rf "$HOME_DIR"
}
trap cleanup EXIT INT TERM
wait_ready() { # url log
    i=0
    until curl -fsS "$1/readyz" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 240 ] || { echo "fleet.sh: reveried did not start" >&2; cat "$2" >&2; exit 1; }
        sleep 0.25
    done
}
start_a() {
    # shellcheck disable=SC2086
    "$BUILD/bin/reveried" --port "$PORT" --home "$HOME_DIR" --fleet-inline 1 $FW \
        >>"$HOME_DIR/a.log" 2>&1 &
    SRV=$!
    wait_ready "$URL" "$HOME_DIR/a.log"
}
start_b() { # a second replica on A's embedded cluster
    # shellcheck disable=SC2086
    "$BUILD/bin/reveried" --port "$PORT2" --home "$HOME_DIR/b" --fleet-inline 1 $FW \
        --database "host=$HOME_DIR/pg port=5432 user=postgres dbname=reverie" \
        >>"$HOME_DIR/b.log" 2>&1 &
    SRV2=$!
    wait_ready "$URL2" "$HOME_DIR/b.log"
}
start_a
grep -m1 "fleet worker" "$HOME_DIR/a.log" || true

# Upload all traces, two at a time; ids in file order.
t0=$(date +%s.%N)
ls "$GEN"/trace-*.json.gz | head -n "$MAXN" |
    xargs -P 2 -I{} curl -sS -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/gzip' \
        --data-binary @{} "$URL/v1/traces?job=fleet-bench" >"$HOME_DIR/up.log"
t1=$(date +%s.%N)
bad=$(grep -cv '^20[01]$' "$HOME_DIR/up.log" || true)
[ "$bad" -eq 0 ] || { echo "fleet.sh: $bad uploads failed" >&2; sort "$HOME_DIR/up.log" | uniq -c >&2; exit 1; }
python3 - "$URL" "$HOME_DIR/ids" <<'PY'
import json, sys, urllib.request
url, out, ids, cur = sys.argv[1], sys.argv[2], [], None
while True:
    q = url + "/v1/traces?job=fleet-bench&limit=1000" + ("&cursor=" + cur if cur else "")
    d = json.load(urllib.request.urlopen(q))
    ids += [t["id"] for t in d["traces"]]
    cur = d.get("next_cursor")
    if not cur:
        break
open(out, "w").write("\n".join(str(i) for i in sorted(ids)) + "\n")
PY
echo "uploaded $MAXN traces in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s" \
    "(not the figure: upload cost is another benchmark's)"

# The counters one fleet run moved, per row; a=before b=after (files).
metrics() { curl -fsS "$1/metrics" | grep '^reveried_fleet_\|^reveried_graph_cache_\(hits\|misses\)'; }
delta() { # before after name
    awk -v k="$3" '$1==k{v=$2} END{print v+0}' "$2" |
        awk -v k="$3" -v b="$(awk -v k="$3" '$1==k{v=$2} END{print v+0}' "$1")" '{print $1-b}'
}
NONCE=$(( $(date +%s) % 1000000 ))
# Three scenarios; "batch_size" carries a per-run nonce so that a cold run
# finds nothing cached (it changes only samples_per_j).
scenarios() { # nonce
    printf '[{"optimizations":[{"kind":"amp"}],"batch_size":%s},' "$1"
    printf '{"power_limit_frac":0.7,"batch_size":%s},' "$1"
    printf '{"distributed":{"workers":8},"batch_size":%s}]' "$1"
}
run_job() { # url n nonce -> prints seconds, shards, workers
    ids=$(head -n "$2" "$HOME_DIR/ids" | paste -sd, -)
    body="{\"select\":{\"trace_ids\":[$ids]},\"scenarios\":$(scenarios "$3"),\"async\":true}"
    s0=$(date +%s.%N)
    curl -sS -H 'Content-Type: application/json' -d "$body" "$1/v1/fleet/whatif" >"$HOME_DIR/post.json" || true
    job=$(cat "$HOME_DIR/post.json" |
          sed -n 's/.*"job_id":\([0-9]*\).*/\1/p')
    [ -n "$job" ] || { echo "fleet.sh: the fleet request was refused:" >&2; cat "$HOME_DIR/post.json" >&2; exit 1; }
    while :; do
        curl -fsS "$1/v1/jobs/$job" >"$HOME_DIR/job.json"
        state=$(grep -o '"state" *: *"[a-z]*"' "$HOME_DIR/job.json" | head -n 1 | sed 's/.*"\([a-z]*\)"$/\1/')
        [ "$state" = done ] || [ "$state" = failed ] || [ "$state" = cancelled ] && break
        sleep 0.01
    done
    s1=$(date +%s.%N)
    [ "$state" = done ] || { echo "fleet.sh: job $job $state" >&2; cat "$HOME_DIR/job.json" >&2; exit 1; }
    python3 - "$HOME_DIR/job.json" "$s0" "$s1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["result"]
rows = sum(len(s["rows"]) for s in j["scenarios"])
errs = sum(1 for s in j["scenarios"] for r in s["rows"] if "error" in r)
print("%.3f %d %d %d %d" % (float(sys.argv[3]) - float(sys.argv[2]), j.get("shards", 0),
                            len(j.get("workers", [])), rows, errs))
PY
}
# CPU seconds used so far by reveried (pid) and by the embedded
# PostgreSQL (postmaster and its live backends): figures that other work
# on a shared machine does not inflate, unlike wall time.
cpu() { # pid
    tck=$(getconf CLK_TCK)
    pm=$(head -n 1 "$HOME_DIR/pg/data/postmaster.pid" 2>/dev/null || echo 0)
    # Processes come and go while this reads: cat skips the vanished ones.
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v t="$tck" -v a="$1" -v pm="$pm" '
        {
            pid = $1
            sub(/^.*\) /, "")  # fields after the command name, from state (3)
            cpu = ($12 + $13) / t
            if (pid == a) r += cpu
            else if (pid == pm || $2 == pm) p += cpu
        }
        END { printf "%.3f %.3f\n", r, p }'
}
cpu_per() { # "r p" before, "r p" after, n -> CPU ms per trace, reveried + postgres
    echo "$1 $2" | awk -v n="$3" '{printf "%.1f + %.1f", ($3-$1)*1000/n, ($4-$2)*1000/n}'
}
breakdown() { # before after rows
    rows=$3
    for k in read load run store merge; do
        d=$(delta "$1" "$2" "reveried_fleet_${k}_microseconds_total")
        printf ' %s %.2f' "$k" "$(awk -v d="$d" -v r="$rows" 'BEGIN{print r ? d/r/1000 : 0}')"
    done
    gh=$(delta "$1" "$2" reveried_graph_cache_hits_total)
    gm=$(delta "$1" "$2" reveried_graph_cache_misses_total)
    printf ' ms/row (thread time); graph cache %s hits %s misses' "$gh" "$gm"
}

echo
echo "| N | run | wall s | ms per trace | shards | replicas | rows (errors) | CPU ms per trace (reveried + postgres) | breakdown per row |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $NS; do
    # Cold: a fresh replica (empty graph cache) and a new nonce.
    stop_srv "$SRV"
    start_a
    NONCE=$((NONCE + 1))
    metrics "$URL" >"$HOME_DIR/m0"
    c0=$(cpu "$SRV")
    set -- $(run_job "$URL" "$n" "$NONCE")
    c1=$(cpu "$SRV")
    metrics "$URL" >"$HOME_DIR/m1"
    printf '| %s | cold | %s | %.1f | %s | %s | %s (%s) | %s |%s |\n' "$n" "$1" \
        "$(awk -v t="$1" -v n="$n" 'BEGIN{print t*1000/n}')" "$2" "$3" "$4" "$5" \
        "$(cpu_per "$c0" "$c1" "$n")" "$(breakdown "$HOME_DIR/m0" "$HOME_DIR/m1" "$4")"
    c0=$(cpu "$SRV")
    set -- $(run_job "$URL" "$n" "$NONCE")
    c1=$(cpu "$SRV")
    metrics "$URL" >"$HOME_DIR/m2"
    printf '| %s | cached | %s | %.1f | %s | %s | %s (%s) | %s |%s |\n' "$n" "$1" \
        "$(awk -v t="$1" -v n="$n" 'BEGIN{print t*1000/n}')" "$2" "$3" "$4" "$5" \
        "$(cpu_per "$c0" "$c1" "$n")" "$(breakdown "$HOME_DIR/m1" "$HOME_DIR/m2" "$4")"
done

if [ "${RV_FLEET_REPLICAS:-1}" != 0 ]; then
    n=$(echo "$NS" | awk '{print $1}')
    for x in $NS; do [ "$x" -le 300 ] && n=$x; done
    stop_srv "$SRV"
    start_a
    NONCE=$((NONCE + 1))
    set -- $(run_job "$URL" "$n" "$NONCE")
    printf '| %s | cold, 1 replica | %s | %.1f | %s | %s | %s (%s) | | |\n' "$n" "$1" \
        "$(awk -v t="$1" -v n="$n" 'BEGIN{print t*1000/n}')" "$2" "$3" "$4" "$5"
    stop_srv "$SRV"
    start_a
    start_b
    grep -m1 "fleet worker" "$HOME_DIR/b.log" || true
    NONCE=$((NONCE + 1))
    set -- $(run_job "$URL" "$n" "$NONCE")
    printf '| %s | cold, 2 replicas | %s | %.1f | %s | %s | %s (%s) | | |\n' "$n" "$1" \
        "$(awk -v t="$1" -v n="$n" 'BEGIN{print t*1000/n}')" "$2" "$3" "$4" "$5"
fi
echo
echo "fleet.sh: OK (breakdown: thread time per row summed over the fleet threads;" \
    "read = listings and cached rows, load = snapshot + graph + baseline, run = what-if," \
    "store = render + cache write, merge = aggregates + answer)"
