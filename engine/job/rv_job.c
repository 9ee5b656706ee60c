/* A distributed job as one global graph (dPRO sections 3-4). See rv_job.h
 * and docs/models/job.md: rank identity, collective matching, clock
 * alignment on collective ends, and the build of the merged graph whose
 * collectives are simulator gangs. rv_job_run.c runs it. */
#include "job/rv_job_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/rv_coll.h"
#include "models/rv_comm_model.h"
#include "graph/rv_select.h"
#include "util/rv_sort.h"

#define job_warn rv_job__warn_build

void rv_job__warn_build(rv_job *j, const char *code, const char *fmt, ...)
{
    va_list ap;
    if (j->nwarn >= RV_JOB_MAX_WARNINGS)
        return;
    rv_warning *w = &j->warn[j->nwarn++];
    snprintf(w->code, sizeof(w->code), "%s", code);
    va_start(ap, fmt);
    vsnprintf(w->message, sizeof(w->message), fmt, ap);
    va_end(ap);
}

void rv_job_free(rv_job *job)
{
    if (!job)
        return;
    free(job->r);
    free(job->offset_ns);
    free(job->coll_task);
    free(job->coll_op);
    free(job->transfer_ns);
    free(job->coll_bytes);
    free(job);
}

size_t rv_job_nranks(const rv_job *job)
{
    return job ? job->n : 0;
}

int rv_job_world_size(const rv_job *job)
{
    return job ? job->world : 0;
}

int rv_job_rank_at(const rv_job *job, size_t i)
{
    return job && i < job->n ? job->r[i].rank : -1;
}

double rv_job_clock_offset_us(const rv_job *job, size_t i)
{
    return job && i < job->n ? job->offset_ns[i] / 1e3 : 0;
}

int rv_job_graphs_form_job(const rv_graph *const *graphs, size_t n)
{
    if (n < 2)
        return 0;
    int world = -1;
    for (size_t i = 0; i < n; i++) {
        const rv_trace *t = graphs[i] ? graphs[i]->trace : NULL;
        if (!t || t->world_size <= 1 || t->rank < 0 || t->rank >= t->world_size)
            return 0;
        if (world >= 0 && t->world_size != world)
            return 0;
        world = t->world_size;
        for (size_t k = 0; k < i; k++)
            if (graphs[k]->trace->rank == t->rank)
                return 0;
    }
    return 1;
}

