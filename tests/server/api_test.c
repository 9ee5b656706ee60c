/* reveried end to end: a real server process with its embedded PostgreSQL
 * under a temporary REVERIE_HOME, real traces from RV_SHARED_TRACES, libcurl.
 * Every endpoint, errors, auth and scopes, limits, duplicates, a kill -9
 * restart, two replicas sharing a fleet job, graceful SIGTERM.
 * Skips (77) when reveried, the traces or PostgreSQL are not available. */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/http_client.h"
#include "common/rv_test_server.h"
#include "common/rv_test_util.h"
#include "rv_auth.h"
#include "rv_db.h"
#include "rv_pgembed.h"

static rv_testsrv g_srv;
static char traces[1024];
static char t_small[1100], t_h100[1100], t_resnet[1100];
static pid_t srv_a = -1, srv_b = -1;
static int port_a, port_b;
static char conninfo[1024];
static char tok_admin[RV_TOKEN_LEN + 1], tok_read[RV_TOKEN_LEN + 1], tok_ingest[RV_TOKEN_LEN + 1];
static int64_t id_small, id_h100, id_resnet;

/* The options every server of this suite runs with, then optionally
 * --database (a second replica on the first one's cluster). */
static pid_t start_server(int port, const char *database)
{
    const char *args[16] = {"--require-auth",
                            "--workers",
                            "4",
                            "--http-threads",
                            "2",
                            "--upload-cap",
                            "48",
                            "--json-cap",
                            "64",
                            "--fleet-inline",
                            "2"};
    int n = 11;

    if (database) {
        args[n++] = "--database";
        args[n++] = database;
    }
    args[n] = NULL;
    return rv_testsrv_spawn(&g_srv, port, args);
}

static void base_url(char *out, size_t cap, int port, const char *path)
{
    snprintf(out, cap, "http://127.0.0.1:%d%s", port, path);
}

static int wait_status(int port, const char *path, long want, int seconds)
{
    return rv_testsrv_wait(port, path, tok_admin[0] ? tok_admin : NULL, want, seconds, NULL);
}

static long req(int port, const char *method, const char *path, const char *token,
                const char *ctype, const char *body, const char *file, tc_resp *out)
{
    char u[512], auth[128];
    tc_req q = {0};

    base_url(u, sizeof(u), port, path);
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
    if (tc_do(&q, out) != 0)
        return -1;
    if (out->status >= 500)
        fprintf(stderr, "\n    %s %s -> %ld %s", method ? method : "GET", path, out->status,
                out->body);
    return out->status;
}

static json_t *body_json(const tc_resp *r)
{
    return json_loads(r->body ? r->body : "", 0, NULL);
}

static const char *err_code(const tc_resp *r)
{
    static char code[64];
    json_t *j = body_json(r);
    const char *c = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    snprintf(code, sizeof(code), "%s", c ? c : "<none>");
    json_decref(j);
    return code;
}

static int suite_init(void)
{
    const char *t = getenv("RV_SHARED_TRACES");

    if (!t) {
        fprintf(stderr, "skip: RV_SHARED_TRACES unset\n");
        return 77;
    }
    snprintf(traces, sizeof(traces), "%s", t);
    snprintf(t_small, sizeof(t_small), "%s/hta/critical-path-simple-add.json.gz", traces);
    snprintf(t_h100, sizeof(t_h100), "%s/kineto/h100-sync-after-fix.json", traces);
    snprintf(t_resnet, sizeof(t_resnet), "%s/kineto/resnet50-v100-workers0.pt.trace.json.gz",
             traces);
    if (access(t_small, R_OK) != 0 || access(t_h100, R_OK) != 0 || access(t_resnet, R_OK) != 0) {
        fprintf(stderr, "skip: the shared traces are missing\n");
        return 77;
    }
    int rc = rv_testsrv_setup(&g_srv, "rv_api_test");
    if (rc != 0)
        return rc;
    port_a = rv_testsrv_free_port();
    srv_a = start_server(port_a, NULL);
    if (rv_testsrv_wait(port_a, "/readyz", NULL, 200, 120, &srv_a) != 0) {
        fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?); log in %s\n",
                g_srv.home);
        return 77;
    }
    const rv_testsrv_token toks[] = {{"test-admin", RV_SCOPE_ADMIN, tok_admin},
                                     {"test-read", RV_SCOPE_READ, tok_read},
                                     {"test-ingest", RV_SCOPE_INGEST, tok_ingest}};
    if (rv_testsrv_conninfo(&g_srv, conninfo, sizeof(conninfo)) != 0 ||
        rv_testsrv_tokens(&g_srv, toks, 3) != 0)
        return 1;
    /* The server reloads its token table every second. */
    return wait_status(port_a, "/v1/traces", 200, 10) == 0 ? 0 : 1;
}

static int suite_clean(void)
{
    rv_testsrv_stop(&srv_b, SIGTERM);
    rv_testsrv_stop(&srv_a, SIGTERM);
    return rv_testsrv_teardown(&g_srv);
}

static void test_health_and_public(void)
{
    tc_resp r;

    CU_ASSERT_EQUAL(req(port_a, NULL, "/healthz", NULL, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"ok\""));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/readyz", NULL, NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/metrics", NULL, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "reveried_requests_total"));
    tc_resp_free(&r);
}

static void test_auth(void)
{
    tc_resp r;

    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces", NULL, NULL, NULL, NULL, &r), 401);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "unauthorized");
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces", tok_ingest, NULL, NULL, NULL, &r), 403);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "forbidden");
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces", tok_read, NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "POST", "/v1/traces", tok_read, "application/json", "{}", NULL, &r),
                    403);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "DELETE", "/v1/traces/1", tok_read, NULL, NULL, NULL, &r), 403);
    tc_resp_free(&r);
}

