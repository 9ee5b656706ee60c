/* Trace diff (HTA's trace diff, TraceLens's compare): two runs, each a
 * graph, its simulation and a window, compared per iteration by CPU op
 * (the task's outermost framework op), by kernel class and by kernel name:
 * counts and time per iteration on each side, the change, and whether a
 * name appeared, vanished or changed. Rows are ordered by impact (|delta|).
 * The two runs may be two traces or a trace's baseline and its prediction
 * under a what-if. docs/internals/diff.md says what is compared and how. */
#ifndef RV_DIFF_H
#define RV_DIFF_H

#include <stddef.h>

#include <jansson.h>

#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "simulate/rv_report.h"
#include "graph/rv_select.h"
#include "simulate/rv_sim.h"

/* Rows the renderer lists per table at most (--top, ?top=). */
#define RV_DIFF_TOP_DEFAULT 20
#define RV_DIFF_TOP_MAX     1000
/* The op of tasks outside every framework op. */
#define RV_DIFF_NO_OP "(no op)"

/* One side: all borrowed; they must outlive the call to rv_diff_compute
 * only (the result copies what it keeps). w is the window the figures
 * cover (rv_report_window or rv_run_result's base_win/pred_win); w->per
 * turns sums into per-iteration figures. */
typedef struct rv_diff_side {
    const rv_graph *g;
    const rv_sim *s;
    rv_window w;
    double iteration_us; /* simulated iteration time (rv_report_iteration) */
    double measured_us;  /* measured iteration time; 0 (rendered null) for a prediction */
} rv_diff_side;

typedef enum rv_diff_status {
    RV_DIFF_SAME = 0,
    RV_DIFF_CHANGED,
    RV_DIFF_APPEARED, /* only in B */
    RV_DIFF_VANISHED, /* only in A */
} rv_diff_status;

/* One name compared; every figure is per iteration. For ops, time is the
 * host time (runtime calls and the untraced CPU time after them) plus the
 * GPU time of the kernels launched inside the op; count is how many times
 * the op was entered on its CPU thread. For kernels and classes, time is
 * GPU time and count the launches. */
typedef struct rv_diff_row {
    char *name; /* owned */
    double count_a, count_b;
    double time_us_a, time_us_b;
    double cpu_us_a, cpu_us_b; /* ops only */
    double gpu_us_a, gpu_us_b; /* ops only */
    double delta_us;           /* time_us_b - time_us_a */
    int status;                /* rv_diff_status */
} rv_diff_row;

typedef struct rv_diff {
    double iteration_us_a, iteration_us_b;
    double measured_us_a, measured_us_b;
    double iterations_a, iterations_b; /* the windows' per */
    rv_diff_row *ops;                  /* owned, by |delta_us| descending */
    size_t nops;
    rv_diff_row *kernels; /* owned, by |delta_us| descending */
    size_t nkernels;
    rv_diff_row classes[RV_KC_COUNT]; /* by rv_kclass; names static, not owned */
} rv_diff;

/* A trace's baseline over its median window (g and s borrowed). 0, or
 * the error of rv_report_iteration. */
int rv_diff_side_baseline(const rv_graph *g, const rv_sim *s, rv_diff_side *out, rv_error *err);

/* The two sides of a what-if: its baseline and its prediction (r
 * borrowed; run with keep_predicted for the prediction's own graph). */
struct rv_run_result;
void rv_diff_sides_of_run(const struct rv_run_result *r, rv_diff_side *a, rv_diff_side *b);

/* Compares a and b (borrowed). Returns 0 and *out (new; rv_diff_free), or
 * RV_ERR_NOMEM / RV_ERR_INVALID (a side without graph or simulation). */
int rv_diff_compute(const rv_diff_side *a, const rv_diff_side *b, rv_diff **out, rv_error *err);

/* NULL-safe. */
void rv_diff_free(rv_diff *d);

/* The diff as JSON (new reference; NULL on OOM): {a, b, delta_us, ops,
 * kernel_classes, kernels}, the op and kernel tables cut to their top rows
 * (top clamped to [1, RV_DIFF_TOP_MAX]). label_a/label_b (borrowed, may be
 * NULL) name the sides. "warnings" says what the comparison rests on: the
 * what-if's warnings when run (borrowed) is its rv_run result, and a side
 * whose replay error is over 2%. */
json_t *rv_diff_render(const rv_diff *d, int top, const char *label_a, const char *label_b,
                       const struct rv_run_result *run);

/* Its name in JSON: "same", "changed", "appeared", "vanished". */
const char *rv_diff_status_name(int status);

#endif
