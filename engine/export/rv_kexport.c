/* The simulated run in the input's Kineto dialect. See rv_kexport.h and
 * docs/internals/kexport.md. */
#include "export/rv_kexport.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_jscan.h"
#include "util/rv_jsonw.h"
#include "reader/rv_kineto.h"
#include "util/rv_map.h"

/* Members of one event beyond this are an error (Kineto writes about ten). */
#define MAX_MEMBERS 256
/* Decoded ph/cat/pid/tid/ts strings longer than this are not ours to read. */
#define MAX_SHORT 4096
/* The row the what-if annotations go on. */
#define WHATIF_TID "reverie what-if"
/* Streams of threads a model added are numbered from here. */
#define INSERTED_STREAM_BASE 1000000

typedef struct member {
    char key[RV_JSCAN_MAX_KEY + 1];
    size_t klen;
    size_t vs, ve; /* the raw value: plain[vs..ve) */
} member;

typedef struct ctx {
    const rv_trace *tr;
    const rv_graph *bg, *pg;
    const rv_sim *ps;
    const char *plain;
    size_t plain_len;
    rv_jscan js;
    rv_buf *out;
    rv_kexport_stats st;
    int32_t *ev2task; /* trace event -> original task, -1 */
    int64_t *xs;      /* per original task: where its exported interval starts */
    int64_t *ia, *ib; /* per step: simulated start and end marker */
    rv_map threads;   /* (pid << 32 | tid) -> graph thread */
    size_t kept;      /* kept events seen so far, the reader's ordinal */
    member *mem;
    rv_buf sbuf;
    rv_buf name;          /* the event's name: whether the reader kept it may hang on it */
    int64_t lo_ns, hi_ns; /* the exported run's span, graph time */
    int64_t fresh;        /* the last flow or correlation id handed out */
} ctx;

/* ---------------------------------------------------------------- times */

/* A measured time m (graph time) on thread th moved to the simulation by
 * the simulator's one time map, in its export form (rv_sim.h). */
static int64_t map_thread(const ctx *c, int32_t thread, int64_t m)
{
    rv_sim_map map = {.g = c->pg, .s = c->ps, .starts = c->xs, .base = c->bg, .stretch = 1};
    return rv_sim_map_at(&map, thread, m);
}

/* For threads without tasks: the steps' markers, measured to simulated,
 * piecewise linear between them, shifted outside. */
static int64_t map_steps(const ctx *c, int64_t m)
{
    const rv_graph *g = c->pg;
    size_t n = g->niters;
    if (n == 0)
        return m;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->iters[mid].start_ns <= m)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return c->ia[0] - (g->iters[0].start_ns - m);
    size_t i = lo - 1;
    const rv_iter *it = &g->iters[i];
    if (m <= it->end_ns)
        return rv_sim_lerp(m, it->start_ns, it->end_ns, c->ia[i], c->ib[i]);
    if (i + 1 < n && g->iters[i + 1].start_ns > it->end_ns)
        return rv_sim_lerp(m, it->end_ns, g->iters[i + 1].start_ns, c->ib[i], c->ia[i + 1]);
    return c->ib[i] + (m - it->end_ns);
}

static int32_t thread_of(const ctx *c, uint32_t pid, uint32_t tid)
{
    uint32_t v;
    if (rv_map_get(&c->threads, ((uint64_t)pid << 32) | tid, &v))
        return (int32_t)v;
    return -1;
}

static int64_t map_time(const ctx *c, int32_t thread, int64_t m)
{
    return thread >= 0 ? map_thread(c, thread, m) : map_steps(c, m);
}

/* ---------------------------------------------------------------- setup */

static int prepare(ctx *c, rv_error *err)
{
    const rv_graph *bg = c->bg, *pg = c->pg;
    const rv_trace *tr = c->tr;
    int rc = 0;

    c->ev2task = malloc((tr->nevents ? tr->nevents : 1) * sizeof(*c->ev2task));
    c->xs = malloc((bg->ntasks ? bg->ntasks : 1) * sizeof(*c->xs));
    c->ia = malloc((bg->niters ? bg->niters : 1) * sizeof(*c->ia));
    c->ib = malloc((bg->niters ? bg->niters : 1) * sizeof(*c->ib));
    c->mem = malloc(MAX_MEMBERS * sizeof(*c->mem));
    if (!c->ev2task || !c->xs || !c->ia || !c->ib || !c->mem)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory for the export");
    for (size_t i = 0; i < tr->nevents; i++)
        c->ev2task[i] = -1;
    rv_map_init(&c->threads, (size_t)RV_GRAPH_MAX_THREADS * 4);
    rv_sim_call_starts(c->pg, c->ps, c->bg->ntasks, c->xs);
    for (size_t i = 0; i < bg->ntasks && rc >= 0; i++) {
        const rv_task *t = &bg->tasks[i];
        if (t->event < 0 || (size_t)t->event >= tr->nevents)
            continue;
        c->ev2task[t->event] = (int32_t)i;
        const rv_event *ev = &tr->events[t->event];
        rc = rv_map_put(&c->threads, ((uint64_t)ev->pid << 32) | ev->tid, (uint32_t)t->thread);
    }
    if (rc < 0)
        return rv_error_set(err, rc, -1, -1, "cannot index the trace's threads");
    for (size_t i = 0; i < bg->niters; i++) {
        c->ia[i] = map_thread(c, bg->iters[i].thread, bg->iters[i].start_ns);
        c->ib[i] = map_thread(c, bg->iters[i].thread, bg->iters[i].end_ns);
    }
    /* The run's span, and the shift that keeps every time >= 0. */
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < pg->ntasks; i++) {
        if (pg->tasks[i].flags & RV_TF_REMOVED)
            continue;
        int64_t a = i < bg->ntasks ? c->xs[i] : c->ps->start_ns[i];
        if (a < lo)
            lo = a;
        if (c->ps->end_ns[i] > hi)
            hi = c->ps->end_ns[i];
    }
    int64_t low = lo;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *ev = &tr->events[i];
        if (c->ev2task[i] >= 0)
            continue;
        int64_t a = map_time(c, thread_of(c, ev->pid, ev->tid), ev->ts_ns - bg->origin_ns);
        if (a < low)
            low = a;
    }
    c->lo_ns = lo == INT64_MAX ? 0 : lo;
    c->hi_ns = hi == INT64_MIN ? 0 : hi;
    if (low != INT64_MAX && bg->origin_ns + low < 0)
        c->st.shift_ns = -(bg->origin_ns + low);
    return 0;
}

