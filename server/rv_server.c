/* Start-up and shutdown of reveried, and its background threads: the token
 * table refresher, the fleet-job runners and the embedded cluster's
 * watchdog. Start-up also removes the spool files of uploads a killed
 * process left behind. */
#include "rv_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "rv_api.h"
#include "rv_api_internal.h"
#include "rv_auth.h"
#include "rv_db.h"
#include "rv_db_listen.h"
#include "rv_gcache.h"
#include "rv_pending.h"
#include "rv_http.h"
#include "rv_metrics.h"
#include "rv_pgembed.h"
#include "rv_workers.h"

#define TOKEN_REFRESH_MS  1000
#define FLEET_POLL_MS     500
#define LISTEN_WAIT_MS    250 /* the listener checks for stop this often */
#define SHUTDOWN_GRACE_MS 20000
#define PG_WATCH_MS       1000
#define PG_BACKOFF_MAX_MS 16000
/* A spool file this old belongs to no upload in progress, even when
 * another reveried shares the home (uploads idle out after --timeout). */
#define SPOOL_STALE_S 3600

typedef struct bg {
    rv_app *app;
    rv_pgembed *pg; /* the embedded cluster; NULL with a database URL */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t fleet_cv; /* fleet threads sleep here between polls */
    unsigned fleet_kicks;    /* jobs queued or expanded by this replica */
    int stop;
} bg;

/* Sleeps up to ms or until stop is set; returns stop. */
static int bg_wait(bg *b, unsigned ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->mu);
    if (!b->stop)
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    int stop = b->stop;
    pthread_mutex_unlock(&b->mu);
    return stop;
}

static void refresh_tokens(rv_app *a)
{
    rv_db_token *rows = NULL;
    size_t n = 0;
    rv_error e;

    rv_error_clear(&e);
    if (rv_db_token_list(a->db, 0, &rows, &n, &e) != 0) {
        /* Keep the last good table: a database hiccup must not lock
         * everyone out, nor let everyone in. */
        return;
    }
    rv_auth_token *toks = n ? calloc(n, sizeof(*toks)) : NULL;
    size_t k = 0;
    for (size_t i = 0; i < n && toks; i++) {
        snprintf(toks[k].id, sizeof(toks[k].id), "%lld", (long long)rows[i].id);
        snprintf(toks[k].hash_hex, sizeof(toks[k].hash_hex), "%s", rows[i].token_sha256);
        toks[k].scopes = rows[i].scopes;
        k++;
    }
    if (toks || n == 0)
        rv_auth_set_tokens(a->auth, toks, k);
    free(toks);
    rv_db_token_list_free(rows, n);
}

static void *token_thread(void *p)
{
    bg *b = p;

    do
        refresh_tokens(b->app);
    while (!bg_wait(b, TOKEN_REFRESH_MS));
    return NULL;
}

/* Wakes the fleet threads: rv_app.fleet_wake. */
static void fleet_wake(void *p)
{
    bg *b = p;

    pthread_mutex_lock(&b->mu);
    b->fleet_kicks++;
    pthread_cond_broadcast(&b->fleet_cv);
    pthread_mutex_unlock(&b->mu);
}

/* Sleeps up to ms, or until this replica queued or expanded a job since
 * *seen, or stop; returns stop. Other replicas' jobs wait for the poll. */
static int fleet_wait(bg *b, unsigned ms, unsigned *seen)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->mu);
    while (!b->stop && b->fleet_kicks == *seen)
        if (pthread_cond_timedwait(&b->fleet_cv, &b->mu, &ts) != 0)
            break;
    *seen = b->fleet_kicks;
    int stop = b->stop;
    pthread_mutex_unlock(&b->mu);
    return stop;
}

/* A notification: a job queued or expanded (by any replica) wakes the
 * fleet threads; a stored trace changed or deleted (by any replica) is
 * dropped from this replica's graph cache. */
