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

#include "models/rv_comm_model.h"
#include "models/rv_models.h"
#include "whatif/rv_whatif.h"

#define MIB (1024.0 * 1024.0)
/* HBM passes over a bucket of S bytes on the compute stream: DDP's copy
 * into the bucket and division by n (2.5 S), DGC's compression (5 S), and
 * tensor fusion's pack and unpack (2 S). */
#define DIST_DDP_PASSES    2.5
#define DIST_DGC_PASSES    5.0
#define DIST_FUSION_PASSES 2.0
/* Cap on inserted communication tasks per apply (P3 slices can be many). */
#define RV_DIST_MAX_COMM 2000000

typedef rv_comm_grad grad;

static void net_of(const rv_whatif *w, const rv_hw *hw, int n, rv_net *net)
{
    rv_comm_net_of(&w->dist, hw, n, net);
}

static int coll_op_of(const char *name, int *named)
{
    return rv_kname_coll_op(name, named);
}

static const char *coll_op_name(int op)
{
    static const char *const names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                        "all_to_all"};
    return op >= 0 && op <= RV_COLL_ALLTOALL ? names[op] : "collective";
}

static int32_t opt_anchor(const rv_graph *g, int32_t it, int64_t after_ns);

/* Collectives without a message size in the trace, grouped by kind,
 * kernel name, stream (each NCCL communicator, so each process group, has
 * its own) and launch geometry: NCCL gives a small message fewer channels
 * (the grid) and threads (the block) than a large one (nccl src/enqueue.cc,
 * getAlgoInfo), so one geometry is one size class. */
typedef struct coll_group {
    int op;
    uint32_t name;
    int32_t thread;
    int32_t grid, block;
    size_t count;
    int repeated;     /* more than one instance: fastest_s is the group's own */
    double fastest_s; /* taken as all transfer */
    double bytes;     /* what the baseline network moves in fastest_s */
} coll_group;

typedef struct coll_key {
    int32_t task;
    int op;
    int32_t grid, block;
} coll_key;

static int cmp_coll_key(const void *a, const void *b, void *ctx)
{
    const rv_graph *g = ctx;
    const coll_key *x = a, *y = b;
    const rv_task *p = &g->tasks[x->task], *q = &g->tasks[y->task];
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    if (p->name != q->name)
        return p->name < q->name ? -1 : 1;
    if (p->thread != q->thread)
        return p->thread < q->thread ? -1 : 1;
    if (x->grid != y->grid)
        return x->grid < y->grid ? -1 : 1;
    if (x->block != y->block)
        return x->block < y->block ? -1 : 1;
    return (x->task > y->task) - (x->task < y->task);
}

static void key_of(const rv_graph *g, int32_t task, int op, coll_key *k)
{
    const rv_task *t = &g->tasks[task];
    const rv_event *e = t->event >= 0 && g->trace ? &g->trace->events[t->event] : NULL;
    k->task = task;
    k->op = op;
    k->grid = e ? e->grid[0] * (e->grid[1] > 0 ? e->grid[1] : 1) : 0;
    k->block = e ? e->block[0] : 0;
}

/* Groups the sizeless collectives (keys, nkeys; sorted here) and infers one
 * message size per group under the baseline network b:
 * - a geometry seen more than once is the same call repeated (each step
 *   makes it again): its fastest instance is its transfer;
 * - one seen once has no repeat to compare with: it takes the fastest
 *   instance of the same kernel on the same stream, never its own time,
 *   which may be mostly waiting.
 * group_of[task] receives the group's index (-1 elsewhere). Returns the
 * number of groups written to out (at most nkeys). */
