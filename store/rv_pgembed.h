/* The embedded default database: a private PostgreSQL cluster that reveried
 * (and `reverie migrate`) start themselves when no database URL is given.
 *
 * Layout under the data directory $REVERIE_HOME (default ./var):
 *   pg/            0700, owned by the cluster user; also the socket directory
 *   pg/data/       PGDATA (initdb on first use)
 *   pg/postgres.log, pg/initdb.log, pg/pg_ctl.log
 *   pg.lock        flock'ed while a process starts or stops the cluster
 *   pg.owner       flock'ed by the process that owns (will stop) the cluster
 * The server listens on a Unix socket only (listen_addresses = ''), trust
 * authentication; access is guarded by the 0700 socket directory.
 *
 * PostgreSQL refuses to run as root. When the caller is root, initdb and
 * pg_ctl run as the system user $REVERIE_PG_USER (default "postgres"), and
 * pg/ is created with that owner; when no such user exists, start fails with
 * a message that says what to do. Binaries: $REVERIE_PG_BINDIR, else the
 * /usr/lib/postgresql/<major>/bin matching an existing cluster's PG_VERSION,
 * else the highest installed one, else `pg_config --bindir`.
 *
 * Not thread-safe: start and stop from one thread (the server's main). */
#ifndef RV_PGEMBED_H
#define RV_PGEMBED_H

#include <stddef.h>

#include "util/rv_error.h"

typedef struct rv_pgembed rv_pgembed;

/* The home used when neither a flag nor $REVERIE_HOME names one: "./var",
 * except as root when the cluster user cannot search the current directory
 * (e.g. a checkout under root's 0700 home); then
 * /var/lib/reverie/<hash of the current directory's path>, created here.
 * Writes it to out[cap]; returns 1 when it is that fallback, else 0. */
int rv_pgembed_default_home(char *out, size_t cap);

/* Creates (first time) and starts the cluster under home (borrowed; NULL =
 * $REVERIE_HOME or rv_pgembed_default_home), or reuses it when it is already running. A
 * stale postmaster.pid left by a crash is detected and removed. On success
 * *out is a new handle (free with rv_pgembed_stop or rv_pgembed_detach). */
int rv_pgembed_start(const char *home, rv_pgembed **out, rv_error *err);

/* libpq connection string of the cluster's "reverie" database (borrowed
 * from pg; valid until it is freed). */
const char *rv_pgembed_conninfo(const rv_pgembed *pg);
/* PGDATA of the cluster (borrowed). */
const char *rv_pgembed_datadir(const rv_pgembed *pg);
/* 1 when this handle will stop the server: it started it, or adopted it
 * (below); 0 when it found it running under another live process. */
int rv_pgembed_started_here(const rv_pgembed *pg);
/* 1 when start found the server running with nobody owning it (the process
 * that started it was killed, e.g. kill -9 of reveried) and adopted it: it
 * is stopped with this handle, like one started here. */
int rv_pgembed_adopted(const rv_pgembed *pg);

/* 1 when the postmaster named by postmaster.pid is a live postgres process
 * (a file read, no connection: cheap enough to poll every second). */
int rv_pgembed_alive(const rv_pgembed *pg);
/* Brings a dead cluster back: under pg.lock, a server found answering
 * (another process restarted it) or starting up is waited for; else a
 * stale postmaster.pid is cleared and the server started, and this handle
 * then stops it. 0 once it answers, or a negative rv_err (e.g. the old
 * server's processes still hold its shared memory: try again later). */
int rv_pgembed_restart(rv_pgembed *pg, rv_error *err);

/* Stops the server with `pg_ctl stop -m fast` when this handle started it,
 * then frees pg (NULL-safe). Returns 0 or a negative rv_err. */
int rv_pgembed_stop(rv_pgembed *pg, rv_error *err);
/* Frees the handle and leaves the server running. NULL-safe. */
void rv_pgembed_detach(rv_pgembed *pg);

/* Picks the database for a process: url (borrowed, may be NULL), else
 * $REVERIE_DATABASE_URL, else the embedded cluster under home. *conninfo is
 * new (caller frees); *embed is the started cluster or NULL when a URL was
 * given (a URL never starts a server). */
int rv_pgembed_resolve(const char *url, const char *home, char **conninfo, rv_pgembed **embed,
                       rv_error *err);

/* Finds a directory with initdb, pg_ctl and postgres. major (borrowed, may
 * be NULL) prefers that version. Writes it to out[cap]. 0 or RV_ERR_NOTFOUND. */
int rv_pgembed_find_bindir(const char *major, char *out, size_t cap, rv_error *err);

#endif
