/* The `parallel` what-if: a one-GPU (or data-parallel) trace moved to
 * other degrees of data (ZeRO / FSDP), tensor, pipeline and expert
 * parallelism by rewriting its graph (MODELS.md E2-E5). See
 * docs/models/parallel.md for the transformations and what they assume. */
#include "models/rv_parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "cost/rv_keff.h"
#include "cost/rv_memory.h"
#include "graph/rv_layers.h"
#include "models/rv_comm_model.h"
#include "models/rv_models.h"
#include "trace/rv_shapes.h"

/* Cap on inserted collectives per apply. */
#define RV_PAR_MAX_INSERT 2000000
/* Units ZeRO / FSDP gathers and scatters at most, without layer instances. */
#define RV_PAR_MAX_UNITS 64
/* A point-to-point send (pipeline), beside rv_coll_op's collectives. */
#define OP_P2P (-1)

/* Comm threads: one per stream of collectives a framework keeps. */
enum { TH_AG = 0, TH_RS, TH_TP, TH_PP, TH_COUNT };

typedef struct par_ctx {
    const rv_whatif *w;
    rv_graph *g;
    const rv_hw *hw;
    json_t *entry;
    int32_t th[TH_COUNT];        /* -1 until used */
    double traffic[RV_PD_COUNT]; /* bytes each rank sends, all steps */
    double comm_s[RV_PD_COUNT];
    size_t inserted[RV_PD_COUNT];
    size_t ninserted;
    double steps; /* steps the graph holds */
    /* Inserted tasks' place in the measured timeline (tasks from base on):
     * an edge that would make an original task wait for one placed after
     * its measured start is left out, so no edge can close a cycle. */
    size_t base;
    int64_t *vt;
    size_t nvt, cap_vt;
    int64_t last_vt[TH_COUNT];
    size_t skipped;
} par_ctx;

/* The one collective cost: the communication model's (models/rv_comm_model.h,
 * the same network, knobs and NCCL-shaped cost as `distributed`), on the
 * request's network when it names one, else the traced job's assumed one
 * (NVLink inside nodes of 8, 100 Gb/s between them). A send/recv crosses
 * one link. Seconds. */
static double coll_s(const par_ctx *c, int op, int n, double bytes)
{
    if (n <= 1)
        return 0;
    rv_dist d;
    rv_net net;
    int asked = 0;
    rv_comm_dist_of(c->w, n, &d, &asked);
    rv_comm_net_of(&d, c->hw, n, &net);
    if (op == OP_P2P)
        return net.alpha_s + bytes / (net.intra_bps * net.efficiency);
    return rv_comm_time(&d, &net, op, bytes);
}

static int pd_kind(int op)
{
    switch (op) {
    case RV_COLL_ALLREDUCE: return RV_PDK_ALLREDUCE;
    case RV_COLL_REDUCE_SCATTER: return RV_PDK_REDUCE_SCATTER;
    case RV_COLL_ALLGATHER: return RV_PDK_ALLGATHER;
    case RV_COLL_ALLTOALL: return RV_PDK_ALLTOALL;
    case OP_P2P: return RV_PDK_SENDRECV;
    default: return RV_PDK_OTHER;
    }
}

/* Bytes each of n ranks sends in one collective of `bytes` (ring). */
static double traffic_of(int op, int n, double bytes)
{
    if (n <= 1)
        return 0;
    double f = (double)(n - 1) / n;
    switch (op) {
    case RV_COLL_ALLREDUCE: return 2 * f * bytes;
    case OP_P2P: return bytes;
    default: return f * bytes;
    }
}

/* Appends one collective of dimension dim on comm thread slot; returns its
 * task or a negative rv_err. */
static int64_t insert(par_ctx *c, int slot, int dim, int op, int n, double bytes, int32_t it,
                      int phase, int32_t like)
{
    rv_graph *g = c->g;
    if (c->ninserted >= RV_PAR_MAX_INSERT)
        return RV_ERR_LIMIT;
    if (c->th[slot] < 0) {
        rv_thread th = g->threads[g->tasks[like].thread];
        th.kind = RV_THREAD_COMM;
        th.first = th.last = -1;
        th.norig = 0;
        th.stream = -1;
        int32_t k = rv_graph_add_thread(g, &th);
        if (k < 0)
            return k;
        c->th[slot] = k;
    }
    double secs = coll_s(c, op, n, bytes);
    rv_task t = rv_models__comm_task(secs, bytes, it, phase);
    t.pardim = RV_PARDIM_TAG(dim, pd_kind(op));
    if (c->nvt == c->cap_vt) {
        size_t nc = c->cap_vt ? c->cap_vt * 2 : 1024;
        int64_t *p = realloc(c->vt, nc * sizeof(*p));
        if (!p)
            return RV_ERR_NOMEM;
        c->vt = p;
        c->cap_vt = nc;
    }
    int64_t k = rv_graph_append_task(g, c->th[slot], &t);
    if (k >= 0) {
        /* Behind the thread's previous collective. */
        c->vt[c->nvt++] = c->last_vt[slot];
        c->ninserted++;
        c->inserted[dim]++;
        c->traffic[dim] += traffic_of(op, n, bytes);
        c->comm_s[dim] += secs;
    }
    return k;
}

