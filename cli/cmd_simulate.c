/* `reverie simulate TRACE [--iteration N|median] [--whatif JSON|@FILE]
 *                         [--timeline OUT.json] [--top K] [--format json|table]`
 * `reverie simulate RANK0 RANK1 ... [--whatif DOC] [--job]`: one job
 * (cmd_simulate_job.c).
 *
 * Prints one JSON object: measured, simulated and predicted iteration time,
 * replay error, breakdowns, top kernels, critical path, what the what-if
 * changed; or, with --format table, the headline figures, the warnings and
 * the top kernels for people. Errors go to stderr with a non-zero exit. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "cli_args.h"
#include "cli_kmodels.h"
#include "rv_cli.h"
#include "reader/rv_et.h"
#include "graph/rv_graph.h"
#include "export/rv_kexport.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "graph/rv_retime.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie simulate TRACE [--iteration N|median] [--whatif JSON|@FILE]\n"
               "                         [--timeline OUT.json] [--predicted-timeline OUT.json]\n"
               "                         [--export-trace OUT.json[.gz]] [--export-baseline OUT]\n"
               "                         [--top K] [--compact] [--format json|table]\n"
               "                         [--et EXECUTION_TRACE]\n"
               "       reverie simulate EXECUTION_TRACE --gpu NAME [--whatif JSON|@FILE]\n"
               "       reverie simulate RANK0 RANK1 ... [--whatif JSON|@FILE] [--job]\n"
               "\n"
               "TRACE is a Kineto / PyTorch profiler trace (.json or .json.gz).\n"
               "Several traces of one distributed job (distributedInfo: one world size,\n"
               "distinct ranks) are answered as one job; --job forces it (ranks in the\n"
               "order given when the traces do not name them).\n"
               "--iteration   report step N (ProfilerStep#N) or the median step (default)\n"
               "--et          the PyTorch execution trace of the same run (.json, .gz,\n"
               "              .tar.gz): its shapes give flops, mfu and throughput\n"
               "--gpu         with an execution trace alone (no Kineto trace): the GPU its\n"
               "              kernels are modelled on (a hardware-table name, e.g. A100);\n"
               "              the what-if's \"gpu\" is used when this is absent\n"
               "--whatif      a what-if request document (see docs/whatif.md)\n"
               "--timeline    write the simulated baseline as Chrome-trace JSON (Perfetto)\n"
               "--predicted-timeline  the same for the what-if prediction\n"
               "--export-trace  write the predicted run as a Kineto trace in the input's\n"
               "              dialect (op tree, steps, flows, metadata; .gz compresses): it\n"
               "              opens in Perfetto, TensorBoard and HTA like the original\n"
               "--export-baseline  the same for the simulated baseline\n"
               "--top         number of top kernels to list (default 10)\n"
               "--format      json (default) or table: headline figures, warnings and top\n"
               "              kernels, rounded, for reading\n"
               "--overheads-from TRACE  (repeatable) pool these traces' host overheads as\n"
               "              the platform statistics for \"host_overheads\": \"platform\"\n"
               "--kernel-models-from TRACE  (repeatable) fit the kernel models on these\n"
               "              measured traces (with op shapes) of the simulated trace's GPU\n"
               "              or the what-if's gpu, as the platform's for \"kernel_models\":\n"
               "              \"platform\"; for an execution trace alone, its kernels take\n"
               "              their efficiencies\n"
               "--kernel-models-et ET  the execution trace of the last\n"
               "              --kernel-models-from trace, for its shapes\n");
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

/* A number member of obj (borrowed), 0 when absent. */
static double num(const json_t *obj, const char *key)
{
    return json_number_value(json_object_get(obj, key));
}

/* One before/after line: "label  baseline -> predicted unit". */
static void table_pair(const json_t *out, const char *key, const char *label, double scale,
                       const char *unit)
{
    const json_t *v = json_object_get(out, key);
    if (json_is_object(v))
        printf("%-16s %10.2f -> %.2f %s\n", label, num(v, "baseline") * scale,
               num(v, "predicted") * scale, unit);
}

/* The answer (borrowed) as a table for people: figures rounded to what
 * the models can tell apart (0.01 ms, 0.1%, 0.01 J, 1 W). */
