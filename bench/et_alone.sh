#!/bin/sh
# The error of an execution trace alone (docs/models/et.md): for each ET
# with a Kineto trace of the same run, the step `reverie simulate ET --gpu`
# models from the ET alone on the trace's GPU against the measured step of
# the Kineto trace (its median ProfilerStep; the whole trace when it has no
# steps), and the GPU busy time (compute + memcpy + memset) of both. The
# last columns re-time the ET's host work from measured overheads instead
# of 10 us per op: {"host_overheads": "platform"} with --overheads-from
# another Kineto trace of the same GPU (never the run's own). The last two
# time the ET's kernels at the efficiencies fitted on that other trace
# (--kernel-models-from, with its execution trace for the shapes), where
# it has kernels of the class within a factor 4 of the size.
# Usage: bench/et_alone.sh [BUILD_DIR]
# Needs: python3; RV_SHARED_TRACES or ../shared/traces.
set -eu
BUILD=${1:-build}
TRACES=${RV_SHARED_TRACES:-../shared/traces}
RV=$BUILD/bin/reverie
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "| run | GPU | ET alone step (us) | measured step (us) | error | ET alone GPU busy (us) | measured GPU busy (us) | error | host from (pooled overheads) | step (us) | error | GPU busy, kernels fitted on the other trace (us) | error |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for x in "hta/simple-add A100-SXM4-40GB hta/a100-2rank-nccl.json.gz" \
         "param/dlrm-8rank/worker0 V100-SXM2 param/dlrm-8rank/worker1.kineto.json.gz" \
         "param/resnet-2080ti RTX2080Ti param/linear-2080ti.kineto.json.gz" \
         "param/linear-2080ti RTX2080Ti param/resnet-2080ti.kineto.json.gz"; do
    set -- $x
    "$RV" simulate "$TRACES/$1.et.json.gz" --gpu "$2" --compact > "$TMP/et.json"
    "$RV" simulate "$TRACES/$1.kineto.json.gz" --compact > "$TMP/k.json"
    "$RV" simulate "$TRACES/$1.et.json.gz" --gpu "$2" --whatif '{"host_overheads": "platform"}' \
        --overheads-from "$TRACES/$3" --compact > "$TMP/oh.json"
    other_et="$TRACES/$(echo "$3" | sed 's/\.kineto\.json\.gz$/.et.json.gz/')"
    if [ -f "$other_et" ] && "$RV" simulate "$TRACES/$1.et.json.gz" --gpu "$2" --compact \
        --kernel-models-from "$TRACES/$3" --kernel-models-et "$other_et" > "$TMP/fit.json" 2>/dev/null; then :
    else echo '{}' > "$TMP/fit.json"; fi
    python3 - "$1" "$2" "$TMP/et.json" "$TMP/k.json" "$TMP/oh.json" "$3" "$TMP/fit.json" <<'PY'
import json, sys
name, gpu, a, b, c, pool, d = sys.argv[1:8]
e, k, o, fit = json.load(open(a)), json.load(open(b)), json.load(open(c)), json.load(open(d))
def busy(d):
    g = d["breakdown"]["baseline"]["gpu"]
    return g["compute_us"] + g["memcpy_us"] + g["memset_us"]
def err(p, m):
    return "%+.1f%%" % ((p - m) / m * 100) if m else "n/a"
pe, me = e["measured_us"], k["measured_us"]
be, bm = busy(e), busy(k)
po = o["predicted_us"]
bf = busy(fit) if fit else None
print("| %s | %s | %.0f | %.0f | %s | %.0f | %.0f | %s | %s | %.0f | %s | %s | %s |" % (
    name, gpu, pe, me, err(pe, me), be, bm, err(be, bm), pool, po, err(po, me),
    "%.0f" % bf if bf else "n/a", err(bf, bm) if bf else "n/a"))
PY
done
