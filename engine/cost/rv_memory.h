/* Memory a training step holds, from the trace's op shapes, and the peak
 * the memory what-ifs predict; see docs/models/memory.md. */
#ifndef RV_MEMORY_H
#define RV_MEMORY_H

#include <stdint.h>

#include <jansson.h>

#include "trace/rv_trace.h"

/* What one step's op shapes say (bytes; RV_NONE when unknown). */
typedef struct rv_memory_shapes {
    int64_t weights;         /* parameters of conv/linear/norm/embedding ops */
    int64_t gradients;       /* one per parameter in training, 0 in inference */
    int64_t optimizer_state; /* state tensors the optimizer's ops update */
    int64_t activations;     /* forward tensors saved for backward (0 in inference) */
    int64_t largest_input;   /* the largest tensor an op of the step reads */
    int32_t nparams;         /* parameter tensors counted */
    int32_t nsaving;         /* forward ops that save activations */
    int32_t state_per_param; /* optimizer state tensors per parameter; -1 unknown */
    int training;            /* the step runs a backward pass */
} rv_memory_shapes;

/* Reads the ops of t that start inside [t0, t1) (absolute ns): one step.
 * op_tree is t's (rv_shapes_op_tree; borrowed), or NULL to build it here.
 * 0 (b filled; b->nparams 0 when no op carries parameters), or
 * RV_ERR_NOMEM. t is borrowed. */
int rv_memory_from_shapes(const rv_trace *t, const int32_t *op_tree, int64_t t0, int64_t t1,
                          rv_memory_shapes *b);

/* The optimizer an op's name says it steps ("Optimizer.step#Adam.step",
 * "Optimizer.zero_grad#SGD.zero_grad"): its name (static; *len bytes) and
 * the state it keeps per parameter element in *state (Adam(W), LAMB and
 * Adadelta two buffers; SGD (momentum assumed), Adagrad and RMSprop one).
 * NULL when the name names none. */
const char *rv_memory_optimizer_named(const char *op, int *len, double *state);

/* Sets predicted_peak_bytes and predicted_breakdown (or null with a
 * reason) on the answer's memory object when one of the applied entries
 * (borrowed) is a memory what-if: vdnn, gist, recompute,
 * gradient_accumulation or batch_size. mem is borrowed and updated; it
 * must carry "breakdown" and the peak the prediction starts from. Returns
 * 1 when a memory saver's defaults (RV_GIST_ENCODING, the recompute
 * checkpoints, vDNN's sizes and prefetch) shaped the prediction, else 0. */
int rv_memory_predict(json_t *mem, const json_t *applied);

/* Gist's stash shrink when the request gives none: encoded bytes are
 * 1/RV_GIST_ENCODING of the raw ones. */
#define RV_GIST_ENCODING 2.0

/* Layers vDNN keeps resident ahead of the backward pass (the prefetch). */
#define RV_VDNN_PREFETCH_LAYERS 2

#endif
