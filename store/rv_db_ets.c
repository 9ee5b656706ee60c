/* Execution traces attached to stored traces: the ET row and the joined
 * snapshot in one transaction (rv_db_ets.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "rv_db.h"
#include "rv_db_internal.h"
#include "reader/rv_snapshot.h"

static int gz_magic(const void *p, size_t n)
{
    const uint8_t *b = p;
    return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

/* One statement with text parameters and one binary one last. */
static int exec_bytes(rv_db__conn *pc, const char *what, const char *sql, int n,
                      const char *const *text, const void *bytes, size_t len, rv_error *err)
{
    const char *vals[8];
    int lens[8] = {0}, fmts[8] = {0};
    for (int i = 0; i < n; i++)
        vals[i] = text[i];
    vals[n] = bytes;
    lens[n] = (int)len;
    fmts[n] = 1;
    PGresult *r = PQexecParams(pc->c, sql, n + 1, NULL, vals, lens, fmts, 0);
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : rv_db__fail(err, what, pc->c, r);
    PQclear(r);
    return rc;
}

int rv_db_et_attach(rv_db *db, int64_t id, const void *et, size_t et_len, const uint8_t *snap,
                    size_t snap_len, const rv_db_et_join *join, rv_error *err)
{
    char id_s[24], size_s[24], ops_s[24], ver_s[16], raw_s[24];
    uint8_t *gz = NULL;
    size_t gz_len = 0;
    uint64_t raw_len = 0;
    PGresult *r = NULL;
    int rc, plain = !gz_magic(et, et_len);

    if (et_len > (size_t)1000 << 20)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                            "execution trace of %zu bytes: a bytea "
                            "value holds at most 1 GiB",
                            et_len);
    if (plain && (rc = rv_db__gzip(et, et_len, &gz, &gz_len, err)) != 0)
        return rc;
    rv_db__id_text(id_s, id);
    snprintf(size_s, sizeof(size_s), "%zu", et_len);
    snprintf(ops_s, sizeof(ops_s), "%lld", (long long)join->ops);
    snprintf(ver_s, sizeof(ver_s), "%d", RV_SNAPSHOT_VERSION);
    rv_snapshot_peek(snap, snap_len, NULL, &raw_len, NULL);
    snprintf(raw_s, sizeof(raw_s), "%llu", (unsigned long long)raw_len);
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc) {
        free(gz);
        return RV_ERR_IO;
    }
    if ((rc = rv_db__exec(pc, "begin", "BEGIN", err)) != 0)
        goto out;
    /* The trace row locked: a delete racing the attach waits or wins. */
    const char *one[] = {id_s};
    r = rv_db__q(pc, "lock trace", "SELECT 1 FROM traces WHERE id = $1 FOR UPDATE", 1, one,
                 PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld", (long long)id);
        goto out;
    }
    PQclear(r);
    r = rv_db__q(pc, "find ET", "SELECT 1 FROM trace_ets WHERE trace_id = $1", 1, one,
                 PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) > 0) {
        rc = rv_error_field(err, RV_ERR_INVALID, "et", "trace %lld has an execution trace already",
                            (long long)id);
        goto out;
    }
    const char *ins[] = {id_s, plain ? "gzip" : "identity", size_s, ops_s, join->method};
    rc = exec_bytes(pc, "store ET",
                    "INSERT INTO trace_ets (trace_id, encoding, size, ops, join_method, bytes) "
                    "VALUES ($1, $2, $3, $4, $5, $6)",
                    5, ins, plain ? gz : et, plain ? gz_len : et_len, err);
    if (!rc) {
        PGresult *d =
            rv_db__q(pc, "drop snapshots", "DELETE FROM trace_snapshots WHERE trace_id = $1", 1,
                     one, PGRES_COMMAND_OK, err);
        rc = d ? 0 : RV_ERR_IO;
        PQclear(d);
    }
    const char *sn[] = {id_s, ver_s, raw_s};
    if (!rc)
        rc = exec_bytes(pc, "store snapshot",
                        "INSERT INTO trace_snapshots (trace_id, format_version, raw_size, bytes) "
                        "VALUES ($1, $2, $3, $4)",
                        3, sn, snap, snap_len, err);
    if (!rc) {
        /* Answers computed without the ET's shapes are stale. */
        PGresult *d =
            rv_db__q(pc, "drop cached answers", "DELETE FROM whatif_cache WHERE trace_id = $1", 1,
                     one, PGRES_COMMAND_OK, err);
        rc = d ? 0 : RV_ERR_IO;
        PQclear(d);
    }
    if (!rc)
        rc = rv_db__trace_changed(pc, id_s, err);
    if (!rc)
        rc = rv_db__exec(pc, "commit", "COMMIT", err);
out:
    PQclear(r);
    rv_db__release(db, pc); /* rolls back what did not commit */
    free(gz);
    return rc;
}

int rv_db_et_exists(rv_db *db, int64_t id, rv_error *err)
{
    char id_s[24];
    rv_db__id_text(id_s, id);
    const char *one[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__q(pc, "find ET", "SELECT 1 FROM trace_ets WHERE trace_id = $1", 1, one,
                           PGRES_TUPLES_OK, err);
    int rc = r ? PQntuples(r) > 0 : RV_ERR_IO;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}
