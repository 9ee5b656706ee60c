/* reveried's fleet jobs and its own database, end to end: a real server
 * with its embedded PostgreSQL under a temporary REVERIE_HOME, real traces
 * from RV_SHARED_TRACES, libcurl and libpq.
 *
 * Fleet jobs: a selection over the trace-id limit is refused (400 naming
 * the limit); a deduplicated selection at the limit, mostly ids of no
 * trace, expands once into the right shards; DELETE /v1/jobs/{id} cancels
 * a running job (creator or admin only) and its workers stop; SIGTERM
 * during a long job exits within seconds, and the restarted server finishes
 * the job without expanding it again (shard rows counted before and after).
 * since: SQL-looking and natural-language values are 400 naming the field;
 * valid times filter as times. The database: kill -9 of the embedded
 * postmaster gives 503 database_unavailable (never 500) until the server
 * has restarted its cluster (within 30 s); spool files of interrupted
 * uploads are removed at start; a cluster left running by a killed server
 * is adopted by the next one and stopped with it. Fleet cost: a job keeps
 * the selection resolved in its request, is cut into shards by the size of
 * the selection and finished by its shard counter; stable errors are
 * cached, so the same request again reads every row from the cache; the
 * graph cache's counters move in /metrics.
 *
 * `jobs_test NAME...` runs only the named tests (after the set-up).
 * Skips (77) when reveried, the traces or PostgreSQL are not available. */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/http_client.h"
#include "common/rv_test_server.h"
#include "common/rv_test_util.h"
#include "rv_auth.h"
#include "rv_db.h"
#include "rv_pgembed.h"

#define LIMIT       10000 /* the default REVERIE_FLEET_MAX_TRACES */
#define MAX_TRACES  16
#define N_SCENARIOS 64

static rv_testsrv g_srv;
static pid_t srv = -1;
static int port;
static char conninfo[1024];
static char tok_admin[RV_TOKEN_LEN + 1], tok_read[RV_TOKEN_LEN + 1], tok_read2[RV_TOKEN_LEN + 1];
static int64_t ids[MAX_TRACES];
static size_t nids;

/* Candidate traces (shared folder), the larger last so that jobs last. */
static const char *const trace_files[] = {
    "hta/critical-path-simple-add.json.gz",
    "hta/critical-path-alexnet.json.gz",
    "kineto/h100-sync-after-fix.json",
    "kineto/h100-sync-before-fix.json",
    "hta/simple-add.kineto.json.gz",
    "hta/cuda-event-sync.json.gz",
    "hta/cuda-event-sync-multi-stream.json.gz",
    "kineto/resnet50-v100-workers0.pt.trace.json.gz",
    "kineto/resnet50-v100-workers4.pt.trace.json.gz",
    "hta/v100-1rank-ns-resolution.json.gz",
    "hta/a100-2rank-nccl.json.gz",
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pid_t start_server(void)
{
    const char *args[] = {
        "--require-auth", "--workers", "4", "--http-threads", "2", "--fleet-workers", "2",
        "--fleet-inline", "2",         NULL};
    return rv_testsrv_spawn(&g_srv, port, args);
}

static long req(const char *method, const char *path, const char *token, const char *ctype,
                const char *body, const char *file, tc_resp *out)
{
    char u[512], auth[128];
    tc_req q = {0};

    snprintf(u, sizeof(u), "http://127.0.0.1:%d%s", port, path);
    q.url = u;
    q.method = method;
    q.ctype = ctype;
    q.body = body;
    q.len = body ? strlen(body) : 0;
    q.file = file;
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        q.headers[0] = auth;
    }
    memset(out, 0, sizeof(*out));
    if (tc_do(&q, out) != 0)
        return -1;
    return out->status;
}

static json_t *body_json(const tc_resp *r)
{
    return json_loads(r->body ? r->body : "", 0, NULL);
}

