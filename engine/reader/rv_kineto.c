/* Streaming reader for Kineto / PyTorch profiler Chrome-trace JSON: the
 * Kineto semantics (which keys matter, units, categories, flows, caps) on
 * top of the generic streaming scanner in rv_jscan.c, which owns the input,
 * gzip, the window and the JSON grammar. Values the engine does not use are
 * skipped (and still validated) without being stored. See
 * docs/internals/kineto-reader.md. */
#include "reader/rv_kineto.h"
#include "reader/rv_kineto_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_buf.h"
#include "util/rv_jscan.h"
#include "util/rv_names.h"
#include "util/rv_jsonw.h"
#include "util/rv_map.h"
#include "trace/rv_kname.h"
#include "trace/rv_shapes.h"

#define MAX_NAME      RV_KINETO_MAX_NAME
#define DEFAULT_INPUT ((size_t)16 << 30)
/* Sizing the event array from the input's announced size (run). */
#define RESERVE_BYTES_PER_EVENT 200
#define RESERVE_MAX_EVENTS      ((size_t)8 << 20)

typedef rv_kineto__flow flow;

/* The reader state (rv_kineto_internal.h), by its short local name. */
typedef rv_kineto__reader reader;

/* ---------------------------------------------------------------- values */

/* Reads a value that should be a number (or a string holding one). Sets
 * *st; the value is skipped when it is neither. The token text stays in
 * r->js.num or r->sbuf (returned in *txt, *len). */
int rv_kineto__num_value(reader *r, int depth, int *st, const char **txt, size_t *len)
{
    int c = ws(r), rc;
    *st = ST_NOT_NUMBER;
    *txt = NULL;
    *len = 0;
    if (c == '-' || (c >= '0' && c <= '9')) {
        if ((rc = read_number(r)) < 0)
            return rc;
        *st = ST_OK;
        *txt = r->js.num;
        *len = r->js.num_len;
        return 0;
    }
    if (c == '"') {
        eat(r);
        if ((rc = read_string(r, &r->sbuf)) < 0)
            return rc;
        if (!r->sbuf.err && r->sbuf.len) {
            *st = ST_OK;
            *txt = r->sbuf.p;
            *len = r->sbuf.len;
        }
        return 0;
    }
    if (c == 'n') {
        *st = ST_ABSENT;
        return read_literal(r, "null");
    }
    return skip_value(r, depth);
}

/* Integer argument: ids above INT64_MAX are folded into range (low 63
 * bits) so that distinct large ids stay distinct; other values clamp. */
int rv_kineto__int_arg(reader *r, int depth, int fold, int64_t *out)
{
    int st, rc, neg;
    const char *txt;
    size_t len;
    uint64_t mag;
    if ((rc = rv_kineto__num_value(r, depth, &st, &txt, &len)) < 0)
        return rc;
    if (st != ST_OK)
        return 0;
    st = rv_jscan_dec_u64(txt, len, 0, &mag, &neg);
    if (st == ST_NOT_NUMBER)
        return 0;
    if (mag > (uint64_t)INT64_MAX)
        mag = fold && st == ST_OK ? (mag & (uint64_t)INT64_MAX) : (uint64_t)INT64_MAX;
    *out = neg ? -(int64_t)mag : (int64_t)mag;
    return 0;
}

/* A string value (numbers kept as their text) into b; others skipped and
 * reported as absent (*ok = 0). */
int rv_kineto__text_value(reader *r, int depth, rv_buf *b, int *ok)
{
    int c = ws(r), rc;
    *ok = 0;
    if (c == '"') {
        eat(r);
        if ((rc = read_string(r, b)) < 0)
            return rc;
        *ok = !b->err;
        return 0;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        if ((rc = read_number(r)) < 0)
            return rc;
        rv_buf_reset(b);
        if ((rc = rv_buf_add(b, r->js.num, r->js.num_len)) < 0)
            return rc;
        *ok = 1;
        return 0;
    }
    return skip_value(r, depth);
}

/* Interns s[0..n) (NULL: ""). Text that is not valid UTF-8 has each bad
 * byte replaced by U+FFFD here, once, so that every writer downstream (API
 * answers, timelines, snapshots) sees valid text. Only strings not yet in
 * the table are checked: what the table holds is valid already. */
uint32_t rv_kineto__intern(reader *r, const char *s, size_t n, int *rc)
{
    rv_strtab *st = &r->t->strings;
    if (!s) {
        s = "";
        n = 0;
    }
    const char *nul = memchr(s, '\0', n); /* the table keeps text up to a NUL */
    if (nul)
        n = (size_t)(nul - s);
    uint32_t id = rv_strtab_find(st, s, n);
    if (id != UINT32_MAX)
        return id;
    if (rv_jsonw_utf8_valid(s, n) < n) {
        rv_buf_reset(&r->fix);
        if (rv_jsonw_utf8_fix(&r->fix, s, n) < 0) {
            *rc = FAIL(r, RV_ERR_NOMEM, "out of memory repairing UTF-8");
            return UINT32_MAX;
        }
        s = r->fix.p;
        n = r->fix.len;
    }
    id = rv_strtab_intern(st, s, n);
    if (id == UINT32_MAX)
        *rc = FAIL(r, RV_ERR_NOMEM, "string table full or out of memory");
    return id;
}

