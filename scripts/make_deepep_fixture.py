#!/usr/bin/env python3
"""Writes tests/data/parallel/bert-deepep-moe.json.gz: an expert-parallel
fixture derived from a shared trace's structure.

Source: tracelens/h100-bert-small-forward.json.gz (AMD-AGI/TraceLens @
171dd747, tests/traces/h100/, MIT licence). Each BertLayer's MLP becomes
an MoE layer as DeepEP runs it: the first kernel launched inside
BertIntermediate is renamed to DeepEP's dispatch kernel, the last one
launched inside BertOutput to its combine kernel (the kernel names of
deepseek-ai/DeepEP's intranode kernels), and distributedInfo says rank 0
of 8. Times, streams and every other event stay as traced.

Usage: scripts/make_deepep_fixture.py [SHARED_TRACES] [OUT]
"""
import gzip
import json
import os
import sys

DISPATCH = ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, "
            "float*, int4 const*, float const*, long const*, float const*, bool const*, "
            "int*, int, int, int, int, int, int, int, int, void**, int, int, int)")
COMBINE = ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, "
           "float*, __nv_bfloat16 const*, float const*, int const*, int const*, "
           "int const*, int const*, int, int, int, int, void**, int, int, int)")


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "traces")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "data", "parallel",
        "bert-deepep-moe.json.gz")
    src = os.path.join(shared, "tracelens", "h100-bert-small-forward.json.gz")
    with gzip.open(src, "rt") as f:
        d = json.load(f)
    ev = d["traceEvents"]
    mods = {"BertIntermediate": [], "BertOutput": []}
    for e in ev:
        if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: "):
            typ = e["name"][len("nn.Module: "):].rsplit("_", 1)[0]
            if typ in mods:
                mods[typ].append((e["ts"], e["ts"] + e["dur"], e["tid"]))
    launch = {}
    for e in ev:
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}):
            launch[e["args"]["correlation"]] = (e["ts"], e["tid"])
    kernels = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])

    def inside(k, spans):
        at = launch.get(k.get("args", {}).get("correlation"))
        return at is not None and any(a <= at[0] <= b and tid == at[1] for a, b, tid in spans)

    renamed = 0
    for a, b, tid in mods["BertIntermediate"]:
        ks = [k for k in kernels if inside(k, [(a, b, tid)])]
        if ks:
            ks[0]["name"] = DISPATCH
            renamed += 1
    for a, b, tid in mods["BertOutput"]:
        ks = [k for k in kernels if inside(k, [(a, b, tid)])]
        if ks:
            ks[-1]["name"] = COMBINE
            renamed += 1
    d["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 8}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(json.dumps(d, separators=(",", ":")).encode())
    print(f"{out}: {renamed} kernels renamed")


if __name__ == "__main__":
    main()