/* Adds src -> dst when it keeps the measured order: an inserted task
 * takes the latest measured time of what it waits for, and an original
 * task waits only for what comes no later than its measured start (in a
 * pipelined or overlapped trace the phases interleave; there the edge is
 * left out and counted). */
static int edge(par_ctx *c, int64_t src, int64_t dst, int from_start)
{
    rv_graph *g = c->g;
    if (src < 0 || dst < 0)
        return 0;
    const rv_task *a = &g->tasks[src];
    int64_t ts = (size_t)src >= c->base ? c->vt[(size_t)src - c->base]
                                        : a->meas_start_ns + (from_start ? 0 : a->meas_dur_ns);
    if ((size_t)dst >= c->base) {
        int64_t *v = &c->vt[(size_t)dst - c->base];
        if (ts > *v)
            *v = ts;
        for (int k = 0; k < TH_COUNT; k++)
            if (c->th[k] == g->tasks[dst].thread && *v > c->last_vt[k])
                c->last_vt[k] = *v;
    } else if (g->tasks[dst].meas_start_ns < 0 || ts > g->tasks[dst].meas_start_ns) {
        c->skipped++;
        return 0;
    }
    return rv_graph_add_edge(g, (int32_t)src, (int32_t)dst, 0, RV_EDGE_OTHER, from_start);
}

/* ---- the graph's kernels ------------------------------------------------ */

static int is_compute(const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    return t->kind == RV_TASK_GPU && t->cat == RV_CAT_KERNEL && t->event >= 0 &&
           !(t->flags & (RV_TF_NCCL | RV_TF_INSERTED | RV_TF_REMOVED)) &&
           !rv_pardims_is_moe_kernel(rv_task_name(g, i));
}

static int cmp_start(const void *a, const void *b, void *ctx)
{
    const rv_graph *g = ctx;
    int64_t x = g->tasks[*(const int32_t *)a].meas_start_ns;
    int64_t y = g->tasks[*(const int32_t *)b].meas_start_ns;
    return (x > y) - (x < y);
}

/* The compute kernels of iteration it in phase ph (-1 any), in measured
 * start order, into out (g->ntasks entries); their count. */
static size_t kernels_of(const rv_graph *g, int32_t it, int ph, int32_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < g->ntasks; i++)
        if (is_compute(g, i) && g->tasks[i].iteration == it && (ph < 0 || g->tasks[i].phase == ph))
            out[n++] = (int32_t)i;
    qsort_r(out, n, sizeof(*out), cmp_start, (void *)g);
    return n;
}

/* The CPU task that ends iteration it, when kernel k (whose work the
 * inserted task follows) was launched before it on its thread; else -1 (an
 * edge to it could close a cycle). */
static int32_t iter_end(const rv_graph *g, int32_t it, int64_t k)
{
    if (it < 0 || k < 0)
        return -1;
    int32_t end = g->iters[it].last_task, l = g->tasks[k].launch;
    if (l < 0 || g->tasks[l].thread != g->tasks[end].thread || l >= end)
        return -1;
    return end;
}

/* b*s*h bytes: the input most linear layers read (tokens x hidden), from
 * the op shapes; 0 when the trace has none. */
static double activation_bytes(const rv_trace *t)
{
    double val[64];
    size_t cnt[64], n = 0;
    for (size_t k = 0; k < t->nop_shapes; k++) {
        const rv_op_shape *os = &t->op_shapes[k];
        const char *name = rv_trace_str(t, t->events[os->event].name);
        if (strcmp(name, "aten::linear") != 0 && strcmp(name, "aten::addmm") != 0)
            continue;
        const rv_shape_arg *a = &t->shape_args[os->first + (strcmp(name, "aten::addmm") == 0)];
        if (os->nargs < 2 || a->ndims < 2)
            continue;
        const int64_t *d = rv_shapes_dims(t, a);
        double v = a->itemsize ? a->itemsize : 2;
        for (int32_t j = 0; j < a->ndims; j++)
            v *= (double)(d[j] > 0 ? d[j] : 1);
        size_t j = 0;
        while (j < n && val[j] != v)
            j++;
        if (j == n && n < 64) {
            val[n] = v;
            cnt[n++] = 0;
        }
        if (j < n)
            cnt[j]++;
    }
    size_t best = 0;
    for (size_t j = 1; j < n; j++)
        if (cnt[j] > cnt[best] || (cnt[j] == cnt[best] && val[j] > val[best]))
            best = j;
    return n ? val[best] : 0;
}

/* ---- (a) ZeRO / FSDP ---------------------------------------------------- */

/* Units per step: the layer instances, else the forward's distinct layers. */
static int units_of(const rv_graph *g)
{
    if (g->layers && g->layers->nlayers > 0)
        return g->layers->nlayers;
    uint32_t seen[RV_PAR_MAX_UNITS];
    int n = 0;
    for (size_t i = 0; i < g->ntasks && n < RV_PAR_MAX_UNITS; i++) {
        if (!is_compute(g, i) || g->tasks[i].phase != RV_PHASE_FORWARD)
            continue;
        int k = 0;
        while (k < n && seen[k] != g->tasks[i].layer)
            k++;
        if (k == n)
            seen[n++] = g->tasks[i].layer;
    }
    return n > 0 ? n : 1;
}

