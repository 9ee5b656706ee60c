/* HTTP layer: libmicrohttpd glue, routing, bodies, responses, static files.
 *
 * Life of a request (libmicrohttpd calls on_request several times):
 *   1. first call, headers only: route, authenticate, check Content-Type and
 *      Content-Length against the caps (413/415 go out here, before the body
 *      is read), open the spool file for uploads;
 *   2. one call per body chunk: append to the spool file or the capped JSON
 *      buffer; past a cap the rest is read and dropped, then 413;
 *   3. last call: inline routes run here; the others suspend the connection
 *      and go to the worker pool, which fills the response and resumes it;
 *   4. the call after the resume queues the response;
 *   5. on_completed records metrics and frees the request.
 *
 * Around requests, every connection has a record (on_connection) that a
 * watchdog thread checks against the client deadlines: the request head
 * within header_timeout_s, the body at min_body_rate; a connection past the
 * total limit is answered 503 and closed instead of waiting in the backlog.
 * libmicrohttpd's own error pages (a malformed Content-Length, chunked
 * encoding, a request line or header block past its memory) are replaced
 * by the JSON error shape: see MHD_queue_response below. */
#include "rv_http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "rv_auth.h"
#include "rv_buf.h"
#include "rv_jsonw.h"
#include "rv_metrics.h"
#include "rv_workers.h"

#define MAX_KV            64    /* query parameters, and headers, per request: past it 414 / 431 */
#define MAX_KV_BYTES      16384 /* bytes of the query's, and the headers', keys and values */
#define WATCH_TICK_MS     100   /* how often the watchdog checks the client deadlines */
#define REFUSED_LINGER_S  1     /* a refused connection gets this long to read its 503 */
#define MAX_RESP_HEADERS  8
#define CONN_MEMORY_LIMIT (256u * 1024u)
#define MAX_JSON_ANSWER   ((size_t)1 << 30) /* a JSON answer past this is a 503 */

/* Where a connection is with its current request, for the watchdog. */
typedef enum conn_phase {
    PH_IDLE = 0, /* no request line yet (a new or kept-alive connection) */
    PH_HEAD,     /* request line received, header block not complete */
    PH_BODY,     /* headers handled, body arriving */
    PH_BUSY,     /* being answered: the client has no deadline */
} conn_phase;

/* One open connection (MHD's socket context); in rv_http.conns while open.
 * The fd stays valid while the record is listed: libmicrohttpd notifies
 * MHD_CONNECTION_NOTIFY_CLOSED before it closes the socket. */
typedef struct rv_conn {
    struct rv_conn *prev, *next;
    int fd;
    conn_phase phase;
    struct timespec since; /* start of the current deadline */
    uint64_t body_bytes;   /* received in PH_BODY */
    int refused;           /* over the connection limit: 503 sent */
    int killed;            /* shut down by the watchdog */
} rv_conn;

struct rv_http {
    rv_http_config cfg;
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    int inflight;  /* requests with a live context */
    int suspended; /* requests handed to the worker pool */

    /* Connections and their watchdog (cmu guards conns, nconns, stop). */
    pthread_mutex_t cmu;
    pthread_cond_t ccv;
    rv_conn *conns;
    unsigned nconns;
    int watch_stop;
    pthread_t watch_tid;
    int watch_started;
    int bind_wildcard; /* bound to 0.0.0.0 or :: */
};

typedef struct kv {
    char *key, *value;
} kv;

typedef enum req_state { ST_BODY = 0, ST_WORK, ST_DONE } req_state;

struct rv_req {
    rv_http *h;
    struct MHD_Connection *conn;
    const rv_route *route;
    rv_route_match match;
    char method[8];
    char *path;
    kv query[MAX_KV];
    size_t nquery;
    kv headers[MAX_KV];
    size_t nheaders;
    size_t query_bytes, header_bytes;
    int query_over;         /* the query did not fit MAX_KV / MAX_KV_BYTES: 414 */
    int header_over;        /* the headers did not: 431 */
    char over_key[64];      /* the first key that did not fit */
    char bad_query[64];     /* a query key whose key or value is not UTF-8 text */
    int ncontent_length;    /* Content-Length headers seen */
    int has_te;             /* Transfer-Encoding seen */
    const char *cors_allow; /* the request's Origin when it is a CORS origin */
    rv_conn *cc;            /* the connection's record; NULL if untracked */
    char principal[RV_TOKEN_ID_LEN + 8];
    char peer[64];
    struct timespec t0;
    req_state state;
    const char *metric_route;

    /* Body. */
    int body_kind;
    rv_buf body;     /* a JSON body, capped at limit */
    size_t body_len; /* bytes counted against limit, kept or not */
    int spool_fd;
    char *spool_path;
    uint64_t spool_size;
    uint64_t limit;   /* cap for this body */
    uint64_t dropped; /* bytes read and dropped after an error */
    int body_status;  /* non-zero: answer this error once the body is read */
    char body_code[32];
    char body_msg[200];

    /* Response. */
    int status;
    char *resp_buf;
    size_t resp_len;
    int resp_fd;
    uint64_t resp_fd_size;
    char content_type[80];
    kv resp_headers[MAX_RESP_HEADERS];
    int nresp_headers;
    int has_response;
};

/* ---------------------------------------------------------------- routes */

/* Copies the next segment of *p (up to '/' or end) into seg; returns its
 * length, or (size_t)-1 when longer than cap-1. Advances *p past it. */
