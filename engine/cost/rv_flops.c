/* Per-op FLOPs and bytes from argument shapes, and their attribution to
 * GPU tasks; see rv_flops.h and docs/models/flops.md. */
#include "cost/rv_flops.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/rv_kname.h"
#include "trace/rv_shapes.h"

/* The inputs of one op, positional as in the op's schema. */
typedef struct opargs {
    const rv_trace *t;
    int32_t event;
    const rv_shape_arg *in[64];
    int nin;
    const rv_shape_arg *out0; /* first output (ETs), NULL */
} opargs;

static int is_tensor(const rv_shape_arg *a)
{
    return a && a->ndims >= 0 && (a->ptype != RV_PT_NONE || a->itemsize > 0);
}

/* Input i when it is a tensor of rank >= min_rank, else NULL. */
static const rv_shape_arg *tin(const opargs *o, int i, int min_rank)
{
    if (i < 0 || i >= o->nin || !is_tensor(o->in[i]) || o->in[i]->ndims < min_rank)
        return NULL;
    return o->in[i];
}

static double dim(const opargs *o, const rv_shape_arg *a, int i)
{
    const int64_t *d = rv_shapes_dims(o->t, a);
    if (i < 0)
        i += a->ndims;
    return d && i >= 0 && i < a->ndims && d[i] > 0 ? (double)d[i] : 0;
}

static double numel(const opargs *o, const rv_shape_arg *a)
{
    if (!a || a->ndims < 0)
        return 0;
    double n = 1;
    const int64_t *d = rv_shapes_dims(o->t, a);
    for (int i = 0; i < a->ndims; i++)
        n *= d[i] > 0 ? (double)d[i] : 0;
    return n;
}

static double isz(const rv_shape_arg *a)
{
    return a && a->itemsize ? a->itemsize : 4; /* unknown: fp32 */
}

static double tbytes(const opargs *o, const rv_shape_arg *a)
{
    return numel(o, a) * isz(a);
}

/* Int values of input i (a list or a scalar), or NULL. */
static const int64_t *ivals(const opargs *o, int i, int *n)
{
    if (i < 0 || i >= o->nin || o->in[i]->nvals < 0)
        return NULL;
    *n = o->in[i]->nvals;
    return rv_shapes_vals(o->t, o->in[i]);
}

double rv_flops_gemm(double m, double n, double k)
{
    return 2.0 * m * n * k;
}

double rv_flops_conv(double n, double k, double c, double rs, double pq)
{
    return 2.0 * n * k * c * rs * pq;
}

static int name_is(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(name, *list))
            return 1;
    return 0;
}

/* The bytes of every tensor input plus an output the size of the largest. */
static double io_bytes(const opargs *o, double *largest)
{
    double b = 0, big = 0, bigb = 0;
    for (int i = 0; i < o->nin; i++)
        if (is_tensor(o->in[i])) {
            double n = numel(o, o->in[i]);
            b += n * isz(o->in[i]);
            if (n > big) {
                big = n;
                bigb = n * isz(o->in[i]);
            }
        }
    if (largest)
        *largest = big;
    return b + (o->out0 ? tbytes(o, o->out0) : bigb);
}

static int gemm(const opargs *o, const char *n, rv_op_cost *c)
{
    const rv_shape_arg *a, *b;
    double m, k, nn, batch = 1;
    if (!strcmp(n, "aten::mm")) {
        if (!(a = tin(o, 0, 2)) || !(b = tin(o, 1, 2)))
            return 0;
        m = dim(o, a, 0), k = dim(o, a, 1), nn = dim(o, b, 1);
    } else if (!strcmp(n, "aten::addmm")) {
        if (!(a = tin(o, 1, 2)) || !(b = tin(o, 2, 2)))
            return 0;
        m = dim(o, a, 0), k = dim(o, a, 1), nn = dim(o, b, 1);
    } else if (!strcmp(n, "aten::bmm") || !strcmp(n, "aten::baddbmm")) {
        int s = !strcmp(n, "aten::baddbmm"); /* self comes first */
        if (!(a = tin(o, s, 3)) || !(b = tin(o, s + 1, 3)))
            return 0;
        batch = dim(o, a, 0), m = dim(o, a, 1), k = dim(o, a, 2), nn = dim(o, b, 2);
    } else if (!strcmp(n, "aten::linear")) {
        /* x [..., K] times w [N, K]^T. */
        if (!(a = tin(o, 0, 1)) || !(b = tin(o, 1, 2)))
            return 0;
        k = dim(o, a, -1), nn = dim(o, b, 0);
        m = k > 0 ? numel(o, a) / k : 0;
    } else if (!strcmp(n, "aten::matmul")) {
        if (!(a = tin(o, 0, 1)) || !(b = tin(o, 1, 1)))
            return 0;
        k = dim(o, a, -1);
        nn = b->ndims >= 2 ? dim(o, b, -1) : 1;
        if (b->ndims <= 2) {
            m = k > 0 ? numel(o, a) / k : 0; /* a's leading dims fold into M */
        } else {
            m = a->ndims >= 2 ? dim(o, a, -2) : 1;
            double ba = a->ndims > 2 ? numel(o, a) / (m * k > 0 ? m * k : 1) : 1;
            double bb = numel(o, b) / (dim(o, b, -2) * nn > 0 ? dim(o, b, -2) * nn : 1);
            batch = ba > bb ? ba : bb;
        }
    } else {
        return 0;
    }
    c->flops = batch * rv_flops_gemm(m, nn, k);
    c->bytes = (batch * (m * k + k * nn + m * nn)) * isz(a);
    c->cls = RV_FC_GEMM;
    return c->flops > 0;
}

