/* Tests for the streaming Kineto reader (engine/rv_kineto.c).
 *
 * Local fixtures in tests/data/kineto/ always run; the checks on the public
 * traces in $RV_SHARED_TRACES run when that folder exists (else exit 77
 * after the local ones pass). Expected counts are computed independently
 * from the raw bytes (zlib + substring counts), never hard-coded. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_jsonw.h"
#include "reader/rv_kineto.h"
#include "util/rv_jscan.h"
#include "common/rv_test_util.h"

static const char *g_shared; /* NULL when the public traces are absent */
static char g_data[2048];    /* tests/data/kineto */

/* ---------------------------------------------------------------- helpers */

static size_t count_sub(const char *hay, size_t n, const char *needle)
{
    size_t c = 0, k = strlen(needle);
    const char *p = hay, *end = hay + n;
    while (p < end && (p = memmem(p, (size_t)(end - p), needle, k)) != NULL) {
        c++;
        p += k;
    }
    return c;
}

static void shared_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", g_shared, rel);
}

static void data_path(char *out, size_t cap, const char *rel)
{
    if ((size_t)snprintf(out, cap, "%s/%s", g_data, rel) >= cap)
        out[0] = '\0';
}

static rv_trace *load(const char *path, const rv_kineto_opts *o)
{
    rv_trace *t = NULL;
    rv_error e;
    int rc = rv_kineto_read_file(path, o, &t, &e);
    if (rc != 0)
        fprintf(stderr, "\n  %s: %s: %s\n", path, rv_err_name(rc), e.message);
    CU_ASSERT_EQUAL(rc, 0);
    return t;
}

static rv_trace *load_data(const char *rel)
{
    char p[4096];
    data_path(p, sizeof(p), rel);
    return load(p, NULL);
}

static rv_trace *load_shared(const char *rel)
{
    char p[4096];
    shared_path(p, sizeof(p), rel);
    return load(p, NULL);
}

static size_t count_cat(const rv_trace *t, int cat)
{
    size_t c = 0;
    for (size_t i = 0; i < t->nevents; i++)
        c += t->events[i].cat == cat;
    return c;
}

static const rv_event *find_name(const rv_trace *t, const char *name)
{
    for (size_t i = 0; i < t->nevents; i++)
        if (strcmp(rv_trace_str(t, t->events[i].name), name) == 0)
            return &t->events[i];
    return NULL;
}

/* Same events, same strings (compared as text), same metadata. */
static int traces_equal(const rv_trace *a, const rv_trace *b)
{
    if (a->nevents != b->nevents || a->skipped_events != b->skipped_events ||
        a->input_bytes != b->input_bytes || a->ndevices != b->ndevices || a->rank != b->rank)
        return 0;
    for (size_t i = 0; i < a->nevents; i++) {
        const rv_event *x = &a->events[i], *y = &b->events[i];
        if (x->ts_ns != y->ts_ns || x->dur_ns != y->dur_ns || x->correlation != y->correlation ||
            x->external_id != y->external_id || x->bytes != y->bytes || x->cat != y->cat ||
            x->device != y->device || x->stream != y->stream || x->grid[0] != y->grid[0] ||
            x->block[0] != y->block[0] || x->registers != y->registers ||
            strcmp(rv_trace_str(a, x->name), rv_trace_str(b, y->name)) ||
            strcmp(rv_trace_str(a, x->pid), rv_trace_str(b, y->pid)) ||
            strcmp(rv_trace_str(a, x->tid), rv_trace_str(b, y->tid)))
            return 0;
    }
    return strcmp(rv_trace_str(a, a->platform_gpu), rv_trace_str(b, b->platform_gpu)) == 0;
}

/* Expects a failure with code and a message containing needle. */
static void expect_fail_buf(const char *buf, size_t len, int code, const char *needle, rv_error *e)
{
    rv_trace *t = (rv_trace *)1;
    int rc = rv_kineto_read_buffer(buf, len, NULL, &t, e);
    if (rc != code || !strstr(e->message, needle))
        fprintf(stderr, "\n  got %s: %s (wanted %s, \"%s\")\n", rv_err_name(rc), e->message,
                rv_err_name(code), needle);
    CU_ASSERT_EQUAL(rc, code);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(e->message, needle));
    CU_ASSERT_EQUAL(e->code, code);
}

static void expect_fail_file(const char *rel, int code, const char *needle, rv_error *e)
{
    char p[4096];
    size_t len;
    data_path(p, sizeof(p), rel);
    char *buf = rv_test_read_file(p, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    expect_fail_buf(buf, len, code, needle, e);
    free(buf);
}

/* ---------------------------------------------------------------- local fixtures */

static void test_bare_array(void)
{
    rv_trace *t = load_data("bare-array.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nevents, 2);
    CU_ASSERT_EQUAL(t->skipped_events, 1);
    const rv_event *k = find_name(t, "gemm");
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->cat, RV_CAT_KERNEL);
    CU_ASSERT_EQUAL(k->ts_ns, 12000);
    CU_ASSERT_EQUAL(k->dur_ns, 2000);
    CU_ASSERT_EQUAL(k->correlation, 9);
    CU_ASSERT_EQUAL(k->external_id, 3);
    CU_ASSERT_EQUAL(k->grid[0], 2);
    CU_ASSERT_EQUAL(k->grid[1], 3);
    CU_ASSERT_EQUAL(k->grid[2], 4);
    CU_ASSERT_EQUAL(k->block[0], 32);
    CU_ASSERT_EQUAL(k->block[2], 1);
    CU_ASSERT_EQUAL(k->registers, 64);
    CU_ASSERT_EQUAL(k->shared_mem, 1024);
    CU_ASSERT_EQUAL(k->device, 0);
    CU_ASSERT_EQUAL(k->stream, 7);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, k->tid), "7");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->source_format), "kineto");
    CU_ASSERT_EQUAL(t->input_bytes, 444);
    rv_trace_free(t);
}