static void print_table(const json_t *out)
{
    const char *platform = json_string_value(json_object_get(out, "platform"));
    const json_t *it = json_object_get(out, "iteration");
    const json_t *warnings = json_object_get(out, "warnings");
    const json_t *top = json_object_get(out, "top_kernels");
    printf("%-16s %s\n", "trace", json_string_value(json_object_get(out, "trace")));
    printf("%-16s %s\n", "platform", platform && *platform ? platform : "unknown");
    if (json_is_string(it))
        printf("%-16s %s\n", "iteration", json_string_value(it));
    else
        printf("%-16s %lld\n", "iteration", (long long)json_integer_value(it));
    printf("%-16s %10.2f ms\n", "measured", num(out, "measured_us") / 1e3);
    printf("%-16s %10.2f ms (replay error %.1f%%)\n", "simulated", num(out, "baseline_us") / 1e3,
           100 * fabs(num(out, "replay_error")));
    printf("%-16s %10.2f ms\n", "predicted", num(out, "predicted_us") / 1e3);
    printf("%-16s %10.3fx\n", "speedup", num(out, "speedup"));
    const json_t *cp = json_object_get(out, "critical_path");
    const char *bound = json_string_value(json_object_get(cp, "bound_by"));
    if (bound)
        printf("%-16s %10s (%.0f%% of the critical path)\n", "bound by", bound,
               100 * num(json_object_get(cp, "shares"), bound));
    table_pair(out, "energy_j", "energy/iter", 1, "J");
    const json_t *pw = json_object_get(out, "avg_power_w");
    if (json_is_object(pw))
        printf("%-16s %10.0f -> %.0f W\n", "avg power", num(pw, "baseline"), num(pw, "predicted"));
    const json_t *cap = json_object_get(out, "power_limit_w");
    if (json_is_object(cap))
        printf("%-16s %10.0f -> %.0f W\n", "power limit", num(cap, "baseline"),
               num(cap, "predicted"));
    printf("\nwarnings (%zu)\n", json_array_size(warnings));
    for (size_t i = 0; i < json_array_size(warnings); i++) {
        const json_t *w = json_array_get(warnings, i);
        printf("  %-22s %s\n", json_string_value(json_object_get(w, "code")),
               json_string_value(json_object_get(w, "message")));
    }
    if (json_array_size(top) == 0)
        return;
    printf("\ntop kernels\n  %10s %6s %10s %6s  %s\n", "total_ms", "count", "mean_us", "share",
           "name");
    for (size_t i = 0; i < json_array_size(top); i++) {
        const json_t *k = json_array_get(top, i);
        printf("  %10.2f %6.0f %10.1f %5.1f%%  %.80s\n", num(k, "total_us") / 1e3, num(k, "count"),
               num(k, "mean_us"), 100 * num(k, "share"),
               json_string_value(json_object_get(k, "name")));
    }
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

int rv_cli_attach_et(const char *path, rv_trace *tr, rv_et_join *join)
{
    rv_et *et = NULL;
    rv_error err;
    int rc = rv_et_read_file(path, NULL, &et, &err);
    if (rc == 0)
        rc = rv_et_join_trace(et, tr, join, &err);
    if (rc == 0 && rv_et_shapes_to_trace(et, join, tr) != 0)
        rc = rv_error_set(&err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (rc != 0)
        print_error(path, &err);
    rv_et_free(et);
    return rc == 0 ? 0 : -1;
}

/* The whole file at path (new, caller frees), at most cap bytes. */
static int read_all(const char *path, size_t cap, unsigned char **out, size_t *len, rv_error *err)
{
    FILE *f = fopen(path, "rb");
    rv_buf b = RV_BUF_INIT(cap);
    unsigned char chunk[1 << 16];
    size_t n;
    int rc = 0;
    *out = NULL;
    if (!f)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open: %s", strerror(errno));
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if (rv_buf_add(&b, chunk, n) != 0)
            break;
    if (ferror(f))
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "read error");
    else if (b.err)
        rc = rv_error_set(err, b.err, -1, -1, "larger than %zu bytes", cap);
    fclose(f);
    if (rc == 0 && b.len >= 4 && memcmp(b.p, "RVSN", 4) == 0)
        rc = rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                          "a snapshot keeps no op tree: export from the Kineto trace");
    if (rc == 0)
        *out = (unsigned char *)rv_buf_take(&b, len);
    rv_buf_free(&b);
    return rc == 0 && !*out ? rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory") : rc;
}

