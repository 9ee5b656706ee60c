/* Iteration figures, breakdowns, top kernels, critical path, timeline. */
#include "simulate/rv_report.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_jsonw.h"
#include "util/rv_sort.h"

static double us(int64_t ns)
{
    return (double)ns / 1000.0;
}

/* A trace of one step often ends the step's annotation before the GPU work
 * launched inside it (a trailing synchronize after the step, or none at
 * all): the step is then its annotation and that GPU work, measured and
 * simulated alike. With several steps the steady-state span (step_done)
 * already covers it. */
static int64_t gpu_tail_end(const rv_graph *g, const rv_sim *s, size_t k, int64_t end)
{
    if (g->niters != 1)
        return end;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA || t->iteration != (int32_t)k ||
            (t->flags & RV_TF_REMOVED))
            continue;
        int64_t e = s ? s->end_ns[i]
                      : (t->meas_start_ns >= 0 ? t->meas_start_ns + t->meas_dur_ns : INT64_MIN);
        if (e > end)
            end = e;
    }
    return end;
}

/* Measured and simulated duration of step k. */
static void step_figures(const rv_graph *g, const rv_sim *s, size_t k, double *meas, double *sim)
{
    const rv_iter *it = &g->iters[k];
    int64_t a = rv_sim_map_time(g, s, it->thread, it->start_ns);
    int64_t b = rv_sim_map_time(g, s, it->thread, it->end_ns);
    *meas = us(gpu_tail_end(g, NULL, k, it->end_ns) - it->start_ns);
    *sim = us(gpu_tail_end(g, s, k, b) - a);
}

int rv_report_iteration(const rv_graph *g, const rv_sim *s, int64_t iteration, rv_iter_figures *out,
                        rv_error *err)
{
    memset(out, 0, sizeof(*out));
    out->iter = -1;
    if (g->niters == 0) {
        out->measured_us = us(g->span_ns);
        out->simulated_us = us(s->makespan_ns);
        return 0;
    }
    if (iteration != RV_ITER_MEDIAN) {
        for (size_t i = 0; i < g->niters; i++) {
            if (g->iters[i].step != iteration)
                continue;
            out->iter = (int32_t)i;
            step_figures(g, s, i, &out->measured_us, &out->simulated_us);
            return 0;
        }
        return rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                            "no step %" PRId64 " in the trace (steps %" PRId64 "..%" PRId64 ")",
                            iteration, g->iters[0].step, g->iters[g->niters - 1].step);
    }
    size_t first = rv_report_first_steady(g), n = g->niters - first;
    double *m = malloc(n * sizeof(double));
    double *v = malloc(n * sizeof(double));
    if (!m || !v) {
        free(m);
        free(v);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        step_figures(g, s, first + i, &m[i], &v[i]);
    out->measured_us = rv_sort_median(m, n);
    out->simulated_us = rv_sort_median(v, n);
    free(m);
    free(v);
    return 0;
}

size_t rv_report_first_steady(const rv_graph *g)
{
    return g->niters >= 3 ? 1 : 0;
}

size_t rv_report_measured_steps(const rv_graph *g, double *out)
{
    size_t first = rv_report_first_steady(g), n = g->niters - first;
    for (size_t i = 0; i < n; i++)
        out[i] = us(gpu_tail_end(g, NULL, first + i, g->iters[first + i].end_ns) -
                    g->iters[first + i].start_ns);
    return n;
}

/* When step k is done: its end marker on the CPU, or later if GPU work
 * launched in it or before is still running (a CPU that runs ahead of a
 * faster GPU must not make a step look shorter than its GPU work). */
static int64_t step_done(const rv_graph *g, const rv_sim *s, size_t k)
{
    const rv_iter *it = &g->iters[k];
    int64_t done = rv_sim_map_time(g, s, it->thread, it->end_ns);
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA || t->iteration < 0 ||
            (size_t)t->iteration > k)
            continue;
        if (s->end_ns[i] > done)
            done = s->end_ns[i];
    }
    return done;
}

