/* The run result's warnings, accessors and destructor (rv_run_result.h). */
#include "run/rv_run_result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void rv_run_warn(rv_run_result *r, const char *code, const char *fmt, ...)
{
    va_list ap;

    if (r->nwarnings >= RV_RUN_MAX_WARNINGS) {
        r->sum.warnings++;
        return;
    }
    rv_warning *w = &r->warnings[r->nwarnings++];
    snprintf(w->code, sizeof(w->code), "%s", code);
    va_start(ap, fmt);
    vsnprintf(w->message, sizeof(w->message), fmt, ap);
    va_end(ap);
    r->sum.warnings++;
}

const rv_graph *rv_run_pred_graph(const rv_run_result *r)
{
    return r->pred_graph ? r->pred_graph : r->graph;
}

const rv_sim *rv_run_pred_sim(const rv_run_result *r)
{
    return r->pred_sim ? r->pred_sim : r->base;
}

void rv_run_result_free(rv_run_result *r)
{
    if (!r)
        return;
    json_decref(r->applied);
    json_decref(r->breakdown_base);
    json_decref(r->breakdown_pred);
    json_decref(r->top_kernels);
    json_decref(r->critical_path);
    json_decref(r->per_iteration);
    json_decref(r->metrics);
    rv_sim_free(r->pred_sim);
    rv_graph_free(r->pred_graph);
    free(r);
}
