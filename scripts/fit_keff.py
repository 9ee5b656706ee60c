#!/usr/bin/env python3
"""Fits the cross-GPU efficiency table (engine/cost/rv_keff_table.c) on
NeuSight's per-operator tables, and measures its error.

Each table (one model, batch and GPU) becomes a Kineto trace
(scripts/neusight_to_kineto.py, forward ops: the converter cannot cost a
backward op from the table's forward shapes); `reverie kernels T
--efficiencies` gives each costed kernel's class, size bucket and fp32
efficiency (roofline / measured) on its GPU. The table holds, per GPU
family, class and bucket, the median efficiency, and per class the
median of all its kernels (bucket -1).

The error is the kernel time of a model moved between two GPUs against
the time measured on the target, per (model, batch, source, target):
  keep       the source kernel keeps its share of peak (the old rule)
  fitted     the table fitted on everything (in-sample)
  lomo       fitted without the model being predicted (leave one model out)
  logo       the target GPU unseen (leave one GPU out): each side's time
             is t0 + roofline / e per class (a latency floor and a large-
             kernel efficiency, fitted per GPU), the target's t0 and e the
             mean of its vendor's other GPUs (NVIDIA targets only: MI210
             has no AMD sibling), and the kernel takes the ratio of the two
             modelled times: what the engine does for a GPU not in the table
Kernels pair by (class, FLOPs, bytes) and occurrence: the tables of one
model list the same operators, not always in the same order; the
comparison runs over the paired kernels.

Tensor-core shares (kappa, rv_keff_tc_share). NeuSight's tables are fp32;
a TF32, fp16 or bf16 kernel reaches a different share of its (8-16x
higher) peak. The shared traces whose GEMMs ran on tensor cores with op
shapes (TC_TRACES: TF32 on an A100, bf16 on an H100) give it: each such
GEMM, timed as t = max(F / (kappa x peak_dtype), B / BW) / eta, where eta
is the fitted fp32 efficiency of its family, class and size (the table
above), has kappa_i = (F / peak_dtype) / (t x eta) when the compute side
binds (t x eta > B / BW). kappa per family and width (TF32; 16 bits and
below: fp16, bf16 and fp8 share it) is the median of kappa_i weighted by
the kernel's time. Only the families measured get a row: tensor cores
differ between generations (Volta, Ampere, Hopper), and a family without
one keeps its fp32 share (kappa 1, the old rule). Error: the model's time of each of those GEMMs against the
measured one, in-sample and with the kernel's trace left out, next to
kappa = 1 (the old rule: the fp32 share of the tensor-core peak).

Usage: fit_keff.py [--neusight DIR] [--traces DIR] [--reverie BIN] [--write TABLE.c]
                   [--json OUT.json]
"""
import argparse
import collections
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILY = {"Tesla_V100-PCIE-32GB": "V100", "NVIDIA_A100-PCIE-40GB": "A100",
          "NVIDIA_H100_80GB_HBM3": "H100", "AMD_Instinct_MI210": "MI210"}
VENDOR = {"V100": "nvidia", "A100": "nvidia", "H100": "nvidia", "MI210": "amd"}
CLASS_IDS = {"gemm": 1, "conv": 2, "attention": 3, "embedding": 4, "norm": 5, "softmax": 6,
             "elementwise": 7, "reduce": 8, "optimizer": 9}
REACH = 2
# Shared traces with tensor-core GEMMs and op shapes, and their family.
TC_TRACES = [("hta/a100-rank0-of-16-five-streams.json.gz", "A100"),
             ("tracelens/h100-bert-small-forward.json.gz", "H100"),
             ("tracelens/h100-falconsai-vit-forward.json.gz", "H100")]
DTYPE_IDS = {"tf32": 1, "fp16": 2, "bf16": 3, "fp8": 4}
WIDTH = {"tf32": "tf32", "fp16": "16", "bf16": "16", "fp8": "16"}
# The fp32 peak over the tensor-core peak of the TC_TRACES' GPUs (engine/hw/rv_hw.c:
# A100 19.5 / 156 TF32; H100 SXM5 67 / 989 bf16): the least kappa the engine takes.
FP32_SHARE = {("A100", "tf32"): 19.5 / 156, ("H100", "16"): 67 / 989}
# The size curve: its shape is fitted on the cells with kernels of this many
# size buckets (log2 FLOPs) or more and shared by the rest, which fit only
# its level (lg F0, searched over CURVE_LG0).
CURVE_MIN_SIZES = 3
CURVE_LG0 = (6.0, 13.0)


