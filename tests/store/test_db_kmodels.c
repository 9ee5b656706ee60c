/* Per-platform kernel models (migrations/0008, store/rv_db_kmodels.c): an
 * upload stores its own kernel-efficiency sums and adds them to its
 * platform's, so after two uploads the platform's sums are exactly the sum
 * of each trace's own (engine/rv_kmodel_acc); a delete leaves the remaining
 * trace's; a trace without op shapes adds nothing; the version read with
 * the sums changes with them. Needs PostgreSQL and the public traces (skips
 * with 77 without). */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rv_test_util.h"
#include "pg_helper.h"
#include "rv_db.h"
#include "rv_db_ingest.h"
#include "rv_db_kmodels.h"
#include "rv_db_migrate.h"
#include "rv_db_traces.h"
#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "reader/rv_kineto.h"
#include "cost/rv_kmodel_acc.h"

static rv_testpg g_pg;
static rv_db *g_db;
static const char *g_shared;
static char g_migrations[1024];

static const char *const g_a = "param/dlrm-8rank/worker0.kineto.json.gz";
static const char *const g_b = "param/dlrm-8rank/worker1.kineto.json.gz";
static const char *const g_noshapes = "hta/critical-path-simple-add.json.gz";

typedef struct own {
    rv_trace *t;
    uint8_t *bytes;
    size_t len;
    rv_kmodel_acc acc;
} own;

/* The trace and the sums the engine computes for it on gpu. */
static int load_own(const char *rel, const char *gpu, own *o)
{
    char p[4096];
    rv_error e;
    rv_flops_trace f;
    memset(o, 0, sizeof(*o));
    snprintf(p, sizeof(p), "%s/%s", g_shared, rel);
    o->bytes = rv_test_read_file(p, &o->len);
    if (!o->bytes || rv_kineto_read_buffer(o->bytes, o->len, NULL, &o->t, &e) ||
        rv_flops_of_trace(o->t, &f))
        return -1;
    rv_kmodel_acc_add_trace(&o->acc, o->t, &f, rv_hw_lookup(gpu));
    rv_flops_trace_free(&f);
    return 0;
}

static void free_own(own *o)
{
    rv_trace_free(o->t);
    free(o->bytes);
}

