#!/bin/sh
# `make run` as root from a checkout whose parent the database user cannot
# search (issue 20, item 0): reveried started with no REVERIE_HOME from such
# a directory must pick a home the 'postgres' user can reach, say where, and
# answer /healthz. Usage: run_private_test.sh BIN_DIR [SOURCE_DIR]. Skips (77) when not
# root, without a 'postgres' user or without PostgreSQL.
set -u
BIN=${1:?usage: run_private_test.sh BIN_DIR [SOURCE_DIR]}
SRC=${2:-$(dirname "$0")/../..}
if [ "$(id -u)" != 0 ]; then
    echo "skip: needs root (the case is root's private home)"
    exit 77
fi
if ! id postgres >/dev/null 2>&1; then
    echo "skip: no 'postgres' user"
    exit 77
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v pg_config >/dev/null; then
    echo "skip: PostgreSQL is not installed"
    exit 77
fi
if ! command -v curl >/dev/null; then
    echo "skip: curl not found"
    exit 77
fi
tmp=$(mktemp -d /tmp/rv-private.XXXXXX)
chmod 700 "$tmp"
mkdir -p "$tmp/checkout/build/bin"
cp "$BIN/reveried" "$tmp/checkout/build/bin/"
cp -R "$SRC/migrations" "$SRC/web" "$tmp/checkout/"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18471)
pid=
home=
cleanup() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    home=$(grep -o '/var/lib/reverie/[0-9a-f]*' "$tmp/log" 2>/dev/null | head -n 1)
    if [ -n "$home" ] && [ -d "$home" ]; then
        rm -rf "$home"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
(cd "$tmp/checkout" && exec env -u REVERIE_HOME -u REVERIE_DATABASE_URL \
    build/bin/reveried --port "$port" >"$tmp/log" 2>&1) &
pid=$!
i=0
until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 120 ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "FAIL: reveried did not become healthy from a private directory:"
        cat "$tmp/log"
        exit 1
    fi
    sleep 0.5
done
if ! grep -q '/var/lib/reverie/' "$tmp/log"; then
    echo "FAIL: the start-up messages do not say where the state went:"
    cat "$tmp/log"
    exit 1
fi
grep '/var/lib/reverie/' "$tmp/log"
echo "ok: healthy from a private directory"
exit 0
