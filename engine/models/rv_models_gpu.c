/* "gpu": kernel times rescaled to another GPU through the kernel models
 * (Habitat's rule for kernels without a learned model): a kernel with a
 * cost keeps its measured efficiency and takes the target's roofline,
 * with wave quantization by SM count; kernels without a cost take their
 * class's ratio. See docs/models/kernels.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "cost/rv_keff.h"
#include "cost/rv_kmodel.h"
#include "models/rv_models.h"
#include "trace/rv_kname.h"
#include "graph/rv_precision.h"
#include "graph/rv_retime.h"

/* Class-level ratios for kernels without a cost: compute (GEMM, conv,
 * attention by name) and the rest (memory-bound). */
enum { GRP_COMPUTE = 0, GRP_MEMORY, GRP_COUNT };

static int compute_cls(int cls)
{
    return cls == RV_FC_GEMM || cls == RV_FC_CONV || cls == RV_FC_ATTN;
}

/* Share of a wave's slots a grid of `blocks` leaves idle, as the factor
 * ceil(B / S) * S / B >= 1, one block per SM assumed. A grid smaller than
 * the GPU gains nothing from more SMs; the roofline ratio assumes it does. */
static double tail(double blocks, int sms)
{
    if (blocks <= 0 || sms <= 0)
        return 1;
    return ceil(blocks / sms) * sms / blocks;
}

/* Whether the trace's fp32 kernel ran on tensor cores as TF32, from its
 * name (cuDNN/cuBLAS markers). */
static int ran_tf32(const char *name)
{
    return rv_kname_dtype(name) == RV_DT_TF32;
}

/* Seconds on `to` of a costed kernel measured at t_s on `from`: the
 * roofline ratio, times the ratio of the two GPUs' achievable efficiencies
 * for its class and size where the fitted table (cost/rv_keff.h) speaks
 * for them; *how says whether it did. */
static double costed_s(const rv_hw *from, const rv_hw *to, int cls, int ptype, double flops,
                       double bytes, double t_s, int was_tf32, int *how)
{
    int dt_from = rv_kmodel_dtype(from, ptype, cls, was_tf32);
    int dt_to = rv_kmodel_dtype(to, ptype, cls, rv_kmodel_tf32_default(cls, was_tf32));
    double ka = rv_keff_tc_share_at(from, dt_from, flops);
    double kb = rv_keff_tc_share_at(to, dt_to, flops);
    /* One tensor-core dtype on both, its share measured on one GPU only:
     * that share on both (the generations' difference is not measured). */
    if (dt_from == dt_to && (ka < 1) != (kb < 1))
        ka = kb = ka < kb ? ka : kb;
    double a = rv_kmodel_roofline_share_s(from, dt_from, ka, flops, bytes);
    double b = rv_kmodel_roofline_share_s(to, dt_to, kb, flops, bytes);
    double f = rv_keff_factor(from, to, cls, dt_from, dt_to, flops, bytes, a, b, how);
    return rv_kmodel_keep_eff_s(a, b, t_s) * f;
}

/* Seconds of a costed kernel on `to` at the efficiency the target's stored
 * traces measured for its class and size bucket (0 when they have none).
 * The roofline takes the dtype the fit took (fp32 GEMMs as TF32 where the
 * GPU has it), so the efficiency says which one ran. Embeddings are left to
 * the kernel's own efficiency: their fit carries the L2 term. */
static double target_s(const rv_kmodel *m, const rv_hw *to, int cls, int ptype, double flops,
                       double bytes)
{
    if (!m || cls == RV_FC_EMBED)
        return 0;
    double eff = rv_kmodel_bucket_eff(m, cls, flops, bytes);
    double roof =
        eff > 0 ? rv_kmodel_roofline_s(to, rv_kmodel_dtype(to, ptype, cls, 1), flops, bytes) : 0;
    return roof > 0 ? roof / eff : 0;
}

/* The in-trace error of the kernel models on the trace's GPU: fitted on
 * every other costed kernel, measured on the rest (docs/ACCURACY.md). */
