/* Execution traces (engine/rv_et.c, rv_et_join.c): the public ETs ingest
 * (schema 1.0.1 flat lists and Chakra's 1.0.2 values/attrs layout), the
 * simple-add and DLRM ETs join the Kineto traces of their runs with every
 * GPU task launched under an op attributed to an ET node, a .tar.gz holding
 * one ET reads like the ET, and malformed ETs are refused with the place.
 * Node and op counts are computed from the raw JSON with jansson, never
 * hard-coded. Skips (77) without RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <jansson.h>

#include "reader/rv_et.h"
#include "reader/rv_kineto.h"
#include "common/rv_test_util.h"

static const char *g_traces;

static rv_et *load_et(const char *rel)
{
    char p[4096];
    rv_et *et = NULL;
    rv_error e;
    snprintf(p, sizeof(p), "%s/%s", g_traces, rel);
    int rc = rv_et_read_file(p, NULL, &et, &e);
    if (rc != 0)
        fprintf(stderr, "\n  %s: %s: %s\n", rel, rv_err_name(rc), e.message);
    CU_ASSERT_EQUAL(rc, 0);
    return et;
}

/* Node count of an ET read independently. */
static size_t json_nodes(const char *rel)
{
    char p[4096];
    size_t len = 0;
    snprintf(p, sizeof(p), "%s/%s", g_traces, rel);
    char *txt = rv_test_read_gz(p, &len);
    json_t *j = txt ? json_loadb(txt, len, 0, NULL) : NULL;
    size_t n = json_array_size(json_object_get(j, "nodes"));
    json_decref(j);
    free(txt);
    return n;
}

static void test_ingest(void)
{
    static const char *const ets[] = {
        "hta/simple-add.et.json.gz",         "param/dlrm-8rank/worker0.et.json.gz",
        "param/linear-2080ti.et.json.gz",    "param/resnet-2080ti.et.json.gz",
        "chakra/et-1.0.2-allgather.json.gz",
    };
    for (size_t i = 0; i < sizeof(ets) / sizeof(ets[0]); i++) {
        rv_et *et = load_et(ets[i]);
        if (!et)
            continue;
        CU_ASSERT_EQUAL(et->nnodes, json_nodes(ets[i]));
        size_t with_shape = 0;
        for (size_t k = 0; k < et->nnodes; k++) {
            const rv_et_node *n = &et->nodes[k];
            for (uint32_t a = 0; a < n->n_in + n->n_out; a++) {
                const rv_et_arg *g = &et->args[n->args_off + a];
                with_shape += rv_et_arg_is_tensor(et, g) && g->ndims > 0;
            }
        }
        CU_ASSERT(with_shape > 0);
        rv_et_free(et);
    }
}

/* linear-2080ti: the first addmm is 512x1024 @ 1024x1024 (checked by
 * hand in the JSON); 1.0.2: rf_id and parent come from attrs/ctrl_deps. */
static void test_fields(void)
{
    rv_et *et = load_et("param/linear-2080ti.et.json.gz");
    int found = 0;
    for (size_t k = 0; et && k < et->nnodes && !found; k++) {
        const rv_et_node *n = &et->nodes[k];
        if (strcmp(rv_et_str(et, n->name), "aten::addmm") != 0)
            continue;
        found = 1;
        CU_ASSERT_EQUAL(n->n_in, 5);
        CU_ASSERT_EQUAL(n->n_out, 1);
        const rv_et_arg *m1 = &et->args[n->args_off + 1];
        CU_ASSERT_EQUAL(m1->ndims, 2);
        CU_ASSERT_STRING_EQUAL(rv_et_str(et, m1->type), "Tensor(float)");
        CU_ASSERT_EQUAL(m1->itemsize, 4);
        CU_ASSERT(m1->tensor_id >= 0);
        CU_ASSERT(n->rf_id >= 0);
        CU_ASSERT(n->parent >= 0);
        CU_ASSERT(strstr(rv_et_str(et, n->schema), "addmm") != NULL);
    }
    CU_ASSERT(found);
    rv_et_free(et);

    et = load_et("chakra/et-1.0.2-allgather.json.gz");
    size_t rf = 0, parent = 0;
    for (size_t k = 0; et && k < et->nnodes; k++) {
        rf += et->nodes[k].rf_id != RV_NONE;
        parent += et->nodes[k].parent != RV_NONE;
    }
    CU_ASSERT(et && et->layout == 1);
    CU_ASSERT(rf > 0 && parent > 0);
    rv_et_free(et);
}

