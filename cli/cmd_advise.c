/* `reverie advise TRACE [--objective time|energy|cost] [--budget-s N]
 *                       [--gpus N] [--price-per-gpu-hour USD]
 *                       [--max-memory BYTES] [--compact]`
 *
 * Searches the what-ifs whose preconditions hold on the trace for the
 * plans that serve the objective best (engine/advise/rv_advise.h) and
 * prints them ranked, each with its what-if document: `reverie simulate
 * TRACE --whatif DOC` of a candidate's "whatif" gives its figures. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "advise/rv_advise.h"
#include "cli_args.h"
#include "graph/rv_graph.h"
#include "rv_cli.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie advise TRACE [--objective time|energy|cost] [--budget-s N]\n"
               "                      [--gpus N] [--price-per-gpu-hour USD]\n"
               "                      [--max-memory BYTES] [--compact]\n"
               "  --objective   what the plans are ranked by: time per sample (default),\n"
               "                GPU energy per sample, or GPU-hours x price per sample\n"
               "  --gpus        GPUs a plan may use: data-parallel workers up to N\n"
               "                (default: the trace's own)\n"
               "  --price-per-gpu-hour  USD for the cost objective (default 2.00, an\n"
               "                assumption: the hardware table has no prices)\n"
               "  --budget-s    wall time for the search (default 60); a search cut short\n"
               "                answers with what it found and says so\n"
               "  --max-memory  bytes a plan may peak at (default: the GPU's memory)\n"
               "  --compact     one line of JSON\n"
               "Each candidate's \"whatif\" is a what-if document: reverie simulate TRACE\n"
               "--whatif DOC reproduces its figures. See docs/advise.md.\n");
}

/* A positive number from text; -1 when it is not one. */
static double positive(const char *v)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    return *v && !*end && !errno && d > 0 ? d : -1;
}

int rv_cmd_advise(int argc, char **argv)
{
    const char *path = NULL;
    rv_advise_opts o = {0};
    int compact = 0, rc = 1;
    rv_error err;
    rv_trace *tr = NULL;
    rv_graph *g = NULL;
    rv_sim *bs = NULL;
    json_t *ans = NULL;

    rv_error_clear(&err);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (i + 1 < argc && strcmp(a, "--objective") == 0) {
            o.objective = rv_advise_objective_parse(argv[++i]);
            if (o.objective < 0) {
                fprintf(stderr,
                        "reverie advise: --objective wants time, energy or cost, not '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (i + 1 < argc && strcmp(a, "--budget-s") == 0) {
            o.budget_s = positive(argv[++i]);
            if (o.budget_s <= 0 || o.budget_s > 3600) {
                fprintf(stderr, "reverie advise: --budget-s wants seconds in (0, 3600]\n");
                return 2;
            }
        } else if (i + 1 < argc && strcmp(a, "--max-memory") == 0) {
            double m = positive(argv[++i]);
            if (m < 1 || m > 9.2e18) {
                fprintf(stderr, "reverie advise: --max-memory wants a positive byte count\n");
                return 2;
            }
            o.max_memory = (int64_t)m;
        } else if (i + 1 < argc && strcmp(a, "--gpus") == 0) {
            double n = positive(argv[++i]);
            if (n < 1 || n > 65536 || n != (int)n) {
                fprintf(stderr, "reverie advise: --gpus wants an integer in [1, 65536]\n");
                return 2;
            }
            o.gpus = (int)n;
        } else if (i + 1 < argc && strcmp(a, "--price-per-gpu-hour") == 0) {
            o.price_per_gpu_hour = positive(argv[++i]);
            if (o.price_per_gpu_hour <= 0 || o.price_per_gpu_hour > 1e6) {
                fprintf(stderr, "reverie advise: --price-per-gpu-hour wants USD in (0, 1e6]\n");
                return 2;
            }
        } else if (strcmp(a, "--compact") == 0) {
            compact = 1;
        } else if (rv_cli_trace_arg(a, &path, usage) != 0) {
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    if (rv_cli_load_trace(path, &tr, &err) != 0 || rv_graph_build(tr, NULL, &g, &err) != 0 ||
        rv_sim_run(g, RV_SCHED_EARLIEST_START, &bs, &err) != 0 ||
        rv_advise(g, bs, &o, &ans, &err) != 0) {
        fprintf(stderr, "reverie advise: %s: %s\n", path,
                err.message[0] ? err.message : rv_err_name(err.code));
        goto out;
    }
    json_object_set_new(ans, "trace", json_string(path));
    rc = rv_run_dump(ans, stdout, !compact) == 0 ? 0 : 1;
out:
    json_decref(ans);
    rv_sim_free(bs);
    rv_graph_free(g);
    rv_trace_free(tr);
    return rc;
}
