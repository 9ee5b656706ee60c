#!/bin/sh
# How long `reverie advise` takes, with the search's statistics: on the
# largest public trace (hta/a100-rank0-of-16-five-streams, 42k graph tasks,
# with --gpus 64 so data-parallel scale and the distributed knobs join the
# space), on the 8-rank DLRM job, on a synthetic Kineto trace of about
# 65k graph tasks (bench/gen_kineto.py, 50 MiB: the issue's size; no public
# trace is that large, and this one's space is small), and on 16 training
# steps of GPT-2 large (68k graph tasks: NeuSight's H100 table in
# tests/data/neusight built into a step by scripts/neusight_to_kineto.py
# --layers, repeated by gen_kineto.py --steps-of) with --gpus 4, whose
# space holds precision, batch, data parallelism and tensor and pipeline
# degrees. Each line: graph tasks, plans searched and pruned,
# whether the search completed, its own seconds, and the whole command's
# wall and user CPU time. Usage: bench/advise_time.sh BUILD_DIR [MIB]
# (MIB: the synthetic trace's size, default 50). Needs RV_SHARED_TRACES or
# ../shared/traces for the public ones (skipped without them).
set -eu
BUILD=${1:-build}
MIB=${2:-50}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN="$BUILD/bin/reverie"
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 1; }
SHARED=${RV_SHARED_TRACES:-$HERE/../../shared/traces}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
python3 "$HERE/gen_kineto.py" "$TMP/synthetic-65k.json" "$MIB"
python3 "$HERE/../scripts/neusight_to_kineto.py" \
    "$HERE/../tests/data/neusight/NVIDIA_H100_80GB_HBM3/gpt2_large-train-1024-4.csv" \
    "$TMP/gpt2.json.gz" --layers >/dev/null
python3 "$HERE/gen_kineto.py" "$TMP/gpt2-x16.json.gz" --steps-of "$TMP/gpt2.json.gz" 16
python3 - "$BIN" "$SHARED" "$TMP/synthetic-65k.json" "$TMP/gpt2-x16.json.gz" <<'PY'
import json, os, resource, subprocess, sys, time

binary, shared, synth, gpt2 = sys.argv[1:5]
cases = []
a100 = os.path.join(shared, "hta", "a100-rank0-of-16-five-streams.json.gz")
if os.path.exists(a100):
    cases.append(("a100-rank0-of-16 --gpus 64", [a100], ["--gpus", "64"]))
dlrm = [os.path.join(shared, "param", "dlrm-8rank", "worker%d.kineto.json.gz" % i) for i in range(8)]
if all(os.path.exists(p) for p in dlrm):
    cases.append(("dlrm 8-rank job --gpus 16", dlrm, ["--gpus", "16"]))
cases.append(("synthetic ~65k tasks", [synth], []))
cases.append(("gpt2-large 16 steps --gpus 4", [gpt2], ["--gpus", "4"]))
for objective in ("time", "cost"):
    for name, paths, extra in cases:
        sim = subprocess.run([binary, "simulate"] + paths + ["--compact"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True).stdout
        tasks = json.loads(sim).get("tasks")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        out = subprocess.run([binary, "advise"] + paths + extra + ["--objective", objective, "--compact"],
                             stdout=subprocess.PIPE, check=True).stdout
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        d = json.loads(out)
        top = (d.get("candidates") or [{}])[0]
        print("%-28s %-4s %6s tasks  searched %3d  pruned %3d %s  complete %-5s  search %5.1f s  "
              "command: wall %5.1f s, user %5.1f s  top: %s" % (
                  name, objective, tasks, d["searched"], d["pruned"], json.dumps(d["pruned_by"]),
                  d["complete"], d["seconds"], wall, after.ru_utime - before.ru_utime,
                  ", ".join(top.get("changes", []))))
        sys.stdout.flush()
PY
