/* Kernel precision from names and op input types; GPU precision support.
 * The rules are in rv_precision.h and docs/models/amp.md. */
#include "graph/rv_precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_select.h"

static int cmp_op(const void *a, const void *b)
{
    const rv_prec_op *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->end < y->end) - (x->end > y->end); /* the enclosing one first */
}

int rv_prec_ctx_init(rv_prec_ctx *c, const rv_graph *g)
{
    const rv_trace *tr = g->trace;
    size_t n = tr ? tr->nevents : 0, k = 0;
    memset(c, 0, sizeof(*c));
    c->g = g;
    rv_map_init(&c->op_type, n + 1);
    rv_map_init(&c->by_name, g->ntasks + 1);
    for (size_t i = 0; i < n; i++)
        k += tr->events[i].cat == RV_CAT_CPU_OP && tr->events[i].in_type != RV_PT_NONE;
    if (k == 0)
        return 0;
    c->ops = malloc(k * sizeof(*c->ops));
    if (!c->ops)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        const rv_event *e = &tr->events[i];
        if (e->cat != RV_CAT_CPU_OP || e->in_type == RV_PT_NONE)
            continue;
        c->ops[c->nops++] =
            (rv_prec_op){e->pid, e->tid, e->ts_ns, e->ts_ns + e->dur_ns, -1, e->in_type};
        if (e->external_id >= 0 &&
            rv_map_put(&c->op_type, (uint64_t)e->external_id, e->in_type) < 0)
            goto nomem;
    }
    qsort(c->ops, c->nops, sizeof(*c->ops), cmp_op);
    /* Parents with a stack walk: ops on one thread nest. */
    for (size_t i = 1; i < c->nops; i++) {
        rv_prec_op *o = &c->ops[i];
        int32_t p = (int32_t)i - 1;
        if (o[-1].pid != o->pid || o[-1].tid != o->tid)
            continue;
        while (p >= 0 && c->ops[p].end < o->end)
            p = c->ops[p].parent;
        o->parent = p;
    }
    return 0;
nomem:
    rv_prec_ctx_free(c);
    return RV_ERR_NOMEM;
}

void rv_prec_ctx_free(rv_prec_ctx *c)
{
    free(c->ops);
    c->ops = NULL;
    c->nops = 0;
    rv_map_free(&c->op_type);
    rv_map_free(&c->by_name);
}

/* The type of the innermost typed op on (pid, tid) that is running at ts;
 * RV_PT_NONE when none. */
