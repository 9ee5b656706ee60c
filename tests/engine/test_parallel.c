/* Parallelism (issue 28, docs/models/parallel.md): layer instances, the
 * dimensions a trace runs, and the `parallel` what-if. The Qwen, DLRM and
 * HTA cases need the shared traces (skipped without them); the ResNet-50
 * sample and the DeepEP fixture ship with the repository. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "graph/rv_graph.h"
#include "graph/rv_layers.h"
#include "graph/rv_select.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

static const char *shared;
static const char *srcdir;

typedef struct loaded {
    rv_trace *tr;
    rv_graph *g;
    rv_sim *s;
} loaded;

static int load_path(const char *path, loaded *l)
{
    rv_error err;
    memset(l, 0, sizeof(*l));
    if (rv_kineto_read_file(path, NULL, &l->tr, &err) != 0 ||
        rv_graph_build(l->tr, NULL, &l->g, &err) != 0 || rv_sim_run(l->g, 0, &l->s, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        return -1;
    }
    return 0;
}

static int load_shared(const char *rel, loaded *l)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", shared, rel);
    return load_path(p, l);
}

static int load_repo(const char *rel, loaded *l)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", srcdir, rel);
    return load_path(p, l);
}

static void unload(loaded *l)
{
    rv_sim_free(l->s);
    rv_graph_free(l->g);
    rv_trace_free(l->tr);
    memset(l, 0, sizeof(*l));
}

/* The rendered answer of doc on l (new reference), or NULL with *rc set. */
static json_t *answer(const loaded *l, const char *doc, int *rc_out, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    json_t *o = NULL;
    rv_error_clear(err);
    int rc = rv_whatif_parse_text(doc, &w, err);
    if (!rc)
        rc = rv_run(l->g, l->s, w, &opts, &res, err);
    if (!rc)
        o = rv_run_render(res, "t");
    if (rc)
        fprintf(stderr, "\n  %s: %s (%s)\n", doc, err->message, err->field);
    if (rc_out)
        *rc_out = rc;
    rv_run_result_free(res);
    rv_whatif_free(w);
    return o;
}

/* ---- 1. layer instances ------------------------------------------------- */

static void test_qwen_layer_instances(void)
{
    loaded l;
    CU_ASSERT_EQUAL_FATAL(load_shared("tracelens/mi300-qwen-forward.json.gz", &l), 0);
    /* The reader keeps the module events and no other python event. */
    size_t npy = 0, nmod = 0;
    for (size_t i = 0; i < l.tr->nevents; i++) {
        if (l.tr->events[i].cat != RV_CAT_PYTHON)
            continue;
        const char *n = rv_trace_str(l.tr, l.tr->events[i].name);
        npy++;
        nmod += strncmp(n, "nn.Module: ", 11) == 0 || strstr(n, "): forward") != NULL;
    }
    CU_ASSERT(npy >= 316);
    CU_ASSERT_EQUAL(nmod, npy);
    const rv_layers *ly = l.g->layers;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ly);
    CU_ASSERT_STRING_EQUAL(ly->type, "Qwen2DecoderLayer");
    CU_ASSERT_EQUAL(ly->nlayers, 24);
    CU_ASSERT_EQUAL(ly->ninst, 24);
    /* Every layer runs kernels; the selector picks layer 17's only. */
    size_t per[25] = {0};
    for (size_t i = 0; i < l.g->ntasks; i++) {
        int32_t k = rv_layers_of_task(ly, i);
        if (l.g->tasks[i].kind == RV_TASK_GPU && k >= 0 && k < 24)
            per[k]++;
        else if (l.g->tasks[i].kind == RV_TASK_GPU)
            per[24]++;
    }
    for (int k = 0; k < 24; k++)
        CU_ASSERT(per[k] > 10);
    CU_ASSERT(per[3] == per[17]); /* the layers are alike */
    rv_select s;
    rv_error err;
    json_t *sel = json_pack("{s:i,s:s}", "layer_instance", 17, "kind", "kernel");
    CU_ASSERT_EQUAL_FATAL(rv_select_parse(sel, "select", &s, &err), 0);
    size_t n = 0, wrong = 0;
    for (size_t i = 0; i < l.g->ntasks; i++)
        if (rv_select_match(&s, l.g, i)) {
            n++;
            wrong += rv_layers_of_task(ly, i) != 17;
        }
    CU_ASSERT_EQUAL(n, per[17]);
    CU_ASSERT_EQUAL(wrong, 0);
    rv_select_clear(&s);
    json_decref(sel);
    /* Out of range is refused. */
    sel = json_pack("{s:i}", "layer_instance", -1);
    CU_ASSERT_EQUAL(rv_select_parse(sel, "select", &s, &err), RV_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.field, "select.layer_instance");
    json_decref(sel);
    /* A what-if scales that layer only. */
    int rc;
    json_t *a = answer(&l,
                       "{\"optimizations\":[{\"kind\":\"scale\",\"factor\":0,"
                       "\"select\":{\"layer_instance\":17,\"kind\":\"kernel\"}}]}",
                       &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *ap = json_array_get(json_object_get(a, "applied"), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ap, "tasks_scaled")), (json_int_t)per[17]);
    json_decref(a);
    unload(&l);
}