/* ---------------------------------------------------------------- output */

/* An absolute time for graph time v, in microseconds with ns digits. */
static void put_time(ctx *c, int64_t v)
{
    int64_t ns = c->bg->origin_ns + v + c->st.shift_ns;
    if (ns < 0)
        ns = 0;
    rv_buf_printf(c->out, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

static void put_dur(ctx *c, int64_t d)
{
    if (d < 0)
        d = 0;
    rv_buf_printf(c->out, "%" PRId64 ".%03" PRId64, d / 1000, d % 1000);
}

/* A pid or tid as Kineto writes it: a number when it is one. */
static void put_id(ctx *c, const char *s)
{
    size_t n = strlen(s), i = s[0] == '-' ? 1 : 0;
    int digits = n > i && n - i < 19;
    for (size_t k = i; digits && k < n; k++)
        digits = s[k] >= '0' && s[k] <= '9';
    if (digits && !(s[i] == '0' && n - i > 1))
        rv_buf_add(c->out, s, n);
    else
        rv_jsonw_str(c->out, s);
}

/* Whether raw JSON text holds a control byte inside a string (the reader
 * takes them; strict parsers do not). */
static int raw_controls(const char *p, size_t n)
{
    int in = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (in && ch == '\\')
            i++;
        else if (ch == '"')
            in = !in;
        else if (in && ch < 0x20)
            return 1;
    }
    return 0;
}

/* Raw bytes of the original; text that is not UTF-8 is repaired, and a
 * control byte inside a string is escaped. */
static void put_raw(ctx *c, size_t vs, size_t ve)
{
    const char *p = c->plain + vs;
    size_t n = ve - vs;
    if (raw_controls(p, n)) {
        rv_buf fixed = RV_BUF_INIT(n * 6 + 1);
        int in = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)p[i];
            if (in && ch == '\\' && i + 1 < n) {
                rv_buf_add(&fixed, p + i, 2);
                i++;
                continue;
            }
            if (ch == '"')
                in = !in;
            if (in && ch < 0x20)
                rv_buf_printf(&fixed, "\\u%04x", ch);
            else
                rv_buf_addc(&fixed, ch);
        }
        if (fixed.err)
            c->out->err = c->out->err ? c->out->err : fixed.err;
        else
            rv_jsonw_utf8_fix(c->out, fixed.p, fixed.len);
        rv_buf_free(&fixed);
        return;
    }
    if (rv_jsonw_utf8_valid(p, n) == n)
        rv_buf_add(c->out, p, n);
    else
        rv_jsonw_utf8_fix(c->out, p, n);
}

static void put_key(ctx *c, int *first, const char *k, size_t n)
{
    if (!*first)
        rv_buf_addc(c->out, ',');
    *first = 0;
    rv_jsonw_strn(c->out, k, n);
    rv_buf_addc(c->out, ':');
}

/* ---------------------------------------------------------------- events */

typedef struct evinfo {
    char ph;
    int cat; /* rv_kineto_category, -1 when absent */
    int have_ts, have_dur;
    int64_t ts_ns, dur_ns;
    char pid[64], tid[64];
    int have_pid, have_tid;
    int have_name; /* c->name holds the last "name", as text */
} evinfo;

/* A time value (number or numeric string, us) to ns; 0 when it is not one. */
static int read_time(ctx *c, int64_t *ns)
{
    rv_jscan *s = &c->js;
    int ch = rv_jscan_ws(s);
    if (ch == '"') {
        rv_jscan_eat(s);
        if (rv_jscan_string(s, &c->sbuf) < 0)
            return -1;
        return !c->sbuf.err &&
               rv_jscan_dec_i64(c->sbuf.p ? c->sbuf.p : "", c->sbuf.len, 3, ns) == RV_JSCAN_OK;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        if (rv_jscan_number(s) < 0)
            return -1;
        return rv_jscan_dec_i64(s->num, s->num_len, 3, ns) == RV_JSCAN_OK;
    }
    return rv_jscan_skip(s, 2) < 0 ? -1 : 0;
}

/* A string or a number as text into b, as the reader takes an event's
 * name: 1 when it is text, 0 when not (other values are skipped), -1 on a
 * scan error. */
static int read_text(ctx *c, rv_buf *b)
{
    rv_jscan *s = &c->js;
    int ch = rv_jscan_ws(s);
    if (ch == '"') {
        rv_jscan_eat(s);
        if (rv_jscan_string(s, b) < 0)
            return -1;
        return !b->err;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        if (rv_jscan_number(s) < 0)
            return -1;
        rv_buf_reset(b);
        return rv_buf_add(b, s->num, s->num_len) == 0;
    }
    return rv_jscan_skip(s, 2) < 0 ? -1 : 0;
}