static void test_fractional_local(void)
{
    rv_trace *t = load_data("fractional-ts.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nevents, 4);
    /* 16-digit microsecond values: a double would lose the last digits. */
    CU_ASSERT_EQUAL(t->events[0].ts_ns, INT64_C(1707417525512283123));
    CU_ASSERT_EQUAL(t->events[0].dur_ns, 1);
    /* String ts, rounding of the sub-ns digit: .9996 us = 999.6 ns -> 1000. */
    CU_ASSERT_EQUAL(t->events[1].ts_ns, INT64_C(1707417525512284000));
    CU_ASSERT_EQUAL(t->events[1].dur_ns, 2500);
    CU_ASSERT_EQUAL(t->events[2].ts_ns, INT64_C(1707417525512283000));
    CU_ASSERT_EQUAL(t->events[2].dur_ns, 2500);
    CU_ASSERT_EQUAL(t->events[3].ts_ns, -5500);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->events[3].name),
                           "d\xc3\xa9j\xc3\xa0 \xf0\x9f\x98\x80 \"q\"");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->events[3].pid), "-3");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->events[3].tid), "18446744073709551617");
    rv_trace_free(t);
}

static void test_large_ids_local(void)
{
    rv_trace *t = load_data("large-ids.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nevents, 2);
    const rv_event *k = &t->events[0];
    /* Folded into int64 range: the low 63 bits. */
    CU_ASSERT_EQUAL(k->correlation, (int64_t)(UINT64_C(10159970886766084423) & INT64_MAX));
    CU_ASSERT_EQUAL(k->external_id, INT64_MAX); /* above 2^64: clamped */
    CU_ASSERT_EQUAL(k->bytes, INT64_MAX);
    CU_ASSERT_EQUAL(k->device, RV_NONE); /* does not fit int32 */
    CU_ASSERT_EQUAL(k->stream, -7);
    CU_ASSERT_EQUAL(t->events[1].external_id, INT64_MAX);
    rv_trace_free(t);
}

/* Older Kineto names a collective's message only on its nccl:* annotation:
 * the first input tensor's element count times its element width. */
static void test_nccl_note_sizes(void)
{
    rv_trace *t = load_data("nccl-note-sizes.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL_FATAL(t->nevents, 5);
    CU_ASSERT_EQUAL(t->events[0].bytes, 10 * 3 * 8); /* long int */
    CU_ASSERT_EQUAL(t->events[1].bytes, 6144 * 4);   /* the first tensor only */
    CU_ASSERT_EQUAL(t->events[2].bytes, RV_NONE);    /* a scalar first: no size */
    CU_ASSERT_EQUAL(t->events[3].bytes, RV_NONE);    /* not a collective */
    CU_ASSERT_EQUAL(t->events[4].bytes, RV_NONE);    /* a negative dim */
    rv_trace_free(t);
}

static void test_flow_fallback(void)
{
    rv_trace *t = load_data("flow-fallback.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    const rv_event *e;
    /* "f" bp "e" that comes before its kernel, same ts. */
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_name(t, "k_exact_flow_first"));
    CU_ASSERT_EQUAL(e->correlation, 501);
    CU_ASSERT_EQUAL(e->ts_ns, 1000500);
    /* "s" inside the runtime slice; tid "42" (string) vs 42 (number). */
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_name(t, "cudaLaunchKernel"));
    CU_ASSERT_EQUAL(e->correlation, 501);
    /* Legacy async_gpu, enclosing slice. */
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_name(t, "Memcpy HtoD"));
    CU_ASSERT_EQUAL(e->correlation, 502);
    CU_ASSERT_EQUAL(e->bytes, 4096);
    /* Legacy "async" f without bp binds to the next slice. */
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_name(t, "k_next_slice"));
    CU_ASSERT_EQUAL(e->correlation, 503);
    /* args.correlation wins over a flow. */
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_name(t, "k_has_corr"));
    CU_ASSERT_EQUAL(e->correlation, 77);
    /* fwdbwd flows never fill a correlation. */
    CU_ASSERT_PTR_NOT_NULL_FATAL(e = find_name(t, "k_unmatched"));
    CU_ASSERT_EQUAL(e->correlation, RV_NONE);
    CU_ASSERT_EQUAL(t->skipped_events, 6);
    rv_trace_free(t);
}

