#include "rv_db.h"
#include "rv_report.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "rv_auth.h"
#include "rv_kineto.h"
#include "rv_sha256.h"
#include "rv_snapshot.h"

#define MAX_CONNS         64
#define DEFAULT_MAX_BYTES ((size_t)512 << 20)
/* bytea values cannot exceed 1 GiB; stay clear of it. */
#define HARD_MAX_STORED  ((size_t)1000 << 20)
#define MIGRATE_LOCK_KEY "5928370461017297"
#define SNAPSHOT_LEVEL   1
#define COPY_CHUNK       (1u << 20)
#define MAX_MIGRATIONS   4096

/* ---- pool ------------------------------------------------------------------- */

typedef struct pconn {
    PGconn *c;
    uint32_t prepared; /* bit i: statement i prepared on this connection */
    int busy;
} pconn;

struct rv_db {
    char *conninfo;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned n;
    pconn conns[MAX_CONNS];
    rv_db_ingest_hook hook;
    void *hook_ctx;
};

/* Hot statements, prepared once per connection on first use. */
enum { ST_SNAPSHOT, ST_CACHE_GET, ST_CACHE_PUT, ST_TOKEN_VERIFY, ST_JOB_CLAIM, ST_COUNT };
static const struct {
    const char *name, *sql;
    int nparams;
} stmts[ST_COUNT] = {
    [ST_SNAPSHOT] =
        {"rv_snapshot",
         "SELECT bytes FROM trace_snapshots WHERE trace_id = $1 AND format_version = $2", 2},
    [ST_CACHE_GET] = {"rv_cache_get",
                      "SELECT result::text FROM whatif_cache WHERE trace_id = $1 AND "
                      "request_hash = $2",
                      2},
    [ST_CACHE_PUT] = {"rv_cache_put",
                      "INSERT INTO whatif_cache (trace_id, request_hash, result) VALUES ($1, $2, "
                      "$3::jsonb) ON CONFLICT (trace_id, request_hash) DO UPDATE SET result = "
                      "EXCLUDED.result, created_at = now()",
                      3},
    [ST_TOKEN_VERIFY] = {"rv_token_verify",
                         "UPDATE api_tokens SET last_used_at = now() WHERE token_sha256 = $1 AND "
                         "revoked_at IS NULL RETURNING id, name, token_sha256, "
                         "array_to_string(scopes, ',')",
                         1},
    [ST_JOB_CLAIM] = {"rv_job_claim",
                      "UPDATE jobs SET state = 'running', locked_by = $1, started_at = now(), "
                      "heartbeat_at = now(), attempts = attempts + 1 WHERE id = (SELECT id FROM "
                      "jobs WHERE state = 'queued' AND ($2::text IS NULL OR kind = $2) ORDER BY "
                      "id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, kind, request::text, "
                      "attempts",
                      2},
};

static int db_fail(rv_error *err, const char *what, PGconn *c, const PGresult *r)
{
    const char *msg = r ? PQresultErrorMessage(r) : "";
    if (!msg || !*msg)
        msg = PQerrorMessage(c);
    char buf[200];
    snprintf(buf, sizeof(buf), "%s", msg ? msg : "");
    buf[strcspn(buf, "\n")] = '\0';
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    int code = state && strcmp(state, "23503") == 0 ? RV_ERR_NOTFOUND : RV_ERR_IO;
    return rv_error_set(err, code, -1, -1, "database: %s: %s", what, buf);
}

/* Server NOTICEs ("relation already exists, skipping") are not errors and
 * would only clutter the service's stderr. */
static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

int rv_db_open(const char *conninfo, unsigned nconns, rv_db **out, rv_error *err)
{
    *out = NULL;
    if (nconns < 1)
        nconns = 1;
    if (nconns > MAX_CONNS)
        nconns = MAX_CONNS;
    rv_db *db = calloc(1, sizeof(*db));
    if (!db || !(db->conninfo = strdup(conninfo))) {
        free(db);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    pthread_mutex_init(&db->mu, NULL);
    pthread_cond_init(&db->cv, NULL);
    for (unsigned i = 0; i < nconns; i++) {
        PGconn *c = PQconnectdb(conninfo);
        db->n = i + 1;
        db->conns[i].c = c;
        PQsetNoticeProcessor(c, quiet_notice, NULL);
        if (PQstatus(c) != CONNECTION_OK) {
            int rc = rv_error_set(err, RV_ERR_IO, -1, -1, "database: cannot connect: %s",
                                  PQerrorMessage(c));
            rv_db_close(db);
            return rc;
        }
    }
    *out = db;
    return 0;
}

void rv_db_close(rv_db *db)
{
    if (!db)
        return;
    for (unsigned i = 0; i < db->n; i++)
        PQfinish(db->conns[i].c);
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->cv);
    free(db->conninfo);
    free(db);
}

void rv_db_set_ingest_hook(rv_db *db, rv_db_ingest_hook fn, void *ctx)
{
    db->hook = fn;
    db->hook_ctx = ctx;
}

static pconn *acquire(rv_db *db, rv_error *err)
{
    pconn *pc = NULL;
    pthread_mutex_lock(&db->mu);
    for (;;) {
        for (unsigned i = 0; i < db->n && !pc; i++)
            if (!db->conns[i].busy)
                pc = &db->conns[i];
        if (pc)
            break;
        pthread_cond_wait(&db->cv, &db->mu);
    }
    pc->busy = 1;
    pthread_mutex_unlock(&db->mu);
    if (PQstatus(pc->c) != CONNECTION_OK) {
        PQreset(pc->c);
        pc->prepared = 0;
        if (PQstatus(pc->c) != CONNECTION_OK) {
            rv_error_set(err, RV_ERR_IO, -1, -1, "database: connection lost: %s",
                         PQerrorMessage(pc->c));
            pthread_mutex_lock(&db->mu);
            pc->busy = 0;
            pthread_cond_signal(&db->cv);
            pthread_mutex_unlock(&db->mu);
            return NULL;
        }
    }
    return pc;
}

static void release(rv_db *db, pconn *pc)
{
    if (!pc)
        return;
    /* Never hand out a connection inside a transaction. */
    if (PQstatus(pc->c) == CONNECTION_OK && PQtransactionStatus(pc->c) != PQTRANS_IDLE)
        PQclear(PQexec(pc->c, "ROLLBACK"));
    pthread_mutex_lock(&db->mu);
    pc->busy = 0;
    pthread_cond_signal(&db->cv);
    pthread_mutex_unlock(&db->mu);
}

/* PQexecParams with text parameters; NULL (and *err) unless the result has
 * status want. */
static PGresult *q(pconn *pc, const char *what, const char *sql, int n, const char *const *vals,
                   ExecStatusType want, rv_error *err)
{
    PGresult *r = PQexecParams(pc->c, sql, n, NULL, vals, NULL, NULL, 0);
    if (PQresultStatus(r) != want) {
        db_fail(err, what, pc->c, r);
        PQclear(r);
        return NULL;
    }
    return r;
}

