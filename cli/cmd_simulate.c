/* `reverie simulate TRACE [--iteration N|median] [--whatif JSON|@FILE]
 *                         [--timeline OUT.json] [--top K]`
 *
 * Prints one JSON object: measured, simulated and predicted iteration time,
 * replay error, breakdowns, top kernels, critical path, what the what-if
 * changed. Errors go to stderr with a non-zero exit. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "rv_cli.h"
#include "rv_graph.h"
#include "rv_kineto.h"
#include "rv_report.h"
#include "rv_retime.h"
#include "rv_sim.h"
#include "rv_whatif.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie simulate TRACE [--iteration N|median] [--whatif JSON|@FILE]\n"
               "                         [--timeline OUT.json] [--predicted-timeline OUT.json]\n"
               "                         [--top K] [--compact]\n"
               "\n"
               "TRACE is a Kineto / PyTorch profiler trace (.json or .json.gz).\n"
               "--iteration   report step N (ProfilerStep#N) or the median step (default)\n"
               "--whatif      a what-if request document (see docs/whatif.md)\n"
               "--timeline    write the simulated baseline as Chrome-trace JSON (Perfetto)\n"
               "--predicted-timeline  the same for the what-if prediction\n"
               "--top         number of top kernels to list (default 10)\n"
               "--overheads-from TRACE  (repeatable) pool these traces' host overheads as\n"
               "              the platform statistics for \"host_overheads\": \"platform\"\n");
}

static void print_error(const char *what, const rv_error *e)
{
    fprintf(stderr, "reverie: %s: %s", what, e->message[0] ? e->message : rv_err_name(e->code));
    if (e->field[0])
        fprintf(stderr, " (field %s)", e->field);
    if (e->event_index >= 0)
        fprintf(stderr, " [event %" PRId64 "]", e->event_index);
    if (e->offset >= 0)
        fprintf(stderr, " [byte %" PRId64 "]", e->offset);
    fputc('\n', stderr);
}

/* The baseline's reports only read the baseline graph and simulation, so
 * they run on a second thread while the what-if is applied and simulated. */
typedef struct base_reports {
    const rv_graph *g;
    const rv_sim *s;
    rv_window w;
    rv_energy energy;
    int have_energy;
    json_t *breakdown, *per_iteration;
} base_reports;

static void *base_reports_run(void *arg)
{
    base_reports *b = arg;
    b->have_energy = rv_whatif_energy(NULL, b->g, b->s, b->w.t0_ns, b->w.t1_ns, &b->energy) == 0;
    b->breakdown = rv_report_breakdown(b->g, b->s, &b->w);
    b->per_iteration = rv_report_iterations(b->g, b->s);
    return NULL;
}

static int write_timeline(const char *path, const rv_graph *g, const rv_sim *s, const rv_window *w)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "reverie: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = rv_report_timeline_chrome(g, s, w, f);
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "reverie: writing %s failed\n", path);
        return -1;
    }
    return 0;
}