static void test_collector_meta(void)
{
    rv_trace *t = load_data("collector-meta.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->source_format), "collector");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_gpu), "NVIDIA H100 80GB HBM3");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_cpu), "AMD EPYC 7R13");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_driver), "550.54.15");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_cuda), "12.4");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_framework), "torch 2.3.0");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->job), "bert-finetune");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->backend), "nccl");
    CU_ASSERT_DOUBLE_EQUAL(t->power_limit_w, 350.5, 1e-9);
    CU_ASSERT_EQUAL(t->rank, 3);
    CU_ASSERT_EQUAL(t->world_size, 8);
    CU_ASSERT_EQUAL(t->base_time_ns, INT64_C(1711964646000000000));
    /* deviceProperties after traceEvents, device 0 listed second. */
    CU_ASSERT_EQUAL_FATAL(t->ndevices, 2);
    CU_ASSERT_EQUAL(t->devices[1].id, 0);
    CU_ASSERT_EQUAL(t->devices[1].num_sms, 132);
    CU_ASSERT_EQUAL(t->devices[1].compute_major, 9);
    CU_ASSERT_EQUAL(t->devices[1].total_mem, INT64_C(85018279936));
    /* python dropped by default, counter skipped. */
    CU_ASSERT_EQUAL(t->nevents, 2);
    CU_ASSERT_EQUAL(t->skipped_events, 2);
    const rv_event *s = &t->events[0];
    CU_ASSERT_EQUAL(s->cat, RV_CAT_CUDA_SYNC);
    CU_ASSERT_EQUAL(s->sync_kind, RV_SYNC_EVENT);
    CU_ASSERT_EQUAL(s->wait_stream, 3);
    CU_ASSERT_EQUAL(s->wait_event_corr, 12);
    /* Numeric strings and hex stream handles. */
    CU_ASSERT_EQUAL(t->events[1].bytes, 2560);
    CU_ASSERT_EQUAL(t->events[1].stream, 16);
    rv_trace_free(t);

    rv_kineto_opts o = {.keep_python = 1};
    char p[4096];
    data_path(p, sizeof(p), "collector-meta.json");
    t = load(p, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nevents, 3);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_PYTHON), 1);
    rv_trace_free(t);
}

static void test_errors_local(void)
{
    rv_error e;
    expect_fail_file("err-empty-events.json", RV_ERR_UNSUPPORTED,
                     "no trace events the engine can use", &e);
    expect_fail_file("err-no-kept-events.json", RV_ERR_UNSUPPORTED,
                     "no trace events the engine can use", &e);
    expect_fail_file("err-no-trace-events.json", RV_ERR_UNSUPPORTED, "traceEvents", &e);
    expect_fail_file("err-negative-dur.json", RV_ERR_INVALID, "negative \"dur\"", &e);
    CU_ASSERT_EQUAL(e.event_index, 0);
    expect_fail_file("err-ts-not-number.json", RV_ERR_INVALID, "\"ts\" is not a number", &e);
    CU_ASSERT_STRING_EQUAL(e.message, "event 0 at byte 85: \"ts\" is not a number");
    CU_ASSERT_EQUAL(e.offset, 85);
    expect_fail_file("err-truncated.json", RV_ERR_PARSE, "unexpected end of input", &e);
    CU_ASSERT_EQUAL(e.offset, 124);
    CU_ASSERT_EQUAL(e.event_index, 1);
    expect_fail_file("err-not-json.txt", RV_ERR_PARSE, "not JSON", &e);
    expect_fail_file("err-top-number.json", RV_ERR_PARSE, "not JSON", &e);
    expect_fail_file("err-deep-nesting.json", RV_ERR_LIMIT, "nesting deeper than", &e);
    expect_fail_file("err-trailing.json", RV_ERR_PARSE, "after the top-level value", &e);
    CU_ASSERT_EQUAL(e.offset, 100);

    expect_fail_buf("", 0, RV_ERR_PARSE, "empty input", &e);
    expect_fail_buf("{\"traceEvents\": {}}", 19, RV_ERR_PARSE, "traceEvents", &e);
    expect_fail_buf("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"dur\": 1}]}", 56,
                    RV_ERR_INVALID, "has no \"ts\"", &e);
    expect_fail_buf("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1e30}]}", 57,
                    RV_ERR_INVALID, "out of range", &e);
    expect_fail_buf("[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"ts\": 01}]", 38, RV_ERR_PARSE,
                    "malformed number", &e);
    expect_fail_buf("[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"ts\": 1,}]", 38, RV_ERR_PARSE,
                    "key string", &e);
    expect_fail_buf("[{\"ph\": \"X\", \"name\": \"a\\q\"}]", 26, RV_ERR_PARSE, "escape", &e);
    /* NUL bytes and bad UTF-8 in a skipped string are data, not errors. */
    static const char nul[] =
        "[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\0\xff\", \"ts\": 1}]";
    rv_trace *t = NULL;
    CU_ASSERT_EQUAL(rv_kineto_read_buffer(nul, sizeof(nul) - 1, NULL, &t, &e), 0);
    rv_trace_free(t);
    /* Gzip garbage: a valid magic followed by junk. */
    static const char gz[] = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage-garbage";
    expect_fail_buf(gz, sizeof(gz) - 1, RV_ERR_PARSE, "gzip", &e);
}