/* Interns a pid or tid through a one-entry cache. */
static uint32_t intern_cached(reader *r, const char *s, size_t n, char *last, size_t *last_len,
                              uint32_t *last_id, int *rc)
{
    if (*last_id && *last_len == n && memcmp(last, s, n) == 0)
        return *last_id;
    uint32_t id = rv_kineto__intern(r, s, n, rc);
    if (id != UINT32_MAX && n <= MAX_SHORT) {
        memcpy(last, s, n);
        *last_len = n;
        *last_id = id;
    }
    return id;
}

/* ---------------------------------------------------------------- events */

typedef struct evscan {
    char ph;
    int cat; /* rv_cat, -1 unknown, -2 a flow category */
    int ts_st, dur_st;
    int64_t ts_ns, dur_ns, ts_off, dur_off;
    int have_name, have_pid, have_tid;
    char pid[MAX_SHORT + 1], tid[MAX_SHORT + 1];
    size_t pid_len, tid_len;
    int64_t flow_id;
    int bp_e;
} evscan;

static int classify_cat(const char *s, size_t n)
{
    static const rv_name map[] = {
        RV_NAME("cpu_op", RV_CAT_CPU_OP),
        RV_NAME("Operator", RV_CAT_CPU_OP),
        RV_NAME("user_annotation", RV_CAT_USER_ANNOTATION),
        RV_NAME("python_function", RV_CAT_PYTHON),
        RV_NAME("cuda_runtime", RV_CAT_RUNTIME),
        RV_NAME("Runtime", RV_CAT_RUNTIME),
        RV_NAME("hip_runtime", RV_CAT_RUNTIME),
        RV_NAME("cuda_driver", RV_CAT_DRIVER),
        RV_NAME("kernel", RV_CAT_KERNEL),
        RV_NAME("Kernel", RV_CAT_KERNEL),
        RV_NAME("gpu_memcpy", RV_CAT_MEMCPY),
        RV_NAME("Memcpy", RV_CAT_MEMCPY),
        RV_NAME("gpu_memset", RV_CAT_MEMSET),
        RV_NAME("Memset", RV_CAT_MEMSET),
        RV_NAME("gpu_user_annotation", RV_CAT_GPU_ANNOTATION),
        RV_NAME("cuda_sync", RV_CAT_CUDA_SYNC),
        RV_NAME("ac2g", -2),
        RV_NAME("async_gpu", -2),
        RV_NAME("async", -2),
    };
    return rv_names_find(map, sizeof(map) / sizeof(map[0]), s, n, -1);
}

int rv_kineto_category(const char *s, size_t n)
{
    return classify_cat(s, n);
}

/* A ts/dur value: number or numeric string, microseconds -> ns. */
static int read_time(reader *r, int depth, int *st, int64_t *ns, int64_t *off)
{
    const char *txt;
    size_t len;
    int rc;
    ws(r);
    *off = cur_off(r);
    if (rv_jscan_dec_here(&r->js, 3, ns)) {
        *st = ST_OK;
        return 0;
    }
    if ((rc = rv_kineto__num_value(r, depth, st, &txt, &len)) < 0)
        return rc;
    if (*st == ST_ABSENT)
        *st = ST_NOT_NUMBER; /* null is not a time */
    if (*st == ST_OK)
        *st = rv_jscan_dec_i64(txt, len, 3, ns);
    return 0;
}

static int read_short(reader *r, int depth, char *out, size_t *len, int *have)
{
    int ok, rc;
    if ((rc = rv_kineto__text_value(r, depth, &r->sbuf, &ok)) < 0)
        return rc;
    if (ok && r->sbuf.len <= MAX_SHORT) {
        memcpy(out, r->sbuf.p, r->sbuf.len);
        out[r->sbuf.len] = '\0';
        *len = r->sbuf.len;
        *have = 1;
    }
    return 0;
}

int rv_kineto__flows_room(reader *r, size_t more)
{
    size_t need = r->nflows + more;
    if (need <= r->cap_flows)
        return 0;
    if (need > r->max_events)
        return rv_error_tag(r->js.err, RV_REASON_EVENTS,
                            FAIL(r, RV_ERR_LIMIT, "more than %zu flow events", r->max_events));
    size_t cap = r->cap_flows ? r->cap_flows * 2 : 1024;
    while (cap < need)
        cap *= 2;
    if (cap > r->max_events)
        cap = r->max_events;
    flow *fl = realloc(r->flows, cap * sizeof(*fl));
    if (!fl)
        return FAIL(r, RV_ERR_NOMEM, "out of memory for flow events");
    r->flows = fl;
    r->cap_flows = cap;
    return 0;
}