/* Output spatial size i of a convolution: from the output shape when the
 * ET gives it, else from stride, padding and dilation. */
static double conv_out(const opargs *o, const rv_shape_arg *x, const rv_shape_arg *w, int i, int sp,
                       int pp, int dp)
{
    if (o->out0 && o->out0->ndims == x->ndims)
        return dim(o, o->out0, 2 + i);
    int ns = 0, np = 0, nd = 0;
    const int64_t *st = ivals(o, sp, &ns), *pa = ivals(o, pp, &np), *di = ivals(o, dp, &nd);
    if (!st || !pa)
        return 0; /* not enough to say */
    double s = ns ? (double)st[ns > i ? i : 0] : 1, p = np ? (double)pa[np > i ? i : 0] : 0;
    double d = di && nd ? (double)di[nd > i ? i : 0] : 1;
    double h = dim(o, x, 2 + i), r = dim(o, w, 2 + i);
    if (s <= 0)
        return 0;
    double q = (h + 2 * p - d * (r - 1) - 1) / s;
    return q >= 0 ? (double)(int64_t)q + 1 : 0;
}

/* Old Kineto traces record no stride or padding: the output's spatial
 * size is then read from the next op on the thread that takes an
 * [N, K, ...] tensor of the same rank (the conv's norm or activation). */
#define NEXT_OPS 64
static double conv_out_next(const opargs *o, const rv_shape_arg *x, double nb, double k, int i)
{
    const rv_trace *t = o->t;
    const rv_event *me = &t->events[o->event];
    int seen = 0;
    for (size_t e = (size_t)o->event + 1; e < t->nevents && seen < NEXT_OPS; e++) {
        const rv_event *ev = &t->events[e];
        if (ev->cat != RV_CAT_CPU_OP || ev->pid != me->pid || ev->tid != me->tid)
            continue;
        seen++;
        /* The conv's own wrappers carry its input, not its output. */
        if (strstr(rv_trace_str(t, ev->name), "conv"))
            continue;
        const rv_op_shape *s = rv_shapes_of(t, (int32_t)e);
        for (uint32_t a = 0; s && a < s->nargs; a++) {
            const rv_shape_arg *y = &t->shape_args[s->first + a];
            if (is_tensor(y) && y->ndims == x->ndims && dim(o, y, 0) == nb && dim(o, y, 1) == k)
                return dim(o, y, 2 + i);
        }
    }
    return 0;
}

static int conv(const opargs *o, const char *n, rv_op_cost *c)
{
    /* Argument positions of stride, padding, dilation, transposed. */
    static const struct {
        const char *name;
        int sp, pp, dp, tp;
    } tab[] = {
        {"aten::conv1d", 3, 4, 5, -1},
        {"aten::conv2d", 3, 4, 5, -1},
        {"aten::conv3d", 3, 4, 5, -1},
        {"aten::convolution", 3, 4, 5, 6},
        {"aten::_convolution", 3, 4, 5, 6},
        {"aten::cudnn_convolution", 3, 2, 4, -1},
        {"aten::miopen_convolution", 4, 3, 5, -1},
        {"aten::mkldnn_convolution", 4, 3, 5, -1},
    };
    if (!strcmp(n, "aten::cudnn_convolution_backward") ||
        !strcmp(n, "aten::miopen_convolution_backward") ||
        !strcmp(n, "aten::cudnn_convolution_backward_input")) {
        /* Older PyTorch: (input or its size, grad_output, weight, ...). */
        const rv_shape_arg *go = tin(o, 1, 3), *w = tin(o, 2, 3);
        if (!go || !w)
            return 0;
        double kv = 1;
        for (int i = 2; i < w->ndims; i++)
            kv *= dim(o, w, i);
        int passes = strstr(n, "_input") ? 1 : 2;
        c->flops = passes * 2.0 * numel(o, go) * dim(o, w, 1) * kv;
        c->bytes = 2 * tbytes(o, go) + 2 * tbytes(o, w) + (tin(o, 0, 3) ? tbytes(o, o->in[0]) : 0);
        c->cls = RV_FC_CONV;
        return c->flops > 0;
    }
    if (!strcmp(n, "aten::convolution_backward")) {
        /* (grad_output [N, K, P...], input, weight [K, C/g, R...], ...):
         * grad input and grad weight, each a forward's worth. */
        const rv_shape_arg *go = tin(o, 0, 3), *x = tin(o, 1, 3), *w = tin(o, 2, 3);
        if (!go || !x || !w)
            return 0;
        double kv = 1;
        for (int i = 2; i < w->ndims; i++)
            kv *= dim(o, w, i);
        int nm = 0;
        const int64_t *mask = ivals(o, 10, &nm);
        int passes = mask && nm >= 2 ? (mask[0] != 0) + (mask[1] != 0) : 2;
        c->flops = passes * 2.0 * numel(o, go) * dim(o, w, 1) * kv;
        c->bytes = tbytes(o, go) + 2 * tbytes(o, x) + 2 * tbytes(o, w);
        c->cls = RV_FC_CONV;
        return c->flops > 0;
    }
    for (size_t t = 0; t < sizeof(tab) / sizeof(tab[0]); t++) {
        if (strcmp(n, tab[t].name) != 0)
            continue;
        const rv_shape_arg *x = tin(o, 0, 3), *w = tin(o, 1, 3);
        if (!x || !w || w->ndims != x->ndims)
            return 0;
        int nt = 0;
        const int64_t *tr = ivals(o, tab[t].tp, &nt);
        double kv = 1, out = 1;
        for (int i = 2; i < w->ndims; i++)
            kv *= dim(o, w, i);
        if (tr && nt == 1 && tr[0]) {
            /* Transposed: every input pixel meets the whole kernel. */
            c->flops = 2.0 * numel(o, x) * dim(o, w, 1) * kv;
        } else {
            for (int i = 0; i < x->ndims - 2; i++) {
                double q = conv_out(o, x, w, i, tab[t].sp, tab[t].pp, tab[t].dp);
                out *= q > 0 ? q : conv_out_next(o, x, dim(o, x, 0), dim(o, w, 0), i);
            }
            c->flops = rv_flops_conv(dim(o, x, 0), dim(o, w, 0), dim(o, w, 1), kv, out);
        }
        c->bytes = tbytes(o, x) + tbytes(o, w) + dim(o, x, 0) * dim(o, w, 0) * out * isz(x);
        c->cls = RV_FC_CONV;
        return c->flops > 0;
    }
    return 0;
}

