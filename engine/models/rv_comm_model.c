#include "models/rv_comm_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/rv_models.h"
#include "whatif/rv_whatif.h"

#define MIB (1024.0 * 1024.0)

/* The baseline network of a traced job when nothing names it
 * (docs/models/distributed.md, "Constants"). */
#define COMM_GPUS_PER_NODE 8     /* an 8-GPU node (DGX, HGX) */
#define COMM_INTER_GBITS   100.0 /* one 100 Gb/s NIC between nodes */
#define COMM_ALPHA_S       5e-6  /* NCCL's per-step latency, small messages */
#define COMM_EFFICIENCY    0.8   /* share of a link's bandwidth a ring achieves */

/* ---- sizes --------------------------------------------------------------- */

static int cmp_note(const void *a, const void *b, void *ctx)
{
    const rv_trace *t = ctx;
    int64_t x = t->events[*(const int32_t *)a].ts_ns, y = t->events[*(const int32_t *)b].ts_ns;
    return (x > y) - (x < y);
}

int rv_comm_sizes_index(const rv_trace *t, rv_comm_sizes *ix)
{
    memset(ix, 0, sizeof(*ix));
    ix->t = t;
    if (!t)
        return 0;
    ix->ev = malloc((t->nevents + 1) * sizeof(int32_t));
    if (!ix->ev)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat == RV_CAT_USER_ANNOTATION && e->bytes > 0 &&
            !strncmp(rv_trace_str(t, e->name), "nccl:", 5))
            ix->ev[ix->n++] = (int32_t)i;
    }
    qsort_r(ix->ev, ix->n, sizeof(int32_t), cmp_note, (void *)t);
    return 0;
}

void rv_comm_sizes_free(rv_comm_sizes *ix)
{
    if (!ix)
        return;
    free(ix->ev);
    ix->ev = NULL;
    ix->n = 0;
}

