/* Training jobs end to end: a real reveried with its embedded PostgreSQL,
 * the 8 DLRM rank traces from RV_SHARED_TRACES/param/dlrm-8rank uploaded
 * over HTTP. Seven ranks: the listing names the missing one; eight: 8/8,
 * none missing; the job's what-if answers with the contract's keys and one
 * entry per rank; upload metadata (job, rank, world_size) overrides the
 * trace's; errors. Skips (77) when reveried, the traces or PostgreSQL are
 * not available. */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/http_client.h"
#include "common/rv_test_server.h"
#include "common/rv_test_util.h"

static rv_testsrv g_srv;
static pid_t g_pid = -1;
static int g_port;
static char g_root[1024];
static int64_t g_job_id;

static long req(const char *method, const char *path, const char *ctype, const char *body,
                const char *file, json_t **out)
{
    char u[512];
    tc_req q = {0};
    tc_resp r;

    snprintf(u, sizeof(u), "http://127.0.0.1:%d%s", g_port, path);
    q.url = u;
    q.method = method;
    q.ctype = ctype;
    q.body = body;
    q.len = body ? strlen(body) : 0;
    q.file = file;
    if (tc_do(&q, &r) != 0)
        return -1;
    if (out)
        *out = json_loads(r.body ? r.body : "", 0, NULL);
    if (r.status >= 500 || (r.status >= 400 && !out))
        fprintf(stderr, "\n    %s %s -> %ld %s", method ? method : "GET", path, r.status, r.body);
    long st = r.status;
    tc_resp_free(&r);
    return st;
}

static int64_t upload_file(const char *file, const char *query)
{
    char path[256];
    json_t *j = NULL;

    snprintf(path, sizeof(path), "/v1/traces%s", query);
    long st = req("POST", path, "application/gzip", NULL, file, &j);
    CU_ASSERT_EQUAL(st, 201);
    int64_t id = (int64_t)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    return id;
}

static int64_t upload_rank(int rank, const char *query)
{
    char file[1200];
    snprintf(file, sizeof(file), "%s/param/dlrm-8rank/worker%d.kineto.json.gz", g_root, rank);
    return upload_file(file, query);
}

/* The listing's entry for job name (new reference), or NULL. */
static json_t *listed(const char *name)
{
    json_t *body = NULL, *found = NULL;
    CU_ASSERT_EQUAL(req(NULL, "/v1/training-jobs", NULL, NULL, NULL, &body), 200);
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(body, "training_jobs"), i, j)
    {
        const char *n = json_string_value(json_object_get(j, "name"));
        if (n && strcmp(n, name) == 0)
            found = json_incref(j);
    }
    json_decref(body);
    return found;
}

static json_int_t int_of(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* One upload of a .tar.gz of the whole DLRM folder (8 Kineto ranks, their 8
 * execution traces, a directory entry): the ranks form the job, the
 * execution traces are refused with the reader's reason. The traces are
 * deleted again so that the next test uploads the same bytes anew. */
static void test_archive_upload(void)
{
    char tgz[1400], cmd[4096];
    json_t *j = NULL;

    snprintf(tgz, sizeof(tgz), "%s/dlrm.tar.gz", g_srv.home);
    snprintf(cmd, sizeof(cmd), "tar -C '%s/param' -czf '%s' dlrm-8rank", g_root, tgz);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    CU_ASSERT_EQUAL_FATAL(
        req("POST", "/v1/training-jobs?job=dlrm-archive", "application/gzip", NULL, tgz, &j), 201);
    CU_ASSERT_EQUAL(int_of(j, "stored"), 8);
    CU_ASSERT_EQUAL(int_of(j, "refused"), 8);
    const json_t *tj = json_object_get(j, "training_job");
    CU_ASSERT_EQUAL(int_of(tj, "ranks_present"), 8);
    CU_ASSERT_TRUE(json_is_true(json_object_get(tj, "complete")));
    size_t i, ranked = 0;
    json_t *m;
    json_array_foreach(json_object_get(j, "members"), i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        CU_ASSERT_PTR_NOT_NULL_FATAL(name);
        if (strstr(name, ".et.json")) {
            /* An execution trace is not a Kineto trace: refused, with why. */
            CU_ASSERT_PTR_NOT_NULL(json_object_get(m, "error"));
            continue;
        }
        CU_ASSERT_TRUE(json_is_integer(json_object_get(m, "rank")));
        ranked++;
        char del[128];
        snprintf(del, sizeof(del), "/v1/traces/%lld", (long long)int_of(m, "trace_id"));
        CU_ASSERT_EQUAL(req("DELETE", del, NULL, NULL, NULL, NULL), 200);
    }
    CU_ASSERT_EQUAL(ranked, 8);
    json_decref(j);
    /* Its ranks deleted, the job lists all eight missing. */
    j = listed("dlrm-archive");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(int_of(j, "ranks_present"), 0);
    CU_ASSERT_EQUAL(int_of(j, "missing_count"), 8);
    json_decref(j);

    /* Not an archive, and no job name. */
    char file[1200];
    snprintf(file, sizeof(file), "%s/kineto/h100-sync-after-fix.json", g_root);
    CU_ASSERT_EQUAL(req("POST", "/v1/training-jobs?job=x", "application/json", NULL, file, &j),
                    400);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                           "parse_error");
    json_decref(j);
    CU_ASSERT_EQUAL(req("POST", "/v1/training-jobs", "application/gzip", NULL, tgz, &j), 400);
    json_decref(j);
}

