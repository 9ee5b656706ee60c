/* Tests for task selection (engine/rv_select.c).
 *
 * One hand-built trace: a CPU thread launches a GEMM and an elementwise
 * kernel and a memcpy on stream 7, an NCCL all-reduce and an SGD update on
 * stream 13; an inserted data-loading task sits on a thread of its own.
 * Layers and phases are set on the built graph by hand, so each selector
 * field is checked against a known answer. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "graph/rv_select.h"
#include "common/rv_test_util.h"

static rv_trace *g_trace;
static rv_graph *g_graph;

static uint32_t S(rv_trace *t, const char *s)
{
    return rv_strtab_intern(&t->strings, s, strlen(s));
}

/* Appends one event; 0 or -1 (runs in the suite set-up, so no asserts). */
static int push(rv_trace *t, int cat, const char *name, const char *pid, const char *tid,
                int64_t ts_us, int64_t dur_us, int64_t corr, int32_t stream)
{
    rv_event ev;
    rv_event_init(&ev);
    ev.cat = (uint8_t)cat;
    ev.name = S(t, name);
    ev.pid = S(t, pid);
    ev.tid = S(t, tid);
    ev.ts_ns = 1000000000 + ts_us * 1000;
    ev.dur_ns = dur_us * 1000;
    ev.correlation = corr;
    if (rv_cat_is_gpu_task(cat)) {
        ev.device = 0;
        ev.stream = stream;
    }
    return rv_trace_push(t, &ev) >= 0 ? 0 : -1;
}

static int32_t find_task(const char *name)
{
    for (size_t i = 0; i < g_graph->ntasks; i++)
        if (strcmp(rv_task_name(g_graph, i), name) == 0)
            return (int32_t)i;
    return -1;
}

/* Sets the layer and phase of the task named name. */
static void label(const char *name, const char *layer, int phase)
{
    int32_t i = find_task(name);
    CU_ASSERT_FATAL(i >= 0);
    g_graph->tasks[i].layer = S(g_trace, layer);
    g_graph->tasks[i].phase = (uint8_t)phase;
}

