/* Power limit (MODELS.md section A): every GPU task slows by the ratio of
 * its time at the clock the new cap allows to its time at the clock the
 * trace's cap allowed. CPU tasks are unaffected. */
#include <math.h>

#include "models/rv_models.h"
#include "whatif/rv_whatif.h"

int rv_models__power(const struct rv_whatif *w, rv_graph *g, json_t *applied, int *changed,
                     rv_error *err)
{
    const rv_hw *hw = rv_models__hw(w, g);
    rv_power_model pm;
    rv_power_init(&pm, hw);
    double cap0 = rv_power_trace_cap(g, hw);
    if (cap0 <= 0)
        cap0 = pm.tdp_w;
    double cap = w->power_limit_w;
    if (cap < pm.min_pl_w)
        return rv_error_field(err, RV_ERR_INVALID, "power_limit_w",
                              "power_limit_w = %g W is below the minimum limit of %s (%g W)", cap,
                              hw ? hw->name : "this GPU", pm.min_pl_w);
    size_t n[RV_KC_COUNT] = {0};
    int moved = 0;
    double before = 0, after = 0;
    double factor[RV_KC_COUNT];
    for (int c = 0; c < RV_KC_COUNT; c++)
        factor[c] = rv_power_slowdown(&pm, c, cap0, cap);
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA || (t->flags & RV_TF_REMOVED))
            continue;
        int c = rv_kclass_of_task(g, i);
        before += (double)t->dur_ns;
        int64_t d = (int64_t)llround((double)t->dur_ns * factor[c]);
        moved |= d != t->dur_ns;
        t->dur_ns = d;
        after += (double)t->dur_ns;
        n[c]++;
    }
    *changed = moved;
    json_t *r = json_pack("{s:s, s:f, s:f, s:s, s:f, s:f}", "model", "power_limit", "power_limit_w",
                          cap, "trace_power_limit_w", cap0, "gpu", hw ? hw->name : "unknown",
                          "gpu_busy_us_before", before / 1e3, "gpu_busy_us_after", after / 1e3);
    if (!r)
        return RV_ERR_NOMEM;
    json_t *cls = json_object();
    for (int c = 0; c < RV_KC_COUNT; c++) {
        if (!n[c])
            continue;
        double p = rv_power_demand_w(&pm, c);
        json_object_set_new(cls, rv_kname_class_name(c),
                            json_pack("{s:i, s:f, s:f, s:f}", "tasks_scaled", (json_int_t)n[c],
                                      "time_factor", factor[c], "clock_ratio",
                                      rv_power_clock(&pm, p, cap), "power_w",
                                      rv_power_kernel_w(&pm, c, cap)));
    }
    json_object_set_new(r, "classes", cls);
    return json_array_append_new(applied, r) ? RV_ERR_NOMEM : 0;
}
