/* The collector's output ingests into a real reveried (issue 7, "done
 * when"): synthetic CUPTI activity buffers built with the real CUDA 13
 * record structs go through the collector's own parser and Kineto writer;
 * the gzip file is uploaded with the collector's uploader (rv_uploader) to a
 * reveried with its embedded PostgreSQL, listed, read back with the
 * collector's platform metadata, and asked for what-ifs. A second trace goes
 * through the spool and `reverie upload --spool DIR`.
 *
 * Skips (77) when reveried/reverie are not built or no PostgreSQL can start.
 * Set RV_COLLECTOR_TRACE_OUT=path to keep the generated trace. */
#include <CUnit/Basic.h>
#include <cupti.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rv_ktrace.h"
#include "rv_meta.h"
#include "rv_records.h"
#include "rv_spool.h"
#include "rv_upload.h"
#include "common/http_client.h"
#include "common/rv_test_server.h"
#include "common/rv_test_util.h"
#include "cupti_buf.h"

#define BASE           1700000000000000000ull /* a realtime-ns epoch, like CUPTI's */
#define PID            5151
#define TID            5152
#define STEPS          6
#define OPS_PER_STEP   4
#define KERNELS_PER_OP 3

static rv_testsrv g_srv;
static char url[128];
static pid_t srv = -1;

/* ---- synthetic CUPTI buffers ----------------------------------------------------------------- */

static void kernel(rv_cbuf *b, const char *name, uint64_t start, uint64_t end, uint32_t corr)
{
    /* One wave on an H200: 132 blocks of 256 threads, 64 registers. */
    static const CUpti_ActivityKernel10 k = {.deviceId = 0,
                                             .contextId = 1,
                                             .streamId = 7,
                                             .gridX = 132,
                                             .gridY = 1,
                                             .gridZ = 1,
                                             .blockX = 256,
                                             .blockY = 1,
                                             .blockZ = 1,
                                             .registersPerThread = 64};
    rv_cbuf_kernel(b, &k, name, start, end, corr);
}

/* STEPS training steps: each a ProfilerStep range holding OPS_PER_STEP op
 * ranges that launch KERNELS_PER_OP kernels each, plus an input copy. The
 * kernels of step s scale by (1 + variant/10), so two variants differ in
 * content. The names must outlive the records (CUPTI's records point at
 * them), hence static storage. */
static rv_cbuf training_buffer(int variant)
{
    static char steps[STEPS][32];
    static const char *ops[OPS_PER_STEP] = {"aten::conv2d", "aten::relu", "aten::linear",
                                            "aten::add_"};
    static const char *kn[OPS_PER_STEP] = {"implicit_gemm_conv", "relu_kernel", "sm90_gemm",
                                           "add_kernel"};
    rv_cbuf b = rv_cbuf_new(1 << 16, PID, TID);
    uint32_t corr = 1, mid = 1;

    rv_cbuf_device(&b, "NVIDIA H200", 141ull << 30);

    for (int s = 0; s < STEPS; s++) {
        uint64_t t = BASE + (uint64_t)s * 2000000; /* 2 ms per step */
        uint64_t gpu = t + 20000;
        snprintf(steps[s], sizeof(steps[s]), "ProfilerStep#%d", s);
        rv_cbuf_marker(&b, 1, mid, t, steps[s]);
        uint32_t step_id = mid++;
        /* Input copy first. */
        rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, t + 5000, t + 9000, corr);
        rv_cbuf_memcpy_htod(&b, 8 << 20, t + 10000, t + 19000, 7, corr++);
        uint64_t cpu = t + 30000;
        for (int o = 0; o < OPS_PER_STEP; o++) {
            rv_cbuf_marker(&b, 1, mid, cpu, ops[o]);
            uint32_t op_id = mid++;
            cpu += 8000;
            for (int k = 0; k < KERNELS_PER_OP; k++) {
                uint64_t dur = (uint64_t)(60000 + 20000 * o) * (10 + (uint64_t)variant) / 10;
                rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, cpu, cpu + 6000,
                            corr);
                if (gpu < cpu + 9000)
                    gpu = cpu + 9000;
                kernel(&b, kn[o], gpu, gpu + dur, corr);
                corr++;
                gpu += dur + 2000;
                cpu += 6000 + 11000;
            }
            rv_cbuf_marker(&b, 0, op_id, cpu, NULL);
            cpu += 15000;
        }
        rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, cpu, gpu + 1000,
                    corr++);
        rv_cbuf_marker(&b, 0, step_id, gpu + 3000, NULL);
    }
    return b;
}