static void test_caps(void)
{
    rv_error e;
    rv_trace *t = NULL;
    char p[4096];
    data_path(p, sizeof(p), "bare-array.json");
    rv_kineto_opts o = {.max_events = 1};
    CU_ASSERT_EQUAL(rv_kineto_read_file(p, &o, &t, &e), RV_ERR_LIMIT);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "cap"));
    /* Which cap was hit is a code the store decides on, not message text. */
    CU_ASSERT_EQUAL(e.reason, RV_REASON_EVENTS);
    rv_kineto_opts o2 = {.max_input_bytes = 100};
    CU_ASSERT_EQUAL(rv_kineto_read_file(p, &o2, &t, &e), RV_ERR_LIMIT);
    CU_ASSERT_EQUAL(e.reason, RV_REASON_INPUT_BYTES);
    CU_ASSERT_TRUE(e.placed);
    char big[256];
    memset(big, ' ', sizeof(big));
    CU_ASSERT_EQUAL(rv_kineto_read_buffer(big, sizeof(big), &o2, &t, &e), RV_ERR_LIMIT);
    CU_ASSERT_EQUAL(e.reason, RV_REASON_INPUT_BYTES);
    CU_ASSERT_FALSE(rv_kineto_error_is_et(&e));
    /* An execution trace is told by its code, whatever the message says. */
    static const char et[] = "{\"schema\": \"1.0.1\", \"nodes\": []}";
    CU_ASSERT_EQUAL(rv_kineto_read_buffer(et, sizeof(et) - 1, NULL, &t, &e), RV_ERR_UNSUPPORTED);
    CU_ASSERT_EQUAL(e.reason, RV_REASON_IS_ET);
    CU_ASSERT_TRUE(rv_kineto_error_is_et(&e));
    e.message[0] = '\0';
    CU_ASSERT_TRUE(rv_kineto_error_is_et(&e));
    static const char plain[] = "{\"foo\": 1}";
    CU_ASSERT_EQUAL(rv_kineto_read_buffer(plain, sizeof(plain) - 1, NULL, &t, &e),
                    RV_ERR_UNSUPPORTED);
    CU_ASSERT_FALSE(rv_kineto_error_is_et(&e));
    CU_ASSERT_EQUAL(rv_kineto_read_file("/nonexistent/trace.json", NULL, &t, &e), RV_ERR_IO);
}

/* Names that are not valid UTF-8 are repaired once, when interned: each
 * bad byte becomes U+FFFD, valid multi-byte text is kept, every copy of a
 * bad name maps to one string, and a JSON escape of a lone surrogate also
 * reads as U+FFFD. */
static void test_invalid_utf8(void)
{
    static const char doc[] =
        "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"bad\xff\xc0name\", \"ts\": 1, "
        "\"dur\": 2, \"pid\": \"0\", \"tid\": \"s\xe2\x82\"},\n"
        " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"caf\xc3\xa9 \xe2\x82\xac\", \"ts\": 4, "
        "\"dur\": 1, \"pid\": \"0\", \"tid\": \"7\"},\n"
        " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"bad\xff\xc0name\", \"ts\": 6, "
        "\"dur\": 1, \"pid\": \"0\", \"tid\": \"7\"},\n"
        " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"x\\ud800y\xed\xa0\x80\", \"ts\": 8, "
        "\"dur\": 1, \"pid\": \"0\", \"tid\": \"7\"}]";
    rv_trace *t = NULL;
    rv_error e;
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_buffer(doc, sizeof(doc) - 1, NULL, &t, &e), 0);
    CU_ASSERT_EQUAL_FATAL(t->nevents, 4);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->events[0].name), "bad\xef\xbf\xbd\xef\xbf\xbdname");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->events[0].tid), "s\xef\xbf\xbd\xef\xbf\xbd");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->events[1].name), "caf\xc3\xa9 \xe2\x82\xac");
    CU_ASSERT_EQUAL(t->events[2].name, t->events[0].name);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->events[3].name),
                           "x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    /* Every string the table holds is valid UTF-8 now. */
    for (uint32_t id = 0; id < t->strings.count; id++) {
        const char *s = rv_strtab_get(&t->strings, id);
        CU_ASSERT_EQUAL(rv_jsonw_utf8_valid(s, strlen(s)), strlen(s));
    }
    rv_trace_free(t);
}

/* ---------------------------------------------------------------- shared traces */

static int is_et_file(const char *dir, const char *name)
{
    return strstr(name, ".et.json") != NULL || strcmp(dir, "chakra") == 0;
}

/* Every file under the listed folders loads, or (execution traces) is
 * rejected with a message that says what it is. */
static void test_every_shared_file(void)
{
    static const char *const dirs[] = {"kineto",           "hta",       "hta/edge", "param",
                                       "param/dlrm-8rank", "tracelens", "chakra"};
    size_t loaded = 0, rejected = 0;
    for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
        char dp[4096];
        shared_path(dp, sizeof(dp), dirs[d]);
        DIR *dir = opendir(dp);
        CU_ASSERT_PTR_NOT_NULL(dir);
        if (!dir)
            continue;
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            if (!strstr(de->d_name, ".json"))
                continue;
            char fp[8192];
            snprintf(fp, sizeof(fp), "%s/%s", dp, de->d_name);
            rv_trace *t = NULL;
            rv_error e;
            int rc = rv_kineto_read_file(fp, NULL, &t, &e);
            if (is_et_file(dirs[d], de->d_name)) {
                if (rc != RV_ERR_UNSUPPORTED)
                    fprintf(stderr, "\n  %s: expected rejection, got %d\n", fp, rc);
                CU_ASSERT_EQUAL(rc, RV_ERR_UNSUPPORTED);
                CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "PyTorch execution trace"));
                CU_ASSERT_PTR_NULL(t);
                rejected++;
            } else {
                if (rc != 0)
                    fprintf(stderr, "\n  %s: %s\n", fp, e.message);
                CU_ASSERT_EQUAL(rc, 0);
                CU_ASSERT(t && t->nevents > 0);
                CU_ASSERT(t && t->input_bytes > 0);
                loaded++;
            }
            rv_trace_free(t);
        }
        closedir(dir);
    }
    CU_ASSERT(loaded >= 25);
    CU_ASSERT(rejected >= 12);
}

