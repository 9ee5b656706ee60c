/* Per-platform host-overhead statistics: kept as mergeable sketches
 * (engine/rv_sketch.h, migrations/0004), rebuilt from the traces'
 * sketches, and read back as rows or JSON with the IQR rule applied to
 * each sketch (rv_db_overheads.h). */
#include "rv_db_overheads.h"
#include "rv_db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/rv_hw.h"

int rv_db__overheads_rebuild(rv_db__conn *pc, const char *platform_id, size_t *groups,
                             rv_error *err)
{
    const char *vals[] = {platform_id};
    PGresult *r = rv_db__q(pc, "rebuild overhead statistics", "SELECT rv_overheads_rebuild($1)", 1,
                           vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    if (groups)
        *groups = (size_t)strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return 0;
}

/* The columns a sketch row is read from, in the order sketch_of_row
 * expects them after type and op_name. */
#define SKETCH_COLS "n, zeros, sum, sumsq, min, max, keys, counts"

/* Parses a PostgreSQL integer array literal ("{1,-2,3}") into v (cap
 * entries); the count, or -1 when malformed or longer than cap. */
static long parse_int_array(const char *s, long long *v, size_t cap)
{
    size_t n = 0;
    if (*s++ != '{')
        return -1;
    while (*s && *s != '}') {
        char *end;
        long long x = strtoll(s, &end, 10);
        if (end == s || n == cap)
            return -1;
        v[n++] = x;
        s = end;
        if (*s == ',')
            s++;
    }
    return *s == '}' ? (long)n : -1;
}

/* The sketch of row ri, columns col.. as SKETCH_COLS. *sk must be empty;
 * free with rv_sketch_free. */
static int sketch_of_row(PGresult *r, int ri, int col, rv_sketch *sk, rv_error *err)
{
    enum { CAP = RV_SKETCH_KMAX - RV_SKETCH_KMIN + 1 };
    long long *keys = malloc((size_t)2 * CAP * sizeof(*keys));
    int rc = 0;
    if (!keys)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    long long *counts = keys + CAP;
    sk->n = strtoull(PQgetvalue(r, ri, col), NULL, 10);
    sk->zeros = strtoull(PQgetvalue(r, ri, col + 1), NULL, 10);
    sk->sum = strtod(PQgetvalue(r, ri, col + 2), NULL);
    sk->sumsq = strtod(PQgetvalue(r, ri, col + 3), NULL);
    sk->min = strtod(PQgetvalue(r, ri, col + 4), NULL);
    sk->max = strtod(PQgetvalue(r, ri, col + 5), NULL);
    long nk = parse_int_array(PQgetvalue(r, ri, col + 6), keys, CAP);
    long nc = parse_int_array(PQgetvalue(r, ri, col + 7), counts, CAP);
    if (nk < 0 || nk != nc) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "malformed overhead sketch in the database");
        goto out;
    }
    for (long i = 0; i < nk && !rc; i++)
        if (counts[i] < 0 || rv_sketch_add_bucket(sk, (int)keys[i], (uint64_t)counts[i]))
            rc = rv_error_set(err, counts[i] < 0 ? RV_ERR_IO : RV_ERR_NOMEM, -1, -1,
                              "overhead sketch: bad count or out of memory");
out:
    free(keys);
    return rc;
}

/* The statistics of row ri (columns col.. as SKETCH_COLS). */
static int stat_of_row(PGresult *r, int ri, int col, rv_overhead_stat *st, rv_sketch_stat *full,
                       rv_error *err)
{
    rv_sketch sk = RV_SKETCH_INIT;
    int rc = sketch_of_row(r, ri, col, &sk, err);
    if (!rc) {
        rv_overhead_stat_of_sketch(&sk, st);
        if (full)
            rv_sketch_iqr(&sk, full);
    }
    rv_sketch_free(&sk);
    return rc;
}

void rv_db_overhead_rows_free(rv_db_overhead_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++)
        free(rows[i].op_name);
    free(rows);
}