static void check_join(const char *et_rel, const char *k_rel, int method)
{
    char p[4096];
    rv_trace *t = NULL;
    rv_error e;
    rv_et_join j;
    rv_et *et = load_et(et_rel);
    snprintf(p, sizeof(p), "%s/%s", g_traces, k_rel);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(p, NULL, &t, &e), 0);
    int rc = rv_et_join_trace(et, t, &j, &e);
    if (rc != 0)
        fprintf(stderr, "\n  join %s: %s\n", et_rel, e.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    printf("\n  %s: method %d, ops %zu joined %zu, GPU tasks %zu launched under an op %zu "
           "attributed %zu",
           et_rel, j.method, j.ops, j.ops_joined, j.kernels, j.kernels_launched, j.kernels_joined);
    CU_ASSERT_EQUAL(j.method, method);
    CU_ASSERT(j.kernels > 0);
    CU_ASSERT_EQUAL(j.kernels_joined, j.kernels_launched);
    CU_ASSERT(j.kernels_launched > 0);
    /* Every joined op carries its ET node's name. */
    size_t bad = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        int32_t n = j.node_of_event[i];
        const rv_event *ev = &t->events[i];
        if (n < 0 || rv_cat_is_gpu_task(ev->cat))
            continue;
        bad += strcmp(rv_trace_str(t, ev->name), rv_et_str(et, et->nodes[n].name)) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* Most ops join (the ET and the trace cover the same step). */
    CU_ASSERT(j.ops_joined * 10 >= j.ops * 9);
    rv_et_join_free(&j);
    rv_trace_free(t);
    rv_et_free(et);
}

static void test_join_simple_add(void)
{
    check_join("hta/simple-add.et.json.gz", "hta/simple-add.kineto.json.gz", RV_ET_JOIN_ID);
}

static void test_join_dlrm(void)
{
    char a[256], b[256];
    for (int w = 0; w < 8; w++) {
        snprintf(a, sizeof(a), "param/dlrm-8rank/worker%d.et.json.gz", w);
        snprintf(b, sizeof(b), "param/dlrm-8rank/worker%d.kineto.json.gz", w);
        check_join(a, b, RV_ET_JOIN_ORDER);
    }
}

static int refused(const char *doc, const char *needle)
{
    rv_et *et = NULL;
    rv_error e;
    int rc = rv_et_read_buffer(doc, strlen(doc), NULL, &et, &e);
    if (rc == 0 || et || !strstr(e.message, needle)) {
        fprintf(stderr, "\n  %s -> rc %d: %s (want \"%s\")\n", doc, rc, e.message, needle);
        rv_et_free(et);
        return 0;
    }
    return 1;
}

