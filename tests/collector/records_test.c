/* Record parsing from synthetic CUPTI buffers (real CUDA 13 structs, walked
 * by libcupti's own cuptiActivityGetNextRecord), the Kineto writer, and a
 * read-back with the engine's reader. No GPU needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <cupti.h>

#include "reader/rv_kineto.h"
#include "rv_ktrace.h"
#include "rv_records.h"
#include "rv_window.h"
#include "common/rv_test_util.h"
#include "cupti_buf.h"

#define BASE 1700000000000000000ull /* a realtime-ns epoch, like CUPTI's */
#define PID  4242
#define TID  4243

static void kernel(rv_cbuf *b, const char *name, uint64_t start, uint64_t end, uint32_t corr,
                   uint32_t stream)
{
    /* 108x2 blocks of 256 threads, 40 registers, 4 KiB of shared memory. */
    const CUpti_ActivityKernel10 k = {.deviceId = 0,
                                      .contextId = 1,
                                      .streamId = stream,
                                      .gridX = 108,
                                      .gridY = 2,
                                      .gridZ = 1,
                                      .blockX = 256,
                                      .blockY = 1,
                                      .blockZ = 1,
                                      .registersPerThread = 40,
                                      .staticSharedMemory = 1024,
                                      .dynamicSharedMemory = 3072};
    rv_cbuf_kernel(b, &k, name, start, end, corr);
}

/* One buffer with one record of every kind the collector keeps. */
static rv_cbuf one_of_each(void)
{
    rv_cbuf b = rv_cbuf_new(64 * 1024, PID, TID);
    rv_cbuf_device(&b, "NVIDIA H200", 150ull << 30);

    rv_cbuf_marker(&b, 1, 7, BASE + 1000, "ProfilerStep#1");
    rv_cbuf_marker(&b, 1, 8, BASE + 1500, "aten::linear");
    rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, BASE + 2000, BASE + 2500, 101);
    kernel(&b, "void gemm<\"q\">\\(k)", BASE + 3000, BASE + 4000, 101, 7);
    rv_cbuf_marker(&b, 0, 8, BASE + 2600, NULL);

    CUpti_ActivityExternalCorrelation x;
    memset(&x, 0, sizeof(x));
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    x.externalId = 555;
    x.correlationId = 101;
    rv_cbuf_put(&b, &x, sizeof(x));

    rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, BASE + 5000, BASE + 5200, 102);
    rv_cbuf_memcpy_htod(&b, 1 << 20, BASE + 5500, BASE + 6500, 13, 102);

    rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, BASE + 7000, BASE + 7100, 103);
    CUpti_ActivityMemset4 s;
    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.bytes = 4096;
    s.start = BASE + 7200;
    s.end = BASE + 7300;
    s.deviceId = 0;
    s.contextId = 1;
    s.streamId = 7;
    s.correlationId = 103;
    s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    rv_cbuf_put(&b, &s, sizeof(s));

    /* cudaEventRecord on stream 13, then stream 7 waits for it. */
    rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, BASE + 7400, BASE + 7450, 104);
    CUpti_ActivityCudaEvent2 e;
    memset(&e, 0, sizeof(e));
    e.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    e.correlationId = 104;
    e.contextId = 1;
    e.streamId = 13;
    e.eventId = 3;
    e.cudaEventSyncId = 9001;
    rv_cbuf_put(&b, &e, sizeof(e));
    rv_cbuf_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, BASE + 7500, BASE + 7550,
                105);
    CUpti_ActivitySynchronization2 y;
    memset(&y, 0, sizeof(y));
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
    y.start = BASE + 7500;
    y.end = BASE + 7550;
    y.correlationId = 105;
    y.contextId = 1;
    y.streamId = 7;
    y.cudaEventId = 3;
    y.cudaEventSyncId = 9001;
    rv_cbuf_put(&b, &y, sizeof(y));

    CUpti_ActivityOverhead3 o;
    memset(&o, 0, sizeof(o));
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    o.objectId.pt.processId = PID;
    o.objectId.pt.threadId = TID;
    o.start = BASE + 8000;
    o.end = BASE + 8100;
    rv_cbuf_put(&b, &o, sizeof(o));

    /* A kind the collector does not keep: counted as ignored. */
    CUpti_ActivityName nm;
    memset(&nm, 0, sizeof(nm));
    nm.kind = CUPTI_ACTIVITY_KIND_NAME;
    nm.name = "thread";
    rv_cbuf_put(&b, &nm, sizeof(nm));

    rv_cbuf_marker(&b, 0, 7, BASE + 9000, NULL);
    return b;
}

