/* PostgreSQL notifications for the service's background threads
 * (store/rv_db_listen.c): a connection of its own that LISTENs on one
 * channel, so a replica learns of jobs other replicas queued without
 * waiting for its next poll. */
#ifndef RV_DB_LISTEN_H
#define RV_DB_LISTEN_H

#include "rv_db.h"
#include "rv_error.h"

typedef struct rv_db_listener rv_db_listener;

/* Connects to db's database and LISTENs on channel (lower-case letters,
 * digits and '_', at most 63). *out is new (rv_db_listener_close). A
 * refused connection gives RV_ERR_IO; the channel RV_ERR_INVALID. */
int rv_db_listener_open(rv_db *db, const char *channel, rv_db_listener **out, rv_error *err);

/* Waits up to timeout_ms for notifications on the channel: the number
 * received (drained), 0 on timeout. A lost connection is dropped and
 * opened again on a later call; meanwhile the call sleeps its timeout
 * and returns 0. */
int rv_db_listener_wait(rv_db_listener *l, int timeout_ms);

/* NULL-safe. */
void rv_db_listener_close(rv_db_listener *l);

#endif
