/* `reverie diff A B [--top N]` and `reverie diff A --whatif DOC [--top N]`
 *
 * Compares two traces, or a trace's baseline with its prediction under a
 * what-if, per iteration: by CPU op, kernel class and kernel name (counts,
 * time, what appeared or vanished), ordered by |delta time|. Prints one JSON
 * object (engine/rv_diff.h); errors go to stderr with a non-zero exit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"
#include "export/rv_diff.h"
#include "graph/rv_graph.h"
#include "simulate/rv_report.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: reverie diff A B [--top N] [--compact]\n"
            "       reverie diff A --whatif JSON|@FILE [--top N] [--compact]\n"
            "\n"
            "A and B are Kineto / PyTorch profiler traces (.json or .json.gz) or snapshots.\n"
            "With --whatif, A's baseline is compared with its prediction under the what-if.\n"
            "Figures are per iteration (the median steps' window); rows are ordered by\n"
            "|delta time|.\n"
            "--top      rows per table (ops, kernels; default %d, at most %d)\n"
            "--compact  one line of JSON\n",
            RV_DIFF_TOP_DEFAULT, RV_DIFF_TOP_MAX);
}

static void print_error(const char *what, const rv_error *e)
{
    fprintf(stderr, "reverie: %s: %s", what, e->message[0] ? e->message : rv_err_name(e->code));
    if (e->field[0])
        fprintf(stderr, " (field %s)", e->field);
    if (e->event_index >= 0)
        fprintf(stderr, " [event %" PRId64 "]", e->event_index);
    fputc('\n', stderr);
}

/* One loaded trace: trace, graph, baseline simulation. */
typedef struct loaded {
    rv_trace *tr;
    rv_graph *g;
    rv_sim *s;
} loaded;

static void loaded_free(loaded *l)
{
    rv_sim_free(l->s);
    rv_graph_free(l->g);
    rv_trace_free(l->tr);
}

static int load(const char *path, loaded *l)
{
    rv_error err;
    rv_error_clear(&err);
    if (rv_cli_load_trace(path, &l->tr, &err) != 0 ||
        rv_graph_build(l->tr, NULL, &l->g, &err) != 0 ||
        rv_sim_run(l->g, RV_SCHED_EARLIEST_START, &l->s, &err) != 0) {
        print_error(path, &err);
        return -1;
    }
    return 0;
}

int rv_cmd_diff(int argc, char **argv)
{
    const char *paths[2] = {NULL, NULL}, *whatif_text = NULL;
    int top = RV_DIFF_TOP_DEFAULT, compact = 0, npaths = 0, status = 1;
    loaded la = {0}, lb = {0};
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;
    rv_diff *d = NULL;
    json_t *out = NULL;
    rv_diff_side sa, sb;
    rv_error err;
    rv_error_clear(&err);
    memset(&sa, 0, sizeof(sa));
    memset(&sb, 0, sizeof(sb));

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--compact") == 0) {
            compact = 1;
        } else if (i + 1 < argc && strcmp(a, "--whatif") == 0) {
            whatif_text = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--top") == 0) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > RV_DIFF_TOP_MAX) {
                fprintf(stderr, "reverie: --top wants 1..%d\n", RV_DIFF_TOP_MAX);
                return 2;
            }
            top = (int)v;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "reverie: unknown or incomplete option %s\n", a);
            usage(stderr);
            return 2;
        } else if (npaths < 2) {
            paths[npaths++] = a;
        } else {
            fprintf(stderr, "reverie: diff takes two traces, or one and --whatif\n");
            return 2;
        }
    }
    if (npaths != (whatif_text ? 1 : 2)) {
        usage(stderr);
        return 2;
    }
    if (whatif_text && rv_whatif_parse_text(whatif_text, &w, &err) != 0) {
        print_error("bad what-if document", &err);
        return 2;
    }
    if (load(paths[0], &la) != 0)
        goto out;
    if (whatif_text) {
        rv_run_opts opts = {.iteration = RV_ITER_MEDIAN, .keep_predicted = 1};
        if (rv_run(la.g, la.s, w, &opts, &res, &err) != 0) {
            print_error("what-if failed", &err);
            goto out;
        }
        rv_diff_sides_of_run(res, &sa, &sb);
    } else {
        if (load(paths[1], &lb) != 0)
            goto out;
        if (rv_diff_side_baseline(la.g, la.s, &sa, &err) != 0) {
            print_error(paths[0], &err);
            goto out;
        }
        if (rv_diff_side_baseline(lb.g, lb.s, &sb, &err) != 0) {
            print_error(paths[1], &err);
            goto out;
        }
    }
    if (rv_diff_compute(&sa, &sb, &d, &err) != 0) {
        print_error("diff failed", &err);
        goto out;
    }
    out = rv_diff_render(d, top, paths[0], whatif_text ? "what-if" : paths[1], res);
    if (!out) {
        fprintf(stderr, "reverie: out of memory\n");
        goto out;
    }
    if (rv_run_dump(out, stdout, !compact) != 0)
        goto out;
    status = 0;
out:
    json_decref(out);
    rv_diff_free(d);
    rv_run_result_free(res);
    rv_whatif_free(w);
    loaded_free(&lb);
    loaded_free(&la);
    return status;
}