static void test_parse_one_of_each(void)
{
    rv_cbuf b = one_of_each();
    rv_recset *s = rv_recset_new();
    CU_ASSERT_FATAL(s != NULL);
    long kept = rv_records_parse_buffer(s, b.p, b.len);
    /* 5 API + kernel + memcpy + memset + sync + overhead + 4 markers = 14 in recs */
    CU_ASSERT_EQUAL(kept, 14 + 3); /* + device, cuda event, external correlation */
    CU_ASSERT_EQUAL(s->recs.n, 14);
    CU_ASSERT_EQUAL(s->devices.n, 1);
    CU_ASSERT_EQUAL(s->events.n, 1);
    CU_ASSERT_EQUAL(s->ext.n, 1);
    CU_ASSERT_EQUAL(s->ignored, 1);
    CU_ASSERT_EQUAL(s->dropped, 0);

    const rv_rec *r = rv_recset_recs(s);
    const rv_rec *k = NULL, *m = NULL, *y = NULL;
    for (size_t i = 0; i < s->recs.n; i++) {
        if (r[i].kind == RV_REC_KERNEL)
            k = &r[i];
        if (r[i].kind == RV_REC_MEMCPY)
            m = &r[i];
        if (r[i].kind == RV_REC_SYNC)
            y = &r[i];
    }
    CU_ASSERT_FATAL(k && m && y);
    CU_ASSERT_STRING_EQUAL(rv_recset_str(s, k->name), "void gemm<\"q\">\\(k)");
    CU_ASSERT_EQUAL(k->start, BASE + 3000);
    CU_ASSERT_EQUAL(k->correlation, 101);
    CU_ASSERT_EQUAL(k->stream, 7);
    CU_ASSERT_EQUAL(k->grid[0], 108);
    CU_ASSERT_EQUAL(k->block[0], 256);
    CU_ASSERT_EQUAL(k->shared_mem, 4096);
    CU_ASSERT_EQUAL(k->registers, 40);
    CU_ASSERT_EQUAL(m->bytes, 1u << 20);
    char name[128];
    CU_ASSERT_STRING_EQUAL(rv_records_memcpy_name(m->aux, name, sizeof(name)),
                           "Memcpy HtoD (Pinned -> Device)");
    CU_ASSERT_EQUAL(y->aux, RV_REC_SYNC_WAIT_EVENT);
    CU_ASSERT_EQUAL(y->aux64, 9001);
    CU_ASSERT_STRING_EQUAL(rv_records_api_name(RV_REC_RUNTIME,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                               name, sizeof(name)),
                           "cudaLaunchKernel");
    CU_ASSERT_STRING_EQUAL(rv_records_api_name(RV_REC_DRIVER,
                                               CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, name,
                                               sizeof(name)),
                           "cuLaunchKernel");
    rv_recset_free(s);
    free(b.p);
}

static char *tmp_path(const char *suffix)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/rv_collector_test_%d%s", P_tmpdir, (int)getpid(), suffix);
    return path;
}

static rv_trace *write_and_read(const rv_recset *sets, const rv_ktrace_opts *o, rv_ktrace_stats *st)
{
    rv_meta m;
    memset(&m, 0, sizeof(m));
    snprintf(m.cpu, sizeof(m.cpu), "Test CPU @ 2GHz");
    snprintf(m.job, sizeof(m.job), "unit \"job\"");
    snprintf(m.driver, sizeof(m.driver), "580.65.06");
    snprintf(m.cuda, sizeof(m.cuda), "13.0");
    snprintf(m.framework, sizeof(m.framework), "pytorch");
    snprintf(m.backend, sizeof(m.backend), "nccl");
    m.pid = PID;
    m.rank = 3;
    m.world_size = 8;
    m.local_rank = 0;
    m.ngpus = 1;
    snprintf(m.gpus[0].name, sizeof(m.gpus[0].name), "NVIDIA H200");
    m.gpus[0].power_limit_w = 700;
    m.gpus[0].power_min_w = 200;
    m.gpus[0].power_max_w = 700;
    m.dropped_records = 12;
    uint8_t *data = NULL;
    size_t len = 0;
    rv_error err;
    int rc = rv_ktrace_write(sets, &m, o, &data, &len, st, &err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT(len > 20);
    CU_ASSERT(data[0] == 0x1f && data[1] == 0x8b); /* gzip */
    const char *path = tmp_path(".json.gz");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(data, 1, len, f);
    fclose(f);
    free(data);
    rv_trace *t = NULL;
    rc = rv_kineto_read_file(path, NULL, &t, &err);
    if (rc != 0)
        fprintf(stderr, "reader: %s\n", err.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    unlink(path);
    return t;
}

static size_t count_cat(const rv_trace *t, int cat)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nevents; i++)
        n += t->events[i].cat == cat;
    return n;
}

