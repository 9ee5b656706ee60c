/* The trace store: PostgreSQL access through libpq (docs/internals/store.md).
 *
 * Threads: an rv_db is a fixed pool of connections guarded by a mutex and a
 * condition variable. Every function below borrows one connection for the
 * duration of the call and gives it back, so any number of threads may share
 * one rv_db; no PGconn is ever used by two threads at once (libpq's rule).
 * A call blocks while all connections are busy. A connection found broken is
 * reset before its next use.
 *
 * Errors: 0 or a negative rv_err; *err says what failed (the server's
 * message included). RV_ERR_NOTFOUND for a missing id. Database failures
 * are RV_ERR_IO. */
#ifndef RV_DB_H
#define RV_DB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_error.h"
#include "rv_overhead.h"
#include "rv_trace.h"

typedef struct rv_db rv_db;

/* Opens nconns (1..64) connections to conninfo (borrowed). */
int rv_db_open(const char *conninfo, unsigned nconns, rv_db **out, rv_error *err);
/* Closes every connection and frees db. NULL-safe. Callers must be done. */
void rv_db_close(rv_db *db);
/* SELECT 1 on a pooled connection. */
int rv_db_ping(rv_db *db, rv_error *err);

/* ---- migrations ------------------------------------------------------------
 * Files dir/NNNN_title.up.sql and .down.sql (golang-migrate naming), table
 * schema_migrations(version, dirty) holding one row with the current
 * version (golang-migrate's layout, so its CLI can read our databases).
 * Runs under pg_advisory_lock, each file in its own transaction together
 * with the version update, so a crash leaves the previous version intact.
 * dir NULL = rv_db_migrations_dir(). */
int rv_db_migrate(rv_db *db, const char *dir, rv_error *err);
/* Reverts the `steps` most recent migrations (steps <= 0: all of them). */
int rv_db_migrate_down(rv_db *db, const char *dir, int steps, rv_error *err);
/* Current version (-1 when none) and dirty flag. */
int rv_db_schema_version(rv_db *db, int64_t *version, int *dirty, rv_error *err);
/* The migrations directory: $REVERIE_MIGRATIONS, ./migrations, or beside
 * the executable (../share/reverie/migrations, ../../migrations). Returns a
 * static string, or NULL when none exists. */
const char *rv_db_migrations_dir(void);

/* ---- platforms -------------------------------------------------------------- */

typedef struct rv_db_platform {
    const char *gpu_model, *cpu_model, *driver, *runtime_version, *framework;
    int gpus_per_node;
} rv_db_platform;

/* Identity key of a platform: lowercase hex SHA-256 of the six fields (NULL
 * = ""), trimmed, joined by '\n', gpus_per_node in decimal. */
void rv_db_platform_key(const rv_db_platform *p, char out[65]);

/* JSON array of platforms with their trace counts (new reference). */
int rv_db_platform_list(rv_db *db, json_t **out, rv_error *err);

/* ---- ingest ----------------------------------------------------------------- */

/* What the uploader says about a trace; every field optional (NULL, RV_NONE
 * or 0 = take it from the trace). Borrowed for the call. */
typedef struct rv_db_ingest_meta {
    const char *job;
    int32_t rank, world_size;  /* RV_NONE = from the trace */
    const char *source_format; /* default: the trace's, else "kineto" */
    const char *const *tags;
    size_t ntags;
    rv_db_platform platform; /* NULL fields = from the trace */
    size_t max_bytes;        /* cap on the original; 0 = 512 MiB */
} rv_db_ingest_meta;

typedef struct rv_db_ingest_result {
    int64_t trace_id;
    int64_t platform_id;
    int duplicate;   /* 1: same content already stored; trace_id is it */
    size_t samples;  /* overhead samples stored */
    char sha256[65]; /* of the original bytes */
} rv_db_ingest_result;

/* Stores one parsed trace (borrowed) and its original bytes (borrowed, as
 * received: gzip or plain) in ONE transaction: trace row, original (gzip'ed
 * unless it already is), snapshot, overhead samples (COPY), and the
 * platform's statistics for the touched groups. Either all of it commits or
 * nothing is visible. The same content again returns the existing id with
 * duplicate = 1. A trace without events or over the cap stores nothing and
 * returns RV_ERR_INVALID / RV_ERR_LIMIT. meta may be NULL. */
int rv_db_ingest(rv_db *db, const rv_trace *t, const void *orig, size_t len,
                 const rv_db_ingest_meta *meta, rv_db_ingest_result *res, rv_error *err);
/* Parses orig with the Kineto reader, then rv_db_ingest. A duplicate is
 * answered before parsing. Parse errors come back as the reader's. */
int rv_db_ingest_buffer(rv_db *db, const void *orig, size_t len, const rv_db_ingest_meta *meta,
                        rv_db_ingest_result *res, rv_error *err);
/* Same for a file (a spool file), mapped read-only. */
int rv_db_ingest_file(rv_db *db, const char *path, const rv_db_ingest_meta *meta,
                      rv_db_ingest_result *res, rv_error *err);

/* Test hook: called inside the ingest transaction at each stage (1 after
 * the trace row, 2 after the samples COPY, 3 just before COMMIT). Tests use
 * it to kill a process mid-ingest. NULL removes it. */