/* step_done of the first and the last step, in one pass over the tasks. */
static void first_last_done(const rv_graph *g, const rv_sim *s, int64_t *first, int64_t *last)
{
    const rv_iter *a = &g->iters[0], *b = &g->iters[g->niters - 1];
    int64_t d0 = rv_sim_map_time(g, s, a->thread, a->end_ns);
    int64_t dl = rv_sim_map_time(g, s, b->thread, b->end_ns);
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA || t->iteration < 0)
            continue;
        int64_t e = s->end_ns[i];
        if (e > dl)
            dl = e;
        if (t->iteration == 0 && e > d0)
            d0 = e;
    }
    *first = d0;
    *last = dl;
}

/* Simulated time of the steady steps: from the completion of the first
 * step (it fills the pipelines: prefetching, the launch queue) to the
 * completion of the last. With fewer than three steps, from the first
 * step's start marker. */
static int64_t steps_span(const rv_graph *g, const rv_sim *s)
{
    if (g->niters >= 3) {
        int64_t first, last;
        first_last_done(g, s, &first, &last);
        return last - first;
    }
    return step_done(g, s, g->niters - 1) -
           rv_sim_map_time(g, s, g->iters[0].thread, g->iters[0].start_ns);
}

int rv_report_compare(const rv_graph *bg, const rv_sim *bs, const rv_graph *pg, const rv_sim *ps,
                      int64_t iteration, rv_iter_figures *base, rv_iter_figures *pred,
                      rv_error *err)
{
    int rc = rv_report_iteration(bg, bs, iteration, base, err);
    if (rc != 0)
        return rc;
    if (iteration != RV_ITER_MEDIAN || bg->niters < 2 || pg->niters != bg->niters)
        return rv_report_iteration(pg, ps, iteration, pred, err);
    *pred = *base;
    int64_t b = steps_span(bg, bs), p = steps_span(pg, ps);
    pred->simulated_us = b > 0 ? base->simulated_us * (double)p / (double)b : 0;
    return 0;
}

void rv_report_trace_figures(const rv_trace *t, rv_trace_figures *out)
{
    rv_graph *g = NULL;
    rv_error err;
    memset(out, 0, sizeof(*out));
    if (rv_graph_build(t, NULL, &g, &err) == 0) {
        double *m = malloc((g->niters + 1) * sizeof(double));
        out->iterations = (int)g->niters;
        if (m && g->niters) {
            size_t n = rv_report_measured_steps(g, m);
            out->measured_us = rv_sort_median(m, n);
        } else {
            out->measured_us = us(g->span_ns);
        }
        free(m);
        rv_graph_free(g);
        return;
    }
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->ts_ns < lo)
            lo = e->ts_ns;
        if (e->ts_ns + e->dur_ns > hi)
            hi = e->ts_ns + e->dur_ns;
    }
    out->measured_us = t->nevents ? us(hi - lo) : 0;
}

json_t *rv_report_iterations(const rv_graph *g, const rv_sim *s)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < g->niters; i++) {
        double m, v;
        step_figures(g, s, i, &m, &v);
        json_array_append_new(arr,
                              json_pack("{s:I, s:f, s:f}", "step", (json_int_t)g->iters[i].step,
                                        "measured_us", m, "simulated_us", v));
    }
    return arr;
}

rv_window rv_report_window(const rv_graph *g, const rv_sim *s, int32_t iter_index)
{
    rv_window w;
    memset(&w, 0, sizeof(w));
    w.iter = iter_index;
    w.per = 1;
    w.end_thread = -1;
    if (g->niters == 0) {
        w.t0_ns = s->first_start_ns;
        w.t1_ns = s->last_end_ns;
        return w;
    }
    if (iter_index < 0 && g->niters >= 3) {
        /* The steady steps, as rv_report_compare measures them. */
        first_last_done(g, s, &w.t0_ns, &w.t1_ns);
        w.end_thread = g->iters[g->niters - 1].thread;
        w.per = (double)(g->niters - 1);
        return w;
    }
    size_t a = iter_index >= 0 ? (size_t)iter_index : 0;
    size_t b = iter_index >= 0 ? (size_t)iter_index : g->niters - 1;
    w.t0_ns = rv_sim_map_time(g, s, g->iters[a].thread, g->iters[a].start_ns);
    w.t1_ns = gpu_tail_end(g, s, b, rv_sim_map_time(g, s, g->iters[b].thread, g->iters[b].end_ns));
    w.end_thread = g->iters[b].thread;
    w.per = iter_index >= 0 ? 1 : (double)g->niters;
    return w;
}