static size_t infer_groups(const rv_graph *g, const rv_net *b, coll_key *keys, size_t nkeys,
                           coll_group *out, int32_t *group_of)
{
    size_t ng = 0;
    qsort_r(keys, nkeys, sizeof(*keys), cmp_coll_key, (void *)g);
    for (size_t k = 0; k < nkeys; k++) {
        const rv_task *t = &g->tasks[keys[k].task];
        coll_group *c = ng ? &out[ng - 1] : NULL;
        if (!c || c->op != keys[k].op || c->name != t->name || c->thread != t->thread ||
            c->grid != keys[k].grid || c->block != keys[k].block) {
            c = &out[ng++];
            c->op = keys[k].op;
            c->name = t->name;
            c->thread = t->thread;
            c->grid = keys[k].grid;
            c->block = keys[k].block;
            c->count = 0;
            c->fastest_s = -1;
        }
        double d = (double)t->dur_ns * 1e-9;
        /* A zero-length record moved nothing; it says nothing either. */
        if (d > 0 && (c->fastest_s < 0 || d < c->fastest_s))
            c->fastest_s = d;
        c->count++;
        group_of[keys[k].task] = (int32_t)(ng - 1);
    }
    /* Groups of one kernel on one stream are contiguous: their fastest. */
    for (size_t k0 = 0, k1; k0 < ng; k0 = k1) {
        double fastest = -1;
        for (k1 = k0; k1 < ng && out[k1].op == out[k0].op && out[k1].name == out[k0].name &&
                      out[k1].thread == out[k0].thread;
             k1++)
            if (out[k1].fastest_s >= 0 && (fastest < 0 || out[k1].fastest_s < fastest))
                fastest = out[k1].fastest_s;
        for (size_t k = k0; k < k1; k++) {
            out[k].repeated = out[k].count > 1;
            if (!out[k].repeated || out[k].fastest_s < 0)
                out[k].fastest_s = fastest > 0 ? fastest : 0;
            out[k].bytes = rv_comm_bytes_for_time(NULL, b, out[k].op, out[k].fastest_s);
        }
    }
    return ng;
}

/* Multi-rank trace: each collective kernel's time is a transfer plus the
 * wait for the other ranks. Only the transfer is re-timed under the
 * requested network; the wait stays as measured.
 * - The trace names the message ("In msg nelems" and "dtype", newer
 *   Kineto): the transfer is what the baseline network needs for it.
 * - It does not: the transfer is the fastest instance of the collective's
 *   group (infer_groups: same kind, kernel name, stream and launch
 *   geometry); the rest of a slower instance is waiting. The group's size
 *   is what the baseline network moves in that time; the answer warns
 *   (message_sizes_inferred) and lists the groups (inferred_sizes).
 * Sizes, the baseline network and the cost function are the one
 * communication model's (rv_comm_model.h), as in a multi-rank job. */
