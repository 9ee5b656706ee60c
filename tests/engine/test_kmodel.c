/* Kernel models (engine/rv_kmodel.c) on the public traces with shapes:
 *   - per-class error of the fitted roofline-efficiency model, fitted on
 *     every other costed kernel and measured on the others (held out), as
 *     reported in docs/ACCURACY.md (reported, not tuned: the checks only
 *     say the figures exist and the model beats the bare roofline);
 *   - cross-GPU: the V100 ResNet-50 trace's kernel time rescaled to an
 *     A100 (TF32), against NVIDIA's measured V100 FP32 -> A100 TF32
 *     throughput ratio (2.59x, ../shared/traces/ground-truth/
 *     dle-resnet50-amp-scaling.md), and the TraceLens H100 traces
 *     predicted on A100 and V100 (no measurement to compare with).
 * Prints the figures; skips (77) without RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/rv_et.h"
#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "reader/rv_kineto.h"
#include "cost/rv_kmodel.h"
#include "common/rv_test_util.h"

static const char *g_traces;

static rv_trace *load(const char *rel, const char *et_rel)
{
    char p[4096];
    rv_trace *t = NULL;
    rv_error e;
    snprintf(p, sizeof(p), "%s/%s", g_traces, rel);
    if (rv_kineto_read_file(p, NULL, &t, &e) != 0) {
        fprintf(stderr, "\n  %s: %s\n", rel, e.message);
        return NULL;
    }
    if (et_rel) {
        rv_et *et = NULL;
        rv_et_join j;
        snprintf(p, sizeof(p), "%s/%s", g_traces, et_rel);
        if (rv_et_read_file(p, NULL, &et, &e) != 0 || rv_et_join_trace(et, t, &j, &e) != 0 ||
            rv_et_shapes_to_trace(et, &j, t) != 0) {
            fprintf(stderr, "\n  %s: %s\n", et_rel, e.message);
            rv_trace_free(t);
            t = NULL;
        } else {
            rv_et_join_free(&j);
        }
        rv_et_free(et);
    }
    return t;
}

static void test_class_error(void)
{
    static const char *const cases[][2] = {
        {"kineto/resnet50-v100-workers0.pt.trace.json.gz", NULL},
        {"param/linear-2080ti.kineto.json.gz", "param/linear-2080ti.et.json.gz"},
        {"param/resnet-2080ti.kineto.json.gz", "param/resnet-2080ti.et.json.gz"},
        {"param/dlrm-8rank/worker0.kineto.json.gz", NULL},
        {"tracelens/h100-bert-small-forward.json.gz", NULL},
        {"tracelens/h100-falconsai-vit-forward.json.gz", NULL},
    };
    printf("\n  trace | class | kernels held out | model error (gm) | roofline error (gm)");
    size_t reported = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        if (!rv_test_have_trace(g_traces, cases[c][0]))
            continue;
        rv_trace *t = load(cases[c][0], cases[c][1]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        const rv_hw *hw = rv_hw_lookup(rv_trace_str(t, t->platform_gpu));
        CU_ASSERT_PTR_NOT_NULL_FATAL(hw);
        rv_flops_trace f;
        CU_ASSERT_EQUAL_FATAL(rv_flops_of_trace(t, &f), 0);
        rv_kmodel m, roof;
        rv_kmodel_fit(&m, t, &f, hw, 2, 0);
        /* The bare roofline: efficiency 1 everywhere. */
        memset(&roof, 0, sizeof(roof));
        roof.hw = hw;
        for (int k = 1; k < RV_FC_COUNT; k++)
            roof.cls_eff[k] = 1;
        double gm[RV_FC_COUNT], gr[RV_FC_COUNT];
        size_t n[RV_FC_COUNT], nr[RV_FC_COUNT];
        rv_kmodel_error(&m, t, &f, 2, 1, gm, n);
        rv_kmodel_error(&roof, t, &f, 2, 1, gr, nr);
        for (int k = 1; k < RV_FC_COUNT; k++) {
            if (!n[k])
                continue;
            printf("\n  %s | %s | %zu | %.1f%% | %.1f%%", cases[c][0], rv_flops_class_name(k), n[k],
                   100 * gm[k], 100 * gr[k]);
            CU_ASSERT(isfinite(gm[k]) && gm[k] >= 0);
            reported++;
        }
        rv_flops_trace_free(&f);
        rv_trace_free(t);
    }
    CU_ASSERT(reported >= 6);
}

/* Kernel time of t on `to` (rescaled) and as measured, seconds. */
static void rescale(const rv_trace *t, const rv_hw *to, int tf32, double *meas, double *pred)
{
    rv_flops_trace f;
    const rv_hw *from = rv_hw_lookup(rv_trace_str(t, t->platform_gpu));
    *meas = *pred = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(from);
    CU_ASSERT_EQUAL_FATAL(rv_flops_of_trace(t, &f), 0);
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (!rv_cat_is_gpu_task(e->cat) || e->dur_ns <= 0)
            continue;
        double s = (double)e->dur_ns * 1e-9;
        *meas += s;
        *pred += e->cat == RV_CAT_KERNEL ? rv_kmodel_rescale_s(from, to, f.cls[i], f.ptype[i],
                                                               f.flops[i], f.bytes[i], s, tf32)
                                         : s;
    }
    rv_flops_trace_free(&f);
}

static void test_cross_gpu(void)
{
    rv_trace *t = load("kineto/resnet50-v100-workers0.pt.trace.json.gz", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    double meas, pred;
    rescale(t, rv_hw_lookup("A100-SXM4-80GB"), 1, &meas, &pred);
    /* NVIDIA's measured 1-GPU throughputs: A100 TF32 938 img/s; V100 FP32
     * 367 (16 GB) and 356 (32 GB). */
    double truth = 938.0 / ((367.0 + 356.0) / 2);
    printf("\n  resnet50 V100 -> A100 (TF32): kernel time %.1f -> %.1f ms, speedup %.2fx; "
           "measured (DLE throughput) %.2fx; error %+.0f%%",
           meas * 1e3, pred * 1e3, meas / pred, truth, 100 * (meas / pred / truth - 1));
    CU_ASSERT(pred > 0 && pred < meas);
    rv_trace_free(t);

    static const char *const h100[] = {"tracelens/h100-bert-small-forward.json.gz",
                                       "tracelens/h100-falconsai-vit-forward.json.gz"};
    static const char *const to[] = {"A100-SXM4-80GB", "V100-SXM2", "MI300X", "H200-SXM"};
    for (size_t i = 0; i < 2; i++) {
        t = load(h100[i], NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        for (size_t k = 0; k < sizeof(to) / sizeof(to[0]); k++) {
            rescale(t, rv_hw_lookup(to[k]), 1, &meas, &pred);
            printf("\n  %s H100 -> %s: kernel time %.3f -> %.3f ms (%.2fx)", h100[i], to[k],
                   meas * 1e3, pred * 1e3, pred / meas);
            CU_ASSERT(pred > 0);
        }
        rv_trace_free(t);
    }
}

int main(void)
{
    g_traces = rv_test_require_shared_traces("kineto/resnet50-v100-workers0.pt.trace.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("kmodel", NULL, NULL);
    CU_add_test(s, "per-class error, held out", test_class_error);
    CU_add_test(s, "cross-GPU against public pairs", test_cross_gpu);
    return rv_test_run() ? 1 : 0;
}
