/* Host overheads of a trace (DLRM performance-model paper, section III-C,
 * Fig. 6) and their statistics.
 *
 * Definitions used here, per CPU thread (pid, tid):
 *   top-level op  a cpu_op not started inside an earlier top-level cpu_op on
 *                 the same thread (ops sorted by start, longer first);
 *   launch        a cuda_runtime / cuda_driver call whose correlation id is
 *                 also carried by a GPU task (kernel, memcpy, memset);
 *                 a launch belongs to the top-level op on its thread whose
 *                 [start, end] contains the launch's start.
 *   T1  start of a top-level op minus the end of the previous top-level op
 *       on the thread; keyed by the later op's name.
 *   T2  first launch start minus op start (ops with launches only).
 *   T3  op end minus the end of its last launch (clamped at 0).
 *   T4  duration of every launch; keyed by the runtime call's name.
 *   T5  start of a launch minus the end of the previous launch in the same
 *       op (clamped at 0); keyed by the op name.
 * The paper also subtracts a profiler cost (4 us GPU, 2 us CPU); we keep
 * the measured values and leave such corrections to the model that uses
 * them.
 *
 * Statistics: values outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR] are dropped, then
 * count, mean, population std, median and p90 are taken of the rest.
 * Quantiles interpolate linearly between order statistics (position
 * p * (n - 1), as numpy's default and PostgreSQL's percentile_cont), so
 * the store can compute the same figures in SQL. */
#ifndef RV_OVERHEAD_H
#define RV_OVERHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "util/rv_sketch.h"
#include "trace/rv_trace.h"

typedef enum rv_overhead_type {
    RV_OH_T1 = 1, /* between top-level ops */
    RV_OH_T2 = 2, /* op start to first launch */
    RV_OH_T3 = 3, /* last launch end to op end */
    RV_OH_T4 = 4, /* runtime call itself */
    RV_OH_T5 = 5, /* between launches of one op */
} rv_overhead_type;

#define RV_OH_NTYPES 5
/* Cap on samples per trace: a 64M-event trace cannot produce more. */
#define RV_OVERHEAD_MAX_SAMPLES (RV_TRACE_MAX_EVENTS * 2u)

typedef struct rv_overhead_sample {
    int64_t value_ns;
    uint32_t name; /* string id in the trace: op name, or call name for T4 */
    uint8_t type;  /* rv_overhead_type */
} rv_overhead_sample;

typedef struct rv_overhead_samples {
    rv_overhead_sample *v;
    size_t n, cap;
} rv_overhead_samples;

typedef struct rv_overhead_stat {
    size_t samples;                /* before outlier removal */
    size_t count;                  /* kept */
    double mean, std, median, p90; /* microseconds */
} rv_overhead_stat;

/* One row of a summary: a (type, name) group, or the type's overall group
 * when name is UINT32_MAX. */
typedef struct rv_overhead_group {
    uint8_t type;
    uint32_t name;
    rv_overhead_stat stat;
} rv_overhead_group;

#define RV_OH_OVERALL UINT32_MAX

/* Extracts every T1..T5 sample of t (borrowed) into *out (zeroed or
 * previously freed by the caller; owns its array afterwards; release with
 * rv_overhead_samples_free). Returns 0 or a negative rv_err. A trace without
 * CPU ops or launches yields no samples, which is not an error. */
int rv_overhead_extract(const rv_trace *t, rv_overhead_samples *out, rv_error *err);
void rv_overhead_samples_free(rv_overhead_samples *s);

/* Statistics of values[0..n) in microseconds; sorts values in place.
 * n == 0 gives an all-zero stat. */
void rv_overhead_stats(double *values, size_t n, rv_overhead_stat *out);

/* Groups samples by (type, name) and by type overall and computes each
 * group's statistics. *out is a new array (caller frees) sorted by type,
 * then overall first, then name id. Returns 0 or a negative rv_err. */
int rv_overhead_summarize(const rv_overhead_samples *s, rv_overhead_group **out, size_t *n,
                          rv_error *err);

/* One group's sketch (rv_sketch.h): the mergeable form of the statistics,
 * what the store keeps per trace and per platform. */
typedef struct rv_overhead_sketch_group {
    uint8_t type;
    uint32_t name; /* RV_OH_OVERALL = the type's overall group */
    rv_sketch sk;
} rv_overhead_sketch_group;

/* Groups samples as rv_overhead_summarize does (same order) and sketches
 * each group's values in microseconds: O(samples). *out is new; free with
 * rv_overhead_sketch_groups_free. */
int rv_overhead_sketch(const rv_overhead_samples *s, rv_overhead_sketch_group **out, size_t *n,
                       rv_error *err);
void rv_overhead_sketch_groups_free(rv_overhead_sketch_group *g, size_t n);

/* The statistics read from a sketch (rv_sketch_iqr): the sketch's form of
 * rv_overhead_stats, within the bounds in docs/models/overheads.md. */
void rv_overhead_stat_of_sketch(const rv_sketch *sk, rv_overhead_stat *out);

#endif
