/* Measured all-reduce tables (distributed.allreduce_table): interpolation,
 * validation, and their use by the data-parallel model on a real trace. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_coll.h"
#include "rv_graph.h"
#include "rv_kineto.h"
#include "rv_report.h"
#include "rv_sim.h"
#include "rv_whatif.h"
#include "common/rv_test_util.h"

static const char *g_shared;

static void test_interpolation(void)
{
    rv_coll_table t = {.n = 2, .bytes = {1e6, 1e8}, .seconds = {100e-6, 1000e-6}};
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e6), 100e-6, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e8), 1000e-6, 1e-12);
    /* Halfway in log size is the geometric mean in time. */
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e7), 100e-6 * sqrt(10.0), 1e-10);
    /* Past the ends the end segments' slope (0.5 here) continues. */
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e10), 10000e-6, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e4), 10e-6, 1e-11);
    rv_coll_table one = {.n = 1, .bytes = {1e6}, .seconds = {50e-6}};
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&one, 4e6), 200e-6, 1e-12);
}

static void test_validation(void)
{
    static const struct {
        const char *doc;
        const char *field;
    } bad[] = {
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[]}}", "distributed.allreduce_table"},
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[[1e6,10],[1e6,20]]}}",
         "distributed.allreduce_table[1]"},
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[[1e6,-1]]}}",
         "distributed.allreduce_table[0]"},
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[[1e6]]}}",
         "distributed.allreduce_table[0]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rv_whatif *w = NULL;
        rv_error err;
        rv_error_clear(&err);
        CU_ASSERT_EQUAL(rv_whatif_parse_text(bad[i].doc, &w, &err), RV_ERR_INVALID);
        CU_ASSERT_STRING_EQUAL(err.field, bad[i].field);
        rv_whatif_free(w);
    }
}

/* Newer Kineto traces name each collective's message on its NCCL kernel
 * ("In msg nelems", "dtype"); the reader turns that into bytes. */
static void test_sizes_from_trace(void)
{
    if (!g_shared)
        return;
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
    if (!g_shared)
        return;
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
        CU_ASSERT_EQUAL_FATAL(rv_whatif_apply(w, c, &applied, &err), 0);
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
    g_shared = rv_test_shared_traces("README.md");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("coll_table", NULL, NULL);
    CU_add_test(s, "log-log interpolation", test_interpolation);
    CU_add_test(s, "validation names the field", test_validation);
    CU_add_test(s, "the model uses the table", test_model_uses_table);
    CU_add_test(s, "message sizes from the trace", test_sizes_from_trace);
    return rv_test_run() ? 1 : 0;
}
