#!/bin/sh
# clang-tidy with the repository's .clang-tidy over the product's C sources
# (engine/, store/, server/, cli/) against BUILD/compile_commands.json.
# Prints each finding once (file:line:col: warning: message [check]) and
# fails when there is any; the full output, with the analyzer's paths, is
# kept in BUILD/clang-tidy.log.
# Usage: .ci/tidy.sh [BUILD]   (JOBS sets the parallel runs, default nproc)
set -u
cd "$(dirname "$0")/.." || exit 1
build=${1:-build}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
db="$build/compile_commands.json"
log="$build/clang-tidy.log"

if ! command -v clang-tidy >/dev/null 2>&1; then
    echo "tidy: clang-tidy not found (Debian: apt-get install clang-tidy)" >&2
    exit 1
fi
if [ ! -f "$db" ]; then
    echo "tidy: no $db (configure $build first)" >&2
    exit 1
fi

# Tracked sources that this build compiles (server/ needs libpq and
# libmicrohttpd; a configuration without them has no entries for it).
list=$(mktemp)
trap 'rm -f "$list"' EXIT
git ls-files 'engine/*.c' 'store/*.c' 'server/*.c' 'cli/*.c' | while read -r f; do
    if grep -qF "/$f\"" "$db"; then
        echo "$f"
    fi
done >"$list"
n=$(wc -l <"$list")
if [ "$n" -eq 0 ]; then
    echo "tidy: no sources of engine/ store/ server/ cli/ in $db" >&2
    exit 1
fi

echo "clang-tidy: $n files, $jobs at a time"
xargs -P "$jobs" -n 2 clang-tidy -p "$build" --quiet <"$list" >"$log" 2>&1
# clang-tidy's own exit status only says whether a file failed to parse;
# the findings are in the output. A finding in a header shows once per file
# that includes it: print each once, paths relative to the checkout.
top=$(pwd)
findings=$(grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error): ' "$log" |
    sed "s|^$top/||" | sort -u -t: -k1,1 -k2,2n -k3,3n -k4)
if [ -z "$findings" ]; then
    echo "clang-tidy: no findings"
    exit 0
fi
echo "$findings"
count=$(echo "$findings" | wc -l)
echo "clang-tidy: $count findings (details in $log)"
exit 1
