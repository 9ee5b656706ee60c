/* Kernel models: a kernel's time from its FLOPs and bytes (rv_flops.h) and
 * the hardware table. The roofline time max(F / peak, B / bandwidth) is
 * divided by an efficiency (achieved / roofline) fitted per kernel class
 * and size bucket (log2 of FLOPs for GEMM, conv and attention, of bytes
 * for the rest) from measured kernels: the baseline the DLRM performance
 * paper improves on with learned models. A kernel on another GPU keeps its
 * efficiency and takes that GPU's roofline (Habitat's rule for kernels it
 * has no model of). See docs/models/kernels.md. */
#ifndef RV_KMODEL_H
#define RV_KMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "trace/rv_trace.h"

#define RV_KMODEL_BUCKETS 64

typedef struct rv_kmodel {
    const rv_hw *hw; /* the GPU the efficiencies were measured on (borrowed) */
    double eff[RV_FC_COUNT][RV_KMODEL_BUCKETS]; /* median efficiency; 0 empty */
    double cls_eff[RV_FC_COUNT];                /* the class's median; 0 empty */
    size_t n[RV_FC_COUNT];                      /* kernels fitted per class */
} rv_kmodel;

/* The dtype a costed task computes in on hw: its ops' dtype, with fp32
 * GEMM/conv/attention on tensor-core TF32 when tf32 is set and hw has it. */
int rv_kmodel_dtype(const rv_hw *hw, int ptype, int cls, int tf32);

/* Roofline seconds of F FLOPs and B bytes in dtype on hw (0 when hw lacks
 * a rate). */
double rv_kmodel_roofline_s(const rv_hw *hw, int dtype, double flops, double bytes);

/* The roofline a kernel moved to another dtype or GPU is timed against:
 * rv_kmodel_roofline_s with a tensor-core dtype's peak derated by the
 * share of it kernels of its size reach relative to fp32
 * (rv_keff_tc_share_at), never below the fp32 peak. A kernel that keeps its efficiency against this
 * roofline keeps its share of the path it runs on, not of the nominal
 * tensor-core peak (docs/models/kernels.md). */
double rv_kmodel_move_roofline_s(const rv_hw *hw, int dtype, double flops, double bytes);

/* The same with the share kappa given (the gpu what-if's pairs). */
double rv_kmodel_roofline_share_s(const rv_hw *hw, int dtype, double kappa, double flops,
                                  double bytes);

/* The share of an embedding op's gathered rows that hit in hw's L2 when
 * its tables take table_bytes: min(1, L2 / table_bytes), the DLRM
 * performance paper's hit rate with every table of the op in flight; 0
 * for a GPU without an L2 figure. Fitting and error use it for embedding
 * tasks (rv_flops_embed_of). */
double rv_kmodel_embed_l2_hit(const rv_hw *hw, double table_bytes);

/* The efficiency (roofline / measured) of event i of t on hw, with its
 * class and size bucket; 0 when i is not a costed kernel with a roofline
 * (embedding tasks with the L2 term). */
double rv_kmodel_event_eff(const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw, size_t i,
                           int *cls, int *bucket);

/* Fits m from the costed GPU tasks of t (f from rv_flops_of_trace) on hw,
 * using task i only when (i % mod) == rem (mod 1: all). */
void rv_kmodel_fit(rv_kmodel *m, const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw,
                   size_t mod, size_t rem);

/* Fits m like rv_kmodel_fit (mod 1) from the costed tasks whose ops ran in
 * rv_prec_type ptype only; m stays empty when none did. */
void rv_kmodel_fit_ptype(rv_kmodel *m, const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw,
                         int ptype);

/* Whether an fp32 kernel of class cls runs as TF32 by default: convolutions
 * (cuDNN's allow_tf32 is on in PyTorch) and kernels that already ran TF32
 * (was_tf32); fp32 matmuls stay fp32 (PyTorch's default since 1.12). */
int rv_kmodel_tf32_default(int cls, int was_tf32);

/* Seconds a costed kernel measured at t_s takes when its roofline moves
 * from roof0 to roof1 seconds, keeping its efficiency (achieved /
 * roofline): t_s x roof1 / roof0. 0 when either roofline is unknown. */
double rv_kmodel_keep_eff_s(double roof0, double roof1, double t_s);

/* Predicted seconds of a task of class cls with F FLOPs and B bytes in
 * rv_prec_type ptype on hw (the fitted GPU or another). 0 when unknown. */
double rv_kmodel_predict_s(const rv_kmodel *m, const rv_hw *hw, int cls, int ptype, double flops,
                           double bytes, int tf32);

/* The fitted efficiency of the size bucket of F FLOPs and B bytes in class
 * cls; 0 when no kernel of that bucket was fitted. */
double rv_kmodel_bucket_eff(const rv_kmodel *m, int cls, double flops, double bytes);

/* The same, or of the nearest fitted bucket of the class when that one is
 * empty; 0 when the class has none. */
double rv_kmodel_nearest_eff(const rv_kmodel *m, int cls, double flops, double bytes);

/* The same within `reach` buckets of the size's (a factor of 2^reach in
 * size); 0 past that. */
double rv_kmodel_near_eff(const rv_kmodel *m, int cls, double flops, double bytes, int reach);

/* Per-class error of m on the costed GPU tasks of t with (i % mod) == rem:
 * geometric mean over kernels of |predicted - measured| / measured (each
 * floored at 1e-4) in gm[cls], kernels in count[cls]. */
void rv_kmodel_error(const rv_kmodel *m, const rv_trace *t, const rv_flops_trace *f, size_t mod,
                     size_t rem, double gm[RV_FC_COUNT], size_t count[RV_FC_COUNT]);

/* Seconds a task measured at t_s on `from` takes on `to`: a costed task
 * (cls != RV_FC_NONE) keeps its efficiency, t_s x roofline(to) /
 * roofline(from) (rv_kmodel_move_roofline_s); anything else scales with
 * memory bandwidth. tf32_to: fp32
 * GEMM/conv/attention run as TF32 on `to` where it has it. */
double rv_kmodel_rescale_s(const rv_hw *from, const rv_hw *to, int cls, int ptype, double flops,
                           double bytes, double t_s, int tf32_to);

#endif
