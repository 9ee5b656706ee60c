/* Answers you can trust, on real public traces: each case is a class of
 * trace that got a confident wrong answer before, run through the one
 * pipeline (rv_run) the CLI and the API use. Skips (77) without
 * RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "graph/rv_retime.h"
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

/* The answer to doc on l (new; NULL with the error printed). */
static rv_run_result *run(const loaded *l, const char *doc)
{
    rv_whatif *w = NULL;
    rv_run_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    rv_error_clear(&err);
    if (rv_whatif_parse_text(doc, &w, &err) != 0 || rv_run(l->g, l->s, w, &o, &r, &err) != 0)
        fprintf(stderr, "\n  %s: %s\n", doc, err.message);
    rv_whatif_free(w);
    return r;
}

static int has_warning(const rv_run_result *r, const char *code)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strcmp(r->warnings[i].code, code) == 0)
            return 1;
    return 0;
}

/* Item 4: a one-step trace whose GPU work runs past the step's annotation.
 * Before, communication 5.8 -> 64 ms left the step unchanged (1.00x). */
static void test_gpu_work_past_step_end(void)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load("param/dlrm-8rank/worker0.kineto.json.gz", &l), 0);
    rv_run_result *r = run(&l, "{\"optimizations\":[{\"kind\":\"scale\",\"select\":{\"kind\":"
                               "\"comm\"},\"factor\":11}]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    printf("\n    dlrm rank 0, communication x11: %.1f -> %.1f ms (%.2fx)",
           r->sum.baseline_us / 1e3, r->sum.predicted_us / 1e3, r->sum.speedup);
    CU_ASSERT(r->sum.speedup < 0.5);
    CU_ASSERT(r->sum.replay_error < 0.02);
    rv_run_result_free(r);
    unload(&l);
}

/* Item 6: gpus, energy and power count the devices that ran work; the job
 * (x world size) is reported apart. Before: a rank of a 16-GPU job said 16
 * GPUs and sixteen times the power. */
static void test_gpu_count(void)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load("hta/a100-rank0-of-16-five-streams.json.gz", &l), 0);
    rv_run_result *r = run(&l, "{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    printf("\n    rank 0 of 16: %d GPU, %.0f W; job %d GPUs, %.0f W", r->base_energy.ngpus,
           r->base_energy.avg_power_w, r->base_energy.job_gpus, r->base_energy.job_avg_power_w);
    CU_ASSERT_EQUAL(r->base_energy.ngpus, 1);
    CU_ASSERT_EQUAL(r->base_energy.job_gpus, 16);
    CU_ASSERT(r->base_energy.avg_power_w > 50 && r->base_energy.avg_power_w <= 400);
    CU_ASSERT_DOUBLE_EQUAL(r->base_energy.job_energy_j, 16 * r->base_energy.energy_j,
                           1e-6 * r->base_energy.job_energy_j);
    rv_run_result_free(r);
    unload(&l);
}

/* Item 12: bimodal steps (150-173 ms and 280-830 ms on this trace): the
 * median matches no real step, so the answer says so; a steady trace does
 * not get the warning. */
static void test_bimodal_steps(void)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load("param/resnet-2080ti.kineto.json.gz", &l), 0);
    rv_run_result *r = run(&l, "{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    printf("\n    resnet 2080 Ti: %zu steps, %zu near %.0f ms and %zu near %.0f ms", r->steps.count,
           r->steps.low_count, r->steps.low_median_us / 1e3, r->steps.high_count,
           r->steps.high_median_us / 1e3);
    CU_ASSERT(r->steps.bimodal);
    CU_ASSERT(has_warning(r, "bimodal_steps"));
    rv_run_result_free(r);
    unload(&l);
    CU_ASSERT_EQUAL_FATAL(load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    r = run(&l, "{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_FALSE(r->steps.bimodal);
    CU_ASSERT_FALSE(has_warning(r, "bimodal_steps"));
    rv_run_result_free(r);
    unload(&l);
}

/* Warnings: an optimization that matched nothing (the fused optimizer on
 * an inference trace returned 1.00x and nothing else), a GPU the hardware
 * table does not know, a single-step window. */
static void test_warnings(void)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load("tracelens/h100-bert-small-forward.json.gz", &l), 0);
    rv_run_result *r = run(&l, "{\"optimizations\":[{\"kind\":\"fused_optimizer\"}]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_warning(r, "no_match"));
    CU_ASSERT(has_warning(r, "single_step"));
    CU_ASSERT_FALSE(has_warning(r, "gpu_unknown"));
    rv_run_result_free(r);
    unload(&l);
    CU_ASSERT_EQUAL_FATAL(load("hta/edge/amd-mi250-rocm62.json.gz", &l), 0);
    r = run(&l, "{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_warning(r, "gpu_unknown"));
    rv_run_result_free(r);
    unload(&l);
}

/* Item 3: a launch latency from too few idle-stream samples (45 us from a
 * handful of Triton driver launches here) is not a measurement. */
static void test_launch_latency_samples(void)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load("hta/edge/triton-driver-launch.json.gz", &l), 0);
    printf("\n    triton launches: %zu idle-stream samples, %.1f us", l.g->launch_lat_samples,
           (double)l.g->launch_lat_ns / 1e3);
    CU_ASSERT(l.g->launch_lat_assumed);
    CU_ASSERT(l.g->launch_lat_ns <= 5000);
    rv_run_result *r = run(&l, "{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_warning(r, "launch_latency_assumed"));
    rv_run_result_free(r);
    unload(&l);
}

