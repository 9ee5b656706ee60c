#include "graph/rv_overhead.h"
#include "util/rv_sort.h"

#include "graph/rv_graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rv_overhead_samples_free(rv_overhead_samples *s)
{
    if (!s)
        return;
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static int push(rv_overhead_samples *s, int type, uint32_t name, int64_t ns)
{
    if (s->n == s->cap) {
        if (s->cap >= RV_OVERHEAD_MAX_SAMPLES)
            return RV_ERR_LIMIT;
        size_t cap = s->cap ? s->cap * 2 : 1024;
        rv_overhead_sample *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return RV_ERR_NOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (rv_overhead_sample){.value_ns = ns, .name = name, .type = (uint8_t)type};
    return 0;
}

static int cmp_thread(const rv_event *a, const rv_event *b)
{
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    return 0;
}

/* By thread, then start, then longer first (parents before children), then
 * input order for a total order. */
static int cmp_ops(const void *pa, const void *pb, void *ctx)
{
    const rv_trace *t = ctx;
    uint32_t ia = *(const uint32_t *)pa, ib = *(const uint32_t *)pb;
    const rv_event *a = &t->events[ia], *b = &t->events[ib];
    int c = cmp_thread(a, b);
    if (c)
        return c;
    if (a->ts_ns != b->ts_ns)
        return a->ts_ns < b->ts_ns ? -1 : 1;
    if (a->dur_ns != b->dur_ns)
        return a->dur_ns > b->dur_ns ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

static int has_corr(const int64_t *sorted, size_t n, int64_t c)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == c;
}

/* Whether another thread of op's process starts an op inside (a, b).
 * ops is sorted by thread, so every thread is searched by binary search. */
static int other_thread_busy(const rv_trace *t, const uint32_t *ops, size_t nops,
                             const rv_event *op, int64_t a, int64_t b)
{
    size_t i = 0;
    while (i < nops) {
        const rv_event *first = &t->events[ops[i]];
        /* The run of this thread's ops: [i, end). */
        size_t lo = i, hi = nops;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cmp_thread(&t->events[ops[mid]], first) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t end = lo;
        if (first->pid == op->pid && first->tid != op->tid) {
            size_t l = i, h = end;
            while (l < h) {
                size_t mid = l + (h - l) / 2;
                if (t->events[ops[mid]].ts_ns <= a)
                    l = mid + 1;
                else
                    h = mid;
            }
            if (l < end && t->events[ops[l]].ts_ns < b)
                return 1;
        }
        i = end;
    }
    return 0;
}

/* Calls on a thread that wait for the GPU (syncs, and non-launch calls as
 * long as the graph's blocked-call rule) are GPU time, not host overhead:
 * their time is taken out of the T1/T2/T3/T5 samples they fall in. */
typedef struct waits {
    const uint32_t *idx; /* event indices sorted by thread, then start */
    int64_t *prefix;     /* prefix[k] = summed durations of idx[0..k) */
    size_t n;
} waits;

static int64_t wait_ns(const rv_trace *t, const waits *w, const rv_event *on, int64_t a, int64_t b)
{
    /* First call on on's thread that starts at or after a. */
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rv_event *e = &t->events[w->idx[mid]];
        int c = cmp_thread(e, on);
        if (c < 0 || (c == 0 && e->ts_ns < a))
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo;
    while (k < w->n) {
        const rv_event *e = &t->events[w->idx[k]];
        if (cmp_thread(e, on) != 0 || e->ts_ns >= b)
            break;
        k++;
    }
    int64_t sum = w->prefix[k] - w->prefix[lo];
    /* A last call that runs past b counts up to b only. */
    if (k > lo) {
        const rv_event *e = &t->events[w->idx[k - 1]];
        if (e->ts_ns + e->dur_ns > b)
            sum -= e->ts_ns + e->dur_ns - b;
    }
    return sum;
}

static int64_t net(int64_t v, int64_t wait)
{
    v -= wait;
    return v > 0 ? v : 0;
}

int rv_overhead_extract(const rv_trace *t, rv_overhead_samples *out, rv_error *err)
{
    int64_t *corr = NULL;
    uint32_t *ops = NULL, *launches = NULL, *widx = NULL;
    size_t ncorr = 0, nops = 0, nl = 0;
    waits wt = {0};
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (t->nevents > UINT32_MAX)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1, "overheads: too many events");
    corr = malloc((t->nevents + 1) * sizeof(*corr));
    ops = malloc((t->nevents + 1) * sizeof(*ops));
    launches = malloc((t->nevents + 1) * sizeof(*launches));
    widx = malloc((t->nevents + 1) * sizeof(*widx));
    wt.prefix = malloc((t->nevents + 2) * sizeof(*wt.prefix));
    if (!corr || !ops || !launches || !widx || !wt.prefix) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "overheads: out of memory");
        goto out;
    }
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (rv_cat_is_gpu_task(e->cat) && e->correlation != RV_NONE)
            corr[ncorr++] = e->correlation;
        else if (e->cat == RV_CAT_CPU_OP &&
                 strncmp(rv_trace_str(t, e->name), "ProfilerStep#", 13) != 0)
            ops[nops++] = (uint32_t)i; /* legacy traces file steps as ops */
    }
    rv_sort_i64s(corr, ncorr);
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat != RV_CAT_RUNTIME && e->cat != RV_CAT_DRIVER)
            continue;
        if (e->correlation != RV_NONE && has_corr(corr, ncorr, e->correlation))
            launches[nl++] = (uint32_t)i;
        else if (e->dur_ns >= RV_GRAPH_BLOCKED_CALL_NS ||
                 rv_graph_is_sync_call(rv_trace_str(t, e->name)))
            widx[wt.n++] = (uint32_t)i;
    }
    qsort_r(widx, wt.n, sizeof(*widx), cmp_ops, (void *)t);
    wt.idx = widx;
    wt.prefix[0] = 0;
    for (size_t i = 0; i < wt.n; i++)
        wt.prefix[i + 1] = wt.prefix[i] + t->events[widx[i]].dur_ns;
    /* qsort_r (glibc): the comparator needs the trace. */
    qsort_r(ops, nops, sizeof(*ops), cmp_ops, (void *)t);
    qsort_r(launches, nl, sizeof(*launches), cmp_ops, (void *)t);

    /* T4: every launch, wherever it runs. */
    for (size_t i = 0; i < nl && !rc; i++) {
        const rv_event *l = &t->events[launches[i]];
        rc = push(out, RV_OH_T4, l->name, l->dur_ns);
    }

    /* Walk ops and launches together, thread by thread. */
    size_t li = 0;
    const rv_event *prev_top = NULL;
    int64_t top_end = 0;
    for (size_t oi = 0; oi < nops && !rc; oi++) {
        const rv_event *op = &t->events[ops[oi]];
        int64_t end = op->ts_ns + op->dur_ns;
        if (prev_top && cmp_thread(prev_top, op) != 0)
            prev_top = NULL;
        if (prev_top && op->ts_ns < top_end)
            continue; /* nested in the current top-level op */
        /* A thread idle while another thread of its process runs ops is
         * waiting for it (the main thread during backward), not paying
         * overhead: such a gap is no T1 sample. */
        if (prev_top && !other_thread_busy(t, ops, nops, op, top_end, op->ts_ns))
            rc = push(out, RV_OH_T1, op->name,
                      net(op->ts_ns - top_end, wait_ns(t, &wt, op, top_end, op->ts_ns)));
        prev_top = op;
        top_end = end;

        /* Skip launches of earlier threads or before this op. */
        while (li < nl) {
            const rv_event *l = &t->events[launches[li]];
            int c = cmp_thread(l, op);
            if (c < 0 || (c == 0 && l->ts_ns < op->ts_ns))
                li++;
            else
                break;
        }
        const rv_event *first = NULL, *last = NULL;
        while (li < nl && !rc) {
            const rv_event *l = &t->events[launches[li]];
            if (cmp_thread(l, op) != 0 || l->ts_ns > end)
                break;
            if (!first)
                first = l;
            else {
                int64_t from = last->ts_ns + last->dur_ns;
                rc = push(out, RV_OH_T5, op->name,
                          net(l->ts_ns - from, wait_ns(t, &wt, op, from, l->ts_ns)));
            }
            last = l;
            li++;
        }
        if (first && !rc) {
            rc = push(out, RV_OH_T2, op->name,
                      net(first->ts_ns - op->ts_ns, wait_ns(t, &wt, op, op->ts_ns, first->ts_ns)));
            int64_t from = last->ts_ns + last->dur_ns;
            if (!rc)
                rc = push(out, RV_OH_T3, op->name, net(end - from, wait_ns(t, &wt, op, from, end)));
        }
    }
    if (rc)
        rc = rv_error_set(err, rc, -1, -1, "overheads: %s after %zu samples",
                          rc == RV_ERR_LIMIT ? "sample cap reached" : "out of memory", out->n);
