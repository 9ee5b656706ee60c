#!/usr/bin/env python3
"""Cross-GPU kernel time against NeuSight's measured per-operator tables
(tests/data/neusight, BERT-large inference on four GPUs).

- every pair: the `gpu` what-if's kernel time within 15% of the target's
  measured kernel time (the fitted table, engine/cost/rv_keff_table.c);
- `reverie kernels --to` gives the what-if's figure (one path);
- the answer says which efficiencies it used.
Exit 77 when the data or the binary is missing."""
import gzip
import json
import os
import subprocess
import sys
import tempfile

from clitest import BIN, SRC, check, finish, reverie
DATA = os.path.join(SRC, "tests/data/neusight")
GPUS = {"Tesla_V100-PCIE-32GB": "V100-PCIe", "NVIDIA_A100-PCIE-40GB": "A100-PCIe",
        "NVIDIA_H100_80GB_HBM3": "H100-SXM5", "AMD_Instinct_MI210": "MI210"}
TABLE = "bert_large-inf-512-8.csv"


def main():
    if not os.path.isfile(BIN):
        print("skip: %s not built" % BIN)
        return 77
    tables = {g: os.path.join(DATA, g, TABLE) for g in GPUS}
    if not all(os.path.exists(p) for p in tables.values()):
        print("skip: NeuSight tables missing under %s" % DATA)
        return 77
    with tempfile.TemporaryDirectory(prefix="rv-xgpu-") as tmp:
        traces, kernel_ms = {}, {}
        for g, path in tables.items():
            out = os.path.join(tmp, g + ".json.gz")
            subprocess.run([sys.executable, os.path.join(SRC, "scripts/neusight_to_kineto.py"), path,
                            out, "--forward-only"], check=True)
            traces[g] = out
            with gzip.open(out, "rt") as f:
                kernel_ms[g] = sum(e["dur"] for e in json.load(f)["traceEvents"]
                                   if e.get("cat") == "kernel") / 1e3
        for src in GPUS:
            to = sum((["--to", GPUS[d]] for d in GPUS if d != src), [])
            k = reverie(["kernels", traces[src]] + to)
            for r in k["rescaled"]:
                dst = next(d for d in GPUS if GPUS[d] == r["gpu"])
                err = r["predicted_ms"] / kernel_ms[dst] - 1
                check(abs(err) <= 0.15, "%s -> %s: predicted %.2f ms, measured %.2f ms (%+.1f%%)" % (
                    GPUS[src], r["gpu"], r["predicted_ms"], kernel_ms[dst], err * 100))
        # One path: the what-if's kernel time equals kernels --to's.
        sim = reverie(["simulate", traces["Tesla_V100-PCIE-32GB"], "--compact", "--whatif",
                       json.dumps({"gpu": "H100-SXM5"})])
        gpu = next(a for a in sim["applied"] if a.get("model") == "gpu")
        k = reverie(["kernels", traces["Tesla_V100-PCIE-32GB"], "--to", "H100-SXM5"])["rescaled"][0]
        check(abs(gpu["kernel_us_after"] / 1e3 - k["predicted_ms"]) <= 1e-3 * k["predicted_ms"],
              "kernels --to %.3f ms = gpu what-if %.3f ms" % (k["predicted_ms"], gpu["kernel_us_after"] / 1e3))
        check(gpu.get("kernel_time_share_fitted_efficiency", 0) > 0.9,
              "V100 -> H100 moved on fitted efficiencies (share %.3f)" %
              gpu.get("kernel_time_share_fitted_efficiency", 0))
        # A GPU the table lacks: estimated, and the answer says so.
        sim = reverie(["simulate", traces["NVIDIA_H100_80GB_HBM3"], "--compact", "--whatif",
                   json.dumps({"gpu": "L4"})])
        codes = {w["code"] for w in sim.get("warnings", [])}
        check("gpu_efficiency_estimated" in codes, "H100 -> L4 warns gpu_efficiency_estimated")
        check("gpu_host_kept" in codes, "the gpu what-if warns gpu_host_kept")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