static int attention(const opargs *o, const char *n, rv_op_cost *c)
{
    static const char *const bhle[] = {"aten::scaled_dot_product_attention",
                                       "aten::_scaled_dot_product_flash_attention",
                                       "aten::_scaled_dot_product_efficient_attention",
                                       "aten::_scaled_dot_product_cudnn_attention",
                                       "aten::_scaled_dot_product_attention_math",
                                       NULL};
    static const char *const blhe[] = {"aten::_flash_attention_forward",
                                       "aten::_efficient_attention_forward", NULL};
    static const char *const bwd[] = {"aten::_scaled_dot_product_flash_attention_backward",
                                      "aten::_scaled_dot_product_efficient_attention_backward",
                                      "aten::_scaled_dot_product_cudnn_attention_backward",
                                      "aten::_flash_attention_backward",
                                      "aten::_efficient_attention_backward",
                                      NULL};
    int layout; /* 0: [B, H, L, E]; 1: [B, L, H, E] */
    double scale = 1;
    int first = 0;
    if (name_is(n, bhle))
        layout = 0;
    else if (name_is(n, blhe))
        layout = 1;
    else if (name_is(n, bwd)) {
        /* Backward: grad_out first, then q, k, v; 2.5x the forward's
         * matmuls (dV, dP, dQ, dK plus the recomputed scores). */
        layout = strstr(n, "_scaled_dot_product") ? 0 : 1;
        scale = 2.5;
        first = 1;
    } else
        return 0;
    const rv_shape_arg *q = tin(o, first, 4), *k = tin(o, first + 1, 4), *v = tin(o, first + 2, 4);
    if (!q || !k || !v)
        return 0;
    double b = dim(o, q, 0), h = dim(o, q, layout ? 2 : 1), lq = dim(o, q, layout ? 1 : 2);
    double lk = dim(o, k, layout ? 1 : 2), e = dim(o, q, 3), ev = dim(o, v, 3);
    /* Q K^T and P V; softmax not counted. */
    c->flops = scale * (2.0 * b * h * lq * lk * e + 2.0 * b * h * lq * lk * ev);
    c->bytes = scale * (2 * tbytes(o, q) + tbytes(o, k) + tbytes(o, v));
    c->cls = RV_FC_ATTN;
    return c->flops > 0;
}

static int tbe_forward(const opargs *o, const char *n, rv_op_cost *c);
static int tbe_backward(const opargs *o, const char *n, rv_op_cost *c);

static int embedding(const opargs *o, const char *n, rv_op_cost *c)
{
    const rv_shape_arg *w, *idx;
    if (tbe_forward(o, n, c) || tbe_backward(o, n, c))
        return 1;
    if (!strcmp(n, "aten::embedding") || !strcmp(n, "aten::embedding_bag") ||
        !strcmp(n, "aten::_embedding_bag")) {
        if (!(w = tin(o, 0, 2)) || !(idx = tin(o, 1, 1)))
            return 0;
        double rows = numel(o, idx), d = dim(o, w, 1);
        c->flops = strstr(n, "bag") ? rows * d : 0; /* bags sum their rows */
        c->bytes = rows * d * isz(w) * 2 + tbytes(o, idx);
    } else if (!strcmp(n, "aten::embedding_dense_backward") ||
               !strcmp(n, "aten::embedding_backward")) {
        /* (grad [..., D], indices, num_weights, ...): rows scattered back. */
        if (!(w = tin(o, 0, 1)) || !(idx = tin(o, 1, 1)))
            return 0;
        c->flops = numel(o, w);
        c->bytes = 2 * tbytes(o, w) + tbytes(o, idx);
    } else {
        return 0;
    }
    c->cls = RV_FC_EMBED;
    return c->bytes > 0;
}

/* fbgemm's table-batched embedding ops (TorchRec / DLRM), argument
 * positions as in their schemas: the split op (with the optimizer fused
 * into its backward) and the dense one (plain gradient). */
typedef struct tbe_args {
    int weights, d_offsets, total_d, indices, offsets, pooling, per_sample, states;
} tbe_args;

