#!/usr/bin/env python3
"""`simulate --whatif '{"gpu": G, "host_overheads": "platform"}'` with
--overheads-from traces of G takes the target machine's host (the `gpu`
entry says `host: target`, no warning that the host was kept or that the
pool mixes hardware); with traces of the trace's own GPU it says the host
was kept. Data: tests/data/public/kineto (a V100 ResNet-50 step and an H100
trace). Exit 77 when the data or the binary is missing."""
import json
import os
import subprocess
import sys

SRC = os.environ.get("RV_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("RV_BIN_DIR") or os.path.join(SRC, "build/bin"), "reverie")
DATA = os.path.join(SRC, "tests/data/public/kineto")
V100 = os.path.join(DATA, "resnet50-v100-workers4.pt.trace.json.gz")
H100 = os.path.join(DATA, "h100-sync-before-fix.json")
DOC = '{"gpu":"H100-SXM5","host_overheads":"platform"}'
failures = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def answer(pool):
    p = subprocess.run([BIN, "simulate", V100, "--compact", "--overheads-from", pool,
                        "--whatif", DOC], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("reverie simulate: %s" % p.stderr.strip())
    d = json.loads(p.stdout)
    gpu = [a for a in d.get("applied", []) if a.get("model") == "gpu"]
    codes = [w["code"] for w in d.get("warnings", [])]
    pooled = [w["message"] for w in d.get("warnings", [])
              if w["code"] == "platform_pooled" and "--overheads-from" in w["message"]]
    return d, (gpu[0] if gpu else {}), codes, pooled


def main():
    for path in (BIN, V100, H100):
        if not os.path.exists(path):
            print("skip: %s is missing" % path)
            return 77
    d, gpu, codes, pooled = answer(H100)
    check(gpu.get("host") == "target", "H100 statistics: host is the target's (%s)" % gpu.get("host"))
    check("H100" in (gpu.get("host_gpu") or ""), "host_gpu names the H100 (%s)" % gpu.get("host_gpu"))
    check("gpu_host_kept" not in codes, "no gpu_host_kept warning")
    check(not pooled, "no warning that the pool mixes hardware: %s" % pooled)
    target = d["predicted_us"]
    d, gpu, codes, pooled = answer(V100)
    check(gpu.get("host") == "kept", "V100 statistics: host kept (%s)" % gpu.get("host"))
    check("gpu_host_kept" in codes, "gpu_host_kept warning")
    check(any("H100" in m for m in pooled), "the pool is another GPU than the target's")
    check(abs(d["predicted_us"] - target) > 0.01 * target,
          "the two hosts predict differently (%.0f vs %.0f us)" % (d["predicted_us"], target))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
