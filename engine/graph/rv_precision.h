/* The precision a GPU kernel ran in, and whether a GPU has a precision.
 *
 * A kernel's precision comes, in this order, from
 *   1. its name, where a library writes the element type in it: cuBLAS and
 *      cuDNN (h884gemm, sm90_xmma_gemm_bf16bf16_..., volta_fp16_scudnn_...),
 *      CUTLASS (cutlass_80_tensorop_bf16_s16816gemm_...), AMD Tensile
 *      (Cijk_Ailk_Bljk_BBS_...), flash attention (cutlass::bfloat16_t) and
 *      ATen's template arguments (c10::BFloat16, c10::Half);
 *   2. the "Input type" of the op that launched it (the reader keeps a code
 *      per op in rv_event.in_type; kernels find their op by External id):
 *      the only source for Triton kernels, whose names say nothing;
 *   3. weak hints in ATen template arguments (<float>, <long>, OpaqueType<2>);
 *   4. nothing: RV_PREC_UNKNOWN, which the models read as fp32.
 * docs/models/amp.md lists the rules; the name rules and the codes of
 * "Input type" entries live in trace/rv_kname.h. */
#ifndef RV_PRECISION_H
#define RV_PRECISION_H

#include <stddef.h>
#include <stdint.h>

#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "trace/rv_kname.h"
#include "util/rv_map.h"

/* Where a task's precision came from. */
typedef enum rv_prec_source {
    RV_PS_NAME = 0,   /* a library marker in the name */
    RV_PS_INPUT_TYPE, /* the launching op's "Input type" */
    RV_PS_HINT,       /* an ATen template argument */
    RV_PS_ASSUMED,    /* nothing: fp32 assumed */
    RV_PS_COUNT
} rv_prec_source;

/* An op with an "Input type", for the lookup by time. */
typedef struct rv_prec_op {
    uint32_t pid, tid;  /* string ids, as in the trace */
    int64_t start, end; /* ns */
    int32_t parent;     /* the nearest enclosing typed op on the thread, -1 */
    uint8_t type;       /* rv_prec_type */
} rv_prec_op;

/* Per-graph lookups: the typed ops in (pid, tid, start) order, their codes
 * by External id, and a cache per kernel name. A kernel's op is the
 * innermost typed op enclosing the call that launched it (every Kineto
 * version has the call); without a launching call, the op with the
 * kernel's External id. Owns its arrays; free with rv_prec_ctx_free. */
typedef struct rv_prec_ctx {
    const rv_graph *g; /* borrowed */
    rv_prec_op *ops;
    size_t nops;
    rv_map op_type; /* External id -> rv_prec_type */
    rv_map by_name; /* name id -> name rules, cached */
} rv_prec_ctx;

/* Indexes the ops of g's trace (g borrowed; must outlive c). 0 or
 * RV_ERR_NOMEM. */
int rv_prec_ctx_init(rv_prec_ctx *c, const rv_graph *g);
void rv_prec_ctx_free(rv_prec_ctx *c);

/* The precision of task i (a kernel): rv_dtype, RV_PREC_NONFLOAT or
 * RV_PREC_UNKNOWN; *src (may be NULL) says where it came from. */
int rv_prec_of_task(rv_prec_ctx *c, size_t i, int *src);

/* Whether the GPU has dtype: 1 yes, 0 no (why says which GPU and what the
 * dtype needs), -1 cannot tell (no table row and no NVIDIA compute
 * capability in the trace). hw is the table row (NULL when unknown); tr
 * (may be NULL) supplies the device name and compute capability then.
 * Rules: a table row has the dtype when its peak is above 0; otherwise
 * NVIDIA compute capability 5.3+ has fp16, 8.0+ bf16, 8.9+ fp8. */
int rv_prec_gpu_has(const rv_hw *hw, const rv_trace *tr, int dtype, char *why, size_t cap);

/* Classifies the names of g's GPU tasks once (kernel class, precision
 * rules) into g->name_info, which rv_kclass_of_task and rv_prec_of_task
 * then read instead of matching the names again. Called by
 * rv_graph_build. 0, or RV_ERR_NOMEM (g stays usable, unclassified). */
int rv_graph_classify(rv_graph *g);

/* Packing of a g->name_info entry (0 = not classified). */
#define RV_NAMEINFO_KCLASS(v) ((int)((v)&0xff) - 1)
#define RV_NAMEINFO_STRONG(v) ((int)(((v) >> 8) & 0xff) - 8)
#define RV_NAMEINFO_HINT(v)   ((int)(((v) >> 16) & 0xff) - 8)

#endif
