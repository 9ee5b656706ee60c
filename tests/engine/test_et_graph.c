/* An execution trace alone (engine/rv_et_graph.c) through the pipeline:
 * simple-add's ET gives the 4 GPU tasks its Kineto trace has and 131,072
 * FLOPs per step; DLRM worker0's ET alone gives a step and the FLOPs of
 * the joined trace (63.78 MFLOP); every answer warns et_only_modelled; no GPU, or one
 * the hardware table lacks, is refused naming "gpu"; Chakra's all-gather
 * ET puts its collectives on a comm stream. Skips (77) without
 * RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reader/rv_et.h"
#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "common/rv_test_util.h"

static const char *g_traces;

static rv_et *load_et(const char *rel)
{
    char p[4096];
    rv_et *et = NULL;
    rv_error e;
    snprintf(p, sizeof(p), "%s/%s", g_traces, rel);
    CU_ASSERT_EQUAL(rv_et_read_file(p, NULL, &et, &e), 0);
    return et;
}

/* The answer to the unmodified trace (new), or NULL. */
static json_t *answer(const rv_trace *t)
{
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_run_result *r = NULL;
    rv_error e;
    json_t *o = NULL;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    if (rv_graph_build(t, NULL, &g, &e) != 0 ||
        rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &e) != 0 ||
        rv_run(g, s, NULL, &opts, &r, &e) != 0)
        fprintf(stderr, "\n  run: %s\n", e.message);
    else
        o = rv_run_render(r, "et");
    rv_run_result_free(r);
    rv_sim_free(s);
    rv_graph_free(g);
    return o;
}

static int has_warning(const json_t *o, const char *code)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(o, "warnings"), i, w)
    {
        if (!strcmp(json_string_value(json_object_get(w, "code")), code))
            return 1;
    }
    return 0;
}

static double num(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(json_object_get(o, a), b);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static size_t gpu_tasks(const rv_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nevents; i++)
        n += rv_cat_is_gpu_task(t->events[i].cat);
    return n;
}

static void test_simple_add(void)
{
    rv_et *et = load_et("hta/simple-add.et.json.gz");
    rv_trace *t = NULL, *k = NULL;
    rv_et_alone info;
    rv_error e;
    char p[4096];
    CU_ASSERT_EQUAL_FATAL(rv_et_to_trace(et, "A100", &t, &info, &e), 0);
    snprintf(p, sizeof(p), "%s/hta/simple-add.kineto.json.gz", g_traces);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(p, NULL, &k, &e), 0);
    printf("\n  simple-add alone: %zu ops, %zu kernels, %zu GPU tasks (Kineto: %zu)", info.ops,
           info.kernels, gpu_tasks(t), gpu_tasks(k));
    CU_ASSERT_EQUAL(gpu_tasks(t), 4);
    CU_ASSERT_EQUAL(gpu_tasks(t), gpu_tasks(k));
    CU_ASSERT_EQUAL(t->shapes_source, RV_SHAPES_ET);
    json_t *o = answer(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(num(o, "flops", "per_step"), 131072.0);
    CU_ASSERT(has_warning(o, "et_only_modelled"));
    /* Modelled, not measured: no measured step, a simulated one. */
    CU_ASSERT(json_is_null(json_object_get(o, "measured_us")));
    CU_ASSERT(json_number_value(json_object_get(o, "baseline_us")) > 0);
    json_decref(o);
    /* The same trace measured carries no such warning. */
    o = answer(k);
    CU_ASSERT(o && !has_warning(o, "et_only_modelled"));
    json_decref(o);
    rv_trace_free(k);
    rv_trace_free(t);
    rv_et_free(et);
}

