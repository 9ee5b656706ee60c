/* LISTEN on a connection of its own; see rv_db_listen.h. */
#include "rv_db_listen.h"
#include "rv_db_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rv_db_listener {
    char *conninfo;
    char channel[RV_DB_LISTEN_MAX][64];
    size_t nchannels;
    PGconn *c; /* NULL while the connection is lost */
};

static int channel_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

/* Connects and LISTENs; 0 or RV_ERR_IO (the connection left closed). */
static int connect_listen(rv_db_listener *l, rv_error *err)
{
    char sql[96];
    l->c = PQconnectdb(l->conninfo);
    if (PQstatus(l->c) != CONNECTION_OK) {
        if (err)
            rv_error_set(err, RV_ERR_IO, -1, -1, "listen: %s", PQerrorMessage(l->c));
        PQfinish(l->c);
        l->c = NULL;
        return RV_ERR_IO;
    }
    /* The channels were checked to be plain identifiers. */
    int ok = 1;
    for (size_t i = 0; ok && i < l->nchannels; i++) {
        snprintf(sql, sizeof(sql), "LISTEN %s", l->channel[i]);
        PGresult *r = PQexec(l->c, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok && err)
            rv_error_set(err, RV_ERR_IO, -1, -1, "listen: %s", PQerrorMessage(l->c));
        PQclear(r);
    }
    if (!ok) {
        PQfinish(l->c);
        l->c = NULL;
        return RV_ERR_IO;
    }
    return 0;
}

int rv_db_listener_open(rv_db *db, const char *const *channels, size_t n, rv_db_listener **out,
                        rv_error *err)
{
    *out = NULL;
    if (n == 0 || n > RV_DB_LISTEN_MAX)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "listen: 1 to %d channels",
                            RV_DB_LISTEN_MAX);
    for (size_t i = 0; i < n; i++)
        if (!channel_ok(channels[i]))
            return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                                "listen: channel '%.64s' is not a plain lower-case identifier",
                                channels[i]);
    rv_db_listener *l = calloc(1, sizeof(*l));
    if (!l || !(l->conninfo = strdup(db->conninfo))) {
        free(l);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        snprintf(l->channel[i], sizeof(l->channel[i]), "%s", channels[i]);
    l->nchannels = n;
    int rc = connect_listen(l, err);
    if (rc) {
        rv_db_listener_close(l);
        return rc;
    }
    *out = l;
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Hands the notifications already read from the socket to fn. */
static int drain(PGconn *c, rv_db_notify_fn fn, void *ctx)
{
    int n = 0;
    PGnotify *nt;
    while ((nt = PQnotifies(c)) != NULL) {
        if (fn)
            fn(ctx, nt->relname, nt->extra ? nt->extra : "");
        PQfreemem(nt);
        n++;
    }
    return n;
}

int rv_db_listener_wait(rv_db_listener *l, int timeout_ms, rv_db_notify_fn fn, void *ctx)
{
    if (!l)
        return 0;
    if (!l->c && connect_listen(l, NULL) != 0) {
        sleep_ms(timeout_ms);
        return 0;
    }
    int n = drain(l->c, fn, ctx);
    if (n)
        return n;
    struct pollfd p = {.fd = PQsocket(l->c), .events = POLLIN};
    if (p.fd < 0)
        goto lost;
    int got = poll(&p, 1, timeout_ms);
    if (got <= 0)
        return 0; /* timeout, or interrupted: the caller comes back */
    if (!PQconsumeInput(l->c) || PQstatus(l->c) != CONNECTION_OK)
        goto lost;
    return drain(l->c, fn, ctx);
lost:
    PQfinish(l->c);
    l->c = NULL;
    return 0;
}

void rv_db_listener_close(rv_db_listener *l)
{
    if (!l)
        return;
    PQfinish(l->c);
    free(l->conninfo);
    free(l);
}
