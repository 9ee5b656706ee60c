/* Execution traces through the API end to end (issue 18): a real reveried
 * with its embedded PostgreSQL. An ET uploaded alone (found by content, or
 * ?kind=et) is stored as a trace of its own whose what-ifs need a GPU and
 * answer with the ET's FLOPs and the warning et_only_modelled; an ET
 * attached to its stored Kineto trace (PUT /v1/traces/{id}/et) gives that
 * trace's later answers the ET's shapes (the cached answer from before is
 * dropped); a second ET, an unknown trace, an ET-alone trace and a broken
 * ET are refused. Skips (77) when reveried, the traces or PostgreSQL are
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
static int64_t g_et_alone = -1;

static long req(const char *method, const char *path, const char *body, const char *file,
                json_t **out)
{
    char u[512];
    tc_req q = {0};
    tc_resp r;

    snprintf(u, sizeof(u), "http://127.0.0.1:%d%s", g_port, path);
    q.url = u;
    q.method = method;
    q.ctype = file ? "application/gzip" : body ? "application/json" : NULL;
    q.body = body;
    q.len = body ? strlen(body) : 0;
    q.file = file;
    if (tc_do(&q, &r) != 0)
        return -1;
    if (out)
        *out = json_loads(r.body ? r.body : "", 0, NULL);
    if (r.status >= 500)
        fprintf(stderr, "\n    %s %s -> %ld %s", method ? method : "GET", path, r.status, r.body);
    long st = r.status;
    tc_resp_free(&r);
    return st;
}

static const char *shared(const char *rel)
{
    static char p[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s/%s", g_root, rel);
    return p[k];
}

static int has_warning(const json_t *o, const char *code)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(o, "warnings"), i, w)
    {
        const char *c = json_string_value(json_object_get(w, "code"));
        if (c && !strcmp(c, code))
            return 1;
    }
    return 0;
}

static double flops(const json_t *o)
{
    return json_number_value(json_object_get(json_object_get(o, "flops"), "per_step"));
}

static const char *flops_source(const json_t *o)
{
    const char *s = json_string_value(json_object_get(json_object_get(o, "flops"), "source"));
    return s ? s : "";
}

static const char *error_field(const json_t *o)
{
    const char *s = json_string_value(json_object_get(json_object_get(o, "error"), "field"));
    return s ? s : "";
}

static const char *error_message(const json_t *o)
{
    const char *s = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
    return s ? s : "";
}

/* A counter of GET /metrics; -1 when absent. */
static double metric(const char *name)
{
    char u[128], key[128];
    tc_req q = {0};
    tc_resp r;
    double v = -1;
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/metrics", g_port);
    q.url = u;
    if (tc_do(&q, &r) != 0)
        return -1;
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *at = r.body ? strstr(r.body, key) : NULL;
    if (at)
        v = strtod(at + strlen(key), NULL);
    tc_resp_free(&r);
    return v;
}

static long whatif(int64_t id, const char *doc, json_t **out)
{
    char p[128];
    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)id);
    return req("POST", p, doc, NULL, out);
}

