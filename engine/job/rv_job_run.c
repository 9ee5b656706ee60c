/* Running a job: the what-if on each rank (rv_run), the job-level
 * what-ifs (network, rank count, straggler), the merged graph simulated
 * with one gang per matched collective, and the per-rank figures. See
 * rv_job.h and docs/models/job.md. */
#include "job/rv_job_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/rv_coll.h"
#include "models/rv_comm_model.h"
#include "hw/rv_hw.h"
#include "models/rv_apply.h"
#include "models/rv_parallel.h"
#include "simulate/rv_pardims.h"
#include "simulate/rv_power.h"
#include "simulate/rv_report.h"
#include "trace/rv_shapes.h"
#include "util/rv_sort.h"
#include "util/rv_stop.h"

void rv_job__warn(rv_job_result *r, const char *code, const char *fmt, ...)
{
    va_list ap;
    r->sum.warnings++;
    if (r->nwarnings >= RV_RUN_MAX_WARNINGS)
        return;
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strcmp(r->warnings[i].code, code) == 0)
            return; /* one per code: the ranks say the same thing */
    rv_warning *w = &r->warnings[r->nwarnings++];
    snprintf(w->code, sizeof(w->code), "%s", code);
    va_start(ap, fmt);
    vsnprintf(w->message, sizeof(w->message), fmt, ap);
    va_end(ap);
}

void rv_job_result_free(rv_job_result *r)
{
    if (!r)
        return;
    for (size_t s = 0; s < r->nslots && r->slots; s++)
        rv_graph_free(r->slots[s].owned);
    free(r->slots);
    for (size_t p = 0; p < r->npred && r->pred; p++)
        rv_graph_free(r->pred[p]);
    free(r->pred);
    free(r->colls);
    free(r->sizes);
    json_decref(r->applied);
    json_decref(r->parallelism);
    free(r);
}

const rv_run_summary *rv_job_result_summary(const rv_job_result *r)
{
    return r ? &r->sum : NULL;
}

/* The merged graph of the slots and its gangs. */
typedef struct merged {
    rv_graph *g;
    int32_t *gang, *gsize;
    rv_sim *sim;
} merged;

static void merged_free(merged *m)
{
    rv_graph_free(m->g);
    free(m->gang);
    free(m->gsize);
    rv_sim_free(m->sim);
    memset(m, 0, sizeof(*m));
}

/* Joins the slots' graphs into one, each on its aligned clock, and makes
 * each matched collective a gang whose members last their transfer
 * (scaled by ratio[c] when given: a network what-if). */
