/* The graph builder, the simulator and the reports on the real public
 * traces in $RV_SHARED_TRACES (the program exits 77, skipped, when they are
 * absent; a missing file inside a present folder is a failure).
 *
 * The golden table's task and step counts and measured median step were
 * computed independently from the raw JSON with python3: json + gzip,
 * tasks = X events of the runtime/driver and kernel/memcpy/memset
 * categories with ts > 0, measured = statistics.median of the "dur" of the
 * ProfilerStep#N cpu_op/user_annotation events. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"
#include "common/rv_test_util.h"

static const char *g_shared;

typedef struct golden {
    const char *file;
    size_t tasks;
    size_t steps;
    /* Median of the steady ProfilerSteps (all but the first of three or
     * more; the mean of the middle pair for an even count), 0 = whole
     * trace. */
    double measured_us;
} golden;

/* Training traces with steps (the replay-error target applies to these). */
static const golden goldens[] = {
    {"kineto/resnet50-v100-workers0.pt.trace.json.gz", 21019, 6, 176468.0},
    {"kineto/resnet50-v100-workers4.pt.trace.json.gz", 21343, 6, 126272.0},
    {"hta/v100-1rank-ns-resolution.json.gz", 21424, 5, 95624.214},
    {"hta/a100-2rank-nccl.json.gz", 12514, 3, 222331.574},
    {"hta/a100-rank0-of-16-five-streams.json.gz", 41671, 5, 216167.5},
    {"param/dlrm-8rank/worker0.kineto.json.gz", 786, 1, 14455.0},
    {"param/dlrm-8rank/worker1.kineto.json.gz", 853, 1, 19901.0},
    {"param/dlrm-8rank/worker3.kineto.json.gz", 878, 1, 19313.0},
    {"param/dlrm-8rank/worker7.kineto.json.gz", 766, 1, 12509.0},
    /* No ProfilerStep: steps from Optimizer.zero_grad# to the next. */
    {"param/linear-2080ti.kineto.json.gz", 24871, 39, 0},
    {"tracelens/h100-bert-small-forward.json.gz", 193, 1, 4426.114},
    {"hta/edge/amd-mi250-rocm62.json.gz", 37, 2, 4668.682},
};