/* ---- 2. dimensions ------------------------------------------------------ */

/* The `parallelism` entry of dim in the answer, or NULL. */
static json_t *dim_entry(json_t *ans, const char *dim)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ans, "parallelism"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "dim")), dim) == 0)
            return e;
    }
    return NULL;
}

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static void check_embedding_data(const char *rel, int world)
{
    loaded l;
    rv_error err;
    int rc;
    if (!rv_test_have_trace(shared, rel))
        return;
    CU_ASSERT_EQUAL_FATAL(load_shared(rel, &l), 0);
    json_t *a = answer(&l, "{}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *emb = dim_entry(a, "embedding"), *data = dim_entry(a, "data");
    CU_ASSERT_PTR_NOT_NULL(emb);
    CU_ASSERT_PTR_NOT_NULL(data);
    CU_ASSERT_PTR_NULL(dim_entry(a, "unknown"));
    CU_ASSERT_PTR_NULL(dim_entry(a, "tensor"));
    if (emb && data) {
        CU_ASSERT(num(json_object_get(emb, "ops"), "all_to_all") > 0);
        CU_ASSERT(num(json_object_get(data, "ops"), "all_reduce") > 0);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(data, "degree")), world);
        CU_ASSERT(num(emb, "comm_us") > 0);
        CU_ASSERT(num(emb, "exposed_comm_us") <= num(emb, "comm_us"));
        CU_ASSERT(num(data, "exposed_comm_us") >= 0);
    }
    json_decref(a);
    unload(&l);
}

static void test_dlrm_dims(void)
{
    char rel[128];
    for (int k = 0; k < 8; k++) {
        snprintf(rel, sizeof(rel), "param/dlrm-8rank/worker%d.kineto.json.gz", k);
        check_embedding_data(rel, 8);
    }
}

static void test_hta16_dims(void)
{
    check_embedding_data("hta/a100-rank0-of-16-five-streams.json.gz", 16);
}

/* A pipelined step (the next batch's input exchange runs during the
 * backward): ZeRO-3's waits that would reverse the measured order are
 * left out and said so, never a cycle. */
static void test_hta16_zero3_pipelined(void)
{
    loaded l;
    rv_error err;
    int rc;
    if (!rv_test_have_trace(shared, "hta/a100-rank0-of-16-five-streams.json.gz"))
        return;
    CU_ASSERT_EQUAL_FATAL(load_shared("hta/a100-rank0-of-16-five-streams.json.gz", &l), 0);
    json_t *a = answer(&l, "{\"parallel\":{\"zero\":3}}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *e = NULL;
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(a, "applied"), i, x)
    {
        if (strcmp(json_string_value(json_object_get(x, "model")), "parallel") == 0)
            e = x;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "data")), 16);
    CU_ASSERT(json_integer_value(json_object_get(e, "edges_left_out")) > 0);
    json_decref(a);
    unload(&l);
}