/* Per chunk u of U over ks[0..n): AG before (stage 3), AR or RS after. */
static int zero_chunks(par_ctx *c, const int32_t *ks, size_t n, int U, int N, double ub, int32_t it,
                       int ph, int gather, int after_op, int64_t first_dep, int64_t *last_after)
{
    int64_t prev_first = first_dep;
    for (int u = 0; u < U && n > 0; u++) {
        size_t a = (size_t)u * n / (size_t)U, b = (size_t)(u + 1) * n / (size_t)U;
        if (b <= a)
            continue;
        if (gather) {
            int64_t ag = insert(c, TH_AG, RV_PD_FSDP, RV_COLL_ALLGATHER, N, ub, it, ph, ks[a]);
            if (ag < 0)
                return (int)ag;
            /* Prefetch one unit ahead: issued when the previous unit starts. */
            int rc = edge(c, prev_first, ag, u > 0 || ph == RV_PHASE_FORWARD);
            if (!rc)
                rc = edge(c, ag, ks[a], 0);
            if (rc)
                return rc;
        }
        prev_first = ks[a];
        if (after_op >= 0) {
            int dim = after_op == RV_COLL_ALLREDUCE ? RV_PD_DATA : RV_PD_FSDP;
            int64_t x = insert(c, TH_RS, dim, after_op, N, ub, it, ph, ks[b - 1]);
            if (x < 0)
                return (int)x;
            int rc = edge(c, ks[b - 1], x, 0);
            if (rc)
                return rc;
            *last_after = x;
        }
    }
    return 0;
}

static int zero_iter(par_ctx *c, int32_t it, int N, int stage, int U, double psi, int32_t *buf,
                     int64_t *prev_gather)
{
    rv_graph *g = c->g;
    double ub = psi / U;
    size_t nf = kernels_of(g, it, RV_PHASE_FORWARD, buf);
    int64_t start = it >= 0 ? g->iters[it].first_task : -1;
    int64_t last = -1;
    int rc;
    if (stage == 3 &&
        (rc = zero_chunks(c, buf, nf, U, N, ub, it, RV_PHASE_FORWARD, 1, -1, start, &last)) != 0)
        return rc;
    if (*prev_gather >= 0 && nf > 0 && (rc = edge(c, *prev_gather, buf[0], 0)) != 0)
        return rc;
    int64_t fwd_end = nf ? buf[nf - 1] : start;
    size_t nb = kernels_of(g, it, RV_PHASE_BACKWARD, buf);
    if (nb == 0)
        return 0; /* inference: nothing to reduce */
    int after = stage == 0 ? RV_COLL_ALLREDUCE : RV_COLL_REDUCE_SCATTER;
    if ((rc = zero_chunks(c, buf, nb, U, N, ub, it, RV_PHASE_BACKWARD, stage == 3, after, fwd_end,
                          &last)) != 0)
        return rc;
    int64_t bwd_end = g->tasks[buf[nb - 1]].meas_start_ns, bwd_last = buf[nb - 1];
    size_t no = kernels_of(g, it, RV_PHASE_OPTIMIZER, buf), o0 = 0;
    /* The optimizer steps once the last gradients are reduced (its
     * zero_grad before the forward stays where it is). */
    while (o0 < no && g->tasks[buf[o0]].meas_start_ns < bwd_end)
        o0++;
    if ((rc = edge(c, last, o0 < no ? buf[o0] : iter_end(g, it, bwd_last), 0)) != 0)
        return rc;
    *prev_gather = -1;
    if (stage == 1 || stage == 2) { /* the updated parameters, gathered after the step */
        int64_t like = no ? buf[no - 1] : last;
        int64_t ag = insert(c, TH_AG, RV_PD_FSDP, RV_COLL_ALLGATHER, N, psi, it, RV_PHASE_OPTIMIZER,
                            (int32_t)like);
        if (ag < 0)
            return (int)ag;
        if ((rc = edge(c, like, ag, 0)) != 0 || (rc = edge(c, ag, iter_end(g, it, like), 0)) != 0)
            return rc;
        *prev_gather = ag;
    }
    return 0;
}

