/* Re-timing host work from overhead statistics. See rv_retime.h. */
#include "graph/rv_retime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rv_oh_table_free(rv_oh_table *t)
{
    if (!t)
        return;
    free(t->entries);
    rv_strtab_free(&t->names);
    free(t);
}

/* The pooled groups of a table under construction: per type, the group
 * index of each interned name id (-1 = none yet), and the overall group. */
typedef struct pool {
    rv_overhead_sketch_group *g;
    size_t n, cap;
    int32_t *by_name[RV_OH_NTYPES + 1];
    int32_t overall[RV_OH_NTYPES + 1];
    uint32_t nnames; /* length of each by_name array */
} pool;

static void pool_free(pool *p)
{
    rv_overhead_sketch_groups_free(p->g, p->n);
    for (int t = 0; t <= RV_OH_NTYPES; t++)
        free(p->by_name[t]);
}

/* The group (type, id), created empty when new; NULL on OOM. */
static rv_overhead_sketch_group *pool_group(pool *p, int type, uint32_t id)
{
    int32_t *slot = &p->overall[type];
    if (id != RV_OH_OVERALL) {
        if (id >= p->nnames) {
            uint32_t n = p->nnames ? p->nnames : 256;
            while (n <= id)
                n *= 2;
            for (int t = 0; t <= RV_OH_NTYPES; t++) {
                int32_t *v = realloc(p->by_name[t], n * sizeof(*v));
                if (!v)
                    return NULL;
                for (uint32_t i = p->nnames; i < n; i++)
                    v[i] = -1;
                p->by_name[t] = v;
            }
            p->nnames = n;
        }
        slot = &p->by_name[type][id];
    }
    if (*slot < 0) {
        if (p->n == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 64;
            rv_overhead_sketch_group *g = realloc(p->g, cap * sizeof(*g));
            if (!g)
                return NULL;
            p->g = g;
            p->cap = cap;
        }
        memset(&p->g[p->n], 0, sizeof(p->g[p->n]));
        p->g[p->n].type = (uint8_t)type;
        p->g[p->n].name = id;
        *slot = (int32_t)p->n++;
    }
    return &p->g[*slot];
}

int rv_oh_table_from_traces(const rv_trace *const *traces, size_t n, rv_oh_table **out,
                            rv_error *err)
{
    pool pl = {0};
    int rc = 0;
    rv_oh_table *tab = calloc(1, sizeof(*tab));
    *out = NULL;
    for (int t = 0; t <= RV_OH_NTYPES; t++)
        pl.overall[t] = -1;
    if (!tab)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (rv_strtab_intern(&tab->names, "", 0) == UINT32_MAX) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    /* Each trace's group sketches are merged into the pool under names
     * re-interned in the table's own strings, so the same op name from two
     * traces is one group: the statistics come from merged sketches, as
     * the store's per-platform statistics do. */
    for (size_t i = 0; i < n; i++) {
        rv_overhead_samples s = {0};
        rv_overhead_sketch_group *g = NULL;
        size_t ng = 0;
        if ((rc = rv_overhead_extract(traces[i], &s, err)) == 0)
            rc = rv_overhead_sketch(&s, &g, &ng, err);
        rv_overhead_samples_free(&s);
        for (size_t k = 0; k < ng && !rc; k++) {
            uint32_t id = RV_OH_OVERALL;
            rv_overhead_sketch_group *dst = NULL;
            if (g[k].name != RV_OH_OVERALL) {
                const char *nm = rv_trace_str(traces[i], g[k].name);
                id = rv_strtab_intern(&tab->names, nm, strlen(nm));
                if (id != UINT32_MAX)
                    dst = pool_group(&pl, g[k].type, id);
            } else {
                dst = pool_group(&pl, g[k].type, id);
            }
            if (!dst || rv_sketch_merge(&dst->sk, &g[k].sk))
                rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        }
        rv_overhead_sketch_groups_free(g, ng);
        if (rc)
            goto out;
    }
    tab->entries = calloc(pl.n + 1, sizeof(*tab->entries));
    if (!tab->entries) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < pl.n; i++) {
        rv_overhead_stat st;
        rv_overhead_stat_of_sketch(&pl.g[i].sk, &st);
        if (st.count == 0)
            continue;
        rv_oh_entry *e = &tab->entries[tab->n++];
        e->type = pl.g[i].type;
        e->name = pl.g[i].name == RV_OH_OVERALL ? NULL : rv_strtab_get(&tab->names, pl.g[i].name);
        e->mean_us = st.mean;
    }
    for (size_t i = 0; i < n; i++) {
        const char *gpu = rv_trace_str(traces[i], traces[i]->platform_gpu);
        if (i > 0 && strcmp(gpu, tab->gpu) != 0) {
            tab->gpu[0] = '\0';
            break;
        }
        snprintf(tab->gpu, sizeof(tab->gpu), "%s", gpu);
    }
    *out = tab;
    tab = NULL;
