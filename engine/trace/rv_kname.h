/* What a GPU kernel is, from its name: the one owner of every kernel-name
 * rule. Communication or not, point-to-point or collective and which
 * collective, the kernel class (GEMM, memory-bound, ...), and the element
 * type a name or an op's "Input type" entry says. The graph, the readers,
 * the cost and job models and the what-if models all ask here, so an
 * MSCCL or NVSHMEM kernel is communication to each of them alike.
 * docs/models/amp.md lists the precision rules; docs/internals/engine.md
 * the communication markers. Pure functions of their arguments. */
#ifndef RV_KNAME_H
#define RV_KNAME_H

#include <stddef.h>

#include "hw/rv_hw.h"

/* What a GPU kernel computes (cuDNN/cuBLAS/CUTLASS/Tensile/Triton/ATen
 * conventions). Drives AMP, the power model, memory and fusion. */
typedef enum rv_kclass {
    RV_KC_OTHER = 0, /* unknown: treated as memory-bound */
    RV_KC_GEMM,      /* GEMM / convolution / attention: tensor-core eligible */
    RV_KC_MEMBOUND,  /* elementwise, normalization, reduction, copy, pooling */
    RV_KC_OPTIMIZER, /* optimizer update kernels (adam, sgd, multi_tensor_apply) */
    RV_KC_COMM,      /* communication kernel (rv_kname_is_comm) */
    RV_KC_MEMCPY,    /* memcpy / memset */
    RV_KC_COUNT
} rv_kclass;

/* Results besides rv_dtype values. */
#define RV_PREC_UNKNOWN  (-1) /* nothing says: fp32 is assumed */
#define RV_PREC_NONFLOAT (-2) /* integer, bool, fp64 or complex data: AMP leaves it */

/* Element-type codes of an op's "Input type" (rv_event.in_type). */
typedef enum rv_prec_type {
    RV_PT_NONE = 0, /* no tensor input named a type */
    RV_PT_FP32,
    RV_PT_FP16,
    RV_PT_BF16,
    RV_PT_FP8,
    RV_PT_FP64,     /* fp64 or complex: floating, but not autocast */
    RV_PT_NONFLOAT, /* only integer or bool tensors */
    RV_PT_COUNT
} rv_prec_type;

/* 1 when the kernel communicates: NCCL and RCCL, MSCCL, NVSHMEM (and
 * DeepEP on it), PyTorch's symmetric-memory kernels (multimem_*, one/two-
 * shot all-reduce), and kernels named after the collective they run
 * (all-reduce, all-gather, reduce-scatter, all-to-all), matched without
 * case. A name must say which collective: "reduce_kernel" alone is a
 * reduction. NULL is not communication. */
int rv_kname_is_comm(const char *name);

/* 1 when a communication kernel is point-to-point (NCCL send/recv,
 * SendRecv) rather than a collective; matched with case as NCCL spells it. */
int rv_kname_is_p2p(const char *name);

/* The kind of a collective kernel (rv_coll_op in trace/rv_coll.h); *named
 * is 0 when the name says nothing and an all-reduce is assumed. DeepEP's
 * dispatch/combine and plain send/recv count as all-to-all; a reduce to one
 * rank as a broadcast. */
int rv_kname_coll_op(const char *name, int *named);

/* The kernel class (rv_kclass) of a name; RV_KC_OTHER for NULL or "". */
int rv_kname_class(const char *name);

/* Whether the trace's grid of a kernel so named counts threads, not
 * blocks: AMD Tensile / hipBLASLt GEMMs (Cijk_*) report their global work
 * size, while at::native and most other kernels report workgroups. */
int rv_kname_grid_in_threads(const char *name);

/* "gemm", "membound", ...; "other" for out-of-range values. */
const char *rv_kname_class_name(int kc);

/* What a kernel's name says of its element type through library markers
 * (cuBLAS/cuDNN h884gemm, sm90_xmma_gemm_bf16bf16, CUTLASS, AMD Tensile
 * Cijk_*, c10::BFloat16 ...): rv_dtype, RV_PREC_NONFLOAT or
 * RV_PREC_UNKNOWN. */
int rv_kname_dtype(const char *name);

/* The weak hints of ATen template arguments (<float>, <long>,
 * OpaqueType<2>), for when neither the markers nor the launching op say:
 * rv_dtype, RV_PREC_NONFLOAT or RV_PREC_UNKNOWN. */
int rv_kname_dtype_hint(const char *name);

/* The precision of a kernel from its name and its launching op's code
 * (RV_PT_NONE when unknown): markers, then the op, then the hints. */
int rv_kname_kernel_dtype(const char *name, int op_type);

/* The code of one "Input type" entry as Kineto writes it ("c10::BFloat16",
 * "float", "long int", "c10::Float8_e4m3fn"); RV_PT_NONE for what is not a
 * tensor ("Scalar", "", "ScalarList", and the old "Int"/"Double"/"Bool"). */
int rv_kname_type_code(const char *s, size_t n);

/* Folds one more entry into an op's code: the first floating-point tensor
 * (fp64 included: aten::add_(double, float) runs in fp64) wins; integer
 * and bool tensors count only when no floating one comes. */
int rv_kname_type_merge(int code, int next);

/* rv_dtype, RV_PREC_NONFLOAT or RV_PREC_UNKNOWN for a code. */
int rv_kname_type_dtype(int code);

#endif
