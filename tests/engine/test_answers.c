/* Answers a person can read and believe (issue 31): what bounds the step
 * agrees with the critical path's shares and is said when a GPU-side change
 * cannot move it; "measured" means one thing; a knob that cannot act says
 * so; a lower power cap is never faster. Runs on the bundled sample; the
 * cases on public traces skip when RV_SHARED_TRACES is absent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "simulate/rv_power.h"
#include "reader/rv_et.h"
#include "run/rv_run.h"
#include "simulate/rv_report.h"
#include "util/rv_round.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

#define SAMPLE "data/samples/resnet50-v100-workers0.pt.trace.json.gz"

static rv_test_loaded sample;
static const char *traces; /* NULL without the public traces */

static int run(const rv_test_loaded *l, const char *text, rv_run_result **out)
{
    rv_whatif *w = NULL;
    rv_error err;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    *out = NULL;
    int rc = rv_whatif_parse_text(text, &w, &err);
    if (rc == 0)
        rc = rv_run(l->g, l->s, w, &opts, out, &err);
    if (rc)
        printf("\n    %s: %s (%s)", text, err.message, err.field);
    rv_whatif_free(w);
    return rc;
}

static int has_warning(const rv_run_result *r, const char *code)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strcmp(r->warnings[i].code, code) == 0)
            return 1;
    return 0;
}

