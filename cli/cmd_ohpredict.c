/* `reverie overheads predict TRACE...`: the DLRM paper's experiment. Each
 * trace's host work is re-timed from (a) its own overhead statistics and
 * (b) the statistics of all the given traces pooled (the shared, per-platform
 * figures), simulated, and compared with its measured iteration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"
#include "rv_graph.h"
#include "rv_kineto.h"
#include "rv_report.h"
#include "rv_retime.h"
#include "rv_sim.h"

typedef struct item {
    const char *path;
    rv_trace *trace;
    rv_graph *graph;
    rv_sim *sim;
} item;

/* Predicted median iteration of g re-timed from tab. */
static int predict(const item *it, const rv_oh_table *tab, double *us, rv_error *err)
{
    rv_graph *c = rv_graph_clone(it->graph);
    rv_sim *s = NULL;
    json_t *applied = NULL;
    rv_iter_figures base, pred;
    int rc = c ? 0 : rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (!rc)
        rc = rv_retime_overheads(c, tab, &applied, err);
    if (!rc)
        rc = rv_sim_run(c, RV_SCHED_EARLIEST_START, &s, err);
    if (!rc)
        rc = rv_report_compare(it->graph, it->sim, c, s, RV_ITER_MEDIAN, &base, &pred, err);
    if (!rc)
        *us = pred.simulated_us;
    json_decref(applied);
    rv_sim_free(s);
    rv_graph_free(c);
    return rc;
}

int rv_cmd_overheads_predict(int argc, char **argv)
{
    int n = 0, status = 1;
    item *items = calloc((size_t)argc + 1, sizeof(*items));
    const rv_trace **traces = calloc((size_t)argc + 1, sizeof(const rv_trace *));
    rv_oh_table *shared = NULL;
    json_t *rows = json_array();
    rv_error err;
    rv_error_clear(&err);
    if (!items || !traces)
        goto out;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: reverie overheads predict TRACE...\n\n"
                   "Re-times each trace's host overheads (T1..T5) from its own statistics and\n"
                   "from the statistics of all given traces pooled (one platform's shared\n"
                   "figures), simulates both and reports the error against the measured step.\n");
            status = 0;
            goto out;
        }
        item *it = &items[n];
        it->path = argv[i];
        if (rv_cli_load_trace(it->path, &it->trace, &err) != 0 ||
            rv_graph_build(it->trace, NULL, &it->graph, &err) != 0 ||
            rv_sim_run(it->graph, RV_SCHED_EARLIEST_START, &it->sim, &err) != 0) {
            fprintf(stderr, "reverie: %s: %s\n", it->path, err.message);
            n++;
            goto out;
        }
        traces[n] = it->trace;
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "usage: reverie overheads predict TRACE...\n");
        status = 2;
        goto out;
    }
    if (rv_oh_table_from_traces(traces, (size_t)n, &shared, &err) != 0) {
        fprintf(stderr, "reverie: %s\n", err.message);
        goto out;
    }
    double sum_own = 0, sum_shared = 0;
    for (int i = 0; i < n; i++) {
        item *it = &items[i];
        rv_oh_table *own = NULL;
        double own_us = 0, shared_us = 0;
        rv_iter_figures base;
        if (rv_oh_table_from_traces(&traces[i], 1, &own, &err) != 0 ||
            rv_report_iteration(it->graph, it->sim, RV_ITER_MEDIAN, &base, &err) != 0 ||
            predict(it, own, &own_us, &err) != 0 || predict(it, shared, &shared_us, &err) != 0) {
            fprintf(stderr, "reverie: %s: %s\n", it->path, err.message);
            rv_oh_table_free(own);
            goto out;
        }
        rv_oh_table_free(own);
        double e_own = fabs(own_us - base.measured_us) / base.measured_us;
        double e_shared = fabs(shared_us - base.measured_us) / base.measured_us;
        sum_own += e_own;
        sum_shared += e_shared;
        json_array_append_new(
            rows, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "trace", it->path,
                            "platform", rv_trace_str(it->trace, it->trace->platform_gpu),
                            "measured_us", base.measured_us, "baseline_us", base.simulated_us,
                            "own_overheads_us", own_us, "own_error", e_own, "shared_overheads_us",
                            shared_us, "shared_error", e_shared));
    }
    json_t *outj = json_pack("{s:o, s:f, s:f, s:f}", "traces", rows, "mean_error_own", sum_own / n,
                             "mean_error_shared", sum_shared / n, "shared_minus_own_points",
                             100 * (sum_shared - sum_own) / n);
    rows = NULL;
    json_dumpf(outj, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    fputc('\n', stdout);
    json_decref(outj);
    status = 0;
out:
    json_decref(rows);
    rv_oh_table_free(shared);
    for (int i = 0; items && i < n; i++) {
        rv_sim_free(items[i].sim);
        rv_graph_free(items[i].graph);
        rv_trace_free(items[i].trace);
    }
    free(items);
    free(traces);
    return status;
}