static void test_malformed(void)
{
    CU_ASSERT(refused("", "empty input"));
    CU_ASSERT(refused("[1]", "execution trace is an object"));
    CU_ASSERT(refused("{\"schema\": \"1.0.1\"}", "no top-level \"nodes\""));
    CU_ASSERT(refused("{\"nodes\": [{\"id\": 1, \"name\": \"a\"}]}", "no top-level \"schema\""));
    CU_ASSERT(refused("{\"schema\": \"2.0.0\", \"nodes\": [{\"id\": 1, \"name\": \"a\"}]}",
                      "not supported"));
    CU_ASSERT(refused("{\"schema\": \"1.0.1\", \"nodes\": []}", "no nodes"));
    CU_ASSERT(
        refused("{\"schema\": \"1.0.1\", \"nodes\": [{\"name\": \"a\"}]}", "without an \"id\""));
    CU_ASSERT(refused("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 7}]}", "id 7 has no"));
    CU_ASSERT(refused("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 7, \"name\": \"a\"}, "
                      "{\"id\": 7, \"name\": \"b\"}]}",
                      "id 7 appears twice"));
    CU_ASSERT(refused("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": \"x\", \"name\": \"a\"}]}",
                      "\"id\" is not an integer"));
    /* Truncated and broken JSON name the node being read. */
    CU_ASSERT(refused("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 1, \"name\": \"a\"}, "
                      "{\"id\": 2, \"name\": ",
                      "node 1"));
    CU_ASSERT(refused("{\"schema\": \"1.0.1\", \"nodes\": [{\"id\": 1, \"inputs\": [[1,2,]]}]}",
                      "node 0"));
    CU_ASSERT(refused("{\"traceEvents\": []}", "Kineto trace"));
    /* Caps: more nodes than allowed. */
    rv_et *et = NULL;
    rv_error e;
    rv_et_opts o = {.max_nodes = 1};
    const char *two = "{\"schema\": \"1.1.0\", \"nodes\": [{\"id\": 1, \"name\": \"a\"}, "
                      "{\"id\": 2, \"name\": \"b\"}]}";
    CU_ASSERT_EQUAL(rv_et_read_buffer(two, strlen(two), &o, &et, &e), RV_ERR_LIMIT);
    CU_ASSERT(strstr(e.message, "more than 1 nodes") != NULL);
    o.max_nodes = 0;
    CU_ASSERT_EQUAL(rv_et_read_buffer(two, strlen(two), &o, &et, &e), 0);
    CU_ASSERT(et && et->nnodes == 2);
    rv_et_free(et);
}

/* A .tar.gz holding one ET (as PARAM ships them) reads like the ET. */
static void test_tar(void)
{
    char p[4096];
    size_t len = 0;
    snprintf(p, sizeof(p), "%s/hta/simple-add.et.json.gz", g_traces);
    unsigned char *json = rv_test_read_gz(p, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    size_t one = 512 + ((len + 511) & ~(size_t)511), tlen = 2 * one + 1024;
    unsigned char *tar = calloc(1, tlen);
    memcpy(tar, "simple-add.et.json", 18);
    memcpy(tar + 100, "0000644", 7);
    snprintf((char *)tar + 124, 12, "%011o", (unsigned)len);
    tar[156] = '0';
    memcpy(tar + 257, "ustar", 5);
    /* The header checksum, its own field counted as spaces. */
    memset(tar + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += tar[i];
    snprintf((char *)tar + 148, 8, "%06o", sum);
    memcpy(tar + 512, json, len);
    uLongf zcap = compressBound(tlen) + 64;
    unsigned char *gz = malloc(zcap);
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    CU_ASSERT_EQUAL_FATAL(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = tar;
    zs.avail_in = (uInt)tlen;
    zs.next_out = gz;
    zs.avail_out = (uInt)zcap;
    CU_ASSERT_EQUAL(deflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t gzlen = zs.total_out;
    deflateEnd(&zs);
    rv_et *et = NULL;
    rv_error e;
    int rc = rv_et_read_buffer(gz, gzlen, NULL, &et, &e);
    if (rc)
        fprintf(stderr, "\n  tar: %s\n", e.message);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(et && et->nnodes == json_nodes("hta/simple-add.et.json.gz"));
    rv_et_free(et);
    /* Two members are refused: which one is the ET is not ours to guess. */
    memcpy(tar + one, tar, one);
    rc = rv_et_read_buffer(tar, tlen, NULL, &et, &e);
    CU_ASSERT(rc != 0 && strstr(e.message, "more than one file") != NULL);
    free(gz);
    free(tar);
    free(json);
}

int main(void)
{
    g_traces = rv_test_require_shared_traces("hta/simple-add.et.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("et", NULL, NULL);
    CU_add_test(s, "public ETs ingest", test_ingest);
    CU_add_test(s, "node fields, both layouts", test_fields);
    CU_add_test(s, "simple-add joins by id", test_join_simple_add);
    CU_add_test(s, "DLRM joins by order", test_join_dlrm);
    CU_add_test(s, "malformed ETs refused", test_malformed);
    CU_add_test(s, "tar.gz archive", test_tar);
    return rv_test_run() ? 1 : 0;
}