/* The collector's writer on the parsed buffer: gzip'ed Kineto JSON. */
static int make_trace(int variant, uint8_t **data, size_t *len)
{
    rv_cbuf b = training_buffer(variant);
    rv_recset *s = rv_recset_new();
    rv_meta m;
    rv_error err;
    int rc = -1;

    memset(&m, 0, sizeof(m));
    snprintf(m.gpu, sizeof(m.gpu), "NVIDIA H200");
    snprintf(m.cpu, sizeof(m.cpu), "Synthetic Xeon @ 2.0GHz");
    snprintf(m.driver, sizeof(m.driver), "580.65.06");
    snprintf(m.cuda, sizeof(m.cuda), "13.0");
    snprintf(m.framework, sizeof(m.framework), "pytorch");
    snprintf(m.job, sizeof(m.job), "collector-ingest");
    snprintf(m.hostname, sizeof(m.hostname), "test-host");
    snprintf(m.backend, sizeof(m.backend), "nccl");
    m.pid = PID;
    m.rank = 1;
    m.world_size = 2;
    m.local_rank = 1;
    m.ngpus = 1;
    snprintf(m.gpus[0].name, sizeof(m.gpus[0].name), "NVIDIA H200");
    m.gpus[0].num_sms = 132;
    m.gpus[0].total_mem = 141ull << 30;
    m.gpus[0].power_limit_w = 700;
    m.gpus[0].power_min_w = 200;
    m.gpus[0].power_max_w = 700;
    m.gpus[0].power_default_w = 700;
    rv_error_clear(&err);
    if (s && rv_records_parse_buffer(s, b.p, b.len) > 0 &&
        rv_ktrace_write(s, &m, NULL, data, len, NULL, &err) == 0)
        rc = 0;
    else
        fprintf(stderr, "collector writer: %s\n", err.message);
    rv_recset_free(s);
    free(b.p);
    return rc;
}

/* ---- the server ---------------------------------------------------------------------------- */

static long get_json(const char *path, json_t **out)
{
    char u[512];
    tc_resp r;

    snprintf(u, sizeof(u), "%s%s", url, path);
    long st = tc_get(u, NULL, &r);
    if (st < 0)
        return st;
    *out = json_loads(r.body ? r.body : "", 0, NULL);
    tc_resp_free(&r);
    return st;
}

static long post_json(const char *path, const char *body, json_t **out)
{
    char u[512];
    tc_resp r;
    tc_req q = {.url = u, .method = "POST", .ctype = "application/json", .body = body};

    snprintf(u, sizeof(u), "%s%s", url, path);
    q.len = strlen(body);
    if (tc_do(&q, &r) != 0)
        return -1;
    if (r.status != 200)
        fprintf(stderr, "\n    POST %s %s -> %ld %s", path, body, r.status, r.body);
    *out = json_loads(r.body ? r.body : "", 0, NULL);
    tc_resp_free(&r);
    return r.status;
}

static int suite_init(void)
{
    static const char *const args[] = {"--workers", "2", "--http-threads", "2", NULL};

    int rc = rv_testsrv_setup(&g_srv, "rv_collector_ingest");
    if (rc != 0)
        return rc;
    int port = rv_testsrv_free_port();
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    srv = rv_testsrv_spawn(&g_srv, port, args);
    if (rv_testsrv_wait(port, "/readyz", NULL, 200, 120, &srv) == 0)
        return 0;
    fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?); log in %s\n", g_srv.home);
    return 77;
}

