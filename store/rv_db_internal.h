/* Private to store/: the connection pool's innards and the query helpers
 * every module of the store shares. Nothing outside store/ includes this.
 * Cross-file internals are named rv_db__*; file-local helpers are static. */
#ifndef RV_DB_INTERNAL_H
#define RV_DB_INTERNAL_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_db.h"
#include "graph/rv_overhead.h"
#include "ingest/rv_ingest.h"

#define RV_DB__MAX_CONNS 64
/* bytea values cannot exceed 1 GiB; stay clear of it. */
#define RV_DB__HARD_MAX_STORED ((size_t)1000 << 20)
/* Default cap on an original (rv_db_ingest_meta.max_bytes 0). */
#define RV_DB__DEFAULT_MAX_BYTES ((size_t)512 << 20)

/* The deadline of calls long by nature (an ingest's transaction before its
 * bytes are counted, a delete that rebuilds a platform's statistics). */
#define RV_DB__LONG_MS 60000u

/* One pooled connection. */
typedef struct rv_db__conn {
    PGconn *c;
    uint32_t prepared; /* bit i: statement i prepared on this connection */
    int busy;
    unsigned epoch; /* the pool's epoch when this connection was (re)made */
    /* The deadline of the call holding it (monotonic ms; 0 = none) and a
     * duplicate of its socket that the watchdog shuts when the deadline
     * passes (the duplicate is ours, so its number cannot be reused under
     * the watchdog while libpq closes its own). Under the pool's mutex. */
    int64_t deadline_ms;
    int wfd;
    int killed; /* the watchdog shut it: reset before the next use */
} rv_db__conn;

struct rv_db {
    char *conninfo;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Reconnection (under mu): a connection lost anywhere bumps epoch, so
     * every other connection is reset before its next use; while down,
     * resets are tried at most every RV_DB__RETRY_MS and callers in
     * between fail at once. */
    unsigned epoch;
    int down;
    int64_t retry_at_ms;
    unsigned n;
    rv_db__conn conns[RV_DB__MAX_CONNS];
    /* Deadlines (rv_db_set_timeout): 0 = none. The watchdog thread runs
     * while timeout_ms is set; stop asks it to end. */
    unsigned timeout_ms;
    int watchdog_started, stop;
    pthread_t watchdog;
    pthread_cond_t stop_cv;
    rv_db_ingest_hook hook;
    void *hook_ctx;
};

/* Hot statements, prepared once per connection on first use (the table is
 * in rv_db.c). */
enum {
    RV_DB__ST_SNAPSHOT,
    RV_DB__ST_CACHE_GET,
    RV_DB__ST_CACHE_PUT,
    RV_DB__ST_TOKEN_VERIFY,
    RV_DB__ST_JOB_CLAIM,
    RV_DB__ST_COUNT
};

/* Fills *err from the connection's or the result's message (r may be NULL)
 * and returns RV_ERR_NOTFOUND for a foreign-key violation, else
 * RV_ERR_IO. A lost connection or a server that is shutting down or
 * starting up also marks the calling thread (rv_db_take_unavailable). */
int rv_db__fail(rv_error *err, const char *what, PGconn *c, const PGresult *r);

/* Borrows a connection, waiting while all are busy; a broken one is reset
 * first. NULL (and *err) when it cannot be reset. */
rv_db__conn *rv_db__acquire(rv_db *db, rv_error *err);
/* Moves the deadline of the call holding pc to ms from now (0: the pool's
 * timeout), for calls that are long by nature (an ingest's transaction,
 * one chunk of a streamed read). No-op without deadlines. */
void rv_db__deadline(rv_db *db, rv_db__conn *pc, unsigned ms);
/* Gives it back (NULL-safe), rolling back a transaction left open. */
void rv_db__release(rv_db *db, rv_db__conn *pc);

/* PQexecParams with text parameters: the result (PQclear it), or NULL (and
 * *err) unless its status is want. */
PGresult *rv_db__q(rv_db__conn *pc, const char *what, const char *sql, int n,
                   const char *const *vals, ExecStatusType want, rv_error *err);
/* A statement without parameters or rows: 0 or RV_ERR_IO. */
int rv_db__exec(rv_db__conn *pc, const char *what, const char *sql, rv_error *err);
/* A hot statement (RV_DB__ST_*), prepared on first use; lens and fmts may
 * be NULL (all text). Same result contract as rv_db__q. */
PGresult *rv_db__qp(rv_db__conn *pc, int st, const char *const *vals, const int *lens,
                    const int *fmts, int result_binary, ExecStatusType want, rv_error *err);

