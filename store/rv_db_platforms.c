/* Platforms: the identity key of a machine, the platform rows (upserted
 * by ingest on their own, outside its transaction) and their listing
 * (rv_db_platforms.h). */
#include "rv_db_platforms.h"
#include "rv_db_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_sha256.h"

static void trim_into(char *out, size_t cap, const char *s)
{
    if (!s)
        s = "";
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

void rv_db_platform_key(const rv_db_platform *p, char out[65])
{
    const char *f[5] = {p->gpu_model, p->cpu_model, p->driver, p->runtime_version, p->framework};
    rv_sha256 c;
    uint8_t d[RV_SHA256_LEN];
    char buf[512];
    rv_sha256_init(&c);
    trim_into(buf, sizeof(buf), f[0]);
    rv_sha256_update(&c, buf, strlen(buf));
    snprintf(buf, sizeof(buf), "\n%d", p->gpus_per_node);
    rv_sha256_update(&c, buf, strlen(buf));
    for (int i = 1; i < 5; i++) {
        rv_sha256_update(&c, "\n", 1);
        trim_into(buf, sizeof(buf), f[i]);
        rv_sha256_update(&c, buf, strlen(buf));
    }
    rv_sha256_final(&c, d);
    rv_sha256_to_hex(d, out);
}

int rv_db_platform_list(rv_db *db, json_t **out, rv_error *err)
{
    return rv_db__query_json(
        db, "platform list",
        "SELECT coalesce(json_agg(json_build_object('id', p.id, 'identity_key', p.identity_key, "
        "'gpu_model', p.gpu_model, 'gpus_per_node', p.gpus_per_node, 'cpu_model', p.cpu_model, "
        "'driver', p.driver, 'runtime_version', p.runtime_version, 'framework', p.framework, "
        "'created_at', p.created_at, 'traces', (SELECT count(*) FROM traces t WHERE "
        "t.platform_id = p.id)) ORDER BY p.id), '[]')::text FROM platforms p",
        0, NULL, out, err);
}

int rv_db__platform_upsert(rv_db__conn *pc, const rv_db_platform *p, const char *key, int64_t *id,
                           rv_error *err)
{
    char gpn[16];
    PGresult *r = NULL;

    snprintf(gpn, sizeof(gpn), "%d", p->gpus_per_node);
    const char *vals[] = {key,       p->gpu_model,       gpn,         p->cpu_model,
                          p->driver, p->runtime_version, p->framework};
    /* When a concurrent ingest inserts the same platform, our INSERT waits
     * for it and does nothing, and the SELECT still runs on the statement's
     * older snapshot: run it again, it then sees the row. */
    for (int attempt = 0; attempt < 5; attempt++) {
        PQclear(r);
        r = rv_db__q(pc, "platform",
                     "WITH ins AS (INSERT INTO platforms (identity_key, gpu_model, gpus_per_node, "
                     "cpu_model, driver, runtime_version, framework) VALUES ($1, $2, $3, $4, $5, "
                     "$6, $7) ON CONFLICT (identity_key) DO NOTHING RETURNING id) SELECT id FROM "
                     "ins UNION ALL SELECT id FROM platforms WHERE identity_key = $1 LIMIT 1",
                     7, vals, PGRES_TUPLES_OK, err);
        if (!r || PQntuples(r) == 1)
            break;
    }
    if (!r)
        return RV_ERR_IO;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return rv_error_set(err, RV_ERR_IO, -1, -1, "platform row not found");
    }
    *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return 0;
}
