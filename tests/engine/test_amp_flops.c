/* AMP driven by the ops' FLOPs and bytes (engine/rv_models_compute.c,
 * docs/models/amp.md), on the public traces, through rv_run:
 *   - the ResNet-50 V100 trace has op shapes (record_shapes): every costed
 *     conv and GEMM kernel takes its roofline at fp16 over its measured
 *     efficiency at fp32, t' = t x roof(fp16, F, B/2) / roof(fp32, F, B)
 *     above the 2 us latency floor, and the applied entry says
 *     "flops_bytes" with the counts;
 *   - kernels already at the target lend their fitted efficiency to their
 *     class and size bucket;
 *   - a V100 trace without shapes keeps the class ratios and says so in the
 *     amp_ratio_fallback warning.
 * Before, every kernel took the class ratios (method "roofline", no
 * counts, no warning). Skips (77) without RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cost/rv_flops.h"
#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "cost/rv_kmodel.h"
#include "graph/rv_precision.h"
#include "run/rv_run.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

static const char *traces;

#define V100_RESNET    "kineto/resnet50-v100-workers4.pt.trace.json.gz"
#define V100_NO_SHAPES "hta/v100-1rank-ns-resolution.json.gz"
#define AMP_FP16       "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp16\"}]}"

static int run(const rv_test_loaded *l, const char *doc, rv_run_result **out)
{
    rv_whatif *w = NULL;
    rv_error err;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN, .keep_predicted = 1};
    *out = NULL;
    rv_error_clear(&err);
    int rc = rv_whatif_parse_text(doc, &w, &err);
    if (!rc)
        rc = rv_run(l->g, l->s, w, &o, out, &err);
    if (rc)
        printf("\n    %s: %s", doc, err.message);
    rv_whatif_free(w);
    return rc;
}

static json_t *amp_entry(const rv_run_result *r)
{
    size_t i;
    json_t *a;
    json_array_foreach(r->applied, i, a)
    {
        const char *m = json_string_value(json_object_get(a, "model"));
        if (m && strcmp(m, "amp") == 0)
            return a;
    }
    return NULL;
}

static int has_warning(const rv_run_result *r, const char *code)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strcmp(r->warnings[i].code, code) == 0)
            return 1;
    return 0;
}

/* The amp model's latency floor: the first 2 us of a kernel do not shrink. */
static int64_t shrink(int64_t dur, double ratio)
{
    int64_t fix = dur < 2000 ? dur : 2000;
    return fix + (int64_t)llround((double)(dur - fix) * ratio);
}

static void test_conv_from_flops_bytes(void)
{
    rv_test_loaded l;
    rv_run_result *r;
    CU_ASSERT_EQUAL_FATAL(rv_test_load(traces, V100_RESNET, &l), 0);
    const rv_graph *g = l.g;
    const rv_flops_trace *f = g->flops;
    const rv_hw *hw = rv_hw_lookup("V100-DGXS");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hw);
    CU_ASSERT_EQUAL_FATAL(run(&l, AMP_FP16, &r), 0);
    const rv_graph *p = r->pred_graph;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    json_t *a = amp_entry(r);
    const char *method = json_string_value(json_object_get(a, "method"));
    json_t *fb = json_object_get(json_object_get(a, "methods"), "flops_bytes");
    double share = json_number_value(json_object_get(fb, "time_share"));
    json_int_t n_fb = json_integer_value(json_object_get(fb, "kernels"));
    /* Every conv and GEMM kernel the formulas cost, outside the optimizer
     * step, against the closed form. */
    size_t n = 0, off = 0, shown = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || t->cat != RV_CAT_KERNEL || t->event < 0 ||
            t->phase == RV_PHASE_OPTIMIZER || t->dur_ns <= 0)
            continue;
        int cls = f->cls[t->event];
        if (cls != RV_FC_CONV && cls != RV_FC_GEMM)
            continue;
        double F = f->flops[t->event], B = f->bytes[t->event];
        double r0 = rv_kmodel_roofline_s(hw, RV_DT_FP32, F, B);
        double r1 = rv_kmodel_roofline_s(hw, RV_DT_FP16, F, B / 2);
        double ratio = r1 / r0 < 1 ? r1 / r0 : 1;
        int64_t want = shrink(t->dur_ns, ratio), got = p->tasks[i].dur_ns;
        n++;
        if (llabs(got - want) > 1)
            off++;
        if (shown < 2 && cls == RV_FC_CONV && t->dur_ns > 100000) {
            printf("\n    conv %s: %.3g FLOPs, %.3g B, %lld -> %lld ns (formula %lld)",
                   t->phase == RV_PHASE_FORWARD ? "fwd" : "bwd", F, B, (long long)t->dur_ns,
                   (long long)got, (long long)want);
            shown++;
        }
    }
    printf("\n    method %s, flops_bytes kernels %lld (%.1f%% of scaled time); %zu conv/GEMM "
           "kernels, %zu off the formula",
           method ? method : "?", (long long)n_fb, share * 100, n, off);
    CU_ASSERT(method && strcmp(method, "flops_bytes") == 0);
    CU_ASSERT(n > 1000);
    CU_ASSERT_EQUAL(off, 0);
    CU_ASSERT(n_fb >= (json_int_t)n);
    CU_ASSERT(share > 0.9);
    CU_ASSERT(!has_warning(r, "amp_ratio_fallback"));
    rv_run_result_free(r);
    rv_test_unload(&l);
}

