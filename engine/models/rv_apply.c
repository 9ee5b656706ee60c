/* Applies a what-if request to a graph: the order in which the models run
 * (docs/whatif.md "Order of application"), which model changed nothing,
 * and what the energy of the result assumes. Sits after the models so that
 * the request types (whatif/) never include them. */
#include "models/rv_apply.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/rv_retime.h"
#include "models/rv_models.h"
#include "models/rv_parallel.h"

/* ---- apply -------------------------------------------------------------- */

/* The power limit w asks for on g in watts: power_limit_w, or
 * power_limit_frac of the GPU's default limit. 0 when neither is given;
 * a negative rv_err when the fraction has no GPU row to resolve against or
 * falls below the GPU's lowest settable limit. */
static int power_cap(const rv_whatif *w, const rv_graph *g, double *cap_w, rv_error *err)
{
    *cap_w = w->power_limit_w;
    if (w->power_limit_frac <= 0)
        return 0;
    const rv_hw *hw = rv_models__hw(w, g);
    if (!hw || hw->default_pl_w <= 0)
        return rv_error_field(err, RV_ERR_INVALID, "power_limit_frac",
                              "power_limit_frac needs the GPU's default power limit, and this "
                              "trace's GPU is not in the hardware table: give power_limit_w "
                              "(watts) or gpu");
    *cap_w = w->power_limit_frac * hw->default_pl_w;
    if (*cap_w < hw->min_pl_w)
        return rv_error_field(err, RV_ERR_INVALID, "power_limit_frac",
                              "power_limit_frac = %g is %g W, below the minimum limit of %s (%g W)",
                              w->power_limit_frac, *cap_w, hw->name, hw->min_pl_w);
    return 0;
}

static int run_opt(const rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied, rv_error *err)
{
    switch (o->kind) {
    case RV_OPT_AMP: return rv_models__amp(w, o, g, applied, err);
    case RV_OPT_FUSED_OPTIMIZER: return rv_models__fused_optimizer(w, o, g, applied, err);
    case RV_OPT_KERNEL_FUSION: return rv_models__kernel_fusion(w, o, g, applied, err);
    case RV_OPT_RESTRUCTURE_BN: return rv_models__restructure_bn(w, o, g, applied, err);
    case RV_OPT_VDNN:
    case RV_OPT_GIST:
    case RV_OPT_RECOMPUTE:
    case RV_OPT_GRAD_ACCUM: return rv_models__memory_saver(w, o, g, applied, err);
    case RV_OPT_DATALOADER: return rv_models__dataloader(w, o, g, applied, err);
    case RV_OPT_BATCH_SIZE: return rv_models__batch_size(w, o, g, applied, err);
    default: return rv_models__generic(w, o, g, applied, err);
    }
}

/* A fingerprint of everything a model may change (task count, edges,
 * durations, gaps, flags), so an answer can say which model changed
 * nothing: a what-if that matched no task must not read as "no gain".
 * Four independent lanes, folded at the end: one chain of multiplies per
 * task made this a serial pass that cost as much as applying the model. */
uint64_t rv_apply_fingerprint(const rv_graph *g)
{
    const uint64_t prime = 1099511628211ull;
    uint64_t lane[4] = {1469598103934665603ull ^ (uint64_t)g->ntasks, 1, 2, 3};
    lane[0] = (lane[0] ^ (uint64_t)g->nedges) * prime;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        uint64_t *h = &lane[i & 3];
        *h = (*h ^ (uint64_t)t->dur_ns) * prime;
        *h = (*h ^ (uint64_t)t->gap_ns) * prime;
        *h = (*h ^ t->flags) * prime;
    }
    uint64_t h = lane[0];
    for (int k = 1; k < 4; k++)
        h = (h ^ lane[k]) * prime;
    return h;
}

/* Records on the model's applied entry (the last one) whether it changed
 * the graph. */
static void mark_changed(json_t *arr, int changed)
{
    json_t *o = json_array_get(arr, json_array_size(arr) ? json_array_size(arr) - 1 : 0);
    if (json_is_object(o))
        json_object_set_new(o, "changed", json_boolean(changed));
}

/* The fingerprint of g as it stands, when known: each model's "after" is
 * the next one's "before", and a fresh clone's is its source's. */
typedef struct print_state {
    uint64_t cur;
    int known;
} print_state;

