/* The store's connection pool: opening and closing connections, lending
 * them to one caller at a time, the hot statements prepared once per
 * connection, and the query helpers every module shares
 * (rv_db_internal.h). No table is named here but in the hot statements. */
#include "rv_db.h"
#include "rv_db_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const struct {
    const char *name, *sql;
    int nparams;
} stmts[RV_DB__ST_COUNT] = {
    [RV_DB__ST_SNAPSHOT] =
        {"rv_snapshot",
         "SELECT bytes FROM trace_snapshots WHERE trace_id = $1 AND format_version <= $2 "
         "ORDER BY format_version DESC LIMIT 1",
         2},
    [RV_DB__ST_CACHE_GET] = {"rv_cache_get",
                             "SELECT body, measured_us, baseline_us, predicted_us, speedup, "
                             "replay_error, have_energy, baseline_energy_j, energy_j, warnings "
                             "FROM whatif_cache WHERE trace_id = $1 AND request_hash = $2",
                             2},
    [RV_DB__ST_CACHE_PUT] = {"rv_cache_put",
                             /* A cache row is derived: its commit does not wait for
                              * the WAL flush (a crash loses at most the last rows, which
                              * are computed again); set_config is local to this
                              * statement's own transaction. */
                             "INSERT INTO whatif_cache (trace_id, request_hash, body, "
                             "measured_us, baseline_us, predicted_us, speedup, replay_error, "
                             "have_energy, baseline_energy_j, energy_j, warnings) SELECT "
                             "$1::bigint, $2::text, $3::text, $4::float8, $5::float8, $6::float8, "
                             "$7::float8, $8::float8, $9::boolean, $10::float8, $11::float8, "
                             "$12::integer FROM (SELECT set_config('synchronous_commit', 'off', "
                             "true)) AS async_commit ON CONFLICT (trace_id, "
                             "request_hash) DO UPDATE SET body = EXCLUDED.body, measured_us = "
                             "EXCLUDED.measured_us, baseline_us = EXCLUDED.baseline_us, "
                             "predicted_us = EXCLUDED.predicted_us, speedup = EXCLUDED.speedup, "
                             "replay_error = EXCLUDED.replay_error, have_energy = "
                             "EXCLUDED.have_energy, baseline_energy_j = "
                             "EXCLUDED.baseline_energy_j, energy_j = EXCLUDED.energy_j, warnings "
                             "= EXCLUDED.warnings, created_at = now()",
                             12},
    [RV_DB__ST_TOKEN_VERIFY] = {"rv_token_verify",
                                "UPDATE api_tokens SET last_used_at = now() WHERE token_sha256 = "
                                "$1 AND revoked_at IS NULL RETURNING id, name, token_sha256, "
                                "array_to_string(scopes, ',')",
                                1},
    /* Lowest shard index first across parents, then the oldest: a small
     * fleet job's shards do not queue behind every shard of a large one
     * (index jobs_queued_fair_idx, migration 0003). */
    [RV_DB__ST_JOB_CLAIM] = {"rv_job_claim",
                             "UPDATE jobs SET state = 'running', locked_by = $1, started_at = "
                             "now(), heartbeat_at = now(), attempts = attempts + 1 WHERE id = "
                             "(SELECT id FROM jobs WHERE state = 'queued' AND ($2::text IS NULL "
                             "OR kind = $2) ORDER BY coalesce(shard_index, 0), id FOR UPDATE "
                             "SKIP LOCKED LIMIT 1) RETURNING id, kind, request::text, attempts, "
                             "coalesce(parent_id, 0), expanded_at IS NOT NULL",
                             2},
};

#define RV_DB__RETRY_MS 250

/* Set when this thread found the server unreachable (rv_db_take_unavailable). */
static __thread int tl_unavailable;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* True when the failure says the server is gone rather than the statement
 * being wrong: a broken connection, SQLSTATE class 08 (connection
 * exception), 57P01..57P03 (shutting down, crashed, starting up). */
static int lost_server(PGconn *c, const char *state)
{
    if (c && PQstatus(c) == CONNECTION_BAD)
        return 1;
    return state && (strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0 ||
                     strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0);
}

int rv_db_take_unavailable(void)
{
    int v = tl_unavailable;
    tl_unavailable = 0;
    return v;
}