/* Category counts equal substring counts of the raw JSON. */
static void check_counts(const char *rel, const char *const pat[RV_CAT_COUNT])
{
    char p[4096];
    size_t len;
    shared_path(p, sizeof(p), rel);
    char *raw = rv_test_read_gz(p, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
    rv_trace *t = load(p, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->input_bytes, len);
    for (int c = 0; c < RV_CAT_COUNT; c++) {
        if (!pat[c])
            continue;
        size_t want = count_sub(raw, len, pat[c]);
        size_t got = count_cat(t, c);
        if (want != got)
            fprintf(stderr, "\n  %s %s: want %zu got %zu\n", rel, pat[c], want, got);
        CU_ASSERT_EQUAL(got, want);
    }
    CU_ASSERT(count_cat(t, RV_CAT_KERNEL) > 0);
    CU_ASSERT(count_cat(t, RV_CAT_RUNTIME) > 0);
    free(raw);
    rv_trace_free(t);
}

static void test_counts(void)
{
    const char *modern[RV_CAT_COUNT] = {
        [RV_CAT_CPU_OP] = "\"cat\": \"cpu_op\"",
        [RV_CAT_USER_ANNOTATION] = "\"cat\": \"user_annotation\"",
        [RV_CAT_RUNTIME] = "\"cat\": \"cuda_runtime\"",
        [RV_CAT_DRIVER] = "\"cat\": \"cuda_driver\"",
        [RV_CAT_KERNEL] = "\"cat\": \"kernel\"",
        [RV_CAT_MEMCPY] = "\"cat\": \"gpu_memcpy\"",
        [RV_CAT_MEMSET] = "\"cat\": \"gpu_memset\"",
        [RV_CAT_GPU_ANNOTATION] = "\"cat\": \"gpu_user_annotation\"",
        [RV_CAT_CUDA_SYNC] = "\"cat\": \"cuda_sync\"",
    };
    const char *legacy[RV_CAT_COUNT] = {
        [RV_CAT_CPU_OP] = "\"cat\": \"Operator\"", [RV_CAT_RUNTIME] = "\"cat\": \"Runtime\"",
        [RV_CAT_KERNEL] = "\"cat\": \"Kernel\"",   [RV_CAT_MEMCPY] = "\"cat\": \"Memcpy\"",
        [RV_CAT_MEMSET] = "\"cat\": \"Memset\"",
    };
    check_counts("hta/a100-2rank-nccl.json.gz", modern);
    check_counts("hta/critical-path-alexnet.json.gz", modern);
    check_counts("hta/edge/amd-mi250-rocm62.json.gz", modern);
    check_counts("tracelens/h100-falconsai-vit-forward.json.gz", modern);
    check_counts("param/dlrm-8rank/worker3.kineto.json.gz", modern);
    check_counts("kineto/resnet50-v100-workers0.pt.trace.json.gz", legacy);
    check_counts("hta/edge/legacy-categories.json.gz", legacy);
}

static void test_correlation_and_steps(void)
{
    rv_trace *t = load_shared("hta/a100-2rank-nccl.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    size_t steps = 0, gpu = 0, corr = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat == RV_CAT_USER_ANNOTATION &&
            strncmp(rv_trace_str(t, e->name), "ProfilerStep#", 13) == 0)
            steps++;
        if (rv_cat_is_gpu_task(e->cat)) {
            gpu++;
            corr += e->correlation > 0;
            CU_ASSERT(e->stream >= 0);
            CU_ASSERT(e->device == 0);
        }
        if (e->cat == RV_CAT_KERNEL)
            CU_ASSERT(e->grid[0] > 0 && e->block[0] > 0);
    }
    CU_ASSERT(steps >= 3);
    CU_ASSERT(gpu > 0);
    CU_ASSERT_EQUAL(corr, gpu);
    CU_ASSERT_EQUAL(t->rank, 0);
    CU_ASSERT_EQUAL(t->world_size, 2);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->backend), "nccl");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_gpu), "NVIDIA A100-PG509-200");
    CU_ASSERT_EQUAL(t->base_time_ns, INT64_C(1711964646000000000));
    rv_trace_free(t);

    /* The first kernel of the nccl trace, read by hand from the file. */
    t = load_shared("hta/a100-2rank-nccl.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    const rv_event *k = NULL;
    for (size_t i = 0; i < t->nevents && !k; i++)
        if (t->events[i].correlation == 57541)
            k = &t->events[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->ts_ns, INT64_C(4458676983543183));
    CU_ASSERT_EQUAL(k->dur_ns, 41407);
    CU_ASSERT_EQUAL(k->external_id, 12353);
    CU_ASSERT_EQUAL(k->registers, 40);
    CU_ASSERT_EQUAL(k->shared_mem, 400);
    CU_ASSERT_EQUAL(k->grid[0], 512);
    rv_trace_free(t);
}

