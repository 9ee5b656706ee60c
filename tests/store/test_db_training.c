/* Training jobs in the store (store/rv_db_training.c) against a real
 * PostgreSQL: the ranks of the 8-rank DLRM job are recorded as they are
 * ingested, the listing names the missing ones, a deleted rank is missing
 * again, the newest upload of a rank is the one used, and a trace without a
 * rank or a job name forms no job. Skips (77) without the public traces or
 * PostgreSQL binaries. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_helper.h"
#include "rv_db.h"
#include "common/rv_test_util.h"

static rv_testpg g_pg;
static rv_db *g_db;
static const char *g_shared;
static int64_t g_ids[8];

static int64_t ingest(const char *rel, const char *job, int32_t rank, int32_t world_size)
{
    char p[4096];
    rv_db_ingest_meta m = {.job = job, .rank = rank, .world_size = world_size};
    rv_db_ingest_result res;
    rv_error e;

    rv_error_clear(&e);
    snprintf(p, sizeof(p), "%s/%s", g_shared, rel);
    if (rv_db_ingest_file(g_db, p, &m, &res, &e) != 0) {
        fprintf(stderr, "ingest %s: %s\n", rel, e.message);
        return -1;
    }
    return res.trace_id;
}

/* The job named name in the listing (borrowed from list), or NULL. */
static json_t *find_job(json_t *list, const char *name)
{
    size_t i;
    json_t *j;
    json_array_foreach(list, i, j)
    {
        const char *n = json_string_value(json_object_get(j, "name"));
        if (n && strcmp(n, name) == 0)
            return j;
    }
    return NULL;
}

static json_t *list_job(const char *name)
{
    json_t *list = NULL, *j = NULL;
    rv_error e;
    CU_ASSERT_EQUAL_FATAL(rv_db_training_list(g_db, 0, 0, &list, &e), 0);
    j = find_job(list, name);
    json_incref(j);
    json_decref(list);
    return j;
}

static int64_t int_of(json_t *o, const char *k)
{
    return (int64_t)json_integer_value(json_object_get(o, k));
}

static void test_ranks_and_missing(void)
{
    char rel[128];
    rv_error e;

    /* Seven ranks with their identity from distributedInfo, a job name from
     * the uploader. */
    for (int r = 0; r < 7; r++) {
        snprintf(rel, sizeof(rel), "param/dlrm-8rank/worker%d.kineto.json.gz", r);
        g_ids[r] = ingest(rel, "dlrm", RV_NONE, RV_NONE);
        CU_ASSERT_FATAL(g_ids[r] > 0);
    }
    json_t *j = list_job("dlrm");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(int_of(j, "world_size"), 8);
    CU_ASSERT_EQUAL(int_of(j, "ranks_present"), 7);
    CU_ASSERT_EQUAL(int_of(j, "missing_count"), 1);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "missing")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(j, "missing"), 0)), 7);
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "complete")));
    int64_t job_id = int_of(j, "id");
    json_decref(j);

    /* The eighth completes it. */
    g_ids[7] = ingest("param/dlrm-8rank/worker7.kineto.json.gz", "dlrm", RV_NONE, RV_NONE);
    CU_ASSERT_FATAL(g_ids[7] > 0);
    j = list_job("dlrm");
    CU_ASSERT_EQUAL(int_of(j, "ranks_present"), 8);
    CU_ASSERT_EQUAL(int_of(j, "missing_count"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "missing")), 0);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "complete")));
    CU_ASSERT_EQUAL(int_of(j, "id"), job_id);
    json_decref(j);

    /* The ranks a what-if loads: one trace per rank, in rank order. */
    rv_db_training_job *tj = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_db_training_ranks(g_db, job_id, &tj, &e), 0);
    CU_ASSERT_STRING_EQUAL(tj->name, "dlrm");
    CU_ASSERT_EQUAL(tj->world_size, 8);
    CU_ASSERT_EQUAL_FATAL(tj->nranks, 8);
    for (int r = 0; r < 8; r++) {
        CU_ASSERT_EQUAL(tj->ranks[r].rank, r);
        CU_ASSERT_EQUAL(tj->ranks[r].trace_id, g_ids[r]);
    }
    rv_db_training_job_free(tj);

    /* Deleting a rank's trace makes it missing again. */
    CU_ASSERT_EQUAL(rv_db_trace_delete(g_db, g_ids[3], &e), 0);
    j = list_job("dlrm");
    CU_ASSERT_EQUAL(int_of(j, "ranks_present"), 7);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(j, "missing"), 0)), 3);
    json_decref(j);
    json_t *one = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_db_training_get(g_db, job_id, &one, &e), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(one, "rank_traces")), 7);
    CU_ASSERT_EQUAL(int_of(one, "missing_count"), 1);
    json_decref(one);
    CU_ASSERT_EQUAL(rv_db_training_get(g_db, 999999, &one, &e), RV_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(rv_db_training_ranks(g_db, 999999, &tj, &e), RV_ERR_NOTFOUND);
}

