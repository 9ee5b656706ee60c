/* The what-if cache: the exact bytes of an answer as sent (text, so that
 * key order and number formatting survive, which jsonb would not keep)
 * and, in typed columns beside them, the answer's summary figures
 * (rv_run_summary) for fleet rows (rv_db_cache.h). */
#include "rv_db_cache.h"
#include "rv_db_internal.h"

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