out:
    free(corr);
    free(ops);
    free(launches);
    free(widx);
    free(wt.prefix);
    if (rc)
        rv_overhead_samples_free(out);
    return rc;
}

/* Linear interpolation at position p * (n - 1), written as PostgreSQL's
 * percentile_cont computes it (lo + (hi - lo) * fraction), so both agree to
 * the last bit. v is sorted, n > 0. */
static double quantile(const double *v, size_t n, double p)
{
    double pos = p * (double)(n - 1);
    double fl = floor(pos), ce = ceil(pos);
    double lo = v[(size_t)fl], hi = v[(size_t)ce];
    return lo + (hi - lo) * (pos - fl);
}

void rv_overhead_stats(double *v, size_t n, rv_overhead_stat *out)
{
    memset(out, 0, sizeof(*out));
    out->samples = n;
    if (!n)
        return;
    rv_sort_doubles(v, n);
    double q1 = quantile(v, n, 0.25), q3 = quantile(v, n, 0.75);
    double lo = q1 - 1.5 * (q3 - q1), hi = q3 + 1.5 * (q3 - q1);
    size_t a = 0, b = n;
    while (a < n && v[a] < lo)
        a++;
    while (b > a && v[b - 1] > hi)
        b--;
    const double *k = v + a;
    size_t m = b - a;
    out->count = m;
    if (!m)
        return;
    double sum = 0;
    for (size_t i = 0; i < m; i++)
        sum += k[i];
    double mean = sum / (double)m, ss = 0;
    for (size_t i = 0; i < m; i++)
        ss += (k[i] - mean) * (k[i] - mean);
    out->mean = mean;
    out->std = sqrt(ss / (double)m);
    out->median = quantile(k, m, 0.5);
    out->p90 = quantile(k, m, 0.9);
}

