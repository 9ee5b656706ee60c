/* TBD's metrics on every answer (engine/rv_metrics.c through rv_run, the
 * one pipeline the CLI and the API use), on the public traces:
 *   - ResNet-50 on V100 (Kineto shapes, old PyTorch without stride values):
 *     convolution FLOPs per step within 15% of the architecture's closed
 *     form (3 passes x 32 images x 2 x 3.86 GMAC), mfu in (0, 1), batch 32
 *     from the first conv, peak memory a lower bound (warned);
 *   - BERT on H100 (bf16): mfu against the bf16 peak, peak_bytes equal to
 *     the largest "Total Allocated" of the reported step, read here with
 *     jansson from the raw file;
 *   - a request's batch_size wins over the shapes; throughput is
 *     batch / step time;
 *   - a trace without shapes: flops, mfu null and a flops_unknown warning.
 * Skips (77) without RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reader/rv_et.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

static const char *g_traces;

static json_t *answer(const char *rel, const char *whatif)
{
    rv_test_loaded l;
    rv_run_result *r = NULL;
    rv_whatif *w = NULL;
    rv_error e;
    json_t *o = NULL;
    if (rv_test_load(g_traces, rel, &l) != 0) {
        CU_FAIL("load");
        rv_test_unload(&l);
        return NULL;
    }
    if (whatif)
        CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text(whatif, &w, &e), 0);
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    if (rv_run(l.g, l.s, w, &opts, &r, &e) == 0)
        o = rv_run_render(r, rel);
    else
        fprintf(stderr, "\n  %s: %s\n", rel, e.message);
    rv_run_result_free(r);
    rv_whatif_free(w);
    rv_test_unload(&l);
    CU_ASSERT_PTR_NOT_NULL(o);
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

static double num(const json_t *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    const json_t *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = json_object_get(v, tok);
    return v && json_is_number(v) ? json_number_value(v) : NAN;
}

static void test_resnet_v100(void)
{
    json_t *o = answer("kineto/resnet50-v100-workers0.pt.trace.json.gz", NULL);
    if (!o)
        return;
    double conv = num(o, "flops.by_class.conv");
    double want = 3.0 * 32 * 2 * 3.86e9;
    printf("\n  resnet50 v100: conv %.4g FLOP/step (closed form %.4g), total %.4g, mfu %.3f, "
           "throughput %.1f samples/s, peak %.0f MB",
           conv, want, num(o, "flops.per_step"), num(o, "mfu.baseline"),
           num(o, "throughput.baseline"), num(o, "memory.peak_bytes") / 1e6);
    CU_ASSERT(fabs(conv / want - 1) < 0.15);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(o, "flops"), "dtype")),
                           "fp32");
    double mfu = num(o, "mfu.baseline");
    CU_ASSERT(mfu > 0 && mfu < 1);
    CU_ASSERT_EQUAL(num(o, "batch_size.value"), 32);
    CU_ASSERT(fabs(num(o, "throughput.baseline") - 32 / (num(o, "baseline_us") * 1e-6)) < 1e-6);
    CU_ASSERT(num(o, "memory.peak_bytes") > 0);
    CU_ASSERT(has_warning(o, "memory_lower_bound"));
    CU_ASSERT(has_warning(o, "batch_inferred"));
    CU_ASSERT(!has_warning(o, "flops_partial"));
    double gu = num(o, "utilization.gpu.baseline"), cu = num(o, "utilization.cpu.baseline");
    CU_ASSERT(gu > 0 && gu <= 1 && cu > 0 && cu <= 1);
    json_decref(o);
}

/* The largest "Total Allocated" of GPU memory events, read independently. */
static double max_total_allocated(const char *rel)
{
    char p[4096];
    size_t len = 0;
    snprintf(p, sizeof(p), "%s/%s", g_traces, rel);
    char *txt = rv_test_read_gz(p, &len);
    json_t *j = txt ? json_loadb(txt, len, 0, NULL) : NULL;
    double best = -1;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(j, "traceEvents"), i, ev)
    {
        const json_t *a = json_object_get(ev, "args");
        const char *n = json_string_value(json_object_get(ev, "name"));
        if (!n || strcmp(n, "[memory]") != 0 ||
            json_integer_value(json_object_get(a, "Device Type")) != 1)
            continue;
        double v = json_number_value(json_object_get(a, "Total Allocated"));
        if (v > best)
            best = v;
    }
    json_decref(j);
    free(txt);
    return best;
}

static void test_bert_h100(void)
{
    const char *rel = "tracelens/h100-bert-small-forward.json.gz";
    json_t *o = answer(rel, NULL);
    if (!o)
        return;
    printf("\n  bert h100: %.4g FLOP/step, mfu %.5f, peak %.0f bytes", num(o, "flops.per_step"),
           num(o, "mfu.baseline"), num(o, "memory.peak_bytes"));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(o, "flops"), "dtype")),
                           "bf16");
    /* One step: mfu is the step's FLOPs over its time and the bf16 peak. */
    double mfu = num(o, "flops.per_step") / (num(o, "baseline_us") * 1e-6) / 989e12;
    /* Ratios are rounded to 4 decimals, times to 0.1 us (rv_round.h). */
    CU_ASSERT(fabs(num(o, "mfu.baseline") - mfu) <= 0.5e-4 + 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(num(o, "memory.peak_bytes"), max_total_allocated(rel), 0.5);
    CU_ASSERT(!has_warning(o, "memory_lower_bound"));
    /* Memory over the step: each bin keeps its highest value, so the
     * series reaches the peak; times lie inside the window. */
    json_t *ser = json_object_get(json_object_get(o, "memory"), "series");
    json_t *ts = json_object_get(ser, "t_us"), *by = json_object_get(ser, "bytes");
    CU_ASSERT(json_array_size(ts) > 0 && json_array_size(ts) <= 200);
    CU_ASSERT_EQUAL(json_array_size(ts), json_array_size(by));
    double top = 0;
    for (size_t i = 0; i < json_array_size(by); i++) {
        double v = json_number_value(json_array_get(by, i));
        top = v > top ? v : top;
        CU_ASSERT(json_number_value(json_array_get(ts, i)) <= num(o, "memory.series.window_us"));
    }
    CU_ASSERT_DOUBLE_EQUAL(top, num(o, "memory.peak_bytes"), 0.5);
    json_decref(o);

    /* The request's batch size wins over the shapes. */
    o = answer(rel, "{\"batch_size\": 8}");
    if (!o)
        return;
    CU_ASSERT_EQUAL(num(o, "batch_size.value"), 8);
    CU_ASSERT(fabs(num(o, "throughput.baseline") / (8 / (num(o, "baseline_us") * 1e-6)) - 1) <
              1e-5);
    CU_ASSERT(!has_warning(o, "batch_inferred"));
    json_decref(o);
}

