#!/usr/bin/env python3
"""Contract test: every JSON answer of a real reveried against api/openapi.yaml.

Starts reveried (bin in RV_BIN_DIR) with its embedded PostgreSQL under a
temporary REVERIE_HOME on a free loopback port, uploads real traces from
RV_SHARED_TRACES, calls every endpoint (success and the main errors) and
validates each JSON body against the schema the contract gives for that
path, method and status ($ref resolved; OpenAPI 3.0 `nullable` turned into
JSON Schema). Objects are checked strictly: a member the contract does not
declare is drift too, unless the schema says additionalProperties. An
answer whose status the contract does not list fails. api/examples/*.json
are checked against their schemas, and the examples embedded in the YAML
against theirs. At the end every path and method of the contract must have
been answered with a 2xx at least once.

Exit 0 = pass, 1 = contract violations, 77 = skipped (python3-yaml,
python3-jsonschema, reveried, the traces or PostgreSQL missing).
"""
import copy
import glob
import gzip
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77

try:
    import yaml
    import jsonschema
except ImportError as e:
    print(f"skip: {e}; install the Debian packages python3-yaml python3-jsonschema")
    sys.exit(SKIP)

SRC = os.environ.get("RV_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
BIN = os.environ.get("RV_BIN_DIR", "")
TRACES = os.environ.get("RV_SHARED_TRACES", "")
SPEC_PATH = os.path.join(SRC, "api", "openapi.yaml")
EXAMPLES = os.path.join(SRC, "api", "examples")

# Which schema each example file must satisfy; a new example must be added here.
EXAMPLE_SCHEMAS = {
    "error.json": "Error",
    "fleet-power.json": "FleetRequest",
    "fleet-power.response.json": "FleetResult",
    "timeline.response.json": "Timeline",
    "trace.response.json": "Trace",
    "whatif-amp-power.json": "WhatIf",
    "whatif-dataloader.json": "WhatIf",
    "whatif-dataloader.response.json": "WhatIfResult",
}

failures = []
covered = set()  # (template, method, status)


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


# ---- the contract as JSON Schema -------------------------------------------------------------

OPENAPI_ONLY = ("nullable", "example", "examples", "deprecated", "readOnly", "writeOnly", "xml",
                "externalDocs", "discriminator")


def to_json_schema(node):
    """OpenAPI 3.0 schema object -> JSON Schema (draft 7): `nullable` becomes a
    null type, OpenAPI-only keywords go, and objects with declared properties
    are closed (additionalProperties false) unless they say otherwise."""
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in OPENAPI_ONLY:
            continue
        if k == "properties":
            out[k] = {name: to_json_schema(sub) for name, sub in v.items()}
        elif k in ("items", "not") or (k == "additionalProperties" and isinstance(v, dict)):
            out[k] = to_json_schema(v)
        elif k in ("allOf", "anyOf", "oneOf"):
            out[k] = [to_json_schema(x) for x in v]
        else:
            out[k] = v
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if node.get("nullable") is True:
        if "type" in out:
            t = out["type"]
            out["type"] = (t if isinstance(t, list) else [t]) + ["null"]
            if "enum" in out:
                out["enum"] = list(out["enum"]) + [None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def resolve(spec, node, depth=0):
    """Inlines every local $ref (the contract has no recursive schemas)."""
    if depth > 64:
        raise ValueError("$ref nesting too deep (a cycle?)")
    if isinstance(node, list):
        return [resolve(spec, x, depth + 1) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported: {ref}")
        target = spec
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        merged = dict(target)
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        return resolve(spec, merged, depth + 1)
    return {k: resolve(spec, v, depth + 1) for k, v in node.items()}


class Contract:
    def __init__(self, spec):
        self.spec = spec

    def schema(self, name):
        s = resolve(self.spec, {"$ref": f"#/components/schemas/{name}"})
        return to_json_schema(s)

    def response(self, template, method, status):
        """The response object for template/method/status (resolved), or None."""
        op = self.spec["paths"].get(template, {}).get(method.lower())
        if op is None:
            return None
        r = op.get("responses", {}).get(str(status))
        return resolve(self.spec, r) if r is not None else None

    def check(self, template, method, status, ctype, body, what=""):
        where = f"{method} {template} -> {status}{' (' + what + ')' if what else ''}"
        resp = self.response(template, method, status)
        if resp is None:
            fail(f"{where}: status {status} is not in the contract")
            return
        content = resp.get("content") or {}
        media = (ctype or "").split(";")[0].strip()
        if media not in content:
            fail(f"{where}: Content-Type {media!r} is not in the contract ({sorted(content)})")
            return
        covered.add((template, method.upper(), status))
        sch = content[media].get("schema") if content[media] else None
        if media != "application/json":
            return
        if not sch or sch.get("format") == "binary":
            return
        try:
            doc = json.loads(body)
        except ValueError as e:
            fail(f"{where}: body is not JSON: {e}")
            return
        validate(to_json_schema(sch), doc, where)


def validate(schema, doc, where):
    v = jsonschema.Draft7Validator(schema)
    errs = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errs[:5]:
        # For oneOf/anyOf, the closest alternative's own error says more.
        if e.context:
            e = jsonschema.exceptions.best_match(e.context)
        path = "/".join(str(p) for p in e.absolute_path)
        fail(f"{where}: at /{path}: {e.message[:200]}")
    return not errs


# ---- the server ---------------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def have_postgres():
    if os.environ.get("REVERIE_PG_BINDIR") or os.environ.get("REVERIE_DATABASE_URL"):
        return True
    if glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        return True
    return shutil.which("initdb") is not None or shutil.which("pg_config") is not None


OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Client:
    def __init__(self, port, contract):
        self.base = f"http://127.0.0.1:{port}"
        self.contract = contract
        self.token = None

    def call(self, method, template, want, params=None, query=None, body=None, ctype=None,
             token="default", what="", check=True):
        """Calls template (with {id} from params); checks the status and the contract."""
        path = template
        for k, v in (params or {}).items():
            path = path.replace("{" + k + "}", urllib.parse.quote(str(v), safe=""))
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            ctype = ctype or "application/json"
        elif isinstance(body, str):
            data = body.encode()
        req = urllib.request.Request(url, data=data, method=method)
        if ctype:
            req.add_header("Content-Type", ctype)
        tok = self.token if token == "default" else token
        if tok:
            req.add_header("Authorization", "Bearer " + tok)
        try:
            with OPENER.open(req, timeout=120) as r:
                status, rtype, raw = r.status, r.headers.get("Content-Type", ""), r.read()
        except urllib.error.HTTPError as e:
            status, rtype, raw = e.code, e.headers.get("Content-Type", ""), e.read()
        where = f"{method} {path}"
        if want is not None and status != want:
            fail(f"{where}: status {status}, expected {want}: {raw[:300]!r}")
        if check:
            self.contract.check(template, method, status, rtype, raw, what)
        try:
            return status, json.loads(raw) if rtype.startswith("application/json") else raw
        except ValueError:
            return status, raw


def main():
    if not BIN or not TRACES:
        print("skip: RV_BIN_DIR / RV_SHARED_TRACES unset")
        return SKIP
    reveried = os.path.join(BIN, "reveried")
    reverie = os.path.join(BIN, "reverie")
    t_small = os.path.join(TRACES, "hta", "critical-path-simple-add.json.gz")
    t_h100 = os.path.join(TRACES, "kineto", "h100-sync-after-fix.json")
    t_resnet = os.path.join(TRACES, "kineto", "resnet50-v100-workers0.pt.trace.json.gz")
    for f in (reveried, reverie):
        if not os.access(f, os.X_OK):
            print(f"skip: {f} is not built")
            return SKIP
    for f in (t_small, t_h100, t_resnet):
        if not os.access(f, os.R_OK):
            print(f"skip: shared trace {f} is missing")
            return SKIP
    if not have_postgres():
        print("skip: no PostgreSQL server binaries (Debian: apt-get install postgresql)")
        return SKIP

    with open(SPEC_PATH) as f:
        spec = yaml.safe_load(f)
    contract = Contract(spec)
    check_examples(contract)
    self_test(contract)

    home = tempfile.mkdtemp(prefix="rv_contract_")
    os.chmod(home, 0o755)  # the embedded cluster runs as an unprivileged user
    port = free_port()
    log = open(os.path.join(home, "reveried.log"), "w")
    srv = subprocess.Popen([reveried, "--port", str(port), "--home", home, "--require-auth",
                            "--workers", "2", "--http-threads", "2", "--json-cap", "64",
                            "--fleet-inline", "2"], stdout=log, stderr=subprocess.STDOUT)
    rc = 1
    try:
        c = Client(port, contract)
        if not wait_ready(c, srv):
            print(f"FAIL: reveried did not get ready; log:\n{tail(home)}")
            return 1
        tokens = {}
        for scope in ("admin", "read", "ingest"):
            out = subprocess.run([reverie, "token", "create", "--name", "contract-" + scope,
                                  "--scopes", scope, "--home", home], capture_output=True,
                                 text=True, timeout=60)
            if out.returncode != 0:
                print(f"FAIL: reverie token create: {out.stderr}")
                return 1
            tokens[scope] = out.stdout.strip().splitlines()[0]
        c.token = tokens["read"]
        # The server reloads its token table every second: wait until it
        # knows every token (a reload between two creates knows only some).
        for _ in range(150):
            known = [c.call("GET", "/v1/traces", None, token=t, check=False)[0] != 401
                     for t in tokens.values()]
            if all(known):
                break
            time.sleep(0.1)
        exercise(c, tokens, t_small, t_h100, t_resnet)
        check_coverage(spec)
        rc = 1 if failures else 0
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            code = srv.wait(timeout=60)
            if code != 0:
                fail(f"reveried exited {code} after SIGTERM")
                rc = 1
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
            fail("reveried did not stop within 60 s of SIGTERM")
            rc = 1
        log.close()
        stop_leftover_cluster(home)
        if rc != 0:
            print(tail(home))
        if os.environ.get("RV_KEEP_TEST_HOME"):
            print(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    print(f"contract: {len(covered)} path/method/status combinations validated, "
          f"{len(failures)} failure(s)")
    return rc


def wait_ready(c, srv):
    for _ in range(1200):
        if srv.poll() is not None:
            return False
        try:
            st, _ = c.call("GET", "/readyz", None, token=None, check=False)
            if st == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def tail(home):
    out = []
    for f in ("reveried.log", "pg/postgres.log"):
        p = os.path.join(home, f)
        if os.path.exists(p):
            with open(p, errors="replace") as fh:
                out.append(f"--- {f}\n" + "".join(fh.readlines()[-30:]))
    return "\n".join(out)


def stop_leftover_cluster(home):
    """reveried stops the cluster it started; this only acts when it did not."""
    data = os.path.join(home, "pg", "data")
    if not os.path.exists(os.path.join(data, "postmaster.pid")):
        return
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    pg_ctl = os.path.join(bindirs[-1], "pg_ctl") if bindirs else shutil.which("pg_ctl")
    if not pg_ctl:
        return
    cmd = [pg_ctl, "-D", data, "stop", "-m", "fast", "-w"]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    subprocess.run(cmd, capture_output=True, timeout=60)


# ---- checks -----------------------------------------------------------------------------------

def check_examples(contract):
    files = sorted(os.listdir(EXAMPLES))
    for name in files:
        if not name.endswith(".json"):
            continue
        if name not in EXAMPLE_SCHEMAS:
            fail(f"api/examples/{name}: no schema mapped (add it to EXAMPLE_SCHEMAS)")
            continue
        with open(os.path.join(EXAMPLES, name)) as f:
            doc = json.load(f)
        validate(contract.schema(EXAMPLE_SCHEMAS[name]), doc, f"api/examples/{name}")
    # Examples written inside the contract.
    for template, item in contract.spec["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            for status, r in op["responses"].items():
                r = resolve(contract.spec, r)
                for media, m in (r.get("content") or {}).items():
                    if m and "example" in m and "schema" in m:
                        validate(to_json_schema(m["schema"]), m["example"],
                                 f"example of {method.upper()} {template} {status} {media}")


def self_test(contract):
    """The validator must catch drift: an undeclared member, a missing
    required one, a wrong type, null where the contract does not allow it."""
    with open(os.path.join(EXAMPLES, "trace.response.json")) as f:
        good = json.load(f)
    sch = contract.schema("Trace")
    bad = []
    t = copy.deepcopy(good)
    t["undeclared"] = 1
    bad.append(("an undeclared member", t))
    t = copy.deepcopy(good)
    del t["measured_us"]
    bad.append(("a missing required member", t))
    t = copy.deepcopy(good)
    t["tasks"] = "many"
    bad.append(("a wrong type", t))
    t = copy.deepcopy(good)
    t["job"] = None
    bad.append(("null where not nullable", t))
    t = copy.deepcopy(good)
    t["summary"]["devices"] = [{"id": 0}]
    bad.append(("a nested object missing members", t))
    for what, doc in bad:
        if not list(jsonschema.Draft7Validator(sch).iter_errors(doc)):
            fail(f"self-test: the validator accepted a Trace with {what}")
    ok = dict(good)
    ok["rank"] = None
    if list(jsonschema.Draft7Validator(sch).iter_errors(ok)):
        fail("self-test: the validator rejected rank null (nullable)")


def exercise(c, tokens, t_small, t_h100, t_resnet):
    def read(p):
        with open(p, "rb") as f:
            return f.read()

    small, h100, resnet = read(t_small), read(t_h100), read(t_resnet)

    # Public endpoints.
    c.call("GET", "/healthz", 200, token=None)
    c.call("GET", "/readyz", 200, token=None)
    c.call("GET", "/metrics", 200, token=None)

    # Authentication and scopes.
    c.call("GET", "/v1/traces", 401, token=None, what="no token")
    c.call("GET", "/v1/traces", 403, token=tokens["ingest"], what="ingest token")
    c.call("POST", "/v1/traces", 403, body="{}", ctype="application/json", what="read token")

    # Uploads.
    ing = tokens["ingest"]
    st, t1 = c.call("POST", "/v1/traces", 201, query={"job": "contract-add", "tags": "ci,a",
                                                      "rank": 0},
                    body=small, ctype="application/gzip", token=ing)
    id_small = t1.get("id") if isinstance(t1, dict) else None
    st, dup = c.call("POST", "/v1/traces", 200, query={"job": "again"}, body=small,
                     ctype="application/gzip", token=ing, what="duplicate")
    if isinstance(dup, dict) and (dup.get("id") != id_small or dup.get("duplicate") is not True):
        fail(f"duplicate upload: {dup.get('id')} / {dup.get('duplicate')}")
    st, t2 = c.call("POST", "/v1/traces", 201, query={"job": "contract-resnet"}, body=resnet,
                    ctype="application/gzip", token=ing)
    id_resnet = t2.get("id") if isinstance(t2, dict) else None
    st, t3 = c.call("POST", "/v1/traces", 201, query={"job": "contract-h100"}, body=h100,
                    ctype="application/json", token=ing)
    id_h100 = t3.get("id") if isinstance(t3, dict) else None
    if not (id_small and id_resnet and id_h100):
        fail("uploads did not return ids; stopping")
        return
    c.call("POST", "/v1/traces", 400, body='{"traceEvents": [{"ph": "X", "ts": ',
           ctype="application/json", token=ing, what="truncated JSON")
    c.call("POST", "/v1/traces", 415, body="{}", ctype="text/plain", token=ing,
           what="wrong media type")
    # Nothing to simulate (README): refused with the reason, nothing stored.
    with open(os.path.join(TRACES, "hta", "edge", "cpu-only.json.gz"), "rb") as f:
        cpu_only = f.read()
    st, err = c.call("POST", "/v1/traces", 400, query={"job": "contract-cpu-only"},
                     body=cpu_only, ctype="application/gzip", token=ing, what="CPU-only trace")
    if "nothing to simulate" not in str((err or {}).get("error", {}).get("message")):
        fail(f"CPU-only upload: the refusal does not give the reason: {err!r}")
    st, lst = c.call("GET", "/v1/traces", 200, query={"job": "contract-cpu-only"})
    if isinstance(lst, dict) and lst.get("traces"):
        fail(f"the refused CPU-only trace was stored: {lst['traces']!r}")

    # Listing and getting.
    st, page = c.call("GET", "/v1/traces", 200, query={"limit": 2})
    cur = page.get("next_cursor") if isinstance(page, dict) else None
    if not cur:
        fail("list with limit 2 of 3 traces has no next_cursor")
    else:
        st, page2 = c.call("GET", "/v1/traces", 200, query={"limit": 2, "cursor": cur})
        if isinstance(page2, dict) and page2.get("next_cursor") is not None:
            fail("the last page has a next_cursor")
    c.call("GET", "/v1/traces", 200, query={"job": "contract-*", "tag": "ci"})
    c.call("GET", "/v1/traces", 400, query={"limit": "x"}, what="bad limit")
    c.call("GET", "/v1/traces/{id}", 200, params={"id": id_resnet})
    # 404s in the user's words, whichever store lookup failed.
    for method, tpl, body in (("GET", "/v1/traces/{id}", None),
                              ("GET", "/v1/traces/{id}/original", None),
                              ("GET", "/v1/traces/{id}/timeline", None),
                              ("POST", "/v1/traces/{id}/whatif", {})):
        st, err = c.call(method, tpl, 404, params={"id": 987654321}, body=body)
        msg = (err or {}).get("error", {}).get("message") if isinstance(err, dict) else err
        if msg != "trace 987654321 does not exist":
            fail(f"{method} {tpl} of no such trace says {msg!r}")
    # A method the path does not have: 405 in the one error shape.
    st, raw = c.call("PUT", "/v1/traces/{id}", 405, params={"id": id_resnet}, body="{}",
                     ctype="application/json", check=False)
    validate(c.contract.schema("Error"), raw, "PUT /v1/traces/{id} -> 405")
    st, orig = c.call("GET", "/v1/traces/{id}/original", 200, params={"id": id_small})
    if orig != small:
        fail("original bytes differ from the upload")
    c.call("GET", "/v1/traces/{id}/original", 404, params={"id": 987654321})

    # Execution traces (docs/models/et.md): an ET alone, an ET attached to
    # its Kineto trace; both traces are deleted again.
    def read(p):
        with open(p, "rb") as f:
            return f.read()
    et = read(os.path.join(TRACES, "hta", "simple-add.et.json.gz"))
    st, ta = c.call("POST", "/v1/traces", 201, query={"job": "contract-et"}, body=et,
                    ctype="application/gzip", token=ing, what="ET alone")
    id_et = ta.get("id") if isinstance(ta, dict) else None
    if isinstance(ta, dict) and ta.get("source_format") != "et":
        fail(f"ET alone: source_format {ta.get('source_format')!r}")
    c.call("POST", "/v1/traces", 422, query={"kind": "et", "gpu": "Z80"}, body=et,
           ctype="application/gzip", token=ing, what="ET alone, unknown gpu")
    if id_et:
        c.call("POST", "/v1/traces/{id}/whatif", 400, params={"id": id_et}, body={},
               what="ET alone without gpu")
        st, ans = c.call("POST", "/v1/traces/{id}/whatif", 200, params={"id": id_et},
                         body={"gpu": "A100"}, what="ET alone on A100")
        codes = [w.get("code") for w in (ans or {}).get("warnings", [])] \
            if isinstance(ans, dict) else []
        if "et_only_modelled" not in codes:
            fail(f"ET alone: no et_only_modelled warning: {codes!r}")
    st, tk = c.call("POST", "/v1/traces", 201, query={"job": "contract-et"},
                    body=read(os.path.join(TRACES, "hta", "simple-add.kineto.json.gz")),
                    ctype="application/gzip", token=ing, what="simple-add Kineto")
    id_k = tk.get("id") if isinstance(tk, dict) else None
    if id_k:
        pe = "/v1/traces/{id}/et"
        c.call("PUT", pe, 400, params={"id": id_k}, body='{"schema": "1.0.1"}',
               ctype="application/json", token=ing, what="broken ET")
        c.call("PUT", pe, 200, params={"id": id_k}, body=et, ctype="application/gzip",
               token=ing)
        c.call("PUT", pe, 409, params={"id": id_k}, body=et, ctype="application/gzip",
               token=ing, what="second ET")
        c.call("PUT", pe, 404, params={"id": 987654321}, body=et, ctype="application/gzip",
               token=ing)
        c.call("PUT", pe, 403, params={"id": id_k}, body=et, ctype="application/gzip",
               what="read token")
    for i in (id_et, id_k):
        if i:
            c.call("DELETE", "/v1/traces/{id}", 200, params={"id": i}, token=tokens["admin"])

    # Timelines.
    tl = "/v1/traces/{id}/timeline"
    st, tm = c.call("GET", tl, 200, params={"id": id_resnet}, query={"source": "measured",
                                                                      "max_tasks": 50})
    if isinstance(tm, dict):
        if len(tm.get("tasks", [])) != 50 or not tm.get("truncated") or tm.get("omitted", 0) <= 0:
            fail(f"timeline max_tasks 50: {len(tm.get('tasks', []))} tasks, "
                 f"omitted {tm.get('omitted')}, truncated {tm.get('truncated')}")
        if len(tm.get("iterations", [])) < 5:
            fail(f"timeline of the ResNet-50 trace marks {len(tm.get('iterations', []))} steps")
    # A window: the steps and tasks in it, with critical-path flags.
    st, tb = c.call("GET", tl, 200, params={"id": id_resnet},
                    query={"source": "baseline", "from_us": 150000, "to_us": 200000,
                           "max_tasks": 100000})
    if isinstance(tb, dict):
        ts = tb.get("tasks", [])
        if not any(t.get("critical") for t in ts):
            fail("timeline window 150-200 ms: no task on the critical path")
        if any(t["start_us"] >= 200000 or t["start_us"] + t["dur_us"] < 150000 for t in ts):
            fail("timeline window 150-200 ms: a task outside the window")
        its = tb.get("iterations", [])
        if not its or any(i["end_us"] < 150000 or i["start_us"] >= 200000 for i in its):
            fail(f"timeline window 150-200 ms: steps {its}")
    c.call("GET", tl, 200, params={"id": id_small}, query={"source": "baseline"})
    c.call("GET", tl, 200, params={"id": id_small},
           query={"source": "predicted", "whatif": '{"host_overheads":"platform"}'})
    c.call("GET", tl, 200, params={"id": id_small}, query={"format": "chrome"})
    c.call("GET", tl, 400, params={"id": id_small}, query={"source": "bogus"})
    c.call("GET", tl, 404, params={"id": 987654321})

    # What-ifs: the examples, a timeline, platform overheads, and errors.
    wi = "/v1/traces/{id}/whatif"
    for name in ("whatif-dataloader.json", "whatif-amp-power.json"):
        with open(os.path.join(EXAMPLES, name)) as f:
            doc = json.load(f)
        c.call("POST", wi, 200, params={"id": id_resnet}, body=doc, what=name)
    st, empty = c.call("POST", wi, 200, params={"id": id_resnet}, body={}, what="empty")
    check_replay_error(empty, "POST /whatif {}")
    st, cached = c.call("POST", wi, 200, params={"id": id_resnet}, body={}, what="cached")
    if isinstance(cached, dict) and cached.get("cached") is not True:
        fail("the same what-if twice is not a cache hit")
    c.call("POST", wi, 200, params={"id": id_small}, body={"timeline": True,
                                                            "schedule": "fifo"})
    st, plat = c.call("POST", wi, 200, params={"id": id_resnet},
                      body={"host_overheads": "platform",
                            "distributed": {"workers": 8, "gpus_per_node": 4}})
    if isinstance(plat, dict):
        kinds = [a.get("kind") for a in plat.get("applied", [])]
        if kinds[:1] != ["overheads"]:
            fail(f"host_overheads platform: applied starts with {kinds[:1]}")
    c.call("POST", wi, 400, params={"id": id_resnet},
           body={"optimizations": [{"kind": "warp-drive"}]}, what="unknown kind")
    c.call("POST", wi, 400, params={"id": id_resnet}, body="{nope", ctype="application/json",
           what="invalid JSON")
    c.call("POST", wi, 404, params={"id": 987654321}, body={})
    c.call("POST", wi, 404, params={"id": 987654321}, body={"host_overheads": "platform"},
           what="platform overheads, no such trace")
    c.call("POST", wi, 413, params={"id": id_resnet}, body="{" + " " * (70 * 1024) + "}",
           ctype="application/json", what="over the JSON cap")
    c.call("POST", wi, 415, params={"id": id_resnet}, body="{}", ctype="text/plain")

    # Fleet: inline, queued job (and its shard), errors.
    with open(os.path.join(EXAMPLES, "fleet-power.json")) as f:
        fleet_doc = json.load(f)
    fleet_doc["select"] = {"trace_ids": [id_resnet]}
    fleet_doc["scenarios"] = fleet_doc["scenarios"][:2]
    st, fl = c.call("POST", "/v1/fleet/whatif", 200, body=fleet_doc, what="inline")
    for sc in (fl.get("scenarios", []) if isinstance(fl, dict) else []):
        for row in sc.get("rows", []):
            check_replay_error(row, "fleet row")
            if isinstance(empty, dict) and row.get("replay_error") != empty.get("replay_error"):
                fail(f"fleet row replay_error {row.get('replay_error')} != single-trace "
                     f"{empty.get('replay_error')}")
    # Rows name their job and GPU; the aggregate the energy saved; format=csv
    # gives one line per (scenario, trace) row with the same figures.
    for sc in (fl.get("scenarios", []) if isinstance(fl, dict) else []):
        if "energy_saved_j" not in sc.get("aggregate", {}):
            fail("fleet aggregate without energy_saved_j")
        for row in sc.get("rows", []):
            if not row.get("job") or not row.get("platform"):
                fail(f"fleet row without job/platform: {row}")
    st, csv_text = c.call("POST", "/v1/fleet/whatif", 200, body=fleet_doc, query={"format": "csv"},
                          what="csv")
    lines = csv_text.decode().splitlines() if isinstance(csv_text, bytes) else []
    if len(lines) != 1 + len(fleet_doc["scenarios"]) or not lines[0].startswith(
            "scenario,trace_id,job,platform,"):
        fail(f"fleet csv: {lines[:4]}")
    elif isinstance(fl, dict):
        row0 = fl["scenarios"][0]["rows"][0]
        cells = lines[1].split(",")
        if cells[1] != str(id_resnet) or cells[2] != row0.get("job") or \
                abs(float(cells[6]) - row0.get("predicted_us", 0)) > 1e-9 * float(cells[6]):
            fail(f"fleet csv row {cells} != JSON row {row0}")
    st, q = c.call("POST", "/v1/fleet/whatif", 202,
                   body={"select": {}, "scenarios": [{}, {"host_overheads": "platform"}]})
    job = q.get("job_id") if isinstance(q, dict) else None
    c.call("POST", "/v1/fleet/whatif", 400, body={"scenarios": []}, what="no scenarios")
    c.call("POST", "/v1/fleet/whatif", 400,
           body={"scenarios": [{"power_limit_w": -1}]}, what="bad scenario")
    if job:
        state = None
        for _ in range(600):
            st, j = c.call("GET", "/v1/jobs/{id}", 200, params={"id": job}, check=False)
            state = j.get("state") if isinstance(j, dict) else None
            if state in ("done", "failed"):
                break
            time.sleep(0.2)
        if state != "done":
            fail(f"fleet job {job} ended {state}")
        st, j = c.call("GET", "/v1/jobs/{id}", 200, params={"id": job}, what="done")
        rows = [r for s in (j.get("result") or {}).get("scenarios", []) for r in s.get("rows", [])]
        if len(rows) != 6 or any("error" in r for r in rows):
            fail(f"fleet job rows: {len(rows)} rows, errors "
                 f"{[r.get('error') for r in rows if 'error' in r]}")
        # The parent queued its shard(s) right after itself.
        c.call("GET", "/v1/jobs/{id}", 200, params={"id": job + 1}, what="shard")
    c.call("GET", "/v1/jobs/{id}", 404, params={"id": 987654321})
    # Cancel a job, by the token that queued it.
    st, q2 = c.call("POST", "/v1/fleet/whatif", 202, what="to cancel",
                    body={"select": {}, "async": True, "scenarios": [{"power_limit_w": 123}]})
    if isinstance(q2, dict) and q2.get("job_id"):
        c.call("DELETE", "/v1/jobs/{id}", 200, params={"id": q2["job_id"]})
    c.call("DELETE", "/v1/jobs/{id}", 404, params={"id": 987654321}, what="no such job")

    # Diff: the ResNet-50 loader pair (data loading is the top op) and a what-if.
    dp = "/v1/traces/{id}/diff"
    st, t4 = c.call("POST", "/v1/traces", 201, query={"job": "diff-pair"},
                    body=read(t_resnet.replace("workers0", "workers4")),
                    ctype="application/gzip", token=ing)
    id_w4 = t4.get("id") if isinstance(t4, dict) else None
    st, dg = c.call("GET", dp, 200, params={"id": id_resnet}, query={"with": id_w4, "top": 5})
    def first_op(d):
        rows = d.get("ops", {}).get("rows") if isinstance(d, dict) else None
        return rows[0].get("name", "") if rows else ""
    top_op = first_op(dg)
    if "DataLoader" not in top_op:
        fail(f"diff workers0 vs workers4: top op is {top_op!r}, not the data loader")
    st, dw = c.call("POST", dp, 200, params={"id": id_resnet},
                    body={"optimizations": [{"kind": "dataloader", "workers": 4}]})
    top_op = first_op(dw)
    if "DataLoader" not in top_op:
        fail(f"diff vs dataloader what-if: top op is {top_op!r}")
    c.call("GET", dp, 400, params={"id": id_resnet}, what="no with")
    c.call("GET", dp, 404, params={"id": id_resnet}, query={"with": 987654321})
    c.call("POST", dp, 400, params={"id": id_resnet},
           body={"optimizations": [{"kind": "warp-drive"}]}, what="unknown kind")

    # Advise: ranked plans, each a what-if document.
    ap = "/v1/traces/{id}/advise"
    st, adv = c.call("POST", ap, 200, params={"id": id_resnet}, body={"budget_s": 30})
    cands = adv.get("candidates") if isinstance(adv, dict) else None
    # The server's what-if budget bounds the search: under a sanitizer the
    # search may stop early (complete: false, saying why), and then the
    # top plan is only the best of what it reached (test_advise checks the
    # full search).
    complete = isinstance(adv, dict) and adv.get("complete", True)
    if not cands:
        fail("advise workers0: no candidates")
    elif complete and "dataloader" not in " ".join(cands[0].get("changes", [])):
        fail(f"advise workers0: top plan {cands[0].get('changes')}")
    elif not complete and not adv.get("stopped"):
        fail("advise workers0: an incomplete search does not say why it stopped")
    c.call("POST", ap, 200, params={"id": id_resnet}, body={"objective": "energy"}, what="energy")
    c.call("POST", ap, 400, params={"id": id_resnet}, body={"objective": "fame"}, what="bad objective")
    st, adc = c.call("POST", ap, 200, params={"id": id_resnet},
                     body={"objective": "cost", "gpus": 4}, what="cost, 4 GPUs")
    if isinstance(adc, dict) and (adc.get("price") or {}).get("source") != "default":
        fail(f"advise cost: price {adc.get('price')!r}")
    c.call("POST", ap, 400, params={"id": id_resnet}, body={"price_per_gpu_hour": -1},
           what="negative price")
    c.call("POST", ap, 404, params={"id": 987654321}, body={})

    # The prediction as a Kineto trace: the original's metadata, one annotation per model.
    xp = "/v1/traces/{id}/whatif/export"
    st, ex = c.call("POST", xp, 200, params={"id": id_resnet}, body={"power_limit_frac": 0.7})
    if not isinstance(ex, dict) or "deviceProperties" not in ex or \
            not any(e.get("name") == "reverie what-if: power_limit" for e in ex.get("traceEvents", [])):
        fail("export: no deviceProperties or no power_limit annotation")
    c.call("POST", xp, 200, params={"id": id_resnet}, query={"run": "baseline"}, body={})
    c.call("POST", xp, 400, params={"id": id_resnet}, query={"run": "later"}, body={})
    c.call("POST", xp, 404, params={"id": 987654321}, body={})

    # Training jobs: two DLRM ranks of eight, rank identity from distributedInfo.
    dlrm = os.path.join(TRACES, "param", "dlrm-8rank")
    for r in (0, 1):
        c.call("POST", "/v1/traces", 201, query={"job": "contract-dlrm"},
               body=read(os.path.join(dlrm, f"worker{r}.kineto.json.gz")),
               ctype="application/gzip", token=ing, what=f"DLRM rank {r}")
    st, tjl = c.call("GET", "/v1/training-jobs", 200)
    tjobs = [j for j in (tjl.get("training_jobs", []) if isinstance(tjl, dict) else [])
             if j.get("name") == "contract-dlrm"]
    if len(tjobs) != 1 or tjobs[0].get("ranks") != [0, 1] or \
            tjobs[0].get("missing") != [2, 3, 4, 5, 6, 7]:
        fail(f"training job contract-dlrm: {tjobs!r}")
    tj_id = tjobs[0]["id"] if tjobs else 987654321
    # The same job's ranks 2 and 3 in one .tar.gz (and a file that is no trace).
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in ("worker2.kineto.json.gz", "worker3.kineto.json.gz", "worker3.et.json.gz"):
            tf.add(os.path.join(dlrm, name), arcname="dlrm/" + name)
    st, up = c.call("POST", "/v1/training-jobs", 201, query={"job": "contract-dlrm"},
                    body=buf.getvalue(), ctype="application/gzip", token=ing, what="archive")
    if isinstance(up, dict) and (up.get("stored") != 2 or up.get("refused") != 1 or
                                 (up.get("training_job") or {}).get("ranks") != [0, 1, 2, 3]):
        fail(f"archive upload: {up!r}")
    c.call("POST", "/v1/training-jobs", 400, query={"job": "contract-dlrm"}, body=small,
           ctype="application/gzip", token=ing, what="not an archive")
    c.call("POST", "/v1/training-jobs", 400, body=buf.getvalue(), ctype="application/gzip",
           token=ing, what="no job name")
    c.call("GET", "/v1/training-jobs", 200, query={"limit": 1}, what="limit 1")
    c.call("GET", "/v1/training-jobs", 400, query={"cursor": "x"}, what="bad cursor")
    c.call("GET", "/v1/training-jobs/{id}", 200, params={"id": tj_id})
    c.call("GET", "/v1/training-jobs/{id}", 404, params={"id": 987654321})
    tw = "/v1/training-jobs/{id}/whatif"
    c.call("POST", tw, 400, params={"id": tj_id}, body={"ranks": [6]}, what="absent rank")
    c.call("POST", tw, 404, params={"id": 987654321}, body={})
    c.call("POST", tw, 415, params={"id": tj_id}, body="{}", ctype="text/plain")
    st, tr = c.call("POST", tw, 200, params={"id": tj_id}, body={}, what="partial job")
    if isinstance(tr, dict) and [w.get("code") for w in tr.get("warnings", [])].count("partial_job") != 1:
        fail(f"the partial job's answer does not warn partial_job: {tr.get('warnings')!r}")
    # Advise on the job: ranked job what-ifs; the top one, POSTed to the
    # job's what-if, gives its step (±0.5%); --gpus data-parallel and the
    # cost objective with the price asked.
    ja = "/v1/training-jobs/{id}/advise"
    st, jad = c.call("POST", ja, 200, params={"id": tj_id},
                     body={"objective": "cost", "gpus": 8, "price_per_gpu_hour": 3.5})
    jc = jad.get("candidates") if isinstance(jad, dict) else None
    if isinstance(jad, dict) and (jad.get("objective") != "cost" or jad.get("ranks") != 4 or
                                  jad.get("price") != {"usd_per_gpu_hour": 3.5, "source": "asked"}):
        fail(f"job advise: {({k: jad.get(k) for k in ('objective', 'ranks', 'price')})!r}")
    # As for one trace: under a sanitizer the server's budget may stop the
    # search before any plan beats the job as traced; it must say so.
    jcomplete = isinstance(jad, dict) and jad.get("complete", True)
    if not jc and jcomplete:
        fail("job advise: no candidates from a complete search")
    elif not jc and not jad.get("stopped"):
        fail("job advise: an incomplete search does not say why it stopped")
    elif jc:
        st, jw = c.call("POST", tw, 200, params={"id": tj_id}, body=jc[0]["whatif"],
                        what="the job advise's top plan")
        want = jc[0].get("predicted_us") or 0
        got = jw.get("predicted_us", 0) if isinstance(jw, dict) else 0
        if abs(got - want) > 0.005 * want:
            fail(f"job advise: top plan predicts {want} us, the job what-if {got} us")
    c.call("POST", ja, 400, params={"id": tj_id}, body={"gpus": 0}, what="gpus 0")
    c.call("POST", ja, 404, params={"id": 987654321}, body={})

    # Catalogues.
    st, pl = c.call("GET", "/v1/platforms", 200)
    pid = pl["platforms"][0]["id"] if isinstance(pl, dict) and pl.get("platforms") else 1
    st, oh = c.call("GET", "/v1/platforms/{id}/overheads", 200, params={"id": pid})
    if isinstance(oh, dict) and not oh.get("overheads"):
        fail(f"platform {pid} has no overhead statistics after uploads")
    c.call("GET", "/v1/platforms/{id}/overheads", 404, params={"id": "x"})
    c.call("GET", "/v1/platforms/{id}/overheads", 404, params={"id": 987654321},
           what="no such platform")
    for p in pl.get("platforms", []) if isinstance(pl, dict) else []:
        c.call("GET", "/v1/platforms/{id}/kernel-models", 200, params={"id": p["id"]})
    c.call("GET", "/v1/platforms/{id}/kernel-models", 404, params={"id": 987654321},
           what="no such platform")
    c.call("GET", "/v1/hardware", 200)
    c.call("GET", "/v1/whatif/kinds", 200)
    # Who the caller is: the dashboard's sign-in shows the token's scopes.
    st, me = c.call("GET", "/v1/whoami", 200)
    if not isinstance(me, dict) or me.get("scopes") != ["read"] or not me.get("auth_required") \
            or not me.get("name"):
        fail(f"GET /v1/whoami with the read token: {me!r}")
    st, me = c.call("GET", "/v1/whoami", 200, token=tokens["admin"])
    if not isinstance(me, dict) or "admin" not in me.get("scopes", []):
        fail(f"GET /v1/whoami with the admin token: {me!r}")
    c.call("GET", "/v1/whoami", 401, token=None, what="no token")
    c.call("GET", "/v1/whoami", 401, token="rvt_00000000_" + "0" * 40, what="unknown token")

    # Delete: scope, success, gone.
    c.call("DELETE", "/v1/traces/{id}", 403, params={"id": id_h100}, what="read token")
    c.call("DELETE", "/v1/traces/{id}", 200, params={"id": id_h100}, token=tokens["admin"])
    c.call("DELETE", "/v1/traces/{id}", 404, params={"id": id_h100}, token=tokens["admin"])
    c.call("GET", "/v1/traces/{id}", 404, params={"id": id_h100})


def check_replay_error(res, what):
    """replay_error is |baseline - measured| / measured wherever it is reported."""
    if not isinstance(res, dict) or "replay_error" not in res:
        fail(f"{what}: no replay_error")
        return
    m, b, e = res.get("measured_us"), res.get("baseline_us"), res["replay_error"]
    if m is None:  # modelled, not measured: no replay error either
        if e is not None:
            fail(f"{what}: replay_error {e} without a measured step")
        return
    want = abs(b - m) / m if m else 0.0
    # Ratios are printed to 4 decimals (docs/whatif.md "Numbers").
    if e < 0 or abs(e - want) > 0.5e-4 + 1e-9 * max(1.0, want):
        fail(f"{what}: replay_error {e}, expected |{b} - {m}| / {m} = {want}")


def check_coverage(spec):
    for template, item in spec["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            m = method.upper()
            if not any(t == template and mm == m and 200 <= s < 300 for t, mm, s in covered):
                fail(f"coverage: {m} {template} was never answered with a 2xx")


if __name__ == "__main__":
    sys.exit(main())