/* A short string or number value into out (cap bytes); 1 when read. */
static int read_short(ctx *c, char *out, size_t cap)
{
    int r = read_text(c, &c->sbuf);
    if (r != 1)
        return r;
    const char *p = rv_buf_str(&c->sbuf);
    size_t n = c->sbuf.len;
    /* A NUL inside never matches what the reader compares in full. */
    if (n >= cap || memchr(p, '\0', n))
        return 0;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

/* Reads one event object ('{' consumed) into c->mem and *e. Returns the
 * member count or a negative rv_err. */
static int read_event(ctx *c, evinfo *e)
{
    rv_jscan *s = &c->js;
    int n = 0, more = rv_jscan_object_first(s);
    memset(e, 0, sizeof(*e));
    e->cat = -1;
    for (; more > 0; more = rv_jscan_object_next(s)) {
        if (n == MAX_MEMBERS)
            return rv_jscan_fail_at(s, RV_ERR_LIMIT, rv_jscan_off(s),
                                    "an event with more than %d members", MAX_MEMBERS);
        member *m = &c->mem[n];
        const rv_buf *k = &s->key;
        m->klen = k->err ? 0 : k->len; /* a key too long to be Kineto's is dropped */
        memcpy(m->key, rv_buf_str(k), m->klen);
        m->key[m->klen] = '\0';
        rv_jscan_ws(s);
        m->vs = (size_t)rv_jscan_off(s);
        int r;
        char tmp[64];
        if (m->klen == 2 && !memcmp(m->key, "ph", 2)) {
            r = read_short(c, tmp, sizeof(tmp));
            e->ph = r == 1 && tmp[0] && !tmp[1] ? tmp[0] : '?';
        } else if (m->klen == 3 && !memcmp(m->key, "cat", 3)) {
            r = read_short(c, tmp, sizeof(tmp));
            /* The last "cat" counts, as in the reader. */
            e->cat = r == 1 ? rv_kineto_category(tmp, strlen(tmp)) : -1;
        } else if (m->klen == 4 && !memcmp(m->key, "name", 4)) {
            r = e->have_name = read_text(c, &c->name);
        } else if (m->klen == 3 && !memcmp(m->key, "pid", 3)) {
            r = e->have_pid = read_short(c, e->pid, sizeof(e->pid));
        } else if (m->klen == 3 && !memcmp(m->key, "tid", 3)) {
            r = e->have_tid = read_short(c, e->tid, sizeof(e->tid));
        } else if (m->klen == 2 && !memcmp(m->key, "ts", 2)) {
            r = e->have_ts = read_time(c, &e->ts_ns);
        } else if (m->klen == 3 && !memcmp(m->key, "dur", 3)) {
            r = e->have_dur = read_time(c, &e->dur_ns);
        } else {
            r = rv_jscan_skip(s, 2);
        }
        if (r < 0 || s->rc)
            return s->rc ? s->rc : r;
        m->ve = (size_t)rv_jscan_off(s);
        if (m->klen)
            n++;
    }
    return more < 0 ? more : n;
}

/* Writes the event in c->mem with ts/dur replaced when asked. */
static void write_event(ctx *c, int n, int new_ts, int64_t ts, int new_dur, int64_t dur)
{
    int first = 1, wrote_dur = 0;
    if (c->st.events_out++)
        rv_buf_addc(c->out, ',');
    rv_buf_addc(c->out, '{');
    for (int i = 0; i < n; i++) {
        const member *m = &c->mem[i];
        put_key(c, &first, m->key, m->klen);
        if (new_ts && m->klen == 2 && !memcmp(m->key, "ts", 2)) {
            put_time(c, ts);
        } else if (new_dur && m->klen == 3 && !memcmp(m->key, "dur", 3)) {
            put_dur(c, dur);
            wrote_dur = 1;
        } else {
            put_raw(c, m->vs, m->ve);
        }
    }
    if (new_dur && !wrote_dur) {
        put_key(c, &first, "dur", 3);
        put_dur(c, dur);
    }
    rv_buf_addc(c->out, '}');
}

/* One element of traceEvents: copied, re-timed, or left out. */
static int export_event(ctx *c)
{
    rv_jscan *s = &c->js;
    const rv_graph *bg = c->bg;
    evinfo e;
    if (rv_jscan_ws(s) != '{') {
        size_t vs = (size_t)rv_jscan_off(s);
        if (rv_jscan_skip(s, 2) < 0)
            return s->rc;
        if (c->st.events_out++)
            rv_buf_addc(c->out, ',');
        put_raw(c, vs, (size_t)rv_jscan_off(s));
        return 0;
    }
    int64_t at = rv_jscan_off(s);
    rv_jscan_eat(s);
    int n = read_event(c, &e);
    if (n < 0)
        return n;
    /* The export reads an original as the reader does by default. */
    if (rv_kineto_keeps(e.ph, e.cat, e.have_name ? c->name.p : NULL, c->name.len, 0)) {
        /* One of the events the reader kept: the k-th. */
        size_t k = c->kept++;
        if (k >= c->tr->nevents || !e.have_ts || c->tr->events[k].ts_ns != e.ts_ns)
            return rv_jscan_fail_at(s, RV_ERR_INVALID, at,
                                    "the original does not match the parsed trace (event %zu)", k);
        const rv_event *ev = &c->tr->events[k];
        int32_t ti = c->ev2task[k];
        c->st.retimed++;
        if (ti >= 0) {
            if (c->pg->tasks[ti].flags & RV_TF_REMOVED) {
                c->st.retimed--;
                c->st.removed++;
                return 0;
            }
            int64_t a = c->xs[ti];
            write_event(c, n, 1, a, 1, c->ps->end_ns[ti] - a);
            return 0;
        }
        int32_t th = thread_of(c, ev->pid, ev->tid);
        int64_t m0 = ev->ts_ns - bg->origin_ns;
        int64_t a = map_time(c, th, m0), b = map_time(c, th, m0 + ev->dur_ns);
        write_event(c, n, 1, a, 1, b - a);
        return 0;
    }
    if ((e.ph == 's' || e.ph == 'f' || e.ph == 't') && e.cat == -2) {
        c->st.flows_in++;
        return 0; /* written anew from the simulation */
    }
    if (e.ph == 'M' || !e.have_ts) {
        write_event(c, n, 0, 0, 0, 0);
        return 0;
    }
    int32_t th = -1;
    if (e.have_pid && e.have_tid) {
        uint32_t pid = rv_strtab_find(&c->tr->strings, e.pid, strlen(e.pid));
        uint32_t tid = rv_strtab_find(&c->tr->strings, e.tid, strlen(e.tid));
        if (pid != UINT32_MAX && tid != UINT32_MAX)
            th = thread_of(c, pid, tid);
    }
    int64_t m0 = e.ts_ns - bg->origin_ns;
    int64_t a = map_time(c, th, m0);
    int64_t d = e.have_dur ? map_time(c, th, m0 + e.dur_ns) - a : 0;
    c->st.retimed++;
    write_event(c, n, 1, a, e.have_dur, d);
    return 0;
}

/* ---------------------------------------------------------------- additions */

static void begin_event(ctx *c)
{
    if (c->st.events_out++)
        rv_buf_addc(c->out, ',');
}

/* One ac2g pair per launched GPU task, from its launch to its start. The
 * id is the correlation; a launch of several GPU tasks (a CUDA graph) gives
 * each further pair a fresh id above every correlation, so no two pairs
 * share one. */
static int write_flows(ctx *c)
{
    const rv_graph *g = c->pg;
    const rv_trace *tr = c->tr;
    int64_t fresh = 0;
    rv_map used;
    int rc = 0;
    rv_map_init(&used, RV_TRACE_MAX_EVENTS);
    for (size_t i = 0; i < tr->nevents; i++)
        if (tr->events[i].correlation > fresh)
            fresh = tr->events[i].correlation;
    for (size_t i = 0; i < tr->nevents; i++)
        if (tr->events[i].external_id > fresh)
            fresh = tr->events[i].external_id;
    for (size_t i = 0; i < c->bg->ntasks && rc >= 0; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->event < 0 || t->launch < 0 || (t->flags & RV_TF_REMOVED) ||
            (g->tasks[t->launch].flags & RV_TF_REMOVED))
            continue;
        const rv_event *ke = &tr->events[t->event];
        const rv_task *l = &g->tasks[t->launch];
        if (ke->correlation == RV_NONE || l->event < 0)
            continue;
        const rv_event *le = &tr->events[l->event];
        int64_t id = ke->correlation;
        rc = rv_map_put(&used, (uint64_t)id, 0);
        if (rc == 0 && fresh < INT64_MAX)
            id = ++fresh;
        for (int f = 0; f < 2 && rc >= 0; f++) {
            const rv_event *at = f ? ke : le;
            begin_event(c);
            rv_buf_printf(c->out, "{\"ph\":\"%s\",\"id\":%" PRId64 ",\"pid\":", f ? "f" : "s", id);
            put_id(c, rv_trace_str(tr, at->pid));
            rv_buf_adds(c->out, ",\"tid\":");
            put_id(c, rv_trace_str(tr, at->tid));
            rv_buf_adds(c->out, ",\"ts\":");
            put_time(c, f ? c->xs[i] : c->xs[t->launch]);
            rv_buf_adds(c->out, f ? ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}"
                                  : ",\"cat\":\"ac2g\",\"name\":\"ac2g\"}");
        }
        c->st.flows++;
    }
    rv_map_free(&used);
    c->fresh = fresh;
    return rc < 0 ? rc : 0;
}

