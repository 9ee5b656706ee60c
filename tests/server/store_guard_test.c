/* reveried's store against hostile or careless uploads and a sick
 * database (issue 25): a real server with its embedded PostgreSQL under a
 * temporary REVERIE_HOME, probed over loopback.
 *
 *   scopes      an ingest-only token re-uploading another token's bytes
 *               gets the id only; a rank into another token's training
 *               job (a trace or an archive) is 403 naming job
 *   unusable    a trace with 70,000 GPU streams, or times past what the
 *               simulator holds, is refused at upload (400) with the reason
 *   original    an upload inflating past --max-trace is 413 naming
 *               max_trace_bytes; clients that ask for a 60 MB original
 *               and never read cost the server no heap copy of it
 *   archive     an archive whose files add up past --max-archive is 413
 *               naming max_archive, and nothing of it is stored
 *   disk        with a free-space reserve the disk cannot meet (1 PiB),
 *               uploads get 507 with Retry-After; reads and what-ifs still
 *               answer; /readyz and /metrics say it
 *   hung_db     PostgreSQL stopped (SIGSTOP): /v1 and /readyz answer 503
 *               within 5 s, /healthz within 1 s; it serves again after
 *               SIGCONT
 *
 * After each probe the server answers /healthz within 1 s and its RSS
 * stays under 1 GB (read from /proc; under a sanitizer the figure is the
 * sanitizer's too, so only the 1 GB bound is checked). The whole suite
 * takes about 30 s. Skips (77) when reveried is not built or PostgreSQL
 * cannot start. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/http_client.h"
#include "common/rv_test_server.h"
#include "common/rv_test_util.h"
#include "rv_auth.h"

#define MAX_TRACE_MB   "64"
#define MAX_ARCHIVE_MB "64"

static rv_testsrv g_srv;
static pid_t srv = -1;
static int port;
static char admin[RV_TOKEN_LEN + 1], ing_a[RV_TOKEN_LEN + 1], ing_b[RV_TOKEN_LEN + 1];
static int seq = 5000; /* every trace made is new content */
static char tmpdir[300];
static long big_id; /* the 60 MB trace of test_original */

/* ------------------------------------------------------------ helpers */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A small Kineto trace: one kernel and its launch, new content each call
 * (distributedInfo gives it rank/world). */
static void small_trace(char *out, size_t cap, int rank, int world)
{
    snprintf(out, cap,
             "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,"
             "\"tid\":7,\"ts\":%d,\"dur\":3,\"args\":{\"stream\":7,\"device\":0,"
             "\"correlation\":1}},{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":"
             "\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2,\"args\":"
             "{\"correlation\":1}}],\"deviceProperties\":[{\"id\":0,\"name\":\"A100\","
             "\"numSms\":108}],\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":%d,"
             "\"world_size\":%d}}",
             seq++, rank, world);
}

static long req(const char *token, const char *method, const char *path, const char *ctype,
                const void *body, size_t len, const char *file, const char *extra, tc_resp *out)
{
    char u[512], auth[128];
    tc_req q = {0};
    int n = 0;

    snprintf(u, sizeof(u), "http://127.0.0.1:%d%s", port, path);
    q.url = u;
    q.method = method;
    q.ctype = ctype;
    q.body = body;
    q.len = len;
    q.file = file;
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        q.headers[n++] = auth;
    }
    if (extra)
        q.headers[n++] = extra;
    memset(out, 0, sizeof(*out));
    if (tc_do(&q, out) != 0)
        return -1;
    return out->status;
}

static long post_json(const char *token, const char *path, const char *body, tc_resp *out)
{
    return req(token, "POST", path, "application/json", body, strlen(body), NULL, NULL, out);
}

/* The error code and field of an error answer ("" when absent). */
static int is_error(const tc_resp *r, const char *code, const char *field)
{
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    json_t *e = json_object_get(j, "error");
    const char *c = json_string_value(json_object_get(e, "code"));
    const char *f = json_string_value(json_object_get(e, "field"));
    int ok = c && (!code || strcmp(c, code) == 0) &&
             (!field || (field[0] ? f && strcmp(f, field) == 0 : !f));
    if (!ok)
        fprintf(stderr, "\n    want error %s (field %s), got %ld: %.300s", code ? code : "*",
                field ? field : "*", r->status, r->body ? r->body : "(none)");
    json_decref(j);
    return ok;
}

static long field_int(const tc_resp *r, const char *key)
{
    json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
    long v = (long)json_integer_value(json_object_get(j, key));
    json_decref(j);
    return v;
}

