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
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rv_ktrace.h"
#include "rv_meta.h"
#include "rv_pgembed.h"
#include "rv_records.h"
#include "rv_spool.h"
#include "rv_upload.h"
#include "server/http_client.h"

#define BASE 1700000000000000000ull /* a realtime-ns epoch, like CUPTI's */
#define PID 5151
#define TID 5152
#define STEPS 6
#define OPS_PER_STEP 4
#define KERNELS_PER_OP 3

static char home[] = "/tmp/rv_collector_ingest_XXXXXX";
static char bin_dir[1024], url[128];
static pid_t srv = -1;
static int port;

/* ---- synthetic CUPTI buffers ----------------------------------------------------------------- */

typedef struct sbuf {
    uint8_t *p;
    size_t len, cap;
} sbuf;

static void put(sbuf *b, const void *rec, size_t size)
{
    if (b->len + size > b->cap) {
        size_t cap = (b->len + size) * 2 + 4096;
        uint8_t *p = aligned_alloc(8, cap);
        CU_ASSERT_FATAL(p != NULL);
        memcpy(p, b->p, b->len);
        free(b->p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, rec, size);
    b->len += size;
}

static void api(sbuf *b, uint32_t cbid, uint64_t start, uint64_t end, uint32_t corr)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = cbid;
    a.start = start;
    a.end = end;
    a.processId = PID;
    a.threadId = TID;
    a.correlationId = corr;
    put(b, &a, sizeof(a));
}

static void kernel(sbuf *b, const char *name, uint64_t start, uint64_t end, uint32_t corr)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = start;
    k.end = end;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.gridX = 132;
    k.gridY = k.gridZ = 1;
    k.blockX = 256;
    k.blockY = k.blockZ = 1;
    k.registersPerThread = 64;
    k.correlationId = corr;
    k.name = name;
    put(b, &k, sizeof(k));
}

static void marker(sbuf *b, int start, uint32_t id, uint64_t ts, const char *name)
{
    CUpti_ActivityMarker2 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = start ? CUPTI_ACTIVITY_FLAG_MARKER_START : CUPTI_ACTIVITY_FLAG_MARKER_END;
    m.timestamp = ts;
    m.id = id;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = PID;
    m.objectId.pt.threadId = TID;
    m.name = start ? name : NULL;
    put(b, &m, sizeof(m));
}

/* STEPS training steps: each a ProfilerStep range holding OPS_PER_STEP op
 * ranges that launch KERNELS_PER_OP kernels each, plus an input copy. The
 * kernels of step s scale by (1 + variant/10), so two variants differ in
 * content. The names must outlive the records (CUPTI's records point at
 * them), hence static storage. */
static sbuf training_buffer(int variant)
{
    static char steps[STEPS][32];
    static const char *ops[OPS_PER_STEP] = {"aten::conv2d", "aten::relu", "aten::linear",
                                            "aten::add_"};
    static const char *kn[OPS_PER_STEP] = {"implicit_gemm_conv", "relu_kernel", "sm90_gemm",
                                           "add_kernel"};
    sbuf b = {aligned_alloc(8, 1 << 16), 0, 1 << 16};
    uint32_t corr = 1, mid = 1;

    CUpti_ActivityDevice5 d;
    memset(&d, 0, sizeof(d));
    d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    d.name = "NVIDIA H200";
    d.numMultiprocessors = 132;
    d.globalMemorySize = 141ull << 30;
    d.computeCapabilityMajor = 9;
    d.numThreadsPerWarp = 32;
    d.maxWarpsPerMultiprocessor = 64;
    d.maxThreadsPerBlock = 1024;
    put(&b, &d, sizeof(d));

    for (int s = 0; s < STEPS; s++) {
        uint64_t t = BASE + (uint64_t)s * 2000000; /* 2 ms per step */
        uint64_t gpu = t + 20000;
        snprintf(steps[s], sizeof(steps[s]), "ProfilerStep#%d", s);
        marker(&b, 1, mid, t, steps[s]);
        uint32_t step_id = mid++;
        /* Input copy first. */
        api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, t + 5000, t + 9000, corr);
        CUpti_ActivityMemcpy6 m;
        memset(&m, 0, sizeof(m));
        m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
        m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m.bytes = 8 << 20;
        m.start = t + 10000;
        m.end = t + 19000;
        m.contextId = 1;
        m.streamId = 7;
        m.correlationId = corr++;
        put(&b, &m, sizeof(m));
        uint64_t cpu = t + 30000;
        for (int o = 0; o < OPS_PER_STEP; o++) {
            marker(&b, 1, mid, cpu, ops[o]);
            uint32_t op_id = mid++;
            cpu += 8000;
            for (int k = 0; k < KERNELS_PER_OP; k++) {
                uint64_t dur = (uint64_t)(60000 + 20000 * o) * (10 + (uint64_t)variant) / 10;
                api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, cpu, cpu + 6000, corr);
                if (gpu < cpu + 9000)
                    gpu = cpu + 9000;
                kernel(&b, kn[o], gpu, gpu + dur, corr);
                corr++;
                gpu += dur + 2000;
                cpu += 6000 + 11000;
            }
            marker(&b, 0, op_id, cpu, NULL);
            cpu += 15000;
        }
        api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, cpu, gpu + 1000, corr++);
        marker(&b, 0, step_id, gpu + 3000, NULL);
    }
    return b;
}