static const char *cat_text(int cat)
{
    switch (cat) {
    case RV_CAT_MEMCPY: return "gpu_memcpy";
    case RV_CAT_MEMSET: return "gpu_memset";
    case RV_CAT_KERNEL: return "kernel";
    default: return "cpu_op";
    }
}

/* Whether inserted task i falls in idle time of original stream thread
 * to (the stream's tasks run in order, so their simulated starts are). */
static int fits_stream(const ctx *c, int32_t to, size_t i)
{
    const rv_thread *th = &c->pg->threads[to];
    const int64_t *st = c->ps->start_ns, *en = c->ps->end_ns;
    int32_t lo = th->first, hi = th->first + th->norig;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (st[mid] <= st[i])
            lo = mid + 1;
        else
            hi = mid;
    }
    int32_t p = lo - 1;
    if (p >= th->first && en[p] > st[i])
        return 0;
    return p + 1 >= th->first + th->norig || st[p + 1] >= en[i];
}

/* For each thread a model added: the original stream (same device, stream
 * and row) it folds into when all its tasks fall in that stream's idle
 * time, as AMP's casts do between the kernels they serve; one thread per
 * stream. -1: it keeps a stream of its own. */
static int32_t *fold_threads(const ctx *c)
{
    const rv_graph *g = c->pg, *bg = c->bg;
    int32_t *to = malloc((g->nthreads ? g->nthreads : 1) * sizeof(*to));
    uint8_t *taken = calloc(g->nthreads ? g->nthreads : 1, 1);
    for (size_t k = 0; to && taken && k < g->nthreads; k++) {
        const rv_thread *s = &g->threads[k];
        to[k] = -1;
        if (k < bg->nthreads || s->kind != RV_THREAD_GPU)
            continue;
        for (size_t o = 0; o < bg->nthreads; o++) {
            const rv_thread *th = &g->threads[o];
            if (th->kind == RV_THREAD_GPU && th->norig > 0 && !taken[o] &&
                th->device == s->device && th->stream == s->stream && th->pid == s->pid &&
                th->tid == s->tid) {
                to[k] = (int32_t)o;
                break;
            }
        }
    }
    for (size_t i = bg->ntasks; to && taken && i < g->ntasks; i++) {
        int32_t k = g->tasks[i].thread;
        if (to[k] >= 0 && !(g->tasks[i].flags & RV_TF_REMOVED) && !fits_stream(c, to[k], i))
            to[k] = -1;
    }
    for (size_t k = bg->nthreads; to && taken && k < g->nthreads; k++) {
        if (to[k] >= 0 && taken[to[k]])
            to[k] = -1;
        else if (to[k] >= 0)
            taken[to[k]] = 1;
    }
    if (!taken) {
        free(to);
        to = NULL;
    }
    free(taken);
    return to;
}

