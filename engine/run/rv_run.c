/* One what-if run (apply, simulate, compare, energy, reports) and the one
 * renderer of its answer. See rv_run.h; docs/internals/request-path.md
 * follows a request through here. */
#include "run/rv_run.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/rv_apply.h"
#include "reader/rv_et.h"
#include "run/rv_metrics.h"
#include "simulate/rv_pardims.h"
#include "cost/rv_flops.h"
#include "trace/rv_shapes.h"
#include "util/rv_bg.h"
#include "util/rv_round.h"
#include "util/rv_sort.h"

/* Numbers rounded in one place (rv_round.h), so the CLI, the API and
 * fleet rows print the very same values. */
#define RV_RUN_JSON_FLAGS (JSON_COMPACT | RV_ROUND_DUMP_FLAGS)

static double ratio(double num, double den)
{
    return den > 0 ? num / den : 0.0;
}

/* Applies w to a clone of g and simulates it, both stopping when stop
 * says so. The clone borrows g's edges until a model adds one: g outlives
 * r's predicted graph. */
static int predict(rv_run_result *r, const rv_whatif *w, const rv_run_opts *o, const rv_stop *stop,
                   const rv_run_prep *pp, rv_error *err)
{
    r->pred_graph = rv_graph_clone_cow(r->graph);
    if (!r->pred_graph)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory cloning the graph");
    json_decref(r->applied);
    r->applied = NULL;
    int rc = pp->have_print
                 ? rv_apply_stop_known(w, r->pred_graph, stop, pp->print, &r->applied, err)
                 : rv_apply_stop(w, r->pred_graph, stop, &r->applied, err);
    if (rc == 0)
        rc = rv_stop_check(stop, err);
    if (rc != 0)
        return rc;
    /* The baseline's packed edges serve while the clone borrows its edges. */
    rv_sim_opts so = {.policy = rv_whatif_schedule(w), .stop = stop, .adj = pp->adj};
    rc = rv_sim_run_opts(r->pred_graph, &so, &r->pred_sim, err);
    if (rc == 0)
        rc = rv_stop_check(stop, err);
    if (rc != 0)
        return rc;
    return rv_report_compare(r->graph, r->base, r->pred_graph, r->pred_sim, o->iteration,
                             &r->base_fig, &r->pred_fig, err);
}

/* The measured steps the median is taken over (the steady steps of
 * rv_report_measured_steps: the median is the answer's measured_us), their
 * spread, and whether they fall in two groups so far apart that the
 * median matches no real step. */
static void step_stats(const rv_graph *g, rv_step_stats *st)
{

    memset(st, 0, sizeof(*st));
    if (g->niters == 0)
        return;
    double *d = malloc(g->niters * sizeof(*d));
    if (!d)
        return;
    size_t n = rv_report_measured_steps(g, d);
    rv_sort_doubles(d, n);
    st->count = n;
    st->min_us = d[0];
    st->max_us = d[n - 1];
    /* The widest relative gap between neighbours splits the steps in two;
     * both groups must hold a real share of the steps. */
    size_t cut = 0, need = n / 10 > 2 ? n / 10 : 2;
    double widest = 1;
    for (size_t i = 0; i + 1 < n; i++) {
        double ratio = d[i] > 0 ? d[i + 1] / d[i] : 1;
        if (ratio > widest) {
            widest = ratio;
            cut = i + 1;
        }
    }
    if (widest >= 1.5 && cut >= need && n - cut >= need) {
        st->bimodal = 1;
        st->low_count = cut;
        st->low_median_us = rv_sort_median(d, cut);
        st->high_count = n - cut;
        st->high_median_us = rv_sort_median(d + cut, n - cut);
    }
    st->median_us = rv_sort_median(d, n);
    free(d);
}

int rv_run_modelled(const rv_graph *g)
{
    const rv_trace *tr = g->trace;
    return tr && rv_trace_source(tr) == RV_SOURCE_ET;
}

/* A modelled trace's steps were not measured: their measured_us is null. */
static void unmeasure_iterations(json_t *per_iteration)
{
    size_t i;
    json_t *it;
    json_array_foreach(per_iteration, i, it) json_object_set_new(it, "measured_us", json_null());
}