static const tbe_args tbe_split = {1, 6, 7, 11, 12, 13, 14, 17};
static const tbe_args tbe_dense = {0, 2, 3, 7, 8, 9, 10, -1};

/* What one table-batched lookup reads: T tables of D (average) columns, B
 * bags per table, L rows gathered in all. */
typedef struct tbe_dims {
    double tables, bags, rows, d, total_d, wsz, table_bytes;
    double state_per_row; /* optimizer state bytes per gathered row */
    double idx_bytes, off_bytes, per_sample_bytes;
    int pooled;
} tbe_dims;

static const tbe_args *tbe_of(const char *n)
{
    static const char sp[] = "fbgemm::split_embedding_codegen_lookup_";
    size_t ln = strlen(n);
    if (!strcmp(n, "fbgemm::dense_embedding_codegen_lookup_function"))
        return &tbe_dense;
    if (!strncmp(n, sp, sizeof(sp) - 1) && ln > 9 && !strcmp(n + ln - 9, "_function"))
        return &tbe_split;
    return NULL;
}

/* The op's inputs from its shape record. */
static void args_of(const rv_trace *t, const rv_op_shape *s, opargs *o)
{
    memset(o, 0, sizeof(*o));
    o->t = t;
    o->event = s->event;
    for (uint32_t i = 0; i < s->nargs; i++) {
        const rv_shape_arg *a = &t->shape_args[s->first + i];
        if (!a->is_out && o->nin < (int)(sizeof(o->in) / sizeof(o->in[0])))
            o->in[o->nin++] = a;
    }
}

/* total_D is the recorded scalar, else total_d_hint (0: none): Kineto's
 * record_shapes keeps no scalars, and the backward's gradient is
 * [B, total_D]. */
static int tbe_dims_of(const opargs *o, const tbe_args *a, double total_d_hint, tbe_dims *d)
{
    const rv_shape_arg *w = tin(o, a->weights, 1), *dof = tin(o, a->d_offsets, 1);
    const rv_shape_arg *idx = tin(o, a->indices, 1), *off = tin(o, a->offsets, 1);
    int n = 0;
    const int64_t *td = ivals(o, a->total_d, &n);
    memset(d, 0, sizeof(*d));
    if (!w || !dof || !idx || !off || numel(o, dof) < 2)
        return 0;
    d->total_d = td && n == 1 && td[0] > 0 ? (double)td[0] : total_d_hint;
    if (d->total_d <= 0)
        return 0;
    d->tables = numel(o, dof) - 1;
    d->bags = (numel(o, off) - 1) / d->tables;
    d->rows = numel(o, idx);
    d->d = d->total_d / d->tables;
    d->wsz = isz(w);
    d->table_bytes = tbytes(o, w);
    /* UVM-placed tables: dev_weights is empty, uvm_weights holds them. */
    if (d->table_bytes <= 0 && tin(o, a->weights + 1, 1))
        d->table_bytes = tbytes(o, o->in[a->weights + 1]);
    d->idx_bytes = tbytes(o, idx);
    d->off_bytes = tbytes(o, off);
    const int64_t *pm = ivals(o, a->pooling, &n);
    d->pooled = !(pm && n == 1 && pm[0] == 2); /* 0 sum, 1 mean, 2 none */
    const rv_shape_arg *ps = tin(o, a->per_sample, 1);
    d->per_sample_bytes = ps && ps->ptype != RV_PT_NONFLOAT ? tbytes(o, ps) : 0;
    /* Optimizer states: floating tensors after the lookup's own arguments;
     * a state the size of the tables is per element (Adagrad's momentum),
     * a smaller one per row (row-wise Adagrad). */
    for (int i = a->states; a->states >= 0 && i < o->nin && d->table_bytes > 0; i++) {
        const rv_shape_arg *s = tin(o, i, 1);
        if (s && (s->ptype == RV_PT_FP32 || s->ptype == RV_PT_FP16 || s->ptype == RV_PT_BF16))
            d->state_per_row += tbytes(o, s) / d->table_bytes * d->d * d->wsz;
    }
    return d->bags > 0 && d->rows > 0 && d->d > 0;
}

/* The gradient [B, total_D] of a forward lookup without a recorded
 * total_D: the first backward op of its name after it in time, on the same
 * process, with B rows; 0 when none. */
static double tbe_total_d_from_backward(const opargs *o, const char *n, double bags)
{
    static const char split[] = "fbgemm::split_embedding_codegen_lookup_";
    const rv_trace *t = o->t;
    const rv_event *me = &t->events[o->event];
    char want[160];
    size_t ln = strlen(n);
    if (!strcmp(n, "fbgemm::dense_embedding_codegen_lookup_function"))
        snprintf(want, sizeof(want), "torch::autograd::CppNode<SplitLookupFunction_Dense_Op>");
    else if (ln > sizeof(split) - 1 + 9 && ln - (sizeof(split) - 1) - 9 <= 64)
        snprintf(want, sizeof(want), "torch::autograd::CppNode<SplitLookupFunction_%.*s_Op>",
                 (int)(ln - (sizeof(split) - 1) - 9), n + sizeof(split) - 1);
    else
        return 0;
    int64_t best = INT64_MAX;
    double td = 0;
    for (size_t k = 0; k < t->nop_shapes; k++) {
        const rv_op_shape *s = &t->op_shapes[k];
        const rv_event *ev = &t->events[s->event];
        if (ev->cat != RV_CAT_CPU_OP || ev->pid != me->pid || ev->ts_ns <= me->ts_ns ||
            ev->ts_ns >= best || strcmp(rv_trace_str(t, ev->name), want) != 0)
            continue;
        opargs b;
        args_of(t, s, &b);
        const rv_shape_arg *g = tin(&b, 0, 2);
        if (g && g->ndims == 2 && dim(&b, g, 0) == bags && dim(&b, g, 1) > 0) {
            td = dim(&b, g, 1);
            best = ev->ts_ns;
        }
    }
    return td;
}

