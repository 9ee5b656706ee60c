/* Ingest: what a trace's bytes become before anything is stored. The
 * readers turn the bytes into a trace (rv_ingest_read: Kineto or an
 * execution trace alone); rv_ingest_facts_of computes what the store keeps
 * beside the original: the checks the simulator would make later, the
 * measured step and summary, the snapshot, the host-overhead samples and
 * their sketches, and the kernel-model sums of the trace's GPU. No
 * database and no network here: the store turns these into rows
 * (store/rv_db_ingest_prep.c), the server and the CLI call both. */
#ifndef RV_INGEST_H
#define RV_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cost/rv_kmodel_acc.h"
#include "graph/rv_overhead.h"
#include "trace/rv_trace.h"
#include "util/rv_error.h"

/* What the bytes are. */
typedef enum rv_ingest_format {
    RV_INGEST_KINETO = 0, /* a Kineto / PyTorch profiler trace */
    RV_INGEST_ET,         /* a PyTorch execution trace alone, modelled on a GPU */
} rv_ingest_format;

typedef struct rv_ingest_opts {
    rv_ingest_format format;
    size_t max_input_bytes; /* decompressed; 0 = the reader's */
    size_t max_events;      /* Kineto: events kept; 0 = the reader's */
    /* ET: the GPU it is laid out on (borrowed). NULL or "": a stand-in
     * lays it out and the trace then names no GPU, so its what-ifs must. */
    const char *gpu;
} rv_ingest_opts;

/* The GPU an ET read without one is laid out on for its stored snapshot
 * (summary, timeline). */
#define RV_INGEST_STANDIN_GPU "A100-SXM4-80GB"

/* Parses data (borrowed; plain, gzip or, for an ET, tar) as o says.
 * Returns 0 and *out (new; rv_trace_free), or the reader's error. An ET's
 * errors name where they are: err->field "et" for the document, "gpu" for
 * a GPU the model cannot lay it out on (RV_ERR_UNSUPPORTED). The Kineto
 * reader's own errors come back as they are (rv_kineto_error_is_et says
 * when the bytes were an ET). */
int rv_ingest_read(const void *data, size_t len, const rv_ingest_opts *o, rv_trace **out,
                   rv_error *err);

/* What the store keeps beside a trace's original. */
typedef struct rv_ingest_facts {
    int modelled;       /* an ET alone: nothing measured, no platform figures */
    double measured_us; /* the measured step (0: modelled or none) */
    int iterations;
    json_t *summary; /* events, categories, devices, span, GPU busy time, ... */
    uint8_t *snap;   /* the binary snapshot (rv_snapshot) */
    size_t snap_len;
    rv_overhead_samples samples; /* host overheads (none when modelled) */
    rv_overhead_sketch_group *sketches;
    size_t nsketches;
    rv_kmodel_acc *kmodels; /* the kernel-model sums on the trace's GPU; NULL: none */
} rv_ingest_facts;

/* Computes f for t (borrowed) measured on gpu (the platform's GPU model,
 * may be NULL or ""), modelled when t is an execution trace alone.
 * Refuses what the simulator would refuse on every later request: no GPU
 * work (RV_ERR_UNSUPPORTED), or what rv_graph_check_trace finds. Returns 0
 * (release with rv_ingest_facts_free) or a negative rv_err; on error f
 * holds nothing. */
int rv_ingest_facts_of(const rv_trace *t, const char *gpu, int modelled, rv_ingest_facts *f,
                       rv_error *err);
/* Frees what f holds; NULL-safe, and safe on a zeroed f. */
void rv_ingest_facts_free(rv_ingest_facts *f);

#endif
