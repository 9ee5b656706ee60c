/* Advise (engine/advise/rv_advise.c) on the shipped ResNet-50 V100 trace
 * with DataLoader workers 0 and, when the public traces are present, on
 * the GPU-bound hta/v100-1rank-ns-resolution: the top plan relieves what
 * bounds the step, beats every single what-if, reproduces through the run
 * path, respects memory, saves energy on the energy objective, and stops
 * at a tiny budget saying so. Skips (77) when the sample is missing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "advise/rv_advise.h"
#include "run/rv_run.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

#define SAMPLE    "data/samples/resnet50-v100-workers0.pt.trace.json.gz"
#define GPU_BOUND "hta/v100-1rank-ns-resolution.json.gz"
#define RANK16    "hta/a100-rank0-of-16-five-streams.json.gz"

static char sample[1024];
static rv_test_loaded w0;

static json_t *advise_opts(const rv_test_loaded *l, const rv_advise_opts *o)
{
    json_t *ans = NULL;
    rv_error err;
    rv_error_clear(&err);
    if (rv_advise(l->g, l->s, o, &ans, &err))
        printf("\n    advise: %s", err.message);
    return ans;
}

static json_t *advise(const rv_test_loaded *l, int objective, double budget_s)
{
    rv_advise_opts o = {.objective = objective, .budget_s = budget_s};
    json_t *ans = NULL;
    rv_error err;
    rv_error_clear(&err);
    int rc = rv_advise(l->g, l->s, &o, &ans, &err);
    if (rc)
        printf("\n    advise: %s", err.message);
    return ans;
}

/* Runs a what-if document through the run path; the result or NULL. */
static rv_run_result *run_doc(const rv_test_loaded *l, const json_t *doc)
{
    rv_whatif *w = NULL;
    rv_run_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    if (rv_whatif_parse(doc, &w, &err) == 0 && rv_run(l->g, l->s, w, &o, &r, &err) != 0)
        r = NULL;
    rv_whatif_free(w);
    return r;
}

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

/* Whether the candidate's changes name something starting with prefix. */
static int changes_has(const json_t *c, const char *prefix)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(c, "changes"), i, v)
    {
        if (strncmp(json_string_value(v), prefix, strlen(prefix)) == 0)
            return 1;
    }
    return 0;
}

static void print_top(const json_t *ans, size_t n)
{
    const json_t *cs = json_object_get(ans, "candidates");
    printf("\n    searched %lld, pruned %lld, %.2f s", (long long)num(ans, "searched"),
           (long long)num(ans, "pruned"), num(ans, "seconds"));
    for (size_t i = 0; i < n && i < json_array_size(cs); i++) {
        const json_t *c = json_array_get(cs, i);
        char *ch = json_dumps(json_object_get(c, "changes"), JSON_COMPACT);
        printf("\n    %zu. %s %.1f ms x%.3f fits %d", i + 1, ch, num(c, "predicted_us") / 1e3,
               num(c, "speedup"), json_is_true(json_object_get(c, "fits")));
        free(ch);
    }
}

/* Common checks: ranked by the objective among the fitting plans; every
 * plan marked fits is within the limit; the top 5 reproduce. */
static void check_answer(const rv_test_loaded *l, const json_t *ans)
{
    const json_t *cs = json_object_get(ans, "candidates");
    double limit = num(ans, "memory_limit_bytes"), prev = -1;
    CU_ASSERT_FATAL(json_array_size(cs) > 0);
    CU_ASSERT(num(ans, "searched") > 0);
    for (size_t i = 0; i < json_array_size(cs); i++) {
        const json_t *c = json_array_get(cs, i);
        const json_t *peak = json_object_get(c, "memory_peak_bytes");
        CU_ASSERT(json_is_string(json_object_get(c, "why")));
        CU_ASSERT(json_is_array(json_object_get(c, "warnings")));
        if (!json_is_true(json_object_get(c, "fits"))) {
            CU_ASSERT(json_is_string(json_object_get(c, "fits_reason")));
            CU_ASSERT(limit > 0 && num(c, "memory_peak_bytes") > limit);
            continue;
        }
        if (limit > 0 && json_is_integer(peak))
            CU_ASSERT(num(c, "memory_peak_bytes") <= limit);
        CU_ASSERT(num(c, "objective_value") >= prev);
        prev = num(c, "objective_value");
    }
    for (size_t i = 0; i < 5 && i < json_array_size(cs); i++) {
        const json_t *c = json_array_get(cs, i);
        /* The document as a user would pass it: text, parsed again. */
        char *text = json_dumps(json_object_get(c, "whatif"), JSON_COMPACT);
        json_t *doc = json_loads(text, 0, NULL);
        rv_run_result *r = run_doc(l, doc);
        CU_ASSERT_PTR_NOT_NULL(r);
        if (r) {
            double want = num(c, "predicted_us");
            CU_ASSERT(fabs(r->sum.predicted_us - want) <= 0.005 * want);
        }
        rv_run_result_free(r);
        json_decref(doc);
        free(text);
    }
}