/* Reads the ET at path and models its run on gpu (rv_et_to_trace_fitted,
 * at the efficiencies of eff when not NULL). 0, or -1 with the reason
 * printed. */
static int load_et_alone(const char *path, const char *gpu, const rv_kmodel *eff, rv_trace **out)
{
    rv_et *et = NULL;
    rv_error err;
    int rc = rv_et_read_file(path, NULL, &et, &err);
    if (rc == 0)
        rc = rv_et_to_trace_fitted(et, gpu, eff, out, NULL, &err);
    rv_et_free(et);
    if (rc != 0)
        print_error(path, &err);
    return rc != 0 ? -1 : 0;
}

/* The models of --kernel-models-from: (*km)[0] fitted on the traces of
 * `own`, (*km)[1] on those of `target` (hw NULL where none ran there); *acc
 * and *km new (free()). 0, or -1 with the reason printed. */
static int fitted_models(const char *const *paths, const char *const *ets, int n, const rv_hw *own,
                         const rv_hw *target, rv_kmodel_acc **acc, rv_kmodel **km)
{
    *acc = calloc(2, sizeof(**acc));
    *km = calloc(2, sizeof(**km));
    if (!*acc || !*km) {
        fprintf(stderr, "reverie: out of memory\n");
        return -1;
    }
    if (!own && !target) {
        fprintf(stderr, "reverie: --kernel-models-from needs a GPU of the hardware table to fit "
                        "on\n");
        return -1;
    }
    if (rv_cli_fit_kmodels(paths, ets, n, own, target, &(*acc)[0], &(*acc)[1]) != 0)
        return -1;
    if (rv_kmodel_acc_count(&(*acc)[0]) > 0)
        rv_kmodel_from_acc(&(*km)[0], &(*acc)[0], own);
    if (rv_kmodel_acc_count(&(*acc)[1]) > 0)
        rv_kmodel_from_acc(&(*km)[1], &(*acc)[1], target);
    return 0;
}

/* Writes the run of res (its baseline when baseline) as a Kineto trace to
 * path, gzip-compressed when the name ends in ".gz". */
static int write_export(const char *path, const char *trace_path, const rv_run_result *res,
                        int baseline)
{
    unsigned char *orig = NULL;
    size_t len = 0, n = strlen(path);
    rv_buf out = RV_BUF_INIT(RV_KEXPORT_MAX_OUTPUT);
    rv_error err;
    int rc = read_all(trace_path, RV_KEXPORT_MAX_INPUT, &orig, &len, &err);
    if (rc == 0)
        rc = rv_kexport_run(orig, len, res, baseline, NULL, &out, NULL, &err);
    free(orig);
    if (rc != 0) {
        print_error(path, &err);
        rv_buf_free(&out);
        return -1;
    }
    if (n > 3 && strcmp(path + n - 3, ".gz") == 0) {
        gzFile gz = gzopen(path, "wb6");
        rc = !gz || gzwrite(gz, out.p, (unsigned)out.len) != (int)out.len;
        if (gz && gzclose(gz) != Z_OK)
            rc = 1;
    } else {
        FILE *f = fopen(path, "wb");
        rc = !f || fwrite(out.p, 1, out.len, f) != out.len;
        if (f && fclose(f) != 0)
            rc = 1;
    }
    rv_buf_free(&out);
    if (rc)
        fprintf(stderr, "reverie: writing %s failed\n", path);
    return rc ? -1 : 0;
}

enum { SIM_MAX_RANKS = 1024, SIM_MAX_OH = 256, SIM_MAX_KM = 64 };