/* A string member of a JSON object, "" when absent (never NULL). */
static const char *jstr(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* The error's member (code, field, message) or "". */
static const char *err_member(const tc_resp *r, const char *name)
{
    static char v[512];
    json_t *j = body_json(r);
    const char *s = json_string_value(json_object_get(json_object_get(j, "error"), name));
    snprintf(v, sizeof(v), "%s", s ? s : "");
    json_decref(j);
    return v;
}

/* One integer from SQL (-1 on error). */
static long long scalar(const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    PQfinish(c);
    return v;
}

/* Shard rows of a parent; the parent is in each shard's request (before
 * and after migration 0003), so this counts on any version. */
static long long shard_rows(int64_t job, const char *state)
{
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM jobs WHERE kind = 'fleet_shard' AND request->>'parent' = "
             "'%lld'%s%s%s",
             (long long)job, state ? " AND state = '" : "", state ? state : "", state ? "'" : "");
    return scalar(q);
}

static long postmaster_pid(void)
{
    char p[512];
    long pid = -1;
    snprintf(p, sizeof(p), "%s/pg/data/postmaster.pid", g_srv.home);
    FILE *f = fopen(p, "r");
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = -1;
        fclose(f);
    }
    return pid;
}

/* A live process, not a zombie. */
static int alive(long pid)
{
    char p[64], st[512] = "";
    snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    if (!fgets(st, sizeof(st), f))
        st[0] = '\0';
    fclose(f);
    const char *e = strrchr(st, ')');
    return e && e[1] && e[2] != 'Z' && e[2] != 'X';
}

/* Sends sig and waits up to limit_s for the server to exit; the seconds it
 * took, or -1 (then it is killed with SIGKILL). *status gets its status. */
static double stop_within(int sig, double limit_s, int *status)
{
    double t0 = now_s();
    *status = -1;
    kill(srv, sig);
    while (now_s() - t0 < limit_s) {
        if (waitpid(srv, status, WNOHANG) == srv) {
            srv = -1;
            return now_s() - t0;
        }
        usleep(50 * 1000);
    }
    kill(srv, SIGKILL);
    waitpid(srv, status, 0);
    srv = -1;
    return -1;
}

/* Polls a job until done, failed or cancelled; NULL after seconds. */
static json_t *wait_job(int64_t job, int seconds)
{
    char p[64];
    snprintf(p, sizeof(p), "/v1/jobs/%lld", (long long)job);
    for (double t0 = now_s(); now_s() - t0 < seconds;) {
        tc_resp r;
        if (req(NULL, p, tok_read, NULL, NULL, NULL, &r) == 200) {
            json_t *j = body_json(&r);
            const char *st = json_string_value(json_object_get(j, "state"));
            if (st && (!strcmp(st, "done") || !strcmp(st, "failed") || !strcmp(st, "cancelled"))) {
                tc_resp_free(&r);
                return j;
            }
            json_decref(j);
        }
        tc_resp_free(&r);
        usleep(200 * 1000);
    }
    return NULL;
}

/* A fleet document: every uploaded trace and `missing` ids of no trace,
 * one per shard, under N_SCENARIOS distinct CPU-speed scenarios (salt
 * keeps them uncached); 202 + job id, or -1. */
static int64_t long_job(const char *token, int salt, int missing)
{
    size_t cap = 16384 + (size_t)missing * 12, k = 0;
    char *body = malloc(cap);
    k += (size_t)snprintf(body + k, cap - k,
                          "{\"async\":true,\"shard_size\":1,\"select\":{\"trace_ids\":[");
    for (size_t i = 0; i < nids; i++)
        k += (size_t)snprintf(body + k, cap - k, "%s%lld", i ? "," : "", (long long)ids[i]);
    for (int i = 0; i < missing; i++)
        k += (size_t)snprintf(body + k, cap - k, ",%d", 800000000 + i);
    k += (size_t)snprintf(body + k, cap - k, "]},\"scenarios\":[");
    for (int s = 0; s < N_SCENARIOS; s++)
        k += (size_t)snprintf(body + k, cap - k,
                              "%s{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":%.4f}]}",
                              s ? "," : "", 1.0 + 0.01 * s + 0.0001 * salt);
    snprintf(body + k, cap - k, "]}");
    tc_resp r;
    long st = req("POST", "/v1/fleet/whatif", token, "application/json", body, NULL, &r);
    free(body);
    json_t *j = body_json(&r);
    int64_t job = st == 202 ? (int64_t)json_integer_value(json_object_get(j, "job_id")) : -1;
    if (st != 202)
        fprintf(stderr, "\n    fleet job: %ld %s", st, r.body ? r.body : "");
    json_decref(j);
    tc_resp_free(&r);
    return job;
}