/* Kernels already at the target dtype on the same GPU lend their fitted
 * efficiency per class and size bucket: with every other costed conv of
 * the V100 trace marked fp16 in the ops' costs (the public traces have no
 * such mix with shapes), a conv whose bucket has fp16 kernels takes
 * roof(fp16, F, B/2) / eff_bucket. */
static void test_target_bucket(void)
{
    rv_test_loaded l;
    rv_run_result *r;
    CU_ASSERT_EQUAL_FATAL(rv_test_load(traces, V100_RESNET, &l), 0);
    rv_flops_trace *f = l.g->flops;
    const rv_hw *hw = rv_hw_lookup("V100-DGXS");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t k = 0;
    for (size_t i = 0; i < l.tr->nevents; i++)
        if (l.tr->events[i].cat == RV_CAT_KERNEL && f->cls[i] == RV_FC_CONV && k++ % 2 == 0)
            f->ptype[i] = RV_PT_FP16;
    rv_kmodel m;
    rv_kmodel_fit_ptype(&m, l.tr, f, hw, RV_PT_FP16);
    CU_ASSERT_FATAL(m.n[RV_FC_CONV] > 0);
    CU_ASSERT_EQUAL_FATAL(run(&l, AMP_FP16, &r), 0);
    const rv_graph *g = l.g, *p = r->pred_graph;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    json_t *fb = json_object_get(json_object_get(amp_entry(r), "methods"), "flops_bytes");
    json_int_t moved = json_integer_value(json_object_get(fb, "target_bucket"));
    size_t n = 0, n_eff = 0, off = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || t->cat != RV_CAT_KERNEL || t->event < 0 ||
            t->phase == RV_PHASE_OPTIMIZER || t->dur_ns <= 0 || f->cls[t->event] != RV_FC_CONV)
            continue;
        double F = f->flops[t->event], B = f->bytes[t->event], s = (double)t->dur_ns * 1e-9;
        double r0 = rv_kmodel_roofline_s(hw, RV_DT_FP32, F, B);
        double r1 = rv_kmodel_roofline_s(hw, RV_DT_FP16, F, B / 2);
        double eff = rv_kmodel_bucket_eff(&m, RV_FC_CONV, F, B / 2);
        double ratio = eff > 0 ? r1 / eff / s : r1 / r0;
        ratio = ratio < 1 ? ratio : 1;
        n++;
        n_eff += eff > 0;
        if (llabs(p->tasks[i].dur_ns - shrink(t->dur_ns, ratio)) > 1)
            off++;
    }
    printf("\n    conv kernels %zu, %zu with an fp16 bucket (answer: %lld), %zu off the formula", n,
           n_eff, (long long)moved, off);
    CU_ASSERT(n_eff > 0);
    CU_ASSERT(moved >= (json_int_t)n_eff);
    CU_ASSERT_EQUAL(off, 0);
    rv_run_result_free(r);
    rv_test_unload(&l);
}

static void test_no_shapes_ratios(void)
{
    rv_test_loaded l;
    rv_run_result *r;
    CU_ASSERT_EQUAL_FATAL(rv_test_load(traces, V100_NO_SHAPES, &l), 0);
    CU_ASSERT_EQUAL_FATAL(l.tr->nop_shapes, 0);
    CU_ASSERT_EQUAL_FATAL(run(&l, AMP_FP16, &r), 0);
    json_t *a = amp_entry(r);
    const char *method = json_string_value(json_object_get(a, "method"));
    json_t *rr = json_object_get(json_object_get(a, "methods"), "roofline_ratio");
    printf("\n    %s: method %s, ratio kernels %lld, %.4fx", V100_NO_SHAPES, method ? method : "?",
           (long long)json_integer_value(json_object_get(rr, "kernels")), r->sum.speedup);
    CU_ASSERT(method && strcmp(method, "roofline") == 0);
    CU_ASSERT(json_integer_value(json_object_get(rr, "kernels")) > 0);
    CU_ASSERT(json_number_value(json_object_get(rr, "time_share")) == 1.0);
    CU_ASSERT(has_warning(r, "amp_ratio_fallback"));
    CU_ASSERT(r->sum.speedup > 1.0);
    rv_run_result_free(r);
    rv_test_unload(&l);
}

int main(void)
{
    traces = rv_test_require_shared_traces(V100_RESNET);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("amp_flops", NULL, NULL);
    CU_add_test(s, "conv and GEMM from FLOPs and bytes", test_conv_from_flops_bytes);
    CU_add_test(s, "efficiency of the target's bucket", test_target_bucket);
    CU_add_test(s, "no shapes: class ratios with a warning", test_no_shapes_ratios);
    return rv_test_run() ? 1 : 0;
}