static json_t *model_error(const rv_trace *t, const rv_flops_trace *f, const rv_hw *from)
{
    rv_kmodel m;
    double gm[RV_FC_COUNT];
    size_t n[RV_FC_COUNT];
    json_t *o = json_object();
    rv_kmodel_fit(&m, t, f, from, 2, 0);
    rv_kmodel_error(&m, t, f, 2, 1, gm, n);
    for (int c = 1; o && c < RV_FC_COUNT; c++)
        if (n[c] > 0)
            json_object_set_new(
                o, rv_flops_class_name(c),
                json_pack("{s:f,s:I}", "error", gm[c], "kernels", (json_int_t)n[c]));
    return o;
}

static void not_rescaled(json_t *o, const char *gpu, const char *why)
{
    json_object_set_new(o, "rescaled", json_false());
    rv_models__warn(o, "gpu_not_rescaled",
                    "gpu %s changes the hardware the energy and precision models use; kernel "
                    "times are the trace's, not rescaled to that GPU: %s",
                    gpu, why);
}

/* What the rescaling counted, for the applied entry and its warnings. */
typedef struct gpu_tally {
    double grp_before[GRP_COUNT], grp_after[GRP_COUNT], grp_ratio[GRP_COUNT];
    double k_before, k_costed, k_class, k_after, k_kept, k_target, k_tf32_kept;
    double k_eff[RV_KEFF_ESTIMATED + 1]; /* costed kernel time by rv_keff_factor's way */
    size_t n_costed, n_class, n_tf32, n_target, n_tf32_kept;
} gpu_tally;

/* First pass: the costed kernels' time ratio (ratio[i], 0 when not
 * costed), whether the target's stored models timed them (on_target[i]),
 * and the time per group before and after. */
static void cost_kernels(const struct rv_whatif *w, const rv_graph *g, const rv_hw *from,
                         const rv_hw *to, double *ratio, unsigned char *on_target, gpu_tally *c)
{
    const rv_flops_trace *f = g->flops;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *k = &g->tasks[i];
        if (k->kind != RV_TASK_GPU || k->event < 0 || k->cat != RV_CAT_KERNEL || k->dur_ns <= 0)
            continue;
        int32_t e = k->event;
        int cls = f->cls[e];
        if (cls == RV_FC_NONE || (f->flops[e] <= 0 && f->bytes[e] <= 0))
            continue;
        double s = (double)k->dur_ns * 1e-9;
        int was = ran_tf32(rv_task_name(g, i));
        double p = target_s(w->kmodel_target, to, cls, f->ptype[e], f->flops[e], f->bytes[e]);
        if (p > 0) {
            /* Measured on the target: its efficiency holds its waves. */
            on_target[i] = 1;
            c->n_target++;
            c->k_target += s;
        } else {
            int how = RV_KEFF_KEPT;
            p = costed_s(from, to, cls, f->ptype[e], f->flops[e], f->bytes[e], s, was, &how);
            c->k_eff[how] += s;
        }
        if (p <= 0)
            continue;
        int tf32 = f->ptype[e] != RV_PT_FP16 && f->ptype[e] != RV_PT_BF16 &&
                   f->ptype[e] != RV_PT_FP8 && rv_kmodel_tf32_default(cls, was) &&
                   to->tflops[RV_DT_TF32] > 0;
        c->n_tf32 += tf32;
        /* fp32 on the trace, TF32 on the target (report_tf32 says at what share). */
        if (tf32 && !was && !on_target[i] && compute_cls(cls)) {
            c->n_tf32_kept++;
            c->k_tf32_kept += s;
        }
        int grp = compute_cls(cls) ? GRP_COMPUTE : GRP_MEMORY;
        c->grp_before[grp] += s;
        c->grp_after[grp] += p;
        ratio[i] = p / s;
    }
}

/* Second pass: every GPU task's new duration: costed kernels by their
 * ratio, the others by their group's (collectives kept), copies by HBM or
 * PCIe bandwidth. */
