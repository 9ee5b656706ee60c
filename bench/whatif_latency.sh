#!/bin/sh
# Warm, uncached what-if latency through the HTTP API (issue #32): starts
# its own reveried on loopback with the embedded PostgreSQL under a
# temporary REVERIE_HOME, uploads the generator's 80 MiB trace (106k tasks,
# bench/gen_kineto.py) and a 21k-task real trace (the ResNet-50 sample),
# warms each once, then sends N what-ifs per trace one after another, each
# with a power cap not asked before (so no answer comes from the cache),
# and prints p50/p95 per trace: first with a new connection (a new curl)
# per request, then N more over one kept-alive connection (one curl, as a
# browser or a client library sends them). Stops everything it started.
# Usage: bench/whatif_latency.sh [BUILD_DIR] [N]   (defaults build, 200)
# Needs: curl, awk, python3.
set -eu
BUILD=${1:-build}
N=${2:-200}
[ "$N" -ge 1 ] && [ "$N" -le 2000 ] || { echo "whatif_latency.sh: N in 1..2000" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
REAL=$HERE/../data/samples/resnet50-v100-workers0.pt.trace.json.gz
[ -x "$BUILD/bin/reveried" ] && [ -r "$REAL" ] || { echo "whatif_latency.sh: no reveried or sample" >&2; exit 2; }

HOME_DIR=$(mktemp -d /tmp/rv_wlat_XXXXXX)
chmod 755 "$HOME_DIR"
SRV=""
cleanup() {
    [ -n "$SRV" ] && kill -TERM "$SRV" 2>/dev/null || true
    [ -n "$SRV" ] && wait "$SRV" 2>/dev/null || true
    rm -rf "$HOME_DIR"
}
trap cleanup EXIT INT TERM
python3 "$HERE/gen_kineto.py" "$HOME_DIR/gen80.json" 80 >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
"$BUILD/bin/reveried" --port "$PORT" --home "$HOME_DIR" >"$HOME_DIR/reveried.log" 2>&1 &
SRV=$!
i=0
until curl -fsS "$URL/readyz" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 240 ] || { echo "whatif_latency.sh: reveried did not start" >&2; cat "$HOME_DIR/reveried.log" >&2; exit 1; }
    sleep 0.5
done

upload() { # FILE CONTENT_TYPE -> trace id
    curl -fsS --max-time 300 -H "Content-Type: $2" --data-binary "@$1" "$URL/v1/traces?job=wlat" |
        sed -n 's/^{"id":\([0-9]*\).*/\1/p'
}
whatif() { # ID WATTS -> "STATUS SECONDS"
    curl -sS -o /dev/null --max-time 60 -w '%{http_code} %{time_total}\n' \
        -H 'Content-Type: application/json' -d "{\"power_limit_w\":$2}" "$URL/v1/traces/$1/whatif" ||
        echo "000 0"
}
percentiles() { # $HOME_DIR/lat ("STATUS SECONDS ...") -> p50, p95 in ms
    awk '{print $2}' "$HOME_DIR/lat" | sort -n >"$HOME_DIR/lat.sorted"
    p50=$(awk -v n="$N" 'NR==int(n*0.50+0.5){printf "%.1f", $1*1000}' "$HOME_DIR/lat.sorted")
    p95=$(awk -v n="$N" 'NR==int(n*0.95+0.5){printf "%.1f", $1*1000}' "$HOME_DIR/lat.sorted")
}
bench() { # LABEL ID
    whatif "$2" 299.99 >/dev/null # warm: the trace loaded, its baseline prepared
    k=0
    : >"$HOME_DIR/lat"
    while [ $k -lt "$N" ]; do
        # Distinct caps 150.00..249.99 W: every request misses the cache.
        w=$(awk -v k="$k" -v n="$N" 'BEGIN{printf "%.2f", 150 + 100 * k / n}')
        whatif "$2" "$w" >>"$HOME_DIR/lat"
        k=$((k + 1))
    done
    bad=$(awk '$1 != 200' "$HOME_DIR/lat" | wc -l)
    percentiles
    echo "$1: $N uncached what-ifs, p50 $p50 ms, p95 $p95 ms, non-200 answers: $bad"
    [ "$bad" -eq 0 ]
}
bench_kept() { # LABEL ID: N more, one connection; caps 250.00..349.99 W
    : >"$HOME_DIR/kept.cfg"
    k=0
    while [ $k -lt "$N" ]; do
        w=$(awk -v k="$k" -v n="$N" 'BEGIN{printf "%.2f", 250 + 100 * k / n}')
        [ $k -gt 0 ] && echo next >>"$HOME_DIR/kept.cfg"
        printf 'url = "%s/v1/traces/%s/whatif"\nheader = "Content-Type: application/json"\n' \
            "$URL" "$2" >>"$HOME_DIR/kept.cfg"
        printf 'data = "{\\"power_limit_w\\":%s}"\noutput = "/dev/null"\n' "$w" >>"$HOME_DIR/kept.cfg"
        printf 'write-out = "%%{http_code} %%{time_total} %%{num_connects}\\n"\n' >>"$HOME_DIR/kept.cfg"
        k=$((k + 1))
    done
    curl -sS --max-time 600 -K "$HOME_DIR/kept.cfg" >"$HOME_DIR/lat" || true
    bad=$(awk '$1 != 200' "$HOME_DIR/lat" | wc -l)
    conns=$(awk '{c += $3} END {print c + 0}' "$HOME_DIR/lat")
    percentiles
    echo "$1, kept-alive ($conns connection): $N uncached what-ifs, p50 $p50 ms, p95 $p95 ms, non-200 answers: $bad"
    [ "$bad" -eq 0 ] && [ "$(wc -l <"$HOME_DIR/lat")" -eq "$N" ]
}
GEN=$(upload "$HOME_DIR/gen80.json" application/json)
REAL_ID=$(upload "$REAL" application/gzip)
[ -n "$GEN" ] && [ -n "$REAL_ID" ] || { echo "whatif_latency.sh: upload failed" >&2; exit 1; }
echo "reveried what-if latency: loopback, sequential, $(nproc) CPUs"
bench "gen_kineto 80 MiB (106k tasks)" "$GEN"
bench "resnet50 sample (21k tasks)" "$REAL_ID"
bench_kept "gen_kineto 80 MiB (106k tasks)" "$GEN"
bench_kept "resnet50 sample (21k tasks)" "$REAL_ID"