static int cmp_group_key(const void *pa, const void *pb)
{
    const rv_overhead_sample *a = pa, *b = pb;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    if (a->name != b->name)
        return a->name < b->name ? -1 : 1;
    return 0;
}

int rv_overhead_summarize(const rv_overhead_samples *s, rv_overhead_group **out, size_t *nout,
                          rv_error *err)
{
    rv_overhead_sample *sorted = NULL;
    double *vals = NULL;
    rv_overhead_group *g = NULL;
    size_t ng = 0;
    int rc = 0;

    *out = NULL;
    *nout = 0;
    if (!s->n)
        return 0;
    sorted = malloc(s->n * sizeof(*sorted));
    vals = malloc(s->n * sizeof(*vals));
    /* At most one group per sample plus one overall group per type. */
    g = malloc((s->n + RV_OH_NTYPES) * sizeof(*g));
    if (!sorted || !vals || !g) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "overheads: out of memory");
        goto out;
    }
    memcpy(sorted, s->v, s->n * sizeof(*sorted));
    qsort(sorted, s->n, sizeof(*sorted), cmp_group_key);
    for (size_t i = 0; i < s->n;) {
        int type = sorted[i].type;
        size_t tend = i;
        while (tend < s->n && sorted[tend].type == type)
            tend++;
        /* Overall group of this type. */
        for (size_t j = i; j < tend; j++)
            vals[j - i] = (double)sorted[j].value_ns / 1000.0;
        g[ng].type = (uint8_t)type;
        g[ng].name = RV_OH_OVERALL;
        rv_overhead_stats(vals, tend - i, &g[ng].stat);
        ng++;
        for (size_t j = i; j < tend;) {
            size_t k = j;
            while (k < tend && sorted[k].name == sorted[j].name) {
                vals[k - j] = (double)sorted[k].value_ns / 1000.0;
                k++;
            }
            g[ng].type = (uint8_t)type;
            g[ng].name = sorted[j].name;
            rv_overhead_stats(vals, k - j, &g[ng].stat);
            ng++;
            j = k;
        }
        i = tend;
    }
    *out = g;
    *nout = ng;
    g = NULL;