/* DeepEP's dispatch and combine kernels are the expert dimension: two per
 * MoE layer (8 in the fixture's 4 layers). */
static void test_deepep_expert(void)
{
    loaded l;
    rv_error err;
    int rc;
    CU_ASSERT_EQUAL_FATAL(load_repo("tests/data/parallel/bert-deepep-moe.json.gz", &l), 0);
    json_t *a = answer(&l, "{}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *e = dim_entry(a, "expert");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_DOUBLE_EQUAL(num(e, "collectives"), 8, 1e-9);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "degree")), 8);
    CU_ASSERT(num(e, "comm_us") > 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(a, "parallelism")), 1);
    json_decref(a);
    unload(&l);
}

/* A single-GPU trace has no dimension. */
static void test_single_gpu_none(void)
{
    loaded l;
    rv_error err;
    int rc;
    CU_ASSERT_EQUAL_FATAL(load_shared("tracelens/mi300-qwen-forward.json.gz", &l), 0);
    json_t *a = answer(&l, "{}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT(json_is_array(json_object_get(a, "parallelism")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(a, "parallelism")), 0);
    json_decref(a);
    unload(&l);
}

/* ---- 3. the parallel what-if -------------------------------------------- */

static json_t *applied_model(json_t *ans, const char *model)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ans, "applied"), i, e)
    {
        const char *m = json_string_value(json_object_get(e, "model"));
        if (m && strcmp(m, model) == 0)
            return e;
    }
    return NULL;
}

static int has_warning(json_t *ans, const char *code)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ans, "warnings"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "code")), code) == 0)
            return 1;
    }
    return 0;
}

static double dim_num(json_t *entry, const char *dim, const char *key)
{
    return num(json_object_get(json_object_get(entry, "dimensions"), dim), key);
}

/* ZeRO-3 over 8 (MODELS.md E2): weights, gradients and optimizer state per
 * GPU at 1/8; 3 x 7/8 x the parameter bytes on the data dimension. */
static void test_resnet_zero3(void)
{
    loaded l;
    rv_error err;
    int rc;
    CU_ASSERT_EQUAL_FATAL(load_repo("data/samples/resnet50-v100-workers0.pt.trace.json.gz", &l), 0);
    json_t *a = answer(&l, "{\"parallel\":{\"data\":8,\"zero\":3}}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *mem = json_object_get(a, "memory");
    json_t *b = json_object_get(mem, "breakdown"),
           *pb = json_object_get(mem, "predicted_breakdown");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pb);
    static const char *const parts[] = {"weights", "gradients", "optimizer_state"};
    for (int k = 0; k < 3; k++) {
        double v = num(b, parts[k]);
        CU_ASSERT(v > 1e7);
        CU_ASSERT_DOUBLE_EQUAL(num(pb, parts[k]), v / 8, 1);
    }
    /* Activations are not sharded. */
    CU_ASSERT_DOUBLE_EQUAL(num(pb, "activations"), num(b, "activations"), 1);
    json_t *e = applied_model(a, "parallel");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    double psi = num(e, "parameter_bytes");
    CU_ASSERT_DOUBLE_EQUAL(psi, num(b, "weights"), 1);
    CU_ASSERT_DOUBLE_EQUAL(dim_num(e, "data", "comm_bytes_per_step"), 3 * 7.0 / 8 * psi,
                           1e-6 * psi);
    /* Per unit: an all-gather forward and backward and a reduce-scatter. */
    double units = num(e, "units");
    CU_ASSERT(units >= 2);
    CU_ASSERT_DOUBLE_EQUAL(dim_num(e, "data", "collectives_inserted_per_step"), 3 * units, 1e-9);
    json_t *fs = dim_entry(a, "fsdp");
    CU_ASSERT_PTR_NOT_NULL(fs);
    if (fs) {
        CU_ASSERT_DOUBLE_EQUAL(num(fs, "collectives"), 3 * units, 1e-9);
        CU_ASSERT(num(fs, "exposed_comm_us") >= 0);
        CU_ASSERT(num(fs, "exposed_comm_us") <= num(fs, "comm_us") + 1e-6);
    }
    CU_ASSERT(has_warning(a, "even_units"));
    CU_ASSERT(num(a, "predicted_us") >= num(a, "baseline_us") - 1e-6);
    json_decref(a);
    /* DDP (stage 0): 2 x 7/8 x the parameter bytes, all-reduced, nothing sharded. */
    a = answer(&l, "{\"parallel\":{\"data\":8,\"zero\":0}}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    e = applied_model(a, "parallel");
    CU_ASSERT_DOUBLE_EQUAL(dim_num(e, "data", "comm_bytes_per_step"), 2 * 7.0 / 8 * psi,
                           1e-6 * psi);
    pb = json_object_get(json_object_get(a, "memory"), "predicted_breakdown");
    CU_ASSERT_DOUBLE_EQUAL(num(pb, "weights"), psi, 1);
    CU_ASSERT_PTR_NOT_NULL(dim_entry(a, "data"));
    json_decref(a);
    /* No layer instances: tensor and pipeline are refused with the reason. */
    a = answer(&l, "{\"parallel\":{\"tensor\":2}}", &rc, &err);
    CU_ASSERT_PTR_NULL(a);
    CU_ASSERT_EQUAL(rc, RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(err.field, "parallel.tensor");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "layer instances"));
    unload(&l);
}