static void test_et_alone(void)
{
    json_t *j = NULL;
    /* Found by content: the Kineto reader says it is an ET. */
    CU_ASSERT_EQUAL_FATAL(req("POST", "/v1/traces", NULL, shared("hta/simple-add.et.json.gz"), &j),
                          201);
    g_et_alone = (int64_t)json_integer_value(json_object_get(j, "id"));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "source_format")), "et");
    /* Modelled host times are no platform's overhead statistics. */
    CU_ASSERT_EQUAL(
        json_integer_value(json_object_get(json_object_get(j, "summary"), "overhead_samples")), 0);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(j, "summary"), "overhead_samples"));
    json_decref(j);
    /* Uploaded without a GPU: a what-if must name one. */
    CU_ASSERT_EQUAL(whatif(g_et_alone, "{}", &j), 400);
    CU_ASSERT_STRING_EQUAL(error_field(j), "gpu");
    json_decref(j);
    CU_ASSERT_EQUAL(whatif(g_et_alone, "{\"gpu\": \"A100\"}", &j), 200);
    printf("\n    simple-add ET alone on A100: %.0f FLOP/step, step %.1f us", flops(j),
           json_number_value(json_object_get(j, "predicted_us")));
    CU_ASSERT_EQUAL(flops(j), 131072.0);
    CU_ASSERT(has_warning(j, "et_only_modelled"));
    double a100 = json_number_value(json_object_get(j, "predicted_us"));
    json_decref(j);
    /* Another GPU models it again (its own answer, not the A100's). */
    CU_ASSERT_EQUAL(whatif(g_et_alone, "{\"gpu\": \"T4\"}", &j), 200);
    CU_ASSERT(has_warning(j, "et_only_modelled"));
    double t4 = json_number_value(json_object_get(j, "predicted_us"));
    CU_ASSERT(t4 != a100);
    json_decref(j);
    /* The graph modelled on the A100 is kept like any loaded trace: a new
     * question on it (another power cap, not an answer in the cache)
     * loads the stored trace and the A100 model from the graph cache, and
     * builds nothing. */
    double hits0 = metric("reveried_graph_cache_hits_total");
    double sims0 = metric("reveried_simulations_total");
    CU_ASSERT_EQUAL(whatif(g_et_alone, "{\"gpu\": \"A100\", \"power_limit_w\": 250}", &j), 200);
    json_decref(j);
    double hits1 = metric("reveried_graph_cache_hits_total");
    double sims1 = metric("reveried_simulations_total");
    printf("\n    ET alone on A100 again: graph cache hits +%.0f, simulations +%.0f", hits1 - hits0,
           sims1 - sims0);
    CU_ASSERT(hits0 >= 0 && hits1 - hits0 >= 2);
    /* Fleet rows model it the same way: each scenario's GPU, the same
     * figures as the single what-ifs. */
    char body[256];
    snprintf(body, sizeof(body),
             "{\"select\": {\"trace_ids\": [%lld]}, \"scenarios\": [{\"gpu\": \"A100\"}, "
             "{\"gpu\": \"T4\"}]}",
             (long long)g_et_alone);
    CU_ASSERT_EQUAL(req("POST", "/v1/fleet/whatif", body, NULL, &j), 200);
    json_t *sc = json_object_get(j, "scenarios");
    double fa = json_number_value(json_object_get(
        json_array_get(json_object_get(json_array_get(sc, 0), "rows"), 0), "predicted_us"));
    double ft = json_number_value(json_object_get(
        json_array_get(json_object_get(json_array_get(sc, 1), "rows"), 0), "predicted_us"));
    printf("\n    fleet on the ET alone: A100 %.1f us (what-if %.1f), T4 %.1f us (what-if %.1f)",
           fa, a100, ft, t4);
    CU_ASSERT_DOUBLE_EQUAL(fa, a100, 1e-6 * a100);
    CU_ASSERT_DOUBLE_EQUAL(ft, t4, 1e-6 * t4);
    json_decref(j);
    /* No Kineto trace to rewrite: the export says so. */
    char p[96];
    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif/export", (long long)g_et_alone);
    CU_ASSERT_EQUAL(req("POST", p, "{\"gpu\": \"A100\"}", NULL, &j), 409);
    CU_ASSERT_STRING_EQUAL(error_field(j), "id");
    json_decref(j);
    /* ?kind=et with the GPU named at upload: what-ifs need none. */
    CU_ASSERT_EQUAL_FATAL(req("POST", "/v1/traces?kind=et&gpu=H100", NULL,
                              shared("param/dlrm-8rank/worker0.et.json.gz"), &j),
                          201);
    int64_t dlrm = (int64_t)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    CU_ASSERT_EQUAL(whatif(dlrm, "{}", &j), 200);
    printf("\n    DLRM worker0 ET alone on H100: %.6g FLOP/step", flops(j));
    CU_ASSERT(flops(j) > 63.6e6 && flops(j) < 63.9e6);
    CU_ASSERT(has_warning(j, "et_only_modelled"));
    json_decref(j);
    /* The platform's kernel models: none stored of a V100 yet, refused;
     * once rank 1's Kineto trace (V100, op shapes) is stored, rank 0's ET
     * alone on a V100 takes the efficiencies its kernels measured. */
    const char *fit = "{\"gpu\": \"V100-SXM2\", \"kernel_models\": \"platform\"}";
    CU_ASSERT_EQUAL(whatif(dlrm, fit, &j), 400);
    CU_ASSERT_STRING_EQUAL(error_field(j), "kernel_models");
    json_decref(j);
    CU_ASSERT_EQUAL(whatif(dlrm, "{\"gpu\": \"V100-SXM2\"}", &j), 200);
    double dflt = json_number_value(json_object_get(
        json_object_get(json_object_get(json_object_get(j, "breakdown"), "baseline"), "gpu"),
        "compute_us"));
    json_decref(j);
    CU_ASSERT_EQUAL_FATAL(req("POST", "/v1/traces?job=dlrm-fit", NULL,
                              shared("param/dlrm-8rank/worker1.kineto.json.gz"), &j),
                          201);
    json_decref(j);
    CU_ASSERT_EQUAL(whatif(dlrm, fit, &j), 200);
    double fitted = json_number_value(json_object_get(
        json_object_get(json_object_get(json_object_get(j, "breakdown"), "baseline"), "gpu"),
        "compute_us"));
    const char *msg = "";
    size_t wi;
    json_t *wv;
    json_array_foreach(
        json_object_get(j, "warnings"), wi,
        wv) if (!strcmp(json_string_value(json_object_get(wv, "code")), "et_only_modelled")) msg =
        json_string_value(json_object_get(wv, "message"));
    printf("\n    DLRM worker0 ET alone on V100: kernels %.0f us at 50%% of the roofline, %.0f us "
           "at rank 1's fitted efficiencies (measured 1,053 us)",
           dflt, fitted);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "fitted on measured traces"));
    CU_ASSERT(fitted > dflt * 1.2);
    json_decref(j);
    /* A broken ET: the reader's reason and place. */
    CU_ASSERT_EQUAL(
        req("POST", "/v1/traces?kind=et", "{\"schema\": \"1.0.1\", \"nodes\": [{}]}", NULL, &j),
        400);
    CU_ASSERT_PTR_NOT_NULL(strstr(error_message(j), "node"));
    json_decref(j);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces?kind=xml", "{}", NULL, &j), 400);
    json_decref(j);
}