static int suite_init(void)
{
    const char *t = getenv("RV_SHARED_TRACES");
    char p[1200];

    if (!t) {
        fprintf(stderr, "skip: RV_SHARED_TRACES unset\n");
        return 77;
    }
    int rc = rv_testsrv_setup(&g_srv, "rv_jobs_test");
    if (rc != 0)
        return rc;
    /* Left by an upload that a killed server never finished, and a file
     * that is no upload's. */
    snprintf(p, sizeof(p), "%s/spool", g_srv.home);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/spool/upload-Ab12Cd", g_srv.home);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("{\"traceEvents\":[", f);
        fclose(f);
    }
    snprintf(p, sizeof(p), "%s/spool/notes.txt", g_srv.home);
    f = fopen(p, "w");
    if (f)
        fclose(f);

    port = rv_testsrv_free_port();
    srv = start_server();
    if (rv_testsrv_wait(port, "/readyz", NULL, 200, 120, &srv) != 0) {
        fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?); log in %s\n",
                g_srv.home);
        return 77;
    }
    const rv_testsrv_token toks[] = {{"jobs-admin", RV_SCOPE_ADMIN, tok_admin},
                                     {"jobs-read", RV_SCOPE_READ, tok_read},
                                     {"jobs-read2", RV_SCOPE_READ, tok_read2}};
    if (rv_testsrv_conninfo(&g_srv, conninfo, sizeof(conninfo)) != 0 ||
        rv_testsrv_tokens(&g_srv, toks, 3) != 0)
        return 1;
    if (rv_testsrv_wait(port, "/v1/traces", tok_admin, 200, 10, NULL) != 0)
        return 1;
    for (size_t i = 0; i < sizeof(trace_files) / sizeof(trace_files[0]) && nids < MAX_TRACES; i++) {
        snprintf(p, sizeof(p), "%s/%s", t, trace_files[i]);
        if (access(p, R_OK) != 0)
            continue;
        tc_resp r;
        int gz = strstr(p, ".gz") != NULL;
        long st = req("POST", "/v1/traces?job=jobs-test", tok_admin,
                      gz ? "application/gzip" : "application/json", NULL, p, &r);
        json_t *j = body_json(&r);
        if (st == 201)
            ids[nids++] = (int64_t)json_integer_value(json_object_get(j, "id"));
        json_decref(j);
        tc_resp_free(&r);
    }
    if (nids < 4) {
        fprintf(stderr, "skip: only %zu of the shared traces could be uploaded\n", nids);
        return 77;
    }
    return 0;
}

static void suite_clean(void)
{
    rv_testsrv_stop(&srv, SIGTERM);
    rv_testsrv_teardown(&g_srv);
}

/* ---- start-up ----------------------------------------------------------- */

static void test_spool_cleanup_at_start(void)
{
    char p[1200];
    snprintf(p, sizeof(p), "%s/spool/upload-Ab12Cd", g_srv.home);
    CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0); /* removed at start */
    snprintf(p, sizeof(p), "%s/spool/notes.txt", g_srv.home);
    CU_ASSERT_EQUAL(access(p, F_OK), 0); /* not an upload's: kept */
}

/* ---- fleet jobs ---------------------------------------------------------- */

static void test_selection_over_limit(void)
{
    size_t cap = 100000 * 8 + 256, k = 0;
    char *body = malloc(cap);
    tc_resp r;

    k += (size_t)snprintf(body + k, cap - k, "{\"select\":{\"trace_ids\":[");
    for (int i = 1; i <= 100000; i++)
        k += (size_t)snprintf(body + k, cap - k, "%s%d", i > 1 ? "," : "", i);
    snprintf(body + k, cap - k, "]},\"scenarios\":[{}]}");
    long st = req("POST", "/v1/fleet/whatif", tok_read, "application/json", body, NULL, &r);
    free(body);
    CU_ASSERT_EQUAL(st, 400);
    CU_ASSERT_STRING_EQUAL(err_member(&r, "field"), "select.trace_ids");
    CU_ASSERT_PTR_NOT_NULL(strstr(err_member(&r, "message"), "10000"));
    fprintf(stderr, "\n    100,000 ids: %ld %s", st, err_member(&r, "message"));
    tc_resp_free(&r);
}

