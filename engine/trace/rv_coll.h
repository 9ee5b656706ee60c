/* Collective-communication cost models (../shared/MODELS.md section B).
 *
 * Bandwidths are in bytes per second per direction, latencies in seconds,
 * sizes in bytes; results are seconds. Pure functions. */
#ifndef RV_COLL_H
#define RV_COLL_H

typedef enum rv_coll_op {
    RV_COLL_ALLREDUCE = 0,
    RV_COLL_REDUCE_SCATTER,
    RV_COLL_ALLGATHER,
    RV_COLL_BROADCAST,
    RV_COLL_ALLTOALL,
} rv_coll_op;

typedef enum rv_coll_algo {
    RV_ALGO_RING = 0,
    RV_ALGO_TREE,
    RV_ALGO_HIERARCHICAL,
    RV_ALGO_PS,
} rv_coll_algo;

typedef struct rv_net {
    int n;                /* ranks */
    int g;                /* GPUs per node (ranks per node) */
    double intra_bps;     /* per-GPU intra-node bandwidth, bytes/s one direction */
    double inter_bps;     /* per-node network bandwidth, bytes/s one direction */
    double alpha_s;       /* per-step latency */
    double efficiency;    /* achieved share of link bandwidth (0, 1] */
    int ps_servers;       /* parameter servers; 0 = colocated (one per worker) */
    double ps_part_bytes; /* PS partition size (BytePS 4,096,000) */
} rv_net;

/* Nodes: ceil(n / g). */
int rv_net_nodes(const rv_net *net);

/* NCCL bus-bandwidth factor F (busbw = algbw * F) for op over n ranks. */
double rv_coll_busbw_factor(int op, int n);

/* Bottleneck bandwidth a flat ring sees: intra-node on one node, else the
 * lower of intra and the node's NIC. Scaled by efficiency. */
double rv_coll_ring_bw(const rv_net *net);

/* Time of one collective of `bytes` (full array). algo applies to
 * allreduce; other ops use the ring. n <= 1 gives 0. */
double rv_coll_time(const rv_net *net, int op, int algo, double bytes);

/* NCCL's own tuning model (nccl src/graph/tuning.cc; MODELS.md B3): the
 * fastest protocol (LL, LL128, Simple) of the algorithm, each
 * `lat + S * F / (busbw * proto)`: base latency per protocol plus a
 * per-step latency inside a node (NVLink, else PCIe when intra_bps is
 * under 30 GB/s) and across nodes (NCCL's network table), the per-step
 * ones scaled by alpha_s / 5 us so that latency_us still moves them; busbw is
 * rv_coll_ring_bw. Ring: 2(n-1) steps for an all-reduce, n-1 for the
 * others. Tree (all-reduce only): log-depth latency and half of 92% of
 * busbw, so never cheaper than the ring for large messages. Other algo
 * values fall back to rv_coll_time. n <= 1 gives 0. Seconds. */
double rv_coll_nccl_time(const rv_net *net, int op, int algo, double bytes);

/* The message size whose modelled time (rv_coll_time with the same net, op
 * and algo) is `seconds`: the inverse of rv_coll_time, found by bisection
 * so that every algorithm inverts the same way. 0 when seconds is at or
 * below the latency alone (the time of a 1-byte message) or n <= 1. Bytes. */
double rv_coll_bytes_for_time(const rv_net *net, int op, int algo, double seconds);

/* BlueConnect: reduce-scatter then all-gather per hierarchy level (2 levels:
 * g inside a node, m across nodes); each level's part, seconds. *intra and
 * *inter receive the intra-node (RS + AG) and inter-node (allreduce of S/g)
 * shares so callers can put them on separate channels. */
double rv_coll_blueconnect(const rv_net *net, double bytes, double *intra, double *inter);

/* DGC: sparse all-gather of 8 * density * P bytes per rank, P = bytes / 4. */
double rv_coll_dgc(const rv_net *net, double bytes, double density);

/* A measured size -> time table (nccl-tests on the target cluster, or the
 * ground-truth sweep): points sorted by bytes, interpolated piecewise
 * linearly in log-log as dPRO does; past either end the nearest segment's
 * slope continues (one point: time proportional to size). Seconds. */
#define RV_COLL_TABLE_MAX 256
typedef struct rv_coll_table {
    int n;
    double bytes[RV_COLL_TABLE_MAX];
    double seconds[RV_COLL_TABLE_MAX];
} rv_coll_table;
double rv_coll_table_time(const rv_coll_table *t, double bytes);

/* Parameter server push + pull of `bytes` (MODELS.md B8). */
double rv_coll_ps(const rv_net *net, double bytes);

#endif