int rv_cmd_simulate(int argc, char **argv)
{
    const char *path = NULL, *whatif_text = NULL, *timeline = NULL, *ptimeline = NULL;
    int64_t iteration = RV_ITER_MEDIAN;
    int top = 10, compact = 0, status = 1;
    base_reports br;
    pthread_t br_thread;
    int br_started = 0;
    memset(&br, 0, sizeof(br));
    enum { MAX_OH = 256 };
    const char *oh_paths[MAX_OH];
    rv_trace *oh_traces[MAX_OH] = {0};
    int n_oh = 0;
    rv_oh_table *oh_table = NULL;
    rv_trace *tr = NULL;
    rv_graph *g = NULL, *pg = NULL;
    rv_sim *bs = NULL, *ps = NULL;
    rv_whatif *w = NULL;
    json_t *out = NULL, *applied = NULL;
    rv_error err;
    rv_error_clear(&err);

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--compact") == 0) {
            compact = 1;
        } else if (i + 1 < argc && strcmp(a, "--iteration") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "median") == 0) {
                iteration = RV_ITER_MEDIAN;
            } else {
                char *end;
                iteration = strtoll(v, &end, 10);
                if (*end || end == v || iteration < 0) {
                    fprintf(stderr, "reverie: --iteration wants a step number or 'median'\n");
                    return 2;
                }
            }
        } else if (i + 1 < argc && strcmp(a, "--whatif") == 0) {
            whatif_text = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--timeline") == 0) {
            timeline = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--predicted-timeline") == 0) {
            ptimeline = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--overheads-from") == 0) {
            if (n_oh == MAX_OH) {
                fprintf(stderr, "reverie: at most %d --overheads-from traces\n", MAX_OH);
                return 2;
            }
            oh_paths[n_oh++] = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--top") == 0) {
            top = atoi(argv[++i]);
            if (top < 0 || top > 10000)
                top = 10;
        } else if (rv_cli_trace_arg(a, &path, usage) != 0) {
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    if (whatif_text && rv_whatif_parse_text(whatif_text, &w, &err) != 0) {
        print_error("bad what-if document", &err);
        return 2;
    }
    if (rv_cli_load_trace(path, &tr, &err) != 0) {
        print_error(path, &err);
        goto out;
    }
    if (rv_graph_build(tr, NULL, &g, &err) != 0) {
        print_error(path, &err);
        goto out;
    }
    if (rv_sim_run(g, RV_SCHED_EARLIEST_START, &bs, &err) != 0) {
        print_error("simulation failed", &err);
        goto out;
    }
    rv_iter_figures base;
    if (rv_report_iteration(g, bs, iteration, &base, &err) != 0) {
        print_error(path, &err);
        goto out;
    }
    rv_window bw = rv_report_window(g, bs, base.iter);
    br.g = g;
    br.s = bs;
    br.w = bw;
    /* jansson seeds its hash once; do it before two threads build objects. */
    json_object_seed(0);
    br_started = pthread_create(&br_thread, NULL, base_reports_run, &br) == 0;
    if (!br_started)
        base_reports_run(&br);

    rv_iter_figures pred = base;
    rv_window pw = bw;
    if (n_oh > 0) {
        for (int i = 0; i < n_oh; i++)
            if (rv_cli_load_trace(oh_paths[i], &oh_traces[i], &err) != 0) {
                print_error(oh_paths[i], &err);
                goto out;
            }
        const rv_trace *const *pool = (const rv_trace *const *)oh_traces;
        if (rv_oh_table_from_traces(pool, (size_t)n_oh, &oh_table, &err) != 0) {
            print_error("overhead statistics", &err);
            goto out;
        }
        rv_whatif_set_overheads(w, oh_table);
    }
    if (w && !rv_whatif_is_empty(w)) {
        pg = rv_graph_clone(g);
        if (!pg) {
            fprintf(stderr, "reverie: out of memory\n");
            goto out;
        }
        if (rv_whatif_apply(w, pg, &applied, &err) != 0) {
            print_error("what-if failed", &err);
            goto out;
        }
        if (rv_sim_run(pg, rv_whatif_schedule(w), &ps, &err) != 0) {
            print_error("simulation of the what-if failed", &err);
            goto out;
        }
        if (rv_report_compare(g, bs, pg, ps, iteration, &base, &pred, &err) != 0) {
            print_error(path, &err);
            goto out;
        }
        pw = rv_report_window(pg, ps, pred.iter);
    }
    const rv_graph *fg = pg ? pg : g;
    const rv_sim *fs = ps ? ps : bs;

    rv_energy pe = {0};
    int have_energy = rv_whatif_energy(w, fg, fs, pw.t0_ns, pw.t1_ns, &pe) == 0;
    if (br_started) {
        pthread_join(br_thread, NULL);
        br_started = 0;
    }
    rv_energy be = br.energy;
    have_energy = have_energy && br.have_energy;

    double replay =
        base.measured_us > 0 ? fabs(base.simulated_us - base.measured_us) / base.measured_us : 0.0;
    out = json_object();
    json_object_set_new(out, "trace", json_string(path));
    json_object_set_new(out, "platform", json_string(rv_trace_str(tr, tr->platform_gpu)));
    json_object_set_new(out, "tasks", json_integer((json_int_t)g->ntasks));
    json_object_set_new(out, "edges", json_integer((json_int_t)g->nedges));
    json_object_set_new(out, "iterations", json_integer((json_int_t)g->niters));
    if (base.iter >= 0)
        json_object_set_new(out, "iteration", json_integer((json_int_t)g->iters[base.iter].step));
    else
        json_object_set_new(out, "iteration", json_string(g->niters ? "median" : "whole trace"));
    json_object_set_new(out, "measured_us", json_real(base.measured_us));
    json_object_set_new(out, "baseline_us", json_real(base.simulated_us));
    json_object_set_new(out, "replay_error", json_real(replay));
    json_object_set_new(out, "predicted_us", json_real(pred.simulated_us));
    json_object_set_new(
        out, "speedup",
        json_real(pred.simulated_us > 0 ? base.simulated_us / pred.simulated_us : 0.0));
    if (have_energy) {
        json_object_set_new(out, "baseline_energy_j", json_real(be.energy_j / bw.per));
        json_object_set_new(out, "energy_j", json_real(pe.energy_j / pw.per));
        json_object_set_new(out, "avg_power_w", json_real(pe.avg_power_w));
        json_object_set_new(out, "gpus", json_integer(pe.ngpus));
        json_object_set_new(out, "avg_power_per_gpu_w", json_real(pe.avg_power_per_gpu_w));
        json_object_set_new(out, "power_limit_w", json_real(pe.power_limit_w));
    }
    json_object_set_new(out, "applied", applied ? applied : json_array());
    applied = NULL;
    json_object_set_new(out, "per_iteration", br.per_iteration);
    br.per_iteration = NULL;
    json_t *bd = json_object();
    json_object_set_new(bd, "baseline", br.breakdown);
    br.breakdown = NULL;
    if (pg)
        json_object_set_new(bd, "predicted", rv_report_breakdown(pg, ps, &pw));
    json_object_set_new(out, "breakdown", bd);
    json_object_set_new(out, "top_kernels", rv_report_top_kernels(fg, fs, &pw, top));
    json_object_set_new(out, "critical_path", rv_report_critical_path(fg, fs, &pw, 50));
    json_object_set_new(out, "model",
                        json_pack("{s:f, s:f, s:I}", "launch_latency_us", g->launch_lat_ns / 1000.0,
                                  "gpu_queue_gap_us", g->gpu_gap_ns / 1000.0,
                                  "uncorrelated_gpu_tasks", (json_int_t)g->uncorrelated_gpu));

    if (timeline && write_timeline(timeline, g, bs, &bw) != 0)
        goto out;
    if (ptimeline && write_timeline(ptimeline, fg, fs, &pw) != 0)
        goto out;
    if (json_dumpf(out, stdout,
                   (compact ? JSON_COMPACT : JSON_INDENT(2)) | JSON_REAL_PRECISION(10)) != 0)
        goto out;
    fputc('\n', stdout);
    status = 0;
out:
    if (br_started)
        pthread_join(br_thread, NULL); /* it reads g and bs: wait before freeing them */
    json_decref(br.breakdown);
    json_decref(br.per_iteration);
    rv_oh_table_free(oh_table);
    for (int i = 0; i < n_oh; i++)
        rv_trace_free(oh_traces[i]);
    json_decref(out);
    json_decref(applied);
    rv_whatif_free(w);
    rv_sim_free(ps);
    rv_sim_free(bs);
    rv_graph_free(pg);
    rv_graph_free(g);
    rv_trace_free(tr);
    return status;
}