static void on_notify(void *ctx, const char *channel, const char *payload)
{
    bg *b = ctx;
    if (strcmp(channel, "rv_jobs") == 0) {
        rv_metrics_add(b->app->metrics, RV_M_FLEET_NOTIFIED, 1);
        fleet_wake(b);
    } else if (strcmp(channel, "rv_traces") == 0) {
        char *end;
        long long id = strtoll(payload, &end, 10);
        if (end != payload && *end == '\0' && id > 0) {
            rv_gcache_forget(b->app->gcache, id);
            rv_metrics_add(b->app->metrics, RV_M_TRACES_CHANGED, 1);
        }
    }
}

/* Other replicas' jobs and trace changes, by their NOTIFY (rv_db_jobs.c,
 * rv_db_traces.c), at once instead of at the next poll. */
static void *listen_thread(void *p)
{
    static const char *const channels[] = {"rv_jobs", "rv_traces"};
    bg *b = p;
    rv_db_listener *l = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (rv_db_listener_open(b->app->db, channels, 2, &l, &e) != 0) {
        fprintf(stderr,
                "reveried: listening to other replicas: %s (their jobs wait for the "
                "poll, their trace changes for this replica's cache to evict)\n",
                e.message);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&b->mu);
        int stop = b->stop;
        pthread_mutex_unlock(&b->mu);
        if (stop)
            break;
        rv_db_listener_wait(l, LISTEN_WAIT_MS, on_notify, b);
    }
    rv_db_listener_close(l);
    return NULL;
}

static void *fleet_thread(void *p)
{
    bg *b = p;
    unsigned seen = 0;

    while (!fleet_wait(b, FLEET_POLL_MS, &seen)) {
        /* Drain the queue before sleeping again. */
        while (rv_api_fleet_run_one(b->app) > 0) {
            pthread_mutex_lock(&b->mu);
            int stop = b->stop;
            pthread_mutex_unlock(&b->mu);
            if (stop)
                break;
        }
    }
    return NULL;
}

/* Restarts the embedded cluster when its postmaster is gone (killed, or
 * crashed), with backoff (1 s doubling to 16 s) while starts fail; the
 * pool then reconnects. Meanwhile requests answer 503
 * database_unavailable (rv_api.c). */
/* The folder whose disk holds the database: the embedded cluster's data
 * directory, else the one an external server reports when this process
 * can see it (same host, and a role allowed to read the setting); NULL
 * when neither. */
static const char *database_dir(rv_pgembed *pg, rv_db *db, char *buf, size_t cap)
{
    struct statvfs sv;
    if (pg) {
        snprintf(buf, cap, "%s", rv_pgembed_datadir(pg));
        return buf;
    }
    rv_error e;
    rv_error_clear(&e);
    if (rv_db_data_directory(db, buf, cap, &e) != 0 || statvfs(buf, &sv) != 0)
        return NULL;
    return buf;
}

static void *pg_thread(void *p)
{
    bg *b = p;
    unsigned wait_ms = PG_WATCH_MS, backoff = PG_WATCH_MS;
    int down = 0;
    rv_error e;

    while (!bg_wait(b, wait_ms)) {
        wait_ms = PG_WATCH_MS;
        if (rv_pgembed_alive(b->pg)) {
            down = 0;
            backoff = PG_WATCH_MS;
            continue;
        }
        if (!down)
            fprintf(stderr, "reveried: the embedded PostgreSQL is not running; restarting it\n");
        down = 1;
        rv_error_clear(&e);
        if (rv_pgembed_restart(b->pg, &e) == 0) {
            rv_db_reconnect_all(b->app->db);
            fprintf(stderr, "reveried: the embedded PostgreSQL is back\n");
            down = 0;
            backoff = PG_WATCH_MS;
            continue;
        }
        fprintf(stderr, "reveried: restarting the embedded PostgreSQL: %s (next try in %u ms)\n",
                e.message, backoff);
        wait_ms = backoff;
        backoff = backoff * 2 > PG_BACKOFF_MAX_MS ? PG_BACKOFF_MAX_MS : backoff * 2;
    }
    return NULL;
}