static int merge(const rv_job *j, rv_job_slot *slots, size_t nslots, const double *ratio, merged *m,
                 rv_error *err)
{
    size_t nt = 0, ne = 0, nh = 0, n = j->n;
    int64_t base = INT64_MAX;
    for (size_t s = 0; s < nslots; s++) {
        rv_job_slot *sl = &slots[s];
        const rv_job_member *mb = &j->r[sl->pos];
        int64_t at = mb->g->origin_ns + (int64_t)llround(j->offset_ns[sl->pos]);
        if (at < base)
            base = at;
        sl->toff = nt;
        sl->hoff = nh;
        nt += sl->g->ntasks;
        ne += sl->g->nedges;
        nh += sl->g->nthreads;
    }
    if (nt > RV_GRAPH_MAX_TASKS || ne > RV_GRAPH_MAX_EDGES || nh > (size_t)INT32_MAX) {
        rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                     "the job's graph would hold %zu tasks and %zu edges, past the caps", nt, ne);
        return RV_ERR_LIMIT;
    }
    m->g = calloc(1, sizeof(*m->g));
    if (!m->g) {
        rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        return RV_ERR_NOMEM;
    }
    m->g->tasks = malloc((nt + 1) * sizeof(rv_task));
    m->g->edges = malloc((ne + 1) * sizeof(rv_edge));
    m->g->threads = malloc((nh + 1) * sizeof(rv_thread));
    m->gang = malloc((nt + 1) * sizeof(int32_t));
    m->gsize = calloc(j->ncoll + 1, sizeof(int32_t));
    if (!m->g->tasks || !m->g->edges || !m->g->threads || !m->gang || !m->gsize) {
        merged_free(m);
        rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory joining %zu tasks", nt);
        return RV_ERR_NOMEM;
    }
    m->g->cap_tasks = nt + 1;
    m->g->cap_edges = ne + 1;
    m->g->cap_threads = nh + 1;
    m->g->trace = j->r[0].g->trace;
    m->g->origin_ns = base;
    for (size_t s = 0; s < nslots; s++) {
        rv_job_slot *sl = &slots[s];
        const rv_graph *g = sl->g;
        const rv_job_member *mb = &j->r[sl->pos];
        sl->shift_ns = mb->g->origin_ns + (int64_t)llround(j->offset_ns[sl->pos]) - base;
        rv_task *t = m->g->tasks + sl->toff;
        memcpy(t, g->tasks, g->ntasks * sizeof(rv_task));
        for (size_t i = 0; i < g->ntasks; i++) {
            t[i].thread += (int32_t)sl->hoff;
            if (t[i].meas_start_ns >= 0)
                t[i].meas_start_ns += sl->shift_ns;
            if (t[i].launch >= 0)
                t[i].launch += (int32_t)sl->toff;
            m->gang[sl->toff + i] = -1;
        }
        rv_edge *e = m->g->edges + m->g->nedges;
        memcpy(e, g->edges, g->nedges * sizeof(rv_edge));
        for (size_t i = 0; i < g->nedges; i++) {
            e[i].src += (int32_t)sl->toff;
            e[i].dst += (int32_t)sl->toff;
        }
        rv_thread *h = m->g->threads + sl->hoff;
        memcpy(h, g->threads, g->nthreads * sizeof(rv_thread));
        for (size_t i = 0; i < g->nthreads; i++) {
            if (h[i].first >= 0)
                h[i].first += (int32_t)sl->toff;
            if (h[i].last >= 0)
                h[i].last += (int32_t)sl->toff;
        }
        m->g->ntasks += g->ntasks;
        m->g->nedges += g->nedges;
        m->g->nthreads += g->nthreads;
        /* The collectives: each member now lasts its transfer. */
        for (size_t c = 0; c < j->ncoll; c++) {
            int32_t ti = j->coll_task[c * n + (size_t)sl->pos];
            if (ti < 0 || (size_t)ti >= g->ntasks || (g->tasks[ti].flags & RV_TF_REMOVED))
                continue;
            const rv_task *orig = &mb->g->tasks[ti];
            double x = (double)j->transfer_ns[c * n + (size_t)sl->pos];
            /* A per-rank model that re-timed the kernel re-times its transfer alike. */
            if (g != mb->g && orig->dur_ns > 0 && g->tasks[ti].dur_ns != orig->dur_ns)
                x *= (double)g->tasks[ti].dur_ns / (double)orig->dur_ns;
            if (ratio)
                x *= ratio[c];
            t[ti].dur_ns = (int64_t)llround(x);
            m->gang[sl->toff + (size_t)ti] = (int32_t)c;
            m->gsize[c]++;
        }
    }
    return 0;
}

static int simulate(merged *m, size_t ncoll, int policy, const rv_stop *stop, rv_error *err)
{
    rv_sim_opts so = {
        .policy = policy, .stop = stop, .gang = m->gang, .gang_size = m->gsize, .ngangs = ncoll};
    rv_sim *sim = NULL;
    int rc = rv_sim_run_opts(m->g, &so, &sim, err);
    m->sim = sim;
    return rc;
}

/* A view of the merged simulation as slot sl's own (its tasks only). */
static void view(const merged *m, const rv_job_slot *sl, rv_sim *v)
{
    const rv_graph *g = sl->g;
    memset(v, 0, sizeof(*v));
    v->start_ns = m->sim->start_ns + sl->toff;
    v->end_ns = m->sim->end_ns + sl->toff;
    v->binder = m->sim->binder + sl->toff;
    v->ntasks = g->ntasks;
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (size_t i = 0; i < g->ntasks; i++) {
        if (v->start_ns[i] < first)
            first = v->start_ns[i];
        if (v->end_ns[i] > last)
            last = v->end_ns[i];
    }
    v->first_start_ns = g->ntasks ? first : 0;
    v->last_end_ns = g->ntasks ? last : 0;
    v->makespan_ns = g->ntasks ? last - first : 0;
}

/* Per slot: time waiting inside collectives and transferring, per step. */
static void waits(const rv_job *j, rv_job_slot *slots, size_t nslots, const merged *m, int pred)
{
    for (size_t s = 0; s < nslots; s++) {
        rv_job_slot *sl = &slots[s];
        double w = 0, x = 0;
        for (size_t c = 0; c < j->ncoll; c++) {
            int32_t ti = j->coll_task[c * j->n + (size_t)sl->pos];
            size_t gi = sl->toff + (size_t)ti;
            if (ti < 0 || (size_t)ti >= sl->g->ntasks || m->gang[gi] < 0)
                continue;
            w += (double)(m->sim->start_ns[gi] - m->sim->arrive_ns[gi]);
            x += (double)(m->sim->end_ns[gi] - m->sim->start_ns[gi]);
        }
        double per = sl->g->niters > 0 ? (double)sl->g->niters : 1;
        if (pred) {
            sl->wait_us = w / per / 1e3;
            sl->transfer_us = x / per / 1e3;
        } else {
            sl->bwait_us = w / per / 1e3;
            sl->btransfer_us = x / per / 1e3;
        }
    }
}

