/* Tests for the graph builder and the simulator on hand-built traces: the
 * rules, with figures worked out by hand. The checks on real public traces
 * are in test_graph_real.c. */
#include <CUnit/Basic.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

static uint32_t S(rv_trace *t, const char *s)
{
    return rv_strtab_intern(&t->strings, s, strlen(s));
}

static void push(rv_trace *t, int cat, const char *name, const char *pid, const char *tid,
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
    CU_ASSERT_FATAL(rv_trace_push(t, &ev) >= 0);
}

/* One CPU thread launches A and B, then synchronizes. A runs 100 us, B
 * 50 us, back to back; the sync returns 2 us after B ends. */
static rv_trace *small_trace(void)
{
    rv_trace *t = rv_trace_new();
    push(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#1", "1", "1", 0, 170, -1, -1);
    push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", 0, 5, 10, -1);
    push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", 10, 5, 11, -1);
    push(t, RV_CAT_RUNTIME, "cudaDeviceSynchronize", "1", "1", 20, 140, 12, -1);
    push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", 165, 3, 13, -1);
    push(t, RV_CAT_KERNEL, "kernel_A", "0", "7", 8, 100, 10, 7);
    push(t, RV_CAT_KERNEL, "kernel_B", "0", "7", 108, 50, 11, 7);
    push(t, RV_CAT_KERNEL, "kernel_C", "0", "7", 176, 4, 13, 7);
    return t;
}

static int32_t find_task(const rv_graph *g, const char *name)
{
    for (size_t i = 0; i < g->ntasks; i++)
        if (strcmp(rv_trace_str(g->trace, g->tasks[i].name), name) == 0)
            return (int32_t)i;
    return -1;
}

static void test_small_replay(void)
{
    rv_trace *t = small_trace();
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    CU_ASSERT_EQUAL(g->ntasks, 7);
    CU_ASSERT_EQUAL(g->niters, 1);
    /* Two kernels met an idle stream (A: 8 us, C: 11 us after their
     * launches): too few samples to measure, so the 5 us default stands
     * (docs/internals/graph.md, inference rule 5). */
    CU_ASSERT_EQUAL(g->launch_lat_samples, 2);
    CU_ASSERT_TRUE(g->launch_lat_assumed);
    CU_ASSERT_EQUAL(g->launch_lat_ns, 5000);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &err), 0);
    int32_t a = find_task(g, "kernel_A"), b = find_task(g, "kernel_B");
    int32_t sync = find_task(g, "cudaDeviceSynchronize");
    CU_ASSERT_TRUE(g->tasks[sync].flags & RV_TF_SYNC);
    /* A: launch at 0 + 5 us; B queued behind A with the 0 us queue gap. */
    CU_ASSERT_EQUAL(s->start_ns[a], 5000);
    CU_ASSERT_EQUAL(s->start_ns[b], 105000);
    /* The sync waits for B (ends 155) and keeps its 2 us tail. */
    CU_ASSERT_EQUAL(s->end_ns[sync], 157000);
    CU_ASSERT_EQUAL(s->binder[sync], b);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* Halving kernel A must move the sync and everything after it by 50 us. */
static void test_small_whatif_direction(void)
{
    rv_trace *t = small_trace();
    rv_graph *g = NULL;
    rv_sim *s0 = NULL, *s1 = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(g, RV_SCHED_EARLIEST_START, &s0, &err), 0);
    rv_graph *h = rv_graph_clone(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    h->tasks[find_task(h, "kernel_A")].dur_ns /= 2;
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(h, RV_SCHED_EARLIEST_START, &s1, &err), 0);
    int32_t sync = find_task(g, "cudaDeviceSynchronize");
    CU_ASSERT_EQUAL(s0->end_ns[sync] - s1->end_ns[sync], 50000);
    CU_ASSERT_EQUAL(rv_sim_iter_ns(g, s0, 0) - rv_sim_iter_ns(h, s1, 0), 50000);
    /* Removing B frees the sync from B: it now waits for A only. */
    rv_sim_free(s1);
    rv_graph_remove_task(h, find_task(h, "kernel_B"));
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(h, RV_SCHED_FIFO, &s1, &err), 0);
    CU_ASSERT_EQUAL(s1->end_ns[sync], 5000 + 50000 + 2000);
    rv_sim_free(s0);
    rv_sim_free(s1);
    rv_graph_free(h);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* Six kernels each start 2 s after their launch on an idle stream: a
 * broken clock, not a launch latency. The latency is capped at 1 s (the
 * stream-wait thresholds built on it must not overflow) and the answer
 * says so (docs/internals/graph.md, inference rule 6). */