/* Removes the spool files of uploads ("upload-*") and answers
 * ("answer-*", unlinked as soon as made, so only one caught between the
 * two steps) a killed process left.
 * Every reveried holds a shared flock on home/reveried.lock for its life;
 * one that gets it exclusively at start is alone with this home and
 * removes them all, otherwise (replicas sharing the home) only those
 * untouched for SPOOL_STALE_S. Returns the lock's descriptor (keep it
 * open; -1 when it could not be made). */
static int spool_cleanup(const char *home, const char *spool)
{
    char p[4096];
    int alone = 0, removed = 0;

    snprintf(p, sizeof(p), "%s/reveried.lock", home);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        alone = flock(fd, LOCK_EX | LOCK_NB) == 0;
        while (flock(fd, LOCK_SH) != 0 && errno == EINTR)
            ;
    }
    DIR *d = opendir(spool);
    struct dirent *de;
    time_t now = time(NULL);
    while (d && (de = readdir(d))) {
        struct stat sb;
        if (strncmp(de->d_name, "upload-", 7) != 0 && strncmp(de->d_name, "answer-", 7) != 0)
            continue;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (!alone && now - sb.st_mtime < SPOOL_STALE_S)
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0)
            removed++;
    }
    if (d)
        closedir(d);
    if (removed)
        fprintf(stderr, "reveried: removed %d spool file(s) of interrupted uploads from %s\n",
                removed, spool);
    return fd;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return -1;
        buf[i] = c;
    }
    return 0;
}

/* Connections past the open-file limit would wait in the listen backlog
 * (accept fails) instead of getting the 503 past --max-conn: raise the soft
 * limit toward the hard one when it is below what the settings need. */
static void raise_fd_limit(unsigned conn_limit)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)conn_limit + 512; /* database, spool and static files */

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < want)
        fprintf(stderr,
                "reveried: open-file limit %llu is below the %llu that --max-conn %u needs\n",
                (unsigned long long)rl.rlim_cur, (unsigned long long)want, conn_limit);
}

/* The home, its spool folder and the database (embedded or not), migrated
 * and with its deadlines: 0, or -1 after saying why. What was opened is
 * left in the out-parameters for the caller to close. */
static int open_store(const rv_server_config *c, const char *spool, char **conninfo,
                      rv_pgembed **pg, rv_db **db, int *home_lock)
{
    rv_error e;
    rv_error_clear(&e);
    if (mkdir_p(c->home, 0755) != 0 || mkdir_p(spool, 0700) != 0) {
        fprintf(stderr, "reveried: cannot create %s: %s\n", spool, strerror(errno));
        return -1;
    }
    *home_lock = spool_cleanup(c->home, spool);
    if (rv_pgembed_resolve(c->database_url, c->home, conninfo, pg, &e) != 0) {
        fprintf(stderr, "reveried: database: %s\n", e.message);
        return -1;
    }
    if (*pg && rv_pgembed_adopted(*pg))
        fprintf(stderr, "reveried: adopted the embedded PostgreSQL left running by a process "
                        "that is gone; it stops with this one\n");
    if (rv_db_open(*conninfo, c->workers + c->fleet_workers + 2, db, &e) != 0) {
        fprintf(stderr, "reveried: database: %s\n", e.message);
        return -1;
    }
    if (rv_db_migrate(*db, NULL, &e) != 0) {
        fprintf(stderr, "reveried: migrations: %s\n", e.message);
        return -1;
    }
    /* Deadlines only once the schema is in place: a migration may be long. */
    if (rv_db_set_timeout(*db, c->db_timeout_ms, &e) != 0) {
        fprintf(stderr, "reveried: database: %s\n", e.message);
        return -1;
    }
    return 0;
}

