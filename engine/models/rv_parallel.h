/* What the `parallel` what-if (rv_models_parallel.c) tells the answer's
 * other parts: the degrees it sets, for `parallelism`, and the memory per
 * GPU after sharding, for memory.predicted_breakdown. See
 * docs/models/parallel.md. */
#ifndef RV_PARALLEL_H
#define RV_PARALLEL_H

#include <stdint.h>

#include <jansson.h>

#include "graph/rv_graph.h"
#include "simulate/rv_pardims.h"
#include "util/rv_error.h"
#include "whatif/rv_whatif.h"
#include "whatif/rv_whatif_types.h"

/* Fills deg[RV_PD_COUNT] with the degrees w's "parallel" sets (0: as
 * traced). Returns deg, or NULL when w sets none. */
const int32_t *rv_parallel_degrees(const rv_whatif *w, int32_t *deg);

/* The GPUs one data-parallel replica spans under w: its tensor times its
 * pipeline degree (1 without them). The energy and the job's GPU count
 * take every one of them (rv_apply_energy_params). */
int rv_parallel_replica_gpus(const rv_whatif *w);

/* The share of a pipeline stage's modelled busy time that is its bubble,
 * (P-1)/(M+P-1): the model stretches every task of the step by
 * (M+P-1)/(M*P), so a stage's own work is M/(M+P-1) of it. 0 without a
 * pipeline. */
double rv_parallel_bubble_share(const rv_whatif *w);

/* The model's preconditions for the degrees p asks of g (borrowed): layer
 * instances for tensor and pipeline, pipeline stages dividing the layers,
 * the tensor degree dividing the attention heads, micro-batches only with
 * a pipeline. 0, or RV_ERR_LIMIT with err naming the field and the reason
 * (the 422 the what-if answers). Cheap: no graph is rewritten. */
int rv_parallel_check(const rv_par *p, const rv_graph *g, rv_error *err);

/* Sets memory.predicted_breakdown and predicted_peak_bytes from the
 * "parallel" entry of applied (borrowed): weights, gradients and optimizer
 * state per GPU after ZeRO / FSDP, tensor and pipeline sharding (MODELS.md
 * E2-E4). mem (borrowed) must carry "breakdown". Returns 1 when it set
 * them, 0 when applied has no parallel entry or mem no breakdown (then
 * predicted_reason says why). */
int rv_parallel_memory(json_t *mem, const json_t *applied);

#endif
