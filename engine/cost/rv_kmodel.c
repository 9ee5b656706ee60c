/* Kernel models: roofline times divided by fitted per-class efficiencies;
 * see rv_kmodel.h and docs/models/kernels.md. */
#include "cost/rv_kmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_keff.h"
#include "trace/rv_kname.h"
#include "util/rv_sort.h"

static int compute_class(int cls)
{
    return cls == RV_FC_GEMM || cls == RV_FC_CONV || cls == RV_FC_ATTN;
}

int rv_kmodel_dtype(const rv_hw *hw, int ptype, int cls, int tf32)
{
    switch (ptype) {
    case RV_PT_FP16: return RV_DT_FP16;
    case RV_PT_BF16: return RV_DT_BF16;
    case RV_PT_FP8: return RV_DT_FP8;
    default:
        /* fp32 and unknown inputs. */
        if (tf32 && compute_class(cls) && hw && hw->tflops[RV_DT_TF32] > 0)
            return RV_DT_TF32;
        return RV_DT_FP32;
    }
}

double rv_kmodel_roofline_s(const rv_hw *hw, int dtype, double flops, double bytes)
{
    double peak = rv_hw_peak(hw, dtype) * 1e12;
    double bw = (hw && hw->hbm_gbps > 0 ? hw->hbm_gbps : 0) * 1e9;
    if (peak <= 0 || bw <= 0)
        return 0;
    double a = flops / peak, b = bytes / bw;
    return a > b ? a : b;
}

double rv_kmodel_move_roofline_s(const rv_hw *hw, int dtype, double flops, double bytes)
{
    return rv_kmodel_roofline_share_s(hw, dtype, rv_keff_tc_share_at(hw, dtype, flops), flops,
                                      bytes);
}

double rv_kmodel_roofline_share_s(const rv_hw *hw, int dtype, double kappa, double flops,
                                  double bytes)
{
    double peak = rv_hw_peak(hw, dtype) * kappa * 1e12;
    double fp32 = rv_hw_peak(hw, RV_DT_FP32) * 1e12;
    double bw = (hw && hw->hbm_gbps > 0 ? hw->hbm_gbps : 0) * 1e9;
    /* A library falls back to the fp32 path rather than run slower. */
    if (peak < fp32)
        peak = fp32;
    if (peak <= 0 || bw <= 0)
        return 0;
    double a = flops / peak, b = bytes / bw;
    return a > b ? a : b;
}

/* L2 size and read bandwidth per clock, where NVIDIA's whitepapers give
 * both: V100 6 MB and 2048 B/clk, A100 40 MB and 5120 B/clk (the A100
 * whitepaper compares the two). Other GPUs: no L2 term. */
static int l2_of(const rv_hw *hw, double *bytes, double *bps)
{
    static const struct {
        const char *prefix;
        double mb, per_clk;
    } tab[] = {{"V100", 6, 2048}, {"A100", 40, 5120}};
    for (size_t i = 0; hw && hw->name && i < sizeof(tab) / sizeof(tab[0]); i++)
        if (!strncmp(hw->name, tab[i].prefix, strlen(tab[i].prefix))) {
            *bytes = tab[i].mb * 1024 * 1024;
            *bps = tab[i].per_clk * hw->max_sm_mhz * 1e6;
            return 1;
        }
    return 0;
}

double rv_kmodel_embed_l2_hit(const rv_hw *hw, double table_bytes)
{
    double l2, bps;
    if (table_bytes <= 0 || !l2_of(hw, &l2, &bps))
        return 0;
    return l2 >= table_bytes ? 1 : l2 / table_bytes;
}

/* The roofline of task i: for an embedding task the gathered rows that
 * hit in L2 move at L2 bandwidth, the rest at HBM's (the DLRM paper's
 * embedding lookup model, docs/models/kernels.md). */
static double roofline_ev(const rv_hw *hw, int dtype, const rv_flops_trace *f, size_t i)
{
    double r = rv_kmodel_roofline_s(hw, dtype, f->flops[i], f->bytes[i]);
    const rv_flops_embed *x = f->cls[i] == RV_FC_EMBED ? rv_flops_embed_of(f, (int32_t)i) : NULL;
    double l2, bps;
    if (!x || r <= 0 || !l2_of(hw, &l2, &bps))
        return r;
    double p = rv_kmodel_embed_l2_hit(hw, x->table_bytes), hit = p * x->gather;
    double mem = (f->bytes[i] - hit) / (hw->hbm_gbps * 1e9) + hit / bps;
    double cmp = f->flops[i] / (rv_hw_peak(hw, dtype) * 1e12);
    return cmp > mem ? cmp : mem;
}

