#!/usr/bin/env python3
"""`reverie advise` searches the `parallel` degrees of a multi-GPU plan
(engine/advise/rv_advise.c, docs/advise.md "The space"):

- on a one-GPU training step built from NeuSight's GPT-2 table
  (tests/data/neusight, 36 layers, 20 heads) with --gpus 4, the searched
  space lists tensor 2 and 4 and pipeline 2 and 4; a tensor or pipeline
  plan is a candidate (TP4 quarters the GEMMs), on at most 4 GPUs; the
  candidates' what-ifs, given to `reverie simulate --whatif`, give the same
  step and energy_j (within 0.5%) and GPUs (job.gpus: a tensor or
  pipeline split counted);
- on the 8-rank DLRM job (tests/data/public/param/dlrm-8rank, no layer
  instances), every tensor and pipeline degree dividing its 8 GPUs is
  excluded with the model's own reason.
Exit 77 when the data or the binary is missing."""
import json
import os
import subprocess
import sys
import tempfile

from clitest import BIN, SRC, check, finish, reverie
TABLE = os.path.join(SRC, "tests/data/neusight/NVIDIA_H100_80GB_HBM3/gpt2_large-train-1024-4.csv")
DLRM = [os.path.join(SRC, "tests/data/public/param/dlrm-8rank/worker%d.kineto.json.gz" % i)
        for i in range(8)]


def is_mp(label):
    return label.startswith("tensor ") or label.startswith("pipeline ")


def excluded(ans, label):
    """The reason of the exclusion whose change starts with label."""
    return next((e["reason"] for e in ans["excluded"] if (e["change"] + " ").startswith(label)),
                None)


def check_gpt2(trace):
    ans = reverie(["advise", trace, "--gpus", "4", "--compact"])
    space = ans["space"]
    print("searched %d plans in %.1f s, complete %s; space: %s" % (
        ans["searched"], ans["seconds"], ans["complete"], ", ".join(space)))
    for want in ("tensor 2", "tensor 4", "pipeline 2 ", "pipeline 4 "):
        check(any((s + " ").startswith(want) for s in space), "space lists %r" % want.strip())
    # 8 GPUs are more than the 4 to spend: not a move, not an exclusion.
    check(not any(s.startswith("tensor 8") for s in space), "no tensor 8 on 4 GPUs")
    cands = ans["candidates"]
    mp = [c for c in cands if any(is_mp(x) for x in c["changes"])]
    for c in mp[:3]:
        print("  %s: %.1f ms on %d GPUs, x%.2f per sample" % (
            ", ".join(c["changes"]), c["predicted_us"] / 1e3, c["gpus"], c["speedup"]))
    if mp:
        check(True, "%d candidates split the model (tensor or pipeline)" % len(mp))
    else:
        reasons = [excluded(ans, s) for s in ("tensor 2 ", "tensor 4 ")]
        check(all(reasons), "no tensor candidate, and the exclusion says why: %s" % reasons)
    for c in mp:
        par = c["whatif"].get("parallel", {})
        deg = par.get("tensor", 1) * par.get("pipeline", 1)
        check(deg > 1 and c["gpus"] <= 4 and c["gpus"] % deg == 0,
              "%s: %d GPUs, a multiple of its degree %d, within --gpus 4" % (
                  c["changes"], c["gpus"], deg))
    rerun = cands[:5] + [c for c in mp[:2] if c not in cands[:5]]
    for c in rerun:
        sim = reverie(["simulate", trace, "--compact", "--whatif", json.dumps(c["whatif"])])
        want, got = c["predicted_us"], sim["predicted_us"]
        doc = json.dumps(c["whatif"], separators=(",", ":"))
        check(abs(got - want) <= 0.005 * want, "simulate --whatif %s: %.1f vs %.1f ms" % (
            doc, got / 1e3, want / 1e3))
        # The GPUs and energy are simulate's too: job.gpus, energy_j (every
        # GPU of a model-parallel replica).
        gpus = sim["job"]["gpus"]["predicted"]
        check(c["gpus"] == gpus, "simulate --whatif %s: %d GPUs vs %d" % (doc, gpus, c["gpus"]))
        want, got = c["energy_j"], sim["energy_j"]["predicted"]
        check(want is not None and abs(got - want) <= 0.005 * want,
              "simulate --whatif %s: %.1f vs %s J" % (doc, got, want))


def check_dlrm():
    ans = reverie(["advise"] + DLRM + ["--compact"])
    print("DLRM job: searched %d plans in %.1f s" % (ans["searched"], ans["seconds"]))
    check(not any(is_mp(s) for s in ans["space"]), "DLRM: no tensor or pipeline move searched")
    for label in ("tensor 2 ", "tensor 4 ", "tensor 8 ", "pipeline 2 ", "pipeline 8 "):
        why = excluded(ans, label)
        check(bool(why) and "layer instances" in why, "DLRM: %s excluded: %s" % (label.strip(), why))


def main():
    if not os.path.isfile(BIN):
        print("skip: %s not built" % BIN)
        return 77
    for need in [TABLE] + DLRM:
        if not os.path.isfile(need):
            print("skip: %s missing" % need)
            return 77
    with tempfile.TemporaryDirectory(prefix="rv-advise-par-") as tmp:
        trace = os.path.join(tmp, "gpt2.json.gz")
        subprocess.run([sys.executable, os.path.join(SRC, "scripts/neusight_to_kineto.py"), TABLE,
                        trace, "--layers"], check=True, stdout=subprocess.DEVNULL)
        check_gpt2(trace)
    check_dlrm()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