static int add_flow(reader *r, const evscan *s)
{
    int rc = rv_kineto__flows_room(r, 1);
    if (rc < 0)
        return rc;
    flow *fl = &r->flows[r->nflows];
    fl->id = s->flow_id;
    fl->ts_ns = s->ts_ns;
    fl->ph = (uint8_t)s->ph;
    fl->bp_e = (uint8_t)s->bp_e;
    fl->pid = rv_kineto__intern(r, s->pid, s->have_pid ? s->pid_len : 0, &rc);
    fl->tid = rv_kineto__intern(r, s->tid, s->have_tid ? s->tid_len : 0, &rc);
    if (rc < 0)
        return rc;
    r->nflows++;
    return 0;
}

/* Python events that mark a module instance: "nn.Module: Qwen2DecoderLayer_3"
 * (with_modules) and a python-stack module forward ("modeling_qwen2.py(243):
 * forward"). Kept even without keep_python: rv_layers finds layer
 * instances in them, and there are few (one per module call). */
static int python_module_event(const char *name, size_t len)
{
    static const char mod[] = "nn.Module: ", fwd[] = "): forward";
    if (len > sizeof(mod) - 1 && memcmp(name, mod, sizeof(mod) - 1) == 0)
        return 1;
    return len > sizeof(fwd) - 1 &&
           memcmp(name + len - (sizeof(fwd) - 1), fwd, sizeof(fwd) - 1) == 0 &&
           memmem(name, len, ".py(", 4) != NULL;
}

int rv_kineto_keeps(int ph, int cat, const char *name, size_t len, int keep_python)
{
    return ph == 'X' && cat >= 0 &&
           (cat != RV_CAT_PYTHON || keep_python || (name && python_module_event(name, len)));
}

