/* `reverie migrate [--database URL] [--home DIR] [--migrations DIR]
 *                  [--down N | --down all] [--status]`
 *
 * Applies the SQL migrations (migrations/NNNN_*.up.sql) to the database, or
 * reverts the N most recent ones. Without --database / REVERIE_DATABASE_URL
 * it works on the embedded cluster under --home / $REVERIE_HOME (./var),
 * starting it for the duration of the command when it is not running. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"

#ifdef RV_HAVE_STORE
#include "cli_db.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie migrate [--database URL] [--home DIR] [--migrations DIR]\n"
               "                       [--down N|all] [--status]\n"
               "\n"
               "--database    libpq URL or conninfo (default: $REVERIE_DATABASE_URL, else the\n"
               "              embedded cluster under --home)\n"
               "--home        data directory of the embedded cluster (default: $REVERIE_HOME\n"
               "              or ./var)\n"
               "--migrations  directory of NNNN_title.up.sql / .down.sql files (default:\n"
               "              $REVERIE_MIGRATIONS, ./migrations, or beside the executable)\n"
               "--down N      revert the N most recent migrations ('all': every one)\n"
               "--status      print the schema version and exit\n");
}

int rv_cmd_migrate(int argc, char **argv)
{
    rv_cli_db c = {0};
    const char *dir = NULL;
    int down = 0, status = 0, rc = 1;
    for (int i = 1; i < argc; i++) {
        if (rv_cli_db_arg(&c, argc, argv, &i))
            continue;
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--status")) {
            status = 1;
        } else if (v && !strcmp(a, "--migrations")) {
            dir = v;
            i++;
        } else if (v && !strcmp(a, "--down")) {
            char *end = NULL;
            int all = strcmp(v, "all") == 0;
            down = all ? -1 : (int)strtol(v, &end, 10);
            if (down == 0 || (!all && (!end || *end || down < 0))) {
                fprintf(stderr, "reverie migrate: --down wants a positive count or 'all'\n");
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "reverie migrate: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }

    rv_error e;
    rv_error_clear(&e);
    if (rv_cli_db_open(&c, 0, &e) != 0) {
        fprintf(stderr, "reverie migrate: %s\n", e.message);
        goto out;
    }
    if (!status) {
        int r = down ? rv_db_migrate_down(c.db, dir, down, &e) : rv_db_migrate(c.db, dir, &e);
        if (r != 0) {
            fprintf(stderr, "reverie migrate: %s\n", e.message);
            goto out;
        }
    }
    int64_t version;
    int dirty;
    if (rv_db_schema_version(c.db, &version, &dirty, &e) != 0) {
        fprintf(stderr, "reverie migrate: %s\n", e.message);
        goto out;
    }
    if (version < 0)
        printf("schema version: none (no migrations applied)\n");
    else
        printf("schema version: %lld%s\n", (long long)version, dirty ? " (dirty)" : "");
    rc = 0;
out:
    rv_cli_db_close(&c, "reverie migrate");
    return rc;
}

#else

int rv_cmd_migrate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "reverie migrate: this build has no database support (PostgreSQL client "
                    "libraries were not found at configure time)\n");
    return 1;
}

#endif
