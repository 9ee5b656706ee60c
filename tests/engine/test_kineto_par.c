/* Tests for reading a Kineto trace on two cores (engine/reader/
 * rv_kineto_par.c): every input, good or bad, must give the same trace or
 * the same error (code, byte, event, message) as the one-core read, as a
 * buffer, a stream, plain or gzip, in parts of any size; and the parts
 * must really be taken in (a read that never used them would pass the
 * comparison and test nothing).
 *
 * The local fixtures and a generated trace always run; the public traces
 * in $RV_SHARED_TRACES run when that folder exists (else exit 77 after the
 * local ones pass). Built with ThreadSanitizer in CI (label threads). */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "reader/rv_kineto.h"
#include "util/rv_jscan.h"
#include "common/rv_test_util.h"

static const char *g_shared; /* NULL when the public traces are absent */
static char g_data[2048];    /* tests/data/kineto */

static int is_et_file(const char *dir, const char *name)
{
    return strstr(name, ".et.json") != NULL || strcmp(dir, "chakra") == 0;
}
/* data[0..len) gzip-compressed (new, caller frees), NULL on failure. */
static unsigned char *gzip_bytes(const void *data, size_t len, size_t *zlen)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, (uLong)len) + 64;
    unsigned char *out = malloc(cap);
    if (out) {
        z.next_in = (Bytef *)data;
        z.avail_in = (uInt)len;
        z.next_out = out;
        z.avail_out = (uInt)cap;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
            free(out);
            out = NULL;
        }
        *zlen = z.total_out;
    }
    deflateEnd(&z);
    return out;
}

enum { AS_BUFFER, AS_STREAM };

static int read_as(int how, const void *buf, size_t len, const rv_kineto_opts *o, rv_trace **t,
                   rv_error *e)
{
    if (how == AS_BUFFER)
        return rv_kineto_read_buffer(buf, len, o, t, e);
    FILE *f = fmemopen((void *)buf, len ? len : 1, "rb");
    if (!f)
        return RV_ERR_IO;
    if (!len)
        (void)fgetc(f);
    int rc = rv_kineto_read_stream(f, o, t, e);
    fclose(f);
    return rc;
}

/* Reads buf on one core and on two with parts of `chunk` bytes: the same
 * trace, or the same error (code, offset, event, reason, message). Adds
 * the parts taken in to *taken. 1 when they agree. */
static int same_both_ways(int how, const void *buf, size_t len, const rv_kineto_opts *base,
                          size_t chunk, const char *label, size_t *taken)
{
    rv_kineto_opts one = *base, two = *base;
    size_t parts = 0;
    one.threads = 1;
    two.chunk_bytes = chunk;
    two.parts_taken = &parts;
    rv_trace *a = NULL, *b = NULL;
    rv_error ea, eb;
    rv_error_clear(&ea);
    rv_error_clear(&eb);
    int ra = read_as(how, buf, len, &one, &a, &ea);
    int rb = read_as(how, buf, len, &two, &b, &eb);
    const char *what = "return code";
    int ok = ra == rb;
    if (ok && ra == 0) {
        ok = rv_trace_same(a, b, &what);
    } else if (ok) {
        what = "error";
        ok = ea.code == eb.code && ea.offset == eb.offset && ea.event_index == eb.event_index &&
             ea.reason == eb.reason && strcmp(ea.message, eb.message) == 0;
    }
    if (!ok)
        fprintf(stderr, "\n  %s (%s, parts of %zu bytes): %s differs; one core: %s; two: %s\n",
                label, how == AS_BUFFER ? "buffer" : "stream", chunk, what, ra ? ea.message : "ok",
                rb ? eb.message : "ok");
    if (taken)
        *taken += parts;
    rv_trace_free(a);
    rv_trace_free(b);
    return ok;
}

/* Both ways over plain and gzip bytes, as a buffer and as a stream, for
 * the part sizes chunks[0..n). Returns the parts taken in. */
