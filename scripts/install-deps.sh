#!/bin/sh
# Installs the Debian packages Reverie needs to build, test and run.
# As root it runs apt-get; otherwise it prints the exact line to run.
# Usage: scripts/install-deps.sh [build|test]
set -eu
mode=${1:-build}
pkgs="build-essential cmake pkg-config zlib1g-dev libjansson-dev libmicrohttpd-dev libpcre2-dev
libpq-dev libcurl4-openssl-dev libcunit1-dev postgresql"
# ISA-L's igzip inflates gzip traces faster than zlib; the build falls
# back to zlib without it (cmake -DRV_ISAL=OFF forces that).
pkgs="$pkgs libisal-dev"
if [ "$mode" = test ]; then
    # clang's runtime for the sanitizer build and fuzzers; clang-format and
    # clang-tidy for the format and lint stages; Chromium, Node.js and npm
    # for the dashboard's browser test; python3 for the accuracy report and
    # the API contract test.
    pkgs="$pkgs clang libclang-rt-14-dev clang-format clang-tidy git chromium python3 python3-yaml
python3-jsonschema"
    # A Node.js from elsewhere (with its own npm) is fine; Debian's only
    # when there is none, since Debian's npm would replace such a node.
    command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
    command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
fi
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "reverie: missing packages:$missing (install them with your package manager)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "reverie: missing packages. Run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "reverie: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
