/* Stored traces: the duplicate lookup by content hash, one trace or a
 * filtered page of them as JSON, id lists for fleet work, deletion (with
 * the platform's statistics refreshed in the same transaction), and the
 * stored snapshot and original bytes (rv_db_traces.h). */
#include "rv_db_traces.h"
#include "rv_db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_snapshot.h"

int rv_db__trace_id_by_sha(rv_db__conn *pc, const char *sha, int64_t *id, rv_error *err)
{
    const char *vals[] = {sha};
    PGresult *r = rv_db__q(pc, "duplicate check", "SELECT id FROM traces WHERE content_sha256 = $1",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    *id = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return 0;
}

#define TRACE_JSON                                                                                 \
    "json_build_object('id', t.id, 'job', t.job, 'rank', t.rank, 'world_size', t.world_size, "     \
    "'platform', json_build_object('id', p.id, 'gpu_model', p.gpu_model, 'gpus_per_node', "        \
    "p.gpus_per_node, 'cpu_model', p.cpu_model, 'driver', p.driver, 'runtime_version', "           \
    "p.runtime_version, 'framework', p.framework), 'uploaded_at', t.uploaded_at, "                 \
    "'source_format', t.source_format, 'measured_us', t.measured_us, 'tasks', t.tasks, "           \
    "'iterations', t.iterations, 'content_sha256', t.content_sha256, 'original_size', "            \
    "(SELECT size FROM trace_originals o WHERE o.trace_id = t.id), 'summary', t.summary, "         \
    "'tags', t.tags)"

int rv_db_trace_get(rv_db *db, int64_t id, json_t **out, rv_error *err)
{
    char id_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    int rc =
        rv_db__query_json(db, "trace",
                          "SELECT " TRACE_JSON "::text FROM traces t JOIN platforms p ON p.id = "
                          "t.platform_id WHERE t.id = $1",
                          1, vals, out, err);
    if (rc == RV_ERR_NOTFOUND)
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld", (long long)id);
    return rc;
}

static void filter_params(const rv_db_trace_filter *f, char pl[24], char before[24],
                          const char *vals[4])
{
    static const rv_db_trace_filter none = {0};
    if (!f)
        f = &none;
    snprintf(pl, 24, "%lld", (long long)f->platform_id);
    snprintf(before, 24, "%lld", (long long)f->before_id);
    vals[0] = f->platform_id ? pl : NULL;
    vals[1] = f->job;
    vals[2] = f->tag;
    vals[3] = f->before_id ? before : NULL;
}

#define FILTER_WHERE                                                                               \
    "($1::bigint IS NULL OR t.platform_id = $1) AND ($2::text IS NULL OR t.job = $2) AND "         \
    "($3::text IS NULL OR t.tags @> ARRAY[$3::text]) AND ($4::bigint IS NULL OR t.id < $4)"

int rv_db_trace_list(rv_db *db, const rv_db_trace_filter *f, json_t **out, rv_error *err)
{
    char pl[24], before[24], lim[16];
    const char *vals[5];
    filter_params(f, pl, before, vals);
    unsigned limit = f && f->limit ? f->limit : 100;
    if (limit > 1000)
        limit = 1000;
    snprintf(lim, sizeof(lim), "%u", limit);
    vals[4] = lim;
    return rv_db__query_json(
        db, "trace list",
        "SELECT coalesce(json_agg(x.j ORDER BY x.id DESC), '[]')::text FROM (SELECT "
        "t.id, " TRACE_JSON " AS j FROM traces t JOIN platforms p ON p.id = "
        "t.platform_id WHERE " FILTER_WHERE " ORDER BY t.id DESC LIMIT $5) x",
        5, vals, out, err);
}

int rv_db_trace_ids(rv_db *db, const rv_db_trace_filter *f, int64_t **ids, size_t *n, rv_error *err)
{
    char pl[24], before[24];
    const char *vals[4];
    *ids = NULL;
    *n = 0;
    filter_params(f, pl, before, vals);
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = rv_db__q(pc, "trace ids",
                           "SELECT t.id FROM traces t WHERE " FILTER_WHERE
                           " ORDER BY t.id DESC LIMIT 1000000",
                           4, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else {
        size_t k = (size_t)PQntuples(r);
        *ids = malloc((k + 1) * sizeof(**ids));
        if (!*ids) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        } else {
            for (size_t i = 0; i < k; i++)
                (*ids)[i] = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
            *n = k;
        }
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_trace_delete(rv_db *db, int64_t id, rv_error *err)
{
    char id_s[24], pid_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = rv_db__exec(pc, "BEGIN", "BEGIN", err);
    PGresult *r = NULL;
    if (rc)
        goto out;
    r = rv_db__q(pc, "delete trace", "DELETE FROM traces WHERE id = $1 RETURNING platform_id", 1,
                 vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld", (long long)id);
        goto out;
    }
    snprintf(pid_s, sizeof(pid_s), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    r = NULL;
    rc = rv_db__lock_platform(pc, pid_s, err);
    if (rc)
        goto out;
    rc = rv_db__recompute_stats(pc, RV_DB__KEYS_OF_PLATFORM, pid_s, NULL, NULL, err);
    if (!rc)
        rc = rv_db__exec(pc, "COMMIT", "COMMIT", err);
out:
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_snapshot_load(rv_db *db, int64_t id, rv_trace **out, rv_error *err)
{
    char id_s[24], ver_s[16];
    *out = NULL;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    snprintf(ver_s, sizeof(ver_s), "%d", RV_SNAPSHOT_VERSION);
    const char *vals[] = {id_s, ver_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc;
    PGresult *r = rv_db__qp(pc, RV_DB__ST_SNAPSHOT, vals, NULL, NULL, 1, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQntuples(r) == 0)
        rc =
            rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no snapshot for trace %lld", (long long)id);
    else
        rc = rv_snapshot_decode(PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0), out, err);
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_original_get(rv_db *db, int64_t id, uint8_t **bytes, size_t *len, int *gzip_wrapped,
                       size_t *received_size, rv_error *err)
{
    char id_s[24];
    *bytes = NULL;
    *len = 0;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = PQexecParams(pc->c,
                               "SELECT bytes, encoding, size FROM trace_originals WHERE trace_id "
                               "= $1",
                               1, NULL, vals, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = rv_db__fail(err, "original", pc->c, r);
    } else if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld", (long long)id);
    } else {
        size_t n = (size_t)PQgetlength(r, 0, 0);
        *bytes = malloc(n ? n : 1);
        if (!*bytes) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        } else {
            memcpy(*bytes, PQgetvalue(r, 0, 0), n);
            *len = n;
            /* Binary results: text is raw bytes, bigint is 8 bytes big-endian. */
            if (gzip_wrapped)
                *gzip_wrapped =
                    PQgetlength(r, 0, 1) == 4 && memcmp(PQgetvalue(r, 0, 1), "gzip", 4) == 0;
            if (received_size) {
                const uint8_t *b = (const uint8_t *)PQgetvalue(r, 0, 2);
                uint64_t v = 0;
                for (int i = 0; i < 8; i++)
                    v = v << 8 | b[i];
                *received_size = (size_t)v;
            }
        }
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}
