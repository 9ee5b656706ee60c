#!/usr/bin/env python3
"""Copies the public traces the tests read into tests/data/public.

    python3 scripts/make-public-traces.py SHARED_TRACES_DIR [OUT_DIR]

SHARED_TRACES_DIR is the shared public traces folder (../shared/traces
beside a checkout); OUT_DIR defaults to tests/data/public. Each file keeps
its relative name. Small files are copied byte for byte. The few traces
over 1 MiB are rewritten so that they fit the repository's per-file limit
without losing an event or a value: the whitespace between JSON tokens is
dropped (every token, numbers included, keeps its text) and the result
gzip'ed at level 9 with no name and no time stamp, so the output is the
same on every run. Traces that still do not fit stay in the shared folder
only (LARGE below): their test cases skip when it is absent.
Sources and licenses: tests/data/public/README.md.
"""
import gzip
import json
import os
import re
import shutil
import sys

MAX_BYTES = 1 << 20

# Every file a test names, except the large ones below and
# kineto/resnet50-v100-workers0.pt.trace.json.gz (data/samples has it).
FILES = [
    "chakra/et-1.0.2-allgather.json.gz",
    "ground-truth/summary_power_v100.csv",
    "hta/a100-2rank-nccl.json.gz",
    "hta/critical-path-alexnet.json.gz",
    "hta/critical-path-simple-add.json.gz",
    "hta/critical-path-simple-add.reference-overlay.json.gz",
    "hta/cuda-event-sync-multi-stream.json.gz",
    "hta/cuda-event-sync.json.gz",
    "hta/edge/amd-mi250-rocm62.json.gz",
    "hta/edge/cpu-only.json.gz",
    "hta/edge/cupti-counters-no-kernels.json.gz",
    "hta/edge/gp100-gpu-user-annotation.json.gz",
    "hta/edge/large-integers.json.gz",
    "hta/edge/legacy-categories.json.gz",
    "hta/edge/no-distributed-info.json.gz",
    "hta/edge/rank-non-gpu.json.gz",
    "hta/edge/triton-driver-launch.json.gz",
    "hta/simple-add.et.json.gz",
    "hta/simple-add.kineto.json.gz",
    "hta/v100-1rank-ns-resolution.json.gz",
    "kineto/h100-sync-after-fix.json",
    "kineto/h100-sync-before-fix.json",
    "kineto/resnet50-v100-workers4.pt.trace.json.gz",
    "param/linear-2080ti.et.json.gz",
    "param/linear-2080ti.kineto.json.gz",
    "param/resnet-2080ti.et.json.gz",
    "tracelens/h100-bert-small-forward.json.gz",
    "tracelens/h100-falconsai-vit-forward.json.gz",
    "tracelens/mi300-qwen-forward.json.gz",
    "tracelens/mi300-vllm-decode-full-graph-exec.json.gz",
] + [f"param/dlrm-8rank/worker{r}.{k}.json.gz" for r in range(8) for k in ("kineto", "et")]

# Over 1 MiB even rewritten: left in the shared folder.
LARGE = [
    "hta/a100-rank0-of-16-five-streams.json.gz",
    "param/resnet-2080ti.kineto.json.gz",
]


# A JSON string, or a run of anything else but whitespace and quotes.
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s"]+')


def rewrite(src, dst):
    # Whitespace outside strings is dropped token by token: numbers keep
    # their text (a parse and dump would round 1712195495505582.988 to a
    # double, and the reader keeps nanoseconds).
    with gzip.open(src, "rt", encoding="utf-8") as f:
        text = "".join(TOKEN.findall(f.read()))
    json.loads(text)  # still one valid document
    with open(dst, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as z:
            z.write(text.encode("utf-8"))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src_root = sys.argv[1]
    out_root = sys.argv[2] if len(sys.argv) == 3 else "tests/data/public"
    total = 0
    for rel in FILES:
        src, dst = os.path.join(src_root, rel), os.path.join(out_root, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.getsize(src) <= MAX_BYTES:
            shutil.copyfile(src, dst)
        else:
            rewrite(src, dst)
        size = os.path.getsize(dst)
        if size > MAX_BYTES:
            sys.exit(f"{rel}: {size} bytes, over the {MAX_BYTES}-byte limit")
        total += size
        print(f"{size:9d}  {rel}")
    print(f"{total:9d}  in all")


if __name__ == "__main__":
    main()
