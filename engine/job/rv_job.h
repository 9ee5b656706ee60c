/* A distributed job as one global graph (dPRO, MLSys'22, sections 3-4).
 *
 * The per-rank graphs are joined by cross-rank dependencies: collectives
 * are matched across ranks by process group and order, and a collective
 * cannot finish on any rank before the last rank has entered it. Ranks'
 * clocks are aligned on matched collective ends. The job is replayed with
 * one queue per device per rank, and what-ifs apply to all ranks or some. */
#ifndef RV_JOB_H
#define RV_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"

/* One rank of a job as the caller loaded it. All pointers borrowed. rank
 * and world_size < 0: unknown (the trace's distributedInfo is used, else the
 * position in the array, with a warning). */
typedef struct rv_job_rank {
    const rv_graph *graph;
    const rv_sim *base;
    int rank;
    int world_size;
    const char *label; /* e.g. the file name; may be NULL */
} rv_job_rank;

typedef struct rv_job rv_job;
typedef struct rv_job_result rv_job_result;

/* Builds a job from n ranks (borrowed; their graphs and simulations must
 * outlive *out): rank identity, collective matching, clock offsets,
 * message sizes. The job keeps its ranks sorted by rank ("positions").
 * Returns 0 and *out (new; rv_job_free), or RV_ERR_INVALID (no ranks, a
 * rank without a graph, a rank twice), RV_ERR_LIMIT (more than 65536
 * ranks), RV_ERR_NOMEM. */
int rv_job_build(const rv_job_rank *ranks, size_t n, rv_job **out, rv_error *err);

/* Runs w (borrowed, may be NULL: the replay) on every rank and simulates
 * the global graph. Returns 0 and *out (new; rv_job_result_free) or a
 * negative rv_err (RV_ERR_BUDGET when opts say stop). */
int rv_job_run(const rv_job *job, const rv_whatif *w, const rv_run_opts *opts, rv_job_result **out,
               rv_error *err);

/* The answer as JSON (new reference; NULL on OOM): measured_us,
 * baseline_us, predicted_us, speedup, warnings, ranks[], clock_offsets_us,
 * slowest_rank, stragglers[], collective_waits[], critical_path and more
 * (docs/internals/job.md). label (may be NULL) goes in "job". */
json_t *rv_job_render(const rv_job_result *r, const char *label);

/* Figures a caller may read without rendering. */
size_t rv_job_nranks(const rv_job *job);
int rv_job_world_size(const rv_job *job);
/* The rank at position i (positions are in rank order); -1 past the end. */
int rv_job_rank_at(const rv_job *job, size_t i);
/* Aligned clock offset of position i in microseconds (added to that
 * rank's trace times to put it on the lowest rank's clock). */
double rv_job_clock_offset_us(const rv_job *job, size_t i);
/* The job summary of a result (measured, baseline, predicted, speedup,
 * replay_error = the worst rank's, warnings). */
const rv_run_summary *rv_job_result_summary(const rv_job_result *r);

/* True when the traces look like one job: each names the same world size
 * (> 1) in distributedInfo and distinct ranks. */
int rv_job_graphs_form_job(const rv_graph *const *graphs, size_t n);

/* NULL-safe. */
void rv_job_free(rv_job *job);
void rv_job_result_free(rv_job_result *r);

#endif
