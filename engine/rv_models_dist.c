/* Data-parallel training (Daydream section 5.1, MODELS.md sections B-C).
 *
 * From a one-GPU trace: each parameter's gradient becomes ready at the end
 * of its AccumulateGrad kernel (size from that kernel's memory traffic, or
 * scaled to distributed.gradient_mb); DDP buckets them in ready order (first
 * bucket 1 MiB, then 25 MiB); one collective per bucket runs on a new
 * communication thread after the bucket's last gradient, buckets in order;
 * the optimizer step waits for all of them. Parameter-server variants move
 * the update to the servers and let the next forward wait for the pulls (P3:
 * per slice, by layer priority). Multi-rank traces keep their NCCL kernels
 * and rescale them to the new network instead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rv_models.h"
#include "rv_whatif.h"

#define MIB (1024.0 * 1024.0)
/* Cap on inserted communication tasks per apply (P3 slices can be many). */
#define RV_DIST_MAX_COMM 2000000

typedef struct grad {
    int32_t task; /* the kernel after which the gradient is ready */
    double bytes;
} grad;

static void net_of(const rv_whatif *w, const rv_hw *hw, int n, rv_net *net)
{
    const rv_dist *d = &w->dist;
    memset(net, 0, sizeof(*net));
    net->n = n;
    net->g = d->gpus_per_node < n ? d->gpus_per_node : n;
    if (net->g < 1)
        net->g = 1;
    if (d->intra_gbps > 0)
        net->intra_bps = d->intra_gbps * 1e9 / 8;
    else if (hw && hw->nvlink_gbps > 0)
        net->intra_bps = hw->nvlink_gbps / 2 * 1e9; /* bidirectional GB/s -> one way */
    else
        net->intra_bps = (hw ? hw->pcie_gbps : 12) * 1e9;
    net->inter_bps = d->inter_gbps * 1e9 / 8;
    net->alpha_s = d->latency_us * 1e-6;
    net->efficiency = d->efficiency;
    net->ps_servers = d->ps_servers;
}

static int coll_op_of(const char *name)
{
    if (strstr(name, "ReduceScatter") || strstr(name, "reduce_scatter"))
        return RV_COLL_REDUCE_SCATTER;
    if (strstr(name, "AllGather") || strstr(name, "all_gather") || strstr(name, "allgather"))
        return RV_COLL_ALLGATHER;
    if (strstr(name, "Broadcast") || strstr(name, "broadcast"))
        return RV_COLL_BROADCAST;
    if (strstr(name, "SendRecv") || strstr(name, "AllToAll") || strstr(name, "alltoall"))
        return RV_COLL_ALLTOALL;
    if (strstr(name, "AllReduce") || strstr(name, "all_reduce") || strstr(name, "allreduce"))
        return RV_COLL_ALLREDUCE;
    return -1;
}

static int32_t opt_anchor(const rv_graph *g, int32_t it);

/* Multi-rank trace: infer each collective's bytes from its measured time
 * under the baseline network (hardware-table links, the trace's world size)
 * and re-time it under the requested one. */
