/* The simulated run written back in the dialect of its input: the original
 * Kineto trace with every event re-timed to the simulation, so a predicted
 * (or baseline) run opens in Perfetto, chrome://tracing, TensorBoard's
 * profiler plugin and HTA as the original does, and reads back through
 * the Kineto reader at the predicted step.
 *
 * The original JSON is walked again (it holds what the parsed trace does
 * not keep: op args, python functions, metadata, deviceProperties,
 * distributedInfo) and copied member by member; only "ts" and "dur"
 * change. Graph tasks take their simulated times; every other event on a
 * thread of the graph (the CPU op tree, ProfilerStep annotations, GPU
 * annotations) is moved by a monotone map of that thread's measured time
 * to simulated time, so nesting is kept; events on threads without tasks
 * follow the steps. ac2g flows are written anew, one pair per launched GPU
 * task, and a "reverie what-if" row carries one annotation per applied
 * model. See docs/internals/kexport.md. */
#ifndef RV_KEXPORT_H
#define RV_KEXPORT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/rv_buf.h"
#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"

/* Default caps: the export's bytes and the original's decompressed bytes. */
#define RV_KEXPORT_MAX_OUTPUT ((size_t)2 << 30)
#define RV_KEXPORT_MAX_INPUT  ((size_t)2 << 30)

typedef struct rv_kexport_opts {
    size_t max_output;  /* cap on the export; 0: RV_KEXPORT_MAX_OUTPUT */
    size_t max_input;   /* cap on the decompressed original; 0: RV_KEXPORT_MAX_INPUT */
    const char *source; /* what the run is, e.g. "predicted" (borrowed; NULL: "predicted") */
} rv_kexport_opts;

/* What an export did, for its metadata and for tests. */
typedef struct rv_kexport_stats {
    size_t events_in;  /* elements of the original's traceEvents */
    size_t events_out; /* events written, flows and annotations included */
    size_t retimed;    /* events given simulated times */
    size_t removed;    /* events of tasks a model removed (left out) */
    size_t flows_in;   /* ac2g flow events of the original (replaced) */
    size_t flows;      /* flow pairs written */
    size_t inserted;   /* tasks a model inserted, written as new events */
    size_t launched;   /* of those, given a launch call (and a flow pair) */
    int64_t shift_ns;  /* added to every time so that none is negative */
} rv_kexport_stats;

/* Writes the run (pg, ps) of the trace whose original JSON is orig[0..len)
 * (borrowed; plain or gzip) to out (borrowed; appended to, its cap
 * applies). bg is the graph built from that trace (borrowed; pg is bg or a
 * what-if clone of it, ps a simulation of pg). applied (borrowed, may be
 * NULL) is the run's "applied" array: one annotation per entry. st may be
 * NULL. Returns 0, or a negative rv_err: RV_ERR_PARSE / RV_ERR_LIMIT from
 * the original, RV_ERR_INVALID when orig is not the trace bg was built
 * from, RV_ERR_LIMIT / RV_ERR_NOMEM from out. */
int rv_kexport_write(const void *orig, size_t len, const rv_graph *bg, const rv_graph *pg,
                     const rv_sim *ps, const json_t *applied, const rv_kexport_opts *o, rv_buf *out,
                     rv_kexport_stats *st, rv_error *err);

/* rv_kexport_write for a what-if answer (borrowed, from rv_run with
 * keep_predicted): its prediction, or with baseline != 0 its baseline. */
int rv_kexport_run(const void *orig, size_t len, const rv_run_result *r, int baseline,
                   const rv_kexport_opts *o, rv_buf *out, rv_kexport_stats *st, rv_error *err);

#endif