static void test_fractional_shared(void)
{
    rv_trace *t = load_shared("kineto/h100-sync-after-fix.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    const rv_event *w = find_name(t, "Stream Wait Event");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->ts_ns, INT64_C(88511388202855));
    CU_ASSERT_EQUAL(w->dur_ns, 10);
    CU_ASSERT_EQUAL(w->sync_kind, RV_SYNC_WAIT_EVENT);
    CU_ASSERT_EQUAL(w->wait_event_corr, 100);
    CU_ASSERT_EQUAL(w->wait_stream, 1);
    const rv_event *es = find_name(t, "Event Sync");
    CU_ASSERT_PTR_NOT_NULL_FATAL(es);
    CU_ASSERT_EQUAL(es->sync_kind, RV_SYNC_EVENT);
    CU_ASSERT_EQUAL(es->stream, -1);
    CU_ASSERT_EQUAL(es->dur_ns, 20);
    rv_trace_free(t);

    t = load_shared("hta/v100-1rank-ns-resolution.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    size_t hits = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        /* "ts": 1712195495505582.988 (a double reads it as ...583.0). */
        if (e->ts_ns == INT64_C(1712195495505582988) && e->cat == RV_CAT_KERNEL) {
            CU_ASSERT_EQUAL(e->dur_ns, 4928);
            CU_ASSERT_EQUAL(e->correlation, 135071);
            hits++;
        }
        if (e->ts_ns == INT64_C(1712195495519689047)) {
            CU_ASSERT_EQUAL(e->dur_ns, 63813);
            hits++;
        }
    }
    CU_ASSERT_EQUAL(hits, 2);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_gpu), "Tesla V100-SXM2-32GB");
    rv_trace_free(t);
}