typedef void (*rv_db_ingest_hook)(int stage, void *ctx);
void rv_db_set_ingest_hook(rv_db *db, rv_db_ingest_hook fn, void *ctx);

/* ---- traces ----------------------------------------------------------------- */

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

/* ---- per-platform overhead statistics ----------------------------------------- */

typedef struct rv_db_overhead_row {
    int type;      /* rv_overhead_type */
    char *op_name; /* "*" = the type's overall row */
    rv_overhead_stat stat;
} rv_db_overhead_row;

/* Rows of a platform, ordered by type then op name. *rows new; free with
 * rv_db_overhead_rows_free. */
int rv_db_overheads_load(rv_db *db, int64_t platform_id, rv_db_overhead_row **rows, size_t *n,
                         rv_error *err);
void rv_db_overhead_rows_free(rv_db_overhead_row *rows, size_t n);
/* The platform of trace_id (*platform_id, may be NULL) and a version of that
 * platform's statistics (text into version, cap bytes; NULL = not wanted)
 * that changes whenever they are recomputed: row count and latest update.
 * With rows non-NULL also the rows, read by the same statement so that they
 * match the version (*rows new, free with rv_db_overhead_rows_free; *n = 0
 * when the platform has no statistics yet). RV_ERR_NOTFOUND: no such trace. */
int rv_db_trace_overheads(rv_db *db, int64_t trace_id, int64_t *platform_id, char *version,
                          size_t cap, rv_db_overhead_row **rows, size_t *n, rv_error *err);
/* Same as a JSON array of {type, op_name, samples, count, mean_us, std_us,
 * median_us, p90_us, updated_at} (new reference). */
int rv_db_overheads_get(rv_db *db, int64_t platform_id, json_t **out, rv_error *err);
/* Recomputes every statistic of a platform (0 = all platforms) from the
 * stored samples; *groups (may be NULL) = rows written. */
int rv_db_overheads_rebuild(rv_db *db, int64_t platform_id, size_t *groups, rv_error *err);

/* ---- what-if cache ------------------------------------------------------------ */

/* *out = the cached result (new reference), or NULL on a miss (returns 0). */
int rv_db_whatif_cache_get(rv_db *db, int64_t trace_id, const char *request_hash, json_t **out,
                           rv_error *err);
/* Stores (or replaces) a result (borrowed). */
int rv_db_whatif_cache_put(rv_db *db, int64_t trace_id, const char *request_hash,
                           const json_t *result, rv_error *err);

/* ---- API tokens ---------------------------------------------------------------
 * Only the SHA-256 of a token is stored. Scopes are the RV_SCOPE_* bits of
 * rv_auth.h, kept as names ('ingest', 'read', 'admin') in the table. */

typedef struct rv_db_token {
    int64_t id;
    char name[128];
    char token_sha256[65];
    unsigned scopes;
    int revoked;
} rv_db_token;

int rv_db_token_create(rv_db *db, const char *name, unsigned scopes, const char *token_sha256,
                       int64_t *id, rv_error *err);
/* Looks a token hash up: 0 and *out filled when it exists and is not revoked
 * (last_used_at is updated), RV_ERR_NOTFOUND otherwise. */
int rv_db_token_verify(rv_db *db, const char *token_sha256, rv_db_token *out, rv_error *err);
int rv_db_token_revoke(rv_db *db, int64_t id, rv_error *err);
/* All tokens (revoked ones only when include_revoked). *rows new. */
int rv_db_token_list(rv_db *db, int include_revoked, rv_db_token **rows, size_t *n, rv_error *err);
void rv_db_token_list_free(rv_db_token *rows, size_t n);

/* ---- job queue ------------------------------------------------------------------
 * Any number of workers in any number of processes claim jobs with
 * SELECT ... FOR UPDATE SKIP LOCKED; enqueue NOTIFYs channel "rv_jobs" with
 * the id as payload. */

typedef struct rv_db_job {
    int64_t id;
    char kind[64];
    json_t *request; /* owned */
    int attempts;
} rv_db_job;

int rv_db_job_enqueue(rv_db *db, const char *kind, const json_t *request, int64_t *id,
                      rv_error *err);
/* Claims the oldest queued job (of kind, or any when NULL) for worker (a
 * name, e.g. host:pid:thread). RV_ERR_NOTFOUND when the queue is empty. */
int rv_db_job_claim(rv_db *db, const char *worker, const char *kind, rv_db_job *out, rv_error *err);
void rv_db_job_clear(rv_db_job *j);
/* progress in [0, 1]; also the worker's heartbeat. */
int rv_db_job_progress(rv_db *db, int64_t id, double progress, rv_error *err);
/* ok: state done with result (borrowed, may be NULL); else failed with
 * error_msg. */
int rv_db_job_finish(rv_db *db, int64_t id, int ok, const json_t *result, const char *error_msg,
                     rv_error *err);
/* JSON of a job: id, kind, state, progress, request, result, error, times. */
int rv_db_job_get(rv_db *db, int64_t id, json_t **out, rv_error *err);
/* Puts running jobs whose heartbeat is older than seconds back in the queue
 * (their worker died). *n (may be NULL) = jobs requeued. */
int rv_db_job_requeue_stale(rv_db *db, int seconds, size_t *n, rv_error *err);

#endif
