/* "power_limit_frac": a power limit as a share of the trace GPU's default
 * limit. On the public V100, A100 and H100 traces, 0.8 gives the same
 * answer as power_limit_w = 0.8 x that GPU's default; a GPU outside the
 * hardware table, and both fields at once, are refused naming the field.
 * Skips (77) without RV_SHARED_TRACES. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

static const char *traces;

typedef rv_test_loaded loaded;

static int load(const char *rel, loaded *l)
{
    return rv_test_load(traces, rel, l);
}

static void unload(loaded *l)
{
    rv_test_unload(l);
}

/* Runs the what-if text on l; 0 and *out, or the error in *err. */
static int run(const loaded *l, const char *text, rv_run_result **out, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    *out = NULL;
    int rc = rv_whatif_parse_text(text, &w, err);
    if (rc == 0)
        rc = rv_run(l->g, l->s, w, &opts, out, err);
    rv_whatif_free(w);
    return rc;
}

/* 0.8 of the default limit and the watts it stands for give one answer. */
static void same_as_watts(const char *rel, double default_w)
{
    loaded l;
    rv_run_result *a = NULL, *b = NULL;
    rv_error err;
    char watts[64];
    CU_ASSERT_EQUAL_FATAL(load(rel, &l), 0);
    const rv_hw *hw = rv_hw_lookup(rv_trace_str(l.tr, l.tr->platform_gpu));
    CU_ASSERT_PTR_NOT_NULL_FATAL(hw);
    CU_ASSERT_DOUBLE_EQUAL(hw->default_pl_w, default_w, 1e-9);
    snprintf(watts, sizeof(watts), "{\"power_limit_w\":%.17g}", 0.8 * default_w);
    int rc = run(&l, "{\"power_limit_frac\":0.8}", &a, &err);
    if (rc)
        printf("\n    %s: %s (%s)", rel, err.message, err.field);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(run(&l, watts, &b, &err), 0);
    printf("\n    %s (%s): 0.8 -> %.0f W: %.1f us vs %.1f us, %.3f J vs %.3f J", rel, hw->name,
           0.8 * default_w, a->sum.predicted_us, b->sum.predicted_us, a->sum.energy_j,
           b->sum.energy_j);
    CU_ASSERT_EQUAL(a->sum.predicted_us, b->sum.predicted_us);
    CU_ASSERT_EQUAL(a->sum.energy_j, b->sum.energy_j);
    CU_ASSERT_EQUAL(a->sum.warnings, b->sum.warnings);
    CU_ASSERT_EQUAL(a->pred_energy.power_limit_w, b->pred_energy.power_limit_w);
    /* A cap below the default never speeds the GPU up. */
    CU_ASSERT(a->sum.predicted_us >= a->sum.baseline_us);
    rv_run_result_free(a);
    rv_run_result_free(b);
    unload(&l);
}

static void test_v100(void)
{
    same_as_watts("kineto/resnet50-v100-workers0.pt.trace.json.gz", 300);
}

static void test_a100(void)
{
    same_as_watts("hta/a100-rank0-of-16-five-streams.json.gz", 400);
}

static void test_h100(void)
{
    same_as_watts("tracelens/h100-bert-small-forward.json.gz", 700);
}

/* MI300X and B200 (no public trace of either here): the table's default
 * limits are the datasheets' board powers, 750 W (MI300X OAM) and 1000 W
 * (HGX B200), and with "gpu" naming them 0.8 resolves to 600 W and 800 W,
 * the same answer as those watts. */
static void test_mi300_b200(void)
{
    static const struct {
        const char *device, *gpu;
        double default_w;
    } rows[] = {{"AMD Instinct MI300X", "MI300X", 750}, {"NVIDIA B200", "B200", 1000}};
    loaded l;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const rv_hw *hw = rv_hw_lookup(rows[i].device);
        CU_ASSERT_PTR_NOT_NULL_FATAL(hw);
        CU_ASSERT_STRING_EQUAL(hw->name, rows[i].gpu);
        CU_ASSERT_DOUBLE_EQUAL(hw->default_pl_w, rows[i].default_w, 1e-9);
        CU_ASSERT(hw->min_pl_w < 0.8 * hw->default_pl_w);
        char frac[96], watts[96];
        snprintf(frac, sizeof(frac), "{\"gpu\":\"%s\",\"power_limit_frac\":0.8}", rows[i].gpu);
        snprintf(watts, sizeof(watts), "{\"gpu\":\"%s\",\"power_limit_w\":%.17g}", rows[i].gpu,
                 0.8 * rows[i].default_w);
        rv_run_result *a = NULL, *b = NULL;
        CU_ASSERT_EQUAL_FATAL(run(&l, frac, &a, &err), 0);
        CU_ASSERT_EQUAL_FATAL(run(&l, watts, &b, &err), 0);
        printf("\n    %s: 0.8 -> %.0f W, %.1f us vs %.1f us", rows[i].gpu,
               a->pred_energy.power_limit_w, a->sum.predicted_us, b->sum.predicted_us);
        CU_ASSERT_DOUBLE_EQUAL(a->pred_energy.power_limit_w, 0.8 * rows[i].default_w, 1e-9);
        CU_ASSERT_EQUAL(a->sum.predicted_us, b->sum.predicted_us);
        CU_ASSERT_EQUAL(a->sum.energy_j, b->sum.energy_j);
        rv_run_result_free(a);
        rv_run_result_free(b);
    }
    unload(&l);
}

/* Refusals name power_limit_frac: both fields, out of range, a GPU the
 * table lacks (the MI250 trace's "AMD Radeon Graphics"). */
static void test_refused(void)
{
    loaded l;
    rv_run_result *r = NULL;
    rv_error err;
    rv_whatif *w = NULL;
    static const char *const bad[] = {"{\"power_limit_frac\":0.8,\"power_limit_w\":200}",
                                      "{\"power_limit_frac\":0}", "{\"power_limit_frac\":1.6}",
                                      "{\"power_limit_frac\":\"0.8\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rv_error_clear(&err);
        CU_ASSERT_EQUAL(rv_whatif_parse_text(bad[i], &w, &err), RV_ERR_INVALID);
        CU_ASSERT_STRING_EQUAL(err.field, "power_limit_frac");
        rv_whatif_free(w);
        w = NULL;
    }
    CU_ASSERT_EQUAL_FATAL(load("hta/edge/amd-mi250-rocm62.json.gz", &l), 0);
    rv_error_clear(&err);
    CU_ASSERT_EQUAL(run(&l, "{\"power_limit_frac\":0.8}", &r, &err), RV_ERR_INVALID);
    printf("\n    MI250: %s", err.message);
    CU_ASSERT_STRING_EQUAL(err.field, "power_limit_frac");
    CU_ASSERT_PTR_NULL(r);
    rv_run_result_free(r);
    unload(&l);
}

int main(void)
{
    traces = rv_test_require_shared_traces("kineto/resnet50-v100-workers0.pt.trace.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("power_limit_frac", NULL, NULL);
    CU_add_test(s, "V100: 0.8 = 240 W", test_v100);
    if (rv_test_have_trace(traces, "hta/a100-rank0-of-16-five-streams.json.gz"))
        CU_add_test(s, "A100: 0.8 = 320 W", test_a100);
    CU_add_test(s, "H100: 0.8 = 560 W", test_h100);
    CU_add_test(s, "MI300X and B200: 0.8 = 600 W and 800 W", test_mi300_b200);
    CU_add_test(s, "refusals name the field", test_refused);
    return rv_test_run() ? 1 : 0;
}
