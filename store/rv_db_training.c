/* Training jobs (rv_db_training.h): the job row an ingest records, the job
 * list and one job as JSON, and the traces a job's what-if loads. The ranks
 * are read from traces (job, rank) every time, so an upload or a delete is
 * seen at once and nothing has to be kept in step. */
#include "rv_db_training.h"
#include "rv_db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The world size of job j: the largest its present ranks declare, else the
 * largest one ever recorded. */
#define WS "coalesce(s.ws, j.world_size)"

/* One job object from training_jobs j and the lateral summary s of its
 * ranked traces. Missing ranks are [0, world size) minus the present ones
 * (ranks at or past the world size are not counted as filling a slot). */
#define JOB_JSON                                                                                   \
    "json_build_object('id', j.id, 'name', j.name, 'world_size', " WS ", 'ranks_present', "        \
    "coalesce(cardinality(s.ranks), 0), 'ranks', to_json(coalesce(s.ranks, '{}'::int[])), "        \
    "'missing', to_json(ARRAY(SELECT g FROM generate_series(0, coalesce(" WS ", 0) - 1) g "        \
    "WHERE g <> ALL (coalesce(s.ranks, '{}'::int[])) LIMIT " RV_DB__TRAINING_MISSING_MAX_S         \
    ")), 'missing_count', coalesce(" WS ", 0) - (SELECT count(*) FROM unnest(s.ranks) r WHERE "    \
    "r < coalesce(" WS ", 0)), 'complete', " WS " IS NOT NULL AND " WS " = (SELECT count(*) FROM " \
    "unnest(s.ranks) r WHERE r < " WS "), 'traces', coalesce(s.ntraces, 0), 'created_at', "        \
    "j.created_at, 'updated_at', j.updated_at)"

#define RV_DB__TRAINING_MISSING_MAX_S "1024"
_Static_assert(RV_DB_TRAINING_MISSING_MAX == 1024, "keep the SQL limit in step");

#define JOB_SUMMARY                                                                                \
    "LEFT JOIN LATERAL (SELECT max(t.world_size) AS ws, array_agg(DISTINCT t.rank ORDER BY "       \
    "t.rank) AS ranks, count(*) AS ntraces FROM traces t WHERE t.job = j.name AND t.rank IS NOT "  \
    "NULL) s ON true"

/* Every trace of a job, newest first within a rank; used = newest. */
#define RANK_TRACES                                                                                \
    "(SELECT coalesce(json_agg(json_build_object('rank', u.rank, 'trace_id', u.id, "               \
    "'world_size', u.world_size, 'measured_us', u.measured_us, 'uploaded_at', u.uploaded_at, "     \
    "'used', u.used) ORDER BY u.rank, u.id DESC), '[]'::json) FROM (SELECT t.rank, t.id, "         \
    "t.world_size, t.measured_us, t.uploaded_at, t.id = max(t.id) OVER (PARTITION BY t.rank) AS "  \
    "used FROM traces t WHERE t.job = j.name AND t.rank IS NOT NULL ORDER BY t.rank, t.id DESC "   \
    "LIMIT 100000) u)"

