"""One training configuration, in one of three modes.

    python3 bench/gpu/train.py --config resnet50-b64-fp32 --mode time,profile --out DIR
    python3 bench/gpu/train.py --config resnet50-b64-fp32 --mode collect --out DIR

Configs are named in bench/gpu/pairs.json (or given inline with
--config-json). Modes (time and profile may share one process, time first;
collect runs alone because the collector is injected at process start):

- time: no profiler. Warm-up, then at least --iters iterations (and at least
  --min-seconds), each ended by torch.cuda.synchronize(); writes
  DIR/timing.json with every iteration time, the median, and the energy per
  iteration from NVML's total-energy counter (read only).
- profile: torch.profiler with schedule(wait, warmup, active); writes
  DIR/profiler.pt.trace.json.gz (Kineto JSON, gzip).
- collect: run under the Reverie collector (run_all.py sets
  CUDA_INJECTION64_PATH, REVERIE_OUTPUT, REVERIE_SKIP, REVERIE_ITERATIONS);
  every step is an NVTX range `ProfilerStep#N` so the collector finds steps;
  writes DIR/collector_timing.json with the step times under the collector.

The step is the same in every mode: fetch a batch (static on the GPU, or
from a DataLoader), forward, loss, backward, optimizer step, synchronize.
"""

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DEFAULTS = {"batch": 32, "precision": "fp32", "optimizer": "adam", "loader": None,
            "compile": False, "lr": 1e-4}


def load_config(args):
    if args.config_json:
        cfg = json.loads(args.config_json)
        cfg.setdefault("id", args.config or "inline")
    else:
        with open(args.pairs) as f:
            doc = json.load(f)
        if args.config not in doc["configs"]:
            sys.exit("train.py: no config %r in %s" % (args.config, args.pairs))
        cfg = dict(doc["configs"][args.config], id=args.config)
    for k, v in DEFAULTS.items():
        cfg.setdefault(k, v)
    return cfg


def tf32_off(torch):
    """Turns TF32 off; returns the settings as read back. PyTorch 2.9 added
    fp32_precision and deprecated allow_tf32; mixing the two is refused, so
    use the new one where it exists."""
    b = torch.backends
    if hasattr(b, "fp32_precision"):
        b.fp32_precision = "ieee"
        b.cuda.matmul.fp32_precision = "ieee"
        b.cudnn.fp32_precision = "ieee"
        b.cudnn.conv.fp32_precision = "ieee"
        b.cudnn.rnn.fp32_precision = "ieee"
        return {"api": "fp32_precision", "matmul": b.cuda.matmul.fp32_precision,
                "cudnn_conv": b.cudnn.conv.fp32_precision}
    b.cuda.matmul.allow_tf32 = False
    b.cudnn.allow_tf32 = False
    return {"api": "allow_tf32", "matmul": b.cuda.matmul.allow_tf32, "cudnn": b.cudnn.allow_tf32}