/* Item 7: collectives are communication whatever library ran them. The
 * fixture is the DLRM rank with its NCCL kernels renamed as PyTorch
 * symmetric-memory and MSCCL kernels (tests/data/collectives/README.md). */
static void test_collectives_by_any_name(void)
{
    loaded a, b;
    CU_ASSERT_EQUAL_FATAL(load("param/dlrm-8rank/worker0.kineto.json.gz", &a), 0);
    rv_error err;
    memset(&b, 0, sizeof(b));
    CU_ASSERT_EQUAL_FATAL(
        rv_kineto_read_file("tests/data/collectives/dlrm-worker0-other-collectives.json.gz", NULL,
                            &b.tr, &err),
        0);
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(b.tr, NULL, &b.g, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(b.g, RV_SCHED_EARLIEST_START, &b.s, &err), 0);
    size_t comm_a = 0, comm_b = 0;
    for (size_t i = 0; i < a.g->ntasks; i++)
        comm_a += (a.g->tasks[i].flags & RV_TF_NCCL) != 0;
    for (size_t i = 0; i < b.g->ntasks; i++)
        comm_b += (b.g->tasks[i].flags & RV_TF_NCCL) != 0;
    printf("\n    collectives: %zu under NCCL names, %zu under multimem/MSCCL names", comm_a,
           comm_b);
    CU_ASSERT(comm_a > 0);
    CU_ASSERT_EQUAL(comm_a, comm_b);
    rv_run_result *ra = run(&a, "{}"), *rb = run(&b, "{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ra);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rb);
    json_t *ga = json_object_get(ra->breakdown_base, "gpu");
    json_t *gb = json_object_get(rb->breakdown_base, "gpu");
    CU_ASSERT(json_number_value(json_object_get(ga, "communication_us")) > 1000);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(ga, "communication_us")),
                           json_number_value(json_object_get(gb, "communication_us")), 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(ga, "compute_us")),
                           json_number_value(json_object_get(gb, "compute_us")), 1e-6);
    rv_run_result_free(ra);
    rv_run_result_free(rb);
    unload(&a);
    unload(&b);
}

/* Item 11: the critical path lies inside one step, its stretches tile it
 * and add up to length_us, and data loading that bounds the step is on it.
 * Before, the stretches of a 143 ms path summed to the whole trace. */
static void check_path(const char *rel, double *data_us)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load(rel, &l), 0);
    rv_run_result *r = run(&l, "{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    json_t *cp = r->critical_path;
    double len = json_number_value(json_object_get(cp, "length_us"));
    double sum = json_number_value(json_object_get(cp, "omitted_us")), prev_end = 0;
    size_t i;
    json_t *st;
    int inside = 1, ordered = 1;
    json_array_foreach(json_object_get(cp, "stretches"), i, st)
    {
        double a = json_number_value(json_object_get(st, "start_us"));
        double b = json_number_value(json_object_get(st, "end_us"));
        sum += b - a;
        inside &= a >= -1e-6 && b <= len + 1e-3 && b >= a;
        ordered &= a >= prev_end - 1e-3;
        prev_end = b;
    }
    printf("\n    %s: path %.1f ms (step %.1f ms), stretches add up to %.1f ms, bound by %s", rel,
           len / 1e3, r->sum.measured_us / 1e3, sum / 1e3,
           json_string_value(json_object_get(cp, "bound_by")));
    CU_ASSERT(inside);
    CU_ASSERT(ordered);
    CU_ASSERT_DOUBLE_EQUAL(sum, len, 1e-6 * len + 1e-3);
    CU_ASSERT(len <= 1.05 * r->sum.measured_us && len >= 0.5 * r->sum.measured_us);
    *data_us = json_number_value(json_object_get(cp, "data_us"));
    rv_run_result_free(r);
    unload(&l);
}

static void test_critical_path(void)
{
    double data0 = 0, data4 = 0, other = 0;
    check_path("kineto/resnet50-v100-workers0.pt.trace.json.gz", &data0);
    check_path("kineto/resnet50-v100-workers4.pt.trace.json.gz", &data4);
    if (rv_test_have_trace(traces, "hta/a100-rank0-of-16-five-streams.json.gz"))
        check_path("hta/a100-rank0-of-16-five-streams.json.gz", &other);
    check_path("hta/v100-1rank-ns-resolution.json.gz", &other);
    /* Loading on the main thread (~69 ms a step) bounds the workers-0 step;
     * with four loader processes it is off the path. */
    CU_ASSERT(data0 > 50e3);
    CU_ASSERT(data4 < 5e3);
}

