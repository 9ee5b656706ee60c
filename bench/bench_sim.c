/* Simulator and what-if benchmark: bench_sim TRACE [RUNS] [WHATIF_JSON]
 *
 * Reads the trace once, then times graph building, the baseline simulation
 * (tasks/s), and a what-if end to end after parsing (clone, apply, simulate,
 * iteration figures, breakdown). Prints one JSON line. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"
#include "run/rv_run.h"
#include "whatif/rv_whatif.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_sim TRACE [RUNS] [WHATIF_JSON]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 20;
    const char *doc = argc > 3 ? argv[3]
                               : "{\"optimizations\":[{\"kind\":\"scale\",\"select\":"
                                 "{\"kind\":\"kernel\"},\"factor\":0.5}]}";
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_whatif *w = NULL;
    rv_error err;
    rv_error_clear(&err);
    double t0 = now_s();
    if (rv_kineto_read_file(argv[1], NULL, &t, &err) != 0) {
        fprintf(stderr, "bench_sim: %s\n", err.message);
        return 1;
    }
    double t1 = now_s();
    if (rv_graph_build(t, NULL, &g, &err) != 0) {
        fprintf(stderr, "bench_sim: %s\n", err.message);
        return 1;
    }
    double t2 = now_s();
    double sim_best = 1e9;
    for (int i = 0; i < runs; i++) {
        rv_sim *s = NULL;
        double a = now_s();
        if (rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &err) != 0) {
            fprintf(stderr, "bench_sim: %s\n", err.message);
            return 1;
        }
        double b = now_s() - a;
        if (b < sim_best)
            sim_best = b;
        rv_sim_free(s);
    }
    if (rv_whatif_parse_text(doc, &w, &err) != 0) {
        fprintf(stderr, "bench_sim: what-if: %s\n", err.message);
        return 1;
    }
    rv_sim *bs = NULL;
    rv_sim_run(g, RV_SCHED_EARLIEST_START, &bs, &err);
    double wi_best = 1e9;
    for (int i = 0; i < runs; i++) {
        double a = now_s();
        rv_run_result *res = NULL;
        rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
        if (rv_run(g, bs, w, &opts, &res, &err) != 0) {
            fprintf(stderr, "bench_sim: what-if failed: %s\n", err.message);
            return 1;
        }
        double b = now_s() - a;
        if (b < wi_best)
            wi_best = b;
        rv_run_result_free(res);
    }
    printf("{\"file\":\"%s\",\"tasks\":%zu,\"edges\":%zu,\"parse_ms\":%.1f,\"build_ms\":%.1f,"
           "\"sim_ms\":%.2f,\"sim_tasks_per_s\":%.0f,\"whatif_ms\":%.2f}\n",
           argv[1], g->ntasks, g->nedges, (t1 - t0) * 1e3, (t2 - t1) * 1e3, sim_best * 1e3,
           (double)g->ntasks / sim_best, wi_best * 1e3);
    rv_sim_free(bs);
    rv_whatif_free(w);
    rv_graph_free(g);
    rv_trace_free(t);
    return 0;
}
