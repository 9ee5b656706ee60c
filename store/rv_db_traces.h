/* Stored traces: metadata, listing, deletion, snapshots and originals
 * (store/rv_db_traces.c). */
#ifndef RV_DB_TRACES_H
#define RV_DB_TRACES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "trace/rv_trace.h"

typedef struct rv_db rv_db;

/* One trace as a JSON object (new reference): id, job, rank, world_size,
 * platform {...}, uploaded_at, source_format, measured_us, tasks,
 * iterations, content_sha256, original_size, summary, tags. */
int rv_db_trace_get(rv_db *db, int64_t id, json_t **out, rv_error *err);

typedef struct rv_db_trace_filter {
    int64_t platform_id; /* 0 = any */
    const char *job;     /* NULL = any */
    const char *tag;     /* NULL = any */
    const char *since;   /* NULL = any; uploaded at or after this time
                            (rv_db_time_parse; RV_ERR_INVALID, field
                            "since", when it is not one) */
    const int64_t *ids;  /* NULL = any; else only these nids ids */
    size_t nids;
    int64_t before_id; /* keyset paging: ids < before_id; 0 = from newest */
    unsigned limit;    /* 0 = 100; capped at 1000 */
} rv_db_trace_filter;

/* Parses a time as RFC 3339 / ISO 8601 with an optional time zone:
 * YYYY-MM-DD, optionally followed by 'T' (or 't', or a space) and HH:MM,
 * :SS, a fraction of up to 9 digits (kept to the microsecond), and Z or
 * +HH:MM / -HH:MM (also +HHMM, +HH); no zone means UTC. Every field is
 * range-checked (days per month, leap years). Nothing else is accepted
 * (no "yesterday", "now", "epoch" or "infinity", which PostgreSQL's own
 * input takes). Writes the canonical form "YYYY-MM-DDTHH:MM:SS.ffffff+HH:MM"
 * (at most 32 bytes with the NUL) to out[cap], for a timestamptz
 * parameter. 0, or RV_ERR_INVALID. */
#define RV_DB_TIME_MAX 33
int rv_db_time_parse(const char *s, char *out, size_t cap);

/* JSON array of trace objects, newest first (new reference). f may be NULL. */
int rv_db_trace_list(rv_db *db, const rv_db_trace_filter *f, json_t **out, rv_error *err);
/* All matching ids (newest first; at most f->limit, or 1,000,000 when it
 * is 0), for fleet-wide work. *ids is new (caller frees). */
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

/* What is stored for a trace's original. */
typedef struct rv_db_original_info {
    uint64_t stored;   /* bytes stored (a gzip stream either way) */
    int gzip_wrapped;  /* 1: gzip(received bytes); 0: the received bytes (gzip) */
    uint64_t received; /* the upload's size */
} rv_db_original_info;

/* Streams the stored original of trace id into fd (borrowed; written at its
 * offset), read from the database RV_DB_ORIGINAL_CHUNK bytes at a time, so
 * that memory stays small whatever the trace inflates to. mode says what
 * is written (RV_DB_ORIGINAL_*). Past max_out bytes inflated
 * written (0: no cap) RV_ERR_LIMIT, field "max_trace_bytes". *info and
 * *written may be NULL. RV_ERR_NOTFOUND for no such trace, RV_ERR_IO (disk
 * or database), RV_ERR_PARSE for stored bytes that do not inflate. */
#define RV_DB_ORIGINAL_CHUNK ((size_t)1 << 20)
enum {
    RV_DB_ORIGINAL_STORED = 0,      /* the stored bytes (gzip) */
    RV_DB_ORIGINAL_PLAIN = 1,       /* the trace's JSON */
    RV_DB_ORIGINAL_AS_RECEIVED = 2, /* the bytes as uploaded */
};
int rv_db_original_write(rv_db *db, int64_t id, int fd, int mode, uint64_t max_out,
                         rv_db_original_info *info, uint64_t *written, rv_error *err);

#endif
