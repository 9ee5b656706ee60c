/* Gradients of a one-GPU training trace for the communication model
 * (rv_comm_model.h): where each becomes ready, and how many bytes.
 *
 * Bytes come from the parameters: the weight (and bias) shapes of the
 * forward ops that own parameters (conv, linear, norms, embeddings), so
 * no what-if that re-times kernels moves them. Without shapes, the
 * measured (never the re-timed) time of the AccumulateGrad kernels, or of
 * the optimizer's update, at HBM bandwidth.
 *
 * Ready points, from what the trace has:
 * - AccumulateGrad kernels (zero_grad(set_to_none=False));
 * - else AccumulateGrad ops without a kernel (set_to_none=True, the
 *   default since PyTorch 2.0): the gradient is the output of the last
 *   kernel launched before the op;
 * - else the backward pass's kernels, one point per parameter op, evenly
 *   spaced (the backward runs the forward's layers in reverse). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/rv_comm_model.h"
#include "trace/rv_shapes.h"

/* Arguments of a parameter-owning op that are parameters (-1 ends). */
typedef struct param_op {
    const char *name;
    int args[3];
    int family; /* 1 conv, 2 linear: the low-level fallbacks count only without them */
} param_op;

static const param_op param_ops[] = {
    {"aten::conv1d", {1, 2, -1}, 1},
    {"aten::conv2d", {1, 2, -1}, 1},
    {"aten::conv3d", {1, 2, -1}, 1},
    {"aten::conv_transpose1d", {1, 2, -1}, 1},
    {"aten::conv_transpose2d", {1, 2, -1}, 1},
    {"aten::conv_transpose3d", {1, 2, -1}, 1},
    {"aten::linear", {1, 2, -1}, 2},
    {"aten::batch_norm", {1, 2, -1}, 0},
    {"aten::instance_norm", {1, 2, -1}, 0},
    {"aten::layer_norm", {2, 3, -1}, 0},
    {"aten::group_norm", {2, 3, -1}, 0},
    {"aten::embedding", {0, -1, -1}, 0},
    {"aten::embedding_bag", {0, -1, -1}, 0},
    /* Fallbacks for traces that record only the lower op. */
    {"aten::convolution", {1, 2, -1}, -1},
    {"aten::addmm", {0, 2, -1}, -2},
};
#define NPARAM_OPS (sizeof(param_ops) / sizeof(param_ops[0]))

static int param_op_of(const char *name)
{
    for (size_t k = 0; k < NPARAM_OPS; k++)
        if (!strcmp(name, param_ops[k].name))
            return (int)k;
    return -1;
}

static double arg_bytes(const rv_trace *t, const rv_op_shape *s, int a)
{
    if (a < 0 || (uint32_t)a >= s->nargs)
        return 0;
    const rv_shape_arg *x = &t->shape_args[s->first + (uint32_t)a];
    const int64_t *d = rv_shapes_dims(t, x);
    if (!d || x->ndims <= 0)
        return 0;
    double n = 1;
    for (int32_t i = 0; i < x->ndims; i++)
        n *= d[i] > 0 ? (double)d[i] : 0;
    return n * (x->itemsize ? x->itemsize : 4);
}

/* The iteration a trace time falls in, -1 outside every step. */
static int32_t iter_at(const rv_graph *g, int64_t abs_ns)
{
    int64_t rel = abs_ns - g->origin_ns;
    for (size_t i = 0; i < g->niters; i++)
        if (rel >= g->iters[i].start_ns && rel < g->iters[i].end_ns)
            return (int32_t)i;
    return g->niters ? -2 : -1;
}

/* Parameter bytes and parameter ops of one step, from the op shapes
 * (median over the steps that have any); 0 when the trace has none. */
