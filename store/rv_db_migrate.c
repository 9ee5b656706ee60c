/* Schema migrations: finding the migration files, the golang-migrate
 * schema_migrations table, and applying or reverting files one transaction
 * each under a session advisory lock (rv_db_migrate.h). */
#include "rv_db_migrate.h"
#include "rv_db_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIGRATE_LOCK_KEY "5928370461017297"
#define MAX_MIGRATIONS   4096

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

static int read_version(rv_db__conn *pc, int64_t *version, int *dirty, rv_error *err)
{
    PGresult *r = rv_db__q(pc, "schema_migrations", "SELECT version, dirty FROM schema_migrations",
                           0, NULL, PGRES_TUPLES_OK, err);
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
static int apply_one(rv_db__conn *pc, const char *path, int64_t new_version, rv_error *err)
{
    char *sql = read_text(path, err);
    if (!sql)
        return RV_ERR_IO;
    int rc = rv_db__exec(pc, "BEGIN", "BEGIN", err);
    if (!rc) {
        PGresult *r = PQexec(pc->c, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
            char what[PATH_MAX + 16];
            snprintf(what, sizeof(what), "migration %s", path);
            rc = rv_db__fail(err, what, pc->c, r);
        }
        PQclear(r);
    }
    if (!rc)
        rc = rv_db__exec(pc, "schema_migrations", "DELETE FROM schema_migrations", err);
    if (!rc && new_version >= 0) {
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)new_version);
        const char *vals[] = {v};
        PGresult *r = rv_db__q(pc, "schema_migrations",
                               "INSERT INTO schema_migrations (version, dirty) VALUES ($1, false)",
                               1, vals, PGRES_COMMAND_OK, err);
        rc = r ? 0 : RV_ERR_IO;
        PQclear(r);
    }
    if (!rc)
        rc = rv_db__exec(pc, "COMMIT", "COMMIT", err);
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
    rv_db__conn *pc = NULL;

    if (!dir)
        dir = rv_db_migrations_dir();
    if (!dir)
        return rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                            "migrations: directory not found (set REVERIE_MIGRATIONS or run "
                            "from the source tree)");
    rc = list_migrations(dir, &m, &n, err);
    if (rc)
        return rc;
    pc = rv_db__acquire(db, err);
    if (!pc) {
        rc = RV_ERR_IO;
        goto out;
    }
    /* Session lock: serializes runners across processes and replicas. */
    {
        PGresult *r = rv_db__q(pc, "advisory lock", "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")",
                               0, NULL, PGRES_TUPLES_OK, err);
        rc = r ? 0 : RV_ERR_IO;
        PQclear(r);
        if (rc)
            goto out;
    }
    locked = 1;
    rc =
        rv_db__exec(pc, "schema_migrations",
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
    rv_db__release(db, pc);
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
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    *version = -1;
    *dirty = 0;
    int rc = 0;
    PGresult *r =
        rv_db__q(pc, "schema_migrations", "SELECT to_regclass('schema_migrations') IS NOT NULL", 0,
                 NULL, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQgetvalue(r, 0, 0)[0] == 't')
        rc = read_version(pc, version, dirty, err);
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}