static int rescale_nccl(const rv_whatif *w, const rv_hw *hw, rv_graph *g, json_t *applied)
{
    int n0 = g->trace && g->trace->world_size > 1 ? g->trace->world_size : 2;
    rv_net b, x;
    rv_comm_net_base(hw, n0, &b);
    net_of(w, hw, w->dist.workers, &x);
    rv_comm_sizes ix = {0};
    size_t n = 0, linked = 0, known = 0, inferred = 0, ng = 0, nkeys = 0;
    size_t by_kind[RV_COLL_ALLTOALL + 1] = {0};
    double before = 0, after = 0;
    int rc = RV_ERR_NOMEM;
    /* Collectives whose completion nothing in the graph waits for (traces
     * without cudaStreamWaitEvent records) would float free of the step:
     * as in DDP, the optimizer's first kernel waits for them. */
    uint8_t *waited = calloc(g->ntasks + 1, 1);
    int32_t *group_of = malloc((g->ntasks + 1) * sizeof(*group_of));
    coll_key *keys = malloc((g->ntasks + 1) * sizeof(*keys));
    coll_group *groups = NULL;
    json_t *r = NULL;
    double *bytes_of = malloc((g->ntasks + 1) * sizeof(*bytes_of));
    size_t nallreduce = 0;
    double largest = 0;
    if (!waited || !group_of || !keys || !bytes_of || rv_comm_sizes_index(g->trace, &ix) != 0)
        goto out;
    for (size_t e = 0; e < g->nedges; e++) {
        const rv_edge *ed = &g->edges[e];
        if (g->tasks[ed->src].thread != g->tasks[ed->dst].thread)
            waited[ed->src] = 1;
    }
    /* Edges added below never add tasks: both passes cover the same ones. */
    const size_t ntasks = g->ntasks;
    for (size_t i = 0; i < ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        int named;
        group_of[i] = -1;
        bytes_of[i] = 0;
        if (!(t->flags & RV_TF_NCCL) || (t->flags & RV_TF_REMOVED))
            continue;
        int op = coll_op_of(rv_task_name(g, i), &named);
        nallreduce += op == RV_COLL_ALLREDUCE;
        /* The kernel's own size, else its launch's annotation. */
        bytes_of[i] = rv_comm_task_bytes(g, &ix, (int32_t)i);
        if (bytes_of[i] > largest)
            largest = bytes_of[i];
        if (bytes_of[i] <= 0)
            key_of(g, (int32_t)i, op, &keys[nkeys++]);
    }
    if (nkeys) {
        groups = malloc(nkeys * sizeof(*groups));
        if (!groups)
            goto out;
        ng = infer_groups(g, &b, keys, nkeys, groups, group_of);
    }
    for (size_t i = 0; i < ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (!(t->flags & RV_TF_NCCL) || (t->flags & RV_TF_REMOVED))
            continue;
        int named;
        int op = coll_op_of(rv_task_name(g, i), &named);
        if (named && !waited[i] && t->iteration >= 0 && op == RV_COLL_ALLREDUCE) {
            int32_t a = opt_anchor(g, t->iteration, t->meas_start_ns);
            if (a >= 0 && g->tasks[a].meas_start_ns > t->meas_start_ns) {
                if (rv_graph_add_edge(g, (int32_t)i, a, 0, RV_EDGE_COMM, 0))
                    goto out;
                linked++;
            }
        }
        double tb = (double)t->dur_ns * 1e-9, s, moved;
        if (bytes_of[i] > 0) {
            /* What the baseline network needs for the named message. */
            s = bytes_of[i];
            moved = rv_comm_time(NULL, &b, op, s);
            known++;
        } else {
            if (!groups || group_of[i] < 0)
                continue; /* unreachable: every sizeless collective has a group */
            const coll_group *c = &groups[group_of[i]];
            s = c->bytes;
            moved = c->fastest_s;
            inferred++;
            by_kind[op]++;
            if (s > largest)
                largest = s;
        }
        if (moved > tb)
            moved = tb;
        /* The wait (tb - moved) stays; the transfer scales by the ratio of
         * the two networks' times for the message. */
        double t0 = rv_comm_time(NULL, &b, op, s), t1 = rv_comm_time(&w->dist, &x, op, s);
        double tn = x.n <= 1 ? 0 : (tb - moved) + (t0 > 0 ? moved * t1 / t0 : 0);
        before += tb;
        after += tn;
        t->dur_ns = (int64_t)llround(tn * 1e9);
        n++;
    }
    r = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:f}", "model", "distributed", "mode",
                  "rescale_collectives", "baseline_workers", n0, "workers", w->dist.workers,
                  "collectives_rescaled", (json_int_t)n, "waits_added", (json_int_t)linked,
                  "comm_us_before", before * 1e6, "comm_us_after", after * 1e6);
    if (!r)
        goto out;
    json_object_set_new(r, "allreduce_model",
                        json_string(w->dist.allreduce.n > 0 ? "measured_table" : "nccl"));
    rv_comm_warn_traced(r, &w->dist, &x, largest, nallreduce);
    json_object_set_new(r, "sizes_from_trace", json_integer((json_int_t)known));
    json_object_set_new(r, "sizes_inferred", json_integer((json_int_t)inferred));
    if (inferred) {
        /* The inferred sizes, one per group (the answer names at most 16). */
        json_t *arr = json_array();
        for (size_t k = 0; arr && k < ng && k < 16; k++) {
            const coll_group *c = &groups[k];
            json_array_append_new(
                arr,
                json_pack("{s:s, s:s, s:i, s:i, s:i, s:b, s:f, s:f}", "kind", coll_op_name(c->op),
                          "name", rv_trace_str(g->trace, c->name), "grid", c->grid, "block",
                          c->block, "instances", (json_int_t)c->count, "repeated", c->repeated,
                          "fastest_us", c->fastest_s * 1e6, "bytes", c->bytes));
        }
        json_object_set_new(r, "inferred_sizes", arr ? arr : json_null());
        char kinds[160] = "";
        size_t len = 0;
        for (int op = 0; op <= RV_COLL_ALLTOALL; op++) {
            if (!by_kind[op] || len >= sizeof(kinds))
                continue;
            int m = snprintf(kinds + len, sizeof(kinds) - len, "%s%zu %s", len ? ", " : "",
                             by_kind[op], coll_op_name(op));
            len += m > 0 ? (size_t)m : 0;
        }
        rv_models__warn(r, "message_sizes_inferred",
                        "%zu of %zu collectives (%s) carry no message size: inferred from "
                        "each group's fastest instance at the baseline network; too large if it "
                        "also waited for other ranks, too small if the job's network was faster",
                        inferred, n, kinds);
    }
    if (json_array_append_new(applied, r) == 0)
        rc = 0;
    r = NULL;