static void test_newest_rank_and_no_job(void)
{
    rv_error e;

    /* Two uploads claim rank 0 of job "twice": the newer one is used, both
     * are listed. */
    int64_t a = ingest("hta/cuda-event-sync.json.gz", "twice", 0, 2);
    int64_t b = ingest("hta/cuda-event-sync-multi-stream.json.gz", "twice", 0, 2);
    CU_ASSERT_FATAL(a > 0 && b > a);
    json_t *j = list_job("twice");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(int_of(j, "ranks_present"), 1);
    CU_ASSERT_EQUAL(int_of(j, "traces"), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(j, "missing"), 0)), 1);
    rv_db_training_job *tj = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_db_training_ranks(g_db, int_of(j, "id"), &tj, &e), 0);
    CU_ASSERT_EQUAL(tj->nranks, 1);
    CU_ASSERT_EQUAL(tj->ranks[0].trace_id, b);
    rv_db_training_job_free(tj);
    json_t *one = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_db_training_get(g_db, int_of(j, "id"), &one, &e), 0);
    json_t *rt = json_object_get(one, "rank_traces");
    CU_ASSERT_EQUAL(json_array_size(rt), 2);
    CU_ASSERT_EQUAL(int_of(json_array_get(rt, 0), "trace_id"), b);
    CU_ASSERT_TRUE(json_is_true(json_object_get(json_array_get(rt, 0), "used")));
    CU_ASSERT_TRUE(json_is_false(json_object_get(json_array_get(rt, 1), "used")));
    json_decref(one);
    json_decref(j);

    /* A job name without a rank is a label, not a training job. */
    CU_ASSERT(ingest("kineto/h100-sync-after-fix.json", "label-only", RV_NONE, RV_NONE) > 0);
    j = list_job("label-only");
    CU_ASSERT_PTR_NULL(j);
    json_decref(j);
}

int main(void)
{
    g_shared = rv_test_shared_traces("param/dlrm-8rank/worker7.kineto.json.gz");
    if (!g_shared) {
        printf("skipped: the DLRM rank traces (RV_SHARED_TRACES) are not available\n");
        return 77;
    }
    const char *src = getenv("RV_SOURCE_DIR");
    char mig[4096];
    snprintf(mig, sizeof(mig), "%s/migrations", src ? src : ".");
    int rc = rv_testpg_start(&g_pg);
    if (rc)
        return rc;
    rv_error e;
    if (rv_db_open(g_pg.conninfo, 2, &g_db, &e) != 0 || rv_db_migrate(g_db, mig, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        rv_db_close(g_db);
        rv_testpg_stop(&g_pg);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("db_training", NULL, NULL);
    CU_add_test(s, "ranks recorded, missing ranks listed, delete", test_ranks_and_missing);
    CU_add_test(s, "newest upload of a rank, no rank no job", test_newest_rank_and_no_job);
    unsigned fails = rv_test_run();
    rv_db_close(g_db);
    rv_testpg_stop(&g_pg);
    return fails ? 1 : 0;
}
