/* reveried against hostile or careless clients: a real server process with
 * its embedded PostgreSQL under a temporary REVERIE_HOME, probed over
 * loopback with libcurl and raw sockets (what curl will not send).
 *
 *   oversized    query strings and headers past the request limits: 414/431
 *   utf8         bytes that are not UTF-8 in upload metadata: 400 naming the
 *                field, never 500/503; a trace's own strings are repaired
 *   cross_site   Host check (421), a body needs a JSON or trace type (415),
 *                no CORS unless configured, preflight for a configured origin
 *   slow         header trickle, slow body, idle connections: 408 and close
 *                within the header timeout; a full server answers 503 at once
 *   small        libmicrohttpd's own refusals (its status), two
 *                Content-Length headers, rank >= world_size, "Bearer T junk"
 *   early_refusals  header blocks of 130-300 KB (a Cookie, another name):
 *                refused, and the server answers /healthz within 1 s after
 *                each
 *
 * The server gets the new settings from environment variables (an older
 * reveried ignores them and still starts, so the probes can be run against
 * it: RV_BIN_DIR=<its bin folder>). Every probe is bounded in time; the
 * whole suite takes about 20 s. Skips (77) when reveried is not built or
 * PostgreSQL cannot start. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/http_client.h"
#include "common/rv_test_server.h"
#include "common/rv_test_util.h"
#include "rv_auth.h"
#include "rv_db.h"
#include "rv_pgembed.h"

#define HEADER_TIMEOUT_S "2" /* the server's --header-timeout-s, from the environment */
#define MAX_CONN         40
#define NSLOW            20

static rv_testsrv g_srv;
static pid_t srv = -1;
static int port;
static char tok[RV_TOKEN_LEN + 1];
static int trace_seq = 1000; /* every upload is new content (no duplicate answer) */

/* ------------------------------------------------------------ helpers */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A small Kineto trace (one kernel and its launch) that is new content on
 * every call; gpu, backend and device name go in as given (raw bytes). */
static void make_trace(char *out, size_t cap, const char *gpu, const char *backend, const char *dev,
                       int rank, int world)
{
    snprintf(out, cap,
             "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,"
             "\"tid\":7,\"ts\":%d,\"dur\":3,\"args\":{\"stream\":7,\"device\":0,"
             "\"correlation\":1}},{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":"
             "\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2,\"args\":"
             "{\"correlation\":1}}],\"reverie\":{\"gpu\":\"%s\"},\"deviceProperties\":[{\"id\":0,"
             "\"name\":\"%s\",\"numSms\":10}],\"distributedInfo\":{\"backend\":\"%s\","
             "\"rank\":%d,\"world_size\":%d}}",
             trace_seq++, gpu, dev, backend, rank, world);
}

static void url_of(char *out, size_t cap, const char *path)
{
    snprintf(out, cap, "http://127.0.0.1:%d%s", port, path);
}

/* One request with libcurl and the admin token; extra is one more header
 * line or NULL. Returns the status (-1: no answer). */
static long req(const char *method, const char *path, const char *ctype, const char *body,
                const char *extra, tc_resp *out)
{
    char u[24 * 1024], auth[128];
    tc_req q = {0};
    int n = 0;

    url_of(u, sizeof(u), path);
    q.url = u;
    q.method = method;
    q.ctype = ctype;
    q.body = body;
    q.len = body ? strlen(body) : 0;
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
    q.headers[n++] = auth;
    if (extra)
        q.headers[n++] = extra;
    if (tc_do(&q, out) != 0)
        return -1;
    return out->status;
}

/* Whether body is the error shape {"error":{"code","message","field"?}}
 * with this code (NULL: any) and field (NULL: any, "": none). */