static void rescale_tasks(rv_graph *g, const rv_hw *from, const rv_hw *to, const double *ratio,
                          const unsigned char *on_target, gpu_tally *c)
{
    const rv_trace *t = g->trace;
    double bw = from->hbm_gbps / to->hbm_gbps;
    double pcie = from->pcie_gbps > 0 && to->pcie_gbps > 0 ? from->pcie_gbps / to->pcie_gbps : 1.0;
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *k = &g->tasks[i];
        if (k->kind != RV_TASK_GPU || k->dur_ns <= 0)
            continue;
        double s = (double)k->dur_ns * 1e-9, m;
        const char *name = rv_task_name(g, i);
        if (k->cat == RV_CAT_KERNEL) {
            c->k_before += s;
            if (ratio[i] > 0) {
                m = ratio[i];
                c->k_costed += s;
                c->n_costed++;
            } else {
                int kc = rv_kname_class(name);
                if (kc == RV_KC_COMM) {
                    /* Collectives are the distributed model's (links). */
                    c->k_kept += s;
                    c->k_after += s;
                    continue;
                }
                m = c->grp_ratio[kc == RV_KC_GEMM ? GRP_COMPUTE : GRP_MEMORY];
                c->k_class += s;
                c->n_class++;
            }
            const rv_event *ev = k->event >= 0 ? &t->events[k->event] : NULL;
            if (ev && ev->grid[0] > 0 && !on_target[i]) {
                double blocks = (double)ev->grid[0] * (ev->grid[1] > 0 ? ev->grid[1] : 1) *
                                (ev->grid[2] > 0 ? ev->grid[2] : 1);
                /* Tensile grids count threads: workgroups are grid / block. */
                double per = (double)(ev->block[0] > 0 ? ev->block[0] : 1) *
                             (ev->block[1] > 0 ? ev->block[1] : 1) *
                             (ev->block[2] > 0 ? ev->block[2] : 1);
                if (rv_kname_grid_in_threads(name) && per > 1)
                    blocks = ceil(blocks / per);
                m *= tail(blocks, to->sms) / tail(blocks, from->sms);
            }
        } else {
            /* memcpy / memset: device copies by HBM, host copies by PCIe. */
            int host = strstr(name, "HtoD") || strstr(name, "DtoH") || strstr(name, "Pinned") ||
                       strstr(name, "Pageable");
            m = host ? pcie : bw;
        }
        k->dur_ns = rv_models__scaled_ns(k->dur_ns, m);
        if (k->cat == RV_CAT_KERNEL)
            c->k_after += (double)k->dur_ns * 1e-9;
    }
}

/* The platform models' share and its warnings. */
static void report_platform(const struct rv_whatif *w, const rv_hw *from, const rv_hw *to,
                            const gpu_tally *c, json_t *o)
{
    json_object_set_new(o, "kernels_from_target_platform", json_integer((json_int_t)c->n_target));
    json_object_set_new(o, "kernel_time_share_from_target_platform",
                        json_real(c->k_before > 0 ? c->k_target / c->k_before : 0));
    if (c->n_target > 0)
        rv_models__warn(o, "gpu_platform_efficiencies",
                        "%zu kernels (%.1f%% of kernel time) take the efficiencies stored "
                        "traces of %s measured for their class and size; these carry "
                        "poorly to another model (several times off between the shared H100 "
                        "models, docs/ACCURACY.md): trust them where the stored traces run "
                        "this model",
                        c->n_target, c->k_before > 0 ? c->k_target / c->k_before * 100 : 0,
                        to->name);
    if (!w->kmodel_target)
        rv_models__warn(o, "gpu_no_target_platform",
                        "no stored trace of %s has kernels with op shapes: every kernel "
                        "keeps its measured efficiency on %s (Habitat's rule)",
                        to->name, from->name);
}

/* Whose host the answer's CPU time is: the target machine's when the
 * document's host statistics were measured with the target GPU
 * ("host_overheads": "platform", the service choosing a stored platform
 * of that GPU, or --overheads-from traces of it), else the trace's own,
 * which the answer must say. */
static void report_host(const struct rv_whatif *w, const rv_hw *to, json_t *o)
{
    const rv_oh_table *oh = w->platform_overheads ? w->overheads : NULL;
    if (oh && oh->gpu[0] && rv_hw_lookup(oh->gpu) == to) {
        json_object_set_new(o, "host", json_string("target"));
        json_object_set_new(o, "host_gpu", json_string(oh->gpu));
        return;
    }
    json_object_set_new(o, "host", json_string("kept"));
    if (oh)
        rv_models__warn(o, "gpu_host_kept",
                        "CPU time (framework ops, launches, data loading) is re-timed from host "
                        "statistics measured with %s, not with the target %s: the target "
                        "machine's host is not modelled; stored traces of a platform with that "
                        "GPU (or --overheads-from traces of one) would re-time it",
                        oh->gpu[0] ? oh->gpu : "mixed or unknown GPUs", to->name);
    else
        rv_models__warn(o, "gpu_host_kept",
                        "CPU time (framework ops, launches, data loading) is kept as traced: the "
                        "host of a %s machine is not modelled; \"host_overheads\": "
                        "\"platform\" with stored traces of that platform re-times launches "
                        "and ops",
                        to->name);
}

