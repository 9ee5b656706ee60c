#!/usr/bin/env python3
"""Turns one NeuSight per-operator table into a Kineto trace Reverie reads.

NeuSight (sitar-lab/NeuSight, ASPLOS'25, MIT) measured every torch.fx node
of a transformer with ONE layer (layer 0) on a real GPU, in fp32, and the
whole model's latency with `num_layer` layers. This writes one step of that
model: each op that launches GPU work becomes a cpu_op with its aten name,
"Input Dims" and "Input type" (so the engine's FLOP and byte formulas cost
it), a cudaLaunchKernel and one kernel whose duration is the measured
latency; layer-0 ops repeat num_layer times. Shape-only ops (view, size,
permute, ...) launch nothing and are left out. Training tables add the
backward of each op as a second kernel under an autograd op of the same
name and shapes (its FLOPs are the engine's backward rule, when it has one).

With --layers, each repeated layer's forward runs inside an
"nn.Module: <Block>_<l>" python event (a layer instance, as a trace
recorded with_modules has, docs/models/parallel.md) and each backward
kernel under "autograd::engine::evaluate_function: <op>Backward0" (so the
engine reads it as backward): the form the `parallel` what-if needs to
split layers. Without it the output is as before.

Usage: neusight_to_kineto.py TABLE.csv OUT.json.gz [--gpu NAME] [--forward-only] [--layers]
The GPU name defaults to the table's folder name (e.g. NVIDIA_H100_80GB_HBM3).
"""
import ast
import csv
import gzip
import json
import os
import re
import sys

LAUNCH_US = 5.0  # CPU time per op around its launch; the tables time GPU work

FUNC_OPS = {
    "addmm": "aten::addmm", "matmul": "aten::matmul", "bmm": "aten::bmm", "baddbmm": "aten::baddbmm",
    "add": "aten::add", "mul": "aten::mul", "truediv": "aten::div", "sub": "aten::sub",
    "softmax": "aten::softmax", "gelu": "aten::gelu", "pow": "aten::pow", "tanh": "aten::tanh",
    "where": "aten::where", "layer_norm": "aten::layer_norm", "dropout": "aten::native_dropout",
    "relu": "aten::relu", "silu": "aten::silu", "sigmoid": "aten::sigmoid", "exp": "aten::exp",
    "sqrt": "aten::sqrt", "rsqrt": "aten::rsqrt", "mean": "aten::mean", "sum": "aten::sum",
    "cat": "aten::cat", "masked_fill": "aten::masked_fill", "neg": "aten::neg",
}
METHOD_OPS = {"contiguous": "aten::contiguous", "softmax": "aten::softmax", "masked_fill": "aten::masked_fill",
              "mean": "aten::mean", "sum": "aten::sum", "pow": "aten::pow"}
MODULE_OPS = {"Linear": "aten::linear", "LayerNorm": "aten::layer_norm", "Dropout": "aten::native_dropout",
              "Embedding": "aten::embedding", "GELUActivation": "aten::gelu", "GELU": "aten::gelu",
              "NewGELUActivation": "aten::gelu", "Tanh": "aten::tanh", "ReLU": "aten::relu",
              "Conv1D": "aten::addmm"}


def parse_shapes(text):
    try:
        v = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError):
        return []
    return [list(s) if isinstance(s, (list, tuple)) else [] for s in v] if isinstance(v, (list, tuple)) else []


def parse_shape(text):
    try:
        v = ast.literal_eval(text) if text else ()
    except (ValueError, SyntaxError):
        return []
    return list(v) if isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v) else []


def module_class(row):
    """The class of a call_module row's module, from its nn_module_stack."""
    target = row["target"]
    m = re.search(r"\('" + re.escape(target) + r"', <class '([\w.]+)'>\)", row["meta"])
    return m.group(1).rsplit(".", 1)[-1] if m else ""


def func_name(row):
    t = row["target"]
    m = re.match(r"<(?:built-in )?(?:function|method) (\w+)", t)
    return m.group(1) if m else t


def op_of(row, training):
    """(aten name, input dims) of a row that launches GPU work, else None."""
    kind = row["op"]
    ins = parse_shapes(row["input_shapes"])
    out = parse_shape(row["output_shape"])
    if kind == "call_module":
        cls = module_class(row)
        name = MODULE_OPS.get(cls)
        if not name or (name == "aten::native_dropout" and not training):
            return None
        x = ins[0] if ins else out
        if name == "aten::linear" and x and out:
            return name, [x, [out[-1], x[-1]], [out[-1]]]
        if name == "aten::layer_norm" and x:
            return name, [x, [x[-1]], [x[-1]], [x[-1]]]
        if name == "aten::embedding" and out:
            rows = 1
            for d in x:
                rows *= d
            # The table's row count is not in the trace; the lookup moves out's bytes.
            return name, [[max(rows, 1), out[-1]], x]
        if name == "aten::addmm" and x and out:
            k = x[-1]
            m = 1
            for d in x[:-1]:
                m *= d
            return name, [[out[-1]], [m, k], [k, out[-1]]]
        return name, [x] if x else []
    if kind == "call_function":
        name = FUNC_OPS.get(func_name(row))
    elif kind == "call_method":
        name = METHOD_OPS.get(row["target"])
        if name == "aten::contiguous" and row.get("input_contiguous", "").strip("[]") == "True":
            return None  # already contiguous: no copy kernel
    else:
        return None
    if not name or (name == "aten::native_dropout" and not training):
        return None
    if not ins and not out:
        return None
    return name, ins if ins else [out]


