/* A what-if in progress stops at its deadline or when cancelled
 * (engine/rv_stop.h): the simulator's loop, the models' loop and rv_run
 * return RV_ERR_BUDGET instead of running to the end. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "common/rv_test_util.h"
#include "graph/rv_graph.h"
#include "models/rv_apply.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"

#define NTASKS 100000

static rv_trace *g_trace;
static rv_graph *g_graph;
static rv_sim *g_base;

/* NTASKS kernels one after the other on stream 7, in one profiler step. */
static int setup(void)
{
    rv_error err;
    rv_event ev;
    rv_trace *t = rv_trace_new();

    if (!t)
        return 1;
    g_trace = t;
    rv_event_init(&ev);
    ev.cat = RV_CAT_USER_ANNOTATION;
    ev.name = rv_strtab_intern(&t->strings, "ProfilerStep#1", 14);
    ev.pid = ev.tid = rv_strtab_intern(&t->strings, "1", 1);
    ev.ts_ns = 1000000;
    ev.dur_ns = (int64_t)(NTASKS + 1) * 2000;
    if (rv_trace_push(t, &ev) < 0)
        return 1;
    for (size_t i = 0; i < NTASKS; i++) {
        rv_event_init(&ev);
        ev.cat = RV_CAT_KERNEL;
        ev.name = rv_strtab_intern(&t->strings, i % 2 ? "volta_sgemm_128x64_nn" : "relu_kernel",
                                   i % 2 ? 21 : 11);
        ev.pid = rv_strtab_intern(&t->strings, "0", 1);
        ev.tid = rv_strtab_intern(&t->strings, "7", 1);
        ev.ts_ns = 1000000 + (int64_t)i * 2000;
        ev.dur_ns = 1000;
        ev.device = 0;
        ev.stream = 7;
        if (rv_trace_push(t, &ev) < 0)
            return 1;
    }
    if (rv_graph_build(t, NULL, &g_graph, &err) != 0 ||
        rv_sim_run(g_graph, RV_SCHED_EARLIEST_START, &g_base, &err) != 0)
        return 1;
    return 0;
}

static int teardown(void)
{
    rv_sim_free(g_base);
    rv_graph_free(g_graph);
    rv_trace_free(g_trace);
    return 0;
}

static int calls;

static int count_calls(void *arg)
{
    (void)arg;
    return ++calls > 3; /* "the client went away" at the fourth check */
}

static void test_sim_stops(void)
{
    rv_sim *s = NULL;
    rv_error err;
    volatile int cancel = 1;

    rv_stop st = {.cancel = &cancel};
    rv_sim_opts o = {.policy = RV_SCHED_EARLIEST_START, .stop = &st};
    rv_error_clear(&err);
    CU_ASSERT_EQUAL(rv_sim_run_opts(g_graph, &o, &s, &err), RV_ERR_BUDGET);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "cancelled"));

    st = (rv_stop){.deadline_ms = rv_stop_now_ms() - 1, .budget_ms = 7};
    rv_error_clear(&err);
    CU_ASSERT_EQUAL(rv_sim_run_opts(g_graph, &o, &s, &err), RV_ERR_BUDGET);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "time budget of 7 ms"));

    /* Asked every RV_STOP_EVERY tasks: stops at the fourth check. */
    calls = 0;
    st = (rv_stop){.cancel_fn = count_calls};
    CU_ASSERT_EQUAL(rv_sim_run_opts(g_graph, &o, &s, &err), RV_ERR_BUDGET);
    CU_ASSERT_EQUAL(calls, 4);

    /* Nothing to stop for: the same answer as rv_sim_run. */
    st = (rv_stop){.deadline_ms = rv_stop_now_ms() + 60000};
    CU_ASSERT_EQUAL_FATAL(rv_sim_run_opts(g_graph, &o, &s, &err), 0);
    CU_ASSERT_EQUAL(s->makespan_ns, g_base->makespan_ns);
    rv_sim_free(s);
}

static int run(const char *doc, const rv_run_opts *o, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;

    rv_error_clear(err);
    CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text(doc, &w, err), 0);
    int rc = rv_run(g_graph, g_base, w, o, &res, err);
    CU_ASSERT(rc != 0 || res != NULL);
    rv_run_result_free(res);
    rv_whatif_free(w);
    return rc;
}

static void test_run_stops(void)
{
    static const char doc[] = "{\"optimizations\":[{\"kind\":\"scale\",\"select\":{\"name\":"
                              "\"gemm\"},\"factor\":0.5}]}";
    rv_error err;
    volatile int cancel = 1;

    rv_run_opts o = {.iteration = RV_ITER_MEDIAN, .cancel = &cancel};
    CU_ASSERT_EQUAL(run(doc, &o, &err), RV_ERR_BUDGET);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "cancelled"));

    o = (rv_run_opts){.iteration = RV_ITER_MEDIAN, .deadline_ms = rv_stop_now_ms() - 1};
    CU_ASSERT_EQUAL(run(doc, &o, &err), RV_ERR_BUDGET);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "deadline"));

    /* The same run with time to spare answers. */
    cancel = 0;
    o = (rv_run_opts){.iteration = RV_ITER_MEDIAN,
                      .deadline_ms = rv_stop_now_ms() + 60000,
                      .budget_ms = 60000,
                      .cancel = &cancel};
    CU_ASSERT_EQUAL(run(doc, &o, &err), 0);
}

/* Each insert after {} matches the tasks the ones before added: the fifth
 * would add 1.6M tasks, past the 1M one insert may add, and is refused
 * naming its selector before it allocates. */
static void test_insert_bounded(void)
{
    static const char doc[] =
        "{\"optimizations\":[{\"kind\":\"insert\",\"after\":{},\"duration_us\":1},"
        "{\"kind\":\"insert\",\"after\":{},\"duration_us\":1},{\"kind\":\"insert\","
        "\"after\":{},\"duration_us\":1},{\"kind\":\"insert\",\"after\":{},\"duration_us\":1},"
        "{\"kind\":\"insert\",\"after\":{},\"duration_us\":1}]}";
    rv_whatif *w = NULL;
    rv_error err;

    rv_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text(doc, &w, &err), 0);
    rv_graph *g = rv_graph_clone(g_graph);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    size_t n0 = g->ntasks;
    CU_ASSERT_EQUAL(rv_apply(w, g, NULL, &err), RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(err.field, "optimizations[4].after");
    /* The four before it ran; the fifth added nothing. */
    CU_ASSERT_EQUAL(g->ntasks, n0 * 16);
    /* The limits are the what-if's, not the graph's. */
    CU_ASSERT_EQUAL(g->max_tasks, 0);
    CU_ASSERT_PTR_NULL(g->stop);
    rv_graph_free(g);
    rv_whatif_free(w);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("run_stop", setup, teardown);
    CU_add_test(s, "the simulator stops", test_sim_stops);
    CU_add_test(s, "rv_run stops", test_run_stops);
    CU_add_test(s, "an insert's growth is bounded", test_insert_bounded);
    return rv_test_run() ? 1 : 0;
}