static int64_t upload(const char *path, const char *query, const char *ctype, const char *token,
                      long want, json_t **out)
{
    tc_resp r;
    char p[256];
    int64_t id = -1;

    snprintf(p, sizeof(p), "/v1/traces%s", query ? query : "");
    long st = req(port_a, "POST", p, token, ctype, NULL, path, &r);
    if (st != want)
        fprintf(stderr, "upload %s: status %ld: %s\n", path, st, r.body);
    CU_ASSERT_EQUAL(st, want);
    json_t *j = body_json(&r);
    id = (int64_t)json_integer_value(json_object_get(j, "id"));
    if (out)
        *out = j;
    else
        json_decref(j);
    tc_resp_free(&r);
    return id;
}

static void test_upload(void)
{
    json_t *j = NULL;

    id_small = upload(t_small, "?job=test-add&tags=ci,small&rank=0", "application/gzip", tok_ingest,
                      201, &j);
    CU_ASSERT_TRUE(id_small > 0);
    CU_ASSERT_TRUE(json_integer_value(json_object_get(j, "tasks")) > 0);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(j, "platform"));
    CU_ASSERT_FALSE(json_is_true(json_object_get(j, "duplicate")));
    json_decref(j);
    /* The same bytes again: 200 and the same id. */
    int64_t again = upload(t_small, "?job=other", "application/gzip", tok_admin, 200, &j);
    CU_ASSERT_EQUAL(again, id_small);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "duplicate")));
    json_decref(j);
    id_h100 = upload(t_h100, "?job=test-h100", "application/json", tok_ingest, 201, NULL);
    id_resnet = upload(t_resnet, "?job=resnet50", "application/json", tok_ingest, 201, &j);
    CU_ASSERT_TRUE(id_h100 > 0 && id_resnet > 0 && id_h100 != id_resnet);
    CU_ASSERT_TRUE(json_number_value(json_object_get(j, "measured_us")) > 0);
    json_decref(j);
}

static void test_upload_errors(void)
{
    tc_resp r;
    char bad[1200];

    /* Truncated JSON: 400 with the reader's message. */
    CU_ASSERT_EQUAL(req(port_a, "POST", "/v1/traces", tok_ingest, "application/json",
                        "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": ", NULL, &r),
                    400);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"message\""));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(
        req(port_a, "POST", "/v1/traces", tok_ingest, "application/json", "[]", NULL, &r), 400);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "POST", "/v1/traces", tok_ingest, "text/plain", "{}", NULL, &r),
                    415);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "unsupported_media_type");
    tc_resp_free(&r);
    /* Over the 48 MiB cap by Content-Length: refused before the body. */
    snprintf(bad, sizeof(bad), "%s/big.json", g_srv.home);
    FILE *f = fopen(bad, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(ftruncate(fileno(f), 49L << 20), 0);
    fclose(f);
    /* With Expect: 100-continue (curl's default for big bodies) the 413
     * arrives instead of the 100 and the body is never sent. */
    char auth[128], u[256];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok_ingest);
    base_url(u, sizeof(u), port_a, "/v1/traces");
    tc_req q = {.url = u,
                .ctype = "application/json",
                .file = bad,
                .expect_continue = 1,
                .headers = {auth}};
    CU_ASSERT_EQUAL(tc_do(&q, &r), 0);
    CU_ASSERT_EQUAL(r.status, 413);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "payload_too_large");
    tc_resp_free(&r);
    unlink(bad);
    /* JSON body cap (64 KiB) on a what-if. */
    char *big = malloc(70 * 1024);
    memset(big, ' ', 70 * 1024);
    big[0] = '{';
    big[70 * 1024 - 2] = '}';
    big[70 * 1024 - 1] = '\0';
    char p[64];
    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)id_small);
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json", big, NULL, &r), 413);
    tc_resp_free(&r);
    free(big);
}

static void test_list_get_original(void)
{
    tc_resp r;
    char p[256];

    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces?limit=2", tok_read, NULL, NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "traces")), 2);
    const char *cur = json_string_value(json_object_get(j, "next_cursor"));
    CU_ASSERT_PTR_NOT_NULL(cur);
    snprintf(p, sizeof(p), "/v1/traces?limit=2&cursor=%s", cur ? cur : "x");
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    j = body_json(&r);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "traces")), 1);
    CU_ASSERT_TRUE(json_is_null(json_object_get(j, "next_cursor")));
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces?job=test-*", tok_read, NULL, NULL, NULL, &r),
                    200);
    j = body_json(&r);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "traces")), 2);
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces?limit=x", tok_read, NULL, NULL, NULL, &r), 400);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "invalid_parameter");
    tc_resp_free(&r);

    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)id_h100);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    j = body_json(&r);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "id")), id_h100);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "job")), "test-h100");
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces/987654321", tok_read, NULL, NULL, NULL, &r), 404);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "not_found");
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/traces/abc", tok_read, NULL, NULL, NULL, &r), 404);
    tc_resp_free(&r);

    /* The original comes back byte for byte. */
    FILE *f = fopen(t_small, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char want[1 << 20];
    size_t n = fread(want, 1, sizeof(want), f);
    fclose(f);
    snprintf(p, sizeof(p), "/v1/traces/%lld/original", (long long)id_small);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_EQUAL(r.len, n);
    CU_ASSERT_TRUE(r.len == n && memcmp(r.body, want, n) == 0);
    tc_resp_free(&r);
    f = fopen(t_h100, "rb");
    static char want2[16 << 20];
    n = fread(want2, 1, sizeof(want2), f);
    fclose(f);
    snprintf(p, sizeof(p), "/v1/traces/%lld/original", (long long)id_h100);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_TRUE(r.len == n && memcmp(r.body, want2, n) == 0);
    tc_resp_free(&r);
}

