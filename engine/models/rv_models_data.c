/* Data loader (MODELS.md section D).
 *
 * In a Kineto trace the loading sits in CPU gaps inside
 * `enumerate(DataLoader)#...` ops (task.gap_dl_ns). With num_workers = 0 the
 * main process loads each batch itself; with W workers, W processes load
 * batches ahead (prefetch) and the main process waits only when they fall
 * behind: stall = max(0, T_load / (W * speedup) - T_rest), plus the hand-over
 * of a batch from a worker (ipc_us). The workers compete with the main
 * process for CPU: its CPU tasks slow by 1 + contention * L, where L is the
 * average number of cores the loaders keep busy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/rv_models.h"
#include "util/rv_sort.h"
#include "simulate/rv_sim.h"

/* Median simulated iteration of g (or the makespan without steps). */
static int median_iter(const rv_graph *g, int64_t *out, rv_error *err)
{
    rv_sim *s = NULL;
    int rc = rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, err);
    if (rc)
        return rc;
    if (g->niters == 0) {
        *out = s->makespan_ns;
        rv_sim_free(s);
        return 0;
    }
    int64_t *v = malloc(g->niters * sizeof(int64_t));
    if (!v) {
        rv_sim_free(s);
        return RV_ERR_NOMEM;
    }
    for (size_t i = 0; i < g->niters; i++)
        v[i] = rv_sim_iter_ns(g, s, i);
    rv_sort_i64s(v, g->niters);
    *out = v[g->niters / 2];
    free(v);
    rv_sim_free(s);
    return 0;
}

/* True when the trace's loader already ran with worker processes. */
static int baseline_multiprocess(const rv_graph *g)
{
    const rv_trace *tr = g->trace;
    if (!tr)
        return 0;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *ev = &tr->events[i];
        if (ev->cat != RV_CAT_CPU_OP && ev->cat != RV_CAT_USER_ANNOTATION)
            continue;
        const char *n = rv_trace_str(tr, ev->name);
        if (strstr(n, "enumerate(DataLoader)"))
            return strstr(n, "MultiProcessing") != NULL;
    }
    return 0;
}

int rv_models__dataloader(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                          rv_error *err)
{
    int rc = 0;
    int64_t *dl = NULL;
    double total = 0;
    size_t ntasks = 0;
    int multi = baseline_multiprocess(g);
    double speedup = o->speedup > 0 ? o->speedup : 1.0;
    char field[48];
    snprintf(field, sizeof(field), "optimizations[%d].workers", o->index);

    if (multi && o->workers >= 0)
        return rv_error_field(err, RV_ERR_UNSUPPORTED, field,
                              "the trace already used DataLoader worker processes: its loading "
                              "gaps are waits, not load times; use speedup instead of workers");
    dl = calloc(g->ntasks + 1, sizeof(int64_t));
    if (!dl)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_CPU || t->gap_dl_ns <= 0)
            continue;
        dl[i] = t->gap_dl_ns;
        total += (double)t->gap_dl_ns;
        t->gap_ns -= t->gap_dl_ns;
        t->gap_dl_ns = 0;
        ntasks++;
    }
    /* One batch per loading gap: count the steps whose gaps hold loading
     * (a load that spans two gaps of one step counts once). */
    double nbatches = 0;
    int32_t last_iter = -2;
    for (size_t i = 0; i < g->ntasks; i++) {
        if (dl[i] <= 0)
            continue;
        if (g->tasks[i].iteration != last_iter || g->tasks[i].iteration < 0)
            nbatches += 1;
        last_iter = g->tasks[i].iteration;
    }
    if (nbatches < 1)
        nbatches = 1;
    double t_load = total / nbatches;
    double kappa = 1.0, stall = 0, t_rest = 0, cores = 0;
    int workers = o->workers > 0 ? o->workers : 0;

    if (workers == 0) {
        /* In-process loading (or a faster loader on the same thread): the
         * load stays on the critical path, shortened by speedup. */
        for (size_t i = 0; i < g->ntasks; i++)
            if (dl[i] > 0) {
                int64_t x = (int64_t)llround((double)dl[i] / speedup);
                g->tasks[i].gap_ns += x;
                g->tasks[i].gap_dl_ns = x;
            }
    } else {
        int64_t rest = 0;
        if ((rc = median_iter(g, &rest, err)) != 0)
            goto out;
        t_rest = (double)rest;
        double per_batch = t_load / speedup; /* one worker's time for one batch */
        cores = t_rest > 0 ? per_batch / t_rest : (double)workers;
        if (cores > workers)
            cores = workers;
        kappa = 1.0 + o->contention * cores;
        for (size_t i = 0; i < g->ntasks; i++) {
            rv_task *t = &g->tasks[i];
            if (t->kind != RV_TASK_CPU || (t->flags & RV_TF_REMOVED))
                continue;
            t->dur_ns = (int64_t)llround((double)t->dur_ns * kappa);
            t->gap_ns = (int64_t)llround((double)t->gap_ns * kappa);
        }
        /* Steady state with prefetching: W batches in flight, each takes
         * per_batch, one is consumed every iteration. */
        double produce = per_batch / workers;
        stall = produce - t_rest * kappa;
        if (stall < 0)
            stall = 0;
        double add = stall + o->ipc_us * 1e3;
        for (size_t i = 0; i < g->ntasks; i++)
            if (dl[i] > 0 && t_load > 0) {
                int64_t x = (int64_t)llround(add * (double)dl[i] / t_load);
                g->tasks[i].gap_ns += x;
                g->tasks[i].gap_dl_ns = x;
            }
    }
    json_t *r = json_pack("{s:s, s:i, s:b, s:f, s:i, s:f}", "model", "dataloader", "index",
                          o->index, "baseline_multiprocess", multi, "load_us_per_iteration",
                          t_load / 1e3, "gaps_changed", (json_int_t)ntasks, "speedup", speedup);
    if (!r) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    json_object_set_new(r, "workers", json_integer(workers));
    if (workers > 0) {
        json_object_set_new(r, "rest_of_iteration_us", json_real(t_rest / 1e3));
        json_object_set_new(r, "loader_cores_busy", json_real(cores));
        json_object_set_new(r, "cpu_slowdown", json_real(kappa));
        json_object_set_new(r, "stall_us", json_real(stall / 1e3));
        json_object_set_new(r, "ipc_us", json_real(o->ipc_us));
    }
    rc = json_array_append_new(applied, r) ? RV_ERR_NOMEM : 0;
out:
    free(dl);
    return rc;
}