/* VmRSS (or another /proc/PID/status line) of the server, in kB; -1. */
static long status_kb(const char *key)
{
    char path[64], line[256];
    long v = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)srv);
    FILE *f = fopen(path, "r");
    size_t k = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, k) == 0 && line[k] == ':')
            v = strtol(line + k + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

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

/* GET path on a raw socket, waiting at most timeout_s for the status line:
 * the status (0: none in time) and the seconds it took. */
static int raw_get(const char *path, const char *token, double timeout_s, double *took)
{
    char buf[2048];
    int fd = raw_connect(), st = 0;
    double t0 = now_s();
    if (fd < 0)
        return 0;
    int n = snprintf(
        buf, sizeof(buf), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sConnection: close\r\n\r\n",
        path, token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    if (send(fd, buf, (size_t)n, MSG_NOSIGNAL) == n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ms = (int)(timeout_s * 1000);
        if (poll(&p, 1, ms) > 0) {
            ssize_t got = recv(fd, buf, sizeof(buf) - 1, 0);
            if (got > 12) {
                buf[got] = '\0';
                st = atoi(buf + 9);
            }
        }
    }
    *took = now_s() - t0;
    close(fd);
    return st;
}

/* The server is alive: /healthz within 1 s, RSS under 1 GB. */
static void check_alive(const char *after)
{
    double took = 0;
    int st = raw_get("/healthz", NULL, 1.0, &took);
    long rss = status_kb("VmRSS");
    if (st != 200 || took > 1.0 || rss < 0 || rss > 1024L * 1024)
        fprintf(stderr, "\n    after %s: /healthz %d in %.2f s, RSS %ld kB", after, st, took, rss);
    CU_ASSERT_EQUAL(st, 200);
    CU_ASSERT(took <= 1.0);
    CU_ASSERT(rss > 0 && rss < 1024L * 1024);
}

/* Writes head, then pad spaces, then tail, to path: gzip'ed (level 1), or
 * plain with gz 0. */
static int write_padded(const char *path, int gz, const char *head, size_t pad, const char *tail)
{
    gzFile g = gzopen(path, gz ? "wb1" : "wbT");
    static char spaces[1 << 16];
    if (!g)
        return -1;
    memset(spaces, ' ', sizeof(spaces));
    int ok = gzputs(g, head) >= 0;
    for (size_t left = pad; ok && left;) {
        unsigned n = left > sizeof(spaces) ? (unsigned)sizeof(spaces) : (unsigned)left;
        ok = gzwrite(g, spaces, n) == (int)n;
        left -= n;
    }
    ok = ok && gzputs(g, tail) >= 0;
    return gzclose(g) == Z_OK && ok ? 0 : -1;
}

/* A ustar header for a regular file of size bytes. */
static void tar_header(unsigned char *h, const char *name, size_t size)
{
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011zo", size);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    h[263] = (unsigned char)'0';
    h[264] = (unsigned char)'0';
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
}

/* A .tar.gz at path of n members: each a small trace of rank first+i, each
 * padded with pad spaces (inside the JSON, after its last key). */
static int write_tar_gz(const char *path, int n, int first, int world, size_t pad)
{
    gzFile g = gzopen(path, "wb1");
    static char spaces[1 << 16];
    unsigned char h[512];
    char t[2048], name[64];
    if (!g)
        return -1;
    memset(spaces, ' ', sizeof(spaces));
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        small_trace(t, sizeof(t), first + i, world);
        size_t tl = strlen(t), size = tl + pad;
        snprintf(name, sizeof(name), "rank%d.json", first + i);
        tar_header(h, name, size);
        ok = gzwrite(g, h, 512) == 512 && gzwrite(g, t, (unsigned)(tl - 1)) == (int)(tl - 1);
        for (size_t left = pad; ok && left;) {
            unsigned k = left > sizeof(spaces) ? (unsigned)sizeof(spaces) : (unsigned)left;
            ok = gzwrite(g, spaces, k) == (int)k;
            left -= k;
        }
        ok = ok && gzputc(g, '}') == '}';
        size_t padn = (512 - size % 512) % 512;
        memset(h, 0, sizeof(h));
        ok = ok && (padn == 0 || gzwrite(g, h, (unsigned)padn) == (int)padn);
    }
    memset(h, 0, sizeof(h));
    ok = ok && gzwrite(g, h, 512) == 512 && gzwrite(g, h, 512) == 512;
    return gzclose(g) == Z_OK && ok ? 0 : -1;
}

static long trace_count(void)
{
    tc_resp r;
    long n = -1;
    if (req(admin, "GET", "/v1/traces?limit=1000", NULL, NULL, 0, NULL, NULL, &r) == 200)
        n = field_int(&r, "count");
    tc_resp_free(&r);
    return n;
}

/* ------------------------------------------------------------- setup */

static int start_server(const char *disk_reserve_mb)
{
    /* The settings new with this suite as variables: an older reveried
     * ignores them and still starts, so the probes run against it
     * (RV_BIN_DIR=<its bin folder>). */
    setenv("REVERIE_DISK_RESERVE_MB", disk_reserve_mb, 1);
    setenv("REVERIE_MAX_ARCHIVE_MB", MAX_ARCHIVE_MB, 1);
    const char *args[] = {"--require-auth", "--workers",  "4", "--http-threads", "2",
                          "--max-trace",    MAX_TRACE_MB, NULL};
    port = rv_testsrv_free_port();
    srv = rv_testsrv_spawn(&g_srv, port, args);
    if (rv_testsrv_wait(port, "/readyz", NULL, 200, 120, &srv) != 0) {
        fprintf(stderr, "skip: reveried did not get ready (no PostgreSQL?); log in %s\n",
                g_srv.home);
        return 77;
    }
    return 0;
}

static int suite_init(void)
{
    int rc = rv_testsrv_setup(&g_srv, "rv_store_guard_test");
    if (rc != 0)
        return rc;
    snprintf(tmpdir, sizeof(tmpdir), "%s/probe", g_srv.home);
    if (mkdir(tmpdir, 0700) != 0)
        return 1;
    if ((rc = start_server("0")) != 0)
        return rc;
    const rv_testsrv_token t[] = {{"guard-admin", RV_SCOPE_ADMIN, admin},
                                  {"guard-ingest-a", RV_SCOPE_INGEST, ing_a},
                                  {"guard-ingest-b", RV_SCOPE_INGEST, ing_b}};
    if (rv_testsrv_tokens(&g_srv, t, 3) != 0)
        return 1;
    return rv_testsrv_wait(port, "/v1/traces", admin, 200, 10, NULL) == 0 ? 0 : 1;
}

static int suite_clean(void)
{
    rv_testsrv_stop(&srv, SIGTERM);
    return rv_testsrv_teardown(&g_srv);
}

/* ------------------------------------------------------- 10: scopes */

static void test_scopes(void)
{
    char t[2048], path[128];
    tc_resp r;

    /* A's trace; B sends the same bytes: the id only. */
    small_trace(t, sizeof(t), 0, 2);
    CU_ASSERT_EQUAL(post_json(ing_a, "/v1/traces?job=guard-job", t, &r), 201);
    long id = field_int(&r, "id");
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(post_json(ing_b, "/v1/traces", t, &r), 200);
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "id")), id);
    CU_ASSERT(json_is_true(json_object_get(j, "duplicate")));
    if (json_object_size(j) != 2)
        fprintf(stderr, "\n    duplicate for an ingest-only token: %.300s", r.body);
    CU_ASSERT_EQUAL(json_object_size(j), 2);
    json_decref(j);
    tc_resp_free(&r);
    /* An admin's duplicate still shows the row. */
    CU_ASSERT_EQUAL(post_json(admin, "/v1/traces", t, &r), 200);
    j = json_loads(r.body ? r.body : "", 0, NULL);
    CU_ASSERT(json_object_get(j, "platform") != NULL);
    json_decref(j);
    tc_resp_free(&r);

    /* B may not add a rank to A's job: neither a trace nor an archive. */
    small_trace(t, sizeof(t), 1, 2);
    CU_ASSERT_EQUAL(post_json(ing_b, "/v1/traces?job=guard-job", t, &r), 403);
    CU_ASSERT(is_error(&r, "forbidden", "job"));
    tc_resp_free(&r);
    char tar[400];
    snprintf(tar, sizeof(tar), "%s/scopes.tar.gz", tmpdir);
    CU_ASSERT_EQUAL_FATAL(write_tar_gz(tar, 1, 1, 2, 0), 0);
    long before = trace_count();
    CU_ASSERT_EQUAL(req(ing_b, "POST", "/v1/training-jobs?job=guard-job", "application/gzip", NULL,
                        0, tar, NULL, &r),
                    403);
    CU_ASSERT(is_error(&r, "forbidden", "job"));
    CU_ASSERT(r.body && !strstr(r.body, "trace_id"));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(trace_count(), before);
    /* Its creator and an admin may. */
    CU_ASSERT_EQUAL(req(ing_a, "POST", "/v1/training-jobs?job=guard-job", "application/gzip", NULL,
                        0, tar, NULL, &r),
                    201);
    tc_resp_free(&r);
    small_trace(t, sizeof(t), 1, 2);
    CU_ASSERT_EQUAL(post_json(admin, "/v1/traces?job=guard-job", t, &r), 201);
    tc_resp_free(&r);
    /* B's own new job is B's. */
    small_trace(t, sizeof(t), 0, 1);
    CU_ASSERT_EQUAL(post_json(ing_b, "/v1/traces?job=guard-job-b", t, &r), 201);
    tc_resp_free(&r);
    snprintf(path, sizeof(path), "/v1/traces/%ld", id);
    check_alive("scopes");
}