static void test_list_missing_then_complete(void)
{
    /* Ranks 0..6: rank and world size from each trace's distributedInfo. */
    for (int r = 0; r < 7; r++)
        CU_ASSERT(upload_rank(r, "?job=dlrm-8rank") > 0);
    json_t *j = listed("dlrm-8rank");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(int_of(j, "world_size"), 8);
    CU_ASSERT_EQUAL(int_of(j, "ranks_present"), 7);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "missing")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(j, "missing"), 0)), 7);
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "complete")));
    g_job_id = int_of(j, "id");
    json_decref(j);

    CU_ASSERT(upload_rank(7, "?job=dlrm-8rank") > 0);
    j = listed("dlrm-8rank");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(int_of(j, "ranks_present"), 8);
    CU_ASSERT_EQUAL(int_of(j, "missing_count"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "missing")), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "ranks")), 8);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "complete")));
    json_decref(j);

    char path[128];
    snprintf(path, sizeof(path), "/v1/training-jobs/%lld", (long long)g_job_id);
    CU_ASSERT_EQUAL(req(NULL, path, NULL, NULL, NULL, &j), 200);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "name")), "dlrm-8rank");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "rank_traces")), 8);
    json_decref(j);
    CU_ASSERT_EQUAL(req(NULL, "/v1/training-jobs/987654", NULL, NULL, NULL, &j), 404);
    json_decref(j);
    CU_ASSERT_EQUAL(req(NULL, "/v1/training-jobs?cursor=x", NULL, NULL, NULL, &j), 400);
    json_decref(j);
}

static void check_contract(const json_t *ans, size_t nranks)
{
    static const char *const keys[] = {"measured_us",      "baseline_us", "predicted_us",
                                       "speedup",          "warnings",    "ranks",
                                       "clock_offsets_us", "stragglers"};
    static const char *const rank_keys[] = {"rank",         "measured_us",  "baseline_us",
                                            "predicted_us", "replay_error", "wait_us",
                                            "transfer_us"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        if (!json_object_get(ans, keys[k]))
            fprintf(stderr, "\n    answer lacks %s", keys[k]);
        CU_ASSERT_PTR_NOT_NULL(json_object_get(ans, keys[k]));
    }
    const json_t *ranks = json_object_get(ans, "ranks");
    CU_ASSERT_EQUAL(json_array_size(ranks), nranks);
    for (size_t i = 0; i < json_array_size(ranks); i++)
        for (size_t k = 0; k < sizeof(rank_keys) / sizeof(rank_keys[0]); k++)
            CU_ASSERT_PTR_NOT_NULL(json_object_get(json_array_get(ranks, i), rank_keys[k]));
    CU_ASSERT_TRUE(json_is_object(json_object_get(ans, "clock_offsets_us")));
    CU_ASSERT_EQUAL(json_object_size(json_object_get(ans, "clock_offsets_us")), nranks);
    CU_ASSERT_TRUE(json_is_array(json_object_get(ans, "stragglers")));
    CU_ASSERT_TRUE(json_number_value(json_object_get(ans, "measured_us")) > 0);
    CU_ASSERT_TRUE(json_number_value(json_object_get(ans, "predicted_us")) > 0);
}

