/* Tests for re-timing host work from overhead statistics (rv_retime), the
 * DLRM paper's experiment: a trace predicted from its own statistics and
 * from its platform's pooled ones, against its measured step. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "graph/rv_retime.h"
#include "simulate/rv_sim.h"
#include "models/rv_apply.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

static const char *g_shared;

typedef struct loaded {
    rv_trace *t;
    rv_graph *g;
    rv_sim *s;
    double measured_us;
} loaded;

static void load(const char *rel, loaded *l)
{
    char path[4096];
    rv_error err;
    rv_iter_figures f;
    snprintf(path, sizeof(path), "%s/%s", g_shared, rel);
    memset(l, 0, sizeof(*l));
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(path, NULL, &l->t, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(l->t, NULL, &l->g, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(l->g, RV_SCHED_EARLIEST_START, &l->s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_report_iteration(l->g, l->s, RV_ITER_MEDIAN, &f, &err), 0);
    l->measured_us = f.measured_us;
}

static void unload(loaded *l)
{
    rv_sim_free(l->s);
    rv_graph_free(l->g);
    rv_trace_free(l->t);
}

static double predict(const loaded *l, const rv_oh_table *tab)
{
    rv_error err;
    rv_graph *c = rv_graph_clone(l->g);
    rv_sim *s = NULL;
    json_t *applied = NULL;
    rv_iter_figures b, p;
    CU_ASSERT_EQUAL_FATAL(rv_retime_overheads(c, tab, &applied, &err), 0);
    CU_ASSERT(json_integer_value(json_object_get(applied, "launches_retimed")) > 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(c, RV_SCHED_EARLIEST_START, &s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_report_compare(l->g, l->s, c, s, RV_ITER_MEDIAN, &b, &p, &err), 0);
    json_decref(applied);
    rv_sim_free(s);
    rv_graph_free(c);
    return p.simulated_us;
}

/* Eight ranks of one DLRM job on one platform (V100): own and shared
 * statistics both predict each rank's step within a few percent, and
 * sharing costs little (the paper: +2.19 points). */
static void test_dlrm_shared_overheads(void)
{
    loaded l[8];
    const rv_trace *ts[8];
    char rel[128];
    for (int i = 0; i < 8; i++) {
        snprintf(rel, sizeof(rel), "param/dlrm-8rank/worker%d.kineto.json.gz", i);
        load(rel, &l[i]);
        ts[i] = l[i].t;
    }
    rv_oh_table *shared = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_oh_table_from_traces(ts, 8, &shared, &err), 0);
    double sum_own = 0, sum_shared = 0;
    for (int i = 0; i < 8; i++) {
        rv_oh_table *own = NULL;
        CU_ASSERT_EQUAL_FATAL(rv_oh_table_from_traces(&ts[i], 1, &own, &err), 0);
        double e_own = fabs(predict(&l[i], own) / l[i].measured_us - 1);
        double e_sh = fabs(predict(&l[i], shared) / l[i].measured_us - 1);
        CU_ASSERT(e_own < 0.05);
        CU_ASSERT(e_sh < 0.10);
        sum_own += e_own;
        sum_shared += e_sh;
        rv_oh_table_free(own);
    }
    printf("\n  dlrm 8 ranks: mean error own %.2f%%, shared %.2f%%", 100 * sum_own / 8,
           100 * sum_shared / 8);
    CU_ASSERT(sum_own / 8 < 0.03);
    CU_ASSERT((sum_shared - sum_own) / 8 < 0.03);
    rv_oh_table_free(shared);
    for (int i = 0; i < 8; i++)
        unload(&l[i]);
}

/* Doubling every overhead must slow a CPU-bound trace, halving must speed
 * it up: the table drives the prediction. */
static void test_direction(void)
{
    loaded l;
    load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &l);
    const rv_trace *ts[1] = {l.t};
    rv_oh_table *tab = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_oh_table_from_traces(ts, 1, &tab, &err), 0);
    double base = predict(&l, tab);
    for (size_t i = 0; i < tab->n; i++)
        tab->entries[i].mean_us *= 2;
    double slow = predict(&l, tab);
    for (size_t i = 0; i < tab->n; i++)
        tab->entries[i].mean_us /= 4;
    double fast = predict(&l, tab);
    printf("\n  resnet50: own %.1f ms, x2 %.1f ms, x0.5 %.1f ms (measured %.1f)", base / 1e3,
           slow / 1e3, fast / 1e3, l.measured_us / 1e3);
    CU_ASSERT(fabs(base / l.measured_us - 1) < 0.10);
    CU_ASSERT(slow > base * 1.1);
    CU_ASSERT(fast < base * 0.95);
    rv_oh_table_free(tab);
    unload(&l);
}

/* The what-if document's "host_overheads": "platform" applies the table
 * the caller set, and says so when there is none. */
static void test_whatif_field(void)
{
    loaded l, other;
    load("param/dlrm-8rank/worker0.kineto.json.gz", &l);
    load("param/dlrm-8rank/worker1.kineto.json.gz", &other);
    rv_whatif *w = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text("{\"host_overheads\":\"platform\"}", &w, &err), 0);
    CU_ASSERT_FALSE(rv_whatif_is_empty(w));
    rv_graph *c = rv_graph_clone(l.g);
    json_t *applied = NULL;
    CU_ASSERT_EQUAL(rv_apply(w, c, &applied, &err), RV_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(err.field, "host_overheads");
    const rv_trace *ts[1] = {other.t};
    rv_oh_table *tab = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_oh_table_from_traces(ts, 1, &tab, &err), 0);
    rv_whatif_set_overheads(w, tab);
    CU_ASSERT_EQUAL(rv_apply(w, c, &applied, &err), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(applied, 0), "kind")),
                           "overheads");
    rv_sim *s = NULL;
    rv_iter_figures b, p;
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(c, RV_SCHED_EARLIEST_START, &s, &err), 0);
    CU_ASSERT_EQUAL(rv_report_compare(l.g, l.s, c, s, RV_ITER_MEDIAN, &b, &p, &err), 0);
    /* Another rank's host overheads predict this rank within 10%. */
    CU_ASSERT(fabs(p.simulated_us / l.measured_us - 1) < 0.10);
    CU_ASSERT(p.simulated_us != b.simulated_us);
    json_decref(applied);
    rv_sim_free(s);
    rv_graph_free(c);
    rv_oh_table_free(tab);
    rv_whatif_free(w);
    unload(&l);
    unload(&other);
}

int main(void)
{
    g_shared = rv_test_require_shared_traces("README.md");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("retime", NULL, NULL);
    CU_add_test(s, "DLRM ranks: own vs shared overheads", test_dlrm_shared_overheads);
    CU_add_test(s, "overheads drive the prediction", test_direction);
    CU_add_test(s, "host_overheads in the what-if document", test_whatif_field);
    return rv_test_run() ? 1 : 0;
}