static int cmp_coll_report(const void *a, const void *b)
{
    const rv_job_coll_report *x = a, *y = b;
    if (x->total_wait_us != y->total_wait_us)
        return x->total_wait_us < y->total_wait_us ? 1 : -1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Who entered each collective last and how long the others waited; a
 * rank's delay is what its late arrivals cost: the time from the
 * second-to-last arrival to its own, summed over the collectives it
 * entered last. */
static int stragglers(const rv_job *j, rv_job_result *r, const merged *m)
{
    free(r->colls);
    r->ncolls = 0;
    r->colls = calloc(j->ncoll + 1, sizeof(*r->colls));
    if (!r->colls)
        return RV_ERR_NOMEM;
    for (size_t s = 0; s < r->nslots; s++) {
        r->slots[s].delay_us = 0;
        r->slots[s].last_in = 0;
    }
    for (size_t c = 0; c < j->ncoll; c++) {
        int64_t a1 = INT64_MIN, a2 = INT64_MIN;
        size_t who = SIZE_MAX, members = 0;
        double total = 0, mx = 0, xfer = 0;
        int64_t leave = INT64_MAX;
        for (size_t s = 0; s < r->nslots; s++) {
            const rv_job_slot *sl = &r->slots[s];
            int32_t ti = j->coll_task[c * j->n + (size_t)sl->pos];
            size_t gi = sl->toff + (size_t)ti;
            if (ti < 0 || (size_t)ti >= sl->g->ntasks || m->gang[gi] < 0)
                continue;
            int64_t a = m->sim->arrive_ns[gi];
            double wt = (double)(m->sim->start_ns[gi] - a) / 1e3;
            total += wt;
            if (wt > mx)
                mx = wt;
            xfer += (double)(m->sim->end_ns[gi] - m->sim->start_ns[gi]) / 1e3;
            if (m->sim->end_ns[gi] < leave)
                leave = m->sim->end_ns[gi];
            members++;
            if (a > a1) {
                a2 = a1;
                a1 = a;
                who = s;
            } else if (a > a2) {
                a2 = a;
            }
        }
        if (who == SIZE_MAX || members < 2)
            continue;
        rv_job_slot *ls = &r->slots[who];
        ls->last_in++;
        ls->delay_us += (double)(a1 - a2) / 1e3;
        double t0 = (double)m->sim->first_start_ns;
        r->colls[r->ncolls++] = (rv_job_coll_report){(int32_t)c,
                                                     j->coll_op[c],
                                                     ls->rank,
                                                     mx,
                                                     total,
                                                     xfer / (double)members,
                                                     ((double)a1 - t0) / 1e3,
                                                     ((double)leave - t0) / 1e3,
                                                     r->sizes ? r->sizes[c] : j->coll_bytes[c]};
    }
    qsort(r->colls, r->ncolls, sizeof(*r->colls), cmp_coll_report);
    return 0;
}

/* The task of slot sl that ended last at or before t (not u); -1 none. */
static int32_t latest_before(const rv_sim *s, const rv_job_slot *sl, int32_t u, int64_t t)
{
    int32_t best = -1;
    for (size_t i = sl->toff; i < sl->toff + sl->g->ntasks; i++)
        if ((int32_t)i != u && s->end_ns[i] <= t && s->start_ns[i] < s->start_ns[u] &&
            (best < 0 || s->end_ns[i] > s->end_ns[best]))
            best = (int32_t)i;
    return best;
}

/* The critical path across ranks: back from the last task to end along
 * the tasks that set each start, cut into runs on one rank. A gang
 * member's start was set by the member that arrived last, on its own
 * rank: the path crosses there. A task that started at its traced time
 * (no recorded dependency set it: a thread's first task) continues from
 * the task of its rank that ended last before it, an inferred link,
 * counted per run; at most RV_JOB_MAX_INFERRED such links. */
#define RV_JOB_MAX_INFERRED 512
static void critical_path(rv_job_result *r, const merged *m)
{
    const rv_sim *s = m->sim;
    size_t nt = m->g->ntasks, steps = 0, inferred = 0;
    int32_t u = -1;
    int64_t best = INT64_MIN;
    r->npath = 0;
    for (size_t i = 0; i < nt; i++)
        if (s->end_ns[i] > best) {
            best = s->end_ns[i];
            u = (int32_t)i;
        }
    double t0 = (double)s->first_start_ns;
    int link = 0; /* the step into u was inferred */
    while (u >= 0 && steps++ <= nt) {
        size_t lo = 0, hi = r->nslots;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (r->slots[mid].toff <= (size_t)u)
                lo = mid;
            else
                hi = mid;
        }
        int rank = r->slots[lo].rank;
        double st = ((double)s->start_ns[u] - t0) / 1e3, en = ((double)s->end_ns[u] - t0) / 1e3;
        rv_job_path_seg *p = r->npath ? &r->path[r->npath - 1] : NULL;
        if (p && p->rank == rank) {
            p->tasks++;
            p->start_us = st;
            p->inferred += (size_t)link;
        } else if (r->npath < RV_JOB_MAX_PATH) {
            r->path[r->npath++] = (rv_job_path_seg){rank, 1, st, en, (size_t)link};
        } else {
            break;
        }
        link = 0;
        int32_t next = s->binder[u];
        if (next < 0 && inferred < RV_JOB_MAX_INFERRED) {
            next = latest_before(s, &r->slots[lo], u, s->start_ns[u]);
            inferred += next >= 0;
            link = next >= 0;
        }
        u = next;
    }
}