int rv_kineto__parse_event(reader *r, int depth)
{
    evscan s;
    rv_event ev;
    int rc, more, ok;
    int64_t start = cur_off(r);

    if (ws(r) != '{') {
        /* Not an object: validate and count it as skipped. */
        r->t->skipped_events++;
        return skip_value(r, depth);
    }
    eat(r);
    memset(&s, 0, sizeof(s));
    s.cat = -1;
    s.flow_id = RV_NONE;
    rv_event_init(&ev);
    rv_buf_reset(&r->name);

    if ((rc = object_first(r)) < 0)
        return rc;
    for (more = rc; more; more = rc) {
        const char *k;
        size_t n = key(r, &k);
        rc = 0;
        if (n == 2 && k[0] == 'p' && k[1] == 'h') {
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            s.ph = (ok && r->sbuf.len == 1) ? r->sbuf.p[0] : '?';
        } else if (n == 3 && !memcmp(k, "cat", 3)) {
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            s.cat = (ok && r->sbuf.len <= MAX_SHORT) ? classify_cat(r->sbuf.p, r->sbuf.len) : -1;
        } else if (n == 4 && !memcmp(k, "name", 4)) {
            rc = rv_kineto__text_value(r, depth + 1, &r->name, &ok);
            if (rc == 0 && r->name.err)
                rc = FAIL(r, RV_ERR_LIMIT, "event name longer than %zu bytes", MAX_NAME);
            s.have_name = ok;
        } else if (n == 3 && !memcmp(k, "pid", 3)) {
            rc = read_short(r, depth + 1, s.pid, &s.pid_len, &s.have_pid);
        } else if (n == 3 && !memcmp(k, "tid", 3)) {
            rc = read_short(r, depth + 1, s.tid, &s.tid_len, &s.have_tid);
        } else if (n == 2 && k[0] == 't' && k[1] == 's') {
            rc = read_time(r, depth + 1, &s.ts_st, &s.ts_ns, &s.ts_off);
        } else if (n == 3 && !memcmp(k, "dur", 3)) {
            rc = read_time(r, depth + 1, &s.dur_st, &s.dur_ns, &s.dur_off);
        } else if (n == 4 && !memcmp(k, "args", 4)) {
            if (ws(r) == '{') {
                eat(r);
                rc = rv_kineto__parse_args(r, depth + 1, &ev);
            } else {
                rc = skip_value(r, depth + 1);
            }
        } else if (n == 2 && k[0] == 'i' && k[1] == 'd') {
            rc = rv_kineto__int_arg(r, depth + 1, 1, &s.flow_id);
        } else if (n == 2 && k[0] == 'b' && k[1] == 'p') {
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            s.bp_e = ok && r->sbuf.len == 1 && r->sbuf.p[0] == 'e';
        } else {
            rc = skip_value(r, depth + 1);
        }
        if (rc < 0)
            return rc;
        rc = object_next(r);
        if (rc < 0)
            return rc;
    }

    if (rv_kineto_keeps(s.ph, s.cat, s.have_name ? r->name.p : NULL, r->name.len,
                        r->opts->keep_python)) {
        if (s.ts_st == ST_ABSENT)
            return FAIL_AT(r, RV_ERR_INVALID, start,
                           "complete event (ph \"X\", cat \"%s\") has no \"ts\"",
                           rv_cat_name(s.cat));
        if (s.ts_st == ST_NOT_NUMBER)
            return FAIL_AT(r, RV_ERR_INVALID, s.ts_off, "\"ts\" is not a number");
        if (s.ts_st == ST_RANGE)
            return FAIL_AT(r, RV_ERR_INVALID, s.ts_off, "\"ts\" is out of range for int64 ns");
        if (s.dur_st == ST_NOT_NUMBER)
            return FAIL_AT(r, RV_ERR_INVALID, s.dur_off, "\"dur\" is not a number");
        if (s.dur_st == ST_RANGE)
            return FAIL_AT(r, RV_ERR_INVALID, s.dur_off, "\"dur\" is out of range for int64 ns");
        if (s.dur_st == ST_OK && s.dur_ns < 0)
            return FAIL_AT(r, RV_ERR_INVALID, s.dur_off, "negative \"dur\" (%" PRId64 " ns)",
                           s.dur_ns);
        ev.ts_ns = s.ts_ns;
        ev.dur_ns = s.dur_st == ST_OK ? s.dur_ns : 0;
        if (ev.ts_ns > 0 && ev.dur_ns > INT64_MAX - ev.ts_ns)
            return FAIL_AT(r, RV_ERR_INVALID, s.dur_off, "\"ts\" + \"dur\" overflows int64 ns");
        ev.cat = (uint8_t)s.cat;
        if (s.cat != RV_CAT_CUDA_SYNC)
            ev.sync_kind = RV_SYNC_NONE;
        rc = 0;
        ev.name = rv_kineto__intern(r, r->name.p, s.have_name ? r->name.len : 0, &rc);
        ev.pid = intern_cached(r, s.pid, s.have_pid ? s.pid_len : 0, r->last_pid, &r->last_pid_len,
                               &r->last_pid_id, &rc);
        ev.tid = intern_cached(r, s.tid, s.have_tid ? s.tid_len : 0, r->last_tid, &r->last_tid_len,
                               &r->last_tid_id, &rc);
        if (rc < 0)
            return rc;
        if (r->t->nevents >= r->max_events)
            return rv_error_tag(r->js.err, RV_REASON_EVENTS,
                                FAIL_AT(r, RV_ERR_LIMIT, start,
                                        "more than %zu events kept (the cap)", r->max_events));
        int64_t idx = rv_trace_push(r->t, &ev);
        if (idx < 0)
            return FAIL_AT(r, (int)idx, start, "cannot keep event (%s)", rv_err_name((int)idx));
        if ((rc = rv_shapes_commit(r->t, s.cat == RV_CAT_CPU_OP ? (int32_t)idx : -1, r->shp)) < 0)
            return FAIL_AT(r, rc, start, "cannot keep the op's shapes (%s)", rv_err_name(rc));
        if (ev.correlation == RV_NONE &&
            (rv_cat_is_gpu_task(s.cat) || s.cat == RV_CAT_RUNTIME || s.cat == RV_CAT_DRIVER))
            r->missing_corr++;
        return 0;
    }
    r->t->skipped_events++;
    if ((rc = rv_shapes_commit_mem(r->t, r->shp, s.ph == 'i' && s.have_name && s.ts_st == ST_OK,
                                   r->name.p, r->name.len, s.ts_ns)) < 0)
        return FAIL_AT(r, rc, start, "cannot keep a memory event (%s)", rv_err_name(rc));
    if ((s.ph == 's' || s.ph == 'f') && s.cat == -2 && s.flow_id != RV_NONE && s.ts_st == ST_OK)
        return add_flow(r, &s);
    return 0;
}

static int parse_events(reader *r, int depth)
{
    int c, rc;
    r->seen_events = 1;
    eat(r); /* '[' */
    c = ws(r);
    if (c == ']') {
        eat(r);
        return 0;
    }
    for (;;) {
        r->js.item = (int64_t)r->total_events;
        if ((rc = rv_kineto__parse_event(r, depth + 1)) < 0)
            return rc;
        r->total_events++;
    next:
        if ((rc = array_next(r, "',' or ']' after an event")) <= 0)
            break;
        if (r->par) {
            int joined = rv_kineto__par_join(r);
            if (joined < 0)
                return joined;
            if (joined == 1)
                goto next;
        }
    }
    if (rc < 0)
        return rc;
    r->js.item = -1;
    return 0;
}

/* ---------------------------------------------------------------- metadata */