/* The API's settings from the server's (disk_path: the database's data
 * directory, NULL when it cannot be read from here). */
static void app_config(const rv_server_config *c, const char *spool, const char *disk_path,
                       rv_app *app)
{
    app->cfg.home = c->home;
    app->cfg.spool_dir = spool;
    app->cfg.upload_cap = c->upload_cap;
    app->cfg.max_trace_bytes = c->max_trace_bytes;
    app->cfg.max_events = c->max_events;
    app->cfg.whatif_budget_ms = c->whatif_budget_ms;
    app->cfg.fleet_inline_max = c->fleet_inline_max;
    app->cfg.timeline_max_tasks = c->timeline_max_tasks ? c->timeline_max_tasks : 200000;
    app->cfg.max_archive = c->max_archive_bytes;
    app->cfg.disk_reserve = c->disk_reserve_bytes;
    app->cfg.disk_path = disk_path;
    if (c->disk_reserve_bytes && !disk_path)
        fprintf(stderr, "reveried: the database's data directory is not readable from here "
                        "(an external database): --disk-reserve cannot act\n");
}

/* The HTTP layer's settings (everything borrowed). */
static void http_config(const rv_server_config *c, const char *spool, rv_workers *workers,
                        rv_metrics *metrics, rv_auth *auth, rv_app *app, rv_http_config *hc)
{
    size_t nroutes;
    const rv_route *routes = rv_api_routes(&nroutes);
    *hc = (rv_http_config){
        .bind = c->bind,
        .port = c->port,
        .threads = c->http_threads,
        .conn_timeout_s = c->conn_timeout_s,
        .per_ip_limit = c->per_ip_limit,
        .conn_limit = c->conn_limit,
        .header_timeout_s = c->header_timeout_s,
        .min_body_rate = c->min_body_rate,
        .allowed_hosts = c->allowed_hosts,
        .nallowed_hosts = c->nallowed_hosts,
        .cors_origins = c->cors_origins,
        .ncors_origins = c->ncors_origins,
        .upload_cap = c->upload_cap,
        .json_body_cap = c->json_body_cap,
        .answer_spool_cap = c->answer_spool_cap,
        .spool_dir = spool,
        .web_root = c->web_root,
        .routes = routes,
        .nroutes = nroutes,
        .workers = workers,
        .metrics = metrics,
        .auth = auth,
        .app = app,
    };
}