/* Network and rank-count what-ifs, through the one communication model
 * (rv_comm_model.h): each collective keeps the message size the traces
 * name, else the size the baseline network needs for its measured
 * transfer (the median rank's), and its transfer scales by the ratio of
 * the two networks' times for that size. d: the request's distributed
 * setup with the job aliases folded in (rv_comm_dist_of). */
static int net_ratios(const rv_job *j, const rv_dist *d, int world, double *ratio, rv_job_result *r)
{
    rv_net b, x;
    const rv_graph *g0 = j->r[0].g;
    const rv_hw *hw =
        g0->trace ? rv_hw_lookup(rv_trace_str(g0->trace, g0->trace->platform_gpu)) : NULL;
    rv_comm_net_base(hw, j->world, &b);
    rv_comm_net_of(d, hw, world, &x);
    r->bandwidth_gbps = x.intra_bps * 8 / 1e9;
    r->latency_us = x.alpha_s * 1e6;
    int64_t *v = malloc((j->n + 1) * sizeof(int64_t));
    if (!v)
        return RV_ERR_NOMEM;
    for (size_t c = 0; c < j->ncoll; c++) {
        size_t nm = 0;
        for (size_t p = 0; p < j->n; p++)
            if (j->coll_task[c * j->n + p] >= 0)
                v[nm++] = j->transfer_ns[c * j->n + p];
        rv_sort_i64s(v, nm);
        size_t mid = nm / 2;
        /* A sub-group's collective (fewer members than the job) keeps its
         * own size on both networks; the job's rank count scales the rest. */
        rv_net bs = b, xs = x;
        if (nm < j->n && nm > 0) {
            bs.n = xs.n = (int)nm;
            bs.g = nm < 8 ? (int)nm : 8;
            xs.g = (int)nm < x.g ? (int)nm : x.g;
        }
        double secs = (double)v[mid] * 1e-9, bytes = j->coll_bytes[c];
        if (bytes <= 0) {
            bytes = rv_comm_bytes_for_time(NULL, &bs, j->coll_op[c], secs);
            r->inferred_sizes++;
        }
        if (bytes < 1)
            bytes = 1;
        r->sizes[c] = bytes;
        double t0 = rv_comm_time(NULL, &bs, j->coll_op[c], bytes);
        double t1 = rv_comm_time(d, &xs, j->coll_op[c], bytes);
        if (bytes > r->largest_bytes)
            r->largest_bytes = bytes;
        r->nallreduce += j->coll_op[c] == RV_COLL_ALLREDUCE;
        ratio[c] = t0 > 0 ? t1 / t0 : 1;
    }
    free(v);
    return 0;
}

static double median_of(double *v, size_t n)
{
    rv_sort_doubles(v, n);
    return n ? v[n / 2] : 0;
}

/* Remove a straggler: its GPU kernels (collectives aside) and its CPU
 * work take what the median rank's take, when that is less. */