/* Forward: L rows of D gathered, summed into B x T bags. */
static int tbe_forward(const opargs *o, const char *n, rv_op_cost *c)
{
    const tbe_args *a = tbe_of(n);
    tbe_dims d;
    if (!a)
        return 0;
    if (!tbe_dims_of(o, a, 0, &d)) {
        /* No total_D recorded (Kineto): the bags from a provisional width. */
        if (!tbe_dims_of(o, a, 1, &d) ||
            !tbe_dims_of(o, a, tbe_total_d_from_backward(o, n, d.bags), &d))
            return 0;
    }
    double out = o->out0 ? tbytes(o, o->out0) : d.bags * d.total_d * d.wsz;
    c->gather = d.rows * d.d * d.wsz;
    c->table_bytes = d.table_bytes;
    c->flops = d.pooled ? d.rows * d.d * (d.per_sample_bytes > 0 ? 2 : 1) : 0;
    c->bytes = c->gather + d.idx_bytes + d.off_bytes + d.per_sample_bytes + out;
    c->cls = RV_FC_EMBED;
    return 1;
}

/* The forward op a table-batched backward (autograd's
 * CppNode<SplitLookupFunction_<opt>_Op>, whose only shape is the output
 * gradient [B, total_D]) belongs to: the latest such op before it in time,
 * on the same process, with that output size. Events come thread by
 * thread, so every op with shapes is looked at. */
static int tbe_forward_of(const opargs *o, const char *n, tbe_dims *d)
{
    static const char pre[] = "torch::autograd::CppNode<SplitLookupFunction_";
    const rv_trace *t = o->t;
    const rv_shape_arg *g = tin(o, 0, 2);
    char want[160];
    if (strncmp(n, pre, sizeof(pre) - 1) != 0 || !g)
        return 0;
    const char *opt = n + sizeof(pre) - 1, *end = strstr(opt, "_Op>");
    if (!end || end - opt > 64)
        return 0;
    int dense = end - opt == 5 && !strncmp(opt, "Dense", 5);
    if (dense)
        snprintf(want, sizeof(want), "fbgemm::dense_embedding_codegen_lookup_function");
    else
        snprintf(want, sizeof(want), "fbgemm::split_embedding_codegen_lookup_%.*s_function",
                 (int)(end - opt), opt);
    double grad = numel(o, g);
    const rv_event *me = &t->events[o->event];
    int64_t best = INT64_MIN;
    for (size_t k = 0; k < t->nop_shapes; k++) {
        const rv_op_shape *s = &t->op_shapes[k];
        const rv_event *ev = &t->events[s->event];
        if (ev->cat != RV_CAT_CPU_OP || ev->pid != me->pid || ev->ts_ns >= me->ts_ns ||
            ev->ts_ns <= best || strcmp(rv_trace_str(t, ev->name), want) != 0)
            continue;
        opargs f;
        tbe_dims x;
        args_of(t, s, &f);
        if (tbe_dims_of(&f, dense ? &tbe_dense : &tbe_split, g->ndims == 2 ? dim(o, g, 1) : 0,
                        &x) &&
            x.bags * x.total_d == grad) {
            *d = x;
            best = ev->ts_ns;
        }
    }
    return best != INT64_MIN;
}

/* Backward: the indices sorted by row (linearize, radix sort: about four
 * passes over them), each gathered row's gradient read from its bag, and
 * per row either the gradient written (dense) or the optimizer's update
 * fused in (split: weights and states read and written). Each gathered
 * row is counted, an upper bound on the unique rows the kernels update. */
static int tbe_backward(const opargs *o, const char *n, rv_op_cost *c)
{
    tbe_dims d;
    if (!tbe_forward_of(o, n, &d))
        return 0;
    int dense = strstr(n, "SplitLookupFunction_Dense_Op") != NULL;
    double rowd = d.rows * d.d;
    c->table_bytes = d.table_bytes;
    if (dense) {
        c->gather = rowd * d.wsz; /* the gradient rows written */
        c->flops = rowd;
    } else {
        /* Weights and states read and written. */
        c->gather = 2 * rowd * d.wsz + 2 * d.rows * d.state_per_row;
        /* Accumulate, then about 2 FLOPs per element for the update and 3
         * per element of state (square, accumulate, divide by its root). */
        c->flops = rowd * (3 + (d.state_per_row > 0 ? 3 : 0));
    }
    c->bytes = 4 * d.idx_bytes + d.off_bytes + rowd * d.wsz + c->gather;
    c->cls = RV_FC_EMBED;
    return 1;
}

/* Norms, softmax, pointwise ops and reductions by name: FLOPs per element
 * of the largest input and the class. Looked up by hash (pointwise_row):
 * an op that matches no formula used to be compared with every name here. */