static double shape_bytes(const rv_graph *g, size_t *nops)
{
    const rv_trace *t = g->trace;
    size_t ni = g->niters ? g->niters : 1;
    double *sum = calloc(ni, sizeof(double));
    size_t *cnt = calloc(ni, sizeof(size_t));
    int has_family[3] = {0, 0, 0};
    double best = 0;
    *nops = 0;
    if (!t || !sum || !cnt || t->nop_shapes == 0)
        goto out;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < t->nop_shapes; k++) {
            const rv_op_shape *s = &t->op_shapes[k];
            const rv_event *e = &t->events[s->event];
            if (e->cat != RV_CAT_CPU_OP)
                continue;
            int p = param_op_of(rv_trace_str(t, e->name));
            if (p < 0)
                continue;
            int fam = param_ops[p].family;
            if (pass == 0) {
                if (fam > 0)
                    has_family[fam] = 1;
                continue;
            }
            if (fam < 0 && has_family[-fam])
                continue; /* counted at the higher op */
            int32_t it = iter_at(g, e->ts_ns);
            if (it < -1)
                continue;
            double b = 0;
            for (int a = 0; a < 3 && param_ops[p].args[a] >= 0; a++)
                b += arg_bytes(t, s, param_ops[p].args[a]);
            if (b <= 0)
                continue;
            sum[it < 0 ? 0 : it] += b;
            cnt[it < 0 ? 0 : it]++;
        }
    /* The step with the median parameter bytes among those with any. */
    size_t have = 0;
    for (size_t i = 0; i < ni; i++)
        have += sum[i] > 0;
    for (size_t i = 0; i < ni && have; i++) {
        size_t below = 0, same = 0;
        for (size_t j = 0; j < ni; j++) {
            below += sum[j] > 0 && sum[j] < sum[i];
            same += sum[j] == sum[i];
        }
        if (sum[i] > 0 && below <= have / 2 && below + same > have / 2) {
            best = sum[i];
            *nops = cnt[i];
            break;
        }
    }
out:
    free(sum);
    free(cnt);
    return best;
}

static int usable_kernel(const rv_task *t)
{
    return t->kind == RV_TASK_GPU && t->cat == RV_CAT_KERNEL && !(t->flags & RV_TF_REMOVED) &&
           t->event >= 0;
}

/* (a) AccumulateGrad kernels; their weights: measured traffic. */
static size_t from_accumulate_kernels(const rv_graph *g, double bw, rv_comm_grad *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < g->ntasks && n < cap; i++) {
        const rv_task *t = &g->tasks[i];
        if (!usable_kernel(t))
            continue;
        const char *op = g->trace ? rv_trace_str(g->trace, t->op) : "";
        const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (!strstr(op, "AccumulateGrad") && !strstr(layer, "AccumulateGrad"))
            continue;
        /* grad += new_grad reads two tensors and writes one. */
        double busy = (double)t->meas_dur_ns * 1e-9 - 1e-6;
        double bytes = busy > 0 ? busy * bw / 3 : 0;
        out[n].task = (int32_t)i;
        out[n].bytes = bytes < 4096 ? 4096 : bytes;
        n++;
    }
    return n;
}

static int cmp_launch(const void *a, const void *b, void *ctx)
{
    const rv_graph *g = ctx;
    const rv_task *p = &g->tasks[*(const int32_t *)a], *q = &g->tasks[*(const int32_t *)b];
    int64_t x = g->tasks[p->launch].meas_start_ns, y = g->tasks[q->launch].meas_start_ns;
    return (x > y) - (x < y);
}

/* (b) AccumulateGrad ops without kernels: the last kernel launched before
 * each (same step) produced its gradient. */
static size_t from_accumulate_ops(const rv_graph *g, rv_comm_grad *out, size_t cap)
{
    const rv_trace *t = g->trace;
    size_t nk = 0, n = 0;
    int32_t *k = t ? malloc((g->ntasks + 1) * sizeof(*k)) : NULL;
    if (!k)
        return 0;
    for (size_t i = 0; i < g->ntasks; i++)
        if (usable_kernel(&g->tasks[i]) && g->tasks[i].launch >= 0 &&
            g->tasks[g->tasks[i].launch].meas_start_ns >= 0)
            k[nk++] = (int32_t)i;
    qsort_r(k, nk, sizeof(*k), cmp_launch, (void *)g);
    int32_t last = -1;
    for (size_t e = 0; e < t->nevents && n < cap && nk; e++) {
        const rv_event *ev = &t->events[e];
        if (ev->cat != RV_CAT_CPU_OP || !strstr(rv_trace_str(t, ev->name), "AccumulateGrad"))
            continue;
        int64_t at = ev->ts_ns - g->origin_ns;
        size_t lo = 0, hi = nk;
        while (lo < hi) { /* first kernel launched at or after the op */
            size_t mid = (lo + hi) / 2;
            if (g->tasks[g->tasks[k[mid]].launch].meas_start_ns < at)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0)
            continue;
        int32_t r = k[lo - 1];
        if (r == last || g->tasks[r].iteration != iter_at(g, ev->ts_ns))
            continue; /* one point per producing kernel, inside the op's step */
        out[n].task = r;
        out[n].bytes = 1;
        last = r;
        n++;
    }
    free(k);
    return n;
}

