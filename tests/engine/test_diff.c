/* Trace diff (engine/rv_diff.h) on the ResNet-50 data-loader pair: the
 * loading op is the top difference between num_workers 0 and 4, and between
 * workers 0 and its dataloader what-if; a trace against itself changes
 * nothing. Skips (77) without RV_SHARED_TRACES. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "export/rv_diff.h"
#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

static const char *traces;

typedef struct loaded {
    rv_test_loaded t;
    rv_diff_side side; /* the baseline over the median window */
} loaded;

static loaded w0, w4;

static int load(const char *rel, loaded *l)
{
    rv_error err;
    if (rv_test_load(traces, rel, &l->t) != 0)
        return -1;
    if (rv_diff_side_baseline(l->t.g, l->t.s, &l->side, &err) != 0) {
        fprintf(stderr, "%s: %s\n", rel, err.message);
        return -1;
    }
    return 0;
}

static void unload(loaded *l)
{
    rv_test_unload(&l->t);
}

static const rv_diff_row *find(const rv_diff_row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

static void test_workers_pair(void)
{
    rv_diff *d = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_diff_compute(&w0.side, &w4.side, &d, &err), 0);
    CU_ASSERT_FATAL(d->nops > 0 && d->nkernels > 0);
    /* The loading op of workers 0 is the top difference, and it vanished. */
    CU_ASSERT_STRING_EQUAL(d->ops[0].name,
                           "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
    CU_ASSERT_EQUAL(d->ops[0].status, RV_DIFF_VANISHED);
    CU_ASSERT(d->ops[0].delta_us < -30e3);
    const rv_diff_row *mp =
        find(d->ops, d->nops, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__");
    CU_ASSERT_PTR_NOT_NULL(mp);
    if (mp)
        CU_ASSERT_EQUAL(mp->status, RV_DIFF_APPEARED);
    /* Ordered by impact; deltas are B - A. */
    for (size_t i = 1; i < d->nops; i++)
        CU_ASSERT(fabs(d->ops[i - 1].delta_us) >= fabs(d->ops[i].delta_us));
    for (size_t i = 0; i < d->nkernels; i++)
        CU_ASSERT_DOUBLE_EQUAL(d->kernels[i].delta_us,
                               d->kernels[i].time_us_b - d->kernels[i].time_us_a, 1e-9);
    CU_ASSERT(d->iteration_us_b < d->iteration_us_a);
    /* The rendering: the top rows and the totals. */
    json_t *j = rv_diff_render(d, 3, "w0", "w4", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *ops = json_object_get(j, "ops");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(ops, "rows")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ops, "total")), (json_int_t)d->nops);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "kernel_classes")), RV_KC_COUNT);
    /* Fractional per-iteration counts are explained by a warning. */
    int fractional = 0, warned = 0;
    for (size_t i = 0; i < d->nops; i++)
        fractional |= fabs(d->ops[i].count_a - round(d->ops[i].count_a)) > 1e-6 ||
                      fabs(d->ops[i].count_b - round(d->ops[i].count_b)) > 1e-6;
    json_t *wv;
    size_t wi;
    json_array_foreach(json_object_get(j, "warnings"), wi, wv) warned |=
        strcmp(json_string_value(json_object_get(wv, "code")), "counts_per_iteration") == 0;
    CU_ASSERT_TRUE(fractional);
    CU_ASSERT_EQUAL(warned, fractional);
    json_decref(j);
    rv_diff_free(d);
}

static void test_self_is_same(void)
{
    rv_diff *d = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_diff_compute(&w4.side, &w4.side, &d, &err), 0);
    for (size_t i = 0; i < d->nops; i++)
        CU_ASSERT_EQUAL(d->ops[i].status, RV_DIFF_SAME);
    for (size_t i = 0; i < d->nkernels; i++)
        CU_ASSERT_EQUAL(d->kernels[i].status, RV_DIFF_SAME);
    rv_diff_free(d);
}

static void test_whatif(void)
{
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;
    rv_diff *d = NULL;
    rv_error err;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN, .keep_predicted = 1};
    CU_ASSERT_EQUAL_FATAL(
        rv_whatif_parse_text("{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4}]}", &w,
                             &err),
        0);
    CU_ASSERT_EQUAL_FATAL(rv_run(w0.t.g, w0.t.s, w, &o, &res, &err), 0);
    rv_diff_side a = {w0.t.g, w0.t.s, res->base_win, res->base_fig.simulated_us, 0};
    rv_diff_side b = {rv_run_pred_graph(res), rv_run_pred_sim(res), res->pred_win,
                      res->pred_fig.simulated_us, 0};
    CU_ASSERT_EQUAL_FATAL(rv_diff_compute(&a, &b, &d, &err), 0);
    CU_ASSERT_FATAL(d->nops > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(d->ops[0].name, "DataLoader"));
    CU_ASSERT(d->ops[0].delta_us < -30e3);
    /* The prediction measured nothing: its side says null, not 0. */
    json_t *j = rv_diff_render(d, 3, "baseline", "what-if", NULL);
    CU_ASSERT_TRUE(json_is_null(json_object_get(json_object_get(j, "b"), "measured_us")));
    json_decref(j);
    rv_diff_free(d);
    rv_run_result_free(res);
    rv_whatif_free(w);
}

int main(void)
{
    traces = rv_test_shared_traces("kineto/resnet50-v100-workers0.pt.trace.json.gz");
    if (!traces) {
        printf("skipped: RV_SHARED_TRACES not set or without the ResNet-50 traces\n");
        return 77;
    }
    if (load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &w0) ||
        load("kineto/resnet50-v100-workers4.pt.trace.json.gz", &w4))
        return 1;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("diff", NULL, NULL);
    CU_add_test(s, "workers_pair", test_workers_pair);
    CU_add_test(s, "self_is_same", test_self_is_same);
    CU_add_test(s, "whatif", test_whatif);
    unsigned fails = rv_test_run();
    unload(&w0);
    unload(&w4);
    return fails ? 1 : 0;
}
