#!/usr/bin/env python3
"""The GPUs and the energy of a `parallel` answer count every GPU of a
model-parallel replica (engine/simulate/rv_power.c, rv_apply_energy_params;
docs/models/parallel.md "GPUs and energy"), on a one-GPU training step built
from NeuSight's GPT-2 table (tests/data/neusight, 36 layers, 20 heads):

- tensor 4: `gpus` and `job.gpus` are 4 x the baseline's, and the energy is
  4 GPUs' (4 x the per-GPU power over the step), not one GPU's;
- pipeline 2, one micro-batch: 2 GPUs, each idle through its bubble (half
  the step), so the job's energy lies between the one-GPU step's and twice
  it, and the per-GPU power falls below the baseline's;
- tensor 2 over 2 data-parallel workers: 4 GPUs in the job, the job's
  energy twice the replica's.
Exit 77 when the data, the script or the binary is missing."""
import json
import os
import subprocess
import sys
import tempfile

from clitest import BIN, SRC, check, finish, reverie
TABLE = os.path.join(SRC, "tests/data/neusight/NVIDIA_H100_80GB_HBM3/gpt2_large-train-1024-4.csv")
SCRIPT = os.path.join(SRC, "scripts/neusight_to_kineto.py")


def simulate(trace, whatif):
    p = subprocess.run([BIN, "simulate", trace, "--compact", "--whatif", json.dumps(whatif)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("reverie simulate %s: %s" % (json.dumps(whatif), p.stderr.strip()))
    return json.loads(p.stdout)


def near(a, b, tol):
    return abs(a - b) <= tol * abs(b)


def pred(a, key):
    return a[key]["predicted"]


def gpu_energy(a):
    """One GPU's energy over the predicted step: its average power times the step."""
    return pred(a, "avg_power_per_gpu_w") * a["predicted_us"] * 1e-6


def check_split(trace, base, whatif, split, label):
    a = simulate(trace, whatif)
    g, jg = a["gpus"], a["job"]["gpus"]
    check(g["predicted"] == split * g["baseline"] and jg["predicted"] == split * jg["baseline"],
          "%s: gpus %d -> %d, job.gpus %d -> %d (x%d)" % (
              label, g["baseline"], g["predicted"], jg["baseline"], jg["predicted"], split))
    one = gpu_energy(a)
    je = pred(a["job"], "energy_j")
    check(near(je, split * one, 0.01) and je > 1.5 * one,
          "%s: job energy %.1f J = %d GPUs x %.1f J (one GPU's: %.1f J)" % (
              label, je, split, one, one))
    check(near(pred(a, "energy_j"), je, 1e-6), "%s: energy_j %.1f J is the job's (one replica)" % (
        label, pred(a, "energy_j")))
    return a


def main():
    for need in (BIN, TABLE, SCRIPT):
        if not os.path.isfile(need):
            print("skip: %s missing" % need)
            return 77
    with tempfile.TemporaryDirectory(prefix="rv-par-energy-") as tmp:
        trace = os.path.join(tmp, "gpt2.json.gz")
        subprocess.run([sys.executable, SCRIPT, TABLE, trace, "--layers"], check=True,
                       stdout=subprocess.DEVNULL)
        base = simulate(trace, {})
        base_j = pred(base["job"], "energy_j")
        print("baseline: %.1f ms, %d GPU, %.1f J" % (base["predicted_us"] / 1e3,
                                                       pred(base, "gpus"), base_j))

        check_split(trace, base, {"parallel": {"tensor": 4}}, 4, "TP4")

        a = check_split(trace, base, {"parallel": {"pipeline": 2}}, 2, "PP2")
        je = pred(a["job"], "energy_j")
        check(base_j < je < 2 * base_j, "PP2: job energy %.1f J between the one-GPU step's %.1f J "
              "and twice it (each stage idles through its bubble)" % (je, base_j))
        w = pred(a, "avg_power_per_gpu_w")
        check(w < 0.75 * pred(base, "avg_power_per_gpu_w"),
              "PP2: %.1f W per GPU, below the baseline's %.1f W" % (
                  w, pred(base, "avg_power_per_gpu_w")))

        a = simulate(trace, {"parallel": {"tensor": 2}, "distributed": {"workers": 2}})
        check(pred(a, "gpus") == 2 and pred(a["job"], "gpus") == 4 and
              pred(a["job"], "ranks") == 2,
              "TP2 x 2 workers: %d GPUs a replica, %d in the job, %d replicas" % (
                  pred(a, "gpus"), pred(a["job"], "gpus"), pred(a["job"], "ranks")))
        check(near(pred(a["job"], "energy_j"), 2 * pred(a, "energy_j"), 1e-6),
              "TP2 x 2 workers: job energy %.1f J = 2 replicas x %.1f J" % (
                  pred(a["job"], "energy_j"), pred(a, "energy_j")))
    check_job()
    return finish()


def check_job():
    """A job answer (several traced ranks) counts its GPUs as its energy does."""
    ranks = [os.path.join(SRC, "tests/data/public/param/dlrm-8rank/worker%d.kineto.json.gz" % i)
             for i in range(8)]
    if not all(os.path.isfile(r) for r in ranks):
        check(False, "the DLRM job's traces ship with the repository: missing")
        return
    a = reverie(["simulate"] + ranks + ["--compact", "--whatif", '{"distributed":{"workers":16}}'])
    g, e = a["gpus"], a["energy_j"]
    check(g["baseline"] == 8 and g["predicted"] == 16,
          "DLRM job, 16 workers: gpus %d -> %d" % (g["baseline"], g["predicted"]))
    check(1.8 * e["baseline"] < e["predicted"] < 2.5 * e["baseline"],
          "DLRM job, 16 workers: energy %.2f -> %.2f J, about twice" % (e["baseline"],
                                                                    e["predicted"]))


if __name__ == "__main__":
    sys.exit(main())
