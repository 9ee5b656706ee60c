/* Memory savers (Daydream section 5.2): vDNN offload/prefetch, Gist
 * encode/decode, activation recomputation, and gradient accumulation.
 *
 * The forward kernel that produced an activation is paired with the
 * backward kernel that consumes it by position: the i-th of nF forward
 * kernels maps to the backward kernel at (nF - 1 - i) / nF of the backward
 * pass (backward runs the layers in reverse). */
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "cost/rv_memory.h"
#include "models/rv_models.h"

/* vDNN: a forward kernel whose next kernel is not on its stream offloads
 * this share of what it could stream in its own time (docs/models/memory.md). */
#define VDNN_LONE_KERNEL_SHARE 0.1

static int is_kernel(const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    return t->kind == RV_TASK_GPU && t->cat == RV_CAT_KERNEL && !(t->flags & RV_TF_NCCL) &&
           !(t->flags & RV_TF_REMOVED) && !(t->flags & RV_TF_INSERTED);
}

/* Default selections when the document gives none. */
static int default_pick(int kind, const rv_graph *g, size_t i)
{
    if (g->tasks[i].phase != RV_PHASE_FORWARD)
        return 0;
    const char *n = rv_task_name(g, i);
    int c = rv_kname_class(n);
    switch (kind) {
    case RV_OPT_VDNN: return c == RV_KC_GEMM; /* conv outputs are offloaded */
    case RV_OPT_GIST:
        return strstr(n, "relu") || strstr(n, "threshold") || strstr(n, "clamp_min") ||
               strstr(n, "pool");
    default: return 1; /* recompute: the whole forward pass */
    }
}

/* Bytes the op of kernel i moves by its shapes (rv_flops); 0 unknown. */
static double op_bytes(const rv_graph *g, int32_t i)
{
    const rv_flops_trace *fl = g->flops;
    int32_t ev = g->tasks[i].event;
    return fl && g->trace && ev >= 0 && (size_t)ev < g->trace->nevents ? fl->bytes[ev] : 0;
}

static json_t *report(const char *model, const rv_opt *o)
{
    return json_pack("{s:s, s:i}", "model", model, "index", o->index);
}

static int grad_accum(const rv_opt *o, rv_graph *g, json_t *applied)
{
    size_t n = 0;
    double k = o->steps;
    /* One optimizer step (and one gradient exchange) per k micro-batches:
     * per micro-batch, the update costs 1/k. */
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (t->flags & RV_TF_REMOVED)
            continue;
        if (t->phase != RV_PHASE_OPTIMIZER && t->kind != RV_TASK_COMM)
            continue;
        t->dur_ns = (int64_t)llround((double)t->dur_ns / k);
        if (t->kind == RV_TASK_CPU) {
            int64_t dl = t->gap_dl_ns;
            t->gap_ns = dl + (int64_t)llround((double)(t->gap_ns - dl) / k);
        }
        n++;
    }
    json_t *r = report("gradient_accumulation", o);
    json_object_set_new(r, "steps", json_integer(o->steps));
    json_object_set_new(r, "tasks_scaled", json_integer((json_int_t)n));
    json_object_set_new(r, "note", json_string("iteration = one micro-batch"));
    return r && json_array_append_new(applied, r) == 0 ? 0 : RV_ERR_NOMEM;
}

static rv_thread side_thread_like(const rv_graph *g, int32_t task)
{
    rv_thread th = g->threads[g->tasks[task].thread];
    th.first = th.last = -1;
    th.norig = 0;
    th.kind = RV_THREAD_GPU;
    return th;
}

static int64_t append_copy(rv_graph *g, int32_t th, int64_t dur, int64_t bytes, int32_t like)
{
    rv_task t = {0};
    t.dur_ns = dur;
    t.meas_start_ns = -1;
    t.bytes = bytes;
    t.event = -1;
    t.launch = -1;
    t.iteration = g->tasks[like].iteration;
    t.phase = g->tasks[like].phase;
    t.layer = g->tasks[like].layer;
    t.kind = RV_TASK_GPU;
    t.cat = RV_CAT_MEMCPY;
    t.flags = RV_TF_INSERTED;
    return rv_graph_append_task(g, th, &t);
}

/* One memory saver pass over the steps: what it works with and counts. */
typedef struct saver {
    double hbm, pcie; /* bytes/s */
    int64_t launch;
    int32_t *fw, *bw, *offid, *next, *side;
    size_t nf, nb;
    size_t inserted;
    double added_ns, bytes_total;
    double step_bytes;
    size_t step_layers;
    int32_t off_th, pre_th, prev_pre;
} saver;

/* Work after the forward producers (offload, encode), in forward order.
 * 0 or a negative rv_err. */