static int cmp_member(const void *a, const void *b)
{
    const rv_job_member *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Rank identity: the caller's, else the trace's distributedInfo, else
 * the file order (with a warning). */
static int identify(rv_job *j, const rv_job_rank *ranks, size_t n, rv_error *err)
{
    int all_known = 1, world = 0;
    for (size_t i = 0; i < n; i++) {
        const rv_trace *t = ranks[i].graph->trace;
        int r = ranks[i].rank >= 0 ? ranks[i].rank : (t && t->rank >= 0 ? t->rank : -1);
        int w = ranks[i].world_size > 0 ? ranks[i].world_size
                                        : (t && t->world_size > 0 ? t->world_size : 0);
        if (r < 0)
            all_known = 0;
        if (w > world)
            world = w;
        j->r[i] = (rv_job_member){ranks[i].graph, ranks[i].base, r, ranks[i].label};
    }
    if (!all_known) {
        for (size_t i = 0; i < n; i++)
            j->r[i].rank = (int)i;
        job_warn(j, "rank_from_order",
                 "%s trace%s no rank (distributedInfo): ranks are taken in the order given",
                 n > 1 ? "some" : "the", n > 1 ? "s name" : " names");
    }
    qsort(j->r, n, sizeof(*j->r), cmp_member);
    for (size_t i = 1; i < n; i++)
        if (j->r[i].rank == j->r[i - 1].rank)
            return rv_error_set(err, RV_ERR_INVALID, -1, -1, "rank %d is given twice",
                                j->r[i].rank);
    if (world < j->r[n - 1].rank + 1)
        world = j->r[n - 1].rank + 1;
    if (world < (int)n)
        world = (int)n;
    j->world = world;
    if ((size_t)world > n) {
        char list[160];
        size_t len = 0, shown = 0, missing = (size_t)world - n;
        size_t k = 0;
        list[0] = '\0';
        for (int r = 0; r < world && shown < 16; r++) {
            while (k < n && j->r[k].rank < r)
                k++;
            if (k < n && j->r[k].rank == r)
                continue;
            int m = snprintf(list + len, sizeof(list) - len, "%s%d", shown ? ", " : "", r);
            if (m < 0 || (size_t)m >= sizeof(list) - len)
                break;
            len += (size_t)m;
            shown++;
        }
        job_warn(j, "partial_job",
                 "%zu of %d ranks are missing (%s%s): the job is simulated with the ranks "
                 "present, collectives wait only for them",
                 missing, world, list, missing > shown ? ", ..." : "");
    }
    return 0;
}

/* The collective kernels of one rank, channel by channel (each NCCL
 * stream is one communicator, so one process group), in time order. */
typedef struct rank_colls {
    int32_t *task;
    size_t n;
    size_t nch;
    size_t ch_start[65]; /* channel c holds task[ch_start[c] .. ch_start[c + 1]) */
} rank_colls;

static int collect(const rv_graph *g, rank_colls *rc)
{
    rc->n = 0;
    rc->nch = 0;
    rc->task = malloc((g->ntasks + 1) * sizeof(int32_t));
    if (!rc->task)
        return RV_ERR_NOMEM;
    for (size_t th = 0; th < g->nthreads && rc->nch < 64; th++) {
        const rv_thread *t = &g->threads[th];
        size_t before = rc->n;
        for (int32_t i = t->first; t->first >= 0 && i < t->first + t->norig; i++)
            if ((g->tasks[i].flags & RV_TF_NCCL) && !(g->tasks[i].flags & RV_TF_REMOVED))
                rc->task[rc->n++] = i;
        if (rc->n > before)
            rc->ch_start[rc->nch++] = before;
    }
    rc->ch_start[rc->nch] = rc->n;
    return 0;
}

/* Matches collectives across ranks when no trace names their process
 * group: channel by channel, the k-th on every rank, while their kinds
 * agree. */
static int match_by_order(rv_job *j, rv_error *err)
{
    size_t n = j->n, nch = SIZE_MAX, total = 0;
    int rc = 0;
    rank_colls *rcs = calloc(n, sizeof(*rcs));
    if (!rcs)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory matching collectives");
    for (size_t p = 0; p < n; p++) {
        if (collect(j->r[p].g, &rcs[p]) != 0) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory matching collectives");
            goto out;
        }
        if (rcs[p].nch < nch)
            nch = rcs[p].nch;
    }
    size_t cap = 0;
    for (size_t c = 0; c < nch; c++) {
        size_t m = SIZE_MAX, mx = 0;
        for (size_t p = 0; p < n; p++) {
            size_t len = rcs[p].ch_start[c + 1] - rcs[p].ch_start[c];
            m = len < m ? len : m;
            mx = len > mx ? len : mx;
        }
        if (m != mx)
            job_warn(j, "collective_count_mismatch",
                     "communicator %zu holds %zu to %zu collectives across ranks: the first %zu "
                     "are matched, the rest run unmatched",
                     c, m, mx, m);
        cap += m;
    }
    j->coll_task = malloc((cap * n + 1) * sizeof(int32_t));
    j->coll_op = malloc(cap + 1);
    j->transfer_ns = calloc(cap * n + 1, sizeof(int64_t));
    if (!j->coll_task || !j->coll_op || !j->transfer_ns) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory matching collectives");
        goto out;
    }
    for (size_t c = 0; c < nch; c++) {
        size_t m = SIZE_MAX;
        for (size_t p = 0; p < n; p++) {
            size_t len = rcs[p].ch_start[c + 1] - rcs[p].ch_start[c];
            m = len < m ? len : m;
        }
        for (size_t k = 0; k < m; k++) {
            int named, op0 = -1, bad = 0;
            for (size_t p = 0; p < n && !bad; p++) {
                int32_t t = rcs[p].task[rcs[p].ch_start[c] + k];
                int op = rv_kname_coll_op(rv_task_name(j->r[p].g, (size_t)t), &named);
                if (op0 < 0)
                    op0 = op;
                else if (op != op0)
                    bad = 1;
                j->coll_task[total * n + p] = t;
            }
            if (bad) {
                job_warn(j, "collective_mismatch",
                         "communicator %zu: collective %zu is not the same kind on every rank; "
                         "it and the later ones run unmatched",
                         c, k);
                break;
            }
            j->coll_op[total++] = (uint8_t)op0;
        }
    }
    j->ncoll = total;