/* ---------------------------------------------------- 11: unusable */

static void test_unusable(void)
{
    tc_resp r;
    /* 70,000 kernels, each on its own stream: past the graph's 65,536. */
    size_t n = 70000, cap = n * 200 + 1024, len = 0;
    char *b = malloc(cap);
    CU_ASSERT_FATAL(b != NULL);
    len += (size_t)snprintf(b + len, cap - len, "{\"traceEvents\":[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(b + len, cap - len,
                                "%s{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,"
                                "\"tid\":%zu,\"ts\":%zu,\"dur\":1,\"args\":{\"stream\":%zu,"
                                "\"device\":0}}",
                                i ? "," : "", i + 1, 10 + i, i + 1);
    len += (size_t)snprintf(b + len, cap - len, "]}");
    CU_ASSERT_EQUAL(req(ing_a, "POST", "/v1/traces", "application/json", b, len, NULL, NULL, &r),
                    400);
    CU_ASSERT(is_error(&r, "unsupported", NULL));
    CU_ASSERT(r.body && strstr(r.body, "streams"));
    tc_resp_free(&r);
    free(b);

    /* Times past what the simulator holds: a kernel ending past 2^62 ns,
     * and a trace spanning 200 years. */
    static const char *const bad[] = {
        "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,"
        "\"ts\":9223372036854000,\"dur\":100000000,\"args\":{\"stream\":7,\"device\":0}}]}",
        "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,"
        "\"ts\":10,\"dur\":1,\"args\":{\"stream\":7,\"device\":0}},{\"ph\":\"X\",\"cat\":"
        "\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":4000000000000000,\"dur\":1,"
        "\"args\":{\"stream\":7,\"device\":0}}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long st = post_json(ing_a, "/v1/traces", bad[i], &r);
        if (st != 400)
            fprintf(stderr, "\n    times probe %zu: %ld %.300s", i, st, r.body);
        CU_ASSERT_EQUAL(st, 400);
        tc_resp_free(&r);
    }
    check_alive("unusable");
}