/* The best plan is at least as fast per sample as each single what-if. */
static void check_beats_singles(const rv_test_loaded *l, const json_t *ans)
{
    static const char *const singles[] = {
        "{\"optimizations\":[{\"kind\":\"amp\"}]}",
        "{\"optimizations\":[{\"kind\":\"fused_optimizer\"}]}",
        "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4}]}",
        "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":8}]}",
        "{\"optimizations\":[{\"kind\":\"restructure_batchnorm\"}]}"};
    const json_t *best = json_array_get(json_object_get(ans, "candidates"), 0);
    double best_us = num(best, "objective_value");
    for (size_t i = 0; i < sizeof(singles) / sizeof(singles[0]); i++) {
        json_t *doc = json_loads(singles[i], 0, NULL);
        rv_run_result *r = run_doc(l, doc);
        if (r) {
            printf("\n    single %s: %.1f ms", singles[i], r->sum.predicted_us / 1e3);
            CU_ASSERT(best_us <= r->sum.predicted_us * (1 + 1e-9));
        }
        rv_run_result_free(r);
        json_decref(doc);
    }
}

static void test_input_bound(void)
{
    json_t *ans = advise(&w0, RV_ADVISE_TIME, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ans);
    print_top(ans, 5);
    CU_ASSERT(json_is_true(json_object_get(ans, "complete")));
    const json_t *top = json_array_get(json_object_get(ans, "candidates"), 0);
    CU_ASSERT(changes_has(top, "dataloader"));
    CU_ASSERT(json_is_true(json_object_get(top, "fits")));
    CU_ASSERT(num(top, "speedup") > 1);
    /* The loading on the critical path keeps GPU changes off single plans. */
    CU_ASSERT(num(json_object_get(ans, "pruned_by"), "bound") > 0);
    check_answer(&w0, ans);
    check_beats_singles(&w0, ans);
    json_decref(ans);
}

static void test_energy(void)
{
    json_t *ans = advise(&w0, RV_ADVISE_ENERGY, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ans);
    print_top(ans, 3);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(ans, "objective")), "energy");
    const json_t *top = json_array_get(json_object_get(ans, "candidates"), 0);
    double base = num(json_object_get(ans, "baseline"), "energy_j");
    printf("\n    energy per step %.2f J -> %.2f J (%.2f J per sample-equivalent)", base,
           num(top, "energy_j"), num(top, "objective_value"));
    CU_ASSERT(base > 0);
    CU_ASSERT(num(top, "energy_j") < base);
    CU_ASSERT(num(top, "objective_value") < base);
    check_answer(&w0, ans);
    json_decref(ans);
}

/* A budget too small for the search: it stops, answers what it has, and
 * says so. */
static void test_tiny_budget(void)
{
    json_t *full = advise(&w0, RV_ADVISE_TIME, 0);
    json_t *ans = advise(&w0, RV_ADVISE_TIME, 0.25);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    if (!ans) {
        /* Even the baseline did not fit in the budget on this machine. */
        json_decref(full);
        return;
    }
    printf("\n    budget 0.25 s: searched %lld of %lld, stopped: %s",
           (long long)num(ans, "searched"), (long long)num(full, "searched"),
           json_string_value(json_object_get(ans, "stopped")));
    CU_ASSERT(json_is_false(json_object_get(ans, "complete")));
    CU_ASSERT(json_is_string(json_object_get(ans, "stopped")));
    CU_ASSERT(num(ans, "searched") < num(full, "searched"));
    CU_ASSERT(num(ans, "seconds") < 2);
    json_decref(ans);
    json_decref(full);
}