/* Tensor 2 (MODELS.md E3): GEMM time per GPU at most 0.6x, two all-reduces
 * per decoder layer. */
static void test_qwen_tensor2(void)
{
    loaded l;
    rv_error err;
    int rc;
    CU_ASSERT_EQUAL_FATAL(load_shared("tracelens/mi300-qwen-forward.json.gz", &l), 0);
    json_t *a = answer(&l, "{\"parallel\":{\"tensor\":2}}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *e = applied_model(a, "parallel");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    double before = num(e, "gemm_us_before"), after = num(e, "gemm_us_after");
    CU_ASSERT(before > 10000);
    CU_ASSERT(after <= 0.6 * before);
    CU_ASSERT_DOUBLE_EQUAL(dim_num(e, "tensor", "collectives_inserted_per_step"), 2 * 24, 1e-9);
    /* b*s*h of bf16: 16 x 559 x 1024 x 2 bytes, 2(T-1)/T of it per all-reduce. */
    CU_ASSERT_DOUBLE_EQUAL(num(e, "message_bytes"), 16.0 * 559 * 1024 * 2, 1);
    CU_ASSERT_DOUBLE_EQUAL(dim_num(e, "tensor", "comm_bytes_per_step"),
                           48 * num(e, "message_bytes"), 1);
    json_t *t = dim_entry(a, "tensor");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_DOUBLE_EQUAL(num(t, "collectives"), 48, 1e-9);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(t, "degree")), 2);
    CU_ASSERT(num(t, "comm_us") > 0);
    CU_ASSERT(has_warning(a, "tensor_assumed"));
    json_decref(a);
    unload(&l);
}