/* What the command line asks for. */
typedef struct sim_args {
    const char *path, *whatif_text, *timeline, *ptimeline, *et_path, *gpu;
    const char *export_pred, *export_base;
    const char *paths[SIM_MAX_RANKS];
    size_t npaths;
    int force_job, compact, table;
    rv_run_opts opts;
    const char *oh_paths[SIM_MAX_OH];
    int n_oh;
    const char *km_paths[SIM_MAX_KM], *km_ets[SIM_MAX_KM];
    int n_km;
} sim_args;

/* Reads the command line into *x: -1 to go on, else the exit status (0
 * after --help, 2 on a bad argument). */
static int parse_args(int argc, char **argv, sim_args *x)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--compact") == 0) {
            x->compact = 1;
        } else if (strcmp(a, "--job") == 0) {
            x->force_job = 1;
        } else if (i + 1 < argc && strcmp(a, "--format") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "table") != 0 && strcmp(v, "json") != 0) {
                fprintf(stderr, "reverie: --format wants json or table, not '%s'\n", v);
                return 2;
            }
            x->table = strcmp(v, "table") == 0;
        } else if (i + 1 < argc && strcmp(a, "--iteration") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "median") == 0) {
                x->opts.iteration = RV_ITER_MEDIAN;
            } else {
                char *end;
                x->opts.iteration = strtoll(v, &end, 10);
                if (*end || end == v || x->opts.iteration < 0) {
                    fprintf(stderr, "reverie: --iteration wants a step number or 'median'\n");
                    return 2;
                }
            }
        } else if (i + 1 < argc && strcmp(a, "--whatif") == 0) {
            x->whatif_text = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--et") == 0) {
            x->et_path = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--gpu") == 0) {
            x->gpu = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--timeline") == 0) {
            x->timeline = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--predicted-timeline") == 0) {
            x->ptimeline = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--export-trace") == 0) {
            x->export_pred = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--export-baseline") == 0) {
            x->export_base = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--overheads-from") == 0) {
            if (x->n_oh == SIM_MAX_OH) {
                fprintf(stderr, "reverie: at most %d --overheads-from traces\n", SIM_MAX_OH);
                return 2;
            }
            x->oh_paths[x->n_oh++] = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--kernel-models-from") == 0) {
            if (x->n_km == SIM_MAX_KM) {
                fprintf(stderr, "reverie: at most %d --kernel-models-from traces\n", SIM_MAX_KM);
                return 2;
            }
            x->km_ets[x->n_km] = NULL;
            x->km_paths[x->n_km++] = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--kernel-models-et") == 0) {
            if (x->n_km == 0 || x->km_ets[x->n_km - 1]) {
                fprintf(stderr, "reverie: --kernel-models-et follows its --kernel-models-from\n");
                return 2;
            }
            x->km_ets[x->n_km - 1] = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--top") == 0) {
            x->opts.top_kernels = atoi(argv[++i]);
            if (x->opts.top_kernels < 0 || x->opts.top_kernels > 10000)
                x->opts.top_kernels = RV_RUN_TOP_KERNELS;
        } else if (a[0] != '-' && x->path) {
            /* Several traces: one job. */
            if (x->npaths == 0)
                x->paths[x->npaths++] = x->path;
            if (x->npaths == SIM_MAX_RANKS) {
                fprintf(stderr, "reverie: at most %d traces in one job\n", SIM_MAX_RANKS);
                return 2;
            }
            x->paths[x->npaths++] = a;
        } else if (rv_cli_trace_arg(a, &x->path, usage) != 0) {
            return 2;
        }
    }
    if (!x->path) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* --overheads-from: the pooled host-overhead statistics the what-if's
 * "host_overheads": "platform" uses. 0, or -1 after saying why. */
static int load_overheads(const sim_args *x, rv_trace **oh_traces, rv_oh_table **oh_table,
                          rv_whatif *w, rv_error *err)
{
    for (int i = 0; i < x->n_oh; i++)
        if (rv_cli_load_trace(x->oh_paths[i], &oh_traces[i], err) != 0) {
            print_error(x->oh_paths[i], err);
            return -1;
        }
    const rv_trace *const *pool = (const rv_trace *const *)oh_traces;
    if (rv_oh_table_from_traces(pool, (size_t)x->n_oh, oh_table, err) != 0) {
        print_error("overhead statistics", err);
        return -1;
    }
    rv_whatif_set_overheads(w, *oh_table);
    return 0;
}

