/* The job queue: enqueue with a NOTIFY, claims that never hand one job to
 * two workers (FOR UPDATE SKIP LOCKED), progress as the heartbeat, finish,
 * and the requeue of jobs whose worker died (rv_db_jobs.h). */
#include "rv_db_jobs.h"
#include "rv_db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rv_db_job_enqueue(rv_db *db, const char *kind, const json_t *request, int64_t *id,
                      rv_error *err)
{
    char *txt = request ? json_dumps(request, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
    if (!txt)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    const char *vals[] = {kind, txt};
    rv_db__conn *pc = rv_db__acquire(db, err);
    int rc = RV_ERR_IO;
    if (pc) {
        PGresult *r = rv_db__q(pc, "enqueue job",
                               "WITH j AS (INSERT INTO jobs (kind, request) VALUES ($1, $2::jsonb) "
                               "RETURNING id) SELECT id, pg_notify('rv_jobs', id::text) FROM j",
                               2, vals, PGRES_TUPLES_OK, err);
        if (r) {
            if (id)
                *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            rc = 0;
        }
        PQclear(r);
        rv_db__release(db, pc);
    }
    free(txt);
    return rc;
}

int rv_db_job_claim(rv_db *db, const char *worker, const char *kind, rv_db_job *out, rv_error *err)
{
    memset(out, 0, sizeof(*out));
    const char *vals[] = {worker ? worker : "", kind};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = rv_db__qp(pc, RV_DB__ST_JOB_CLAIM, vals, NULL, NULL, 0, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else if (PQntuples(r) == 0) {
        rc = RV_ERR_NOTFOUND; /* an empty queue is not worth a message */
        if (err)
            rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no queued job");
    } else {
        out->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        snprintf(out->kind, sizeof(out->kind), "%s", PQgetvalue(r, 0, 1));
        out->request = json_loads(PQgetvalue(r, 0, 2), JSON_DECODE_ANY, NULL);
        out->attempts = atoi(PQgetvalue(r, 0, 3));
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

void rv_db_job_clear(rv_db_job *j)
{
    if (!j)
        return;
    json_decref(j->request);
    memset(j, 0, sizeof(*j));
}

static int job_update(rv_db *db, const char *what, const char *sql, int n, const char *const *vals,
                      rv_error *err)
{
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__q(pc, what, sql, n, vals, PGRES_COMMAND_OK, err);
    int rc = !r ? RV_ERR_IO
             : strcmp(PQcmdTuples(r), "0") == 0
                 ? rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "%s: no such running job", what)
                 : 0;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_job_progress(rv_db *db, int64_t id, double progress, rv_error *err)
{
    char id_s[24], p_s[32];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    snprintf(p_s, sizeof(p_s), "%.6f", progress < 0 ? 0 : progress > 1 ? 1 : progress);
    const char *vals[] = {id_s, p_s};
    return job_update(db, "job progress",
                      "UPDATE jobs SET progress = $2, heartbeat_at = now() WHERE id = $1 AND "
                      "state = 'running'",
                      2, vals, err);
}

int rv_db_job_finish(rv_db *db, int64_t id, int ok, const json_t *result, const char *error_msg,
                     rv_error *err)
{
    char id_s[24];
    char *txt = result ? json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s, ok ? "done" : "failed", txt, ok ? NULL : error_msg};
    int rc = job_update(db, "job finish",
                        "UPDATE jobs SET state = $2, result = $3::jsonb, error = $4, progress = "
                        "CASE WHEN $2 = 'done' THEN 1 ELSE progress END, finished_at = now(), "
                        "heartbeat_at = now(), locked_by = NULL WHERE id = $1 AND state = "
                        "'running'",
                        4, vals, err);
    free(txt);
    return rc;
}

int rv_db_job_get(rv_db *db, int64_t id, json_t **out, rv_error *err)
{
    char id_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    int rc =
        rv_db__query_json(db, "job",
                          "SELECT json_build_object('id', id, 'kind', kind, 'state', state, "
                          "'progress', progress, 'request', request, 'result', result, 'error', "
                          "error, 'attempts', attempts, 'locked_by', locked_by, 'created_at', "
                          "created_at, 'started_at', started_at, 'finished_at', finished_at)::text "
                          "FROM jobs WHERE id = $1",
                          1, vals, out, err);
    if (rc == RV_ERR_NOTFOUND)
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no job with id %lld", (long long)id);
    return rc;
}

int rv_db_job_requeue_stale(rv_db *db, int seconds, size_t *n, rv_error *err)
{
    char s[16];
    snprintf(s, sizeof(s), "%d", seconds);
    const char *vals[] = {s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r =
        rv_db__q(pc, "requeue jobs",
                 "UPDATE jobs SET state = 'queued', locked_by = NULL WHERE state = 'running' "
                 "AND heartbeat_at < now() - make_interval(secs => $1::int)",
                 1, vals, PGRES_COMMAND_OK, err);
    if (r && n)
        *n = (size_t)strtoull(PQcmdTuples(r), NULL, 10);
    int rc = r ? 0 : RV_ERR_IO;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}
