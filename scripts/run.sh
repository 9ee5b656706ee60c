#!/bin/sh
# What `make run` does after the build: start reveried with its embedded
# database, upload the sample trace, print the URL and two curl examples,
# and serve until Ctrl-C. REVERIE_RUN=simulate (or no reveried in the build)
# prints `reverie simulate` on the sample instead.
# Usage: scripts/run.sh BUILD_DIR SAMPLE_TRACE
set -eu
BUILD=${1:-build}
SAMPLE=${2:-data/samples/resnet50-v100-workers0.pt.trace.json.gz}
if [ "${REVERIE_RUN:-serve}" = simulate ] || [ ! -x "$BUILD/bin/reveried" ]; then
    exec "$BUILD/bin/reverie" simulate "$SAMPLE"
fi
PORT=${REVERIE_PORT:-8080}
URL="http://127.0.0.1:$PORT"
if curl -fsS "$URL/healthz" >/dev/null 2>&1; then
    echo "reverie: something already answers on $URL; stop it or set REVERIE_PORT" >&2
    exit 1
fi
"$BUILD/bin/reveried" --port "$PORT" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; exit 0' INT TERM
i=0
until curl -fsS "$URL/healthz" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 120 ] || ! kill -0 $pid 2>/dev/null; then
        echo "reverie: reveried did not come up on $URL (see the messages above)" >&2
        kill -TERM $pid 2>/dev/null || true
        exit 1
    fi
    sleep 0.5
done
echo "reverie: uploading the sample trace $SAMPLE"
curl -fsS -X POST -H 'Content-Type: application/gzip' --data-binary "@$SAMPLE" \
    "$URL/v1/traces?job=sample-resnet50" || echo "reverie: sample upload failed" >&2
echo
cat <<TXT

Reverie is running at $URL/   (Ctrl-C stops it)

  curl -s $URL/v1/traces
  curl -s -X POST -H 'Content-Type: application/json' $URL/v1/traces/1/whatif \
       -d '{"optimizations":[{"kind":"dataloader","workers":4}]}'

TXT
wait $pid