static void test_dedup_at_limit_expands_once(void)
{
    size_t cap = LIMIT * 24 + 256, k = 0;
    char *body = malloc(cap);
    tc_resp r;

    /* LIMIT entries: every trace 50 times, the rest ids of no trace. */
    size_t dup = nids * 50, missing = LIMIT - dup;
    k += (size_t)snprintf(body + k, cap - k,
                          "{\"async\":true,\"shard_size\":2,\"select\":{\"trace_ids\":[");
    for (size_t i = 0; i < LIMIT; i++)
        k += (size_t)snprintf(body + k, cap - k, "%s%lld", i ? "," : "",
                              i < dup ? (long long)ids[i % nids] : 900000000LL + (long long)i);
    snprintf(body + k, cap - k, "]},\"scenarios\":[{}]}");
    long st = req("POST", "/v1/fleet/whatif", tok_read, "application/json", body, NULL, &r);
    free(body);
    CU_ASSERT_EQUAL_FATAL(st, 202);
    json_t *j = body_json(&r);
    int64_t job = (int64_t)json_integer_value(json_object_get(j, "job_id"));
    json_decref(j);
    tc_resp_free(&r);
    j = wait_job(job, 30);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(jstr(j, "state"), "done");
    json_t *res = json_object_get(j, "result");
    size_t want_shards = (nids + 1) / 2;
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "traces")), (json_int_t)nids);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "trace_ids_dropped")),
                    (json_int_t)missing);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "shards")), (json_int_t)want_shards);
    CU_ASSERT_EQUAL(shard_rows(job, NULL), (long long)want_shards);
    fprintf(stderr, "\n    %d entries -> %zu traces, %zu dropped, %lld shard rows", LIMIT, nids,
            missing, shard_rows(job, NULL));
    json_decref(j);
}

static void test_cancel(void)
{
    char p[64];
    tc_resp r;
    int64_t job = long_job(tok_read, 1, 0);
    CU_ASSERT_TRUE_FATAL(job > 0);
    snprintf(p, sizeof(p), "/v1/jobs/%lld", (long long)job);
    /* Running: expanded, a shard being worked, most still to go. */
    double t0 = now_s();
    while (now_s() - t0 < 30 && shard_rows(job, "running") < 1)
        usleep(50 * 1000);
    fprintf(stderr, "\n    a shard running after %.2f s", now_s() - t0);
    CU_ASSERT_TRUE(shard_rows(job, "running") >= 1);
    CU_ASSERT_TRUE(shard_rows(job, "done") < (long long)nids);

    /* Another reader's token may not; the creator's may. */
    CU_ASSERT_EQUAL(req("DELETE", p, tok_read2, NULL, NULL, NULL, &r), 403);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req("DELETE", p, tok_read, NULL, NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    CU_ASSERT_STRING_EQUAL(jstr(j, "state"), "cancelled");
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    j = body_json(&r);
    CU_ASSERT_STRING_EQUAL(jstr(j, "state"), "cancelled");
    json_decref(j);
    tc_resp_free(&r);
    /* Workers stop at their next trace: nothing runs, nothing more gets
     * done. */
    sleep(2);
    long long done = shard_rows(job, "done");
    CU_ASSERT_EQUAL(shard_rows(job, "running"), 0);
    CU_ASSERT_EQUAL(shard_rows(job, "queued"), 0);
    sleep(2);
    CU_ASSERT_EQUAL(shard_rows(job, "done"), done);
    fprintf(stderr, "\n    cancelled after %lld of %zu shards", done, nids);
    /* An admin may cancel anyone's; no such job is 404. */
    CU_ASSERT_EQUAL(req("DELETE", p, tok_admin, NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req("DELETE", "/v1/jobs/987654321", tok_admin, NULL, NULL, NULL, &r), 404);
    tc_resp_free(&r);
}

static void test_sigterm_and_restart(void)
{
    int st;
    /* With 5,000 ids of no trace: dropped now; the old code queued a
     * shard for each and its parent waited for them all, SIGTERM or not. */
    int64_t job = long_job(tok_read, 2, 5000);
    CU_ASSERT_TRUE_FATAL(job > 0);
    double t0 = now_s();
    while (now_s() - t0 < 30 && shard_rows(job, "running") < 1)
        usleep(50 * 1000);
    long long before = shard_rows(job, NULL);
    CU_ASSERT_EQUAL(before, (long long)nids);
    CU_ASSERT_TRUE(shard_rows(job, "done") < (long long)nids);

    /* SIGTERM in the middle of the job: out within a few seconds. */
    double took = stop_within(SIGTERM, 10, &st);
    fprintf(stderr, "\n    SIGTERM during a fleet job: exit after %.2f s", took);
    CU_ASSERT_TRUE(took >= 0 && took < 5);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* The next server finishes it without expanding it again. */
    srv = start_server();
    CU_ASSERT_EQUAL_FATAL(rv_testsrv_wait(port, "/readyz", NULL, 200, 60, &srv), 0);
    t0 = now_s();
    /* 64 scenarios x every trace: about 45 s under ThreadSanitizer; the
     * point is that the job finishes, not how fast. */
    json_t *j = wait_job(job, 150);
    fprintf(stderr, "\n    the restarted server finished the job in %.1f s", now_s() - t0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(jstr(j, "state"), "done");
    json_t *res = json_object_get(j, "result");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "shards")), before);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "traces")), (json_int_t)nids);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "trace_ids_dropped")), 5000);
    json_t *s0 = json_array_get(json_object_get(res, "scenarios"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(s0, "rows")), nids);
    CU_ASSERT_EQUAL(shard_rows(job, NULL), before);
    fprintf(stderr, "\n    shard rows before restart %lld, after %lld", before,
            shard_rows(job, NULL));
    json_decref(j);
}