static int speed_up(const rv_job *j, rv_job_result *r, size_t who, rv_error *err)
{
    size_t ns = r->nslots;
    double *gb = calloc(ns + 1, sizeof(double)), *cb = calloc(ns + 1, sizeof(double));
    double *tmp = malloc((ns + 1) * sizeof(double));
    int rc = 0;
    if (!gb || !cb || !tmp) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t s = 0; s < ns; s++) {
        const rv_graph *g = r->slots[s].g;
        for (size_t i = 0; i < g->ntasks; i++) {
            const rv_task *t = &g->tasks[i];
            if (t->flags & (RV_TF_REMOVED | RV_TF_NCCL))
                continue;
            if (t->kind == RV_TASK_GPU)
                gb[s] += (double)t->dur_ns;
            else if (t->kind == RV_TASK_CPU)
                cb[s] += (double)(t->dur_ns + t->gap_ns);
        }
    }
    memcpy(tmp, gb, ns * sizeof(double));
    double mg = median_of(tmp, ns);
    memcpy(tmp, cb, ns * sizeof(double));
    double mc = median_of(tmp, ns);
    double fg = gb[who] > mg && gb[who] > 0 ? mg / gb[who] : 1;
    double fc = cb[who] > mc && cb[who] > 0 ? mc / cb[who] : 1;
    rv_job_slot *sl = &r->slots[who];
    r->straggler_removed = sl->rank;
    r->straggler_factor = fg;
    if (fg >= 1 && fc >= 1) {
        rv_job__warn(r, "straggler_not_slower",
                     "rank %d, the straggler, does no more work than the median rank: "
                     "remove_straggler changed nothing (it waits on its inputs, not its speed)",
                     sl->rank);
        goto out;
    }
    rv_graph *c = rv_graph_clone(sl->g);
    if (!c) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->ntasks; i++) {
        rv_task *t = &c->tasks[i];
        if (t->flags & (RV_TF_REMOVED | RV_TF_NCCL))
            continue;
        if (t->kind == RV_TASK_GPU && fg < 1)
            t->dur_ns = (int64_t)llround((double)t->dur_ns * fg);
        else if (t->kind == RV_TASK_CPU && fc < 1) {
            t->dur_ns = (int64_t)llround((double)t->dur_ns * fc);
            t->gap_ns = (int64_t)llround((double)t->gap_ns * fc);
        }
    }
    rv_graph_free(sl->owned);
    sl->owned = c;
    sl->g = c;
    (void)j;
out:
    free(gb);
    free(cb);
    free(tmp);
    return rc;
}

/* Runs the per-rank part of w (the optimizations that name the rank, or
 * all) through the one what-if pipeline; *pred gets the predicted graph
 * (new) or NULL when nothing changed. */
static int rank_whatif(const rv_job *j, size_t p, const rv_whatif *w, const rv_run_opts *o,
                       rv_job_result *r, rv_graph **pred, rv_error *err)
{
    rv_whatif *wr = NULL;
    rv_run_result *rr = NULL;
    int rc = rv_whatif_for_rank(w, j->r[p].rank, &wr, err);
    *pred = NULL;
    if (rc != 0)
        return rc;
    /* The job answers network and scale questions itself (net_ratios),
     * once for every rank's collectives: the ranks do not re-time them. */
    wr->has_dist = 0;
    if (rv_whatif_is_empty(wr))
        goto out;
    rv_run_opts ro = *o;
    ro.keep_predicted = 1;
    if ((rc = rv_run(j->r[p].g, j->r[p].base, wr, &ro, &rr, err)) != 0)
        goto out;
    *pred = rr->pred_graph;
    rr->pred_graph = NULL;
    for (size_t i = 0; i < rr->nwarnings; i++)
        if (strcmp(rr->warnings[i].code, "replay_error") != 0)
            rv_job__warn(r, rr->warnings[i].code, "%s", rr->warnings[i].message);
    if (!r->applied && json_array_size(rr->applied) > 0)
        r->applied = json_incref(rr->applied);
out:
    rv_run_result_free(rr);
    rv_whatif_free(wr);
    return rc;
}

/* What the ranks' graphs rest on, said once for the job (rv_run says it
 * per trace; codes as in docs/whatif.md). */
static void graph_warnings(const rv_job *j, rv_job_result *r)
{
    size_t waits = 0, idle = 0, holds = 0, pre = 0, assumed = 0, capped = 0, single = 0, none = 0;
    for (size_t p = 0; p < j->n; p++) {
        const rv_graph *g = j->r[p].g;
        waits += g->inferred_waits;
        idle += g->inferred_idle;
        holds += g->inferred_holds;
        pre += g->prewindow_gpu;
        assumed += g->launch_lat_assumed != 0;
        capped += g->gpu_constant_capped != 0;
        single += g->niters == 1;
        none += g->niters == 0;
    }
    if (waits || idle || holds || pre)
        rv_job__warn(r, "graph_inferred",
                     "the ranks' traces lack records the graphs needed: %zu cross-stream waits "
                     "inferred, %zu stream idle gaps kept as measured, %zu lost launches held by "
                     "their launcher, %zu GPU tasks queued before profiling, over %zu ranks "
                     "(docs/internals/graph.md)",
                     waits, idle, holds, pre, j->n);
    if (assumed)
        rv_job__warn(r, "launch_latency_assumed",
                     "%zu of %zu ranks met too few idle-stream launches to measure the launch "
                     "latency: the default is assumed there",
                     assumed, j->n);
    if (capped)
        rv_job__warn(r, "gpu_timing_capped",
                     "%zu of %zu ranks measured a launch latency or queue gap over 1 s (a broken "
                     "clock): capped at 1 s there, so the replay is unreliable",
                     capped, j->n);
    if (none)
        rv_job__warn(r, "no_steps",
                     "%zu of %zu ranks have no step markers: their whole trace is one iteration",
                     none, j->n);
    else if (single)
        rv_job__warn(r, "single_step",
                     "%zu of %zu ranks hold a single step: no steady-state window, warm-up and "
                     "profiler start-up are in the figures",
                     single, j->n);
}

