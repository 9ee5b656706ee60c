/* Compute what-ifs: mixed precision, fused optimizer, kernel fusion,
 * restructured batchnorm (Daydream section 5, MODELS.md section D). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "cost/rv_keff.h"
#include "cost/rv_kmodel.h"
#include "models/rv_models.h"
#include "graph/rv_precision.h"

/* Below this a kernel is launch/latency bound and does not shrink. */
#define RV_KERNEL_FLOOR_NS 2000

static int is_kernel(const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    return t->kind == RV_TASK_GPU && t->cat == RV_CAT_KERNEL && !(t->flags & RV_TF_NCCL) &&
           !(t->flags & RV_TF_REMOVED);
}

/* Shrinks the part of a kernel above the latency floor. */
static int64_t shrink(int64_t dur, double ratio)
{
    int64_t fix = dur < RV_KERNEL_FLOOR_NS ? dur : RV_KERNEL_FLOOR_NS;
    return fix + (int64_t)llround((double)(dur - fix) * ratio);
}

/* Achieved share of peak: CUDA-core fp32 GEMMs run near peak; tensor-core
 * paths reach far less of theirs in real conv/GEMM mixes (Daydream's /3 on
 * V100 corresponds to about 0.35-0.45). */
#define AMP_ETA_FP32   0.80 /* CUDA-core fp32 */
#define AMP_ETA_TENSOR 0.45 /* tensor-core 16-bit and below */
/* Daydream's fixed AMP ratios (section 6.2): tensor-core kernels /3,
 * the others /2. */
#define AMP_DAYDREAM_GEMM  3.0
#define AMP_DAYDREAM_OTHER 2.0
/* GradScaler's unscale pass reads and writes every gradient once. */
#define AMP_UNSCALE_PASSES 2.0

static double eta(int dtype)
{
    return dtype == RV_DT_FP32 ? AMP_ETA_FP32 : AMP_ETA_TENSOR;
}

/* The kernel models' view of AMP (docs/models/amp.md): a kernel whose op
 * was costed from its shapes keeps its efficiency against its roofline at
 * the source dtype and takes the roofline at the target dtype, or the
 * efficiency the trace's kernels already at the target reach in its size
 * bucket. */
typedef struct amp_costing {
    const rv_flops_trace *f; /* g->flops (borrowed); NULL: ratios only */
    const rv_hw *hw;
    rv_kmodel at_target; /* fitted on kernels already at the target dtype */
    int have_target;
} amp_costing;

/* Share of a class's bytes autocast casts: softmax, log_softmax, sums and
 * losses run in fp32 under autocast (PyTorch's autocast op reference), and
 * embedding lookups in their tables' type (not autocast), so their
 * traffic stays; the rest reads and writes the target type. */
static double cast_share(int cls)
{
    return cls == RV_FC_SOFTMAX || cls == RV_FC_REDUCE || cls == RV_FC_EMBED ? 0 : 1;
}

static int prec_type_of(int dt)
{
    return dt == RV_DT_FP16 ? RV_PT_FP16 : dt == RV_DT_BF16 ? RV_PT_BF16 : RV_PT_FP8;
}

/* The roofline dtype a kernel measured at precision d0 ran in: fp32
 * convolutions as TF32 where the GPU has it (cuDNN's default), as the gpu
 * what-if assumes. */
static int src_dtype(const rv_hw *hw, int cls, int d0)
{
    int compute = cls == RV_FC_GEMM || cls == RV_FC_CONV || cls == RV_FC_ATTN;
    if (!compute)
        return RV_DT_FP32;
    if (d0 == RV_DT_FP32 && rv_kmodel_tf32_default(cls, 0) && hw->tflops[RV_DT_TF32] > 0)
        return RV_DT_TF32;
    return d0;
}

/* The time ratio of costed kernel i from d0 to dt, or 0 when its op has no
 * cost; *moved is set when the target bucket's efficiency was used. */