static int load(const char *rel, rv_trace **t, rv_graph **g, rv_sim **s, rv_error *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", g_shared, rel);
    *t = NULL;
    *g = NULL;
    *s = NULL;
    int rc = rv_kineto_read_file(path, NULL, t, err);
    if (rc == 0)
        rc = rv_graph_build(*t, NULL, g, err);
    if (rc == 0)
        rc = rv_sim_run(*g, RV_SCHED_EARLIEST_START, s, err);
    return rc;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_golden_replay(void)
{
    size_t n = 0;
    double errs[sizeof(goldens) / sizeof(goldens[0])];
    for (size_t i = 0; i < sizeof(goldens) / sizeof(goldens[0]); i++) {
        if (!rv_test_have_trace(g_shared, goldens[i].file))
            continue;
        rv_trace *t;
        rv_graph *g;
        rv_sim *s;
        rv_error err;
        rv_error_clear(&err);
        int rc = load(goldens[i].file, &t, &g, &s, &err);
        if (rc != 0)
            fprintf(stderr, "\n%s: %s\n", goldens[i].file, err.message);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        CU_ASSERT_EQUAL(g->ntasks, goldens[i].tasks);
        CU_ASSERT_EQUAL(g->niters, goldens[i].steps);
        rv_iter_figures f;
        CU_ASSERT_EQUAL(rv_report_iteration(g, s, RV_ITER_MEDIAN, &f, &err), 0);
        if (goldens[i].measured_us > 0)
            CU_ASSERT_DOUBLE_EQUAL(f.measured_us, goldens[i].measured_us, 0.01);
        errs[n] = fabs(f.simulated_us - f.measured_us) / f.measured_us;
        printf("\n  %-48s replay error %.4f%%", goldens[i].file, 100 * errs[n]);
        CU_ASSERT(errs[n] <= 0.05); /* max target */
        n++;
        rv_sim_free(s);
        rv_graph_free(g);
        rv_trace_free(t);
    }
    CU_ASSERT_FATAL(n > 0);
    qsort(errs, n, sizeof(double), cmp_d);
    CU_ASSERT(errs[n / 2] <= 0.02); /* median target */
}

/* Work queued before the profiler started: the MI300 Qwen forward's step
 * opens with a synchronize that waits 13 ms for 463 kernels launched
 * before the window. The step is measured from its marker, before that
 * wait, and the replay must keep it (27.8% too fast before). */
static void test_queued_before_window(void)
{
    rv_trace *t;
    rv_graph *g;
    rv_sim *s;
    rv_error err;
    rv_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(load("tracelens/mi300-qwen-forward.json.gz", &t, &g, &s, &err), 0);
    CU_ASSERT_EQUAL(g->prewindow_gpu, 463);
    CU_ASSERT(g->prewindow_gpu_ns > 13000000 && g->prewindow_gpu_ns < 14000000);
    rv_iter_figures f;
    CU_ASSERT_EQUAL(rv_report_iteration(g, s, RV_ITER_MEDIAN, &f, &err), 0);
    double e = fabs(f.simulated_us - f.measured_us) / f.measured_us;
    printf("\n  mi300 qwen forward: measured %.1f us, simulated %.1f us (%.3f%%)", f.measured_us,
           f.simulated_us, 100 * e);
    CU_ASSERT(e <= 0.03);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* A HIP graph: one hipGraphLaunch runs 421 kernels, the first 6.9 ms after
 * the call. The graph's launch lag is kept from the trace (36% too fast
 * when each kernel took one kernel's launch latency). */
static void test_graph_launch(void)
{
    rv_trace *t;
    rv_graph *g;
    rv_sim *s;
    rv_error err;
    rv_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(
        load("tracelens/mi300-vllm-decode-full-graph-exec.json.gz", &t, &g, &s, &err), 0);
    rv_iter_figures f;
    CU_ASSERT_EQUAL(rv_report_iteration(g, s, RV_ITER_MEDIAN, &f, &err), 0);
    double e = fabs(f.simulated_us - f.measured_us) / f.measured_us;
    printf("\n  mi300 vllm graph: measured %.1f us, simulated %.1f us (%.3f%%)", f.measured_us,
           f.simulated_us, 100 * e);
    CU_ASSERT(e <= 0.03);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* The linear model's step is ~24.8 ms per the traces' manifest. */
static void test_marker_steps(void)
{
    rv_trace *t;
    rv_graph *g;
    rv_sim *s;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load("param/linear-2080ti.kineto.json.gz", &t, &g, &s, &err), 0);
    rv_iter_figures f;
    CU_ASSERT_EQUAL(rv_report_iteration(g, s, RV_ITER_MEDIAN, &f, &err), 0);
    CU_ASSERT(fabs(f.measured_us - 24800) < 500);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

static void test_rejections(void)
{
    static const struct {
        const char *file;
        const char *says;
    } cases[] = {
        {"hta/edge/cpu-only.json.gz", "CPU-only"},
        {"hta/edge/cupti-counters-no-kernels.json.gz", "counters-only"},
        {"hta/edge/rank-non-gpu.json.gz", "no GPU kernels"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rv_trace *t;
        rv_graph *g;
        rv_sim *s;
        rv_error err;
        rv_error_clear(&err);
        CU_ASSERT_EQUAL(load(cases[i].file, &t, &g, &s, &err), RV_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.message, cases[i].says));
        rv_trace_free(t);
    }
}

/* Direction and magnitude on a real CPU-bound trace: ResNet-50 on V100 with
 * a single-process data loader keeps the GPU 56% busy, so halving every GPU
 * task barely helps while halving the CPU's own time (gaps and calls)
 * helps a lot. */
static void test_resnet_sensitivity(void)
{
    rv_trace *t;
    rv_graph *g;
    rv_sim *s, *sg, *sc;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &t, &g, &s, &err),
                          0);
    rv_graph *gg = rv_graph_clone(g), *gc = rv_graph_clone(g);
    for (size_t i = 0; i < g->ntasks; i++) {
        if (gg->tasks[i].kind != RV_TASK_CPU)
            gg->tasks[i].dur_ns /= 2;
        else {
            gc->tasks[i].gap_ns /= 2;
            gc->tasks[i].dur_ns /= 2;
        }
    }
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(gg, RV_SCHED_EARLIEST_START, &sg, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(gc, RV_SCHED_EARLIEST_START, &sc, &err), 0);
    rv_iter_figures b, fg, fc;
    CU_ASSERT_EQUAL(rv_report_compare(g, s, gg, sg, RV_ITER_MEDIAN, &b, &fg, &err), 0);
    CU_ASSERT_EQUAL(rv_report_compare(g, s, gc, sc, RV_ITER_MEDIAN, &b, &fc, &err), 0);
    double speed_gpu = b.simulated_us / fg.simulated_us;
    double speed_cpu = b.simulated_us / fc.simulated_us;
    printf("\n  resnet50 v100: GPU x0.5 -> %.3fx, CPU x0.5 -> %.3fx", speed_gpu, speed_cpu);
    CU_ASSERT(speed_gpu >= 1.0 && speed_gpu < 1.15);
    CU_ASSERT(speed_cpu > 1.5 && speed_cpu <= 2.0);

    /* GPU compute per step is the kernels' time: ~98 ms per the manifest. */
    rv_window w = rv_report_window(g, s, -1);
    json_t *bd = rv_report_breakdown(g, s, &w);
    double compute = json_real_value(json_object_get(json_object_get(bd, "gpu"), "compute_us"));
    CU_ASSERT(compute > 90000 && compute < 105000);
    json_decref(bd);
    rv_sim_free(sg);
    rv_sim_free(sc);
    rv_sim_free(s);
    rv_graph_free(gg);
    rv_graph_free(gc);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* A GPU-bound trace (V100, GPU 98% busy, the launch queue fills up): the
 * opposite: GPU time drives the step, CPU time does not. */
static void test_gpu_bound_sensitivity(void)
{
    rv_trace *t;
    rv_graph *g;
    rv_sim *s, *sg;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load("hta/v100-1rank-ns-resolution.json.gz", &t, &g, &s, &err), 0);
    rv_graph *gg = rv_graph_clone(g);
    for (size_t i = 0; i < g->ntasks; i++)
        if (gg->tasks[i].kind != RV_TASK_CPU)
            gg->tasks[i].dur_ns = gg->tasks[i].dur_ns * 3 / 4;
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(gg, RV_SCHED_EARLIEST_START, &sg, &err), 0);
    rv_iter_figures b, f;
    CU_ASSERT_EQUAL(rv_report_compare(g, s, gg, sg, RV_ITER_MEDIAN, &b, &f, &err), 0);
    double speed = b.simulated_us / f.simulated_us;
    printf("\n  v100 gpu-bound: GPU x0.75 -> %.3fx", speed);
    CU_ASSERT(speed > 1.15 && speed < 1.34);
    rv_window w = rv_report_window(g, s, -1);
    json_t *cp = rv_report_critical_path(g, s, &w, 10);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(cp, "bound_by")), "gpu");
    json_decref(cp);
    rv_sim_free(sg);
    rv_sim_free(s);
    rv_graph_free(gg);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* Every file of the public traces folder either simulates or is refused
 * with the reason this table gives; nothing else (a new file must be added
 * here on purpose). */