static int saver_forward(saver *v, const rv_opt *o, rv_graph *g)
{
    int rc;
    for (size_t q = 0; q < v->nf; q++) {
        int32_t f = v->fw[q];
        int64_t fd = g->tasks[f].dur_ns;
        if (o->kind == RV_OPT_VDNN) {
            /* The activation: what the next kernel on the stream (a
             * norm or activation) streams through once. Not its op's
             * shapes: an op's bytes are shared among its kernels. */
            int32_t nx = v->next[f];
            double bytes = nx >= 0 && is_kernel(g, nx)
                               ? (double)g->tasks[nx].dur_ns * 1e-9 * v->hbm / 2
                               : (double)fd * 1e-9 * v->hbm * VDNN_LONE_KERNEL_SHARE;
            int64_t cd = (int64_t)llround(bytes / v->pcie * 1e9);
            if (v->off_th < 0) {
                rv_thread a = side_thread_like(g, f), b2 = a;
                v->off_th = rv_graph_add_thread(g, &a);
                v->pre_th = v->off_th >= 0 ? rv_graph_add_thread(g, &b2) : v->off_th;
                if (v->off_th < 0 || v->pre_th < 0)
                    return RV_ERR_NOMEM;
            }
            int64_t off = append_copy(g, v->off_th, cd, (int64_t)bytes, f);
            if (off < 0)
                return (int)off;
            if ((rc = rv_graph_add_edge(g, f, (int32_t)off, 0, RV_EDGE_OTHER, 0)))
                return rc;
            v->offid[q] = (int32_t)off;
            v->inserted++;
            v->added_ns += (double)cd;
            v->bytes_total += bytes;
            v->step_bytes += bytes;
            v->step_layers++;
        } else if (o->kind == RV_OPT_GIST) {
            int64_t d = (int64_t)llround((double)fd * o->ratio / 2);
            /* The stash: what the relu/pool kernel writes, half of
             * the bytes its op's shapes move, else of what it
             * streams in its time (the vDNN size rule). */
            double moved = op_bytes(g, f);
            v->step_bytes += moved > 0 ? moved / 2 : (double)fd * 1e-9 * v->hbm / 2;
            v->step_layers++;
            if (d <= 0)
                continue;
            if ((rc = rv_models__insert_after(g, f, v->next, d, RV_SEL_KERNEL, v->side)))
                return rc;
            v->inserted++;
            v->added_ns += (double)d;
            if (g->tasks[f].launch >= 0)
                g->tasks[g->tasks[f].launch].gap_ns += v->launch;
        }
    }
    return 0;
}

/* Work at the backward consumers (prefetch, decode, recompute), in
 * backward order. 0 or a negative rv_err. */
static int saver_backward(saver *v, const rv_opt *o, rv_graph *g)
{
    int rc;
    size_t nf = v->nf, nb = v->nb;
    for (size_t q = nf; q-- > 0;) {
        int32_t f = v->fw[q];
        int32_t b = v->bw[(size_t)((double)(nf - 1 - q) * (double)nb / (double)nf)];
        int64_t fd = g->tasks[f].dur_ns;
        if (o->kind == RV_OPT_VDNN) {
            int64_t cd = g->tasks[v->offid[q]].dur_ns;
            int64_t pre = append_copy(g, v->pre_th, cd, g->tasks[v->offid[q]].bytes, b);
            if (pre < 0)
                return (int)pre;
            /* Prefetch after the offload, one layer ahead of its
             * consumer, which waits for it. */
            if ((rc = rv_graph_add_edge(g, v->offid[q], (int32_t)pre, 0, RV_EDGE_OTHER, 0)) ||
                (rc = rv_graph_add_edge(g, (int32_t)pre, b, 0, RV_EDGE_OTHER, 0)))
                return rc;
            if (v->prev_pre >= 0 &&
                (rc = rv_graph_add_edge(g, v->prev_pre, (int32_t)pre, 0, RV_EDGE_OTHER, 1)))
                return rc;
            v->prev_pre = b;
            v->inserted++;
            v->added_ns += (double)cd;
        } else {
            /* Gist decodes before the consumer; recompute runs the
             * producer again. */
            int64_t d = o->kind == RV_OPT_GIST ? (int64_t)llround((double)fd * o->ratio / 2)
                                               : (int64_t)llround((double)fd * o->share);
            if (d <= 0)
                continue;
            if ((rc = rv_models__insert_after(g, b, v->next, d, RV_SEL_KERNEL, v->side)))
                return rc;
            v->inserted++;
            v->added_ns += (double)d;
            if (g->tasks[b].launch >= 0)
                g->tasks[g->tasks[b].launch].gap_ns += v->launch;
        }
    }
    return 0;
}