/* For each inserted task: the call that launches it in the export, the
 * launch of the original task the model put it after (the edge from that
 * anchor), or -1. */
static int32_t *inserted_launchers(const ctx *c)
{
    const rv_graph *g = c->pg, *bg = c->bg;
    size_t n = g->ntasks - bg->ntasks;
    int32_t *l = malloc((n ? n : 1) * sizeof(*l));
    for (size_t i = 0; l && i < n; i++)
        l[i] = -1;
    for (size_t e = 0; l && e < g->nedges; e++) {
        const rv_edge *ed = &g->edges[e];
        if (ed->kind != RV_EDGE_OTHER || ed->dst < (int32_t)bg->ntasks ||
            ed->src >= (int32_t)bg->ntasks || ed->src < 0 || l[ed->dst - bg->ntasks] >= 0)
            continue;
        const rv_task *a = &g->tasks[ed->src];
        int32_t call = a->kind == RV_TASK_CPU ? ed->src : a->launch;
        if (call >= 0 && g->tasks[call].kind == RV_TASK_CPU && g->tasks[call].event >= 0 &&
            !(g->tasks[call].flags & RV_TF_REMOVED))
            l[ed->dst - bg->ntasks] = call;
    }
    return l;
}

/* A zero-length launch call for an inserted task, at the end of the call
 * that launched its anchor, with its flow pair. */
static void write_launch(ctx *c, int32_t call, size_t task, int64_t id, const char *pid,
                         const char *tid)
{
    const rv_trace *tr = c->tr;
    const rv_event *le = &tr->events[c->pg->tasks[call].event];
    int64_t at = c->ps->end_ns[call];
    begin_event(c);
    rv_buf_adds(c->out, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\","
                        "\"pid\":");
    put_id(c, rv_trace_str(tr, le->pid));
    rv_buf_adds(c->out, ",\"tid\":");
    put_id(c, rv_trace_str(tr, le->tid));
    rv_buf_adds(c->out, ",\"ts\":");
    put_time(c, at);
    rv_buf_printf(
        c->out, ",\"dur\":0,\"args\":{\"correlation\":%" PRId64 ",\"reverie_inserted\":true}}", id);
    for (int f = 0; f < 2; f++) {
        begin_event(c);
        rv_buf_printf(c->out, "{\"ph\":\"%s\",\"id\":%" PRId64 ",\"pid\":", f ? "f" : "s", id);
        put_id(c, f ? pid : rv_trace_str(tr, le->pid));
        rv_buf_adds(c->out, ",\"tid\":");
        if (f && tid[0] == '#')
            rv_buf_adds(c->out, tid + 1);
        else
            put_id(c, f ? tid : rv_trace_str(tr, le->tid));
        rv_buf_adds(c->out, ",\"ts\":");
        put_time(c, f ? c->ps->start_ns[task] : at);
        rv_buf_adds(c->out, f ? ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}"
                              : ",\"cat\":\"ac2g\",\"name\":\"ac2g\"}");
    }
    c->st.flows++;
}

/* Tasks a model added. GPU work goes on the stream it serves when it fits
 * in that stream's idle time (fold_threads), else on a stream of its own
 * (1000000 + k), launched by a zero-length call after its anchor's launch
 * when it has one; CPU work on a row of its own. */