static int rescale_nccl(const rv_whatif *w, const rv_hw *hw, rv_graph *g, json_t *applied)
{
    int n0 = g->trace && g->trace->world_size > 1 ? g->trace->world_size : 2;
    rv_whatif base = *w;
    base.dist.intra_gbps = 0;
    base.dist.inter_gbps = 100;
    base.dist.latency_us = 5;
    base.dist.gpus_per_node = n0 < 8 ? n0 : 8;
    rv_net b, x;
    net_of(&base, hw, n0, &b);
    net_of(w, hw, w->dist.workers, &x);
    size_t n = 0, linked = 0, known = 0;
    double before = 0, after = 0;
    /* Collectives whose completion nothing in the graph waits for (traces
     * without cudaStreamWaitEvent records) would float free of the step:
     * as in DDP, the optimizer's first kernel waits for them. */
    uint8_t *waited = calloc(g->ntasks + 1, 1);
    if (!waited)
        return RV_ERR_NOMEM;
    for (size_t e = 0; e < g->nedges; e++) {
        const rv_edge *ed = &g->edges[e];
        if (g->tasks[ed->src].thread != g->tasks[ed->dst].thread)
            waited[ed->src] = 1;
    }
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (!(t->flags & RV_TF_NCCL) || (t->flags & RV_TF_REMOVED))
            continue;
        int op = coll_op_of(rv_task_name(g, i));
        if (op < 0)
            continue;
        if (!waited[i] && t->iteration >= 0 && op == RV_COLL_ALLREDUCE) {
            int32_t a = opt_anchor(g, t->iteration);
            if (a >= 0 && g->tasks[a].meas_start_ns > t->meas_start_ns) {
                if (rv_graph_add_edge(g, (int32_t)i, a, 0, RV_EDGE_COMM, 0)) {
                    free(waited);
                    return RV_ERR_NOMEM;
                }
                linked++;
            }
        }
        double tb = (double)t->dur_ns * 1e-9;
        int use_table = op == RV_COLL_ALLREDUCE && w->dist.allreduce.n > 0;
        double tn;
        if (t->bytes > 0) {
            /* The trace names the message (newer Kineto: "In msg nelems" and
             * "dtype"). What the baseline network explains of the measured
             * time is re-timed; the rest (waiting for other ranks, skew)
             * stays. */
            double s = (double)t->bytes;
            double mb = rv_coll_time(&b, op, w->dist.algorithm, s);
            double moved = mb < tb ? mb : tb;
            double mx = use_table ? rv_coll_table_time(&w->dist.allreduce, s)
                                  : rv_coll_time(&x, op, w->dist.algorithm, s);
            tn = x.n <= 1 ? 0 : (tb - moved) + (use_table || mb <= 0 ? mx : moved * mx / mb);
            known++;
        } else {
            double steps = op == RV_COLL_ALLREDUCE ? 2.0 * (n0 - 1) : (double)(n0 - 1);
            double f0 = rv_coll_busbw_factor(op, n0);
            double bytes = tb - steps * b.alpha_s;
            bytes = bytes > 0 ? bytes * rv_coll_ring_bw(&b) / (f0 > 0 ? f0 : 1) : 0;
            tn = x.n <= 1    ? 0
                 : use_table ? rv_coll_table_time(&w->dist.allreduce, bytes)
                             : rv_coll_time(&x, op, w->dist.algorithm, bytes);
        }
        before += tb;
        after += tn;
        t->dur_ns = (int64_t)llround(tn * 1e9);
        n++;
    }
    free(waited);
    json_t *r =
        json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:f}", "model", "distributed", "mode",
                  "rescale_collectives", "baseline_workers", n0, "workers", w->dist.workers,
                  "collectives_rescaled", (json_int_t)n, "waits_added", (json_int_t)linked,
                  "comm_us_before", before * 1e6, "comm_us_after", after * 1e6);
    if (r) {
        json_object_set_new(r, "allreduce_model",
                            json_string(w->dist.allreduce.n > 0 ? "measured_table" : "alpha_beta"));
        json_object_set_new(r, "sizes_from_trace", json_integer((json_int_t)known));
    }
    return r && json_array_append_new(applied, r) == 0 ? 0 : RV_ERR_NOMEM;
}