/* The models that change GPU work only: they cannot move a step the CPU
 * or the input bounds. */
static const char *gpu_side_model(const json_t *applied)
{
    static const char *const gpu_side[] = {"amp", "gpu", "power_limit", "kernel_fusion",
                                           "batch_size"};
    size_t i;
    json_t *a;
    json_array_foreach(applied, i, a)
    {
        const char *m = json_string_value(json_object_get(a, "model"));
        if (!m || json_is_false(json_object_get(a, "changed")))
            continue;
        for (size_t k = 0; k < sizeof(gpu_side) / sizeof(gpu_side[0]); k++)
            if (strcmp(m, gpu_side[k]) == 0)
                return m;
    }
    return NULL;
}

/* A GPU-side change that moves the step less than RV_RUN_BOUND_MOVE
 * while the CPU or the input bounds the critical path: say so, with the
 * shares and what would help instead (docs/whatif.md "Warnings"). */
static void warn_bound(rv_run_result *r)
{
    const char *model = gpu_side_model(r->applied);
    const json_t *cp = r->critical_path;
    const char *bound = json_string_value(json_object_get(cp, "bound_by"));
    const json_t *sh = json_object_get(cp, "shares");
    double moved = r->sum.speedup > 0 ? fabs(r->sum.speedup - 1) : 1;

    if (!model || !bound || moved >= RV_RUN_BOUND_MOVE)
        return;
    double cpu = json_number_value(json_object_get(sh, "cpu")) * 100;
    double data = json_number_value(json_object_get(sh, "data")) * 100;
    double gpu = json_number_value(json_object_get(sh, "gpu")) * 100;
    if (strcmp(bound, "cpu") == 0)
        rv_run_warn(r, "cpu_bound",
                    "the CPU bounds the step (%.0f%% of the critical path; input %.0f%%, GPU "
                    "%.0f%%): %s moves it %.1f%%; less host work per step would help instead "
                    "(fewer launches: fused_optimizer, CUDA graphs; a faster CPU; dataloader "
                    "workers for the input)",
                    cpu, data, gpu, model, moved * 100);
    else if (strcmp(bound, "data") == 0)
        rv_run_warn(r, "input_bound",
                    "input loading bounds the step (%.0f%% of the critical path; CPU %.0f%%, "
                    "GPU %.0f%%): %s moves it %.1f%%; a faster input pipeline would help "
                    "instead (dataloader: more workers, prefetch)",
                    data, cpu, gpu, model, moved * 100);
}