/* fp32 kernels moved to TF32: at the TF32 share by size measured for the
 * target's generation (rv_keff_tc_share_at), or, where none was, at their
 * fp32 share. */
static void report_tf32(const rv_hw *to, const gpu_tally *c, json_t *o)
{
    double share = c->k_before > 0 ? c->k_tf32_kept / c->k_before * 100 : 0;
    if (c->n_tf32_kept == 0)
        return;
    if (rv_keff_tc_share(to, RV_DT_TF32) < 1)
        rv_models__warn(o, "tf32_fitted",
                        "%zu fp32 kernels (%.1f%% of kernel time) move to TF32 on %s at a "
                        "share of the share of peak they reached in fp32 that grows with size "
                        "(%.2f at 1 GFLOP, %.2f at 10 GFLOP; fitted on the TF32 GEMMs of a "
                        "shared A100 trace, none above 1.5 GFLOP, docs/models/kernels.md); "
                        "ResNet-50 V100 -> A100 this way is within 10%% of NVIDIA's measured "
                        "speedup (docs/ACCURACY.md)",
                        c->n_tf32_kept, share, to->name, rv_keff_tc_share_at(to, RV_DT_TF32, 1e9),
                        rv_keff_tc_share_at(to, RV_DT_TF32, 1e10));
    else
        rv_models__warn(o, "tf32_optimistic",
                        "%zu fp32 kernels (%.1f%% of kernel time) move to TF32 on %s at the "
                        "efficiency they had at the fp32 peak: no TF32 kernels of its "
                        "generation were measured, and where they were (an A100) TF32 reaches a "
                        "far smaller share of its peak (docs/models/kernels.md): likely too "
                        "fast; \"kernel_models\": \"platform\" with stored traces of %s uses "
                        "the efficiencies they measured",
                        c->n_tf32_kept, share, to->name, to->name);
}

/* The applied entry's figures and the warnings they rest on. */
static void report(const struct rv_whatif *w, const rv_graph *g, const rv_hw *from, const rv_hw *to,
                   const gpu_tally *c, json_t *o)
{
    double share = c->k_before > 0 ? (c->k_class + c->k_kept) / c->k_before : 0;
    json_object_set_new(o, "rescaled", json_true());
    json_object_set_new(o, "kernels_costed", json_integer((json_int_t)c->n_costed));
    json_object_set_new(o, "kernels_by_class_ratio", json_integer((json_int_t)c->n_class));
    json_object_set_new(o, "kernel_us_before", json_real(c->k_before * 1e6));
    json_object_set_new(o, "kernel_us_after", json_real(c->k_after * 1e6));
    json_object_set_new(o, "kernel_time_share_not_modelled", json_real(share));
    json_object_set_new(o, "compute_ratio", json_real(c->grp_ratio[GRP_COMPUTE]));
    json_object_set_new(o, "memory_ratio", json_real(c->grp_ratio[GRP_MEMORY]));
    json_object_set_new(o, "model_error", model_error(g->trace, g->flops, from));
    json_object_set_new(o, "efficiency_table", json_string(rv_keff_version));
    json_object_set_new(o, "kernel_time_share_fitted_efficiency",
                        json_real(c->k_before > 0 ? c->k_eff[RV_KEFF_FITTED] / c->k_before : 0));
    json_object_set_new(o, "kernel_time_share_estimated_efficiency",
                        json_real(c->k_before > 0 ? c->k_eff[RV_KEFF_ESTIMATED] / c->k_before : 0));
    report_host(w, to, o);
    if (c->k_eff[RV_KEFF_ESTIMATED] > 0)
        rv_models__warn(o, "gpu_efficiency_estimated",
                        "%.1f%% of kernel time is fp32 work moved with efficiencies estimated "
                        "from other GPUs of the same vendor (%s or %s is not in the fitted "
                        "table): about 15%% median error leaving one GPU out, up to 57%% "
                        "(docs/ACCURACY.md)",
                        c->k_before > 0 ? c->k_eff[RV_KEFF_ESTIMATED] / c->k_before * 100 : 0,
                        from->name, to->name);
    if (c->k_class + c->k_kept > 0)
        rv_models__warn(o, "gpu_partly_modelled",
                        "%.1f%% of kernel time has no cost from op shapes: %.1f%% took its "
                        "class's ratio (compute %.3f, memory-bound %.3f), %.1f%% (collectives) "
                        "was kept",
                        share * 100, c->k_before > 0 ? c->k_class / c->k_before * 100 : 0,
                        c->grp_ratio[GRP_COMPUTE], c->grp_ratio[GRP_MEMORY],
                        c->k_before > 0 ? c->k_kept / c->k_before * 100 : 0);
    if (c->n_tf32 > 0)
        rv_models__warn(o, "tf32_assumed",
                        "%zu fp32 kernels run as TF32 on %s: convolutions (cuDNN's default "
                        "allow_tf32) and kernels the trace already ran as TF32; fp32 matmuls "
                        "stay fp32 (PyTorch's default since 1.12)",
                        c->n_tf32, to->name);
    report_tf32(to, c, o);
    char buf[512];
    size_t len = 0;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(o, "model_error"), key, v)
    {
        int n = snprintf(buf + len, sizeof(buf) - len, "%s%s %.1f%%", len ? ", " : "", key,
                         json_real_value(json_object_get(v, "error")) * 100);
        if (n < 0 || (size_t)n >= sizeof(buf) - len)
            break;
        len += (size_t)n;
    }
    rv_models__warn(o, "gpu_rescaled",
                    "kernel times rescaled %s -> %s by the kernel models (memory-bound by "
                    "bandwidth, compute-bound by the dtype's peak, wave quantization by SM "
                    "count, one block per SM assumed); the models' in-trace error on %s "
                    "(geometric mean per class): %s",
                    from->name, to->name, from->name, len ? buf : "none measured");
}