static int apply_zero(par_ctx *c, int N, int stage, double psi, int32_t *buf)
{
    rv_graph *g = c->g;
    int U = units_of(g);
    int64_t prev = -1;
    json_object_set_new(c->entry, "units", json_integer(U));
    json_object_set_new(c->entry, "parameter_bytes", json_real(psi));
    rv_models__warn(c->entry, "even_units",
                    "ZeRO / FSDP units: the parameters split evenly over %d units (%s), each "
                    "unit's collectives around an even share of the kernels",
                    U, g->layers ? "the layer instances" : "the forward's outermost ops");
    for (int32_t it = g->niters ? 0 : -1; it < (int32_t)g->niters; it++) {
        int rc = zero_iter(c, it, N, stage, U, psi, buf, &prev);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- (c) tensor parallel ------------------------------------------------ */

/* A matrix-multiply op (the innermost op that launched a kernel). */
static int is_mm_op(const char *op)
{
    static const char *const mm[] = {"aten::mm",      "aten::addmm",  "aten::bmm",
                                     "aten::baddbmm", "aten::matmul", "aten::linear"};
    for (size_t k = 0; k < sizeof(mm) / sizeof(mm[0]); k++)
        if (strcmp(op, mm[k]) == 0)
            return 1;
    return 0;
}

/* GEMM-class kernels: the kernel-name classifier's, Triton's attn_fwd /
 * attn_bwd, and kernels a matrix-multiply op launched whatever their name
 * (a trace built from per-op tables names its kernels after the op). */
static int is_gemm(const rv_graph *g, size_t i)
{
    const char *n = rv_task_name(g, i);
    if (rv_kclass_of_task(g, i) == RV_KC_GEMM || strncmp(n, "Cijk_", 5) == 0 ||
        strstr(n, "attn_fwd") || strstr(n, "attn_bwd"))
        return 1;
    return g->trace && is_mm_op(rv_trace_str(g->trace, g->tasks[i].op));
}

static int is_norm(const char *name)
{
    return strstr(name, "norm") || strstr(name, "Norm");
}

/* The time factor of GEMM task i split T ways: 1/T on the roofline (FLOPs
 * and bytes both divide: the weights and the output split, and the input
 * is the smaller operand of a linear layer's GEMM), times how much less
 * efficient the fitted table (cost/rv_keff) says the GPU is at the smaller
 * size. Between 1/T and 1: a smaller GEMM is neither slower than the whole
 * nor more than linearly faster. *modelled is set when the table spoke. */
static double gemm_split_factor(const par_ctx *c, size_t i, int T, int *modelled)
{
    const rv_graph *g = c->g;
    const rv_flops_trace *f = g->flops;
    int32_t e = g->tasks[i].event;
    double lin = 1.0 / T;
    *modelled = 0;
    if (!f || !c->hw || e < 0 || !g->trace || (size_t)e >= g->trace->nevents || f->flops[e] <= 0)
        return lin;
    double e0 = rv_keff_eff(c->hw, f->cls[e], f->flops[e], f->bytes[e]);
    double e1 = rv_keff_eff(c->hw, f->cls[e], f->flops[e] / T, f->bytes[e] / T);
    if (e0 <= 0 || e1 <= 0)
        return lin;
    *modelled = 1;
    double x = lin * e0 / e1;
    return x < lin ? lin : x > 1 ? 1 : x;
}

/* GEMMs (attention included) split T ways everywhere (vocabulary-parallel
 * output layer too), each at its efficiency at the smaller size where the
 * trace has its shapes; element-wise work only inside the layers, norms
 * not. *modelled counts the GEMMs the table re-timed. */
static void tensor_scale(par_ctx *c, int T, double *gemm_before, double *gemm_after,
                         size_t *modelled, size_t *gemms)
{
    rv_graph *g = c->g;
    for (size_t i = 0; i < g->ntasks; i++) {
        if (!is_compute(g, i))
            continue;
        rv_task *t = &g->tasks[i];
        int kc = rv_kclass_of_task(g, i);
        int in_layer = rv_layers_of_task(g->layers, i) >= 0 || t->phase == RV_PHASE_BACKWARD;
        if (is_gemm(g, i)) {
            int m = 0;
            double x = gemm_split_factor(c, i, T, &m);
            *modelled += (size_t)m;
            (*gemms)++;
            *gemm_before += (double)t->dur_ns;
            t->dur_ns = rv_models__scaled_ns(t->dur_ns, x);
            *gemm_after += (double)t->dur_ns;
        } else if (kc == RV_KC_MEMBOUND && in_layer && !is_norm(rv_task_name(g, i))) {
            t->dur_ns = rv_models__scaled_ns(t->dur_ns, 1.0 / T);
        }
    }
}

/* Two all-reduces in a chunk of a layer's kernels: after the linear GEMM
 * halfway through them (attention's output projection: q, k, v, o then
 * gate, up, down, or qkv, o then fc1, fc2) and after the last one (the
 * MLP's second); each blocks the stream until it is done. */
/* A GEMM of a linear layer (the op that launched it says so), not of the
 * attention scores. */
static int is_linear_gemm(const rv_graph *g, size_t i)
{
    if (!is_gemm(g, i) || !g->trace)
        return 0;
    const char *op = rv_trace_str(g->trace, g->tasks[i].op);
    return strstr(op, "linear") || strstr(op, "addmm") || strcmp(op, "aten::mm") == 0;
}

static int tensor_chunk(par_ctx *c, const int32_t *ks, size_t n, const int32_t *next, int T,
                        double msg, int32_t it, int ph)
{
    int32_t gemms[2] = {-1, -1};
    size_t ng = 0, seen = 0;
    int (*pick)(const rv_graph *, size_t) = is_linear_gemm;
    for (size_t j = 0; j < n; j++)
        ng += is_linear_gemm(c->g, (size_t)ks[j]);
    if (ng < 2) { /* ops unnamed: every GEMM */
        pick = is_gemm;
        ng = 0;
        for (size_t j = 0; j < n; j++)
            ng += is_gemm(c->g, (size_t)ks[j]);
    }
    for (size_t j = 0; j < n; j++) {
        if (!pick(c->g, (size_t)ks[j]))
            continue;
        seen++;
        if (seen == (ng + 1) / 2)
            gemms[0] = ks[j];
        if (seen == ng)
            gemms[1] = ks[j];
    }
    for (int k = 0; k < 2; k++) {
        int32_t at = gemms[k] >= 0 ? gemms[k] : ks[n - 1];
        int64_t ar = insert(c, TH_TP, RV_PD_TENSOR, RV_COLL_ALLREDUCE, T, msg, it, ph, at);
        if (ar < 0)
            return (int)ar;
        int rc = edge(c, at, ar, 0);
        if (!rc && next[at] >= 0)
            rc = edge(c, ar, next[at], 0);
        if (rc)
            return rc;
    }
    return 0;
}

static int apply_tensor(par_ctx *c, int T, double msg, int32_t *buf, int32_t *tmp)
{
    rv_graph *g = c->g;
    const rv_layers *l = g->layers;
    int32_t *next = rv_models__thread_next(g);
    double before = 0, after = 0;
    size_t modelled = 0, gemms = 0;
    int rc = 0;
    if (!next)
        return RV_ERR_NOMEM;
    for (int32_t it = g->niters ? 0 : -1; it < (int32_t)g->niters && rc == 0; it++) {
        size_t nf = kernels_of(g, it, RV_PHASE_FORWARD, buf);
        if (nf == 0)
            nf = kernels_of(g, it, RV_PHASE_UNKNOWN, buf);
        /* Forward: each layer instance's kernels. */
        for (int32_t li = 0; li < l->nlayers && rc == 0; li++) {
            size_t m = 0;
            for (size_t j = 0; j < nf; j++)
                if (rv_layers_of_task(l, (size_t)buf[j]) == li)
                    tmp[m++] = buf[j];
            if (m)
                rc = tensor_chunk(c, tmp, m, next, T, msg, it, RV_PHASE_FORWARD);
        }
        /* Backward has no instances: its kernels cut into as many chunks. */
        size_t nb = kernels_of(g, it, RV_PHASE_BACKWARD, buf);
        for (int32_t li = 0; nb && li < l->nlayers && rc == 0; li++) {
            size_t a = (size_t)li * nb / (size_t)l->nlayers;
            size_t b = (size_t)(li + 1) * nb / (size_t)l->nlayers;
            if (b > a)
                rc = tensor_chunk(c, buf + a, b - a, next, T, msg, it, RV_PHASE_BACKWARD);
        }
    }
    free(next);
    if (rc)
        return rc;
    tensor_scale(c, T, &before, &after, &modelled, &gemms);
    json_object_set_new(c->entry, "gemm_us_before", json_real(before / 1e3 / c->steps));
    json_object_set_new(c->entry, "gemm_us_after", json_real(after / 1e3 / c->steps));
    json_object_set_new(c->entry, "gemms_at_new_size", json_integer((json_int_t)modelled));
    json_object_set_new(c->entry, "gemms_linear", json_integer((json_int_t)(gemms - modelled)));
    json_object_set_new(c->entry, "message_bytes", json_real(msg));
    rv_models__warn(c->entry, "tensor_assumed",
                    "tensor %d: %zu of %zu GEMMs re-timed at 1/%d of their FLOPs and bytes by "
                    "the fitted efficiency table (the rest, without shapes or a fitted GPU, "
                    "divide by %d); in-layer element-wise kernels divide by %d, norms do not; "
                    "no sequence parallelism; two all-reduces of %.0f bytes per layer forward "
                    "(and backward)",
                    T, modelled, gemms, T, T, T, msg);
    return 0;
}

/* ---- (b) pipeline parallel ---------------------------------------------- */

static int apply_pipeline(par_ctx *c, int P, int M, double msg, int32_t *buf, int32_t *tmp)
{
    rv_graph *g = c->g;
    /* Every stage runs 1/P of the layers for M micro-batches of 1/M of the
     * batch, and idles (P-1) micro-batch slots: the 1F1B step is
     * (M+P-1)/(M*P) of the traced one. */
    double f = (double)(M + P - 1) / ((double)M * P);
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (t->flags & RV_TF_INSERTED)
            continue;
        t->dur_ns = rv_models__scaled_ns(t->dur_ns, f);
        t->gap_ns = rv_models__scaled_ns(t->gap_ns, f);
        t->gap_dl_ns = rv_models__scaled_ns(t->gap_dl_ns, f);
    }
    /* The fill and drain cross P-1 stage boundaries each way: those sends
     * are on the critical path; the others overlap compute. */
    for (int32_t it = g->niters ? 0 : -1; it < (int32_t)g->niters; it++) {
        size_t n = kernels_of(g, it, -1, buf);
        if (!n)
            continue;
        int train = kernels_of(g, it, RV_PHASE_BACKWARD, tmp) > 0;
        int64_t prev = buf[n - 1];
        for (int h = 0; h < (P - 1) * (1 + train); h++) {
            int64_t x = insert(c, TH_PP, RV_PD_PIPELINE, OP_P2P, P, msg / M, it,
                               h < P - 1 ? RV_PHASE_FORWARD : RV_PHASE_BACKWARD, buf[n - 1]);
            if (x < 0)
                return (int)x;
            int rc = edge(c, prev, x, 0);
            if (rc)
                return rc;
            prev = x;
        }
        int rc = edge(c, prev, iter_end(g, it, buf[n - 1]), 0);
        if (rc)
            return rc;
        /* Each rank sends M activations forward (and M gradients back). */
        c->traffic[RV_PD_PIPELINE] +=
            (double)M * (1 + train) * (msg / M) - (double)(P - 1) * (1 + train) * (msg / M);
    }
    json_object_set_new(c->entry, "bubble_share", json_real((double)(P - 1) / (M + P - 1)));
    json_object_set_new(c->entry, "stage_time_factor", json_real(f));
    rv_models__warn(c->entry, "pipeline_assumed",
                    "pipeline %d x %d micro-batches: layers split evenly over the stages, the "
                    "default 1F1B schedule (bubble (p-1)/(m+p-1)), every task's time scaled by "
                    "(m+p-1)/(m*p); the fill and drain sends are on the critical path",
                    P, M);
    return 0;
}

/* ---- expert parallel ---------------------------------------------------- */

static void apply_expert(par_ctx *c, int E)
{
    rv_graph *g = c->g;
    int E0 = g->trace && g->trace->world_size > 1 ? g->trace->world_size : 1;
    size_t n = 0;
    /* Off-rank share of the tokens each all-to-all moves: (e-1)/e. */
    double f0 = E0 > 1 ? (double)(E0 - 1) / E0 : 0, f1 = (double)(E - 1) / E;
    for (size_t i = 0; i < g->ntasks && f0 > 0; i++) {
        rv_task *t = &g->tasks[i];
        /* The graph takes DeepEP's kernels for collectives (RV_TF_NCCL). */
        if ((t->kind != RV_TASK_GPU && t->kind != RV_TASK_COMM) || t->event < 0 ||
            !rv_pardims_is_moe_kernel(rv_task_name(g, i)))
            continue;
        t->dur_ns = rv_models__scaled_ns(t->dur_ns, f1 / f0);
        n++;
    }
    json_object_set_new(c->entry, "expert_kernels_retimed", json_integer((json_int_t)n));
    if (!n)
        rv_models__warn(c->entry, "no_effect",
                        "parallel.expert: the trace has no expert all-to-all kernels (DeepEP "
                        "dispatch / combine) to re-time");
}

/* ---- the model ---------------------------------------------------------- */

static int refuse(rv_error *err, const char *field, const char *why)
{
    return rv_error_field(err, RV_ERR_LIMIT, field, "%s: %s", field, why);
}

/* Attention heads: dim 1 of the [b, heads, s, d] query of the first
 * attention op with shapes (scaled_dot_product_attention, flash attention,
 * or a 4-d matmul); 0 unknown. */
static int64_t attention_heads(const rv_trace *t)
{
    for (size_t k = 0; t && k < t->nop_shapes; k++) {
        const rv_op_shape *os = &t->op_shapes[k];
        const char *name = rv_trace_str(t, t->events[os->event].name);
        if (!strstr(name, "scaled_dot_product_attention") && !strstr(name, "flash_attention") &&
            strcmp(name, "aten::matmul") != 0)
            continue;
        const rv_shape_arg *a = &t->shape_args[os->first];
        if (os->nargs >= 1 && a->ndims == 4)
            return rv_shapes_dims(t, a)[1];
    }
    return 0;
}

static int check(const rv_par *p, const rv_graph *g, rv_error *err)
{
    const rv_layers *l = g->layers;
    int T = p->tensor, P = p->pipeline;
    if ((T > 1 || P > 1) && !l)
        return refuse(err, T > 1 ? "parallel.tensor" : "parallel.pipeline",
                      "the trace names no layer instances (record with with_modules=True or "
                      "with_stack=True) to split");
    if (P > 1 && l->nlayers % P != 0) {
        return rv_error_field(err, RV_ERR_LIMIT, "parallel.pipeline",
                              "parallel.pipeline: %d stages do not divide the %d layers (%.60s) "
                              "evenly",
                              P, l->nlayers, l->type);
    }
    int64_t heads = T > 1 ? attention_heads(g->trace) : 0;
    if (heads > 0 && heads % T != 0)
        return rv_error_field(err, RV_ERR_LIMIT, "parallel.tensor",
                              "parallel.tensor: %d does not divide the %lld attention heads", T,
                              (long long)heads);
    if (p->microbatches > 1 && P <= 1)
        return refuse(err, "parallel.microbatches", "micro-batches need pipeline > 1");
    return 0;
}

int rv_parallel_check(const rv_par *p, const rv_graph *g, rv_error *err)
{
    return check(p, g, err);
}

/* Parameter bytes of one step, from the op shapes; 0 unknown. */
static double parameter_bytes(const rv_graph *g, rv_memory_shapes *b)
{
    const rv_trace *t = g->trace;
    memset(b, 0, sizeof(*b));
    if (!t || !t->nop_shapes)
        return 0;
    int64_t t0 = INT64_MIN, t1 = INT64_MAX;
    if (g->niters) {
        const rv_iter *it = &g->iters[g->niters / 2];
        t0 = g->origin_ns + it->start_ns;
        t1 = g->origin_ns + it->end_ns;
    }
    if (rv_memory_from_shapes(t, g->flops ? g->flops->op_tree : NULL, t0, t1, b) != 0 ||
        b->weights <= 0)
        return 0;
    return (double)b->weights;
}

static void memory_scale(const rv_par *p, int N, json_t *entry)
{
    double fw = 1, fg = 1, fo = 1, fa = 1;
    int z = p->zero > 0 ? p->zero : 0;
    if (N > 1) {
        fo = z >= 1 ? 1.0 / N : 1;
        fg = z >= 2 ? 1.0 / N : 1;
        fw = z >= 3 ? 1.0 / N : 1;
    }
    double split = (p->tensor > 1 ? p->tensor : 1) * (p->pipeline > 1 ? p->pipeline : 1);
    fw /= split;
    fg /= split;
    fo /= split;
    if (p->pipeline > 1) {
        int P = p->pipeline, M = p->microbatches > 0 ? p->microbatches : 1;
        fa = (1.0 / P) * (double)(P < M ? P : M) / M;
    }
    json_object_set_new(entry, "memory_scale",
                        json_pack("{s:f,s:f,s:f,s:f}", "weights", fw, "gradients", fg,
                                  "optimizer_state", fo, "activations", fa));
}

/* Per dimension of the request (ZeRO's sharded data under "data"). */
static json_t *dims_json(const par_ctx *c)
{
    json_t *o = json_object();
    for (int d = 0; o && d < RV_PD_COUNT; d++) {
        if (d == RV_PD_FSDP)
            continue;
        double tr = c->traffic[d], n = (double)c->inserted[d], s = c->comm_s[d];
        if (d == RV_PD_DATA) {
            tr += c->traffic[RV_PD_FSDP];
            n += (double)c->inserted[RV_PD_FSDP];
            s += c->comm_s[RV_PD_FSDP];
        }
        if (n <= 0 && tr <= 0)
            continue;
        json_object_set_new(o, rv_pardim_name(d),
                            json_pack("{s:f,s:f,s:f}", "comm_bytes_per_step", tr / c->steps,
                                      "collectives_inserted_per_step", n / c->steps,
                                      "comm_us_per_step", s * 1e6 / c->steps));
    }
    return o;
}

static int apply_all(par_ctx *c, const rv_par *p, int N, int32_t *buf, int32_t *tmp, rv_error *err)
{
    rv_memory_shapes ms;
    double psi = parameter_bytes(c->g, &ms);
    double msg = c->g->trace ? activation_bytes(c->g->trace) : 0;
    int rc = 0;
    if ((p->tensor > 1 || p->pipeline > 1) && msg <= 0)
        rv_models__warn(c->entry, "activation_size_unknown",
                        "no linear layer has shapes: the activations each layer passes on are "
                        "taken as 0 bytes, so tensor and pipeline messages cost their latency "
                        "only");
    if (p->data > 0 || p->zero >= 0) {
        if (N <= 1) {
            rv_models__warn(c->entry, "no_effect",
                            "parallel.data: one data-parallel rank has nothing to shard or "
                            "reduce");
        } else if (psi <= 0) {
            return rv_error_field(err, RV_ERR_LIMIT, "parallel.zero",
                                  "parallel.zero: the parameter bytes are unknown (the trace has "
                                  "no op shapes; record with record_shapes=True)");
        } else {
            rc = apply_zero(c, N, p->zero > 0 ? p->zero : 0, psi, buf);
        }
    }
    if (!rc && p->tensor > 1)
        rc = apply_tensor(c, p->tensor, msg, buf, tmp);
    if (!rc && p->pipeline > 1)
        rc = apply_pipeline(c, p->pipeline, p->microbatches > 0 ? p->microbatches : 1, msg, buf,
                            tmp);
    if (!rc && p->expert > 0)
        apply_expert(c, p->expert);
    if (rc == RV_ERR_LIMIT)
        return rv_error_field(err, rc, "parallel", "more than %d collectives to insert",
                              RV_PAR_MAX_INSERT);
    if (rc)
        return rv_error_set(err, rc, -1, -1, "parallel: %s", rv_err_name(rc));
    memory_scale(p, N, c->entry);
    return 0;
}

int rv_models__parallel(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err)
{
    const rv_par *p = &w->par;
    par_ctx c;
    int rc = check(p, g, err);
    if (rc)
        return rc;
    memset(&c, 0, sizeof(c));
    c.w = w;
    c.g = g;
    c.hw = rv_models__hw(w, g);
    c.steps = g->niters ? (double)g->niters : 1;
    c.base = g->ntasks;
    for (int k = 0; k < TH_COUNT; k++)
        c.th[k] = -1;
    int traced = g->trace && g->trace->world_size > 1 ? g->trace->world_size : 1;
    int N = p->data > 0 ? p->data : traced;
    c.entry = json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i}", "model", "parallel", "data", N, "zero",
                        p->zero >= 0 ? p->zero : 0, "tensor", p->tensor > 0 ? p->tensor : 1,
                        "pipeline", p->pipeline > 0 ? p->pipeline : 1, "microbatches",
                        p->microbatches > 0 ? p->microbatches : 1, "expert",
                        p->expert > 0 ? p->expert : traced);
    int32_t *buf = malloc((g->ntasks + 1) * sizeof(int32_t));
    int32_t *tmp = malloc((g->ntasks + 1) * sizeof(int32_t));
    if (!c.entry || !buf || !tmp) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    if (g->layers)
        json_object_set_new(
            c.entry, "layers",
            json_pack("{s:s,s:i}", "type", g->layers->type, "count", g->layers->nlayers));
    if ((rc = apply_all(&c, p, N, buf, tmp, err)) != 0)
        goto out;
    json_object_set_new(c.entry, "dimensions", dims_json(&c));
    json_object_set_new(c.entry, "edges_left_out", json_integer((json_int_t)c.skipped));
    if (c.skipped)
        rv_models__warn(c.entry, "order_kept",
                        "%zu waits of inserted collectives were left out where the trace ran "
                        "the phases interleaved (a pipelined or overlapped step): those "
                        "collectives overlap instead of blocking",
                        c.skipped);
    if (g->trace && g->trace->world_size > 1 && p->data > 0)
        rv_models__warn(c.entry, "traced_collectives_kept",
                        "the trace's own collectives are kept as traced; the inserted ones are "
                        "those of the requested degrees");
    rc = json_array_append(applied, c.entry) ? RV_ERR_NOMEM : 0;
