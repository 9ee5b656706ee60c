/* The job queue (store/rv_db_jobs.c).
 *
 * Any number of workers in any number of processes claim jobs with
 * SELECT ... FOR UPDATE SKIP LOCKED; enqueue NOTIFYs channel "rv_jobs" with
 * the id as payload.
 *
 * A parent job (a fleet what-if) expands into shard jobs once: each shard
 * row carries (parent_id, shard_index), unique together, and the parent's
 * expanded_at, all set in one transaction, so expanding again (a parent
 * claimed a second time after a restart) inserts nothing. Finishing a shard
 * bumps its parent's counters in the same transaction; exactly one caller
 * learns that it finished the parent's last shard. States: queued, running,
 * done, failed, cancelled. */
#ifndef RV_DB_JOBS_H
#define RV_DB_JOBS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

typedef struct rv_db rv_db;

typedef struct rv_db_job {
    int64_t id;
    char kind[64];
    json_t *request; /* owned */
    int attempts;
    int64_t parent_id; /* a shard's parent, 0 for other jobs */
    int expanded;      /* a parent whose shards are queued already */
} rv_db_job;

/* request is borrowed (NULL = {}); *id may be NULL. */
int rv_db_job_enqueue(rv_db *db, const char *kind, const json_t *request, int64_t *id,
                      rv_error *err);
/* Same, recording who queued it (borrowed, NULL = nobody: no
 * authentication), for rv_db_job_owner. */
int rv_db_job_enqueue_by(rv_db *db, const char *kind, const json_t *request, const char *created_by,
                         int64_t *id, rv_error *err);
/* Claims a queued job (of kind, or any when NULL) for worker (a name, e.g.
 * host:pid): the lowest shard index first across parents (jobs that are no
 * shard count as index 0), then the oldest. RV_ERR_NOTFOUND when the queue
 * is empty. */
int rv_db_job_claim(rv_db *db, const char *worker, const char *kind, rv_db_job *out, rv_error *err);
void rv_db_job_clear(rv_db_job *j);
/* progress in [0, 1]; also the worker's heartbeat. RV_ERR_NOTFOUND when
 * the job is no longer running (cancelled, or requeued and taken by
 * another worker): the worker should stop. */
int rv_db_job_progress(rv_db *db, int64_t id, double progress, rv_error *err);
/* ok: state done with result (borrowed, may be NULL); else failed with
 * error_msg. RV_ERR_NOTFOUND when the job is not running. */
int rv_db_job_finish(rv_db *db, int64_t id, int ok, const json_t *result, const char *error_msg,
                     rv_error *err);
/* Puts a running job back in the queue at once (its worker is stopping). */
int rv_db_job_release(rv_db *db, int64_t id, rv_error *err);
/* JSON of a job: id, kind, state, progress, request, result, error, times. */
int rv_db_job_get(rv_db *db, int64_t id, json_t **out, rv_error *err);
/* Puts running jobs whose heartbeat is older than seconds back in the queue
 * (their worker died). An expanded parent has no worker of its own while
 * its shards run; it is requeued only once all of them are finished (the
 * worker that was to merge them died). *n (may be NULL) = jobs requeued. */
int rv_db_job_requeue_stale(rv_db *db, int seconds, size_t *n, rv_error *err);

/* ---- parents and shards ---------------------------------------------------- */

/* Expands the running parent into shards of kind: requests (a JSON array,
 * borrowed) element i becomes shard i. One transaction: when the parent is
 * not expanded yet the shards are inserted (ON CONFLICT (parent_id,
 * shard_index) DO NOTHING) and the parent gets expanded_at, its shard
 * count and info (borrowed, may be NULL; kept in its expansion column);
 * when it is, nothing is written. *nshards (may be NULL) = the parent's
 * shard count either way. RV_ERR_NOTFOUND when the parent is not running
 * (cancelled meanwhile). */
int rv_db_job_expand(rv_db *db, int64_t parent, const char *kind, const json_t *requests,
                     const json_t *info, size_t *nshards, rv_error *err);

typedef struct rv_db_job_counts {
    char state[16];
    int expanded;
    size_t shards, done, failed;
    json_t *info; /* the expansion info (new reference, may be NULL) */
} rv_db_job_counts;

/* A parent's state and counters (one row read). Free out->info with
 * json_decref. */
int rv_db_job_counts_get(rv_db *db, int64_t parent, rv_db_job_counts *out, rv_error *err);

/* Finishes a running shard like rv_db_job_finish and, in the same
 * transaction, counts it on its parent (which also heartbeats the parent
 * and sets its progress). *last = 1 for exactly one caller per parent: the
 * one that finished its last shard; it should merge. RV_ERR_NOTFOUND when
 * the shard was not running (cancelled). *parent may be NULL. */
int rv_db_job_finish_shard(rv_db *db, int64_t shard, int ok, const json_t *result,
                           const char *error_msg, int64_t *parent, int *last, rv_error *err);

/* The results of a parent's done shards in shard order: *out (new) is a
 * JSON array of their result objects; *first_error (cap bytes, may be
 * NULL) the error of its first failed shard, "" when none. */
int rv_db_job_shard_results(rv_db *db, int64_t parent, json_t **out, char *first_error, size_t cap,
                            rv_error *err);

/* Who queued a job (into owner, cap bytes; "" when nobody was recorded).
 * RV_ERR_NOTFOUND when there is no such job. */
int rv_db_job_owner(rv_db *db, int64_t id, char *owner, size_t cap, rv_error *err);

/* Cancels a job and its shards that are queued or running (state
 * cancelled, finished now). Jobs already done, failed or cancelled stay as
 * they are. *out (new, may be NULL) is the job as rv_db_job_get gives it
 * afterwards. RV_ERR_NOTFOUND when there is no such job. */
int rv_db_job_cancel(rv_db *db, int64_t id, json_t **out, rv_error *err);

#endif
