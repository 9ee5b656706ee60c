/* One communication model for every network and worker-count question
 * (docs/models/distributed.md): the message sizes of a trace's collectives
 * and one cost function. The single-trace `distributed` what-if (inserted
 * all-reduces, or traced collectives re-timed) and the multi-rank job
 * (job.bandwidth_gbps, job.world_size: aliases of `distributed`'s fields)
 * both read sizes and times here, so one question gets one answer. */
#ifndef RV_COMM_MODEL_H
#define RV_COMM_MODEL_H

#include <jansson.h>

#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "models/rv_models.h"
#include "trace/rv_coll.h"

/* ---- sizes --------------------------------------------------------------- */

/* The collective annotations of one trace ("nccl:all_reduce" and the like,
 * whose Input Dims x dtype name the message), by start time. */
typedef struct rv_comm_sizes {
    const rv_trace *t; /* borrowed */
    int32_t *ev;       /* owned */
    size_t n;
} rv_comm_sizes;

/* Indexes t's annotations (t may be NULL: an empty index). Returns 0 or
 * RV_ERR_NOMEM; free with rv_comm_sizes_free (NULL-safe fields). */
int rv_comm_sizes_index(const rv_trace *t, rv_comm_sizes *ix);
void rv_comm_sizes_free(rv_comm_sizes *ix);

/* The message of collective kernel `task`, bytes: the kernel's own size
 * ("In msg nelems" x dtype, newer Kineto), else the size on the annotation
 * around the CPU call that launched it. 0 when neither says. */
double rv_comm_task_bytes(const rv_graph *g, const rv_comm_sizes *ix, int32_t task);

/* ---- gradients of a one-GPU trace (rv_comm_grads.c) ----------------------- */

typedef struct rv_comm_grad {
    int32_t task; /* the kernel after which the gradient is ready */
    double bytes;
} rv_comm_grad;

enum { RV_GRAD_READY_ACC_KERNELS, RV_GRAD_READY_ACC_OPS, RV_GRAD_READY_BACKWARD };
enum { RV_GRAD_BYTES_SHAPES, RV_GRAD_BYTES_KERNELS, RV_GRAD_BYTES_OPTIMIZER };

typedef struct rv_comm_grad_info {
    int ready_source;           /* RV_GRAD_READY_*: where the ready points came from */
    int bytes_source;           /* RV_GRAD_BYTES_*: where the sizes came from */
    size_t param_ops;           /* parameter-owning forward ops of one step (shapes) */
    double bytes_per_iteration; /* 0: the kernels' own estimates (no shapes) */
} rv_comm_grad_info;

/* The gradients of g's steps (unsorted) into out (cap entries), *n set.
 * Bytes come from the parameter shapes (median step), else from measured
 * kernel times, never from re-timed durations, so other what-ifs do not
 * move them. Returns 0, RV_ERR_UNSUPPORTED when the trace has no backward
 * pass to find gradients in, or RV_ERR_NOMEM. */
int rv_comm_grads(const rv_graph *g, const rv_hw *hw, rv_comm_grad *out, size_t cap, size_t *n,
                  rv_comm_grad_info *info);

/* ---- networks ------------------------------------------------------------ */

/* The network a traced job is taken to have run on, over n ranks: the
 * GPU's NVLink (else PCIe) inside 8-GPU nodes, 100 Gb/s between them,
 * 5 us per step, 80% of the link. hw may be NULL. */
void rv_comm_net_base(const rv_hw *hw, int n, rv_net *out);

/* The network d asks for over n ranks (fields not given keep their
 * documented defaults; intra_gbps 0 takes the GPU's link). */
void rv_comm_net_of(const rv_dist *d, const rv_hw *hw, int n, rv_net *out);

/* The distributed setup of a plain request: what `distributed` holds when
 * given, else its documented defaults for `workers` ranks; then the job
 * aliases (job.bandwidth_gbps: intra_node_gbps = inter_node_gbps;
 * job.network_latency_us: latency_us; job.world_size: workers). *asked
 * is 1 when any network or scale field was given. */
void rv_comm_dist_of(const struct rv_whatif *w, int workers, rv_dist *out, int *asked);

/* ---- the cost function ---------------------------------------------------- */

/* Time of one collective of `bytes` (op: rv_coll_op) on net under d's
 * knobs, seconds: the measured table for an all-reduce when d has one;
 * else DGC's sparse all-gather (dgc_density), BlueConnect's per-level
 * rings (blueconnect), or NCCL's tuning model for the algorithm
 * (rv_coll_nccl_time; hierarchical and PS: rv_coll_time); split into
 * pieces of tensor_partition_mb, each paying its own latency. d NULL: a
 * plain ring. A size of 0 is timed as one byte (the latency). */
double rv_comm_time(const rv_dist *d, const rv_net *net, int op, double bytes);

/* The message size whose rv_comm_time (same d, net, op) is `seconds`, by
 * bisection: how a collective without a recorded size is sized from its
 * measured transfer. 0 when the latency alone explains it. Bytes. */
double rv_comm_bytes_for_time(const rv_dist *d, const rv_net *net, int op, double seconds);

/* Knobs that cannot act on traced collectives (a multi-rank trace keeps
 * its own buckets): adds a `no_effect` warning to `entry` for each such
 * field d sets, naming it and why. largest: the largest traced message
 * (bytes), for tensor_partition_mb; net: the requested network, for
 * blueconnect; nallreduce: the traced all-reduces (DGC and BlueConnect
 * replace only those). */
void rv_comm_warn_traced(json_t *entry, const rv_dist *d, const rv_net *net, double largest,
                         size_t nallreduce);

#endif
