"""What every Python CLI test shares: where the source and the binary are
(RV_SOURCE_DIR, RV_BIN_DIR, set by CTest), one line per check, and the
exit code (0 all passed, 1 any failed; a test skips with 77 itself)."""
import json
import os
import subprocess

SRC = os.environ.get("RV_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("RV_BIN_DIR") or os.path.join(SRC, "build/bin"), "reverie")
failures = []


def check(ok, what):
    """Prints the check's line; a failed one counts against the exit code."""
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def reverie(args, timeout=600):
    """Runs reverie with args and returns its JSON answer; raises with its
    stderr when it fails."""
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("reverie %s: %s" % (" ".join(args[:2]), p.stderr.strip()))
    return json.loads(p.stdout)


def finish():
    """The exit code after the checks, with the count."""
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0