static int exec_ok(pconn *pc, const char *what, const char *sql, rv_error *err)
{
    PGresult *r = q(pc, what, sql, 0, NULL, PGRES_COMMAND_OK, err);
    PQclear(r);
    return r ? 0 : RV_ERR_IO;
}

/* A prepared hot statement; fmts/lens may be NULL (all text). */
static PGresult *qp(pconn *pc, int st, const char *const *vals, const int *lens, const int *fmts,
                    int result_binary, ExecStatusType want, rv_error *err)
{
    if (!(pc->prepared & (1u << st))) {
        PGresult *r = PQprepare(pc->c, stmts[st].name, stmts[st].sql, stmts[st].nparams, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            db_fail(err, stmts[st].name, pc->c, r);
            PQclear(r);
            return NULL;
        }
        PQclear(r);
        pc->prepared |= 1u << st;
    }
    PGresult *r =
        PQexecPrepared(pc->c, stmts[st].name, stmts[st].nparams, vals, lens, fmts, result_binary);
    if (PQresultStatus(r) != want) {
        db_fail(err, stmts[st].name, pc->c, r);
        PQclear(r);
        return NULL;
    }
    return r;
}

int rv_db_ping(rv_db *db, rv_error *err)
{
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = q(pc, "ping", "SELECT 1", 0, NULL, PGRES_TUPLES_OK, err);
    PQclear(r);
    release(db, pc);
    return r ? 0 : RV_ERR_IO;
}

/* Runs a query that returns one text value of JSON and parses it. */
static int query_json(rv_db *db, const char *what, const char *sql, int n, const char *const *vals,
                      json_t **out, rv_error *err)
{
    *out = NULL;
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = q(pc, what, sql, n, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "%s: not found", what);
    } else {
        json_error_t je;
        *out = json_loads(PQgetvalue(r, 0, 0), JSON_DECODE_ANY, &je);
        if (!*out)
            rc = rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "%s: bad JSON from the database: %s",
                              what, je.text);
    }
    PQclear(r);
    release(db, pc);
    return rc;
}

/* ---- migrations --------------------------------------------------------------- */

typedef struct migration {
    int64_t version;
    char *up, *down; /* paths, NULL when absent */
} migration;

static int cmp_mig(const void *a, const void *b)
{
    const migration *x = a, *y = b;
    return x->version < y->version ? -1 : x->version > y->version;
}

static void free_migrations(migration *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(m[i].up);
        free(m[i].down);
    }
    free(m);
}

static int list_migrations(const char *dir, migration **out, size_t *nout, rv_error *err)
{
    DIR *d = opendir(dir);
    migration *m = NULL;
    size_t n = 0;
    int rc = 0;
    *out = NULL;
    *nout = 0;
    if (!d)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "migrations: cannot open %s: %s", dir,
                            strerror(errno));
    m = calloc(MAX_MIGRATIONS, sizeof(*m));
    if (!m) {
        closedir(d);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    struct dirent *de;
    while ((de = readdir(d)) && !rc) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        if (!isdigit((unsigned char)nm[0]))
            continue;
        int up = len > 7 && strcmp(nm + len - 7, ".up.sql") == 0;
        int down = len > 9 && strcmp(nm + len - 9, ".down.sql") == 0;
        char *end;
        long long v = strtoll(nm, &end, 10);
        if ((!up && !down) || *end != '_' || v < 0) {
            rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                              "migrations: %s/%s is not NNNN_title.up.sql or .down.sql", dir, nm);
            break;
        }
        size_t i = 0;
        while (i < n && m[i].version != v)
            i++;
        if (i == n) {
            if (n == MAX_MIGRATIONS) {
                rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1, "migrations: too many files");
                break;
            }
            m[n++].version = v;
        }
        char **slot = up ? &m[i].up : &m[i].down;
        if (*slot) {
            rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                              "migrations: two %s files for version %lld in %s", up ? "up" : "down",
                              v, dir);
            break;
        }
        size_t plen = strlen(dir) + len + 2;
        *slot = malloc(plen);
        if (!*slot) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            break;
        }
        snprintf(*slot, plen, "%s/%s", dir, nm);
    }
    closedir(d);
    for (size_t i = 0; i < n && !rc; i++)
        if (!m[i].up)
            rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                              "migrations: version %lld has no .up.sql in %s",
                              (long long)m[i].version, dir);
    if (rc) {
        free_migrations(m, n);
        return rc;
    }
    qsort(m, n, sizeof(*m), cmp_mig);
    *out = m;
    *nout = n;
    return 0;
}

static char *read_text(const char *path, rv_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (16u << 20)) {
                rv_error_set(err, RV_ERR_LIMIT, -1, -1, "%s is larger than 16 MiB", path);
                free(buf);
                fclose(f);
                return NULL;
            }
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
                return NULL;
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, 4096, f);
        len += k;
        if (k < 4096)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

const char *rv_db_migrations_dir(void)
{
    static char found[PATH_MAX];
    const char *env = getenv("REVERIE_MIGRATIONS");
    struct stat sb;
    if (env && *env)
        return env;
    if (stat("migrations/0001_init.up.sql", &sb) == 0) {
        if (realpath("migrations", found))
            return found;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        static const char *rel[] = {"../share/reverie/migrations", "../../migrations",
                                    "../../../migrations"};
        for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
            char p[PATH_MAX + 64];
            snprintf(p, sizeof(p), "%s/%s/0001_init.up.sql", exe, rel[i]);
            if (stat(p, &sb) == 0) {
                p[strlen(p) - strlen("/0001_init.up.sql")] = '\0';
                if (realpath(p, found))
                    return found;
            }
        }
    }
#ifdef RV_MIGRATIONS_DIR
    if (stat(RV_MIGRATIONS_DIR, &sb) == 0)
        return RV_MIGRATIONS_DIR;
#endif
    return NULL;
}

static int read_version(pconn *pc, int64_t *version, int *dirty, rv_error *err)
{
    PGresult *r = q(pc, "schema_migrations", "SELECT version, dirty FROM schema_migrations", 0,
                    NULL, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    *version = -1;
    *dirty = 0;
    if (PQntuples(r) > 1) {
        PQclear(r);
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "schema_migrations has %d rows; expected one", PQntuples(r));
    }
    if (PQntuples(r) == 1) {
        *version = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        *dirty = PQgetvalue(r, 0, 1)[0] == 't';
    }
    PQclear(r);
    return 0;
}

/* Applies one file and sets the version to new_version (-1: none) in one
 * transaction. */
