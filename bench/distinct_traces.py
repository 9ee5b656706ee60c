#!/usr/bin/env python3
"""Writes N distinct traces derived from real ones, for store and fleet
benchmarks.

Usage: distinct_traces.py OUTDIR N SOURCE [SOURCE ...]

Trace i is SOURCE[i % len(SOURCE)] with its timestamps shifted by i ms and a
top-level "reverie_variant": i, so every file has its own content hash while
its events, steps and platform (deviceProperties) stay those of a real run.
The sources keep their platforms: pass traces from several GPUs to get a
store with several platforms. Files are written gzip-compressed as
OUTDIR/trace-NNNNN.json.gz; existing files are kept, so a second call with a
larger N only adds the missing ones."""
import gzip
import json
import os
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def shifted(doc, i):
    out = dict(doc)
    shift = i * 1000  # microseconds
    events = []
    for e in doc.get("traceEvents", []):
        if isinstance(e, dict) and isinstance(e.get("ts"), (int, float)):
            e = dict(e)
            e["ts"] = e["ts"] + shift
        events.append(e)
    out["traceEvents"] = events
    out["reverie_variant"] = i
    return out


def main(argv):
    if len(argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    outdir, n, sources = argv[1], int(argv[2]), argv[3:]
    os.makedirs(outdir, exist_ok=True)
    docs = [load(s) for s in sources]
    for i in range(n):
        path = os.path.join(outdir, "trace-%05d.json.gz" % i)
        if os.path.exists(path):
            continue
        tmp = path + ".tmp"
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
            json.dump(shifted(docs[i % len(docs)], i), f, separators=(",", ":"))
        os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