static void test_every_public_trace(void)
{
    static const struct {
        const char *file;
        int code;
        const char *says;
    } refused[] = {
        {"hta/edge/cpu-only.json.gz", RV_ERR_UNSUPPORTED, "CPU-only"},
        {"hta/edge/cupti-counters-no-kernels.json.gz", RV_ERR_UNSUPPORTED, "counters-only"},
        {"hta/edge/no-distributed-info.json.gz", RV_ERR_UNSUPPORTED, "no GPU kernels"},
        {"hta/edge/rank-non-gpu.json.gz", RV_ERR_UNSUPPORTED, "no GPU kernels"},
    };
    static const char *const dirs[] = {"kineto",           "hta",       "hta/edge", "param",
                                       "param/dlrm-8rank", "tracelens", "chakra"};
    size_t simulated = 0, rejected = 0;
    for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
        char dpath[4096];
        snprintf(dpath, sizeof(dpath), "%s/%s", g_shared, dirs[d]);
        DIR *dir = opendir(dpath);
        CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            const char *n = de->d_name;
            size_t len = strlen(n);
            if (!(len > 5 && (strcmp(n + len - 5, ".json") == 0 ||
                              (len > 8 && strcmp(n + len - 8, ".json.gz") == 0))))
                continue;
            char rel[512];
            snprintf(rel, sizeof(rel), "%s/%s", dirs[d], n);
            /* The reference overlay is HTA's output, checked separately. */
            if (strstr(n, "reference-overlay"))
                continue;
            rv_trace *t;
            rv_graph *g;
            rv_sim *s;
            rv_error err;
            rv_error_clear(&err);
            int rc = load(rel, &t, &g, &s, &err);
            int expect = 0;
            const char *says = NULL;
            /* PyTorch execution traces (ET) are a different format. */
            if (strstr(n, ".et.json") || strncmp(rel, "chakra/", 7) == 0) {
                expect = RV_ERR_UNSUPPORTED;
                says = "execution trace";
            }
            for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
                if (strcmp(refused[k].file, rel) == 0) {
                    expect = refused[k].code;
                    says = refused[k].says;
                }
            if (rc != expect)
                printf("\n  %s: rc %d, expected %d (%s)", rel, rc, expect, err.message);
            CU_ASSERT_EQUAL(rc, expect);
            if (says)
                CU_ASSERT_PTR_NOT_NULL(strstr(err.message, says));
            if (rc == 0)
                simulated++;
            else if (!strstr(n, ".et.json") && strncmp(rel, "chakra/", 7) != 0)
                rejected++;
            rv_sim_free(s);
            rv_graph_free(g);
            rv_trace_free(t);
        }
        closedir(dir);
    }
    printf("\n  public traces: %zu simulate, %zu Kineto traces refused with a reason (and every "
           "execution trace)",
           simulated, rejected);
    CU_ASSERT_EQUAL(rejected, sizeof(refused) / sizeof(refused[0]));
    CU_ASSERT(simulated >= 25);
}