void rv_db_reconnect_all(rv_db *db)
{
    pthread_mutex_lock(&db->mu);
    db->epoch++;
    db->down = 0;
    db->retry_at_ms = 0;
    pthread_mutex_unlock(&db->mu);
}

int rv_db__fail(rv_error *err, const char *what, PGconn *c, const PGresult *r)
{
    const char *msg = r ? PQresultErrorMessage(r) : "";
    if (!msg || !*msg)
        msg = PQerrorMessage(c);
    char buf[200];
    snprintf(buf, sizeof(buf), "%s", msg ? msg : "");
    buf[strcspn(buf, "\n")] = '\0';
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (lost_server(c, state))
        tl_unavailable = 1;
    int code = state && strcmp(state, "23503") == 0 ? RV_ERR_NOTFOUND : RV_ERR_IO;
    return rv_error_set(err, code, -1, -1, "database: %s: %s", what, buf);
}

void rv_db__id_text(char out[24], int64_t id)
{
    snprintf(out, 24, "%lld", (long long)id);
}

/* Server NOTICEs ("relation already exists, skipping") are not errors and
 * would only clutter the service's stderr. */
static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

int rv_db_open(const char *conninfo, unsigned nconns, rv_db **out, rv_error *err)
{
    *out = NULL;
    if (nconns < 1)
        nconns = 1;
    if (nconns > RV_DB__MAX_CONNS)
        nconns = RV_DB__MAX_CONNS;
    rv_db *db = calloc(1, sizeof(*db));
    if (!db || !(db->conninfo = strdup(conninfo))) {
        free(db);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    pthread_mutex_init(&db->mu, NULL);
    pthread_cond_init(&db->cv, NULL);
    pthread_cond_init(&db->stop_cv, NULL);
    for (unsigned i = 0; i < nconns; i++) {
        db->conns[i].wfd = -1;
        /* A server that accepts but never answers (stopped) must not hang
         * the connect: connect_timeout unless conninfo gives its own (the
         * later value wins in libpq's list). */
        static const char *const keys[] = {"connect_timeout", "dbname", NULL};
        const char *vals[] = {"2", conninfo, NULL};
        PGconn *c = PQconnectdbParams(keys, vals, 1);
        db->n = i + 1;
        db->conns[i].c = c;
        PQsetNoticeProcessor(c, quiet_notice, NULL);
        if (PQstatus(c) != CONNECTION_OK) {
            int rc = rv_error_set(err, RV_ERR_IO, -1, -1, "database: cannot connect: %s",
                                  PQerrorMessage(c));
            rv_db_close(db);
            return rc;
        }
    }
    *out = db;
    return 0;
}

void rv_db_close(rv_db *db)
{
    if (!db)
        return;
    if (db->watchdog_started) {
        pthread_mutex_lock(&db->mu);
        db->stop = 1;
        pthread_cond_signal(&db->stop_cv);
        pthread_mutex_unlock(&db->mu);
        pthread_join(db->watchdog, NULL);
    }
    for (unsigned i = 0; i < db->n; i++) {
        PQfinish(db->conns[i].c);
        if (db->conns[i].wfd >= 0)
            close(db->conns[i].wfd);
    }
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->cv);
    pthread_cond_destroy(&db->stop_cv);
    free(db->conninfo);
    free(db);
}