static int apply_one(pconn *pc, const char *path, int64_t new_version, rv_error *err)
{
    char *sql = read_text(path, err);
    if (!sql)
        return RV_ERR_IO;
    int rc = exec_ok(pc, "BEGIN", "BEGIN", err);
    if (!rc) {
        PGresult *r = PQexec(pc->c, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
            char what[PATH_MAX + 16];
            snprintf(what, sizeof(what), "migration %s", path);
            rc = db_fail(err, what, pc->c, r);
        }
        PQclear(r);
    }
    if (!rc)
        rc = exec_ok(pc, "schema_migrations", "DELETE FROM schema_migrations", err);
    if (!rc && new_version >= 0) {
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)new_version);
        const char *vals[] = {v};
        PGresult *r = q(pc, "schema_migrations",
                        "INSERT INTO schema_migrations (version, dirty) VALUES ($1, false)", 1,
                        vals, PGRES_COMMAND_OK, err);
        rc = r ? 0 : RV_ERR_IO;
        PQclear(r);
    }
    if (!rc)
        rc = exec_ok(pc, "COMMIT", "COMMIT", err);
    if (rc)
        PQclear(PQexec(pc->c, "ROLLBACK"));
    free(sql);
    return rc;
}

static int migrate(rv_db *db, const char *dir, int down_steps, rv_error *err)
{
    migration *m = NULL;
    size_t n = 0;
    int rc, locked = 0;
    pconn *pc = NULL;

    if (!dir)
        dir = rv_db_migrations_dir();
    if (!dir)
        return rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                            "migrations: directory not found (set REVERIE_MIGRATIONS or run "
                            "from the source tree)");
    rc = list_migrations(dir, &m, &n, err);
    if (rc)
        return rc;
    pc = acquire(db, err);
    if (!pc) {
        rc = RV_ERR_IO;
        goto out;
    }
    /* Session lock: serializes runners across processes and replicas. */
    {
        PGresult *r = q(pc, "advisory lock", "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", 0,
                        NULL, PGRES_TUPLES_OK, err);
        rc = r ? 0 : RV_ERR_IO;
        PQclear(r);
        if (rc)
            goto out;
    }
    locked = 1;
    rc = exec_ok(pc, "schema_migrations",
                 "CREATE TABLE IF NOT EXISTS schema_migrations (version bigint NOT NULL PRIMARY "
                 "KEY, dirty boolean NOT NULL)",
                 err);
    if (rc)
        goto out;
    int64_t cur;
    int dirty;
    rc = read_version(pc, &cur, &dirty, err);
    if (rc)
        goto out;
    if (dirty) {
        rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                          "migrations: the database is marked dirty at version %lld (a "
                          "non-transactional tool failed halfway): repair the schema by hand, "
                          "then UPDATE schema_migrations SET dirty = false",
                          (long long)cur);
        goto out;
    }
    if (down_steps == 0) {
        for (size_t i = 0; i < n && !rc; i++)
            if (m[i].version > cur)
                rc = apply_one(pc, m[i].up, m[i].version, err);
        goto out;
    }
    for (int step = 0; (down_steps < 0 || step < down_steps) && cur >= 0 && !rc; step++) {
        size_t i = 0;
        while (i < n && m[i].version != cur)
            i++;
        if (i == n) {
            rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                              "migrations: no file for the database's version %lld in %s",
                              (long long)cur, dir);
            break;
        }
        if (!m[i].down) {
            rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                              "migrations: version %lld has no .down.sql", (long long)cur);
            break;
        }
        int64_t prev = i > 0 ? m[i - 1].version : -1;
        rc = apply_one(pc, m[i].down, prev, err);
        cur = prev;
    }
out:
    if (locked) {
        PQclear(PQexec(pc->c, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")"));
    }
    release(db, pc);
    free_migrations(m, n);
    return rc;
}

int rv_db_migrate(rv_db *db, const char *dir, rv_error *err)
{
    return migrate(db, dir, 0, err);
}

int rv_db_migrate_down(rv_db *db, const char *dir, int steps, rv_error *err)
{
    return migrate(db, dir, steps <= 0 ? -1 : steps, err);
}

int rv_db_schema_version(rv_db *db, int64_t *version, int *dirty, rv_error *err)
{
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    *version = -1;
    *dirty = 0;
    int rc = 0;
    PGresult *r = q(pc, "schema_migrations", "SELECT to_regclass('schema_migrations') IS NOT NULL",
                    0, NULL, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQgetvalue(r, 0, 0)[0] == 't')
        rc = read_version(pc, version, dirty, err);
    PQclear(r);
    release(db, pc);
    return rc;
}

/* ---- platforms --------------------------------------------------------------- */

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
    return query_json(
        db, "platform list",
        "SELECT coalesce(json_agg(json_build_object('id', p.id, 'identity_key', p.identity_key, "
        "'gpu_model', p.gpu_model, 'gpus_per_node', p.gpus_per_node, 'cpu_model', p.cpu_model, "
        "'driver', p.driver, 'runtime_version', p.runtime_version, 'framework', p.framework, "
        "'created_at', p.created_at, 'traces', (SELECT count(*) FROM traces t WHERE "
        "t.platform_id = p.id)) ORDER BY p.id), '[]')::text FROM platforms p",
        0, NULL, out, err);
}

/* ---- ingest ------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap, max;
    int failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (cap > b->max) {
            b->failed = 1;
            return;
        }
        char *np = realloc(b->p, cap);
        if (!np) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* COPY text format escaping. */
static void sb_copy_text(sbuf *b, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        const char *esc = NULL;
        switch (*s) {
        case '\\': esc = "\\\\"; break;
        case '\t': esc = "\\t"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        default: break;
        }
        if (esc) {
            sb_add(b, run, (size_t)(s - run));
            sb_str(b, esc);
            run = s + 1;
        }
    }
    sb_add(b, run, (size_t)(s - run));
}

/* A text[] literal: {"a","b"} with " and \ escaped. */
static void sb_array_item(sbuf *b, const char *s, int first)
{
    sb_str(b, first ? "\"" : ",\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            sb_add(b, "\\", 1);
        sb_add(b, s, 1);
    }
    sb_str(b, "\"");
}

/* Exact decimal microseconds of a nanosecond count ("12.345"), so that the
 * database parses the same double the engine computes as ns / 1000.0. */
static void us_text(char *out, size_t cap, int64_t ns)
{
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    snprintf(out, cap, "%s%llu.%03llu", ns < 0 ? "-" : "", (unsigned long long)(a / 1000),
             (unsigned long long)(a % 1000));
}

/* Measured iteration as the engine sees it: the median step, else the
 * span (rv_report_trace_figures). */
static void measure_iterations(const rv_trace *t, double *measured_us, int *iterations)
{
    rv_trace_figures f;
    rv_report_trace_figures(t, &f);
    *measured_us = f.measured_us;
    *iterations = f.iterations;
}