def kernels_of(reverie, csv_path, tmp):
    out = os.path.join(tmp, "t.json.gz")
    subprocess.run([sys.executable, os.path.join(HERE, "neusight_to_kineto.py"), csv_path, out,
                    "--forward-only"], check=True)
    r = subprocess.run([reverie, "kernels", out, "--efficiencies"], check=True,
                       capture_output=True, text=True)
    return json.loads(r.stdout)["kernels"]


def load(neusight, reverie):
    data = {}  # (config, family) -> kernels
    with tempfile.TemporaryDirectory() as tmp:
        for d, fam in FAMILY.items():
            for csv_path in sorted(glob.glob(os.path.join(neusight, d, "*.csv"))):
                config = os.path.basename(csv_path)[:-4]
                data[(config, fam)] = kernels_of(reverie, csv_path, tmp)
    return data


def fit(data, keep):
    """family -> {(class, bucket): median eff}, over the (config, family) keys keep() accepts."""
    cells = collections.defaultdict(list)
    for (config, fam), ks in data.items():
        if not keep(config, fam):
            continue
        for k in ks:
            if k["eff"] > 0:
                cells[(fam, k["class"], k["bucket"])].append(k["eff"])
                cells[(fam, k["class"], -1)].append(k["eff"])
    table = collections.defaultdict(dict)
    for (fam, cls, b), v in cells.items():
        table[fam][(cls, b)] = (statistics.median(v), len(v))
    return table


def eff_of(tab, cls, b):
    """rv_keff_eff's lookup: the bucket, the nearest within REACH, the class."""
    if tab is None:
        return 0
    for d in range(REACH + 1):
        for bb in ((b + d, b - d) if d else (b,)):
            if bb >= 0 and (cls, bb) in tab:
                return tab[(cls, bb)][0]
    return tab.get((cls, -1), (0, 0))[0]


FLOOR_GRID_US = [0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 15]


def fit_floor(ks):
    """(t0 us, e) of t = t0 + roof / e minimizing the median relative error."""
    roofs = [(k["eff"] * k["us"], k["us"]) for k in ks if k["eff"] > 0]
    best = None
    for t0 in FLOOR_GRID_US:
        es = [r / (t - t0) for r, t in roofs if t > t0 + 0.2]
        if not es:
            continue
        e = statistics.median(es)
        err = statistics.median(abs(t0 + r / e - t) / t for r, t in roofs)
        if best is None or err < best[0]:
            best = (err, t0, e)
    return (best[1], best[2]) if best else None


def fit_floors(data):
    """(family, class) -> (t0 us, e)."""
    by = collections.defaultdict(list)
    for (config, fam), ks in data.items():
        for k in ks:
            by[(fam, k["class"])].append(k)
    out = {}
    for key, ks in by.items():
        f = fit_floor(ks)
        if f:
            out[key] = f
    return out


def floor_time(floors, fams, cls, roof_us):
    """Modelled us of a kernel of roofline roof_us from the mean of fams' floors."""
    ps = [floors[(f, cls)] for f in fams if (f, cls) in floors]
    if not ps or roof_us <= 0:
        return 0
    t0 = statistics.mean(p[0] for p in ps)
    e = math.exp(statistics.mean(math.log(p[1]) for p in ps))
    return t0 + roof_us / e


def predict_floor(pairs, floors, src_fams, dst_fams):
    total = 0.0
    for a, b in pairs:
        ms = floor_time(floors, src_fams, a["class"], a["eff"] * a["us"])
        md = floor_time(floors, dst_fams, a["class"], b["eff"] * b["us"])
        total += a["us"] * md / ms if ms > 0 and md > 0 else a["us"]
    return total / 1e3


def paired(src, dst):
    """(src kernel, dst kernel) pairs of the same class, FLOPs and bytes."""
    seen = collections.defaultdict(list)
    for b in dst:
        seen[(b["class"], b["flops"], b["bytes"])].append(b)
    used = collections.Counter()
    out = []
    for a in src:
        key = (a["class"], a["flops"], a["bytes"])
        if used[key] < len(seen[key]):
            out.append((a, seen[key][used[key]]))
            used[key] += 1
    return out


