/* POST /v1/traces/{id}/whatif/export against a real reveried and
 * PostgreSQL: the predicted run of a stored trace comes back as a Kineto
 * trace that the project's reader measures at the predicted step, for a
 * trace stored as received (gzip) and one the server wrapped (plain JSON);
 * ?run=baseline gives the baseline; bad parameters and unknown traces get
 * the error shape. Also the diff cache (server/rv_api_diff.c): a repeated
 * diff is a cache hit with the same bytes, and a diff whose other trace
 * was deleted is computed again (404), not served from the cache. Skips
 * (77) without the public traces or PostgreSQL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CUnit/Basic.h>
#include <jansson.h>
#include <zlib.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "common/http_client.h"
#include "common/rv_test_server.h"
#include "common/rv_test_util.h"

static rv_testsrv g_srv;
static pid_t g_pid = -1;
static int g_port;
static char g_gz[1200], g_ns[1200];
static int64_t g_id_gz, g_id_plain;

static long post(const char *path, const char *ctype, const void *body, size_t len,
                 const char *file, tc_resp *out)
{
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", g_port, path);
    tc_req q = {
        .method = "POST", .url = url, .ctype = ctype, .body = body, .len = len, .file = file};
    if (tc_do(&q, out) != 0) {
        memset(out, 0, sizeof(*out));
        return -1;
    }
    return out->status;
}

static int64_t upload(const char *job, const char *ctype, const void *body, size_t len,
                      const char *file)
{
    tc_resp r;
    char path[128];
    snprintf(path, sizeof(path), "/v1/traces?job=%s", job);
    long st = post(path, ctype, body, len, file, &r);
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    int64_t id = (int64_t)json_integer_value(json_object_get(j, "id"));
    if (st != 201 || id <= 0)
        fprintf(stderr, "upload %s: %ld %s\n", job, st, r.body ? r.body : "");
    json_decref(j);
    tc_resp_free(&r);
    return st == 201 ? id : -1;
}

/* The whole of a gzip file, inflated (new), for a plain-JSON upload. */
static char *gunzip_file(const char *path, size_t *len)
{
    gzFile gz = gzopen(path, "rb");
    size_t cap = 1 << 24, n = 0;
    char *buf = malloc(cap);
    int got;
    while (gz && buf && (got = gzread(gz, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)got;
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                break;
            buf = bigger;
            cap *= 2;
        }
    }
    if (gz)
        gzclose(gz);
    *len = n;
    return buf;
}

/* A what-if answer's figure. */
static double whatif(int64_t id, const char *doc, const char *key)
{
    tc_resp r;
    char path[128];
    snprintf(path, sizeof(path), "/v1/traces/%lld/whatif", (long long)id);
    long st = post(path, "application/json", doc, strlen(doc), NULL, &r);
    CU_ASSERT_EQUAL(st, 200);
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    double v = json_number_value(json_object_get(j, key));
    json_decref(j);
    tc_resp_free(&r);
    return v;
}

/* The export's measured step as `reverie simulate` reports it. */
static double export_measured(int64_t id, const char *doc, const char *query)
{
    tc_resp r;
    char path[160];
    rv_error err;
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_sim *s = NULL;
    rv_run_result *res = NULL;
    double m = -1;
    snprintf(path, sizeof(path), "/v1/traces/%lld/whatif/export%s", (long long)id, query);
    long st = post(path, "application/json", doc, strlen(doc), NULL, &r);
    CU_ASSERT_EQUAL(st, 200);
    if (st != 200) {
        fprintf(stderr, "export: %ld %s\n", st, r.body ? r.body : "");
        tc_resp_free(&r);
        return -1;
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"reverieExport\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"traceEvents\""));
    if (rv_kineto_read_buffer(r.body, r.len, NULL, &t, &err) == 0 &&
        rv_graph_build(t, NULL, &g, &err) == 0 &&
        rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &err) == 0 &&
        rv_run(g, s, NULL, NULL, &res, &err) == 0)
        m = res->sum.measured_us;
    else
        fprintf(stderr, "export read back: %s\n", err.message);
    rv_run_result_free(res);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
    tc_resp_free(&r);
    return m;
}