static double amp_costed_ratio(const amp_costing *c, const rv_graph *g, size_t i, int d0, int dt,
                               int *moved)
{
    const rv_task *t = &g->tasks[i];
    const rv_flops_trace *f = c->f;
    *moved = 0;
    if (!f || !c->hw || t->event < 0 || (size_t)t->event >= g->trace->nevents || t->dur_ns <= 0)
        return 0;
    int32_t e = t->event;
    int cls = f->cls[e];
    if (cls == RV_FC_NONE || cls == RV_FC_OPTIM || (f->flops[e] <= 0 && f->bytes[e] <= 0))
        return 0;
    double cs = cast_share(cls), rb = rv_dtype_bytes(dt) / rv_dtype_bytes(d0);
    double b1 = f->bytes[e] * (1 - cs + cs * rb);
    double s = (double)t->dur_ns * 1e-9;
    /* Both rooflines at the share of peak each path reaches (the tensor-core
     * shares by size, rv_keff_tc_share_at): a kernel keeps its efficiency
     * against it. */
    double r0 =
        rv_kmodel_move_roofline_s(c->hw, src_dtype(c->hw, cls, d0), f->flops[e], f->bytes[e]);
    double r1 = rv_kmodel_move_roofline_s(c->hw, dt, f->flops[e], b1);
    double s1 = rv_kmodel_keep_eff_s(r0, r1, s);
    if (s1 <= 0)
        return 0;
    double eff = c->have_target ? rv_kmodel_bucket_eff(&c->at_target, cls, f->flops[e], b1) : 0;
    if (eff > 0) {
        /* The bucket's efficiency was fitted against the plain roofline. */
        s1 = rv_kmodel_roofline_s(c->hw, dt, f->flops[e], b1) / eff;
        *moved = 1;
    }
    /* A lower precision is not slower: a bucket's efficiency can be. */
    return s1 / s < 1 ? s1 / s : 1;
}

/* Where and how long the GradScaler's work goes, per step. */
typedef struct scaler_plan {
    int32_t *anchor;     /* the step's last gradient kernel */
    int64_t *unscale_ns; /* 2 x gradient bytes at 80% of HBM bandwidth */
    size_t n;
} scaler_plan;

/* Gradients are the AccumulateGrad kernels (grad += new: three tensors of
 * traffic per kernel, as the distributed model sizes them). */
static int grad_scaler_plan(const rv_graph *g, const rv_hw *hw, scaler_plan *p)
{
    size_t steps = g->niters ? g->niters : 1;
    double bw = (hw ? hw->hbm_gbps : RV_HW_DEFAULT_HBM_GBPS) * 1e9;
    double *bytes = calloc(steps, sizeof(double));
    p->anchor = malloc(steps * sizeof(int32_t));
    p->unscale_ns = malloc(steps * sizeof(int64_t));
    if (!bytes || !p->anchor || !p->unscale_ns) {
        free(bytes);
        return RV_ERR_NOMEM;
    }
    int64_t *last_end = malloc(steps * sizeof(int64_t));
    if (!last_end) {
        free(bytes);
        return RV_ERR_NOMEM;
    }
    for (size_t k = 0; k < steps; k++) {
        p->anchor[k] = -1;
        last_end[k] = INT64_MIN;
    }
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (!is_kernel(g, i) || (t->flags & RV_TF_REMOVED))
            continue;
        const char *op = g->trace ? rv_trace_str(g->trace, t->op) : "";
        const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (!strstr(op, "AccumulateGrad") && !strstr(layer, "AccumulateGrad"))
            continue;
        size_t k = g->niters ? (t->iteration >= 0 ? (size_t)t->iteration : steps) : 0;
        if (k >= steps)
            continue;
        double busy = (double)t->dur_ns * 1e-9 - 1e-6;
        double b = busy > 0 ? busy * bw / 3 : 0;
        bytes[k] += b < 4096 ? 4096 : b;
        int64_t end = t->meas_start_ns + t->meas_dur_ns;
        if (end > last_end[k]) {
            last_end[k] = end;
            p->anchor[k] = (int32_t)i;
        }
    }
    for (size_t k = 0; k < steps; k++) {
        if (p->anchor[k] < 0)
            continue;
        p->anchor[p->n] = p->anchor[k];
        p->unscale_ns[p->n] =
            (int64_t)llround(AMP_UNSCALE_PASSES * bytes[k] / (RV_MODELS_HBM_SHARE * bw) * 1e9);
        p->n++;
    }
    free(bytes);
    free(last_end);
    return 0;
}

/* Unscale + inf check, then the scale update (3 us), after step k's last
 * gradient. */
