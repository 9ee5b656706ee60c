#!/bin/sh
# Bounded load test of reveried on loopback: U clients uploading distinct
# traces and W clients asking what-ifs, for D seconds (defaults 8, 32, 30).
# Starts its own reveried with the embedded PostgreSQL under a temporary
# REVERIE_HOME, checks that no upload was lost, prints p50/p99 latency and
# throughput per kind, and stops everything it started.
# Usage: bench/load.sh [BUILD_DIR] [UPLOADERS] [WHATIF_CLIENTS] [SECONDS]
# Needs: curl, awk, gzip; RV_SHARED_TRACES or ../shared/traces for the traces.
set -eu
BUILD=${1:-build}
U=${2:-8}
W=${3:-32}
D=${4:-30}
[ "$U" -le 64 ] && [ "$W" -le 128 ] && [ "$D" -le 300 ] || {
    echo "load.sh: keep it bounded (<= 64 uploaders, 128 what-if clients, 300 s)" >&2; exit 2; }
TRACES=${RV_SHARED_TRACES:-../shared/traces}
SMALL=$TRACES/hta/critical-path-simple-add.json.gz
SAMPLE=data/samples/resnet50-v100-workers0.pt.trace.json.gz
[ -r "$SMALL" ] && [ -r "$SAMPLE" ] || { echo "load.sh: traces not found" >&2; exit 2; }

HOME_DIR=$(mktemp -d /tmp/rv_load_XXXXXX)
chmod 755 "$HOME_DIR"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
"$BUILD/bin/reveried" --port "$PORT" --home "$HOME_DIR" >"$HOME_DIR/reveried.log" 2>&1 &
SRV=$!
cleanup() {
    kill -TERM "$SRV" 2>/dev/null || true
    wait "$SRV" 2>/dev/null || true
    rm -rf "$HOME_DIR"
}
trap cleanup EXIT INT TERM
i=0
until curl -fsS "$URL/readyz" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 240 ] || { echo "load.sh: reveried did not start" >&2; cat "$HOME_DIR/reveried.log" >&2; exit 1; }
    sleep 0.5
done
ID=$(curl -fsS -H 'Content-Type: application/gzip' --data-binary "@$SAMPLE" "$URL/v1/traces?job=load-base" |
     sed -n 's/^{"id":\([0-9]*\).*/\1/p')
[ -n "$ID" ] || { echo "load.sh: sample upload failed" >&2; exit 1; }
# Warm the what-if cache entry used by the "cached" share of requests.
curl -fsS -o /dev/null -H 'Content-Type: application/json' \
    -d '{"optimizations":[{"kind":"amp"}]}' "$URL/v1/traces/$ID/whatif"

# The uploaded body: the small trace with a unique top-level key per request,
# so each upload is new content (a duplicate would be answered without work).
gzip -dc "$SMALL" | sed '0,/{/s//{"reverie_load":"@ID@",/' >"$HOME_DIR/small.json"
END=$(( $(date +%s) + D ))

uploader() {
    n=0
    while [ "$(date +%s)" -lt "$END" ]; do
        n=$((n + 1))
        f="$HOME_DIR/up-$1.json"
        sed "1,/@ID@/s/@ID@/$1-$n/" "$HOME_DIR/small.json" >"$f"
        curl -sS -o /dev/null -w 'upload %{http_code} %{time_total}\n' \
            -H 'Content-Type: application/json' --data-binary "@$f" \
            "$URL/v1/traces?job=lt-$1" || echo "upload 000 0"
    done
}
whatif() {
    n=0
    while [ "$(date +%s)" -lt "$END" ]; do
        n=$((n + 1))
        if [ $((n % 2)) -eq 0 ]; then
            doc='{"optimizations":[{"kind":"amp"}]}'       # a cache hit
        else
            doc="{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":1.$1$n}]}" # a miss
        fi
        curl -sS -o /dev/null -w 'whatif %{http_code} %{time_total}\n' \
            -H 'Content-Type: application/json' -d "$doc" "$URL/v1/traces/$ID/whatif" ||
            echo "whatif 000 0"
    done
}
PIDS=""
k=0; while [ $k -lt "$U" ]; do uploader $k >"$HOME_DIR/u$k.log" & PIDS="$PIDS $!"; k=$((k + 1)); done
k=0; while [ $k -lt "$W" ]; do whatif $k >"$HOME_DIR/w$k.log" & PIDS="$PIDS $!"; k=$((k + 1)); done
for p in $PIDS; do wait "$p" || true; done
cat "$HOME_DIR"/u*.log "$HOME_DIR"/w*.log >"$HOME_DIR/all.log"

echo "reveried load test: $U uploaders, $W what-if clients, ${D}s, loopback, $(nproc) CPUs"
for kind in upload whatif; do
    grep "^$kind " "$HOME_DIR/all.log" | awk '{print $3}' | sort -n >"$HOME_DIR/$kind.lat" || true
    n=$(wc -l <"$HOME_DIR/$kind.lat")
    [ "$n" -gt 0 ] || { echo "$kind: no requests"; continue; }
    p50=$(awk -v n="$n" 'NR==int(n*0.50+0.5){printf "%.1f", $1*1000}' "$HOME_DIR/$kind.lat")
    p99=$(awk -v n="$n" 'NR==int(n*0.99+0.5){printf "%.1f", $1*1000}' "$HOME_DIR/$kind.lat")
    codes=$(grep "^$kind " "$HOME_DIR/all.log" | awk '{print $2}' | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
    echo "$kind: $n requests, $(awk -v n="$n" -v d="$D" 'BEGIN{printf "%.1f", n/d}') req/s, p50 ${p50} ms, p99 ${p99} ms, status $codes"
done
created=$(grep -c '^upload 201 ' "$HOME_DIR/all.log" || true)
stored=$(python3 - "$URL" <<'PY'
import json, sys, urllib.request
url, n, cur = sys.argv[1], 0, None
while True:
    q = url + "/v1/traces?job=lt-*&limit=1000" + ("&cursor=" + cur if cur else "")
    d = json.load(urllib.request.urlopen(q))
    n += len(d["traces"])
    cur = d.get("next_cursor")
    if not cur:
        break
print(n)
PY
)
errors=$(grep -vc ' 20[01] ' "$HOME_DIR/all.log" || true)
echo "uploads answered 201: $created; traces stored: $stored; non-2xx answers: $errors"
[ "$created" -eq "$stored" ] && [ "$errors" -eq 0 ] || { echo "load.sh: FAILED (lost uploads or errors)"; exit 1; }
echo "load.sh: OK"
