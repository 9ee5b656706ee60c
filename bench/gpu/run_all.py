"""Run the ground-truth matrix into one output folder (see run_all.sh).

    python3 bench/gpu/run_all.py --out DIR [resnet50 gpt2 dlrm nccl ...]

For every config the pairs of the chosen workloads need: one process that
measures without a profiler and then captures a torch.profiler trace
(`--mode time,profile`), and, when REVERIE_COLLECTOR names
libreverie-collector.so, a second one under the collector. Then the NCCL
sweep. Each command, its exit status and its seconds go into
DIR/manifest.json, rewritten after every command so a cut-off run keeps what
it measured; running again with more workloads adds to the same folder.
Nothing here changes the GPU's settings.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
WORKLOADS = ["resnet50", "gpt2", "dlrm"]


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except Exception:
        return None


def find_cupti(collector):
    """(libcupti path for NVTX_INJECTION64_PATH, folder to add to
    LD_LIBRARY_PATH or None): the libcupti the collector links, else the one
    pip's PyTorch wheels bundle (nvidia/*/lib), else the CUDA toolkit's."""
    if os.environ.get("REVERIE_CUPTI"):
        return os.environ["REVERIE_CUPTI"], None
    try:
        out = subprocess.run(["ldd", collector], capture_output=True, text=True, timeout=10).stdout
        m = re.search(r"libcupti\.so[^ ]*\s*=>\s*(\S+)", out)
        if m and os.path.exists(m.group(1)):
            return m.group(1), None
    except Exception:
        pass
    pats = [os.path.join(p, "nvidia", "*", "lib", "libcupti.so*") for p in sys.path if p]
    pats += [os.path.join(p, "nvidia", "*", "*", "lib", "libcupti.so*") for p in sys.path if p]
    pats += ["/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*", "/usr/local/cuda/lib64/libcupti.so*",
             "/usr/local/cuda/lib/libcupti.so*", "/usr/lib/x86_64-linux-gnu/libcupti.so*"]
    for pat in pats:
        hits = sorted(glob.glob(pat), key=len)
        if hits:
            return hits[0], os.path.dirname(hits[0])
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairs", default=os.path.join(HERE, "pairs.json"))
    ap.add_argument("--only", help="regex: run only config ids that match")
    ap.add_argument("--timeout", type=int, default=420, help="seconds per command")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--modes", default="time,profile,collect")
    ap.add_argument("--device", default="cuda",
                    help="cpu only checks this runner's logic (no NCCL, numbers mean nothing)")
    ap.add_argument("what", nargs="*", help="resnet50 gpt2 dlrm nccl (default: all)")
    args = ap.parse_args()
    what = args.what or WORKLOADS + ["nccl"]
    for w in what:
        if w not in WORKLOADS + ["nccl"]:
            sys.exit("run_all: unknown workload %r (have %s, nccl)" % (w, ", ".join(WORKLOADS)))

    try:
        import torch
    except ImportError:
        sys.exit("run_all: PyTorch is not installed for %s; nothing measured" % sys.executable)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("run_all: no CUDA GPU visible to PyTorch (torch %s); nothing measured" %
                 torch.__version__)
    import nvml_info

    with open(args.pairs) as f:
        doc = json.load(f)
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    shutil.copy(args.pairs, os.path.join(args.out, "pairs.json"))
    mpath = os.path.join(args.out, "manifest.json")
    manifest = {}
    if os.path.exists(mpath):
        with open(mpath) as f:
            manifest = json.load(f)
    props = torch.cuda.get_device_properties(0) if cuda else None
    manifest.update({
        "updated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "python": sys.version.split()[0], "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(0) if cuda else "cpu (logic check)",
        "gpu_memory": props.total_memory if cuda else None,
        "nvml": nvml_info.info(str(getattr(props, "uuid", "")) or None) if cuda else None,
        "repo_commit": git_commit(),
    })
    try:
        import torchvision
        manifest["torchvision"] = torchvision.__version__
    except ImportError:
        manifest["torchvision"] = None
    manifest.setdefault("commands", [])

    def save():
        with open(mpath + ".tmp", "w") as f:
            json.dump(manifest, f, indent=1)
        os.replace(mpath + ".tmp", mpath)

    def run(cmd, log, env=None):
        t0 = time.time()
        with open(log, "w") as lf:
            try:
                rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env,
                                    timeout=args.timeout, cwd=REPO).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        entry = {"command": " ".join(cmd), "rc": rc, "seconds": round(time.time() - t0, 1),
                 "log": os.path.relpath(log, args.out)}
        if env is not None:
            entry["env"] = {k: env[k] for k in sorted(env) if k.startswith(("REVERIE_", "CUDA_INJ", "NVTX_", "LD_LIB"))}
        manifest["commands"].append(entry)
        save()
        print("%-8s %6.1fs  %s" % (rc, entry["seconds"], entry["command"]), flush=True)
        return rc

    ids = []
    for p in doc["pairs"]:
        if p["workload"] in what:
            for c in (p["baseline"], p["target"]):
                if c not in ids and (not args.only or re.search(args.only, c)):
                    ids.append(c)
    collector = os.environ.get("REVERIE_COLLECTOR")
    modes = args.modes.split(",")
    if "collect" in modes and not collector:
        print("run_all: REVERIE_COLLECTOR is not set; no collector runs", flush=True)
        modes.remove("collect")
    if collector and not os.path.exists(collector):
        sys.exit("run_all: REVERIE_COLLECTOR=%s does not exist" % collector)
    cupti, cupti_dir = find_cupti(collector) if collector else (None, None)
    manifest["collector"] = collector
    manifest["nvtx_injection"] = cupti
    if collector and not cupti:
        print("run_all: no libcupti found for NVTX step ranges; the collector keeps the whole run",
              flush=True)

    py = sys.executable
    first = len(manifest["commands"])
    for cid in ids:
        out = os.path.join(args.out, "configs", cid)
        base = [py, os.path.join(HERE, "train.py"), "--pairs", args.pairs, "--config", cid,
                "--out", out, "--warmup", str(args.warmup), "--iters", str(args.iters),
                "--device", args.device]
        if not cuda:
            base += ["--min-seconds", "0", "--prof-warmup", "1", "--prof-active", "2"]
        inproc = [m for m in ("time", "profile") if m in modes]
        if inproc:
            run(base + ["--mode", ",".join(inproc)],
                os.path.join(args.out, "logs", "%s.%s.log" % (cid, "+".join(inproc))))
        if "collect" in modes:
            log = os.path.join(args.out, "logs", "%s.collect.log" % cid)
            env = dict(os.environ)
            env.update({"CUDA_INJECTION64_PATH": os.path.abspath(collector),
                        "REVERIE_OUTPUT": os.path.abspath(os.path.join(out, "collector.json.gz")),
                        "REVERIE_SKIP": str(args.warmup + 2), "REVERIE_ITERATIONS": "5",
                        "REVERIE_JOB": "ground-truth-" + cid})
            env.pop("REVERIE_SERVER", None)
            if cupti:
                env["NVTX_INJECTION64_PATH"] = cupti
            if cupti_dir:  # the collector's libcupti is not on the loader's path
                env["LD_LIBRARY_PATH"] = cupti_dir + ":" + env.get("LD_LIBRARY_PATH", "")
            run(base + ["--mode", "collect"], log, env)
    if "nccl" in what and cuda:
        run([py, os.path.join(HERE, "nccl_sweep.py"), "--out",
             os.path.join(args.out, "nccl_allreduce.json")],
            os.path.join(args.out, "logs", "nccl_sweep.log"))
    mine = manifest["commands"][first:]
    failed = [c for c in mine if c["rc"] != 0]
    print("run_all: %d commands, %d failed; results in %s" % (len(mine), len(failed), args.out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
