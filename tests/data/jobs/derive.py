#!/usr/bin/env python3
"""Derives the multi-rank job fixtures in this folder from one real trace.

Source: hta/a100-2rank-nccl.json.gz of the shared traces (rank 0 of 2,
A100, from facebookresearch/HolisticTraceAnalysis @ f4d0062c,
tests/data/nccl_parser_config/nccl_data.json.gz, MIT license).

Each rank is the source's first profiler step (ProfilerStep#4: its events
that start inside it; flow events of kind fwdbwd and the log lines
dropped), with distributedInfo naming the rank and the world, every time
shifted by a per-rank clock offset, and the NCCL kernels' (and their
record_param_comms ops') process-group args rewritten as below. Kernel
durations, streams and correlations are the source's.

  pg2/rank{0,1}: a 2-rank job, one world group "0". Every NCCL kernel
    carries a sequence number (Seq, 1..7 in the step). Rank 1's clock is
    2345.678 us ahead. Rank 0's window starts after the first broadcast
    (its trace lacks collective 1), so matching by order would pair the
    wrong collectives; matching by sequence number pairs the right ones.
  sub4/rank{0..3}: a 4-rank job. The two broadcasts are on the world
    group "0" [0, 1, 2, 3]; the first four all-reduces on the pairs, group
    "1" [0, 1] and group "2" [2, 3] (tensor-parallel pairs); the fifth
    all-reduce becomes a point-to-point SendRecv on the world group: rank
    0 sends to 2 and rank 1 to 3 (Dst Rank / Src Rank). Rank r's clock is
    r * 1234.5 us ahead.

Usage: python3 derive.py SHARED_TRACES_DIR OUT_DIR
"""
import copy
import gzip
import json
import os
import sys

STEP = "ProfilerStep#4"


def load(src):
    with gzip.open(src, "rt") as f:
        return json.load(f)


def window(d):
    ev = d["traceEvents"]
    step = next(e for e in ev if e.get("name") == STEP)
    t0, t1 = step["ts"], step["ts"] + step["dur"]
    keep = []
    for e in ev:
        if e.get("cat") == "fwdbwd":
            continue
        if "ts" in e and not (t0 <= float(e["ts"]) <= t1):
            continue
        keep.append(e)
    return keep


def nccl_kernels(ev):
    k = [e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")]
    return sorted(k, key=lambda e: e["ts"])


def by_external(ev):
    m = {}
    for e in ev:
        x = e.get("args", {}).get("External id")
        if x is not None and e.get("name") == "record_param_comms":
            m.setdefault(x, []).append(e)
    return m


def set_group(e, name, ranks):
    a = e["args"]
    a["Process Group Name"] = name
    a["Process Group Ranks"] = "[" + ", ".join(str(r) for r in ranks) + "]"
    a["Group size"] = len(ranks)
    if "Global rank start" in a:
        a["Global rank start"] = ranks[0]
        a["Global rank stride"] = ranks[1] - ranks[0] if len(ranks) > 1 else 1


def write(d, ev, rank, world, pgs, offset_us, path):
    out = {k: v for k, v in d.items() if k not in ("traceEvents", "INFO", "traceName")}
    out["distributedInfo"] = dict(d["distributedInfo"], rank=rank, world_size=world,
                                  pg_count=len(pgs), pg_config=pgs)
    for e in ev:
        if "ts" in e:
            e["ts"] = round(float(e["ts"]) + offset_us, 3)
    out["traceEvents"] = ev
    with gzip.GzipFile(path, "wb", 9, mtime=0) as f:
        f.write(json.dumps(out, separators=(",", ":")).encode())


def pg(name, desc, ranks):
    return {"pg_name": name, "pg_desc": desc, "backend_config": "cuda:nccl",
            "pg_size": len(ranks), "ranks": ranks}


def pg2(d, base, out):
    pgs = [pg("0", "default_pg", [0, 1])]
    for rank in (0, 1):
        ev = copy.deepcopy(base)
        ks = nccl_kernels(ev)
        comms = by_external(ev)
        for i, k in enumerate(ks):
            for e in [k] + comms.get(k["args"].get("External id"), []):
                e["args"]["Seq"] = i + 1
        if rank == 0:  # the window starts after collective 1
            first = ks[0]
            drop = {id(e) for e in [first] + comms.get(first["args"].get("External id"), [])}
            ev = [e for e in ev if id(e) not in drop]
        write(d, ev, rank, 2, pgs, 2345.678 * rank, os.path.join(out, "pg2-rank%d.json.gz" % rank))


def sub4(d, base, out):
    pgs = [pg("0", "default_pg", [0, 1, 2, 3]), pg("1", "tp_pair", [0, 1]),
           pg("2", "tp_pair", [2, 3])]
    for rank in range(4):
        ev = copy.deepcopy(base)
        ks = nccl_kernels(ev)
        comms = by_external(ev)
        pair = [0, 1] if rank < 2 else [2, 3]
        ar = 0
        for k in ks:
            group = [k] + comms.get(k["args"].get("External id"), [])
            if "Broadcast" in k["name"]:
                for e in group:
                    set_group(e, "0", [0, 1, 2, 3])
                continue
            ar += 1
            if ar <= 4:
                for e in group:
                    set_group(e, "1" if rank < 2 else "2", pair)
                continue
            # The fifth all-reduce: a send (ranks 0, 1) or recv (2, 3).
            peer = rank + 2 if rank < 2 else rank - 2
            k["name"] = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
            for e in group:
                set_group(e, "0", [0, 1, 2, 3])
                e["args"]["Collective name"] = "send" if rank < 2 else "recv"
                e["args"]["Dst Rank" if rank < 2 else "Src Rank"] = peer
        write(d, ev, rank, 4, pgs, 1234.5 * rank, os.path.join(out, "sub4-rank%d.json.gz" % rank))


def main():
    src = os.path.join(sys.argv[1], "hta/a100-2rank-nccl.json.gz")
    d = load(src)
    base = window(d)
    pg2(d, base, sys.argv[2])
    sub4(d, base, sys.argv[2])


if __name__ == "__main__":
    main()