typedef struct pointwise_row {
    const char *name;
    double per;
    int cls;
} pointwise_row;

static const pointwise_row POINTWISE[] = {
    /* norms */
    {"aten::layer_norm", 5, RV_FC_NORM},
    {"aten::native_layer_norm", 5, RV_FC_NORM},
    {"aten::batch_norm", 5, RV_FC_NORM},
    {"aten::native_batch_norm", 5, RV_FC_NORM},
    {"aten::_batch_norm_impl_index", 5, RV_FC_NORM},
    {"aten::cudnn_batch_norm", 5, RV_FC_NORM},
    {"aten::group_norm", 5, RV_FC_NORM},
    {"aten::native_group_norm", 5, RV_FC_NORM},
    {"aten::rms_norm", 5, RV_FC_NORM},
    {"aten::_fused_rms_norm", 5, RV_FC_NORM},
    /* their backward */
    {"aten::native_layer_norm_backward", 10, RV_FC_NORM},
    {"aten::native_batch_norm_backward", 10, RV_FC_NORM},
    {"aten::cudnn_batch_norm_backward", 10, RV_FC_NORM},
    {"aten::native_group_norm_backward", 10, RV_FC_NORM},
    /* softmax */
    {"aten::softmax", 5, RV_FC_SOFTMAX},
    {"aten::_softmax", 5, RV_FC_SOFTMAX},
    {"aten::log_softmax", 5, RV_FC_SOFTMAX},
    {"aten::_log_softmax", 5, RV_FC_SOFTMAX},
    /* its backward */
    {"aten::_softmax_backward_data", 3, RV_FC_SOFTMAX},
    {"aten::_log_softmax_backward_data", 3, RV_FC_SOFTMAX},
    /* elementwise, one FLOP per element */
    {"aten::add", 1, RV_FC_ELEMWISE},
    {"aten::add_", 1, RV_FC_ELEMWISE},
    {"aten::sub", 1, RV_FC_ELEMWISE},
    {"aten::sub_", 1, RV_FC_ELEMWISE},
    {"aten::mul", 1, RV_FC_ELEMWISE},
    {"aten::mul_", 1, RV_FC_ELEMWISE},
    {"aten::div", 1, RV_FC_ELEMWISE},
    {"aten::div_", 1, RV_FC_ELEMWISE},
    {"aten::relu", 1, RV_FC_ELEMWISE},
    {"aten::relu_", 1, RV_FC_ELEMWISE},
    {"aten::gelu", 1, RV_FC_ELEMWISE},
    {"aten::silu", 1, RV_FC_ELEMWISE},
    {"aten::silu_", 1, RV_FC_ELEMWISE},
    {"aten::sigmoid", 1, RV_FC_ELEMWISE},
    {"aten::tanh", 1, RV_FC_ELEMWISE},
    {"aten::neg", 1, RV_FC_ELEMWISE},
    {"aten::exp", 1, RV_FC_ELEMWISE},
    {"aten::sqrt", 1, RV_FC_ELEMWISE},
    {"aten::rsqrt", 1, RV_FC_ELEMWISE},
    {"aten::pow", 1, RV_FC_ELEMWISE},
    {"aten::where", 1, RV_FC_ELEMWISE},
    {"aten::clamp", 1, RV_FC_ELEMWISE},
    {"aten::clamp_", 1, RV_FC_ELEMWISE},
    {"aten::lerp_", 1, RV_FC_ELEMWISE},
    {"aten::threshold_backward", 1, RV_FC_ELEMWISE},
    {"aten::gelu_backward", 1, RV_FC_ELEMWISE},
    {"aten::silu_backward", 1, RV_FC_ELEMWISE},
    {"aten::sigmoid_backward", 1, RV_FC_ELEMWISE},
    {"aten::tanh_backward", 1, RV_FC_ELEMWISE},
    {"aten::masked_fill", 1, RV_FC_ELEMWISE},
    {"aten::masked_fill_", 1, RV_FC_ELEMWISE},
    {"aten::native_dropout", 1, RV_FC_ELEMWISE},
    {"aten::native_dropout_backward", 1, RV_FC_ELEMWISE},
    {"aten::hardtanh", 1, RV_FC_ELEMWISE},
    {"aten::hardtanh_", 1, RV_FC_ELEMWISE},
    {"aten::leaky_relu", 1, RV_FC_ELEMWISE},
    {"aten::addcmul_", 1, RV_FC_ELEMWISE},
    {"aten::addcdiv_", 1, RV_FC_ELEMWISE},
    {"aten::addcmul", 1, RV_FC_ELEMWISE},
    {"aten::addcdiv", 1, RV_FC_ELEMWISE},
    {"aten::sqrt_", 1, RV_FC_ELEMWISE},
    {"aten::mul_.Scalar", 1, RV_FC_ELEMWISE},
    {"aten::reciprocal", 1, RV_FC_ELEMWISE},
    {"aten::abs", 1, RV_FC_ELEMWISE},
    {"aten::sign", 1, RV_FC_ELEMWISE},
    /* copies and gathers, no FLOP */
    {"aten::copy_", 0, RV_FC_ELEMWISE},
    {"aten::fill_", 0, RV_FC_ELEMWISE},
    {"aten::zero_", 0, RV_FC_ELEMWISE},
    {"aten::clone", 0, RV_FC_ELEMWISE},
    {"aten::contiguous", 0, RV_FC_ELEMWISE},
    {"aten::cat", 0, RV_FC_ELEMWISE},
    {"aten::index_select", 0, RV_FC_ELEMWISE},
    {"aten::gather", 0, RV_FC_ELEMWISE},
    {"aten::scatter_add_", 0, RV_FC_ELEMWISE},
    {"aten::index_add_", 0, RV_FC_ELEMWISE},
    {"fbgemm::bounds_check_indices", 0, RV_FC_ELEMWISE},
    {"fbgemm::permute_2D_sparse_data", 0, RV_FC_ELEMWISE},
    {"fbgemm::asynchronous_complete_cumsum", 0, RV_FC_ELEMWISE},
    /* reductions and losses */
    {"aten::sum", 1, RV_FC_REDUCE},
    {"aten::mean", 1, RV_FC_REDUCE},
    {"aten::max", 1, RV_FC_REDUCE},
    {"aten::min", 1, RV_FC_REDUCE},
    {"aten::amax", 1, RV_FC_REDUCE},
    {"aten::amin", 1, RV_FC_REDUCE},
    {"aten::norm", 1, RV_FC_REDUCE},
    {"aten::linalg_vector_norm", 1, RV_FC_REDUCE},
    {"aten::var", 1, RV_FC_REDUCE},
    {"aten::argmax", 1, RV_FC_REDUCE},
    {"aten::nll_loss_forward", 1, RV_FC_REDUCE},
    {"aten::nll_loss2d_forward", 1, RV_FC_REDUCE},
    {"aten::mse_loss", 1, RV_FC_REDUCE},
    {"aten::binary_cross_entropy_with_logits", 1, RV_FC_REDUCE},
    {"aten::nll_loss_backward", 1, RV_FC_REDUCE},
};
#define NPOINTWISE (sizeof(POINTWISE) / sizeof(POINTWISE[0]))