/* The knobs that cannot act on the traced collectives, said once. */
static void comm_warnings(rv_job_result *r, const rv_dist *d, int world)
{
    rv_net x;
    rv_comm_net_of(d, NULL, world, &x);
    json_t *e = json_object();
    rv_comm_warn_traced(e, d, &x, r->largest_bytes, r->nallreduce);
    size_t i;
    json_t *wn;
    json_array_foreach(json_object_get(e, "warnings"), i, wn)
        rv_job__warn(r, json_string_value(json_object_get(wn, "code")), "%s",
                     json_string_value(json_object_get(wn, "message")));
    json_decref(e);
}

/* Energy of one rank's reported step (its GPUs only), joules; < 0 when
 * the power model cannot say (a GPU not in the hardware table). */
static double rank_energy(const rv_whatif *w, const rv_graph *g, const rv_sim *v, int32_t iter)
{
    rv_energy_params ep;
    rv_energy e;
    rv_apply_energy_params(w, g, &ep);
    ep.ranks = 1;
    rv_window win = rv_report_window(g, v, iter);
    if (!ep.hw || rv_power_energy(g, v, &ep, win.t0_ns, win.t1_ns, &e) != 0)
        return -1;
    return e.energy_j / (win.per > 0 ? win.per : 1);
}

/* The batch of every rank: the request's batch_size, else what each
 * trace's shapes say when they agree; 0 unknown. */
static int64_t job_batch(const rv_job *j, const rv_whatif *w)
{
    if (w && w->batch_size > 0)
        return w->batch_size;
    int64_t b = 0;
    for (size_t p = 0; p < j->n; p++) {
        const char *from = NULL;
        int64_t x = j->r[p].g->trace ? rv_shapes_batch(j->r[p].g->trace, &from) : 0;
        if (x <= 0 || (b > 0 && x != b))
            return 0;
        b = x;
    }
    return b;
}

static double ratio_of(double num, double den)
{
    return den > 0 ? num / den : 0;
}

/* job.remove_straggler: the named rank, else the one that held the others
 * back most, runs at its peers' pace; pm (the prediction) is merged and
 * simulated again. 0, or an error with err filled. */
static int remove_straggler(const rv_job *job, const rv_whatif *w, rv_job_result *r,
                            const double *ratio, merged *pm, const rv_stop *stop, rv_error *err)
{
    const rv_job_whatif *jw = rv_whatif_job(w);
    int rc = 0;
    size_t who = SIZE_MAX;
    if (jw->straggler_rank >= 0) {
        for (size_t s = 0; s < r->nslots; s++)
            if (r->slots[s].rank == jw->straggler_rank)
                who = s;
        if (who == SIZE_MAX) {
            rc = rv_error_field(err, RV_ERR_INVALID, "job.straggler_rank",
                                "rank %d is not in the job", jw->straggler_rank);
            return rc;
        }
    } else {
        if ((rc = stragglers(job, r, pm)) != 0) {
            rc = rv_error_set(err, rc, -1, -1, "out of memory");
            return rc;
        }
        double best = 0;
        for (size_t s = 0; s < r->nslots; s++)
            if (r->slots[s].delay_us > best) {
                best = r->slots[s].delay_us;
                who = s;
            }
    }
    if (who == SIZE_MAX) {
        rv_job__warn(r, "no_straggler",
                     "no rank held the others back: remove_straggler changed nothing");
    } else {
        if ((rc = speed_up(job, r, who, err)) != 0)
            return rc;
        merged_free(pm);
        if ((rc = merge(job, r->slots, r->nslots, ratio, pm, err)) != 0 ||
            (rc = simulate(pm, job->ncoll, rv_whatif_schedule(w), stop, err)) != 0)
            return rc;
    }
    return 0;
}

/* Per slot: its measured, replayed and predicted step and energy (the
 * baseline's from the replay bm, the prediction's from final), and the
 * job's figures (its slowest rank) in r->sum. 0, or an error. */
