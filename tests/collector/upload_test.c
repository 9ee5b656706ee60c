/* Upload, retry and spool against a real HTTP server (libmicrohttpd) on
 * 127.0.0.1 with an ephemeral port; `reverie upload` is driven too. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <microhttpd.h>
#include <zlib.h>

#include "rv_spool.h"
#include "rv_upload.h"
#include "common/rv_test_util.h"

int rv_cmd_upload(int argc, char **argv);

/* --- the test server ------------------------------------------------------ */

#define MAX_SCRIPT 16

static struct server {
    struct MHD_Daemon *d;
    int port;
    int script[MAX_SCRIPT]; /* statuses to answer in order; the last repeats */
    int nscript;
    int requests;
    char job[256], rank[32], encoding[64], ctype[64], auth[256], path[256];
    size_t body_len;
    int body_gzip_json; /* body gunzips to text starting with '{' */
} S;

typedef struct req {
    unsigned char *body;
    size_t len, cap;
} req;

static int gunzip_is_json(const unsigned char *p, size_t n)
{
    z_stream z;
    unsigned char out[64];
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return 0;
    z.next_in = (Bytef *)p;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = sizeof(out);
    int r = inflate(&z, Z_NO_FLUSH);
    inflateEnd(&z);
    return (r == Z_OK || r == Z_STREAM_END) && z.total_out > 0 && out[0] == '{';
}

static void copy_hdr(struct MHD_Connection *c, enum MHD_ValueKind k, const char *name, char *dst,
                     size_t cap)
{
    const char *v = MHD_lookup_connection_value(c, k, name);
    snprintf(dst, cap, "%s", v ? v : "");
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof(*r));
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->len + *upload_size > r->cap) {
            r->cap = (r->len + *upload_size) * 2;
            r->body = realloc(r->body, r->cap);
        }
        memcpy(r->body + r->len, upload, *upload_size);
        r->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    int i = S.requests < S.nscript ? S.requests : S.nscript - 1;
    int status = S.nscript ? S.script[i] : 201;
    S.requests++;
    snprintf(S.path, sizeof(S.path), "%s %s", method, url);
    copy_hdr(c, MHD_GET_ARGUMENT_KIND, "job", S.job, sizeof(S.job));
    copy_hdr(c, MHD_GET_ARGUMENT_KIND, "rank", S.rank, sizeof(S.rank));
    copy_hdr(c, MHD_HEADER_KIND, "Content-Encoding", S.encoding, sizeof(S.encoding));
    copy_hdr(c, MHD_HEADER_KIND, "Content-Type", S.ctype, sizeof(S.ctype));
    copy_hdr(c, MHD_HEADER_KIND, "Authorization", S.auth, sizeof(S.auth));
    S.body_len = r->len;
    S.body_gzip_json = gunzip_is_json(r->body, r->len);
    static char answer[] = "{\"ok\":true}";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(answer), answer, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    req *r = *con_cls;
    if (r) {
        free(r->body);
        free(r);
    }
    *con_cls = NULL;
}

static int server_start(int port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    S.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port,
                           NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                           MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
    if (!S.d)
        return -1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_BIND_PORT);
    S.port = info ? info->port : 0;
    return S.port > 0 ? 0 : -1;
}

static void server_stop(void)
{
    if (S.d)
        MHD_stop_daemon(S.d);
    S.d = NULL;
}

static void script(int n, const int *st)
{
    S.nscript = n;
    memcpy(S.script, st, (size_t)n * sizeof(int));
    S.requests = 0;
}

static char url[64];

static void make_url(int port)
{
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
}

/* A port nothing listens on: bind an ephemeral one, then close it. */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

/* A small gzip Kineto-style body. */
static unsigned char gz[256];
static size_t gz_len;

static void make_body(void)
{
    const char *json = "{\"traceEvents\": []}";
    z_stream z;
    memset(&z, 0, sizeof(z));
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    z.next_in = (Bytef *)json;
    z.avail_in = (uInt)strlen(json);
    z.next_out = gz;
    z.avail_out = sizeof(gz);
    deflate(&z, Z_FINISH);
    gz_len = z.total_out;
    deflateEnd(&z);
}

