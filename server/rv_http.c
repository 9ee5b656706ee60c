/* HTTP layer: the libmicrohttpd daemon and the life of a request; the
 * client limits are in rv_http_guard.c, answers in rv_http_resp.c, route
 * matching and static files in rv_http_route.c (rv_http_internal.h).
 *
 * Life of a request (libmicrohttpd calls on_request several times):
 *   1. first call, headers only: screen (caps, Host, CORS), route,
 *      authenticate, check Content-Type and Content-Length against the caps
 *      (413/415 go out here, before the body is read), open the spool file
 *      for uploads;
 *   2. one call per body chunk: append to the spool file or the capped JSON
 *      buffer; past a cap the rest is read and dropped, then 413;
 *   3. last call: inline routes run here; the others suspend the connection
 *      and go to the worker pool, which fills the response and resumes it;
 *   4. the call after the resume queues the response;
 *   5. on_completed records metrics and frees the request.
 *
 * Around requests, every connection has a record that the watchdog checks
 * against the client deadlines (rv_http_guard.c). */
#include "rv_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rv_http_internal.h"
#include "rv_metrics.h"
#include "rv_workers.h"

/* At most 32 KiB libmicrohttpd takes a connection's pool from malloc; a
 * larger one is an mmap whose munmap flushes every CPU's TLB, per
 * connection (docs/internals/server.md). */
#define CONN_MEMORY_LIMIT (32u * 1024u)

static double elapsed_s(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ------------------------------------------------------ request context */

/* Sets the error to answer once the rest of the body has been read. */
static void body_fail(rv_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void body_fail(rv_req *r, int status, const char *code, const char *fmt, ...)
{
    va_list ap;

    if (r->body_status)
        return;
    r->body_status = status;
    snprintf(r->body_code, sizeof(r->body_code), "%s", code);
    va_start(ap, fmt);
    vsnprintf(r->body_msg, sizeof(r->body_msg), fmt, ap);
    va_end(ap);
    if (r->spool_fd >= 0) {
        close(r->spool_fd);
        r->spool_fd = -1;
    }
    if (r->spool_path) {
        unlink(r->spool_path);
        free(r->spool_path);
        r->spool_path = NULL;
    }
    rv_buf_free(&r->body);
    r->body_len = 0;
}

static void req_free(rv_req *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nquery; i++) {
        free(r->query[i].key);
        free(r->query[i].value);
    }
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].key);
        free(r->headers[i].value);
    }
    for (int i = 0; i < r->nresp_headers; i++) {
        free(r->resp_headers[i].key);
        free(r->resp_headers[i].value);
    }
    if (r->spool_fd >= 0)
        close(r->spool_fd);
    if (r->spool_path) {
        unlink(r->spool_path);
        free(r->spool_path);
    }
    rv_http__release_answer(r);
    rv_http__clear_response(r);
    rv_buf_free(&r->body);
    free(r->path);
    free(r);
}

/* ----------------------------------------------------- request handling */

/* An upload's spool file, spool_dir/upload-XXXXXX; a 503 when it cannot be
 * created. */
static void spool_open(rv_req *r)
{
    const char *dir = r->h->cfg.spool_dir;
    size_t dl = strlen(dir);

    r->spool_path = malloc(dl + 32);
    if (!r->spool_path) {
        rv_req_error(r, 503, "unavailable", NULL, "out of memory");
        return;
    }
    snprintf(r->spool_path, dl + 32, "%s/upload-XXXXXX", dir);
    r->spool_fd = mkostemp(r->spool_path, O_CLOEXEC);
    if (r->spool_fd < 0) {
        free(r->spool_path);
        r->spool_path = NULL;
        rv_req_error(r, 503, "unavailable", NULL, "cannot create a spool file: %s",
                     strerror(errno));
    }
}

/* First call: everything decided from the request line and headers. */
static void req_begin(rv_req *r)
{
    rv_http *h = r->h;
    const rv_http_config *c = &h->cfg;

    rv_http__screen(r);
    if (r->has_response)
        return;
    rv_route_find(c->routes, c->nroutes, r->method, r->path, &r->match);
    if (r->match.status == 405) {
        r->metric_route = "unmatched";
        rv_req_error(r, 405, "method_not_allowed", NULL, "%s is not allowed on %s", r->method,
                     r->path);
        return;
    }
    if (r->match.status == 404) {
        r->metric_route = "static";
        r->body_kind = RV_BODY_NONE;
        rv_http__serve_static(r);
        return;
    }
    r->route = &c->routes[r->match.index];
    r->metric_route = r->route->name;
    r->body_kind = r->route->body;
    if (r->route->scope && c->auth && rv_auth_required(c->auth)) {
        int rc = rv_auth_check(c->auth, rv_req_header(r, "Authorization"), r->route->scope,
                               r->principal, sizeof(r->principal));
        if (rc == 401) {
            rv_req_error(r, 401, "unauthorized", "Authorization",
                         "a valid bearer token is required (Authorization: Bearer rvt_...)");
            rv_req_add_header(r, "WWW-Authenticate", "Bearer realm=\"reverie\"");
            return;
        }
        if (rc != 0) {
            char need[48];
            rv_auth_scopes_str(r->route->scope, need, sizeof(need));
            rv_req_error(r, 403, "forbidden", NULL, "this token lacks the scope needed: %s", need);
            return;
        }
    }
    rv_http__check_body(r);
    if (!r->has_response && r->body_kind == RV_BODY_UPLOAD)
        spool_open(r);
}

