/* Helpers every what-if model shares: the hardware row a model assumes,
 * thread order, the typical launch cost, and removing a task. Kept apart
 * from rv_whatif.c so the models depend on this module and the request
 * document depends on the models, never the other way round. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/rv_models.h"
#include "util/rv_sort.h"

const rv_hw *rv_models__hw(const struct rv_whatif *w, const rv_graph *g)
{
    if (w && w->gpu[0])
        return rv_hw_lookup(w->gpu);
    const rv_trace *tr = g->trace;
    if (!tr)
        return NULL;
    const rv_hw *hw = rv_hw_lookup(rv_trace_str(tr, tr->platform_gpu));
    if (!hw && tr->ndevices > 0)
        hw = rv_hw_lookup(rv_trace_str(tr, tr->devices[0].name));
    return hw;
}

int32_t *rv_models__thread_next(const rv_graph *g)
{
    int32_t *next = malloc((g->ntasks + 1) * sizeof(int32_t));
    if (!next)
        return NULL;
    for (size_t i = 0; i < g->ntasks; i++)
        next[i] = -1;
    for (size_t e = 0; e < g->nedges; e++) {
        const rv_edge *ed = &g->edges[e];
        if (ed->kind == RV_EDGE_THREAD && ed->src >= 0 && (size_t)ed->src < g->ntasks &&
            g->tasks[ed->src].thread == g->tasks[ed->dst].thread)
            next[ed->src] = ed->dst;
    }
    return next;
}

int64_t rv_models__launch_ns(const rv_graph *g)
{
    size_t n = 0;
    int64_t *v = malloc((g->ntasks + 1) * sizeof(int64_t));
    if (!v)
        return 5000;
    for (size_t i = 0; i < g->ntasks; i++)
        if ((g->tasks[i].flags & RV_TF_LAUNCH) && !(g->tasks[i].flags & RV_TF_REMOVED))
            v[n++] = g->tasks[i].dur_ns;
    int64_t r = 5000;
    if (n > 0) {
        rv_sort_i64s(v, n);
        r = v[n / 2];
    }
    free(v);
    return r;
}

void rv_models__remove(rv_graph *g, int32_t i, int keep_gap)
{
    int64_t gap = g->tasks[i].gap_ns, dl = g->tasks[i].gap_dl_ns;
    rv_graph_remove_task(g, i);
    if (keep_gap) {
        g->tasks[i].gap_ns = gap;
        g->tasks[i].gap_dl_ns = dl;
    }
}

void rv_models__warn(json_t *obj, const char *code, const char *fmt, ...)
{
    char msg[240];
    va_list ap;
    if (!json_is_object(obj))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *arr = json_object_get(obj, "warnings");
    if (!arr) {
        arr = json_array();
        if (!arr || json_object_set_new(obj, "warnings", arr) != 0)
            return;
    }
    json_array_append_new(arr, json_pack("{s:s,s:s}", "code", code, "message", msg));
}

int64_t rv_models__scaled_ns(int64_t ns, double mult)
{
    double v = (double)ns * mult;
    if (!(v < (double)RV_MODELS_MAX_TASK_NS))
        return isnan(v) ? 0 : RV_MODELS_MAX_TASK_NS;
    if (v <= 0)
        return 0;
    return (int64_t)llround(v);
}

rv_task rv_models__comm_task(double secs, double bytes, int32_t it, int phase)
{
    rv_task t = {0};
    t.dur_ns = (int64_t)llround(secs * 1e9);
    t.meas_start_ns = -1;
    t.bytes = (int64_t)bytes;
    t.event = -1;
    t.launch = -1;
    t.iteration = it;
    t.kind = RV_TASK_COMM;
    t.cat = RV_CAT_KERNEL;
    t.phase = (uint8_t)phase;
    t.flags = RV_TF_INSERTED;
    return t;
}