static char tmpdir[256];

static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    if (!d)
        return -1;
    while ((de = readdir(d))) {
        size_t a = strlen(de->d_name), b = strlen(suffix);
        if (de->d_name[0] != '.' && a >= b && strcmp(de->d_name + a - b, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static rv_upload_opts opts(void)
{
    rv_upload_opts o;
    memset(&o, 0, sizeof(o));
    o.server = url;
    o.token = "s3cret";
    o.max_attempts = 3;
    o.backoff_ms = 10;
    o.timeout_s = 10;
    o.quiet = 1;
    return o;
}

/* --- tests ------------------------------------------------------------------ */

static void test_post_ok(void)
{
    int st[] = {201};
    script(1, st);
    rv_upload_opts o = opts();
    long status = 0;
    rv_error err;
    CU_ASSERT_EQUAL(rv_upload_post(&o, "bert large/1", 5, gz, gz_len, &status, &err), 0);
    CU_ASSERT_EQUAL(status, 201);
    CU_ASSERT_EQUAL(S.requests, 1);
    CU_ASSERT_STRING_EQUAL(S.path, "POST /v1/traces");
    CU_ASSERT_STRING_EQUAL(S.job, "bert large/1");
    CU_ASSERT_STRING_EQUAL(S.rank, "5");
    CU_ASSERT_STRING_EQUAL(S.encoding, "gzip");
    CU_ASSERT_STRING_EQUAL(S.ctype, "application/json");
    CU_ASSERT_STRING_EQUAL(S.auth, "Bearer s3cret");
    CU_ASSERT_EQUAL(S.body_len, gz_len);
    CU_ASSERT(S.body_gzip_json);
    /* 200 counts as success too; no token means no Authorization header. */
    int st2[] = {200};
    script(1, st2);
    o.token = NULL;
    CU_ASSERT_EQUAL(rv_upload_post(&o, NULL, -1, gz, gz_len, &status, &err), 0);
    CU_ASSERT_STRING_EQUAL(S.auth, "");
    CU_ASSERT_STRING_EQUAL(S.rank, "");
}

static void test_retry(void)
{
    rv_upload_opts o = opts();
    long status = 0;
    rv_error err;
    int st[] = {500, 503, 201};
    script(3, st);
    CU_ASSERT_EQUAL(rv_upload_post(&o, "j", 0, gz, gz_len, &status, &err), 0);
    CU_ASSERT_EQUAL(S.requests, 3);
    CU_ASSERT_EQUAL(status, 201);

    int bad[] = {400};
    script(1, bad);
    CU_ASSERT_EQUAL(rv_upload_post(&o, "j", 0, gz, gz_len, &status, &err), RV_ERR_INVALID);
    CU_ASSERT_EQUAL(S.requests, 1); /* a 4xx is not retried */
    CU_ASSERT(strstr(err.message, "400") != NULL);

    int down[] = {500};
    script(1, down);
    o.max_attempts = 2;
    CU_ASSERT_EQUAL(rv_upload_post(&o, "j", 0, gz, gz_len, &status, &err), RV_ERR_IO);
    CU_ASSERT_EQUAL(S.requests, 2); /* bounded */
    CU_ASSERT_EQUAL(status, 500);
}

static void test_spool_names(void)
{
    char path[1024], job[256];
    int rank = 0;
    rv_error err;
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/names", tmpdir);
    CU_ASSERT_EQUAL(rv_spool_write(dir, "a.b/c d%", 12, gz, gz_len, path, sizeof(path), &err), 0);
    CU_ASSERT_EQUAL(rv_spool_parse_name(path, job, sizeof(job), &rank), 0);
    CU_ASSERT_STRING_EQUAL(job, "a.b/c d%");
    CU_ASSERT_EQUAL(rank, 12);
    CU_ASSERT_EQUAL(rv_spool_write(dir, NULL, -1, gz, gz_len, path, sizeof(path), &err), 0);
    CU_ASSERT_EQUAL(rv_spool_parse_name(path, job, sizeof(job), &rank), 0);
    CU_ASSERT_STRING_EQUAL(job, "");
    CU_ASSERT_EQUAL(rank, -1);
    CU_ASSERT(rv_spool_parse_name("trace.json", job, sizeof(job), &rank) < 0);
    CU_ASSERT_EQUAL(count_files(dir, ".json.gz"), 2);
    CU_ASSERT_EQUAL(count_files(dir, ".tmp"), 0);
    /* The bytes on disk are the bytes given. */
    void *data;
    size_t len;
    CU_ASSERT_EQUAL(rv_upload_read_file(path, 1 << 20, &data, &len, &err), 0);
    CU_ASSERT_EQUAL(len, gz_len);
    CU_ASSERT(memcmp(data, gz, gz_len) == 0);
    free(data);
}

/* Server down: the trace is spooled; when it is back, the spool drains and
 * each file is deleted only after a 2xx. */
static void test_down_then_spool(void)
{
    char dir[300], path[1024];
    rv_error err;
    snprintf(dir, sizeof(dir), "%s/spool", tmpdir);
    int real_port = S.port;
    make_url(dead_port());
    rv_upload_opts o = opts();
    o.max_attempts = 2;
    long status = -1;
    CU_ASSERT_EQUAL(rv_upload_post(&o, "jobA", 1, gz, gz_len, &status, &err), RV_ERR_IO);
    CU_ASSERT_EQUAL(status, 0);
    CU_ASSERT_EQUAL(rv_spool_write(dir, "jobA", 1, gz, gz_len, path, sizeof(path), &err), 0);
    CU_ASSERT_EQUAL(rv_spool_write(dir, "jobB", 2, gz, gz_len, path, sizeof(path), &err), 0);
    rv_spool_result res;
    CU_ASSERT_EQUAL(rv_spool_send_all(dir, &o, &res, &err), RV_ERR_IO);
    CU_ASSERT_EQUAL(res.sent, 0);
    CU_ASSERT_EQUAL(count_files(dir, ".json.gz"), 2); /* nothing lost */
    CU_ASSERT_EQUAL(count_files(dir, ".claim"), 0);

    /* Back up but failing: still nothing deleted. */
    make_url(real_port);
    o = opts();
    o.max_attempts = 1;
    int fail[] = {503};
    script(1, fail);
    CU_ASSERT_EQUAL(rv_spool_send_all(dir, &o, &res, &err), RV_ERR_IO);
    CU_ASSERT_EQUAL(count_files(dir, ".json.gz"), 2);

    /* Healthy: both go, with job and rank recovered from the names. */
    int ok[] = {201};
    script(1, ok);
    CU_ASSERT_EQUAL(rv_spool_send_all(dir, &o, &res, &err), 0);
    CU_ASSERT_EQUAL(res.sent, 2);
    CU_ASSERT_EQUAL(S.requests, 2);
    CU_ASSERT(strcmp(S.job, "jobA") == 0 || strcmp(S.job, "jobB") == 0);
    CU_ASSERT(strcmp(S.rank, "1") == 0 || strcmp(S.rank, "2") == 0);
    CU_ASSERT_EQUAL(count_files(dir, ".json.gz"), 0);
}

/* A claim left by a dead sender is taken over; a live one's is left alone. */
static void test_stale_claim(void)
{
    char dir[300], path[1024], claim[1200];
    rv_error err;
    snprintf(dir, sizeof(dir), "%s/claims", tmpdir);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0); /* now a pid that is not running */
    CU_ASSERT_EQUAL(rv_spool_write(dir, "dead", 0, gz, gz_len, path, sizeof(path), &err), 0);
    snprintf(claim, sizeof(claim), "%s.%d.claim", path, (int)child);
    CU_ASSERT_EQUAL(rename(path, claim), 0);
    CU_ASSERT_EQUAL(rv_spool_write(dir, "live", 0, gz, gz_len, path, sizeof(path), &err), 0);
    snprintf(claim, sizeof(claim), "%s.%d.claim", path, (int)getppid());
    CU_ASSERT_EQUAL(rename(path, claim), 0);
    int ok[] = {201};
    script(1, ok);
    rv_upload_opts o = opts();
    rv_spool_result res;
    CU_ASSERT_EQUAL(rv_spool_send_all(dir, &o, &res, &err), 0);
    CU_ASSERT_EQUAL(res.sent, 1);
    CU_ASSERT_STRING_EQUAL(S.job, "dead");
    CU_ASSERT_EQUAL(count_files(dir, ".claim"), 1);
    unlink(claim);
}

static void test_cli(void)
{
    char dir[300], path[1024], file[400];
    rv_error err;
    snprintf(dir, sizeof(dir), "%s/cli", tmpdir);
    CU_ASSERT_EQUAL(rv_spool_write(dir, "cli-job", 4, gz, gz_len, path, sizeof(path), &err), 0);
    int ok[] = {201};
    script(1, ok);
    char *a1[] = {"upload", "--spool", dir, "--server", url, "--token", "t0k", NULL};
    CU_ASSERT_EQUAL(rv_cmd_upload(7, a1), 0);
    CU_ASSERT_EQUAL(S.requests, 1);
    CU_ASSERT_STRING_EQUAL(S.job, "cli-job");
    CU_ASSERT_STRING_EQUAL(S.auth, "Bearer t0k");
    CU_ASSERT_EQUAL(count_files(dir, ".json.gz"), 0);

    snprintf(file, sizeof(file), "%s/trace.json.gz", tmpdir);
    CU_ASSERT_EQUAL(rv_spool_write_file(file, gz, gz_len, &err), 0);
    script(1, ok);
    char *a2[] = {"upload", file, "--job", "J2", "--rank", "3", "--server", url, NULL};
    CU_ASSERT_EQUAL(rv_cmd_upload(8, a2), 0);
    CU_ASSERT_STRING_EQUAL(S.job, "J2");
    CU_ASSERT_STRING_EQUAL(S.rank, "3");
    CU_ASSERT_STRING_EQUAL(S.encoding, "gzip");

    int bad[] = {500};
    script(1, bad);
    char *a3[] = {"upload", file, "--server", url, "--attempts", "2", NULL};
    CU_ASSERT_EQUAL(rv_cmd_upload(6, a3), 1);
    CU_ASSERT_EQUAL(S.requests, 2);
    CU_ASSERT_STRING_EQUAL(S.job, "trace"); /* default job: the file name less .json.gz */

    char *a4[] = {"upload", NULL};
    CU_ASSERT_EQUAL(rv_cmd_upload(1, a4), 2);
    char *a5[] = {"upload", "--bogus", "x", NULL};
    CU_ASSERT_EQUAL(rv_cmd_upload(3, a5), 2);
    unlink(file);
}

int main(void)
{
    if (!rv_upload_available()) {
        printf("SKIP: built without libcurl\n");
        return 77;
    }
    snprintf(tmpdir, sizeof(tmpdir), "%s/rv_upload_test_XXXXXX", P_tmpdir);
    if (!mkdtemp(tmpdir) || server_start(0) != 0) {
        fprintf(stderr, "cannot start the test server\n");
        return 1;
    }
    make_url(S.port);
    make_body();
    unsetenv("REVERIE_SERVER");
    unsetenv("REVERIE_TOKEN");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("collector_upload", NULL, NULL);
    CU_add_test(s, "POST with headers, job, rank, token", test_post_ok);
    CU_add_test(s, "retry 5xx, stop on 4xx, bounded", test_retry);
    CU_add_test(s, "spool names round-trip, atomic files", test_spool_names);
    CU_add_test(s, "server down -> spool -> resend", test_down_then_spool);
    CU_add_test(s, "stale claims are taken over", test_stale_claim);
    CU_add_test(s, "reverie upload (files and --spool)", test_cli);
    unsigned failures = rv_test_run();
    server_stop();
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return failures ? 1 : 0;
}