static size_t next_segment(const char **p, char *seg, size_t cap)
{
    const char *s = *p;
    size_t n = 0;

    while (s[n] && s[n] != '/')
        n++;
    *p = s + n;
    if (n >= cap)
        return (size_t)-1;
    memcpy(seg, s, n);
    seg[n] = '\0';
    return n;
}

static int match_pattern(const char *pattern, const char *path, rv_route_match *m)
{
    const char *pp = pattern, *up = path;
    char pseg[64], useg[RV_ROUTE_PARAM_MAX];

    m->nparams = 0;
    if (*pp != '/' || *up != '/')
        return 0;
    for (;;) {
        if (*pp == '\0' && *up == '\0')
            return 1;
        if (*pp != '/' || *up != '/')
            return 0;
        pp++;
        up++;
        size_t pl = next_segment(&pp, pseg, sizeof(pseg));
        size_t ul = next_segment(&up, useg, sizeof(useg));
        if (pl == (size_t)-1 || ul == (size_t)-1)
            return 0;
        if (pl >= 2 && pseg[0] == '{' && pseg[pl - 1] == '}') {
            if (ul == 0 || m->nparams >= RV_ROUTE_MAX_PARAMS)
                return 0;
            size_t nl = pl - 2 < sizeof(m->names[0]) - 1 ? pl - 2 : sizeof(m->names[0]) - 1;
            memcpy(m->names[m->nparams], pseg + 1, nl);
            m->names[m->nparams][nl] = '\0';
            memcpy(m->values[m->nparams], useg, ul + 1);
            m->nparams++;
        } else if (pl != ul || memcmp(pseg, useg, pl) != 0) {
            return 0;
        }
    }
}

void rv_route_find(const rv_route *routes, size_t n, const char *method, const char *path,
                   rv_route_match *m)
{
    int path_seen = 0;
    const char *meth = strcmp(method, "HEAD") == 0 ? "GET" : method;

    m->index = -1;
    m->status = 404;
    m->nparams = 0;
    for (size_t i = 0; i < n; i++) {
        rv_route_match tmp;
        if (!match_pattern(routes[i].pattern, path, &tmp))
            continue;
        path_seen = 1;
        if (strcmp(routes[i].method, meth) != 0)
            continue;
        *m = tmp;
        m->index = (int)i;
        m->status = 0;
        return;
    }
    m->nparams = 0;
    m->status = path_seen ? 405 : 404;
}

/* ------------------------------------------------------------- utilities */

static double elapsed_s(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ------------------------------------------------------- raw answers */

/* Set while this thread queues one of our own answers (queue_response). */
static __thread int own_queue;

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
static queue_fn real_queue_response;
static pthread_once_t real_queue_once = PTHREAD_ONCE_INIT;

static void find_real_queue(void)
{
    real_queue_response = (queue_fn)dlsym(RTLD_NEXT, "MHD_queue_response");
}

/* Writes a whole JSON error answer straight to a socket on which nothing of
 * the current request's answer has been written: best effort, never
 * blocks (a fresh socket's buffer takes a few hundred bytes). The texts
 * passed here are fixed and need no JSON escaping. */
static void raw_error(int fd, unsigned status, const char *code, const char *field, const char *msg,
                      const char *extra_headers)
{
    char body[600], buf[1200];
    const char *reason = MHD_get_reason_phrase_for(status);
    int bn =
        snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"%s%s%s}}\n",
                 code, msg, field ? ",\"field\":\"" : "", field ? field : "", field ? "\"" : "");
    if (bn < 0 || (size_t)bn >= sizeof(body))
        return;
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: "
                     "%d\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n%s\r\n%s",
                     status, reason && *reason ? reason : "Error", bn,
                     extra_headers ? extra_headers : "", body);
    if (n > 0 && (size_t)n < sizeof(buf))
        (void)send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* libmicrohttpd 0.9.75 answers some malformed requests itself, before the
 * access handler sees them, with built-in HTML pages (for a bad
 * Content-Length even with the header block written twice: its state
 * machine builds it again after the error), and has no option to change
 * them. Its internal calls go through the PLT, so this definition in the
 * program receives them; a call not made by queue_response is one of those
 * pages. The JSON error goes straight to the socket (nothing was written on
 * it yet) and MHD_NO makes libmicrohttpd close the connection, as it would
 * have after its page. Our own answers pass through unchanged. */
enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                   struct MHD_Response *response)
{
    pthread_once(&real_queue_once, find_real_queue);
    if (own_queue)
        return real_queue_response ? real_queue_response(connection, status_code, response)
                                   : MHD_NO;
    const char *code = "internal", *field = NULL;
    const char *msg = "the HTTP layer could not handle this request";
    switch (status_code) {
    case 400:
        code = "bad_request";
        msg = "the request is malformed (request line, headers, Content-Length or chunked "
              "encoding)";
        break;
    case 413:
        code = "payload_too_large";
        field = "Content-Length";
        msg = "Content-Length or a chunk size is too large";
        break;
    case 414:
        code = "uri_too_long";
        msg = "the request line is too long";
        break;
    case 431:
        code = "header_fields_too_large";
        msg = "the request headers are too large";
        break;
    case 505:
        code = "http_version_not_supported";
        msg = "only HTTP/1.0 and HTTP/1.1 are supported";
        break;
    default: break;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        raw_error(ci->connect_fd, status_code >= 400 && status_code < 600 ? status_code : 500, code,
                  field, msg, NULL);
    return MHD_NO;
}

/* ----------------------------------------------------- connections */

static rv_conn *conn_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Moves c to phase p; restart: its deadline starts now. */
static void conn_set(rv_http *h, rv_conn *c, conn_phase p, int restart)
{
    if (!c)
        return;
    pthread_mutex_lock(&h->cmu);
    c->phase = p;
    if (restart) {
        clock_gettime(CLOCK_MONOTONIC, &c->since);
        c->body_bytes = 0;
    }
    pthread_mutex_unlock(&h->cmu);
}

/* MHD_OPTION_NOTIFY_CONNECTION: keeps the connection list; a connection
 * past the limit is answered 503 at once and closed rather than left in
 * the listen backlog where every client would wait behind it. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    rv_http *h = cls;
    rv_conn *c;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        c = ci ? calloc(1, sizeof(*c)) : NULL;
        *socket_context = c;
        if (!c)
            return; /* untracked: no deadline, not counted */
        c->fd = ci->connect_fd;
        clock_gettime(CLOCK_MONOTONIC, &c->since);
        pthread_mutex_lock(&h->cmu);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        if (++h->nconns > h->cfg.conn_limit) {
            c->refused = 1;
            raw_error(c->fd, 503, "busy", NULL,
                      "the server has too many connections open; retry shortly",
                      "Retry-After: 1\r\n");
            shutdown(c->fd, SHUT_WR);
        }
        pthread_mutex_unlock(&h->cmu);
        if (c->refused)
            rv_metrics_add(h->cfg.metrics, RV_M_BUSY_REJECTS, 1);
        return;
    }
    c = *socket_context;
    *socket_context = NULL;
    if (!c)
        return;
    pthread_mutex_lock(&h->cmu);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    h->nconns--;
    pthread_mutex_unlock(&h->cmu);
    free(c);
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line is complete. The head's
 * deadline keeps running from when the connection became ready for it. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
    rv_http *h = cls;
    rv_conn *c = conn_of(mc);

    if (c) {
        pthread_mutex_lock(&h->cmu);
        if (c->phase == PH_IDLE)
            c->phase = PH_HEAD;
        pthread_mutex_unlock(&h->cmu);
    }
    return NULL;
}

/* Ends a connection from the watchdog (cmu held): an optional 408, then
 * shutdown, which libmicrohttpd sees as the client leaving and cleans up
 * on its own thread (the fd stays open until then). */
static void conn_kill(rv_conn *c, const char *msg)
{
    if (msg)
        raw_error(c->fd, 408, "request_timeout", NULL, msg, NULL);
    shutdown(c->fd, SHUT_RDWR);
    c->killed = 1;
}

static double since_s(const struct timespec *t0, const struct timespec *now)
{
    return (double)(now->tv_sec - t0->tv_sec) + (double)(now->tv_nsec - t0->tv_nsec) / 1e9;
}

/* The client deadlines of one connection (cmu held). */
static void watch_one(rv_http *h, rv_conn *c, const struct timespec *now)
{
    double el = since_s(&c->since, now);
    unsigned ht = h->cfg.header_timeout_s;
    char msg[160];

    if (c->killed)
        return;
    if (c->refused) {
        if (el >= REFUSED_LINGER_S)
            conn_kill(c, NULL);
        return;
    }
    switch (c->phase) {
    case PH_IDLE:
        /* No request started: an idle kept-alive or pre-opened connection,
         * or a request line trickled in; closed without an answer. */
        if (el >= ht)
            conn_kill(c, NULL);
        break;
    case PH_HEAD:
        if (el >= ht) {
            snprintf(msg, sizeof(msg), "the request headers did not arrive within %u s", ht);
            conn_kill(c, msg);
        }
        break;
    case PH_BODY:
        if (el >= ht && (double)c->body_bytes < (double)h->cfg.min_body_rate * el) {
            snprintf(msg, sizeof(msg),
                     "the body arrived at %.0f bytes/s, under the minimum of %u bytes/s",
                     (double)c->body_bytes / el, h->cfg.min_body_rate);
            conn_kill(c, msg);
        }
        break;
    case PH_BUSY: break;
    }
}

static void *watch_main(void *p)
{
    rv_http *h = p;
    struct timespec now, until;

    pthread_mutex_lock(&h->cmu);
    while (!h->watch_stop) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (rv_conn *c = h->conns; c; c = c->next)
            watch_one(h, c, &now);
        until = now;
        until.tv_nsec += WATCH_TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->ccv, &h->cmu, &until);
    }
    pthread_mutex_unlock(&h->cmu);
    return NULL;
}

/* ------------------------------------------------------ request values */

/* A copy of s[0..n) counted against *used (capped at MAX_KV_BYTES); NULL
 * past the cap or out of memory. */
static char *xstrdup_capped(size_t *used, const char *s, size_t n)
{
    if (*used + n + 1 > MAX_KV_BYTES)
        return NULL;
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    *used += n + 1;
    return d;
}

static void note_over(rv_req *r, int *flag, const char *key)
{
    if (!*flag && !r->query_over && !r->header_over)
        snprintf(r->over_key, sizeof(r->over_key), "%s", key ? key : "");
    *flag = 1;
}

/* Query parameters, decoded by libmicrohttpd: kept up to MAX_KV entries and
 * MAX_KV_BYTES (past either the request is answered 414, never served with
 * parameters missing). A key or value with a NUL (%00) or bytes that are not
 * UTF-8 is remembered for a 400: such text must not reach the database. */