/* Open addressing over POINTWISE, built once: a name listed twice keeps
 * its first row, as the lists' order did. */
#define PW_SLOTS 512
static int16_t pw_slot[PW_SLOTS]; /* row + 1; 0 empty */
static pthread_once_t pw_once = PTHREAD_ONCE_INIT;

static uint32_t pw_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void pw_build(void)
{
    for (size_t i = 0; i < NPOINTWISE; i++) {
        uint32_t k = pw_hash(POINTWISE[i].name) & (PW_SLOTS - 1);
        while (pw_slot[k] && strcmp(POINTWISE[pw_slot[k] - 1].name, POINTWISE[i].name) != 0)
            k = (k + 1) & (PW_SLOTS - 1);
        if (!pw_slot[k])
            pw_slot[k] = (int16_t)(i + 1);
    }
}

static const pointwise_row *pointwise_row_of(const char *n)
{
    pthread_once(&pw_once, pw_build);
    for (uint32_t k = pw_hash(n) & (PW_SLOTS - 1); pw_slot[k]; k = (k + 1) & (PW_SLOTS - 1))
        if (strcmp(POINTWISE[pw_slot[k] - 1].name, n) == 0)
            return &POINTWISE[pw_slot[k] - 1];
    return NULL;
}

/* Norms, softmax, pointwise ops and reductions: per element of the largest
 * input, with the bytes of every tensor in and one out. */
static int pointwise(const opargs *o, const char *n, rv_op_cost *c)
{
    double per, big;
    int cls;
    const pointwise_row *row = pointwise_row_of(n);
    if (row)
        per = row->per, cls = row->cls;
    else if (!strncmp(n, "aten::_foreach_", 15) || !strncmp(n, "aten::_fused_adam", 17))
        per = 1, cls = RV_FC_OPTIM; /* tensor lists: only when flat shapes are given */
    else
        return 0;
    c->bytes = io_bytes(o, &big);
    c->flops = per * big;
    c->cls = cls;
    return big > 0;
}

int rv_flops_op(const rv_trace *t, int32_t event, rv_op_cost *c)
{
    const rv_op_shape *s = rv_shapes_of(t, event);
    opargs o;
    memset(c, 0, sizeof(*c));
    if (!s)
        return 0;
    memset(&o, 0, sizeof(o));
    o.t = t;
    o.event = event;
    int pt = RV_PT_NONE;
    for (uint32_t i = 0; i < s->nargs; i++) {
        const rv_shape_arg *a = &t->shape_args[s->first + i];
        if (a->is_out) {
            if (!o.out0 && is_tensor(a))
                o.out0 = a;
            continue;
        }
        if (o.nin < (int)(sizeof(o.in) / sizeof(o.in[0])))
            o.in[o.nin++] = a;
        if (is_tensor(a))
            pt = rv_kname_type_merge(pt, a->ptype);
    }
    const char *n = rv_trace_str(t, t->events[event].name);
    int ok = gemm(&o, n, c) || conv(&o, n, c) || attention(&o, n, c) || embedding(&o, n, c) ||
             pointwise(&o, n, c);
    if (!ok) {
        memset(c, 0, sizeof(*c));
        return 0;
    }
    c->ptype = pt;
    return 1;
}

void rv_flops_trace_free(rv_flops_trace *f)
{
    if (!f)
        return;
    free(f->flops);
    free(f->bytes);
    free(f->cls);
    free(f->ptype);
    free(f->embed);
    free(f->op_tree);
    f->op_tree = NULL;
    f->flops = f->bytes = NULL;
    f->cls = f->ptype = NULL;
    f->embed = NULL;
    f->nembed = 0;
}