out:
    pool_free(&pl);
    rv_oh_table_free(tab);
    return rc;
}

/* Per type, the mean for each trace string id (NAN when absent), and the
 * overall mean as the fallback. */
typedef struct lookup {
    double *by_name[RV_OH_NTYPES + 1];
    double overall[RV_OH_NTYPES + 1];
    uint32_t nstrings;
} lookup;

static double lookup_ns(const lookup *lk, int type, uint32_t name)
{
    double v = name < lk->nstrings ? lk->by_name[type][name] : NAN;
    if (isnan(v))
        v = lk->overall[type];
    return isnan(v) ? NAN : v * 1000.0;
}

/* Matches the calls rv_overhead.c leaves out of the samples. */
static int waits_for_gpu(const rv_task *t)
{
    return (t->flags & RV_TF_SYNC) || t->meas_dur_ns >= RV_GRAPH_BLOCKED_CALL_NS;
}

typedef struct top_op {
    int64_t start, end; /* graph time */
    uint32_t name;
} top_op;

static int cmp_top(const void *a, const void *b)
{
    const top_op *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->end < y->end) - (x->end > y->end);
}

/* Top-level cpu ops of one CPU thread, as rv_overhead_extract defines them. */
static int thread_top_ops(const rv_graph *g, const rv_thread *th, top_op **out, size_t *nout)
{
    const rv_trace *tr = g->trace;
    size_t n = 0;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *e = &tr->events[i];
        if (e->cat == RV_CAT_CPU_OP && e->pid == th->pid && e->tid == th->tid)
            n++;
    }
    top_op *v = malloc((n + 1) * sizeof(*v));
    if (!v)
        return RV_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *e = &tr->events[i];
        if (e->cat != RV_CAT_CPU_OP || e->pid != th->pid || e->tid != th->tid)
            continue;
        if (strncmp(rv_trace_str(tr, e->name), "ProfilerStep#", 13) == 0)
            continue; /* a step marker, not an op */
        v[k].start = e->ts_ns - g->origin_ns;
        v[k].end = v[k].start + e->dur_ns;
        v[k].name = e->name;
        k++;
    }
    qsort(v, k, sizeof(*v), cmp_top);
    size_t w = 0;
    for (size_t i = 0; i < k; i++) {
        if (w > 0 && v[i].start < v[w - 1].end)
            continue; /* nested */
        v[w++] = v[i];
    }
    *out = v;
    *nout = w;
    return 0;
}