static int write_inserted(ctx *c)
{
    const rv_graph *g = c->pg, *bg = c->bg;
    const rv_trace *tr = c->tr;
    int32_t *fold = fold_threads(c), *launcher = inserted_launchers(c);
    if (!fold || !launcher) {
        free(fold);
        free(launcher);
        return RV_ERR_NOMEM;
    }
    for (size_t i = bg->ntasks; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->flags & RV_TF_REMOVED)
            continue;
        int32_t ti = fold[t->thread] >= 0 ? fold[t->thread] : t->thread;
        const rv_thread *th = &g->threads[ti];
        int cpu = th->kind == RV_THREAD_CPU;
        int own = (size_t)ti >= bg->nthreads;
        int64_t stream =
            own ? INSERTED_STREAM_BASE + (int64_t)(ti - (int32_t)bg->nthreads) : th->stream;
        char tid[64];
        if (cpu && own)
            snprintf(tid, sizeof(tid), "reverie inserted %d", ti);
        else if (cpu || !own)
            snprintf(tid, sizeof(tid), "%s", rv_trace_str(tr, th->tid));
        else
            snprintf(tid, sizeof(tid), "#%" PRId64, stream); /* '#': a number as is */
        const char *pid = rv_trace_str(tr, th->pid);
        int64_t corr = -1;
        int32_t call = launcher[i - bg->ntasks];
        if (!cpu && call >= 0 && c->fresh < INT64_MAX) {
            corr = ++c->fresh;
            write_launch(c, call, i, corr, pid, tid);
            c->st.launched++;
        }
        const char *name = t->name ? rv_trace_str(tr, t->name) : "";
        begin_event(c);
        rv_buf_adds(c->out, "{\"ph\":\"X\",\"cat\":");
        rv_jsonw_str(c->out, cpu ? "cpu_op" : cat_text(t->cat));
        rv_buf_adds(c->out, ",\"name\":");
        if (name[0])
            rv_jsonw_str(c->out, name);
        else
            rv_buf_printf(c->out, "\"reverie inserted %s\"", cpu ? "cpu_op" : cat_text(t->cat));
        rv_buf_adds(c->out, ",\"pid\":");
        put_id(c, pid);
        rv_buf_adds(c->out, ",\"tid\":");
        if (tid[0] == '#')
            rv_buf_adds(c->out, tid + 1);
        else
            put_id(c, tid);
        rv_buf_adds(c->out, ",\"ts\":");
        put_time(c, c->ps->start_ns[i]);
        rv_buf_adds(c->out, ",\"dur\":");
        put_dur(c, c->ps->end_ns[i] - c->ps->start_ns[i]);
        rv_buf_adds(c->out, ",\"args\":{");
        if (!cpu)
            rv_buf_printf(c->out, "\"device\":%d,\"stream\":%" PRId64 ",",
                          th->device >= 0 ? th->device : 0, stream);
        if (corr >= 0)
            rv_buf_printf(c->out, "\"correlation\":%" PRId64 ",", corr);
        if (t->bytes >= 0)
            rv_buf_printf(c->out, "\"bytes\":%" PRId64 ",", t->bytes);
        rv_buf_adds(c->out, "\"reverie_inserted\":true}}");
        c->st.inserted++;
    }
    free(fold);
    free(launcher);
    return 0;
}

/* The what-if row: its name, one annotation for the run and one per
 * applied model, over the whole run, with the model's entry as args. */
