/* The job queue (store/rv_db_jobs.c).
 *
 * Any number of workers in any number of processes claim jobs with
 * SELECT ... FOR UPDATE SKIP LOCKED; enqueue NOTIFYs channel "rv_jobs" with
 * the id as payload. */
#ifndef RV_DB_JOBS_H
#define RV_DB_JOBS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_error.h"

typedef struct rv_db rv_db;

typedef struct rv_db_job {
    int64_t id;
    char kind[64];
    json_t *request; /* owned */
    int attempts;
} rv_db_job;

/* request is borrowed (NULL = {}); *id may be NULL. */
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