/* The warnings only the CLI knows: pooled statistics of another GPU than
 * the answer's (gpu_to: the what-if's "gpu", may be NULL), and how an --et
 * was joined. */
static void cli_warnings(const sim_args *x, const rv_trace *tr, rv_trace *const *oh_traces,
                         const rv_et_join *join, const char *gpu_to, rv_run_result *res)
{
    /* Statistics pooled from traces of another GPU are another platform's,
     * unless that GPU is where the what-if moves the trace: then they are
     * the target machine's host, which is the point. */
    const rv_hw *to = gpu_to ? rv_hw_lookup(gpu_to) : NULL;
    for (int i = 0; i < x->n_oh; i++) {
        if (!oh_traces[i]) /* load_overheads loaded each before a run */
            continue;
        const char *a = rv_trace_str(tr, tr->platform_gpu);
        const char *b = rv_trace_str(oh_traces[i], oh_traces[i]->platform_gpu);
        if (to)
            a = to->name;
        if (to ? rv_hw_lookup(b) != to : strcmp(a, b) != 0) {
            rv_run_warn(res, "platform_pooled",
                        "--overheads-from %s ran on %s, %s %s: the pooled host overheads mix "
                        "hardware",
                        x->oh_paths[i], b[0] ? b : "an unknown GPU",
                        to ? "the what-if moves this trace to" : "this trace on",
                        a[0] ? a : "an unknown GPU");
            break;
        }
    }
    if (x->et_path)
        rv_run_warn(res, "et_joined",
                    "execution trace %s joined by %s: %zu of %zu ops matched, %zu of %zu GPU "
                    "tasks launched under an op attributed to an ET node",
                    x->et_path,
                    join->method == RV_ET_JOIN_ID ? "record-function id" : "op order and name",
                    join->ops_joined, join->ops, join->kernels_joined, join->kernels_launched);
}

/* Timelines, exports and the answer itself. 0, or -1 after saying why. */
static int write_outputs(const sim_args *x, const rv_graph *g, const rv_sim *bs,
                         const rv_run_result *res, json_t *out)
{
    if (x->timeline && write_timeline(x->timeline, g, bs, &res->base_win) != 0)
        return -1;
    if (x->ptimeline && write_timeline(x->ptimeline, rv_run_pred_graph(res), rv_run_pred_sim(res),
                                       &res->pred_win) != 0)
        return -1;
    if (x->export_pred && write_export(x->export_pred, x->path, res, 0) != 0)
        return -1;
    if (x->export_base && write_export(x->export_base, x->path, res, 1) != 0)
        return -1;
    if (x->table)
        print_table(out);
    else if (rv_run_dump(out, stdout, !x->compact) != 0)
        return -1;
    return 0;
}