static void test_et_attached(void)
{
    json_t *j = NULL;
    char p[128];
    CU_ASSERT_EQUAL_FATAL(
        req("POST", "/v1/traces", NULL, shared("hta/simple-add.kineto.json.gz"), &j), 201);
    int64_t id = (int64_t)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    /* Before: the Kineto trace alone (and the answer is cached). */
    CU_ASSERT_EQUAL(whatif(id, "{}", &j), 200);
    CU_ASSERT_STRING_NOT_EQUAL(flops_source(j), "execution_trace");
    CU_ASSERT(!has_warning(j, "et_only_modelled"));
    json_decref(j);
    snprintf(p, sizeof(p), "/v1/traces/%lld/et", (long long)id);
    /* A broken ET is refused with the reader's reason; nothing is stored. */
    CU_ASSERT_EQUAL(req("PUT", p, "{\"schema\": \"1.0.1\"}", NULL, &j), 400);
    CU_ASSERT_STRING_EQUAL(error_field(j), "et");
    json_decref(j);
    CU_ASSERT_EQUAL(req("PUT", p, NULL, shared("hta/simple-add.kineto.json.gz"), &j), 400);
    json_decref(j);
    CU_ASSERT_EQUAL(req("PUT", p, NULL, shared("hta/simple-add.et.json.gz"), &j), 200);
    const json_t *et = json_object_get(j, "et");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(et, "join_method")), "id");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(et, "gpu_tasks_attributed")), 4);
    json_decref(j);
    /* After: the same what-if answers with the ET's shapes. */
    CU_ASSERT_EQUAL(whatif(id, "{}", &j), 200);
    printf("\n    simple-add Kineto + ET: %.0f FLOP/step (%s)", flops(j), flops_source(j));
    CU_ASSERT_EQUAL(flops(j), 131072.0);
    CU_ASSERT_STRING_EQUAL(flops_source(j), "execution_trace");
    CU_ASSERT(!has_warning(j, "et_only_modelled"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "tasks")) > 0, 1);
    json_decref(j);
    /* A second ET, an unknown trace, an ET-alone trace. */
    CU_ASSERT_EQUAL(req("PUT", p, NULL, shared("hta/simple-add.et.json.gz"), &j), 409);
    json_decref(j);
    CU_ASSERT_EQUAL(
        req("PUT", "/v1/traces/987654321/et", NULL, shared("hta/simple-add.et.json.gz"), &j), 404);
    json_decref(j);
    if (g_et_alone > 0) {
        snprintf(p, sizeof(p), "/v1/traces/%lld/et", (long long)g_et_alone);
        CU_ASSERT_EQUAL(req("PUT", p, NULL, shared("hta/simple-add.et.json.gz"), &j), 409);
        json_decref(j);
    }
    /* Deleting the trace takes its ET along. */
    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)id);
    CU_ASSERT_EQUAL(req("DELETE", p, NULL, NULL, NULL), 200);
}

int main(void)
{
    const char *t = rv_test_shared_traces("hta/simple-add.et.json.gz");
    if (!t) {
        printf("skip: the shared traces (RV_SHARED_TRACES) are not available\n");
        return 77;
    }
    snprintf(g_root, sizeof(g_root), "%s", t);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    int rc = rv_testsrv_setup(&g_srv, "rv_et_test");
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
    CU_pSuite s = CU_add_suite("et_api", NULL, NULL);
    CU_add_test(s, "an ET alone: upload, what-if needs a GPU", test_et_alone);
    CU_add_test(s, "an ET attached to its Kineto trace", test_et_attached);
    unsigned failures = rv_test_run();
    rv_testsrv_stop(&g_pid, SIGTERM);
    rv_testsrv_teardown(&g_srv);
    return failures ? 1 : 0;
}
