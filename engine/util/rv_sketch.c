/* Relative-error histogram sketch. See rv_sketch.h. */
#include "util/rv_sketch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ln(gamma); a constant so that every sketch maps values the same way. */
static double ln_gamma(void)
{
    return log((1.0 + RV_SKETCH_ALPHA) / (1.0 - RV_SKETCH_ALPHA));
}

void rv_sketch_free(rv_sketch *s)
{
    if (!s)
        return;
    free(s->bins);
    memset(s, 0, sizeof(*s));
}

int rv_sketch_key(double v)
{
    double k = ceil(log(v) / ln_gamma());
    if (!(k > RV_SKETCH_KMIN)) /* also NaN */
        return RV_SKETCH_KMIN;
    return k > RV_SKETCH_KMAX ? RV_SKETCH_KMAX : (int)k;
}

double rv_sketch_value(int key)
{
    double g = (1.0 + RV_SKETCH_ALPHA) / (1.0 - RV_SKETCH_ALPHA);
    return 2.0 * exp((double)key * ln_gamma()) / (g + 1.0);
}

/* Makes bins cover key; bounded by the fixed key range. */
static int cover(rv_sketch *s, int key)
{
    if (s->nbins && key >= s->lo && key < s->lo + (int32_t)s->nbins)
        return 0;
    int32_t lo = s->nbins && s->lo < key ? s->lo : key;
    int32_t hi =
        s->nbins && s->lo + (int32_t)s->nbins - 1 > key ? s->lo + (int32_t)s->nbins - 1 : key;
    uint32_t n = (uint32_t)(hi - lo + 1);
    uint64_t *b = calloc(n, sizeof(*b));
    if (!b)
        return RV_ERR_NOMEM;
    if (s->nbins)
        memcpy(b + (s->lo - lo), s->bins, s->nbins * sizeof(*b));
    free(s->bins);
    s->bins = b;
    s->lo = lo;
    s->nbins = n;
    return 0;
}

int rv_sketch_add_bucket(rv_sketch *s, int key, uint64_t count)
{
    if (key < RV_SKETCH_KMIN)
        key = RV_SKETCH_KMIN;
    if (key > RV_SKETCH_KMAX)
        key = RV_SKETCH_KMAX;
    if (cover(s, key))
        return RV_ERR_NOMEM;
    s->bins[key - s->lo] += count;
    return 0;
}

int rv_sketch_add(rv_sketch *s, double v)
{
    if (v >= RV_SKETCH_MIN) {
        if (rv_sketch_add_bucket(s, rv_sketch_key(v), 1))
            return RV_ERR_NOMEM;
    } else {
        s->zeros++;
    }
    if (!s->n || v < s->min)
        s->min = v;
    if (!s->n || v > s->max)
        s->max = v;
    s->n++;
    s->sum += v;
    s->sumsq += v * v;
    return 0;
}

int rv_sketch_merge(rv_sketch *dst, const rv_sketch *src)
{
    if (!src->n && !rv_sketch_total(src))
        return 0;
    if (src->nbins) {
        if (cover(dst, src->lo) || cover(dst, src->lo + (int32_t)src->nbins - 1))
            return RV_ERR_NOMEM;
        for (uint32_t i = 0; i < src->nbins; i++)
            dst->bins[src->lo - dst->lo + (int32_t)i] += src->bins[i];
    }
    if (!dst->n || src->min < dst->min)
        dst->min = src->min;
    if (!dst->n || src->max > dst->max)
        dst->max = src->max;
    dst->n += src->n;
    dst->zeros += src->zeros;
    dst->sum += src->sum;
    dst->sumsq += src->sumsq;
    return 0;
}

uint64_t rv_sketch_total(const rv_sketch *s)
{
    uint64_t t = s->zeros;
    for (uint32_t i = 0; i < s->nbins; i++)
        t += s->bins[i];
    return t;
}

/* The cells the IQR rule keeps: the zero bucket when with_zero, and the
 * keys ka..kb (inclusive). */
typedef struct range {
    int with_zero;
    int32_t ka, kb;
} range;

static uint64_t range_count(const rv_sketch *s, const range *r)
{
    uint64_t t = r->with_zero ? s->zeros : 0;
    for (uint32_t i = 0; i < s->nbins; i++) {
        int32_t k = s->lo + (int32_t)i;
        if (k >= r->ka && k <= r->kb)
            t += s->bins[i];
    }
    return t;
}

/* Representative value of the value of 0-based rank rank among the cells
 * of r; rank < range_count. */
static double rank_value(const rv_sketch *s, const range *r, uint64_t rank)
{
    uint64_t seen = r->with_zero ? s->zeros : 0;
    if (rank < seen)
        return 0.0;
    double last = 0.0;
    for (uint32_t i = 0; i < s->nbins; i++) {
        int32_t k = s->lo + (int32_t)i;
        if (k < r->ka || k > r->kb || !s->bins[i])
            continue;
        last = rv_sketch_value(k);
        seen += s->bins[i];
        if (rank < seen)
            return last;
    }
    return last;
}