/* ---- since ----------------------------------------------------------------- */

static void test_since(void)
{
    tc_resp r;

    CU_ASSERT_EQUAL(
        req(NULL, "/v1/traces?since=%27%20OR%201%3D1--", tok_read, NULL, NULL, NULL, &r), 400);
    CU_ASSERT_STRING_EQUAL(err_member(&r, "field"), "since");
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(NULL, "/v1/traces?since=yesterday", tok_read, NULL, NULL, NULL, &r), 400);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(NULL, "/v1/traces?since=2024-02-30", tok_read, NULL, NULL, NULL, &r), 400);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/fleet/whatif", tok_read, "application/json",
                        "{\"select\":{\"since\":\"yesterday\"},\"scenarios\":[{}]}", NULL, &r),
                    400);
    CU_ASSERT_STRING_EQUAL(err_member(&r, "field"), "select.since");
    tc_resp_free(&r);

    /* Valid times filter as times: the future selects nothing, the past
     * everything, the k-th newest upload's own time that one and newer. */
    CU_ASSERT_EQUAL(
        req(NULL, "/v1/traces?since=2999-01-01T00:00:00Z", tok_read, NULL, NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "count")), 0);
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(NULL, "/v1/traces?since=2000-01-01", tok_read, NULL, NULL, NULL, &r), 200);
    j = body_json(&r);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "count")), (json_int_t)nids);
    json_t *list = json_object_get(j, "traces");
    size_t k = nids / 2;
    char path[256], since[96];
    snprintf(since, sizeof(since), "%s", jstr(json_array_get(list, k), "uploaded_at"));
    json_decref(j);
    tc_resp_free(&r);
    /* uploaded_at as sent, with its '+' percent-encoded. */
    char enc[128];
    size_t e = 0;
    for (const char *s = since; *s && e + 4 < sizeof(enc); s++)
        e += (size_t)(*s == '+' ? snprintf(enc + e, sizeof(enc) - e, "%%2B")
                                : snprintf(enc + e, sizeof(enc) - e, "%c", *s));
    snprintf(path, sizeof(path), "/v1/traces?since=%s", enc);
    CU_ASSERT_EQUAL(req(NULL, path, tok_read, NULL, NULL, NULL, &r), 200);
    j = body_json(&r);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "count")), (json_int_t)(k + 1));
    fprintf(stderr, "\n    since=%s: %lld of %zu traces", since,
            (long long)json_integer_value(json_object_get(j, "count")), nids);
    json_decref(j);
    tc_resp_free(&r);
    /* The fleet selection too (inline: nothing selected). */
    CU_ASSERT_EQUAL(req("POST", "/v1/fleet/whatif", tok_read, "application/json",
                        "{\"select\":{\"since\":\"2999-01-01T00:00:00+02:00\"},\"scenarios\":[{}]}",
                        NULL, &r),
                    200);
    j = body_json(&r);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "traces")), 0);
    json_decref(j);
    tc_resp_free(&r);
}