static int is_error(const char *body, const char *code, const char *field)
{
    json_t *j = json_loads(body ? body : "", 0, NULL);
    json_t *e = json_object_get(j, "error");
    const char *c = json_string_value(json_object_get(e, "code"));
    const char *m = json_string_value(json_object_get(e, "message"));
    const char *f = json_string_value(json_object_get(e, "field"));
    int ok = c && m && (!code || strcmp(c, code) == 0) &&
             (!field || (field[0] ? f && strcmp(f, field) == 0 : !f));
    if (!ok)
        fprintf(stderr, "\n    want error %s (field %s), got: %.300s", code ? code : "*",
                field ? field : "*", body ? body : "(none)");
    json_decref(j);
    return ok;
}

/* ---- raw sockets: what curl will not send ---- */

typedef struct raw_resp {
    int status;      /* 0: no answer */
    int closed;      /* the server closed the connection */
    char head[4096]; /* status line and headers */
    char body[8192];
} raw_resp;

static int raw_connect(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Content-Length of a response head, or -1. */
static long head_length(const char *head)
{
    const char *p = head;
    while ((p = strchr(p, '\n')) != NULL) {
        p++;
        if (strncasecmp(p, "Content-Length:", 15) == 0)
            return strtol(p + 15, NULL, 10);
    }
    return -1;
}

/* Whether the head has a header line "Name: value..." (value NULL: any). */
static int head_has(const raw_resp *r, const char *name, const char *value)
{
    const char *p = r->head;
    size_t n = strlen(name);
    while ((p = strchr(p, '\n')) != NULL) {
        p++;
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ')
                v++;
            if (!value || strncasecmp(v, value, strlen(value)) == 0)
                return 1;
        }
    }
    return 0;
}

/* Reads one answer from fd for up to timeout_s: the head, then the body
 * by Content-Length (or to the close). */
static void raw_read(int fd, double timeout_s, raw_resp *out)
{
    char buf[16384];
    size_t got = 0;
    double end = now_s() + timeout_s;

    memset(out, 0, sizeof(*out));
    for (;;) {
        double left = end - now_s();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            break;
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (n <= 0) {
            out->closed = 1;
            break;
        }
        got += (size_t)n;
        buf[got] = '\0';
        char *sep = strstr(buf, "\r\n\r\n");
        if (sep) {
            long cl = head_length(buf);
            if (cl >= 0 && (size_t)(sep + 4 - buf) + (size_t)cl <= got)
                break;
        }
        if (got == sizeof(buf) - 1)
            break;
    }
    buf[got] = '\0';
    char *sep = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) == 0)
        out->status = atoi(buf + 9);
    size_t hl = sep ? (size_t)(sep - buf) : got;
    hl = hl < sizeof(out->head) - 1 ? hl : sizeof(out->head) - 1;
    memcpy(out->head, buf, hl);
    out->head[hl] = '\0';
    if (sep) {
        size_t bl = got - (size_t)(sep + 4 - buf);
        bl = bl < sizeof(out->body) - 1 ? bl : sizeof(out->body) - 1;
        memcpy(out->body, sep + 4, bl);
        out->body[bl] = '\0';
    }
}

/* Sends data on a new connection and reads the answer. */
static int raw_request(const char *data, size_t len, double timeout_s, raw_resp *out)
{
    int fd = raw_connect();

    memset(out, 0, sizeof(*out));
    if (fd < 0)
        return -1;
    if (send(fd, data, len, MSG_NOSIGNAL) != (ssize_t)len) {
        close(fd);
        return -1;
    }
    raw_read(fd, timeout_s, out);
    close(fd);
    return out->status;
}

/* A JSON error answer, as the raw response shows it. */
static int raw_is_error(const raw_resp *r, int status, const char *code, const char *field)
{
    int ok = r->status == status && head_has(r, "Content-Type", "application/json") &&
             is_error(r->body, code, field);
    if (!ok)
        fprintf(stderr, "\n    want %d application/json, got: %.200s", status, r->head);
    return ok;
}