static void body_append(rv_req *r, const char *data, size_t n)
{
    if (r->body_status) {
        r->dropped += n;
        return;
    }
    if (r->body_kind == RV_BODY_UPLOAD) {
        if (r->spool_size + n > r->limit) {
            body_fail(r, 413, "payload_too_large", "upload is over the limit of %llu bytes",
                      (unsigned long long)r->limit);
            r->dropped += n;
            return;
        }
        size_t off = 0;
        while (off < n) {
            ssize_t w = write(r->spool_fd, data + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                body_fail(r, 503, "unavailable", "cannot write the spool file: %s",
                          strerror(errno));
                return;
            }
            off += (size_t)w;
        }
        r->spool_size += n;
        return;
    }
    if (r->body_len + n > r->limit) {
        body_fail(r, 413, "payload_too_large", "body is over the limit of %llu bytes",
                  (unsigned long long)r->limit);
        r->dropped += n;
        return;
    }
    if (r->body_kind == RV_BODY_NONE) {
        r->body_len += n; /* counted against the small cap, not kept */
        return;
    }
    if (rv_buf_add(&r->body, data, n) < 0) {
        body_fail(r, 503, "unavailable", "out of memory");
        return;
    }
    r->body_len += n;
}

static void run_handler(rv_req *r)
{
    r->route->fn(r, r->h->cfg.app);
    rv_http__gzip(r);
    rv_http__bound_answer(r);
}

/* Runs and clears r's after-work (rv_req_after). */
static void run_after(rv_req *r)
{
    rv_req_after_fn fn = r->after;
    void *arg = r->after_arg;
    r->after = NULL;
    r->after_arg = NULL;
    if (fn)
        fn(arg);
}

void rv_req_after(rv_req *r, rv_req_after_fn fn, void *arg)
{
    run_after(r);
    r->after = fn;
    r->after_arg = arg;
}

static void work_main(void *arg)
{
    rv_req *r = arg;
    rv_http *h = r->h;
    struct MHD_Connection *conn = r->conn;

    run_handler(r);
    r->state = RV_REQ_DONE;
    rv_req_after_fn after = r->after;
    void *after_arg = r->after_arg;
    r->after = NULL;
    /* r belongs to the MHD thread again after the resume: touch only h. */
    MHD_resume_connection(conn);
    pthread_mutex_lock(&h->mu);
    h->suspended--;
    pthread_mutex_unlock(&h->mu);
    /* The answer is on its way; the worker finishes what can wait. */
    if (after)
        after(after_arg);
}

/* The last call: answers a body error, or runs the handler here (inline
 * routes) or hands the request to the worker pool. Returns 1 when a worker
 * has it: r belongs to that worker until it resumes the connection, so the
 * caller must not read it (not even r->state). */
