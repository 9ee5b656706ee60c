#!/usr/bin/env python3
"""`simulate --whatif '{"gpu": G, "host_overheads": "platform"}'` with
--overheads-from traces of G takes the target machine's host (the `gpu`
entry says `host: target`, no warning that the host was kept or that the
pool mixes hardware); with traces of the trace's own GPU it says the host
was kept. Data: tests/data/public/kineto (a V100 ResNet-50 step and an H100
trace). Exit 77 when the data or the binary is missing."""
import os
import sys

from clitest import BIN, SRC, check, finish, reverie
DATA = os.path.join(SRC, "tests/data/public/kineto")
V100 = os.path.join(DATA, "resnet50-v100-workers4.pt.trace.json.gz")
H100 = os.path.join(DATA, "h100-sync-before-fix.json")
DOC = '{"gpu":"H100-SXM5","host_overheads":"platform"}'


def answer(pool):
    d = reverie(["simulate", V100, "--compact", "--overheads-from", pool, "--whatif", DOC])
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
    return finish()


if __name__ == "__main__":
    sys.exit(main())