int rv_db__training_record(rv_db__conn *pc, const char *job, int32_t rank, int32_t world_size,
                           const char *writer, int admin, rv_error *err)
{
    char ws_s[16];

    if (!job || !*job || rank < 0)
        return 0;
    snprintf(ws_s, sizeof(ws_s), "%d", (int)world_size);
    /* An existing job takes the rank only from its creator or an admin:
     * the update's WHERE leaves no row to return otherwise. */
    const char *vals[] = {job, world_size >= 1 ? ws_s : NULL, writer,
                          (!writer || admin) ? "true" : "false"};
    PGresult *r = rv_db__q(pc, "record training job",
                           "INSERT INTO training_jobs (name, world_size, created_by) VALUES ($1, "
                           "$2::integer, $3) ON CONFLICT (name) DO UPDATE SET world_size = "
                           "greatest(training_jobs.world_size, EXCLUDED.world_size), updated_at "
                           "= now() WHERE $4::boolean OR training_jobs.created_by = $3 "
                           "RETURNING id",
                           4, vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    int n = PQntuples(r);
    PQclear(r);
    if (n == 0)
        return rv_error_field(err, RV_ERR_FORBIDDEN, "job",
                              "training job '%.200s' was created by another token: adding a "
                              "rank to it needs that token or an admin token",
                              job);
    return 0;
}

int rv_db_training_may_write(rv_db *db, const char *name, const char *writer, int admin,
                             rv_error *err)
{
    if (!name || !*name || !writer || admin)
        return 0;
    const char *vals[] = {name, writer};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = rv_db__q(pc, "training job owner",
                           "SELECT 1 FROM training_jobs WHERE name = $1 AND created_by IS "
                           "DISTINCT FROM $2",
                           2, vals, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQntuples(r) > 0)
        rc = rv_error_field(err, RV_ERR_FORBIDDEN, "job",
                            "training job '%.200s' was created by another token: writing into "
                            "it needs that token or an admin token",
                            name);
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_training_list(rv_db *db, int64_t before_id, unsigned limit, json_t **out, rv_error *err)
{
    char before_s[24], limit_s[16];

    if (limit == 0)
        limit = 100;
    if (limit > 1000)
        limit = 1000;
    rv_db__id_text(before_s, before_id);
    snprintf(limit_s, sizeof(limit_s), "%u", limit);
    const char *vals[] = {before_id > 0 ? before_s : NULL, limit_s};
    return rv_db__query_json(db, "training jobs",
                             "SELECT coalesce(json_agg(x.o ORDER BY x.id DESC), '[]'::json)::text "
                             "FROM (SELECT j.id, " JOB_JSON
                             " AS o FROM training_jobs j " JOB_SUMMARY
                             " WHERE ($1::bigint IS NULL OR j.id < $1) ORDER BY j.id DESC LIMIT "
                             "$2::integer) x",
                             2, vals, out, err);
}

int rv_db_training_get(rv_db *db, int64_t id, json_t **out, rv_error *err)
{
    char id_s[24];
    json_t *rt = NULL;

    rv_db__id_text(id_s, id);
    const char *vals[] = {id_s};
    int rc = rv_db__query_json(
        db, "training job",
        "SELECT json_build_object('job', " JOB_JSON ", 'rank_traces', " RANK_TRACES
        ")::text FROM training_jobs j " JOB_SUMMARY " WHERE j.id = $1::bigint",
        1, vals, &rt, err);
    if (rc == RV_ERR_NOTFOUND)
        return rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no training job with id %lld",
                            (long long)id);
    if (rc)
        return rc;
    /* The job's fields with its traces beside them, in one object. */
    json_t *o = json_object_get(rt, "job");
    if (!json_is_object(o)) {
        json_decref(rt);
        return rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "training job: bad row");
    }
    json_incref(o);
    json_object_set(o, "rank_traces", json_object_get(rt, "rank_traces"));
    json_decref(rt);
    *out = o;
    return 0;
}

int rv_db_training_id(rv_db *db, const char *name, int64_t *id, rv_error *err)
{
    json_t *v = NULL;
    const char *vals[] = {name};

    *id = 0;
    int rc =
        rv_db__query_json(db, "training job id",
                          "SELECT id::text FROM training_jobs WHERE name = $1", 1, vals, &v, err);
    if (rc == RV_ERR_NOTFOUND)
        return rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no training job named '%.200s'", name);
    if (rc == 0)
        *id = (int64_t)json_integer_value(v);
    json_decref(v);
    return rc;
}

void rv_db_training_job_free(rv_db_training_job *j)
{
    if (!j)
        return;
    free(j->name);
    free(j->ranks);
    free(j);
}

int rv_db_training_ranks(rv_db *db, int64_t id, rv_db_training_job **out, rv_error *err)
{
    char id_s[24];
    PGresult *r = NULL;
    rv_db_training_job *j = NULL;
    int rc = 0;

    *out = NULL;
    rv_db__id_text(id_s, id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* One statement: the job row and its ranks (none: one row of NULLs). */
    r = rv_db__q(pc, "training job ranks",
                 "SELECT j.name, coalesce((SELECT max(t.world_size) FROM traces t WHERE t.job = "
                 "j.name AND t.rank IS NOT NULL), j.world_size), u.rank, u.id FROM training_jobs j "
                 "LEFT JOIN LATERAL (SELECT DISTINCT ON (t.rank) t.rank, t.id FROM traces t WHERE "
                 "t.job = j.name AND t.rank IS NOT NULL ORDER BY t.rank, t.id DESC) u ON true "
                 "WHERE j.id = $1::bigint ORDER BY u.rank",
                 1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    int n = PQntuples(r);
    if (n == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no training job with id %lld",
                          (long long)id);
        goto out;
    }
    j = calloc(1, sizeof(*j));
    if (!j || !(j->name = strdup(PQgetvalue(r, 0, 0))) ||
        !(j->ranks = calloc((size_t)n, sizeof(*j->ranks)))) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    j->id = id;
    j->world_size = PQgetisnull(r, 0, 1) ? -1 : (int32_t)strtol(PQgetvalue(r, 0, 1), NULL, 10);
    for (int i = 0; i < n; i++) {
        if (PQgetisnull(r, i, 2))
            continue;
        rv_db_training_rank *k = &j->ranks[j->nranks++];
        k->rank = (int32_t)strtol(PQgetvalue(r, i, 2), NULL, 10);
        k->trace_id = strtoll(PQgetvalue(r, i, 3), NULL, 10);
    }
    *out = j;
    j = NULL;
out:
    PQclear(r);
    rv_db__release(db, pc);
    rv_db_training_job_free(j);
    return rc;
}
