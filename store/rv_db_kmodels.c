/* Per-platform kernel models; see rv_db_kmodels.h. */
#include "rv_db_kmodels.h"
#include "rv_db_internal.h"

#include "hw/rv_hw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rv_db__kmodels_merge_trace(rv_db__conn *pc, const char *platform_id, const char *trace_id,
                               const char *const *keff, rv_error *err)
{
    const char *v[] = {trace_id, keff[0], keff[1], keff[2], keff[3]};
    PGresult *r = rv_db__q(pc, "store kernel efficiencies",
                           "INSERT INTO trace_kernel_effs (trace_id, class, bucket, n, slog) "
                           "SELECT $1, * FROM unnest($2::text[], $3::int[], $4::float8[], "
                           "$5::float8[])",
                           5, v, PGRES_COMMAND_OK, err);
    if (!r)
        return RV_ERR_IO;
    PQclear(r);
    /* The platform's rows stay locked until the COMMIT: uploads to one
     * platform serialize here, as for the overhead statistics. */
    const char *m[] = {platform_id, trace_id};
    r = rv_db__q(pc, "merge kernel efficiencies",
                 "INSERT INTO platform_kernel_effs (platform_id, class, bucket, n, slog) "
                 "SELECT $1, class, bucket, n, slog FROM trace_kernel_effs WHERE trace_id = $2 "
                 "ORDER BY class, bucket ON CONFLICT (platform_id, class, bucket) DO UPDATE SET "
                 "n = platform_kernel_effs.n + EXCLUDED.n, slog = platform_kernel_effs.slog + "
                 "EXCLUDED.slog",
                 2, m, PGRES_COMMAND_OK, err);
    if (!r)
        return RV_ERR_IO;
    PQclear(r);
    return 0;
}

int rv_db__kmodels_rebuild(rv_db__conn *pc, const char *platform_id, rv_error *err)
{
    const char *v[] = {platform_id};
    PGresult *r = rv_db__q(pc, "clear kernel efficiencies",
                           "DELETE FROM platform_kernel_effs WHERE platform_id = $1", 1, v,
                           PGRES_COMMAND_OK, err);
    if (!r)
        return RV_ERR_IO;
    PQclear(r);
    r = rv_db__q(pc, "rebuild kernel efficiencies",
                 "INSERT INTO platform_kernel_effs (platform_id, class, bucket, n, slog) "
                 "SELECT $1, e.class, e.bucket, sum(e.n), sum(e.slog) FROM trace_kernel_effs e "
                 "JOIN traces t ON t.id = e.trace_id WHERE t.platform_id = $1 "
                 "GROUP BY e.class, e.bucket",
                 1, v, PGRES_COMMAND_OK, err);
    if (!r)
        return RV_ERR_IO;
    PQclear(r);
    return 0;
}

/* Rows (class, bucket, n, slog) from column c0 on into *out; rows whose
 * class is NULL (an outer join's empty side) are skipped, and with hw
 * those whose GPU (column c0 - 1) is another row of the hardware table. */
static int read_rows(PGresult *r, int c0, const rv_hw *hw, rv_kmodel_acc *out, rv_error *err)
{
    int rc = 0;
    for (int i = 0; i < PQntuples(r) && !rc; i++) {
        if (PQgetisnull(r, i, c0) || (hw && rv_hw_lookup(PQgetvalue(r, i, c0 - 1)) != hw))
            continue;
        rc = rv_kmodel_acc_add_bucket(
            out, PQgetvalue(r, i, c0), strtoll(PQgetvalue(r, i, c0 + 1), NULL, 10),
            strtod(PQgetvalue(r, i, c0 + 2), NULL), strtod(PQgetvalue(r, i, c0 + 3), NULL), err);
    }
    return rc;
}

int rv_db_trace_kmodel(rv_db *db, int64_t trace_id, int64_t *platform_id, char *gpu, size_t gpu_cap,
                       char *version, size_t cap, rv_kmodel_acc *out, rv_error *err)
{
    char id_s[24];
    const char *vals[1] = {id_s};
    int rc = 0;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)trace_id);
    memset(out, 0, sizeof(*out));
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* One statement reads the rows and their version, so an answer cached
     * under the version was made with those rows. */
    PGresult *r = rv_db__q(pc, "trace kernel model",
                           "SELECT t.platform_id, count(e.class) OVER (), coalesce(sum(e.n) OVER "
                           "(), 0), p.gpu_model, e.class, e.bucket, e.n, e.slog FROM traces t "
                           "JOIN platforms p ON p.id = t.platform_id LEFT JOIN "
                           "platform_kernel_effs e ON e.platform_id = t.platform_id WHERE t.id = "
                           "$1 ORDER BY e.class, e.bucket",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no trace with id %lld",
                          (long long)trace_id);
        goto out;
    }
    if (platform_id)
        *platform_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    if (version && cap)
        snprintf(version, cap, "platform %s, %s buckets, %s kernels", PQgetvalue(r, 0, 0),
                 PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
    if (gpu && gpu_cap)
        snprintf(gpu, gpu_cap, "%s", PQgetvalue(r, 0, 3));
    rc = read_rows(r, 4, NULL, out, err);
out:
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_platform_kmodel(rv_db *db, int64_t platform_id, rv_kmodel_acc *out, int64_t *ntraces,
                          rv_error *err)
{
    char id_s[24];
    const char *vals[1] = {id_s};
    int rc = 0;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)platform_id);
    memset(out, 0, sizeof(*out));
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__q(pc, "platform kernel model",
                           "SELECT (SELECT count(DISTINCT k.trace_id) FROM trace_kernel_effs k "
                           "JOIN traces t ON t.id = k.trace_id WHERE t.platform_id = p.id), "
                           "e.class, e.bucket, e.n, e.slog FROM platforms p LEFT JOIN "
                           "platform_kernel_effs e ON e.platform_id = p.id WHERE p.id = $1 "
                           "ORDER BY e.class, e.bucket",
                           1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no platform with id %lld",
                          (long long)platform_id);
        goto out;
    }
    if (ntraces)
        *ntraces = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    rc = read_rows(r, 1, NULL, out, err);
out:
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_gpu_kmodel(rv_db *db, const char *gpu, rv_kmodel_acc *out, char *version, size_t cap,
                     rv_error *err)
{
    const rv_hw *hw = rv_hw_lookup(gpu);
    int rc = 0;
    memset(out, 0, sizeof(*out));
    if (version && cap)
        snprintf(version, cap, "gpu %s: none", gpu);
    if (!hw)
        return 0;
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* Platforms name their GPU as their traces do; the hardware table
     * decides which of them are this GPU. */
    PGresult *r = rv_db__q(pc, "gpu kernel models",
                           "SELECT p.gpu_model, e.class, e.bucket, e.n, e.slog FROM "
                           "platform_kernel_effs e JOIN platforms p ON p.id = e.platform_id "
                           "ORDER BY p.id, e.class, e.bucket",
                           0, NULL, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    rc = read_rows(r, 1, hw, out, err);
    if (!rc && version && cap)
        snprintf(version, cap, "gpu %s: %.17g kernels", hw->name, rv_kmodel_acc_count(out));
out:
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}