static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size)
{
    rv_req *r = cls;

    if (!key)
        return MHD_YES;
    if (!value)
        value_size = 0;
    if (!r->bad_query[0] &&
        (strlen(key) != key_size || rv_jsonw_utf8_valid(key, key_size) != key_size ||
         (value &&
          (strlen(value) != value_size || rv_jsonw_utf8_valid(value, value_size) != value_size)))) {
        /* Name the parameter, in a form that is itself valid text. */
        size_t ok = rv_jsonw_utf8_valid(key, strnlen(key, key_size));
        if (ok == key_size && ok > 0 && ok < sizeof(r->bad_query))
            memcpy(r->bad_query, key, ok + 1);
        else
            snprintf(r->bad_query, sizeof(r->bad_query), "query");
    }
    if (r->nquery >= MAX_KV) {
        note_over(r, &r->query_over, key);
        return MHD_YES;
    }
    char *k = xstrdup_capped(&r->query_bytes, key, strlen(key));
    char *v =
        k ? xstrdup_capped(&r->query_bytes, value ? value : "", value ? strlen(value) : 0) : NULL;
    if (!k || !v) {
        free(k);
        free(v);
        note_over(r, &r->query_over, key);
        return MHD_YES;
    }
    r->query[r->nquery++] = (kv){k, v};
    return MHD_YES;
}

/* Request headers: kept up to MAX_KV entries and MAX_KV_BYTES (past either
 * 431). Cookie is neither kept nor counted: no endpoint reads it, and a
 * browser sends every loopback cookie of every local application. */
static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    rv_req *r = cls;

    if (!key || !value)
        return MHD_YES;
    if (strcasecmp(key, "Content-Length") == 0)
        r->ncontent_length++;
    else if (strcasecmp(key, "Transfer-Encoding") == 0)
        r->has_te = 1;
    else if (strcasecmp(key, "Cookie") == 0)
        return MHD_YES;
    if (r->nheaders >= MAX_KV) {
        note_over(r, &r->header_over, key);
        return MHD_YES;
    }
    char *k = xstrdup_capped(&r->header_bytes, key, strlen(key));
    char *v = k ? xstrdup_capped(&r->header_bytes, value, strlen(value)) : NULL;
    if (!k || !v) {
        free(k);
        free(v);
        note_over(r, &r->header_over, key);
        return MHD_YES;
    }
    r->headers[r->nheaders++] = (kv){k, v};
    return MHD_YES;
}

static void clear_response(rv_req *r)
{
    free(r->resp_buf);
    r->resp_buf = NULL;
    r->resp_len = 0;
    if (r->resp_fd >= 0)
        close(r->resp_fd);
    r->resp_fd = -1;
}

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
    clear_response(r);
    rv_buf_free(&r->body);
    free(r->path);
    free(r);
}

/* Media type without parameters, lowercased, into out. */
static void media_type(const char *ct, char *out, size_t cap)
{
    size_t n = 0;

    if (!ct)
        ct = "";
    while (*ct == ' ')
        ct++;
    while (ct[n] && ct[n] != ';' && ct[n] != ' ' && n + 1 < cap) {
        out[n] = (char)tolower((unsigned char)ct[n]);
        n++;
    }
    out[n] = '\0';
}

/* ----------------------------------------------------- request handling */

static void check_body_headers(rv_req *r)
{
    const rv_http_config *c = &r->h->cfg;
    const char *cl = rv_req_header(r, "Content-Length");
    char mt[64];

    media_type(rv_req_header(r, "Content-Type"), mt, sizeof(mt));
    r->limit = r->body_kind == RV_BODY_UPLOAD ? c->upload_cap
               : r->body_kind == RV_BODY_JSON ? c->json_body_cap
                                              : (uint64_t)64 * 1024;
    rv_buf_init(&r->body, r->limit);
    int has_body = r->has_te;
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno == 0 && *end == '\0' && v > r->limit) {
            rv_req_error(r, 413, "payload_too_large", NULL,
                         "body of %llu bytes is over the limit of %llu bytes", v,
                         (unsigned long long)r->limit);
            return;
        }
        has_body |= v > 0;
    }
    /* A body that changes something must say what it is: a page on another
     * site can send a body with no type (or a form type) without the
     * browser asking this server first, but not application/json or the
     * trace types. */
    int mutating = strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0;
    if (mutating && has_body && !mt[0]) {
        rv_req_error(r, 415, "unsupported_media_type", "Content-Type",
                     "a request body needs a Content-Type: application/json%s",
                     r->body_kind == RV_BODY_UPLOAD
                         ? " or, for traces, application/gzip or application/octet-stream"
                         : "");
        return;
    }
    if (r->body_kind == RV_BODY_UPLOAD) {
        if (mt[0] && strcmp(mt, "application/json") != 0 && strcmp(mt, "application/gzip") != 0 &&
            strcmp(mt, "application/x-gzip") != 0 && strcmp(mt, "application/octet-stream") != 0) {
            rv_req_error(r, 415, "unsupported_media_type", "Content-Type",
                         "Content-Type '%s' is not accepted for traces; send application/json "
                         "(optionally with Content-Encoding: gzip) or application/gzip",
                         mt);
            return;
        }
        const char *ce = rv_req_header(r, "Content-Encoding");
        if (ce && strcasecmp(ce, "gzip") != 0 && strcasecmp(ce, "identity") != 0) {
            rv_req_error(r, 415, "unsupported_media_type", "Content-Encoding",
                         "Content-Encoding '%s' is not supported; use gzip or none", ce);
            return;
        }
        size_t dl = strlen(c->spool_dir);
        r->spool_path = malloc(dl + 32);
        if (!r->spool_path) {
            rv_req_error(r, 503, "unavailable", NULL, "out of memory");
            return;
        }
        snprintf(r->spool_path, dl + 32, "%s/upload-XXXXXX", c->spool_dir);
        r->spool_fd = mkostemp(r->spool_path, O_CLOEXEC);
        if (r->spool_fd < 0) {
            free(r->spool_path);
            r->spool_path = NULL;
            rv_req_error(r, 503, "unavailable", NULL, "cannot create a spool file: %s",
                         strerror(errno));
        }
    } else if (r->body_kind == RV_BODY_JSON) {
        if (mt[0] && strcmp(mt, "application/json") != 0) {
            rv_req_error(r, 415, "unsupported_media_type", "Content-Type",
                         "Content-Type '%s' is not accepted here; send application/json", mt);
        }
    } else if (mutating && has_body && strcmp(mt, "application/json") != 0) {
        rv_req_error(r, 415, "unsupported_media_type", "Content-Type",
                     "Content-Type '%s' is not accepted here; send application/json", mt);
    }
}