/* ---- interval unions ---------------------------------------------------- */

typedef struct ival {
    int64_t a, b;
} ival;

typedef struct ivals {
    ival *v;
    size_t n, cap;
} ivals;

static void ivals_add(ivals *s, int64_t a, int64_t b, const rv_window *w)
{
    if (a < w->t0_ns)
        a = w->t0_ns;
    if (b > w->t1_ns)
        b = w->t1_ns;
    if (b <= a)
        return;
    if (s->n == s->cap) {
        /* One interval per task at most: the graph's cap is this one's. */
        if (s->cap >= RV_GRAPH_MAX_TASKS)
            return;
        size_t cap = s->cap ? s->cap * 2 : 1024;
        ival *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return; /* a report on OOM undercounts rather than crash */
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].a = a;
    s->v[s->n].b = b;
    s->n++;
}

/* Length of the union; sorts in place. */
static int64_t ivals_union(ivals *s)
{
    if (s->n == 0)
        return 0;
    /* Linear in n (rv_sort): a breakdown sorts a few 100k intervals per call. */
    rv_sort_i64(s->v, s->n, sizeof(ival), offsetof(ival, a));
    int64_t total = 0, ca = s->v[0].a, cb = s->v[0].b;
    for (size_t i = 1; i < s->n; i++) {
        if (s->v[i].a > cb) {
            total += cb - ca;
            ca = s->v[i].a;
            cb = s->v[i].b;
        } else if (s->v[i].b > cb) {
            cb = s->v[i].b;
        }
    }
    return total + (cb - ca);
}

/* Length of the union of two sets already sorted by ivals_union: a merge. */
static int64_t ivals_union2(const ivals *x, const ivals *y)
{
    size_t i = 0, j = 0;
    int64_t total = 0, ca = 0, cb = 0;
    int open = 0;
    while (i < x->n || j < y->n) {
        const ival *next;
        if (j >= y->n || (i < x->n && x->v[i].a <= y->v[j].a))
            next = &x->v[i++];
        else
            next = &y->v[j++];
        if (!open) {
            ca = next->a;
            cb = next->b;
            open = 1;
        } else if (next->a > cb) {
            total += cb - ca;
            ca = next->a;
            cb = next->b;
        } else if (next->b > cb) {
            cb = next->b;
        }
    }
    return open ? total + (cb - ca) : 0;
}

static int task_counts(const rv_task *t)
{
    return !(t->flags & RV_TF_REMOVED);
}

/* Room for n intervals at once (one per task at most), so that adding
 * never copies; on OOM ivals_add grows it instead. */
static void ivals_reserve(ivals *s, size_t n)
{
    s->v = malloc((n ? n : 1) * sizeof(ival));
    s->cap = s->v ? (n ? n : 1) : 0;
}

json_t *rv_report_breakdown(const rv_graph *g, const rv_sim *s, const rv_window *w)
{
    ivals cpu = {0}, gpu = {0}, comp = {0}, comm = {0}, mcp = {0}, mst = {0};
    ivals_reserve(&cpu, g->ntasks);
    ivals_reserve(&gpu, g->ntasks);
    ivals_reserve(&comp, g->ntasks);
    double phase_gpu[RV_PHASE_COUNT] = {0}, phase_cpu[RV_PHASE_COUNT] = {0};
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (!task_counts(t))
            continue;
        int64_t a = s->start_ns[i], b = s->end_ns[i];
        if (b <= w->t0_ns || a >= w->t1_ns) {
            if (!(t->kind == RV_TASK_CPU && b + t->gap_ns > w->t0_ns && a < w->t1_ns))
                continue;
        }
        int64_t ca = a > w->t0_ns ? a : w->t0_ns, cb = b < w->t1_ns ? b : w->t1_ns;
        double clipped = cb > ca ? (double)(cb - ca) : 0;
        switch (t->kind) {
        case RV_TASK_CPU:
        case RV_TASK_DATA:
            /* The gap is CPU work too (framework, Python, data loading). */
            ivals_add(&cpu, a, b + t->gap_ns, w);
            phase_cpu[t->phase] += clipped;
            break;
        case RV_TASK_COMM:
            ivals_add(&gpu, a, b, w);
            ivals_add(&comm, a, b, w);
            phase_gpu[t->phase] += clipped;
            break;
        default:
            ivals_add(&gpu, a, b, w);
            if (t->cat == RV_CAT_MEMCPY)
                ivals_add(&mcp, a, b, w);
            else if (t->cat == RV_CAT_MEMSET)
                ivals_add(&mst, a, b, w);
            else
                ivals_add(&comp, a, b, w);
            phase_gpu[t->phase] += clipped;
            break;
        }
    }
    double per = w->per > 0 ? w->per : 1;
    int64_t win = w->t1_ns - w->t0_ns;
    int64_t u_cpu = ivals_union(&cpu), u_gpu = ivals_union(&gpu);
    int64_t u_both = ivals_union2(&cpu, &gpu);
    int64_t u_comp = ivals_union(&comp), u_comm = ivals_union(&comm);
    int64_t u_comp_comm = ivals_union2(&comp, &comm);
    int64_t u_mcp = ivals_union(&mcp), u_mst = ivals_union(&mst);