/* Size bucket: log2 of FLOPs for compute classes, of bytes otherwise. */
static int bucket(int cls, double flops, double bytes)
{
    double v = compute_class(cls) ? flops : bytes;
    int b = v >= 1 ? (int)log2(v) : 0;
    return b < 0 ? 0 : b >= RV_KMODEL_BUCKETS ? RV_KMODEL_BUCKETS - 1 : b;
}

/* Whether task i is a costed kernel the models speak for. */
static int usable(const rv_trace *t, const rv_flops_trace *f, size_t i)
{
    const rv_event *e = &t->events[i];
    return e->cat == RV_CAT_KERNEL && f->cls[i] != RV_FC_NONE && e->dur_ns > 0 &&
           (f->flops[i] > 0 || f->bytes[i] > 0);
}

int rv_kmodel_tf32_default(int cls, int was_tf32)
{
    return was_tf32 || cls == RV_FC_CONV;
}

double rv_kmodel_keep_eff_s(double roof0, double roof1, double t_s)
{
    return roof0 > 0 && roof1 > 0 ? t_s * roof1 / roof0 : 0;
}

double rv_kmodel_event_eff(const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw, size_t i,
                           int *cls, int *bucket_out)
{
    if (!usable(t, f, i))
        return 0;
    int c = f->cls[i];
    int dt = rv_kmodel_dtype(hw, f->ptype[i], c, 1);
    double roof = roofline_ev(hw, dt, f, i);
    if (roof <= 0)
        return 0;
    *cls = c;
    *bucket_out = bucket(c, f->flops[i], f->bytes[i]);
    return roof / ((double)t->events[i].dur_ns * 1e-9);
}

/* ptype < 0: every costed task. */
static void fit(rv_kmodel *m, const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw,
                size_t mod, size_t rem, int ptype)
{
    memset(m, 0, sizeof(*m));
    m->hw = hw;
    if (!hw || mod == 0)
        return;
    size_t n = 0;
    for (size_t i = 0; i < t->nevents; i++)
        n += usable(t, f, i);
    double *v = malloc((n + 1) * sizeof(*v));
    int *key = malloc((n + 1) * sizeof(*key));
    double *e = malloc((n + 1) * sizeof(*e));
    if (!v || !key || !e)
        goto out;
    size_t k = 0;
    for (size_t i = 0, j = 0; i < t->nevents; i++) {
        if (!usable(t, f, i) || (ptype >= 0 && f->ptype[i] != ptype))
            continue;
        if (j++ % mod != rem)
            continue;
        int cls = 0, b = 0;
        e[k] = rv_kmodel_event_eff(t, f, hw, i, &cls, &b);
        if (e[k] <= 0)
            continue;
        key[k] = cls * RV_KMODEL_BUCKETS + b;
        k++;
    }
    for (int cls = 1; cls < RV_FC_COUNT; cls++) {
        size_t c = 0;
        for (size_t i = 0; i < k; i++)
            if (key[i] / RV_KMODEL_BUCKETS == cls)
                v[c++] = e[i];
        m->n[cls] = c;
        m->cls_eff[cls] = rv_sort_median(v, c);
        for (int b = 0; b < RV_KMODEL_BUCKETS; b++) {
            c = 0;
            for (size_t i = 0; i < k; i++)
                if (key[i] == cls * RV_KMODEL_BUCKETS + b)
                    v[c++] = e[i];
            m->eff[cls][b] = rv_sort_median(v, c);
        }
    }
out:
    free(v);
    free(key);
    free(e);
}

void rv_kmodel_fit(rv_kmodel *m, const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw,
                   size_t mod, size_t rem)
{
    fit(m, t, f, hw, mod, rem, -1);
}

void rv_kmodel_fit_ptype(rv_kmodel *m, const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw,
                         int ptype)
{
    fit(m, t, f, hw, 1, 0, ptype);
}

