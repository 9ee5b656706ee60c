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

#include "run/rv_run.h"
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
    unsigned fails = rv_test_run();
    rv_test_unload(&sample);
    return fails ? 1 : 0;
}