#define PER(x) (us(x) / per)
    json_t *daydream =
        json_pack("{s:f, s:f, s:f, s:f}", "cpu_only_us", PER(u_both - u_gpu), "gpu_only_us",
                  PER(u_both - u_cpu), "parallel_us", PER(u_cpu + u_gpu - u_both), "idle_us",
                  PER(win - u_both > 0 ? win - u_both : 0));
    json_t *gpuj = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "compute_us", PER(u_comp),
                             "communication_us", PER(u_comm), "exposed_communication_us",
                             PER(u_comp_comm - u_comp), "memcpy_us", PER(u_mcp), "memset_us",
                             PER(u_mst), "idle_us", PER(win - u_gpu > 0 ? win - u_gpu : 0));
    json_t *phases = json_object();
    for (int p = 0; p < RV_PHASE_COUNT; p++) {
        if (phase_gpu[p] == 0 && phase_cpu[p] == 0)
            continue;
        json_object_set_new(phases, rv_phase_name(p),
                            json_pack("{s:f, s:f}", "gpu_us", phase_gpu[p] / 1000.0 / per, "cpu_us",
                                      phase_cpu[p] / 1000.0 / per));
    }
    json_t *out = json_pack("{s:f, s:f, s:o, s:o, s:o}", "window_us", PER(win), "gpu_utilization",
                            win > 0 ? (double)u_gpu / (double)win : 0.0, "cpu_gpu", daydream, "gpu",
                            gpuj, "phases", phases);
#undef PER
    free(cpu.v);
    free(gpu.v);
    free(comp.v);
    free(comm.v);
    free(mcp.v);
    free(mst.v);
    return out;
}

/* ---- top kernels -------------------------------------------------------- */

typedef struct kstat {
    uint32_t name;
    int64_t total, count, max;
} kstat;

static int cmp_kstat_name(const void *a, const void *b)
{
    const kstat *x = a, *y = b;
    return (x->name > y->name) - (x->name < y->name);
}

static int cmp_kstat_total(const void *a, const void *b)
{
    const kstat *x = a, *y = b;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    return (x->name > y->name) - (x->name < y->name);
}

/* Adds up v[0..m) per name into v[0..u), returns u; the order is
 * the first appearance's. Ids up to max_name index a table of slots (a
 * sort by name cost more than the rest of the report); past a table of
 * reasonable size the entries are sorted by name instead. */
static size_t kstat_group(kstat *v, size_t m, uint32_t max_name)
{
    int32_t *slot = NULL;
    size_t u = 0;

    if ((size_t)max_name <= 4 * m + 65536)
        slot = malloc(((size_t)max_name + 1) * sizeof(*slot));
    if (!slot)
        qsort(v, m, sizeof(*v), cmp_kstat_name);
    else
        memset(slot, 0xff, ((size_t)max_name + 1) * sizeof(*slot));
    for (size_t i = 0; i < m; i++) {
        kstat *x = NULL;
        int32_t at = slot ? slot[v[i].name] : -1;
        if (at >= 0 && (size_t)at < u)
            x = &v[at];
        else if (!slot && u > 0 && v[u - 1].name == v[i].name)
            x = &v[u - 1];
        if (x) {
            x->total += v[i].total;
            x->count += v[i].count;
            if (v[i].max > x->max)
                x->max = v[i].max;
            continue;
        }
        if (slot)
            slot[v[i].name] = (int32_t)u;
        v[u++] = v[i];
    }
    free(slot);
    return u;
}