static int setup(void)
{
    rv_error err;
    rv_trace *t = rv_trace_new();
    if (!t)
        return 1;
    g_trace = t;
    int bad = 0;
    bad |= push(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#1", "1", "1", 0, 400, -1, -1);
    bad |= push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", 0, 5, 10, -1);
    bad |= push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", 10, 5, 11, -1);
    bad |= push(t, RV_CAT_RUNTIME, "cudaMemcpyAsync", "1", "1", 20, 5, 12, -1);
    bad |= push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", 30, 5, 13, -1);
    bad |= push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", 40, 5, 14, -1);
    bad |= push(t, RV_CAT_KERNEL, "volta_sgemm_128x64_nn", "0", "7", 10, 100, 10, 7);
    bad |= push(t, RV_CAT_KERNEL, "elementwise_kernel", "0", "7", 110, 20, 11, 7);
    bad |= push(t, RV_CAT_MEMCPY, "Memcpy HtoD (Pageable -> Device)", "0", "7", 130, 10, 12, 7);
    bad |= push(t, RV_CAT_KERNEL, "ncclKernel_AllReduce_RING_LL_Sum_float", "0", "13", 140, 50, 13,
                13);
    bad |= push(t, RV_CAT_KERNEL, "sgd_update_kernel", "0", "13", 190, 10, 14, 13);
    if (bad)
        return 1;
    if (rv_graph_build(t, NULL, &g_graph, &err) != 0) {
        fprintf(stderr, "graph: %s\n", err.message);
        return 1;
    }
    /* The builder's own labels (tasks in a step default to forward) are
     * not under test here: start from none, the cases set their own. */
    for (size_t i = 0; i < g_graph->ntasks; i++) {
        g_graph->tasks[i].phase = RV_PHASE_UNKNOWN;
        g_graph->tasks[i].layer = 0;
    }
    /* An inserted data-loading task on a thread of its own. */
    rv_thread th;
    memset(&th, 0, sizeof(th));
    th.kind = RV_THREAD_CPU;
    th.device = -1;
    th.stream = -1;
    th.first = th.last = -1;
    int32_t dt = rv_graph_add_thread(g_graph, &th);
    if (dt < 0)
        return 1;
    rv_task x;
    memset(&x, 0, sizeof(x));
    x.kind = RV_TASK_DATA;
    x.meas_start_ns = -1;
    x.event = -1;
    x.launch = -1;
    x.iteration = -1;
    x.dur_ns = 1000;
    x.name = S(t, "data_load");
    x.phase = RV_PHASE_DATALOADER;
    if (rv_graph_append_task(g_graph, dt, &x) < 0)
        return 1;
    return 0;
}

static int teardown(void)
{
    rv_graph_free(g_graph);
    rv_trace_free(g_trace);
    return 0;
}

/* Parses doc ("" or NULL: no selector object at all) and returns the
 * number of matching tasks; names the matches in out (comma separated). */
static int count(const char *doc, char *out, size_t cap)
{
    json_t *obj = NULL;
    if (doc) {
        obj = json_loads(doc, JSON_DECODE_ANY, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(obj);
    }
    rv_select s;
    rv_error err;
    rv_error_clear(&err);
    int rc = rv_select_parse(obj, "select", &s, &err);
    if (rc != 0)
        fprintf(stderr, "\n  %s: %s\n", doc, err.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    int n = 0;
    size_t used = 0;
    if (out && cap)
        out[0] = '\0';
    for (size_t i = 0; i < g_graph->ntasks; i++) {
        if (!rv_select_match(&s, g_graph, i))
            continue;
        n++;
        if (out && used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? "," : "",
                                     rv_task_name(g_graph, i));
    }
    rv_select_clear(&s);
    json_decref(obj);
    return n;
}

static void test_graph_shape(void)
{
    /* 5 launches + 5 GPU tasks + the data task (the step annotation is not a
     * task). */
    CU_ASSERT_EQUAL(g_graph->ntasks, 11);
    CU_ASSERT(find_task("data_load") >= 0);
}

static void test_empty_selects_everything(void)
{
    size_t all = g_graph->ntasks;
    CU_ASSERT_EQUAL(count(NULL, NULL, 0), (int)all);
    CU_ASSERT_EQUAL(count("{}", NULL, 0), (int)all);
    CU_ASSERT_EQUAL(count("null", NULL, 0), (int)all);
}

static void test_kind(void)
{
    char names[1024];
    /* Collectives are not "kernel"; memcpys neither. */
    CU_ASSERT_EQUAL(count("{\"kind\":\"kernel\"}", names, sizeof(names)), 3);
    CU_ASSERT_STRING_EQUAL(names, "volta_sgemm_128x64_nn,elementwise_kernel,sgd_update_kernel");
    CU_ASSERT_EQUAL(count("{\"kind\":\"cpu\"}", NULL, 0), 5);
    CU_ASSERT_EQUAL(count("{\"kind\":\"memcpy\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "Memcpy HtoD (Pageable -> Device)");
    CU_ASSERT_EQUAL(count("{\"kind\":\"comm\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "ncclKernel_AllReduce_RING_LL_Sum_float");
    CU_ASSERT_EQUAL(count("{\"kind\":\"data\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "data_load");
}

static void test_name_pattern(void)
{
    char names[1024];
    /* Searched anywhere in the name, extended syntax, case-sensitive. */
    CU_ASSERT_EQUAL(count("{\"name\":\"gemm\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "volta_sgemm_128x64_nn");
    CU_ASSERT_EQUAL(count("{\"name\":\"^volta_\"}", NULL, 0), 1);
    CU_ASSERT_EQUAL(count("{\"name\":\"^sgemm\"}", NULL, 0), 0);
    CU_ASSERT_EQUAL(count("{\"name\":\"(Memcpy|nccl)\"}", NULL, 0), 3); /* with cudaMemcpyAsync */
    CU_ASSERT_EQUAL(count("{\"name\":\"GEMM\"}", NULL, 0), 0);
    CU_ASSERT_EQUAL(count("{\"name\":\"cudaLaunch\"}", NULL, 0), 4);
    CU_ASSERT_EQUAL(count("{\"name\":\"_kernel$\"}", NULL, 0), 2);
}

static void test_layer(void)
{
    char names[1024];
    label("volta_sgemm_128x64_nn", "conv1", RV_PHASE_FORWARD);
    label("elementwise_kernel", "relu1", RV_PHASE_FORWARD);
    label("sgd_update_kernel", "Optimizer.step#SGD.step", RV_PHASE_OPTIMIZER);
    CU_ASSERT_EQUAL(count("{\"layer\":\"^conv\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "volta_sgemm_128x64_nn");
    CU_ASSERT_EQUAL(count("{\"layer\":\"[0-9]$\"}", NULL, 0), 2);
    CU_ASSERT_EQUAL(count("{\"layer\":\"Optimizer\\\\.step\"}", NULL, 0), 1);
    /* A task outside every layer has the empty layer name: only a pattern
     * that matches "" selects it. */
    CU_ASSERT_EQUAL(count("{\"layer\":\"\"}", NULL, 0), (int)g_graph->ntasks);
    CU_ASSERT_EQUAL(count("{\"layer\":\".\"}", NULL, 0), 3);
}

static void test_phase(void)
{
    char names[1024];
    label("volta_sgemm_128x64_nn", "conv1", RV_PHASE_FORWARD);
    label("elementwise_kernel", "relu1", RV_PHASE_BACKWARD);
    label("sgd_update_kernel", "Optimizer.step#SGD.step", RV_PHASE_OPTIMIZER);
    CU_ASSERT_EQUAL(count("{\"phase\":\"forward\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "volta_sgemm_128x64_nn");
    CU_ASSERT_EQUAL(count("{\"phase\":\"backward\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "elementwise_kernel");
    CU_ASSERT_EQUAL(count("{\"phase\":\"optimizer\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "sgd_update_kernel");
    CU_ASSERT_EQUAL(count("{\"phase\":\"dataloader\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "data_load");
    /* Everything else: 5 launches, the memcpy and the all-reduce. */
    CU_ASSERT_EQUAL(count("{\"phase\":\"unknown\"}", NULL, 0), 7);
}

static void test_stream(void)
{
    char names[1024];
    CU_ASSERT_EQUAL(count("{\"stream\":7}", names, sizeof(names)), 3);
    CU_ASSERT_STRING_EQUAL(names,
                           "volta_sgemm_128x64_nn,elementwise_kernel,Memcpy HtoD (Pageable -> "
                           "Device)");
    CU_ASSERT_EQUAL(count("{\"stream\":13}", NULL, 0), 2);
    /* CPU tasks and the data task are on no stream; stream 0 is a real id. */
    CU_ASSERT_EQUAL(count("{\"stream\":0}", NULL, 0), 0);
    CU_ASSERT_EQUAL(count("{\"stream\":99}", NULL, 0), 0);
}

/* Every present field must match. */
static void test_fields_combine(void)
{
    char names[1024];
    label("sgd_update_kernel", "Optimizer.step#SGD.step", RV_PHASE_OPTIMIZER);
    CU_ASSERT_EQUAL(count("{\"kind\":\"kernel\",\"stream\":13}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "sgd_update_kernel");
    CU_ASSERT_EQUAL(count("{\"kind\":\"comm\",\"stream\":7}", NULL, 0), 0);
    CU_ASSERT_EQUAL(
        count("{\"kind\":\"kernel\",\"name\":\"sgd\",\"phase\":\"optimizer\"}", NULL, 0), 1);
    CU_ASSERT_EQUAL(count("{\"kind\":\"kernel\",\"name\":\"sgd\",\"phase\":\"forward\"}", NULL, 0),
                    0);
    CU_ASSERT_EQUAL(count("{\"kind\":\"cpu\",\"name\":\"Memcpy\"}", names, sizeof(names)), 1);
    CU_ASSERT_STRING_EQUAL(names, "cudaMemcpyAsync");
}

/* Bad selectors fail with RV_ERR_INVALID and name the offending member. */
static void test_errors_name_the_field(void)
{
    static const struct {
        const char *doc;
        const char *field;
    } bad[] = {
        {"[]", "select"},
        {"\"kernel\"", "select"},
        {"{\"kind\":\"gpu\"}", "select.kind"},
        {"{\"kind\":7}", "select.kind"},
        {"{\"name\":3}", "select.name"},
        {"{\"name\":\"(\"}", "select.name"},
        {"{\"layer\":\"[\"}", "select.layer"},
        {"{\"phase\":\"warmup\"}", "select.phase"},
        {"{\"stream\":-1}", "select.stream"},
        {"{\"stream\":\"7\"}", "select.stream"},
        {"{\"stream\":4294967296}", "select.stream"},
        {"{\"kernel\":\"gemm\"}", "select.kernel"},
        {"{\"name\":\"gemm\",\"colour\":1}", "select.colour"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *obj = json_loads(bad[i].doc, JSON_DECODE_ANY, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(obj);
        rv_select s;
        rv_error err;
        rv_error_clear(&err);
        int rc = rv_select_parse(obj, "select", &s, &err);
        if (rc != RV_ERR_INVALID || strcmp(err.field, bad[i].field) != 0)
            fprintf(stderr, "\n  %s: rc %d, field '%s' (wanted '%s')\n", bad[i].doc, rc, err.field,
                    bad[i].field);
        CU_ASSERT_EQUAL(rc, RV_ERR_INVALID);
        CU_ASSERT_STRING_EQUAL(err.field, bad[i].field);
        CU_ASSERT(err.message[0] != '\0');
        /* A failed parse leaves nothing to free; clearing is still safe. */
        rv_select_clear(&s);
        json_decref(obj);
    }
    /* Overlong patterns are refused before regcomp sees them. */
    char doc[2048];
    int n = snprintf(doc, sizeof(doc), "{\"name\":\"");
    memset(doc + n, 'a', 600);
    snprintf(doc + n + 600, sizeof(doc) - (size_t)n - 600, "\"}");
    json_t *obj = json_loads(doc, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(obj);
    rv_select s;
    rv_error err;
    rv_error_clear(&err);
    CU_ASSERT_EQUAL(rv_select_parse(obj, "optimizations[2].select", &s, &err), RV_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.field, "optimizations[2].select.name");
    json_decref(obj);
}

static void test_clear_is_idempotent(void)
{
    json_t *obj = json_loads("{\"name\":\"gemm\",\"layer\":\"conv\"}", 0, NULL);
    rv_select s;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_select_parse(obj, "select", &s, &err), 0);
    CU_ASSERT_TRUE(s.has_name && s.has_layer);
    rv_select_clear(&s);
    CU_ASSERT_FALSE(s.has_name || s.has_layer);
    rv_select_clear(&s);
    rv_select_clear(NULL);
    json_decref(obj);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("select", setup, teardown);
    CU_add_test(s, "the hand-built graph", test_graph_shape);
    CU_add_test(s, "empty selection means everything", test_empty_selects_everything);
    CU_add_test(s, "kind", test_kind);
    CU_add_test(s, "name pattern", test_name_pattern);
    CU_add_test(s, "layer", test_layer);
    CU_add_test(s, "phase", test_phase);
    CU_add_test(s, "stream", test_stream);
    CU_add_test(s, "fields combine", test_fields_combine);
    CU_add_test(s, "errors name the field", test_errors_name_the_field);
    CU_add_test(s, "clear is idempotent", test_clear_is_idempotent);
    return rv_test_run() ? 1 : 0;
}
