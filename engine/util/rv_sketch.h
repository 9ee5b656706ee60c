/* A mergeable summary of non-negative values (host overheads in
 * microseconds): count, sum, sum of squares, min, max and a histogram of
 * relative-error buckets (DDSketch: Masson, Rim, Lee, VLDB 2019).
 *
 * Bucket k holds the values in (gamma^(k-1), gamma^k] with
 * gamma = (1 + a) / (1 - a), a = RV_SKETCH_ALPHA; its representative value
 * 2 gamma^k / (gamma + 1) is within a (relative) of every value in it, so a
 * quantile read from the sketch is within a of a value of the right rank.
 * Values below RV_SKETCH_MIN (less than a nanosecond, after the extractor's
 * clamping at 0) go to a zero bucket represented by 0; keys are clamped to
 * [RV_SKETCH_KMIN, RV_SKETCH_KMAX] (1000 s). Merging adds bucket counts, so
 * it is exact, associative and commutative, and a sketch of a union is
 * the merge of the parts' sketches. The bucket mapping is fixed (a
 * constant), so the store can keep sketches as arrays of (key, count) and
 * merge them in SQL (migrations/0004_overhead_sketches.up.sql). */
#ifndef RV_SKETCH_H
#define RV_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

#define RV_SKETCH_ALPHA 0.01
#define RV_SKETCH_MIN   0.0005 /* microseconds */
#define RV_SKETCH_KMIN  (-381)
#define RV_SKETCH_KMAX  1100

typedef struct rv_sketch {
    uint64_t n;     /* values added */
    uint64_t zeros; /* values below RV_SKETCH_MIN */
    double sum, sumsq, min, max;
    int32_t lo;     /* key of bins[0] */
    uint32_t nbins; /* bins allocated */
    uint64_t *bins; /* counts of keys lo .. lo + nbins - 1 */
} rv_sketch;

/* What the IQR rule keeps of a sketch (see rv_sketch_iqr). */
typedef struct rv_sketch_stat {
    uint64_t samples; /* before outlier removal */
    uint64_t count;   /* kept */
    double mean, std, p25, median, p75, p90;
} rv_sketch_stat;

#define RV_SKETCH_INIT                                                                             \
    {                                                                                              \
        0, 0, 0, 0, 0, 0, 0, 0, NULL                                                               \
    }

/* Empties s (its memory is freed; s stays usable). NULL-safe. */
void rv_sketch_free(rv_sketch *s);
/* Key of a value and representative value of a key. */
int rv_sketch_key(double v);
double rv_sketch_value(int key);
/* Adds value v. 0 or RV_ERR_NOMEM (s unchanged then). */
int rv_sketch_add(rv_sketch *s, double v);
/* Adds count values to bucket key (deserialization): the moments are not
 * touched, set them from the stored figures. 0 or RV_ERR_NOMEM. */
int rv_sketch_add_bucket(rv_sketch *s, int key, uint64_t count);
/* dst += src (src borrowed). 0 or RV_ERR_NOMEM (dst unchanged then). */
int rv_sketch_merge(rv_sketch *dst, const rv_sketch *src);
/* Values in the histogram (zeros included); equals n for a consistent
 * sketch. */
uint64_t rv_sketch_total(const rv_sketch *s);
/* The p-quantile (0..1) by linear interpolation at rank p * (n - 1)
 * between representative values, clamped to [min, max]; 0 when empty. */
double rv_sketch_quantile(const rv_sketch *s, double p);
/* The IQR rule read from the sketch: values whose bucket representative is
 * outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR] are dropped, then count, mean,
 * population std and quantiles are taken of the kept buckets. When nothing
 * is dropped (min and max inside the fences) count, mean and std are the
 * exact ones from the moments. */
void rv_sketch_iqr(const rv_sketch *s, rv_sketch_stat *out);

#endif