def percentile(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--config", help="config id in --pairs")
    ap.add_argument("--config-json", help="an inline config object instead")
    ap.add_argument("--pairs", default=os.path.join(HERE, "pairs.json"))
    ap.add_argument("--mode", required=True,
                    help="time, profile or collect; time,profile runs both in one process")
    ap.add_argument("--out", required=True, help="output folder for this config")
    ap.add_argument("--warmup", type=int, default=15, help="iterations before measuring")
    ap.add_argument("--iters", type=int, default=60, help="timed iterations (>= 50)")
    ap.add_argument("--min-seconds", type=float, default=2.0, help="time mode: at least this long")
    ap.add_argument("--prof-wait", type=int, default=1)
    ap.add_argument("--prof-warmup", type=int, default=3)
    ap.add_argument("--prof-active", type=int, default=5)
    ap.add_argument("--device", default="cuda",
                    help="cuda (default); 'cpu' only checks the script's logic, its numbers mean nothing")
    args = ap.parse_args()
    if not args.config and not args.config_json:
        ap.error("give --config or --config-json")
    modes = args.mode.split(",")
    if any(m not in ("time", "profile", "collect") for m in modes) or (
            "collect" in modes and len(modes) > 1):
        ap.error("--mode: time, profile, time,profile or collect (alone: it runs under the collector)")

    try:
        import torch
    except ImportError:
        sys.exit("train.py: PyTorch is not installed; this script needs python3 with torch and a GPU")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("train.py: no CUDA GPU visible to PyTorch (torch %s); nothing measured" %
                 torch.__version__)
    import workloads
    import nvml_info

    cfg = load_config(args)
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    # FP32 means FP32: TF32 off for matmul and cuDNN in every config, so the
    # AMP pairs compare true FP32 with bf16/fp16 (MODELS.md D).
    tf32_state = tf32_off(torch)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)

    model, static_batch, dataset, loss_fn, info = workloads.build(cfg, dev)
    model.train()
    opt_kw = {"lr": float(cfg["lr"])}
    if cfg["optimizer"] == "adam":
        opt_kw["foreach"] = False
    elif cfg["optimizer"] == "adam-fused":
        opt_kw["fused"] = True
    elif cfg["optimizer"] == "adam-foreach":
        opt_kw["foreach"] = True
    else:
        sys.exit("train.py: unknown optimizer %r" % cfg["optimizer"])
    opt = torch.optim.Adam(model.parameters(), **opt_kw)

    prec = cfg["precision"]
    amp_dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[prec]
    scaler = None
    if prec == "fp16":
        scaler = (torch.amp.GradScaler("cuda") if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler")
                  else torch.cuda.amp.GradScaler())

    fwd = model
    if cfg["compile"]:
        if not hasattr(torch, "compile"):
            sys.exit("train.py: torch.compile needs PyTorch 2.0 or newer (have %s)" % torch.__version__)
        fwd = torch.compile(model)

    it = None
    if cfg["loader"] is not None:
        loader = torch.utils.data.DataLoader(dataset, batch_size=int(cfg["batch"]), shuffle=False,
                                             num_workers=int(cfg["loader"]), pin_memory=cuda,
                                             drop_last=True,
                                             persistent_workers=int(cfg["loader"]) > 0)
        it = iter(loader)

    def next_batch():
        if it is None:
            return static_batch
        inputs, target = next(it)
        if isinstance(inputs, torch.Tensor):
            inputs = (inputs,)
        return (tuple(t.to(dev, non_blocking=True) for t in inputs),
                target.to(dev, non_blocking=True))

    def step():
        inputs, target = next_batch()
        if amp_dtype is not None:
            with torch.autocast(device_type=dev.type, dtype=amp_dtype):
                loss = loss_fn(fwd(*inputs), target)
        else:
            loss = loss_fn(fwd(*inputs), target)
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        sync()

    uuid = None
    if cuda:
        props = torch.cuda.get_device_properties(0)
        uuid = str(getattr(props, "uuid", "")) or None
    result = {
        "config": cfg, "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "tf32": tf32_state,
        "optimizer_kwargs": opt_kw, "warmup": args.warmup,
    }
    result.update(info)

    def write(name, doc):
        path = os.path.join(args.out, name)
        with open(path + ".tmp", "w") as f:
            json.dump(dict(result, **doc), f, indent=1)
        os.replace(path + ".tmp", path)
        return path

    def run_time():
        for _ in range(args.warmup):
            step()
        nvml_before = nvml_info.info(uuid) if cuda else {}
        e0 = nvml_info.energy_mj() if cuda else None
        times = []
        t_start = time.perf_counter()
        while len(times) < args.iters or time.perf_counter() - t_start < args.min_seconds:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e6)
        elapsed = time.perf_counter() - t_start
        e1 = nvml_info.energy_mj() if cuda else None
        med = statistics.median(times)
        doc = {
            "mode": "time", "iterations": len(times), "times_us": [round(t, 1) for t in times],
            "median_us": med, "mean_us": statistics.fmean(times),
            "p10_us": percentile(times, 10), "p90_us": percentile(times, 90),
            "samples_per_s": int(cfg["batch"]) / (med / 1e6),
            "nvml_before": nvml_before, "nvml_after": nvml_info.info(uuid) if cuda else {},
        }
        if e0 is not None and e1 is not None and e1 > e0:
            joules = (e1 - e0) / 1000.0
            doc.update({"energy_j_per_iter": joules / len(times), "avg_power_w": joules / elapsed})
        else:
            doc["energy_note"] = "no NVML energy counter: %s" % (
                nvml_before.get("error") or "counter did not advance")
        if cuda:
            doc["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        write("timing.json", doc)
        return "median %.1f us" % med

    def run_profile():
        from torch.profiler import ProfilerActivity, profile, schedule

        for _ in range(args.warmup):
            step()
        final = os.path.join(args.out, "profiler.pt.trace.json.gz")
        raw = os.path.join(args.out, "profiler.pt.trace.json")

        def on_ready(p):
            # export_chrome_trace writes plain JSON; gzip it here so every
            # PyTorch version gives the same file.
            p.export_chrome_trace(raw)
            with open(raw, "rb") as src, gzip.open(final, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
            os.unlink(raw)

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        sched = schedule(wait=args.prof_wait, warmup=args.prof_warmup, active=args.prof_active,
                         repeat=1)
        with profile(activities=acts, schedule=sched, on_trace_ready=on_ready) as prof:
            for _ in range(args.prof_wait + args.prof_warmup + args.prof_active):
                step()
                prof.step()
        write("profiler.json", {"mode": "profile", "trace": os.path.basename(final),
                                "profiled_steps": args.prof_active,
                                "trace_bytes": os.path.getsize(final)})
        return final

    def run_collect():
        skip = int(os.environ.get("REVERIE_SKIP", "3"))
        keep = int(os.environ.get("REVERIE_ITERATIONS", "5"))
        nvtx = torch.cuda.nvtx if cuda else None
        times = []
        # Warm-up steps are named too: the collector arms at start and skips
        # REVERIE_SKIP named steps (run_all.py sets it to cover the warm-up).
        for i in range(skip + keep + 3):
            if nvtx:
                nvtx.range_push("ProfilerStep#%d" % i)
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e6)
            if nvtx:
                nvtx.range_pop()
        window = times[skip:skip + keep]
        return write("collector_timing.json", {
            "mode": "collect", "times_us": [round(t, 1) for t in times], "skip": skip,
            "kept": keep, "window_median_us": statistics.median(window) if window else None,
            "collector": os.environ.get("CUDA_INJECTION64_PATH"),
            "output": os.environ.get("REVERIE_OUTPUT")})

    for mode in modes:
        what = {"time": run_time, "profile": run_profile, "collect": run_collect}[mode]()
        print("%s %s: %s" % (cfg["id"], mode, what), flush=True)


if __name__ == "__main__":
    main()