def predict(pairs, tab_src, tab_dst):
    """Predicted kernel ms on the target of the paired source kernels."""
    total = 0.0
    for a, b in pairs:
        roof_a = a["eff"] * a["us"]
        roof_b = b["eff"] * b["us"]
        if roof_a <= 0 or roof_b <= 0:
            total += a["us"]
            continue
        t = a["us"] * roof_b / roof_a
        ea, eb = eff_of(tab_src, a["class"], a["bucket"]), eff_of(tab_dst, a["class"], a["bucket"])
        if ea > 0 and eb > 0:
            t *= ea / eb
        total += t
    return total / 1e3


def model_of(config):
    return config.split("-")[0]


def evaluate(data):
    full = fit(data, lambda c, f: True)
    floors = fit_floors(data)
    rows = []
    configs = sorted({c for c, _ in data})
    fams = sorted(FAMILY.values())
    for config in configs:
        lomo = fit(data, lambda c, f, m=model_of(config): model_of(c) != m)
        for fs in fams:
            for fd in fams:
                if fs == fd or (config, fs) not in data or (config, fd) not in data:
                    continue
                pairs = paired(data[(config, fs)], data[(config, fd)])
                if len(pairs) < 0.9 * len(data[(config, fd)]):
                    continue
                meas = sum(b["us"] for _, b in pairs) / 1e3
                # logo: the target's floors from its vendor's other GPUs
                sib = [f for f in fams if f != fd and VENDOR[f] == VENDOR[fd]]
                r = {"config": config, "from": fs, "to": fd, "measured_ms": meas,
                     "paired": len(pairs), "keep_ms": predict(pairs, None, None),
                     "fitted_ms": predict(pairs, full.get(fs), full.get(fd)),
                     "lomo_ms": predict(pairs, lomo.get(fs), lomo.get(fd)),
                     "logo_ms": predict_floor(pairs, floors, [fs], sib) if sib else None}
                rows.append(r)
    return full, floors, rows


def summary(rows, key):
    errs = [abs(r[key] - r["measured_ms"]) / r["measured_ms"] for r in rows if r[key] is not None]
    if not errs:
        return None
    return {"pairs": len(errs), "median": statistics.median(errs), "worst": max(errs)}


def tc_kernels(reverie, traces):
    """[(trace, family, kernel)] of the tensor-core GEMMs of TC_TRACES."""
    out = []
    for rel, fam in TC_TRACES:
        path = os.path.join(traces, rel)
        if not os.path.exists(path):
            continue
        r = subprocess.run([reverie, "kernels", path, "--efficiencies"], check=True,
                           capture_output=True, text=True)
        for k in json.loads(r.stdout)["kernels"]:
            if k["class"] == "gemm" and k.get("dtype") in WIDTH and k.get("compute_us"):
                out.append((rel, fam, k))
    return out


def weighted_median(pairs):
    """Median of the values of (value, weight) pairs, by weight."""
    pairs = sorted(pairs)
    total, acc = sum(w for _, w in pairs), 0.0
    for v, w in pairs:
        acc += w
        if acc >= total / 2:
            return v
    return None


def kappa_of(full, fam, k):
    """(kappa_i, eta) of one tensor-core kernel; kappa_i None when memory binds."""
    eta = eff_of(full.get(fam), "gemm", k["bucket"])
    if eta <= 0 or k["us"] * eta <= k["memory_us"]:
        return None, eta
    return k["compute_us"] / (k["us"] * eta), eta


def kappa_at(curve, lgf):
    """kappa of a kernel of 10^lgf FLOPs: 1 / (1 + (F0 / F)^p), curve = (lg F0, p);
    rv_keff_tc_share_at."""
    return 1.0 / (1.0 + 10 ** (curve[1] * (curve[0] - lgf)))


def curve_loss(pts, lg0, p):
    """Time-weighted mean |log| ratio of the curve's kappa (at least the fp32
    floor, as the engine takes it) to the kernels' kappa_i."""
    return sum(w * abs(math.log(max(kappa_at((lg0, p), x), fl) / kap))
               for x, kap, w, fl in pts) / sum(w for _, _, w, _ in pts)