static void test_gpu_constant_capped(void)
{
    rv_trace *t = rv_trace_new();
    push(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#1", "1", "1", 0, 13000000, -1, -1);
    for (int i = 0; i < 6; i++) {
        int64_t at = (int64_t)i * 2100000;
        push(t, RV_CAT_RUNTIME, "cudaLaunchKernel", "1", "1", at, 5, 20 + i, -1);
        push(t, RV_CAT_KERNEL, "kernel_slow_clock", "0", "7", at + 2000000, 10, 20 + i, 7);
    }
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_whatif *w = NULL;
    rv_run_result *r = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    CU_ASSERT_EQUAL(g->launch_lat_samples, 6);
    CU_ASSERT_FALSE(g->launch_lat_assumed);
    CU_ASSERT_EQUAL(g->launch_lat_ns, 1000000000);
    CU_ASSERT_TRUE(g->gpu_constant_capped);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text("{}", &w, &err), 0);
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    CU_ASSERT_EQUAL_FATAL(rv_run(g, s, w, &o, &r, &err), 0);
    int warned = 0;
    for (size_t i = 0; i < r->nwarnings; i++)
        warned |= strcmp(r->warnings[i].code, "gpu_timing_capped") == 0;
    CU_ASSERT_TRUE(warned);
    rv_run_result_free(r);
    rv_whatif_free(w);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* The small trace's constants are measured as they are: no cap, no word. */
static void test_gpu_constant_not_capped(void)
{
    rv_trace *t = small_trace();
    rv_graph *g = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    CU_ASSERT_FALSE(g->gpu_constant_capped);
    rv_graph_free(g);
    rv_trace_free(t);
}

static void test_cycle_is_an_error(void)
{
    rv_trace *t = small_trace();
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    /* kernel_B -> first launch closes a loop. */
    CU_ASSERT_EQUAL(rv_graph_add_edge(g, find_task(g, "kernel_B"), 0, 0, RV_EDGE_OTHER, 0), 0);
    rv_error_clear(&err);
    CU_ASSERT_EQUAL(rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &err), RV_ERR_INVALID);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "cycle"));
    rv_graph_free(g);
    rv_trace_free(t);
}

/* Priority schedule: two ready kernels on two streams never wait for each
 * other, but one CPU thread with inserted independent tasks runs them in
 * priority order. */
static void test_priority_schedule(void)
{
    rv_trace *t = small_trace();
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    rv_thread th;
    memset(&th, 0, sizeof(th));
    th.kind = RV_THREAD_COMM;
    th.first = th.last = -1;
    int32_t ct = rv_graph_add_thread(g, &th);
    CU_ASSERT_FATAL(ct >= 0);
    rv_task x;
    memset(&x, 0, sizeof(x));
    x.kind = RV_TASK_COMM;
    x.meas_start_ns = -1;
    x.event = -1;
    x.launch = -1;
    x.dur_ns = 10000;
    /* Two tasks on one channel without a thread edge between them. */
    int64_t p = rv_graph_append_task(g, ct, &x);
    g->threads[ct].last = -1;
    x.priority = -5;
    int64_t q = rv_graph_append_task(g, ct, &x);
    g->tasks[p].priority = 5;
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(g, RV_SCHED_PRIORITY, &s, &err), 0);
    CU_ASSERT_EQUAL(s->start_ns[q], 0);
    CU_ASSERT_EQUAL(s->start_ns[p], 10000);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* The packed edges built once serve a clone that borrows the edges (same
 * answer as building them anew); once the clone adds an edge they no
 * longer fit and the simulator builds its own, so the new edge counts. */
static void test_packed_edges_reused(void)
{
    rv_trace *t = small_trace();
    rv_graph *g = NULL;
    rv_sim *s0 = NULL, *s1 = NULL, *s2 = NULL;
    rv_sim_adj *adj = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_adj_new(g, &adj, &err), 0);
    rv_graph *h = rv_graph_clone_cow(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    int32_t a = find_task(h, "kernel_A"), c = find_task(h, "kernel_C");
    h->tasks[a].dur_ns /= 2;
    rv_sim_opts o = {.policy = RV_SCHED_EARLIEST_START, .adj = adj};
    CU_ASSERT_EQUAL_FATAL(rv_sim_run_opts(h, &o, &s1, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(h, RV_SCHED_EARLIEST_START, &s0, &err), 0);
    CU_ASSERT_EQUAL(memcmp(s0->start_ns, s1->start_ns, h->ntasks * sizeof(int64_t)), 0);
    CU_ASSERT_EQUAL(memcmp(s0->binder, s1->binder, h->ntasks * sizeof(int32_t)), 0);
    /* C waits 1 ms after A ends: only an adjacency with the new edge says so. */
    CU_ASSERT_EQUAL_FATAL(rv_graph_add_edge(h, a, c, 1000000, RV_EDGE_OTHER, 0), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run_opts(h, &o, &s2, &err), 0);
    CU_ASSERT_EQUAL(s2->start_ns[c], s2->end_ns[a] + 1000000);
    CU_ASSERT_EQUAL(s2->binder[c], a);
    rv_sim_free(s0);
    rv_sim_free(s1);
    rv_sim_free(s2);
    rv_sim_adj_free(adj);
    rv_graph_free(h);
    rv_graph_free(g);
    rv_trace_free(t);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("graph", NULL, NULL);
    CU_add_test(s, "small trace replays exactly", test_small_replay);
    CU_add_test(s, "what-if moves the sync", test_small_whatif_direction);
    CU_add_test(s, "cycle is an error", test_cycle_is_an_error);
    CU_add_test(s, "GPU constant over 1 s capped and said", test_gpu_constant_capped);
    CU_add_test(s, "measured GPU constants not capped", test_gpu_constant_not_capped);
    CU_add_test(s, "priority schedule", test_priority_schedule);
    CU_add_test(s, "packed edges reused while borrowed", test_packed_edges_reused);
    return rv_test_run() ? 1 : 0;
}