static size_t check_sizes(const void *buf, size_t len, const rv_kineto_opts *o, const char *label,
                          const size_t *chunks, size_t n)
{
    size_t taken = 0, zlen = 0;
    unsigned char *z = gzip_bytes(buf, len, &zlen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(z);
    for (size_t i = 0; i < n; i++)
        for (int how = AS_BUFFER; how <= AS_STREAM; how++) {
            CU_ASSERT(same_both_ways(how, buf, len, o, chunks[i], label, &taken));
            CU_ASSERT(same_both_ways(how, z, zlen, o, chunks[i], label, &taken));
        }
    free(z);
    return taken;
}

/* Small parts, copied out of the scanner's windows. */
static size_t check_both_ways(const void *buf, size_t len, const rv_kineto_opts *o,
                              const char *label)
{
    static const size_t chunks[] = {16, 61, 300, 1000, 4096, 65536};
    return check_sizes(buf, len, o, label, chunks, sizeof(chunks) / sizeof(chunks[0]));
}

/* A trace with everything the reader keeps, in many events: ops with
 * shapes, launches and kernels (some joined by flows only), collectives
 * with groups, memory samples, python functions, metadata, events that
 * are not objects, names in bad UTF-8, escapes and numbers in strings. */
static char *synthetic_trace(size_t events, size_t *len)
{
    size_t cap = events * 400 + 4096, n = 0;
    char *b = malloc(cap);
    if (!b)
        return NULL;
#define PUT(...) (n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__))
    PUT("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\"id\": 0, \"name\": "
        "\"Synthetic GPU\", \"numSms\": 132},\n    {\"id\": 1, \"name\": \"Other\"}\n  ],\n"
        "  \"traceEvents\": [\n");
    for (size_t i = 0; i < events; i++) {
        long ts = 1000 + (long)i * 10;
        if (i)
            PUT(",\n  ");
        else
            PUT("  ");
        switch (i % 11) {
        case 0:
            PUT("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm%zu\", \"pid\": 7, "
                "\"tid\": 7, \"ts\": %ld.5, \"dur\": 8, \"args\": {\"External id\": %zu, "
                "\"Input Dims\": [[%zu, 64], [64, 32]], \"Input type\": [\"float\", "
                "\"c10::Half\"]}}",
                i % 37, ts, i, i % 97 + 1);
            break;
        case 1:
            PUT("{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                "\"pid\": 7, \"tid\": %zu, \"ts\": %ld, \"dur\": 2, \"args\": {\"External id\": "
                "%zu}}",
                7 + i % 3, ts, i - 1);
            break;
        case 2:
            PUT("{\"ph\": \"s\", \"id\": %zu, \"pid\": 7, \"tid\": %zu, \"ts\": %ld, \"cat\": "
                "\"ac2g\", \"name\": \"ac2g\"}",
                i, 7 + (i - 1) % 3, ts - 10);
            break;
        case 3:
            PUT("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\\u00e9_%zu\", \"pid\": 0, "
                "\"tid\": \"stream %zu\", \"ts\": %ld, \"dur\": 5, \"args\": {\"stream\": %zu, "
                "\"device\": 0, \"grid\": [%zu, 1, 1], \"block\": [128, 1, 1]}}",
                i % 53, i % 4, ts, i % 4, i % 19 + 1);
            break;
        case 4:
            PUT("{\"ph\": \"f\", \"id\": %zu, \"pid\": 0, \"tid\": \"stream %zu\", \"ts\": %ld, "
                "\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
                i - 2, (i - 1) % 4, ts - 10);
            break;
        case 5:
            PUT("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce_%zu\", "
                "\"pid\": 0, \"tid\": 9, \"ts\": %ld, \"dur\": 4, \"args\": {\"correlation\": %zu, "
                "\"In msg nelems\": %zu, \"Out msg nelems\": %zu, \"dtype\": \"Float\", "
                "\"Process Group Name\": \"pg%zu\", \"Process Group Ranks\": \"[0, %zu]\", "
                "\"Seq\": %zu}}",
                i % 5, ts, 100000 + i, i * 3, i * 3, i % 6, i % 6 + 1, i);
            break;
        case 6:
            PUT("{\"ph\": \"i\", \"s\": \"t\", \"cat\": \"cpu_instant_event\", \"name\": "
                "\"[memory]\", \"pid\": 7, \"tid\": 7, \"ts\": %ld, \"args\": {\"Device Type\": 1, "
                "\"Device Id\": 0, \"Bytes\": %zu, \"Total Allocated\": %zu, \"Total Reserved\": "
                "1048576}}",
                ts, i * 512, i * 1024);
            break;
        case 7:
            PUT("{\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"%s%zu\", \"pid\": 7, "
                "\"tid\": 7, \"ts\": %ld, \"dur\": 30}",
                i % 2 ? "nn.Module: Layer_" : "train.py(12): step_", i % 7, ts);
            break;
        case 8:
            PUT("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"bad\xff\xfe name %zu "
                "\\\"q\\\"\", \"pid\": \"7\", \"tid\": 7, \"ts\": \"%ld\", \"dur\": \"1.25\"}",
                i % 13, ts);
            break;
        case 9: PUT("[1, {\"nested\": [{\"a\": 1},\n    {\"b\": 2}]}]"); break;
        default:
            PUT("{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD\", \"pid\": 0, "
                "\"tid\": 11, \"ts\": %ld, \"dur\": 3, \"args\": {\"bytes\": %zu, "
                "\"correlation\": %zu,\n        \"nested\": [\n    {\"x\": 1},\n    {\"y\": "
                "[2]}\n  ]}}",
                ts, i * 64, 200000 + i);
            break;
        }
    }
    PUT("\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2},\n"
        "  \"baseTimeNanoseconds\": 1700000000000000000\n}\n");
#undef PUT
    *len = n;
    return b;
}

/* b[0..*len) with the blanks outside strings removed, in place, as a
 * minified trace is written. */
static void minify(char *b, size_t *len)
{
    size_t o = 0;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < *len; i++) {
        char c = b[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            continue;
        }
        b[o++] = c;
    }
    *len = o;
}