/* A memory limit below the baseline's batch x2 (5.9 GB) marks such plans
 * as not fitting, keeps every fitting one under it, and brings in the
 * memory savers. */
static void test_max_memory(void)
{
    json_t *ans = NULL;
    rv_advise_opts o = {.max_memory = 4000000000LL};
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_advise(w0.g, w0.s, &o, &ans, &err), 0);
    print_top(ans, 3);
    const json_t *cs = json_object_get(ans, "candidates");
    int unfit = 0;
    for (size_t i = 0; i < json_array_size(cs); i++) {
        const json_t *c = json_array_get(cs, i);
        if (json_is_true(json_object_get(c, "fits"))) {
            CU_ASSERT(num(c, "memory_peak_bytes") <= 4e9);
        } else {
            unfit++;
        }
    }
    CU_ASSERT(unfit > 0);
    /* A larger batch under the limit needs a memory saver with it. */
    const json_t *top = json_array_get(cs, 0);
    CU_ASSERT(json_is_true(json_object_get(top, "fits")));
    CU_ASSERT(!changes_has(top, "batch x4") || changes_has(top, "recompute"));
    check_answer(&w0, ans);
    json_decref(ans);
}

/* --gpus 8 on the one-GPU trace: data-parallel workers join the space,
 * the top plan by time per sample uses them (per sample several times
 * faster than the best one-GPU plan), and its figures, GPUs included,
 * reproduce through the run path. */
static void test_gpus(void)
{
    rv_advise_opts o = {.objective = RV_ADVISE_TIME, .gpus = 8};
    json_t *one = advise(&w0, RV_ADVISE_TIME, 0);
    json_t *ans = advise_opts(&w0, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ans);
    print_top(ans, 3);
    const json_t *top = json_array_get(json_object_get(ans, "candidates"), 0);
    const json_t *top1 = json_array_get(json_object_get(one, "candidates"), 0);
    CU_ASSERT(changes_has(top, "data parallel"));
    CU_ASSERT(num(top, "gpus") > 1 && num(top, "gpus") <= 8);
    CU_ASSERT(num(top, "samples_factor") >= num(top, "gpus"));
    CU_ASSERT(num(top, "speedup") > 2 * num(top1, "speedup"));
    CU_ASSERT(num(json_object_get(ans, "baseline"), "gpus") == 1);
    check_answer(&w0, ans);
    /* The job's GPUs the run path predicts for the plan. */
    rv_run_result *r = run_doc(&w0, json_object_get(top, "whatif"));
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r)
        CU_ASSERT_EQUAL(r->pred_energy.job_gpus, (int)num(top, "gpus"));
    rv_run_result_free(r);
    json_decref(ans);
    json_decref(one);
}

/* --objective cost with --gpus 8: the price asked is the one used, each
 * plan's cost is its step's GPU-hours times it, and on this input-bound
 * trace more GPUs do not lower the price per sample (the top plan stays on
 * one GPU, cheaper per sample than the baseline). */
static void test_cost(void)
{
    rv_advise_opts o = {.objective = RV_ADVISE_COST, .gpus = 8, .price_per_gpu_hour = 3.0};
    json_t *ans = advise_opts(&w0, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ans);
    print_top(ans, 3);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(ans, "objective")), "cost");
    const json_t *price = json_object_get(ans, "price");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(price, "source")), "asked");
    CU_ASSERT_DOUBLE_EQUAL(num(price, "usd_per_gpu_hour"), 3.0, 1e-12);
    const json_t *cs = json_object_get(ans, "candidates");
    const json_t *base = json_object_get(ans, "baseline");
    CU_ASSERT_DOUBLE_EQUAL(num(base, "cost_usd"), num(base, "predicted_us") / 3.6e9 * 3.0, 1e-12);
    for (size_t i = 0; i < json_array_size(cs); i++) {
        const json_t *c = json_array_get(cs, i);
        double want = num(c, "predicted_us") / 3.6e9 * num(c, "gpus") * 3.0;
        CU_ASSERT(fabs(num(c, "cost_usd") - want) <= 1e-9 * want);
        CU_ASSERT(fabs(num(c, "objective_value") - want / num(c, "samples_factor")) <= 1e-9 * want);
    }
    const json_t *top = json_array_get(cs, 0);
    CU_ASSERT(num(top, "gpus") == 1);
    CU_ASSERT(num(top, "objective_value") < num(base, "cost_usd"));
    check_answer(&w0, ans);
    json_decref(ans);
}

