#!/bin/sh
# No-behaviour-change check for reader or engine refactors: runs
# `reverie simulate` with two binaries (say, one built before a change and
# one after) on every Kineto trace under the shared kineto/, hta/ (with
# hta/edge/), param/ and tracelens/ folders and data/samples/, and on the
# 8 DLRM ranks as one job, then compares stdout, stderr and exit codes byte
# for byte. Exit 0 when identical, 1 with the first differences otherwise.
# Usage: bench/simulate_diff.sh OLD_REVERIE NEW_REVERIE
# With RV_DIFF_WHATIF set to a what-if document, every run answers it (for
# refactors of a what-if model).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 OLD_REVERIE NEW_REVERIE" >&2; exit 2; }
OLD=$1
NEW=$2
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
SHARED=${RV_SHARED_TRACES:-$SRC/../shared/traces}
[ -d "$SHARED" ] || { echo "no traces at $SHARED (set RV_SHARED_TRACES)" >&2; exit 2; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

# Execution traces (*.et.json*) are companions, not Kineto traces.
for d in kineto hta param tracelens; do
    [ -d "$SHARED/$d" ] && find "$SHARED/$d" -type f \( -name '*.json' -o -name '*.json.gz' \)
done | grep -v '\.et\.json' | sort > "$TMP/list"
find "$SRC/data/samples" -type f \( -name '*.json' -o -name '*.json.gz' \) | sort >> "$TMP/list"

run() { # BIN OUTDIR
    mkdir -p "$2"
    i=0
    while read -r f; do
        i=$((i + 1))
        rc=0
        if [ -n "${RV_DIFF_WHATIF:-}" ]; then
            "$1" simulate "$f" --whatif "$RV_DIFF_WHATIF" > "$2/$i.out" 2> "$2/$i.err" || rc=$?
        else
            "$1" simulate "$f" > "$2/$i.out" 2> "$2/$i.err" || rc=$?
        fi
        echo "$rc $f" >> "$2/rc"
    done < "$TMP/list"
    ranks=$(ls "$SHARED"/param/dlrm-8rank/worker*.kineto.json.gz 2>/dev/null | sort -V || true)
    if [ -n "$ranks" ]; then
        rc=0
        # shellcheck disable=SC2086 # one argument per rank
        if [ -n "${RV_DIFF_WHATIF:-}" ]; then
            "$1" simulate $ranks --whatif "$RV_DIFF_WHATIF" > "$2/dlrm8.out" 2> "$2/dlrm8.err" || rc=$?
        else
            "$1" simulate $ranks > "$2/dlrm8.out" 2> "$2/dlrm8.err" || rc=$?
        fi
        echo "$rc dlrm-8rank" >> "$2/rc"
    fi
}
run "$OLD" "$TMP/old"
run "$NEW" "$TMP/new"
n=$(wc -l < "$TMP/old/rc")
if diff -r "$TMP/old" "$TMP/new" > "$TMP/diff"; then
    echo "identical: $n runs (stdout, stderr, exit code)"
    exit 0
fi
echo "DIFFERENT ($n runs):"
head -40 "$TMP/diff"
exit 1
