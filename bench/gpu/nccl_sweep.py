"""NCCL all-reduce size sweep on one GPU: a size -> time table (JSON).

    python3 bench/gpu/nccl_sweep.py --out DIR/nccl_allreduce.json

Two paths, each timed with CUDA events around --reps back-to-back calls:
- torch.distributed with the nccl backend, one process (world size 1);
- torch.cuda.nccl.all_reduce (NCCL without a process group) on the one GPU.

With one rank NCCL moves no bytes between GPUs, so the table gives the
per-call floor (launch + NCCL's fixed cost) and the single-GPU copy cost, not
link bandwidth; a multi-GPU machine runs the same script under torchrun to get
a table for n ranks (the script reads RANK/WORLD_SIZE when they are set).
"""

import argparse
import json
import os
import socket
import statistics
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_calls(torch, fn, reps, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(3):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1000.0 / reps)  # ms -> us per call
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-bytes", type=int, default=1 << 10)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--factor", type=int, default=4, help="size step (x4: 1 KiB, 4 KiB, ...)")
    args = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        sys.exit("nccl_sweep.py: PyTorch is not installed")
    if not torch.cuda.is_available():
        sys.exit("nccl_sweep.py: no CUDA GPU visible to PyTorch; nothing measured")

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    doc = {"gpu": torch.cuda.get_device_name(local), "torch": torch.__version__,
           "cuda": torch.version.cuda, "world_size": world, "dtype": "float32",
           "op": "all_reduce(sum)", "timing": "CUDA events around back-to-back calls, median of 3",
           "rows": []}
    try:
        doc["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        doc["nccl"] = None

    pg_ok = False
    try:
        dist.init_process_group("nccl", rank=rank, world_size=world)
        pg_ok = True
    except Exception as e:
        doc["distributed_error"] = str(e)

    size = args.min_bytes
    while size <= args.max_bytes:
        n = size // 4
        t = torch.ones(n, dtype=torch.float32, device="cuda")
        reps = 50 if size <= (1 << 24) else 10
        row = {"bytes": size}
        if pg_ok:
            row["distributed_us"] = time_calls(torch, lambda: dist.all_reduce(t), reps)
        if world == 1:
            try:
                row["nccl_us"] = time_calls(torch, lambda: torch.cuda.nccl.all_reduce([t]), reps)
            except Exception as e:
                row["nccl_error"] = str(e)
        best = row.get("distributed_us", row.get("nccl_us"))
        if best:
            row["algbw_gbps"] = size / (best * 1e-6) / 1e9
            # NCCL's bus bandwidth (nccl-tests PERFORMANCE.md): algbw * 2(n-1)/n.
            row["busbw_gbps"] = row["algbw_gbps"] * 2.0 * (world - 1) / world
        doc["rows"].append(row)
        del t
        size *= args.factor
    if pg_ok:
        dist.destroy_process_group()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
        for r in doc["rows"]:
            print("%12d B  dist %s us  nccl %s us" % (r["bytes"], r.get("distributed_us"),
                                                      r.get("nccl_us")))
    return 0 if doc["rows"] and (pg_ok or world == 1) else 1


if __name__ == "__main__":
    sys.exit(main())