static int body_done(rv_req *r)
{
    rv_http *h = r->h;

    if (r->body_status) {
        rv_req_error(r, r->body_status, r->body_code, NULL, "%s", r->body_msg);
        r->state = RV_REQ_DONE;
        return 0;
    }
    if (r->spool_fd >= 0) {
        /* Durability of the bytes is the store's job (it keeps the original);
         * the spool only has to be complete before the worker reads it. */
        close(r->spool_fd);
        r->spool_fd = -1;
    }
    if (r->route->flags & RV_ROUTE_INLINE || !h->cfg.workers) {
        run_handler(r);
        run_after(r);
        r->state = RV_REQ_DONE;
        return 0;
    }
    r->state = RV_REQ_WORK;
    pthread_mutex_lock(&h->mu);
    h->suspended++;
    pthread_mutex_unlock(&h->mu);
    MHD_suspend_connection(r->conn);
    if (rv_workers_submit(h->cfg.workers, work_main, r) != 0) {
        rv_metrics_add(h->cfg.metrics, RV_M_BUSY_REJECTS, 1);
        rv_req_error(r, 503, "busy", NULL, "the server is busy; retry shortly");
        rv_req_add_header(r, "Retry-After", "1");
        r->state = RV_REQ_DONE;
        MHD_resume_connection(r->conn);
        pthread_mutex_lock(&h->mu);
        h->suspended--;
        pthread_mutex_unlock(&h->mu);
        return 0;
    }
    if (h->cfg.metrics && h->cfg.workers)
        rv_metrics_set_busy(h->cfg.metrics, rv_workers_busy(h->cfg.workers));
    return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    rv_http *h = cls;
    rv_req *r = *con_cls;

    if (!r) {
        rv_conn *cc = rv_http__conn_of(conn);
        if (cc && cc->refused)
            return MHD_NO; /* already answered 503 */
        r = calloc(1, sizeof(*r));
        if (!r)
            return MHD_NO;
        r->h = h;
        r->conn = conn;
        r->cc = cc;
        r->spool_fd = -1;
        r->resp_fd = -1;
        clock_gettime(CLOCK_MONOTONIC, &r->t0);
        snprintf(r->method, sizeof(r->method), "%s", method);
        r->http11 = version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
        r->path = strdup(url ? url : "/");
        r->metric_route = "unmatched";
        *con_cls = r;
        pthread_mutex_lock(&h->mu);
        h->inflight++;
        pthread_mutex_unlock(&h->mu);
        if (!r->path)
            return MHD_NO;
        rv_http__collect(r);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, r->peer,
                          sizeof(r->peer));
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, r->peer,
                          sizeof(r->peer));
        }
        req_begin(r);
        if (r->has_response) {
            rv_http__conn_set(h, r->cc, RV_CONN_BUSY, 0);
            r->state = RV_REQ_DONE;
            return rv_http__queue(r);
        }
        rv_http__conn_set(h, r->cc, RV_CONN_BODY, 1);
        return MHD_YES;
    }
    if (*upload_data_size) {
        rv_http__conn_body(h, r->cc, *upload_data_size);
        if (r->state == RV_REQ_BODY)
            body_append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        /* A client that keeps sending far past the cap is cut off rather
         * than read forever. */
        if (r->dropped > r->limit + (64u << 20))
            return MHD_NO;
        return MHD_YES;
    }
    rv_http__conn_set(h, r->cc, RV_CONN_BUSY, 0);
    if (r->state == RV_REQ_BODY && body_done(r))
        return MHD_YES; /* a worker has r; it resumes the connection */
    if (r->state == RV_REQ_DONE)
        return rv_http__queue(r);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    rv_http *h = cls;
    rv_req *r = *con_cls;

    /* The connection waits for its next request: a new head deadline. */
    rv_http__conn_set(h, rv_http__conn_of(conn), RV_CONN_IDLE, 1);
    if (!r)
        return;
    *con_cls = NULL;
    int status = r->has_response ? r->status : 499; /* 499: the client went away */
    rv_metrics_request(h->cfg.metrics, r->metric_route ? r->metric_route : "unmatched",
                       r->route ? r->route->method : "OTHER", status, elapsed_s(&r->t0));
    req_free(r);
    pthread_mutex_lock(&h->mu);
    h->inflight--;
    pthread_mutex_unlock(&h->mu);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    fprintf(stderr, "reveried: http: ");
    vfprintf(stderr, fmt, ap);
}

/* ------------------------------------------------------------- daemon */

