/* The parallelism dimensions a trace runs (MODELS.md E1): every
 * collective call is put in one dimension (data, fsdp, tensor, pipeline,
 * expert, embedding, context, unknown) from its process group, its kind
 * and the ops around it, and each dimension's collectives, communication
 * time and the part of it no compute hides are reported per step. See
 * docs/models/parallel.md. */
#ifndef RV_PARDIMS_H
#define RV_PARDIMS_H

#include <stdint.h>

#include <jansson.h>

#include "graph/rv_graph.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"

typedef enum rv_pardim {
    RV_PD_DATA = 0,
    RV_PD_FSDP,
    RV_PD_TENSOR,
    RV_PD_PIPELINE,
    RV_PD_EXPERT,
    RV_PD_EMBEDDING,
    RV_PD_CONTEXT,
    RV_PD_UNKNOWN,
    RV_PD_COUNT
} rv_pardim;

const char *rv_pardim_name(int dim);

/* Collective kinds. */
enum {
    RV_PDK_ALLREDUCE = 0,
    RV_PDK_REDUCE_SCATTER,
    RV_PDK_ALLGATHER,
    RV_PDK_BROADCAST,
    RV_PDK_ALLTOALL,
    RV_PDK_SENDRECV,
    RV_PDK_OTHER,
    RV_PDK_COUNT
};

/* rv_task.pardim of a collective a what-if inserts: its dimension (low
 * four bits, dim + 1) and kind (high four bits). */
#define RV_PARDIM_TAG(dim, kind) ((uint8_t)(((dim) + 1) | ((kind) << 4)))
#define RV_PARDIM_DIM(tag)       ((tag)&0x0f)
#define RV_PARDIM_KIND(tag)      (((tag) >> 4) & 0x0f)

/* True for a kernel name that is an expert-parallel token exchange
 * (DeepEP's dispatch and combine kernels, "deep_ep::..."). Kept here
 * until the kernel-name classifier knows them. */
int rv_pardims_is_moe_kernel(const char *name);

/* The `parallelism` list of g simulated as s, per step of window w
 * (all borrowed): [{dim, degree, process_group, collectives, comm_us,
 * exposed_comm_us, ops, source}], collectives found in the trace and the
 * ones a what-if inserted (rv_task.pardim). degree[d] > 0 (may be NULL)
 * gives a dimension's degree where the what-if set it. New reference,
 * NULL on OOM. */
json_t *rv_pardims_json(const rv_graph *g, const rv_sim *s, const rv_window *w,
                        const int32_t *degree);

/* The collective calls of g's trace (the outermost collective CPU ops,
 * with what surrounds them): they depend on the trace and its layers
 * only, so the what-ifs on clones of one graph find them once. g is
 * borrowed and must outlive the result. New (rv_pardims_calls_free), NULL
 * on OOM. */
typedef struct rv_pardims_calls rv_pardims_calls;
rv_pardims_calls *rv_pardims_calls_new(const rv_graph *g);
void rv_pardims_calls_free(rv_pardims_calls *p);

/* rv_pardims_json with the calls of pre (borrowed; NULL, or of another
 * trace or layers: found again). */
json_t *rv_pardims_json_pre(const rv_graph *g, const rv_sim *s, const rv_window *w,
                            const int32_t *degree, const rv_pardims_calls *pre);

#endif