/* What the numbers rest on, as warnings (docs/whatif.md "Warnings"). */
static void assess(rv_run_result *r, const rv_whatif *w, const rv_energy_params *bp)
{
    const rv_graph *g = r->graph;
    const rv_trace *tr = g->trace;
    const rv_run_summary *s = &r->sum;

    if (s->replay_error > RV_REPLAY_WARN_ERROR)
        rv_run_warn(r, "replay_error",
                    "the unmodified graph replays the measured step %.1f%% off (%.1f vs %.1f "
                    "ms): predictions carry at least that error",
                    s->replay_error * 100, s->baseline_us / 1e3, s->measured_us / 1e3);
    size_t i;
    json_t *a;
    json_array_foreach(r->applied, i, a)
    {
        /* A model says what its figures rest on in its applied entry's
         * "warnings" ([{code, message}]); the answer carries them. */
        size_t k;
        json_t *mw;
        json_array_foreach(json_object_get(a, "warnings"), k, mw)
        {
            const char *code = json_string_value(json_object_get(mw, "code"));
            const char *msg = json_string_value(json_object_get(mw, "message"));
            if (code && msg)
                rv_run_warn(r, code, "%s", msg);
        }
        if (!json_is_false(json_object_get(a, "changed")))
            continue;
        const char *model = json_string_value(json_object_get(a, "model"));
        const json_t *idx = json_object_get(a, "index");
        if (json_is_integer(idx))
            rv_run_warn(r, "no_match",
                        "optimizations[%lld] (%s) matched no task of this trace: it changed "
                        "nothing",
                        (long long)json_integer_value(idx), model ? model : "?");
        else
            rv_run_warn(r, "no_effect", "%s changed nothing on this trace", model ? model : "?");
    }
    if (rv_whatif_job(w))
        rv_run_warn(r, "no_effect",
                    "job applies to a training job of several ranks (POST "
                    "/v1/training-jobs/{id}/whatif, reverie simulate --job): on a single trace "
                    "it changes nothing");
    const char *gpu = tr ? rv_trace_str(tr, tr->platform_gpu) : "";
    if (!bp->hw)
        rv_run_warn(r, "gpu_unknown",
                    "the trace's GPU%s%s%s is not in the hardware table: energy and power "
                    "figures assume a V100-like 300 W board",
                    gpu[0] ? " (" : "", gpu, gpu[0] ? ")" : "");
    else if (!tr || tr->power_limit_w <= 0)
        rv_run_warn(r, "power_cap_assumed",
                    "the trace does not record its GPU power limit: the %s default of %.0f W "
                    "is assumed",
                    bp->hw->name, bp->cap_w);
    if (rv_whatif_uses_platform_overheads(w) && tr) {
        const char *missing = !tr->platform_gpu      ? "GPU"
                              : !tr->platform_cpu    ? "CPU model"
                              : !tr->platform_driver ? "driver version"
                              : !tr->platform_cuda   ? "CUDA version"
                                                     : NULL;
        if (missing)
            rv_run_warn(r, "platform_pooled",
                        "host_overheads platform: the trace does not record its %s, so its "
                        "platform's statistics may pool traces of different hardware",
                        missing);
    }
    /* "gpu" says itself whether kernel times were rescaled (rv_models_gpu.c). */
    if (g->prewindow_gpu_ns > 0)
        rv_run_warn(r, "queued_before_profiling",
                    "%zu GPU tasks (%.1f ms of GPU time) were queued before the profiler "
                    "started; a step that waits for them spends that time finishing earlier "
                    "work (queueing, replayed as measured), and a what-if does not change it",
                    g->prewindow_gpu, (double)g->prewindow_gpu_ns / 1e6);
    if (g->inferred_waits || g->inferred_idle || g->inferred_holds || g->prewindow_gpu)
        rv_run_warn(r, "graph_inferred",
                    "the trace lacks records the graph needed: %zu cross-stream waits inferred, "
                    "%zu stream idle gaps kept as measured (a what-if cannot move them), %zu "
                    "lost launches held by their launcher, %zu GPU tasks queued before "
                    "profiling (docs/internals/graph.md)",
                    g->inferred_waits, g->inferred_idle, g->inferred_holds, g->prewindow_gpu);
    if (g->launch_lat_assumed)
        rv_run_warn(r, "launch_latency_assumed",
                    "only %zu launches met an idle stream, too few to measure the launch "
                    "latency: %.1f us is assumed",
                    g->launch_lat_samples, (double)g->launch_lat_ns / 1e3);
    if (g->gpu_constant_capped)
        rv_run_warn(r, "gpu_timing_capped",
                    "launch latency or queue gap measured over 1 s (a broken clock): capped "
                    "at 1 s, the replay and what-ifs are unreliable (latency %.1f us, gap "
                    "%.1f us)",
                    (double)g->launch_lat_ns / 1e3, (double)g->gpu_gap_ns / 1e3);
    if (tr && rv_trace_source(tr) == RV_SOURCE_ET && tr->et_kernels_fitted)
        rv_run_warn(r, "et_only_modelled",
                    "an execution trace alone: kernel times come from the kernel models on %s "
                    "(%zu costed kernels at the efficiencies fitted on measured traces of that "
                    "GPU, the rest at %.0f%% of the roofline), CPU ops take %.0f us each, "
                    "nothing here was measured and the replay error is not measured",
                    gpu, tr->et_kernels_fitted, RV_ET_EFFICIENCY * 100, RV_ET_OP_US);
    else if (tr && rv_trace_source(tr) == RV_SOURCE_ET)
        rv_run_warn(r, "et_only_modelled",
                    "an execution trace alone: kernel times come from the kernel models "
                    "(roofline at %.0f%% efficiency on %s), CPU ops take %.0f us each, "
                    "nothing here was measured and the replay error is not measured",
                    RV_ET_EFFICIENCY * 100, gpu, RV_ET_OP_US);
    if (g->niters == 0)
        rv_run_warn(r, "no_steps",
                    "the trace has no step markers (ProfilerStep#N or optimizer steps): the "
                    "whole trace counts as one iteration");
    else if (g->niters == 1)
        rv_run_warn(r, "single_step",
                    "the trace holds a single step: no steady-state window, warm-up and "
                    "profiler start-up are in the figures");
    warn_bound(r);
    if (r->steps.bimodal)
        rv_run_warn(r, "bimodal_steps",
                    "step times fall in two groups (%zu near %.1f ms, %zu near %.1f ms): the "
                    "median matches no real step; see steps",
                    r->steps.low_count, r->steps.low_median_us / 1e3, r->steps.high_count,
                    r->steps.high_median_us / 1e3);
}