/* Whether the server has closed fd (EOF or reset); drains what came. */
static int closed_by_server(int fd, char *seen, size_t cap, size_t *nseen)
{
    for (;;) {
        char b[2048];
        ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (n == 0)
            return 1;
        if (n < 0)
            return errno != EAGAIN && errno != EWOULDBLOCK;
        size_t k = (size_t)n < cap - 1 - *nseen ? (size_t)n : cap - 1 - *nseen;
        memcpy(seen + *nseen, b, k);
        *nseen += k;
        seen[*nseen] = '\0';
    }
}

/* ------------------------------------------------------------- setup */

static int make_token(void)
{
    const rv_testsrv_token t = {"hostile-admin", RV_SCOPE_ADMIN, tok};
    return rv_testsrv_tokens(&g_srv, &t, 1);
}

static int suite_init(void)
{
    int rc = rv_testsrv_setup(&g_srv, "rv_hostile_test");
    if (rc != 0)
        return rc;
    /* The settings this suite is about, as variables: see the top. */
    setenv("REVERIE_HEADER_TIMEOUT_S", HEADER_TIMEOUT_S, 1);
    setenv("REVERIE_MIN_BODY_RATE", "1024", 1);
    setenv("REVERIE_ALLOWED_HOSTS", "reverie.test", 1);
    setenv("REVERIE_CORS_ORIGINS", "http://dash.test", 1);
    port = rv_testsrv_free_port();
    const char *args[] = {
        "--require-auth", "--workers", "2", "--http-threads", "2", "--max-conn", "40",
        "--per-ip",       "64",        NULL};
    srv = rv_testsrv_spawn(&g_srv, port, args);
    if (rv_testsrv_wait(port, "/readyz", NULL, 200, 120, &srv) != 0) {
        fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?); log in %s\n",
                g_srv.home);
        return 77;
    }
    if (make_token() != 0)
        return 1;
    /* The server reloads its token table every second. */
    return rv_testsrv_wait(port, "/v1/traces", tok, 200, 10, NULL) == 0 ? 0 : 1;
}

static int suite_clean(void)
{
    rv_testsrv_stop(&srv, SIGTERM);
    return rv_testsrv_teardown(&g_srv);
}

/* ---------------------------------------------------------- 4: sizes */

