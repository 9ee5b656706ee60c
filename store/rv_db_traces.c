/* Stored traces: the duplicate lookup by content hash, one trace or a
 * filtered page of them as JSON, id lists for fleet work, deletion (with
 * the platform's statistics refreshed in the same transaction), and the
 * stored snapshot and original bytes (rv_db_traces.h). */
#include "rv_db_traces.h"
#include "rv_db_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "reader/rv_snapshot.h"

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

static int is_digits(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

static int num(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

int rv_db_time_parse(const char *s, char *out, size_t cap)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int hh = 0, mi = 0, ss = 0, usec = 0, tz_sign = 1, tz_h = 0, tz_m = 0;

    if (!s || !out || cap < RV_DB_TIME_MAX)
        return RV_ERR_INVALID;
    /* Date: YYYY-MM-DD. */
    if (strlen(s) < 10 || !is_digits(s, 4) || s[4] != '-' || !is_digits(s + 5, 2) || s[7] != '-' ||
        !is_digits(s + 8, 2))
        return RV_ERR_INVALID;
    int y = num(s, 4), mo = num(s + 5, 2), d = num(s + 8, 2);
    if (y < 1 || mo < 1 || mo > 12 || d < 1)
        return RV_ERR_INVALID;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[mo - 1] + (mo == 2 && leap))
        return RV_ERR_INVALID;
    const char *p = s + 10;
    /* Time: [T t space]HH:MM[:SS[.fraction]]. */
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!is_digits(p, 2) || p[2] != ':' || !is_digits(p + 3, 2))
            return RV_ERR_INVALID;
        hh = num(p, 2);
        mi = num(p + 3, 2);
        p += 5;
        if (*p == ':') {
            if (!is_digits(p + 1, 2))
                return RV_ERR_INVALID;
            ss = num(p + 1, 2);
            p += 3;
            if (*p == '.' || *p == ',') {
                int nd = 0, scale = 100000;
                for (p++; *p >= '0' && *p <= '9'; p++, nd++) {
                    usec += (*p - '0') * scale;
                    scale /= 10;
                }
                if (nd < 1 || nd > 9)
                    return RV_ERR_INVALID;
            }
        }
        /* 60: a leap second, which PostgreSQL rolls into the next minute. */
        if (hh > 23 || mi > 59 || ss > 60)
            return RV_ERR_INVALID;
        /* Zone: Z, +HH:MM, +HHMM or +HH (and -). */
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            tz_sign = *p == '-' ? -1 : 1;
            p++;
            if (!is_digits(p, 2))
                return RV_ERR_INVALID;
            tz_h = num(p, 2);
            p += 2;
            if (*p == ':')
                p++;
            if (is_digits(p, 2)) {
                tz_m = num(p, 2);
                p += 2;
            }
            /* PostgreSQL takes offsets up to 15:59. */
            if (tz_h > 15 || tz_m > 59)
                return RV_ERR_INVALID;
        }
    }
    if (*p)
        return RV_ERR_INVALID;
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06d%c%02d:%02d", y, mo, d, hh, mi, ss, usec,
             tz_sign < 0 ? '-' : '+', tz_h, tz_m);
    return 0;
}

/* The filter as text parameters $1..$6 (FILTER_WHERE). *ids_lit is new
 * (free it) when f has ids. */
typedef struct filter_text {
    char pl[24], before[24], since[RV_DB_TIME_MAX];
    char *ids_lit;
    const char *vals[7];
} filter_text;

static int filter_params(const rv_db_trace_filter *f, filter_text *t, rv_error *err)
{
    static const rv_db_trace_filter none = {0};
    if (!f)
        f = &none;
    memset(t, 0, sizeof(*t));
    snprintf(t->pl, sizeof(t->pl), "%lld", (long long)f->platform_id);
    snprintf(t->before, sizeof(t->before), "%lld", (long long)f->before_id);
    if (f->since && rv_db_time_parse(f->since, t->since, sizeof(t->since)) != 0)
        return rv_error_field(err, RV_ERR_INVALID, "since",
                              "since must be an RFC 3339 / ISO 8601 time, e.g. 2024-05-01 or "
                              "2024-05-01T12:00:00Z");
    if (f->ids) {
        size_t cap = f->nids * 21 + 3;
        t->ids_lit = malloc(cap);
        if (!t->ids_lit)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        size_t k = 0;
        t->ids_lit[k++] = '{';
        for (size_t i = 0; i < f->nids; i++)
            k += (size_t)snprintf(t->ids_lit + k, cap - k, "%s%lld", i ? "," : "",
                                  (long long)f->ids[i]);
        t->ids_lit[k++] = '}';
        t->ids_lit[k] = '\0';
    }
    t->vals[0] = f->platform_id ? t->pl : NULL;
    t->vals[1] = f->job;
    t->vals[2] = f->tag;
    t->vals[3] = f->before_id ? t->before : NULL;
    t->vals[4] = f->since ? t->since : NULL;
    t->vals[5] = t->ids_lit;
    return 0;
}

