/* Per-op FLOPs and bytes (engine/rv_flops.c) and op shapes
 * (engine/rv_shapes.c): GEMM, convolution and attention counts equal their
 * closed forms (2·M·N·K, 2·N·K·C·R·S·P·Q, 4·B·H·L·L·E) on ops built by
 * hand; the shape-carrying public traces (Kineto record_shapes, and the
 * ETs joined to their Kineto traces) get whole-trace FLOPs > 0 with the
 * cost attributed to GPU tasks. The public-trace cases skip (77) without
 * RV_SHARED_TRACES; the hand-built ones always run. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/rv_et.h"
#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "reader/rv_kineto.h"
#include "graph/rv_precision.h"
#include "trace/rv_shapes.h"
#include "reader/rv_snapshot.h"
#include "common/rv_test_util.h"

static const char *g_traces;
static double g_dlrm_kineto; /* DLRM worker 0's FLOPs from Kineto shapes */

/* A one-op trace: op `name` with inputs given as shapes (ndims -1: a
 * non-tensor) and int values, and optionally one output shape. */
typedef struct argspec {
    int ndims;
    int64_t dims[6];
    int nvals;
    int64_t vals[4];
} argspec;

static rv_trace *one_op(const char *name, const argspec *in, int nin, const argspec *out)
{
    rv_trace *t = rv_trace_new();
    rv_event ev;
    rv_event_init(&ev);
    ev.cat = RV_CAT_CPU_OP;
    ev.name = rv_strtab_intern(&t->strings, name, strlen(name));
    ev.dur_ns = 10;
    CU_ASSERT_FATAL(rv_trace_push(t, &ev) == 0);
    rv_shape_arg args[16];
    int64_t ints[128];
    size_t k = 0;
    int na = 0;
    for (int i = 0; i < nin + (out ? 1 : 0); i++) {
        const argspec *s = i < nin ? &in[i] : out;
        rv_shape_arg *a = &args[na++];
        memset(a, 0, sizeof(*a));
        a->ndims = s->ndims;
        a->nvals = s->nvals ? s->nvals : -1;
        a->is_out = i >= nin;
        if (s->ndims >= 0) {
            a->ptype = RV_PT_FP16;
            a->itemsize = 2;
            a->dims = (uint32_t)k;
            for (int d = 0; d < s->ndims; d++)
                ints[k++] = s->dims[d];
        }
        if (s->nvals) {
            a->vals = (uint32_t)k;
            for (int d = 0; d < s->nvals; d++)
                ints[k++] = s->vals[d];
        }
    }
    CU_ASSERT_FATAL(rv_shapes_add(t, 0, args, (size_t)na, ints, k) == 0);
    return t;
}

static double cost_of(const char *name, const argspec *in, int nin, const argspec *out, int *cls)
{
    rv_trace *t = one_op(name, in, nin, out);
    rv_op_cost c;
    int ok = rv_flops_op(t, 0, &c);
    rv_trace_free(t);
    if (cls)
        *cls = ok ? c.cls : -1;
    return ok ? c.flops : -1;
}

#define NONE                                                                                       \
    {                                                                                              \
        .ndims = -1                                                                                \
    }
#define V2(a, b)                                                                                   \
    {                                                                                              \
        .ndims = -1, .nvals = 2, .vals = { a, b }                                                  \
    }

static argspec ten(int n, int64_t a, int64_t b, int64_t c, int64_t d)
{
    argspec s = {.ndims = n, .dims = {a, b, c, d}};
    return s;
}

/* The pointwise names, looked up by hash: one of each family, the first
 * and the last of the table, and names that are none of them. */
