/* PyTorch execution traces (ET): a bounded streaming reader and the join
 * with the Kineto trace of the same run.
 *
 * Two layouts are read. Schema 1.0.0/1.0.1 nodes carry parent, rf_id and
 * flat "inputs", "input_shapes", "input_types" (and the same for outputs);
 * schema 1.0.2+ (Chakra's "1.0.2-chakra.0.0.4") and 1.1.x nodes carry
 * ctrl_deps, "inputs": {"values", "shapes", "types"} and an "attrs" list
 * holding rf_id, tid and op_schema. Input is plain JSON, gzip, or a
 * .tar(.gz) archive holding one ET. Every count and string is capped; a
 * malformed ET is refused with the node id or byte offset at fault. See
 * docs/internals/et-reader.md. */
#ifndef RV_ET_H
#define RV_ET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/rv_error.h"
#include "trace/rv_trace.h"

#define RV_ET_MAX_NODES ((size_t)4 << 20)  /* default cap on nodes */
#define RV_ET_MAX_ARGS  4096               /* inputs or outputs of one node */
#define RV_ET_MAX_DIMS  16                 /* rank of a shape kept */
#define RV_ET_MAX_NAME  ((size_t)64 << 10) /* node name, op schema, type */

/* One input or output of a node. */
typedef struct rv_et_arg {
    int64_t tensor_id; /* tensor values: the tensor id; RV_NONE otherwise */
    int64_t numel;     /* tensor values: elements of the storage; RV_NONE */
    int32_t itemsize;  /* tensor values: bytes per element; 0 unknown */
    int32_t ndims;     /* rank of a flat shape; -1 when the shape is nested or absent */
    uint32_t dims_off; /* first dim in rv_et.dims */
    uint32_t type;     /* string id of the type ("Tensor(float)", "Int") */
    int32_t nvals;     /* an int or a flat int list (sizes, strides): its length; -1 none */
    uint32_t vals_off; /* first value in rv_et.dims */
    int32_t device;    /* tensor values: RV_ET_DEV_* from the value's device string */
} rv_et_arg;

/* Where a tensor lives ("cuda:0", "hip:0": GPU; "cpu"). */
enum { RV_ET_DEV_UNKNOWN = 0, RV_ET_DEV_CPU = 1, RV_ET_DEV_GPU = 2 };

typedef struct rv_et_node {
    int64_t id;
    int64_t parent; /* "parent" or "ctrl_deps"; RV_NONE for a root */
    int64_t rf_id;  /* record-function id; RV_NONE when absent */
    int64_t tid;    /* ET thread number; RV_NONE */
    uint32_t name;  /* string id */
    uint32_t schema;
    uint32_t args_off; /* inputs at args[args_off .. +n_in), then the outputs */
    uint32_t n_in, n_out;
} rv_et_node;

typedef struct rv_et {
    rv_et_node *nodes; /* in input order */
    size_t nnodes, cap_nodes;
    rv_et_arg *args;
    size_t nargs, cap_args;
    int64_t *dims;
    size_t ndims, cap_dims;
    rv_strtab strings;
    uint32_t schema_version; /* string id of "schema" */
    int layout;              /* 0: 1.0.0/1.0.1 flat lists; 1: 1.0.2+/1.1 values/attrs */
    size_t input_bytes;
} rv_et;

typedef struct rv_et_opts {
    size_t max_input_bytes; /* decompressed; 0 = 4 GiB */
    size_t max_nodes;       /* 0 = RV_ET_MAX_NODES */
} rv_et_opts;

/* Parses an ET from a file (plain, gzip or tar(.gz) with one member), a
 * stream (plain or gzip) or a borrowed memory buffer (all three forms). On
 * success 0 and *out (new; rv_et_free). On failure a negative rv_err, *out
 * NULL and *err naming what and where (node id or byte offset). opts may be
 * NULL. */
int rv_et_read_file(const char *path, const rv_et_opts *opts, rv_et **out, rv_error *err);
int rv_et_read_buffer(const void *data, size_t len, const rv_et_opts *opts, rv_et **out,
                      rv_error *err);

/* Frees an ET. NULL-safe. */
void rv_et_free(rv_et *et);

static inline const char *rv_et_str(const rv_et *et, uint32_t id)
{
    return rv_strtab_get(&et->strings, id);
}

/* Dims of a flat shape (borrowed), NULL when arg has none. */
static inline const int64_t *rv_et_dims(const rv_et *et, const rv_et_arg *a)
{
    return a->ndims >= 0 && et->dims ? et->dims + a->dims_off : NULL;
}

/* Values of an int or int-list arg (borrowed), NULL when it has none. */
static inline const int64_t *rv_et_vals(const rv_et *et, const rv_et_arg *a)
{
    return a->nvals >= 0 && et->dims ? et->dims + a->vals_off : NULL;
}