json_t *rv_report_top_kernels(const rv_graph *g, const rv_sim *s, const rv_window *w, int k)
{
    /* Room for every task: counting the GPU ones first cost a pass. */
    kstat *v = malloc((g->ntasks + 1) * sizeof(*v));
    json_t *arr = json_array();
    if (!v)
        return arr;
    size_t m = 0;
    int64_t all = 0;
    uint32_t max_name = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA || !task_counts(t))
            continue;
        if (s->start_ns[i] < w->t0_ns || s->start_ns[i] >= w->t1_ns)
            continue;
        max_name = t->name > max_name ? t->name : max_name;
        v[m].name = t->name;
        v[m].total = t->dur_ns;
        v[m].count = 1;
        v[m].max = t->dur_ns;
        all += t->dur_ns;
        m++;
    }
    /* Names are unique after grouping: the order below is total. */
    size_t u = kstat_group(v, m, max_name);
    qsort(v, u, sizeof(*v), cmp_kstat_total);
    double per = w->per > 0 ? w->per : 1;
    for (size_t i = 0; i < u && (int)i < k; i++) {
        json_array_append_new(
            arr,
            json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "name", rv_trace_str(g->trace, v[i].name),
                      "total_us", us(v[i].total) / per, "count", (double)v[i].count / per,
                      "mean_us", us(v[i].total) / (double)v[i].count, "max_us", us(v[i].max),
                      "share", all > 0 ? (double)v[i].total / (double)all : 0.0));
    }
    free(v);
    return arr;
}

/* ---- critical path ------------------------------------------------------ */

/* The task whose end closes the window: the last one on the marker's thread
 * that started before the window's end, else the last to end overall. */
static int32_t window_sink(const rv_graph *g, const rv_sim *s, const rv_window *w)
{
    int32_t best = -1;
    if (w->end_thread >= 0) {
        const rv_thread *th = &g->threads[w->end_thread];
        for (int32_t k = th->first; k >= 0 && k < th->first + th->norig; k++)
            if (s->start_ns[k] < w->t1_ns)
                best = k;
        if (best >= 0)
            return best;
    }
    for (size_t i = 0; i < g->ntasks; i++)
        if (s->end_ns[i] <= w->t1_ns && (best < 0 || s->end_ns[i] > s->end_ns[best]))
            best = (int32_t)i;
    return best;
}

size_t rv_report_critical_tasks(const rv_graph *g, const rv_sim *s, const rv_window *w,
                                uint8_t *out)
{
    memset(out, 0, g->ntasks);
    size_t n = 0;
    for (int32_t u = window_sink(g, s, w); u >= 0 && n < g->ntasks; u = s->binder[u]) {
        if (s->end_ns[u] < w->t0_ns || out[u])
            break;
        out[u] = 1;
        n++;
    }
    return n;
}

/* What a stretch of the path is: busy on a resource, or before a task. */
typedef enum stretch_kind { SK_CPU, SK_GPU, SK_COMM, SK_DATA, SK_WAIT } stretch_kind;

static const char *const stretch_kind_names[] = {"cpu", "gpu", "comm", "data", "wait"};

static stretch_kind resource_kind(const rv_graph *g, const rv_task *t)
{
    if (t->kind == RV_TASK_COMM)
        return SK_COMM;
    return g->threads[t->thread].kind == RV_THREAD_CPU ? SK_CPU : SK_GPU;
}

/* The window of one representative step for a window of several: the
 * steady step whose simulated duration is the median. A path is a chain
 * through one step; over several steps its stretches would not add up to
 * a per-step length. */