/* Rank 0 of a 16-rank job under a limit below its peak (48.97 MB
 * estimated, 48 MB asked): ZeRO sharding over the ranks (the `parallel`
 * what-if, 47.57 MB at stage 3) joins as a memory saver and the top plan
 * fits with it; the plans reproduce. */
static void test_zero(void)
{
    const char *dir = rv_test_shared_traces(RANK16);
    rv_test_loaded l;
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir); /* registered only when it is there */
    CU_ASSERT_EQUAL_FATAL(rv_test_load(dir, RANK16, &l), 0);
    rv_advise_opts o = {.max_memory = 48000000};
    json_t *ans = advise_opts(&l, &o);
    CU_ASSERT_PTR_NOT_NULL(ans);
    if (ans) {
        print_top(ans, 3);
        const json_t *top = json_array_get(json_object_get(ans, "candidates"), 0);
        CU_ASSERT(num(json_object_get(ans, "baseline"), "memory_peak_bytes") > 48e6);
        CU_ASSERT(json_is_true(json_object_get(top, "fits")));
        CU_ASSERT(changes_has(top, "zero"));
        check_answer(&l, ans);
    }
    json_decref(ans);
    rv_test_unload(&l);
}

static void test_gpu_bound(void)
{
    const char *dir = rv_test_shared_traces(GPU_BOUND);
    rv_test_loaded l;
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir); /* registered only when it is there */
    CU_ASSERT_EQUAL_FATAL(rv_test_load(dir, GPU_BOUND, &l), 0);
    json_t *ans = advise(&l, RV_ADVISE_TIME, 0);
    CU_ASSERT_PTR_NOT_NULL(ans);
    if (ans) {
        print_top(ans, 5);
        const json_t *top = json_array_get(json_object_get(ans, "candidates"), 0);
        CU_ASSERT(!changes_has(top, "dataloader"));
        CU_ASSERT(changes_has(top, "amp") || changes_has(top, "restructure") ||
                  changes_has(top, "kernel_fusion") || changes_has(top, "fused"));
        check_answer(&l, ans);
        check_beats_singles(&l, ans);
    }
    json_decref(ans);
    rv_test_unload(&l);
}

int main(void)
{
    const char *src = getenv("RV_SOURCE_DIR");
    snprintf(sample, sizeof(sample), "%s/%s", src ? src : ".", SAMPLE);
    FILE *f = fopen(sample, "rb");
    if (!f) {
        printf("skipped: %s is missing\n", sample);
        return RV_TEST_SKIP;
    }
    fclose(f);
    if (rv_test_load(NULL, sample, &w0) != 0)
        return 1;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("advise", NULL, NULL);
    CU_add_test(s, "workers 0: the top plan changes the data loader", test_input_bound);
    CU_add_test(s, "energy objective saves energy", test_energy);
    CU_add_test(s, "a tiny budget stops the search and says so", test_tiny_budget);
    CU_add_test(s, "--max-memory marks plans above it", test_max_memory);
    CU_add_test(s, "--gpus 8: data-parallel workers, reproduced", test_gpus);
    CU_add_test(s, "--objective cost: GPU-hours at the price asked", test_cost);
    if (rv_test_have_trace(getenv("RV_SHARED_TRACES"), GPU_BOUND))
        CU_add_test(s, "GPU-bound: the top plan is a GPU-side change", test_gpu_bound);
    if (rv_test_have_trace(getenv("RV_SHARED_TRACES"), RANK16))
        CU_add_test(s, "16-rank job over its memory: ZeRO fits it", test_zero);
    unsigned failed = rv_test_run();
    rv_test_unload(&w0);
    return failed ? 1 : 0;
}
