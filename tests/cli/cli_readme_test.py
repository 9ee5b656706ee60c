#!/usr/bin/env python3
"""Every example in README.md runs as written on the bundled sample.

Reads the README's ```sh blocks, joins continued lines, and runs each
command line with bash in a scratch directory where build/bin is the built
binaries (RV_BIN_DIR) and data/ and tests/ the checkout's: variables a block assigns
(TRACE=..., SAMPLE=...) carry to its later lines, files a line writes are
there for the next ones. Lines that talk to the service (127.0.0.1:8080)
run against a reveried started here on a free port with its embedded
PostgreSQL under a scratch home; curl gets --fail-with-body so an HTTP
error fails the line. Each line must exit 0.

Not run, and listed: `make ...` (the build and CI themselves), and lines
naming a file the README says is not bundled (an execution trace
`ET.json.gz` / `run.et.json.gz`, a training script). Without PostgreSQL
the service lines are listed as skipped and the rest still runs.

Exit 0 = pass, 1 = a line failed, 77 = skipped (binaries not built).
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
SRC = os.environ.get("RV_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
BIN = os.environ.get("RV_BIN_DIR") or os.path.join(SRC, "build", "bin")
NOT_BUNDLED = ("ET.json.gz", "run.et.json.gz", "train.py")
PORT_IN_README = "127.0.0.1:8080"


def sh_blocks(text):
    """The command lines of every ```sh block, continuations joined."""
    blocks = []
    for body in re.findall(r"```sh\n(.*?)```", text, re.S):
        lines, cur = [], ""
        for raw in body.splitlines():
            if raw.rstrip().endswith("\\"):
                cur += raw.rstrip()[:-1] + " "
                continue
            cur += raw
            if cur.strip() and not cur.strip().startswith("#"):
                lines.append(cur.strip())
            cur = ""
        blocks.append(lines)
    return blocks


def have_postgres():
    if os.environ.get("REVERIE_PG_BINDIR") or os.environ.get("REVERIE_DATABASE_URL"):
        return True
    if glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        return True
    return shutil.which("initdb") is not None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_server(home, port):
    log = open(os.path.join(home, "reveried.log"), "w")
    srv = subprocess.Popen([os.path.join(BIN, "reveried"), "--port", str(port), "--home", home,
                            "--workers", "2", "--http-threads", "2"],
                           stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        if srv.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return srv, log
        except OSError:
            pass
        time.sleep(0.1)
    srv.kill()
    srv.wait()
    log.close()
    with open(os.path.join(home, "reveried.log"), errors="replace") as f:
        print("reveried did not get ready:\n" + f.read()[-3000:])
    return None, None


def stop_server(srv, log, home):
    srv.send_signal(signal.SIGTERM)
    try:
        srv.wait(timeout=60)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.wait()
    log.close()
    data = os.path.join(home, "pg", "data")
    if os.path.exists(os.path.join(data, "postmaster.pid")):
        bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        pg_ctl = os.path.join(bindirs[-1], "pg_ctl") if bindirs else shutil.which("pg_ctl")
        if pg_ctl:
            cmd = [pg_ctl, "-D", data, "stop", "-m", "fast", "-w"]
            if os.geteuid() == 0:
                cmd = ["runuser", "-u", "postgres", "--"] + cmd
            subprocess.run(cmd, capture_output=True, timeout=60)


def main():
    for b in ("reverie", "reveried"):
        if not os.access(os.path.join(BIN, b), os.X_OK):
            print(f"skip: {os.path.join(BIN, b)} is not built")
            return SKIP
    with open(os.path.join(SRC, "README.md")) as f:
        blocks = sh_blocks(f.read())
    work = tempfile.mkdtemp(prefix="rv_readme_")
    os.chmod(work, 0o755)  # the embedded cluster runs as an unprivileged user
    os.makedirs(os.path.join(work, "build"))
    os.symlink(os.path.abspath(BIN), os.path.join(work, "build", "bin"))
    for d in ("data", "tests"):
        os.symlink(os.path.abspath(os.path.join(SRC, d)), os.path.join(work, d))
    home = os.path.join(work, "home")
    os.makedirs(home)
    os.chmod(home, 0o755)
    srv = log = None
    port = None
    if any(PORT_IN_README in line for b in blocks for line in b):
        if have_postgres():
            port = free_port()
            srv, log = start_server(home, port)
            if not srv:
                shutil.rmtree(work, ignore_errors=True)
                return 1
        else:
            print("note: no PostgreSQL: the service examples are not run")
    ran, skipped, failed = 0, [], []
    try:
        for block in blocks:
            env = dict(os.environ)
            for line in block:
                if line.startswith("make "):
                    skipped.append((line, "the build and CI themselves"))
                    continue
                missing = [f for f in NOT_BUNDLED if re.search(r"(^|[\s@/])" + re.escape(f), line)]
                if missing:
                    skipped.append((line, f"needs {missing[0]}, not bundled"))
                    continue
                m = re.match(r"^([A-Z_]+)=(\S+)$", line)
                if m:
                    env[m.group(1)] = m.group(2)
                    continue
                cmd = line
                if PORT_IN_README in cmd:
                    if not srv:
                        skipped.append((line, "no service (PostgreSQL missing)"))
                        continue
                    cmd = cmd.replace(PORT_IN_README, f"127.0.0.1:{port}")
                cmd = re.sub(r"(^|\s)curl ", r"\1curl --fail-with-body ", cmd)
                t0 = time.time()
                out = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True,
                                     text=True, timeout=600)
                ran += 1
                status = "ok" if out.returncode == 0 else f"FAILED (exit {out.returncode})"
                print(f"{status:>18} {time.time() - t0:6.1f}s  {line[:110]}")
                if out.returncode != 0:
                    failed.append(line)
                    print("    stdout: " + out.stdout[-600:].replace("\n", "\n    "))
                    print("    stderr: " + out.stderr[-600:].replace("\n", "\n    "))
    finally:
        if srv:
            stop_server(srv, log, home)
        shutil.rmtree(work, ignore_errors=True)
    for line, why in skipped:
        print(f"{'not run':>18}          {line[:80]}  ({why})")
    print(f"README: {ran} examples ran, {len(failed)} failed, {len(skipped)} not run")
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