/* ---- the baseline's figures (rv_run_prep) ------------------------------- */

/* The prep's figures that can fail: the step's and its window. */
static int prep_begin(const rv_graph *g, const rv_sim *base, int64_t iteration, int full,
                      rv_run_prep **out, rv_error *err)
{
    rv_run_prep *p = calloc(1, sizeof(*p));
    int rc;

    *out = NULL;
    if (!p) {
        rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        return RV_ERR_NOMEM;
    }
    p->graph = g;
    p->base = base;
    p->iteration = iteration;
    p->full = full;
    if ((rc = rv_report_iteration(g, base, iteration, &p->fig, err)) != 0) {
        free(p);
        return rc;
    }
    p->win = rv_report_window(g, base, p->fig.iter);
    *out = p;
    return 0;
}

/* The baseline's memory report and the warnings it adds, made on a scratch
 * result: a run adds them where rv_metrics_compute would have. */
static void prep_memory(rv_run_prep *p)
{
    rv_run_result *tmp = calloc(1, sizeof(*tmp));

    if (!tmp)
        return;
    tmp->graph = p->graph;
    tmp->base = p->base;
    tmp->base_fig = p->fig;
    tmp->base_win = p->win;
    const rv_flops_trace *f = p->graph->flops;
    if (f && f->total_flops > 0) {
        p->flops = rv_metrics_flops(tmp, &p->flops_per_step);
        size_t cap = sizeof(p->flops_warnings) / sizeof(p->flops_warnings[0]);
        p->flops_nwarnings = tmp->nwarnings < cap ? tmp->nwarnings : cap;
        memcpy(p->flops_warnings, tmp->warnings, p->flops_nwarnings * sizeof(*tmp->warnings));
        tmp->nwarnings = 0;
    }
    p->memory = rv_metrics_memory(tmp);
    size_t cap = sizeof(p->mem_warnings) / sizeof(p->mem_warnings[0]);
    p->mem_nwarnings = tmp->nwarnings < cap ? tmp->nwarnings : cap;
    memcpy(p->mem_warnings, tmp->warnings, p->mem_nwarnings * sizeof(p->mem_warnings[0]));
    free(tmp);
    if (p->graph->trace)
        p->batch_inferred = rv_shapes_batch(p->graph->trace, &p->batch_from);
}

/* The rest of the prep, which reads only the baseline graph and
 * simulation: a run without a prep does it on a second thread while the
 * what-if is applied and simulated (on a 100k-task trace a third of the
 * answer's time). */
static void *prep_reports(void *arg)
{
    rv_run_prep *p = arg;
    const rv_graph *g = p->graph;
    rv_energy_params ep;

    rv_apply_energy_params(NULL, g, &ep);
    p->have_energy = rv_power_energy(g, p->base, &ep, p->win.t0_ns, p->win.t1_ns, &p->energy) == 0;
    if (p->full) {
        p->breakdown = rv_report_breakdown(g, p->base, &p->win);
        p->per_iteration = rv_report_iterations(g, p->base);
    }
    if (!rv_run_modelled(g))
        step_stats(g, &p->steps);
    else
        unmeasure_iterations(p->per_iteration);
    prep_memory(p);
    p->calls = rv_pardims_calls_new(g);
    return NULL;
}

void rv_run_prep_free(rv_run_prep *p)
{
    if (!p)
        return;
    json_decref(p->breakdown);
    json_decref(p->per_iteration);
    json_decref(p->memory);
    json_decref(p->flops);
    rv_pardims_calls_free(p->calls);
    rv_sim_adj_free(p->adj);
    free(p);
}

