#!/usr/bin/env python3
"""The `parallel` what-if on a one-GPU training step built from NeuSight's
per-operator table (tests/data/neusight, GPT-2 large, H100, batch 4,
sequence 1024, 36 layers; docs/models/parallel.md "NeuSight steps").

- the built step replays within 3% of the table's measured e2e_latency;
- DP4 inserts one gradient all-reduce per layer and keeps the step near
  the one-GPU step (the per-GPU batch stays, the all-reduces hide);
- TP4 re-times the GEMMs at a quarter of their size through the fitted
  efficiency table: between 1/4 (linear) and 1/2 of their time, and four
  all-reduces per layer;
- PP4 with one micro-batch reports a bubble share of 3/4.
The measured multi-GPU runs are not here, so no error against them is
asserted. Exit 77 when the data or the binary is missing."""
import json
import os
import subprocess
import sys
import tempfile

from clitest import BIN, SRC, check, finish
TABLE = os.path.join(SRC, "tests/data/neusight/NVIDIA_H100_80GB_HBM3/gpt2_large-train-1024-4.csv")


def simulate(trace, whatif):
    p = subprocess.run([BIN, "simulate", trace, "--compact", "--whatif", json.dumps(whatif)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("reverie simulate %s: %s" % (json.dumps(whatif), p.stderr.strip()))
    a = json.loads(p.stdout)
    entry = next((x for x in a["applied"] if x.get("model") == "parallel"), None)
    return a, entry


def main():
    if not os.path.isfile(BIN):
        print("skip: %s not built" % BIN)
        return 77
    if not os.path.isfile(TABLE):
        print("skip: %s missing" % TABLE)
        return 77
    with open(TABLE[:-4] + ".json") as f:
        e2e_us = json.load(f)["e2e_latency"] * 1e3
    with tempfile.TemporaryDirectory(prefix="rv-par-") as tmp:
        trace = os.path.join(tmp, "gpt2.json.gz")
        subprocess.run([sys.executable, os.path.join(SRC, "scripts/neusight_to_kineto.py"), TABLE,
                        trace, "--layers"], check=True, stdout=subprocess.DEVNULL)
        base, _ = simulate(trace, {})
        err = base["baseline_us"] / e2e_us - 1
        check(abs(err) <= 0.03, "replay %.1f ms vs table e2e %.1f ms (%+.1f%%)" % (
            base["baseline_us"] / 1e3, e2e_us / 1e3, err * 100))

        a, e = simulate(trace, {"parallel": {"data": 4}})
        ar = e["dimensions"]["data"]["collectives_inserted_per_step"]
        check(ar == 36, "DP4: %d gradient all-reduces (one per layer)" % ar)
        check(0.99 <= a["predicted_us"] / base["baseline_us"] <= 1.10,
              "DP4: step %.1f ms vs one GPU %.1f ms" % (a["predicted_us"] / 1e3, base["baseline_us"] / 1e3))

        a, e = simulate(trace, {"parallel": {"tensor": 4}})
        x = e["gemm_us_after"] / e["gemm_us_before"]
        check(0.25 < x <= 0.5, "TP4: GEMMs %.1f -> %.1f ms (x%.3f; linear would be 0.25)" % (
            e["gemm_us_before"] / 1e3, e["gemm_us_after"] / 1e3, x))
        check(e["gemms_at_new_size"] > 0 and e["gemms_linear"] == 0,
              "TP4: %d GEMMs re-timed at their new size, %d linearly" % (
                  e["gemms_at_new_size"], e["gemms_linear"]))
        ar = e["dimensions"]["tensor"]["collectives_inserted_per_step"]
        check(ar == 4 * 36, "TP4: %d all-reduces (two per layer forward, two backward)" % ar)
        check(a["predicted_us"] < base["baseline_us"], "TP4: step %.1f ms" % (a["predicted_us"] / 1e3))

        a, e = simulate(trace, {"parallel": {"pipeline": 4}})
        check(abs(e["bubble_share"] - 0.75) < 1e-4, "PP4, one micro-batch: bubble %.4f" % e["bubble_share"])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