static void test_timeline(void)
{
    tc_resp r;
    char p[256];

    snprintf(p, sizeof(p), "/v1/traces/%lld/timeline?source=measured&max_tasks=50",
             (long long)id_resnet);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    size_t nt = json_array_size(json_object_get(j, "tasks"));
    CU_ASSERT_TRUE(nt > 0 && nt <= 50);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "truncated")));
    CU_ASSERT_TRUE(json_array_size(json_object_get(j, "threads")) > 0);
    json_decref(j);
    tc_resp_free(&r);
    snprintf(p, sizeof(p), "/v1/traces/%lld/timeline?source=baseline&format=chrome",
             (long long)id_small);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "traceEvents"));
    tc_resp_free(&r);
    snprintf(p, sizeof(p), "/v1/traces/%lld/timeline?source=bogus", (long long)id_small);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 400);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "invalid_parameter");
    tc_resp_free(&r);
}

static void test_whatif(void)
{
    tc_resp r;
    char p[256];
    /* The resnet trace was taken with no data-loader workers: it is bound by
     * data loading, so more loader workers must help. */
    const char *amp = "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4}]}";

    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)id_resnet);
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json", "{}", NULL, &r), 200);
    json_t *j = body_json(&r);
    double meas = json_number_value(json_object_get(j, "measured_us"));
    double base = json_number_value(json_object_get(j, "baseline_us"));
    double pred = json_number_value(json_object_get(j, "predicted_us"));
    CU_ASSERT_TRUE(meas > 0 && base > 0);
    CU_ASSERT_DOUBLE_EQUAL(pred, base, base * 1e-9 + 1e-6); /* nothing changed */
    CU_ASSERT_PTR_NOT_NULL(json_object_get(j, "breakdown"));
    CU_ASSERT_FALSE(json_is_true(json_object_get(j, "cached")));
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json", amp, NULL, &r), 200);
    j = body_json(&r);
    double amp_pred = json_number_value(json_object_get(j, "predicted_us"));
    CU_ASSERT_TRUE(amp_pred > 0 && amp_pred < base);
    CU_ASSERT_TRUE(json_number_value(json_object_get(j, "speedup")) > 1.0);
    json_decref(j);
    tc_resp_free(&r);
    /* The same request, keys reordered by whitespace only: a cache hit. */
    CU_ASSERT_EQUAL(
        req(port_a, "POST", p, tok_read, "application/json",
            "{ \"optimizations\" : [ { \"workers\" : 4, \"kind\" : \"dataloader\" } ] }", NULL, &r),
        200);
    j = body_json(&r);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "cached")));
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(j, "predicted_us")), amp_pred, 1e-6);
    json_decref(j);
    tc_resp_free(&r);
    /* Bad documents: 400 naming the field, never 500. */
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json",
                        "{\"optimizations\":[{\"kind\":\"warp-drive\"}]}", NULL, &r),
                    400);
    j = body_json(&r);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(j, "error"), "field"));
    json_decref(j);
    tc_resp_free(&r);
    /* A limit the request itself asks past is the client's to fix: 4xx
     * naming the field, not a retryable 503. */
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json",
                        "{\"distributed\":{\"workers\":8,\"tensor_partition_mb\":0.000001}}", NULL,
                        &r),
                    422);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "limit_exceeded");
    j = body_json(&r);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(j, "error"), "field")),
                           "distributed");
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json", "[1,2]", NULL, &r), 400);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json", "{nope", NULL, &r), 400);
    CU_ASSERT_STRING_EQUAL(err_code(&r), "invalid_json");
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "POST", "/v1/traces/987654/whatif", tok_read, "application/json",
                        "{}", NULL, &r),
                    404);
    tc_resp_free(&r);
}

/* The same what-if on the same trace gives the same answer from the CLI
 * (`reverie simulate --whatif`) and the API: the same keys (the API adds
 * trace_id, cached and request_hash; the CLI names its file), the same
 * predicted_us, energy, critical path and warnings. */
