/* The `reverie` command line end to end: runs the built binary
 * ($RV_BIN_DIR/reverie) on the checked-in sample trace and checks its exit
 * status, its JSON or CSV output and its error messages.
 *
 * Only the report fields every shape of `reverie simulate` keeps are
 * checked: measured_us, baseline_us, predicted_us, speedup, replay_error.
 * Exits 77 (skipped) when the sample trace is absent. */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/rv_test_util.h"

#define SAMPLE "data/samples/resnet50-v100-workers0.pt.trace.json.gz"
/* The sample's median ProfilerStep (data/samples/README.md: 176.3 ms). */
#define SAMPLE_STEP_US 176273.0

static char g_reverie[4096];

typedef struct run_result {
    int status; /* exit status; -1 when it did not exit normally */
    char *out;  /* stdout, NUL-terminated (owned) */
    char *err;  /* stderr, NUL-terminated (owned) */
} run_result;

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static char *slurp_fd(int fd)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ssize_t got;
    lseek(fd, 0, SEEK_SET);
    while (buf && (got = read(fd, buf + n, cap - n - 1)) > 0) {
        n += (size_t)got;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* Runs reverie with args (NULL-terminated, without argv[0]); stdout and
 * stderr go to temporary files read back into *r. */
static void run(run_result *r, const char *const *args)
{
    char out_path[] = "/tmp/rv_cli_test_out_XXXXXX", err_path[] = "/tmp/rv_cli_test_err_XXXXXX";
    int out = mkstemp(out_path), err = mkstemp(err_path);
    const char *argv[32];
    size_t n = 0;

    memset(r, 0, sizeof(*r));
    r->status = -1;
    CU_ASSERT_FATAL(out >= 0 && err >= 0);
    unlink(out_path);
    unlink(err_path);
    argv[n++] = g_reverie;
    for (; args[n - 1] && n < sizeof(argv) / sizeof(argv[0]) - 1; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(out, 1);
        dup2(err, 2);
        execv(g_reverie, (char *const *)argv);
        _exit(127);
    }
    int ws = 0;
    CU_ASSERT_FATAL(waitpid(pid, &ws, 0) == pid);
    if (WIFEXITED(ws))
        r->status = WEXITSTATUS(ws);
    r->out = slurp_fd(out);
    r->err = slurp_fd(err);
    close(out);
    close(err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->err);
}

/* A number member of obj, or NAN (with a failed assertion) when it is
 * missing or not a number. */
static double number(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_number(v)) {
        fprintf(stderr, "\n  %s: missing or not a number\n", key);
        CU_FAIL("report member missing or not a number");
        return NAN;
    }
    return json_number_value(v);
}

/* Parses a simulate report and checks the members every shape keeps. */
static json_t *report(const run_result *r)
{
    json_error_t je;
    if (r->status != 0)
        fprintf(stderr, "\n  exit %d: %s\n", r->status, r->err);
    CU_ASSERT_EQUAL(r->status, 0);
    json_t *doc = json_loads(r->out, 0, &je);
    if (!doc)
        fprintf(stderr, "\n  stdout is not JSON: %s (line %d)\n", je.text, je.line);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_TRUE(json_is_object(doc));
    double m = number(doc, "measured_us"), b = number(doc, "baseline_us");
    double p = number(doc, "predicted_us"), s = number(doc, "speedup");
    double e = number(doc, "replay_error");
    CU_ASSERT(m > 0 && b > 0 && p > 0);
    /* The speedup is the baseline over the prediction; the replay error is
     * the baseline's distance from the measured step. */
    CU_ASSERT(fabs(s - b / p) < 1e-3 * s);
    CU_ASSERT(fabs(fabs(e) - fabs(b - m) / m) < 1e-3);
    return doc;
}

static void expect_failure(const char *const *args, const char *says)
{
    run_result r;
    run(&r, args);
    if (r.status == 0 || !strstr(r.err, says))
        fprintf(stderr, "\n  reverie %s: exit %d, stderr: %s (wanted '%s')\n", args[0], r.status,
                r.err, says);
    CU_ASSERT(r.status > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, says));
    run_free(&r);
}