static void serve_static(rv_req *r)
{
    const char *root = r->h->cfg.web_root;
    const char *p = r->path;
    char file[4096];
    struct stat st;

    if (!root || (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) ||
        strncmp(p, "/v1/", 4) == 0 || strcmp(p, "/v1") == 0) {
        rv_req_error(r, 404, "not_found", NULL, "no such endpoint: %s %s", r->method, p);
        return;
    }
    if (!rv_http_path_safe(p)) {
        rv_req_error(r, 404, "not_found", NULL, "no such file");
        return;
    }
    const char *rel = p + 1;
    if (*rel == '\0' || p[strlen(p) - 1] == '/')
        snprintf(file, sizeof(file), "%s/%sindex.html", root, rel);
    else
        snprintf(file, sizeof(file), "%s/%s", root, rel);
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        /* Dashboard routes ("/traces/abc") fall back to index.html; paths that
         * name a file (with an extension) are a plain 404. */
        const char *last = strrchr(p, '/');
        if (last && strchr(last, '.')) {
            rv_req_error(r, 404, "not_found", NULL, "no such file: %s", p);
            return;
        }
        snprintf(file, sizeof(file), "%s/index.html", root);
        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0)
                close(fd);
            rv_req_error(r, 404, "not_found", NULL, "no such file: %s", p);
            return;
        }
    }
    rv_req_respond_fd(r, 200, rv_http_mime(file), fd, (uint64_t)st.st_size);
    rv_req_add_header(r, "Cache-Control", "no-cache");
}

/* The name in a Host value, lowercased, without the port or a trailing
 * dot, into out ("[::1]:8080" -> "::1", "LocalHost.:80" -> "localhost").
 * 0 when it is not host[:port] or [v6][:port]. */
static int host_name(const char *v, char *out, size_t cap)
{
    const char *name = v, *rest;
    size_t n;

    if (*v == '[') {
        const char *e = strchr(v, ']');
        if (!e)
            return 0;
        name = v + 1;
        n = (size_t)(e - name);
        rest = e + 1;
    } else {
        n = strcspn(v, ":");
        rest = v + n;
    }
    if (*rest == ':') {
        rest++;
        if (!*rest || strspn(rest, "0123456789") != strlen(rest))
            return 0;
    } else if (*rest) {
        return 0;
    }
    if (n > 0 && name[n - 1] == '.')
        n--;
    if (n == 0 || n >= cap)
        return 0;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)tolower((unsigned char)name[i]);
    out[n] = '\0';
    return 1;
}

/* Whether a request may carry this Host (NULL: an HTTP/1.0 request without
 * one, which no browser sends). DNS rebinding hands a browser page this
 * server under the attacker's name, so names are what is checked: loopback
 * names and addresses, the bind address, any IP literal on a wildcard bind,
 * and the configured names. The port is not compared (docker -p and ssh -L
 * change it). */
static int host_allowed(const rv_http *h, const char *host)
{
    char name[256];
    unsigned char a[16], b[16];

    if (!host)
        return 1;
    for (size_t i = 0; i < h->cfg.nallowed_hosts; i++) {
        const char *ok = h->cfg.allowed_hosts[i];
        if (strcmp(ok, "*") == 0 || strcasecmp(ok, host) == 0)
            return 1;
    }
    if (!host_name(host, name, sizeof(name)))
        return 0;
    for (size_t i = 0; i < h->cfg.nallowed_hosts; i++)
        if (strcasecmp(h->cfg.allowed_hosts[i], name) == 0)
            return 1;
    if (strcmp(name, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, name, a) == 1)
        return a[0] == 127 || h->bind_wildcard ||
               (inet_pton(AF_INET, h->cfg.bind, b) == 1 && memcmp(a, b, 4) == 0);
    if (inet_pton(AF_INET6, name, a) == 1)
        return IN6_IS_ADDR_LOOPBACK((struct in6_addr *)a) || h->bind_wildcard ||
               (inet_pton(AF_INET6, h->cfg.bind, b) == 1 && memcmp(a, b, 16) == 0);
    return 0;
}