int rv_cmd_simulate(int argc, char **argv)
{
    sim_args args;
    sim_args *x = &args;
    memset(x, 0, sizeof(*x));
    x->opts = (rv_run_opts){.iteration = RV_ITER_MEDIAN, .top_kernels = RV_RUN_TOP_KERNELS};
    int et_alone = 0, status = 1;
    rv_et_join join = {0};
    rv_trace *oh_traces[SIM_MAX_OH] = {0};
    rv_oh_table *oh_table = NULL;
    rv_kmodel_acc *km_acc = NULL;
    rv_kmodel *km = NULL;
    rv_trace *tr = NULL;
    rv_graph *g = NULL;
    rv_sim *bs = NULL;
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;
    json_t *out = NULL;
    rv_error err;
    rv_error_clear(&err);

    int st = parse_args(argc, argv, x);
    if (st >= 0)
        return st;
    const char *path = x->path;
    if (x->whatif_text && rv_whatif_parse_text(x->whatif_text, &w, &err) != 0) {
        print_error("bad what-if document", &err);
        return 2;
    }
    if (x->npaths > 1 || x->force_job) {
        if (x->timeline || x->ptimeline || x->n_oh || x->n_km || x->export_pred || x->export_base ||
            x->et_path) {
            fprintf(stderr,
                    "reverie: --timeline, --predicted-timeline, --export-trace, "
                    "--export-baseline, --overheads-from, --kernel-models-from and --et answer one "
                    "trace, "
                    "not a job\n");
            status = 2;
        } else {
            const char *one[1] = {path};
            status = rv_cli_simulate_job(x->npaths ? x->paths : one, x->npaths ? x->npaths : 1, w,
                                         &x->opts, x->force_job, x->compact, x->table);
        }
        rv_whatif_free(w);
        return status;
    }
    if (rv_cli_load_trace(path, &tr, &err) != 0) {
        /* An execution trace alone: its graph is modelled (rv_et_to_trace). */
        if (!rv_kineto_error_is_et(&err) || x->et_path) {
            print_error(path, &err);
            goto out;
        }
        const char *on = x->gpu ? x->gpu : rv_whatif_gpu_override(w);
        if (x->n_km && fitted_models(x->km_paths, x->km_ets, x->n_km, rv_hw_lookup(on), NULL,
                                     &km_acc, &km) != 0)
            goto out;
        if (load_et_alone(path, on, km, &tr) != 0)
            goto out;
        /* Modelled on the what-if's GPU: nothing is left to rescale (the
         * service drops it the same way, server/rv_api_et.c). */
        rv_whatif_drop_gpu(w);
        et_alone = 1;
    } else if (x->gpu) {
        fprintf(stderr, "reverie: --gpu is for an execution trace alone; a Kineto trace "
                        "takes \"gpu\" in the what-if\n");
        status = 2;
        goto out;
    }
    if (et_alone && (x->export_pred || x->export_base)) {
        fprintf(stderr, "reverie: --export-trace and --export-baseline rewrite a Kineto trace; "
                        "an execution trace alone has none\n");
        status = 2;
        goto out;
    }
    if (x->et_path && rv_cli_attach_et(x->et_path, tr, &join) != 0)
        goto out;
    if (rv_graph_build(tr, NULL, &g, &err) != 0) {
        print_error(path, &err);
        goto out;
    }
    if (rv_sim_run(g, RV_SCHED_EARLIEST_START, &bs, &err) != 0) {
        print_error("simulation failed", &err);
        goto out;
    }
    if (x->n_oh > 0 && load_overheads(x, oh_traces, &oh_table, w, &err) != 0)
        goto out;
    if (x->n_km && !et_alone) {
        if (!rv_whatif_uses_platform_kmodels(w)) {
            fprintf(stderr, "reverie: --kernel-models-from is for \"kernel_models\": "
                            "\"platform\" in the what-if (or an execution trace alone)\n");
            status = 2;
            goto out;
        }
        const char *over = rv_whatif_gpu_override(w);
        if (fitted_models(x->km_paths, x->km_ets, x->n_km,
                          rv_hw_lookup(rv_trace_str(tr, tr->platform_gpu)),
                          over ? rv_hw_lookup(over) : NULL, &km_acc, &km) != 0)
            goto out;
        rv_whatif_set_kmodel(w, km[0].hw ? &km[0] : NULL, km[1].hw ? &km[1] : NULL);
    }
    x->opts.keep_predicted = x->ptimeline != NULL || x->export_pred != NULL;
    if (rv_run(g, bs, w, &x->opts, &res, &err) != 0) {
        print_error(err.code == RV_ERR_NOTFOUND ? path : "what-if failed", &err);
        goto out;
    }
    cli_warnings(x, tr, oh_traces, &join, rv_whatif_gpu_override(w), res);
    out = rv_run_render(res, path);
    if (!out) {
        fprintf(stderr, "reverie: out of memory\n");
        goto out;
    }
    if (write_outputs(x, g, bs, res, out) != 0)
        goto out;
    status = 0;
out:
    rv_et_join_free(&join);
    rv_oh_table_free(oh_table);
    free(km_acc);
    free(km);
    for (int i = 0; i < x->n_oh; i++)
        rv_trace_free(oh_traces[i]);
    json_decref(out);
    rv_run_result_free(res);
    rv_whatif_free(w);
    rv_sim_free(bs);
    rv_graph_free(g);
    rv_trace_free(tr);
    return status;
}
