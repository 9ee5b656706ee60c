#include "graph/rv_layers.h"

#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"

#define MOD_PREFIX "nn.Module: "

/* A python event that may be a module call. */
typedef struct cand {
    const char *type; /* borrowed from the string table */
    size_t type_len;
    int32_t num; /* the module's number, -1 none */
    int32_t event;
    int source;
} cand;

static int cmp_cand(const void *a, const void *b, void *ctx)
{
    const cand *x = a, *y = b;
    const rv_trace *t = ctx;
    if (x->source != y->source)
        return x->source - y->source;
    size_t n = x->type_len < y->type_len ? x->type_len : y->type_len;
    int c = memcmp(x->type, y->type, n);
    if (c)
        return c;
    if (x->type_len != y->type_len)
        return x->type_len < y->type_len ? -1 : 1;
    int64_t p = t->events[x->event].ts_ns, q = t->events[y->event].ts_ns;
    return (p > q) - (p < q);
}

static int same_type(const cand *x, const cand *y)
{
    return x->source == y->source && x->type_len == y->type_len &&
           memcmp(x->type, y->type, x->type_len) == 0;
}

/* "Qwen2DecoderLayer_17" -> type "Qwen2DecoderLayer", 17. */
static void split_module(const char *s, cand *c)
{
    size_t len = strlen(s);
    const char *us = strrchr(s, '_');
    c->type = s;
    c->type_len = len;
    c->num = -1;
    if (!us || !us[1] || us == s)
        return;
    long v = 0;
    for (const char *p = us + 1; *p; p++) {
        if (*p < '0' || *p > '9' || v > 10000000)
            return;
        v = v * 10 + (*p - '0');
    }
    c->type_len = (size_t)(us - s);
    c->num = (int32_t)v;
}

static int collect(const rv_trace *t, cand **out, size_t *n)
{
    size_t cap = 0, k = 0;
    cand *c = NULL;
    static const char fwd[] = "): forward";
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat != RV_CAT_PYTHON)
            continue;
        const char *s = rv_trace_str(t, e->name);
        size_t len = strlen(s);
        cand x = {.event = (int32_t)i, .num = -1};
        if (strncmp(s, MOD_PREFIX, sizeof(MOD_PREFIX) - 1) == 0) {
            split_module(s + sizeof(MOD_PREFIX) - 1, &x);
            x.source = RV_LAYERS_MODULE;
        } else if (len > sizeof(fwd) - 1 && strcmp(s + len - (sizeof(fwd) - 1), fwd) == 0 &&
                   strstr(s, ".py(")) {
            x.type = s;
            x.type_len = len;
            x.source = RV_LAYERS_PYSTACK;
        } else {
            continue;
        }
        if (k == cap) {
            if (cap >= RV_LAYERS_MAX_INST * 4)
                break; /* enough to find the layers */
            size_t nc = cap ? cap * 2 : 256;
            cand *p = realloc(c, nc * sizeof(*c));
            if (!p) {
                free(c);
                return RV_ERR_NOMEM;
            }
            c = p;
            cap = nc;
        }
        c[k++] = x;
    }
    *out = c;
    *n = k;
    return 0;
}