int rv_retime_overheads(rv_graph *g, const rv_oh_table *tab, json_t **applied, rv_error *err)
{
    lookup lk;
    int rc = 0;
    size_t n_t4 = 0, n_t5 = 0, n_cross = 0, n_kept = 0;
    int32_t *launches = NULL;
    int32_t *op_of = NULL;
    uint8_t *waits = NULL; /* tasks that wait for another CPU thread */
    top_op *ops = NULL;
    memset(&lk, 0, sizeof(lk));
    *applied = NULL;
    lk.nstrings = g->trace->strings.count;
    for (int t = 1; t <= RV_OH_NTYPES; t++) {
        lk.overall[t] = NAN;
        lk.by_name[t] = malloc((lk.nstrings + 1) * sizeof(double));
        if (!lk.by_name[t]) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
        for (uint32_t i = 0; i <= lk.nstrings; i++)
            lk.by_name[t][i] = NAN;
    }
    for (size_t i = 0; i < tab->n; i++) {
        const rv_oh_entry *e = &tab->entries[i];
        if (e->type < 1 || e->type > RV_OH_NTYPES)
            continue;
        if (!e->name) {
            lk.overall[e->type] = e->mean_us;
            continue;
        }
        uint32_t id = rv_strtab_find(&g->trace->strings, e->name, strlen(e->name));
        if (id != UINT32_MAX)
            lk.by_name[e->type][id] = e->mean_us;
    }

    launches = malloc((g->ntasks + 1) * sizeof(int32_t));
    op_of = malloc((g->ntasks + 1) * sizeof(int32_t));
    waits = calloc(g->ntasks + 1, 1);
    if (!launches || !op_of || !waits) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t e = 0; e < g->nedges; e++)
        if (g->edges[e].kind == RV_EDGE_HANDOFF)
            waits[g->edges[e].dst] = 1;
    for (size_t ti = 0; ti < g->nthreads; ti++) {
        const rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_CPU || th->norig == 0)
            continue;
        size_t nops = 0, nl = 0;
        free(ops);
        ops = NULL;
        if (thread_top_ops(g, th, &ops, &nops) != 0) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
        size_t oi = 0;
        for (int32_t k = th->first; k < th->first + th->norig; k++) {
            if (!(g->tasks[k].flags & RV_TF_LAUNCH))
                continue;
            int64_t s = g->tasks[k].meas_start_ns;
            while (oi < nops && ops[oi].end < s)
                oi++;
            op_of[nl] = (oi < nops && ops[oi].start <= s) ? (int32_t)oi : -1;
            launches[nl++] = k;
        }
        for (size_t i = 0; i + 1 < nl; i++) {
            int32_t a = launches[i], b = launches[i + 1];
            int32_t oa = op_of[i], ob = op_of[i + 1];
            /* A thread waiting for another one (backward handing back to
             * the main thread) is idle, not paying overhead. */
            int waited = 0;
            for (int32_t k = a + 1; k <= b && !waited; k++)
                waited = waits[k];
            if (oa < 0 || ob < 0 || waited) {
                n_kept++;
                continue;
            }
            double want;
            if (oa == ob) {
                want = lookup_ns(&lk, RV_OH_T5, ops[oa].name);
                n_t5++;
            } else {
                want = lookup_ns(&lk, RV_OH_T3, ops[oa].name) +
                       lookup_ns(&lk, RV_OH_T1, ops[ob].name) +
                       lookup_ns(&lk, RV_OH_T2, ops[ob].name);
                for (int32_t k = oa + 1; k < ob; k++)
                    want +=
                        lookup_ns(&lk, RV_OH_T1, ops[k].name) + (double)(ops[k].end - ops[k].start);
                n_cross++;
            }
            if (isnan(want)) {
                n_kept++;
                continue;
            }
            /* Scale what is not data loading between the two launches. */
            /* Calls that wait for the GPU keep their time: it is the GPU's,
             * and the statistics leave it out too (rv_overhead.c). */
            int64_t dl = 0, other = 0;
            for (int32_t k = a; k < b; k++) {
                const rv_task *t = &g->tasks[k];
                dl += t->gap_dl_ns;
                other += t->gap_ns - t->gap_dl_ns;
                if (k > a && !waits_for_gpu(t))
                    other += t->dur_ns;
            }
            double target = want - (double)dl;
            if (target < 0)
                target = 0;
            if (other <= 0) {
                g->tasks[a].gap_ns += (int64_t)llround(target);
                continue;
            }
            double f = target / (double)other;
            for (int32_t k = a; k < b; k++) {
                rv_task *t = &g->tasks[k];
                int64_t own = t->gap_ns - t->gap_dl_ns;
                t->gap_ns = t->gap_dl_ns + (int64_t)llround((double)own * f);
                if (k > a && !waits_for_gpu(t))
                    t->dur_ns = (int64_t)llround((double)t->dur_ns * f);
            }
        }
        for (size_t i = 0; i < nl; i++) {
            rv_task *t = &g->tasks[launches[i]];
            if (t->flags & (RV_TF_SYNC | RV_TF_REMOVED))
                continue;
            double d = lookup_ns(&lk, RV_OH_T4, t->name);
            if (!isnan(d)) {
                t->dur_ns = (int64_t)llround(d);
                n_t4++;
            }
        }
    }
    *applied = json_pack("{s:s, s:I, s:I, s:I, s:I}", "kind", "overheads", "launches_retimed",
                         (json_int_t)n_t4, "within_op_gaps", (json_int_t)n_t5, "across_op_gaps",
                         (json_int_t)n_cross, "kept", (json_int_t)n_kept);
out:
    for (int t = 1; t <= RV_OH_NTYPES; t++)
        free(lk.by_name[t]);
    free(launches);
    free(op_of);
    free(waits);
    free(ops);
    return rc;
}
