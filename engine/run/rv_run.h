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
#include "run/rv_run_result.h"
#include "whatif/rv_whatif.h"

/* Defaults shared by every caller. */
#define RV_RUN_TOP_KERNELS  10
#define RV_RUN_CRITICAL_MAX 20
/* A GPU-side change that moves the step less than this (relative) on a
 * CPU- or input-bound path warns cpu_bound / input_bound. */
#define RV_RUN_BOUND_MOVE 0.05

typedef struct rv_run_opts {
    int64_t iteration;  /* step number (ProfilerStep#N) or RV_ITER_MEDIAN */
    int top_kernels;    /* 0: RV_RUN_TOP_KERNELS */
    int critical_max;   /* 0: RV_RUN_CRITICAL_MAX */
    unsigned budget_ms; /* 0: none; past it the run fails with RV_ERR_BUDGET */
    /* When the budget started (CLOCK_MONOTONIC ms, rv_stop_now_ms): a
     * server counts it from the request's arrival, so the parse and the
     * load before the run are in it; 0: the run's start. */
    int64_t budget_from_ms;
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
    /* The baseline's figures computed before (borrowed; NULL: the run
     * computes its own). Used when it is of the run's graph, baseline and
     * iteration and, unless summary_only, full. */
    const rv_run_prep *prep;
} rv_run_opts;

/* Computes what runs of step iteration on g and base (borrowed; must
 * outlive *out) read from the baseline alone, for rv_run_opts.prep.
 * Returns 0 and *out (new; rv_run_prep_free; read only, so runs on other
 * threads may share it), or a negative rv_err (RV_ERR_NOTFOUND for a step
 * the trace lacks, as rv_run would). */
int rv_run_prep_new(const rv_graph *g, const rv_sim *base, int64_t iteration, rv_run_prep **out,
                    rv_error *err);
/* NULL-safe. */
void rv_run_prep_free(rv_run_prep *p);

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

/* True when g's trace was modelled, not measured (an execution trace
 * alone): its answer's measured_us, replay_error and steps are null. */
int rv_run_modelled(const rv_graph *g);

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