int rv_run_prep_new(const rv_graph *g, const rv_sim *base, int64_t iteration, rv_run_prep **out,
                    rv_error *err)
{
    rv_run_prep *p = NULL;
    int rc = prep_begin(g, base, iteration, 1, &p, err);

    *out = NULL;
    if (rc != 0)
        return rc;
    prep_reports(p);
    if (!p->breakdown || !p->per_iteration || !p->memory || !p->calls) {
        rv_run_prep_free(p);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory preparing the baseline");
    }
    if ((rc = rv_sim_adj_new(g, &p->adj, err)) != 0) {
        rv_run_prep_free(p);
        return rc;
    }
    p->print = rv_apply_fingerprint(g);
    p->have_print = 1;
    *out = p;
    return 0;
}

/* Whether a run with options o on g and base may read p. */
static int prep_fits(const rv_run_prep *p, const rv_graph *g, const rv_sim *base,
                     const rv_run_opts *o)
{
    return p && p->graph == g && p->base == base && p->iteration == o->iteration &&
           (p->full || o->summary_only);
}

/* The baseline's figures from p into r: copies of its reports, since
 * rendering rounds an answer's numbers in place and p may be shared. */
static void take_prep(rv_run_result *r, const rv_run_prep *p)
{
    r->base_energy = p->energy;
    r->steps = p->steps;
    if (r->summary_only)
        return;
    r->breakdown_base = json_deep_copy(p->breakdown);
    r->per_iteration = json_deep_copy(p->per_iteration);
}

rv_stop rv_run_stop_of(const rv_run_opts *o)
{
    rv_stop stop = {.deadline_ms = o->deadline_ms,
                    .cancel = o->cancel,
                    .cancel_fn = o->cancel_fn,
                    .cancel_arg = o->cancel_arg};
    /* The budget and the caller's deadline: the earlier one counts. */
    if (o->budget_ms) {
        int64_t from = o->budget_from_ms > 0 ? o->budget_from_ms : rv_stop_now_ms();
        int64_t d = from + (int64_t)o->budget_ms;
        if (stop.deadline_ms <= 0 || d < stop.deadline_ms) {
            stop.deadline_ms = d;
            stop.budget_ms = o->budget_ms;
        }
    }
    return stop;
}

/* Two of the predicted answer's reports, made on a second thread while
 * the caller makes the energy and the critical path: they only read the
 * predicted graph and simulation, and on a 100k-task trace the four took
 * 40% of a warm what-if (docs/internals/request-path.md). */
typedef struct pred_reports {
    const rv_graph *g;
    const rv_sim *s;
    const rv_window *win;
    int top;
    int breakdown_too;   /* 0: the baseline's serves (no what-if) */
    json_t *top_kernels; /* new */
    json_t *breakdown;   /* new */
} pred_reports;

static void *pred_reports_run(void *arg)
{
    pred_reports *p = arg;
    p->top_kernels = rv_report_top_kernels(p->g, p->s, p->win, p->top);
    if (p->breakdown_too)
        p->breakdown = rv_report_breakdown(p->g, p->s, p->win);
    return NULL;
}

