/* The what-if cache: the exact bytes of an answer as sent (text, so that
 * key order and number formatting survive, which jsonb would not keep)
 * and, in typed columns beside them, the answer's summary figures
 * (rv_run_summary) for fleet rows (rv_db_cache.h). */
#include "rv_db_cache.h"
#include "rv_db_internal.h"
#include "util/rv_buf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* float8 input text that round-trips (NaN and infinities included). */
static void f8_text(char out[40], double v)
{
    if (isnan(v))
        snprintf(out, 40, "NaN");
    else if (isinf(v))
        snprintf(out, 40, "%sInfinity", v < 0 ? "-" : "");
    else
        snprintf(out, 40, "%.17g", v);
}

int rv_db_whatif_cache_get(rv_db *db, int64_t trace_id, const char *request_hash, char **body,
                           size_t *len, rv_run_summary *sum, rv_error *err)
{
    char id_s[24];
    int rc = 0;

    *body = NULL;
    *len = 0;
    rv_db__id_text(id_s, trace_id);
    const char *vals[] = {id_s, request_hash};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__qp(pc, RV_DB__ST_CACHE_GET, vals, NULL, NULL, 0, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else if (PQntuples(r) == 1) {
        size_t n = (size_t)PQgetlength(r, 0, 0);
        char *b = malloc(n + 1);
        if (!b) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "what-if cache: out of memory (%zu bytes)",
                              n + 1);
        } else {
            memcpy(b, PQgetvalue(r, 0, 0), n);
            b[n] = '\0';
            *body = b;
            *len = n;
            if (sum) {
                double *f[] = {&sum->measured_us, &sum->baseline_us, &sum->predicted_us,
                               &sum->speedup, &sum->replay_error};
                for (int i = 0; i < 5; i++)
                    *f[i] = strtod(PQgetvalue(r, 0, 1 + i), NULL);
                sum->have_energy = PQgetvalue(r, 0, 6)[0] == 't';
                sum->baseline_energy_j = strtod(PQgetvalue(r, 0, 7), NULL);
                sum->energy_j = strtod(PQgetvalue(r, 0, 8), NULL);
                sum->warnings = atoi(PQgetvalue(r, 0, 9));
            }
        }
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_whatif_cache_put(rv_db *db, int64_t trace_id, const char *request_hash, const char *body,
                           size_t len, const rv_run_summary *sum, rv_error *err)
{
    static const rv_run_summary zero;
    char id_s[24], f[7][40], warn_s[16];
    rv_error local;

    if (!err)
        err = &local; /* to tell a missing trace from a failure */
    if (!body || memchr(body, '\0', len))
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "what-if cache: the answer is not text (no body, or a NUL byte)");
    if (len > (size_t)INT32_MAX)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                            "what-if cache: an answer of %zu bytes is too large", len);
    if (!sum)
        sum = &zero;
    rv_db__id_text(id_s, trace_id);
    f8_text(f[0], sum->measured_us);
    f8_text(f[1], sum->baseline_us);
    f8_text(f[2], sum->predicted_us);
    f8_text(f[3], sum->speedup);
    f8_text(f[4], sum->replay_error);
    f8_text(f[5], sum->baseline_energy_j);
    f8_text(f[6], sum->energy_j);
    snprintf(warn_s, sizeof(warn_s), "%d", sum->warnings);
    /* The body goes as a binary-format text parameter: its length is
     * given, so it needs no terminating NUL and no copy. */
    const char *vals[] = {id_s, request_hash, body,
                          f[0], f[1],         f[2],
                          f[3], f[4],         sum->have_energy ? "true" : "false",
                          f[5], f[6],         warn_s};
    int lens[12] = {[2] = (int)len};
    int fmts[12] = {[2] = 1};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__qp(pc, RV_DB__ST_CACHE_PUT, vals, lens, fmts, 0, PGRES_COMMAND_OK, err);
    int rc = r ? 0 : err->code;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

/* Appends "{a,b,...}" (a PostgreSQL array literal) of ids or of hex hashes
 * (neither needs quoting) to b. */
static void array_ids(rv_buf *b, const int64_t *ids, size_t n)
{
    rv_buf_addc(b, '{');
    for (size_t i = 0; i < n; i++)
        rv_buf_printf(b, "%s%lld", i ? "," : "", (long long)ids[i]);
    rv_buf_addc(b, '}');
}

