/* HTTP layer: what every client is held to, whatever the endpoint.
 *
 * Connections: every open connection has a record (on_connection) that a
 * watchdog thread checks against the client deadlines: the request head
 * within header_timeout_s, the body at min_body_rate. A connection past the
 * total limit is answered 503 and closed instead of waiting in the backlog.
 *
 * Requests: the query and header caps (414 / 431), request smuggling
 * (two lengths, a length and chunks), the Host check against DNS
 * rebinding, query text that is not UTF-8, CORS origins and preflights,
 * and the body's Content-Length, Content-Type and Content-Encoding
 * against what the route takes (413 / 415 before the body is read). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "rv_http_internal.h"
#include "util/rv_jsonw.h"
#include "rv_metrics.h"

#define WATCH_TICK_MS    100 /* how often the watchdog checks the client deadlines */
#define REFUSED_LINGER_S 1   /* a refused connection gets this long to read its 503 */

/* ----------------------------------------------------- connections */

void rv_http__guard_init(rv_http *h)
{
    pthread_condattr_t ca;

    pthread_mutex_init(&h->cmu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->ccv, &ca);
    pthread_condattr_destroy(&ca);
}

void rv_http__guard_free(rv_http *h)
{
    while (h->conns) {
        rv_conn *c = h->conns;
        h->conns = c->next;
        free(c);
    }
    pthread_cond_destroy(&h->ccv);
    pthread_mutex_destroy(&h->cmu);
}

rv_conn *rv_http__conn_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void rv_http__conn_set(rv_http *h, rv_conn *c, rv_conn_phase p, int restart)
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

void rv_http__conn_body(rv_http *h, rv_conn *c, size_t n)
{
    if (!c)
        return;
    pthread_mutex_lock(&h->cmu);
    c->body_bytes += n;
    pthread_mutex_unlock(&h->cmu);
}

/* The client's address of mc into c (IPv4-mapped IPv6 as IPv4), so that
 * connections are counted per address; left unknown (never limited per
 * address) when libmicrohttpd gives none. */
static void conn_addr(struct MHD_Connection *mc, rv_conn *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    if (!sa)
        return;
    if (sa->sa_family == AF_INET) {
        memcpy(c->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        c->addr_len = 4;
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            memcpy(c->addr, a6->s6_addr + 12, 4);
            c->addr_len = 4;
        } else {
            memcpy(c->addr, a6->s6_addr, 16);
            c->addr_len = 16;
        }
    }
}

static int same_addr(const rv_conn *a, const rv_conn *b)
{
    return a->addr_len && a->addr_len == b->addr_len && memcmp(a->addr, b->addr, a->addr_len) == 0;
}

static int older(const rv_conn *a, const rv_conn *b)
{
    return !b || a->since.tv_sec < b->since.tv_sec ||
           (a->since.tv_sec == b->since.tv_sec && a->since.tv_nsec < b->since.tv_nsec);
}

/* Makes room for the new connection c (cmu held): past the per-address
 * limit the longest-idle connection of c's address is closed, past the
 * total limit the longest-idle of any; idle means no request yet or a
 * request head still arriving (nothing is being worked on). Returns 0,
 * or -1 when every connection that counts is working: c is refused. */
static int conn_admit(rv_http *h, rv_conn *c)
{
    unsigned live = 0, same = 0;
    rv_conn *idle_same = NULL, *idle_any = NULL, *victim = NULL;

    for (rv_conn *x = h->conns; x; x = x->next) {
        if (x == c || x->killed || x->refused)
            continue;
        int s = same_addr(x, c);
        live++;
        same += (unsigned)s;
        if (x->phase != RV_CONN_IDLE && x->phase != RV_CONN_HEAD)
            continue;
        if (older(x, idle_any))
            idle_any = x;
        if (s && older(x, idle_same))
            idle_same = x;
    }
    if (c->addr_len && same >= h->cfg.per_ip_limit)
        victim = idle_same;
    else if (live >= h->cfg.conn_limit)
        victim = idle_any;
    else
        return 0;
    if (!victim)
        return -1;
    /* A head in progress is told why; an idle connection is closed as
     * an idle keep-alive connection is, which clients retry. */
    if (victim->phase == RV_CONN_HEAD)
        rv_http__raw_error(victim->fd, 503, "busy", NULL,
                           "the connection was closed for another one: too many connections "
                           "from this address, or in all; retry shortly",
                           "Retry-After: 1\r\n");
    shutdown(victim->fd, SHUT_RDWR);
    victim->killed = 1;
    return 0;
}

/* MHD_OPTION_NOTIFY_CONNECTION: keeps the connection list; a connection
 * past a limit takes the place of the longest-idle one (conn_admit), or
 * when none is idle is answered 503 at once and closed rather than left
 * in the listen backlog where every client would wait behind it. */