int rv_run(const rv_graph *g, const rv_sim *base, const rv_whatif *w, const rv_run_opts *opts,
           rv_run_result **out, rv_error *err)
{
    rv_run_opts o = opts ? *opts : (rv_run_opts){.iteration = RV_ITER_MEDIAN};
    rv_run_result *r = calloc(1, sizeof(*r));
    rv_run_prep *own = NULL;
    const rv_run_prep *pp = NULL;
    rv_bg prep_bg = {0}, pred_bg = {0};
    int rc;
    pred_reports pr = {0};
    rv_stop stop = rv_run_stop_of(&o);

    *out = NULL;
    if (!r)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (o.top_kernels <= 0)
        o.top_kernels = RV_RUN_TOP_KERNELS;
    if (o.critical_max <= 0)
        o.critical_max = RV_RUN_CRITICAL_MAX;
    r->graph = g;
    r->base = base;
    r->summary_only = o.summary_only != 0;
    r->tasks = g->ntasks;
    r->edges = g->nedges;
    r->iterations = g->niters;
    r->launch_latency_us = (double)g->launch_lat_ns / 1000.0;
    r->gpu_queue_gap_us = (double)g->gpu_gap_ns / 1000.0;
    r->uncorrelated_gpu = g->uncorrelated_gpu;
    /* jansson seeds its hash once; make sure that happens before two
     * threads build objects. */
    json_object_seed(0);
    if (prep_fits(o.prep, g, base, &o)) {
        pp = o.prep;
    } else {
        if ((rc = prep_begin(g, base, o.iteration, !r->summary_only, &own, err)) != 0)
            goto out;
        rv_bg_start(&prep_bg, prep_reports, own);
        pp = own;
    }
    /* Until the join only what prep_begin wrote is read. */
    r->base_fig = pp->fig;
    r->pred_fig = r->base_fig;
    r->base_win = pp->win;

    if (w && !rv_whatif_is_empty(w)) {
        rc = predict(r, w, &o, &stop, pp, err);
        if (rc != 0)
            goto out;
    } else {
        r->applied = json_array();
    }
    const rv_graph *pg = rv_run_pred_graph(r);
    const rv_sim *ps = rv_run_pred_sim(r);
    r->pred_win = r->pred_graph ? rv_report_window(pg, ps, r->pred_fig.iter) : r->base_win;
    pr = (pred_reports){.g = pg,
                        .s = ps,
                        .win = &r->pred_win,
                        .top = o.top_kernels,
                        .breakdown_too = r->pred_graph != NULL};
    if (!r->summary_only)
        rv_bg_start(&pred_bg, pred_reports_run, &pr);
    rv_energy_params p;
    rv_apply_energy_params(w, pg, &p);
    int pred_energy =
        rv_power_energy(pg, ps, &p, r->pred_win.t0_ns, r->pred_win.t1_ns, &r->pred_energy) == 0;
    if (!r->summary_only) {
        r->critical_path = rv_report_critical_path(pg, ps, &r->pred_win, o.critical_max);
        if ((rc = rv_stop_check(&stop, err)) != 0)
            goto out;
    }
    rv_bg_join(&pred_bg);
    r->top_kernels = pr.top_kernels;
    pr.top_kernels = NULL;
    rv_bg_join(&prep_bg);
    r->prep = pp;
    take_prep(r, pp);
    if (!r->summary_only) {
        /* With no what-if the predicted breakdown is the baseline's. */
        r->breakdown_pred = r->pred_graph ? pr.breakdown : json_incref(r->breakdown_base);
        pr.breakdown = NULL;
    }
    if (!r->applied ||
        (!r->summary_only && (!r->breakdown_base || !r->breakdown_pred || !r->top_kernels ||
                              !r->critical_path || !r->per_iteration))) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory writing the reports");
        goto out;
    }
    if ((rc = rv_stop_check(&stop, err)) != 0)
        goto out;

    rv_run_summary *s = &r->sum;
    s->measured_us = r->base_fig.measured_us;
    s->baseline_us = r->base_fig.simulated_us;
    s->predicted_us = r->pred_fig.simulated_us;
    s->speedup = ratio(s->baseline_us, s->predicted_us);
    s->replay_error = ratio(fabs(s->baseline_us - s->measured_us), s->measured_us);
    if (rv_run_modelled(g)) {
        /* An execution trace alone was modelled: nothing to compare. */
        s->measured_us = 0;
        s->replay_error = 0;
    }
    s->have_energy = pp->have_energy && pred_energy;
    if (s->have_energy) {
        s->baseline_energy_j =
            r->base_energy.energy_j / (r->base_win.per > 0 ? r->base_win.per : 1);
        s->energy_j = r->pred_energy.energy_j / (r->pred_win.per > 0 ? r->pred_win.per : 1);
    } else {
        memset(&r->base_energy, 0, sizeof(r->base_energy));
        memset(&r->pred_energy, 0, sizeof(r->pred_energy));
    }
    rv_energy_params bp;
    rv_apply_energy_params(NULL, g, &bp);
    assess(r, w, &bp);
    r->metrics = rv_metrics_compute(r, w);
    if (!r->metrics) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory writing the metrics");
        goto out;
    }
    if (r->base_fig.iter >= 0)
        r->step = g->iters[r->base_fig.iter].step;
    else
        r->step = g->niters ? -1 : -2;
    if (!o.keep_predicted) {
        rv_sim_free(r->pred_sim);
        rv_graph_free(r->pred_graph);
        r->pred_sim = NULL;
        r->pred_graph = NULL;
    }
    *out = r;
    r = NULL;
    rc = 0;