/* Interpolated quantile over the cells of r, as rv_overhead.c's quantile
 * does over sorted values. */
static double range_quantile(const rv_sketch *s, const range *r, uint64_t m, double p)
{
    if (!m)
        return 0.0;
    double pos = p * (double)(m - 1);
    double fl = floor(pos), ce = ceil(pos);
    double lo = rank_value(s, r, (uint64_t)fl), hi = rank_value(s, r, (uint64_t)ce);
    return lo + (hi - lo) * (pos - fl);
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static const range all_cells = {1, RV_SKETCH_KMIN, RV_SKETCH_KMAX};

double rv_sketch_quantile(const rv_sketch *s, double p)
{
    uint64_t m = rv_sketch_total(s);
    if (!m)
        return 0.0;
    double q = range_quantile(s, &all_cells, m, p);
    return s->n ? clampd(q, s->min, s->max) : q;
}

/* Lowest and highest non-empty cell's representative value. */
static void rep_span(const rv_sketch *s, double *lo, double *hi)
{
    int32_t a = -1, b = -1;
    for (uint32_t i = 0; i < s->nbins; i++)
        if (s->bins[i]) {
            if (a < 0)
                a = (int32_t)i;
            b = (int32_t)i;
        }
    *lo = s->zeros || a < 0 ? 0.0 : rv_sketch_value(s->lo + a);
    *hi = b < 0 ? 0.0 : rv_sketch_value(s->lo + b);
}

void rv_sketch_iqr(const rv_sketch *s, rv_sketch_stat *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t m = rv_sketch_total(s);
    out->samples = s->n ? s->n : m;
    if (!m)
        return;
    /* The rule runs on the representative values, unclamped, so that a
     * bucket and the fences computed from it compare consistently (all
     * values equal: Q1 = Q3 = that bucket's value, which is kept). */
    double q1 = range_quantile(s, &all_cells, m, 0.25), q3 = range_quantile(s, &all_cells, m, 0.75);
    double lo = q1 - 1.5 * (q3 - q1), hi = q3 + 1.5 * (q3 - q1);
    double rlo, rhi;
    rep_span(s, &rlo, &rhi);
    double vmin = s->n ? s->min : rlo, vmax = s->n ? s->max : rhi;
    if (s->n && rlo >= lo && rhi <= hi) {
        /* Nothing is dropped: the moments are exact. */
        double mean = s->sum / (double)s->n;
        double var = s->sumsq / (double)s->n - mean * mean;
        out->count = s->n;
        out->mean = mean;
        out->std = var > 0 ? sqrt(var) : 0.0;
        out->p25 = clampd(q1, vmin, vmax);
        out->median = rv_sketch_quantile(s, 0.5);
        out->p75 = clampd(q3, vmin, vmax);
        out->p90 = rv_sketch_quantile(s, 0.9);
        return;
    }
    /* Keep the buckets whose representative lies inside the fences: a
     * bucket straddling a fence is kept or dropped whole. */
    range r;
    r.with_zero = lo <= 0.0;
    r.ka = RV_SKETCH_KMAX + 1;
    r.kb = RV_SKETCH_KMIN - 1;
    for (uint32_t i = 0; i < s->nbins; i++) {
        int32_t k = s->lo + (int32_t)i;
        double v = rv_sketch_value(k);
        if (v >= lo && v <= hi) {
            if (k < r.ka)
                r.ka = k;
            if (k > r.kb)
                r.kb = k;
        }
    }
    uint64_t kept = range_count(s, &r);
    out->count = kept;
    if (!kept)
        return;
    double sum = 0, ss = 0;
    for (uint32_t i = 0; i < s->nbins; i++) {
        int32_t k = s->lo + (int32_t)i;
        if (k < r.ka || k > r.kb || !s->bins[i])
            continue;
        sum += (double)s->bins[i] * rv_sketch_value(k);
    }
    double mean = sum / (double)kept;
    if (r.with_zero)
        ss += (double)s->zeros * mean * mean;
    for (uint32_t i = 0; i < s->nbins; i++) {
        int32_t k = s->lo + (int32_t)i;
        if (k < r.ka || k > r.kb || !s->bins[i])
            continue;
        double d = rv_sketch_value(k) - mean;
        ss += (double)s->bins[i] * d * d;
    }
    out->mean = clampd(mean, vmin, vmax);
    out->std = sqrt(ss / (double)kept);
    out->p25 = clampd(range_quantile(s, &r, kept, 0.25), vmin, vmax);
    out->median = clampd(range_quantile(s, &r, kept, 0.5), vmin, vmax);
    out->p75 = clampd(range_quantile(s, &r, kept, 0.75), vmin, vmax);
    out->p90 = clampd(range_quantile(s, &r, kept, 0.9), vmin, vmax);
}