static void test_same_answer_as_cli(void)
{
    const char *doc = "{\"optimizations\":[{\"kind\":\"amp\"}],\"power_limit_w\":250,"
                      "\"distributed\":{\"workers\":16}}";
    const char *bin = getenv("RV_BIN_DIR");
    char cmd[4096], p[64];
    tc_resp r;

    CU_ASSERT_PTR_NOT_NULL_FATAL(bin);
    snprintf(cmd, sizeof(cmd), "'%s/reverie' simulate '%s' --compact --whatif '%s'", bin, t_resnet,
             doc);
    FILE *f = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    json_error_t je;
    json_t *cli = json_loadf(f, 0, &je);
    CU_ASSERT_EQUAL(pclose(f), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cli);
    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)id_resnet);
    CU_ASSERT_EQUAL(req(port_a, "POST", p, tok_read, "application/json", doc, NULL, &r), 200);
    json_t *api = body_json(&r);
    tc_resp_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(api);
    CU_ASSERT_TRUE(json_is_integer(json_object_get(api, "trace_id")));
    CU_ASSERT_TRUE(json_is_string(json_object_get(cli, "trace")));
    json_object_del(api, "trace_id");
    json_object_del(api, "cached");
    json_object_del(api, "request_hash");
    json_object_del(cli, "trace");
    const char *key;
    json_t *v;
    json_object_foreach(cli, key, v)
    {
        if (!json_object_get(api, key))
            printf("\n    the API lacks %s", key);
        CU_ASSERT_PTR_NOT_NULL(json_object_get(api, key));
    }
    json_object_foreach(api, key, v)
    {
        if (!json_object_get(cli, key))
            printf("\n    the CLI lacks %s", key);
        CU_ASSERT_PTR_NOT_NULL(json_object_get(cli, key));
    }
    double pc = json_number_value(json_object_get(cli, "predicted_us"));
    double pa = json_number_value(json_object_get(api, "predicted_us"));
    printf("\n    amp + 250 W + 16 workers: CLI %.3f us, API %.3f us", pc, pa);
    CU_ASSERT_TRUE(pc > 0);
    CU_ASSERT_DOUBLE_EQUAL(pc, pa, 1e-6 * pc);
    CU_ASSERT_TRUE(json_is_object(json_object_get(api, "energy_j")));
    CU_ASSERT_TRUE(json_equal(json_object_get(cli, "energy_j"), json_object_get(api, "energy_j")));
    CU_ASSERT_TRUE(json_array_size(json_object_get(api, "critical_path")) > 0 ||
                   json_object_size(json_object_get(api, "critical_path")) > 0);
    CU_ASSERT_TRUE(
        json_equal(json_object_get(cli, "critical_path"), json_object_get(api, "critical_path")));
    CU_ASSERT_TRUE(json_equal(json_object_get(cli, "warnings"), json_object_get(api, "warnings")));
    CU_ASSERT_TRUE(json_equal(cli, api));
    json_decref(cli);
    json_decref(api);
}

static json_t *whatif_json(int64_t id, const char *doc, long want)
{
    tc_resp r;
    char p[64];

    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)id);
    long st = req(port_a, "POST", p, tok_read, "application/json", doc, NULL, &r);
    if (st != want)
        fprintf(stderr, "\n    what-if %s: %ld %s", doc, st, r.body);
    CU_ASSERT_EQUAL(st, want);
    json_t *j = body_json(&r);
    tc_resp_free(&r);
    return j;
}

static int64_t trace_platform(int64_t id)
{
    tc_resp r;
    char p[64];
    int64_t pid = -1;

    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)id);
    if (req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r) == 200) {
        json_t *j = body_json(&r);
        pid = (int64_t)json_integer_value(json_object_get(json_object_get(j, "platform"), "id"));
        json_decref(j);
    }
    tc_resp_free(&r);
    return pid;
}

/* "host_overheads": "platform": the server re-times the trace's host work
 * from its platform's stored statistics. The ResNet trace is alone on its
 * platform, so the statistics are its own and the prediction must stay near
 * the measurement; the answer is cached under the statistics' version. */
static void test_whatif_platform_overheads(void)
{
    const char *doc = "{\"host_overheads\":\"platform\"}";
    char hash1[80] = "", p[256], sql[160];

    json_t *j = whatif_json(id_resnet, doc, 200);
    double meas = json_number_value(json_object_get(j, "measured_us"));
    double pred = json_number_value(json_object_get(j, "predicted_us"));
    json_t *a0 = json_array_get(json_object_get(j, "applied"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a0, "kind")), "overheads");
    CU_ASSERT_TRUE(json_integer_value(json_object_get(a0, "launches_retimed")) > 1000);
    fprintf(stderr,
            "\n    resnet host_overheads platform: measured %.0f us, predicted %.0f us "
            "(%+.1f%%)",
            meas, pred, meas > 0 ? 100.0 * (pred - meas) / meas : 0.0);
    CU_ASSERT_TRUE(meas > 0 && pred > 0);
    CU_ASSERT_TRUE(meas > 0 && pred > 0.9 * meas && pred < 1.1 * meas);
    /* Not a no-op: the re-timed host work moves the prediction. */
    CU_ASSERT_TRUE(fabs(pred - json_number_value(json_object_get(j, "baseline_us"))) > 1.0);
    CU_ASSERT_FALSE(json_is_true(json_object_get(j, "cached")));
    snprintf(hash1, sizeof(hash1), "%s", json_string_value(json_object_get(j, "request_hash")));
    json_decref(j);

    /* The same statistics: a cache hit with the same key, and that key is
     * not the one of the document alone. */
    j = whatif_json(id_resnet, doc, 200);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "cached")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "request_hash")), hash1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(j, "predicted_us")), pred, 1e-6);
    json_decref(j);
    j = whatif_json(id_resnet, "{\"host_overheads\":\"trace\"}", 200);
    CU_ASSERT_STRING_NOT_EQUAL(json_string_value(json_object_get(j, "request_hash")), hash1);
    json_decref(j);

    /* The timeline of the prediction takes the same statistics. */
    snprintf(p, sizeof(p),
             "/v1/traces/%lld/timeline?source=predicted&max_tasks=10&whatif=%%7B%%22host_"
             "overheads%%22%%3A%%22platform%%22%%7D",
             (long long)id_resnet);
    tc_resp r;
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);

    /* A platform without statistics: a clear 400 naming the field. */
    int64_t pid = trace_platform(id_resnet);
    CU_ASSERT_TRUE_FATAL(pid > 0);
    PGconn *c = PQconnectdb(conninfo);
    CU_ASSERT_EQUAL_FATAL(PQstatus(c), CONNECTION_OK);
    snprintf(sql, sizeof(sql), "DELETE FROM platform_overhead_sketches WHERE platform_id = %lld",
             (long long)pid);
    PGresult *res = PQexec(c, sql);
    CU_ASSERT_EQUAL(PQresultStatus(res), PGRES_COMMAND_OK);
    PQclear(res);
    PQfinish(c);
    j = whatif_json(id_resnet, doc, 400);
    json_t *e = json_object_get(j, "error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e, "field")), "host_overheads");
    CU_ASSERT_PTR_NOT_NULL(
        strstr(json_string_value(json_object_get(e, "message")), "no host-overhead statistics"));
    json_decref(j);

    /* Rebuilt statistics (same numbers, new version): a new key, computed
     * again, same prediction. */
    rv_db *db = NULL;
    rv_error err;
    size_t groups = 0;
    rv_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(rv_db_open(conninfo, 1, &db, &err), 0);
    CU_ASSERT_EQUAL(rv_db_overheads_rebuild(db, pid, &groups, &err), 0);
    rv_db_close(db);
    CU_ASSERT_TRUE(groups > 0);
    j = whatif_json(id_resnet, doc, 200);
    CU_ASSERT_FALSE(json_is_true(json_object_get(j, "cached")));
    CU_ASSERT_STRING_NOT_EQUAL(json_string_value(json_object_get(j, "request_hash")), hash1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(j, "predicted_us")), pred,
                           pred * 1e-9);
    json_decref(j);

    /* Fleet rows take the platform's statistics too. */
    char body[256];
    snprintf(body, sizeof(body),
             "{\"select\":{\"trace_ids\":[%lld]},\"scenarios\":[{\"host_overheads\":"
             "\"platform\"}]}",
             (long long)id_resnet);
    CU_ASSERT_EQUAL(
        req(port_a, "POST", "/v1/fleet/whatif", tok_read, "application/json", body, NULL, &r), 200);
    j = body_json(&r);
    tc_resp_free(&r);
    json_t *row0 = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "scenarios"), 0), "rows"), 0);
    CU_ASSERT_PTR_NULL(json_object_get(row0, "error"));
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(row0, "predicted_us")), pred,
                           pred * 1e-9);
    json_decref(j);
}