out:
    rv_bg_join(&pred_bg); /* it reads r's predicted graph */
    json_decref(pr.top_kernels);
    json_decref(pr.breakdown);
    rv_bg_join(&prep_bg); /* it reads g and base: wait before returning */
    if (*out)
        (*out)->prep = own ? NULL : pp; /* own is freed here */
    rv_run_prep_free(own);
    rv_run_result_free(r);
    return rv_error_ensure(err, rc, "the what-if run");
}

/* ---- the answer --------------------------------------------------------- */

static json_t *before_after(double before, double after)
{
    return json_pack("{s:f,s:f}", "baseline", before, "predicted", after);
}

json_t *rv_run_warnings_json(const rv_run_result *r)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < r->nwarnings; i++)
        json_array_append_new(a, json_pack("{s:s,s:s}", "code", r->warnings[i].code, "message",
                                           r->warnings[i].message));
    return a;
}

/* A figure that needs a measured step: null when nothing was measured
 * (an execution trace alone; measured_us is 0 then). */
static json_t *measured(const rv_run_summary *s, double v)
{
    return s->measured_us > 0 ? json_real(v) : json_null();
}

/* Sets key to v (a new reference, may be NULL after OOM); 1 on failure. */
static int put(json_t *o, const char *key, json_t *v)
{
    return !v || json_object_set_new(o, key, v) != 0;
}

