/* Ingest: one trace into the store (store/rv_db_ingest.c).
 *
 * Two steps, so that a database connection is held only for SQL:
 *   rv_db_ingest_prepare  pure CPU, no database: checks, content hash,
 *                         gzip of the original, snapshot encoding,
 *                         overhead-sample extraction, summary;
 *   rv_db_ingest_commit   the SQL: duplicate check, platform row, then ONE
 *                         transaction writing the trace row, original,
 *                         snapshot, samples (COPY) and the platform's
 *                         statistics for the touched groups.
 * rv_db_ingest, rv_db_ingest_buffer and rv_db_ingest_file do both.
 * This header has the types, the SQL half and the entry points;
 * rv_db_ingest_prep.h the CPU half. */
#ifndef RV_DB_INGEST_H
#define RV_DB_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "rv_db_platforms.h"
#include "util/rv_error.h"
#include "trace/rv_trace.h"

typedef struct rv_db rv_db;

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
    /* Caps on the parsed trace, which bound what it costs to load and
     * simulate later: past one the ingest fails with RV_ERR_LIMIT and
     * err->field "max_trace_bytes" or "max_events". */
    size_t max_trace_bytes; /* decompressed JSON; 0 = the reader's (16 GiB) */
    size_t max_events;      /* events kept; 0 = the reader's (RV_TRACE_MAX_EVENTS) */
    /* The uploading token's id: a rank for an existing training job made
     * by another token is refused (RV_ERR_FORBIDDEN, field "job") unless
     * writer_admin. NULL: no check (the CLI, tests, no authentication). */
    const char *writer;
    int writer_admin;
} rv_db_ingest_meta;

typedef struct rv_db_ingest_result {
    int64_t trace_id;
    int64_t platform_id;
    int duplicate;   /* 1: same content already stored; trace_id is it */
    size_t samples;  /* overhead samples summarized into its sketches */
    char sha256[65]; /* of the original bytes */
} rv_db_ingest_result;

/* Everything the transaction writes, computed before it
 * (rv_db_ingest_prepare in rv_db_ingest_prep.h). */
typedef struct rv_db_ingest_prep rv_db_ingest_prep;

/* The SQL half: stores a prepared trace (borrowed) in ONE transaction. Either
 * all of it commits or nothing is visible. The same content again returns
 * the existing id with duplicate = 1 and writes nothing. */
int rv_db_ingest_commit(rv_db *db, const rv_db_ingest_prep *p, rv_db_ingest_result *res,
                        rv_error *err);
/* Stores one parsed trace (borrowed) and its original bytes (borrowed, as
 * received: gzip or plain): prepare, then commit. A duplicate is answered
 * before the CPU work. meta may be NULL. */
int rv_db_ingest(rv_db *db, const rv_trace *t, const void *orig, size_t len,
                 const rv_db_ingest_meta *meta, rv_db_ingest_result *res, rv_error *err);
/* Parses orig with the Kineto reader (gunzip included), then prepare and
 * commit. A duplicate is answered before parsing. Parse errors come back as
 * the reader's. */
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

#endif