static void test_simulate_report(void)
{
    run_result r;
    run(&r, (const char *const[]){"simulate", SAMPLE, NULL});
    json_t *doc = report(&r);
    /* The sample is a real trace with a known median step, and the replay
     * of an unchanged trace is the baseline itself. */
    CU_ASSERT(fabs(number(doc, "measured_us") / SAMPLE_STEP_US - 1) < 0.01);
    CU_ASSERT(fabs(number(doc, "replay_error")) < 0.05);
    CU_ASSERT_DOUBLE_EQUAL(number(doc, "predicted_us"), number(doc, "baseline_us"), 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(number(doc, "speedup"), 1.0, 1e-9);
    json_decref(doc);
    run_free(&r);
}

/* A what-if moves the prediction: a lower power limit never speeds up. */
static void test_simulate_whatif(void)
{
    run_result r;
    run(&r, (const char *const[]){"simulate", SAMPLE, "--whatif", "{\"power_limit_w\":150}", NULL});
    json_t *doc = report(&r);
    CU_ASSERT(number(doc, "predicted_us") > number(doc, "baseline_us"));
    CU_ASSERT(number(doc, "speedup") < 1.0);
    json_decref(doc);
    run_free(&r);
}

/* --export-trace writes the predicted run as a Kineto trace (gzip for
 * .gz) that `reverie simulate` reads back at the predicted step. */
static void test_export_trace(void)
{
    static const char *const docs[] = {"{\"optimizations\":[{\"kind\":\"amp\"}]}",
                                       "{\"power_limit_w\":150}"};
    char path[] = "/tmp/rv_cli_export_XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    char gz[64];
    snprintf(gz, sizeof(gz), "%s.json.gz", path);
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        run_result r, b;
        run(&r, (const char *const[]){"simulate", SAMPLE, "--whatif", docs[i], "--export-trace", gz,
                                      NULL});
        json_t *doc = report(&r);
        run(&b, (const char *const[]){"simulate", gz, NULL});
        json_t *back = report(&b);
        double p = number(doc, "predicted_us"), m = number(back, "measured_us");
        printf("\n  %s: predicted %.1f us, export measures %.1f us", docs[i], p, m);
        CU_ASSERT(fabs(m - p) <= 0.02 * p);
        json_decref(doc);
        json_decref(back);
        run_free(&r);
        run_free(&b);
    }
    unlink(gz);
    unlink(path);
}

/* A bad what-if document exits non-zero and names the offending field. */
static void test_bad_whatif(void)
{
    expect_failure(
        (const char *const[]){"simulate", SAMPLE, "--whatif", "{\"power_limit_w\":\"abc\"}", NULL},
        "power_limit_w");
    expect_failure((const char *const[]){"simulate", SAMPLE, "--whatif",
                                         "{\"optimizations\":[{\"kind\":\"scale\",\"factor\":-1}]}",
                                         NULL},
                   "optimizations[0].factor");
    expect_failure(
        (const char *const[]){"simulate", SAMPLE, "--whatif", "{\"no_such_field\":1}", NULL},
        "no_such_field");
    expect_failure((const char *const[]){"simulate", SAMPLE, "--whatif", "{", NULL}, "JSON");
    expect_failure(
        (const char *const[]){"simulate", SAMPLE, "--whatif", "@/nonexistent/whatif.json", NULL},
        "/nonexistent/whatif.json");
}

/* A missing trace exits non-zero, names the file and prints no report. */
static void test_missing_trace(void)
{
    run_result r;
    run(&r, (const char *const[]){"simulate", "/nonexistent/trace.json.gz", NULL});
    CU_ASSERT(r.status > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "/nonexistent/trace.json.gz"));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    run_free(&r);
    expect_failure((const char *const[]){"sweep", "/nonexistent/trace.json.gz", "--vary",
                                         "power_limit_w=150:250:50", NULL},
                   "/nonexistent/trace.json.gz");
}

