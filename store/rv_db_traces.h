/* Stored traces: metadata, listing, deletion, snapshots and originals
 * (store/rv_db_traces.c). */
#ifndef RV_DB_TRACES_H
#define RV_DB_TRACES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_error.h"
#include "rv_trace.h"

typedef struct rv_db rv_db;

/* One trace as a JSON object (new reference): id, job, rank, world_size,
 * platform {...}, uploaded_at, source_format, measured_us, tasks,
 * iterations, content_sha256, original_size, summary, tags. */
int rv_db_trace_get(rv_db *db, int64_t id, json_t **out, rv_error *err);

typedef struct rv_db_trace_filter {
    int64_t platform_id; /* 0 = any */
    const char *job;     /* NULL = any */
    const char *tag;     /* NULL = any */
    int64_t before_id;   /* keyset paging: ids < before_id; 0 = from newest */
    unsigned limit;      /* 0 = 100; capped at 1000 */
} rv_db_trace_filter;

/* JSON array of trace objects, newest first (new reference). f may be NULL. */
int rv_db_trace_list(rv_db *db, const rv_db_trace_filter *f, json_t **out, rv_error *err);
/* All matching ids (limit ignored, capped at 1,000,000), newest first, for
 * fleet-wide work. *ids is new (caller frees). */
int rv_db_trace_ids(rv_db *db, const rv_db_trace_filter *f, int64_t **ids, size_t *n,
                    rv_error *err);
/* Deletes a trace with everything hanging off it and refreshes its
 * platform's statistics, in one transaction. */
int rv_db_trace_delete(rv_db *db, int64_t id, rv_error *err);

/* Loads the stored snapshot of a trace (one indexed read + decode). *out is
 * new (rv_trace_free). */
int rv_db_snapshot_load(rv_db *db, int64_t id, rv_trace **out, rv_error *err);

/* The stored original: *bytes (new, caller frees) of *len bytes. *gzip_wrapped
 * is 1 when the stored bytes are gzip(received bytes), 0 when they are the
 * received bytes. *received_size is the upload's size. */
int rv_db_original_get(rv_db *db, int64_t id, uint8_t **bytes, size_t *len, int *gzip_wrapped,
                       size_t *received_size, rv_error *err);

#endif
