/* One what-if run: a loaded trace (graph + baseline simulation) and a
 * parsed what-if in, a typed result out; and the one renderer that turns
 * that result into the JSON the CLI, the API, sweep rows and the dashboard
 * show. Every caller that answers "what if?" goes through here, so a figure
 * or a warning added once appears everywhere. */
#ifndef RV_RUN_H
#define RV_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"
#include "util/rv_stop.h"
#include "whatif/rv_whatif.h"

/* Defaults shared by every caller. */
#define RV_RUN_TOP_KERNELS  10
#define RV_RUN_CRITICAL_MAX 20
#define RV_RUN_MAX_WARNINGS 32
/* A GPU-side change that moves the step less than this (relative) on a
 * CPU- or input-bound path warns cpu_bound / input_bound. */
#define RV_RUN_BOUND_MOVE 0.05

typedef struct rv_run_opts {
    int64_t iteration;  /* step number (ProfilerStep#N) or RV_ITER_MEDIAN */
    int top_kernels;    /* 0: RV_RUN_TOP_KERNELS */
    int critical_max;   /* 0: RV_RUN_CRITICAL_MAX */
    unsigned budget_ms; /* 0: none; past it the run fails with RV_ERR_BUDGET */
    /* Stopping a run in progress (rv_stop.h): checked between models,
     * every RV_STOP_EVERY simulated tasks and between reports; a run past
     * either or cancelled fails with RV_ERR_BUDGET. */
    int64_t deadline_ms;         /* absolute CLOCK_MONOTONIC ms; 0: none; the earlier of it
                                    and budget_ms counts */
    const volatile int *cancel;  /* borrowed; non-zero: stop (e.g. the server drains) */
    int (*cancel_fn)(void *arg); /* non-zero: stop (e.g. the client went away); NULL: none */
    void *cancel_arg;
    int keep_predicted; /* keep the predicted graph and simulation (timelines) */
    /* Only what rv_run_summary holds (a fleet row): iteration figures,
     * energy and warnings; no breakdowns, top kernels, critical path or
     * per-iteration list, and the result cannot be rendered. */
    int summary_only;
} rv_run_opts;

/* The figures a fleet row or a sweep row shows, and what the what-if cache
 * keeps beside the rendered bytes. Energies are per iteration; 0 with
 * have_energy 0 when the GPU is unknown. */
typedef struct rv_run_summary {
    /* measured_us is the median of the steady steps, as in the answer's
     * steps.median_us; 0 (rendered null, with replay_error) when the trace
     * was modelled, not measured. */
    double measured_us, baseline_us, predicted_us, speedup, replay_error;
    int have_energy;
    double baseline_energy_j, energy_j;
    int warnings; /* how many warnings the answer carries */
} rv_run_summary;

/* What an answer rests on: a stable code and one sentence. */
typedef struct rv_warning {
    char code[40];
    char message[240];
} rv_warning;

/* The measured steps behind the median (warm-up left out). */
typedef struct rv_step_stats {
    size_t count;
    double min_us, median_us, max_us;
    int bimodal; /* two groups far apart: the median matches no real step */
    size_t low_count, high_count;
    double low_median_us, high_median_us;
} rv_step_stats;

typedef struct rv_run_result {
    rv_run_summary sum;
    /* The trace as simulated. */
    const rv_graph *graph; /* borrowed from the input */
    const rv_sim *base;    /* borrowed from the input */
    size_t tasks, edges, iterations;
    int64_t step; /* the reported step number; -1 median, -2 whole trace */
    rv_iter_figures base_fig, pred_fig;
    rv_window base_win, pred_win;
    rv_energy base_energy, pred_energy; /* zero when !sum.have_energy */
    double launch_latency_us, gpu_queue_gap_us;
    size_t uncorrelated_gpu;
    /* Reports (owned; each may be NULL only after an allocation failure). */
    json_t *applied, *breakdown_base, *breakdown_pred, *top_kernels, *critical_path, *per_iteration;
    json_t *metrics; /* TBD's metrics (rv_metrics.h): keys appended to the answer */
    rv_step_stats steps;
    rv_warning warnings[RV_RUN_MAX_WARNINGS];
    size_t nwarnings;
    /* The prediction, kept when opts.keep_predicted (owned; NULL when the
     * what-if changes nothing: the baseline is the prediction). */
    rv_graph *pred_graph;
    rv_sim *pred_sim;
    int summary_only; /* opts.summary_only: the reports are NULL; not renderable */
} rv_run_result;

/* Runs w (borrowed, may be NULL: the unmodified trace) on g and its
 * baseline simulation base (both borrowed; must outlive *out). w's
 * overhead table, when it asks for one, is set by the caller.
 * Returns 0 and *out (new; rv_run_result_free), or a negative rv_err:
 * RV_ERR_BUDGET when opts->budget_ms or deadline_ms ran out or the run was
 * cancelled, RV_ERR_NOTFOUND for a step
 * the trace lacks, the model's own code otherwise. */
int rv_run(const rv_graph *g, const rv_sim *base, const rv_whatif *w, const rv_run_opts *opts,
           rv_run_result **out, rv_error *err);

/* The stop a run with these options checks: the caller's deadline and
 * cancel hooks, and the budget counted from now (the earlier one wins). */
rv_stop rv_run_stop_of(const rv_run_opts *o);

/* Adds a warning (at most RV_RUN_MAX_WARNINGS; later ones are counted in
 * the last). */
void rv_run_warn(rv_run_result *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The graph and simulation the prediction's reports come from. */
const rv_graph *rv_run_pred_graph(const rv_run_result *r);
const rv_sim *rv_run_pred_sim(const rv_run_result *r);

/* True when g's trace was modelled, not measured (an execution trace
 * alone): its answer's measured_us, replay_error and steps are null. */
int rv_run_modelled(const rv_graph *g);

/* NULL-safe. */
void rv_run_result_free(rv_run_result *r);

/* The answer as JSON (new reference; NULL on OOM). label is what the
 * answer is about: the trace's path for the CLI, NULL for the API (which
 * puts its trace_id first with rv_run_render_bytes). */
json_t *rv_run_render(const rv_run_result *r, const char *label);

/* The answer as compact JSON text (new, NUL-terminated; free()), with
 * "trace_id" first when trace_id > 0. The bytes the API sends and caches. */
char *rv_run_render_bytes(const rv_run_result *r, int64_t trace_id, size_t *len);

/* The warnings as [{code, message}] (new reference). */
json_t *rv_run_warnings_json(const rv_run_result *r);

/* A row's figures ({measured_us, baseline_us, predicted_us, speedup,
 * replay_error, energy_j: {baseline, predicted}, warning_count}) for sweep
 * and fleet rows; new reference. */
json_t *rv_run_summary_render(const rv_run_summary *s);

/* Writes an answer (borrowed; its numbers rounded in place, rv_round.h)
 * to f with the renderer's number format, indented when pretty, and a
 * newline. 0 or RV_ERR_IO. */
int rv_run_dump(json_t *answer, FILE *f, int pretty);

#endif
