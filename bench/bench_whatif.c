/* Warm what-if benchmark, the engine half of bench/whatif_latency.sh:
 * bench_whatif TRACE [RUNS] [OUT]
 *
 * Reads the trace, builds the graph, simulates the baseline and makes its
 * rv_run_prep once, as the server's graph cache does; then runs RUNS
 * what-ifs with a power cap not asked before (150.00..249.99 W), each
 * parsed, run and rendered as the API answers it, and prints their p50
 * and p95 in ms as one JSON line. With OUT, the answers go there, one a
 * line, so two builds can be compared byte for byte. The allocator is
 * set as reveried sets it (freed arrays stay on the heap). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "util/rv_sort.h"
#include "whatif/rv_whatif.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One what-if with cap watts: parse, run, render. 0 or a negative rv_err. */
static int one(const rv_graph *g, const rv_sim *base, const rv_run_prep *prep, double watts,
               FILE *out, rv_error *err)
{
    char doc[64];
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN, .prep = prep};
    size_t len = 0;
    char *text = NULL;
    int rc;

    snprintf(doc, sizeof(doc), "{\"power_limit_w\":%.2f}", watts);
    if ((rc = rv_whatif_parse_text(doc, &w, err)) != 0)
        goto out;
    if ((rc = rv_run(g, base, w, &o, &res, err)) != 0)
        goto out;
    text = rv_run_render_bytes(res, 1, &len);
    if (!text) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    if (out)
        fprintf(out, "%s\n", text);
out:
    free(text);
    rv_run_result_free(res);
    rv_whatif_free(w);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_whatif TRACE [RUNS] [OUT]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 50;
    FILE *out = argc > 3 ? fopen(argv[3], "w") : NULL;
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_sim *base = NULL;
    rv_run_prep *prep = NULL;
    double *ms = NULL;
    rv_error err;
    int rc = 1;

    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
    rv_error_clear(&err);
    if (runs < 1 || (argc > 3 && !out) || !(ms = malloc((size_t)runs * sizeof(*ms)))) {
        fprintf(stderr, "bench_whatif: bad RUNS or OUT\n");
        goto out;
    }
    if (rv_kineto_read_file(argv[1], NULL, &t, &err) != 0 ||
        rv_graph_build(t, NULL, &g, &err) != 0 ||
        rv_sim_run(g, RV_SCHED_EARLIEST_START, &base, &err) != 0 ||
        rv_run_prep_new(g, base, RV_ITER_MEDIAN, &prep, &err) != 0 ||
        one(g, base, prep, 299.99, NULL, &err) != 0) {
        fprintf(stderr, "bench_whatif: %s\n", err.message);
        goto out;
    }
    for (int k = 0; k < runs; k++) {
        double a = now_ms();
        if (one(g, base, prep, 150 + 100.0 * k / runs, out, &err) != 0) {
            fprintf(stderr, "bench_whatif: %s\n", err.message);
            goto out;
        }
        ms[k] = now_ms() - a;
    }
    rv_sort_doubles(ms, (size_t)runs);
    printf("{\"file\":\"%s\",\"tasks\":%zu,\"runs\":%d,\"p50_ms\":%.2f,\"p95_ms\":%.2f}\n", argv[1],
           g->ntasks, runs, ms[runs / 2], ms[(runs * 95) / 100]);
    rc = 0;
out:
    if (out)
        fclose(out);
    free(ms);
    rv_run_prep_free(prep);
    rv_sim_free(base);
    rv_graph_free(g);
    rv_trace_free(t);
    return rc;
}
