/* The job queue: enqueue with a NOTIFY, claims that never hand one job to
 * two workers (FOR UPDATE SKIP LOCKED), progress as the heartbeat, finish,
 * release, cancel, the requeue of jobs whose worker died, and the parent /
 * shard bookkeeping of fleet jobs: expansion once, counters bumped with
 * each shard's finish, results in shard order (rv_db_jobs.h). */
#include "rv_db_jobs.h"
#include "rv_db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rv_db_job_enqueue_by(rv_db *db, const char *kind, const json_t *request, const char *created_by,
                         int64_t *id, rv_error *err)
{
    char *txt = request ? json_dumps(request, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
    if (!txt)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    const char *vals[] = {kind, txt, created_by && *created_by ? created_by : NULL};
    rv_db__conn *pc = rv_db__acquire(db, err);
    int rc = RV_ERR_IO;
    if (pc) {
        PGresult *r = rv_db__q(
            pc, "enqueue job",
            "WITH j AS (INSERT INTO jobs (kind, request, created_by) VALUES ($1, "
            "$2::jsonb, $3) RETURNING id) SELECT id, pg_notify('rv_jobs', id::text) FROM j",
            3, vals, PGRES_TUPLES_OK, err);
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

int rv_db_job_enqueue(rv_db *db, const char *kind, const json_t *request, int64_t *id,
                      rv_error *err)
{
    return rv_db_job_enqueue_by(db, kind, request, NULL, id, err);
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
        out->parent_id = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
        out->expanded = PQgetvalue(r, 0, 5)[0] == 't';
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
    rv_db__id_text(id_s, id);
    snprintf(p_s, sizeof(p_s), "%.6f", progress < 0 ? 0 : progress > 1 ? 1 : progress);
    const char *vals[] = {id_s, p_s};
    return job_update(db, "job progress",
                      "UPDATE jobs SET progress = $2, heartbeat_at = now() WHERE id = $1 AND "
                      "state = 'running'",
                      2, vals, err);
}

#define FINISH_SQL                                                                                 \
    "UPDATE jobs SET state = $2, result = $3::jsonb, error = $4, progress = CASE WHEN $2 = "       \
    "'done' THEN 1 ELSE progress END, finished_at = now(), heartbeat_at = now(), locked_by = "     \
    "NULL WHERE id = $1 AND state = 'running'"

int rv_db_job_finish(rv_db *db, int64_t id, int ok, const json_t *result, const char *error_msg,
                     rv_error *err)
{
    char id_s[24];
    char *txt = result ? json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    rv_db__id_text(id_s, id);
    const char *vals[] = {id_s, ok ? "done" : "failed", txt, ok ? NULL : error_msg};
    int rc = job_update(db, "job finish", FINISH_SQL, 4, vals, err);
    free(txt);
    return rc;
}

int rv_db_job_release(rv_db *db, int64_t id, rv_error *err)
{
    char id_s[24];
    rv_db__id_text(id_s, id);
    const char *vals[] = {id_s};
    return job_update(db, "job release",
                      "UPDATE jobs SET state = 'queued', locked_by = NULL WHERE id = $1 AND state "
                      "= 'running'",
                      1, vals, err);
}

int rv_db_job_get(rv_db *db, int64_t id, json_t **out, rv_error *err)
{
    char id_s[24];
    rv_db__id_text(id_s, id);
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
    PGresult *r = rv_db__q(pc, "requeue jobs",
                           "UPDATE jobs SET state = 'queued', locked_by = NULL WHERE state = "
                           "'running' AND heartbeat_at < now() - make_interval(secs => $1::int) "
                           "AND (expanded_at IS NULL OR shards_done + shards_failed >= shards)",
                           1, vals, PGRES_COMMAND_OK, err);
    if (r && n)
        *n = (size_t)strtoull(PQcmdTuples(r), NULL, 10);
    int rc = r ? 0 : RV_ERR_IO;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

/* ---- parents and shards ---------------------------------------------------- */

int rv_db_job_expand(rv_db *db, int64_t parent, const char *kind, const json_t *requests,
                     const json_t *info, size_t *nshards, rv_error *err)
{
    char id_s[24], n_s[24];
    char *reqs = json_dumps(requests, JSON_COMPACT);
    char *inf = info ? json_dumps(info, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    PGresult *r = NULL;
    int rc;

    if (!reqs || (info && !inf)) {
        free(reqs);
        free(inf);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    rv_db__id_text(id_s, parent);
    snprintf(n_s, sizeof(n_s), "%zu", json_array_size(requests));
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc) {
        free(reqs);
        free(inf);
        return RV_ERR_IO;
    }
    rc = rv_db__exec(pc, "BEGIN", "BEGIN", err);
    if (rc)
        goto out;
    const char *v1[] = {id_s};
    r = rv_db__q(pc, "expand: lock parent",
                 "SELECT state, expanded_at IS NOT NULL, shards FROM jobs WHERE id = $1 FOR UPDATE",
                 1, v1, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) == 0 || strcmp(PQgetvalue(r, 0, 0), "running") != 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "job %lld is not running",
                          (long long)parent);
        goto out;
    }
    if (PQgetvalue(r, 0, 1)[0] == 't') {
        /* Expanded before (by this job's previous claim): nothing to do. */
        if (nshards)
            *nshards = (size_t)strtoull(PQgetvalue(r, 0, 2), NULL, 10);
        rc = rv_db__exec(pc, "COMMIT", "COMMIT", err);
        goto out;
    }
    PQclear(r);
    const char *v2[] = {id_s, kind, reqs};
    r = rv_db__q(pc, "expand: insert shards",
                 "INSERT INTO jobs (kind, request, parent_id, shard_index, created_by) SELECT $2, "
                 "x.r, $1, (x.o - 1)::int, (SELECT created_by FROM jobs WHERE id = $1) FROM "
                 "jsonb_array_elements($3::jsonb) WITH ORDINALITY AS x(r, o) ON CONFLICT "
                 "(parent_id, shard_index) DO NOTHING",
                 3, v2, PGRES_COMMAND_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    PQclear(r);
    const char *v3[] = {id_s, n_s, inf};
    /* The shards are work for every replica: the NOTIFY goes out with the
     * COMMIT (rv_db_listen.h). */
    r = rv_db__q(pc, "expand: mark parent",
                 "WITH u AS (UPDATE jobs SET expanded_at = now(), shards = $2::int, expansion = "
                 "$3::jsonb, heartbeat_at = now(), progress = 0 WHERE id = $1 RETURNING id) "
                 "SELECT pg_notify('rv_jobs', id::text) FROM u",
                 3, v3, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    PQclear(r);
    r = rv_db__q(pc, "expand: notify", "SELECT pg_notify('rv_jobs', $1)", 1, v1, PGRES_TUPLES_OK,
                 err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (nshards)
        *nshards = json_array_size(requests);
    rc = rv_db__exec(pc, "COMMIT", "COMMIT", err);
out:
    PQclear(r);
    rv_db__release(db, pc); /* rolls back what is left open */
    free(reqs);
    free(inf);
    return rc;
}

int rv_db_job_counts_get(rv_db *db, int64_t parent, rv_db_job_counts *out, rv_error *err)
{
    char id_s[24];
    memset(out, 0, sizeof(*out));
    rv_db__id_text(id_s, parent);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = rv_db__q(pc, "job counts",
                           "SELECT state, expanded_at IS NOT NULL, shards, shards_done, "
                           "shards_failed, expansion::text FROM jobs WHERE id = $1",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no job with id %lld", (long long)parent);
    } else {
        snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(r, 0, 0));
        out->expanded = PQgetvalue(r, 0, 1)[0] == 't';
        out->shards = (size_t)strtoull(PQgetvalue(r, 0, 2), NULL, 10);
        out->done = (size_t)strtoull(PQgetvalue(r, 0, 3), NULL, 10);
        out->failed = (size_t)strtoull(PQgetvalue(r, 0, 4), NULL, 10);
        if (!PQgetisnull(r, 0, 5))
            out->info = json_loads(PQgetvalue(r, 0, 5), JSON_DECODE_ANY, NULL);
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_job_finish_shard(rv_db *db, int64_t shard, int ok, const json_t *result,
                           const char *error_msg, int64_t *parent, int *last, rv_error *err)
{
    char id_s[24], parent_s[24] = "";
    char *txt = result ? json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    const char *state = ok ? "done" : "failed";
    PGresult *r = NULL;
    int rc;

    *last = 0;
    if (parent)
        *parent = 0;
    rv_db__id_text(id_s, shard);
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc) {
        free(txt);
        return RV_ERR_IO;
    }
    rc = rv_db__exec(pc, "BEGIN", "BEGIN", err);
    if (rc)
        goto out;
    const char *v1[] = {id_s, state, txt, ok ? NULL : error_msg};
    r = rv_db__q(pc, "shard finish", FINISH_SQL " RETURNING coalesce(parent_id, 0)", 4, v1,
                 PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "shard finish: no such running job");
        goto out;
    }
    snprintf(parent_s, sizeof(parent_s), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    r = NULL;
    if (strcmp(parent_s, "0") != 0) {
        /* The parent's row lock serializes the shards' finishes, so exactly
         * one of them sees the count reach the total. */
        const char *v2[] = {parent_s, state};
        r = rv_db__q(pc, "shard finish: count",
                     "UPDATE jobs SET shards_done = shards_done + ($2 = 'done')::int, "
                     "shards_failed = shards_failed + ($2 = 'failed')::int, heartbeat_at = now(), "
                     "progress = least(1, (shards_done + shards_failed + 1)::real / greatest("
                     "shards, 1)) WHERE id = $1 AND state = 'running' RETURNING shards_done + "
                     "shards_failed >= shards",
                     2, v2, PGRES_TUPLES_OK, err);
        if (!r) {
            rc = RV_ERR_IO;
            goto out;
        }
        *last = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
        if (parent)
            *parent = strtoll(parent_s, NULL, 10);
    }
    rc = rv_db__exec(pc, "COMMIT", "COMMIT", err);
    if (rc)
        *last = 0;
out:
    PQclear(r);
    rv_db__release(db, pc);
    free(txt);
    return rc;
}

int rv_db_job_shard_results(rv_db *db, int64_t parent, json_t **out, char *first_error, size_t cap,
                            rv_error *err)
{
    char id_s[24];
    *out = NULL;
    if (first_error && cap)
        first_error[0] = '\0';
    rv_db__id_text(id_s, parent);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = rv_db__q(pc, "shard results",
                           "SELECT state, result::text, error FROM jobs WHERE parent_id = $1 "
                           "ORDER BY shard_index",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    *out = json_array();
    if (!*out) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        const char *st = PQgetvalue(r, i, 0);
        if (strcmp(st, "done") == 0 && !PQgetisnull(r, i, 1)) {
            json_t *res = json_loads(PQgetvalue(r, i, 1), 0, NULL);
            if (res)
                json_array_append_new(*out, res);
        } else if (strcmp(st, "failed") == 0 && first_error && cap && !first_error[0]) {
            snprintf(first_error, cap, "%s", PQgetisnull(r, i, 2) ? "failed" : PQgetvalue(r, i, 2));
        }
    }
out:
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_job_owner(rv_db *db, int64_t id, char *owner, size_t cap, rv_error *err)
{
    char id_s[24];
    owner[0] = '\0';
    rv_db__id_text(id_s, id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r =
        rv_db__q(pc, "job owner", "SELECT coalesce(created_by, '') FROM jobs WHERE id = $1", 1,
                 vals, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQntuples(r) == 0)
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no job with id %lld", (long long)id);
    else
        snprintf(owner, cap, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_job_cancel(rv_db *db, int64_t id, json_t **out, rv_error *err)
{
    char id_s[24];
    if (out)
        *out = NULL;
    rv_db__id_text(id_s, id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* A shard cancels its whole fleet job: a parent waiting for a shard
     * that never finishes would never finish either. */
    PGresult *r =
        rv_db__q(pc, "job cancel",
                 "WITH root AS (SELECT coalesce(parent_id, id) AS id FROM jobs WHERE id = $1) "
                 "UPDATE jobs j SET state = 'cancelled', finished_at = now(), locked_by = NULL, "
                 "error = coalesce(j.error, 'cancelled') FROM root WHERE (j.id = root.id OR "
                 "j.parent_id = root.id) AND j.state IN ('queued', 'running')",
                 1, vals, PGRES_COMMAND_OK, err);
    PQclear(r);
    rv_db__release(db, pc);
    if (!r)
        return RV_ERR_IO;
    json_t *j = NULL;
    int rc = rv_db_job_get(db, id, &j, err);
    if (rc == 0 && out)
        *out = j;
    else
        json_decref(j);
    return rc;
}