static void test_whatif(void)
{
    char path[128];
    json_t *j = NULL;

    snprintf(path, sizeof(path), "/v1/training-jobs/%lld/whatif", (long long)g_job_id);
    /* Errors first: they cost no load. */
    CU_ASSERT_EQUAL(req("POST", path, "application/json", "[]", NULL, &j), 400);
    json_decref(j);
    CU_ASSERT_EQUAL(req("POST", path, "application/json", "{\"ranks\":[9]}", NULL, &j), 400);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(j, "error"), "field")),
                           "ranks");
    json_decref(j);
    CU_ASSERT_EQUAL(
        req("POST", "/v1/training-jobs/987654/whatif", "application/json", "{}", NULL, &j), 404);
    json_decref(j);

    long st = req("POST", path, "application/json", "{}", NULL, &j);
    CU_ASSERT_EQUAL_FATAL(st, 200);
    check_contract(j, 8);
    const json_t *tj = json_object_get(j, "training_job");
    CU_ASSERT_EQUAL(int_of(tj, "ranks_simulated"), 8);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(tj, "missing")), 0);
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "cached")));
    double pred = json_number_value(json_object_get(j, "predicted_us"));
    char hash[80];
    snprintf(hash, sizeof(hash), "%s", json_string_value(json_object_get(j, "request_hash")));
    json_decref(j);

    /* The same question again is answered from the cache, the same answer. */
    CU_ASSERT_EQUAL(req("POST", path, "application/json", "{}", NULL, &j), 200);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "cached")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "request_hash")), hash);
    CU_ASSERT_EQUAL(json_number_value(json_object_get(j, "predicted_us")), pred);
    check_contract(j, 8);
    json_decref(j);

    /* A what-if on some ranks only. */
    st = req("POST", path, "application/json", "{\"ranks\":[0,1,2,3,4,5,6],\"optimizations\":[]}",
             NULL, &j);
    CU_ASSERT_EQUAL(st, 200);
    if (st == 200)
        check_contract(j, 7);
    /* Other ranks, another key. */
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "cached")));
    CU_ASSERT_STRING_NOT_EQUAL(json_string_value(json_object_get(j, "request_hash")), hash);
    json_decref(j);
}

/* A fleet what-if over the job's ranks groups them: one training_jobs
 * entry whose step is the slowest rank's and whose energy is every
 * rank's, beside the per-trace rows (each rank simulated alone). */
static void test_fleet_groups_ranks(void)
{
    json_t *j = NULL;
    const char *body = "{\"select\":{\"job\":\"dlrm-8rank\"},\"scenarios\":["
                       "{\"power_limit_frac\":0.8}]}";
    CU_ASSERT_EQUAL_FATAL(req("POST", "/v1/fleet/whatif", "application/json", body, NULL, &j), 200);
    const json_t *sc = json_array_get(json_object_get(j, "scenarios"), 0);
    const json_t *rows = json_object_get(sc, "rows");
    const json_t *tjs = json_object_get(json_object_get(sc, "aggregate"), "training_jobs");
    CU_ASSERT_EQUAL(json_array_size(rows), 8);
    CU_ASSERT_EQUAL_FATAL(json_array_size(tjs), 1);
    const json_t *tj = json_array_get(tjs, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(tj, "job")), "dlrm-8rank");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(tj, "ranks")), 8);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(tj, "trace_ids")), 8);
    double slowest = 0, e_after = 0;
    int seen = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *r = json_array_get(rows, i);
        CU_ASSERT_PTR_NOT_NULL(json_object_get(r, "rank"));
        double p = json_number_value(json_object_get(r, "predicted_us"));
        slowest = p > slowest ? p : slowest;
        e_after += json_number_value(json_object_get(json_object_get(r, "energy_j"), "predicted"));
        seen |= 1 << (int)json_integer_value(json_object_get(r, "rank"));
    }
    CU_ASSERT_EQUAL(seen, 0xff);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(tj, "predicted_us")), slowest,
                           1e-6 * slowest + 0.1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(tj, "energy_after_j")), e_after,
                           1e-6 * e_after + 1e-3);
    CU_ASSERT(e_after > 0);
    json_decref(j);
}

