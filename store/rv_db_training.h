/* Training jobs: the traces of one distributed run, grouped by job name and
 * rank (store/rv_db_training.c, migrations/0006_training_jobs.up.sql).
 *
 * A stored trace belongs to the training job its job name says once its
 * rank is known (from the upload or the trace's distributedInfo). The rank
 * of a job is the newest such trace of that rank; older uploads of the same
 * rank stay listed but unused. Deleting a trace removes it from its job. */
#ifndef RV_DB_TRAINING_H
#define RV_DB_TRAINING_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

typedef struct rv_db rv_db;

/* At most this many missing ranks are listed by number; missing_count
 * always says how many there are. */
#define RV_DB_TRAINING_MISSING_MAX 1024

/* JSON array of training jobs, newest first (new reference): each
 * {id, name, world_size, ranks_present, ranks: [int], missing: [int],
 * missing_count, complete, traces, created_at, updated_at}. Keyset paging:
 * ids below before_id (0 = from the newest); limit 0 = 100, capped at
 * 1000. */
int rv_db_training_list(rv_db *db, int64_t before_id, unsigned limit, json_t **out, rv_error *err);

/* One training job as JSON (new reference): the list's fields plus
 * "rank_traces": [{rank, trace_id, world_size, measured_us, uploaded_at,
 * used}], every trace of the job, used = the one the job's what-ifs
 * simulate for that rank. RV_ERR_NOTFOUND for no such id. */
int rv_db_training_get(rv_db *db, int64_t id, json_t **out, rv_error *err);

/* Whether token writer (borrowed; NULL: anyone) may add ranks to the job
 * named name: 0 when there is no such job, writer created it, or admin;
 * RV_ERR_FORBIDDEN (field "job") when another token did; RV_ERR_IO. */
int rv_db_training_may_write(rv_db *db, const char *name, const char *writer, int admin,
                             rv_error *err);

/* The id of the training job named name (borrowed); RV_ERR_NOTFOUND when
 * there is none (no trace of that name has a rank). */
int rv_db_training_id(rv_db *db, const char *name, int64_t *id, rv_error *err);

/* One rank of a job as the what-ifs use it. */
typedef struct rv_db_training_rank {
    int32_t rank;
    int64_t trace_id;
} rv_db_training_rank;

/* A job's identity and the trace used for each present rank, in rank
 * order. */
typedef struct rv_db_training_job {
    int64_t id;
    char *name;
    int32_t world_size; /* -1 when no rank declared one */
    size_t nranks;
    rv_db_training_rank *ranks;
} rv_db_training_job;

/* Loads job id's ranks. *out is new (rv_db_training_job_free).
 * RV_ERR_NOTFOUND for no such id. */
int rv_db_training_ranks(rv_db *db, int64_t id, rv_db_training_job **out, rv_error *err);
/* NULL-safe. */
void rv_db_training_job_free(rv_db_training_job *j);

#endif