static void test_pointwise_names(void)
{
    static const struct {
        const char *name;
        double per; /* FLOPs per element; -1: not costed */
        int cls;
    } cases[] = {
        {"aten::layer_norm", 5, RV_FC_NORM},
        {"aten::native_batch_norm_backward", 10, RV_FC_NORM},
        {"aten::_log_softmax", 5, RV_FC_SOFTMAX},
        {"aten::_softmax_backward_data", 3, RV_FC_SOFTMAX},
        {"aten::add_", 1, RV_FC_ELEMWISE},
        {"aten::sign", 1, RV_FC_ELEMWISE},
        {"fbgemm::asynchronous_complete_cumsum", 0, RV_FC_ELEMWISE},
        {"aten::nll_loss_backward", 1, RV_FC_REDUCE},
        {"aten::_foreach_add_", 1, RV_FC_OPTIM},
        {"aten::view", -1, -1},
        {"aten::add_x", -1, -1},
        {"aten::ad", -1, -1},
        {"", -1, -1},
    };
    argspec x = ten(2, 64, 32, 0, 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int cls = -2;
        double f = cost_of(cases[i].name, &x, 1, NULL, &cls);
        CU_ASSERT_EQUAL(cls, cases[i].cls);
        CU_ASSERT_DOUBLE_EQUAL(f, cases[i].per < 0 ? -1 : cases[i].per * 64 * 32, 1e-9);
    }
}

static void test_gemm(void)
{
    const double M = 512, N = 1024, K = 768, B = 12;
    argspec mm[2] = {ten(2, 512, 768, 0, 0), ten(2, 768, 1024, 0, 0)};
    int cls;
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::mm", mm, 2, NULL, &cls), 2 * M * N * K, 0.5);
    CU_ASSERT_EQUAL(cls, RV_FC_GEMM);
    CU_ASSERT_DOUBLE_EQUAL(rv_flops_gemm(M, N, K), 2 * M * N * K, 0.5);
    argspec addmm[5] = {ten(1, 1024, 0, 0, 0), ten(2, 512, 768, 0, 0), ten(2, 768, 1024, 0, 0),
                        NONE, NONE};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::addmm", addmm, 5, NULL, NULL), 2 * M * N * K, 0.5);
    argspec bmm[2] = {ten(3, 12, 512, 768, 0), ten(3, 12, 768, 1024, 0)};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::bmm", bmm, 2, NULL, NULL), 2 * B * M * N * K, 0.5);
    /* linear: x [4, 128, 768] by w [1024, 768]: M = 512. */
    argspec lin[3] = {ten(3, 4, 128, 768, 0), ten(2, 1024, 768, 0, 0), ten(1, 1024, 0, 0, 0)};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::linear", lin, 3, NULL, NULL), 2 * M * N * K, 0.5);
    /* matmul with batch on both sides. */
    argspec mat[2] = {ten(3, 12, 512, 768, 0), ten(3, 12, 768, 1024, 0)};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::matmul", mat, 2, NULL, NULL), 2 * B * M * N * K, 0.5);
    /* Missing shapes: no answer rather than a wrong one. */
    argspec bad[2] = {ten(2, 512, 768, 0, 0), NONE};
    CU_ASSERT_EQUAL(cost_of("aten::mm", bad, 2, NULL, NULL), -1);
}