def grid(lo, hi, step):
    return [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]


def fit_level(pts, p):
    """(loss, lg F0) of the best level for shape p: a coarse grid, then a fine one."""
    best = min((curve_loss(pts, l, p), l) for l in grid(CURVE_LG0[0], CURVE_LG0[1], 0.1))
    return min((curve_loss(pts, l, p), l) for l in grid(best[1] - 0.1, best[1] + 0.1, 0.01))


def fit_shape(cells):
    """The shared shape p: the total loss over the cells with CURVE_MIN_SIZES
    size buckets or more, each at its best level; None when none has."""
    many = [pts for pts in cells.values() if len({b for _, _, _, _, b in pts}) >= CURVE_MIN_SIZES]
    if not many:
        return None
    many = [[q[:4] for q in pts] for pts in many]
    best = min((sum(fit_level(pts, p)[0] for pts in many), p) for p in grid(0.1, 2.0, 0.1))
    return min((sum(fit_level(pts, p)[0] for pts in many), p)
               for p in grid(max(0.05, best[1] - 0.1), best[1] + 0.1, 0.01))[1]


def fit_tc(full, ks, keep=lambda rel: True):
    """{(family or "", width): (kappa, kernels, curve)} from the kernels keep()
    accepts: kappa the time-weighted median; curve (lg F0, p) the size curve,
    p shared across the cells (fitted on those with enough sizes), F0 per
    cell; None when no cell has enough sizes."""
    cells = collections.defaultdict(list)
    for rel, fam, k in ks:
        if not keep(rel):
            continue
        kap, _ = kappa_of(full, fam, k)
        if kap is not None:
            w = WIDTH[k["dtype"]]
            q = (math.log10(k["flops"]), kap, k["us"], FP32_SHARE[(fam, w)], k["bucket"])
            cells[(fam, w)].append(q)
            cells[("", w)].append(q)
    p = fit_shape({key: v for key, v in cells.items() if key[0]})
    out = {}
    for key, v in cells.items():
        curve = (fit_level([q[:4] for q in v], p)[1], p) if p else None
        out[key] = (weighted_median([(q[1], q[2]) for q in v]), len(v), curve)
    return out


def tc_lookup(tc, fam, width, lgf=None):
    """kappa of a cell (the pooled one when the family has none): its curve's
    at 10^lgf FLOPs when lgf is given and it has one, else its median."""
    v = tc.get((fam, width)) or tc.get(("", width))
    if not v:
        return None
    return kappa_at(v[2], lgf) if lgf is not None and v[2] else v[0]


def tc_error(full, ks):
    """Median |error| of the tensor-core GEMMs' modelled time: in-sample and
    with each kernel's trace left out (loto), for kappa by size (curve) and
    the size-blind median (median), and at kappa = 1 (the fp32 share of the
    tensor peak). kappa is floored at the fp32 peak, as the engine does."""
    tc = fit_tc(full, ks)
    loto = {rel: fit_tc(full, ks, lambda r, rel=rel: r != rel) for rel in {k[0] for k in ks}}
    out = {}
    for key in ("curve", "curve_loto", "median", "median_loto", "kappa1"):
        errs = collections.defaultdict(list)
        for rel, fam, k in ks:
            eta = eff_of(full.get(fam), "gemm", k["bucket"])
            if eta <= 0:
                continue
            w = WIDTH[k["dtype"]]
            lgf = math.log10(k["flops"]) if key.startswith("curve") else None
            cell = loto[rel] if key.endswith("loto") else tc
            kap = 1.0 if key == "kappa1" else tc_lookup(cell, fam, w, lgf)
            if not kap:
                continue
            kap = max(kap, FP32_SHARE[(fam, w)])
            t = max(k["compute_us"] / kap, k["memory_us"]) / eta
            errs[(fam, k["dtype"])].append(abs(t - k["us"]) / k["us"])
        out[key] = {"%s %s" % fk: {"kernels": len(v), "median": statistics.median(v),
                                   "worst": max(v)} for fk, v in sorted(errs.items())}
    return tc, out