out:
    json_decref(c.entry);
    free(buf);
    free(tmp);
    free(c.vt);
    return rc;
}

/* ---- what the answer's other parts read --------------------------------- */

const int32_t *rv_parallel_degrees(const rv_whatif *w, int32_t *deg)
{
    if (!w || !w->has_par)
        return NULL;
    memset(deg, 0, sizeof(*deg) * RV_PD_COUNT);
    const rv_par *p = &w->par;
    deg[RV_PD_DATA] = deg[RV_PD_FSDP] = p->data;
    deg[RV_PD_TENSOR] = p->tensor;
    deg[RV_PD_PIPELINE] = p->pipeline;
    deg[RV_PD_EXPERT] = p->expert;
    return deg;
}

int rv_parallel_replica_gpus(const rv_whatif *w)
{
    if (!w || !w->has_par)
        return 1;
    const rv_par *p = &w->par;
    return (p->tensor > 1 ? p->tensor : 1) * (p->pipeline > 1 ? p->pipeline : 1);
}

double rv_parallel_bubble_share(const rv_whatif *w)
{
    if (!w || !w->has_par || w->par.pipeline <= 1)
        return 0;
    int P = w->par.pipeline, M = w->par.microbatches > 0 ? w->par.microbatches : 1;
    return (double)(P - 1) / (M + P - 1);
}

