#include "trace/rv_coll.h"

#include <math.h>
#include <string.h>

int rv_net_nodes(const rv_net *net)
{
    int g = net->g > 0 ? net->g : 1;
    return (net->n + g - 1) / g;
}

double rv_coll_busbw_factor(int op, int n)
{
    if (n <= 1)
        return 0;
    switch (op) {
    case RV_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case RV_COLL_REDUCE_SCATTER:
    case RV_COLL_ALLGATHER:
    case RV_COLL_ALLTOALL: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

static double eff(const rv_net *net)
{
    return net->efficiency > 0 && net->efficiency <= 1 ? net->efficiency : 1.0;
}

double rv_coll_ring_bw(const rv_net *net)
{
    double b = net->intra_bps;
    if (rv_net_nodes(net) > 1 && net->inter_bps < b)
        b = net->inter_bps;
    return b * eff(net);
}

/* Ring steps: allreduce 2(n-1), RS/AG/all-to-all n-1, broadcast n-1. */
static double ring_steps(int op, int n)
{
    return op == RV_COLL_ALLREDUCE ? 2.0 * (n - 1) : (double)(n - 1);
}

static double hierarchical(const rv_net *net, double bytes)
{
    int g = net->g < net->n ? net->g : net->n;
    int m = rv_net_nodes(net);
    double e = eff(net);
    double t = 0;
    if (g > 1)
        t += 2.0 * (g - 1) * net->alpha_s + 2.0 * (g - 1) / g * bytes / (net->intra_bps * e);
    if (m > 1)
        t += 2.0 * (m - 1) * net->alpha_s + 2.0 * (m - 1) / m * bytes / (net->inter_bps * e);
    return t;
}

double rv_coll_time(const rv_net *net, int op, int algo, double bytes)
{
    int n = net->n;
    if (n <= 1 || bytes <= 0)
        return 0;
    if (op == RV_COLL_ALLREDUCE) {
        switch (algo) {
        case RV_ALGO_TREE: {
            /* NCCL double binary tree: log-depth latency, and about the
             * ring's bandwidth term at large sizes (each tree carries half
             * the data, up and down). */
            double depth = ceil(log2((double)n));
            return 2.0 * depth * net->alpha_s + bytes / rv_coll_ring_bw(net);
        }
        case RV_ALGO_HIERARCHICAL: return hierarchical(net, bytes);
        case RV_ALGO_PS: return rv_coll_ps(net, bytes);
        default: break;
        }
    }
    return ring_steps(op, n) * net->alpha_s +
           rv_coll_busbw_factor(op, n) * bytes / rv_coll_ring_bw(net);
}

double rv_coll_nccl_time(const rv_net *net, int op, int algo, double bytes)
{
    /* {LL, LL128, Simple} */
    static const double proto_bw[3] = {0.5, 0.92, 1.0};
    static const double base_ring[3] = {6.6, 14, 8.4}, base_tree[3] = {6.8, 14, 8.4};
    static const double nvlink[3] = {0.6, 1.9, 3.4}, pcie[3] = {1.0, 2.5, 5.7};
    static const double net_ring[3] = {2.7, 4.0, 14}, net_tree[3] = {5, 8.5, 14};
    int n = net->n;
    if (n <= 1 || bytes <= 0)
        return 0;
    int tree = algo == RV_ALGO_TREE && op == RV_COLL_ALLREDUCE;
    if (algo != RV_ALGO_RING && !tree)
        return rv_coll_time(net, op, algo, bytes);
    int m = rv_net_nodes(net);
    double scale = net->alpha_s > 0 ? net->alpha_s / 5e-6 : 0;
    const double *intra = net->intra_bps < 30e9 ? pcie : nvlink;
    double busbw = rv_coll_ring_bw(net), best = -1;
    for (int p = 0; p < 3; p++) {
        double lat, bw;
        if (tree) {
            int per = (n + m - 1) / m;
            lat =
                base_tree[p] + 2.0 * ((per - 1) * intra[p] + log2((double)m) * net_tree[p]) * scale;
            bw = bytes / (0.5 * 0.92 * busbw * proto_bw[p]);
        } else {
            double steps = ring_steps(op, n), inter = m > 1 ? ring_steps(op, m) : 0;
            lat = base_ring[p] + ((steps - inter) * intra[p] + inter * net_ring[p]) * scale;
            bw = rv_coll_busbw_factor(op, n) * bytes / (busbw * proto_bw[p]);
        }
        double t = lat * 1e-6 + bw;
        if (best < 0 || t < best)
            best = t;
    }
    return best;
}

double rv_coll_bytes_for_time(const rv_net *net, int op, int algo, double seconds)
{
    if (net->n <= 1 || !(seconds > 0) || rv_coll_time(net, op, algo, 1.0) >= seconds)
        return 0;
    /* rv_coll_time is non-decreasing in bytes for every algorithm: bracket,
     * then halve the bracket down to a byte. 1 PB bounds any message. */
    double lo = 1.0, hi = 1048576.0;
    while (hi < 1e15 && rv_coll_time(net, op, algo, hi) < seconds) {
        lo = hi;
        hi *= 2;
    }
    for (int k = 0; k < 200 && hi - lo > 1.0; k++) {
        double mid = 0.5 * (lo + hi);
        if (rv_coll_time(net, op, algo, mid) < seconds)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

double rv_coll_blueconnect(const rv_net *net, double bytes, double *intra, double *inter)
{
    int g = net->g < net->n ? net->g : net->n;
    int m = rv_net_nodes(net);
    double e = eff(net);
    double ti = 0, tx = 0;
    /* Level 1 (inside a node): reduce-scatter + all-gather of S over g. */
    if (g > 1)
        ti = 2.0 * ((g - 1) * net->alpha_s + (double)(g - 1) / g * bytes / (net->intra_bps * e));
    /* Level 2 (across nodes): the g concurrent rings each move S/g and
     * share the node's NIC, so together they move S over it. */
    if (m > 1)
        tx = 2.0 * ((m - 1) * net->alpha_s + (double)(m - 1) / m * bytes / (net->inter_bps * e));
    if (intra)
        *intra = ti;
    if (inter)
        *inter = tx;
    return ti + tx;
}

double rv_coll_dgc(const rv_net *net, double bytes, double density)
{
    int n = net->n;
    if (n <= 1 || bytes <= 0)
        return 0;
    double send = 8.0 * density * (bytes / 4.0); /* fp32 value + int32 index */
    return (n - 1) * net->alpha_s + (n - 1) * send / rv_coll_ring_bw(net);
}

double rv_coll_ps(const rv_net *net, double bytes)
{
    int n = net->n;
    if (n <= 1 || bytes <= 0)
        return 0;
    double b = (rv_net_nodes(net) > 1 ? net->inter_bps : net->intra_bps) * eff(net);
    double part = net->ps_part_bytes > 0 ? net->ps_part_bytes : 4096000.0;
    double parts = ceil(bytes / part);
    double push;
    if (net->ps_servers <= 0 || net->ps_servers >= n) {
        /* Colocated: 1/n of the data stays local. */
        push = (double)(n - 1) / n * bytes / b;
    } else {
        double k = net->ps_servers;
        double tw = bytes / b, ts = n * bytes / (k * b);
        push = tw > ts ? tw : ts;
    }
    /* Push then pull of the same amount; latency per partition. */
    return 2.0 * (push + parts * net->alpha_s);
}

double rv_coll_table_time(const rv_coll_table *t, double bytes)
{
    if (t->n <= 0 || bytes <= 0)
        return 0;
    if (t->n == 1)
        return t->seconds[0] * bytes / t->bytes[0];
    int k = 1;
    while (k < t->n - 1 && t->bytes[k] < bytes)
        k++;
    /* Segment [k-1, k] in log-log. */
    double x0 = log(t->bytes[k - 1]), x1 = log(t->bytes[k]);
    double y0 = log(t->seconds[k - 1]), y1 = log(t->seconds[k]);
    double slope = (y1 - y0) / (x1 - x0);
    return exp(y0 + slope * (log(bytes) - x0));
}