static void array_hashes(rv_buf *b, const char *const *h, const int *only, size_t n, int want)
{
    int first = 1;
    rv_buf_addc(b, '{');
    for (size_t i = 0; i < n; i++) {
        if (only && !!only[i] != want)
            continue;
        rv_buf_printf(b, "%s%s", first ? "" : ",", h[i]);
        first = 0;
    }
    rv_buf_addc(b, '}');
}

int rv_db_whatif_cache_rows(rv_db *db, const int64_t *ids, size_t nids, const char *const *hashes,
                            const int *want_body, size_t nh, rv_db_cache_row **rows, size_t *nrows,
                            rv_error *err)
{
    rv_buf bi, bh, bb;
    rv_db_cache_row *out = NULL;
    PGresult *r = NULL;
    int rc = 0;

    *rows = NULL;
    *nrows = 0;
    if (nids == 0 || nh == 0)
        return 0;
    for (size_t i = 0; i < nh; i++)
        if (strspn(hashes[i], "0123456789abcdef") != 64 || hashes[i][64] != '\0')
            return rv_error_set(err, RV_ERR_INVALID, -1, -1, "what-if cache: bad request hash");
    /* 20 bytes per id and 65 per hash: a shard's worth fits easily. */
    rv_buf_init(&bi, nids * 21 + 8);
    rv_buf_init(&bh, nh * 66 + 8);
    rv_buf_init(&bb, nh * 66 + 8);
    array_ids(&bi, ids, nids);
    array_hashes(&bh, hashes, NULL, nh, 1);
    array_hashes(&bb, hashes, want_body, nh, 1);
    if (bi.err || bh.err || bb.err) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "what-if cache: out of memory");
        goto out;
    }
    const char *vals[] = {rv_buf_str(&bi), rv_buf_str(&bh), rv_buf_str(&bb)};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc) {
        rc = RV_ERR_IO;
        goto out;
    }
    r = rv_db__q(pc, "what-if cache rows",
                 "SELECT trace_id, request_hash, CASE WHEN request_hash = ANY($3::text[]) THEN "
                 "body END, measured_us, baseline_us, predicted_us, speedup, replay_error, "
                 "have_energy, baseline_energy_j, energy_j, warnings FROM whatif_cache WHERE "
                 "trace_id = ANY($1::bigint[]) AND request_hash = ANY($2::text[])",
                 3, vals, PGRES_TUPLES_OK, err);
    rv_db__release(db, pc);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    size_t n = (size_t)PQntuples(r);
    out = calloc(n ? n : 1, sizeof(*out));
    if (!out) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "what-if cache: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        rv_db_cache_row *row = &out[*nrows];
        const char *h = PQgetvalue(r, (int)i, 1);
        size_t k = 0;
        while (k < nh && strcmp(hashes[k], h) != 0)
            k++;
        if (k == nh)
            continue;
        row->trace_id = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
        row->hash = k;
        double *f[] = {&row->sum.measured_us, &row->sum.baseline_us, &row->sum.predicted_us,
                       &row->sum.speedup, &row->sum.replay_error};
        for (int j = 0; j < 5; j++)
            *f[j] = strtod(PQgetvalue(r, (int)i, 3 + j), NULL);
        row->sum.have_energy = PQgetvalue(r, (int)i, 8)[0] == 't';
        row->sum.baseline_energy_j = strtod(PQgetvalue(r, (int)i, 9), NULL);
        row->sum.energy_j = strtod(PQgetvalue(r, (int)i, 10), NULL);
        row->sum.warnings = atoi(PQgetvalue(r, (int)i, 11));
        if (!PQgetisnull(r, (int)i, 2)) {
            row->body = strdup(PQgetvalue(r, (int)i, 2));
            if (!row->body) {
                rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "what-if cache: out of memory");
                goto out;
            }
        }
        (*nrows)++;
    }
    *rows = out;
    out = NULL;
out:
    if (out)
        rv_db_cache_rows_free(out, *nrows);
    if (rc != 0)
        *nrows = 0;
    PQclear(r);
    rv_buf_free(&bi);
    rv_buf_free(&bh);
    rv_buf_free(&bb);
    return rc;
}

void rv_db_cache_rows_free(rv_db_cache_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++)
        free(rows[i].body);
    free(rows);
}