static int insert_scaler(rv_graph *g, const scaler_plan *p, size_t k, const int32_t *next,
                         int32_t *side)
{
    int rc = rv_models__insert_after(g, p->anchor[k], next, p->unscale_ns[k], RV_SEL_KERNEL, side);
    if (!rc)
        rc = rv_models__insert_after(g, p->anchor[k], next, 3000, RV_SEL_KERNEL, side);
    return rc;
}

/* "the trace's GPU (NAME) is not in the hardware table" or "the trace
 * names no GPU", into buf. */
static const char *gpu_phrase(const rv_graph *g, char *buf, size_t cap)
{
    const char *name = g->trace ? rv_trace_str(g->trace, g->trace->platform_gpu) : "";
    if (*name)
        snprintf(buf, cap, "the trace's GPU (%s) is not in the hardware table", name);
    else
        snprintf(buf, cap, "the trace names no GPU");
    return buf;
}

/* Refuses a dtype the GPU lacks (the field is the dtype: the request asks
 * for what the hardware cannot do); *fallback is set when the GPU is not in
 * the table and Daydream's fixed ratios stand in for its peaks. */
static int amp_check(const rv_hw *hw, const rv_graph *g, const rv_opt *o, int *fallback,
                     rv_error *err)
{
    char field[64], why[200] = "", gpu[160];
    const char *dn = rv_dtype_name(o->dtype);
    snprintf(field, sizeof(field), "optimizations[%d].dtype", o->index);
    *fallback = 0;
    if (rv_prec_gpu_has(hw, g->trace, o->dtype, why, sizeof(why)) == 0)
        return rv_error_field(err, RV_ERR_UNSUPPORTED, field, "amp %s: %s", dn, why);
    if (hw)
        return 0;
    /* Daydream's ratios are fp32 -> 16-bit; there is none for fp8. */
    if (o->dtype == RV_DT_FP8)
        return rv_error_field(err, RV_ERR_UNSUPPORTED, "gpu",
                              "amp fp8: %s, so its fp8 peak is unknown, and Daydream's ratios "
                              "are for 16-bit types; set \"gpu\"",
                              gpu_phrase(g, gpu, sizeof(gpu)));
    *fallback = !o->amp_daydream;
    return 0;
}

/* One amp pass: what it works with and what it counted. */
typedef struct amp_pass {
    const rv_hw *hw;
    rv_power_model pm;
    int dt, daydream;
    amp_costing cost;
    rv_prec_ctx prec;
    int32_t *next, *side;
    int64_t launch, cast_ns;
    size_t n_gemm, n_mem, n_at, n_opt, n_nonfloat, n_cast, n_scaler;
    size_t n_src[RV_PS_COUNT];
    double before, after, at_ns, gemm_ns, gemm_at_ns, costed_ns, ratio_ns;
    size_t n_costed, n_ratio, n_moved;
} amp_pass;

/* The new time of GPU kernel i at the target precision (tensor-core GEMMs
 * by the peak ratio, others by element size, or from the ops' costs), and
 * the casts autocast adds before forward GEMMs. 0 or a negative rv_err. */