static int slot_figures(const rv_job *job, const rv_whatif *w, int64_t iteration,
                        const rv_iter_figures *bfig, const rv_job_slot *bslots, const merged *bm,
                        const merged *final, rv_job_result *r, rv_error *err)
{
    size_t n = job->n;
    int rc = 0;
    rv_run_summary *sum = &r->sum;
    r->energy_j = r->baseline_energy_j = 0;
    r->baseline_gpus = (long)n;
    r->gpus = (long)r->nslots * rv_parallel_replica_gpus(w);
    for (size_t s = 0; s < r->nslots; s++) {
        rv_job_slot *sl = &r->slots[s];
        size_t p = (size_t)sl->pos;
        rv_iter_figures bf = bfig[p], pf = bfig[p];
        sl->bwait_us = bslots[p].bwait_us;
        sl->btransfer_us = bslots[p].btransfer_us;
        rv_sim pv;
        view(final, sl, &pv);
        if (final != bm) {
            rv_sim bv;
            view(bm, &bslots[p], &bv);
            if ((rc = rv_report_compare(job->r[p].g, &bv, sl->g, &pv, iteration, &bf, &pf, err)) !=
                0)
                return rc;
        }
        /* Where the reported step sits on the job's aligned axis. */
        rv_window win = rv_report_window(sl->g, &pv, pf.iter);
        sl->win_start_us = (double)(win.t0_ns - final->sim->first_start_ns) / 1e3;
        sl->win_end_us = (double)(win.t1_ns - final->sim->first_start_ns) / 1e3;
        /* One rank's dimensions stand for the job's: ranks of one job run
         * the same layout, and the first is the one every answer has. */
        if (s == 0) {
            r->parallelism = rv_pardims_json(sl->g, &pv, &win, NULL);
            r->parallelism_rank = sl->rank;
            if (!r->parallelism)
                return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        }
        sl->measured_us = bf.measured_us;
        sl->baseline_us = bf.simulated_us;
        sl->predicted_us = pf.simulated_us;
        double ej = rank_energy(w, sl->g, &pv, pf.iter);
        r->energy_j = ej < 0 || r->energy_j < 0 ? -1 : r->energy_j + ej;
        if (s < n) {
            rv_sim bv;
            view(bm, &bslots[p], &bv);
            double bj = rank_energy(NULL, job->r[p].g, &bv, bf.iter);
            r->baseline_energy_j =
                bj < 0 || r->baseline_energy_j < 0 ? -1 : r->baseline_energy_j + bj;
        }
        sl->replay_error = ratio_of(fabs(sl->baseline_us - sl->measured_us), sl->measured_us);
        if (s < n) {
            if (sl->measured_us > sum->measured_us)
                sum->measured_us = sl->measured_us;
            if (sl->baseline_us > sum->baseline_us)
                sum->baseline_us = sl->baseline_us;
            if (sl->replay_error > sum->replay_error)
                sum->replay_error = sl->replay_error;
        }
        if (sl->predicted_us > sum->predicted_us)
            sum->predicted_us = sl->predicted_us;
    }
    return 0;
}