int rv_server_main(const rv_server_config *c)
{
    int rc = 1;
    rv_error e;
    sigset_t sigs;
    char spool[4096];
    char *conninfo = NULL;
    rv_pgembed *pg = NULL;
    rv_db *db = NULL;
    rv_metrics *metrics = NULL;
    rv_auth *auth = NULL;
    rv_gcache *gcache = NULL;
    rv_pending *pending = NULL;
    rv_workers *workers = NULL;
    rv_http *http = NULL;
    rv_app app;
    char datadir[1024];
    bg b;
    pthread_t tok_tid, fleet_tids[64], pg_tid, listen_tid;
    int tok_started = 0, pg_started = 0, listen_started = 0, home_lock = -1;
    unsigned nfleet = 0;

    rv_error_clear(&e);
    memset(&app, 0, sizeof(app));
    memset(&b, 0, sizeof(b));
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    pthread_cond_init(&b.fleet_cv, NULL);
    b.app = &app;

    /* Every thread inherits this mask, so only sigwait below sees them. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    raise_fd_limit(c->conn_limit);
    snprintf(spool, sizeof(spool), "%s/spool", c->home);
    if (open_store(c, spool, &conninfo, &pg, &db, &home_lock) != 0)
        goto out;
    if (c->migrate_only) {
        printf("reveried: migrations applied\n");
        rc = 0;
        goto out;
    }

    metrics = rv_metrics_new();
    auth = rv_auth_new(c->require_auth);
    workers = rv_workers_new(c->workers, c->queue);
    if (!metrics || !auth || !workers) {
        fprintf(stderr, "reveried: out of memory\n");
        goto out;
    }
    app_config(c, spool, database_dir(pg, db, datadir, sizeof(datadir)), &app);
    gcache = rv_gcache_new(c->graph_cache_bytes);
    /* One answer held per worker at most: each writes its row before it
     * takes another request. */
    pending = rv_pending_new(c->workers ? c->workers : 1);
    if (!gcache || !pending) {
        fprintf(stderr, "reveried: out of memory\n");
        goto out;
    }
    app.gcache = gcache;
    app.pending = pending;
    app.db = db;
    app.metrics = metrics;
    app.auth = auth;
    app.version = c->version;
    rv_api_fleet_init(&app);
    app.fleet_wake = fleet_wake;
    app.fleet_wake_ctx = &b;
    rv_metrics_add(metrics, RV_M_FLEET_WORKERS, c->fleet_workers);
    fprintf(stderr, "reveried: %u fleet worker thread(s) (--fleet-workers), %u request workers\n",
            c->fleet_workers, c->workers);

    /* Load the tokens before the first request can arrive. */
    refresh_tokens(&app);
    if (pthread_create(&tok_tid, NULL, token_thread, &b) == 0)
        tok_started = 1;
    for (unsigned i = 0; i < c->fleet_workers && i < 64; i++)
        if (pthread_create(&fleet_tids[nfleet], NULL, fleet_thread, &b) == 0)
            nfleet++;
    if (pthread_create(&listen_tid, NULL, listen_thread, &b) == 0)
        listen_started = 1;
    b.pg = pg;
    if (pg && pthread_create(&pg_tid, NULL, pg_thread, &b) == 0)
        pg_started = 1;

    rv_http_config hc;
    http_config(c, spool, workers, metrics, auth, &app, &hc);
    if (rv_http_start(&hc, &http, &e) != 0) {
        fprintf(stderr, "reveried: %s\n", e.message);
        goto out;
    }
    printf("reveried %s listening on http://%s%s%s:%d/ (database: %s, auth: %s)\n", c->version,
           strchr(c->bind, ':') ? "[" : "", c->bind, strchr(c->bind, ':') ? "]" : "",
           rv_http_port(http), pg ? "embedded" : "external",
           c->require_auth ? "bearer tokens" : "off");
    fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "reveried: %s received, finishing requests in flight\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    __atomic_store_n(&app.draining, 1, __ATOMIC_RELEASE);
    rc = 0;
out:
    rv_http_stop(http, SHUTDOWN_GRACE_MS);
    pthread_mutex_lock(&b.mu);
    b.stop = 1;
    pthread_cond_broadcast(&b.cv);
    pthread_cond_broadcast(&b.fleet_cv);
    pthread_mutex_unlock(&b.mu);
    if (tok_started)
        pthread_join(tok_tid, NULL);
    for (unsigned i = 0; i < nfleet; i++)
        pthread_join(fleet_tids[i], NULL);
    if (listen_started)
        pthread_join(listen_tid, NULL);
    if (pg_started)
        pthread_join(pg_tid, NULL);
    rv_workers_free(workers); /* after it, no cache write is pending */
    rv_pending_free(pending);
    rv_db_close(db);
    if (pg) {
        rv_error_clear(&e);
        if (rv_pgembed_stop(pg, &e) != 0)
            fprintf(stderr, "reveried: stopping the embedded database: %s\n", e.message);
    }
    free(conninfo);
    if (home_lock >= 0)
        close(home_lock);
    rv_auth_free(auth);
    rv_gcache_free(gcache);
    rv_metrics_free(metrics);
    pthread_cond_destroy(&b.cv);
    pthread_cond_destroy(&b.fleet_cv);
    pthread_mutex_destroy(&b.mu);
    if (rc == 0)
        fprintf(stderr, "reveried: stopped\n");
    return rc;
}