/* The configured CORS origin equal to the request's Origin, or NULL. */
static const char *cors_match(const rv_http *h, const char *origin)
{
    for (size_t i = 0; origin && i < h->cfg.ncors_origins; i++)
        if (strcasecmp(h->cfg.cors_origins[i], origin) == 0)
            return h->cfg.cors_origins[i];
    return NULL;
}

/* The checks before routing: what the request line and headers must
 * satisfy whatever the endpoint. Sets an error on r when one fails. */
static void req_screen(rv_req *r)
{
    rv_http *h = r->h;

    if (r->query_over) {
        rv_req_error(r, 414, "uri_too_long", r->over_key[0] ? r->over_key : "query",
                     "the query string is over the limit of %d parameters or %d bytes", MAX_KV,
                     MAX_KV_BYTES);
        return;
    }
    if (r->header_over) {
        rv_req_error(r, 431, "header_fields_too_large", r->over_key[0] ? r->over_key : NULL,
                     "the request headers are over the limit of %d headers or %d bytes", MAX_KV,
                     MAX_KV_BYTES);
        return;
    }
    /* Two lengths, or a length and chunks, are read differently by
     * different parsers (request smuggling): neither is served. */
    if (r->ncontent_length > 1) {
        rv_req_error(r, 400, "bad_request", "Content-Length",
                     "the request has more than one Content-Length header");
        return;
    }
    if (r->ncontent_length && r->has_te) {
        rv_req_error(r, 400, "bad_request", "Transfer-Encoding",
                     "the request has both Transfer-Encoding and Content-Length");
        return;
    }
    const char *host = rv_req_header(r, "Host");
    if (!host_allowed(h, host)) {
        rv_req_error(r, 421, "host_not_allowed", "Host",
                     "this server does not answer to the Host in the request; start reveried "
                     "with --allowed-host NAME (or REVERIE_ALLOWED_HOSTS) to allow a name");
        return;
    }
    if (r->bad_query[0]) {
        rv_req_error(r, 400, "invalid_parameter", r->bad_query,
                     "query parameter '%s' is not valid UTF-8 text (or holds a NUL byte)",
                     r->bad_query);
        return;
    }
    r->cors_allow = cors_match(h, rv_req_header(r, "Origin"));
    if (r->cors_allow && strcmp(r->method, "OPTIONS") == 0 &&
        rv_req_header(r, "Access-Control-Request-Method")) {
        /* A CORS preflight from a configured origin. */
        r->metric_route = "preflight";
        rv_req_respond_buf(r, 204, NULL, NULL, 0);
        rv_req_add_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE");
        rv_req_add_header(r, "Access-Control-Allow-Headers",
                          "Authorization, Content-Type, Content-Encoding, X-Reverie-Job, "
                          "X-Reverie-Rank, X-Reverie-World-Size, X-Reverie-Tags");
        rv_req_add_header(r, "Access-Control-Max-Age", "600");
    }
}

/* First call: everything decided from the request line and headers. */
static void req_begin(rv_req *r)
{
    rv_http *h = r->h;
    const rv_http_config *c = &h->cfg;

    req_screen(r);
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
        serve_static(r);
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
    check_body_headers(r);
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

static enum MHD_Result queue_response(rv_req *r)
{
    struct MHD_Response *resp;

    if (!r->has_response)
        rv_req_error(r, 500, "internal", NULL, "the handler produced no response");
    if (r->resp_fd >= 0) {
        resp = MHD_create_response_from_fd64(r->resp_fd_size, r->resp_fd);
        if (resp)
            r->resp_fd = -1; /* MHD closes it */
    } else {
        resp = MHD_create_response_from_buffer(r->resp_len, r->resp_buf, MHD_RESPMEM_MUST_FREE);
        if (resp)
            r->resp_buf = NULL; /* MHD frees it */
    }
    if (!resp)
        return MHD_NO;
    if (r->content_type[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    for (int i = 0; i < r->nresp_headers; i++)
        MHD_add_response_header(resp, r->resp_headers[i].key, r->resp_headers[i].value);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->cors_allow) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->cors_allow);
        MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                                "Location, Retry-After, Content-Disposition, WWW-Authenticate");
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    own_queue = 1;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    own_queue = 0;
    MHD_destroy_response(resp);
    return ret;
}

/* Whether the client takes gzip: "gzip" in Accept-Encoding, not q=0. */
static int accepts_gzip(const rv_req *r)
{
    const char *ae = rv_req_header(r, "Accept-Encoding");
    const char *g = ae ? strstr(ae, "gzip") : NULL;
    if (!g)
        return 0;
    const char *q = strchr(g, ';');
    const char *comma = strchr(g, ',');
    if (q && (!comma || q < comma)) {
        q++;
        while (*q == ' ')
            q++;
        if (strncmp(q, "q=0", 3) == 0 &&
            (q[3] == '\0' || q[3] == ',' || q[3] == ' ' || strncmp(q + 3, ".0", 2) == 0))
            return 0;
    }
    return 1;
}

/* Compresses a JSON or text answer of 1 KiB or more with gzip when the
 * client accepts it (a timeline of 5 MB becomes ~230 KB). Runs where the
 * handler ran, so big answers are compressed on a worker, not on the
 * event loop. On any failure the answer goes out as it is. */