int rv_http_start(const rv_http_config *cfg, rv_http **out, rv_error *err)
{
    rv_http *h = calloc(1, sizeof(*h));
    struct sockaddr_storage ss;
    unsigned flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;

    *out = NULL;
    if (!h)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    h->cfg = *cfg;
    if (!h->cfg.bind)
        h->cfg.bind = "127.0.0.1";
    if (!h->cfg.conn_timeout_s)
        h->cfg.conn_timeout_s = 30;
    if (!h->cfg.per_ip_limit)
        h->cfg.per_ip_limit = 64;
    if (!h->cfg.conn_limit)
        h->cfg.conn_limit = 1000;
    if (!h->cfg.header_timeout_s)
        h->cfg.header_timeout_s = 10;
    if (!h->cfg.min_body_rate)
        h->cfg.min_body_rate = 1024;
    if (!h->cfg.answer_mem_one)
        h->cfg.answer_mem_one = 256u << 10;
    if (!h->cfg.answer_mem_total)
        h->cfg.answer_mem_total = 64u << 20;
    if (!h->cfg.answer_spool_cap)
        h->cfg.answer_spool_cap = 1u << 30;
    if (!h->cfg.threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        h->cfg.threads = n > 0 ? (unsigned)n : 2;
    }
    pthread_mutex_init(&h->mu, NULL);
    rv_http__guard_init(h);
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, h->cfg.bind, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)cfg->port);
        h->bind_wildcard = sin->sin_addr.s_addr == htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET6, h->cfg.bind, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)cfg->port);
        flags |= MHD_USE_IPv6;
        h->bind_wildcard = IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr);
    } else {
        rv_http__guard_free(h);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "bind address '%s' is not an IPv4 or IPv6 literal", cfg->bind);
    }
    h->d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        h, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)h->cfg.threads,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)h->cfg.conn_timeout_s,
        /* No MHD_OPTION_PER_IP_CONNECTION_LIMIT: the library refuses the
         * newcomer, so one client's idle connections locked out everyone
         * behind the same address; rv_http__on_connection closes that
         * address's longest-idle connection instead. The total is above
         * our own limit, so that the connections past ours reach
         * rv_http__on_connection (which evicts or answers 503) instead
         * of waiting in the listen backlog; libmicrohttpd splits it
         * among its threads. */
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)h->cfg.conn_limit + 256u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_LIMIT, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, rv_http__on_connection, h,
        MHD_OPTION_URI_LOG_CALLBACK, rv_http__on_uri, h, MHD_OPTION_END);
    if (!h->d) {
        int e = errno;
        rv_http__guard_free(h);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot listen on %s:%d: %s", cfg->bind,
                            cfg->port, e ? strerror(e) : "libmicrohttpd refused to start");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : cfg->port;
    rv_http__watch_start(h);
    *out = h;
    return 0;
}

int rv_http_port(const rv_http *h)
{
    return h->port;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void rv_http_stop(rv_http *h, unsigned grace_ms)
{
    if (!h)
        return;
    MHD_socket ls = MHD_quiesce_daemon(h->d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    /* Requests in flight get grace_ms; work already on the worker pool is
     * always waited for, because stopping the daemon under a suspended
     * connection leaks it and the worker would resume a freed connection. */
    for (unsigned waited = 0;; waited += 10) {
        pthread_mutex_lock(&h->mu);
        int inflight = h->inflight, suspended = h->suspended;
        pthread_mutex_unlock(&h->mu);
        if (suspended == 0 && (inflight == 0 || waited >= grace_ms))
            break;
        sleep_ms(10);
    }
    rv_http__watch_stop(h);
    MHD_stop_daemon(h->d);
    /* Every connection was notified closed by now: guard_free frees any
     * record left. */
    rv_http__guard_free(h);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* ------------------------------------------------------ handler helpers */

const char *rv_req_path(const rv_req *r)
{
    return r->path;
}

int64_t rv_req_started_ms(const rv_req *r)
{
    return (int64_t)r->t0.tv_sec * 1000 + r->t0.tv_nsec / 1000000;
}

int rv_req_client_gone(const rv_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    char c;

    if (!ci)
        return 0;
    /* Peeked, never consumed: 0 bytes is the client's FIN (libmicrohttpd
     * closes on it too), a reset an error; EAGAIN or data is a live one. */
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

const char *rv_req_param(const rv_req *r, const char *name)
{
    for (int i = 0; i < r->match.nparams; i++)
        if (strcmp(r->match.names[i], name) == 0)
            return r->match.values[i];
    return NULL;
}

const char *rv_req_query(const rv_req *r, const char *key)
{
    for (size_t i = 0; i < r->nquery; i++)
        if (strcmp(r->query[i].key, key) == 0)
            return r->query[i].value;
    return NULL;
}

const char *rv_req_header(const rv_req *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->headers[i].key, name) == 0)
            return r->headers[i].value;
    return NULL;
}

json_t *rv_req_json(rv_req *r)
{
    json_error_t je;

    if (r->body.len == 0) {
        rv_req_error(r, 400, "body_required", NULL, "a JSON request body is required");
        return NULL;
    }
    json_t *j = json_loadb(rv_buf_str(&r->body), r->body.len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        rv_req_error(r, 400, "invalid_json", NULL, "invalid JSON at line %d column %d: %s", je.line,
                     je.column, je.text);
        return NULL;
    }
    return j;
}

const char *rv_req_spool(const rv_req *r, uint64_t *size)
{
    *size = r->spool_size;
    return r->spool_path;
}

int64_t rv_req_query_int(rv_req *r, const char *key, int64_t def, int64_t max)
{
    const char *s = rv_req_query(r, key);
    char *end;

    if (!s)
        return def;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > max) {
        rv_req_error(r, 400, "invalid_parameter", key, "'%s' must be an integer between 0 and %lld",
                     key, (long long)max);
        return -1;
    }
    return v;
}
