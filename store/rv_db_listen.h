/* PostgreSQL notifications for the service's background threads
 * (store/rv_db_listen.c): a connection of its own that LISTENs on a few
 * channels, so a replica learns at once of jobs other replicas queued
 * (rv_jobs) and of stored traces they changed or deleted (rv_traces). */
#ifndef RV_DB_LISTEN_H
#define RV_DB_LISTEN_H

#include "rv_db.h"
#include "util/rv_error.h"

typedef struct rv_db_listener rv_db_listener;

#define RV_DB_LISTEN_MAX 4

/* Connects to db's database and LISTENs on the n channels (lower-case
 * letters, digits and '_', at most 63 each; n at most RV_DB_LISTEN_MAX).
 * *out is new (rv_db_listener_close). A refused connection gives
 * RV_ERR_IO; a bad channel RV_ERR_INVALID. */
int rv_db_listener_open(rv_db *db, const char *const *channels, size_t n, rv_db_listener **out,
                        rv_error *err);

/* Called for each notification with its channel and payload (borrowed,
 * valid during the call). */
typedef void (*rv_db_notify_fn)(void *ctx, const char *channel, const char *payload);

/* Waits up to timeout_ms for notifications and hands each to fn: the
 * number received, 0 on timeout. A lost connection is dropped and opened
 * again on a later call; meanwhile the call sleeps its timeout and returns
 * 0 (what was sent in between is not heard: the callers keep a poll). */
int rv_db_listener_wait(rv_db_listener *l, int timeout_ms, rv_db_notify_fn fn, void *ctx);

/* NULL-safe. */
void rv_db_listener_close(rv_db_listener *l);

#endif