static void check(int64_t id, const char *doc)
{
    double p = whatif(id, doc, "predicted_us");
    double m = export_measured(id, doc, "");
    printf("\n    trace %lld %s: predicted %.1f us, export measures %.1f us", (long long)id, doc, p,
           m);
    CU_ASSERT(p > 0 && fabs(m - p) <= 0.02 * p);
}

static void test_predicted(void)
{
    check(g_id_gz, "{\"power_limit_frac\":0.6}");
    check(g_id_gz, "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":2}]}");
    check(g_id_plain, "{\"power_limit_frac\":0.7}");
}

static void test_baseline(void)
{
    const char *doc = "{\"power_limit_frac\":0.7}";
    double b = whatif(g_id_plain, doc, "baseline_us");
    double m = export_measured(g_id_plain, doc, "?run=baseline");
    printf("\n    baseline %.1f us, export measures %.1f us", b, m);
    CU_ASSERT(b > 0 && fabs(m - b) <= 0.02 * b);
}

static void test_errors(void)
{
    tc_resp r;
    char path[128];
    snprintf(path, sizeof(path), "/v1/traces/%lld/whatif/export?run=later", (long long)g_id_gz);
    CU_ASSERT_EQUAL(post(path, "application/json", "{}", 2, NULL, &r), 400);
    CU_ASSERT_PTR_NOT_NULL(r.body && strstr(r.body, "\"field\":\"run\""));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(post("/v1/traces/999999/whatif/export", "application/json", "{}", 2, NULL, &r),
                    404);
    CU_ASSERT_PTR_NOT_NULL(r.body && strstr(r.body, "trace 999999 does not exist"));
    tc_resp_free(&r);
    snprintf(path, sizeof(path), "/v1/traces/%lld/whatif/export", (long long)g_id_gz);
    const char *bad = "{\"optimizations\":[{\"kind\":\"amq\"}]}";
    CU_ASSERT_EQUAL(post(path, "application/json", bad, strlen(bad), NULL, &r), 400);
    tc_resp_free(&r);
}

static double metric(const char *name)
{
    char url[128];
    tc_resp r;
    double v = -1;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", g_port);
    if (tc_get(url, NULL, &r) == 200 && r.body) {
        const char *p = r.body;
        size_t n = strlen(name);
        while ((p = strstr(p, name)) != NULL) {
            if ((p == r.body || p[-1] == '\n') && p[n] == ' ') {
                v = strtod(p + n + 1, NULL);
                break;
            }
            p += n;
        }
    }
    tc_resp_free(&r);
    return v;
}

static long request(const char *method, const char *path, const char *body, tc_resp *out)
{
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", g_port, path);
    tc_req q = {.method = method, .url = url};
    if (body) {
        q.ctype = "application/json";
        q.body = body;
        q.len = strlen(body);
    }
    if (tc_do(&q, out) != 0) {
        memset(out, 0, sizeof(*out));
        return -1;
    }
    return out->status;
}

/* The same diff twice: the second from the cache, byte for byte. */
static void same_twice(const char *method, const char *path, const char *body)
{
    tc_resp a, b;
    struct timespec t1, t2;
    double h0 = metric("reveried_whatif_cache_hits_total");
    CU_ASSERT_EQUAL(request(method, path, body, &a), 200);
    double h1 = metric("reveried_whatif_cache_hits_total");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CU_ASSERT_EQUAL(request(method, path, body, &b), 200);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    double h2 = metric("reveried_whatif_cache_hits_total");
    printf("\n    %s %s: hits %.0f -> %.0f -> %.0f, second answer in %.1f ms", method, path, h0, h1,
           h2, (double)(t2.tv_sec - t1.tv_sec) * 1e3 + (double)(t2.tv_nsec - t1.tv_nsec) / 1e6);
    CU_ASSERT_EQUAL(h1, h0);
    CU_ASSERT_EQUAL(h2, h1 + 1);
    CU_ASSERT(a.body && b.body && a.len == b.len && memcmp(a.body, b.body, a.len) == 0);
    CU_ASSERT_PTR_NOT_NULL(a.body && strstr(a.body, "\"ops\""));
    tc_resp_free(&a);
    tc_resp_free(&b);
}

