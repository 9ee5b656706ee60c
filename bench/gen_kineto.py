#!/usr/bin/env python3
"""Writes a synthetic Kineto-shaped trace of about SIZE MiB to PATH.

Usage: gen_kineto.py PATH [SIZE_MIB]. The mix follows the public traces:
cpu_op events with Input Dims and Call stack, cuda_runtime launches, kernels
with launch geometry, ac2g flow pairs and a few memcpys.

Or: gen_kineto.py PATH --steps-of TRACE N. TRACE's events repeated N times,
one copy after another (its ProfilerStep renumbered, ids kept apart): a
trace of N real training steps, with the phases, layers, shapes and GPU
that give a search its full space (bench/advise_time.sh builds one from a
NeuSight table). PATH and TRACE may be gzipped (.gz)."""
import gzip
import json
import sys

ID_ARGS = ("External id", "correlation")


def repeat_steps(path, src, n):
    with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    timed = [e for e in ev if "ts" in e]
    t0 = min(float(e["ts"]) for e in timed)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed)
    span = t1 - t0 + 100.0  # us: a short pause between the copies
    top = 0
    for e in ev:
        top = max([top, int(e.get("id", 0))] + [int(e.get("args", {}).get(k, 0)) for k in ID_ARGS])
    out = []
    for k in range(n):
        for e in ev:
            c = dict(e)
            if "ts" in c:
                c["ts"] = float(e["ts"]) + k * span
            if c.get("ph") in ("s", "f") and "id" in c:
                c["id"] = int(c["id"]) + k * (top + 1)
            if "args" in c:
                c["args"] = dict(c["args"])
                for key in ID_ARGS:
                    if key in c["args"]:
                        c["args"][key] = int(c["args"][key]) + k * (top + 1)
            if str(c.get("name", "")).startswith("ProfilerStep#"):
                c["name"] = "ProfilerStep#%d" % (k + 1)
            out.append(c)
    doc["traceEvents"] = out
    with (gzip.open if path.endswith(".gz") else open)(path, "wt") as f:
        json.dump(doc, f)


path = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "--steps-of":
    repeat_steps(path, sys.argv[3], int(sys.argv[4]))
    sys.exit(0)
target = int(sys.argv[2] if len(sys.argv) > 2 else 256) << 20
stack = ";".join("/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py(%d): _call_impl" % i
                 for i in range(4))
with open(path, "w") as f:
    f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "Synthetic GPU", '
            '"totalGlobalMem": 85899345920, "computeMajor": 9, "computeMinor": 0, "numSms": 132}],\n'
            '  "traceEvents": [\n')
    ts = 1707417525512283000  # ns
    corr = 1
    written = 0
    first = True
    while written < target:
        parts = []
        for _ in range(1000):
            us = "%d.%03d" % (ts // 1000, ts % 1000)
            kus = "%d.%03d" % ((ts + 7000) // 1000, (ts + 7000) % 1000)
            parts.append(
                '  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 4242, "tid": 4242, '
                '"ts": %s, "dur": 12.345, "args": {"External id": %d, "Sequence number": %d, '
                '"Fwd thread id": 0, "Record function id": 0, "Input Dims": [[512, 1024], [512, 768], '
                '[768, 1024], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"], '
                '"Call stack": "%s"}}' % (us, corr, corr, stack))
            parts.append(
                '  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, '
                '"tid": 4242, "ts": %s, "dur": 4.250, "args": {"External id": %d, "cbid": 211, '
                '"correlation": %d}}' % (us, corr, corr))
            parts.append('  {"ph": "s", "id": %d, "pid": 4242, "tid": 4242, "ts": %s, "cat": "ac2g", '
                         '"name": "ac2g"}' % (corr, us))
            parts.append(
                '  {"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel<cutlass_80_tensorop_'
                's1688gemm_128x128_32x3_tn_align4>(Params)", "pid": 0, "tid": 7, "ts": %s, '
                '"dur": 35.104, "args": {"External id": %d, "queued": 0, "device": 0, "context": 1, '
                '"stream": 7, "correlation": %d, "registers per thread": 168, "shared memory": 73728, '
                '"blocks per SM": 0.96, "warps per SM": 3.87, "grid": [8, 16, 1], '
                '"block": [128, 1, 1], "est. achieved occupancy %%": 6}}' % (kus, corr, corr))
            parts.append('  {"ph": "f", "id": %d, "pid": 0, "tid": 7, "ts": %s, "cat": "ac2g", '
                         '"name": "ac2g", "bp": "e"}' % (corr, kus))
            ts += 50000
            corr += 1
        chunk = (",\n" if not first else "") + ",\n".join(parts)
        first = False
        f.write(chunk)
        written += len(chunk)
    f.write('\n  ],\n  "traceName": "synthetic"\n}\n')
