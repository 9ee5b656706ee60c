/* The fitted cross-GPU efficiencies; see rv_keff.h. */
#include "cost/rv_keff.h"

#include <math.h>
#include <string.h>

#include "cost/rv_flops.h"

enum { KEFF_REACH = 2 };

int rv_keff_bucket(int cls, double flops, double bytes)
{
    int compute = cls == RV_FC_GEMM || cls == RV_FC_CONV || cls == RV_FC_ATTN;
    double v = compute ? flops : bytes;
    int b = v >= 1 ? (int)log2(v) : 0;
    return b < 0 ? 0 : b > 63 ? 63 : b;
}

const char *rv_keff_family(const rv_hw *hw)
{
    if (!hw || !hw->name)
        return NULL;
    static const struct {
        const char *prefix, *family;
    } fam[] = {
        {"V100", "V100"},   {"A100", "A100"},
        {"H100", "H100"},   {"H200", "H100"},   /* the H100's chip with more HBM */
        {"MI210", "MI210"}, {"MI250", "MI210"}, /* CDNA2: two MI210 dies */
    };
    for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++)
        if (strncmp(hw->name, fam[i].prefix, strlen(fam[i].prefix)) == 0)
            return fam[i].family;
    return NULL;
}

static double cell(const char *family, int cls, int bucket)
{
    for (unsigned i = 0; i < rv_keff_nrows; i++) {
        const rv_keff_row *r = &rv_keff_rows[i];
        if (r->cls == cls && r->bucket == bucket && strcmp(r->family, family) == 0)
            return r->eff;
    }
    return 0;
}

double rv_keff_eff(const rv_hw *hw, int cls, double flops, double bytes)
{
    const char *family = rv_keff_family(hw);
    if (!family || cls <= RV_FC_NONE || cls >= RV_FC_COUNT)
        return 0;
    int b = rv_keff_bucket(cls, flops, bytes);
    for (int d = 0; d <= KEFF_REACH; d++) {
        double e = cell(family, cls, b + d);
        if (e <= 0 && d > 0 && b - d >= 0)
            e = cell(family, cls, b - d);
        if (e > 0)
            return e;
    }
    return cell(family, cls, -1);
}

/* Modelled us of a kernel of roofline roof_us on hw from the floors: its
 * family's, else the mean of its vendor's families (t0 mean, e geometric
 * mean), else every family's. 0 when the class has none. */
static double floor_us(const rv_hw *hw, int cls, double roof_us)
{
    const char *family = rv_keff_family(hw);
    for (int pass = 0; pass < 3; pass++) {
        double t0 = 0, loge = 0;
        int n = 0;
        for (unsigned i = 0; i < rv_keff_nfloors; i++) {
            const rv_keff_floor *r = &rv_keff_floors[i];
            if (r->cls != cls || r->eff <= 0)
                continue;
            if (pass == 0 && (!family || strcmp(r->family, family) != 0))
                continue;
            if (pass == 1 && (!hw->vendor || strcmp(r->vendor, hw->vendor) != 0))
                continue;
            t0 += r->t0_us;
            loge += log(r->eff);
            n++;
        }
        if (n > 0)
            return t0 / n + roof_us / exp(loge / n);
    }
    return 0;
}

/* The row of dtype on hw; NULL when its share is the fp32 one. */
static const rv_keff_tc *tc_row(const rv_hw *hw, int dtype)
{
    /* Only a dtype with a faster path than fp32 has a share to lose. */
    if (!hw || dtype == RV_DT_FP32 || rv_hw_peak(hw, dtype) <= rv_hw_peak(hw, RV_DT_FP32))
        return NULL;
    /* Only the generation measured: Volta's, Ampere's and Hopper's tensor
     * cores differ, so a family without its own row keeps its fp32 share. */
    const char *family = rv_keff_family(hw);
    for (unsigned i = 0; family && i < rv_keff_ntcs; i++)
        if (rv_keff_tcs[i].dtype == dtype && strcmp(rv_keff_tcs[i].family, family) == 0)
            return rv_keff_tcs[i].kappa > 0 ? &rv_keff_tcs[i] : NULL;
    return NULL;
}

double rv_keff_tc_share(const rv_hw *hw, int dtype)
{
    const rv_keff_tc *r = tc_row(hw, dtype);
    return r ? r->kappa : 1;
}

double rv_keff_tc_share_at(const rv_hw *hw, int dtype, double flops)
{
    const rv_keff_tc *r = tc_row(hw, dtype);
    if (!r)
        return 1;
    if (r->p <= 0 || flops <= 0)
        return r->kappa;
    /* Saturating in log F towards the fp32 share: small kernels cannot fill
     * the tensor cores, large ones reach about what the fp32 path does. */
    return 1 / (1 + pow(10, r->p * (r->lg_f0 - log10(flops))));
}

double rv_keff_factor(const rv_hw *from, const rv_hw *to, int cls, int dtype_from, int dtype_to,
                      double flops, double bytes, double roof_from, double roof_to, int *how)
{
    double f = 1;
    int h = RV_KEFF_KEPT;
    if (roof_from > 0 && roof_to > 0 && rv_keff_family(from) != rv_keff_family(to)) {
        double a = rv_keff_eff(from, cls, flops, bytes), b = rv_keff_eff(to, cls, flops, bytes);
        if (a > 0 && b > 0) {
            f = a / b;
            h = RV_KEFF_FITTED;
        } else if (dtype_from == RV_DT_FP32 && dtype_to == RV_DT_FP32) {
            double ms = floor_us(from, cls, roof_from * 1e6), md = floor_us(to, cls, roof_to * 1e6);
            if (ms > 0 && md > 0) {
                f = (md / ms) / (roof_to / roof_from);
                h = RV_KEFF_ESTIMATED;
            }
        }
    }
    if (how)
        *how = h;
    return f;
}