static void test_diff_cache(void)
{
    char path[128];
    int64_t other = upload("diff-other", "application/gzip", NULL, 0, g_ns);
    CU_ASSERT_FATAL(other > 0);
    snprintf(path, sizeof(path), "/v1/traces/%lld/diff?with=%lld&top=5", (long long)g_id_plain,
             (long long)other);
    same_twice("GET", path, NULL);
    snprintf(path, sizeof(path), "/v1/traces/%lld/diff?top=5", (long long)g_id_plain);
    same_twice("POST", path, "{\"power_limit_frac\":0.7}");
    /* Another top is another answer. */
    tc_resp r;
    double h0 = metric("reveried_whatif_cache_hits_total");
    snprintf(path, sizeof(path), "/v1/traces/%lld/diff?top=6", (long long)g_id_plain);
    CU_ASSERT_EQUAL(request("POST", path, "{\"power_limit_frac\":0.7}", &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(metric("reveried_whatif_cache_hits_total"), h0);
    /* The other trace deleted: no stale answer. */
    snprintf(path, sizeof(path), "/v1/traces/%lld", (long long)other);
    CU_ASSERT_EQUAL(request("DELETE", path, NULL, &r), 200);
    tc_resp_free(&r);
    snprintf(path, sizeof(path), "/v1/traces/%lld/diff?with=%lld&top=5", (long long)g_id_plain,
             (long long)other);
    CU_ASSERT_EQUAL(request("GET", path, NULL, &r), 404);
    tc_resp_free(&r);
}

static int suite_init(void)
{
    const char *t = rv_test_shared_traces("hta/v100-1rank-ns-resolution.json.gz");
    if (!t) {
        fprintf(stderr, "skip: the public traces (RV_SHARED_TRACES) are missing\n");
        return 77;
    }
    /* Mid-sized and tiny, so that the sanitizer stages stay quick. */
    snprintf(g_gz, sizeof(g_gz), "%s/hta/v100-1rank-ns-resolution.json.gz", t);
    snprintf(g_ns, sizeof(g_ns), "%s/hta/cuda-event-sync.json.gz", t);
    int rc = rv_testsrv_setup(&g_srv, "rv_export_test");
    if (rc != 0)
        return rc;
    const char *args[] = {"--workers", "2", "--http-threads", "2", NULL};
    g_port = rv_testsrv_free_port();
    g_pid = rv_testsrv_spawn(&g_srv, g_port, args);
    if (rv_testsrv_wait(g_port, "/readyz", NULL, 200, 60, &g_pid) != 0) {
        if (g_pid < 0) {
            fprintf(stderr, "reveried exited at start; log in %s\n", g_srv.home);
            return 1;
        }
        fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?)\n");
        return 77;
    }
    g_id_gz = upload("export-gz", "application/gzip", NULL, 0, g_gz);
    size_t len = 0;
    char *plain = gunzip_file(g_ns, &len);
    g_id_plain = plain && len ? upload("export-plain", "application/json", plain, len, NULL) : -1;
    free(plain);
    return g_id_gz > 0 && g_id_plain > 0 ? 0 : 1;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    int rc = suite_init();
    if (rc != 0) {
        if (rc != 77)
            fprintf(stderr, "setup failed; logs in %s\n", g_srv.home);
        rv_testsrv_stop(&g_pid, 15);
        rv_testsrv_teardown(&g_srv);
        return rc == 77 ? 77 : 1;
    }
    CU_pSuite s = CU_add_suite("export", NULL, NULL);
    CU_add_test(s, "the predicted run reads back at the predicted step", test_predicted);
    CU_add_test(s, "run=baseline gives the baseline", test_baseline);
    CU_add_test(s, "bad parameters and unknown traces", test_errors);
    CU_add_test(s, "diffs are cached, not served stale", test_diff_cache);
    unsigned failures = rv_test_run();
    rv_testsrv_stop(&g_pid, 15);
    rv_testsrv_teardown(&g_srv);
    return failures ? 1 : 0;
}