def write_table(full, floors, tc, path, version):
    lines = ["/* Generated by scripts/fit_keff.py from NeuSight's per-operator tables",
             " * (sitar-lab/NeuSight @ 6945927d, scripts/asplos/label, MIT): do not edit. */",
             '#include "cost/rv_keff.h"', "", "/* clang-format off */",
             'const char rv_keff_version[] = "%s";' % version,
             "const rv_keff_row rv_keff_rows[] = {"]
    n = 0
    for fam in sorted(full):
        for (cls, b), (eff, cnt) in sorted(full[fam].items(), key=lambda x: (CLASS_IDS[x[0][0]], x[0][1])):
            lines.append('    {"%s", %d, %d, %.6g, %d},' % (fam, CLASS_IDS[cls], b, eff, cnt))
            n += 1
    lines += ["};", "const unsigned rv_keff_nrows = %d;" % n, "",
              "const rv_keff_floor rv_keff_floors[] = {"]
    m = 0
    for (fam, cls), (t0, e) in sorted(floors.items(), key=lambda x: (x[0][0], CLASS_IDS[x[0][1]])):
        lines.append('    {"%s", "%s", %d, %.6g, %.6g},' % (fam, VENDOR[fam], CLASS_IDS[cls], t0, e))
        m += 1
    lines += ["};", "const unsigned rv_keff_nfloors = %d;" % m, "",
              "/* Tensor-core shares relative to fp32, fitted on the shared traces' tensor-core",
              " * GEMMs (scripts/fit_keff.py: TC_TRACES): family, dtype, kernels, the",
              " * time-weighted median, and the size curve kappa(F) = 1 / (1 + (F0 / F)^p) as",
              " * lg F0 and p (its shape p shared, fitted where a family has kernels of",
              " * %d sizes or more). */" % CURVE_MIN_SIZES,
              "const rv_keff_tc rv_keff_tcs[] = {"]
    t = 0
    for (fam, width), (kap, cnt, curve) in sorted(tc.items()):
        if not fam:
            continue  # pooled: for the error only, not a GPU's row
        lg0, p = curve or (0, 0)
        for dt in sorted(DTYPE_IDS, key=DTYPE_IDS.get):
            if WIDTH[dt] == width:
                lines.append('    {"%s", %d, %d, %.4g, %.4g, %.4g},'
                             % (fam, DTYPE_IDS[dt], cnt, kap, lg0, p))
                t += 1
    lines += ["};", "const unsigned rv_keff_ntcs = %d;" % t, "/* clang-format on */", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--neusight", default=os.path.join(HERE, "..", "..", "shared", "traces",
                                                       "ground-truth", "neusight"))
    ap.add_argument("--traces", default=os.path.join(HERE, "..", "..", "shared", "traces"))
    ap.add_argument("--reverie", default=os.path.join(HERE, "..", "build", "bin", "reverie"))
    ap.add_argument("--write")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not os.path.isdir(a.neusight):
        print("fit_keff: no NeuSight tables at %s" % a.neusight, file=sys.stderr)
        return 77
    data = load(a.neusight, a.reverie)
    full, floors, rows = evaluate(data)
    out = {"rows": rows, "summary": {k: summary(rows, k + "_ms") for k in ("keep", "fitted", "lomo", "logo")}}
    per_pair = collections.defaultdict(list)
    for r in rows:
        per_pair[(r["from"], r["to"])].append(r)
    out["per_pair"] = [{"from": f, "to": t, **{k: summary(v, k + "_ms") for k in ("keep", "fitted", "lomo", "logo")}}
                       for (f, t), v in sorted(per_pair.items())]
    tc, tc_err = tc_error(full, tc_kernels(a.reverie, a.traces))
    out["tensor_core"] = {"kappa": {"%s %s" % (f or "pooled", w): {
        "kappa": v[0], "kernels": v[1], "curve_lg_f0": v[2] and v[2][0],
        "curve_p": v[2] and v[2][1],
        "curve_at": v[2] and {"1e%d" % e: kappa_at(v[2], e) for e in (7, 8, 9, 10, 11)}}
                                    for (f, w), v in sorted(tc.items())},
                          "error": tc_err}
    if a.write:
        write_table(full, floors, tc, a.write, "neusight-6945927d-3")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps({"summary": out["summary"], "tensor_core": out["tensor_core"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