static json_t *build_summary(const rv_trace *t, double measured_us, int iterations, size_t nsamples)
{
    size_t by_cat[RV_CAT_COUNT] = {0};
    int64_t lo = INT64_MAX, hi = INT64_MIN, gpu_busy = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        by_cat[e->cat < RV_CAT_COUNT ? e->cat : 0]++;
        if (e->ts_ns < lo)
            lo = e->ts_ns;
        if (e->ts_ns + e->dur_ns > hi)
            hi = e->ts_ns + e->dur_ns;
        if (rv_cat_is_gpu_task(e->cat))
            gpu_busy += e->dur_ns;
    }
    json_t *cats = json_object();
    for (int c = 0; c < RV_CAT_COUNT; c++)
        if (by_cat[c])
            json_object_set_new(cats, rv_cat_name(c), json_integer((json_int_t)by_cat[c]));
    json_t *devs = json_array();
    for (size_t i = 0; i < t->ndevices; i++) {
        const rv_device *d = &t->devices[i];
        char cc[32];
        snprintf(cc, sizeof(cc), "%d.%d", d->compute_major, d->compute_minor);
        json_array_append_new(devs, json_pack("{s:i,s:s,s:i,s:s,s:I}", "id", d->id, "name",
                                              rv_trace_str(t, d->name), "num_sms", d->num_sms,
                                              "compute_capability", cc, "total_mem",
                                              (json_int_t)d->total_mem));
    }
    return json_pack("{s:I,s:o,s:o,s:f,s:f,s:i,s:f,s:I,s:I,s:I,s:s}", "events",
                     (json_int_t)t->nevents, "by_category", cats, "devices", devs, "span_us",
                     t->nevents ? (double)(hi - lo) / 1000.0 : 0.0, "gpu_busy_us",
                     (double)gpu_busy / 1000.0, "iterations", iterations, "measured_us",
                     measured_us, "overhead_samples", (json_int_t)nsamples, "skipped_events",
                     (json_int_t)t->skipped_events, "input_bytes", (json_int_t)t->input_bytes,
                     "backend", rv_trace_str(t, t->backend));
}

static int gzip_bytes(const void *in, size_t len, uint8_t **out, size_t *out_len, rv_error *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    *out = NULL;
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "gzip: init failed");
    size_t cap = deflateBound(&zs, (uLong)len) + 32;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        deflateEnd(&zs);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "gzip: out of memory (%zu bytes)", cap);
    }
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.next_out = buf;
    int zrc = Z_OK;
    size_t left = len;
    /* avail_in is 32-bit; feed large inputs in pieces. */
    do {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        zs.avail_in = chunk;
        left -= chunk;
        zs.avail_out = (uInt)(cap - zs.total_out > UINT_MAX ? UINT_MAX : cap - zs.total_out);
        zrc = deflate(&zs, left ? Z_NO_FLUSH : Z_FINISH);
    } while (left && zrc == Z_OK);
    deflateEnd(&zs);
    if (zrc != Z_STREAM_END) {
        free(buf);
        return rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "gzip: deflate failed (%d)", zrc);
    }
    *out = buf;
    *out_len = zs.total_out;
    return 0;
}