static void test_usage_errors(void)
{
    expect_failure((const char *const[]){"no-such-command", NULL}, "no-such-command");
    expect_failure((const char *const[]){"simulate", NULL}, "usage");
    run_result r;
    run(&r, (const char *const[]){"--help", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "simulate"));
    run_free(&r);
}

/* start:stop:step is inclusive: 150, 200, 250 give three rows. */
static void test_sweep_rows(void)
{
    run_result r;
    run(&r, (const char *const[]){"sweep", SAMPLE, "--vary", "power_limit_w=150:250:50", NULL});
    if (r.status != 0)
        fprintf(stderr, "\n  exit %d: %s\n", r.status, r.err);
    CU_ASSERT_EQUAL(r.status, 0);
    /* A header, then one row per value, each starting with the value. */
    static const char *const want[] = {"150,", "200,", "250,"};
    size_t rows = 0;
    char *save = NULL;
    char *line = strtok_r(r.out, "\n", &save);
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "power_limit_w"));
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        if (rows < 3)
            CU_ASSERT_EQUAL(strncmp(line, want[rows], strlen(want[rows])), 0);
        rows++;
    }
    CU_ASSERT_EQUAL(rows, 3);
    run_free(&r);

    run(&r, (const char *const[]){"sweep", SAMPLE, "--vary", "power_limit_w=150:250:50", "--json",
                                  NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    json_t *points = json_object_get(doc, "points");
    CU_ASSERT_EQUAL(json_array_size(points), 3);
    /* Less power, never faster. */
    double prev = 0;
    for (size_t i = 0; i < json_array_size(points); i++) {
        double p = number(json_array_get(points, i), "predicted_us");
        if (i > 0)
            CU_ASSERT(p <= prev * (1 + 1e-9));
        prev = p;
    }
    json_decref(doc);
    run_free(&r);
}

/* --format table: the headline figures rounded (ms, two decimals), the
 * warnings and the top kernels; the sweep's rows under a header. */
static void test_table_format(void)
{
    run_result r;
    run(&r, (const char *const[]){"simulate", SAMPLE, "--whatif", "{\"power_limit_w\":150}",
                                  "--format", "table", "--top", "3", NULL});
    if (r.status != 0)
        fprintf(stderr, "\n  exit %d: %s\n", r.status, r.err);
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NULL(strchr(r.out, '{'));
    /* The measured median of the steady steps, 176.468 ms, rounded to
     * 0.01 ms; the bound the critical path says. */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "176.47 ms"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "bound by"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "predicted"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "speedup"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "300 -> 150 W"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "power_cap_assumed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "top kernels"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "dgrad_engine"));
    run_free(&r);

    run(&r, (const char *const[]){"sweep", SAMPLE, "--vary", "power_limit_w=150:250:50", "--format",
                                  "table", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    size_t lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (lines == 0) {
            CU_ASSERT_PTR_NOT_NULL(strstr(line, "predicted_ms"));
        } else {
            CU_ASSERT_PTR_NULL(strchr(line, ','));
        }
        lines++;
    }
    CU_ASSERT_EQUAL(lines, 4);
    run_free(&r);
    expect_failure((const char *const[]){"simulate", SAMPLE, "--format", "yaml", NULL}, "table");
}

/* A misspelt field or kind: the nearest valid name and the valid ones. */
static void test_misspelling_suggests(void)
{
    expect_failure(
        (const char *const[]){"simulate", SAMPLE, "--whatif", "{\"power_limt_w\":150}", NULL},
        "did you mean 'power_limit_w'? valid: power_limit_w,");
    expect_failure((const char *const[]){"simulate", SAMPLE, "--whatif",
                                         "{\"optimizations\":[{\"kind\":\"fused_optimiser\"}]}",
                                         NULL},
                   "did you mean 'fused_optimizer'? valid: amp, fused_optimizer,");
    expect_failure((const char *const[]){"simulate", SAMPLE, "--whatif",
                                         "{\"distributed\":{\"workers\":2,\"bucket_md\":5}}", NULL},
                   "did you mean 'bucket_mb'?");
    /* Nothing close: no guess, still the list. */
    expect_failure((const char *const[]){"simulate", SAMPLE, "--whatif",
                                         "{\"optimizations\":[{\"kind\":\"warp-drive\"}]}", NULL},
                   "'warp-drive' valid: amp,");
}

/* Two --vary make a grid: one CSV row per combination, the last field
 * fastest, each row's values in its own column; the same field twice is
 * refused. */
static void test_vary_grid(void)
{
    run_result r;
    run(&r, (const char *const[]){"sweep", SAMPLE, "--vary", "power_limit_w=150:250:100", "--vary",
                                  "batch_size=8,16,32", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    static const char *const want[] = {"power_limit_w,batch_size,predicted_us,",
                                       "150,8,",
                                       "150,16,",
                                       "150,32,",
                                       "250,8,",
                                       "250,16,",
                                       "250,32,"};
    const char *line = r.out;
    size_t n = 0;
    for (; line && *line; n++) {
        if (n < sizeof(want) / sizeof(want[0]))
            CU_ASSERT_EQUAL(strncmp(line, want[n], strlen(want[n])), 0);
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    CU_ASSERT_EQUAL(n, sizeof(want) / sizeof(want[0]));
    run_free(&r);
    run(&r, (const char *const[]){"sweep", SAMPLE, "--vary", "power_limit_w=150:250:50", "--vary",
                                  "power_limit_w=1,2", NULL});
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--vary power_limit_w given twice"));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    run_free(&r);
}

/* `reverie overheads --help` lists predict, which needs no database. */
static void test_overheads_help(void)
{
    run_result r;
    run(&r, (const char *const[]){"overheads", "--help", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "reverie overheads predict TRACE"));
    run_free(&r);
}

/* The commands that talk to the service run in reverie-service, next to
 * reverie, with the same arguments; a reverie alone in a folder still runs
 * the engine's commands and names the missing program for the others. */
static void test_service_commands(void)
{
    run_result r;
    run(&r, (const char *const[]){"upload", "--help", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "usage: reverie upload"));
    run_free(&r);

    char dir[] = "/tmp/rv_cli_alone_XXXXXX", alone[PATH_MAX],
         cmd[sizeof(g_reverie) + PATH_MAX + 16];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(alone, sizeof(alone), "%s/reverie", dir);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", g_reverie, alone);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    char saved[sizeof(g_reverie)];
    memcpy(saved, g_reverie, sizeof(saved));
    snprintf(g_reverie, sizeof(g_reverie), "%s", alone);
    run(&r, (const char *const[]){"token", "list", NULL});
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "reverie-service"));
    run_free(&r);
    run(&r, (const char *const[]){"simulate", "--help", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    run_free(&r);
    memcpy(g_reverie, saved, sizeof(saved));
    unlink(alone);
    rmdir(dir);
}

/* An execution trace alone (issue 18): `simulate ET --gpu A100` answers
 * with et_only_modelled and the ET's FLOPs; the what-if's "gpu" serves
 * too; without a GPU it is refused naming "gpu", and a broken ET with the
 * reader's reason. Needs the public traces (registered only with them). */
static void test_simulate_et_alone(void)
{
    const char *dir = rv_test_shared_traces("hta/simple-add.et.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir); /* registered only when it is there */
    char et[1024];
    snprintf(et, sizeof(et), "%s/hta/simple-add.et.json.gz", dir);
    run_result r;
    run(&r, (const char *const[]){"simulate", et, "--gpu", "A100", "--compact", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    json_t *o = json_loads(r.out ? r.out : "", 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(json_number_value(json_object_get(json_object_get(o, "flops"), "per_step")),
                    131072.0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"et_only_modelled\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "A100"));
    json_decref(o);
    run_free(&r);
    run(&r, (const char *const[]){"simulate", et, "--whatif", "{\"gpu\":\"H100-SXM5\"}", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(r.out && strstr(r.out, "et_only_modelled"));
    run_free(&r);
    /* Modelled on the what-if's GPU, the what-if's "gpu" changes nothing
     * (ResNet-50's fp32 convolutions were TF32 under it, fp32 without). */
    char rn[1024];
    snprintf(rn, sizeof(rn), "%s/param/resnet-2080ti.et.json.gz", dir);
    run(&r, (const char *const[]){"simulate", rn, "--compact", "--whatif",
                                  "{\"gpu\":\"A100-SXM4-80GB\"}", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    o = json_loads(r.out ? r.out : "", 0, NULL);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(o, "predicted_us")),
                           json_number_value(json_object_get(o, "baseline_us")), 1e-6);
    json_decref(o);
    run_free(&r);
    expect_failure((const char *const[]){"simulate", et, NULL}, "\"gpu\"");
    expect_failure((const char *const[]){"simulate", et, "--gpu", "Z80", NULL},
                   "not in the hardware table");
    /* A broken ET: the reader's reason and place. */
    char bad[] = "/tmp/rv_cli_test_et_XXXXXX";
    int fd = mkstemp(bad);
    CU_ASSERT_FATAL(fd >= 0);
    static const char doc[] = "{\"schema\": \"1.0.1\", \"nodes\": [{\"name\": \"x\"}]}";
    CU_ASSERT_EQUAL(write(fd, doc, sizeof(doc) - 1), (ssize_t)(sizeof(doc) - 1));
    close(fd);
    expect_failure((const char *const[]){"simulate", bad, "--gpu", "A100", NULL}, "id");
    unlink(bad);
}

/* Several traces of one job: one job answer (issue 17). Needs the
 * public traces (registered only with them). */
static void test_simulate_job(void)
{
    const char *dir = rv_test_shared_traces("param/dlrm-8rank/worker0.kineto.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir); /* registered only when it is there */
    char p[8][1024];
    const char *args[16];
    size_t n = 0;
    args[n++] = "simulate";
    for (int i = 0; i < 8; i++) {
        snprintf(p[i], sizeof(p[i]), "%s/param/dlrm-8rank/worker%d.kineto.json.gz", dir, i);
        args[n++] = p[i];
    }
    args[n++] = "--whatif";
    args[n++] = "{\"job\": {\"bandwidth_gbps\": 1}}";
    args[n] = NULL;
    run_result r;
    run(&r, args);
    json_t *doc = report(&r);
    json_t *ranks = json_object_get(doc, "ranks");
    CU_ASSERT_EQUAL(json_array_size(ranks), 8);
    for (size_t i = 0; i < json_array_size(ranks); i++) {
        json_t *k = json_array_get(ranks, i);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(k, "rank")), (json_int_t)i);
        CU_ASSERT(number(k, "replay_error") <= 0.02);
        CU_ASSERT(number(k, "wait_us") >= 0 && number(k, "transfer_us") > 0);
    }
    CU_ASSERT_EQUAL(json_object_size(json_object_get(doc, "clock_offsets_us")), 8);
    CU_ASSERT(json_array_size(json_object_get(doc, "stragglers")) > 0);
    /* 1 Gb/s links are slower than the traced NVLink. */
    CU_ASSERT(number(doc, "predicted_us") > number(doc, "baseline_us"));
    json_decref(doc);
    run_free(&r);
    /* Two traces of different jobs are refused unless --job says so. */
    expect_failure((const char *const[]){"simulate", p[0], SAMPLE, NULL}, "--job");
    run(&r, (const char *const[]){"simulate", SAMPLE, p[0], "--job", NULL});
    doc = report(&r);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(doc, "ranks")), 2);
    json_decref(doc);
    run_free(&r);
}

/* kernels --fit: the models fitted on DLRM rank 0 and measured on every
 * costed kernel of rank 1, embedding lookups included; another GPU's
 * trace to fit on is refused. Needs the public traces. */
static void test_kernels_fit(void)
{
    const char *dir = rv_test_shared_traces("param/dlrm-8rank/worker0.kineto.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir); /* registered only when it is there */
    char k0[1024], e0[1024], k1[1024], e1[1024];
    snprintf(k0, sizeof(k0), "%s/param/dlrm-8rank/worker0.kineto.json.gz", dir);
    snprintf(e0, sizeof(e0), "%s/param/dlrm-8rank/worker0.et.json.gz", dir);
    snprintf(k1, sizeof(k1), "%s/param/dlrm-8rank/worker1.kineto.json.gz", dir);
    snprintf(e1, sizeof(e1), "%s/param/dlrm-8rank/worker1.et.json.gz", dir);
    run_result r;
    run(&r, (const char *const[]){"kernels", k1, "--et", e1, "--fit", k0, "--fit-et", e0, NULL});
    json_error_t je;
    json_t *doc = r.out ? json_loads(r.out, 0, &je) : NULL;
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(doc, "fitted_on")), k0);
    size_t i;
    json_t *c;
    double emb = -1;
    json_array_foreach(json_object_get(doc, "classes"), i, c)
    {
        if (!strcmp(json_string_value(json_object_get(c, "class")), "embedding"))
            emb = number(c, "model_error");
    }
    printf("(rank 1 embedding error fitted on rank 0: %.1f%%) ", emb * 100);
    CU_ASSERT(emb >= 0);
    json_decref(doc);
    run_free(&r);
    expect_failure((const char *const[]){"kernels", k1, "--fit", SAMPLE, NULL}, "same GPU");
}

static double compute_us(const char *out)
{
    json_t *o = json_loads(out ? out : "", 0, NULL);
    double v = json_number_value(json_object_get(
        json_object_get(json_object_get(json_object_get(o, "breakdown"), "baseline"), "gpu"),
        "compute_us"));
    json_decref(o);
    return v;
}

/* --kernel-models-from: DLRM rank 0's ET alone on a V100 takes the
 * efficiencies rank 1's measured kernels give (more kernel time than at
 * 50% of the roofline, nearer the measured 1,053 us, and the warning says
 * so); a Kineto trace takes them only with "kernel_models": "platform";
 * a trace of another GPU is refused. */
static void test_kernel_models_from(void)
{
    const char *dir = rv_test_shared_traces("param/dlrm-8rank/worker0.et.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir); /* registered only when it is there */
    char e0[1024], k1[1024], r0[1024], r4[1024];
    snprintf(e0, sizeof(e0), "%s/param/dlrm-8rank/worker0.et.json.gz", dir);
    snprintf(k1, sizeof(k1), "%s/param/dlrm-8rank/worker1.kineto.json.gz", dir);
    snprintf(r0, sizeof(r0), "%s/kineto/resnet50-v100-workers0.pt.trace.json.gz", dir);
    snprintf(r4, sizeof(r4), "%s/kineto/resnet50-v100-workers4.pt.trace.json.gz", dir);
    run_result a, b;
    run(&a, (const char *const[]){"simulate", e0, "--gpu", "V100-SXM2", "--compact", NULL});
    run(&b, (const char *const[]){"simulate", e0, "--gpu", "V100-SXM2", "--compact",
                                  "--kernel-models-from", k1, NULL});
    CU_ASSERT_EQUAL(a.status, 0);
    CU_ASSERT_EQUAL(b.status, 0);
    double da = compute_us(a.out), db = compute_us(b.out);
    printf("(DLRM rank 0 ET alone: kernels %.0f -> %.0f us) ", da, db);
    CU_ASSERT(db > 1.2 * da && db < 1053 * 1.3);
    CU_ASSERT_PTR_NOT_NULL(b.out && strstr(b.out, "fitted on measured traces"));
    run_free(&a);
    run_free(&b);
    run(&a, (const char *const[]){"simulate", r0, "--compact", "--whatif",
                                  "{\"kernel_models\":\"platform\",\"gpu\":\"V100-DGXS\"}",
                                  "--kernel-models-from", r4, NULL});
    CU_ASSERT_EQUAL(a.status, 0);
    CU_ASSERT_PTR_NOT_NULL(a.out && strstr(a.out, "\"kernels_from_target_platform\""));
    CU_ASSERT_PTR_NULL(a.out ? strstr(a.out, "\"kernels_from_target_platform\": 0") : NULL);
    run_free(&a);
    expect_failure((const char *const[]){"simulate", r0, "--kernel-models-from", r4, NULL},
                   "kernel_models");
    expect_failure((const char *const[]){"simulate", e0, "--gpu", "V100-SXM2",
                                         "--kernel-models-from", r4, NULL},
                   "neither");
}

/* advise: ranked plans as JSON; the top one's what-if, given to simulate,
 * gives its predicted_us; a bad objective is a usage error. */
static void test_advise(void)
{
    run_result r;
    run(&r, (const char *const[]){"advise", SAMPLE, "--compact", NULL});
    if (r.status != 0)
        fprintf(stderr, "\n  exit %d: %s\n", r.status, r.err);
    CU_ASSERT_EQUAL_FATAL(r.status, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    const json_t *top = json_array_get(json_object_get(doc, "candidates"), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(top);
    CU_ASSERT(number(doc, "searched") > 0);
    char *changes = json_dumps(json_object_get(top, "changes"), JSON_COMPACT);
    CU_ASSERT_PTR_NOT_NULL(strstr(changes ? changes : "", "dataloader"));
    free(changes);
    char *whatif = json_dumps(json_object_get(top, "whatif"), JSON_COMPACT);
    run(&r, (const char *const[]){"simulate", SAMPLE, "--whatif", whatif, "--compact", NULL});
    CU_ASSERT_EQUAL(r.status, 0);
    json_t *sim = json_loads(r.out, 0, NULL);
    double want = number(top, "predicted_us"), got = sim ? number(sim, "predicted_us") : 0;
    CU_ASSERT(fabs(got - want) <= 0.005 * want);
    json_decref(sim);
    run_free(&r);
    free(whatif);
    json_decref(doc);
    expect_failure((const char *const[]){"advise", SAMPLE, "--objective", "fame", NULL},
                   "--objective wants time, energy or cost");
    expect_failure((const char *const[]){"advise", SAMPLE, "--gpus", "0", NULL},
                   "--gpus wants an integer");
}

/* advise RANK0 .. RANK7 --gpus 16: one job's plans, each a job what-if
 * that `simulate RANK0 .. RANK7 --whatif` reproduces (±0.5%); the top one
 * by time per sample scales the job to 16 data-parallel ranks with a
 * distributed knob (network, compression or algorithm) on its traced
 * collectives; the price is the default one, said so. Needs the public
 * traces. */
static void test_advise_job(void)
{
    const char *dir = rv_test_shared_traces("param/dlrm-8rank/worker0.kineto.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir); /* registered only when it is there */
    char p[8][1024];
    const char *args[20];
    size_t n = 0;
    args[n++] = "advise";
    for (int i = 0; i < 8; i++) {
        snprintf(p[i], sizeof(p[i]), "%s/param/dlrm-8rank/worker%d.kineto.json.gz", dir, i);
        args[n++] = p[i];
    }
    size_t ntr = n;
    const char *tail[] = {"--objective", "time", "--gpus", "16", "--compact", NULL};
    for (size_t i = 0; i < 6; i++)
        args[n++] = tail[i];
    run_result r;
    run(&r, args);
    if (r.status != 0)
        fprintf(stderr, "\n  exit %d: %s\n", r.status, r.err);
    CU_ASSERT_EQUAL_FATAL(r.status, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(doc, "traces")), 8);
    CU_ASSERT_EQUAL(number(json_object_get(doc, "baseline"), "gpus"), 8);
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_object_get(json_object_get(doc, "price"), "source")), "default");
    const json_t *top = json_array_get(json_object_get(doc, "candidates"), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(top);
    char *changes = json_dumps(json_object_get(top, "changes"), JSON_COMPACT);
    CU_ASSERT_PTR_NOT_NULL(strstr(changes ? changes : "", "data parallel 16 GPUs"));
    /* With the whole space searched the best plan also tunes the network;
     * a search its budget stopped (a sanitizer build is slow) may end
     * before that combination, and says so. */
    if (json_is_true(json_object_get(doc, "complete"))) {
        CU_ASSERT(strstr(changes ? changes : "", "network") ||
                  strstr(changes ? changes : "", "compression") ||
                  strstr(changes ? changes : "", "allreduce"));
    } else {
        CU_ASSERT_PTR_NOT_NULL(json_object_get(doc, "stopped"));
    }
    CU_ASSERT_EQUAL(number(top, "gpus"), 16);
    free(changes);
    char *whatif = json_dumps(json_object_get(top, "whatif"), JSON_COMPACT);
    args[0] = "simulate";
    args[ntr] = "--whatif";
    args[ntr + 1] = whatif;
    args[ntr + 2] = "--compact";
    args[ntr + 3] = NULL;
    run(&r, args);
    CU_ASSERT_EQUAL(r.status, 0);
    json_t *sim = json_loads(r.out, 0, NULL);
    double want = number(top, "predicted_us"), got = sim ? number(sim, "predicted_us") : 0;
    CU_ASSERT(fabs(got - want) <= 0.005 * want);
    json_decref(sim);
    run_free(&r);
    free(whatif);
    json_decref(doc);
}

/* A what-if document given without --whatif: the error names the flag. */
static void test_whatif_doc_needs_flag(void)
{
    run_result r;
    run(&r, (const char *const[]){"whatif", "4", "{\"power_limit_w\":200}", NULL});
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--whatif"));
    run_free(&r);
}

int main(void)
{
    const char *bin = getenv("RV_BIN_DIR");
    snprintf(g_reverie, sizeof(g_reverie), "%s/reverie", bin ? bin : "build/bin");
    if (access(g_reverie, X_OK) != 0) {
        printf("%s is not built (RV_BIN_DIR)\n", g_reverie);
        return 1;
    }
    if (access(SAMPLE, R_OK) != 0) {
        printf("skip: %s cannot be read (run from the source folder)\n", SAMPLE);
        return RV_TEST_SKIP;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("cli", NULL, NULL);
    CU_add_test(s, "simulate prints a JSON report", test_simulate_report);
    CU_add_test(s, "simulate with a what-if", test_simulate_whatif);
    CU_add_test(s, "simulate --export-trace reads back", test_export_trace);
    CU_add_test(s, "a bad what-if names the field", test_bad_whatif);
    CU_add_test(s, "a missing trace", test_missing_trace);
    CU_add_test(s, "usage errors", test_usage_errors);
    CU_add_test(s, "sweep: one row per value", test_sweep_rows);
    CU_add_test(s, "--format table", test_table_format);
    CU_add_test(s, "a misspelling suggests the nearest name", test_misspelling_suggests);
    CU_add_test(s, "sweep: two --vary make a grid", test_vary_grid);
    CU_add_test(s, "overheads --help lists predict", test_overheads_help);
    CU_add_test(s, "service commands run reverie-service", test_service_commands);
    /* The cases on the public traces (tests/data/public, through
     * RV_SHARED_TRACES) are left out, and the suite reported skipped, when
     * those cannot be read: they would check nothing. */
    int traces = rv_test_shared_traces("param/dlrm-8rank/worker0.et.json.gz") &&
                 rv_test_shared_traces("hta/simple-add.et.json.gz");
    if (traces) {
        CU_add_test(s, "simulate RANK0 RANK1 ... answers one job", test_simulate_job);
        CU_add_test(s, "simulate ET --gpu: an execution trace alone", test_simulate_et_alone);
        CU_add_test(s, "simulate --kernel-models-from", test_kernel_models_from);
        CU_add_test(s, "kernels --fit another trace", test_kernels_fit);
        CU_add_test(s, "advise RANK0 RANK1 ...: job what-if plans", test_advise_job);
    }
    CU_add_test(s, "advise: ranked plans that simulate reproduces", test_advise);
    CU_add_test(s, "whatif ID DOC suggests --whatif", test_whatif_doc_needs_flag);
    unsigned fails = rv_test_run();
    if (!fails && !traces) {
        printf("skip: 5 cases need the public traces (RV_SHARED_TRACES unset or without "
               "them); the other cases passed\n");
        return RV_TEST_SKIP;
    }
    return fails ? 1 : 0;
}