out:
    json_decref(r);
    rv_comm_sizes_free(&ix);
    free(bytes_of);
    free(waited);
    free(group_of);
    free(keys);
    free(groups);
    return rc;
}

/* Measured order: the inserted copy kernels share one side stream, so
 * they must queue in time order (gradients outside every step, after the
 * last one, sorted first would wait for the whole trace: a cycle). */
static int cmp_grad(const void *a, const void *b, void *ctx)
{
    const rv_graph *g = ctx;
    const grad *x = a, *y = b;
    const rv_task *p = &g->tasks[x->task], *q = &g->tasks[y->task];
    if (p->meas_start_ns != q->meas_start_ns)
        return p->meas_start_ns < q->meas_start_ns ? -1 : 1;
    return (x->task > y->task) - (x->task < y->task);
}

/* The task the update of iteration `it` must wait for: the first GPU
 * kernel of Optimizer.step (DDP's finalize makes the compute stream wait
 * for the collectives; the CPU does not block), else the first GPU task of
 * the next step. */
static int32_t opt_anchor(const rv_graph *g, int32_t it, int64_t after_ns)
{
    /* Only a kernel measured after the last gradient: a step window that
     * also holds the previous step's update (the annotation placed after
     * it) must not make the update wait for a later gradient, a cycle. */
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || t->iteration != it || t->phase != RV_PHASE_OPTIMIZER ||
            t->meas_start_ns <= after_ns)
            continue;
        const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (strstr(layer, "zero_grad"))
            continue;
        return (int32_t)i;
    }
    for (size_t i = 0; i < g->ntasks; i++)
        if (g->tasks[i].kind == RV_TASK_GPU && g->tasks[i].iteration == it + 1 &&
            g->tasks[i].meas_start_ns > after_ns)
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
    rv_task t = rv_models__comm_task(secs, bytes, it, RV_PHASE_BACKWARD);
    t.priority = prio;
    return rv_graph_append_task(g, th, &t);
}

/* The communication threads of one iteration: one, or BlueConnect's three
 * (intra reduce-scatter, inter all-reduce, intra all-gather). 0 or
 * RV_ERR_NOMEM. */
static int comm_threads(rv_graph *g, int32_t task, int blueconnect, int32_t th[3])
{
    th[0] = comm_thread(g, task, "comm");
    th[1] = th[2] = -1;
    if (th[0] >= 0 && blueconnect) {
        th[1] = comm_thread(g, task, "inter");
        th[2] = comm_thread(g, task, "allgather");
    }
    return th[0] < 0 || (blueconnect && (th[1] < 0 || th[2] < 0)) ? RV_ERR_NOMEM : 0;
}

/* The tasks of one piece of s bytes: BlueConnect's three stages chained
 * on their threads, else one all-reduce priced by the one cost function
 * (tensor fusion adds its pack and unpack). *first gets the first task,
 * *secs the piece's time; returns the last task, or a negative rv_err. */
static int64_t piece_tasks(rv_graph *g, const rv_dist *d, const rv_net *net, const int32_t th[3],
                           double s, int32_t it, int32_t prio, double bw_hbm, int64_t *first,
                           double *secs)
{
    if (d->blueconnect) {
        double ti = 0, tx = 0;
        rv_coll_blueconnect(net, s, &ti, &tx);
        int64_t id = append_comm(g, th[0], ti / 2, s, it, 0);
        int64_t id2 = id >= 0 ? append_comm(g, th[1], tx, s, it, 0) : id;
        int64_t last = id2 >= 0 ? append_comm(g, th[2], ti / 2, s, it, 0) : id2;
        if (last >= 0 && (rv_graph_add_edge(g, (int32_t)id, (int32_t)id2, 0, RV_EDGE_COMM, 0) ||
                          rv_graph_add_edge(g, (int32_t)id2, (int32_t)last, 0, RV_EDGE_COMM, 0)))
            last = RV_ERR_NOMEM;
        *first = id;
        *secs = ti + tx;
        return last;
    }
    /* The one cost function; the caller already made the pieces. */
    rv_dist one = *d;
    one.tensor_partition_mb = 0;
    *secs = rv_comm_time(&one, net, RV_COLL_ALLREDUCE, s);
    if (d->tensor_fusion_mb > 0)
        *secs += DIST_FUSION_PASSES * s / bw_hbm; /* pack and unpack */
    *first = append_comm(g, th[0], *secs, s, it, prio);
    return *first;
}