/* now + ms as an absolute CLOCK_REALTIME time (pthread_cond_timedwait). */
static struct timespec abs_in(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Arms the deadline of pc (under mu): a duplicate of its socket for the
 * watchdog, and the time. */
static void arm(rv_db *db, rv_db__conn *pc, int64_t deadline_ms)
{
    if (!db->timeout_ms)
        return;
    if (pc->wfd >= 0)
        close(pc->wfd);
    int s = PQsocket(pc->c);
    pc->wfd = s >= 0 ? fcntl(s, F_DUPFD_CLOEXEC, 0) : -1;
    pc->deadline_ms = deadline_ms;
}

static void disarm(rv_db__conn *pc)
{
    if (pc->wfd >= 0)
        close(pc->wfd);
    pc->wfd = -1;
    pc->deadline_ms = 0;
}

/* The watchdog: every 100 ms, shuts the socket of each connection whose
 * call is past its deadline, so that libpq's blocking read returns (the
 * connection is then lost, the call fails with RV_ERR_IO and the thread is
 * marked unavailable). Nothing is sent to the server: a stopped server
 * would not read a cancel request either. */
static void *watchdog_main(void *arg)
{
    rv_db *db = arg;
    pthread_mutex_lock(&db->mu);
    while (!db->stop) {
        struct timespec until = abs_in(100);
        pthread_cond_timedwait(&db->stop_cv, &db->mu, &until);
        int64_t now = now_ms();
        for (unsigned i = 0; i < db->n; i++) {
            rv_db__conn *pc = &db->conns[i];
            if (!pc->busy || !pc->deadline_ms || now < pc->deadline_ms || pc->killed)
                continue;
            if (pc->wfd >= 0)
                shutdown(pc->wfd, SHUT_RDWR);
            pc->killed = 1;
            fprintf(stderr,
                    "reveried: database: a call ran %lld ms past its deadline; its "
                    "connection was cut (reset before its next use)\n",
                    (long long)(now - pc->deadline_ms));
        }
    }
    pthread_mutex_unlock(&db->mu);
    return NULL;
}

int rv_db_set_timeout(rv_db *db, unsigned timeout_ms, rv_error *err)
{
    db->timeout_ms = timeout_ms;
    if (!timeout_ms || db->watchdog_started)
        return 0;
    if (pthread_create(&db->watchdog, NULL, watchdog_main, db) != 0) {
        db->timeout_ms = 0;
        return rv_error_set(err, RV_ERR_IO, -1, -1, "database: cannot start the watchdog");
    }
    db->watchdog_started = 1;
    return 0;
}

void rv_db__deadline(rv_db *db, rv_db__conn *pc, unsigned ms)
{
    if (!db->timeout_ms)
        return;
    pthread_mutex_lock(&db->mu);
    if (!pc->killed)
        pc->deadline_ms = now_ms() + (ms ? ms : db->timeout_ms);
    pthread_mutex_unlock(&db->mu);
}

rv_db__conn *rv_db__acquire(rv_db *db, rv_error *err)
{
    rv_db__conn *pc = NULL;
    int64_t deadline = db->timeout_ms ? now_ms() + db->timeout_ms : 0;
    pthread_mutex_lock(&db->mu);
    for (;;) {
        for (unsigned i = 0; i < db->n && !pc; i++)
            if (!db->conns[i].busy)
                pc = &db->conns[i];
        if (pc)
            break;
        if (!deadline) {
            pthread_cond_wait(&db->cv, &db->mu);
            continue;
        }
        /* Every connection busy past the deadline: the calls holding them
         * are stuck (or the pool is too small); fail rather than queue. */
        int64_t left = deadline - now_ms();
        struct timespec until = abs_in(left > 0 ? left : 0);
        if (left <= 0 || (pthread_cond_timedwait(&db->cv, &db->mu, &until) == ETIMEDOUT &&
                          now_ms() >= deadline)) {
            pthread_mutex_unlock(&db->mu);
            tl_unavailable = 1;
            rv_error_set(err, RV_ERR_IO, -1, -1,
                         "database: no connection free within %u ms (the database is slow or "
                         "stuck)",
                         db->timeout_ms);
            return NULL;
        }
    }
    pc->busy = 1;
    unsigned epoch = db->epoch;
    int wait = db->down && now_ms() < db->retry_at_ms;
    int killed = pc->killed;
    pthread_mutex_unlock(&db->mu);
    if (PQstatus(pc->c) == CONNECTION_OK && pc->epoch == epoch && !killed) {
        pthread_mutex_lock(&db->mu);
        arm(db, pc, deadline);
        pthread_mutex_unlock(&db->mu);
        return pc;
    }
    if (!wait) {
        /* Bounded by connect_timeout (rv_db_open). */
        PQreset(pc->c);
        pc->prepared = 0;
        pc->epoch = epoch;
    }
    pthread_mutex_lock(&db->mu);
    if (!wait && PQstatus(pc->c) == CONNECTION_OK) {
        db->down = 0;
        pc->killed = 0;
        /* The reset took its time; the call still gets a full deadline. */
        arm(db, pc, deadline ? now_ms() + db->timeout_ms : 0);
        pthread_mutex_unlock(&db->mu);
        return pc;
    }
    if (!wait) {
        db->down = 1;
        db->retry_at_ms = now_ms() + RV_DB__RETRY_MS;
    }
    pc->busy = 0;
    pthread_cond_signal(&db->cv);
    pthread_mutex_unlock(&db->mu);
    tl_unavailable = 1;
    if (wait)
        rv_error_set(err, RV_ERR_IO, -1, -1, "database: not reachable (reconnecting)");
    else
        rv_error_set(err, RV_ERR_IO, -1, -1, "database: connection lost: %s",
                     PQerrorMessage(pc->c));
    return NULL;
}

void rv_db__release(rv_db *db, rv_db__conn *pc)
{
    if (!pc)
        return;
    /* Never hand out a connection inside a transaction. */
    if (!pc->killed && PQstatus(pc->c) == CONNECTION_OK &&
        PQtransactionStatus(pc->c) != PQTRANS_IDLE)
        PQclear(PQexec(pc->c, "ROLLBACK"));
    pthread_mutex_lock(&db->mu);
    /* A lost connection: the others are likely lost too (the server went
     * away); reset each before its next use instead of failing a query on
     * it first. */
    if ((pc->killed || PQstatus(pc->c) != CONNECTION_OK) && pc->epoch == db->epoch)
        db->epoch++;
    disarm(pc);
    pc->busy = 0;
    pthread_cond_signal(&db->cv);
    pthread_mutex_unlock(&db->mu);
}

PGresult *rv_db__q(rv_db__conn *pc, const char *what, const char *sql, int n,
                   const char *const *vals, ExecStatusType want, rv_error *err)
{
    PGresult *r = PQexecParams(pc->c, sql, n, NULL, vals, NULL, NULL, 0);
    if (PQresultStatus(r) != want) {
        rv_db__fail(err, what, pc->c, r);
        PQclear(r);
        return NULL;
    }
    return r;
}

int rv_db__exec(rv_db__conn *pc, const char *what, const char *sql, rv_error *err)
{
    PGresult *r = rv_db__q(pc, what, sql, 0, NULL, PGRES_COMMAND_OK, err);
    PQclear(r);
    return r ? 0 : RV_ERR_IO;
}

PGresult *rv_db__qp(rv_db__conn *pc, int st, const char *const *vals, const int *lens,
                    const int *fmts, int result_binary, ExecStatusType want, rv_error *err)
{
    if (!(pc->prepared & (1u << st))) {
        PGresult *r = PQprepare(pc->c, stmts[st].name, stmts[st].sql, stmts[st].nparams, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            rv_db__fail(err, stmts[st].name, pc->c, r);
            PQclear(r);
            return NULL;
        }
        PQclear(r);
        pc->prepared |= 1u << st;
    }
    PGresult *r =
        PQexecPrepared(pc->c, stmts[st].name, stmts[st].nparams, vals, lens, fmts, result_binary);
    if (PQresultStatus(r) != want) {
        rv_db__fail(err, stmts[st].name, pc->c, r);
        PQclear(r);
        return NULL;
    }
    return r;
}

int rv_db_ping(rv_db *db, rv_error *err)
{
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__q(pc, "ping", "SELECT 1", 0, NULL, PGRES_TUPLES_OK, err);
    PQclear(r);
    rv_db__release(db, pc);
    return r ? 0 : RV_ERR_IO;
}

int rv_db_data_directory(rv_db *db, char *out, size_t cap, rv_error *err)
{
    out[0] = '\0';
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__q(pc, "data directory", "SELECT current_setting('data_directory')", 0,
                           NULL, PGRES_TUPLES_OK, err);
    int rc = r && PQntuples(r) == 1 ? 0 : RV_ERR_IO;
    if (!rc)
        snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db__query_json(rv_db *db, const char *what, const char *sql, int n, const char *const *vals,
                      json_t **out, rv_error *err)
{
    *out = NULL;
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = rv_db__q(pc, what, sql, n, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
    } else if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "%s: not found", what);
    } else {
        json_error_t je;
        *out = json_loads(PQgetvalue(r, 0, 0), JSON_DECODE_ANY, &je);
        if (!*out)
            rc = rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "%s: bad JSON from the database: %s",
                              what, je.text);
    }
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}
