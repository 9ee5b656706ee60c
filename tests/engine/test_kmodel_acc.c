/* Mergeable kernel-model sums (engine/rv_kmodel_acc): adding two traces and
 * taking one away again leaves exactly the other; the JSON form reads back
 * to the same sums and malformed forms are refused naming the entry; the
 * model of the sums is the geometric mean per bucket; filling completes
 * only what the trace lacks; and a size bucket the trace never measured
 * takes its nearest fitted one's efficiency. Runs on the ResNet-50 V100
 * trace (skips with 77 without the public traces). */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rv_test_util.h"
#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "reader/rv_kineto.h"
#include "cost/rv_kmodel_acc.h"

static rv_trace *g_t;
static rv_flops_trace g_f;
static const rv_hw *g_hw;

static void test_merge_roundtrip(void)
{
    rv_kmodel_acc *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b)),
                  *c = calloc(1, sizeof(*c));
    rv_error e;
    CU_ASSERT_FATAL(a && b && c);
    size_t n = rv_kmodel_acc_add_trace(a, g_t, &g_f, g_hw);
    CU_ASSERT_TRUE(n > 1000);
    CU_ASSERT_DOUBLE_EQUAL(rv_kmodel_acc_count(a), (double)n, 1e-9);
    /* a + a - a = a, bucket by bucket. */
    memcpy(b, a, sizeof(*a));
    rv_kmodel_acc_merge(b, a, 1);
    CU_ASSERT_DOUBLE_EQUAL(rv_kmodel_acc_count(b), 2.0 * (double)n, 1e-9);
    rv_kmodel_acc_merge(b, a, -1);
    CU_ASSERT_EQUAL(memcmp(a->n, b->n, sizeof(a->n)), 0);
    for (int k = 0; k < RV_FC_COUNT; k++)
        for (int j = 0; j < RV_KMODEL_BUCKETS; j++)
            CU_ASSERT_DOUBLE_EQUAL(b->slog[k][j], a->slog[k][j], 1e-9 * (1 + fabs(a->slog[k][j])));
    /* Taking everything away empties every bucket. */
    rv_kmodel_acc_merge(b, a, -1);
    CU_ASSERT_EQUAL(rv_kmodel_acc_count(b), 0);
    /* JSON and back. */
    json_t *j = rv_kmodel_acc_to_json(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(rv_kmodel_acc_from_json(c, j, &e), 0);
    CU_ASSERT_EQUAL(memcmp(a->n, c->n, sizeof(a->n)), 0);
    CU_ASSERT_EQUAL(memcmp(a->slog, c->slog, sizeof(a->slog)), 0);
    json_decref(j);
    static const char *const bad[] = {"[]",
                                      "{\"nope\":[]}",
                                      "{\"conv\":[[64,1,0]]}",
                                      "{\"conv\":[[3,-1,0]]}",
                                      "{\"conv\":[[3,1]]}",
                                      "{\"conv\":{}}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *d = json_loads(bad[i], 0, NULL);
        CU_ASSERT_EQUAL(rv_kmodel_acc_from_json(c, d, &e), RV_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "kernel model"));
        json_decref(d);
    }
    free(a);
    free(b);
    free(c);
}

static void test_model_and_fill(void)
{
    rv_kmodel_acc *a = calloc(1, sizeof(*a));
    rv_kmodel *m = calloc(1, sizeof(*m)), *own = calloc(1, sizeof(*own));
    CU_ASSERT_FATAL(a && m && own);
    rv_kmodel_acc_add_trace(a, g_t, &g_f, g_hw);
    rv_kmodel_from_acc(m, a, g_hw);
    /* Each bucket's efficiency is its geometric mean. */
    int seen = 0;
    for (int k = 0; k < RV_KMODEL_BUCKETS; k++) {
        if (a->n[RV_FC_CONV][k] <= 0)
            continue;
        seen++;
        CU_ASSERT_DOUBLE_EQUAL(m->eff[RV_FC_CONV][k],
                               exp(a->slog[RV_FC_CONV][k] / a->n[RV_FC_CONV][k]), 1e-12);
    }
    CU_ASSERT_TRUE(seen >= 3);
    /* A trace model missing its largest conv bucket gets it back from the
     * platform's, and nothing else changes. */
    rv_kmodel_fit(own, g_t, &g_f, g_hw, 1, 0);
    int top = -1;
    for (int k = 0; k < RV_KMODEL_BUCKETS; k++)
        if (own->eff[RV_FC_CONV][k] > 0)
            top = k;
    CU_ASSERT_TRUE_FATAL(top > 0);
    double kept = own->eff[RV_FC_CONV][top - 1];
    own->eff[RV_FC_CONV][top] = 0;
    /* Meanwhile a size past it takes the nearest fitted bucket's. */
    double flops_top = ldexp(1, top) * 1.5;
    CU_ASSERT_DOUBLE_EQUAL(rv_kmodel_nearest_eff(own, RV_FC_CONV, flops_top, 0),
                           own->eff[RV_FC_CONV][top - 1], 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(rv_kmodel_nearest_eff(own, RV_FC_CONV, ldexp(1, 62), 0),
                           own->eff[RV_FC_CONV][top - 1], 1e-15);
    CU_ASSERT_EQUAL(rv_kmodel_bucket_eff(own, RV_FC_CONV, flops_top, 0), 0);
    CU_ASSERT_EQUAL(rv_kmodel_fill(own, m), 1);
    CU_ASSERT_DOUBLE_EQUAL(own->eff[RV_FC_CONV][top], m->eff[RV_FC_CONV][top], 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(own->eff[RV_FC_CONV][top - 1], kept, 0);
    CU_ASSERT_EQUAL(rv_kmodel_fill(own, m), 0);
    CU_ASSERT_EQUAL(rv_kmodel_fill(own, NULL), 0);
    free(a);
    free(m);
    free(own);
}

int main(void)
{
    const char *rel = "kineto/resnet50-v100-workers0.pt.trace.json.gz";
    const char *shared = rv_test_shared_traces(rel);
    char p[4096];
    rv_error e;
    if (!shared) {
        printf("skipped: the ResNet-50 V100 trace (RV_SHARED_TRACES) is not available\n");
        return 77;
    }
    snprintf(p, sizeof(p), "%s/%s", shared, rel);
    if (rv_kineto_read_file(p, NULL, &g_t, &e) != 0 || rv_flops_of_trace(g_t, &g_f) != 0) {
        fprintf(stderr, "%s: %s\n", p, e.message);
        return 1;
    }
    g_hw = rv_hw_lookup(rv_trace_str(g_t, g_t->platform_gpu));
    if (!g_hw) {
        fprintf(stderr, "the trace's GPU is not in the hardware table\n");
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("kernel model sums", NULL, NULL);
    CU_add_test(s, "merge, subtract, JSON round trip", test_merge_roundtrip);
    CU_add_test(s, "geometric means, fill, nearest bucket", test_model_and_fill);
    unsigned fails = rv_test_run();
    rv_flops_trace_free(&g_f);
    rv_trace_free(g_t);
    return fails ? 1 : 0;
}