/* P3 with a parameter server: the forward kernel (of nf) that the slice
 * `left` of `total` from the end of ready order feeds. */
static size_t slice_layer(size_t left, size_t total, size_t nf)
{
    size_t f = (size_t)((double)left / (double)total * (double)nf);
    return f >= nf ? nf - 1 : f;
}

/* Scales the gradients (sorted by ready time) to the requested model size
 * per iteration; returns the gradient bytes of one iteration. */
static double scale_gradients(const rv_graph *g, const rv_dist *d, grad *gr, size_t ngr)
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
    return d->gradient_mb > 0 ? d->gradient_mb * MIB : per_iter;
}

/* Compute/communication interference (MODELS.md C5): iteration it's
 * kernels from the first gradient on slow down by sigma times the share
 * of that stretch the collectives (comm_s) cover. */
static void interfere(rv_graph *g, int32_t it, int64_t from_meas, double comm_s, double sigma)
{
    double busy = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_GPU && t->iteration == it && t->meas_start_ns >= 0 &&
            t->meas_start_ns >= from_meas && !(t->flags & RV_TF_REMOVED))
            busy += (double)t->dur_ns * 1e-9;
    }
    double cover = busy > 0 ? comm_s / busy : 0;
    double f = 1.0 + sigma * (cover < 1 ? cover : 1);
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_GPU && t->iteration == it && t->meas_start_ns >= 0 &&
            t->meas_start_ns >= from_meas && !(t->flags & RV_TF_REMOVED))
            t->dur_ns = (int64_t)llround((double)t->dur_ns * f);
    }
}

/* A parameter server runs the update: iteration it's optimizer kernels
 * (not zero_grad) and their launches go. Returns the kernels removed. */
static size_t remove_updates(rv_graph *g, int32_t it)
{
    size_t n = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (t->iteration != it || t->phase != RV_PHASE_OPTIMIZER || (t->flags & RV_TF_REMOVED) ||
            t->kind != RV_TASK_GPU)
            continue;
        const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (strstr(layer, "zero_grad"))
            continue;
        int32_t l = t->launch;
        rv_graph_remove_task(g, (int32_t)i);
        if (l >= 0)
            rv_models__remove(g, l, 0);
        n++;
    }
    return n;
}

/* What the insert path did, for its applied entry. */
typedef struct inserted_figs {
    size_t ngr, nbuckets, ncomm, nextra, nremoved;
    double total_bytes, comm_s;
} inserted_figs;

/* The applied entry of collectives inserted into a one-GPU trace (new
 * reference), NULL when out of memory. */
