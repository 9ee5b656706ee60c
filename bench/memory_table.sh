#!/bin/sh
# The measured table of docs/models/memory.md: for each shared trace with
# GPU "[memory]" events (and a shapes-only one), the breakdown the op
# shapes give, the trace's peak, and the peak predicted under vdnn, gist,
# recompute, gradient accumulation x4 and batch x2 (MB = 1e6 bytes).
# Usage: bench/memory_table.sh [REVERIE]   (default build/bin/reverie)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BIN=${1:-$SRC/build/bin/reverie}
SHARED=${RV_SHARED_TRACES:-$SRC/../shared/traces}
[ -d "$SHARED" ] || { echo "no traces at $SHARED (set RV_SHARED_TRACES)" >&2; exit 2; }

mem() { # TRACE [OPTIMIZATION]
    if [ $# -gt 1 ]; then
        "$BIN" simulate "$SHARED/$1" --whatif "{\"optimizations\":[$2]}"
    else
        "$BIN" simulate "$SHARED/$1"
    fi
}

echo "| trace | peak (source) | weights | gradients | optimizer state | saved activations | activations and other | estimated peak | vdnn | gist | recompute | grad-accum x4 | batch x2 |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for t in kineto/resnet50-v100-workers0.pt.trace.json.gz \
    kineto/resnet50-v100-workers4.pt.trace.json.gz \
    tracelens/h100-bert-small-forward.json.gz \
    tracelens/h100-falconsai-vit-forward.json.gz \
    param/dlrm-8rank/worker0.kineto.json.gz; do
    [ -f "$SHARED/$t" ] || continue
    {
        mem "$t"
        mem "$t" '{"kind":"vdnn"}'
        mem "$t" '{"kind":"gist"}'
        mem "$t" '{"kind":"recompute"}'
        mem "$t" '{"kind":"gradient_accumulation","steps":4}'
        mem "$t" '{"kind":"batch_size","factor":2}'
    } | python3 -c '
import json, sys
dec = json.JSONDecoder()
txt = sys.stdin.read()
docs, i = [], 0
while i < len(txt):
    while i < len(txt) and txt[i].isspace():
        i += 1
    if i >= len(txt):
        break
    d, i = dec.raw_decode(txt, i)
    docs.append(d["memory"])
def mb(v):
    return "–" if v is None else "%.1f" % (v / 1e6)
m = docs[0]
b = m.get("breakdown") or {}
peak = "–" if m.get("peak_bytes") is None else "%s (%s)" % (mb(m["peak_bytes"]), m.get("source", ""))
row = [sys.argv[1], peak] + [mb(b.get(k)) for k in
       ("weights", "gradients", "optimizer_state", "activations", "activations_and_other")]
row.append(mb(m.get("estimated_peak_bytes")))
row += [mb(d.get("predicted_peak_bytes")) for d in docs[1:]]
print("| " + " | ".join(row) + " |")
' "$t"
done
