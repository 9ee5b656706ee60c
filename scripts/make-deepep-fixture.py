#!/usr/bin/env python3
"""Derive tests/data/collectives/dlrm-worker0-deepep.json.gz.

Source: param/dlrm-8rank/worker0.kineto.json.gz of the shared traces, i.e.
facebookresearch/param @ 37f542b3, et_replay/tests/data/dlrm_kineto.tar.gz
(MIT license). Only names change: DLRM's five NCCL send/recv kernels (its
embedding all-to-alls) take the names of DeepEP's expert-parallel kernels
(deep_ep::intranode::notify_dispatch / dispatch / combine, the pattern seen
on DeepSeek-V3 ranks in deepseek-ai/profile-data; written here, not copied),
and the "nccl:all_to_all" annotations around their launches become
"deep_ep::Buffer::dispatch"/"combine" (DeepEP records no message size).
The three NCCL all-reduces (the gradients) stay. Timing, streams,
correlations and every other event are the original's.

usage: make-deepep-fixture.py SRC.json.gz DST.json.gz
"""
import gzip
import json
import sys

NAMES = [
    "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, "
    "int, int, int, bool const*, int*, int*, int, int, int, int**, int)",
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, "
    "int*, int*, int4 const*, float const*, long const*, float const*, bool const*, int const*, "
    "int, int, int, int, int, int, void**, int, int, int)",
    "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*, "
    "__nv_bfloat16 const*, float const*, int const*, int const*, int const*, int const*, int, "
    "int, int, void**, int, int, int)",
]


def main(src, dst):
    doc = json.load(gzip.open(src, "rt"))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    k = 0
    notes = 0
    for e in events:
        name = e.get("name", "")
        if e.get("cat") == "kernel" and name.startswith("ncclKernel_SendRecv"):
            # notify, dispatch, combine, then dispatch and combine again.
            e["name"] = NAMES[0] if k == 0 else NAMES[1 + (k + 1) % 2]
            k += 1
        elif e.get("cat") == "user_annotation" and name == "nccl:all_to_all":
            e["name"] = "deep_ep::Buffer::dispatch" if notes % 2 == 0 else "deep_ep::Buffer::combine"
            notes += 1
    if k != 5:
        sys.exit("expected 5 NCCL send/recv kernels, found %d" % k)
    with gzip.GzipFile(dst, "wb", 9, mtime=0) as out:
        out.write(json.dumps(doc, separators=(",", ":")).encode())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
