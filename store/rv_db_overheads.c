/* Per-platform host-overhead statistics: the SQL that recomputes them
 * from the stored samples (the same IQR arithmetic as engine/rv_overhead.c),
 * the per-platform lock that serializes those updates, and reading them
 * back as rows or JSON (rv_db_overheads.h). */
#include "rv_db_overheads.h"
#include "rv_db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rv_db__lock_platform(rv_db__conn *pc, const char *platform_id, rv_error *err)
{
    /* NO KEY UPDATE, because an ingest's own traces row holds a KEY SHARE
     * lock on the platform (its foreign key), and FOR UPDATE would
     * deadlock two ingests that both hold one. */
    const char *vals[] = {platform_id};
    PGresult *r =
        rv_db__q(pc, "lock platform", "SELECT id FROM platforms WHERE id = $1 FOR NO KEY UPDATE", 1,
                 vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    int n = PQntuples(r);
    PQclear(r);
    return n ? 0
             : rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no platform with id %s", platform_id);
}

int rv_db__recompute_stats(rv_db__conn *pc, const char *keys_sql, const char *platform_id,
                           const char *trace_id, size_t *groups, rv_error *err)
{
    char sql[4096];
    snprintf(
        sql, sizeof(sql),
        "WITH keys(type, op_name) AS (%s), "
        "s AS (SELECT o.type, o.op_name, o.value_us FROM overhead_samples o JOIN keys k ON "
        "k.type = o.type AND k.op_name = o.op_name WHERE o.platform_id = $1 "
        "UNION ALL SELECT o.type, '*', o.value_us FROM overhead_samples o WHERE o.platform_id = "
        "$1 AND o.type IN (SELECT type FROM keys WHERE op_name = '*')), "
        "q AS (SELECT type, op_name, count(*) AS n, percentile_cont(0.25) WITHIN GROUP (ORDER BY "
        "value_us) AS q1, percentile_cont(0.75) WITHIN GROUP (ORDER BY value_us) AS q3 FROM s "
        "GROUP BY type, op_name), "
        "k AS (SELECT s.type, s.op_name, s.value_us FROM s JOIN q USING (type, op_name) WHERE "
        "s.value_us >= q.q1 - 1.5::float8 * (q.q3 - q.q1) AND s.value_us <= q.q3 + 1.5::float8 "
        "* (q.q3 - q.q1)), "
        "st AS (SELECT type, op_name, count(*) AS c, avg(value_us) AS mean, stddev_pop(value_us) "
        "AS std, percentile_cont(0.5) WITHIN GROUP (ORDER BY value_us) AS med, "
        "percentile_cont(0.9) WITHIN GROUP (ORDER BY value_us) AS p90 FROM k GROUP BY type, "
        "op_name), "
        "del AS (DELETE FROM platform_overheads p USING keys WHERE p.platform_id = $1 AND "
        "p.type = keys.type AND p.op_name = keys.op_name AND NOT EXISTS (SELECT 1 FROM q WHERE "
        "q.type = p.type AND q.op_name = p.op_name) RETURNING 1), "
        "up AS (INSERT INTO platform_overheads (platform_id, type, op_name, samples, count, mean, "
        "std, median, p90, updated_at) SELECT $1, q.type, q.op_name, q.n, st.c, st.mean, "
        "coalesce(st.std, 0), st.med, st.p90, now() FROM q JOIN st USING (type, op_name) "
        "ON CONFLICT (platform_id, type, op_name) DO UPDATE SET samples = EXCLUDED.samples, "
        "count = EXCLUDED.count, mean = EXCLUDED.mean, std = EXCLUDED.std, median = "
        "EXCLUDED.median, p90 = EXCLUDED.p90, updated_at = EXCLUDED.updated_at RETURNING 1) "
        "SELECT (SELECT count(*) FROM up), (SELECT count(*) FROM del), $2::bigint",
        keys_sql);
    const char *vals[] = {platform_id, trace_id ? trace_id : "0"};
    PGresult *r = rv_db__q(pc, "overhead statistics", sql, 2, vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    if (groups)
        *groups = (size_t)strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return 0;
}

void rv_db_overhead_rows_free(rv_db_overhead_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++)
        free(rows[i].op_name);
    free(rows);
}

/* The overhead rows of r, columns col0.. as type, op_name, samples, count,
 * mean, std, median, p90. *rows is new (rv_db_overhead_rows_free); *n
 * counts the rows filled, also on failure. */
static int overhead_rows(PGresult *r, int col0, rv_db_overhead_row **rows, size_t *n, rv_error *err)
{
    size_t k = (size_t)PQntuples(r);
    *rows = calloc(k + 1, sizeof(**rows));
    if (!*rows)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    for (size_t i = 0; i < k; i++) {
        rv_db_overhead_row *o = &(*rows)[i];
        int ri = (int)i;
        o->type = atoi(PQgetvalue(r, ri, col0));
        o->op_name = strdup(PQgetvalue(r, ri, col0 + 1));
        o->stat.samples = (size_t)strtoull(PQgetvalue(r, ri, col0 + 2), NULL, 10);
        o->stat.count = (size_t)strtoull(PQgetvalue(r, ri, col0 + 3), NULL, 10);
        o->stat.mean = strtod(PQgetvalue(r, ri, col0 + 4), NULL);
        o->stat.std = strtod(PQgetvalue(r, ri, col0 + 5), NULL);
        o->stat.median = strtod(PQgetvalue(r, ri, col0 + 6), NULL);
        o->stat.p90 = strtod(PQgetvalue(r, ri, col0 + 7), NULL);
        *n = i + 1;
        if (!o->op_name)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    return 0;
}

int rv_db_overheads_load(rv_db *db, int64_t platform_id, rv_db_overhead_row **rows, size_t *n,
                         rv_error *err)
{
    char id_s[24];
    *rows = NULL;
    *n = 0;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)platform_id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    /* float8 as text with extra_float_digits = 1 (the default) round-trips. */
    PGresult *r = rv_db__q(pc, "overheads",
                           "SELECT type, op_name, samples, count, mean, std, median, p90 FROM "
                           "platform_overheads WHERE platform_id = $1 ORDER BY type, op_name",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    rc = overhead_rows(r, 0, rows, n, err);
out:
    if (rc) {
        rv_db_overhead_rows_free(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_trace_overheads(rv_db *db, int64_t trace_id, int64_t *platform_id, char *version,
                          size_t cap, rv_db_overhead_row **rows, size_t *n, rv_error *err)
{
    char id_s[24];
    const char *vals[1] = {id_s};
    int rc = 0;
    PGresult *r = NULL;

    snprintf(id_s, sizeof(id_s), "%lld", (long long)trace_id);
    if (rows) {
        *rows = NULL;
        *n = 0;
    }
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* The version is computed by the same statement that reads the rows, so
     * a cached answer is always keyed by the statistics it was made with. */
    if (rows)
        r = rv_db__q(
            pc, "trace overheads",
            "SELECT t.platform_id, count(o.type) OVER (), coalesce((extract(epoch FROM "
            "max(o.updated_at) OVER ()) * 1000000)::bigint, 0), o.type, o.op_name, o.samples, "
            "o.count, o.mean, o.std, o.median, o.p90 FROM traces t LEFT JOIN "
            "platform_overheads o ON o.platform_id = t.platform_id WHERE t.id = $1 "
            "ORDER BY o.type, o.op_name",
            1, vals, PGRES_TUPLES_OK, err);
    else
        r = rv_db__q(pc, "trace overheads version",
                     "SELECT t.platform_id, count(o.type), coalesce((extract(epoch FROM "
                     "max(o.updated_at)) * 1000000)::bigint, 0) FROM traces t LEFT JOIN "
                     "platform_overheads o ON o.platform_id = t.platform_id WHERE t.id = $1 "
                     "GROUP BY t.platform_id",
                     1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    size_t k = (size_t)PQntuples(r);
    if (k == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld",
                          (long long)trace_id);
        goto out;
    }
    if (platform_id)
        *platform_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    if (version && cap)
        snprintf(version, cap, "platform %s, %s rows, updated %s", PQgetvalue(r, 0, 0),
                 PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
    if (!rows || PQgetisnull(r, 0, 3))
        goto out; /* no statistics: one row of NULLs from the outer join */
    rc = overhead_rows(r, 3, rows, n, err);
out:
    if (rc && rows) {
        rv_db_overhead_rows_free(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_overheads_get(rv_db *db, int64_t platform_id, json_t **out, rv_error *err)
{
    char id_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)platform_id);
    const char *vals[] = {id_s};
    return rv_db__query_json(
        db, "overheads",
        "SELECT coalesce(json_agg(json_build_object('type', 'T' || type, "
        "'op_name', op_name, 'samples', samples, 'count', count, 'mean_us', mean, "
        "'std_us', std, 'median_us', median, 'p90_us', p90, 'updated_at', "
        "updated_at) ORDER BY type, op_name), '[]')::text FROM platform_overheads "
        "WHERE platform_id = $1",
        1, vals, out, err);
}

int rv_db_overheads_rebuild(rv_db *db, int64_t platform_id, size_t *groups, rv_error *err)
{
    int64_t *ids = NULL;
    size_t nids = 0, total = 0;
    int rc = 0;
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    if (platform_id > 0) {
        ids = malloc(sizeof(*ids));
        if (ids) {
            ids[0] = platform_id;
            nids = 1;
        }
    } else {
        PGresult *r = rv_db__q(pc, "platforms", "SELECT id FROM platforms ORDER BY id", 0, NULL,
                               PGRES_TUPLES_OK, err);
        if (!r) {
            rc = RV_ERR_IO;
            goto out;
        }
        nids = (size_t)PQntuples(r);
        ids = malloc((nids + 1) * sizeof(*ids));
        for (size_t i = 0; ids && i < nids; i++)
            ids[i] = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
        PQclear(r);
    }
    if (!ids) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nids && !rc; i++) {
        char pid_s[24];
        snprintf(pid_s, sizeof(pid_s), "%lld", (long long)ids[i]);
        rc = rv_db__exec(pc, "BEGIN", "BEGIN", err);
        if (!rc)
            rc = rv_db__lock_platform(pc, pid_s, err);
        size_t g = 0;
        if (!rc)
            rc = rv_db__recompute_stats(pc, RV_DB__KEYS_OF_PLATFORM, pid_s, NULL, &g, err);
        if (!rc)
            rc = rv_db__exec(pc, "COMMIT", "COMMIT", err);
        total += g;
    }
    if (groups)
        *groups = total;
out:
    free(ids);
    rv_db__release(db, pc);
    return rc;
}
