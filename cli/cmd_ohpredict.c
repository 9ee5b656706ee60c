/* `reverie overheads predict TRACE...`: the DLRM paper's experiment. Each
 * trace's host work is re-timed from (a) its own overhead statistics and
 * (b) the statistics of all the given traces pooled (the shared, per-platform
 * figures), simulated, and compared with its measured iteration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"
#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "graph/rv_retime.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"

typedef struct item {
    const char *path;
    rv_trace *trace;
    rv_graph *graph;
    rv_sim *sim;
} item;

/* The run of it with its host work re-timed from tab: the what-if
 * {"host_overheads": "platform"} with tab as the platform's statistics.
 * *res is new (rv_run_result_free). */
static int predict(const item *it, const rv_oh_table *tab, rv_run_result **res, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    int rc = rv_whatif_parse_text("{\"host_overheads\": \"platform\"}", &w, err);
    if (!rc) {
        rv_whatif_set_overheads(w, tab);
        rc = rv_run(it->graph, it->sim, w, &opts, res, err);
    }
    rv_whatif_free(w);
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
        rv_run_result *r_own = NULL, *r_shared = NULL;
        if (rv_oh_table_from_traces(&traces[i], 1, &own, &err) != 0 ||
            predict(it, own, &r_own, &err) != 0 || predict(it, shared, &r_shared, &err) != 0) {
            fprintf(stderr, "reverie: %s: %s\n", it->path, err.message);
            rv_oh_table_free(own);
            rv_run_result_free(r_own);
            goto out;
        }
        rv_oh_table_free(own);
        double measured_us = r_own->sum.measured_us, baseline_us = r_own->sum.baseline_us;
        double own_us = r_own->sum.predicted_us, shared_us = r_shared->sum.predicted_us;
        /* What the pooled prediction rests on, as every answer says. */
        json_t *warnings = rv_run_warnings_json(r_shared);
        rv_run_result_free(r_own);
        rv_run_result_free(r_shared);
        double e_own = fabs(own_us - measured_us) / measured_us;
        double e_shared = fabs(shared_us - measured_us) / measured_us;
        sum_own += e_own;
        sum_shared += e_shared;
        json_array_append_new(
            rows, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:o*}", "trace", it->path,
                            "platform", rv_trace_str(it->trace, it->trace->platform_gpu),
                            "measured_us", measured_us, "baseline_us", baseline_us,
                            "own_overheads_us", own_us, "own_error", e_own, "shared_overheads_us",
                            shared_us, "shared_error", e_shared, "warnings", warnings));
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
