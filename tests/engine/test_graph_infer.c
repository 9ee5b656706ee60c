/* The graph's inference rules on real traces without synchronization or
 * event records (docs/internals/graph.md "Inference rules"): a sync waits
 * only for GPU work that ended by its return; a kernel that started late
 * on an idle stream waited for the task of another stream that ended just
 * before; a stream idle for no reason the trace shows keeps its idle time;
 * GPU work whose launch was lost is held by its launcher; GPU work queued
 * before profiling began is held by nothing on the CPU.
 * hta/a100-rank0-of-16-five-streams has no cuda_sync records in 75 of its
 * 76 syncs, three side streams and 872 kernels without a launch record.
 * Skips (77) without RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"
#include "common/rv_test_util.h"

#define FIVE_STREAMS "hta/a100-rank0-of-16-five-streams.json.gz"

static const char *traces;

typedef struct loaded {
    rv_trace *tr;
    rv_graph *g;
    rv_sim *s;
    rv_iter_figures f;
} loaded;

static int load(const char *rel, loaded *l)
{
    char path[1024];
    rv_error err;
    snprintf(path, sizeof(path), "%s/%s", traces, rel);
    if (rv_kineto_read_file(path, NULL, &l->tr, &err) != 0 ||
        rv_graph_build(l->tr, NULL, &l->g, &err) != 0 ||
        rv_sim_run(l->g, RV_SCHED_EARLIEST_START, &l->s, &err) != 0 ||
        rv_report_iteration(l->g, l->s, RV_ITER_MEDIAN, &l->f, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        return -1;
    }
    return 0;
}

static void unload(loaded *l)
{
    rv_sim_free(l->s);
    rv_graph_free(l->g);
    rv_trace_free(l->tr);
}

/* Before the rules: 1.25% with two errors cancelling (syncs waited for
 * queued compute they never waited for, 37 ms at a time; side-stream and
 * launch-less kernels started early); the sync rule alone: 6.2%. */
static void test_five_streams_replay(void)
{
    loaded l = {0};
    CU_ASSERT_EQUAL_FATAL(load(FIVE_STREAMS, &l), 0);
    double err = fabs(l.f.simulated_us - l.f.measured_us) / l.f.measured_us;
    printf("\n    five streams: measured %.1f ms, replayed %.1f ms, error %.2f%%; "
           "%zu inferred waits, %zu queued before the window, %zu kept idle gaps",
           l.f.measured_us / 1e3, l.f.simulated_us / 1e3, err * 100, l.g->inferred_waits,
           l.g->prewindow_gpu, l.g->inferred_idle);
    CU_ASSERT(err <= 0.005);
    CU_ASSERT(l.g->inferred_waits > 0);
    /* The 872 kernels without a launch record are the first 156 ms of the
     * compute stream: queued before profiling began (the launch queue runs
     * 180 ms deep here), so no CPU call holds them. */
    CU_ASSERT_EQUAL(l.g->prewindow_gpu, 872);
    CU_ASSERT_EQUAL(l.g->inferred_holds, 0);
    /* Every step, not only the median. */
    for (size_t i = 1; i < l.g->niters; i++) {
        const rv_iter *it = &l.g->iters[i];
        int64_t a = rv_sim_map_time(l.g, l.s, it->thread, it->start_ns);
        int64_t b = rv_sim_map_time(l.g, l.s, it->thread, it->end_ns);
        double m = (double)(it->end_ns - it->start_ns), sim = (double)(b - a);
        CU_ASSERT(fabs(sim - m) / m <= 0.02);
    }
    unload(&l);
}

/* A sync without a record naming its stream waits only for GPU work that
 * had ended when it returned (plus the driver's polling slack). */
static void test_sync_waits_are_bounded(void)
{
    loaded l = {0};
    CU_ASSERT_EQUAL_FATAL(load(FIVE_STREAMS, &l), 0);
    const rv_graph *g = l.g;
    size_t syncs = 0, late = 0;
    for (size_t e = 0; e < g->nedges; e++) {
        const rv_edge *ed = &g->edges[e];
        if (ed->kind != RV_EDGE_SYNC)
            continue;
        const rv_task *gpu = &g->tasks[ed->src], *cpu = &g->tasks[ed->dst];
        if (cpu->kind != RV_TASK_CPU || gpu->launch == ed->dst)
            continue;
        syncs++;
        int64_t gend = gpu->meas_start_ns + gpu->meas_dur_ns;
        int64_t cend = cpu->meas_start_ns + cpu->meas_dur_ns;
        if (gend > cend + 5000)
            late++;
    }
    printf("\n    %zu sync edges, %zu to GPU work still running after the call returned", syncs,
           late);
    CU_ASSERT(syncs >= 70);
    CU_ASSERT_EQUAL(late, 0);
    unload(&l);
}

/* The rules must not freeze what a what-if can move: on the data-loading
 * bound ResNet-50 trace the pageable input copy starts inside its own
 * (blocking) call, which is not an unexplained wait. */
static void test_no_idle_kept_for_blocking_copies(void)
{
    loaded l = {0};
    CU_ASSERT_EQUAL_FATAL(load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    size_t copies_kept = 0;
    for (size_t e = 0; e < l.g->nedges; e++) {
        const rv_edge *ed = &l.g->edges[e];
        if (ed->kind == RV_EDGE_OTHER && l.g->tasks[ed->dst].cat == RV_CAT_MEMCPY)
            copies_kept++;
    }
    CU_ASSERT_EQUAL(copies_kept, 0);
    unload(&l);
}

int main(void)
{
    traces = rv_test_require_shared_traces("kineto/resnet50-v100-workers0.pt.trace.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("graph_infer", NULL, NULL);
    if (rv_test_have_trace(traces, FIVE_STREAMS)) {
        CU_add_test(s, "five streams replay within 0.5%", test_five_streams_replay);
        CU_add_test(s, "sync waits are bounded by the return", test_sync_waits_are_bounded);
    }
    CU_add_test(s, "blocking copies keep no idle gap", test_no_idle_kept_for_blocking_copies);
    return rv_test_run() ? 1 : 0;
}