/* Gradients of one iteration, in ready order. */
static int find_grads(const rv_graph *g, const rv_hw *hw, grad *out, size_t *n, size_t cap)
{
    double bw = (hw ? hw->hbm_gbps : RV_HW_DEFAULT_HBM_GBPS) * 1e9;
    *n = 0;
    for (size_t i = 0; i < g->ntasks && *n < cap; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || t->cat != RV_CAT_KERNEL || (t->flags & RV_TF_REMOVED))
            continue;
        const char *op = g->trace ? rv_trace_str(g->trace, t->op) : "";
        const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (!strstr(op, "AccumulateGrad") && !strstr(layer, "AccumulateGrad"))
            continue;
        /* grad += new_grad reads two tensors and writes one. */
        double busy = (double)t->dur_ns * 1e-9 - 1e-6;
        double bytes = busy > 0 ? busy * bw / 3 : 0;
        out[*n].task = (int32_t)i;
        out[*n].bytes = bytes < 4096 ? 4096 : bytes;
        (*n)++;
    }
    return 0;
}

/* GPU order on one stream is index order within the thread; across
 * streams, the measured start decides. */
static int cmp_grad(const void *a, const void *b, void *ctx)
{
    const rv_graph *g = ctx;
    const grad *x = a, *y = b;
    const rv_task *p = &g->tasks[x->task], *q = &g->tasks[y->task];
    if (p->iteration != q->iteration)
        return p->iteration < q->iteration ? -1 : 1;
    if (p->meas_start_ns != q->meas_start_ns)
        return p->meas_start_ns < q->meas_start_ns ? -1 : 1;
    return (x->task > y->task) - (x->task < y->task);
}

/* The task the update of iteration `it` must wait for: the first GPU
 * kernel of Optimizer.step (DDP's finalize makes the compute stream wait
 * for the collectives; the CPU does not block), else the first GPU task of
 * the next step. */
static int32_t opt_anchor(const rv_graph *g, int32_t it)
{
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || t->iteration != it || t->phase != RV_PHASE_OPTIMIZER)
            continue;
        const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (strstr(layer, "zero_grad"))
            continue;
        return (int32_t)i;
    }
    for (size_t i = 0; i < g->ntasks; i++)
        if (g->tasks[i].kind == RV_TASK_GPU && g->tasks[i].iteration == it + 1)
            return (int32_t)i;
    return -1;
}

/* Forward GPU kernels of iteration it, in order (for P3's per-layer waits). */
static size_t forward_kernels(const rv_graph *g, int32_t it, int32_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < g->ntasks && n < cap; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_GPU && t->iteration == it && t->phase == RV_PHASE_FORWARD &&
            !(t->flags & RV_TF_REMOVED) && t->cat == RV_CAT_KERNEL)
            out[n++] = (int32_t)i;
    }
    return n;
}

static int32_t comm_thread(rv_graph *g, int32_t like, const char *why)
{
    rv_thread th = g->threads[g->tasks[like].thread];
    th.kind = RV_THREAD_COMM;
    th.first = th.last = -1;
    th.norig = 0;
    th.stream = -1;
    (void)why;
    return rv_graph_add_thread(g, &th);
}

static int64_t append_comm(rv_graph *g, int32_t th, double secs, double bytes, int32_t it,
                           int32_t prio)
{
    rv_task t = {0};
    t.dur_ns = (int64_t)llround(secs * 1e9);
    t.meas_start_ns = -1;
    t.bytes = (int64_t)bytes;
    t.event = -1;
    t.launch = -1;
    t.iteration = it;
    t.priority = prio;
    t.kind = RV_TASK_COMM;
    t.cat = RV_CAT_KERNEL;
    t.phase = RV_PHASE_BACKWARD;
    t.flags = RV_TF_INSERTED;
    return rv_graph_append_task(g, th, &t);
}