/* The collector's writer on the parsed buffer: gzip'ed Kineto JSON. */
static int make_trace(int variant, uint8_t **data, size_t *len)
{
    sbuf b = training_buffer(variant);
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

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int p = 0;

    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        p = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return p;
}

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
    const char *b = getenv("RV_BIN_DIR");
    char reveried[1100], p[16];

    if (!b) {
        fprintf(stderr, "skip: RV_BIN_DIR unset\n");
        return 77;
    }
    snprintf(bin_dir, sizeof(bin_dir), "%s", b);
    snprintf(reveried, sizeof(reveried), "%s/reveried", b);
    if (access(reveried, X_OK) != 0) {
        fprintf(stderr, "skip: %s is not built\n", reveried);
        return 77;
    }
    if (!mkdtemp(home))
        return 1;
    chmod(home, 0755); /* the embedded cluster runs as an unprivileged user */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    port = free_port();
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    srv = fork();
    if (srv == 0) {
        char log[1200];
        snprintf(p, sizeof(p), "%d", port);
        snprintf(log, sizeof(log), "%s/reveried.log", home);
        if (!freopen(log, "a", stdout) || !freopen(log, "a", stderr))
            _exit(127);
        execl(reveried, reveried, "--port", p, "--home", home, "--workers", "2",
              "--http-threads", "2", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1200; i++) {
        json_t *j = NULL;
        long st = get_json("/readyz", &j);
        json_decref(j);
        if (st == 200)
            return 0;
        if (waitpid(srv, NULL, WNOHANG) == srv) {
            srv = -1;
            break;
        }
        usleep(100 * 1000);
    }
    fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?); log in %s\n", home);
    return 77;
}

static void suite_clean(void)
{
    char cmd[1400], bindir[512];
    int st;

    if (srv > 0) {
        kill(srv, SIGTERM);
        waitpid(srv, &st, 0);
        srv = -1;
    }
    /* reveried stops the cluster it started; this only acts if it did not. */
    rv_pgembed *pg = NULL;
    rv_error e;
    rv_error_clear(&e);
    snprintf(cmd, sizeof(cmd), "%s/pg/data/postmaster.pid", home);
    if (access(cmd, F_OK) == 0 && rv_pgembed_start(home, &pg, &e) == 0 &&
        rv_pgembed_find_bindir(NULL, bindir, sizeof(bindir), &e) == 0) {
        snprintf(cmd, sizeof(cmd), "%s %s/pg_ctl -D '%s' stop -m fast -w >/dev/null 2>&1",
                 geteuid() == 0 ? "runuser -u postgres --" : "", bindir, rv_pgembed_datadir(pg));
        if (system(cmd) != 0)
            fprintf(stderr, "note: could not stop the test cluster\n");
    }
    rv_pgembed_detach(pg);
    curl_global_cleanup();
    if (getenv("RV_KEEP_TEST_HOME"))
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", home);
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
    snprintf(dir, sizeof(dir), "%s/spool-test", home);
    rv_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(rv_spool_write(dir, "collector-spooled", 0, data, len, path,
                                         sizeof(path), &err),
                          0);
    free(data);
    snprintf(cmd, sizeof(cmd), "'%s/reverie' upload --spool '%s' --server '%s' >'%s/spool.log' 2>&1",
             bin_dir, dir, url, home);
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
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    suite_clean();
    return failures ? 1 : 0;
}