static void test_edge_traces(void)
{
    rv_trace *t = load_shared("hta/edge/large-integers.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nevents, 2);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_KERNEL), 1);
    rv_trace_free(t);

    t = load_shared("hta/edge/legacy-categories.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    const rv_event *k = NULL;
    for (size_t i = 0; i < t->nevents && !k; i++)
        if (t->events[i].correlation == 538860 && t->events[i].cat == RV_CAT_KERNEL)
            k = &t->events[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->external_id, 0); /* "external id", lower case */
    CU_ASSERT_EQUAL(k->grid[0], 64);
    CU_ASSERT_EQUAL(k->registers, 16);
    CU_ASSERT_EQUAL(k->ts_ns, INT64_C(1665536373729077000));
    CU_ASSERT_EQUAL(t->rank, 1);
    rv_trace_free(t);

    t = load_shared("hta/edge/cpu-only.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_KERNEL), 0);
    CU_ASSERT_EQUAL(t->world_size, 300);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->backend), "gloo");
    rv_trace_free(t);

    t = load_shared("hta/edge/triton-driver-launch.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_DRIVER), 1);
    rv_trace_free(t);

    /* python_function kept only on request. */
    char p[4096];
    shared_path(p, sizeof(p), "tracelens/h100-bert-small-forward.json.gz");
    size_t len;
    char *raw = rv_test_read_gz(p, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
    rv_kineto_opts o = {.keep_python = 1};
    t = load(p, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(count_cat(t, RV_CAT_PYTHON),
                    count_sub(raw, len, "\"cat\": \"python_function\""));
    CU_ASSERT(count_cat(t, RV_CAT_PYTHON) > 1000);
    rv_trace_free(t);
    free(raw);
}

/* gzip file, gzip buffer, plain buffer and plain stream give one result. */
/* The general path for one number at the start of text: its status and
 * value (rv_jscan_number, then rv_jscan_dec_i64), and the bytes it read. */
static int general_dec(const char *text, int scale, int64_t *v, size_t *used)
{
    rv_jscan js;
    int st = -1;
    if (rv_jscan_open(&js, text, strlen(text), NULL, SIZE_MAX, NULL) != 0)
        return -1;
    if (rv_jscan_number(&js) == 0) {
        st = rv_jscan_dec_i64(js.num, js.num_len, scale, v);
        *used = js.pos;
    }
    rv_jscan_close(&js);
    return st;
}

/* rv_jscan_dec_here takes what it can in one pass and leaves the rest
 * untouched: where it answers, the general path gives the same value and
 * reads the same bytes. */
static void test_dec_here(void)
{
    static const char *cases[] = {"0,",
                                  "-0,",
                                  "7}",
                                  "1234567.891,",
                                  "1234567.8915,",
                                  "1234567.8914,",
                                  "-12.5 ",
                                  "0.0005,",
                                  "0.0004999,",
                                  "999999999999999999,",
                                  "9999999999999999.99,",
                                  "9223372036854775.807,",
                                  "9223372036854775.808,",
                                  "-9223372036854775.808,",
                                  "1234567890123456789,",
                                  "12e3,",
                                  "1.5E-2,",
                                  "01,",
                                  "1.,",
                                  ".5,",
                                  "-,",
                                  "1234",
                                  "-1.2345678901234567,",
                                  "88511388202.765,",
                                  "3.14159265358979323846,",
                                  "1e400,",
                                  "100000000000000000,"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int scale = 0; scale <= 3; scale++) {
            rv_jscan js;
            int64_t fast = 0, slow = 0;
            size_t used = 0;
            CU_ASSERT_EQUAL_FATAL(
                rv_jscan_open(&js, cases[i], strlen(cases[i]), NULL, SIZE_MAX, NULL), 0);
            size_t at = js.pos;
            int took = rv_jscan_dec_here(&js, scale, &fast);
            int st = general_dec(cases[i], scale, &slow, &used);
            if (took) {
                CU_ASSERT_EQUAL(st, RV_JSCAN_OK);
                CU_ASSERT_EQUAL(fast, slow);
                CU_ASSERT_EQUAL(js.pos - at, used);
                if (st != RV_JSCAN_OK || fast != slow)
                    printf("\n    %s at scale %d: %lld, general %lld (%d)", cases[i], scale,
                           (long long)fast, (long long)slow, st);
            } else {
                CU_ASSERT_EQUAL(js.pos, at);
            }
            rv_jscan_close(&js);
        }
    }
    /* The common forms are taken, not left to the general path. */
    rv_jscan js;
    int64_t v = 0;
    CU_ASSERT_EQUAL_FATAL(rv_jscan_open(&js, "88511388202.765,", 16, NULL, SIZE_MAX, NULL), 0);
    CU_ASSERT_EQUAL(rv_jscan_dec_here(&js, 3, &v), 1);
    CU_ASSERT_EQUAL(v, 88511388202765LL);
    rv_jscan_close(&js);
    CU_ASSERT_EQUAL_FATAL(rv_jscan_open(&js, "1707417525512283.000,", 21, NULL, SIZE_MAX, NULL), 0);
    CU_ASSERT_EQUAL(rv_jscan_dec_here(&js, 3, &v), 1);
    CU_ASSERT_EQUAL(v, 1707417525512283000LL);
    rv_jscan_close(&js);
    /* Random digit strings against the general path. */
    unsigned seed = 12345;
    char buf[48];
    for (int k = 0; k < 20000; k++) {
        size_t n = 0;
        seed = seed * 1103515245u + 12345u;
        if (seed >> 31)
            buf[n++] = '-';
        size_t nd = 1 + (seed >> 8) % 20, dot = (seed >> 16) % (nd + 2);
        for (size_t j = 0; j < nd; j++) {
            seed = seed * 1103515245u + 12345u;
            if (j == dot && j > 0)
                buf[n++] = '.';
            buf[n++] = (char)('0' + (seed >> 16) % 10);
        }
        buf[n++] = ',';
        buf[n] = '\0';
        int scale = (int)((seed >> 4) % 4);
        int64_t fast = 0, slow = 0;
        size_t used = 0;
        CU_ASSERT_EQUAL_FATAL(rv_jscan_open(&js, buf, n, NULL, SIZE_MAX, NULL), 0);
        if (rv_jscan_dec_here(&js, scale, &fast)) {
            CU_ASSERT_EQUAL(general_dec(buf, scale, &slow, &used), RV_JSCAN_OK);
            CU_ASSERT_EQUAL(fast, slow);
            CU_ASSERT_EQUAL(js.pos, used);
        }
        rv_jscan_close(&js);
    }
}

static void test_gzip_plain_identical(void)
{
    char p[4096];
    size_t len, zlen;
    shared_path(p, sizeof(p), "kineto/resnet50-v100-workers0.pt.trace.json.gz");
    char *plain = rv_test_read_gz(p, &len);
    char *zipped = rv_test_read_file(p, &zlen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(plain);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zipped);
    rv_trace *a = load(p, NULL), *b = NULL, *c = NULL, *d = NULL;
    rv_error e;
    CU_ASSERT_EQUAL(rv_kineto_read_buffer(zipped, zlen, NULL, &b, &e), 0);
    CU_ASSERT_EQUAL(rv_kineto_read_buffer(plain, len, NULL, &c, &e), 0);
    FILE *f = fmemopen(plain, len, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(rv_kineto_read_stream(f, NULL, &d, &e), 0);
    fclose(f);
    CU_ASSERT_FATAL(a && b && c && d);
    CU_ASSERT(traces_equal(a, b));
    CU_ASSERT(traces_equal(a, c));
    CU_ASSERT(traces_equal(a, d));
    CU_ASSERT_EQUAL(a->input_bytes, len);
    CU_ASSERT(len > 30u << 20); /* crosses many 256 KiB refills */
    /* The event array was sized once from the announced size. */
    CU_ASSERT(b->cap_events >= b->nevents && b->cap_events == len / 200);

    /* The announced size: a gzip member's ISIZE (buffer or file), a plain
     * input's length; an ISIZE below the compressed size announces nothing. */
    rv_jscan js;
    CU_ASSERT_EQUAL(rv_jscan_open(&js, zipped, zlen, NULL, SIZE_MAX, NULL), 0);
    CU_ASSERT_EQUAL(js.size_hint, len);
    rv_jscan_close(&js);
    f = fopen(p, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(rv_jscan_open(&js, NULL, 0, f, SIZE_MAX, NULL), 0);
    CU_ASSERT_EQUAL(js.size_hint, len);
    rv_jscan_close(&js);
    fclose(f);
    CU_ASSERT_EQUAL(rv_jscan_open(&js, plain, len, NULL, SIZE_MAX, NULL), 0);
    CU_ASSERT_EQUAL(js.size_hint, len);
    rv_jscan_close(&js);
    memcpy(zipped + zlen - 4, "\x01\0\0\0", 4);
    CU_ASSERT_EQUAL(rv_jscan_open(&js, zipped, zlen, NULL, SIZE_MAX, NULL), 0);
    CU_ASSERT_EQUAL(js.size_hint, 0);
    rv_jscan_close(&js);
    rv_trace_free(a);
    rv_trace_free(b);
    rv_trace_free(c);
    rv_trace_free(d);
    free(plain);
    free(zipped);
}

/* Cutting the input anywhere gives an error at the cut, never a partial trace. */
static void test_truncation(void)
{
    char p[4096];
    size_t len, zlen;
    shared_path(p, sizeof(p), "hta/a100-2rank-nccl.json.gz");
    char *plain = rv_test_read_gz(p, &len);
    char *zipped = rv_test_read_file(p, &zlen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(plain);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zipped);
    const size_t cuts[] = {1, 17, 4096, (1u << 20) + 3, len / 2, len - 2};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        rv_trace *t = NULL;
        rv_error e;
        int rc = rv_kineto_read_buffer(plain, cuts[i], NULL, &t, &e);
        CU_ASSERT_EQUAL(rc, RV_ERR_PARSE);
        CU_ASSERT_PTR_NULL(t);
        CU_ASSERT_EQUAL(e.offset, (int64_t)cuts[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "end of input"));
        /* Same through a stream (256 KiB refills). */
        FILE *f = fmemopen(plain, cuts[i], "rb");
        rc = rv_kineto_read_stream(f, NULL, &t, &e);
        fclose(f);
        CU_ASSERT_EQUAL(rc, RV_ERR_PARSE);
        CU_ASSERT_EQUAL(e.offset, (int64_t)cuts[i]);
    }
    /* Truncated gzip: an error that names gzip, within the decompressed size. */
    const size_t zcuts[] = {5, 30, zlen / 3, zlen - 4};
    for (size_t i = 0; i < sizeof(zcuts) / sizeof(zcuts[0]); i++) {
        rv_trace *t = NULL;
        rv_error e;
        int rc = rv_kineto_read_buffer(zipped, zcuts[i], NULL, &t, &e);
        CU_ASSERT_EQUAL(rc, RV_ERR_PARSE);
        CU_ASSERT_PTR_NULL(t);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "gzip"));
        CU_ASSERT(e.offset >= 0 && e.offset <= (int64_t)len);
    }
    /* Corrupt gzip: flip bytes in the middle of the deflate data. */
    for (size_t i = zlen / 2; i < zlen / 2 + 64; i++)
        zipped[i] ^= 0x5a;
    rv_trace *t = NULL;
    rv_error e;
    int rc = rv_kineto_read_buffer(zipped, zlen, NULL, &t, &e);
    CU_ASSERT(rc == RV_ERR_PARSE);
    CU_ASSERT_PTR_NULL(t);
    free(plain);
    free(zipped);
}

int main(void)
{
    const char *src = getenv("RV_SOURCE_DIR");
    snprintf(g_data, sizeof(g_data), "%s/tests/data/kineto", src ? src : ".");
    const char *sh = getenv("RV_SHARED_TRACES");
    g_shared = rv_test_shared_traces(".");

    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite local = CU_add_suite("kineto_local", NULL, NULL);
    CU_add_test(local, "bare array", test_bare_array);
    CU_add_test(local, "fractional ts (local)", test_fractional_local);
    CU_add_test(local, "one-pass decimals", test_dec_here);
    CU_add_test(local, "large ids (local)", test_large_ids_local);
    CU_add_test(local, "ac2g flow fallback", test_flow_fallback);
    CU_add_test(local, "collective sizes on nccl:* annotations", test_nccl_note_sizes);
    CU_add_test(local, "collector metadata", test_collector_meta);
    CU_add_test(local, "errors", test_errors_local);
    CU_add_test(local, "caps", test_caps);
    CU_add_test(local, "invalid UTF-8 in names", test_invalid_utf8);
    if (g_shared) {
        CU_pSuite s = CU_add_suite("kineto_shared", NULL, NULL);
        CU_add_test(s, "every shared file", test_every_shared_file);
        CU_add_test(s, "category counts", test_counts);
        CU_add_test(s, "correlation and steps", test_correlation_and_steps);
        CU_add_test(s, "fractional ts (shared)", test_fractional_shared);
        CU_add_test(s, "edge traces", test_edge_traces);
        CU_add_test(s, "gzip == plain", test_gzip_plain_identical);
        CU_add_test(s, "truncation", test_truncation);
    }
    unsigned fails = rv_test_run();
    if (fails)
        return 1;
    if (!g_shared) {
        printf("skipped: RV_SHARED_TRACES (%s) is not a folder; only local fixtures ran\n",
               sh ? sh : "unset");
        return 77;
    }
    return 0;
}
