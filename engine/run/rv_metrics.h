/* TBD's metrics on every answer: FLOPs per step, model FLOP utilization,
 * batch size and throughput, GPU and CPU utilization, and peak GPU memory
 * with its breakdown. Each is null with a warning saying why when the
 * trace cannot give it. Definitions: docs/models/metrics.md. */
#ifndef RV_METRICS_H
#define RV_METRICS_H

#include <jansson.h>

#include "run/rv_run_result.h"
#include "whatif/rv_whatif.h"

/* Computes r's metrics from its graph, baseline and prediction into a new
 * JSON object (flops, mfu, batch_size, throughput, utilization, memory),
 * adding the warnings they rest on to r (rv_run_warn). w (borrowed, may be
 * NULL) gives a request's batch_size and gpu. Returns the object (new
 * reference) or NULL on OOM. */
json_t *rv_metrics_compute(rv_run_result *r, const rv_whatif *w);

/* The baseline's memory report of r (its graph, baseline and base_fig):
 * peak, series and breakdown; its warnings are added to r. New reference,
 * NULL on OOM. rv_metrics_compute reads r->prep's copy when r has one. */
json_t *rv_metrics_memory(rv_run_result *r);

/* The FLOPs of r's baseline step ({per_step, source, dtype, by_class,
 * ...}) from its graph's costing, which must have some (g->flops with
 * total_flops > 0); *per_step gets the step's FLOPs; a flops_partial
 * warning is added to r. New reference, NULL on OOM. */
json_t *rv_metrics_flops(rv_run_result *r, double *per_step);

#endif