/* The overhead rows of r, columns col0.. as type, op_name, SKETCH_COLS;
 * the statistics are read from each row's sketch. *rows is new
 * (rv_db_overhead_rows_free); *n counts the rows filled, also on failure. */
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
        *n = i + 1;
        if (!o->op_name)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        int rc = stat_of_row(r, ri, col0 + 2, &o->stat, NULL, err);
        if (rc)
            return rc;
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
                           "SELECT type, op_name, " SKETCH_COLS " FROM "
                           "platform_overhead_sketches WHERE platform_id = $1 ORDER BY type, "
                           "op_name",
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
            "max(o.updated_at) OVER ()) * 1000000)::bigint, 0), o.type, o.op_name, o.n, "
            "o.zeros, o.sum, o.sumsq, o.min, o.max, o.keys, o.counts FROM traces t LEFT JOIN "
            "platform_overhead_sketches o ON o.platform_id = t.platform_id WHERE t.id = $1 "
            "ORDER BY o.type, o.op_name",
            1, vals, PGRES_TUPLES_OK, err);
    else
        r = rv_db__q(
            pc, "trace overheads version",
            "SELECT t.platform_id, count(o.type), coalesce((extract(epoch FROM "
            "max(o.updated_at)) * 1000000)::bigint, 0) FROM traces t LEFT JOIN "
            "platform_overhead_sketches o ON o.platform_id = t.platform_id WHERE t.id = $1 "
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
    int rc = 0;
    json_t *arr = json_array();
    *out = NULL;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)platform_id);
    const char *vals[] = {id_s};
    if (!arr)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc) {
        json_decref(arr);
        return RV_ERR_IO;
    }
    PGresult *r = rv_db__q(pc, "overheads",
                           "SELECT type, op_name, " SKETCH_COLS ", to_json(updated_at) #>> '{}' "
                           "FROM platform_overhead_sketches WHERE platform_id = $1 ORDER BY "
                           "type, op_name",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    for (int i = 0; i < PQntuples(r) && !rc; i++) {
        rv_overhead_stat st;
        rv_sketch_stat full;
        char type[8];
        if ((rc = stat_of_row(r, i, 2, &st, &full, err)) != 0)
            break;
        snprintf(type, sizeof(type), "T%d", atoi(PQgetvalue(r, i, 0)));
        json_t *o = json_pack(
            "{s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:s}", "type", type, "op_name",
            PQgetvalue(r, i, 1), "samples", (json_int_t)st.samples, "count", (json_int_t)st.count,
            "mean_us", st.mean, "std_us", st.std, "p25_us", full.p25, "median_us", st.median,
            "p75_us", full.p75, "p90_us", st.p90, "updated_at", PQgetvalue(r, i, 10));
        if (!o || json_array_append_new(arr, o))
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
out:
    PQclear(r);
    rv_db__release(db, pc);
    if (rc)
        json_decref(arr);
    else
        *out = arr;
    return rc;
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
        size_t g = 0;
        snprintf(pid_s, sizeof(pid_s), "%lld", (long long)ids[i]);
        rc = rv_db__exec(pc, "BEGIN", "BEGIN", err);
        if (!rc)
            rc = rv_db__overheads_rebuild(pc, pid_s, &g, err);
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

/* One platform as rv_db_host_overheads reads it. */
typedef struct host_row {
    int64_t id;
    const char *gpu_model; /* borrowed from the result */
    int own;
    const char *rows, *updated;
    long long samples;
} host_row;

static host_row host_row_of(PGresult *r, int i)
{
    host_row h = {strtoll(PQgetvalue(r, i, 0), NULL, 10),
                  PQgetvalue(r, i, 1),
                  PQgetvalue(r, i, 2)[0] == 't',
                  PQgetvalue(r, i, 3),
                  PQgetvalue(r, i, 4),
                  strtoll(PQgetvalue(r, i, 5), NULL, 10)};
    return h;
}

int rv_db_host_overheads(rv_db *db, int64_t trace_id, const char *gpu, rv_db_host_stats *out,
                         rv_db_overhead_row **rows, size_t *n, rv_error *err)
{
    char id_s[24];
    const rv_hw *to = gpu && *gpu ? rv_hw_lookup(gpu) : NULL;
    const char *vals[2] = {id_s, to ? "t" : "f"};
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (rows) {
        *rows = NULL;
        *n = 0;
    }
    snprintf(id_s, sizeof(id_s), "%lld", (long long)trace_id);
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* The trace's platform, and with a target GPU every platform: which of
     * them are that GPU is the hardware table's call, made below. */
    PGresult *r = rv_db__q(
        pc, "host overheads",
        "SELECT p.id, p.gpu_model, p.id = t.platform_id, count(o.type), coalesce((extract(epoch "
        "FROM max(o.updated_at)) * 1000000)::bigint, 0), coalesce(sum(o.n) FILTER (WHERE "
        "o.op_name = '*'), 0) FROM traces t JOIN platforms p ON p.id = t.platform_id OR $2 "
        "LEFT JOIN platform_overhead_sketches o ON o.platform_id = p.id WHERE t.id = $1 GROUP BY "
        "p.id, t.platform_id ORDER BY p.id",
        2, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rv_db__release(db, pc);
        return RV_ERR_IO;
    }
    int own = -1, best = -1;
    for (int i = 0; i < PQntuples(r); i++) {
        host_row h = host_row_of(r, i);
        if (h.own)
            own = i;
        /* The most samples decide among machines of the target GPU; ties
         * go to the oldest platform, so the choice is stable. */
        if (to && strcmp(h.rows, "0") != 0 && rv_hw_lookup(h.gpu_model) == to &&
            (best < 0 || h.samples > host_row_of(r, best).samples))
            best = i;
    }
    if (own < 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld",
                          (long long)trace_id);
        goto out;
    }
    /* The trace's own host when it already is the target GPU's. */
    if (best >= 0 && rv_hw_lookup(host_row_of(r, own).gpu_model) == to)
        best = -1;
    host_row h = host_row_of(r, best >= 0 ? best : own);
    out->platform_id = h.id;
    out->target = best >= 0;
    snprintf(out->gpu_model, sizeof(out->gpu_model), "%s", h.gpu_model);
    /* The trace's own platform keeps the version text it always had, so
     * cached answers stay keyed as before. */
    if (out->target && to)
        snprintf(out->version, sizeof(out->version), "gpu %s: platform %lld, %s rows, updated %s",
                 to->name, (long long)h.id, h.rows, h.updated);
    else
        snprintf(out->version, sizeof(out->version), "platform %lld, %s rows, updated %s",
                 (long long)h.id, h.rows, h.updated);
    if (rows && strcmp(h.rows, "0") != 0)
        rc = rv_db_overheads_load(db, h.id, rows, n, err);
out:
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}