out:
    free(sorted);
    free(vals);
    free(g);
    return rc;
}

void rv_overhead_sketch_groups_free(rv_overhead_sketch_group *g, size_t n)
{
    if (!g)
        return;
    for (size_t i = 0; i < n; i++)
        rv_sketch_free(&g[i].sk);
    free(g);
}

int rv_overhead_sketch(const rv_overhead_samples *s, rv_overhead_sketch_group **out, size_t *nout,
                       rv_error *err)
{
    rv_overhead_sample *sorted = NULL;
    rv_overhead_sketch_group *g = NULL;
    size_t ng = 0;
    int rc = 0;

    *out = NULL;
    *nout = 0;
    if (!s->n)
        return 0;
    sorted = malloc(s->n * sizeof(*sorted));
    /* At most one group per sample plus one overall group per type. */
    g = calloc(s->n + RV_OH_NTYPES, sizeof(*g));
    if (!sorted || !g) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "overheads: out of memory");
        goto out;
    }
    memcpy(sorted, s->v, s->n * sizeof(*sorted));
    qsort(sorted, s->n, sizeof(*sorted), cmp_group_key);
    for (size_t i = 0; i < s->n && !rc;) {
        int type = sorted[i].type;
        size_t tend = i, all = ng++;
        while (tend < s->n && sorted[tend].type == type)
            tend++;
        g[all].type = (uint8_t)type;
        g[all].name = RV_OH_OVERALL;
        for (size_t j = i; j < tend && !rc;) {
            size_t k = j;
            rv_overhead_sketch_group *one = &g[ng++];
            one->type = (uint8_t)type;
            one->name = sorted[j].name;
            for (; k < tend && sorted[k].name == sorted[j].name && !rc; k++)
                if (rv_sketch_add(&one->sk, (double)sorted[k].value_ns / 1000.0))
                    rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "overheads: out of memory");
            /* The overall sketch is the merge of its groups' (exactly). */
            if (!rc && rv_sketch_merge(&g[all].sk, &one->sk))
                rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "overheads: out of memory");
            j = k;
        }
        i = tend;
    }
    if (rc)
        goto out;
    *out = g;
    *nout = ng;
    g = NULL;
out:
    free(sorted);
    rv_overhead_sketch_groups_free(g, ng);
    return rc;
}

void rv_overhead_stat_of_sketch(const rv_sketch *sk, rv_overhead_stat *out)
{
    rv_sketch_stat st;
    rv_sketch_iqr(sk, &st);
    out->samples = (size_t)st.samples;
    out->count = (size_t)st.count;
    out->mean = st.mean;
    out->std = st.std;
    out->median = st.median;
    out->p90 = st.p90;
}
