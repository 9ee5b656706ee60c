/* `reverie advise TRACE... [--objective time|energy|cost] [--budget-s N]
 *                       [--gpus N] [--price-per-gpu-hour USD]
 *                       [--max-memory BYTES] [--compact]`
 *
 * Searches the what-ifs whose preconditions hold on the trace for the
 * plans that serve the objective best (engine/advise/rv_advise.h) and
 * prints them ranked, each with its what-if document: `reverie simulate
 * TRACE --whatif DOC` of a candidate's "whatif" gives its figures. Several
 * traces are the ranks of one training job (rv_advise_job): each plan is
 * a job what-if, as `reverie simulate RANK0 RANK1 ... --whatif DOC`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "advise/rv_advise.h"
#include "cli_args.h"
#include "graph/rv_graph.h"
#include "job/rv_job.h"
#include "rv_cli.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie advise TRACE... [--objective time|energy|cost] [--budget-s N]\n"
               "                      [--gpus N] [--price-per-gpu-hour USD]\n"
               "                      [--max-memory BYTES] [--compact]\n"
               "  --objective   what the plans are ranked by: time per sample (default),\n"
               "                GPU energy per sample, or GPU-hours x price per sample\n"
               "  --gpus        GPUs a plan may use: data-parallel workers up to N,\n"
               "                tensor and pipeline degrees dividing N (default: the\n"
               "                trace's own)\n"
               "  --price-per-gpu-hour  USD for the cost objective (default 2.00, an\n"
               "                assumption: the hardware table has no prices)\n"
               "  --budget-s    wall time for the search (default 60); a search cut short\n"
               "                answers with what it found and says so\n"
               "  --max-memory  bytes a plan may peak at (default: the GPU's memory)\n"
               "  --compact     one line of JSON\n"
               "Several traces are the ranks of one job (their distributedInfo names one\n"
               "world size and distinct ranks); each plan is then a job what-if.\n"
               "Each candidate's \"whatif\" is a what-if document: reverie simulate TRACE...\n"
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

/* The traces loaded for advise: one, or the ranks of a job. */
typedef struct loaded {
    size_t n;
    rv_trace **tr;
    rv_graph **g;
    rv_sim **bs;
    rv_job_rank *rk;
    rv_job *job;
} loaded;

static void loaded_free(loaded *l)
{
    rv_job_free(l->job);
    for (size_t i = 0; l->tr && l->g && l->bs && i < l->n; i++) {
        rv_sim_free(l->bs[i]);
        rv_graph_free(l->g[i]);
        rv_trace_free(l->tr[i]);
    }
    free(l->tr);
    free(l->g);
    free(l->bs);
    free(l->rk);
}

/* Loads paths (n >= 1) and, for several, builds their job. 0, 2 (not one
 * job: said), or 1 (said). */
static int load_all(const char *const *paths, size_t n, loaded *l)
{
    rv_error err;
    rv_error_clear(&err);
    l->n = n;
    l->tr = calloc(n, sizeof(rv_trace *));
    l->g = calloc(n, sizeof(rv_graph *));
    l->bs = calloc(n, sizeof(rv_sim *));
    l->rk = calloc(n, sizeof(rv_job_rank));
    if (!l->tr || !l->g || !l->bs || !l->rk) {
        fprintf(stderr, "reverie advise: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (rv_cli_load_trace(paths[i], &l->tr[i], &err) != 0 ||
            rv_graph_build(l->tr[i], NULL, &l->g[i], &err) != 0 ||
            rv_sim_run(l->g[i], RV_SCHED_EARLIEST_START, &l->bs[i], &err) != 0) {
            fprintf(stderr, "reverie advise: %s: %s\n", paths[i],
                    err.message[0] ? err.message : rv_err_name(err.code));
            return 1;
        }
        l->rk[i] = (rv_job_rank){l->g[i], l->bs[i], -1, -1, paths[i]};
    }
    if (n == 1)
        return 0;
    if (!rv_job_graphs_form_job((const rv_graph *const *)l->g, n)) {
        fprintf(stderr,
                "reverie advise: these %zu traces do not name one job (distributedInfo "
                "with one world size and distinct ranks)\n",
                n);
        return 2;
    }
    rv_job *job = NULL;
    if (rv_job_build(l->rk, n, &job, &err) != 0) {
        fprintf(stderr, "reverie advise: job: %s\n", err.message);
        return 1;
    }
    l->job = job;
    return 0;
}