static int parse_device(reader *r, int depth, size_t index)
{
    rv_device d = {.id = (int32_t)index};
    int rc, more, ok;
    int64_t v;
    if (ws(r) != '{')
        return skip_value(r, depth);
    eat(r);
    if ((rc = object_first(r)) < 0)
        return rc;
    for (more = rc; more; more = rc) {
        v = RV_NONE;
        if (key_is(r, "id")) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            if (v != RV_NONE)
                d.id = to_i32(v, d.id);
        } else if (key_is(r, "name")) {
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            if (rc == 0 && ok)
                d.name = rv_kineto__intern(r, r->sbuf.p, r->sbuf.len, &rc);
        } else if (key_is(r, "numSms")) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            d.num_sms = v < 0 ? 0 : to_i32(v, 0);
        } else if (key_is(r, "computeMajor")) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            d.compute_major = v < 0 ? 0 : to_i32(v, 0);
        } else if (key_is(r, "computeMinor")) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            d.compute_minor = v < 0 ? 0 : to_i32(v, 0);
        } else if (key_is(r, "totalGlobalMem")) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            d.total_mem = v < 0 ? 0 : v;
        } else {
            rc = skip_value(r, depth + 1);
        }
        if (rc < 0)
            return rc;
        if ((rc = object_next(r)) < 0)
            return rc;
    }
    if (r->t->ndevices >= 4096)
        return FAIL(r, RV_ERR_LIMIT, "more than 4096 devices in deviceProperties");
    if (rv_trace_add_device(r->t, &d) < 0)
        return FAIL(r, RV_ERR_NOMEM, "out of memory for devices");
    return 0;
}

static int parse_devices(reader *r, int depth)
{
    int rc = array_open(r, depth);
    for (size_t i = 0; rc > 0; i++) {
        if ((rc = parse_device(r, depth + 1, i)) < 0)
            return rc;
        rc = array_next(r, "',' or ']' in deviceProperties");
    }
    return rc;
}

/* One pg_config entry: {pg_name, ranks: [0, 1, ...], ...}. The ranks are
 * kept as the text a kernel's "Process Group Ranks" holds. */
static int parse_pg_entry(reader *r, int depth)
{
    int rc, more, ok;
    uint32_t name = 0, ranks = 0;
    if (ws(r) != '{')
        return skip_value(r, depth);
    eat(r);
    if ((rc = object_first(r)) < 0)
        return rc;
    for (more = rc; more; more = rc) {
        if (key_is(r, "pg_name")) {
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            if (rc == 0 && ok && r->sbuf.len > 0 && r->sbuf.len <= 4096)
                name = rv_kineto__intern(r, r->sbuf.p, r->sbuf.len, &rc);
        } else if (key_is(r, "ranks") && ws(r) == '[') {
            char list[4096];
            size_t len = 0;
            int fits = 1, c;
            eat(r);
            list[len++] = '[';
            for (c = ws(r); c != ']'; c = ws(r)) {
                int64_t v = RV_NONE;
                if ((rc = rv_kineto__int_arg(r, depth + 2, 0, &v)) < 0)
                    return rc;
                int m = snprintf(list + len, sizeof(list) - len, "%s%lld", len > 1 ? ", " : "",
                                 (long long)v);
                if (v < 0 || m < 0 || (size_t)m >= sizeof(list) - len - 1)
                    fits = 0;
                else
                    len += (size_t)m;
                c = ws(r);
                if (c == ',')
                    eat(r);
                else if (c != ']')
                    return fail_char(r, c, "',' or ']' in pg_config ranks");
            }
            eat(r);
            list[len++] = ']';
            if (fits && len > 2)
                ranks = rv_kineto__intern(r, list, len, &rc);
        } else {
            rc = skip_value(r, depth + 1);
        }
        if (rc < 0)
            return rc;
        if ((rc = object_next(r)) < 0)
            return rc;
    }
    if (name && ranks && r->npgc < 64) {
        r->pgc_name[r->npgc] = name;
        r->pgc_ranks[r->npgc++] = ranks;
    }
    return 0;
}

static int parse_pg_config(reader *r, int depth)
{
    int rc = array_open(r, depth);
    while (rc > 0) {
        if ((rc = parse_pg_entry(r, depth + 1)) < 0)
            return rc;
        rc = array_next(r, "',' or ']' in pg_config");
    }
    return rc;
}

/* distributedInfo and the collector's reverie object share a parser: both
 * may carry rank and world_size. */