/* Rank and world size from the upload win over the trace's; a partial job
 * (one rank of two) still simulates, with its missing rank named. */
static void test_upload_metadata_and_partial(void)
{
    char file[1200];
    snprintf(file, sizeof(file), "%s/hta/critical-path-alexnet.json.gz", g_root);
    int64_t id = upload_file(file, "?job=meta-job&rank=1&world_size=2");
    CU_ASSERT_FATAL(id > 0);
    json_t *j = listed("meta-job");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(int_of(j, "world_size"), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(j, "ranks"), 0)), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(j, "missing"), 0)), 0);
    int64_t jid = int_of(j, "id");
    json_decref(j);

    char path[128];
    snprintf(path, sizeof(path), "/v1/training-jobs/%lld/whatif", (long long)jid);
    CU_ASSERT_EQUAL(req("POST", path, "application/json", "{}", NULL, &j), 200);
    const json_t *tj = json_object_get(j, "training_job");
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(tj, "missing"), 0)), 0);
    /* The engine's warning names the missing rank. */
    int named = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(j, "warnings"), i, w)
    {
        const char *c = json_string_value(json_object_get(w, "code"));
        const char *m = json_string_value(json_object_get(w, "message"));
        if (c && strcmp(c, "partial_job") == 0 && m && strstr(m, "0"))
            named = 1;
    }
    CU_ASSERT_TRUE(named);
    json_decref(j);
}

/* reverie upload --job --rank --world-size: the CLI's metadata reaches the
 * training job. */
static void test_cli_upload(void)
{
    char cmd[4096];
    const char *bin = getenv("RV_BIN_DIR");
    snprintf(cmd, sizeof(cmd),
             "%s/reverie upload --server http://127.0.0.1:%d --job cli-job --rank 2 "
             "--world-size 4 %s/kineto/h100-sync-after-fix.json >/dev/null",
             bin ? bin : "build/bin", g_port, g_root);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    json_t *j = listed("cli-job");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(int_of(j, "world_size"), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(j, "ranks"), 0)), 2);
    json_t *miss = json_object_get(j, "missing");
    CU_ASSERT_EQUAL(json_array_size(miss), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(miss, 2)), 3);
    json_decref(j);
}

int main(void)
{
    const char *t = rv_test_shared_traces("param/dlrm-8rank/worker7.kineto.json.gz");
    if (!t) {
        printf("skip: the DLRM rank traces (RV_SHARED_TRACES) are not available\n");
        return 77;
    }
    snprintf(g_root, sizeof(g_root), "%s", t);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    int rc = rv_testsrv_setup(&g_srv, "rv_training_test");
    if (rc != 0) {
        rv_testsrv_teardown(&g_srv);
        return rc;
    }
    g_port = rv_testsrv_free_port();
    const char *args[] = {"--workers", "2", "--http-threads", "2", NULL};
    g_pid = rv_testsrv_spawn(&g_srv, g_port, args);
    if (rv_testsrv_wait(g_port, "/readyz", NULL, 200, 120, &g_pid) != 0) {
        fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?); log in %s\n",
                g_srv.home);
        rv_testsrv_stop(&g_pid, SIGTERM);
        rv_testsrv_teardown(&g_srv);
        return 77;
    }
    CU_pSuite s = CU_add_suite("training_jobs", NULL, NULL);
    CU_add_test(s, "one .tar.gz upload of every rank", test_archive_upload);
    CU_add_test(s, "7 ranks: the missing one named; 8: complete", test_list_missing_then_complete);
    CU_add_test(s, "job what-if: the answer contract", test_whatif);
    CU_add_test(s, "a fleet what-if groups the job's ranks", test_fleet_groups_ranks);
    CU_add_test(s, "upload metadata, partial job", test_upload_metadata_and_partial);
    CU_add_test(s, "reverie upload --job --rank --world-size", test_cli_upload);
    unsigned failures = rv_test_run();
    rv_testsrv_stop(&g_pid, SIGTERM);
    rv_testsrv_teardown(&g_srv);
    return failures ? 1 : 0;
}