static void write_annotations(ctx *c, const json_t *applied, const char *source)
{
    const rv_graph *g = c->bg;
    const rv_trace *tr = c->tr;
    const char *pid = "0";
    if (g->niters)
        pid = rv_trace_str(tr, g->threads[g->iters[0].thread].pid);
    else
        for (size_t i = 0; i < g->nthreads; i++)
            if (g->threads[i].kind == RV_THREAD_CPU && g->threads[i].norig) {
                pid = rv_trace_str(tr, g->threads[i].pid);
                break;
            }
    begin_event(c);
    rv_buf_adds(c->out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
    put_id(c, pid);
    rv_buf_adds(c->out, ",\"tid\":\"" WHATIF_TID "\",\"args\":{\"name\":\"" WHATIF_TID "\"}}");
    size_t n = json_array_size(applied);
    for (size_t i = 0; i <= n; i++) {
        const json_t *a = i < n ? json_array_get(applied, i) : NULL;
        const char *model = a ? json_string_value(json_object_get(a, "model")) : NULL;
        begin_event(c);
        rv_buf_adds(c->out, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":");
        char name[160];
        if (a)
            snprintf(name, sizeof(name), "reverie what-if: %s", model ? model : "?");
        else
            snprintf(name, sizeof(name), "reverie %s run", source);
        rv_jsonw_str(c->out, name);
        rv_buf_adds(c->out, ",\"pid\":");
        put_id(c, pid);
        rv_buf_adds(c->out, ",\"tid\":\"" WHATIF_TID "\",\"ts\":");
        put_time(c, c->lo_ns);
        rv_buf_adds(c->out, ",\"dur\":");
        put_dur(c, c->hi_ns - c->lo_ns);
        rv_buf_adds(c->out, ",\"args\":");
        char *txt = a ? json_dumps(a, JSON_COMPACT) : NULL;
        if (txt)
            rv_buf_adds(c->out, txt);
        else
            rv_buf_printf(c->out, "{\"source\":\"%s\",\"models\":%zu}", source, n);
        free(txt);
        rv_buf_addc(c->out, '}');
    }
}

/* ---------------------------------------------------------------- document */

/* The elements of one events array ('[' next) written into the open
 * output array. */
static int export_array(ctx *c)
{
    rv_jscan *s = &c->js;
    rv_jscan_eat(s); /* '[' */
    int ch = rv_jscan_ws(s);
    if (ch == ']') {
        rv_jscan_eat(s);
        return 0;
    }
    for (;;) {
        s->item = (int64_t)c->st.events_in;
        int rc = export_event(c);
        if (rc < 0 || s->rc)
            return rc < 0 ? rc : s->rc;
        c->st.events_in++;
        ch = rv_jscan_ws(s);
        if (ch == ']') {
            rv_jscan_eat(s);
            break;
        }
        if (ch != ',')
            return rv_jscan_fail_char(s, ch, "',' or ']' after an event");
        rv_jscan_eat(s);
    }
    s->item = -1;
    return 0;
}

/* The events array at byte off of the original, with a scanner of its
 * own (the reader reads every "traceEvents" a document has, in order). */
static int export_array_at(ctx *c, size_t off)
{
    rv_jscan keep = c->js;
    int rc = rv_jscan_open(&c->js, c->plain + off, c->plain_len - off, NULL, c->plain_len - off,
                           keep.err);
    c->js.base = (int64_t)off;
    c->js.item_name = keep.item_name;
    if (rc == 0 && rv_jscan_ws(&c->js) == '[')
        rc = export_array(c);
    rv_jscan_close(&c->js);
    c->js = keep;
    return rc;
}

/* Where each "traceEvents" array of a top-level object starts; *n of
 * them, at most cap. A separate pass, so that all of them go out where
 * the first one stood. */
static int find_event_arrays(ctx *c, size_t *offs, size_t cap, size_t *n)
{
    rv_jscan js;
    int rc = rv_jscan_open(&js, c->plain, c->plain_len, NULL, c->plain_len, c->js.err);
    *n = 0;
    if (rc == 0 && rv_jscan_ws(&js) == '{') {
        rv_jscan_eat(&js);
        int more = rv_jscan_object_first(&js);
        for (; more > 0; more = rv_jscan_object_next(&js)) {
            int events = rv_jscan_key_is(&js, "traceEvents") && rv_jscan_ws(&js) == '[';
            if (events && *n == cap) {
                rc = rv_jscan_fail_at(&js, RV_ERR_LIMIT, rv_jscan_off(&js),
                                      "more than %zu \"traceEvents\" arrays", cap);
                break;
            }
            if (events)
                offs[(*n)++] = (size_t)rv_jscan_off(&js);
            if (rv_jscan_skip(&js, 1) < 0)
                break;
        }
        if (rc == 0 && (more < 0 || js.rc))
            rc = js.rc ? js.rc : more;
    }
    rv_jscan_close(&js);
    return rc;
}

/* The additions after the original's events, and "]". */
static int finish_events(ctx *c, const json_t *applied, const char *source)
{
    int rc = write_flows(c);
    if (rc < 0)
        return rv_error_set(c->js.err, rc, -1, -1, "cannot number the flows");
    if (write_inserted(c) < 0)
        return rv_error_set(c->js.err, RV_ERR_NOMEM, -1, -1, "out of memory for inserted tasks");
    write_annotations(c, applied, source);
    rv_buf_addc(c->out, ']');
    return 0;
}

/* "reverieExport": what this file is and what was changed. */
static void write_meta(ctx *c, int *first, const json_t *applied, const char *source)
{
    const rv_kexport_stats *st = &c->st;
    put_key(c, first, "reverieExport", 13);
    rv_buf_adds(c->out, "{\"source\":");
    rv_jsonw_str(c->out, source);
    rv_buf_printf(c->out,
                  ",\"note\":\"times are Reverie's simulation of this trace, not a measurement\""
                  ",\"events_in\":%zu,\"retimed\":%zu,\"removed\":%zu,\"inserted\":%zu"
                  ",\"inserted_launched\":%zu,\"flows\":%zu,\"shift_us\":",
                  st->events_in, st->retimed, st->removed, st->inserted, st->launched, st->flows);
    put_dur(c, st->shift_ns);
    rv_buf_adds(c->out, ",\"applied\":");
    char *txt = applied ? json_dumps(applied, JSON_COMPACT) : NULL;
    rv_buf_adds(c->out, txt ? txt : "[]");
    free(txt);
    rv_buf_addc(c->out, '}');
}

/* The parse kept every event the original holds, or this is not its
 * original. */
static int check_kept(ctx *c)
{
    if (c->kept == c->tr->nevents)
        return 0;
    return rv_jscan_fail_at(&c->js, RV_ERR_INVALID, rv_jscan_off(&c->js),
                            "the original holds %zu of the parsed trace's %zu events", c->kept,
                            c->tr->nevents);
}

#define MAX_EVENT_ARRAYS 64

static int export_document(ctx *c, const json_t *applied, const char *source)
{
    rv_jscan *s = &c->js;
    int ch = rv_jscan_ws(s), first = 1, rc = 0, seen = 0;
    size_t offs[MAX_EVENT_ARRAYS], narrays = 0;
    rv_buf_addc(c->out, '{');
    if (ch == '[') {
        put_key(c, &first, "traceEvents", 11);
        rv_buf_addc(c->out, '[');
        if ((rc = export_array(c)) < 0 || (rc = check_kept(c)) < 0 ||
            (rc = finish_events(c, applied, source)) < 0)
            return rc;
        seen = 1;
    } else if (ch == '{') {
        if ((rc = find_event_arrays(c, offs, MAX_EVENT_ARRAYS, &narrays)) < 0)
            return rc;
        rv_jscan_eat(s);
        int more = rv_jscan_object_first(s);
        for (; more > 0; more = rv_jscan_object_next(s)) {
            const rv_buf *k = &s->key;
            int events = !k->err && rv_jscan_key_is(s, "traceEvents") && rv_jscan_ws(s) == '[';
            int drop = k->err || rv_jscan_key_is(s, "reverieExport") || (events && seen);
            if (events && !seen) {
                put_key(c, &first, "traceEvents", 11);
                rv_buf_addc(c->out, '[');
                for (size_t i = 0; i < narrays && rc == 0; i++)
                    rc = export_array_at(c, offs[i]);
                if (rc < 0 || (rc = check_kept(c)) < 0 ||
                    (rc = finish_events(c, applied, source)) < 0)
                    return rc;
                seen = 1;
            } else if (!drop) {
                put_key(c, &first, rv_buf_str(k), k->len);
            }
            rv_jscan_ws(s);
            size_t vs = (size_t)rv_jscan_off(s);
            if (rv_jscan_skip(s, 1) < 0)
                return s->rc;
            if (!drop && !events)
                put_raw(c, vs, (size_t)rv_jscan_off(s));
        }
        if (more < 0)
            return more;
    } else {
        return rv_jscan_fail_char(s, ch, "a trace object or array");
    }
    if (!seen)
        return rv_jscan_fail_at(s, RV_ERR_INVALID, 0, "the original has no \"traceEvents\"");
    write_meta(c, &first, applied, source);
    rv_buf_addc(c->out, '}');
    return s->rc;
}

/* The original's bytes as plain JSON: orig itself, or inflated into *plain. */
static int plain_bytes(const void *orig, size_t len, size_t max, rv_buf *plain, const char **p,
                       size_t *n, rv_error *err)
{
    const unsigned char *b = orig;
    if (len < 2 || b[0] != 0x1f || b[1] != 0x8b) {
        if (len > max)
            return rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                                "the original is larger than the %zu-byte cap", max);
        *p = orig;
        *n = len;
        return 0;
    }
    rv_jscan js;
    int rc = rv_jscan_open(&js, orig, len, NULL, max, err);
    while (rc == 0 && (rc = rv_jscan_refill(&js)) > 0) {
        rc = 0;
        if (rv_buf_add(plain, js.buf, js.end) != 0)
            rc = rv_error_set(err, plain->err, -1, -1,
                              "the original inflates past the %zu-byte cap", max);
        js.pos = js.end;
    }
    rv_jscan_close(&js);
    if (rc < 0)
        return rc;
    *p = rv_buf_str(plain);
    *n = plain->len;
    return 0;
}

