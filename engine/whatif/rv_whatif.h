/* The what-if request document: parse, validate, apply to a graph.
 *
 * One JSON document composes optimizations, a distributed setup, a power
 * limit and a schedule policy; the same document serves the CLI (--whatif)
 * and the API. Parsing rejects unknown kinds and out-of-range values with an
 * rv_error that names the field (e.g. "optimizations[1].factor"). */
#ifndef RV_WHATIF_H
#define RV_WHATIF_H

#include <jansson.h>

#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "simulate/rv_power.h"
#include "simulate/rv_sim.h"

typedef struct rv_whatif rv_whatif;

/* A what-if's job-level part ("job": {...}), read by rv_job.h on a
 * multi-rank job; a single trace refuses none of it but uses none. */
typedef struct rv_job_whatif {
    int remove_straggler;  /* make a rank as fast as the median rank */
    int straggler_rank;    /* -1: the predicted run's first straggler */
    double bandwidth_gbps; /* 0: as traced; per-GPU link, Gb/s per direction */
    double latency_us;     /* < 0: as traced; alpha per step */
    int world_size;        /* 0: as traced; data-parallel ranks to simulate */
} rv_job_whatif;

/* Parses and validates doc (borrowed). {} is valid and changes nothing.
 * Returns 0 and *out (new; rv_whatif_free), or RV_ERR_INVALID with err->field. */
int rv_whatif_parse(const json_t *doc, rv_whatif **out, rv_error *err);

/* Convenience: parses a JSON text (or "@path" to read a file). */
int rv_whatif_parse_text(const char *text, rv_whatif **out, rv_error *err);

void rv_whatif_free(rv_whatif *w);

/* True when the document changes nothing (no optimizations, no distributed
 * setup, no power limit, default schedule). */
int rv_whatif_is_empty(const rv_whatif *w);

/* Host-overhead statistics of the trace's platform (borrowed; must outlive
 * rv_apply), used when the document says "host_overheads":
 * "platform": the graph's host work is re-timed from them first
 * (rv_retime.h). */
struct rv_oh_table;
void rv_whatif_set_overheads(rv_whatif *w, const struct rv_oh_table *tab);
/* True when the document asks for the platform's overheads. */
int rv_whatif_uses_platform_overheads(const rv_whatif *w);

/* Forgets the document's "gpu": for a trace already modelled on that GPU
 * (an execution trace alone), nothing is left to rescale. */
void rv_whatif_drop_gpu(rv_whatif *w);

/* Kernel models of the trace's platform and, with "gpu", of the stored
 * platforms of that GPU (both borrowed, may be NULL; must outlive
 * rv_apply), used when the document says "kernel_models":
 * "platform": the models that fit kernel efficiencies in the trace
 * (batch_size) take the platform's for the sizes the trace lacks, and
 * `gpu` times a costed kernel at the target's measured efficiency for its
 * class and size where the target has one. */
struct rv_kmodel;
void rv_whatif_set_kmodel(rv_whatif *w, const struct rv_kmodel *m, const struct rv_kmodel *target);
/* True when the document asks for the platform's kernel models. */
int rv_whatif_uses_platform_kmodels(const rv_whatif *w);

/* The job-level part, or NULL when the document has none (or w is NULL). */
const rv_job_whatif *rv_whatif_job(const rv_whatif *w);

/* The document as it applies to rank `rank` of a job: the optimizations
 * whose "ranks" list it (or that list none), with the distributed, power
 * and schedule parts, without "job". Returns 0 and *out (new;
 * rv_whatif_free; borrows w's selectors, so w must outlive it) or
 * RV_ERR_NOMEM. */
int rv_whatif_for_rank(const rv_whatif *w, int rank, rv_whatif **out, rv_error *err);

/* The catalogue of kinds and fields with types, ranges, defaults and a
 * sentence each (GET /v1/whatif/kinds). New reference. */
json_t *rv_whatif_kinds(void);

/* The GPU the document names in "gpu" (borrowed), or NULL. */
const char *rv_whatif_gpu_override(const rv_whatif *w);

/* The schedule policy the document asks for (RV_SCHED_EARLIEST_START default). */
int rv_whatif_schedule(const rv_whatif *w);

#endif
