#!/bin/sh
# ctest entry for the dashboard's browser test: skip (77) without Chromium or
# node, install playwright-core once, then run node's test runner.
set -u
here=$(cd "$(dirname "$0")" && pwd)
CHROMIUM=${RV_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
    echo "skip: no Chromium at $CHROMIUM (Debian: apt-get install chromium)"
    exit 77
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "skip: node and npm are needed (Debian: apt-get install nodejs npm)"
    exit 77
fi
cd "$here" || exit 1
if [ ! -d node_modules/playwright-core ]; then
    npm ci --no-audit --no-fund || npm install --no-audit --no-fund || {
        echo "skip: cannot install playwright-core from npm"
        exit 77
    }
fi
export RV_WEB_OUT=${RV_WEB_OUT:-$(mktemp -d)}
mkdir -p "$RV_WEB_OUT"
node --test --test-concurrency=1 dashboard.test.mjs training.test.mjs
rc=$?
if [ -f "$RV_WEB_OUT/skipped" ]; then
    echo "skip: $(cat "$RV_WEB_OUT/skipped")"
    exit 77
fi
echo "screenshots and frame times: $RV_WEB_OUT"
exit $rc