static uint64_t print_before(const rv_graph *g, const print_state *ps)
{
    return ps->known ? ps->cur : rv_apply_fingerprint(g);
}

/* Whether g changed since before; g's fingerprint is known after. */
static int print_changed(const rv_graph *g, print_state *ps, uint64_t before)
{
    ps->cur = rv_apply_fingerprint(g);
    ps->known = 1;
    return before != ps->cur;
}

int rv_apply(const rv_whatif *w, rv_graph *g, json_t **applied, rv_error *err)
{
    return rv_apply_stop(w, g, NULL, applied, err);
}

/* A model past the what-if's growth limits (RV_ERR_LIMIT from the graph,
 * with no field named yet) is named by its place in the document. */
static int name_growth(const rv_opt *o, const char *model, int rc, rv_error *err)
{
    if (rc != RV_ERR_LIMIT || (err && err->field[0]))
        return rc;
    char field[48];
    if (o)
        snprintf(field, sizeof(field), "optimizations[%d]", o->index);
    else
        snprintf(field, sizeof(field), "%s", model ? model : "distributed");
    return rv_error_field(err, RV_ERR_LIMIT, field,
                          "%s would grow the graph past what one what-if may add (%zu tasks, "
                          "%zu edges)",
                          field, RV_APPLY_MAX_NEW_TASKS, RV_APPLY_MAX_NEW_EDGES);
}

/* Bounds what the models may add to g and lets their loops see stop;
 * apply_end puts g back to its own caps. */
static void apply_begin(rv_graph *g, const rv_stop *stop)
{
    g->max_tasks = g->ntasks + RV_APPLY_MAX_NEW_TASKS;
    g->max_edges = g->nedges + RV_APPLY_MAX_NEW_EDGES;
    g->stop = stop;
}

static void apply_end(rv_graph *g)
{
    g->max_tasks = g->max_edges = 0;
    g->stop = NULL;
}

static int apply_models(const rv_whatif *w, rv_graph *g, const rv_stop *stop, print_state *ps,
                        json_t **applied, rv_error *err);

int rv_apply_stop(const rv_whatif *w, rv_graph *g, const rv_stop *stop, json_t **applied,
                  rv_error *err)
{
    print_state ps = {0, 0};
    int rc = apply_models(w, g, stop, &ps, applied, err);
    apply_end(g);
    return rc;
}

int rv_apply_stop_known(const rv_whatif *w, rv_graph *g, const rv_stop *stop, uint64_t print,
                        json_t **applied, rv_error *err)
{
    print_state ps = {print, 1};
    int rc = apply_models(w, g, stop, &ps, applied, err);
    apply_end(g);
    return rc;
}