static rv_window path_window(const rv_graph *g, const rv_sim *s, const rv_window *w)
{
    if (w->per <= 1 || g->niters < 2 || w->iter >= 0)
        return *w;
    size_t first = g->niters >= 3 ? 1 : 0, n = g->niters - first;
    double *d = malloc(n * sizeof(double));
    if (!d)
        return *w;
    for (size_t i = 0; i < n; i++)
        d[i] = (double)rv_sim_iter_ns(g, s, first + i);
    double *sorted = malloc(n * sizeof(double));
    size_t pick = first + n / 2;
    if (sorted) {
        memcpy(sorted, d, n * sizeof(double));
        rv_sort_doubles(sorted, n);
        double med = sorted[n / 2], best = -1;
        for (size_t i = 0; i < n; i++)
            if (best < 0 || fabs(d[i] - med) < best) {
                best = fabs(d[i] - med);
                pick = first + i;
            }
        free(sorted);
    }
    free(d);
    return rv_report_window(g, s, (int32_t)pick);
}

/* One stretch of the path: [start_us, end_us) on a resource, relative to
 * the window's start. Strings are borrowed (the trace's or literals). */
typedef struct stretch {
    const char *resource, *first;
    stretch_kind kind;
    int32_t thread;
    double start_us, end_us;
    int64_t tasks;
} stretch;

/* The stretches of a path, kept as plain records while the path is cut
 * (a path has a stretch per few tasks, and most are dropped); only those
 * listed become JSON (stretches_json). */
typedef struct stretches {
    stretch *v;
    size_t n, cap;
} stretches;

/* Extends the last stretch when it is of the same thread and kind, else
 * appends one: 0 or RV_ERR_NOMEM. */
static int add_stretch(stretches *sv, const char *resource, stretch_kind kind, int32_t thread,
                       int64_t a, int64_t b, int64_t t0, size_t tasks, const char *first)
{
    stretch *last = sv->v && sv->n ? &sv->v[sv->n - 1] : NULL;
    if (last && last->thread == thread && last->kind == kind) {
        last->end_us = us(b - t0);
        last->tasks += (int64_t)tasks;
        return 0;
    }
    if (!sv->v || sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 256;
        stretch *v = realloc(sv->v, cap * sizeof(*v));
        if (!v)
            return RV_ERR_NOMEM;
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] =
        (stretch){resource, first, kind, thread, us(a - t0), us(b - t0), (int64_t)tasks};
    return 0;
}

static json_t *stretch_json(const stretch *st)
{
    return json_pack("{s:s, s:s, s:i, s:f, s:f, s:I, s:s}", "resource", st->resource, "kind",
                     stretch_kind_names[st->kind], "thread", st->thread, "start_us", st->start_us,
                     "end_us", st->end_us, "tasks", (json_int_t)st->tasks, "first_task", st->first);
}

/* The listed stretches as JSON: all, or past max (> 0) the longest max
 * in time order, the rest counted in *omitted and *omitted_us so that the
 * listed ones plus omitted_us still add up to length_us. NULL on OOM. */
static json_t *stretches_json(const stretches *sv, int max, size_t *omitted, double *omitted_us)
{
    json_t *arr = json_array();
    double cut = 0;
    size_t nk = 0;

    *omitted = 0;
    *omitted_us = 0;
    if (!arr)
        return NULL;
    int all = max <= 0 || sv->n <= (size_t)max;
    if (!all) {
        double *sorted = malloc(sv->n * sizeof(double));
        if (!sorted) {
            json_decref(arr);
            return NULL;
        }
        for (size_t i = 0; i < sv->n; i++)
            sorted[i] = sv->v[i].end_us - sv->v[i].start_us;
        rv_sort_doubles(sorted, sv->n);
        cut = sorted[sv->n - (size_t)max];
        free(sorted);
    }
    for (size_t i = 0; i < sv->n; i++) {
        double len = sv->v[i].end_us - sv->v[i].start_us;
        if (all || (len >= cut && nk < (size_t)max)) {
            if (json_array_append_new(arr, stretch_json(&sv->v[i])) != 0) {
                json_decref(arr);
                return NULL;
            }
            nk++;
        } else {
            *omitted_us += len;
            (*omitted)++;
        }
    }
    return arr;
}

/* What bounds the step: the resource with the largest share of the path,
 * the CPU (its traced ops and the untraced work between them), input
 * loading, GPU compute or communication. Waits are no resource; the first
 * listed wins a tie. *shares gets each one's share (new reference, NULL
 * on OOM). busy: cpu, gpu, comm time on the path (ns). */