/* (c) The backward kernels of each step, `per` points evenly spaced. */
static size_t from_backward(const rv_graph *g, size_t per, rv_comm_grad *out, size_t cap)
{
    size_t n = 0, ni = g->niters ? g->niters : 1;
    for (size_t it = 0; it < ni; it++) {
        size_t nb = 0;
        int32_t want = g->niters ? (int32_t)it : -1;
        for (size_t i = 0; i < g->ntasks; i++)
            nb += usable_kernel(&g->tasks[i]) && g->tasks[i].phase == RV_PHASE_BACKWARD &&
                  g->tasks[i].iteration == want;
        if (nb == 0)
            continue;
        size_t pts = per < nb ? per : nb, seen = 0, next = 1;
        for (size_t i = 0; i < g->ntasks && n < cap && next <= pts; i++) {
            const rv_task *t = &g->tasks[i];
            if (!usable_kernel(t) || t->phase != RV_PHASE_BACKWARD || t->iteration != want)
                continue;
            seen++;
            if (seen * pts >= next * nb) { /* the end of the next-th share */
                out[n].task = (int32_t)i;
                out[n].bytes = 1;
                n++;
                next++;
            }
        }
    }
    return n;
}

/* Without shapes and AccumulateGrad kernels: the optimizer's update reads
 * the parameter, its gradient and one state tensor and writes two (about
 * five passes over the parameters), at HBM bandwidth, measured times. */
static double optimizer_bytes(const rv_graph *g, double bw)
{
    double s = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (!usable_kernel(t) || t->phase != RV_PHASE_OPTIMIZER)
            continue;
        const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (!strstr(layer, "zero_grad"))
            s += (double)t->meas_dur_ns * 1e-9;
    }
    return s * bw / 5 / (double)(g->niters ? g->niters : 1);
}

int rv_comm_grads(const rv_graph *g, const rv_hw *hw, rv_comm_grad *out, size_t cap, size_t *n,
                  rv_comm_grad_info *info)
{
    double bw = (hw ? hw->hbm_gbps : RV_HW_DEFAULT_HBM_GBPS) * 1e9;
    size_t nops = 0;
    memset(info, 0, sizeof(*info));
    double per_iter = shape_bytes(g, &nops);
    info->bytes_source = per_iter > 0 ? RV_GRAD_BYTES_SHAPES : RV_GRAD_BYTES_KERNELS;
    info->param_ops = nops;
    info->ready_source = RV_GRAD_READY_ACC_KERNELS;
    *n = from_accumulate_kernels(g, bw, out, cap);
    if (*n == 0) {
        info->ready_source = RV_GRAD_READY_ACC_OPS;
        *n = from_accumulate_ops(g, out, cap);
    }
    if (*n == 0) {
        info->ready_source = RV_GRAD_READY_BACKWARD;
        *n = from_backward(g, nops ? nops : 32, out, cap);
    }
    if (*n == 0)
        return RV_ERR_UNSUPPORTED;
    if (per_iter <= 0 && info->ready_source != RV_GRAD_READY_ACC_KERNELS) {
        per_iter = optimizer_bytes(g, bw);
        info->bytes_source = RV_GRAD_BYTES_OPTIMIZER;
        if (per_iter <= 0)
            return RV_ERR_UNSUPPORTED;
    }
    if (per_iter > 0) {
        /* Spread one step's bytes over its points by their weights. */
        size_t ni = g->niters ? g->niters : 1;
        double *w = calloc(ni + 1, sizeof(double));
        if (!w)
            return RV_ERR_NOMEM;
        for (size_t k = 0; k < *n; k++) {
            int32_t it = g->tasks[out[k].task].iteration;
            w[it >= 0 && (size_t)it < ni ? (size_t)it : ni] += out[k].bytes;
        }
        for (size_t k = 0; k < *n; k++) {
            int32_t it = g->tasks[out[k].task].iteration;
            double tot = w[it >= 0 && (size_t)it < ni ? (size_t)it : ni];
            out[k].bytes = tot > 0 ? per_iter * out[k].bytes / tot : 0;
        }
        free(w);
    }
    info->bytes_per_iteration = per_iter;
    return 0;
}