static int cmp_i32(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The iteration an absolute time falls in, -1 outside every step. */
static int32_t iter_of(const rv_graph *g, int64_t abs_ns)
{
    int64_t r = abs_ns - g->origin_ns;
    for (size_t k = 0; k < g->niters; k++)
        if (r >= g->iters[k].start_ns && r < g->iters[k].end_ns)
            return (int32_t)k;
    return -1;
}

/* Distinct layers of the group c[0..n): module numbers, or the most
 * python-stack calls in one step. */
static int32_t distinct(const rv_graph *g, const cand *c, size_t n, int32_t *scratch)
{
    const rv_trace *t = g->trace;
    int32_t d = 0;
    if (c[0].source == RV_LAYERS_MODULE) {
        for (size_t i = 0; i < n; i++)
            scratch[i] = c[i].num;
        qsort_r(scratch, n, sizeof(*scratch), cmp_i32, NULL);
        for (size_t i = 0; i < n; i++)
            d += i == 0 || scratch[i] != scratch[i - 1];
        return d;
    }
    int32_t run = 0, it = -2;
    for (size_t i = 0; i < n; i++) {
        int32_t k = iter_of(g, t->events[c[i].event].ts_ns);
        run = k == it ? run + 1 : 1;
        it = k;
        if (run > d)
            d = run;
    }
    return d;
}

static int cmp_inst(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    const rv_layer_inst *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

/* The instance of l holding time ts on thread (pid, tid), -1 none. */
static int32_t inst_at(const rv_layers *l, uint32_t pid, uint32_t tid, int64_t ts)
{
    size_t lo = 0, hi = l->ninst;
    rv_layer_inst key = {.pid = pid, .tid = tid, .start_ns = ts};
    while (lo < hi) { /* first instance after key */
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_inst(&l->inst[mid], &key, NULL) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const rv_layer_inst *p = &l->inst[lo - 1];
    if (p->pid != pid || p->tid != tid || ts > p->end_ns)
        return -1;
    return p->index;
}

static int assign_tasks(const rv_graph *g, rv_layers *l)
{
    l->of_task = malloc((g->ntasks ? g->ntasks : 1) * sizeof(int32_t));
    if (!l->of_task)
        return RV_ERR_NOMEM;
    l->ntasks = g->ntasks;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        int32_t a = t->kind == RV_TASK_CPU ? (int32_t)i : t->launch;
        l->of_task[i] = -1;
        if (a < 0 || g->tasks[a].meas_start_ns < 0)
            continue;
        const rv_thread *th = &g->threads[g->tasks[a].thread];
        l->of_task[i] = inst_at(l, th->pid, th->tid, g->origin_ns + g->tasks[a].meas_start_ns);
    }
    return 0;
}

/* The layer type: at least two distinct instances, the most CPU time in
 * its calls; module annotations before python-stack frames. */
static int pick(const rv_graph *g, cand *c, size_t n, size_t *first, size_t *count,
                int32_t *nlayers)
{
    int32_t *scratch = malloc((n ? n : 1) * sizeof(int32_t));
    int64_t best = -1;
    int best_src = 0;
    if (!scratch)
        return RV_ERR_NOMEM;
    *count = 0;
    for (size_t i = 0, j; i < n; i = j) {
        int64_t sum = 0;
        for (j = i; j < n && same_type(&c[i], &c[j]); j++)
            sum += g->trace->events[c[j].event].dur_ns;
        if (best_src && c[i].source != best_src)
            continue; /* a module type was found: python frames only without one */
        int32_t d = distinct(g, c + i, j - i, scratch);
        if (d < 2 || sum <= best)
            continue;
        best = sum;
        best_src = c[i].source;
        *first = i;
        *count = j - i;
        *nlayers = d;
    }
    free(scratch);
    return 0;
}

int rv_layers_find(const rv_graph *g, rv_layers **out, rv_error *err)
{
    cand *c = NULL;
    size_t n = 0, first = 0, count = 0;
    int32_t nlayers = 0;
    rv_layers *l = NULL;
    int rc;

    *out = NULL;
    if (!g->trace)
        return 0;
    if ((rc = collect(g->trace, &c, &n)) != 0 || n == 0)
        goto out;
    qsort_r(c, n, sizeof(*c), cmp_cand, (void *)g->trace);
    if ((rc = pick(g, c, n, &first, &count, &nlayers)) != 0 || count == 0)
        goto out;
    if (count > RV_LAYERS_MAX_INST)
        count = RV_LAYERS_MAX_INST;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->inst = calloc(count, sizeof(*l->inst)))) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    const cand *k0 = &c[first];
    size_t tl = k0->type_len < sizeof(l->type) - 1 ? k0->type_len : sizeof(l->type) - 1;
    memcpy(l->type, k0->type, tl);
    l->type[tl] = '\0';
    l->source = k0->source;
    l->nlayers = nlayers;
    int32_t run = 0, it = -2;
    for (size_t i = 0; i < count; i++) {
        const rv_event *e = &g->trace->events[c[first + i].event];
        rv_layer_inst *x = &l->inst[i];
        x->event = c[first + i].event;
        x->start_ns = e->ts_ns;
        x->end_ns = e->ts_ns + e->dur_ns;
        x->pid = e->pid;
        x->tid = e->tid;
        if (l->source == RV_LAYERS_MODULE) {
            x->index = c[first + i].num;
        } else { /* c is in time order within the type: the call's ordinal in its step */
            int32_t k = iter_of(g, e->ts_ns);
            run = k == it ? run + 1 : 0;
            it = k;
            x->index = run;
        }
    }
    l->ninst = count;
    qsort_r(l->inst, l->ninst, sizeof(*l->inst), cmp_inst, NULL);
    if ((rc = assign_tasks(g, l)) != 0)
        goto out;
    *out = l;
    l = NULL;
out:
    if (rc)
        rv_error_set(err, rc, -1, -1, "out of memory finding layer instances");
    free(c);
    rv_layers_free(l);
    return rc;
}

int32_t rv_layers_at(const rv_layers *l, uint32_t pid, uint32_t tid, int64_t ts)
{
    return l ? inst_at(l, pid, tid, ts) : -1;
}

int32_t rv_layers_of_task(const rv_layers *l, size_t i)
{
    return l && i < l->ntasks ? l->of_task[i] : -1;
}

void rv_layers_free(rv_layers *l)
{
    if (!l)
        return;
    free(l->inst);
    free(l->of_task);
    free(l);
}