static int amp_kernel(amp_pass *a, rv_graph *g, size_t i)
{
    rv_task *t = &g->tasks[i];
    const char *name = rv_task_name(g, i);
    int c = rv_kname_class(name), src, dt = a->dt;
    int d0 = rv_prec_of_task(&a->prec, i, &src);
    if (c == RV_KC_GEMM)
        a->gemm_ns += (double)t->dur_ns;
    /* The optimizer step (and zero_grad) works on the fp32 master
     * weights and gradients; integer, bool and fp64 kernels are not
     * autocast. */
    if (c == RV_KC_OPTIMIZER || t->phase == RV_PHASE_OPTIMIZER) {
        a->n_opt++;
        return 0;
    }
    if (d0 == RV_PREC_NONFLOAT) {
        a->n_nonfloat++;
        return 0;
    }
    if (d0 == RV_PREC_UNKNOWN)
        d0 = RV_DT_FP32;
    /* Already in (or below) the target precision: not sped up again. */
    if (rv_dtype_bytes(d0) <= rv_dtype_bytes(dt)) {
        a->n_at++;
        a->at_ns += (double)t->dur_ns;
        if (c == RV_KC_GEMM)
            a->gemm_at_ns += (double)t->dur_ns;
        return 0;
    }
    a->n_src[src]++;
    a->before += (double)t->dur_ns;
    double rm = rv_dtype_bytes(dt) / rv_dtype_bytes(d0);
    int moved = 0;
    double rk = a->daydream ? 0 : amp_costed_ratio(&a->cost, g, i, d0, dt, &moved);
    if (rk > 0) {
        a->n_costed++;
        a->n_moved += (size_t)moved;
        a->costed_ns += (double)t->dur_ns;
    } else if (!a->daydream) {
        a->n_ratio++;
        a->ratio_ns += (double)t->dur_ns;
    }
    if (c == RV_KC_GEMM) {
        if (rk > 0) {
            t->dur_ns = shrink(t->dur_ns, rk);
        } else if (a->daydream) {
            t->dur_ns = (int64_t)llround((double)t->dur_ns / AMP_DAYDREAM_GEMM);
        } else {
            double rcmp = rv_hw_peak(a->hw, d0) * eta(d0) / (rv_hw_peak(a->hw, dt) * eta(dt));
            double gm = a->pm.gamma[RV_KC_GEMM];
            if (rcmp > 1)
                rcmp = 1;
            t->dur_ns = shrink(t->dur_ns, (1 - gm) * rcmp + gm * rm);
        }
        a->n_gemm++;
        /* autocast casts each weight once per forward pass. */
        if (t->phase == RV_PHASE_FORWARD && a->cast_ns > 0) {
            int rc =
                rv_models__insert_after(g, (int32_t)i, a->next, a->cast_ns, RV_SEL_KERNEL, a->side);
            if (rc)
                return rc;
            if (g->tasks[i].launch >= 0)
                g->tasks[g->tasks[i].launch].gap_ns += a->launch;
            a->n_cast++;
        }
    } else {
        t = &g->tasks[i];
        if (rk > 0)
            t->dur_ns = shrink(t->dur_ns, rk);
        else
            t->dur_ns = a->daydream ? (int64_t)llround((double)t->dur_ns / AMP_DAYDREAM_OTHER)
                                    : shrink(t->dur_ns, rm);
        a->n_mem++;
    }
    a->after += (double)g->tasks[i].dur_ns;
    return 0;
}

/* The applied entry (new reference; NULL on OOM). */
static json_t *amp_report(const amp_pass *a, const rv_opt *o, const rv_graph *g, int fallback)
{
    /* "flops_bytes" when most of the scaled time came from the ops' costs. */
    int by_cost = a->before > 0 && a->costed_ns >= 0.5 * a->before;
    const char *method = a->daydream ? "daydream" : by_cost ? "flops_bytes" : "roofline";
    json_t *r = json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:f}", "model", "amp",
                          "index", o->index, "dtype", rv_dtype_name(a->dt), "method", method, "gpu",
                          a->hw ? a->hw->name : "unknown", "gemm_scaled", (json_int_t)a->n_gemm,
                          "other_scaled", (json_int_t)a->n_mem, "unchanged",
                          (json_int_t)a->n_at + (json_int_t)a->n_opt + (json_int_t)a->n_nonfloat,
                          "casts_inserted", (json_int_t)a->n_cast, "scaled_busy_us_before",
                          a->before / 1e3, "scaled_busy_us_after", a->after / 1e3);
    if (!r)
        return NULL;
    /* Why kernels stayed, and where the scaled kernels' precision came
     * from (docs/models/amp.md). */
    json_object_set_new(r, "grad_scaler_inserted", json_integer((json_int_t)a->n_scaler));
    json_object_set_new(r, "already_at_target", json_integer((json_int_t)a->n_at));
    json_object_set_new(r, "already_at_target_us", json_real(a->at_ns / 1e3));
    json_object_set_new(r, "gemm_time_at_target",
                        json_real(a->gemm_ns > 0 ? a->gemm_at_ns / a->gemm_ns : 0));
    json_object_set_new(r, "optimizer_kept", json_integer((json_int_t)a->n_opt));
    json_object_set_new(r, "non_float_kept", json_integer((json_int_t)a->n_nonfloat));
    json_object_set_new(r, "dtype_from",
                        json_pack("{s:i, s:i, s:i, s:i}", "name", (json_int_t)a->n_src[RV_PS_NAME],
                                  "input_type", (json_int_t)a->n_src[RV_PS_INPUT_TYPE], "name_hint",
                                  (json_int_t)a->n_src[RV_PS_HINT], "assumed_fp32",
                                  (json_int_t)a->n_src[RV_PS_ASSUMED]));
    /* How the scaled kernels' new times were found: from their ops'
     * FLOPs and bytes, or by the class ratios (no shapes). */
    if (!a->daydream) {
        double b = a->before > 0 ? a->before : 1;
        json_object_set_new(r, "methods",
                            json_pack("{s:{s:I,s:I,s:f},s:{s:I,s:f}}", "flops_bytes", "kernels",
                                      (json_int_t)a->n_costed, "target_bucket",
                                      (json_int_t)a->n_moved, "time_share", a->costed_ns / b,
                                      "roofline_ratio", "kernels", (json_int_t)a->n_ratio,
                                      "time_share", a->ratio_ns / b));
        /* The tensor-core shares the costed kernels were moved with, the
         * medians over sizes (rv_keff_tc_share; each kernel moved at its
         * size's, rv_keff_tc_share_at; 1: unmeasured, the fp32 share kept). */
        if (a->hw)
            json_object_set_new(r, "tensor_core_share",
                                json_pack("{s:f,s:f}", rv_dtype_name(a->dt),
                                          rv_keff_tc_share(a->hw, a->dt), "tf32",
                                          rv_keff_tc_share(a->hw, RV_DT_TF32)));
        if (a->ratio_ns > 0.5 * a->before && a->before > 0)
            rv_models__warn(r, "amp_ratio_fallback",
                            "%.0f%% of the scaled kernel time has no FLOPs or bytes from op "
                            "shapes (record_shapes or an execution trace): it took the class "
                            "ratios (GEMM/conv by the peak ratio, others by element size)",
                            100 * a->ratio_ns / a->before);
    }
    if (fallback) {
        char gpu[160];
        rv_models__warn(r, "amp_daydream_ratios",
                        "%s: amp used Daydream's fixed ratios (tensor-core kernels /3, "
                        "others /2) instead of the GPU's peaks",
                        gpu_phrase(g, gpu, sizeof(gpu)));
    }
    return r;
}