const rv_flops_embed *rv_flops_embed_of(const rv_flops_trace *f, int32_t event)
{
    size_t lo = 0, hi = f ? f->nembed : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->embed[mid].event < event)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < (f ? f->nembed : 0) && f->embed[lo].event == event ? &f->embed[lo] : NULL;
}

int rv_flops_of_trace(const rv_trace *t, rv_flops_trace *f)
{
    size_t n = t->nevents, nembed = 0;
    int32_t *parent = malloc((n + 1) * sizeof(*parent));
    int32_t *owner = malloc((n + 1) * sizeof(*owner)); /* GPU task -> costed op */
    /* Per costed op, not per event: a few percent of the events are ops
     * with shapes, and memory first touched is what reading a trace pays
     * most for (docs/internals/kineto-reader.md). */
    int32_t *slot = malloc((n + 1) * sizeof(*slot)); /* op event -> its cost, -1 none */
    size_t nops = t->nop_shapes, ncost = 0;
    double *launched = calloc(nops + 1, sizeof(*launched)); /* cost -> its tasks' duration */
    rv_op_cost *cost = calloc(nops + 1, sizeof(*cost));
    int rc = RV_ERR_NOMEM;
    memset(f, 0, sizeof(*f));
    f->flops = calloc(n + 1, sizeof(*f->flops));
    f->bytes = calloc(n + 1, sizeof(*f->bytes));
    f->cls = calloc(n + 1, 1);
    f->ptype = calloc(n + 1, 1);
    if (!parent || !owner || !slot || !launched || !cost || !f->flops || !f->bytes || !f->cls ||
        !f->ptype)
        goto out;
    for (size_t i = 0; i < n; i++)
        slot[i] = -1;
    if (rv_shapes_op_tree(t, parent) < 0)
        goto out;
    for (size_t k = 0; k < t->nop_shapes; k++) {
        int32_t e = t->op_shapes[k].event;
        f->ops_with_shapes++;
        memset(&cost[ncost], 0, sizeof(cost[ncost]));
        slot[e] = rv_flops_op(t, e, &cost[ncost]) ? (int32_t)ncost++ : -1; /* the last wins */
    }
    /* Each GPU task goes to the outermost costed op above its launch. */
    for (size_t i = 0; i < n; i++) {
        owner[i] = -1;
        if (!rv_cat_is_gpu_task(t->events[i].cat))
            continue;
        f->gpu_tasks++;
        for (int32_t p = parent[i], hops = 0; p >= 0 && hops < 4096; p = parent[p], hops++)
            if (slot[p] >= 0)
                owner[i] = p;
        if (owner[i] >= 0)
            launched[slot[owner[i]]] += (double)(t->events[i].dur_ns > 0 ? t->events[i].dur_ns : 1);
    }
    for (size_t i = 0; i < n; i++) {
        int32_t p = owner[i] >= 0 ? slot[owner[i]] : -1;
        if (p < 0 || launched[p] <= 0)
            continue;
        double share = (double)(t->events[i].dur_ns > 0 ? t->events[i].dur_ns : 1) / launched[p];
        f->flops[i] = cost[p].flops * share;
        f->bytes[i] = cost[p].bytes * share;
        f->cls[i] = (uint8_t)cost[p].cls;
        f->ptype[i] = (uint8_t)cost[p].ptype;
        f->gpu_tasks_costed++;
        if (cost[p].table_bytes > 0)
            nembed++;
    }
    /* The embedding tasks' L2 terms, in event order. */
    if (nembed && !(f->embed = calloc(nembed, sizeof(*f->embed)))) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n && nembed; i++) {
        int32_t p = owner[i] >= 0 ? slot[owner[i]] : -1;
        if (p < 0 || launched[p] <= 0 || cost[p].table_bytes <= 0)
            continue;
        double share = (double)(t->events[i].dur_ns > 0 ? t->events[i].dur_ns : 1) / launched[p];
        rv_flops_embed *x = &f->embed[f->nembed++];
        x->event = (int32_t)i;
        x->gather = cost[p].gather * share;
        x->table_bytes = cost[p].table_bytes;
    }
    /* Slots follow the ops' event order: the sums add in the same order. */
    for (size_t i = 0; i < ncost; i++)
        if (launched[i] > 0) {
            f->ops_costed++;
            f->total_flops += cost[i].flops;
            f->total_bytes += cost[i].bytes;
            int pt = cost[i].ptype;
            if (pt >= 0 && pt < 8)
                f->flops_by_ptype[pt] += cost[i].flops;
        }
    double best = 0;
    for (int pt = 1; pt < 8; pt++)
        if (f->flops_by_ptype[pt] > best) {
            best = f->flops_by_ptype[pt];
            f->dominant_ptype = pt;
        }
    f->op_tree = parent;
    parent = NULL;
    rc = 0;
out:
    if (rc < 0)
        rv_flops_trace_free(f);
    free(parent);
    free(owner);
    free(launched);
    free(cost);
    free(slot);
    return rc;
}

const char *rv_flops_class_name(int cls)
{
    static const char *const names[RV_FC_COUNT] = {
        "none", "gemm",    "conv",        "attention", "embedding",
        "norm", "softmax", "elementwise", "reduction", "optimizer"};
    return cls >= 0 && cls < RV_FC_COUNT ? names[cls] : "none";
}