/* The applied entry (new reference; NULL on OOM). */
static json_t *saver_report(const saver *v, const rv_opt *o, double step_max, size_t max_layers)
{
    static const char *const names[] = {
        [RV_OPT_VDNN] = "vdnn", [RV_OPT_GIST] = "gist", [RV_OPT_RECOMPUTE] = "recompute"};
    json_t *r = report(names[o->kind], o);
    json_object_set_new(r, "tasks_inserted", json_integer((json_int_t)v->inserted));
    json_object_set_new(r, "inserted_gpu_us", json_real(v->added_ns / 1e3));
    if (o->kind == RV_OPT_VDNN) {
        json_object_set_new(r, "offloaded_mb", json_real(v->bytes_total / (1024.0 * 1024.0)));
        json_object_set_new(r, "pcie_gbps", json_real(v->pcie * 8 / 1e9));
        json_object_set_new(r, "offloaded_bytes", json_integer((json_int_t)llround(step_max)));
        json_object_set_new(r, "offloaded_layers", json_integer((json_int_t)max_layers));
    } else if (o->kind == RV_OPT_GIST) {
        json_object_set_new(r, "encoded_bytes", json_integer((json_int_t)llround(step_max)));
        json_object_set_new(r, "encoding", json_real(RV_GIST_ENCODING));
    } else {
        json_object_set_new(r, "share", json_real(o->share));
    }
    return r;
}

int rv_models__memory_saver(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                            json_t *applied, rv_error *err)
{
    if (o->kind == RV_OPT_GRAD_ACCUM) {
        int rc = grad_accum(o, g, applied);
        return rc ? rv_error_set(err, rc, -1, -1, "out of memory") : 0;
    }
    const rv_hw *hw = rv_models__hw(w, g);
    saver v;
    memset(&v, 0, sizeof(v));
    v.hbm = (hw ? hw->hbm_gbps : RV_HW_DEFAULT_HBM_GBPS) * 1e9 * RV_MODELS_HBM_SHARE;
    v.pcie = o->pcie_gbps > 0 ? o->pcie_gbps * 1e9 / 8
                              : (hw ? hw->pcie_gbps : RV_MODELS_PCIE_GBYTES) * 1e9;
    size_t n0 = g->ntasks;
    /* One step's stash the saver shrinks (the largest over the steps), for
     * the predicted peak (rv_memory_predict). */
    double step_max = 0;
    size_t max_layers = 0;
    int rc = 0;
    v.fw = malloc((n0 + 1) * sizeof(int32_t));
    v.bw = malloc((n0 + 1) * sizeof(int32_t));
    v.offid = malloc((n0 + 1) * sizeof(int32_t));
    v.next = rv_models__thread_next(g);
    v.side = malloc((g->nthreads + 1) * sizeof(int32_t));
    v.launch = rv_models__launch_ns(g);
    if (!v.fw || !v.bw || !v.offid || !v.next || !v.side) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (size_t t = 0; t < g->nthreads; t++)
        v.side[t] = -1;
    for (int32_t it = 0; it < (int32_t)g->niters; it++) {
        v.nf = v.nb = 0;
        for (size_t j = 0; j < n0; j++) {
            if (g->tasks[j].iteration != it || !is_kernel(g, j))
                continue;
            if (g->tasks[j].phase == RV_PHASE_BACKWARD)
                v.bw[v.nb++] = (int32_t)j;
            else if (o->has_sel
                         ? rv_select_match(&o->sel, g, j) && g->tasks[j].phase == RV_PHASE_FORWARD
                         : default_pick(o->kind, g, j))
                v.fw[v.nf++] = (int32_t)j;
        }
        if (v.nf == 0 || v.nb == 0)
            continue;
        v.step_bytes = 0;
        v.step_layers = 0;
        v.off_th = v.pre_th = v.prev_pre = -1;
        /* Two passes keep each side thread in time order: work after the
         * forward producers in forward order, then work at the backward
         * consumers in backward order. */
        if ((rc = saver_forward(&v, o, g)) != 0)
            goto out;
        if (v.step_bytes > step_max) {
            step_max = v.step_bytes;
            max_layers = v.step_layers;
        }
        if ((rc = saver_backward(&v, o, g)) != 0)
            goto out;
    }
    json_t *r = saver_report(&v, o, step_max, max_layers);
    rc = r && json_array_append_new(applied, r) == 0 ? 0 : RV_ERR_NOMEM;
out:
    free(v.fw);
    free(v.bw);
    free(v.offid);
    free(v.next);
    free(v.side);
    if (rc)
        return rv_error_set(err, rc, -1, -1, "optimizations[%d]: %s", o->index, rv_err_name(rc));
    return 0;
}