static void suite_clean(void)
{
    rv_testsrv_stop(&srv, SIGTERM);
    rv_testsrv_teardown(&g_srv);
}

/* ---- tests ----------------------------------------------------------------------------------- */

static int64_t uploaded_id;

static void test_upload_with_uploader(void)
{
    uint8_t *data = NULL;
    size_t len = 0;
    rv_upload_opts o = {.server = url, .max_attempts = 2, .backoff_ms = 100, .quiet = 1};
    rv_error err;
    long status = 0;

    CU_ASSERT_EQUAL_FATAL(make_trace(0, &data, &len), 0);
    CU_ASSERT_TRUE(len > 100 && data[0] == 0x1f && data[1] == 0x8b);
    const char *keep = getenv("RV_COLLECTOR_TRACE_OUT");
    if (keep && rv_spool_write_file(keep, data, len, &err) != 0)
        fprintf(stderr, "\n    cannot keep the trace in %s: %s", keep, err.message);
    rv_error_clear(&err);
    int rc = rv_upload_post(&o, "collector-ingest", 1, data, len, &status, &err);
    if (rc != 0)
        fprintf(stderr, "\n    upload: %s", err.message);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(status, 201);
    /* The same bytes again: the server answers 200, which is a success too. */
    CU_ASSERT_EQUAL(rv_upload_post(&o, "collector-ingest", 1, data, len, &status, &err), 0);
    CU_ASSERT_EQUAL(status, 200);
    free(data);

    json_t *j = NULL;
    CU_ASSERT_EQUAL_FATAL(get_json("/v1/traces?job=collector-ingest", &j), 200);
    json_t *traces = json_object_get(j, "traces");
    CU_ASSERT_EQUAL(json_array_size(traces), 1);
    uploaded_id = (int64_t)json_integer_value(json_object_get(json_array_get(traces, 0), "id"));
    json_decref(j);
    CU_ASSERT_TRUE(uploaded_id > 0);
}

static void test_platform_metadata(void)
{
    char p[64];
    json_t *j = NULL;

    CU_ASSERT_TRUE_FATAL(uploaded_id > 0);
    snprintf(p, sizeof(p), "/v1/traces/%lld", (long long)uploaded_id);
    CU_ASSERT_EQUAL_FATAL(get_json(p, &j), 200);
    json_t *pl = json_object_get(j, "platform");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "source_format")), "collector");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "job")), "collector-ingest");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "rank")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "world_size")), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(pl, "gpu_model")), "NVIDIA H200");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(pl, "cpu_model")),
                           "Synthetic Xeon @ 2.0GHz");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(pl, "driver")), "580.65.06");
    const char *rt = json_string_value(json_object_get(pl, "runtime_version"));
    CU_ASSERT_PTR_NOT_NULL(rt && strstr(rt, "13.0") ? rt : NULL);
    const char *fw = json_string_value(json_object_get(pl, "framework"));
    CU_ASSERT_PTR_NOT_NULL(fw && strstr(fw, "pytorch") ? fw : NULL);
    /* What the reader kept: every kernel and launch, STEPS iterations. */
    json_t *sum = json_object_get(j, "summary");
    json_t *cats = json_object_get(sum, "by_category");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(cats, "kernel")),
                    STEPS * OPS_PER_STEP * KERNELS_PER_OP);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "iterations")), STEPS);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(
                               json_array_get(json_object_get(sum, "devices"), 0), "name")),
                           "NVIDIA H200");
    double meas = json_number_value(json_object_get(j, "measured_us"));
    fprintf(stderr, "\n    collector trace %lld: platform %s / %s / %s, measured %.1f us",
            (long long)uploaded_id, json_string_value(json_object_get(pl, "gpu_model")),
            json_string_value(json_object_get(pl, "driver")), rt ? rt : "?", meas);
    CU_ASSERT_TRUE(meas > 1000 && meas < 2000);
    json_decref(j);
}