/* The applied "gpu" entry of an answer (borrowed), or NULL. */
static json_t *applied_gpu(json_t *j)
{
    json_t *a;
    size_t i;
    json_array_foreach(json_object_get(j, "applied"), i,
                       a) if (json_string_value(json_object_get(a, "model")) &&
                              strcmp(json_string_value(json_object_get(a, "model")), "gpu") ==
                                  0) return a;
    return NULL;
}

static int has_warning(json_t *j, const char *code)
{
    json_t *w;
    size_t i;
    json_array_foreach(json_object_get(j, "warnings"), i,
                       w) if (strcmp(json_string_value(json_object_get(w, "code")), code) ==
                              0) return 1;
    return 0;
}

/* A trace moved to another GPU with "host_overheads": "platform" takes
 * the host statistics of a stored platform of that GPU (the H100 trace's
 * machine), not its own: the answer says whose host it is, and without
 * such a platform (no L4 trace is stored) it says the host was kept. */
static void test_whatif_target_host(void)
{
    json_t *j = whatif_json(id_resnet, "{\"gpu\":\"H100\",\"host_overheads\":\"platform\"}", 200);
    json_t *g = applied_gpu(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(g, "host")), "target");
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(g, "host_gpu")), "H100"));
    CU_ASSERT_FALSE(has_warning(j, "gpu_host_kept"));
    double target = json_number_value(json_object_get(j, "predicted_us"));
    char hash[80];
    snprintf(hash, sizeof(hash), "%s", json_string_value(json_object_get(j, "request_hash")));
    json_decref(j);

    /* No L4 machine is stored: the trace's own host statistics, said so. */
    j = whatif_json(id_resnet, "{\"gpu\":\"L4\",\"host_overheads\":\"platform\"}", 200);
    g = applied_gpu(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(g, "host")), "kept");
    CU_ASSERT_TRUE(has_warning(j, "gpu_host_kept"));
    CU_ASSERT_STRING_NOT_EQUAL(json_string_value(json_object_get(j, "request_hash")), hash);
    json_decref(j);
    j = whatif_json(id_resnet, "{\"gpu\":\"H100\"}", 200);
    g = applied_gpu(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(g, "host")), "kept");
    CU_ASSERT_TRUE(has_warning(j, "gpu_host_kept"));
    /* The H100 machine's launches are not the V100 machine's. */
    CU_ASSERT_TRUE(fabs(json_number_value(json_object_get(j, "predicted_us")) - target) >
                   0.01 * target);
    json_decref(j);

    /* Fleet rows choose the same host per scenario. */
    char body[320];
    tc_resp r;
    snprintf(body, sizeof(body),
             "{\"select\":{\"trace_ids\":[%lld]},\"scenarios\":[{\"gpu\":\"L4\","
             "\"host_overheads\":\"platform\"},{\"gpu\":\"H100\",\"host_overheads\":"
             "\"platform\"}]}",
             (long long)id_resnet);
    CU_ASSERT_EQUAL(
        req(port_a, "POST", "/v1/fleet/whatif", tok_read, "application/json", body, NULL, &r), 200);
    j = body_json(&r);
    tc_resp_free(&r);
    json_t *row1 = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "scenarios"), 1), "rows"), 0);
    CU_ASSERT_PTR_NULL(json_object_get(row1, "error"));
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(row1, "predicted_us")), target,
                           target * 1e-9);
    json_decref(j);
}

