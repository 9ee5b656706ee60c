/* `reverie token create|list|revoke`: API tokens, straight in the database.
 *
 *   reverie token create --name NAME --scopes ingest,read,admin [--database URL] [--home DIR]
 *   reverie token list [--all] [--database URL] [--home DIR]
 *   reverie token revoke ID [--database URL] [--home DIR]
 *
 * The database is --database, else $REVERIE_DATABASE_URL, else the embedded
 * cluster under --home / $REVERIE_HOME / ./var (started for the command and
 * stopped again when it was not running). The token is printed once; only
 * its SHA-256 is stored. A running reveried picks changes up within a
 * second. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"

#ifdef RV_HAVE_STORE
#include "cli_db.h"
#include "util/rv_sha256.h"
#endif

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: reverie token create --name NAME --scopes SCOPES [--database URL] [--home DIR]\n"
        "       reverie token list [--all] [--database URL] [--home DIR]\n"
        "       reverie token revoke ID [--database URL] [--home DIR]\n\n"
        "SCOPES is a comma list of ingest (upload traces), read (list, get, what-ifs)\n"
        "and admin (delete; implies the others). The new token is printed once.\n");
}

int rv_cmd_token(int argc, char **argv)
{
#ifndef RV_HAVE_STORE
    fprintf(stderr, "reverie token: this build has no database support (PostgreSQL client "
                    "libraries were not found at configure time)\n");
    return 1;
#else
    const char *sub = argc > 1 ? argv[1] : NULL;
    const char *name = NULL, *scopes_s = NULL, *id_s = NULL;
    int all = 0, rc = 1;
    rv_cli_db c = {0};
    rv_db *db = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (!sub || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        usage(sub ? stdout : stderr);
        return sub ? 0 : 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (rv_cli_db_arg(&c, argc, argv, &i))
            continue;
        if (strcmp(a, "--name") == 0 && v)
            name = argv[++i];
        else if (strcmp(a, "--scopes") == 0 && v)
            scopes_s = argv[++i];
        else if (strcmp(a, "--all") == 0)
            all = 1;
        else if (a[0] != '-' && !id_s)
            id_s = a;
        else {
            fprintf(stderr, "reverie token: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    unsigned scopes = 0;
    if (strcmp(sub, "create") == 0) {
        scopes = rv_db_scopes_parse(scopes_s);
        if (!name || !*name || strlen(name) > 120 || !scopes) {
            fprintf(stderr, "reverie token create: needs --name (1..120 chars) and --scopes "
                            "from ingest,read,admin\n");
            return 2;
        }
    } else if (strcmp(sub, "revoke") == 0) {
        if (!id_s || atoll(id_s) <= 0) {
            fprintf(stderr,
                    "reverie token revoke: needs the token id (see `reverie token list`)\n");
            return 2;
        }
    } else if (strcmp(sub, "list") != 0) {
        fprintf(stderr, "reverie token: unknown subcommand '%s'\n", sub);
        usage(stderr);
        return 2;
    }
    if (rv_cli_db_open(&c, 1, &e) != 0) {
        fprintf(stderr, "reverie token: database: %s\n", e.message);
        goto out;
    }
    db = c.db;
    if (strcmp(sub, "create") == 0) {
        char tok[RV_DB_TOKEN_LEN + 1], pub[RV_DB_TOKEN_ID_LEN + 1], hash[RV_SHA256_HEX_LEN + 1];
        int64_t id = 0;
        if (rv_db_token_generate(tok, pub) != 0) {
            fprintf(stderr, "reverie token: no randomness available\n");
            goto out;
        }
        rv_sha256_hex(tok, strlen(tok), hash);
        if (rv_db_token_create(db, name, scopes, hash, &id, &e) != 0) {
            fprintf(stderr, "reverie token create: %s\n", e.message);
            goto out;
        }
        char sc[48];
        rv_db_scopes_str(scopes, sc, sizeof(sc));
        fprintf(stderr, "token %lld '%s' (%s) created; it is shown only now:\n", (long long)id,
                name, sc);
        printf("%s\n", tok);
        rc = 0;
    } else if (strcmp(sub, "list") == 0) {
        rv_db_token *rows = NULL;
        size_t n = 0;
        if (rv_db_token_list(db, all, &rows, &n, &e) != 0) {
            fprintf(stderr, "reverie token list: %s\n", e.message);
            goto out;
        }
        printf("%-6s %-24s %-20s %s\n", "ID", "NAME", "SCOPES", "STATE");
        for (size_t i = 0; i < n; i++) {
            char sc[48];
            rv_db_scopes_str(rows[i].scopes, sc, sizeof(sc));
            printf("%-6lld %-24s %-20s %s\n", (long long)rows[i].id, rows[i].name, sc,
                   rows[i].revoked ? "revoked" : "active");
        }
        rv_db_token_list_free(rows, n);
        rc = 0;
    } else {
        /* id_s was checked (a positive id) before the database was opened. */
        if (!id_s || rv_db_token_revoke(db, atoll(id_s), &e) != 0) {
            fprintf(stderr, "reverie token revoke: %s\n", e.message);
            goto out;
        }
        printf("token %s revoked\n", id_s);
        rc = 0;
    }
out:
    rv_cli_db_close(&c, "reverie token");
    return rc;
#endif
}