/* ---- the embedded database ---------------------------------------------- */

static void test_database_restart(void)
{
    long pm = postmaster_pid();
    CU_ASSERT_TRUE_FATAL(pm > 0 && alive(pm));
    kill((pid_t)pm, SIGKILL);
    int saw_503 = 0, saw_500 = 0, ok = 0;
    double t0 = now_s(), back = -1;
    while (now_s() - t0 < 40) {
        tc_resp r;
        long st = req(NULL, "/v1/traces", tok_read, NULL, NULL, NULL, &r);
        if (st == 503 && strcmp(err_member(&r, "code"), "database_unavailable") == 0)
            saw_503++;
        else if (st == 200 && saw_503)
            ok = 1;
        else if (st >= 500)
            saw_500++;
        if (st >= 500 && saw_500 == 1 && strcmp(err_member(&r, "code"), "database_unavailable"))
            fprintf(stderr, "\n    after kill -9 of the postmaster: %ld %s", st, r.body);
        tc_resp_free(&r);
        if (ok) {
            back = now_s() - t0;
            break;
        }
        usleep(100 * 1000);
    }
    fprintf(stderr,
            "\n    postmaster killed: %d x 503 database_unavailable, %d other 5xx, 200 "
            "again after %.1f s",
            saw_503, saw_500, back);
    CU_ASSERT_TRUE(saw_503 > 0);
    CU_ASSERT_EQUAL(saw_500, 0);
    CU_ASSERT_TRUE(ok && back < 30);
    long pm2 = postmaster_pid();
    CU_ASSERT_TRUE(pm2 > 0 && pm2 != pm && alive(pm2));
}