/* ------------------------------------------------------ 3: original */

static void test_original(void)
{
    char path[400], head[2048], url[128];
    tc_resp r;

    /* 128 MiB of JSON sent as a small gzip: over --max-trace at upload. */
    snprintf(path, sizeof(path), "%s/bomb.json.gz", tmpdir);
    small_trace(head, sizeof(head), 0, 1);
    head[strlen(head) - 1] = '\0';
    CU_ASSERT_EQUAL_FATAL(write_padded(path, 1, head, (size_t)128 << 20, "}"), 0);
    CU_ASSERT_EQUAL(req(ing_a, "POST", "/v1/traces", "application/json", NULL, 0, path,
                        "Content-Encoding: gzip", &r),
                    413);
    CU_ASSERT(is_error(&r, NULL, "max_trace_bytes"));
    tc_resp_free(&r);
    check_alive("a gzip bomb");

    /* 60 MB of JSON under the cap, sent plain (stored gzip'ed), then asked
     * for by clients that never read and do not take gzip. Each answer is
     * a file the server streams from, not an inflated copy. */
    small_trace(head, sizeof(head), 0, 1);
    head[strlen(head) - 1] = '\0';
    snprintf(path, sizeof(path), "%s/big.json", tmpdir);
    CU_ASSERT_EQUAL_FATAL(write_padded(path, 0, head, (size_t)60 << 20, "}"), 0);
    CU_ASSERT_EQUAL(req(ing_a, "POST", "/v1/traces", "application/json", NULL, 0, path, NULL, &r),
                    201);
    long id = field_int(&r, "id");
    big_id = id;
    tc_resp_free(&r);
    snprintf(url, sizeof(url), "/v1/traces/%ld/original", id);
    /* A reader gets the bytes back whole. */
    CU_ASSERT_EQUAL(req(admin, "GET", url, NULL, NULL, 0, NULL, NULL, &r), 200);
    CU_ASSERT(r.len == strlen(head) + ((size_t)60 << 20) + 1);
    tc_resp_free(&r);
    long rss0 = status_kb("VmRSS");
    int fds[6];
    char q[512];
    int n = snprintf(q, sizeof(q),
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", url,
                     admin);
    for (int i = 0; i < 6; i++) {
        fds[i] = raw_connect();
        if (fds[i] >= 0 && send(fds[i], q, (size_t)n, MSG_NOSIGNAL) != n) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    sleep(2);
    long rss1 = status_kb("VmRSS");
    fprintf(stderr, "\n    six unread 60 MB originals: RSS %ld -> %ld kB", rss0, rss1);
    /* A heap copy each would be 360 MB. */
    CU_ASSERT(rss1 - rss0 < 150L * 1024);
    check_alive("six unread originals");
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    /* The export reads the same original within the cap. */
    snprintf(url, sizeof(url), "/v1/traces/%ld/whatif/export", id);
    CU_ASSERT_EQUAL(post_json(admin, url, "{}", &r), 200);
    tc_resp_free(&r);
    check_alive("an export");
}

/* ------------------------------------------------------- 4: archive */

static void test_archive(void)
{
    char path[400];
    tc_resp r;

    /* Three files of 30 MB each: 90 MB past --max-archive 64. */
    snprintf(path, sizeof(path), "%s/big.tar.gz", tmpdir);
    CU_ASSERT_EQUAL_FATAL(write_tar_gz(path, 3, 0, 3, (size_t)30 << 20), 0);
    long before = trace_count();
    CU_ASSERT_EQUAL(req(admin, "POST", "/v1/training-jobs?job=guard-archive", "application/gzip",
                        NULL, 0, path, NULL, &r),
                    413);
    CU_ASSERT(is_error(&r, "limit_exceeded", "max_archive"));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(trace_count(), before);
    check_alive("an archive past --max-archive");
    /* Two of 20 MB fit, and stay compressed in the store. */
    CU_ASSERT_EQUAL_FATAL(write_tar_gz(path, 2, 0, 2, (size_t)20 << 20), 0);
    CU_ASSERT_EQUAL(req(admin, "POST", "/v1/training-jobs?job=guard-archive", "application/gzip",
                        NULL, 0, path, NULL, &r),
                    201);
    tc_resp_free(&r);
    char conninfo[1024];
    CU_ASSERT_EQUAL_FATAL(rv_testsrv_conninfo(&g_srv, conninfo, sizeof(conninfo)), 0);
    PGconn *c = PQconnectdb(conninfo);
    PGresult *q = PQexec(c, "SELECT count(*), max(octet_length(o.bytes)), min(o.size) FROM "
                            "trace_originals o JOIN traces t ON t.id = o.trace_id WHERE t.job = "
                            "'guard-archive'");
    CU_ASSERT_EQUAL_FATAL(PQresultStatus(q), PGRES_TUPLES_OK);
    long members = strtol(PQgetvalue(q, 0, 0), NULL, 10);
    long stored = strtol(PQgetvalue(q, 0, 1), NULL, 10),
         sent = strtol(PQgetvalue(q, 0, 2), NULL, 10);
    fprintf(stderr, "\n    archive members stored: %ld, at most %ld bytes each for %ld sent",
            members, stored, sent);
    CU_ASSERT_EQUAL(members, 2);
    CU_ASSERT(sent > 20L << 20);
    CU_ASSERT(stored > 0 && stored < 1L << 20);
    PQclear(q);
    PQfinish(c);
    check_alive("an archive");
}

/* -------------------------------------------------------- 6: disk */

static void test_disk(void)
{
    char t[2048];
    tc_resp r;

    rv_testsrv_stop(&srv, SIGTERM);
    /* 1 PiB of reserve: no disk has it. */
    CU_ASSERT_EQUAL_FATAL(start_server("1073741824"), 0);
    small_trace(t, sizeof(t), 0, 1);
    CU_ASSERT_EQUAL(post_json(ing_a, "/v1/traces", t, &r), 507);
    CU_ASSERT(is_error(&r, "insufficient_storage", NULL));
    tc_resp_free(&r);
    /* Reads and what-ifs go on. */
    CU_ASSERT_EQUAL(req(admin, "GET", "/v1/traces", NULL, NULL, 0, NULL, NULL, &r), 200);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(post_json(admin, "/v1/traces/1/whatif", "{}", &r), 200);
    tc_resp_free(&r);
    /* The original inflated would be spooled past the reserve: 507; as
     * stored (gzip) it still comes. */
    char url[96];
    snprintf(url, sizeof(url), "/v1/traces/%ld/original", big_id);
    CU_ASSERT_EQUAL(req(admin, "GET", url, NULL, NULL, 0, NULL, NULL, &r), 507);
    CU_ASSERT(is_error(&r, "insufficient_storage", NULL));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(admin, "GET", url, NULL, NULL, 0, NULL, "Accept-Encoding: gzip", &r), 200);
    CU_ASSERT(r.len > 0 && r.len < 1L << 20);
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(admin, "GET", "/readyz", NULL, NULL, 0, NULL, NULL, &r), 200);
    CU_ASSERT(r.body && strstr(r.body, "\"uploads_accepted\":false"));
    tc_resp_free(&r);
    CU_ASSERT_EQUAL(req(admin, "GET", "/metrics", NULL, NULL, 0, NULL, NULL, &r), 200);
    CU_ASSERT(r.body && strstr(r.body, "reveried_disk_uploads_refused 1"));
    tc_resp_free(&r);
    check_alive("a full disk");
    rv_testsrv_stop(&srv, SIGTERM);
    CU_ASSERT_EQUAL_FATAL(start_server("0"), 0);
}