/* Predicted seconds of task i of t on the fitted GPU. */
static double predict_ev(const rv_kmodel *m, const rv_flops_trace *f, size_t i)
{
    int cls = f->cls[i];
    double eff = m->eff[cls][bucket(cls, f->flops[i], f->bytes[i])];
    if (eff <= 0)
        eff = m->cls_eff[cls];
    if (eff <= 0)
        return 0;
    return roofline_ev(m->hw, rv_kmodel_dtype(m->hw, f->ptype[i], cls, 1), f, i) / eff;
}

double rv_kmodel_predict_s(const rv_kmodel *m, const rv_hw *hw, int cls, int ptype, double flops,
                           double bytes, int tf32)
{
    if (cls <= RV_FC_NONE || cls >= RV_FC_COUNT)
        return 0;
    double eff = m->eff[cls][bucket(cls, flops, bytes)];
    if (eff <= 0)
        eff = m->cls_eff[cls];
    if (eff <= 0)
        return 0;
    double roof = rv_kmodel_roofline_s(hw, rv_kmodel_dtype(hw, ptype, cls, tf32), flops, bytes);
    return roof / eff;
}

double rv_kmodel_near_eff(const rv_kmodel *m, int cls, double flops, double bytes, int reach)
{
    if (cls <= RV_FC_NONE || cls >= RV_FC_COUNT)
        return 0;
    int b = bucket(cls, flops, bytes);
    /* Outward from the size's bucket, the larger first on a tie. */
    for (int d = 0; d <= reach && d < RV_KMODEL_BUCKETS; d++) {
        if (b + d < RV_KMODEL_BUCKETS && m->eff[cls][b + d] > 0)
            return m->eff[cls][b + d];
        if (b - d >= 0 && m->eff[cls][b - d] > 0)
            return m->eff[cls][b - d];
    }
    return 0;
}

double rv_kmodel_bucket_eff(const rv_kmodel *m, int cls, double flops, double bytes)
{
    return rv_kmodel_near_eff(m, cls, flops, bytes, 0);
}

double rv_kmodel_nearest_eff(const rv_kmodel *m, int cls, double flops, double bytes)
{
    /* Past the largest kernels measured, efficiency stays at theirs rather
     * than falling back to the kernel's own, which would make a larger size
     * less efficient than a smaller one. */
    return rv_kmodel_near_eff(m, cls, flops, bytes, RV_KMODEL_BUCKETS);
}

void rv_kmodel_error(const rv_kmodel *m, const rv_trace *t, const rv_flops_trace *f, size_t mod,
                     size_t rem, double gm[RV_FC_COUNT], size_t count[RV_FC_COUNT])
{
    double logsum[RV_FC_COUNT] = {0};
    memset(count, 0, RV_FC_COUNT * sizeof(*count));
    for (size_t i = 0, j = 0; i < t->nevents; i++) {
        if (!usable(t, f, i))
            continue;
        if (mod == 0 || j++ % mod != rem)
            continue;
        int cls = f->cls[i];
        double p = predict_ev(m, f, i);
        if (p <= 0)
            continue;
        double meas = (double)t->events[i].dur_ns * 1e-9, rel = fabs(p - meas) / meas;
        logsum[cls] += log(rel > 1e-4 ? rel : 1e-4);
        count[cls]++;
    }
    for (int c = 0; c < RV_FC_COUNT; c++)
        gm[c] = count[c] ? exp(logsum[c] / (double)count[c]) : 0;
}

double rv_kmodel_rescale_s(const rv_hw *from, const rv_hw *to, int cls, int ptype, double flops,
                           double bytes, double t_s, int tf32_to)
{
    if (!from || !to || from->hbm_gbps <= 0 || to->hbm_gbps <= 0)
        return t_s;
    if (cls > RV_FC_NONE && cls < RV_FC_COUNT && (flops > 0 || bytes > 0)) {
        double a =
            rv_kmodel_move_roofline_s(from, rv_kmodel_dtype(from, ptype, cls, 0), flops, bytes);
        double b =
            rv_kmodel_move_roofline_s(to, rv_kmodel_dtype(to, ptype, cls, tf32_to), flops, bytes);
        if (a > 0 && b > 0)
            return t_s * b / a;
    }
    return t_s * from->hbm_gbps / to->hbm_gbps;
}