double rv_comm_task_bytes(const rv_graph *g, const rv_comm_sizes *ix, int32_t task)
{
    const rv_task *k = &g->tasks[task];
    if (k->bytes > 0)
        return (double)k->bytes;
    if (!ix || !ix->t || ix->n == 0 || k->launch < 0 || g->tasks[k->launch].event < 0)
        return 0;
    const rv_event *call = &ix->t->events[g->tasks[k->launch].event];
    size_t lo = 0, hi = ix->n;
    while (lo < hi) { /* the first note that starts after the call */
        size_t mid = (lo + hi) / 2;
        if (ix->t->events[ix->ev[mid]].ts_ns <= call->ts_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* The innermost annotation on the launching thread that spans the call. */
    for (size_t back = 0; back < 8 && lo > back; back++) {
        const rv_event *a = &ix->t->events[ix->ev[lo - 1 - back]];
        if (a->pid == call->pid && a->tid == call->tid && a->ts_ns + a->dur_ns >= call->ts_ns)
            return (double)a->bytes;
    }
    return 0;
}

/* ---- networks ------------------------------------------------------------ */

void rv_comm_net_base(const rv_hw *hw, int n, rv_net *net)
{
    memset(net, 0, sizeof(*net));
    net->n = n;
    net->g = n < COMM_GPUS_PER_NODE ? n : COMM_GPUS_PER_NODE;
    if (net->g < 1)
        net->g = 1;
    if (hw && hw->nvlink_gbps > 0)
        net->intra_bps = hw->nvlink_gbps / 2 * 1e9; /* bidirectional GB/s -> one way */
    else
        net->intra_bps = (hw ? hw->pcie_gbps : RV_MODELS_PCIE_GBYTES) * 1e9;
    net->inter_bps = COMM_INTER_GBITS * 1e9 / 8;
    net->alpha_s = COMM_ALPHA_S;
    net->efficiency = COMM_EFFICIENCY;
}

void rv_comm_net_of(const rv_dist *d, const rv_hw *hw, int n, rv_net *net)
{
    rv_comm_net_base(hw, n, net);
    if (!d)
        return;
    net->g = d->gpus_per_node < n ? d->gpus_per_node : n;
    if (net->g < 1)
        net->g = 1;
    if (d->intra_gbps > 0)
        net->intra_bps = d->intra_gbps * 1e9 / 8;
    net->inter_bps = d->inter_gbps * 1e9 / 8;
    net->alpha_s = d->latency_us * 1e-6;
    net->efficiency = d->efficiency;
    net->ps_servers = d->ps_servers;
}

void rv_comm_dist_of(const struct rv_whatif *w, int workers, rv_dist *out, int *asked)
{
    *asked = 0;
    if (w && w->has_dist) {
        *out = w->dist;
        *asked = 1;
    } else {
        /* The documented defaults (rv_whatif_spec.c), read from the spec
         * itself so the two cannot drift. */
        char doc[64];
        rv_whatif *dw = NULL;
        rv_error err;
        snprintf(doc, sizeof(doc), "{\"distributed\":{\"workers\":%d}}", workers > 0 ? workers : 1);
        memset(out, 0, sizeof(*out));
        if (rv_whatif_parse_text(doc, &dw, &err) == 0)
            *out = dw->dist;
        rv_whatif_free(dw);
    }
    const rv_job_whatif *jw = w && w->has_job ? &w->job : NULL;
    if (!jw)
        return;
    if (jw->bandwidth_gbps > 0) {
        out->intra_gbps = jw->bandwidth_gbps;
        out->inter_gbps = jw->bandwidth_gbps;
        *asked = 1;
    }
    if (jw->latency_us >= 0) {
        out->latency_us = jw->latency_us;
        *asked = 1;
    }
    if (jw->world_size > 0) {
        out->workers = jw->world_size;
        *asked = 1;
    }
    if (!(w->has_dist && out->gpus_per_node > 0) || out->gpus_per_node > out->workers)
        out->gpus_per_node = out->workers < 8 ? out->workers : 8;
}

/* ---- the cost function ---------------------------------------------------- */

static double one_piece(const rv_dist *d, const rv_net *net, int op, double bytes)
{
    if (!d)
        return rv_coll_nccl_time(net, op, RV_ALGO_RING, bytes);
    if (op == RV_COLL_ALLREDUCE) {
        if (d->allreduce.n > 0)
            return rv_coll_table_time(&d->allreduce, bytes); /* measured */
        if (d->dgc_density > 0)
            return rv_coll_dgc(net, bytes, d->dgc_density);
        if (d->blueconnect)
            return rv_coll_blueconnect(net, bytes, NULL, NULL);
    }
    return rv_coll_nccl_time(net, op, d->algorithm, bytes);
}

double rv_comm_time(const rv_dist *d, const rv_net *net, int op, double bytes)
{
    if (bytes < 1)
        bytes = 1;
    double part = d && d->tensor_partition_mb > 0 ? d->tensor_partition_mb * MIB : bytes;
    double pieces = ceil(bytes / part);
    if (pieces <= 1)
        return one_piece(d, net, op, bytes);
    return pieces * one_piece(d, net, op, bytes / pieces);
}

void rv_comm_warn_traced(json_t *entry, const rv_dist *d, const rv_net *net, double largest,
                         size_t nallreduce)
{
    if (d->bucket_mb != 25 || d->first_bucket_mb != 1)
        rv_models__warn(entry, "no_effect",
                        "distributed.bucket_mb/first_bucket_mb: the traced collectives are the "
                        "job's own buckets; re-bucketing needs a one-GPU trace");
    if (d->tensor_fusion_mb > 0)
        rv_models__warn(entry, "no_effect",
                        "distributed.tensor_fusion_mb: the traced collectives are already "
                        "fused as the job ran them; fusion applies to a one-GPU trace");
    if (d->gradient_mb > 0)
        rv_models__warn(entry, "no_effect",
                        "distributed.gradient_mb: traced collectives keep the sizes the trace "
                        "names (or that their transfers imply)");
    if (d->p3)
        rv_models__warn(entry, "no_effect",
                        "distributed.p3: slicing and priorities need a one-GPU trace's "
                        "gradients; traced collectives are costed as parameter-server "
                        "push and pull");
    if (d->tensor_partition_mb > 0 && largest <= d->tensor_partition_mb * MIB)
        rv_models__warn(entry, "no_effect",
                        "distributed.tensor_partition_mb: every traced collective (largest %.3g "
                        "MB) is already at most %.3g MB",
                        largest / 1e6, d->tensor_partition_mb * MIB / 1e6);
    if ((d->blueconnect || d->dgc_density > 0) && nallreduce == 0)
        rv_models__warn(entry, "no_effect",
                        "distributed.%s: the trace has no all-reduce to replace",
                        d->blueconnect ? "blueconnect" : "dgc_density");
    else if (d->blueconnect && rv_net_nodes(net) <= 1)
        rv_models__warn(entry, "no_effect",
                        "distributed.blueconnect: %d ranks on one node: its one level is the "
                        "ring NCCL already runs",
                        net->n);
    if (d->dgc_density > 0 && d->allreduce.n > 0)
        rv_models__warn(entry, "no_effect",
                        "distributed.dgc_density: allreduce_table times the all-reduces as "
                        "measured; the table wins");
}

double rv_comm_bytes_for_time(const rv_dist *d, const rv_net *net, int op, double seconds)
{
    if (net->n <= 1 || !(seconds > 0) || rv_comm_time(d, net, op, 1.0) >= seconds)
        return 0;
    /* rv_comm_time is non-decreasing in bytes: bracket, then halve the
     * bracket down to a byte. 1 PB bounds any message. */
    double lo = 1.0, hi = 1048576.0;
    while (hi < 1e15 && rv_comm_time(d, net, op, hi) < seconds) {
        lo = hi;
        hi *= 2;
    }
    for (int k = 0; k < 200 && hi - lo > 1.0; k++) {
        double mid = 0.5 * (lo + hi);
        if (rv_comm_time(d, net, op, mid) < seconds)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}