static json_t *render(const rv_run_result *r, const char *label, int64_t trace_id)
{
    const rv_trace *tr = r->graph->trace;
    const rv_run_summary *s = &r->sum;
    const rv_energy *be = &r->base_energy, *pe = &r->pred_energy;
    json_t *o = json_object();
    int bad = !o;

    if (bad)
        return NULL;
    if (trace_id > 0)
        bad |= put(o, "trace_id", json_integer((json_int_t)trace_id));
    if (label)
        bad |= put(o, "trace", json_string(label));
    bad |= put(o, "platform", json_string(tr ? rv_trace_str(tr, tr->platform_gpu) : ""));
    bad |= put(o, "tasks", json_integer((json_int_t)r->tasks));
    bad |= put(o, "edges", json_integer((json_int_t)r->edges));
    bad |= put(o, "iterations", json_integer((json_int_t)r->iterations));
    if (r->step >= 0)
        bad |= put(o, "iteration", json_integer((json_int_t)r->step));
    else
        bad |= put(o, "iteration", json_string(r->step == -1 ? "median" : "whole trace"));
    bad |= put(o, "measured_us", measured(s, s->measured_us));
    bad |= put(o, "baseline_us", json_real(s->baseline_us));
    bad |= put(o, "replay_error", measured(s, s->replay_error));
    bad |= put(o, "predicted_us", json_real(s->predicted_us));
    bad |= put(o, "speedup", json_real(s->speedup));
    bad |= put(o, "energy_j", before_after(s->baseline_energy_j, s->energy_j));
    bad |= put(o, "avg_power_w", before_after(be->avg_power_w, pe->avg_power_w));
    bad |= put(o, "power_limit_w", before_after(be->power_limit_w, pe->power_limit_w));
    /* The GPUs of this trace that ran work; the job's are under "job". */
    bad |= put(o, "gpus", json_pack("{s:i,s:i}", "baseline", be->ngpus, "predicted", pe->ngpus));
    bad |= put(o, "avg_power_per_gpu_w",
               before_after(be->avg_power_per_gpu_w, pe->avg_power_per_gpu_w));
    double per_b = r->base_win.per > 0 ? r->base_win.per : 1;
    double per_p = r->pred_win.per > 0 ? r->pred_win.per : 1;
    bad |= put(o, "job",
               json_pack("{s:{s:i,s:i},s:{s:i,s:i},s:o,s:o}", "ranks", "baseline", be->ranks,
                         "predicted", pe->ranks, "gpus", "baseline", be->job_gpus, "predicted",
                         pe->job_gpus, "energy_j",
                         before_after(be->job_energy_j / per_b, pe->job_energy_j / per_p),
                         "avg_power_w", before_after(be->job_avg_power_w, pe->job_avg_power_w)));
    const rv_step_stats *st = &r->steps;
    json_t *steps =
        json_pack("{s:I,s:f,s:f,s:f,s:b}", "count", (json_int_t)st->count, "min_us", st->min_us,
                  "median_us", st->median_us, "max_us", st->max_us, "bimodal", st->bimodal);
    if (steps && st->bimodal)
        json_object_set_new(steps, "modes",
                            json_pack("[{s:I,s:f},{s:I,s:f}]", "count", (json_int_t)st->low_count,
                                      "median_us", st->low_median_us, "count",
                                      (json_int_t)st->high_count, "median_us", st->high_median_us));
    if (s->measured_us <= 0) {
        json_decref(steps);
        steps = json_null();
    }
    bad |= put(o, "steps", steps);
    bad |= put(o, "warnings", rv_run_warnings_json(r));
    bad |= put(o, "applied", json_incref(r->applied));
    bad |= put(o, "per_iteration", json_incref(r->per_iteration));
    bad |=
        put(o, "breakdown",
            json_pack("{s:O,s:O}", "baseline", r->breakdown_base, "predicted", r->breakdown_pred));
    bad |= put(o, "top_kernels", json_incref(r->top_kernels));
    bad |= put(o, "critical_path", json_incref(r->critical_path));
    bad |= put(o, "model",
               json_pack("{s:f,s:f,s:I,s:I,s:I,s:I,s:I,s:f}", "launch_latency_us",
                         r->launch_latency_us, "gpu_queue_gap_us", r->gpu_queue_gap_us,
                         "uncorrelated_gpu_tasks", (json_int_t)r->uncorrelated_gpu,
                         "inferred_stream_waits", (json_int_t)r->graph->inferred_waits,
                         "inferred_launch_holds", (json_int_t)r->graph->inferred_holds,
                         "kept_stream_idle", (json_int_t)r->graph->inferred_idle,
                         "queued_before_window", (json_int_t)r->graph->prewindow_gpu,
                         "queued_before_window_us", (double)r->graph->prewindow_gpu_ns / 1e3));
    const char *mk;
    json_t *mv;
    json_object_foreach(r->metrics, mk, mv) bad |= put(o, mk, json_incref(mv));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    rv_round_json(o);
    return o;
}

json_t *rv_run_render(const rv_run_result *r, const char *label)
{
    return r->summary_only ? NULL : render(r, label, 0);
}

char *rv_run_render_bytes(const rv_run_result *r, int64_t trace_id, size_t *len)
{
    json_t *o = r->summary_only ? NULL : render(r, NULL, trace_id);
    char *text = o ? json_dumps(o, RV_RUN_JSON_FLAGS) : NULL;

    json_decref(o);
    if (len)
        *len = text ? strlen(text) : 0;
    return text;
}

json_t *rv_run_summary_render(const rv_run_summary *s)
{
    json_t *o = json_pack(
        "{s:o,s:f,s:f,s:f,s:o,s:{s:f,s:f},s:i}", "measured_us", measured(s, s->measured_us),
        "baseline_us", s->baseline_us, "predicted_us", s->predicted_us, "speedup", s->speedup,
        "replay_error", measured(s, s->replay_error), "energy_j", "baseline", s->baseline_energy_j,
        "predicted", s->energy_j, "warning_count", s->warnings);
    rv_round_json(o);
    return o;
}

int rv_run_dump(json_t *answer, FILE *f, int pretty)
{
    size_t flags = pretty ? JSON_INDENT(2) | RV_ROUND_DUMP_FLAGS : RV_RUN_JSON_FLAGS;
    rv_round_json(answer);
    if (json_dumpf(answer, f, flags) != 0)
        return RV_ERR_IO;
    return fputc('\n', f) == EOF ? RV_ERR_IO : 0;
}