int rv_job_run(const rv_job *job, const rv_whatif *w, const rv_run_opts *opts, rv_job_result **out,
               rv_error *err)
{
    rv_run_opts o = opts ? *opts : (rv_run_opts){.iteration = RV_ITER_MEDIAN};
    const rv_job_whatif *jw = rv_whatif_job(w);
    int need_pred = w && !rv_whatif_is_empty(w);
    size_t n = job->n;
    int rc = 0;
    merged bm = {0}, pm = {0};
    rv_job_slot *bslots = NULL;
    rv_graph **pred = NULL;
    double *ratio = NULL;
    rv_iter_figures *bfig = NULL;
    rv_stop stop = rv_run_stop_of(&o);
    rv_job_result *r = calloc(1, sizeof(*r));
    *out = NULL;
    if (!r)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    r->job = job;
    r->straggler_removed = -1;
    for (size_t i = 0; i < job->nwarn; i++)
        rv_job__warn(r, job->warn[i].code, "%s", job->warn[i].message);
    graph_warnings(job, r);
    bslots = calloc(n, sizeof(*bslots));
    pred = calloc(n, sizeof(rv_graph *));
    bfig = calloc(n, sizeof(*bfig));
    if (!bslots || !pred || !bfig) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    /* The replay: every traced rank as it ran. */
    for (size_t p = 0; p < n; p++)
        bslots[p] = (rv_job_slot){.pos = (int)p, .rank = job->r[p].rank, .g = job->r[p].g};
    if ((rc = merge(job, bslots, n, NULL, &bm, err)) != 0 ||
        (rc = simulate(&bm, job->ncoll, RV_SCHED_EARLIEST_START, &stop, err)) != 0)
        goto out;
    waits(job, bslots, n, &bm, 0);
    for (size_t p = 0; p < n; p++) {
        rv_sim v;
        view(&bm, &bslots[p], &v);
        if ((rc = rv_report_iteration(job->r[p].g, &v, o.iteration, &bfig[p], err)) != 0)
            goto out;
    }
    /* The prediction's slots: the traced ranks, fewer, or copies.
     * job.world_size is an alias of distributed.workers. */
    rv_dist dist;
    int net_asked = 0;
    rv_comm_dist_of(w, job->world, &dist, &net_asked);
    int scaled = net_asked && dist.workers > 0 && dist.workers != job->world;
    int world = scaled ? dist.workers : (int)n;
    r->world_simulated = scaled ? world : job->world;
    r->nslots = (size_t)world;
    r->slots = calloc(r->nslots, sizeof(*r->slots));
    if (!r->slots) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    if (need_pred)
        for (size_t p = 0; p < n && (size_t)p < r->nslots; p++)
            if ((rc = rank_whatif(job, p, w, &o, r, &pred[p], err)) != 0)
                goto out;
    for (size_t s = 0; s < r->nslots; s++) {
        size_t p = s % n;
        r->slots[s] = bslots[p];
        r->slots[s].rank = s < n ? job->r[p].rank : (int)s;
        r->slots[s].g = pred[p] ? pred[p] : job->r[p].g;
    }
    if (scaled && (size_t)world > n)
        rv_job__warn(r, "ranks_repeated",
                     "world_size %d is more than the %zu traced ranks: rank k runs as traced "
                     "rank k mod %zu",
                     world, n, n);
    merged *final = &bm;
    if (need_pred) {
        if (net_asked) {
            ratio = malloc((job->ncoll + 1) * sizeof(double));
            r->sizes = calloc(job->ncoll + 1, sizeof(double));
            if (!ratio || !r->sizes || net_ratios(job, &dist, world, ratio, r) != 0) {
                rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
                goto out;
            }
            if (r->inferred_sizes)
                rv_job__warn(r, "message_sizes_inferred",
                             "%zu of %zu collectives carry no message size in the traces: "
                             "each of those is what the baseline network (the GPU's NVLink, "
                             "else PCIe, in 8-GPU nodes, 100 Gb/s between them, 5 us per "
                             "step) moves in its measured transfer",
                             r->inferred_sizes, job->ncoll);
            comm_warnings(r, &dist, world);
        }
        if ((rc = merge(job, r->slots, r->nslots, ratio, &pm, err)) != 0 ||
            (rc = simulate(&pm, job->ncoll, rv_whatif_schedule(w), &stop, err)) != 0)
            goto out;
        final = &pm;
        if (jw && jw->remove_straggler &&
            (rc = remove_straggler(job, w, r, ratio, &pm, &stop, err)) != 0)
            goto out;
    }
    if ((rc = rv_stop_check(&stop, err)) != 0)
        goto out;
    waits(job, r->slots, r->nslots, final, 1);
    if ((rc = stragglers(job, r, final)) != 0) {
        rc = rv_error_set(err, rc, -1, -1, "out of memory");
        goto out;
    }
    critical_path(r, final);
    r->tasks = final->g->ntasks;
    r->edges = final->g->nedges;
    /* Figures: per rank, then the job's step (its slowest rank). */
    rv_run_summary *sum = &r->sum;
    if ((rc = slot_figures(job, w, o.iteration, bfig, bslots, &bm, final, r, err)) != 0)
        goto out;
    sum->speedup = ratio_of(sum->baseline_us, sum->predicted_us);
    /* Throughput of the whole job: every rank's batch per job step. */
    r->batch_per_rank = job_batch(job, w);
    r->samples_per_s = r->baseline_samples_per_s = -1;
    if (r->batch_per_rank > 0 && sum->predicted_us > 0 && sum->baseline_us > 0) {
        r->samples_per_s = (double)r->batch_per_rank * (double)r->nslots / sum->predicted_us * 1e6;
        r->baseline_samples_per_s = (double)r->batch_per_rank * (double)n / sum->baseline_us * 1e6;
    }
    if (sum->replay_error > RV_REPLAY_WARN_ERROR)
        rv_job__warn(r, "replay_error",
                     "the job's unmodified graph replays a rank's measured step up to %.1f%% "
                     "off: predictions carry at least that error",
                     sum->replay_error * 100);
    /* The slots point at the predicted graphs: the result keeps them. */
    r->pred = pred;
    r->npred = n;
    pred = NULL;
    *out = r;
    r = NULL;
out:
    for (size_t p = 0; pred && p < n; p++)
        rv_graph_free(pred[p]);
    free(pred);
    free(bslots);
    free(bfig);
    free(ratio);
    merged_free(&bm);
    merged_free(&pm);
    rv_job_result_free(r);
    return rc;
}