int rv_models__amp(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                   rv_error *err)
{
    amp_pass a;
    memset(&a, 0, sizeof(a));
    a.hw = rv_models__hw(w, g);
    rv_power_init(&a.pm, a.hw);
    a.dt = o->dtype;
    int fallback = 0;
    scaler_plan scaler = {0};
    int rc = amp_check(a.hw, g, o, &fallback, err);
    if (rc)
        return rc;
    a.daydream = o->amp_daydream || fallback;
    if (!a.daydream && g->flops && g->trace) {
        a.cost.f = g->flops;
        a.cost.hw = a.hw;
        /* The trace's own kernels at the target measure its efficiencies,
         * on the trace's GPU only (their times are that GPU's). */
        if (a.hw == rv_models__hw(NULL, g)) {
            rv_kmodel_fit_ptype(&a.cost.at_target, g->trace, g->flops, a.hw, prec_type_of(a.dt));
            for (int k = 1; k < RV_FC_COUNT; k++)
                a.cost.have_target |= a.cost.at_target.n[k] > 0;
        }
    }
    size_t n0 = g->ntasks;
    a.launch = rv_models__launch_ns(g);
    a.cast_ns = (int64_t)llround(o->cast_us * 1e3);
    if (rv_prec_ctx_init(&a.prec, g) != 0)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "amp: out of memory");
    a.next = rv_models__thread_next(g);
    a.side = malloc((g->nthreads + 1) * sizeof(int32_t));
    if (!a.next || !a.side) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (size_t t = 0; t < g->nthreads; t++)
        a.side[t] = -1;
    /* fp16 needs loss scaling: each step the GradScaler unscales every
     * gradient and checks it for inf/NaN (one read and one write of the
     * gradients), then updates the scale. Measured here, before the
     * kernels change. bf16 needs none. */
    if (a.dt == RV_DT_FP16 && !a.daydream)
        rc = grad_scaler_plan(g, a.hw, &scaler);
    if (rc)
        goto out;
    size_t sk = 0; /* next scaler step; anchors come in task order */
    for (size_t i = 0; i < n0; i++) {
        /* Inserted work must join its side thread in task order (casts and
         * scaler alike), or the side thread would run back in time. */
        for (; sk < scaler.n && (size_t)scaler.anchor[sk] < i; sk++) {
            if ((rc = insert_scaler(g, &scaler, sk, a.next, a.side)) != 0)
                goto out;
            a.n_scaler += 2;
        }
        if (is_kernel(g, i) && (rc = amp_kernel(&a, g, i)) != 0)
            goto out;
    }
    for (; sk < scaler.n; sk++) {
        if ((rc = insert_scaler(g, &scaler, sk, a.next, a.side)) != 0)
            goto out;
        a.n_scaler += 2;
    }
    json_t *r = amp_report(&a, o, g, fallback);
    rc = r && json_array_append_new(applied, r) == 0 ? 0 : RV_ERR_NOMEM;