static void test_conv(void)
{
    /* ResNet's first layer: x [32, 3, 224, 224], w [64, 3, 7, 7], stride
     * 2, padding 3: P = Q = (224 + 6 - 7) / 2 + 1 = 112. */
    const double n = 32, k = 64, c = 3, r = 7, s = 7, p = 112, q = 112;
    const double want = 2 * n * k * c * r * s * p * q;
    argspec conv2d[7] = {ten(4, 32, 3, 224, 224),
                         ten(4, 64, 3, 7, 7),
                         NONE,
                         V2(2, 2),
                         V2(3, 3),
                         V2(1, 1),
                         {.ndims = -1, .nvals = 1, .vals = {1}}};
    int cls;
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::conv2d", conv2d, 7, NULL, &cls), want, 0.5);
    CU_ASSERT_EQUAL(cls, RV_FC_CONV);
    CU_ASSERT_DOUBLE_EQUAL(rv_flops_conv(n, k, c, r * s, p * q), want, 0.5);
    /* The same from an ET's output shape, no stride given. */
    argspec conv_et[3] = {ten(4, 32, 3, 224, 224), ten(4, 64, 3, 7, 7), NONE};
    argspec out = ten(4, 32, 64, 112, 112);
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::convolution", conv_et, 3, &out, NULL), want, 0.5);
    /* Without output shape or stride/padding: refused. */
    CU_ASSERT_EQUAL(cost_of("aten::convolution", conv_et, 3, NULL, NULL), -1);
    /* Grouped (depthwise-like, g = 32): w [64, 2, 3, 3] on x [8, 64, 56, 56],
     * stride 1, padding 1: C/g = 2, P = Q = 56. */
    argspec grp[7] = {ten(4, 8, 64, 56, 56),
                      ten(4, 64, 2, 3, 3),
                      NONE,
                      V2(1, 1),
                      V2(1, 1),
                      V2(1, 1),
                      {.ndims = -1, .nvals = 1, .vals = {32}}};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::conv2d", grp, 7, NULL, NULL),
                           2.0 * 8 * 64 * 2 * 9 * 56 * 56, 0.5);
    /* Backward: grad input and grad weight, two forwards' worth. */
    argspec bwd[3] = {ten(4, 32, 64, 112, 112), ten(4, 32, 3, 224, 224), ten(4, 64, 3, 7, 7)};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::convolution_backward", bwd, 3, NULL, NULL), 2 * want,
                           0.5);
}

static void test_attention(void)
{
    const double b = 2, h = 8, l = 141, e = 64;
    argspec q[3] = {ten(4, 2, 8, 141, 64), ten(4, 2, 8, 141, 64), ten(4, 2, 8, 141, 64)};
    int cls;
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::scaled_dot_product_attention", q, 3, NULL, &cls),
                           4 * b * h * l * l * e, 0.5);
    CU_ASSERT_EQUAL(cls, RV_FC_ATTN);
    /* flash forward takes [B, L, H, E]. */
    argspec f[3] = {ten(4, 2, 141, 8, 64), ten(4, 2, 141, 8, 64), ten(4, 2, 141, 8, 64)};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::_flash_attention_forward", f, 3, NULL, NULL),
                           4 * b * h * l * l * e, 0.5);
    /* Elementwise: one per element of the largest input. */
    argspec add[3] = {ten(3, 2, 141, 512, 0), ten(3, 2, 141, 512, 0), NONE};
    CU_ASSERT_DOUBLE_EQUAL(cost_of("aten::add", add, 3, NULL, &cls), 2.0 * 141 * 512, 0.5);
    CU_ASSERT_EQUAL(cls, RV_FC_ELEMWISE);
    CU_ASSERT_EQUAL(cost_of("aten::some_custom_op", add, 3, NULL, NULL), -1);
}

/* The hardware rows mfu divides by: every GPU the issue names is found
 * from the names traces carry, and near names are not taken for them. */