static void maybe_gzip(rv_req *r)
{
    if (!r->has_response || !r->resp_buf || r->resp_len < 1024 || r->resp_len > (1u << 30) ||
        !accepts_gzip(r))
        return;
    if (strncmp(r->content_type, "application/json", 16) != 0 &&
        strncmp(r->content_type, "text/", 5) != 0)
        return;
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return;
    uLong bound = deflateBound(&zs, (uLong)r->resp_len);
    char *out = malloc(bound);
    if (!out) {
        deflateEnd(&zs);
        return;
    }
    zs.next_in = (Bytef *)r->resp_buf;
    zs.avail_in = (uInt)r->resp_len;
    zs.next_out = (Bytef *)out;
    zs.avail_out = (uInt)bound;
    int rc = deflate(&zs, Z_FINISH);
    size_t n = zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END || n >= r->resp_len) {
        free(out);
        return;
    }
    free(r->resp_buf);
    r->resp_buf = out;
    r->resp_len = n;
    rv_req_add_header(r, "Content-Encoding", "gzip");
    rv_req_add_header(r, "Vary", "Accept-Encoding");
}

static void run_handler(rv_req *r)
{
    r->route->fn(r, r->h->cfg.app);
    maybe_gzip(r);
}

static void work_main(void *arg)
{
    rv_req *r = arg;
    rv_http *h = r->h;
    struct MHD_Connection *conn = r->conn;

    run_handler(r);
    r->state = ST_DONE;
    /* r belongs to the MHD thread again after the resume: touch only h. */
    MHD_resume_connection(conn);
    pthread_mutex_lock(&h->mu);
    h->suspended--;
    pthread_mutex_unlock(&h->mu);
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
        r->state = ST_DONE;
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
        r->state = ST_DONE;
        return 0;
    }
    r->state = ST_WORK;
    pthread_mutex_lock(&h->mu);
    h->suspended++;
    pthread_mutex_unlock(&h->mu);
    MHD_suspend_connection(r->conn);
    if (rv_workers_submit(h->cfg.workers, work_main, r) != 0) {
        rv_metrics_add(h->cfg.metrics, RV_M_BUSY_REJECTS, 1);
        rv_req_error(r, 503, "busy", NULL, "the server is busy; retry shortly");
        rv_req_add_header(r, "Retry-After", "1");
        r->state = ST_DONE;
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
        rv_conn *cc = conn_of(conn);
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
        r->path = strdup(url ? url : "/");
        r->metric_route = "unmatched";
        *con_cls = r;
        pthread_mutex_lock(&h->mu);
        h->inflight++;
        pthread_mutex_unlock(&h->mu);
        if (!r->path)
            return MHD_NO;
        MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, collect_query, r);
        MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, r);
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
            conn_set(h, r->cc, PH_BUSY, 0);
            r->state = ST_DONE;
            return queue_response(r);
        }
        conn_set(h, r->cc, PH_BODY, 1);
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (r->cc) {
            pthread_mutex_lock(&h->cmu);
            r->cc->body_bytes += *upload_data_size;
            pthread_mutex_unlock(&h->cmu);
        }
        if (r->state == ST_BODY)
            body_append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        /* A client that keeps sending far past the cap is cut off rather
         * than read forever. */
        if (r->dropped > r->limit + (64u << 20))
            return MHD_NO;
        return MHD_YES;
    }
    conn_set(h, r->cc, PH_BUSY, 0);
    if (r->state == ST_BODY && body_done(r))
        return MHD_YES; /* a worker has r; it resumes the connection */
    if (r->state == ST_DONE)
        return queue_response(r);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    rv_http *h = cls;
    rv_req *r = *con_cls;

    /* The connection waits for its next request: a new head deadline. */
    conn_set(h, conn_of(conn), PH_IDLE, 1);
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
    pthread_once(&real_queue_once, find_real_queue);
    if (!real_queue_response) {
        free(h);
        return rv_error_set(err, RV_ERR_INTERNAL, -1, -1,
                            "libmicrohttpd's MHD_queue_response cannot be found (dlsym)");
    }
    if (!h->cfg.threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        h->cfg.threads = n > 0 ? (unsigned)n : 2;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->cmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->ccv, &ca);
    pthread_condattr_destroy(&ca);
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
        pthread_cond_destroy(&h->ccv);
        pthread_mutex_destroy(&h->cmu);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "bind address '%s' is not an IPv4 or IPv6 literal", cfg->bind);
    }
    h->d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        h, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)h->cfg.threads,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)h->cfg.conn_timeout_s,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)h->cfg.per_ip_limit,
        /* Above our own limit, so that the connections past
         * ours reach on_connection (which answers them
         * 503) instead of waiting in the listen backlog;
         * libmicrohttpd splits it among its threads. */
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)h->cfg.conn_limit + 256u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_LIMIT, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_END);
    if (!h->d) {
        int e = errno;
        pthread_cond_destroy(&h->ccv);
        pthread_mutex_destroy(&h->cmu);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot listen on %s:%d: %s", cfg->bind,
                            cfg->port, e ? strerror(e) : "libmicrohttpd refused to start");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : cfg->port;
    if (pthread_create(&h->watch_tid, NULL, watch_main, h) == 0)
        h->watch_started = 1;
    else
        fprintf(stderr, "reveried: http: no watchdog thread; client deadlines are off\n");
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
    if (h->watch_started) {
        pthread_mutex_lock(&h->cmu);
        h->watch_stop = 1;
        pthread_cond_signal(&h->ccv);
        pthread_mutex_unlock(&h->cmu);
        pthread_join(h->watch_tid, NULL);
    }
    MHD_stop_daemon(h->d);
    /* Every connection was notified closed by now; free any record left. */
    while (h->conns) {
        rv_conn *c = h->conns;
        h->conns = c->next;
        free(c);
    }
    pthread_cond_destroy(&h->ccv);
    pthread_mutex_destroy(&h->cmu);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* ------------------------------------------------------ handler helpers */