static double getnum(const json_t *o, const char *k, double dflt)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

int rv_parallel_memory(json_t *mem, const json_t *applied)
{
    size_t i;
    json_t *a, *sc = NULL;
    json_array_foreach(applied, i, a)
    {
        const char *m = json_string_value(json_object_get(a, "model"));
        if (m && strcmp(m, "parallel") == 0)
            sc = json_object_get(a, "memory_scale");
    }
    if (!sc || !json_is_object(mem))
        return 0;
    json_t *b = json_object_get(mem, "breakdown");
    if (!json_is_integer(json_object_get(b, "weights"))) {
        json_object_set_new(mem, "predicted_breakdown", json_null());
        json_object_set_new(mem, "predicted_reason",
                            json_string("the per-GPU memory after sharding needs the breakdown "
                                        "into weights, gradients and optimizer state"));
        return 0;
    }
    static const char *const parts[] = {"weights", "gradients", "optimizer_state"};
    double before = 0, after = 0;
    json_t *pb = json_object();
    for (int k = 0; k < 3; k++) {
        double v = getnum(b, parts[k], 0), f = getnum(sc, parts[k], 1);
        before += v;
        after += v * f;
        json_object_set_new(pb, parts[k], json_integer((json_int_t)llround(v * f)));
    }
    double fa = getnum(sc, "activations", 1);
    double act = getnum(b, "activations_and_other", getnum(b, "activations", 0));
    json_object_set_new(pb, "activations",
                        json_integer((json_int_t)llround(getnum(b, "activations", act) * fa)));
    json_object_set_new(pb, "activations_and_other", json_integer((json_int_t)llround(act * fa)));
    json_object_set_new(pb, "per_gpu", json_true());
    double base = getnum(mem, "peak_bytes", -1);
    if (base <= 0)
        base = getnum(mem, "estimated_peak_bytes", -1);
    json_object_set_new(mem, "predicted_breakdown", pb);
    if (base > 0)
        json_object_set_new(
            mem, "predicted_peak_bytes",
            json_integer((json_int_t)llround(fmax(0, base - before + after - act * (1 - fa)))));
    return 1;
}
