/* `reverie simulate RANK0 RANK1 ... [--whatif DOC] [--job]`: several
 * traces of one distributed job answered as one job (engine/rv_job.h):
 * the ranks' graphs joined by their collectives, clocks aligned,
 * stragglers named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"
#include "graph/rv_graph.h"
#include "job/rv_job.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"

/* A job answer (borrowed) as a table for people. */
static void print_job_table(const json_t *out)
{
    const json_t *ranks = json_object_get(out, "ranks");
    const json_t *strag = json_object_get(out, "stragglers");
    const json_t *warnings = json_object_get(out, "warnings");
    printf("%-16s %lld of %lld ranks\n", "job",
           (long long)json_integer_value(json_object_get(out, "ranks_present")),
           (long long)json_integer_value(json_object_get(out, "world_size")));
    printf("%-16s %10.2f ms\n", "measured",
           json_number_value(json_object_get(out, "measured_us")) / 1e3);
    printf("%-16s %10.2f ms (worst rank's replay error %.1f%%)\n", "simulated",
           json_number_value(json_object_get(out, "baseline_us")) / 1e3,
           100 * json_number_value(json_object_get(out, "replay_error")));
    printf("%-16s %10.2f ms\n", "predicted",
           json_number_value(json_object_get(out, "predicted_us")) / 1e3);
    printf("%-16s %10.3fx\n", "speedup", json_number_value(json_object_get(out, "speedup")));
    printf("\n  %4s %10s %10s %10s %10s %10s\n", "rank", "measured", "replay", "predicted", "wait",
           "transfer");
    for (size_t i = 0; i < json_array_size(ranks); i++) {
        const json_t *r = json_array_get(ranks, i);
        printf("  %4lld %10.2f %10.2f %10.2f %10.2f %10.2f\n",
               (long long)json_integer_value(json_object_get(r, "rank")),
               json_number_value(json_object_get(r, "measured_us")) / 1e3,
               json_number_value(json_object_get(r, "baseline_us")) / 1e3,
               json_number_value(json_object_get(r, "predicted_us")) / 1e3,
               json_number_value(json_object_get(r, "wait_us")) / 1e3,
               json_number_value(json_object_get(r, "transfer_us")) / 1e3);
    }
    printf("  (ms per step)\n\nstragglers\n");
    for (size_t i = 0; i < json_array_size(strag); i++) {
        const json_t *s = json_array_get(strag, i);
        printf("  rank %-4lld held the others %.2f ms\n",
               (long long)json_integer_value(json_object_get(s, "rank")),
               json_number_value(json_object_get(s, "delay_us")) / 1e3);
    }
    printf("\nwarnings (%zu)\n", json_array_size(warnings));
    for (size_t i = 0; i < json_array_size(warnings); i++) {
        const json_t *w = json_array_get(warnings, i);
        printf("  %-22s %s\n", json_string_value(json_object_get(w, "code")),
               json_string_value(json_object_get(w, "message")));
    }
}

int rv_cli_simulate_job(const char *const *paths, size_t n, const rv_whatif *w,
                        const rv_run_opts *opts, int force, int compact, int table)
{
    int status = 1;
    rv_trace **tr = calloc(n, sizeof(rv_trace *));
    rv_graph **g = calloc(n, sizeof(rv_graph *));
    rv_sim **bs = calloc(n, sizeof(rv_sim *));
    rv_job_rank *rk = calloc(n, sizeof(*rk));
    rv_job *job = NULL;
    rv_job_result *res = NULL;
    json_t *out = NULL;
    rv_error err;
    rv_error_clear(&err);
    if (!tr || !g || !bs || !rk) {
        fprintf(stderr, "reverie: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (rv_cli_load_trace(paths[i], &tr[i], &err) != 0 ||
            rv_graph_build(tr[i], NULL, &g[i], &err) != 0 ||
            rv_sim_run(g[i], RV_SCHED_EARLIEST_START, &bs[i], &err) != 0) {
            fprintf(stderr, "reverie: %s: %s\n", paths[i], err.message);
            goto out;
        }
        rk[i] = (rv_job_rank){g[i], bs[i], -1, -1, paths[i]};
    }
    if (!force && !rv_job_graphs_form_job((const rv_graph *const *)g, n)) {
        fprintf(stderr,
                "reverie: these %zu traces do not name one job (distributedInfo with "
                "one world size and distinct ranks); pass --job to simulate them as "
                "one, ranks in the order given\n",
                n);
        status = 2;
        goto out;
    }
    if (rv_job_build(rk, n, &job, &err) != 0 || rv_job_run(job, w, opts, &res, &err) != 0) {
        fprintf(stderr, "reverie: job: %s%s%s\n", err.message, err.field[0] ? " (field " : "",
                err.field[0] ? err.field : "");
        if (err.field[0])
            fputs(")\n", stderr);
        goto out;
    }
    out = rv_job_render(res, NULL);
    if (!out) {
        fprintf(stderr, "reverie: out of memory\n");
        goto out;
    }
    if (table)
        print_job_table(out);
    else if (rv_run_dump(out, stdout, !compact) != 0)
        goto out;
    status = 0;
out:
    json_decref(out);
    rv_job_result_free(res);
    rv_job_free(job);
    for (size_t i = 0; i < n; i++) {
        if (bs)
            rv_sim_free(bs[i]);
        if (g)
            rv_graph_free(g[i]);
        if (tr)
            rv_trace_free(tr[i]);
    }
    free(tr);
    free(g);
    free(bs);
    free(rk);
    return status;
}
