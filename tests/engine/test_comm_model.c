/* One communication model (issue 27) on real traces: the two A100 traces
 * with NCCL kernels and the 8-rank DLRM job. Each case failed on the code
 * before the model:
 * - knobs: tensor_fusion_mb, tensor_partition_mb, bucket_mb, dgc_density
 *   and blueconnect each gave exactly 1.000x with no warning on traced
 *   collectives; now each acts or warns no_effect naming its field;
 * - sizes: DLRM rank 0's collectives were sized from timing (12 MB)
 *   though its nccl:* annotations name them (394,241 floats, 1.58 MB);
 * - one answer: on the DLRM job at 1 Gb/s, {"distributed": ...} gave
 *   140.3 ms and {"job": {"bandwidth_gbps": 1}} 53.8 ms;
 * - scaling from one GPU failed on linear-2080ti, the GP100 trace (a
 *   cycle) and resnet-2080ti (no AccumulateGrad kernels);
 * - gradient_mb moved with batch x4 and AMP;
 * - the tree all-reduce cost half the ring's for large messages.
 * The DeepEP case runs on tests/data alone; the others skip (77) without
 * RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "job/rv_job.h"
#include "job/rv_job_int.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "trace/rv_coll.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

#define NR 8

static const char *traces;
static rv_test_loaded dlrm[NR];
static rv_job *job;

static const char *const knobs[] = {
    "tensor_fusion_mb", "tensor_partition_mb", "bucket_mb", "dgc_density",
    "blueconnect",      "gradient_mb",         "p3"};
static const char *const knob_vals[] = {"64", "0.25", "4", "0.001", "true", "100", "true"};
#define NKNOBS 7

/* The answer to doc on one trace (new; NULL with the error printed). */
static rv_run_result *run1(const rv_test_loaded *l, const char *doc)
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

static rv_job_result *runj(const char *doc)
{
    rv_whatif *w = NULL;
    rv_job_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    rv_error_clear(&err);
    if (rv_whatif_parse_text(doc, &w, &err) != 0 || rv_job_run(job, w, &o, &r, &err) != 0)
        fprintf(stderr, "\n  %s: %s\n", doc, err.message);
    rv_whatif_free(w);
    return r;
}

/* 1 when a no_effect warning names distributed.<field>. */
static int names_no_effect(const rv_warning *ws, size_t n, const char *field)
{
    char full[96];
    snprintf(full, sizeof(full), "distributed.%s", field);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ws[i].code, "no_effect") && strstr(ws[i].message, full))
            return 1;
    return 0;
}

