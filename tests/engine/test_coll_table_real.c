/* Measured all-reduce tables on the real public traces in
 * $RV_SHARED_TRACES (exits 77, skipped, when they are absent): message
 * sizes read from NCCL kernels, and the data-parallel model timed by the
 * table. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"
#include "models/rv_apply.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

static const char *g_shared;

/* Newer Kineto traces name each collective's message on its NCCL kernel
 * ("In msg nelems", "dtype"); the reader turns that into bytes. */
static void test_sizes_from_trace(void)
{
    char path[4096];
    rv_trace *t = NULL;
    rv_error err;
    snprintf(path, sizeof(path), "%s/hta/a100-2rank-nccl.json.gz", g_shared);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(path, NULL, &t, &err), 0);
    size_t nccl = 0, sized = 0, seen = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat != RV_CAT_KERNEL || !strstr(rv_trace_str(t, e->name), "ncclKernel"))
            continue;
        nccl++;
        if (e->bytes > 0)
            sized++;
        /* One all-reduce of 6,637,568 floats in that trace. */
        if (e->bytes == INT64_C(6637568) * 4)
            seen = 1;
    }
    printf("\n  a100-2rank: %zu NCCL kernels, %zu with a message size", nccl, sized);
    CU_ASSERT(nccl > 0);
    CU_ASSERT_EQUAL(sized, nccl);
    CU_ASSERT(seen);
    rv_trace_free(t);
}

/* With a table proportional to size, the inserted collectives of one step
 * must add up to (seconds per byte) x (gradient bytes): the table, not the
 * alpha-beta model, times them. A slower table makes the step slower. */
static void test_model_uses_table(void)
{
    char path[4096];
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_error err;
    snprintf(path, sizeof(path), "%s/kineto/resnet50-v100-workers0.pt.trace.json.gz", g_shared);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(path, NULL, &t, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(t, NULL, &g, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &err), 0);
    double us_per_mib[2] = {100, 2000}, step[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char doc[256];
        snprintf(doc, sizeof(doc),
                 "{\"distributed\":{\"workers\":8,\"allreduce_table\":[[1048576,%g]]}}",
                 us_per_mib[k]);
        rv_whatif *w = NULL;
        CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text(doc, &w, &err), 0);
        rv_graph *c = rv_graph_clone(g);
        json_t *applied = NULL;
        CU_ASSERT_EQUAL_FATAL(rv_apply(w, c, &applied, &err), 0);
        json_t *a = json_array_get(applied, 0);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a, "allreduce_model")),
                               "measured_table");
        double mib = json_real_value(json_object_get(a, "gradient_mb"));
        double comm = json_real_value(json_object_get(a, "comm_us_per_iteration"));
        printf("\n  table %g us/MiB: %.1f MiB of gradients, %.0f us of all-reduce per step",
               us_per_mib[k], mib, comm);
        CU_ASSERT(mib > 80 && mib < 120);
        CU_ASSERT(fabs(comm / (mib * us_per_mib[k]) - 1) < 0.01);
        rv_sim *ps = NULL;
        rv_iter_figures b, p;
        CU_ASSERT_EQUAL_FATAL(rv_sim_run(c, rv_whatif_schedule(w), &ps, &err), 0);
        CU_ASSERT_EQUAL(rv_report_compare(g, s, c, ps, RV_ITER_MEDIAN, &b, &p, &err), 0);
        step[k] = p.simulated_us;
        json_decref(applied);
        rv_sim_free(ps);
        rv_graph_free(c);
        rv_whatif_free(w);
    }
    printf("\n  step: %.1f ms at 100 us/MiB, %.1f ms at 2000 us/MiB", step[0] / 1e3, step[1] / 1e3);
    CU_ASSERT(step[1] > step[0]);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
}

int main(void)
{
    g_shared = rv_test_require_shared_traces("README.md");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("coll_table_real", NULL, NULL);
    CU_add_test(s, "the model uses the table", test_model_uses_table);
    CU_add_test(s, "message sizes from the trace", test_sizes_from_trace);
    return rv_test_run() ? 1 : 0;
}
