/* Per-op cost: floating-point operations and bytes moved for the common
 * aten ops, from the op's argument shapes (rv_shapes.h), and their
 * attribution to the GPU tasks each op launched. Formulas, what is counted
 * and what is not: docs/models/flops.md. */
#ifndef RV_FLOPS_H
#define RV_FLOPS_H

#include <stddef.h>
#include <stdint.h>

#include "trace/rv_trace.h"

/* Kernel classes the formulas know. */
typedef enum rv_flops_class {
    RV_FC_NONE = 0,
    RV_FC_GEMM,     /* mm, addmm, bmm, baddbmm, matmul, linear */
    RV_FC_CONV,     /* convolution forward and backward */
    RV_FC_ATTN,     /* scaled_dot_product_attention, flash / efficient attention */
    RV_FC_EMBED,    /* embedding, embedding_bag and their backward */
    RV_FC_NORM,     /* layer, batch, group norm and their backward */
    RV_FC_SOFTMAX,  /* softmax, log_softmax and their backward */
    RV_FC_ELEMWISE, /* pointwise math, activations, copies, fills */
    RV_FC_REDUCE,   /* sum, mean, max, norms, losses */
    RV_FC_OPTIM,    /* optimizer foreach / fused ops */
    RV_FC_COUNT
} rv_flops_class;

/* The cost of one op. */
typedef struct rv_op_cost {
    double flops; /* a multiply-add counts 2 */
    double bytes; /* each input and output tensor read or written once */
    int cls;      /* rv_flops_class */
    int ptype;    /* rv_prec_type of the first floating tensor input; 0 unknown */
    /* Embedding ops: bytes gathered from (or scattered to) the tables, and
     * the tables' size, for the kernel model's L2 term; 0 otherwise. */
    double gather, table_bytes;
} rv_op_cost;

/* Cost of op event `event` of t from its shapes: 1 and *c when a formula
 * applies and the shapes it needs are there, else 0. */
int rv_flops_op(const rv_trace *t, int32_t event, rv_op_cost *c);

/* Closed forms, for the formulas and the tests. */
double rv_flops_gemm(double m, double n, double k);
/* Convolution forward: batch n, output channels k, input channels per
 * group c, kernel volume rs (R*S), output volume pq (P*Q). */
double rv_flops_conv(double n, double k, double c, double rs, double pq);

/* The L2 terms of one costed embedding task (rv_op_cost.gather, its
 * share; table_bytes, the op's). */
typedef struct rv_flops_embed {
    int32_t event;
    double gather, table_bytes;
} rv_flops_embed;

/* What the costs of a whole trace add up to. */
typedef struct rv_flops_trace {
    double *flops, *bytes; /* per event (t->nevents): GPU tasks only, else 0 */
    uint8_t *cls;          /* per event: rv_flops_class of a GPU task */
    uint8_t *ptype;        /* per event: rv_prec_type of a GPU task's op */
    double total_flops, total_bytes;
    double flops_by_ptype[8]; /* indexed by rv_prec_type */
    int dominant_ptype;       /* the ptype with the most FLOPs; 0 none */
    size_t ops_costed;        /* ops whose cost was attributed to GPU tasks */
    size_t ops_with_shapes;   /* op events with shapes */
    size_t gpu_tasks, gpu_tasks_costed;
    rv_flops_embed *embed; /* costed embedding tasks, by event */
    size_t nembed;
    /* The trace's op tree (rv_shapes_op_tree, per event), kept for the
     * memory report, which would otherwise build it again. */
    int32_t *op_tree;
} rv_flops_trace;

/* Costs every op of t that has shapes and attributes each op's cost to the
 * GPU tasks launched under it, in proportion to their measured durations.
 * An op's cost is taken at the outermost op with a formula above a task
 * (linear over its addmm, sdpa over its flash kernel), so nothing counts
 * twice. 0 and *out (rv_flops_trace_free), or RV_ERR_NOMEM. */
int rv_flops_of_trace(const rv_trace *t, rv_flops_trace *out);

/* NULL-safe. */
void rv_flops_trace_free(rv_flops_trace *f);

/* The L2 terms of embedding task `event` (borrowed), NULL when it has none. */
const rv_flops_embed *rv_flops_embed_of(const rv_flops_trace *f, int32_t event);

/* Name of a class ("gemm", "conv", ...). */
const char *rv_flops_class_name(int cls);

#endif
