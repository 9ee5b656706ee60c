#!/usr/bin/env python3
"""The engine's layout (docs/internals/engine.md): no .c or .h at the top of
engine/, one folder per pipeline step, and a folder includes only from
itself or the folders before it, always with the folder written
(#include "graph/rv_graph.h"). Exit 0 when the tree keeps the rules, 1 with
each violation. Usage: test_layout.py [ENGINE_DIR]"""
import os
import re
import sys

ORDER = ["util", "hw", "trace", "cost", "reader", "graph", "simulate", "ingest", "whatif",
         "models", "run", "job", "advise", "export"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def check(engine):
    bad = []
    for name in sorted(os.listdir(engine)):
        path = os.path.join(engine, name)
        if os.path.isfile(path) and name.endswith((".c", ".h")):
            bad.append("%s: a source file at engine/'s top, outside a folder" % name)
        elif os.path.isdir(path) and name not in ORDER:
            bad.append("%s/: a folder outside the pipeline order %s" % (name, " ".join(ORDER)))
    for folder in ORDER:
        d = os.path.join(engine, folder)
        if not os.path.isdir(d):
            continue
        if not os.path.isfile(os.path.join(d, "README.md")):
            bad.append("%s/: no README.md says what it owns" % folder)
        rank = ORDER.index(folder)
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    where = "%s/%s:%d" % (folder, name, lineno)
                    if "/" not in inc:
                        bad.append('%s: #include "%s" without its folder' % (where, inc))
                        continue
                    top = inc.split("/", 1)[0]
                    if top not in ORDER:
                        bad.append('%s: #include "%s" from outside the engine' % (where, inc))
                    elif not os.path.isfile(os.path.join(engine, inc)):
                        bad.append('%s: #include "%s" names no file' % (where, inc))
                    elif ORDER.index(top) > rank:
                        bad.append('%s: #include "%s": %s/ comes after %s/' % (where, inc, top, folder))
    return bad


def check_docs(engine):
    """Every folder is in the README's layout table and in engine.md's map,
    so the two a newcomer reads first cannot fall behind the tree."""
    bad = []
    root = os.path.dirname(engine)
    readme = os.path.join(root, "README.md")
    internals = os.path.join(root, "docs", "internals", "engine.md")
    for doc, pattern in ((readme, "| `engine/%s/` |"), (internals, "| %s | ")):
        if not os.path.isfile(doc):
            bad.append("%s: missing" % os.path.relpath(doc, root))
            continue
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for folder in ORDER:
            if os.path.isdir(os.path.join(engine, folder)) and pattern % folder not in text:
                bad.append("%s: no row for engine/%s/" % (os.path.relpath(doc, root), folder))
    return bad


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    engine = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "engine")
    bad = check(os.path.normpath(engine)) + check_docs(os.path.normpath(engine))
    for b in bad:
        print("layout: " + b)
    print("layout: %d violation(s)" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
