/* Op shapes on a trace: the per-op argument records (rv_op_shape,
 * rv_shape_arg in rv_trace.h) that the Kineto reader fills from
 * record_shapes and a joined execution trace fills from its nodes, and the
 * op tree that attributes each GPU task to the ops enclosing its launch.
 * The FLOP and byte counts (rv_flops.h) read them. */
#ifndef RV_SHAPES_H
#define RV_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_buf.h"
#include "util/rv_jscan.h"
#include "trace/rv_trace.h"

#define RV_SHAPES_MAX_ARGS 4096               /* arguments of one op */
#define RV_SHAPES_MAX_INTS ((size_t)64 << 20) /* dims and values over a trace */

/* Appends the shapes of op event `event` (events must come in increasing
 * order): nargs records whose dims/vals index ints[] (borrowed) and are
 * rebased into the trace. 0; 1 when the trace's caps are reached (the op
 * is dropped and t->shapes_truncated set); RV_ERR_INVALID for an event out
 * of order or an index outside ints[0..nints); RV_ERR_NOMEM. */
int rv_shapes_add(rv_trace *t, int32_t event, const rv_shape_arg *args, size_t nargs,
                  const int64_t *ints, size_t nints);

/* Appends every op shape of src to dst, its events moved by event_base
 * (src's events follow dst's: the reader joining a trace read in parts).
 * 0; 1 when dst would pass a cap or src was cut by one (dst unchanged: the
 * caller reads that part again one op at a time); RV_ERR_NOMEM. */
int rv_shapes_append(rv_trace *dst, const rv_trace *src, int32_t event_base);

/* Bytes per element of a tensor type as Kineto or an ET writes it
 * ("float", "c10::BFloat16", "long int", "Tensor(c10::Half)"); 0 unknown. */
int rv_shapes_itemsize(const char *s, size_t n);

/* The same text's rv_prec_type (trace/rv_kname.h), "Tensor(...)" unwrapped. */
int rv_shapes_ptype(const char *s, size_t n);

/* Drops every op shape (the arrays are kept for reuse). */
void rv_shapes_clear(rv_trace *t);

/* The shapes of an op event, or NULL (binary search). */
const rv_op_shape *rv_shapes_of(const rv_trace *t, int32_t event);

/* The dims / values of an argument (borrowed), NULL when it has none. */
static inline const int64_t *rv_shapes_dims(const rv_trace *t, const rv_shape_arg *a)
{
    return a->ndims >= 0 && t->shape_ints ? t->shape_ints + a->dims : NULL;
}
static inline const int64_t *rv_shapes_vals(const rv_trace *t, const rv_shape_arg *a)
{
    return a->nvals >= 0 && t->shape_ints ? t->shape_ints + a->vals : NULL;
}

/* The op tree: parent[i] for every event i (caller's array of t->nevents):
 * for a CPU op or annotation the innermost op enclosing it on its thread;
 * for a runtime or driver call the innermost op enclosing it; for a GPU
 * task the op enclosing the call that launched it (by correlation); -1
 * otherwise. 0 or RV_ERR_NOMEM. */
int rv_shapes_op_tree(const rv_trace *t, int32_t *parent);

/* The Kineto reader's side: one op's record_shapes arguments gathered
 * while its "args" stream past (keys come in any order), then committed
 * once the event is kept. Opaque scratch, reused from op to op. */
typedef struct rv_shapes_pending rv_shapes_pending;

/* New scratch (rv_shapes_pending_free), NULL on OOM. */
rv_shapes_pending *rv_shapes_pending_new(void);
void rv_shapes_pending_free(rv_shapes_pending *p); /* NULL-safe */
/* Forgets the previous op. */
void rv_shapes_pending_reset(rv_shapes_pending *p);

/* Whether key[0..n) is an argument rv_shapes_read_arg reads: "Input Dims",
 * "Concrete Inputs", and the "[memory]" event's "Bytes", "Total
 * Allocated", "Total Reserved", "Device Type", "Device Id". */
int rv_shapes_key(const char *key, size_t n);

/* Reads that argument's value into p (b: the caller's string buffer). 0 or
 * a negative rv_err from the scanner. */
int rv_shapes_read_arg(rv_jscan *js, int depth, const char *key, size_t n, rv_shapes_pending *p,
                       rv_buf *b);

/* For an event not kept as an rv_event: when it is an instant event
 * (instant set) named "[memory]" on a GPU (device type 1, CUDA and ROCm
 * alike), adds its sample at ts_ns to t. Then forgets the event's
 * arguments. 0 or RV_ERR_NOMEM. */
int rv_shapes_commit_mem(rv_trace *t, rv_shapes_pending *p, int instant, const char *name, size_t n,
                         int64_t ts_ns);

/* Reads an "Input Dims" value ([[2, 3], [], [[1], [2]]]): flat lists are
 * tensor shapes, nested ones (tensor lists) keep none. 0 or a negative
 * rv_err from the scanner. */
int rv_shapes_read_dims(rv_jscan *js, int depth, rv_shapes_pending *p);

/* Notes entry i of "Input type" (s NULL: not a string). */
void rv_shapes_note_type(rv_shapes_pending *p, size_t i, const char *s, size_t n);

/* Reads a "Concrete Inputs" value (["", "[1, 1]", "3", "0."]): integers
 * and integer lists are kept as values. b is the caller's string buffer. */
int rv_shapes_read_concrete(rv_jscan *js, int depth, rv_shapes_pending *p, rv_buf *b);

/* Puts what was gathered on t as op event `event`'s shapes when "Input
 * Dims" was seen (event -1: not an op, nothing), then forgets the event's
 * arguments. 0 or a negative rv_err. */
int rv_shapes_commit(rv_trace *t, int32_t event, rv_shapes_pending *p);

/* The batch size t's op shapes say (0 when none); *from (static) names
 * where it was read. */
int64_t rv_shapes_batch(const rv_trace *t, const char **from);

#endif
