/* Streaming reader for Kineto / PyTorch profiler Chrome-trace JSON.
 *
 * Reads plain or gzip input (detected by magic bytes) in chunks, never builds
 * a DOM, and keeps only the events the graph needs, so memory is proportional
 * to the events kept, not to the JSON. Accepts {"traceEvents": [...]} and a
 * bare top-level array, modern and legacy category names, ac2g flows (used
 * to fill a missing correlation), fractional ts, integers above 2^63. */
#ifndef RV_KINETO_H
#define RV_KINETO_H

#include <stddef.h>
#include <stdio.h>

#include "util/rv_error.h"
#include "trace/rv_trace.h"

typedef struct rv_kineto_opts {
    int keep_python;        /* keep python_function events (default 0) */
    size_t max_input_bytes; /* cap on decompressed bytes; 0 = 16 GiB */
    size_t max_events;      /* cap on events kept; 0 = RV_TRACE_MAX_EVENTS */
    /* Reading on two cores (docs/internals/kineto-reader.md, "Two
     * cores"): 0 lets the reader choose (inputs of 2 MiB and more, on a
     * machine with two cores or more), 1 keeps it on the caller's thread.
     * chunk_bytes, when set, forces the two-core read with parts of about
     * that many bytes (the tests' small parts); 0 = one 256 KiB window. */
    int threads;
    size_t chunk_bytes;
    /* When set, receives how many parts read ahead were taken in whole
     * (0 on one core): for tests and benchmarks. */
    size_t *parts_taken;
} rv_kineto_opts;

/* Parses the file at path. On success returns 0 and *out (new, caller frees
 * with rv_trace_free). On failure returns a negative rv_err, *out is NULL,
 * and *err says what and where (byte offset in the decompressed stream,
 * event index). opts may be NULL for defaults. */
int rv_kineto_read_file(const char *path, const rv_kineto_opts *opts, rv_trace **out,
                        rv_error *err);

/* Same for an open stream (read to EOF; not closed). */
int rv_kineto_read_stream(FILE *f, const rv_kineto_opts *opts, rv_trace **out, rv_error *err);

/* Same for a memory buffer (borrowed), plain or gzip. */
int rv_kineto_read_buffer(const void *data, size_t len, const rv_kineto_opts *opts, rv_trace **out,
                          rv_error *err);

/* Whether a read failed because the input is a PyTorch execution trace
 * (top-level "schema" and "nodes") rather than a Kineto trace. */
int rv_kineto_error_is_et(const rv_error *err);

/* The rv_cat of a "cat" value s[0..n) as the reader classifies it: -2 for
 * the flow categories (ac2g, async_gpu, async), -1 for one it does not
 * keep. The exporter (rv_kexport.c) uses it to walk the same events. */
int rv_kineto_category(const char *s, size_t n);

/* Whether the reader keeps an event of phase ph, category cat (an rv_cat,
 * or negative) and name name[0..len) (NULL: no text name): a complete
 * event of a kept category, and of python_function events only those that
 * mark a module instance unless keep_python. The exporter asks the same
 * question to find the reader's k-th event again. */
int rv_kineto_keeps(int ph, int cat, const char *name, size_t len, int keep_python);

/* The longest event name the reader takes (longer fails the read). */
#define RV_KINETO_MAX_NAME ((size_t)4 << 20)

#endif