/* Pipeline 4 x 8 micro-batches, 1F1B: bubble (p-1)/(m+p-1) = 3/11. */
static void test_qwen_pipeline(void)
{
    loaded l;
    rv_error err;
    int rc;
    CU_ASSERT_EQUAL_FATAL(load_shared("tracelens/mi300-qwen-forward.json.gz", &l), 0);
    json_t *a = answer(&l, "{\"parallel\":{\"pipeline\":4,\"microbatches\":8}}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *e = applied_model(a, "parallel");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    /* Ratios are rounded to 4 decimals in answers (docs/whatif.md). */
    CU_ASSERT_DOUBLE_EQUAL(num(e, "bubble_share"), 3.0 / 11, 5e-5);
    /* Each stage: a quarter of the layers, 11 slots of 1/8 of the batch. */
    double f = num(a, "predicted_us") / num(a, "baseline_us");
    CU_ASSERT(f >= 11.0 / 32 - 0.01 && f <= 11.0 / 32 + 0.05);
    CU_ASSERT_DOUBLE_EQUAL(dim_num(e, "pipeline", "collectives_inserted_per_step"), 3, 1e-9);
    CU_ASSERT_PTR_NOT_NULL(dim_entry(a, "pipeline"));
    CU_ASSERT(has_warning(a, "pipeline_assumed"));
    json_decref(a);
    /* 3 does not divide Qwen1.5-0.5B's 16 attention heads. */
    a = answer(&l, "{\"parallel\":{\"tensor\":3}}", &rc, &err);
    CU_ASSERT_PTR_NULL(a);
    CU_ASSERT_EQUAL(rc, RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(err.field, "parallel.tensor");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "16 attention heads"));
    /* 5 stages do not divide 24 layers. */
    a = answer(&l, "{\"parallel\":{\"pipeline\":5}}", &rc, &err);
    CU_ASSERT_PTR_NULL(a);
    CU_ASSERT_EQUAL(rc, RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(err.field, "parallel.pipeline");
    json_decref(a);
    unload(&l);
}

/* Expert degree re-times DeepEP's all-to-alls by the off-rank share. */
static void test_deepep_expert_degree(void)
{
    loaded l;
    rv_error err;
    int rc;
    CU_ASSERT_EQUAL_FATAL(load_repo("tests/data/parallel/bert-deepep-moe.json.gz", &l), 0);
    json_t *base = answer(&l, "{}", &rc, &err);
    json_t *a = answer(&l, "{\"parallel\":{\"expert\":2}}", &rc, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(base);
    json_t *e = applied_model(a, "parallel");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "expert_kernels_retimed")), 8);
    /* (2-1)/2 over (8-1)/8 of the traced time. */
    CU_ASSERT_DOUBLE_EQUAL(num(dim_entry(a, "expert"), "comm_us"),
                           num(dim_entry(base, "expert"), "comm_us") * (0.5 / 0.875), 0.05);
    json_decref(a);
    json_decref(base);
    unload(&l);
}

static void test_parse(void)
{
    rv_whatif *w = NULL;
    rv_error err;
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{\"parallel\":{\"zero\":4}}", &w, &err), RV_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.field, "parallel.zero");
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{\"parallel\":{\"tensr\":2}}", &w, &err), RV_ERR_INVALID);
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{\"parallel\":3}", &w, &err), RV_ERR_INVALID);
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{\"parallel\":{}}", &w, &err), 0);
    CU_ASSERT_FALSE(rv_whatif_is_empty(w));
    rv_whatif_free(w);
}

int main(void)
{
    srcdir = getenv("RV_SOURCE_DIR");
    if (!srcdir)
        srcdir = ".";
    shared = rv_test_shared_traces("tracelens/mi300-qwen-forward.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite su = CU_add_suite("parallel", NULL, NULL);
    CU_add_test(su, "deepep_expert", test_deepep_expert);
    CU_add_test(su, "deepep_expert_degree", test_deepep_expert_degree);
    CU_add_test(su, "resnet_zero3", test_resnet_zero3);
    CU_add_test(su, "parse", test_parse);
    if (shared) {
        CU_add_test(su, "qwen_layer_instances", test_qwen_layer_instances);
        CU_add_test(su, "dlrm_dims", test_dlrm_dims);
        CU_add_test(su, "hta16_dims", test_hta16_dims);
        CU_add_test(su, "hta16_zero3_pipelined", test_hta16_zero3_pipelined);
        CU_add_test(su, "single_gpu_none", test_single_gpu_none);
        CU_add_test(su, "qwen_tensor2", test_qwen_tensor2);
        CU_add_test(su, "qwen_pipeline", test_qwen_pipeline);
    } else {
        printf("note: RV_SHARED_TRACES not set: the Qwen, DLRM and HTA cases are skipped\n");
    }
    return rv_test_run() ? 1 : 0;
}
