#!/usr/bin/env python3
"""Builds a one-GPU training step Reverie can read (Kineto JSON) from a
NeuSight per-operator table, so that `parallel` can be asked of it.

Source of the tables: sitar-lab/NeuSight @ 6945927d,
scripts/asplos/label/<GPU>/<model>-train-<seq>-<batch>.{csv,json} (MIT),
kept in the shared traces under ground-truth/neusight/ (README there).

The table holds one transformer layer (layer 0) with each op's measured
forward and backward latency and its input shapes; the model repeats that
layer num_layer times. The step written here is:

- ProfilerStep#1 on one CPU thread; the ops before layer 0 (embeddings),
  num_layer copies of layer 0, each inside "nn.Module: <Block>_<l>" (a
  layer instance), then the ops after it (final norm, LM head, loss);
- per op with GPU work: a cpu_op (aten::linear with [tokens, in],
  [out, in] shapes for Conv1D/Linear GEMMs, aten::matmul, else
  aten::<name>), a cudaLaunchKernel inside it and a kernel of the op's
  measured forward latency on stream 7, named so the kernel classes read
  right (sgemm, softmax, layer_norm, elementwise);
- the backward: the same ops in reverse order, each under
  "autograd::engine::evaluate_function: <Op>Backward0", a kernel of the
  op's measured backward latency;
- no optimizer (the tables do not time it).

Launches take 5 us on the CPU, so the GPU is the bottleneck as in the
measured run. Ops with no backward latency and only scalar inputs (shape
arithmetic) are left out: their 7 us each is the table's timing overhead.

Usage: scripts/neusight_to_trace.py TABLE.csv OUT.json.gz
"""
import ast
import csv
import gzip
import json
import os
import re
import sys

LAUNCH_US = 5.0
GPU_NAMES = {
    "NVIDIA_H100_80GB_HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA_A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "Tesla_V100-PCIE-32GB": "Tesla V100-PCIE-32GB",
    "AMD_Instinct_MI210": "AMD Instinct MI210",
}


def shapes(row):
    try:
        return ast.literal_eval(row["input_shapes"] or "[]")
    except (ValueError, SyntaxError):
        return []


def kind(row):
    t = row["target"]
    if "addmm" in t or "c_attn" in t or "c_proj" in t or "c_fc" in t or "lm_head" in t:
        return "linear"
    if "matmul" in t or "bmm" in t:
        return "matmul"
    if "softmax" in t:
        return "softmax"
    if "ln_" in t or "LayerNorm" in row["meta"][-60:] or "layernorm" in t.lower():
        return "layer_norm"
    return "elementwise"


def kernel_name(k):
    return {
        "linear": "ampere_sgemm_128x64_nn",
        "matmul": "ampere_sgemm_64x64_nn",
        "softmax": "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>",
        "layer_norm": "void at::native::vectorized_layer_norm_kernel<float, float>",
    }.get(k, "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>")


def op_dims(row, k):
    s = shapes(row)
    if k == "linear" and len(s) == 3 and len(s[1]) == 2 and len(s[2]) == 2:
        # addmm(bias, x[tokens, in], w[in, out]) as aten::linear(x, w[out, in], bias)
        tokens, fin = s[1]
        fout = s[2][1]
        return "aten::linear", [[tokens, fin], [fout, fin], [fout]]
    if k == "matmul":
        return "aten::matmul", s
    return "aten::" + re.sub(r"[^a-z_]", "", row["Name"].split("_")[0].lower() or "op"), s


def layer_of(row):
    m = re.search(r"\.h\.(\d+)\.|\.layer\.(\d+)\.|\.layers\.(\d+)\.", row["meta"] + row["target"])
    return None if not m else int(next(g for g in m.groups() if g is not None))