const char *rv_req_path(const rv_req *r)
{
    return r->path;
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

void rv_req_respond_buf(rv_req *r, int status, const char *content_type, char *buf, size_t len)
{
    clear_response(r);
    r->status = status;
    r->resp_buf = buf;
    r->resp_len = buf ? len : 0;
    snprintf(r->content_type, sizeof(r->content_type), "%s", content_type ? content_type : "");
    r->has_response = 1;
}

void rv_req_respond_fd(rv_req *r, int status, const char *content_type, int fd, uint64_t size)
{
    clear_response(r);
    r->status = status;
    r->resp_fd = fd;
    r->resp_fd_size = size;
    snprintf(r->content_type, sizeof(r->content_type), "%s", content_type ? content_type : "");
    r->has_response = 1;
}

/* json_dump_callback's sink: appends to an rv_buf, failing past its cap. */
static int dump_to_buf(const char *p, size_t n, void *ud)
{
    return rv_buf_add(ud, p, n) == 0 ? 0 : -1;
}

void rv_req_respond_json(rv_req *r, int status, json_t *body)
{
    rv_buf out = RV_BUF_INIT(MAX_JSON_ANSWER);
    if (!body)
        body = json_object();
    int rc = body ? json_dump_callback(body, dump_to_buf, &out, JSON_COMPACT) : -1;
    json_decref(body);
    /* Newline-terminated so that `curl` output ends cleanly in a terminal. */
    size_t n = 0;
    char *s = rc == 0 && rv_buf_addc(&out, '\n') == 0 ? rv_buf_take(&out, &n) : NULL;
    rv_buf_free(&out);
    if (!s) {
        static const char oom[] = "{\"error\":{\"code\":\"unavailable\",\"message\":\"out of "
                                  "memory\"}}";
        char *b = strdup(oom);
        rv_req_respond_buf(r, 503, "application/json", b, b ? sizeof(oom) - 1 : 0);
        return;
    }
    rv_req_respond_buf(r, status, "application/json", s, n);
}

void rv_req_error(rv_req *r, int status, const char *code, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s,s:s}", "code", code, "message", msg);
    if (e && field && *field)
        json_object_set_new(e, "field", json_string(field));
    rv_req_respond_json(r, status, e ? json_pack("{s:o}", "error", e) : NULL);
}

void rv_req_error_rv(rv_req *r, const rv_error *e)
{
    int status;
    char where[96] = "";

    switch (e->code) {
    case RV_ERR_PARSE:
    case RV_ERR_INVALID:
    case RV_ERR_UNSUPPORTED: status = 400; break;
    /* A limit the client can fix: the body's size (413), else the field
     * that asks for too much (422). */
    case RV_ERR_LIMIT: status = e->field[0] ? 422 : 413; break;
    case RV_ERR_NOTFOUND: status = 404; break;
    /* This request's budget ran out (or memory did): retryable. */
    case RV_ERR_NOMEM:
    case RV_ERR_BUDGET: status = 503; break;
    default: status = 500; break;
    }
    if (e->offset >= 0 && e->event_index >= 0)
        snprintf(where, sizeof(where), " (at byte %lld, event %lld)", (long long)e->offset,
                 (long long)e->event_index);
    else if (e->offset >= 0)
        snprintf(where, sizeof(where), " (at byte %lld)", (long long)e->offset);
    else if (e->event_index >= 0)
        snprintf(where, sizeof(where), " (at event %lld)", (long long)e->event_index);
    const char *msg = e->message[0] ? e->message : rv_err_name(e->code);
    /* The reader already says where in most messages. */
    if (strstr(msg, "byte ") || strstr(msg, "event "))
        where[0] = '\0';
    /* Internal failures keep their detail in the log, not in the answer. */
    if (status == 500) {
        fprintf(stderr, "reveried: %s %s: %s%s\n", r->method, r->path, msg, where);
        rv_req_error(r, 500, "internal", NULL, "internal error; see the server log");
        return;
    }
    rv_req_error(r, status, rv_err_name(e->code), e->field[0] ? e->field : NULL, "%s%s", msg,
                 where);
}

void rv_req_add_header(rv_req *r, const char *name, const char *value)
{
    if (r->nresp_headers >= MAX_RESP_HEADERS)
        return;
    char *k = strdup(name), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return;
    }
    r->resp_headers[r->nresp_headers++] = (kv){k, v};
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

const char *rv_http_mime(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".htm", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
        {".map", "application/json"},
        {".wasm", "application/wasm"},
        {".woff2", "font/woff2"},
        {".yaml", "application/yaml"},
    };
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');

    if (!dot || (slash && dot < slash))
        return "application/octet-stream";
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcasecmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

int rv_http_path_safe(const char *path)
{
    const char *p = path;

    if (!p || *p != '/' || strlen(p) > 1024)
        return 0;
    while (*p) {
        if (*p == '\\' || (unsigned char)*p < 0x20)
            return 0;
        if (*p == '/') {
            const char *s = p + 1;
            size_t n = strcspn(s, "/");
            /* "..", "." and hidden files never map to disk. */
            if (n > 0 && s[0] == '.')
                return 0;
            if (n == 0 && s[0] == '/')
                return 0;
        }
        p++;
    }
    return 1;
}