static const rv_event *find(const rv_trace *t, int cat, const char *name)
{
    for (size_t i = 0; i < t->nevents; i++)
        if (t->events[i].cat == cat &&
            (!name || strcmp(rv_trace_str(t, t->events[i].name), name) == 0))
            return &t->events[i];
    return NULL;
}

static void test_write_read_back(void)
{
    rv_cbuf b = one_of_each();
    rv_recset *s = rv_recset_new();
    CU_ASSERT_FATAL(rv_records_parse_buffer(s, b.p, b.len) > 0);
    rv_ktrace_stats st;
    rv_trace *t = write_and_read(s, NULL, &st);
    CU_ASSERT_EQUAL(st.kernels, 1);
    CU_ASSERT_EQUAL(st.runtime, 5);
    CU_ASSERT_EQUAL(st.ranges, 2);
    CU_ASSERT_EQUAL(st.gpu_ranges, 2);
    CU_ASSERT_EQUAL(st.flows, 3);

    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_KERNEL), 1);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_RUNTIME), 5);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_MEMCPY), 1);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_MEMSET), 1);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_CUDA_SYNC), 1);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_USER_ANNOTATION), 2);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_GPU_ANNOTATION), 2);

    const rv_event *k = find(t, RV_CAT_KERNEL, "void gemm<\"q\">\\(k)");
    const rv_event *launch = find(t, RV_CAT_RUNTIME, "cudaLaunchKernel");
    CU_ASSERT_FATAL(k && launch);
    CU_ASSERT_EQUAL(k->correlation, 101);
    CU_ASSERT_EQUAL(launch->correlation, 101);
    CU_ASSERT_EQUAL(k->external_id, 555);
    CU_ASSERT_EQUAL(launch->external_id, 555);
    CU_ASSERT_EQUAL(k->ts_ns, (int64_t)(BASE + 3000)); /* exact to the ns */
    CU_ASSERT_EQUAL(k->dur_ns, 1000);
    CU_ASSERT_EQUAL(k->stream, 7);
    CU_ASSERT_EQUAL(k->device, 0);
    CU_ASSERT_EQUAL(k->grid[0], 108);
    CU_ASSERT_EQUAL(k->grid[1], 2);
    CU_ASSERT_EQUAL(k->block[0], 256);
    CU_ASSERT_EQUAL(k->registers, 40);
    CU_ASSERT_EQUAL(k->shared_mem, 4096);
    CU_ASSERT_EQUAL(launch->ts_ns, (int64_t)(BASE + 2000));
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, launch->tid), "4243");

    const rv_event *m = find(t, RV_CAT_MEMCPY, NULL);
    CU_ASSERT_FATAL(m != NULL);
    CU_ASSERT_EQUAL(m->bytes, 1 << 20);
    CU_ASSERT_EQUAL(m->correlation, 102);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, m->name), "Memcpy HtoD (Pinned -> Device)");

    const rv_event *y = find(t, RV_CAT_CUDA_SYNC, NULL);
    CU_ASSERT_FATAL(y != NULL);
    CU_ASSERT_EQUAL(y->sync_kind, RV_SYNC_WAIT_EVENT);
    CU_ASSERT_EQUAL(y->stream, 7);
    CU_ASSERT_EQUAL(y->wait_stream, 13);
    CU_ASSERT_EQUAL(y->wait_event_corr, 104);

    const rv_event *step = find(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#1");
    CU_ASSERT_FATAL(step != NULL);
    CU_ASSERT_EQUAL(step->ts_ns, (int64_t)(BASE + 1000));
    CU_ASSERT_EQUAL(step->dur_ns, 8000);
    const rv_event *gstep = find(t, RV_CAT_GPU_ANNOTATION, "ProfilerStep#1");
    CU_ASSERT_FATAL(gstep != NULL);
    /* GPU span of the step: kernel start .. memset end (last launched work). */
    CU_ASSERT_EQUAL(gstep->ts_ns, (int64_t)(BASE + 3000));
    CU_ASSERT_EQUAL(gstep->dur_ns, 7300 - 3000);

    CU_ASSERT_EQUAL(t->rank, 3);
    CU_ASSERT_EQUAL(t->world_size, 8);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_gpu), "NVIDIA H200");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_cpu), "Test CPU @ 2GHz");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_driver), "580.65.06");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_cuda), "13.0");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->job), "unit \"job\"");
    CU_ASSERT_DOUBLE_EQUAL(t->power_limit_w, 700.0, 1e-9);
    CU_ASSERT_EQUAL_FATAL(t->ndevices, 1);
    CU_ASSERT_EQUAL(t->devices[0].num_sms, 132);
    CU_ASSERT_EQUAL(t->devices[0].total_mem, (int64_t)(150ull << 30));
    CU_ASSERT_EQUAL(t->devices[0].compute_major, 9);

    rv_trace_free(t);
    rv_recset_free(s);
    free(b.p);
}