static int parse_meta(reader *r, int depth, int reverie)
{
    int rc, more, ok;
    int64_t v;
    if (ws(r) != '{')
        return skip_value(r, depth);
    eat(r);
    if (reverie)
        r->seen_reverie = 1;
    if ((rc = object_first(r)) < 0)
        return rc;
    for (more = rc; more; more = rc) {
        uint32_t *dst = NULL;
        if (key_is(r, "rank") || key_is(r, "world_size")) {
            int32_t *i32 = key_is(r, "rank") ? &r->t->rank : &r->t->world_size;
            v = RV_NONE;
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            if (v != RV_NONE)
                *i32 = v < 0 ? RV_NONE : to_i32(v, RV_NONE);
        } else if (!reverie && key_is(r, "backend")) {
            dst = &r->t->backend;
        } else if (!reverie && key_is(r, "pg_config")) {
            rc = parse_pg_config(r, depth + 1);
        } else if (reverie && key_is(r, "gpu")) {
            dst = &r->rv_gpu;
        } else if (reverie && key_is(r, "cpu")) {
            dst = &r->t->platform_cpu;
        } else if (reverie && key_is(r, "driver")) {
            dst = &r->t->platform_driver;
        } else if (reverie && key_is(r, "cuda")) {
            dst = &r->t->platform_cuda;
        } else if (reverie && key_is(r, "framework")) {
            dst = &r->t->platform_framework;
        } else if (reverie && key_is(r, "job")) {
            dst = &r->t->job;
        } else if (reverie && key_is(r, "power_limit_w")) {
            int st;
            const char *txt;
            size_t len;
            rc = rv_kineto__num_value(r, depth + 1, &st, &txt, &len);
            if (rc == 0 && st == ST_OK) {
                char *end;
                double w = strtod(txt, &end);
                if (end != txt && w > 0 && w < 1e7)
                    r->t->power_limit_w = w;
            }
        } else {
            rc = skip_value(r, depth + 1);
        }
        if (dst) {
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            if (rc == 0 && ok)
                *dst = rv_kineto__intern(r, r->sbuf.p, r->sbuf.len, &rc);
        }
        if (rc < 0)
            return rc;
        if ((rc = object_next(r)) < 0)
            return rc;
    }
    return 0;
}