void rv_http__on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
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
        conn_addr(mc, c);
        clock_gettime(CLOCK_MONOTONIC, &c->since);
        pthread_mutex_lock(&h->cmu);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        h->nconns++;
        if (conn_admit(h, c) != 0) {
            c->refused = 1;
            rv_http__raw_error(c->fd, 503, "busy", NULL,
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
void *rv_http__on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
    rv_http *h = cls;
    rv_conn *c = rv_http__conn_of(mc);

    if (c) {
        pthread_mutex_lock(&h->cmu);
        if (c->phase == RV_CONN_IDLE)
            c->phase = RV_CONN_HEAD;
        pthread_mutex_unlock(&h->cmu);
    }
    return NULL;
}

/* ------------------------------------------------------- watchdog */

/* Ends a connection from the watchdog (cmu held): an optional 408, then
 * shutdown, which libmicrohttpd sees as the client leaving and cleans up
 * on its own thread (the fd stays open until then). */
static void conn_kill(rv_conn *c, const char *msg)
{
    if (msg)
        rv_http__raw_error(c->fd, 408, "request_timeout", NULL, msg, NULL);
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
    case RV_CONN_IDLE:
        /* No request started: an idle kept-alive or pre-opened connection,
         * or a request line trickled in; closed without an answer. */
        if (el >= ht)
            conn_kill(c, NULL);
        break;
    case RV_CONN_HEAD:
        if (el >= ht) {
            snprintf(msg, sizeof(msg), "the request headers did not arrive within %u s", ht);
            conn_kill(c, msg);
        }
        break;
    case RV_CONN_BODY:
        if (el >= ht && (double)c->body_bytes < (double)h->cfg.min_body_rate * el) {
            snprintf(msg, sizeof(msg),
                     "the body arrived at %.0f bytes/s, under the minimum of %u bytes/s",
                     (double)c->body_bytes / el, h->cfg.min_body_rate);
            conn_kill(c, msg);
        }
        break;
    case RV_CONN_BUSY: break;
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

void rv_http__watch_start(rv_http *h)
{
    if (pthread_create(&h->watch_tid, NULL, watch_main, h) == 0)
        h->watch_started = 1;
    else
        fprintf(stderr, "reveried: http: no watchdog thread; client deadlines are off\n");
}

void rv_http__watch_stop(rv_http *h)
{
    if (!h->watch_started)
        return;
    pthread_mutex_lock(&h->cmu);
    h->watch_stop = 1;
    pthread_cond_signal(&h->ccv);
    pthread_mutex_unlock(&h->cmu);
    pthread_join(h->watch_tid, NULL);
}

/* ------------------------------------------------------ request values */

/* A copy of s[0..n) counted against *used (capped at RV_HTTP_MAX_KV_BYTES);
 * NULL past the cap or out of memory. */
static char *xstrdup_capped(size_t *used, const char *s, size_t n)
{
    if (*used + n + 1 > RV_HTTP_MAX_KV_BYTES)
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

/* Query parameters, decoded by libmicrohttpd: kept up to RV_HTTP_MAX_KV
 * entries and RV_HTTP_MAX_KV_BYTES (past either the request is answered 414,
 * never served with parameters missing). A key or value with a NUL (%00) or
 * bytes that are not UTF-8 is remembered for a 400: such text must not
 * reach the database. */
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
    if (r->nquery >= RV_HTTP_MAX_KV) {
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
    r->query[r->nquery++] = (rv_http_kv){k, v};
    return MHD_YES;
}

/* RFC 9110 token characters, the only ones a header name may have. */
static int is_tchar(unsigned char ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Remembers a header name that is not a token: whitespace before the
 * colon ("Transfer-Encoding : chunked") or a folded line, which
 * libmicrohttpd 0.9.75 joins onto the name ("Transfer-Encoding:" CRLF
 * " chunked" reaches us as the name "Transfer-Encodingchunked"). Such a
 * name that starts with a framing header's is named as that header. */
static void check_name(rv_req *r, const char *key)
{
    static const char *const framing[] = {"Transfer-Encoding", "Content-Length", "Host"};
    size_t n = strlen(key), ok = 0;

    while (ok < n && is_tchar((unsigned char)key[ok]))
        ok++;
    for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++) {
        size_t fl = strlen(framing[i]);
        /* "Host" is a prefix of ordinary names (Hostname): only its
         * whitespace form counts. */
        if (n > fl && strncasecmp(key, framing[i], fl) == 0 && (i < 2 || ok == fl)) {
            snprintf(r->bad_name, sizeof(r->bad_name), "%s", framing[i]);
            return;
        }
    }
    if (ok == n && n > 0)
        return;
    /* Named as sent, up to the first byte that is not allowed, so that
     * the field is printable text. */
    size_t keep = ok < sizeof(r->bad_name) - 1 ? ok : sizeof(r->bad_name) - 1;
    memcpy(r->bad_name, key, keep);
    r->bad_name[keep] = '\0';
    if (!keep)
        snprintf(r->bad_name, sizeof(r->bad_name), "header");
}

/* Request headers: kept up to RV_HTTP_MAX_KV entries and
 * RV_HTTP_MAX_KV_BYTES (past either 431). Cookie is neither kept nor
 * counted: no endpoint reads it, and a browser sends every loopback cookie
 * of every local application. */
static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    rv_req *r = cls;

    if (!key || !value)
        return MHD_YES;
    if (!r->bad_name[0])
        check_name(r, key);
    if (strcasecmp(key, "Content-Length") == 0) {
        r->ncontent_length++;
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        r->has_te = 1;
        r->nte++;
        /* libmicrohttpd reads a body in chunks only for exactly this
         * value (any case); anything else would be framed differently
         * by a proxy in front. */
        if (strcasecmp(value, "chunked") != 0)
            r->te_other = 1;
    } else if (strcasecmp(key, "Host") == 0) {
        r->nhost++;
    } else if (strcasecmp(key, "Cookie") == 0) {
        return MHD_YES;
    }
    if (r->nheaders >= RV_HTTP_MAX_KV) {
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
    r->headers[r->nheaders++] = (rv_http_kv){k, v};
    return MHD_YES;
}

void rv_http__collect(rv_req *r)
{
    MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, collect_query, r);
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_header, r);
}

/* ------------------------------------------------------ Host and CORS */

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

/* A 400 that closes the connection: after a framing error the bytes
 * that follow cannot be trusted to be the next request. */
static void framing_fail(rv_req *r, const char *field, const char *msg)
{
    rv_req_error(r, 400, "bad_request", field, "%s", msg);
    rv_req_add_header(r, "Connection", "close");
}

/* Framing that parsers read differently (request smuggling behind a
 * proxy): two lengths, a length and chunks, two Transfer-Encodings or
 * Hosts, a coding other than chunked (no way to find the body's end), a
 * name with whitespace or a folded line, HTTP/1.1 without Host. Returns
 * 1 with the 400 set. */
static int framing_error(rv_req *r)
{
    if (r->bad_name[0]) {
        framing_fail(r, r->bad_name,
                     "a header name has a character that is not allowed (whitespace before "
                     "the colon, or a folded header line)");
        return 1;
    }
    if (r->ncontent_length > 1) {
        framing_fail(r, "Content-Length", "the request has more than one Content-Length header");
        return 1;
    }
    if (r->nte > 1) {
        framing_fail(r, "Transfer-Encoding",
                     "the request has more than one Transfer-Encoding header");
        return 1;
    }
    if (r->te_other) {
        framing_fail(r, "Transfer-Encoding",
                     "Transfer-Encoding must be chunked (send other codings as "
                     "Content-Encoding)");
        return 1;
    }
    if (r->ncontent_length && r->has_te) {
        framing_fail(r, "Transfer-Encoding",
                     "the request has both Transfer-Encoding and Content-Length");
        return 1;
    }
    if (r->nhost > 1) {
        framing_fail(r, "Host", "the request has more than one Host header");
        return 1;
    }
    if (r->http11 && r->nhost == 0) {
        framing_fail(r, "Host", "an HTTP/1.1 request needs a Host header");
        return 1;
    }
    return 0;
}

void rv_http__screen(rv_req *r)
{
    rv_http *h = r->h;

    if (r->query_over) {
        rv_req_error(r, 414, "uri_too_long", r->over_key[0] ? r->over_key : "query",
                     "the query string is over the limit of %d parameters or %d bytes",
                     RV_HTTP_MAX_KV, RV_HTTP_MAX_KV_BYTES);
        return;
    }
    if (r->header_over) {
        rv_req_error(r, 431, "header_fields_too_large", r->over_key[0] ? r->over_key : NULL,
                     "the request headers are over the limit of %d headers or %d bytes",
                     RV_HTTP_MAX_KV, RV_HTTP_MAX_KV_BYTES);
        return;
    }
    if (framing_error(r))
        return;
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
        rv_req_add_header(r, "Access-Control-Allow-Methods", "GET, POST, PUT, DELETE");
        rv_req_add_header(r, "Access-Control-Allow-Headers",
                          "Authorization, Content-Type, Content-Encoding, X-Reverie-Job, "
                          "X-Reverie-Rank, X-Reverie-World-Size, X-Reverie-Tags");
        rv_req_add_header(r, "Access-Control-Max-Age", "600");
    }
}

/* ------------------------------------------------------ body headers */

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

void rv_http__check_body(rv_req *r)
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