/* "kernel_models": "platform": the server completes the trace's kernel
 * efficiencies with its platform's, stored at upload (migration 0008). The
 * ResNet trace is alone on its platform: GET .../kernel-models lists its
 * classes, and batch_size on the platform's model fills no bucket, so it
 * answers as on the trace's own. A platform without kernel models (the
 * H100 sync trace has no op shapes) is refused with the reason. */
static void test_platform_kernel_models(void)
{
    tc_resp r;
    char p[96];
    int64_t pid = trace_platform(id_resnet);
    CU_ASSERT_TRUE_FATAL(pid > 0);
    snprintf(p, sizeof(p), "/v1/platforms/%lld/kernel-models", (long long)pid);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "traces")), 1);
    CU_ASSERT_TRUE(json_number_value(json_object_get(j, "kernels")) > 1000);
    int conv = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(j, "classes"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "class")), "conv") == 0) {
            conv = 1;
            double eff = json_number_value(json_object_get(c, "efficiency"));
            CU_ASSERT_TRUE(eff > 0.01 && eff <= 1.5);
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(c, "size_unit")), "flops");
        }
    }
    CU_ASSERT_TRUE(conv);
    json_decref(j);
    snprintf(p, sizeof(p), "/v1/platforms/%d/kernel-models", 987654321);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 404);
    tc_resp_free(&r);

    const char *own = "{\"optimizations\":[{\"kind\":\"batch_size\",\"to\":256}]}";
    const char *plat = "{\"kernel_models\":\"platform\",\"optimizations\":[{\"kind\":"
                       "\"batch_size\",\"to\":256}]}";
    json_t *a = whatif_json(id_resnet, own, 200), *b = whatif_json(id_resnet, plat, 200);
    json_t *ab = json_array_get(json_object_get(b, "applied"), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ab, "platform_buckets_filled")), 0);
    CU_ASSERT_PTR_NULL(json_object_get(json_array_get(json_object_get(a, "applied"), 0),
                                       "platform_buckets_filled"));
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(b, "predicted_us")),
                           json_number_value(json_object_get(a, "predicted_us")), 1e-6);
    CU_ASSERT_STRING_NOT_EQUAL(json_string_value(json_object_get(a, "request_hash")),
                               json_string_value(json_object_get(b, "request_hash")));
    json_decref(a);
    json_decref(b);
    j = whatif_json(id_h100, plat, 400);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CU_ASSERT_PTR_NOT_NULL(msg && strstr(msg, "no kernel models yet"));
    json_decref(j);

    /* `gpu` with the platform's models: a costed kernel takes the stored
     * efficiency the target measured for its class and size. To the same
     * GPU, the kernels come out near their measured total (geometric means
     * of the buckets instead of each kernel's own); to a GPU nothing stored
     * ran on, every kernel keeps its own efficiency, and the answer says so. */
    a = whatif_json(id_resnet, "{\"kernel_models\":\"platform\",\"gpu\":\"V100-DGXS\"}", 200);
    ab = json_array_get(json_object_get(a, "applied"), 0);
    double before = json_number_value(json_object_get(ab, "kernel_us_before"));
    double after = json_number_value(json_object_get(ab, "kernel_us_after"));
    printf("\n    V100 -> V100 on the platform's models: kernels %.0f -> %.0f us, %lld from the "
           "target\n",
           before, after,
           (long long)json_integer_value(json_object_get(ab, "kernels_from_target_platform")));
    CU_ASSERT_TRUE(json_integer_value(json_object_get(ab, "kernels_from_target_platform")) > 1000);
    CU_ASSERT_TRUE(
        json_number_value(json_object_get(ab, "kernel_time_share_from_target_platform")) > 0.5);
    CU_ASSERT_TRUE(after > 0.7 * before && after < 1.3 * before);
    CU_ASSERT_TRUE(fabs(after - before) > 1e-3 * before);
    char *ws0 = json_dumps(json_object_get(ab, "warnings"), 0);
    CU_ASSERT_PTR_NOT_NULL(ws0 && strstr(ws0, "gpu_platform_efficiencies"));
    free(ws0);
    json_decref(a);
    a = whatif_json(id_resnet, "{\"kernel_models\":\"platform\",\"gpu\":\"H100-SXM\"}", 200);
    ab = json_array_get(json_object_get(a, "applied"), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ab, "kernels_from_target_platform")), 0);
    char *ws = json_dumps(json_object_get(ab, "warnings"), 0);
    CU_ASSERT_PTR_NOT_NULL(ws && strstr(ws, "gpu_no_target_platform"));
    free(ws);
    json_decref(a);
}

static void test_catalogs(void)
{
    tc_resp r;
    char p[128];

    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/platforms", tok_read, NULL, NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    json_t *arr = json_object_get(j, "platforms");
    CU_ASSERT_TRUE(json_array_size(arr) >= 1);
    int64_t pid = (int64_t)json_integer_value(json_object_get(json_array_get(arr, 0), "id"));
    json_decref(j);
    tc_resp_free(&r);
    snprintf(p, sizeof(p), "/v1/platforms/%lld/overheads", (long long)pid);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"overheads\""));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/hardware", tok_read, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "V100"));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/v1/whatif/kinds", tok_read, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"fused_optimizer\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"inter_node_gbps\""));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, "/metrics", NULL, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "reveried_uploads_total 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "reveried_upload_duplicates_total 1\n"));
    tc_resp_free(&r);
}