/* Ten steps of 20 kernels each, spread over two buffers; the window keeps
 * steps 3..6 (skip 3, iterations 4). A kernel launched in the last kept step
 * that runs after the step ended is still in the trace. */
static void test_window_filter(void)
{
    enum { STEPS = 10, KPS = 20 };
    rv_cbuf b1 = rv_cbuf_new(1 << 20, PID, TID), b2 = rv_cbuf_new(1 << 20, PID, TID);
    uint32_t corr = 1;
    /* CUPTI records point at their names, so the names must outlive them. */
    static char names[STEPS][32];
    for (int s = 0; s < STEPS; s++) {
        rv_cbuf *b = s < STEPS / 2 ? &b1 : &b2;
        uint64_t t = BASE + (uint64_t)s * 1000000;
        snprintf(names[s], sizeof(names[s]), "ProfilerStep#%d", s);
        rv_cbuf_marker(b, 1, 100 + (uint32_t)s, t, names[s]);
        for (int k = 0; k < KPS; k++, corr++) {
            uint64_t ls = t + 1000 + (uint64_t)k * 10000;
            rv_cbuf_api(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, ls, ls + 2000, corr);
            /* The last kernel of each step ends after the step's range. */
            uint64_t ke = k == KPS - 1 ? t + 1200000 : ls + 9000;
            kernel(b, "k", ls + 5000, ke, corr, 7);
        }
        rv_cbuf_marker(b, 0, 100 + (uint32_t)s, t + 900000, NULL);
    }
    rv_recset *s1 = rv_recset_new(), *s2 = rv_recset_new();
    CU_ASSERT_FATAL(rv_records_parse_buffer(s1, b1.p, b1.len) > 0);
    CU_ASSERT_FATAL(rv_records_parse_buffer(s2, b2.p, b2.len) > 0);
    s1->next = s2;

    /* Feed the window the way the collector does: step ranges as they end. */
    rv_window w;
    rv_window_cfg cfg;
    rv_window_cfg_defaults(&cfg);
    cfg.skip = 3;
    cfg.iterations = 4;
    rv_window_init(&w, &cfg, BASE);
    int done = 0;
    for (int s = 0; s < STEPS && !done; s++) {
        char name[32];
        snprintf(name, sizeof(name), "ProfilerStep#%d", s);
        CU_ASSERT(rv_window_is_step(&w, name));
        uint64_t t = BASE + (uint64_t)s * 1000000;
        done = rv_window_on_step(&w, t, t + 900000);
    }
    CU_ASSERT_EQUAL_FATAL(w.state, RV_WIN_DONE);
    CU_ASSERT_EQUAL(w.t0, BASE + 3 * 1000000);
    CU_ASSERT_EQUAL(w.t1, BASE + 6 * 1000000 + 900000);

    rv_ktrace_opts o = {.t0 = w.t0, .t1 = w.t1};
    rv_ktrace_stats st;
    rv_trace *t = write_and_read(s1, &o, &st);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_KERNEL), 4 * KPS);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_RUNTIME), 4 * KPS);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_USER_ANNOTATION), 4);
    CU_ASSERT(find(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#3") != NULL);
    CU_ASSERT(find(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#6") != NULL);
    CU_ASSERT(find(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#7") == NULL);
    CU_ASSERT(find(t, RV_CAT_USER_ANNOTATION, "ProfilerStep#2") == NULL);
    /* Every kernel still pairs with its launch. */
    size_t paired = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        if (t->events[i].cat != RV_CAT_KERNEL)
            continue;
        for (size_t j = 0; j < t->nevents; j++)
            if (t->events[j].cat == RV_CAT_RUNTIME &&
                t->events[j].correlation == t->events[i].correlation) {
                paired++;
                break;
            }
    }
    CU_ASSERT_EQUAL(paired, 4 * KPS);
    /* The GPU span of step 6 reaches past its CPU range (the long kernel). */
    const rv_event *g6 = find(t, RV_CAT_GPU_ANNOTATION, "ProfilerStep#6");
    CU_ASSERT_FATAL(g6 != NULL);
    CU_ASSERT_EQUAL(g6->ts_ns + g6->dur_ns, (int64_t)(BASE + 6 * 1000000 + 1200000));
    rv_trace_free(t);
    rv_recset_free_list(s1);
    free(b1.p);
    free(b2.p);
}

/* A set is capped: records past the cap are counted, not kept. */
static void test_interning_and_plain(void)
{
    rv_recset *s = rv_recset_new();
    uint32_t a = rv_recset_intern(s, "alpha");
    uint32_t b = rv_recset_intern(s, "beta");
    CU_ASSERT(a != 0 && b != 0 && a != b);
    CU_ASSERT_EQUAL(rv_recset_intern(s, "alpha"), a);
    for (int i = 0; i < 5000; i++) {
        char n[32];
        snprintf(n, sizeof(n), "name-%d", i);
        CU_ASSERT_FATAL(rv_recset_intern(s, n) != 0);
    }
    CU_ASSERT_STRING_EQUAL(rv_recset_str(s, a), "alpha");
    CU_ASSERT_STRING_EQUAL(rv_recset_str(s, rv_recset_intern(s, "name-4321")), "name-4321");
    CU_ASSERT_EQUAL(rv_recset_intern(s, NULL), 0);

    /* Plain JSON output is valid JSON that the reader also takes. */
    rv_cbuf buf = one_of_each();
    CU_ASSERT_FATAL(rv_records_parse_buffer(s, buf.p, buf.len) > 0);
    rv_meta m;
    memset(&m, 0, sizeof(m));
    rv_ktrace_opts o = {.plain = 1};
    uint8_t *data;
    size_t len;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_ktrace_write(s, &m, &o, &data, &len, NULL, &err), 0);
    CU_ASSERT(data[0] == '{');
    rv_trace *t = NULL;
    int rc = rv_kineto_read_buffer(data, len, NULL, &t, &err);
    if (rc)
        fprintf(stderr, "reader: %s\n%.*s\n", err.message, (int)len, (const char *)data);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(t != NULL && t->nevents > 10);
    rv_trace_free(t);
    /* A cap on the output is an error, not a truncated file. */
    o.max_bytes = 100;
    free(data);
    CU_ASSERT_EQUAL(rv_ktrace_write(s, &m, &o, &data, &len, NULL, &err), RV_ERR_LIMIT);
    CU_ASSERT(data == NULL);
    rv_recset_free(s);
    free(buf.p);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite su = CU_add_suite("collector_records", NULL, NULL);
    CU_add_test(su, "parse one record of each kind", test_parse_one_of_each);
    CU_add_test(su, "write Kineto JSON, read back with the engine", test_write_read_back);
    CU_add_test(su, "window keeps steps skip..skip+N", test_window_filter);
    CU_add_test(su, "string interning, plain output, output cap", test_interning_and_plain);
    return rv_test_run() ? 1 : 0;
}
