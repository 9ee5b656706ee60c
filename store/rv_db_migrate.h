/* Schema migrations (store/rv_db_migrate.c).
 *
 * Files dir/NNNN_title.up.sql and .down.sql (golang-migrate naming), table
 * schema_migrations(version, dirty) holding one row with the current
 * version (golang-migrate's layout, so its CLI can read our databases).
 * Runs under pg_advisory_lock, each file in its own transaction together
 * with the version update, so a crash leaves the previous version intact. */
#ifndef RV_DB_MIGRATE_H
#define RV_DB_MIGRATE_H

#include <stdint.h>

#include "util/rv_error.h"

typedef struct rv_db rv_db;

/* Applies every migration newer than the database's. dir (borrowed) NULL =
 * rv_db_migrations_dir(). */
int rv_db_migrate(rv_db *db, const char *dir, rv_error *err);
/* Reverts the `steps` most recent migrations (steps <= 0: all of them). */
int rv_db_migrate_down(rv_db *db, const char *dir, int steps, rv_error *err);
/* Current version (-1 when none) and dirty flag. */
int rv_db_schema_version(rv_db *db, int64_t *version, int *dirty, rv_error *err);
/* The migrations directory: $REVERIE_MIGRATIONS, ./migrations, or beside
 * the executable (../share/reverie/migrations, ../../migrations). Returns a
 * static string, or NULL when none exists. */
const char *rv_db_migrations_dir(void);

#endif
