/* The what-if cache (store/rv_db_cache.c): per (trace, request hash), the
 * exact bytes of the answer that was sent, and beside them the figures a
 * fleet row shows (rv_run_summary), so that a fleet-wide what-if reads its
 * rows without parsing JSON. */
#ifndef RV_DB_CACHE_H
#define RV_DB_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "run/rv_run.h"

typedef struct rv_db rv_db;

/* On a hit: *body (new, NUL-terminated, free()) of *len bytes, and *sum
 * (sum may be NULL: not wanted). On a miss: 0 with *body NULL and *len 0.
 * request_hash is 64 lowercase hex characters. */
int rv_db_whatif_cache_get(rv_db *db, int64_t trace_id, const char *request_hash, char **body,
                           size_t *len, rv_run_summary *sum, rv_error *err);
/* Stores (or replaces) an answer: body (borrowed; len bytes of UTF-8 JSON
 * text without NUL bytes, else RV_ERR_INVALID) and its figures (borrowed;
 * NULL stores zeros). RV_ERR_NOTFOUND when the trace does not exist. */
int rv_db_whatif_cache_put(rv_db *db, int64_t trace_id, const char *request_hash, const char *body,
                           size_t len, const rv_run_summary *sum, rv_error *err);

/* One cached figure set found by rv_db_whatif_cache_rows. */
typedef struct rv_db_cache_row {
    int64_t trace_id;
    size_t hash; /* index into the hashes asked for */
    rv_run_summary sum;
    char *body; /* new (free()), only for the hashes marked want_body; else NULL */
} rv_db_cache_row;

/* The cached figures of every (trace, hash) pair of ids[0..nids) x
 * hashes[0..nh) that is stored, in one statement (a fleet shard reads its
 * rows this way instead of one query per row). want_body (may be NULL) marks
 * the hashes whose bodies are wanted too. *rows is new (free with
 * rv_db_cache_rows_free), *nrows its length; rows absent from the cache are
 * simply not there. */
int rv_db_whatif_cache_rows(rv_db *db, const int64_t *ids, size_t nids, const char *const *hashes,
                            const int *want_body, size_t nh, rv_db_cache_row **rows, size_t *nrows,
                            rv_error *err);
/* NULL-safe. */
void rv_db_cache_rows_free(rv_db_cache_row *rows, size_t n);

#endif