static json_t *wait_job(int port, int64_t job, int seconds)
{
    char p[64];
    snprintf(p, sizeof(p), "/v1/jobs/%lld", (long long)job);
    for (int i = 0; i < seconds * 5; i++) {
        tc_resp r;
        if (req(port, NULL, p, tok_read, NULL, NULL, NULL, &r) == 200) {
            json_t *j = body_json(&r);
            tc_resp_free(&r);
            const char *st = json_string_value(json_object_get(j, "state"));
            if (st && (strcmp(st, "done") == 0 || strcmp(st, "failed") == 0))
                return j;
            json_decref(j);
        } else {
            tc_resp_free(&r);
        }
        usleep(200 * 1000);
    }
    return NULL;
}

static void test_fleet_inline_and_job(void)
{
    tc_resp r;
    char body[512];

    snprintf(body, sizeof(body),
             "{\"select\":{\"trace_ids\":[%lld]},\"scenarios\":[{\"optimizations\":[{\"kind\":"
             "\"dataloader\",\"workers\":4}]}]}",
             (long long)id_resnet);
    CU_ASSERT_EQUAL(
        req(port_a, "POST", "/v1/fleet/whatif", tok_read, "application/json", body, NULL, &r), 200);
    json_t *j = body_json(&r);
    json_t *agg = json_object_get(json_array_get(json_object_get(j, "scenarios"), 0), "aggregate");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(agg, "count")), 1);
    CU_ASSERT_TRUE(json_number_value(json_object_get(agg, "median_speedup")) > 1.0);
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, "POST", "/v1/fleet/whatif", tok_read, "application/json",
                        "{\"scenarios\":[]}", NULL, &r),
                    400);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"field\":\"scenarios\""));
    tc_resp_free(&r);

    /* Everything under two scenarios: over the inline limit, so a job. */
    CU_ASSERT_EQUAL(req(port_a, "POST", "/v1/fleet/whatif", tok_read, "application/json",
                        "{\"select\":{},\"scenarios\":[{},{\"optimizations\":[{\"kind\":"
                        "\"fused_optimizer\"}]}]}",
                        NULL, &r),
                    202);
    j = body_json(&r);
    int64_t job = (int64_t)json_integer_value(json_object_get(j, "job_id"));
    json_decref(j);
    tc_resp_free(&r);
    CU_ASSERT_TRUE_FATAL(job > 0);
    j = wait_job(port_a, job, 120);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "state")), "done");
    json_t *res = json_object_get(j, "result");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "traces")), 3);
    json_t *s0 = json_array_get(json_object_get(res, "scenarios"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(s0, "rows")), 3);
    json_decref(j);
}

static void test_restart_durability(void)
{
    tc_resp r;
    char p[64];

    /* kill -9: no chance to clean up. The embedded PostgreSQL keeps running;
     * the new process finds and reuses it. */
    rv_testsrv_stop(&srv_a, SIGKILL);
    srv_a = start_server(port_a, NULL);
    CU_ASSERT_EQUAL_FATAL(wait_status(port_a, "/readyz", 200, 60), 0);
    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)id_resnet);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "resnet50"));
    tc_resp_free(&r);
}

static void test_two_replicas(void)
{
    char body[256];
    tc_resp r;

    port_b = rv_testsrv_free_port();
    srv_b = start_server(port_b, conninfo);
    CU_ASSERT_EQUAL_FATAL(wait_status(port_b, "/readyz", 200, 60), 0);
    CU_ASSERT_EQUAL_FATAL(wait_status(port_b, "/v1/traces", 200, 10), 0);
    /* Replica A wrote its answers' cache rows after sending them (and was
     * killed since): B, which never held them, finds them in the database. */
    char wp[128];
    snprintf(wp, sizeof(wp), "/v1/traces/%lld/whatif", (long long)id_resnet);
    CU_ASSERT_EQUAL(req(port_b, "POST", wp, tok_read, "application/json",
                        "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4}]}", NULL, &r),
                    200);
    json_t *hit = body_json(&r);
    CU_ASSERT_TRUE(json_is_true(json_object_get(hit, "cached")));
    json_decref(hit);
    tc_resp_free(&r);
    /* One trace per shard and a few scenarios, so both replicas take some. */
    snprintf(body, sizeof(body),
             "{\"select\":{},\"shard_size\":1,\"async\":true,\"scenarios\":[{\"power_limit_w\":"
             "200},{\"power_limit_w\":150},{\"schedule\":\"fifo\"}]}");
    CU_ASSERT_EQUAL(
        req(port_a, "POST", "/v1/fleet/whatif", tok_read, "application/json", body, NULL, &r), 202);
    json_t *j = body_json(&r);
    int64_t job = (int64_t)json_integer_value(json_object_get(j, "job_id"));
    json_decref(j);
    tc_resp_free(&r);
    /* Replica B answers about the job replica A accepted. */
    j = wait_job(port_b, job, 120);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *res = json_object_get(j, "result");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "shards")), 3);
    size_t nw = json_array_size(json_object_get(res, "workers"));
    fprintf(stderr, "\n    fleet job %lld worked by %zu replica(s)\n", (long long)job, nw);
    CU_ASSERT_TRUE(nw >= 1);
    json_decref(j);
    /* Replica A queued the job and expanded it: B heard of it by the
     * job's NOTIFY, not only at its next poll. */
    CU_ASSERT_EQUAL(req(port_b, NULL, "/metrics", NULL, NULL, NULL, NULL, &r), 200);
    const char *m = r.body ? strstr(r.body, "\nreveried_fleet_notified_total ") : NULL;
    long long notified = m ? strtoll(m + 31, NULL, 10) : -1;
    fprintf(stderr, "    replica B woken by notifications %lld time(s)\n", notified);
    CU_ASSERT_TRUE(notified >= 1);
    tc_resp_free(&r);

    /* A trace B has loaded, deleted through A: B drops its cached graph on
     * A's notification and answers 404, not a what-if on a trace that is
     * gone. */
    char extra[1100], p[96];
    snprintf(extra, sizeof(extra), "%s", t_small);
    char *slash = strrchr(extra, '/');
    CU_ASSERT_PTR_NOT_NULL_FATAL(slash);
    snprintf(slash + 1, sizeof(extra) - (size_t)(slash + 1 - extra), "cuda-event-sync.json.gz");
    int64_t gone = upload(extra, "?job=replicas", "application/gzip", tok_ingest, 201, NULL);
    CU_ASSERT_TRUE_FATAL(gone > 0);
    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)gone);
    const char *doc = "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":1.5}]}";
    CU_ASSERT_EQUAL(req(port_b, "POST", p, tok_read, "application/json", doc, NULL, &r), 200);
    tc_resp_free(&r);
    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)gone);
    CU_ASSERT_EQUAL(req(port_a, "DELETE", p, tok_admin, NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    /* Another document, so no cached answer can stand in. */
    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)gone);
    long st = 0;
    for (int i = 0; i < 50 && st != 404; i++) {
        st = req(port_b, "POST", p, tok_read, "application/json",
                 "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":2}]}", NULL, &r);
        tc_resp_free(&r);
        if (st != 404)
            usleep(100 * 1000);
    }
    CU_ASSERT_EQUAL(st, 404);
    CU_ASSERT_EQUAL(req(port_b, NULL, "/metrics", NULL, NULL, NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(r.body && strstr(r.body, "\nreveried_traces_changed_total "));
    tc_resp_free(&r);
}

static void test_delete_and_sigterm(void)
{
    tc_resp r;
    char p[64];
    int st = 0;

    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)id_h100);
    CU_ASSERT_EQUAL(req(port_a, "DELETE", p, tok_admin, NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 404);
    tc_resp_free(&r);
    kill(srv_b, SIGTERM);
    CU_ASSERT_EQUAL(waitpid(srv_b, &st, 0), srv_b);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    srv_b = -1;
}

