/* Ingest (engine/ingest/rv_ingest.c): bytes to a trace, and a trace to what
 * the store keeps. On simple-add's Kineto trace and its ET (both in
 * tests/data/public): the facts agree with the trace (events, GPU busy
 * time inside the span, a snapshot that decodes to the same events, host
 * overhead samples, a measured step); the ET alone is modelled (no
 * samples, no measured step), names no GPU when none was given, and a GPU
 * the model cannot use is refused with the reason ET_LAYOUT and field
 * "gpu"; bytes that are no ET are refused naming "et"; a trace without GPU
 * work is refused before anything would be stored. Skips (77) without the
 * public traces. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ingest/rv_ingest.h"
#include "reader/rv_snapshot.h"
#include "common/rv_test_util.h"

static const char *g_traces;

static void *read_rel(const char *rel, size_t *len)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", g_traces, rel);
    return rv_test_read_file(p, len);
}

static void test_kineto_facts(void)
{
    size_t len = 0;
    void *b = read_rel("hta/simple-add.kineto.json.gz", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    rv_trace *t = NULL;
    rv_error e;
    rv_ingest_opts o = {.format = RV_INGEST_KINETO};
    CU_ASSERT_EQUAL_FATAL(rv_ingest_read(b, len, &o, &t, &e), 0);
    rv_ingest_facts f;
    CU_ASSERT_EQUAL_FATAL(rv_ingest_facts_of(t, rv_trace_str(t, t->platform_gpu), 0, &f, &e), 0);
    CU_ASSERT_EQUAL(f.modelled, 0);
    CU_ASSERT(f.measured_us > 0);
    CU_ASSERT(f.samples.n > 0);
    CU_ASSERT(f.nsketches > 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(f.summary, "events")),
                    (json_int_t)t->nevents);
    double busy = json_number_value(json_object_get(f.summary, "gpu_busy_us"));
    double span = json_number_value(json_object_get(f.summary, "span_us"));
    CU_ASSERT(busy > 0 && busy <= span);
    rv_trace *back = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_snapshot_decode(f.snap, f.snap_len, &back, &e), 0);
    CU_ASSERT_EQUAL(back->nevents, t->nevents);
    rv_trace_free(back);
    rv_ingest_facts_free(&f);
    rv_ingest_facts_free(&f); /* safe twice: it was zeroed */
    rv_trace_free(t);
    free(b);
}

static void test_et_alone(void)
{
    size_t len = 0;
    void *b = read_rel("hta/simple-add.et.json.gz", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    rv_trace *t = NULL;
    rv_error e;
    /* No GPU named: laid out on a stand-in, and the trace names none. */
    rv_ingest_opts o = {.format = RV_INGEST_ET};
    CU_ASSERT_EQUAL_FATAL(rv_ingest_read(b, len, &o, &t, &e), 0);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->platform_gpu), "");
    rv_ingest_facts f;
    CU_ASSERT_EQUAL_FATAL(rv_ingest_facts_of(t, NULL, 1, &f, &e), 0);
    CU_ASSERT_EQUAL(f.samples.n, 0);
    CU_ASSERT_EQUAL(f.measured_us, 0);
    CU_ASSERT_PTR_NULL(f.kmodels);
    CU_ASSERT(json_is_null(json_object_get(f.summary, "measured_us")));
    rv_ingest_facts_free(&f);
    rv_trace_free(t);
    /* A GPU the model has no row for: refused on the layout, naming gpu. */
    o.gpu = "no-such-gpu-9000";
    CU_ASSERT_EQUAL(rv_ingest_read(b, len, &o, &t, &e), RV_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_EQUAL(e.reason, RV_REASON_ET_LAYOUT);
    CU_ASSERT_STRING_EQUAL(e.field, "gpu");
    /* Not an ET at all: the reader's refusal, naming et. */
    o.gpu = "A100-SXM4-80GB";
    static const char junk[] = "{\"schema\": 7, \"nodes\": \"no\"}";
    CU_ASSERT(rv_ingest_read(junk, sizeof(junk) - 1, &o, &t, &e) < 0);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_STRING_EQUAL(e.field, "et");
    CU_ASSERT_NOT_EQUAL(e.reason, RV_REASON_ET_LAYOUT);
    CU_ASSERT(strncmp(e.message, "execution trace: ", 17) == 0);
    free(b);
}

/* A trace whose only events run on the CPU cannot be simulated: refused
 * before anything is stored. */
static void test_no_gpu_work(void)
{
    static const char cpu_only[] =
        "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\","
        "\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":5}]}";
    rv_trace *t = NULL;
    rv_error e;
    CU_ASSERT_EQUAL_FATAL(rv_ingest_read(cpu_only, sizeof(cpu_only) - 1, NULL, &t, &e), 0);
    rv_ingest_facts f;
    CU_ASSERT_EQUAL(rv_ingest_facts_of(t, NULL, 0, &f, &e), RV_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(f.snap);
    CU_ASSERT_PTR_NULL(f.summary);
    rv_trace_free(t);
}

int main(void)
{
    g_traces = rv_test_require_shared_traces("hta/simple-add.et.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("ingest", NULL, NULL);
    CU_add_test(s, "a Kineto trace's facts agree with it", test_kineto_facts);
    CU_add_test(s, "an ET alone is modelled; its refusals name et or gpu", test_et_alone);
    CU_add_test(s, "no GPU work: refused before storing", test_no_gpu_work);
    return rv_test_run() ? 1 : 0;
}