/* Reads the options into *o and the traces into paths (*n of them);
 * -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, rv_advise_opts *o, int *compact, const char **paths,
                      size_t *n)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (i + 1 < argc && strcmp(a, "--objective") == 0) {
            o->objective = rv_advise_objective_parse(argv[++i]);
            if (o->objective < 0) {
                fprintf(stderr,
                        "reverie advise: --objective wants time, energy or cost, not '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (i + 1 < argc && strcmp(a, "--budget-s") == 0) {
            o->budget_s = positive(argv[++i]);
            if (o->budget_s <= 0 || o->budget_s > 3600) {
                fprintf(stderr, "reverie advise: --budget-s wants seconds in (0, 3600]\n");
                return 2;
            }
        } else if (i + 1 < argc && strcmp(a, "--max-memory") == 0) {
            double m = positive(argv[++i]);
            if (m < 1 || m > 9.2e18) {
                fprintf(stderr, "reverie advise: --max-memory wants a positive byte count\n");
                return 2;
            }
            o->max_memory = (int64_t)m;
        } else if (i + 1 < argc && strcmp(a, "--gpus") == 0) {
            double g = positive(argv[++i]);
            if (g < 1 || g > 65536 || g != (int)g) {
                fprintf(stderr, "reverie advise: --gpus wants an integer in [1, 65536]\n");
                return 2;
            }
            o->gpus = (int)g;
        } else if (i + 1 < argc && strcmp(a, "--price-per-gpu-hour") == 0) {
            o->price_per_gpu_hour = positive(argv[++i]);
            if (o->price_per_gpu_hour <= 0 || o->price_per_gpu_hour > 1e6) {
                fprintf(stderr, "reverie advise: --price-per-gpu-hour wants USD in (0, 1e6]\n");
                return 2;
            }
        } else if (strcmp(a, "--compact") == 0) {
            *compact = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "reverie: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        } else {
            paths[(*n)++] = a;
        }
    }
    if (*n == 0) {
        usage(stderr);
        return 2;
    }
    return -1;
}

int rv_cmd_advise(int argc, char **argv)
{
    rv_advise_opts o = {0};
    int compact = 0, rc;
    size_t n = 0;
    const char **paths = calloc((size_t)argc, sizeof(*paths));
    loaded l = {0};
    json_t *ans = NULL;
    rv_error err;

    rv_error_clear(&err);
    if (!paths) {
        fprintf(stderr, "reverie advise: out of memory\n");
        return 1;
    }
    if ((rc = parse_args(argc, argv, &o, &compact, paths, &n)) >= 0)
        goto out;
    if ((rc = load_all(paths, n, &l)) != 0)
        goto out;
    rc = l.job ? rv_advise_job(l.job, l.g[0], l.bs[0], &o, &ans, &err)
               : rv_advise(l.g[0], l.bs[0], &o, &ans, &err);
    if (rc != 0) {
        fprintf(stderr, "reverie advise: %s: %s\n", n > 1 ? "job" : paths[0],
                err.message[0] ? err.message : rv_err_name(err.code));
        rc = 1;
        goto out;
    }
    json_t *names = json_array();
    for (size_t i = 0; names && i < n; i++)
        json_array_append_new(names, json_string(paths[i]));
    json_object_set_new(ans, n > 1 ? "traces" : "trace", n > 1 ? names : json_string(paths[0]));
    if (n == 1)
        json_decref(names);
    rc = rv_run_dump(ans, stdout, !compact) == 0 ? 0 : 1;
out:
    json_decref(ans);
    loaded_free(&l);
    free(paths);
    return rc;
}