static int64_t ingest(const own *o, const char *gpu, int64_t *platform_id)
{
    rv_db_ingest_meta m = {.rank = RV_NONE, .world_size = RV_NONE, .job = "kmodel-test"};
    m.platform.gpu_model = gpu;
    rv_db_ingest_result r;
    rv_error e;
    int rc = rv_db_ingest(g_db, o->t, o->bytes, o->len, &m, &r, &e);
    if (rc)
        fprintf(stderr, "ingest: %s\n", e.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    *platform_id = r.platform_id;
    return r.trace_id;
}

/* Buckets where got and want differ (relative 1e-9 on n and slog). */
static size_t differences(const rv_kmodel_acc *got, const rv_kmodel_acc *want)
{
    size_t d = 0;
    for (int c = 0; c < RV_FC_COUNT; c++)
        for (int k = 0; k < RV_KMODEL_BUCKETS; k++)
            if (fabs(got->n[c][k] - want->n[c][k]) > 1e-9 * (1 + want->n[c][k]) ||
                fabs(got->slog[c][k] - want->slog[c][k]) > 1e-9 * (1 + fabs(want->slog[c][k])))
                d++;
    return d;
}

static void test_merge_and_delete(void)
{
    /* Both ranks ran on V100s; the platform is named by the upload. */
    const char *gpu = "Tesla V100-SXM2-32GB";
    own a, b, z;
    rv_kmodel_acc *sum = calloc(1, sizeof(*sum)), *got = calloc(1, sizeof(*got));
    rv_error e;
    int64_t pa, pb, pz, ntr = -1;
    char v0[128] = "", v1[128] = "", gname[64] = "";
    CU_ASSERT_FATAL(sum && got);
    CU_ASSERT_EQUAL_FATAL(load_own(g_a, gpu, &a), 0);
    CU_ASSERT_EQUAL_FATAL(load_own(g_b, gpu, &b), 0);
    CU_ASSERT_TRUE_FATAL(rv_kmodel_acc_count(&a.acc) > 100);
    int64_t ta = ingest(&a, gpu, &pa);
    CU_ASSERT_EQUAL(rv_db_trace_kmodel(g_db, ta, NULL, NULL, 0, v0, sizeof(v0), got, &e), 0);
    CU_ASSERT_EQUAL(differences(got, &a.acc), 0);
    int64_t tb = ingest(&b, gpu, &pb);
    CU_ASSERT_EQUAL(pa, pb);
    rv_kmodel_acc_merge(sum, &a.acc, 1);
    rv_kmodel_acc_merge(sum, &b.acc, 1);
    CU_ASSERT_EQUAL(rv_db_platform_kmodel(g_db, pa, got, &ntr, &e), 0);
    CU_ASSERT_EQUAL(ntr, 2);
    CU_ASSERT_EQUAL(differences(got, sum), 0);
    CU_ASSERT_EQUAL(rv_db_trace_kmodel(g_db, ta, NULL, NULL, 0, v1, sizeof(v1), got, &e), 0);
    CU_ASSERT_STRING_NOT_EQUAL(v0, v1);
    printf("\n    platform: %.0f kernels from 2 traces; versions '%s' -> '%s'\n",
           rv_kmodel_acc_count(sum), v0, v1);
    /* A delete leaves exactly the other trace's sums. */
    CU_ASSERT_EQUAL(rv_db_trace_delete(g_db, tb, &e), 0);
    CU_ASSERT_EQUAL(rv_db_platform_kmodel(g_db, pa, got, &ntr, &e), 0);
    CU_ASSERT_EQUAL(ntr, 1);
    CU_ASSERT_EQUAL(differences(got, &a.acc), 0);
    /* A trace without op shapes adds nothing to its platform. */
    CU_ASSERT_EQUAL_FATAL(load_own(g_noshapes, "A100-SXM4-80GB", &z), 0);
    CU_ASSERT_EQUAL(rv_kmodel_acc_count(&z.acc), 0);
    int64_t tz = ingest(&z, "A100-SXM4-80GB", &pz);
    CU_ASSERT_NOT_EQUAL(pz, pa);
    CU_ASSERT_EQUAL(rv_db_trace_kmodel(g_db, tz, NULL, gname, sizeof(gname), NULL, 0, got, &e), 0);
    CU_ASSERT_EQUAL(rv_kmodel_acc_count(got), 0);
    CU_ASSERT_STRING_EQUAL(gname, "A100-SXM4-80GB");
    /* The V100 platform's sums are the GPU's too; the A100 has none. */
    CU_ASSERT_EQUAL(rv_db_gpu_kmodel(g_db, "V100-SXM2", got, NULL, 0, &e), 0);
    CU_ASSERT_EQUAL(differences(got, &a.acc), 0);
    CU_ASSERT_EQUAL(rv_db_gpu_kmodel(g_db, "A100-SXM4-80GB", got, NULL, 0, &e), 0);
    CU_ASSERT_EQUAL(rv_kmodel_acc_count(got), 0);
    CU_ASSERT_EQUAL(rv_db_platform_kmodel(g_db, 987654321, got, NULL, &e), RV_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(rv_db_trace_kmodel(g_db, 987654321, NULL, NULL, 0, NULL, 0, got, &e),
                    RV_ERR_NOTFOUND);
    free_own(&a);
    free_own(&b);
    free_own(&z);
    free(sum);
    free(got);
}

int main(void)
{
    g_shared = rv_test_shared_traces(g_b);
    if (!g_shared) {
        printf("skipped: the DLRM traces (RV_SHARED_TRACES) are not available\n");
        return 77;
    }
    const char *src = getenv("RV_SOURCE_DIR");
    snprintf(g_migrations, sizeof(g_migrations), "%s/migrations", src ? src : ".");
    int rc = rv_testpg_start(&g_pg);
    if (rc)
        return rc;
    rv_error e;
    if (rv_db_open(g_pg.conninfo, 2, &g_db, &e) != 0 ||
        rv_db_migrate(g_db, g_migrations, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        rv_testpg_stop(&g_pg);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("db kernel models", NULL, NULL);
    CU_add_test(s, "two uploads = sum of their own; delete", test_merge_and_delete);
    unsigned fails = rv_test_run();
    rv_db_close(g_db);
    rv_testpg_stop(&g_pg);
    return fails ? 1 : 0;
}