int rv_kexport_write(const void *orig, size_t len, const rv_graph *bg, const rv_graph *pg,
                     const rv_sim *ps, const json_t *applied, const rv_kexport_opts *o, rv_buf *out,
                     rv_kexport_stats *st, rv_error *err)
{
    static const rv_kexport_opts defaults = {0};
    ctx c;
    size_t max_in, max_out, plen = 0, start = out->len;
    const char *p = NULL;
    int rc;

    if (!o)
        o = &defaults;
    max_in = o->max_input ? o->max_input : RV_KEXPORT_MAX_INPUT;
    max_out = o->max_output ? o->max_output : RV_KEXPORT_MAX_OUTPUT;
    const char *source = o->source ? o->source : "predicted";
    memset(&c, 0, sizeof(c));
    c.tr = bg->trace;
    c.bg = bg;
    c.pg = pg;
    c.ps = ps;
    c.out = out;
    rv_buf plain = RV_BUF_INIT(max_in);
    rv_buf_init(&c.sbuf, MAX_SHORT);
    rv_buf_init(&c.name, RV_KINETO_MAX_NAME);
    if (!c.tr || pg->ntasks < bg->ntasks || pg->nthreads < bg->nthreads ||
        ps->ntasks != pg->ntasks) {
        rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                          "the simulation is not one of this trace's graph");
        goto out;
    }
    if ((rc = prepare(&c, err)) < 0)
        goto out;
    if ((rc = plain_bytes(orig, len, max_in, &plain, &p, &plen, err)) < 0)
        goto out;
    if ((rc = rv_jscan_open(&c.js, p, plen, NULL, max_in, err)) < 0)
        goto out;
    c.js.item_name = "event";
    c.plain = p;
    c.plain_len = plen;
    size_t cap = out->max;
    if (max_out < cap - (cap > start ? start : cap))
        out->max = start + max_out;
    rc = export_document(&c, applied, source);
    out->max = cap;
    if (rc == 0 && out->err)
        rc = rv_error_set(err, out->err, -1, -1,
                          out->err == RV_ERR_LIMIT ? "the export is larger than its %zu-byte cap"
                                                   : "out of memory writing the export (%zu bytes)",
                          max_out);
out:
    rv_jscan_close(&c.js);
    rv_buf_free(&plain);
    rv_buf_free(&c.sbuf);
    rv_buf_free(&c.name);
    rv_map_free(&c.threads);
    free(c.ev2task);
    free(c.xs);
    free(c.ia);
    free(c.ib);
    free(c.mem);
    if (st)
        *st = c.st;
    return rc;
}

int rv_kexport_run(const void *orig, size_t len, const rv_run_result *r, int baseline,
                   const rv_kexport_opts *o, rv_buf *out, rv_kexport_stats *st, rv_error *err)
{
    rv_kexport_opts oo = o ? *o : (rv_kexport_opts){0};
    if (!oo.source)
        oo.source = baseline ? "baseline" : "predicted";
    if (baseline)
        return rv_kexport_write(orig, len, r->graph, r->graph, r->base, NULL, &oo, out, st, err);
    return rv_kexport_write(orig, len, r->graph, rv_run_pred_graph(r), rv_run_pred_sim(r),
                            r->applied, &oo, out, st, err);
}