def in_layer0(row):
    blob = row["target"] + " " + row["meta"]
    return bool(re.search(r"(^|[.'])(h|layer|layers|block|blocks)\.0([.']|$)", blob))


def block_class(rows):
    """The class of the repeated layer (GPT2Block, BertLayer), from layer 0's module stack."""
    for r in rows:
        m = re.search(r"\('[\w.]*?(?:h|layer|layers|block|blocks)\.0', <class '([\w.]+)'>\)", r["meta"])
        if m:
            return m.group(1).rsplit(".", 1)[-1]
    return "Layer"


def build(csv_path, gpu, forward_only, layers=False):
    meta_path = csv_path[:-4] + ".json"
    info = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    nlayer = int(info.get("num_layer", 1))
    training = "-train-" in os.path.basename(csv_path)
    rows = list(csv.DictReader(open(csv_path, newline="")))
    seq = []  # (name, dims, fw_us, bw_us)
    layer, before, after = [], [], []
    seen_layer = False
    for r in rows:
        op = op_of(r, training)
        if not op:
            continue
        fw = float(r.get("fw_latency") or 0) * 1e3
        bw = float(r.get("bw_latency") or 0) * 1e3 if training and not forward_only else 0.0
        if fw <= 0 and bw <= 0:
            continue
        item = (op[0], op[1], fw, bw)
        if in_layer0(r):
            layer.append(item)
            seen_layer = True
        elif seen_layer:
            after.append(item)
        else:
            before.append(item)
    seq = before + layer * nlayer + after
    # The layer instance of each item of seq (-1 outside the layers).
    lidx = [-1] * len(before) + [l for l in range(nlayer) for _ in layer] + [-1] * len(after)
    block = block_class(rows)
    ev = []
    cpu_t = 1000.0
    gpu_t = 0.0
    corr = 1

    def launch(name, dims, dur_us, ext):
        nonlocal cpu_t, gpu_t, corr
        types = ["float"] * len(dims)
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": cpu_t,
                   "dur": LAUNCH_US, "args": {"Input Dims": dims, "Input type": types,
                                              "External id": ext}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": cpu_t + 1, "dur": LAUNCH_US - 2, "args": {"correlation": corr, "External id": ext}})
        start = max(gpu_t, cpu_t + LAUNCH_US - 1)
        ev.append({"ph": "X", "cat": "kernel", "name": "neusight_" + name.replace("aten::", ""), "pid": 0,
                   "tid": 7, "ts": round(start, 3), "dur": round(dur_us, 3),
                   "args": {"stream": 7, "device": 0, "correlation": corr, "External id": ext}})
        gpu_t = start + dur_us
        cpu_t += LAUNCH_US
        corr += 1

    step_start = cpu_t
    ext = 1
    module = None
    for i, (name, dims, fw, bw) in enumerate(seq):
        if layers and lidx[i] >= 0 and (i == 0 or lidx[i - 1] != lidx[i]):
            module = {"ph": "X", "cat": "python_function", "name": f"nn.Module: {block}_{lidx[i]}",
                      "pid": 1, "tid": 1, "ts": cpu_t - 0.5, "dur": 0}
            ev.append(module)
        if fw > 0:
            launch(name, dims, fw, ext)
            ext += 1
        if module is not None and lidx[i] >= 0:
            module["dur"] = round(cpu_t - 0.5 - module["ts"], 3)
    for name, dims, fw, bw in reversed(seq):
        if bw > 0:
            if layers:
                op = name.replace("aten::", "").title().replace("_", "")
                ev.append({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": cpu_t - 0.25,
                           "name": f"autograd::engine::evaluate_function: {op}Backward0",
                           "dur": LAUNCH_US + 0.5})
            # The engine costs a backward op by the forward's name with a
            # "_backward" suffix only where it knows one; the kernel is timed
            # as measured either way.
            launch(name + "_backward" if name + "_backward" in BACKWARD_KNOWN else name, dims, bw, ext)
            ext += 1
    # The step ends when the host has waited for the GPU, as a training
    # loop's loss.item() or the profiler's step boundary does.
    sync_end = max(cpu_t, gpu_t) + 5
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
               "ts": cpu_t, "dur": round(sync_end - cpu_t, 3), "args": {"correlation": corr}})
    end = sync_end + 5
    ev.insert(0, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                  "ts": step_start - 1, "dur": end - step_start + 1})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": gpu}],
            "reverie": {"gpu": gpu, "source": "NeuSight table " + os.path.basename(csv_path)},
            "traceEvents": ev}


BACKWARD_KNOWN = {"aten::gelu_backward", "aten::native_layer_norm_backward"}


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    csv_path, out = argv[1], argv[2]
    gpu = os.path.basename(os.path.dirname(os.path.abspath(csv_path))).replace("_", " ")
    forward_only = "--forward-only" in argv
    if "--gpu" in argv:
        gpu = argv[argv.index("--gpu") + 1]
    doc = build(csv_path, gpu, forward_only, "--layers" in argv)
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