/* bound_by names the largest of the critical path's resource shares. */
static void check_bound(const rv_run_result *r, const char *what)
{
    const json_t *cp = r->critical_path, *sh = json_object_get(cp, "shares");
    const char *bound = json_string_value(json_object_get(cp, "bound_by"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(bound);
    CU_ASSERT_TRUE_FATAL(json_is_object(sh));
    double b = json_number_value(json_object_get(sh, bound)), sum = 0;
    static const char *const res[] = {"cpu", "gpu", "data", "comm"};
    for (size_t k = 0; k < 4; k++) {
        double v = json_number_value(json_object_get(sh, res[k]));
        CU_ASSERT(v <= b);
        sum += v;
    }
    sum += json_number_value(json_object_get(sh, "wait"));
    CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-6);
    printf("\n    %s: bound by %s (%.0f%%)", what, bound, b * 100);
}

static void test_bound_agrees(void)
{
    static const char *const shared[] = {"hta/v100-1rank-ns-resolution.json.gz",
                                         "tracelens/mi300-qwen-forward.json.gz",
                                         "hta/a100-2rank-nccl.json.gz"};
    rv_run_result *r = NULL;
    CU_ASSERT_EQUAL_FATAL(run(&sample, "{}", &r), 0);
    check_bound(r, "sample");
    rv_run_result_free(r);
    for (size_t i = 0; traces && i < sizeof(shared) / sizeof(shared[0]); i++) {
        rv_test_loaded l;
        if (rv_test_load(traces, shared[i], &l) == 0 && run(&l, "{}", &r) == 0) {
            check_bound(r, shared[i]);
            /* The GPU-busy V100 trace is bound by the GPU. */
            if (i == 0)
                CU_ASSERT_STRING_EQUAL(
                    json_string_value(json_object_get(r->critical_path, "bound_by")), "gpu");
            rv_run_result_free(r);
        }
        rv_test_unload(&l);
    }
}

/* AMP on the sample (bound by the CPU and the input) moves the step less
 * than 5% and says why; an input-side change does not warn. */
static void test_amp_cpu_bound(void)
{
    rv_run_result *r = NULL;
    CU_ASSERT_EQUAL_FATAL(run(&sample, "{\"optimizations\":[{\"kind\":\"amp\"}]}", &r), 0);
    printf("\n    amp: %.4fx", r->sum.speedup);
    CU_ASSERT(fabs(r->sum.speedup - 1) < RV_RUN_BOUND_MOVE);
    CU_ASSERT(has_warning(r, "cpu_bound") || has_warning(r, "input_bound"));
    rv_run_result_free(r);
    CU_ASSERT_EQUAL_FATAL(run(&sample, "{\"power_limit_w\":250}", &r), 0);
    CU_ASSERT(has_warning(r, "cpu_bound") || has_warning(r, "input_bound"));
    rv_run_result_free(r);
    CU_ASSERT_EQUAL_FATAL(
        run(&sample, "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4}]}", &r), 0);
    CU_ASSERT_FALSE(has_warning(r, "cpu_bound") || has_warning(r, "input_bound"));
    rv_run_result_free(r);
}

/* measured_us is steps.median_us in the same answer and the figure the
 * store lists (rv_report_trace_figures): one window everywhere. */
static void check_measured(const rv_test_loaded *l, const char *what)
{
    rv_run_result *r = NULL;
    rv_trace_figures f;
    CU_ASSERT_EQUAL_FATAL(run(l, "{}", &r), 0);
    json_t *a = rv_run_render(r, what);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    double m = json_number_value(json_object_get(a, "measured_us"));
    double med = json_number_value(json_object_get(json_object_get(a, "steps"), "median_us"));
    rv_report_trace_figures(l->tr, &f);
    printf("\n    %s: measured %.1f us, steps.median %.1f us, listed %.1f us", what, m, med,
           f.measured_us);
    CU_ASSERT(m > 0);
    if (l->g->niters > 0)
        CU_ASSERT_EQUAL(m, med);
    /* The store's figure, rounded as every JSON reply rounds it. */
    CU_ASSERT_EQUAL(m, rv_round_value(f.measured_us, RV_ROUND_TIME_US));
    json_decref(a);
    rv_run_result_free(r);
}

static void test_measured_one_window(void)
{
    static const char *const shared[] = {
        "hta/v100-1rank-ns-resolution.json.gz", "tracelens/mi300-qwen-forward.json.gz",
        "hta/a100-2rank-nccl.json.gz", "kineto/resnet50-v100-workers4.pt.trace.json.gz"};
    check_measured(&sample, "sample");
    for (size_t i = 0; traces && i < sizeof(shared) / sizeof(shared[0]); i++) {
        rv_test_loaded l;
        if (rv_test_load(traces, shared[i], &l) == 0)
            check_measured(&l, shared[i]);
        rv_test_unload(&l);
    }
}

/* An execution trace alone is modelled: measured_us, replay_error and
 * steps are null, per_iteration's measured_us too. */
static void test_et_alone_not_measured(void)
{
    char p[4096];
    rv_et *et = NULL;
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_run_result *r = NULL;
    rv_error e;
    if (!traces) {
        printf("\n    skipped: no public traces");
        return;
    }
    snprintf(p, sizeof(p), "%s/%s", traces, "param/resnet-2080ti.et.json.gz");
    CU_ASSERT_EQUAL_FATAL(rv_et_read_file(p, NULL, &et, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_et_to_trace(et, "A100", &t, NULL, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &e), 0);
    rv_test_loaded l = {t, g, s};
    CU_ASSERT_EQUAL_FATAL(run(&l, "{}", &r), 0);
    json_t *a = rv_run_render(r, "et");
    CU_ASSERT_TRUE(json_is_null(json_object_get(a, "measured_us")));
    CU_ASSERT_TRUE(json_is_null(json_object_get(a, "replay_error")));
    CU_ASSERT_TRUE(json_is_null(json_object_get(a, "steps")));
    CU_ASSERT_TRUE(json_number_value(json_object_get(a, "baseline_us")) > 0);
    json_t *it = json_array_get(json_object_get(a, "per_iteration"), 0);
    CU_ASSERT_TRUE(json_is_null(json_object_get(it, "measured_us")));
    json_t *sum = rv_run_summary_render(&r->sum);
    CU_ASSERT_TRUE(json_is_null(json_object_get(sum, "measured_us")));
    CU_ASSERT_TRUE(json_is_null(json_object_get(sum, "replay_error")));
    json_decref(sum);
    json_decref(a);
    rv_run_result_free(r);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
    rv_et_free(et);
}

/* The most decimals of any number in the JSON text s. */
static int max_decimals(const char *s)
{
    int most = 0;
    for (const char *p = s; *p; p++) {
        if (*p != '.' || p == s || p[-1] < '0' || p[-1] > '9')
            continue;
        int n = 0;
        while (p[1 + n] >= '0' && p[1 + n] <= '9')
            n++;
        if (n > most)
            most = n;
    }
    return most;
}

/* Decimals of the number after "key": in s. */
static int decimals_of(const char *s, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(s, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    const char *dot = NULL;
    while ((*p >= '0' && *p <= '9') || *p == '.' || *p == '-') {
        if (*p == '.')
            dot = p;
        p++;
    }
    return dot ? (int)(p - dot - 1) : 0;
}

/* Numbers are rounded in one place: times to 0.1 us (3 significant
 * digits below 10 us), ratios to 4 decimals, the rest to at most 10
 * decimals printed shortest; echoed inputs as given. */
static void test_rounding(void)
{
    CU_ASSERT_EQUAL(rv_round_value(176385.04999, RV_ROUND_TIME_US), 176385.0);
    CU_ASSERT_EQUAL(rv_round_value(1.23456, RV_ROUND_TIME_US), 1.23);
    CU_ASSERT_EQUAL(rv_round_value(0.0123456, RV_ROUND_TIME_US), 0.0123);
    CU_ASSERT_EQUAL(rv_round_value(1.00041171, RV_ROUND_RATIO), 1.0004);
    CU_ASSERT_EQUAL(rv_round_value(28.874345999999946, RV_ROUND_OTHER), 28.874346);
    CU_ASSERT_EQUAL(rv_round_key_class("speedup"), RV_ROUND_RATIO);
    CU_ASSERT_EQUAL(rv_round_key_class("replay_error"), RV_ROUND_RATIO);
    CU_ASSERT_EQUAL(rv_round_key_class("gpu_us"), RV_ROUND_TIME_US);
    CU_ASSERT_EQUAL(rv_round_key_class("energy_j"), RV_ROUND_OTHER);
    json_t *j = json_pack("{s:f,s:{s:f},s:{s:f},s:f}", "x", 0.8, "scenario", "power_limit_frac",
                          0.80000000000000004 + 1e-13, "mfu", "baseline", 0.123456789, "tflops",
                          15.699999999999999);
    char *t = rv_round_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    printf("\n    %s", t);
    CU_ASSERT_STRING_EQUAL(t, "{\"mfu\":{\"baseline\":0.1235},\"scenario\":{\"power_limit_"
                              "frac\":0.8000000000001},\"tflops\":15.7,\"x\":0.8}");
    free(t);
    json_decref(j);

    rv_run_result *r = NULL;
    CU_ASSERT_EQUAL_FATAL(
        run(&sample, "{\"optimizations\":[{\"kind\":\"amp\"}],\"power_limit_w\":250}", &r), 0);
    size_t len;
    char *text = rv_run_render_bytes(r, 1, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    printf("\n    answer: %zu bytes, at most %d decimals", len, max_decimals(text));
    CU_ASSERT(max_decimals(text) <= 10);
    CU_ASSERT(decimals_of(text, "predicted_us") <= 1);
    CU_ASSERT(decimals_of(text, "speedup") <= 4);
    CU_ASSERT(decimals_of(text, "replay_error") <= 4);
    CU_ASSERT_PTR_NULL(strstr(text, "0000000"));
    CU_ASSERT_PTR_NULL(strstr(text, "9999999"));
    free(text);
    rv_run_result_free(r);
}

/* A knob that cannot act says so: job on a single trace; samples_per_step
 * (old name batch_size) relabels the step and warns when it contradicts
 * the batch the shapes say. */
static void test_knobs_say_so(void)
{
    rv_run_result *r = NULL;
    rv_whatif *w = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(run(&sample, "{\"job\":{\"world_size\":4}}", &r), 0);
    CU_ASSERT(has_warning(r, "no_effect"));
    rv_run_result_free(r);
    CU_ASSERT_EQUAL_FATAL(run(&sample, "{\"batch_size\":64}", &r), 0);
    CU_ASSERT(has_warning(r, "samples_per_step_mismatch"));
    CU_ASSERT_EQUAL(r->sum.speedup, 1.0);
    rv_run_result_free(r);
    CU_ASSERT_EQUAL_FATAL(run(&sample, "{\"samples_per_step\":64}", &r), 0);
    CU_ASSERT(has_warning(r, "samples_per_step_mismatch"));
    rv_run_result_free(r);
    /* The sample's batch is 32: no contradiction, no warning. */
    CU_ASSERT_EQUAL_FATAL(run(&sample, "{\"samples_per_step\":32}", &r), 0);
    CU_ASSERT_FALSE(has_warning(r, "samples_per_step_mismatch"));
    CU_ASSERT_FALSE(has_warning(r, "no_effect"));
    rv_run_result_free(r);
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{\"samples_per_step\":32,\"batch_size\":64}", &w, &err),
                    RV_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.field, "batch_size");
    rv_whatif_free(w);
}

/* A lower power cap is never predicted faster: the per-class slowdown is
 * at least 1 below the trace's cap on every GPU of the table, and a sweep
 * from 100% down to 50% of the default cap never shortens the predicted
 * step, on the sample and on the public traces. */
static void sweep_power(const rv_test_loaded *l, const char *what)
{
    double prev = 0;
    int bad = 0;
    printf("\n    %s:", what);
    for (int pct = 100; pct >= 50; pct -= 5) {
        char doc[64];
        rv_run_result *r = NULL;
        snprintf(doc, sizeof(doc), "{\"power_limit_frac\":%.2f}", pct / 100.0);
        if (run(l, doc, &r) != 0) {
            CU_FAIL("power sweep point refused");
            return;
        }
        printf(" %d%%:%.4fx", pct, r->sum.speedup);
        if (r->sum.predicted_us < prev || r->sum.predicted_us < r->sum.baseline_us * (1 - 1e-12))
            bad = 1;
        prev = r->sum.predicted_us;
        rv_run_result_free(r);
    }
    CU_ASSERT_FALSE(bad);
}

static void test_power_monotone(void)
{
    static const char *const shared[] = {
        "kineto/resnet50-v100-workers4.pt.trace.json.gz", "hta/v100-1rank-ns-resolution.json.gz",
        "hta/a100-rank0-of-16-five-streams.json.gz", "tracelens/mi300-qwen-forward.json.gz",
        "param/resnet-2080ti.kineto.json.gz"};
    size_t n;
    const rv_hw *tab = rv_hw_table(&n);
    for (size_t i = 0; i < n; i++) {
        rv_power_model pm;
        rv_power_init(&pm, &tab[i]);
        for (int c = 0; c < RV_KC_COUNT; c++)
            for (double f = 1.0; f >= 0.5; f -= 0.05) {
                double cap = pm.tdp_w * f;
                if (cap < pm.min_pl_w)
                    break;
                CU_ASSERT(rv_power_slowdown(&pm, c, pm.tdp_w, cap) >= 1.0);
                CU_ASSERT(rv_power_slowdown(&pm, c, pm.tdp_w, cap) >=
                          rv_power_slowdown(&pm, c, pm.tdp_w, cap + pm.tdp_w * 0.05) - 1e-12);
            }
    }
    sweep_power(&sample, "sample");
    for (size_t i = 0; traces && i < sizeof(shared) / sizeof(shared[0]); i++) {
        rv_test_loaded l;
        if (rv_test_load(traces, shared[i], &l) == 0)
            sweep_power(&l, shared[i]);
        rv_test_unload(&l);
    }
}

/* H800 is not silently an H100: its own row, NVLink 400 GB/s. */
static void test_h800_row(void)
{
    const rv_hw *h800 = rv_hw_lookup("NVIDIA H800");
    const rv_hw *h100 = rv_hw_lookup("NVIDIA H100 80GB HBM3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h800);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h100);
    CU_ASSERT_STRING_EQUAL(h800->name, "H800-SXM5");
    CU_ASSERT_STRING_EQUAL(h100->name, "H100-SXM5");
    CU_ASSERT(h800->nvlink_gbps < h100->nvlink_gbps);
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA H800 PCIe")->name, "H100-PCIe");
}

int main(void)
{
    if (rv_test_load(NULL, SAMPLE, &sample) != 0) {
        printf("skip: the bundled sample %s is missing\n", SAMPLE);
        return 77;
    }
    traces = rv_test_shared_traces("hta/v100-1rank-ns-resolution.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("answers", NULL, NULL);
    CU_add_test(s, "bound_agrees", test_bound_agrees);
    CU_add_test(s, "amp_cpu_bound", test_amp_cpu_bound);
    CU_add_test(s, "measured_one_window", test_measured_one_window);
    CU_add_test(s, "et_alone_not_measured", test_et_alone_not_measured);
    CU_add_test(s, "rounding", test_rounding);
    CU_add_test(s, "knobs_say_so", test_knobs_say_so);
    CU_add_test(s, "power_monotone", test_power_monotone);
    CU_add_test(s, "h800_row", test_h800_row);
    unsigned fails = rv_test_run();
    rv_test_unload(&sample);
    return fails ? 1 : 0;
}