/* `reverie upload` against this server: --json gives the new trace's id
 * and the default job name drops .pt.trace.json.gz; the same bytes again
 * print "duplicate of trace N". */
static char *run_cli(const char *args)
{
    char cmd[4096];
    const char *bin = getenv("RV_BIN_DIR");
    snprintf(cmd, sizeof(cmd), "%s/reverie upload --server http://127.0.0.1:%d --token %s %s",
             bin ? bin : "build/bin", port_a, tok_ingest, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *out = calloc(cap, 1);
    while (out && n + 1 < cap && fgets(out + n, (int)(cap - n), p))
        n += strlen(out + n);
    CU_ASSERT_EQUAL(pclose(p), 0);
    return out;
}

static void test_cli_upload(void)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/kineto/resnet50-v100-workers4.pt.trace.json.gz", traces);
    char args[1300];
    snprintf(args, sizeof(args), "--json %s", path);
    char *out = run_cli(args);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    json_t *doc = json_loads(out, 0, NULL);
    if (!json_is_array(doc))
        fprintf(stderr, "\n  reverie upload --json: %s\n", out);
    json_t *row = json_array_get(doc, 0);
    int64_t id = (int64_t)json_integer_value(json_object_get(row, "id"));
    CU_ASSERT_TRUE(id > 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(row, "http_status")), 201);
    CU_ASSERT_FALSE(json_is_true(json_object_get(row, "duplicate")));
    json_decref(doc);
    free(out);

    tc_resp r;
    char p[64];
    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)id);
    CU_ASSERT_EQUAL(req(port_a, NULL, p, tok_read, NULL, NULL, NULL, &r), 200);
    json_t *t = body_json(&r);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t, "job")), "resnet50-v100-workers4");
    json_decref(t);
    tc_resp_free(&r);

    out = run_cli(t_small);
    char want[128];
    snprintf(want, sizeof(want), "duplicate of trace %lld", (long long)id_small);
    if (!out || !strstr(out, want))
        fprintf(stderr, "\n  reverie upload: %s (wanted '%s')\n", out ? out : "(null)", want);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want) : NULL);
    free(out);
}

int main(void)
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
    CU_pSuite s = CU_add_suite("api", NULL, NULL);
    CU_add_test(s, "health_and_public", test_health_and_public);
    CU_add_test(s, "auth", test_auth);
    CU_add_test(s, "upload", test_upload);
    CU_add_test(s, "upload_errors", test_upload_errors);
    CU_add_test(s, "list_get_original", test_list_get_original);
    CU_add_test(s, "timeline", test_timeline);
    CU_add_test(s, "whatif", test_whatif);
    CU_add_test(s, "same_answer_as_cli", test_same_answer_as_cli);
    CU_add_test(s, "whatif_platform_overheads", test_whatif_platform_overheads);
    CU_add_test(s, "whatif_target_host", test_whatif_target_host);
    CU_add_test(s, "platform_kernel_models", test_platform_kernel_models);
    CU_add_test(s, "catalogs", test_catalogs);
    CU_add_test(s, "fleet_inline_and_job", test_fleet_inline_and_job);
    CU_add_test(s, "restart_durability", test_restart_durability);
    CU_add_test(s, "two_replicas", test_two_replicas);
    CU_add_test(s, "cli_upload", test_cli_upload);
    CU_add_test(s, "delete_and_sigterm", test_delete_and_sigterm);
    unsigned failures = rv_test_run();
    suite_clean();
    return failures ? 1 : 0;
}