static int trace_id_by_sha(pconn *pc, const char *sha, int64_t *id, rv_error *err)
{
    const char *vals[] = {sha};
    PGresult *r = q(pc, "duplicate check", "SELECT id FROM traces WHERE content_sha256 = $1", 1,
                    vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    *id = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return 0;
}

/* Recomputes platform statistics for the groups listed by keys_sql (a
 * query over $1 = platform id and $2 = a trace id, returning (type,
 * op_name)), deleting rows whose group has no samples left. The quantile
 * arithmetic mirrors rv_overhead_stats (percentile_cont is linear
 * interpolation at p * (n - 1)). */
static int recompute_stats(pconn *pc, const char *keys_sql, const char *platform_id,
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
    PGresult *r = q(pc, "overhead statistics", sql, 2, vals, PGRES_TUPLES_OK, err);
    if (!r)
        return RV_ERR_IO;
    if (groups)
        *groups = (size_t)strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return 0;
}

#define KEYS_OF_TRACE                                                                              \
    "SELECT DISTINCT type, op_name FROM overhead_samples WHERE trace_id = $2 UNION SELECT "        \
    "DISTINCT type, '*' FROM overhead_samples WHERE trace_id = $2"
#define KEYS_OF_PLATFORM                                                                           \
    "SELECT DISTINCT type, op_name FROM overhead_samples WHERE platform_id = $1 UNION SELECT "     \
    "DISTINCT type, '*'::text FROM overhead_samples WHERE platform_id = $1 UNION SELECT type, "    \
    "op_name FROM platform_overheads WHERE platform_id = $1"

static int copy_samples(pconn *pc, const rv_trace *t, const rv_overhead_samples *s,
                        const char *trace_id, const char *platform_id, rv_error *err)
{
    sbuf b = {.max = (size_t)64 << 20};
    int rc = 0;
    PGresult *r = PQexec(pc->c, "COPY overhead_samples (trace_id, seq, platform_id, type, "
                                "op_name, value_us) FROM STDIN");
    if (PQresultStatus(r) != PGRES_COPY_IN) {
        rc = db_fail(err, "COPY overhead_samples", pc->c, r);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    for (size_t i = 0; i < s->n && !rc; i++) {
        char line[96], us[48];
        us_text(us, sizeof(us), s->v[i].value_ns);
        snprintf(line, sizeof(line), "%s\t%zu\t%s\t%d\t", trace_id, i, platform_id, s->v[i].type);
        sb_str(&b, line);
        sb_copy_text(&b, rv_trace_str(t, s->v[i].name));
        sb_str(&b, "\t");
        sb_str(&b, us);
        sb_str(&b, "\n");
        if (b.failed)
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "COPY: out of memory");
        else if (b.len >= COPY_CHUNK || i + 1 == s->n) {
            if (PQputCopyData(pc->c, b.p, (int)b.len) != 1)
                rc = db_fail(err, "COPY data", pc->c, NULL);
            b.len = 0;
        }
    }
    if (PQputCopyEnd(pc->c, rc ? "aborted by client" : NULL) != 1 && !rc)
        rc = db_fail(err, "COPY end", pc->c, NULL);
    while ((r = PQgetResult(pc->c))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
            rc = db_fail(err, "COPY overhead_samples", pc->c, r);
        PQclear(r);
    }
    free(b.p);
    return rc;
}

static const char *first_nonempty(const char *a, const char *b)
{
    return a && *a ? a : b ? b : "";
}

int rv_db_ingest(rv_db *db, const rv_trace *t, const void *orig, size_t len,
                 const rv_db_ingest_meta *meta, rv_db_ingest_result *res, rv_error *err)
{
    static const rv_db_ingest_meta no_meta = {.rank = RV_NONE, .world_size = RV_NONE};
    uint8_t *snap = NULL, *gz = NULL;
    size_t snap_len = 0, gz_len = 0;
    rv_overhead_samples samples = {0};
    json_t *summary = NULL;
    char *summary_txt = NULL;
    sbuf tags = {.max = 1 << 20};
    pconn *pc = NULL;
    PGresult *r = NULL;
    int rc = 0;

    memset(res, 0, sizeof(*res));
    if (!meta)
        meta = &no_meta;
    size_t cap = meta->max_bytes ? meta->max_bytes : DEFAULT_MAX_BYTES;
    if (cap > HARD_MAX_STORED)
        cap = HARD_MAX_STORED;
    if (!t || t->nevents == 0)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "the trace has no events the engine can use (no kernels, ops or "
                            "runtime calls)");
    if (!orig || len == 0)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "the upload is empty");
    if (len > cap)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                            "the upload is %zu bytes, over the %zu-byte cap", len, cap);
    rv_sha256_hex(orig, len, res->sha256);

    pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int64_t existing;
    rc = trace_id_by_sha(pc, res->sha256, &existing, err);
    if (rc)
        goto out;
    if (existing) {
        res->trace_id = existing;
        res->duplicate = 1;
        goto out;
    }

    /* CPU work first: nothing below touches the database until BEGIN. */
    const uint8_t *ob = orig;
    int already_gzip = len >= 2 && ob[0] == 0x1f && ob[1] == 0x8b;
    const void *stored = orig;
    size_t stored_len = len;
    if (!already_gzip) {
        rc = gzip_bytes(orig, len, &gz, &gz_len, err);
        if (rc)
            goto out;
        stored = gz;
        stored_len = gz_len;
    }
    if (stored_len > HARD_MAX_STORED) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                          "the compressed upload is %zu bytes, over "
                          "the %zu-byte storage cap",
                          stored_len, HARD_MAX_STORED);
        goto out;
    }
    rc = rv_snapshot_encode(t, SNAPSHOT_LEVEL, &snap, &snap_len, err);
    if (rc)
        goto out;
    if (snap_len > HARD_MAX_STORED) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1, "snapshot of %zu bytes is over the cap",
                          snap_len);
        goto out;
    }
    rc = rv_overhead_extract(t, &samples, err);
    if (rc)
        goto out;
    double measured_us;
    int iterations;
    measure_iterations(t, &measured_us, &iterations);
    summary = build_summary(t, measured_us, iterations, samples.n);
    summary_txt = summary ? json_dumps(summary, JSON_COMPACT) : NULL;
    sb_str(&tags, "{");
    for (size_t i = 0; i < meta->ntags; i++)
        sb_array_item(&tags, meta->tags[i] ? meta->tags[i] : "", i == 0);
    sb_str(&tags, "}");
    if (!summary_txt || tags.failed) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory");
        goto out;
    }

    /* The platform row is committed on its own: harmless if the ingest
     * then fails, and it keeps concurrent ingests of one platform from
     * queueing behind each other's whole transaction. */
    rv_db_platform p = meta->platform;
    p.gpu_model = first_nonempty(p.gpu_model, rv_trace_str(t, t->platform_gpu));
    p.cpu_model = first_nonempty(p.cpu_model, rv_trace_str(t, t->platform_cpu));
    p.driver = first_nonempty(p.driver, rv_trace_str(t, t->platform_driver));
    p.runtime_version = first_nonempty(p.runtime_version, rv_trace_str(t, t->platform_cuda));
    p.framework = first_nonempty(p.framework, rv_trace_str(t, t->platform_framework));
    if (p.gpus_per_node <= 0)
        p.gpus_per_node = (int)t->ndevices;
    char key[65], gpn[16];
    rv_db_platform_key(&p, key);
    snprintf(gpn, sizeof(gpn), "%d", p.gpus_per_node);
    {
        const char *vals[] = {key,      p.gpu_model,       gpn,        p.cpu_model,
                              p.driver, p.runtime_version, p.framework};
        /* When a concurrent ingest inserts the same platform, our INSERT
         * waits for it and does nothing, and the SELECT still runs on the
         * statement's older snapshot: run it again, it then sees the row. */
        for (int attempt = 0; attempt < 5; attempt++) {
            PQclear(r);
            r = q(pc, "platform",
                  "WITH ins AS (INSERT INTO platforms (identity_key, gpu_model, gpus_per_node, "
                  "cpu_model, driver, runtime_version, framework) VALUES ($1, $2, $3, $4, $5, $6, "
                  "$7) ON CONFLICT (identity_key) DO NOTHING RETURNING id) SELECT id FROM ins "
                  "UNION ALL SELECT id FROM platforms WHERE identity_key = $1 LIMIT 1",
                  7, vals, PGRES_TUPLES_OK, err);
            if (!r || PQntuples(r) == 1)
                break;
        }
        if (!r || PQntuples(r) != 1) {
            rc = r ? rv_error_set(err, RV_ERR_IO, -1, -1, "platform row not found") : RV_ERR_IO;
            goto out;
        }
        res->platform_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        r = NULL;
    }
    char pid_s[24], tid_s[24], rank_s[16], ws_s[16], meas_s[40], tasks_s[24], it_s[16];
    snprintf(pid_s, sizeof(pid_s), "%lld", (long long)res->platform_id);
    int32_t rank = meta->rank != RV_NONE ? meta->rank : t->rank;
    int32_t ws =
        meta->world_size != RV_NONE && meta->world_size > 0 ? meta->world_size : t->world_size;
    snprintf(rank_s, sizeof(rank_s), "%d", rank);
    snprintf(ws_s, sizeof(ws_s), "%d", ws);
    snprintf(meas_s, sizeof(meas_s), "%.17g", measured_us);
    snprintf(tasks_s, sizeof(tasks_s), "%zu", t->nevents);
    snprintf(it_s, sizeof(it_s), "%d", iterations);
    const char *fmt = first_nonempty(meta->source_format,
                                     first_nonempty(rv_trace_str(t, t->source_format), "kineto"));
    const char *job = first_nonempty(meta->job, rv_trace_str(t, t->job));

    rc = exec_ok(pc, "BEGIN", "BEGIN", err);
    if (rc)
        goto out;
    {
        const char *vals[] = {job,
                              rank >= 0 ? rank_s : NULL,
                              ws >= 1 ? ws_s : NULL,
                              pid_s,
                              fmt,
                              measured_us > 0 ? meas_s : NULL,
                              tasks_s,
                              it_s,
                              res->sha256,
                              summary_txt,
                              tags.p};
        r = q(pc, "insert trace",
              "INSERT INTO traces (job, rank, world_size, platform_id, source_format, "
              "measured_us, tasks, iterations, content_sha256, summary, tags) VALUES ($1, $2, $3, "
              "$4, $5, $6, $7, $8, $9, $10::jsonb, $11::text[]) ON CONFLICT (content_sha256) DO "
              "NOTHING RETURNING id",
              11, vals, PGRES_TUPLES_OK, err);
        if (!r) {
            rc = RV_ERR_IO;
            goto out;
        }
        if (PQntuples(r) == 0) {
            /* A concurrent upload of the same bytes committed first. */
            PQclear(r);
            r = NULL;
            PQclear(PQexec(pc->c, "ROLLBACK"));
            rc = trace_id_by_sha(pc, res->sha256, &existing, err);
            res->trace_id = existing;
            res->duplicate = 1;
            goto out;
        }
        res->trace_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        r = NULL;
    }
    snprintf(tid_s, sizeof(tid_s), "%lld", (long long)res->trace_id);
    if (db->hook)
        db->hook(1, db->hook_ctx);
    {
        char size_s[24];
        snprintf(size_s, sizeof(size_s), "%zu", len);
        const char *vals[] = {tid_s, already_gzip ? "identity" : "gzip", size_s, stored};
        int lens[] = {0, 0, 0, (int)stored_len};
        int fmts[] = {0, 0, 0, 1};
        r = PQexecParams(pc->c,
                         "INSERT INTO trace_originals (trace_id, encoding, size, bytes) VALUES "
                         "($1, $2, $3, $4)",
                         4, NULL, vals, lens, fmts, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            rc = db_fail(err, "store original", pc->c, r);
            goto out;
        }
        PQclear(r);
        r = NULL;
    }
    {
        char ver_s[16], raw_s[24];
        uint64_t raw_len = 0;
        rv_snapshot_peek(snap, snap_len, NULL, &raw_len, NULL);
        snprintf(ver_s, sizeof(ver_s), "%d", RV_SNAPSHOT_VERSION);
        snprintf(raw_s, sizeof(raw_s), "%llu", (unsigned long long)raw_len);
        const char *vals[] = {tid_s, ver_s, raw_s, (const char *)snap};
        int lens[] = {0, 0, 0, (int)snap_len};
        int fmts[] = {0, 0, 0, 1};
        r = PQexecParams(pc->c,
                         "INSERT INTO trace_snapshots (trace_id, format_version, raw_size, bytes) "
                         "VALUES ($1, $2, $3, $4)",
                         4, NULL, vals, lens, fmts, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            rc = db_fail(err, "store snapshot", pc->c, r);
            goto out;
        }
        PQclear(r);
        r = NULL;
    }
    if (samples.n) {
        rc = copy_samples(pc, t, &samples, tid_s, pid_s, err);
        if (rc)
            goto out;
    }
    if (db->hook)
        db->hook(2, db->hook_ctx);
    if (samples.n) {
        /* Serialize statistics updates per platform: after this lock, this
         * transaction's next statement sees every committed sample. NO KEY
         * UPDATE, because our own traces row holds a KEY SHARE lock on the
         * platform (its foreign key), and FOR UPDATE would deadlock two
         * ingests that both hold one. */
        const char *vals[] = {pid_s};
        r = q(pc, "lock platform", "SELECT id FROM platforms WHERE id = $1 FOR NO KEY UPDATE", 1,
              vals, PGRES_TUPLES_OK, err);
        if (!r) {
            rc = RV_ERR_IO;
            goto out;
        }
        PQclear(r);
        r = NULL;
        rc = recompute_stats(pc, KEYS_OF_TRACE, pid_s, tid_s, NULL, err);
        if (rc)
            goto out;
    }
    if (db->hook)
        db->hook(3, db->hook_ctx);
    rc = exec_ok(pc, "COMMIT", "COMMIT", err);
    if (rc)
        goto out;
    res->samples = samples.n;