/* Whether an arg is a tensor (by its type, else by its value). */
int rv_et_arg_is_tensor(const rv_et *et, const rv_et_arg *a);

/* The join of an ET with the Kineto trace of the same run. */
typedef struct rv_et_join {
    int32_t *node_of_event; /* per trace event: ET node index or -1 (new) */
    size_t nevents;
    int method;              /* RV_ET_JOIN_ID or RV_ET_JOIN_ORDER */
    size_t ops;              /* trace cpu ops and annotations */
    size_t ops_joined;       /* ... that an ET node matched */
    size_t kernels;          /* GPU tasks (kernels, memcpy, memset) */
    size_t kernels_launched; /* ... whose launch sits under a cpu op */
    size_t kernels_joined;   /* ... whose launching op (or an ancestor) joined */
} rv_et_join;

enum { RV_ET_JOIN_ID = 1, RV_ET_JOIN_ORDER = 2 };

/* Joins et to t. Ops are matched by record-function id when the trace's
 * ids and names agree with the ET's (rf_id = "Record function id", else
 * "External id"); otherwise, as Kineto ids can be numbered differently
 * from rf_id, by each thread's op order and names. A GPU task is then
 * attributed to the innermost joined op enclosing its launch. 0 with *j
 * filled (free with rv_et_join_free), RV_ERR_NOTFOUND with err set when
 * no op joins, or RV_ERR_NOMEM. */
int rv_et_join_trace(const rv_et *et, const rv_trace *t, rv_et_join *j, rv_error *err);

/* Puts the shapes of each joined op's ET node (inputs, then outputs) on
 * t, replacing what the Kineto reader found (t->shapes_source becomes
 * RV_SHAPES_ET), and the persistent memory the ET shows (t->mem_model:
 * distinct parameter tensors, their gradients when there is a backward
 * pass, the optimizer's state by its name). 0 or RV_ERR_NOMEM. */
int rv_et_shapes_to_trace(const rv_et *et, const rv_et_join *j, rv_trace *t);

/* Frees what j holds. NULL-safe. */
void rv_et_join_free(rv_et_join *j);

/* An ET alone, without the Kineto trace of its run (rv_et_graph.c,
 * docs/models/et.md): the defaults its timeline rests on. */
#define RV_ET_OP_US           10.0 /* CPU time of each op (the ETs record none) */
#define RV_ET_EFFICIENCY      0.5  /* achieved / roofline of a modelled kernel */
#define RV_ET_FIT_REACH       2    /* fitted size buckets a kernel may borrow from, each side */
#define RV_ET_MIN_KERNEL_US   2.0  /* shortest kernel or copy */
#define RV_ET_COMM_LATENCY_US 5.0  /* per collective, before its bytes at link speed */
#define RV_ET_TABLE_RATIO     64.0 /* an embedding input this many times its outputs: a table */
#define RV_ET_LOOKUP_ROWS     4.0  /* a table's bytes read, as a multiple of the outputs */

/* What the ET-alone trace holds. */
typedef struct rv_et_alone {
    size_t ops;         /* CPU ops and annotations placed */
    size_t kernels;     /* compute kernels modelled */
    size_t collectives; /* nccl kernels on the comm stream */
    size_t copies;      /* host <-> device memcpys */
    size_t costed;      /* kernels whose op had a FLOPs formula */
    size_t fitted;      /* of those, timed at an efficiency fitted on measured traces */
} rv_et_alone;

/* Builds a trace from et alone (borrowed) as if it had run on `gpu` (a
 * name rv_hw_lookup knows): CPU ops on their ET threads in id order,
 * nested by parent, RV_ET_OP_US each; the innermost op touching a GPU
 * tensor launches one kernel on stream 7 (nccl ops on stream 20, host
 * copies as memcpys), timed by the roofline of its FLOPs and bytes at
 * RV_ET_EFFICIENCY; op shapes and the memory model from the ET; one
 * ProfilerStep over it all; source_format "et". 0 and *out (new;
 * rv_trace_free) and *info (may be NULL); RV_ERR_UNSUPPORTED with err
 * naming "gpu" when gpu is NULL, empty or unknown, or when no op touches
 * a GPU tensor; RV_ERR_NOMEM or RV_ERR_LIMIT. */
int rv_et_to_trace(const rv_et *et, const char *gpu, rv_trace **out, rv_et_alone *info,
                   rv_error *err);

/* rv_et_to_trace with kernel models fitted on measured traces of the same
 * GPU (borrowed, may be NULL: rv_et_to_trace): a costed kernel takes the
 * efficiency of its class and size bucket (the nearest fitted one, else the
 * class's) over the roofline the fit used, instead of RV_ET_EFFICIENCY. */
struct rv_kmodel;
int rv_et_to_trace_fitted(const rv_et *et, const char *gpu, const struct rv_kmodel *eff,
                          rv_trace **out, rv_et_alone *info, rv_error *err);

#endif