/* ---------------------------------------------------- 7: hung db */

/* The embedded postmaster's pid (first line of postmaster.pid). */
static pid_t postmaster_pid(void)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/pg/data/postmaster.pid", g_srv.home);
    FILE *f = fopen(path, "r");
    long v = 0;
    if (f && fscanf(f, "%ld", &v) != 1)
        v = 0;
    if (f)
        fclose(f);
    return (pid_t)v;
}

/* Sends sig to the postmaster and each of its children (the backends). */
static int signal_cluster(pid_t pm, int sig)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    if (kill(pm, sig) == 0)
        n++;
    while (d && (de = readdir(d))) {
        char path[300], line[256];
        long pid = strtol(de->d_name, NULL, 10);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/status", pid);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof(line), f))
            if (strncmp(line, "PPid:", 5) == 0 && strtol(line + 5, NULL, 10) == (long)pm &&
                kill((pid_t)pid, sig) == 0)
                n++;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

static void test_hung_db(void)
{
    double took = 0;
    pid_t pm = postmaster_pid();
    CU_ASSERT_FATAL(pm > 0);
    CU_ASSERT_FATAL(signal_cluster(pm, SIGSTOP) > 1);
    int st = raw_get("/v1/traces/1", admin, 8.0, &took);
    fprintf(stderr, "\n    database stopped: GET /v1/traces/1 %d in %.2f s", st, took);
    CU_ASSERT_EQUAL(st, 503);
    CU_ASSERT(took <= 5.5);
    st = raw_get("/readyz", NULL, 8.0, &took);
    fprintf(stderr, ", /readyz %d in %.2f s", st, took);
    CU_ASSERT_EQUAL(st, 503);
    CU_ASSERT(took <= 5.5);
    st = raw_get("/v1/traces", admin, 8.0, &took);
    fprintf(stderr, ", GET /v1/traces %d in %.2f s", st, took);
    CU_ASSERT_EQUAL(st, 503);
    CU_ASSERT(took <= 5.5);
    check_alive("a stopped database");
    signal_cluster(pm, SIGCONT);
    /* Back in service once the database answers again. */
    CU_ASSERT_EQUAL(rv_testsrv_wait(port, "/v1/traces", admin, 200, 30, &srv), 0);
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
    CU_pSuite s = CU_add_suite("store_guard", NULL, NULL);
    CU_add_test(s, "scopes", test_scopes);
    CU_add_test(s, "unusable", test_unusable);
    CU_add_test(s, "original", test_original);
    CU_add_test(s, "archive", test_archive);
    CU_add_test(s, "disk", test_disk);
    CU_add_test(s, "hung_db", test_hung_db);
    unsigned failures = rv_test_run();
    if (rv_testsrv_wait(port, "/healthz", NULL, 200, 5, &srv) != 0) {
        fprintf(stderr, "reveried stopped answering; log in %s\n", g_srv.home);
        failures++;
    }
    suite_clean();
    return failures ? 1 : 0;
}