/* since is a bound timestamptz parameter compared as a time (never as
 * text); the canonical form carries its offset, so the session's TimeZone
 * does not matter. */
#define FILTER_WHERE                                                                               \
    "($1::bigint IS NULL OR t.platform_id = $1) AND ($2::text IS NULL OR t.job = $2) AND "         \
    "($3::text IS NULL OR t.tags @> ARRAY[$3::text]) AND ($4::bigint IS NULL OR t.id < $4) AND "   \
    "($5::timestamptz IS NULL OR t.uploaded_at >= $5::timestamptz) AND ($6::bigint[] IS NULL OR "  \
    "t.id = ANY($6::bigint[]))"

int rv_db_trace_list(rv_db *db, const rv_db_trace_filter *f, json_t **out, rv_error *err)
{
    char lim[16];
    filter_text t;
    *out = NULL;
    if (filter_params(f, &t, err) != 0) {
        free(t.ids_lit);
        return err ? err->code : RV_ERR_INVALID;
    }
    unsigned limit = f && f->limit ? f->limit : 100;
    if (limit > 1000)
        limit = 1000;
    snprintf(lim, sizeof(lim), "%u", limit);
    t.vals[6] = lim;
    int rc = rv_db__query_json(
        db, "trace list",
        "SELECT coalesce(json_agg(x.j ORDER BY x.id DESC), '[]')::text FROM (SELECT "
        "t.id, " TRACE_JSON " AS j FROM traces t JOIN platforms p ON p.id = "
        "t.platform_id WHERE " FILTER_WHERE " ORDER BY t.id DESC LIMIT $7) x",
        7, t.vals, out, err);
    free(t.ids_lit);
    return rc;
}

int rv_db_trace_ids(rv_db *db, const rv_db_trace_filter *f, int64_t **ids, size_t *n, rv_error *err)
{
    char lim[24];
    filter_text t;
    *ids = NULL;
    *n = 0;
    if (filter_params(f, &t, err) != 0) {
        free(t.ids_lit);
        return err ? err->code : RV_ERR_INVALID;
    }
    snprintf(lim, sizeof(lim), "%u", f && f->limit ? f->limit : 1000000u);
    t.vals[6] = lim;
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc) {
        free(t.ids_lit);
        return RV_ERR_IO;
    }
    int rc = 0;
    PGresult *r =
        rv_db__q(pc, "trace ids",
                 "SELECT t.id FROM traces t WHERE " FILTER_WHERE " ORDER BY t.id DESC LIMIT $7", 7,
                 t.vals, PGRES_TUPLES_OK, err);
    free(t.ids_lit);
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

int rv_db__trace_changed(rv_db__conn *pc, const char *trace_id, rv_error *err)
{
    const char *v[] = {trace_id};
    PGresult *r = rv_db__q(pc, "notify trace change", "SELECT pg_notify('rv_traces', $1)", 1, v,
                           PGRES_TUPLES_OK, err);
    int ok = r != NULL;
    PQclear(r);
    return ok ? 0 : RV_ERR_IO;
}

int rv_db_trace_delete(rv_db *db, int64_t id, rv_error *err)
{
    char id_s[24], pid_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* The platform's statistics are rebuilt from all its traces' rows. */
    rv_db__deadline(db, pc, RV_DB__LONG_MS);
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
    /* The trace's sketches and kernel sums went with it (ON DELETE
     * CASCADE): its platform's are recomputed from the remaining traces'. */
    rc = rv_db__overheads_rebuild(pc, pid_s, NULL, err);
    if (!rc)
        rc = rv_db__kmodels_rebuild(pc, pid_s, err);
    if (!rc)
        rc = rv_db__trace_changed(pc, id_s, err);
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

/* Writes n bytes to fd: 0 or RV_ERR_IO. */
static int write_all(int fd, const void *p, size_t n, rv_error *err)
{
    const char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return rv_error_set(err, RV_ERR_IO, -1, -1, "writing the original: %s",
                                w < 0 ? strerror(errno) : "short write");
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The original's streaming state: the inflater (when inflating), the
 * output and its cap. */
typedef struct orig_sink {
    int fd, inflate, started;
    uint64_t max_out, written;
    z_stream z;
    unsigned char *out;
} orig_sink;

/* One chunk of stored bytes into the sink. */
static int sink_put(orig_sink *k, const unsigned char *in, size_t n, rv_error *err)
{
    if (!k->inflate) {
        /* As stored: no bigger than what the database holds already. */
        k->written += n;
        return write_all(k->fd, in, n, err);
    }
    k->z.next_in = (Bytef *)(uintptr_t)in;
    k->z.avail_in = (uInt)n;
    while (k->z.avail_in > 0) {
        k->z.next_out = k->out;
        k->z.avail_out = (uInt)RV_DB_ORIGINAL_CHUNK;
        int zr = inflate(&k->z, Z_NO_FLUSH);
        size_t got = RV_DB_ORIGINAL_CHUNK - k->z.avail_out;
        if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && got))
            return rv_error_set(err, RV_ERR_PARSE, -1, -1,
                                "the stored original does not inflate (zlib %d)", zr);
        if (k->max_out && k->written + got > k->max_out)
            goto over;
        k->written += got;
        if (got && write_all(k->fd, k->out, got, err) != 0)
            return RV_ERR_IO;
        /* Concatenated gzip members inflate one after the other. */
        if (zr == Z_STREAM_END && inflateReset(&k->z) != Z_OK)
            return rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "zlib: inflateReset failed");
    }
    return 0;