out:
    if (rc && res)
        res->trace_id = res->duplicate ? res->trace_id : 0;
    PQclear(r);
    release(db, pc);
    free(snap);
    free(gz);
    free(tags.p);
    rv_overhead_samples_free(&samples);
    free(summary_txt);
    json_decref(summary);
    return rc;
}

int rv_db_ingest_buffer(rv_db *db, const void *orig, size_t len, const rv_db_ingest_meta *meta,
                        rv_db_ingest_result *res, rv_error *err)
{
    memset(res, 0, sizeof(*res));
    size_t cap = meta && meta->max_bytes ? meta->max_bytes : DEFAULT_MAX_BYTES;
    if (!orig || len == 0)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "the upload is empty");
    if (len > cap)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                            "the upload is %zu bytes, over the %zu-byte cap", len, cap);
    /* Answer a duplicate before spending time on parsing. */
    rv_sha256_hex(orig, len, res->sha256);
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int64_t existing = 0;
    int rc = trace_id_by_sha(pc, res->sha256, &existing, err);
    release(db, pc);
    if (rc)
        return rc;
    if (existing) {
        res->trace_id = existing;
        res->duplicate = 1;
        return 0;
    }
    rv_trace *t = NULL;
    rc = rv_kineto_read_buffer(orig, len, NULL, &t, err);
    if (rc)
        return rc;
    rc = rv_db_ingest(db, t, orig, len, meta, res, err);
    rv_trace_free(t);
    return rc;
}

