#!/bin/sh
# One stage of `make test`: .ci/stage.sh LOG NAME COMMAND [ARGS...]
# Runs COMMAND, then appends "NAME  SECONDS s  ok|FAILED (exit N)" to LOG
# (the summary `make test` prints at the end) and exits with its status.
set -u
log=$1
name=$2
shift 2
start=$(date +%s)
echo "==> $name"
"$@"
rc=$?
secs=$(($(date +%s) - start))
if [ "$rc" -eq 0 ]; then
    result=ok
else
    result="FAILED (exit $rc)"
fi
mkdir -p "$(dirname "$log")"
printf '  %-14s %5d s  %s\n' "$name" "$secs" "$result" >>"$log"
echo "==> $name: $secs s, $result"
exit "$rc"