over:
    return rv_error_field(err, RV_ERR_LIMIT, "max_trace_bytes",
                          "the original inflates past this server's limit of %llu bytes "
                          "(max_trace_bytes)",
                          (unsigned long long)k->max_out);
}

/* The original's size, encoding and upload size (text results). */
static int original_info(rv_db__conn *pc, const char *id_s, int64_t id, rv_db_original_info *info,
                         rv_error *err)
{
    const char *vals[] = {id_s};
    PGresult *r = rv_db__q(pc, "original",
                           "SELECT octet_length(bytes), encoding, size FROM trace_originals WHERE "
                           "trace_id = $1",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    int rc = 0;
    if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld", (long long)id);
    } else {
        info->stored = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
        info->gzip_wrapped = strcmp(PQgetvalue(r, 0, 1), "gzip") == 0;
        info->received = strtoull(PQgetvalue(r, 0, 2), NULL, 10);
    }
    PQclear(r);
    return rc;
}

int rv_db_original_write(rv_db *db, int64_t id, int fd, int mode, uint64_t max_out,
                         rv_db_original_info *info, uint64_t *written, rv_error *err)
{
    char id_s[24], off_s[24], len_s[24];
    rv_db_original_info inf = {0};
    orig_sink k = {.fd = fd, .max_out = max_out};
    int rc;

    if (written)
        *written = 0;
    rv_db__id_text(id_s, id);
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    rc = original_info(pc, id_s, id, &inf, err);
    k.inflate =
        mode == RV_DB_ORIGINAL_PLAIN || (mode == RV_DB_ORIGINAL_AS_RECEIVED && inf.gzip_wrapped);
    if (!rc && k.inflate) {
        if (!(k.out = malloc(RV_DB_ORIGINAL_CHUNK)))
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        else if (inflateInit2(&k.z, 16 + MAX_WBITS) != Z_OK)
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "zlib: inflateInit failed");
        else
            k.started = 1;
    }
    /* substring() reads only the chunks it needs: the column is stored
     * EXTERNAL, uncompressed (migration 0001). */
    for (uint64_t off = 0; !rc && off < inf.stored; off += RV_DB_ORIGINAL_CHUNK) {
        uint64_t n =
            inf.stored - off < RV_DB_ORIGINAL_CHUNK ? inf.stored - off : RV_DB_ORIGINAL_CHUNK;
        snprintf(off_s, sizeof(off_s), "%llu", (unsigned long long)off + 1);
        snprintf(len_s, sizeof(len_s), "%llu", (unsigned long long)n);
        const char *vals[] = {id_s, off_s, len_s};
        rv_db__deadline(db, pc, 0);
        PGresult *r = PQexecParams(pc->c,
                                   "SELECT substring(bytes from $2::integer for $3::integer) FROM "
                                   "trace_originals WHERE trace_id = $1",
                                   3, NULL, vals, NULL, NULL, 1);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            rc = rv_db__fail(err, "original", pc->c, r);
        else if (PQntuples(r) == 0)
            rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "trace %lld was deleted meanwhile",
                              (long long)id);
        else
            rc = sink_put(&k, (const unsigned char *)PQgetvalue(r, 0, 0),
                          (size_t)PQgetlength(r, 0, 0), err);
        PQclear(r);
    }
    rv_db__release(db, pc);
    if (k.started)
        inflateEnd(&k.z);
    free(k.out);
    if (info)
        *info = inf;
    if (written)
        *written = k.written;
    return rc;
}