static int apply_models(const rv_whatif *w, rv_graph *g, const rv_stop *stop, print_state *ps,
                        json_t **applied, rv_error *err)
{
    int rc = 0;
    json_t *arr = json_array();
    if (applied)
        *applied = NULL;
    if (!arr)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    apply_begin(g, stop);
    if (!w)
        goto done;
    if (w->platform_overheads) {
        /* First, so that every model works on the platform's host times. */
        json_t *o = NULL;
        if (!w->overheads) {
            rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "host_overheads",
                                "host_overheads is platform but no platform statistics were "
                                "given (the service supplies its platform's; the CLI takes "
                                "--overheads-from TRACE)");
            goto fail;
        }
        if ((rc = rv_retime_overheads(g, w->overheads, &o, err)) != 0)
            goto fail;
        ps->known = 0;
        json_array_append_new(arr, o);
    }
    if (w->platform_kmodels && !w->kmodel_platform && !w->kmodel_target) {
        rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "kernel_models",
                            "kernel_models is platform but no platform kernel models were given "
                            "(the service supplies the trace's platform's on "
                            "/v1/traces/{id}/whatif; elsewhere ask with \"trace\")");
        goto fail;
    }
    if (w->gpu[0]) {
        /* Before the optimizations: they then act on the other GPU. */
        if ((rc = rv_stop_check(stop, err)) != 0)
            goto fail;
        uint64_t before = print_before(g, ps);
        if ((rc = rv_models__gpu(w, g, arr, err)) != 0)
            goto fail;
        /* Not rescaled is said by its own warning, not as "no effect". */
        json_t *last = json_array_get(arr, json_array_size(arr) - 1);
        if (json_is_true(json_object_get(last, "rescaled")))
            mark_changed(arr, print_changed(g, ps, before));
        else
            ps->known = 0;
    }
    for (int stage = RV_STAGE_PRECISION; stage <= RV_STAGE_DATALOADER; stage++) {
        if (stage == RV_STAGE_DISTRIBUTED && w->has_par) {
            if ((rc = rv_stop_check(stop, err)) != 0)
                goto fail;
            uint64_t before = print_before(g, ps);
            if ((rc = rv_models__parallel(w, g, arr, err)) != 0)
                goto fail;
            mark_changed(arr, print_changed(g, ps, before));
        }
        if (stage == RV_STAGE_DISTRIBUTED && w->has_dist) {
            if ((rc = rv_stop_check(stop, err)) != 0)
                goto fail;
            uint64_t before = print_before(g, ps);
            if ((rc = name_growth(NULL, "distributed", rv_models__distributed(w, g, arr, err),
                                  err)) != 0)
                goto fail;
            mark_changed(arr, print_changed(g, ps, before));
        }
        if (stage == RV_STAGE_POWER && (w->power_limit_w > 0 || w->power_limit_frac > 0)) {
            /* The model sees the fraction as the watts it stands for. */
            rv_whatif resolved = *w;
            if ((rc = rv_stop_check(stop, err)) != 0 ||
                (rc = power_cap(w, g, &resolved.power_limit_w, err)) != 0)
                goto fail;
            /* The model tells what it moved: no pass over the tasks here,
             * and the fingerprint is made again only if a later model
             * needs it. */
            int changed = 0;
            if ((rc = rv_models__power(&resolved, g, arr, &changed, err)) != 0)
                goto fail;
            mark_changed(arr, changed);
            if (changed)
                ps->known = 0;
        }
        for (size_t i = 0; i < w->nopts; i++) {
            if (w->opts[i].stage != stage)
                continue;
            if ((rc = rv_stop_check(stop, err)) != 0)
                goto fail;
            /* Selectors match under the same stop; a pattern past its
             * match limit fails the model (rv_select_finish). */
            rv_select_set_stop(&w->opts[i].sel, stop);
            uint64_t before = print_before(g, ps);
            rc = name_growth(&w->opts[i], NULL, run_opt(w, &w->opts[i], g, arr, err), err);
            int src = rv_select_finish(&w->opts[i].sel, rc ? NULL : err);
            if (rc == 0)
                rc = src;
            if (rc != 0)
                goto fail;
            mark_changed(arr, print_changed(g, ps, before));
        }
    }
    if (w->has_schedule || rv_whatif_schedule(w) != RV_SCHED_EARLIEST_START) {
        json_t *o = json_pack("{s:s, s:s}", "model", "schedule", "policy",
                              rv_schedule_name(rv_whatif_schedule(w)));
        if (o)
            json_array_append_new(arr, o);
    }
done:
    if (applied)
        *applied = arr;
    else
        json_decref(arr);
    return 0;
fail:
    json_decref(arr);
    /* A model's bare code still reaches the caller with a message. */
    return rv_error_ensure(err, rc, "applying the what-if");
}

/* ---- what energy assumes ------------------------------------------------ */

void rv_apply_energy_params(const rv_whatif *w, const rv_graph *g, rv_energy_params *out)
{
    memset(out, 0, sizeof(*out));
    out->hw = rv_models__hw(w, g);
    double cap = 0;
    rv_error ignored;
    /* A fraction that cannot be resolved already failed the apply. */
    if (w && power_cap(w, g, &cap, &ignored) != 0)
        cap = 0;
    out->cap_w = cap > 0 ? cap : rv_power_trace_cap(g, out->hw);
    if (out->cap_w <= 0) {
        rv_power_model pm;
        rv_power_init(&pm, out->hw);
        out->cap_w = pm.tdp_w;
    }
    out->ranks = 1;
    if (w && w->has_dist)
        out->ranks = w->dist.workers;
    else if (w && w->has_par && w->par.data > 0)
        out->ranks = w->par.data;
    else if (g->trace && g->trace->world_size > 1)
        out->ranks = g->trace->world_size;
    /* Every GPU of a tensor / pipeline replica is taken to run like the
     * simulated one: its share of the work, idle otherwise. */
    out->replica_gpus = rv_parallel_replica_gpus(w);
    out->bubble_share = rv_parallel_bubble_share(w);
    out->batch_size = w ? w->batch_size : 0;
}