/* Platform statistics from a trace that does not say what it ran on may
 * pool different hardware: the answer says so. */
static void test_platform_pooled(void)
{
    loaded l;
    rv_error err;
    rv_oh_table *tab = NULL;
    rv_whatif *w = NULL;
    rv_run_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    CU_ASSERT_EQUAL_FATAL(load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    const rv_trace *pool[1] = {l.tr};
    CU_ASSERT_EQUAL_FATAL(rv_oh_table_from_traces(pool, 1, &tab, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text("{\"host_overheads\":\"platform\"}", &w, &err), 0);
    rv_whatif_set_overheads(w, tab);
    CU_ASSERT_EQUAL_FATAL(rv_run(l.g, l.s, w, &o, &r, &err), 0);
    CU_ASSERT_EQUAL(l.tr->platform_cpu, 0);
    CU_ASSERT(has_warning(r, "platform_pooled"));
    rv_run_result_free(r);
    rv_whatif_free(w);
    rv_oh_table_free(tab);
    unload(&l);
}

/* Item 9: "gpu" rescales kernel times through the kernel models when the
 * trace has op shapes (the ResNet-50 trace records them), and says it
 * cannot when it has none: then times stay the trace's. */
static void test_gpu_override_rescales(void)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    rv_run_result *r = run(&l, "{\"gpu\":\"H100-SXM5\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_FALSE(has_warning(r, "gpu_not_rescaled"));
    CU_ASSERT(has_warning(r, "gpu_rescaled"));
    json_t *a = json_array_get(r->applied, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a, "model")), "gpu");
    CU_ASSERT(json_is_true(json_object_get(a, "rescaled")));
    double before = json_real_value(json_object_get(a, "kernel_us_before"));
    double after = json_real_value(json_object_get(a, "kernel_us_after"));
    /* An H100 runs a V100's kernels several times faster, not 100x. */
    CU_ASSERT(after < before / 2 && after > before / 30);
    CU_ASSERT(json_object_size(json_object_get(a, "model_error")) > 0);
    CU_ASSERT(r->sum.predicted_us < r->sum.baseline_us);
    /* The V100's fp32 convolutions move to TF32 at their fp32 efficiency
     * (no TF32 share measured on Hopper): the answer says that is
     * optimistic. */
    CU_ASSERT(has_warning(r, "tf32_optimistic"));
    rv_run_result_free(r);
    /* On an A100 the TF32 share was measured: the answer says it used it. */
    r = run(&l, "{\"gpu\":\"A100-SXM4-80GB\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_warning(r, "tf32_fitted"));
    CU_ASSERT_FALSE(has_warning(r, "tf32_optimistic"));
    rv_run_result_free(r);
    /* To a GPU without TF32 there is nothing to warn of. */
    r = run(&l, "{\"gpu\":\"V100-PCIe\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_FALSE(has_warning(r, "tf32_optimistic"));
    rv_run_result_free(r);
    unload(&l);

    CU_ASSERT_EQUAL_FATAL(load("hta/v100-1rank-ns-resolution.json.gz", &l), 0);
    CU_ASSERT_EQUAL(l.tr->nop_shapes, 0);
    r = run(&l, "{\"gpu\":\"H100-SXM5\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_warning(r, "gpu_not_rescaled"));
    CU_ASSERT_FALSE(has_warning(r, "no_effect"));
    CU_ASSERT_DOUBLE_EQUAL(r->sum.predicted_us, r->sum.baseline_us, 1e-6 * r->sum.baseline_us);
    rv_run_result_free(r);
    unload(&l);
}

int main(void)
{
    traces = rv_test_shared_traces("param/dlrm-8rank/worker0.kineto.json.gz");
    if (!traces) {
        printf("skipped: RV_SHARED_TRACES not set or without the public traces\n");
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("trust", NULL, NULL);
    CU_add_test(s, "GPU work past the step's end", test_gpu_work_past_step_end);
    if (rv_test_have_trace(traces, "hta/a100-rank0-of-16-five-streams.json.gz"))
        CU_add_test(s, "GPU count of a rank apart from the job", test_gpu_count);
    if (rv_test_have_trace(traces, "param/resnet-2080ti.kineto.json.gz"))
        CU_add_test(s, "bimodal steps", test_bimodal_steps);
    CU_add_test(s, "warnings say what the answer rests on", test_warnings);
    CU_add_test(s, "launch latency needs samples", test_launch_latency_samples);
    CU_add_test(s, "collectives by any library's name", test_collectives_by_any_name);
    CU_add_test(s, "critical path of one step", test_critical_path);
    CU_add_test(s, "platform statistics that may pool hardware", test_platform_pooled);
    CU_add_test(s, "gpu override rescales or says why not", test_gpu_override_rescales);
    return rv_test_run() ? 1 : 0;
}