/* Runs a query returning one text value of JSON on a pooled connection and
 * parses it into *out (new reference). RV_ERR_NOTFOUND when there is no row
 * or it is NULL. */
int rv_db__query_json(rv_db *db, const char *what, const char *sql, int n, const char *const *vals,
                      json_t **out, rv_error *err);

/* Decimal text of an id, for a query parameter. */
void rv_db__id_text(char out[24], int64_t id);

/* gzip of in[0..len) at level 1: 0 and *out (new; free) of *out_len bytes,
 * or RV_ERR_NOMEM / RV_ERR_INTERNAL (rv_db_ingest_prep.c). */
int rv_db__gzip(const void *in, size_t len, uint8_t **out, size_t *out_len, rv_error *err);

/* Everything the transaction writes, computed before it. The strings are
 * copies (meta is borrowed for the prepare call only); t and the original
 * are borrowed. */
struct rv_db_ingest_prep {
    const rv_trace *t;
    char sha256[65];
    size_t len; /* of the original as received */
    int already_gzip;
    const void *stored; /* the original, or gz */
    size_t stored_len;
    uint8_t *gz;
    rv_ingest_facts f;        /* the engine's: snapshot, samples, sketches, summary */
    char *summary_txt, *tags; /* jsonb and text[] literals */
    char *job, *source_format;
    char *pf[5]; /* platform fields, as in rv_db_platform */
    rv_db_platform platform;
    char platform_key[65];
    int32_t rank, world_size;
    char *writer; /* rv_db_ingest_meta.writer (copy), NULL: no ownership check */
    int writer_admin;
    /* The kernel-model sums (f.kmodels) as array literals for
     * trace_kernel_effs: classes text[], buckets int[], n and slog
     * float8[]; all NULL when no kernel was costed. */
    char *keff[4];
};

/* The checks every ingest entry point makes before any work: a trace with
 * events, a non-empty original under the cap (meta may be NULL). */
int rv_db__ingest_validate(const rv_trace *t, const void *orig, size_t len,
                           const rv_db_ingest_meta *meta, rv_error *err);
/* rv_db_ingest_prepare after rv_db__ingest_validate, for an original whose
 * SHA-256 (hex) the caller has computed already. */
int rv_db__ingest_prepare_hashed(const rv_trace *t, const void *orig, size_t len,
                                 const rv_db_ingest_meta *meta, const char *sha,
                                 rv_db_ingest_prep **out, rv_error *err);

/* ---- shared between modules ------------------------------------------------ */

/* The id of the trace with this content hash, 0 when none (rv_db_traces.c). */
int rv_db__trace_id_by_sha(rv_db__conn *pc, const char *sha, int64_t *id, rv_error *err);

/* The id of the platform row of p (key: rv_db_platform_key of p), inserted
 * when new by a statement of its own, outside any transaction
 * (rv_db_platforms.c). */
int rv_db__platform_upsert(rv_db__conn *pc, const rv_db_platform *p, const char *key, int64_t *id,
                           rv_error *err);

/* Recomputes a platform's overhead sketches from its traces' sketches
 * (SQL rv_overheads_rebuild, migrations/0004), inside the caller's
 * transaction; *groups (may be NULL) = rows written (rv_db_overheads.c). */
/* Stores a trace's kernel-model sums (keff: the four array literals of
 * rv_db_ingest_prep) and adds them to its platform's; inside the ingest
 * transaction (rv_db_kmodels.c). */
int rv_db__kmodels_merge_trace(rv_db__conn *pc, const char *platform_id, const char *trace_id,
                               const char *const *keff, rv_error *err);
/* Tells every replica, with the caller's COMMIT, that trace_id's stored
 * graph changed or went (NOTIFY rv_traces; rv_db_listen.h), so that they
 * drop what they cached of it (rv_db_traces.c). */
int rv_db__trace_changed(rv_db__conn *pc, const char *trace_id, rv_error *err);
/* Recomputes a platform's kernel-model sums from its traces'; inside the
 * caller's transaction (rv_db_kmodels.c). */
int rv_db__kmodels_rebuild(rv_db__conn *pc, const char *platform_id, rv_error *err);
int rv_db__overheads_rebuild(rv_db__conn *pc, const char *platform_id, size_t *groups,
                             rv_error *err);

/* Records that an ingested trace is a rank of training job `job` (no-op
 * without a job name or a rank), inside the ingest's transaction
 * (rv_db_training.c). An existing job created by another token than writer
 * (NULL: no check) gives RV_ERR_FORBIDDEN (field "job") unless admin. */
int rv_db__training_record(rv_db__conn *pc, const char *job, int32_t rank, int32_t world_size,
                           const char *writer, int admin, rv_error *err);

#endif
