/* Layer instances: which repeated module (decoder layer 17, block 3) each
 * task belongs to, from the python events a trace recorded with
 * with_modules ("nn.Module: Qwen2DecoderLayer_17") or with_stack (a
 * python-stack "modeling_qwen2.py(243): forward" per call). The layer
 * type is the module type with at least two instances whose calls cover
 * the most CPU time (the decoder layer, not its Linear children nor the
 * whole model); see docs/models/parallel.md. */
#ifndef RV_LAYERS_H
#define RV_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

struct rv_graph;

enum { RV_LAYERS_MODULE = 1, RV_LAYERS_PYSTACK = 2 };

/* One call of the layer module. */
typedef struct rv_layer_inst {
    int32_t index;            /* the module's number (Qwen2DecoderLayer_17 -> 17) or,
                                 python-stack, its call ordinal within its step */
    int32_t event;            /* the python event */
    int64_t start_ns, end_ns; /* absolute, as in the trace */
    uint32_t pid, tid;        /* string ids of its CPU thread */
} rv_layer_inst;

#define RV_LAYERS_MAX_INST ((size_t)1 << 20)

typedef struct rv_layers {
    char type[160];      /* "Qwen2DecoderLayer" or the python-stack frame name */
    int source;          /* RV_LAYERS_MODULE or RV_LAYERS_PYSTACK */
    rv_layer_inst *inst; /* in start order */
    size_t ninst;
    int32_t nlayers;  /* distinct indices: the model's layers */
    int32_t *of_task; /* per task of the graph it was found on: index or -1 */
    size_t ntasks;
} rv_layers;

/* Finds the layer instances of g (borrowed; its trace must hold the
 * python module events the reader keeps). Returns 0 and *out (new;
 * rv_layers_free), *out NULL when the trace names no repeated module, or
 * RV_ERR_NOMEM. */
int rv_layers_find(const struct rv_graph *g, rv_layers **out, rv_error *err);

/* The layer index of task i; -1 when it ran outside every layer
 * (inserted tasks, backward, optimizer) or l is NULL. */
int32_t rv_layers_of_task(const rv_layers *l, size_t i);

/* The layer index of the call running at absolute time ts on the CPU
 * thread (pid, tid) (string ids); -1 none or l NULL. */
int32_t rv_layers_at(const rv_layers *l, uint32_t pid, uint32_t tid, int64_t ts);

void rv_layers_free(rv_layers *l);

#endif