static void test_whatif(void)
{
    char p[64];
    json_t *j = NULL;

    CU_ASSERT_TRUE_FATAL(uploaded_id > 0);
    snprintf(p, sizeof(p), "/v1/traces/%lld/whatif", (long long)uploaded_id);
    CU_ASSERT_EQUAL(post_json(p, "{}", &j), 200);
    double meas = json_number_value(json_object_get(j, "measured_us"));
    double base = json_number_value(json_object_get(j, "baseline_us"));
    fprintf(stderr, "\n    replay: measured %.1f us, simulated %.1f us", meas, base);
    CU_ASSERT_TRUE(meas > 0 && base > 0 && base > 0.9 * meas && base < 1.1 * meas);
    json_decref(j);
    /* Kernels twice as fast: the GPU-bound step must shrink. */
    CU_ASSERT_EQUAL(post_json(p,
                              "{\"optimizations\":[{\"kind\":\"scale\",\"select\":{\"kind\":"
                              "\"kernel\"},\"factor\":0.5}]}",
                              &j),
                    200);
    double sp = json_number_value(json_object_get(j, "speedup"));
    fprintf(stderr, ", kernels x0.5: speedup %.3f", sp);
    CU_ASSERT_TRUE(sp > 1.2);
    json_decref(j);
    /* The platform's statistics come from this very trace. */
    CU_ASSERT_EQUAL(post_json(p, "{\"host_overheads\":\"platform\"}", &j), 200);
    json_t *a0 = json_array_get(json_object_get(j, "applied"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a0, "kind")), "overheads");
    json_decref(j);
}

static void test_spool_upload(void)
{
    char dir[1200], path[1400], cmd[4000];
    uint8_t *data = NULL;
    size_t len = 0;
    rv_error err;

    /* The collector spools when the server is down; the CLI sends it later. */
    CU_ASSERT_EQUAL_FATAL(make_trace(3, &data, &len), 0);
    snprintf(dir, sizeof(dir), "%s/spool-test", g_srv.home);
    rv_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(
        rv_spool_write(dir, "collector-spooled", 0, data, len, path, sizeof(path), &err), 0);
    free(data);
    snprintf(cmd, sizeof(cmd),
             "'%s/reverie' upload --spool '%s' --server '%s' >'%s/spool.log' 2>&1", g_srv.bin_dir,
             dir, url, g_srv.home);
    int rc = system(cmd);
    CU_ASSERT_TRUE(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    /* Sent files are deleted. */
    DIR *d = opendir(dir);
    int left = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        left += de->d_name[0] != '.';
    if (d)
        closedir(d);
    CU_ASSERT_EQUAL(left, 0);
    json_t *j = NULL;
    CU_ASSERT_EQUAL_FATAL(get_json("/v1/traces?job=collector-spooled", &j), 200);
    json_t *t = json_array_get(json_object_get(j, "traces"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "traces")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(t, "rank")), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t, "source_format")), "collector");
    json_decref(j);
    CU_ASSERT_EQUAL_FATAL(get_json("/v1/traces", &j), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "traces")), 2);
    json_decref(j);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    int rc = suite_init();
    if (rc != 0) {
        suite_clean();
        CU_cleanup_registry();
        return rc == 77 ? 77 : 1;
    }
    CU_pSuite s = CU_add_suite("collector_ingest", NULL, NULL);
    CU_add_test(s, "upload with the collector's uploader", test_upload_with_uploader);
    CU_add_test(s, "platform metadata from the reverie object", test_platform_metadata);
    CU_add_test(s, "what-ifs on the collector trace", test_whatif);
    CU_add_test(s, "spool, then reverie upload --spool", test_spool_upload);
    unsigned failures = rv_test_run();
    suite_clean();
    return failures ? 1 : 0;
}