static json_t *inserted_report(const rv_graph *g, const rv_dist *d, const rv_net *net,
                               const rv_comm_grad_info *gi, const inserted_figs *fig)
{
    static const char *const an[] = {"ring", "tree", "hierarchical", "parameter_server"};
    static const char *const rs[] = {"accumulate_grad_kernels", "accumulate_grad_ops",
                                     "backward_kernels"};
    static const char *const bs[] = {"parameter_shapes", "accumulate_grad_kernels",
                                     "optimizer_kernels"};
    size_t iters = g->niters ? g->niters : 1;
    json_t *r = json_pack(
        "{s:s, s:s, s:i, s:i, s:i, s:s, s:f, s:f, s:f, s:i, s:i, s:i, s:f, s:i, s:b, s:b}", "model",
        "distributed", "mode", "insert_collectives", "workers", d->workers, "gpus_per_node", net->g,
        "nodes", rv_net_nodes(net), "algorithm", an[d->algorithm], "gradient_mb",
        fig->total_bytes / MIB, "intra_gbps", net->intra_bps * 8 / 1e9, "inter_gbps",
        net->inter_bps * 8 / 1e9, "gradients", (json_int_t)fig->ngr, "buckets",
        (json_int_t)fig->nbuckets, "comm_tasks_inserted", (json_int_t)fig->ncomm,
        "comm_us_per_iteration", fig->comm_s * 1e6 / (double)iters, "compute_tasks_inserted",
        (json_int_t)fig->nextra, "p3", d->p3, "blueconnect", d->blueconnect);
    if (!r)
        return NULL;
    json_object_set_new(r, "gradient_ready_from", json_string(rs[gi->ready_source]));
    json_object_set_new(r, "gradient_bytes_from",
                        json_string(d->gradient_mb > 0 ? "request" : bs[gi->bytes_source]));
    if (gi->ready_source == RV_GRAD_READY_BACKWARD)
        rv_models__warn(r, "gradient_ready_inferred",
                        "no AccumulateGrad records: %zu gradient-ready points per step "
                        "spaced evenly over the backward kernels",
                        gi->param_ops ? gi->param_ops : (size_t)32);
    if (d->gradient_mb <= 0 && gi->bytes_source != RV_GRAD_BYTES_SHAPES)
        rv_models__warn(r, "gradient_size_estimated",
                        "the trace has no parameter shapes (record_shapes): gradient "
                        "bytes estimated from measured %s times at HBM bandwidth; give "
                        "distributed.gradient_mb if known",
                        bs[gi->bytes_source]);
    if (d->dgc_density > 0)
        json_object_set_new(r, "dgc_density", json_real(d->dgc_density));
    json_object_set_new(r, "allreduce_model",
                        json_string(d->allreduce.n > 0 ? "measured_table" : "nccl"));
    if (fig->nremoved)
        json_object_set_new(r, "optimizer_tasks_removed", json_integer((json_int_t)fig->nremoved));
    return r;
}

/* The gradients of a one-GPU trace in ready order (gr holds ntasks + 1),
 * *ngr of them: 0, or an error with err filled (none to communicate:
 * RV_ERR_UNSUPPORTED naming distributed). */
static int gather_gradients(rv_graph *g, const rv_hw *hw, grad *gr, size_t *ngr,
                            rv_comm_grad_info *gi, rv_error *err)
{
    int rc = rv_comm_grads(g, hw, gr, g->ntasks, ngr, gi);
    if (rc == RV_ERR_NOMEM)
        return rv_error_set(err, rc, -1, -1, "out of memory");
    if (rc != 0 || *ngr == 0)
        return rv_error_field(err, RV_ERR_UNSUPPORTED, "distributed",
                              "no gradients to communicate: the trace has no backward pass "
                              "(AccumulateGrad kernels or ops, or backward kernels) nor "
                              "parameter shapes; give a training trace or a multi-rank one");
    qsort_r(gr, *ngr, sizeof(*gr), cmp_grad, g);
    return 0;
}

/* A one-GPU trace: DDP's buckets of all-reduces (or the variant asked)
 * inserted after the gradients they carry. */