static int parse_top_object(reader *r)
{
    int rc, more;
    eat(r); /* '{' */
    if ((rc = object_first(r)) < 0)
        return rc;
    for (more = rc; more; more = rc) {
        if (key_is(r, "traceEvents")) {
            int c = ws(r);
            if (c != '[')
                return fail_char(r, c, "an array as the value of \"traceEvents\"");
            rc = parse_events(r, 1);
        } else if (key_is(r, "deviceProperties")) {
            rc = parse_devices(r, 1);
        } else if (key_is(r, "distributedInfo")) {
            rc = parse_meta(r, 1, 0);
        } else if (key_is(r, "reverie")) {
            rc = parse_meta(r, 1, 1);
        } else if (key_is(r, "baseTimeNanoseconds")) {
            int64_t v = 0;
            rc = rv_kineto__int_arg(r, 1, 0, &v);
            r->t->base_time_ns = v > 0 ? v : 0;
        } else {
            if (key_is(r, "nodes"))
                r->seen_et_nodes = 1;
            else if (key_is(r, "schema"))
                r->seen_et_schema = 1;
            rc = skip_value(r, 1);
        }
        if (rc < 0)
            return rc;
        if ((rc = object_next(r)) < 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- flows */

/* Sort key of an event that still lacks a correlation. */
typedef struct slot {
    uint32_t pid, tid;
    int64_t ts_ns;
    size_t index;
} slot;

static int cmp_slot(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts_ns != y->ts_ns)
        return x->ts_ns < y->ts_ns ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* -1, 0, 1 comparing slot e with the key (pid, tid, ts). */
static int cmp_key(const slot *e, uint32_t pid, uint32_t tid, int64_t ts)
{
    if (e->pid != pid)
        return e->pid < pid ? -1 : 1;
    if (e->tid != tid)
        return e->tid < tid ? -1 : 1;
    if (e->ts_ns != ts)
        return e->ts_ns < ts ? -1 : 1;
    return 0;
}

/* Fills the correlation of launch and GPU events that lack one from the
 * ac2g flow whose endpoint lands on them: "s" and "f" with bp "e" bind to
 * the enclosing slice on that pid/tid, a plain "f" to the next slice. */
static int fill_from_flows(reader *r)
{
    rv_trace *t = r->t;
    size_t n = 0;
    if (!r->missing_corr || !r->nflows)
        return 0;
    slot *sl = malloc(r->missing_corr * sizeof(*sl));
    if (!sl)
        return FAIL(r, RV_ERR_NOMEM, "out of memory matching flows");
    for (size_t i = 0; i < t->nevents && n < r->missing_corr; i++) {
        const rv_event *e = &t->events[i];
        if (e->correlation == RV_NONE &&
            (rv_cat_is_gpu_task(e->cat) || e->cat == RV_CAT_RUNTIME || e->cat == RV_CAT_DRIVER))
            sl[n++] = (slot){.pid = e->pid, .tid = e->tid, .ts_ns = e->ts_ns, .index = i};
    }
    qsort(sl, n, sizeof(*sl), cmp_slot);
    for (size_t k = 0; k < r->nflows; k++) {
        const flow *fl = &r->flows[k];
        /* lo = first slot with key >= (pid, tid, ts). */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cmp_key(&sl[mid], fl->pid, fl->tid, fl->ts_ns) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        const slot *hit = NULL;
        int exact = lo < n && cmp_key(&sl[lo], fl->pid, fl->tid, fl->ts_ns) == 0;
        if (!exact && (fl->ph == 's' || fl->bp_e)) {
            if (lo > 0) {
                const slot *e = &sl[lo - 1];
                if (e->pid == fl->pid && e->tid == fl->tid &&
                    e->ts_ns + t->events[e->index].dur_ns >= fl->ts_ns)
                    hit = e;
            }
        } else if (exact || (lo < n && sl[lo].pid == fl->pid && sl[lo].tid == fl->tid)) {
            hit = &sl[lo];
        }
        if (hit && t->events[hit->index].correlation == RV_NONE)
            t->events[hit->index].correlation = fl->id;
    }
    free(sl);
    return 0;
}

/* ---------------------------------------------------------------- driver */

#define ET_MESSAGE "this is a PyTorch execution trace"

int rv_kineto_error_is_et(const rv_error *err)
{
    return err && err->code == RV_ERR_UNSUPPORTED && err->reason == RV_REASON_IS_ET;
}

static int is_collective_kernel(const rv_trace *t, const rv_event *e)
{
    const char *n = rv_trace_str(t, e->name);
    return e->cat == RV_CAT_KERNEL && rv_kname_is_comm(n);
}

/* Collective kernels that record no group, sequence number or peer take
 * them from the CPU op of the same External id that does (some PyTorch
 * versions put them on record_param_comms only), so the job model can
 * match them by group rather than by order. */
static int groups_from_ops(reader *r)
{
    rv_trace *t = r->t;
    rv_map by_ext;
    int rc = 0;
    rv_map_init(&by_ext, t->nevents + 1);
    for (size_t i = 0; i < t->nevents && rc >= 0; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat == RV_CAT_CPU_OP && e->external_id >= 0 &&
            (e->pg || e->seq != RV_NONE || e->peer != RV_NONE))
            rc = rv_map_put(&by_ext, (uint64_t)e->external_id, (uint32_t)i);
    }
    for (size_t i = 0; by_ext.n && i < t->nevents && rc >= 0; i++) {
        rv_event *e = &t->events[i];
        uint32_t j;
        /* The name test (substring searches) last: few events pass the rest. */
        if (e->cat != RV_CAT_KERNEL || e->external_id < 0 || e->pg || e->seq != RV_NONE ||
            e->peer != RV_NONE || !rv_map_get(&by_ext, (uint64_t)e->external_id, &j) ||
            !is_collective_kernel(t, e))
            continue;
        const rv_event *op = &t->events[j];
        e->pg = op->pg;
        e->pg_ranks = op->pg_ranks;
        e->seq = op->seq;
        e->peer = op->peer;
    }
    rv_map_free(&by_ext);
    return rc < 0 ? FAIL_AT(r, rc, 0, "out of memory linking collectives to their groups") : 0;
}

static int finish(reader *r)
{
    rv_trace *t = r->t;
    int rc = 0;
    if (!r->seen_events) {
        if (r->seen_et_nodes || r->seen_et_schema)
            return rv_error_tag(r->js.err, RV_REASON_IS_ET,
                                FAIL_AT(r, RV_ERR_UNSUPPORTED, 0,
                                        ET_MESSAGE
                                        " (ET: top-level \"schema\" and "
                                        "\"nodes\"), not a Kineto trace; upload the Kineto trace "
                                        "(*.pt.trace.json) instead"));
        return FAIL_AT(r, RV_ERR_UNSUPPORTED, 0,
                       "no \"traceEvents\" key: not a Kineto / Chrome trace");
    }
    if (t->nevents == 0) {
        if (r->total_events == 0)
            return FAIL_AT(r, RV_ERR_UNSUPPORTED, 0,
                           "no trace events the engine can use: \"traceEvents\" is empty");
        return FAIL_AT(r, RV_ERR_UNSUPPORTED, 0,
                       "no trace events the engine can use: none of the %zu events is a "
                       "complete (ph \"X\") CPU op, annotation, runtime or GPU event",
                       r->total_events);
    }
    if ((rc = fill_from_flows(r)) < 0 || (rc = groups_from_ops(r)) < 0)
        return rc;
    /* Collectives naming their group but not its members: pg_config's. */
    for (size_t i = 0; r->npgc && i < t->nevents; i++) {
        rv_event *e = &t->events[i];
        for (size_t k = 0; e->pg && !e->pg_ranks && k < r->npgc; k++)
            if (r->pgc_name[k] == e->pg)
                e->pg_ranks = r->pgc_ranks[k];
    }
    const char *src =
        rv_trace_source_name(r->seen_reverie ? RV_SOURCE_COLLECTOR : RV_SOURCE_KINETO);
    t->source_format = rv_kineto__intern(r, src, strlen(src), &rc);
    if (rc < 0)
        return rc;
    if (r->rv_gpu) {
        t->platform_gpu = r->rv_gpu;
    } else if (t->ndevices) {
        t->platform_gpu = t->devices[0].name;
        for (size_t i = 0; i < t->ndevices; i++)
            if (t->devices[i].id == 0) {
                t->platform_gpu = t->devices[i].name;
                break;
            }
    }
    t->input_bytes = (size_t)(r->js.base + (int64_t)r->js.end);
    return 0;
}

static int parse_document(reader *r)
{
    int c = ws(r), rc;
    if (c == '{')
        rc = parse_top_object(r);
    else if (c == '[')
        rc = parse_events(r, 0);
    else if (c < 0 && !r->js.rc && cur_off(r) == 0)
        return FAIL(r, RV_ERR_PARSE, "empty input");
    else if (c < 0)
        return fail_eof(r, "the document");
    else {
        char tmp[12];
        return FAIL(r, RV_ERR_PARSE,
                    "not JSON trace data: the top-level value must be an object with "
                    "\"traceEvents\" or an array of events, found %s",
                    rv_jscan_show_char(c, tmp));
    }
    if (rc < 0)
        return rc;
    c = ws(r);
    if (c >= 0) {
        char tmp[12];
        return FAIL(r, RV_ERR_PARSE, "unexpected %s after the top-level value",
                    rv_jscan_show_char(c, tmp));
    }
    if (r->js.rc)
        return r->js.rc;
    return finish(r);
}

int rv_kineto__reader_init(reader *r, const rv_kineto_opts *opts)
{
    memset(r, 0, sizeof(*r));
    r->opts = opts;
    r->max_events = opts->max_events ? opts->max_events : RV_TRACE_MAX_EVENTS;
    if (r->max_events > RV_TRACE_MAX_EVENTS)
        r->max_events = RV_TRACE_MAX_EVENTS;
    rv_buf_init(&r->name, MAX_NAME);
    rv_buf_init(&r->sbuf, MAX_NAME);
    rv_buf_init(&r->fix, 3 * MAX_NAME); /* each bad byte becomes 3 */
    r->t = rv_trace_new();
    r->shp = rv_shapes_pending_new();
    return r->t && r->shp ? 0 : RV_ERR_NOMEM;
}

void rv_kineto__reader_free(reader *r)
{
    rv_kineto__par_stop(r);
    rv_jscan_close(&r->js);
    rv_buf_free(&r->name);
    rv_buf_free(&r->sbuf);
    rv_buf_free(&r->fix);
    free(r->flows);
    r->flows = NULL;
    rv_shapes_pending_free(r->shp);
    r->shp = NULL;
    rv_trace_free(r->t);
    r->t = NULL;
}

/* Common driver: exactly one of mem (with len) or f is set. */
static int run(const unsigned char *mem, size_t len, FILE *f, const rv_kineto_opts *opts,
               rv_trace **out, rv_error *err)
{
    static const rv_kineto_opts defaults = {0};
    reader r;
    int rc;

    rv_error_clear(err);
    if (out)
        *out = NULL;
    if (!out)
        return rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "rv_kineto: out is NULL");
    if (rv_kineto__reader_init(&r, opts ? opts : &defaults) < 0) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    rc = rv_jscan_open(&r.js, mem, len, f,
                       r.opts->max_input_bytes ? r.opts->max_input_bytes : DEFAULT_INPUT, err);
    if (rc < 0)
        goto out;
    r.js.item_name = "event";
    /* One array from the start when the input says its size: Kineto
     * events take 230-470 bytes of JSON each on real traces, so 200 rarely
     * leaves a copy to make. Bounded, since the size is the input's word. */
    size_t hint = r.js.size_hint < r.js.max_input ? r.js.size_hint : r.js.max_input;
    size_t expect = hint / RESERVE_BYTES_PER_EVENT;
    if (expect > r.max_events)
        expect = r.max_events;
    if (expect > RESERVE_MAX_EVENTS)
        expect = RESERVE_MAX_EVENTS;
    (void)rv_trace_reserve(r.t, expect); /* a hint: push grows the array anyway */

    if ((rc = rv_kineto__par_start(&r)) == 0)
        rc = parse_document(&r);
    if (rc == 0) {
        *out = r.t;
        r.t = NULL;
    }
out:
    rv_kineto__reader_free(&r);
    return rc;
}

int rv_kineto_read_buffer(const void *data, size_t len, const rv_kineto_opts *opts, rv_trace **out,
                          rv_error *err)
{
    static const unsigned char empty[1] = {0};
    return run(data ? data : empty, data ? len : 0, NULL, opts, out, err);
}

int rv_kineto_read_stream(FILE *f, const rv_kineto_opts *opts, rv_trace **out, rv_error *err)
{
    if (!f) {
        if (out)
            *out = NULL;
        return rv_error_set(err, RV_ERR_IO, -1, -1, "no input stream");
    }
    return run(NULL, 0, f, opts, out, err);
}

int rv_kineto_read_file(const char *path, const rv_kineto_opts *opts, rv_trace **out, rv_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (out)
            *out = NULL;
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open %s", path);
    }
    int rc = rv_kineto_read_stream(f, opts, out, err);
    fclose(f);
    return rc;
}