out:
    for (size_t p = 0; p < n; p++)
        free(rcs[p].task);
    free(rcs);
    return rc;
}

static int match(rv_job *j, rv_error *err)
{
    int grouped = 0, rc = rv_job__match_groups(j, &grouped, err);
    if (rc == 0 && grouped > 0) {
        j->transfer_ns = calloc(j->ncoll * j->n + 1, sizeof(int64_t));
        if (!j->coll_task)
            j->coll_task = malloc(sizeof(int32_t)); /* no collective of two members present */
        if (!j->coll_op)
            j->coll_op = malloc(1);
        if (!j->coll_task || !j->coll_op || !j->transfer_ns)
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory matching collectives");
    }
    if (rc == 0 && !grouped) {
        rc = match_by_order(j, err);
        if (rc == 0 && j->ncoll > 0 && j->n > 1)
            job_warn(j, "collectives_matched_by_order",
                     "the traces name no process group on %s collective kernels: collectives "
                     "were matched by stream and order, an inference (a sub-group's "
                     "collectives or point-to-point pairs may be ganged wrongly)",
                     grouped < 0 ? "some" : "their");
    }
    if (rc == 0 && j->n > 1 && j->ncoll == 0)
        job_warn(j, "no_collectives",
                 "no collective kernels could be matched across ranks: the ranks are "
                 "simulated side by side, unaligned and independent");
    return rc;
}

/* The median absolute deviation of normal data times this is its
 * standard deviation. */
#define MAD_TO_SIGMA 1.4826
/* Ends a few microseconds apart are one instant. */
#define ALIGN_MIN_BAND_NS 5000.0

/* Absolute measured end of a task. */
static double abs_end(const rv_job_member *m, int32_t t)
{
    const rv_task *k = &m->g->tasks[t];
    return (double)m->g->origin_ns + (double)(k->meas_start_ns + k->meas_dur_ns);
}

/* Clock offsets: collectives end nearly together on every rank (dPRO
 * 4.2), so a rank's offset is where its collective ends sit against the
 * reference rank's: the median of the differences, then the mean over
 * those within a robust band of it (least squares on the inliers). */
static int align(rv_job *j, rv_error *err)
{
    size_t n = j->n, nc = j->ncoll;
    double *d = malloc((nc + 1) * sizeof(double)), *dev = malloc((nc + 1) * sizeof(double));
    uint8_t *done = calloc(n + 1, 1);
    if (!d || !dev || !done) {
        free(d);
        free(dev);
        free(done);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory aligning clocks");
    }
    j->offset_ns[0] = 0;
    done[0] = 1;
    /* Against the lowest rank first; a rank that shares no collective with
     * it (a sub-group elsewhere) is aligned through a rank already aligned
     * that it shares one with. */
    for (int pass = 0, progress = 1; progress && pass < 64; pass++) {
        progress = 0;
        for (size_t p = 1; p < n; p++) {
            if (done[p])
                continue;
            size_t m = 0, ref = 0;
            for (size_t q = 0; q < n && m == 0; q++) {
                if (!done[q] || q == p)
                    continue;
                for (size_t c = 0; c < nc; c++) {
                    int32_t tq = j->coll_task[c * n + q], tp = j->coll_task[c * n + p];
                    if (tq >= 0 && tp >= 0)
                        d[m++] = abs_end(&j->r[q], tq) - abs_end(&j->r[p], tp);
                }
                ref = q;
            }
            if (m == 0)
                continue;
            rv_sort_doubles(d, m);
            double med = d[m / 2];
            for (size_t i = 0; i < m; i++)
                dev[i] = fabs(d[i] - med);
            rv_sort_doubles(dev, m);
            double mad = dev[m / 2];
            /* At least 5 us: ends a few microseconds apart are one instant. */
            double band = 3 * MAD_TO_SIGMA * mad;
            if (band < ALIGN_MIN_BAND_NS)
                band = ALIGN_MIN_BAND_NS;
            double sum = 0;
            size_t in = 0;
            for (size_t i = 0; i < m; i++)
                if (fabs(d[i] - med) <= band) {
                    sum += d[i];
                    in++;
                }
            j->offset_ns[p] = j->offset_ns[ref] + (in ? sum / (double)in : med);
            if (mad / 1e3 > j->offset_mad_us)
                j->offset_mad_us = mad / 1e3;
            done[p] = 1;
            progress = 1;
        }
    }
    /* Ranks that share no collective with any aligned rank keep their clock. */
    free(d);
    free(dev);
    free(done);
    if (j->offset_mad_us > 50)
        job_warn(j, "clock_alignment_spread",
                 "matched collectives end up to %.0f us apart (median absolute deviation) "
                 "after alignment: collective ends are not simultaneous here and waits carry "
                 "that error",
                 j->offset_mad_us);
    return 0;
}

