/* Applying a what-if request (whatif/rv_whatif.h) to a graph: the
 * dispatcher that runs the models (models/rv_models.h) in the documented
 * order, and what the energy of the result assumes. */
#ifndef RV_APPLY_H
#define RV_APPLY_H

#include <jansson.h>

#include "graph/rv_graph.h"
#include "simulate/rv_power.h"
#include "util/rv_error.h"
#include "util/rv_stop.h"
#include "whatif/rv_whatif.h"

/* Rewrites g in place in the documented order. *applied (new reference,
 * may be NULL on error) lists what each model changed: tasks scaled,
 * removed, inserted, its parameters, and "changed": false when the model
 * left the graph as it was (it matched no task). */
int rv_apply(const rv_whatif *w, rv_graph *g, json_t **applied, rv_error *err);
/* rv_apply that stops (borrowed, may be NULL) when stop says so:
 * checked before each model, while selectors match and in the models'
 * long loops; then returns RV_ERR_BUDGET and the graph is half-rewritten
 * (throw it away). Both forms bound what the models may add to g:
 * RV_APPLY_MAX_NEW_TASKS tasks and RV_APPLY_MAX_NEW_EDGES edges in all
 * (past them RV_ERR_LIMIT naming the optimization, before allocating). */
int rv_apply_stop(const rv_whatif *w, rv_graph *g, const rv_stop *stop, json_t **applied,
                  rv_error *err);
/* rv_apply_stop on a g whose fingerprint the caller knows (print:
 * rv_apply_fingerprint of g as it is now, as of the graph g was just
 * cloned from): spares a pass over the tasks. */
int rv_apply_stop_known(const rv_whatif *w, rv_graph *g, const rv_stop *stop, uint64_t print,
                        json_t **applied, rv_error *err);
/* What rv_apply compares before and after each model to tell whether it
 * changed g: task and edge counts, and each task's duration, gap and flags. */
uint64_t rv_apply_fingerprint(const rv_graph *g);
#define RV_APPLY_MAX_NEW_TASKS ((size_t)3000000)
#define RV_APPLY_MAX_NEW_EDGES ((size_t)9000000)

/* What the energy of a simulated g under w (NULL: the trace as it ran)
 * assumes: its GPU (the override when given), the cap (the what-if's, else
 * the trace's), the data-parallel replicas one simulated rank stands for
 * (distributed.workers, else parallel.data, else the world size of a
 * multi-rank trace), the GPUs each replica spans (parallel tensor x
 * pipeline) with the pipeline's bubble share, and the batch size. */
void rv_apply_energy_params(const rv_whatif *w, const rv_graph *g, rv_energy_params *out);

#endif