int rv_db_ingest_file(rv_db *db, const char *path, const rv_db_ingest_meta *meta,
                      rv_db_ingest_result *res, rv_error *err)
{
    memset(res, 0, sizeof(*res));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rv_error_set(err, RV_ERR_IO, -1, -1, "%s is not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "%s is empty", path);
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot map %s: %s", path, strerror(errno));
    int rc = rv_db_ingest_buffer(db, m, (size_t)sb.st_size, meta, res, err);
    munmap(m, (size_t)sb.st_size);
    return rc;
}

/* ---- traces ------------------------------------------------------------------- */

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
    int rc = query_json(db, "trace",
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
    return query_json(db, "trace list",
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
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r =
        q(pc, "trace ids",
          "SELECT t.id FROM traces t WHERE " FILTER_WHERE " ORDER BY t.id DESC LIMIT 1000000", 4,
          vals, PGRES_TUPLES_OK, err);
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
    release(db, pc);
    return rc;
}

int rv_db_trace_delete(rv_db *db, int64_t id, rv_error *err)
{
    char id_s[24], pid_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = exec_ok(pc, "BEGIN", "BEGIN", err);
    PGresult *r = NULL;
    if (rc)
        goto out;
    r = q(pc, "delete trace", "DELETE FROM traces WHERE id = $1 RETURNING platform_id", 1, vals,
          PGRES_TUPLES_OK, err);
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
    const char *pv[] = {pid_s};
    r = q(pc, "lock platform", "SELECT id FROM platforms WHERE id = $1 FOR NO KEY UPDATE", 1, pv,
          PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    rc = recompute_stats(pc, KEYS_OF_PLATFORM, pid_s, NULL, NULL, err);
    if (!rc)
        rc = exec_ok(pc, "COMMIT", "COMMIT", err);
out:
    PQclear(r);
    release(db, pc);
    return rc;
}

int rv_db_snapshot_load(rv_db *db, int64_t id, rv_trace **out, rv_error *err)
{
    char id_s[24], ver_s[16];
    *out = NULL;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    snprintf(ver_s, sizeof(ver_s), "%d", RV_SNAPSHOT_VERSION);
    const char *vals[] = {id_s, ver_s};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc;
    PGresult *r = qp(pc, ST_SNAPSHOT, vals, NULL, NULL, 1, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQntuples(r) == 0)
        rc =
            rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no snapshot for trace %lld", (long long)id);
    else
        rc = rv_snapshot_decode(PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0), out, err);
    PQclear(r);
    release(db, pc);
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
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = PQexecParams(pc->c,
                               "SELECT bytes, encoding, size FROM trace_originals WHERE trace_id "
                               "= $1",
                               1, NULL, vals, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = db_fail(err, "original", pc->c, r);
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
    release(db, pc);
    return rc;
}

/* ---- overhead statistics ---------------------------------------------------------- */

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
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    /* float8 as text with extra_float_digits = 1 (the default) round-trips. */
    PGresult *r = q(pc, "overheads",
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
    release(db, pc);
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
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* The version is computed by the same statement that reads the rows, so
     * a cached answer is always keyed by the statistics it was made with. */
    if (rows)
        r = q(pc, "trace overheads",
              "SELECT t.platform_id, count(o.type) OVER (), coalesce((extract(epoch FROM "
              "max(o.updated_at) OVER ()) * 1000000)::bigint, 0), o.type, o.op_name, o.samples, "
              "o.count, o.mean, o.std, o.median, o.p90 FROM traces t LEFT JOIN "
              "platform_overheads o ON o.platform_id = t.platform_id WHERE t.id = $1 "
              "ORDER BY o.type, o.op_name",
              1, vals, PGRES_TUPLES_OK, err);
    else
        r = q(pc, "trace overheads version",
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
    release(db, pc);
    return rc;
}

int rv_db_overheads_get(rv_db *db, int64_t platform_id, json_t **out, rv_error *err)
{
    char id_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)platform_id);
    const char *vals[] = {id_s};
    return query_json(db, "overheads",
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
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    if (platform_id > 0) {
        ids = malloc(sizeof(*ids));
        if (ids) {
            ids[0] = platform_id;
            nids = 1;
        }
    } else {
        PGresult *r = q(pc, "platforms", "SELECT id FROM platforms ORDER BY id", 0, NULL,
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
        const char *vals[] = {pid_s};
        rc = exec_ok(pc, "BEGIN", "BEGIN", err);
        PGresult *r = rc ? NULL
                         : q(pc, "lock platform",
                             "SELECT id FROM platforms WHERE id = $1 FOR "
                             "NO KEY UPDATE",
                             1, vals, PGRES_TUPLES_OK, err);
        if (!rc && !r)
            rc = RV_ERR_IO;
        else if (!rc && PQntuples(r) == 0)
            rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no platform with id %s", pid_s);
        PQclear(r);
        size_t g = 0;
        if (!rc)
            rc = recompute_stats(pc, KEYS_OF_PLATFORM, pid_s, NULL, &g, err);
        if (!rc)
            rc = exec_ok(pc, "COMMIT", "COMMIT", err);
        total += g;
    }
    if (groups)
        *groups = total;
out:
    free(ids);
    release(db, pc);
    return rc;
}

/* ---- what-if cache -------------------------------------------------------------- */

int rv_db_whatif_cache_get(rv_db *db, int64_t trace_id, const char *request_hash, json_t **out,
                           rv_error *err)
{
    char id_s[24];
    *out = NULL;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)trace_id);
    const char *vals[] = {id_s, request_hash};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = qp(pc, ST_CACHE_GET, vals, NULL, NULL, 0, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQntuples(r) == 1)
        *out = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    PQclear(r);
    release(db, pc);
    return rc;
}

int rv_db_whatif_cache_put(rv_db *db, int64_t trace_id, const char *request_hash,
                           const json_t *result, rv_error *err)
{
    char id_s[24];
    char *txt = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!txt)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    snprintf(id_s, sizeof(id_s), "%lld", (long long)trace_id);
    const char *vals[] = {id_s, request_hash, txt};
    pconn *pc = acquire(db, err);
    int rc = RV_ERR_IO;
    if (pc) {
        PGresult *r = qp(pc, ST_CACHE_PUT, vals, NULL, NULL, 0, PGRES_COMMAND_OK, err);
        rc = r ? 0 : err ? err->code : RV_ERR_IO;
        PQclear(r);
        release(db, pc);
    }
    free(txt);
    return rc;
}

/* ---- tokens --------------------------------------------------------------------- */

static unsigned scopes_from_csv(const char *csv)
{
    unsigned s = 0;
    if (strstr(csv, "ingest"))
        s |= RV_SCOPE_INGEST;
    if (strstr(csv, "read"))
        s |= RV_SCOPE_READ;
    if (strstr(csv, "admin"))
        s |= RV_SCOPE_ADMIN;
    return s;
}

static void fill_token(rv_db_token *t, PGresult *r, int row)
{
    memset(t, 0, sizeof(*t));
    t->id = strtoll(PQgetvalue(r, row, 0), NULL, 10);
    snprintf(t->name, sizeof(t->name), "%s", PQgetvalue(r, row, 1));
    snprintf(t->token_sha256, sizeof(t->token_sha256), "%s", PQgetvalue(r, row, 2));
    t->scopes = scopes_from_csv(PQgetvalue(r, row, 3));
    t->revoked = PQnfields(r) > 4 && PQgetvalue(r, row, 4)[0] == 't';
}

int rv_db_token_create(rv_db *db, const char *name, unsigned scopes, const char *token_sha256,
                       int64_t *id, rv_error *err)
{
    char arr[64];
    snprintf(arr, sizeof(arr), "{%s%s%s%s%s}", scopes & RV_SCOPE_INGEST ? "ingest" : "",
             (scopes & RV_SCOPE_INGEST) && (scopes & (RV_SCOPE_READ | RV_SCOPE_ADMIN)) ? "," : "",
             scopes & RV_SCOPE_READ ? "read" : "",
             (scopes & RV_SCOPE_READ) && (scopes & RV_SCOPE_ADMIN) ? "," : "",
             scopes & RV_SCOPE_ADMIN ? "admin" : "");
    const char *vals[] = {name ? name : "", token_sha256, arr};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = q(pc, "create token",
                    "INSERT INTO api_tokens (name, token_sha256, scopes) VALUES ($1, $2, "
                    "$3::text[]) RETURNING id",
                    3, vals, PGRES_TUPLES_OK, err);
    if (r && id)
        *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    int rc = r ? 0 : RV_ERR_IO;
    PQclear(r);
    release(db, pc);
    return rc;
}

int rv_db_token_verify(rv_db *db, const char *token_sha256, rv_db_token *out, rv_error *err)
{
    const char *vals[] = {token_sha256};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = qp(pc, ST_TOKEN_VERIFY, vals, NULL, NULL, 0, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQntuples(r) == 0)
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "unknown or revoked token");
    else if (out)
        fill_token(out, r, 0);
    PQclear(r);
    release(db, pc);
    return rc;
}