static int op_at(const rv_prec_ctx *c, uint32_t pid, uint32_t tid, int64_t ts)
{
    size_t lo = 0, hi = c->nops; /* first op after (pid, tid, ts) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rv_prec_op *o = &c->ops[mid];
        int after = o->pid != pid ? o->pid > pid : o->tid != tid ? o->tid > tid : o->start > ts;
        if (after)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo == 0)
        return RV_PT_NONE;
    int32_t j = (int32_t)lo - 1;
    if (c->ops[j].pid != pid || c->ops[j].tid != tid)
        return RV_PT_NONE;
    while (j >= 0 && c->ops[j].end < ts)
        j = c->ops[j].parent;
    return j >= 0 ? c->ops[j].type : RV_PT_NONE;
}

/* The launching op's type code of kernel task t. */
static int op_type_of(const rv_prec_ctx *c, const rv_task *t)
{
    const rv_graph *g = c->g;
    const rv_trace *tr = g->trace;
    uint32_t code;
    if (!tr)
        return RV_PT_NONE;
    if (t->launch >= 0 && (size_t)t->launch < g->ntasks) {
        int32_t le = g->tasks[t->launch].event;
        if (le >= 0 && (size_t)le < tr->nevents) {
            const rv_event *e = &tr->events[le];
            return op_at(c, e->pid, e->tid, e->ts_ns);
        }
    }
    if (t->event >= 0 && (size_t)t->event < tr->nevents && tr->events[t->event].external_id >= 0 &&
        rv_map_get(&c->op_type, (uint64_t)tr->events[t->event].external_id, &code))
        return (int)code;
    return RV_PT_NONE;
}

int rv_prec_of_task(rv_prec_ctx *c, size_t i, int *src)
{
    const rv_graph *g = c->g;
    const rv_task *t = &g->tasks[i];
    int dummy;
    if (!src)
        src = &dummy;
    /* Name rules: classified with the graph, else cached per name here:
     * (strong + 8) | (hint + 8) << 8. */
    uint32_t v;
    if (t->name < g->nname_info && g->name_info[t->name]) {
        v = g->name_info[t->name] >> 8;
    } else if (!rv_map_get(&c->by_name, t->name, &v)) {
        const char *name = rv_task_name(g, i);
        int strong = rv_kname_dtype(name);
        int hint = strong == RV_PREC_UNKNOWN ? rv_kname_dtype_hint(name) : RV_PREC_UNKNOWN;
        v = (uint32_t)(strong + 8) | (uint32_t)(hint + 8) << 8;
        (void)rv_map_put(&c->by_name, t->name, v); /* a full cache only costs time */
    }
    int strong = (int)(v & 0xff) - 8, hint = (int)(v >> 8) - 8;
    if (strong != RV_PREC_UNKNOWN) {
        *src = RV_PS_NAME;
        return strong;
    }
    int code = op_type_of(c, t);
    if (code != RV_PT_NONE) {
        *src = RV_PS_INPUT_TYPE;
        return rv_kname_type_dtype(code);
    }
    if (hint != RV_PREC_UNKNOWN) {
        *src = RV_PS_HINT;
        return hint;
    }
    *src = RV_PS_ASSUMED;
    return RV_PREC_UNKNOWN;
}

/* AMD boards report gfx versions as "compute capability": only NVIDIA's
 * numbers map to precisions. */
static int looks_amd(const char *name)
{
    return strcasestr(name, "amd") || strcasestr(name, "radeon") || strcasestr(name, "instinct") ||
           strcasestr(name, "gfx");
}

int rv_prec_gpu_has(const rv_hw *hw, const rv_trace *tr, int dtype, char *why, size_t cap)
{
    /* What each dtype needs: NVIDIA compute capability x10, and in words. */
    static const int min_cc[RV_DT_COUNT] = {0, 80, 53, 80, 89};
    static const char *const needs[RV_DT_COUNT] = {
        "", "NVIDIA Ampere or later, AMD MI300", "NVIDIA P100, Volta or later, AMD MI50 or later",
        "NVIDIA Ampere or later, AMD MI100 or later", "NVIDIA Ada, Hopper or later, AMD MI300"};
    if (dtype < 0 || dtype >= RV_DT_COUNT)
        return -1;
    if (dtype == RV_DT_FP32)
        return 1;
    const char *dn = rv_dtype_name(dtype);
    if (hw) {
        if (hw->tflops[dtype] > 0)
            return 1;
        snprintf(why, cap, "%s has no %s: %s needs %s", hw->name, dn, dn, needs[dtype]);
        return 0;
    }
    if (!tr)
        return -1;
    const char *name = rv_trace_str(tr, tr->platform_gpu);
    int major = 0, minor = 0;
    for (size_t i = 0; i < tr->ndevices; i++) {
        if (tr->devices[i].compute_major <= 0)
            continue;
        major = tr->devices[i].compute_major;
        minor = tr->devices[i].compute_minor;
        if (!*name)
            name = rv_trace_str(tr, tr->devices[i].name);
        break;
    }
    if (major <= 0 || !*name || looks_amd(name))
        return -1;
    if (major * 10 + minor >= min_cc[dtype])
        return 1;
    snprintf(why, cap,
             "%s (compute capability %d.%d) has no %s: %s needs compute capability %d.%d "
             "or later (%s)",
             name, major, minor, dn, dn, min_cc[dtype] / 10, min_cc[dtype] % 10, needs[dtype]);
    return 0;
}

int rv_graph_classify(rv_graph *g)
{
    const rv_trace *tr = g->trace;
    size_t n = tr ? tr->strings.count : 0;

    if (g->owns_name_info)
        free(g->name_info);
    g->name_info = NULL;
    g->nname_info = 0;
    g->owns_name_info = 0;
    if (n == 0)
        return 0;
    uint32_t *info = calloc(n, sizeof(*info));
    if (!info)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || t->name >= n || info[t->name])
            continue;
        const char *name = rv_trace_str(tr, t->name);
        int kc = rv_kname_class(name);
        int strong = rv_kname_dtype(name);
        int hint = strong == RV_PREC_UNKNOWN ? rv_kname_dtype_hint(name) : RV_PREC_UNKNOWN;
        info[t->name] =
            (uint32_t)(kc + 1) | (uint32_t)(strong + 8) << 8 | (uint32_t)(hint + 8) << 16;
    }
    g->name_info = info;
    g->nname_info = n;
    g->owns_name_info = 1;
    return 0;
}
