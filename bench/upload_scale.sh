#!/bin/sh
# Upload cost against the store's size: N distinct traces (default 300)
# derived from real ones of 5 platforms (bench/distinct_traces.py) are
# uploaded one by one through the real API to a private reveried with the
# embedded PostgreSQL under a temporary REVERIE_HOME. Prints the mean
# latency of the first and last 20 uploads and their ratio, the database's
# growth per trace beyond the uploaded bytes, and the table sizes; stops
# everything it started. Figures: docs/internals/store.md.
# Usage: bench/upload_scale.sh [BUILD_DIR] [N]
# Env: RV_SHARED_TRACES (the public traces), RV_BENCH_TRACES (where the
# derived traces are kept between runs; default BUILD_DIR/bench-traces).
# Needs: curl, psql, python3.
set -eu
BUILD=${1:-build}
N=${2:-300}
[ "$N" -ge 40 ] && [ "$N" -le 2000 ] || { echo "upload_scale.sh: N must be 40..2000" >&2; exit 2; }
TRACES=${RV_SHARED_TRACES:-../shared/traces}
SRC="data/samples/resnet50-v100-workers0.pt.trace.json.gz
$TRACES/hta/a100-2rank-nccl.json.gz
$TRACES/tracelens/h100-bert-small-forward.json.gz
$TRACES/param/resnet-2080ti.kineto.json.gz
$TRACES/param/dlrm-8rank/worker0.kineto.json.gz"
for f in $SRC; do
    [ -r "$f" ] || { echo "upload_scale.sh: $f not found (set RV_SHARED_TRACES)" >&2; exit 2; }
done
OUTDIR=${RV_BENCH_TRACES:-$BUILD/bench-traces}
# shellcheck disable=SC2086 # one argument per source path
python3 bench/distinct_traces.py "$OUTDIR" "$N" $SRC

HOME_DIR=$(mktemp -d /tmp/rv_upscale_XXXXXX)
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
    i=$((i + 1)); [ $i -lt 240 ] || { echo "upload_scale.sh: reveried did not start" >&2; cat "$HOME_DIR/reveried.log" >&2; exit 1; }
    sleep 0.5
done
PGCONN="host=$HOME_DIR/pg port=5432 user=postgres dbname=reverie"
q() { psql -X -qAt "$PGCONN" -c "$1"; }
BEFORE=$(q "SELECT pg_database_size(current_database())")

BYTES=0
k=0
: >"$HOME_DIR/lat"
while [ $k -lt "$N" ]; do
    f=$(printf '%s/trace-%05d.json.gz' "$OUTDIR" $k)
    BYTES=$((BYTES + $(wc -c <"$f")))
    out=$(curl -sS -o "$HOME_DIR/resp" -w '%{http_code} %{time_total}' \
        -H 'Content-Type: application/gzip' --data-binary "@$f" "$URL/v1/traces?job=upscale-$k")
    code=${out% *}
    [ "$code" = 201 ] || [ "$code" = 200 ] || {
        echo "upload_scale.sh: upload $k answered $code: $(cat "$HOME_DIR/resp")" >&2; exit 1; }
    echo "${out#* }" >>"$HOME_DIR/lat"
    k=$((k + 1))
done
# Let autovacuum's work not count: measure what is stored.
q "CHECKPOINT" >/dev/null
AFTER=$(q "SELECT pg_database_size(current_database())")

echo "upload_scale: $N uploads on $(nproc) cores"
awk -v n="$N" '{ v[NR] = $1 } END {
    for (i = 1; i <= 20; i++) a += v[i]; for (i = n - 19; i <= n; i++) b += v[i];
    for (i = 1; i <= n; i++) { t += v[i]; if (v[i] > m) m = v[i] }
    printf "latency: first 20 mean %.3f s, last 20 mean %.3f s, ratio %.2f; all %d mean %.3f s, max %.3f s\n",
           a / 20, b / 20, (b / 20) / (a / 20), n, t / n, m }' "$HOME_DIR/lat"
echo "$BEFORE $AFTER $BYTES $N" | awk '{
    printf "database: %.1f MB before, %.1f MB after; uploaded %.1f MB; growth beyond the uploaded bytes %.3f MB per trace\n",
           $1 / 1048576, $2 / 1048576, $3 / 1048576, ($2 - $1 - $3) / $4 / 1048576 }'
echo "platforms (id, gpu, traces):"
q "SELECT p.id, p.gpu_model, count(t.id) FROM platforms p LEFT JOIN traces t ON t.platform_id = p.id GROUP BY p.id ORDER BY p.id" | sed 's/^/  /'
echo "tables (total bytes incl. TOAST and indexes, per trace):"
q "SELECT c.relname, pg_total_relation_size(c.oid), round(pg_total_relation_size(c.oid)::numeric / $N) FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace ORDER BY 2 DESC" | sed 's/^/  /'
