/* Reports: iteration figures, breakdowns, top kernels, critical path, and
 * the simulated timeline, as plain data (jansson values or a Chrome trace).
 * Everything here reads a graph and its simulation; nothing changes them. */
#ifndef RV_REPORT_H
#define RV_REPORT_H

#include <stdio.h>

#include <jansson.h>

#include "graph/rv_graph.h"
#include "simulate/rv_sim.h"

#define RV_ITER_MEDIAN (-1)

/* A replay further off its measured step than this (the design's replay
 * target, 2%) makes every answer on it say so (the replay_error warning). */
#define RV_REPLAY_WARN_ERROR 0.02

/* Which part of the run a report covers, in simulated time. */
typedef struct rv_window {
    int64_t t0_ns, t1_ns; /* [t0, t1) */
    double per;           /* divide sums by this to get per-iteration figures */
    int32_t iter;         /* iteration index, -1 for "all"/"median" */
    int32_t end_thread;   /* CPU thread whose marker ends the window, -1 if none */
} rv_window;

/* Iteration figures for one simulation. iteration is a step number
 * (ProfilerStep#N) or RV_ITER_MEDIAN (the median of the steady steps,
 * rv_report_measured_steps). Fills *us with measured and simulated
 * iteration time in microseconds; returns 0 or RV_ERR_NOTFOUND when no step
 * has that number. Traces without steps count as one iteration: the span. */
typedef struct rv_iter_figures {
    double measured_us;
    double simulated_us;
    int32_t iter; /* index into g->iters, -1 when median or no steps */
} rv_iter_figures;
int rv_report_iteration(const rv_graph *g, const rv_sim *s, int64_t iteration, rv_iter_figures *out,
                        rv_error *err);

/* "Measured" means one thing everywhere (the answer's measured_us and
 * steps, the upload reply, the trace list): the median of the steady
 * steps, all but the first when there are three or more (it fills the
 * pipelines), the mean of the middle pair for an even count. The index of
 * the first steady step: */
size_t rv_report_first_steady(const rv_graph *g);
/* The measured durations (us) of the steady steps into out (g->niters
 * entries); returns how many. */
size_t rv_report_measured_steps(const rv_graph *g, double *out);

/* Baseline and what-if figures together. For one step, both come from
 * that step. For the median, the prediction is the baseline median scaled
 * by the ratio of the simulated spans of the steady steps (all but the
 * first when there are three or more): step boundaries are CPU positions,
 * and when the CPU runs ahead of a changed GPU single steps stretch or
 * shrink while their sum stays right. pg/ps may equal bg/bs. */
int rv_report_compare(const rv_graph *bg, const rv_sim *bs, const rv_graph *pg, const rv_sim *ps,
                      int64_t iteration, rv_iter_figures *base, rv_iter_figures *pred,
                      rv_error *err);

/* The measured figures of a trace as the simulator sees them: its steps
 * (ProfilerStep#N, else optimizer markers) and their median duration, else
 * the span of its tasks. Traces the graph refuses (no GPU work) fall back
 * to the span of all events with no steps. For stores and listings. */
typedef struct rv_trace_figures {
    int iterations;
    double measured_us;
} rv_trace_figures;
void rv_report_trace_figures(const rv_trace *t, rv_trace_figures *out);

/* The window matching rv_report_iteration's choice: one step; for the
 * median, the steady steps (from the completion of the first to that of
 * the last, per = steps - 1; all steps when there are fewer than three);
 * or the whole run when there are no steps. */
rv_window rv_report_window(const rv_graph *g, const rv_sim *s, int32_t iter_index);

/* New JSON objects (caller owns the reference). */
json_t *rv_report_breakdown(const rv_graph *g, const rv_sim *s, const rv_window *w);
json_t *rv_report_top_kernels(const rv_graph *g, const rv_sim *s, const rv_window *w, int k);
json_t *rv_report_critical_path(const rv_graph *g, const rv_sim *s, const rv_window *w,
                                int max_stretches);
/* Per-iteration list: [{step, measured_us, simulated_us}, ...]. */
json_t *rv_report_iterations(const rv_graph *g, const rv_sim *s);

/* Writes the simulated timeline of [w->t0, w->t1) (all when w is NULL) as
 * Chrome-trace JSON that Perfetto opens. Returns 0 or RV_ERR_IO. */
int rv_report_timeline_chrome(const rv_graph *g, const rv_sim *s, const rv_window *w, FILE *f);
/* The number of task events rv_report_timeline_chrome writes for w, so a
 * caller can bound an answer before writing it. */
size_t rv_report_timeline_count(const rv_graph *g, const rv_sim *s, const rv_window *w);

/* Marks the tasks on the critical path ending at the window's end; out has
 * g->ntasks bytes. Returns the number of tasks marked. */
size_t rv_report_critical_tasks(const rv_graph *g, const rv_sim *s, const rv_window *w,
                                uint8_t *out);

#endif