static int insert_collectives(const struct rv_whatif *w, rv_graph *g, json_t *applied,
                              rv_error *err)
{
    const rv_dist *d = &w->dist;
    const rv_hw *hw = rv_models__hw(w, g);
    int rc = 0;
    size_t ngr = 0, ncomm = 0, nbuckets = 0, nextra = 0, nremoved = 0;
    double total_bytes = 0, comm_s = 0;
    rv_net net;
    net_of(w, hw, d->workers, &net);
    grad *gr = malloc((g->ntasks + 1) * sizeof(*gr));
    int32_t *next = rv_models__thread_next(g);
    int32_t *side = malloc((g->nthreads + 1) * sizeof(int32_t));
    int32_t *fwd = malloc((g->ntasks + 1) * sizeof(int32_t));
    rv_comm_grad_info gi;
    if (!gr || !next || !side || !fwd) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t t = 0; t < g->nthreads; t++)
        side[t] = -1;
    if ((rc = gather_gradients(g, hw, gr, &ngr, &gi, err)) != 0)
        goto out;
    total_bytes = scale_gradients(g, d, gr, ngr);
    double bw_hbm = (hw ? hw->hbm_gbps : RV_HW_DEFAULT_HBM_GBPS) * 1e9 * RV_MODELS_HBM_SHARE;
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
        int32_t th[3];
        if (comm_threads(g, gr[k].task, d->blueconnect, th) != 0) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
        int32_t anchor = ps ? -1 : opt_anchor(g, it, g->tasks[gr[e - 1].task].meas_start_ns);
        size_t nf = 0;
        if (ps && it >= 0 && (size_t)it + 1 < g->niters)
            nf = forward_kernels(g, it + 1, fwd, g->ntasks);
        double iter_comm = 0;
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
            double extra_s =
                d->dgc_density > 0 ? DIST_DGC_PASSES * sz / bw_hbm : DIST_DDP_PASSES * sz / bw_hbm;
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
                /* Up to RV_DIST_MAX_COMM pieces: a long loop, so it stops
                 * with the what-if. */
                if (ncomm % RV_STOP_EVERY == 0 && (rc = rv_stop_check(g->stop, err)) != 0)
                    goto out;
                /* P3: forward order is the reverse of ready order, so the
                 * last-ready slice (first layer) gets the top priority. */
                int32_t prio = d->p3 ? (int32_t)(e - b1) : 0;
                last = piece_tasks(g, d, &net, th, s, it, prio, bw_hbm, &id, &secs);
                if (last < 0) {
                    rc = rv_error_set(err, (int)last, -1, -1, "distributed: %s",
                                      rv_err_name((int)last));
                    goto out;
                }
                if ((rc = rv_graph_add_edge(g, ready, (int32_t)id, 0, RV_EDGE_COMM, 0)) != 0)
                    goto nomem;
                if (anchor >= 0 &&
                    (rc = rv_graph_add_edge(g, (int32_t)last, anchor, 0, RV_EDGE_COMM, 0)) != 0)
                    goto nomem;
                /* The next forward waits for this pull: all of it without
                 * P3; with P3 only the layers this slice feeds. */
                if (ps && nf > 0 &&
                    (rc = rv_graph_add_edge(g, (int32_t)last,
                                            fwd[d->p3 ? slice_layer(e - b1, e - k, nf) : 0], 0,
                                            RV_EDGE_COMM, 0)))
                    goto nomem;
                iter_comm += secs;
                ncomm++;
            }
            nbuckets++;
            bucket_idx++;
            b0 = b1;
        }
        if (d->interference > 0)
            interfere(g, it, first_ready_meas, iter_comm, d->interference);
        /* With a parameter server the update runs on the servers. */
        if (ps)
            nremoved += remove_updates(g, it);
        comm_s += iter_comm;
        k = e;
    }
    {
        inserted_figs fig = {ngr, nbuckets, ncomm, nextra, nremoved, total_bytes, comm_s};
        json_t *r = inserted_report(g, d, &net, &gi, &fig);
        if (!r || json_array_append_new(applied, r)) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
    }
    goto out;
nomem:
    /* rc is the graph's: out of memory, or past the what-if's growth
     * limit (RV_ERR_LIMIT, named by rv_apply). */
    rc = rv_error_set(err, rc ? rc : RV_ERR_NOMEM, -1, -1, "distributed: %s",
                      rv_err_name(rc ? rc : RV_ERR_NOMEM));
out:
    free(gr);
    free(next);
    free(side);
    free(fwd);
    return rv_error_ensure(err, rc, "distributed"); /* graph edits return bare codes */
}

int rv_models__distributed(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err)
{
    for (size_t i = 0; i < g->ntasks; i++)
        if (g->tasks[i].flags & RV_TF_NCCL) {
            int rc = rescale_nccl(w, rv_models__hw(w, g), g, applied);
            return rc ? rv_error_set(err, rc, -1, -1, "distributed: out of memory") : 0;
        }
    if (w->dist.workers <= 1) {
        json_t *r = json_pack("{s:s, s:i, s:s}", "model", "distributed", "workers", 1, "note",
                              "one worker: nothing to communicate");
        return r && json_array_append_new(applied, r) == 0 ? 0 : RV_ERR_NOMEM;
    }
    return insert_collectives(w, g, applied, err);
}