static void test_oversized(void)
{
    static char path[24 * 1024];
    tc_resp r;
    raw_resp rr;

    /* A 20 KB job filter used to be dropped, listing every trace. */
    int n = snprintf(path, sizeof(path), "/v1/traces?job=");
    memset(path + n, 'x', 20000);
    path[n + 20000] = '\0';
    CU_ASSERT_EQUAL(req(NULL, path, NULL, NULL, NULL, &r), 414);
    CU_ASSERT_TRUE(is_error(r.body, "uri_too_long", "job"));
    tc_resp_free(&r);

    /* 70 parameters: past the 64 kept. */
    n = snprintf(path, sizeof(path), "/v1/traces?limit=5");
    for (int i = 0; i < 70; i++)
        n += snprintf(path + n, sizeof(path) - (size_t)n, "&p%d=1", i);
    CU_ASSERT_EQUAL(req(NULL, path, NULL, NULL, NULL, &r), 414);
    CU_ASSERT_TRUE(is_error(r.body, "uri_too_long", NULL));
    tc_resp_free(&r);

    /* 70 headers, and one 20 KB header. */
    static char q[64 * 1024];
    n = snprintf(q, sizeof(q), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n", port);
    for (int i = 0; i < 70; i++)
        n += snprintf(q + n, sizeof(q) - (size_t)n, "X-Probe-%d: %d\r\n", i, i);
    n += snprintf(q + n, sizeof(q) - (size_t)n, "Connection: close\r\n\r\n");
    raw_request(q, (size_t)n, 3, &rr);
    CU_ASSERT_TRUE(raw_is_error(&rr, 431, "header_fields_too_large", NULL));
    n = snprintf(q, sizeof(q), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Big: ", port);
    memset(q + n, 'y', 20000);
    n += 20000;
    n += snprintf(q + n, sizeof(q) - (size_t)n, "\r\nConnection: close\r\n\r\n");
    raw_request(q, (size_t)n, 3, &rr);
    CU_ASSERT_TRUE(raw_is_error(&rr, 431, "header_fields_too_large", "X-Big"));

    /* Within the limits all is as before. */
    CU_ASSERT_EQUAL(req(NULL, "/v1/traces?limit=5&job=x", NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
}

/* ----------------------------------------------------------- 5: UTF-8 */

static void test_utf8(void)
{
    char t[2048], p[256];
    tc_resp r;

    /* Query parameters: 400 naming the parameter (was 500 from the
     * database, which the collector retries forever). */
    static const struct {
        const char *query, *field;
    } bad[] = {
        {"?job=%FF%FE", "job"},
        {"?tags=ok,%C0%80", "tags"},
        {"?job=a%00b", "job"}, /* a NUL used to cut the job short */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        make_trace(t, sizeof(t), "GPU", "nccl", "dev", 0, 2);
        snprintf(p, sizeof(p), "/v1/traces%s", bad[i].query);
        CU_ASSERT_EQUAL(req("POST", p, "application/json", t, NULL, &r), 400);
        CU_ASSERT_TRUE(is_error(r.body, "invalid_parameter", bad[i].field));
        tc_resp_free(&r);
    }
    /* The same metadata as headers: 400 naming the header. */
    make_trace(t, sizeof(t), "GPU", "nccl", "dev", 0, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces", "application/json", t, "X-Reverie-Job: j\xff", &r),
                    400);
    CU_ASSERT_TRUE(is_error(r.body, "invalid_parameter", "X-Reverie-Job"));
    tc_resp_free(&r);
    make_trace(t, sizeof(t), "GPU", "nccl", "dev", 0, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces", "application/json", t, "X-Reverie-Tags: a,\xfe", &r),
                    400);
    CU_ASSERT_TRUE(is_error(r.body, "invalid_parameter", "X-Reverie-Tags"));
    tc_resp_free(&r);
    /* Any endpoint's query. */
    CU_ASSERT_EQUAL(req(NULL, "/v1/traces?job=%FF", NULL, NULL, NULL, &r), 400);
    CU_ASSERT_TRUE(is_error(r.body, "invalid_parameter", "job"));
    tc_resp_free(&r);

    /* Inside the trace (GPU name, backend, device name) bad bytes are
     * replaced by U+FFFD at ingest and the upload is stored. */
    make_trace(t, sizeof(t), "G\xffPU",
               "nc\xfe"
               "cl",
               "d\xc0v", 0, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces?job=utf8-ok", "application/json", t, NULL, &r), 201);
    json_t *j = json_loads(r.body, 0, NULL);
    const char *gpu =
        json_string_value(json_object_get(json_object_get(j, "platform"), "gpu_model"));
    const char *be = json_string_value(json_object_get(json_object_get(j, "summary"), "backend"));
    CU_ASSERT_TRUE(gpu && strstr(gpu, "\xef\xbf\xbd") != NULL);
    CU_ASSERT_TRUE(be && strstr(be, "\xef\xbf\xbd") != NULL);
    json_decref(j);
    tc_resp_free(&r);
}

/* ------------------------------------------------------ 6: cross-site */

static void test_cross_site(void)
{
    char q[2048], t[2048];
    raw_resp rr;
    tc_resp r;

    /* Host: names a page could make this server answer to (DNS rebinding)
     * are refused; loopback names, addresses and configured names pass. */
    static const struct {
        const char *host;
        int with_port, status;
    } hosts[] = {
        {"evil.example", 0, 421}, {"attacker.test", 1, 421}, {"127.0.0.1.evil.test", 0, 421},
        {"127.0.0.1", 1, 200},    {"localhost", 1, 200},     {"[::1]", 1, 200},
        {"LOCALHOST", 0, 200},    {"reverie.test", 1, 200},  {"reverie.test", 0, 200},
    };
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        char h[128];
        if (hosts[i].with_port)
            snprintf(h, sizeof(h), "%s:%d", hosts[i].host, port);
        else
            snprintf(h, sizeof(h), "%s", hosts[i].host);
        int n = snprintf(q, sizeof(q),
                         "GET /v1/traces?limit=1 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer "
                         "%s\r\nConnection: close\r\n\r\n",
                         h, tok);
        raw_request(q, (size_t)n, 5, &rr);
        CU_ASSERT_EQUAL(rr.status, hosts[i].status);
        if (rr.status != hosts[i].status)
            fprintf(stderr, "\n    Host %s: %d", h, rr.status);
        if (hosts[i].status == 421)
            CU_ASSERT_TRUE(raw_is_error(&rr, 421, "host_not_allowed", "Host"));
    }
    /* A rebinding page deleting: refused before the route. */
    int n = snprintf(q, sizeof(q),
                     "DELETE /v1/traces/1 HTTP/1.1\r\nHost: attacker.test:%d\r\nAuthorization: "
                     "Bearer %s\r\nConnection: close\r\n\r\n",
                     port, tok);
    raw_request(q, (size_t)n, 5, &rr);
    CU_ASSERT_TRUE(raw_is_error(&rr, 421, "host_not_allowed", "Host"));

    /* A body without a type (what a page can send without a preflight):
     * 415 on the upload, the what-if and a DELETE. ("Content-Type:" makes
     * curl send none.) */
    make_trace(t, sizeof(t), "GPU", "nccl", "dev", 0, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces?job=notype", NULL, t, "Content-Type:", &r), 415);
    CU_ASSERT_TRUE(is_error(r.body, "unsupported_media_type", "Content-Type"));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces/1/whatif", NULL, "{}", "Content-Type:", &r), 415);
    CU_ASSERT_TRUE(is_error(r.body, "unsupported_media_type", "Content-Type"));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/fleet/whatif", "text/plain", "{}", NULL, &r), 415);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req("DELETE", "/v1/traces/1", NULL, "x=1", "Content-Type:", &r), 415);
    tc_resp_free(&r);
    /* The types the dashboard, CLI and collector send still work. */
    make_trace(t, sizeof(t), "GPU", "nccl", "dev", 0, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces?job=typed", "application/octet-stream", t, NULL, &r),
                    201);
    tc_resp_free(&r);

    /* CORS stays off for other origins: no Access-Control-* header, and a
     * preflight is not granted. */
    n = snprintf(q, sizeof(q),
                 "GET /v1/traces?limit=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: "
                 "http://evil.test\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n",
                 port, tok);
    raw_request(q, (size_t)n, 5, &rr);
    CU_ASSERT_EQUAL(rr.status, 200);
    CU_ASSERT_FALSE(head_has(&rr, "Access-Control-Allow-Origin", NULL));
    n = snprintf(q, sizeof(q),
                 "OPTIONS /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: "
                 "http://evil.test\r\nAccess-Control-Request-Method: POST\r\nConnection: "
                 "close\r\n\r\n",
                 port);
    raw_request(q, (size_t)n, 5, &rr);
    CU_ASSERT_TRUE(rr.status >= 400);
    CU_ASSERT_FALSE(head_has(&rr, "Access-Control-Allow-Origin", NULL));
    /* The configured origin (REVERIE_CORS_ORIGINS) gets the preflight and
     * the header on answers. */
    n = snprintf(q, sizeof(q),
                 "OPTIONS /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: "
                 "http://dash.test\r\nAccess-Control-Request-Method: POST\r\n"
                 "Access-Control-Request-Headers: content-type,authorization\r\nConnection: "
                 "close\r\n\r\n",
                 port);
    raw_request(q, (size_t)n, 5, &rr);
    CU_ASSERT_EQUAL(rr.status, 204);
    CU_ASSERT_TRUE(head_has(&rr, "Access-Control-Allow-Origin", "http://dash.test"));
    CU_ASSERT_TRUE(head_has(&rr, "Access-Control-Allow-Methods", NULL));
    n = snprintf(q, sizeof(q),
                 "GET /v1/traces?limit=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: "
                 "http://dash.test\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n",
                 port, tok);
    raw_request(q, (size_t)n, 5, &rr);
    CU_ASSERT_EQUAL(rr.status, 200);
    CU_ASSERT_TRUE(head_has(&rr, "Access-Control-Allow-Origin", "http://dash.test"));
}

/* ------------------------------------------------- 7: slow clients */

static void test_slow(void)
{
    int fds[NSLOW + 1];
    char seen[NSLOW + 1][1024];
    size_t nseen[NSLOW + 1];
    int closed[NSLOW + 1];
    double closed_at[NSLOW + 1];
    char line[64];
    tc_resp r;

    /* NSLOW connections trickling header lines (a line every 250 ms, never
     * the blank line), and one that sends nothing at all. */
    double t0 = now_s();
    for (int i = 0; i <= NSLOW; i++) {
        fds[i] = raw_connect();
        CU_ASSERT_FATAL(fds[i] >= 0);
        nseen[i] = 0;
        seen[i][0] = '\0';
        closed[i] = 0;
        closed_at[i] = 0;
        if (i < NSLOW) {
            int n = snprintf(line, sizeof(line), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
            CU_ASSERT_EQUAL(send(fds[i], line, (size_t)n, MSG_NOSIGNAL), n);
        }
    }
    /* Meanwhile other clients are served at once. */
    usleep(300 * 1000);
    double ts = now_s();
    CU_ASSERT_EQUAL(req(NULL, "/healthz", NULL, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_TRUE(now_s() - ts < 1.0);
    /* Every one is closed within the 2 s header timeout (plus the
     * watchdog's tick); bounded at 6 s. */
    int open_left = NSLOW + 1;
    for (int round = 0; open_left > 0 && now_s() - t0 < 6.0; round++) {
        for (int i = 0; i <= NSLOW; i++) {
            if (closed[i])
                continue;
            if (i < NSLOW) {
                int n = snprintf(line, sizeof(line), "X-Trickle-%d: %d\r\n", round, i);
                (void)send(fds[i], line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
            }
            if (closed_by_server(fds[i], seen[i], sizeof(seen[i]), &nseen[i])) {
                closed[i] = 1;
                closed_at[i] = now_s() - t0;
                open_left--;
            }
        }
        usleep(250 * 1000);
    }
    CU_ASSERT_EQUAL(open_left, 0);
    int answered = 0;
    for (int i = 0; i <= NSLOW; i++) {
        CU_ASSERT_TRUE(closed[i] && closed_at[i] < 4.5);
        if (i < NSLOW && strncmp(seen[i], "HTTP/1.1 408", 12) == 0 &&
            strstr(seen[i], "\"request_timeout\""))
            answered++;
        close(fds[i]);
    }
    /* The trickling ones were told why (408, JSON); the silent one gets
     * nothing. */
    CU_ASSERT_EQUAL(answered, NSLOW);
    CU_ASSERT_EQUAL(nseen[NSLOW], 0);
    if (open_left || answered != NSLOW)
        fprintf(stderr, "\n    slow headers: %d still open, %d of %d answered 408", open_left,
                answered, NSLOW);

    /* A body trickled at 20 bytes/s (the minimum is 1024) is cut off once
     * the 2 s have passed. */
    int fd = raw_connect();
    CU_ASSERT_FATAL(fd >= 0);
    int n = snprintf(seen[0], sizeof(seen[0]),
                     "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer "
                     "%s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
                     port, tok);
    CU_ASSERT_EQUAL(send(fd, seen[0], (size_t)n, MSG_NOSIGNAL), n);
    t0 = now_s();
    nseen[0] = 0;
    seen[0][0] = '\0';
    int body_closed = 0;
    while (!body_closed && now_s() - t0 < 6.0) {
        (void)send(fd, "{\"traceEv\"", 10, MSG_NOSIGNAL | MSG_DONTWAIT);
        body_closed = closed_by_server(fd, seen[0], sizeof(seen[0]), &nseen[0]);
        usleep(500 * 1000);
    }
    close(fd);
    CU_ASSERT_TRUE(body_closed);
    CU_ASSERT_TRUE(now_s() - t0 < 5.0);
    CU_ASSERT_PTR_NOT_NULL(strstr(seen[0], "HTTP/1.1 408"));
    CU_ASSERT_PTR_NOT_NULL(strstr(seen[0], "application/json"));

    /* Full (--max-conn 40): the next client is answered 503 at once rather
     * than left waiting in the listen backlog. */
    int held[MAX_CONN];
    for (int i = 0; i < MAX_CONN; i++) {
        held[i] = raw_connect();
        CU_ASSERT(held[i] >= 0);
    }
    usleep(200 * 1000);
    raw_resp rr;
    n = snprintf(seen[0], sizeof(seen[0]),
                 "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", port);
    ts = now_s();
    raw_request(seen[0], (size_t)n, 1.5, &rr);
    CU_ASSERT_TRUE(raw_is_error(&rr, 503, "busy", NULL));
    CU_ASSERT_TRUE(head_has(&rr, "Retry-After", NULL));
    CU_ASSERT_TRUE(now_s() - ts < 1.0);
    for (int i = 0; i < MAX_CONN; i++)
        if (held[i] >= 0)
            close(held[i]);
    /* And once they are gone, served again. */
    CU_ASSERT_EQUAL(rv_testsrv_wait(port, "/healthz", NULL, 200, 5, NULL), 0);
}

/* --------------------------------------------------------- 10: small */

static void test_small(void)
{
    char q[1024], t[2048];
    raw_resp rr;
    tc_resp r;

    /* libmicrohttpd's own refusals keep its status (and its plain body:
     * the library offers no supported way to replace it). */
    static const struct {
        const char *cl;
        int status;
        const char *code;
    } lens[] = {
        {"abc", 400, "bad_request"},
        {"18446744073709551616", 413, "payload_too_large"}, /* 2^64 */
        {"-1", 400, "bad_request"},
    };
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        int n = snprintf(q, sizeof(q),
                         "POST /v1/traces/1/whatif HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                         "Content-Type: application/json\r\nContent-Length: %s\r\n\r\n{}",
                         port, lens[i].cl);
        raw_request(q, (size_t)n, 3, &rr);
        CU_ASSERT_EQUAL(rr.status, lens[i].status);
        (void)lens[i].code;
    }
    int n = snprintf(q, sizeof(q),
                     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: "
                     "chunked\r\n\r\nzz\r\n",
                     port);
    raw_request(q, (size_t)n, 3, &rr);
    CU_ASSERT_EQUAL(rr.status, 400);
    /* Two Content-Length headers: 400, whichever the values. */
    n = snprintf(q, sizeof(q),
                 "POST /v1/traces/1/whatif HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: "
                 "Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                 "Content-Length: 5\r\n\r\n{}",
                 port, tok);
    raw_request(q, (size_t)n, 3, &rr);
    CU_ASSERT_TRUE(raw_is_error(&rr, 400, "bad_request", "Content-Length"));

    /* rank >= world_size: from the query, and from the trace. */
    make_trace(t, sizeof(t), "GPU", "nccl", "dev", 0, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces?rank=4&world_size=4", "application/json", t, NULL, &r),
                    400);
    CU_ASSERT_TRUE(is_error(r.body, "invalid_parameter", "rank"));
    tc_resp_free(&r);
    make_trace(t, sizeof(t), "GPU", "nccl", "dev", 5, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces", "application/json", t, NULL, &r), 400);
    CU_ASSERT_TRUE(is_error(r.body, NULL, "rank"));
    tc_resp_free(&r);
    make_trace(t, sizeof(t), "GPU", "nccl", "dev", 0, 2);
    CU_ASSERT_EQUAL(req("POST", "/v1/traces?rank=1&world_size=2", "application/json", t, NULL, &r),
                    201);
    tc_resp_free(&r);

    /* "Bearer TOKEN junk": 401, the token alone still works. */
    char u[128], auth[160];
    url_of(u, sizeof(u), "/v1/traces?limit=1");
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s junk", tok);
    tc_req qr = {.url = u, .headers = {auth}};
    CU_ASSERT_EQUAL_FATAL(tc_do(&qr, &r), 0);
    CU_ASSERT_EQUAL(r.status, 401);
    CU_ASSERT_TRUE(is_error(r.body, "unauthorized", NULL));
    tc_resp_free(&r);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s  ", tok);
    CU_ASSERT_EQUAL_FATAL(tc_do(&qr, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    tc_resp_free(&r);
}

/* ------------------------------------------------- early refusals */

/* Sends one request whose header block is a single header of len bytes
 * (name given), reads what comes back, then needs /healthz within 1 s.
 * A 140 KB Cookie used to kill the server right after its 431. */
static void early_probe(const char *name, size_t len)
{
    size_t cap = len + 512;
    char *q = malloc(cap);
    raw_resp rr;
    tc_resp r;

    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    int n = snprintf(q, cap, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s: a=", port, name);
    memset(q + n, 'b', len);
    n += (int)len;
    n += snprintf(q + n, cap - (size_t)n, "\r\nConnection: close\r\n\r\n");
    raw_request(q, (size_t)n, 3, &rr);
    free(q);
    /* Answered (a 130 KB Cookie still fits the connection's memory),
     * refused with a 4xx, or closed before the whole block was sent
     * (status 0); never a 5xx. */
    CU_ASSERT_TRUE(rr.status < 500);
    double t0 = now_s();
    long st = req(NULL, "/healthz", NULL, NULL, NULL, &r);
    double dt = now_s() - t0;
    tc_resp_free(&r);
    if (st != 200 || dt > 1.0)
        fprintf(stderr, "\n    after a %zu-byte %s: /healthz %ld in %.2f s", len, name, st, dt);
    CU_ASSERT_EQUAL(st, 200);
    CU_ASSERT_TRUE(dt <= 1.0);
}

static void test_early_refusals(void)
{
    static const size_t sizes[] = {130000, 140000, 160000, 200000, 300000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        early_probe("Cookie", sizes[i]);
        early_probe("X-Large", sizes[i]);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    int rc = suite_init();
    if (rc == 77) {
        suite_clean();
        return 77;
    }
    if (rc != 0) {
        fprintf(stderr, "setup failed; logs in %s\n", g_srv.home);
        suite_clean();
        return 1;
    }
    CU_pSuite s = CU_add_suite("hostile", NULL, NULL);
    CU_add_test(s, "oversized", test_oversized);
    CU_add_test(s, "utf8", test_utf8);
    CU_add_test(s, "cross_site", test_cross_site);
    CU_add_test(s, "slow", test_slow);
    CU_add_test(s, "small", test_small);
    CU_add_test(s, "early_refusals", test_early_refusals);
    unsigned failures = rv_test_run();
    /* The server survived all of it. */
    if (rv_testsrv_wait(port, "/healthz", NULL, 200, 5, &srv) != 0) {
        fprintf(stderr, "reveried stopped answering; log in %s\n", g_srv.home);
        failures++;
    }
    suite_clean();
    return failures ? 1 : 0;
}