int rv_db_token_revoke(rv_db *db, int64_t id, rv_error *err)
{
    char id_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = q(pc, "revoke token",
                    "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1",
                    1, vals, PGRES_COMMAND_OK, err);
    int rc = !r ? RV_ERR_IO
             : strcmp(PQcmdTuples(r), "0") == 0
                 ? rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no token with id %s", id_s)
                 : 0;
    PQclear(r);
    release(db, pc);
    return rc;
}

int rv_db_token_list(rv_db *db, int include_revoked, rv_db_token **rows, size_t *n, rv_error *err)
{
    *rows = NULL;
    *n = 0;
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r =
        q(pc, "token list",
          include_revoked ? "SELECT id, name, token_sha256, array_to_string(scopes, ','), "
                            "revoked_at IS NOT NULL FROM api_tokens ORDER BY id"
                          : "SELECT id, name, token_sha256, array_to_string(scopes, ','), false "
                            "FROM api_tokens WHERE revoked_at IS NULL ORDER BY id",
          0, NULL, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else {
        size_t k = (size_t)PQntuples(r);
        *rows = calloc(k + 1, sizeof(**rows));
        if (!*rows) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        } else {
            for (size_t i = 0; i < k; i++)
                fill_token(&(*rows)[i], r, (int)i);
            *n = k;
        }
    }
    PQclear(r);
    release(db, pc);
    return rc;
}

void rv_db_token_list_free(rv_db_token *rows, size_t n)
{
    (void)n;
    free(rows);
}

/* ---- jobs --------------------------------------------------------------------- */

int rv_db_job_enqueue(rv_db *db, const char *kind, const json_t *request, int64_t *id,
                      rv_error *err)
{
    char *txt = request ? json_dumps(request, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
    if (!txt)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    const char *vals[] = {kind, txt};
    pconn *pc = acquire(db, err);
    int rc = RV_ERR_IO;
    if (pc) {
        PGresult *r = q(pc, "enqueue job",
                        "WITH j AS (INSERT INTO jobs (kind, request) VALUES ($1, $2::jsonb) "
                        "RETURNING id) SELECT id, pg_notify('rv_jobs', id::text) FROM j",
                        2, vals, PGRES_TUPLES_OK, err);
        if (r) {
            if (id)
                *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            rc = 0;
        }
        PQclear(r);
        release(db, pc);
    }
    free(txt);
    return rc;
}

int rv_db_job_claim(rv_db *db, const char *worker, const char *kind, rv_db_job *out, rv_error *err)
{
    memset(out, 0, sizeof(*out));
    const char *vals[] = {worker ? worker : "", kind};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = qp(pc, ST_JOB_CLAIM, vals, NULL, NULL, 0, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else if (PQntuples(r) == 0) {
        rc = RV_ERR_NOTFOUND; /* an empty queue is not worth a message */
        if (err)
            rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no queued job");
    } else {
        out->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        snprintf(out->kind, sizeof(out->kind), "%s", PQgetvalue(r, 0, 1));
        out->request = json_loads(PQgetvalue(r, 0, 2), JSON_DECODE_ANY, NULL);
        out->attempts = atoi(PQgetvalue(r, 0, 3));
    }
    PQclear(r);
    release(db, pc);
    return rc;
}

void rv_db_job_clear(rv_db_job *j)
{
    if (!j)
        return;
    json_decref(j->request);
    memset(j, 0, sizeof(*j));
}

static int job_update(rv_db *db, const char *what, const char *sql, int n, const char *const *vals,
                      rv_error *err)
{
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = q(pc, what, sql, n, vals, PGRES_COMMAND_OK, err);
    int rc = !r ? RV_ERR_IO
             : strcmp(PQcmdTuples(r), "0") == 0
                 ? rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "%s: no such running job", what)
                 : 0;
    PQclear(r);
    release(db, pc);
    return rc;
}

int rv_db_job_progress(rv_db *db, int64_t id, double progress, rv_error *err)
{
    char id_s[24], p_s[32];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    snprintf(p_s, sizeof(p_s), "%.6f", progress < 0 ? 0 : progress > 1 ? 1 : progress);
    const char *vals[] = {id_s, p_s};
    return job_update(db, "job progress",
                      "UPDATE jobs SET progress = $2, heartbeat_at = now() WHERE id = $1 AND "
                      "state = 'running'",
                      2, vals, err);
}

int rv_db_job_finish(rv_db *db, int64_t id, int ok, const json_t *result, const char *error_msg,
                     rv_error *err)
{
    char id_s[24];
    char *txt = result ? json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s, ok ? "done" : "failed", txt, ok ? NULL : error_msg};
    int rc = job_update(db, "job finish",
                        "UPDATE jobs SET state = $2, result = $3::jsonb, error = $4, progress = "
                        "CASE WHEN $2 = 'done' THEN 1 ELSE progress END, finished_at = now(), "
                        "heartbeat_at = now(), locked_by = NULL WHERE id = $1 AND state = "
                        "'running'",
                        4, vals, err);
    free(txt);
    return rc;
}

int rv_db_job_get(rv_db *db, int64_t id, json_t **out, rv_error *err)
{
    char id_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *vals[] = {id_s};
    int rc = query_json(db, "job",
                        "SELECT json_build_object('id', id, 'kind', kind, 'state', state, "
                        "'progress', progress, 'request', request, 'result', result, 'error', "
                        "error, 'attempts', attempts, 'locked_by', locked_by, 'created_at', "
                        "created_at, 'started_at', started_at, 'finished_at', finished_at)::text "
                        "FROM jobs WHERE id = $1",
                        1, vals, out, err);
    if (rc == RV_ERR_NOTFOUND)
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no job with id %lld", (long long)id);
    return rc;
}

int rv_db_job_requeue_stale(rv_db *db, int seconds, size_t *n, rv_error *err)
{
    char s[16];
    snprintf(s, sizeof(s), "%d", seconds);
    const char *vals[] = {s};
    pconn *pc = acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = q(pc, "requeue jobs",
                    "UPDATE jobs SET state = 'queued', locked_by = NULL WHERE state = 'running' "
                    "AND heartbeat_at < now() - make_interval(secs => $1::int)",
                    1, vals, PGRES_COMMAND_OK, err);
    if (r && n)
        *n = (size_t)strtoull(PQcmdTuples(r), NULL, 10);
    int rc = r ? 0 : RV_ERR_IO;
    PQclear(r);
    release(db, pc);
    return rc;
}