/* Every local fixture, good or bad, reads the same on one core and two. */
static void test_two_cores_local(void)
{
    DIR *dir = opendir(g_data);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    if (!dir)
        return;
    struct dirent *de;
    size_t files = 0;
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' || strstr(de->d_name, ".md"))
            continue;
        char p[4096];
        size_t len = 0;
        snprintf(p, sizeof(p), "%s/%s", g_data, de->d_name);
        char *raw = rv_test_read_file(p, &len);
        CU_ASSERT_PTR_NOT_NULL(raw);
        if (!raw)
            continue;
        const rv_kineto_opts plain = {0}, python = {.keep_python = 1},
                             capped = {.max_events = 2, .max_input_bytes = len / 2 + 1};
        check_both_ways(raw, len, &plain, de->d_name);
        check_both_ways(raw, len, &python, de->d_name);
        check_both_ways(raw, len, &capped, de->d_name);
        free(raw);
        files++;
    }
    closedir(dir);
    CU_ASSERT(files >= 15);
}

/* The synthetic trace: the same trace both ways, parts really taken in;
 * then cut short, bytes changed and caps hit anywhere, the same error. */
static void test_two_cores_synthetic(void)
{
    size_t len = 0;
    char *raw = synthetic_trace(3000, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
    const rv_kineto_opts plain = {0}, python = {.keep_python = 1};
    size_t taken = check_both_ways(raw, len, &plain, "synthetic");
    CU_ASSERT(taken > 100);
    CU_ASSERT(check_both_ways(raw, len, &python, "synthetic, python kept") > 100);
    /* The trace the two ways agree on is the one the fixture describes. */
    rv_trace *t = NULL;
    rv_error e;
    rv_kineto_opts one = {.threads = 1};
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_buffer(raw, len, &one, &t, &e), 0);
    CU_ASSERT(t->nmem > 200 && t->nop_shapes > 200 && t->ndevices == 2);
    CU_ASSERT(t->skipped_events > 1000);
    rv_trace_free(t);

    for (size_t k = 0; k < 40; k++) {
        size_t cut = 1 + (len - 2) * k / 40 + k * 7 % 13;
        char label[64];
        snprintf(label, sizeof(label), "synthetic cut at %zu", cut);
        CU_ASSERT(same_both_ways(AS_BUFFER, raw, cut, &plain, 1000, label, NULL));
        CU_ASSERT(same_both_ways(AS_STREAM, raw, cut, &plain, 4096, label, NULL));
        size_t at = (len - 1) * (k + 1) / 41;
        char keep = raw[at];
        static const char junk[] = "]}{,\"\\x\n0-";
        raw[at] = junk[k % (sizeof(junk) - 1)];
        snprintf(label, sizeof(label), "synthetic byte %zu changed", at);
        CU_ASSERT(same_both_ways(AS_BUFFER, raw, len, &plain, 1000, label, NULL));
        CU_ASSERT(same_both_ways(AS_STREAM, raw, len, &plain, 300, label, NULL));
        raw[at] = keep;
    }
    free(raw);

    /* A few MiB: parts of a whole window, inflated (or read) straight into
     * the part, as the reader's own choice makes them. */
    raw = synthetic_trace(16000, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
    const size_t windows[] = {RV_JSCAN_WINDOW, 2 * RV_JSCAN_WINDOW};
    CU_ASSERT(check_sizes(raw, len, &plain, "synthetic, window parts", windows, 2) > 8);
    for (size_t k = 1; k < 8; k++) {
        size_t cut = len * k / 8 + k * 37;
        CU_ASSERT(same_both_ways(AS_STREAM, raw, cut, &plain, RV_JSCAN_WINDOW,
                                 "synthetic, window parts, cut", NULL));
        rv_kineto_opts small = {.max_input_bytes = cut};
        CU_ASSERT(same_both_ways(AS_STREAM, raw, len, &small, RV_JSCAN_WINDOW,
                                 "synthetic, window parts, input cap", NULL));
        rv_kineto_opts capped = {.max_events = 1000 * k};
        CU_ASSERT(same_both_ways(AS_STREAM, raw, len, &capped, RV_JSCAN_WINDOW,
                                 "synthetic, window parts, event cap", NULL));
    }
    /* Minified: no line breaks, the cuts fall on "},{". */
    minify(raw, &len);
    CU_ASSERT_PTR_NULL(memchr(raw, '\n', len));
    CU_ASSERT(check_sizes(raw, len, &plain, "synthetic, minified", windows, 1) > 4);
    CU_ASSERT(check_both_ways(raw, len, &plain, "synthetic, minified") > 100);
    free(raw);
    raw = synthetic_trace(3000, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(raw);

    const size_t caps[] = {1, 500, 1789, 2400};
    for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
        rv_kineto_opts capped = {.max_events = caps[k]};
        CU_ASSERT(same_both_ways(AS_BUFFER, raw, len, &capped, 1000, "synthetic, event cap", NULL));
        rv_kineto_opts small = {.max_input_bytes = len * (k + 1) / 5};
        CU_ASSERT(same_both_ways(AS_STREAM, raw, len, &small, 4096, "synthetic, input cap", NULL));
    }
    free(raw);
}

/* Every public Kineto trace reads the same on one core and two: gzip as
 * it is stored (parts copied out of the inflated stream) and inflated in
 * memory (parts that point into the caller's buffer); a real trace cut
 * short anywhere gives the same error. */
static void test_two_cores_shared(void)
{
    static const char *const dirs[] = {"kineto",           "hta",      "hta/edge", "param",
                                       "param/dlrm-8rank", "tracelens"};
    const rv_kineto_opts plain = {0};
    size_t files = 0, taken = 0;
    for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
        char dp[4096];
        snprintf(dp, sizeof(dp), "%s/%s", g_shared, dirs[d]);
        DIR *dir = opendir(dp);
        if (!dir)
            continue;
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            if (!strstr(de->d_name, ".json") || is_et_file(dirs[d], de->d_name))
                continue;
            char fp[8192];
            size_t zlen = 0, len = 0;
            snprintf(fp, sizeof(fp), "%s/%s", dp, de->d_name);
            char *stored = rv_test_read_file(fp, &zlen);
            char *raw = rv_test_read_gz(fp, &len);
            CU_ASSERT(stored && raw);
            if (stored && raw) {
                CU_ASSERT(same_both_ways(AS_STREAM, stored, zlen, &plain, 1u << 20, fp, &taken));
                CU_ASSERT(same_both_ways(AS_BUFFER, raw, len, &plain, 1u << 16, fp, &taken));
                files++;
            }
            free(stored);
            free(raw);
        }
        closedir(dir);
    }
    CU_ASSERT(files >= 20);
    CU_ASSERT(taken >= 100);

    char p[4096];
    size_t len = 0;
    snprintf(p, sizeof(p), "%s/%s", g_shared, "hta/a100-2rank-nccl.json.gz");
    char *raw = rv_test_read_gz(p, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
    for (size_t k = 1; k < 24; k++) {
        size_t cut = len * k / 24 + k * 101;
        CU_ASSERT(same_both_ways(AS_BUFFER, raw, cut, &plain, 1u << 16, "a100-2rank cut", NULL));
    }
    free(raw);
}

int main(void)
{
    const char *src = getenv("RV_SOURCE_DIR");
    snprintf(g_data, sizeof(g_data), "%s/tests/data/kineto", src ? src : ".");
    const char *sh = getenv("RV_SHARED_TRACES");
    g_shared = rv_test_shared_traces(".");

    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite local = CU_add_suite("kineto_par_local", NULL, NULL);
    CU_add_test(local, "fixtures", test_two_cores_local);
    CU_add_test(local, "synthetic: whole, cut, changed, capped", test_two_cores_synthetic);
    if (g_shared) {
        CU_pSuite s = CU_add_suite("kineto_par_shared", NULL, NULL);
        CU_add_test(s, "public traces", test_two_cores_shared);
    }
    unsigned fails = rv_test_run();
    if (fails)
        return 1;
    if (!g_shared) {
        printf("skipped: RV_SHARED_TRACES (%s) is not a folder; only local inputs ran\n",
               sh ? sh : "unset");
        return RV_TEST_SKIP;
    }
    return 0;
}
