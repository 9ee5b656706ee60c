/* The typed result of one what-if run (rv_run.h computes it, rv_metrics.h
 * adds TBD's metrics to it, rv_run.h renders it): its figures, reports and
 * warnings. Apart from the computation so that what reads or annotates a
 * result does not depend on how it is made. */
#ifndef RV_RUN_RESULT_H
#define RV_RUN_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "graph/rv_graph.h"
#include "simulate/rv_power.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"

#define RV_RUN_MAX_WARNINGS 32

/* The figures a fleet row or a sweep row shows, and what the what-if cache
 * keeps beside the rendered bytes. Energies are per iteration; 0 with
 * have_energy 0 when the GPU is unknown. */
typedef struct rv_run_summary {
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

/* What a run reads from the baseline alone, for one step choice: computed
 * once (rv_run_prep_new, or by the run itself) and read only afterwards,
 * so that many runs on one loaded trace, on any threads, share it. */
typedef struct rv_run_prep {
    const rv_graph *graph; /* borrowed */
    const rv_sim *base;    /* borrowed */
    int64_t iteration;
    int full; /* breakdown and per_iteration computed (not summary-only) */
    rv_iter_figures fig;
    rv_window win;
    int have_energy;
    rv_energy energy;
    json_t *breakdown, *per_iteration; /* owned; runs take copies (rendering rounds in place) */
    rv_step_stats steps;
    /* The FLOPs of the baseline's step (rv_metrics_flops; NULL when the
     * graph has none costed) and the warnings they add. */
    json_t *flops;
    double flops_per_step;
    rv_warning flops_warnings[2];
    size_t flops_nwarnings;
    int64_t batch_inferred;         /* rv_shapes_batch */
    const char *batch_from;         /* static */
    json_t *memory;                 /* owned: the baseline's memory report (rv_metrics_memory) */
    struct rv_pardims_calls *calls; /* owned: the trace's collective calls (rv_pardims.h) */
    /* The memory report's warnings, added to each run's at the same place. */
    rv_warning mem_warnings[4];
    size_t mem_nwarnings;
    /* Owned: the graph's packed edges, for the simulations of what-ifs that
     * keep them (rv_run_prep_new only; NULL in a run's own prep). */
    rv_sim_adj *adj;
    /* The graph's rv_apply_fingerprint, which a fresh clone of it shares
     * (rv_run_prep_new only: have_print 0 in a run's own prep). */
    uint64_t print;
    int have_print;
} rv_run_prep;

typedef struct rv_run_result {
    rv_run_summary sum;
    const rv_run_prep *prep; /* borrowed: the baseline's figures this run read */
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

/* Adds a warning (at most RV_RUN_MAX_WARNINGS; later ones are counted in
 * the last). */
void rv_run_warn(rv_run_result *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The graph and simulation the prediction's reports come from. */
const rv_graph *rv_run_pred_graph(const rv_run_result *r);
const rv_sim *rv_run_pred_sim(const rv_run_result *r);

/* NULL-safe. */
void rv_run_result_free(rv_run_result *r);

#endif