int rv_models__gpu(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err)
{
    const rv_trace *t = g->trace;
    const rv_hw *to = rv_hw_lookup(w->gpu);
    const rv_hw *from = rv_models__hw(NULL, g);
    const rv_flops_trace *f = g->flops;
    json_t *o = json_pack("{s:s,s:s,s:s}", "model", "gpu", "from", from ? from->name : "unknown",
                          "to", to ? to->name : w->gpu);
    if (!o)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (!from || !to || from->hbm_gbps <= 0 || to->hbm_gbps <= 0) {
        not_rescaled(o, w->gpu, "the trace's GPU is not in the hardware table");
        goto done;
    }
    if (!t || t->nop_shapes == 0) {
        not_rescaled(o, w->gpu,
                     "the trace has no op shapes (record_shapes or an execution trace), so "
                     "the kernel models have no FLOPs or bytes");
        goto done;
    }
    if (!f || f->gpu_tasks_costed == 0) {
        not_rescaled(o, w->gpu, "no kernel of the trace has a cost from its op's shapes");
        goto done;
    }
    double *ratio = calloc(g->ntasks + 1, sizeof(*ratio));
    unsigned char *on_target = calloc(g->ntasks + 1, 1);
    if (!ratio || !on_target) {
        free(ratio);
        free(on_target);
        json_decref(o);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    gpu_tally c;
    memset(&c, 0, sizeof(c));
    cost_kernels(w, g, from, to, ratio, on_target, &c);
    /* Fallback ratios for a group without costed kernels: peak FLOP/s for
     * compute (fp32), bandwidth for the rest. */
    double bw = from->hbm_gbps / to->hbm_gbps;
    double fp32 = rv_hw_peak(to, RV_DT_FP32) > 0
                      ? rv_hw_peak(from, RV_DT_FP32) / rv_hw_peak(to, RV_DT_FP32)
                      : bw;
    c.grp_ratio[GRP_COMPUTE] =
        c.grp_before[GRP_COMPUTE] > 0 ? c.grp_after[GRP_COMPUTE] / c.grp_before[GRP_COMPUTE] : fp32;
    c.grp_ratio[GRP_MEMORY] =
        c.grp_before[GRP_MEMORY] > 0 ? c.grp_after[GRP_MEMORY] / c.grp_before[GRP_MEMORY] : bw;
    rescale_tasks(g, from, to, ratio, on_target, &c);
    free(ratio);
    free(on_target);
    if (w->platform_kmodels)
        report_platform(w, from, to, &c, o);
    report(w, g, from, to, &c, o);
done:
    json_array_append_new(applied, o);
    return 0;
}