out:
    rv_prec_ctx_free(&a.prec);
    free(a.next);
    free(a.side);
    free(scaler.anchor);
    free(scaler.unscale_ns);
    if (rc)
        return rv_error_set(err, rc, -1, -1, "amp: %s", rv_err_name(rc));
    return 0;
}

/* Optimizer-step kernels: optimizer phase, outside zero_grad. */
static int is_opt_step_kernel(const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    if (!is_kernel(g, i) || t->phase != RV_PHASE_OPTIMIZER)
        return 0;
    const char *layer = g->trace ? rv_trace_str(g->trace, t->layer) : "";
    return strstr(layer, "zero_grad") == NULL;
}

/* Keeps the first kernel of each group as the fused kernel (duration
 * new_ns, its launch stays) and removes the rest with their launches;
 * the gap of the last launch of a group (CPU work after the group) stays. */
static void fuse_group(rv_graph *g, const int32_t *members, size_t n, int64_t new_ns,
                       size_t *removed, size_t *launches)
{
    g->tasks[members[0]].dur_ns = new_ns;
    int32_t last_launch = -1;
    for (size_t k = 0; k < n; k++) {
        int32_t l = g->tasks[members[k]].launch;
        if (l >= 0 && (last_launch < 0 || l > last_launch))
            last_launch = l;
    }
    for (size_t k = 1; k < n; k++) {
        rv_task *t = &g->tasks[members[k]];
        int32_t l = t->launch;
        rv_graph_remove_task(g, members[k]);
        (*removed)++;
        if (l >= 0 && l != g->tasks[members[0]].launch && !(g->tasks[l].flags & RV_TF_REMOVED)) {
            int64_t gap = g->tasks[l].gap_ns, dl = g->tasks[l].gap_dl_ns;
            rv_graph_remove_task(g, l);
            /* Data loading and the CPU work after the group are not the
             * per-op overhead that fusion removes. */
            g->tasks[l].gap_ns = l == last_launch ? gap : dl;
            g->tasks[l].gap_dl_ns = dl;
            (*launches)++;
        }
    }
}

int rv_models__fused_optimizer(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                               json_t *applied, rv_error *err)
{
    size_t n = g->ntasks, removed = 0, launches = 0, groups = 0;
    int32_t *m = malloc((n + 1) * sizeof(int32_t));
    uint8_t *done = calloc(n + 1, 1);
    double before = 0, after = 0;
    if (!m || !done) {
        free(m);
        free(done);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    /* One group per (iteration, stream): the kernels of one optimizer step
     * on one stream become one multi-tensor kernel. */
    for (size_t i = 0; i < n; i++) {
        if (done[i] || !is_opt_step_kernel(g, i))
            continue;
        size_t k = 0;
        double work = 0;
        for (size_t j = i; j < n; j++) {
            if (done[j] || !is_opt_step_kernel(g, j) || g->tasks[j].thread != g->tasks[i].thread ||
                g->tasks[j].iteration != g->tasks[i].iteration)
                continue;
            done[j] = 1;
            m[k++] = (int32_t)j;
            before += (double)g->tasks[j].dur_ns;
            int64_t d = g->tasks[j].dur_ns - RV_KERNEL_FLOOR_NS;
            work += d > 0 ? (double)d : 0;
        }
        /* Summed memory traffic at the fused kernel's lower traffic. */
        int64_t fused = RV_KERNEL_FLOOR_NS + (int64_t)llround(work * o->traffic_ratio);
        fuse_group(g, m, k, fused, &removed, &launches);
        after += (double)fused;
        groups++;
    }
    free(m);
    free(done);
    json_t *r = json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f}", "model", "fused_optimizer",
                          "index", o->index, "fused_kernels", (json_int_t)groups, "kernels_removed",
                          (json_int_t)removed, "launches_removed", (json_int_t)launches,
                          "traffic_ratio", o->traffic_ratio, "optimizer_gpu_us_before",
                          before / 1e3, "optimizer_gpu_us_after", after / 1e3);
    if (!r || json_array_append_new(applied, r))
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    return 0;
}

