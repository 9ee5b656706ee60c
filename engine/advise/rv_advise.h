/* Advise: search the what-ifs whose preconditions hold on a trace for the
 * plans that serve an objective best (dPRO's optimizer, generalized to
 * Reverie's what-if kinds), and answer "what should this job change?".
 *
 * Every plan is an ordinary what-if document run through rv_run, the
 * path `reverie simulate --whatif` takes, so a candidate's figures are
 * reproduced by running its "whatif" again. The search is a beam search
 * over adding one change at a time, guided by the critical path: a change
 * that acts on a resource the path barely crosses is not tried. See
 * docs/advise.md. */
#ifndef RV_ADVISE_H
#define RV_ADVISE_H

#include <stdint.h>

#include <jansson.h>

#include "graph/rv_graph.h"
#include "job/rv_job.h"
#include "simulate/rv_sim.h"
#include "util/rv_error.h"

typedef enum rv_advise_objective {
    RV_ADVISE_TIME = 0, /* time per sample of the trace's batch */
    RV_ADVISE_ENERGY,   /* GPU energy per sample (the job's GPUs) */
    RV_ADVISE_COST,     /* GPU-hours x price per sample */
} rv_advise_objective;

/* Defaults. */
#define RV_ADVISE_BUDGET_S   60.0
#define RV_ADVISE_BEAM       3
#define RV_ADVISE_DEPTH      6
#define RV_ADVISE_CANDIDATES 20
/* The most plans one search evaluates, whatever the budget. */
#define RV_ADVISE_MAX_EVALS 400
/* US dollars per GPU-hour for the cost objective when the caller names no
 * price: the hardware table has no prices, and this round figure is an
 * assumption (about an on-demand data-centre GPU), not a quote. */
#define RV_ADVISE_PRICE_DEFAULT 2.0
/* Data-parallel worker counts tried up to opts.gpus: the trace's world
 * size times 2, 4, ... (at most this many, the largest kept). */
#define RV_ADVISE_MAX_SCALES 4

typedef struct rv_advise_opts {
    int objective;             /* rv_advise_objective */
    double budget_s;           /* wall time for the whole search; <= 0: RV_ADVISE_BUDGET_S */
    int64_t max_memory;        /* bytes a plan may peak at; 0: the GPU's memory */
    int gpus;                  /* GPUs of a plan (workers x tensor x pipeline); 0: the trace's */
    double price_per_gpu_hour; /* USD, cost objective; <= 0: RV_ADVISE_PRICE_DEFAULT */
    int beam_width;            /* 0: RV_ADVISE_BEAM */
    int max_depth;             /* changes per plan; 0: RV_ADVISE_DEPTH */
    int max_candidates;        /* listed plans; 0: RV_ADVISE_CANDIDATES */
    unsigned run_budget_ms;    /* one plan's run; 0: none beyond the search's deadline */
    /* Stopping from outside (as rv_run_opts): an absolute CLOCK_MONOTONIC
     * deadline (0: none; the earlier of it and budget_s counts) and
     * cancellation hooks. */
    int64_t deadline_ms;
    const volatile int *cancel;
    int (*cancel_fn)(void *arg);
    void *cancel_arg;
} rv_advise_opts;

/* Parses "time" | "energy" | "cost"; -1 when none. */
int rv_advise_objective_parse(const char *s);

/* Searches the plans for g and its baseline simulation base (both
 * borrowed). Returns 0 and *out (new reference): {objective, baseline,
 * candidates: [{whatif, changes, predicted_us, speedup, energy_j,
 * memory_peak_bytes, fits, warnings, why, ...}], searched, pruned,
 * seconds, complete, ...}, ranked by the objective. A search cut short by
 * the budget still answers (complete false, stopped says why); only a
 * baseline that cannot be run in the budget fails, with RV_ERR_BUDGET.
 * Other failures: the run's code, RV_ERR_NOMEM. */
int rv_advise(const rv_graph *g, const rv_sim *base, const rv_advise_opts *opts, json_t **out,
              rv_error *err);

/* The same search on a training job of several ranks (job borrowed, built
 * by rv_job_build): every plan is a job what-if document run through
 * rv_job_run, the path of `reverie simulate RANK0 RANK1 ... --whatif` and
 * POST /v1/training-jobs/{id}/whatif. g and base (borrowed) are one
 * rank's, usually the first's: its kernels and phases decide the space,
 * its run the memory peak and the baseline's bound. The answer's shape is
 * rv_advise's; predicted_us is the job's step (its slowest rank) and
 * energy_j every rank's GPUs'. */
int rv_advise_job(const rv_job *job, const rv_graph *g, const rv_sim *base,
                  const rv_advise_opts *opts, json_t **out, rv_error *err);

#endif