class Writer:
    def __init__(self):
        self.ev = []
        self.cpu = 0.0
        self.gpu = 0.0
        self.corr = 0

    def op(self, row, k, lat_ms, parent=None):
        name, dims = op_dims(row, k)
        t0 = self.cpu
        if parent:
            self.ev.append({"ph": "X", "cat": "cpu_op", "name": parent, "pid": 1, "tid": 1,
                            "ts": t0, "dur": LAUNCH_US + 2})
        self.ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                        "ts": t0 + 0.5, "dur": LAUNCH_US,
                        "args": {"Input Dims": dims, "Input type": ["float"] * len(dims)}})
        self.corr += 1
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                        "tid": 1, "ts": t0 + 1, "dur": LAUNCH_US - 1,
                        "args": {"correlation": self.corr}})
        start = max(self.gpu, t0 + LAUNCH_US)
        dur = lat_ms * 1000.0
        self.ev.append({"ph": "X", "cat": "kernel", "name": kernel_name(k), "pid": 0,
                        "tid": "stream 7", "ts": start, "dur": dur,
                        "args": {"correlation": self.corr, "device": 0, "stream": 7}})
        self.gpu = start + dur
        self.cpu = t0 + LAUNCH_US + 2


def main():
    src, out = sys.argv[1], sys.argv[2]
    meta = json.load(open(src[:-4] + ".json"))
    rows = [r for r in csv.DictReader(open(src))
            if r["op"] in ("call_module", "call_function", "call_method")]
    keep = [r for r in rows
            if float(r["bw_latency"] or 0) > 0 or kind(r) in ("linear", "matmul", "softmax")]
    pre = [r for r in keep if layer_of(r) is None and keep.index(r) < next(
        i for i, x in enumerate(keep) if layer_of(x) == 0)]
    body = [r for r in keep if layer_of(r) == 0]
    post = [r for r in keep[keep.index(body[-1]) + 1:] if layer_of(r) is None]
    block = "Block"
    for r in body:
        m = re.findall(r"<class '[\w.]+\.(\w+)'>", r["meta"])
        if len(m) >= 2:
            block = m[1]
            break
    w = Writer()
    n = int(meta["num_layer"])
    fw = [(r, None) for r in pre] + [(r, l) for l in range(n) for r in body] + [(r, None) for r in post]
    step0 = w.cpu
    for i, (r, l) in enumerate(fw):
        if l is not None and (i == 0 or fw[i - 1][1] != l):
            w.ev.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: {block}_{l}",
                         "pid": 1, "tid": 1, "ts": w.cpu, "dur": 0})
            mod = w.ev[-1]
        w.op(r, kind(r), float(r["fw_latency"] or 0))
        if l is not None:
            mod["dur"] = w.cpu - mod["ts"]
    for r, l in reversed(fw):
        bw = float(r["bw_latency"] or 0)
        if bw > 0:
            nm = kind(r).title().replace("_", "")
            w.op(r, kind(r), bw, f"autograd::engine::evaluate_function: {nm}Backward0")
    end = max(w.cpu, w.gpu) + 10
    w.ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
                 "tid": 1, "ts": step0, "dur": end - step0})
    w.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
                 "tid": 1, "ts": w.cpu, "dur": end - 5 - w.cpu})
    gpu = GPU_NAMES.get(os.path.basename(os.path.dirname(os.path.abspath(src))), "")
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": gpu}],
           "traceName": f"neusight {os.path.basename(src)}",
           "neusight": {"source": "sitar-lab/NeuSight@6945927d scripts/asplos/label",
                        "e2e_latency_ms": meta["e2e_latency"], "fw_latency_ms": meta["fw_latency"],
                        "bwall_latency_ms": meta["bwall_latency"], "num_layer": n},
           "traceEvents": w.ev}
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    fsum = sum(float(r["fw_latency"] or 0) for r, _ in fw)
    bsum = sum(float(r["bw_latency"] or 0) for r, _ in fw)
    print(f"{out}: {len(fw)} forward ops, {n} x {block}; forward {fsum:.1f} ms (table "
          f"{meta['fw_latency']:.1f}), backward {bsum:.1f} ms (table {meta['bwall_latency']:.1f}), "
          f"step {fsum + bsum:.1f} ms (table e2e {meta['e2e_latency']:.1f})")


if __name__ == "__main__":
    main()