int rv_models__distributed(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err)
{
    const rv_dist *d = &w->dist;
    const rv_hw *hw = rv_models__hw(w, g);
    int rc = 0;
    grad *gr = NULL;
    int32_t *next = NULL, *side = NULL, *fwd = NULL;
    size_t ngr = 0, ncomm = 0, nbuckets = 0, nextra = 0, nremoved = 0;
    double total_bytes = 0, comm_s = 0;
    rv_net net;
    net_of(w, hw, d->workers, &net);

    for (size_t i = 0; i < g->ntasks; i++)
        if (g->tasks[i].flags & RV_TF_NCCL) {
            rc = rescale_nccl(w, hw, g, applied);
            return rc ? rv_error_set(err, rc, -1, -1, "distributed: out of memory") : 0;
        }
    if (d->workers <= 1) {
        json_t *r = json_pack("{s:s, s:i, s:s}", "model", "distributed", "workers", 1, "note",
                              "one worker: nothing to communicate");
        return r && json_array_append_new(applied, r) == 0 ? 0 : RV_ERR_NOMEM;
    }
    gr = malloc((g->ntasks + 1) * sizeof(*gr));
    next = rv_models__thread_next(g);
    side = malloc((g->nthreads + 1) * sizeof(int32_t));
    fwd = malloc((g->ntasks + 1) * sizeof(int32_t));
    if (!gr || !next || !side || !fwd) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t t = 0; t < g->nthreads; t++)
        side[t] = -1;
    find_grads(g, hw, gr, &ngr, g->ntasks);
    if (ngr == 0) {
        rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "distributed",
                            "no gradient-ready points: the trace has no AccumulateGrad kernels "
                            "(profile with the default zero_grad(set_to_none=False) or a "
                            "multi-rank trace)");
        goto out;
    }
    qsort_r(gr, ngr, sizeof(*gr), cmp_grad, g);
    /* Scale the estimate to the requested model size (per iteration). */
    {
        size_t iters = 0;
        double sum = 0;
        for (size_t k = 0; k < ngr; k++) {
            sum += gr[k].bytes;
            if (k == 0 || g->tasks[gr[k].task].iteration != g->tasks[gr[k - 1].task].iteration)
                iters++;
        }
        double per_iter = sum / (double)(iters ? iters : 1);
        if (d->gradient_mb > 0 && per_iter > 0)
            for (size_t k = 0; k < ngr; k++)
                gr[k].bytes *= d->gradient_mb * MIB / per_iter;
        total_bytes = d->gradient_mb > 0 ? d->gradient_mb * MIB : per_iter;
    }
    double bw_hbm = (hw ? hw->hbm_gbps : RV_HW_DEFAULT_HBM_GBPS) * 1e9 * 0.8;
    int ps = d->algorithm == RV_ALGO_PS;
    double cap = d->tensor_fusion_mb > 0 ? d->tensor_fusion_mb * MIB : d->bucket_mb * MIB;
    double first_cap = d->tensor_fusion_mb > 0 ? cap : d->first_bucket_mb * MIB;
    if (d->p3)
        cap = first_cap = d->p3_slice_kb * 1024.0; /* P3: one queue entry per slice */

    size_t k = 0;
    while (k < ngr) {
        int32_t it = g->tasks[gr[k].task].iteration;
        size_t e = k;
        while (e < ngr && g->tasks[gr[e].task].iteration == it)
            e++;
        /* Per iteration: threads for the collectives. */
        int32_t th = comm_thread(g, gr[k].task, "comm");
        int32_t th2 = -1, th3 = -1;
        if (th >= 0 && d->blueconnect) {
            th2 = comm_thread(g, gr[k].task, "inter");
            th3 = comm_thread(g, gr[k].task, "allgather");
        }
        if (th < 0 || (d->blueconnect && (th2 < 0 || th3 < 0))) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
        int32_t anchor = ps ? -1 : opt_anchor(g, it);
        size_t nf = 0;
        if (ps && it >= 0 && (size_t)it + 1 < g->niters)
            nf = forward_kernels(g, it + 1, fwd, g->ntasks);
        double iter_comm = 0, iter_bytes = 0;
        int64_t first_ready_meas = g->tasks[gr[k].task].meas_start_ns;
        size_t b0 = k;
        int bucket_idx = 0;
        while (b0 < e) {
            /* Fill one bucket in ready order. */
            double lim = bucket_idx == 0 ? first_cap : cap, sz = 0;
            size_t b1 = b0;
            do {
                sz += gr[b1].bytes;
                b1++;
            } while (b1 < e && sz + gr[b1].bytes <= lim);
            int32_t ready = gr[b1 - 1].task;
            /* Pieces: tensor partition splits a bucket; P3 buckets are slices. */
            double part = d->tensor_partition_mb > 0 ? d->tensor_partition_mb * MIB : sz;
            int pieces = (int)ceil(sz / part);
            if (pieces < 1)
                pieces = 1;
            if (ncomm + (size_t)pieces > RV_DIST_MAX_COMM) {
                rc = rv_error_field(err, RV_ERR_LIMIT, "distributed",
                                    "more than %d communication tasks; raise bucket or slice "
                                    "size",
                                    RV_DIST_MAX_COMM);
                goto out;
            }
            /* DDP's copy into the bucket and the division by n, or DGC's
             * compression passes, on the compute stream. */
            double extra_s = d->dgc_density > 0 ? 5.0 * sz / bw_hbm : 2.5 * sz / bw_hbm;
            if (!ps) {
                rc = rv_models__insert_after(g, ready, next, (int64_t)llround(extra_s * 1e9),
                                             RV_SEL_KERNEL, side);
                if (rc) {
                    rv_error_set(err, rc, -1, -1, "distributed: %s", rv_err_name(rc));
                    goto out;
                }
                nextra++;
            }
            for (int p = 0; p < pieces; p++) {
                double s = sz / pieces;
                double secs;
                int64_t id, last;
                if (d->blueconnect) {
                    double ti = 0, tx = 0;
                    rv_coll_blueconnect(&net, s, &ti, &tx);
                    id = append_comm(g, th, ti / 2, s, it, 0);
                    int64_t id2 = id >= 0 ? append_comm(g, th2, tx, s, it, 0) : id;
                    last = id2 >= 0 ? append_comm(g, th3, ti / 2, s, it, 0) : id2;
                    if (last >= 0 &&
                        (rv_graph_add_edge(g, (int32_t)id, (int32_t)id2, 0, RV_EDGE_COMM, 0) ||
                         rv_graph_add_edge(g, (int32_t)id2, (int32_t)last, 0, RV_EDGE_COMM, 0)))
                        last = RV_ERR_NOMEM;
                    secs = ti + tx;
                } else {
                    if (d->dgc_density > 0)
                        secs = rv_coll_dgc(&net, s, d->dgc_density);
                    else if (d->allreduce.n > 0)
                        secs = rv_coll_table_time(&d->allreduce, s); /* measured */
                    else
                        secs = rv_coll_time(&net, RV_COLL_ALLREDUCE, d->algorithm, s);
                    if (d->tensor_fusion_mb > 0)
                        secs += 2.0 * s / bw_hbm; /* pack and unpack */
                    /* P3: forward order is the reverse of ready order, so the
                     * last-ready slice (first layer) gets the top priority. */
                    int32_t prio = d->p3 ? (int32_t)(e - b1) : 0;
                    id = last = append_comm(g, th, secs, s, it, prio);
                }
                if (last < 0) {
                    rc = rv_error_set(err, (int)last, -1, -1, "distributed: out of memory");
                    goto out;
                }
                if ((rc = rv_graph_add_edge(g, ready, (int32_t)id, 0, RV_EDGE_COMM, 0)) != 0)
                    goto nomem;
                if (anchor >= 0 &&
                    (rc = rv_graph_add_edge(g, (int32_t)last, anchor, 0, RV_EDGE_COMM, 0)) != 0)
                    goto nomem;
                if (ps && nf > 0) {
                    /* The next forward waits for this pull: all of it without
                     * P3; with P3 only the layers this slice feeds. */
                    size_t f = 0;
                    if (d->p3) {
                        double pos = (double)(e - b1) / (double)(e - k);
                        f = (size_t)(pos * (double)nf);
                        if (f >= nf)
                            f = nf - 1;
                    }
                    if ((rc = rv_graph_add_edge(g, (int32_t)last, fwd[f], 0, RV_EDGE_COMM, 0)))
                        goto nomem;
                }
                iter_comm += secs;
                ncomm++;
            }
            iter_bytes += sz;
            nbuckets++;
            bucket_idx++;
            b0 = b1;
        }
        /* Compute/communication interference (MODELS.md C5): kernels from
         * the first gradient on slow down by sigma times the share of that
         * stretch the collectives cover. */
        if (d->interference > 0) {
            double busy = 0;
            for (size_t i = 0; i < g->ntasks; i++) {
                const rv_task *t = &g->tasks[i];
                if (t->kind == RV_TASK_GPU && t->iteration == it && t->meas_start_ns >= 0 &&
                    t->meas_start_ns >= first_ready_meas && !(t->flags & RV_TF_REMOVED))
                    busy += (double)t->dur_ns * 1e-9;
            }
            double cover = busy > 0 ? iter_comm / busy : 0;
            double f = 1.0 + d->interference * (cover < 1 ? cover : 1);
            for (size_t i = 0; i < g->ntasks; i++) {
                rv_task *t = &g->tasks[i];
                if (t->kind == RV_TASK_GPU && t->iteration == it && t->meas_start_ns >= 0 &&
                    t->meas_start_ns >= first_ready_meas && !(t->flags & RV_TF_REMOVED))
                    t->dur_ns = (int64_t)llround((double)t->dur_ns * f);
            }
        }
        /* With a parameter server the update runs on the servers. */
        if (ps) {
            for (size_t i = 0; i < g->ntasks; i++) {
                rv_task *t = &g->tasks[i];
                if (t->iteration != it || t->phase != RV_PHASE_OPTIMIZER ||
                    (t->flags & RV_TF_REMOVED) || t->kind != RV_TASK_GPU)
                    continue;
                const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
                if (strstr(layer, "zero_grad"))
                    continue;
                int32_t l = t->launch;
                rv_graph_remove_task(g, (int32_t)i);
                if (l >= 0)
                    rv_models__remove(g, l, 0);
                nremoved++;
            }
        }
        comm_s += iter_comm;
        (void)iter_bytes;
        k = e;
    }
    {
        static const char *const an[] = {"ring", "tree", "hierarchical", "parameter_server"};
        size_t iters = g->niters ? g->niters : 1;
        json_t *r = json_pack(
            "{s:s, s:s, s:i, s:i, s:i, s:s, s:f, s:f, s:f, s:i, s:i, s:i, s:f, s:i, s:b, s:b}",
            "model", "distributed", "mode", "insert_collectives", "workers", d->workers,
            "gpus_per_node", net.g, "nodes", rv_net_nodes(&net), "algorithm", an[d->algorithm],
            "gradient_mb", total_bytes / MIB, "intra_gbps", net.intra_bps * 8 / 1e9, "inter_gbps",
            net.inter_bps * 8 / 1e9, "gradients", (json_int_t)ngr, "buckets", (json_int_t)nbuckets,
            "comm_tasks_inserted", (json_int_t)ncomm, "comm_us_per_iteration",
            comm_s * 1e6 / (double)iters, "compute_tasks_inserted", (json_int_t)nextra, "p3", d->p3,
            "blueconnect", d->blueconnect);
        if (r && d->dgc_density > 0)
            json_object_set_new(r, "dgc_density", json_real(d->dgc_density));
        if (r)
            json_object_set_new(r, "allreduce_model",
                                json_string(d->allreduce.n > 0 ? "measured_table" : "alpha_beta"));
        if (r && nremoved)
            json_object_set_new(r, "optimizer_tasks_removed", json_integer((json_int_t)nremoved));
        if (!r || json_array_append_new(applied, r)) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
    }
    goto out;
nomem:
    rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "distributed: out of memory");
out:
    free(gr);
    free(next);
    free(side);
    free(fwd);
    return rc;
}