int rv_models__kernel_fusion(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                             json_t *applied, rv_error *err)
{
    size_t n = g->ntasks, removed = 0, launches = 0, chains = 0;
    int32_t *next = rv_models__thread_next(g);
    int32_t *m = malloc((n + 1) * sizeof(int32_t));
    uint8_t *hit = calloc(n + 1, 1);
    double before = 0, after = 0;
    int rc = 0;
    if (!next || !m || !hit) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        hit[i] = is_kernel(g, i) && rv_select_match(&o->sel, g, i);
    /* Chains of selected kernels back to back on one stream fuse into one
     * kernel that moves only the external bytes: about the traffic of the
     * largest member (one read of the inputs, one write of the output). */
    for (size_t i = 0; i < n; i++) {
        if (!hit[i])
            continue;
        size_t k = 0;
        int64_t mx = 0;
        for (int32_t j = (int32_t)i; j >= 0 && hit[j]; j = next[j]) {
            hit[j] = 0;
            m[k++] = j;
            before += (double)g->tasks[j].dur_ns;
            if (g->tasks[j].dur_ns > mx)
                mx = g->tasks[j].dur_ns;
        }
        if (k < 2) {
            after += (double)g->tasks[m[0]].dur_ns;
            continue;
        }
        fuse_group(g, m, k, mx, &removed, &launches);
        after += (double)mx;
        chains++;
    }
    json_t *r =
        json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:f}", "model", "kernel_fusion", "index",
                  o->index, "fused_kernels", (json_int_t)chains, "kernels_removed",
                  (json_int_t)removed, "launches_removed", (json_int_t)launches,
                  "selected_gpu_us_before", before / 1e3, "selected_gpu_us_after", after / 1e3);
    rc = r && json_array_append_new(applied, r) == 0 ? 0 : RV_ERR_NOMEM;
out:
    free(next);
    free(m);
    free(hit);
    if (rc)
        return rv_error_set(err, rc, -1, -1, "kernel_fusion: %s", rv_err_name(rc));
    return 0;
}

static int is_bn(const char *lower)
{
    return strstr(lower, "bn_") || strstr(lower, "batch_norm") || strstr(lower, "batchnorm");
}

static int is_relu(const char *lower)
{
    return strstr(lower, "threshold") || strstr(lower, "clamp_min") ||
           (strstr(lower, "relu") && !strstr(lower, "conv") && !strstr(lower, "gemm") &&
            !strstr(lower, "scudnn"));
}

int rv_models__restructure_bn(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                              json_t *applied, rv_error *err)
{
    size_t nbn = 0, nrelu = 0, launches = 0;
    char low[256];
    for (size_t i = 0; i < g->ntasks; i++) {
        if (!is_kernel(g, i))
            continue;
        const char *s = rv_task_name(g, i);
        size_t k = 0;
        for (; s[k] && k + 1 < sizeof(low); k++)
            low[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
        low[k] = '\0';
        rv_task *t = &g->tasks[i];
        if (is_bn(low)) {
            /* Jung et al.: each half of the split BN reads the input once,
             * half the traffic of the original layer. */
            t->dur_ns = shrink(t->dur_ns, 0.5);
            nbn++;
        } else if (is_relu(low) &&
                   (t->phase == RV_PHASE_FORWARD || t->phase == RV_PHASE_BACKWARD)) {
            /* The activation fuses into the neighbouring convolution. */
            int32_t l = t->launch;
            rv_graph_remove_task(g, (int32_t)i);
            nrelu++;
            if (l >= 0 && !(g->tasks[l].flags & RV_TF_REMOVED)) {
                int64_t dl = g->tasks[l].gap_dl_ns;
                rv_graph_remove_task(g, l);
                g->tasks[l].gap_ns = dl;
                g->tasks[l].gap_dl_ns = dl;
                launches++;
            }
        }
    }
    json_t *r = json_pack("{s:s, s:i, s:i, s:i, s:i}", "model", "restructure_batchnorm", "index",
                          o->index, "batchnorm_scaled", (json_int_t)nbn, "activations_removed",
                          (json_int_t)nrelu, "launches_removed", (json_int_t)launches);
    if (!r || json_array_append_new(applied, r))
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    return 0;
}