/* Measured transfer of each member: its end minus the moment the last
 * rank entered (aligned clocks); the rest of its kernel was waiting. */
static void split(rv_job *j)
{
    size_t n = j->n;
    for (size_t c = 0; c < j->ncoll; c++) {
        double last = -INFINITY;
        for (size_t p = 0; p < n; p++) {
            if (j->coll_task[c * n + p] < 0)
                continue;
            const rv_job_member *m = &j->r[p];
            const rv_task *t = &m->g->tasks[j->coll_task[c * n + p]];
            double a = (double)m->g->origin_ns + j->offset_ns[p] + (double)t->meas_start_ns;
            if (a > last)
                last = a;
        }
        for (size_t p = 0; p < n; p++) {
            if (j->coll_task[c * n + p] < 0)
                continue;
            const rv_job_member *m = &j->r[p];
            const rv_task *t = &m->g->tasks[j->coll_task[c * n + p]];
            double a = (double)m->g->origin_ns + j->offset_ns[p] + (double)t->meas_start_ns;
            double e = a + (double)t->meas_dur_ns;
            double from = a > last ? a : last;
            double x = e - from;
            if (x < 0)
                x = 0;
            if (x > (double)t->dur_ns)
                x = (double)t->dur_ns;
            j->transfer_ns[c * n + p] = (int64_t)llround(x);
        }
    }
}

/* Each matched collective's message size, the largest any rank names. */
static int sizes(rv_job *j, rv_error *err)
{
    j->coll_bytes = calloc(j->ncoll + 1, sizeof(double));
    if (!j->coll_bytes)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    for (size_t p = 0; p < j->n; p++) {
        const rv_graph *g = j->r[p].g;
        rv_comm_sizes ix = {0};
        if (!g->trace)
            continue;
        if (rv_comm_sizes_index(g->trace, &ix) != 0)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        for (size_t c = 0; c < j->ncoll; c++) {
            if (j->coll_task[c * j->n + p] < 0)
                continue;
            double b = rv_comm_task_bytes(g, &ix, j->coll_task[c * j->n + p]);
            if (b > j->coll_bytes[c])
                j->coll_bytes[c] = b;
        }
        rv_comm_sizes_free(&ix);
    }
    return 0;
}

int rv_job_build(const rv_job_rank *ranks, size_t n, rv_job **out, rv_error *err)
{
    int rc;
    rv_job *j = NULL;
    *out = NULL;
    if (!ranks || n == 0)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "a job needs at least one rank");
    if (n > RV_JOB_MAX_RANKS)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1, "a job has at most %d ranks",
                            RV_JOB_MAX_RANKS);
    for (size_t i = 0; i < n; i++)
        if (!ranks[i].graph || !ranks[i].base)
            return rv_error_set(err, RV_ERR_INVALID, -1, -1, "rank %zu has no graph", i);
    j = calloc(1, sizeof(*j));
    if (!j)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    j->n = n;
    j->r = calloc(n, sizeof(*j->r));
    j->offset_ns = calloc(n, sizeof(double));
    if (!j->r || !j->offset_ns) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    if ((rc = identify(j, ranks, n, err)) != 0 || (rc = match(j, err)) != 0 ||
        (rc = align(j, err)) != 0 || (rc = sizes(j, err)) != 0)
        goto out;
    split(j);
    *out = j;
    j = NULL;
out:
    rv_job_free(j);
    return rc;
}
