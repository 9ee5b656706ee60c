/* The trace store: PostgreSQL access through libpq (docs/internals/store.md).
 *
 * This header is the store's front door: the connection pool below, and
 * every module's header (one .c/.h pair per concern), so that a caller
 * includes "rv_db.h" and gets the whole store.
 *
 * Threads: an rv_db is a fixed pool of connections guarded by a mutex and a
 * condition variable. Every function of the store borrows one connection
 * for the duration of the call and gives it back, so any number of threads
 * may share one rv_db; no PGconn is ever used by two threads at once
 * (libpq's rule). A call blocks while all connections are busy. A
 * connection found broken is reset before its next use.
 *
 * Errors: 0 or a negative rv_err; *err says what failed (the server's
 * message included). RV_ERR_NOTFOUND for a missing id. Database failures
 * are RV_ERR_IO. */
#ifndef RV_DB_H
#define RV_DB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

typedef struct rv_db rv_db;

/* Opens nconns (1..64) connections to conninfo (borrowed). */
int rv_db_open(const char *conninfo, unsigned nconns, rv_db **out, rv_error *err);
/* Closes every connection and frees db. NULL-safe. Callers must be done. */
void rv_db_close(rv_db *db);
/* Deadlines on every call (issue 25): a call that cannot get a connection,
 * or whose query runs, past timeout_ms fails with RV_ERR_IO and marks the
 * thread unavailable (503 database_unavailable); a watchdog thread shuts
 * the stuck connection's socket, and the connection is reset before its
 * next use. Connecting gives up after connect_timeout (2 s unless conninfo
 * says). Long calls (an ingest's transaction) get a longer deadline scaled
 * by their bytes; nothing is set on the server (no statement_timeout).
 * 0 turns deadlines off (the default, for the CLI). Call once, before the
 * pool is shared. */
int rv_db_set_timeout(rv_db *db, unsigned timeout_ms, rv_error *err);
/* The server's data directory (a role allowed to read it: superuser or
 * pg_read_all_settings) into out (cap bytes). */
int rv_db_data_directory(rv_db *db, char *out, size_t cap, rv_error *err);
/* SELECT 1 on a pooled connection. */
int rv_db_ping(rv_db *db, rv_error *err);

/* Reconnection. A store call that finds the server gone (connection lost,
 * server shutting down or starting up, no answer) fails with RV_ERR_IO and
 * marks the calling thread; rv_db_take_unavailable returns that mark (1)
 * and clears it, so a request handler can answer 503 instead of 500. The
 * pool resets every connection before its next use after one was lost, and
 * while the server stays unreachable tries at most every 250 ms (calls in
 * between fail at once). */
int rv_db_take_unavailable(void);
/* Resets every connection before its next use and retries at once: call
 * after the server was restarted. */
void rv_db_reconnect_all(rv_db *db);

#include "rv_db_migrate.h"
#include "rv_db_platforms.h"
#include "rv_db_ingest.h"
#include "rv_db_ingest_prep.h"
#include "rv_db_traces.h"
#include "rv_db_overheads.h"
#include "rv_db_cache.h"
#include "rv_db_tokens.h"
#include "rv_db_jobs.h"
#include "rv_db_training.h"
#include "rv_db_ets.h"

#endif