/* HTA's critical path for the simple-add benchmark, overlaid on the trace
 * (args.critical = 1), against ours on the same API calls and GPU tasks
 * matched by name and measured start. */
static void test_critical_path_vs_hta(void)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/hta/critical-path-simple-add.reference-overlay.json.gz",
             g_shared);
    size_t n;
    char *buf = rv_test_read_gz(path, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    json_t *ref = json_loads(buf, 0, NULL);
    free(buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);

    rv_trace *t;
    rv_graph *g;
    rv_sim *s;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load("hta/critical-path-simple-add.json.gz", &t, &g, &s, &err), 0);
    rv_window w = rv_report_window(g, s, -1);
    uint8_t *crit = calloc(g->ntasks, 1);
    size_t ours = rv_report_critical_tasks(g, s, &w, crit);
    size_t theirs = 0, both = 0;
    json_t *ev, *evs = json_object_get(ref, "traceEvents");
    size_t i;
    json_array_foreach(evs, i, ev)
    {
        const char *cat = json_string_value(json_object_get(ev, "cat"));
        json_t *c = json_object_get(json_object_get(ev, "args"), "critical");
        if (!cat || !c || json_integer_value(c) != 1)
            continue;
        if (strcmp(cat, "kernel") && strcmp(cat, "cuda_runtime") && strcmp(cat, "gpu_memcpy") &&
            strcmp(cat, "gpu_memset"))
            continue;
        theirs++;
        /* Microseconds near 1.7e15 keep ~0.25 us in a double: compare in us. */
        double ts = json_number_value(json_object_get(ev, "ts"));
        const char *name = json_string_value(json_object_get(ev, "name"));
        for (size_t k = 0; k < g->ntasks; k++)
            if (crit[k] &&
                fabs((double)(g->tasks[k].meas_start_ns + g->origin_ns) / 1000.0 - ts) < 0.5 &&
                strcmp(rv_trace_str(t, g->tasks[k].name), name) == 0) {
                both++;
                break;
            }
    }
    printf("\n  critical path vs HTA: ours %zu, HTA %zu, both %zu (recall %.2f, precision %.2f)",
           ours, theirs, both, (double)both / (double)theirs, (double)both / (double)ours);
    CU_ASSERT(theirs > 200);
    CU_ASSERT((double)both / (double)theirs >= 0.85);
    CU_ASSERT((double)both / (double)ours >= 0.70);
    free(crit);
    json_decref(ref);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

int main(void)
{
    g_shared = rv_test_require_shared_traces("README.md");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("graph_real", NULL, NULL);
    CU_add_test(s, "golden replay on real traces", test_golden_replay);
    CU_add_test(s, "steps from optimizer markers", test_marker_steps);
    CU_add_test(s, "CPU-only and counters-only rejected", test_rejections);
    CU_add_test(s, "CPU-bound resnet sensitivity", test_resnet_sensitivity);
    CU_add_test(s, "GPU-bound sensitivity", test_gpu_bound_sensitivity);
    CU_add_test(s, "critical path vs HTA reference", test_critical_path_vs_hta);
    CU_add_test(s, "every public trace simulates or is refused", test_every_public_trace);
    CU_add_test(s, "work queued before the window is replayed", test_queued_before_window);
    CU_add_test(s, "a graph launch keeps its lag", test_graph_launch);
    return rv_test_run() ? 1 : 0;
}