static void test_dlrm_flops_match_join(void)
{
    rv_et *et = load_et("param/dlrm-8rank/worker0.et.json.gz");
    rv_trace *t = NULL, *k = NULL;
    rv_et_join j;
    rv_error e;
    char p[4096];
    CU_ASSERT_EQUAL_FATAL(rv_et_to_trace(et, "A100", &t, NULL, &e), 0);
    snprintf(p, sizeof(p), "%s/param/dlrm-8rank/worker0.kineto.json.gz", g_traces);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(p, NULL, &k, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_et_join_trace(et, k, &j, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_et_shapes_to_trace(et, &j, k), 0);
    json_t *alone = answer(t), *joined = answer(k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(alone);
    CU_ASSERT_PTR_NOT_NULL_FATAL(joined);
    double fa = num(alone, "flops", "per_step"), fj = num(joined, "flops", "per_step");
    printf("\n  dlrm worker0: alone %.6g FLOP/step, joined %.6g; step %.1f us (measured %.1f)", fa,
           fj, json_number_value(json_object_get(alone, "baseline_us")),
           json_number_value(json_object_get(joined, "measured_us")));
    CU_ASSERT(fabs(fa - fj) <= 1e-9 * fj);
    /* 63.69 MFLOP before fbgemm's fused lookups were costed, 63.78 since. */
    CU_ASSERT(fa > 63.6e6 && fa < 63.9e6);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(alone, "iterations")), 1);
    CU_ASSERT(json_is_null(json_object_get(alone, "measured_us")));
    CU_ASSERT(json_number_value(json_object_get(alone, "baseline_us")) > 0);
    CU_ASSERT(has_warning(alone, "et_only_modelled"));
    CU_ASSERT(!has_warning(joined, "et_only_modelled"));
    json_decref(alone);
    json_decref(joined);
    rv_et_join_free(&j);
    rv_trace_free(k);
    rv_trace_free(t);
    rv_et_free(et);
}

static void test_gpu_required(void)
{
    rv_et *et = load_et("hta/simple-add.et.json.gz");
    rv_trace *t = NULL;
    rv_error e;
    CU_ASSERT_EQUAL(rv_et_to_trace(et, NULL, &t, NULL, &e), RV_ERR_UNSUPPORTED);
    CU_ASSERT(t == NULL && strstr(e.message, "\"gpu\"") != NULL);
    CU_ASSERT_EQUAL(rv_et_to_trace(et, "NoSuchGPU-9000", &t, NULL, &e), RV_ERR_UNSUPPORTED);
    CU_ASSERT(t == NULL && strstr(e.message, "NoSuchGPU-9000") != NULL);
    rv_et_free(et);
}

static void test_collectives(void)
{
    rv_et *et = load_et("chakra/et-1.0.2-allgather.json.gz");
    rv_trace *t = NULL;
    rv_et_alone info;
    rv_error e;
    CU_ASSERT_EQUAL_FATAL(rv_et_to_trace(et, "H100", &t, &info, &e), 0);
    size_t comm = 0;
    for (size_t i = 0; i < t->nevents; i++)
        comm += t->events[i].cat == RV_CAT_KERNEL && t->events[i].stream == 20 &&
                strstr(rv_trace_str(t, t->events[i].name), "nccl") != NULL;
    printf("\n  chakra all-gather alone: %zu collectives, %zu kernels, %zu copies", comm,
           info.kernels, info.copies);
    CU_ASSERT_EQUAL(comm, 10);
    CU_ASSERT_EQUAL(info.collectives, 10);
    rv_trace_free(t);
    rv_et_free(et);
}

int main(void)
{
    g_traces = rv_test_require_shared_traces("hta/simple-add.et.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("et_graph", NULL, NULL);
    CU_add_test(s, "simple-add alone: 4 GPU tasks, 131072 FLOPs", test_simple_add);
    CU_add_test(s, "DLRM worker0 alone: FLOPs of the join", test_dlrm_flops_match_join);
    CU_add_test(s, "no GPU refused", test_gpu_required);
    CU_add_test(s, "collectives on the comm stream", test_collectives);
    return rv_test_run() ? 1 : 0;
}