/* The A100 trace with shapes on a fifth of its kernel time (ops without a
 * formula): the FLOPs cover part of it, and the answer says so. DLRM's
 * fbgemm embedding lookups, without a formula before, are costed now (also
 * from Kineto shapes alone): no warning, and an embedding class. */
static void test_partial(void)
{
    json_t *o = answer("hta/a100-rank0-of-16-five-streams.json.gz", NULL);
    if (!o)
        return;
    CU_ASSERT(num(o, "flops.per_step") > 0);
    CU_ASSERT(has_warning(o, "flops_partial"));
    json_decref(o);
    o = answer("param/dlrm-8rank/worker0.kineto.json.gz", NULL);
    if (!o)
        return;
    CU_ASSERT(num(o, "flops.by_class.embedding") > 0);
    CU_ASSERT(!has_warning(o, "flops_partial"));
    json_decref(o);
}

static void test_no_shapes(void)
{
    json_t *o = answer("hta/a100-2rank-nccl.json.gz", NULL);
    if (!o)
        return;
    CU_ASSERT(json_is_null(json_object_get(o, "flops")));
    CU_ASSERT(json_is_null(json_object_get(o, "mfu")));
    CU_ASSERT(has_warning(o, "flops_unknown"));
    CU_ASSERT(json_is_null(json_object_get(json_object_get(o, "memory"), "peak_bytes")));
    CU_ASSERT(json_is_string(json_object_get(json_object_get(o, "memory"), "reason")));
    /* Utilization needs no shapes. */
    CU_ASSERT(num(o, "utilization.gpu.baseline") > 0);
    json_decref(o);
}

/* With the run's execution trace: the parameters of the 2080 Ti ResNet
 * (torchvision ResNet-18: 11,689,512 parameters, fp32) and SGD's momentum
 * buffer as the optimizer state. */
static void test_breakdown_from_et(void)
{
    char p[4096];
    rv_trace *t = NULL;
    rv_et *et = NULL;
    rv_et_join j;
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_run_result *r = NULL;
    rv_error e;
    snprintf(p, sizeof(p), "%s/param/resnet-2080ti.kineto.json.gz", g_traces);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(p, NULL, &t, &e), 0);
    snprintf(p, sizeof(p), "%s/param/resnet-2080ti.et.json.gz", g_traces);
    CU_ASSERT_EQUAL_FATAL(rv_et_read_file(p, NULL, &et, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_et_join_trace(et, t, &j, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_et_shapes_to_trace(et, &j, t), 0);
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &e), 0);
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    CU_ASSERT_EQUAL_FATAL(rv_run(g, s, NULL, &opts, &r, &e), 0);
    json_t *o = rv_run_render(r, "resnet-2080ti");
    const json_t *b = json_object_get(json_object_get(o, "memory"), "breakdown");
    double w = json_number_value(json_object_get(b, "weights"));
    printf("\n  resnet-2080ti (ResNet-18) from its ET: weights %.0f bytes, optimizer %s", w,
           json_string_value(json_object_get(b, "optimizer")));
    CU_ASSERT(fabs(w / (11689512.0 * 4) - 1) < 0.01);
    CU_ASSERT_EQUAL(json_number_value(json_object_get(b, "gradients")), w);
    CU_ASSERT_EQUAL(json_number_value(json_object_get(b, "optimizer_state")), w);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(b, "optimizer")), "SGD");
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_object_get(json_object_get(o, "flops"), "source")),
        "execution_trace");
    json_decref(o);
    rv_run_result_free(r);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_et_join_free(&j);
    rv_et_free(et);
    rv_trace_free(t);
}

int main(void)
{
    g_traces = rv_test_require_shared_traces("kineto/resnet50-v100-workers0.pt.trace.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    CU_add_test(s, "ResNet-50 V100: conv FLOPs, mfu, batch, memory", test_resnet_v100);
    CU_add_test(s, "BERT H100: bf16 mfu, allocator peak, request batch", test_bert_h100);
    CU_add_test(s, "no shapes: null with a warning", test_no_shapes);
    if (rv_test_have_trace(g_traces, "hta/a100-rank0-of-16-five-streams.json.gz"))
        CU_add_test(s, "FLOPs covering part of the kernels: a warning", test_partial);
    if (rv_test_have_trace(g_traces, "param/resnet-2080ti.kineto.json.gz"))
        CU_add_test(s, "memory breakdown from an ET", test_breakdown_from_et);
    return rv_test_run() ? 1 : 0;
}