static const char *bound_of(const double busy[3], double cpu_gap, double data, double waits,
                            double total, json_t **shares)
{
    static const char *const names[4] = {"gpu", "cpu", "data", "comm"};
    double part[4] = {busy[1], busy[0] + cpu_gap, data, busy[2]};
    int best = 0;
    for (int k = 1; k < 4; k++)
        if (part[k] > part[best])
            best = k;
    *shares = json_object();
    for (int k = 0; *shares && k < 4; k++)
        json_object_set_new(*shares, names[k], json_real(total > 0 ? part[k] / total : 0));
    if (*shares)
        json_object_set_new(*shares, "wait", json_real(total > 0 ? waits / total : 0));
    return names[best];
}

json_t *rv_report_critical_path(const rv_graph *g, const rv_sim *s, const rv_window *win,
                                int max_stretches)
{
    /* Walk back from the sink along binders, then cut the time from the
     * window's start to the sink's end into stretches, oldest first: each
     * task's busy time on its resource, and the time before it (its
     * thread's gap, data loading, or a wait on another resource). The
     * stretches tile [window start, path end), so they add up to
     * length_us. */
    rv_window w = path_window(g, s, win);
    int32_t *path = malloc((g->ntasks + 1) * sizeof(int32_t));
    uint8_t *seen = calloc(g->ntasks + 1, 1);
    json_t *out = json_object();
    stretches sv = {0};
    size_t n = 0;
    if (!path || !seen || !out) {
        free(path);
        free(seen);
        return out;
    }
    for (int32_t u = window_sink(g, s, &w); u >= 0 && n < g->ntasks; u = s->binder[u]) {
        if (s->end_ns[u] <= w.t0_ns || seen[u])
            break;
        seen[u] = 1;
        path[n++] = u;
    }
    free(seen);
    double busy[3] = {0, 0, 0}; /* cpu, gpu, comm */
    double cpu_gap = 0, data = 0, waits = 0;
    int64_t cursor = w.t0_ns;
    for (size_t i = n; i-- > 0;) {
        int32_t u = path[i];
        const rv_task *t = &g->tasks[u];
        stretch_kind rk = resource_kind(g, t);
        int ri = rk == SK_CPU ? 0 : rk == SK_GPU ? 1 : 2;
        int64_t a = s->start_ns[u] > cursor ? s->start_ns[u] : cursor;
        int64_t b = s->end_ns[u] > a ? s->end_ns[u] : a;
        if (a > cursor) {
            /* Before the task: the untraced CPU work of its thread (the
             * gap after its thread predecessor: Python, data loading),
             * then a wait (a latency, a dependency, an idle stream). */
            const rv_thread *th = &g->threads[t->thread];
            int64_t gap_end = cursor;
            int loading = 0;
            if (th->kind == RV_THREAD_CPU && u > th->first) {
                const rv_task *p = &g->tasks[u - 1];
                int64_t pe = s->end_ns[u - 1] + p->gap_ns;
                gap_end = pe < a ? pe : a;
                loading = p->gap_dl_ns > 0 && p->gap_dl_ns * 2 >= p->gap_ns;
            }
            if (gap_end > cursor) {
                double d = (double)(gap_end - cursor);
                if (loading)
                    data += d;
                else
                    cpu_gap += d;
                if (add_stretch(&sv, loading ? "data loading" : rv_trace_str(g->trace, th->label),
                                loading ? SK_DATA : SK_CPU, t->thread, cursor, gap_end, w.t0_ns, 0,
                                rv_trace_str(g->trace, t->name)) != 0)
                    break;
                cursor = gap_end;
            }
            if (a > cursor) {
                waits += (double)(a - cursor);
                /* A queue gap between two tasks of one thread stays in its
                 * stretch; a real wait is a stretch of its own. */
                stretch *last = sv.v && sv.n ? &sv.v[sv.n - 1] : NULL;
                int fold =
                    last && a - cursor <= 4 * g->gpu_gap_ns + 1000 && last->thread == t->thread;
                if (fold)
                    last->end_us = us(a - w.t0_ns);
                else if (add_stretch(&sv, rv_trace_str(g->trace, th->label), SK_WAIT, t->thread,
                                     cursor, a, w.t0_ns, 0, rv_trace_str(g->trace, t->name)) != 0)
                    break;
            }
        }
        busy[ri] += (double)(b - a);
        if (add_stretch(&sv, rv_trace_str(g->trace, g->threads[t->thread].label), rk, t->thread, a,
                        b, w.t0_ns, 1, rv_trace_str(g->trace, t->name)) != 0)
            break;
        cursor = b;
    }
    free(path);
    /* Keep the output bounded: the longest stretches, in time order. */
    double omitted_us = 0;
    size_t omitted = 0;
    json_t *listed = stretches_json(&sv, max_stretches, &omitted, &omitted_us);
    free(sv.v);
    if (!listed) {
        json_decref(out);
        return NULL;
    }
    double total = busy[0] + busy[1] + busy[2] + cpu_gap + data + waits;
    json_t *shares = NULL;
    const char *bound = bound_of(busy, cpu_gap, data, waits, total, &shares);
    json_object_set_new(out, "tasks", json_integer((json_int_t)n));
    json_object_set_new(out, "window_start_us", json_real(us(w.t0_ns)));
    json_object_set_new(out, "length_us", json_real(total / 1000.0));
    json_object_set_new(out, "cpu_us", json_real(busy[0] / 1000.0));
    json_object_set_new(out, "cpu_gap_us", json_real(cpu_gap / 1000.0));
    json_object_set_new(out, "data_us", json_real(data / 1000.0));
    json_object_set_new(out, "gpu_us", json_real(busy[1] / 1000.0));
    json_object_set_new(out, "comm_us", json_real(busy[2] / 1000.0));
    json_object_set_new(out, "wait_us", json_real(waits / 1000.0));
    json_object_set_new(out, "bound_by", json_string(bound));
    json_object_set_new(out, "shares", shares ? shares : json_object());
    json_object_set_new(out, "omitted_stretches", json_integer((json_int_t)omitted));
    json_object_set_new(out, "omitted_us", json_real(omitted_us));
    json_object_set_new(out, "stretches", listed);
    return out;
}