static void test_hw_rows(void)
{
    static const struct {
        const char *trace_name, *row;
    } cases[] = {
        {"NVIDIA L4", "L4"},
        {"NVIDIA A10", "A10"},
        {"NVIDIA A10G", "A10"},
        {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"},
        {"NVIDIA H200", "H200-SXM"},
        {"NVIDIA B200", "B200"},
        {"AMD Instinct MI300X", "MI300X"},
        {"AMD Instinct MI250X", "MI250X"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const rv_hw *h = rv_hw_lookup(cases[i].trace_name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        CU_ASSERT_STRING_EQUAL(h->name, cases[i].row);
        CU_ASSERT(h->tflops[RV_DT_FP32] > 0 && h->hbm_gbps > 0 && h->sms > 0 && h->max_sm_mhz > 0);
    }
    CU_ASSERT_PTR_NULL(rv_hw_lookup("NVIDIA L40S"));
    CU_ASSERT_PTR_NULL(rv_hw_lookup("NVIDIA L40"));
    CU_ASSERT_DOUBLE_EQUAL(rv_hw_peak(rv_hw_lookup("NVIDIA L4"), RV_DT_BF16), 121, 1e-9);
    /* A10 has no fp8 path: its fp16 rate stands in. */
    CU_ASSERT_DOUBLE_EQUAL(rv_hw_peak(rv_hw_lookup("NVIDIA A10"), RV_DT_FP8), 125, 1e-9);
}

/* ---- public traces ---- */

static double report(const char *what, const rv_trace *t)
{
    rv_flops_trace f;
    CU_ASSERT_EQUAL_FATAL(rv_flops_of_trace(t, &f), 0);
    printf("\n  %s: ops with shapes %zu, costed %zu; GPU tasks %zu, costed %zu; %.4g GFLOP, "
           "%.4g MB",
           what, f.ops_with_shapes, f.ops_costed, f.gpu_tasks, f.gpu_tasks_costed,
           f.total_flops / 1e9, f.total_bytes / 1e6);
    CU_ASSERT(f.total_flops > 0);
    CU_ASSERT(f.gpu_tasks_costed > 0);
    /* What the tasks carry adds up to the ops' totals. */
    double sum = 0;
    for (size_t i = 0; i < t->nevents; i++)
        sum += f.flops[i];
    CU_ASSERT(fabs(sum - f.total_flops) <= 1e-6 * f.total_flops);
    double total = f.total_flops;
    rv_flops_trace_free(&f);
    return total;
}

static rv_trace *load_kineto(const char *rel)
{
    char p[4096];
    rv_trace *t = NULL;
    rv_error e;
    snprintf(p, sizeof(p), "%s/%s", g_traces, rel);
    if (rv_kineto_read_file(p, NULL, &t, &e) != 0)
        fprintf(stderr, "\n  %s: %s\n", rel, e.message);
    return t;
}

static void test_kineto_shapes(void)
{
    static const char *const rels[] = {"param/dlrm-8rank/worker0.kineto.json.gz",
                                       "tracelens/h100-bert-small-forward.json.gz",
                                       "tracelens/h100-falconsai-vit-forward.json.gz"};
    for (size_t i = 0; i < sizeof(rels) / sizeof(rels[0]); i++) {
        rv_trace *t = load_kineto(rels[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_EQUAL(t->shapes_source, RV_SHAPES_KINETO);
        CU_ASSERT(t->nop_shapes > 0);
        double fl = report(rels[i], t);
        if (i == 0)
            g_dlrm_kineto = fl;
        rv_trace_free(t);
    }
    /* Shapes and memory events survive the store's snapshot. */
    {
        rv_trace *t = load_kineto("tracelens/h100-bert-small-forward.json.gz"), *u = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        rv_error e;
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_EQUAL_FATAL(rv_snapshot_encode(t, 1, &buf, &len, &e), 0);
        CU_ASSERT_EQUAL_FATAL(rv_snapshot_decode(buf, len, &u, &e), 0);
        CU_ASSERT_EQUAL(u->shapes_source, t->shapes_source);
        CU_ASSERT_EQUAL_FATAL(u->nop_shapes, t->nop_shapes);
        CU_ASSERT_EQUAL_FATAL(u->nshape_args, t->nshape_args);
        CU_ASSERT_EQUAL_FATAL(u->nshape_ints, t->nshape_ints);
        CU_ASSERT(t->nmem > 0);
        CU_ASSERT_EQUAL_FATAL(u->nmem, t->nmem);
        CU_ASSERT(!memcmp(u->op_shapes, t->op_shapes, t->nop_shapes * sizeof(*t->op_shapes)));
        CU_ASSERT(!memcmp(u->shape_args, t->shape_args, t->nshape_args * sizeof(*t->shape_args)));
        CU_ASSERT(!memcmp(u->shape_ints, t->shape_ints, t->nshape_ints * sizeof(*t->shape_ints)));
        CU_ASSERT(!memcmp(u->mem, t->mem, t->nmem * sizeof(*t->mem)));
        free(buf);
        rv_trace_free(u);
        rv_trace_free(t);
    }
    /* A trace recorded without shapes has none. */
    rv_trace *t = load_kineto("hta/simple-add.kineto.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nop_shapes, 0);
    CU_ASSERT_EQUAL(t->shapes_source, RV_SHAPES_NONE);
    rv_trace_free(t);
}

static void test_et_shapes(void)
{
    static const char *const pairs[][2] = {
        {"hta/simple-add.et.json.gz", "hta/simple-add.kineto.json.gz"},
        {"param/dlrm-8rank/worker0.et.json.gz", "param/dlrm-8rank/worker0.kineto.json.gz"},
        {"param/linear-2080ti.et.json.gz", "param/linear-2080ti.kineto.json.gz"},
        {"param/resnet-2080ti.et.json.gz", "param/resnet-2080ti.kineto.json.gz"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        char p[4096];
        rv_et *et = NULL;
        rv_error e;
        rv_et_join j;
        if (!rv_test_have_trace(g_traces, pairs[i][1]))
            continue;
        snprintf(p, sizeof(p), "%s/%s", g_traces, pairs[i][0]);
        CU_ASSERT_EQUAL_FATAL(rv_et_read_file(p, NULL, &et, &e), 0);
        rv_trace *t = load_kineto(pairs[i][1]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_EQUAL_FATAL(rv_et_join_trace(et, t, &j, &e), 0);
        CU_ASSERT_EQUAL(rv_et_shapes_to_trace(et, &j, t), 0);
        CU_ASSERT_EQUAL(t->shapes_source, RV_SHAPES_ET);
        double fl = report(pairs[i][0], t);
        /* The same run's FLOPs from its ET and from its Kineto shapes agree. */
        if (i == 1 && g_dlrm_kineto > 0)
            CU_ASSERT(fabs(fl - g_dlrm_kineto) <= 0.01 * g_dlrm_kineto);
        rv_et_join_free(&j);
        rv_trace_free(t);
        rv_et_free(et);
    }
}

/* The op event named `name` of t, -1 when none. */
static int32_t find_op(const rv_trace *t, const char *name)
{
    for (size_t i = 0; i < t->nevents; i++)
        if (t->events[i].cat == RV_CAT_CPU_OP && !strcmp(rv_trace_str(t, t->events[i].name), name))
            return (int32_t)i;
    return -1;
}

/* fbgemm's table-batched embedding ops on DLRM worker 0 with its ET: the
 * split (Adagrad fused) lookup gathers L = 768 rows from T = 3 tables of
 * D = 16 into B = 128 bags (offsets T*B+1 = 385, total_D 48), the dense one
 * L = 32 rows from T = 2 tables into B = 16 bags. Bytes = rows x D x 4 +
 * indices (int64) + offsets (int64) + output (B x total_D x 4); FLOPs = the
 * pooled adds L x D. Backward (autograd's CppNode, only the gradient
 * [B, total_D] recorded, the dims from its forward op): indices sorted (4
 * passes), the gradient rows read, and per gathered row the weights and
 * Adagrad's momentum (one per element) read and written; the dense one
 * writes the gradient rows. The same from Kineto's shapes alone, which
 * keep no scalars: total_D is then the gradient's width. Before, none of
 * them had a cost. */
static void tbe_dlrm(int use_et)
{
    char p[4096];
    rv_et *et = NULL;
    rv_error e;
    rv_et_join j = {0};
    rv_trace *t = load_kineto("param/dlrm-8rank/worker0.kineto.json.gz");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    if (use_et) {
        snprintf(p, sizeof(p), "%s/%s", g_traces, "param/dlrm-8rank/worker0.et.json.gz");
        CU_ASSERT_EQUAL_FATAL(rv_et_read_file(p, NULL, &et, &e), 0);
        CU_ASSERT_EQUAL_FATAL(rv_et_join_trace(et, t, &j, &e), 0);
        CU_ASSERT_EQUAL_FATAL(rv_et_shapes_to_trace(et, &j, t), 0);
    }
    printf("\n  from %s:", use_et ? "the ET" : "Kineto shapes (total_D from the gradient)");
    static const struct {
        const char *fwd, *bwd;
        double B, T, L, D, table_rows, states;
    } cases[] = {
        {"fbgemm::split_embedding_codegen_lookup_adagrad_function",
         "torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>", 128, 3, 768, 16,
         640649648.0 / 16, 1},
        {"fbgemm::dense_embedding_codegen_lookup_function",
         "torch::autograd::CppNode<SplitLookupFunction_Dense_Op>", 16, 2, 32, 16, 112.0 / 16, 0},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        double B = cases[k].B, T = cases[k].T, L = cases[k].L, D = cases[k].D;
        double idx = L * 8, off = (T * B + 1) * 8, rows = L * D * 4;
        rv_op_cost c;
        int32_t f = find_op(t, cases[k].fwd), b = find_op(t, cases[k].bwd);
        CU_ASSERT_FATAL(f >= 0 && b >= 0);
        CU_ASSERT_EQUAL_FATAL(rv_flops_op(t, f, &c), 1);
        printf("\n  %s: %.0f FLOPs, %.0f B", cases[k].fwd, c.flops, c.bytes);
        CU_ASSERT_EQUAL(c.cls, RV_FC_EMBED);
        CU_ASSERT_DOUBLE_EQUAL(c.flops, L * D, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(c.bytes, rows + idx + off + B * T * D * 4, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(c.gather, rows, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(c.table_bytes, cases[k].table_rows * D * 4, 1e-9);
        CU_ASSERT_EQUAL_FATAL(rv_flops_op(t, b, &c), 1);
        printf("\n  %s: %.0f FLOPs, %.0f B", cases[k].bwd, c.flops, c.bytes);
        CU_ASSERT_EQUAL(c.cls, RV_FC_EMBED);
        double upd = cases[k].states ? 2 * rows + 2 * L * D * 4 : rows;
        CU_ASSERT_DOUBLE_EQUAL(c.gather, upd, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(c.bytes, 4 * idx + off + rows + upd, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(c.flops, L * D * (cases[k].states ? 6 : 1), 1e-9);
    }
    /* The lookups' kernels (forward, sort, backward with the fused
     * optimizer) carry the embedding class and its L2 terms. */
    rv_flops_trace fl;
    size_t nk = 0, nemb = 0;
    CU_ASSERT_EQUAL_FATAL(rv_flops_of_trace(t, &fl), 0);
    for (size_t i = 0; i < t->nevents; i++) {
        if (t->events[i].cat != RV_CAT_KERNEL ||
            !strstr(rv_trace_str(t, t->events[i].name), "embedding_"))
            continue;
        nk++;
        nemb += fl.cls[i] == RV_FC_EMBED && rv_flops_embed_of(&fl, (int32_t)i) != NULL;
    }
    printf("\n  embedding kernels %zu, costed as embedding %zu", nk, nemb);
    CU_ASSERT(nk >= 8);
    CU_ASSERT_EQUAL(nemb, nk);
    rv_flops_trace_free(&fl);
    if (use_et)
        rv_et_join_free(&j);
    rv_trace_free(t);
    rv_et_free(et);
}

static void test_tbe_dlrm(void)
{
    tbe_dlrm(1);
    tbe_dlrm(0);
}

int main(void)
{
    g_traces = rv_test_shared_traces("param/dlrm-8rank/worker0.kineto.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("flops", NULL, NULL);
    CU_add_test(s, "GEMM closed forms", test_gemm);
    CU_add_test(s, "pointwise names", test_pointwise_names);
    CU_add_test(s, "convolution closed forms", test_conv);
    CU_add_test(s, "attention and elementwise", test_attention);
    CU_add_test(s, "hardware rows", test_hw_rows);
    if (g_traces) {
        CU_add_test(s, "Kineto record_shapes traces", test_kineto_shapes);
        CU_add_test(s, "ETs joined to their Kineto traces", test_et_shapes);
        CU_add_test(s, "fbgemm table-batched embedding (DLRM)", test_tbe_dlrm);
    }
    unsigned bad = rv_test_run();
    if (bad)
        return 1;
    if (!g_traces) {
        printf("public traces absent (RV_SHARED_TRACES): their cases were skipped\n");
        return RV_TEST_SKIP;
    }
    return 0;
}
