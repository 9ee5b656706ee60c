/* The database of a `reverie` subcommand: --database URL / --home DIR
 * parsing, then the resolved connection (an embedded cluster under the
 * home is started for the duration of the command when it is not running).
 * Only in builds with database support (RV_HAVE_STORE). */
#ifndef RV_CLI_DB_H
#define RV_CLI_DB_H

#include "rv_db.h"
#include "util/rv_error.h"
#include "rv_pgembed.h"

typedef struct rv_cli_db {
    const char *url;  /* --database (borrowed from argv); NULL: $REVERIE_DATABASE_URL */
    const char *home; /* --home (borrowed from argv); NULL: $REVERIE_HOME or ./var */
    char *conninfo;   /* owned, resolved by rv_cli_db_open */
    rv_pgembed *pg;   /* owned: the cluster this command started, or NULL */
    rv_db *db;        /* owned */
} rv_cli_db;

/* When argv[*i] is "--database URL" or "--home DIR": keeps the value
 * (borrowed), steps *i onto it and returns 1. Otherwise (another argument,
 * or the option without its value) returns 0 and changes nothing. */
int rv_cli_db_arg(rv_cli_db *c, int argc, char **argv, int *i);

/* Resolves the database, opens a pool of one connection and, when
 * `migrate`, brings the schema up to date. 0, or a negative rv_err with e
 * set (call rv_cli_db_close either way). */
int rv_cli_db_open(rv_cli_db *c, int migrate, rv_error *e);

/* Closes the connection and stops a cluster this command started (a
 * failure is printed after `prog`, e.g. "reverie migrate"). NULL-safe;
 * leaves c zeroed but for url and home. */
void rv_cli_db_close(rv_cli_db *c, const char *prog);

#endif