/* ---- Chrome trace ------------------------------------------------------- */

/* Whether task i is written by rv_report_timeline_chrome for w. */
static int timeline_has(const rv_graph *g, const rv_sim *s, const rv_window *w, size_t i)
{
    if (g->tasks[i].flags & RV_TF_REMOVED)
        return 0;
    return !w || (s->end_ns[i] >= w->t0_ns && s->start_ns[i] < w->t1_ns);
}

size_t rv_report_timeline_count(const rv_graph *g, const rv_sim *s, const rv_window *w)
{
    size_t n = 0;
    for (size_t i = 0; i < g->ntasks; i++)
        n += (size_t)timeline_has(g, s, w, i);
    return n;
}

int rv_report_timeline_chrome(const rv_graph *g, const rv_sim *s, const rv_window *w, FILE *f)
{
    uint8_t *crit = calloc(g->ntasks + 1, 1);
    if (w && crit)
        rv_report_critical_tasks(g, s, w, crit);
    int64_t t0 = w ? w->t0_ns : s->first_start_ns;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    int first = 1;
    for (size_t i = 0; i < g->nthreads; i++) {
        const rv_thread *th = &g->threads[i];
        fprintf(f,
                "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%zu,\"args\":{"
                "\"name\":",
                first ? "" : ",\n", th->kind == RV_THREAD_CPU ? 0 : 1, i);
        rv_jsonw_str_file(f, rv_trace_str(g->trace, th->label));
        fprintf(f, "}}");
        first = 0;
    }
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"CPU\"}}"
               ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"GPU\"}}");
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (!timeline_has(g, s, w, i))
            continue;
        const rv_thread *th = &g->threads[t->thread];
        fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", rv_cat_name(t->cat));
        rv_jsonw_str_file(f, rv_trace_str(g->trace, t->name));
        fprintf(f,
                ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"task\":%zu,"
                "\"phase\":\"%s\",\"critical\":%d,\"measured_ts\":%.3f,\"layer\":",
                th->kind == RV_THREAD_CPU ? 0 : 1, t->thread, us(s->start_ns[i] - t0),
                us(t->dur_ns), i, rv_phase_name(t->phase), crit ? crit[i] : 0,
                t->meas_start_ns >= 0 ? us(t->meas_start_ns + g->origin_ns) : -1.0);
        rv_jsonw_str_file(f, rv_trace_str(g->trace, t->layer));
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
    free(crit);
    return ferror(f) ? RV_ERR_IO : 0;
}