static void test_orphan_cluster_adopted(void)
{
    char p[64];
    tc_resp r;
    int st;

    /* kill -9: the server cannot stop its cluster, which keeps running. */
    rv_testsrv_stop(&srv, SIGKILL);
    long pm = postmaster_pid();
    CU_ASSERT_TRUE_FATAL(pm > 0 && alive(pm));
    srv = start_server();
    CU_ASSERT_EQUAL_FATAL(rv_testsrv_wait(port, "/readyz", NULL, 200, 60, &srv), 0);
    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)ids[0]);
    CU_ASSERT_EQUAL(req(NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(postmaster_pid(), pm); /* the same cluster, adopted */
    /* ...and stopped with the server that adopted it. */
    double took = stop_within(SIGTERM, 30, &st);
    CU_ASSERT_TRUE(took >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    double t0 = now_s();
    while (now_s() - t0 < 10 && alive(pm))
        usleep(100 * 1000);
    CU_ASSERT_FALSE(alive(pm));
    fprintf(stderr, "\n    orphaned postmaster %ld %s after the adopting server stopped", pm,
            alive(pm) ? "still running" : "stopped");
}

/* ---- fleet cost: O(shards), cached rows and errors, the graph cache ---- */

/* A counter or gauge from /metrics (-1 when absent). */
static double metric(const char *name)
{
    tc_resp r;
    double v = -1;
    size_t n = strlen(name);
    if (req(NULL, "/metrics", NULL, NULL, NULL, NULL, &r) == 200 && r.body)
        for (const char *l = r.body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
            if (strncmp(l, name, n) == 0 && l[n] == ' ')
                v = strtod(l + n + 1, NULL);
    tc_resp_free(&r);
    return v;
}

/* Every trace under fp8 AMP (refused on GPUs without fp8, a stable error)
 * and a plain scale, without shard_size; waits for the job's answer. */
static json_t *fleet_job(int salt, int64_t *job_out)
{
    char body[8192];
    size_t k = 0;
    tc_resp r;
    k +=
        (size_t)snprintf(body + k, sizeof(body) - k, "{\"async\":true,\"select\":{\"trace_ids\":[");
    for (size_t i = 0; i < nids; i++)
        k +=
            (size_t)snprintf(body + k, sizeof(body) - k, "%s%lld", i ? "," : "", (long long)ids[i]);
    snprintf(body + k, sizeof(body) - k,
             "]},\"scenarios\":[{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp8\"}],"
             "\"batch_size\":%d},{\"optimizations\":[{\"kind\":\"scale\",\"factor\":0.9}],"
             "\"batch_size\":%d}]}",
             salt, salt);
    long st = req("POST", "/v1/fleet/whatif", tok_read, "application/json", body, NULL, &r);
    json_t *j = body_json(&r);
    int64_t job = st == 202 ? (int64_t)json_integer_value(json_object_get(j, "job_id")) : -1;
    json_decref(j);
    tc_resp_free(&r);
    *job_out = job;
    return job > 0 ? wait_job(job, 60) : NULL;
}

static size_t error_rows(const json_t *res)
{
    size_t n = 0;
    const json_t *sc = json_object_get(res, "scenarios");
    for (size_t s = 0; s < json_array_size(sc); s++) {
        const json_t *rows = json_object_get(json_array_get(sc, s), "rows");
        for (size_t i = 0; i < json_array_size(rows); i++)
            n += json_object_get(json_array_get(rows, i), "error") != NULL;
    }
    return n;
}

static void test_fleet_cost(void)
{
    int64_t job = 0, job2 = 0;
    char q[256];
    double misses0 = metric("reveried_whatif_cache_misses_total");
    double gh0 = metric("reveried_graph_cache_hits_total");

    /* Defaults: as many fleet threads as CPUs, said in /metrics. */
    CU_ASSERT(metric("reveried_fleet_workers") >= 1);
    CU_ASSERT(metric("reveried_graph_cache_hit_ratio") >= 0);
    CU_ASSERT(metric("reveried_graph_cache_evictions_total") >= 0);
    json_t *a = fleet_job(4242, &job);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_STRING_EQUAL(jstr(a, "state"), "done");
    json_t *res = json_object_get(a, "result");
    /* The selection was resolved once, in the request: the job keeps it. */
    CU_ASSERT_EQUAL(json_array_size(json_object_get(
                        json_object_get(json_object_get(a, "request"), "resolved"), "trace_ids")),
                    nids);
    /* Shard size from the selection (at least 4 traces a shard), and the
     * parent finished by its counter: shards_done reached the shard count. */
    size_t shards = (size_t)json_integer_value(json_object_get(res, "shards"));
    CU_ASSERT_EQUAL(shards, (nids + 3) / 4);
    CU_ASSERT_EQUAL(shard_rows(job, NULL), (long long)shards);
    snprintf(q, sizeof(q), "SELECT shards_done FROM jobs WHERE id = %lld", (long long)job);
    CU_ASSERT_EQUAL(scalar(q), (long long)shards);
    size_t errs = error_rows(res);
    CU_ASSERT(errs > 0); /* the V100 traces have no fp8 */
    /* The finished job's answer as CSV: a header and one line per row,
     * error rows included; an unknown format is refused. */
    {
        char p[96];
        tc_resp r;
        snprintf(p, sizeof(p), "/v1/jobs/%lld?format=csv", (long long)job);
        CU_ASSERT_EQUAL(req("GET", p, tok_read, NULL, NULL, NULL, &r), 200);
        CU_ASSERT(strstr(r.ctype, "text/csv") != NULL);
        CU_ASSERT(r.body && strncmp(r.body, "scenario,trace_id,", 18) == 0);
        size_t lines = 0, with_error = 0;
        for (const char *c = r.body; c && *c; c++)
            lines += *c == '\n';
        for (const char *c = r.body; c && (c = strstr(c, "fp8")) != NULL; c += 3)
            with_error++;
        CU_ASSERT_EQUAL(lines, 1 + nids * 2);
        CU_ASSERT(with_error >= errs);
        tc_resp_free(&r);
        snprintf(p, sizeof(p), "/v1/jobs/%lld?format=xml", (long long)job);
        CU_ASSERT_EQUAL(req("GET", p, tok_read, NULL, NULL, NULL, &r), 400);
        tc_resp_free(&r);
    }
    CU_ASSERT(errs < nids * 2);
    /* Stable errors are cached like answers, under their own keys. */
    CU_ASSERT(scalar("SELECT count(*) FROM whatif_cache WHERE body LIKE '{\"error\":%'") >=
              (long long)errs);
    /* Fleet rows compute only their figures (no reports): each equals the
     * full answer's figures for the same trace and document. */
    const json_t *rows1 =
        json_object_get(json_array_get(json_object_get(res, "scenarios"), 1), "rows");
    size_t compared = 0;
    for (size_t i = 0; i < json_array_size(rows1); i++) {
        const json_t *row = json_array_get(rows1, i);
        char p[96];
        tc_resp r;
        if (json_object_get(row, "error"))
            continue;
        snprintf(p, sizeof(p), "/v1/traces/%lld/whatif",
                 (long long)json_integer_value(json_object_get(row, "trace_id")));
        if (req("POST", p, tok_read, "application/json",
                "{\"optimizations\":[{\"kind\":\"scale\",\"factor\":0.9}],"
                "\"batch_size\":4242}",
                NULL, &r) == 200) {
            json_t *ans = body_json(&r);
            CU_ASSERT(json_equal(json_object_get(ans, "predicted_us"),
                                 json_object_get(row, "predicted_us")));
            CU_ASSERT(json_equal(json_object_get(ans, "speedup"), json_object_get(row, "speedup")));
            CU_ASSERT(
                json_equal(json_object_get(ans, "energy_j"), json_object_get(row, "energy_j")));
            CU_ASSERT_EQUAL(json_array_size(json_object_get(ans, "warnings")),
                            (size_t)json_integer_value(json_object_get(row, "warning_count")));
            compared++;
            json_decref(ans);
        }
        tc_resp_free(&r);
    }
    CU_ASSERT_EQUAL(compared, nids);
    double misses1 = metric("reveried_whatif_cache_misses_total");
    double cached1 = metric("reveried_fleet_rows_cached_total");
    CU_ASSERT(misses1 - misses0 >= (double)(nids * 2));

    /* The same request again: every row, errors included, from the cache,
     * and the same rows. */
    json_t *b = fleet_job(4242, &job2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_STRING_EQUAL(jstr(b, "state"), "done");
    CU_ASSERT_EQUAL(metric("reveried_whatif_cache_misses_total"), misses1);
    CU_ASSERT_EQUAL(metric("reveried_fleet_rows_cached_total") - cached1, (double)(nids * 2));
    const json_t *sa = json_object_get(res, "scenarios"),
                 *sb = json_object_get(json_object_get(b, "result"), "scenarios");
    for (size_t s = 0; s < 2; s++)
        CU_ASSERT(json_equal(json_object_get(json_array_get(sa, s), "rows"),
                             json_object_get(json_array_get(sb, s), "rows")));

    /* New scenarios on the same traces: answers computed, graphs from the
     * loaded-trace cache (its hit counter moves). */
    json_t *c = fleet_job(4343, &job2);
    CU_ASSERT_PTR_NOT_NULL(c);
    double gh1 = metric("reveried_graph_cache_hits_total");
    CU_ASSERT(gh1 - gh0 >= (double)nids);
    fprintf(stderr,
            "\n    %zu traces x 2: %zu shards (shards_done %lld), %zu error rows cached; again: "
            "%.0f rows from the cache, 0 computed; graph cache hits +%.0f, hit ratio %.2f",
            nids, shards, scalar(q), errs, metric("reveried_fleet_rows_cached_total") - cached1,
            gh1 - gh0, metric("reveried_graph_cache_hit_ratio"));
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

static const struct {
    const char *name;
    CU_TestFunc fn;
} tests[] = {
    {"spool_cleanup_at_start", test_spool_cleanup_at_start},
    {"selection_over_limit", test_selection_over_limit},
    {"dedup_at_limit_expands_once", test_dedup_at_limit_expands_once},
    {"since", test_since},
    {"cancel", test_cancel},
    {"fleet_cost", test_fleet_cost},
    {"sigterm_and_restart", test_sigterm_and_restart},
    {"database_restart", test_database_restart},
    {"orphan_cluster_adopted", test_orphan_cluster_adopted},
};

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    int rc = suite_init();
    if (rc == 77) {
        suite_clean();
        return 77;
    }
    if (rc != 0) {
        fprintf(stderr, "setup failed; logs in %s\n", g_srv.home);
        suite_clean();
        return 1;
    }
    CU_pSuite s = CU_add_suite("jobs", NULL, NULL);
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], tests[i].name) == 0;
        if (want)
            CU_add_test(s, tests[i].name, tests[i].fn);
    }
    unsigned failures = rv_test_run();
    suite_clean();
    return failures ? 1 : 0;
}