static void knobs_on_trace(const char *rel)
{
    rv_test_loaded l;
    if (!rv_test_have_trace(traces, rel))
        return;
    CU_ASSERT_EQUAL_FATAL(rv_test_load(traces, rel, &l), 0);
    const char *net = "\"workers\":16,\"gpus_per_node\":8,\"inter_node_gbps\":1";
    char doc[256];
    snprintf(doc, sizeof(doc), "{\"distributed\":{%s}}", net);
    rv_run_result *b = run1(&l, doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (int k = 0; k < NKNOBS; k++) {
        snprintf(doc, sizeof(doc), "{\"distributed\":{%s,\"%s\":%s}}", net, knobs[k], knob_vals[k]);
        rv_run_result *r = run1(&l, doc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        int moved = fabs(r->sum.predicted_us - b->sum.predicted_us) > 1e-6;
        int said = names_no_effect(r->warnings, r->nwarnings, knobs[k]);
        printf("\n  %s %s: %.1f -> %.1f us, no_effect %d", rel, knobs[k], b->sum.predicted_us,
               r->sum.predicted_us, said);
        CU_ASSERT(moved || said);
        rv_run_result_free(r);
    }
    rv_run_result_free(b);
    rv_test_unload(&l);
}

static void test_knobs_a100_2rank(void)
{
    knobs_on_trace("hta/a100-2rank-nccl.json.gz");
}

static void test_knobs_a100_16(void)
{
    knobs_on_trace("hta/a100-rank0-of-16-five-streams.json.gz");
}

static void test_knobs_dlrm_job(void)
{
    const char *net = "\"workers\":16,\"gpus_per_node\":8,\"inter_node_gbps\":1";
    char doc[256];
    snprintf(doc, sizeof(doc), "{\"distributed\":{%s}}", net);
    rv_job_result *b = runj(doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (int k = 0; k < NKNOBS; k++) {
        snprintf(doc, sizeof(doc), "{\"distributed\":{%s,\"%s\":%s}}", net, knobs[k], knob_vals[k]);
        rv_job_result *r = runj(doc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        int moved = fabs(r->sum.predicted_us - b->sum.predicted_us) > 1e-6;
        int said = names_no_effect(r->warnings, r->nwarnings, knobs[k]);
        printf("\n  job %s: %.1f -> %.1f us, no_effect %d", knobs[k], b->sum.predicted_us,
               r->sum.predicted_us, said);
        CU_ASSERT(moved || said);
        rv_job_result_free(r);
    }
    rv_job_result_free(b);
}

static json_t *dist_entry(const rv_run_result *r)
{
    size_t i;
    json_t *a;
    json_array_foreach(r->applied, i, a)
    {
        const char *m = json_string_value(json_object_get(a, "model"));
        if (m && !strcmp(m, "distributed"))
            return a;
    }
    return NULL;
}

/* DLRM rank 0 alone: its 8 collectives are sized from their nccl:*
 * annotations, none inferred. */
static void test_dlrm_sizes_from_records(void)
{
    rv_run_result *r = run1(&dlrm[0], "{\"distributed\":{\"workers\":8,\"intra_node_gbps\":1}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    json_t *d = dist_entry(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    json_int_t known = json_integer_value(json_object_get(d, "sizes_from_trace"));
    json_int_t inferred = json_integer_value(json_object_get(d, "sizes_inferred"));
    printf("\n  DLRM rank 0: %lld sized from the trace, %lld inferred", (long long)known,
           (long long)inferred);
    CU_ASSERT(known > 0);
    CU_ASSERT_EQUAL(inferred, 0);
    for (size_t i = 0; i < r->nwarnings; i++)
        CU_ASSERT(strcmp(r->warnings[i].code, "message_sizes_inferred") != 0);
    rv_run_result_free(r);
}

/* The two routes to "this job at 1 Gb/s" give one answer. */
static void test_one_answer(void)
{
    rv_job_result *a = runj("{\"distributed\":{\"workers\":8,\"intra_node_gbps\":1}}");
    rv_job_result *b = runj("{\"job\":{\"bandwidth_gbps\":1}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    double pa = a->sum.predicted_us, pb = b->sum.predicted_us;
    printf("\n  DLRM job at 1 Gb/s: distributed %.1f us, job.bandwidth_gbps %.1f us", pa, pb);
    CU_ASSERT(pa > a->sum.baseline_us);
    CU_ASSERT(fabs(pa - pb) <= 0.10 * pb);
    rv_job_result_free(a);
    rv_job_result_free(b);
}

/* Scaling from one GPU answers on every training trace, each step no
 * faster with 8 workers (before: a cycle on linear-2080ti and the GP100
 * trace, "no AccumulateGrad kernels" on resnet-2080ti). */
static void test_every_training_trace(void)
{
    static const char *const rels[] = {
        "kineto/resnet50-v100-workers0.pt.trace.json.gz",
        "kineto/resnet50-v100-workers4.pt.trace.json.gz",
        "hta/v100-1rank-ns-resolution.json.gz",
        "hta/edge/gp100-gpu-user-annotation.json.gz",
        "hta/edge/amd-mi250-rocm62.json.gz",
        "param/linear-2080ti.kineto.json.gz",
        "param/resnet-2080ti.kineto.json.gz",
    };
    for (size_t k = 0; k < sizeof(rels) / sizeof(rels[0]); k++) {
        rv_test_loaded l;
        if (!rv_test_have_trace(traces, rels[k]))
            continue;
        CU_ASSERT_EQUAL_FATAL(rv_test_load(traces, rels[k], &l), 0);
        rv_run_result *r = run1(&l, "{\"distributed\":{\"workers\":8}}");
        CU_ASSERT_PTR_NOT_NULL(r);
        if (r) {
            json_t *d = dist_entry(r);
            printf("\n  %s: %.1f -> %.1f us, gradients %.1f MiB (ready: %s, bytes: %s)", rels[k],
                   r->sum.baseline_us, r->sum.predicted_us,
                   json_number_value(json_object_get(d, "gradient_mb")),
                   json_string_value(json_object_get(d, "gradient_ready_from")),
                   json_string_value(json_object_get(d, "gradient_bytes_from")));
            /* 1e-4: the replay's own scheduling noise (ResNet-50 on the
             * V100 comes out 2 us under its 176 ms step). */
            CU_ASSERT(r->sum.predicted_us >= r->sum.baseline_us * (1 - 1e-4));
        }
        rv_run_result_free(r);
        rv_test_unload(&l);
    }
}

/* Gradient bytes come from the parameters: ResNet-50's 25.6 M fp32
 * parameters are 97.5 MiB, alone, with batch x4 and with AMP (before:
 * 98.6, 407 and 138, read from re-timed AccumulateGrad kernels). */
static void test_gradient_bytes_from_parameters(void)
{
    static const char *const docs[] = {
        "{\"distributed\":{\"workers\":8}}",
        "{\"optimizations\":[{\"kind\":\"batch_size\",\"factor\":4}],"
        "\"distributed\":{\"workers\":8}}",
        "{\"optimizations\":[{\"kind\":\"amp\"}],\"distributed\":{\"workers\":8}}",
    };
    rv_test_loaded l;
    CU_ASSERT_EQUAL_FATAL(
        rv_test_load(traces, "kineto/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    for (size_t k = 0; k < 3; k++) {
        rv_run_result *r = run1(&l, docs[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        double mb = json_number_value(json_object_get(dist_entry(r), "gradient_mb"));
        printf("\n  %s: gradient_mb %.2f", docs[k], mb);
        CU_ASSERT(fabs(mb - 97.5) < 0.5);
        rv_run_result_free(r);
    }
    rv_test_unload(&l);
}

/* NCCL-shaped costs by default: on ResNet-50's buckets (25 MiB) at 16
 * ranks in two nodes the tree costs at least the ring (before: about
 * half), below it only for small messages; a measured table overrides. */
static void test_nccl_costs(void)
{
    rv_test_loaded l;
    CU_ASSERT_EQUAL_FATAL(
        rv_test_load(traces, "kineto/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    static const char *const docs[] = {
        "{\"distributed\":{\"workers\":16,\"algorithm\":\"ring\"}}",
        "{\"distributed\":{\"workers\":16,\"algorithm\":\"tree\"}}",
        "{\"distributed\":{\"workers\":16,\"allreduce_table\":[[1e6,2000],[1e8,200000]]}}",
    };
    double comm[3];
    char model[3][32];
    for (int k = 0; k < 3; k++) {
        rv_run_result *r = run1(&l, docs[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        json_t *d = dist_entry(r);
        comm[k] = json_number_value(json_object_get(d, "comm_us_per_iteration"));
        const char *m = json_string_value(json_object_get(d, "allreduce_model"));
        snprintf(model[k], sizeof(model[k]), "%s", m ? m : "");
        printf("\n  %s: %.0f us of all-reduce per step (%s)", docs[k], comm[k], model[k]);
        rv_run_result_free(r);
    }
    CU_ASSERT(comm[1] >= comm[0]);
    CU_ASSERT(comm[2] > 0 && fabs(comm[2] - comm[0]) > 1);
    CU_ASSERT_STRING_EQUAL(model[0], "nccl");
    CU_ASSERT_STRING_EQUAL(model[2], "measured_table");
    rv_test_unload(&l);
    /* Small messages: the tree's log-depth latency wins. */
    rv_net net = {.n = 16,
                  .g = 8,
                  .intra_bps = 150e9,
                  .inter_bps = 12.5e9,
                  .alpha_s = 5e-6,
                  .efficiency = 0.8};
    CU_ASSERT(rv_coll_nccl_time(&net, RV_COLL_ALLREDUCE, RV_ALGO_TREE, 1024) <
              rv_coll_nccl_time(&net, RV_COLL_ALLREDUCE, RV_ALGO_RING, 1024));
    CU_ASSERT(rv_coll_nccl_time(&net, RV_COLL_ALLREDUCE, RV_ALGO_TREE, 256e6) >=
              rv_coll_nccl_time(&net, RV_COLL_ALLREDUCE, RV_ALGO_RING, 256e6));
}

/* What a planner needs of a job: the slowest rank is the one with the
 * longest step (DLRM rank 1, 19.9 ms), the last to arrive at collectives
 * is named for that (rank 7, the shortest step); job-level samples per
 * second and energy per step (before: neither, and slowest_rank was 7). */
static void test_job_answers(void)
{
    rv_job_result *r = runj("{\"job\":{\"bandwidth_gbps\":1}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    json_t *o = rv_job_render(r, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    int longest = -1;
    double step = -1;
    for (size_t i = 0; i < r->nslots; i++)
        if (r->slots[i].predicted_us > step) {
            step = r->slots[i].predicted_us;
            longest = r->slots[i].rank;
        }
    json_t *e = json_object_get(o, "energy_j"), *tp = json_object_get(o, "throughput");
    double sps =
        json_number_value(json_object_get(json_object_get(tp, "samples_per_s"), "predicted"));
    double batch = (double)json_integer_value(json_object_get(tp, "batch_per_rank"));
    printf("\n  slowest %lld (longest step: %d), last arriving %lld, energy %.2f -> %.2f J, "
           "%.0f samples/s (batch %g per rank)",
           (long long)json_integer_value(json_object_get(o, "slowest_rank")), longest,
           (long long)json_integer_value(json_object_get(o, "last_arriving_rank")),
           json_number_value(json_object_get(e, "baseline")),
           json_number_value(json_object_get(e, "predicted")), sps, batch);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "slowest_rank")), longest);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "last_arriving_rank")), 7);
    CU_ASSERT(json_number_value(json_object_get(e, "predicted")) >
              json_number_value(json_object_get(e, "baseline")));
    CU_ASSERT(json_number_value(json_object_get(e, "baseline")) > 0);
    CU_ASSERT(batch > 0);
    CU_ASSERT_DOUBLE_EQUAL(sps, batch * NR / (r->sum.predicted_us * 1e-6), 1e-6 * sps);
    json_decref(o);
    rv_job_result_free(r);
}

#define DEEPEP "tests/data/collectives/dlrm-worker0-deepep.json.gz"

/* DeepEP's kernels are communication everywhere: in the graph, the
 * breakdown and the critical path, and `distributed` re-times them as the
 * traced collectives they are (sizes inferred: DeepEP records none)
 * instead of inserting DDP all-reduces. Runs on the fixture alone. */
static void test_deepep_is_communication(void)
{
    rv_test_loaded l;
    CU_ASSERT_EQUAL_FATAL(rv_test_load(NULL, DEEPEP, &l), 0);
    size_t deepep = 0, flagged = 0;
    double deepep_us = 0;
    for (size_t i = 0; i < l.g->ntasks; i++) {
        if (!strstr(rv_task_name(l.g, i), "deep_ep::"))
            continue;
        deepep++;
        flagged += (l.g->tasks[i].flags & RV_TF_NCCL) != 0;
        deepep_us += (double)l.g->tasks[i].dur_ns / 1e3;
    }
    CU_ASSERT_EQUAL(deepep, 5);
    CU_ASSERT_EQUAL(flagged, deepep);
    rv_run_result *r = run1(&l, "{\"distributed\":{\"workers\":8,\"intra_node_gbps\":1}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    json_t *gpu = json_object_get(r->breakdown_base, "gpu");
    double comm_us = json_number_value(json_object_get(gpu, "communication_us"));
    json_t *d = dist_entry(r);
    const char *mode = json_string_value(json_object_get(d, "mode"));
    double cp_comm = json_number_value(json_object_get(r->critical_path, "comm_us"));
    printf("\n  DeepEP fixture: %zu kernels (%.0f us), breakdown communication %.0f us, "
           "critical path comm %.0f us at 1 Gb/s, mode %s",
           deepep, deepep_us, comm_us, cp_comm, mode ? mode : "?");
    CU_ASSERT(comm_us >= deepep_us - 1);
    CU_ASSERT(cp_comm > 0);
    CU_ASSERT(mode && !strcmp(mode, "rescale_collectives"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(d, "collectives_rescaled")), 8);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(d, "sizes_inferred")), 5);
    rv_run_result_free(r);
    rv_test_unload(&l);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("comm_model", NULL, NULL);
    CU_add_test(s, "DeepEP kernels are communication", test_deepep_is_communication);
    traces = rv_test_shared_traces("param/dlrm-8rank/worker0.kineto.json.gz");
    if (!traces) {
        unsigned fails = rv_test_run();
        printf("skipped the public-trace cases: RV_SHARED_TRACES is not set or lacks "
               "param/dlrm-8rank\n");
        return fails ? 1 : RV_TEST_SKIP;
    }
    for (int i = 0; i < NR; i++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "param/dlrm-8rank/worker%d.kineto.json.gz", i);
        if (rv_test_load(traces, rel, &dlrm[i]) != 0)
            return 1;
    }
    rv_job_rank rk[NR];
    for (int i = 0; i < NR; i++)
        rk[i] = (rv_job_rank){dlrm[i].g, dlrm[i].s, -1, -1, NULL};
    rv_error err;
    rv_error_clear(&err);
    if (rv_job_build(rk, NR, &job, &err) != 0) {
        fprintf(stderr, "job: %s\n", err.message);
        return 1;
    }
    CU_add_test(s, "knobs act or say no_effect: A100 2 ranks", test_knobs_a100_2rank);
    CU_add_test(s, "knobs act or say no_effect: A100 rank 0 of 16", test_knobs_a100_16);
    CU_add_test(s, "knobs act or say no_effect: DLRM job", test_knobs_dlrm_job);
    CU_add_test(s, "DLRM rank 0 sizes come from its records", test_dlrm_sizes_from_records);
    CU_add_test(s, "distributed and job.bandwidth_gbps agree", test_one_answer);
    CU_add_test(s, "scaling from one GPU answers on every training trace",
                test_every_training_trace);
    CU_add_test(s, "gradient bytes come from the parameters", test_gradient_bytes_from_parameters);
    CU_add_test(s, "NCCL-shaped costs; a measured table overrides", test_nccl_costs);
    CU_add_test(s, "job answers: slowest rank, throughput, energy", test_job_answers);
    unsigned fails = rv_test_run();
    rv_job_free(job);
    for (int i = 0; i < NR; i++)
        rv_test_unload(&dlrm[i]);
    return fails ? 1 : 0;
}
